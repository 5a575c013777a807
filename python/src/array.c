/* array.c - shmkv.Array: a read-only, zero-copy numeric list (f32, f64 or
 * i64) lying in the image's mapping, with the buffer protocol (memoryview,
 * numpy.asarray share its memory). It holds a reference to its generation
 * (Gen), which stays mapped while any Array or buffer view of it lives. */
#include "shmkvpy.h"

PyObject *shmkvpy_array_new(GenObject *owner, int type, const void *data, size_t n)
{
	ArrayObject *a = PyObject_New(ArrayObject, &ArrayType);
	if (!a)
		return NULL;
	a->owner = (PyObject *)owner;
	Py_XINCREF(owner);
	a->data = data;
	a->n = (Py_ssize_t)n;
	a->type = type;
	a->exports = 0;
	a->fmt[1] = 0;
	switch (type) {
	case SHMKV_TYPE_F32LIST: a->fmt[0] = 'f'; a->itemsize = 4; break;
	case SHMKV_TYPE_F64LIST: a->fmt[0] = 'd'; a->itemsize = 8; break;
	default: a->fmt[0] = 'q'; a->itemsize = 8; break;
	}
	return (PyObject *)a;
}

static void array_dealloc(ArrayObject *a)
{
	Py_XDECREF(a->owner);
	PyObject_Free(a);
}

static int array_getbuffer(ArrayObject *a, Py_buffer *view, int flags)
{
	if (flags & PyBUF_WRITABLE) {
		PyErr_SetString(PyExc_BufferError, "shmkv.Array is read-only (it lies in the "
				"image's read-only mapping): copy it to write, e.g. numpy.array(v)");
		view->obj = NULL;
		return -1;
	}
	view->buf = (void *)a->data;
	view->obj = Py_NewRef((PyObject *)a);
	view->len = a->n * a->itemsize;
	view->readonly = 1;
	view->itemsize = a->itemsize;
	view->format = (flags & PyBUF_FORMAT) ? a->fmt : NULL;
	view->ndim = 1;
	view->shape = (flags & PyBUF_ND) ? &a->n : NULL;
	view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? &a->itemsize : NULL;
	view->suboffsets = NULL;
	view->internal = NULL;
	a->exports++;
	return 0;
}

static void array_releasebuffer(ArrayObject *a, Py_buffer *view)
{
	(void)view;
	a->exports--;
}

static Py_ssize_t array_len(ArrayObject *a)
{
	return a->n;
}

static PyObject *item(const ArrayObject *a, Py_ssize_t i)
{
	switch (a->type) {
	case SHMKV_TYPE_F32LIST: return PyFloat_FromDouble(((const float *)a->data)[i]);
	case SHMKV_TYPE_F64LIST: return PyFloat_FromDouble(((const double *)a->data)[i]);
	default: return PyLong_FromLongLong(((const int64_t *)a->data)[i]);
	}
}

static PyObject *array_item(ArrayObject *a, Py_ssize_t i)
{
	if (i < 0 || i >= a->n) {
		PyErr_SetString(PyExc_IndexError, "shmkv.Array index out of range");
		return NULL;
	}
	return item(a, i);
}

static PyObject *array_tolist(ArrayObject *a, PyObject *unused)
{
	(void)unused;
	PyObject *l = PyList_New(a->n);
	for (Py_ssize_t i = 0; l && i < a->n; i++) {
		PyObject *x = item(a, i);
		if (!x) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, i, x);
	}
	return l;
}

static PyObject *array_repr(ArrayObject *a)
{
	PyObject *l = array_tolist(a, NULL);
	if (!l)
		return NULL;
	PyObject *r = PyUnicode_FromFormat("shmkv.Array('%s', %R)", a->fmt, l);
	Py_DECREF(l);
	return r;
}

static PyObject *array_richcompare(ArrayObject *a, PyObject *other, int op)
{
	if (op != Py_EQ && op != Py_NE)
		Py_RETURN_NOTIMPLEMENTED;
	PyObject *l = array_tolist(a, NULL);
	if (!l)
		return NULL;
	PyObject *o = PyObject_TypeCheck(other, &ArrayType)
			      ? array_tolist((ArrayObject *)other, NULL)
			      : Py_NewRef(other);
	PyObject *r = o ? PyObject_RichCompare(l, o, op) : NULL;
	Py_DECREF(l);
	Py_XDECREF(o);
	return r;
}

static PyObject *get_typecode(ArrayObject *a, void *c)
{
	(void)c;
	return PyUnicode_FromString(a->fmt);
}

static PyObject *get_type(ArrayObject *a, void *c)
{
	(void)c;
	return PyUnicode_FromString(shmkv_type_name((unsigned)a->type));
}

static PyObject *get_itemsize(ArrayObject *a, void *c)
{
	(void)c;
	return PyLong_FromSsize_t(a->itemsize);
}

static PyObject *get_nbytes(ArrayObject *a, void *c)
{
	(void)c;
	return PyLong_FromSsize_t(a->n * a->itemsize);
}

static PyObject *get_address(ArrayObject *a, void *c)
{
	(void)c;
	return PyLong_FromVoidPtr((void *)a->data);
}

static PyGetSetDef array_getset[] = {
	{"typecode", (getter)get_typecode, NULL,
	 "The struct/array module type code: 'f' (f32list), 'd' (f64list), 'q' (i64list).", NULL},
	{"type", (getter)get_type, NULL, "The image's type name: 'f32list', 'f64list' or 'i64list'.",
	 NULL},
	{"itemsize", (getter)get_itemsize, NULL, "Bytes per element (4 or 8).", NULL},
	{"nbytes", (getter)get_nbytes, NULL, "Bytes of the list (len * itemsize).", NULL},
	{"address", (getter)get_address, NULL,
	 "Address of the first element, inside the image's mapping (Cache.mapping).", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef array_methods[] = {
	{"tolist", (PyCFunction)array_tolist, METH_NOARGS,
	 "tolist() -> list\n\nA copy as a Python list of float (f32list, f64list) or int (i64list)."},
	{"__class_getitem__", Py_GenericAlias, METH_O | METH_CLASS,
	 "Array[float] (f32list, f64list) and Array[int] (i64list), for annotations."},
	{NULL, NULL, 0, NULL},
};

static PySequenceMethods array_as_sequence = {
	.sq_length = (lenfunc)array_len,
	.sq_item = (ssizeargfunc)array_item,
};

static PyBufferProcs array_as_buffer = {
	.bf_getbuffer = (getbufferproc)array_getbuffer,
	.bf_releasebuffer = (releasebufferproc)array_releasebuffer,
};

PyTypeObject ArrayType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "shmkv.Array",
	.tp_basicsize = sizeof(ArrayObject),
	.tp_dealloc = (destructor)array_dealloc,
	.tp_repr = (reprfunc)array_repr,
	.tp_as_sequence = &array_as_sequence,
	.tp_as_buffer = &array_as_buffer,
	.tp_richcompare = (richcmpfunc)array_richcompare,
	.tp_hash = PyObject_HashNotImplemented,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_SEQUENCE,
	.tp_doc = "A numeric list value (f32list, f64list, i64list) read in place: read-only,\n"
		  "zero-copy, with the buffer protocol. memoryview(v) and numpy.asarray(v)\n"
		  "share the image's memory; the generation it lies in stays mapped while\n"
		  "the Array (or any view of it) is alive, across Cache.refresh() and\n"
		  "Cache.close(). len(v), v[i], iteration and v.tolist() read elements;\n"
		  "v == [..] compares by value.",
	.tp_methods = array_methods,
	.tp_getset = array_getset,
};
