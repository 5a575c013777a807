package org.shmkv;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Control segments written by hand, byte by byte as lib/PROTOCOL.md lays
 * them out, over images of the test-only {@link Encoder}: protocol 2's base
 * read through its overlay (FORMAT.md §19) answers as
 * {@link Shmkv#of(byte[], byte[], Shmkv.Check)} does, the overlay copy
 * chosen by the base copy's node, refresh across overlays and bases, a
 * segment path that is a symbolic link (its target, checked); and
 * every rule of "Protocol 2" broken once: unknown segment flags (OVERLAY in
 * version 1), overlay copies without a base copy (the top overlay's rules:
 * {@link LevelsTest}), a delta where a base is
 * named and a plain image where an overlay is, another version's layout
 * hash, an overlay of another base (SHMKV_EBASE) — at attach, and at
 * refresh, which keeps its generation and remembers the failure.
 */
class ControlSegmentTest {
	static final String NAME = "feat";

	@TempDir
	Path dir;
	Path root, ctl;
	/** base, delta: DeltaTest's; delta2 another overlay of base; base2 another base; delta22 an overlay of base2. */
	byte[] base, delta, delta2, base2, delta22;
	Path baseF, deltaF, delta2F, base2F, delta22F;
	long seq;

	/** One entry of segments[]. */
	record Seg(int node, int flags, Path path, long size) {
		static Seg base(Path p) {
			return new Seg(-1, 0, p, size(p));
		}

		static Seg overlay(Path p) {
			return new Seg(-1, Ctl.SEG_OVERLAY, p, size(p));
		}

		static long size(Path p) {
			try {
				return Files.size(p);
			} catch (IOException e) {
				throw new java.io.UncheckedIOException(e);
			}
		}

		Seg on(int n) {
			return new Seg(n, flags, path, size);
		}

		Seg flags(int f) {
			return new Seg(node, f, path, size);
		}
	}

	Path write(String name, byte[] img) throws IOException {
		Path p = dir.resolve(name);
		Files.write(p, img);
		Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rw-r--r--"));
		return p;
	}

	@BeforeEach
	void images() throws Exception {
		root = Files.createDirectory(dir.resolve("root"));
		ctl = root.resolve(NAME + ".ctl");
		base = DeltaTest.base();
		delta = DeltaTest.delta(base);
		Encoder d2 = new Encoder();
		d2.seed = DeltaTest.SEED;
		d2.add("key_5", Format.STRING, Encoder.str("second_5"));
		d2.add("added", Format.I64, Encoder.i64(2));
		d2.tomb("key_6");
		delta2 = d2.delta(d2.buckets(), base);
		Encoder b2 = new Encoder();
		b2.seed = DeltaTest.SEED;
		for (int i = 0; i < 100; i++)
			b2.add("key_" + i, Format.STRING, Encoder.str("base2_" + i));
		base2 = b2.build(b2.buckets());
		Encoder d22 = new Encoder();
		d22.seed = DeltaTest.SEED;
		d22.add("key_1", Format.STRING, Encoder.str("over2_1"));
		delta22 = d22.delta(d22.buckets(), base2);
		baseF = write("base.seg", base);
		deltaF = write("delta.seg", delta);
		delta2F = write("delta2.seg", delta2);
		base2F = write("base2.seg", base2);
		delta22F = write("delta22.seg", delta22);
	}

	/** The 2176 bytes from seq on as the loader publishes them: generation gen, these entries. */
	static ByteBuffer body(long seq, long gen, int flags, int count, Seg... segs) {
		ByteBuffer b = ByteBuffer.allocate(4096).order(ByteOrder.LITTLE_ENDIAN);
		b.putLong(24, seq).putLong(32, gen).putInt(40, count).putInt(44, flags).putLong(48, 4242).putLong(56, 1);
		for (int i = 0; i < segs.length; i++) {
			int o = 128 + 256 * i;
			Seg s = segs[i];
			b.putInt(o, s.node()).putInt(o + 4, s.flags()).putLong(o + 8, s.size())
					.putLong(o + 16, (s.size() + 4095) & ~4095L).putLong(o + 24, 4096);
			byte[] p = s.path().toString().getBytes(StandardCharsets.UTF_8);
			b.put(o + 32, p);
		}
		return b;
	}

	/** A new control segment of version v with layout hash h, generation 1 published with segs. */
	void create(int v, long h, Seg... segs) throws IOException {
		create(v, h, segs.length, segs);
	}

	void create(int v, long h, int count, Seg... segs) throws IOException {
		seq = 2;
		ByteBuffer b = body(seq, 1, 0, count, segs);
		b.put(0, "SHMKVCTL".getBytes(StandardCharsets.US_ASCII)).putInt(8, v).putInt(12, 4096).putLong(16, h);
		Path t = root.resolve(".tmp");
		Files.write(t, b.array());
		Files.setPosixFilePermissions(t, PosixFilePermissions.fromString("rw-r--r--"));
		Files.move(t, ctl, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
	}

	void create2(Seg... segs) throws IOException {
		create(Ctl.PROTOCOL_2, Ctl.LAYOUT_HASH_V2, segs);
	}

	/** Publishes generation gen in place, as shmkv_ctl_publish does: seq odd, the fields, generation, seq even. */
	void publish(long gen, int flags, Seg... segs) throws IOException {
		try (FileChannel ch = FileChannel.open(ctl, StandardOpenOption.WRITE)) {
			ByteBuffer b = body(seq + 2, gen, flags, segs.length, segs);
			ch.write(le(8).putLong(0, seq + 1), 24);
			ch.write(b.slice(40, 4096 - 40), 40);
			ch.write(le(8).putLong(0, gen), 32);
			ch.write(le(8).putLong(0, seq + 2), 24);
			seq += 2;
		}
	}

	static ByteBuffer le(int n) {
		return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
	}

	Shmkv attach() {
		return Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS);
	}

	/** c answers every key, batch and iteration as the reference (Shmkv.of of the same images) does. */
	static void readsAs(Shmkv ref, ShmkvReader c) {
		List<byte[]> keys = new ArrayList<>();
		for (Value v : ref.allRecords())
			keys.add(v.key());
		for (Value v : c.allRecords())
			keys.add(v.key());
		keys.add(Encoder.str("absent"));
		for (byte[] k : keys) {
			String what = Keys.show(k, k.length);
			DeltaTest.same(rec(ref.get(k)), c.get(k), what);
		}
		Value[] want = ref.getAll(keys.toArray(new byte[0][])), got = c.getAll(keys.toArray(new byte[0][]));
		for (int i = 0; i < keys.size(); i++)
			DeltaTest.same(rec(want[i]), got[i], "batch key " + i);
		List<String> a = new ArrayList<>(), b = new ArrayList<>();
		for (Value v : ref)
			a.add(DeltaTest.HEX.formatHex(v.key()) + "=" + DeltaTest.HEX.formatHex(v.toBytes()) + "@" + v.expires());
		for (Value v : c)
			b.add(DeltaTest.HEX.formatHex(v.key()) + "=" + DeltaTest.HEX.formatHex(v.toBytes()) + "@" + v.expires());
		assertEquals(a, b, "the iteration, in order");
		assertEquals(ref.size(), c.size());
		assertEquals(ref.recordCount(), c.recordCount());
	}

	static Encoder.Rec rec(Value v) {
		return v == null ? null : new Encoder.Rec(v.key(), v.type().code(), v.toBytes(), v.expires(), false, false);
	}

	/** The test's hook, run once: IOExceptions unchecked. */
	interface Swap {
		void run() throws IOException;
	}

	static Runnable once(Swap s) {
		boolean[] done = {false};
		return () -> {
			if (done[0])
				return;
			done[0] = true;
			try {
				s.run();
			} catch (IOException e) {
				throw new java.io.UncheckedIOException(e);
			}
		};
	}

	/**
	 * A file put under a segment's or the control segment's name between the
	 * reader's checks and its opening (another user's, in a directory others
	 * can write that a control segment names) is not read:
	 * Java has no fstat of a descriptor, so the key (device, inode) the path
	 * names after the mapping must be the one checked (ESTALE), and the
	 * control segment is opened with O_NOFOLLOW. Here the swaps are the
	 * test's own (a link re-pointed, a file renamed over), each to a file
	 * every other check passes, a copy of the same bytes among them: only
	 * the key tells; and, run as root, to a file of a second uid (65534).
	 */
	@Test
	void aFileSwappedBetweenCheckAndOpenIsNotRead() throws Exception {
		Path link = Files.createSymbolicLink(root.resolve("swap.link"), baseF);
		Path copy = write("copy.seg", base);
		create2(Seg.base(link), Seg.overlay(deltaF));
		try {
			Shmkv.beforeSegmentOpen = once(() -> {
				Files.delete(link);
				Files.createSymbolicLink(link, copy);
			});
			ShmkvException e = assertThrows(ShmkvException.Stale.class, this::attach);
			assertTrue(e.getMessage().contains("replaced while it was opened"), e.getMessage());
			// the overlay's turn: the base maps, then its overlay is swapped
			Path olink = Files.createSymbolicLink(root.resolve("swap.olink"), deltaF);
			Path ocopy = write("ocopy.seg", delta);
			create2(Seg.base(baseF), Seg.overlay(olink));
			int[] calls = {0};
			Runnable swap = once(() -> {
				Files.delete(olink);
				Files.createSymbolicLink(olink, ocopy);
			});
			Shmkv.beforeSegmentOpen = () -> {
				if (++calls[0] == 2)
					swap.run();
			};
			e = assertThrows(ShmkvException.Stale.class, this::attach);
			assertTrue(e.getMessage().contains("replaced while it was opened"), e.getMessage());
			// another user's file swapped in (a second uid; root can make
			// one): refused, saying whose it is, never read
			if ((int) Files.getAttribute(root, "unix:uid") == 0) {
				Path theirs = write("theirs.seg", base);
				Files.setAttribute(theirs, "unix:uid", 65534);
				Path tlink = Files.createSymbolicLink(root.resolve("swap.tlink"), baseF);
				create2(Seg.base(tlink), Seg.overlay(deltaF));
				Shmkv.beforeSegmentOpen = once(() -> {
					Files.delete(tlink);
					Files.createSymbolicLink(tlink, theirs);
				});
				e = assertThrows(ShmkvException.Stale.class, this::attach);
				assertTrue(e.getMessage().contains("changed while it was opened")
						&& e.getMessage().contains("uid 65534"), e.getMessage());
				create2(Seg.base(baseF), Seg.overlay(olink));
			}
			// no swap: the same files attach and read as ever
			Shmkv.beforeSegmentOpen = null;
			try (Shmkv c = attach(); Shmkv ref = Shmkv.of(base, delta, Shmkv.Check.CHECKSUMS)) {
				readsAs(ref, c);
			}
			// the control segment renamed over by a copy of itself: ESTALE
			Path ctlCopy = root.resolve("ctl.copy");
			Files.copy(ctl, ctlCopy);
			Ctl.beforeOpen = once(() -> Files.move(ctlCopy, ctl, java.nio.file.StandardCopyOption.REPLACE_EXISTING));
			e = assertThrows(ShmkvException.Stale.class, this::attach);
			assertTrue(e.getMessage().contains("replaced"), e.getMessage());
			// ... or by a symbolic link to it: not followed
			Files.copy(ctl, ctlCopy);
			Ctl.beforeOpen = once(() -> {
				Files.delete(ctl);
				Files.createSymbolicLink(ctl, ctlCopy);
			});
			e = assertThrows(ShmkvException.class, this::attach);
			assertTrue(e.getMessage().contains("symbolic link"), e.getMessage());
		} finally {
			Shmkv.beforeSegmentOpen = null;
			Ctl.beforeOpen = null;
		}
	}

	/**
	 * A segment path that is a symbolic link is followed, as the C reader's
	 * open() of a segment follows it (lib/PROTOCOL.md, "Attach": only the
	 * control segment is opened with O_NOFOLLOW): its target is read, and
	 * checked as the file itself would be ("Trust": a target writable by
	 * others is EPERM); a link to nothing is ENOENT.
	 */
	@Test
	void aSegmentBehindASymbolicLinkIsItsTarget() throws Exception {
		Path link = Files.createSymbolicLink(root.resolve("base.link"), baseF);
		Path overlay = Files.createSymbolicLink(root.resolve("delta.link"), deltaF);
		create2(Seg.base(link), Seg.overlay(overlay));
		try (Shmkv c = attach(); Shmkv ref = Shmkv.of(base, delta, Shmkv.Check.CHECKSUMS)) {
			readsAs(ref, c);
			assertEquals(Encoder.checksum(base), c.checksum());
		}
		Path loose = write("loose.seg", base);
		Files.setPosixFilePermissions(loose, PosixFilePermissions.fromString("rw-rw-rw-"));
		Path looseLink = Files.createSymbolicLink(root.resolve("loose.link"), loose);
		create2(Seg.base(looseLink));
		ShmkvException e = assertThrows(ShmkvException.Io.class, this::attach);
		assertEquals("EPERM", e.codeName(), e.getMessage());
		// a target of another user (the link itself the control segment's
		// owner's): EPERM, as the file itself would be; root can make one
		if ((int) Files.getAttribute(root, "unix:uid") == 0) {
			Path theirs = write("theirs.seg", base);
			Files.setAttribute(theirs, "unix:uid", 65534);
			create2(Seg.base(Files.createSymbolicLink(root.resolve("theirs.link"), theirs)));
			e = assertThrows(ShmkvException.Io.class, this::attach);
			assertEquals("EPERM", e.codeName(), e.getMessage());
		}
		Path gone = write("gone.seg", base);
		Seg dangling = Seg.base(Files.createSymbolicLink(root.resolve("gone.link"), gone));
		Files.delete(gone);
		create2(dangling);
		e = assertThrows(ShmkvException.Io.class, this::attach);
		assertEquals("ENOENT", e.codeName(), e.getMessage());
	}

	/** A generation of protocol 2 is its base read through its overlay, in any order of entries. */
	@Test
	void baseThroughItsOverlay() throws Exception {
		create2(Seg.overlay(deltaF), Seg.base(baseF));
		try (Shmkv c = attach(); Shmkv ref = Shmkv.of(base, delta, Shmkv.Check.CHECKSUMS)) {
			for (long now : new long[] {DeltaTest.E - 1, DeltaTest.E, DeltaTest.E + 10}) {
				c.setClock(now);
				ref.setClock(now);
				readsAs(ref, c); // expiry on either side, as through the delta
			}
			c.setClock(DeltaTest.E - 1);
			assertEquals("new_5", c.getString("key_5"), "an upsert wins");
			assertNull(c.get("key_9"), "a tombstone is absent");
			assertEquals("val_1", c.getString("key_1"), "the base answers the rest");
			assertEquals(Encoder.checksum(delta), c.deltaId().orElseThrow().checksum());
			assertEquals(Encoder.checksum(base), c.checksum(), "the base's identity");
			assertFalse(c.isDelta());
			assertEquals(1, c.generation());
			c.verify();
		}
		// no overlay copy: the base alone, as in version 1
		create2(Seg.base(baseF));
		try (Shmkv c = attach(); Shmkv ref = Shmkv.of(base, Shmkv.Check.CHECKSUMS)) {
			readsAs(ref, c);
			assertTrue(c.deltaId().isEmpty());
		}
	}

	/**
	 * The base copy: the node's (the calling thread's, from getcpu, where
	 * native access is enabled, as in these tests), else the first; its
	 * overlay: the copy on its node, else the first.
	 */
	@Test
	void theOverlayOfTheBaseCopysNode() throws Exception {
		// delta2F on node 1, deltaF on node 0 (each overlay's answer names its node)
		create2(Seg.overlay(delta2F).on(1), Seg.base(baseF).on(0), Seg.base(baseF).on(1), Seg.overlay(deltaF).on(0));
		try (Shmkv c = Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS, 0)) {
			assertEquals("new_5", c.getString("key_5"));
		}
		try (Shmkv c = Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS, 1)) {
			assertEquals("second_5", c.getString("key_5"));
		}
		create2(Seg.base(baseF).on(1), Seg.base(baseF).on(0), Seg.overlay(deltaF).on(0), Seg.overlay(delta2F).on(1));
		try (Shmkv c = Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS, 0)) {
			assertEquals("new_5", c.getString("key_5"), "node 0's base copy, the second");
		}
		try (Shmkv c = Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS, 1)) {
			assertEquals("second_5", c.getString("key_5"));
		}
		// the calling thread's node (this machine's: getcpu with native access)
		assertTrue(Numa.known(), "native access is enabled for the tests (pom.xml): getcpu found");
		int here = Numa.currentNode();
		assertTrue(here >= 0 && here < 64, "node " + here);
		boolean second = Numa.pick(new int[] {1, 0}, here, Numa::distances) == 1;
		try (Shmkv c = attach()) {
			assertEquals(second ? "new_5" : "second_5", c.getString("key_5"), "the copy for node " + here);
		}
		// node 0's copy will not map (its file is gone): the first copy, and its overlay
		create2(Seg.base(baseF).on(1), new Seg(0, 0, root.resolve("gone.shmkv"), Seg.size(baseF)),
				Seg.overlay(deltaF).on(0), Seg.overlay(delta2F).on(1));
		try (Shmkv c = Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS, 0)) {
			assertEquals("second_5", c.getString("key_5"));
		}
		// a node without a copy, and sysfs without it: the first copy
		try (Shmkv c = Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS, 63)) {
			assertEquals("second_5", c.getString("key_5"));
		}
		assertThrows(ShmkvException.Io.class, () -> Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS, 64));
		assertThrows(ShmkvException.Io.class, () -> Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS, -2));
		// node 0's copy a file others can write ("Trust": EPERM): never read, the first copy instead
		Path loose = write("loose-node0.seg", base);
		Files.setPosixFilePermissions(loose, PosixFilePermissions.fromString("rw-rw-rw-"));
		create2(Seg.base(baseF).on(1), new Seg(0, 0, loose, Seg.size(loose)),
				Seg.overlay(deltaF).on(0), Seg.overlay(delta2F).on(1));
		try (Shmkv c = Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS, 0)) {
			assertEquals("second_5", c.getString("key_5"));
			assertTrue(c.current().source.startsWith(baseF.toString()), c.current().source);
		}
		// and alone, with no copy to fall back on: its error
		create2(new Seg(0, 0, loose, Seg.size(loose)));
		assertEquals("EPERM", assertThrows(ShmkvException.Io.class,
				() -> Shmkv.attach(NAME, root, Shmkv.Check.CHECKSUMS, 0)).codeName());
		// no overlay on the base copy's node: the first overlay copy
		create2(Seg.base(baseF).on(3), Seg.overlay(delta2F).on(0), Seg.overlay(deltaF).on(1));
		try (Shmkv c = attach()) {
			assertEquals("second_5", c.getString("key_5"));
		}
	}

	/**
	 * Refresh follows each generation whole: a new overlay of the same
	 * base, the previous one again (a rollback), a new base without an
	 * overlay, a new base with its own overlay. A snapshot keeps its
	 * generation, base and overlay both.
	 */
	@Test
	void refreshAcrossOverlaysAndBases() throws Exception {
		create2(Seg.base(baseF), Seg.overlay(deltaF));
		try (Shmkv c = attach()) {
			assertEquals("new_5", c.getString("key_5"));
			assertFalse(c.refresh());
			Snapshot first = c.snapshot();
			publish(2, 0, Seg.base(baseF), Seg.overlay(delta2F));
			assertEquals("new_5", c.getString("key_5"), "until refresh");
			assertTrue(c.refresh());
			assertEquals(2, c.generation());
			assertEquals("second_5", c.getString("key_5"));
			assertNull(c.get("key_6"));
			assertEquals("val_9", c.getString("key_9"), "the first overlay's tombstone is gone with it");
			try (Shmkv ref = Shmkv.of(base, delta2, Shmkv.Check.CHECKSUMS)) {
				readsAs(ref, c);
			}
			try (Shmkv ref = Shmkv.of(base, delta, Shmkv.Check.CHECKSUMS)) {
				first.setClock(DeltaTest.E - 1);
				ref.setClock(DeltaTest.E - 1);
				readsAs(ref, first); // generation 1 whole: its base and its overlay
			}
			first.close();
			publish(3, 0, Seg.base(baseF), Seg.overlay(deltaF)); // a rollback republishes the previous pair
			assertTrue(c.refresh());
			assertEquals("new_5", c.getString("key_5"));
			assertNull(c.get("key_9"));
			publish(4, 0, Seg.base(base2F)); // a full load: a new base, no overlay
			assertTrue(c.refresh());
			try (Shmkv ref = Shmkv.of(base2, Shmkv.Check.CHECKSUMS)) {
				readsAs(ref, c);
			}
			assertTrue(c.deltaId().isEmpty());
			publish(5, 0, Seg.overlay(delta22F), Seg.base(base2F));
			assertTrue(c.refresh());
			assertEquals("over2_1", c.getString("key_1"));
			assertEquals("base2_2", c.getString("key_2"));
			assertNull(c.get("key_500"));
			publish(6, 0); // nothing published: refresh keeps what it has
			assertThrows(ShmkvException.Unavailable.class, c::refresh);
			assertEquals("over2_1", c.getString("key_1"));
			assertEquals(5, c.generation());
		}
	}

	/** Each rule of "Protocol 2", broken at attach: SHMKV_EPROTO (SHMKV_EBASE for an overlay of another base). */
	@Test
	void protocolRulesAtAttach() throws Exception {
		String where = ctl.toString();
		// the version and its layout hash go together
		for (long[] vh : new long[][] {{1, Ctl.LAYOUT_HASH_V2}, {2, Ctl.LAYOUT_HASH}, {3, Ctl.LAYOUT_HASH_V2}, {0, 0}}) {
			create((int) vh[0], vh[1], Seg.base(baseF));
			ShmkvException e = assertThrows(ShmkvException.Proto.class, this::attach);
			MessagesTest.saysEachThingOnce(where, e);
			assertTrue(e.getMessage().contains("protocol version " + vh[0]), e.getMessage());
			assertTrue(e.getMessage().contains("this library speaks versions 1 (layout 4b43ad88b167e31c) and 2 (layout "
					+ "15a70b2227f150fa), size 4096"), e.getMessage());
		}
		// both pairs attach
		create(1, Ctl.LAYOUT_HASH, Seg.base(baseF));
		attach().close();
		create2(Seg.base(baseF));
		attach().close();
		// flags a version does not define: OVERLAY in version 1; any bit above TOP
		// (TOP itself: LevelsTest)
		create(1, Ctl.LAYOUT_HASH, Seg.base(baseF), Seg.overlay(deltaF));
		refused(ShmkvException.Proto.class, where, "segment 1 has flags 2, unknown to protocol 1 (its flags: 1)");
		create(1, Ctl.LAYOUT_HASH, Seg.base(baseF).flags(Ctl.SEG_HUGETLB | 8));
		refused(ShmkvException.Proto.class, where, "segment 0 has flags 9, unknown to protocol 1");
		create2(Seg.base(baseF), Seg.overlay(deltaF).flags(Ctl.SEG_OVERLAY | 8));
		refused(ShmkvException.Proto.class, where, "segment 1 has flags a, unknown to protocol 2 (its flags: 7)");
		// a hugetlb flag is fine in either role
		create2(Seg.base(baseF).flags(Ctl.SEG_HUGETLB), Seg.overlay(deltaF).flags(Ctl.SEG_OVERLAY | Ctl.SEG_HUGETLB));
		try (Shmkv c = attach()) {
			assertEquals("new_5", c.getString("key_5"));
		}
		// overlay copies without a base copy
		create2(Seg.overlay(deltaF));
		refused(ShmkvException.Proto.class, where, "generation 1 has an overlay but no base");
		create2(Seg.overlay(deltaF), Seg.overlay(deltaF).on(1));
		refused(ShmkvException.Proto.class, where, "has an overlay but no base");
		// more entries than segments[] holds
		create(2, Ctl.LAYOUT_HASH_V2, 9, Seg.base(baseF));
		refused(ShmkvException.Proto.class, where, "segment_count 9 over 8");
		// the roles and the images: a delta as the base, a plain image as the overlay (either version)
		create2(Seg.base(deltaF));
		refused(ShmkvException.Proto.class, deltaF + " (cache \"feat\", generation 1)",
				"a delta image where a base belongs");
		create(1, Ctl.LAYOUT_HASH, Seg.base(deltaF));
		refused(ShmkvException.Proto.class, deltaF + " (cache \"feat\", generation 1)",
				"a delta image where a base belongs");
		create2(Seg.base(baseF), Seg.overlay(base2F));
		refused(ShmkvException.Proto.class, base2F + " (the overlay of generation 1)",
				"a plain image where an overlay belongs");
		// an overlay of another base (FORMAT.md §19.4): SHMKV_EBASE, naming both checksums
		create2(Seg.base(baseF), Seg.overlay(delta22F));
		ShmkvException e = refused(ShmkvException.Base.class, baseF + " (cache \"feat\", generation 1)",
				"it was made for another image");
		assertEquals("SHMKV_EBASE", e.codeName());
		assertTrue(e.getMessage().contains(Bytes.hex(Encoder.checksum(base))), e.getMessage());
		assertTrue(e.getMessage().contains(delta22F.toString()), e.getMessage());
		// an overlay whose image is damaged: its checksum, named as the overlay
		byte[] bad = delta.clone();
		bad[bad.length - 1] ^= 1;
		Path badF = write("bad.seg", bad);
		create2(Seg.base(baseF), Seg.overlay(badF));
		ShmkvException c = assertThrows(ShmkvException.class, this::attach);
		assertTrue(c.getMessage().startsWith(badF + " (the overlay of generation 1): "), c.getMessage());
		// nothing published is unavailable (version 2 as 1): no entry, or a base entry without a path
		create2();
		assertThrows(ShmkvException.Unavailable.class, this::attach);
		create2(new Seg(-1, 0, Path.of(""), base.length), Seg.overlay(deltaF));
		e = assertThrows(ShmkvException.Unavailable.class, this::attach);
		assertTrue(e.getMessage().endsWith("nothing published (generation 1 has no segment)"), e.getMessage());
	}

	/** attach refused with kind, the message naming where first, containing what. */
	<T extends ShmkvException> T refused(Class<T> kind, String where, String what) {
		T e = assertThrows(kind, this::attach);
		MessagesTest.saysEachThingOnce(where, e);
		assertTrue(e.getMessage().contains(what), e.getMessage());
		return e;
	}

	/**
	 * A generation that breaks a rule, met by refresh: the error, the
	 * handle keeps its generation (base and overlay) and answers from it,
	 * the same error again without a new publish; the next sound
	 * generation is read.
	 */
	@Test
	void protocolRulesAtRefresh() throws Exception {
		create2(Seg.base(baseF), Seg.overlay(deltaF));
		try (Shmkv c = attach()) {
			List<Runnable> bad = List.of(() -> pub(2, Seg.base(baseF), Seg.overlay(delta22F)), // EBASE
					() -> pub(3, Seg.overlay(deltaF)), // no base
					() -> pub(4, Seg.base(baseF), Seg.overlay(deltaF).flags(10)), // unknown flag
					() -> pub(5, Seg.base(deltaF)), // a delta as the base
					() -> pub(6, Seg.base(baseF), Seg.overlay(baseF))); // a plain image as the overlay
			List<Class<? extends ShmkvException>> kinds = List.of(ShmkvException.Base.class, ShmkvException.Proto.class,
					ShmkvException.Proto.class, ShmkvException.Proto.class, ShmkvException.Proto.class);
			for (int i = 0; i < bad.size(); i++) {
				bad.get(i).run();
				ShmkvException e = assertThrows(kinds.get(i), c::refresh, "publish " + i);
				assertSame(e, assertThrows(kinds.get(i), c::refresh), "remembered until the next publish");
				assertEquals(1, c.generation());
				assertEquals("new_5", c.getString("key_5"));
				assertNull(c.get("key_9"));
			}
			publish(7, 0, Seg.base(baseF), Seg.overlay(delta2F));
			assertTrue(c.refresh());
			assertEquals(7, c.generation());
			assertEquals("second_5", c.getString("key_5"));
			publish(8, Ctl.RETIRED);
			assertThrows(ShmkvException.Stale.class, c::refresh);
			assertEquals("second_5", c.getString("key_5"));
		}
	}

	void pub(long gen, Seg... segs) {
		try {
			publish(gen, 0, segs);
		} catch (IOException e) {
			throw new AssertionError(e);
		}
	}
}
