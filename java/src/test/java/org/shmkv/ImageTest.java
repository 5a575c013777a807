package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * The format (FORMAT.md) on images of the test-only {@link Encoder}:
 * every key by get, typed getters, batch and iteration, displaced keys, OUT
 * records, expiry and its clock reads, and verify's verdict on each rule
 * broken on purpose.
 */
class ImageTest {
	static final long E = 1_800_000_000L; // an expiry

	/** 2,000 key_N -> val_N in few buckets (displaced keys), every type, OUT values, three expiring keys. */
	static Encoder mixed() {
		Encoder enc = new Encoder();
		for (int i = 0; i < 2000; i++)
			enc.add("key_" + i, Format.STRING, Encoder.str("val_" + i));
		enc.add("i64", Format.I64, Encoder.i64(-42));
		enc.add("f64", Format.F64, Encoder.f64(2.5));
		enc.add("bool", Format.BOOL, new byte[] {1});
		enc.add("bytes", Format.BYTES, new byte[] {0, 1, 2, (byte) 255});
		enc.add("floats", Format.F32LIST, Encoder.f32s(1f, 2f, 3f));
		enc.add("long-floats", Format.F32LIST, Encoder.f32s(new float[100])); // OUT: 400 bytes
		enc.add("strs", Format.STRLIST, Encoder.strlist("a", "bc", "déf"));
		enc.add("long-string", Format.STRING, Encoder.str("x".repeat(300)));
		enc.add(Encoder.str("key-empty"), Format.STRING, new byte[0], 0, false);
		enc.add("a-key-longer-than-16", Format.I64, Encoder.i64(17)); // String keys: the per-thread buffer
		enc.add("clé", Format.I64, Encoder.i64(18)); // and the UTF-8 encoding
		enc.add("exactly16chars!!", Format.I64, Encoder.i64(16)); // the longest packed key
		enc.add(new byte[0], Format.BYTES, new byte[] {7}, 0, false); // the empty key
		enc.add(Encoder.str("exp-inline"), Format.I64, Encoder.i64(1), E, false);
		enc.add(Encoder.str("exp-out"), Format.STRING, Encoder.str("gone"), E, true);
		enc.add(Encoder.str("exp-str"), Format.STRING, Encoder.str("soon"), E + 10, false);
		return enc;
	}

	static byte[] mixedImage() {
		return mixed().build(480);
	}

	/**
	 * getInto copies exactly the value's bytes, inline or OUT, of every
	 * length 0-40 (below 8, the 8-16 bytes copied as two words, longer), and
	 * writes nothing past them.
	 */
	@Test
	void getIntoCopiesExactlyTheValue() {
		Encoder enc = new Encoder();
		for (int n = 0; n <= 40; n++)
			for (int out = 0; out < 2; out++) {
				byte[] v = new byte[n];
				for (int i = 0; i < n; i++)
					v[i] = (byte) (31 * n + 7 * i + out + 1);
				enc.add(Encoder.str("v" + n + "/" + out), Format.BYTES, v, 0, out == 1);
			}
		try (Shmkv db = Shmkv.of(enc.build(64), Shmkv.Check.DEEP)) {
			for (int n = 0; n <= 40; n++)
				for (int out = 0; out < 2; out++) {
					byte[] dst = new byte[48];
					java.util.Arrays.fill(dst, (byte) 0x5a);
					String k = "v" + n + "/" + out;
					assertEquals(n, db.getInto(k, dst), k);
					for (int i = 0; i < 48; i++)
						assertEquals(i < n ? (byte) (31 * n + 7 * i + out + 1) : (byte) 0x5a, dst[i], k + " byte " + i);
					byte[] exact = new byte[n];
					assertEquals(n, db.getInto(k, exact), k + " into a buffer of its length");
					assertArrayEquals(db.getBytes(k), exact, k);
				}
		}
	}

	@Test
	void everyKeyReadsBackAndVerifies() {
		byte[] img = mixedImage();
		ByteBuffer bb = ByteBuffer.wrap(img).order(ByteOrder.LITTLE_ENDIAN);
		assertEquals(2, bb.getInt(8));
		assertTrue(bb.getInt(72) > 0, "some keys are displaced (max_probe " + bb.getInt(72) + ")");
		try (Shmkv db = Shmkv.of(img, Shmkv.Check.DEEP)) {
			db.setClock(E - 1);
			db.verify();
			assertEquals(2016, db.size());
			for (int i = 0; i < 2000; i++) {
				assertEquals("val_" + i, db.getString("key_" + i), "key_" + i);
				byte[] dst = new byte[16];
				int n = db.getInto("key_" + i, dst);
				assertEquals("val_" + i, new String(dst, 0, n, StandardCharsets.US_ASCII));
			}
			assertNull(db.get("key_2000"));
			assertNull(db.get("nope"));
			assertEquals(-42, db.getLong("i64"));
			assertEquals(17, db.getLong("a-key-longer-than-16"));
			assertEquals(18, db.getLong("clé"));
			assertEquals(16, db.getLong("exactly16chars!!"));
			assertNull(db.get("exactly16chars!?"));
			assertNull(db.get("cle"));
			assertEquals(2.5, db.getDouble("f64"));
			assertTrue(db.getBoolean("bool"));
			assertArrayEquals(new byte[] {0, 1, 2, (byte) 255}, db.getBytes("bytes"));
			assertArrayEquals(new float[] {1f, 2f, 3f}, db.getFloatList("floats").toArray());
			assertEquals(100, db.getFloatList("long-floats").size());
			assertEquals(List.of("a", "bc", "déf"), db.getStrings("strs"));
			assertEquals("x".repeat(300), db.getString("long-string"));
			assertEquals("", db.getString("key-empty"));
			assertArrayEquals(new byte[] {7}, db.getBytes(new byte[0]));
			assertThrows(ShmkvException.Type.class, () -> db.getLong("f64"));
			assertThrows(ShmkvException.NotFound.class, () -> db.getLong("nope"));
			assertEquals(1, db.getLong("exp-inline"));
			assertEquals("gone", db.getString("exp-out"));
			assertEquals(E, db.get("exp-out").expires());
			assertEquals(0, db.get("key_1").expires());
			assertFalse(db.get("long-string").isShared());
			// iteration: every record once, expiry shown
			Map<String, Long> seen = new HashMap<>();
			for (Value v : db)
				assertNull(seen.put(new String(v.key(), java.nio.charset.StandardCharsets.UTF_8), v.expires()));
			assertEquals(2016, seen.size());
			assertEquals(E, seen.get("exp-inline"));
			assertEquals(E + 10, seen.get("exp-str"));
			assertEquals(0L, seen.get("key_7"));
			// batch
			Value[] b = db.getAll(Encoder.str("key_5"), Encoder.str("nope"), Encoder.str("i64"));
			assertEquals("val_5", b[0].asString());
			assertNull(b[1]);
			assertEquals(-42, b[2].asLong());
		}
	}

	/**
	 * Lookups that land on empty buckets, on buckets of every count 1-16 and
	 * on full directory words: every key found, every other key missing.
	 */
	@Test
	void everyBucketCountHitsAndMisses() {
		for (int buckets : new int[] {1, 2, 8, 64, 4096}) {
			Encoder enc = new Encoder();
			int keys = Math.min(buckets * 6, 2000);
			for (int i = 0; i < keys; i++)
				enc.add("k" + i, Format.STRING, Encoder.str("v" + i));
			try (Shmkv db = Shmkv.of(enc.build(buckets), Shmkv.Check.DEEP)) {
				for (int i = 0; i < keys; i++)
					assertEquals("v" + i, db.getString("k" + i), "k" + i + " of " + buckets + " buckets");
				for (int i = keys; i < keys + 5000; i++)
					assertNull(db.get("k" + i), "k" + i + " of " + buckets + " buckets");
			}
		}
	}

	@Test
	void expiredKeysAreAbsentAtAndAfterTheirSecond() {
		try (Shmkv db = Shmkv.of(mixedImage(), Shmkv.Check.DEEP)) {
			db.setClock(E - 1);
			assertNotNull(db.get("exp-inline"));
			assertNotNull(db.get("exp-out"));
			db.setClock(E);
			assertNull(db.get("exp-inline"));
			assertNull(db.get("exp-out"));
			assertThrows(ShmkvException.NotFound.class, () -> db.getLong("exp-inline"));
			assertEquals(-1, db.getInto("exp-out", new byte[8]));
			assertEquals("soon", db.getString("exp-str"));
			assertNull(db.getAll(Encoder.str("exp-inline"))[0]);
			try (Snapshot s = db.snapshot()) {
				assertNull(s.get("exp-out"), "a snapshot takes its cache's clock");
			}
			db.setClock(E + 10);
			assertNull(db.get("exp-str"));
			long n = 0, all = 0;
			for (Value v : db)
				n++;
			for (Value v : db.allRecords())
				all += v.expires() >= E ? 1 : 0;
			assertEquals(2013, n, "the iteration leaves the 3 expired records out");
			assertEquals(2013, db.size());
			assertEquals(2016, db.recordCount());
			assertEquals(3, all, "allRecords lists them, with their expiry");
			db.verify();
		}
	}

	@Test
	void theClockIsReadOnlyForExpiringRecordsOncePerCall() {
		AtomicInteger reads = new AtomicInteger();
		try (Shmkv db = Shmkv.of(mixedImage(), Shmkv.Check.HEADER)) {
			db.clock = () -> {
				reads.incrementAndGet();
				return E - 1;
			};
			db.get("key_1");
			db.getString("key_2");
			assertEquals(0, reads.get(), "a record without expiry reads no clock");
			db.get("exp-inline");
			assertEquals(1, reads.get());
			db.getAll(Encoder.str("exp-inline"), Encoder.str("exp-out"), Encoder.str("exp-str"));
			assertEquals(2, reads.get(), "a batch reads the clock once");
		}
		Encoder plain = new Encoder();
		for (int i = 0; i < 100; i++)
			plain.add("key_" + i, Format.STRING, Encoder.str("val_" + i));
		try (Shmkv db = Shmkv.of(plain.build(40), Shmkv.Check.DEEP)) {
			db.clock = () -> {
				throw new AssertionError("the clock was read for an image without EXPIRY");
			};
			for (int i = 0; i < 100; i++)
				assertEquals("val_" + i, db.getString("key_" + i));
		}
	}

	@Test
	void otherLayoutsAreRefused() {
		byte[] img = mixedImage();
		ByteBuffer bb = ByteBuffer.wrap(img).order(ByteOrder.LITTLE_ENDIAN);
		bb.putLong(16, 0xfba82e8976eb9578L); // the preview's layout hash
		Encoder.resum(img);
		ShmkvException e = assertThrows(ShmkvException.Layout.class, () -> Shmkv.of(img, Shmkv.Check.HEADER));
		assertTrue(e.getMessage().contains("fba82e8976eb9578, this reader's is 5a240d8d9e73bf24"), e.getMessage());
		byte[] b3 = mixedImage();
		ByteBuffer.wrap(b3).order(ByteOrder.LITTLE_ENDIAN).putLong(16, 0xae51b4e761553183L); // the 3-byte directory's
		Encoder.resum(b3);
		e = assertThrows(ShmkvException.Layout.class, () -> Shmkv.of(b3, Shmkv.Check.HEADER));
		assertTrue(e.getMessage().contains("this reader's is 5a240d8d9e73bf24"), e.getMessage());
		byte[] b2 = mixedImage();
		ByteBuffer.wrap(b2).order(ByteOrder.LITTLE_ENDIAN).putInt(56, 8);
		Encoder.resum(b2);
		e = assertThrows(ShmkvException.Corrupt.class, () -> Shmkv.of(b2, Shmkv.Check.HEADER));
		assertTrue(e.getMessage().contains("bucket_slots 8, expected 128"), e.getMessage());
	}

	/** The first bucket of img holding at least min records: its image offset. */
	static int bucketWith(byte[] img, int min) {
		ByteBuffer bb = ByteBuffer.wrap(img).order(ByteOrder.LITTLE_ENDIAN);
		long off = bb.getLong(192 + 8), n = bb.getLong(48);
		for (int b = 0; b < n; b++)
			if ((img[(int) off + 128 * b] & 0xFF) >= min)
				return (int) off + 128 * b;
		throw new AssertionError("no bucket with " + min + " records");
	}

	/** Record i's offset in the bucket at image offset bk: dir[i] & 0x7f. */
	static int off(byte[] img, int bk, int i) {
		return img[bk + 8 + 2 * i] & 0x7F;
	}

	/** Sets record i's offset (dir[i]'s bits 0..6), its tag bits kept. */
	static void setOff(byte[] img, int bk, int i, int off) {
		assertTrue(off >= 0 && off < 128, "offset " + off);
		img[bk + 8 + 2 * i] = (byte) (img[bk + 8 + 2 * i] & 0x80 | off);
	}

	/** An image damaged by f and re-summed: a deep open refuses it with Corrupt naming what; lookups stay checked. */
	static void refused(String what, Consumer<byte[]> f) {
		byte[] img = mixedImage();
		f.accept(img);
		Encoder.resum(img);
		ShmkvException e = assertThrows(ShmkvException.class, () -> Shmkv.of(img, Shmkv.Check.DEEP), what);
		assertInstanceOf(ShmkvException.Corrupt.class, e, what + ": " + e);
		assertTrue(e.getMessage().contains(what), "want \"" + what + "\", got: " + e.getMessage());
		FuzzTest.seen(e);
		try (Shmkv db = Shmkv.of(img, Shmkv.Check.HEADER)) {
			for (int i = 0; i < 2000; i++) {
				try {
					db.get("key_" + i);
				} catch (ShmkvException x) {
					FuzzTest.seen(x);
				}
			}
		}
	}

	@Test
	void verifyChecksEveryRuleOfLayoutB() {
		refused("at most 16 fit", b -> b[bucketWith(b, 1)] = 17);
		// dir[i] = (tag << 7 | off) & 0xffff: off is the low 7 bits of dir[i]'s
		// low byte at +8+2i, the tag bits the byte's bit 7 and the byte above
		refused("starts inside the directory", b -> {
			int bk = bucketWith(b, 2);
			int n = b[bk];
			setOff(b, bk, 0, 8 + 2 * n - 1);
		});
		refused("offsets not in ascending order", b -> {
			int bk = bucketWith(b, 2);
			setOff(b, bk, 1, off(b, bk, 0));
		});
		refused("record area before record", b -> { // a gap: the second record one byte later, its old first byte left
			int bk = bucketWith(b, 3);
			int off1 = off(b, bk, 1);
			setOff(b, bk, 1, off1 + 1);
			System.arraycopy(b, bk + off1, b, bk + off1 + 1, 127 - off1);
			b[bk + off1] = 1;
		});
		refused("after its records", b -> b[bucketWith(b, 1) + 127] = 1);
		refused("exceeds max_probe", b -> b[bucketWith(b, 1) + 1] = (byte) 200);
		refused("filter bits without displaced keys", b -> {
			ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
			long off = bb.getLong(192 + 8);
			for (int k = 0; ; k++)
				if (b[(int) off + 128 * k + 1] == 0) {
					b[(int) off + 128 * k + 2] = 1;
					return;
				}
		});
		refused("directory tag bits", b -> b[bucketWith(b, 1) + 9] ^= 0x40); // tag bit 7
		refused("(low 9 bits", b -> b[bucketWith(b, 1) + 8] ^= (byte) 0x80); // tag bit 0, the offset kept
		refused("malformed", b -> { // reserved kind bits
			int bk = bucketWith(b, 1);
			b[bk + off(b, bk, 0)] |= 0x10;
		});
		refused("records expire, but the header's expiry flag is clear", b -> b[24] = 0);
		refused("index holds", b -> b[40]++);
		refused("longest probe", b -> b[72]++);
	}

	static int tag(byte[] key) {
		return Index.tag(Xxh3.SEED0.hashBytesToLong(key));
	}

	/**
	 * Amendment 1: the directory keeps only a tag's low 9 bits, so two keys
	 * of one bucket whose tags differ above them are both candidates for
	 * either key; the key compare tells them apart, and a third key of the
	 * same low 9 bits is absent. Twelve records in one bucket, the pair at
	 * 0-1, 5-6 and 10-11: in the first, second and third word the scan
	 * compares.
	 */
	@Test
	void keysWhoseTagsShareTheLow9BitsAreToldApartByTheKey() {
		// two-letter keys: the first three found with equal low 9 bits, full tags all different
		Map<Integer, List<byte[]>> byLow = new HashMap<>();
		List<byte[]> same = null;
		for (int i = 0; same == null && i < 26 * 26; i++) {
			byte[] k = {(byte) ('a' + i / 26), (byte) ('a' + i % 26)};
			List<byte[]> l = byLow.computeIfAbsent(tag(k) & 0x1ff, x -> new java.util.ArrayList<>());
			if (l.stream().noneMatch(o -> tag(o) == tag(k)))
				l.add(k);
			if (l.size() == 3)
				same = l;
		}
		assertNotNull(same, "three two-letter keys whose tags share the low 9 bits");
		byte[] a = same.get(0), b = same.get(1), absent = same.get(2);
		int low = tag(a) & 0x1ff;
		assertNotEquals(tag(a), tag(b));
		assertEquals(low, tag(b) & 0x1ff);
		for (int fillers = 0; fillers <= 10; fillers += 5) {
			Encoder enc = new Encoder();
			// fillers: keys of 3 bytes that sort before the pair's (smaller
			// records go first; equal ones in key order) or after it
			for (int f = 0; f < 10; f++) {
				byte[] k = {(byte) (f < fillers ? '0' : '~'), (byte) ('a' + f), 'z'};
				enc.add(k, Format.BYTES, new byte[0], 0, false);
			}
			enc.add(a, Format.BYTES, new byte[] {1}, 0, false);
			enc.add(b, Format.BYTES, new byte[] {2}, 0, false);
			byte[] img = enc.build(1);
			int bk = 4096, n = img[bk];
			assertEquals(12, n, "all in the one bucket");
			int candidates = 0;
			for (int i = 0; i < n; i++)
				if ((ByteBuffer.wrap(img).order(ByteOrder.LITTLE_ENDIAN).getShort(bk + 8 + 2 * i) & 0xff80) == low << 7)
					candidates++;
			assertTrue(candidates >= 2, "both keys are candidates for either: " + candidates);
			try (Shmkv db = Shmkv.of(img, Shmkv.Check.DEEP)) {
				db.verify();
				assertArrayEquals(new byte[] {1}, db.getBytes(a));
				assertArrayEquals(new byte[] {2}, db.getBytes(b));
				assertNull(db.get(absent), "a key of the same low 9 bits, not in the image");
				Value[] got = db.getAll(b, absent, a);
				assertArrayEquals(new byte[] {2}, got[0].toBytes());
				assertNull(got[1]);
				assertArrayEquals(new byte[] {1}, got[2].toBytes());
			}
		}
	}

	@Test
	void expiryZeroAndOutRecordRules() {
		Encoder enc = new Encoder();
		enc.add(Encoder.str("a"), Format.I64, Encoder.i64(5), 77, false);
		enc.add(Encoder.str("b"), Format.STRING, Encoder.str("out"), 0, true);
		byte[] img = enc.build(1);
		int bk = 4096, n = img[bk];
		assertEquals(2, n);
		try (Shmkv db = Shmkv.of(img, Shmkv.Check.DEEP)) {
			db.setClock(1);
			assertEquals(5, db.getLong("a"));
			assertEquals("out", db.getString("b"));
		}
		for (int i = 0; i < n; i++) {
			int r = bk + off(img, bk, i);
			byte[] d = img.clone();
			if ((d[r] & 0x80) != 0) {
				d[r] |= 3; // OUT with type bits
				Encoder.resum(d);
				ShmkvException e = assertThrows(ShmkvException.Corrupt.class, () -> Shmkv.of(d, Shmkv.Check.HEADER).getString("b"));
				assertTrue(e.getMessage().contains("malformed"), e.getMessage());
				byte[] d2 = img.clone();
				d2[r + 1] = (byte) 0xF0; // the entry outside ENTRIES
				Encoder.resum(d2);
				e = assertThrows(ShmkvException.Corrupt.class, () -> Shmkv.of(d2, Shmkv.Check.HEADER).getString("b"));
				assertTrue(e.getMessage().contains("outside the entries section"), e.getMessage());
			} else {
				ByteBuffer.wrap(d).order(ByteOrder.LITTLE_ENDIAN).putInt(r + 3, 0);
				Encoder.resum(d);
				ShmkvException e = assertThrows(ShmkvException.Corrupt.class, () -> Shmkv.of(d, Shmkv.Check.DEEP));
				assertTrue(e.getMessage().contains("expiry 0"), e.getMessage());
				byte[] d2 = img.clone();
				d2[r + 2] = (byte) 120; // value past the bucket's end
				Encoder.resum(d2);
				e = assertThrows(ShmkvException.Corrupt.class, () -> Shmkv.of(d2, Shmkv.Check.HEADER).getLong("a"));
				assertTrue(e.getMessage().contains("past the bucket's end"), e.getMessage());
			}
		}
	}
}
