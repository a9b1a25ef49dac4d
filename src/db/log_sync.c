/*
 * WALs synced off the write path, and the durable mark that lets recovery
 * tell a power loss from damage.
 *
 * A memtable switch ends the old WAL and starts the next without waiting
 * for the old one to reach the disk: its sync (6-17 ms at 4 MiB) and the
 * close of its map were the longest stalls a writer saw. The old WAL is
 * retired here instead; a background thread syncs and closes it, then
 * syncs the directory (no WAL's name is synced when it is created). After
 * a power loss, then, an older WAL and not only the newest may have lost
 * its unsynced end, or its name.
 *
 * The durable mark says which: a record the write leader puts in the
 * active WAL once every older WAL is durable, before the WAL's first
 * synced write (syncing them itself if the background has not yet), else
 * at the first write after the background did, or at close. An older WAL
 * cut short, or missing, while no later WAL holds a mark lost only
 * unsynced writes: a synced write in a later WAL would have been preceded
 * by a mark there, and one in the cut WAL lies before the cut. Recovery
 * stops at such a cut (what survives is a prefix). With a mark after it,
 * the cut happened after the WAL was durable: damage, refused as before.
 *
 * The spare WAL: creating a file can wait milliseconds for the file
 * system's journal while compactions write, so the next WAL is created
 * ahead by a background thread and a switch only takes it. Its number is
 * drawn when it is made, above the active WAL's; a switch that finds none
 * ready draws its own, and a spare made meanwhile, numbered below it, is
 * removed rather than used, so WALs stay in the order of their numbers.
 * A spare is empty until a switch takes it. Open and check pass over
 * empty WALs after the newest that holds anything, and over an empty one
 * between live WALs that no end record names (a removed spare a crash
 * left); the next open deletes either.
 */
#include <stdlib.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/log_sync.h"
#include "db/memtables.h"
#include "db/write_batch.h"
#include "log/log.h"

int bkv_wal_has_mark(const bkv_env *env, const char *path) {
    uint8_t *data;
    size_t len;
    if (bkv_env_read_all(env, path, &data, &len, NULL)) return 1;
    bkv_log_reader r;
    bkv_log_reader_init(&r, path, data, len, 1);
    r.on_damage = BKV_LOG_DAMAGE_SKIP;
    int marked = 0;
    while (!marked && bkv_log_read_record(&r, NULL) == BKV_OK) marked = bkv_batch_is_log_mark(r.record.data, r.record.len);
    bkv_log_reader_free(&r);
    free(data);
    return marked;
}

/* REQUIRES: log_sync_mu. */
static int sync_retired_locked(bkv_db *db, bkv_err *e) {
    if (db->wals.nretired == 0) return BKV_OK;
    int rc = BKV_OK;
    for (int i = 0; i < db->wals.nretired; i++) {
        if (!rc) rc = bkv_file_sync(db->wals.retired[i], e);
        int close_rc = bkv_file_close(db->wals.retired[i], rc ? NULL : e);
        if (!rc) rc = close_rc;
    }
    uint64_t below = db->wals.retired_next[db->wals.nretired - 1];
    db->wals.nretired = 0;
    if (!rc) rc = db->env->sync_dir(db->env, db->path, e);
    if (!rc) atomic_store_explicit(&db->wals.durable_below, below, memory_order_release);
    /* Cleared last: whoever sees nothing pending sees durable_below too. */
    atomic_store_explicit(&db->wals.retired_pending, 0, memory_order_release);
    return rc;
}

int bkv_db_sync_retired_logs(bkv_db *db, bkv_err *e) {
    BKV_ASSERT_UNLOCKED(db);
    if (!atomic_load_explicit(&db->wals.retired_pending, memory_order_acquire)) return BKV_OK;
    pthread_mutex_lock(&db->wals.mu);
    int rc = sync_retired_locked(db, e);
    pthread_mutex_unlock(&db->wals.mu);
    return rc;
}

int bkv_db_retire_log(bkv_db *db, bkv_wfile *f, uint64_t next, bkv_err *e) {
    BKV_ASSERT_UNLOCKED(db);
    pthread_mutex_lock(&db->wals.mu);
    /* Full only if the background is stuck behind one long compaction
     * while the memtables turn over: then this writer pays the sync. */
    int rc = db->wals.nretired == BKV_MAX_IMM + 1 ? sync_retired_locked(db, e) : BKV_OK;
    db->wals.retired[db->wals.nretired] = f;
    db->wals.retired_next[db->wals.nretired] = next;
    db->wals.nretired++;
    atomic_store_explicit(&db->wals.retired_pending, 1, memory_order_relaxed);
    pthread_mutex_unlock(&db->wals.mu);
    return rc;
}

int bkv_db_mark_log(bkv_db *db, int sync, uint64_t sequence, bkv_err *e) {
    if (db->wals.active_marked || !db->wals.active) return BKV_OK;
    if (atomic_load_explicit(&db->wals.durable_below, memory_order_acquire) < bkv_mems_active_log(db)) {
        if (!sync) return BKV_OK; /* a later write marks it, once the background has synced */
        int rc = bkv_db_sync_retired_logs(db, e);
        if (rc) return rc;
        /* An earlier failed sync dropped its WALs unsynced (and put the
         * database in its error state): never acknowledge a synced write
         * that recovery could drop with them. */
        if (atomic_load_explicit(&db->wals.durable_below, memory_order_acquire) < bkv_mems_active_log(db))
            return bkv_fail(e, BKV_IOERROR, "an older WAL could not be synced; %06llu.log cannot take synced writes",
                            (unsigned long long)bkv_mems_active_log(db));
    }
    uint8_t mark[BKV_LOG_MARK_LEN] = {0};
    bkv_put_u64(mark, sequence);
    bkv_put_u64(mark + BKV_BATCH_HEADER, bkv_mems_active_log(db));
    mark[BKV_LOG_MARK_LEN - 1] = 1;
    int rc = bkv_log_add_record(&db->wals.active_writer, mark, sizeof mark, e);
    if (!rc) db->wals.active_marked = 1;
    return rc;
}

void bkv_db_wal_install(bkv_db *db, bkv_wfile *f) {
    db->wals.active = f;
    if (f) bkv_log_writer_init(&db->wals.active_writer, f);
    db->wals.active_marked = 0;
}

bkv_wfile *bkv_db_wal_active(const bkv_db *db) { return db->wals.active; }

int bkv_db_wal_append(bkv_db *db, const void *record, size_t len, int sync, bkv_err *e) {
    int rc = bkv_log_add_record(&db->wals.active_writer, record, len, e);
    if (!rc) rc = sync ? bkv_file_sync(db->wals.active, e) : bkv_file_flush(db->wals.active, e);
    return rc;
}

int bkv_db_wal_close(bkv_db *db, bkv_err *e) {
    if (!db->wals.active) return BKV_OK;
    int rc = bkv_file_close(db->wals.active, e);
    db->wals.active = NULL;
    return rc;
}

int bkv_db_want_spare_log(const bkv_db *db) {
    return !db->wals.spare && db->wals.active && !db->bg_error && db->wals.spare_for != db->wals.newest;
}

int bkv_db_new_wal(bkv_db *db, const char *path, unsigned mode, bkv_wfile **out, bkv_err *e) {
    if (db->opts.wal_mmap) return bkv_env_new_log(db->env, path, mode, out, e);
    return db->env->new_writable(db->env, path, mode, out, e);
}

void bkv_db_discard_wal(bkv_db *db, bkv_wfile *f, uint64_t number) {
    bkv_file_close(f, NULL);
    char path[BKV_PATH_MAX];
    bkv_wal_name(path, db->path, number);
    db->env->remove_file(db->env, path, NULL);
}

void bkv_db_make_spare_log(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    uint64_t number = bkv_vset_new_file_number(&db->vset);
    db->wals.spare_for = db->wals.newest;
    bkv_db_unlock(db);
    char path[BKV_PATH_MAX];
    bkv_wal_name(path, db->path, number);
    bkv_wfile *f = NULL;
    if (bkv_db_new_wal(db, path, db->opts.file_mode, &f, NULL)) f = NULL;
    bkv_db_lock(db);
    /* A switch that found no spare started a WAL numbered above this one
     * meanwhile: this one could never follow it. */
    if (f && number < db->wals.newest) {
        bkv_db_unlock(db);
        bkv_db_discard_wal(db, f, number);
        bkv_db_lock(db);
        f = NULL;
    }
    db->wals.spare = f;
    db->wals.spare_number = number;
}

bkv_wfile *bkv_db_take_spare_log(bkv_db *db, uint64_t *number) {
    BKV_ASSERT_LOCKED(db);
    bkv_wfile *f = db->wals.spare;
    db->wals.spare = NULL;
    *number = f ? db->wals.spare_number : bkv_vset_new_file_number(&db->vset);
    db->wals.newest = *number;
    return f;
}

void bkv_db_drop_spare_log(bkv_db *db) {
    if (db->wals.spare) bkv_db_discard_wal(db, db->wals.spare, db->wals.spare_number);
    db->wals.spare = NULL;
}

void bkv_db_free_wals(bkv_db *db) {
    for (int i = 0; i < db->wals.nretired; i++) bkv_file_close(db->wals.retired[i], NULL);
    db->wals.nretired = 0;
    bkv_db_drop_spare_log(db);
    pthread_mutex_destroy(&db->wals.mu);
}

void bkv_wal_set_init(bkv_wal_set *w) { pthread_mutex_init(&w->mu, NULL); }

int bkv_wal_set_pending(bkv_wal_set *w) { return atomic_load_explicit(&w->retired_pending, memory_order_relaxed); }

void bkv_wal_set_note_marks(bkv_wal_set *w) { w->marks = 1; }

int bkv_wal_set_marks(const bkv_wal_set *w) { return w->marks; }

void bkv_wal_set_started(bkv_wal_set *w, uint64_t number) {
    atomic_store(&w->durable_below, number);
    w->newest = number;
}

void bkv_wal_set_fork_prepare(bkv_wal_set *w) { pthread_mutex_lock(&w->mu); }

void bkv_wal_set_fork_parent(bkv_wal_set *w) { pthread_mutex_unlock(&w->mu); }

void bkv_wal_set_fork_child(bkv_wal_set *w) { pthread_mutex_init(&w->mu, NULL); }
