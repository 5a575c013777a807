package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * A test-only writer of images, written from the specification (FORMAT.md)
 * and not from the C builder, so that the reader's tests do not depend
 * on the builder: records placed as §14's builder conventions say (home
 * keys first, smallest record first; the rest to the next bucket with room,
 * D and filter set at home; a 2-byte directory entry a record), small
 * records inline, the rest OUT with an entry in ENTRIES (no shared values),
 * seed 0, hash_bits 64.
 */
final class Encoder {
	record Rec(byte[] key, int type, byte[] value, long expires, boolean forceOut) {}

	final List<Rec> recs = new ArrayList<>();
	int inlineBound = 64;

	Encoder add(String key, int type, byte[] value) {
		return add(key.getBytes(StandardCharsets.UTF_8), type, value, 0, false);
	}

	Encoder add(byte[] key, int type, byte[] value, long expires, boolean forceOut) {
		recs.add(new Rec(key, type, value, expires, forceOut));
		return this;
	}

	static byte[] str(String s) {
		return s.getBytes(StandardCharsets.UTF_8);
	}

	static byte[] i64(long v) {
		return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array();
	}

	static byte[] f64(double v) {
		return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putDouble(v).array();
	}

	static byte[] f32s(float... v) {
		ByteBuffer b = ByteBuffer.allocate(4 * v.length).order(ByteOrder.LITTLE_ENDIAN);
		for (float f : v)
			b.putFloat(f);
		return b.array();
	}

	static byte[] strlist(String... v) {
		int data = 0;
		for (String s : v)
			data += str(s).length + 1;
		ByteBuffer b = ByteBuffer.allocate(4 * (v.length + 2) + data).order(ByteOrder.LITTLE_ENDIAN);
		b.putInt(v.length).putInt(0);
		int end = 0;
		for (String s : v)
			b.putInt(end += str(s).length + 1);
		for (String s : v)
			b.put(str(s)).put((byte) 0);
		return b.array();
	}

	private static final class Placed {
		final Rec rec;
		final long h, home;
		final int tag;
		final boolean out;
		long entry; // OUT: the entry's image offset

		Placed(Rec r, long buckets, int inlineBound) {
			rec = r;
			h = Xxh3.SEED0.hashBytesToLong(r.key);
			tag = Index.tag(h);
			home = Index.home(h, buckets);
			int worst = 3 + (r.expires != 0 ? 4 : 0) + r.key.length + ((Format.align(r.type) == 8) ? 7 : 0) + stored(r);
			out = r.forceOut || r.key.length > 255 || r.value.length > 255 || worst > inlineBound;
		}
	}

	static int stored(Rec r) {
		return r.value.length + Format.nul(r.type);
	}

	/** The size of p's record at bucket offset pos. */
	static int size(Placed p, int pos) {
		int x = p.rec.expires != 0 ? 4 : 0;
		if (p.out)
			return 6 + x;
		int q = pos + 3 + x + p.rec.key.length;
		int v = (Format.align(p.rec.type) == 8) ? (q + 7) & ~7 : q;
		return v - pos + stored(p.rec);
	}

	static boolean fits(List<Placed> b) {
		if (b.size() > Format.MAX_RECORDS)
			return false;
		int pos = 8 + 2 * b.size();
		for (Placed p : b)
			pos += size(p, pos);
		return pos <= 128;
	}

	/** The image, with bucketCount buckets (keys must fit them). */
	byte[] build(long bucketCount) {
		int bc = (int) bucketCount;
		List<Placed> all = new ArrayList<>();
		for (Rec r : recs)
			all.add(new Placed(r, bc, inlineBound));
		all.sort(Comparator.<Placed>comparingLong(p -> p.home).thenComparing((a, b) -> Arrays.compareUnsigned(a.rec.key, b.rec.key)));
		List<List<Placed>> buckets = new ArrayList<>();
		for (int i = 0; i < bc; i++)
			buckets.add(new ArrayList<>());
		List<Placed> rest = new ArrayList<>();
		// pass 1: home keys, smallest record first, while they fit
		for (int i = 0; i < all.size(); ) {
			int j = i;
			while (j < all.size() && all.get(j).home == all.get(i).home)
				j++;
			List<Placed> homed = new ArrayList<>(all.subList(i, j));
			homed.sort(Comparator.comparingInt(p -> size(p, 0)));
			List<Placed> b = buckets.get((int) all.get(i).home);
			for (Placed p : homed) {
				b.add(p);
				if (!fits(b)) {
					b.remove(b.size() - 1);
					rest.add(p);
				}
			}
			i = j;
		}
		rest.sort(Comparator.<Placed>comparingLong(p -> p.home).thenComparing((a, b) -> Arrays.compareUnsigned(a.rec.key, b.rec.key)));
		int[] disp = new int[bc];
		byte[][] filter = new byte[bc][6];
		int maxProbe = 0;
		for (Placed p : rest) {
			int d = 1;
			for (; ; d++) {
				if (d >= bc)
					throw new IllegalStateException("the keys do not fit " + bc + " buckets");
				List<Placed> b = buckets.get((int) ((p.home + d) % bc));
				b.add(p);
				if (fits(b))
					break;
				b.remove(b.size() - 1);
			}
			int home = (int) p.home;
			disp[home] = Math.max(disp[home], Math.min(d, 255));
			int fi = Index.filterBin(p.tag);
			filter[home][fi >>> 3] |= (byte) (1 << (fi & 7));
			maxProbe = Math.max(maxProbe, d);
		}
		// ENTRIES: the OUT records' entries, in bucket order
		ByteBuffer ent = ByteBuffer.allocate(1 << 22).order(ByteOrder.LITTLE_ENDIAN);
		long idxOff = 4096, idxSize = 128L * bc;
		long entOff = (idxOff + idxSize + 63) & ~63L;
		for (List<Placed> b : buckets)
			for (Placed p : b)
				if (p.out) {
					p.entry = entOff + ent.position();
					Rec r = p.rec;
					ent.put((byte) r.type).put((byte) 0).putShort((short) r.key.length).putInt(r.value.length).put(r.key);
					if (Format.align(r.type) == 8)
						ent.position((ent.position() + 7) & ~7);
					ent.put(r.value);
					if (Format.nul(r.type) == 1)
						ent.put((byte) 0);
					ent.position((ent.position() + 7) & ~7);
				}
		long entSize = ent.position();
		long valOff = (entOff + entSize + 63) & ~63L;
		long fileSize = (valOff + 4095) & ~4095L;
		if (fileSize == valOff)
			fileSize += 4096; // keep VALUES' offset inside the image
		ByteBuffer img = ByteBuffer.allocate((int) fileSize).order(ByteOrder.LITTLE_ENDIAN);
		boolean expiry = false;
		for (int i = 0; i < bc; i++) {
			List<Placed> b = buckets.get(i);
			int base = (int) (idxOff + 128L * i);
			int n = b.size();
			img.put(base, (byte) n).put(base + 1, (byte) disp[i]);
			for (int k = 0; k < 6; k++)
				img.put(base + 2 + k, filter[i][k]);
			int pos = 8 + 2 * n; // dir[k] = (tag << 7 | off) & 0xffff
			for (int k = 0; k < n; k++) {
				Placed p = b.get(k);
				Rec r = p.rec;
				img.putShort(base + 8 + 2 * k, (short) (p.tag << 7 | pos));
				int x = r.expires != 0 ? 4 : 0;
				expiry |= x != 0;
				int at = base + pos;
				if (p.out) {
					img.put(at, (byte) (Format.K_OUT | (x != 0 ? Format.K_EXPIRES : 0)));
					long unit = p.entry >>> 3;
					img.putInt(at + 1, (int) unit).put(at + 5, (byte) (unit >>> 32));
					if (x != 0)
						img.putInt(at + 6, (int) r.expires);
				} else {
					img.put(at, (byte) (r.type | (x != 0 ? Format.K_EXPIRES : 0)));
					img.put(at + 1, (byte) r.key.length).put(at + 2, (byte) r.value.length);
					if (x != 0)
						img.putInt(at + 3, (int) r.expires);
					img.put(at + 3 + x, r.key);
					int q = pos + 3 + x + r.key.length;
					int v = (Format.align(r.type) == 8) ? (q + 7) & ~7 : q;
					img.put(base + v, r.value);
				}
				pos += size(p, pos);
			}
		}
		img.put((int) entOff, ent.array(), 0, (int) entSize);
		// the header (FORMAT.md §3, §3)
		img.put(0, "SHMKVIMG".getBytes(StandardCharsets.US_ASCII));
		img.putInt(8, 2).putInt(12, 4096).putLong(16, Format.LAYOUT_HASH);
		img.putLong(24, expiry ? Format.FLAG_EXPIRY : 0).putLong(32, fileSize).putLong(40, recs.size());
		img.putLong(48, bc).putInt(56, 128).putInt(60, 64).putLong(64, 0).putInt(72, maxProbe).putInt(76, 3);
		img.putLong(88, 1700000000L);
		img.put(128, "v2test".getBytes(StandardCharsets.US_ASCII));
		long[][] sec = {{idxOff, idxSize}, {entOff, entSize}, {valOff, 0}};
		MemorySegment s = MemorySegment.ofArray(img.array());
		for (int i = 0; i < 3; i++) {
			int d = 192 + 32 * i;
			img.putInt(d, i + 1).putInt(d + 4, 0).putLong(d + 8, sec[i][0]).putLong(d + 16, sec[i][1]);
			img.putLong(d + 24, Xxh3.checksum(s, sec[i][0], sec[i][1]));
		}
		img.putLong(504, Xxh3.checksum(s, 0, 504));
		return img.array();
	}

	/** Recomputes every checksum after a test damaged the image on purpose. */
	static byte[] resum(byte[] b) {
		FuzzTest.resum(b);
		return b;
	}
}
