package org.shmkv;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Keys as the lookups take them, without allocating: a key of at most 16
 * bytes is packed into two longs, lo (bytes 0-7) and hi (bytes 8-15),
 * little-endian, zero past its length, which the lookup hashes
 * ({@link Xxh3#packed}) and compares with the image's bytes in place; a
 * longer key is bytes: its own byte[], or a String's UTF-8 encoding written
 * into a per-thread buffer. A String key is its UTF-8 bytes, exactly as
 * {@code String.getBytes(UTF_8)} gives them (an unpaired surrogate is '?').
 */
final class Keys {
	private Keys() {}

	/** 8 bytes of a byte[] as one long. */
	static final VarHandle U64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

	/** Packed key lengths: at most this many bytes. */
	static final int PACKED = 16;

	/**
	 * Characters [from, from + 8) of key (n characters) as 8 little-endian
	 * bytes, 0 past n, or -1 when one is not ASCII (a packed word never has
	 * bit 63 set): the String getters call it for 0 and 8 and pack when
	 * both are at least 0.
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

	/** Bytes [from, from + 8) of key[0, len) as a little-endian long, 0 past len. */
	static long word(byte[] key, int from, int len) {
		int n = len - from;
		if (n >= 8)
			return (long) U64.get(key, from);
		if (n <= 0)
			return 0;
		if (len >= 8) // the 8 bytes ending at len, shifted down
			return (long) U64.get(key, len - 8) >>> 8 * (8 - n);
		long w = 0;
		for (int i = len - 1; i >= from; i--)
			w = w << 8 | (key[i] & 0xFF);
		return w;
	}

	/** The bytes [len - 8, len) of a packed key of 8 to 16 bytes: the word its last 8 bytes make. */
	static long tail(long lo, long hi, int len) {
		int k = 8 * (len - 8);
		return k == 0 ? lo : k == 64 ? hi : lo >>> k | hi << (64 - k);
	}

	/** The bytes of a packed key (messages; cold). */
	static byte[] unpack(long lo, long hi, int len) {
		byte[] b = new byte[len];
		for (int i = 0; i < len; i++)
			b[i] = (byte) ((i < 8 ? lo : hi) >>> (8 * (i & 7)));
		return b;
	}

	/** A per-thread buffer for String keys of more than 16 bytes. */
	static final class Buf {
		byte[] b = new byte[256];
		int len;
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
	static String show(byte[] key, long lo, long hi, int len) {
		return key == null ? show(unpack(lo, hi, len), len) : show(key, len);
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
