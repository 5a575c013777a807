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
		// format v2, layout B with the 2-byte directory: SHMKV_LAYOUT_DESC_V2 as V2B's amendment 1 gives it (1127 bytes)
		String desc2 = "shmkv-image-v2;header=512:magic@0,format_version@8,header_size@12,layout_hash@16,flags@24,file_size@"
				+ "32,entry_count@40,bucket_count@48,bucket_slots@56,hash_bits@60,hash_seed@64,max_probe@72,section_cou"
				+ "nt@76,builder_version@80,reserved0@84,created_unix@88,value_bytes_logical@96,dedup_values@104,dedup_"
				+ "refs@112,dedup_saved_bytes@120,name@128,sections@192,reserved@448,header_checksum@504;section=32:kin"
				+ "d@0,flags@4,offset@8,size@16,checksum@24;entry=8:type@0,flags@1,key_len@2,value_len@4;bucket=128:cou"
				+ "nt@0[0..16],disp@1,filter48@2[(tag*48)>>16],dir16@8[count]=(tag<<7|off)&0xffff,records@8+2*count..12"
				+ "8,ascending,zero-gaps;record=kind8@0;inline=key_len8@1,value_len8@2,expires32@3?,key,pad0-to-align(t"
				+ "ype)-in-bucket,value,nul(type);out=entry_off40>>3@1,expires32@6?;expired=now>=expires;hash=xxh3_64(s"
				+ "eed);home=mulhi(h,buckets);tag=h&0xffff|1if0;types=1:bytes/a1/nul/text,2:string/a1/nul/text/utf8,3:i"
				+ "64/a8/fixed8,4:bool/a1/fixed1max1,5:f64/a8/fixed8,6:f32list/a8/array4,7:f64list/a8/array8,8:i64list/"
				+ "a8/array8,9:strlist/a8/strlist/utf8;eflags=0x1;hflags=0x3;rkind=type0xf,expires0x40,out0x80;sections"
				+ "=1:index,2:entries,3:values";
		assertEquals(1127, desc2.length());
		assertEquals(0x5a240d8d9e73bf24L, Header.LAYOUT_HASH_V2);
		assertEquals(Header.LAYOUT_HASH_V2, Xxh3.SEED0.hashBytesToLong(desc2.getBytes(StandardCharsets.US_ASCII)));
	}

	/** The String-key hot path's XXH3 of packed keys (Keys, Xxh3.packed) against hash4j: every length 0-16. */
	@Test
	void packedShortKeysHashAsTheLibrary() {
		java.util.SplittableRandom r = new java.util.SplittableRandom(25);
		long[] seeds = {0, 1, -1, 0x53484d4b56763121L, 0x9E3779B97F4A7C15L};
		for (int len = 0; len <= 16; len++)
			for (int t = 0; t < 500; t++) {
				byte[] b = new byte[len];
				for (int i = 0; i < len; i++)
					b[i] = (byte) r.nextInt(256);
				long lo = 0, hi = 0;
				for (int i = 0; i < len; i++)
					if (i < 8)
						lo |= (b[i] & 0xFFL) << 8 * i;
					else
						hi |= (b[i] & 0xFFL) << 8 * (i - 8);
				for (long seed : seeds)
					assertEquals(Xxh3.hasher(seed).hashBytesToLong(b), Xxh3.packed(lo, hi, len, seed), "len " + len);
				String ascii = new String(b, java.nio.charset.StandardCharsets.ISO_8859_1).chars()
						.map(c -> c & 0x7F).collect(StringBuilder::new, StringBuilder::appendCodePoint, StringBuilder::append).toString();
				int n = ascii.length();
				assertTrue(Keys.word(ascii, 0, n) >= 0 && Keys.word(ascii, 8, n) >= 0, "an ASCII key packs");
				org.junit.jupiter.api.Assertions.assertArrayEquals(ascii.getBytes(java.nio.charset.StandardCharsets.US_ASCII),
						Keys.unpack(Keys.word(ascii, 0, n), Keys.word(ascii, 8, n), n));
				if (n < 16)
					assertEquals(-1, Keys.word(ascii + "é", 0, n + 1) | Keys.word(ascii + "é", 8, n + 1), "a non-ASCII key does not");
			}
	}
}
