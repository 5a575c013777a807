package org.shmkv;

import static org.shmkv.Format.*;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;

/**
 * The header block and section table (FORMAT.md §3, §4) and the open checks
 * of §12, in the C reader's order, so that an image gets the same error
 * from both. The version check comes before the layout hash's: a format 1
 * image is refused as retired (Version), never as another layout. A delta
 * image (§19) is told by its layout hash, and checked as §19.4 adds: its
 * DELTA flag, four sections (the fourth the filter), the reserved words
 * naming its base and chain.
 */
final class Header {
	final String source;
	final long flags, fileSize, entryCount, bucketCount, hashSeed, createdUnix, dedupRefs, builderVersion;
	final int hashBits, maxProbe;
	final String name;
	/** The header checksum: the image's identity as a base or a chain's prev (§19.1). */
	final long checksum;
	/** A delta image (§19): its layout hash is the delta one. */
	final boolean delta;
	/** The sections used: 3, or a delta's 4. */
	final int sections;
	/** A delta's reserved words (§19.1): its base's header checksum and size, its chain's prev and seq; 0 in a plain image. */
	final long baseChecksum, baseSize, prev, seq;
	/** Each section's offset, size and checksum, by kind - 1. */
	final long[] secOff = new long[DELTA_SECTION_COUNT], secSize = new long[DELTA_SECTION_COUNT],
			secSum = new long[DELTA_SECTION_COUNT];

	/**
	 * Checks 1-10 of FORMAT.md §12 on an image of size bytes (the file's
	 * length, or a segment's recorded image size) and reads the header;
	 * source names the image in messages.
	 */
	Header(MemorySegment s, long size, String source) {
		this.source = source;
		long n = Math.min(size, MAGIC.length());
		for (int i = 0; i < n; i++)
			if (Bytes.u8(s, H_MAGIC + i) != MAGIC.charAt(i))
				throw new ShmkvException.Magic(source, "its first bytes are " + Bytes.hexBytes(s, 0, n) + ", not "
						+ MAGIC);
		if (size < HEADER_SIZE)
			throw new ShmkvException.Truncated(source, size + " bytes, shorter than the " + HEADER_SIZE
					+ "-byte header");
		long version = Bytes.u32(s, H_FORMAT_VERSION);
		if (version == RETIRED_VERSION)
			throw new ShmkvException.Version(source, RETIRED_MESSAGE);
		if (version != VERSION)
			throw new ShmkvException.Version(source, unknownVersion(version));
		long layout = Bytes.u64(s, H_LAYOUT_HASH);
		if (layout != LAYOUT_HASH && layout != DELTA_LAYOUT_HASH)
			throw new ShmkvException.Layout(source, Bytes.hex(layout) + ", this reader's is " + Bytes.hex(LAYOUT_HASH)
					+ " (format " + VERSION + "; " + Bytes.hex(DELTA_LAYOUT_HASH) + " for a delta image)");
		delta = layout == DELTA_LAYOUT_HASH;
		long stored = Bytes.u64(s, H_HEADER_CHECKSUM), computed = Xxh3.checksum(s, 0, H_HEADER_CHECKSUM);
		if (stored != computed)
			throw new ShmkvException.Checksum(source, "header: stored " + Bytes.hex(stored) + ", computed "
					+ Bytes.hex(computed));
		checksum = stored;
		fileSize = Bytes.u64(s, H_FILE_SIZE);
		if (Long.compareUnsigned(fileSize, size) > 0)
			throw new ShmkvException.Truncated(source, size + " bytes, its header says " + Long.toUnsignedString(fileSize));
		if (Long.compareUnsigned(fileSize, size) < 0)
			throw corrupt((size - fileSize) + " unexpected bytes after the image end at " + fileSize);
		long headerSize = Bytes.u32(s, H_HEADER_SIZE);
		flags = Bytes.u64(s, H_FLAGS);
		entryCount = Bytes.u64(s, H_ENTRY_COUNT);
		bucketCount = Bytes.u64(s, H_BUCKET_COUNT);
		long bucketSlots = Bytes.u32(s, H_BUCKET_SLOTS);
		hashBits = (int) Bytes.u32(s, H_HASH_BITS);
		hashSeed = Bytes.u64(s, H_HASH_SEED);
		maxProbe = (int) Bytes.u32(s, H_MAX_PROBE);
		long sectionCount = Bytes.u32(s, H_SECTION_COUNT);
		builderVersion = Bytes.u32(s, H_BUILDER_VERSION);
		createdUnix = Bytes.u64(s, H_CREATED_UNIX);
		dedupRefs = Bytes.u64(s, H_DEDUP_REFS);
		if (headerSize != HEADER_SIZE)
			throw corrupt("header_size " + headerSize + ", expected " + HEADER_SIZE);
		if (fileSize % FILE_ALIGN != 0)
			throw corrupt("image size " + fileSize + " is not a multiple of " + FILE_ALIGN);
		if (fileSize > MAX_IMAGE_SIZE)
			throw corrupt("image size " + fileSize + " exceeds the format's limit " + MAX_IMAGE_SIZE);
		long known = delta ? DELTA_HEADER_FLAGS : HEADER_FLAGS;
		if ((flags & ~known) != 0)
			throw corrupt("unknown header flags 0x" + Long.toHexString(flags & ~known));
		if (delta && (flags & FLAG_DELTA) == 0)
			throw corrupt("the delta layout hash without the DELTA header flag");
		if (bucketSlots != BUCKET)
			throw corrupt("bucket_slots " + bucketSlots + ", expected " + BUCKET);
		if (hashBits < 1 || hashBits > 64)
			throw corrupt("hash_bits " + Integer.toUnsignedString(hashBits) + " out of range 1..64");
		if (bucketCount < 1 || Long.compareUnsigned(bucketCount, fileSize / BUCKET) > 0)
			throw corrupt("bucket_count " + Long.toUnsignedString(bucketCount) + " does not fit the image");
		if (Long.compareUnsigned(entryCount, MAX_RECORDS * bucketCount) > 0)
			throw corrupt("entry_count " + Long.toUnsignedString(entryCount) + " exceeds the " + MAX_RECORDS * bucketCount
					+ " records the index can hold");
		if (maxProbe < 0 || maxProbe >= bucketCount)
			throw corrupt("max_probe " + Integer.toUnsignedString(maxProbe) + " not below bucket_count " + bucketCount);
		if (Bytes.u8(s, H_NAME + NAME_MAX) != 0)
			throw corrupt("name is not NUL-terminated");
		// a delta's reserved[0..3] name its base and chain (§19.1); the rest, and a plain image's all, are zero
		int named = delta ? DELTA_WORDS : 0;
		if (Bytes.u32(s, H_RESERVED0) != 0 || Bytes.firstNonZero(s, H_RESERVED + 8L * named,
				H_HEADER_CHECKSUM - H_RESERVED - 8L * named) >= 0)
			throw corrupt("reserved header fields are not zero");
		baseChecksum = delta ? reserved(s, D_BASE_CHECKSUM) : 0;
		baseSize = delta ? reserved(s, D_BASE_SIZE) : 0;
		prev = delta ? reserved(s, D_PREV) : 0;
		seq = delta ? reserved(s, D_SEQ) : 0;
		if (delta && (baseSize == 0 || baseSize % FILE_ALIGN != 0))
			throw corrupt("delta base_size " + Long.toUnsignedString(baseSize) + " is not a non-zero multiple of "
					+ FILE_ALIGN);
		if (delta && seq == 0)
			throw corrupt("delta seq 0: a delta's place in its chain is 1 or more");
		sections = delta ? DELTA_SECTION_COUNT : SECTION_COUNT;
		if (sectionCount != sections)
			throw corrupt("section_count " + sectionCount + ", expected " + sections + (delta ? " in a delta" : ""));
		long prevEnd = HEADER_SIZE;
		for (int i = 0; i < MAX_SECTIONS; i++) {
			long d = H_SECTIONS + (long) SECTION_SIZE * i;
			if (i >= sections) {
				if (Bytes.firstNonZero(s, d, SECTION_SIZE) >= 0)
					throw corrupt("unused section slot " + i + " is not zero");
				continue;
			}
			long kind = Bytes.u32(s, d + S_KIND), sflags = Bytes.u32(s, d + S_FLAGS);
			long off = Bytes.u64(s, d + S_OFFSET), sz = Bytes.u64(s, d + S_SIZE);
			String nm = KIND_NAMES[i + 1];
			if (kind != i + 1)
				throw corrupt("section " + i + " has kind " + kind + ", expected " + (i + 1) + " (" + nm + ")");
			if (sflags != 0)
				throw corrupt("section " + nm + " has unknown flags 0x" + Long.toHexString(sflags));
			if (off % SECTION_ALIGN != 0 || Long.compareUnsigned(off, prevEnd) < 0)
				throw corrupt("section " + nm + " offset " + Long.toUnsignedString(off) + " is misaligned or overlaps");
			if (Long.compareUnsigned(sz, fileSize) > 0 || Long.compareUnsigned(off, fileSize - sz) > 0)
				throw corrupt("section " + nm + " [" + Long.toUnsignedString(off) + ", +" + Long.toUnsignedString(sz)
						+ ") runs past the image end " + fileSize);
			if (kind == KIND_FILTER && (sz == 0 || sz % 8 != 0))
				throw corrupt("section filter is " + Long.toUnsignedString(sz) + " bytes, not a non-zero multiple of 8");
			secOff[i] = off;
			secSize[i] = sz;
			secSum[i] = Bytes.u64(s, d + S_CHECKSUM);
			prevEnd = off + sz;
		}
		if (secSize[0] != bucketCount * BUCKET)
			throw corrupt("index section is " + secSize[0] + " bytes, " + bucketCount + " buckets need "
					+ bucketCount * BUCKET);
		if (secOff[0] % BUCKET != 0)
			throw corrupt("index section offset " + secOff[0] + " is not a multiple of " + BUCKET);
		int len = 0;
		while (len < NAME_MAX && Bytes.u8(s, H_NAME + len) != 0)
			len++;
		name = new String(Bytes.copy(s, H_NAME, len), StandardCharsets.UTF_8);
	}

	/** reserved[i] of the header. */
	private static long reserved(MemorySegment s, int i) {
		return Bytes.u64(s, H_RESERVED + 8L * i);
	}

	/** Checks 11 (zero outside the sections) and 12 (section checksums) of §12. */
	void checkSections(MemorySegment s) {
		long end = HEADER_USED;
		for (int i = 0; i <= sections; i++) {
			long start = i < sections ? secOff[i] : fileSize;
			long nz = Bytes.firstNonZero(s, end, start - end);
			if (nz >= 0)
				throw corrupt("non-zero byte at offset " + nz + " outside every section");
			if (i < sections)
				end = secOff[i] + secSize[i];
		}
		for (int i = 0; i < sections; i++) {
			long c = Xxh3.checksum(s, secOff[i], secSize[i]);
			if (c != secSum[i])
				throw new ShmkvException.Checksum(source, "section " + KIND_NAMES[i + 1] + " [" + secOff[i] + ", +"
						+ secSize[i] + "): stored " + Bytes.hex(secSum[i]) + ", computed " + Bytes.hex(c));
		}
	}

	ShmkvException.Corrupt corrupt(String m) {
		return new ShmkvException.Corrupt(source, m);
	}
}
