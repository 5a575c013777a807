package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.AbstractList;
import java.util.RandomAccess;

/**
 * A strlist value (FORMAT.md §8) over the image: each string is checked and
 * decoded when it is read (a lookup checks the count only, §12.1), so a
 * damaged string is {@link ShmkvException.Corrupt} when read, never a read
 * past the list.
 */
public final class StringList extends AbstractList<String> implements RandomAccess {
	private final View v;
	private final int count;

	StringList(Generation g, MemorySegment s) {
		v = new View(g, s) {};
		try {
			count = s.get(Bytes.U32, 0);
		} catch (IllegalStateException e) {
			throw v.failed(e);
		}
	}

	@Override
	public int size() {
		return count;
	}

	/** String i's UTF-8 bytes (without its NUL). */
	public byte[] getBytes(int i) {
		if (i < 0 || i >= count)
			throw new IndexOutOfBoundsException("string " + i + " of a list of " + count);
		MemorySegment s = v.seg;
		try {
			long data = 4L * (count + 2), dataLen = s.byteSize() - data;
			long a = Integer.toUnsignedLong(s.get(Bytes.U32, 4 + 4L * i));
			long b = Integer.toUnsignedLong(s.get(Bytes.U32, 8 + 4L * i));
			if (a >= b || b > dataLen || s.get(ValueLayout.JAVA_BYTE, data + b - 1) != 0)
				throw new ShmkvException.Corrupt("strlist string " + i + ": ends " + a + ".." + b
						+ " not increasing, past the data (" + dataLen + " bytes) or without its NUL");
			return s.asSlice(data + a, b - a - 1).toArray(ValueLayout.JAVA_BYTE);
		} catch (IllegalStateException e) {
			throw v.failed(e);
		}
	}

	@Override
	public String get(int i) {
		return new String(getBytes(i), StandardCharsets.UTF_8);
	}
}
