package org.shmkv;

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
		String desc = "shmkv-image-v1;header=512:magic@0,format_version@8,header_size@12,layout_hash@16,flags@24,"
				+ "file_size@32,entry_count@40,bucket_count@48,bucket_slots@56,hash_bits@60,hash_seed@64,max_probe@72,"
				+ "section_count@76,builder_version@80,reserved0@84,created_unix@88,value_bytes_logical@96,"
				+ "dedup_values@104,dedup_refs@112,dedup_saved_bytes@120,name@128,sections@192,reserved@448,"
				+ "header_checksum@504;section=32:kind@0,flags@4,offset@8,size@16,checksum@24;entry=8:type@0,"
				+ "flags@1,key_len@2,value_len@4;bucket=64:8xu64(tag16<<48|meta8<<40|off>>3);"
				+ "meta0..6=filter56[(tag*56)>>16];meta7=maxdisp;hash=xxh3_64(seed);home=mulhi(h,buckets);"
				+ "tag=h&0xffff|1if0";
		assertEquals(634, desc.length());
		assertEquals(Header.LAYOUT_HASH_V1, Xxh3.SEED0.hashBytesToLong(desc.getBytes(StandardCharsets.US_ASCII)));
	}
}
