package org.shmkv.bench;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;
import org.shmkv.Shmkv;
import org.shmkv.Value;

/**
 * Lookups of key -> val_N, uniform random hits (N in [0, keys)) and misses
 * (N in [keys, 2 keys)), one thread: shmkv against a HashMap&lt;String,String&gt;
 * of the same data (java/README.md, "Benchmark"). keys: 1000 (in cache), 1M,
 * 10M; kind: short (key_N), long (user:profile:key_N: more than 16 bytes),
 * utf8 (ключ_N: not ASCII). The images come from shmctl, in
 * -Dshmkv.bench.dir=DIR: kv_KEYS.shmkv, long_KEYS.shmkv and utf8_KEYS.shmkv
 * (the key to "val_N"), num_KEYS.shmkv (key_N to the i64 N). Each side has
 * its own state, so that a run of one side does not build the other's.
 * getInto, getLong and the byte[] key getInto allocate nothing (-prof gc:
 * 0 B/op); get allocates its Value, getString its String.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx8g", "-XX:+UseParallelGC", "--enable-native-access=ALL-UNNAMED"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class LookupBench {
	static final int RING = 1 << 20;

	@State(Scope.Thread)
	public static class Keys {
		@Param({"1000", "1000000", "10000000"})
		public int keys;

		@Param({"short", "long", "utf8"})
		public String kind;

		String[] hit, miss, num;
		byte[][] hitBytes;
		int next;

		String prefix() {
			return switch (kind) {
				case "long" -> "user:profile:key_";
				case "utf8" -> "ключ_";
				default -> "key_";
			};
		}

		@Setup(Level.Trial)
		public void setup() {
			SplittableRandom r = new SplittableRandom(42);
			String p = prefix();
			hit = new String[RING];
			miss = new String[RING];
			num = new String[RING];
			hitBytes = new byte[RING][];
			for (int i = 0; i < RING; i++) {
				hit[i] = p + r.nextInt(keys);
				miss[i] = p + (keys + r.nextInt(keys));
				num[i] = "key_" + r.nextInt(keys);
				hitBytes[i] = hit[i].getBytes(StandardCharsets.UTF_8);
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
			String p = k.prefix();
			for (int i = 0; i < k.keys; i++)
				map.put(p + i, "val_" + i);
		}
	}

	@State(Scope.Benchmark)
	public static class Kv {
		Shmkv kv, num;
		final byte[] dst = new byte[64];

		@Setup(Level.Trial)
		public void setup(Keys k) {
			Path dir = Path.of(System.getProperty("shmkv.bench.dir", "."));
			String name = switch (k.kind) {
				case "long" -> "long_";
				case "utf8" -> "utf8_";
				default -> "kv_";
			};
			kv = Shmkv.open(dir.resolve(name + k.keys + ".shmkv"), Shmkv.Check.HEADER);
			Path n = dir.resolve("num_" + k.keys + ".shmkv");
			num = Files.exists(n) ? Shmkv.open(n, Shmkv.Check.HEADER) : null;
		}

		@TearDown(Level.Trial)
		public void close() {
			kv.close();
			if (num != null)
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

	/** The value's bytes into a caller's buffer: no allocation. */
	@Benchmark
	public int shmkvHit(Kv s, Keys k) {
		return s.kv.getInto(k.hit[k.i()], s.dst);
	}

	@Benchmark
	public int shmkvMiss(Kv s, Keys k) {
		return s.kv.getInto(k.miss[k.i()], s.dst);
	}

	/** byte[] keys (no String to pack or encode): no allocation. */
	@Benchmark
	public int shmkvHitBytesKey(Kv s, Keys k) {
		return s.kv.getInto(k.hitBytes[k.i()], s.dst);
	}

	/** The value in place: a Value (one allocation). */
	@Benchmark
	public Value shmkvHitValue(Kv s, Keys k) {
		return s.kv.get(k.hit[k.i()]);
	}

	/** The value as a new String (decoded: a copy, where HashMap returns its own). */
	@Benchmark
	public String shmkvHitString(Kv s, Keys k) {
		return s.kv.getString(k.hit[k.i()]);
	}

	/** An i64 value (num_KEYS: key_N -> N): no allocation. */
	@Benchmark
	public long shmkvHitLong(Kv s, Keys k) {
		return s.num.getLong(k.num[k.i()]);
	}
}
