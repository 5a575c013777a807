package org.shmkv.bench;

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
 * num_1000000.shmkv (key_N -> the i64 N).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Xmx6g", "-XX:+UseParallelGC"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class LookupBench {
	static final int RING = 1 << 20;

	@Param({"1000000", "10000000"})
	public int keys;

	String[] hitKeys, missKeys, numKeys;
	byte[][] hitBytes;
	HashMap<String, String> map;
	Shmkv kv, num;
	int next;
	final byte[] dst = new byte[64];

	@Setup(Level.Trial)
	public void setup() {
		Path dir = Path.of(System.getProperty("shmkv.bench.dir", "."));
		kv = Shmkv.open(dir.resolve("kv_" + keys + ".shmkv"), Shmkv.Check.HEADER);
		num = Shmkv.open(dir.resolve("num_1000000.shmkv"), Shmkv.Check.HEADER);
		map = new HashMap<>(keys * 2);
		for (int i = 0; i < keys; i++)
			map.put("key_" + i, "val_" + i);
		SplittableRandom r = new SplittableRandom(42);
		hitKeys = new String[RING];
		missKeys = new String[RING];
		numKeys = new String[RING];
		hitBytes = new byte[RING][];
		for (int i = 0; i < RING; i++) {
			hitKeys[i] = "key_" + r.nextInt(keys);
			missKeys[i] = "key_" + (keys + r.nextInt(keys));
			numKeys[i] = "key_" + r.nextInt(1_000_000);
			hitBytes[i] = hitKeys[i].getBytes(java.nio.charset.StandardCharsets.US_ASCII);
		}
	}

	@TearDown(Level.Trial)
	public void close() {
		kv.close();
		num.close();
	}

	int i() {
		return next = (next + 1) & (RING - 1);
	}

	@Benchmark
	public String hashMapHit() {
		return map.get(hitKeys[i()]);
	}

	@Benchmark
	public String hashMapMiss() {
		return map.get(missKeys[i()]);
	}

	/** The value as a new String (decoded, like HashMap's but a copy). */
	@Benchmark
	public String shmkvHitString() {
		return kv.getString(hitKeys[i()]);
	}

	/** The value's bytes into a caller's buffer: no allocation. */
	@Benchmark
	public int shmkvHitBytes() {
		return kv.getInto(hitKeys[i()], dst);
	}

	/** byte[] keys (no String encoding) and the value's bytes into a buffer. */
	@Benchmark
	public int shmkvHitBytesKey() {
		return kv.getInto(hitBytes[i()], dst);
	}

	@Benchmark
	public int shmkvMiss() {
		return kv.getInto(missKeys[i()], dst);
	}

	/** An i64 value (num_1000000: key_N -> N, whatever keys is). */
	@Benchmark
	public long shmkvHitLong() {
		return num.getLong(numKeys[i()]);
	}
}
