/* shmkvpy.h - what the files of the shmkv extension module share.
 * The reader is lib/shmkv.h itself (header-only, compiled into the module);
 * the builder is libshmkv-build's C API (builder/shmkv_build.h), linked in.
 *
 * Lifetime (python/README.md, "Generations"): a Gen object owns one reader
 * handle, that is one mapped generation. A Cache points at its current Gen;
 * every zero-copy Array and every iterator holds a reference to the Gen it
 * reads, so a mapping is unmapped (shmkv_close) only when the last of them
 * goes. Refresh never unmaps in place: it hands the generation it moved to
 * to a new Gen (shmkv_detach) and swaps the Cache's Gen; lib shares the
 * base's mapping between them, so a refresh that only changes overlays
 * does not map the base again.
 *
 * Threads: every object here is changed only with the GIL held; get_many
 * and build release it around the C work, holding references to what that
 * work reads. */
#ifndef SHMKVPY_H
#define SHMKVPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <shmkv.h>

/* the hot paths' branch hints (GCC and Clang, as lib/'s) */
#define SHMKVPY_LIKELY(x) __builtin_expect(!!(x), 1)
#define SHMKVPY_UNLIKELY(x) __builtin_expect(!!(x), 0)

typedef struct GenObject {
	PyObject_HEAD
	shmkv *db; /* owned: closed (unmapped) in dealloc, or freed when bound */
	/* a base read through a delta (Cache.set_delta, lib/FORMAT.md §19): db
	 * is a handle bound to owner's mapping with over's image as its delta;
	 * both are held while db reads them. NULL otherwise. */
	struct GenObject *owner, *over;
} GenObject;

typedef struct {
	PyObject_HEAD
	GenObject *gen;    /* the generation read now; NULL once closed */
	/* attached caches: lib's handle following the generations (shmkv_refresh),
	 * each handed to a Gen by shmkv_detach; never read from here. NULL for
	 * an image file and once closed. Used only with tlock held. */
	shmkv *tracker;
	PyThread_type_lock tlock; /* taken only with the GIL released */
	int undetached;    /* the tracker moved but shmkv_detach failed (ENOMEM) */
	char *name;        /* attached caches: the cache name */
	PyObject *path;    /* opened file, or None */
	PyObject *delta;   /* the delta Cache read through (set_delta), or NULL */
	PyObject *weakrefs;
} CacheObject;

typedef struct {
	PyObject_HEAD
	PyObject *owner;   /* the Gen whose mapping data lies in (or NULL: own copy) */
	const void *data;
	Py_ssize_t n;      /* elements */
	Py_ssize_t itemsize;
	char fmt[2];       /* struct format: "f", "d" or "q" */
	int type;          /* SHMKV_TYPE_F32LIST, _F64LIST, _I64LIST */
	Py_ssize_t exports; /* live buffer views */
} ArrayObject;

extern PyTypeObject GenType, CacheType, ArrayType, CacheIterType;

/* errors.c */
int shmkvpy_errors_init(PyObject *m);
/* Raises the exception of err (a SHMKV_E* code or -errno) with the message
 * "what: reason (NAME)" (what and reason may be NULL: reason defaults to
 * shmkv_strerror's message; a reason beginning with "what:" is not
 * prefixed again); returns NULL. */
PyObject *shmkvpy_raise(int err, const char *what, const char *reason);
/* Raises NotFound (a KeyError) for key; returns NULL. */
PyObject *shmkvpy_not_found(PyObject *key);
/* Raises NotFound for key whose entry expired at t: args (key, why),
 * .reason why, .expires t; returns NULL. */
PyObject *shmkvpy_expired(PyObject *key, uint32_t t, const char *why);
extern PyObject *shmkvpy_Error, *shmkvpy_TypeMismatch, *shmkvpy_BuildError,
	*shmkvpy_CorruptImage;

/* cache.c */
/* shmkvpy_key for every key but a compact ASCII str */
int shmkvpy_key_slow(PyObject *key, const char **p, Py_ssize_t *n, Py_buffer *view);
void shmkvpy_key_release(Py_buffer *view);

/* Key bytes of a str (UTF-8) or bytes-like object; view is filled for
 * bytes-like objects other than bytes (release it with key_release). A
 * compact ASCII str (what Python makes of ASCII text; never a subclass's
 * instance, whose data lies apart) holds its UTF-8 in place: its bytes are
 * read where they are, inline here, with no call (the hot path of a get). */
static inline int shmkvpy_key(PyObject *key, const char **p, Py_ssize_t *n, Py_buffer *view)
{
	if (PyUnicode_Check(key) && PyUnicode_IS_COMPACT_ASCII(key)) {
		view->obj = NULL;
		*p = (const char *)PyUnicode_DATA(key);
		*n = PyUnicode_GET_LENGTH(key);
		return 0;
	}
	return shmkvpy_key_slow(key, p, n, view);
}
/* The Python object for value v read from gen (zero-copy Array for numeric
 * lists). key names it in errors. */
PyObject *shmkvpy_value(GenObject *gen, const shmkv_value *v, PyObject *key);

/* array.c */
PyObject *shmkvpy_array_new(GenObject *owner, int type, const void *data, size_t n);

/* build.c */
PyObject *shmkvpy_build(PyObject *self, PyObject *args, PyObject *kw);
PyObject *shmkvpy_build_file(PyObject *self, PyObject *args, PyObject *kw);
PyObject *shmkvpy_join(PyObject *self, PyObject *args, PyObject *kw);
PyObject *shmkvpy_upgrade(PyObject *self, PyObject *args, PyObject *kw);
PyObject *shmkvpy_diff(PyObject *self, PyObject *args, PyObject *kw);
PyObject *shmkvpy_apply(PyObject *self, PyObject *args, PyObject *kw);
PyObject *shmkvpy_part_of(PyObject *self, PyObject *args, PyObject *kw);

#endif /* SHMKVPY_H */
