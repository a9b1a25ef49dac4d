/* The names of the files in a database directory (docs/format.md,
 * "Database directory"): building them and telling them apart. */
#ifndef BKV_DB_FILENAME_H
#define BKV_DB_FILENAME_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include "util/env.h"

enum { BKV_FILE_LOG, BKV_FILE_TABLE, BKV_FILE_MANIFEST, BKV_FILE_CURRENT, BKV_FILE_LOCK, BKV_FILE_TEMP,
       BKV_FILE_OTHER };

#define BKV_PATH_MAX 4096

static inline void bkv_wal_name(char *buf, const char *dir, uint64_t n) {
    snprintf(buf, BKV_PATH_MAX, "%s/%06llu.log", dir, (unsigned long long)n);
}
static inline void bkv_table_name(char *buf, const char *dir, uint64_t n) {
    snprintf(buf, BKV_PATH_MAX, "%s/%06llu.sst", dir, (unsigned long long)n);
}
static inline void bkv_manifest_name(char *buf, const char *dir, uint64_t n) {
    snprintf(buf, BKV_PATH_MAX, "%s/MANIFEST-%06llu", dir, (unsigned long long)n);
}
static inline void bkv_current_name(char *buf, const char *dir) { snprintf(buf, BKV_PATH_MAX, "%s/CURRENT", dir); }

/* Classifies a directory entry (a name, not a path): a BKV_FILE_* kind,
 * with *number set for numbered files. */
int bkv_parse_file_name(const char *name, uint64_t *number);

/* How many tables directory dir holds (0 when it cannot be listed), with
 * the first one's name in first (size n). A directory with tables and no
 * CURRENT is a database that lost its CURRENT: a new database made there
 * would replay its WALs, then delete its tables as obsolete. (Without
 * tables, every write is still in the WALs a new database replays.) */
size_t bkv_count_tables(const bkv_env *env, const char *dir, char *first, size_t n);

#endif
