// upgrade_v1.cc - shmkv_build_upgrade(): a format 1 image (retired,
// lib/FORMAT.md §15) becomes the format 2 image a fresh build of its
// records gives. The one place that still reads format 1: `shmctl image
// upgrade` and the Python package's shmkv.upgrade call it.
//
// Format 1 shares format 2's header struct, section table and entries
// (lib/FORMAT.md §7: an 8-byte header, the key, the value inline or as a
// reference to VALUES); its index (64-byte buckets of 8 slots) is not read:
// every record is an entry of ENTRIES. The input is untrusted: its header
// is checked by format 1's rules below, every section against its checksum,
// and each entry of ENTRIES decoded with lib's entry functions, every byte
// read inside its section; entry_count and dedup_refs must agree with what
// ENTRIES holds. Any failure names the file, the offset and the rule.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rebuild.h"

namespace shmkv_build {

namespace {

// Format 1's header rules (lib/FORMAT.md §15, history): what differs from
// format 2. The header struct, the section table and the entries are the
// same in both.
constexpr uint32_t kV1Version = 1;
constexpr uint64_t kV1LayoutHash = UINT64_C(0x52171befdcf1d7ee);
constexpr uint32_t kV1BucketSlots = 8;   // the header's bucket_slots: 8 slots a bucket
constexpr uint64_t kV1BucketBytes = 64;  // 8 slots of 8 bytes
constexpr uint64_t kV1KnownFlags = SHMKV_HFLAG_DEDUP;
constexpr uint32_t kV1Sections = 3;      // index, entries, values, in this order
constexpr uint64_t kSectionAlign = 64;

#define FIELD(f) (unsigned)offsetof(shmkv_image_header, f)

// The input file, mapped read-only, unmapped whatever happens.
struct Input {
	const char *path = nullptr;
	const uint8_t *base = nullptr;
	uint64_t size = 0;
	struct stat st;
	~Input()
	{
		if (base)
			munmap((void *)base, (size_t)size);
	}
	const shmkv_image_header &h() const { return *(const shmkv_image_header *)base; }
};

// Opens and maps path: a regular file of at least the header's size that
// starts with the magic.
int open_input(Input &in, ErrMsg &m)
{
	const char *p = in.path;
	int fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC); // a FIFO must not block
	if (fd < 0)
		return m.set(-errno, "%s: %s", p, strerror(errno));
	if (fstat(fd, &in.st) != 0) {
		int e = errno;
		close(fd);
		return m.set(-e, "%s: %s", p, strerror(e));
	}
	if (!S_ISREG(in.st.st_mode)) {
		close(fd);
		return m.set(-EINVAL, "%s: not a regular file (%s)", p, shmkv_file_kind(in.st.st_mode));
	}
	in.size = (uint64_t)in.st.st_size;
	char magic[8] = {0};
	ssize_t got = pread(fd, magic, sizeof magic, 0);
	if (got < 0) {
		int e = errno;
		close(fd);
		return m.set(-e, "%s: %s", p, strerror(e));
	}
	if (memcmp(magic, SHMKV_MAGIC, (size_t)got) != 0) { // a shorter file: what it has
		close(fd);
		return m.set(SHMKV_EMAGIC, "%s: bad magic at offset 0: not a shmkv image", p);
	}
	if (in.size < SHMKV_HEADER_SIZE) {
		close(fd);
		return m.set(SHMKV_ETRUNCATED, "%s: %" PRIu64 " bytes, shorter than the %u-byte header",
			     p, in.size, SHMKV_HEADER_SIZE);
	}
	void *map = mmap(nullptr, (size_t)in.size, PROT_READ, MAP_SHARED, fd, 0);
	int e = errno;
	close(fd);
	if (map == MAP_FAILED)
		return m.set(-e, "%s: mmap: %s", p, strerror(e));
	in.base = (const uint8_t *)map;
	madvise(map, (size_t)in.size, MADV_SEQUENTIAL);
	return 0;
}

bool all_zero(const uint8_t *p, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

// The header of a format 1 image: what a format 1 reader checked before it
// read anything else, in its order (magic and size: open_input).
int check_header(const Input &in, ErrMsg &m)
{
	const char *p = in.path;
	const shmkv_image_header &h = in.h();
	if (h.format_version == SHMKV_FORMAT_VERSION)
		return m.set(SHMKV_EVERSION, "%s: already format %u (format_version at offset %u): "
			     "nothing to upgrade, every reader reads it as it is", p,
			     h.format_version, FIELD(format_version));
	if (h.format_version != kV1Version)
		return m.set(SHMKV_EVERSION, "%s: image format version %u at offset %u: upgrade "
			     "reads format 1 images", p, h.format_version, FIELD(format_version));
	if (h.layout_hash != kV1LayoutHash)
		return m.set(SHMKV_ELAYOUT, "%s: layout hash %016" PRIx64 " at offset %u, format 1's "
			     "is %016" PRIx64, p, h.layout_hash, FIELD(layout_hash), kV1LayoutHash);
	uint64_t hc = XXH3_64bits(in.base, FIELD(header_checksum));
	if (hc != h.header_checksum)
		return m.set(SHMKV_ECHECKSUM, "%s: header checksum at offset %u: stored %016" PRIx64
			     ", computed %016" PRIx64 " over bytes [0, %u)", p,
			     FIELD(header_checksum), h.header_checksum, hc, FIELD(header_checksum));
	if (h.file_size > in.size)
		return m.set(SHMKV_ETRUNCATED, "%s: %" PRIu64 " bytes, its header (file_size at "
			     "offset %u) says %" PRIu64 ": truncated", p, in.size, FIELD(file_size),
			     h.file_size);
	if (h.file_size < in.size)
		return m.set(SHMKV_ECORRUPT, "%s: %" PRIu64 " unexpected bytes after the image end at "
			     "%" PRIu64 " (file_size at offset %u)", p, in.size - h.file_size,
			     h.file_size, FIELD(file_size));
#define BAD(...) m.set(SHMKV_ECORRUPT, __VA_ARGS__)
	if (h.header_size != SHMKV_HEADER_SIZE)
		return BAD("%s: header_size %u at offset %u, format 1's is %u", p, h.header_size,
			   FIELD(header_size), SHMKV_HEADER_SIZE);
	if (h.file_size % SHMKV_FILE_ALIGN || h.file_size > SHMKV_MAX_IMAGE_SIZE)
		return BAD("%s: file_size %" PRIu64 " at offset %u: not a multiple of %u, or over "
			   "the format's limit", p, h.file_size, FIELD(file_size), SHMKV_FILE_ALIGN);
	if (h.flags & ~kV1KnownFlags)
		return BAD("%s: header flags %" PRIx64 " at offset %u: format 1 knows 0x1 (dedup)", p,
			   h.flags, FIELD(flags));
	if (h.bucket_slots != kV1BucketSlots)
		return BAD("%s: bucket_slots %u at offset %u, format 1's is %u", p, h.bucket_slots,
			   FIELD(bucket_slots), kV1BucketSlots);
	if (h.hash_bits < 1 || h.hash_bits > 64)
		return BAD("%s: hash_bits %u at offset %u, not in 1..64", p, h.hash_bits,
			   FIELD(hash_bits));
	if (h.bucket_count < 1 || h.bucket_count > h.file_size / kV1BucketBytes)
		return BAD("%s: bucket_count %" PRIu64 " at offset %u does not fit the image", p,
			   h.bucket_count, FIELD(bucket_count));
	if (h.entry_count > h.bucket_count * kV1BucketSlots)
		return BAD("%s: entry_count %" PRIu64 " at offset %u exceeds the %" PRIu64
			   " index slots", p, h.entry_count, FIELD(entry_count),
			   h.bucket_count * kV1BucketSlots);
	if (h.max_probe >= h.bucket_count)
		return BAD("%s: max_probe %u at offset %u not below bucket_count %" PRIu64, p,
			   h.max_probe, FIELD(max_probe), h.bucket_count);
	if (h.name[sizeof h.name - 1] != 0)
		return BAD("%s: name at offset %u is not NUL-terminated", p, FIELD(name));
	if (h.reserved0 || !all_zero((const uint8_t *)h.reserved, sizeof h.reserved))
		return BAD("%s: reserved header fields (offsets %u, %u..%u) are not zero", p,
			   FIELD(reserved0), FIELD(reserved), FIELD(header_checksum) - 1);
	if (h.section_count != kV1Sections)
		return BAD("%s: section_count %u at offset %u, format 1 has %u", p, h.section_count,
			   FIELD(section_count), kV1Sections);
	uint64_t prev_end = SHMKV_HEADER_SIZE;
	for (uint32_t i = 0; i < SHMKV_MAX_SECTIONS; i++) {
		const shmkv_section_desc &s = h.sections[i];
		const unsigned at = FIELD(sections) + i * (unsigned)sizeof s;
		if (i >= kV1Sections) {
			if (!all_zero((const uint8_t *)&s, sizeof s))
				return BAD("%s: unused section slot %u at offset %u is not zero", p, i, at);
			continue;
		}
		const char *nm = shmkv_section_name(i + 1);
		if (s.kind != i + 1 || s.flags)
			return BAD("%s: section %u at offset %u: kind %u flags %x, expected kind %u "
				   "(%s) flags 0", p, i, at, s.kind, s.flags, i + 1, nm);
		if (s.offset % kSectionAlign || s.offset < prev_end)
			return BAD("%s: section %s at offset %u: offset %" PRIu64 " is misaligned "
				   "or overlaps the one before (ending at %" PRIu64 ")", p, nm, at,
				   s.offset, prev_end);
		if (s.size > h.file_size || s.offset > h.file_size - s.size)
			return BAD("%s: section %s at offset %u: [%" PRIu64 ", +%" PRIu64 ") runs "
				   "past the image end %" PRIu64, p, nm, at, s.offset, s.size,
				   h.file_size);
		prev_end = s.offset + s.size;
	}
	if (h.sections[0].size != h.bucket_count * kV1BucketBytes)
		return BAD("%s: index section is %" PRIu64 " bytes, %" PRIu64 " buckets of %" PRIu64
			   " need %" PRIu64, p, h.sections[0].size, h.bucket_count, kV1BucketBytes,
			   h.bucket_count * kV1BucketBytes);
	if (h.sections[1].size < h.entry_count * sizeof(shmkv_entry_header))
		return BAD("%s: entries section of %" PRIu64 " bytes too small for the %" PRIu64
			   " entries of entry_count (offset %u)", p, h.sections[1].size,
			   h.entry_count, FIELD(entry_count));
#undef BAD
	return 0;
}

// The bytes no checksum covers are zero (the header's tail, the gaps
// between sections, the file's tail), and every section matches its
// checksum.
int check_sections(const Input &in, ErrMsg &m)
{
	const shmkv_image_header &h = in.h();
	uint64_t from = SHMKV_HEADER_USED;
	for (uint32_t i = 0; i <= kV1Sections; i++) {
		uint64_t to = i < kV1Sections ? h.sections[i].offset : h.file_size;
		for (uint64_t k = from; k < to; k++)
			if (in.base[k])
				return m.set(SHMKV_ECORRUPT, "%s: non-zero byte at offset %" PRIu64
					     " outside every section", in.path, k);
		if (i < kV1Sections)
			from = h.sections[i].offset + h.sections[i].size;
	}
	for (uint32_t i = 0; i < kV1Sections; i++) {
		const shmkv_section_desc &s = h.sections[i];
		uint64_t c = XXH3_64bits(in.base + s.offset, (size_t)s.size);
		if (c != s.checksum)
			return m.set(SHMKV_ECHECKSUM, "%s: section %s [%" PRIu64 ", +%" PRIu64 ") "
				     "checksum mismatch: stored %016" PRIx64 " (offset %u), computed "
				     "%016" PRIx64, in.path, shmkv_section_name(s.kind), s.offset,
				     s.size, s.checksum,
				     FIELD(sections) + i * (unsigned)sizeof s +
					     (unsigned)offsetof(shmkv_section_desc, checksum),
				     c);
	}
	return 0;
}

// One entry of ENTRIES, decoded.
struct Entry {
	const uint8_t *key, *value;
	uint16_t key_len;
	uint8_t type;
	bool shared;
	uint32_t value_len;
	uint64_t end; // image offset just past it (8-aligned)
};

// The entry at image offset pos (inside ENTRIES, its first word not zero),
// decoded by the entry rules (lib/shmkv/tools.h: where the value starts,
// its stored bytes, the entry's size, the value's shape) with every byte
// it reads inside its section: ENTRIES, or VALUES for a shared value.
int decode_entry(const Input &in, uint64_t pos, Entry &e, ErrMsg &m)
{
	const shmkv_image_header &h = in.h();
	const char *p = in.path;
	const uint64_t lo = h.sections[1].offset, hi = lo + h.sections[1].size;
	const uint64_t vlo = h.sections[2].offset, vhi = vlo + h.sections[2].size;
#define BAD(fmt, ...)                                                                              \
	m.set(SHMKV_ECORRUPT, "%s: entry at %" PRIu64 ": " fmt, p, pos, __VA_ARGS__)
	if (hi - pos < sizeof(shmkv_entry_header))
		return BAD("its 8-byte header runs past the entries section [%" PRIu64 ", %" PRIu64
			   ")", lo, hi);
	shmkv_entry_header eh;
	memcpy(&eh, in.base + pos, sizeof eh);
	if (!shmkv_type_desc_of(eh.type))
		return BAD("type %u: format 1 knows types 1..%u", eh.type, SHMKV_TYPE_MAX);
	if (eh.flags & ~SHMKV_EFLAG_KNOWN)
		return BAD("flags %x: format 1 knows 0x1 (shared)", eh.flags);
	e.shared = eh.flags & SHMKV_EFLAG_SHARED;
	if (eh.key_len > hi - pos - sizeof eh)
		return BAD("key of %u bytes runs past the entries section [%" PRIu64 ", %" PRIu64 ")",
			   eh.key_len, lo, hi);
	const uint64_t vpos = pos + shmkv_entry_value_pos(&eh);
	const uint64_t stored = shmkv_value_stored_len(eh.type, eh.value_len);
	uint64_t at;
	if (e.shared) {
		if (vpos > hi || hi - vpos < 8)
			return BAD("its shared-value reference at %" PRIu64 " runs past the entries "
				   "section [%" PRIu64 ", %" PRIu64 ")", vpos, lo, hi);
		memcpy(&at, in.base + vpos, 8);
		if (at % 8 || at < vlo || at > vhi || stored > vhi - at)
			return BAD("shared %s value [%" PRIu64 ", +%" PRIu64 ") is not 8-aligned "
				   "inside the values section [%" PRIu64 ", %" PRIu64 ")",
				   shmkv_type_name(eh.type), at, stored, vlo, vhi);
	} else {
		at = vpos;
		if (vpos > hi || stored > hi - vpos)
			return BAD("%s value of %u bytes runs past the entries section [%" PRIu64
				   ", %" PRIu64 ")", shmkv_type_name(eh.type), eh.value_len, lo, hi);
	}
	char why[256];
	if (shmkv_value_check(eh.type, in.base + at, eh.value_len, why, sizeof why) != 0)
		return BAD("value at %" PRIu64 ": %s", at, why);
	e.end = pos + shmkv_entry_size(eh.type, e.shared, eh.key_len, eh.value_len);
	if (e.end > hi)
		return BAD("its padding to %" PRIu64 " runs past the entries section end %" PRIu64,
			   e.end, hi);
#undef BAD
	e.key = in.base + pos + sizeof eh;
	e.key_len = eh.key_len;
	e.type = eh.type;
	e.value = in.base + at;
	e.value_len = eh.value_len;
	return 0;
}

// ENTRIES in order (lib/FORMAT.md §7: the zero words between entries
// skipped, each entry decoded), each record added to b; then the counts
// against the header. forget: drop the pages read every 65536 entries.
int add_entries(const Input &in, shmkv_builder *b, bool forget, ErrMsg &m)
{
	const shmkv_image_header &h = in.h();
	const uint64_t lo = h.sections[1].offset, hi = lo + h.sections[1].size;
	uint64_t n = 0, shared = 0;
	b->line_word = "entry at";
	for (uint64_t pos = lo; pos < hi;) {
		uint64_t w = 0;
		memcpy(&w, in.base + pos, (size_t)std::min<uint64_t>(8, hi - pos));
		if (w == 0) {
			pos += 8;
			continue;
		}
		Entry e{}; // GCC 12 cannot see decode_entry fill it when it returns 0
		if (int err = decode_entry(in, pos, e, m))
			return err;
		if (++n > h.entry_count)
			return m.set(SHMKV_ECORRUPT, "%s: entry at %" PRIu64 ": the entries section "
				     "holds more than the %" PRIu64 " entries of entry_count (offset "
				     "%u)", in.path, pos, h.entry_count, FIELD(entry_count));
		shared += e.shared;
		shmkv_builder_set_source(b, in.path, pos);
		if (int err = shmkv_builder_add(b, e.key, e.key_len, e.type, e.value, e.value_len))
			return m.set(err, "%s", shmkv_builder_error(b));
		if (forget && n % 65536 == 0)
			drop_pages(in.base, (size_t)in.size);
		pos = e.end;
	}
	if (n != h.entry_count)
		return m.set(SHMKV_ECORRUPT, "%s: the entries section [%" PRIu64 ", %" PRIu64 ") holds "
			     "%" PRIu64 " entries, entry_count (offset %u) says %" PRIu64, in.path,
			     lo, hi, n, FIELD(entry_count), h.entry_count);
	if (shared != h.dedup_refs)
		return m.set(SHMKV_ECORRUPT, "%s: %" PRIu64 " entries use shared values, dedup_refs "
			     "(offset %u) says %" PRIu64, in.path, shared, FIELD(dedup_refs),
			     h.dedup_refs);
	return 0;
}

#undef FIELD

} // namespace

} // namespace shmkv_build

extern "C" int shmkv_build_upgrade(const char *out, const char *in_path,
				   const shmkv_join_options *opt, shmkv_build_stats *stats, char *err,
				   size_t err_len)
{
	using namespace shmkv_build;
	ErrMsg m{err, err_len};
	m.set(0, "%s", "");
	shmkv_join_options jo = rebuild_options(opt);
	if (!out || !*out)
		return m.set(-EINVAL, "upgrade: no output given");
	if (!in_path || !*in_path)
		return m.set(-EINVAL, "upgrade: no input given");
	Input in;
	in.path = in_path;
	int rc = open_input(in, m);
	if (!rc)
		rc = check_header(in, m);
	if (!rc)
		rc = check_sections(in, m);
	if (rc)
		return rc;
	if (jo.memory_limit)
		drop_pages(in.base, (size_t)in.size); // checked: all read once
	shmkv_builder *b = nullptr;
	std::unique_ptr<shmkv_builder, void (*)(shmkv_builder *)> own(nullptr, shmkv_builder_free);
	// the header's options, the bucket count chosen afresh
	rc = rebuild_builder(&in.h(), false, jo, out, &b, m);
	own.reset(b);
	if (!rc && (rc = note_input(b, in_path, in.st)) != 0) // never the output
		m.set(rc, "%s", shmkv_builder_error(b));
	if (!rc) {
		try {
			rc = add_entries(in, b, jo.memory_limit != 0, m);
		} catch (const std::bad_alloc &) {
			rc = m.set(-ENOMEM, "%s: out of memory", in_path);
		}
	}
	return rc ? rc : rebuild_finish(b, out, stats, m);
}
