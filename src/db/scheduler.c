/*
 * The background scheduler's bookkeeping (scheduler.h): waking the
 * threads, stopping them, and which of flush and compaction runs. The
 * threads themselves and the jobs they run are background.c's.
 */
#include <string.h>
#include <time.h>

#include "db/scheduler.h"

void bkv_sched_init(bkv_scheduler *s) {
    memset(s, 0, sizeof *s);
    /* On the monotonic clock: a background thread's timed wait for work
     * (background.c) must not stretch or end early when the wall clock is
     * set. */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->work_cv, &attr);
    pthread_condattr_destroy(&attr);
}

void bkv_sched_free(bkv_scheduler *s) { pthread_cond_destroy(&s->work_cv); }

void bkv_sched_stop(bkv_db *db) {
    BKV_ASSERT_UNLOCKED(db);
    bkv_db_lock(db);
    atomic_store_explicit(&db->sched.shutting_down, 1, memory_order_relaxed); /* compactions poll it unlocked */
    pthread_cond_broadcast(&db->sched.work_cv);
    bkv_db_unlock(db);
    for (int i = 0; i < db->sched.nthreads; i++) pthread_join(db->sched.threads[i], NULL);
    db->sched.nthreads = 0;
}

int bkv_sched_stopping(const bkv_db *db) {
    return atomic_load_explicit(&db->sched.shutting_down, memory_order_relaxed);
}

void bkv_sched_wake(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    pthread_cond_broadcast(&db->sched.work_cv);
}

int bkv_sched_flushing(const bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    return db->sched.flushing;
}

int bkv_sched_hold_compaction(bkv_db *db, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    while ((db->sched.compactions || db->sched.held) && !db->bg_error) bkv_db_wait(db, &db->bg_cv);
    if (db->bg_error) return bkv_db_bg_status(db, e);
    db->sched.held = 1;
    return BKV_OK;
}

/* What a compaction's end, or a hold's, may have changed: writers stalled
 * on level 0, callers waiting to hold, and what is due next. */
static void compaction_ended(bkv_db *db) {
    pthread_cond_broadcast(&db->bg_cv);
    pthread_cond_broadcast(&db->sched.work_cv); /* what it placed or wrote may make a compaction due */
}

void bkv_sched_release_compaction(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    db->sched.held = 0;
    compaction_ended(db);
}

void bkv_sched_begin_compaction(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    BKV_ASSERT(!db->sched.held);
    db->sched.compactions++;
}

void bkv_sched_end_compaction(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    db->sched.compactions--;
    compaction_ended(db);
}

void bkv_sched_note_working(bkv_db *db, int delta) {
    atomic_fetch_add_explicit(&db->sched.working, delta, memory_order_relaxed);
}

int bkv_sched_working(const bkv_db *db) { return atomic_load_explicit(&db->sched.working, memory_order_relaxed); }
