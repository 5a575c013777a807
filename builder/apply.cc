// builder/apply.cc - shmkv_build_apply(): a base and a chain of its deltas
// (lib/FORMAT.md §19.5) become the image a fresh build of the merged records
// gives, byte for byte, or the chain one delta of the base. The one owner of
// apply: `shmctl image apply` and the Python package's shmkv.apply call it.
//
// The merge is the builder's: the base's records, then each delta's in chain
// order, are records of one build whose duplicates keep the last record of
// a key (each image holds a key once: all are verified whole first); a kept
// tombstone then leaves with its key (or, merging into one delta, stays
// where the base holds its key). So the merge is as bounded in memory as a
// build (the spilling build), and its bytes are a build's.
#include <cinttypes>
#include <cstring>
#include <memory>

#include "apply.h"

namespace {

using namespace shmkv_build;

std::string seq_of(const ImageId &d)
{
	return "seq " + std::to_string(d.did.seq);
}

// The checks of lib/FORMAT.md §19.4 and §19.5 on the chain deltas[0..n) of
// base: each a delta of base, with its seed and hash bits; the first applies
// to base directly (prev 0), each next follows the one given before it.
int check_chain(const char *bp, const ImageId &base, const char *const *dp,
		const std::vector<ImageId> &d, ErrMsg &m)
{
	if (base.delta)
		return m.set(SHMKV_EBASE, "%s is a delta image (%s, of base %s): apply starts from the "
			     "plain image its chain applies to", bp, seq_of(base).c_str(),
			     hex64(base.did.base_checksum).c_str());
	for (size_t k = 0; k < d.size(); k++) {
		const ImageId &x = d[k];
		const char *p = dp[k];
		if (!x.delta)
			return m.set(SHMKV_EBASE, "%s is a plain image, not a delta: apply takes the base, "
				     "then its deltas in chain order", p);
		if (x.did.base_checksum != base.checksum || x.did.base_size != base.file_size)
			return m.set(SHMKV_EBASE, "%s (%s) is a delta of base %s (%" PRIu64 " bytes), not "
				     "of %s (%s, %" PRIu64 " bytes)", p, seq_of(x).c_str(),
				     hex64(x.did.base_checksum).c_str(), x.did.base_size, bp,
				     hex64(base.checksum).c_str(), base.file_size);
		if (x.seed != base.seed || x.hash_bits != base.hash_bits)
			return m.set(SHMKV_EBASE, "%s (%s) has seed %s and hash_bits %u, its base %s has "
				     "seed %s and hash_bits %u: not a delta of this image", p,
				     seq_of(x).c_str(), hex64(x.seed).c_str(), x.hash_bits, bp,
				     hex64(base.seed).c_str(), base.hash_bits);
		if (k == 0 && x.did.prev != 0)
			return m.set(SHMKV_EBASE, "%s (%s) follows delta %s, but it is the first delta "
				     "given: give the chain from its first delta (the one that applies "
				     "to %s directly, prev 0), in order", p, seq_of(x).c_str(),
				     hex64(x.did.prev).c_str(), bp);
		if (k > 0 && x.did.prev != d[k - 1].checksum)
			return m.set(SHMKV_EBASE, "%s (%s) follows delta %s, not %s (%s, %s), the delta "
				     "given before it: give the chain in order, each delta once", p,
				     seq_of(x).c_str(),
				     x.did.prev ? hex64(x.did.prev).c_str() : "none (prev 0: it applies "
									       "to the base directly)",
				     dp[k - 1], seq_of(d[k - 1]).c_str(),
				     hex64(d[k - 1].checksum).c_str());
	}
	return 0;
}

// Merging into one delta: a tombstone stays where the base holds its key
// (expired or not); elsewhere it would change nothing (§19.2).
bool base_holds(void *ctx, const uint8_t *key, size_t len)
{
	uint32_t expires;
	return shmkv_get_expires((const shmkv *)ctx, key, len, &expires) != SHMKV_ENOTFOUND;
}

} // namespace

namespace shmkv_build {

int open_chain(const char *base, const char *const *deltas, size_t n, bool trusted, Chain &c,
	       ErrMsg &m)
{
	try {
		c.dbs.assign(n + 1, nullptr);
		c.deltas.resize(n);
	} catch (const std::bad_alloc &) {
		return m.set(-ENOMEM, "apply: out of memory");
	}
	int rc;
	if (trusted) {
		char why[512] = "";
		rc = shmkv_open_file_diag(base, 0, &c.dbs[0], why, sizeof why); // checksums too
		if (rc) {
			size_t k = strlen(base);
			return strncmp(why, base, k) || why[k] != ':' ? m.set(rc, "%s: %s", base, why)
								      : m.set(rc, "%s", why);
		}
	} else {
		rc = open_verified(base, &c.dbs[0], m);
	}
	if (!rc)
		image_id_of(c.dbs[0], &c.base);
	for (size_t k = 0; k < n && !rc; k++)
		if (!(rc = open_verified(deltas[k], &c.dbs[k + 1], m)))
			image_id_of(c.dbs[k + 1], &c.deltas[k]);
	return rc ? rc : check_chain(base, c.base, deltas, c.deltas, m);
}

int merge_by_build(const char *out, const char *base, const char *const *deltas, size_t n,
		   bool as_delta, const shmkv_join_options &jo, Chain &c, shmkv_build_stats *stats,
		   ErrMsg &m, bool no_sync)
{
	// The output's header: the base's (lib/FORMAT.md §19.5), or, for one
	// delta, the last delta's name, created time and dedup flag.
	const ImageId &bid = c.base, &last = c.deltas[n - 1];
	shmkv_builder *b = nullptr;
	std::unique_ptr<shmkv_builder, void (*)(shmkv_builder *)> own(nullptr, shmkv_builder_free);
	int rc = rebuild_builder(shmkv_header(as_delta ? c.dbs[n] : c.dbs[0]), false, jo, out, &b,
				 m);
	own.reset(b);
	if (rc)
		return rc;
	b->no_sync = no_sync;
	b->opt.on_duplicate = SHMKV_DUP_LAST; // a later delta's word on a key wins
	b->removes = true;
	if (as_delta) {
		if ((rc = start_delta(b, DeltaId{bid.checksum, bid.file_size, 0, last.did.seq}, bid.seed,
				      bid.hash_bits, base, "")) != 0)
			return m.set(rc, "%s", shmkv_builder_error(b));
		b->keep_tomb = base_holds;
		b->keep_tomb_ctx = c.dbs[0];
	} else {
		b->drop_tombs = true;
	}
	rc = rebuild_input(b, base, m);
	for (size_t k = 0; k < n && !rc; k++) // no input is the output
		rc = rebuild_input(b, deltas[k], m);
	bool forget = jo.memory_limit != 0;
	if (!rc && !as_delta)
		rc = add_image(b, base, c.dbs[0], forget, m);
	for (size_t k = 0; k < n && !rc; k++)
		rc = add_image(b, deltas[k], c.dbs[k + 1], forget, m);
	return rc ? rc : rebuild_finish(b, out, stats, m);
}

} // namespace shmkv_build

extern "C" int shmkv_build_apply(const char *out, const char *base, const char *const *deltas,
				 size_t n, int as_delta, const shmkv_join_options *opt,
				 shmkv_build_stats *stats, char *err, size_t err_len)
{
	ErrMsg m{err, err_len};
	m.set(0, "%s", "");
	shmkv_join_options jo = rebuild_options(opt);
	if (!out || !*out)
		return m.set(-EINVAL, "apply: no output given");
	if (!base || !*base)
		return m.set(-EINVAL, "apply: no base image given");
	if (n == 0 || !deltas)
		return m.set(-EINVAL, "apply: no delta given");
	Chain c;
	int rc = open_chain(base, deltas, n, false, c, m);
	return rc ? rc : merge_by_build(out, base, deltas, n, as_delta != 0, jo, c, stats, m);
}
