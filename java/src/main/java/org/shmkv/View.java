package org.shmkv;

import java.lang.foreign.MemorySegment;

/** What every zero-copy view shares: its bytes in a mapping and the generation that owns them. */
abstract class View {
	final Generation gen;
	final MemorySegment seg;

	View(Generation gen, MemorySegment seg) {
		this.gen = gen;
		this.seg = seg;
	}

	/** The access failed with the JDK's "already closed": the generation was released. */
	final RuntimeException failed(IllegalStateException e) {
		return gen.released() ? gen.releasedError(e) : e;
	}

	/** The generation (of the cache) these bytes belong to. */
	public final long generation() {
		return gen.number;
	}
}
