/* The WALs (log_sync.c): the active one the write leader appends to, those
 * a memtable switch retired and a background thread syncs, the spare made
 * ahead of the next switch, and whether the database's WALs carry durable
 * marks. The
 * struct's fields are log_sync.c's alone; every other file goes through
 * the calls below (and those declared in db_int.h that take the db). */
#ifndef BKV_DB_LOG_SYNC_H
#define BKV_DB_LOG_SYNC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "log/log.h"
#include "util/env.h"

#define BKV_MAX_IMM 16 /* immutable memtables at most: a WAL retired per switch */

typedef struct bkv_wal_set {
    /* The write leader's alone (and an open's, a close's): */
    bkv_wfile *active;                   /* the WAL writes go to; NULL after a failed switch */
    bkv_log_writer active_writer;
    int active_marked;                   /* the active WAL holds its durable mark */
    pthread_mutex_t mu;                  /* guards retired, retired_next, nretired; held across their syncs */
    bkv_wfile *retired[BKV_MAX_IMM + 1];
    uint64_t retired_next[BKV_MAX_IMM + 1]; /* the number of the WAL that followed each */
    int nretired;
    atomic_int retired_pending;          /* nretired > 0, readable without mu */
    atomic_uint_fast64_t durable_below;  /* every WAL numbered below it is synced, and its name */
    int marks;                           /* the manifest recovered says its WALs carry marks (tag 8) */
    /* Under the database mutex: */
    bkv_wfile *spare;                    /* the next WAL, made ahead by a background thread */
    uint64_t spare_number;
    uint64_t newest;                     /* the number of the WAL last started or being started */
    uint64_t spare_for;                  /* newest when a spare was last tried: one try each */
} bkv_wal_set;

void bkv_wal_set_init(bkv_wal_set *w);
/* Whether retired WALs wait for their sync (any thread, no lock). */
int bkv_wal_set_pending(bkv_wal_set *w);
/* Recovery read a manifest whose WALs carry durable marks; and whether it did. */
void bkv_wal_set_note_marks(bkv_wal_set *w);
int bkv_wal_set_marks(const bkv_wal_set *w);
/* An open started WAL number with every older WAL already durable (the
 * manifest naming it syncs the directory). */
void bkv_wal_set_started(bkv_wal_set *w, uint64_t number);
/* Around fork (bkv_fork_*): the set's mutex held across it, made anew in
 * the child. */
void bkv_wal_set_fork_prepare(bkv_wal_set *w);
void bkv_wal_set_fork_parent(bkv_wal_set *w);
void bkv_wal_set_fork_child(bkv_wal_set *w);

#endif
