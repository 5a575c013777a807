package org.shmkv;

import static org.shmkv.Format.*;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A batch's lookups ({@link ShmkvReader#getAll(byte[][])}) as a pipeline
 * over blocks of {@link #BLOCK} keys, so that the memory reads of
 * different keys are in flight together, where one get after another
 * waits for each in turn (the C reader's batch and the Go reader's
 * GetBatch do the same with prefetch instructions). Pass p: stage A hashes
 * the keys of block p and loads both lines of each one's home bucket;
 * stage B, for block p-1, whose home buckets have arrived by then, loads
 * the next bucket's lines where the home's D and filter announce displaced
 * keys of the key's tag (FORMAT.md §6.1); stage C looks block p-2 up, its
 * lines in cache. Java has no prefetch: the early reads are plain loads
 * whose words only a comparison that is never true reads, so nothing else
 * depends on them and the loads of a block, being independent, are in
 * flight together; each must still complete before it retires, so a block
 * waits about one round trip where a prefetch would not.
 *
 * <p>Each key is answered by the single get's own steps on the hash stage
 * A computed ({@link Index#find}, {@link ShmkvReader#live}, through deltas
 * {@link ShmkvReader#through}), with every check of §12.1: the early loads
 * are of buckets inside the image (a bucket that would not be is left to
 * the lookup, which says why), they decide nothing. A key too long for the
 * format goes the single get's way, which refuses it. Errors are collected
 * in request order.
 */
final class Batch {
	/** Keys a stage takes at a time, and the ring of their state (a power of two, three blocks or more). */
	private static final int BLOCK = 8, RING = 32, MASK = RING - 1;
	/**
	 * Images up to this size make no early loads: their lines are in the
	 * core's caches, where the loads cost more (7–13 ns a key, java/README.md)
	 * than they hide.
	 */
	static final long EARLY_MIN = 1 << 20;
	/** {@link #EARLY_MIN}, but tests take the early loads on small images too (0). */
	static long earlyMin = EARLY_MIN;

	private final ShmkvReader reader;
	private final Generation g;
	/** The keys: bytes, or Strings (packed from their characters, else their UTF-8 bytes). */
	private final byte[][] bytes;
	private final String[] strings;

	// per slot of the ring (key i at i & MASK): the key as the lookups take
	// it (Keys), its hash, its home bucket's image offset, and whether it
	// goes the single get's way (cold: too long, or its bucket not inside
	// the image)
	private final long[] lo = new long[RING], tl = new long[RING], hash = new long[RING], bucket = new long[RING];
	private final int[] len = new int[RING];
	private final byte[][] key = new byte[RING][];
	private final boolean[] cold = new boolean[RING];
	/**
	 * Through deltas, per slot: the delta whose filter lets the key through
	 * first (the top's, else the lower's: FORMAT.md §19.6), whose home
	 * bucket stage A loads instead of the base's; null for other keys (most).
	 */
	private final Image[] over = new Image[RING];
	private final long[] overBucket = new long[RING];
	/** Through deltas, per slot: a delta's filter lets the key through (the lookup goes through them; else to the base alone). */
	private final boolean[] maybe = new boolean[RING];

	private Batch(ShmkvReader reader, Generation g, byte[][] bytes, String[] strings) {
		this.reader = reader;
		this.g = g;
		this.bytes = bytes;
		this.strings = strings;
	}

	/**
	 * The values of keys (bytes, or strings: one of them null) in generation
	 * g, as ShmkvReader.getAll answers them; the first failing key's
	 * exception thrown, carrying every key's answer.
	 */
	static Value[] getAll(ShmkvReader reader, Generation g, byte[][] bytes, String[] strings) {
		return new Batch(reader, g, bytes, strings).run(bytes != null ? bytes.length : strings.length);
	}

	private Value[] run(int n) {
		Value[] out = new Value[n];
		Map<Integer, ShmkvException> errors = null;
		long[] now = {0};
		Image im = g.image;
		MemorySegment s = im.seg;
		// the last offset at which a whole bucket lies inside the image
		long last = s.byteSize() - BUCKET, end = im.idxOff + BUCKET * im.bucketCount;
		long sink = 0;
		final boolean early = s.byteSize() > earlyMin;
		for (int at = 0; at < n + 2 * BLOCK; at += BLOCK) {
			if (at < n) { // stage A: block p hashed, its home buckets loaded
				int hi = Math.min(at + BLOCK, n);
				for (int i = at; i < hi; i++)
					hash(im, i, i & MASK, last);
				if (g.delta != null)
					for (int i = at; i < hi; i++)
						overOf(g, i & MASK);
				for (int i = at; early && i < hi; i++) { // the loads alone: one block's in flight together
					int r = i & MASK;
					Image o = over[r];
					if (o != null) // a key a delta may hold: that delta's bucket, not the base's
						sink ^= Bytes.u64(o.seg, overBucket[r]) ^ Bytes.u64(o.seg, overBucket[r] + BUCKET / 2);
					else if (!cold[r])
						sink ^= Bytes.u64(s, bucket[r]) ^ Bytes.u64(s, bucket[r] + BUCKET / 2);
				}
			}
			if (early && at >= BLOCK && at - BLOCK < n) { // stage B: block p-1's next buckets where announced
				for (int i = at - BLOCK, hi = Math.min(at, n); i < hi; i++) {
					int r = i & MASK;
					if (cold[r] || over[r] != null
							|| Index.displaced(Bytes.u64(s, bucket[r]), Index.tag(hash[r]), im.maxProbe) == 0)
						continue;
					long nb = bucket[r] + BUCKET == end ? im.idxOff : bucket[r] + BUCKET;
					if (nb <= last)
						sink ^= Bytes.u64(s, nb) ^ Bytes.u64(s, nb + BUCKET / 2);
				}
			}
			if (at < 2 * BLOCK)
				continue;
			for (int i = at - 2 * BLOCK, hi = Math.min(at - BLOCK, n); i < hi; i++) { // stage C: block p-2 looked up
				int r = i & MASK;
				try {
					long loc = cold[r] ? reader.lookup(g, key[r], lo[r], tl[r], len[r], now)
							: g.delta == null || !maybe[r] // no delta's filter lets it through: the base's (stage A asked them)
									? reader.live(im, Index.find(im, key[r], lo[r], tl[r], len[r], hash[r]), now)
									: reader.through(g, key[r], lo[r], tl[r], len[r], hash[r], now);
					if (loc != -1) {
						Image m = ShmkvReader.imageOf(g, loc);
						loc = ShmkvReader.locator(loc);
						out[i] = ShmkvReader.value(g, m, loc, m.type(loc));
					}
				} catch (IndexOutOfBoundsException x) {
					(errors = errors == null ? new LinkedHashMap<>() : errors).put(i, ShmkvReader.outside(g, x));
				} catch (ShmkvException.Released x) {
					throw x;
				} catch (ShmkvException x) {
					(errors = errors == null ? new LinkedHashMap<>() : errors).put(i, x);
				}
			}
		}
		Index.sink(sink);
		if (errors == null)
			return out;
		Map.Entry<Integer, ShmkvException> first = errors.entrySet().iterator().next();
		int i = first.getKey();
		byte[] k = bytes != null ? bytes[i] : strings[i].getBytes(StandardCharsets.UTF_8);
		throw first.getValue().thrownByBatch(Keys.show(k, k.length), i, out, errors);
	}

	/**
	 * Through deltas, stage A's filter test of the key in slot r: the first
	 * delta that may hold it and its home bucket (the deltas share the
	 * base's hash, §19.4), so that the lookup of a key a delta answers (few
	 * keys) finds its delta's lines in cache, as the C and Go readers'
	 * batches do; a key no filter lets through, or a cold one, none. A key
	 * a filter lets through is looked up through the deltas
	 * (ShmkvReader.through), where a false "maybe" reads the base's bucket,
	 * not loaded early; any other goes straight to the base.
	 */
	private void overOf(Generation g, int r) {
		Image o = null;
		if (!cold[r]) {
			long h = hash[r];
			if (g.top != null && g.top.mayHold(h))
				o = g.top;
			else if (g.delta.mayHold(h))
				o = g.delta;
		}
		maybe[r] = o != null;
		if (o != null) {
			long bk = o.idxOff + BUCKET * Index.home(hash[r], o.bucketCount);
			if (bk < 0 || bk > o.seg.byteSize() - BUCKET)
				o = null; // outside the delta: no early load, the lookup says why
			else
				overBucket[r] = bk;
		}
		over[r] = o;
	}

	/** Stage A of key i into slot r: packed or encoded, hashed, its home bucket (cold: the single get's way). */
	private void hash(Image im, int i, int r, long last) {
		byte[] k;
		long l, t;
		int n;
		if (bytes != null) {
			k = bytes[i];
			n = k.length;
			l = Keys.lo(k, n);
			t = Keys.tl(k, n, l);
		} else {
			String str = strings[i];
			n = str.length();
			l = Keys.lo(str, n);
			t = Keys.tl(str, n, l);
			k = null;
			if ((l | t) < 0) { // not ASCII, or longer than 16: its UTF-8 bytes, as a single get encodes it
				k = str.getBytes(StandardCharsets.UTF_8);
				n = k.length;
				l = Keys.lo(k, n);
				t = Keys.tl(k, n, l);
			}
		}
		lo[r] = l;
		tl[r] = t;
		len[r] = n;
		key[r] = n > Keys.PACKED ? k : null;
		if (n > MAX_KEY_LEN) {
			cold[r] = true;
			return;
		}
		long h = im.hash(key[r], l, t, n), bk = im.idxOff + BUCKET * Index.home(h, im.bucketCount);
		hash[r] = h;
		bucket[r] = bk;
		cold[r] = bk > last || bk < 0;
	}
}
