/* lookup.bpf.c - the BPF side of bpf_bench: lookups in an exported table
 * over a set of keys, one key per run. BPF_PROG_TEST_RUN's repeat reruns a
 * program on the same packet, so the key comes from `keys` (filled by
 * bpf_bench), the next one each run (a per-CPU counter): the runs walk the
 * table as traffic would, rather than one hot entry.
 *   floor   takes the next key, looks nothing up (the cost around a lookup)
 *   lookup  takes the next key and calls shmkv_bpf_lookup(); counts hits
 * lookup - floor is the lookup itself. */
#include <linux/bpf.h>

#include <bpf/bpf_helpers.h>

#include <shmkv_bpf.h>

#define NKEYS 4096

SHMKV_BPF_TABLE(table);

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NKEYS);
	__type(key, __u32);
	__type(value, struct shmkv_bpf_key);
} keys SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); /* 0: the next key, 1: hits */
	__type(key, __u32);
	__type(value, __u64);
} ctr SEC(".maps");

static __always_inline const struct shmkv_bpf_key *next_key(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&ctr, &zero);
	if (!n)
		return 0;
	__u32 i = (__u32)(*n)++ % NKEYS;
	return bpf_map_lookup_elem(&keys, &i);
}

SEC("xdp")
int floor_only(struct xdp_md *ctx)
{
	(void)ctx;
	const struct shmkv_bpf_key *k = next_key();
	return k && k->len ? XDP_DROP : XDP_PASS;
}

SEC("xdp")
int lookup(struct xdp_md *ctx)
{
	(void)ctx;
	const struct shmkv_bpf_key *k = next_key();
	if (!k)
		return XDP_ABORTED;
	if (!shmkv_bpf_lookup(&table, k))
		return XDP_PASS;
	__u32 one = 1;
	__u64 *h = bpf_map_lookup_elem(&ctr, &one);
	if (h)
		(*h)++;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Apache-2.0";
