#include "util/env_fault.h"

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tracked {
    char *path;
    uint64_t len, synced;  /* bytes appended, bytes made durable */
    int exists_durable;    /* its directory was synced since it was created / renamed here */
    uint8_t *before;       /* renamed over or removed before the dir sync: the durable file's bytes */
    size_t before_len;
    int had_before;
} tracked;

struct bkv_fault_env {
    bkv_env env;           /* first: the env handed out */
    pthread_mutex_t mu;    /* the database's threads call in concurrently */
    const bkv_env *base;
    tracked *files;
    size_t nfiles, cap;
    uint64_t count[BKV_FAULT_KINDS];
    uint64_t fail_at[BKV_FAULT_KINDS];
    int fail_error[BKV_FAULT_KINDS];
    int fail_persistent[BKV_FAULT_KINDS];
    uint64_t injected;
    uint64_t crash_points, appends, append_every;
    void (*on_crash_point)(void *arg, uint64_t n);
    void *on_crash_point_arg;
};

typedef struct fault_wfile {
    bkv_wfile base;
    bkv_wfile *inner;
    bkv_fault_env *fe;
    char *path;
} fault_wfile;

typedef struct fault_rfile {
    bkv_rfile base;
    bkv_rfile *inner;
    bkv_fault_env *fe;
} fault_rfile;

static bkv_fault_env *of(const bkv_env *env) { return (bkv_fault_env *)env; }

static tracked *find(bkv_fault_env *f, const char *path) {
    for (size_t i = 0; i < f->nfiles; i++)
        if (f->files[i].path && strcmp(f->files[i].path, path) == 0) return &f->files[i];
    return NULL;
}

static tracked *track(bkv_fault_env *f, const char *path) {
    tracked *t = find(f, path);
    if (t) return t;
    if (f->nfiles == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 32;
        tracked *g = realloc(f->files, cap * sizeof *g);
        if (!g) return NULL;
        f->files = g;
        f->cap = cap;
    }
    t = &f->files[f->nfiles++];
    memset(t, 0, sizeof *t);
    t->path = strdup(path);
    return t;
}

static void untrack(tracked *t) {
    free(t->path);
    free(t->before);
    memset(t, 0, sizeof *t);
}

/* Counts an operation; non-zero (and the error written) if it must fail. */
static int inject(bkv_fault_env *f, int kind, const char *what, const char *path, bkv_err *e, int *error) {
    uint64_t n = ++f->count[kind];
    uint64_t at = f->fail_at[kind];
    if (!at || n < at || (n > at && !f->fail_persistent[kind])) return 0;
    f->injected++;
    *error = f->fail_error[kind];
    bkv_fail(e, BKV_IOERROR, "%s %s: %s (injected)", what, path,
             *error == BKV_FAULT_ENOSPC ? strerror(ENOSPC) : strerror(EIO));
    return 1;
}

static void crash_point(bkv_fault_env *f) {
    f->crash_points++;
    if (f->on_crash_point) f->on_crash_point(f->on_crash_point_arg, f->crash_points);
}

static int fw_append_locked(bkv_wfile *w, const void *d, size_t n, bkv_err *e) {
    fault_wfile *fw = (fault_wfile *)w;
    int error;
    if (inject(fw->fe, BKV_FAULT_WRITE, "cannot write", fw->path, e, &error)) {
        if (error == BKV_FAULT_SHORT_WRITE && n > 1) {
            /* Half of it lands, and the caller is told it failed. */
            if (bkv_file_append(fw->inner, d, n / 2, NULL) == BKV_OK) {
                tracked *t = find(fw->fe, fw->path);
                if (t) t->len += n / 2;
            }
        }
        return BKV_IOERROR;
    }
    int rc = bkv_file_append(fw->inner, d, n, e);
    tracked *t = find(fw->fe, fw->path);
    if (!rc && t) t->len += n;
    if (!rc && fw->fe->append_every && ++fw->fe->appends % fw->fe->append_every == 0) crash_point(fw->fe);
    return rc;
}

static int fw_flush_locked(bkv_wfile *w, bkv_err *e) { return bkv_file_flush(((fault_wfile *)w)->inner, e); }

static int fw_sync_locked(bkv_wfile *w, bkv_err *e) {
    fault_wfile *fw = (fault_wfile *)w;
    int error;
    if (inject(fw->fe, BKV_FAULT_SYNC, "cannot sync", fw->path, e, &error)) return BKV_IOERROR;
    int rc = bkv_file_sync(fw->inner, e);
    tracked *t = find(fw->fe, fw->path);
    if (!rc && t) t->synced = t->len;
    if (!rc) crash_point(fw->fe);
    return rc;
}

static int fw_close(bkv_wfile *w, bkv_err *e) {
    fault_wfile *fw = (fault_wfile *)w;
    int rc = bkv_file_close(fw->inner, e);
    free(fw->path);
    free(fw);
    return rc;
}

static int fe_new_writable_locked(const bkv_env *env, const char *path, unsigned mode, bkv_wfile **out, bkv_err *e) {
    bkv_fault_env *f = of(env);
    *out = NULL;
    int error;
    if (inject(f, BKV_FAULT_OPEN, "cannot create", path, e, &error)) return BKV_IOERROR;
    fault_wfile *fw = calloc(1, sizeof *fw);
    if (!fw || !(fw->path = strdup(path))) {
        free(fw);
        return bkv_fail(e, BKV_NOMEM, "out of memory");
    }
    int rc = f->base->new_writable(f->base, path, mode, &fw->inner, e);
    if (rc) {
        free(fw->path);
        free(fw);
        return rc;
    }
    /* A new name (the base env never reuses one): nothing of it is durable
     * until synced, and the name itself until its directory is. */
    tracked *t = track(f, path);
    if (t) {
        t->exists_durable = 0;
        t->len = t->synced = 0;
    }
    fw->base.env = env;
    fw->fe = f;
    *out = &fw->base;
    return BKV_OK;
}

static int fr_read_at_locked(bkv_rfile *r, uint64_t off, size_t n, void *dst, size_t *got, bkv_err *e) {
    fault_rfile *fr = (fault_rfile *)r;
    int error;
    if (inject(fr->fe, BKV_FAULT_READ, "cannot read", "a file", e, &error)) {
        *got = 0;
        return BKV_IOERROR;
    }
    return bkv_file_read_at(fr->inner, off, n, dst, got, e);
}

static uint64_t fr_size(bkv_rfile *r) { return bkv_file_size(((fault_rfile *)r)->inner); }

/* Never mapped: every read goes through read_at, where faults live. */
static const uint8_t *fr_mapped(bkv_rfile *r) {
    (void)r;
    return NULL;
}

static void fr_close(bkv_rfile *r) {
    fault_rfile *fr = (fault_rfile *)r;
    bkv_file_close_readable(fr->inner);
    free(fr);
}

static int fe_new_readable_locked(const bkv_env *env, const char *path, int map, bkv_rfile **out, bkv_err *e) {
    (void)map;
    bkv_fault_env *f = of(env);
    *out = NULL;
    int error;
    if (inject(f, BKV_FAULT_OPEN, "cannot open", path, e, &error)) return BKV_IOERROR;
    fault_rfile *fr = calloc(1, sizeof *fr);
    if (!fr) return bkv_fail(e, BKV_NOMEM, "out of memory");
    int rc = f->base->new_readable(f->base, path, 0, &fr->inner, e);
    if (rc) {
        free(fr);
        return rc;
    }
    fr->base.env = env;
    fr->fe = f;
    *out = &fr->base;
    return BKV_OK;
}

static int fe_exists(const bkv_env *env, const char *path) { return of(env)->base->file_exists(of(env)->base, path); }

static int fe_remove_locked(const bkv_env *env, const char *path, bkv_err *e) {
    bkv_fault_env *f = of(env);
    /* Until the directory is synced, a power loss brings back the durable
     * file (or what a rename replaced), as on a real file system. */
    tracked *t = find(f, path);
    uint8_t *before = NULL;
    size_t before_len = 0;
    int had_before = 0;
    if (t && !t->exists_durable) {
        had_before = t->had_before;
        before = t->before;
        before_len = t->before_len;
        t->before = NULL;
    } else if (f->base->file_exists(f->base, path)) {
        had_before = bkv_env_read_all(f->base, path, &before, &before_len, NULL) == BKV_OK;
        if (had_before && t && t->synced < before_len) before_len = (size_t)t->synced;
    }
    int rc = f->base->remove_file(f->base, path, e);
    if (rc) {
        free(before);
        return rc;
    }
    if (t) untrack(t);
    if (had_before && (t = track(f, path))) {
        t->before = before;
        t->before_len = before_len;
        t->had_before = 1;
    } else {
        free(before);
    }
    crash_point(f);
    return BKV_OK;
}

static int fe_rename_locked(const bkv_env *env, const char *from, const char *to, bkv_err *e) {
    bkv_fault_env *f = of(env);
    int error;
    if (inject(f, BKV_FAULT_RENAME, "cannot rename to", to, e, &error)) return BKV_IOERROR;
    /* Until the directory is synced, a power loss shows the old target. */
    uint8_t *before = NULL;
    size_t before_len = 0;
    int had_before = 0;
    tracked *old = find(f, to);
    if (old && old->had_before) {
        before = old->before;
        before_len = old->before_len;
        had_before = 1;
        old->before = NULL;
    } else if (f->base->file_exists(f->base, to) && (!old || old->exists_durable)) {
        had_before = bkv_env_read_all(f->base, to, &before, &before_len, NULL) == BKV_OK;
        if (had_before && old && old->synced < before_len) before_len = (size_t)old->synced;
    }
    int rc = f->base->rename_file(f->base, from, to, e);
    if (rc) {
        free(before);
        return rc;
    }
    if (old) untrack(old);
    /* Read the source's state before track() may move the array. */
    tracked *src = find(f, from);
    uint64_t len = src ? src->len : UINT64_MAX, synced = src ? src->synced : UINT64_MAX; /* untracked: all of it */
    if (src) untrack(src);
    tracked *t = track(f, to);
    if (t) {
        t->len = len;
        t->synced = synced;
        t->exists_durable = 0;
        t->before = before;
        t->before_len = before_len;
        t->had_before = had_before;
    } else {
        free(before);
    }
    crash_point(f);
    return BKV_OK;
}

/* A directory made here is tracked like a file: its name is durable only
 * once its parent was synced after it, and until then a power loss takes
 * it with everything in it. */
static int fe_create_dir(const bkv_env *env, const char *path, unsigned mode, int exclusive, bkv_err *e) {
    bkv_fault_env *f = of(env);
    pthread_mutex_lock(&f->mu);
    int existed = f->base->file_exists(f->base, path);
    int rc = f->base->create_dir(f->base, path, mode, exclusive, e);
    if (!rc && !existed) {
        char name[4096];
        size_t n = strlen(path);
        if (n < sizeof name) {
            memcpy(name, path, n + 1);
            while (n > 1 && name[n - 1] == '/') name[--n] = 0;
            tracked *t = track(f, name);
            if (t) t->exists_durable = 0;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fe_remove_dir(const bkv_env *env, const char *path, bkv_err *e) {
    return of(env)->base->remove_dir(of(env)->base, path, e);
}

static int fe_link(const bkv_env *env, const char *from, const char *to, bkv_err *e) {
    return of(env)->base->link_file(of(env)->base, from, to, e);
}

static int fe_sync_dir_locked(const bkv_env *env, const char *dir, bkv_err *e) {
    bkv_fault_env *f = of(env);
    int error;
    if (inject(f, BKV_FAULT_SYNC, "cannot sync directory", dir, e, &error)) return BKV_IOERROR;
    int rc = f->base->sync_dir(f->base, dir, e);
    if (rc) return rc;
    size_t dl = strlen(dir);
    for (size_t i = 0; i < f->nfiles; i++) {
        tracked *t = &f->files[i];
        if (t->path && strncmp(t->path, dir, dl) == 0 && t->path[dl] == '/' && !strchr(t->path + dl + 1, '/')) {
            if (!f->base->file_exists(f->base, t->path)) { /* its removal is durable now */
                untrack(t);
                continue;
            }
            t->exists_durable = 1;
            free(t->before);
            t->before = NULL;
            t->had_before = 0;
        }
    }
    crash_point(f);
    return BKV_OK;
}

static int fe_list_dir(const bkv_env *env, const char *dir, char ***names, size_t *n, bkv_err *e) {
    return of(env)->base->list_dir(of(env)->base, dir, names, n, e);
}

static int fe_lock(const bkv_env *env, const char *dir, unsigned mode, int shared, void **lock, bkv_err *e) {
    return of(env)->base->lock_dir(of(env)->base, dir, mode, shared, lock, e);
}

static void fe_unlock(const bkv_env *env, void *lock) { of(env)->base->unlock_dir(of(env)->base, lock); }

/* Every entry point holds the env's (recursive) mutex: the hook may call
 * back into the env, e.g. to take a snapshot. */
static int fw_append(bkv_wfile *w, const void *d, size_t n, bkv_err *e) {
    bkv_fault_env *f_ = ((fault_wfile *)w)->fe;
    pthread_mutex_lock(&f_->mu);
    int rc = fw_append_locked(w, d, n, e);
    pthread_mutex_unlock(&f_->mu);
    return rc;
}

static int fw_flush(bkv_wfile *w, bkv_err *e) {
    bkv_fault_env *f_ = ((fault_wfile *)w)->fe;
    pthread_mutex_lock(&f_->mu);
    int rc = fw_flush_locked(w, e);
    pthread_mutex_unlock(&f_->mu);
    return rc;
}

static int fw_sync(bkv_wfile *w, bkv_err *e) {
    bkv_fault_env *f_ = ((fault_wfile *)w)->fe;
    pthread_mutex_lock(&f_->mu);
    int rc = fw_sync_locked(w, e);
    pthread_mutex_unlock(&f_->mu);
    return rc;
}

static int fe_new_writable(const bkv_env *env, const char *path, unsigned mode, bkv_wfile **out, bkv_err *e) {
    bkv_fault_env *f_ = of(env);
    pthread_mutex_lock(&f_->mu);
    int rc = fe_new_writable_locked(env, path, mode, out, e);
    pthread_mutex_unlock(&f_->mu);
    return rc;
}

static int fr_read_at(bkv_rfile *r, uint64_t off, size_t n, void *dst, size_t *got, bkv_err *e) {
    bkv_fault_env *f_ = ((fault_rfile *)r)->fe;
    pthread_mutex_lock(&f_->mu);
    int rc = fr_read_at_locked(r, off, n, dst, got, e);
    pthread_mutex_unlock(&f_->mu);
    return rc;
}

static int fe_new_readable(const bkv_env *env, const char *path, int map, bkv_rfile **out, bkv_err *e) {
    bkv_fault_env *f_ = of(env);
    pthread_mutex_lock(&f_->mu);
    int rc = fe_new_readable_locked(env, path, map, out, e);
    pthread_mutex_unlock(&f_->mu);
    return rc;
}

static int fe_remove(const bkv_env *env, const char *path, bkv_err *e) {
    bkv_fault_env *f_ = of(env);
    pthread_mutex_lock(&f_->mu);
    int rc = fe_remove_locked(env, path, e);
    pthread_mutex_unlock(&f_->mu);
    return rc;
}

static int fe_rename(const bkv_env *env, const char *from, const char *to, bkv_err *e) {
    bkv_fault_env *f_ = of(env);
    pthread_mutex_lock(&f_->mu);
    int rc = fe_rename_locked(env, from, to, e);
    pthread_mutex_unlock(&f_->mu);
    return rc;
}

static int fe_sync_dir(const bkv_env *env, const char *dir, bkv_err *e) {
    bkv_fault_env *f_ = of(env);
    pthread_mutex_lock(&f_->mu);
    int rc = fe_sync_dir_locked(env, dir, e);
    pthread_mutex_unlock(&f_->mu);
    return rc;
}

bkv_fault_env *bkv_fault_env_new(void) {
    bkv_fault_env *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->base = bkv_env_posix();
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&f->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    f->env = (bkv_env){
        .new_writable = fe_new_writable, .append = fw_append,       .flush = fw_flush,
        .sync = fw_sync,                 .close_writable = fw_close, .new_readable = fe_new_readable,
        .read_at = fr_read_at,           .size = fr_size,           .mapped = fr_mapped,
        .close_readable = fr_close,      .file_exists = fe_exists,  .remove_file = fe_remove,
        .rename_file = fe_rename,        .create_dir = fe_create_dir, .sync_dir = fe_sync_dir,
        .remove_dir = fe_remove_dir,     .link_file = fe_link,
        .list_dir = fe_list_dir,         .lock_dir = fe_lock,       .unlock_dir = fe_unlock,
        .state = f,
    };
    return f;
}

void bkv_fault_env_free(bkv_fault_env *f) {
    if (!f) return;
    for (size_t i = 0; i < f->nfiles; i++) untrack(&f->files[i]);
    free(f->files);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

const bkv_env *bkv_fault_env_get(bkv_fault_env *f) { return &f->env; }

void bkv_fault_env_fail_at(bkv_fault_env *f, int kind, uint64_t n, int error, int persistent) {
    f->fail_at[kind] = f->count[kind] + n;
    f->fail_error[kind] = error;
    f->fail_persistent[kind] = persistent;
}

void bkv_fault_env_clear_faults(bkv_fault_env *f) { memset(f->fail_at, 0, sizeof f->fail_at); }

uint64_t bkv_fault_env_count(bkv_fault_env *f, int kind) { return f->count[kind]; }

uint64_t bkv_fault_env_faults_injected(bkv_fault_env *f) { return f->injected; }

void bkv_fault_env_on_crash_point(bkv_fault_env *f, void (*fn)(void *arg, uint64_t n), void *arg, uint64_t append_every) {
    f->on_crash_point = fn;
    f->on_crash_point_arg = arg;
    f->append_every = append_every;
}

static int write_file(const char *path, const uint8_t *data, size_t len) {
    FILE *out = fopen(path, "wb");
    if (!out) return BKV_IOERROR;
    int ok = (len == 0 || fwrite(data, 1, len, out) == len);
    ok &= fclose(out) == 0;
    return ok ? BKV_OK : BKV_IOERROR;
}

static uint64_t next_random(uint64_t *state) {
    *state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = *state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* How much of a file's unsynced tail [synced, len) the copy keeps, and
 * whether as written or as garbage. */
static int write_lost_tail(const char *to, uint8_t *data, size_t len, size_t synced, int mode, uint64_t *rnd) {
    size_t keep = synced;
    if (mode != BKV_LOSS_DROP && len > synced) {
        keep = synced + (size_t)(next_random(rnd) % (len - synced + 1));
        if (mode == BKV_LOSS_GARBAGE)
            for (size_t i = synced; i < keep; i++) data[i] = (uint8_t)next_random(rnd);
    }
    return write_file(to, data, keep);
}

int bkv_fault_env_snapshot(bkv_fault_env *f, const char *src, const char *dst, int mode, uint64_t seed) {
    tracked *self = find(f, src);
    if (self && !self->exists_durable) return BKV_OK; /* the directory itself is lost: nothing of it is left */
    DIR *d = opendir(src);
    if (!d) return BKV_IOERROR;
    int rc = BKV_OK;
    uint64_t rnd = seed;
    struct dirent *de;
    char from[4096], to[4096];
    while (rc == BKV_OK && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        snprintf(from, sizeof from, "%s/%s", src, de->d_name);
        snprintf(to, sizeof to, "%s/%s", dst, de->d_name);
        tracked *t = find(f, from);
        if (t && !t->exists_durable) {
            /* The name may not have reached the disk: what was there before
             * a rename over it, or nothing. */
            if (t->had_before) rc = write_file(to, t->before, t->before_len);
            continue;
        }
        uint8_t *data;
        size_t len;
        if (bkv_env_read_all(f->base, from, &data, &len, NULL) != BKV_OK) continue;
        size_t synced = t && t->synced < len ? (size_t)t->synced : len;
        rc = write_lost_tail(to, data, len, synced, mode, &rnd);
        free(data);
    }
    closedir(d);
    /* Files removed since the last directory sync come back. */
    size_t sl = strlen(src);
    for (size_t i = 0; rc == BKV_OK && i < f->nfiles; i++) {
        tracked *t = &f->files[i];
        if (!t->path || !t->had_before || strncmp(t->path, src, sl) != 0 || t->path[sl] != '/') continue;
        if (strchr(t->path + sl + 1, '/') || f->base->file_exists(f->base, t->path)) continue;
        snprintf(to, sizeof to, "%s/%s", dst, t->path + sl + 1);
        rc = write_file(to, t->before, t->before_len);
    }
    return rc;
}
