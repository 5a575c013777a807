package org.shmkv;

import java.util.Locale;

/** The value types of FORMAT.md §8, with their codes in the format, and a delta's tombstone (§19.2). */
public enum ValueType {
	/** Bytes (any), followed by a NUL in the image. */
	BYTES(Format.BYTES),
	/** A UTF-8 string, followed by a NUL in the image. */
	STRING(Format.STRING),
	/** A signed 64-bit integer. */
	I64(Format.I64),
	/** A boolean: one byte, 0 or 1. */
	BOOL(Format.BOOL),
	/** An IEEE 754 binary64. */
	F64(Format.F64),
	/** A list of IEEE 754 binary32s. */
	F32LIST(Format.F32LIST),
	/** A list of IEEE 754 binary64s. */
	F64LIST(Format.F64LIST),
	/** A list of signed 64-bit integers. */
	I64LIST(Format.I64LIST),
	/** A list of UTF-8 strings. */
	STRLIST(Format.STRLIST),
	/**
	 * Not a value: a delta image's tombstone (FORMAT.md §19.2), a key the
	 * delta removes, as {@link ShmkvReader#allRecords()} of a delta read
	 * alone yields it ({@link Value#isTombstone()}). Code 0.
	 */
	TOMBSTONE(Format.TOMB_ENTRY_TYPE);

	private final int code;

	ValueType(int code) {
		this.code = code;
	}

	/**
	 * The type's code in the format.
	 *
	 * @return 1..9; 0 for a tombstone
	 */
	public int code() {
		return code;
	}

	/**
	 * The type's name as the format, the manifests and shmctl spell it.
	 *
	 * @return "bytes", "string", "i64", ..., "strlist"; "tombstone"
	 */
	public String formatName() {
		return name().toLowerCase(Locale.ROOT);
	}

	private static final ValueType[] BY_CODE = values();

	/** The type of a known code (1..9), or TOMBSTONE (0). */
	static ValueType of(int code) {
		return code == Format.TOMB_ENTRY_TYPE ? TOMBSTONE : BY_CODE[code - 1];
	}

	/** A code's format name, "tombstone" for 0, or "type N" for a code out of the table (messages). */
	static String name(int code) {
		return Format.known(code) || code == Format.TOMB_ENTRY_TYPE ? of(code).formatName() : "type " + code;
	}
}
