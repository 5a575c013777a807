package org.shmkv;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The C reader's advice on an image file's mapping (lib/shmkv/handle.h,
 * shmkv_open_file): madvise(MADV_HUGEPAGE) before the first fault, so that
 * a cold image on ext4 (or another filesystem with large folios) is read
 * into 2 MiB folios and mapped with 2 MiB entries, one TLB entry where 4
 * KiB pages need 512 (bench/RESULTS.md, Java: hits 0.31-0.39 of AxonCache's
 * on 2 MiB entries against 0.42-0.55 on 4 KiB pages).
 *
 * <p>Java has no madvise; the FFM linker can call libc's ({@link Libc}),
 * only where native access is enabled for this code, so the advice is
 * given only there; elsewhere nothing restricted is called and the mapping is
 * whatever the page cache holds (a file another reader advised stays in 2
 * MiB folios for every mapping of it).
 */
final class Advice {
	private Advice() {}

	/** MADV_HUGEPAGE: 14 on every Linux architecture (asm-generic/mman-common.h). */
	private static final int MADV_HUGEPAGE = 14;
	/** Smaller mappings cannot hold a 2 MiB entry. */
	private static final long HUGE = 2L << 20;
	private static final MethodHandle MADVISE = Libc.function("madvise",
			FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));

	/** Whether {@link #hugePages} gives the advice in this JVM (native access enabled, Linux, libc's madvise found). */
	static boolean enabled() {
		return MADVISE != null;
	}

	/**
	 * MADV_HUGEPAGE for a whole file mapping (page-aligned: FileChannel.map
	 * of offset 0), before anything reads it. Advice only: an error (a
	 * kernel without transparent huge pages: EINVAL) changes nothing.
	 */
	static void hugePages(MemorySegment map) {
		if (MADVISE == null || map.byteSize() < HUGE)
			return;
		try {
			int unused = (int) MADVISE.invokeExact(map, map.byteSize(), MADV_HUGEPAGE);
		} catch (Error e) { // the JVM's own trouble is not the advice's to hide
			throw e;
		} catch (Throwable t) { // nothing a caller could do: the mapping works as it is
		}
	}
}
