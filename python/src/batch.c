/*
 * batch.c — bloomkv.WriteBatch: puts and deletes applied atomically.
 */
#include "bkvpy.h"

typedef struct BatchObject {
    PyObject_HEAD
    DBObject *db;
    bkv_batch *batch;
    int sync, transaction;
    int writing; /* bkv_write is running on it, with the GIL released */
    PyObject *key_prefix; /* a prefixed database's batch: its keys go under it, or NULL */
} BatchObject;

void bkvpy_batch_set_prefix(PyObject *batch, PyObject *prefix)
{
    BatchObject *b = (BatchObject *)batch;
    Py_XSETREF(b->key_prefix, Py_NewRef(prefix));
}

PyObject *bkvpy_batch_new(DBObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"sync", "transaction", NULL};
    int sync = 0, transaction = 0; /* plyvel's default: the batch is written even when an exception leaves the block */
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$pp:write_batch", kwlist, &sync, &transaction))
        return NULL;
    if (self->guard.closed)
        return PyErr_Format(PyExc_RuntimeError, "DB is closed");
    BatchObject *b = PyObject_New(BatchObject, &bkvpy_batch_type);
    if (!b)
        return NULL;
    b->batch = bkv_batch_create();
    b->db = (DBObject *)Py_NewRef(self);
    b->sync = sync;
    b->transaction = transaction;
    b->writing = 0;
    b->key_prefix = NULL;
    if (!b->batch) {
        Py_DECREF(b);
        return PyErr_NoMemory();
    }
    return (PyObject *)b;
}

static void batch_dealloc(BatchObject *self)
{
    bkv_batch_destroy(self->batch);
    Py_XDECREF(self->db);
    Py_XDECREF(self->key_prefix);
    PyObject_Free(self);
}

/* Refuses changes while the batch is being written by another thread. */
static int batch_usable(BatchObject *self)
{
    if (self->db->guard.closed) {
        PyErr_SetString(PyExc_RuntimeError, "DB is closed");
        return 0;
    }
    if (self->writing) {
        PyErr_SetString(PyExc_RuntimeError, "WriteBatch is being written by another thread");
        return 0;
    }
    return 1;
}

static PyObject *batch_put(BatchObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "put() takes 2 arguments (key, value), %zd given", nargs);
    if (!batch_usable(self))
        return NULL;
    PyObject *k = self->key_prefix ? bkvpy_prefixed_key(self->key_prefix, args[0]) : Py_NewRef(args[0]);
    bkvpy_bytes key, val;
    if (!k || !bkvpy_bytes_get_pair(k, args[1], &key, &val, "key", "value", 0)) {
        Py_XDECREF(k);
        return NULL;
    }
    int rc = bkv_batch_put(self->batch, key.data, key.len, val.data, val.len);
    bkvpy_bytes_release(&key);
    bkvpy_bytes_release(&val);
    Py_DECREF(k);
    if (rc != BKV_OK)
        return bkvpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *batch_delete(BatchObject *self, PyObject *args)
{
    PyObject *arg;
    if (!PyArg_ParseTuple(args, "O:delete", &arg) || !batch_usable(self))
        return NULL;
    PyObject *k = self->key_prefix ? bkvpy_prefixed_key(self->key_prefix, arg) : Py_NewRef(arg);
    bkvpy_bytes key;
    if (!k || !bkvpy_bytes_get(k, &key, "key")) {
        Py_XDECREF(k);
        return NULL;
    }
    int rc = bkv_batch_delete(self->batch, key.data, key.len);
    bkvpy_bytes_release(&key);
    Py_DECREF(k);
    if (rc != BKV_OK)
        return bkvpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *batch_clear(BatchObject *self, PyObject *unused)
{
    (void)unused;
    if (!batch_usable(self))
        return NULL;
    bkv_batch_clear(self->batch);
    Py_RETURN_NONE;
}

/* Writes the batch atomically, then empties it. */
static PyObject *batch_write(BatchObject *self, PyObject *unused)
{
    (void)unused;
    if (!batch_usable(self))
        return NULL;
    DBObject *db = self->db;
    if (!bkvpy_guard_enter(&db->guard, "DB"))
        return NULL;
    bkv_write_options wo;
    bkvpy_write_options(self->sync, &wo);
    self->writing = 1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bkv_write(db->db, &wo, self->batch);
    Py_END_ALLOW_THREADS
    self->writing = 0;
    PyObject *r = rc == BKV_OK ? Py_NewRef(Py_None) : bkvpy_raise(rc, db->db);
    bkvpy_guard_leave(&db->guard);
    if (r)
        bkv_batch_clear(self->batch);
    return r;
}

static PyObject *batch_enter_ctx(BatchObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

/* On leaving a with block the batch is written, unless an exception is
 * leaving it too and the batch is a transaction (then it is discarded). */
static PyObject *batch_exit_ctx(BatchObject *self, PyObject *args)
{
    PyObject *exc_type = PyTuple_Size(args) > 0 ? PyTuple_GET_ITEM(args, 0) : Py_None;
    if (exc_type != Py_None && self->transaction) {
        bkv_batch_clear(self->batch);
        Py_RETURN_FALSE;
    }
    PyObject *r = batch_write(self, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *batch_append(BatchObject *self, PyObject *other)
{
    if (!PyObject_TypeCheck(other, &bkvpy_batch_type))
        return PyErr_Format(PyExc_TypeError, "append() takes a WriteBatch, not %s", Py_TYPE(other)->tp_name);
    if (!batch_usable(self) || !batch_usable((BatchObject *)other))
        return NULL;
    int rc = bkv_batch_append_batch(self->batch, ((BatchObject *)other)->batch);
    if (rc != BKV_OK)
        return bkvpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *batch_approximate_size(BatchObject *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromSize_t(bkv_batch_approximate_size(self->batch));
}

static Py_ssize_t batch_len(BatchObject *self)
{
    return (Py_ssize_t)bkv_batch_count(self->batch);
}

static PyMethodDef batch_methods[] = {
    {"put", (PyCFunction)(void (*)(void))batch_put, METH_FASTCALL, "put(key, value): adds a put to the batch"},
    {"delete", (PyCFunction)batch_delete, METH_VARARGS, "delete(key): adds a delete to the batch"},
    {"clear", (PyCFunction)batch_clear, METH_NOARGS, "clear(): empties the batch"},
    {"write", (PyCFunction)batch_write, METH_NOARGS, "write(): applies the batch atomically, then empties it"},
    {"append", (PyCFunction)batch_append, METH_O, "append(other): adds the operations of another WriteBatch"},
    {"approximate_size", (PyCFunction)batch_approximate_size, METH_NOARGS,
     "approximate_size() -> int: the bytes the batch adds to the write-ahead log"},
    {"__enter__", (PyCFunction)batch_enter_ctx, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)batch_exit_ctx, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods batch_as_sequence = {.sq_length = (lenfunc)batch_len};

PyTypeObject bkvpy_batch_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bloomkv.WriteBatch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A batch of puts and deletes applied atomically (from DB.write_batch()). As a context manager it "
              "is written on exit, even when an exception leaves the block, unless transaction=True (then it is "
              "discarded).",
    .tp_methods = batch_methods,
    .tp_as_sequence = &batch_as_sequence,
};

