// builder/delta.h - what a delta build adds to an image (lib/FORMAT.md §19):
// its key filter (§19.3), written in key order as the last section, and the
// identity of an image a delta names (its base, the delta it follows).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "internal.h"

namespace shmkv_build {

// The filter of a delta of `records` records (upserts and tombstones): our
// builder's convention, words = max(1, ceil(records / 4)), 16 bits a key.
inline uint64_t filter_words(uint64_t records)
{
	return std::max<uint64_t>(1, records / 4 + (records % 4 != 0));
}

// Where a key of hash h sets its bits (lib/FORMAT.md §19.3): lib's rule
// (lib/shmkv/tools.h), so that builder and reader cannot disagree.
inline uint64_t filter_word(uint64_t h, uint64_t words)
{
	return shmkv_delta_filter_word(h, words);
}
inline uint64_t filter_mask(uint64_t h)
{
	return shmkv_delta_filter_mask(h);
}

// The filter's words from the kept keys' hashes in key order (ascending h:
// the word index never decreases), each word handed to put(word) once it is
// final, so that no more than one is held.
class FilterStream {
public:
	explicit FilterStream(uint64_t words) : words_(words) {}
	template <typename Put>
	int add(uint64_t h, Put put)
	{
		uint64_t w = filter_word(h, words_);
		while (at_ < w) {
			if (int err = put(cur_))
				return err;
			cur_ = 0;
			at_++;
		}
		cur_ |= filter_mask(h);
		return 0;
	}
	// The last words, to the end.
	template <typename Put>
	int finish(Put put)
	{
		for (; at_ < words_; at_++) {
			if (int err = put(cur_))
				return err;
			cur_ = 0;
		}
		return 0;
	}

private:
	uint64_t words_, at_ = 0, cur_ = 0;
};

// An image a delta build names, as its header says: opened with the
// reader's checks (every checksum), plain or delta.
struct ImageId {
	uint64_t checksum = 0, file_size = 0, seed = 0;
	unsigned hash_bits = 0;
	bool delta = false;
	DeltaId did;            // a delta's base and chain position
	char name[64] = {0};
	int64_t created = 0;
	uint64_t flags = 0;
};

// The identity of an open image (its header's).
void image_id_of(const shmkv *db, ImageId *id);

// Opens path with the reader's checks at open (lib/FORMAT.md §12, §19.4)
// and reads its identity. 0, or the reader's error with why ("path: ...").
int read_image_id(const char *path, ImageId *id, std::string &why);

// "0x%016llx": how messages write a checksum.
std::string hex64(uint64_t v);

// Makes b a delta build of the identity did (the base's seed and hash bits;
// tombstones accepted); paths for messages. 0 or an error set on b.
int start_delta(shmkv_builder *b, const DeltaId &did, uint64_t seed, unsigned hash_bits,
		const std::string &base, const std::string &after);

} // namespace shmkv_build
