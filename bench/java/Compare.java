// Compare - the Java reader (java/) against a HashMap<String,String> and, when
// AxonSys is on the class path (bench/java/build.sh with AxonCache's checkout),
// AxonCache's Java (JNI) binding, in one JVM (bench/java/README.md).
//
// Usage: Compare --keys N (--image PATH | --attach NAME --root DIR)
//                [--rounds R] [--lookups M] [--axon-dir DIR] [--json FILE]
//
// key_N -> val_N for N in [0, keys). Hits: uniform random key_N, N < keys;
// misses: N in [keys, 2 keys). Each stream is 2^20 pre-made keys, cycled.
// Systems: hashmap (get), get (Shmkv.getString), batch (Shmkv.getAll of 64
// keys, per key), axon (CacheReader.getString). After one untimed pass of
// each, every round times every system on both streams, the order rotating,
// as the thread's CPU time per lookup; each system's loop is its own method,
// so that no call site is shared between systems.
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import org.shmkv.Shmkv;
import org.shmkv.Value;

public final class Compare {
	static final int STREAM = 1 << 20; // keys a stream cycles through
	static final int BATCH = 64;

	/** One system: count lookups of keys (cycled), hit or miss; returns a checksum. */
	public interface Sys {
		long run(String[] keys, boolean hit, int count);
	}

	public static void main(String[] args) throws Exception {
		Map<String, String> a = new HashMap<>();
		for (int i = 0; i + 1 < args.length; i += 2) {
			if (!args[i].startsWith("--"))
				usage("unexpected " + args[i]);
			a.put(args[i].substring(2), args[i + 1]);
		}
		if (args.length % 2 != 0 || !a.containsKey("keys") || a.containsKey("image") == a.containsKey("attach"))
			usage("--keys, and --image or --attach, are required");
		int n = Integer.parseInt(a.get("keys"));
		int rounds = Integer.parseInt(a.getOrDefault("rounds", "5"));
		int lookups = Integer.parseInt(a.getOrDefault("lookups", "2000000"));
		lookups -= lookups % BATCH;
		String[] hit = keys(n, false), miss = keys(n, true);

		Shmkv kv = a.containsKey("image") ? Shmkv.open(Path.of(a.get("image")), Shmkv.Check.HEADER)
				: Shmkv.attach(a.get("attach"), Path.of(a.get("root")), Shmkv.Check.HEADER);
		HashMap<String, String> map = new HashMap<>(n * 2);
		for (int i = 0; i < n; i++)
			map.put("key_" + i, "val_" + i);
		Map<String, Sys> sys = new LinkedHashMap<>();
		sys.put("hashmap", (keys, h, count) -> {
			long s = 0;
			for (int i = 0; i < count; i++) {
				String v = map.get(keys[i & (STREAM - 1)]);
				if ((v != null) != h)
					throw new AssertionError("hashmap: " + keys[i & (STREAM - 1)]);
				s += v == null ? 0 : v.length();
			}
			return s;
		});
		sys.put("get", (keys, h, count) -> {
			long s = 0;
			for (int i = 0; i < count; i++) {
				String v = kv.getString(keys[i & (STREAM - 1)]);
				if ((v != null) != h)
					throw new AssertionError("get: " + keys[i & (STREAM - 1)]);
				s += v == null ? 0 : v.length();
			}
			return s;
		});
		List<List<String>> hitBatches = batches(hit), missBatches = batches(miss);
		sys.put("batch", (keys, h, count) -> {
			List<List<String>> bs = keys == hit ? hitBatches : missBatches;
			long s = 0;
			for (int i = 0; i < count; i += BATCH) {
				List<Value> vs = kv.getAll(bs.get((i / BATCH) & (STREAM / BATCH - 1)));
				Value v = vs.get(0);
				if ((v != null) != h)
					throw new AssertionError("batch: " + bs.get(i / BATCH).get(0));
				s += v == null ? 0 : v.byteSize();
			}
			return s;
		});
		String axonDir = a.get("axon-dir");
		if (axonDir != null) {
			Class<?> c;
			try {
				c = Class.forName("AxonSys");
			} catch (ClassNotFoundException e) {
				throw new IllegalStateException("--axon-dir: built without AxonCache (bench/java/build.sh AXON)");
			}
			sys.put("axon", (Sys) c.getConstructor(int.class, Path.class).newInstance(n, Path.of(axonDir)));
		}

		ThreadMXBean mx = ManagementFactory.getThreadMXBean();
		String[][] streams = {hit, miss};
		for (Sys s : sys.values()) // warm-up, and every system answers as it should
			for (int k = 0; k < 2; k++)
				s.run(streams[k], k == 0, STREAM);
		List<String> names = new ArrayList<>(sys.keySet());
		double[][][] ns = new double[2][names.size()][rounds];
		long sink = 0;
		for (int r = 0; r < rounds; r++) {
			System.gc();
			for (int j = 0; j < names.size(); j++) {
				int i = (j + r) % names.size(); // a rotating order
				Sys s = sys.get(names.get(i));
				for (int k = 0; k < 2; k++) {
					long t0 = mx.getCurrentThreadCpuTime();
					sink += s.run(streams[k], k == 0, lookups);
					ns[k][i][r] = (double) (mx.getCurrentThreadCpuTime() - t0) / lookups;
				}
			}
		}
		String[] stream = {"hit", "miss"};
		StringBuilder json = new StringBuilder();
		json.append(String.format(Locale.ROOT, "{\"keys\": %d, \"java\": \"%s\", \"load_end\": \"%s\", \"sink\": %d, \"rows\": [",
				n, System.getProperty("java.version"), load(), sink));
		String sep = "";
		System.out.printf("# keys %d, %d lookups a pass, %d rounds, java %s%n", n, lookups, rounds,
				System.getProperty("java.version"));
		for (int k = 0; k < 2; k++)
			for (int i = 0; i < names.size(); i++) {
				double[] v = ns[k][i];
				double[] sorted = v.clone();
				Arrays.sort(sorted);
				System.out.printf(Locale.ROOT, "%-5s %-8s %8.1f ns (%.1f-%.1f)%n", stream[k], names.get(i),
						sorted[rounds / 2], sorted[0], sorted[rounds - 1]);
				StringBuilder vs = new StringBuilder();
				for (double x : v)
					vs.append(vs.length() == 0 ? "" : ", ").append(String.format(Locale.ROOT, "%.3f", x));
				json.append(sep).append(String.format(Locale.ROOT, "{\"system\": \"%s\", \"stream\": \"%s\", \"ns\": [%s]}",
						names.get(i), stream[k], vs));
				sep = ", ";
			}
		json.append("]}\n");
		if (a.containsKey("json"))
			Files.writeString(Path.of(a.get("json")), json);
	}

	static String[] keys(int n, boolean miss) {
		SplittableRandom r = new SplittableRandom(miss ? 43 : 42);
		String[] k = new String[STREAM];
		for (int i = 0; i < STREAM; i++)
			k[i] = "key_" + ((miss ? n : 0) + r.nextInt(n));
		return k;
	}

	static List<List<String>> batches(String[] keys) {
		List<List<String>> out = new ArrayList<>(STREAM / BATCH);
		for (int i = 0; i < STREAM; i += BATCH)
			out.add(List.of(Arrays.copyOfRange(keys, i, i + BATCH)));
		return out;
	}

	static String load() {
		try {
			return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
		} catch (IOException e) {
			return "?";
		}
	}

	static void usage(String why) {
		System.err.println("Compare: " + why + "\nusage: Compare --keys N (--image PATH | --attach NAME --root DIR)"
				+ " [--rounds R] [--lookups M] [--axon-dir DIR] [--json FILE]");
		System.exit(2);
	}
}
