/* errors.c - the exception hierarchy (python/README.md, "Errors"): one class
 * per kind of failure, each instance carrying the code (.code), its name
 * (.errname, shmkv_errname) and the message (.reason: the reader's or
 * builder's diagnostic, else shmkv_strerror). */
#include "shmkvpy.h"

PyObject *shmkvpy_Error;
static PyObject *NotFound, *KeyTooLong, *VersionMismatch, *CacheNotFound,
	*Unavailable, *StaleCache, *DuplicateKey, *OSFailure, *DeltaMismatch;
PyObject *shmkvpy_TypeMismatch, *shmkvpy_BuildError, *shmkvpy_CorruptImage;

static PyObject *new_class(PyObject *m, const char *name, PyObject *bases, int code,
			   const char *doc)
{
	char full[64];
	snprintf(full, sizeof full, "shmkv.%s", name);
	PyObject *dict = Py_BuildValue("{s:O}", "__module__", Py_None);
	if (!dict)
		return NULL;
	PyObject *c = code ? PyLong_FromLong(code) : Py_NewRef(Py_None);
	PyObject *n = PyUnicode_FromString(code ? shmkv_errname(code) : "");
	PyObject *r = PyUnicode_FromString(code ? shmkv_strerror(code) : "");
	int bad = !c || !n || !r || PyDict_SetItemString(dict, "code", c) ||
		  PyDict_SetItemString(dict, "errname", code ? n : Py_None) ||
		  PyDict_SetItemString(dict, "reason", code ? r : Py_None);
	Py_XDECREF(c);
	Py_XDECREF(n);
	Py_XDECREF(r);
	PyDict_DelItemString(dict, "__module__");
	PyObject *cls = bad ? NULL : PyErr_NewExceptionWithDoc(full, doc, bases, dict);
	Py_DECREF(dict);
	if (cls && PyModule_AddObjectRef(m, name, cls) < 0)
		Py_CLEAR(cls);
	return cls;
}

static PyObject *sub(PyObject *m, const char *name, PyObject *also, int code, const char *doc)
{
	PyObject *bases = also ? PyTuple_Pack(2, shmkvpy_Error, also) : PyTuple_Pack(1, shmkvpy_Error);
	if (!bases)
		return NULL;
	PyObject *cls = new_class(m, name, bases, code, doc);
	Py_DECREF(bases);
	return cls;
}

int shmkvpy_errors_init(PyObject *m)
{
	shmkvpy_Error = new_class(m, "Error", PyExc_Exception, 0,
			  "Base of every shmkv error. Attributes: code (the SHMKV_E* code or "
			  "-errno), errname (its name, e.g. 'SHMKV_ECORRUPT' or 'ENOENT'), "
			  "reason (what went wrong, where and why).");
	if (!shmkvpy_Error)
		return -1;
	NotFound = sub(m, "NotFound", PyExc_KeyError, SHMKV_ENOTFOUND,
		       "The key is not in the cache (also a KeyError).");
	/* .expires: None, or the time of an expired entry (shmkvpy_expired) */
	if (NotFound && PyObject_SetAttrString(NotFound, "expires", Py_None) < 0)
		return -1;
	shmkvpy_TypeMismatch = sub(m, "TypeMismatch", PyExc_TypeError, SHMKV_ETYPE,
				   "A typed getter found a value of another type (also a "
				   "TypeError): nothing is converted.");
	KeyTooLong = sub(m, "KeyTooLong", PyExc_ValueError, SHMKV_EKEYLEN,
			 "A key longer than 65535 bytes (also a ValueError).");
	shmkvpy_CorruptImage = sub(m, "CorruptImage", NULL, SHMKV_ECORRUPT,
				   "The image is damaged or forged: bad magic, truncated, a "
				   "checksum mismatch or a structure that does not hold.");
	VersionMismatch = sub(m, "VersionMismatch", NULL, SHMKV_EVERSION,
			      "The image (format version, layout hash) or the control segment "
			      "(protocol) is of another version than this reader.");
	CacheNotFound = sub(m, "CacheNotFound", PyExc_LookupError, -ENOENT,
			    "attach(): no cache of that name under the root (also a LookupError).");
	Unavailable = sub(m, "Unavailable", NULL, -EAGAIN,
			  "attach()/refresh(): the loader has published nothing yet, or is "
			  "mid-publish: try again later.");
	StaleCache = sub(m, "StaleCache", NULL, SHMKV_ESTALE,
			 "refresh(): the loader dropped the cache, or its control segment was "
			 "removed, replaced or truncated. The Cache keeps its generation and "
			 "never moves again: attach() anew.");
	shmkvpy_BuildError = sub(m, "BuildError", PyExc_ValueError, SHMKV_EINPUT,
				 "build()/join(): a bad record or option; the message names the "
				 "record (its index) and why (also a ValueError).");
	DeltaMismatch = sub(m, "DeltaMismatch", NULL, SHMKV_EBASE,
			    "A delta that does not apply to the image (lib/FORMAT.md section "
			    "19.4): made for another image or version of it, a later delta of "
			    "a chain (merge it first), another hash seed, or not a delta.");
	OSFailure = sub(m, "OSFailure", PyExc_OSError, 0,
			"A system call failed (also an OSError, errno set).");
	if (!NotFound || !shmkvpy_TypeMismatch || !KeyTooLong || !shmkvpy_CorruptImage ||
	    !VersionMismatch || !CacheNotFound || !Unavailable || !StaleCache || !shmkvpy_BuildError ||
	    !OSFailure || !DeltaMismatch)
		return -1;
	PyObject *bases = PyTuple_Pack(1, shmkvpy_BuildError);
	if (!bases)
		return -1;
	DuplicateKey = new_class(m, "DuplicateKey", bases, SHMKV_EDUPKEY,
				 "build(): a key given twice with on_duplicate='error'.");
	Py_DECREF(bases);
	return DuplicateKey ? 0 : -1;
}

static PyObject *class_of(int err)
{
	switch (err) {
	case SHMKV_ENOTFOUND: return NotFound;
	case SHMKV_ETYPE: return shmkvpy_TypeMismatch;
	case SHMKV_EKEYLEN: return KeyTooLong;
	case SHMKV_EMAGIC:
	case SHMKV_ETRUNCATED:
	case SHMKV_ECHECKSUM:
	case SHMKV_ECORRUPT: return shmkvpy_CorruptImage;
	case SHMKV_EVERSION:
	case SHMKV_ELAYOUT:
	case SHMKV_EPROTO: return VersionMismatch;
	case SHMKV_EDUPKEY: return DuplicateKey;
	case SHMKV_EINPUT:
	case SHMKV_ELIMIT: return shmkvpy_BuildError;
	case -EAGAIN: return Unavailable;
	case SHMKV_ESTALE: return StaleCache;
	case SHMKV_EBASE: return DeltaMismatch;
	default: return err < 0 && err > -4096 ? OSFailure : shmkvpy_Error;
	}
}

PyObject *shmkvpy_raise(int err, const char *what, const char *reason)
{
	PyObject *cls = class_of(err);
	if (err == -ENOENT && what && !strncmp(what, "attach", 6))
		cls = CacheNotFound;
	if (!reason || !*reason)
		reason = shmkv_strerror(err);
	/* a reason that begins with what ("in.jsonl:7: ...", the builder's
	 * place) names it already: once is enough */
	size_t wl = what ? strlen(what) : 0;
	if (wl && !strncmp(reason, what, wl) && reason[wl] == ':')
		what = NULL;
	PyObject *msg = what ? PyUnicode_FromFormat("%s: %s (%s)", what, reason, shmkv_errname(err))
			     : PyUnicode_FromFormat("%s (%s)", reason, shmkv_errname(err));
	if (!msg) {
		PyErr_Clear(); /* a reason that is not UTF-8 (a forged image's text) */
		msg = PyUnicode_FromFormat("%s (%s)", shmkv_strerror(err), shmkv_errname(err));
		if (!msg)
			return NULL;
	}
	PyObject *exc = cls == OSFailure ? PyObject_CallFunction(cls, "iO", -err, msg)
					 : PyObject_CallOneArg(cls, msg);
	if (exc) {
		PyObject *code = PyLong_FromLong(err);
		PyObject *name = PyUnicode_FromString(shmkv_errname(err));
		PyObject *why = PyUnicode_DecodeUTF8(reason, (Py_ssize_t)strlen(reason), "replace");
		if (code && name && why && !PyObject_SetAttrString(exc, "code", code) &&
		    !PyObject_SetAttrString(exc, "errname", name) &&
		    !PyObject_SetAttrString(exc, "reason", why))
			PyErr_SetObject(cls, exc);
		Py_XDECREF(code);
		Py_XDECREF(name);
		Py_XDECREF(why);
		Py_DECREF(exc);
	}
	Py_DECREF(msg);
	return NULL;
}

PyObject *shmkvpy_not_found(PyObject *key)
{
	/* KeyError's convention: the key is the one argument (class attributes
	 * carry code, errname and reason: no per-miss setattr) */
	PyObject *t = PyTuple_Pack(1, key);
	if (t) {
		PyErr_SetObject(NotFound, t);
		Py_DECREF(t);
	}
	return NULL;
}

PyObject *shmkvpy_expired(PyObject *key, uint32_t t, const char *why)
{
	PyObject *msg = PyUnicode_FromString(why), *exc = NULL;
	PyObject *args = msg ? PyTuple_Pack(2, key, msg) : NULL;
	if (args)
		exc = PyObject_Call(NotFound, args, NULL);
	PyObject *te = exc ? PyLong_FromUnsignedLong(t) : NULL;
	if (te && !PyObject_SetAttrString(exc, "expires", te) &&
	    !PyObject_SetAttrString(exc, "reason", msg))
		PyErr_SetObject(NotFound, exc);
	Py_XDECREF(te);
	Py_XDECREF(exc);
	Py_XDECREF(args);
	Py_XDECREF(msg);
	return NULL;
}
