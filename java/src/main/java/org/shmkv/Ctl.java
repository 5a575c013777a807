package org.shmkv;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Arrays;
import java.util.Map;

/**
 * The control segment ROOT/NAME.ctl (lib/PROTOCOL.md): opening it, the
 * reader's side of the seqcount, whose writer is shmkv_ctl_publish() in
 * lib/shmkv/ctl.h, and which entries of a snapshot a reader maps (a base
 * copy and, in protocol 2, its lower overlay's copy and its top overlay's). Loads use VarHandle acquire mode
 * on the mapped words, as the C reader's __atomic loads do. The constants
 * are lib/shmkv/protocol.h's (FormatTest compares them).
 */
final class Ctl implements AutoCloseable {
	/** Protocol 1: one image a generation; 2: a base and its overlays, a lower and a top (PROTOCOL.md, "Protocol 2"). */
	static final int PROTOCOL_1 = 1, PROTOCOL_2 = 2;
	/** The XXH3-64 (seed 0) of each version's layout description. */
	static final long LAYOUT_HASH = 0x4b43ad88b167e31cL, LAYOUT_HASH_V2 = 0x15a70b2227f150faL;
	static final long SIZE = 4096;
	static final int WORDS = 2176 / 8, MAX_SEGMENTS = 8, PATH_MAX = 224;
	/** The control segment's flags. */
	static final int RETIRED = 1;
	/**
	 * A segment entry's flags: hugetlbfs-backed; (protocol 2) a copy of an
	 * overlay, else of the base; with OVERLAY only, a copy of the top
	 * overlay (OVERLAY alone: of the lower one).
	 */
	static final int SEG_HUGETLB = 1, SEG_OVERLAY = 2, SEG_TOP = 4;
	/** The segment flags each version defines: any other bit is SHMKV_EPROTO. */
	static final int SEG_KNOWN_V1 = SEG_HUGETLB, SEG_KNOWN_V2 = SEG_HUGETLB | SEG_OVERLAY | SEG_TOP;
	static final int SEQ_SPINS = 1 << 16, SEQ_PAUSES = 256;
	static final String NAME_RULE = "1-63 bytes of A-Z a-z 0-9 _ - ., not starting with .";
	/** Coordinates (MemorySegment, long offset); native order is the format's (little-endian hosts only). */
	private static final VarHandle WORD = ValueLayout.JAVA_LONG.varHandle();
	private static final long OFF_SEQ = 24, OFF_GENERATION = 32;

	final Path path;
	/** The cache's name. */
	final String name;
	final Object fileKey;
	final int uid;
	/** PROTOCOL_1 or PROTOCOL_2: written once before the file got its name, never after. */
	final int version;
	private final Arena arena;
	private final MemorySegment seg;

	static boolean validName(String name) {
		if (name == null || name.isEmpty() || name.length() > 63 || name.charAt(0) == '.')
			return false;
		for (int i = 0; i < name.length(); i++) {
			char c = name.charAt(i);
			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'
					|| c == '.'))
				return false;
		}
		return true;
	}

	/** root, else $SHMKV_ROOT, else /run/shmkv (shmkv_ctl_root). */
	static Path root(Path root) {
		if (root != null && !root.toString().isEmpty())
			return root;
		String env = System.getenv("SHMKV_ROOT");
		return Path.of(env != null && !env.isEmpty() ? env : "/run/shmkv");
	}

	/**
	 * The node whose base copy to map (numa=replicate): 0 to 63, or
	 * {@link Shmkv#NODE_CURRENT}, the calling thread's at each attach and
	 * refresh.
	 */
	int node = Shmkv.NODE_CURRENT;

	/** Tests only: runs between the control segment's checks and its opening (null: nothing). */
	static volatile Runnable beforeOpen;

	/** shmkv_ctl_open() for a reader: checks and maps the file read-only. */
	Ctl(Path root, String name) {
		if (!validName(name))
			throw new ShmkvException.Io(22, "EINVAL", null, "invalid cache name \"" + name + "\" (" + NAME_RULE + ")", null);
		root = root(root);
		this.name = name;
		path = root.resolve(name + ".ctl");
		Map<String, Object> st;
		try {
			st = Files.readAttributes(path, "unix:mode,uid,size,fileKey,isRegularFile,isSymbolicLink",
					LinkOption.NOFOLLOW_LINKS);
		} catch (NoSuchFileException e) {
			throw new ShmkvException.Io(2, "ENOENT", null, "no cache \"" + name + "\" under " + root + " (no " + name
					+ ".ctl; is shmkv-loader running with this root? set SHMKV_ROOT)", e);
		} catch (IOException e) {
			throw io(path, e);
		}
		if ((Boolean) st.get("isSymbolicLink"))
			throw new ShmkvException.Io(40, "ELOOP", path.toString(), "a symbolic link, not a control segment", null);
		if (!(Boolean) st.get("isRegularFile"))
			throw new ShmkvException.Proto(path.toString(), "not a regular file");
		long size = (Long) st.get("size");
		if (size < SIZE)
			throw new ShmkvException.Proto(path.toString(), size + " bytes, below " + SIZE);
		int mode = (Integer) st.get("mode");
		if ((mode & 022) != 0)
			throw new ShmkvException.Proto(path.toString(), String.format("mode %04o is writable by group or others: "
					+ "not a control segment to trust", mode & 07777));
		uid = (Integer) st.get("uid");
		fileKey = st.get("fileKey");
		arena = Arena.ofShared();
		Runnable hook = beforeOpen;
		if (hook != null)
			hook.run();
		// O_NOFOLLOW, as the check above; then the path's key again (no
		// fstat of a descriptor in Java): the file mapped is the one checked,
		// not one put under its name between them
		try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
			seg = ch.map(FileChannel.MapMode.READ_ONLY, 0, SIZE, arena);
			checkCurrent();
		} catch (IOException e) {
			arena.close();
			throw io(path, e);
		} catch (RuntimeException e) {
			arena.close();
			throw e;
		}
		// written once before the file got its name, never after: plain reads
		byte[] magic = seg.asSlice(0, 8).toArray(ValueLayout.JAVA_BYTE);
		String problem = null;
		long v = Bytes.u32(seg, 8);
		if (!new String(magic, StandardCharsets.ISO_8859_1).equals("SHMKVCTL"))
			problem = "its magic is not SHMKVCTL";
		else {
			long csize = Bytes.u32(seg, 12), layout = Bytes.u64(seg, 16);
			long want = v == PROTOCOL_1 ? LAYOUT_HASH : v == PROTOCOL_2 ? LAYOUT_HASH_V2 : 0;
			if (want == 0 || csize != SIZE || layout != want)
				problem = "protocol version " + v + " size " + csize + " layout " + Bytes.hex(layout)
						+ ", this library speaks versions " + PROTOCOL_1 + " (layout " + Bytes.hex(LAYOUT_HASH) + ") and "
						+ PROTOCOL_2 + " (layout " + Bytes.hex(LAYOUT_HASH_V2) + "), size " + SIZE;
		}
		if (problem != null) {
			arena.close();
			throw new ShmkvException.Proto(path.toString(), problem);
		}
		version = (int) v;
	}

	static ShmkvException io(Path p, IOException e) {
		if (e instanceof NoSuchFileException)
			return new ShmkvException.Io(2, "ENOENT", p.toString(), "no such file or directory", e);
		if (e instanceof AccessDeniedException)
			return new ShmkvException.Io(13, "EACCES", p.toString(), "permission denied", e);
		return new ShmkvException.Io(5, "EIO", p.toString(), e.toString(), e);
	}

	/** The current generation: one acquire load (shmkv_ctl_generation). */
	long generation() {
		// pairs with shmkv__store_release(&ctl->generation) in
		// lib/shmkv/ctl.h:shmkv_ctl_publish(): seeing the new generation
		// means seeing the section's stores (still copied by read())
		return (long) WORD.getAcquire(seg, OFF_GENERATION);
	}

	/** The seqcount (shmkv__ctl_seq). */
	long seq() {
		// pairs with shmkv__store_release(&ctl->seq, s + 2) in
		// lib/shmkv/ctl.h:shmkv_ctl_publish()
		return (long) WORD.getAcquire(seg, OFF_SEQ);
	}

	/** A consistent copy of the control segment (shmkv__ctl_read_n). */
	record Snap(long seq, long generation, int segmentCount, int flags, long[] words) {
		int segFlags(int i) { return (int) (words[(128 + 256 * i) / 8] >>> 32); }
		long segSize(int i) { return words[(128 + 256 * i + 8) / 8]; }
		long segMapSize(int i) { return words[(128 + 256 * i + 16) / 8]; }
		long segPageSize(int i) { return words[(128 + 256 * i + 24) / 8]; }
		int segNode(int i) { return (int) words[(128 + 256 * i) / 8]; }
		String segPath(int i) {
			byte[] b = new byte[PATH_MAX];
			int n = 0;
			for (; n < PATH_MAX - 1; n++) {
				byte c = (byte) (words[(128 + 256 * i + 32 + n) / 8] >>> (8 * ((32 + n) % 8)));
				if (c == 0)
					break;
				b[n] = c;
			}
			return new String(b, 0, n, StandardCharsets.UTF_8);
		}
	}

	Snap read(int maxPasses) {
		long[] w = new long[WORDS];
		for (int pass = 0; pass < maxPasses; pass++) {
			if (pass > 0) {
				// spin briefly, then let a descheduled writer run
				if (pass < SEQ_PAUSES)
					Thread.onSpinWait();
				else
					Thread.yield();
			}
			// pairs with the final shmkv__store_release(&ctl->seq, s + 2) in
			// lib/shmkv/ctl.h:shmkv_ctl_publish()
			long s1 = (long) WORD.getAcquire(seg, OFF_SEQ);
			if ((s1 & 1) != 0)
				continue;
			for (int i = 0; i < WORDS; i++)
				// acquire; pairs with the store_release of each word in
				// lib/shmkv/ctl.h:shmkv_ctl_publish(): a word from a newer
				// section brings that section's odd seq with it
				w[i] = (long) WORD.getAcquire(seg, 8L * i);
			// plain (relaxed): ordered after the loads above by their acquire
			if ((long) WORD.get(seg, OFF_SEQ) != s1)
				continue;
			int count = (int) w[5];
			int flags = (int) (w[5] >>> 32);
			if (Integer.toUnsignedLong(count) > MAX_SEGMENTS)
				throw new ShmkvException.Proto(path.toString(), "segment_count " + Integer.toUnsignedString(count) + " over "
						+ MAX_SEGMENTS);
			return new Snap(s1, w[4], count, flags, w);
		}
		throw new ShmkvException.Unavailable(path.toString(), "a publish is under way (or its loader died in it): try again");
	}

	/**
	 * The entries of a generation a reader maps: base, a base copy's index;
	 * lower and top, its lower overlay's copy and its top overlay's, or -1
	 * (none: without a lower the base is read alone, without a top through
	 * the lower alone).
	 */
	record Pick(int base, int lower, int top) {}

	/**
	 * Which entries of s to map (PROTOCOL.md, "Replicas" and "Protocol 2"):
	 * the entries split into base copies (no OVERLAY flag), lower overlay
	 * copies (OVERLAY) and top overlay copies (OVERLAY and TOP); the base
	 * copy is the one for node want ({@link Numa#pick}: pinned to it, else
	 * the nearest, else the first; want -1, unknown: the first), each
	 * overlay's the copy on the base copy's node,
	 * else its first copy. Proto when an entry has a flag its protocol
	 * version does not define (OVERLAY and TOP in version 1), TOP without
	 * OVERLAY, or the generation has overlay copies but no base copy, or top
	 * copies but no lower copy; null when it has no entry (nothing
	 * published).
	 */
	Pick pick(Snap s, int want) {
		int known = version == PROTOCOL_2 ? SEG_KNOWN_V2 : SEG_KNOWN_V1;
		int base = -1, bases = 0, lowers = 0, tops = 0;
		int[] at = new int[s.segmentCount()], nodes = new int[s.segmentCount()];
		for (int i = 0; i < s.segmentCount(); i++) {
			int f = s.segFlags(i);
			if ((f & ~known) != 0)
				throw new ShmkvException.Proto(path.toString(), "segment " + i + " has flags " + Integer.toHexString(f)
						+ ", unknown to protocol " + version + " (its flags: " + Integer.toHexString(known) + ")");
			if ((f & (SEG_TOP | SEG_OVERLAY)) == SEG_TOP)
				throw new ShmkvException.Proto(path.toString(), "segment " + i + " has flags " + Integer.toHexString(f)
						+ ": the TOP flag without OVERLAY");
			if ((f & SEG_TOP) != 0)
				tops++;
			else if ((f & SEG_OVERLAY) != 0)
				lowers++;
			else {
				if (base < 0)
					base = i;
				at[bases] = i;
				nodes[bases++] = s.segNode(i);
			}
		}
		String gen = "generation " + Long.toUnsignedString(s.generation());
		if (base < 0) {
			if (lowers + tops > 0)
				throw new ShmkvException.Proto(path.toString(), gen + " has an overlay but no base");
			return null;
		}
		if (tops > 0 && lowers == 0)
			throw new ShmkvException.Proto(path.toString(), gen + " has a top overlay but no lower one");
		base = at[Numa.pick(Arrays.copyOf(nodes, bases), want, Numa::distances)];
		return new Pick(base, copy(s, SEG_OVERLAY, s.segNode(base)), copy(s, SEG_OVERLAY | SEG_TOP, s.segNode(base)));
	}

	/** The copy of the overlay whose role bits are role: the one on node, else the first; -1: none. */
	private static int copy(Snap s, int role, int node) {
		int first = -1;
		for (int i = 0; i < s.segmentCount(); i++)
			if ((s.segFlags(i) & (SEG_OVERLAY | SEG_TOP)) == role) {
				if (s.segNode(i) == node)
					return i;
				if (first < 0)
					first = i;
			}
		return first;
	}

	/**
	 * Refresh's first check (lib/PROTOCOL.md "Stale handles"): the path still
	 * names this file and it is not truncated. Java has no fstat of a
	 * descriptor: comparing the file key (device and inode) of the path with
	 * the one opened tells a removed or renamed-over file the same way.
	 */
	void checkCurrent() {
		try {
			BasicFileAttributes a = Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
			if (!fileKey.equals(a.fileKey()))
				throw new ShmkvException.Stale(path.toString(), "the file was replaced");
			if (a.size() < SIZE)
				throw new ShmkvException.Stale(path.toString(), "the file was truncated");
		} catch (NoSuchFileException e) {
			throw new ShmkvException.Stale(path.toString(), "the file was removed");
		} catch (IOException e) {
			throw io(path, e);
		}
	}

	@Override
	public void close() {
		arena.close();
	}
}
