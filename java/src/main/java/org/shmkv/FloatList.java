package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/** An f32list value: a read-only zero-copy view of the image's little-endian binary32s. */
public final class FloatList extends View {
	FloatList(Generation g, MemorySegment s) {
		super(g, s);
	}

	/**
	 * The number of elements.
	 *
	 * @return the list's length
	 */
	public int size() {
		return (int) (seg.byteSize() / 4);
	}

	/**
	 * Element i.
	 *
	 * @param i the index, 0 to size() - 1
	 * @return the element
	 * @throws IndexOutOfBoundsException when i is out of range
	 */
	public float get(int i) {
		try {
			return seg.getAtIndex(Bytes.F32, i);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/**
	 * The elements.
	 *
	 * @return a copy
	 */
	public float[] toArray() {
		try {
			return seg.toArray(Bytes.F32);
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
	public FloatBuffer asBuffer() {
		return seg.asByteBuffer().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
	}
}
