/* cache.c - shmkv.Cache: a read-only mapping over one image (open) or one
 * loader-served cache (attach), its generations (Gen), and its iterators. */
#include "shmkvpy.h"

/* ---- Gen: one mapped generation ---- */

static void gen_dealloc(GenObject *g)
{
	if (g->owner) /* a handle bound to owner's mapping: nothing of its own to unmap */
		PyMem_Free(g->db);
	else
		shmkv_close(g->db); /* unmaps: no Array or iterator of it is left */
	Py_XDECREF(g->owner);
	Py_XDECREF(g->over);
	PyObject_Free(g);
}

PyTypeObject GenType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmkv._Generation",
	.tp_basicsize = sizeof(GenObject),
	.tp_dealloc = (destructor)gen_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One mapped generation of a cache (internal): unmapped when the last "
		  "Cache, Array or iterator reading it goes.",
};

static GenObject *gen_new(shmkv *db)
{
	GenObject *g = PyObject_New(GenObject, &GenType);
	if (!g) {
		shmkv_close(db);
		return NULL;
	}
	g->db = db;
	g->owner = g->over = NULL;
	return g;
}

/* 1 when a get on g may find an entry expired: its image, or the delta it
 * reads through, has the EXPIRY flag. */
static int gen_expiry(const GenObject *g)
{
	return (shmkv_header(g->db)->flags & SHMKV_HFLAG_EXPIRY) ||
	       (g->over && (shmkv_header(g->over->db)->flags & SHMKV_HFLAG_EXPIRY));
}

/* ---- keys and values ---- */

int shmkvpy_key_slow(PyObject *key, const char **p, Py_ssize_t *n, Py_buffer *view)
{
	view->obj = NULL;
	if (PyUnicode_Check(key)) {
		/* UTF-8 made once and cached in the str (a subclass's, non-ASCII text) */
		*p = PyUnicode_AsUTF8AndSize(key, n);
		return *p ? 0 : -1;
	}
	if (PyBytes_Check(key)) {
		*p = PyBytes_AS_STRING(key);
		*n = PyBytes_GET_SIZE(key);
		return 0;
	}
	if (PyObject_CheckBuffer(key)) {
		if (PyObject_GetBuffer(key, view, PyBUF_SIMPLE) < 0)
			return -1;
		*p = (const char *)view->buf;
		*n = view->len;
		return 0;
	}
	PyErr_Format(PyExc_TypeError, "shmkv keys are str or bytes-like, not %.100s",
		     Py_TYPE(key)->tp_name);
	return -1;
}

void shmkvpy_key_release(Py_buffer *view)
{
	if (view->obj)
		PyBuffer_Release(view);
}

/* A key (or the image's name) as Python sees it: str when it is UTF-8, else
 * bytes (keys are bytes; most are text) */
static PyObject *key_object(const void *k, size_t len)
{
	PyObject *s = PyUnicode_DecodeUTF8(k, (Py_ssize_t)len, "strict");
	if (s || !PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
		return s;
	PyErr_Clear(); /* not UTF-8: the key as bytes */
	return PyBytes_FromStringAndSize(k, (Py_ssize_t)len);
}

/* "key 'name'" for messages: the key's repr, cut at 80 characters (a key
 * may be 65535 bytes long) */
static void key_label(PyObject *key, char *buf, size_t len)
{
	PyObject *r = PyObject_Repr(key);
	const char *s = r ? PyUnicode_AsUTF8(r) : NULL;
	if (!s)
		PyErr_Clear();
	size_t n = s ? strlen(s) : 0;
	PyOS_snprintf(buf, len, "key %.80s%s", s ? s : "?", n > 80 ? "..." : "");
	Py_XDECREF(r);
}

static PyObject *corrupt_value(PyObject *key, const char *why)
{
	char what[128];
	if (PyErr_Occurred())
		PyErr_Clear(); /* the decoder's: CorruptImage says it */
	if (key)
		key_label(key, what, sizeof what);
	else
		PyOS_snprintf(what, sizeof what, "a value");
	return shmkvpy_raise(SHMKV_ECORRUPT, what, why);
}

/* Raises what a get of key (bytes p, n) that failed with err (not
 * ENOTFOUND) raises: "key 'k': why (NAME)", why from lib's own lookup
 * (shmkv_get_diag: it runs the lookup again, on this error path only) */
static void key_error(shmkv *db, PyObject *key, const char *p, size_t n, int err)
{
	char what[128], why[256] = "";
	shmkv_value v;
	key_label(key, what, sizeof what);
	if (err != SHMKV_EKEYLEN && shmkv_get_diag(db, p, n, &v, why, sizeof why) != err)
		*why = 0;
	shmkvpy_raise(err, what, why);
}

static PyObject *strlist_value(const shmkv_value *v, PyObject *key)
{
	shmkv_strlist l;
	if (shmkv_value_strlist(v, &l) != 0)
		return corrupt_value(key, "string list count does not fit the value");
	size_t count = shmkv_strlist_count(&l);
	PyObject *out = PyList_New((Py_ssize_t)count);
	for (size_t i = 0; out && i < count; i++) {
		size_t len;
		const char *s = shmkv_strlist_at(&l, i, &len);
		PyObject *x = s ? PyUnicode_DecodeUTF8(s, (Py_ssize_t)len, "strict") : NULL;
		if (!x) {
			Py_DECREF(out);
			return corrupt_value(key, s ? "a string of the list is not UTF-8"
						    : "a string of the list is damaged");
		}
		PyList_SET_ITEM(out, (Py_ssize_t)i, x);
	}
	return out;
}

/* Whether the n bytes at p are all ASCII: 8-byte words (the last one
 * overlapping), two 4-byte ones from 4 to 7 bytes, bytes below; reads only
 * the n bytes. */
static inline int is_ascii(const unsigned char *p, size_t n)
{
	if (n >= 8) {
		uint64_t acc = 0, x;
		for (size_t i = 0; i + 8 < n; i += 8) {
			memcpy(&x, p + i, 8);
			acc |= x;
		}
		memcpy(&x, p + n - 8, 8);
		return !((acc | x) & UINT64_C(0x8080808080808080));
	}
	if (n >= 4) {
		uint32_t x, y;
		memcpy(&x, p, 4);
		memcpy(&y, p + n - 4, 4);
		return !((x | y) & UINT32_C(0x80808080));
	}
	unsigned acc = 0;
	for (size_t i = 0; i < n; i++)
		acc |= p[i];
	return !(acc & 0x80);
}

/* A string value as a str. ASCII text (the common case) is copied into a
 * new compact ASCII str, without the decoder's calls and its own pass; any
 * other text goes through the strict UTF-8 decoder, whose error (a damaged
 * image opened without verify) is CorruptImage. */
static inline PyObject *str_value(const void *d, size_t n, PyObject *key)
{
	if (n - 8 <= 8) { /* 8 to 16 bytes: two words, checked and copied */
		uint64_t x, y;
		memcpy(&x, d, 8);
		memcpy(&y, (const char *)d + n - 8, 8);
		if (SHMKVPY_LIKELY(!((x | y) & UINT64_C(0x8080808080808080)))) {
			PyObject *s = PyUnicode_New((Py_ssize_t)n, 127);
			if (s) {
				Py_UCS1 *o = PyUnicode_1BYTE_DATA(s);
				memcpy(o, &x, 8);
				memcpy(o + n - 8, &y, 8);
			}
			return s;
		}
	} else if (SHMKVPY_LIKELY(is_ascii(d, n))) {
		PyObject *s = PyUnicode_New((Py_ssize_t)n, 127);
		if (s)
			memcpy(PyUnicode_1BYTE_DATA(s), d, n);
		return s;
	}
	PyObject *s = PyUnicode_DecodeUTF8(d, (Py_ssize_t)n, "strict");
	return s ? s : corrupt_value(key, "string value is not UTF-8");
}

PyObject *shmkvpy_value(GenObject *gen, const shmkv_value *v, PyObject *key)
{
	const void *d = v->data;
	switch (v->type) {
	case SHMKV_TYPE_BYTES: return PyBytes_FromStringAndSize(d, (Py_ssize_t)v->size);
	case SHMKV_TYPE_STRING: return str_value(d, v->size, key);
	case SHMKV_TYPE_I64: return PyLong_FromLongLong(*(const int64_t *)d);
	case SHMKV_TYPE_BOOL: return PyBool_FromLong(*(const uint8_t *)d);
	case SHMKV_TYPE_F64: return PyFloat_FromDouble(*(const double *)d);
	case SHMKV_TYPE_F32LIST:
	case SHMKV_TYPE_F64LIST:
	case SHMKV_TYPE_I64LIST: return shmkvpy_array_new(gen, (int)v->type, d, v->count);
	case SHMKV_TYPE_STRLIST: return strlist_value(v, key);
	default: return corrupt_value(key, "unknown value type");
	}
}

/* ---- Cache ---- */

static int live(CacheObject *c)
{
	if (c->gen)
		return 1;
	PyErr_SetString(PyExc_ValueError, "I/O operation on a closed shmkv.Cache");
	return 0;
}

/* NotFound for key (p, n), absent from c's image. A key the image holds
 * whose entry has expired (FORMAT.md §17.6) says so: args (key, "key
 * expired at T (unix seconds), now is N"), .expires = T; the extra lookup
 * is on the miss path of a raising call only. */
static void not_found(CacheObject *c, PyObject *key, const char *p, size_t n)
{
	uint32_t t = 0;
	char why[160];
	shmkv_value v;
	/* only an image (or delta) whose header says some entry expires can hold one */
	if (!gen_expiry(c->gen) ||
	    shmkv_get_expires(c->gen->db, p, n, &t) || !t ||
	    shmkv_get_diag(c->gen->db, p, n, &v, why, sizeof why) != SHMKV_ENOTFOUND ||
	    !strstr(why, "expired")) {
		shmkvpy_not_found(key);
		return;
	}
	shmkvpy_expired(key, t, why);
}

/* The key's value, or an exception (NotFound for an absent key unless
 * missing_ok: then 1 with nothing raised). *gen receives a reference to the
 * generation v lies in: converting v may run Python code (a collection, a
 * finalizer, another thread), which may refresh or close the cache. */
static inline __attribute__((always_inline)) int lookup(CacheObject *c, PyObject *key,
							 shmkv_value *v, int missing_ok,
							 GenObject **gen)
{
	const char *p;
	Py_ssize_t n;
	Py_buffer view;
	/* the key first: a bytes-like key's buffer export may run Python code */
	if (shmkvpy_key(key, &p, &n, &view) < 0)
		return -1;
	if (SHMKVPY_UNLIKELY(!c->gen)) {
		live(c); /* raises */
		shmkvpy_key_release(&view);
		return -1;
	}
	int err = shmkv_get(c->gen->db, p, (size_t)n, v);
	if (SHMKVPY_LIKELY(!err)) {
		shmkvpy_key_release(&view);
		*gen = (GenObject *)Py_NewRef(c->gen);
		return 0;
	}
	if (err == SHMKV_ENOTFOUND) {
		if (!missing_ok)
			not_found(c, key, p, (size_t)n);
		shmkvpy_key_release(&view);
		return missing_ok ? 1 : -1;
	}
	key_error(c->gen->db, key, p, (size_t)n, err);
	shmkvpy_key_release(&view);
	return -1;
}

/* v of gen as a Python object; drops the reference lookup() took. A
 * string, the common value, is made here without the switch's call. */
static inline PyObject *value_of(GenObject *gen, const shmkv_value *v, PyObject *key)
{
	PyObject *r = v->type == SHMKV_TYPE_STRING ? str_value(v->data, v->size, key)
						   : shmkvpy_value(gen, v, key);
	Py_DECREF(gen);
	return r;
}

static PyObject *cache_subscript(CacheObject *c, PyObject *key)
{
	shmkv_value v;
	GenObject *g;
	if (lookup(c, key, &v, 0, &g))
		return NULL;
	return value_of(g, &v, key);
}

static int cache_contains(CacheObject *c, PyObject *key)
{
	shmkv_value v;
	GenObject *g;
	int r = lookup(c, key, &v, 1, &g);
	if (!r)
		Py_DECREF(g);
	return r < 0 ? -1 : !r;
}

/* len(cache): the number of entries iteration yields (lib/FORMAT.md
 * §17.6): the header's entry_count for an image without the EXPIRY flag
 * (O(1)), else counted by an iteration (O(n), the GIL released): an image
 * with expiring entries, a delta read alone (its entry_count counts its
 * tombstones) and an image read through a delta (O(base + delta), §19) */
static Py_ssize_t cache_len(CacheObject *c)
{
	if (!live(c))
		return -1;
	const shmkv_image_header *h = shmkv_header(c->gen->db);
	/* a base read through a delta (its own, or a protocol 2 overlay that
	 * attach set) counts its live entries */
	if (!gen_expiry(c->gen) && !c->gen->over && !c->gen->db->over &&
	    !shmkv_is_delta(c->gen->db))
		return (Py_ssize_t)h->entry_count;
	GenObject *g = (GenObject *)Py_NewRef(c->gen); /* mapped while the GIL is away */
	Py_ssize_t n = 0;
	int err;
	Py_BEGIN_ALLOW_THREADS
	shmkv_iter it;
	const void *k;
	size_t len;
	shmkv_value v;
	shmkv_iter_init(g->db, &it); /* the live entries: expired ones skipped */
	while (!(err = shmkv_iter_next(&it, &k, &len, &v)))
		n++;
	Py_END_ALLOW_THREADS
	Py_DECREF(g);
	if (err != SHMKV_EEND) {
		shmkvpy_raise(err, "len", NULL);
		return -1;
	}
	return n;
}

static PyObject *cache_get(CacheObject *c, PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs < 1 || nargs > 2) {
		PyErr_SetString(PyExc_TypeError, "get(key, default=None)");
		return NULL;
	}
	shmkv_value v;
	GenObject *g;
	int r = lookup(c, args[0], &v, 1, &g);
	if (r < 0)
		return NULL;
	if (r)
		return Py_NewRef(nargs > 1 ? args[1] : Py_None);
	return value_of(g, &v, args[0]);
}

static PyObject *typed(CacheObject *c, PyObject *key, unsigned type)
{
	shmkv_value v;
	GenObject *g;
	if (lookup(c, key, &v, 0, &g))
		return NULL;
	if (v.type != type) {
		Py_DECREF(g);
		PyErr_Format(shmkvpy_TypeMismatch, "%R holds a %s value, not %s (SHMKV_ETYPE)", key,
			     shmkv_type_name(v.type), shmkv_type_name(type));
		return NULL;
	}
	return value_of(g, &v, key);
}

#define TYPED(NAME, TYPE)                                                                  \
	static PyObject *cache_get_##NAME(CacheObject *c, PyObject *key)                   \
	{                                                                                  \
		return typed(c, key, TYPE);                                                \
	}
TYPED(str, SHMKV_TYPE_STRING)
TYPED(bytes, SHMKV_TYPE_BYTES)
TYPED(i64, SHMKV_TYPE_I64)
TYPED(f64, SHMKV_TYPE_F64)
TYPED(bool, SHMKV_TYPE_BOOL)
TYPED(f32list, SHMKV_TYPE_F32LIST)
TYPED(f64list, SHMKV_TYPE_F64LIST)
TYPED(i64list, SHMKV_TYPE_I64LIST)
TYPED(strlist, SHMKV_TYPE_STRLIST)

static PyObject *cache_type_of(CacheObject *c, PyObject *key)
{
	shmkv_value v;
	GenObject *g;
	if (lookup(c, key, &v, 0, &g))
		return NULL;
	Py_DECREF(g);
	return PyUnicode_FromString(shmkv_type_name(v.type));
}

/* expires(key): when key's entry expires (unix seconds), None when never;
 * NotFound for a key the image does not hold. An expired entry's time is
 * returned too (it is in the past): the way to tell "expired" from "absent"
 * without an exception. */
static PyObject *cache_expires(CacheObject *c, PyObject *key)
{
	const char *p;
	Py_ssize_t n;
	Py_buffer view;
	if (shmkvpy_key(key, &p, &n, &view) < 0)
		return NULL;
	if (!live(c)) {
		shmkvpy_key_release(&view);
		return NULL;
	}
	uint32_t t = 0;
	int err = shmkv_get_expires(c->gen->db, p, (size_t)n, &t);
	shmkvpy_key_release(&view);
	if (err == SHMKV_ENOTFOUND)
		return shmkvpy_not_found(key);
	if (err)
		return shmkvpy_raise(err, "expires", NULL);
	return t ? PyLong_FromUnsignedLong(t) : Py_NewRef(Py_None);
}

/* ---- get_many ---- */

/* out's element format for a list type, or 0 */
static int out_type(const Py_buffer *b)
{
	const char *f = b->format ? b->format : "B";
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	if (f[0] && f[1])
		return 0;
	if (*f == 'f' && b->itemsize == 4)
		return SHMKV_TYPE_F32LIST;
	if (*f == 'd' && b->itemsize == 8)
		return SHMKV_TYPE_F64LIST;
	if ((*f == 'q' || *f == 'l') && b->itemsize == 8)
		return SHMKV_TYPE_I64LIST;
	return 0;
}

enum { ROW_OK, ROW_MISSING, ROW_TYPE, ROW_LEN, ROW_FAILED };

/* Copies found rows into out, fills the others; status[i] says which. */
static void fill_rows(const Py_buffer *out, int type, const shmkv_value *vs, const int *errs,
		      size_t n, double fill, unsigned char *status)
{
	size_t dim = (size_t)out->shape[1], row = dim * (size_t)out->itemsize;
	for (size_t i = 0; i < n; i++) {
		char *dst = (char *)out->buf + i * row;
		if (errs[i] == 0 && vs[i].type == (unsigned)type && vs[i].count == dim) {
			memcpy(dst, vs[i].data, row);
			status[i] = ROW_OK;
			continue;
		}
		status[i] = errs[i] == SHMKV_ENOTFOUND ? ROW_MISSING
			    : errs[i]			  ? ROW_FAILED
			    : vs[i].type != (unsigned)type ? ROW_TYPE
							   : ROW_LEN;
		for (size_t j = 0; j < dim; j++) {
			if (type == SHMKV_TYPE_F32LIST)
				((float *)dst)[j] = (float)fill;
			else if (type == SHMKV_TYPE_F64LIST)
				((double *)dst)[j] = fill;
			else
				((int64_t *)dst)[j] = (int64_t)fill;
		}
	}
}

#define STACK_KEYS 64

/* One get_many's keys and results, on the stack up to STACK_KEYS keys. It
 * holds its own references to the keys: Python code run meanwhile (a key's
 * buffer export, fill's __float__, another thread while the GIL is away)
 * may change or empty the list, which would free the strings whose bytes
 * ks[] points into, and the list's item array. */
typedef struct {
	size_t n, nitems, nviews;
	PyObject **items;
	shmkv_key *ks;
	shmkv_value *vs;
	int *errs;
	unsigned char *status;
	Py_buffer *views; /* for bytes-like keys other than str and bytes */
	PyObject *items0[STACK_KEYS];
	shmkv_key ks0[STACK_KEYS];
	shmkv_value vs0[STACK_KEYS];
	int errs0[STACK_KEYS];
	unsigned char st0[STACK_KEYS];
} batch;

/* b's arrays for seq's keys, references to them and their bytes in ks[];
 * -1 with an exception. batch_free() either way. */
static int batch_keys(batch *b, PyObject *seq)
{
	size_t n = b->n = (size_t)PySequence_Fast_GET_SIZE(seq);
	b->nitems = b->nviews = 0;
	b->views = NULL;
	b->items = b->items0;
	b->ks = b->ks0;
	b->vs = b->vs0;
	b->errs = b->errs0;
	b->status = b->st0;
	if (n > STACK_KEYS) {
		b->items = PyMem_Malloc(n * sizeof *b->items);
		b->ks = PyMem_Malloc(n * sizeof *b->ks);
		b->vs = PyMem_Malloc(n * sizeof *b->vs);
		b->errs = PyMem_Malloc(n * sizeof *b->errs);
		b->status = PyMem_Malloc(n);
		if (!b->items || !b->ks || !b->vs || !b->errs || !b->status) {
			PyErr_NoMemory();
			return -1;
		}
	}
	for (; b->nitems < n; b->nitems++)
		b->items[b->nitems] = Py_NewRef(PySequence_Fast_GET_ITEM(seq, b->nitems));
	for (size_t i = 0; i < n; i++) {
		PyObject *k = b->items[i];
		Py_buffer tmp;
		Py_ssize_t len;
		const char *p;
		if (PyUnicode_Check(k) || PyBytes_Check(k)) {
			if (shmkvpy_key(k, &p, &len, &tmp) < 0)
				return -1;
		} else {
			if (!b->views && !(b->views = PyMem_Calloc(n, sizeof *b->views))) {
				PyErr_NoMemory();
				return -1;
			}
			if (shmkvpy_key(k, &p, &len, &b->views[b->nviews]) < 0)
				return -1;
			b->nviews++;
		}
		b->ks[i].data = p;
		b->ks[i].len = (size_t)len;
	}
	return 0;
}

static void batch_free(batch *b)
{
	for (size_t i = 0; i < b->nviews; i++)
		PyBuffer_Release(&b->views[i]);
	PyMem_Free(b->views);
	for (size_t i = 0; i < b->nitems; i++)
		Py_DECREF(b->items[i]);
	if (b->n > STACK_KEYS) {
		PyMem_Free(b->items);
		PyMem_Free(b->ks);
		PyMem_Free(b->vs);
		PyMem_Free(b->errs);
		PyMem_Free(b->status);
	}
}

/* get_many's out= (a buffer the caller releases when out->obj) for n keys,
 * its list type and the fill value (fill=, else NaN or 0); -1 with an
 * exception */
static int out_rows(PyObject *outobj, PyObject *fillobj, size_t n, Py_buffer *out, int *type,
		    double *fill)
{
	if (PyObject_GetBuffer(outobj, out, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
		return -1;
	*type = out_type(out);
	if (out->ndim != 2 || (size_t)out->shape[0] != n || !*type) {
		PyErr_Format(PyExc_ValueError,
			     "get_many: out must be a writable C-contiguous 2-D array of "
			     "float32, float64 or int64 with one row per key (%zu rows)", n);
		return -1;
	}
	*fill = *type == SHMKV_TYPE_I64LIST ? 0.0 : (double)NAN;
	if (fillobj != Py_None && (*fill = PyFloat_AsDouble(fillobj)) == -1.0 && PyErr_Occurred())
		return -1;
	return 0;
}

/* The exception now set, as keys[i]'s answer in a get_many (rule of
 * lib/FORMAT.md: a batch answers every key as its single get would): its
 * message prefixed "get_many: keys[i]: ", errors[i] set to it. 0, or -1
 * for an exception that is no shmkv.Error (MemoryError...) unless any,
 * left set. */
static int key_failed(PyObject *errors, size_t i, int any)
{
	PyObject *t, *v, *tb;
	PyErr_Fetch(&t, &v, &tb);
	PyErr_NormalizeException(&t, &v, &tb);
	if (!v || (!any && !PyObject_TypeCheck(v, (PyTypeObject *)shmkvpy_Error))) {
		PyErr_Restore(t, v, tb);
		return -1;
	}
	PyObject *s = PyObject_Str(v);
	PyObject *msg = s ? PyUnicode_FromFormat("get_many: keys[%zu]: %U", i, s) : NULL;
	PyObject *args = msg ? PyTuple_Pack(1, msg) : NULL;
	PyObject *ix = args ? PyLong_FromSize_t(i) : NULL;
	int r = ix && PyObject_SetAttrString(v, "args", args) == 0 &&
			PyDict_SetItem(errors, ix, v) == 0 ? 0 : -1;
	Py_XDECREF(s);
	Py_XDECREF(msg);
	Py_XDECREF(args);
	Py_XDECREF(ix);
	Py_XDECREF(t);
	Py_XDECREF(v);
	Py_XDECREF(tb);
	return r;
}

/* result, or, when some key failed, NULL with the exception of the first
 * failed key raised (request order), carrying .results (result) and
 * .errors (every failed key's exception by index). Steals result. */
static PyObject *batch_answer(PyObject *result, PyObject *errors)
{
	if (!result || PyDict_GET_SIZE(errors) == 0)
		return result;
	PyObject *first = NULL, *k;
	Py_ssize_t pos = 0;
	PyDict_Next(errors, &pos, &k, &first); /* keys went in in request order */
	if (PyObject_SetAttrString(first, "results", result) == 0 &&
	    PyObject_SetAttrString(first, "errors", errors) == 0)
		PyErr_SetObject((PyObject *)Py_TYPE(first), first);
	Py_DECREF(result);
	return NULL;
}

/* out='s result once fill_rows() ran: the indices of the absent keys' rows;
 * a value of another type or length (TypeMismatch, ValueError) or a failed
 * lookup (the single get's exception) goes to errors */
static PyObject *missing_rows(const batch *b, GenObject *gen, const Py_buffer *out, int type,
			      PyObject *errors)
{
	PyObject *result = PyList_New(0);
	for (size_t i = 0; result && i < b->n; i++) {
		unsigned char st = b->status[i];
		if (st == ROW_TYPE || st == ROW_LEN || st == ROW_FAILED) {
			char what[128];
			key_label(b->items[i], what, sizeof what);
			if (st == ROW_FAILED)
				key_error(gen->db, b->items[i], b->ks[i].data, b->ks[i].len, b->errs[i]);
			else
				PyErr_Format(st == ROW_TYPE ? shmkvpy_TypeMismatch : PyExc_ValueError,
					     "%s holds a %s of %zu elements; out takes %s rows of %zd",
					     what, shmkv_type_name(b->vs[i].type), b->vs[i].count,
					     shmkv_type_name((unsigned)type), out->shape[1]);
			/* a row of another length: a ValueError, no shmkv.Error, but
			 * this key's answer all the same */
			if (key_failed(errors, i, st == ROW_LEN) < 0)
				Py_CLEAR(result);
		} else if (st == ROW_MISSING) {
			PyObject *x = PyLong_FromSize_t(i);
			if (!x || PyList_Append(result, x) < 0)
				Py_CLEAR(result);
			Py_XDECREF(x);
		}
	}
	return result;
}

/* the values of gen's lookups: dflt for absent keys, and for failed ones,
 * whose exceptions go to errors */
static PyObject *values_list(const batch *b, GenObject *gen, PyObject *dflt, PyObject *errors)
{
	PyObject *result = PyList_New((Py_ssize_t)b->n);
	for (size_t i = 0; result && i < b->n; i++) {
		const shmkv_value *v = &b->vs[i];
		PyObject *x;
		if (b->errs[i] == SHMKV_ENOTFOUND) {
			x = Py_NewRef(dflt);
		} else if (b->errs[i]) {
			key_error(gen->db, b->items[i], b->ks[i].data, b->ks[i].len, b->errs[i]);
			x = key_failed(errors, i, 0) < 0 ? NULL : Py_NewRef(dflt);
		} else {
			x = v->type == SHMKV_TYPE_STRING /* the common value, inline as in value_of() */
				    ? str_value(v->data, v->size, b->items[i])
				    : shmkvpy_value(gen, v, b->items[i]);
			if (!x)
				x = key_failed(errors, i, 0) < 0 ? NULL : Py_NewRef(dflt);
		}
		if (!x)
			Py_CLEAR(result);
		else
			PyList_SET_ITEM(result, (Py_ssize_t)i, x);
	}
	return result;
}

/* b's lookups in c's generation with the GIL released, and their result:
 * with type, out's rows filled and missing_rows(), else values_list() */
static PyObject *batch_lookup(CacheObject *c, batch *b, const Py_buffer *out, int type,
			      double fill, PyObject *dflt)
{
	GenObject *gen = (GenObject *)Py_NewRef(c->gen); /* mapped while the GIL is away */
	Py_BEGIN_ALLOW_THREADS
	shmkv_get_batch(gen->db, b->ks, b->n, b->vs, b->errs);
	if (type)
		fill_rows(out, type, b->vs, b->errs, b->n, fill, b->status);
	Py_END_ALLOW_THREADS
	PyObject *errors = PyDict_New(), *result = NULL;
	if (errors)
		result = batch_answer(type ? missing_rows(b, gen, out, type, errors)
					   : values_list(b, gen, dflt, errors),
				      errors);
	Py_XDECREF(errors);
	Py_DECREF(gen);
	return result;
}

static PyObject *cache_get_many(CacheObject *c, PyObject *args, PyObject *kw)
{
	static char *names[] = {"keys", "default", "out", "fill", NULL};
	PyObject *keys, *dflt = Py_None, *outobj = Py_None, *fillobj = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$OO:get_many", names, &keys, &dflt,
					 &outobj, &fillobj))
		return NULL;
	if (!live(c))
		return NULL;
	PyObject *seq = PySequence_Fast(keys, "get_many: keys must be a sequence (list, tuple)");
	if (!seq)
		return NULL;
	batch b;
	Py_buffer out = {0};
	PyObject *result = NULL;
	int type = 0;
	double fill = 0;
	if (!batch_keys(&b, seq) &&
	    (outobj == Py_None || !out_rows(outobj, fillobj, b.n, &out, &type, &fill)) &&
	    live(c)) /* a key's buffer export may have run Python code that closed it */
		result = batch_lookup(c, &b, &out, type, fill, dflt);
	if (out.obj)
		PyBuffer_Release(&out);
	batch_free(&b);
	Py_DECREF(seq);
	return result;
}

/* ---- generations ---- */

/* Takes c->tlock with the GIL released (a refresh mapping a generation holds
 * it for long; whoever holds it may take the GIL: no deadlock). */
static void tracker_lock(CacheObject *c)
{
	if (PyThread_acquire_lock(c->tlock, NOWAIT_LOCK))
		return;
	Py_BEGIN_ALLOW_THREADS
	PyThread_acquire_lock(c->tlock, WAIT_LOCK);
	Py_END_ALLOW_THREADS
}

/* Follows the cache through lib's shmkv_refresh (the one owner of the
 * protocol: the control segment's fstat first, retired control segments,
 * generations that failed not retried until the next publish) and hands a
 * generation it moved to to a new Gen (shmkv_detach): the old Gen stays
 * mapped while any value of it lives. The Gens and the tracker share the
 * base's mapping (lib/PROTOCOL.md, "Protocol 2"): a refresh to new overlays
 * of the same base maps the overlays alone, and a Gen's dealloc (any thread
 * with the GIL, while a refresh may run without it) gives back only what
 * no other Gen and not the tracker reads. */
static PyObject *cache_refresh(CacheObject *c, PyObject *unused)
{
	(void)unused;
	if (!live(c))
		return NULL;
	if (!c->tlock)
		Py_RETURN_FALSE; /* an image file: one generation */
	shmkv *db = NULL;
	int err = 0;
	tracker_lock(c);
	if (c->tracker) { /* else closed meanwhile */
		Py_BEGIN_ALLOW_THREADS
		err = shmkv_refresh(c->tracker);
		/* moved, or moved before and the detach failed (ENOMEM): the
		 * tracker holds a generation no Gen has yet */
		if (err == 1 || (err == 0 && c->undetached)) {
			err = shmkv_detach(c->tracker, &db);
			c->undetached = err != 0;
		}
		Py_END_ALLOW_THREADS
	}
	PyThread_release_lock(c->tlock);
	if (err < 0) {
		char what[160];
		PyOS_snprintf(what, sizeof what, "refresh %s", c->name);
		return shmkvpy_raise(err, what, NULL);
	}
	if (!db)
		Py_RETURN_FALSE;
	GenObject *g = gen_new(db);
	if (!g)
		return NULL;
	if (!c->gen) { /* closed by another thread while the GIL was away */
		Py_DECREF(g);
		live(c); /* raises ValueError */
		return NULL;
	}
	/* never backwards: a concurrent refresh may have installed a newer one
	 * between our unlock and here */
	if (shmkv_generation(db) < shmkv_generation(c->gen->db)) {
		Py_DECREF(g);
		Py_RETURN_FALSE;
	}
	/* the old generation stays mapped while an Array or iterator holds it */
	Py_SETREF(c->gen, g);
	Py_RETURN_TRUE;
}

static PyObject *cache_close(CacheObject *c, PyObject *unused)
{
	(void)unused;
	Py_CLEAR(c->gen);
	Py_CLEAR(c->delta);
	if (c->tlock) {
		tracker_lock(c);
		shmkv *t = c->tracker;
		c->tracker = NULL;
		PyThread_release_lock(c->tlock);
		shmkv_close(t);
	}
	Py_RETURN_NONE;
}

static PyObject *cache_enter(CacheObject *c, PyObject *unused)
{
	(void)unused;
	if (!live(c))
		return NULL;
	return Py_NewRef(c);
}

static PyObject *cache_exit(CacheObject *c, PyObject *args)
{
	(void)args;
	return cache_close(c, NULL);
}

static PyObject *get_generation(CacheObject *c, void *x)
{
	(void)x;
	if (!live(c))
		return NULL;
	return PyLong_FromUnsignedLongLong(shmkv_generation(c->gen->db));
}

static PyObject *get_closed(CacheObject *c, void *x)
{
	(void)x;
	return PyBool_FromLong(!c->gen);
}

static PyObject *get_mapping(CacheObject *c, void *x)
{
	(void)x;
	if (!live(c))
		return NULL;
	const shmkv_image_header *h = shmkv_header(c->gen->db);
	return Py_BuildValue("(NK)", PyLong_FromVoidPtr((void *)h),
			     (unsigned long long)h->file_size);
}

static PyObject *get_format(CacheObject *c, void *x)
{
	(void)x;
	if (!live(c))
		return NULL;
	return PyLong_FromUnsignedLong(shmkv_header(c->gen->db)->format_version);
}

static PyObject *get_image_name(CacheObject *c, void *x)
{
	(void)x;
	if (!live(c))
		return NULL;
	const shmkv_image_header *h = shmkv_header(c->gen->db);
	return key_object(h->name, strnlen(h->name, sizeof h->name)); /* str, or bytes */
}

static PyObject *get_cache_name(CacheObject *c, void *x)
{
	(void)x;
	if (!c->name)
		Py_RETURN_NONE;
	return PyUnicode_FromString(c->name);
}

static PyObject *get_path(CacheObject *c, void *x)
{
	(void)x;
	return Py_NewRef(c->path);
}

/* ---- deltas (lib/FORMAT.md §19) ---- */

PyObject *shmkvpy_open(PyObject *self, PyObject *args, PyObject *kw);

/* What a message names a cache by: its path, else its cache name. */
static PyObject *label_of(CacheObject *c)
{
	if (c->path != Py_None)
		return PyObject_Repr(c->path);
	return PyUnicode_FromString(c->name ? c->name : "?");
}

/* Reads c's image through the delta d (an open Cache): a new Gen whose
 * handle is bound to the image's mapping with d's image as its delta
 * (lib's shmkv_delta_set), swapped in as refresh swaps generations: what
 * reads the old Gen (an iterator, an Array, a get_many with the GIL away)
 * goes on reading it, and both mappings stay while anything reads them. */
static int set_delta(CacheObject *c, PyObject *arg)
{
	if (!live(c))
		return -1;
	if (c->tlock) {
		PyErr_Format(PyExc_ValueError, "set_delta: %s is an attached cache: the loader "
			     "serves its changes itself", c->name);
		return -1;
	}
	GenObject *plain = c->gen->owner ? c->gen->owner : c->gen;
	if (arg == Py_None) {
		if (c->gen != plain)
			Py_SETREF(c->gen, (GenObject *)Py_NewRef(plain));
		Py_CLEAR(c->delta);
		return 0;
	}
	CacheObject *d;
	if (PyObject_TypeCheck(arg, &CacheType)) {
		d = (CacheObject *)Py_NewRef(arg);
	} else if (PyUnicode_Check(arg) || PyBytes_Check(arg) || PyObject_HasAttrString(arg, "__fspath__")) {
		PyObject *args = PyTuple_Pack(1, arg);
		d = args ? (CacheObject *)shmkvpy_open(NULL, args, NULL) : NULL;
		Py_XDECREF(args);
		if (!d)
			return -1;
	} else {
		PyErr_Format(PyExc_TypeError, "set_delta: a Cache, a path or None, not %.100s",
			     Py_TYPE(arg)->tp_name);
		return -1;
	}
	if (!d->gen) {
		Py_DECREF(d);
		PyErr_SetString(PyExc_ValueError, "set_delta: the delta is a closed shmkv.Cache");
		return -1;
	}
	char why[512] = "";
	shmkv *db = PyMem_Malloc(sizeof *db);
	if (!db) {
		Py_DECREF(d);
		PyErr_NoMemory();
		return -1;
	}
	/* plain's mapping passed open's checks: bind checks the header again */
	int err = shmkv_bind_mem(db, plain->db->base, plain->db->size, SHMKV_OPEN_NOVERIFY, why,
				 sizeof why);
	if (!err) {
		db->clock_pin = plain->db->clock_pin;
		err = shmkv_delta_set(db, d->gen->db, why, sizeof why);
	}
	GenObject *g = err ? NULL : PyObject_New(GenObject, &GenType);
	if (!g) {
		PyMem_Free(db);
		if (err) {
			PyObject *a = label_of(c), *b = label_of(d);
			PyObject *what = a && b ? PyUnicode_FromFormat("read %U through %U", a, b) : NULL;
			const char *w = what ? PyUnicode_AsUTF8(what) : NULL;
			if (w)
				shmkvpy_raise(err, w, why);
			Py_XDECREF(a);
			Py_XDECREF(b);
			Py_XDECREF(what);
		}
		Py_DECREF(d);
		return -1;
	}
	g->db = db;
	g->owner = (GenObject *)Py_NewRef(plain);
	g->over = (GenObject *)Py_NewRef(d->gen);
	Py_SETREF(c->gen, g);
	Py_XSETREF(c->delta, (PyObject *)d);
	return 0;
}

static PyObject *cache_set_delta(CacheObject *c, PyObject *arg)
{
	return set_delta(c, arg) ? NULL : Py_NewRef(Py_None);
}

static PyObject *get_delta(CacheObject *c, void *x)
{
	(void)x;
	if (!live(c))
		return NULL;
	return Py_NewRef(c->delta ? c->delta : Py_None);
}

static PyObject *get_is_delta(CacheObject *c, void *x)
{
	(void)x;
	if (!live(c))
		return NULL;
	return PyBool_FromLong(shmkv_is_delta(c->gen->db));
}

static PyObject *get_checksum(CacheObject *c, void *x)
{
	(void)x;
	if (!live(c))
		return NULL;
	return PyLong_FromUnsignedLongLong(shmkv_checksum(c->gen->db));
}

/* (base_checksum, base_size, prev, seq) of a delta, else None (the
 * package's Cache.delta_id makes it a DeltaId) */
static PyObject *get_delta_id(CacheObject *c, void *x)
{
	(void)x;
	if (!live(c))
		return NULL;
	shmkv_delta_id id;
	if (shmkv_delta_id_of(c->gen->db, &id))
		Py_RETURN_NONE;
	return Py_BuildValue("(KKKK)", (unsigned long long)id.base_checksum,
			     (unsigned long long)id.base_size, (unsigned long long)id.prev,
			     (unsigned long long)id.seq);
}

static PyObject *cache_repr(CacheObject *c)
{
	if (!c->gen)
		return PyUnicode_FromString("<shmkv.Cache closed>");
	if (c->name)
		return PyUnicode_FromFormat("<shmkv.Cache %s generation %llu, %llu entries>",
					    c->name,
					    (unsigned long long)shmkv_generation(c->gen->db),
					    (unsigned long long)shmkv_header(c->gen->db)->entry_count);
	if (c->delta) {
		PyObject *d = label_of((CacheObject *)c->delta);
		PyObject *r = d ? PyUnicode_FromFormat("<shmkv.Cache %R through %U>", c->path, d) : NULL;
		Py_XDECREF(d);
		return r;
	}
	return PyUnicode_FromFormat("<shmkv.Cache %R, %llu entries>", c->path,
				    (unsigned long long)shmkv_header(c->gen->db)->entry_count);
}

static void cache_dealloc(CacheObject *c)
{
	if (c->weakrefs)
		PyObject_ClearWeakRefs((PyObject *)c);
	Py_XDECREF(c->gen);
	Py_XDECREF(c->delta);
	shmkv_close(c->tracker);
	if (c->tlock)
		PyThread_free_lock(c->tlock);
	PyMem_Free(c->name);
	Py_XDECREF(c->path);
	Py_TYPE(c)->tp_free((PyObject *)c); /* shmkv.Cache, the package's subclass */
}

/* ---- iteration ---- */

typedef struct {
	PyObject_HEAD
	GenObject *gen;
	shmkv_iter it;
	int what; /* enum iter_what */
} CacheIterObject;

enum iter_what { ITER_KEYS, ITER_VALUES, ITER_ITEMS, ITER_RECORDS };

static PyObject *iter_new(CacheObject *c, int what)
{
	if (!live(c))
		return NULL;
	CacheIterObject *i = PyObject_New(CacheIterObject, &CacheIterType);
	if (!i)
		return NULL;
	i->gen = (GenObject *)Py_NewRef(c->gen);
	i->what = what;
	/* lib's iteration skips the entries expired when it starts (its clock
	 * read once), as a get does; records() wants every one */
	if (what == ITER_RECORDS)
		shmkv_iter_init_all(c->gen->db, &i->it);
	else
		shmkv_iter_init(c->gen->db, &i->it);
	return (PyObject *)i;
}

static PyObject *iter_next(CacheIterObject *i)
{
	const void *k;
	size_t len;
	shmkv_value v;
	int err = shmkv_iter_next(&i->it, &k, &len, &v);
	if (err == SHMKV_EEND)
		return NULL; /* StopIteration */
	if (err) { /* where: the record after those passed, in its bucket */
		char what[96];
		PyOS_snprintf(what, sizeof what, "iteration: record %llu (bucket %llu)",
			      (unsigned long long)i->it.seen + 1,
			      (unsigned long long)(i->it.bucket ? i->it.bucket - 1 : 0));
		return shmkvpy_raise(err, what, NULL);
	}
	if (i->what == ITER_VALUES)
		return shmkvpy_value(i->gen, &v, NULL);
	PyObject *key = key_object(k, len);
	if (!key || i->what == ITER_KEYS)
		return key;
	if (v.type == SHMKV_TYPE_TOMBSTONE) /* records() of a delta: a removed key */
		return Py_BuildValue("(NOO)", key, Py_None, Py_None);
	PyObject *val = shmkvpy_value(i->gen, &v, key);
	if (!val) {
		Py_DECREF(key);
		return NULL;
	}
	if (i->what == ITER_ITEMS)
		return Py_BuildValue("(NN)", key, val);
	uint32_t t = shmkv_iter_expires(&i->it);
	PyObject *exp = t ? PyLong_FromUnsignedLong(t) : Py_NewRef(Py_None);
	return exp ? Py_BuildValue("(NNN)", key, val, exp) : (Py_DECREF(key), Py_DECREF(val), NULL);
}

static void iter_dealloc(CacheIterObject *i)
{
	Py_XDECREF(i->gen);
	PyObject_Free(i);
}

PyTypeObject CacheIterType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmkv.CacheIterator",
	.tp_basicsize = sizeof(CacheIterObject),
	.tp_dealloc = (destructor)iter_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "An iterator over a cache's keys, values or items, in image order. It reads "
		  "the generation it started on to its end, across refresh().",
	.tp_iter = PyObject_SelfIter,
	.tp_iternext = (iternextfunc)iter_next,
};

static PyObject *cache_iter(CacheObject *c)
{
	return iter_new(c, ITER_KEYS);
}

static PyObject *cache_keys(CacheObject *c, PyObject *u)
{
	(void)u;
	return iter_new(c, ITER_KEYS);
}

static PyObject *cache_values(CacheObject *c, PyObject *u)
{
	(void)u;
	return iter_new(c, ITER_VALUES);
}

static PyObject *cache_items(CacheObject *c, PyObject *u)
{
	(void)u;
	return iter_new(c, ITER_ITEMS);
}

static PyObject *cache_records(CacheObject *c, PyObject *u)
{
	(void)u;
	return iter_new(c, ITER_RECORDS);
}

/* ---- open and attach ---- */

/* The class open() and attach() make: shmkv.Cache, the package's subclass
 * of this type (a collections.abc.Mapping; shmkv/__init__.py sets it with
 * _set_cache_class), else this type. */
static PyTypeObject *cache_class = &CacheType;

PyObject *shmkvpy_set_cache_class(PyObject *self, PyObject *cls)
{
	(void)self;
	if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &CacheType)) {
		PyErr_SetString(PyExc_TypeError, "_set_cache_class: a subclass of the Cache type");
		return NULL;
	}
	Py_INCREF(cls); /* held for the process's life: instances of it may live anywhere */
	cache_class = (PyTypeObject *)cls;
	Py_RETURN_NONE;
}

static CacheObject *cache_new(shmkv *db, PyObject *path)
{
	CacheObject *c = (CacheObject *)cache_class->tp_alloc(cache_class, 0);
	if (!c) {
		shmkv_close(db);
		return NULL;
	}
	c->gen = NULL;
	c->tracker = NULL;
	c->tlock = NULL;
	c->undetached = 0;
	c->name = NULL;
	c->path = Py_NewRef(path);
	c->delta = NULL;
	c->weakrefs = NULL;
	if (!(c->gen = gen_new(db))) {
		Py_DECREF(c);
		return NULL;
	}
	return c;
}

PyObject *shmkvpy_open(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	static char *names[] = {"path", "verify", "deep", "populate", "hugepages", "delta", NULL};
	PyObject *pathobj, *bytes, *delta = Py_None;
	int verify = 1, deep = 0, populate = 0, huge = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$ppppO:open", names, &pathobj, &verify, &deep,
					 &populate, &huge, &delta))
		return NULL;
	if (!PyUnicode_FSConverter(pathobj, &bytes))
		return NULL;
	unsigned flags = (verify ? 0 : SHMKV_OPEN_NOVERIFY) | (deep ? SHMKV_OPEN_DEEP : 0) |
			 (populate ? SHMKV_OPEN_POPULATE : 0) | (huge ? SHMKV_OPEN_HUGEPAGES : 0);
	char why[512] = "";
	shmkv *db = NULL;
	int err;
	Py_BEGIN_ALLOW_THREADS
	err = shmkv_open_file_diag(PyBytes_AS_STRING(bytes), flags, &db, why, sizeof why);
	Py_END_ALLOW_THREADS
	Py_DECREF(bytes);
	if (err)
		return shmkvpy_raise(err, "open", why);
	PyObject *p = PyOS_FSPath(pathobj);
	if (!p) {
		shmkv_close(db);
		return NULL;
	}
	CacheObject *c = cache_new(db, p);
	Py_DECREF(p);
	if (c && delta != Py_None) {
		/* a delta path opens with the base's checks */
		PyObject *d = delta;
		if (!PyObject_TypeCheck(delta, &CacheType)) {
			PyObject *a = PyTuple_Pack(1, delta);
			PyObject *k = a ? Py_BuildValue("{sOsOsO}", "verify", verify ? Py_True : Py_False,
							"deep", deep ? Py_True : Py_False, "populate",
							populate ? Py_True : Py_False)
					: NULL;
			d = k ? shmkvpy_open(NULL, a, k) : NULL;
			Py_XDECREF(a);
			Py_XDECREF(k);
		} else {
			Py_INCREF(d);
		}
		if (!d || set_delta(c, d)) {
			Py_XDECREF(d);
			Py_DECREF(c);
			return NULL;
		}
		Py_DECREF(d);
	}
	return (PyObject *)c;
}

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = PyMem_Malloc(n);
	if (d)
		memcpy(d, s, n);
	return d;
}

PyObject *shmkvpy_attach(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	static char *names[] = {"name", "root", "verify", "deep", NULL};
	const char *name, *root = NULL;
	PyObject *rootobj = Py_None, *rootbytes = NULL;
	int verify = 0, deep = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "s|O$pp:attach", names, &name, &rootobj, &verify,
					 &deep))
		return NULL;
	if (rootobj != Py_None) {
		if (!PyUnicode_FSConverter(rootobj, &rootbytes))
			return NULL;
		root = PyBytes_AS_STRING(rootbytes);
	}
	unsigned flags = (verify ? SHMKV_ATTACH_VERIFY : 0) | (deep ? SHMKV_OPEN_DEEP : 0);
	char why[512] = "", what[160];
	shmkv *tracker = NULL, *db = NULL;
	int err;
	Py_BEGIN_ALLOW_THREADS
	err = shmkv_attach_diag(root, name, flags, &tracker, why, sizeof why);
	if (!err && (err = shmkv_detach(tracker, &db)) != 0)
		PyOS_snprintf(why, sizeof why, "%s", shmkv_strerror(err));
	Py_END_ALLOW_THREADS
	Py_XDECREF(rootbytes);
	PyOS_snprintf(what, sizeof what, "attach %s", name);
	if (err) {
		shmkv_close(tracker);
		return shmkvpy_raise(err, what, why);
	}
	CacheObject *c = cache_new(db, Py_None);
	if (!c) {
		shmkv_close(tracker);
		return NULL;
	}
	c->tracker = tracker;
	c->name = dup_str(name);
	c->tlock = PyThread_allocate_lock();
	if (!c->name || !c->tlock) {
		Py_DECREF(c);
		return PyErr_NoMemory();
	}
	return (PyObject *)c;
}

static PyMethodDef cache_methods[] = {
	{"get", (PyCFunction)(void (*)(void))cache_get, METH_FASTCALL,
	 "get(key, default=None)\n\nThe value of key, or default when it is absent."},
	{"get_many", (PyCFunction)(void (*)(void))cache_get_many, METH_VARARGS | METH_KEYWORDS,
	 "get_many(keys, default=None, *, out=None, fill=None)\n\n"
	 "Looks up a sequence of keys in one batched, prefetched pass (shmkv_get_batch),\n"
	 "with the GIL released. Returns a list of values (default for absent keys).\n"
	 "With out: a writable C-contiguous 2-D array (e.g. numpy.empty((len(keys), d),\n"
	 "numpy.float32)) of float32, float64 or int64; row i receives key i's f32list,\n"
	 "f64list or i64list of d elements, absent keys' rows are set to fill (NaN for\n"
	 "floats, 0 for int64, by default), and the list of those rows' indices is\n"
	 "returned.\n\n"
	 "Every key is answered as its single get would answer it: absent keys get\n"
	 "default (or fill); if some key failed otherwise (a damaged value, a key too\n"
	 "long; with out, a value of another type or length), the exception of the\n"
	 "first such key is raised, naming it and its index, with .results (every\n"
	 "key's answer, default in a failed key's place; with out, the missing rows)\n"
	 "and .errors (index -> exception, every failed key)."},
	{"get_str", (PyCFunction)cache_get_str, METH_O, "get_str(key) -> str\n\nTypeMismatch unless the value is a string."},
	{"get_bytes", (PyCFunction)cache_get_bytes, METH_O, "get_bytes(key) -> bytes\n\nTypeMismatch unless the value is bytes."},
	{"get_i64", (PyCFunction)cache_get_i64, METH_O, "get_i64(key) -> int\n\nTypeMismatch unless the value is an i64."},
	{"get_f64", (PyCFunction)cache_get_f64, METH_O, "get_f64(key) -> float\n\nTypeMismatch unless the value is an f64."},
	{"get_bool", (PyCFunction)cache_get_bool, METH_O, "get_bool(key) -> bool\n\nTypeMismatch unless the value is a bool."},
	{"get_f32list", (PyCFunction)cache_get_f32list, METH_O, "get_f32list(key) -> Array\n\nZero-copy; TypeMismatch unless the value is an f32list."},
	{"get_f64list", (PyCFunction)cache_get_f64list, METH_O, "get_f64list(key) -> Array\n\nZero-copy; TypeMismatch unless the value is an f64list."},
	{"get_i64list", (PyCFunction)cache_get_i64list, METH_O, "get_i64list(key) -> Array\n\nZero-copy; TypeMismatch unless the value is an i64list."},
	{"get_strlist", (PyCFunction)cache_get_strlist, METH_O, "get_strlist(key) -> list[str]\n\nTypeMismatch unless the value is a strlist."},
	{"expires", (PyCFunction)cache_expires, METH_O,
	 "expires(key) -> int | None\n\nWhen key's entry expires, in Unix seconds; None when it never does.\n"
	 "The time of an entry that has\n"
	 "already expired is returned too (cache[key] raises NotFound for it, saying\n"
	 "'expired'); NotFound for a key the image does not hold."},
	{"type_of", (PyCFunction)cache_type_of, METH_O, "type_of(key) -> str\n\nThe image's type name of key's value ('string', 'f32list', ...)."},
	{"_keys", (PyCFunction)cache_keys, METH_NOARGS, "_keys() -> iterator\n\nThe keys in image order (keys()'s view iterates it)."},
	{"_values", (PyCFunction)cache_values, METH_NOARGS, "_values() -> iterator\n\nThe values in image order (values()'s view iterates it)."},
	{"_items", (PyCFunction)cache_items, METH_NOARGS, "_items() -> iterator\n\n(key, value) pairs in image order (items()'s view iterates it)."},
	{"records", (PyCFunction)cache_records, METH_NOARGS,
	 "records() -> iterator\n\nEvery record, expired ones included, in image order: (key, value,\n"
	 "expires), expires in Unix seconds or None (never). For dumps, inspection and\n"
	 "tools; the mapping (iteration, len, get) holds the live entries only. A delta\n"
	 "read alone also yields its tombstones, as (key, None, None); an image read\n"
	 "through a delta yields the delta's upserts, then its own records the delta\n"
	 "does not hold (lib/FORMAT.md section 19)."},
	{"set_delta", (PyCFunction)cache_set_delta, METH_O,
	 "set_delta(delta) -> None\n\nReads this image through delta (a delta image: a Cache, or a path\n"
	 "opened with the default checks; None: the image alone again), lib/FORMAT.md\n"
	 "section 19: every get, typed get, get_many, `in`, expires, iteration, records()\n"
	 "and len answer with the delta's upserts and removals. The delta stays mapped\n"
	 "while it is set (closing its Cache does not unmap it). Iterators and Arrays\n"
	 "made before go on reading what they started on. Raises DeltaMismatch when\n"
	 "the delta does not apply (made for another image, a later delta of a chain,\n"
	 "another hash seed, not a delta, or this image is itself a delta); ValueError\n"
	 "for an attached cache (the loader serves its changes itself)."},
	{"refresh", (PyCFunction)cache_refresh, METH_NOARGS,
	 "refresh() -> bool\n\nMoves an attached cache to the generation its loader serves now: False\n"
	 "when unchanged (one fstat and one atomic load; always for an image file),\n"
	 "True when moved. Values read before stay valid: an Array keeps its\n"
	 "generation mapped. On an error the cache keeps serving its generation\n"
	 "(Unavailable while the loader is mid-publish; a generation that failed is\n"
	 "not tried again until the next). StaleCache: the loader dropped the cache\n"
	 "or its control segment was removed, replaced or truncated; this Cache\n"
	 "keeps its generation and never moves again: attach() anew."},
	{"close", (PyCFunction)cache_close, METH_NOARGS,
	 "close()\n\nDrops this cache's generation; it is unmapped once no Array or iterator\n"
	 "holds it. Any later use of the cache raises ValueError."},
	{"__enter__", (PyCFunction)cache_enter, METH_NOARGS, "Returns the cache."},
	{"__exit__", (PyCFunction)cache_exit, METH_VARARGS, "Closes the cache."},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef cache_getset[] = {
	{"generation", (getter)get_generation, NULL,
	 "The generation served (0 for an image file).", NULL},
	{"closed", (getter)get_closed, NULL, "True after close().", NULL},
	{"mapping", (getter)get_mapping, NULL,
	 "(address, size) of the current generation's image in this process.", NULL},
	{"format", (getter)get_format, NULL,
	 "The image's format version: 2, the one this reader reads (lib/FORMAT.md §15).", NULL},
	{"image_name", (getter)get_image_name, NULL,
	 "The name stored in the image's header: str, or bytes for a name that is not UTF-8.",
	 NULL},
	{"name", (getter)get_cache_name, NULL, "The cache name given to attach(), else None.", NULL},
	{"path", (getter)get_path, NULL, "The path given to open(), else None.", NULL},
	{"delta", (getter)get_delta, NULL,
	 "The delta Cache this image is read through (set_delta, open(delta=)), else None.",
	 NULL},
	{"is_delta", (getter)get_is_delta, NULL,
	 "True for a delta image (lib/FORMAT.md section 19): read alone, its upserts.", NULL},
	{"checksum", (getter)get_checksum, NULL,
	 "The image's header checksum: what a delta names its base by (DeltaId.base_checksum).",
	 NULL},
	{"_delta_id", (getter)get_delta_id, NULL,
	 "(base_checksum, base_size, prev, seq) of a delta image, else None.", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyMappingMethods cache_as_mapping = {
	.mp_length = (lenfunc)cache_len,
	.mp_subscript = (binaryfunc)cache_subscript,
};

static PySequenceMethods cache_as_sequence = {
	.sq_contains = (objobjproc)cache_contains,
};

PyTypeObject CacheType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmkv._shmkv.Cache",
	.tp_basicsize = sizeof(CacheObject),
	.tp_dealloc = (destructor)cache_dealloc,
	.tp_repr = (reprfunc)cache_repr,
	.tp_as_mapping = &cache_as_mapping,
	.tp_as_sequence = &cache_as_sequence,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_MAPPING | Py_TPFLAGS_BASETYPE,
	.tp_weaklistoffset = offsetof(CacheObject, weakrefs),
	.tp_iter = (getiterfunc)cache_iter,
	.tp_methods = cache_methods,
	.tp_getset = cache_getset,
	.tp_doc =
		"A read-only mapping over a shmkv image (a collections.abc.Mapping):\n"
		"shmkv.open(path) or shmkv.attach(name, root=None).\n\n"
		"  cache[key]            the value; NotFound (a KeyError) when absent\n"
		"  key in cache, len(cache), cache.get(key, default=None)\n"
		"  for key in cache / cache.keys() / .values() / .items()  (views)\n"
		"  cache == other        Mapping's equality: every entry compared (O(n))\n"
		"  cache.get_str(key), .get_i64, .get_f64, .get_bool, .get_bytes,\n"
		"    .get_f32list, .get_f64list, .get_i64list, .get_strlist:\n"
		"    typed getters; TypeMismatch (a TypeError) on another type\n"
		"  cache.get_many(keys, default=None, *, out=None)  batched, GIL released\n"
		"  cache.refresh(), cache.generation  (attached caches)\n"
		"  cache.expires(key)  (Unix seconds or None), cache.records()  (all)\n"
		"  with shmkv.open(path) as cache: ...  (close() at the end)\n\n"
		"Keys are str (looked up as UTF-8) or bytes-like. Values come back as\n"
		"the image's type says: str, bytes, int, float, bool, list[str], and\n"
		"shmkv.Array for numeric lists (zero-copy, read-only, buffer protocol).\n"
		"A string value that is not UTF-8 is damage: CorruptImage.\n\n"
		"Expiry: an entry whose time has come is absent to every read\n"
		"(NotFound saying 'expired', not in iteration, not counted by len();\n"
		"len() of an image with expiring entries counts them, O(n)).\n\n"
		"Threads: any number of threads may read one Cache; refresh() and close()\n"
		"may run meanwhile (a read in flight keeps its generation mapped).",
};
