package org.shmkv;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Keys as the lookups take them, without allocating: a key of at most 16
 * bytes is packed into two longs, lo (its bytes 0-7, zero past its length)
 * and tl (its last 8 bytes, for a key of 8 or more; else lo), little-endian,
 * which the lookup hashes ({@link Xxh3.Seeded#packed}) and compares with
 * the image's bytes in place; a longer key is bytes: its own byte[], or a
 * String's UTF-8 encoding written into a per-thread buffer. A String key is
 * its UTF-8 bytes, exactly as {@code String.getBytes(UTF_8)} gives them (an
 * unpaired surrogate is '?').
 *
 * <p>A String of at most 16 ASCII characters is packed from its characters
 * as XXH3 reads short inputs: in words that overlap (characters 0-7 and the
 * last 8; 0-3 and the last 4; the first, middle and last), so that only
 * the length's class, not the length, decides which loads are made.
 */
final class Keys {
	private Keys() {}

	/** 8 bytes of a byte[] as one long. */
	static final VarHandle U64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
	/** 4 bytes of a byte[] as one int. */
	static final VarHandle U32 = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

	/** Packed key lengths: at most this many bytes. */
	static final int PACKED = 16;

	/** Characters [p, p + 8) of key as 8 bytes, or -1 when one is not ASCII. */
	private static long chars8(String key, int p) {
		int c0 = key.charAt(p), c1 = key.charAt(p + 1), c2 = key.charAt(p + 2), c3 = key.charAt(p + 3);
		int c4 = key.charAt(p + 4), c5 = key.charAt(p + 5), c6 = key.charAt(p + 6), c7 = key.charAt(p + 7);
		if ((c0 | c1 | c2 | c3 | c4 | c5 | c6 | c7) >= 0x80)
			return -1;
		return (long) (c0 | c1 << 8 | c2 << 16 | c3 << 24) | (long) (c4 | c5 << 8 | c6 << 16 | c7 << 24) << 32;
	}

	/** Characters [p, p + 4) of key as 4 bytes, or -1 when one is not ASCII. */
	private static int chars4(String key, int p) {
		int c0 = key.charAt(p), c1 = key.charAt(p + 1), c2 = key.charAt(p + 2), c3 = key.charAt(p + 3);
		return (c0 | c1 | c2 | c3) >= 0x80 ? -1 : c0 | c1 << 8 | c2 << 16 | c3 << 24;
	}

	/**
	 * lo of key, of n characters: its bytes 0-7 (0 past n), or -1 when it has
	 * more than 16 characters or a character of them is not ASCII (a packed
	 * word never has bit 63 set).
	 */
	static long lo(String key, int n) {
		if (n > PACKED)
			return -1;
		if (n >= 8)
			return chars8(key, 0);
		if (n >= 4) {
			int a = chars4(key, 0), b = chars4(key, n - 4);
			return (a | b) < 0 ? -1 : (a & 0xFFFF_FFFFL) | (b & 0xFFFF_FFFFL) << 8 * (n - 4);
		}
		if (n == 0)
			return 0;
		int c0 = key.charAt(0), cm = key.charAt(n >> 1), cl = key.charAt(n - 1);
		return (c0 | cm | cl) >= 0x80 ? -1 : c0 | (long) cm << 8 * (n >> 1) | (long) cl << 8 * (n - 1);
	}

	/** tl of key (n characters), lo its lo: its last 8 characters when it has 9 to 16; -1 when one is not ASCII. */
	static long tl(String key, int n, long lo) {
		return n > 8 && lo >= 0 ? chars8(key, n - 8) : lo;
	}

	/** lo of key[0, len): its bytes 0-7, 0 past len; 0 for a key of more than 16 bytes (not packed). */
	static long lo(byte[] key, int len) {
		if (len > PACKED)
			return 0;
		if (len >= 8)
			return (long) U64.get(key, 0);
		if (len >= 4)
			return ((int) U32.get(key, 0) & 0xFFFF_FFFFL) | ((int) U32.get(key, len - 4) & 0xFFFF_FFFFL) << 8 * (len - 4);
		long w = 0;
		for (int i = len - 1; i >= 0; i--)
			w = w << 8 | (key[i] & 0xFF);
		return w;
	}

	/** tl of key[0, len): its last 8 bytes when it has 8 to 16, else lo. */
	static long tl(byte[] key, int len, long lo) {
		return len >= 8 && len <= PACKED ? (long) U64.get(key, len - 8) : lo;
	}

	/** The bytes of a packed key (messages; cold). */
	static byte[] unpack(long lo, long tl, int len) {
		byte[] b = new byte[len];
		for (int i = 0; i < len; i++)
			b[i] = (byte) (i < 8 ? lo >>> 8 * i : tl >>> 8 * (i - (len - 8)));
		return b;
	}

	/**
	 * A String key that did not pack from its characters (not ASCII, or more
	 * than 16 of them), encoded: its UTF-8 bytes b[0, len) in a per-thread
	 * buffer, and (len at most 16) packed from them, lo and tl.
	 */
	static final class Buf {
		byte[] b = new byte[256];
		int len;
		long lo, tl;
	}

	private static final ThreadLocal<Buf> BUF = ThreadLocal.withInitial(Buf::new);

	/**
	 * s's UTF-8 bytes in this thread's buffer, as String.getBytes(UTF_8)
	 * encodes them; a String of more than 65535 characters, too long for any
	 * encoding, gets only its length (the lookup refuses it by that).
	 */
	static Buf utf8(String s) {
		Buf k = BUF.get();
		int n = s.length();
		if (n > Format.MAX_KEY_LEN) {
			k.len = utf8Length(s);
			return k;
		}
		byte[] b = k.b;
		if (b.length < 3 * n)
			k.b = b = new byte[3 * n];
		int j = 0;
		for (int i = 0; i < n; i++) {
			char c = s.charAt(i);
			if (c < 0x80) {
				b[j++] = (byte) c;
			} else if (c < 0x800) {
				b[j++] = (byte) (0xC0 | c >> 6);
				b[j++] = (byte) (0x80 | c & 0x3F);
			} else if (Character.isSurrogate(c)) {
				char d;
				if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(d = s.charAt(i + 1))) {
					int cp = Character.toCodePoint(c, d);
					b[j++] = (byte) (0xF0 | cp >> 18);
					b[j++] = (byte) (0x80 | cp >> 12 & 0x3F);
					b[j++] = (byte) (0x80 | cp >> 6 & 0x3F);
					b[j++] = (byte) (0x80 | cp & 0x3F);
					i++;
				} else {
					b[j++] = '?'; // as the JDK's encoder replaces an unpaired surrogate
				}
			} else {
				b[j++] = (byte) (0xE0 | c >> 12);
				b[j++] = (byte) (0x80 | c >> 6 & 0x3F);
				b[j++] = (byte) (0x80 | c & 0x3F);
			}
		}
		k.len = j;
		if (j <= PACKED)
			k.tl = tl(b, j, k.lo = lo(b, j));
		return k;
	}

	/** The length of s's UTF-8 encoding (a key too long to encode: its message). */
	private static int utf8Length(String s) {
		int len = 0;
		for (int i = 0; i < s.length(); i++) {
			char c = s.charAt(i);
			if (c < 0x80)
				len++;
			else if (c < 0x800)
				len += 2;
			else if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
				len += 4;
				i++;
			} else
				len += Character.isSurrogate(c) ? 1 : 3;
		}
		return len;
	}

	/** The longest key text a message shows; longer keys are cut, with their length. */
	private static final int SHOWN = 64;

	/**
	 * key[0, len) for a message: as quoted text when it is UTF-8 without
	 * control characters ("user:1:name"), else as hex (0x00ff10); either
	 * cut at 64 characters or bytes, with the key's length.
	 */
	static String show(byte[] key, int len) {
		if (len == 0)
			return "\"\" (the empty key)";
		if (printable(key, len)) {
			String s = new String(key, 0, len, java.nio.charset.StandardCharsets.UTF_8);
			if (s.length() <= SHOWN)
				return "\"" + s + "\"";
			return "\"" + s.substring(0, SHOWN) + "\"... (" + len + " bytes)";
		}
		StringBuilder b = new StringBuilder("0x");
		for (int i = 0; i < Math.min(len, SHOWN / 2); i++)
			b.append(Character.forDigit(key[i] >> 4 & 0xF, 16)).append(Character.forDigit(key[i] & 0xF, 16));
		if (len > SHOWN / 2)
			b.append("...");
		return b.append(" (").append(len).append(len == 1 ? " byte)" : " bytes)").toString();
	}

	/** show of a key as the lookups hold it: packed (key null) or bytes. */
	static String show(byte[] key, long lo, long tl, int len) {
		return key == null ? show(unpack(lo, tl, len), len) : show(key, len);
	}

	private static boolean printable(byte[] key, int len) {
		if (!Utf8.valid(java.lang.foreign.MemorySegment.ofArray(key), 0, len))
			return false;
		for (int i = 0; i < len; i++)
			if ((key[i] & 0xFF) < 0x20 || key[i] == 0x7F)
				return false;
		return true;
	}
}
