package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A cache served by a real shmkv-loader: attach by name and root, follow
 * 1,000 swaps between images with and without expiring records (the
 * header's EXPIRY flag set and clear) with reader threads checking
 * every value they read (direct gets, snapshots, and values held across
 * refreshes), 0 wrong; a held view of a released generation fails with
 * Released, never a wrong value or a crash.
 */
class LoaderSwapTest {
	static final int KEYS = 1000, IMAGES = 4, SWAPS = Integer.getInteger("shmkv.swaps", 1000);
	static final long DEADLINE_NS = LoaderProcess.DEADLINE_NS;

	@TempDir
	Path tmp;
	Path root, spool;
	LoaderProcess loader;

	@BeforeEach
	void start() throws Exception {
		loader = LoaderProcess.start(tmp);
		root = loader.root;
		spool = loader.spool;
	}

	String log() {
		return loader.log();
	}

	@AfterEach
	void stop() throws Exception {
		if (loader != null)
			loader.close();
	}

	/**
	 * Image k: "n" = k, key_N = "tK:val_N", list_N = [k, N]; in odd k, key_N
	 * expires in 2096 (the EXPIRY flag set: lookups read the clock), so that
	 * the swaps alternate between images with and without it.
	 */
	Path image(int k) throws Exception {
		List<String> lines = new ArrayList<>();
		lines.add("{\"key\": \"n\", \"value\": " + k + "}");
		for (int i = 0; i < KEYS; i++) {
			lines.add("{\"key\": \"key_" + i + "\", \"value\": \"t" + k + ":val_" + i + "\""
					+ (k % 2 == 1 ? ", \"expires\": 4000000000}" : "}"));
			lines.add("{\"key\": \"list_" + i + "\", \"value\": [" + k + ", " + i + "]}");
		}
		Path out = tmp.resolve("img" + k + ".shmkv");
		Programs.build(out, "feat", lines);
		return out;
	}

	void publish(Path img) throws Exception {
		Path t = spool.resolve(".next.tmp");
		Files.copy(img, t, StandardCopyOption.REPLACE_EXISTING);
		Files.move(t, spool.resolve("feat.shmkv"), StandardCopyOption.ATOMIC_MOVE); // only a rename is picked up
	}

	Shmkv attachWhenReady() throws Exception {
		return loader.attachWhenReady("feat");
	}

	@Test
	void attachByEnvironmentRoot() throws Exception {
		publish(image(0));
		attachWhenReady().close();
		// the root given explicitly; $SHMKV_ROOT is read when it is null (cannot be set in-process)
		try (Shmkv c = Shmkv.attach("feat", root, Shmkv.Check.CHECKSUMS)) {
			assertEquals("t0:val_7", c.getString("key_7"));
			assertTrue(c.generation() >= 1);
			assertFalse(c.refresh(), "nothing new");
		}
		ShmkvException e = assertThrows(ShmkvException.class, () -> Shmkv.attach("nope", root, Shmkv.Check.HEADER));
		assertEquals("ENOENT", e.codeName());
		assertTrue(e.getMessage().contains("no cache \"nope\""), e.getMessage());
		assertEquals("EINVAL", assertThrows(ShmkvException.class, () -> Shmkv.attach(".x", root, Shmkv.Check.HEADER)).codeName());
	}

	/** shmctl cache drop: refresh says Stale (PROTOCOL.md, "Stale handles") and keeps serving what it has. */
	@Test
	void dropIsStale() throws Exception {
		publish(image(1));
		try (Shmkv c = attachWhenReady()) {
			Value v = c.get("key_3");
			loader.shmctl("cache", "drop", "feat");
			ShmkvException e = assertThrows(ShmkvException.Stale.class, c::refresh);
			assertEquals("SHMKV_ESTALE", e.codeName());
			assertEquals("t1:val_3", v.asString(), "the generation held is still mapped");
			assertEquals("t1:val_5", c.getString("key_5"));
			assertThrows(ShmkvException.Stale.class, c::refresh);
		}
	}

	@Test
	void thousandSwapsUnderReaders() throws Exception {
		Path[] imgs = new Path[IMAGES];
		for (int k = 0; k < IMAGES; k++)
			imgs[k] = image(k);
		publish(imgs[0]);
		AtomicLong reads = new AtomicLong(), wrong = new AtomicLong(), released = new AtomicLong();
		AtomicReference<Throwable> error = new AtomicReference<>();
		try (Shmkv c = attachWhenReady()) {
			assertEquals(0, c.getLong("n"));
			long g0 = c.generation();
			var stop = new java.util.concurrent.atomic.AtomicBoolean();
			List<Thread> readers = new ArrayList<>();
			for (int t = 0; t < 3; t++) {
				int mode = t;
				Thread th = new Thread(() -> {
					ThreadLocalRandom r = ThreadLocalRandom.current();
					Value held = null;
					String heldWant = null;
					try {
						while (!stop.get()) {
							int i = r.nextInt(KEYS);
							if (mode == 0) { // direct gets: one generation per get
								String v = c.getString("key_" + i);
								if (v == null || !v.matches("t[0-3]:val_" + i))
									wrong.incrementAndGet();
								LongList l = c.getLongList("list_" + i);
								try {
									long[] a = l == null ? null : l.toArray();
									if (a == null || a.length != 2 || a[1] != i || a[0] < 0 || a[0] >= IMAGES)
										wrong.incrementAndGet();
								} catch (ShmkvException.Released e) {
									released.incrementAndGet(); // a refresh came between get and read
								}
							} else if (mode == 1) { // snapshots: every value of the generation pinned
								try (Snapshot s = c.snapshot()) {
									long k = s.getLong("n");
									for (int j = 0; j < 20; j++) {
										int n = r.nextInt(KEYS);
										if (!("t" + k + ":val_" + n).equals(s.getString("key_" + n)))
											wrong.incrementAndGet();
										if (s.getLongList("list_" + n).get(0) != k)
											wrong.incrementAndGet();
									}
								}
							} else { // a value held across refreshes: right, or Released
								if (held != null) {
									try {
										if (!held.asString().equals(heldWant))
											wrong.incrementAndGet();
									} catch (ShmkvException.Released e) {
										released.incrementAndGet();
										held = null;
									}
								}
								if (held == null) {
									held = c.get("key_" + i);
									try {
										heldWant = held.asString();
										if (!heldWant.matches("t[0-3]:val_" + i))
											wrong.incrementAndGet();
									} catch (ShmkvException.Released e) {
										released.incrementAndGet(); // a refresh came between get and read
										held = null;
									}
								}
							}
							reads.incrementAndGet();
						}
					} catch (Throwable e) {
						error.compareAndSet(null, e);
					}
				});
				th.start();
				readers.add(th);
			}
			long gen = c.generation(), switched = 0;
			for (int s = 1; s <= SWAPS; s++) {
				publish(imgs[s % IMAGES]);
				long end = System.nanoTime() + DEADLINE_NS;
				while (c.generation() == gen) {
					try {
						if (c.refresh())
							switched++;
					} catch (ShmkvException.Unavailable e) {
						// mid-publish: again
					}
					assertTrue(System.nanoTime() < end, "swap " + s + ": no new generation in 120 s: " + log());
					if (error.get() != null)
						throw new AssertionError("a reader failed", error.get());
					if (c.generation() == gen)
						Thread.sleep(1);
				}
				gen = c.generation();
				assertEquals(s % IMAGES, c.getLong("n"), "swap " + s);
			}
			stop.set(true);
			for (Thread th : readers)
				th.join(TimeUnit.SECONDS.toMillis(60));
			if (error.get() != null)
				throw new AssertionError("a reader failed", error.get());
			System.out.printf("LoaderSwapTest: %d swaps (generation %d -> %d), %d reads, %d wrong, %d held values "
					+ "released%n", SWAPS, g0, gen, reads.get(), wrong.get(), released.get());
			assertEquals(0, wrong.get(), "wrong values");
			assertEquals(SWAPS, switched, "one switching refresh per swap");
			assertTrue(reads.get() > SWAPS, "the readers ran: " + reads.get());
			assertTrue(released.get() > 0, "a held value met a released generation");
		}
	}
}
