package org.shmkv;

/** The value types of FORMAT.md §8, with their numbers. */
public enum ValueType {
	BYTES(1), STRING(2), I64(3), BOOL(4), F64(5), F32LIST(6), F64LIST(7), I64LIST(8), STRLIST(9);

	private final int code;

	ValueType(int code) {
		this.code = code;
	}

	/** The type's number in the format (1..9). */
	public int code() {
		return code;
	}

	/** The type's name as the format, manifests and shmctl spell it ("bytes", "f32list", ...). */
	public String formatName() {
		return name().toLowerCase(java.util.Locale.ROOT);
	}

	static ValueType of(int code) {
		return values()[code - 1];
	}
}
