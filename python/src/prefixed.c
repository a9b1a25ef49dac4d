/*
 * prefixed.c — bloomkv.PrefixedDB: plyvel's prefixed_db(), the database
 * seen through the keys that start with a prefix. Keys are given and
 * returned without it; iterators, snapshots and write batches made from it
 * keep to it; prefixed_db() of one adds to its prefix. It holds no engine
 * handle of its own: its calls are the database's, so a closed database
 * refuses them the same way.
 */
#include "bkvpy.h"

typedef struct PrefixedDBObject {
    PyObject_HEAD
    DBObject *db;
    PyObject *prefix; /* bytes */
} PrefixedDBObject;

PyObject *bkvpy_prefixed_db_new(DBObject *db, PyObject *prefix)
{
    PyObject *p = bkvpy_prefixed_key(NULL, prefix);
    if (!p)
        return NULL;
    PrefixedDBObject *self = PyObject_New(PrefixedDBObject, &bkvpy_prefixed_db_type);
    if (!self) {
        Py_DECREF(p);
        return NULL;
    }
    self->db = (DBObject *)Py_NewRef(db);
    self->prefix = p;
    return (PyObject *)self;
}

static void prefixed_dealloc(PrefixedDBObject *self)
{
    Py_XDECREF(self->db);
    Py_XDECREF(self->prefix);
    PyObject_Free(self);
}

/* Calls the database's method name with the key (the first positional
 * argument) under the prefix, the other arguments as they came. */
static PyObject *forward_keyed(PrefixedDBObject *self, const char *name, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) < 1)
        return PyErr_Format(PyExc_TypeError, "%s() needs a key", name);
    PyObject *key = bkvpy_prefixed_key(self->prefix, PyTuple_GET_ITEM(args, 0));
    PyObject *full = key ? PyTuple_New(PyTuple_GET_SIZE(args)) : NULL;
    PyObject *method = full ? PyObject_GetAttrString((PyObject *)self->db, name) : NULL;
    PyObject *r = NULL;
    if (method) {
        PyTuple_SET_ITEM(full, 0, Py_NewRef(key));
        for (Py_ssize_t i = 1; i < PyTuple_GET_SIZE(args); i++)
            PyTuple_SET_ITEM(full, i, Py_NewRef(PyTuple_GET_ITEM(args, i)));
        r = PyObject_Call(method, full, kwargs);
    }
    Py_XDECREF(method);
    Py_XDECREF(full);
    Py_XDECREF(key);
    return r;
}

static PyObject *prefixed_get(PrefixedDBObject *self, PyObject *args, PyObject *kwargs)
{
    return forward_keyed(self, "get", args, kwargs);
}

static PyObject *prefixed_put(PrefixedDBObject *self, PyObject *args, PyObject *kwargs)
{
    return forward_keyed(self, "put", args, kwargs);
}

static PyObject *prefixed_delete(PrefixedDBObject *self, PyObject *args, PyObject *kwargs)
{
    return forward_keyed(self, "delete", args, kwargs);
}

static PyObject *prefixed_iterator(PrefixedDBObject *self, PyObject *args, PyObject *kwargs)
{
    /* A snapshot given is the database's; its prefix is this one. */
    return bkvpy_iterator_new(self->db, NULL, args, kwargs, self->prefix);
}

static PyObject *prefixed_iter(PrefixedDBObject *self)
{
    return bkvpy_iterator_new(self->db, NULL, NULL, NULL, self->prefix);
}

static PyObject *prefixed_write_batch(PrefixedDBObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *b = bkvpy_batch_new(self->db, args, kwargs);
    if (b)
        bkvpy_batch_set_prefix(b, self->prefix);
    return b;
}

static PyObject *prefixed_snapshot(PrefixedDBObject *self, PyObject *unused)
{
    (void)unused;
    SnapshotObject *s = (SnapshotObject *)bkvpy_snapshot_new(self->db);
    if (s)
        s->key_prefix = Py_NewRef(self->prefix);
    return (PyObject *)s;
}

static PyObject *prefixed_prefixed_db(PrefixedDBObject *self, PyObject *prefix)
{
    PyObject *longer = bkvpy_prefixed_key(self->prefix, prefix);
    PyObject *r = longer ? bkvpy_prefixed_db_new(self->db, longer) : NULL;
    Py_XDECREF(longer);
    return r;
}

static PyObject *prefixed_get_db(PrefixedDBObject *self, void *unused)
{
    (void)unused;
    return Py_NewRef(self->db);
}

static PyObject *prefixed_get_prefix(PrefixedDBObject *self, void *unused)
{
    (void)unused;
    return Py_NewRef(self->prefix);
}

static PyObject *prefixed_repr(PrefixedDBObject *self)
{
    return PyUnicode_FromFormat("<bloomkv.PrefixedDB %R of %R>", self->prefix, (PyObject *)self->db);
}

#define KW(fn) (PyCFunction)(void (*)(void))(fn), METH_VARARGS | METH_KEYWORDS

static PyMethodDef prefixed_methods[] = {
    {"get", KW(prefixed_get), "get(key, default=None, **options): as DB.get, the key under the prefix"},
    {"put", KW(prefixed_put), "put(key, value, *, sync=False)"},
    {"delete", KW(prefixed_delete), "delete(key, *, sync=False)"},
    {"iterator", KW(prefixed_iterator), "iterator(**options): as DB.iterator, over the keys under the prefix, "
                                        "returned without it"},
    {"write_batch", KW(prefixed_write_batch), "write_batch(**options): a WriteBatch whose keys go under the prefix"},
    {"snapshot", (PyCFunction)prefixed_snapshot, METH_NOARGS, "snapshot(): a Snapshot that reads under the prefix"},
    {"prefixed_db", (PyCFunction)prefixed_prefixed_db, METH_O, "prefixed_db(prefix): this prefix, then that one"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef prefixed_getset[] = {
    {"db", (getter)prefixed_get_db, NULL, "the database", NULL},
    {"prefix", (getter)prefixed_get_prefix, NULL, "the prefix, as bytes", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject bkvpy_prefixed_db_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bloomkv.PrefixedDB",
    .tp_basicsize = sizeof(PrefixedDBObject),
    .tp_dealloc = (destructor)prefixed_dealloc,
    .tp_repr = (reprfunc)prefixed_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The database seen through the keys that start with a prefix (from DB.prefixed_db(), plyvel's).",
    .tp_iter = (getiterfunc)prefixed_iter,
    .tp_methods = prefixed_methods,
    .tp_getset = prefixed_getset,
};
