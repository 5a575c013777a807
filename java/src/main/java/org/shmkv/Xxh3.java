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

	/**
	 * The first 72 bytes of XXH3's default secret (xxhash.h, XXH3_kSecret):
	 * what inputs of at most 16 bytes read of it.
	 */
	private static final byte[] K = {
		(byte) 0xb8, (byte) 0xfe, 0x6c, 0x39, 0x23, (byte) 0xa4, 0x4b, (byte) 0xbe,
		0x7c, 0x01, (byte) 0x81, 0x2c, (byte) 0xf7, 0x21, (byte) 0xad, 0x1c,
		(byte) 0xde, (byte) 0xd4, 0x6d, (byte) 0xe9, (byte) 0x83, (byte) 0x90, (byte) 0x97, (byte) 0xdb,
		0x72, 0x40, (byte) 0xa4, (byte) 0xa4, (byte) 0xb7, (byte) 0xb3, 0x67, 0x1f,
		(byte) 0xcb, 0x79, (byte) 0xe6, 0x4e, (byte) 0xcc, (byte) 0xc0, (byte) 0xe5, 0x78,
		(byte) 0x82, 0x5a, (byte) 0xd0, 0x7d, (byte) 0xcc, (byte) 0xff, 0x72, 0x21,
		(byte) 0xb8, 0x08, 0x46, 0x74, (byte) 0xf7, 0x43, 0x24, (byte) 0x8e,
		(byte) 0xe0, 0x35, (byte) 0x90, (byte) 0xe6, (byte) 0x81, 0x3a, 0x26, 0x4c,
		0x3c, 0x28, 0x52, (byte) 0xbb, (byte) 0x91, (byte) 0xc3, 0x00, (byte) 0xcb,
	};
	private static final long S0_4 = (u64(0) ^ (u64(0) >>> 32)) & 0xFFFFFFFFL, S8_16 = u64(8) ^ u64(16),
			S24_32 = u64(24) ^ u64(32), S40_48 = u64(40) ^ u64(48), S56_64 = u64(56) ^ u64(64);

	private static long u64(int off) {
		return (long) Keys.U64.get(K, off);
	}

	/**
	 * XXH3_64bits_withSeed for one seed (an image's hash_seed): inputs of at
	 * most 16 bytes packed as {@link Keys} packs them (lo: bytes 0-7, zero
	 * past len; tl: the last 8 bytes), hashed by XXH3's short-input paths (xxhash.h
	 * XXH3_len_0to16_64b) with the seed folded into the secret words once,
	 * here; longer inputs by hash4j. Xxh3Test compares both with hash4j and
	 * the C library for every length 0-16.
	 */
	static final class Seeded {
		final long seed;
		final Hasher64 hasher;
		/** The secret words each short path reads, the seed folded in. */
		private final long k0to3, k0, k4to8, k9to16a, k9to16b;

		Seeded(long seed) {
			this.seed = seed;
			hasher = seed == 0 ? SEED0 : Hashing.xxh3_64(seed);
			k0to3 = S0_4 + seed;
			k0 = seed ^ S56_64;
			k4to8 = S8_16 - (seed ^ (long) Integer.reverseBytes((int) seed) << 32);
			k9to16a = S24_32 + seed;
			k9to16b = S40_48 - seed;
		}

		/** The hash of the packed key lo, tl of len <= 16 bytes. */
		long packed(long lo, long tl, int len) {
			// one small method a length class, so that the JIT inlines the
			// one a hot path takes (the three together are over its limit)
			return len > 8 ? packed9to16(lo, tl, len) : len >= 4 ? packed4to8(lo, len) : packed0to3(lo, len);
		}

		/** XXH3_len_9to16_64b. */
		private long packed9to16(long lo, long tl, int len) {
			long a = lo ^ k9to16a, b = tl ^ k9to16b;
			long acc = len + Long.reverseBytes(a) + b + (a * b ^ Math.unsignedMultiplyHigh(a, b));
			acc ^= acc >>> 37;
			acc *= 0x165667919E3779F9L;
			return acc ^ acc >>> 32;
		}

		/** XXH3_len_4to8_64b. */
		private long packed4to8(long lo, int len) {
			long in1 = lo & 0xFFFFFFFFL, in2 = lo >>> 8 * (len - 4) & 0xFFFFFFFFL;
			long h = (in2 + (in1 << 32)) ^ k4to8;
			h ^= Long.rotateLeft(h, 49) ^ Long.rotateLeft(h, 24);
			h *= 0x9FB21C651E98DF25L;
			h ^= (h >>> 35) + len;
			h *= 0x9FB21C651E98DF25L;
			return h ^ h >>> 28;
		}

		/** XXH3_len_1to3_64b and XXH3_len_0 (XXH64_avalanche). */
		private long packed0to3(long lo, int len) {
			long h;
			if (len > 0) {
				long c1 = lo & 0xFF, c2 = lo >>> 8 * (len >> 1) & 0xFF, c3 = lo >>> 8 * (len - 1) & 0xFF;
				h = (c1 << 16 | c2 << 24 | c3 | (long) len << 8) ^ k0to3;
			} else {
				h = k0;
			}
			h ^= h >>> 33;
			h *= 0xC2B2AE3D27D4EB4FL;
			h ^= h >>> 29;
			h *= 0x165667B19E3779F9L;
			return h ^ h >>> 32;
		}

		/** The hash of key[0, len) (any length). */
		long bytes(byte[] key, int len) {
			return hasher.hashBytesToLong(key, 0, len);
		}
	}

	/** A hash4j hasher of XXH3-64 with seed (messages' and tests' one-off hashes). */
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
