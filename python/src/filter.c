/*
 * filter.c — bloomkv.Filter: the filter library on its own.
 *
 * Keys are hashed once with bkv_hash_bytes (seed 0), as the engine does.
 * A filter from from_bytes() probes the caller's buffer in place when the
 * buffer is read-only (bytes, a read-only memoryview or mmap), holding the
 * buffer for the filter's life; a writable buffer is copied, since the
 * caller could change it under the probes. Adding to such a zero-copy
 * filter first turns it into a copy of its own.
 *
 * Filter calls keep the GIL: they never do I/O and take microseconds, and
 * holding it is what makes add() and probes from several threads safe.
 */
#include "bkvpy.h"

#include <string.h>

typedef struct FilterObject {
    PyObject_HEAD
    bkv_filter *f;
    Py_buffer view; /* the bytes a zero-copy filter probes */
    int has_view;
} FilterObject;

static FilterObject *filter_wrap(bkv_filter *f)
{
    FilterObject *self = PyObject_New(FilterObject, &bkvpy_filter_type);
    if (!self) {
        bkv_filter_destroy(f);
        return NULL;
    }
    self->f = f;
    self->has_view = 0;
    return self;
}

static void filter_dealloc(FilterObject *self)
{
    bkv_filter_destroy(self->f);
    if (self->has_view)
        PyBuffer_Release(&self->view);
    PyObject_Free(self);
}

static int key_hash(PyObject *key, bkv_hash *h)
{
    if (PyBytes_Check(key)) {
        *h = bkv_hash_bytes(PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key));
        return 1;
    }
    bkvpy_bytes b;
    if (!bkvpy_bytes_get(key, &b, "key"))
        return 0;
    *h = bkv_hash_bytes(b.data, b.len);
    bkvpy_bytes_release(&b);
    return 1;
}

/* Every key of an iterable, hashed; *n set. NULL with an exception. */
static bkv_hash *hash_keys(PyObject *keys, size_t *n)
{
    PyObject *seq = PySequence_Fast(keys, "keys must be an iterable of bytes-like objects");
    if (!seq)
        return NULL;
    *n = (size_t)PySequence_Fast_GET_SIZE(seq);
    bkv_hash *hashes = PyMem_Malloc((*n ? *n : 1) * sizeof *hashes);
    if (!hashes) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (size_t i = 0; i < *n; i++)
        if (!key_hash(items[i], &hashes[i])) {
            PyMem_Free(hashes);
            Py_DECREF(seq);
            return NULL;
        }
    Py_DECREF(seq);
    return hashes;
}

static int spec_from_args(const char *type_name, PyObject *bits_obj, PyObject *fpr_obj, bkv_filter_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->type = bkv_filter_type_from_name(type_name);
    if (spec->type < 0) {
        PyErr_Format(bkvpy_invalid_error, "type = '%s' is not a filter type", type_name);
        return 0;
    }
    if (bits_obj != Py_None && fpr_obj != Py_None) {
        PyErr_SetString(bkvpy_invalid_error, "give bits_per_key or fpr, not both");
        return 0;
    }
    if (bits_obj != Py_None) {
        spec->bits_per_key = PyFloat_AsDouble(bits_obj);
        if (spec->bits_per_key == -1 && PyErr_Occurred())
            return 0;
        if (!(spec->bits_per_key > 0)) {
            PyErr_SetString(bkvpy_invalid_error, "bits_per_key must be > 0");
            return 0;
        }
    } else if (fpr_obj != Py_None) {
        spec->fpr = PyFloat_AsDouble(fpr_obj);
        if (spec->fpr == -1 && PyErr_Occurred())
            return 0;
        if (!(spec->fpr > 0 && spec->fpr < 1)) {
            PyErr_SetString(bkvpy_invalid_error, "fpr must lie in (0, 1)");
            return 0;
        }
    } else {
        spec->fpr = 0.01;
    }
    return 1;
}

static PyObject *filter_build(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    (void)cls;
    static char *kwlist[] = {"keys", "type", "bits_per_key", "fpr", NULL};
    PyObject *keys, *bits = Py_None, *fpr = Py_None;
    const char *type = "ribbon";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|s$OO:build", kwlist, &keys, &type, &bits, &fpr))
        return NULL;
    bkv_filter_spec spec;
    if (!spec_from_args(type, bits, fpr, &spec))
        return NULL;
    size_t n;
    bkv_hash *hashes = hash_keys(keys, &n);
    if (!hashes)
        return NULL;
    bkv_filter *f = NULL;
    int rc = bkv_filter_build(&spec, hashes, n, &f);
    PyMem_Free(hashes);
    if (rc != BKV_OK)
        return bkvpy_raise(rc, NULL);
    return (PyObject *)filter_wrap(f);
}

/* Filter(type='blocked', capacity=..., bits_per_key=None, fpr=None): an
 * empty filter of a type that takes keys one at a time. */
static PyObject *filter_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)type;
    static char *kwlist[] = {"type", "capacity", "bits_per_key", "fpr", NULL};
    const char *name = "blocked";
    unsigned long long capacity = 0;
    PyObject *bits = Py_None, *fpr = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|sK$OO:Filter", kwlist, &name, &capacity, &bits, &fpr))
        return NULL;
    bkv_filter_spec spec;
    if (!spec_from_args(name, bits, fpr, &spec))
        return NULL;
    if (bkv_filter_is_static(spec.type)) {
        PyErr_Format(bkvpy_invalid_error, "a %s filter is static: make it with Filter.build(keys, type='%s')",
                     name, name);
        return NULL;
    }
    if (capacity == 0) {
        PyErr_SetString(bkvpy_invalid_error, "capacity (the keys expected) must be > 0");
        return NULL;
    }
    bkv_filter *f = NULL;
    int rc = bkv_filter_create(&spec, capacity, &f);
    if (rc != BKV_OK)
        return bkvpy_raise(rc, NULL);
    return (PyObject *)filter_wrap(f);
}

static PyObject *filter_open(PyObject *buf_obj)
{
    FilterObject *self = PyObject_New(FilterObject, &bkvpy_filter_type);
    if (!self)
        return NULL;
    self->f = NULL;
    self->has_view = 0;
    if (PyObject_GetBuffer(buf_obj, &self->view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->has_view = 1;
    unsigned flags = self->view.readonly ? 0 : BKV_FILTER_OPEN_COPY;
    char err[256] = "";
    int rc = bkv_filter_open(self->view.buf, (size_t)self->view.len, flags, &self->f, err, sizeof err);
    if (rc != BKV_OK) {
        PyErr_SetString(rc == BKV_CORRUPTION ? bkvpy_corruption_error : bkvpy_invalid_error,
                        *err ? err : bkv_strerror(rc));
        Py_DECREF(self);
        return NULL;
    }
    if (flags & BKV_FILTER_OPEN_COPY) {
        PyBuffer_Release(&self->view);
        self->has_view = 0;
    }
    return (PyObject *)self;
}

static PyObject *filter_from_bytes(PyObject *cls, PyObject *arg)
{
    (void)cls;
    if (PyUnicode_Check(arg) || !PyObject_CheckBuffer(arg))
        return PyErr_Format(PyExc_TypeError, "from_bytes needs a bytes-like object, not %.80s",
                            Py_TYPE(arg)->tp_name);
    return filter_open(arg);
}

static PyObject *filter_bytes(FilterObject *self, PyObject *unused)
{
    (void)unused;
    size_t n = bkv_filter_encoded_size(self->f);
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (!b)
        return NULL;
    int rc = bkv_filter_encode(self->f, PyBytes_AS_STRING(b), n);
    if (rc != BKV_OK) {
        Py_DECREF(b);
        return bkvpy_raise(rc, NULL);
    }
    return b;
}

static PyObject *filter_reduce(FilterObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *b = filter_bytes(self, NULL);
    if (!b)
        return NULL;
    PyObject *from_bytes = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "from_bytes");
    PyObject *r = from_bytes ? Py_BuildValue("(O(N))", from_bytes, b) : NULL;
    if (!from_bytes)
        Py_DECREF(b);
    Py_XDECREF(from_bytes);
    return r;
}

static PyObject *filter_may_contain(FilterObject *self, PyObject *key)
{
    bkv_hash h;
    if (!key_hash(key, &h))
        return NULL;
    return PyBool_FromLong(bkv_filter_may_contain(self->f, h));
}

static int filter_contains(FilterObject *self, PyObject *key)
{
    bkv_hash h;
    if (!key_hash(key, &h))
        return -1;
    return bkv_filter_may_contain(self->f, h);
}

static PyObject *filter_may_contain_many(FilterObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"keys", "as_bytes", NULL};
    PyObject *keys;
    int as_bytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$p:may_contain_many", kwlist, &keys, &as_bytes))
        return NULL;
    size_t n;
    bkv_hash *hashes = hash_keys(keys, &n);
    if (!hashes)
        return NULL;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (out) {
        uint8_t *flags = (uint8_t *)PyByteArray_AS_STRING(out);
        bkv_filter_may_contain_batch(self->f, hashes, n, flags);
        if (!as_bytes) {
            PyObject *list = PyList_New((Py_ssize_t)n);
            for (size_t i = 0; list && i < n; i++)
                PyList_SET_ITEM(list, (Py_ssize_t)i, Py_NewRef(flags[i] ? Py_True : Py_False));
            Py_SETREF(out, list);
        }
    }
    PyMem_Free(hashes);
    return out;
}

/* A zero-copy filter becomes a copy of its own before it changes. */
static int make_writable(FilterObject *self)
{
    if (!self->has_view)
        return 1;
    bkv_filter *copy = NULL;
    char err[256] = "";
    int rc = bkv_filter_open(self->view.buf, (size_t)self->view.len, BKV_FILTER_OPEN_COPY | BKV_FILTER_OPEN_TRUSTED,
                             &copy, err, sizeof err);
    if (rc != BKV_OK) {
        bkvpy_raise(rc, NULL);
        return 0;
    }
    bkv_filter_destroy(self->f);
    self->f = copy;
    PyBuffer_Release(&self->view);
    self->has_view = 0;
    return 1;
}

static PyObject *filter_add(FilterObject *self, PyObject *key)
{
    bkv_hash h;
    if (!key_hash(key, &h))
        return NULL;
    bkv_filter_info info;
    bkv_filter_get_info(self->f, &info);
    if (bkv_filter_is_static(info.type))
        return PyErr_Format(bkvpy_invalid_error, "a %s filter is static: it cannot be added to",
                            bkv_filter_type_name(info.type));
    if (!make_writable(self))
        return NULL;
    int rc = bkv_filter_add(self->f, h);
    if (rc != BKV_OK)
        return bkvpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

/* Removes one earlier add(); KeyError-free: returns False when the filter
 * shows the key absent (then nothing changed). */
static PyObject *filter_remove(FilterObject *self, PyObject *key)
{
    bkv_hash h;
    if (!key_hash(key, &h))
        return NULL;
    bkv_filter_info info;
    bkv_filter_get_info(self->f, &info);
    if (!bkv_filter_is_deletable(info.type))
        return PyErr_Format(bkvpy_invalid_error, "a %s filter cannot delete keys (cuckoo and counting ones can)",
                            bkv_filter_type_name(info.type));
    if (!make_writable(self))
        return NULL;
    int rc = bkv_filter_delete(self->f, h);
    if (rc == BKV_NOTFOUND)
        Py_RETURN_FALSE;
    if (rc != BKV_OK)
        return bkvpy_raise(rc, NULL);
    Py_RETURN_TRUE;
}

static Py_ssize_t filter_len(FilterObject *self)
{
    bkv_filter_info info;
    bkv_filter_get_info(self->f, &info);
    return (Py_ssize_t)info.num_keys;
}

static PyObject *filter_info(FilterObject *self, PyObject *unused)
{
    (void)unused;
    bkv_filter_info in;
    bkv_filter_get_info(self->f, &in);
    return Py_BuildValue("{s:s,s:I,s:k,s:K,s:K,s:n,s:d,s:d,s:O}", "type", bkv_filter_type_name(in.type), "k", in.k,
                         "hash_seed", (unsigned long)in.hash_seed, "num_keys", (unsigned long long)in.num_keys,
                         "num_bits", (unsigned long long)in.num_bits, "encoded_bytes", (Py_ssize_t)in.encoded_bytes,
                         "bits_per_key", in.bits_per_key, "expected_fpr", in.expected_fpr, "zero_copy",
                         self->has_view ? Py_True : Py_False);
}

static PyObject *filter_repr(FilterObject *self)
{
    bkv_filter_info in;
    bkv_filter_get_info(self->f, &in);
    char bits[32];
    snprintf(bits, sizeof bits, "%.2f", in.bits_per_key);
    return PyUnicode_FromFormat("<bloomkv.Filter %s, %llu keys, %s bits/key>", bkv_filter_type_name(in.type),
                                (unsigned long long)in.num_keys, bits);
}

static PyMethodDef filter_methods[] = {
    {"build", (PyCFunction)(void (*)(void))filter_build, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Filter.build(keys, type='ribbon', *, bits_per_key=None, fpr=None) -> Filter holding exactly keys (any "
     "type; static types only this way). Neither size given: a 1% false-positive rate."},
    {"from_bytes", (PyCFunction)filter_from_bytes, METH_O | METH_CLASS,
     "Filter.from_bytes(b) -> Filter: validates a serialized filter; probes read-only buffers in place"},
    {"may_contain", (PyCFunction)filter_may_contain, METH_O,
     "may_contain(key) -> False if key is certainly absent, True if it may be present"},
    {"may_contain_many", (PyCFunction)(void (*)(void))filter_may_contain_many, METH_VARARGS | METH_KEYWORDS,
     "may_contain_many(keys, *, as_bytes=False) -> list of bools (or a bytearray of 0/1 flags); batched, "
     "prefetched probes"},
    {"add", (PyCFunction)filter_add, METH_O, "add(key): types that take keys one by one (not static ones)"},
    {"remove", (PyCFunction)filter_remove, METH_O,
     "remove(key) -> bool: deletable types (cuckoo, counting); False (nothing changed) when the key reads absent"},
    {"info", (PyCFunction)filter_info, METH_NOARGS, "info() -> dict: type, k, num_keys, num_bits, sizes, the "
                                                    "model's false-positive rate"},
    {"__bytes__", (PyCFunction)filter_bytes, METH_NOARGS, "the serialized, checksummed filter"},
    {"__reduce__", (PyCFunction)filter_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods filter_as_sequence = {
    .sq_length = (lenfunc)filter_len,
    .sq_contains = (objobjproc)filter_contains,
};

PyTypeObject bkvpy_filter_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bloomkv.Filter",
    .tp_basicsize = sizeof(FilterObject),
    .tp_dealloc = (destructor)filter_dealloc,
    .tp_repr = (reprfunc)filter_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An approximate-membership filter: 'key in f' is never False for a key added, and True for an "
              "absent key with the filter's false-positive rate.\n\nFilter(type='blocked', capacity=N, *, "
              "bits_per_key=None, fpr=None) makes an empty filter of a type that takes keys one by one ('bloom', "
              "'blocked', 'cuckoo8', 'cuckoo12', 'cuckoo16', 'counting'); Filter.build(keys, type) makes any "
              "type, static ones ('ribbon', 'fuse8', 'fuse16', 'xor8') included. len(f) is the keys added.",
    .tp_methods = filter_methods,
    .tp_as_sequence = &filter_as_sequence,
    .tp_new = filter_new,
};
