package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The batch (getAll, a pipeline over blocks of keys: Batch) against the
 * single get, key by key: hits and misses of packed keys (at most 16
 * bytes), long and non-ASCII ones, the empty key, inline and OUT records,
 * expired records at three clock readings, a base alone, a delta alone and
 * a base through it (upserts, tombstones), in batches of every size from 1
 * past the pipeline's blocks and ring to every key at once, by bytes and
 * by Strings; a key too long for the format, and damaged buckets, fail
 * their keys alone, each as its single get, the first in request order
 * thrown.
 */
class BatchTest {
	static final long E = DeltaTest.E;
	static final int[] SIZES = {1, 2, 3, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 47, 63, 64, 65, 100, 257, 1000};

	/** The keys asked: every key of base and delta, misses among them, some twice, in a random order. */
	static List<byte[]> keys(long seed) {
		List<byte[]> keys = new ArrayList<>();
		for (Encoder enc : List.of(DeltaTest.baseRecords(), DeltaTest.deltaRecords(), extra()))
			for (Encoder.Rec r : enc.recs)
				keys.add(r.key());
		for (int i = 2000; i < 2600; i++) // misses: key_N past the base's
			keys.add(Encoder.str("key_" + i));
		keys.add(Encoder.str("ключ_absent"));
		keys.add(Encoder.str("user:profile:absent_key_1"));
		Random r = new Random(seed);
		for (int i = 0; i < 300; i++) // repeats
			keys.add(keys.get(r.nextInt(keys.size())));
		Collections.shuffle(keys, r);
		return keys;
	}

	/** Keys of other shapes in the base: long (more than 16 bytes), not ASCII, expiring inline and OUT. */
	static Encoder extra() {
		Encoder enc = new Encoder();
		enc.seed = DeltaTest.SEED;
		for (int i = 0; i < 200; i++) {
			enc.add("user:profile:key_" + i, Format.STRING, Encoder.str("long_" + i));
			enc.add("ключ_" + i, Format.STRING, Encoder.str("знач_" + i));
		}
		for (int i = 0; i < 50; i++) {
			enc.add(Encoder.str("exp_" + i), Format.STRING, Encoder.str("e" + i), E + i % 3 - 1, i % 5 == 0);
			enc.add(Encoder.str("out_" + i), Format.BYTES, new byte[40 + i], 0, true);
		}
		return enc;
	}

	static byte[] base() {
		Encoder enc = DeltaTest.baseRecords();
		enc.recs.addAll(extra().recs);
		return enc.build(enc.buckets());
	}

	/** Every batch size over keys: each answer is the single get's, by bytes and (UTF-8 keys) by Strings. */
	static void asSingleGets(ShmkvReader db, List<byte[]> keys, String what) {
		try {
			for (long min : new long[] {0, Batch.EARLY_MIN}) {
				Batch.earlyMin = min;
				compare(db, keys, what + (min == 0 ? ", early loads" : ", no early loads (a small image)"));
			}
		} finally {
			Batch.earlyMin = 0;
		}
	}

	private static void compare(ShmkvReader db, List<byte[]> keys, String what) {
		Value[] want = new Value[keys.size()];
		for (int i = 0; i < want.length; i++)
			want[i] = db.get(keys.get(i));
		for (int size : SIZES)
			for (int at = 0; at < keys.size(); at += size) {
				List<byte[]> part = keys.subList(at, Math.min(at + size, keys.size()));
				Value[] got = db.getAll(part.toArray(new byte[0][]));
				assertEquals(part.size(), got.length);
				for (int i = 0; i < got.length; i++)
					same(want[at + i], got[i], what + ", size " + size + ", key " + (at + i));
				List<String> strs = new ArrayList<>();
				for (byte[] k : part)
					strs.add(new String(k, StandardCharsets.UTF_8));
				List<Value> byString = db.getAll(strs);
				for (int i = 0; i < got.length; i++)
					if (Arrays.equals(strs.get(i).getBytes(StandardCharsets.UTF_8), part.get(i)))
						same(want[at + i], byString.get(i), what + ", Strings, size " + size + ", key " + (at + i));
			}
		Value[] all = db.getAll(keys.toArray(new byte[0][]));
		for (int i = 0; i < all.length; i++)
			same(want[i], all[i], what + ", every key, key " + i);
		assertEquals(0, db.getAll(new byte[0][]).length);
		assertEquals(List.of(), db.getAll(List.of()));
	}

	static void same(Value want, Value got, String what) {
		if (want == null) {
			assertNull(got, what);
			return;
		}
		assertNotNull(got, what);
		assertEquals(want.type(), got.type(), what);
		assertArrayEquals(want.toBytes(), got.toBytes(), what);
		assertArrayEquals(want.key(), got.key(), what);
		assertEquals(want.expires(), got.expires(), what);
	}

	/** The test images are small: every case takes the early loads, as a large image does, unless it says. */
	@BeforeEach
	void earlyLoads() {
		Batch.earlyMin = 0;
	}

	@AfterEach
	void asShipped() {
		Batch.earlyMin = Batch.EARLY_MIN;
	}

	@Test
	void aBatchAnswersAsSingleGets() {
		byte[] base = base(), delta = DeltaTest.delta(base);
		List<byte[]> keys = keys(1);
		for (long now : new long[] {E - 1, E, E + 1})
			for (int level = 0; level < 3; level++)
				try (Shmkv db = level == 0 ? Shmkv.of(base, Shmkv.Check.DEEP)
						: level == 1 ? Shmkv.of(delta, Shmkv.Check.DEEP) : Shmkv.of(base, delta, Shmkv.Check.DEEP)) {
					db.setClock(now);
					String what = new String[] {"base", "delta alone", "through the delta"}[level] + " at " + now;
					int hits = 0;
					for (byte[] k : keys)
						hits += db.get(k) != null ? 1 : 0;
					assertTrue(hits > (level == 1 ? 20 : 2000) && hits < keys.size() - 600, what + ": hits and misses, " + hits);
					asSingleGets(db, keys, what);
					try (Snapshot s = db.snapshot()) {
						asSingleGets(s, keys.subList(0, 200), what + ", a snapshot");
					}
				}
	}

	/** A key over the format's limit fails alone, wherever it is in the batch; the rest are answered. */
	@Test
	void aKeyTooLongFailsAlone() {
		byte[] tooLong = new byte[Format.MAX_KEY_LEN + 1];
		Arrays.fill(tooLong, (byte) 'k');
		List<byte[]> keys = keys(2).subList(0, 40);
		try (Shmkv db = Shmkv.of(base(), Shmkv.Check.HEADER)) {
			for (int j : new int[] {0, 1, 8, 17, 39}) {
				List<byte[]> ask = new ArrayList<>(keys);
				ask.set(j, tooLong);
				ask.add(tooLong);
				ShmkvException x = assertThrows(ShmkvException.KeyLength.class, () -> db.getAll(ask.toArray(new byte[0][])));
				assertTrue(x.getMessage().contains("index " + j + " of the batch"), x.getMessage());
				assertEquals(List.of(j, ask.size() - 1), List.copyOf(x.errors().keySet()));
				for (int i = 0; i < ask.size(); i++)
					if (i != j && i != ask.size() - 1)
						same(db.get(ask.get(i)), x.results()[i], "key " + i + " beside the long one at " + j);
				List<String> strs = new ArrayList<>();
				for (byte[] k : ask)
					strs.add(new String(k, StandardCharsets.UTF_8));
				ShmkvException y = assertThrows(ShmkvException.KeyLength.class, () -> db.getAll(strs));
				assertEquals(x.errors().keySet(), y.errors().keySet());
			}
		}
	}

	/**
	 * Buckets damaged (a record count over 16): a key whose lookup reads one
	 * fails as its single get does, Corrupt, every other key is answered,
	 * the first failing key's error thrown with its index.
	 */
	@Test
	void damagedBucketsFailTheirKeysAlone() {
		byte[] img = base();
		Image im = new Image(MemorySegment.ofArray(img), img.length, 0, "t");
		Random r = new Random(3);
		for (int i = 0; i < 12; i++)
			img[(int) (im.idxOff + Format.BUCKET * r.nextLong(im.bucketCount))] = (byte) 0xff;
		List<byte[]> keys = keys(3);
		try (Shmkv db = Shmkv.of(img, Shmkv.Check.HEADER)) {
			db.setClock(E);
			Value[] want = new Value[keys.size()];
			List<Integer> failing = new ArrayList<>();
			for (int i = 0; i < want.length; i++) {
				try {
					want[i] = db.get(keys.get(i));
				} catch (ShmkvException.Corrupt x) {
					failing.add(i);
				}
			}
			assertTrue(failing.size() > 5 && failing.size() < keys.size() / 4, failing.size() + " keys fail");
			for (int size : new int[] {1, 9, 64, keys.size()})
				for (int at = 0; at < keys.size(); at += size) {
					int end = Math.min(at + size, keys.size());
					List<Integer> fails = new ArrayList<>();
					for (int f : failing)
						if (f >= at && f < end)
							fails.add(f - at);
					byte[][] part = keys.subList(at, end).toArray(new byte[0][]);
					if (fails.isEmpty()) {
						Value[] got = db.getAll(part);
						for (int i = 0; i < got.length; i++)
							same(want[at + i], got[i], "size " + size + ", key " + (at + i));
						continue;
					}
					ShmkvException x = assertThrows(ShmkvException.Corrupt.class, () -> db.getAll(part));
					assertTrue(x.getMessage().contains("index " + fails.get(0) + " of the batch"), x.getMessage());
					Map<Integer, ShmkvException> errors = x.errors();
					assertEquals(fails, List.copyOf(errors.keySet()), "size " + size + " at " + at);
					for (int i = 0; i < part.length; i++)
						if (!errors.containsKey(i))
							same(want[at + i], x.results()[i], "size " + size + ", key " + (at + i) + " beside damage");
						else
							assertNull(x.results()[i]);
				}
		}
	}
}
