package org.shmkv.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.IntToLongFunction;
import org.shmkv.Shmkv;

/**
 * LookupBench's lookups timed by the thread's CPU time (ThreadMXBean), for
 * a machine whose other processes make JMH's wall-clock figures count their
 * time slices (bench/RESULTS.md, "Java"). Rounds rotate the systems' order;
 * the median, min and max of ns per lookup are printed.
 * Usage: CpuTimeBench DIR KEYS [ROUNDS [LOOKUPS [DIR2]]]: DIR2 holds the
 * same images in format v2 (kv_KEYS.shmkv, num_1000000.shmkv), read in the
 * same run.
 */
public final class CpuTimeBench {
	public static void main(String[] a) {
		Path dir = Path.of(a[0]);
		int keys = Integer.parseInt(a[1]);
		int rounds = a.length > 2 ? Integer.parseInt(a[2]) : 5;
		int lookups = a.length > 3 ? Integer.parseInt(a[3]) : 1_000_000;
		HashMap<String, String> map = new HashMap<>(keys * 2);
		for (int i = 0; i < keys; i++)
			map.put("key_" + i, "val_" + i);
		Shmkv kv = Shmkv.open(dir.resolve("kv_" + keys + ".shmkv"), Shmkv.Check.HEADER);
		Shmkv num = Shmkv.open(dir.resolve("num_1000000.shmkv"), Shmkv.Check.HEADER);
		Path dir2 = a.length > 4 ? Path.of(a[4]) : null;
		Shmkv kv2 = dir2 == null ? null : Shmkv.open(dir2.resolve("kv_" + keys + ".shmkv"), Shmkv.Check.HEADER);
		Shmkv num2 = dir2 == null ? null : Shmkv.open(dir2.resolve("num_1000000.shmkv"), Shmkv.Check.HEADER);
		SplittableRandom r = new SplittableRandom(42);
		String[] hit = new String[lookups], miss = new String[lookups], numk = new String[lookups];
		for (int i = 0; i < lookups; i++) {
			hit[i] = "key_" + r.nextInt(keys);
			miss[i] = "key_" + (keys + r.nextInt(keys));
			numk[i] = "key_" + r.nextInt(1_000_000);
		}
		byte[] dst = new byte[64];
		Map<String, IntToLongFunction> systems = new LinkedHashMap<>();
		systems.put("hashmap hit", i -> map.get(hit[i]).length());
		systems.put("hashmap miss", i -> map.get(miss[i]) == null ? 0 : 1);
		systems.put("shmkv getString hit", i -> kv.getString(hit[i]).length());
		systems.put("shmkv getInto hit", i -> kv.getInto(hit[i], dst));
		systems.put("shmkv getInto miss", i -> kv.getInto(miss[i], dst));
		systems.put("shmkv getLong hit", i -> num.getLong(numk[i]));
		if (kv2 != null) {
			systems.put("v2 getString hit", i -> kv2.getString(hit[i]).length());
			systems.put("v2 getInto hit", i -> kv2.getInto(hit[i], dst));
			systems.put("v2 getInto miss", i -> kv2.getInto(miss[i], dst));
			systems.put("v2 getLong hit", i -> num2.getLong(numk[i]));
		}
		run(systems, rounds, lookups);
	}

	/** Runs every system rounds times (order rotating) and prints ns of CPU time per lookup. */
	public static void run(Map<String, IntToLongFunction> systems, int rounds, int lookups) {
		ThreadMXBean mx = ManagementFactory.getThreadMXBean();
		String[] names = systems.keySet().toArray(new String[0]);
		double[][] ns = new double[names.length][rounds + 1];
		long sink = 0;
		for (int round = 0; round <= rounds; round++) { // round 0 warms up
			for (int k = 0; k < names.length; k++) {
				int s = (k + round) % names.length;
				IntToLongFunction f = systems.get(names[s]);
				long t0 = mx.getCurrentThreadCpuTime();
				for (int i = 0; i < lookups; i++)
					sink += f.applyAsLong(i);
				ns[s][round] = (mx.getCurrentThreadCpuTime() - t0) / (double) lookups;
			}
		}
		for (int s = 0; s < names.length; s++) {
			double[] v = Arrays.copyOfRange(ns[s], 1, rounds + 1);
			Arrays.sort(v);
			System.out.printf("%-22s %8.1f ns (%.1f-%.1f)%n", names[s], v[v.length / 2], v[0], v[v.length - 1]);
		}
		System.out.println("(sink " + sink + ")");
	}
}
