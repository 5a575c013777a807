package org.shmkv;

import java.lang.foreign.MemorySegment;

/** Strict UTF-8 (FORMAT.md §8): no overlong forms, no surrogates, nothing above U+10FFFF; U+0000 allowed. */
final class Utf8 {
	private Utf8() {}

	static boolean valid(MemorySegment s, long off, long len) {
		long i = 0;
		while (i < len) {
			int c = Bytes.u8(s, off + i);
			if (c < 0x80) {
				i++;
				continue;
			}
			int n, min;
			if (c >= 0xC2 && c <= 0xDF) { n = 1; min = 0x80; c &= 0x1F; }
			else if (c >= 0xE0 && c <= 0xEF) { n = 2; min = 0x800; c &= 0x0F; }
			else if (c >= 0xF0 && c <= 0xF4) { n = 3; min = 0x10000; c &= 0x07; }
			else return false;
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
