/*
 * Opening and closing a database: locking, recovery from the manifest and
 * write-ahead logs, and the switch to a fresh manifest.
 *
 * Recovery order, chosen so a crash at any point leaves a database the
 * next open recovers:
 *   1. read CURRENT and replay the manifest it names (its torn tail, an
 *      edit whose commit never returned, is dropped);
 *   2. replay every WAL numbered >= the manifest's log number, oldest
 *      first, into memtables, writing level-0 tables as they fill and once
 *      at the end (tables are synced before anything refers to them);
 *   3. start a new WAL and write a new manifest holding the whole state,
 *      then point CURRENT at it (temp file, fsync, rename, fsync dir);
 *   4. only then delete what no longer matters: older WALs and manifests,
 *      tables not in the version (outputs of an interrupted flush), temps.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/memtables.h"
#include "db/read_view.h"
#include "db/repair.h"
#include "db/scheduler.h"
#include "db/table_file.h"
#include "db/version_set.h"
#include "db/write_batch.h"
#include "util/ikey.h"
#include "util/mutex.h"

int bkv_library_version(void) { return BKV_VERSION_NUMBER; }

void bkv_free(void *p) { free(p); }

bkv_db *bkv_db_scratch(const bkv_env *env, const char *path) {
    size_t size = (sizeof(bkv_db) + 63) / 64 * 64;
    bkv_db *db = aligned_alloc(64, size);
    if (!db) return NULL;
    memset(db, 0, size);
    db->env = env;
    db->path = (char *)path;
    return db;
}

static int memtable_insert(void *arg, uint64_t seq, unsigned type, const uint8_t *key, size_t klen,
                           const uint8_t *val, size_t vlen) {
    bkv_memtable *m = arg;
    return bkv_memtable_add(m, seq, type, key, klen, val, vlen, bkv_hash_bytes(key, klen));
}

_Static_assert((int)BKV_WAL_RECOVERY_ABSOLUTE == (int)BKV_LOG_DAMAGE_FAIL &&
                   (int)BKV_WAL_RECOVERY_POINT_IN_TIME == (int)BKV_LOG_DAMAGE_STOP &&
                   (int)BKV_WAL_RECOVERY_SKIP_DAMAGED == (int)BKV_LOG_DAMAGE_SKIP,
               "the log reader's damage modes are the wal_recovery modes");

/* State gathered while recovering. */
typedef struct recovery {
    bkv_version_edit edit;  /* tables written from replayed logs */
    uint64_t log_number;
    uint64_t max_sequence;
} recovery;



static int flush_recovered(bkv_db *db, recovery *rec, bkv_memtable **mem, bkv_err *e) {
    if (bkv_memtable_entries(*mem) == 0) return BKV_OK;
    bkv_file_meta *meta = NULL;
    double budget_bits = bkv_table_file_budget_bits(db, bkv_vset_current(&db->vset), 0, bkv_memtable_entries(*mem));
    int rc = bkv_db_write_memtable(db, *mem, bkv_vset_new_file_number(&db->vset), budget_bits, &meta, e);
    if (rc) return rc;
    rc = bkv_edit_add_file(&rec->edit, 0, meta);
    bkv_file_meta_unref(meta);
    if (rc) return bkv_fail(e, rc, "out of memory");
    bkv_memtable_unref(*mem);
    if (!(*mem = bkv_mems_new_memtable(db))) return bkv_fail(e, BKV_NOMEM, "out of memory");
    return BKV_OK;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int log_is_empty(bkv_db *db, const char *path) {
    bkv_rfile *f;
    if (db->env->new_readable(db->env, path, 0, &f, NULL)) return 0; /* the read will say why */
    int empty = bkv_file_size(f) == 0;
    bkv_file_close_readable(f);
    return empty;
}

/* Whether a WAL of logs[from..n) holds a durable mark (log_sync.c): only
 * then can an older WAL cut short, or missing, be damage rather than a
 * power loss. */
static int marked_log_after(bkv_db *db, const uint64_t *logs, size_t n, size_t from) {
    for (size_t i = from; i < n; i++) {
        char path[BKV_PATH_MAX];
        bkv_wal_name(path, db->path, logs[i]);
        if (bkv_wal_has_mark(db->env, path)) return 1;
    }
    return 0;
}

/* Whether path's bytes are no longer the len bytes read into data. */
static int log_changed(bkv_db *db, const char *path, const uint8_t *data, size_t len) {
    uint8_t *now;
    size_t now_len;
    if (bkv_env_read_all(db->env, path, &now, &now_len, NULL)) return 1;
    int changed = now_len != len || memcmp(now, data, len) != 0;
    free(now);
    return changed;
}

static int replay_logs(bkv_db *db, recovery *rec, bkv_err *e) {
    char **names;
    size_t n;
    int rc = db->env->list_dir(db->env, db->path, &names, &n, e);
    if (rc) return rc;
    uint64_t *logs = malloc((n ? n : 1) * sizeof *logs);
    size_t nlogs = 0;
    if (!logs) {
        bkv_env_free_list(names, n);
        return bkv_fail(e, BKV_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t num;
        int kind = bkv_parse_file_name(names[i], &num);
        if (kind == BKV_FILE_LOG || kind == BKV_FILE_TABLE || kind == BKV_FILE_MANIFEST)
            bkv_vset_note_file_number(&db->vset, num);
        if (kind == BKV_FILE_LOG && num >= rec->log_number) logs[nlogs++] = num;
    }
    bkv_env_free_list(names, n);
    qsort(logs, nlogs, sizeof *logs, cmp_u64);
    /* The manifest's log number names a WAL made durable before the edit
     * was written; replaying without it would silently drop its writes. */
    if (rec->log_number && (nlogs == 0 || logs[0] != rec->log_number) && db->repair) {
        char path[BKV_PATH_MAX];
        bkv_wal_name(path, db->path, rec->log_number);
        bkv_repair_note(db->repair, "%06llu.log: missing, but the manifest named it as the oldest live WAL: the "
                        "writes it held since the last flush are lost", (unsigned long long)rec->log_number);
    } else if (rec->log_number && (nlogs == 0 || logs[0] != rec->log_number)) {
        char path[BKV_PATH_MAX];
        bkv_wal_name(path, db->path, rec->log_number);
        free(logs);
        return bkv_fail(e, BKV_CORRUPTION, "%s: missing (offset 0): the manifest names it as the oldest live WAL", path);
    }

    /* Only the newest log holding anything can end in a write cut short by
     * a crash, or without an end record, unless the manifest says older
     * ones were synced lazily (wal_marks; then a cut older log with no
     * durable mark after it was a power loss: recovery stops there). Logs
     * after the newest are empty: made by an open whose new manifest never
     * took effect. */
    size_t newest = nlogs;
    char path[BKV_PATH_MAX];
    while (newest > 1) {
        bkv_wal_name(path, db->path, logs[newest - 1]);
        if (!log_is_empty(db, path)) break;
        newest--;
    }
    bkv_memtable *mem = bkv_mems_new_memtable(db);
    if (!mem) rc = bkv_fail(e, BKV_NOMEM, "out of memory");
    uint64_t named_next = 0; /* the WAL the previous one's end record names */
    for (size_t i = 0; rc == BKV_OK && i < nlogs; i++) {
        bkv_wal_name(path, db->path, logs[i]);
        /* A spare WAL a switch overtook, left by a crash before its
         * removal (log_sync.c): empty, and named by no end record nor by
         * the manifest, it holds nothing and is no gap (it may also follow
         * a WAL whose end record names one the crash kept from being
         * made). */
        if (logs[i] != named_next && logs[i] != rec->log_number && log_is_empty(db, path)) continue;
        /* A WAL missing between two others lost its writes: only the end
         * record before it can tell. */
        if (named_next && logs[i] != named_next) {
            /* Its name was lost with the power before it was synced. */
            if (bkv_wal_set_marks(&db->wals) && !marked_log_after(db, logs, nlogs, i)) break;
            if (db->opts.wal_recovery == BKV_WAL_RECOVERY_POINT_IN_TIME) break;
            if (db->opts.wal_recovery == BKV_WAL_RECOVERY_ABSOLUTE) {
                char missing[BKV_PATH_MAX];
                bkv_wal_name(missing, db->path, named_next);
                rc = bkv_fail(e, BKV_CORRUPTION, "%s: missing (offset 0): the WAL before it names it as next, and "
                              "%06llu.log follows", missing, (unsigned long long)logs[i]);
                break;
            }
        }
        named_next = 0;
        uint8_t *data;
        size_t len;
        if ((rc = bkv_env_read_all(db->env, path, &data, &len, e))) {
            /* Read-only, beside a writer: a WAL listed a moment ago and gone
             * now was a spare it dropped, or one a flush made obsolete; the
             * manifest then moved, and the open is made again
             * (bkv_open_env). */
            if (db->opts.read_only && !db->env->file_exists(db->env, path)) {
                rc = BKV_OK;
                continue;
            }
            break;
        }
        int may_end_early = i + 1 >= newest, ended = 0;
        bkv_log_reader r;
        bkv_log_reader_init(&r, path, data, len, may_end_early || bkv_wal_set_marks(&db->wals));
        r.on_damage = db->opts.wal_recovery;
        while ((rc = bkv_log_read_record(&r, e)) == BKV_OK) {
            const uint8_t *rep = r.record.data;
            if (ended) {
                rc = bkv_fail(e, BKV_CORRUPTION, "%s: record at offset %llu follows the log's end record", path,
                              (unsigned long long)r.record_offset);
                break;
            }
            if (bkv_batch_is_log_end(rep, r.record.len)) {
                ended = 1;
                named_next = bkv_log_end_next(rep, r.record.len);
                continue;
            }
            if (bkv_batch_is_log_mark(rep, r.record.len)) continue;
            /* Validate the whole batch before applying any of it. */
            rc = bkv_batch_iterate(rep, r.record.len, NULL, NULL, path, r.record_offset, e);
            if (rc == BKV_CORRUPTION && db->repair) {
                /* Whole by its checksum, not a batch: skipped like damage. */
                bkv_repair_note(db->repair, "%s", e->msg);
                r.skipped_bytes += r.record.len;
                if (!r.damage_offset) r.damage_offset = r.record_offset;
                rc = BKV_OK;
                continue;
            }
            if (rc) break;
            rc = bkv_batch_iterate(rep, r.record.len, memtable_insert, mem, path, r.record_offset, e);
            if (rc) {
                rc = bkv_fail(e, rc, "%s: cannot apply record at offset %llu: %s", path,
                              (unsigned long long)r.record_offset, bkv_strerror(rc));
                break;
            }
            uint32_t count = bkv_batch_rep_count(rep);
            uint64_t last = bkv_batch_sequence(rep) + (count ? count - 1 : 0);
            if (last > rec->max_sequence) rec->max_sequence = last;
            if (!db->opts.read_only && bkv_memtable_memory(mem) >= db->opts.write_buffer_size &&
                (rc = flush_recovered(db, rec, &mem, e)))
                break;
        }
        /* Read-only, beside a writer: the newest WAL may have been appended
         * while it was read, some pages read before the writer passed and
         * later ones after (a record cut short, whole ones after it). If
         * its bytes changed since, the records before that point are a
         * state the database had: kept, the rest dropped. Bytes that did
         * not change are damage, as for any open. */
        int live_tail = rc == BKV_CORRUPTION && db->opts.read_only && may_end_early && log_changed(db, path, data, len);
        if (live_tail) rc = BKV_OK;
        /* Point in time: the state just before the first damage or lost end,
         * so nothing of a later log may be applied either. */
        int stop_here = r.stopped || live_tail;
        if (rc == BKV_NOTFOUND) {
            rc = BKV_OK;
            /* An older log cut short, or (nothing is written after an end
             * record) with bytes dropped after its end. */
            if (!may_end_early && !r.stopped && (!ended || r.dropped_bytes)) {
                unsigned long long cut_at = len - r.dropped_bytes;
                int power_loss = !ended && bkv_wal_set_marks(&db->wals) && !marked_log_after(db, logs, nlogs, i + 1);
                if (power_loss || db->opts.wal_recovery == BKV_WAL_RECOVERY_POINT_IN_TIME) stop_here = 1;
                else if (db->opts.wal_recovery == BKV_WAL_RECOVERY_ABSOLUTE && ended)
                    rc = bkv_fail(e, BKV_CORRUPTION, "%s: damage at offset %llu, after the log's end record", path,
                                  cut_at);
                else if (db->opts.wal_recovery == BKV_WAL_RECOVERY_ABSOLUTE)
                    rc = bkv_fail(e, BKV_CORRUPTION, "%s: truncated at offset %llu (a newer log exists, "
                                  "but this one lacks its end record%s)", path, cut_at,
                                  bkv_wal_set_marks(&db->wals) ? ", and a later one records that it was synced" : "");
            }
        }
        /* Repair keeps a copy of a WAL it read around damage, or found cut
         * short, before the flush below makes it obsolete. */
        int damaged = r.skipped_bytes || (!may_end_early && (!ended || r.dropped_bytes));
        if (rc == BKV_OK && db->repair && damaged)
            rc = bkv_repair_keep_log(db, path, r.skipped_bytes ? r.damage_offset : len - r.dropped_bytes,
                                     r.skipped_bytes + r.dropped_bytes, e);
        bkv_log_reader_free(&r);
        free(data);
        if (stop_here) break;
    }
    /* Read-only: what the WAL holds stays in memory, as the active
     * memtable (no write will ever be added to it). */
    if (rc == BKV_OK && db->opts.read_only) mem = bkv_mems_replace_active(db, mem); /* NULL */
    else if (rc == BKV_OK) rc = flush_recovered(db, rec, &mem, e);
    bkv_memtable_unref(mem);
    free(logs);
    return rc;
}


static void delete_obsolete_files(bkv_db *db) {
    char **names;
    size_t n;
    if (db->env->list_dir(db->env, db->path, &names, &n, NULL)) return;
    for (size_t i = 0; i < n; i++) {
        uint64_t num;
        int kind = bkv_parse_file_name(names[i], &num), keep = 1;
        switch (kind) {
        case BKV_FILE_LOG: keep = num >= bkv_mems_active_log(db); break;
        case BKV_FILE_MANIFEST: keep = num == bkv_vset_manifest_number(&db->vset); break;
        case BKV_FILE_TABLE: keep = bkv_tree_version_has_table(bkv_vset_current(&db->vset), num); break;
        case BKV_FILE_TEMP: keep = 0; break;
        default: break;
        }
        if (!keep) {
            char path[BKV_PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", db->path, names[i]);
            db->env->remove_file(db->env, path, NULL);
        }
    }
    bkv_env_free_list(names, n);
}

static int open_new_log(bkv_db *db, bkv_err *e) {
    uint64_t number = bkv_vset_new_file_number(&db->vset);
    char path[BKV_PATH_MAX];
    bkv_wal_name(path, db->path, number);
    bkv_wfile *f;
    int rc = bkv_db_new_wal(db, path, db->opts.file_mode, &f, e);
    if (rc) return rc;
    bkv_db_wal_install(db, f);
    bkv_mems_set_active_log(db, number);
    /* Older WALs are obsolete once the manifest naming this one is
     * written, which syncs the directory too. */
    bkv_wal_set_started(&db->wals, number);
    return BKV_OK;
}

/* The manifest CURRENT names, replayed: the version set takes the
 * version, and the parts that own the rest take theirs; *log_number is
 * the oldest WAL still needed. */
static int recover_manifest(bkv_db *db, uint64_t *log_number, bkv_err *e) {
    bkv_manifest_found found;
    int rc = bkv_vset_recover(db, &found, e);
    if (rc) return rc;
    *log_number = found.log_number;
    if (found.has_value_index) bkv_db_value_rec_recovered(db, &found.value_index);
    if (found.wal_marks) bkv_wal_set_note_marks(&db->wals);
    return BKV_OK;
}

static int recover(bkv_db *db, int exists, bkv_err *e) {
    recovery rec;
    memset(&rec, 0, sizeof rec);
    bkv_edit_init(&rec.edit);
    int rc = BKV_OK;
    if (bkv_vset_init(&db->vset)) return bkv_fail(e, BKV_NOMEM, "out of memory");
    if (exists) rc = recover_manifest(db, &rec.log_number, e);
    /* Before replay: tables it writes carry value filters. */
    if (!rc) rc = bkv_db_value_index_setup(db, e);
    if (!rc) rc = replay_logs(db, &rec, e);
    if (!rc && rec.max_sequence > db->last_sequence) db->last_sequence = rec.max_sequence;
    if (!rc && rec.edit.nadded) rc = bkv_vset_apply_unlogged(&db->vset, &rec.edit);
    bkv_edit_free(&rec.edit);
    /* Every table the version names must exist: a missing one is damage
     * (reported now, naming it), not an empty key range. A repair drops
     * it instead, and rewrites damaged tables from what can be read. */
    if (!rc && db->repair) rc = bkv_repair_tables(db, e);
    const bkv_tree_version *v = bkv_vset_current(&db->vset);
    for (int l = 0; !rc && l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; !rc && i < v->nfiles[l]; i++) {
            char t[BKV_PATH_MAX];
            bkv_table_name(t, db->path, v->files[l][i]->number);
            if (!db->env->file_exists(db->env, t))
                rc = bkv_fail(e, BKV_CORRUPTION, "%s: missing, but the manifest lists it at level %d (offset 0)", t, l);
        }
    if (!rc && !db->opts.read_only) rc = open_new_log(db, e);
    if (!rc && !db->opts.read_only) rc = bkv_vset_write_manifest(db, bkv_mems_active_log(db), bkv_db_value_rec(db), e);
    if (!rc && db->repair) rc = bkv_repair_set_aside(db, e);
    if (!rc) rc = bkv_db_value_index_open(db, e);
    if (!rc) {
        atomic_store(&db->visible_sequence, db->last_sequence);
        if (!db->opts.read_only) delete_obsolete_files(db);
    }
    return rc;
}

static void free_db(bkv_db *db) {
    /* Snapshots the caller never released. */
    while (db->snapshots.next && db->snapshots.next != &db->snapshots) {
        bkv_snapshot *s = db->snapshots.next;
        db->snapshots.next = s->next;
        free(s);
    }
    bkv_db_wal_close(db, NULL);
    bkv_db_free_wals(db);
    bkv_views_destroy(db);
    bkv_mems_free(db);
    bkv_vset_free(&db->vset);
    bkv_db_value_state_free(db);
    pthread_mutex_destroy(&db->catch_up_mu);
    if (db->table_cache) bkv_cache_free(db->table_cache);
    if (db->block_cache) bkv_cache_free(db->block_cache);
    if (db->lock) db->env->unlock_dir(db->env, db->lock);
    bkv_write_queue_free(&db->wq);
    for (int l = 0; l < BKV_MAX_LEVELS; l++) bkv_buf_free(&db->compact_pointer[l]);
    pthread_mutex_destroy(&db->mu);
    pthread_cond_destroy(&db->bg_cv);
    bkv_sched_free(&db->sched);
    free(db->path);
    free(db);
}

/* Every open handle, so that bkv_close can refuse one that is not (closed
 * already, or being closed by another thread) without touching its memory. */
static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
static bkv_db *open_handles;

static void register_open(bkv_db *db) {
    pthread_mutex_lock(&open_mu);
    db->next_open = open_handles;
    open_handles = db;
    pthread_mutex_unlock(&open_mu);
}

/* Takes db out of the registry for its close: BKV_OK, or why not. */
static int take_for_close(bkv_db *db, bkv_err *e) {
    pthread_mutex_lock(&open_mu);
    bkv_db **p = &open_handles;
    while (*p && *p != db) p = &(*p)->next_open;
    int rc = BKV_OK;
    if (!*p) {
        rc = bkv_fail(e, BKV_INVALID, "bkv_close: not an open database (closed already, or by another thread)");
    } else {
        bkv_db_lock(db);
        int snapshots = db->snapshots.next != &db->snapshots;
        bkv_db_unlock(db);
        int iters = atomic_load_explicit(&db->live_iters, memory_order_relaxed);
        if (iters || snapshots)
            rc = bkv_fail(e, BKV_BUSY, "bkv_close: %s still has %d iterator%s and %s: destroy and release them first; "
                          "nothing was closed", db->path, iters, iters == 1 ? "" : "s",
                          snapshots ? "live snapshots" : "no snapshot");
        else *p = db->next_open;
    }
    pthread_mutex_unlock(&open_mu);
    return rc;
}

/* A directory without CURRENT: BKV_CORRUPTION when it holds tables (a
 * database that lost its CURRENT: bkv_count_tables), else BKV_NOTFOUND
 * when a database may be created there, or BKV_INVALID. */
static int no_current(const bkv_env *env, const char *path, int may_create, bkv_err *e) {
    char first[64];
    size_t n = bkv_count_tables(env, path, first, sizeof first);
    if (!n && may_create) return BKV_NOTFOUND;
    if (!n) return bkv_fail(e, BKV_INVALID, "%s: no database here (no CURRENT file; use create_if_missing)", path);
    return bkv_fail(e, BKV_CORRUPTION,
                    "%s: CURRENT is missing, but the directory holds %zu table%s (%s%s): not creating a new "
                    "database over them; `bloomkv repair %s` points CURRENT at the newest intact manifest",
                    path, n, n == 1 ? "" : "s", first, n > 1 ? ", ..." : "", path);
}

static int open_once(const char *path, const bkv_options *opts, const bkv_env *env, bkv_repair_state *repair,
                     bkv_db **dbp) {
    bkv_err e = {{0}};
    if (!dbp) return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_open: dbp is NULL"});
    *dbp = NULL;
    bkv_options adopted;
    bkv_options_init(&adopted);
    int rc = BKV_OK;
    if (!path || !*path) rc = bkv_fail(&e, BKV_INVALID, "bkv_open: no path given");
    else if (strlen(path) > BKV_PATH_MAX - 64)
        rc = bkv_fail(&e, BKV_INVALID, "bkv_open: path longer than %d bytes", BKV_PATH_MAX - 64);
    else if (opts) rc = bkv_adopt_options(&adopted, sizeof adopted, opts, "bkv_options", &e);
    if (!rc) rc = bkv_check_options(&adopted, &e);
    if (rc) return bkv_db_error(NULL, rc, &e);
    opts = &adopted;
    /* 64-byte aligned: the counter stripes must each start a cache line. */
    size_t db_size = (sizeof(bkv_db) + 63) / 64 * 64;
    bkv_db *db = aligned_alloc(64, db_size);
    if (db) memset(db, 0, db_size);
    if (!db || !(db->path = strdup(path))) {
        free(db);
        return bkv_db_error(NULL, BKV_NOMEM, &(bkv_err){"bkv_open: out of memory"});
    }
    db->env = env;
    db->repair = repair;
    db->opts = *opts;
    bkv_options_own_levels(&db->opts, db->level_options);
    bkv_mutex_init_adaptive(&db->mu);
    bkv_db_value_state_init(db);
    bkv_views_init(db);
    pthread_mutex_init(&db->catch_up_mu, NULL);
    bkv_wal_set_init(&db->wals);
    pthread_cond_init(&db->bg_cv, NULL);
    bkv_sched_init(&db->sched);
    bkv_write_queue_init(&db->wq);
    db->snapshots.next = db->snapshots.prev = &db->snapshots;
    db->owner.on_obsolete = bkv_db_table_obsolete;
    db->owner.ctx = db;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) bkv_buf_init(&db->compact_pointer[l]);

    char p[BKV_PATH_MAX];
    bkv_current_name(p, path);
    int exists = 0;
    if (opts->read_only) {
        /* Nothing is created, locked or written: see recover(). */
        if (!env->file_exists(env, path)) rc = bkv_fail(&e, BKV_INVALID, "%s: does not exist", path);
        else if (!env->file_exists(env, p)) rc = no_current(env, path, 0, &e);
        exists = !rc;
    } else if (opts->create_if_missing) {
        rc = env->create_dir(env, path, bkv_dir_mode(opts->file_mode), 0, &e);
    } else if (!env->file_exists(env, path)) {
        rc = bkv_fail(&e, BKV_INVALID, "%s: does not exist (use create_if_missing)", path);
    } else if (!env->file_exists(env, p)) {
        /* Refused before the lock, so that an open that creates nothing
         * leaves nothing behind (not even a LOCK file). */
        rc = no_current(env, path, 0, &e);
    }
    if (!rc && !opts->read_only) {
        rc = env->lock_dir(env, path, opts->file_mode, 0, &db->lock, &e);
        /* Existence is decided under the lock: another process may be creating it. */
        exists = !rc && env->file_exists(env, p);
    }
    if (!rc && exists && opts->error_if_exists) rc = bkv_fail(&e, BKV_INVALID, "%s: database exists (error_if_exists)", path);
    if (!rc && !exists) {
        rc = no_current(env, path, opts->create_if_missing, &e);
        /* A new database: its directory's own name is made durable too, or
         * a power loss could take the whole database, synced writes and all. */
        if (rc == BKV_NOTFOUND) rc = bkv_env_sync_parent(env, path, &e);
    }
    if (!rc) {
        bkv_mems_init(db);
        db->table_cache = bkv_cache_new((size_t)opts->max_open_files);
        if (opts->block_cache_size) db->block_cache = bkv_cache_new(opts->block_cache_size);
        if (!db->table_cache || (opts->block_cache_size && !db->block_cache))
            rc = bkv_fail(&e, BKV_NOMEM, "out of memory");
    }
    if (!rc) rc = recover(db, exists, &e);
    if (!rc && !bkv_mems_active(db)) {
        bkv_memtable *m = bkv_mems_new_memtable(db);
        if (m) bkv_mems_replace_active(db, m);
        else rc = bkv_fail(&e, BKV_NOMEM, "out of memory");
    }
    if (!rc) {
        bkv_db_lock(db);
        bkv_view_publish(db);
        bkv_db_unlock(db);
    }
    if (!rc && !opts->read_only) rc = bkv_sched_start(db, opts->max_background_jobs, &e);
    if (rc) {
        bkv_sched_stop(db);
        free_db(db);
        return bkv_db_error(NULL, rc, &e);
    }
    db->repair = NULL;
    register_open(db);
    *dbp = db;
    return BKV_OK;
}

/* Where the manifest stands: the one CURRENT names and its size (0, 0
 * when either cannot be read). */
static void manifest_position(const bkv_env *env, const char *path, uint64_t *number, uint64_t *size) {
    *number = *size = 0;
    char name[BKV_PATH_MAX];
    bkv_rfile *f;
    if (bkv_read_current(env, path, number, NULL)) return;
    bkv_manifest_name(name, path, *number);
    if (env->new_readable(env, name, 0, &f, NULL)) return;
    *size = bkv_file_size(f);
    bkv_file_close_readable(f);
}

int bkv_open_env(const char *path, const bkv_options *opts, const bkv_env *env, bkv_db **dbp) {
    bkv_options adopted;
    bkv_options_init(&adopted);
    int read_only = path && opts && !bkv_adopt_options(&adopted, sizeof adopted, opts, "bkv_options", &(bkv_err){{0}}) &&
                    adopted.read_only;
    if (!read_only) return open_once(path, opts, env, NULL, dbp);
    /* A read-only open takes no lock: a writer holding the database may
     * compact a table away, drop a WAL or start a new manifest between
     * what this open reads. What it read is the database only if the
     * manifest did not move meanwhile (as a sequence lock); else it opens
     * again, up to 8 times. */
    int rc = BKV_IOERROR;
    for (int tries = 0; tries < 8; tries++) {
        uint64_t number, size, now_number, now_size;
        manifest_position(env, path, &number, &size);
        rc = open_once(path, opts, env, NULL, dbp);
        if (rc == BKV_INVALID || rc == BKV_NOMEM) break;
        manifest_position(env, path, &now_number, &now_size);
        if (now_number == number && now_size == size) break;
        if (rc == BKV_OK) {
            bkv_close(*dbp);
            *dbp = NULL;
            rc = bkv_db_error(NULL, BKV_BUSY,
                              &(bkv_err){"bkv_open: read_only: the database changed under every try to open it"});
        }
    }
    return rc;
}

int bkv_open(const char *path, const bkv_options *opts, bkv_db **dbp) {
    return bkv_open_env(path, opts, bkv_env_posix(), dbp);
}

/* What a read-only open reads (the manifest's version, the WALs replayed
 * into a memtable), read again for bkv_try_catch_up into a shell of a
 * handle that shares db's options and value index parameters. */
typedef struct reread {
    bkv_db *shell;
    recovery rec;
} reread;

static void reread_free(reread *r) {
    if (!r->shell) return;
    bkv_edit_free(&r->rec.edit);
    bkv_mems_free(r->shell);
    bkv_vset_free(&r->shell->vset);
    bkv_db_free_wals(r->shell);
    free(r->shell);
    r->shell = NULL;
}

static int reread_state(bkv_db *db, reread *r, bkv_err *e) {
    memset(r, 0, sizeof *r);
    bkv_edit_init(&r->rec.edit);
    bkv_db *s = bkv_db_scratch(db->env, db->path);
    if (!s) return bkv_fail(e, BKV_NOMEM, "out of memory");
    s->opts = db->opts;
    bkv_db_value_copy_params(s, db); /* the memtable indexes terms as db's does (the record: from the manifest) */
    bkv_wal_set_init(&s->wals);
    r->shell = s;
    if (bkv_vset_init(&s->vset)) return bkv_fail(e, BKV_NOMEM, "out of memory");
    int rc = recover_manifest(s, &r->rec.log_number, e);
    if (!rc && !bkv_db_value_same_index(s, db))
        rc = bkv_fail(e, BKV_BUSY, "the database's value index changed since it was opened: open it again");
    if (!rc) rc = replay_logs(s, &r->rec, e);
    if (!rc && r->rec.max_sequence > s->last_sequence) s->last_sequence = r->rec.max_sequence;
    return rc;
}

/* The edit that turns version from into version to, table by table. */
static int version_diff(const bkv_tree_version *from, const bkv_tree_version *to, bkv_version_edit *edit) {
    int rc = BKV_OK;
    for (int l = 0; !rc && l < BKV_MAX_LEVELS; l++) {
        for (size_t i = 0; !rc && i < to->nfiles[l]; i++)
            if (!bkv_tree_version_level_has(from, l, to->files[l][i]->number))
                rc = bkv_edit_add_file(edit, l, to->files[l][i]);
        for (size_t i = 0; !rc && i < from->nfiles[l]; i++)
            if (!bkv_tree_version_level_has(to, l, from->files[l][i]->number))
                rc = bkv_edit_delete_file(edit, l, from->files[l][i]->number);
    }
    return rc;
}

int bkv_try_catch_up(bkv_db *db, int *changed) {
    if (changed) *changed = 0;
    if (!db) return bkv_db_arg_error(db, "bkv_try_catch_up");
    if (!db->opts.read_only)
        return bkv_db_error(db, BKV_INVALID,
                            &(bkv_err){"bkv_try_catch_up: the handle was not opened read_only (a writer is current)"});
    bkv_err e = {{0}};
    pthread_mutex_lock(&db->catch_up_mu);
    bkv_db_lock(db);
    int snapshots = db->snapshots.next != &db->snapshots;
    bkv_db_unlock(db);
    int rc = snapshots ? bkv_fail(&e, BKV_BUSY, "bkv_try_catch_up: snapshots are live (their state could not be "
                                                "kept once the writer compacts it away): release them first")
                       : BKV_IOERROR;
    reread r = {0};
    /* As a read-only open: what was read counts only if the manifest did
     * not move meanwhile. */
    for (int tries = 0; !snapshots && tries < 8; tries++) {
        uint64_t number, size, now_number, now_size;
        manifest_position(db->env, db->path, &number, &size);
        reread_free(&r);
        rc = reread_state(db, &r, &e);
        manifest_position(db->env, db->path, &now_number, &now_size);
        if (now_number == number && now_size == size) break;
        if (rc == BKV_OK)
            rc = bkv_fail(&e, BKV_BUSY, "bkv_try_catch_up: the database changed under every try to read it");
    }
    bkv_version_edit edit;
    bkv_edit_init(&edit);
    if (!rc && version_diff(bkv_vset_current(&db->vset), bkv_vset_current(&r.shell->vset), &edit))
        rc = bkv_fail(&e, BKV_NOMEM, "out of memory");
    int moved = !rc && (edit.nadded || edit.ndeleted || r.shell->last_sequence != db->last_sequence ||
                        bkv_memtable_entries(bkv_mems_active(r.shell)) != bkv_memtable_entries(bkv_mems_active(db)));
    if (moved) {
        /* The value index covers every table of the version installed: new
         * tables enter before it, old ones leave after (as for a flush). */
        bkv_db_value_index_add(db, &edit);
        bkv_db_lock(db);
        bkv_tree_version *old_version = bkv_vset_swap(&db->vset, bkv_vset_swap(&r.shell->vset, NULL));
        bkv_memtable *old_mem = bkv_mems_replace_active(db, bkv_mems_replace_active(r.shell, NULL));
        bkv_vset_swap(&r.shell->vset, old_version); /* freed with the shell, once the views let go of them */
        bkv_mems_replace_active(r.shell, old_mem);
        db->last_sequence = r.shell->last_sequence;
        atomic_store_explicit(&db->visible_sequence, db->last_sequence, memory_order_release);
        bkv_view_publish(db);
        bkv_db_unlock(db);
        bkv_db_value_index_finish(db, &edit, 1);
        bkv_view_reclaim(db);
        if (changed) *changed = 1;
    }
    bkv_edit_free(&edit);
    reread_free(&r);
    pthread_mutex_unlock(&db->catch_up_mu);
    return bkv_db_error(db, rc, &e);
}

int bkv_open_repairing(const char *path, bkv_repair_state *repair, bkv_db **dbp) {
    bkv_options o;
    bkv_options_init(&o);
    o.wal_recovery = BKV_WAL_RECOVERY_SKIP_DAMAGED;
    return open_once(path, &o, bkv_env_posix(), repair, dbp);
}

int bkv_close(bkv_db *db) {
    if (!db) return BKV_OK;
    bkv_err busy;
    int refused = take_for_close(db, &busy);
    if (refused) return bkv_db_error(NULL, refused, &busy);
    bkv_sched_stop(db);
    /* The retired WALs synced, the active one marked: a later open can then
     * tell damage at the end of any of them from a power loss. */
    bkv_err e = {{0}};
    int rc = bkv_db_sync_retired_logs(db, &e);
    if (bkv_db_wal_active(db)) {
        if (!rc && !db->bg_error) rc = bkv_db_mark_log(db, 0, db->last_sequence, &e);
        int close_rc = bkv_db_wal_close(db, rc ? NULL : &e); /* the first error keeps its message */
        if (!rc) rc = close_rc;
    }
    free_db(db);
    return rc ? bkv_db_error(NULL, rc, &e) : BKV_OK;
}
