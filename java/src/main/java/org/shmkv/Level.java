package org.shmkv;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * An arena of mappings held by each {@link Generation} that reads them, and
 * closed (unmapped) when the last one lets go: the one arena of an image
 * file's or in-memory images' generation, or one image of a cache's
 * generation (its base, its lower overlay or its top overlay), which a
 * refresh keeps for the next generation when that generation's copy is the
 * same image (lib/PROTOCOL.md, "Protocol 2": a refresh keeps what the new
 * generation shares with the current one).
 */
final class Level {
	final Arena arena;
	/** A cache's image: the image, and what it was mapped from; null for a generation's whole arena. */
	final Image image;
	private final Id id;
	/** The generations holding it; 0: closed. */
	private final AtomicInteger refs = new AtomicInteger(1);

	/**
	 * What a cache's image was mapped from: its control segment entry (path,
	 * sizes, page size, node) and its file's key (device and inode).
	 */
	record Id(String path, long size, long mapSize, long pageSize, int node, Object fileKey) {}

	/** A generation's whole arena (an image file, images in memory). */
	Level(Arena arena) {
		this(arena, null, null);
	}

	/** An image of a cache's generation, mapped into arena (its own) from id. */
	Level(Arena arena, Image image, Id id) {
		this.arena = arena;
		this.image = image;
		this.id = id;
	}

	/**
	 * Whether this is the image entry id names, the file at p: the same
	 * entry, the same file (this mapping keeps its inode alive, so no other
	 * file has its key meanwhile) and the same 4096-byte header, which holds
	 * every section's checksum. Only asked of a level that a current
	 * generation holds (mapped).
	 */
	boolean sameImage(Id other, Path p) {
		if (id == null || id.fileKey() == null || !id.equals(other))
			return false;
		ByteBuffer h = ByteBuffer.allocate(Format.HEADER_SIZE);
		try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
			while (h.hasRemaining())
				if (ch.read(h, h.position()) < 0)
					return false;
		} catch (IOException e) {
			return false; // mapped anew, which reports the trouble
		}
		return MemorySegment.mismatch(image.seg, 0, Format.HEADER_SIZE, MemorySegment.ofArray(h.array()), 0,
				Format.HEADER_SIZE) < 0;
	}

	/** One more generation holds it; false if it is closed already (never for a level a current generation holds). */
	boolean retain() {
		for (;;) {
			int r = refs.get();
			if (r <= 0)
				return false;
			if (refs.compareAndSet(r, r + 1))
				return true;
		}
	}

	/** A generation lets go: the last closes the arena. */
	void release() {
		if (refs.decrementAndGet() != 0)
			return;
		for (;;) {
			try {
				arena.close();
				return;
			} catch (IllegalStateException busy) {
				// a JDK that refuses to close while another thread is inside an
				// access of this arena (before JDK 23): that access ends soon
				Thread.onSpinWait();
			}
		}
	}
}
