/* build.c - shmkv.build, build_file, join, upgrade, diff, apply and
 * part_of over the builder's C API (builder/shmkv_build.h): the same code as
 * `shmctl image build`/`join`/`upgrade`/`diff`/`apply`, so the same records
 * and options give the same bytes. */
#include "options.h"

static PyObject *build_error(shmkv_builder *b, int err, const char *what)
{
	const char *msg = b ? shmkv_builder_error(b) : "";
	return shmkvpy_raise(err, what, *msg ? msg : NULL);
}

static shmkv_builder *new_builder(const shmkvpy_opts *p, const char *out)
{
	shmkv_builder *b = NULL;
	int err = shmkv_builder_new(&p->o, &b);
	if (err) {
		shmkvpy_raise(err, "build", "invalid options");
		return NULL;
	}
	if ((err = shmkv_builder_set_threads(b, p->threads)) ||
	    (err = shmkv_builder_set_memory_limit(b, p->memory_limit, p->tmpdir)) ||
	    (p->part_n && (err = shmkv_builder_set_part(b, p->part_k, p->part_n, p->filter))) ||
	    (err = shmkv_builder_check_output(b, out)) ||
	    /* after the output's check: the base and the delta followed are
	     * inputs, never replaced by the output */
	    (p->delta_of && (err = shmkv_builder_set_delta(b, p->delta_of, p->after)))) {
		build_error(b, err, out);
		shmkv_builder_free(b);
		return NULL;
	}
	return b;
}

static PyObject *stats_dict(const shmkv_build_stats *s)
{
	return Py_BuildValue("{sKsKsKsKsKsKsIsdsKsd}", "records", (unsigned long long)s->records,
			     "entries", (unsigned long long)s->entries, "duplicates",
			     (unsigned long long)s->duplicates, "tombstones",
			     (unsigned long long)s->tombstones, "image_bytes",
			     (unsigned long long)s->image_bytes, "bucket_count",
			     (unsigned long long)s->bucket_count, "max_probe",
			     (unsigned)s->max_probe, "load_factor", s->load_factor,
			     "dedup_saved_bytes", (unsigned long long)s->dedup_saved_bytes,
			     "seconds", s->seconds);
}

static PyObject *finish(shmkv_builder *b, const char *out)
{
	shmkv_build_stats st;
	int err;
	memset(&st, 0, sizeof st);
	Py_BEGIN_ALLOW_THREADS
	err = shmkv_builder_finish(b, out, &st);
	Py_END_ALLOW_THREADS
	PyObject *r = err ? build_error(b, err, out) : stats_dict(&st);
	shmkv_builder_free(b);
	return r;
}

/* ---- one record ---- */

typedef struct {
	size_t i;         /* index in the iterable */
	PyObject *key;
	char why[240];
} rec;

#define BAD(...) (PyOS_snprintf(r->why, sizeof r->why, __VA_ARGS__), -2)

static int is_int(PyObject *x)
{
	return PyLong_Check(x) && !PyBool_Check(x);
}

/* x as a double; an int must be exact (as the JSONL reader's rule) */
static int number(rec *r, PyObject *x, double *d, const char *type)
{
	if (PyFloat_Check(x)) {
		*d = PyFloat_AS_DOUBLE(x);
		return 0;
	}
	if (is_int(x)) {
		*d = PyLong_AsDouble(x);
		if (*d == -1.0 && PyErr_Occurred()) {
			PyErr_Clear();
			return BAD("an integer outside the %s range", type);
		}
		PyObject *back = PyLong_FromDouble(*d);
		int eq = back ? PyObject_RichCompareBool(back, x, Py_EQ) : -1;
		Py_XDECREF(back);
		if (eq < 0)
			return -1;
		return eq ? 0 : BAD("the integer %lld is not exact in %s: give it as a float",
				    PyLong_AsLongLong(x), type);
	}
	return BAD("%s holds numbers, not %.60s", type, Py_TYPE(x)->tp_name);
}

static int add_buffer_list(shmkv_builder *b, rec *r, const char *k, size_t kl, Py_buffer *v,
			   int type)
{
	if (v->ndim > 1)
		return BAD("a %d-dimensional array: give one list per record", v->ndim);
	size_t n = (size_t)(v->len / (v->itemsize ? v->itemsize : 1));
	switch (type) {
	case SHMKV_TYPE_F32LIST: return shmkv_builder_add_f32list(b, k, kl, v->buf, n);
	case SHMKV_TYPE_F64LIST: return shmkv_builder_add_f64list(b, k, kl, v->buf, n);
	case SHMKV_TYPE_I64LIST: return shmkv_builder_add_i64list(b, k, kl, v->buf, n);
	default: return shmkv_builder_add_bytes(b, k, kl, v->buf, (size_t)v->len);
	}
}

/* the list type a buffer's format means, 0 for bytes, -1 for none */
static int buffer_type(const Py_buffer *v)
{
	const char *f = v->format ? v->format : "B";
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	if (f[0] && f[1])
		return -1;
	switch (*f) {
	case 'f': return v->itemsize == 4 ? SHMKV_TYPE_F32LIST : -1;
	case 'd': return v->itemsize == 8 ? SHMKV_TYPE_F64LIST : -1;
	case 'q':
	case 'l': return v->itemsize == 8 ? SHMKV_TYPE_I64LIST : -1;
	case 'B':
	case 'b':
	case 'c': return 0;
	default: return -1;
	}
}

/* the type of a list's elements: strlist, i64list or f64list, or 0 */
static int infer_list(PyObject *seq)
{
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	PyObject **it = PySequence_Fast_ITEMS(seq);
	int strs = 0, ints = 0, floats = 0;
	for (Py_ssize_t i = 0; i < n; i++) {
		if (PyUnicode_Check(it[i]))
			strs++;
		else if (is_int(it[i]))
			ints++;
		else if (PyFloat_Check(it[i]))
			floats++;
		else
			return 0;
	}
	if (!n || (strs && strs != n))
		return 0;
	return strs ? SHMKV_TYPE_STRLIST : floats ? SHMKV_TYPE_F64LIST : SHMKV_TYPE_I64LIST;
}

static int add_seq_list(shmkv_builder *b, rec *r, const char *k, size_t kl, PyObject *seq,
			int type, int lossy)
{
	size_t n = (size_t)PySequence_Fast_GET_SIZE(seq);
	PyObject **it = PySequence_Fast_ITEMS(seq);
	size_t each = type == SHMKV_TYPE_F32LIST ? 4 : type == SHMKV_TYPE_STRLIST ? 2 * sizeof(void *) : 8;
	void *mem = PyMem_Malloc(n ? n * each : 1);
	if (!mem) {
		PyErr_NoMemory();
		return -1;
	}
	int err = 0;
	for (size_t i = 0; i < n && !err; i++) {
		PyObject *x = it[i];
		double d;
		if (type == SHMKV_TYPE_STRLIST) {
			Py_ssize_t len;
			const char *s = PyUnicode_Check(x) ? PyUnicode_AsUTF8AndSize(x, &len) : NULL;
			if (!s)
				err = PyErr_Occurred() ? -1 : BAD("strlist element %zu is a %.60s, "
								  "not a str", i, Py_TYPE(x)->tp_name);
			((const char **)mem)[i] = s;
			((size_t *)((const char **)mem + n))[i] = (size_t)len;
		} else if (type == SHMKV_TYPE_I64LIST) {
			if (!is_int(x))
				err = BAD("i64list element %zu is a %.60s, not an int", i,
					  Py_TYPE(x)->tp_name);
			else if ((((int64_t *)mem)[i] = PyLong_AsLongLong(x)) == -1 && PyErr_Occurred()) {
				PyErr_Clear();
				err = BAD("i64list element %zu is outside the i64 range", i);
			}
		} else if ((err = number(r, x, &d, shmkv_type_name((unsigned)type))) == 0) {
			if (type == SHMKV_TYPE_F64LIST) {
				((double *)mem)[i] = d;
			} else {
				float f = (float)d;
				if (!lossy && (double)f != d && !isnan(d))
					err = BAD("f32list element %zu, %.17g, is not exact in f32 "
						  "(lossy_f32=True rounds it)", i, d);
				((float *)mem)[i] = f;
			}
		}
	}
	if (!err) {
		switch (type) {
		case SHMKV_TYPE_F32LIST: err = shmkv_builder_add_f32list(b, k, kl, mem, n); break;
		case SHMKV_TYPE_F64LIST: err = shmkv_builder_add_f64list(b, k, kl, mem, n); break;
		case SHMKV_TYPE_I64LIST: err = shmkv_builder_add_i64list(b, k, kl, mem, n); break;
		default:
			err = shmkv_builder_add_strlist(b, k, kl, (const char *const *)mem,
							(const size_t *)((const char **)mem + n), n);
		}
	}
	PyMem_Free(mem);
	return err;
}

static int add_value(shmkv_builder *b, rec *r, const char *k, size_t kl, PyObject *v, int type,
		     int lossy);

/* numpy scalars (numpy.int64, numpy.float32, ...): as the int or float they are */
static int add_number(shmkv_builder *b, rec *r, const char *k, size_t kl, PyObject *v, int lossy)
{
	PyObject *x = PyIndex_Check(v) ? PyNumber_Index(v) : PyNumber_Float(v);
	if (!x)
		return -1;
	int err = add_value(b, r, k, kl, x, 0, lossy);
	Py_DECREF(x);
	return err;
}

/* Adds value v under key k; type 0 infers it. Returns 0, -1 (a Python
 * exception), -2 (r->why says why) or a builder error code. */
static int add_value(shmkv_builder *b, rec *r, const char *k, size_t kl, PyObject *v, int type,
		     int lossy)
{
	if (!type) {
		if (PyBool_Check(v))
			type = SHMKV_TYPE_BOOL;
		else if (PyLong_Check(v))
			type = SHMKV_TYPE_I64;
		else if (PyFloat_Check(v))
			type = SHMKV_TYPE_F64;
		else if (PyUnicode_Check(v))
			type = SHMKV_TYPE_STRING;
		else if (PyObject_CheckBuffer(v)) {
			Py_buffer view;
			if (PyObject_GetBuffer(v, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
				return -1;
			int t = buffer_type(&view), err;
			if (view.ndim == 0) { /* a numpy scalar: a number, not a list */
				PyBuffer_Release(&view);
				return add_number(b, r, k, kl, v, lossy);
			}
			err = t < 0 ? BAD("an array of format '%s': give float32, float64, int64 or "
					  "bytes", view.format ? view.format : "?")
				    : add_buffer_list(b, r, k, kl, &view, t);
			PyBuffer_Release(&view);
			return err;
		} else if (PyList_Check(v) || PyTuple_Check(v)) {
			PyObject *seq = PySequence_Fast(v, "");
			if (!seq)
				return -1;
			type = infer_list(seq);
			int err = type ? add_seq_list(b, r, k, kl, seq, type, lossy)
				       : BAD("a list that is empty or mixes kinds (strings, numbers, "
					     "others): give a type");
			Py_DECREF(seq);
			return err;
		} else if (PyIndex_Check(v) || (Py_TYPE(v)->tp_as_number &&
						Py_TYPE(v)->tp_as_number->nb_float)) {
			return add_number(b, r, k, kl, v, lossy);
		} else {
			return BAD("a value of type %.60s: expected str, bytes, int, float, bool, "
				   "a list of them or a numeric array", Py_TYPE(v)->tp_name);
		}
	}
	const char *tn = shmkv_type_name((unsigned)type);
	switch (type) {
	case SHMKV_TYPE_STRING: {
		Py_ssize_t len;
		const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8AndSize(v, &len) : NULL;
		if (!s)
			return PyErr_Occurred() ? -1 : BAD("a %.60s for a string", Py_TYPE(v)->tp_name);
		return shmkv_builder_add_str(b, k, kl, s, (size_t)len);
	}
	case SHMKV_TYPE_BOOL:
		if (!PyBool_Check(v))
			return BAD("a %.60s for a bool", Py_TYPE(v)->tp_name);
		return shmkv_builder_add_bool(b, k, kl, v == Py_True);
	case SHMKV_TYPE_I64: {
		if (!is_int(v))
			return BAD("a %.60s for an i64", Py_TYPE(v)->tp_name);
		long long x = PyLong_AsLongLong(v);
		if (x == -1 && PyErr_Occurred()) {
			PyErr_Clear();
			return BAD("an integer outside the i64 range");
		}
		return shmkv_builder_add_i64(b, k, kl, x);
	}
	case SHMKV_TYPE_F64: {
		double d;
		int err = number(r, v, &d, tn);
		return err ? err : shmkv_builder_add_f64(b, k, kl, d);
	}
	case SHMKV_TYPE_BYTES:
	case SHMKV_TYPE_F32LIST:
	case SHMKV_TYPE_F64LIST:
	case SHMKV_TYPE_I64LIST:
	case SHMKV_TYPE_STRLIST:
		if (PyObject_CheckBuffer(v) && !PyUnicode_Check(v)) {
			Py_buffer view;
			if (PyObject_GetBuffer(v, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
				return -1;
			int t = buffer_type(&view), err;
			if (t != type && !(type == SHMKV_TYPE_BYTES && t == 0) &&
			    type != SHMKV_TYPE_BYTES && view.ndim == 1 &&
			    PyObject_HasAttrString(v, "tolist")) {
				/* an array of another element type (numpy float64 for an
				 * f32list): element by element, without loss */
				PyBuffer_Release(&view);
				PyObject *l = PyObject_CallMethod(v, "tolist", NULL);
				if (!l)
					return -1;
				err = PyList_Check(l) ? add_value(b, r, k, kl, l, type, lossy)
						      : BAD("an array of another type for a %s", tn);
				Py_DECREF(l);
				return err;
			}
			err = t == type || (type == SHMKV_TYPE_BYTES && t == 0)
				      ? add_buffer_list(b, r, k, kl, &view, type)
				      : BAD("an array of format '%s' for a %s",
					    view.format ? view.format : "?", tn);
			PyBuffer_Release(&view);
			return err;
		}
		if (type != SHMKV_TYPE_BYTES && (PyList_Check(v) || PyTuple_Check(v))) {
			PyObject *seq = PySequence_Fast(v, "");
			if (!seq)
				return -1;
			int err = add_seq_list(b, r, k, kl, seq, type, lossy);
			Py_DECREF(seq);
			return err;
		}
		return BAD("a %.60s for a %s", Py_TYPE(v)->tp_name, tn);
	default:
		return BAD("type %s is not supported", tn);
	}
}

static PyObject *record_error(shmkv_builder *b, rec *r, int err)
{
	char what[64];
	PyOS_snprintf(what, sizeof what, "record #%zu (index %zu)", r->i + 1, r->i);
	if (err == -2)
		err = SHMKV_EINPUT;
	else if (err != -1) {
		const char *m = shmkv_builder_error(b), *c = strstr(m, ": ");
		if (!strncmp(m, "record #", 8) && c) /* the builder's own place: said above */
			m = c + 2;
		PyOS_snprintf(r->why, sizeof r->why, "%s", m);
	}
	if (err == -1) { /* a Python exception: name the record in it */
		PyObject *t, *v, *tb;
		PyErr_Fetch(&t, &v, &tb);
		PyErr_NormalizeException(&t, &v, &tb);
		PyOS_snprintf(r->why, sizeof r->why, "%s", "");
		PyObject *s = v ? PyObject_Str(v) : NULL;
		const char *c = s ? PyUnicode_AsUTF8(s) : NULL;
		PyOS_snprintf(r->why, sizeof r->why, "%.60s: %s", ((PyTypeObject *)t)->tp_name,
			      c ? c : "?");
		Py_XDECREF(s);
		Py_XDECREF(t);
		Py_XDECREF(v);
		Py_XDECREF(tb);
		PyErr_Clear();
		err = SHMKV_EINPUT;
	}
	shmkvpy_raise(err, what, r->why);
	PyObject *t, *v, *tb;
	PyErr_Fetch(&t, &v, &tb);
	PyObject *ix = PyLong_FromSize_t(r->i);
	if (v && ix)
		PyObject_SetAttrString(v, "index", ix);
	Py_XDECREF(ix);
	PyErr_Restore(t, v, tb);
	return NULL;
}

/* A delta's tombstone (lib/FORMAT.md §19.2): key removed. */
static int remove_key(shmkv_builder *b, rec *r, PyObject *key)
{
	const char *k;
	Py_ssize_t kl;
	Py_buffer kv;
	if (!PyUnicode_Check(key) && !PyObject_CheckBuffer(key))
		return BAD("a key is str or bytes-like, not %.60s", Py_TYPE(key)->tp_name);
	Py_INCREF(key);
	int err = shmkvpy_key(key, &k, &kl, &kv) < 0 ? -1 : 0;
	if (!err) {
		err = shmkv_builder_remove(b, k, (size_t)kl);
		shmkvpy_key_release(&kv);
	}
	Py_DECREF(key);
	return err;
}

/* one record of the iterable: (key, value), (key, value, type),
 * (key, value, type, expires) or a dict with "key", "value" and optional
 * "type" and "expires"; a removal (delta builds) is (key, REMOVE) or
 * {"key": key, "remove": True}; dexp is expires= (the expiry of a record
 * that gives none), *cur the expiry the builder is set to now; removal is
 * the package's shmkv.REMOVE */
static int add_record(shmkv_builder *b, rec *r, PyObject *item, int dtype, int lossy,
		      int64_t dexp, int64_t *cur, PyObject *removal)
{
	PyObject *key = NULL, *val = NULL, *tname = NULL, *exp = NULL;
	if (PyDict_Check(item)) {
		key = PyDict_GetItemString(item, "key");
		val = PyDict_GetItemString(item, "value");
		tname = PyDict_GetItemString(item, "type");
		exp = PyDict_GetItemString(item, "expires");
		PyObject *rm = PyDict_GetItemString(item, "remove");
		if (rm && !PyBool_Check(rm))
			return BAD("'remove' is True or False, not a %.60s", Py_TYPE(rm)->tp_name);
		if (rm == Py_True) {
			if (!key)
				return BAD("a removal needs 'key'");
			if (val || tname || exp)
				return BAD("a removal ('remove': True) has no '%s': give the key "
					   "alone, or drop 'remove' to set a value",
					   val ? "value" : tname ? "type" : "expires");
			return remove_key(b, r, key);
		}
		if (!key || !val)
			return BAD("a dict record needs 'key' and 'value'");
	} else if (PyTuple_Check(item) || PyList_Check(item)) {
		Py_ssize_t n = PySequence_Size(item);
		if (n < 2 || n > 4)
			return BAD("a record is (key, value), (key, value, type) or (key, value, "
				   "type, expires), not %zd items", n);
		PyObject **it = PySequence_Fast_ITEMS(item);
		key = it[0];
		val = it[1];
		tname = n >= 3 ? it[2] : NULL;
		exp = n == 4 ? it[3] : NULL;
	} else {
		return BAD("a record is a (key, value) pair or a dict, not a %.60s",
			   Py_TYPE(item)->tp_name);
	}
	if (val == removal) {
		if ((tname && tname != Py_None) || (exp && exp != Py_None))
			return BAD("a removal (shmkv.REMOVE) has no type or expiry");
		return remove_key(b, r, key);
	}
	int type = dtype;
	if (tname && tname != Py_None && shmkvpy_type_named(tname, &type) < 0) {
		PyErr_Clear();
		return BAD("type %.40s is not a value type", PyUnicode_Check(tname)
			   ? PyUnicode_AsUTF8(tname) : Py_TYPE(tname)->tp_name);
	}
	int64_t t = dexp;
	if (exp && shmkvpy_expiry_of(exp, &t, r->why, sizeof r->why) < 0)
		return *r->why ? -2 : -1;
	if (t != *cur) { /* the builder's expiry is sticky: set it on a change only */
		int e = shmkv_builder_set_expires(b, t);
		if (e)
			return e;
		*cur = t;
	}
	const char *k;
	Py_ssize_t kl;
	Py_buffer kv;
	if (!PyUnicode_Check(key) && !PyObject_CheckBuffer(key))
		return BAD("a key is str or bytes-like, not %.60s", Py_TYPE(key)->tp_name);
	/* own references: converting the value may run Python code (__float__,
	 * tolist) that changes a list or dict record, freeing what it held */
	Py_INCREF(key);
	Py_INCREF(val);
	int err = shmkvpy_key(key, &k, &kl, &kv) < 0 ? -1 : 0;
	if (!err) {
		r->key = key;
		err = add_value(b, r, k, (size_t)kl, val, type, lossy);
		shmkvpy_key_release(&kv);
		r->key = NULL;
	}
	Py_DECREF(key);
	Py_DECREF(val);
	return err;
}

PyObject *shmkvpy_build(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	PyObject *pathobj, *records, *removal, *pathb;
	if (!PyArg_ParseTuple(args, "OOO:build", &pathobj, &records, &removal))
		return NULL;
	shmkvpy_opts p;
	if (shmkvpy_parse_opts(kw, &p) < 0 || !PyUnicode_FSConverter(pathobj, &pathb))
		return NULL;
	const char *out = PyBytes_AS_STRING(pathb);
	PyObject *it = PyObject_GetIter(records), *result = NULL;
	shmkv_builder *b = it ? new_builder(&p, out) : NULL;
	if (b) {
		rec r = {0};
		PyObject *item;
		int err = 0;
		int64_t cur = 0;
		for (; (item = PyIter_Next(it)) != NULL; r.i++) {
			err = add_record(b, &r, item, p.type, p.o.lossy_f32, p.expires, &cur,
					 removal);
			Py_DECREF(item);
			if (err) {
				record_error(b, &r, err);
				break;
			}
		}
		if (!err && !PyErr_Occurred())
			result = finish(b, out);
		else
			shmkv_builder_free(b); /* nothing was written */
	}
	Py_XDECREF(it);
	Py_DECREF(pathb);
	return result;
}

PyObject *shmkvpy_build_file(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	PyObject *pathobj, *inputs, *pathb;
	const char *fmt = NULL;
	if (!PyArg_ParseTuple(args, "OOz:build_file", &pathobj, &inputs, &fmt))
		return NULL;
	if (fmt && strcmp(fmt, "jsonl") && strcmp(fmt, "tsv")) {
		PyErr_Format(PyExc_ValueError, "format %s: expected 'jsonl' or 'tsv'", fmt);
		return NULL;
	}
	shmkvpy_opts p;
	if (shmkvpy_parse_opts(kw, &p) < 0)
		return NULL;
	if (!PyUnicode_FSConverter(pathobj, &pathb))
		return NULL;
	if (PyList_Check(inputs) || PyTuple_Check(inputs))
		Py_INCREF(inputs);
	else
		inputs = Py_BuildValue("(O)", inputs); /* one path */
	const char *out = PyBytes_AS_STRING(pathb);
	PyObject *result = NULL;
	shmkv_builder *b = inputs ? new_builder(&p, out) : NULL;
	Py_ssize_t n = b ? PySequence_Size(inputs) : 0;
	int err = 0;
	for (Py_ssize_t i = 0; b && i < n && !err; i++) {
		PyObject *in = PySequence_GetItem(inputs, i), *inb = NULL;
		if (!in || !PyUnicode_FSConverter(in, &inb)) {
			Py_XDECREF(in);
			err = -1;
			break;
		}
		const char *ip = PyBytes_AS_STRING(inb);
		size_t il = strlen(ip);
		int f = fmt ? (strcmp(fmt, "tsv") ? SHMKV_INPUT_JSONL : SHMKV_INPUT_TSV)
			    : (il > 4 && !strcmp(ip + il - 4, ".tsv")) ? SHMKV_INPUT_TSV : SHMKV_INPUT_JSONL;
		unsigned tsv_type = p.type ? (unsigned)p.type : SHMKV_TYPE_STRING;
		Py_BEGIN_ALLOW_THREADS
		err = shmkv_builder_add_file(b, ip, f, tsv_type);
		Py_END_ALLOW_THREADS
		if (err)
			build_error(b, err, ip);
		Py_DECREF(inb);
		Py_DECREF(in);
	}
	if (b && !err)
		result = finish(b, out);
	else if (b)
		shmkv_builder_free(b);
	Py_XDECREF(inputs);
	Py_DECREF(pathb);
	return result;
}

/* ---- join: shmkv_build_join() (builder/join.cc), as `shmctl image join` ---- */

/* The join options (threads, memory_limit, tmpdir) of kw's build options;
 * -1 with an exception set. jo->tmpdir points into kw. */
static int join_options(PyObject *kw, shmkv_join_options *jo)
{
	shmkvpy_opts p;
	if (shmkvpy_parse_opts(kw, &p) < 0)
		return -1;
	shmkv_join_options_init(jo);
	jo->threads = p.threads;
	jo->memory_limit = p.memory_limit;
	jo->tmpdir = p.tmpdir;
	return 0;
}

/* The paths of seq (a PySequence_Fast) as file-system bytes: *owned holds
 * their references (free with free_paths), *paths their strings. -1 with
 * an exception set. */
static int fs_paths(PyObject *seq, PyObject ***owned, const char ***paths)
{
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	*owned = PyMem_Calloc(n ? (size_t)n : 1, sizeof **owned);
	*paths = PyMem_Calloc(n ? (size_t)n : 1, sizeof **paths);
	if (!*owned || !*paths) {
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t j = 0; j < n; j++) {
		if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, j), &(*owned)[j]))
			return -1;
		(*paths)[j] = PyBytes_AS_STRING((*owned)[j]);
	}
	return 0;
}

static void free_paths(Py_ssize_t n, PyObject **owned, const char **paths)
{
	for (Py_ssize_t j = 0; owned && j < n; j++)
		Py_XDECREF(owned[j]);
	PyMem_Free(owned);
	PyMem_Free(paths);
}

PyObject *shmkvpy_join(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	PyObject *outobj, *frags, *outb;
	shmkv_join_options jo;
	if (!PyArg_ParseTuple(args, "OO:join", &outobj, &frags) || join_options(kw, &jo) < 0)
		return NULL;
	PyObject *seq = PySequence_Fast(frags, "join: fragments must be a sequence of paths");
	if (!seq)
		return NULL;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	if (n < 1) {
		Py_DECREF(seq);
		PyErr_SetString(PyExc_ValueError, "join: no fragment given");
		return NULL;
	}
	if (!PyUnicode_FSConverter(outobj, &outb)) {
		Py_DECREF(seq);
		return NULL;
	}
	PyObject **pb = NULL, *result = NULL;
	const char **paths = NULL;
	if (fs_paths(seq, &pb, &paths) == 0) {
		const char *out = PyBytes_AS_STRING(outb);
		char why[2048] = "";
		shmkv_build_stats st;
		memset(&st, 0, sizeof st);
		int err;
		Py_BEGIN_ALLOW_THREADS
		err = shmkv_build_join(out, paths, (size_t)n, &jo, &st, why, sizeof why);
		Py_END_ALLOW_THREADS
		result = err ? shmkvpy_raise(err, "join", why) : stats_dict(&st);
	}
	free_paths(n, pb, paths);
	Py_DECREF(outb);
	Py_DECREF(seq);
	return result;
}

/* ---- upgrade: shmkv_build_upgrade() (builder/), as `shmctl image upgrade` ---- */

PyObject *shmkvpy_upgrade(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	PyObject *oldobj, *newobj, *oldb = NULL, *newb = NULL, *result = NULL;
	shmkv_join_options jo;
	if (!PyArg_ParseTuple(args, "OO:upgrade", &oldobj, &newobj) || join_options(kw, &jo) < 0)
		return NULL;
	if (PyUnicode_FSConverter(oldobj, &oldb) && PyUnicode_FSConverter(newobj, &newb)) {
		char why[2048] = "";
		shmkv_build_stats st;
		memset(&st, 0, sizeof st);
		int err;
		Py_BEGIN_ALLOW_THREADS
		err = shmkv_build_upgrade(PyBytes_AS_STRING(newb), PyBytes_AS_STRING(oldb), &jo, &st,
					  why, sizeof why);
		Py_END_ALLOW_THREADS
		result = err ? shmkvpy_raise(err, "upgrade", why) : stats_dict(&st);
	}
	Py_XDECREF(oldb);
	Py_XDECREF(newb);
	return result;
}

/* ---- diff and apply: shmkv_build_diff() and shmkv_build_apply()
 * (builder/diff.cc, apply.cc), as `shmctl image diff` and `image apply` ---- */

PyObject *shmkvpy_diff(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	PyObject *oldobj, *newobj, *outobj, *oldb = NULL, *newb = NULL, *outb = NULL;
	PyObject *result = NULL;
	shmkv_join_options jo;
	if (!PyArg_ParseTuple(args, "OOO:diff", &oldobj, &newobj, &outobj) ||
	    join_options(kw, &jo) < 0)
		return NULL;
	if (PyUnicode_FSConverter(oldobj, &oldb) && PyUnicode_FSConverter(newobj, &newb) &&
	    PyUnicode_FSConverter(outobj, &outb)) {
		char why[2048] = "";
		shmkv_build_stats st;
		memset(&st, 0, sizeof st);
		int err;
		Py_BEGIN_ALLOW_THREADS
		err = shmkv_build_diff(PyBytes_AS_STRING(outb), PyBytes_AS_STRING(oldb),
				       PyBytes_AS_STRING(newb), &jo, &st, why, sizeof why);
		Py_END_ALLOW_THREADS
		result = err ? shmkvpy_raise(err, "diff", why) : stats_dict(&st);
	}
	Py_XDECREF(oldb);
	Py_XDECREF(newb);
	Py_XDECREF(outb);
	return result;
}

PyObject *shmkvpy_apply(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	PyObject *baseobj, *deltas, *outobj, *baseb = NULL, *outb = NULL, *result = NULL;
	int as_delta;
	shmkv_join_options jo;
	if (!PyArg_ParseTuple(args, "OOOp:apply", &baseobj, &deltas, &outobj, &as_delta) ||
	    join_options(kw, &jo) < 0)
		return NULL;
	PyObject *seq = PySequence_Fast(deltas, "apply: deltas must be a sequence of paths");
	if (!seq)
		return NULL;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	PyObject **pb = NULL;
	const char **paths = NULL;
	if (n < 1)
		PyErr_SetString(PyExc_ValueError, "apply: no delta given");
	else if (PyUnicode_FSConverter(baseobj, &baseb) && PyUnicode_FSConverter(outobj, &outb) &&
		 fs_paths(seq, &pb, &paths) == 0) {
		char why[2048] = "";
		shmkv_build_stats st;
		memset(&st, 0, sizeof st);
		int err;
		Py_BEGIN_ALLOW_THREADS
		err = shmkv_build_apply(PyBytes_AS_STRING(outb), PyBytes_AS_STRING(baseb), paths,
					(size_t)n, as_delta, &jo, &st, why, sizeof why);
		Py_END_ALLOW_THREADS
		result = err ? shmkvpy_raise(err, "apply", why) : stats_dict(&st);
	}
	free_paths(n, pb, paths);
	Py_XDECREF(baseb);
	Py_XDECREF(outb);
	Py_DECREF(seq);
	return result;
}

PyObject *shmkvpy_part_of(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	static char *names[] = {"key", "buckets", "n", "seed", "hash_bits", NULL};
	PyObject *key;
	unsigned long long buckets, n, seed = SHMKV_DEFAULT_SEED;
	unsigned hash_bits = 64;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OKK|$KI:part_of", names, &key, &buckets, &n,
					 &seed, &hash_bits))
		return NULL;
	if (buckets < 1 || n < 1 || hash_bits < 1 || hash_bits > 64) {
		PyErr_SetString(PyExc_ValueError,
				"part_of: needs buckets >= 1, n >= 1 and 1 <= hash_bits <= 64");
		return NULL;
	}
	const char *p;
	Py_ssize_t len;
	Py_buffer view;
	if (shmkvpy_key(key, &p, &len, &view) < 0)
		return NULL;
	uint64_t bk = shmkv_home_bucket(shmkv_key_hash(seed, hash_bits, p, (size_t)len), buckets);
	shmkvpy_key_release(&view);
	return PyLong_FromUnsignedLongLong(shmkv_build_part_of(bk, n, buckets));
}
