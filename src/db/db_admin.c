/*
 * Whole-database operations: destroying a database, a consistent
 * checkpoint into another directory, and the approximate size of a key
 * range.
 */
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/version_set.h"
#include "util/ikey.h"
#include "util/mutex.h"

int bkv_destroy(const char *path) {
    bkv_err e = {{0}};
    if (!path || !*path) return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_destroy: no path given"});
    const bkv_env *env = bkv_env_posix();
    if (!env->file_exists(env, path)) return BKV_OK;
    void *lock;
    int rc = env->lock_dir(env, path, 0600, 0, &lock, &e);
    if (rc) return bkv_db_error(NULL, rc, &e);
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
int bkv_checkpoint(bkv_db *db, const char *dir) {
    bkv_err e = {{0}};
    if (!db) return BKV_INVALID;
    if (!dir || !*dir) return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "bkv_checkpoint: no directory given"), &e);
    if (strlen(dir) > BKV_PATH_MAX - 64)
        return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "bkv_checkpoint: path too long"), &e);
    int rc = db->env->create_dir(db->env, dir, bkv_dir_mode(db->opts.file_mode), 1, &e);
    if (rc) return bkv_db_error(db, rc, &e);
    if ((rc = bkv_flush(db))) {
        db->env->remove_dir(db->env, dir, NULL);
        return rc;
    }
    bkv_db_lock(db);
    bkv_tree_version *v = db->current;
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    uint64_t last_sequence = db->last_sequence, next_file = db->next_file;
    bkv_db_unlock(db);
    for (int l = 0; !rc && l < BKV_NUM_LEVELS; l++)
        for (size_t i = 0; !rc && i < v->nfiles[l]; i++) rc = checkpoint_table(db, dir, v->files[l][i]->number, &e);
    /* Numbers from the source's counter on: no table number is reused. */
    uint64_t log_number = next_file, manifest_number = next_file + 1;
    char wal[BKV_PATH_MAX];
    bkv_wal_name(wal, dir, log_number);
    bkv_wfile *f;
    if (!rc && !(rc = db->env->new_writable(db->env, wal, db->opts.file_mode, &f, &e))) {
        rc = bkv_file_sync(f, &e);
        int crc = bkv_file_close(f, rc ? NULL : &e);
        if (!rc) rc = crc;
    }
    bkv_log_writer lw;
    if (!rc)
        rc = bkv_vset_write_snapshot(db, dir, v, manifest_number, log_number, manifest_number + 1, last_sequence, NULL,
                                     &lw, &e);
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
    if (!db || !bytes || (!start && slen) || (!limit && llen)) return BKV_INVALID;
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
    bkv_tree_version *v = db->current;
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    bkv_db_unlock(db);
    int rc = BKV_OK;
    for (int l = 0; !rc && l < BKV_NUM_LEVELS; l++)
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
    pthread_mutex_lock(&db->grace_mu);
    pthread_mutex_lock(&db->log_sync_mu);
    pthread_mutex_lock(&db->vindex_update_mu);
    pthread_rwlock_wrlock(&db->vindex_lock);
    bkv_db_lock(db);
    bkv_cache_fork_prepare(db->table_cache);
    bkv_cache_fork_prepare(db->block_cache);
}

void bkv_fork_parent(bkv_db *db) {
    if (!db) return;
    bkv_cache_fork_parent(db->block_cache);
    bkv_cache_fork_parent(db->table_cache);
    bkv_db_unlock(db);
    pthread_rwlock_unlock(&db->vindex_lock);
    pthread_mutex_unlock(&db->vindex_update_mu);
    pthread_mutex_unlock(&db->log_sync_mu);
    pthread_mutex_unlock(&db->grace_mu);
}

void bkv_fork_child(bkv_db *db) {
    if (!db) return;
    bkv_cache_fork_child(db->block_cache);
    bkv_cache_fork_child(db->table_cache);
    bkv_mutex_init_adaptive(&db->mu);
    BKV_NOTE_OWNER(db, 0);
    pthread_rwlock_init(&db->vindex_lock, NULL);
    pthread_mutex_init(&db->vindex_update_mu, NULL);
    pthread_mutex_init(&db->log_sync_mu, NULL);
    pthread_mutex_init(&db->grace_mu, NULL);
}
