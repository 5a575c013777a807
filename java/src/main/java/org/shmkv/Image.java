package org.shmkv;

import com.dynatrace.hash4j.hashing.Hasher64;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * One opened image (one generation) over its mapping: the open checks
 * (FORMAT.md §12), lookups with the checks of §12.1, entries (§7), value
 * decoding (§8, §9) and the full check (§13). Thread-safe: immutable after
 * construction. The mapping's lifetime is its {@link Generation}'s.
 */
final class Image {
	static final int BYTES = 1, STRING = 2, I64 = 3, BOOL = 4, F64 = 5, F32LIST = 6, F64LIST = 7, I64LIST = 8,
			STRLIST = 9;
	static final int MAX_KEY = 65535;
	static final int ENTRY_SHARED = 1;

	final MemorySegment seg;
	final Header hdr;
	final Index index;
	final Hasher64 hasher;
	final long bucketCount, entryCount, idxOff, entOff, entEnd, valOff, valEnd, hashMask;
	final int maxProbe, hashBits;
	/** Format v2; its header's EXPIRY flag (some record expires: lookups read the clock). */
	final boolean v2, expiry;

	/** depth: 0 header only (checks 1-10), 1 with checks 11-12, 2 also the full check (§13). */
	Image(MemorySegment seg, long size, int depth) {
		this.seg = seg;
		hdr = new Header(seg, size);
		v2 = hdr.formatVersion == 2;
		expiry = v2 && (hdr.flags & Header.FLAG_EXPIRY) != 0;
		index = v2 ? IndexV2.INSTANCE : IndexV1.INSTANCE;
		hasher = Xxh3.hasher(hdr.hashSeed);
		bucketCount = hdr.bucketCount;
		entryCount = hdr.entryCount;
		maxProbe = hdr.maxProbe;
		hashBits = hdr.hashBits;
		hashMask = hashBits == 64 ? -1L : (1L << hashBits) - 1;
		idxOff = hdr.secOff[0];
		entOff = hdr.secOff[1];
		entEnd = entOff + hdr.secSize[1];
		valOff = hdr.secOff[2];
		valEnd = valOff + hdr.secSize[2];
		if (depth >= 1)
			hdr.checkSections(seg);
		if (depth >= 2)
			verify();
	}

	/** The key hash of FORMAT.md §5. */
	long hash(byte[] key, int len) {
		return hash(key, 0, 0, len);
	}

	/** The hash of key[0, len), or (key null) of the packed key lo, hi (Keys). */
	long hash(byte[] key, long lo, long hi, int len) {
		long h = key == null ? Xxh3.packed(lo, hi, len, hdr.hashSeed) : hasher.hashBytesToLong(key, 0, len);
		return hashBits == 64 ? h : (h & hashMask) * 0x9E3779B97F4A7C15L;
	}

	/**
	 * The locator of key[0, len), expired or not, or -1: v1's is the entry's
	 * offset, v2's {@link IndexV2#REC} | the record's offset. The accessors
	 * below read either.
	 */
	long locate(byte[] key, int len) {
		return locate(key, 0, 0, len);
	}

	/** locate of key[0, len), or (key null) of the packed key lo, hi (Keys). */
	long locate(byte[] key, long lo, long hi, int len) {
		if (len > MAX_KEY)
			throw new ShmkvException.KeyLength(len);
		return index.find(this, key, lo, hi, len, hash(key, lo, hi, len));
	}

	/** The entry of a locator: v1's is the locator; a v2 OUT record's entry; -1 for an inline record. */
	long entryOf(long loc) {
		if ((loc & IndexV2.REC) == 0)
			return loc;
		long r = loc & ~IndexV2.REC;
		return (Bytes.u8(seg, r) & IndexV2.K_OUT) != 0 ? IndexV2.outEntry(seg, r) : -1;
	}

	int typeOf(long loc) {
		long e = entryOf(loc);
		return e >= 0 ? Bytes.u8(seg, e) : Bytes.u8(seg, loc & ~IndexV2.REC) & IndexV2.K_TYPE;
	}

	long valueLen(long loc) {
		long e = entryOf(loc);
		return e >= 0 ? Bytes.u32(seg, e + 4) : Bytes.u8(seg, (loc & ~IndexV2.REC) + 2);
	}

	/** When the record expires (unix seconds, FORMAT.md §17.6); 0: never (every v1 entry). */
	long expires(long loc) {
		return (loc & IndexV2.REC) == 0 ? 0 : IndexV2.expires(seg, loc & ~IndexV2.REC);
	}

	long keyOffset(long loc) {
		long e = entryOf(loc);
		return e >= 0 ? e + 8 : IndexV2.keyPos(loc & ~IndexV2.REC, Bytes.u8(seg, loc & ~IndexV2.REC));
	}

	int keyLen(long loc) {
		long e = entryOf(loc);
		return e >= 0 ? Bytes.u16(seg, e + 2) : Bytes.u8(seg, (loc & ~IndexV2.REC) + 1);
	}

	boolean shared(long loc) {
		long e = entryOf(loc);
		return e >= 0 && (Bytes.u8(seg, e + 1) & ENTRY_SHARED) != 0;
	}

	static boolean aligned(int type) {
		return type >= I64 && type != BOOL;
	}

	static boolean nul(int type) {
		return type == BYTES || type == STRING;
	}

	/**
	 * The image offset of the value of the entry at e that a lookup found,
	 * with the checks of §12.1 (type, flags, where the value lies, its shape;
	 * a strlist's count, not its strings).
	 */
	long valueOffset(long loc) {
		return valueOffset(loc, false);
	}

	/** full: a strlist's strings too (iteration, verify). */
	long valueOffset(long loc, boolean full) {
		long e = entryOf(loc);
		if (e < 0) { // an inline v2 record, decoded by IndexV2.record
			long r = loc & ~IndexV2.REC;
			int kind = Bytes.u8(seg, r);
			long voff = IndexV2.valuePos(r, kind, Bytes.u8(seg, r + 1));
			shape(r, true, kind & IndexV2.K_TYPE, voff, Bytes.u8(seg, r + 2), full);
			return voff;
		}
		int type = Bytes.u8(seg, e), flags = Bytes.u8(seg, e + 1);
		int kl = Bytes.u16(seg, e + 2);
		long vlen = Bytes.u32(seg, e + 4);
		long voff = place(e, type, flags, kl, vlen);
		shape(e, false, type, voff, vlen, full);
		return voff;
	}

	/** An inline record's value, as verify checks it: its shape, strlists whole, text UTF-8. */
	void checkValue(long loc, boolean full) {
		long voff = valueOffset(loc, full);
		text(loc & ~IndexV2.REC, true, typeOf(loc), voff, valueLen(loc));
	}

	/** Type, flags and where the value lies (§7, §9); throws Corrupt naming the rule. */
	private long place(long e, int type, int flags, int kl, long vlen) {
		if (type < 1 || type > 9)
			throw entryCorrupt(e, "unknown value type " + type);
		if ((flags & ~ENTRY_SHARED) != 0)
			throw entryCorrupt(e, "unknown entry flags " + Integer.toHexString(flags));
		long p = 8 + kl;
		long stored = vlen + (nul(type) ? 1 : 0);
		boolean shared = (flags & ENTRY_SHARED) != 0;
		long vpos = shared || aligned(type) ? (p + 7) & ~7L : p;
		if (shared) {
			if (e + vpos + 8 > entEnd)
				throw entryCorrupt(e, "shared value reference runs past the entries section");
			long voff = Bytes.u64(seg, e + vpos);
			if (voff % 8 != 0 || voff < valOff || Long.compareUnsigned(voff, valEnd) > 0 || stored > valEnd - voff)
				throw entryCorrupt(e, "shared value at " + Long.toUnsignedString(voff) + " (" + stored
						+ " bytes) is not an 8-aligned value inside the values section [" + valOff + ", " + valEnd + ")");
			return voff;
		}
		if (e + vpos + stored > entEnd)
			throw entryCorrupt(e, "value of " + vlen + " bytes runs past the entries section");
		return e + vpos;
	}

	/**
	 * The value's shape (§8); full: a strlist's strings too (iteration,
	 * verify). e: the entry, or (rec) the v2 record, named in the message.
	 */
	private void shape(long e, boolean rec, int type, long voff, long vlen, boolean full) {
		switch (type) {
			case BYTES, STRING -> {
				if (Bytes.u8(seg, voff + vlen) != 0)
					throw corruptAt(e, rec, "bytes/string value not NUL-terminated");
			}
			case I64, F64 -> {
				if (vlen != 8)
					throw corruptAt(e, rec, "value length " + vlen + ", type needs 8");
			}
			case BOOL -> {
				if (vlen != 1 || Bytes.u8(seg, voff) > 1)
					throw corruptAt(e, rec, "bool value is not one byte 0 or 1");
			}
			case F32LIST -> {
				if (vlen % 4 != 0)
					throw corruptAt(e, rec, "f32list length " + vlen + " is not a multiple of 4");
			}
			case F64LIST, I64LIST -> {
				if (vlen % 8 != 0)
					throw corruptAt(e, rec, "list length " + vlen + " is not a multiple of 8");
			}
			default -> {
				if (vlen < 8)
					throw corruptAt(e, rec, "strlist of " + vlen + " bytes, below 8");
				long count = Bytes.u32(seg, voff);
				if (count > (vlen - 8) / 4)
					throw corruptAt(e, rec, "strlist count " + count + " does not fit its " + vlen + " bytes");
				if (full)
					strlistFull(e, rec, voff, vlen, count);
			}
		}
	}

	private void strlistFull(long e, boolean rec, long voff, long vlen, long count) {
		long data = 4 * (count + 2);
		if (Bytes.u32(seg, voff + 4) != 0)
			throw corruptAt(e, rec, "strlist ends[0] is not 0");
		long prev = 0;
		for (long i = 1; i <= count; i++) {
			long end = Bytes.u32(seg, voff + 4 + 4 * i);
			if (end <= prev || end > vlen - data)
				throw corruptAt(e, rec, "strlist ends[" + i + "] " + end + " out of order or past the data");
			if (Bytes.u8(seg, voff + data + end - 1) != 0)
				throw corruptAt(e, rec, "strlist string " + (i - 1) + " is not NUL-terminated");
			prev = end;
		}
		if (prev != vlen - data)
			throw corruptAt(e, rec, "strlist data ends at " + prev + ", the value at " + (vlen - data));
	}

	static ShmkvException.Corrupt corruptAt(long at, boolean rec, String m) {
		return rec ? new ShmkvException.Corrupt("index record at " + at + ": " + m) : entryCorrupt(at, m);
	}

	static ShmkvException.Corrupt entryCorrupt(long e, String m) {
		return new ShmkvException.Corrupt("entry at " + e + ": " + m);
	}

	/** A decoded entry (iteration and verify; lookups decode without allocating). */
	static final class Entry {
		long off, voff, end;
		int type, keyLen;
		long valueLen;
		boolean shared;

		byte[] key(MemorySegment s) {
			byte[] k = new byte[keyLen];
			MemorySegment.copy(s, ValueLayout.JAVA_BYTE, off + 8, k, 0, keyLen);
			return k;
		}
	}

	/** shmkv__entry_decode of §13: the entry at e, with every rule, strlists whole. */
	Entry decode(long e, boolean full) {
		if (e % 8 != 0 || e < entOff || e > entEnd - 8)
			throw entryCorrupt(e, "not an 8-aligned entry inside the entries section [" + entOff + ", " + entEnd + ")");
		Entry en = new Entry();
		en.off = e;
		en.type = Bytes.u8(seg, e);
		int flags = Bytes.u8(seg, e + 1);
		en.keyLen = Bytes.u16(seg, e + 2);
		en.valueLen = Bytes.u32(seg, e + 4);
		if (e + 8 + en.keyLen > entEnd)
			throw entryCorrupt(e, "key runs past the entries section");
		en.voff = place(e, en.type, flags, en.keyLen, en.valueLen);
		en.shared = (flags & ENTRY_SHARED) != 0;
		shape(e, false, en.type, en.voff, en.valueLen, full);
		long p = 8 + en.keyLen;
		long vpos = en.shared || aligned(en.type) ? (p + 7) & ~7L : p;
		long stored = en.valueLen + (nul(en.type) ? 1 : 0);
		en.end = en.shared ? e + vpos + 8 : e + ((vpos + stored + 7) & ~7L);
		if (en.end > entEnd)
			throw entryCorrupt(e, "entry end " + en.end + " past the entries section end " + entEnd);
		return en;
	}

	/** The next entry at or after pos (skipping zero words), or -1 at the section end. */
	long nextEntry(long pos) {
		for (; pos + 8 <= entEnd; pos += 8)
			if (Bytes.u64(seg, pos) != 0)
				return pos;
		return -1;
	}

	/** The full structural check, FORMAT.md §13 (§17.7 for v2), after §12's checks, which the constructor ran. */
	void verify() {
		index.verify(this);
		if (v2)
			return; // IndexV2.verify walks ENTRIES too
		long n = 0, shared = 0;
		for (long pos = nextEntry(entOff); pos >= 0; ) {
			Entry en = decode(pos, true);
			byte[] key = en.key(seg);
			if (locate(key, key.length) != pos)
				throw entryCorrupt(pos, "looking its key up does not find this entry");
			verifyEntryBytes(en);
			n++;
			if (en.shared)
				shared++;
			pos = nextEntry(en.end);
		}
		if (n != entryCount)
			throw new ShmkvException.Corrupt("entries section holds " + n + " entries, entry_count is " + entryCount);
		if (shared != hdr.dedupRefs)
			throw new ShmkvException.Corrupt(shared + " entries share a value, dedup_refs is " + hdr.dedupRefs);
	}

	/** An entry decoded by decode(pos, true): its padding (after the key, after the value) is zero, its text UTF-8. */
	void verifyEntryBytes(Entry en) {
		long pos = en.off;
		long p = pos + 8 + en.keyLen;
		long vpos = en.shared ? pos + ((8 + en.keyLen + 7) & ~7L) : en.voff;
		long nz = Bytes.firstNonZero(seg, p, vpos - p);
		if (nz >= 0)
			throw entryCorrupt(pos, "non-zero padding byte at " + nz + " before the value");
		long after = en.shared ? vpos + 8 : en.voff + en.valueLen + (nul(en.type) ? 1 : 0);
		nz = Bytes.firstNonZero(seg, after, en.end - after);
		if (nz >= 0)
			throw entryCorrupt(pos, "non-zero padding byte at " + nz + " after the value");
		text(pos, false, en.type, en.voff, en.valueLen);
	}

	/** A string's or strlist's text is UTF-8 (verify; lookups do not check it). */
	private void text(long at, boolean rec, int type, long voff, long vlen) {
		if (type == STRING && !Utf8.valid(seg, voff, vlen))
			throw corruptAt(at, rec, "string value is not valid UTF-8");
		if (type == STRLIST) {
			long count = Bytes.u32(seg, voff), data = voff + 4 * (count + 2);
			for (long i = 0; i < count; i++) {
				long a = Bytes.u32(seg, voff + 4 + 4 * i), b = Bytes.u32(seg, voff + 8 + 4 * i);
				if (!Utf8.valid(seg, data + a, b - a - 1))
					throw corruptAt(at, rec, "strlist string " + i + " is not valid UTF-8");
			}
		}
	}
}
