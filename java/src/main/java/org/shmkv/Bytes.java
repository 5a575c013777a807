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

	/**
	 * A copy of [off, off + len): by {@link #copy(MemorySegment, long, byte[], int)}
	 * (a get's value: asSlice and toArray cost a slice, a heap segment and
	 * the JDK's checks of both, more than the copy).
	 */
	static byte[] copy(MemorySegment s, long off, long len) {
		if (len > Integer.MAX_VALUE - 8 || off < 0 || len < 0 || off > s.byteSize() - len)
			return s.asSlice(off, len).toArray(ValueLayout.JAVA_BYTE); // the JDK's error, or its own limit
		byte[] b = new byte[(int) len];
		copy(s, off, b, (int) len);
		return b;
	}

	/**
	 * Copies image bytes [off, off + n) to dst[0, n), n <= dst.length,
	 * writing nothing past n, in words that overlap rather than in a loop of
	 * bytes, so that only the length's class decides the stores: 8 to 16
	 * bytes as two longs, 4 to 7 as two ints, 1 to 3 as three bytes, read
	 * from the word that ends where the value ends (image values: that word
	 * lies in the image, off + n >= 8); longer values by MemorySegment.copy.
	 */
	static void copy(MemorySegment s, long off, byte[] dst, int n) {
		if (n >= 8) {
			if (n > 16) {
				MemorySegment.copy(s, ValueLayout.JAVA_BYTE, off, dst, 0, n);
				return;
			}
			Keys.U64.set(dst, 0, u64(s, off));
			Keys.U64.set(dst, n - 8, u64(s, off + n - 8));
			return;
		}
		if (n == 0)
			return;
		if (off + n < 8) {
			MemorySegment.copy(s, ValueLayout.JAVA_BYTE, off, dst, 0, n);
			return;
		}
		long w = u64(s, off + n - 8) >>> 8 * (8 - n);
		if (n >= 4) {
			Keys.U32.set(dst, 0, (int) w);
			Keys.U32.set(dst, n - 4, (int) (w >>> 8 * (n - 4)));
		} else {
			dst[0] = (byte) w;
			dst[n >> 1] = (byte) (w >>> 8 * (n >> 1));
			dst[n - 1] = (byte) (w >>> 8 * (n - 1));
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
