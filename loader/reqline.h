/* reqline.h - the control socket's bytes as requests (reqline.c; the
 * protocol: README.md, "Control socket protocol" and "Streams"): a
 * connection's buffer cut into lines, a line into its words, the verb's
 * word count and who may use it; a stream's buffer cut into batches of whole
 * lines. No I/O and no loader state: server.c owns the connection, a fuzz
 * target (tests/fuzz/fuzz_loader_req.c) calls these on arbitrary bytes. */
#ifndef LOADER_REQLINE_H
#define LOADER_REQLINE_H

#include <stddef.h>
#include <stdint.h>

#define REQ_LINE_MAX 8192        /* longest request line, its '\r' counted */
#define REQ_MAX_WORDS 4          /* the verb and up to 3 arguments */
#define REQ_STREAM_LINE_MAX (1u << 20) /* a stream's longest line */

enum req_who { REQ_ANY, REQ_PRIV };

/* The one list of verbs: X(name, args, min, max, who, handler, job, help),
 * min..max the words after the verb. reqline.c checks requests against it
 * (and ignores the handler and job columns); server.c dispatches on it. */
#define REQ_VERBS(X)                                                                              \
	X(ping, "", 0, 0, REQ_ANY, v_ping, 0, "the loader's pid, version, root, spool")           \
	X(help, "", 0, 0, REQ_ANY, v_help, 0, "these verbs, their words and who may use them")    \
	X(list, "", 0, 0, REQ_ANY, v_list, 0, "every cache's summary, the spool, the metrics file") \
	X(status, "NAME", 1, 1, REQ_ANY, v_status, 0, "one cache in full, its readers too")       \
	X(metrics, "", 0, 0, REQ_ANY, v_metrics, 0, "the Prometheus text of every cache")         \
	X(bpf_status, "[NAME]", 0, 1, REQ_ANY, v_bpf_status, 0, "the BPF exports' figures")       \
	X(load, "NAME PATH [NUMA]", 2, 3, REQ_PRIV, v_job, JOB_LOAD,                              \
	  "load an image file into a cache (created if new) and publish it")                     \
	X(reload, "NAME", 1, 1, REQ_PRIV, v_job, JOB_RELOAD, "load the cache's configured source") \
	X(rollback, "NAME", 1, 1, REQ_PRIV, v_job, JOB_ROLLBACK,                                  \
	  "publish the rollback generation again")                                               \
	X(drop, "NAME", 1, 1, REQ_PRIV, v_job, JOB_DROP, "remove the cache and its segments")     \
	X(apply, "NAME PATH", 2, 2, REQ_PRIV, v_job, JOB_APPLY,                                   \
	  "apply a delta image of the cache's base (or the next of its chain)")                  \
	X(change, "NAME JSONL", 2, 2, REQ_PRIV, v_change, JOB_CHANGE,                             \
	  "one upsert or removal, a JSONL record as image build reads them")                     \
	X(compact, "NAME", 1, 1, REQ_PRIV, v_job, JOB_COMPACT,                                    \
	  "merge the cache's changes into a new base and publish it")                            \
	X(stream, "NAME", 1, 1, REQ_PRIV, v_stream, 0,                                            \
	  "every later line is a change, published in batches, each acknowledged")               \
	X(bpf_export, "NAME PREFIX MAX_VALUE", 3, 3, REQ_PRIV, v_job, JOB_BPF_EXPORT,             \
	  "export the cache to BPF programs")                                                    \
	X(bpf_unexport, "NAME", 1, 1, REQ_PRIV, v_job, JOB_BPF_UNEXPORT, "end its BPF export")

struct req_verb {
	const char *name, *args;
	int min, max;
	enum req_who who;
	const char *help;
};
/* REQ_VERBS as a table, in its order */
extern const struct req_verb req_verbs[];
extern const size_t req_nverbs;

/* The next line of a connection's in[0..len): 1 with the line at in[0..
 * *line_len) (a trailing '\r' dropped) and *used its bytes with the '\n';
 * 0 when no whole line is there yet (at eof the unterminated rest is one);
 * -E2BIG when the line is longer than REQ_LINE_MAX (with or without its
 * '\n': the connection is refused, nothing of it is read further). An
 * empty buffer is no line (0). */
int reqline_next(const char *in, size_t len, int eof, size_t *line_len, size_t *used);

/* A parsed request: w[0] the verb, w[1..n) its arguments (pointing into
 * the line, NUL-terminated), w[n] NULL. */
struct req {
	const struct req_verb *verb;
	char *w[REQ_MAX_WORDS + 1];
	int n;
};

/* Cuts line[0..len) (line[len] is 0) into words at its TABs, in place, and
 * checks them against the verbs: 0 with *r; or the refusal with its reason
 * in msg: -EINVAL (bad_request: a NUL byte, more than REQ_MAX_WORDS words,
 * an unknown verb, a wrong word count) or -EPERM (not_permitted: a REQ_PRIV
 * verb from a peer that is not priv; euid and peer_uid name both in msg). */
int req_parse(char *line, size_t len, int priv, unsigned euid, long peer_uid, struct req *r,
	      char *msg, size_t msg_len);

/* "a, b and c": the verbs of who (all of them with who < 0), separated by
 * ", " and last_sep before the last, into out[len] (cut to fit). */
void req_verb_list(char *out, size_t len, int who, const char *last_sep);

/* A stream's buffer (README.md, "Streams"): the lines before line_at are
 * whole and checked, [line_at, scanned) holds no '\n', so each byte is
 * scanned once however often the buffer grows. */
struct req_stream {
	size_t line_at, scanned;
};

/* Scans what came since the last call, in[scanned..len): 0; or -E2BIG when
 * a line (its '\n' not counted; the unterminated last one too) is longer
 * than max, *bad_line then its number among the buffer's lines (from 1). */
int req_stream_scan(struct req_stream *s, const char *in, size_t len, size_t max,
		    uint64_t *bad_line);
/* How many bytes of in[0..len) go into the next batch: every whole line,
 * at eof everything (scanned first). */
size_t req_stream_batch(const struct req_stream *s, size_t len, int eof);
/* The lines of batch b[0..n), n > 0: its '\n's, an unterminated last one
 * counted too. */
uint64_t req_stream_lines(const char *b, size_t n);
/* The batch's n bytes left the front of the buffer. */
void req_stream_consumed(struct req_stream *s, size_t n);

#endif /* LOADER_REQLINE_H */
