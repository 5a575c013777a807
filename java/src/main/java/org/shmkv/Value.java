package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * One value of the cache, in place (zero-copy): its type, its stored bytes
 * and typed readings of them, checked when the get or the iteration found
 * it (a string is UTF-8). Valid while its generation is mapped: until a
 * refresh switches generations or the cache closes (or, from a
 * {@link Snapshot}, until the snapshot closes); used after that, every
 * method that reads the image throws {@link ShmkvException.Released} once
 * the image is unmapped (one a newer generation keeps, as the base while
 * only overlays change, stays mapped and reads on).
 */
public final class Value {
	private final Generation gen;
	/** The image the record is in: the generation's, or the delta it is read through. */
	private final Image im;
	private final long loc; // the record found: its locator (Index)
	private final int type;
	private final long voff, len;

	Value(Generation g, Image im, long loc, int type, long voff, long len) {
		this.gen = g;
		this.im = im;
		this.loc = loc;
		this.type = type;
		this.voff = voff;
		this.len = len;
	}

	/** The record this value is of: its locator. */
	long locator() {
		return loc;
	}

	/**
	 * The value's type.
	 *
	 * @return the type; {@link ValueType#TOMBSTONE} for a delta's tombstone
	 *     (from {@link ShmkvReader#allRecords()} of a delta read alone)
	 */
	public ValueType type() {
		return ValueType.of(type);
	}

	/**
	 * Whether this is a delta's tombstone (FORMAT.md §19.2): a key the delta
	 * removes from its base. Only {@link ShmkvReader#allRecords()} of a delta
	 * read alone yields tombstones: their value is empty (no bytes, count 0,
	 * no expiry), and every typed reading throws {@link ShmkvException.Type}.
	 *
	 * @return true for a tombstone
	 */
	public boolean isTombstone() {
		return type == Format.TOMB_ENTRY_TYPE;
	}

	/**
	 * The generation (of the cache) this value belongs to.
	 *
	 * @return the generation number; 0 for an image file
	 */
	public long generation() {
		return gen.number;
	}

	/**
	 * Whether the value is stored once for several keys (FORMAT.md §9).
	 *
	 * @return true for a shared value
	 */
	public boolean isShared() {
		try {
			return im.shared(loc);
		} catch (IllegalStateException e) {
			throw gen.failed(e);
		}
	}

	/**
	 * The key of this entry.
	 *
	 * @return a copy of the key's bytes
	 */
	public byte[] key() {
		try {
			return im.key(loc);
		} catch (IllegalStateException e) {
			throw gen.failed(e);
		}
	}

	/**
	 * When this entry expires (FORMAT.md §17). A get never returns an
	 * expired entry; {@link ShmkvReader#allRecords()} does.
	 *
	 * @return Unix seconds; 0 when it does not expire
	 */
	public long expires() {
		try {
			return im.expires(loc);
		} catch (IllegalStateException e) {
			throw gen.failed(e);
		}
	}

	/**
	 * The stored bytes: value_len of them, without the NUL that follows bytes
	 * and strings in the image.
	 *
	 * @return a read-only segment over the image (no copy)
	 */
	public MemorySegment segment() {
		return im.seg.asSlice(voff, len);
	}

	/**
	 * The stored bytes as a buffer.
	 *
	 * @return a read-only little-endian buffer over the image (no copy)
	 */
	public ByteBuffer asByteBuffer() {
		return segment().asByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
	}

	/**
	 * The stored bytes, any type.
	 *
	 * @return a copy
	 */
	public byte[] toBytes() {
		try {
			return Bytes.copy(im.seg, voff, len);
		} catch (IllegalStateException e) {
			throw gen.failed(e);
		}
	}

	/**
	 * The length of the stored value.
	 *
	 * @return bytes
	 */
	public long byteSize() {
		return len;
	}

	/**
	 * A string value, decoded (its UTF-8 was checked when it was found).
	 *
	 * @return a copy
	 * @throws ShmkvException.Type when the value is not a string
	 */
	public String asString() {
		want(Format.STRING);
		return new String(toBytes(), StandardCharsets.UTF_8);
	}

	/**
	 * An i64 value.
	 *
	 * @return the value
	 * @throws ShmkvException.Type when the value is not an i64
	 */
	public long asLong() {
		want(Format.I64);
		return word();
	}

	/**
	 * An f64 value.
	 *
	 * @return the value
	 * @throws ShmkvException.Type when the value is not an f64
	 */
	public double asDouble() {
		want(Format.F64);
		return Double.longBitsToDouble(word());
	}

	private long word() {
		try {
			return Bytes.u64(im.seg, voff);
		} catch (IllegalStateException e) {
			throw gen.failed(e);
		}
	}

	/**
	 * A bool value.
	 *
	 * @return the value
	 * @throws ShmkvException.Type when the value is not a bool
	 */
	public boolean asBoolean() {
		want(Format.BOOL);
		try {
			return Bytes.u8(im.seg, voff) != 0;
		} catch (IllegalStateException e) {
			throw gen.failed(e);
		}
	}

	/**
	 * An i64list value.
	 *
	 * @return a zero-copy read-only view
	 * @throws ShmkvException.Type when the value is not an i64list
	 */
	public LongList asLongList() {
		want(Format.I64LIST);
		return new LongList(gen, segment());
	}

	/**
	 * An f64list value.
	 *
	 * @return a zero-copy read-only view
	 * @throws ShmkvException.Type when the value is not an f64list
	 */
	public DoubleList asDoubleList() {
		want(Format.F64LIST);
		return new DoubleList(gen, segment());
	}

	/**
	 * An f32list value.
	 *
	 * @return a zero-copy read-only view
	 * @throws ShmkvException.Type when the value is not an f32list
	 */
	public FloatList asFloatList() {
		want(Format.F32LIST);
		return new FloatList(gen, segment());
	}

	/**
	 * A strlist value: each string is checked and decoded when it is read.
	 *
	 * @return a list over the image
	 * @throws ShmkvException.Type when the value is not a strlist
	 */
	public StringList asStringList() {
		want(Format.STRLIST);
		return new StringList(gen, im, segment());
	}

	/**
	 * The value's elements: the bytes of bytes and strings, 1 for i64, bool
	 * and f64, list lengths, the strings of a strlist.
	 *
	 * @return the count
	 */
	public long count() {
		if (isTombstone())
			return 0;
		return switch (Format.shape(type)) {
			case Format.SHAPE_FIXED -> 1;
			case Format.SHAPE_ARRAY -> len / Format.elemSize(type);
			case Format.SHAPE_STRLIST -> asStringList().size();
			default -> len;
		};
	}

	private void want(int t) {
		if (type != t)
			throw new ShmkvException.Type(im.source, "the value is " + ValueType.name(type) + ", not "
					+ ValueType.name(t));
	}

	/**
	 * A description of the value (not its contents).
	 *
	 * @return its type, size and generation
	 */
	@Override
	public String toString() {
		return "Value(" + ValueType.name(type) + ", " + len + " bytes, generation " + gen.number + ")";
	}
}
