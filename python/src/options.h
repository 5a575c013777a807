/* options.h - the build options as the extension reads them (options.c).
 * Their names, types, defaults and docs are defined once, in
 * shmkv/_options.py: the package checks and completes a call's keywords
 * there, and hands every option to shmkvpy_parse_opts() by name. */
#ifndef SHMKVPY_OPTIONS_H
#define SHMKVPY_OPTIONS_H

#include "shmkvpy.h"

#include <shmkv_build.h>

typedef struct {
	shmkv_build_options o;
	unsigned threads;
	unsigned long long memory_limit; /* bytes; 0 none */
	const char *tmpdir;              /* into a str of the keywords: valid during the call */
	unsigned long long part_k, part_n;
	int filter;
	int type;        /* default value type, 0: inferred */
	int64_t expires; /* expires=: every record's expiry unless its own says; 0 none */
	const char *delta_of, *after; /* a delta build (lib/FORMAT.md §19): into str
					 of the keywords, valid during the call */
} shmkvpy_opts;

/* The builder's defaults, then every keyword of kw (a dict of option names,
 * None for an option's default) set by its setter; -1 with an exception
 * set (ValueError naming the option, TypeError for a name the extension
 * has no setter for). */
int shmkvpy_parse_opts(PyObject *kw, shmkvpy_opts *p);

/* The setter table's names, as a tuple (the module's _BUILD_OPTIONS). */
PyObject *shmkvpy_option_names(void);

/* An expiry given from Python (int Unix seconds, an aware datetime, None)
 * as Unix seconds (0: never); -1 with why filled (a ValueError's text) or,
 * for a Python failure, an exception set and why "". */
int shmkvpy_expiry_of(PyObject *x, int64_t *t, char *why, size_t why_len);

/* The value type a name stands for ("str" is "string"); -1 with a
 * ValueError set. */
int shmkvpy_type_named(PyObject *name, int *type);

#endif /* SHMKVPY_OPTIONS_H */
