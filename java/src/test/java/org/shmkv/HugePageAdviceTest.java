package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link Advice}: Shmkv.open gives a cold image file MADV_HUGEPAGE before
 * its first read, so that its page cache is read into 2 MiB folios and
 * mapped with 2 MiB entries (smaps FilePmdMapped), as the C and Go readers
 * do; without native access nothing restricted is called and the JDK prints
 * no warning. The pom runs the tests with native access enabled
 * (--enable-native-access=ALL-UNNAMED): the test itself evicts the file's
 * page cache through the FFM linker (fsync, posix_fadvise DONTNEED).
 */
class HugePageAdviceTest {
	static final int RECORDS = 200_000; // about 8 MiB: several 2 MiB regions
	static Path dir, image;

	@BeforeAll
	static void build() throws Exception {
		// under the build directory (target/), on the checkout's filesystem:
		// java.io.tmpdir may be a tmpfs, whose huge pages are another setting
		dir = Files.createTempDirectory(Files.createDirectories(Path.of("target")), "advice");
		Encoder enc = new Encoder();
		for (int i = 0; i < RECORDS; i++)
			enc.add("key_" + i, Format.STRING, Encoder.str("val_" + i));
		image = dir.resolve("cold.shmkv");
		Files.write(image, enc.build(60_000));
	}

	@AfterAll
	static void cleanUp() throws Exception {
		try (var files = Files.list(dir)) {
			for (Path f : files.toList())
				Files.delete(f);
		}
		Files.delete(dir);
	}

	/** libc through the FFM linker: only this test's JVM has native access (a nested class: main() never loads it). */
	@SuppressWarnings("restricted")
	static final class Native {
		static final Linker L = Linker.nativeLinker();
		static final MethodHandle OPEN = L.downcallHandle(L.defaultLookup().find("open").orElseThrow(),
				FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT),
				Linker.Option.firstVariadicArg(2));
		static final MethodHandle CLOSE = L.downcallHandle(L.defaultLookup().find("close").orElseThrow(),
				FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
		static final MethodHandle FADVISE = L.downcallHandle(L.defaultLookup().find("posix_fadvise").orElseThrow(),
				FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG,
						ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
		static final MethodHandle MADVISE = L.downcallHandle(L.defaultLookup().find("madvise").orElseThrow(),
				FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
						ValueLayout.JAVA_INT));

		/** Drops p's page cache: written back first (force), then POSIX_FADV_DONTNEED. */
		static void evict(Path p) throws Throwable {
			try (FileChannel ch = FileChannel.open(p, StandardOpenOption.WRITE)) {
				ch.force(true);
			}
			try (Arena a = Arena.ofConfined()) {
				int fd = (int) OPEN.invokeExact(a.allocateFrom(p.toString()), 0 /* O_RDONLY */, 0);
				assertTrue(fd >= 0, "open " + p);
				int err = (int) FADVISE.invokeExact(fd, 0L, 0L, 4 /* POSIX_FADV_DONTNEED */);
				int unused = (int) CLOSE.invokeExact(fd);
				assertEquals(0, err, "posix_fadvise DONTNEED");
			}
		}
	}

	/** kB of the mapping of file mapped with 2 MiB entries (smaps FilePmdMapped), -1 when it is not mapped. */
	static long filePmdKB(Path file) throws Exception {
		String name = file.toAbsolutePath().toString();
		boolean in = false;
		long kb = -1;
		for (String l : Files.readAllLines(Path.of("/proc/self/smaps"))) {
			if (l.matches("^[0-9a-f]+-[0-9a-f]+ .*"))
				in = l.endsWith(" " + name);
			else if (in && l.startsWith("FilePmdMapped:"))
				kb = Math.max(kb, 0) + Long.parseLong(l.replaceAll("[^0-9]", ""));
		}
		return kb;
	}

	/** Reads one byte a page of seg: every page faulted in. */
	static long touch(MemorySegment seg) {
		long s = 0;
		for (long i = 0; i < seg.byteSize(); i += 4096)
			s += seg.get(ValueLayout.JAVA_BYTE, i);
		return s;
	}

	@Test
	void coldImageFileIsMappedWithHugePages() throws Throwable {
		assertTrue(Advice.enabled(), "the tests run with native access (the pom's argLine): Advice must be on");
		// the probe: can a cold file here be read into 2 MiB folios at all?
		Native.evict(image);
		long probe;
		try (Arena a = Arena.ofShared(); FileChannel ch = FileChannel.open(image, StandardOpenOption.READ)) {
			MemorySegment m = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), a);
			int unused = (int) Native.MADVISE.invokeExact(m, m.byteSize(), 14 /* MADV_HUGEPAGE */);
			touch(m);
			probe = filePmdKB(image);
		}
		Assumptions.assumeTrue(probe > 0, image + ": a cold file read under MADV_HUGEPAGE gets no 2 MiB mapping "
				+ "here (transparent huge pages off, or a filesystem without large folios)");
		Native.evict(image);
		try (Shmkv s = Shmkv.open(image)) { // Check.CHECKSUMS: reads every byte once
			for (int i = 0; i < RECORDS; i += 997)
				assertEquals("val_" + i, s.getString("key_" + i));
			long kb = filePmdKB(image);
			assertTrue(kb > 0, "Shmkv.open of a cold image: " + kb + " kB mapped with 2 MiB entries (the probe: "
					+ probe + " kB)");
		}
	}

	/** A JVM without native access: the reader works, gives no advice, and the JDK warns of nothing. */
	@Test
	void withoutNativeAccessNothingRestrictedIsCalled() throws Exception {
		String java = ProcessHandle.current().info().command().orElseThrow();
		Process p = new ProcessBuilder(List.of(java, "-cp", System.getProperty("java.class.path"),
				HugePageAdviceTest.class.getName(), image.toString())).redirectErrorStream(true).start();
		String out = new String(p.getInputStream().readAllBytes());
		assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the child JVM did not exit: " + out);
		assertEquals(0, p.exitValue(), out);
		assertTrue(out.contains("advice=false val_7"), out);
		assertFalse(out.contains("WARNING"), "the JDK warned: " + out);
	}

	/** The child of {@link #withoutNativeAccessNothingRestrictedIsCalled}. */
	public static void main(String[] a) {
		try (Shmkv s = Shmkv.open(Path.of(a[0]))) {
			System.out.println("advice=" + Advice.enabled() + " " + s.getString("key_7"));
		}
	}
}
