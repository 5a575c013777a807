package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shared control-segment vectors (tests/vectors/README.md,
 * "Control-segment vectors"): each case's files copied into a private
 * directory with the modes its manifest names, the @DIR@ paths of its
 * control segment substituted, then {@link Shmkv#attach(String, Path, Shmkv.Check)}
 * (HEADER and CHECKSUMS): the verdict, and for an accepted case its
 * generation and listed lookups.
 */
class CtlVectorsTest {
	static final Path DIR = VectorsTest.DIR.resolve("ctl");

	@TempDir
	Path tmp;

	/** The substitution rule: a path field that starts with token takes dir in its place, NUL-padded. */
	static void substitute(byte[] ctl, String token, String dir) {
		byte[] t = token.getBytes(StandardCharsets.UTF_8);
		for (int i = 0; i < 8 && ctl.length >= 128 + 256 * (i + 1); i++) {
			int at = 128 + 256 * i + 32;
			boolean starts = true;
			for (int j = 0; j < t.length; j++)
				starts &= ctl[at + j] == t[j];
			if (!starts)
				continue;
			int end = at + t.length;
			while (end < at + 224 && ctl[end] != 0)
				end++;
			byte[] d = dir.getBytes(StandardCharsets.UTF_8);
			int restLen = end - at - t.length;
			byte[] p = new byte[d.length + restLen];
			System.arraycopy(d, 0, p, 0, d.length);
			System.arraycopy(ctl, at + t.length, p, d.length, restLen);
			assertTrue(p.length < 224, "path " + new String(p, StandardCharsets.UTF_8) + " does not fit 224 bytes with its NUL");
			java.util.Arrays.fill(ctl, at, at + 224, (byte) 0);
			System.arraycopy(p, 0, ctl, at, p.length);
		}
	}

	static void write(Path p, byte[] b, String mode) throws Exception {
		Files.write(p, b);
		int m = Integer.parseInt(mode, 8);
		StringBuilder s = new StringBuilder();
		for (int bit = 8; bit >= 0; bit--)
			s.append((m & (1 << bit)) != 0 ? "rwx".charAt((8 - bit) % 3) : '-');
		Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(s.toString()));
	}

	@TestFactory
	Stream<DynamicTest> ctlVectors() throws Exception {
		JsonNode m = new ObjectMapper().readTree(DIR.resolve("manifest.json").toFile());
		assertEquals("shmkv-ctl-vectors", m.path("format").asText());
		assertEquals(1, m.path("manifest_version").asInt());
		String token = m.path("dir_token").asText();
		assertFalse(token.isEmpty());
		List<DynamicTest> out = new ArrayList<>();
		for (JsonNode c : m.get("cases"))
			out.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> run(c, token)));
		assertTrue(out.size() >= 40, "the manifest lists " + out.size() + " cases");
		return out.stream();
	}

	void run(JsonNode c, String token) throws Exception {
		String name = c.get("name").asText();
		Path root = Files.createTempDirectory(tmp, "ctl", PosixFilePermissions.asFileAttribute(
				PosixFilePermissions.fromString("rwx------")));
		for (JsonNode f : c.get("files"))
			write(root.resolve(f.get("name").asText()), Files.readAllBytes(VectorsTest.DIR.resolve(f.get("from").asText())),
					f.get("mode").asText());
		byte[] ctl = Files.readAllBytes(DIR.resolve(c.get("ctl").asText()));
		substitute(ctl, token, root.toString());
		write(root.resolve(name + ".ctl"), ctl, c.get("ctl_mode").asText());
		String want = c.get("attach").asText();
		for (Shmkv.Check check : new Shmkv.Check[] {Shmkv.Check.HEADER, Shmkv.Check.CHECKSUMS}) {
			String where = name + " (" + check + "): " + c.get("about").asText();
			Shmkv db;
			try {
				db = Shmkv.attach(name, root, check);
			} catch (ShmkvException e) {
				assertEquals(want, e.codeName(), where + ": " + e.getMessage());
				continue;
			}
			try (db) {
				assertEquals("OK", want, where);
				assertEquals(c.get("generation").asLong(), db.generation(), where);
				for (JsonNode g : c.get("gets")) {
					byte[] key = HexFormat.of().parseHex(g.get("key_hex").asText());
					String k = where + ": get " + g.get("key_hex").asText();
					boolean i64 = "i64".equals(g.path("type").asText());
					String[] got = new String[1];
					String cls = VectorsTest.verdict(() -> got[0] = i64 ? Long.toString(db.getLong(key)) : db.getString(key));
					if ("OK".equals(cls) && got[0] == null) // getString: null for a missing key
						cls = "SHMKV_ENOTFOUND";
					assertEquals(g.get("result").asText(), cls, k);
					if ("OK".equals(cls))
						assertEquals(g.get("value").asText(), got[0], k);
				}
			}
		}
	}
}
