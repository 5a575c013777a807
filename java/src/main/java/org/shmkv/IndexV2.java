package org.shmkv;

import java.lang.foreign.MemorySegment;

/**
 * Format v2's index, layout B (FORMAT.md §17, V2B): 128-byte buckets whose
 * head holds count, D, the 48-bit displaced-key filter, then the directory,
 * one u16 per record: dir[i] = (tag << 7 | off) & 0xffff, the low 9 bits of
 * its key's tag and its offset in the bucket (V2B amendment 1); small
 * entries inline in the bucket, larger ones as OUT records of a v1 entry in
 * ENTRIES; expiry.
 *
 * <p>A lookup returns a locator: {@link #REC} | the image offset of the
 * record found (inline or OUT). {@link Image} reads a locator of either
 * version (a v1 locator is the entry's offset). One owner per rule here:
 * {@link #record} decodes a record with every bound a lookup checks.
 */
final class IndexV2 implements Index {
	static final IndexV2 INSTANCE = new IndexV2();

	static final int BUCKET = 128, HEAD = 8, MAX_RECORDS = 16, FILTER_BITS = 48;
	/** A directory entry: bytes per record; its offset bits 0..6, its tag bits 7..15. */
	static final int DIR_BYTES = 2, DIR_OFF = 0x7f, DIR_TAG = 0xff80, DIR_TAG_SHIFT = 7;
	static final int K_TYPE = 0x0f, K_RESERVED = 0x30, K_EXPIRES = 0x40, K_OUT = 0x80;
	static final int INLINE_HEAD = 3, OUT_HEAD = 6, EXPIRES_SIZE = 4;
	/** Marks a v2 locator (a record's image offset); image offsets stay below 2^43. */
	static final long REC = 1L << 62;
	private static final long LANES = 0x0001_0001_0001_0001L, HIGHS = 0x8000_8000_8000_8000L;
	private static final long TAG_LANES = DIR_TAG * LANES;

	static int filterBin(int tag) {
		return (tag * FILTER_BITS) >>> 16;
	}

	static long bucket(Image im, long b) {
		return im.idxOff + (long) BUCKET * b;
	}

	/** Where the directory of a bucket of n records ends: no record starts before it. */
	static int dirEnd(int n) {
		return HEAD + DIR_BYTES * n;
	}

	/** Record i's directory entry dir[i] in the bucket at bk. */
	static int dir(MemorySegment s, long bk, int i) {
		return Bytes.u16(s, bk + HEAD + (long) DIR_BYTES * i);
	}

	/** Record i's offset in the bucket at bk: dir[i] & 0x7f. */
	static int off(MemorySegment s, long bk, int i) {
		return Bytes.u8(s, bk + HEAD + (long) DIR_BYTES * i) & DIR_OFF;
	}

	/**
	 * The directory bits of a key with this tag: the tag's low 9 bits at bits
	 * 7..15. Record i is a candidate for the key when (dir[i] & 0xff80)
	 * equals this (1/512 of other keys match too; the key compare decides).
	 */
	static int dirTag(int tag) {
		return (tag << DIR_TAG_SHIFT) & DIR_TAG;
	}

	/**
	 * How many buckets after home bucket bk a key with this tag may have been
	 * displaced to (§17.3): 0, D, or max_probe for D = 255; capped at max_probe.
	 */
	static long displaced(Image im, long bk, int tag) {
		return displaced(Bytes.u64(im.seg, bk), tag, im.maxProbe);
	}

	/**
	 * displaced of a bucket whose first 8 bytes (count, D, the 48-bit filter,
	 * little-endian: filter bit i is bit 16 + i) are head.
	 */
	static long displaced(long head, int tag, int maxProbe) {
		int d = (int) (head >>> 8) & 0xff;
		if (d == 0 || (head >>> (16 + filterBin(tag)) & 1) == 0)
			return 0;
		return d < 255 ? Math.min(d, maxProbe) : maxProbe;
	}

	/** Counts the loads of {@link #request} whose word happened to be its constant: never read. */
	static int requested;

	/**
	 * FORMAT.md §17.5's reader policy, in part: the next bucket's first line
	 * is requested with the home bucket's, so that a key displaced by one
	 * bucket (28.9% of key_N at 1M, 23.5% at 10M) costs about one round
	 * trip, not two. Java has no prefetch: this is a plain load whose word
	 * only a branch that is (all but) never taken reads, so nothing waits
	 * for it before the home bucket is scanned; unlike a prefetch it must
	 * complete before the lookup retires, which makes a miss dearer. lib's
	 * policy (b's second line and both of b+1's) was measured too and made
	 * misses 10-32% dearer; this one line keeps most of the hits' gain
	 * (bench/RESULTS.md, Java). The next bucket of the last is the first.
	 */
	private static void request(Image im, long b, long bk) {
		long nk = b + 1 == im.bucketCount ? im.idxOff : bk + BUCKET;
		if (Bytes.u64(im.seg, nk) == 0x6b6d6873_2e76325aL)
			requested++;
	}

	@Override
	public long find(Image im, byte[] key, long lo, long hi, int len, long h) {
		int tag = IndexV1.tag(h);
		long b = IndexV1.home(h, im.bucketCount);
		long bk = bucket(im, b);
		request(im, b, bk);
		long head = Bytes.u64(im.seg, bk); // count, D and the filter in one read
		long r = scan(im, b, bk, (int) head & 0xff, tag, key, lo, hi, len);
		if (r >= 0)
			return r;
		long n = displaced(head, tag, im.maxProbe);
		for (long i = 0; i < n; i++) {
			b = b + 1 == im.bucketCount ? 0 : b + 1;
			bk = bucket(im, b);
			r = scan(im, b, bk, Bytes.u8(im.seg, bk), tag, key, lo, hi, len);
			if (r >= 0)
				return r;
		}
		return -1;
	}

	/**
	 * scan(c) of V2B: the records of bucket b (at bk, count n) whose directory tag bits match
	 * (four directory entries a word, masked with 0xff80 and compared at
	 * once), each decoded with its bounds; the locator of the one holding
	 * key, or -1.
	 */
	private static long scan(Image im, long b, long bk, int n, int tag, byte[] key, long lo, long hi, int len) {
		MemorySegment s = im.seg;
		if (n > MAX_RECORDS)
			throw corrupt(b, n + " records, at most " + MAX_RECORDS + " fit");
		long pattern = dirTag(tag) * LANES;
		for (int w = 0; w < n; w += 4) {
			long x = (Bytes.u64(s, bk + HEAD + DIR_BYTES * w) & TAG_LANES) ^ pattern;
			// a lane of x is 0 where the tag bits match. The zero test is
			// exact here: a non-zero lane is >= 0x80 (its bits 0..6 are
			// masked off), so subtracting 1, or 2 under a borrow from a zero
			// lane below, neither borrows out of it nor sets its bit 15
			// unless bit 15 was set already
			long z = (x - LANES) & ~x & HIGHS;
			while (z != 0) {
				int i = w + (Long.numberOfTrailingZeros(z) >>> 4);
				z &= z - 1;
				if (i >= n)
					break;
				long r = record(im, b, bk, n, i);
				if (matches(im, b, i, r, key, lo, hi, len))
					return REC | r;
			}
		}
		return -1;
	}

	/** Whether the record at image offset r (decoded by {@link #record}) holds key. */
	private static boolean matches(Image im, long b, int i, long r, byte[] key, long lo, long hi, int len) {
		MemorySegment s = im.seg;
		int kind = Bytes.u8(s, r);
		if ((kind & K_OUT) == 0) {
			int x = (kind & K_EXPIRES) != 0 ? EXPIRES_SIZE : 0;
			return Bytes.u8(s, r + 1) == len && Bytes.equal(s, r + INLINE_HEAD + x, key, lo, hi, len);
		}
		long e = outEntry(s, r);
		if (e < im.entOff || e > im.entEnd - 8)
			throw corrupt(b, "record " + i + ": entry offset " + e + " outside the entries section ["
					+ im.entOff + ", " + im.entEnd + ")");
		int kl = Bytes.u16(s, e + 2);
		if (kl != len)
			return false;
		if (e + 8 + kl > im.entEnd)
			throw corrupt(b, "record " + i + ": entry at " + e + ": key of " + len
					+ " bytes runs past the entries section end " + im.entEnd);
		return Bytes.equal(s, e + 8, key, lo, hi, len);
	}

	/** The entry offset an OUT record at r names (unit * 8; unchecked). */
	static long outEntry(MemorySegment s, long r) {
		return (Bytes.u32(s, r + 1) | (long) Bytes.u8(s, r + 5) << 32) << 3;
	}

	/**
	 * The image offset of record i of bucket b (at bk, count n), decoded with
	 * every bound of V2B's lookup: its offset at or after the directory, its
	 * kind (no reserved bits, a type 1..9 inline, none for OUT), and its head,
	 * expiry, key and value inside the bucket. Malformed: Corrupt.
	 */
	static long record(Image im, long b, long bk, int n, int i) {
		MemorySegment s = im.seg;
		int off = off(s, bk, i);
		long r = bk + off;
		if (off < dirEnd(n) || off >= BUCKET || size(s, r, BUCKET - off) < 0)
			throw corrupt(b, "record " + i + " at +" + off + ": malformed (kind "
					+ String.format("%02x", off < BUCKET ? Bytes.u8(s, r) : 0)
					+ "), inside the directory or past the bucket's end");
		return r;
	}

	/**
	 * The size of the record at r (room bytes to the bucket's end, at least
	 * 1), or -1 when it is malformed or does not fit.
	 */
	static int size(MemorySegment s, long r, int room) {
		int kind = Bytes.u8(s, r);
		int x = (kind & K_EXPIRES) != 0 ? EXPIRES_SIZE : 0;
		if ((kind & K_RESERVED) != 0)
			return -1;
		int size;
		if ((kind & K_OUT) != 0) {
			if ((kind & K_TYPE) != 0)
				return -1;
			size = OUT_HEAD + x;
		} else {
			int t = kind & K_TYPE;
			if (t < 1 || t > 9 || room < INLINE_HEAD)
				return -1;
			size = (int) (valuePos(r, kind, Bytes.u8(s, r + 1)) - r) + Bytes.u8(s, r + 2) + (Image.nul(t) ? 1 : 0);
		}
		return size <= room ? size : -1;
	}

	/** An inline record's key offset: after its head and expiry. */
	static long keyPos(long r, int kind) {
		return r + INLINE_HEAD + ((kind & K_EXPIRES) != 0 ? EXPIRES_SIZE : 0);
	}

	/**
	 * An inline record's value offset: after its key, aligned for its type
	 * within the bucket (buckets are 128-aligned in the image and images
	 * page-aligned, so aligning the image offset is the same).
	 */
	static long valuePos(long r, int kind, int keyLen) {
		long q = keyPos(r, kind) + keyLen;
		return Image.aligned(kind & K_TYPE) ? (q + 7) & ~7L : q;
	}

	/** A record's expiry (unix seconds), 0 when it has none. */
	static long expires(MemorySegment s, long r) {
		int kind = Bytes.u8(s, r);
		if ((kind & K_EXPIRES) == 0)
			return 0;
		return Bytes.u32(s, r + ((kind & K_OUT) != 0 ? OUT_HEAD : INLINE_HEAD));
	}

	static ShmkvException.Corrupt corrupt(long b, String m) {
		return new ShmkvException.Corrupt("index bucket " + b + ": " + m);
	}

	/**
	 * The v2 index check of FORMAT.md §17.7 and V2B: every bucket's head,
	 * directory, records and uncovered bytes; each record's value, padding,
	 * expiry, tag, home and displacement, and its lookup; the counts against
	 * the header; ENTRIES holds exactly the OUT records' entries.
	 */
	@Override
	public void verify(Image im) {
		MemorySegment s = im.seg;
		long count = 0, outs = 0, shared = 0, expiring = 0, maxD = 0;
		for (long b = 0; b < im.bucketCount; b++) {
			long bk = bucket(im, b);
			int d = Bytes.u8(s, bk + 1);
			if (d > im.maxProbe)
				throw corrupt(b, "displacement " + d + " exceeds max_probe " + im.maxProbe);
			if (d == 0 && Bytes.firstNonZero(s, bk + 2, FILTER_BITS / 8) >= 0)
				throw corrupt(b, "filter bits without displaced keys");
			int n = Bytes.u8(s, bk);
			if (n > MAX_RECORDS)
				throw corrupt(b, n + " records, at most " + MAX_RECORDS + " fit");
			int pos = dirEnd(n); // the record area: offsets ascending from here
			for (int i = 0, prev = -1; i < n; i++) {
				int off = off(s, bk, i);
				if (i > 0 ? off <= prev : off < pos)
					throw corrupt(b, "record " + i + " at +" + off + ": "
							+ (i > 0 ? "offsets not in ascending order" : "starts inside the directory"));
				prev = off;
			}
			for (int i = 0; i < n; i++) {
				int off = off(s, bk, i);
				if (off < pos)
					throw corrupt(b, "record " + i + " at +" + off + ": overlaps the record before (ends at +" + pos + ")");
				if (Bytes.firstNonZero(s, bk + pos, Math.min(off, BUCKET) - pos) >= 0)
					throw new ShmkvException.Corrupt("non-zero byte in bucket " + b + "'s record area before record " + i
							+ " (+" + pos + "..+" + off + ")");
				long r = record(im, b, bk, n, i);
				long dist = verifyRecord(im, b, bk, n, i, r);
				maxD = Math.max(maxD, dist);
				int kind = Bytes.u8(s, r);
				if ((kind & K_OUT) != 0) {
					outs++;
					if ((Bytes.u8(s, outEntry(s, r) + 1) & Image.ENTRY_SHARED) != 0)
						shared++;
				}
				if ((kind & K_EXPIRES) != 0)
					expiring++;
				pos = off + size(s, r, BUCKET - off);
				count++;
			}
			long nz = Bytes.firstNonZero(s, bk + pos, BUCKET - pos);
			if (nz >= 0)
				throw new ShmkvException.Corrupt("non-zero byte at offset " + nz + " after bucket " + b + "'s records");
		}
		if (count != im.entryCount)
			throw new ShmkvException.Corrupt("index holds " + count + " records, header says " + im.entryCount + " entries");
		if (maxD != im.maxProbe)
			throw new ShmkvException.Corrupt("longest probe is " + maxD + " buckets, header says " + im.maxProbe);
		boolean flag = (im.hdr.flags & Header.FLAG_EXPIRY) != 0;
		if ((expiring != 0) != flag)
			throw new ShmkvException.Corrupt(expiring + " records expire, but the header's expiry flag is "
					+ (flag ? "set" : "clear"));
		if (shared != im.hdr.dedupRefs)
			throw new ShmkvException.Corrupt(shared + " entries use shared values, header says " + im.hdr.dedupRefs);
		// ENTRIES: walked as in v1; each entry is its key's OUT record's, so
		// with the counts equal, entries and OUT records are one-to-one
		long ents = 0;
		for (long pos = im.nextEntry(im.entOff); pos >= 0; ) {
			Image.Entry en = im.decode(pos, true);
			im.verifyEntryBytes(en);
			byte[] key = en.key(s);
			long loc = im.locate(key, key.length);
			if (loc < 0 || (Bytes.u8(s, loc & ~REC) & K_OUT) == 0 || outEntry(s, loc & ~REC) != pos)
				throw Image.entryCorrupt(pos, "no OUT record of its key points at it");
			ents++;
			pos = im.nextEntry(en.end);
		}
		if (ents != outs)
			throw new ShmkvException.Corrupt("entries section holds " + ents + " entries, the index " + outs + " OUT records");
	}

	/** One record of bucket b (§17.7): returns its displacement. */
	private static long verifyRecord(Image im, long b, long bk, int n, int i, long r) {
		MemorySegment s = im.seg;
		int kind = Bytes.u8(s, r);
		String where = "record " + i + ": ";
		if ((kind & K_EXPIRES) != 0 && expires(s, r) == 0)
			throw corrupt(b, where + "expiry 0");
		byte[] key;
		if ((kind & K_OUT) != 0) {
			Image.Entry en = im.decode(outEntry(s, r), true);
			key = en.key(s);
		} else {
			int kl = Bytes.u8(s, r + 1);
			long kp = keyPos(r, kind);
			key = s.asSlice(kp, kl).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
			long vp = valuePos(r, kind, kl);
			long nz = Bytes.firstNonZero(s, kp + kl, vp - kp - kl);
			if (nz >= 0)
				throw new ShmkvException.Corrupt("non-zero byte at offset " + nz + " in record padding");
			im.checkValue(r | REC, true);
		}
		long h = im.hash(key, key.length);
		int tag = IndexV1.tag(h);
		int t = dir(s, bk, i) >>> DIR_TAG_SHIFT;
		if (t != dirTag(tag) >>> DIR_TAG_SHIFT)
			throw corrupt(b, where + "directory tag bits " + String.format("%03x", t) + ", key hashes to tag "
					+ String.format("%04x (low 9 bits %03x)", tag, tag & 0x1ff));
		long home = IndexV1.home(h, im.bucketCount);
		long d = b >= home ? b - home : b + im.bucketCount - home;
		if (d > im.maxProbe)
			throw corrupt(b, where + "key is " + d + " buckets from home, max_probe is " + im.maxProbe);
		if (d > 0 && displaced(im, bucket(im, home), tag) < d)
			throw corrupt(b, where + "key displaced " + d + " buckets, but its home bucket " + home
					+ " does not announce it");
		long found = im.locate(key, key.length);
		if (found != (REC | r))
			throw new ShmkvException.Corrupt("index record at " + r + ": lookup of its key does not find it"
					+ (found >= 0 ? " (duplicate key)" : ""));
		return d;
	}
}
