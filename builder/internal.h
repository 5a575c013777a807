// builder/internal.h - the builder's private state, shared by its .cc files.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <sys/stat.h>
#include <sys/types.h>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shmkv.h"
#include "shmkv_build.h"

namespace shmkv_build {

// Bump allocator for record bytes: records are never freed one by one.
class Arena {
public:
	uint8_t *alloc(size_t n);
	// Takes over another arena's blocks (records pointing into them stay valid).
	void adopt(Arena &&o);
	// Bytes handed out (what the records' bytes take in memory).
	size_t bytes() const { return total_; }

private:
	struct Unmap {
		size_t size;
		void operator()(uint8_t *p) const;
	};
	std::vector<std::unique_ptr<uint8_t[], Unmap>> blocks_;
	size_t used_ = 0, cap_ = 0, total_ = 0;
};

// Asks for transparent huge pages over the whole pages of [p, p + n): the
// layout and the write read records in hash order, a random order, and 4 KiB
// pages would make nearly every read a TLB miss. A hint only: errors ignored.
void hugepage_hint(const void *p, size_t n);

// One added record; key and value bytes live in the arena.
struct Record {
	const uint8_t *key;
	const uint8_t *val;
	uint32_t val_len;
	uint16_t key_len;
	uint8_t type;
	uint8_t pad;
	uint32_t src; // index into sources, or kNoSource
	uint32_t expires; // Unix seconds, 0: none
	uint64_t line;
};
static_assert(sizeof(Record) == 40, "Record: expires fills the padding before line");
constexpr uint32_t kNoSource = UINT32_MAX;

// An allocator whose resize() leaves new elements uninitialised: the sort
// buffers and the record array are written before they are read, and zeroing
// them first cost as much as the sort (fresh pages are cleared by the kernel
// anyway), on one thread.
template <typename T>
struct NoInit : std::allocator<T> {
	template <typename U>
	struct rebind {
		using other = NoInit<U>;
	};
	NoInit() = default;
	template <typename U>
	NoInit(const NoInit<U> &) noexcept
	{
	}
	template <typename U>
	void construct(U *p) noexcept
	{
		::new ((void *)p) U;
	}
	template <typename U, typename... A>
	void construct(U *p, A &&...a)
	{
		::new ((void *)p) U(std::forward<A>(a)...);
	}
};
using Records = std::vector<Record, NoInit<Record>>;

// Stored bytes of a value: bytes and strings carry a trailing NUL (lib's type table).
inline uint64_t stored_len(uint8_t type, uint64_t val_len)
{
	return shmkv_value_stored_len(type, val_len);
}

inline uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

// printf into a string, for messages (at most 1023 bytes).
std::string vformat(const char *fmt, va_list ap);

// Printable, bounded rendering of a key for messages.
std::string show_key(const uint8_t *key, size_t len);

// base64 (RFC 4648, standard alphabet, padding optional). Returns false and the
// position of the first bad character on malformed input.
bool base64_decode(std::string_view in, std::string &out, size_t *bad_pos);

// Encodes a string list in the image's strlist form.
std::string encode_strlist(const std::vector<std::string> &items);

// Parses "inf", "-inf", "nan" and "nan:0x<bits>" (the forms shmctl dump writes
// for non-finite floats). bits_width is 32 or 64. Returns false if s is none.
bool parse_special_f64(std::string_view s, double *out);
bool parse_special_f32(std::string_view s, float *out);
inline bool parse_special(std::string_view s, double *out) { return parse_special_f64(s, out); }
inline bool parse_special(std::string_view s, float *out) { return parse_special_f32(s, out); }

// Numbers stored as floats, without silent loss (builder/README.md, "Types").
// t is the number's text, d its nearest f64.
bool is_integer_text(std::string_view t);          // [+-]digits
bool integer_exact(std::string_view t, double d);  // the integer t equals d
std::string shortest(float f);                     // shortest round-trip form
std::string shortest(double d);
// f64: an integer written without fraction or exponent must be exact.
bool number_to_f64(std::string_view t, double d, std::string &why);
// f32: exact unless lossy (an integer equals the f32; a decimal fraction is
// the f32 to f64 precision, or the f32 rounded to the digits written).
bool number_to_f32(std::string_view t, double d, bool lossy, float *out, std::string &why);
// NaN, Infinity, inf, -inf... (not JSON): the string to write instead, or null.
const char *nonjson_float(std::string_view t);

// Expiry input (encode.cc): an RFC 3339 time with its offset ("2030-01-31T12:00:00Z",
// a fraction rounds up) to Unix seconds, or false and why; the checks of a
// record's expiry (1..SHMKV_BUILD_EXPIRES_MAX) with errors naming
// the line and the text given.
bool parse_rfc3339(std::string_view s, int64_t *out, std::string &why);
int expiry_error(shmkv_builder *b, const std::string &text, const std::string &why);
int check_expiry(shmkv_builder *b, const std::string &text, int64_t t);

// Layout and write (layout.cc, write.cc).
struct Layout;

// A spilling build's state (spill.cc).
class Spill;
struct SpillDelete {
	void operator()(Spill *s) const;
};

// A tombstone (lib/FORMAT.md §19.2) among the records: the record type 0,
// with no value and no expiry.
constexpr uint8_t kTombType = SHMKV_TYPE_TOMBSTONE;

// What a delta build writes into its header (lib/FORMAT.md §19.1): its base
// and its place in its chain.
struct DeltaId {
	uint64_t base_checksum = 0, base_size = 0, prev = 0, seq = 0;
};

// Identity of a regular file the builder read, or the declared output.
struct FileId {
	dev_t dev;
	ino_t ino;
	std::string name;
};

} // namespace shmkv_build

struct shmkv_builder {
	shmkv_build_options opt;
	shmkv_build::Records recs;
	// A parse_parallel chunk: its records go to [out, out + out_cap) of the
	// parent's array, where they stay (no append afterwards), not to recs.
	shmkv_build::Record *out = nullptr;
	size_t out_cap = 0, out_n = 0;
	size_t nrecs() const { return out ? out_n : recs.size(); }
	shmkv_build::Arena arena;
	std::vector<std::string> sources;
	uint32_t cur_src = shmkv_build::kNoSource;
	uint64_t cur_line = 0;
	// What a source's "line" counts, for messages: "" (lines: "in.jsonl:7"),
	// or a word ("entry at": "old.shmkv: entry at 8192").
	std::string line_word;
	uint32_t expires = 0;          // of the records added next (shmkv_builder_set_expires)
	std::string err;
	std::vector<shmkv_build::FileId> inputs; // regular files read by add_file
	std::vector<shmkv_build::FileId> outputs; // from check_output: inputs must not be these
	bool finished = false;
	bool meta_seen = false;
	unsigned threads = 0;          // 0: shmkv_build::default_threads()
	uint64_t part_k = 0, part_n = 0; // a part build (1-based k of n), or 0
	bool part_filter = false;      // records of other parts are skipped, not an error
	uint64_t part_lo = 0, part_hi = 0; // its buckets
	uint64_t filtered = 0;         // records skipped (part_filter)
	uint64_t mem_limit = 0;        // bytes (shmkv_builder_set_memory_limit), 0: none
	uint64_t line_max = 0;         // longest input line read (line_cap()), 0: not set yet
	std::string tmpdir;            // where spill files go ("": see spill_dir())
	std::string out_dir;           // the checked output's directory, "" if none or "-"
	bool sub = false;              // a parse_parallel chunk: never spills itself
	uint32_t since_check = 0;      // records added since memory was last checked
	uint64_t seq0 = 0;             // records already spilled (input position of recs[0])
	std::unique_ptr<shmkv_build::Spill, shmkv_build::SpillDelete> spill; // once spilling
	// Deltas (lib/FORMAT.md §19): the image written is a delta of this
	// identity (shmkv_builder_set_delta), tombstones are records (type
	// kTombType: shmkv_builder_remove, a JSONL or TSV removal). A merge
	// (shmkv_build_apply) takes tombstones without writing a delta: its kept
	// tombstones leave (drop_tombs), or, merging into one delta, stay only
	// where keep_tomb says (a key its base holds).
	bool delta = false;
	shmkv_build::DeltaId did;
	std::string delta_base, delta_after; // paths, for messages
	bool removes = false;   // tombstone records accepted
	bool drop_tombs = false;
	bool (*keep_tomb)(void *ctx, const uint8_t *key, size_t len) = nullptr;
	void *keep_tomb_ctx = nullptr;
	// The loader's compaction (compact.cc): the kept records in key order
	// already, as indices into recs (a record replaced by a later change is
	// in recs, not in order) and their key hashes; compute_layout takes
	// them instead of sorting. Such a build never spills (compact.cc
	// checks the memory limit first).
	struct {
		bool on = false;
		std::vector<uint32_t> order;
		std::vector<uint64_t> hash;
		uint64_t duplicates = 0;
	} presorted;
	// The output is a temporary its caller reads at once and removes
	// (SHMKV_COMPACT_NOSYNC): written and renamed, never fsynced.
	bool no_sync = false;
	// A kept record: false for a tombstone that leaves (drop_tombs, keep_tomb).
	bool kept(uint8_t type, const uint8_t *key, size_t len) const
	{
		if (type != shmkv_build::kTombType)
			return true;
		return !drop_tombs && (!keep_tomb || keep_tomb(keep_tomb_ctx, key, len));
	}

	// Sets err to a formatted message and returns code.
	int fail(int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
	// The error for a line (at here()) longer than line_max: len bytes,
	// or at least len where the rest was not read.
	int line_too_long(uint64_t len, bool whole);
	// "file:line" of a record (or "file: line_word line"), or "record #N".
	std::string where(const shmkv_build::Record &r, size_t index) const;
	std::string place(uint32_t src, uint64_t line) const;
	// Where the next record will come from, for input-level errors.
	std::string here() const;
	void progress(const char *phase, uint64_t done, uint64_t total) const
	{
		if (opt.progress)
			opt.progress(opt.progress_ctx, phase, done, total);
	}
};

namespace shmkv_build {
int finish_image(shmkv_builder *b, const char *path, shmkv_build_stats *st);
// output.cc: refuses an output that is not absent or a regular file, or that
// is one of the inputs; "-" (standard output) when it is a terminal.
int check_output(shmkv_builder *b, const char *path);
// Refuses an input file that is a declared output; remembers it otherwise.
int note_input(shmkv_builder *b, const char *path, const struct stat &st);
// Temporary names to remove on a signal (shmkv_build_cleanup).
int cleanup_register(const std::string &path);
void cleanup_unregister(int slot);
// line0: the lines of the file before data (a chunk of a file parsed in parallel).
int add_jsonl(shmkv_builder *b, const char *data, size_t size, bool first_input, uint64_t line0);
// The error for a record of another part: where, the key, its bucket and part.
int part_error(shmkv_builder *b, const std::string &where, const uint8_t *key, size_t key_len);
int add_tsv(shmkv_builder *b, const char *data, size_t size, unsigned type, uint64_t line0);
// Calls fn(line, len) for each line of [data, data + size), without its
// newline, once every input's per-line steps are done: b->cur_line is its
// number (after line0), the line cap checked, "reading" progress reported.
// Returns fn's first error, or 0.
template <typename F>
int each_line(shmkv_builder *b, const char *data, size_t size, uint64_t line0, F fn)
{
	size_t next_progress = 0;
	for (size_t off = 0; off < size;) {
		const char *nl = (const char *)memchr(data + off, '\n', size - off);
		size_t len = nl ? (size_t)(nl - (data + off)) : size - off;
		const char *line = data + off;
		off += len + (nl != nullptr);
		b->cur_line = ++line0;
		if (b->line_max && len > b->line_max)
			return b->line_too_long(len, true);
		if (off >= next_progress) {
			b->progress("reading", off, size);
			next_progress = off + (size_t(1) << 22);
		}
		if (int err = fn(line, len))
			return err;
	}
	b->progress("reading", size, size);
	return 0;
}

// The longest input line the builder reads (builder/README.md, "Memory"): a
// line's parse takes up to kLineCost times its length (copies, the parser's
// indexes, a list's elements), and it must fit in a part of the memory
// limit, or, without one, of shmkv_build_default_memory_limit().
constexpr uint64_t kLineCost = 32;
constexpr uint64_t kLineShare = 4; // a line's parse may take 1/4 of the limit
uint64_t line_cap(const shmkv_builder *b);
// spill.cc: what an in-memory build of recs would take at its peak, the
// checks after records were added (starts or continues spilling);
// spill_build.cc: the spilling finish.
uint64_t inmem_estimate(const shmkv_builder *b, uint64_t extra_input);
int spill_check(shmkv_builder *b);
int spill_finish(shmkv_builder *b, const char *path, shmkv_build_stats *st);
} // namespace shmkv_build
