/*
 * The memtables: the active one, which the write leader adds to, and the
 * immutable ones waiting for a flush, each with the number of the WAL that
 * holds its entries, plus the pool their arenas reuse. Its fields
 * (bkv_memtables in db_int.h) are touched only by memtables.c and this
 * header; every other file goes through these calls. Every call requires
 * db->mu, except where it says otherwise; the write leader may also read
 * the active memtable and its WAL's number without it, since only the
 * leader switches them.
 */
#ifndef BKV_DB_MEMTABLES_H
#define BKV_DB_MEMTABLES_H

#include "db/db_int.h"

/* At open, before any memtable is made: the arena pool, sized for
 * memtables of write_buffer_size (out of memory there is no pool, and
 * arena blocks are not reused). No lock needed. */
void bkv_mems_init(bkv_db *db);
/* At close: drops every memtable and the pool. No lock needed. */
void bkv_mems_free(bkv_db *db);

/* A new, empty memtable for db (its key filter and, with a value index,
 * its term index sized for write_buffer_size), or NULL when out of memory.
 * No lock needed. */
bkv_memtable *bkv_mems_new_memtable(const bkv_db *db);

static inline bkv_memtable *bkv_mems_active(const bkv_db *db) { return db->mems.active; }
static inline uint64_t bkv_mems_active_log(const bkv_db *db) { return db->mems.active_log; }
static inline int bkv_mems_immutable(const bkv_db *db) { return db->mems.nimm; }

/* Installs m (the reference passes to db) as the active memtable and
 * returns the one it replaces (the caller's reference; NULL at open). For
 * open, recovery and catch-up, whose new state replaces the old whole. */
bkv_memtable *bkv_mems_replace_active(bkv_db *db, bkv_memtable *m);
/* Names the WAL the active memtable's entries go to (at open). */
void bkv_mems_set_active_log(bkv_db *db, uint64_t log);
/* Makes the active memtable the newest immutable one and fresh (whose
 * entries go to WAL log) the active one. REQUIRES: fewer than
 * BKV_MAX_IMM immutable memtables. */
void bkv_mems_switch(bkv_db *db, bkv_memtable *fresh, uint64_t log);

/* The oldest immutable memtable (db keeps its reference) and its WAL's
 * number. REQUIRES: at least one. */
bkv_memtable *bkv_mems_oldest(const bkv_db *db, uint64_t *log);
/* The oldest WAL still needed once the oldest immutable memtable is in a
 * table: the next memtable's. */
uint64_t bkv_mems_log_after_oldest(const bkv_db *db);
/* Drops the oldest immutable memtable from the list once it is in a table
 * and returns it with the list's reference, which the caller releases
 * (outside the mutex: freeing an arena takes milliseconds). */
bkv_memtable *bkv_mems_pop_oldest(bkv_db *db);

/* The immutable memtables, oldest first, into imm (room for
 * BKV_MAX_IMM), each with a reference the caller releases. Returns how
 * many. */
int bkv_mems_ref_immutable(const bkv_db *db, bkv_memtable **imm);
/* Every memtable, newest first (the active one, then the immutable ones
 * newest to oldest), into out (room for 1 + BKV_MAX_IMM), without
 * references: for use under the mutex. Returns how many. */
int bkv_mems_list(const bkv_db *db, bkv_memtable **out);
/* Bytes the arena pool keeps for the next memtables. */
size_t bkv_mems_pool_bytes(const bkv_db *db);

#endif
