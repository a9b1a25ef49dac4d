/* Writing one table of the database: the one path for flushes and
 * compactions alike (create, build, sync, close, describe; removed again
 * on any failure). */
#ifndef BKV_DB_TABLE_FILE_H
#define BKV_DB_TABLE_FILE_H

#include "db/db_int.h"
#include "db/filename.h"
#include "valuesearch/table_values.h"

/* How a table written at level is laid out under o (bottommost: no older
 * data for its keys below it). */
bkv_table_options bkv_table_options_for(const bkv_options *o, int level, int bottommost);
/* The collector of its value filters with vparams (the caller frees it
 * after the builder), or NULL when out of memory. */
bkv_vs_collector *bkv_table_values_for(const bkv_options *o, int bottommost, const bkv_vf_params *vparams);

typedef struct bkv_table_file {
    bkv_db *db;
    uint64_t number;
    char path[BKV_PATH_MAX];
    bkv_wfile *file;
    bkv_table_builder *builder;
    bkv_vs_collector *values; /* NULL: the database has no value index */
} bkv_table_file;

/* Creates table number, to be written to level (bottommost: no older data
 * for its keys below it, which decides its filter policy). budget_bits:
 * the key filter's bits per key under filter_memory_budget
 * (bkv_table_file_budget_bits), or < 0 for the options' policy. */
int bkv_table_file_open(bkv_db *db, uint64_t number, int level, int bottommost, double budget_bits,
                        bkv_table_file *tf, bkv_err *e);
/* The bits per key filter_memory_budget gives a new table of a run at
 * level that will hold run_entries keys, judged from version v; -1
 * without a budget. */
double bkv_table_file_budget_bits(const bkv_db *db, const bkv_tree_version *v, int level, uint64_t run_entries);
/* REQUIRES: ikey greater than every key added before. */
int bkv_table_file_add(bkv_table_file *tf, const uint8_t *ikey, size_t ilen, const uint8_t *val, size_t vlen,
                       bkv_err *e);
uint64_t bkv_table_file_size_estimate(const bkv_table_file *tf);
/* Finishes the table, syncs and closes it, describes it in *out (with its
 * value filters, for the value index) and opens it for reading
 * (bkv_db_open_new_table). The directory entry is not yet durable: the
 * caller syncs the directory before a manifest names it. On failure the
 * file is removed and *out is NULL. */
int bkv_table_file_finish(bkv_table_file *tf, bkv_file_meta **out, bkv_err *e);
/* Gives up on an open table file and removes it; nothing if none is open. */
void bkv_table_file_abandon(bkv_table_file *tf);

#endif
