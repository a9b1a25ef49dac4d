/* The POSIX env: buffered appends, mapped logs, pread, fdatasync, flock on
 * the directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/env.h"

#define WRITE_BUFFER (64 * 1024)
/* A mapped log grows by this much at a time: one fallocate, mmap and
 * munmap per MiB of log, against one write() per group saved. */
#define LOG_CHUNK ((size_t)1 << 20)

typedef struct posix_wfile {
    bkv_wfile base;
    int fd;
    char *path;
    int mapped_log;      /* appends go to chunk (below), not to buf */
    uint8_t *chunk;      /* the mapped chunk being filled, or NULL (none yet, or unmapped by a sync) */
    size_t chunk_used;
    size_t chunk_ready;  /* bytes of the chunk already faulted in for writing (populate_ahead) */
    uint64_t end;        /* bytes appended to a mapped log */
    uint64_t synced;     /* end at the last sync */
    uint64_t written;    /* bytes written through write() */
    uint64_t writeback;  /* of which handed to writeback (sync_file_range) */
    size_t used;
    uint8_t buf[WRITE_BUFFER];
} posix_wfile;

typedef struct posix_rfile {
    bkv_rfile base;
    int fd;
    char *path;
    uint64_t size;
    uint8_t *map;   /* the whole file, or NULL */
} posix_rfile;

static int io_fail(bkv_err *e, const char *what, const char *path) {
    int err = errno;
    return bkv_fail(e, BKV_IOERROR, "%s %s: %s", what, path, strerror(err));
}

static int new_file(const bkv_env *env, const char *path, unsigned mode, int mapped_log, bkv_wfile **out,
                    bkv_err *e) {
    *out = NULL;
    posix_wfile *f = malloc(sizeof *f);
    char *p = strdup(path);
    if (!f || !p) {
        free(f);
        free(p);
        return bkv_fail(e, BKV_NOMEM, "out of memory opening %s", path);
    }
    /* O_EXCL | O_NOFOLLOW: whoever can write into the directory must not
     * be able to point a name the engine is about to create at another file
     * (the engine would truncate and overwrite it with the user's rights). */
    int fd = open(path, (mapped_log ? O_RDWR : O_WRONLY) | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
    if (fd < 0) {
        int err = errno;
        free(f);
        free(p);
        errno = err;
        if (err == EEXIST)
            return bkv_fail(e, BKV_IOERROR, "cannot create %s: %s (never overwritten or followed as a link)", path,
                            strerror(err));
        return io_fail(e, "cannot create", path);
    }
    f->base.env = env;
    f->fd = fd;
    f->path = p;
    f->mapped_log = mapped_log;
    f->chunk = NULL;
    f->chunk_used = 0;
    f->chunk_ready = 0;
    f->end = 0;
    f->synced = 0;
    f->written = f->writeback = 0;
    f->used = 0;
    *out = &f->base;
    return BKV_OK;
}

static int posix_new_writable(const bkv_env *env, const char *path, unsigned mode, bkv_wfile **out, bkv_err *e) {
    return new_file(env, path, mode, 0, out, e);
}

/*
 * A log's appends are copied into a shared map of the file, so each one is
 * in the OS's page cache, safe from a crash of the process, without a
 * write() per group (about half the cost of a small put). The file grows
 * a chunk at a time with fallocate: blocks are reserved up front, so a
 * full disk fails the append cleanly instead of raising SIGBUS at a page
 * fault, and the unused end of the chunk reads as zeros, which log readers
 * take as the end of the log (docs/format.md, "Log file"). fdatasync on
 * the descriptor writes back the mapped pages too. Closing cuts the file
 * to what was appended.
 */
static int posix_new_log(const bkv_env *env, const char *path, unsigned mode, bkv_wfile **out, bkv_err *e) {
    return new_file(env, path, mode, 1, out, e);
}

/* Maps the chunk that holds the log's end, extending the file by a chunk
 * when the end is on a chunk boundary (a sync may have unmapped a chunk
 * that is only partly filled: it is mapped again where it was). */
static int map_chunk(posix_wfile *f, bkv_err *e) {
    uint64_t start = f->end & ~(uint64_t)(LOG_CHUNK - 1);
    if (f->chunk) munmap(f->chunk, LOG_CHUNK); /* its dirty pages stay in the page cache */
    f->chunk = NULL;
    if (start == f->end && fallocate(f->fd, 0, (off_t)start, (off_t)LOG_CHUNK) != 0) {
        if ((errno == EOPNOTSUPP || errno == ENOSYS) && start == 0) {
            f->mapped_log = 0; /* a file system without fallocate: buffered writes, as other files */
            return BKV_OK;
        }
        return io_fail(e, "cannot extend log", f->path);
    }
    void *m = mmap(NULL, LOG_CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, (off_t)start);
    if (m == MAP_FAILED) return io_fail(e, "cannot map log", f->path);
    f->chunk = m;
    f->chunk_used = (size_t)(f->end - start);
    f->chunk_ready = f->chunk_used;
    return BKV_OK;
}

/* Appends fault the chunk in ahead of them this much at a time. */
#define LOG_POPULATE_AHEAD ((size_t)64 << 10)

/* Faults the next stretch of the chunk in with one call where the appends
 * would otherwise trap once per page: on the VMs this project runs on,
 * those traps were half of the cost of appending to a log (perf: a tenth
 * of a fill's CPU in page faults under the log's memcpy). The stretch is
 * short because its pages are dirty from then on: a sync writes them back
 * whether or not an append has reached them yet. */
static void populate_ahead(posix_wfile *f, size_t upto) {
    if (upto <= f->chunk_ready) return;
    size_t end = (upto + LOG_POPULATE_AHEAD - 1) & ~(LOG_POPULATE_AHEAD - 1);
    if (end > LOG_CHUNK) end = LOG_CHUNK;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), start = f->chunk_ready & ~(page - 1);
#ifdef MADV_POPULATE_WRITE
    /* Advice only: where the kernel refuses it, the appends fault as before. */
    (void)madvise(f->chunk + start, end - start, MADV_POPULATE_WRITE);
#endif
    f->chunk_ready = end;
}

static int posix_append(bkv_wfile *wf, const void *data, size_t n, bkv_err *e);

static int append_mapped(posix_wfile *f, const uint8_t *d, size_t n, bkv_err *e) {
    while (n > 0) {
        if (!f->chunk || f->chunk_used == LOG_CHUNK) {
            int rc = map_chunk(f, e);
            if (rc) return rc;
            if (!f->mapped_log) return posix_append(&f->base, d, n, e);
        }
        size_t k = LOG_CHUNK - f->chunk_used < n ? LOG_CHUNK - f->chunk_used : n;
        populate_ahead(f, f->chunk_used + k);
        memcpy(f->chunk + f->chunk_used, d, k);
        f->chunk_used += k;
        f->end += k;
        d += k;
        n -= k;
    }
    return BKV_OK;
}

/* A table or other file written through write() is handed to writeback
 * every this many bytes, so the sync that finishes it finds little left
 * to write: a compaction's 16 MiB table otherwise waited for all of it at
 * once, with the thread idle (RocksDB's bytes_per_sync). */
#define WRITEBACK_EVERY ((uint64_t)1 << 20)

static int write_fully(posix_wfile *f, const uint8_t *d, size_t n, bkv_err *e) {
    while (n > 0) {
        ssize_t w = write(f->fd, d, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return io_fail(e, "cannot write", f->path);
        }
        d += w;
        n -= (size_t)w;
        f->written += (uint64_t)w;
    }
    if (f->written - f->writeback >= WRITEBACK_EVERY) {
        /* Advice: a failure only leaves the work to the final sync. */
        (void)sync_file_range(f->fd, (off_t)f->writeback, (off_t)(f->written - f->writeback), SYNC_FILE_RANGE_WRITE);
        f->writeback = f->written;
    }
    return BKV_OK;
}

static int posix_flush(bkv_wfile *wf, bkv_err *e) {
    posix_wfile *f = (posix_wfile *)wf;
    if (f->used == 0) return BKV_OK; /* always so for a mapped log */
    int rc = write_fully(f, f->buf, f->used, e);
    f->used = 0;
    return rc;
}

static int posix_append(bkv_wfile *wf, const void *data, size_t n, bkv_err *e) {
    posix_wfile *f = (posix_wfile *)wf;
    if (f->mapped_log) return append_mapped(f, data, n, e);
    if (f->used + n <= WRITE_BUFFER) {
        memcpy(f->buf + f->used, data, n);
        f->used += n;
        return BKV_OK;
    }
    int rc = posix_flush(wf, e);
    if (rc) return rc;
    if (n <= WRITE_BUFFER) {
        memcpy(f->buf, data, n);
        f->used = n;
        return BKV_OK;
    }
    return write_fully(f, data, n, e);
}

/* Past this many bytes appended since the last sync, a mapped log's chunk
 * is unmapped before the sync (and mapped again by the next append).
 * Writing back a page that is still mapped write-protects it first, and
 * each page's protection change interrupts every other core running this
 * process to flush its TLB: syncing a whole retired chunk that way took a
 * tenth of the background thread's time in fillrandom (perf: IPIs under
 * folio_mkclean). A synced write's few pages are not worth a remap. */
#define UNMAP_BEFORE_SYNC ((uint64_t)64 << 10)

static int posix_sync(bkv_wfile *wf, bkv_err *e) {
    posix_wfile *f = (posix_wfile *)wf;
    int rc = posix_flush(wf, e);
    if (rc) return rc;
    if (f->chunk && f->end - f->synced > UNMAP_BEFORE_SYNC) {
        munmap(f->chunk, LOG_CHUNK);
        f->chunk = NULL;
    }
    if (fdatasync(f->fd) != 0) return io_fail(e, "cannot sync", f->path);
    f->synced = f->end;
    return BKV_OK;
}

static int posix_close_writable(bkv_wfile *wf, bkv_err *e) {
    posix_wfile *f = (posix_wfile *)wf;
    int rc = posix_flush(wf, e);
    if (f->chunk) munmap(f->chunk, LOG_CHUNK);
    if (f->mapped_log && ftruncate(f->fd, (off_t)f->end) != 0 && rc == BKV_OK)
        rc = io_fail(e, "cannot truncate", f->path);
    if (close(f->fd) != 0 && rc == BKV_OK) rc = io_fail(e, "cannot close", f->path);
    free(f->path);
    free(f);
    return rc;
}

static int posix_new_readable(const bkv_env *env, const char *path, int map, bkv_rfile **out, bkv_err *e) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_fail(e, "cannot open", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = io_fail(e, "cannot stat", path);
        close(fd);
        return rc;
    }
    posix_rfile *f = malloc(sizeof *f);
    char *p = strdup(path);
    if (!f || !p) {
        free(f);
        free(p);
        close(fd);
        return bkv_fail(e, BKV_NOMEM, "out of memory opening %s", path);
    }
    f->base.env = env;
    f->fd = fd;
    f->path = p;
    f->size = (uint64_t)st.st_size;
    f->map = NULL;
    /* A mapped table is read without a system call or a copy per block.
     * Falling back to pread on failure costs speed only. Its pages fault
     * in one at a time: left to the default, a fault reads the device's
     * whole readahead window around it (8 MiB on this project's VMs), so
     * a cold point read cost milliseconds; readers that go on in order
     * ask for what comes next themselves (posix_prefetch). */
    if (map && f->size > 0 && f->size <= SIZE_MAX) {
        void *m = mmap(NULL, (size_t)f->size, PROT_READ, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            f->map = m;
            madvise(m, (size_t)f->size, MADV_RANDOM);
        }
    }
    *out = &f->base;
    return BKV_OK;
}

static void posix_prefetch(bkv_rfile *rf, uint64_t off, uint64_t n) {
    posix_rfile *f = (posix_rfile *)rf;
    if (off >= f->size || n == 0) return;
    if (n > f->size - off) n = f->size - off;
    if (!f->map) {
        posix_fadvise(f->fd, (off_t)off, (off_t)n, POSIX_FADV_WILLNEED);
        return;
    }
    uint64_t start = off & ~((uint64_t)sysconf(_SC_PAGESIZE) - 1);
    madvise(f->map + start, (size_t)(off + n - start), MADV_WILLNEED);
}

static int posix_resident(bkv_rfile *rf, uint64_t off, uint64_t n) {
    posix_rfile *f = (posix_rfile *)rf;
    if (!f->map) return -1;
    if (off >= f->size || n == 0) return 1;
    if (n > f->size - off) n = f->size - off;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start = off & ~(page - 1);
    unsigned char vec[16];
    size_t pages = (size_t)((off + n - start + page - 1) / page);
    if (pages > sizeof vec) return -1; /* a question for a few pages only */
    if (mincore((void *)(f->map + start), (size_t)(off + n - start), vec)) return -1;
    for (size_t i = 0; i < pages; i++)
        if (!(vec[i] & 1)) return 0;
    return 1;
}

/* Reads this large copy from the page cache with pread even when the file is
 * mapped: they are a bulk reader's chunks (BKV_READ_BULK) and blocks read
 * once, and through the map each of their pages would first be mapped into
 * the process (page-table entries written, a TLB flush on every processor
 * running the process when the table is unmapped, and on a virtual machine
 * often a trap to the hypervisor per page) to be copied once. A smaller read
 * copies from the map, cheaper than a system call once its pages are mapped. */
#define MAPPED_COPY_MAX 16384

static int posix_read_at(bkv_rfile *rf, uint64_t off, size_t n, void *dst, size_t *got, bkv_err *e) {
    posix_rfile *f = (posix_rfile *)rf;
    if (f->map && n < MAPPED_COPY_MAX) {
        size_t avail = off < f->size ? (size_t)(f->size - off) : 0;
        *got = n < avail ? n : avail;
        if (*got) memcpy(dst, f->map + off, *got);
        return BKV_OK;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(f->fd, (uint8_t *)dst + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            *got = done;
            return io_fail(e, "cannot read", f->path);
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    *got = done;
    return BKV_OK;
}

static uint64_t posix_size(bkv_rfile *rf) { return ((posix_rfile *)rf)->size; }

static const uint8_t *posix_mapped(bkv_rfile *rf) { return ((posix_rfile *)rf)->map; }

static void posix_close_readable(bkv_rfile *rf) {
    posix_rfile *f = (posix_rfile *)rf;
    if (f->map) munmap(f->map, (size_t)f->size);
    close(f->fd);
    free(f->path);
    free(f);
}

/* A name is there even when it is a dangling link (lstat, not access):
 * callers decide whether a name is free before creating it. */
static int posix_file_exists(const bkv_env *env, const char *path) {
    (void)env;
    struct stat st;
    return lstat(path, &st) == 0;
}

static int posix_remove(const bkv_env *env, const char *path, bkv_err *e) {
    (void)env;
    if (unlink(path) != 0) return io_fail(e, "cannot remove", path);
    return BKV_OK;
}

static int posix_rename(const bkv_env *env, const char *from, const char *to, bkv_err *e) {
    (void)env;
    if (rename(from, to) != 0) return io_fail(e, "cannot rename to", to);
    return BKV_OK;
}

static int posix_create_dir(const bkv_env *env, const char *path, unsigned mode, int exclusive, bkv_err *e) {
    (void)env;
    if (mkdir(path, (mode_t)mode) == 0) return BKV_OK;
    if (errno != EEXIST) return io_fail(e, "cannot create directory", path);
    if (exclusive) return bkv_fail(e, BKV_INVALID, "%s: exists", path);
    return BKV_OK;
}

static int posix_remove_dir(const bkv_env *env, const char *path, bkv_err *e) {
    (void)env;
    if (rmdir(path) == 0) return BKV_OK;
    if (errno == ENOTEMPTY || errno == EEXIST) return bkv_fail(e, BKV_BUSY, "%s: not empty", path);
    return io_fail(e, "cannot remove directory", path);
}

static int posix_link(const bkv_env *env, const char *from, const char *to, bkv_err *e) {
    (void)env;
    if (link(from, to) == 0) return BKV_OK;
    if (errno == EXDEV || errno == EPERM || errno == EMLINK || errno == ENOTSUP)
        return bkv_fail(e, BKV_NOTFOUND, "cannot link %s to %s: %s", from, to, strerror(errno));
    return io_fail(e, "cannot link to", to);
}

static int posix_sync_dir(const bkv_env *env, const char *dir, bkv_err *e) {
    (void)env;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return io_fail(e, "cannot open directory", dir);
    int rc = BKV_OK;
    if (fsync(fd) != 0) rc = io_fail(e, "cannot sync directory", dir);
    close(fd);
    return rc;
}

static int posix_list_dir(const bkv_env *env, const char *dir, char ***names, size_t *n, bkv_err *e) {
    (void)env;
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return io_fail(e, "cannot list", dir);
    size_t cap = 0;
    struct dirent *de;
    int rc = BKV_OK;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = realloc(*names, cap * sizeof *grown);
            if (!grown) {
                rc = BKV_NOMEM;
                break;
            }
            *names = grown;
        }
        if (!((*names)[*n] = strdup(de->d_name))) {
            rc = BKV_NOMEM;
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (rc) {
        bkv_env_free_list(*names, *n);
        *names = NULL;
        *n = 0;
        return bkv_fail(e, rc, "out of memory listing %s", dir);
    }
    return BKV_OK;
}

typedef struct posix_lock {
    int dir_fd, file_fd;
} posix_lock;

static int lock_fd(int fd, int shared) {
    while (flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0)
        if (errno != EINTR) return -1;
    return 0;
}

static int lock_busy(bkv_err *e, const char *dir, int shared) {
    return bkv_fail(e, BKV_BUSY, "%s: database in use (%s)", dir,
                    shared ? "open for writing by another handle or process"
                           : "locked by another handle or process, or being checked");
}

/* flock locks belong to the open file description, so a second open of the
 * same database in this process is refused just like one in another. The
 * directory's own lock is the one that counts: a LOCK file can be deleted
 * and recreated under a live writer, the directory it sits in cannot. */
static int posix_lock_dir(const bkv_env *env, const char *dir, unsigned mode, int shared, void **out, bkv_err *e) {
    (void)env;
    *out = NULL;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/LOCK", dir) >= (int)sizeof path)
        return bkv_fail(e, BKV_INVALID, "path too long: %s", dir);
    posix_lock *l = malloc(sizeof *l);
    if (!l) return bkv_fail(e, BKV_NOMEM, "out of memory locking %s", dir);
    l->file_fd = -1;
    l->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = BKV_OK;
    if (l->dir_fd < 0) rc = io_fail(e, "cannot open directory", dir);
    else if (lock_fd(l->dir_fd, shared) != 0)
        rc = errno == EWOULDBLOCK ? lock_busy(e, dir, shared) : io_fail(e, "cannot lock", dir);
    if (!rc) {
        /* Readers only lock a LOCK file that is there; a writer makes it. */
        int flags = O_NOFOLLOW | O_CLOEXEC | (shared ? O_RDONLY : O_RDWR | O_CREAT);
        l->file_fd = open(path, flags, (mode_t)mode);
        if (l->file_fd < 0 && errno == ELOOP)
            rc = bkv_fail(e, BKV_IOERROR, "cannot open lock file %s: it is a symbolic link (never followed)", path);
        else if (l->file_fd < 0 && !(shared && errno == ENOENT))
            rc = io_fail(e, "cannot open lock file", path);
        else if (l->file_fd >= 0 && lock_fd(l->file_fd, shared) != 0)
            rc = errno == EWOULDBLOCK ? lock_busy(e, dir, shared) : io_fail(e, "cannot lock", path);
    }
    if (rc) {
        if (l->file_fd >= 0) close(l->file_fd);
        if (l->dir_fd >= 0) close(l->dir_fd);
        free(l);
        return rc;
    }
    *out = l;
    return BKV_OK;
}

static void posix_unlock_dir(const bkv_env *env, void *lock) {
    (void)env;
    posix_lock *l = lock;
    if (!l) return;
    if (l->file_fd >= 0) close(l->file_fd); /* closing the last descriptor releases its flock */
    close(l->dir_fd);
    free(l);
}

static const bkv_env posix_env = {
    .new_writable = posix_new_writable,
    .new_log = posix_new_log,
    .append = posix_append,
    .flush = posix_flush,
    .sync = posix_sync,
    .close_writable = posix_close_writable,
    .new_readable = posix_new_readable,
    .read_at = posix_read_at,
    .size = posix_size,
    .mapped = posix_mapped,
    .prefetch = posix_prefetch,
    .resident = posix_resident,
    .close_readable = posix_close_readable,
    .file_exists = posix_file_exists,
    .remove_file = posix_remove,
    .rename_file = posix_rename,
    .create_dir = posix_create_dir,
    .remove_dir = posix_remove_dir,
    .link_file = posix_link,
    .sync_dir = posix_sync_dir,
    .list_dir = posix_list_dir,
    .lock_dir = posix_lock_dir,
    .unlock_dir = posix_unlock_dir,
    .state = NULL,
};

const bkv_env *bkv_env_posix(void) { return &posix_env; }

void bkv_env_free_list(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

int bkv_env_copy_file(const bkv_env *env, const char *from, const char *to, unsigned mode, bkv_err *e) {
    bkv_rfile *in;
    int rc = env->new_readable(env, from, 0, &in, e);
    if (rc) return rc;
    bkv_wfile *out;
    if ((rc = env->new_writable(env, to, mode, &out, e))) {
        bkv_file_close_readable(in);
        return rc;
    }
    uint8_t *buf = malloc(1 << 20);
    if (!buf) rc = bkv_fail(e, BKV_NOMEM, "out of memory copying %s", from);
    uint64_t size = bkv_file_size(in);
    for (uint64_t off = 0; !rc && off < size;) {
        size_t want = size - off < (1 << 20) ? (size_t)(size - off) : (1 << 20), got;
        rc = bkv_file_read_at(in, off, want, buf, &got, e);
        if (!rc && got != want) rc = bkv_fail(e, BKV_IOERROR, "%s: shorter than it was (offset %llu)", from,
                                              (unsigned long long)(off + got));
        if (!rc) rc = bkv_file_append(out, buf, got, e);
        off += got;
    }
    free(buf);
    bkv_file_close_readable(in);
    if (!rc) rc = bkv_file_sync(out, e);
    int crc = bkv_file_close(out, rc ? NULL : e);
    if (!rc) rc = crc;
    if (rc) env->remove_file(env, to, NULL);
    return rc;
}

int bkv_env_read_all(const bkv_env *env, const char *path, uint8_t **data, size_t *len, bkv_err *e) {
    *data = NULL;
    *len = 0;
    bkv_rfile *f;
    int rc = env->new_readable(env, path, 0, &f, e);
    if (rc) return rc;
    uint64_t size = bkv_file_size(f);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        bkv_file_close_readable(f);
        return bkv_fail(e, BKV_NOMEM, "out of memory reading %s", path);
    }
    size_t got;
    rc = bkv_file_read_at(f, 0, size, buf, &got, e);
    bkv_file_close_readable(f);
    if (rc) {
        free(buf);
        return rc;
    }
    *data = buf;
    *len = got;
    return BKV_OK;
}

int bkv_env_write_atomic(const bkv_env *env, const char *dir, const char *path, unsigned mode,
                         const void *data, size_t len, bkv_err *e) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return bkv_fail(e, BKV_INVALID, "path too long: %s", path);
    bkv_wfile *f;
    if (env->file_exists(env, tmp)) env->remove_file(env, tmp, NULL);
    int rc = env->new_writable(env, tmp, mode, &f, e);
    if (rc) return rc;
    rc = bkv_file_append(f, data, len, e);
    if (!rc) rc = bkv_file_sync(f, e);
    int rc2 = bkv_file_close(f, rc ? NULL : e);
    if (!rc) rc = rc2;
    if (!rc) rc = env->rename_file(env, tmp, path, e);
    if (!rc) rc = env->sync_dir(env, dir, e);
    if (rc) env->remove_file(env, tmp, NULL);
    return rc;
}

int bkv_env_sync_parent(const bkv_env *env, const char *path, bkv_err *e) {
    char parent[4096];
    size_t n = strlen(path);
    if (n >= sizeof parent) return bkv_fail(e, BKV_INVALID, "path too long: %s", path);
    memcpy(parent, path, n + 1);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = 0; /* "db/" names db */
    char *slash = strrchr(parent, '/');
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == parent) parent[1] = 0; /* a directory at the root */
    else *slash = 0;
    return env->sync_dir(env, parent, e);
}
