package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shared conformance vectors (tests/vectors/README.md, manifest version
 * 2, or 3 with delta images): open and verify verdicts (a format 1 image
 * refused as retired, naming the command that converts it), every record by
 * both iterations (the default one leaves expired records out, and a
 * delta's tombstones) and by get, the listed lookups with their values, and
 * the listed batches, each key answered as its single get. A vector whose
 * image is a delta (manifest 3) may say how its base reads through it
 * ({@code "delta"}: the base's file, the verdict of reading it through the
 * delta, and then its entries, gets and batches).
 */
class VectorsTest {
	static final Path DIR = Path.of(System.getProperty("shmkv.vectors", "../tests/vectors"));
	static final HexFormat HEX = HexFormat.of();

	/** The manifests this test reads: 2, and 3 (2 and a vector's "delta"). */
	static final List<Integer> VERSIONS = List.of(2, 3);

	/** The manifest in dir; one of another format or version is refused, not misread. */
	static JsonNode manifest(Path dir) throws Exception {
		JsonNode m = new ObjectMapper().readTree(Files.readAllBytes(dir.resolve("manifest.json")));
		assertEquals("shmkv-conformance-vectors", m.path("format").asText(), "the manifest's format: not one this test reads");
		int version = m.path("manifest_version").asInt();
		assertTrue(VERSIONS.contains(version), "the manifest's version " + version + ": this test reads " + VERSIONS);
		assertEquals(Format.VERSION, m.path("image_format_version").asInt(), "the images' format version");
		for (JsonNode v : m.get("vectors"))
			assertTrue(version >= 3 || !v.has("delta"), v.path("name").asText() + ": a delta in a manifest 2");
		return m;
	}

	static JsonNode manifest() throws Exception {
		return manifest(DIR);
	}

	/** "OK", or the error class r throws. */
	static String verdict(Runnable r) {
		try {
			r.run();
			return "OK";
		} catch (ShmkvException e) {
			return e.codeName();
		}
	}

	@TestFactory
	Stream<DynamicTest> vectors() throws Exception {
		List<DynamicTest> out = new ArrayList<>();
		int retired = 0;
		for (JsonNode v : manifest().get("vectors")) {
			int format = v.get("format").asInt();
			assertTrue(format == 1 || format == 2, v.get("name").asText() + ": format " + format);
			retired += format == 1 ? 1 : 0;
			out.add(DynamicTest.dynamicTest(v.get("file").asText(), () -> check(DIR, v)));
		}
		assertTrue(out.size() - retired >= 50, "the manifest lists " + (out.size() - retired) + " format 2 vectors");
		assertTrue(retired >= 5, "the manifest lists " + retired + " format 1 refusal cases");
		return out.stream();
	}

	/**
	 * Manifest 3 on images other than the shared vectors': a base,
	 * a delta of it and a delta made for another image, written by the
	 * test-only Encoder with a manifest whose verdicts and contents come
	 * from the records the Encoder was given (the order of entries is each
	 * image's, as its own iteration gives it, which the vectors of manifest
	 * 2 pin). check() must accept every vector, and refuse it once one
	 * verdict or value is changed.
	 */
	@Test
	void aManifest3WithDeltasIsRead(@TempDir Path dir) throws Exception {
		Encoder be = DeltaTest.baseRecords(), de = DeltaTest.deltaRecords();
		byte[] base = be.build(be.buckets()), delta = DeltaTest.displaced(de, base);
		Encoder other = new Encoder();
		other.seed = DeltaTest.SEED;
		other.add("x", Format.I64, Encoder.i64(1));
		byte[] otherBase = other.build(1);
		Files.write(dir.resolve("base.img"), base);
		Files.write(dir.resolve("delta.img"), delta);
		Files.write(dir.resolve("other.img"), otherBase);
		ObjectMapper om = new ObjectMapper();
		ObjectNode m = om.createObjectNode().put("format", "shmkv-conformance-vectors").put("manifest_version", 3)
				.put("image_format_version", 2);
		ArrayNode vs = m.putArray("vectors");
		vs.add(vector(om, "base", base, be.recs));
		ObjectNode dv = vector(om, "delta", delta, de.recs);
		// the base through it: the delta's upserts in its order, then the base's records it does not hold
		Map<String, Encoder.Rec> all = DeltaTest.model(be, de, 0);
		List<Encoder.Rec> through = new ArrayList<>();
		for (byte[] k : order(delta))
			if (all.containsKey(HEX.formatHex(k)))
				through.add(all.remove(HEX.formatHex(k)));
		for (byte[] k : order(base))
			if (all.containsKey(HEX.formatHex(k)))
				through.add(all.remove(HEX.formatHex(k)));
		assertEquals(Map.of(), all);
		ObjectNode stack = dv.putObject("delta").put("base", "base.img").put("stack", "OK");
		stack.set("entries", entriesOf(om, through));
		ArrayNode gets = stack.putArray("gets");
		gets.addObject().put("key_hex", HEX.formatHex(Encoder.str("key_9"))).put("result", "SHMKV_ENOTFOUND");
		gets.addObject().put("key_hex", HEX.formatHex(Encoder.str("key_5"))).put("result", "OK").put("value", "new_5");
		gets.addObject().put("key_hex", HEX.formatHex(Encoder.str("key_6"))).put("result", "OK").put("value", "val_6");
		ObjectNode b = stack.putArray("batches").addObject();
		b.putArray("keys_hex").add(HEX.formatHex(Encoder.str("key_5"))).add(HEX.formatHex(Encoder.str("gone-inline")))
				.add(HEX.formatHex(Encoder.str("key_6")));
		b.putArray("results").add("OK").add("SHMKV_ENOTFOUND").add("OK");
		vs.add(dv);
		ObjectNode wrong = vector(om, "delta_other", delta, de.recs);
		wrong.put("file", "delta.img").putObject("delta").put("base", "other.img").put("stack", "SHMKV_EBASE");
		vs.add(wrong);
		Files.write(dir.resolve("manifest.json"), om.writeValueAsBytes(m));
		JsonNode read = manifest(dir);
		for (JsonNode v : read.get("vectors"))
			check(dir, v);
		// a verdict, a value or an entry changed: refused
		((ObjectNode) read.get("vectors").get(2).get("delta")).put("stack", "OK");
		assertThrows(AssertionError.class, () -> check(dir, read.get("vectors").get(2)));
		JsonNode d = read.get("vectors").get(1).get("delta");
		((ObjectNode) d.get("gets").get(1)).put("value", "val_5");
		assertThrows(AssertionError.class, () -> check(dir, read.get("vectors").get(1)));
		((ObjectNode) d.get("gets").get(1)).put("value", "new_5");
		((ArrayNode) d.get("entries")).remove(0);
		assertThrows(AssertionError.class, () -> check(dir, read.get("vectors").get(1)));
		// a delta in a manifest 2 is refused
		m.put("manifest_version", 2);
		Files.write(dir.resolve("manifest.json"), om.writeValueAsBytes(m));
		assertThrows(AssertionError.class, () -> manifest(dir));
	}

	/** The keys of img in its all-records order. */
	static List<byte[]> order(byte[] img) {
		List<byte[]> keys = new ArrayList<>();
		try (Shmkv db = Shmkv.of(img, Shmkv.Check.DEEP)) {
			for (Value v : db.allRecords())
				keys.add(v.key());
		}
		return keys;
	}

	/** A manifest vector of img, whose records are recs (its entries in the image's order). */
	static ObjectNode vector(ObjectMapper om, String name, byte[] img, List<Encoder.Rec> recs) {
		ObjectNode v = om.createObjectNode().put("name", name).put("format", 2).put("file", name + ".img")
				.put("about", "written by the test-only Encoder").put("open", "OK").put("verify", "OK");
		Map<String, Encoder.Rec> byKey = new LinkedHashMap<>();
		for (Encoder.Rec r : recs)
			byKey.put(HEX.formatHex(r.key()), r);
		List<Encoder.Rec> ordered = new ArrayList<>();
		for (byte[] k : order(img))
			ordered.add(byKey.get(HEX.formatHex(k)));
		v.set("entries", entriesOf(om, ordered));
		return v;
	}

	/** Manifest entries of records: a tombstone as its key and "type": "tombstone" alone. */
	static ArrayNode entriesOf(ObjectMapper om, List<Encoder.Rec> recs) {
		ArrayNode a = om.createArrayNode();
		long now = System.currentTimeMillis() / 1000;
		for (Encoder.Rec r : recs) {
			ObjectNode e = a.addObject().put("key_hex", HEX.formatHex(r.key()));
			if (r.tomb()) {
				e.put("type", "tombstone");
				continue;
			}
			ValueType t = ValueType.of(r.type());
			e.put("type", t.formatName()).put("shared", false).put("raw_hex", HEX.formatHex(r.value()));
			ByteBuffer bb = ByteBuffer.wrap(r.value()).order(ByteOrder.LITTLE_ENDIAN);
			switch (t) {
				case STRING -> e.put("count", r.value().length).put("value", new String(r.value(), StandardCharsets.UTF_8));
				case BYTES -> e.put("count", r.value().length).put("value", HEX.formatHex(r.value()));
				case I64 -> e.put("count", 1).put("value", bb.getLong());
				case STRLIST -> {
					int n = bb.getInt(0);
					e.put("count", n);
					ArrayNode l = e.putArray("value");
					for (int i = 0; i < n; i++) {
						int from = bb.getInt(4 + 4 * i), to = bb.getInt(8 + 4 * i), data = 4 * (n + 2);
						l.add(new String(r.value(), data + from, to - from - 1, StandardCharsets.UTF_8));
					}
				}
				default -> throw new AssertionError("no manifest encoding here for " + t);
			}
			if (r.expires() != 0)
				e.put("expires", r.expires()).put("expired", now >= r.expires());
		}
		return a;
	}

	@Test
	void everyImageIsInTheManifest() throws Exception {
		List<String> named = new ArrayList<>();
		for (JsonNode v : manifest().get("vectors"))
			named.add(v.get("file").asText());
		for (Path d : new Path[] {DIR, DIR.resolve("v1")})
			try (Stream<Path> files = Files.list(d)) {
				files.map(p -> DIR.relativize(p).toString()).filter(n -> n.endsWith(".img"))
						.forEach(n -> assertTrue(named.contains(n), n + " is not in the manifest"));
			}
	}

	/** A vector of the manifest in dir. */
	static void check(Path dir, JsonNode v) {
		Path file = dir.resolve(v.get("file").asText());
		String open = v.get("open").asText();
		assertEquals(open, verdict(() -> Shmkv.open(file).close()), "open " + file);
		if (v.get("format").asInt() == 1) {
			ShmkvException e = assertThrows(ShmkvException.Version.class, () -> Shmkv.open(file));
			assertEquals(file + ": " + Format.RETIRED_MESSAGE, e.getMessage());
			assertTrue(e.getMessage().contains("shmctl image upgrade"), e.getMessage());
		}
		if (v.has("delta"))
			through(dir, v, v.get("delta"));
		if (!open.equals("OK"))
			return;
		assertEquals(v.get("verify").asText(), verdict(() -> Shmkv.open(file, Shmkv.Check.DEEP).close()), "deep open");
		try (Shmkv db = Shmkv.open(file)) {
			assertEquals(v.get("verify").asText(), verdict(db::verify), "verify");
			if (v.has("entries"))
				entries(db, v.get("entries"));
			for (JsonNode g : v.path("gets"))
				lookup(db, v, g);
			for (JsonNode b : v.path("batches"))
				batch(db, b);
		}
	}

	/**
	 * A delta vector's base read through it (FORMAT.md §19): the verdict of
	 * reading it so (§19.4: OK or SHMKV_EBASE, or the delta's or the base's
	 * own open error), then its every record, gets and batches as a plain
	 * vector's.
	 */
	static void through(Path dir, JsonNode v, JsonNode d) {
		Path base = dir.resolve(d.get("base").asText()), file = dir.resolve(v.get("file").asText());
		String what = "read " + base + " through " + file;
		assertEquals(d.get("stack").asText(), verdict(() -> Shmkv.open(base, file).close()), what);
		if (!d.get("stack").asText().equals("OK"))
			return;
		try (Shmkv db = Shmkv.open(base, file)) {
			if (d.has("entries"))
				entries(db, d.get("entries"));
			for (JsonNode g : d.path("gets"))
				lookup(db, v, g);
			for (JsonNode b : d.path("batches"))
				batch(db, b);
		}
	}

	/** A listed lookup: its result by get and by a batch of one, and its value. */
	static void lookup(Shmkv db, JsonNode v, JsonNode g) {
		byte[] key = HEX.parseHex(g.get("key_hex").asText());
		String want = g.get("result").asText(), what = "get " + g.get("key_hex").asText();
		assertEquals(want, verdict(() -> {
			if (db.get(key) == null)
				throw new ShmkvException.NotFound(null, "-");
		}), what);
		assertEquals(want, verdict(() -> {
			if (db.getAll(key)[0] == null)
				throw new ShmkvException.NotFound(null, "-");
		}), "a batch of one: " + what);
		if (g.has("value"))
			value(g.get("value"), db.get(key), what);
		if (v.get("name").asText().equals("strlist_bad_end"))
			assertThrows(ShmkvException.Corrupt.class, () -> {
				for (String s : db.get(key).asStringList())
					assertNotNull(s);
			}, "a damaged string of a list is refused when read");
	}

	/** A listed batch: each key's answer is its single get's; a failure throws the first, carrying all. */
	static void batch(Shmkv db, JsonNode b) {
		List<byte[]> keys = new ArrayList<>();
		for (JsonNode k : b.get("keys_hex"))
			keys.add(HEX.parseHex(k.asText()));
		byte[][] k = keys.toArray(new byte[0][]);
		JsonNode want = b.get("results");
		int firstFailure = -1;
		for (int i = want.size() - 1; i >= 0; i--)
			if (!want.get(i).asText().equals("OK") && !want.get(i).asText().equals("SHMKV_ENOTFOUND"))
				firstFailure = i;
		Value[] got;
		if (firstFailure < 0) {
			got = db.getAll(k);
		} else {
			ShmkvException e = assertThrows(ShmkvException.class, () -> db.getAll(k));
			assertEquals(want.get(firstFailure).asText(), e.codeName(), "the batch throws its first failing key's error");
			assertTrue(e.getMessage().contains("(index " + firstFailure + " of the batch)"), e.getMessage());
			assertTrue(e.getMessage().contains(Keys.show(k[firstFailure], k[firstFailure].length)), e.getMessage());
			assertSame(e, e.errors().get(firstFailure));
			got = e.results();
			for (int i = 0; i < k.length; i++) {
				String w = want.get(i).asText();
				boolean failed = !w.equals("OK") && !w.equals("SHMKV_ENOTFOUND");
				assertEquals(failed, e.errors().containsKey(i), "key " + i + " is among errors()");
				if (failed)
					assertEquals(w, e.errors().get(i).codeName(), "key " + i);
			}
		}
		assertEquals(k.length, got.length);
		for (int i = 0; i < k.length; i++) {
			String w = want.get(i).asText();
			byte[] key = k[i];
			assertEquals(w.equals("OK"), got[i] != null, "batch key " + i + ": " + w);
			assertEquals(w, verdict(() -> {
				if (db.get(key) == null)
					throw new ShmkvException.NotFound(null, "-");
			}), "the single get of batch key " + i);
		}
	}

	/** Whether a vector's entry has expired (the vectors' expiries are long past or far ahead). */
	static boolean expired(JsonNode e) {
		return e.path("expired").asBoolean(false);
	}

	/** Whether a vector's entry is a delta's tombstone (manifest 3: "type": "tombstone", no value fields). */
	static boolean tombstone(JsonNode e) {
		return e.get("type").asText().equals(ValueType.TOMBSTONE.formatName());
	}

	/** Absent to a get, and left out of the default iteration: expired, or a tombstone. */
	static boolean absent(JsonNode e) {
		return expired(e) || tombstone(e);
	}

	/**
	 * Both iterations against entries (all of them, a delta's tombstones
	 * too; the live ones), then every entry by get and by one batch.
	 */
	static void entries(Shmkv db, JsonNode want) {
		assertEquals(want.size(), db.recordCount(), "entry_count");
		long live = 0;
		for (JsonNode e : want) {
			assertEquals(e.has("expires"), e.has("expired"), "an entry with an expiry says whether it has passed");
			live += absent(e) ? 0 : 1;
		}
		assertEquals(live, db.size(), "size(): the live entries");
		Iterator<Value> all = db.allRecords().iterator(), liveIt = db.iterator();
		byte[][] keys = new byte[want.size()][];
		int i = 0;
		for (JsonNode e : want) {
			byte[] key = HEX.parseHex(e.get("key_hex").asText());
			keys[i++] = key;
			assertTrue(all.hasNext(), "allRecords ends after " + i + " records");
			Value got = all.next();
			assertArrayEquals(key, got.key(), "key of record " + i);
			assertEquals(e.path("expires").asLong(0), got.expires(), "expiry of record " + i);
			same(e, got);
			if (!absent(e)) {
				assertTrue(liveIt.hasNext(), "the iteration ends before " + e.get("key_hex").asText());
				Value l = liveIt.next();
				assertArrayEquals(key, l.key(), "the iteration's next live entry");
				same(e, l);
				same(e, db.get(key));
			} else {
				assertNull(db.get(key), "an expired key, or a tombstone's, is absent");
			}
		}
		assertFalse(all.hasNext(), "allRecords yields no more records than the manifest");
		assertFalse(liveIt.hasNext(), "the iteration yields no more entries than the manifest");
		Value[] batch = db.getAll(keys);
		i = 0;
		for (JsonNode e : want) {
			if (absent(e))
				assertNull(batch[i++], "an expired key, or a tombstone's, is absent from a batch");
			else
				same(e, batch[i++]);
		}
	}

	static void same(JsonNode e, Value got) {
		String what = e.get("key_hex").asText();
		assertNotNull(got, what);
		if (tombstone(e)) { // a tombstone: no value fields, an empty value
			assertTrue(got.isTombstone(), what + " is a tombstone");
			assertEquals(ValueType.TOMBSTONE, got.type(), what);
			assertEquals(0, got.byteSize(), what);
			assertFalse(e.has("value") || e.has("raw_hex"), what + ": a tombstone's entry has no value fields");
			return;
		}
		assertEquals(e.get("type").asText(), got.type().formatName(), what);
		assertEquals(e.get("shared").asBoolean(), got.isShared(), what);
		assertEquals(e.get("count").asLong(), got.count(), what);
		assertEquals(e.get("raw_hex").asText(), HEX.formatHex(got.toBytes()), what);
		value(e.get("value"), got, what);
	}

	/** The typed value as the manifest encodes it. */
	static void value(JsonNode val, Value got, String what) {
		assertNotNull(got, what);
		switch (got.type()) {
			case BYTES -> assertEquals(val.asText(), HEX.formatHex(got.toBytes()), what);
			case STRING -> assertEquals(val.asText(), got.asString(), what);
			case I64 -> assertEquals(val.asText(), Long.toString(got.asLong()), what);
			case BOOL -> assertEquals(val.asBoolean(), got.asBoolean(), what);
			case F64 -> assertEquals(Double.doubleToRawLongBits(val.asDouble()), Double.doubleToRawLongBits(got.asDouble()), what);
			case F32LIST -> {
				FloatList l = got.asFloatList();
				assertEquals(val.size(), l.size(), what);
				for (int i = 0; i < l.size(); i++)
					assertEquals(Float.floatToRawIntBits((float) val.get(i).asDouble()), Float.floatToRawIntBits(l.get(i)), what);
			}
			case F64LIST -> {
				DoubleList l = got.asDoubleList();
				assertEquals(val.size(), l.size(), what);
				for (int i = 0; i < l.size(); i++)
					assertEquals(Double.doubleToRawLongBits(val.get(i).asDouble()), Double.doubleToRawLongBits(l.get(i)), what);
			}
			case I64LIST -> {
				LongList l = got.asLongList();
				assertEquals(val.size(), l.size(), what);
				for (int i = 0; i < l.size(); i++)
					assertEquals(val.get(i).asText(), Long.toString(l.get(i)), what);
			}
			case TOMBSTONE -> fail(what + ": a tombstone where a value is listed");
			case STRLIST -> {
				StringList l = got.asStringList();
				assertEquals(val.size(), l.size(), what);
				for (int i = 0; i < l.size(); i++) {
					assertEquals(val.get(i).asText(), l.get(i), what);
					assertArrayEquals(val.get(i).asText().getBytes(StandardCharsets.UTF_8), l.getBytes(i), what);
				}
			}
		}
	}
}
