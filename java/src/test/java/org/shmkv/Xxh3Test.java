package org.shmkv;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * XXH3 against xxHash's C library: xxh3_reference.txt holds
 * XXH3_64bits_withSeed (libxxhash 0.8.1) of the bytes (i * 31 + 7) & 0xff,
 * lengths 0..5000 across every internal size class, three seeds; and the
 * worked examples of FORMAT.md §16.
 */
class Xxh3Test {
	static byte[] pattern(int n) {
		byte[] b = new byte[n];
		for (int i = 0; i < n; i++)
			b[i] = (byte) (i * 31 + 7);
		return b;
	}

	@Test
	void equalsTheCLibrary() throws Exception {
		byte[] b = pattern(5000);
		int n = 0;
		try (BufferedReader r = new BufferedReader(new InputStreamReader(
				Xxh3Test.class.getResourceAsStream("/xxh3_reference.txt"), StandardCharsets.US_ASCII))) {
			for (String line; (line = r.readLine()) != null; n++) {
				String[] f = line.split(" ");
				long seed = Long.parseUnsignedLong(f[0], 16);
				int len = Integer.parseInt(f[1]);
				long want = Long.parseUnsignedLong(f[2], 16);
				assertEquals(want, Xxh3.hasher(seed).hashBytesToLong(b, 0, len), "seed " + f[0] + " len " + len);
				if (seed == 0)
					assertEquals(want, Xxh3.checksum(MemorySegment.ofArray(b), 0, len), "checksum len " + len);
			}
		}
		assertTrue(n >= 120, n + " reference lines");
	}

	@Test
	void streamedChecksumOfLargeRanges() {
		// the chunked path (over 64 KiB) equals the one-shot hash
		byte[] b = pattern(300_001);
		for (int len : new int[] {65_536, 65_537, 131_072, 300_001})
			assertEquals(Xxh3.SEED0.hashBytesToLong(b, 0, len), Xxh3.checksum(MemorySegment.ofArray(b), 0, len));
	}

	@Test
	void formatExamples() {
		long seed = 0x53484d4b56763121L;
		assertEquals(0x21ad6447d51d13d3L, Xxh3.hasher(seed).hashBytesToLong("s1".getBytes(StandardCharsets.US_ASCII)));
		assertEquals(0x988ad8931bbf626cL, Xxh3.hasher(seed).hashBytesToLong("tags".getBytes(StandardCharsets.US_ASCII)));
		assertEquals(0x2d06800538d394c2L, Xxh3.SEED0.hashBytesToLong(new byte[0]));
		// the layout hash: XXH3-64 of the layout description (FORMAT.md §15); FormatTest compares both with lib/format.json
		assertEquals(1127, Format.LAYOUT_DESC.length());
		assertEquals(Format.LAYOUT_HASH, Xxh3.SEED0.hashBytesToLong(Format.LAYOUT_DESC.getBytes(StandardCharsets.US_ASCII)));
	}

	/**
	 * The lookups' packed keys (Keys) and their XXH3 (Xxh3.Seeded.packed)
	 * against hash4j: every length 0-16, byte[] and String keys packed alike,
	 * a non-ASCII String key not packed.
	 */
	@Test
	void packedShortKeysHashAsTheLibrary() {
		java.util.SplittableRandom r = new java.util.SplittableRandom(25);
		long[] seeds = {0, 1, -1, 0x53484d4b56763121L, 0x9E3779B97F4A7C15L};
		for (int len = 0; len <= 16; len++)
			for (int t = 0; t < 500; t++) {
				byte[] b = new byte[len];
				for (int i = 0; i < len; i++)
					b[i] = (byte) r.nextInt(256);
				long lo = 0, tl = 0;
				for (int i = 0; i < Math.min(len, 8); i++)
					lo |= (b[i] & 0xFFL) << 8 * i;
				for (int i = Math.max(0, len - 8); i < len; i++)
					tl |= (b[i] & 0xFFL) << 8 * (i - (len - 8));
				if (len < 8)
					tl = lo;
				assertEquals(lo, Keys.lo(b, len), "len " + len);
				assertEquals(tl, Keys.tl(b, len, lo), "len " + len);
				assertArrayEquals(b, Keys.unpack(lo, tl, len));
				for (long seed : seeds)
					assertEquals(Xxh3.hasher(seed).hashBytesToLong(b), new Xxh3.Seeded(seed).packed(lo, tl, len), "len " + len);
				byte[] a = b.clone();
				for (int i = 0; i < len; i++)
					a[i] &= 0x7F;
				String ascii = new String(a, StandardCharsets.US_ASCII);
				long alo = Keys.lo(ascii, len);
				assertEquals(Keys.lo(a, len), alo, "an ASCII String key packs as its bytes");
				assertEquals(Keys.tl(a, len, alo), Keys.tl(ascii, len, alo));
				for (int at = 0; at < len; at++) {
					String other = ascii.substring(0, at) + "é" + ascii.substring(at + 1);
					long olo = Keys.lo(other, len);
					assertEquals(-1, olo | Keys.tl(other, len, olo), "a non-ASCII key does not pack: " + at);
				}
			}
	}
}
