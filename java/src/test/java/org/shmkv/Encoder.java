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
 * seed 0 and hash_bits 64 unless set.
 *
 * <p>Delta images (FORMAT.md §19): {@link #tomb} adds a tombstone (inline,
 * kind 0x10, or OUT, kind 0x90 with an entry of type 0), {@link #delta}
 * writes the records as a delta of a base: the delta layout hash and flag,
 * four sections, the fourth the key filter of §19.3 (max(1, ceil(records /
 * 4)) words unless {@link #filterWords} says, every key's bits set but
 * {@link #filterOmit}'s), the base's checksum and size, prev and seq in
 * reserved[0..3].
 */
final class Encoder {
	record Rec(byte[] key, int type, byte[] value, long expires, boolean forceOut, boolean tomb) {}

	final List<Rec> recs = new ArrayList<>();
	int inlineBound = 64;
	/** The header's hash_seed and hash_bits (§5): a delta's must be its base's. */
	long seed = 0;
	int hashBits = 64;
	/** A delta's filter words; 0: §19.3's builder convention. */
	int filterWords = 0;
	/** A key of a delta whose filter bits are left unset (a verify test); null: none. */
	byte[] filterOmit;
	/** Bytes written after the entries, inside ENTRIES (a verify test: an entry no record names); 8-aligned. */
	byte[] entriesTail = new byte[0];

	Encoder add(String key, int type, byte[] value) {
		return add(key.getBytes(StandardCharsets.UTF_8), type, value, 0, false);
	}

	Encoder add(byte[] key, int type, byte[] value, long expires, boolean forceOut) {
		recs.add(new Rec(key, type, value, expires, forceOut, false));
		return this;
	}

	/** A tombstone of key (a delta's, §19.2): OUT when out or its key is over 255 bytes, else inline. */
	Encoder tomb(byte[] key, boolean out) {
		recs.add(new Rec(key, Format.TOMB_ENTRY_TYPE, new byte[0], 0, out, true));
		return this;
	}

	Encoder tomb(String key) {
		return tomb(str(key), false);
	}

	/** The key hash of §5 with this encoder's seed and bits. */
	long hash(byte[] key) {
		long h = new Xxh3.Seeded(seed).hasher.hashBytesToLong(key);
		return hashBits == 64 ? h : (h & ((1L << hashBits) - 1)) * 0x9E3779B97F4A7C15L;
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

		Placed(Rec r, long h, long buckets, int inlineBound) {
			rec = r;
			this.h = h;
			tag = Index.tag(h);
			home = Index.home(h, buckets);
			int worst = 3 + (r.expires != 0 ? 4 : 0) + r.key.length + (align8(r) ? 7 : 0) + stored(r);
			out = r.forceOut || r.key.length > 255 || r.value.length > 255 || worst > inlineBound;
		}
	}

	/** Whether r's value is 8-aligned (a tombstone has none). */
	static boolean align8(Rec r) {
		return !r.tomb && Format.align(r.type) == 8;
	}

	static int stored(Rec r) {
		return r.tomb ? 0 : r.value.length + Format.nul(r.type);
	}

	/** The size of p's record at bucket offset pos. */
	static int size(Placed p, int pos) {
		int x = p.rec.expires != 0 ? 4 : 0;
		if (p.out)
			return 6 + x;
		int q = pos + 3 + x + p.rec.key.length;
		int v = align8(p.rec) ? (q + 7) & ~7 : q;
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
		return build(bucketCount, null);
	}

	/** A delta image of base (its header checksum and size, §19.1), the first of its chain: prev 0, seq 1. */
	byte[] delta(long bucketCount, byte[] base) {
		ByteBuffer b = ByteBuffer.wrap(base).order(ByteOrder.LITTLE_ENDIAN);
		return delta(bucketCount, b.getLong(504), b.getLong(32), 0, 1);
	}

	/** A delta image with these reserved words (§19.1): base checksum and size, prev, seq. */
	byte[] delta(long bucketCount, long baseChecksum, long baseSize, long prev, long seq) {
		return build(bucketCount, new long[] {baseChecksum, baseSize, prev, seq});
	}

	/** The records' total room (§14: size with the worst padding, and 2 directory bytes). */
	long room() {
		long n = 0;
		for (Rec r : recs) {
			Placed p = new Placed(r, 0, 1, inlineBound);
			n += (p.out ? 6 + (r.expires != 0 ? 4 : 0) : 3 + (r.expires != 0 ? 4 : 0) + r.key.length
					+ (align8(r) ? 7 : 0) + stored(r)) + 2;
		}
		return n;
	}

	/** §14's bucket count for these records at the default fill. */
	long buckets() {
		return Math.max(1, (long) Math.ceil(room() / (120.0 * 0.72)));
	}

	/** The image; delta: its reserved words (a delta image), or null (a plain one, without tombstones). */
	private byte[] build(long bucketCount, long[] delta) {
		int bc = (int) bucketCount;
		List<Placed> all = new ArrayList<>();
		for (Rec r : recs) {
			if (r.tomb && delta == null)
				throw new IllegalArgumentException("a tombstone in a plain image");
			all.add(new Placed(r, hash(r.key), bc, inlineBound));
		}
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
					if (align8(r))
						ent.position((ent.position() + 7) & ~7);
					ent.put(r.value);
					if (Format.nul(r.type) == 1)
						ent.put((byte) 0);
					ent.position((ent.position() + 7) & ~7);
				}
		ent.put(entriesTail);
		long entSize = ent.position();
		long valOff = (entOff + entSize + 63) & ~63L;
		// a delta's FILTER (§19.3) follows VALUES (empty here)
		long words = delta == null ? 0 : filterWords > 0 ? filterWords : Math.max(1, (recs.size() + 3) / 4);
		long filOff = valOff, end = filOff + 8 * words;
		long fileSize = (end + 4095) & ~4095L;
		if (fileSize == end)
			fileSize += 4096; // keep the last section's offset inside the image
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
					img.put(at, (byte) (Format.K_OUT | (r.tomb ? Format.K_TOMB : 0) | (x != 0 ? Format.K_EXPIRES : 0)));
					long unit = p.entry >>> 3;
					img.putInt(at + 1, (int) unit).put(at + 5, (byte) (unit >>> 32));
					if (x != 0)
						img.putInt(at + 6, (int) r.expires);
				} else {
					img.put(at, (byte) ((r.tomb ? Format.INLINE_TOMB : r.type) | (x != 0 ? Format.K_EXPIRES : 0)));
					img.put(at + 1, (byte) r.key.length).put(at + 2, (byte) r.value.length);
					if (x != 0)
						img.putInt(at + 3, (int) r.expires);
					img.put(at + 3 + x, r.key);
					int q = pos + 3 + x + r.key.length;
					int v = align8(r) ? (q + 7) & ~7 : q;
					img.put(base + v, r.value);
				}
				pos += size(p, pos);
			}
		}
		img.put((int) entOff, ent.array(), 0, (int) entSize);
		for (Placed p : all) // the filter: every key's three bits in its word (§19.3)
			if (words > 0 && (filterOmit == null || !Arrays.equals(filterOmit, p.rec.key))) {
				int at = (int) (filOff + 8 * Math.unsignedMultiplyHigh(p.h, words));
				img.putLong(at, img.getLong(at) | 1L << (p.h >>> 16 & 63) | 1L << (p.h >>> 22 & 63)
						| 1L << (p.h >>> 28 & 63));
			}
		// the header (FORMAT.md §3, §19.1)
		img.put(0, "SHMKVIMG".getBytes(StandardCharsets.US_ASCII));
		img.putInt(8, 2).putInt(12, 4096).putLong(16, delta == null ? Format.LAYOUT_HASH : Format.DELTA_LAYOUT_HASH);
		img.putLong(24, (expiry ? Format.FLAG_EXPIRY : 0) | (delta == null ? 0 : Format.FLAG_DELTA));
		img.putLong(32, fileSize).putLong(40, recs.size());
		int nsec = delta == null ? 3 : 4;
		img.putLong(48, bc).putInt(56, 128).putInt(60, hashBits).putLong(64, seed).putInt(72, maxProbe).putInt(76, nsec);
		img.putLong(88, 1700000000L);
		img.put(128, "v2test".getBytes(StandardCharsets.US_ASCII));
		if (delta != null)
			for (int i = 0; i < 4; i++)
				img.putLong(448 + 8 * i, delta[i]);
		long[][] sec = {{idxOff, idxSize}, {entOff, entSize}, {valOff, 0}, {filOff, 8 * words}};
		MemorySegment s = MemorySegment.ofArray(img.array());
		for (int i = 0; i < nsec; i++) {
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

	/** An image's header checksum (its identity as a base, §19.1). */
	static long checksum(byte[] img) {
		return ByteBuffer.wrap(img).order(ByteOrder.LITTLE_ENDIAN).getLong(504);
	}
}
