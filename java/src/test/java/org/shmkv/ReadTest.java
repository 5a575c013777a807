package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The reader's API on the vectors' images: typed getters, errors, views after release, snapshots. */
class ReadTest {
	static final Path TYPES = VectorsTest.DIR.resolve("types.img");

	@Test
	void typedGetters() {
		try (Shmkv db = Shmkv.open(TYPES)) {
			assertEquals(0, db.generation());
			assertEquals(42, db.getLong("i64"));
			assertEquals(Long.MIN_VALUE, db.getLong("i64/min".getBytes(StandardCharsets.UTF_8)));
			assertEquals(3.25, db.getDouble("f64"));
			assertTrue(db.getBoolean("bool/true"));
			assertFalse(db.getBoolean("bool/false"));
			assertEquals("hello, world", db.getString("string"));
			assertEquals("grüß dich € 😀", db.getString("string/utf8"));
			assertEquals("the empty key", db.getString(""));
			assertArrayEquals(new byte[] {0, 1, 2, (byte) 0xfe, (byte) 0xff}, db.getBytes("bytes"));
			byte[] dst = new byte[16];
			assertEquals(5, db.getInto("bytes", dst));
			assertEquals((byte) 0xfe, dst[3]);
			assertEquals(-1, db.getInto("absent", dst));
			assertEquals(12, db.getInto("string", new byte[2]), "too small: the length, nothing copied");
			assertArrayEquals(new long[] {Long.MIN_VALUE, -1, 0, 1, Long.MAX_VALUE}, db.getLongList("i64list").toArray());
			assertEquals(-7.0, db.getDoubleList("f64list").get(2));
			assertEquals(3, db.getFloatList("f32list").asBuffer().remaining());
			assertTrue(db.getFloatList("f32list").asBuffer().isReadOnly());
			assertEquals(List.of("a", "bc", "déf"), db.getStrings("strlist"));
			assertEquals(List.of("a", "bc", "déf"), db.getStringList("strlist"));
			assertTrue(db.getByteBuffer("string").isReadOnly());
			assertNull(db.get("absent"));
			assertNull(db.getString("absent"));
			assertEquals(7, db.getLong("absent", 7));
			assertEquals(36, db.size());
			long n = 0;
			for (Value v : db)
				n += v.key().length >= 0 ? 1 : 0;
			assertEquals(36, n);
		}
	}

	/** The first read of java/README.md, on lib/examples/users.jsonl built by shmctl. */
	@Test
	void readmeFirstRead(@TempDir Path tmp) throws Exception {
		Path img = tmp.resolve("users.shmkv");
		Programs.build(img, "users", Files.readAllLines(Programs.REPO.resolve("lib/examples/users.jsonl")));
		try (Shmkv db = Shmkv.open(img)) {
			assertEquals("Ada Lovelace", db.getString("user:1:name"));
			assertEquals(36, db.getLong("user:1:age"));
			FloatList emb = db.getFloatList("user:1:embedding");
			assertEquals(0.25f, emb.get(0));
			assertEquals(-1.5f, emb.asBuffer().get(1));
			long n = 0;
			for (Value v : db)
				n += v.key().length > 0 ? 1 : 0;
			assertEquals(db.size(), n);
		}
	}

	@Test
	void errorsAreNamedAfterTheCCodes() throws Exception {
		try (Shmkv db = Shmkv.open(TYPES)) {
			ShmkvException e = assertThrows(ShmkvException.NotFound.class, () -> db.getLong("absent"));
			assertEquals("SHMKV_ENOTFOUND", e.codeName());
			assertEquals(-31200, e.code());
			assertEquals(TYPES + ": key not found: \"absent\"", e.getMessage());
			e = assertThrows(ShmkvException.Type.class, () -> db.getLong("string"));
			assertEquals("SHMKV_ETYPE", e.codeName());
			assertEquals(TYPES + ": value has a different type: key \"string\" is string, not i64", e.getMessage());
			assertThrows(ShmkvException.Type.class, () -> db.get("f64").asLongList());
			e = assertThrows(ShmkvException.KeyLength.class, () -> db.get(new byte[65536]));
			assertEquals("SHMKV_EKEYLEN", e.codeName());
			assertNull(db.get(new byte[65535]));
		}
		ShmkvException e = assertThrows(ShmkvException.class, () -> Shmkv.open(Path.of("/nonexistent/x.shmkv")));
		assertEquals("ENOENT", e.codeName());
		assertEquals("EINVAL", assertThrows(ShmkvException.class, () -> Shmkv.open(Path.of("/tmp"))).codeName());
		e = assertThrows(ShmkvException.class, () -> Shmkv.open(VectorsTest.DIR.resolve("README.md")));
		assertEquals("SHMKV_EMAGIC", e.codeName());
		Path v3 = VectorsTest.DIR.resolve("version_3.img");
		e = assertThrows(ShmkvException.class, () -> Shmkv.open(v3));
		assertEquals("SHMKV_EVERSION", e.codeName());
		assertEquals(v3 + ": image format version 3, this reader reads version 2", e.getMessage());
		Path v1 = VectorsTest.DIR.resolve("v1/base.img");
		e = assertThrows(ShmkvException.Version.class, () -> Shmkv.open(v1, Shmkv.Check.HEADER));
		assertEquals(v1 + ": image format version 1 is retired: convert it with 'shmctl image upgrade OLD -o NEW'",
				e.getMessage());
	}

	@Test
	void shortFilesAreTruncatedOrNotImages(@TempDir Path tmp) throws Exception {
		Path f = tmp.resolve("short");
		Files.write(f, "SHMKVIMG and no more".getBytes(StandardCharsets.US_ASCII));
		assertEquals("SHMKV_ETRUNCATED", assertThrows(ShmkvException.class, () -> Shmkv.open(f)).codeName());
		Files.write(f, new byte[0]);
		assertEquals("SHMKV_ETRUNCATED", assertThrows(ShmkvException.class, () -> Shmkv.open(f)).codeName());
		Files.write(f, "a text file".getBytes(StandardCharsets.US_ASCII));
		assertEquals("SHMKV_EMAGIC", assertThrows(ShmkvException.class, () -> Shmkv.open(f)).codeName());
	}

	@Test
	void viewsAfterCloseFailClearly() {
		Shmkv db = Shmkv.open(TYPES);
		Value s = db.get("string");
		LongList l = db.getLongList("i64list");
		StringList sl = db.getStringList("strlist");
		Snapshot snap = db.snapshot();
		Value pinned = snap.get("f64");
		db.close();
		// the snapshot pins the generation: its values still read
		assertEquals(3.25, pinned.asDouble());
		assertEquals("hello, world", s.asString(), "the generation is mapped while a snapshot pins it");
		snap.close();
		ShmkvException.Released r = assertThrows(ShmkvException.Released.class, s::asString);
		assertTrue(r.getMessage().contains("was released"), r.getMessage());
		assertThrows(ShmkvException.Released.class, () -> l.get(0));
		assertThrows(ShmkvException.Released.class, () -> sl.get(0));
		assertThrows(ShmkvException.Released.class, pinned::asDouble);
		assertThrows(ShmkvException.Released.class, () -> db.get("string"));
		assertThrows(ShmkvException.Released.class, () -> snap.get("string"));
		assertThrows(IllegalStateException.class, () -> l.asBuffer().get(0), "a buffer view fails as the JDK's");
	}
}
