package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.lang.reflect.Method;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.regex.Matcher;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * Not a test of the reader: the CPU a refresh to a top-only publish costs
 * a reader (lib/PROTOCOL.md, "Protocol 2"), what a stream of sets costs
 * it. For each kv_N.shmkv in -Dshmkv.bench.dir=DIR (key_N to "val_N", from
 * shmctl) a cache is written by hand ({@link ControlSegmentTest}'s control
 * segment, its files under -Dshmkv.bench.shm, default /dev/shm: tmpfs, as
 * a loader's): the image as its base, a lower of 1,000 of its keys and four
 * tops of 1,000 keys ({@link Encoder}). Rounds of a new top's publish, then
 * refresh and 20,000 gets of random base keys through a snapshot, alternate
 * with rounds of the gets alone (-Dshmkv.bench.rounds of each, default
 * 30, after two of each to warm); it prints the medians of the thread's CPU
 * time of each kind and their difference, the refresh's cost. Runs only
 * when the property is set:
 * {@code mvn -B test -Dtest=BenchRefresh -Dshmkv.bench.dir=DIR}.
 */
@EnabledIfSystemProperty(named = "shmkv.bench.dir", matches = ".+")
class BenchRefresh {
	static final int GETS = 20_000, TOPS = 4;

	@Test
	void refreshToATopOnlyPublish() throws Exception {
		Path dir = Path.of(System.getProperty("shmkv.bench.dir"));
		Path shm = Path.of(System.getProperty("shmkv.bench.shm", "/dev/shm"));
		int rounds = Integer.getInteger("shmkv.bench.rounds", 30);
		// the tests compile as part of the module org.shmkv, which does not read
		// java.management: by reflection (they run on the class path, which does)
		Object mx = Class.forName("java.lang.management.ManagementFactory").getMethod("getThreadMXBean").invoke(null);
		Method cpu = Class.forName("java.lang.management.ThreadMXBean").getMethod("getCurrentThreadCpuTime");
		int measured = 0;
		try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "kv_*.shmkv")) {
			for (Path kv : files) {
				Matcher m = BenchDeltas.KV.matcher(kv.getFileName().toString());
				if (!m.matches())
					continue;
				int keys = Integer.parseInt(m.group(1));
				Path work = Files.createTempDirectory(shm, "shmkv-java-bench-");
				try {
					measure(kv, keys, work, rounds, () -> (Long) cpu.invoke(mx));
				} finally {
					try (var all = Files.walk(work)) {
						for (Path p : all.sorted(java.util.Comparator.reverseOrder()).toList())
							Files.delete(p);
					}
				}
				measured++;
			}
		}
		assertTrue(measured > 0, "no kv_N.shmkv in " + dir);
	}

	/** The thread's CPU time in ns. */
	@FunctionalInterface
	interface Clock {
		long now() throws Exception;
	}

	static void measure(Path kv, int keys, Path work, int rounds, Clock clock) throws Exception {
		LevelsTest.Ctl2 c = new LevelsTest.Ctl2(work);
		Path bf = work.resolve("base");
		Files.copy(kv, bf);
		Files.setPosixFilePermissions(bf, PosixFilePermissions.fromString("rw-r--r--"));
		ControlSegmentTest.Seg base = ControlSegmentTest.Seg.base(bf);
		Header h;
		try (Shmkv db = Shmkv.open(kv, Shmkv.Check.HEADER)) {
			h = db.current().image.hdr;
		}
		SplittableRandom r = new SplittableRandom(keys);
		List<ControlSegmentTest.Seg> deltas = new ArrayList<>();
		for (int i = 0; i <= TOPS; i++) { // the lower, then the tops
			Encoder d = new Encoder();
			d.seed = h.hashSeed;
			d.hashBits = h.hashBits;
			java.util.Set<Integer> seen = new java.util.HashSet<>();
			while (seen.size() < Math.min(1000, keys)) {
				int n = r.nextInt(keys);
				if (seen.add(n))
					d.add("key_" + n, Format.STRING, Encoder.str((i == 0 ? "lower_" : "top_") + n));
			}
			byte[] img = d.delta(d.buckets(), h.checksum, h.fileSize, 0, 1);
			deltas.add(i == 0 ? c.lower("lower", img) : c.top("top." + i, img));
		}
		c.h.create2(base, deltas.get(0), deltas.get(1));
		String[] probe = new String[1 << 16];
		for (int i = 0; i < probe.length; i++)
			probe[i] = "key_" + r.nextInt(keys);
		double[] refresh = new double[rounds], gets = new double[rounds];
		try (Shmkv db = c.h.attach()) {
			long gen = 1;
			int k = 0;
			for (int i = -2; i < rounds; i++) // two of each to warm
				for (boolean publish : new boolean[] {true, false}) {
					if (publish)
						c.h.publish(++gen, 0, base, deltas.get(0), deltas.get(1 + (int) (gen % TOPS)));
					long t0 = clock.now();
					if (publish)
						assertTrue(db.refresh(), "the refresh to generation " + gen);
					try (Snapshot s = db.snapshot()) {
						for (int n = 0; n < GETS; n++)
							if (s.get(probe[k++ & (probe.length - 1)]) == null)
								throw new AssertionError("a base key is absent");
					}
					double ms = (clock.now() - t0) / 1e6;
					if (i >= 0)
						(publish ? refresh : gets)[i] = ms;
				}
		}
		double mr = median(refresh), mg = median(gets);
		System.out.printf("BenchRefresh: %d keys, %d rounds of each: refresh and %d gets %.2f ms, the gets alone %.2f ms "
				+ "(medians of the thread's CPU time): the refresh %.2f ms%n", keys, rounds, GETS, mr, mg, mr - mg);
	}

	static double median(double[] x) {
		double[] s = x.clone();
		Arrays.sort(s);
		return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
	}
}
