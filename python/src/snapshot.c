/*
 * snapshot.c — bloomkv.Snapshot: reads at one point in time.
 */
#include "bkvpy.h"

int bkvpy_snapshot_enter(DBObject *db, PyObject *arg, SnapshotObject **out)
{
    *out = NULL;
    if (!arg || arg == Py_None)
        return 1;
    if (!PyObject_TypeCheck(arg, &bkvpy_snapshot_type)) {
        PyErr_Format(PyExc_TypeError, "snapshot must be a bloomkv.Snapshot, not %.80s", Py_TYPE(arg)->tp_name);
        return 0;
    }
    SnapshotObject *s = (SnapshotObject *)arg;
    if (s->db != db) {
        PyErr_SetString(bkvpy_invalid_error, "the snapshot belongs to another database");
        return 0;
    }
    if (!bkvpy_guard_enter(&s->guard, "Snapshot"))
        return 0;
    *out = s;
    return 1;
}

void bkvpy_snapshot_leave(SnapshotObject *s)
{
    if (s)
        bkvpy_guard_leave(&s->guard);
}

static void snapshot_release(SnapshotObject *self)
{
    if (!bkvpy_guard_close(&self->guard))
        return;
    bkv_db *db = self->db->db;
    const bkv_snapshot *snap = self->snap;
    self->snap = NULL;
    /* The release takes the engine's mutex, which a background thread
     * may hold while it waits for the GIL (to call a terms extractor). */
    Py_BEGIN_ALLOW_THREADS
    bkv_snapshot_release(db, snap);
    Py_END_ALLOW_THREADS
}

static void snapshot_close_dependent(bkvpy_dependent *dep)
{
    snapshot_release((SnapshotObject *)((char *)dep - offsetof(SnapshotObject, dep)));
}

PyObject *bkvpy_snapshot_new(DBObject *self)
{
    if (!bkvpy_guard_enter(&self->guard, "DB"))
        return NULL;
    const bkv_snapshot *snap;
    Py_BEGIN_ALLOW_THREADS
    snap = bkv_snapshot_create(self->db);
    Py_END_ALLOW_THREADS
    bkvpy_guard_leave(&self->guard);
    if (!snap)
        return PyErr_NoMemory();
    SnapshotObject *s = PyObject_New(SnapshotObject, &bkvpy_snapshot_type);
    if (!s) {
        bkv_snapshot_release(self->db, snap);
        return NULL;
    }
    s->db = (DBObject *)Py_NewRef(self);
    s->snap = snap;
    s->key_prefix = NULL;
    s->guard.closed = 0;
    s->guard.active = 0;
    s->dep.close = snapshot_close_dependent;
    bkvpy_dependent_link(self, &s->dep, (PyObject *)s);
    return (PyObject *)s;
}

static void snapshot_dealloc(SnapshotObject *self)
{
    bkvpy_dependent_close(self->db, &self->dep);
    Py_XDECREF(self->db);
    Py_XDECREF(self->key_prefix);
    PyObject_Free(self);
}

static PyObject *snapshot_close(SnapshotObject *self, PyObject *unused)
{
    (void)unused;
    bkvpy_dependent_close(self->db, &self->dep);
    Py_RETURN_NONE;
}

static PyObject *snapshot_exit_ctx(SnapshotObject *self, PyObject *args)
{
    (void)args;
    return snapshot_close(self, NULL);
}

static PyObject *snapshot_enter_ctx(SnapshotObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *snapshot_get(SnapshotObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"key", "default", NULL};
    PyObject *k, *dflt = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:get", kwlist, &k, &dflt))
        return NULL;
    PyObject *key = self->key_prefix ? bkvpy_prefixed_key(self->key_prefix, k) : Py_NewRef(k);
    SnapshotObject *snap;
    if (!key || !bkvpy_snapshot_enter(self->db, (PyObject *)self, &snap)) {
        Py_XDECREF(key);
        return NULL;
    }
    PyObject *r = bkvpy_get(self->db, snap, key, dflt, NULL, NULL);
    bkvpy_snapshot_leave(snap);
    Py_DECREF(key);
    return r;
}

static PyObject *snapshot_multi_get(SnapshotObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"keys", "default", NULL};
    PyObject *keys, *dflt = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:multi_get", kwlist, &keys, &dflt))
        return NULL;
    PyObject *full = Py_NewRef(keys);
    if (self->key_prefix) { /* a prefixed database's snapshot: every key under its prefix */
        Py_DECREF(full);
        PyObject *seq = PySequence_Fast(keys, "keys must be a sequence of bytes-like objects");
        full = seq ? PyList_New(PySequence_Fast_GET_SIZE(seq)) : NULL;
        for (Py_ssize_t i = 0; full && i < PySequence_Fast_GET_SIZE(seq); i++) {
            PyObject *k = bkvpy_prefixed_key(self->key_prefix, PySequence_Fast_GET_ITEM(seq, i));
            if (!k)
                Py_CLEAR(full);
            else
                PyList_SET_ITEM(full, i, k);
        }
        Py_XDECREF(seq);
        if (!full)
            return NULL;
    }
    SnapshotObject *snap;
    PyObject *r = NULL;
    if (bkvpy_snapshot_enter(self->db, (PyObject *)self, &snap)) {
        r = bkvpy_multi_get(self->db, snap, full, dflt);
        bkvpy_snapshot_leave(snap);
    }
    Py_DECREF(full);
    return r;
}

static PyObject *snapshot_find_value(SnapshotObject *self, PyObject *args, PyObject *kwargs)
{
    if (self->key_prefix)
        return PyErr_Format(PyExc_NotImplementedError, "a prefixed database's snapshot searches no values: "
                                                       "search the database's own snapshot");
    return bkvpy_find_value(self->db, (PyObject *)self, args, kwargs);
}

static PyObject *snapshot_iterator(SnapshotObject *self, PyObject *args, PyObject *kwargs)
{
    return bkvpy_iterator_new(self->db, (PyObject *)self, args, kwargs, self->key_prefix);
}

static PyObject *snapshot_raw_iterator(SnapshotObject *self, PyObject *args, PyObject *kwargs)
{
    if (self->key_prefix)
        return PyErr_Format(PyExc_NotImplementedError, "a prefixed database's snapshot has no raw iterator");
    return bkvpy_raw_iterator_new(self->db, (PyObject *)self, args, kwargs);
}

/* for k, v in snapshot: every entry at the snapshot, as for a DB. */
static PyObject *snapshot_iter(SnapshotObject *self)
{
    PyObject *no_args = PyTuple_New(0);
    PyObject *it = no_args ? bkvpy_iterator_new(self->db, (PyObject *)self, no_args, NULL, self->key_prefix) : NULL;
    Py_XDECREF(no_args);
    return it;
}

static PyObject *snapshot_get_closed(SnapshotObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->guard.closed);
}

static PyMethodDef snapshot_methods[] = {
    {"raw_iterator", (PyCFunction)(void (*)(void))snapshot_raw_iterator, METH_VARARGS | METH_KEYWORDS,
     "raw_iterator(*, verify_checksums=False, fill_cache=True) -> RawIterator at the snapshot"},
    {"get", (PyCFunction)(void (*)(void))snapshot_get, METH_VARARGS | METH_KEYWORDS,
     "get(key, default=None): the value at the snapshot"},
    {"multi_get", (PyCFunction)(void (*)(void))snapshot_multi_get, METH_VARARGS | METH_KEYWORDS,
     "multi_get(keys, default=None): a list of values at the snapshot"},
    {"iterator", (PyCFunction)(void (*)(void))snapshot_iterator, METH_VARARGS | METH_KEYWORDS,
     "iterator(...): DB.iterator's arguments, reading the snapshot"},
    {"find_value", (PyCFunction)(void (*)(void))snapshot_find_value, METH_VARARGS | METH_KEYWORDS,
     "find_value(value, *, match='all', limit=None, keys_only=False): DB.find_value at the snapshot"},
    {"close", (PyCFunction)snapshot_close, METH_NOARGS, "close(): releases the snapshot (also on garbage collection)"},
    {"release", (PyCFunction)snapshot_close, METH_NOARGS, "release(): the same as close()"},
    {"__enter__", (PyCFunction)snapshot_enter_ctx, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)snapshot_exit_ctx, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef snapshot_getset[] = {{"closed", (getter)snapshot_get_closed, NULL, "released", NULL},
                                        {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject bkvpy_snapshot_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bloomkv.Snapshot",
    .tp_basicsize = sizeof(SnapshotObject),
    .tp_dealloc = (destructor)snapshot_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A consistent view of the database at the moment DB.snapshot() was called. Released by close(), "
              "on leaving a with block, when garbage-collected, or when the database closes.",
    .tp_methods = snapshot_methods,
    .tp_iter = (getiterfunc)snapshot_iter,
    .tp_getset = snapshot_getset,
};

