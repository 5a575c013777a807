/* ab_side.c - one side of lib_ab: the reader of the lib/ tree this file is
 * compiled against (-I TREE/lib), under the names open_SIDE and run_SIDE
 * (-DSIDE=old or new), so that two trees' readers live in one program. */
#include <shmkv.h>

#define AB_CAT2(a, b) a##b
#define AB_CAT(a, b) AB_CAT2(a, b)

/* The image at path, opened as lookup_bench opens it (populated, checksums
 * checked); NULL with why filled on failure. */
void *AB_CAT(open_, SIDE)(const char *path, char *why, size_t why_len)
{
	shmkv *db = NULL;
	return shmkv_open_file_diag(path, SHMKV_OPEN_POPULATE, &db, why, why_len) ? NULL : db;
}

void AB_CAT(close_, SIDE)(void *db)
{
	shmkv_close(db);
}

/* n gets of keys (data, len pairs) by shmkv_get (batch 0) or by
 * shmkv_get_batch 64 keys a call (batch 1); each hit's first value byte
 * summed into *sum (what lookup_bench's "uniform" reads); returns the hits. */
size_t AB_CAT(run_, SIDE)(void *db, const void *keys, size_t n, int batch, unsigned long *sum)
{
	const shmkv_key *ks = keys;
	shmkv_value vs[64];
	int errs[64];
	size_t hits = 0;
	unsigned long s = 0;
	for (size_t i = 0; i < n; i += 64) {
		const size_t m = n - i < 64 ? n - i : 64;
		if (batch)
			shmkv_get_batch(db, ks + i, m, vs, errs);
		else
			for (size_t j = 0; j < m; j++)
				errs[j] = shmkv_get(db, ks[i + j].data, ks[i + j].len, &vs[j]);
		for (size_t j = 0; j < m; j++) {
			if (errs[j])
				continue;
			hits++;
			if (vs[j].size)
				s += ((const unsigned char *)vs[j].data)[0];
		}
	}
	*sum = s;
	return hits;
}
