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
	/* errors.h, ctl.h, attach.h, tools.h */
	const char *(*errname)(int) = shmkv_errname;
	int (*name_check)(const char *) = shmkv_name_check;
	const char *(*ctl_root)(const char *) = shmkv_ctl_root;
	int (*ctl_path)(const char *, const char *, char *, size_t) = shmkv_ctl_path;
	void (*ctl_init)(shmkv_ctl *) = shmkv_ctl_init;
	int (*ctl_open)(const char *, const char *, unsigned, shmkv_ctl **, char *, size_t) =
		shmkv_ctl_open;
	void (*ctl_close)(const shmkv_ctl *) = shmkv_ctl_close;
	int (*ctl_read)(const shmkv_ctl *, shmkv_ctl *) = shmkv_ctl_read;
	uint64_t (*ctl_gen)(const shmkv_ctl *) = shmkv_ctl_generation;
	int (*ctl_mid)(const shmkv_ctl *) = shmkv_ctl_mid_update;
	int (*ctl_pub)(shmkv_ctl *, uint64_t, const shmkv_ctl_segment *, uint32_t, uint64_t,
		       int64_t) = shmkv_ctl_publish;
	int (*attach)(const char *, unsigned, shmkv **) = shmkv_attach;
	int (*attach_diag)(const char *, const char *, unsigned, shmkv **, char *, size_t) =
		shmkv_attach_diag;
	int (*attach_node)(const char *, const char *, int, unsigned, shmkv **, char *, size_t) =
		shmkv_attach_node;
	int (*node)(const shmkv *) = shmkv_node;
	int (*refresh)(shmkv *) = shmkv_refresh;
	uint64_t (*generation)(const shmkv *) = shmkv_generation;
	uint64_t (*key_hash)(uint64_t, unsigned, const void *, size_t) = shmkv_key_hash;
	uint64_t (*home)(uint64_t, uint64_t) = shmkv_home_bucket;
	uint64_t (*tag)(uint64_t) = shmkv_key_tag;
	unsigned (*dir_entry)(uint64_t, unsigned) = shmkv_dir_entry;
	unsigned (*dir_end)(unsigned) = shmkv_dir_end;
	unsigned (*rec_span)(unsigned, unsigned, unsigned, unsigned, unsigned *, unsigned *) =
		shmkv_record_span;
	int (*rec_at)(const uint8_t *, unsigned, shmkv_record *) = shmkv_record_at;
	unsigned (*rec_tag)(const uint8_t *, unsigned) = shmkv_record_tag_bits;
	unsigned (*filter)(uint64_t) = shmkv_filter_index;
	int (*align8)(unsigned) = shmkv_type_align8;
	uint64_t (*vpos)(const shmkv_entry_header *) = shmkv_entry_value_pos;
	int (*vcheck)(unsigned, const void *, uint64_t, char *, size_t) = shmkv_value_check;
	const char *(*secname)(uint32_t) = shmkv_section_name;
	int (*entry_at)(const shmkv *, uint64_t, shmkv_entry *, char *, size_t) = shmkv_entry_at;
	uint64_t (*disp)(const uint8_t *, uint64_t, uint32_t) = shmkv_bucket_displacement;
	int (*find)(const shmkv *, const void *, size_t, uint64_t *, uint32_t *) = shmkv_find_record;
	int (*zero)(const shmkv *, uint64_t, uint64_t, const char *, char *, size_t) =
		shmkv_zero_check;
	int (*utf8)(const void *, size_t) = shmkv_utf8_valid;
	size_t (*utf8_len)(const void *, size_t) = shmkv_utf8_seq_len;
	void (*init_all)(const shmkv *, shmkv_iter *) = shmkv_iter_init_all;
	uint32_t (*iter_exp)(const shmkv_iter *) = shmkv_iter_expires;
	int (*get_exp)(const shmkv *, const void *, size_t, uint32_t *) = shmkv_get_expires;
	void (*set_clock)(shmkv *, int64_t) = shmkv_set_clock;
	int (*get_diag)(const shmkv *, const void *, size_t, shmkv_value *, char *, size_t) =
		shmkv_get_diag;
	size_t (*batch)(const shmkv *, const shmkv_key *, size_t, shmkv_value *, int *) =
		shmkv_get_batch;
	const shmkv_type_desc *(*tdesc)(unsigned) = shmkv_type_desc_of;
	unsigned (*tbyname)(const char *) = shmkv_type_by_name;
	int (*bind)(shmkv *, const void *, uint64_t, unsigned, char *, size_t) = shmkv_bind_mem;
	const void *fns[] = {(const void *)(uintptr_t)get,     (const void *)(uintptr_t)get_i64,
			     (const void *)(uintptr_t)get_f64, (const void *)(uintptr_t)get_bool,
			     (const void *)(uintptr_t)get_str, (const void *)(uintptr_t)get_bytes,
			     (const void *)(uintptr_t)get_f32, (const void *)(uintptr_t)get_f64l,
			     (const void *)(uintptr_t)get_i64l, (const void *)(uintptr_t)get_sl,
			     (const void *)(uintptr_t)next,    (const void *)(uintptr_t)init,
			     (const void *)(uintptr_t)verify,  (const void *)(uintptr_t)check,
			     (const void *)(uintptr_t)at,      (const void *)(uintptr_t)count,
			     (const void *)(uintptr_t)hdr,     (const void *)(uintptr_t)open,
			     (const void *)(uintptr_t)vstr,
			     (const void *)(uintptr_t)errname, (const void *)(uintptr_t)name_check,
			     (const void *)(uintptr_t)ctl_root, (const void *)(uintptr_t)ctl_path,
			     (const void *)(uintptr_t)ctl_init, (const void *)(uintptr_t)ctl_open,
			     (const void *)(uintptr_t)ctl_close, (const void *)(uintptr_t)ctl_read,
			     (const void *)(uintptr_t)ctl_gen, (const void *)(uintptr_t)ctl_mid,
			     (const void *)(uintptr_t)ctl_pub, (const void *)(uintptr_t)attach,
			     (const void *)(uintptr_t)attach_diag, (const void *)(uintptr_t)refresh,
			     (const void *)(uintptr_t)attach_node, (const void *)(uintptr_t)node,
			     (const void *)(uintptr_t)generation, (const void *)(uintptr_t)key_hash,
			     (const void *)(uintptr_t)home, (const void *)(uintptr_t)tag,
			     (const void *)(uintptr_t)dir_entry, (const void *)(uintptr_t)dir_end,
			     (const void *)(uintptr_t)rec_span, (const void *)(uintptr_t)rec_at,
			     (const void *)(uintptr_t)rec_tag, (const void *)(uintptr_t)filter,
			     (const void *)(uintptr_t)align8, (const void *)(uintptr_t)vpos,
			     (const void *)(uintptr_t)vcheck, (const void *)(uintptr_t)secname,
			     (const void *)(uintptr_t)entry_at, (const void *)(uintptr_t)disp,
			     (const void *)(uintptr_t)find,    (const void *)(uintptr_t)zero,
			     (const void *)(uintptr_t)utf8,    (const void *)(uintptr_t)bind,
			     (const void *)(uintptr_t)utf8_len, (const void *)(uintptr_t)init_all,
			     (const void *)(uintptr_t)iter_exp, (const void *)(uintptr_t)get_exp,
			     (const void *)(uintptr_t)set_clock, (const void *)(uintptr_t)get_diag,
			     (const void *)(uintptr_t)batch,   (const void *)(uintptr_t)tdesc,
			     (const void *)(uintptr_t)tbyname};
	for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
		if (!fns[i])
			return -1;
	if (sizeof(shmkv_image_header) != SHMKV_HEADER_USED || !shmkv_vector_name()[0] ||
	    !shmkv_type_name(SHMKV_TYPE_STRLIST)[0] || !shmkv_strerror(SHMKV_ECORRUPT)[0] ||
	    !shmkv_errname(-ENOENT)[0])
		return -1;
	return err;
}

/* A caller that batches one key: GCC -O2 propagates n = 1 into the batch and
 * once warned (-Wmaybe-uninitialized) about the hash of a key that the
 * checked path takes; with -Werror that broke a user's build. */
size_t header_test_batch_one(const shmkv *db, const char *key, size_t len, shmkv_value *v,
			     int *err);

size_t header_test_batch_one(const shmkv *db, const char *key, size_t len, shmkv_value *v,
			     int *err)
{
	shmkv_key k = {key, len};
	return shmkv_get_batch(db, &k, 1, v, err);
}
