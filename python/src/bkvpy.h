/*
 * bkvpy.h — what the parts of the Python extension share.
 *
 * Every object that holds an engine handle guards it the same way: calls
 * run with the GIL released (so other threads go on while one waits for a
 * disk), and a close from another thread must not free the handle under
 * them. A guard counts the calls under way; it is read and changed only
 * with the GIL held, and close waits (with the GIL released) until the
 * count drops to zero before it frees anything.
 */
#ifndef BKVPY_H
#define BKVPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "bloomkv.h"
#include "bloomkv_filter.h"

typedef struct bkvpy_guard {
    int closed;
    long active;
} bkvpy_guard;

/* 1 and one more call under way, or 0 with an exception set (closed). */
int bkvpy_guard_enter(bkvpy_guard *g, const char *what);
void bkvpy_guard_leave(bkvpy_guard *g);
/* Marks the guard closed and waits for the calls under way to end. 0 when
 * it was already closed. */
int bkvpy_guard_close(bkvpy_guard *g);
/* Waits, the GIL released, until another thread brings *count to 0. */
void bkvpy_wait_for_zero(const long *count);

/* Objects that must be closed before their database (iterators and
 * snapshots) sit on its list of dependents. owner is the Python object
 * the entry lives in: closing one waits with the GIL released, and the
 * database holds owner meanwhile so that its own thread cannot free it. */
typedef struct bkvpy_dependent {
    struct bkvpy_dependent *prev, *next;
    void (*close)(struct bkvpy_dependent *self);
    PyObject *owner;
} bkvpy_dependent;

typedef struct DBObject {
    PyObject_HEAD
    bkv_db *db;
    bkvpy_guard guard;
    PyObject *path;          /* str, as given */
    PyObject *terms;         /* the caller's terms extractor, or NULL */
    char *terms_name;
    bkvpy_dependent dependents; /* list head */
    long dependents_closing;    /* taken off the list, their handles not yet destroyed */
    PyObject *weakrefs;      /* the module's set of open databases holds a weak reference */
} DBObject;

typedef struct SnapshotObject {
    PyObject_HEAD
    bkvpy_dependent dep;
    DBObject *db;
    const bkv_snapshot *snap;
    bkvpy_guard guard;
    PyObject *key_prefix; /* bytes: a prefixed database's snapshot (its keys live under it), or NULL */
} SnapshotObject;

extern PyTypeObject bkvpy_db_type;
extern PyTypeObject bkvpy_batch_type;
extern PyTypeObject bkvpy_snapshot_type;
extern PyTypeObject bkvpy_iterator_type, bkvpy_raw_iterator_type, bkvpy_prefixed_db_type;
extern PyTypeObject bkvpy_filter_type;

extern PyObject *bkvpy_error, *bkvpy_corruption_error, *bkvpy_io_error, *bkvpy_invalid_error,
    *bkvpy_busy_error, *bkvpy_full_error, *bkvpy_iterator_invalid_error;

/* Raises the exception for status rc with the engine's message (call on the
 * thread that made the failing call: messages are per thread). NULL. */
PyObject *bkvpy_raise(int rc, bkv_db *db);

/* A bytes-like argument (bytes, bytearray, memoryview, ...): str is refused
 * with TypeError. Release with bkvpy_bytes_release. */
typedef struct bkvpy_bytes {
    const char *data;
    size_t len;
    Py_buffer view;
    int has_view;
} bkvpy_bytes;
int bkvpy_bytes_get(PyObject *obj, bkvpy_bytes *out, const char *what);
void bkvpy_bytes_release(bkvpy_bytes *b);
/* Two such arguments (with none_ok, None gives NULL and 0), both or neither. */
int bkvpy_bytes_get_pair(PyObject *a, PyObject *b, bkvpy_bytes *out_a, bkvpy_bytes *out_b, const char *what_a,
                         const char *what_b, int none_ok);

/* The arguments of a METH_FASTCALL | METH_KEYWORDS call (the hot calls,
 * where PyArg_ParseTupleAndKeywords would cost more than the engine):
 * positional ones first (at most max_positional), then keywords by name.
 * out[i] keeps what the caller put there (NULL or a default) when the
 * argument is not passed; the first required ones must be. Borrowed
 * references. 0 with TypeError. */
int bkvpy_fast_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                    const char *const *names, Py_ssize_t max_positional, Py_ssize_t required, PyObject **out);

void bkvpy_dependent_link(DBObject *db, bkvpy_dependent *dep, PyObject *owner);
void bkvpy_dependent_unlink(bkvpy_dependent *dep);
/* Closes dep from its own side (close() or deallocation): off the list,
 * then its handle destroyed, with db's close waiting for the destruction
 * to end before it closes the engine. */
void bkvpy_dependent_close(DBObject *db, bkvpy_dependent *dep);

/* The snapshot argument of a read: None or a Snapshot of this database,
 * entered (bkvpy_snapshot_leave after the call). 0 with an exception. */
int bkvpy_snapshot_enter(DBObject *db, PyObject *arg, SnapshotObject **out);
void bkvpy_snapshot_leave(SnapshotObject *s);

static inline void bkvpy_write_options(int sync, bkv_write_options *wo)
{
    bkv_write_options_init(wo);
    wo->sync = sync;
}

/* A limit argument: None -> -1, else a count >= 0. 0 with an exception. */
int bkvpy_limit_arg(PyObject *obj, Py_ssize_t *out);

PyObject *bkvpy_batch_new(DBObject *db, PyObject *args, PyObject *kwargs);
PyObject *bkvpy_snapshot_new(DBObject *db);

/* Shared by DB and Snapshot. */
/* verify_checksums, fill_cache: Python truth values for the read options,
 * NULL or None for the defaults (plyvel's get takes both). */
PyObject *bkvpy_get(DBObject *db, SnapshotObject *snap, PyObject *key, PyObject *dflt, PyObject *verify_checksums,
                    PyObject *fill_cache);
PyObject *bkvpy_multi_get(DBObject *db, SnapshotObject *snap, PyObject *keys, PyObject *dflt);
/* key_prefix: the iterator of a prefixed database (keys under it, given
 * and returned without it), or NULL. */
PyObject *bkvpy_iterator_new(DBObject *db, PyObject *snapshot, PyObject *args, PyObject *kwargs,
                             PyObject *key_prefix);
/* prefix + key as new bytes (key bytes-like; prefix NULL: key as bytes). */
PyObject *bkvpy_prefixed_key(PyObject *prefix, PyObject *key);
/* Makes a write batch put and delete its keys under prefix. */
void bkvpy_batch_set_prefix(PyObject *batch, PyObject *prefix);
/* plyvel's PrefixedDB: db seen through the keys starting with prefix. */
PyObject *bkvpy_prefixed_db_new(DBObject *db, PyObject *prefix);
PyObject *bkvpy_raw_iterator_new(DBObject *db, PyObject *snapshot, PyObject *args, PyObject *kwargs);
PyObject *bkvpy_find_value(DBObject *db, PyObject *snapshot, PyObject *args, PyObject *kwargs);

/* The module's entry point (module.c). */
PyMODINIT_FUNC PyInit_bloomkv(void);

#endif
