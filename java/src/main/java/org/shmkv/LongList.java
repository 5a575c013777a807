package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.nio.LongBuffer;

/** An i64list value: a read-only zero-copy view of the image's little-endian int64s. */
public final class LongList extends View {
	LongList(Generation g, MemorySegment s) {
		super(g, s);
	}

	public int size() {
		return (int) (seg.byteSize() / 8);
	}

	public long get(int i) {
		try {
			return seg.getAtIndex(Bytes.U64, i);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/** A copy. */
	public long[] toArray() {
		try {
			return seg.toArray(Bytes.U64);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/** A read-only buffer over the same bytes (no copy); it fails once the generation is released. */
	public LongBuffer asBuffer() {
		return seg.asByteBuffer().order(java.nio.ByteOrder.LITTLE_ENDIAN).asLongBuffer();
	}

	/** The read-only segment of the values (no copy). */
	public MemorySegment segment() {
		return seg;
	}
}
