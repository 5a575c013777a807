/* xdp_get.bpf.c - XDP: answer a UDP "GET key" packet from a shmkv cache
 * exported to BPF (shmctl bpf export NAME), without user space.
 *
 * Request: an IPv4 UDP datagram to port SHMKV_XDP_PORT (7070) whose payload
 * is "GET " followed by the key (a trailing "\n" is not part of the key).
 * Reply, sent back out of the same interface (XDP_TX) with addresses and
 * ports swapped: "HIT " and the value bytes (lib/shmkv_bpf.h says what they
 * are per type), or "MISS" (not in the exported table: absent, under no
 * export, or over the export's limits). Anything else is passed on (XDP_PASS).
 * The UDP checksum of a reply is 0 (none, as IPv4 allows).
 *
 * Kernel: bpf_xdp_load_bytes / bpf_xdp_store_bytes (Linux 5.18),
 * bpf_xdp_adjust_tail (4.18), map-in-map (4.12). Build:
 *   clang -target bpf -O2 -g -I lib -I /usr/include/$(gcc -print-multiarch) \
 *         -c examples/bpf/xdp_get.bpf.c -o xdp_get.bpf.o
 * (meson builds it as build/examples/bpf/xdp_get.bpf.o.) Load it with
 * shmkv-xdp-get (xdp_get_user.c here), which points `table` at the pin. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include <shmkv_bpf.h>

#ifndef SHMKV_XDP_PORT
#define SHMKV_XDP_PORT 7070
#endif

SHMKV_BPF_TABLE(table);

#define HDRS_ (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))

static __always_inline __u16 ip_csum(const struct iphdr *ip)
{
	const __u16 *w = (const __u16 *)ip;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < (int)(sizeof *ip / 2); i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

SEC("xdp")
int shmkv_xdp_get(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 ||
	    ip->protocol != IPPROTO_UDP || (ip->frag_off & bpf_htons(0x3fff)) ||
	    udp->dest != bpf_htons(SHMKV_XDP_PORT))
		return XDP_PASS;
	__u32 ulen = bpf_ntohs(udp->len);
	if (ulen < sizeof *udp + 4 || (void *)udp + ulen > end)
		return XDP_PASS;
	__u32 plen = ulen - sizeof *udp;
	char get[4];
	if (bpf_xdp_load_bytes(ctx, HDRS_, get, 4) || get[0] != 'G' || get[1] != 'E' ||
	    get[2] != 'T' || get[3] != ' ')
		return XDP_PASS;
	__u32 klen = plen - 4;
	if (klen) {
		char last;
		if (bpf_xdp_load_bytes(ctx, HDRS_ + plen - 1, &last, 1))
			return XDP_PASS;
		if (last == '\n')
			klen--;
	}

	const struct shmkv_bpf_value *v = 0;
	if (klen <= SHMKV_BPF_KEY_MAX) {
		__u8 buf[SHMKV_BPF_KEY_MAX] = {0};
		struct shmkv_bpf_key k;
		/* the helper takes 1..60 bytes, and the verifier must see both bounds
		 * on the register passed: klen - 1 is checked and m + 1 passed, and
		 * the empty asm keeps clang from passing klen's own register,
		 * whose lower bound the verifier does not know */
		__u64 m = (__u64)klen - 1;
		asm volatile("" : "+r"(m));
		if (m < SHMKV_BPF_KEY_MAX && bpf_xdp_load_bytes(ctx, HDRS_ + 4, buf, m + 1))
			return XDP_PASS;
		if (shmkv_bpf_key_set(&k, buf, klen) == 0)
			v = shmkv_bpf_lookup(&table, &k);
	}
	__u32 vlen = 0;
	if (v) {
		vlen = v->len;
		if (vlen > SHMKV_BPF_VALUE_MAX) /* cannot be: the map's value size bounds it */
			return XDP_ABORTED;
	}
	__u32 rlen = 4 + vlen; /* the reply's payload */
	if (bpf_xdp_adjust_tail(ctx, (int)rlen - (int)plen))
		return XDP_ABORTED;
	if (bpf_xdp_store_bytes(ctx, HDRS_, v ? "HIT " : "MISS", 4))
		return XDP_ABORTED;
	if (vlen && bpf_xdp_store_bytes(ctx, HDRS_ + 4, (void *)v->data, vlen))
		return XDP_ABORTED;

	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	ip = (void *)(eth + 1);
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end)
		return XDP_ABORTED;
	unsigned char mac[ETH_ALEN];
	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	__be32 a = ip->saddr;
	ip->saddr = ip->daddr;
	ip->daddr = a;
	ip->tot_len = bpf_htons((__u16)(sizeof *ip + sizeof *udp + rlen));
	ip->ttl = 64;
	ip->check = 0;
	ip->check = ip_csum(ip);
	__be16 p = udp->source;
	udp->source = udp->dest;
	udp->dest = p;
	udp->len = bpf_htons((__u16)(sizeof *udp + rlen));
	udp->check = 0;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Apache-2.0"; /* the project's; it uses no GPL-only helper */
