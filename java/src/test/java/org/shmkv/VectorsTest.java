package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared conformance vectors (tests/vectors/README.md, manifest version
 * 2): open and verify verdicts (a format 1 image refused as retired, naming
 * the command that converts it), every record by both iterations (the
 * default one leaves expired records out) and by get, the listed lookups
 * with their values, and the listed batches, each key answered as its
 * single get.
 */
class VectorsTest {
	static final Path DIR = Path.of(System.getProperty("shmkv.vectors", "../tests/vectors"));
	static final HexFormat HEX = HexFormat.of();

	/** The manifest; one of another format or version is refused, not misread. */
	static JsonNode manifest() throws Exception {
		JsonNode m = new ObjectMapper().readTree(Files.readAllBytes(DIR.resolve("manifest.json")));
		assertEquals("shmkv-conformance-vectors", m.path("format").asText(), "the manifest's format: not one this test reads");
		assertEquals(2, m.path("manifest_version").asInt(), "the manifest's version: this test reads version 2");
		assertEquals(Format.VERSION, m.path("image_format_version").asInt(), "the images' format version");
		return m;
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
			out.add(DynamicTest.dynamicTest(v.get("file").asText(), () -> check(v)));
		}
		assertTrue(out.size() - retired >= 50, "the manifest lists " + (out.size() - retired) + " format 2 vectors");
		assertTrue(retired >= 5, "the manifest lists " + retired + " format 1 refusal cases");
		return out.stream();
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

	static void check(JsonNode v) {
		Path file = DIR.resolve(v.get("file").asText());
		String open = v.get("open").asText();
		assertEquals(open, verdict(() -> Shmkv.open(file).close()), "open " + file);
		if (v.get("format").asInt() == 1) {
			ShmkvException e = assertThrows(ShmkvException.Version.class, () -> Shmkv.open(file));
			assertEquals(file + ": " + Format.RETIRED_MESSAGE, e.getMessage());
			assertTrue(e.getMessage().contains("shmctl image upgrade"), e.getMessage());
		}
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

	/** Both iterations against entries (all of them; the live ones), then every entry by get and by one batch. */
	static void entries(Shmkv db, JsonNode want) {
		assertEquals(want.size(), db.recordCount(), "entry_count");
		long live = 0;
		for (JsonNode e : want) {
			assertEquals(e.has("expires"), e.has("expired"), "an entry with an expiry says whether it has passed");
			live += expired(e) ? 0 : 1;
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
			if (!expired(e)) {
				assertTrue(liveIt.hasNext(), "the iteration ends before " + e.get("key_hex").asText());
				Value l = liveIt.next();
				assertArrayEquals(key, l.key(), "the iteration's next live entry");
				same(e, l);
				same(e, db.get(key));
			} else {
				assertNull(db.get(key), "an expired key is absent");
			}
		}
		assertFalse(all.hasNext(), "allRecords yields no more records than the manifest");
		assertFalse(liveIt.hasNext(), "the iteration yields no more entries than the manifest");
		Value[] batch = db.getAll(keys);
		i = 0;
		for (JsonNode e : want) {
			if (expired(e))
				assertNull(batch[i++], "an expired key is absent from a batch");
			else
				same(e, batch[i++]);
		}
	}

	static void same(JsonNode e, Value got) {
		String what = e.get("key_hex").asText();
		assertNotNull(got, what);
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
