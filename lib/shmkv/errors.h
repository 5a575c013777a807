/* shmkv/errors.h - error codes, shmkv_strerror() and shmkv_errname().
 * Part of the header-only reader; include <shmkv.h>, not this file.
 *
 * A function that can fail returns 0 (or a documented positive value) or a
 * negative code: -errno, or a SHMKV_E* code in the reserved range
 * [-31299, -31200], clear of every -errno, of LMDB's (-30600..-30799) and of
 * Berkeley DB's codes (-30800..-30999). A code's number never changes once
 * released (tests/api_test). Nothing in the library reads or sets errno. */
#ifndef SHMKV_ERRORS_H
#define SHMKV_ERRORS_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Errors: 0 on success, -errno for system errors, or one of these. */
#define SHMKV_ENOTFOUND (-31200)  /* key not in the cache */
#define SHMKV_ETYPE (-31201)      /* value has another type than the getter asks for */
#define SHMKV_EMAGIC (-31202)     /* not a shmkv image */
#define SHMKV_EVERSION (-31203)   /* image format version not supported by this reader */
#define SHMKV_ELAYOUT (-31204)    /* layout hash differs: reader and image disagree on layout */
#define SHMKV_ETRUNCATED (-31205) /* image shorter than its header says */
#define SHMKV_ECHECKSUM (-31206)  /* a checksum does not match */
#define SHMKV_ECORRUPT (-31207)   /* structure invalid (bounds, counts, padding) */
#define SHMKV_EKEYLEN (-31208)    /* key longer than SHMKV_MAX_KEY_LEN */
#define SHMKV_EEND (-31209)       /* iteration has no more entries */
#define SHMKV_EDUPKEY (-31210)    /* builder: duplicate key */
#define SHMKV_EINPUT (-31211)     /* builder: malformed input */
#define SHMKV_ELIMIT (-31212)     /* builder: a documented limit is exceeded */
#define SHMKV_EPROTO (-31213)     /* control segment of another protocol version or layout */
#define SHMKV_ESTALE (-31214)     /* the cache was dropped or its control segment replaced,
				     removed or truncated: close and attach again */
#define SHMKV_EBASE (-31215)      /* a delta read through or applied to an image it was not made
				     for (FORMAT.md §19.4) */
/* The reserved range, and the codes assigned so far within it. */
#define SHMKV_ERR_MIN (-31299)
#define SHMKV_ERR_MAX (-31200)
#define SHMKV_EFIRST_ (-31215) /* lowest assigned code */
#define SHMKV_ELAST_ (-31200)  /* highest assigned code */

/* The codes with their names and messages: one table, both functions. */
#define SHMKV__ERRORS(X)                                                                         \
	X(SHMKV_ENOTFOUND, "key not found")                                                      \
	X(SHMKV_ETYPE, "value has a different type")                                             \
	X(SHMKV_EMAGIC, "not a shmkv image (bad magic)")                                         \
	X(SHMKV_EVERSION, "unsupported image format version")                                    \
	X(SHMKV_ELAYOUT, "image layout hash does not match this reader")                         \
	X(SHMKV_ETRUNCATED, "image is truncated")                                                \
	X(SHMKV_ECHECKSUM, "checksum mismatch")                                                  \
	X(SHMKV_ECORRUPT, "image structure is corrupt")                                          \
	X(SHMKV_EKEYLEN, "key too long")                                                         \
	X(SHMKV_EEND, "no more entries")                                                         \
	X(SHMKV_EDUPKEY, "duplicate key")                                                        \
	X(SHMKV_EINPUT, "malformed input")                                                       \
	X(SHMKV_ELIMIT, "limit exceeded")                                                        \
	X(SHMKV_EPROTO, "control segment protocol mismatch")                                     \
	X(SHMKV_ESTALE, "cache dropped or control segment replaced: attach again")               \
	X(SHMKV_EBASE, "delta does not apply to this image")

/* The message for err (a SHMKV_E* code, a -errno value or 0); never NULL,
 * never changes errno; "unknown shmkv error" for anything else. */
static inline const char *shmkv_strerror(int err)
{
#define SHMKV__MSG(code, msg) case code: return msg;
	switch (err) {
	case 0: return "success";
	SHMKV__ERRORS(SHMKV__MSG)
	default: break;
	}
#undef SHMKV__MSG
	if (err < 0 && err > -4096) {
		int saved = errno;
		const char *s = strerror(-err); /* glibc: static text for known codes */
		errno = saved;
		return s;
	}
	return "unknown shmkv error";
}

/* The symbol of err ("SHMKV_ENOTFOUND", "ENOENT" for -ENOENT, "OK" for 0,
 * "UNKNOWN"): a static string, for logs and machine-readable output. */
static inline const char *shmkv_errname(int err)
{
#define SHMKV__NAME(code, msg) case code: return #code;
#define SHMKV__E(name) case -name: return #name;
	switch (err) {
	case 0: return "OK";
	SHMKV__ERRORS(SHMKV__NAME)
	/* Linux errno values; aliases (EWOULDBLOCK, EDEADLOCK, ENOTSUP) share
	 * their number with the name given */
	SHMKV__E(EPERM) SHMKV__E(ENOENT) SHMKV__E(ESRCH) SHMKV__E(EINTR) SHMKV__E(EIO) SHMKV__E(ENXIO) 
	SHMKV__E(E2BIG) SHMKV__E(ENOEXEC) SHMKV__E(EBADF) SHMKV__E(ECHILD) SHMKV__E(EAGAIN) SHMKV__E(ENOMEM) 
	SHMKV__E(EACCES) SHMKV__E(EFAULT) SHMKV__E(ENOTBLK) SHMKV__E(EBUSY) SHMKV__E(EEXIST) SHMKV__E(EXDEV) 
	SHMKV__E(ENODEV) SHMKV__E(ENOTDIR) SHMKV__E(EISDIR) SHMKV__E(EINVAL) SHMKV__E(ENFILE) SHMKV__E(EMFILE) 
	SHMKV__E(ENOTTY) SHMKV__E(ETXTBSY) SHMKV__E(EFBIG) SHMKV__E(ENOSPC) SHMKV__E(ESPIPE) SHMKV__E(EROFS) 
	SHMKV__E(EMLINK) SHMKV__E(EPIPE) SHMKV__E(EDOM) SHMKV__E(ERANGE) SHMKV__E(EDEADLK) SHMKV__E(ENAMETOOLONG) 
	SHMKV__E(ENOLCK) SHMKV__E(ENOSYS) SHMKV__E(ENOTEMPTY) SHMKV__E(ELOOP) SHMKV__E(ENOMSG) 
	SHMKV__E(EIDRM) SHMKV__E(ECHRNG) SHMKV__E(EL2NSYNC) SHMKV__E(EL3HLT) SHMKV__E(EL3RST) SHMKV__E(ELNRNG) 
	SHMKV__E(EUNATCH) SHMKV__E(ENOCSI) SHMKV__E(EL2HLT) SHMKV__E(EBADE) SHMKV__E(EBADR) SHMKV__E(EXFULL) 
	SHMKV__E(ENOANO) SHMKV__E(EBADRQC) SHMKV__E(EBADSLT) SHMKV__E(EBFONT) SHMKV__E(ENOSTR) 
	SHMKV__E(ENODATA) SHMKV__E(ETIME) SHMKV__E(ENOSR) SHMKV__E(ENONET) SHMKV__E(ENOPKG) SHMKV__E(EREMOTE) 
	SHMKV__E(ENOLINK) SHMKV__E(EADV) SHMKV__E(ESRMNT) SHMKV__E(ECOMM) SHMKV__E(EPROTO) SHMKV__E(EMULTIHOP) 
	SHMKV__E(EDOTDOT) SHMKV__E(EBADMSG) SHMKV__E(EOVERFLOW) SHMKV__E(ENOTUNIQ) SHMKV__E(EBADFD) SHMKV__E(EREMCHG) 
	SHMKV__E(ELIBACC) SHMKV__E(ELIBBAD) SHMKV__E(ELIBSCN) SHMKV__E(ELIBMAX) SHMKV__E(ELIBEXEC) SHMKV__E(EILSEQ) 
	SHMKV__E(ERESTART) SHMKV__E(ESTRPIPE) SHMKV__E(EUSERS) SHMKV__E(ENOTSOCK) SHMKV__E(EDESTADDRREQ) SHMKV__E(EMSGSIZE) 
	SHMKV__E(EPROTOTYPE) SHMKV__E(ENOPROTOOPT) SHMKV__E(EPROTONOSUPPORT) SHMKV__E(ESOCKTNOSUPPORT) SHMKV__E(EOPNOTSUPP) SHMKV__E(EPFNOSUPPORT) 
	SHMKV__E(EAFNOSUPPORT) SHMKV__E(EADDRINUSE) SHMKV__E(EADDRNOTAVAIL) SHMKV__E(ENETDOWN) SHMKV__E(ENETUNREACH) SHMKV__E(ENETRESET) 
	SHMKV__E(ECONNABORTED) SHMKV__E(ECONNRESET) SHMKV__E(ENOBUFS) SHMKV__E(EISCONN) SHMKV__E(ENOTCONN) SHMKV__E(ESHUTDOWN) 
	SHMKV__E(ETOOMANYREFS) SHMKV__E(ETIMEDOUT) SHMKV__E(ECONNREFUSED) SHMKV__E(EHOSTDOWN) SHMKV__E(EHOSTUNREACH) SHMKV__E(EALREADY) 
	SHMKV__E(EINPROGRESS) SHMKV__E(ESTALE) SHMKV__E(EUCLEAN) SHMKV__E(ENOTNAM) SHMKV__E(ENAVAIL) SHMKV__E(EISNAM) 
	SHMKV__E(EREMOTEIO) SHMKV__E(EDQUOT) SHMKV__E(ENOMEDIUM) SHMKV__E(EMEDIUMTYPE) SHMKV__E(ECANCELED) SHMKV__E(ENOKEY) 
	SHMKV__E(EKEYEXPIRED) SHMKV__E(EKEYREVOKED) SHMKV__E(EKEYREJECTED) SHMKV__E(EOWNERDEAD) SHMKV__E(ENOTRECOVERABLE) SHMKV__E(ERFKILL) 
	SHMKV__E(EHWPOISON)
	default: return "UNKNOWN";
	}
#undef SHMKV__E
#undef SHMKV__NAME
}

/* The why/why_len convention of every *_diag function, for programs that
 * follow it (common/diag.h): fmt into why[why_len] (truncated, terminated;
 * nothing when why is NULL or why_len 0); returns err. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 0)))
#endif
static inline int shmkv_vfail(int err, char *why, size_t why_len, const char *fmt, va_list ap)
{
	if (why && why_len)
		vsnprintf(why, why_len, fmt, ap);
	return err;
}

/* Private: shmkv_vfail with the arguments inline. lib/ only. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static inline int shmkv__fail(int err, char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err = shmkv_vfail(err, why, why_len, fmt, ap);
	va_end(ap);
	return err;
}

/* Private: fmt's text before the message already in why ("entry at 42:
 * ..."), both cut to fit; returns err. memcpy, not snprintf("%s"), which
 * GCC's -Wformat-truncation flags at -O1. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static inline int shmkv__prefix(int err, char *why, size_t why_len, const char *fmt, ...)
{
	char msg[256];
	const char *end;
	size_t n, k;
	va_list ap;
	int w;
	if (!why || !why_len)
		return err;
	/* bounded by why_len even if a callee left why unterminated */
	end = (const char *)memchr(why, 0, why_len);
	n = end ? (size_t)(end - why) : why_len;
	if (n > sizeof msg - 1)
		n = sizeof msg - 1;
	memcpy(msg, why, n);
	va_start(ap, fmt);
	w = vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= why_len - 1)
		return err; /* no room left after the prefix */
	k = why_len - 1 - (size_t)w;
	if (n > k)
		n = k;
	memcpy(why + w, msg, n);
	why[(size_t)w + n] = 0;
	return err;
}

#endif /* SHMKV_ERRORS_H */
