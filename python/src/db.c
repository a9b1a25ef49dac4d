/*
 * db.c — bloomkv.DB, bloomkv.WriteBatch and bloomkv.Snapshot.
 *
 * Each call that may read a file or take the engine's locks runs with the
 * GIL released, inside the database's guard (bkvpy.h), so that threads
 * sharing one DB run in parallel and close() never frees the handle under
 * a call in flight.
 */
#include "bkvpy.h"

#include <stdint.h>
#include <string.h>

/* ---- options ----------------------------------------------------------- */

typedef struct name_value {
    const char *name;
    int value;
} name_value;

static const name_value compressions[] = {
    {"none", BKV_COMPRESSION_NONE}, {"lz4", BKV_COMPRESSION_LZ4}, {"zstd", BKV_COMPRESSION_ZSTD}, {NULL, 0}};
static const name_value compaction_styles[] = {
    {"leveled", BKV_COMPACTION_LEVELED}, {"tiered", BKV_COMPACTION_TIERED}, {NULL, 0}};
static const name_value wal_recoveries[] = {{"absolute", BKV_WAL_RECOVERY_ABSOLUTE},
                                            {"point_in_time", BKV_WAL_RECOVERY_POINT_IN_TIME},
                                            {"skip_damaged", BKV_WAL_RECOVERY_SKIP_DAMAGED},
                                            {NULL, 0}};
static const name_value value_indexes[] = {{"none", BKV_VALUE_INDEX_NONE},
                                           {"flat", BKV_VALUE_INDEX_FLAT},
                                           {"hierarchy", BKV_VALUE_INDEX_HIERARCHY},
                                           {"bitsliced", BKV_VALUE_INDEX_BITSLICED},
                                           {"paged", BKV_VALUE_INDEX_PAGED},
                                           {NULL, 0}};

/* name (None: keep *out) -> value; 0 with InvalidArgumentError naming the choices. */
static int pick(const char *option, const char *name, const name_value *table, int *out)
{
    if (!name)
        return 1;
    for (const name_value *nv = table; nv->name; nv++)
        if (strcmp(nv->name, name) == 0) {
            *out = nv->value;
            return 1;
        }
    char choices[128] = "";
    for (const name_value *nv = table; nv->name; nv++) {
        strncat(choices, nv->name, sizeof choices - strlen(choices) - 1);
        if (nv[1].name)
            strncat(choices, ", ", sizeof choices - strlen(choices) - 1);
    }
    PyErr_Format(bkvpy_invalid_error, "%s = '%s' is not one of %s", option, name, choices);
    return 0;
}

/* A size option: None keeps the default; a negative number is refused. */
static int size_option(const char *option, PyObject *obj, size_t *out)
{
    if (!obj || obj == Py_None)
        return 1;
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an integer, not %s", option, Py_TYPE(obj)->tp_name);
        return 0;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(bkvpy_invalid_error, "%s must be a non-negative integer", option);
        return 0;
    }
    *out = (size_t)v;
    return 1;
}

/* The caller's terms extractor, called by the engine from any of its
 * threads: the GIL is taken for the call. An extractor that raises, or
 * returns something other than bytes-like terms, cannot fail the write
 * that called it, so the exception is reported as unraisable and the value
 * is indexed under its whole bytes (searches for the whole value still
 * find it). */
static void python_terms(void *arg, const void *val, size_t vlen, bkv_term_emit_fn emit, void *ctx)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *fn = arg;
    PyObject *terms = PyObject_CallFunction(fn, "y#", (const char *)val, (Py_ssize_t)vlen);
    PyObject *it = terms ? PyObject_GetIter(terms) : NULL;
    int failed = !it;
    for (PyObject *t; it && (t = PyIter_Next(it));) {
        bkvpy_bytes b;
        if (bkvpy_bytes_get(t, &b, "a term")) {
            emit(ctx, b.data, b.len);
            bkvpy_bytes_release(&b);
        } else {
            failed = 1;
        }
        Py_DECREF(t);
        if (failed)
            break;
    }
    if (PyErr_Occurred())
        failed = 1;
    if (failed) {
        PyErr_WriteUnraisable(fn);
        emit(ctx, val, vlen);
    }
    Py_XDECREF(it);
    Py_XDECREF(terms);
    PyGILState_Release(gil);
}

/* ---- DB ---------------------------------------------------------------- */

static PyObject *db_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    DBObject *self = (DBObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->guard.closed = 1;
    self->dependents.next = self->dependents.prev = &self->dependents;
    self->dependents_closing = 0;
    return (PyObject *)self;
}

static int db_init(DBObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"path", "create_if_missing", "error_if_exists", "filter", "bits_per_key",
                             "compression", "write_buffer_size", "max_write_buffer_number", "block_size",
                             "block_cache_size", "max_open_files", "memtable_filter", "compaction_style",
                             "max_background_jobs", "target_file_size", "wal_recovery", "file_mode",
                             "optimize_filters_for_hits", "value_index", "value_partition_entries", "terms",
                             "terms_name", "partition_filters", "filter_memory_budget",
                             /* plyvel's names for what bloomkv has, and what it leaves to LevelDB */
                             "lru_cache_size", "bloom_filter_bits", "paranoid_checks", "block_restart_interval",
                             "comparator", "comparator_name", "read_only", NULL};
    if (self->db) {
        PyErr_SetString(PyExc_RuntimeError, "DB is already open");
        return -1;
    }
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 0;
    PyObject *path = NULL, *write_buffer = NULL, *block_size = NULL, *cache = NULL, *file_size = NULL,
             *terms = Py_None, *budget = NULL, *lru_cache = NULL, *comparator = Py_None, *comparator_name = Py_None;
    int bloom_filter_bits = -1, paranoid_checks = 0, restart_interval = 16;
    const char *filter = NULL, *compression = NULL, *style = NULL, *recovery = NULL, *vindex = NULL,
               *terms_name = NULL;
    unsigned int file_mode = o.file_mode, partition_entries = o.value_partition_entries;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$ppzdzOiOOipziOzIpzIOzpOOipiOOp:DB", kwlist, &path,
                                     &o.create_if_missing, &o.error_if_exists, &filter, &o.bits_per_key,
                                     &compression, &write_buffer, &o.max_write_buffer_number, &block_size, &cache,
                                     &o.max_open_files, &o.memtable_filter, &style, &o.max_background_jobs,
                                     &file_size, &recovery, &file_mode, &o.optimize_filters_for_hits, &vindex,
                                     &partition_entries, &terms, &terms_name, &o.partition_filters, &budget,
                                     &lru_cache, &bloom_filter_bits, &paranoid_checks, &restart_interval,
                                     &comparator, &comparator_name, &o.read_only))
        return -1;
    /* Keys are ordered bytewise, LevelDB's default comparator: a database
     * asking for another would read back in another order. */
    if (comparator_name != Py_None && !PyBytes_Check(comparator_name)) {
        PyErr_SetString(PyExc_TypeError, "comparator_name must be bytes");
        return -1;
    }
    if (comparator != Py_None && !PyCallable_Check(comparator)) {
        PyErr_SetString(PyExc_TypeError, "comparator must be callable");
        return -1;
    }
    int bytewise = comparator_name == Py_None ||
                   strcmp(PyBytes_AS_STRING(comparator_name), "leveldb.BytewiseComparator") == 0;
    if (comparator == Py_None && !bytewise) {
        PyErr_SetString(bkvpy_invalid_error, "comparator_name names a comparator, but none is given");
        return -1;
    }
    if (comparator != Py_None) {
        PyErr_SetString(PyExc_NotImplementedError, "bloomkv orders keys bytewise only (leveldb.BytewiseComparator)");
        return -1;
    }
    /* LevelDB's block_restart_interval only tunes its block format; a
     * bloomkv block keeps a restart point every 16 entries. */
    if (restart_interval < 1) {
        PyErr_SetString(bkvpy_invalid_error, "block_restart_interval must be at least 1");
        return -1;
    }
    /* paranoid_checks: LevelDB then refuses damage it would otherwise
     * skip; so does bloomkv's default recovery (absolute), kept. */
    if (paranoid_checks)
        o.wal_recovery = BKV_WAL_RECOVERY_ABSOLUTE;
    if (bloom_filter_bits >= 0) {
        /* LevelDB's filter policy: a standard Bloom filter at that many bits a key, none at 0. */
        o.filter_type = bloom_filter_bits ? BKV_FILTER_BLOOM : BKV_FILTER_NONE;
        if (bloom_filter_bits)
            o.bits_per_key = bloom_filter_bits;
    }
    /* LevelDB compresses with Snappy, which bloomkv does not build in: LZ4
     * is the same kind of fast codec. */
    if (compression && strcmp(compression, "snappy") == 0)
        compression = "lz4";
    o.file_mode = file_mode;
    o.value_partition_entries = partition_entries;
    if (filter) {
        o.filter_type = bkv_filter_type_from_name(filter);
        if (o.filter_type < 0) {
            PyErr_Format(bkvpy_invalid_error, "filter = '%s' is not a filter type", filter);
            return -1;
        }
    }
    size_t target_file_size = (size_t)o.target_file_size, filter_budget = 0;
    if (!pick("compression", compression, compressions, &o.compression) ||
        !pick("compaction_style", style, compaction_styles, &o.compaction_style) ||
        !pick("wal_recovery", recovery, wal_recoveries, &o.wal_recovery) ||
        !pick("value_index", vindex, value_indexes, &o.value_index) ||
        !size_option("write_buffer_size", write_buffer, &o.write_buffer_size) ||
        !size_option("block_size", block_size, &o.block_size) ||
        !size_option("block_cache_size", cache, &o.block_cache_size) ||
        !size_option("lru_cache_size", lru_cache, &o.block_cache_size) ||
        !size_option("target_file_size", file_size, &target_file_size) ||
        !size_option("filter_memory_budget", budget, &filter_budget))
        return -1;
    o.target_file_size = target_file_size;
    o.filter_memory_budget = filter_budget;
    if (terms != Py_None) {
        if (!PyCallable_Check(terms)) {
            PyErr_SetString(PyExc_TypeError, "terms must be callable: value (bytes) -> iterable of bytes");
            return -1;
        }
        if (!terms_name || !*terms_name) {
            PyErr_SetString(bkvpy_invalid_error, "terms_name must name the terms extractor (it is recorded in "
                                                 "the database and checked at every open)");
            return -1;
        }
        self->terms_name = strdup(terms_name);
        if (!self->terms_name) {
            PyErr_NoMemory();
            return -1;
        }
        Py_INCREF(terms);
        self->terms = terms;
        o.value_terms = python_terms;
        o.value_terms_arg = terms;
        o.value_terms_name = self->terms_name;
    } else if (terms_name) {
        /* A built-in extractor ("words", "field:SEP:N", "prefix:N"). */
        if (!(self->terms_name = strdup(terms_name))) {
            PyErr_NoMemory();
            return -1;
        }
        o.value_terms_name = self->terms_name;
    }
    PyObject *path_bytes;
    if (!PyUnicode_FSConverter(path, &path_bytes))
        return -1;
    int rc;
    bkv_db *db = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = bkv_open(PyBytes_AS_STRING(path_bytes), &o, &db);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_bytes);
    if (rc != BKV_OK) {
        bkvpy_raise(rc, NULL);
        return -1;
    }
    self->db = db;
    self->guard.closed = 0;
    self->path = PyOS_FSPath(path);
    PyObject *module = PyImport_ImportModule("bloomkv");
    PyObject *open = module ? PyObject_GetAttrString(module, "_open_databases") : NULL;
    PyObject *r = open ? PyObject_CallMethod(open, "add", "O", self) : NULL;
    Py_XDECREF(module);
    Py_XDECREF(open);
    Py_XDECREF(r);
    return self->path && r ? 0 : -1;
}

static int db_close_handle(DBObject *self)
{
    if (!bkvpy_guard_close(&self->guard))
        return BKV_OK;
    while (self->dependents.next != &self->dependents) {
        bkvpy_dependent *d = self->dependents.next;
        /* An entry on the list has not begun its deallocation (that
         * unlinks it first), so the reference is safe to take. */
        PyObject *owner = Py_NewRef(d->owner);
        bkvpy_dependent_unlink(d);
        d->close(d);
        Py_DECREF(owner);
    }
    /* Some other thread may be destroying a handle it took off the list
     * itself: the engine refuses to close until it is gone. */
    bkvpy_wait_for_zero(&self->dependents_closing);
    bkv_db *db = self->db;
    self->db = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bkv_close(db);
    Py_END_ALLOW_THREADS
    return rc;
}

static PyObject *db_close(DBObject *self, PyObject *unused)
{
    (void)unused;
    int rc = db_close_handle(self);
    if (rc != BKV_OK)
        return bkvpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

static void db_dealloc(DBObject *self)
{
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (db_close_handle(self) != BKV_OK)
        PyErr_Clear();
    Py_XDECREF(self->path);
    Py_XDECREF(self->terms);
    free(self->terms_name);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *db_enter_ctx(DBObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *db_exit_ctx(DBObject *self, PyObject *args)
{
    (void)args;
    return db_close(self, NULL);
}

static PyObject *db_get_closed(DBObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->guard.closed);
}

static PyObject *db_get_path(DBObject *self, void *unused)
{
    (void)unused;
    if (!self->path)
        Py_RETURN_NONE;
    Py_INCREF(self->path);
    return self->path;
}

static PyObject *db_repr(DBObject *self)
{
    return PyUnicode_FromFormat("<bloomkv.DB %R%s>", self->path ? self->path : Py_None,
                                self->guard.closed ? " closed" : "");
}

static PyObject *db_put(DBObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"key", "value", "sync", NULL};
    PyObject *a[3] = {NULL, NULL, Py_False};
    if (!bkvpy_fast_args("put", args, nargs, kwnames, names, 2, 2, a))
        return NULL;
    PyObject *k = a[0], *v = a[1];
    int sync = PyObject_IsTrue(a[2]);
    if (sync < 0)
        return NULL;
    bkvpy_bytes key, val;
    if (!bkvpy_bytes_get_pair(k, v, &key, &val, "key", "value", 0))
        return NULL;
    PyObject *result = NULL;
    if (bkvpy_guard_enter(&self->guard, "DB")) {
        bkv_write_options wo;
        bkvpy_write_options(sync, &wo);
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = bkv_put(self->db, &wo, key.data, key.len, val.data, val.len);
        Py_END_ALLOW_THREADS
        result = rc == BKV_OK ? Py_NewRef(Py_None) : bkvpy_raise(rc, self->db);
        bkvpy_guard_leave(&self->guard);
    }
    bkvpy_bytes_release(&key);
    bkvpy_bytes_release(&val);
    return result;
}

static PyObject *db_delete(DBObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"key", "sync", NULL};
    PyObject *a[2] = {NULL, Py_False};
    if (!bkvpy_fast_args("delete", args, nargs, kwnames, names, 1, 1, a))
        return NULL;
    PyObject *k = a[0];
    int sync = PyObject_IsTrue(a[1]);
    if (sync < 0)
        return NULL;
    bkvpy_bytes key;
    if (!bkvpy_bytes_get(k, &key, "key"))
        return NULL;
    PyObject *result = NULL;
    if (bkvpy_guard_enter(&self->guard, "DB")) {
        bkv_write_options wo;
        bkvpy_write_options(sync, &wo);
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = bkv_delete(self->db, &wo, key.data, key.len);
        Py_END_ALLOW_THREADS
        result = rc == BKV_OK ? Py_NewRef(Py_None) : bkvpy_raise(rc, self->db);
        bkvpy_guard_leave(&self->guard);
    }
    bkvpy_bytes_release(&key);
    return result;
}

static void read_options(SnapshotObject *snap, bkv_read_options *ro)
{
    bkv_read_options_init(ro);
    ro->snapshot = snap ? snap->snap : NULL;
}

/* A truth value for a read option: 1/0, or -1 (an error is set). None
 * and NULL keep *out. */
static int read_flag(PyObject *obj, int *out)
{
    if (!obj || obj == Py_None)
        return 0;
    int v = PyObject_IsTrue(obj);
    if (v < 0)
        return -1;
    *out = v;
    return 0;
}

PyObject *bkvpy_get(DBObject *db, SnapshotObject *snap, PyObject *k, PyObject *dflt, PyObject *verify_checksums,
                    PyObject *fill_cache)
{
    bkv_read_options ro;
    read_options(snap, &ro);
    if (read_flag(verify_checksums, &ro.verify_checksums) || read_flag(fill_cache, &ro.fill_cache))
        return NULL;
    bkvpy_bytes key;
    if (!bkvpy_bytes_get(k, &key, "key"))
        return NULL;
    PyObject *result = NULL;
    if (bkvpy_guard_enter(&db->guard, "DB")) {
        void *val = NULL;
        size_t vlen = 0;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = bkv_get(db->db, &ro, key.data, key.len, &val, &vlen);
        Py_END_ALLOW_THREADS
        if (rc == BKV_OK) {
            result = PyBytes_FromStringAndSize(val, (Py_ssize_t)vlen);
            bkv_free(val);
        } else if (rc == BKV_NOTFOUND) {
            result = Py_NewRef(dflt);
        } else {
            bkvpy_raise(rc, db->db);
        }
        bkvpy_guard_leave(&db->guard);
    }
    bkvpy_bytes_release(&key);
    return result;
}

static PyObject *db_get(DBObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const names[] = {"key", "default", "snapshot", "verify_checksums", "fill_cache", NULL};
    PyObject *a[5] = {NULL, Py_None, Py_None, Py_None, Py_None};
    if (!bkvpy_fast_args("get", args, nargs, kwnames, names, 2, 1, a))
        return NULL;
    SnapshotObject *snap;
    if (!bkvpy_snapshot_enter(self, a[2], &snap))
        return NULL;
    PyObject *r = bkvpy_get(self, snap, a[0], a[1], a[3], a[4]);
    bkvpy_snapshot_leave(snap);
    return r;
}

PyObject *bkvpy_multi_get(DBObject *db, SnapshotObject *snap, PyObject *keys, PyObject *dflt)
{
    PyObject *seq = PySequence_Fast(keys, "keys must be a sequence of bytes-like objects");
    if (!seq)
        return NULL;
    size_t n = (size_t)PySequence_Fast_GET_SIZE(seq);
    bkvpy_bytes *held = PyMem_Calloc(n ? n : 1, sizeof *held);
    const void **kp = PyMem_Calloc(n ? n : 1, sizeof *kp);
    size_t *kl = PyMem_Calloc(n ? n : 1, sizeof *kl);
    void **vals = PyMem_Calloc(n ? n : 1, sizeof *vals);
    size_t *vl = PyMem_Calloc(n ? n : 1, sizeof *vl);
    int *st = PyMem_Calloc(n ? n : 1, sizeof *st);
    PyObject *result = NULL;
    size_t got = 0;
    if (!held || !kp || !kl || !vals || !vl || !st) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n; got++) {
        if (!bkvpy_bytes_get(PySequence_Fast_GET_ITEM(seq, got), &held[got], "key"))
            goto done;
        kp[got] = held[got].data;
        kl[got] = held[got].len;
    }
    if (!bkvpy_guard_enter(&db->guard, "DB"))
        goto done;
    bkv_read_options ro;
    read_options(snap, &ro);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bkv_multi_get(db->db, &ro, n, kp, kl, vals, vl, st);
    Py_END_ALLOW_THREADS
    if (rc != BKV_OK) {
        bkvpy_raise(rc, db->db);
        bkvpy_guard_leave(&db->guard);
        goto done;
    }
    int failed = BKV_OK;
    for (size_t i = 0; i < n; i++)
        if (st[i] < 0 && failed == BKV_OK)
            failed = st[i];
    if (failed != BKV_OK)
        bkvpy_raise(failed, db->db);
    bkvpy_guard_leave(&db->guard);
    result = failed == BKV_OK ? PyList_New((Py_ssize_t)n) : NULL;
    for (size_t i = 0; i < n; i++) {
        if (result) {
            PyObject *v = st[i] == BKV_OK ? PyBytes_FromStringAndSize(vals[i], (Py_ssize_t)vl[i]) : Py_NewRef(dflt);
            if (!v)
                Py_CLEAR(result);
            else
                PyList_SET_ITEM(result, (Py_ssize_t)i, v);
        }
        if (st[i] == BKV_OK)
            bkv_free(vals[i]);
    }
done:
    for (size_t i = 0; i < got; i++)
        bkvpy_bytes_release(&held[i]);
    PyMem_Free(held);
    PyMem_Free(kp);
    PyMem_Free(kl);
    PyMem_Free(vals);
    PyMem_Free(vl);
    PyMem_Free(st);
    Py_DECREF(seq);
    return result;
}

static PyObject *db_multi_get(DBObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"keys", "default", "snapshot", NULL};
    PyObject *keys, *dflt = Py_None, *snapshot = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$O:multi_get", kwlist, &keys, &dflt, &snapshot))
        return NULL;
    SnapshotObject *snap;
    if (!bkvpy_snapshot_enter(self, snapshot, &snap))
        return NULL;
    PyObject *r = bkvpy_multi_get(self, snap, keys, dflt);
    bkvpy_snapshot_leave(snap);
    return r;
}

/* Matches are copied into one growing C buffer while the GIL is released,
 * then turned into Python objects. */
typedef struct found {
    char *data;
    size_t len, cap;
    size_t count, limit;
    int keys_only, oom;
} found;

static int found_add(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    found *f = arg;
    if (f->keys_only)
        vlen = 0;
    size_t need = 2 * sizeof(size_t) + klen + vlen;
    if (f->len + need > f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4096;
        while (cap < f->len + need)
            cap *= 2;
        char *grown = realloc(f->data, cap);
        if (!grown) {
            f->oom = 1;
            return 1;
        }
        f->data = grown;
        f->cap = cap;
    }
    memcpy(f->data + f->len, &klen, sizeof klen);
    memcpy(f->data + f->len + sizeof klen, &vlen, sizeof vlen);
    memcpy(f->data + f->len + 2 * sizeof klen, key, klen);
    memcpy(f->data + f->len + 2 * sizeof klen + klen, val, vlen);
    f->len += need;
    return ++f->count >= f->limit;
}

/* The terms of a search: one bytes-like value, or a list or tuple of them. */
static int query_terms(PyObject *value, bkvpy_bytes *held, size_t *n)
{
    if (!PyList_Check(value) && !PyTuple_Check(value)) {
        *n = 1;
        return bkvpy_bytes_get(value, &held[0], "value");
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(value);
    if (count < 1 || count > 64) {
        PyErr_SetString(bkvpy_invalid_error, "a search takes 1 to 64 values");
        return 0;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (!bkvpy_bytes_get(PySequence_Fast_GET_ITEM(value, i), &held[i], "value")) {
            while (i-- > 0)
                bkvpy_bytes_release(&held[i]);
            return 0;
        }
    *n = (size_t)count;
    return 1;
}

PyObject *bkvpy_find_value(DBObject *db, PyObject *snapshot, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"value", "match", "limit", "keys_only", "snapshot", "after", NULL};
    PyObject *value, *limit_obj = Py_None, *snap_arg = Py_None, *after_obj = Py_None;
    const char *match = "all";
    int keys_only = 0;
    Py_ssize_t limit;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$sOpOO:find_value", kwlist, &value, &match, &limit_obj,
                                     &keys_only, &snap_arg, &after_obj) ||
        !bkvpy_limit_arg(limit_obj, &limit))
        return NULL;
    if (snapshot && snap_arg != Py_None) {
        PyErr_SetString(PyExc_TypeError, "a snapshot's find_value takes no snapshot argument");
        return NULL;
    }
    if (strcmp(match, "all") != 0 && strcmp(match, "any") != 0) {
        PyErr_Format(bkvpy_invalid_error, "match = '%s' is not 'all' or 'any'", match);
        return NULL;
    }
    unsigned mode = match[1] == 'l' ? BKV_FIND_ALL : BKV_FIND_ANY;
    SnapshotObject *snap;
    if (!bkvpy_snapshot_enter(db, snapshot ? snapshot : snap_arg, &snap))
        return NULL;
    bkvpy_bytes held[64], after = {0};
    const void *terms[64];
    size_t lens[64], n;
    if (after_obj != Py_None && !bkvpy_bytes_get(after_obj, &after, "after")) {
        bkvpy_snapshot_leave(snap);
        return NULL;
    }
    if (!query_terms(value, held, &n)) {
        bkvpy_bytes_release(&after);
        bkvpy_snapshot_leave(snap);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        terms[i] = held[i].data;
        lens[i] = held[i].len;
    }
    found f = {.limit = limit < 0 ? SIZE_MAX : (size_t)limit, .keys_only = keys_only};
    PyObject *list = NULL;
    if (limit == 0) {
        list = PyList_New(0);
    } else if (bkvpy_guard_enter(&db->guard, "DB")) {
        bkv_read_options ro;
        read_options(snap, &ro);
        bkv_find_options fo;
        bkv_find_options_init(&fo);
        fo.mode = mode;
        fo.keys_only = keys_only;
        fo.after = after_obj != Py_None ? (after.len ? after.data : "") : NULL;
        fo.after_len = after.len;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        bkv_find_iter *it;
        rc = bkv_find_iter_create(db->db, &ro, terms, lens, n, &fo, &it);
        while (rc == BKV_OK && (rc = bkv_find_iter_next(it)) == BKV_OK) {
            size_t kl, vl;
            const void *k = bkv_find_iter_key(it, &kl), *v = bkv_find_iter_value(it, &vl);
            if (found_add(&f, k, kl, v ? v : "", vl))
                break;
        }
        if (rc == BKV_NOTFOUND)
            rc = BKV_OK;
        bkv_find_iter_destroy(it);
        Py_END_ALLOW_THREADS
        if (rc != BKV_OK)
            bkvpy_raise(rc, db->db);
        else if (f.oom)
            PyErr_NoMemory();
        else
            list = PyList_New((Py_ssize_t)f.count);
        bkvpy_guard_leave(&db->guard);
    }
    bkvpy_snapshot_leave(snap);
    for (size_t i = 0, at = 0; list && i < f.count; i++) {
        size_t klen, vlen;
        memcpy(&klen, f.data + at, sizeof klen);
        memcpy(&vlen, f.data + at + sizeof klen, sizeof vlen);
        const char *k = f.data + at + 2 * sizeof klen;
        at += 2 * sizeof klen + klen + vlen;
        PyObject *item = keys_only ? PyBytes_FromStringAndSize(k, (Py_ssize_t)klen)
                                   : Py_BuildValue("(y#y#)", k, (Py_ssize_t)klen, k + klen, (Py_ssize_t)vlen);
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    free(f.data);
    for (size_t i = 0; i < n; i++)
        bkvpy_bytes_release(&held[i]);
    bkvpy_bytes_release(&after);
    if (!list)
        return NULL;
    PyObject *it = PyObject_GetIter(list);
    Py_DECREF(list);
    return it;
}

int bkvpy_limit_arg(PyObject *obj, Py_ssize_t *out)
{
    if (obj == Py_None) {
        *out = -1;
        return 1;
    }
    Py_ssize_t n = PyNumber_AsSsize_t(obj, PyExc_OverflowError);
    if (n == -1 && PyErr_Occurred())
        return 0;
    if (n < 0) {
        PyErr_SetString(bkvpy_invalid_error, "limit must be None or >= 0");
        return 0;
    }
    *out = n;
    return 1;
}

static PyObject *db_find_value(DBObject *self, PyObject *args, PyObject *kwargs)
{
    return bkvpy_find_value(self, NULL, args, kwargs);
}

static PyObject *db_write_batch(DBObject *self, PyObject *args, PyObject *kwargs)
{
    return bkvpy_batch_new(self, args, kwargs);
}

static PyObject *db_snapshot(DBObject *self, PyObject *unused)
{
    (void)unused;
    return bkvpy_snapshot_new(self);
}

static PyObject *db_iterator(DBObject *self, PyObject *args, PyObject *kwargs)
{
    return bkvpy_iterator_new(self, NULL, args, kwargs, NULL);
}

static PyObject *db_prefixed_db(DBObject *self, PyObject *prefix)
{
    return bkvpy_prefixed_db_new(self, prefix);
}

static PyObject *db_raw_iterator(DBObject *self, PyObject *args, PyObject *kwargs)
{
    return bkvpy_raw_iterator_new(self, Py_None, args, kwargs);
}

static PyObject *db_iter(DBObject *self)
{
    return bkvpy_iterator_new(self, NULL, NULL, NULL, NULL);
}

/* A string property from the engine, or None for an unknown name. */
/* A property from the engine as str (as_bytes: as bytes), or None for an
 * unknown name. */
static PyObject *property_text(DBObject *self, const char *name, int as_bytes)
{
    if (!bkvpy_guard_enter(&self->guard, "DB"))
        return NULL;
    char *text;
    Py_BEGIN_ALLOW_THREADS
    text = bkv_property(self->db, name);
    Py_END_ALLOW_THREADS
    bkvpy_guard_leave(&self->guard);
    if (!text)
        Py_RETURN_NONE;
    PyObject *s = as_bytes ? PyBytes_FromString(text) : PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
    bkv_free(text);
    return s;
}

static PyObject *db_property(DBObject *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s:property", &name))
        return NULL;
    return property_text(self, name, 0);
}

/* plyvel's get_property(name): bytes in, bytes out (None if unknown). */
static PyObject *db_get_property(DBObject *self, PyObject *name)
{
    if (!PyBytes_Check(name))
        return PyErr_Format(PyExc_TypeError, "get_property() takes bytes, not %s", Py_TYPE(name)->tp_name);
    return property_text(self, PyBytes_AS_STRING(name), 1);
}

static int set_item_steal(PyObject *dict, const char *key, PyObject *value)
{
    if (!value)
        return -1;
    int rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc;
}

/* Every counter, the files and bytes per level and the amplifications. */
static PyObject *db_stats(DBObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *counters = property_text(self, "bloomkv.counters", 0);
    if (!counters || counters == Py_None)
        return counters;
    PyObject *dict = PyDict_New();
    PyObject *lines = dict ? PyUnicode_Splitlines(counters, 0) : NULL;
    Py_DECREF(counters);
    if (!lines) {
        Py_XDECREF(dict);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lines); i++) {
        const char *line = PyUnicode_AsUTF8(PyList_GET_ITEM(lines, i));
        const char *space = line ? strchr(line, ' ') : NULL;
        if (!space)
            continue;
        PyObject *name = PyUnicode_FromStringAndSize(line, space - line);
        PyObject *value = PyLong_FromString(space + 1, NULL, 10);
        int rc = name && value ? PyDict_SetItem(dict, name, value) : -1;
        Py_XDECREF(name);
        Py_XDECREF(value);
        if (rc < 0) {
            Py_DECREF(lines);
            Py_DECREF(dict);
            return NULL;
        }
    }
    Py_DECREF(lines);
    PyObject *files = PyList_New(0), *bytes = PyList_New(0);
    int failed = !files || !bytes;
    for (int level = 0; level < BKV_MAX_LEVELS && !failed; level++) {
        char name[64];
        snprintf(name, sizeof name, "bloomkv.num-files-at-level%d", level);
        PyObject *f = property_text(self, name, 0);
        snprintf(name, sizeof name, "bloomkv.bytes-at-level%d", level);
        PyObject *b = property_text(self, name, 0);
        PyObject *fi = f && f != Py_None ? PyLong_FromUnicodeObject(f, 10) : NULL;
        PyObject *bi = b && b != Py_None ? PyLong_FromUnicodeObject(b, 10) : NULL;
        failed = !fi || !bi || PyList_Append(files, fi) < 0 || PyList_Append(bytes, bi) < 0;
        Py_XDECREF(f);
        Py_XDECREF(b);
        Py_XDECREF(fi);
        Py_XDECREF(bi);
    }
    static const char *const amplifications[] = {"write", "space", "read"};
    for (size_t i = 0; i < 3 && !failed; i++) {
        char name[64];
        snprintf(name, sizeof name, "bloomkv.%s-amplification", amplifications[i]);
        PyObject *text = property_text(self, name, 0);
        PyObject *value = text && text != Py_None ? PyFloat_FromString(text) : NULL;
        Py_XDECREF(text);
        snprintf(name, sizeof name, "%s-amplification", amplifications[i]);
        failed = set_item_steal(dict, name, value) < 0;
    }
    if (!failed) {
        failed = set_item_steal(dict, "files-at-level", files) < 0 || set_item_steal(dict, "bytes-at-level", bytes) < 0;
        files = bytes = NULL;
    }
    Py_XDECREF(files);
    Py_XDECREF(bytes);
    if (failed) {
        Py_DECREF(dict);
        return NULL;
    }
    return dict;
}

static PyObject *db_flush(DBObject *self, PyObject *unused)
{
    (void)unused;
    if (!bkvpy_guard_enter(&self->guard, "DB"))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bkv_flush(self->db);
    Py_END_ALLOW_THREADS
    PyObject *r = rc == BKV_OK ? Py_NewRef(Py_None) : bkvpy_raise(rc, self->db);
    bkvpy_guard_leave(&self->guard);
    return r;
}

static PyObject *db_try_catch_up(DBObject *self, PyObject *unused)
{
    (void)unused;
    if (!bkvpy_guard_enter(&self->guard, "DB"))
        return NULL;
    int rc, changed = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = bkv_try_catch_up(self->db, &changed);
    Py_END_ALLOW_THREADS
    PyObject *r = rc == BKV_OK ? PyBool_FromLong(changed) : bkvpy_raise(rc, self->db);
    bkvpy_guard_leave(&self->guard);
    return r;
}

/* A call over [start, stop) or [start, stop] (None: unbounded), the GIL
 * released: compact and delete_range. */
typedef int (*range_call)(bkv_db *db, const void *start, size_t slen, const void *stop, size_t elen);

static PyObject *on_range(DBObject *self, PyObject *args, PyObject *kwargs, const char *format, range_call call)
{
    static char *kwlist[] = {"start", "stop", NULL};
    PyObject *start_obj = Py_None, *stop_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, &start_obj, &stop_obj))
        return NULL;
    bkvpy_bytes start, stop;
    if (!bkvpy_bytes_get_pair(start_obj, stop_obj, &start, &stop, "start", "stop", 1))
        return NULL;
    PyObject *r = NULL;
    if (bkvpy_guard_enter(&self->guard, "DB")) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = call(self->db, start.data, start.len, stop.data, stop.len);
        Py_END_ALLOW_THREADS
        r = rc == BKV_OK ? Py_NewRef(Py_None) : bkvpy_raise(rc, self->db);
        bkvpy_guard_leave(&self->guard);
    }
    bkvpy_bytes_release(&start);
    bkvpy_bytes_release(&stop);
    return r;
}

static PyObject *db_compact(DBObject *self, PyObject *args, PyObject *kwargs)
{
    return on_range(self, args, kwargs, "|OO:compact", bkv_compact_range);
}

static int delete_range(bkv_db *db, const void *start, size_t slen, const void *stop, size_t elen)
{
    return bkv_delete_range(db, NULL, start, slen, stop, elen);
}

static PyObject *db_delete_range(DBObject *self, PyObject *args, PyObject *kwargs)
{
    return on_range(self, args, kwargs, "|OO:delete_range", delete_range);
}

static PyObject *db_approximate_size(DBObject *self, PyObject *args)
{
    PyObject *start_obj = Py_None, *stop_obj = Py_None;
    if (!PyArg_ParseTuple(args, "|OO:approximate_size", &start_obj, &stop_obj))
        return NULL;
    bkvpy_bytes start, stop;
    if (!bkvpy_bytes_get_pair(start_obj, stop_obj, &start, &stop, "start", "stop", 1))
        return NULL;
    PyObject *r = NULL;
    if (bkvpy_guard_enter(&self->guard, "DB")) {
        uint64_t bytes = 0;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = bkv_approximate_size(self->db, start.data, start.len, stop.data, stop.len, &bytes);
        Py_END_ALLOW_THREADS
        r = rc == BKV_OK ? PyLong_FromUnsignedLongLong(bytes) : bkvpy_raise(rc, self->db);
        bkvpy_guard_leave(&self->guard);
    }
    bkvpy_bytes_release(&start);
    bkvpy_bytes_release(&stop);
    return r;
}

/* plyvel's approximate_sizes(*ranges): one size per (start, stop). */
static PyObject *db_approximate_sizes(DBObject *self, PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *sizes = PyList_New(n);
    for (Py_ssize_t i = 0; sizes && i < n; i++) {
        PyObject *range = PyTuple_GET_ITEM(args, i);
        if (!PyTuple_Check(range) || PyTuple_GET_SIZE(range) != 2) {
            PyErr_Format(PyExc_TypeError, "approximate_sizes() takes (start, stop) tuples, not %s",
                         Py_TYPE(range)->tp_name);
            Py_CLEAR(sizes);
            break;
        }
        PyObject *one = db_approximate_size(self, range);
        if (!one)
            Py_CLEAR(sizes);
        else
            PyList_SET_ITEM(sizes, i, one);
    }
    return sizes;
}

static PyObject *db_checkpoint(DBObject *self, PyObject *args)
{
    PyObject *dir;
    if (!PyArg_ParseTuple(args, "O&:checkpoint", PyUnicode_FSConverter, &dir))
        return NULL;
    PyObject *r = NULL;
    if (bkvpy_guard_enter(&self->guard, "DB")) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = bkv_checkpoint(self->db, PyBytes_AS_STRING(dir));
        Py_END_ALLOW_THREADS
        r = rc == BKV_OK ? Py_NewRef(Py_None) : bkvpy_raise(rc, self->db);
        bkvpy_guard_leave(&self->guard);
    }
    Py_DECREF(dir);
    return r;
}

/* ---- the DB type ------------------------------------------------------- */

#define KW(fn) (PyCFunction)(void (*)(void))(fn), METH_VARARGS | METH_KEYWORDS
#define FAST(fn) (PyCFunction)(void (*)(void))(fn), METH_FASTCALL | METH_KEYWORDS

static PyMethodDef db_methods[] = {
    {"get", FAST(db_get), "get(key, default=None, *, snapshot=None, verify_checksums=None, fill_cache=None) -> "
                          "bytes, or default when absent"},
    {"put", FAST(db_put), "put(key, value, *, sync=False)"},
    {"delete", FAST(db_delete), "delete(key, *, sync=False)"},
    {"delete_range", KW(db_delete_range),
     "delete_range(start=None, stop=None): deletes every key in [start, stop) (None: unbounded) at once, in one "
     "synced record; tables wholly inside go at once when no snapshot is live"},
    {"multi_get", KW(db_multi_get),
     "multi_get(keys, default=None, *, snapshot=None) -> list of values (default where absent); the keys are "
     "looked up together, each table's filter probed for all of them at once"},
    {"write_batch", KW(db_write_batch), "write_batch(*, sync=False, transaction=False) -> WriteBatch"},
    {"iterator", KW(db_iterator),
     "iterator(*, start=None, stop=None, include_start=True, include_stop=False, prefix=None, reverse=False, "
     "include_key=True, include_value=True, snapshot=None) -> Iterator"},
    {"snapshot", (PyCFunction)db_snapshot, METH_NOARGS, "snapshot() -> Snapshot"},
    {"find_value", KW(db_find_value),
     "find_value(value, *, match='all', limit=None, keys_only=False, snapshot=None, after=None) -> iterator of (key, value), "
     "or of keys: the keys whose value holds value (needs a value index), in key order; value may be a list of "
     "values, matched all together (match='all') or any of them (match='any'); after: only keys greater than "
     "it (the last key of the previous page)"},
    {"property", (PyCFunction)db_property, METH_VARARGS,
     "property(name) -> str or None, e.g. 'bloomkv.stats', 'bloomkv.counter.gets'"},
    {"stats", (PyCFunction)db_stats, METH_NOARGS,
     "stats() -> dict: every counter, files-at-level, bytes-at-level and the amplifications"},
    {"flush", (PyCFunction)db_flush, METH_NOARGS, "flush(): writes the memtable to a table"},
    {"try_catch_up", (PyCFunction)db_try_catch_up, METH_NOARGS,
     "try_catch_up() -> bool: a DB opened with read_only=True reads the writer's manifest and WALs again and "
     "moves to what they hold now (True when that changed anything); iterators made before keep their state"},
    {"compact", KW(db_compact),
     "compact(start=None, stop=None): compacts the keys in [start, stop] (None: unbounded) down to the deepest "
     "level holding any of them, dropping overwritten versions and deletes no snapshot needs"},
    {"prefixed_db", (PyCFunction)db_prefixed_db, METH_O,
     "prefixed_db(prefix) -> PrefixedDB: the database seen through the keys starting with prefix (plyvel's)"},
    {"raw_iterator", KW(db_raw_iterator),
     "raw_iterator(*, verify_checksums=False, fill_cache=True) -> RawIterator (plyvel's)"},
    {"get_property", (PyCFunction)db_get_property, METH_O,
     "get_property(name: bytes) -> bytes, or None for an unknown name (b'leveldb.stats', b'leveldb.sstables', "
     "b'leveldb.num-files-at-level0' and the bloomkv names)"},
    {"compact_range", KW(db_compact), "compact_range(start=None, stop=None): plyvel's name for compact()"},
    {"approximate_sizes", (PyCFunction)db_approximate_sizes, METH_VARARGS,
     "approximate_sizes(*ranges) -> list: approximate_size() of each (start, stop)"},
    {"approximate_size", (PyCFunction)db_approximate_size, METH_VARARGS,
     "approximate_size(start=None, stop=None) -> bytes the tables take for keys in [start, stop)"},
    {"checkpoint", (PyCFunction)db_checkpoint, METH_VARARGS,
     "checkpoint(dir): a consistent copy of the database in the new directory dir (hard links where it can)"},
    {"close", (PyCFunction)db_close, METH_NOARGS,
     "close(): closes the iterators and snapshots still open, then the database"},
    {"__enter__", (PyCFunction)db_enter_ctx, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)db_exit_ctx, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef db_getset[] = {{"closed", (getter)db_get_closed, NULL, "True once closed", NULL},
                                  {"path", (getter)db_get_path, NULL, "the directory, as given", NULL},
                                  {"name", (getter)db_get_path, NULL, "the directory, as given (plyvel's name)", NULL},
                                  {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject bkvpy_db_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "bloomkv.DB",
    .tp_basicsize = sizeof(DBObject),
    .tp_dealloc = (destructor)db_dealloc,
    .tp_repr = (reprfunc)db_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "DB(path, *, create_if_missing=False, error_if_exists=False, filter='blocked', bits_per_key=10, "
              "compression=None, write_buffer_size=None, max_write_buffer_number=3, block_size=None, "
              "block_cache_size=None, max_open_files=1000, memtable_filter=True, compaction_style='leveled', "
              "max_background_jobs=2, target_file_size=None, wal_recovery='absolute', file_mode=0o644, "
              "optimize_filters_for_hits=False, value_index=None, value_partition_entries=128, terms=None, "
              "terms_name=None, partition_filters=False, filter_memory_budget=None)\n\nAn open bloomkv database. Keys and values are bytes. Safe to share between "
              "threads; every call that may wait for a disk or a lock releases the GIL.\n\n"
              "value_index: None, 'flat', 'hierarchy', 'bitsliced' or 'paged' enables find_value. terms: a callable "
              "mapping a value (bytes) to the terms it is found by (an iterable of bytes), recorded under "
              "terms_name; it runs on the engine's threads and must not raise.",
    .tp_methods = db_methods,
    .tp_getset = db_getset,
    .tp_init = (initproc)db_init,
    .tp_new = db_new,
    .tp_iter = (getiterfunc)db_iter,
    .tp_weaklistoffset = offsetof(DBObject, weakrefs),
};
