package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;

/**
 * The header block and section table (FORMAT.md §3, §4) and the open checks
 * of §12, in the C reader's order so that an image gets the same error from
 * both. Shared by every format version; what differs per version is the
 * index ({@link Index}).
 */
final class Header {
	static final byte[] MAGIC = "SHMKVIMG".getBytes(StandardCharsets.US_ASCII);
	static final int HEADER_SIZE = 4096;
	static final long LAYOUT_HASH_V1 = 0x52171befdcf1d7eeL;
	/**
	 * Format v2, layout B with the 2-byte directory (FORMAT.md §17, V2B
	 * amendment 1): XXH3-64 of SHMKV_LAYOUT_DESC_V2 (Xxh3Test rebuilds it).
	 */
	static final long LAYOUT_HASH_V2 = 0x5a240d8d9e73bf24L;
	static final long FLAG_DEDUP = 1, FLAG_EXPIRY = 2;
	static final long MAX_FILE_SIZE = 1L << 43;
	static final int KIND_INDEX = 1, KIND_ENTRIES = 2, KIND_VALUES = 3;
	static final String[] KIND_NAMES = {"unknown", "index", "entries", "values"};

	final int formatVersion;
	final long flags, fileSize, entryCount, bucketCount, hashSeed, createdUnix, dedupRefs, builderVersion;
	final int hashBits, maxProbe;
	final String name;
	final long[] secOff = new long[3], secSize = new long[3], secSum = new long[3];

	/**
	 * Checks 1-10 of FORMAT.md §12 on an image of size bytes (the file's
	 * length, or a segment's recorded image size) and reads the header.
	 */
	Header(MemorySegment s, long size) {
		long n = Math.min(size, 8);
		for (int i = 0; i < n; i++)
			if (Bytes.u8(s, i) != (MAGIC[i] & 0xFF))
				throw new ShmkvException.Magic("bad magic at offset 0: not a shmkv image");
		if (size < HEADER_SIZE)
			throw new ShmkvException.Truncated("image is " + size + " bytes, shorter than the 4096-byte header");
		formatVersion = (int) Bytes.u32(s, 8);
		if (formatVersion != 1 && formatVersion != 2)
			throw new ShmkvException.Version("image format version " + Integer.toUnsignedString(formatVersion)
					+ ", this reader reads versions 1 and 2");
		// what differs between the versions (FORMAT.md §17.2)
		boolean v2 = formatVersion == 2;
		long wantHash = v2 ? LAYOUT_HASH_V2 : LAYOUT_HASH_V1;
		long knownFlags = v2 ? FLAG_DEDUP | FLAG_EXPIRY : FLAG_DEDUP;
		int slots = v2 ? IndexV2.BUCKET : 8;
		long bucketBytes = v2 ? IndexV2.BUCKET : 64, perBucket = v2 ? IndexV2.MAX_RECORDS : 8;
		long layout = Bytes.u64(s, 16);
		if (layout != wantHash)
			throw new ShmkvException.Layout("layout hash " + Bytes.hex(layout) + ", this reader expects "
					+ Bytes.hex(wantHash) + " for version " + formatVersion);
		long stored = Bytes.u64(s, 504), computed = Xxh3.checksum(s, 0, 504);
		if (stored != computed)
			throw new ShmkvException.Checksum("header checksum mismatch: stored " + Bytes.hex(stored)
					+ ", computed " + Bytes.hex(computed));
		fileSize = Bytes.u64(s, 32);
		if (Long.compareUnsigned(fileSize, size) > 0)
			throw new ShmkvException.Truncated("image is " + size + " bytes, its header says "
					+ Long.toUnsignedString(fileSize));
		if (Long.compareUnsigned(fileSize, size) < 0)
			throw corrupt((size - fileSize) + " unexpected bytes after the image end at " + fileSize);
		int headerSize = (int) Bytes.u32(s, 12);
		flags = Bytes.u64(s, 24);
		entryCount = Bytes.u64(s, 40);
		bucketCount = Bytes.u64(s, 48);
		int bucketSlots = (int) Bytes.u32(s, 56);
		hashBits = (int) Bytes.u32(s, 60);
		hashSeed = Bytes.u64(s, 64);
		maxProbe = (int) Bytes.u32(s, 72);
		int sectionCount = (int) Bytes.u32(s, 76);
		builderVersion = Bytes.u32(s, 80);
		createdUnix = Bytes.u64(s, 88);
		dedupRefs = Bytes.u64(s, 112);
		if (headerSize != HEADER_SIZE)
			throw corrupt("header_size " + Integer.toUnsignedString(headerSize) + ", expected 4096");
		if (fileSize % HEADER_SIZE != 0)
			throw corrupt("image size " + fileSize + " is not a multiple of 4096");
		if (fileSize > MAX_FILE_SIZE)
			throw corrupt("image size " + fileSize + " exceeds the format limit");
		if ((flags & ~knownFlags) != 0)
			throw corrupt("unknown header flags " + Long.toHexString(flags));
		if (bucketSlots != slots)
			throw corrupt("bucket_slots " + Integer.toUnsignedString(bucketSlots) + ", expected " + slots);
		if (hashBits < 1 || hashBits > 64)
			throw corrupt("hash_bits " + Integer.toUnsignedString(hashBits) + " out of range 1..64");
		if (bucketCount < 1 || Long.compareUnsigned(bucketCount, fileSize / bucketBytes) > 0)
			throw corrupt("bucket_count " + Long.toUnsignedString(bucketCount) + " does not fit the image");
		if (Long.compareUnsigned(entryCount, perBucket * bucketCount) > 0)
			throw corrupt("entry_count " + Long.toUnsignedString(entryCount) + " exceeds the "
					+ perBucket * bucketCount + " index " + (v2 ? "records" : "slots"));
		if (maxProbe < 0 || maxProbe >= bucketCount)
			throw corrupt("max_probe " + Integer.toUnsignedString(maxProbe) + " not below bucket_count " + bucketCount);
		if (Bytes.u8(s, 128 + 63) != 0)
			throw corrupt("name is not NUL-terminated");
		boolean reserved = Bytes.u32(s, 84) != 0;
		for (int i = 0; i < 7; i++)
			reserved |= Bytes.u64(s, 448 + 8 * i) != 0;
		if (reserved)
			throw corrupt("reserved header fields are not zero");
		if (sectionCount != 3)
			throw corrupt("section_count " + Integer.toUnsignedString(sectionCount) + ", version " + formatVersion
					+ " has 3");
		long prevEnd = HEADER_SIZE;
		for (int i = 0; i < 8; i++) {
			long d = 192 + 32L * i;
			if (i >= 3) {
				if (Bytes.firstNonZero(s, d, 32) >= 0)
					throw corrupt("unused section slot " + i + " is not zero");
				continue;
			}
			int kind = (int) Bytes.u32(s, d), sflags = (int) Bytes.u32(s, d + 4);
			long off = Bytes.u64(s, d + 8), sz = Bytes.u64(s, d + 16);
			String nm = KIND_NAMES[i + 1];
			if (kind != i + 1)
				throw corrupt("section " + i + " has kind " + Integer.toUnsignedString(kind) + ", expected "
						+ (i + 1) + " (" + nm + ")");
			if (sflags != 0)
				throw corrupt("section " + nm + " has unknown flags " + Integer.toHexString(sflags));
			if (off % 64 != 0 || Long.compareUnsigned(off, prevEnd) < 0)
				throw corrupt("section " + nm + " offset " + Long.toUnsignedString(off) + " is misaligned or overlaps");
			if (Long.compareUnsigned(sz, fileSize) > 0 || Long.compareUnsigned(off, fileSize - sz) > 0)
				throw corrupt("section " + nm + " [" + Long.toUnsignedString(off) + ", +" + Long.toUnsignedString(sz)
						+ ") runs past the image end " + fileSize);
			secOff[i] = off;
			secSize[i] = sz;
			secSum[i] = Bytes.u64(s, d + 24);
			prevEnd = off + sz;
		}
		if (secSize[0] != bucketCount * bucketBytes)
			throw corrupt("index section is " + secSize[0] + " bytes, " + bucketCount + " buckets need "
					+ bucketCount * bucketBytes);
		if (v2 && secOff[0] % IndexV2.BUCKET != 0)
			throw corrupt("index section offset " + secOff[0] + " is not a multiple of " + IndexV2.BUCKET);
		// v2: inline records have no entry in ENTRIES
		if (!v2 && entryCount > 0 && Long.compareUnsigned(secSize[1], 8 * entryCount) < 0)
			throw corrupt("entries section too small for " + entryCount + " entries");
		int len = 0;
		while (len < 63 && Bytes.u8(s, 128 + len) != 0)
			len++;
		byte[] nb = new byte[len];
		for (int i = 0; i < len; i++)
			nb[i] = (byte) Bytes.u8(s, 128 + i);
		name = new String(nb, StandardCharsets.UTF_8);
	}

	/** Checks 11 (zero outside the sections) and 12 (section checksums) of §12. */
	void checkSections(MemorySegment s) {
		long prev = 512;
		for (int i = 0; i <= 3; i++) {
			long start = i < 3 ? secOff[i] : fileSize;
			long nz = Bytes.firstNonZero(s, prev, start - prev);
			if (nz >= 0)
				throw corrupt("non-zero byte at offset " + nz + " outside every section");
			if (i < 3)
				prev = secOff[i] + secSize[i];
		}
		for (int i = 0; i < 3; i++) {
			long c = Xxh3.checksum(s, secOff[i], secSize[i]);
			if (c != secSum[i])
				throw new ShmkvException.Checksum("section " + KIND_NAMES[i + 1] + " [" + secOff[i] + ", +" + secSize[i]
						+ ") checksum mismatch: stored " + Bytes.hex(secSum[i]) + ", computed " + Bytes.hex(c));
		}
	}

	static ShmkvException.Corrupt corrupt(String m) {
		return new ShmkvException.Corrupt(m);
	}
}
