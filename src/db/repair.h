/* Salvage for bkv_repair: a database opened to be repaired keeps every
 * row that can still be read. Tables the manifest names but that are gone
 * are dropped from it; a damaged table is rewritten from its intact blocks
 * (a damaged filter or value filter: rebuilt, every row kept); a damaged
 * WAL is replayed around its damage. The originals of what was rewritten
 * or skipped are kept in DB/lost/, and each is described in a report. */
#ifndef BKV_DB_REPAIR_H
#define BKV_DB_REPAIR_H

#include "db/db_int.h"

typedef struct bkv_repair_state {
    char *report; /* "; "-separated sentences, malloc'd (NULL: nothing done) */
    size_t report_len;
    uint64_t *aside; /* table files to move into lost/ once the new manifest is written */
    size_t naside, cap_aside;
    int failed_note; /* the report could not grow: out of memory */
} bkv_repair_state;

void bkv_repair_state_free(bkv_repair_state *r);

/* Opens the database at path to repair it (default options, WAL damage
 * skipped, no background work), salvaging as it opens; what was done is
 * added to repair's report. Close it with bkv_close. */
int bkv_open_repairing(const char *path, bkv_repair_state *repair, bkv_db **dbp);

/* Adds a sentence to the report. */
void bkv_repair_note(bkv_repair_state *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A WAL replayed around damage (path, its bytes in data): a copy goes to
 * lost/ before the open makes it obsolete. */
int bkv_repair_keep_log(bkv_db *db, const char *path, uint64_t damage_offset, uint64_t skipped_bytes, bkv_err *e);

/* Between replay and the new manifest: drops from db->current every table
 * whose file is missing, and rewrites each damaged one (db->next_file
 * numbers the new tables). */
int bkv_repair_tables(bkv_db *db, bkv_err *e);

/* After the new manifest: moves the originals of rewritten tables into
 * lost/ (the open would otherwise delete them as obsolete). */
int bkv_repair_set_aside(bkv_db *db, bkv_err *e);

/* The problems bkv_check finds in one table file, each passed to fn (may
 * be NULL); their number. whole_values: the database's value index
 * indexes whole values (its filters must then hold each value). */
int bkv_check_one_table(const char *path, uint64_t number, int whole_values, void (*fn)(void *arg, const char *problem),
                        void *arg);

#endif
