/*
 * The background scheduler: the threads that flush immutable memtables and
 * compact, and which jobs may overlap: one flush at a time, compactions
 * side by side on disjoint tables (one per compacting thread), and none
 * of them while a hold is on (an ingest placing tables, or a compaction a
 * caller runs itself).
 * Its fields (bkv_scheduler in db_int.h) are touched only by scheduler.c
 * (the bookkeeping) and background.c (the threads and the jobs they run,
 * and bkv_sched_start); every other file goes through these calls.
 */
#ifndef BKV_DB_SCHEDULER_H
#define BKV_DB_SCHEDULER_H

#include "db/db_int.h"

/* At open and close, with no thread started or every one joined. */
void bkv_sched_init(bkv_scheduler *s);
void bkv_sched_free(bkv_scheduler *s);

/* Starts n background threads. BKV_OK, or BKV_NOMEM (with e) when one
 * cannot start: those started run until bkv_sched_stop. REQUIRES: db->mu
 * not held. */
int bkv_sched_start(bkv_db *db, int n, bkv_err *e);
/* Tells every thread and running compaction to stop and joins the
 * threads. REQUIRES: db->mu not held. */
void bkv_sched_stop(bkv_db *db);
/* Whether bkv_sched_stop has begun: a long compaction polls it, without
 * the mutex. */
int bkv_sched_stopping(const bkv_db *db);

/* Wakes the background threads to look for work: a memtable to flush, a
 * compaction due, a view or WAL to retire. REQUIRES: db->mu held. */
void bkv_sched_wake(bkv_db *db);
/* Whether a flush is in progress. REQUIRES: db->mu held. */
int bkv_sched_flushing(const bkv_db *db);
/* Keeps background compactions off while the caller moves tables (an
 * ingest) or compacts itself: waits for those running and any other hold
 * to end. BKV_OK, or the background error (with e), in which case nothing
 * is held. Release with bkv_sched_release_compaction, which wakes the
 * threads and the writers waiting on progress.
 * REQUIRES: db->mu held (released while waiting). */
int bkv_sched_hold_compaction(bkv_db *db, bkv_err *e);
void bkv_sched_release_compaction(bkv_db *db);
/* Counts a compaction a background thread picked and runs, until
 * bkv_sched_end_compaction (which wakes as a release does). Several run
 * at once, one per compacting thread: each marks its inputs busy, so a
 * pick never takes them again. REQUIRES: db->mu held, and no hold on. */
void bkv_sched_begin_compaction(bkv_db *db);
void bkv_sched_end_compaction(bkv_db *db);

/* Counts a thread starting (delta 1) or ending (-1) a flush or a part of
 * a compaction, and says how many are at one now: writers leave those
 * threads their processors (db_write.c). Needs no mutex. */
void bkv_sched_note_working(bkv_db *db, int delta);
int bkv_sched_working(const bkv_db *db);

#endif
