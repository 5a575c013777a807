package org.shmkv;

import com.dynatrace.hash4j.hashing.HashStream64;
import com.dynatrace.hash4j.hashing.Hasher64;
import com.dynatrace.hash4j.hashing.Hashing;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * XXH3-64 (FORMAT.md §2): xxHash's XXH3_64bits_withSeed, from hash4j
 * (Xxh3Test compares it with values of the C library). A hasher per seed is
 * made once: hash4j derives the seeded secret when it is built.
 */
final class Xxh3 {
	private Xxh3() {}

	static final Hasher64 SEED0 = Hashing.xxh3_64();
	private static final int CHUNK = 1 << 16;

	static Hasher64 hasher(long seed) {
		return seed == 0 ? SEED0 : Hashing.xxh3_64(seed);
	}

	/** XXH3-64 seed 0 of image bytes [off, off + len), streamed in chunks (sections may exceed 2 GiB). */
	static long checksum(MemorySegment s, long off, long len) {
		if (len <= CHUNK) {
			byte[] b = new byte[(int) len];
			MemorySegment.copy(s, ValueLayout.JAVA_BYTE, off, b, 0, (int) len);
			return SEED0.hashBytesToLong(b);
		}
		HashStream64 h = SEED0.hashStream();
		byte[] b = new byte[CHUNK];
		for (long done = 0; done < len; ) {
			int n = (int) Math.min(CHUNK, len - done);
			MemorySegment.copy(s, ValueLayout.JAVA_BYTE, off + done, b, 0, n);
			h.putBytes(b, 0, n);
			done += n;
		}
		return h.getAsLong();
	}
}
