// Compiles <shmkv.h> alone as C++17 (-pedantic).
#include <shmkv.h>

#include <cstddef>

int header_test_shmkv_cxx(char *why, size_t why_len);

int header_test_shmkv_cxx(char *why, size_t why_len)
{
	shmkv *db = nullptr;
	int err = shmkv_open_file_diag("/nonexistent/shmkv-header-test", 0, &db, why, why_len);
	shmkv_close(db);
	static_assert(sizeof(shmkv_image_header) == SHMKV_HEADER_USED, "header");
	static_assert(SHMKV_TYPE_MAX == SHMKV_TYPE_STRLIST, "types");
	// the documented signatures, checked by the compiler
	int (*get_sl)(const shmkv *, const void *, size_t, shmkv_strlist *) = shmkv_get_strlist;
	int (*next)(shmkv_iter *, const void **, size_t *, shmkv_value *) = shmkv_iter_next;
	int (*verify)(const shmkv *, char *, size_t) = shmkv_verify;
	int (*get_f32)(const shmkv *, const void *, size_t, const float **, size_t *) =
		shmkv_get_f32list;
	const char *(*at)(const shmkv_strlist *, size_t, size_t *) = shmkv_strlist_at;
	int (*get_bool)(const shmkv *, const void *, size_t, bool *) = shmkv_get_bool;
	int (*ctl_open)(const char *, const char *, unsigned, shmkv_ctl **, char *, size_t) =
		shmkv_ctl_open;
	int (*ctl_read)(const shmkv_ctl *, shmkv_ctl *) = shmkv_ctl_read;
	int (*ctl_pub)(shmkv_ctl *, uint64_t, const shmkv_ctl_segment *, uint32_t, uint64_t,
		       int64_t) = shmkv_ctl_publish;
	int (*entry_at)(const shmkv *, uint64_t, shmkv_entry *, char *, size_t) = shmkv_entry_at;
	int (*vcheck)(unsigned, const void *, uint64_t, char *, size_t) = shmkv_value_check;
	uint64_t (*key_hash)(uint64_t, unsigned, const void *, size_t) = shmkv_key_hash;
	if (!get_sl || !next || !verify || !get_f32 || !at || !get_bool || !ctl_open || !ctl_read ||
	    !ctl_pub || !entry_at || !vcheck || !key_hash)
		return -1;
	if (!shmkv_vector_name()[0] || !shmkv_type_name(SHMKV_TYPE_I64)[0] ||
	    !shmkv_errname(SHMKV_EPROTO)[0] || shmkv_name_check("ok") != 0)
		return -1;
	return err;
}
