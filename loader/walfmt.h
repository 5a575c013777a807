/* walfmt.h - the bytes of the durable log DURABLE/NAME.wal (walfmt.c; its
 * rules: loader/README.md, "What is kept"): its head and records written
 * into buffers and read from a buffer. No I/O: wal.c writes and reads the
 * file, a fuzz target (tests/fuzz/fuzz_wal.c) reads arbitrary bytes. */
#ifndef LOADER_WALFMT_H
#define LOADER_WALFMT_H

#include <stddef.h>
#include <stdint.h>

#define WAL_HEAD 80u     /* the head's bytes */
#define WAL_IDENT 48u    /* magic to origin_size: what wal_append() compares */
#define WAL_REC_HEAD 24u /* a record's bytes before its data */
#define WAL_REC_TAIL 16u /* room for what follows the data: padding, checksum */

struct wal_head {
	uint64_t base_sum, base_size;     /* the base's header checksum and size */
	uint64_t origin_sum, origin_size; /* what deltas apply to (0: the base) */
	/* the last delta applied when the log was written anew (checksum and
	 * chain seq; 0: none): records flagged WAL_APPLIED move it on. Not
	 * compared by wal_append(): it names the log's start, not its end */
	uint64_t chain_last, chain_seq;
};

/* A record's flags: a delta applied as it came (`apply`, the spool): the
 * delta chain's position moves to it when it is replayed */
#define WAL_APPLIED 1u

struct wal_rec {
	uint64_t seq;
	const void *data; /* a delta image of the base */
	uint64_t len;
	uint32_t flags;   /* WAL_APPLIED */
};

/* The head's WAL_HEAD bytes. */
void walfmt_head(const struct wal_head *h, unsigned char out[WAL_HEAD]);
/* Whether p is a head of this version, its checksum right. */
int walfmt_head_sound(const unsigned char p[WAL_HEAD]);
/* Record seq's bytes are head (WAL_REC_HEAD), the len bytes of data, then
 * tail's bytes, as many as walfmt_rec_tail returns (padding to 8, checksum). */
void walfmt_rec_head(unsigned char out[WAL_REC_HEAD], uint64_t seq, uint32_t flags,
		     uint64_t len);
size_t walfmt_rec_tail(unsigned char out[WAL_REC_TAIL], uint64_t seq, uint32_t flags,
		       const void *data, uint64_t len);

/* Reads a log's bytes p[0..size): 0 with *h and the records *recs[0..*n)
 * (malloc'd, pointing into p), *end where the whole records end: size, or
 * with *torn why the bytes from *end on are no record (cut short, damaged,
 * out of order;
 * the log ends at the last whole record before them). SHMKV_ECORRUPT (the
 * head damaged or of another version) or -ENOMEM, with why. */
int walfmt_parse(const void *p, size_t size, struct wal_head *h, struct wal_rec **recs,
		 size_t *n, size_t *end, const char **torn, char *why, size_t why_len);

#endif /* LOADER_WALFMT_H */
