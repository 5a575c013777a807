package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Changes to a cache served by a real shmkv-loader (loader/README.md,
 * "Writes"; lib/PROTOCOL.md, "Protocol 2"), read by a Java handle attached
 * throughout: {@code shmctl cache set}, {@code remove} and {@code apply}
 * each seen after the refresh that follows its publish (gets, typed gets,
 * batches, the iteration and expiry through the overlay), a delta applied
 * under a reader that never sees half of it, a snapshot keeping its
 * generation, {@code rollback} giving the previous answers and undoing
 * itself, a full {@code cache load} replacing base and overlay. The first
 * change replaces the protocol 1 control segment: a handle attached before
 * it is Stale, keeps serving, and attaching again reads protocol 2.
 */
class LoaderWritesTest {
	static final String CACHE = "w";
	static final int KEYS = 200;
	/** An expiry (2096) and a later one. */
	static final long E = 4_000_000_000L, LATER = 4_100_000_000L;

	@TempDir
	Path tmp;
	LoaderProcess ld;

	@BeforeEach
	void start() throws Exception {
		ld = LoaderProcess.start(tmp);
	}

	@AfterEach
	void stop() throws Exception {
		if (ld != null)
			ld.close();
	}

	/** What a key answers: a string or an i64, and its expiry (0: none). */
	record Want(Object value, long expires) {}

	/** The records of image tag: key_N = "TAG:val_N", "n" = KEYS (i64), "exp_base" = "TAG:exp" expiring at E. */
	static Map<String, Want> records(String tag) {
		Map<String, Want> m = new LinkedHashMap<>();
		for (int i = 0; i < KEYS; i++)
			m.put("key_" + i, new Want(tag + ":val_" + i, 0));
		m.put("n", new Want((long) KEYS, 0));
		m.put("exp_base", new Want(tag + ":exp", E));
		return m;
	}

	Path image(String tag) throws Exception {
		List<String> lines = new ArrayList<>();
		for (Map.Entry<String, Want> r : records(tag).entrySet())
			lines.add(jsonl(r.getKey(), r.getValue()));
		Path out = tmp.resolve(tag + ".shmkv");
		Programs.build(out, CACHE, lines);
		return out;
	}

	static String jsonl(String key, Want w) {
		String v = w.value() instanceof String s ? "\"" + s + "\"" : w.value().toString();
		return "{\"key\": \"" + key + "\", \"value\": " + v + (w.expires() != 0 ? ", \"expires\": " + w.expires() : "")
				+ "}";
	}

	/** The control segment's protocol version (written once, before the file got its name). */
	int protocol() throws Exception {
		return ByteBuffer.wrap(Files.readAllBytes(ld.root.resolve(CACHE + ".ctl"))).order(ByteOrder.LITTLE_ENDIAN)
				.getInt(8);
	}

	/** Refreshes c until it switches (a change's shmctl returns once it is published: at once). */
	static void switches(Shmkv c, LoaderProcess ld) throws Exception {
		long before = c.generation(), end = System.nanoTime() + LoaderProcess.DEADLINE_NS;
		for (;;) {
			try {
				if (c.refresh())
					break;
			} catch (ShmkvException.Unavailable e) {
				// mid-publish: again
			}
			assertTrue(System.nanoTime() < end, "no new generation in 120 s: " + ld.log());
			Thread.sleep(1);
		}
		assertTrue(c.generation() > before);
	}

	/**
	 * r answers as model says at clock now, every key of model and every key
	 * of gone (absent): single gets, typed gets, one batch, the iteration
	 * (the live keys, each once, with their values) and its size.
	 */
	static void answers(ShmkvReader r, Map<String, Want> model, List<String> gone, long now) {
		r.setClock(now);
		Map<String, Object> live = new HashMap<>();
		List<String> keys = new ArrayList<>(model.keySet());
		keys.addAll(gone);
		for (String k : keys) {
			Want w = model.get(k);
			boolean isLive = w != null && (w.expires() == 0 || now < w.expires());
			Value v = r.get(k);
			if (!isLive) {
				assertNull(v, k + " is absent at " + now);
				assertNull(r.getString(k), k);
				assertEquals(-7, r.getLong(k, -7), k);
				continue;
			}
			live.put(k, w.value());
			assertNotNull(v, k + " at " + now);
			assertEquals(w.expires(), v.expires(), k);
			if (w.value() instanceof String s) {
				assertEquals(s, r.getString(k), k);
				assertEquals(s, v.asString(), k);
			} else {
				assertEquals(w.value(), r.getLong(k), k);
			}
		}
		List<Value> batch = r.getAll(keys);
		for (int i = 0; i < keys.size(); i++) {
			Object want = live.get(keys.get(i));
			assertEquals(want, batch.get(i) == null ? null : value(batch.get(i)), "batch: " + keys.get(i));
		}
		Map<String, Object> iterated = new HashMap<>();
		for (Value v : r)
			assertNull(iterated.put(new String(v.key()), value(v)), "iterated once: " + new String(v.key()));
		assertEquals(live, iterated, "the iteration at " + now);
		assertEquals(live.size(), r.size());
	}

	static Object value(Value v) {
		return v.type() == ValueType.I64 ? (Object) v.asLong() : v.asString();
	}

	@Test
	void changesRollbackAndAFullLoad() throws Exception {
		Map<String, Want> model = records("a");
		List<String> gone = new ArrayList<>(List.of("new", "count", "exp_new", "key_" + KEYS));
		Path base = image("a");
		ld.shmctl("cache", "load", CACHE, base.toString());
		Shmkv early = ld.attachWhenReady(CACHE);
		assertEquals(1, protocol(), "a cache without changes");
		answers(early, model, gone, 0);

		// the first change: a new control segment of protocol 2; the old one is stale
		ld.shmctl("cache", "set", CACHE, "new", "one");
		assertEquals(2, protocol());
		ShmkvException stale = assertThrows(ShmkvException.Stale.class, early::refresh);
		assertEquals("SHMKV_ESTALE", stale.codeName());
		answers(early, model, gone, 0); // still serves what it has
		early.close();
		model.put("new", new Want("one", 0));
		gone.remove("new");

		try (Shmkv c = ld.attachWhenReady(CACHE)) {
			answers(c, model, gone, 0);
			assertTrue(c.deltaId().isPresent(), "read through an overlay");
			long g = c.generation();
			Level baseMap = c.current().level(0); // kept by every refresh until the full load

			// remove a base key: absent once refreshed
			ld.shmctl("cache", "remove", CACHE, "key_5");
			assertEquals("a:val_5", c.getString("key_5"), "until refresh");
			assertEquals(g, c.generation());
			switches(c, ld);
			model.remove("key_5");
			gone.add("key_5");
			answers(c, model, gone, 0);

			// a typed upsert; an expiring one; the base's expiring key replaced by one that does not expire
			ld.shmctl("cache", "set", CACHE, "count", "42", "--type", "i64");
			switches(c, ld);
			assertEquals(42, c.getLong("count"));
			ld.shmctl("cache", "set", CACHE, "exp_new", "soon", "--expires", Long.toString(LATER));
			ld.shmctl("cache", "set", CACHE, "key_9", "kept", "--expires", Long.toString(E));
			ld.shmctl("cache", "set", CACHE, "exp_base", "forever");
			switches(c, ld);
			model.put("count", new Want(42L, 0));
			model.put("exp_new", new Want("soon", LATER));
			model.put("key_9", new Want("kept", E));
			model.put("exp_base", new Want("forever", 0));
			gone.removeAll(List.of("count", "exp_new"));
			for (long now : new long[] {0, E - 1, E, LATER - 1, LATER})
				answers(c, model, gone, now); // expiry through the overlay: its records' own
			c.setClock(0);
			Map<String, Want> beforeApply = new LinkedHashMap<>(model);
			List<String> goneBeforeApply = new ArrayList<>(gone);

			// a delta of the base applied while a second reader refreshes: it sees 50 keys all old or all new
			List<String> lines = new ArrayList<>();
			for (int i = 100; i < 150; i++)
				lines.add("{\"key\": \"key_" + i + "\", \"value\": \"v2-" + i + "\"}");
			lines.add("{\"key\": \"key_7\", \"remove\": true}");
			Path delta = tmp.resolve("d1.delta");
			Programs.build(delta, CACHE, lines, "--delta-of", base.toString());
			List<String> fifty = new ArrayList<>();
			for (int i = 100; i < 150; i++)
				fifty.add("key_" + i);
			AtomicBoolean stop = new AtomicBoolean();
			AtomicLong mixed = new AtomicLong(), seenNew = new AtomicLong(), batches = new AtomicLong();
			AtomicReference<Throwable> error = new AtomicReference<>();
			Snapshot held = c.snapshot();
			try (Shmkv r2 = ld.attachWhenReady(CACHE)) {
				Thread t = new Thread(() -> {
					try {
						while (!stop.get()) {
							try {
								r2.refresh();
							} catch (ShmkvException.Unavailable e) {
								// mid-publish
							}
							List<Value> vs = r2.getAll(fifty);
							int news = 0;
							for (int i = 0; i < vs.size(); i++)
								news += vs.get(i).asString().equals("v2-" + (100 + i)) ? 1 : 0;
							if (news != 0 && news != 50)
								mixed.incrementAndGet();
							if (news == 50)
								seenNew.incrementAndGet();
							batches.incrementAndGet();
						}
					} catch (Throwable e) {
						error.set(e);
					}
				});
				t.start();
				ld.shmctl("cache", "apply", CACHE, delta.toString());
				long end = System.nanoTime() + LoaderProcess.DEADLINE_NS;
				while (seenNew.get() == 0 && error.get() == null && System.nanoTime() < end)
					Thread.sleep(5);
				stop.set(true);
				t.join(LoaderProcess.DEADLINE_NS / 1_000_000);
				if (error.get() != null)
					throw new AssertionError("the second reader failed", error.get());
				assertTrue(seenNew.get() > 0, "the second reader saw the delta in 120 s");
				assertEquals(0, mixed.get(), "batches that mixed generations, of " + batches.get());
			}
			switches(c, ld);
			for (int i = 100; i < 150; i++)
				model.put("key_" + i, new Want("v2-" + i, 0));
			model.remove("key_7");
			gone.add("key_7");
			answers(c, model, gone, 0);
			answers(held, beforeApply, goneBeforeApply, 0); // the snapshot: its generation whole
			held.close();
			assertSame(baseMap, c.current().level(0), "a refresh to a change mapped the base anew");
			Map<String, Want> afterApply = new LinkedHashMap<>(model);
			List<String> goneAfterApply = new ArrayList<>(gone);

			// rollback: the answers before the apply; again: undone
			ld.shmctl("cache", "rollback", CACHE);
			switches(c, ld);
			answers(c, beforeApply, goneBeforeApply, 0);
			ld.shmctl("cache", "rollback", CACHE);
			switches(c, ld);
			answers(c, afterApply, goneAfterApply, 0);

			// a full load: a new base, no overlay, in the same control segment (still protocol 2)
			ld.shmctl("cache", "load", CACHE, image("b").toString());
			switches(c, ld);
			assertEquals(2, protocol());
			model = records("b");
			gone = new ArrayList<>(List.of("new", "count", "exp_new", "key_" + KEYS));
			answers(c, model, gone, 0);
			assertTrue(c.deltaId().isEmpty(), "no overlay after a full load");
			assertNotSame(baseMap, c.current().level(0), "a full load's base is the old one's mapping");
			// and a change on the new base
			ld.shmctl("cache", "set", CACHE, "new", "two");
			switches(c, ld);
			model.put("new", new Want("two", 0));
			gone.remove("new");
			answers(c, model, gone, 0);
			assertTrue(c.deltaId().isPresent());

			// dropped: stale, still serving
			ld.shmctl("cache", "drop", CACHE);
			assertThrows(ShmkvException.Stale.class, c::refresh);
			answers(c, model, gone, 0);
		}
	}
}
