package org.shmkv;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.function.BiConsumer;

/**
 * The lookups every reader has: {@link Shmkv} (an image file or an attached
 * cache, which follows generations) and {@link Snapshot} (one pinned
 * generation). Object getters return null for a missing key; primitive
 * getters throw {@link ShmkvException.NotFound} (or take a default).
 * Keys are bytes; a String key is its UTF-8 bytes.
 */
public abstract sealed class Reader implements Iterable<Value> permits Shmkv, Snapshot {
	Reader() {}

	/** The clock of expiry checks (unix seconds), pinned; 0: the system clock. */
	volatile long clockPin;

	/**
	 * Pins the clock that expiry checks read (FORMAT.md §17.6) to now, in Unix
	 * seconds, for tests and for replaying a past moment; 0 goes back to the
	 * system clock (as {@code shmkv_set_clock}). A snapshot takes its cache's.
	 */
	public void setClock(long now) {
		clockPin = now;
	}

	/** The system clock in whole Unix seconds (CLOCK_REALTIME); tests replace it to count its reads. */
	java.util.function.LongSupplier clock = () -> Math.floorDiv(System.currentTimeMillis(), 1000);

	/** Now for expiry: whole Unix seconds. Read at most once per call, and only for an expiring record. */
	final long now() {
		long p = clockPin;
		return p != 0 ? p : clock.getAsLong();
	}

	/**
	 * The lookup every getter makes: the locator of key in im, or -1 when it
	 * is missing or expired (the clock read only for an expiring record).
	 */
	final long find(Image im, byte[] key, long lo, long hi, int len) {
		long loc = im.locate(key, lo, hi, len);
		if (loc >= 0 && im.expiry) {
			long x = im.expires(loc);
			if (x != 0 && now() >= x)
				return -1;
		}
		return loc;
	}

	/** The generation to read now. */
	abstract Generation current();

	/**
	 * An access found the generation's memory closed: returns to retry on a
	 * newer generation (a cache whose refresh switched under the get), or
	 * throws.
	 */
	abstract void onClosed(Generation g, RuntimeException e);

	static ShmkvException.Corrupt outside(IndexOutOfBoundsException e) {
		return new ShmkvException.Corrupt("an offset points outside the image", e);
	}

	private static ShmkvException.NotFound notFound(byte[] key, long lo, long hi, int len) {
		if (key == null)
			key = Keys.unpack(lo, hi, len);
		StringBuilder b = new StringBuilder();
		for (int i = 0; i < Math.min(len, 64); i++)
			b.append(String.format("%02x", key[i] & 0xFF));
		return new ShmkvException.NotFound("key " + b + (len > 64 ? "..." : "") + " (" + len + " bytes)");
	}

	/** The generation number read now (0 for an image file). */
	public long generation() {
		return current().number;
	}

	/** The number of keys. */
	public long size() {
		return current().image.entryCount;
	}

	/** The image's name (header field). */
	public String name() {
		return current().image.hdr.name;
	}

	/** The value of key, or null when the key is not there. */
	public Value get(byte[] key) {
		return get(key, 0, 0, key.length);
	}

	public Value get(String key) {
		int n = key.length();
		long lo, hi;
		if (n <= 16 && ((lo = Keys.word(key, 0, n)) | (hi = Keys.word(key, 8, n))) >= 0)
			return get(null, lo, hi, n);
		Keys.Buf k = Keys.utf8(key);
		return get(k.b, 0, 0, k.len);
	}

	private Value get(byte[] key, long lo, long hi, int len) {
		for (;;) {
			Generation g = current();
			try {
				long e = find(g.image, key, lo, hi, len);
				return e < 0 ? null : Value.at(g, e);
			} catch (IllegalStateException x) {
				onClosed(g, x);
			} catch (IndexOutOfBoundsException x) {
				throw outside(x);
			}
		}
	}

	/** The offset of key's value in g's image, of type t: the typed getters' hot path (no allocation). */
	private long locate(Generation g, byte[] key, long lo, long hi, int len, int t) {
		Image im = g.image;
		long e = find(im, key, lo, hi, len);
		if (e < 0)
			throw notFound(key, lo, hi, len);
		long voff = im.valueOffset(e);
		int type = im.typeOf(e);
		if (type != t)
			throw new ShmkvException.Type("the value is " + ValueType.of(type).formatName() + ", not "
					+ ValueType.of(t).formatName());
		return voff;
	}

	/** An i64 value; NotFound when missing, Type when of another type. */
	public long getLong(byte[] key) {
		return getLong(key, 0, 0, key.length);
	}

	public long getLong(String key) {
		int n = key.length();
		long lo, hi;
		if (n <= 16 && ((lo = Keys.word(key, 0, n)) | (hi = Keys.word(key, 8, n))) >= 0)
			return getLong(null, lo, hi, n);
		Keys.Buf k = Keys.utf8(key);
		return getLong(k.b, 0, 0, k.len);
	}

	private long getLong(byte[] key, long lo, long hi, int len) {
		for (;;) {
			Generation g = current();
			try {
				return g.image.seg.get(Bytes.U64, locate(g, key, lo, hi, len, Image.I64));
			} catch (IllegalStateException x) {
				onClosed(g, x);
			} catch (IndexOutOfBoundsException x) {
				throw outside(x);
			}
		}
	}

	/** An i64 value, or dflt when the key is missing. */
	public long getLong(String key, long dflt) {
		Long v = read(key, Value::asLong);
		return v == null ? dflt : v;
	}

	/** An f64 value; NotFound when missing. */
	public double getDouble(byte[] key) {
		return getDouble(key, 0, 0, key.length);
	}

	public double getDouble(String key) {
		int n = key.length();
		long lo, hi;
		if (n <= 16 && ((lo = Keys.word(key, 0, n)) | (hi = Keys.word(key, 8, n))) >= 0)
			return getDouble(null, lo, hi, n);
		Keys.Buf k = Keys.utf8(key);
		return getDouble(k.b, 0, 0, k.len);
	}

	private double getDouble(byte[] key, long lo, long hi, int len) {
		for (;;) {
			Generation g = current();
			try {
				return g.image.seg.get(Bytes.F64, locate(g, key, lo, hi, len, Image.F64));
			} catch (IllegalStateException x) {
				onClosed(g, x);
			} catch (IndexOutOfBoundsException x) {
				throw outside(x);
			}
		}
	}

	/** A bool value; NotFound when missing. */
	public boolean getBoolean(byte[] key) {
		return getBoolean(key, 0, 0, key.length);
	}

	public boolean getBoolean(String key) {
		int n = key.length();
		long lo, hi;
		if (n <= 16 && ((lo = Keys.word(key, 0, n)) | (hi = Keys.word(key, 8, n))) >= 0)
			return getBoolean(null, lo, hi, n);
		Keys.Buf k = Keys.utf8(key);
		return getBoolean(k.b, 0, 0, k.len);
	}

	private boolean getBoolean(byte[] key, long lo, long hi, int len) {
		for (;;) {
			Generation g = current();
			try {
				return Bytes.u8(g.image.seg, locate(g, key, lo, hi, len, Image.BOOL)) != 0;
			} catch (IllegalStateException x) {
				onClosed(g, x);
			} catch (IndexOutOfBoundsException x) {
				throw outside(x);
			}
		}
	}

	/**
	 * Copies a bytes or string value into dst (no allocation) and returns its
	 * length; -1 when the key is missing. A value longer than dst is not
	 * copied: the return is its length, larger than dst.length.
	 */
	public int getInto(byte[] key, byte[] dst) {
		return getInto(key, 0, 0, key.length, dst);
	}

	public int getInto(String key, byte[] dst) {
		int n = key.length();
		long lo, hi;
		if (n <= 16 && ((lo = Keys.word(key, 0, n)) | (hi = Keys.word(key, 8, n))) >= 0)
			return getInto(null, lo, hi, n, dst);
		Keys.Buf k = Keys.utf8(key);
		return getInto(k.b, 0, 0, k.len, dst);
	}

	private int getInto(byte[] key, long lo, long hi, int len, byte[] dst) {
		for (;;) {
			Generation g = current();
			try {
				Image im = g.image;
				long e = find(im, key, lo, hi, len);
				if (e < 0)
					return -1;
				long voff = im.valueOffset(e);
				int type = im.typeOf(e);
				if (type != Image.BYTES && type != Image.STRING)
					throw new ShmkvException.Type("the value is " + ValueType.of(type).formatName() + ", not bytes or string");
				long n = im.valueLen(e);
				if (n > Integer.MAX_VALUE)
					return Integer.MAX_VALUE;
				if (n <= dst.length)
					Bytes.copy(im.seg, voff, dst, (int) n);
				return (int) n;
			} catch (IllegalStateException x) {
				onClosed(g, x);
			} catch (IndexOutOfBoundsException x) {
				throw outside(x);
			}
		}
	}

	/**
	 * f applied to the value of key within one generation (a refresh that
	 * releases it meanwhile makes the read start again on the new one); null
	 * when the key is missing. For getters that copy out of the mapping.
	 */
	private <T> T read(byte[] key, long lo, long hi, int len, java.util.function.Function<Value, T> f) {
		for (;;) {
			Generation g = current();
			try {
				long e = find(g.image, key, lo, hi, len);
				return e < 0 ? null : f.apply(Value.at(g, e));
			} catch (IllegalStateException x) {
				onClosed(g, x);
			} catch (ShmkvException.Released x) {
				onClosed(g, x);
			} catch (IndexOutOfBoundsException x) {
				throw outside(x);
			}
		}
	}

	private <T> T read(String key, java.util.function.Function<Value, T> f) {
		int n = key.length();
		long lo, hi;
		if (n <= 16 && ((lo = Keys.word(key, 0, n)) | (hi = Keys.word(key, 8, n))) >= 0)
			return read(null, lo, hi, n, f);
		Keys.Buf k = Keys.utf8(key);
		return read(k.b, 0, 0, k.len, f);
	}

	private static byte[] bytesOf(Value v) {
		if (v.type() != ValueType.BYTES)
			throw new ShmkvException.Type("the value is " + v.type().formatName() + ", not bytes");
		return v.toBytes();
	}

	/** A bytes value (a copy), or null when missing. */
	public byte[] getBytes(String key) {
		return read(key, Reader::bytesOf);
	}

	public byte[] getBytes(byte[] key) {
		return read(key, 0, 0, key.length, Reader::bytesOf);
	}

	/**
	 * A value's stored bytes as a read-only little-endian buffer (no copy),
	 * or null when missing; valid while its generation is mapped.
	 */
	public java.nio.ByteBuffer getByteBuffer(String key) {
		Value v = get(key);
		return v == null ? null : v.asByteBuffer();
	}

	/** A string value (decoded, a copy), or null when missing. */
	public String getString(String key) {
		return read(key, Value::asString);
	}

	public String getString(byte[] key) {
		return read(key, 0, 0, key.length, Value::asString);
	}

	/**
	 * Lists as zero-copy read-only views, or null when missing; valid while
	 * their generation is mapped (take them from a {@link Snapshot} to hold
	 * them across refreshes).
	 */
	public LongList getLongList(String key) {
		Value v = get(key);
		return v == null ? null : v.asLongList();
	}

	public DoubleList getDoubleList(String key) {
		Value v = get(key);
		return v == null ? null : v.asDoubleList();
	}

	public FloatList getFloatList(String key) {
		Value v = get(key);
		return v == null ? null : v.asFloatList();
	}

	/** A string list (its strings are decoded when read), or null when missing. */
	public StringList getStringList(String key) {
		Value v = get(key);
		return v == null ? null : v.asStringList();
	}

	/** A string list's strings, decoded now (copies), or null when missing. */
	public List<String> getStrings(String key) {
		return read(key, v -> List.copyOf(v.asStringList()));
	}

	/**
	 * The values of keys, all from one generation (a refresh racing the batch
	 * makes it start again on the new one); null where a key is missing.
	 */
	public Value[] getAll(byte[]... keys) {
		for (;;) {
			Generation g = current();
			try {
				Image im = g.image;
				Value[] out = new Value[keys.length];
				long now = 0; // the batch reads the clock once, when a record expires
				for (int i = 0; i < keys.length; i++) {
					long e = im.locate(keys[i], 0, 0, keys[i].length);
					if (e >= 0 && im.expiry) {
						long x = im.expires(e);
						if (x != 0 && (now == 0 ? now = now() : now) >= x)
							e = -1;
					}
					out[i] = e < 0 ? null : Value.at(g, e);
				}
				return out;
			} catch (IllegalStateException x) {
				onClosed(g, x);
			} catch (IndexOutOfBoundsException x) {
				throw outside(x);
			}
		}
	}

	public List<Value> getAll(List<String> keys) {
		byte[][] k = new byte[keys.size()][];
		for (int i = 0; i < k.length; i++)
			k[i] = keys.get(i).getBytes(java.nio.charset.StandardCharsets.UTF_8);
		List<Value> out = new ArrayList<>(k.length);
		for (Value v : getAll(k))
			out.add(v);
		return out;
	}

	/**
	 * Every entry of the generation read now, in image order ({@link Value#key()}
	 * gives the key). Every entry is checked as verify checks it (FORMAT.md
	 * §13): a damaged one ends the iteration with Corrupt. An iteration over a
	 * cache that a refresh switches away from fails with Released: iterate a
	 * {@link Snapshot} to be sure to finish.
	 */
	@Override
	public Iterator<Value> iterator() {
		Generation g = current();
		return g.image.v2 ? new RecordIterator(g) : new EntryIterator(g);
	}

	/**
	 * One look-ahead, and the translation of a released generation or an
	 * access outside the image, for both formats' iterations: a subclass
	 * gives the next value, or null at the end.
	 */
	private abstract static class ValueIterator implements Iterator<Value> {
		final Generation g;
		long left;
		Value next;

		ValueIterator(Generation g) {
			this.g = g;
			left = g.image.entryCount;
		}

		/** The next value (left > 0 when called). */
		abstract Value advance();

		@Override
		public final boolean hasNext() {
			if (next != null)
				return true;
			if (left == 0)
				return false;
			try {
				next = advance();
				left--;
				return true;
			} catch (IllegalStateException x) {
				throw g.released() ? g.releasedError(x) : x;
			} catch (IndexOutOfBoundsException x) {
				throw outside(x);
			}
		}

		@Override
		public final Value next() {
			if (!hasNext())
				throw new NoSuchElementException();
			Value v = next;
			next = null;
			return v;
		}
	}

	/** Iteration of a v1 image: ENTRIES in order. */
	private static final class EntryIterator extends ValueIterator {
		long pos;

		EntryIterator(Generation g) {
			super(g);
			pos = g.image.entOff;
		}

		@Override
		Value advance() {
			long e = g.image.nextEntry(pos);
			if (e < 0)
				throw new ShmkvException.Corrupt("entries section ends after " + (g.image.entryCount - left)
						+ " of " + g.image.entryCount + " entries");
			Image.Entry en = g.image.decode(e, true);
			pos = en.end;
			return new Value(g, e, en.voff, en.type, en.valueLen);
		}
	}

	/**
	 * Iteration of a v2 image: every bucket's records in index order,
	 * expired ones included ({@link Value#expires()} says when), each decoded
	 * and its value checked as verify checks it (an OUT record's entry too).
	 */
	private static final class RecordIterator extends ValueIterator {
		long bucket;
		int i, n;

		RecordIterator(Generation g) {
			super(g);
		}

		@Override
		Value advance() {
			Image im = g.image;
			while (i == n) {
				if (bucket >= im.bucketCount)
					throw new ShmkvException.Corrupt("index ends after " + (im.entryCount - left) + " of "
							+ im.entryCount + " records");
				n = Bytes.u8(im.seg, IndexV2.bucket(im, bucket));
				if (n > IndexV2.MAX_RECORDS)
					throw IndexV2.corrupt(bucket, n + " records, at most " + IndexV2.MAX_RECORDS + " fit");
				i = 0;
				bucket++;
			}
			long r = IndexV2.record(im, bucket - 1, IndexV2.bucket(im, bucket - 1), n, i);
			if ((Bytes.u8(im.seg, r) & IndexV2.K_OUT) != 0)
				im.decode(IndexV2.outEntry(im.seg, r), true);
			Value v = Value.at(g, IndexV2.REC | r, true);
			i++;
			return v;
		}
	}

	/** Calls action with every key and value, as {@link #iterator()}. */
	public void forEach(BiConsumer<byte[], Value> action) {
		for (Value v : this)
			action.accept(v.key(), v);
	}

	/** The full structural check of FORMAT.md §13 on the generation read now; throws what it finds. */
	public void verify() {
		Generation g = current();
		try {
			g.image.hdr.checkSections(g.image.seg);
			g.image.verify();
		} catch (IllegalStateException x) {
			throw g.released() ? g.releasedError(x) : x;
		} catch (IndexOutOfBoundsException x) {
			throw outside(x);
		}
	}
}
