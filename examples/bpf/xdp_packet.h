/* xdp_packet.h - the packets of xdp_get.bpf.c's protocol, built and read in
 * user space: a UDP "GET key" request (Ethernet, IPv4, UDP) and its reply.
 * Used by shmkv-xdp-get query and tests/bpf (C and C++). */
#ifndef SHMKV_XDP_PACKET_H
#define SHMKV_XDP_PACKET_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>

#define XDP_PACKET_PORT 7070 /* SHMKV_XDP_PORT of xdp_get.bpf.c */
#define XDP_PACKET_HDRS (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))
#define XDP_PACKET_MAX 2048

/* A request for key (klen bytes) into buf; returns its size, 0 if it does not
 * fit. Headers are built in locals and copied: the IP header sits at offset
 * 14, not aligned for struct iphdr. */
static inline size_t xdp_packet_get(unsigned char *buf, size_t cap, const void *key, size_t klen)
{
	size_t n = XDP_PACKET_HDRS + 4 + klen;
	if (n > cap || n > XDP_PACKET_MAX)
		return 0;
	struct ethhdr eth;
	struct iphdr ip;
	struct udphdr udp;
	memset(&eth, 0, sizeof eth);
	memset(&ip, 0, sizeof ip);
	memset(&udp, 0, sizeof udp);
	memcpy(eth.h_dest, "\x02\x00\x00\x00\x00\x02", ETH_ALEN);
	memcpy(eth.h_source, "\x02\x00\x00\x00\x00\x01", ETH_ALEN);
	eth.h_proto = htons(ETH_P_IP);
	ip.version = 4;
	ip.ihl = 5;
	ip.ttl = 64;
	ip.protocol = 17; /* UDP */
	ip.tot_len = htons((uint16_t)(n - sizeof eth));
	ip.saddr = htonl(0x0a000001);
	ip.daddr = htonl(0x0a000002);
	udp.source = htons(40000);
	udp.dest = htons(XDP_PACKET_PORT);
	udp.len = htons((uint16_t)(sizeof udp + 4 + klen));
	memcpy(buf, &eth, sizeof eth);
	memcpy(buf + sizeof eth, &ip, sizeof ip);
	memcpy(buf + sizeof eth + sizeof ip, &udp, sizeof udp);
	memcpy(buf + XDP_PACKET_HDRS, "GET ", 4);
	if (klen)
		memcpy(buf + XDP_PACKET_HDRS + 4, key, klen);
	return n;
}

/* A reply of the program (action, the packet out): 1 HIT with *val, *vlen
 * (pointing into pkt), 0 MISS, -1 not a well-formed reply to
 * xdp_packet_get's request (wrong action, addresses, ports, lengths or IP
 * checksum). */
static inline int xdp_packet_reply(const unsigned char *pkt, size_t n, uint32_t action,
				   const unsigned char **val, size_t *vlen)
{
	if (action != XDP_TX || n < XDP_PACKET_HDRS + 4)
		return -1;
	struct ethhdr eth;
	struct iphdr ip;
	struct udphdr udp;
	memcpy(&eth, pkt, sizeof eth);
	memcpy(&ip, pkt + sizeof eth, sizeof ip);
	memcpy(&udp, pkt + sizeof eth + sizeof ip, sizeof udp);
	if (memcmp(eth.h_dest, "\x02\x00\x00\x00\x00\x01", ETH_ALEN) ||
	    ip.saddr != htonl(0x0a000002) || ip.daddr != htonl(0x0a000001) ||
	    udp.source != htons(XDP_PACKET_PORT) || udp.dest != htons(40000) ||
	    ntohs(ip.tot_len) != n - sizeof eth || ntohs(udp.len) != n - sizeof eth - sizeof ip)
		return -1;
	const unsigned char *h = pkt + sizeof eth;
	uint32_t sum = 0;
	for (size_t i = 0; i < sizeof ip; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	if (sum != 0xffff)
		return -1;
	const unsigned char *p = pkt + XDP_PACKET_HDRS;
	if (!memcmp(p, "MISS", 4) && n == XDP_PACKET_HDRS + 4)
		return 0;
	if (memcmp(p, "HIT ", 4))
		return -1;
	*val = p + 4;
	*vlen = n - XDP_PACKET_HDRS - 4;
	return 1;
}

#endif /* SHMKV_XDP_PACKET_H */
