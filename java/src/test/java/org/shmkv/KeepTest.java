package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A refresh keeps what the new generation shares with the current one
 * (lib/PROTOCOL.md, "Protocol 2"), as tests/overlay_test.cc's
 * RefreshKeepsBase checks the C reader's, on {@link LevelsTest}'s
 * hand-made control segments and levels: across generations of one base
 * (random new tops over a kept lower, folds into a new lower, none) the
 * base's mapping is the one attach made (the same {@link Level}, the same
 * address, one mapping of its file), the lower's too while it is the same
 * file; the overlays of earlier generations are unmapped once no snapshot
 * pins them, those of open snapshots stay until closed, and each snapshot
 * answers its generation's model. A damaged top, or one of another base,
 * is refused and the cache keeps its generation whole (nothing of the
 * refused one left mapped); a new base file (the same bytes) maps the whole
 * generation anew and unmaps the old base.
 */
class KeepTest {
	static final long NOW = LevelsTest.NOW;

	@TempDir
	Path dir;

	final SplittableRandom rng = new SplittableRandom(0x6b5e);
	LevelsTest.Ctl2 c;
	Shmkv db;
	ControlSegmentTest.Seg b, lower, top; // lower, top null: none
	LevelsTest.Levels x; // the levels published now
	Level base;
	long at, gen;

	/** How many of this process's mappings are of the file p (one unlinked since included). */
	static int mapsOf(Path p) {
		String f = p.toString();
		int n = 0;
		try {
			for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
				int i = line.indexOf('/');
				if (i >= 0 && (line.substring(i).equals(f) || line.substring(i).equals(f + " (deleted)")))
					n++;
			}
		} catch (IOException e) {
			throw new UncheckedIOException(e);
		}
		return n;
	}

	/** A copy of l's records (the levels change from one generation to the next). */
	static LevelsTest.Levels copy(LevelsTest.Levels l) {
		LevelsTest.Levels c = new LevelsTest.Levels(DeltaTest.SEED, 64);
		c.base.recs.addAll(l.base.recs);
		c.lower.recs.addAll(l.lower.recs);
		c.top.recs.addAll(l.top.recs);
		return c;
	}

	/** e's records: random upserts and tombstones of the base's keys and new ones. */
	void changes(Encoder e, String tag, int n) {
		e.recs.clear();
		Set<String> seen = new HashSet<>();
		for (int i = 0; i < n; i++) {
			byte[] k = rng.nextBoolean() ? x.base.recs.get(rng.nextInt(x.base.recs.size())).key()
					: Encoder.str("new" + rng.nextInt(500));
			if (!seen.add(LevelsTest.hex(k)))
				continue;
			boolean out = k.length > 100 || rng.nextInt(5) == 0; // long keys: OUT
			if (rng.nextInt(4) == 0)
				e.tomb(k, out);
			else
				e.add(k, Format.STRING, Encoder.str(tag + i), 0, out);
		}
	}

	/** Publishes generation g: base copy bc, and the overlays there are. */
	void publish(long g, ControlSegmentTest.Seg bc, ControlSegmentTest.Seg top) {
		List<ControlSegmentTest.Seg> segs = new ArrayList<>(List.of(bc));
		if (lower != null)
			segs.add(lower);
		if (top != null)
			segs.add(top);
		try {
			c.h.publish(g, 0, segs.toArray(new ControlSegmentTest.Seg[0]));
		} catch (IOException e) {
			throw new UncheckedIOException(e);
		}
	}

	/** The cache reads x as its model, with the base kept and each file of the generation mapped once. */
	void check(String what) {
		Generation g = db.current();
		assertSame(base, g.level(0), what + ": the base was mapped anew");
		assertEquals(at, g.image.seg.address(), what);
		for (ControlSegmentTest.Seg s : new ControlSegmentTest.Seg[] {b, lower, top})
			if (s != null)
				assertEquals(1, mapsOf(s.path()), what + ": mappings of " + s.path());
		LevelsTest.check(db, x, x.encode(), lower != null, top != null, NOW);
	}

	@Test
	void refreshKeepsTheBase() throws IOException {
		LevelsTest.Levels l = LevelsTest.hand(64);
		LevelsTest.Images im = l.encode();
		LevelsTest.Levels o = LevelsTest.hand(64);
		LevelsTest.s(o.base, "other", "o", 0, false);
		LevelsTest.Images other = o.encode();
		x = copy(l);
		x.lower.recs.clear();
		x.top.recs.clear();
		c = new LevelsTest.Ctl2(dir);
		b = c.base("base", im.base());
		c.h.create2(b);
		List<Object[]> held = new ArrayList<>(); // snapshot, levels, images, lower, top (LevelsTest.still's)
		List<Set<Path>> heldFiles = new ArrayList<>();
		db = Shmkv.attach(ControlSegmentTest.NAME, c.h.root, Shmkv.Check.CHECKSUMS);
		try {
			base = db.current().level(0);
			at = db.current().image.seg.address();
			assertEquals(1, mapsOf(b.path()));

			for (gen = 2; gen < 38; gen++) {
				String what = "generation " + gen;
				Level was = db.current().level(1);
				boolean lowerKept = lower != null && gen % 7 != 0 && gen % 13 != 0;
				List<Path> gone = new ArrayList<>(); // the files the generation before named alone
				if (!lowerKept) { // a fold: a new lower, no top (or no overlay at all)
					for (ControlSegmentTest.Seg s : new ControlSegmentTest.Seg[] {top, lower})
						if (s != null)
							gone.add(s.path());
					lower = top = null;
					x.lower.recs.clear();
					x.top.recs.clear();
					if (gen % 13 != 0) {
						changes(x.lower, "l" + gen, 1 + rng.nextInt(80));
						lower = c.lower("lower." + gen, x.encode().lower());
					}
				} else { // a change: a new top over the same lower
					if (top != null)
						gone.add(top.path());
					changes(x.top, "t" + gen, 1 + rng.nextInt(200));
					top = c.top("top." + gen, x.encode().top());
				}
				publish(gen, b, top);
				for (Path p : gone) // what the loader does after a publish
					Files.delete(p);
				assertTrue(db.refresh(), what);
				assertEquals(gen, db.generation());
				if (lowerKept)
					assertSame(was, db.current().level(1), what + ": the same lower was mapped anew");
				check(what);
				for (Path p : gone) {
					boolean pinned = heldFiles.stream().anyMatch(f -> f.contains(p));
					assertEquals(pinned ? 1 : 0, mapsOf(p), what + ": " + p + " (pinned by a snapshot: " + pinned + ")");
				}
				if (gen % 5 == 0) { // a snapshot taken here, held to the end
					held.add(new Object[] {db.snapshot(), copy(x), x.encode(), lower != null, top != null});
					Set<Path> files = new HashSet<>();
					for (ControlSegmentTest.Seg s : new ControlSegmentTest.Seg[] {lower, top})
						if (s != null)
							files.add(s.path());
					heldFiles.add(files);
				}
				LevelsTest.still(held, what);
			}
			assertNotNull(lower, "the last generation has no lower: the refused tops below need one");

			// a damaged top (a byte of its INDEX: only its checksums see it)
			// and a top of another base: refused (remembered), the generation
			// kept whole and nothing of the refused one left mapped
			byte[] damaged = x.encode().top().clone();
			long idx = ByteBuffer.wrap(damaged).order(ByteOrder.LITTLE_ENDIAN).getLong(192 + 8);
			damaged[(int) idx + 200] ^= 0x40;
			long kept = db.generation();
			ControlSegmentTest.Seg[] bad = {c.top("top.damaged", damaged), c.top("top.other", other.top())};
			List<Class<? extends ShmkvException>> kinds = List.of(ShmkvException.Checksum.class,
					ShmkvException.Base.class);
			for (int i = 0; i < bad.length; i++) {
				publish(kept + 1 + i, b, bad[i]);
				ShmkvException e = assertThrows(kinds.get(i), db::refresh, bad[i].path().toString());
				assertSame(e, assertThrows(kinds.get(i), db::refresh), "remembered until the next publish");
				assertEquals(kept, db.generation());
				assertEquals(0, mapsOf(bad[i].path()), bad[i].path() + ": refused, and mapped");
				check("after a refused generation");
			}

			// the snapshots: their overlays stay mapped until closed
			for (Object[] h : held)
				((Snapshot) h[0]).close();
			for (Set<Path> files : heldFiles)
				for (Path p : files)
					if (!p.equals(lower.path()) && (top == null || !p.equals(top.path())))
						assertEquals(0, mapsOf(p), p + ": mapped after the snapshots that pinned it closed");

			// another base file (the same bytes): every level mapped anew, the
			// old base unmapped
			Level wasLower = db.current().level(1);
			ControlSegmentTest.Seg b2 = c.base("base.2", im.base());
			gen = kept + 3;
			publish(gen, b2, top);
			assertTrue(db.refresh());
			Generation g = db.current();
			assertNotSame(base, g.level(0), "a new base file: the old base kept");
			assertNotSame(wasLower, g.level(1), "a new base file: the lower kept");
			assertEquals(0, mapsOf(b.path()), "the old base after a new base");
			base = g.level(0);
			at = g.image.seg.address();
			b = b2;
			check("a new base");
			// its next top keeps it
			changes(x.top, "last", 30);
			top = c.top("top.last", x.encode().top());
			publish(gen + 1, b, top);
			assertTrue(db.refresh());
			check("a top over the new base");
		} finally {
			for (Object[] h : held)
				((Snapshot) h[0]).close();
			db.close();
		}
		for (ControlSegmentTest.Seg s : new ControlSegmentTest.Seg[] {b, lower, top})
			if (s != null)
				assertEquals(0, mapsOf(s.path()), "closed: " + s.path());
	}
}
