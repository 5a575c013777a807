package org.shmkv;

import static org.shmkv.Format.*;

import java.lang.foreign.MemorySegment;

/**
 * One opened image (one generation) over its mapping: the open checks
 * (FORMAT.md §12), lookups with the checks of §12.1, records (§6.2),
 * entries (§7), values (§8, §9) and the full check (§13, §13).
 * Thread-safe: immutable after construction. The mapping's lifetime is its
 * {@link Generation}'s.
 *
 * <p>A record is named by its image offset r, as the lookups and the
 * iteration find it; the accessors below read an inline record's fields in
 * its bucket and an OUT record's in its entry.
 */
final class Image {
	final MemorySegment seg;
	final Header hdr;
	/** Names the image in messages: its file, or its cache. */
	final String source;
	final Xxh3.Seeded hasher;
	final long bucketCount, entryCount, idxOff, entOff, entEnd, valOff, valEnd, hashMask;
	final int maxProbe, hashBits;
	/** The header's EXPIRY flag: some record expires, lookups read the clock for those. */
	final boolean expiry;
	/** A delta image (FORMAT.md §19): its records are upserts and tombstones, its keys in its filter. */
	final boolean delta;
	/** The record kind bits this image may use: a delta's add TOMB (§19.2). */
	final int kinds;
	/** A delta's filter section (§19.3): its offset and its number of u64 words; 0 in a plain image. */
	final long filterOff, filterWords;

	/** depth: 0 header only (checks 1-10), 1 with checks 11-12, 2 also the full check (§13). */
	Image(MemorySegment seg, long size, int depth, String source) {
		this.seg = seg;
		this.source = source;
		hdr = new Header(seg, size, source);
		expiry = (hdr.flags & FLAG_EXPIRY) != 0;
		hasher = new Xxh3.Seeded(hdr.hashSeed);
		bucketCount = hdr.bucketCount;
		entryCount = hdr.entryCount;
		maxProbe = hdr.maxProbe;
		hashBits = hdr.hashBits;
		hashMask = hashBits == 64 ? -1L : (1L << hashBits) - 1;
		idxOff = hdr.secOff[KIND_INDEX - 1];
		entOff = hdr.secOff[KIND_ENTRIES - 1];
		entEnd = entOff + hdr.secSize[KIND_ENTRIES - 1];
		valOff = hdr.secOff[KIND_VALUES - 1];
		valEnd = valOff + hdr.secSize[KIND_VALUES - 1];
		delta = hdr.delta;
		kinds = delta ? K_KNOWN | K_TOMB : K_KNOWN;
		filterOff = delta ? hdr.secOff[KIND_FILTER - 1] : 0;
		filterWords = delta ? hdr.secSize[KIND_FILTER - 1] / 8 : 0;
		if (depth >= 1)
			hdr.checkSections(seg);
		if (depth >= 2)
			verify();
	}

	ShmkvException.Corrupt corrupt(String m) {
		return new ShmkvException.Corrupt(source, m);
	}

	ShmkvException.Corrupt entryCorrupt(long e, String m) {
		return corrupt("entry at " + e + ": " + m);
	}

	/** The key hash of FORMAT.md §5 of key[0, len). */
	long hash(byte[] key, int len) {
		return hash(key, 0, 0, len);
	}

	/** The key hash of the packed key lo, tl (key null), or of key[0, len). */
	long hash(byte[] key, long lo, long tl, int len) {
		long h = key == null ? hasher.packed(lo, tl, len) : hasher.bytes(key, len);
		return hashBits == 64 ? h : (h & hashMask) * 0x9E3779B97F4A7C15L;
	}

	/** The record holding key[0, len), expired or not, a tombstone or not: its locator (Index), or -1. */
	long locate(byte[] key, int len) {
		long lo = Keys.lo(key, len);
		return locate(len > Keys.PACKED ? key : null, lo, Keys.tl(key, len, lo), len);
	}

	/** locate of the packed key lo, tl (key null: at most 16 bytes), or of key[0, len) (more). */
	long locate(byte[] key, long lo, long tl, int len) {
		return Index.find(this, key, lo, tl, len, checkedHash(key, lo, tl, len));
	}

	/** The hash of a key a get looks up: KeyLength for a key longer than the format's limit. */
	long checkedHash(byte[] key, long lo, long tl, int len) {
		if (len > MAX_KEY_LEN)
			throw new ShmkvException.KeyLength(source, len);
		return hash(key, lo, tl, len);
	}

	/**
	 * Whether this delta holds key (an upsert or a tombstone, expired or
	 * not): its filter, then its lookup. The iteration of a base read
	 * through it leaves such keys' base records out (§19).
	 */
	boolean holds(byte[] key) {
		int len = key.length;
		long lo = Keys.lo(key, len), tl = Keys.tl(key, len, lo);
		byte[] k = len > Keys.PACKED ? key : null;
		long h = hash(k, lo, tl, len);
		return mayHold(h) && Index.find(this, k, lo, tl, len, h) >= 0;
	}

	/**
	 * A delta's filter (FORMAT.md §19.3): whether a key of hash h may be in
	 * it. False: it is not, and the base answers. One u64 word, inside the
	 * filter section by construction (mulhi(h, words) < words).
	 */
	boolean mayHold(long h) {
		long w = Bytes.u64(seg, filterOff + 8 * Math.unsignedMultiplyHigh(h, filterWords));
		long mask = 1L << (h >>> FILTER_SHIFT_0) | 1L << (h >>> FILTER_SHIFT_1) | 1L << (h >>> FILTER_SHIFT_2);
		return (w & mask) == mask; // a long shift takes its count's low 6 bits: (h >> s) & 63
	}

	// a record a lookup or the iteration found, by its locator (Index): an
	// inline one's value from the locator, an OUT one's from its entry

	/** The word of the record at image offset r (Index.word). */
	long word(long r) {
		return Index.word(seg, r & -BUCKET, (int) r & (BUCKET - 1));
	}

	/** The entry of an OUT locator's record (its offset checked). */
	long entryOf(long loc) {
		return checkedEntry(Index.outEntry(word(Index.record(loc))));
	}

	/** The value's type; a tombstone's is 0 (TOMB_ENTRY_TYPE). */
	int type(long loc) {
		if (Index.tomb(loc))
			return TOMB_ENTRY_TYPE;
		return Index.inline(loc) ? Index.inlineType(loc) : Bytes.u8(seg, entryOf(loc) + E_TYPE);
	}

	/** The value's length in bytes (a tombstone's: 0, checked). */
	long valueLen(long loc) {
		return Index.inline(loc) ? Index.inlineLen(loc) : Bytes.u32(seg, entryOf(loc) + E_VALUE_LEN);
	}

	/**
	 * Where the value lies: its image offset (an OUT record's entry checked
	 * as by {@link #check}); a tombstone's empty value lies after its key.
	 */
	long valueOffset(long loc) {
		if (Index.inline(loc))
			return Index.inlineValue(loc);
		if (Index.tomb(loc)) {
			long e = entryOf(loc);
			return e + ENTRY_SIZE + Bytes.u16(seg, e + E_KEY_LEN);
		}
		long e = entryOf(loc);
		return place(e, Bytes.u8(seg, e + E_TYPE), Bytes.u8(seg, e + E_FLAGS), Bytes.u16(seg, e + E_KEY_LEN),
				Bytes.u32(seg, e + E_VALUE_LEN));
	}

	/** When the record expires (unix seconds, FORMAT.md §17); 0: never. */
	long expires(long loc) {
		long r = Index.record(loc);
		return Index.expires(seg, r, Bytes.u8(seg, r));
	}

	/** A copy of the record's key. */
	byte[] key(long loc) {
		if (!Index.inline(loc)) {
			long e = entryOf(loc);
			return Bytes.copy(seg, e + ENTRY_SIZE, Bytes.u16(seg, e + E_KEY_LEN));
		}
		long r = Index.record(loc), w = Index.checkedWord(this, r);
		return Bytes.copy(seg, (r & -BUCKET) + Index.keyPos(w, (int) r & (BUCKET - 1)), Index.keyLen(w));
	}

	boolean shared(long loc) {
		return !Index.inline(loc) && (Bytes.u8(seg, entryOf(loc) + E_FLAGS) & ENTRY_SHARED) != 0;
	}

	/**
	 * The checks of a lookup on the value it found (§12.1): an OUT record's
	 * entry (type, flags, where its value lies), the value's shape by its
	 * type, a string's UTF-8; a strlist's count (full: its ends and NULs too,
	 * as the iteration checks).
	 */
	void check(long loc, boolean full) {
		if (Index.tomb(loc)) {
			checkTomb(loc);
			return;
		}
		if (Index.inline(loc)) {
			shape(Index.record(loc), true, Index.inlineType(loc), Index.inlineValue(loc), Index.inlineLen(loc), full);
			return;
		}
		long e = entryOf(loc);
		int type = Bytes.u8(seg, e + E_TYPE);
		long vlen = Bytes.u32(seg, e + E_VALUE_LEN);
		shape(e, false, type, valueOffset(loc), vlen, full);
	}

	/**
	 * What a lookup checks of a tombstone it found (§19.4): an inline one's
	 * kind and empty value its record rule checked; an OUT one's entry has
	 * type 0 and value_len 0 (its key was checked inside ENTRIES).
	 */
	void checkTomb(long loc) {
		if (Index.inline(loc))
			return;
		long e = entryOf(loc);
		int type = Bytes.u8(seg, e + E_TYPE);
		long vlen = Bytes.u32(seg, e + E_VALUE_LEN);
		if (type != TOMB_ENTRY_TYPE || vlen != 0)
			throw entryCorrupt(e, "the entry of an OUT tombstone has type " + type + " and value_len " + vlen
					+ ", not type " + TOMB_ENTRY_TYPE + " and 0");
	}

	/** A record's value as verify checks it: check's, a strlist whole, its strings' UTF-8. */
	void checkValue(long loc, boolean rec) {
		check(loc, true);
		if (type(loc) == STRLIST)
			strlistText(Index.record(loc), rec, valueOffset(loc));
	}

	/** An entry at e, inside ENTRIES and 8-aligned with its head, or Corrupt. */
	private long checkedEntry(long e) {
		if (e % ENTRY_ALIGN != 0 || e < entOff || e > entEnd - ENTRY_SIZE)
			throw entryCorrupt(e, "not an " + ENTRY_ALIGN + "-aligned entry inside the entries section [" + entOff
					+ ", " + entEnd + ")");
		return e;
	}

	/** Where the value of an entry (at e) starts after its key: 8-aligned when shared or of an aligned type. */
	private static long valuePos(long e, int type, boolean shared, int keyLen) {
		long p = ENTRY_SIZE + keyLen;
		return e + (shared || align(type) == 8 ? (p + 7) & ~7L : p);
	}

	/** An entry's type, flags, key and where its value lies (§7, §9); Corrupt naming the rule. */
	private long place(long e, int type, int flags, int kl, long vlen) {
		if (!known(type))
			throw entryCorrupt(e, "unknown value type " + type);
		if ((flags & ~ENTRY_FLAGS) != 0)
			throw entryCorrupt(e, "unknown entry flags 0x" + Integer.toHexString(flags & ~ENTRY_FLAGS));
		if (e + ENTRY_SIZE + kl > entEnd)
			throw entryCorrupt(e, "its key runs past the entries section");
		long stored = vlen + nul(type);
		boolean shared = (flags & ENTRY_SHARED) != 0;
		long vpos = valuePos(e, type, shared, kl);
		if (shared) {
			if (vpos + 8 > entEnd)
				throw entryCorrupt(e, "its shared value reference runs past the entries section");
			long voff = Bytes.u64(seg, vpos);
			if (voff % ENTRY_ALIGN != 0 || voff < valOff || Long.compareUnsigned(voff, valEnd) > 0
					|| stored > valEnd - voff)
				throw entryCorrupt(e, "its shared value at " + Long.toUnsignedString(voff) + " (" + stored
						+ " bytes) is not an 8-aligned value inside the values section [" + valOff + ", " + valEnd + ")");
			return voff;
		}
		if (vpos + stored > entEnd)
			throw entryCorrupt(e, "its value of " + vlen + " bytes runs past the entries section");
		return vpos;
	}

	/**
	 * The value's shape by its type (§8) and, for a string, its UTF-8; full:
	 * a strlist's ends and NULs too. at: the entry, or (rec) the record,
	 * named in the message. (The checks here, their messages in
	 * {@link #shapeError}: the lookups' method stays small enough for the JIT
	 * to inline.)
	 */
	private void shape(long at, boolean rec, int type, long voff, long vlen, boolean full) {
		if (!((TEXT >>> type & 1) != 0 ? textOk(type, voff, vlen) : otherOk(at, rec, type, voff, vlen, full)))
			throw shapeError(at, rec, type, voff, vlen);
	}

	/** A text value: its NUL; a string's UTF-8. */
	private boolean textOk(int type, long voff, long vlen) {
		if (vlen >= 8)
			return Bytes.u8(seg, voff + vlen) == 0 && ((UTF8 >>> type & 1) == 0 || Utf8.valid(seg, voff, vlen));
		// one word: the value's bytes and its NUL, which ends it (its top byte); a value
		// lies after its record's or entry's head, so the word is in the image
		long w = Bytes.u64(seg, voff + vlen - 7);
		return w >>> 56 == 0 && ((w & Utf8.HIGH_BITS & -1L << 8 * (7 - vlen)) == 0 || (UTF8 >>> type & 1) == 0
				|| Utf8.valid(seg, voff, vlen));
	}

	/** A fixed value's size and byte, an array's length, a strlist's count (full: its ends too). */
	private boolean otherOk(long at, boolean rec, int type, long voff, long vlen, boolean full) {
		boolean ok = switch (Format.shape(type)) {
			case SHAPE_FIXED -> vlen == elemSize(type) && (maxByte(type) == 255 || Bytes.u8(seg, voff) <= maxByte(type));
			case SHAPE_ARRAY -> vlen % elemSize(type) == 0;
			default -> vlen >= 8 && Bytes.u32(seg, voff) <= (vlen - 8) / 4;
		};
		if (ok && full && type == STRLIST)
			strlistEnds(at, rec, voff, vlen, Bytes.u32(seg, voff));
		return ok;
	}

	/** What shape found wrong with a value, in words. */
	private ShmkvException.Corrupt shapeError(long at, boolean rec, int type, long voff, long vlen) {
		String t = ValueType.name(type);
		return corruptAt(at, rec, switch (Format.shape(type)) {
			case SHAPE_TEXT -> Bytes.u8(seg, voff + vlen) != 0 ? t + " value without its NUL"
					: "string value is not valid UTF-8";
			case SHAPE_FIXED -> t + " value of " + vlen + " bytes" + (vlen == elemSize(type) ? ", byte "
					+ Bytes.u8(seg, voff) + " over " + maxByte(type) : ", the type's size is " + elemSize(type));
			case SHAPE_ARRAY -> t + " of " + vlen + " bytes, not a multiple of " + elemSize(type);
			default -> vlen < 8 ? "strlist of " + vlen + " bytes, below 8"
					: "strlist count " + Bytes.u32(seg, voff) + " does not fit its " + vlen + " bytes";
		});
	}

	/** A strlist's ends ascend, each string has its NUL, the data ends with the last (§8). */
	private void strlistEnds(long at, boolean rec, long voff, long vlen, long count) {
		long data = 4 * (count + 2);
		if (Bytes.u32(seg, voff + 4) != 0)
			throw corruptAt(at, rec, "strlist ends[0] is not 0");
		long prev = 0;
		for (long i = 1; i <= count; i++) {
			long end = Bytes.u32(seg, voff + 4 + 4 * i);
			if (end <= prev || end > vlen - data)
				throw corruptAt(at, rec, "strlist ends[" + i + "] " + end + " out of order or past the data");
			if (Bytes.u8(seg, voff + data + end - 1) != 0)
				throw corruptAt(at, rec, "strlist string " + (i - 1) + " is not NUL-terminated");
			prev = end;
		}
		if (prev != vlen - data)
			throw corruptAt(at, rec, "strlist data ends at " + prev + ", the value at " + (vlen - data));
	}

	/** Each string of a strlist (its ends checked) is UTF-8 (verify). */
	private void strlistText(long at, boolean rec, long voff) {
		long count = Bytes.u32(seg, voff), data = voff + 4 * (count + 2);
		for (long i = 0; i < count; i++) {
			long a = Bytes.u32(seg, voff + 4 + 4 * i), b = Bytes.u32(seg, voff + 8 + 4 * i);
			if (!Utf8.valid(seg, data + a, b - a - 1))
				throw corruptAt(at, rec, "strlist string " + i + " is not valid UTF-8");
		}
	}

	ShmkvException.Corrupt corruptAt(long at, boolean rec, String m) {
		return rec ? corrupt(Index.bucketOf(this, at & -BUCKET) + ": record at +" + (at & (BUCKET - 1)) + ": " + m)
				: entryCorrupt(at, m);
	}

	/** A decoded entry (iteration and verify; lookups decode without allocating). */
	static final class Entry {
		long off, voff, end;
		int type, keyLen;
		long valueLen;
		boolean shared;

		byte[] key(MemorySegment s) {
			return Bytes.copy(s, off + ENTRY_SIZE, keyLen);
		}
	}

	/**
	 * The entry at e with every rule of §13 (a strlist whole):
	 * shmkv__entry_decode. In a delta an entry of type 0 is an OUT
	 * tombstone's (§19.2): no flags, a key of 1 byte or more, value_len 0,
	 * zero bytes from its key to its 8-aligned end.
	 */
	Entry entry(long e) {
		checkedEntry(e);
		Entry en = new Entry();
		en.off = e;
		en.type = Bytes.u8(seg, e + E_TYPE);
		int flags = Bytes.u8(seg, e + E_FLAGS);
		en.keyLen = Bytes.u16(seg, e + E_KEY_LEN);
		en.valueLen = Bytes.u32(seg, e + E_VALUE_LEN);
		if (delta && en.type == TOMB_ENTRY_TYPE) {
			if (flags != 0 || en.keyLen == 0 || en.valueLen != 0)
				throw entryCorrupt(e, "a tombstone's entry with flags 0x" + Integer.toHexString(flags) + ", key_len "
						+ en.keyLen + ", value_len " + en.valueLen + " (§19.2: flags 0, key_len 1 or more, value_len 0)");
			en.voff = e + ENTRY_SIZE + en.keyLen;
			en.end = (en.voff + 7) & ~7L;
			if (en.end > entEnd)
				throw entryCorrupt(e, "it ends at " + en.end + ", past the entries section's end " + entEnd);
			return en;
		}
		en.voff = place(e, en.type, flags, en.keyLen, en.valueLen);
		en.shared = (flags & ENTRY_SHARED) != 0;
		shape(e, false, en.type, en.voff, en.valueLen, true);
		long vpos = valuePos(e, en.type, en.shared, en.keyLen);
		en.end = en.shared ? vpos + 8 : (vpos + en.valueLen + nul(en.type) + 7) & ~7L;
		if (en.end > entEnd)
			throw entryCorrupt(e, "it ends at " + en.end + ", past the entries section's end " + entEnd);
		return en;
	}

	/** The next entry at or after pos (zero words skipped), or -1 at the section's end. */
	long nextEntry(long pos) {
		for (; pos + ENTRY_SIZE <= entEnd; pos += ENTRY_SIZE)
			if (Bytes.u64(seg, pos) != 0)
				return pos;
		return -1;
	}

	/** An entry decoded by entry(pos): its padding (after the key, after the value) is zero, its strings UTF-8. */
	void verifyEntryBytes(Entry en) {
		long pos = en.off;
		long p = pos + ENTRY_SIZE + en.keyLen;
		long vpos = valuePos(pos, en.type, en.shared, en.keyLen);
		long nz = Bytes.firstNonZero(seg, p, vpos - p);
		if (nz >= 0)
			throw entryCorrupt(pos, "non-zero padding byte at " + nz + " before its value");
		long after = en.shared ? vpos + 8 : en.voff + en.valueLen + nul(en.type);
		nz = Bytes.firstNonZero(seg, after, en.end - after);
		if (nz >= 0)
			throw entryCorrupt(pos, "non-zero padding byte at " + nz + " after its value");
		if (en.type == STRLIST)
			strlistText(pos, false, en.voff);
	}

	/** The full structural check, FORMAT.md §13 and §13, after §12's checks, which the constructor ran. */
	void verify() {
		Index.verify(this);
	}
}
