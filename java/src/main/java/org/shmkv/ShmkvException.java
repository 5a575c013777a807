package org.shmkv;

import java.util.Collections;
import java.util.Map;

/**
 * Every error of this library. The subclasses are named after the C
 * reader's error codes (lib/shmkv/errors.h): {@link #codeName()} gives that
 * name ("SHMKV_ECORRUPT", or an errno name such as "ENOENT") and
 * {@link #code()} its number. A message names the file or cache first, then
 * what is wrong, in the C reader's words, then where and why:
 * {@code users.shmkv: image structure is corrupt: index bucket 7: ...}.
 *
 * <p>Unchecked: a lookup on a sound image does not fail, and callers catch
 * the one subclass they can act on ({@link NotFound}, {@link Unavailable},
 * {@link Stale}). An exception thrown by a batch
 * ({@link ShmkvReader#getAll(byte[][])}) also carries every key's answer:
 * {@link #results()} and {@link #errors()}.
 */
public sealed class ShmkvException extends RuntimeException
		permits ShmkvException.NotFound, ShmkvException.Type, ShmkvException.Magic, ShmkvException.Version,
		ShmkvException.Layout, ShmkvException.Truncated, ShmkvException.Checksum, ShmkvException.Corrupt,
		ShmkvException.KeyLength, ShmkvException.Proto, ShmkvException.Stale, ShmkvException.Unavailable,
		ShmkvException.Released, ShmkvException.Io, ShmkvException.Base {
	private static final long serialVersionUID = 2L;
	/** The C reader's code. */
	private final int code;
	/** The code's C name. */
	private final String codeName;
	/** The file or cache the error is about; null: none. */
	private final String where;
	/** What is wrong, where and why. */
	private final String text;
	/** Set once, before a batch throws this: the failing key and its index; null otherwise. */
	private String context;
	private transient Value[] results;
	private transient Map<Integer, ShmkvException> errors;

	/**
	 * where: the file or cache (null: none); summary: what is wrong in the C
	 * reader's words (null: the detail says it); detail: where and why.
	 */
	ShmkvException(int code, String codeName, String where, String summary, String detail, Throwable cause) {
		super(cause);
		this.code = code;
		this.codeName = codeName;
		this.where = where;
		this.text = summary == null ? detail : detail == null ? summary : summary + ": " + detail;
	}

	/**
	 * The message: the file or cache, (from a batch) the key that failed and
	 * its index, what is wrong, where and why.
	 *
	 * @return the message
	 */
	@Override
	public String getMessage() {
		StringBuilder b = new StringBuilder();
		if (where != null)
			b.append(where).append(": ");
		if (context != null)
			b.append(context).append(": ");
		return b.append(text).toString();
	}

	/**
	 * The C reader's code of this error.
	 *
	 * @return a SHMKV_E* value (-31200..-31215), or minus an errno value
	 */
	public int code() {
		return code;
	}

	/**
	 * The name of the C reader's code of this error, as the conformance
	 * vectors spell it.
	 *
	 * @return "SHMKV_ENOTFOUND", ..., or an errno name: "ENOENT", "EACCES", ...
	 */
	public String codeName() {
		return codeName;
	}

	/**
	 * For an exception a batch threw ({@link ShmkvReader#getAll(byte[][])}):
	 * every key's value in request order, null where the key is absent or
	 * its get failed.
	 *
	 * @return a copy of the batch's values; null when this exception did not
	 *     come from a batch
	 */
	public Value[] results() {
		return results == null ? null : results.clone();
	}

	/**
	 * For an exception a batch threw: every key whose get failed (absent keys
	 * are not errors), by its index in the request, with the exception its
	 * single get would have thrown; this exception is the first of them.
	 *
	 * @return the failures, unmodifiable; empty when this exception did not
	 *     come from a batch
	 */
	public Map<Integer, ShmkvException> errors() {
		return errors == null ? Map.of() : Collections.unmodifiableMap(errors);
	}

	/** Makes this, key index i's error, the one a batch throws: its message names the key, it carries every answer. */
	ShmkvException thrownByBatch(String key, int i, Value[] results, Map<Integer, ShmkvException> errors) {
		this.context = "key " + key + " (index " + i + " of the batch)";
		this.results = results;
		this.errors = errors;
		return this;
	}

	/** The file or cache the error is about (null: none). */
	String where() {
		return where;
	}

	/** SHMKV_ENOTFOUND: the key is not in the cache (or has expired). */
	public static final class NotFound extends ShmkvException {
		private static final long serialVersionUID = 2L;

		NotFound(String where, String key) {
			super(Format.ENOTFOUND, "SHMKV_ENOTFOUND", where, "key not found", key, null);
		}
	}

	/** SHMKV_ETYPE: the value has another type than the getter asks for. */
	public static final class Type extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Type(String where, String detail) {
			super(Format.ETYPE, "SHMKV_ETYPE", where, "value has a different type", detail, null);
		}
	}

	/** SHMKV_EMAGIC: not a shmkv image. */
	public static final class Magic extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Magic(String where, String detail) {
			super(Format.EMAGIC, "SHMKV_EMAGIC", where, "not a shmkv image (bad magic)", detail, null);
		}
	}

	/**
	 * SHMKV_EVERSION: a format version this reader does not read; format 1
	 * is retired, and the message names the command that converts it.
	 */
	public static final class Version extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Version(String where, String detail) {
			super(Format.EVERSION, "SHMKV_EVERSION", where, null, detail, null);
		}
	}

	/** SHMKV_ELAYOUT: the image's layout hash is not this reader's. */
	public static final class Layout extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Layout(String where, String detail) {
			super(Format.ELAYOUT, "SHMKV_ELAYOUT", where, "image layout hash does not match this reader", detail, null);
		}
	}

	/** SHMKV_ETRUNCATED: the image is shorter than its header says. */
	public static final class Truncated extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Truncated(String where, String detail) {
			super(Format.ETRUNCATED, "SHMKV_ETRUNCATED", where, "image is truncated", detail, null);
		}
	}

	/** SHMKV_ECHECKSUM: a header or section checksum does not match. */
	public static final class Checksum extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Checksum(String where, String detail) {
			super(Format.ECHECKSUM, "SHMKV_ECHECKSUM", where, "checksum mismatch", detail, null);
		}
	}

	/**
	 * SHMKV_ECORRUPT: the structure is invalid (bounds, counts, types, flags,
	 * padding, a string that is not UTF-8).
	 */
	public static final class Corrupt extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Corrupt(String where, String detail) {
			this(where, detail, null);
		}

		Corrupt(String where, String detail, Throwable cause) {
			super(Format.ECORRUPT, "SHMKV_ECORRUPT", where, "image structure is corrupt", detail, cause);
		}
	}

	/**
	 * SHMKV_EBASE: a delta read through an image it was not made for
	 * (FORMAT.md §19.4): the base is not a plain image or the delta not a
	 * delta, the delta names another base (its header checksum and size),
	 * follows another delta in a chain (merge the chain first), or hashes
	 * keys with another seed or width. The message names both checksums.
	 */
	public static final class Base extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Base(String where, String detail) {
			super(Format.EBASE, "SHMKV_EBASE", where, "delta does not apply to this image", detail, null);
		}
	}

	/** SHMKV_EKEYLEN: a key longer than 65535 bytes. */
	public static final class KeyLength extends ShmkvException {
		private static final long serialVersionUID = 2L;

		KeyLength(String where, long len) {
			super(Format.EKEYLEN, "SHMKV_EKEYLEN", where, "key too long",
					len + " bytes, the limit is " + Format.MAX_KEY_LEN, null);
		}
	}

	/** SHMKV_EPROTO: a control segment of another protocol version or layout, or not one at all. */
	public static final class Proto extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Proto(String where, String detail) {
			super(Format.EPROTO, "SHMKV_EPROTO", where, "control segment protocol mismatch", detail, null);
		}
	}

	/** SHMKV_ESTALE: the cache was dropped or its control segment replaced: attach again. */
	public static final class Stale extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Stale(String where, String detail) {
			super(Format.ESTALE, "SHMKV_ESTALE", where, "cache dropped or control segment replaced: attach again",
					detail, null);
		}
	}

	/** EAGAIN: nothing published yet, or a publish under way: try again later. */
	public static final class Unavailable extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Unavailable(String where, String detail) {
			super(-11, "EAGAIN", where, null, detail, null);
		}
	}

	/**
	 * A value view, list or snapshot used after its generation's mapping was
	 * released (a refresh that switched generations, or close) and the image
	 * it reads unmapped (a refresh keeps an image the new generation shares).
	 * The memory is gone; the access was refused, nothing was read.
	 */
	public static final class Released extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Released(String where, String detail, Throwable cause) {
			super(-9, "EBADF", where, null, detail, cause);
		}
	}

	/** An operating-system error (minus an errno value): a missing file, a permission, mmap. */
	public static final class Io extends ShmkvException {
		private static final long serialVersionUID = 2L;

		Io(int errno, String name, String where, String detail, Throwable cause) {
			super(-errno, name, where, null, detail, cause);
		}
	}
}
