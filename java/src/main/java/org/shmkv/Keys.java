package org.shmkv;

import java.nio.charset.StandardCharsets;

/**
 * A String key as its UTF-8 bytes without allocating: an ASCII key of at
 * most 16 characters (the common case) is packed into two longs (bytes 0-7
 * and 8-15, little-endian), which the lookup hashes ({@link Xxh3#packed})
 * and compares ({@link Bytes#equalPacked}) without a buffer; a longer ASCII
 * key is written into a per-thread buffer; others are encoded.
 */
final class Keys {
	private Keys() {}

	static final class Buf {
		byte[] b = new byte[256];
		int len;
	}

	/**
	 * Characters [from, from + 8) of a key of n characters as 8 little-endian
	 * bytes (0 past n), or -1 when one is not ASCII (a packed word never has
	 * bit 63 set). One pass: the String getters call it twice and pack when
	 * both are >= 0.
	 */
	static long word(String key, int from, int n) {
		long w = 0;
		int any = 0;
		for (int i = Math.min(n, from + 8) - 1; i >= from; i--) {
			char c = key.charAt(i);
			any |= c;
			w = w << 8 | c;
		}
		return any < 0x80 ? w : -1;
	}

	/** The bytes of a packed key (messages; cold). */
	static byte[] unpack(long lo, long hi, int len) {
		byte[] b = new byte[len];
		for (int i = 0; i < len; i++)
			b[i] = (byte) ((i < 8 ? lo : hi) >>> (8 * (i & 7)));
		return b;
	}

	private static final ThreadLocal<Buf> BUF = ThreadLocal.withInitial(Buf::new);

	static Buf utf8(String s) {
		Buf k = BUF.get();
		int n = s.length();
		if (n <= k.b.length) {
			byte[] b = k.b;
			int i = 0;
			for (; i < n; i++) {
				char c = s.charAt(i);
				if (c >= 0x80)
					break;
				b[i] = (byte) c;
			}
			if (i == n) {
				k.len = n;
				return k;
			}
		}
		byte[] e = s.getBytes(StandardCharsets.UTF_8);
		Buf o = new Buf();
		o.b = e;
		o.len = e.length;
		return o;
	}
}
