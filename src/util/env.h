/*
 * The env layer: every byte bloomkv reads or writes goes through it, so a
 * test can substitute an env that injects faults or drops unsynced data.
 *
 * Files are handles whose first member points at the env that made them;
 * the bkv_file_* helpers dispatch through it. All functions return a BKV_*
 * status and describe failures (with the path) in the bkv_err.
 */
#ifndef BKV_UTIL_ENV_H
#define BKV_UTIL_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

typedef struct bkv_env bkv_env;

typedef struct bkv_wfile { /* append-only writable file */
    const bkv_env *env;
} bkv_wfile;

typedef struct bkv_rfile { /* random-access readable file */
    const bkv_env *env;
} bkv_rfile;

struct bkv_env {
    /* Creates a new file for appending, with permission bits mode (less
     * the umask). Fails if the name exists, also as a symbolic link: an
     * existing file is never truncated and a planted link never followed. */
    int (*new_writable)(const bkv_env *env, const char *path, unsigned mode, bkv_wfile **out, bkv_err *e);
    /* The same for a write-ahead log, which is flushed after every group
     * of writes; optional (NULL: new_writable). The env may map it: each
     * append is then with the OS when it returns, flush has nothing to do,
     * and until the file is closed it may end in preallocated zero bytes. */
    int (*new_log)(const bkv_env *env, const char *path, unsigned mode, bkv_wfile **out, bkv_err *e);
    int (*append)(bkv_wfile *f, const void *data, size_t n, bkv_err *e);
    /* Pushes buffered bytes to the OS without forcing them to disk. */
    int (*flush)(bkv_wfile *f, bkv_err *e);
    /* Makes everything appended so far durable (fdatasync). */
    int (*sync)(bkv_wfile *f, bkv_err *e);
    /* Flushes and closes; the handle is gone even on error. */
    int (*close_writable)(bkv_wfile *f, bkv_err *e);

    /* Opens for random reads. map: the caller would like the file mapped
     * (immutable tables, read at random); the env may ignore it. */
    int (*new_readable)(const bkv_env *env, const char *path, int map, bkv_rfile **out, bkv_err *e);
    /* Reads up to n bytes at off into dst; *got < n only at end of file. */
    int (*read_at)(bkv_rfile *f, uint64_t off, size_t n, void *dst, size_t *got, bkv_err *e);
    uint64_t (*size)(bkv_rfile *f);
    /* The whole file mapped read-only in memory, or NULL when this env
     * does not map (readers then use read_at). Valid until closed. */
    const uint8_t *(*mapped)(bkv_rfile *f);
    /* Advice: bytes [off, off + n) will be read soon, so the env may start
     * reading them from the device now, all at once. Optional (NULL). */
    void (*prefetch)(bkv_rfile *f, uint64_t off, uint64_t n);
    /* Whether bytes [off, off + n) of a mapped file are in memory now (1)
     * or some must come from the device (0). Optional (NULL: unknown). */
    int (*resident)(bkv_rfile *f, uint64_t off, uint64_t n);
    void (*close_readable)(bkv_rfile *f);

    /* Whether the name exists (a dangling symbolic link counts). */
    int (*file_exists)(const bkv_env *env, const char *path);
    int (*remove_file)(const bkv_env *env, const char *path, bkv_err *e);
    /* Atomically replaces to with from. */
    int (*rename_file)(const bkv_env *env, const char *from, const char *to, bkv_err *e);
    /* Creates a directory (mode less the umask); an existing one is fine,
     * unless exclusive (then BKV_INVALID: "exists"). */
    int (*create_dir)(const bkv_env *env, const char *path, unsigned mode, int exclusive, bkv_err *e);
    /* Removes an empty directory; BKV_BUSY (nothing done) when it is not empty. */
    int (*remove_dir)(const bkv_env *env, const char *path, bkv_err *e);
    /* Makes to a second name of the file from (a hard link; never follows a
     * link planted at to). BKV_NOTFOUND when links cannot be made there (another
     * file system): the caller copies instead. */
    int (*link_file)(const bkv_env *env, const char *from, const char *to, bkv_err *e);
    /* Makes renames, creations and removals in dir durable. */
    int (*sync_dir)(const bkv_env *env, const char *dir, bkv_err *e);
    /* Names (not paths) in dir, malloc'd; free with bkv_env_free_list. */
    int (*list_dir)(const bkv_env *env, const char *dir, char ***names, size_t *n, bkv_err *e);
    /* Locks database directory dir until unlock_dir: exclusively (a
     * writer) or shared (readers such as check), also against other
     * handles in this process. The lock is held on the directory itself,
     * so deleting its LOCK file (created with mode, never through a link,
     * and locked too for tools that look for it) cannot let a second
     * writer in. BKV_BUSY when a conflicting lock is held. */
    int (*lock_dir)(const bkv_env *env, const char *dir, unsigned mode, int shared, void **lock, bkv_err *e);
    void (*unlock_dir)(const bkv_env *env, void *lock);
    void *state;
};

/* The process's POSIX env. Stateless, so shared safely. */
const bkv_env *bkv_env_posix(void);

void bkv_env_free_list(char **names, size_t n);

static inline int bkv_env_new_log(const bkv_env *env, const char *path, unsigned mode, bkv_wfile **out,
                                  bkv_err *e) {
    return (env->new_log ? env->new_log : env->new_writable)(env, path, mode, out, e);
}
static inline int bkv_file_append(bkv_wfile *f, const void *d, size_t n, bkv_err *e) {
    return f->env->append(f, d, n, e);
}
static inline int bkv_file_flush(bkv_wfile *f, bkv_err *e) { return f->env->flush(f, e); }
static inline int bkv_file_sync(bkv_wfile *f, bkv_err *e) { return f->env->sync(f, e); }
static inline int bkv_file_close(bkv_wfile *f, bkv_err *e) { return f->env->close_writable(f, e); }
static inline int bkv_file_read_at(bkv_rfile *f, uint64_t off, size_t n, void *dst, size_t *got,
                                   bkv_err *e) {
    return f->env->read_at(f, off, n, dst, got, e);
}
static inline uint64_t bkv_file_size(bkv_rfile *f) { return f->env->size(f); }
static inline const uint8_t *bkv_file_mapped(bkv_rfile *f) { return f->env->mapped ? f->env->mapped(f) : NULL; }
/* 1 in memory, 0 not, -1 unknown. */
static inline int bkv_file_resident(bkv_rfile *f, uint64_t off, uint64_t n) {
    return f->env->resident ? f->env->resident(f, off, n) : -1;
}
static inline void bkv_file_prefetch(bkv_rfile *f, uint64_t off, uint64_t n) {
    if (f->env->prefetch) f->env->prefetch(f, off, n);
}
static inline void bkv_file_close_readable(bkv_rfile *f) { f->env->close_readable(f); }

/* Copies file from to a new file to (mode), synced. */
int bkv_env_copy_file(const bkv_env *env, const char *from, const char *to, unsigned mode, bkv_err *e);

/* Reads a whole file into a malloc'd buffer. */
int bkv_env_read_all(const bkv_env *env, const char *path, uint8_t **data, size_t *len, bkv_err *e);
/* Syncs the directory that holds path (its last component's parent), so
 * that a directory just created at path survives a power loss. */
int bkv_env_sync_parent(const bkv_env *env, const char *path, bkv_err *e);
/* Writes data to path via a temporary file, fsync, rename and directory
 * fsync, so that path holds either its old content or data, never a mix.
 * A leftover temporary (or a link planted in its name) is removed first. */
int bkv_env_write_atomic(const bkv_env *env, const char *dir, const char *path, unsigned mode,
                         const void *data, size_t len, bkv_err *e);

#endif
