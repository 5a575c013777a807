/* shmkv/utf8.h - the one strict UTF-8 check: what the builder accepts, what
 * shmkv_verify requires of string values, and what shmctl and the loader
 * test before writing text as JSON (common/json.c walks sequences with
 * shmkv_utf8_seq_len to replace the bytes that are not UTF-8).
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_UTF8_H
#define SHMKV_UTF8_H

#include <stddef.h>

/* Length (1..4) of the valid UTF-8 sequence at p[0..n), or 0 when the bytes
 * there are not one: a stray continuation byte, a truncated sequence, an
 * overlong form, a surrogate (U+D800..U+DFFF) or a code point past
 * U+10FFFF. n must be at least 1. */
static inline size_t shmkv_utf8_seq_len(const void *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	size_t len;
	unsigned lo = 0x80, hi = 0xBF; /* the range of the second byte */
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0; /* overlong */
		else if (c == 0xED)
			hi = 0x9F; /* surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90; /* overlong */
		else if (c == 0xF4)
			hi = 0x8F; /* past U+10FFFF */
	} else {
		return 0; /* continuation byte, C0/C1 (overlong), F5..FF */
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return len;
}

/* 1 when p[0..n) is strict UTF-8 (as shmkv_utf8_seq_len defines it), else 0.
 * n 0 is valid; p may then be NULL. */
static inline int shmkv_utf8_valid(const void *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	for (size_t i = 0; i < n;) {
		size_t l = shmkv_utf8_seq_len(s + i, n - i);
		if (!l)
			return 0;
		i += l;
	}
	return 1;
}

#endif /* SHMKV_UTF8_H */
