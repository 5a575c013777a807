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
 * The shared conformance vectors (tests/vectors/README.md): open and verify
 * verdicts, every entry by iteration and by get, and the listed lookups.
 */
class VectorsTest {
	static final Path DIR = Path.of(System.getProperty("shmkv.vectors", "../tests/vectors"));
	static final HexFormat HEX = HexFormat.of();

	static JsonNode manifest() throws Exception {
		JsonNode m = new ObjectMapper().readTree(Files.readAllBytes(DIR.resolve("manifest.json")));
		assertEquals("shmkv-conformance-vectors", m.get("format").asText(), "manifest format");
		assertEquals(1, m.get("manifest_version").asInt(), "manifest version");
		return m;
	}

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
		JsonNode m = manifest();
		for (JsonNode v : m.get("vectors"))
			out.add(DynamicTest.dynamicTest(v.get("name").asText(), () -> check(v)));
		assertTrue(out.size() >= 30, "the manifest lists " + out.size() + " vectors");
		int v1 = out.size();
		for (JsonNode v : m.get("vectors_v2")) {
			assertEquals(2, v.get("format").asInt(), v.get("name").asText());
			out.add(DynamicTest.dynamicTest(v.get("name").asText(), () -> check(v)));
		}
		assertTrue(out.size() - v1 >= 30, "the manifest lists " + (out.size() - v1) + " format 2 vectors");
		return out.stream();
	}

	@Test
	void everyImageIsInTheManifest() throws Exception {
		List<String> named = new ArrayList<>();
		JsonNode m = manifest();
		for (String array : new String[] {"vectors", "vectors_v2"})
			for (JsonNode v : m.get(array))
				named.add(v.get("file").asText());
		for (Path d : new Path[] {DIR, DIR.resolve("v2")})
			try (Stream<Path> files = Files.list(d)) {
				files.map(p -> DIR.relativize(p).toString()).filter(n -> n.endsWith(".img"))
						.forEach(n -> assertTrue(named.contains(n), n + " is not in the manifest"));
			}
	}

	static void check(JsonNode v) {
		Path file = DIR.resolve(v.get("file").asText());
		String open = v.get("open").asText();
		assertEquals(open, verdict(() -> Shmkv.open(file).close()), "open " + file);
		if (!open.equals("OK"))
			return;
		assertEquals(v.get("verify").asText(), verdict(() -> Shmkv.open(file, Shmkv.Check.DEEP).close()), "deep open");
		try (Shmkv db = Shmkv.open(file)) {
			assertEquals(v.get("verify").asText(), verdict(db::verify), "verify");
			if (v.has("entries"))
				entries(db, v.get("entries"));
			for (JsonNode g : v.get("gets")) {
				byte[] key = HEX.parseHex(g.get("key_hex").asText());
				String want = g.get("result").asText();
				String got = verdict(() -> {
					if (db.get(key) == null)
						throw new ShmkvException.NotFound("-");
				});
				assertEquals(want, got, "get " + g.get("key_hex").asText());
				assertEquals(want, verdict(() -> {
					if (db.getAll(key)[0] == null)
						throw new ShmkvException.NotFound("-");
				}), "batch get");
				if (v.get("name").asText().equals("strlist_bad_end"))
					assertThrows(ShmkvException.Corrupt.class, () -> {
						for (String s : db.get(key).asStringList())
							assertNotNull(s);
					}, "a damaged string of a list is refused when read");
			}
		}
	}

	/** Whether a vector's entry has expired (format 2; the vectors' expiries are long past or far ahead). */
	static boolean expired(JsonNode e) {
		return e.has("expires") && System.currentTimeMillis() / 1000 >= e.get("expires").asLong();
	}

	static void entries(Shmkv db, JsonNode want) {
		assertEquals(want.size(), db.size(), "entry_count");
		Iterator<Value> it = db.iterator();
		byte[][] keys = new byte[want.size()][];
		int i = 0;
		for (JsonNode e : want) {
			assertTrue(it.hasNext(), "iteration ends after " + i + " entries");
			Value got = it.next();
			byte[] key = HEX.parseHex(e.get("key_hex").asText());
			keys[i++] = key;
			assertArrayEquals(key, got.key(), "key of entry " + i);
			assertEquals(e.has("expires") ? e.get("expires").asLong() : 0, got.expires(), "expiry of entry " + i);
			same(e, got);
			if (expired(e))
				assertNull(db.get(key), "an expired key is absent");
			else
				same(e, db.get(key));
		}
		assertFalse(it.hasNext(), "iteration yields no more entries than the manifest");
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
		JsonNode val = e.get("value");
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
