// builder/write.cc - writes a laid-out image. To a file atomically: an unnamed
// O_TMPFILE in the output's directory (a named temporary where the filesystem
// has none), fsync, named .<output>.<16 hex>.tmp only for the rename over the
// output, fsync of the directory; a killed builder leaves nothing under the
// output's name. To standard output ("-") as a stream: a first pass computes
// the checksums, the second writes the header first.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <thread>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layout.h"
#include "writer.h"
#include "parallel.h"
#include "probes.h"

namespace shmkv_build {

namespace {

// Renders entries [k0, k1) into buf, which stands for the image bytes from
// entry_off[k0] up to end.
void render_entries(const shmkv_builder *b, const Layout &L, size_t k0, size_t k1, uint64_t end,
		    uint8_t *buf)
{
	const auto &R = b->recs;
	uint64_t base = L.entry_off[k0];
	memset(buf, 0, end - base);
	for (size_t k = k0; k < k1; k++) {
		prefetch_ahead(R, L.order, k, k1, true);
		const Record &r = R[L.order[k]];
		bool shared = L.group[k] != kInline;
		render_entry(buf + (L.entry_off[k] - base), r.type, r.key, r.key_len, r.val, r.val_len,
			     shared, shared ? L.group_off[L.group[k]] : 0);
	}
}

// The entries section, rendered in blocks of about kBlock bytes by all
// threads, a round of one block each at a time, and checksummed by the caller
// in order. With a DirectOut, a round's blocks go to the file from the
// buffers they were rendered in (each starts at its block's offset modulo the
// alignment), on a thread of their own while the next round renders into the
// other set of buffers: the device's time overlaps the rendering. Otherwise
// the caller writes them in order.
int write_entries(shmkv_builder *b, const Layout &L, Writer &w)
{
	constexpr uint64_t kBlock = uint64_t(4) << 20;
	constexpr size_t A = DirectOut::kAlign;
	size_t m = L.order.size();
	unsigned T = b->threads ? b->threads : default_threads();
	DirectOut *d = w.direct_out();
	struct Free {
		void operator()(uint8_t *p) const { free(p); }
	};
	struct Buf {
		std::unique_ptr<uint8_t[], Free> mem;
		size_t cap = 0;
	};
	struct Block {
		size_t k0, k1;
		uint64_t start, end;
		uint8_t *p;
	};
	// two sets: one rendering, the other being written
	struct Set {
		std::vector<Buf> buf;
		std::vector<Block> round;
		std::thread io;
		int err = 0;
	} sets[2];
	auto wait = [&](Set &s) { // the set's writes are done: its buffers are free
		if (s.io.joinable())
			s.io.join();
		return s.err ? w.failed(s.err) : 0;
	};
	int err = 0;
	size_t k = 0;
	for (unsigned r = 0; !err && k < m; r++) {
		Set &s = sets[r % 2];
		if ((err = wait(s)))
			break;
		try { // once a set: sizes stay
			s.buf.resize(std::max<size_t>(s.buf.size(), T));
			s.round.reserve(T);
		} catch (const std::bad_alloc &) {
			err = b->fail(-ENOMEM, "out of memory while writing the entries");
			break;
		}
		s.round.clear();
		while (s.round.size() < T && k < m) {
			size_t k0 = k;
			uint64_t start = L.entry_off[k0];
			while (k < m && (k == k0 || L.entry_off[k] - start < kBlock))
				k++;
			s.round.push_back({k0, k, start, k < m ? L.entry_off[k] : L.entries_end, nullptr});
		}
		for (size_t x = 0; !err && x < s.round.size(); x++) {
			Block &bl = s.round[x];
			size_t need = (size_t)(bl.end - bl.start) + A;
			if (s.buf[x].cap < need) { // reused: fresh pages cost as much as rendering
				void *p = nullptr;
				s.buf[x].mem.reset();
				s.buf[x].cap = 0;
				if (posix_memalign(&p, A, need) != 0) {
					err = b->fail(-ENOMEM, "out of memory while writing the entries");
					break;
				}
				s.buf[x].mem.reset((uint8_t *)p);
				s.buf[x].cap = need;
			}
			bl.p = s.buf[x].mem.get() + bl.start % A;
		}
		if (err)
			break;
		run_threads((unsigned)s.round.size(), [&](unsigned t) {
			const Block &bl = s.round[t];
			render_entries(b, L, bl.k0, bl.k1, bl.end, bl.p);
		});
		for (const Block &bl : s.round) {
			size_t n = (size_t)(bl.end - bl.start);
			err = d ? w.put_written(bl.p, n) : w.put_big(bl.p, n);
			if (!err && d)
				err = w.failed(d->edges(bl.start, bl.p, n));
			if (err)
				break;
		}
		if (!err && d) {
			auto io = [d, &s] {
				for (const Block &bl : s.round)
					if (!s.err)
						s.err = d->interior(bl.start, bl.p, (size_t)(bl.end - bl.start));
			};
			try {
				s.io = std::thread(io);
			} catch (...) { // std::system_error, std::bad_alloc: no thread
				io(); // written here
			}
		}
		b->progress("writing", k, m);
	}
	for (Set &s : sets) { // joined whatever happened: the buffers are theirs until then
		if (s.io.joinable())
			s.io.join();
		if (!err && s.err)
			err = w.failed(s.err);
	}
	return err;
}

// hdr: the header to write first (a stream), or null for zeros (pwritten later).
int write_body(shmkv_builder *b, const Layout &L, Writer &w, shmkv_image_header &h,
	       const shmkv_image_header *hdr)
{
	const auto &R = b->recs;
	int err = hdr ? w.put(hdr, sizeof *hdr) : 0;
	if (!err)
		err = w.pad_to(SHMKV_HEADER_SIZE);
	if (err)
		return err;

	w.begin_section();
	if ((err = w.put(L.index.data(), L.index.size() * 8)))
		return err;
	h.sections[0] = {SHMKV_SECTION_INDEX, 0, SHMKV_HEADER_SIZE,
			 L.bucket_count * SHMKV_BUCKET_BYTES, w.end_section()};

	return write_sections(
		w, L, h, [&] { return write_entries(b, L, w); },
		[&] {
			for (uint32_t rep : L.shared_reps) {
				const Record &r = R[L.order[rep]];
				int e = w.pad_to(align_up(w.pos(), 8));
				if (!e)
					e = w.put(r.val, r.val_len);
				if (!e && stored_len(r.type, r.val_len) > r.val_len)
					e = w.zeros(1);
				if (e)
					return e;
			}
			return 0;
		},
		[&] { return w.put(L.filter.data(), L.filter.size() * 8); });
}

} // namespace

int write_sections(Writer &w, const Layout &L, shmkv_image_header &h,
		   const std::function<int()> &entries, const std::function<int()> &values,
		   const std::function<int()> &filter)
{
	w.begin_section();
	int err = entries();
	if (err || (err = w.pad_to(L.entries_end)))
		return err;
	h.sections[1] = {SHMKV_SECTION_ENTRIES, 0, L.entries_off, L.entries_end - L.entries_off,
			 w.end_section()};
	if ((err = w.pad_to(L.values_off)))
		return err;
	w.begin_section();
	if ((err = values()))
		return err;
	h.sections[2] = {SHMKV_SECTION_VALUES, 0, L.values_off, L.values_end - L.values_off,
			 w.end_section()};
	if (L.filter_words) { // a delta (lib/FORMAT.md §19.3)
		if ((err = w.pad_to(L.filter_off)))
			return err;
		w.begin_section();
		if ((err = filter()))
			return err;
		if (w.pos() != L.filter_off + 8 * L.filter_words)
			return w.failed(-EIO); // cannot happen: the filter's words are counted
		h.sections[3] = {SHMKV_SECTION_FILTER, 0, L.filter_off, 8 * L.filter_words,
				 w.end_section()};
	}
	if ((err = w.pad_to(L.file_size)))
		return err;
	return w.flush();
}

int write_header(shmkv_builder *b, const Layout &L, int fd, const char *shown,
		 shmkv_image_header &h)
{
	fill_header(b, L, h);
	if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
		return b->fail(-errno, "writing %s: %s", shown, strerror(errno));
	return 0;
}

void fill_header(const shmkv_builder *b, const Layout &L, shmkv_image_header &h)
{
	const auto &o = b->opt;
	memcpy(h.magic, SHMKV_MAGIC, 8);
	h.format_version = SHMKV_FORMAT_VERSION;
	h.header_size = SHMKV_HEADER_SIZE;
	h.layout_hash = b->delta ? SHMKV_DELTA_LAYOUT_HASH : SHMKV_LAYOUT_HASH;
	h.flags = (o.dedup ? SHMKV_HFLAG_DEDUP : 0) | (L.expiry ? SHMKV_HFLAG_EXPIRY : 0) |
		  (b->delta ? SHMKV_HFLAG_DELTA : 0);
	h.file_size = L.file_size;
	h.entry_count = L.entries;
	h.bucket_count = L.bucket_count;
	h.bucket_slots = SHMKV_BUCKET_BYTES; // the field's name is history
	h.hash_bits = o.hash_bits;
	h.hash_seed = o.seed;
	h.max_probe = L.max_probe;
	h.section_count = b->delta ? SHMKV_DELTA_SECTIONS : 3;
	if (b->delta) { // its base and chain (lib/FORMAT.md §19.1)
		h.reserved[SHMKV_DELTA_BASE_CHECKSUM] = b->did.base_checksum;
		h.reserved[SHMKV_DELTA_BASE_SIZE] = b->did.base_size;
		h.reserved[SHMKV_DELTA_PREV] = b->did.prev;
		h.reserved[SHMKV_DELTA_SEQ] = b->did.seq;
	}
	h.builder_version = SHMKV_VERSION_MAJOR << 16 | SHMKV_VERSION_MINOR << 8 | SHMKV_VERSION_PATCH;
	h.created_unix = o.created;
	h.value_bytes_logical = L.value_bytes_logical;
	h.dedup_values = L.dedup_values;
	h.dedup_refs = L.dedup_refs;
	h.dedup_saved_bytes = L.dedup_saved;
	memcpy(h.name, o.name, strnlen(o.name, SHMKV_NAME_MAX)); /* rest stays zero */
	h.header_checksum = XXH3_64bits(&h, offsetof(shmkv_image_header, header_checksum));
}

namespace {

std::string dir_of(const std::string &path)
{
	size_t slash = path.rfind('/');
	if (slash == std::string::npos)
		return ".";
	return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string &path)
{
	size_t slash = path.rfind('/');
	return slash == std::string::npos ? path : path.substr(slash + 1);
}

// ".<base>.<16 hex digits>.tmp": clearly ours, hidden, unique.
std::string temp_name(const std::string &base, int tries)
{
	uint64_t r;
	if (getrandom(&r, sizeof r, 0) != sizeof r)
		r = (uint64_t)getpid() << 32 ^ (uint64_t)tries;
	char suffix[32];
	snprintf(suffix, sizeof suffix, ".%016llx.tmp", (unsigned long long)r);
	return "." + base + suffix;
}

// Creates dir/.base.XXXX.tmp with O_EXCL (mode 0666 less the umask) and
// registers it for shmkv_build_cleanup().
int make_named_temp(Target &t)
{
	for (int tries = 0; tries < 100; tries++) {
		std::string name = temp_name(base_of(t.path), tries);
		// registered before it exists: a signal right after the open finds it
		int slot = cleanup_register(t.dir + "/" + name);
		int fd = openat(t.dfd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				0666);
		if (fd >= 0) {
			t.tmp = name;
			t.slot = slot;
			return fd;
		}
		cleanup_unregister(slot);
		if (errno != EEXIST)
			return t.b->fail(-errno, "cannot create a temporary file in %s: %s",
					 t.dir.c_str(), strerror(errno));
	}
	return t.b->fail(-EEXIST, "cannot create a temporary file in %s", t.dir.c_str());
}

bool force_named_temp()
{
	const char *e = getenv("SHMKV_BUILD_NO_TMPFILE"); // tests: the path of filesystems without O_TMPFILE
	return e && *e && strcmp(e, "0") != 0;
}

// Gives the unnamed temporary a name in dir (linkat), so that it can be
// renamed over the output. A copy where linking an O_TMPFILE is refused.
int name_temp(Target &t)
{
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", t.fd);
	for (int tries = 0; tries < 100; tries++) {
		std::string name = temp_name(base_of(t.path), tries);
		int slot = cleanup_register(t.dir + "/" + name);
		int rc = linkat(t.fd, "", t.dfd, name.c_str(), AT_EMPTY_PATH);
		if (rc != 0 && errno != EEXIST)
			rc = linkat(AT_FDCWD, proc, t.dfd, name.c_str(), AT_SYMLINK_FOLLOW);
		if (rc == 0) {
			t.tmp = name;
			t.slot = slot;
			return 0;
		}
		int e = errno;
		cleanup_unregister(slot);
		if (e == EEXIST)
			continue;
		// no CAP_DAC_READ_SEARCH and no /proc: copy into a named temporary
		struct stat st;
		if (fstat(t.fd, &st) != 0)
			return t.b->fail(-errno, "fstat: %s", strerror(errno));
		int in = t.fd;
		t.fd = make_named_temp(t);
		if (t.fd < 0) {
			close(in);
			return t.fd;
		}
		off_t off = 0;
		while (off < st.st_size) {
			ssize_t n = copy_file_range(in, &off, t.fd, nullptr, (size_t)(st.st_size - off), 0);
			if (n <= 0) {
				int ce = n < 0 ? errno : EIO;
				close(in);
				return t.b->fail(-ce, "copying the image to %s/%s: %s", t.dir.c_str(),
						 t.tmp.c_str(), strerror(ce));
			}
		}
		close(in);
		if (!t.b->no_sync && fsync(t.fd) != 0)
			return t.b->fail(-errno, "fsync %s/%s: %s", t.dir.c_str(), t.tmp.c_str(),
					 strerror(errno));
		return 0;
	}
	return t.b->fail(-EEXIST, "cannot name a temporary file in %s", t.dir.c_str());
}

int write_stream(shmkv_builder *b, const Layout &L)
{
	shmkv_image_header h;
	memset(&h, 0, sizeof h);
	Writer sums(b, -1, "standard output");
	int err = write_body(b, L, sums, h, nullptr);
	if (err)
		return err;
	fill_header(b, L, h);
	shmkv_image_header h2;
	memset(&h2, 0, sizeof h2);
	Writer w(b, STDOUT_FILENO, "standard output");
	return write_body(b, L, w, h2, &h);
}

} // namespace

Target::~Target()
{
	if (fd >= 0)
		close(fd);
	if (!tmp.empty())
		unlinkat(dfd, tmp.c_str(), 0);
	cleanup_unregister(slot);
	if (dfd >= 0)
		close(dfd);
}

int open_target(shmkv_builder *b, const char *path, Target &t)
{
	t.b = b;
	t.path = path;
	t.dir = dir_of(path);
	t.dfd = open(t.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t.dfd < 0)
		return b->fail(-errno, "cannot open the output directory %s: %s", t.dir.c_str(),
			       strerror(errno));
	if (!force_named_temp())
		t.fd = openat(t.dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
	if (t.fd < 0) {
		if (!force_named_temp() && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
			return b->fail(-errno, "cannot create a temporary file in %s: %s", t.dir.c_str(),
				       strerror(errno));
		t.fd = make_named_temp(t);
		if (t.fd < 0)
			return t.fd;
	}
	t.shown = t.tmp.empty() ? "the image" : t.dir + "/" + t.tmp;
	return 0;
}

int commit_target(shmkv_builder *b, Target &t)
{
	const char *path = t.path.c_str();
	if (!b->no_sync && fsync(t.fd) != 0)
		return b->fail(-errno, "fsync %s: %s", t.shown.c_str(), strerror(errno));
	int err = t.tmp.empty() ? name_temp(t) : 0;
	if (err)
		return err;
	int fd = t.fd;
	t.fd = -1;
	if (close(fd) != 0)
		return b->fail(-errno, "close %s/%s: %s", t.dir.c_str(), t.tmp.c_str(), strerror(errno));
	// Checked again just before the rename: what appeared at the output's
	// name while we wrote is refused as at the start.
	if ((err = check_output(b, path)))
		return err;
	if (renameat(t.dfd, t.tmp.c_str(), t.dfd, base_of(path).c_str()) != 0)
		return b->fail(-errno, "rename %s/%s to %s: %s", t.dir.c_str(), t.tmp.c_str(), path,
			       strerror(errno));
	t.tmp.clear();
	if (!b->no_sync)
		fsync(t.dfd); // make the rename durable
	return 0;
}

int write_image(shmkv_builder *b, const Layout &L, const char *path)
{
	if (strcmp(path, "-") == 0)
		return write_stream(b, L);
	Target t;
	int err = open_target(b, path, t);
	if (err)
		return err;
	shmkv_image_header h;
	memset(&h, 0, sizeof h);
	DirectOut d(t.fd); // after t: gone before t closes the descriptor
	if (ftruncate(t.fd, (off_t)L.file_size) != 0) // the blocks are written out of order
		return b->fail(-errno, "cannot size %s to %llu bytes: %s", t.shown.c_str(),
			       (unsigned long long)L.file_size, strerror(errno));
	Writer w(b, t.fd, t.shown.c_str(), &d);
	err = write_body(b, L, w, h, nullptr);
	if (!err)
		err = w.failed(d.finish(L.file_size));
	if (!err)
		err = write_header(b, L, t.fd, t.shown.c_str(), h);
	return err ? err : commit_target(b, t);
}

[[maybe_unused]] static uint64_t ns_since(std::chrono::steady_clock::time_point t)
{
	return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
		       std::chrono::steady_clock::now() - t)
		.count();
}

int finish_image(shmkv_builder *b, const char *path, shmkv_build_stats *st)
{
	auto t0 = std::chrono::steady_clock::now();
	if (b->mem_limit && !b->spill && !b->presorted.on) { // records added since the last check
		int err;
		try {
			err = spill_check(b);
		} catch (const std::bad_alloc &) {
			err = b->fail(-ENOMEM, "%s: out of memory while spilling", path);
		}
		if (err)
			return err;
	}
	if (b->spill)
		return spill_finish(b, path, st);
	Layout L;
	int err = check_output(b, path);
	if (!err) {
		err = compute_layout(b, L);
		PROBE(layout_done, err, (uint64_t)b->recs.size(), L.entries,
		      L.bucket_count, L.max_probe, ns_since(t0));
	}
	if (!err) {
		auto t1 = std::chrono::steady_clock::now();
		err = write_image(b, L, path);
		PROBE(write_done, path, err, L.file_size, ns_since(t1));
	}
	if (err)
		return err;
	b->progress("done", 1, 1);
	fill_stats(L, b->recs.size(), t0, st);
	return 0;
}

void fill_stats(const Layout &L, uint64_t records, std::chrono::steady_clock::time_point t0,
		shmkv_build_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof *st);
	st->records = records;
	st->entries = L.entries;
	st->duplicates = L.duplicates;
	st->image_bytes = L.file_size;
	st->index_bytes = L.bucket_count * SHMKV_BUCKET_BYTES;
	st->entries_bytes = L.entries_end - L.entries_off;
	st->values_bytes = L.values_end - L.values_off;
	st->bucket_count = L.bucket_count;
	st->max_probe = L.max_probe;
	// record bytes per bucket byte past the heads
	st->load_factor = (double)L.record_bytes /
			  ((double)L.bucket_count * (SHMKV_BUCKET_BYTES - SHMKV_BUCKET_HEAD));
	st->value_bytes_logical = L.value_bytes_logical;
	st->dedup_values = L.dedup_values;
	st->dedup_refs = L.dedup_refs;
	st->dedup_saved_bytes = L.dedup_saved;
	st->tombstones = L.tombstones;
	st->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace shmkv_build
