/* shmkv/errors.h - error codes, shmkv_strerror() and shmkv_errname().
 * Part of the header-only reader; include <shmkv.h>, not this file.
 *
 * Every shmkv function that can fail returns 0 (or a documented positive
 * value) on success and a negative code on failure: either -errno (a system
 * call failed; -ENOENT, -EACCES, ...) or one of the SHMKV_E* codes below.
 * Nothing in the library reads or sets errno.
 *
 * The SHMKV_E* codes live in the reserved range [SHMKV_ERR_MIN, SHMKV_ERR_MAX]
 * = [-31299, -31200]: clear of every -errno value (-4095..-1, the kernel's
 * MAX_ERRNO), of LMDB's codes (-30600..-30799) and of Berkeley DB's
 * (-30800..-30999), so a program that uses shmkv beside either can tell whose
 * code it holds. New codes take the next free value below the last one; a
 * code never changes its number once released. tests/api_test checks that
 * every code has a name and a message and that none collides. */
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
/* The reserved range, and the codes assigned so far within it. */
#define SHMKV_ERR_MIN (-31299)
#define SHMKV_ERR_MAX (-31200)
#define SHMKV_EFIRST_ (-31214) /* lowest assigned code */
#define SHMKV_ELAST_ (-31200)  /* highest assigned code */

/* The message for err: a SHMKV_E* code, a -errno value or 0. Never NULL,
 * never changes errno; "unknown shmkv error" for anything else. */
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
	case SHMKV_ESTALE: return "cache dropped or control segment replaced: attach again";
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

/* The symbolic name of err, for logs and machine-readable output:
 * "SHMKV_ENOTFOUND" for a shmkv code, "ENOENT" for -ENOENT (every Linux
 * errno value), "OK" for 0, "UNKNOWN" for anything else. Never NULL: a
 * static string. shmkv_strerror() gives the message. */
static inline const char *shmkv_errname(int err)
{
#define SHMKV__E(name) case -name: return #name;
	switch (err) {
	case 0: return "OK";
	case SHMKV_ENOTFOUND: return "SHMKV_ENOTFOUND";
	case SHMKV_ETYPE: return "SHMKV_ETYPE";
	case SHMKV_EMAGIC: return "SHMKV_EMAGIC";
	case SHMKV_EVERSION: return "SHMKV_EVERSION";
	case SHMKV_ELAYOUT: return "SHMKV_ELAYOUT";
	case SHMKV_ETRUNCATED: return "SHMKV_ETRUNCATED";
	case SHMKV_ECHECKSUM: return "SHMKV_ECHECKSUM";
	case SHMKV_ECORRUPT: return "SHMKV_ECORRUPT";
	case SHMKV_EKEYLEN: return "SHMKV_EKEYLEN";
	case SHMKV_EEND: return "SHMKV_EEND";
	case SHMKV_EDUPKEY: return "SHMKV_EDUPKEY";
	case SHMKV_EINPUT: return "SHMKV_EINPUT";
	case SHMKV_ELIMIT: return "SHMKV_ELIMIT";
	case SHMKV_EPROTO: return "SHMKV_EPROTO";
	case SHMKV_ESTALE: return "SHMKV_ESTALE";
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
}

/* The why/why_len convention of every *_diag function, for programs that
 * follow it too (the loader and shmctl do, through common/diag.h): formats
 * fmt and ap into why[why_len] (truncated to fit, always terminated;
 * nothing written when why is NULL or why_len 0) and returns err. */
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

/* Private: puts fmt's text before the message already in why (a caller
 * naming where a callee's error happened: "entry at 42: ..."), both cut to
 * fit why_len; returns err. The callee's message is copied with memcpy, not
 * snprintf("%s"), which GCC's -Wformat-truncation flags at -O1. lib/ only. */
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
