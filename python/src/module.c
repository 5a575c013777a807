/* module.c - the shmkv._shmkv extension module: types, functions, errors
 * (the package shmkv/__init__.py re-exports them with docs and stubs). */
#include "options.h"

PyObject *shmkvpy_open(PyObject *self, PyObject *args, PyObject *kw);
PyObject *shmkvpy_attach(PyObject *self, PyObject *args, PyObject *kw);
PyObject *shmkvpy_set_cache_class(PyObject *self, PyObject *cls);

static PyObject *py_strerror(PyObject *self, PyObject *arg)
{
	(void)self;
	int err = PyLong_AsLong(arg) == -1 && PyErr_Occurred() ? 0 : (int)PyLong_AsLong(arg);
	if (PyErr_Occurred())
		return NULL;
	return Py_BuildValue("(ss)", shmkv_errname(err), shmkv_strerror(err));
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS
static PyMethodDef functions[] = {
	{"open", KW(shmkvpy_open), 
	 "open(path, *, verify=True, deep=False, populate=False, hugepages=False)\n"
	 "--\n"
	 "\n"
	 "open(path, *, verify=True, deep=False, populate=False, hugepages=False) -> Cache\n"
	 "\n"
	 "Maps the image file at path read-only and returns a Cache over it.\n"
	 "verify=False skips the section checksums (the header's is always checked;\n"
	 "every lookup stays bounds-checked), deep=True also walks the whole structure\n"
	 "(shmkv_verify), populate=True prefaults every page, hugepages=True backs an\n"
	 "image on tmpfs with huge pages (Linux 6.1+). Raises CorruptImage,\n"
	 "VersionMismatch or OSFailure (an OSError with .errno set, e.g. ENOENT).\n"},
	{"attach", KW(shmkvpy_attach), 
	 "attach(name, root=None, *, verify=False, deep=False)\n"
	 "--\n"
	 "\n"
	 "attach(name, root=None, *, verify=False, deep=False) -> Cache\n"
	 "\n"
	 "Attaches to the cache `name` served by shmkv-loader under root (else\n"
	 "$SHMKV_ROOT, else /run/shmkv): the generation published now. verify=True\n"
	 "checks every checksum at attach and refresh. Raises CacheNotFound (no such\n"
	 "cache), Unavailable (nothing published yet: try again), VersionMismatch,\n"
	 "CorruptImage, OSFailure. Call cache.refresh() to move to newer generations\n"
	 "(see RefreshEvery for a policy).\n"},
	{"_build", KW(shmkvpy_build), "_build(path, records, REMOVE, **options) -> dict"},
	{"_build_file", KW(shmkvpy_build_file), "_build_file(path, inputs, format, **options) -> dict"},
	{"_join", KW(shmkvpy_join), "_join(out, fragments, **options) -> dict"},
	{"_upgrade", KW(shmkvpy_upgrade), "_upgrade(old, new, **options) -> dict"},
	{"_diff", KW(shmkvpy_diff), "_diff(old, new, out, **options) -> dict"},
	{"_apply", KW(shmkvpy_apply), "_apply(base, deltas, out, as_delta, **options) -> dict"},
	{"part_of", KW(shmkvpy_part_of), 
	 "part_of(key, buckets, n, *, seed=DEFAULT_SEED, hash_bits=64)\n"
	 "--\n"
	 "\n"
	 "part_of(key, buckets, n, *, seed=DEFAULT_SEED, hash_bits=64) -> int\n"
	 "\n"
	 "The part (1..n) that holds key in an image of `buckets` buckets built in n\n"
	 "parts (lib/FORMAT.md section 14): build part k with\n"
	 "build(..., part=(k, n), buckets=buckets) from the records whose part_of is k,\n"
	 "then join() the n fragments in part order.\n"},
	{"_errname", (PyCFunction)py_strerror, METH_O, "_errname(code) -> (name, message)"},
	{"_set_cache_class", (PyCFunction)shmkvpy_set_cache_class, METH_O,
	 "_set_cache_class(cls)\n\nThe class open() and attach() return: shmkv.Cache, a "
	 "subclass of this module's Cache."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
	PyModuleDef_HEAD_INIT, "_shmkv", "shmkv's C extension (see the shmkv package).", -1,
	functions, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__shmkv(void)
{
	PyObject *m = PyModule_Create(&moduledef);
	if (!m)
		return NULL;
	if (PyType_Ready(&GenType) < 0 || PyType_Ready(&CacheType) < 0 ||
	    PyType_Ready(&ArrayType) < 0 || PyType_Ready(&CacheIterType) < 0 ||
	    PyModule_AddObjectRef(m, "Cache", (PyObject *)&CacheType) < 0 ||
	    PyModule_AddObjectRef(m, "Array", (PyObject *)&ArrayType) < 0 ||
	    PyModule_AddObjectRef(m, "CacheIterator", (PyObject *)&CacheIterType) < 0 ||
	    PyModule_AddIntConstant(m, "DEFAULT_SEED", (long long)SHMKV_DEFAULT_SEED) < 0 ||
	    shmkvpy_errors_init(m) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	PyObject *names = shmkvpy_option_names();
	int bad = !names || PyModule_AddObjectRef(m, "_BUILD_OPTIONS", names) < 0;
	Py_XDECREF(names);
	if (bad || PyModule_AddStringConstant(m, "VECTOR", shmkv_vector_name()) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
