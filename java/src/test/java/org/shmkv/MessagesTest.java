package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The messages a newcomer reads: each names the file (or the image in
 * memory) first, shows a key that is text as text and another as hex, and
 * says each thing once (no two words in a row repeated: "bad magic ...:
 * bad magic at offset 0" was). Over every refusal of the vectors (open,
 * deep open, lookups) and the errors of the API, deltas' (FORMAT.md §19)
 * included.
 */
class MessagesTest {
	/** Words too common to count as a repetition. */
	static final Set<String> COMMON = Set.of("the", "a", "an", "of", "is", "its", "it", "in", "at", "to", "not", "no",
			"and", "or", "by", "for", "be", "this", "than", "from", "with", "as", "after", "before", "bytes", "byte");

	/** The message after its "where: " prefix: no two consecutive words (but common ones) appear twice. */
	static void saysEachThingOnce(String where, ShmkvException e) {
		String m = e.getMessage();
		assertTrue(m.startsWith(where + ": "), "names " + where + " first: " + m);
		List<String> words = new ArrayList<>();
		for (String w : m.substring(where.length() + 2).toLowerCase(Locale.ROOT).split("[^a-z0-9_]+"))
			if (!w.isEmpty() && !COMMON.contains(w) && !w.matches("[0-9a-f]*[0-9][0-9a-f]*"))
				words.add(w);
		Map<String, Integer> pairs = new HashMap<>();
		for (int i = 0; i + 1 < words.size(); i++) {
			String p = words.get(i) + " " + words.get(i + 1);
			assertNull(pairs.put(p, i), "\"" + p + "\" twice in: " + m);
		}
	}

	static ShmkvException thrown(Runnable r) {
		return assertThrows(ShmkvException.class, r::run);
	}

	@Test
	void everyRefusalOfTheVectors() throws Exception {
		JsonNode m = new ObjectMapper().readTree(Files.readAllBytes(VectorsTest.DIR.resolve("manifest.json")));
		int n = 0;
		for (JsonNode v : m.get("vectors")) {
			Path file = VectorsTest.DIR.resolve(v.get("file").asText());
			String where = file.toString();
			if (!v.get("open").asText().equals("OK")) {
				saysEachThingOnce(where, thrown(() -> Shmkv.open(file).close()));
				n++;
				continue;
			}
			if (!v.get("verify").asText().equals("OK")) {
				saysEachThingOnce(where, thrown(() -> Shmkv.open(file, Shmkv.Check.DEEP).close()));
				n++;
			}
			try (Shmkv db = Shmkv.open(file)) {
				for (JsonNode g : v.path("gets"))
					if (!g.get("result").asText().equals("OK")) {
						byte[] key = VectorsTest.HEX.parseHex(g.get("key_hex").asText());
						ShmkvException e = thrown(() -> db.getLong(key));
						saysEachThingOnce(where, e);
						if (e instanceof ShmkvException.NotFound)
							assertTrue(e.getMessage().endsWith(Keys.show(key, key.length)), e.getMessage());
						n++;
					}
			}
		}
		assertTrue(n >= 60, n + " messages");
	}

	@Test
	void theApisErrors(@TempDir Path tmp) throws Exception {
		Path types = VectorsTest.DIR.resolve("types.img");
		try (Shmkv db = Shmkv.open(types)) {
			String where = types.toString();
			ShmkvException e = thrown(() -> db.getLong("user:9:name"));
			saysEachThingOnce(where, e);
			assertEquals(where + ": key not found: \"user:9:name\"", e.getMessage(), "a key that is text, as text");
			e = thrown(() -> db.getLong(new byte[] {0, 1, (byte) 0xff}));
			assertEquals(where + ": key not found: 0x0001ff (3 bytes)", e.getMessage(), "another key as hex");
			e = thrown(() -> db.getLong("ключ"));
			assertEquals(where + ": key not found: \"ключ\"", e.getMessage(), "UTF-8 text is text");
			e = thrown(() -> db.getLong("tab\there"));
			assertTrue(e.getMessage().endsWith("0x7461620968657265 (8 bytes)"), "a control character: hex");
			e = thrown(() -> db.getLong("x".repeat(100)));
			assertTrue(e.getMessage().endsWith("\"" + "x".repeat(64) + "\"... (100 bytes)"), e.getMessage());
			e = thrown(() -> db.getLong(""));
			assertTrue(e.getMessage().contains("value has a different type: key \"\" (the empty key) is string, not i64"),
					e.getMessage());
			e = thrown(() -> db.getDouble("i64"));
			saysEachThingOnce(where, e);
			assertEquals(where + ": value has a different type: key \"i64\" is i64, not f64", e.getMessage());
			e = thrown(() -> db.getInto("i64", new byte[8]));
			assertTrue(e.getMessage().endsWith("is i64, not bytes or string"), e.getMessage());
			e = thrown(() -> db.get(new byte[Format.MAX_KEY_LEN + 1]));
			saysEachThingOnce(where, e);
			e = thrown(() -> db.get("f64").asLongList());
			saysEachThingOnce(where, e);
		}
		Path none = tmp.resolve("none.shmkv");
		saysEachThingOnce(none.toString(), thrown(() -> Shmkv.open(none)));
		saysEachThingOnce(tmp.toString(), thrown(() -> Shmkv.open(tmp)));
		Path text = tmp.resolve("text.shmkv");
		Files.writeString(text, "a text file, not an image");
		ShmkvException e = thrown(() -> Shmkv.open(text));
		saysEachThingOnce(text.toString(), e);
		assertEquals(text + ": not a shmkv image (bad magic): its first bytes are 6120746578742066, not SHMKVIMG",
				e.getMessage());
		Path v1 = VectorsTest.DIR.resolve("v1/types.img");
		assertEquals(v1 + ": " + Format.RETIRED_MESSAGE, thrown(() -> Shmkv.open(v1)).getMessage());
		Shmkv closed = Shmkv.open(VectorsTest.DIR.resolve("base.img"));
		closed.close();
		saysEachThingOnce(VectorsTest.DIR.resolve("base.img").toString(), thrown(() -> closed.get("s")));
		// a delta that does not apply (FORMAT.md §19.4), and a delta's own refusals
		byte[] base = DeltaTest.base(), delta = DeltaTest.delta(base);
		Path b = tmp.resolve("base.shmkv"), d = tmp.resolve("delta.shmkv");
		Files.write(b, base);
		Files.write(d, delta);
		for (Path[] pair : new Path[][] {{types, d}, {d, d}, {b, types}})
			saysEachThingOnce(pair[0].toString(), thrown(() -> Shmkv.open(pair[0], pair[1])));
		Encoder de = DeltaTest.deltaRecords();
		long sum = Encoder.checksum(base);
		int i = 0;
		for (byte[] img : List.of(de.delta(de.buckets(), sum, base.length, 7, 2),
				DeltaTest.withSeed(de, 0).delta(de.buckets(), base))) {
			Path x = tmp.resolve("delta" + i++ + ".shmkv");
			Files.write(x, img);
			e = thrown(() -> Shmkv.open(b, x));
			saysEachThingOnce(b.toString(), e);
			assertTrue(e.getMessage().contains(Bytes.hex(sum)), e.getMessage());
		}
		for (int off : new int[] {24, 76, 456, 472, 192 + 96}) { // the DELTA flag, section_count, base_size, seq, the filter's kind
			byte[] damaged = delta.clone();
			damaged[off] ^= (byte) (off == 24 ? 4 : 1);
			Encoder.resum(damaged);
			Path x = tmp.resolve("damaged" + off + ".shmkv");
			Files.write(x, damaged);
			saysEachThingOnce(x.toString(), thrown(() -> Shmkv.open(x)));
		}
		e = thrown(() -> Shmkv.attach("no-such-cache", tmp, Shmkv.Check.HEADER));
		assertTrue(e.getMessage().startsWith("no cache \"no-such-cache\" under " + tmp), e.getMessage());
		e = thrown(() -> Shmkv.attach("../x", tmp, Shmkv.Check.HEADER));
		assertTrue(e.getMessage().startsWith("invalid cache name \"../x\""), e.getMessage());
	}
}
