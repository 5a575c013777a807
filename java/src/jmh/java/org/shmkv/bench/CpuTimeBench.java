package org.shmkv.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import org.shmkv.Shmkv;
import org.shmkv.Value;

/**
 * LookupBench's lookups timed by the thread's CPU time (ThreadMXBean), for a
 * machine whose other processes make wall-clock figures count their time
 * slices (the shared development machine): each system's loop is a method
 * of its own (monomorphic, compiled alone), rounds rotate the systems'
 * order, and the median, min and max of ns per lookup are printed with
 * each system's ratio to its HashMap baseline in the same rounds.
 *
 * <p>Usage: {@code CpuTimeBench DIR KEYS [ROUNDS [LOOKUPS [REGEX]]]}: REGEX
 * keeps the systems whose names it finds (and their baselines), for a JVM
 * of their own, as a JMH fork is, where the JIT's profile is theirs alone.
 * DIR holds the
 * images of LookupBench (java/README.md, "Benchmark"): kv_KEYS.shmkv
 * (key_N to val_N), and when present num_KEYS.shmkv (key_N to the i64 N),
 * long_KEYS.shmkv (a key of more than 16 bytes: user:profile:key_N) and
 * utf8_KEYS.shmkv (a non-ASCII key: ключ_N); each against a
 * HashMap&lt;String,String&gt; of its keys; and kv_KEYS.delta (DeltaBench's:
 * a delta of 1% of the keys), read through against the base alone, and
 * kv_KEYS.top (a top delta over it) read through both against the one.
 */
public final class CpuTimeBench {
	private CpuTimeBench() {}

	/** One system: lookups i in [0, n) of its keys, a sink of what they read. */
	abstract static class Loop {
		final String name, baseline;

		Loop(String name, String baseline) {
			this.name = name;
			this.baseline = baseline;
		}

		abstract long run(int n);
	}

	static final int RING = 1 << 20;

	/** The ring of lookups: key N uniform in [0, keys) (hits) or [keys, 2 keys) (misses). */
	static String[] keys(String prefix, int keys, boolean miss, long seed) {
		SplittableRandom r = new SplittableRandom(seed);
		String[] k = new String[RING];
		for (int i = 0; i < RING; i++)
			k[i] = prefix + (miss ? keys + r.nextInt(keys) : r.nextInt(keys));
		return k;
	}

	static HashMap<String, String> map(String prefix, int keys) {
		HashMap<String, String> m = new HashMap<>(keys * 2);
		for (int i = 0; i < keys; i++)
			m.put(prefix + i, "val_" + i);
		return m;
	}

	/** The systems of one key set: HashMap hits and misses, then the reader's. */
	static void add(List<Loop> loops, String set, Path img, String prefix, int keys, boolean all) {
		if (!Files.exists(img))
			return;
		HashMap<String, String> map = map(prefix, keys);
		String[] hit = keys(prefix, keys, false, 42), miss = keys(prefix, keys, true, 43);
		Shmkv kv = Shmkv.open(img, Shmkv.Check.HEADER);
		byte[] dst = new byte[64];
		String mh = set + " HashMap hit", mm = set + " HashMap miss";
		loops.add(new Loop(mh, null) {
			long run(int n) {
				long s = 0;
				for (int i = 0; i < n; i++)
					s += map.get(hit[i & (RING - 1)]).length();
				return s;
			}
		});
		loops.add(new Loop(mm, null) {
			long run(int n) {
				long s = 0;
				for (int i = 0; i < n; i++)
					s += map.get(miss[i & (RING - 1)]) == null ? 1 : 0;
				return s;
			}
		});
		loops.add(new Loop(set + " getInto hit", mh) {
			long run(int n) {
				long s = 0;
				for (int i = 0; i < n; i++)
					s += kv.getInto(hit[i & (RING - 1)], dst);
				return s;
			}
		});
		loops.add(new Loop(set + " getInto miss", mm) {
			long run(int n) {
				long s = 0;
				for (int i = 0; i < n; i++)
					s += kv.getInto(miss[i & (RING - 1)], dst);
				return s;
			}
		});
		if (!all)
			return;
		loops.add(new Loop(set + " get hit", mh) {
			long run(int n) {
				long s = 0;
				for (int i = 0; i < n; i++)
					s += kv.get(hit[i & (RING - 1)]).byteSize();
				return s;
			}
		});
		loops.add(new Loop(set + " getString hit", mh) {
			long run(int n) {
				long s = 0;
				for (int i = 0; i < n; i++)
					s += kv.getString(hit[i & (RING - 1)]).length();
				return s;
			}
		});
		byte[][] hitBytes = new byte[RING][];
		for (int i = 0; i < RING; i++)
			hitBytes[i] = hit[i].getBytes(StandardCharsets.UTF_8);
		loops.add(new Loop(set + " getInto byte[] hit", mh) {
			long run(int n) {
				long s = 0;
				for (int i = 0; i < n; i++)
					s += kv.getInto(hitBytes[i & (RING - 1)], dst);
				return s;
			}
		});
	}

	/**
	 * DeltaBench's lookups (a get through a delta of 1% of the keys, and the
	 * same keys of the base alone), when DIR has kv_KEYS.delta: base hits
	 * and misses through the delta against the base alone's, delta hits
	 * against the base alone's hits of other keys (the goal: no slower) and
	 * of the same keys. With kv_KEYS.top too (a top delta over that one,
	 * FORMAT.md §19.6): base hits and misses through both against the same
	 * through the one delta (what the top adds), and hits of the top's keys
	 * against the base alone's hits of other keys.
	 */
	static void addDelta(List<Loop> loops, Path img, Path delta, Path top, int keys) {
		if (!Files.exists(img) || !Files.exists(delta))
			return;
		Shmkv plain = Shmkv.open(img, Shmkv.Check.HEADER), through = Shmkv.open(img, delta, Shmkv.Check.HEADER);
		Shmkv both = Files.exists(top) ? Shmkv.open(img, delta, top, Shmkv.Check.HEADER) : null;
		SplittableRandom r = new SplittableRandom(45);
		String[] base = new String[RING], dk = new String[RING], miss = new String[RING], tk = new String[RING];
		SplittableRandom rt = new SplittableRandom(46); // its own: the other rings as before
		for (int i = 0; i < RING; i++) {
			int n = r.nextInt(keys);
			base[i] = "key_" + (n % 100 == 0 ? n + 1 : n);
			dk[i] = "key_" + 100 * r.nextInt(keys / 100);
			miss[i] = "key_" + (keys + r.nextInt(keys));
			tk[i] = "key_" + 10_000 * rt.nextInt(Math.max(1, keys / 10_000)); // the top's upserts
		}
		byte[] dst = new byte[64];
		String[][] sets = {base, dk, miss};
		String[] names = {"base-key hit", "delta-key hit", "miss"};
		for (int k = 0; k < 3; k++) {
			String[] ring = sets[k];
			String p = "plain " + names[k];
			loops.add(new Loop(p, null) {
				long run(int n) {
					long s = 0;
					for (int i = 0; i < n; i++)
						s += plain.getInto(ring[i & (RING - 1)], dst);
					return s;
				}
			});
			loops.add(new Loop("1% delta " + names[k], k == 1 ? "plain base-key hit" : p) {
				long run(int n) {
					long s = 0;
					for (int i = 0; i < n; i++)
						s += through.getInto(ring[i & (RING - 1)], dst);
					return s;
				}
			});
			if (both != null && k != 1)
				loops.add(new Loop("lower+top " + names[k], "1% delta " + names[k]) {
					long run(int n) {
						long s = 0;
						for (int i = 0; i < n; i++)
							s += both.getInto(ring[i & (RING - 1)], dst);
						return s;
					}
				});
		}
		if (both != null)
			loops.add(new Loop("lower+top top-key hit", "plain base-key hit") {
				long run(int n) {
					long s = 0;
					for (int i = 0; i < n; i++)
						s += both.getInto(tk[i & (RING - 1)], dst);
					return s;
				}
			});
		// the same through getAll, 64 keys a call (ns a key): the batch's
		// pipeline through deltas
		for (int k = 0; k < 3; k++) {
			byte[][][] w = windows(sets[k]);
			String p = "plain " + names[k] + " batch";
			loops.add(batchLoop(p, null, plain, w));
			loops.add(batchLoop("1% delta " + names[k] + " batch", k == 1 ? "plain base-key hit batch" : p, through, w));
			if (both != null && k != 1)
				loops.add(batchLoop("lower+top " + names[k] + " batch", "1% delta " + names[k] + " batch", both, w));
		}
		if (both != null)
			loops.add(batchLoop("lower+top top-key hit batch", "plain base-key hit batch", both, windows(tk)));
	}

	/** A ring of keys as getAll's arguments: windows of 64 keys' UTF-8 bytes. */
	static byte[][][] windows(String[] ring) {
		byte[][][] w = new byte[RING / 64][64][];
		for (int i = 0; i < RING; i++)
			w[i / 64][i % 64] = ring[i].getBytes(StandardCharsets.UTF_8);
		return w;
	}

	/** getAll of db over the windows w, n keys a run (n a multiple of 64 or not: whole windows). */
	static Loop batchLoop(String name, String baseline, Shmkv db, byte[][][] w) {
		return new Loop(name, baseline) {
			long run(int n) {
				long s = 0;
				for (int i = 0; i < n; i += 64) {
					Value[] v = db.getAll(w[(i / 64) & (RING / 64 - 1)]);
					s += v[0] == null ? 1 : v[0].byteSize();
				}
				return s;
			}
		};
	}

	public static void main(String[] a) {
		Path dir = Path.of(a[0]);
		int keys = Integer.parseInt(a[1]);
		int rounds = a.length > 2 ? Integer.parseInt(a[2]) : 5;
		int lookups = a.length > 3 ? Integer.parseInt(a[3]) : 1_000_000;
		List<Loop> loops = new ArrayList<>();
		add(loops, "key_N", dir.resolve("kv_" + keys + ".shmkv"), "key_", keys, true);
		Path num = dir.resolve("num_" + keys + ".shmkv");
		if (Files.exists(num)) {
			Shmkv db = Shmkv.open(num, Shmkv.Check.HEADER);
			String[] hit = keys("key_", keys, false, 44);
			loops.add(new Loop("key_N getLong hit", "key_N HashMap hit") {
				long run(int n) {
					long s = 0;
					for (int i = 0; i < n; i++)
						s += db.getLong(hit[i & (RING - 1)]);
					return s;
				}
			});
		}
		addDelta(loops, dir.resolve("kv_" + keys + ".shmkv"), dir.resolve("kv_" + keys + ".delta"),
				dir.resolve("kv_" + keys + ".top"), keys);
		add(loops, "long", dir.resolve("long_" + keys + ".shmkv"), "user:profile:key_", keys, false);
		add(loops, "utf8", dir.resolve("utf8_" + keys + ".shmkv"), "ключ_", keys, false);
		if (a.length > 4) {
			java.util.regex.Pattern p = java.util.regex.Pattern.compile(a[4]);
			List<String> keep = new ArrayList<>();
			for (Loop l : loops)
				if (p.matcher(l.name).find()) {
					keep.add(l.name);
					if (l.baseline != null)
						keep.add(l.baseline);
				}
			loops.removeIf(l -> !keep.contains(l.name));
		}
		run(loops, rounds, lookups);
	}

	/**
	 * Runs systems (name to the lookup of index i) as {@link #run(List, int, int)}
	 * does, without baselines: for drivers outside this tree's build
	 * (bench/java's AxonCompare).
	 */
	public static void run(java.util.Map<String, java.util.function.IntToLongFunction> systems, int rounds,
			int lookups) {
		List<Loop> loops = new ArrayList<>();
		systems.forEach((name, f) -> loops.add(new Loop(name, null) {
			long run(int n) {
				long s = 0;
				for (int i = 0; i < n; i++)
					s += f.applyAsLong(i);
				return s;
			}
		}));
		run(loops, rounds, lookups);
	}

	/** Runs every loop rounds times (order rotating) and prints ns of CPU time per lookup. */
	static void run(List<Loop> loops, int rounds, int lookups) {
		ThreadMXBean mx = ManagementFactory.getThreadMXBean();
		double[][] ns = new double[loops.size()][rounds];
		long sink = 0;
		for (int round = -2; round < rounds; round++) { // two rounds warm up
			for (int k = 0; k < loops.size(); k++) {
				int s = Math.floorMod(k + round, loops.size());
				Loop l = loops.get(s);
				long t0 = mx.getCurrentThreadCpuTime();
				sink += l.run(lookups);
				if (round >= 0)
					ns[s][round] = (mx.getCurrentThreadCpuTime() - t0) / (double) lookups;
			}
		}
		for (int s = 0; s < loops.size(); s++) {
			Loop l = loops.get(s);
			double[] v = ns[s].clone();
			Arrays.sort(v);
			String ratio = "";
			if (l.baseline != null) {
				int b = 0;
				while (!loops.get(b).name.equals(l.baseline))
					b++;
				double[] r = new double[rounds];
				for (int i = 0; i < rounds; i++)
					r[i] = ns[s][i] / ns[b][i];
				Arrays.sort(r);
				ratio = String.format(Locale.ROOT, "  %.2fx %s (%.2f-%.2f)", r[rounds / 2], l.baseline, r[0],
						r[rounds - 1]);
			}
			System.out.printf(Locale.ROOT, "%-26s %8.1f ns (%.1f-%.1f)%s%n", l.name, v[rounds / 2], v[0],
					v[rounds - 1], ratio);
		}
		System.out.println("(sink " + sink + ")");
	}
}
