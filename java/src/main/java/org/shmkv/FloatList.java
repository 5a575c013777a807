package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.nio.FloatBuffer;

/** An f32list value: a read-only zero-copy view of the image's little-endian binary32s. */
public final class FloatList extends View {
	FloatList(Generation g, MemorySegment s) {
		super(g, s);
	}

	public int size() {
		return (int) (seg.byteSize() / 4);
	}

	public float get(int i) {
		try {
			return seg.getAtIndex(Bytes.F32, i);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/** A copy. */
	public float[] toArray() {
		try {
			return seg.toArray(Bytes.F32);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/** A read-only buffer over the same bytes (no copy); it fails once the generation is released. */
	public FloatBuffer asBuffer() {
		return seg.asByteBuffer().order(java.nio.ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
	}

	/** The read-only segment of the values (no copy). */
	public MemorySegment segment() {
		return seg;
	}
}
