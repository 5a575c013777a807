/* diag.c - see diag.h. */
#include "diag.h"

#include <stdio.h>

int diag_fail(int err, char *why, size_t why_len, const char *fmt, ...)
{
	if (why && why_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return err;
}
