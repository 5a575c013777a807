package org.shmkv;

/**
 * Every error of this library. The subclasses are named after the C reader's
 * error codes (lib/shmkv/errors.h); {@link #codeName()} gives that name
 * ("SHMKV_ECORRUPT", or an errno name such as "ENOENT") and {@link #code()}
 * its number, and each message starts as the C reader's does.
 * Unchecked: a lookup on a healthy cache does not fail, and the callers that
 * care catch the one subclass they can act on ({@link NotFound},
 * {@link Unavailable}, {@link Stale}).
 */
public class ShmkvException extends RuntimeException {
	private static final long serialVersionUID = 1L;
	private final int code;
	private final String codeName;

	ShmkvException(int code, String codeName, String message, Throwable cause) {
		super(message, cause);
		this.code = code;
		this.codeName = codeName;
	}

	/** The C code: a SHMKV_E* value (-31200..-31214) or -errno. */
	public int code() {
		return code;
	}

	/** The C code's name: "SHMKV_ENOTFOUND", ..., or "ENOENT", "EACCES", ... */
	public String codeName() {
		return codeName;
	}

	/** SHMKV_ENOTFOUND: the key is not in the cache. */
	public static final class NotFound extends ShmkvException {
		private static final long serialVersionUID = 1L;
		NotFound(String m) { super(-31200, "SHMKV_ENOTFOUND", "key not found: " + m, null); }
	}

	/** SHMKV_ETYPE: the value has another type than the getter asks for. */
	public static final class Type extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Type(String m) { super(-31201, "SHMKV_ETYPE", "value has a different type: " + m, null); }
	}

	/** SHMKV_EMAGIC: not a shmkv image. */
	public static final class Magic extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Magic(String m) { super(-31202, "SHMKV_EMAGIC", "not a shmkv image (bad magic): " + m, null); }
	}

	/** SHMKV_EVERSION: a format version this reader does not read. */
	public static final class Version extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Version(String m) { super(-31203, "SHMKV_EVERSION", "unsupported image format version: " + m, null); }
	}

	/** SHMKV_ELAYOUT: the layout hash differs. */
	public static final class Layout extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Layout(String m) { super(-31204, "SHMKV_ELAYOUT", "image layout hash does not match this reader: " + m, null); }
	}

	/** SHMKV_ETRUNCATED: the image is shorter than its header says. */
	public static final class Truncated extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Truncated(String m) { super(-31205, "SHMKV_ETRUNCATED", "image is truncated: " + m, null); }
	}

	/** SHMKV_ECHECKSUM: a header or section checksum does not match. */
	public static final class Checksum extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Checksum(String m) { super(-31206, "SHMKV_ECHECKSUM", "checksum mismatch: " + m, null); }
	}

	/** SHMKV_ECORRUPT: the structure is invalid (bounds, counts, types, flags, padding). */
	public static final class Corrupt extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Corrupt(String m) { super(-31207, "SHMKV_ECORRUPT", "image structure is corrupt: " + m, null); }
		Corrupt(String m, Throwable cause) { super(-31207, "SHMKV_ECORRUPT", "image structure is corrupt: " + m, cause); }
	}

	/** SHMKV_EKEYLEN: a key longer than 65535 bytes. */
	public static final class KeyLength extends ShmkvException {
		private static final long serialVersionUID = 1L;
		KeyLength(int len) { super(-31208, "SHMKV_EKEYLEN", "key too long: " + len + " bytes, the limit is 65535", null); }
	}

	/** SHMKV_EPROTO: a control segment of another protocol version or layout, or not one at all. */
	public static final class Proto extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Proto(String m) { super(-31213, "SHMKV_EPROTO", "control segment protocol mismatch: " + m, null); }
	}

	/** SHMKV_ESTALE: the cache was dropped or its control segment replaced: attach again. */
	public static final class Stale extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Stale(String m) { super(-31214, "SHMKV_ESTALE", "cache dropped or control segment replaced: attach again: " + m, null); }
	}

	/** -EAGAIN: nothing published yet, or a publish under way: try again later. */
	public static final class Unavailable extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Unavailable(String m) { super(-11, "EAGAIN", m, null); }
	}

	/**
	 * A value view, list or snapshot used after its generation's mapping was
	 * released (a refresh that switched generations, or close). The memory is
	 * gone; the access was refused, nothing was read.
	 */
	public static final class Released extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Released(String m, Throwable cause) { super(-9, "EBADF", m, cause); }
	}

	/** An operating-system error (-errno): a missing file, a permission, mmap. */
	public static final class Io extends ShmkvException {
		private static final long serialVersionUID = 1L;
		Io(int errno, String name, String m, Throwable cause) { super(-errno, name, m, cause); }
	}
}
