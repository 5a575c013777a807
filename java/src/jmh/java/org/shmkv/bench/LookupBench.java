package org.shmkv.bench;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;
import org.shmkv.Shmkv;

/**
 * Lookups of key_N -> val_N at 1M and 10M keys, uniform random hits (N in
 * [0, keys)) and misses (N in [keys, 2 keys)), one thread: shmkv against a
 * HashMap<String,String> of the same data (java/README.md, "Benchmark";
 * figures in bench/RESULTS.md, "Java"). The images come from shmctl:
 * -Dshmkv.bench.dir=DIR holds kv_1000000.shmkv, kv_10000000.shmkv and
 * num_1000000.shmkv (key_N -> the i64 N). Each side has its own state, so
 * a run of one side does not build the other.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx6g", "-XX:+UseParallelGC"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class LookupBench {
	static final int RING = 1 << 20;

	@State(Scope.Thread)
	public static class Keys {
		@Param({"1000000", "10000000"})
		public int keys;
		String[] hit, miss, num;
		byte[][] hitBytes;
		int next;

		@Setup(Level.Trial)
		public void setup() {
			SplittableRandom r = new SplittableRandom(42);
			hit = new String[RING];
			miss = new String[RING];
			num = new String[RING];
			hitBytes = new byte[RING][];
			for (int i = 0; i < RING; i++) {
				hit[i] = "key_" + r.nextInt(keys);
				miss[i] = "key_" + (keys + r.nextInt(keys));
				num[i] = "key_" + r.nextInt(1_000_000);
				hitBytes[i] = hit[i].getBytes(StandardCharsets.US_ASCII);
			}
		}

		int i() {
			return next = (next + 1) & (RING - 1);
		}
	}

	@State(Scope.Benchmark)
	public static class Map {
		HashMap<String, String> map;

		@Setup(Level.Trial)
		public void setup(Keys k) {
			map = new HashMap<>(k.keys * 2);
			for (int i = 0; i < k.keys; i++)
				map.put("key_" + i, "val_" + i);
		}
	}

	@State(Scope.Benchmark)
	public static class Kv {
		Shmkv kv, num;
		final byte[] dst = new byte[64];

		@Setup(Level.Trial)
		public void setup(Keys k) {
			Path dir = Path.of(System.getProperty("shmkv.bench.dir", "."));
			kv = Shmkv.open(dir.resolve("kv_" + k.keys + ".shmkv"), Shmkv.Check.HEADER);
			num = Shmkv.open(dir.resolve("num_1000000.shmkv"), Shmkv.Check.HEADER);
		}

		@TearDown(Level.Trial)
		public void close() {
			kv.close();
			num.close();
		}
	}

	@Benchmark
	public String hashMapHit(Map m, Keys k) {
		return m.map.get(k.hit[k.i()]);
	}

	@Benchmark
	public String hashMapMiss(Map m, Keys k) {
		return m.map.get(k.miss[k.i()]);
	}

	/** The value as a new String (decoded: a copy, where HashMap returns its own). */
	@Benchmark
	public String shmkvHitString(Kv s, Keys k) {
		return s.kv.getString(k.hit[k.i()]);
	}

	/** The value's bytes into a caller's buffer: no allocation. */
	@Benchmark
	public int shmkvHitBytes(Kv s, Keys k) {
		return s.kv.getInto(k.hit[k.i()], s.dst);
	}

	/** byte[] keys (no String encoding), the value's bytes into a buffer. */
	@Benchmark
	public int shmkvHitBytesKey(Kv s, Keys k) {
		return s.kv.getInto(k.hitBytes[k.i()], s.dst);
	}

	@Benchmark
	public int shmkvMiss(Kv s, Keys k) {
		return s.kv.getInto(k.miss[k.i()], s.dst);
	}

	/** An i64 value (num_1000000: key_N -> N, whatever keys is). */
	@Benchmark
	public long shmkvHitLong(Kv s, Keys k) {
		return s.num.getLong(k.num[k.i()]);
	}
}
