/* diag.c - see diag.h. */
#include "diag.h"

#include <stdio.h>

int diag_vfail(int err, char *why, size_t why_len, const char *fmt, va_list ap)
{
	if (why && why_len)
		vsnprintf(why, why_len, fmt, ap);
	return err;
}

int diag_fail(int err, char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	diag_vfail(err, why, why_len, fmt, ap);
	va_end(ap);
	return err;
}
