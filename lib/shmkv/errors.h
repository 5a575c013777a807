/* shmkv/errors.h - shmkv_strerror() and the diagnostic buffer helper.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_ERRORS_H
#define SHMKV_ERRORS_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "format.h"

/* Names both shmkv codes and -errno values. Never NULL, never changes errno. */
static inline const char *shmkv_strerror(int err)
{
	switch (err) {
	case 0: return "success";
	case SHMKV_ENOTFOUND: return "key not found";
	case SHMKV_ETYPE: return "value has a different type";
	case SHMKV_EMAGIC: return "not a shmkv image (bad magic)";
	case SHMKV_EVERSION: return "unsupported image format version";
	case SHMKV_ELAYOUT: return "image layout hash does not match this reader";
	case SHMKV_ETRUNCATED: return "image is truncated";
	case SHMKV_ECHECKSUM: return "checksum mismatch";
	case SHMKV_ECORRUPT: return "image structure is corrupt";
	case SHMKV_EKEYLEN: return "key too long";
	case SHMKV_EEND: return "no more entries";
	case SHMKV_EDUPKEY: return "duplicate key";
	case SHMKV_EINPUT: return "malformed input";
	case SHMKV_ELIMIT: return "limit exceeded";
	case SHMKV_EPROTO: return "control segment protocol mismatch";
	default: break;
	}
	if (err < 0 && err > -4096) {
		int saved = errno;
		const char *s = strerror(-err); /* glibc: static text for known codes */
		errno = saved;
		return s;
	}
	return "unknown shmkv error";
}

/* Write a diagnostic into why[why_len] (if given) and return err. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static inline int shmkv__fail(int err, char *why, size_t why_len, const char *fmt, ...)
{
	if (why && why_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return err;
}

#endif /* SHMKV_ERRORS_H */
