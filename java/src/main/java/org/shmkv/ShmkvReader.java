package org.shmkv;

import static org.shmkv.Format.*;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.function.BiConsumer;
import java.util.function.LongSupplier;

/**
 * The lookups every reader has: {@link Shmkv} (an image file, or a cache
 * that follows the generations its loader publishes) and {@link Snapshot}
 * (one pinned generation).
 *
 * <p>Keys are bytes; a String key is its UTF-8 bytes. Object getters return
 * null for a missing key, primitive getters throw
 * {@link ShmkvException.NotFound} (or take a default). A key whose record
 * has expired (FORMAT.md §17) is missing. A value is checked as it is
 * read (FORMAT.md §12.1): a damaged one is {@link ShmkvException.Corrupt},
 * and so is a string that is not UTF-8. {@link #getInto(String, byte[])},
 * {@link #getLong(String)}, {@link #getDouble(String)} and
 * {@link #getBoolean(String)} do not allocate.
 */
public abstract sealed class ShmkvReader implements Iterable<Value> permits Shmkv, Snapshot {
	ShmkvReader() {}

	/** The clock of expiry checks (unix seconds), pinned; 0: the system clock. */
	volatile long clockPin;

	/** The system clock in whole Unix seconds; tests replace it to count its reads. */
	LongSupplier clock = () -> Math.floorDiv(System.currentTimeMillis(), 1000);

	/**
	 * Pins the clock that expiry checks read (FORMAT.md §17), for tests and
	 * for replaying a past moment, as {@code shmkv_set_clock} does; a
	 * snapshot takes its cache's.
	 *
	 * @param now Unix seconds; 0 goes back to the system clock
	 */
	public void setClock(long now) {
		clockPin = now;
	}

	/** Now for expiry: whole Unix seconds. */
	final long now() {
		long p = clockPin;
		return p != 0 ? p : clock.getAsLong();
	}

	/**
	 * Whether the record (its locator) has expired (FORMAT.md §17: now >=
	 * its expiry). Images without the EXPIRY flag never read the clock, others
	 * only for a record that expires, once per call: now is the call's
	 * clock, 0 until read (null: a single get, which reads it at most once).
	 */
	final boolean expired(Image im, long loc, long[] now) {
		if (!im.expiry)
			return false;
		long x = im.expires(loc);
		if (x == 0)
			return false;
		if (now == null)
			return now() >= x;
		if (now[0] == 0)
			now[0] = now();
		return now[0] >= x;
	}

	/**
	 * The lookup in one image: the key's record (its locator, Index), its
	 * value checked as a lookup checks it; -1 when it is missing, expired or
	 * (a delta read alone) a tombstone.
	 */
	final long find(Image im, byte[] key, long lo, long tl, int len, long[] now) {
		return live(im, im.locate(key, lo, tl, len), now);
	}

	/**
	 * A lookup's answer loc in im: -1 when it found nothing, a tombstone
	 * (its entry checked, §19.4) or an expired record; else loc, its value
	 * checked.
	 */
	final long live(Image im, long loc, long[] now) {
		if (loc < 0)
			return -1;
		if (Index.tomb(loc)) {
			im.checkTomb(loc);
			return -1;
		}
		if (expired(im, loc, now))
			return -1;
		im.check(loc, false);
		return loc;
	}

	/**
	 * Marks a locator in a delta a generation's image is read through:
	 * bit 63, which no locator has (they are below 2^63, and -1 has every
	 * other bit set too).
	 */
	static final long IN_DELTA = Long.MIN_VALUE;

	/**
	 * With {@link #IN_DELTA}, marks a locator in the top delta (FORMAT.md
	 * §19.6): bit 50, which no locator has (the high bit of an inline
	 * record's value_len, Index's locator: an inline value fits its
	 * 128-byte bucket, so its length is below 128; an OUT locator has no
	 * length bits).
	 */
	static final long IN_TOP = 1L << 50;

	/**
	 * The lookup every getter makes, in the generation's image or through
	 * its deltas: -1 when the key is absent, else its record's locator, its
	 * value checked; a locator in a delta comes with {@link #IN_DELTA} (and
	 * {@link #IN_TOP} in the top one; callers take {@link #imageOf} and
	 * {@link #locator}).
	 */
	final long lookup(Generation g, byte[] key, long lo, long tl, int len, long[] now) {
		return g.delta == null ? find(g.image, key, lo, tl, len, now)
				: through(g, key, lo, tl, len, g.image.checkedHash(key, lo, tl, len), now);
	}

	/**
	 * A key read through the delta (FORMAT.md §19): hashed once (the delta
	 * has the base's seed and bits, §19.4), the delta's filter asked and,
	 * when it may hold the key, the delta's lookup (§6.4): an upsert answers
	 * (absent when it has expired: the base is not consulted), a tombstone
	 * makes the key absent; a key the delta does not hold, the base answers.
	 * Under a top delta (§19.6) the top is asked so first, then the lower.
	 * h: the key's hash.
	 */
	final long through(Generation g, byte[] key, long lo, long tl, int len, long h, long[] now) {
		Image im = g.image, d = g.delta, t = g.top;
		if (t != null && t.mayHold(h)) {
			long loc = Index.find(t, key, lo, tl, len, h);
			if (loc >= 0)
				return (loc = live(t, loc, now)) < 0 ? -1 : loc | IN_DELTA | IN_TOP;
		}
		if (d.mayHold(h)) {
			long loc = Index.find(d, key, lo, tl, len, h);
			if (loc >= 0)
				return (loc = live(d, loc, now)) < 0 ? -1 : loc | IN_DELTA;
		}
		return live(im, Index.find(im, key, lo, tl, len, h), now);
	}

	/** The image of a lookup's answer (not -1): the generation's, or (IN_DELTA) its delta, (IN_TOP) its top. */
	static Image imageOf(Generation g, long loc) {
		return loc >= -1 ? g.image : (loc & IN_TOP) != 0 ? g.top : g.delta;
	}

	/** The locator of a lookup's answer (not -1) in its image. */
	static long locator(long loc) {
		return loc & ~(IN_DELTA | IN_TOP);
	}

	/** The generation to read now. */
	abstract Generation current();

	/**
	 * An access found the generation's memory closed: returns to retry on a
	 * newer generation (a cache whose refresh switched under the get), or
	 * throws.
	 */
	abstract void onClosed(Generation g, RuntimeException e);

	/**
	 * The JDK's bounds check caught an access outside the image, which the
	 * reader's own checks should have refused (FuzzTest fails on it).
	 */
	static ShmkvException.Corrupt outside(Generation g, IndexOutOfBoundsException e) {
		return new ShmkvException.Corrupt(g.image.source, "an offset points outside the image", e);
	}

	// Every getter goes through one method: a String key packed or encoded,
	// then, on the generation read now (again on the next one when a refresh
	// released it meanwhile), the lookup, the value's checks, the type check
	// and the getter's reading, which op names: a switch on a constant where
	// the method is inlined into its getter, a table jump where not (no
	// getter's code is another's virtual call). A primitive comes back as a
	// long, an object in box[0].

	/** The getters: ops of {@link #read(byte[], long, long, int, int, long, byte[], Object[])}. */
	private static final int OP_I64 = 0, OP_F64 = 1, OP_BOOL = 2, OP_INTO = 3, OP_I64_OR = 4, OP_VALUE = 5,
			OP_STRING = 6, OP_BYTES = 7, OP_BUFFER = 8, OP_LONGS = 9, OP_DOUBLES = 10, OP_FLOATS = 11, OP_STRINGS = 12,
			OP_STRING_COPIES = 13;

	/** The bit of type code t, in a set of types. */
	private static int type(int t) {
		return 1 << t;
	}

	/** The types a getter reads. */
	private static int types(int op) {
		return switch (op) {
			case OP_I64, OP_I64_OR -> type(Format.I64);
			case OP_F64 -> type(Format.F64);
			case OP_BOOL -> type(Format.BOOL);
			case OP_INTO -> type(Format.BYTES) | type(Format.STRING);
			case OP_VALUE, OP_BUFFER -> -1;
			case OP_STRING -> type(Format.STRING);
			case OP_BYTES -> type(Format.BYTES);
			case OP_LONGS -> type(Format.I64LIST);
			case OP_DOUBLES -> type(Format.F64LIST);
			case OP_FLOATS -> type(Format.F32LIST);
			default -> type(Format.STRLIST);
		};
	}

	/** A primitive getter (op) of key: its value, as a long; dflt, dst: OP_I64_OR's default, OP_INTO's buffer. */
	private long read(String key, int op, long dflt, byte[] dst) {
		return read(key, op, dflt, dst, null);
	}

	/** An object getter (op) of key: its value, or null when the key is missing. */
	private Object read(String key, int op) {
		Object[] box = new Object[1];
		read(key, op, 0, null, box);
		return box[0];
	}

	private long read(String key, int op, long dflt, byte[] dst, Object[] box) {
		int n = key.length();
		long lo = Keys.lo(key, n), tl = Keys.tl(key, n, lo);
		byte[] b = null;
		if ((lo | tl) < 0) { // not ASCII, or longer than 16: encoded
			Keys.Buf k = Keys.utf8(key);
			n = k.len;
			lo = k.lo;
			tl = k.tl;
			b = n > Keys.PACKED ? k.b : null;
		}
		return read(b, lo, tl, n, op, dflt, dst, box);
	}

	/** read of key[0, n): packed when it has at most 16 bytes. */
	private long read(byte[] key, int n, int op, long dflt, byte[] dst) {
		return read(key, n, op, dflt, dst, null);
	}

	private Object read(byte[] key, int n, int op) {
		Object[] box = new Object[1];
		read(key, n, op, 0, null, box);
		return box[0];
	}

	private long read(byte[] key, int n, int op, long dflt, byte[] dst, Object[] box) {
		long lo = Keys.lo(key, n);
		return read(n > Keys.PACKED ? key : null, lo, Keys.tl(key, n, lo), n, op, dflt, dst, box);
	}

	private long read(byte[] key, long lo, long tl, int len, int op, long dflt, byte[] dst, Object[] box) {
		for (;;) {
			Generation g = current();
			try {
				long loc = lookup(g, key, lo, tl, len, null);
				Image im = g.image;
				if (loc < -1) { // in a delta it is read through
					im = imageOf(g, loc);
					loc = locator(loc);
				}
				if (loc < 0) {
					if (op == OP_INTO)
						return -1;
					if (op == OP_I64_OR)
						return dflt;
					if (op < OP_VALUE)
						throw new ShmkvException.NotFound(im.source, Keys.show(key, lo, tl, len));
					return 0;
				}
				int t = checkType(im, loc, types(op), key, lo, tl, len);
				switch (op) {
					case OP_I64, OP_I64_OR, OP_F64:
						return Bytes.u64(im.seg, im.valueOffset(loc));
					case OP_BOOL:
						return Bytes.u8(im.seg, im.valueOffset(loc));
					case OP_INTO:
						long n = im.valueLen(loc);
						if (n <= dst.length)
							Bytes.copy(im.seg, im.valueOffset(loc), dst, (int) n);
						return Math.min(n, Integer.MAX_VALUE);
					default:
						box[0] = object(g, im, loc, t, op);
						return 0;
				}
			} catch (IllegalStateException x) {
				onClosed(g, x);
			} catch (ShmkvException.Released x) {
				onClosed(g, x);
			} catch (IndexOutOfBoundsException x) {
				throw outside(g, x);
			}
		}
	}

	/** An object getter's reading of the value (locator loc in im, of type t) it found. */
	private static Object object(Generation g, Image im, long loc, int t, int op) {
		return switch (op) {
			case OP_VALUE -> value(g, im, loc, t);
			case OP_STRING -> new String(bytes(im, loc), StandardCharsets.UTF_8); // its UTF-8 checked
			case OP_BYTES -> bytes(im, loc);
			case OP_BUFFER -> value(g, im, loc, t).asByteBuffer();
			case OP_LONGS -> new LongList(g, slice(im, loc));
			case OP_DOUBLES -> new DoubleList(g, slice(im, loc));
			case OP_FLOATS -> new FloatList(g, slice(im, loc));
			case OP_STRINGS -> new StringList(g, im, slice(im, loc));
			default -> List.copyOf(new StringList(g, im, slice(im, loc)));
		};
	}

	/** The record's type, when it is one of types; else Type naming the key. */
	private static int checkType(Image im, long loc, int types, byte[] key, long lo, long tl, int len) {
		int t = im.type(loc);
		if ((types & type(t)) == 0)
			throw typeError(im, t, types, Keys.show(key, lo, tl, len));
		return t;
	}

	private static ShmkvException.Type typeError(Image im, int t, int types, String key) {
		StringBuilder want = new StringBuilder();
		for (int c = 1; c <= MAX_TYPE; c++)
			if ((types & type(c)) != 0)
				want.append(want.isEmpty() ? "" : " or ").append(ValueType.name(c));
		return new ShmkvException.Type(im.source, "key " + key + " is " + ValueType.name(t) + ", not " + want);
	}

	/** The value's bytes in the mapping. */
	private static java.lang.foreign.MemorySegment slice(Image im, long loc) {
		return im.seg.asSlice(im.valueOffset(loc), im.valueLen(loc));
	}

	/** A copy of the value's bytes. */
	private static byte[] bytes(Image im, long loc) {
		return Bytes.copy(im.seg, im.valueOffset(loc), im.valueLen(loc));
	}

	static Value value(Generation g, Image im, long loc, int type) {
		return new Value(g, im, loc, type, im.valueOffset(loc), im.valueLen(loc));
	}

	/**
	 * The generation number read now.
	 *
	 * @return the cache's generation; 0 for an image file
	 */
	public long generation() {
		return current().number;
	}

	/**
	 * The number of entries the iteration yields: the records that have not
	 * expired (and, through deltas, as the deltas have them). O(1) for a
	 * plain image without the EXPIRY flag (its entry_count); else (expiring
	 * records, a delta read alone or through) the entries are counted, O(n),
	 * against the clock read once.
	 *
	 * @return the number of live entries
	 */
	public long size() {
		Generation g = current();
		if (g.delta == null && !g.image.delta && !g.image.expiry)
			return g.image.entryCount;
		return count(records(g, true));
	}

	/**
	 * The number of records {@link #allRecords()} yields, expired ones
	 * included: the header's entry_count (O(1)), a delta's tombstones
	 * included; through a delta (or a lower and a top) the records are
	 * counted, O(n).
	 *
	 * @return the record count
	 */
	public long recordCount() {
		Generation g = current();
		return g.delta == null ? g.image.entryCount : count(records(g, false));
	}

	private static long count(Iterator<Value> it) {
		long n = 0;
		for (; it.hasNext(); it.next())
			n++;
		return n;
	}

	/**
	 * The image's name (its header's name field; through a delta, the
	 * base's).
	 *
	 * @return the name; empty when the image has none
	 */
	public String name() {
		return current().image.hdr.name;
	}

	/**
	 * The image's header checksum: its identity as a delta's base, or as
	 * the prev of the next delta of a chain (FORMAT.md §19.1). Through a
	 * delta, the base's.
	 *
	 * @return the header_checksum
	 */
	public long checksum() {
		return current().image.hdr.checksum;
	}

	/**
	 * Whether the image read is a delta image read alone (FORMAT.md §19):
	 * its gets answer its upserts, {@link #allRecords()} yields its
	 * tombstones too. False for a base read through a delta.
	 *
	 * @return true for a delta read alone
	 */
	public boolean isDelta() {
		return current().image.delta;
	}

	/**
	 * The delta this reader reads: the image itself when it is a delta read
	 * alone, or the delta a base is read through
	 * ({@link Shmkv#open(java.nio.file.Path, java.nio.file.Path)}); through
	 * a lower and a top delta, the lower one (see {@link #topDeltaId()}).
	 *
	 * @return its identity and its base's; empty for a plain image read alone
	 */
	public Optional<DeltaId> deltaId() {
		Generation g = current();
		Image d = g.delta != null ? g.delta : g.image.delta ? g.image : null;
		return d == null ? Optional.empty() : Optional.of(DeltaId.of(d.hdr));
	}

	/**
	 * The top delta a base is read through over its lower one (FORMAT.md
	 * §19.6: {@link Shmkv#open(java.nio.file.Path, java.nio.file.Path,
	 * java.nio.file.Path, Shmkv.Check)}, or a cache generation with a top
	 * overlay).
	 *
	 * @return its identity and its base's; empty without a top delta
	 */
	public Optional<DeltaId> topDeltaId() {
		Generation g = current();
		return g.top == null ? Optional.empty() : Optional.of(DeltaId.of(g.top.hdr));
	}

	/**
	 * The value of a key.
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the value, in place; null when the key is missing
	 */
	public Value get(String key) {
		return (Value) read(key, OP_VALUE);
	}

	/**
	 * The value of a key.
	 *
	 * @param key the key's bytes
	 * @return the value, in place; null when the key is missing
	 */
	public Value get(byte[] key) {
		return (Value) read(key, key.length, OP_VALUE);
	}

	/**
	 * An i64 value, without allocating.
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the value
	 * @throws ShmkvException.NotFound when the key is missing
	 * @throws ShmkvException.Type when the value is not an i64
	 */
	public long getLong(String key) {
		return read(key, OP_I64, 0, null);
	}

	/**
	 * An i64 value, without allocating.
	 *
	 * @param key the key's bytes
	 * @return the value
	 * @throws ShmkvException.NotFound when the key is missing
	 * @throws ShmkvException.Type when the value is not an i64
	 */
	public long getLong(byte[] key) {
		return read(key, key.length, OP_I64, 0, null);
	}

	/**
	 * An i64 value, or a default, without allocating.
	 *
	 * @param key the key (UTF-8 bytes)
	 * @param dflt what a missing key gives
	 * @return the value, or dflt
	 * @throws ShmkvException.Type when the value is not an i64
	 */
	public long getLong(String key, long dflt) {
		return read(key, OP_I64_OR, dflt, null);
	}

	/**
	 * An f64 value, without allocating.
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the value
	 * @throws ShmkvException.NotFound when the key is missing
	 * @throws ShmkvException.Type when the value is not an f64
	 */
	public double getDouble(String key) {
		return Double.longBitsToDouble(read(key, OP_F64, 0, null));
	}

	/**
	 * An f64 value, without allocating.
	 *
	 * @param key the key's bytes
	 * @return the value
	 * @throws ShmkvException.NotFound when the key is missing
	 * @throws ShmkvException.Type when the value is not an f64
	 */
	public double getDouble(byte[] key) {
		return Double.longBitsToDouble(read(key, key.length, OP_F64, 0, null));
	}

	/**
	 * A bool value, without allocating.
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the value
	 * @throws ShmkvException.NotFound when the key is missing
	 * @throws ShmkvException.Type when the value is not a bool
	 */
	public boolean getBoolean(String key) {
		return read(key, OP_BOOL, 0, null) != 0;
	}

	/**
	 * A bool value, without allocating.
	 *
	 * @param key the key's bytes
	 * @return the value
	 * @throws ShmkvException.NotFound when the key is missing
	 * @throws ShmkvException.Type when the value is not a bool
	 */
	public boolean getBoolean(byte[] key) {
		return read(key, key.length, OP_BOOL, 0, null) != 0;
	}

	/**
	 * Copies a bytes or string value into dst, without allocating (a string
	 * is checked to be UTF-8, as by every get). A value longer than dst is
	 * not copied: the return is its length, larger than dst.length.
	 *
	 * @param key the key (UTF-8 bytes)
	 * @param dst where the value is copied, from index 0
	 * @return the value's length in bytes; -1 when the key is missing
	 * @throws ShmkvException.Type when the value is neither bytes nor a string
	 */
	public int getInto(String key, byte[] dst) {
		return (int) read(key, OP_INTO, 0, dst);
	}

	/**
	 * Copies a bytes or string value into dst, without allocating; see
	 * {@link #getInto(String, byte[])}.
	 *
	 * @param key the key's bytes
	 * @param dst where the value is copied, from index 0
	 * @return the value's length in bytes; -1 when the key is missing
	 * @throws ShmkvException.Type when the value is neither bytes nor a string
	 */
	public int getInto(byte[] key, byte[] dst) {
		return (int) read(key, key.length, OP_INTO, 0, dst);
	}

	/**
	 * A bytes value (a copy).
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the bytes; null when the key is missing
	 * @throws ShmkvException.Type when the value is not bytes
	 */
	public byte[] getBytes(String key) {
		return (byte[]) read(key, OP_BYTES);
	}

	/**
	 * A bytes value (a copy).
	 *
	 * @param key the key's bytes
	 * @return the bytes; null when the key is missing
	 * @throws ShmkvException.Type when the value is not bytes
	 */
	public byte[] getBytes(byte[] key) {
		return (byte[]) read(key, key.length, OP_BYTES);
	}

	/**
	 * A value's stored bytes, any type, as a read-only little-endian buffer
	 * (no copy), valid while its generation is mapped.
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the buffer; null when the key is missing
	 */
	public ByteBuffer getByteBuffer(String key) {
		return (ByteBuffer) read(key, OP_BUFFER);
	}

	/**
	 * A string value (decoded: a copy).
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the string; null when the key is missing
	 * @throws ShmkvException.Type when the value is not a string
	 * @throws ShmkvException.Corrupt when the string is not UTF-8
	 */
	public String getString(String key) {
		return (String) read(key, OP_STRING);
	}

	/**
	 * A string value (decoded: a copy).
	 *
	 * @param key the key's bytes
	 * @return the string; null when the key is missing
	 * @throws ShmkvException.Type when the value is not a string
	 * @throws ShmkvException.Corrupt when the string is not UTF-8
	 */
	public String getString(byte[] key) {
		return (String) read(key, key.length, OP_STRING);
	}

	/**
	 * An i64list value as a zero-copy read-only view, valid while its
	 * generation is mapped (take it from a {@link Snapshot} to hold it
	 * across refreshes).
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the list; null when the key is missing
	 * @throws ShmkvException.Type when the value is not an i64list
	 */
	public LongList getLongList(String key) {
		return (LongList) read(key, OP_LONGS);
	}

	/**
	 * An f64list value as a zero-copy read-only view; see
	 * {@link #getLongList(String)}.
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the list; null when the key is missing
	 * @throws ShmkvException.Type when the value is not an f64list
	 */
	public DoubleList getDoubleList(String key) {
		return (DoubleList) read(key, OP_DOUBLES);
	}

	/**
	 * An f32list value as a zero-copy read-only view; see
	 * {@link #getLongList(String)}.
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the list; null when the key is missing
	 * @throws ShmkvException.Type when the value is not an f32list
	 */
	public FloatList getFloatList(String key) {
		return (FloatList) read(key, OP_FLOATS);
	}

	/**
	 * A strlist value over the image; each string is checked and decoded
	 * when it is read.
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the list; null when the key is missing
	 * @throws ShmkvException.Type when the value is not a strlist
	 */
	public StringList getStringList(String key) {
		return (StringList) read(key, OP_STRINGS);
	}

	/**
	 * A strlist value's strings, decoded now (copies).
	 *
	 * @param key the key (UTF-8 bytes)
	 * @return the strings; null when the key is missing
	 * @throws ShmkvException.Type when the value is not a strlist
	 * @throws ShmkvException.Corrupt when a string is damaged or not UTF-8
	 */
	public List<String> getStrings(String key) {
		@SuppressWarnings("unchecked") // OP_STRING_COPIES reads a List<String>
		List<String> l = (List<String>) read(key, OP_STRING_COPIES);
		return l;
	}

	/**
	 * The values of keys, all from one generation (a refresh that releases
	 * it meanwhile makes the batch start again on the new one), the clock
	 * read at most once. Each key is answered as its single get would be,
	 * one key's damage never changing another's: when a key's get fails
	 * (not by being missing, which is null), every key is still looked up,
	 * then the first failing key's exception is thrown, its message naming
	 * that key and its index, carrying every key's answer
	 * ({@link ShmkvException#results()}, {@link ShmkvException#errors()}).
	 *
	 * @param keys the keys' bytes
	 * @return the values in request order; null where a key is missing
	 * @throws ShmkvException the first failing key's error (Corrupt, KeyLength)
	 */
	public Value[] getAll(byte[]... keys) {
		return getAll(keys, null);
	}

	/** getAll of keys (bytes, or strings: the other null) on the generation read now, again on a newer one. */
	private Value[] getAll(byte[][] bytes, String[] strings) {
		for (;;) {
			Generation g = current();
			try {
				return Batch.getAll(this, g, bytes, strings);
			} catch (IllegalStateException x) {
				onClosed(g, x);
			} catch (ShmkvException.Released x) {
				onClosed(g, x);
			}
		}
	}

	/**
	 * The values of keys (their UTF-8 bytes), as {@link #getAll(byte[][])}.
	 *
	 * @param keys the keys
	 * @return the values in request order; null where a key is missing
	 * @throws ShmkvException the first failing key's error, carrying every
	 *     key's answer
	 */
	public List<Value> getAll(List<String> keys) {
		Value[] vs = getAll(null, keys.toArray(new String[0]));
		List<Value> out = new ArrayList<>(vs.length);
		for (Value v : vs)
			out.add(v);
		return out;
	}

	/**
	 * The live entries of the generation read now: every record that has
	 * not expired, in image order ({@link Value#key()} gives the key). The
	 * clock is read once, when the iteration starts (an image without the
	 * EXPIRY flag never reads it). Every entry is checked as verify checks
	 * it (FORMAT.md §13): a damaged one ends the iteration with Corrupt. An
	 * iteration over a cache that a refresh switches away from fails with
	 * Released at its next read of an image the refresh unmapped: iterate a
	 * {@link Snapshot} to be sure to finish.
	 *
	 * @return an iterator of the live entries
	 */
	@Override
	public Iterator<Value> iterator() {
		return records(current(), true);
	}

	/**
	 * Every record of the generation read now, expired ones included, each
	 * with its expiry ({@link Value#expires()}), in image order: for dumps,
	 * inspection and tools. Checked as {@link #iterator()}.
	 *
	 * @return the records
	 */
	public Iterable<Value> allRecords() {
		Generation g = current();
		return () -> records(g, false);
	}

	/**
	 * The iteration of g: live (the default) or every record. A delta read
	 * alone: its upserts, and (every record) its tombstones. Through a delta
	 * (FORMAT.md §19): the delta's upserts, then the base's records whose key
	 * the delta does not hold; through a lower and a top (§19.6): the top's
	 * upserts, then the lower's whose key the top does not hold, then the
	 * base's whose key neither holds; one clock read for all.
	 */
	private Iterator<Value> records(Generation g, boolean live) {
		Image im = g.image, d = g.delta, t = g.top;
		long[] now = {live && (im.expiry || d != null && d.expiry || t != null && t.expiry) ? now() : 0};
		ShmkvReader expiry = live ? this : null;
		if (d == null)
			return new RecordIterator(expiry, g, im, !live, NO_IMAGES, now);
		List<Iterator<Value>> levels = t == null
				? List.of(new RecordIterator(expiry, g, d, false, NO_IMAGES, now),
						new RecordIterator(expiry, g, im, false, new Image[] {d}, now))
				: List.of(new RecordIterator(expiry, g, t, false, NO_IMAGES, now),
						new RecordIterator(expiry, g, d, false, new Image[] {t}, now),
						new RecordIterator(expiry, g, im, false, new Image[] {t, d}, now));
		return new Iterator<>() {
			private int at;

			@Override
			public boolean hasNext() {
				for (; at < levels.size(); at++)
					if (levels.get(at).hasNext())
						return true;
				return false;
			}

			@Override
			public Value next() {
				if (!hasNext())
					throw new NoSuchElementException();
				return levels.get(at).next();
			}
		};
	}

	private static final Image[] NO_IMAGES = {};

	/**
	 * Calls action with the key and value of every live entry, as
	 * {@link #iterator()} yields them.
	 *
	 * @param action what to call
	 */
	public void forEach(BiConsumer<byte[], Value> action) {
		for (Value v : this)
			action.accept(v.key(), v);
	}

	/**
	 * The full structural check of FORMAT.md §13 (and §19.4 for a delta) on
	 * the generation read now: through a delta, of the base, then of the
	 * delta; through a lower and a top, of the base, the lower, then the
	 * top.
	 *
	 * @throws ShmkvException.Corrupt (or Checksum) naming the first problem
	 */
	public void verify() {
		Generation g = current();
		try {
			for (Image im : g.delta == null ? List.of(g.image)
					: g.top == null ? List.of(g.image, g.delta) : List.of(g.image, g.delta, g.top)) {
				im.hdr.checkSections(im.seg);
				im.verify();
			}
		} catch (IllegalStateException x) {
			throw g.failed(x);
		} catch (IndexOutOfBoundsException x) {
			throw outside(g, x);
		}
	}

	/**
	 * Iteration of one image: every bucket's records in index order, each
	 * checked as verify checks it (an OUT record's entry too), those a
	 * reader leaves out skipped: expired ones (live), tombstones (unless
	 * asked for), and (a level under another through deltas) those whose key
	 * a level above holds.
	 */
	private static final class RecordIterator implements Iterator<Value> {
		private final Generation g;
		private final Image im;
		private final long[] now;
		private long left, bucket;
		private int i, n;
		private Value next;

		/** The reader whose expiry rule leaves expired records out (its clock read in now); null: every record. */
		private final ShmkvReader reader;
		/** Whether a delta's tombstones are yielded (its every record, read alone). */
		private final boolean tombstones;
		/** The deltas above im whose keys are left out: the top's and the lower's, or none. */
		private final Image[] skip;

		RecordIterator(ShmkvReader reader, Generation g, Image im, boolean tombstones, Image[] skip, long[] now) {
			this.g = g;
			this.im = im;
			left = im.entryCount;
			this.reader = reader;
			this.tombstones = tombstones;
			this.skip = skip;
			this.now = now;
		}

		@Override
		public boolean hasNext() {
			try {
				while (next == null && left > 0) {
					Value v = advance();
					left--;
					if (v.isTombstone() ? tombstones
							: (reader == null || !reader.expired(im, v.locator(), now)) && !held(v.key()))
						next = v;
				}
				return next != null;
			} catch (IllegalStateException x) {
				throw g.failed(x);
			} catch (IndexOutOfBoundsException x) {
				throw outside(g, x);
			}
		}

		/** Whether a level above holds key (an upsert, expired or not, or a tombstone). */
		private boolean held(byte[] key) {
			for (Image d : skip)
				if (d.holds(key))
					return true;
			return false;
		}

		@Override
		public Value next() {
			if (!hasNext())
				throw new NoSuchElementException();
			Value v = next;
			next = null;
			return v;
		}

		/** The next record (left > 0), decoded and checked. */
		private Value advance() {
			while (i == n) {
				if (bucket >= im.bucketCount)
					throw im.corrupt("the index ends after " + (im.entryCount - left) + " of " + im.entryCount
							+ " records");
				long bk = im.idxOff + BUCKET * bucket;
				n = Bytes.u8(im.seg, bk);
				if (n > MAX_RECORDS)
					throw im.corrupt(Index.bucketOf(im, bk) + ": " + n + " records, at most " + MAX_RECORDS + " fit");
				i = 0;
				bucket++;
			}
			long bk = im.idxOff + BUCKET * (bucket - 1);
			long loc = Index.locator(im, bk + (Index.dir(im.seg, bk, i) & DIR_OFF));
			i++;
			if (!Index.inline(loc))
				im.entry(im.entryOf(loc));
			im.check(loc, true);
			return value(g, im, loc, im.type(loc));
		}
	}
}
