/* diag.c - see diag.h. */
#include "diag.h"

#include <stdio.h>

#include <shmkv.h>

/* The convention is lib's (shmkv_vfail): this only takes the arguments inline. */
int diag_fail(int err, char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err = shmkv_vfail(err, why, why_len, fmt, ap);
	va_end(ap);
	return err;
}
