package org.shmkv.bench;

import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.*;
import org.shmkv.Shmkv;

/**
 * A get through a delta holding 1% of the keys against the same get of the
 * base alone (FORMAT.md §19; java/README.md, "Benchmark"): key_N -> val_N
 * from shmctl (kv_KEYS.shmkv in -Dshmkv.bench.dir=DIR, as LookupBench's),
 * and kv_KEYS.delta, key_N to "new_N" for N a multiple of 100 (BenchDeltas
 * writes it). Uniform random keys of three kinds, one thread, getInto (no
 * allocation): base hits (N not a multiple of 100: the delta's filter, then
 * the base), delta hits (N a multiple of 100: the filter, then the delta's
 * bucket) and misses (N in [keys, 2 keys): the filter, then the base). Each
 * kind has its baseline, "plain", the same keys from the base alone (a delta
 * key's base value). The goals: through a delta, base hits and misses within
 * 1.1x of plain; delta hits no slower than plain base hits. "levels" reads
 * the base through that delta as the lower and kv_KEYS.top (BenchDeltas'
 * too) as the top over it (FORMAT.md §19.6: a protocol 2 cache with a top
 * overlay): base hits and misses (the top's filter, then the lower's, then
 * the base), against "through", and hits of the top's upserts (key_N, N a
 * multiple of 10,000).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx4g", "-XX:+UseParallelGC", "--enable-native-access=ALL-UNNAMED"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class DeltaBench {
	static final int RING = 1 << 20;

	@State(Scope.Thread)
	public static class Keys {
		@Param({"1000000"})
		public int keys;

		String[] baseKey, deltaKey, miss, topKey;
		int next;

		@Setup(Level.Trial)
		public void setup() {
			SplittableRandom r = new SplittableRandom(42);
			baseKey = new String[RING];
			deltaKey = new String[RING];
			miss = new String[RING];
			topKey = new String[RING];
			SplittableRandom rt = new SplittableRandom(46); // its own: the other rings as before
			for (int i = 0; i < RING; i++) {
				topKey[i] = "key_" + 10_000 * rt.nextInt(Math.max(1, keys / 10_000));
				int n = r.nextInt(keys);
				baseKey[i] = "key_" + (n % 100 == 0 ? n + 1 : n);
				deltaKey[i] = "key_" + 100 * r.nextInt(keys / 100);
				miss[i] = "key_" + (keys + r.nextInt(keys));
			}
		}

		int i() {
			return next = (next + 1) & (RING - 1);
		}
	}

	@State(Scope.Benchmark)
	public static class Readers {
		Shmkv plain, through, levels;
		final byte[] dst = new byte[64];

		@Setup(Level.Trial)
		public void setup(Keys k) {
			Path dir = Path.of(System.getProperty("shmkv.bench.dir", "."));
			Path base = dir.resolve("kv_" + k.keys + ".shmkv");
			plain = Shmkv.open(base, Shmkv.Check.HEADER);
			through = Shmkv.open(base, dir.resolve("kv_" + k.keys + ".delta"), Shmkv.Check.HEADER);
			levels = Shmkv.open(base, dir.resolve("kv_" + k.keys + ".delta"), dir.resolve("kv_" + k.keys + ".top"),
					Shmkv.Check.HEADER);
		}

		@TearDown(Level.Trial)
		public void close() {
			plain.close();
			through.close();
			levels.close();
		}
	}

	@Benchmark
	public int plainBaseHit(Readers s, Keys k) {
		return s.plain.getInto(k.baseKey[k.i()], s.dst);
	}

	@Benchmark
	public int throughBaseHit(Readers s, Keys k) {
		return s.through.getInto(k.baseKey[k.i()], s.dst);
	}

	/** The delta's keys read from the base alone (their old values): the baseline of deltaHit. */
	@Benchmark
	public int plainDeltaKeyHit(Readers s, Keys k) {
		return s.plain.getInto(k.deltaKey[k.i()], s.dst);
	}

	@Benchmark
	public int throughDeltaHit(Readers s, Keys k) {
		return s.through.getInto(k.deltaKey[k.i()], s.dst);
	}

	@Benchmark
	public int plainMiss(Readers s, Keys k) {
		return s.plain.getInto(k.miss[k.i()], s.dst);
	}

	@Benchmark
	public int throughMiss(Readers s, Keys k) {
		return s.through.getInto(k.miss[k.i()], s.dst);
	}

	@Benchmark
	public int levelsBaseHit(Readers s, Keys k) {
		return s.levels.getInto(k.baseKey[k.i()], s.dst);
	}

	@Benchmark
	public int levelsTopHit(Readers s, Keys k) {
		return s.levels.getInto(k.topKey[k.i()], s.dst);
	}

	@Benchmark
	public int levelsMiss(Readers s, Keys k) {
		return s.levels.getInto(k.miss[k.i()], s.dst);
	}
}
