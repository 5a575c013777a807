// builder/delta.cc - shmkv_builder_set_delta(): a build that writes a delta
// image (lib/FORMAT.md §19) of a base, optionally after another delta of
// its chain; the identities of the images it names.
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <memory>
#include <sys/stat.h>

#include "delta.h"
#include "rebuild.h"

namespace shmkv_build {

std::string hex64(uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
	return buf;
}

void image_id_of(const shmkv *db, ImageId *id)
{
	const shmkv_image_header *h = shmkv_header(db);
	id->checksum = shmkv_checksum(db);
	id->file_size = h->file_size;
	id->seed = h->hash_seed;
	id->hash_bits = h->hash_bits;
	id->created = h->created_unix;
	id->flags = h->flags;
	memcpy(id->name, h->name, sizeof id->name);
	id->name[sizeof id->name - 1] = 0;
	id->delta = shmkv_is_delta(db) != 0;
	shmkv_delta_id d;
	if (shmkv_delta_id_of(db, &d) == 0)
		id->did = DeltaId{d.base_checksum, d.base_size, d.prev, d.seq};
}

int read_image_id(const char *path, ImageId *id, std::string &why)
{
	char msg[512] = "";
	shmkv *db = nullptr;
	int err = shmkv_open_file_diag(path, 0, &db, msg, sizeof msg);
	if (err) {
		size_t n = strlen(path);
		why = !strncmp(msg, path, n) && msg[n] == ':' ? msg : std::string(path) + ": " + msg;
		return err;
	}
	const shmkv_image_header *h = shmkv_header(db);
	image_id_of(db, id);
	drop_pages(h, (size_t)h->file_size); // read once, at open
	shmkv_close(db);
	return 0;
}

int start_delta(shmkv_builder *b, const DeltaId &did, uint64_t seed, unsigned hash_bits,
		const std::string &base, const std::string &after)
{
	auto &o = b->opt;
	if ((o.fixed & SHMKV_OPT_SEED) && o.seed != seed)
		return b->fail(SHMKV_EINPUT, "the seed %s differs from the base %s's, %s: a delta has "
			       "its base's seed; leave the seed unset", hex64(o.seed).c_str(),
			       base.c_str(), hex64(seed).c_str());
	if ((o.fixed & SHMKV_OPT_HASH_BITS) && o.hash_bits != hash_bits)
		return b->fail(SHMKV_EINPUT, "hash_bits %u differs from the base %s's, %u: a delta "
			       "has its base's hash bits; leave them unset", o.hash_bits,
			       base.c_str(), hash_bits);
	o.seed = seed;
	o.hash_bits = hash_bits;
	o.fixed |= SHMKV_OPT_SEED | SHMKV_OPT_HASH_BITS;
	b->delta = true;
	b->removes = true;
	b->did = did;
	b->delta_base = base;
	b->delta_after = after;
	return 0;
}

} // namespace shmkv_build

using namespace shmkv_build;

// The checks before a delta build starts: 0 or b->fail(...).
static int can_start_delta(shmkv_builder *b)
{
	if (b->finished)
		return b->fail(-EINVAL, "builder already finished");
	if (b->delta)
		return b->fail(-EINVAL, "the builder is already a delta of %s", b->delta_base.c_str());
	if (b->nrecs() || b->seq0)
		return b->fail(-EINVAL, "name a delta's base before adding records");
	if (b->part_n)
		return b->fail(-EINVAL, "a delta is built whole: a part build (--part) is for plain "
					"images");
	return 0;
}

static int refuse_delta_base(shmkv_builder *b, const char *base, const ImageId &bid)
{
	return b->fail(SHMKV_EBASE,
		       "%s is a delta image (seq %" PRIu64 ", of base %s): the base of a delta "
		       "is a plain image; name the image its chain starts from", base,
		       bid.did.seq, hex64(bid.did.base_checksum).c_str());
}

extern "C" int shmkv_builder_set_delta_of(shmkv_builder *b, const struct shmkv *base,
					  const char *label)
{
	if (!label || !*label)
		label = "the base";
	if (!base)
		return b->fail(-EINVAL, "a delta build needs its base image");
	int err = can_start_delta(b);
	if (err)
		return err;
	ImageId bid;
	image_id_of(base, &bid);
	if (bid.delta)
		return refuse_delta_base(b, label, bid);
	if (!(b->opt.fixed & SHMKV_OPT_NAME))
		memcpy(b->opt.name, bid.name, sizeof b->opt.name);
	return start_delta(b, DeltaId{bid.checksum, bid.file_size, 0, 1}, bid.seed, bid.hash_bits,
			   label, "");
}

extern "C" int shmkv_builder_set_delta(shmkv_builder *b, const char *base, const char *after)
{
	if (!base || !*base)
		return b->fail(-EINVAL, "a delta build needs its base image");
	int err = can_start_delta(b);
	if (err)
		return err;
	std::string why;
	ImageId bid, aid;
	err = read_image_id(base, &bid, why);
	if (err)
		return b->fail(err, "base %s", why.c_str());
	if (bid.delta)
		return refuse_delta_base(b, base, bid);
	DeltaId did{bid.checksum, bid.file_size, 0, 1};
	if (after && *after) {
		if ((err = read_image_id(after, &aid, why)))
			return b->fail(err, "delta to follow: %s", why.c_str());
		if (!aid.delta)
			return b->fail(SHMKV_EBASE, "%s is a plain image, not a delta: the delta to "
				       "follow (--after) is the last delta of the chain", after);
		if (aid.did.base_checksum != bid.checksum || aid.did.base_size != bid.file_size)
			return b->fail(SHMKV_EBASE,
				       "%s (seq %" PRIu64 ") is a delta of base %s (%" PRIu64 " bytes), "
				       "not of %s (%s, %" PRIu64 " bytes): the delta to follow must have "
				       "the same base", after, aid.did.seq,
				       hex64(aid.did.base_checksum).c_str(), aid.did.base_size, base,
				       hex64(bid.checksum).c_str(), bid.file_size);
		did.prev = aid.checksum;
		did.seq = aid.did.seq + 1;
	}
	struct stat st;
	for (const char *p : {base, after}) // neither may be the output
		if (p && *p && (stat(p, &st) != 0 || (err = note_input(b, p, st)) != 0))
			return err ? err : b->fail(-errno, "%s: %s", p, strerror(errno));
	if (!(b->opt.fixed & SHMKV_OPT_NAME)) // the base's, unless given (a meta line may)
		memcpy(b->opt.name, bid.name, sizeof b->opt.name);
	return start_delta(b, did, bid.seed, bid.hash_bits, base, after && *after ? after : "");
}
