package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.nio.LongBuffer;

/** An i64list value: a read-only zero-copy view of the image's little-endian int64s. */
public final class LongList extends View {
	LongList(Generation g, MemorySegment s) {
		super(g, s);
	}

	/**
	 * The number of elements.
	 *
	 * @return the list's length
	 */
	public int size() {
		return (int) (seg.byteSize() / 8);
	}

	/**
	 * Element i.
	 *
	 * @param i the index, 0 to size() - 1
	 * @return the element
	 * @throws IndexOutOfBoundsException when i is out of range
	 */
	public long get(int i) {
		try {
			return seg.getAtIndex(Bytes.U64, i);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/**
	 * The elements.
	 *
	 * @return a copy
	 */
	public long[] toArray() {
		try {
			return seg.toArray(Bytes.U64);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/**
	 * The elements as a buffer, which fails (as the JDK's buffers do) once
	 * the generation is released and its image unmapped.
	 *
	 * @return a read-only buffer over the image (no copy)
	 */
	public LongBuffer asBuffer() {
		return seg.asByteBuffer().order(ByteOrder.LITTLE_ENDIAN).asLongBuffer();
	}
}
