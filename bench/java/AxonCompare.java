// AxonCompare - shmkv's Java reader against AxonCache's Java (JNI) binding
// and a HashMap<String,String>, in one JVM (bench/java/README.md; issue 25
// §4). Our own driver: it uses AxonCache's public Java API (CacheWriter,
// CacheReader) from classes built outside this tree by bench/java/build.sh,
// and this tree's CpuTimeBench.run for the timing (the thread's CPU time per
// lookup, rounds rotating the systems' order, median min-max).
//
// Usage: AxonCompare KEYS ROUNDS V2DIR [V1DIR [LOOKUPS]]
//   V2DIR/kv_KEYS.shmkv: key_N -> val_N, N in [0, KEYS), format 2 (the
//   builder's default); V1DIR (or "-"): the same in format 1. The AxonCache
//   cache is written as its own CacheBenchmark writes one (cache type 5,
//   offset bits 35, 2 key slots per key) into -Daxon.dir (default
//   /tmp/shmkv-axon-java/cache, replaced), and read with preload.
//   -Dshmkv.only=v2: shmkv v2 and HashMap only (no AxonCache in the JVM).

import com.applovin.axoncache.CacheReader;
import com.applovin.axoncache.CacheWriter;
import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.IntToLongFunction;
import java.util.stream.Stream;
import org.shmkv.Shmkv;
import org.shmkv.bench.CpuTimeBench;

public final class AxonCompare {
	public static void main(String[] a) throws IOException {
		int keys = Integer.parseInt(a[0]);
		int rounds = Integer.parseInt(a[1]);
		Path v2dir = Path.of(a[2]);
		Path v1dir = a.length > 3 && !a[3].equals("-") ? Path.of(a[3]) : null;
		int lookups = a.length > 4 ? Integer.parseInt(a[4]) : 1_000_000;
		boolean axon = !"v2".equals(System.getProperty("shmkv.only"));

		SplittableRandom r = new SplittableRandom(42); // the key streams of CpuTimeBench
		String[] hit = new String[lookups], miss = new String[lookups];
		for (int i = 0; i < lookups; i++) {
			hit[i] = "key_" + r.nextInt(keys);
			miss[i] = "key_" + (keys + r.nextInt(keys));
		}
		HashMap<String, String> map = new HashMap<>(keys * 2);
		for (int i = 0; i < keys; i++)
			map.put("key_" + i, "val_" + i);
		Shmkv kv2 = Shmkv.open(v2dir.resolve("kv_" + keys + ".shmkv"), Shmkv.Check.HEADER);
		Shmkv kv1 = v1dir == null ? null : Shmkv.open(v1dir.resolve("kv_" + keys + ".shmkv"), Shmkv.Check.HEADER);
		CacheReader ax = axon ? axonCache(keys) : null;

		// every system must answer the same before it is timed
		for (int i = 0; i < 1000; i++) {
			String want = map.get(hit[i]);
			check(want.equals(kv2.getString(hit[i])), "v2", hit[i]);
			check(kv2.getString(miss[i]) == null, "v2 miss", miss[i]);
			if (kv1 != null)
				check(want.equals(kv1.getString(hit[i])), "v1", hit[i]);
			if (ax != null) {
				check(want.equals(ax.getString(hit[i])), "AxonCache", hit[i]);
				check(ax.getString(miss[i]) == null, "AxonCache miss", miss[i]);
			}
		}

		byte[] dst = new byte[64];
		Map<String, IntToLongFunction> sys = new LinkedHashMap<>();
		sys.put("hashmap hit", i -> map.get(hit[i]).length());
		sys.put("hashmap miss", i -> map.get(miss[i]) == null ? 0 : 1);
		sys.put("v2 getInto hit", i -> kv2.getInto(hit[i], dst));
		sys.put("v2 getString hit", i -> kv2.getString(hit[i]).length());
		sys.put("v2 getInto miss", i -> kv2.getInto(miss[i], dst));
		if (kv1 != null)
			sys.put("v1 getInto hit", i -> kv1.getInto(hit[i], dst));
		if (ax != null) {
			sys.put("axon getString hit", i -> ax.getString(hit[i]).length());
			sys.put("axon containsKey hit", i -> ax.containsKey(hit[i]) ? 1 : 0);
			sys.put("axon getString miss", i -> ax.getString(miss[i]) == null ? 0 : 1);
		}
		System.out.printf("keys %d, %d lookups a pass, %d rounds, load %s%n", keys, lookups, rounds, load());
		CpuTimeBench.run(sys, rounds, lookups);
		System.out.println("load " + load());
	}

	private static void check(boolean ok, String what, String key) {
		if (!ok)
			throw new AssertionError(what + ": wrong answer for " + key);
	}

	private static String load() {
		try {
			return Files.readString(Path.of("/proc/loadavg")).trim();
		} catch (IOException e) {
			return "?";
		}
	}

	/** key_N -> val_N written by AxonCache's CacheWriter as its CacheBenchmark does, then opened with preload. */
	private static CacheReader axonCache(int keys) throws IOException {
		Path dir = Path.of(System.getProperty("axon.dir", "/tmp/shmkv-axon-java/cache"));
		if (Files.exists(dir))
			try (Stream<Path> w = Files.walk(dir)) {
				w.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
			}
		Files.createDirectories(dir);
		File props = dir.resolve("axon.properties").toFile();
		try (PrintWriter out = new PrintWriter(props)) {
			out.println("ccache.destination_folder=" + dir);
			out.println("ccache.type=5");
			out.println("ccache.offset.bits=35");
		}
		try (CacheWriter w = new CacheWriter()) {
			if (w.initialize("bench", props.getPath(), 2L * keys) != 0)
				throw new IOException("AxonCache writer: " + w.getLastError());
			for (int i = 0; i < keys; i++)
				w.insertKey("key_" + i, "val_" + i, (byte) 0);
			if (w.finishCacheCreation() != 0)
				throw new IOException("AxonCache finish: " + w.getLastError());
		}
		String ts = "1700000000";
		Files.move(dir.resolve("bench.cache"), dir.resolve("bench." + ts + ".cache"));
		CacheReader rd = new CacheReader();
		if (rd.initialize("bench", dir.toString(), ts, true) != 0)
			throw new IOException("AxonCache reader: initialize failed");
		return rd;
	}
}
