package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.AbstractList;
import java.util.RandomAccess;

/**
 * A strlist value (FORMAT.md §8) over the image: each string is checked
 * (its ends, its NUL, its UTF-8) and decoded when it is read, so a damaged
 * string is {@link ShmkvException.Corrupt} when read, never a read past the
 * list.
 */
public final class StringList extends AbstractList<String> implements RandomAccess {
	private final Generation gen;
	/** Names the image the list is in (its messages). */
	private final String source;
	private final MemorySegment seg;
	private final int count;

	StringList(Generation g, Image im, MemorySegment s) {
		gen = g;
		source = im.source;
		seg = s;
		try {
			count = s.get(Bytes.U32, 0); // at most (value_len - 8) / 4: the get checked it
		} catch (IllegalStateException e) {
			throw g.failed(e);
		}
	}

	/**
	 * The number of strings.
	 *
	 * @return the list's length
	 */
	@Override
	public int size() {
		return count;
	}

	/**
	 * String i's bytes.
	 *
	 * @param i the index, 0 to size() - 1
	 * @return a copy of its UTF-8 bytes, without the NUL
	 * @throws ShmkvException.Corrupt when the string is damaged or not UTF-8
	 */
	public byte[] getBytes(int i) {
		if (i < 0 || i >= count)
			throw new IndexOutOfBoundsException("string " + i + " of a list of " + count);
		try {
			long data = 4L * (count + 2), dataLen = seg.byteSize() - data;
			long a = Bytes.u32(seg, 4 + 4L * i), b = Bytes.u32(seg, 8 + 4L * i);
			if (a >= b || b > dataLen || Bytes.u8(seg, data + b - 1) != 0)
				throw new ShmkvException.Corrupt(source, "strlist string " + i + ": its ends " + a + ".." + b
						+ " do not ascend, pass the data (" + dataLen + " bytes) or lack its NUL");
			if (!Utf8.valid(seg, data + a, b - a - 1))
				throw new ShmkvException.Corrupt(source, "strlist string " + i + " is not valid UTF-8");
			return Bytes.copy(seg, data + a, b - a - 1);
		} catch (IllegalStateException e) {
			throw gen.failed(e);
		}
	}

	/**
	 * String i.
	 *
	 * @param i the index, 0 to size() - 1
	 * @return the string, decoded (a copy)
	 * @throws ShmkvException.Corrupt when the string is damaged or not UTF-8
	 */
	@Override
	public String get(int i) {
		return new String(getBytes(i), StandardCharsets.UTF_8);
	}
}
