// AxonSys - AxonCache's Java (JNI) binding as a Compare system: its cache of
// key_N -> val_N written by its CacheWriter as its own CacheBenchmark does
// (cache type 5, offset bits 35, 2 key slots per key) into a directory,
// replaced, then opened with preload. Compiled by bench/java/build.sh only
// when AxonCache's classes are built (bench/java/README.md).
import com.applovin.axoncache.CacheReader;
import com.applovin.axoncache.CacheWriter;
import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

public final class AxonSys implements Compare.Sys {
	private final CacheReader rd;

	public AxonSys(int keys, Path dir) throws IOException {
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
		rd = new CacheReader();
		if (rd.initialize("bench", dir.toString(), ts, true) != 0)
			throw new IOException("AxonCache reader: initialize failed");
	}

	@Override
	public long run(String[] keys, boolean hit, int count) {
		long s = 0;
		for (int i = 0; i < count; i++) {
			String v = rd.getString(keys[i & (Compare.STREAM - 1)]);
			if ((v != null) != hit)
				throw new AssertionError("axon: " + keys[i & (Compare.STREAM - 1)]);
			s += v == null ? 0 : v.length();
		}
		return s;
	}
}
