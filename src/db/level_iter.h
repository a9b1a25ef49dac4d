/*
 * A level >= 1 (or any run of disjoint tables sorted by key) as one
 * internal iterator: it opens one table at a time, as it gets there.
 * Creating a database iterator then costs a few objects per level, not per
 * table, a seek touches one table per level, and a compaction merges its
 * lower level's tables as one input instead of comparing each entry with
 * every one of them.
 */
#ifndef BKV_DB_LEVEL_ITER_H
#define BKV_DB_LEVEL_ITER_H

#include "db/db_int.h"
#include "util/iterator.h"

/* files (n of them, disjoint, in key order) must outlive the iterator; the
 * caller holds the version or compaction they belong to. read_flags as for
 * bkv_table_iter_new; count_reads: blocks read count in the database's
 * table stats (compactions count their input bytes instead); skips: pass
 * over damage, recording it there (bkv_table_iter_skip_damage), or NULL.
 * NULL when out of memory. */
bkv_ikey_iter *bkv_level_iter_new(bkv_db *db, bkv_file_meta *const *files, size_t n, int read_flags,
                                  int count_reads, bkv_skip_log *skips);
/* Records table f's whole key range in log: it cannot be read. */
void bkv_skip_log_add_file(bkv_skip_log *log, const bkv_file_meta *f, const bkv_err *why);
/* Passes over every table whose range filter says it holds no key within
 * bounds' lower_bound and upper_bound (bounds outlives the iterator). */
void bkv_level_iter_set_bounds(bkv_ikey_iter *it, const bkv_read_options *bounds);

#endif
