package org.shmkv;

/**
 * One generation of a cache, pinned: reads see it alone and its values stay
 * mapped until {@link #close()}, whatever refreshes the cache makes. Thread
 * safe; close once.
 */
public final class Snapshot extends ShmkvReader implements AutoCloseable {
	private final Generation g;
	private volatile boolean closed;

	Snapshot(Generation g) {
		this.g = g;
	}

	@Override
	Generation current() {
		if (closed)
			throw g.releasedError(null);
		return g;
	}

	@Override
	void onClosed(Generation gen, RuntimeException e) {
		throw e instanceof ShmkvException.Released r ? r : gen.releasedError(e);
	}

	/** Releases the pin: the generation is unmapped now if no other snapshot pins it and the cache moved on. */
	@Override
	public synchronized void close() {
		if (closed)
			return;
		closed = true;
		g.unpin();
	}
}
