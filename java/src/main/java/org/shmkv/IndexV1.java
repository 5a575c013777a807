package org.shmkv;

import java.lang.foreign.MemorySegment;

/** Format v1's index (FORMAT.md §5, §6): buckets of 8 u64 slot words with a displaced-key record. */
final class IndexV1 implements Index {
	static final IndexV1 INSTANCE = new IndexV1();

	static int tag(long h) {
		int t = (int) (h & 0xFFFF);
		return t == 0 ? 1 : t;
	}

	static long home(long h, long buckets) {
		return Math.unsignedMultiplyHigh(h, buckets);
	}

	static int filterBin(int tag) {
		return (tag * 56) >>> 16;
	}

	@Override
	public long find(Image im, byte[] key, long lo, long hi, int len, long h) {
		MemorySegment s = im.seg;
		int tag = tag(h);
		long b = home(h, im.bucketCount);
		long e = scan(im, b, tag, key, lo, hi, len);
		if (e >= 0)
			return e;
		long base = im.idxOff + 64 * b;
		int d = (int) (Bytes.u64(s, base + 56) >>> 40) & 0xFF;
		if (d == 0)
			return -1;
		int fi = filterBin(tag);
		if (((Bytes.u64(s, base + 8 * (fi >>> 3)) >>> (40 + (fi & 7))) & 1) == 0)
			return -1;
		long n = d < 255 ? Math.min(d, im.maxProbe) : im.maxProbe;
		for (long i = 0; i < n; i++) {
			b = b + 1 == im.bucketCount ? 0 : b + 1;
			e = scan(im, b, tag, key, lo, hi, len);
			if (e >= 0)
				return e;
		}
		return -1;
	}

	/** find(c) of FORMAT.md §6: the slots of bucket b whose tag matches, in slot order. */
	private static long scan(Image im, long b, int tag, byte[] key, long lo, long hi, int len) {
		MemorySegment s = im.seg;
		long base = im.idxOff + 64 * b;
		for (int j = 0; j < 8; j++) {
			long w = Bytes.u64(s, base + 8 * j);
			if ((int) (w >>> 48) != tag)
				continue;
			long e = (w & 0xFFFFFFFFFFL) << 3;
			if (e < im.entOff || e > im.entEnd - 8)
				throw new ShmkvException.Corrupt("bucket " + b + " slot " + j + ": entry offset " + e
						+ " outside the entries section [" + im.entOff + ", " + im.entEnd + ")");
			int kl = Bytes.u16(s, e + 2);
			if (kl != len)
				continue;
			if (e + 8 + kl > im.entEnd)
				throw new ShmkvException.Corrupt("bucket " + b + " slot " + j + ": key of entry " + e
						+ " runs past the entries section end " + im.entEnd);
			if (Bytes.equal(s, e + 8, key, lo, hi, len))
				return e;
		}
		return -1;
	}

	@Override
	public void verify(Image im) {
		MemorySegment s = im.seg;
		long full = 0, maxDisp = 0;
		for (long b = 0; b < im.bucketCount; b++) {
			long base = im.idxOff + 64 * b;
			int d = (int) (Bytes.u64(s, base + 56) >>> 40) & 0xFF;
			if (d != 0 && d > im.maxProbe)
				throw corrupt(b, 7, "displacement byte " + d + " above max_probe " + im.maxProbe);
			boolean empty = false;
			for (int j = 0; j < 8; j++) {
				long w = Bytes.u64(s, base + 8 * j);
				if (w == 0) {
					empty = true;
					continue;
				}
				if (empty)
					throw corrupt(b, j, "full slot after an empty one");
				int meta = (int) (w >>> 40) & 0xFF;
				if (d == 0 && meta != 0)
					throw corrupt(b, j, "meta byte " + meta + " in a bucket that announces no displaced key");
				long e = (w & 0xFFFFFFFFFFL) << 3;
				Image.Entry en = im.decode(e, true);
				long h = im.hash(en.key(s), en.keyLen);
				if ((int) (w >>> 48) != tag(h))
					throw corrupt(b, j, "tag " + Long.toHexString(w >>> 48) + " is not its key's " + Integer.toHexString(tag(h)));
				long home = home(h, im.bucketCount);
				long disp = b >= home ? b - home : b + im.bucketCount - home;
				if (disp > im.maxProbe)
					throw corrupt(b, j, "displacement " + disp + " above max_probe " + im.maxProbe);
				if (disp > 0) {
					long hb = im.idxOff + 64 * home;
					int hd = (int) (Bytes.u64(s, hb + 56) >>> 40) & 0xFF;
					int fi = filterBin(tag(h));
					boolean bit = ((Bytes.u64(s, hb + 8 * (fi >>> 3)) >>> (40 + (fi & 7))) & 1) != 0;
					if (hd == 0 || !bit || (hd < 255 && disp > hd))
						throw corrupt(b, j, "displaced key (displacement " + disp + ") is not announced by its home bucket " + home);
				}
				maxDisp = Math.max(maxDisp, disp);
				full++;
			}
		}
		if (full != im.entryCount)
			throw new ShmkvException.Corrupt("index holds " + full + " keys, entry_count is " + im.entryCount);
		if (maxDisp != im.maxProbe)
			throw new ShmkvException.Corrupt("largest displacement is " + maxDisp + ", max_probe is " + im.maxProbe);
	}

	private static ShmkvException.Corrupt corrupt(long b, int j, String m) {
		return new ShmkvException.Corrupt("bucket " + b + " slot " + j + ": " + m);
	}
}
