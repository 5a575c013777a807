// builder/builder.cc - the builder's C API: options, records, input files.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <new>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <simdjson.h>

#include "internal.h"
#include "parallel.h"
#include "probes.h"

using namespace shmkv_build;

void shmkv_build::hugepage_hint(const void *p, size_t n)
{
	uintptr_t b = align_up((uintptr_t)p, size_t(2) << 20), e = ((uintptr_t)p + n) & ~((uintptr_t(2) << 20) - 1);
	if (e > b)
		madvise((void *)b, e - b, MADV_HUGEPAGE);
}

void Arena::Unmap::operator()(uint8_t *p) const
{
	munmap(p, size);
}

uint8_t *Arena::alloc(size_t n)
{
	n = align_up(n, 8);
	if (used_ + n > cap_) {
		size_t sz = align_up(n > (size_t(64) << 20) ? n : (size_t(64) << 20), size_t(2) << 20);
		blocks_.reserve(blocks_.size() + 1); // so that emplace_back cannot throw and leak m
		void *m = mmap(nullptr, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			throw std::bad_alloc();
		hugepage_hint(m, sz);
		blocks_.emplace_back((uint8_t *)m, Unmap{sz});
		used_ = 0;
		cap_ = sz;
	}
	uint8_t *p = blocks_.back().get() + used_;
	used_ += n;
	total_ += n;
	return p;
}

void Arena::adopt(Arena &&o)
{
	// in front: alloc() goes on from this arena's own last block
	blocks_.insert(blocks_.begin(), std::make_move_iterator(o.blocks_.begin()),
		       std::make_move_iterator(o.blocks_.end()));
	total_ += o.total_;
	o.total_ = 0;
	o.blocks_.clear();
	o.used_ = o.cap_ = 0;
}

unsigned shmkv_build::default_threads()
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > 64 ? 64 : (unsigned)n;
}

std::string shmkv_build::vformat(const char *fmt, va_list ap)
{
	char buf[1024];
	vsnprintf(buf, sizeof buf, fmt, ap);
	return buf;
}

int shmkv_builder::fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err = vformat(fmt, ap);
	va_end(ap);
	return code;
}

std::string shmkv_builder::place(uint32_t src, uint64_t line) const
{
	if (line_word.empty())
		return sources[src] + ":" + std::to_string(line);
	return sources[src] + ": " + line_word + " " + std::to_string(line);
}

std::string shmkv_builder::where(const Record &r, size_t index) const
{
	if (r.src == kNoSource)
		return "record #" + std::to_string(index + 1);
	return place(r.src, r.line);
}

std::string shmkv_builder::here() const
{
	if (cur_src == kNoSource)
		return "record #" + std::to_string(seq0 + nrecs() + 1);
	return place(cur_src, cur_line);
}

uint64_t shmkv_build::line_cap(const shmkv_builder *b)
{
	uint64_t limit = b->mem_limit ? b->mem_limit : shmkv_build_default_memory_limit();
	return std::max<uint64_t>(limit / kLineShare / kLineCost, uint64_t(64) << 10);
}

int shmkv_builder::line_too_long(uint64_t len, bool whole)
{
	uint64_t limit = mem_limit ? mem_limit : shmkv_build_default_memory_limit();
	return fail(SHMKV_ELIMIT,
		    "%s: line of %s%llu bytes: longer than the %llu bytes a line may take under %s "
		    "of %llu MiB (1/%llu of it, at least 64 KiB, as a line's parse takes up to %llu "
		    "times its length); give a larger --memory-limit",
		    here().c_str(), whole ? "" : "at least ", (unsigned long long)len,
		    (unsigned long long)line_max,
		    mem_limit ? "the memory limit" : "the default memory limit (half the memory available)",
		    (unsigned long long)(limit >> 20), (unsigned long long)(kLineShare * kLineCost),
		    (unsigned long long)kLineCost);
}

extern "C" int shmkv_build_options_init(shmkv_build_options *o)
{
	memset(o, 0, sizeof *o);
	o->seed = SHMKV_DEFAULT_SEED;
	o->dedup = 1;
	o->on_duplicate = SHMKV_DUP_ERROR;
	o->load_factor = 0; // SHMKV_DEFAULT_LOAD_FACTOR
	o->hash_bits = 64;
	o->created = (int64_t)time(nullptr);
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	if (sde && *sde) {
		char *end;
		errno = 0;
		long long v = strtoll(sde, &end, 10);
		if (errno || *end || v < 0)
			return SHMKV_EINPUT;
		o->created = v;
	}
	return 0;
}

extern "C" int shmkv_builder_new(const shmkv_build_options *o, shmkv_builder **out)
{
	*out = nullptr;
	if (!(o->load_factor >= 0.0 && o->load_factor <= 1.0) || o->hash_bits < 1 ||
	    o->hash_bits > 64 || o->on_duplicate < SHMKV_DUP_ERROR ||
	    o->on_duplicate > SHMKV_DUP_LAST ||
	    strnlen(o->name, sizeof o->name) > SHMKV_NAME_MAX)
		return -EINVAL;
	shmkv_builder *b = new (std::nothrow) shmkv_builder;
	if (!b)
		return -ENOMEM;
	b->opt = *o;
	*out = b;
	return 0;
}

extern "C" void shmkv_builder_free(shmkv_builder *b)
{
	delete b;
}

extern "C" const char *shmkv_builder_error(const shmkv_builder *b)
{
	return b->err.c_str();
}

extern "C" void shmkv_builder_set_source(shmkv_builder *b, const char *file, uint64_t line)
{
	if (b->cur_src == kNoSource || b->sources[b->cur_src] != file) {
		b->sources.emplace_back(file);
		b->cur_src = (uint32_t)(b->sources.size() - 1);
	}
	b->cur_line = line;
}

extern "C" int shmkv_builder_set_expires(shmkv_builder *b, int64_t t)
{
	int err = t ? check_expiry(b, std::to_string(t), t) : 0;
	if (!err)
		b->expires = (uint32_t)t;
	return err;
}

// Checks that value bytes are a valid encoding of type.
static int check_value(shmkv_builder *b, unsigned type, const uint8_t *v, size_t len)
{
	const char *tn = shmkv_type_name(type);
	switch (type) {
	case SHMKV_TYPE_BYTES: return 0;
	case SHMKV_TYPE_STRING:
		if (!simdjson::validate_utf8((const char *)v, len))
			return b->fail(SHMKV_EINPUT, "%s: string value is not valid UTF-8",
				       b->here().c_str());
		return 0;
	case SHMKV_TYPE_STRLIST: {
		// The reader's check wants to see the bytes as stored.
		char why[200];
		int err = shmkv_value_check(type, v, len, why, sizeof why);
		if (err)
			return b->fail(SHMKV_EINPUT, "%s: %s", b->here().c_str(), why);
		uint32_t n;
		memcpy(&n, v, 4);
		const uint8_t *data = v + 4 * ((uint64_t)n + 2);
		for (uint32_t i = 0; i < n; i++) {
			uint32_t s, e;
			memcpy(&s, v + 4 + 4 * (uint64_t)i, 4);
			memcpy(&e, v + 8 + 4 * (uint64_t)i, 4);
			if (!simdjson::validate_utf8((const char *)data + s, e - s - 1))
				return b->fail(SHMKV_EINPUT, "%s: string %u of the list is not valid UTF-8",
					       b->here().c_str(), i);
		}
		return 0;
	}
	default: {
		char why[200];
		int err = shmkv_value_check(type, v, len, why, sizeof why);
		if (err)
			return b->fail(SHMKV_EINPUT, "%s: bad %s value: %s", b->here().c_str(), tn, why);
		return 0;
	}
	}
}

// The checks every record takes (a key's length, the memory limit's share,
// the part), then the record into the arena: 0, 1 when another part's
// record was skipped, or an error set on b.
static int add_record(shmkv_builder *b, const void *key, size_t key_len, unsigned type,
		      const void *value, size_t value_len, uint32_t expires)
{
	if (b->presorted.on) // merged in key order: a record now would be out of it
		return b->fail(-EINVAL, "%s: a record after images merged "
				       "(shmkv_builder_add_images, a builder's one input)",
			       b->here().c_str());
	if (key_len > SHMKV_MAX_KEY_LEN)
		return b->fail(SHMKV_ELIMIT, "%s: key of %zu bytes exceeds the %u-byte limit",
			       b->here().c_str(), key_len, SHMKV_MAX_KEY_LEN);
	if (value_len > SHMKV_MAX_VALUE_LEN)
		return b->fail(SHMKV_ELIMIT, "%s: value of %zu bytes exceeds the %u-byte limit",
			       b->here().c_str(), value_len, SHMKV_MAX_VALUE_LEN);
	if (b->mem_limit && key_len + value_len > line_cap(b)) // as a line of input may take
		return b->fail(SHMKV_ELIMIT,
			       "%s: record of %zu bytes (key and value): larger than the %llu bytes a "
			       "record may take under the memory limit of %llu MiB (1/%llu of it, at "
			       "least 64 KiB); give a larger --memory-limit",
			       b->here().c_str(), key_len + value_len, (unsigned long long)line_cap(b),
			       (unsigned long long)(b->mem_limit >> 20),
			       (unsigned long long)(kLineShare * kLineCost));
	if (type != kTombType) {
		int err = check_value(b, type, (const uint8_t *)value, value_len);
		if (err)
			return err;
	}
	if (b->part_n) { // other parts' records are never stored: a part needs 1/N of the memory
		uint64_t h = shmkv_key_hash(b->opt.seed, b->opt.hash_bits, key, key_len);
		uint64_t bk = shmkv_home_bucket(h, b->opt.buckets);
		if (bk < b->part_lo || bk >= b->part_hi) {
			if (!b->part_filter)
				return part_error(b, b->here(), (const uint8_t *)key, key_len);
			b->filtered++;
			return 0;
		}
	}
	if (b->out && b->out_n == b->out_cap) // at most a record a line: cannot happen
		return b->fail(-EOVERFLOW, "%s: more records than lines", b->here().c_str());
	uint8_t *p;
	try {
		p = b->arena.alloc(key_len + value_len + 1);
		if (!b->out)
			b->recs.emplace_back();
	} catch (const std::bad_alloc &) {
		return b->fail(-ENOMEM, "%s: out of memory", b->here().c_str());
	}
	if (key_len)
		memcpy(p, key, key_len);
	if (value_len)
		memcpy(p + key_len, value, value_len);
	Record &r = b->out ? b->out[b->out_n++] : b->recs.back();
	r.key = p;
	r.key_len = (uint16_t)key_len;
	r.val = p + key_len;
	r.val_len = (uint32_t)value_len;
	r.type = (uint8_t)type;
	r.pad = 0;
	r.src = b->cur_src;
	r.expires = expires;
	r.line = b->cur_src == kNoSource ? b->seq0 + b->nrecs() : b->cur_line;
	if (b->mem_limit && !b->sub && ++b->since_check >= 1024) {
		try {
			return spill_check(b);
		} catch (const std::bad_alloc &) {
			return b->fail(-ENOMEM, "%s: out of memory while spilling", b->here().c_str());
		}
	}
	return 0;
}

extern "C" int shmkv_builder_add(shmkv_builder *b, const void *key, size_t key_len, unsigned type,
				 const void *value, size_t value_len)
{
	if (b->finished)
		return b->fail(-EINVAL, "builder already finished");
	if (!shmkv_type_desc_of(type))
		return b->fail(SHMKV_EINPUT, "%s: unknown value type %u", b->here().c_str(), type);
	return add_record(b, key, key_len, type, value, value_len, b->expires);
}

extern "C" int shmkv_builder_remove(shmkv_builder *b, const void *key, size_t key_len)
{
	if (b->finished)
		return b->fail(-EINVAL, "builder already finished");
	if (!b->removes)
		return b->fail(SHMKV_EINPUT,
			       "%s: removal of key %s: only a delta image holds removals; build one by "
			       "naming the image it changes (shmctl image build --delta-of BASE, "
			       "shmkv_builder_set_delta)",
			       b->here().c_str(), show_key((const uint8_t *)key, key_len).c_str());
	return add_record(b, key, key_len, kTombType, nullptr, 0, 0); // no expiry (§19.2)
}

extern "C" int shmkv_builder_add_i64(shmkv_builder *b, const void *k, size_t kl, int64_t v)
{
	return shmkv_builder_add(b, k, kl, SHMKV_TYPE_I64, &v, 8);
}

extern "C" int shmkv_builder_add_f64(shmkv_builder *b, const void *k, size_t kl, double v)
{
	return shmkv_builder_add(b, k, kl, SHMKV_TYPE_F64, &v, 8);
}

extern "C" int shmkv_builder_add_bool(shmkv_builder *b, const void *k, size_t kl, int v)
{
	uint8_t x = v != 0;
	return shmkv_builder_add(b, k, kl, SHMKV_TYPE_BOOL, &x, 1);
}

extern "C" int shmkv_builder_add_str(shmkv_builder *b, const void *k, size_t kl, const char *s,
				     size_t len)
{
	return shmkv_builder_add(b, k, kl, SHMKV_TYPE_STRING, s, len);
}

extern "C" int shmkv_builder_add_bytes(shmkv_builder *b, const void *k, size_t kl, const void *p,
				       size_t len)
{
	return shmkv_builder_add(b, k, kl, SHMKV_TYPE_BYTES, p, len);
}

static int add_array(shmkv_builder *b, const void *k, size_t kl, unsigned type, const void *v,
		     size_t n, size_t elem)
{
	if (n > SHMKV_MAX_VALUE_LEN / elem)
		return b->fail(SHMKV_ELIMIT, "%s: list of %zu elements exceeds the %u-byte value limit",
			       b->here().c_str(), n, SHMKV_MAX_VALUE_LEN);
	return shmkv_builder_add(b, k, kl, type, v, n * elem);
}

extern "C" int shmkv_builder_add_f32list(shmkv_builder *b, const void *k, size_t kl,
					 const float *v, size_t n)
{
	return add_array(b, k, kl, SHMKV_TYPE_F32LIST, v, n, 4);
}

extern "C" int shmkv_builder_add_f64list(shmkv_builder *b, const void *k, size_t kl,
					 const double *v, size_t n)
{
	return add_array(b, k, kl, SHMKV_TYPE_F64LIST, v, n, 8);
}

extern "C" int shmkv_builder_add_i64list(shmkv_builder *b, const void *k, size_t kl,
					 const int64_t *v, size_t n)
{
	return add_array(b, k, kl, SHMKV_TYPE_I64LIST, v, n, 8);
}

extern "C" int shmkv_builder_add_strlist(shmkv_builder *b, const void *k, size_t kl,
					 const char *const *strs, const size_t *lens, size_t n)
{
	uint64_t total = 4 * ((uint64_t)n + 2);
	for (size_t i = 0; i < n && total <= SHMKV_MAX_VALUE_LEN; i++)
		total += (uint64_t)lens[i] + 1;
	if (total > SHMKV_MAX_VALUE_LEN)
		return b->fail(SHMKV_ELIMIT, "%s: string list exceeds the %u-byte value limit",
			       b->here().c_str(), SHMKV_MAX_VALUE_LEN);
	std::vector<std::string> items;
	try {
		items.reserve(n);
		for (size_t i = 0; i < n; i++)
			items.emplace_back(strs[i], lens[i]);
		std::string enc = encode_strlist(items);
		return shmkv_builder_add(b, k, kl, SHMKV_TYPE_STRLIST, enc.data(), enc.size());
	} catch (const std::bad_alloc &) {
		return b->fail(-ENOMEM, "%s: out of memory", b->here().c_str());
	}
}

// The whole input as one read-only range: mapped for files, read for pipes.
namespace {
struct Input {
	const char *data = nullptr;
	size_t size = 0;
	void *map = nullptr;
	std::string buf;
	~Input()
	{
		if (map)
			munmap(map, size);
	}
};

int read_input(shmkv_builder *b, const char *path, Input &in)
{
	bool is_stdin = strcmp(path, "-") == 0;
	int fd = is_stdin ? 0 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return b->fail(-errno, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		if (!is_stdin)
			close(fd);
		return b->fail(-e, "%s: %s", path, strerror(e));
	}
	if (S_ISDIR(st.st_mode)) {
		if (!is_stdin)
			close(fd);
		return b->fail(-EISDIR, "%s: is a directory", path);
	}
	int err = note_input(b, is_stdin ? "<stdin>" : path, st);
	if (err) {
		if (!is_stdin)
			close(fd);
		return err;
	}
	shmkv_builder_set_source(b, is_stdin ? "<stdin>" : path, 0); // for a line too long
	if (S_ISREG(st.st_mode) && st.st_size > 0) {
		void *m = mmap(nullptr, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m != MAP_FAILED) {
			madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
			in.map = m;
			in.data = (const char *)m;
			in.size = (size_t)st.st_size;
			if (!is_stdin)
				close(fd);
			return 0;
		}
	}
	char chunk[1 << 16];
	size_t line_start = 0; // of the line being read, in in.buf
	for (;;) {
		if (b->line_max && in.buf.size() - line_start > b->line_max) {
			if (!is_stdin)
				close(fd);
			b->cur_line = (uint64_t)std::count(in.buf.begin(), in.buf.end(), '\n') + 1;
			return b->line_too_long(in.buf.size() - line_start, false);
		}
		ssize_t n = read(fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			if (!is_stdin)
				close(fd);
			return b->fail(-e, "%s: read: %s", path, strerror(e));
		}
		if (n == 0)
			break;
		in.buf.append(chunk, (size_t)n);
		const char *nl = (const char *)memrchr(chunk, '\n', (size_t)n);
		if (nl)
			line_start = in.buf.size() - (size_t)n + (size_t)(nl - chunk) + 1;
	}
	if (!is_stdin)
		close(fd);
	in.data = in.buf.data();
	in.size = in.buf.size();
	return 0;
}
} // namespace

namespace {
int parse_input(shmkv_builder *b, const Input &in, int format, unsigned tsv_type,
		bool first_input);
} // namespace

namespace {
int parse_chunk(shmkv_builder *b, const char *data, size_t size, int format, unsigned tsv_type,
		bool first_input, uint64_t line0);

// A window's "reading" progress is reported as the file's.
struct WindowProgress {
	shmkv_progress_fn fn;
	void *ctx;
	uint64_t base, total;
	static void cb(void *p, const char *phase, uint64_t done, uint64_t)
	{
		auto *w = (WindowProgress *)p;
		w->fn(w->ctx, phase, w->base + done, w->total);
	}
};

// A pipe is read whole and parsed in parallel, as without a limit, as long
// as its in-memory build fits: *whole when it was, else the windows go on
// from the have bytes in buf.
int read_pipe_start(shmkv_builder *b, int fd, const char *path, std::vector<char> &buf,
		    size_t &have, bool *whole)
{
	for (;;) {
		if (have == buf.size()) {
			if (inmem_estimate(b, have) + buf.size() > b->mem_limit) // and the next buffer
				return 0;
			buf.resize(buf.size() * 2);
		}
		ssize_t n = read(fd, buf.data() + have, buf.size() - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return b->fail(-errno, "%s: read: %s", path, strerror(errno));
		if (n == 0) {
			*whole = true;
			return 0;
		}
		have += (size_t)n;
	}
}

// Reads the input with read() in windows of whole lines and parses each on
// this thread: the memory it takes is one window, whatever the input's size
// (a mapped file's pages would count in the process's memory). Records go
// through shmkv_builder_add(), which spills them when they outgrow the limit.
int add_file_windowed(shmkv_builder *b, const char *path, int format, unsigned tsv_type,
		      bool first_input)
{
	bool is_stdin = strcmp(path, "-") == 0;
	int fd = is_stdin ? 0 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return b->fail(-errno, "%s: %s", path, strerror(errno));
	struct Closer {
		int fd;
		bool own;
		~Closer()
		{
			if (own)
				close(fd);
		}
	} closer{fd, !is_stdin};
	struct stat st;
	if (fstat(fd, &st) != 0)
		return b->fail(-errno, "%s: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return b->fail(-EISDIR, "%s: is a directory", path);
	int err = note_input(b, is_stdin ? "<stdin>" : path, st);
	if (err)
		return err;
	shmkv_builder_set_source(b, is_stdin ? "<stdin>" : path, 0);
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	size_t win = (size_t)std::min<uint64_t>(std::max<uint64_t>(b->mem_limit / 16, 1 << 20), 64 << 20);
	std::vector<char> buf;
	WindowProgress wp{b->opt.progress, b->opt.progress_ctx, 0,
			  S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0};
	uint64_t line0 = 0, offset = 0;
	size_t have = 0;
	bool eof = false, first = true;
	try {
		buf.resize(win);
		if (!S_ISREG(st.st_mode) && !b->spill) {
			bool whole = false;
			err = read_pipe_start(b, fd, path, buf, have, &whole);
			if (err || whole) {
				Input in;
				in.data = buf.data();
				in.size = have;
				return err ? err : parse_input(b, in, format, tsv_type, first_input);
			}
		}
		while (!eof || have) {
			while (!eof && have < buf.size()) {
				ssize_t n = read(fd, buf.data() + have, buf.size() - have);
				if (n < 0 && errno == EINTR)
					continue;
				if (n < 0)
					return b->fail(-errno, "%s: read: %s", path, strerror(errno));
				if (n == 0)
					eof = true;
				have += (size_t)n;
			}
			const char *data = buf.data();
			size_t skip = 0;
			if (first) {
				if (have >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
					skip = 3;
				} else if (have >= 2 && (memcmp(data, "\xFF\xFE", 2) == 0 ||
							 memcmp(data, "\xFE\xFF", 2) == 0)) {
					b->cur_line = 1;
					return b->fail(SHMKV_EINPUT, "%s: UTF-16 byte-order mark: input must "
								     "be UTF-8 (convert it: iconv -f UTF-16 "
								     "-t UTF-8 FILE)", b->here().c_str());
				}
			}
			size_t len = have;
			if (!eof) {
				const char *nl = (const char *)memrchr(data, '\n', have);
				if (!nl) { // a line longer than the window: a larger window
					if (have - skip > b->line_max) {
						b->cur_line = line0 + 1;
						return b->line_too_long(have - skip, false);
					}
					buf.resize(std::min<size_t>(buf.size() * 2, b->line_max + skip + 1));
					continue;
				}
				len = (size_t)(nl - data) + 1;
			}
			wp.base = offset;
			b->opt.progress = wp.fn ? WindowProgress::cb : nullptr;
			b->opt.progress_ctx = &wp;
			err = parse_chunk(b, data + skip, len - skip, format, tsv_type, first_input && first,
					  line0);
			// a meta line may have changed the options: keep them, restore the callback
			b->opt.progress = wp.fn;
			b->opt.progress_ctx = wp.ctx;
			if (err)
				return err;
			line0 += (uint64_t)std::count(data, data + len, '\n');
			offset += len;
			memmove(buf.data(), data + len, have - len);
			have -= len;
			if (buf.size() > win && have < win) { // back to a window after a pipe's start
				buf.resize(win);
				buf.shrink_to_fit();
			}
			first = false;
			if (eof && !have)
				break;
		}
	} catch (const std::bad_alloc &) {
		return b->fail(-ENOMEM, "%s: out of memory", b->here().c_str());
	}
	b->cur_line = line0;
	return 0;
}
} // namespace

extern "C" int shmkv_builder_add_file(shmkv_builder *b, const char *path, int format,
				      unsigned tsv_type)
{
	if (b->finished)
		return b->fail(-EINVAL, "builder already finished");
	if (format == SHMKV_INPUT_TSV && !shmkv_type_desc_of(tsv_type))
		return b->fail(-EINVAL, "unknown TSV value type %u", tsv_type);
	if (format != SHMKV_INPUT_JSONL && format != SHMKV_INPUT_TSV)
		return b->fail(-EINVAL, "unknown input format %d", format);
	b->line_max = line_cap(b);
	bool first_input = b->recs.empty() && b->sources.empty() && !b->seq0;
	uint64_t recs0 = b->recs.size();
	PROBE(parse_start, path, format);
	if (b->mem_limit && !b->sub) {
		// a pipe (read whole while it fits), or a file whose in-memory build
		// would not fit: read in windows
		struct stat st;
		bool is_stdin = strcmp(path, "-") == 0;
		int rc = is_stdin ? fstat(0, &st) : stat(path, &st);
		if (rc != 0 || b->spill || !S_ISREG(st.st_mode) ||
		    inmem_estimate(b, (uint64_t)st.st_size) > b->mem_limit) {
			int err = add_file_windowed(b, path, format, tsv_type, first_input);
			PROBE(parse_done, path, err, (uint64_t)(b->recs.size() - recs0), (uint64_t)0);
			return err;
		}
	}
	Input in;
	int err = read_input(b, path, in);
	if (err) {
		PROBE(parse_done, path, err, (uint64_t)0, (uint64_t)0);
		return err;
	}
	shmkv_builder_set_source(b, strcmp(path, "-") == 0 ? "<stdin>" : path, 0);
	err = parse_input(b, in, format, tsv_type, first_input);
	PROBE(parse_done, path, err, (uint64_t)(b->recs.size() - recs0), (uint64_t)in.size);
	return err;
}

extern "C" int shmkv_builder_add_text(shmkv_builder *b, const char *data, size_t len, int format,
				      unsigned tsv_type, const char *source, uint64_t first_line)
{
	if (b->finished)
		return b->fail(-EINVAL, "builder already finished");
	if (format == SHMKV_INPUT_TSV && !shmkv_type_desc_of(tsv_type))
		return b->fail(-EINVAL, "unknown TSV value type %u", tsv_type);
	if (format != SHMKV_INPUT_JSONL && format != SHMKV_INPUT_TSV)
		return b->fail(-EINVAL, "unknown input format %d", format);
	if (!first_line)
		return b->fail(-EINVAL, "lines are counted from 1");
	b->line_max = line_cap(b);
	shmkv_builder_set_source(b, source && *source ? source : "<text>", 0);
	return parse_chunk(b, data, len, format, tsv_type, false, first_line - 1);
}

namespace {
// Progress of chunk 0 of T stands for the whole input.
struct ChunkProgress {
	shmkv_progress_fn fn;
	void *ctx;
	unsigned T;
	static void cb(void *p, const char *phase, uint64_t done, uint64_t total)
	{
		auto *c = (ChunkProgress *)p;
		c->fn(c->ctx, phase, done * c->T, total * c->T);
	}
};

int parse_chunk(shmkv_builder *b, const char *data, size_t size, int format, unsigned tsv_type,
		bool first_input, uint64_t line0)
{
	try {
		if (format == SHMKV_INPUT_JSONL)
			return add_jsonl(b, data, size, first_input, line0);
		return add_tsv(b, data, size, tsv_type, line0);
	} catch (const std::bad_alloc &) {
		return b->fail(-ENOMEM, "%s: out of memory", b->here().c_str());
	}
}

// Parses a large input in T chunks that start at line starts, each into its
// own builder, then appends their records in file order. The first error in
// file order is the one reported, with the same message a single thread gives.
int parse_parallel(shmkv_builder *b, const char *data, size_t size, int format, unsigned tsv_type,
		   bool first_input, unsigned T)
{
	std::vector<size_t> cut(T + 1);
	cut[0] = 0;
	for (unsigned t = 1; t < T; t++) {
		size_t c = std::max(chunk_begin(size, T, t), cut[t - 1]);
		const char *nl = c < size ? (const char *)memchr(data + c, '\n', size - c) : nullptr;
		cut[t] = nl ? (size_t)(nl - data) + 1 : size;
	}
	cut[T] = size;
	std::vector<uint64_t> lines(T + 1, 0);
	run_threads(T, [&](unsigned t) {
		lines[t + 1] = (uint64_t)std::count(data + cut[t], data + cut[t + 1], '\n');
	});
	for (unsigned t = 1; t <= T; t++)
		lines[t] += lines[t - 1];
	// One array with room for a record a line (the last line may lack its
	// newline), cut into a window per chunk: each thread writes its records
	// straight into their place, and the pages it first touches are cleared
	// on its own core. Windows are closed up afterwards if some line made no
	// record (a blank or meta line, another part's record).
	size_t base = b->recs.size();
	b->recs.resize(base + lines[T] + 1); // NoInit: nothing is touched here
	hugepage_hint(b->recs.data(), b->recs.size() * sizeof(Record));
	std::vector<shmkv_builder> sub(T);
	ChunkProgress cp{b->opt.progress, b->opt.progress_ctx, T};
	for (unsigned t = 0; t < T; t++) {
		sub[t].out = b->recs.data() + base + lines[t];
		sub[t].out_cap = lines[t + 1] - lines[t] + (t == T - 1);
		sub[t].opt = b->opt;
		sub[t].opt.progress = t == 0 && cp.fn ? ChunkProgress::cb : nullptr;
		sub[t].opt.progress_ctx = &cp;
		sub[t].sources = b->sources;
		sub[t].cur_src = b->cur_src;
		sub[t].meta_seen = b->meta_seen;
		sub[t].part_k = b->part_k;
		sub[t].part_n = b->part_n;
		sub[t].part_filter = b->part_filter;
		sub[t].part_lo = b->part_lo;
		sub[t].part_hi = b->part_hi;
		sub[t].mem_limit = b->mem_limit; // its messages; a sub never spills
		sub[t].line_max = b->line_max;
		sub[t].expires = b->expires;
		sub[t].delta = b->delta;
		sub[t].did = b->did;
		sub[t].removes = b->removes;
		sub[t].sub = true;
	}
	std::vector<int> err(T, 0);
	run_threads(T, [&](unsigned t) {
		err[t] = parse_chunk(&sub[t], data + cut[t], cut[t + 1] - cut[t], format, tsv_type,
				     first_input && t == 0, lines[t]);
	});
	for (unsigned t = 0; t < T; t++)
		if (err[t]) {
			b->recs.resize(base);
			b->err = sub[t].err;
			b->cur_line = sub[t].cur_line;
			return err[t];
		}
	// a meta line (first line of the first input) is in chunk 0
	b->opt = sub[0].opt;
	b->opt.progress = cp.fn;
	b->opt.progress_ctx = cp.ctx;
	b->meta_seen = sub[0].meta_seen;
	size_t n = base;
	for (auto &s : sub) {
		if (s.out != b->recs.data() + n) // rare: rows before it made no record
			memmove(b->recs.data() + n, s.out, s.out_n * sizeof(Record));
		n += s.out_n;
		b->filtered += s.filtered;
		b->arena.adopt(std::move(s.arena));
	}
	b->recs.resize(n);
	b->cur_line = lines[T];
	return 0;
}

int parse_input(shmkv_builder *b, const Input &in, int format, unsigned tsv_type, bool first_input)
{
	const char *data = in.data;
	size_t size = in.size;
	// A UTF-8 byte-order mark (Windows editors write one) is skipped, as
	// RFC 8259 §8.1 allows; UTF-16 is refused with how to convert it.
	if (size >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
		data += 3;
		size -= 3;
	} else if (size >= 2 && (memcmp(data, "\xFF\xFE", 2) == 0 || memcmp(data, "\xFE\xFF", 2) == 0)) {
		b->cur_line = 1;
		return b->fail(SHMKV_EINPUT, "%s: UTF-16 byte-order mark: input must be UTF-8 (convert "
					     "it: iconv -f UTF-16 -t UTF-8 FILE)", b->here().c_str());
	}
	unsigned T = b->threads ? b->threads : default_threads();
	if (T > 1 && size >= (size_t(1) << 20)) {
		try {
			return parse_parallel(b, data, size, format, tsv_type, first_input, T);
		} catch (const std::bad_alloc &) {
			return b->fail(-ENOMEM, "%s: out of memory", b->here().c_str());
		}
	}
	if (size >= (size_t(1) << 20)) {
		try {
			b->recs.reserve(b->recs.size() + (size_t)std::count(data, data + size, '\n') + 1);
			hugepage_hint(b->recs.data(), b->recs.capacity() * sizeof(Record));
		} catch (const std::bad_alloc &) {
			return b->fail(-ENOMEM, "%s: out of memory", b->here().c_str());
		}
	}
	return parse_chunk(b, data, size, format, tsv_type, first_input, 0);
}
} // namespace

extern "C" void shmkv_build_part_range(uint64_t k, uint64_t n, uint64_t buckets, uint64_t *lo,
				       uint64_t *hi)
{
	*lo = (uint64_t)((unsigned __int128)buckets * (k - 1) / n);
	*hi = (uint64_t)((unsigned __int128)buckets * k / n);
}

extern "C" uint64_t shmkv_build_part_of(uint64_t bucket, uint64_t n, uint64_t buckets)
{
	return (uint64_t)(((unsigned __int128)(bucket + 1) * n + buckets - 1) / buckets);
}

extern "C" int shmkv_builder_set_threads(shmkv_builder *b, unsigned threads)
{
	if (threads > 1024)
		return b->fail(-EINVAL, "%u threads: at most 1024", threads);
	b->threads = threads;
	return 0;
}

extern "C" int shmkv_builder_set_part(shmkv_builder *b, uint64_t k, uint64_t n, int filter)
{
	if (n == 0 ? k != 0 : (k < 1 || k > n))
		return b->fail(-EINVAL, "part %llu/%llu: expected K/N with 1 <= K <= N",
			       (unsigned long long)k, (unsigned long long)n);
	if (n && b->delta)
		return b->fail(-EINVAL, "a delta is built whole: a part build (%llu/%llu) is for "
					"plain images", (unsigned long long)k, (unsigned long long)n);
	if (n && (!(b->opt.fixed & SHMKV_OPT_BUCKETS) || !b->opt.buckets))
		return b->fail(-EINVAL, "a part build (%llu/%llu) needs a fixed bucket count "
					"(--buckets), the same for every part and the join",
			       (unsigned long long)k, (unsigned long long)n);
	b->part_k = k;
	b->part_n = n;
	b->part_filter = filter != 0;
	if (n)
		shmkv_build_part_range(k, n, b->opt.buckets, &b->part_lo, &b->part_hi);
	return 0;
}

int shmkv_build::part_error(shmkv_builder *b, const std::string &where, const uint8_t *key,
			    size_t key_len)
{
	const auto &o = b->opt;
	uint64_t bk = shmkv_home_bucket(shmkv_key_hash(o.seed, o.hash_bits, key, key_len), o.buckets);
	return b->fail(SHMKV_EINPUT,
		       "%s: key %s is in bucket %llu of %llu, which belongs to part %llu/%llu, not "
		       "%llu/%llu (buckets %llu..%llu); route records by bucket range, or skip "
		       "them with --filter-part",
		       where.c_str(), show_key(key, key_len).c_str(), (unsigned long long)bk,
		       (unsigned long long)o.buckets,
		       (unsigned long long)shmkv_build_part_of(bk, b->part_n, o.buckets),
		       (unsigned long long)b->part_n, (unsigned long long)b->part_k,
		       (unsigned long long)b->part_n, (unsigned long long)b->part_lo,
		       (unsigned long long)(b->part_hi - 1));
}

extern "C" int shmkv_builder_finish(shmkv_builder *b, const char *path, shmkv_build_stats *st)
{
	if (b->finished)
		return b->fail(-EINVAL, "builder already finished");
	b->finished = true;
	try {
		return finish_image(b, path, st);
	} catch (const std::bad_alloc &) {
		return b->fail(-ENOMEM, "%s: out of memory while laying out the image", path);
	}
}
