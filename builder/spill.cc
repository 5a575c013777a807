// builder/spill.cc - a build bounded in memory (builder/README.md, "Memory"):
// when the records outgrow the memory limit, they go to partition files by
// the top bits of their key hash (spill_build.cc builds the image from
// them); the limit's API and its default.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "layout.h"
#include "parallel.h"
#include "spill.h"

namespace shmkv_build {

void SpillDelete::operator()(Spill *s) const
{
	delete s;
}

uint64_t inmem_estimate(const shmkv_builder *b, uint64_t extra_input)
{
	unsigned T = b->threads ? b->threads : default_threads();
	// a file is mapped whole, and its records take about as much again, plus
	// a record's fixed cost per short line
	return b->arena.bytes() + (uint64_t)b->recs.size() * kInMemPerRecord + 2 * extra_input +
	       extra_input / 64 * kInMemPerRecord + (uint64_t)T * (8 << 20);
}

namespace {

std::string spill_dir(const shmkv_builder *b)
{
	if (!b->tmpdir.empty())
		return b->tmpdir;
	const char *t = getenv("TMPDIR");
	if (t && *t)
		return t;
	if (!b->out_dir.empty())
		return b->out_dir;
	return "/tmp";
}

} // namespace

int flush_run(shmkv_builder *b)
{
	Spill &s = *b->spill;
	const auto &o = b->opt;
	for (size_t i = 0; i < b->recs.size(); i++) {
		const Record &r = b->recs[i];
		if (b->part_n) { // records added before set_part(): checked as finish() does
			uint64_t bk = shmkv_home_bucket(shmkv_key_hash(o.seed, o.hash_bits, r.key, r.key_len),
							o.buckets);
			if (bk < b->part_lo || bk >= b->part_hi) {
				if (!b->part_filter)
					return part_error(b, b->where(r, b->seq0 + i), r.key, r.key_len);
				continue;
			}
		}
		if (s.vbits && !never_shared(r.type, r.val_len))
			s.saw_value(Spill::value_hash(r.val, r.val_len, r.type));
		SRec h;
		memset(&h, 0, sizeof h);
		h.h = shmkv_key_hash(o.seed, o.hash_bits, r.key, r.key_len);
		h.seq = b->seq0 + i;
		h.line = r.line;
		h.src = r.src;
		h.val_len = r.val_len;
		h.key_len = r.key_len;
		h.type = r.type;
		h.flags = r.expires ? kSRecExpires : 0;
		int err = s.keys.append(top(h.h), h, r.key, r.key_len, r.val, r.val_len, &r.expires,
					r.expires ? 4 : 0);
		if (err)
			return err;
	}
	b->seq0 += b->recs.size();
	Records().swap(b->recs);
	b->arena = Arena();
	return 0;
}


int spill_check(shmkv_builder *b)
{
	b->since_check = 0;
	if (!b->spill) {
		if (inmem_estimate(b, 0) <= b->mem_limit)
			return 0;
		try {
			b->spill.reset(new Spill(b));
		} catch (const std::bad_alloc &) {
			return b->fail(-ENOMEM, "out of memory");
		}
		b->spill->dir = spill_dir(b);
		int err = b->spill->keys.open(b, b->spill->dir, size_t(1) << kTopBits, b->spill->cap);
		if (err)
			return err;
	} else if (b->arena.bytes() + b->recs.capacity() * sizeof(Record) <= b->mem_limit / 2) {
		return 0;
	}
	return flush_run(b);
}

} // namespace shmkv_build

using namespace shmkv_build;

extern "C" int shmkv_builder_set_memory_limit(shmkv_builder *b, uint64_t bytes, const char *tmpdir)
{
	if (b->finished)
		return b->fail(-EINVAL, "builder already finished");
	if (bytes && bytes < (uint64_t(1) << 20))
		return b->fail(-EINVAL, "memory limit of %llu bytes: at least 1 MiB",
			       (unsigned long long)bytes);
	b->mem_limit = bytes;
	b->tmpdir = tmpdir ? tmpdir : "";
	return 0;
}

namespace {
// A number from a /proc or /sys file (its first field), or 0.
uint64_t read_u64(const char *path, const char *key)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char line[256];
	uint64_t v = 0;
	size_t kl = key ? strlen(key) : 0;
	while (fgets(line, sizeof line, f)) {
		if (key && strncmp(line, key, kl) != 0)
			continue;
		v = strtoull(line + kl, nullptr, 10);
		break;
	}
	fclose(f);
	return v;
}
} // namespace

extern "C" uint64_t shmkv_build_default_memory_limit(void)
{
	uint64_t avail = read_u64("/proc/meminfo", "MemAvailable:") << 10;
	// cgroup v2: what memory.max leaves above memory.current
	char cg[512] = "", path[700];
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (f) {
		char line[512];
		while (fgets(line, sizeof line, f))
			if (strncmp(line, "0::", 3) == 0) {
				snprintf(cg, sizeof cg, "%s", line + 3);
				cg[strcspn(cg, "\n")] = 0;
			}
		fclose(f);
	}
	if (*cg) {
		snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", strcmp(cg, "/") ? cg : "");
		uint64_t max = read_u64(path, nullptr);
		snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", strcmp(cg, "/") ? cg : "");
		uint64_t cur = read_u64(path, nullptr);
		if (max && max > cur && (!avail || max - cur < avail))
			avail = max - cur;
	}
	uint64_t lim = avail / 2;
	return lim < (uint64_t(64) << 20) ? uint64_t(64) << 20 : lim;
}
