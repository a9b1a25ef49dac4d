/*
 * Background work: flushes of immutable memtables and compactions, the
 * threads that run them (their bookkeeping is scheduler.c's), and the
 * calls that wait for them (bkv_compact, bkv_compact_range, value index
 * builds).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>

#include "db/compaction.h"
#include "db/filename.h"
#include "db/memtables.h"
#include "db/read_view.h"
#include "db/scheduler.h"
#include "db/table_file.h"
#include "db/version_set.h"
#include "util/ikey.h"

int bkv_db_write_memtable(bkv_db *db, bkv_memtable *mem, uint64_t number, double budget_bits, bkv_file_meta **out,
                          bkv_err *e) {
    *out = NULL;
    if (bkv_memtable_entries(mem) == 0) return BKV_OK;
    /* A flush is never bottommost: older data may sit below any key. */
    bkv_table_file tf;
    int rc = bkv_table_file_open(db, number, 0, 0, budget_bits, &tf, e);
    if (rc) return rc;
    bkv_memtable_iter it;
    bkv_memtable_iter_init(&it, mem);
    for (bkv_memtable_iter_first(&it); !rc && bkv_memtable_iter_valid(&it); bkv_memtable_iter_next(&it)) {
        size_t klen, vlen;
        const uint8_t *k = bkv_memtable_iter_ikey(&it, &klen), *v = bkv_memtable_iter_value(&it, &vlen);
        rc = bkv_table_file_add(&tf, k, klen, v, vlen, e);
    }
    if (rc) {
        bkv_table_file_abandon(&tf);
        return rc;
    }
    rc = bkv_table_file_finish(&tf, out, e);
    /* The new name must be durable before a manifest refers to it. */
    if (!rc) rc = db->env->sync_dir(db->env, db->path, e);
    if (rc) {
        if (*out) db->env->remove_file(db->env, tf.path, NULL);
        bkv_file_meta_unref(*out);
        *out = NULL;
        return rc;
    }
    BKV_COUNT(db, flush_bytes_written, (*out)->size);
    return BKV_OK;
}

/* Syncs and closes the WALs memtable switches retired (log_sync.c); a
 * failure is the database's error. REQUIRES: db->mu held; released
 * meanwhile. */
static void sync_retired_logs(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    bkv_db_unlock(db);
    bkv_err e = {{0}};
    int rc = bkv_db_sync_retired_logs(db, &e);
    bkv_db_lock(db);
    if (rc) bkv_db_set_bg_error(db, rc, &e);
}

/* Flushes the oldest immutable memtable. REQUIRES: db->mu held. */
static void flush_one(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    uint64_t old_log;
    bkv_memtable *mem = bkv_mems_oldest(db, &old_log);
    uint64_t number = bkv_vset_new_file_number(&db->vset);
    db->sched.flushing = 1;
    double budget_bits = bkv_table_file_budget_bits(db, bkv_vset_current(&db->vset), 0, bkv_memtable_entries(mem));
    bkv_db_unlock(db);
    bkv_err e = {{0}};
    bkv_file_meta *meta = NULL;
    bkv_sched_note_working(db, 1);
    int rc = bkv_db_write_memtable(db, mem, number, budget_bits, &meta, &e);
    bkv_sched_note_working(db, -1);
    bkv_version_edit edit;
    bkv_edit_init(&edit);
    if (!rc && meta && (rc = bkv_edit_add_file(&edit, 0, meta))) bkv_fail(&e, rc, "out of memory");
    bkv_file_meta_unref(meta);
    bkv_db_lock(db);
    if (!rc) {
        /* The WALs from the next memtable's on are still needed. */
        edit.has_log_number = 1;
        edit.log_number = bkv_mems_log_after_oldest(db);
        rc = bkv_db_commit_edit(db, &edit, 1, &e);
    }
    db->sched.flushing = 0;
    bkv_edit_free(&edit);
    if (rc) {
        bkv_db_set_bg_error(db, rc, &e);
        return;
    }
    bkv_mems_pop_oldest(db); /* mem: its reference, released below */
    bkv_view_publish(db);
    BKV_COUNT(db, flushes, 1);
    sync_retired_logs(db); /* its log first (another background thread may not have got to it) */
    /* Freeing the memtable and unlinking its log take milliseconds: not
     * under the mutex. */
    bkv_db_unlock(db);
    bkv_memtable_unref(mem);
    char path[BKV_PATH_MAX];
    bkv_wal_name(path, db->path, old_log);
    db->env->remove_file(db->env, path, NULL);
    bkv_db_lock(db);
    pthread_cond_broadcast(&db->bg_cv);
}

/* Under a sanitizer malloc is the sanitizer's own, so glibc's heaps hold
 * nothing to trim; and under ThreadSanitizer a trim that ran while the
 * process exited (its exit waits a second for the other threads) raised a
 * signal in a forked test child about one run in six. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BKV_MALLOC_REPLACED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define BKV_MALLOC_REPLACED 1
#endif
#endif

/* A background thread that flushed or compacted trims once it has had no
 * work for this long, and at most once a second while it has more. */
#define TRIM_WHEN_IDLE_NANOS 100000000ull
#define TRIM_INTERVAL_NANOS 1000000000ull

/* Table builds and reads go through buffers of 100 KB to 2 MB; once glibc
 * has seen one of that size freed it serves them from its heaps and keeps
 * what they leave (bkv_options.release_free_memory). A trim hands each
 * free stretch back with its own madvise, and each of those interrupts
 * every other core running the process to flush its TLB: trimmed after
 * every flush and compaction, a 1 M-key fill made 1,800 such calls. The
 * flush thread runs out of work after nearly every flush, so idle means
 * idle for a while. *owed: it flushed or compacted, with the option set,
 * since its last trim; *last: when that trim was. REQUIRES: db->mu held;
 * released during the trim. */
static void release_free_memory(bkv_db *db, int idle, int *owed, uint64_t *last) {
#if defined(__GLIBC__) && !defined(BKV_MALLOC_REPLACED)
    if (!*owed) return;
    uint64_t now = bkv_monotonic_nanos();
    if (!idle && now - *last < TRIM_INTERVAL_NANOS) return;
    *owed = 0;
    *last = now;
    bkv_db_unlock(db);
    malloc_trim(0);
    bkv_db_lock(db);
#else
    (void)db, (void)idle, (void)last;
    *owed = 0;
#endif
}

/* Waits for work for at most nanos: 1 if the time ran out (work_cv is on
 * the monotonic clock: scheduler.c). REQUIRES: db->mu held. */
static int wait_for_work(bkv_db *db, uint64_t nanos) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + nanos;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    BKV_NOTE_OWNER(db, 0);
    int rc = pthread_cond_timedwait(&db->sched.work_cv, &db->mu, &ts);
    BKV_NOTE_OWNER(db, bkv_thread_token());
    return rc == ETIMEDOUT;
}

/* Lowers the calling thread's CPU priority by delta (Linux gives each
 * thread its own nice value). Best effort: a failure leaves it as it was. */
static void lower_thread_priority(int delta) {
#ifdef __linux__
    if (delta <= 0) return;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)tid);
    if (nice == -1 && errno) return;
    (void)setpriority(PRIO_PROCESS, (id_t)tid, nice + delta > 19 ? 19 : nice + delta);
#else
    (void)delta;
#endif
}

/*
 * With one background thread it does everything. With more, the first
 * does the short, urgent work (retired WALs, the spare WAL, read views,
 * flushes) and the others compact, at a CPU priority that can be lowered
 * (bkv_options.compaction_nice) so that a compaction sharing a core with
 * the write leader does not preempt it for whole time slices. Each
 * compacting thread runs one compaction at a time, beside the others' on
 * tables they do not hold: a level-0 compaction need not wait for a long
 * one deeper down while level 0 fills.
 */
static void *background_thread(void *arg) {
    bkv_db *db = arg;
    bkv_db_lock(db);
    int index = db->sched.next_index++;
    int alone = db->opts.max_background_jobs == 1;
    int urgent = index == 0, compacts = alone || index > 0;
    if (!alone && index > 0) lower_thread_priority(db->opts.compaction_nice);
    int trim_owed = 0;
    uint64_t last_trim = bkv_monotonic_nanos();
    while (!bkv_sched_stopping(db)) {
        if (urgent && bkv_wal_set_pending(&db->wals)) {
            sync_retired_logs(db);
            continue;
        }
        if (urgent && bkv_db_want_spare_log(db)) {
            bkv_db_make_spare_log(db);
            continue;
        }
        if (urgent && bkv_db_value_forget_leaving(db)) continue;
        if (urgent && bkv_views_retired(db)) {
            bkv_db_unlock(db);
            bkv_view_reclaim(db);
            bkv_db_lock(db);
            continue;
        }
        if (urgent && bkv_mems_immutable(db) > 0 && !db->sched.flushing && !db->bg_error) {
            flush_one(db);
            trim_owed = db->opts.release_free_memory;
            release_free_memory(db, 0, &trim_owed, &last_trim);
            pthread_cond_broadcast(&db->sched.work_cv); /* a compaction may now be due */
            continue;
        }
        if (compacts && !db->sched.held && !db->bg_error) {
            bkv_compaction *c = bkv_pick_compaction(db);
            if (c) {
                bkv_sched_begin_compaction(db);
                bkv_run_compaction(db, c);
                trim_owed = db->opts.release_free_memory;
                release_free_memory(db, 0, &trim_owed, &last_trim);
                bkv_sched_end_compaction(db);
                continue;
            }
        }
        if (trim_owed) {
            /* The loop looks for work again after the wait, and after the
             * trim, which drops the mutex. */
            if (wait_for_work(db, TRIM_WHEN_IDLE_NANOS)) release_free_memory(db, 1, &trim_owed, &last_trim);
            continue;
        }
        bkv_db_wait(db, &db->sched.work_cv);
    }
    pthread_cond_broadcast(&db->bg_cv);
    bkv_db_unlock(db);
    return NULL;
}

int bkv_sched_start(bkv_db *db, int n, bkv_err *e) {
    BKV_ASSERT_UNLOCKED(db);
    for (int i = 0; i < n; i++) {
        if (pthread_create(&db->sched.threads[db->sched.nthreads], NULL, background_thread, db) != 0)
            return bkv_fail(e, BKV_NOMEM, "cannot start a background thread");
        db->sched.nthreads++;
    }
    return BKV_OK;
}

int bkv_compact(bkv_db *db) {
    if (!db) return bkv_db_arg_error(db, "bkv_compact");
    if (db->opts.read_only) return bkv_db_read_only_error(db, "bkv_compact");
    int rc = bkv_flush(db);
    if (rc) return rc;
    bkv_db_lock(db);
    pthread_cond_broadcast(&db->sched.work_cv);
    for (;;) {
        if (db->bg_error) break;
        if (!db->sched.compactions && !db->sched.held && !db->sched.flushing && bkv_mems_immutable(db) == 0) {
            bkv_compaction *c = bkv_pick_compaction(db);
            if (!c) break;
            /* Run it here rather than wait: the caller asked for it. */
            db->sched.held = 1;
            bkv_run_compaction(db, c);
            bkv_sched_release_compaction(db);
            continue;
        }
        bkv_db_wait(db, &db->bg_cv);
    }
    bkv_err e = {{0}};
    if (db->bg_error) rc = bkv_db_bg_status(db, &e);
    bkv_db_unlock(db);
    return bkv_db_error(db, rc, &e);
}

/* Runs one manual compaction of level into output_level, waiting while a
 * background one holds the inputs. 1 if one ran, 0 if there was nothing to
 * do. REQUIRES: db->mu held. */
static int run_manual(bkv_db *db, int level, int output_level, const void *begin, size_t blen, const void *end,
                      size_t elen) {
    BKV_ASSERT_LOCKED(db);
    for (;;) {
        if (db->bg_error || bkv_sched_stopping(db)) return 0;
        if (!db->sched.compactions && !db->sched.held && !db->sched.flushing) {
            int busy;
            bkv_compaction *c = bkv_compaction_manual(&db->opts, bkv_vset_current(&db->vset), level, output_level, begin,
                                                      blen, end, elen, &busy);
            if (c) {
                c->smallest_snapshot = bkv_db_oldest_snapshot(db);
                db->sched.held = 1;
                bkv_run_compaction(db, c);
                bkv_sched_release_compaction(db);
                return 1;
            }
            if (!busy) return 0;
        }
        bkv_db_wait(db, &db->bg_cv);
    }
}

/* The deepest level holding keys of [begin, end], or -1. REQUIRES: db->mu. */
static int deepest_level_in_range(const bkv_db *db, const void *begin, size_t blen, const void *end, size_t elen) {
    BKV_ASSERT_LOCKED(db);
    const bkv_tree_version *v = bkv_vset_current(&db->vset);
    for (int l = BKV_MAX_LEVELS - 1; l >= 0; l--)
        for (size_t i = 0; i < v->nfiles[l]; i++) {
            const bkv_file_meta *f = v->files[l][i];
            if ((!end || bkv_user_key_compare(f->smallest, f->smallest_len - BKV_IKEY_TRAILER, end, elen) <= 0) &&
                (!begin || bkv_user_key_compare(f->largest, f->largest_len - BKV_IKEY_TRAILER, begin, blen) >= 0))
                return l;
        }
    return -1;
}

int bkv_compact_range(bkv_db *db, const void *begin, size_t blen, const void *end, size_t elen) {
    if (!db || (!begin && blen) || (!end && elen))
        return bkv_db_error(db, BKV_INVALID, &(bkv_err){"bkv_compact_range: NULL handle, or a NULL key with a length"});
    if (db->opts.read_only) return bkv_db_read_only_error(db, "bkv_compact_range");
    /* An empty range is a caller's mistake (the ends swapped), not a no-op. */
    if (begin && end && bkv_user_key_compare(begin, blen, end, elen) > 0)
        return bkv_db_error(db, BKV_INVALID, &(bkv_err){"bkv_compact_range: begin is after end"});
    int rc = bkv_flush(db);
    if (rc) return rc;
    bkv_db_lock(db);
    if (db->opts.compaction_style == BKV_COMPACTION_TIERED) {
        run_manual(db, 0, 0, begin, blen, end, elen);
    } else {
        int last = deepest_level_in_range(db, begin, blen, end, elen);
        if (last == 0) last = 1; /* level 0 alone: down to level 1 */
        int ran = 0;
        for (int l = 0; l < last && !db->bg_error; l++) ran += run_manual(db, l, l + 1, begin, blen, end, elen);
        /* Everything was already in the last level: rewrite it there, so
         * its overwritten versions and tombstones go too. */
        if (!ran && last > 0) run_manual(db, last, last, begin, blen, end, elen);
    }
    bkv_err e = {{0}};
    if (db->bg_error) rc = bkv_db_bg_status(db, &e);
    bkv_db_unlock(db);
    return bkv_db_error(db, rc, &e);
}

/* The first table of the current version the value index reads whole,
 * and its level; its key range is copied, the table may go meanwhile.
 * REQUIRES: db->mu. */
static int next_unindexed(bkv_db *db, bkv_buf *lo, bkv_buf *hi, uint64_t *number) {
    BKV_ASSERT_LOCKED(db);
    const bkv_tree_version *v = bkv_vset_current(&db->vset);
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < v->nfiles[l]; i++) {
            const bkv_file_meta *f = v->files[l][i];
            if (!atomic_load_explicit(&f->value_unindexed, memory_order_relaxed)) continue;
            if (bkv_buf_set(lo, f->smallest, f->smallest_len - BKV_IKEY_TRAILER) ||
                bkv_buf_set(hi, f->largest, f->largest_len - BKV_IKEY_TRAILER))
                return -2;
            *number = f->number;
            return l;
        }
    return -1;
}

int bkv_value_index_build(bkv_db *db, uint64_t *rewritten) {
    if (rewritten) *rewritten = 0;
    if (!db) return bkv_db_arg_error(db, "bkv_value_index_build");
    if (db->opts.read_only) return bkv_db_read_only_error(db, "bkv_value_index_build");
    bkv_err e = {{0}};
    if (!bkv_db_has_value_index(db))
        return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "%s: no value index to build (open it with value_index)",
                                         db->path), &e);
    int rc = bkv_flush(db); /* the memtables' entries go into indexed tables */
    if (rc) return rc;
    bkv_buf lo, hi;
    bkv_buf_init(&lo);
    bkv_buf_init(&hi);
    uint64_t last = 0;
    bkv_db_lock(db);
    for (;;) {
        uint64_t number;
        int level = next_unindexed(db, &lo, &hi, &number);
        if (level == -2) rc = bkv_fail(&e, BKV_NOMEM, "out of memory building the value index");
        if (level < 0 || db->bg_error) break;
        /* A table the rewrite did not replace would come back forever. */
        if (number == last) {
            rc = bkv_fail(&e, BKV_IOERROR, "%s: table %06llu was rewritten but still has no usable value filters",
                          db->path, (unsigned long long)number);
            break;
        }
        last = number;
        /* In place: its level, its key range (all of level 0 at once, which
         * overlaps itself; the tiered style keeps every run in level 0). */
        if (run_manual(db, level, level, lo.data, lo.len, hi.data, hi.len) && rewritten) (*rewritten)++;
        if (bkv_sched_stopping(db)) break;
    }
    if (!rc && db->bg_error) rc = bkv_db_bg_status(db, &e);
    bkv_db_unlock(db);
    bkv_buf_free(&lo);
    bkv_buf_free(&hi);
    return bkv_db_error(db, rc, &e);
}
