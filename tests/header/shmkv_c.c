/* Compiles <shmkv.h> alone as strict C11 (-std=c11 -pedantic, no _GNU_SOURCE)
 * and exercises enough of it that every inline function is type-checked. */
#include <shmkv.h>

int header_test_shmkv_c(char *why, size_t why_len);

int header_test_shmkv_c(char *why, size_t why_len)
{
	shmkv *db = NULL;
	int err = shmkv_open_file_diag("/nonexistent/shmkv-header-test", 0, &db, why, why_len);
	if (db)
		shmkv_close(db);
	/* reference the rest of the API so it is compiled for real */
	int (*get)(const shmkv *, const void *, size_t, shmkv_value *) = shmkv_get;
	int (*get_i64)(const shmkv *, const void *, size_t, int64_t *) = shmkv_get_i64;
	int (*get_f64)(const shmkv *, const void *, size_t, double *) = shmkv_get_f64;
	int (*get_bool)(const shmkv *, const void *, size_t, bool *) = shmkv_get_bool;
	int (*get_str)(const shmkv *, const void *, size_t, const char **, size_t *) = shmkv_get_str;
	int (*get_bytes)(const shmkv *, const void *, size_t, const void **, size_t *) =
		shmkv_get_bytes;
	int (*get_f32)(const shmkv *, const void *, size_t, const float **, size_t *) =
		shmkv_get_f32list;
	int (*get_f64l)(const shmkv *, const void *, size_t, const double **, size_t *) =
		shmkv_get_f64list;
	int (*get_i64l)(const shmkv *, const void *, size_t, const int64_t **, size_t *) =
		shmkv_get_i64list;
	int (*get_sl)(const shmkv *, const void *, size_t, shmkv_strlist *) = shmkv_get_strlist;
	int (*next)(shmkv_iter *, const void **, size_t *, shmkv_value *) = shmkv_iter_next;
	void (*init)(const shmkv *, shmkv_iter *) = shmkv_iter_init;
	int (*verify)(const shmkv *, char *, size_t) = shmkv_verify;
	int (*check)(const void *, uint64_t, unsigned, char *, size_t) = shmkv_image_check;
	const char *(*at)(const shmkv_strlist *, size_t, size_t *) = shmkv_strlist_at;
	size_t (*count)(const shmkv_strlist *) = shmkv_strlist_count;
	const shmkv_image_header *(*hdr)(const shmkv *) = shmkv_header;
	int (*open)(const char *, unsigned, shmkv **) = shmkv_open_file;
	int (*vstr)(const shmkv_value *, shmkv_strlist *) = shmkv_value_strlist;
	const void *fns[] = {(const void *)(uintptr_t)get,     (const void *)(uintptr_t)get_i64,
			     (const void *)(uintptr_t)get_f64, (const void *)(uintptr_t)get_bool,
			     (const void *)(uintptr_t)get_str, (const void *)(uintptr_t)get_bytes,
			     (const void *)(uintptr_t)get_f32, (const void *)(uintptr_t)get_f64l,
			     (const void *)(uintptr_t)get_i64l, (const void *)(uintptr_t)get_sl,
			     (const void *)(uintptr_t)next,    (const void *)(uintptr_t)init,
			     (const void *)(uintptr_t)verify,  (const void *)(uintptr_t)check,
			     (const void *)(uintptr_t)at,      (const void *)(uintptr_t)count,
			     (const void *)(uintptr_t)hdr,     (const void *)(uintptr_t)open,
			     (const void *)(uintptr_t)vstr};
	for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
		if (!fns[i])
			return -1;
	if (sizeof(shmkv_image_header) != SHMKV_HEADER_USED || !shmkv_vector_name()[0] ||
	    !shmkv_type_name(SHMKV_TYPE_STRLIST)[0] || !shmkv_strerror(SHMKV_ECORRUPT)[0])
		return -1;
	return err;
}
