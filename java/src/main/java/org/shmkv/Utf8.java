package org.shmkv;

import java.lang.foreign.MemorySegment;

/**
 * Strict UTF-8 (FORMAT.md §8): no overlong forms, no surrogates, nothing
 * above U+10FFFF; U+0000 allowed. Part of the string type's shape: every
 * get that returns a string checks it.
 */
final class Utf8 {
	private Utf8() {}

	/** The high bit of each byte of a word: a byte with it is not ASCII. */
	static final long HIGH_BITS = 0x8080_8080_8080_8080L;

	/** Whether bytes [off, off + len) of s are strict UTF-8. */
	static boolean valid(MemorySegment s, long off, long len) {
		return ascii(s, off, len) || validFrom(s, off, len);
	}

	/**
	 * Whether [off, off + len) is ASCII, a word at a time; a string of fewer
	 * than 8 bytes in the word that ends where it ends, when that word lies
	 * in s (a value in an image: always).
	 */
	private static boolean ascii(MemorySegment s, long off, long len) {
		if (len < 8) {
			if (len == 0)
				return true;
			if (off + len < 8)
				return false; // the exact check decides
			return (Bytes.u64(s, off + len - 8) >>> 8 * (8 - len) & HIGH_BITS) == 0;
		}
		long i = 0;
		for (; i + 8 <= len; i += 8)
			if ((Bytes.u64(s, off + i) & HIGH_BITS) != 0)
				return false;
		return i == len || (Bytes.u64(s, off + len - 8) & HIGH_BITS) == 0;
	}

	private static boolean validFrom(MemorySegment s, long off, long len) {
		long i = 0;
		while (i < len) {
			int c = Bytes.u8(s, off + i);
			if (c < 0x80) {
				i++;
				continue;
			}
			int n, min;
			if (c >= 0xC2 && c <= 0xDF) {
				n = 1;
				min = 0x80;
				c &= 0x1F;
			} else if (c >= 0xE0 && c <= 0xEF) {
				n = 2;
				min = 0x800;
				c &= 0x0F;
			} else if (c >= 0xF0 && c <= 0xF4) {
				n = 3;
				min = 0x10000;
				c &= 0x07;
			} else {
				return false;
			}
			if (i + n >= len)
				return false;
			for (int k = 1; k <= n; k++) {
				int t = Bytes.u8(s, off + i + k);
				if ((t & 0xC0) != 0x80)
					return false;
				c = (c << 6) | (t & 0x3F);
			}
			if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
				return false;
			i += 1 + n;
		}
		return true;
	}
}
