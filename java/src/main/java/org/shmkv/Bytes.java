package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/** Little-endian reads of image bytes (FORMAT.md §2): every field of the format. */
final class Bytes {
	private Bytes() {}

	static final ValueLayout.OfLong U64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
	static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
	static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
	static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
	static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
	/** 8 bytes of a byte[] as one long, for key comparison without a copy. */
	static final VarHandle ARRAY_U64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

	static long u64(MemorySegment s, long off) { return s.get(U64, off); }
	static long u32(MemorySegment s, long off) { return s.get(U32, off) & 0xFFFFFFFFL; }
	static int u16(MemorySegment s, long off) { return s.get(U16, off) & 0xFFFF; }
	static int u8(MemorySegment s, long off) { return s.get(ValueLayout.JAVA_BYTE, off) & 0xFF; }

	/** Whether image bytes [off, off + len) equal key[0, len); the caller checked the bounds. */
	static boolean equal(MemorySegment s, long off, byte[] key, int len) {
		int i = 0;
		for (; i + 8 <= len; i += 8)
			if (s.get(U64, off + i) != (long) ARRAY_U64.get(key, i))
				return false;
		for (; i < len; i++)
			if (s.get(ValueLayout.JAVA_BYTE, off + i) != key[i])
				return false;
		return true;
	}

	/** Whether image bytes [off, off + len) equal the packed key (Keys): reads only those bytes. */
	static boolean equalPacked(MemorySegment s, long off, long lo, long hi, int len) {
		if (len >= 8) {
			if (s.get(U64, off) != lo)
				return false;
			if (len == 8)
				return true;
			int k = 8 * (len - 8);
			return s.get(U64, off + len - 8) == (len == 16 ? hi : lo >>> k | hi << (64 - k));
		}
		if (len >= 4)
			return s.get(U32, off) == (int) lo && s.get(U32, off + len - 4) == (int) (lo >>> 8 * (len - 4));
		for (int i = 0; i < len; i++)
			if (s.get(ValueLayout.JAVA_BYTE, off + i) != (byte) (lo >>> 8 * i))
				return false;
		return true;
	}

	/** The key compare of every lookup: key[0, len), or (key null) the packed key lo, hi. */
	static boolean equal(MemorySegment s, long off, byte[] key, long lo, long hi, int len) {
		return key == null ? equalPacked(s, off, lo, hi, len) : equal(s, off, key, len);
	}

	/**
	 * Copies image bytes [off, off + n) to dst[0, n), n <= dst.length: a
	 * value of 8 to 16 bytes as two (overlapping) 8-byte words, no more than
	 * n bytes written; others by MemorySegment.copy.
	 */
	static void copy(MemorySegment s, long off, byte[] dst, int n) {
		if (n >= 8 && n <= 16) {
			long a = s.get(U64, off), b = s.get(U64, off + n - 8);
			ARRAY_U64.set(dst, 0, a);
			ARRAY_U64.set(dst, n - 8, b);
		} else {
			MemorySegment.copy(s, ValueLayout.JAVA_BYTE, off, dst, 0, n);
		}
	}

	/** Whether [off, off + len) of s is all zero. */
	static long firstNonZero(MemorySegment s, long off, long len) {
		long i = 0;
		for (; i + 8 <= len; i += 8)
			if (s.get(U64, off + i) != 0) {
				for (long j = i; ; j++)
					if (u8(s, off + j) != 0)
						return off + j;
			}
		for (; i < len; i++)
			if (u8(s, off + i) != 0)
				return off + i;
		return -1;
	}

	static String hex(long v) {
		return String.format("%016x", v);
	}
}
