/* diag.h - diagnostics for the loader and shmctl: a message into the
 * caller's why buffer, and the error code back (the reader's `char *why,
 * size_t why_len` convention; lib's shmkv_vfail owns it, diag_fail calls it). */
#ifndef SHMKV_COMMON_DIAG_H
#define SHMKV_COMMON_DIAG_H

#include <stdarg.h>
#include <stddef.h>

/* Formats the message into why[why_len] (truncated to fit; nothing written
 * when why is NULL or why_len 0) and returns err, so a failure reads
 * `return diag_fail(-EINVAL, why, why_len, "%s: bad size", path);`. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
int diag_fail(int err, char *why, size_t why_len, const char *fmt, ...);

#endif /* SHMKV_COMMON_DIAG_H */
