package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A base read through two deltas of it, a lower and a top (FORMAT.md §19.6;
 * lib/PROTOCOL.md, "Protocol 2"), against a model on every read path (get
 * by String and by bytes, the typed getters, getInto, getAll, a value's
 * expiry, the iteration and allRecords with their order, size,
 * recordCount, verify): keys in every combination of the three levels, of
 * every record kind (upserts inline and OUT, tombstones inline and OUT,
 * expiring or not, a type changed per level), offline
 * ({@link Shmkv#of(byte[], byte[], byte[], Shmkv.Check)},
 * {@link Shmkv#open(Path, Path, Path, Shmkv.Check)}) and attached to
 * hand-made protocol 2 control segments ({@link ControlSegmentTest}'s):
 * each rule of the protocol broken once, the copy of each overlay picked
 * by the base copy's node, refresh across the levels; and a randomized
 * model of the three levels. The images are the test-only
 * {@link Encoder}'s.
 */
class LevelsTest {
	static final long NOW = 1_800_000_000L;
	static final int LOWER = Ctl.SEG_OVERLAY, TOP = Ctl.SEG_OVERLAY | Ctl.SEG_TOP;

	@TempDir
	Path dir;

	static byte[] str(String s) {
		return Encoder.str(s);
	}

	static String hex(byte[] k) {
		return DeltaTest.HEX.formatHex(k);
	}

	/** The records of a base and of a lower and a top delta of it, with one seed and hash width. */
	static final class Levels {
		final Encoder base = new Encoder(), lower = new Encoder(), top = new Encoder();

		Levels(long seed, int bits) {
			for (Encoder e : List.of(base, lower, top)) {
				e.seed = seed;
				e.hashBits = bits;
			}
		}

		/** The merge of the base, then the lower (if lower), then the top (if top): every record, expired ones too. */
		Map<String, Encoder.Rec> model(boolean lower, boolean top) {
			Map<String, Encoder.Rec> m = new LinkedHashMap<>();
			List<Encoder> levels = new ArrayList<>(List.of(base));
			if (lower)
				levels.add(this.lower);
			if (lower && top)
				levels.add(this.top);
			for (Encoder e : levels)
				for (Encoder.Rec r : e.recs)
					if (r.tomb())
						m.remove(hex(r.key()));
					else
						m.put(hex(r.key()), r);
			return m;
		}

		/** Every key of the levels, and keys none holds. */
		List<byte[]> keys() {
			List<byte[]> k = new ArrayList<>();
			for (Encoder e : List.of(base, lower, top))
				for (Encoder.Rec r : e.recs)
					k.add(r.key());
			for (String a : new String[] {"absent", "", "fill", "top-onl"})
				k.add(str(a));
			return k;
		}

		Images encode() {
			byte[] b = base.build(base.buckets());
			return new Images(b, lower.delta(lower.buckets(), b), top.delta(top.buckets(), b));
		}
	}

	record Images(byte[] base, byte[] lower, byte[] top) {}

	static void s(Encoder e, String key, String v, long expires, boolean out) {
		e.add(str(key), Format.STRING, str(v), expires, out);
	}

	static void i(Encoder e, String key, long v) {
		e.add(str(key), Format.I64, Encoder.i64(v), 0, false);
	}

	/** tests/overlay_test's levels: keys named for the case they are. */
	static Levels hand(int bits) {
		Levels l = new Levels(DeltaTest.SEED, bits);
		Encoder b = l.base, lo = l.lower, tp = l.top;
		long past = NOW - 10, later = NOW + 1000;
		String lk = "L".repeat(200); // too long for a bucket: OUT
		for (int n = 0; n < 60; n++) // filler: many buckets, displaced keys
			s(b, "fill" + n, "base-fill" + n, 0, n % 9 == 0);
		for (int n = 0; n < 12; n++)
			s(lo, "lfill" + n, "lower-fill" + n, 0, false);
		for (int n = 0; n < 5; n++)
			s(tp, "tfill" + n, "top-fill" + n, 0, false);
		s(b, "base-only", "b", 0, false);
		s(b, "lower-up", "b", 0, false);
		s(lo, "lower-up", "l", 0, false);
		s(b, "lower-tomb", "b", 0, false);
		lo.tomb("lower-tomb");
		s(b, "top-up-over-lower-tomb", "b", 0, false);
		lo.tomb("top-up-over-lower-tomb");
		s(tp, "top-up-over-lower-tomb", "t", 0, false);
		s(b, "top-tomb-over-lower-up", "b", 0, false);
		s(lo, "top-tomb-over-lower-up", "l", 0, false);
		tp.tomb("top-tomb-over-lower-up");
		s(b, "top-up-over-both", "b", 0, false);
		s(lo, "top-up-over-both", "l", 0, false);
		s(tp, "top-up-over-both", "t", 0, true);
		s(tp, "top-only", "t", 0, false);
		s(lo, "lower-only", "l", 0, false);
		s(b, "top-tomb-over-base", "b", 0, false);
		tp.tomb("top-tomb-over-base");
		tp.tomb("top-tomb-of-nothing");
		lo.tomb("lower-tomb-of-nothing");
		// OUT records and OUT tombstones at each level
		s(b, lk + "a", "b", 0, true);
		lo.tomb(str(lk + "a"), true);
		s(tp, lk + "a", "t", 0, true);
		s(b, lk + "b", "b", 0, true);
		s(lo, lk + "b", "l", 0, true);
		tp.tomb(str(lk + "b"), true);
		// a type changed per level: the getters see the deciding record's type
		s(b, "typed", "b", 0, false);
		i(lo, "typed", -2);
		s(tp, "typed", "t", 0, false);
		i(b, "typed2", 1);
		i(tp, "typed2", 3);
		// expiry, deciding at each level
		s(b, "exp-base-past", "b", past, false);
		s(b, "exp-base-later", "b", later, false);
		s(b, "exp-lower-past", "b", 0, false);
		s(lo, "exp-lower-past", "l", past, false); // hides the base's live record
		s(b, "exp-lower-later", "b", 0, false);
		s(lo, "exp-lower-later", "l", later, true);
		s(b, "lower-revives-base", "b", past, false);
		s(lo, "lower-revives-base", "l", 0, false);
		s(lo, "exp-top-past", "l", 0, false);
		s(tp, "exp-top-past", "t", past, false); // hides the lower's live upsert
		s(lo, "top-revives-lower", "l", past, false);
		s(tp, "top-revives-lower", "t", later, false);
		s(b, "top-later-over-base", "b", past, false);
		s(tp, "top-later-over-base", "t", later, true);
		return l;
	}

	static boolean live(Encoder.Rec r, long now) {
		return r.expires() == 0 || now < r.expires();
	}

	/** The images read alone (null: a level the reader lacks), for the order of the iterations. */
	record Alone(Shmkv base, Shmkv lower, Shmkv top) implements AutoCloseable {
		static Alone of(Images im, boolean lower, boolean top) {
			return new Alone(Shmkv.of(im.base(), Shmkv.Check.DEEP), lower ? Shmkv.of(im.lower(), Shmkv.Check.DEEP) : null,
					top ? Shmkv.of(im.top(), Shmkv.Check.DEEP) : null);
		}

		@Override
		public void close() {
			for (Shmkv s : new Shmkv[] {base, lower, top})
				if (s != null)
					s.close();
		}
	}

	static String entry(Value v) {
		return hex(v.key()) + "=" + v.type() + ":" + hex(v.toBytes()) + "@" + v.expires();
	}

	/**
	 * What FORMAT.md §19.6's iteration yields, from the images read alone:
	 * the top's upserts, the lower's whose key the top does not hold, the
	 * base's whose key neither holds; live: the expired left out.
	 */
	static List<String> order(Alone a, boolean all, long now) {
		List<String> out = new ArrayList<>();
		HashSet<String> held = new HashSet<>();
		for (Shmkv img : new Shmkv[] {a.top(), a.lower(), a.base()}) {
			if (img == null)
				continue;
			for (Value v : img.allRecords()) {
				if (!held.add(hex(v.key())) || v.isTombstone() || !all && v.expires() != 0 && now >= v.expires())
					continue;
				out.add(entry(v));
			}
		}
		return out;
	}

	/** db at clock now answers every key of l as the model m says, on every read path. */
	static void readsAs(ShmkvReader db, Levels l, Map<String, Encoder.Rec> m, Alone a, long now) {
		db.setClock(now);
		List<byte[]> keys = l.keys();
		Value[] batch = db.getAll(keys.toArray(new byte[0][])), early;
		try { // the batch's early loads too, the deltas' buckets among them, as a large image takes them
			Batch.earlyMin = 0;
			early = db.getAll(keys.toArray(new byte[0][]));
		} finally {
			Batch.earlyMin = Batch.EARLY_MIN;
		}
		for (int n = 0; n < keys.size(); n++) {
			byte[] k = keys.get(n);
			String what = new String(k, StandardCharsets.UTF_8) + " at " + now;
			Encoder.Rec r = m.get(hex(k));
			Encoder.Rec want = r != null && live(r, now) ? r : null;
			DeltaTest.same(want, db.get(k), what);
			DeltaTest.same(want, db.get(new String(k, StandardCharsets.UTF_8)), what + " (a String key)");
			DeltaTest.same(want, batch[n], what + " (batch)");
			DeltaTest.same(want, early[n], what + " (batch, early loads)");
			if (want == null) {
				assertEquals(-1, db.getInto(k, new byte[8]), what);
				assertThrows(ShmkvException.NotFound.class, () -> db.getLong(k), what);
				assertEquals(-7, db.getLong(new String(k, StandardCharsets.UTF_8), -7), what);
				assertNull(db.getString(k), what);
				assertNull(db.getBytes(k), what);
				assertThrows(ShmkvException.NotFound.class, () -> db.getDouble(k), what);
			} else if (want.type() == Format.I64) {
				assertEquals(ByteBuffer.wrap(want.value()).order(ByteOrder.LITTLE_ENDIAN).getLong(), db.getLong(k), what);
				assertThrows(ShmkvException.Type.class, () -> db.getString(k), what);
				assertThrows(ShmkvException.Type.class, () -> db.getInto(k, new byte[8]), what);
			} else {
				assertEquals(new String(want.value(), StandardCharsets.UTF_8), db.getString(k), what);
				byte[] dst = new byte[want.value().length];
				assertEquals(dst.length, db.getInto(k, dst), what);
				assertArrayEquals(want.value(), dst, what);
				assertThrows(ShmkvException.Type.class, () -> db.getLong(k), what);
				assertThrows(ShmkvException.Type.class, () -> db.getBytes(k), what);
			}
		}
		List<String> live = new ArrayList<>(), all = new ArrayList<>();
		for (Value v : db)
			live.add(entry(v));
		for (Value v : db.allRecords())
			all.add(entry(v));
		assertEquals(order(a, false, now), live, "the iteration at " + now + ", in §19.6's order");
		assertEquals(order(a, true, now), all, "allRecords at " + now + ", in §19.6's order");
		List<String> modelAll = new ArrayList<>(), modelLive = new ArrayList<>();
		for (Encoder.Rec r : m.values()) {
			String e = hex(r.key()) + "=" + ValueType.of(r.type()) + ":" + hex(r.value()) + "@" + r.expires();
			modelAll.add(e);
			if (live(r, now))
				modelLive.add(e);
		}
		assertEquals(new HashSet<>(modelLive), new HashSet<>(live), "the iteration: the model's live records");
		assertEquals(modelLive.size(), live.size());
		assertEquals(new HashSet<>(modelAll), new HashSet<>(all), "allRecords: the model's records");
		assertEquals(modelAll.size(), all.size());
		assertEquals(modelLive.size(), db.size(), "size");
		assertEquals(modelAll.size(), db.recordCount(), "recordCount");
		db.verify();
	}

	static void check(ShmkvReader db, Levels l, Images im, boolean lower, boolean top, long now) {
		try (Alone a = Alone.of(im, lower, top)) {
			readsAs(db, l, l.model(lower, top), a, now);
		}
	}

	/** Through a lower and a top, in memory and as files, at clocks around the expiries; the lower alone; the base alone. */
	@Test
	void readThroughTwoDeltas() throws IOException {
		for (int bits : new int[] {64, 6}) { // 6: long probes, tags that collide
			Levels l = hand(bits);
			Images im = l.encode();
			Path b = Files.write(dir.resolve("base" + bits), im.base()), lo = Files.write(dir.resolve("lower" + bits),
					im.lower()), tp = Files.write(dir.resolve("top" + bits), im.top());
			try (Shmkv mem = Shmkv.of(im.base(), im.lower(), im.top(), Shmkv.Check.DEEP);
					Shmkv files = Shmkv.open(b, lo, tp, Shmkv.Check.CHECKSUMS)) {
				for (long now : new long[] {NOW, NOW - 100, NOW - 10, NOW + 999, NOW + 1000, NOW + 2000}) {
					check(mem, l, im, true, true, now);
					check(files, l, im, true, true, now);
				}
				for (Shmkv db : new Shmkv[] {mem, files}) {
					assertFalse(db.isDelta());
					assertEquals(Encoder.checksum(im.base()), db.checksum());
					assertEquals(Encoder.checksum(im.lower()), db.deltaId().orElseThrow().checksum());
					assertEquals(Encoder.checksum(im.top()), db.topDeltaId().orElseThrow().checksum());
				}
				try (Snapshot sn = files.snapshot()) {
					check(sn, l, im, true, true, NOW);
				}
			}
			try (Shmkv one = Shmkv.of(im.base(), im.lower(), null, Shmkv.Check.DEEP);
					Shmkv onef = Shmkv.open(b, lo, null, Shmkv.Check.DEEP);
					Shmkv alone = Shmkv.of(im.base(), Shmkv.Check.DEEP)) {
				check(one, l, im, true, false, NOW);
				check(onef, l, im, true, false, NOW);
				assertTrue(one.topDeltaId().isEmpty());
				check(alone, l, im, false, false, NOW);
			}
		}
	}

	/**
	 * The clock through two deltas: read at most once per get and per
	 * batch, once per iteration where any level has the EXPIRY flag (the top
	 * alone included), never where none has it.
	 */
	@Test
	void theClockThroughTwoDeltas() {
		Levels l = new Levels(DeltaTest.SEED, 64);
		s(l.base, "a", "b", 0, false);
		s(l.base, "b", "b", 0, false);
		s(l.lower, "b", "l", 0, false);
		s(l.lower, "c", "l", 0, false);
		s(l.top, "a", "t", NOW, false);
		s(l.top, "c", "t", 0, false);
		Images im = l.encode();
		AtomicInteger reads = new AtomicInteger();
		for (long now : new long[] {NOW - 1, NOW}) {
			try (Shmkv db = Shmkv.of(im.base(), im.lower(), im.top(), Shmkv.Check.HEADER)) {
				db.clock = () -> {
					reads.incrementAndGet();
					return now;
				};
				for (String k : new String[] {"a", "b", "c", "d"}) {
					reads.set(0);
					db.get(k);
					assertTrue(reads.get() <= 1, k + ": " + reads.get() + " clock reads");
				}
				reads.set(0);
				db.getAll(str("a"), str("b"), str("c"), str("d"));
				assertTrue(reads.get() <= 1, "a batch: " + reads.get() + " clock reads");
				reads.set(0);
				HashSet<String> keys = new HashSet<>();
				for (Value v : db)
					keys.add(new String(v.key(), StandardCharsets.UTF_8));
				assertEquals(1, reads.get(), "an iteration reads the clock once");
				assertEquals(now >= NOW ? Set.of("b", "c") : Set.of("a", "b", "c"), keys,
						"only the top has the EXPIRY flag: its expired upsert hides the base's a");
				// read when the iteration starts: a clock moved after it does not count
				java.util.Iterator<Value> it = db.iterator();
				db.clock = () -> now >= NOW ? NOW - 1 : NOW;
				keys.clear();
				it.forEachRemaining(v -> keys.add(new String(v.key(), StandardCharsets.UTF_8)));
				assertEquals(now >= NOW ? Set.of("b", "c") : Set.of("a", "b", "c"), keys, "the clock of the start");
			}
		}
		l.top.recs.set(0, new Encoder.Rec(str("a"), Format.STRING, str("t"), 0, false, false));
		Images plain = l.encode();
		try (Shmkv db = Shmkv.of(plain.base(), plain.lower(), plain.top(), Shmkv.Check.DEEP)) {
			db.clock = () -> {
				throw new AssertionError("the clock was read for images without EXPIRY");
			};
			assertEquals("t", db.getString("a"));
			assertEquals("l", db.getString("b"));
			db.getAll(str("a"), str("d"));
			assertEquals(3, db.size());
			for (Value v : db)
				assertNotNull(v);
		}
	}

	/** Each delta must apply to the base itself (§19.4), the message naming the level; a top needs a lower. */
	@Test
	void twoDeltasThatDoNotApplyAreRefused() {
		Levels l = hand(64);
		Images im = l.encode();
		Levels o = hand(64);
		s(o.base, "other", "o", 0, false);
		Images other = o.encode();
		Encoder chained = hand(64).top;
		byte[] ctop = chained.delta(chained.buckets(), Encoder.checksum(im.base()), im.base().length, 0x1234, 2);
		ShmkvException e = assertThrows(ShmkvException.Io.class, () -> Shmkv.of(im.base(), null, im.top(),
				Shmkv.Check.HEADER));
		assertEquals("EINVAL", e.codeName());
		assertTrue(e.getMessage().contains("a top delta without a lower one"), e.getMessage());
		e = assertThrows(ShmkvException.Io.class, () -> Shmkv.open(dir.resolve("b"), null, dir.resolve("t"),
				Shmkv.Check.HEADER));
		assertEquals("EINVAL", e.codeName());
		String bsum = Bytes.hex(Encoder.checksum(im.base()));
		for (Object[] c : new Object[][] {
				{"a top of another base", im.lower(), other.top(), "top delta the top delta in memory: it was made for "
						+ "another image"},
				{"a lower of another base", other.lower(), im.top(), "lower delta the lower delta in memory: it was made "
						+ "for another image"},
				{"a top that is no delta", im.lower(), other.base(), "given as the top delta, is a plain image"},
				{"a top of a chain", im.lower(), ctop, "top delta the top delta in memory: it follows delta "
						+ "0000000000001234, as number 2"}}) {
			ShmkvException x = assertThrows(ShmkvException.Base.class, () -> Shmkv.of(im.base(), (byte[]) c[1],
					(byte[]) c[2], Shmkv.Check.CHECKSUMS), (String) c[0]);
			assertTrue(x.getMessage().contains((String) c[3]), c[0] + ": " + x.getMessage());
			assertTrue(x.getMessage().contains(bsum), c[0] + ": " + x.getMessage());
			assertEquals("SHMKV_EBASE", x.codeName());
		}
		// and as files
		Path b = write("b", im.base()), lo = write("lo", im.lower()), tp = write("tp", im.top()),
				ol = write("ol", other.lower()), ot = write("ot", other.top());
		for (Path[] c : new Path[][] {{lo, ot}, {ol, tp}}) {
			ShmkvException x = assertThrows(ShmkvException.Base.class, () -> Shmkv.open(b, c[0], c[1],
					Shmkv.Check.CHECKSUMS));
			String which = c[0] == ol ? "lower delta " + ol : "top delta " + ot;
			assertTrue(x.getMessage().contains(which + ": it was made for another image"), x.getMessage());
		}
		try (Shmkv db = Shmkv.open(b, lo, tp, Shmkv.Check.CHECKSUMS)) {
			assertEquals("t", db.getString("top-only"));
		}
		ShmkvException x = assertThrows(ShmkvException.Base.class, () -> Shmkv.of(im.top(), im.lower(), im.top(),
				Shmkv.Check.CHECKSUMS));
		assertTrue(x.getMessage().contains("lower delta the lower delta in memory: the image is itself a delta"),
				x.getMessage());
	}

	Path write(String name, byte[] img) {
		try {
			return Files.write(dir.resolve(name), img);
		} catch (IOException e) {
			throw new java.io.UncheckedIOException(e);
		}
	}

	/** Random levels: keys k0..kN, each in any subset of the three levels, of any record kind. */
	static Levels random(SplittableRandom r) {
		Levels l = new Levels(r.nextLong(), 64);
		int keys = 20 + r.nextInt(200);
		for (int n = 0; n < keys; n++) {
			String k = "k" + n;
			int in = r.nextInt(8); // bit 0 base, 1 lower, 2 top
			Encoder[] levels = {l.base, l.lower, l.top};
			String[] tags = {"b", "l", "t"};
			for (int v = 0; v < 3; v++) {
				if ((in >> v & 1) == 0)
					continue;
				Encoder e = levels[v];
				if (v > 0 && r.nextInt(4) == 0) {
					e.tomb(str(k), r.nextInt(3) == 0);
					continue;
				}
				long x = switch (r.nextInt(6)) {
					case 0 -> NOW - 1 - r.nextInt(100);
					case 1 -> NOW + 1 + r.nextInt(100);
					default -> 0;
				};
				if (r.nextInt(5) == 0)
					e.add(str(k), Format.I64, Encoder.i64(r.nextLong()), x, false);
				else
					e.add(str(k), Format.STRING, str(tags[v] + "x".repeat(r.nextInt(40))), x, r.nextInt(4) == 0);
			}
		}
		return l;
	}

	/**
	 * Random levels over a shared key space, 40 rounds: every read path
	 * against the model, in memory and attached (a generation of the three,
	 * its entries in a random order), at clocks around the expiries.
	 */
	@Test
	void randomizedModel() throws IOException {
		SplittableRandom r = new SplittableRandom(0x70b);
		Ctl2 c = new Ctl2(dir);
		for (int round = 0; round < 40; round++) {
			Levels l = random(r);
			Images im = l.encode();
			try (Shmkv db = Shmkv.of(im.base(), im.lower(), im.top(), Shmkv.Check.DEEP)) {
				for (long now : new long[] {NOW, NOW - 50, NOW + 50})
					check(db, l, im, true, true, now);
			}
			List<ControlSegmentTest.Seg> segs = new ArrayList<>(List.of(c.base("base." + round, im.base()),
					c.lower("lower." + round, im.lower()), c.top("top." + round, im.top())));
			java.util.Collections.shuffle(segs, new java.util.Random(round));
			c.h.create2(segs.toArray(new ControlSegmentTest.Seg[0]));
			try (Shmkv db = c.h.attach()) {
				check(db, l, im, true, true, NOW);
			}
		}
	}

	/** The hand-made control segments of {@link ControlSegmentTest}, under dir. */
	static final class Ctl2 {
		final ControlSegmentTest h = new ControlSegmentTest();

		Ctl2(Path dir) throws IOException {
			h.dir = dir;
			h.root = Files.createDirectory(dir.resolve("root"));
			h.ctl = h.root.resolve(ControlSegmentTest.NAME + ".ctl");
		}

		Path file(String name, byte[] img) {
			try {
				return h.write(name, img);
			} catch (IOException e) {
				throw new java.io.UncheckedIOException(e);
			}
		}

		ControlSegmentTest.Seg base(String name, byte[] img) {
			return ControlSegmentTest.Seg.base(file(name, img));
		}

		ControlSegmentTest.Seg lower(String name, byte[] img) {
			return ControlSegmentTest.Seg.overlay(file(name, img));
		}

		ControlSegmentTest.Seg top(String name, byte[] img) {
			return ControlSegmentTest.Seg.overlay(file(name, img)).flags(TOP);
		}
	}

	/** A generation of a base, a lower and a top copy: read through both, in any order of its entries, at every Check. */
	@Test
	void attachedBaseLowerTop() throws IOException {
		Levels l = hand(64);
		Images im = l.encode();
		Ctl2 c = new Ctl2(dir);
		ControlSegmentTest.Seg b = c.base("base", im.base()), lo = c.lower("lower", im.lower()), tp = c.top("top",
				im.top());
		for (ControlSegmentTest.Seg[] segs : new ControlSegmentTest.Seg[][] {{tp, b, lo}, {b, lo, tp}, {lo, tp, b}}) {
			c.h.create2(segs);
			for (Shmkv.Check k : Shmkv.Check.values())
				try (Shmkv db = Shmkv.attach(ControlSegmentTest.NAME, c.h.root, k)) {
					for (long now : new long[] {NOW, NOW + 2000})
						check(db, l, im, true, true, now);
					assertEquals(Encoder.checksum(im.top()), db.topDeltaId().orElseThrow().checksum());
					assertEquals(Encoder.checksum(im.lower()), db.deltaId().orElseThrow().checksum());
				}
		}
	}

	/** Each rule of "Protocol 2" about the levels broken once: the generation is refused with its class and message. */
	@Test
	void protocolRulesOfTheLevels() throws IOException {
		Levels l = hand(64);
		Images im = l.encode();
		Levels o = hand(64);
		s(o.base, "other", "o", 0, false);
		Images other = o.encode();
		byte[] damaged = im.top().clone(); // a byte of the top's INDEX: only its checksum sees it
		long idx = ByteBuffer.wrap(damaged).order(ByteOrder.LITTLE_ENDIAN).getLong(192 + 8);
		damaged[(int) idx + 200] ^= 0x40;
		Ctl2 c = new Ctl2(dir);
		ControlSegmentTest.Seg b = c.base("base", im.base()), lo = c.lower("lower", im.lower()), tp = c.top("top",
				im.top()), otop = c.top("otop", other.top()), olower = c.lower("olower", other.lower()),
				obase = c.top("obase", other.base()), dmg = c.top("damaged", damaged),
				gone = new ControlSegmentTest.Seg(-1, TOP, dir.resolve("top.gone"), im.top().length);
		String where = c.h.ctl.toString();
		record Case(String what, int version, ControlSegmentTest.Seg[] segs, Shmkv.Check check,
				Class<? extends ShmkvException> kind, String says) {}
		for (Case k : List.of(
				new Case("TOP without OVERLAY", 2, new ControlSegmentTest.Seg[] {b, lo, tp.flags(Ctl.SEG_TOP)},
						Shmkv.Check.HEADER, ShmkvException.Proto.class, "segment 2 has flags 4: the TOP flag without OVERLAY"),
				new Case("TOP alone as the base", 2, new ControlSegmentTest.Seg[] {b.flags(Ctl.SEG_TOP)},
						Shmkv.Check.HEADER, ShmkvException.Proto.class, "the TOP flag without OVERLAY"),
				new Case("TOP under protocol 1", 1, new ControlSegmentTest.Seg[] {b, tp.flags(Ctl.SEG_TOP)},
						Shmkv.Check.HEADER, ShmkvException.Proto.class, "segment 1 has flags 4, unknown to protocol 1"),
				new Case("the overlays under protocol 1", 1, new ControlSegmentTest.Seg[] {b, lo, tp}, Shmkv.Check.HEADER,
						ShmkvException.Proto.class, "segment 1 has flags 2, unknown to protocol 1"),
				new Case("a top without a lower", 2, new ControlSegmentTest.Seg[] {b, tp}, Shmkv.Check.HEADER,
						ShmkvException.Proto.class, "generation 1 has a top overlay but no lower one"),
				new Case("overlays without a base", 2, new ControlSegmentTest.Seg[] {lo, tp}, Shmkv.Check.HEADER,
						ShmkvException.Proto.class, "generation 1 has an overlay but no base"),
				new Case("a top without a base", 2, new ControlSegmentTest.Seg[] {tp}, Shmkv.Check.HEADER,
						ShmkvException.Proto.class, "generation 1 has an overlay but no base"),
				new Case("a top of another base", 2, new ControlSegmentTest.Seg[] {b, lo, otop}, Shmkv.Check.HEADER,
						ShmkvException.Base.class, "delta " + otop.path() + " (the top overlay of generation 1): it was "
								+ "made for another image"),
				new Case("a lower of another base", 2, new ControlSegmentTest.Seg[] {b, olower, tp}, Shmkv.Check.HEADER,
						ShmkvException.Base.class, "delta " + olower.path() + " (the overlay of generation 1): it was made "
								+ "for another image"),
				new Case("a top that is no delta", 2, new ControlSegmentTest.Seg[] {b, lo, obase}, Shmkv.Check.HEADER,
						ShmkvException.Proto.class, "a plain image where the top overlay belongs"),
				new Case("a damaged top, checked", 2, new ControlSegmentTest.Seg[] {b, lo, dmg}, Shmkv.Check.CHECKSUMS,
						ShmkvException.Checksum.class, dmg.path() + " (the top overlay of generation 1)"),
				new Case("a missing top", 2, new ControlSegmentTest.Seg[] {b, lo, gone}, Shmkv.Check.HEADER,
						ShmkvException.Io.class, "top.gone"),
				new Case("an unknown flag", 2, new ControlSegmentTest.Seg[] {b, lo.flags(Ctl.SEG_OVERLAY | 8)},
						Shmkv.Check.HEADER, ShmkvException.Proto.class, "segment 1 has flags a, unknown to protocol 2 (its "
								+ "flags: 7)"))) {
			c.h.create(k.version(), k.version() == 1 ? Ctl.LAYOUT_HASH : Ctl.LAYOUT_HASH_V2, k.segs());
			ShmkvException e = assertThrows(k.kind(), () -> Shmkv.attach(ControlSegmentTest.NAME, c.h.root, k.check()),
					k.what());
			assertTrue(e.getMessage().contains(k.says()), k.what() + ": " + e.getMessage());
			if (k.kind() == ShmkvException.Proto.class && !k.says().contains("plain image"))
				MessagesTest.saysEachThingOnce(where, e);
		}
		// the damaged top attaches with the header checked alone; verify finds it
		c.h.create2(b, lo, dmg);
		try (Shmkv db = Shmkv.attach(ControlSegmentTest.NAME, c.h.root, Shmkv.Check.HEADER)) {
			assertEquals("t", db.getString("top-only"));
			ShmkvException e = assertThrows(ShmkvException.Checksum.class, db::verify);
			assertTrue(e.getMessage().contains(dmg.path().toString()), e.getMessage());
		}
	}

	/** Each overlay's copy: the one on the base copy's (the node's) node, else its first. */
	@Test
	void eachOverlayOfTheBaseCopysNode() throws IOException {
		Levels l = hand(64);
		Images im = l.encode();
		Ctl2 c = new Ctl2(dir);
		// copies told apart by one key (real copies are equal)
		java.util.function.BiFunction<Encoder, String, byte[]> copy = (e, which) -> {
			Encoder x = new Encoder();
			x.seed = e.seed;
			x.recs.addAll(e.recs);
			s(x, "copy", which, 0, false);
			return x.delta(x.buckets(), im.base());
		};
		ControlSegmentTest.Seg b0 = c.base("b0", im.base()).on(0), b1 = c.base("b1", im.base()).on(1),
				l0 = c.lower("l0", copy.apply(l.lower, "l0")).on(0), l1 = c.lower("l1", copy.apply(l.lower, "l1")).on(1),
				t0 = c.top("t0", copy.apply(l.top, "t0")).on(0), t1 = c.top("t1", copy.apply(l.top, "t1")).on(1);
		for (Object[] k : new Object[][] {
				{new ControlSegmentTest.Seg[] {t1, b0, l1, b1, t0, l0}, 0, "l0", "t0"}, // the base copy read: node 0's
				{new ControlSegmentTest.Seg[] {t1, b0, l1, b1, t0, l0}, 1, "l1", "t1"},
				{new ControlSegmentTest.Seg[] {b1, l0, t0, b0, l1, t1}, 1, "l1", "t1"},
				{new ControlSegmentTest.Seg[] {b1, l0, t0, b0, l1, t1}, 0, "l0", "t0"},
				{new ControlSegmentTest.Seg[] {b0, l1, t1, l0}, 0, "l0", "t1"}, // no top on node 0: the first
				{new ControlSegmentTest.Seg[] {b0.on(3), t1, l0, t0, l1}, Shmkv.NODE_CURRENT, "l0", "t1"}}) { // neither on node 3
			c.h.create2((ControlSegmentTest.Seg[]) k[0]);
			try (Shmkv db = Shmkv.attach(ControlSegmentTest.NAME, c.h.root, Shmkv.Check.CHECKSUMS, (int) k[1])) {
				Generation g = db.current();
				assertEquals(k[3], new String(db.get("copy").toBytes(), StandardCharsets.UTF_8), "the top's copy");
				try (Shmkv lower = Shmkv.of(g.delta.seg.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE),
						Shmkv.Check.HEADER)) {
					assertEquals(k[2], lower.getString("copy"), "the lower's copy");
				}
				assertEquals("t", db.getString("top-only"));
				assertEquals("l", db.getString("lower-only"));
				assertEquals("b", db.getString("base-only"));
			}
		}
	}

	/**
	 * Refresh across the levels: none -> a lower -> (a top of another base:
	 * refused, remembered, the generation kept) -> a lower and a top -> the
	 * same base and lower with a new top (only the top changed) -> a fold
	 * (the lower holds both, no top) -> (a top without a lower: refused) ->
	 * none; each answering as its model, the files of the generations before
	 * unlinked, while snapshots taken earlier keep their generation whole.
	 */
	@Test
	void refreshAcrossTheLevels() throws IOException {
		Levels l = hand(64);
		Images im = l.encode();
		Levels l2 = hand(64); // the next top: a key more, one removed, one changed
		l2.top.recs.replaceAll(r -> new String(r.key(), StandardCharsets.UTF_8).equals("top-only")
				? new Encoder.Rec(r.key(), Format.STRING, str("t2"), 0, true, false) : r);
		s(l2.top, "top2-only", "t2", 0, false);
		l2.top.tomb("base-only");
		Images im2 = l2.encode();
		Levels folded = hand(64); // the fold: the lower and l2's top merged into one delta
		Map<String, Encoder.Rec> f = new LinkedHashMap<>();
		for (Encoder e : List.of(l2.lower, l2.top))
			for (Encoder.Rec r : e.recs)
				f.put(hex(r.key()), r);
		folded.lower.recs.clear();
		folded.lower.recs.addAll(f.values());
		folded.top.recs.clear();
		Images imf = folded.encode();
		Levels o = hand(64);
		s(o.base, "other", "o", 0, false);
		Images other = o.encode();
		assertArrayEquals(im.base(), im2.base());
		assertArrayEquals(im.lower(), im2.lower());
		assertArrayEquals(im.base(), imf.base());

		Ctl2 c = new Ctl2(dir);
		ControlSegmentTest.Seg b = c.base("base", im.base());
		c.h.create2(b);
		List<Object[]> held = new ArrayList<>(); // snapshot, levels, images, lower, top
		try (Shmkv db = c.h.attach()) {
			check(db, l, im, false, false, NOW);
			held.add(new Object[] {db.snapshot(), l, im, false, false});

			ControlSegmentTest.Seg lo2 = c.lower("lower.2", im.lower());
			c.h.publish(2, 0, b, lo2);
			assertTrue(db.refresh());
			check(db, l, im, true, false, NOW);
			held.add(new Object[] {db.snapshot(), l, im, true, false});
			still(held, "after the lower appeared");

			ControlSegmentTest.Seg bad = c.top("top.bad", other.top());
			c.h.publish(3, 0, b, lo2, bad);
			ShmkvException e = assertThrows(ShmkvException.Base.class, db::refresh);
			assertSame(e, assertThrows(ShmkvException.Base.class, db::refresh), "remembered until the next publish");
			assertEquals(2, db.generation());
			check(db, l, im, true, false, NOW);

			ControlSegmentTest.Seg lo4 = c.lower("lower.4", im.lower()), tp4 = c.top("top.4", im.top());
			c.h.publish(4, 0, tp4, b, lo4);
			Files.delete(lo2.path()); // what the loader does after a publish
			Files.delete(bad.path());
			still(held, "with the lower's file unlinked");
			assertTrue(db.refresh());
			assertFalse(db.refresh());
			assertEquals(4, db.generation());
			check(db, l, im, true, true, NOW);
			held.add(new Object[] {db.snapshot(), l, im, true, true});

			ControlSegmentTest.Seg tp5 = c.top("top.5", im2.top()); // only the top changed
			c.h.publish(5, 0, b, lo4, tp5);
			Files.delete(tp4.path());
			assertTrue(db.refresh());
			check(db, l2, im2, true, true, NOW);
			held.add(new Object[] {db.snapshot(), l2, im2, true, true});
			still(held, "after the top changed");

			ControlSegmentTest.Seg lo6 = c.lower("lower.6", imf.lower()); // the fold: no top
			c.h.publish(6, 0, lo6, b);
			Files.delete(lo4.path());
			Files.delete(tp5.path());
			assertTrue(db.refresh());
			assertTrue(db.topDeltaId().isEmpty());
			check(db, folded, imf, true, false, NOW);
			Map<String, Encoder.Rec> before = l2.model(true, true), after = folded.model(true, false);
			assertEquals(before.keySet(), after.keySet(), "the fold holds what the lower and the top held");
			for (byte[] k : l2.keys()) {
				Encoder.Rec r = before.get(hex(k));
				DeltaTest.same(r != null && live(r, NOW) ? r : null, db.get(k), "after the fold");
			}
			held.add(new Object[] {db.snapshot(), folded, imf, true, false});
			still(held, "after the fold");

			ControlSegmentTest.Seg tp7 = c.top("top.7", im.top());
			c.h.publish(7, 0, b, tp7);
			assertThrows(ShmkvException.Proto.class, db::refresh, "a top without a lower");
			assertEquals(6, db.generation());

			c.h.publish(8, 0, b);
			assertTrue(db.refresh());
			assertTrue(db.deltaId().isEmpty());
			check(db, l, im, false, false, NOW);
			still(held, "at the end");
			long[] gens = {1, 2, 4, 5, 6};
			for (int n = 0; n < held.size(); n++)
				assertEquals(gens[n], ((Snapshot) held.get(n)[0]).generation());
		} finally {
			for (Object[] h : held)
				((Snapshot) h[0]).close();
		}
	}

	/** Every snapshot held answers as its generation's model, on every read path. */
	static void still(List<Object[]> held, String when) {
		for (Object[] h : held) {
			Snapshot sn = (Snapshot) h[0];
			try {
				check(sn, (Levels) h[1], (Images) h[2], (Boolean) h[3], (Boolean) h[4], NOW);
			} catch (AssertionError e) {
				throw new AssertionError(when + ": the snapshot of generation " + sn.generation() + ": " + e.getMessage(), e);
			}
		}
	}
}
