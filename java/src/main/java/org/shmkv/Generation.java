package org.shmkv;

import java.lang.foreign.Arena;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One mapped image, the delta it is read through if any (FORMAT.md §19)
 * and the top delta read before that one if any (§19.6), and the shared
 * arenas that own their mappings ({@link Level}s: one for an image file or
 * images in memory; one per image of a cache's generation, which the next
 * generation may hold too). The generation is released once it is retired
 * (a refresh switched to a newer one, or close) and no {@link Snapshot}
 * pins it; each arena is closed (unmapped) when no generation holds it. A
 * view used after that fails: the JDK refuses any access to a closed shared
 * arena's memory (IllegalStateException, which the views turn into
 * {@link ShmkvException.Released}); closing waits out a thread that is in
 * the middle of an access, so no read ever touches unmapped memory.
 */
final class Generation {
	/** The image read: a plain image or a delta read alone, or the base a delta is read through. */
	final Image image;
	/** The delta image is read through (checked against it, §19.4): the lower one under a top; null: none. */
	final Image delta;
	/** The top delta, read before delta (a delta of image too, §19.6); null: none (always without delta). */
	final Image top;
	final long number;
	final String source;
	/** What it holds: a cache's base, lower and top in that order (up to its images), else the one arena. */
	private final Level[] levels;
	/** Snapshots pinning this generation; -1 once the arena is closed. */
	private final AtomicInteger pins = new AtomicInteger();
	private volatile boolean retired;

	Generation(Image image, Arena arena, long number, String source) {
		this(image, null, arena, number, source);
	}

	Generation(Image image, Image delta, Arena arena, long number, String source) {
		this(image, delta, null, arena, number, source);
	}

	Generation(Image image, Image delta, Image top, Arena arena, long number, String source) {
		this(image, delta, top, new Level[] {new Level(arena)}, number, source);
	}

	/** A cache's generation: levels[0] its base, read through levels[1] and levels[2] where given, each held once. */
	Generation(Level[] levels, long number, String source) {
		this(levels[0].image, levels.length > 1 ? levels[1].image : null, levels.length > 2 ? levels[2].image : null,
				levels, number, source);
	}

	private Generation(Image image, Image delta, Image top, Level[] levels, long number, String source) {
		this.image = image;
		this.delta = delta;
		this.top = top;
		this.levels = levels;
		this.number = number;
		this.source = source;
	}

	/** Level i of a cache's generation (0 its base, 1 its lower overlay, 2 its top overlay); null where it has none. */
	Level level(int i) {
		return i < levels.length && levels[i].image != null ? levels[i] : null;
	}

	/** Pins the mapping for a snapshot; false when it is already released. */
	boolean pin() {
		for (;;) {
			int p = pins.get();
			if (p < 0)
				return false;
			if (pins.compareAndSet(p, p + 1))
				return true;
		}
	}

	void unpin() {
		if (pins.decrementAndGet() == 0 && retired)
			tryRelease();
	}

	/** No longer current: released now, or when its last snapshot closes. */
	void retire() {
		retired = true;
		tryRelease();
	}

	boolean released() {
		return pins.get() < 0;
	}

	private void tryRelease() {
		// 0 -> -1 excludes a concurrent pin (0 -> 1): one of the two wins
		if (!pins.compareAndSet(0, -1))
			return;
		for (Level l : levels)
			l.release();
	}

	ShmkvException.Released releasedError(Throwable cause) {
		return new ShmkvException.Released(source, "generation " + number + " was released (a refresh switched to a "
				+ "newer generation, or the cache was closed); values that must outlive a refresh come from a "
				+ "Snapshot", cause);
	}

	/** An access to this generation's memory failed with the JDK's "already closed": Released, if it was. */
	RuntimeException failed(IllegalStateException e) {
		return released() ? releasedError(e) : e;
	}
}
