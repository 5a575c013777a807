package org.shmkv;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;

/**
 * A shmkv reader: an image file ({@link #open}) or a cache served by
 * shmkv-loader ({@link #attach}), which {@link #refresh()} moves to the
 * newest generation. Safe for any number of threads, refresh and close
 * included: a get reads one generation whole (one racing a refresh
 * finishes on the new one), and an old generation is released when the
 * refresh that replaced it returns, or when the last {@link Snapshot}
 * pinning it closes. Values read from the cache directly are valid until
 * then; a value used after its generation was released throws
 * {@link ShmkvException.Released} once the image it lies in is unmapped
 * (an image the newer generations keep, as the base while only overlays
 * change, stays mapped: see {@link #refresh()}).
 */
public final class Shmkv extends ShmkvReader implements AutoCloseable {
	/** How much of an image is checked when it is mapped. */
	public enum Check {
		/** The header and section table (FORMAT.md §12 checks 1-10): O(1). Lookups stay inside the image anyway. */
		HEADER,
		/** Also zero padding outside sections and every section checksum (§12 checks 11-12). */
		CHECKSUMS,
		/** Also the full structural check of §13 (every bucket and entry). */
		DEEP
	}

	private volatile Generation gen;
	private volatile boolean closed;
	private final Ctl ctl; // null for an image file
	private final String source;
	private final Check check;
	private long failedSeq = -1; // under this
	private ShmkvException failedError;

	private Shmkv(Generation g, Ctl ctl, String source, Check check) {
		this.gen = g;
		this.ctl = ctl;
		this.source = source;
		this.check = check;
	}

	/**
	 * Opens an image file with its checksums checked ({@link Check#CHECKSUMS}).
	 *
	 * @param file the image file
	 * @return the reader; close it
	 * @throws ShmkvException when the file cannot be read or is not a sound
	 *     image of format 2 (a format 1 image is Version, naming the command
	 *     that converts it)
	 */
	public static Shmkv open(Path file) {
		return open(file, Check.CHECKSUMS);
	}

	/**
	 * Opens an image file, checked at open as check says.
	 *
	 * @param file the image file
	 * @param check how much to check now
	 * @return the reader; close it
	 * @throws ShmkvException when the file cannot be read or is not a sound
	 *     image of format 2
	 */
	public static Shmkv open(Path file, Check check) {
		long size = fileSize(file);
		return new Shmkv(map(file, size, file.toString(), check), null, file.toString(), check);
	}

	/**
	 * Opens an image file read through a delta image (FORMAT.md §19), both
	 * with their checksums checked ({@link Check#CHECKSUMS}); see
	 * {@link #open(Path, Path, Check)}.
	 *
	 * @param base the image file
	 * @param delta the delta image file made for it
	 * @return the reader; close it
	 * @throws ShmkvException.Base when the delta does not apply to the image,
	 *     or another ShmkvException when either file cannot be read or is not
	 *     a sound image
	 */
	public static Shmkv open(Path base, Path delta) {
		return open(base, delta, Check.CHECKSUMS);
	}

	/**
	 * Opens an image file read through a delta image (FORMAT.md §19): every
	 * get, typed get, batch and iteration answers as the image with the
	 * delta's changes applied. A key the delta holds is its upsert (absent
	 * once that has expired: the image's record is not consulted) or absent
	 * (a tombstone); any other key is the image's. The iteration yields the
	 * delta's upserts, then the image's records whose key the delta does not
	 * hold. Both files are checked at open as check says, then the delta
	 * against the image (§19.4): the image is a plain image and the delta a
	 * delta made for it (its header checksum and size), the first of its
	 * chain (a chain is merged first: {@code shmctl image apply}), with the
	 * image's hash seed and width. Both stay mapped until close.
	 *
	 * @param base the image file
	 * @param delta the delta image file made for it
	 * @param check how much to check of each now
	 * @return the reader; close it
	 * @throws ShmkvException.Base when the delta does not apply to the image
	 *     (the message names both checksums), or another ShmkvException when
	 *     either file cannot be read or is not a sound image
	 */
	public static Shmkv open(Path base, Path delta, Check check) {
		long bsize = fileSize(base), dsize = fileSize(delta);
		String source = base.toString();
		Arena arena = Arena.ofShared();
		return new Shmkv(generation(arena, source, () -> {
			Image b = mapImage(arena, base, bsize, bsize, source, check, true);
			Image d = mapImage(arena, delta, dsize, dsize, delta.toString(), check, true);
			Through.check(b, d);
			return new Generation(b, d, arena, 0, source + " through " + delta);
		}), null, source + " through " + delta, check);
	}

	/**
	 * Opens an image file read through two delta images of it, a lower and
	 * a top (FORMAT.md §19.6: what a protocol 2 cache with a top overlay
	 * reads, and lib's shmkv_delta_set2): a key the top holds (an upsert,
	 * expired or not, or a tombstone) is the top's answer, else a key the
	 * lower holds is the lower's, else the image's; the iteration yields the
	 * top's upserts, then the lower's whose key the top does not hold, then
	 * the image's whose key neither holds. Each delta is checked against the
	 * image itself as {@link #open(Path, Path, Check)} checks one (§19.4: the
	 * top is a delta of the image, not of the lower). All three stay mapped
	 * until close.
	 *
	 * @param base the image file
	 * @param lower the lower delta image file made for it
	 * @param top the top delta image file made for it; null: the lower alone,
	 *     as {@link #open(Path, Path, Check)}
	 * @param check how much to check of each now
	 * @return the reader; close it
	 * @throws ShmkvException.Base when a delta does not apply to the image
	 *     (the message names which, "lower delta" or "top delta", and both
	 *     checksums), Io EINVAL for a top without a lower (one delta is read
	 *     as the lower), or another ShmkvException when a file cannot be read
	 *     or is not a sound image
	 */
	public static Shmkv open(Path base, Path lower, Path top, Check check) {
		if (lower == null)
			throw noLower(top);
		if (top == null)
			return open(base, lower, check);
		long bsize = fileSize(base), lsize = fileSize(lower), tsize = fileSize(top);
		String source = base.toString(), what = source + " through " + lower + " and " + top;
		Arena arena = Arena.ofShared();
		return new Shmkv(generation(arena, source, () -> {
			Image b = mapImage(arena, base, bsize, bsize, source, check, true);
			Image l = mapImage(arena, lower, lsize, lsize, lower.toString(), check, true);
			Image t = mapImage(arena, top, tsize, tsize, top.toString(), check, true);
			Through.check(b, l, "lower delta");
			Through.check(b, t, "top delta");
			return new Generation(b, l, t, arena, 0, what);
		}), null, what, check);
	}

	private static ShmkvException noLower(Object top) {
		return new ShmkvException.Io(22, "EINVAL", String.valueOf(top), "a top delta without a lower one: one delta "
				+ "is read as the lower (FORMAT.md §19.6)", null);
	}

	/** A file's size; Io when it cannot be read or is not a regular file. */
	private static long fileSize(Path file) {
		Map<String, Object> st;
		try {
			st = Files.readAttributes(file, "size,isRegularFile");
		} catch (IOException e) {
			throw Ctl.io(file, e);
		}
		if (!(Boolean) st.get("isRegularFile"))
			throw new ShmkvException.Io(22, "EINVAL", file.toString(), "not a regular file", null);
		return (Long) st.get("size");
	}

	/**
	 * An image held in memory (copied, aligned as a mapping is): for images
	 * that did not come from a file, and for tests.
	 *
	 * @param bytes the image
	 * @param check how much to check now
	 * @return the reader; close it
	 * @throws ShmkvException when the bytes are not a sound image of format 2
	 */
	public static Shmkv of(byte[] bytes, Check check) {
		String source = "an image in memory";
		Arena arena = Arena.ofShared();
		return new Shmkv(generation(arena, source, () -> new Generation(copy(arena, bytes, source, check), arena, 0,
				source)), null, source, check);
	}

	/**
	 * Images held in memory (copied, aligned as a mapping is), base read
	 * through delta, as {@link #open(Path, Path, Check)} reads files.
	 *
	 * @param base the image
	 * @param delta the delta image made for it
	 * @param check how much to check of each now
	 * @return the reader; close it
	 * @throws ShmkvException.Base when the delta does not apply to the image,
	 *     or another ShmkvException when either is not a sound image
	 */
	public static Shmkv of(byte[] base, byte[] delta, Check check) {
		String source = "an image in memory", dsource = "the delta in memory";
		Arena arena = Arena.ofShared();
		return new Shmkv(generation(arena, source, () -> {
			Image b = copy(arena, base, source, check), d = copy(arena, delta, dsource, check);
			Through.check(b, d);
			return new Generation(b, d, arena, 0, source);
		}), null, source, check);
	}

	/**
	 * Images held in memory (copied, aligned as a mapping is), base read
	 * through a lower and a top delta, as
	 * {@link #open(Path, Path, Path, Check)} reads files.
	 *
	 * @param base the image
	 * @param lower the lower delta image made for it
	 * @param top the top delta image made for it; null: the lower alone
	 * @param check how much to check of each now
	 * @return the reader; close it
	 * @throws ShmkvException.Base when a delta does not apply to the image,
	 *     Io EINVAL for a top without a lower, or another ShmkvException when
	 *     one is not a sound image
	 */
	public static Shmkv of(byte[] base, byte[] lower, byte[] top, Check check) {
		if (lower == null)
			throw noLower("the top delta in memory");
		if (top == null)
			return of(base, lower, check);
		String source = "an image in memory";
		Arena arena = Arena.ofShared();
		return new Shmkv(generation(arena, source, () -> {
			Image b = copy(arena, base, source, check), l = copy(arena, lower, "the lower delta in memory", check),
					t = copy(arena, top, "the top delta in memory", check);
			Through.check(b, l, "lower delta");
			Through.check(b, t, "top delta");
			return new Generation(b, l, t, arena, 0, source);
		}), null, source, check);
	}

	/** bytes copied into arena, 4096-aligned, and checked as an image. */
	private static Image copy(Arena arena, byte[] bytes, String source, Check check) {
		MemorySegment seg = arena.allocate(Math.max(bytes.length, 1), 4096);
		MemorySegment.copy(MemorySegment.ofArray(bytes), 0, seg, 0, bytes.length);
		return new Image(seg.asSlice(0, bytes.length), bytes.length, check.ordinal(), source);
	}

	/** What maps and checks a generation's images in an arena. */
	@FunctionalInterface
	private interface Mapping {
		Generation map();
	}

	/** The generation m maps into arena; any failure closes the arena and is thrown. */
	private static Generation generation(Arena arena, String source, Mapping m) {
		return generation(arena::close, source, m);
	}

	/** The generation m maps; any failure runs undo (what m took is given back) and is thrown. */
	private static Generation generation(Runnable undo, String source, Mapping m) {
		try {
			return m.map();
		} catch (IndexOutOfBoundsException e) {
			undo.run();
			throw new ShmkvException.Corrupt(source, "an offset points outside the image", e);
		} catch (RuntimeException e) {
			undo.run();
			throw e;
		}
	}

	/**
	 * Attaches to a cache served by shmkv-loader, under $SHMKV_ROOT (else
	 * /run/shmkv), checked at attach as {@link Check#HEADER} says.
	 *
	 * @param name the cache's name
	 * @return the reader; close it
	 * @throws ShmkvException see {@link #attach(String, Path, Check)}
	 */
	public static Shmkv attach(String name) {
		return attach(name, null, Check.HEADER);
	}

	/**
	 * Attaches to a cache served by shmkv-loader. The loader verified every
	 * checksum and the full structure before it published the segment, so
	 * {@link Check#HEADER} is the usual choice.
	 *
	 * <p>A cache with changes (a control segment of protocol 2, PROTOCOL.md
	 * "Protocol 2") is read as its base image through its overlays, delta
	 * images of it (FORMAT.md §19): the lower one, and the top one over it
	 * where the generation has one (§19.6); every get, batch and iteration
	 * answers with the changes, and the images are of one generation. A
	 * cache replicated to each NUMA node is read from the copy of the
	 * calling thread's node ({@link #attach(String, Path, Check, int)}).
	 *
	 * @param name the cache's name
	 * @param root the loader's root directory; null: $SHMKV_ROOT, else /run/shmkv
	 * @param check how much to check each generation when it is mapped (the
	 *     overlay as the base)
	 * @return the reader; close it
	 * @throws ShmkvException Io ENOENT (no such cache), Unavailable (nothing
	 *     published yet), Stale (a dropped cache), Proto (not a control
	 *     segment of protocol 1 or 2, or one whose generation breaks its
	 *     rules), Base (an overlay made for another base), or an image error
	 */
	public static Shmkv attach(String name, Path root, Check check) {
		return attach(name, root, check, NODE_CURRENT);
	}

	/**
	 * The node argument of {@link #attach(String, Path, Check, int)} for the
	 * calling thread's node, what the other attach methods read.
	 */
	public static final int NODE_CURRENT = -1;

	/**
	 * {@link #attach(String, Path, Check)} reading, of a cache the loader
	 * replicates to each NUMA node (numa=replicate, PROTOCOL.md "Replicas"),
	 * the copy of node, else the nearest copy by the node distances in
	 * sysfs, else the first; {@link #NODE_CURRENT}: the node of the CPU the
	 * calling thread runs on, at attach and at each refresh. That node is
	 * known where native access is enabled for this library (libc's
	 * getcpu, as the C reader asks it: java/README.md, "NUMA"); elsewhere
	 * the first copy is read. A copy that will not map gives way to the
	 * first.
	 *
	 * @param name the cache's name
	 * @param root the loader's root directory; null: $SHMKV_ROOT, else /run/shmkv
	 * @param check how much to check each generation when it is mapped
	 * @param node 0 to 63, or {@link #NODE_CURRENT}
	 * @return the reader; close it
	 * @throws ShmkvException see {@link #attach(String, Path, Check)}; Io
	 *     EINVAL for a node outside 0 to 63 and not NODE_CURRENT
	 */
	public static Shmkv attach(String name, Path root, Check check, int node) {
		if (node != NODE_CURRENT && (node < 0 || node > 63))
			throw new ShmkvException.Io(22, "EINVAL", null, "node " + node + ": expected 0 to 63 or NODE_CURRENT", null);
		Ctl ctl = new Ctl(root, name);
		ctl.node = node;
		try {
			String source = "cache \"" + name + "\" (" + ctl.path + ")";
			for (int attempt = 0; ; attempt++) {
				Ctl.Snap s = ctl.read(Ctl.SEQ_SPINS);
				try {
					return new Shmkv(mapSnap(ctl, s, name, check, null), ctl, source, check);
				} catch (ShmkvException e) {
					// the loader replaced the segment between snapshot and open
					if (!"ENOENT".equals(e.codeName()) || ctl.generation() == s.generation() || attempt >= 16)
						throw e;
				}
			}
		} catch (RuntimeException e) {
			ctl.close();
			throw e;
		}
	}

	/**
	 * Maps the generation of snapshot s (PROTOCOL.md, "Attach" and "Protocol
	 * 2"): its base copy, checked as a plain image, and in protocol 2 its
	 * lower overlay's copy and its top overlay's if it has them, each
	 * checked as a delta image that applies to the base (FORMAT.md §19.4),
	 * each in an arena of its own that the generation holds: a get reads
	 * base and overlays of one generation. A base that is the same image as
	 * keep's (the current generation at a refresh; null at attach) is kept,
	 * not mapped again, and so is an overlay that is the same image as
	 * keep's at its level (PROTOCOL.md, "Protocol 2": a refresh keeps what
	 * the new generation shares with the current one); a failure releases
	 * only what this call took, so keep stays whole.
	 */
	private static Generation mapSnap(Ctl ctl, Ctl.Snap s, String name, Check check, Generation keep) {
		if ((s.flags() & Ctl.RETIRED) != 0)
			throw new ShmkvException.Stale(ctl.path.toString(), "the cache was retired");
		if (s.generation() == 0 || s.segmentCount() == 0)
			throw new ShmkvException.Unavailable(ctl.path.toString(), "nothing published yet");
		int want = ctl.node != NODE_CURRENT ? ctl.node : Numa.currentNode();
		Ctl.Pick pk = ctl.pick(s, want);
		String gen = Long.toUnsignedString(s.generation());
		if (pk == null || s.segPath(pk.base()).isEmpty())
			throw new ShmkvException.Unavailable(ctl.path.toString(), "nothing published (generation " + gen
					+ " has no segment)");
		Ctl.Pick first = ctl.pick(s, -1);
		if (pk.base() == first.base())
			return mapPick(ctl, s, pk, name, check, keep);
		try {
			return mapPick(ctl, s, pk, name, check, keep);
		} catch (ShmkvException e) { // the node's copy will not map: the first, and its overlays (as the C and Go readers)
			return mapPick(ctl, s, first, name, check, keep);
		}
	}

	/** {@link #mapSnap} of the copies pk picked. */
	private static Generation mapPick(Ctl ctl, Ctl.Snap s, Ctl.Pick pk, String name, Check check, Generation keep) {
		String gen = Long.toUnsignedString(s.generation());
		String source = s.segPath(pk.base()) + " (cache \"" + name + "\", generation " + gen + ")";
		int n = pk.lower() < 0 ? 1 : pk.top() < 0 ? 2 : 3;
		Level[] ls = new Level[n];
		return generation(() -> {
			for (Level l : ls)
				if (l != null)
					l.release();
		}, source, () -> {
			ls[0] = mapLevel(ctl, s, pk.base(), source, check, 0, keep == null ? null : keep.level(0));
			boolean kept = keep != null && ls[0] == keep.level(0); // else: a new base, new overlays
			if (n > 1) {
				ls[1] = mapLevel(ctl, s, pk.lower(), s.segPath(pk.lower()) + " (the overlay of generation " + gen + ")",
						check, Ctl.SEG_OVERLAY, kept ? keep.level(1) : null);
				Through.check(ls[0].image, ls[1].image);
			}
			if (n > 2) {
				ls[2] = mapLevel(ctl, s, pk.top(), s.segPath(pk.top()) + " (the top overlay of generation " + gen + ")",
						check, Ctl.SEG_OVERLAY | Ctl.SEG_TOP, kept ? keep.level(2) : null);
				Through.check(ls[0].image, ls[2].image);
			}
			return new Generation(ls, s.generation(), source);
		});
	}

	/**
	 * Entry i of snapshot s (a copy of role: 0 the base, else its OVERLAY
	 * and TOP flags): keep, held once more, if it is the same image
	 * ({@link Level#sameImage}), else mapped into an arena of its own and
	 * checked ({@link #mapSegment}).
	 */
	private static Level mapLevel(Ctl ctl, Ctl.Snap s, int i, String source, Check check, int role, Level keep) {
		Path p = Path.of(s.segPath(i));
		Map<String, Object> st = segmentStat(ctl, s, i, p, source);
		Level.Id id = new Level.Id(p.toString(), s.segSize(i), s.segMapSize(i), s.segPageSize(i), s.segNode(i),
				st.get("fileKey"));
		if (keep != null && keep.sameImage(id, p) && keep.retain())
			return keep;
		Runnable hook = beforeSegmentOpen;
		if (hook != null)
			hook.run();
		Arena arena = Arena.ofShared();
		try {
			Image im = mapSegment(arena, s, i, p, st, source, check, role);
			sameSegment(ctl, s, i, p, st, source);
			return new Level(arena, im, id);
		} catch (RuntimeException e) {
			arena.close();
			throw e;
		}
	}

	/** Tests only: runs between a segment's checks and its opening (null: nothing). */
	static volatile Runnable beforeSegmentOpen;

	/**
	 * After entry i's segment is mapped: p still names the file checked as st
	 * describes it (its key, device and inode), checked again. Java has no
	 * fstat of a descriptor, and p was named twice, for the checks and for
	 * the open: where p's directory is one others can write (not the
	 * loader's own DIR/shmkv; a control segment may name any path), another
	 * local user may have put a file of theirs under the name between them
	 * (PROTOCOL.md, "Trust"). The file opened was p's then; a file the
	 * control segment's owner made stays under its name (sticky directory or
	 * the owner's own), so a key that is still the one checked means the
	 * mapping is of that file.
	 */
	private static void sameSegment(Ctl ctl, Ctl.Snap s, int i, Path p, Map<String, Object> st, String source) {
		Map<String, Object> again;
		try {
			again = segmentStat(ctl, s, i, p, source);
		} catch (ShmkvException e) {
			throw new ShmkvException.Stale(source, "the segment file changed while it was opened: "
					+ e.getMessage());
		}
		if (st.get("fileKey") == null || !st.get("fileKey").equals(again.get("fileKey")))
			throw new ShmkvException.Stale(source, "the segment file was replaced while it was opened (file key "
					+ st.get("fileKey") + ", then " + again.get("fileKey") + ")");
	}

	/**
	 * The attributes of p, entry i's segment file, once it is checked as one
	 * (PROTOCOL.md, "Attach" and "Trust"): the entry's page_size a power of
	 * two from 4096 to 2^30 and its map_size a multiple of it; a regular file
	 * of the control segment's owner that no one else can write, at least the
	 * entry's size long; the entry's map_size not below its size.
	 */
	private static Map<String, Object> segmentStat(Ctl ctl, Ctl.Snap s, int i, Path p, String source) {
		long ps = s.segPageSize(i);
		if (ps < 4096 || ps > 1L << 30 || (ps & (ps - 1)) != 0 || Long.remainderUnsigned(s.segMapSize(i), ps) != 0)
			throw new ShmkvException.Proto(source, "page size " + Long.toUnsignedString(ps) + ", map size "
					+ Long.toUnsignedString(s.segMapSize(i)) + " are not a mapping's");
		Map<String, Object> st;
		try {
			// the file a symbolic link names, as the C reader's open() of the
			// segment follows it (only the control segment is opened with
			// O_NOFOLLOW): the checks are the target's, owner and mode
			st = Files.readAttributes(p, "unix:mode,uid,size,fileKey,isRegularFile");
		} catch (IOException e) {
			throw Ctl.io(p, e);
		}
		long size = s.segSize(i);
		int mode = (Integer) st.get("mode");
		if (!(Boolean) st.get("isRegularFile"))
			throw new ShmkvException.Proto(source, "the segment is not a regular file");
		if ((Integer) st.get("uid") != ctl.uid || (mode & 022) != 0)
			throw new ShmkvException.Io(1, "EPERM", source, String.format("not a file of the control segment's "
					+ "owner (uid %d) writable by it alone (uid %d mode %04o)", ctl.uid, st.get("uid"), mode & 07777),
					null);
		long fileLen = (Long) st.get("size");
		if (Long.compareUnsigned(fileLen, size) < 0)
			throw new ShmkvException.Truncated(source, "the segment is " + fileLen + " bytes, its image "
					+ Long.toUnsignedString(size));
		if (Long.compareUnsigned(s.segMapSize(i), size) < 0) // as lib's attach: a mapping shorter than its image
			throw new ShmkvException.Truncated(source, "map_size " + Long.toUnsignedString(s.segMapSize(i))
					+ " below the image's size " + Long.toUnsignedString(size));
		return st;
	}

	/**
	 * Entry i of snapshot s, the file p (st: its attributes, checked by
	 * {@link #segmentStat}), mapped into arena and checked as an image, a
	 * delta image for an overlay copy (role: its OVERLAY and TOP flags),
	 * else a plain one.
	 */
	private static Image mapSegment(Arena arena, Ctl.Snap s, int i, Path p, Map<String, Object> st, String source,
			Check check, int role) {
		long size = s.segSize(i), fileLen = (Long) st.get("size");
		long ms = s.segMapSize(i);
		long mapLen = Long.compareUnsigned(ms, size) >= 0 && Long.compareUnsigned(ms, fileLen) <= 0 ? ms : size;
		Image im = mapImage(arena, p, size, mapLen, source, check, false);
		if (im.delta != (role != 0))
			throw new ShmkvException.Proto(source, role == 0
					? "a delta image where a base belongs (a plain image: its entry has no OVERLAY flag)"
					: role == Ctl.SEG_OVERLAY
							? "a plain image where an overlay belongs (a delta image: its entry has the OVERLAY flag)"
							: "a plain image where the top overlay belongs (a delta image: its entry has the OVERLAY "
									+ "and TOP flags)");
		return im;
	}

	/**
	 * An image file of size bytes mapped and checked, given
	 * {@link Advice#hugePages} before its first read as the C reader's
	 * shmkv_open_file does (a loader's segment, which attach maps, lies in
	 * hugetlbfs or tmpfs, where the loader chose its pages: no advice).
	 */
	private static Generation map(Path p, long size, String source, Check check) {
		Arena arena = Arena.ofShared();
		return generation(arena, source, () -> new Generation(mapImage(arena, p, size, size, source, check, true),
				arena, 0, source));
	}

	/** p's first mapLen bytes mapped into arena, an image of size bytes, checked. */
	private static Image mapImage(Arena arena, Path p, long size, long mapLen, String source, Check check,
			boolean advise) {
		MemorySegment seg;
		try {
			if (mapLen < Format.HEADER_SIZE) {
				// too short to map as an image: what there is, for the magic and length checks
				byte[] b = Files.readAllBytes(p);
				seg = arena.allocate(Math.max(mapLen, 1), 64);
				MemorySegment.copy(MemorySegment.ofArray(b), 0, seg, 0, Math.min(b.length, mapLen));
				new Header(seg, Math.min(b.length, mapLen), source); // throws
			}
			try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
				seg = ch.map(FileChannel.MapMode.READ_ONLY, 0, mapLen, arena);
			}
		} catch (IOException e) {
			throw Ctl.io(p, e);
		}
		if (advise)
			Advice.hugePages(seg);
		return new Image(seg.asSlice(0, size), size, check.ordinal(), source);
	}

	@Override
	Generation current() {
		Generation g = gen;
		if (closed)
			throw closedError(null);
		return g;
	}

	private ShmkvException.Released closedError(Throwable cause) {
		return new ShmkvException.Released(source, "closed", cause);
	}

	@Override
	void onClosed(Generation g, RuntimeException e) {
		if (closed)
			throw closedError(e);
		if (!g.released())
			throw e;
		// a refresh switched generations under this get: read the new one
	}

	/**
	 * Moves to the newest generation the loader published (lib/PROTOCOL.md,
	 * "Refresh"): the old generation is released, unless a snapshot pins it.
	 * On any error the cache keeps its generation. A generation whose base
	 * copy is the same image as the current one's (the same control segment
	 * entry, the same file by its key, the same 4096-byte header) keeps the
	 * base's mapping, and each overlay's that is the same image at the same
	 * level: only the new overlays are mapped and checked, so a stream of
	 * top-only publishes maps a top, not the base, per refresh
	 * (PROTOCOL.md, "Protocol 2"). An image is unmapped when no generation
	 * that holds it is current or pinned.
	 *
	 * @return true when it switched; false when there was nothing new (one
	 *     file-key check and one acquire load; always false for an image file)
	 * @throws ShmkvException Stale (the cache was dropped or its control
	 *     segment replaced: attach again), Unavailable (a publish under way),
	 *     or the error of mapping the new generation, remembered until the
	 *     next publish
	 */
	public synchronized boolean refresh() {
		if (ctl == null)
			return false;
		if (closed)
			throw closedError(null);
		ctl.checkCurrent();
		Generation old = gen;
		if (ctl.generation() == old.number)
			return false;
		long s = ctl.seq();
		if ((s & 1) != 0)
			throw new ShmkvException.Unavailable(source, "a publish is under way: try again");
		if (s == failedSeq)
			throw failedError;
		Generation g;
		try {
			g = mapSnap(ctl, ctl.read(64), ctl.name, check, old); // old stays current (synchronized) until the switch
		} catch (ShmkvException e) {
			failedSeq = s;
			failedError = e;
			throw e;
		}
		gen = g;
		old.retire();
		return true;
	}

	/**
	 * Pins the current generation: the snapshot reads it, and its values
	 * stay valid, until the snapshot is closed, whatever refreshes happen
	 * meanwhile. It takes this reader's clock (see {@link #setClock(long)}).
	 *
	 * @return the snapshot; close it
	 */
	public Snapshot snapshot() {
		for (;;) {
			Generation g = current();
			if (g.pin()) {
				Snapshot sn = new Snapshot(g);
				sn.clockPin = clockPin;
				return sn;
			}
			// released between the read and the pin: a newer one is current
		}
	}

	/**
	 * The size of the image read now.
	 *
	 * @return bytes
	 */
	public long imageSize() {
		return current().image.hdr.fileSize;
	}

	/** Unmaps the current generation (once no snapshot pins it) and the control segment. */
	@Override
	public synchronized void close() {
		if (closed)
			return;
		closed = true;
		gen.retire();
		if (ctl != null)
			ctl.close();
	}

	/**
	 * A description of the reader.
	 *
	 * @return its file or cache and generation
	 */
	@Override
	public String toString() {
		return "Shmkv(" + source + ", generation " + gen.number + ")";
	}
}
