package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.nio.DoubleBuffer;

/** An f64list value: a read-only zero-copy view of the image's little-endian binary64s. */
public final class DoubleList extends View {
	DoubleList(Generation g, MemorySegment s) {
		super(g, s);
	}

	public int size() {
		return (int) (seg.byteSize() / 8);
	}

	public double get(int i) {
		try {
			return seg.getAtIndex(Bytes.F64, i);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/** A copy. */
	public double[] toArray() {
		try {
			return seg.toArray(Bytes.F64);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/** A read-only buffer over the same bytes (no copy); it fails once the generation is released. */
	public DoubleBuffer asBuffer() {
		return seg.asByteBuffer().order(java.nio.ByteOrder.LITTLE_ENDIAN).asDoubleBuffer();
	}

	/** The read-only segment of the values (no copy). */
	public MemorySegment segment() {
		return seg;
	}
}
