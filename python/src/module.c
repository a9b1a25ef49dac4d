/*
 * module.c — the bloomkv Python module: exceptions, helpers every type
 * uses, and the module-level functions (check, destroy_db).
 */
#include "bkvpy.h"

#include <sched.h>

#define BKVPY_STRINGIFY(x) #x
#define BKVPY_VERSION_OF(a, b, c) BKVPY_STRINGIFY(a) "." BKVPY_STRINGIFY(b) "." BKVPY_STRINGIFY(c)
#define BKVPY_VERSION BKVPY_VERSION_OF(BKV_VERSION_MAJOR, BKV_VERSION_MINOR, BKV_VERSION_PATCH)

PyObject *bkvpy_error, *bkvpy_corruption_error, *bkvpy_io_error, *bkvpy_invalid_error, *bkvpy_busy_error,
    *bkvpy_full_error, *bkvpy_iterator_invalid_error;

PyObject *bkvpy_raise(int rc, bkv_db *db)
{
    const char *msg = bkv_errmsg(db);
    if ((!msg || !*msg) && db)
        msg = bkv_errmsg(NULL);
    if (!msg || !*msg)
        msg = bkv_strerror(rc);
    PyObject *type;
    switch (rc) {
    case BKV_CORRUPTION: type = bkvpy_corruption_error; break;
    case BKV_IOERROR: type = bkvpy_io_error; break;
    case BKV_INVALID: type = bkvpy_invalid_error; break;
    case BKV_BUSY: type = bkvpy_busy_error; break;
    case BKV_FULL: type = bkvpy_full_error; break;
    case BKV_NOMEM: return PyErr_NoMemory();
    default: type = bkvpy_error; break;
    }
    PyErr_SetString(type, msg);
    return NULL;
}

int bkvpy_bytes_get(PyObject *obj, bkvpy_bytes *out, const char *what)
{
    out->has_view = 0;
    if (PyBytes_Check(obj)) {
        out->data = PyBytes_AS_STRING(obj);
        out->len = (size_t)PyBytes_GET_SIZE(obj);
        return 1;
    }
    if (PyUnicode_Check(obj) || !PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes-like, not %.80s", what, Py_TYPE(obj)->tp_name);
        return 0;
    }
    if (PyObject_GetBuffer(obj, &out->view, PyBUF_SIMPLE) < 0)
        return 0;
    out->has_view = 1;
    out->data = out->view.buf;
    out->len = (size_t)out->view.len;
    return 1;
}

int bkvpy_bytes_get_pair(PyObject *a, PyObject *b, bkvpy_bytes *out_a, bkvpy_bytes *out_b, const char *what_a,
                         const char *what_b, int none_ok)
{
    memset(out_a, 0, sizeof *out_a);
    memset(out_b, 0, sizeof *out_b);
    if (!(none_ok && a == Py_None) && !bkvpy_bytes_get(a, out_a, what_a))
        return 0;
    if (!(none_ok && b == Py_None) && !bkvpy_bytes_get(b, out_b, what_b)) {
        bkvpy_bytes_release(out_a);
        return 0;
    }
    return 1;
}

void bkvpy_bytes_release(bkvpy_bytes *b)
{
    if (b->has_view)
        PyBuffer_Release(&b->view);
    b->has_view = 0;
}

int bkvpy_fast_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                    const char *const *names, Py_ssize_t max_positional, Py_ssize_t required, PyObject **out)
{
    if (nargs > max_positional) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %zd positional arguments (%zd given)", fname,
                     max_positional, nargs);
        return 0;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, j);
        Py_ssize_t i = 0;
        while (names[i] && PyUnicode_CompareWithASCIIString(kw, names[i]) != 0)
            i++;
        if (!names[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname, kw);
            return 0;
        }
        if (i < nargs) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname, names[i]);
            return 0;
        }
        out[i] = args[nargs + j];
    }
    for (Py_ssize_t i = 0; i < required; i++)
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname, names[i]);
            return 0;
        }
    return 1;
}

int bkvpy_guard_enter(bkvpy_guard *g, const char *what)
{
    if (g->closed) {
        PyErr_Format(PyExc_RuntimeError, "%s is closed", what);
        return 0;
    }
    g->active++;
    return 1;
}

void bkvpy_guard_leave(bkvpy_guard *g)
{
    g->active--;
}

int bkvpy_guard_close(bkvpy_guard *g)
{
    if (g->closed)
        return 0;
    g->closed = 1;
    bkvpy_wait_for_zero(&g->active);
    return 1;
}

void bkvpy_wait_for_zero(const long *count)
{
    while (*count > 0) {
        Py_BEGIN_ALLOW_THREADS
        sched_yield();
        Py_END_ALLOW_THREADS
    }
}

void bkvpy_dependent_link(DBObject *db, bkvpy_dependent *dep, PyObject *owner)
{
    dep->owner = owner;
    bkvpy_dependent *head = &db->dependents;
    dep->next = head->next;
    dep->prev = head;
    head->next->prev = dep;
    head->next = dep;
}

void bkvpy_dependent_unlink(bkvpy_dependent *dep)
{
    if (!dep->next)
        return;
    dep->prev->next = dep->next;
    dep->next->prev = dep->prev;
    dep->prev = dep->next = NULL;
}

void bkvpy_dependent_close(DBObject *db, bkvpy_dependent *dep)
{
    int listed = dep->next != NULL;
    if (listed) {
        bkvpy_dependent_unlink(dep);
        db->dependents_closing++;
    }
    dep->close(dep);
    if (listed)
        db->dependents_closing--;
}

static void collect_problem(void *arg, const char *problem)
{
    /* Called on this thread with the GIL released: the text is kept in C
     * and turned into str objects afterwards. */
    char ***list = arg;
    size_t n = 0;
    while (*list && (*list)[n])
        n++;
    char **grown = realloc(*list, (n + 2) * sizeof **list);
    if (!grown)
        return;
    grown[n] = strdup(problem);
    grown[n + 1] = NULL;
    *list = grown;
}

static PyObject *py_check(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *path_bytes;
    if (!PyArg_ParseTuple(args, "O&:check", PyUnicode_FSConverter, &path_bytes))
        return NULL;
    char **problems = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bkv_check(PyBytes_AS_STRING(path_bytes), collect_problem, &problems);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_bytes);
    PyObject *list = NULL;
    if (rc == BKV_OK || rc == BKV_CORRUPTION) {
        list = PyList_New(0);
        for (size_t i = 0; list && problems && problems[i]; i++) {
            PyObject *s = PyUnicode_DecodeUTF8(problems[i], (Py_ssize_t)strlen(problems[i]), "replace");
            if (!s || PyList_Append(list, s) < 0)
                Py_CLEAR(list);
            Py_XDECREF(s);
        }
    } else {
        bkvpy_raise(rc, NULL);
    }
    for (size_t i = 0; problems && problems[i]; i++)
        free(problems[i]);
    free(problems);
    return list;
}

static PyObject *py_destroy_db(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *path_bytes;
    if (!PyArg_ParseTuple(args, "O&:destroy_db", PyUnicode_FSConverter, &path_bytes))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bkv_destroy(PyBytes_AS_STRING(path_bytes));
    Py_END_ALLOW_THREADS
    Py_DECREF(path_bytes);
    if (rc != BKV_OK)
        return bkvpy_raise(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *py_repair_db(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *path_bytes;
    if (!PyArg_ParseTuple(args, "O&:repair_db", PyUnicode_FSConverter, &path_bytes))
        return NULL;
    int rc;
    char done[8192];
    Py_BEGIN_ALLOW_THREADS
    rc = bkv_repair(PyBytes_AS_STRING(path_bytes), done, sizeof done);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_bytes);
    if (rc != BKV_OK)
        return bkvpy_raise(rc, NULL);
    return PyUnicode_FromString(done);
}

static PyObject *py_library_version(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    int v = bkv_library_version();
    return Py_BuildValue("(iii)", v / 10000, v / 100 % 100, v % 100);
}

/* Closes every database still open when the interpreter exits: the
 * engine's background threads may call a Python terms extractor, which
 * must not happen once the interpreter is being torn down. */
static PyObject *py_close_all(PyObject *module, PyObject *unused)
{
    (void)unused;
    PyObject *open = PyObject_GetAttrString(module, "_open_databases");
    if (!open)
        return NULL;
    PyObject *list = PySequence_List(open);
    Py_DECREF(open);
    if (!list)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *r = PyObject_CallMethod(PyList_GET_ITEM(list, i), "close", NULL);
        if (!r)
            PyErr_WriteUnraisable(PyList_GET_ITEM(list, i));
        Py_XDECREF(r);
    }
    Py_DECREF(list);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"check", py_check, METH_VARARGS,
     "check(path) -> list of str\n\nVerifies every file of the closed database at path; returns the problems "
     "found (an empty list when it is sound). Raises when the check cannot run (no such database, in use)."},
    {"destroy_db", py_destroy_db, METH_VARARGS,
     "destroy_db(path)\n\nDeletes the (closed) database at path: every file named as the engine names its "
     "files. A path that is not a database, or a symbolic link, raises InvalidArgumentError, nothing removed."},
    {"repair_db", py_repair_db, METH_VARARGS,
     "repair_db(path) -> str\n\nKeeps every row of the (closed) database at path that can still be read: "
     "CURRENT pointed at the newest intact manifest, missing tables dropped, damaged tables rewritten from their "
     "intact blocks, damaged WALs read around the damage, the originals kept in path/lost/; says what it did. "
     "CorruptionError when no manifest is intact."},
    {"library_version", py_library_version, METH_NOARGS,
     "library_version() -> (major, minor, patch) of the linked C library"},
    {"_close_all", py_close_all, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "bloomkv",
    "bloomkv: an embedded key-value store (an LSM tree read through approximate-membership filters, "
    "searchable by value), and its filter library.\n\nKeys and values are bytes. See help(bloomkv.DB) "
    "and help(bloomkv.Filter).",
    -1, module_methods, NULL, NULL, NULL, NULL};

static int add_exception(PyObject *m, PyObject **slot, const char *name, PyObject *bases, const char *doc)
{
    char qualified[64];
    snprintf(qualified, sizeof qualified, "bloomkv.%s", name);
    *slot = PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL);
    if (!*slot)
        return -1;
    Py_INCREF(*slot);
    return PyModule_AddObject(m, name, *slot);
}

static int add_exceptions(PyObject *m)
{
    static const struct {
        PyObject **slot;
        const char *name;
        PyObject **base, **also; /* bases (NULL: Exception) */
        const char *doc;
    } table[] = {
        {&bkvpy_error, "Error", NULL, NULL, "Base of every error the engine reports."},
        {&bkvpy_corruption_error, "CorruptionError", &bkvpy_error, NULL, "Stored bytes are damaged or truncated."},
        {&bkvpy_io_error, "IOError", &bkvpy_error, &PyExc_OSError, "The operating system refused a read or write."},
        {&bkvpy_invalid_error, "InvalidArgumentError", &bkvpy_error, &PyExc_ValueError,
         "A bad argument or option, or input this version does not support."},
        {&bkvpy_busy_error, "BusyError", &bkvpy_io_error, NULL, "The database is open elsewhere."},
        {&bkvpy_full_error, "FilterFullError", &bkvpy_error, NULL,
         "A cuckoo filter has no room for the key (it is unchanged)."},
        {&bkvpy_iterator_invalid_error, "IteratorInvalidError", &bkvpy_error, NULL,
         "A RawIterator was read or moved while not on an entry."},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        PyObject *bases = NULL;
        if (table[i].base) {
            bases = table[i].also ? PyTuple_Pack(2, *table[i].base, *table[i].also) : PyTuple_Pack(1, *table[i].base);
            if (!bases)
                return -1;
        }
        int rc = add_exception(m, table[i].slot, table[i].name, bases, table[i].doc);
        Py_XDECREF(bases);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int add_type(PyObject *m, PyTypeObject *type, const char *name)
{
    if (PyType_Ready(type) < 0)
        return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

static int register_close_all(PyObject *m)
{
    PyObject *weakref = PyImport_ImportModule("weakref");
    PyObject *set = weakref ? PyObject_CallMethod(weakref, "WeakSet", NULL) : NULL;
    Py_XDECREF(weakref);
    if (!set || PyModule_AddObject(m, "_open_databases", set) < 0) {
        Py_XDECREF(set);
        return -1;
    }
    PyObject *atexit = PyImport_ImportModule("atexit");
    PyObject *fn = PyObject_GetAttrString(m, "_close_all");
    PyObject *r = atexit && fn ? PyObject_CallMethod(atexit, "register", "O", fn) : NULL;
    Py_XDECREF(atexit);
    Py_XDECREF(fn);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

PyMODINIT_FUNC PyInit_bloomkv(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (add_exceptions(m) < 0 || add_type(m, &bkvpy_db_type, "DB") < 0 ||
        add_type(m, &bkvpy_batch_type, "WriteBatch") < 0 || add_type(m, &bkvpy_snapshot_type, "Snapshot") < 0 ||
        add_type(m, &bkvpy_iterator_type, "Iterator") < 0 ||
        add_type(m, &bkvpy_raw_iterator_type, "RawIterator") < 0 ||
        add_type(m, &bkvpy_prefixed_db_type, "PrefixedDB") < 0 || add_type(m, &bkvpy_filter_type, "Filter") < 0 ||
        PyModule_AddStringConstant(m, "__version__", BKVPY_VERSION) < 0 ||
        PyModule_AddObject(m, "MAX_KEY_SIZE", PyLong_FromSize_t(BKV_MAX_KEY_SIZE)) < 0 ||
        PyModule_AddObject(m, "MAX_VALUE_SIZE", PyLong_FromSize_t(BKV_MAX_VALUE_SIZE)) < 0 ||
        register_close_all(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
