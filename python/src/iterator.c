/*
 * iterator.c — bloomkv.Iterator: a cursor over a key range, shaped like
 * plyvel's.
 *
 * The cursor sits between two entries: next() returns the entry after it
 * and moves past it, prev() the entry before it, so next() then prev()
 * return the same entry. In key order the cursor is before the first entry
 * of the range, after the last one, or just before the entry the engine's
 * iterator is positioned on (the entry next() returns). A reverse iterator
 * swaps next() and prev(); positions stay in key order.
 *
 * Ranges are the engine's iterator bounds (start inclusive, stop
 * exclusive; include_start=False and include_stop=True become the next
 * key after start or stop, the bound with a 0 byte appended), so entries
 * outside the range are never read.
 */
#include "bkvpy.h"

#include <string.h>

enum { BEFORE_START, ON_ENTRY, AFTER_STOP };

typedef struct IteratorObject {
    PyObject_HEAD
    bkvpy_dependent dep;
    DBObject *db;
    PyObject *snapshot;       /* kept alive while the iterator reads it */
    PyObject *lower, *upper;  /* bytes the bounds point into */
    bkv_iter *it;
    bkvpy_guard guard;
    int position;
    int reverse, include_key, include_value;
    PyObject *key_prefix;     /* a prefixed database's: keys are returned without it, or NULL */
} IteratorObject;

static void iterator_destroy_handle(IteratorObject *self)
{
    if (!bkvpy_guard_close(&self->guard))
        return;
    bkv_iter *it = self->it;
    self->it = NULL;
    Py_BEGIN_ALLOW_THREADS
    bkv_iter_destroy(it);
    Py_END_ALLOW_THREADS
}

static void iterator_close_dependent(bkvpy_dependent *dep)
{
    iterator_destroy_handle((IteratorObject *)((char *)dep - offsetof(IteratorObject, dep)));
}

/* bytes + "\0": the first key after b. */
static PyObject *key_after(PyObject *b)
{
    Py_ssize_t n = PyBytes_GET_SIZE(b);
    PyObject *r = PyBytes_FromStringAndSize(NULL, n + 1);
    if (r) {
        memcpy(PyBytes_AS_STRING(r), PyBytes_AS_STRING(b), (size_t)n);
        PyBytes_AS_STRING(r)[n] = 0;
    }
    return r;
}

/* The first key after every key starting with prefix, or None when there
 * is none (the prefix is all 0xff bytes). */
static PyObject *prefix_end(PyObject *prefix)
{
    Py_ssize_t n = PyBytes_GET_SIZE(prefix);
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(prefix);
    while (n > 0 && p[n - 1] == 0xff)
        n--;
    if (n == 0)
        Py_RETURN_NONE;
    /* A fresh object, filled here: bytes made from a one-byte string are a
     * shared, cached object that must never be written. */
    PyObject *r = PyBytes_FromStringAndSize(NULL, n);
    if (r) {
        memcpy(PyBytes_AS_STRING(r), p, (size_t)n);
        PyBytes_AS_STRING(r)[n - 1] = (char)(p[n - 1] + 1);
    }
    return r;
}

/* A bytes copy of a bytes-like bound (None stays None). */
static PyObject *bound_bytes(PyObject *obj, const char *what)
{
    if (obj == Py_None || PyBytes_CheckExact(obj))
        return Py_NewRef(obj);
    bkvpy_bytes b;
    if (!bkvpy_bytes_get(obj, &b, what))
        return NULL;
    PyObject *r = PyBytes_FromStringAndSize(b.data, (Py_ssize_t)b.len);
    bkvpy_bytes_release(&b);
    return r;
}

/* An iterator object of type over the engine's iterator at snapshot (a
 * Snapshot or None), ro set but for the snapshot; it takes lower and upper
 * (the bytes ro's bounds point into, or None), also when it fails (NULL,
 * with an exception). */
static IteratorObject *open_iterator(PyTypeObject *type, DBObject *db, PyObject *snapshot, bkv_read_options *ro,
                                     PyObject *lower, PyObject *upper)
{
    SnapshotObject *snap = NULL;
    int rc = BKV_INVALID;
    bkv_iter *it = NULL;
    if (bkvpy_snapshot_enter(db, snapshot, &snap)) {
        if (bkvpy_guard_enter(&db->guard, "DB")) {
            ro->snapshot = snap ? snap->snap : NULL;
            Py_BEGIN_ALLOW_THREADS
            rc = bkv_iter_create(db->db, ro, &it);
            Py_END_ALLOW_THREADS
            if (rc != BKV_OK)
                bkvpy_raise(rc, db->db);
            bkvpy_guard_leave(&db->guard);
        }
        bkvpy_snapshot_leave(snap);
    }
    IteratorObject *self = rc == BKV_OK ? PyObject_New(IteratorObject, type) : NULL;
    if (!self) {
        bkv_iter_destroy(it);
        Py_DECREF(lower);
        Py_DECREF(upper);
        return NULL;
    }
    self->db = (DBObject *)Py_NewRef(db);
    self->snapshot = Py_NewRef(snapshot);
    self->lower = lower;
    self->upper = upper;
    self->it = it;
    self->guard.closed = 0;
    self->guard.active = 0;
    self->position = BEFORE_START;
    self->reverse = 0;
    self->include_key = self->include_value = 1;
    self->key_prefix = NULL;
    self->dep.close = iterator_close_dependent;
    bkvpy_dependent_link(db, &self->dep, (PyObject *)self);
    return self;
}

PyObject *bkvpy_prefixed_key(PyObject *prefix, PyObject *key)
{
    bkvpy_bytes k;
    if (!bkvpy_bytes_get(key, &k, "key"))
        return NULL;
    Py_ssize_t pn = prefix ? PyBytes_GET_SIZE(prefix) : 0;
    PyObject *r = PyBytes_FromStringAndSize(NULL, pn + (Py_ssize_t)k.len);
    if (r) {
        if (pn)
            memcpy(PyBytes_AS_STRING(r), PyBytes_AS_STRING(prefix), (size_t)pn);
        if (k.len)
            memcpy(PyBytes_AS_STRING(r) + pn, k.data, k.len);
    }
    bkvpy_bytes_release(&k);
    return r;
}

/* A bound of a prefixed database's iterator: prefix + bound, or for no
 * bound the prefix itself (lower) or the first key after every key under
 * it (upper, None when there is none). Steals bound. */
static PyObject *under_prefix(PyObject *prefix, PyObject *bound, int upper)
{
    if (!bound || !prefix)
        return bound;
    PyObject *r = bound != Py_None ? bkvpy_prefixed_key(prefix, bound) : upper ? prefix_end(prefix) : Py_NewRef(prefix);
    Py_DECREF(bound);
    return r;
}

PyObject *bkvpy_iterator_new(DBObject *db, PyObject *snapshot, PyObject *args, PyObject *kwargs,
                             PyObject *key_prefix)
{
    static char *kwlist[] = {"start", "stop", "include_start", "include_stop", "prefix", "reverse",
                             "include_key", "include_value", "snapshot", NULL};
    PyObject *start = Py_None, *stop = Py_None, *prefix = Py_None, *snap_arg = Py_None;
    int include_start = 1, include_stop = 0, reverse = 0, include_key = 1, include_value = 1;
    PyObject *empty = NULL;
    if (!args)
        args = empty = PyTuple_New(0);
    int ok = args && PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOppOpppO:iterator", kwlist, &start, &stop,
                                                 &include_start, &include_stop, &prefix, &reverse, &include_key,
                                                 &include_value, &snap_arg);
    Py_XDECREF(empty);
    if (!ok)
        return NULL;
    if (snapshot && snap_arg != Py_None) {
        PyErr_SetString(PyExc_TypeError, "a snapshot's iterator takes no snapshot argument");
        return NULL;
    }
    if (!snapshot)
        snapshot = snap_arg;
    if (prefix != Py_None && (start != Py_None || stop != Py_None)) {
        PyErr_SetString(PyExc_TypeError, "prefix cannot be combined with start or stop");
        return NULL;
    }
    PyObject *lower = NULL, *upper = NULL;
    if (prefix != Py_None) {
        PyObject *p = bound_bytes(prefix, "prefix");
        if (!p)
            return NULL;
        lower = p;
        upper = prefix_end(p);
    } else {
        PyObject *s = bound_bytes(start, "start"), *e = s ? bound_bytes(stop, "stop") : NULL;
        if (!e) {
            Py_XDECREF(s);
            return NULL;
        }
        lower = s != Py_None && !include_start ? key_after(s) : Py_NewRef(s);
        upper = e != Py_None && include_stop ? key_after(e) : Py_NewRef(e);
        Py_DECREF(s);
        Py_DECREF(e);
    }
    lower = under_prefix(key_prefix, lower, 0);
    upper = under_prefix(key_prefix, upper, 1);
    if (!lower || !upper) {
        Py_XDECREF(lower);
        Py_XDECREF(upper);
        return NULL;
    }

    bkv_read_options ro;
    bkv_read_options_init(&ro);
    if (lower != Py_None) {
        ro.lower_bound = PyBytes_AS_STRING(lower);
        ro.lower_bound_len = (size_t)PyBytes_GET_SIZE(lower);
    }
    if (upper != Py_None) {
        ro.upper_bound = PyBytes_AS_STRING(upper);
        ro.upper_bound_len = (size_t)PyBytes_GET_SIZE(upper);
    }
    IteratorObject *self = open_iterator(&bkvpy_iterator_type, db, snapshot, &ro, lower, upper);
    if (!self)
        return NULL;
    self->position = reverse ? AFTER_STOP : BEFORE_START;
    self->reverse = reverse;
    self->include_key = include_key;
    self->include_value = include_value;
    self->key_prefix = Py_XNewRef(key_prefix);
    return (PyObject *)self;
}

static void iterator_dealloc(IteratorObject *self)
{
    bkvpy_dependent_close(self->db, &self->dep);
    Py_XDECREF(self->lower);
    Py_XDECREF(self->upper);
    Py_XDECREF(self->key_prefix);
    Py_XDECREF(self->snapshot);
    Py_XDECREF(self->db);
    PyObject_Free(self);
}

/* One thread moves an iterator at a time (as in the C API): a second one
 * gets an error instead of racing it. */
static int iterator_enter(IteratorObject *self)
{
    if (self->guard.active) {
        PyErr_SetString(PyExc_RuntimeError, "Iterator is in use by another thread");
        return 0;
    }
    return bkvpy_guard_enter(&self->guard, "Iterator");
}

enum move { SEEK_FIRST, SEEK_LAST, SEEK, NEXT, PREV };

/* Moves the engine's iterator with the GIL released; 1 when it is on an
 * entry, 0 when off the range, -1 with an exception on an error. */
static int move(IteratorObject *self, enum move m, const char *key, size_t klen)
{
    bkv_iter *it = self->it;
    int valid, rc = BKV_OK;
    Py_BEGIN_ALLOW_THREADS
    switch (m) {
    case SEEK_FIRST: bkv_iter_seek_to_first(it); break;
    case SEEK_LAST: bkv_iter_seek_to_last(it); break;
    case SEEK: bkv_iter_seek(it, key, klen); break;
    case NEXT: bkv_iter_next(it); break;
    case PREV: bkv_iter_prev(it); break;
    }
    valid = bkv_iter_valid(it);
    if (!valid)
        rc = bkv_iter_status(it);
    Py_END_ALLOW_THREADS
    if (rc != BKV_OK) {
        bkvpy_raise(rc, self->db->db);
        return -1;
    }
    return valid;
}

static PyObject *current_item(IteratorObject *self)
{
    size_t klen = 0, vlen = 0;
    const char *k = self->include_key ? bkv_iter_key(self->it, &klen) : NULL;
    const void *v = self->include_value ? bkv_iter_value(self->it, &vlen) : NULL;
    if (k && self->key_prefix) { /* the bounds keep every key under it */
        k += PyBytes_GET_SIZE(self->key_prefix);
        klen -= (size_t)PyBytes_GET_SIZE(self->key_prefix);
    }
    if (!self->include_key && !self->include_value)
        Py_RETURN_NONE; /* plyvel's: an entry is there, nothing of it asked for */
    if (!self->include_value)
        return PyBytes_FromStringAndSize(k, (Py_ssize_t)klen);
    if (!self->include_key)
        return PyBytes_FromStringAndSize(v, (Py_ssize_t)vlen);
    return Py_BuildValue("(y#y#)", (const char *)k, (Py_ssize_t)klen, (const char *)v, (Py_ssize_t)vlen);
}

/* The entry after the cursor, moving past it; NULL with no exception at
 * the end. */
static PyObject *step_forward(IteratorObject *self)
{
    if (self->position == AFTER_STOP)
        return NULL;
    if (self->position == BEFORE_START) {
        int on = move(self, SEEK_FIRST, NULL, 0);
        if (on < 0)
            return NULL;
        if (!on) {
            self->position = AFTER_STOP;
            return NULL;
        }
        self->position = ON_ENTRY;
    }
    PyObject *item = current_item(self);
    if (!item)
        return NULL;
    int on = move(self, NEXT, NULL, 0);
    if (on < 0) {
        Py_DECREF(item);
        return NULL;
    }
    if (!on)
        self->position = AFTER_STOP;
    return item;
}

/* The entry before the cursor, moving before it. */
static PyObject *step_backward(IteratorObject *self)
{
    if (self->position == BEFORE_START)
        return NULL;
    int on = move(self, self->position == AFTER_STOP ? SEEK_LAST : PREV, NULL, 0);
    if (on < 0)
        return NULL;
    if (!on) {
        self->position = BEFORE_START;
        return NULL;
    }
    self->position = ON_ENTRY;
    return current_item(self);
}

static PyObject *iterator_step(IteratorObject *self, int forward)
{
    if (!iterator_enter(self))
        return NULL;
    PyObject *item = forward ? step_forward(self) : step_backward(self);
    bkvpy_guard_leave(&self->guard);
    return item;
}

static PyObject *iterator_next(IteratorObject *self)
{
    return iterator_step(self, !self->reverse);
}

static PyObject *iterator_prev(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *item = iterator_step(self, self->reverse);
    if (!item && !PyErr_Occurred())
        PyErr_SetNone(PyExc_StopIteration);
    return item;
}

static PyObject *iterator_seek(IteratorObject *self, PyObject *arg)
{
    PyObject *full = self->key_prefix ? bkvpy_prefixed_key(self->key_prefix, arg) : Py_NewRef(arg);
    bkvpy_bytes target;
    if (!full || !bkvpy_bytes_get(full, &target, "target")) {
        Py_XDECREF(full);
        return NULL;
    }
    if (!iterator_enter(self)) {
        bkvpy_bytes_release(&target);
        Py_DECREF(full);
        return NULL;
    }
    /* The cursor goes before the first key >= target in either direction
     * (plyvel's rule): reversed, next() then returns the last key < target
     * and prev() the first key >= target. */
    int on = move(self, SEEK, target.data, target.len);
    if (on >= 0)
        self->position = on ? ON_ENTRY : AFTER_STOP;
    bkvpy_guard_leave(&self->guard);
    bkvpy_bytes_release(&target);
    Py_DECREF(full);
    if (on < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *iterator_reposition(IteratorObject *self, int position)
{
    if (!iterator_enter(self))
        return NULL;
    self->position = position;
    bkvpy_guard_leave(&self->guard);
    Py_RETURN_NONE;
}

static PyObject *iterator_seek_to_start(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    return iterator_reposition(self, BEFORE_START);
}

static PyObject *iterator_seek_to_stop(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    return iterator_reposition(self, AFTER_STOP);
}

static PyObject *iterator_close(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    bkvpy_dependent_close(self->db, &self->dep);
    Py_RETURN_NONE;
}

static PyObject *iterator_enter_ctx(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *iterator_exit_ctx(IteratorObject *self, PyObject *args)
{
    (void)args;
    return iterator_close(self, NULL);
}

static PyMethodDef iterator_methods[] = {
    {"prev", (PyCFunction)iterator_prev, METH_NOARGS,
     "prev(): the entry before the cursor (StopIteration at the start); next() then returns it again"},
    {"seek", (PyCFunction)iterator_seek, METH_O,
     "seek(target): next() returns the first key >= target (reversed: the last key <= target)"},
    {"seek_to_start", (PyCFunction)iterator_seek_to_start, METH_NOARGS, "seek_to_start(): before the first key"},
    {"seek_to_stop", (PyCFunction)iterator_seek_to_stop, METH_NOARGS, "seek_to_stop(): after the last key"},
    {"close", (PyCFunction)iterator_close, METH_NOARGS, "close(): frees the iterator (also on garbage collection)"},
    {"__enter__", (PyCFunction)iterator_enter_ctx, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)iterator_exit_ctx, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

PyTypeObject bkvpy_iterator_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bloomkv.Iterator",
    .tp_basicsize = sizeof(IteratorObject),
    .tp_dealloc = (destructor)iterator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An iterator over a key range at one point in time (from DB.iterator() or Snapshot.iterator()); "
              "yields (key, value), or keys or values alone.",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)iterator_next,
    .tp_methods = iterator_methods,
};

/*
 * bloomkv.RawIterator: LevelDB's iterator as plyvel's raw_iterator()
 * gives it, for code written against it: positioned on an entry or not
 * valid, moved by seek_to_first/seek_to_last/seek/next/prev, read by
 * key/value/item; reading or moving an iterator that is not on an entry
 * raises IteratorInvalidError.
 */
PyObject *bkvpy_raw_iterator_new(DBObject *db, PyObject *snapshot, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"verify_checksums", "fill_cache", NULL};
    int verify_checksums = 0, fill_cache = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$pp:raw_iterator", kwlist, &verify_checksums, &fill_cache))
        return NULL;
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.verify_checksums = verify_checksums;
    ro.fill_cache = fill_cache;
    return (PyObject *)open_iterator(&bkvpy_raw_iterator_type, db, snapshot, &ro, Py_NewRef(Py_None),
                                     Py_NewRef(Py_None));
}

/* Moves it (on_entry: only from an entry); NULL with an exception, else None. */
static PyObject *raw_move(IteratorObject *self, enum move m, PyObject *target, int on_entry)
{
    bkvpy_bytes t = {0};
    if (target && !bkvpy_bytes_get(target, &t, "target"))
        return NULL;
    int on = -1;
    if (iterator_enter(self)) {
        if (on_entry && !bkv_iter_valid(self->it))
            PyErr_SetString(bkvpy_iterator_invalid_error, "the iterator is not on an entry");
        else
            on = move(self, m, t.data, t.len);
        bkvpy_guard_leave(&self->guard);
    }
    if (target)
        bkvpy_bytes_release(&t);
    return on < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *raw_seek_to_first(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    return raw_move(self, SEEK_FIRST, NULL, 0);
}

static PyObject *raw_seek_to_last(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    return raw_move(self, SEEK_LAST, NULL, 0);
}

static PyObject *raw_seek(IteratorObject *self, PyObject *target) { return raw_move(self, SEEK, target, 0); }

static PyObject *raw_next(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    return raw_move(self, NEXT, NULL, 1);
}

static PyObject *raw_prev(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    return raw_move(self, PREV, NULL, 1);
}

static PyObject *raw_valid(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    if (!iterator_enter(self))
        return NULL;
    int valid = bkv_iter_valid(self->it);
    bkvpy_guard_leave(&self->guard);
    return PyBool_FromLong(valid);
}

/* The entry it is on: key, value or both (what: 'k', 'v' or 'i'). */
static PyObject *raw_read(IteratorObject *self, char what)
{
    if (!iterator_enter(self))
        return NULL;
    PyObject *r = NULL;
    if (!bkv_iter_valid(self->it)) {
        PyErr_SetString(bkvpy_iterator_invalid_error, "the iterator is not on an entry");
    } else {
        size_t klen, vlen;
        const char *k = bkv_iter_key(self->it, &klen), *v = bkv_iter_value(self->it, &vlen);
        r = what == 'k'   ? PyBytes_FromStringAndSize(k, (Py_ssize_t)klen)
            : what == 'v' ? PyBytes_FromStringAndSize(v, (Py_ssize_t)vlen)
                          : Py_BuildValue("(y#y#)", k, (Py_ssize_t)klen, v, (Py_ssize_t)vlen);
    }
    bkvpy_guard_leave(&self->guard);
    return r;
}

static PyObject *raw_key(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    return raw_read(self, 'k');
}

static PyObject *raw_value(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    return raw_read(self, 'v');
}

static PyObject *raw_item(IteratorObject *self, PyObject *unused)
{
    (void)unused;
    return raw_read(self, 'i');
}

static PyMethodDef raw_iterator_methods[] = {
    {"valid", (PyCFunction)raw_valid, METH_NOARGS, "valid() -> bool: whether it is on an entry"},
    {"seek_to_first", (PyCFunction)raw_seek_to_first, METH_NOARGS, "seek_to_first(): onto the first entry"},
    {"seek_to_last", (PyCFunction)raw_seek_to_last, METH_NOARGS, "seek_to_last(): onto the last entry"},
    {"seek", (PyCFunction)raw_seek, METH_O, "seek(target): onto the first entry whose key is >= target"},
    {"next", (PyCFunction)raw_next, METH_NOARGS, "next(): onto the next entry"},
    {"prev", (PyCFunction)raw_prev, METH_NOARGS, "prev(): onto the previous entry"},
    {"key", (PyCFunction)raw_key, METH_NOARGS, "key() -> bytes"},
    {"value", (PyCFunction)raw_value, METH_NOARGS, "value() -> bytes"},
    {"item", (PyCFunction)raw_item, METH_NOARGS, "item() -> (key, value)"},
    {"close", (PyCFunction)iterator_close, METH_NOARGS, "close(): frees the iterator (also on garbage collection)"},
    {"__enter__", (PyCFunction)iterator_enter_ctx, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)iterator_exit_ctx, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

PyTypeObject bkvpy_raw_iterator_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bloomkv.RawIterator",
    .tp_basicsize = sizeof(IteratorObject),
    .tp_dealloc = (destructor)iterator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "LevelDB's iterator, as plyvel's raw_iterator() (from DB.raw_iterator() or "
              "Snapshot.raw_iterator()): on an entry or not valid; reading or moving one that is not on an "
              "entry raises IteratorInvalidError.",
    .tp_methods = raw_iterator_methods,
};
