package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Delta images (FORMAT.md §19) on images of the test-only {@link Encoder}:
 * a delta opened and read alone (tombstones absent from gets and from the
 * iteration, listed by allRecords), a base read through a delta against a
 * model of the records (upserts replace, tombstones hide, other keys come
 * from the base, the filter's false positives, expiry on either side),
 * every rule of §19.4 broken once (at open, at a lookup, at verify), and
 * deltas that do not apply refused with SHMKV_EBASE.
 */
class DeltaTest {
	static final long E = 1_800_000_000L; // an expiry
	/** The builder's default seed (FORMAT.md §14): the hash of every lookup here is seeded. */
	static final long SEED = 0x53484D4B56763121L;
	static final byte[] LONG_KEY = "k".repeat(300).getBytes(StandardCharsets.US_ASCII); // OUT: over 255 bytes
	static final HexFormat HEX = HexFormat.of();

	static byte[] str(String s) {
		return Encoder.str(s);
	}

	/** The base: 2,000 key_N -> val_N and keys the delta changes, inline and OUT, expiring or not. */
	static Encoder baseRecords() {
		Encoder enc = new Encoder();
		enc.seed = SEED;
		for (int i = 0; i < 2000; i++)
			enc.add("key_" + i, Format.STRING, str("val_" + i));
		enc.add("i64", Format.I64, Encoder.i64(-42));
		enc.add("type-change", Format.I64, Encoder.i64(7));
		enc.add("long-string", Format.STRING, str("x".repeat(300))); // OUT
		enc.add("strs", Format.STRLIST, Encoder.strlist("a", "b"));
		enc.add(str("gone-inline"), Format.STRING, str("g1"), 0, false);
		enc.add(str("gone-outer"), Format.STRING, str("g2"), 0, true);
		enc.add(new byte[0], Format.BYTES, new byte[] {7}, 0, false); // the empty key
		enc.add(LONG_KEY, Format.I64, Encoder.i64(300), 0, false);
		enc.add(str("exp-base"), Format.I64, Encoder.i64(1), E, false);
		enc.add(str("exp-base-out"), Format.STRING, str("old"), E, true);
		enc.add(str("exp-both"), Format.I64, Encoder.i64(2), E, false);
		return enc;
	}

	/** The delta: upserts of base keys (another type, OUT, expiring), new keys, tombstones inline and OUT; 23 upserts, 6 tombstones. */
	static Encoder deltaRecords() {
		Encoder d = new Encoder();
		d.seed = SEED;
		d.add("key_5", Format.STRING, str("new_5"));
		d.add("key_7", Format.I64, Encoder.i64(7007)); // another type
		d.add("type-change", Format.STRING, str("now a string"));
		d.add("long-string", Format.STRING, str("y".repeat(300))); // an OUT upsert
		d.add("new-key", Format.I64, Encoder.i64(99));
		d.add(str("new-out"), Format.BYTES, new byte[100], 0, true);
		d.add("new-strs", Format.STRLIST, Encoder.strlist("c", "dé"));
		d.add(str("key_11"), Format.STRING, str("expires"), E, false); // from E absent: the base is not asked
		d.add(str("exp-base"), Format.I64, Encoder.i64(10), 0, false); // the base's expires, this one not
		d.add(str("exp-both"), Format.I64, Encoder.i64(20), E + 10, true);
		d.add(str("new-exp"), Format.STRING, str("soon"), E + 10, false);
		for (int i = 100; i < 112; i++) // more records than few buckets hold: keys displaced
			d.add("key_" + i, Format.STRING, str("newer_" + i));
		d.tomb("gone-inline");
		d.tomb(str("gone-outer"), true);
		d.tomb("key_9");
		d.tomb(new byte[0], false); // the empty key: inline
		d.tomb("never-there"); // a key the base lacks: allowed, changes nothing
		d.tomb(LONG_KEY, false); // OUT: its key is over 255 bytes
		return d;
	}

	/** enc with another seed. */
	static Encoder withSeed(Encoder enc, long seed) {
		enc.seed = seed;
		return enc;
	}

	static byte[] base() {
		Encoder b = baseRecords();
		return b.build(b.buckets());
	}

	static byte[] delta(byte[] base) {
		Encoder d = deltaRecords();
		return d.delta(d.buckets(), base);
	}

	/** A delta of deltaRecords() in so few buckets that keys are displaced. */
	static byte[] deltaImage() {
		return displaced(deltaRecords(), base());
	}

	/** d's records as a delta of base in the fewest buckets they fit, from 2 up, with a key displaced. */
	static byte[] displaced(Encoder d, byte[] base) {
		for (int b = 2; ; b++) {
			try {
				byte[] img = d.delta(b, base);
				if (le(img).getInt(72) > 0)
					return img;
			} catch (IllegalStateException tooFew) {
				// the records do not fit b buckets
			}
			assertTrue(b < 64, "no bucket count displaces a key");
		}
	}

	/**
	 * What a get through the delta answers at clock now (FORMAT.md §19): a
	 * key the delta holds, its upsert when live (absent once expired), absent
	 * for a tombstone; any other key the base's record when live.
	 */
	static Map<String, Encoder.Rec> model(Encoder base, Encoder delta, long now) {
		Map<String, Encoder.Rec> m = new LinkedHashMap<>();
		Map<String, Encoder.Rec> held = new HashMap<>();
		for (Encoder.Rec r : delta.recs)
			held.put(HEX.formatHex(r.key()), r);
		for (Encoder.Rec r : base.recs)
			m.put(HEX.formatHex(r.key()), r);
		m.putAll(held);
		m.values().removeIf(r -> r.tomb() || r.expires() != 0 && now >= r.expires());
		return m;
	}

	/** Every key of the model, and every key either image has, answered as the model says; the batch too. */
	static void readsAsModel(ShmkvReader db, Encoder base, Encoder delta, long now) {
		Map<String, Encoder.Rec> m = model(base, delta, now);
		List<byte[]> keys = new ArrayList<>();
		for (Encoder enc : List.of(base, delta))
			for (Encoder.Rec r : enc.recs)
				keys.add(r.key());
		keys.add(str("absent"));
		keys.add(str("key_2000"));
		for (byte[] k : keys) {
			Encoder.Rec want = m.get(HEX.formatHex(k));
			Value got = db.get(k);
			same(want, got, Keys.show(k, k.length) + " at " + now);
			if (want == null) {
				assertEquals(-1, db.getInto(k, new byte[8]));
				assertThrows(ShmkvException.NotFound.class, () -> db.getLong(k));
			} else if (want.type() == Format.I64) {
				assertEquals(ByteBuffer.wrap(want.value()).order(ByteOrder.LITTLE_ENDIAN).getLong(), db.getLong(k));
			} else if (want.type() == Format.STRING) {
				assertEquals(new String(want.value(), StandardCharsets.UTF_8), db.getString(k));
				byte[] dst = new byte[want.value().length];
				assertEquals(dst.length, db.getInto(k, dst));
				assertArrayEquals(want.value(), dst);
			}
		}
		Value[] batch = db.getAll(keys.toArray(new byte[0][]));
		for (int i = 0; i < keys.size(); i++)
			same(m.get(HEX.formatHex(keys.get(i))), batch[i], "batch key " + i);
		// the iteration: the live entries of the model, each once
		Map<String, Encoder.Rec> left = new HashMap<>(m);
		for (Value v : db)
			same(left.remove(HEX.formatHex(v.key())), v, "iterated " + HEX.formatHex(v.key()));
		assertEquals(Map.of(), left, "the iteration yields every live entry");
		assertEquals(m.size(), db.size());
	}

	static void same(Encoder.Rec want, Value got, String what) {
		if (want == null) {
			assertNull(got, what + ": absent");
			return;
		}
		assertNotNull(got, what);
		assertEquals(want.type(), got.type().code(), what);
		assertArrayEquals(want.value(), got.toBytes(), what);
		assertArrayEquals(want.key(), got.key(), what);
		assertEquals(want.expires(), got.expires(), what);
	}

	@Test
	void aDeltaOpensAtEveryLevelAndVerifies() {
		byte[] base = base(), d = deltaImage();
		for (Shmkv.Check c : Shmkv.Check.values())
			try (Shmkv db = Shmkv.of(d, c)) {
				db.verify();
				assertTrue(db.isDelta());
				DeltaId id = db.deltaId().orElseThrow();
				assertEquals(new DeltaId(Encoder.checksum(d), Encoder.checksum(base), base.length, 0, 1), id);
				assertEquals(Encoder.checksum(d), db.checksum());
				assertTrue(id.toString().contains("delta seq 1"), id.toString());
			}
		try (Shmkv db = Shmkv.of(base, Shmkv.Check.DEEP)) {
			assertFalse(db.isDelta());
			assertTrue(db.deltaId().isEmpty());
			assertEquals(Encoder.checksum(base), db.checksum());
		}
		assertTrue(ByteBuffer.wrap(d).order(ByteOrder.LITTLE_ENDIAN).getInt(72) > 0, "some delta keys are displaced");
	}

	/** A delta read alone: gets answer its upserts, a tombstone is absent; allRecords lists tombstones. */
	@Test
	void aDeltaReadAlone() {
		Encoder enc = deltaRecords();
		try (Shmkv db = Shmkv.of(deltaImage(), Shmkv.Check.DEEP)) {
			db.setClock(E - 1);
			assertEquals("new_5", db.getString("key_5"));
			assertEquals(7007, db.getLong("key_7"));
			assertEquals("y".repeat(300), db.getString("long-string"));
			assertEquals(List.of("c", "dé"), db.getStrings("new-strs"));
			for (byte[] k : List.of(str("gone-inline"), str("gone-outer"), str("key_9"), new byte[0], str("never-there"),
					LONG_KEY)) {
				String what = Keys.show(k, k.length);
				assertNull(db.get(k), what + ": a tombstone is absent");
				assertNull(db.getBytes(k), what);
				assertEquals(-1, db.getInto(k, new byte[8]), what);
				assertThrows(ShmkvException.NotFound.class, () -> db.getLong(k), what);
				assertNull(db.getAll(k)[0], what);
			}
			assertEquals(5, db.getLong("gone-outer", 5));
			assertNull(db.get("key_1"), "a key the delta does not hold: a delta read alone does not have it");
			// the live iteration: the upserts
			List<String> live = new ArrayList<>();
			for (Value v : db) {
				assertFalse(v.isTombstone());
				live.add(new String(v.key(), StandardCharsets.UTF_8));
			}
			assertEquals(23, live.size(), live.toString());
			assertEquals(23, db.size());
			// every record: the tombstones too, each with an empty value
			int tombs = 0, all = 0;
			for (Value v : db.allRecords()) {
				all++;
				if (!v.isTombstone())
					continue;
				tombs++;
				assertEquals(ValueType.TOMBSTONE, v.type());
				assertEquals("tombstone", v.type().formatName());
				assertEquals(0, v.type().code());
				assertEquals(0, v.byteSize());
				assertEquals(0, v.toBytes().length);
				assertEquals(0, v.count());
				assertEquals(0, v.expires());
				assertFalse(v.isShared());
				assertEquals(0, v.segment().byteSize());
				ShmkvException e = assertThrows(ShmkvException.Type.class, v::asString);
				assertTrue(e.getMessage().contains("the value is tombstone, not string"), e.getMessage());
				assertThrows(ShmkvException.Type.class, v::asLong);
				assertTrue(enc.recs.stream().anyMatch(r -> r.tomb() && Arrays.equals(r.key(), v.key())));
			}
			assertEquals(6, tombs);
			assertEquals(enc.recs.size(), all);
			assertEquals(enc.recs.size(), db.recordCount(), "entry_count: upserts and tombstones");
			db.setClock(E + 10);
			assertNull(db.get("new-exp"), "an upsert expires in a delta read alone too");
			assertEquals(20, db.size());
		}
	}

	/** Reading through: upserts replace, tombstones hide, other keys come from the base; expiry on both sides. */
	@Test
	void aBaseReadThroughItsDelta() {
		Encoder be = baseRecords(), de = deltaRecords();
		byte[] base = be.build(be.buckets()), d = displaced(de, base);
		try (Shmkv db = Shmkv.of(base, d, Shmkv.Check.DEEP)) {
			db.verify();
			assertFalse(db.isDelta(), "a base read through a delta");
			assertEquals(Encoder.checksum(d), db.deltaId().orElseThrow().checksum());
			assertEquals(Encoder.checksum(base), db.checksum());
			assertEquals("v2test", db.name());
			for (long now : new long[] {E - 1, E, E + 9, E + 10}) {
				db.setClock(now);
				readsAsModel(db, be, de, now);
				try (Snapshot s = db.snapshot()) {
					readsAsModel(s, be, de, now);
				}
			}
			db.setClock(E - 1);
			// by hand, the cases the model covers
			assertEquals("new_5", db.getString("key_5"), "an upsert replaces the base's value");
			assertEquals(7007, db.getLong("key_7"), "and its type");
			ShmkvException t = assertThrows(ShmkvException.Type.class, () -> db.getString("key_7"));
			assertTrue(t.getMessage().contains("key \"key_7\" is i64, not string"), t.getMessage());
			assertEquals("val_6", db.getString("key_6"), "a key the delta does not hold: the base's");
			assertNull(db.get("key_9"), "a tombstone hides the base's key");
			assertNull(db.get("gone-outer"));
			assertNull(db.get(new byte[0]), "the empty key, removed");
			assertNull(db.get(LONG_KEY), "a key over 255 bytes, removed by an OUT tombstone");
			assertEquals(99, db.getLong("new-key"), "a key only the delta has");
			assertEquals(List.of("a", "b"), db.getStrings("strs"));
			assertEquals(E, db.get("key_11").expires(), "the upsert's expiry");
			assertEquals(E, db.get("exp-base-out").expires(), "the base's expiry");
			db.setClock(E);
			assertNull(db.get("key_11"), "an expired upsert is absent: the base's live record is not consulted");
			assertEquals(10, db.getLong("exp-base"), "an upsert without expiry outlives the base's record");
			assertNull(db.get("exp-base-out"), "a base record expires through a delta too");
			assertEquals(20, db.getLong("exp-both"));
			// the order: the delta's live upserts, then the base's records whose key it does not hold
			List<String> keys = new ArrayList<>(), deltaOrder = new ArrayList<>(), deltaAll = new ArrayList<>();
			for (Value v : db)
				keys.add(HEX.formatHex(v.key()));
			try (Shmkv alone = Shmkv.of(d, Shmkv.Check.HEADER)) {
				alone.setClock(E);
				for (Value v : alone)
					deltaOrder.add(HEX.formatHex(v.key()));
				for (Value v : alone.allRecords())
					if (!v.isTombstone())
						deltaAll.add(HEX.formatHex(v.key()));
			}
			assertEquals(deltaOrder, keys.subList(0, deltaOrder.size()), "the delta's live upserts come first");
			// allRecords: every upsert, expired too, and every base record the delta does not hold; no tombstone
			Map<String, Encoder.Rec> all = model(be, de, 0);
			List<String> listed = new ArrayList<>();
			for (Value v : db.allRecords()) {
				assertFalse(v.isTombstone());
				listed.add(HEX.formatHex(v.key()));
				same(all.get(HEX.formatHex(v.key())), v, "allRecords " + HEX.formatHex(v.key()));
			}
			assertEquals(all.size(), listed.size());
			assertEquals(all.size(), db.recordCount());
			assertEquals(23, deltaAll.size());
			assertEquals(deltaAll, listed.subList(0, deltaAll.size()), "every upsert first, expired ones too");
		}
	}

	/** Through a delta the clock is read at most once per get and per batch, and never without EXPIRY. */
	@Test
	void theClockThroughADelta() {
		byte[] base = base();
		AtomicInteger reads = new AtomicInteger();
		try (Shmkv db = Shmkv.of(base, delta(base), Shmkv.Check.HEADER)) {
			db.clock = () -> {
				reads.incrementAndGet();
				return E - 1;
			};
			db.get("key_1");
			db.get("key_5");
			assertEquals(0, reads.get(), "records without expiry read no clock");
			db.get("key_11");
			assertEquals(1, reads.get());
			db.getAll(str("key_11"), str("exp-base-out"), str("exp-both"), str("new-exp"));
			assertEquals(2, reads.get(), "a batch reads it once");
			db.iterator().hasNext();
			assertEquals(3, reads.get(), "an iteration once, when it starts");
		}
		Encoder pb = new Encoder(), pd = new Encoder();
		for (int i = 0; i < 100; i++)
			pb.add("key_" + i, Format.STRING, str("val_" + i));
		pd.add("key_3", Format.STRING, str("new")).tomb("key_4");
		byte[] b = pb.build(pb.buckets());
		try (Shmkv db = Shmkv.of(b, pd.delta(1, b), Shmkv.Check.DEEP)) {
			db.clock = () -> {
				throw new AssertionError("the clock was read for images without EXPIRY");
			};
			assertEquals("new", db.getString("key_3"));
			assertNull(db.get("key_4"));
			assertEquals("val_5", db.getString("key_5"));
			assertEquals(99, db.size());
			for (Value v : db)
				assertNotNull(v);
		}
	}

	/**
	 * The filter's false positives (a one-word filter that says "maybe" for
	 * most keys): such a key is looked up in the delta, missed there, and the
	 * base answers.
	 */
	@Test
	void filterFalsePositivesFallThroughToTheBase() {
		Encoder be = new Encoder(), de = new Encoder();
		for (int i = 0; i < 500; i++)
			be.add("key_" + i, Format.I64, Encoder.i64(i));
		for (int i = 0; i < 80; i += 2)
			de.add("key_" + i, Format.I64, Encoder.i64(-i));
		de.tomb("key_1");
		de.filterWords = 1;
		byte[] base = be.build(be.buckets()), d = de.delta(de.buckets(), base);
		try (Shmkv db = Shmkv.of(base, d, Shmkv.Check.DEEP)) {
			Image di = db.current().delta;
			int maybe = 0;
			for (int i = 80; i < 500; i++) {
				byte[] k = str("key_" + i);
				maybe += di.mayHold(di.hash(k, k.length)) ? 1 : 0;
				assertEquals(i, db.getLong("key_" + i), "key_" + i);
			}
			assertTrue(maybe > 150, maybe + " of 420 keys the delta lacks pass its filter");
			for (int i = 0; i < 80; i++)
				assertEquals(i % 2 == 0 ? -i : i == 1 ? -7 : i, db.getLong("key_" + i, -7));
			readsAsModel(db, be, de, 0);
		}
		// and the default filter rules most keys out
		de.filterWords = 0;
		byte[] d2 = de.delta(de.buckets(), base);
		try (Shmkv db = Shmkv.of(base, d2, Shmkv.Check.DEEP)) {
			Image di = db.current().delta;
			assertEquals(11, di.filterWords, "max(1, ceil(41 / 4)) words");
			int maybe = 0;
			for (int i = 80; i < 500; i++) {
				byte[] k = str("key_" + i);
				maybe += di.mayHold(di.hash(k, k.length)) ? 1 : 0;
			}
			assertTrue(maybe < 50, maybe + " of 420 keys pass a filter of 11 words");
			readsAsModel(db, be, de, 0);
		}
	}

	/** A delta that does not apply is refused before any get with SHMKV_EBASE, naming both checksums. */
	@Test
	void aDeltaThatDoesNotApplyIsRefused() {
		byte[] base = base(), d = delta(base);
		String bsum = Bytes.hex(Encoder.checksum(base));
		Encoder other = new Encoder();
		other.seed = SEED;
		other.add("x", Format.I64, Encoder.i64(1));
		byte[] otherBase = other.build(1);
		ShmkvException.Base e = refused(otherBase, d, "it was made for another image");
		assertTrue(e.getMessage().contains(bsum), "the delta's base checksum: " + e.getMessage());
		assertTrue(e.getMessage().contains(Bytes.hex(Encoder.checksum(otherBase))), "the image's: " + e.getMessage());
		assertEquals(-31215, e.code());
		assertEquals("SHMKV_EBASE", e.codeName());
		assertTrue(e.getMessage().contains("delta does not apply to this image"), e.getMessage());
		// base_size
		Encoder de = deltaRecords();
		refused(base, de.delta(de.buckets(), Encoder.checksum(base), base.length + 4096, 0, 1),
				"it was made for another image");
		// a later delta of a chain: merged first
		e = refused(base, de.delta(de.buckets(), Encoder.checksum(base), base.length, 0x1234_5678_9abc_def0L, 3),
				"it follows delta 123456789abcdef0, as number 3 of its chain");
		assertTrue(e.getMessage().contains(bsum), e.getMessage());
		// another seed, another width
		de.seed = 0;
		refused(base, de.delta(de.buckets(), base), "it hashes keys with seed 0000000000000000 and 64 bits, the image "
				+ "with seed 53484d4b56763121 and 64");
		de.seed = SEED;
		de.hashBits = 32;
		refused(base, de.delta(de.buckets(), base), "and 32 bits, the image with seed 53484d4b56763121 and 64");
		// a delta as the base, a plain image as the delta
		refused(d, d, "the image is itself a delta");
		refused(base, otherBase, "the delta in memory, given as the delta, is a plain image");
	}

	static ShmkvException.Base refused(byte[] base, byte[] delta, String why) {
		ShmkvException.Base e = assertThrows(ShmkvException.Base.class, () -> Shmkv.of(base, delta,
				Shmkv.Check.DEEP), why);
		assertTrue(e.getMessage().contains(why), "want \"" + why + "\", got: " + e.getMessage());
		return e;
	}

	/** Files: open(base, delta), both named in messages; a delta that does not apply leaves nothing open. */
	@Test
	void filesReadThroughADelta(@TempDir Path dir) throws Exception {
		byte[] base = base();
		Path b = dir.resolve("base.shmkv"), d = dir.resolve("delta.shmkv"), other = dir.resolve("other.shmkv");
		Files.write(b, base);
		Files.write(d, delta(base));
		Encoder o = new Encoder();
		o.seed = SEED;
		o.add("x", Format.I64, Encoder.i64(1));
		Files.write(other, o.build(1));
		try (Shmkv db = Shmkv.open(b, d)) {
			assertEquals("new_5", db.getString("key_5"));
			assertNull(db.get("key_9"));
			assertEquals("val_6", db.getString("key_6"));
			assertTrue(db.toString().contains("base.shmkv through " + d), db.toString());
			ShmkvException nf = assertThrows(ShmkvException.NotFound.class, () -> db.getLong("key_9"));
			assertTrue(nf.getMessage().startsWith(b.toString() + ": "), nf.getMessage());
		}
		ShmkvException e = assertThrows(ShmkvException.Base.class, () -> Shmkv.open(other, d));
		assertTrue(e.getMessage().startsWith(other + ": delta does not apply to this image: delta " + d + ": "),
				e.getMessage());
		assertThrows(ShmkvException.Io.class, () -> Shmkv.open(b, dir.resolve("missing")));
	}

	// §19.4's rules broken once: each refused as the format says

	/** The image offset of key's record in img (a delta), and (OUT) of its entry: {record, entry or -1}. */
	static long[] where(byte[] img, byte[] key) {
		try (Shmkv db = Shmkv.of(img, Shmkv.Check.HEADER)) {
			Image im = db.current().image;
			long loc = im.locate(key, key.length);
			assertTrue(loc >= 0, Keys.show(key, key.length) + " is in the image");
			long r = Index.record(loc);
			return new long[] {r, Index.inline(loc) ? -1 : Index.outEntry(im.word(r))};
		}
	}

	static ByteBuffer le(byte[] b) {
		return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
	}

	/** deltaImage() damaged by f and re-summed: opening it at check throws want, its message containing what. */
	static void atOpen(Class<? extends ShmkvException> want, Shmkv.Check check, String what, Consumer<byte[]> f) {
		byte[] d = deltaImage();
		f.accept(d);
		Encoder.resum(d);
		ShmkvException e = assertThrows(ShmkvException.class, () -> Shmkv.of(d, check).close(), what);
		assertInstanceOf(want, e, what + ": " + e);
		assertTrue(e.getMessage().contains(what), "want \"" + what + "\", got: " + e.getMessage());
		FuzzTest.seen(e);
	}

	@Test
	void theHeaderRulesOfADelta() {
		Class<ShmkvException.Corrupt> c = ShmkvException.Corrupt.class;
		Shmkv.Check h = Shmkv.Check.HEADER;
		atOpen(c, h, "the delta layout hash without the DELTA header flag", b -> le(b).putLong(24, 0));
		atOpen(c, h, "unknown header flags 0x8", b -> le(b).putLong(24, 0xC));
		atOpen(c, h, "section_count 3, expected 4 in a delta", b -> le(b).putInt(76, 3));
		atOpen(c, h, "reserved header fields are not zero", b -> le(b).putLong(448 + 8 * 4, 1));
		atOpen(c, h, "reserved header fields are not zero", b -> le(b).putLong(448 + 8 * 6, 1L << 63));
		atOpen(c, h, "delta base_size 0 is not a non-zero multiple of 4096", b -> le(b).putLong(456, 0));
		atOpen(c, h, "delta base_size 12289 is not", b -> le(b).putLong(456, 12289));
		atOpen(c, h, "delta seq 0", b -> le(b).putLong(472, 0));
		atOpen(c, h, "section 3 has kind 5, expected 4 (filter)", b -> le(b).putInt(192 + 96, 5));
		atOpen(c, h, "section filter is 0 bytes", b -> le(b).putLong(192 + 96 + 16, 0));
		atOpen(c, h, "section filter is 12 bytes", b -> le(b).putLong(192 + 96 + 16, 12));
		atOpen(c, h, "section filter offset", b -> le(b).putLong(192 + 96 + 8, le(b).getLong(192 + 96 + 8) + 8));
		atOpen(c, h, "section filter [", b -> le(b).putLong(192 + 96 + 16, 1L << 40));
		atOpen(c, h, "unused section slot 4 is not zero", b -> le(b).putInt(192 + 128, 4));
		atOpen(ShmkvException.Layout.class, h, "this reader's is 5a240d8d9e73bf24 (format 2; 011183097a055ca3 for a "
				+ "delta image)", b -> le(b).putLong(16, 0x011183097a055ca4L));
		// checks 11 and 12 cover the filter
		atOpen(c, Shmkv.Check.CHECKSUMS, "outside every section", b -> b[b.length - 1] = 1);
		byte[] d = deltaImage();
		int filter = (int) le(d).getLong(192 + 96 + 8);
		d[filter] ^= 1; // not re-summed
		ShmkvException e = assertThrows(ShmkvException.Checksum.class, () -> Shmkv.of(d, Shmkv.Check.CHECKSUMS));
		assertTrue(e.getMessage().contains("section filter"), e.getMessage());
		Shmkv.of(d, Shmkv.Check.HEADER).close();
		// a plain image: no DELTA flag, no fourth section, no reserved words
		byte[] p = base();
		for (Consumer<byte[]> f : List.<Consumer<byte[]>>of(b -> le(b).putLong(24, 4), b -> le(b).putInt(76, 4),
				b -> le(b).putLong(448, 1), b -> le(b).putLong(472, 1))) {
			byte[] x = p.clone();
			f.accept(x);
			Encoder.resum(x);
			assertThrows(ShmkvException.Corrupt.class, () -> Shmkv.of(x, Shmkv.Check.HEADER));
		}
	}

	/** A lookup in a delta (§19.4): a record of another kind with the TOMB bit, a tombstone's value or entry, is Corrupt. */
	@Test
	void theLookupRulesOfADelta() {
		byte[] d0 = deltaImage();
		int inl = (int) where(d0, str("gone-inline"))[0];
		long[] out = where(d0, str("gone-outer"));
		long[] up = where(d0, str("long-string")); // an OUT upsert
		for (int kind : new int[] {0x11, 0x18, 0x30, 0x50, 0x90 | 0x40, 0x91, 0xB0}) {
			byte[] d = d0.clone();
			d[inl] = (byte) kind;
			lookupCorrupt(d, "gone-inline", "malformed");
		}
		byte[] d = d0.clone();
		d[inl + 2] = 1; // value_len 1
		lookupCorrupt(d, "gone-inline", "an inline tombstone with value_len 1");
		d = d0.clone();
		d[(int) out[1]] = Format.I64; // the OUT tombstone's entry of type i64
		lookupCorrupt(d, "gone-outer", "the entry of an OUT tombstone has type 3");
		d = d0.clone();
		le(d).putInt((int) out[1] + 4, 8); // its value_len
		lookupCorrupt(d, "gone-outer", "value_len 8");
		d = d0.clone();
		d[(int) out[0]] = (byte) Format.K_OUT; // an OUT upsert whose entry is a tombstone's
		lookupCorrupt(d, "gone-outer", "unknown value type 0");
		d = d0.clone();
		d[(int) up[1]] = 0; // an upsert's entry made type 0
		lookupCorrupt(d, "long-string", "unknown value type 0");
		// a TOMB record in a plain image
		byte[] p = base();
		ShmkvException e;
		try (Shmkv db = Shmkv.of(p, Shmkv.Check.HEADER)) {
			long r = Index.record(db.current().image.locate(str("key_3"), 5));
			p[(int) r] = Format.INLINE_TOMB;
		}
		Encoder.resum(p);
		try (Shmkv db = Shmkv.of(p, Shmkv.Check.HEADER)) {
			e = assertThrows(ShmkvException.Corrupt.class, () -> db.get("key_3"));
		}
		assertTrue(e.getMessage().contains("unknown kind bits 0x10"), e.getMessage());
	}

	/** d's get of key, and its get through the base, are Corrupt with what; a deep open refuses it too. */
	static void lookupCorrupt(byte[] d, String key, String what) {
		Encoder.resum(d);
		try (Shmkv db = Shmkv.of(d, Shmkv.Check.HEADER)) {
			ShmkvException e = assertThrows(ShmkvException.Corrupt.class, () -> db.get(key), what);
			assertTrue(e.getMessage().contains(what), "want \"" + what + "\", got: " + e.getMessage());
			FuzzTest.seen(e);
			assertThrows(ShmkvException.Corrupt.class, () -> db.getAll(str(key)));
			assertThrows(ShmkvException.Corrupt.class, () -> {
				for (Value v : db.allRecords())
					v.key();
			});
		}
		try (Shmkv db = Shmkv.of(base(), d, Shmkv.Check.HEADER)) {
			assertThrows(ShmkvException.Corrupt.class, () -> db.get(key), what + " through");
		}
		assertThrows(ShmkvException.Corrupt.class, () -> Shmkv.of(d, Shmkv.Check.DEEP), what + ": verify");
	}

	/** Verify of a delta (§19.4): tombstones as §19.2 says, every key's filter bits, entry_count, type-0 entries. */
	@Test
	void verifyChecksTheDeltaRules() {
		byte[] d0 = deltaImage();
		long[] out = where(d0, str("gone-outer"));
		atDeep(d0, "a tombstone's entry with flags 0x1", d -> d[(int) out[1] + 1] = 1);
		atDeep(d0, "non-zero padding byte", d -> d[(int) out[1] + 8 + 10 + 1] = 1); // after "gone-outer"
		atDeep(d0, "the index holds 29 records, the header's entry_count is 23", d -> le(d).putLong(40, 23));
		// the OUT tombstone of the empty key
		Encoder e = deltaRecords();
		e.recs.removeIf(r -> r.key().length == 0);
		e.tomb(new byte[0], true);
		atDeep(displaced(e, base()), "key_len 0", d -> {});
		// a key whose filter bits are not set
		Encoder f = deltaRecords();
		f.filterWords = 64;
		f.filterOmit = str("key_9");
		atDeep(displaced(f, base()), "its key's filter bits are not all set", d -> {});
		// an entry of type 0 that no OUT tombstone names
		Encoder g = deltaRecords();
		ByteBuffer tail = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
		tail.put((byte) 0).put((byte) 0).putShort((short) 6).putInt(0).put(str("orphan"));
		g.entriesTail = tail.array();
		atDeep(displaced(g, base()), "no OUT record of its key points at it", d -> {});
		// an inline tombstone with an expiry flag, and a tombstone in a plain image, are malformed records
		atDeep(d0, "malformed", d -> d[(int) where(d0, str("gone-inline"))[0]] |= Format.K_EXPIRES);
		// the delta itself, unchanged, verifies
		try (Shmkv db = Shmkv.of(d0, Shmkv.Check.DEEP)) {
			db.verify();
		}
	}

	static void atDeep(byte[] img, String what, Consumer<byte[]> f) {
		byte[] d = img.clone();
		f.accept(d);
		Encoder.resum(d);
		ShmkvException e = assertThrows(ShmkvException.Corrupt.class, () -> Shmkv.of(d, Shmkv.Check.DEEP), what);
		assertTrue(e.getMessage().contains(what), "want \"" + what + "\", got: " + e.getMessage());
		FuzzTest.seen(e);
		try (Shmkv db = Shmkv.of(d, Shmkv.Check.HEADER)) {
			assertThrows(ShmkvException.Corrupt.class, db::verify, what);
		}
	}

	/** getInto, getLong, getDouble and getBoolean allocate nothing through a delta, as without. */
	@Test
	void primitiveGetsThroughADeltaAllocateNothing() throws Exception {
		// com.sun.management.ThreadMXBean, by reflection: the tests compile as part of the module
		// org.shmkv, which does not read java.management (they run on the class path, which does)
		Object mx = Class.forName("java.lang.management.ManagementFactory").getMethod("getThreadMXBean").invoke(null);
		java.lang.reflect.Method allocated = Class.forName("com.sun.management.ThreadMXBean")
				.getMethod("getCurrentThreadAllocatedBytes");
		byte[] base = base();
		try (Shmkv db = Shmkv.of(base, delta(base), Shmkv.Check.HEADER)) {
			db.setClock(E - 1);
			byte[] dst = new byte[32];
			String[] keys = new String[64];
			for (int i = 0; i < keys.length; i++)
				keys[i] = "key_" + (i * 31 % 2000);
			long sink = 0;
			for (int round = 0; round < 3; round++) {
				long before = (Long) allocated.invoke(mx);
				for (int i = 0; i < 100_000; i++) {
					sink += db.getInto(keys[i & 63], dst);
					sink += db.getLong("new-key") + db.getLong("key_7") + db.getLong("i64", 0);
				}
				long bytes = (Long) allocated.invoke(mx) - before;
				if (round == 2)
					assertTrue(bytes < 100_000, bytes + " bytes for 400,000 gets");
			}
			assertTrue(sink != 0);
		}
	}
}
