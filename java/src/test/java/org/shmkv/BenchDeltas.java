package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * Not a test of the reader: the writer of the deltas the benchmarks read
 * (java/README.md, "Benchmark"), until shmctl writes deltas. For each
 * kv_N.shmkv in -Dshmkv.bench.dir=DIR (key_N to "val_N", from shmctl), it
 * writes kv_N.delta: 1% of its keys, key_N for N a multiple of 100, to
 * "new_N", and kv_N.top, a top delta over it (FORMAT.md §19.6; 0.02% of
 * the keys, all among the lower's: key_N for N a multiple of 10,000 to
 * "top_N", a tombstone of key_N for N 5,000 past one), written by the
 * test-only {@link Encoder} with the image's seed, width, checksum and size
 * (FORMAT.md §19), then reads a few keys through them. Runs only when the
 * property is set:
 * {@code mvn -B test -Dtest=BenchDeltas -Dshmkv.bench.dir=DIR}.
 */
@EnabledIfSystemProperty(named = "shmkv.bench.dir", matches = ".+")
class BenchDeltas {
	static final Pattern KV = Pattern.compile("kv_(\\d+)\\.shmkv");

	@Test
	void writeTheBenchmarksDeltas() throws Exception {
		Path dir = Path.of(System.getProperty("shmkv.bench.dir"));
		int written = 0;
		try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "kv_*.shmkv")) {
			for (Path base : files) {
				Matcher m = KV.matcher(base.getFileName().toString());
				if (!m.matches())
					continue;
				int keys = Integer.parseInt(m.group(1));
				Path delta = dir.resolve("kv_" + keys + ".delta"), top = dir.resolve("kv_" + keys + ".top");
				Encoder d = new Encoder(), t = new Encoder();
				long checksum, size;
				try (Shmkv db = Shmkv.open(base, Shmkv.Check.HEADER)) {
					Header h = db.current().image.hdr;
					d.seed = t.seed = h.hashSeed;
					d.hashBits = t.hashBits = h.hashBits;
					checksum = h.checksum;
					size = h.fileSize;
				}
				for (int i = 0; i < keys; i += 100)
					d.add("key_" + i, Format.STRING, Encoder.str("new_" + i));
				for (int i = 0; i < keys; i += 10_000) {
					t.add("key_" + i, Format.STRING, Encoder.str("top_" + i));
					if (i + 5000 < keys)
						t.tomb("key_" + (i + 5000));
				}
				Files.write(delta, d.delta(d.buckets(), checksum, size, 0, 1));
				Files.write(top, t.delta(t.buckets(), checksum, size, 0, 1));
				try (Shmkv db = Shmkv.open(base, delta, Shmkv.Check.CHECKSUMS);
						Shmkv both = Shmkv.open(base, delta, top, Shmkv.Check.CHECKSUMS)) {
					for (int i = 0; i < Math.min(keys, 20_000); i++) {
						assertEquals((i % 100 == 0 ? "new_" : "val_") + i, db.getString("key_" + i));
						assertEquals(i % 10_000 == 0 ? "top_" + i : i % 10_000 == 5000 ? null
								: (i % 100 == 0 ? "new_" : "val_") + i, both.getString("key_" + i));
					}
					assertNull(db.get("key_" + keys));
					assertNull(both.get("key_" + keys));
				}
				System.out.printf("BenchDeltas: %s, %d upserts of %d keys; %s, %d records over it%n", delta, keys / 100,
						keys, top, t.recs.size());
				written++;
			}
		}
		assertTrue(written > 0, "no kv_N.shmkv in " + dir);
	}
}
