package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A fuzz target over image bytes, bounded for CI (the equivalent of a Jazzer
 * target with a fixed seed; -Dshmkv.fuzz.iterations=N and
 * -Dshmkv.fuzz.seed=S run longer or elsewhere): the vectors' intact images,
 * damaged at random (bytes, words, runs, truncation), half of them with
 * every checksum recomputed so that the structural checks, not the
 * checksums, must catch the damage. Each is opened at every check level,
 * iterated, looked up (every original key, typed getters, lists, batch) and
 * verified: the only exceptions allowed are ShmkvException's; never an
 * IndexOutOfBoundsException, an IllegalStateException, an
 * ArithmeticException or anything else unchecked. The delta seed (FORMAT.md
 * §19) is also read, damaged, through its intact base, and as the top over
 * the intact delta (§19.6), and the base, damaged, through the intact
 * delta.
 */
class FuzzTest {
	/** The seed that is a delta image: DeltaTest's, of {@link #deltaBase()}. */
	static final String DELTA = "encoder:delta";
	static final String[] SEEDS = {"base", "types", "shared", "displaced", "expiry", "long_keys", "empty",
			"encoder:mixed", "encoder:small", DELTA};

	/** The base of the delta seed. */
	static byte[] deltaBase() {
		return DeltaTest.base();
	}

	/** A seed image: a vector's (the C builder's), or (encoder:) one of the test-only writer's. */
	static byte[] seed(String n) throws java.io.IOException {
		return switch (n) {
			case DELTA -> DeltaTest.deltaImage();
			case "encoder:mixed" -> ImageTest.mixedImage();
			case "encoder:small" -> {
				Encoder enc = new Encoder();
				for (int i = 0; i < 40; i++)
					enc.add(Encoder.str("k" + i), i % 3 == 0 ? Format.I64 : Format.STRING,
							i % 3 == 0 ? Encoder.i64(i) : Encoder.str("v".repeat(i * 3)), i % 5 == 0 ? 1000 + i : 0, i % 7 == 0);
				enc.add("strs", Format.STRLIST, Encoder.strlist("a", "b"));
				yield enc.build(12);
			}
			default -> Files.readAllBytes(VectorsTest.DIR.resolve(n + ".img"));
		};
	}

	@Test
	void damagedImagesNeverEscapeUnchecked() throws Exception {
		int iterations = Integer.getInteger("shmkv.fuzz.iterations", 20000);
		long seed = Long.getLong("shmkv.fuzz.seed", 0x5348_4d4bL);
		List<byte[]> images = new ArrayList<>();
		List<List<byte[]>> keys = new ArrayList<>();
		for (String n : SEEDS) {
			byte[] b = seed(n);
			images.add(b);
			keys.add(keys(b));
		}
		byte[] base = deltaBase();
		List<byte[]> throughKeys = throughKeys(base, keys.get(SEEDS.length - 1));
		SplittableRandom r = new SplittableRandom(seed);
		int[] outcomes = new int[2];
		for (int it = 0; it < iterations; it++) {
			int which = r.nextInt(images.size());
			byte[] b = mutate(images.get(which), r);
			try {
				boolean opened;
				if (!SEEDS[which].equals(DELTA))
					opened = exercise(b, keys.get(which), r);
				else
					opened = switch (r.nextInt(4)) {
						case 0 -> exercise(b, keys.get(which), r); // the delta alone
						case 1 -> exerciseThrough(base, b, null, throughKeys, r); // the damaged delta through its base
						case 2 -> exerciseThrough(base, images.get(which), b, throughKeys, r); // as the top over it
						default -> exerciseThrough(mutate(base, r), images.get(which), null, throughKeys, r);
					};
				outcomes[opened ? 0 : 1]++;
			} catch (Throwable t) {
				throw new AssertionError("iteration " + it + " (seed " + seed + ", image " + SEEDS[which] + "): "
						+ t, t);
			}
		}
		System.out.printf("FuzzTest: %d images, %d opened, %d refused%n", iterations, outcomes[0], outcomes[1]);
		assertTrue(outcomes[0] > iterations / 20, "too few damaged images open: the mutations miss the structure");
		assertTrue(outcomes[1] > iterations / 20, "too few refused");
	}

	static byte[] mutate(byte[] orig, SplittableRandom r) {
		byte[] b = orig.clone();
		int n = 1 + r.nextInt(4);
		for (int i = 0; i < n; i++) {
			// aim at the header and the first sections most of the time
			int span = r.nextInt(4) == 0 ? b.length : Math.min(b.length, 4096 + 2048);
			if (b.length < 16)
				break;
			int at = Math.min(b.length - 1, r.nextInt(4) == 0 ? r.nextInt(512) : r.nextInt(span));
			switch (r.nextInt(6)) {
				case 0 -> b[at] ^= (byte) (1 << r.nextInt(8));
				case 1 -> b[at] = (byte) r.nextInt(256);
				case 2 -> { // an 8-byte word: small, huge or random
					long v = switch (r.nextInt(3)) {
						case 0 -> r.nextInt(16);
						case 1 -> -1L >>> r.nextInt(64);
						default -> r.nextLong();
					};
					int w = Math.min(at & ~7, b.length - 8);
					ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putLong(w, v);
				}
				case 3 -> { // a run of zeros or 0xff
					int len = Math.min(1 + r.nextInt(64), b.length - at);
					java.util.Arrays.fill(b, at, at + len, r.nextBoolean() ? 0 : (byte) 0xff);
				}
				case 4 -> b[at] = (byte) (b[at] + (r.nextBoolean() ? 1 : -1));
				default -> { // truncate (rarely)
					if (r.nextInt(8) == 0)
						b = java.util.Arrays.copyOf(b, r.nextInt(b.length + 1));
				}
			}
		}
		if (r.nextBoolean() && b.length >= 4096)
			resum(b);
		return b;
	}

	/**
	 * Recomputes section checksums (of the descriptors with a kind, a
	 * delta's filter included, where their bounds make sense) and the header
	 * checksum.
	 */
	static void resum(byte[] b) {
		ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
		MemorySegment s = MemorySegment.ofArray(b);
		for (int i = 0; i < 4; i++) {
			if (bb.getInt(192 + 32 * i) == 0)
				continue;
			long off = bb.getLong(192 + 32 * i + 8), size = bb.getLong(192 + 32 * i + 16);
			if (off >= 0 && size >= 0 && off <= b.length && size <= b.length - off)
				bb.putLong(192 + 32 * i + 24, Xxh3.checksum(s, off, size));
		}
		bb.putLong(504, Xxh3.checksum(s, 0, 504));
	}

	/** The keys a base read through a delta is asked for: every 8th of the base's (a sample), every delta key. */
	static List<byte[]> throughKeys(byte[] base, List<byte[]> deltaKeys) {
		List<byte[]> k = new ArrayList<>(), all = keys(base);
		for (int i = 0; i < all.size(); i += 8)
			k.add(all.get(i));
		k.addAll(deltaKeys);
		return k;
	}

	/** The keys of an intact image: every record's, a delta's tombstones too. */
	static List<byte[]> keys(byte[] img) {
		List<byte[]> k = new ArrayList<>();
		try (Shmkv db = Shmkv.of(img, Shmkv.Check.DEEP)) {
			for (Value v : db.allRecords())
				k.add(v.key());
		}
		return k;
	}

	/** True when the image opened. Anything but a ShmkvException propagates and fails the test. */
	static boolean exercise(byte[] b, List<byte[]> keys, SplittableRandom r) {
		Shmkv.Check check = Shmkv.Check.values()[r.nextInt(3)];
		Shmkv db;
		try {
			db = Shmkv.of(b, check);
		} catch (ShmkvException e) {
			seen(e);
			return false;
		}
		use(db, keys, r);
		return true;
	}

	/**
	 * exercise of base read through delta (FORMAT.md §19), and through top
	 * over it where not null (§19.6): true when all opened and the deltas
	 * applied.
	 */
	static boolean exerciseThrough(byte[] base, byte[] delta, byte[] top, List<byte[]> keys, SplittableRandom r) {
		Shmkv.Check check = Shmkv.Check.values()[r.nextInt(3)];
		Shmkv db;
		try {
			db = Shmkv.of(base, delta, top, check);
		} catch (ShmkvException e) {
			seen(e);
			return false;
		}
		use(db, keys, r);
		return true;
	}

	/** Every read of an opened image: iterations, gets of keys, typed getters, a batch, verify. */
	static void use(Shmkv db, List<byte[]> keys, SplittableRandom r) {
		try (db) {
			db.setClock(r.nextInt(3) == 0 ? 0 : 1000 + r.nextInt(40));
			for (Iterable<Value> records : List.<Iterable<Value>>of(db, db.allRecords())) {
				try {
					for (Value v : records) {
						v.key();
						v.expires();
						v.isShared();
						touch(v);
					}
				} catch (ShmkvException e) {
					seen(e);
					// a damaged entry ends the iteration
				}
			}
			for (byte[] k : keys) {
				try {
					Value v = db.get(k);
					if (v != null)
						touch(v);
				} catch (ShmkvException e) {
				seen(e);
					// refused
				}
				for (Runnable g : new Runnable[] {() -> db.getLong(k), () -> db.getDouble(k), () -> db.getBoolean(k),
						() -> db.getString(k), () -> db.getBytes(k), () -> db.getInto(k, new byte[16])}) {
					try {
						g.run();
					} catch (ShmkvException e) {
						seen(e);
						// refused, missing or another type
					}
				}
			}
			try {
				db.getAll(keys.toArray(new byte[0][]));
			} catch (ShmkvException e) {
				seen(e);
				// refused
			}
			try {
				db.verify();
			} catch (ShmkvException e) {
				seen(e);
				// refused
			}
			try {
				db.size();
				db.recordCount();
			} catch (ShmkvException e) {
				seen(e);
				// counted by iterating: a damaged record ends it
			}
		}
	}

	/**
	 * A refusal must come from the reader's own checks (FORMAT.md §12.1), not
	 * from the JDK's bounds check that the reader turns into Corrupt as a last
	 * line: that would be a missing check.
	 */
	static void seen(ShmkvException e) {
		if (e.getCause() instanceof IndexOutOfBoundsException)
			throw new AssertionError("a bounds check of the JDK caught what the reader's checks missed: " + e, e);
	}

	static void touch(Value v) {
		try {
			v.toBytes();
			v.count();
			switch (v.type()) {
				case STRING -> v.asString();
				case I64 -> v.asLong();
				case F64 -> v.asDouble();
				case BOOL -> v.asBoolean();
				case F32LIST -> v.asFloatList().toArray();
				case F64LIST -> v.asDoubleList().toArray();
				case I64LIST -> v.asLongList().toArray();
				case STRLIST -> {
					StringList l = v.asStringList();
					for (int i = 0; i < l.size(); i++)
						l.get(i);
				}
				default -> v.asByteBuffer();
			}
		} catch (ShmkvException e) {
			seen(e);
			// a damaged string of a list
		}
	}
}
