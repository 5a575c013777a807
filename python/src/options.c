/* options.c - the build options (shmkv/_options.py defines them: names,
 * types, defaults, docs) read into the builder's C options: one setter per
 * option, found by name. The package has checked each value's type; the
 * setters check ranges and convert. */
#include "options.h"

#include <datetime.h>
#include <math.h>

/* v (an int) in [lo, hi]; -1 with a ValueError naming the option */
static int int_in(PyObject *v, const char *name, unsigned long long lo, unsigned long long hi,
		  unsigned long long *out, const char *what)
{
	unsigned long long u = PyLong_AsUnsignedLongLong(v); /* negative: OverflowError */
	if (u == (unsigned long long)-1 && PyErr_Occurred()) {
		if (!PyErr_ExceptionMatches(PyExc_OverflowError))
			return -1;
		PyErr_Clear();
	} else if (u >= lo && u <= hi) {
		*out = u;
		return 0;
	}
	PyErr_Format(PyExc_ValueError, "%s=%R: expected %s", name, v, what);
	return -1;
}

static int set_name(shmkvpy_opts *p, PyObject *v)
{
	Py_ssize_t len;
	const char *s = PyUnicode_AsUTF8AndSize(v, &len);
	if (!s)
		return -1;
	if (len >= (Py_ssize_t)sizeof p->o.name || memchr(s, 0, (size_t)len)) {
		PyErr_Format(PyExc_ValueError, "name=%R: expected at most %zu bytes of UTF-8, "
			     "without NUL", v, sizeof p->o.name - 1);
		return -1;
	}
	memcpy(p->o.name, s, (size_t)len + 1);
	p->o.fixed |= SHMKV_OPT_NAME;
	return 0;
}

static int set_seed(shmkvpy_opts *p, PyObject *v)
{
	unsigned long long x;
	if (int_in(v, "seed", 0, UINT64_MAX, &x, "0..2**64-1") < 0)
		return -1;
	p->o.seed = x;
	p->o.fixed |= SHMKV_OPT_SEED;
	return 0;
}

static int set_created(shmkvpy_opts *p, PyObject *v)
{
	unsigned long long x;
	if (int_in(v, "created", 0, INT64_MAX, &x, "Unix seconds, 0 or more") < 0)
		return -1;
	p->o.created = (int64_t)x;
	p->o.fixed |= SHMKV_OPT_CREATED;
	return 0;
}

static int set_buckets(shmkvpy_opts *p, PyObject *v)
{
	unsigned long long x;
	if (int_in(v, "buckets", 1, UINT64_MAX, &x, "at least 1") < 0)
		return -1;
	p->o.buckets = x;
	p->o.fixed |= SHMKV_OPT_BUCKETS;
	return 0;
}

static int set_load_factor(shmkvpy_opts *p, PyObject *v)
{
	double d = PyFloat_AsDouble(v);
	if (d == -1.0 && PyErr_Occurred())
		return -1;
	if (!(d > 0 && d <= 1)) {
		PyErr_Format(PyExc_ValueError, "load_factor=%R: expected (0, 1]", v);
		return -1;
	}
	p->o.load_factor = d;
	return 0;
}

static int set_dedup(shmkvpy_opts *p, PyObject *v)
{
	p->o.dedup = v == Py_True;
	p->o.fixed |= SHMKV_OPT_DEDUP;
	return 0;
}

static int set_on_duplicate(shmkvpy_opts *p, PyObject *v)
{
	static const struct {
		const char *name;
		int dup;
	} dups[] = {{"error", SHMKV_DUP_ERROR}, {"first", SHMKV_DUP_FIRST}, {"last", SHMKV_DUP_LAST}};
	const char *s = PyUnicode_AsUTF8(v);
	if (!s)
		return -1;
	for (size_t i = 0; i < sizeof dups / sizeof dups[0]; i++)
		if (!strcmp(s, dups[i].name)) {
			p->o.on_duplicate = dups[i].dup;
			return 0;
		}
	PyErr_Format(PyExc_ValueError, "on_duplicate=%R: expected 'error', 'first' or 'last'", v);
	return -1;
}

static int set_lossy_f32(shmkvpy_opts *p, PyObject *v)
{
	p->o.lossy_f32 = v == Py_True;
	return 0;
}

static int set_threads(shmkvpy_opts *p, PyObject *v)
{
	unsigned long long x;
	if (int_in(v, "threads", 0, 1024, &x, "1..1024, or 0 for every CPU") < 0)
		return -1;
	p->threads = (unsigned)x;
	return 0;
}

static int set_memory_limit(shmkvpy_opts *p, PyObject *v)
{
	unsigned long long x;
	if (int_in(v, "memory_limit", 0, UINT64_MAX, &x, "0 (none) or at least 1 MiB") < 0)
		return -1;
	if (x && x < (1u << 20)) {
		PyErr_Format(PyExc_ValueError, "memory_limit=%R: expected 0 (none) or at least 1 MiB",
			     v);
		return -1;
	}
	p->memory_limit = x;
	return 0;
}

static int set_tmpdir(shmkvpy_opts *p, PyObject *v)
{
	p->tmpdir = PyUnicode_AsUTF8(v);
	return p->tmpdir ? 0 : -1;
}

static int set_part(shmkvpy_opts *p, PyObject *v)
{
	if (!PyArg_ParseTuple(v, "KK;part: expected (k, n) with 1 <= k <= n", &p->part_k,
			      &p->part_n))
		return -1;
	if (p->part_k < 1 || p->part_k > p->part_n) {
		PyErr_Format(PyExc_ValueError, "part=%R: expected (k, n) with 1 <= k <= n", v);
		return -1;
	}
	return 0;
}

static int set_filter_part(shmkvpy_opts *p, PyObject *v)
{
	p->filter = v == Py_True;
	return 0;
}

static int set_type(shmkvpy_opts *p, PyObject *v)
{
	return shmkvpy_type_named(v, &p->type);
}

static int set_expires(shmkvpy_opts *p, PyObject *v)
{
	char why[200];
	if (shmkvpy_expiry_of(v, &p->expires, why, sizeof why) == 0)
		return 0;
	if (*why)
		PyErr_SetString(PyExc_ValueError, why);
	return -1;
}

static int set_tsv_expires(shmkvpy_opts *p, PyObject *v)
{
	p->o.tsv_expires = v == Py_True;
	return 0;
}

static int set_delta_of(shmkvpy_opts *p, PyObject *v)
{
	p->delta_of = PyUnicode_AsUTF8(v);
	return p->delta_of ? 0 : -1;
}

static int set_after(shmkvpy_opts *p, PyObject *v)
{
	p->after = PyUnicode_AsUTF8(v);
	return p->after ? 0 : -1;
}

static int set_tsv_removes(shmkvpy_opts *p, PyObject *v)
{
	p->o.tsv_removes = v == Py_True;
	return 0;
}

/* One row per option of shmkv/_options.py (tests/test_options.py compares
 * the two). A setter gets the value, never None: None leaves the
 * builder's default. */
static const struct {
	const char *name;
	int (*set)(shmkvpy_opts *p, PyObject *v);
} setters[] = {
	{"threads", set_threads},
	{"memory_limit", set_memory_limit},
	{"tmpdir", set_tmpdir},
	{"name", set_name},
	{"seed", set_seed},
	{"created", set_created},
	{"dedup", set_dedup},
	{"on_duplicate", set_on_duplicate},
	{"lossy_f32", set_lossy_f32},
	{"buckets", set_buckets},
	{"load_factor", set_load_factor},
	{"type", set_type},
	{"part", set_part},
	{"filter_part", set_filter_part},
	{"delta_of", set_delta_of},
	{"after", set_after},
	{"expires", set_expires},
	{"tsv_expires", set_tsv_expires},
	{"tsv_removes", set_tsv_removes},
};
#define NSETTERS (sizeof setters / sizeof setters[0])

PyObject *shmkvpy_option_names(void)
{
	PyObject *t = PyTuple_New((Py_ssize_t)NSETTERS);
	for (size_t i = 0; t && i < NSETTERS; i++) {
		PyObject *s = PyUnicode_FromString(setters[i].name);
		if (!s) {
			Py_CLEAR(t);
			break;
		}
		PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
	}
	return t;
}

int shmkvpy_parse_opts(PyObject *kw, shmkvpy_opts *p)
{
	memset(p, 0, sizeof *p);
	if (shmkv_build_options_init(&p->o) != 0) {
		PyErr_SetString(PyExc_ValueError, "SOURCE_DATE_EPOCH is malformed");
		return -1;
	}
	p->memory_limit = shmkv_build_default_memory_limit();
	PyObject *k, *v;
	Py_ssize_t pos = 0;
	while (kw && PyDict_Next(kw, &pos, &k, &v)) {
		const char *n = PyUnicode_AsUTF8(k);
		if (!n)
			return -1;
		size_t i = 0;
		while (i < NSETTERS && strcmp(n, setters[i].name))
			i++;
		if (i == NSETTERS) {
			PyErr_Format(PyExc_TypeError, "build option %R: the extension module has no "
				     "such option (shmkv/_options.py and src/options.c differ)", k);
			return -1;
		}
		if (v != Py_None && setters[i].set(p, v) < 0)
			return -1;
	}
	if (p->part_n && !(p->o.fixed & SHMKV_OPT_BUCKETS)) {
		PyErr_SetString(PyExc_ValueError, "part needs buckets=B, the same for every part "
				"and for the join");
		return -1;
	}
	if (p->filter && !p->part_n) {
		PyErr_SetString(PyExc_ValueError, "filter_part is for part=(k, n) builds");
		return -1;
	}
	if (p->after && !p->delta_of) {
		PyErr_SetString(PyExc_ValueError, "after names the delta this one follows: give "
				"delta_of=BASE too");
		return -1;
	}
	if (p->o.tsv_removes && !p->delta_of) {
		PyErr_SetString(PyExc_ValueError, "tsv_removes is for delta builds (delta_of=BASE): "
				"a plain image has nothing to remove");
		return -1;
	}
	if (p->delta_of && p->part_n) {
		PyErr_SetString(PyExc_ValueError, "delta_of and part exclude each other: a delta "
				"is built whole");
		return -1;
	}
	return 0;
}

int shmkvpy_type_named(PyObject *name, int *type)
{
	const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
	if (s && !strcmp(s, "str"))
		s = "string";
	for (unsigned t = 1; s && t <= SHMKV_TYPE_MAX; t++)
		if (!strcmp(s, shmkv_type_name(t))) {
			*type = (int)t;
			return 0;
		}
	PyErr_Clear();
	PyErr_Format(PyExc_ValueError, "type %R: expected one of bytes, string (str), i64, bool, "
		     "f64, f32list, f64list, i64list, strlist", name);
	return -1;
}

/* A datetime with a fraction of a second expires at the next whole second
 * (the entry is never served after the time given); a naive one is
 * refused: its zone would be a guess. */
int shmkvpy_expiry_of(PyObject *x, int64_t *t, char *why, size_t why_len)
{
	*why = 0;
	*t = 0;
	if (x == Py_None)
		return 0;
	if (!PyDateTimeAPI) {
		PyDateTime_IMPORT;
		if (!PyDateTimeAPI)
			return -1;
	}
	if (PyDateTime_Check(x)) {
		PyObject *tz = PyObject_GetAttrString(x, "tzinfo"), *off = NULL;
		if (tz && tz != Py_None)
			off = PyObject_CallMethod(x, "utcoffset", NULL);
		int naive = tz && (tz == Py_None || off == Py_None);
		Py_XDECREF(tz);
		Py_XDECREF(off);
		if (PyErr_Occurred())
			return -1;
		if (naive) {
			PyOS_snprintf(why, why_len, "expires: a naive datetime (no tzinfo): give an "
				      "aware one, e.g. datetime(..., tzinfo=timezone.utc)");
			return -1;
		}
		PyObject *ts = PyObject_CallMethod(x, "timestamp", NULL);
		if (!ts)
			return -1;
		double d = PyFloat_AsDouble(ts);
		Py_DECREF(ts);
		if (d == -1.0 && PyErr_Occurred())
			return -1;
		d = ceil(d);
		if (!(d >= 1 && d <= (double)SHMKV_BUILD_EXPIRES_MAX)) {
			PyOS_snprintf(why, why_len, "expires: %.0f is outside 1970-01-01T00:00:01Z.."
				      "2106-02-07T06:28:15Z (Unix seconds 1..%lld)", d,
				      (long long)SHMKV_BUILD_EXPIRES_MAX);
			return -1;
		}
		*t = (int64_t)d;
		return 0;
	}
	if (!PyLong_Check(x) || PyBool_Check(x)) {
		PyOS_snprintf(why, why_len, "expires: a %.60s: expected int Unix seconds, an aware "
			      "datetime or None", Py_TYPE(x)->tp_name);
		return -1;
	}
	int over = 0;
	long long v = PyLong_AsLongLongAndOverflow(x, &over);
	if (v == -1 && PyErr_Occurred())
		return -1;
	if (over || v < 1 || v > SHMKV_BUILD_EXPIRES_MAX) {
		PyObject *r = PyObject_Repr(x);
		PyOS_snprintf(why, why_len, "expires: %.40s is outside Unix seconds 1..%lld "
			      "(1970-01-01T00:00:01Z..2106-02-07T06:28:15Z)",
			      r ? PyUnicode_AsUTF8(r) : "?", (long long)SHMKV_BUILD_EXPIRES_MAX);
		Py_XDECREF(r);
		PyErr_Clear();
		return -1;
	}
	*t = v;
	return 0;
}
