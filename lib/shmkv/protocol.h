/* shmkv/protocol.h - the control segment: how the loader tells readers which
 * image is current. lib/PROTOCOL.md is the prose specification.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 *
 * One control file per cache, ROOT/NAME.ctl, written only by the loader and
 * mapped read-only by readers. It holds numbers and file names, never
 * pointers. Its fields other than seq change only inside a seqcount write
 * section (seq odd); readers copy them out in a seqcount loop. */
#ifndef SHMKV_PROTOCOL_H
#define SHMKV_PROTOCOL_H

#include <stdint.h>

#define SHMKV_CTL_MAGIC "SHMKVCTL"
#define SHMKV_PROTOCOL_VERSION 1u /* what shmkv_ctl_init() writes: a cache without changes */
#define SHMKV_PROTOCOL_VERSION_2 2u /* a cache with changes: base + one or two overlays
				      (lib/PROTOCOL.md) */
#define SHMKV_PROTOCOL_MAX 2u /* readers of this header speak versions 1..2 */
#define SHMKV_CTL_SIZE 4096u
#define SHMKV_CTL_MAX_SEGMENTS 8u /* one per NUMA node at most */
#define SHMKV_CTL_PATH_MAX 224u
#define SHMKV_DEFAULT_ROOT "/run/shmkv"
#define SHMKV_CACHE_NAME_MAX 63u

/* control segment flags (a field readers before SHMKV_ESTALE ignore: adding
 * a flag keeps the layout, and its hash, as it was) */
#define SHMKV_CTL_RETIRED 1u /* the loader dropped the cache or replaced this file:
				readers re-attach (SHMKV_ESTALE) */

/* segment flags */
#define SHMKV_SEG_HUGETLB 1u /* hugetlbfs-backed; otherwise tmpfs (/dev/shm) */
#define SHMKV_SEG_OVERLAY 2u /* protocol 2: a copy of one of the generation's overlays,
				delta images (FORMAT.md §19) of the base copies; else a base
				copy. Alone: the lower overlay */
#define SHMKV_SEG_TOP 4u /* protocol 2, with SHMKV_SEG_OVERLAY only: a copy of the top
			    overlay, read before the lower one (lib/PROTOCOL.md) */
#define SHMKV_SEG_KNOWN_V1 SHMKV_SEG_HUGETLB
#define SHMKV_SEG_KNOWN_V2 (SHMKV_SEG_HUGETLB | SHMKV_SEG_OVERLAY | SHMKV_SEG_TOP)

typedef struct shmkv_ctl_segment {
	int32_t node;       /* NUMA node of this copy, -1 when not pinned */
	uint32_t flags;     /* SHMKV_SEG_* */
	uint64_t size;      /* image bytes (the image header's file_size) */
	uint64_t map_size;  /* file size: size rounded up to page_size */
	uint64_t page_size; /* bytes */
	char path[SHMKV_CTL_PATH_MAX]; /* absolute path of the segment file, NUL-terminated */
} shmkv_ctl_segment;

typedef struct shmkv_ctl {
	char magic[8];              /*   0 SHMKV_CTL_MAGIC */
	uint32_t protocol_version;  /*   8 SHMKV_PROTOCOL_VERSION */
	uint32_t ctl_size;          /*  12 SHMKV_CTL_SIZE */
	uint64_t layout_hash;       /*  16 SHMKV_CTL_LAYOUT_HASH */
	uint64_t seq;               /*  24 seqcount: odd while the loader writes */
	uint64_t generation;        /*  32 current generation; 0 = nothing published yet */
	uint32_t segment_count;     /*  40 1..SHMKV_CTL_MAX_SEGMENTS when generation != 0 */
	uint32_t flags;             /*  44 SHMKV_CTL_* flags */
	uint64_t loader_pid;        /*  48 pid of the loader that published */
	int64_t published_ns;       /*  56 CLOCK_REALTIME of the publish, ns */
	uint64_t reserved[8];       /*  64 zero */
	shmkv_ctl_segment segments[SHMKV_CTL_MAX_SEGMENTS]; /* 128 */
} shmkv_ctl;

#define SHMKV_CTL_LAYOUT_DESC                                                                    \
	"shmkv-ctl-v1;ctl=2176:magic@0,protocol_version@8,ctl_size@12,layout_hash@16,seq@24,"       \
	"generation@32,segment_count@40,flags@44,loader_pid@48,published_ns@56,reserved@64,"        \
	"segments@128;segment=256:node@0,flags@4,size@8,map_size@16,page_size@24,path@32"
#define SHMKV_CTL_LAYOUT_HASH UINT64_C(0x4b43ad88b167e31c)

/* Protocol 2: the same bytes; segments[] holds the base copies and the
 * copies of up to two overlays of one generation, the lower one
 * (SHMKV_SEG_OVERLAY) and the top one (SHMKV_SEG_OVERLAY | SHMKV_SEG_TOP),
 * both deltas of the base; a get asks the top, then the lower, then the base
 * (lib/PROTOCOL.md, "Protocol 2"). */
#define SHMKV_CTL_LAYOUT_DESC_V2                                                                 \
	"shmkv-ctl-v2;ctl=2176:magic@0,protocol_version@8,ctl_size@12,layout_hash@16,seq@24,"       \
	"generation@32,segment_count@40,flags@44,loader_pid@48,published_ns@56,reserved@64,"        \
	"segments@128;segment=256:node@0,flags@4,size@8,map_size@16,page_size@24,path@32;"          \
	"sflags=hugetlb1,overlay2,top4;generation=base1..+lower0..+top0..,lower=overlay,"           \
	"top=overlay+top,top-needs-lower,overlay=delta-of-base,read=top>lower>base,"                \
	"pick=base-by-node,overlay-same-node-else-first"
#define SHMKV_CTL_LAYOUT_HASH_V2 UINT64_C(0x15a70b2227f150fa)

#ifdef __cplusplus
static_assert(sizeof(shmkv_ctl_segment) == 256, "segment layout");
static_assert(sizeof(shmkv_ctl) == 128 + 256 * SHMKV_CTL_MAX_SEGMENTS, "ctl layout");
#else
_Static_assert(sizeof(shmkv_ctl_segment) == 256, "segment layout");
_Static_assert(sizeof(shmkv_ctl) == 128 + 256 * SHMKV_CTL_MAX_SEGMENTS, "ctl layout");
#endif

#endif /* SHMKV_PROTOCOL_H */
