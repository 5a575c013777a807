/* shmkv_bpf.h - a shmkv cache read from eBPF programs.
 *
 * shmkv-loader exports a cache (`shmctl bpf export NAME`, or `bpf = yes` in
 * its [cache NAME] section) to a pinned BPF map, /sys/fs/bpf/shmkv/NAME.
 * This header is the layout of that map (the ABI between the loader and BPF
 * programs) and, compiled for BPF (clang -target bpf), the lookup a program
 * calls. In user space it gives the layout only (the loader and tests use it).
 *
 * Contents
 *   SHMKV_BPF_KEY_MAX       longest key exported (60 bytes)
 *   struct shmkv_bpf_key    a key as the map stores it: length, bytes, zeros
 *   struct shmkv_bpf_value  a value: length, shmkv type, bytes
 *   SHMKV_BPF_VALUE_SIZE(n) the map's value size for an export's --max-value n
 *   SHMKV_BPF_TABLE(name)   (BPF) declares the table a program reads
 *   shmkv_bpf_key_set()     (BPF) fills a key from bytes, bounded loop
 *   shmkv_bpf_lookup()      (BPF) the current generation's value of a key
 *
 * The map: a BPF_MAP_TYPE_ARRAY_OF_MAPS with one slot (key 0), holding the
 * current generation's BPF_MAP_TYPE_HASH (key struct shmkv_bpf_key, value
 * struct shmkv_bpf_value of SHMKV_BPF_VALUE_SIZE(max_value) bytes, exactly as
 * many entries as were exported). A new generation is a new inner hash map,
 * filled completely, then put into the slot by one map update: a program that
 * looked the slot up sees one generation for the rest of its run, never a mix
 * (the kernel frees the old inner map once no program holds it any more).
 *
 * Limits
 *   - keys of 0..SHMKV_BPF_KEY_MAX bytes; longer keys are not exported
 *     (counted as key_too_long in `shmctl bpf status`);
 *   - values of at most the export's max_value bytes (default 256, at most
 *     SHMKV_BPF_VALUE_LIMIT); larger ones are counted as value_too_big;
 *   - an export with --prefix P holds only the keys that start with P (the
 *     others are counted as not_under_prefix); keys keep the prefix;
 *   - entries that expire (format v2, FORMAT.md §17.6) are not exported: a
 *     map cannot drop them at their expiry (counted as expiring);
 *   - value bytes are the reader's shmkv_value bytes (lib/shmkv/get.h):
 *     strings and bytes without the NUL, i64/f64 as 8 little-endian bytes,
 *     bool as one byte, lists as their packed array (strlists: their encoded
 *     form, FORMAT.md); `type` is enum shmkv_type.
 *   - a program compiled with SHMKV_BPF_VALUE_MAX larger than the export's
 *     max_value (rounded up to 8) is refused by the verifier (it would read past
 *     the value); define it to the export's max_value before including this
 *     header (default 256, the default export).
 *   - kernel: map-in-map 4.12, bounded loops 5.3; the example's
 *     bpf_xdp_load_bytes/store_bytes 5.18. Loader: batch updates 5.6 (one
 *     update per entry on older kernels).
 */
#ifndef SHMKV_BPF_H
#define SHMKV_BPF_H

#include <linux/types.h>

#define SHMKV_BPF_KEY_MAX 60
/* the largest max_value an export takes */
#define SHMKV_BPF_VALUE_LIMIT 4096
#define SHMKV_BPF_DEFAULT_VALUE_MAX 256
#ifndef SHMKV_BPF_VALUE_MAX
#define SHMKV_BPF_VALUE_MAX SHMKV_BPF_DEFAULT_VALUE_MAX
#endif

/* A key: len bytes of data, the rest zero (the map hashes all 64 bytes). */
struct shmkv_bpf_key {
	__u32 len;
	__u8 data[SHMKV_BPF_KEY_MAX];
};

/* A value; the map's value size is SHMKV_BPF_VALUE_SIZE(max_value). */
struct shmkv_bpf_value {
	__u32 len;  /* bytes of data */
	__u32 type; /* enum shmkv_type (lib/shmkv/format.h) */
	__u8 data[SHMKV_BPF_VALUE_MAX];
};

#define SHMKV_BPF_VALUE_HDR 8u
#define SHMKV_BPF_VALUE_SIZE(max) (SHMKV_BPF_VALUE_HDR + (((__u32)(max) + 7u) & ~7u))

#if defined(__bpf__)
#include <bpf/bpf_helpers.h>

/* The table of one cache; a program's loader points it at the pinned map
 * (libbpf: bpf_map__reuse_fd() with the fd of bpf_obj_get("/sys/fs/bpf/shmkv/NAME")).
 * Sizes rather than types for the inner map: clang 14 leaves structs met
 * only inside __array() as BTF forward declarations, which libbpf 1.1 refuses. */
#define SHMKV_BPF_TABLE(name)                                                                      \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);                                          \
		__uint(max_entries, 1);                                                            \
		__type(key, __u32);                                                                \
		__array(values, struct {                                                           \
			__uint(type, BPF_MAP_TYPE_HASH);                                           \
			__uint(max_entries, 1);                                                    \
			__uint(key_size, sizeof(struct shmkv_bpf_key));                            \
			__uint(value_size, sizeof(struct shmkv_bpf_value));                        \
		});                                                                                \
	} name SEC(".maps")

/* Fills k from len bytes at src (stack or map memory with at least
 * SHMKV_BPF_KEY_MAX readable bytes). Returns 0, or -1 when len is over
 * SHMKV_BPF_KEY_MAX (no such key is exported). The loop is bounded by
 * SHMKV_BPF_KEY_MAX whatever len is. */
static __always_inline int shmkv_bpf_key_set(struct shmkv_bpf_key *k, const void *src, __u32 len)
{
	const __u8 *s = (const __u8 *)src;
	__builtin_memset(k, 0, sizeof *k);
	if (len > SHMKV_BPF_KEY_MAX)
		return -1;
	/* every byte of src is read and those past len masked off: a loop
	 * that stopped at len would be turned into a memcpy call by clang,
	 * which BPF does not have */
#pragma unroll
	for (__u32 i = 0; i < SHMKV_BPF_KEY_MAX; i++)
		k->data[i] = s[i] & (__u8)-(__u8)(i < len);
	k->len = len;
	return 0;
}

/* The value of key k (filled by shmkv_bpf_key_set or zero-padded by the
 * caller) in the generation now in table, or NULL (not exported, or nothing
 * exported yet). The pointer stays valid for the rest of the program's run;
 * read at most value->len bytes, and never more than SHMKV_BPF_VALUE_MAX. */
static __always_inline const struct shmkv_bpf_value *shmkv_bpf_lookup(void *table,
								      const struct shmkv_bpf_key *k)
{
	__u32 zero = 0;
	void *inner = bpf_map_lookup_elem(table, &zero);
	if (!inner)
		return (const struct shmkv_bpf_value *)0;
	return (const struct shmkv_bpf_value *)bpf_map_lookup_elem(inner, k);
}
#endif /* __bpf__ */

#endif /* SHMKV_BPF_H */
