package org.shmkv;

import java.nio.charset.StandardCharsets;

/**
 * A String key as its UTF-8 bytes without allocating: ASCII keys (the common
 * case) are written into a per-thread buffer; others are encoded.
 */
final class Keys {
	private Keys() {}

	static final class Buf {
		byte[] b = new byte[256];
		int len;
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
