/*
 * Whole-database operations: destroying a database, a consistent
 * checkpoint into another directory, and the approximate size of a key
 * range.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/memtables.h"
#include "db/read_view.h"
#include "db/repair.h"
#include "db/version_set.h"
#include "db/write_batch.h"
#include "util/ikey.h"
#include "util/mutex.h"

/* Whether manifest number in path replays whole and (with tables) every
 * table it names exists: the test a manifest passes before repair lets
 * CURRENT name it, and (without) before destroy takes the directory for
 * a database, damaged tables and all. */
static int manifest_intact(const bkv_env *env, const char *path, uint64_t number, int tables, bkv_err *e) {
    bkv_db *db = bkv_db_scratch(env, path);
    if (!db) return bkv_fail(e, BKV_NOMEM, "out of memory");
    bkv_manifest_found found;
    int rc = bkv_vset_replay(db, number, &found, e);
    const bkv_tree_version *v = bkv_vset_current(&db->vset);
    for (int l = 0; tables && !rc && l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; !rc && i < v->nfiles[l]; i++) {
            char t[BKV_PATH_MAX];
            bkv_table_name(t, path, v->files[l][i]->number);
            if (!env->file_exists(env, t))
                rc = bkv_fail(e, BKV_CORRUPTION, "%s: missing, but manifest %06llu lists it", t,
                              (unsigned long long)number);
        }
    bkv_vset_free(&db->vset);
    free(db);
    return rc;
}

/* path is a directory of its own (not a symbolic link to one, whose
 * target a command could reach by another name) holding a database. */
static int database_dir(const char *path, const char *what, bkv_err *e) {
    struct stat st;
    if (lstat(path, &st) != 0) return bkv_fail(e, BKV_INVALID, "%s: %s: %s", what, path, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return bkv_fail(e, BKV_INVALID, "%s: %s is a symbolic link; name the database's directory itself", what, path);
    if (!S_ISDIR(st.st_mode)) return bkv_fail(e, BKV_INVALID, "%s: %s is not a directory", what, path);
    return BKV_OK;
}

static int is_database(const bkv_env *env, const char *path, bkv_err *e) {
    uint64_t manifest;
    bkv_err why;
    int rc = bkv_read_current(env, path, &manifest, &why);
    if (!rc) rc = manifest_intact(env, path, manifest, 0, &why);
    if (rc == BKV_NOMEM) return bkv_fail(e, rc, "%s", why.msg);
    if (rc) return bkv_fail(e, BKV_INVALID, "bkv_destroy: %s is not a bloomkv database, nothing removed (%s)", path, why.msg);
    return BKV_OK;
}

int bkv_destroy(const char *path) {
    bkv_err e = {{0}};
    if (!path || !*path) return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_destroy: no path given"});
    const bkv_env *env = bkv_env_posix();
    if (!env->file_exists(env, path)) return BKV_OK;
    int rc = database_dir(path, "bkv_destroy", &e);
    if (rc) return bkv_db_error(NULL, rc, &e);
    /* Only a database: a CURRENT naming a manifest that reads whole.
     * Anything else (a directory of the user's files, a database that lost
     * its CURRENT) is left as it is, without even a LOCK file; checked
     * again under the lock. */
    void *lock = NULL;
    rc = is_database(env, path, &e);
    if (!rc) rc = env->lock_dir(env, path, 0600, 0, &lock, &e);
    if (!rc) rc = is_database(env, path, &e);
    if (rc) {
        if (lock) env->unlock_dir(env, lock);
        return bkv_db_error(NULL, rc, &e);
    }
    char **names;
    size_t n;
    if ((rc = env->list_dir(env, path, &names, &n, &e))) {
        env->unlock_dir(env, lock);
        return bkv_db_error(NULL, rc, &e);
    }
    /* Only names the engine makes: anything else in the directory is the
     * user's, and keeps the directory too. LOCK goes last, with the lock. */
    int lock_file = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint64_t number;
        int kind = bkv_parse_file_name(names[i], &number);
        if (kind == BKV_FILE_OTHER) continue;
        if (kind == BKV_FILE_LOCK) {
            lock_file = 1;
            continue;
        }
        char p[BKV_PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        rc = env->remove_file(env, p, &e);
    }
    bkv_env_free_list(names, n);
    if (!rc && lock_file) {
        char p[BKV_PATH_MAX];
        snprintf(p, sizeof p, "%s/LOCK", path);
        rc = env->remove_file(env, p, &e);
    }
    env->unlock_dir(env, lock);
    if (!rc) {
        rc = env->remove_dir(env, path, &e);
        if (rc == BKV_BUSY) rc = BKV_OK; /* other files of the user's stay, and so does their directory */
    }
    return bkv_db_error(NULL, rc, &e);
}

static int cmp_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* CURRENT pointed at the newest manifest that reads whole, preferring one
 * whose tables all exist: BKV_OK (what was done in done, *changed when
 * CURRENT was written), or BKV_CORRUPTION when none reads whole. Under
 * the directory's lock. */
static int repair_current(const bkv_env *env, const char *path, char *done, size_t done_len, int *changed,
                          bkv_err *e) {
    *changed = 0;
    uint64_t named = 0;
    char current[BKV_PATH_MAX];
    bkv_current_name(current, path);
    if (bkv_read_current(env, path, &named, NULL) == BKV_OK && manifest_intact(env, path, named, 1, NULL) == BKV_OK) {
        snprintf(done, done_len, "CURRENT names MANIFEST-%06llu, which is intact", (unsigned long long)named);
        return BKV_OK;
    }
    char **names;
    size_t n;
    int rc = env->list_dir(env, path, &names, &n, e);
    if (rc) return rc;
    uint64_t *manifests = malloc((n ? n : 1) * sizeof *manifests);
    size_t m = 0;
    for (size_t i = 0; manifests && i < n; i++) {
        uint64_t number;
        if (bkv_parse_file_name(names[i], &number) == BKV_FILE_MANIFEST) manifests[m++] = number;
    }
    bkv_env_free_list(names, n);
    if (!manifests) return bkv_fail(e, BKV_NOMEM, "bkv_repair: out of memory");
    /* The newest intact manifest: a newer one that is not intact was being
     * written when CURRENT still named an older one (a manifest is synced
     * before CURRENT names it), so the older holds the state. Never an
     * older one past an intact newer one: it would lack newer tables, and
     * the next open would delete them as obsolete. A manifest that reads
     * whole but names a lost table comes after one with every table (the
     * salvage then drops what is lost). */
    qsort(manifests, m, sizeof *manifests, cmp_desc);
    rc = bkv_fail(e, BKV_CORRUPTION, "bkv_repair: %s holds no manifest", path);
    for (int tables = 1; tables >= 0 && rc; tables--)
        for (size_t i = 0; i < m && rc; i++) {
            bkv_err why;
            if (manifest_intact(env, path, manifests[i], tables, &why) != BKV_OK) {
                if (i == 0 && tables) *e = why;
                continue;
            }
            char text[64];
            int len = snprintf(text, sizeof text, "MANIFEST-%06llu\n", (unsigned long long)manifests[i]);
            rc = bkv_env_write_atomic(env, path, current, 0644, text, (size_t)len, e);
            *changed = !rc;
            if (!rc)
                snprintf(done, done_len, "CURRENT now names MANIFEST-%06llu%s", (unsigned long long)manifests[i],
                         i ? " (newer manifests are not intact)" : "");
        }
    if (rc == BKV_CORRUPTION && m) {
        bkv_err why = *e;
        bkv_fail(e, BKV_CORRUPTION, "bkv_repair: no intact manifest in %s; the newest: %s", path, why.msg);
    }
    free(manifests);
    return rc;
}

int bkv_repair(const char *path, char *done, size_t done_len) {
    bkv_err e = {{0}};
    if (done && done_len) *done = 0;
    if (!path || !*path) return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_repair: no path given"});
    if (strlen(path) > BKV_PATH_MAX - 64)
        return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_repair: path too long"});
    const bkv_env *env = bkv_env_posix();
    int rc = database_dir(path, "bkv_repair", &e);
    if (rc) return bkv_db_error(NULL, rc, &e);
    void *lock;
    if ((rc = env->lock_dir(env, path, 0600, 0, &lock, &e))) return bkv_db_error(NULL, rc, &e);
    char current[256];
    int changed;
    rc = repair_current(env, path, current, sizeof current, &changed, &e);
    env->unlock_dir(env, lock);
    if (rc) return bkv_db_error(NULL, rc, &e);
    /* Then the salvage, through an open that keeps what can be read. */
    bkv_repair_state r = {0};
    bkv_db *db = NULL;
    rc = bkv_open_repairing(path, &r, &db);
    if (!rc) rc = bkv_close(db);
    if (!rc && r.failed_note) rc = bkv_db_error(NULL, BKV_NOMEM, &(bkv_err){"bkv_repair: out of memory"});
    if (!rc && done)
        snprintf(done, done_len, "%s%s; %s", r.report || changed ? "" : "nothing to repair: ", current,
                 r.report ? r.report : "every table, WAL and manifest reads whole");
    bkv_repair_state_free(&r);
    return rc; /* a failed open or close set its message */
}

/* Links (or, across file systems, copies) table number into dir. */
static int checkpoint_table(bkv_db *db, const char *dir, uint64_t number, bkv_err *e) {
    char from[BKV_PATH_MAX], to[BKV_PATH_MAX];
    bkv_table_name(from, db->path, number);
    bkv_table_name(to, dir, number);
    int rc = db->env->link_file(db->env, from, to, e);
    if (rc == BKV_NOTFOUND) rc = bkv_env_copy_file(db->env, from, to, db->opts.file_mode, e);
    return rc;
}

/* The checkpoint is the state after a flush: every write acknowledged
 * before the call is in a table by then, so the copy needs the tables of
 * one version, a manifest written afresh for it, and an empty WAL, and
 * never a copy of a WAL that writers are appending to. Tables are
 * immutable, so a hard link is a copy; the version's reference keeps them
 * from being deleted by a compaction meanwhile. */
/* A read-only handle cannot flush its memtable (what its open replayed
 * from the WALs) into the source: it goes into the checkpoint's WAL
 * instead, each entry a record of its own sequence. REQUIRES: read-only
 * (no write ever adds to its active memtable). */
static int write_memtable_to_log(bkv_db *db, bkv_wfile *f, bkv_err *e) {
    bkv_log_writer lw;
    bkv_log_writer_init(&lw, f);
    bkv_batch *b = bkv_batch_create();
    if (!b) return bkv_fail(e, BKV_NOMEM, "bkv_checkpoint: out of memory");
    bkv_memtable_iter it;
    bkv_memtable_iter_init(&it, bkv_mems_active(db));
    int rc = BKV_OK;
    for (bkv_memtable_iter_first(&it); !rc && bkv_memtable_iter_valid(&it); bkv_memtable_iter_next(&it)) {
        size_t ilen, vlen;
        const uint8_t *ikey = bkv_memtable_iter_ikey(&it, &ilen), *val = bkv_memtable_iter_value(&it, &vlen);
        bkv_parsed_ikey k = bkv_ikey_parse(ikey, ilen);
        bkv_batch_clear(b);
        rc = bkv_batch_add(b, k.type, k.ukey, k.ulen, val, vlen, e);
        if (!rc) {
            bkv_batch_set_sequence(&b->rep, k.seq);
            rc = bkv_log_add_record(&lw, b->rep.data, b->rep.len, e);
        }
    }
    bkv_batch_destroy(b);
    return rc;
}

int bkv_checkpoint(bkv_db *db, const char *dir) {
    bkv_err e = {{0}};
    if (!db) return bkv_db_arg_error(db, "bkv_checkpoint");
    if (!dir || !*dir) return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "bkv_checkpoint: no directory given"), &e);
    if (strlen(dir) > BKV_PATH_MAX - 64)
        return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "bkv_checkpoint: path too long"), &e);
    int rc = db->env->create_dir(db->env, dir, bkv_dir_mode(db->opts.file_mode), 1, &e);
    if (rc) return bkv_db_error(db, rc, &e);
    if (!db->opts.read_only && (rc = bkv_flush(db))) {
        db->env->remove_dir(db->env, dir, NULL);
        return rc;
    }
    bkv_db_lock(db);
    bkv_tree_version *v = bkv_vset_current(&db->vset);
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    uint64_t last_sequence = db->last_sequence, next_file = bkv_vset_next_file(&db->vset);
    bkv_db_unlock(db);
    for (int l = 0; !rc && l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; !rc && i < v->nfiles[l]; i++) rc = checkpoint_table(db, dir, v->files[l][i]->number, &e);
    /* Numbers from the source's counter on: no table number is reused. */
    uint64_t log_number = next_file, manifest_number = next_file + 1;
    char wal[BKV_PATH_MAX];
    bkv_wal_name(wal, dir, log_number);
    bkv_wfile *f;
    if (!rc && !(rc = db->env->new_writable(db->env, wal, db->opts.file_mode, &f, &e))) {
        if (db->opts.read_only) rc = write_memtable_to_log(db, f, &e);
        if (!rc) rc = bkv_file_sync(f, &e);
        int crc = bkv_file_close(f, rc ? NULL : &e);
        if (!rc) rc = crc;
    }
    bkv_log_writer lw;
    if (!rc)
        rc = bkv_vset_write_snapshot(db, dir, v, manifest_number, bkv_db_value_rec(db), log_number, manifest_number + 1,
                                     last_sequence, NULL, &lw, &e);
    if (!rc) rc = db->env->sync_dir(db->env, dir, &e);
    if (!rc) rc = bkv_env_sync_parent(db->env, dir, &e); /* the checkpoint's own name */
    bkv_tree_version_unref(v);
    if (rc) {
        /* A partial copy is not a checkpoint: nothing of it may stay. */
        char **names;
        size_t n;
        if (db->env->list_dir(db->env, dir, &names, &n, NULL) == BKV_OK) {
            for (size_t i = 0; i < n; i++) {
                char p[BKV_PATH_MAX];
                snprintf(p, sizeof p, "%s/%s", dir, names[i]);
                db->env->remove_file(db->env, p, NULL);
            }
            bkv_env_free_list(names, n);
        }
        db->env->remove_dir(db->env, dir, NULL);
    }
    return bkv_db_error(db, rc, &e);
}

int bkv_approximate_size(bkv_db *db, const void *start, size_t slen, const void *limit, size_t llen,
                         uint64_t *bytes) {
    if (!db || !bytes || (!start && slen) || (!limit && llen)) return bkv_db_arg_error(db, "bkv_approximate_size");
    *bytes = 0;
    bkv_err e = {{0}};
    bkv_buf lo, hi;
    bkv_buf_init(&lo);
    bkv_buf_init(&hi);
    if ((start && bkv_ikey_seek_key(&lo, start, slen)) || (limit && bkv_ikey_seek_key(&hi, limit, llen))) {
        bkv_buf_free(&lo);
        bkv_buf_free(&hi);
        return bkv_db_error(db, bkv_fail(&e, BKV_NOMEM, "out of memory"), &e);
    }
    bkv_db_lock(db);
    bkv_tree_version *v = bkv_vset_current(&db->vset);
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    bkv_db_unlock(db);
    int rc = BKV_OK;
    for (int l = 0; !rc && l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; !rc && i < v->nfiles[l]; i++) {
            const bkv_file_meta *f = v->files[l][i];
            /* Wholly outside the range: nothing; wholly inside: all of it. */
            if ((limit && bkv_ikey_compare(f->smallest, f->smallest_len, hi.data, hi.len) >= 0) ||
                (start && bkv_ikey_compare(f->largest, f->largest_len, lo.data, lo.len) < 0))
                continue;
            int cut_lo = start && bkv_ikey_compare(f->smallest, f->smallest_len, lo.data, lo.len) < 0;
            int cut_hi = limit && bkv_ikey_compare(f->largest, f->largest_len, hi.data, hi.len) >= 0;
            if (!cut_lo && !cut_hi) {
                *bytes += f->size;
                continue;
            }
            bkv_cache_entry *entry;
            if ((rc = bkv_db_get_table(db, f, &entry, &e))) break;
            bkv_table *t = bkv_cache_value(entry);
            uint64_t from = cut_lo ? bkv_table_approximate_offset(t, lo.data, lo.len) : 0;
            uint64_t to = cut_hi ? bkv_table_approximate_offset(t, hi.data, hi.len) : f->size;
            bkv_cache_release(db->table_cache, entry);
            if (to > from) *bytes += to - from;
        }
    bkv_tree_version_unref(v);
    bkv_buf_free(&lo);
    bkv_buf_free(&hi);
    return bkv_db_error(db, rc, &e);
}

/* Every lock a read can take, in the order the engine takes them (the
 * grace period before the db mutex, the value index before it too), so no
 * thread is inside a critical section when the process forks. */
void bkv_fork_prepare(bkv_db *db) {
    if (!db) return;
    bkv_views_fork_prepare(db);
    bkv_wal_set_fork_prepare(&db->wals);
    bkv_db_value_fork_prepare(db);
    bkv_db_lock(db);
    bkv_cache_fork_prepare(db->table_cache);
    bkv_cache_fork_prepare(db->block_cache);
}

void bkv_fork_parent(bkv_db *db) {
    if (!db) return;
    bkv_cache_fork_parent(db->block_cache);
    bkv_cache_fork_parent(db->table_cache);
    bkv_db_unlock(db);
    bkv_db_value_fork_parent(db);
    bkv_wal_set_fork_parent(&db->wals);
    bkv_views_fork_parent(db);
}

void bkv_fork_child(bkv_db *db) {
    if (!db) return;
    bkv_cache_fork_child(db->block_cache);
    bkv_cache_fork_child(db->table_cache);
    bkv_mutex_init_adaptive(&db->mu);
    BKV_NOTE_OWNER(db, 0);
    bkv_db_value_fork_child(db);
    bkv_wal_set_fork_child(&db->wals);
    bkv_views_fork_child(db);
}
