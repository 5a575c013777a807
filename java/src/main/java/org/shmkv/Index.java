package org.shmkv;

import static org.shmkv.Format.*;

import java.lang.foreign.MemorySegment;

/**
 * The index (FORMAT.md §6.1-§6.5): 128-byte buckets whose head holds
 * count, D and the 48-bit displaced-key filter, then the directory, one
 * 2-byte entry a record, dir[i] = (tag << 7 | off) & 0xffff (the low 9 bits
 * of its key's tag and its offset in the bucket), then the records: small
 * ones inline (key and value in the bucket), the rest OUT (an entry in
 * ENTRIES).
 *
 * <p>A lookup returns the image offset of the record that holds the key.
 * One owner per rule: {@link #decode} is the record rule (kind, bounds in
 * the bucket), which lookups, iteration and verify all use.
 */
final class Index {
	private Index() {}

	private static final long LANES = 0x0001_0001_0001_0001L, HIGHS = 0x8000_8000_8000_8000L;
	private static final long TAG_LANES = DIR_TAG * LANES;

	/** The key tag of hash h (FORMAT.md §5): its low 16 bits, 0 made 1. */
	static int tag(long h) {
		int t = (int) h & 0xFFFF;
		return t == 0 ? 1 : t;
	}

	/** The home bucket of hash h among buckets (FORMAT.md §5). */
	static long home(long h, long buckets) {
		return Math.unsignedMultiplyHigh(h, buckets);
	}

	/** A tag's bit of the displaced-key filter (FORMAT.md §6.1). */
	static int filterBin(int tag) {
		return (tag * FILTER_BITS) >>> 16;
	}

	/** The directory bits of a key with this tag: dir[i] & 0xff80 of its records. */
	static int dirTag(int tag) {
		return (tag << DIR_TAG_SHIFT) & DIR_TAG;
	}

	/** Where the directory of a bucket of n records ends: no record starts before it. */
	static int dirEnd(int n) {
		return HEAD + DIR_BYTES * n;
	}

	/** Record i's directory entry dir[i] in the bucket at bk. */
	static int dir(MemorySegment s, long bk, int i) {
		return Bytes.u16(s, bk + HEAD + (long) DIR_BYTES * i);
	}

	/**
	 * How many buckets after its home a key with this tag may lie (§6.1),
	 * from the home bucket's head word (count, D, then the filter: bit i at
	 * bit 16 + i): 0 unless D is set and the tag's filter bit too; then D,
	 * max_probe for D = 255, never more than max_probe.
	 */
	static long displaced(long head, int tag, int maxProbe) {
		int d = (int) (head >>> 8) & 0xff;
		if (d == 0 || (head >>> (16 + filterBin(tag)) & 1) == 0)
			return 0;
		return d < MAX_DISPLACEMENT_BYTE ? Math.min(d, maxProbe) : maxProbe;
	}

	/**
	 * The record at bucket offset off as one word: its first 8 bytes, or
	 * (near the bucket's end) those up to the end, zero above. A record's
	 * kind, key_len and value_len (or OUT unit) are in it.
	 */
	static long word(MemorySegment s, long bk, int off) {
		return off <= BUCKET - 8 ? Bytes.u64(s, bk + off) : Bytes.u64(s, bk + BUCKET - 8) >>> 8 * (off - (BUCKET - 8));
	}

	/**
	 * The record rule (§6.2, and the bounds of §12.1): whether the record at
	 * bucket offset off, whose word is w, in a bucket of n records, is well
	 * formed. Malformed: it starts inside the directory, has unknown kind
	 * bits, is inline with a type out of 1..9 or OUT with type bits, or its
	 * head, expiry, key, value and NUL do not end inside the bucket. The
	 * common record, inline without an expiry, is checked here; the others
	 * by {@link #validOther}. The accessors below read a valid record's
	 * fields from its word and offset. kinds: the kind bits the image may
	 * use (a delta's add TOMB: a tombstone is kind 0x10 with value_len 0, or
	 * 0x90, §19.2).
	 */
	static boolean valid(long w, int off, int n, int kinds) {
		int kind = kind(w);
		if (kind >= 1 && kind <= MAX_TYPE)
			return off >= dirEnd(n) && end(w, off) <= BUCKET;
		return validOther(w, off, n, kinds);
	}

	/** valid of a record that expires, is OUT, is a tombstone, or is malformed. */
	private static boolean validOther(long w, int off, int n, int kinds) {
		int kind = kind(w);
		if (off < dirEnd(n) || (kind & ~kinds) != 0)
			return false;
		if ((kind & K_TOMB) != 0)
			return (kind == OUT_TOMB || kind == INLINE_TOMB && valueLen(w) == 0) && end(w, off) <= BUCKET;
		return (out(kind) ? (kind & K_TYPE) == 0 : known(kind & K_TYPE)) && end(w, off) <= BUCKET;
	}

	/** A record's kind byte: type, EXPIRES and OUT bits. */
	static int kind(long w) {
		return (int) w & 0xff;
	}

	private static int expiresSize(int kind) {
		return (kind & K_EXPIRES) != 0 ? EXPIRES_SIZE : 0;
	}

	/** An inline record's key: its offset in the bucket, after the head and expiry. */
	static int keyPos(long w, int off) {
		return off + INLINE_HEAD + expiresSize(kind(w));
	}

	static int keyLen(long w) {
		return (int) (w >>> 8) & 0xff;
	}

	/** An inline record's value: its offset in the bucket, after the key, at its type's alignment. */
	static int valuePos(long w, int off) {
		int p = keyPos(w, off) + keyLen(w);
		return (ALIGNED >>> (kind(w) & K_TYPE) & 1) != 0 ? (p + 7) & ~7 : p;
	}

	static int valueLen(long w) {
		return (int) (w >>> 16) & 0xff;
	}

	/** Where the record ends in the bucket: an OUT one after its head and expiry, an inline one after its value's NUL. */
	static int end(long w, int off) {
		int kind = kind(w);
		if (out(kind))
			return off + OUT_HEAD + expiresSize(kind);
		return valuePos(w, off) + valueLen(w) + (NUL_FOLLOWS >>> (kind & K_TYPE) & 1);
	}

	static boolean out(int kind) {
		return (kind & K_OUT) != 0;
	}

	// A locator: what a lookup returns for the record it found. An OUT
	// record's is OUT | its image offset, with TYPE_BITS all set (its type is
	// in its entry) unless it is a tombstone; an inline record's is its
	// value's image offset (bits 0-42: images are smaller than 2^43 bytes),
	// its value_len (43-50), type (51-54: 0 for a tombstone) and the value's
	// distance from the record's start (55-61), which its getters read
	// without reading the record again. So a tombstone's locator, and only
	// a tombstone's, has type bits 0 (§19.2). -1: no record.

	static final long OUT = 1L << 62;
	private static final long OFFSET = (1L << 43) - 1, TYPE_BITS = (long) K_TYPE << 51;

	/** The locator of the valid record at image offset r whose word is w. */
	static long locator(long r, long w) {
		int kind = kind(w);
		if (out(kind))
			return OUT | r | ((kind & K_TOMB) != 0 ? 0 : TYPE_BITS);
		int off = (int) r & (BUCKET - 1), back = valuePos(w, off) - off;
		return r + back | (long) valueLen(w) << 43 | (long) (kind & K_TYPE) << 51 | (long) back << 55;
	}

	/** Whether a locator's record is a tombstone (a delta's, §19.2). */
	static boolean tomb(long loc) {
		return (loc & TYPE_BITS) == 0;
	}

	/** The locator of the record at image offset r (iteration), checked again. */
	static long locator(Image im, long r) {
		return locator(r, checkedWord(im, r));
	}

	/** The image offset of a locator's record. */
	static long record(long loc) {
		return inline(loc) ? (loc & OFFSET) - (loc >>> 55 & 0x7f) : loc & OFFSET;
	}

	/** Whether a locator's record is inline: its value's type, length and place are in the locator. */
	static boolean inline(long loc) {
		return (loc & OUT) == 0;
	}

	/** An inline locator's value type. */
	static int inlineType(long loc) {
		return (int) (loc >>> 51) & K_TYPE;
	}

	/** An inline locator's value length. */
	static int inlineLen(long loc) {
		return (int) (loc >>> 43) & 0xff;
	}

	/** An inline locator's value offset in the image. */
	static long inlineValue(long loc) {
		return loc & OFFSET;
	}

	/** The entry an OUT record's word names: its unit, times 8 (unchecked). */
	static long outEntry(long w) {
		return (w >>> 8 & 0xFF_FFFF_FFFFL) << OUT_UNIT_SHIFT;
	}

	/** The expiry of the record at image offset r of this kind (unix seconds); 0: none. */
	static long expires(MemorySegment s, long r, int kind) {
		if ((kind & K_EXPIRES) == 0)
			return 0;
		return Bytes.u32(s, r + (out(kind) ? OUT_HEAD : INLINE_HEAD));
	}

	/**
	 * The word of the record at image offset r, which a lookup or the
	 * iteration found, checked again (the image is read, not trusted to be
	 * as it was: malformed now, it is Corrupt).
	 */
	static long checkedWord(Image im, long r) {
		long bk = r & -BUCKET; // the index is 128-aligned (checked at open)
		int off = (int) r & (BUCKET - 1), n = Bytes.u8(im.seg, bk);
		long w = word(im.seg, bk, off);
		if (n > MAX_RECORDS || !valid(w, off, n, im.kinds))
			throw im.corrupt(bucketOf(im, bk) + ": the record at +" + off + " is malformed");
		return w;
	}

	/** "index bucket B" of the bucket at image offset bk. */
	static String bucketOf(Image im, long bk) {
		return "index bucket " + (bk - im.idxOff) / BUCKET;
	}

	/**
	 * Takes the xor of the words a batch loaded early (Batch): Java has no
	 * prefetch, so a batch requests a line by a plain load whose word only
	 * a comparison that is (all but) never true reads.
	 */
	static void sink(long x) {
		if (x == 0x6b6d6873_2e76325aL)
			requested++;
	}

	/** Counts the sinks whose word happened to be the constant: never read. */
	static int requested;

	/**
	 * The lookup (§6.4): the locator of the record holding the key (expired
	 * or not), or -1. The key is packed in lo and tl (Keys) when it has at
	 * most 16 bytes, else key[0, len); h is its hash. Every offset it follows
	 * is checked (§12.1): a malformed record it meets is Corrupt, never a
	 * read outside the image.
	 *
	 * <p>One method with its loops, the home bucket then those its D and
	 * filter announce, each bucket's directory four entries a word: the JIT
	 * compiles it whole, once, and its callers call it (a lookup split into
	 * methods of their own, each compiled alone first, would be calls within
	 * calls).
	 *
	 * <p>A single get requests no line ahead (FORMAT.md §6.4's reader
	 * policy asks for the home's second line and the next bucket): without a
	 * prefetch instruction a request is a load that must complete before it
	 * retires, and it held the core's room for the next get's loads, so that
	 * a loop of gets overlapped less. Measured (Compare, 1M keys, three
	 * interleaved runs): misses 96 ns with no request, 113 requesting the
	 * next bucket, 116 the home's second line; hits 215, 210, 219. A batch
	 * requests lines for a block of keys at once (Batch).
	 */
	static long find(Image im, byte[] key, long lo, long tl, int len, long h) {
		MemorySegment s = im.seg;
		long idxOff = im.idxOff, buckets = im.bucketCount;
		int kinds = im.kinds, tag = tag(h);
		long b = home(h, buckets);
		long bk = idxOff + BUCKET * b;
		long head = Bytes.u64(s, bk); // count, D and the filter in one read
		long pattern = dirTag(tag) * LANES;
		for (long probes = -1; ; ) {
			int n = (int) head & 0xff;
			if (n > MAX_RECORDS)
				throw tooMany(im, bk, n);
			for (int w = 0; w < n; w += 4) {
				long dw = Bytes.u64(s, bk + HEAD + DIR_BYTES * w);
				long x = (dw & TAG_LANES) ^ pattern;
				// a lane of x is 0 where the tag bits match. The zero test is
				// exact here: a non-zero lane is >= 0x80 (its bits 0..6 are
				// masked off), so subtracting 1, or 2 under a borrow from a
				// zero lane below, neither borrows out of it nor sets its bit
				// 15 unless bit 15 was set already; lanes past n are dropped
				for (long z = (x - LANES) & ~x & HIGHS & -1L >>> 64 - 16 * Math.min(n - w, 4); z != 0; z &= z - 1) {
					int lane = Long.numberOfTrailingZeros(z) >>> 4;
					int off = (int) (dw >>> 16 * lane) & DIR_OFF;
					long rw = word(s, bk, off);
					if (!valid(rw, off, n, kinds))
						throw malformed(im, bk, n, w + lane, off, rw);
					if (out(kind(rw)) ? outHolds(im, bk, w + lane, rw, key, lo, tl, len)
							: keyLen(rw) == len && equal(s, bk + keyPos(rw, off), key, lo, tl, len))
						return locator(bk + off, rw);
				}
			}
			if (probes < 0) // home scanned: the buckets after it its D and filter announce for this tag
				probes = displaced(head, tag, im.maxProbe);
			if (probes-- == 0)
				return -1;
			b = b + 1 == buckets ? 0 : b + 1;
			bk = idxOff + BUCKET * b;
			head = Bytes.u64(s, bk);
		}
	}

	private static ShmkvException.Corrupt tooMany(Image im, long bk, int n) {
		return im.corrupt(bucketOf(im, bk) + ": " + n + " records, at most " + MAX_RECORDS + " fit");
	}

	/** Record i (at +off, word w) of a bucket of n records is not valid: which rule it breaks. */
	private static ShmkvException.Corrupt malformed(Image im, long bk, int n, int i, int off, long w) {
		int kind = kind(w);
		String why = off < dirEnd(n) ? "it starts inside the directory, which ends at +" + dirEnd(n)
				: (kind & ~im.kinds) != 0 ? "unknown kind bits 0x" + Integer.toHexString(kind & ~im.kinds)
				: (kind & K_TOMB) != 0 && kind != INLINE_TOMB && kind != OUT_TOMB ? "a tombstone's kind is 0x"
						+ Integer.toHexString(INLINE_TOMB) + " or 0x" + Integer.toHexString(OUT_TOMB)
				: kind == INLINE_TOMB && valueLen(w) != 0 ? "an inline tombstone with value_len " + valueLen(w)
				: out(kind) && (kind & K_TYPE) != 0 ? "an OUT record with type bits"
				: !out(kind) && !known(kind & K_TYPE) ? "unknown value type " + (kind & K_TYPE)
				: "it ends at +" + end(w, off) + ", past the bucket's end";
		return im.corrupt(bucketOf(im, bk) + ": record " + i + " at +" + off + " (kind 0x" + Integer.toHexString(kind)
				+ ") is malformed: " + why);
	}

	/** Whether the entry of the OUT record (word w) holds the key; its entry offset and key bounds checked. */
	private static boolean outHolds(Image im, long bk, int i, long w, byte[] key, long lo, long tl, int len) {
		long e = outEntry(w);
		if (e < im.entOff || e > im.entEnd - ENTRY_SIZE)
			throw im.corrupt(bucketOf(im, bk) + ": record " + i + ": entry offset " + e
					+ " outside the entries section [" + im.entOff + ", " + im.entEnd + ")");
		int kl = Bytes.u16(im.seg, e + E_KEY_LEN);
		if (kl != len)
			return false;
		if (e + ENTRY_SIZE + kl > im.entEnd)
			throw im.corrupt(bucketOf(im, bk) + ": record " + i + ": the key of its entry at " + e
					+ " runs past the entries section's end " + im.entEnd);
		return equal(im.seg, e + ENTRY_SIZE, key, lo, tl, len);
	}

	/**
	 * Whether image bytes [p, p + len) are the key: packed (len <= 16; the
	 * 8 bytes before p + len lie in the image) or key[0, len). Words, not
	 * bytes: a key shorter than 8 bytes is compared in the word that ends
	 * where it ends.
	 */
	static boolean equal(MemorySegment s, long p, byte[] key, long lo, long tl, int len) {
		if (len <= Keys.PACKED) {
			if (len >= 8)
				return Bytes.u64(s, p) == lo && Bytes.u64(s, p + len - 8) == tl;
			return len == 0 || Bytes.u64(s, p + len - 8) >>> 64 - 8 * len == lo;
		}
		int i = 0;
		for (; i + 8 <= len; i += 8)
			if (Bytes.u64(s, p + i) != (long) Keys.U64.get(key, i))
				return false;
		return i == len || Bytes.u64(s, p + len - 8) == (long) Keys.U64.get(key, len - 8);
	}

	/**
	 * The index part of the full check (§13): every bucket's head,
	 * directory, records and uncovered bytes; each record's value, padding,
	 * expiry, tag, home and displacement, and its lookup; the counts against
	 * the header; ENTRIES holds exactly the OUT records' entries. A delta's
	 * (§19.4): tombstones as §19.2 says (their kind and empty value in the
	 * record rule, an OUT one's entry of type 0 by {@link Image#entry}),
	 * every key's filter bits, entry_count with the tombstones, and the
	 * entries of type 0 exactly the OUT tombstones'.
	 */
	static void verify(Image im) {
		MemorySegment s = im.seg;
		long count = 0, outs = 0, shared = 0, expiring = 0, maxD = 0;
		for (long b = 0; b < im.bucketCount; b++) {
			long bk = im.idxOff + BUCKET * b;
			String where = "index bucket " + b;
			int d = Bytes.u8(s, bk + 1);
			if (d > im.maxProbe)
				throw im.corrupt(where + ": displacement " + d + " exceeds max_probe " + im.maxProbe);
			if (d == 0 && Bytes.firstNonZero(s, bk + 2, FILTER_BITS / 8) >= 0)
				throw im.corrupt(where + ": filter bits without displaced keys");
			int n = Bytes.u8(s, bk);
			if (n > MAX_RECORDS)
				throw im.corrupt(where + ": " + n + " records, at most " + MAX_RECORDS + " fit");
			int pos = dirEnd(n); // the record area: offsets ascending from here
			for (int i = 0, prev = -1; i < n; i++) {
				int off = dir(s, bk, i) & DIR_OFF;
				if (i > 0 ? off <= prev : off < pos)
					throw im.corrupt(where + ": record " + i + " at +" + off + ": "
							+ (i > 0 ? "offsets not in ascending order" : "starts inside the directory"));
				prev = off;
			}
			for (int i = 0; i < n; i++) {
				int off = dir(s, bk, i) & DIR_OFF;
				if (off < pos)
					throw im.corrupt(where + ": record " + i + " at +" + off + " overlaps the record before (ends at +"
							+ pos + ")");
				if (Bytes.firstNonZero(s, bk + pos, off - pos) >= 0)
					throw im.corrupt(where + ": non-zero byte in the record area before record " + i + " (+" + pos
							+ "..+" + off + ")");
				long w = word(s, bk, off);
				if (!valid(w, off, n, im.kinds))
					throw malformed(im, bk, n, i, off, w);
				maxD = Math.max(maxD, verifyRecord(im, b, bk, i, off, w));
				if (out(kind(w))) {
					outs++;
					if ((Bytes.u8(s, outEntry(w) + E_FLAGS) & ENTRY_SHARED) != 0)
						shared++;
				}
				if ((kind(w) & K_EXPIRES) != 0)
					expiring++;
				pos = end(w, off);
				count++;
			}
			long nz = Bytes.firstNonZero(s, bk + pos, BUCKET - pos);
			if (nz >= 0)
				throw im.corrupt(where + ": non-zero byte at offset " + nz + " after its records");
		}
		if (count != im.entryCount)
			throw im.corrupt("the index holds " + count + " records, the header's entry_count is " + im.entryCount);
		if (maxD != im.maxProbe)
			throw im.corrupt("the longest probe is " + maxD + " buckets, the header's max_probe is " + im.maxProbe);
		boolean flag = im.expiry;
		if ((expiring != 0) != flag)
			throw im.corrupt(expiring + " records expire, but the header's expiry flag is " + (flag ? "set" : "clear"));
		if (shared != im.hdr.dedupRefs)
			throw im.corrupt(shared + " entries use shared values, the header's dedup_refs is " + im.hdr.dedupRefs);
		// ENTRIES: each entry is its key's OUT record's, so with the counts
		// equal, entries and OUT records are one to one
		long ents = 0;
		for (long pos = im.nextEntry(im.entOff); pos >= 0; ) {
			Image.Entry en = im.entry(pos);
			im.verifyEntryBytes(en);
			byte[] key = en.key(s);
			long loc = im.locate(key, key.length);
			long r = record(loc);
			if (loc < 0 || inline(loc) || outEntry(im.word(r)) != pos)
				throw im.entryCorrupt(pos, "no OUT record of its key points at it");
			ents++;
			pos = im.nextEntry(en.end);
		}
		if (ents != outs)
			throw im.corrupt("the entries section holds " + ents + " entries, the index " + outs + " OUT records");
	}

	/** Record i of bucket b (at bk; offset off, word w, valid), as §13 checks it: returns its displacement. */
	private static long verifyRecord(Image im, long b, long bk, int i, int off, long w) {
		MemorySegment s = im.seg;
		long r = bk + off;
		int kind = kind(w);
		String where = "index bucket " + b + ": record " + i;
		if ((kind & K_EXPIRES) != 0 && expires(s, r, kind) == 0)
			throw im.corrupt(where + ": expiry 0");
		byte[] key;
		boolean tomb = (kind & K_TOMB) != 0;
		if (out(kind)) {
			Image.Entry en = im.entry(outEntry(w));
			// entries of type 0 are exactly the OUT tombstones' (§19.4)
			if (tomb != (en.type == TOMB_ENTRY_TYPE))
				throw im.corrupt(where + ": " + (tomb ? "an OUT tombstone whose entry at " + en.off + " has type "
						+ en.type : "an OUT record whose entry at " + en.off + " is a tombstone's (type 0)"));
			key = en.key(s);
		} else if (tomb) {
			key = Bytes.copy(s, bk + keyPos(w, off), keyLen(w));
		} else {
			int kp = keyPos(w, off), kl = keyLen(w), vp = valuePos(w, off);
			key = Bytes.copy(s, bk + kp, kl);
			long nz = Bytes.firstNonZero(s, bk + kp + kl, vp - kp - kl);
			if (nz >= 0)
				throw im.corrupt(where + ": non-zero byte at offset " + nz + " in its padding");
			im.checkValue(locator(r, w), true);
		}
		long h = im.hash(key, key.length);
		if (im.delta && !im.mayHold(h))
			throw im.corrupt(where + ": its key's filter bits are not all set (§19.3)");
		int tag = tag(h);
		int t = dir(s, bk, i) >>> DIR_TAG_SHIFT;
		if (t != dirTag(tag) >>> DIR_TAG_SHIFT)
			throw im.corrupt(where + ": directory tag bits " + String.format("%03x", t) + ", its key hashes to tag "
					+ String.format("%04x (low 9 bits %03x)", tag, tag & 0x1ff));
		long home = home(h, im.bucketCount);
		long dist = b >= home ? b - home : b + im.bucketCount - home;
		if (dist > im.maxProbe)
			throw im.corrupt(where + ": its key is " + dist + " buckets from home, max_probe is " + im.maxProbe);
		if (dist > 0 && displaced(Bytes.u64(s, im.idxOff + BUCKET * home), tag, im.maxProbe) < dist)
			throw im.corrupt(where + ": its key is displaced " + dist + " buckets, but its home bucket " + home
					+ " does not announce it");
		long found = im.locate(key, key.length);
		if (found < 0 || record(found) != r)
			throw im.corrupt(where + ": a lookup of its key does not find it" + (found >= 0 ? " (duplicate key)" : ""));
		return dist;
	}
}
