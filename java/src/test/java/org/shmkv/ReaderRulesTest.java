package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The three rules every reader follows (FORMAT.md): a string value that is
 * not UTF-8 is Corrupt at every get that returns it; a batch answers every
 * key as its single get would, throwing the first failing key's error with
 * every key's answer; the iteration yields the live entries against the
 * clock read once, and allRecords every record with its expiry.
 */
class ReaderRulesTest {
	static final long E = 1_800_000_000L;

	/** An image whose string "bad" (inline) and "bad-out" (OUT) hold 0xff, and whose strlist's second string does. */
	static byte[] damagedStrings() {
		Encoder enc = new Encoder();
		enc.add("good", Format.STRING, Encoder.str("fine"));
		enc.add(Encoder.str("bad"), Format.STRING, new byte[] {'a', (byte) 0xff, 'b'}, 0, false);
		enc.add(Encoder.str("bad-out"), Format.STRING, new byte[] {(byte) 0xc0, (byte) 0x80}, 0, true);
		enc.add(Encoder.str("surrogate"), Format.STRING, new byte[] {(byte) 0xed, (byte) 0xa0, (byte) 0x80}, 0, false);
		enc.add(Encoder.str("raw"), Format.BYTES, new byte[] {(byte) 0xff}, 0, false);
		enc.add("list", Format.STRLIST, Encoder.strlist("ok", "x", "fine"));
		byte[] img = enc.build(4);
		// the strlist's "x" made 0xff: find its bytes after the "ok\0"
		for (int i = 4096; i < img.length - 4; i++)
			if (img[i] == 'o' && img[i + 1] == 'k' && img[i + 2] == 0 && img[i + 3] == 'x') {
				img[i + 3] = (byte) 0xff;
				break;
			}
		return Encoder.resum(img);
	}

	@Test
	void aStringThatIsNotUtf8IsCorruptAtEveryGet() {
		try (Shmkv db = Shmkv.of(damagedStrings(), Shmkv.Check.CHECKSUMS)) {
			assertEquals("fine", db.getString("good"));
			assertArrayEquals(new byte[] {(byte) 0xff}, db.getBytes("raw"), "bytes need not be UTF-8");
			for (String k : new String[] {"bad", "bad-out", "surrogate"}) {
				assertCorrupt(() -> db.get(k), k);
				assertCorrupt(() -> db.getString(k), k);
				assertCorrupt(() -> db.getString(Encoder.str(k)), k);
				assertCorrupt(() -> db.getInto(k, new byte[16]), k);
				assertCorrupt(() -> db.getByteBuffer(k), k);
				assertCorrupt(() -> db.getAll(Encoder.str(k)), k);
				try (Snapshot s = db.snapshot()) {
					assertCorrupt(() -> s.get(k), k);
				}
			}
			StringList l = db.getStringList("list");
			assertEquals("ok", l.get(0));
			assertCorrupt(() -> l.get(1), "a strlist's string, when read");
			assertEquals("fine", l.get(2));
			assertCorrupt(() -> db.getStrings("list"), "a strlist decoded whole");
			assertCorrupt(() -> {
				for (Value v : db)
					v.key();
			}, "the iteration");
			assertCorrupt(db::verify, "verify");
		}
	}

	static void assertCorrupt(Runnable r, String what) {
		ShmkvException e = assertThrows(ShmkvException.Corrupt.class, r::run, what);
		assertTrue(e.getMessage().contains("UTF-8"), what + ": " + e.getMessage());
	}

	@Test
	void aBatchAnswersEveryKeyAsItsSingleGet() {
		byte[] tooLong = new byte[Format.MAX_KEY_LEN + 1];
		byte[][] keys = {Encoder.str("good"), Encoder.str("bad"), Encoder.str("missing"), Encoder.str("raw"), tooLong,
				Encoder.str("bad-out")};
		try (Shmkv db = Shmkv.of(damagedStrings(), Shmkv.Check.CHECKSUMS)) {
			ShmkvException e = assertThrows(ShmkvException.Corrupt.class, () -> db.getAll(keys));
			assertTrue(e.getMessage().startsWith("an image in memory: key \"bad\" (index 1 of the batch): image "
					+ "structure is corrupt: "), e.getMessage());
			Value[] r = e.results();
			assertEquals(keys.length, r.length);
			assertEquals("fine", r[0].asString());
			assertNull(r[1], "a failed key's answer is null");
			assertNull(r[2], "a missing key is null, not an error");
			assertArrayEquals(new byte[] {(byte) 0xff}, r[3].toBytes());
			assertNull(r[4]);
			assertNull(r[5]);
			Map<Integer, ShmkvException> errors = e.errors();
			assertEquals(List.of(1, 4, 5), new ArrayList<>(new java.util.TreeSet<>(errors.keySet())));
			assertSame(e, errors.get(1), "the exception thrown is the first failing key's");
			assertInstanceOf(ShmkvException.KeyLength.class, errors.get(4));
			assertInstanceOf(ShmkvException.Corrupt.class, errors.get(5));
			// each key's error is its single get's
			for (int i : errors.keySet())
				assertEquals(errors.get(i).codeName(), assertThrows(ShmkvException.class, () -> db.get(keys[i])).codeName());
			// the List form throws the same
			assertThrows(ShmkvException.Corrupt.class, () -> db.getAll(List.of("good", "bad")));
			assertEquals(2, db.getAll(List.of("good", "missing")).size(), "no failure: no exception");
			assertNull(new ShmkvException.Corrupt(null, "x").results(), "not from a batch: no results");
			assertTrue(new ShmkvException.Corrupt(null, "x").errors().isEmpty());
		}
	}

	/** A few keys, two of them expiring at E, one at E + 10. */
	static byte[] expiring() {
		Encoder enc = new Encoder();
		enc.add("always", Format.STRING, Encoder.str("a"));
		enc.add(Encoder.str("at-e"), Format.I64, Encoder.i64(1), E, false);
		enc.add(Encoder.str("at-e-out"), Format.STRING, Encoder.str("o".repeat(80)), E, true);
		enc.add(Encoder.str("later"), Format.STRING, Encoder.str("l"), E + 10, false);
		return enc.build(2);
	}

	static List<String> keys(Iterable<Value> it) {
		List<String> out = new ArrayList<>();
		for (Value v : it)
			out.add(new String(v.key(), java.nio.charset.StandardCharsets.UTF_8));
		java.util.Collections.sort(out);
		return out;
	}

	@Test
	void theIterationYieldsLiveEntriesAgainstOneClockRead() {
		AtomicInteger reads = new AtomicInteger();
		try (Shmkv db = Shmkv.of(expiring(), Shmkv.Check.DEEP)) {
			long[] now = {E - 1};
			db.clock = () -> {
				reads.incrementAndGet();
				return now[0];
			};
			assertEquals(List.of("always", "at-e", "at-e-out", "later"), keys(db));
			assertEquals(1, reads.get(), "the iteration reads the clock once, when it starts");
			now[0] = E;
			assertEquals(List.of("always", "later"), keys(db), "expired at their second");
			now[0] = E + 10;
			java.util.Iterator<Value> it = db.iterator();
			now[0] = 0; // a clock moved back after the start changes nothing
			List<String> seen = new ArrayList<>();
			it.forEachRemaining(v -> seen.add(new String(v.key(), java.nio.charset.StandardCharsets.UTF_8)));
			assertEquals(List.of("always"), seen);
			assertEquals(List.of("always", "at-e", "at-e-out", "later"), keys(db.allRecords()),
					"allRecords: every record, expired ones included");
			for (Value v : db.allRecords())
				assertEquals(switch (new String(v.key(), java.nio.charset.StandardCharsets.UTF_8)) {
					case "at-e", "at-e-out" -> E;
					case "later" -> E + 10;
					default -> 0L;
				}, v.expires());
			db.setClock(E + 10);
			assertEquals(1, db.size(), "size(): the live entries, against the pinned clock");
			assertEquals(4, db.recordCount());
			try (Snapshot s = db.snapshot()) {
				assertEquals(List.of("always"), keys(s), "a snapshot takes its cache's clock");
			}
		}
		Encoder plain = new Encoder();
		for (int i = 0; i < 50; i++)
			plain.add("k" + i, Format.I64, Encoder.i64(i));
		try (Shmkv db = Shmkv.of(plain.build(16), Shmkv.Check.DEEP)) {
			db.clock = () -> {
				throw new AssertionError("the clock was read for an image without EXPIRY");
			};
			assertEquals(50, keys(db).size());
			assertEquals(50, db.size());
		}
	}

	@Test
	void expiryFlagClearNeverReadsTheClock() {
		byte[] img = expiring();
		ByteBuffer.wrap(img).order(ByteOrder.LITTLE_ENDIAN).putLong(Format.H_FLAGS, 0);
		Encoder.resum(img);
		try (Shmkv db = Shmkv.of(img, Shmkv.Check.CHECKSUMS)) {
			db.clock = () -> {
				throw new AssertionError("the clock was read");
			};
			db.setClock(0);
			assertEquals(1, db.getLong("at-e"), "no EXPIRY flag: no record expires for a lookup");
			assertEquals(4, keys(db).size());
		}
	}
}
