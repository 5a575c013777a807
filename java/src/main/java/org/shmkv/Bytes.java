package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/** Little-endian reads of image bytes (FORMAT.md §2): every field of the format. */
final class Bytes {
	private Bytes() {}

	static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
	static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
	static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
	static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
	static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

	static long u64(MemorySegment s, long off) {
		return s.get(U64, off);
	}

	static long u32(MemorySegment s, long off) {
		return s.get(U32, off) & 0xFFFFFFFFL;
	}

	static int u16(MemorySegment s, long off) {
		return s.get(U16, off) & 0xFFFF;
	}

	static int u8(MemorySegment s, long off) {
		return s.get(ValueLayout.JAVA_BYTE, off) & 0xFF;
	}

	/** A copy of [off, off + len). */
	static byte[] copy(MemorySegment s, long off, long len) {
		return s.asSlice(off, len).toArray(ValueLayout.JAVA_BYTE);
	}

	/**
	 * Copies image bytes [off, off + n) to dst[0, n), n <= dst.length,
	 * writing nothing past n: values of 8 to 16 bytes as two (overlapping)
	 * words; shorter ones from the word that ends where they end, which the
	 * caller knows lies in the image (off + n >= 8).
	 */
	static void copy(MemorySegment s, long off, byte[] dst, int n) {
		if (n >= 8 && n <= 16) {
			Keys.U64.set(dst, 0, u64(s, off));
			Keys.U64.set(dst, n - 8, u64(s, off + n - 8));
		} else if (n < 8 && off + n >= 8) {
			long w = u64(s, off + n - 8) >>> 8 * (8 - n);
			for (int i = 0; i < n; i++, w >>>= 8)
				dst[i] = (byte) w;
		} else {
			MemorySegment.copy(s, ValueLayout.JAVA_BYTE, off, dst, 0, n);
		}
	}

	/** The offset of the first non-zero byte in [off, off + len) of s, or -1 when all are zero. */
	static long firstNonZero(MemorySegment s, long off, long len) {
		long i = 0;
		for (; i + 8 <= len; i += 8)
			if (u64(s, off + i) != 0)
				break;
		for (; i < len; i++)
			if (u8(s, off + i) != 0)
				return off + i;
		return -1;
	}

	/** v as 16 hex digits. */
	static String hex(long v) {
		return String.format("%016x", v);
	}

	/** Bytes [off, off + n) as hex (messages). */
	static String hexBytes(MemorySegment s, long off, long n) {
		StringBuilder b = new StringBuilder();
		for (long i = 0; i < n; i++)
			b.append(String.format("%02x", u8(s, off + i)));
		return n == 0 ? "none" : b.toString();
	}
}
