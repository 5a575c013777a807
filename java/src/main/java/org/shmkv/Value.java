package org.shmkv;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * One value of the cache, in place (zero-copy): its type, its stored bytes
 * and typed readings of them. Valid while its generation is mapped: until a
 * refresh switches generations or the cache closes (or, from a
 * {@link Snapshot}, until the snapshot closes); used after that, every method
 * throws {@link ShmkvException.Released}.
 */
public final class Value extends View {
	private final long loc; // the entry (v1) or record (v2) found: Image's locator
	private final int type;

	Value(Generation g, long loc, long voff, int type, long len) {
		super(g, g.image.seg.asSlice(voff, len));
		this.loc = loc;
		this.type = type;
	}

	/** The value of the locator a lookup or the iteration found (full: a strlist's strings checked too). */
	static Value at(Generation g, long loc, boolean full) {
		Image im = g.image;
		long voff = im.valueOffset(loc, full);
		return new Value(g, loc, voff, im.typeOf(loc), im.valueLen(loc));
	}

	static Value at(Generation g, long loc) {
		return at(g, loc, false);
	}

	public ValueType type() {
		return ValueType.of(type);
	}

	/** Whether the value is stored once for several keys (FORMAT.md §9). */
	public boolean isShared() {
		try {
			return gen.image.shared(loc);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/** The key of this entry (a copy). */
	public byte[] key() {
		try {
			Image im = gen.image;
			return im.seg.asSlice(im.keyOffset(loc), im.keyLen(loc)).toArray(ValueLayout.JAVA_BYTE);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/**
	 * When this entry expires, in Unix seconds (FORMAT.md §17.6), or 0 when it
	 * does not (every entry of a v1 image). A get never returns an expired
	 * entry; the iteration returns every entry, expired or not.
	 */
	public long expires() {
		try {
			return gen.image.expires(loc);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/** The stored bytes (value_len of them, without the NUL of bytes and strings): a read-only segment, no copy. */
	public MemorySegment segment() {
		return seg;
	}

	/** The stored bytes as a read-only little-endian buffer, no copy. */
	public ByteBuffer asByteBuffer() {
		return seg.asByteBuffer().order(java.nio.ByteOrder.LITTLE_ENDIAN);
	}

	/** A copy of the stored bytes (any type). */
	public byte[] toBytes() {
		try {
			return seg.toArray(ValueLayout.JAVA_BYTE);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	/** Bytes of the stored value: its length in bytes. */
	public long byteSize() {
		return seg.byteSize();
	}

	/** A string value, decoded from UTF-8 (lookups do not check UTF-8: a bad sequence becomes U+FFFD). */
	public String asString() {
		want(Image.STRING);
		return new String(toBytes(), StandardCharsets.UTF_8);
	}

	public long asLong() {
		want(Image.I64);
		try {
			return seg.get(Bytes.U64, 0);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	public double asDouble() {
		want(Image.F64);
		try {
			return seg.get(Bytes.F64, 0);
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	public boolean asBoolean() {
		want(Image.BOOL);
		try {
			return seg.get(ValueLayout.JAVA_BYTE, 0) != 0;
		} catch (IllegalStateException e) {
			throw failed(e);
		}
	}

	public LongList asLongList() {
		want(Image.I64LIST);
		return new LongList(gen, seg);
	}

	public DoubleList asDoubleList() {
		want(Image.F64LIST);
		return new DoubleList(gen, seg);
	}

	public FloatList asFloatList() {
		want(Image.F32LIST);
		return new FloatList(gen, seg);
	}

	public StringList asStringList() {
		want(Image.STRLIST);
		return new StringList(gen, seg);
	}

	/** Elements: bytes of bytes/strings, 1 for i64/bool/f64, list lengths, strings of a strlist. */
	public long count() {
		return switch (type) {
			case Image.I64, Image.BOOL, Image.F64 -> 1;
			case Image.F32LIST -> seg.byteSize() / 4;
			case Image.F64LIST, Image.I64LIST -> seg.byteSize() / 8;
			case Image.STRLIST -> asStringList().size();
			default -> seg.byteSize();
		};
	}

	private void want(int t) {
		if (type != t)
			throw new ShmkvException.Type("the value is " + ValueType.of(type).formatName() + ", not "
					+ ValueType.of(t).formatName());
	}

	@Override
	public String toString() {
		return "Value(" + ValueType.of(type).formatName() + ", " + seg.byteSize() + " bytes, generation " + gen.number + ")";
	}
}
