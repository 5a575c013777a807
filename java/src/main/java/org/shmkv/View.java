package org.shmkv;

import java.lang.foreign.MemorySegment;

/** What every zero-copy list view shares: its bytes in a mapping and the generation that owns them. */
abstract sealed class View permits LongList, DoubleList, FloatList {
	final Generation gen;
	final MemorySegment seg;

	View(Generation gen, MemorySegment seg) {
		this.gen = gen;
		this.seg = seg;
	}

	/** The access failed with the JDK's "already closed": the generation was released. */
	final RuntimeException failed(IllegalStateException e) {
		return gen.failed(e);
	}

	/**
	 * The generation (of the cache) these bytes belong to.
	 *
	 * @return the generation number; 0 for an image file
	 */
	public final long generation() {
		return gen.number;
	}

	/**
	 * The list's bytes.
	 *
	 * @return a read-only segment over the image (no copy)
	 */
	public final MemorySegment segment() {
		return seg;
	}
}
