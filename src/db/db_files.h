/* File names inside a database directory, and helpers shared by open,
 * flush and recovery. */
#ifndef BKV_DB_FILES_H
#define BKV_DB_FILES_H

#include <stdint.h>
#include <stdio.h>

#include "db/db_int.h"

enum { BKV_FILE_LOG, BKV_FILE_TABLE, BKV_FILE_MANIFEST, BKV_FILE_CURRENT, BKV_FILE_LOCK, BKV_FILE_TEMP,
       BKV_FILE_OTHER };

#define BKV_PATH_MAX 4096

static inline void bkv_log_name(char *buf, const char *dir, uint64_t n) {
    snprintf(buf, BKV_PATH_MAX, "%s/%06llu.log", dir, (unsigned long long)n);
}
static inline void bkv_table_name(char *buf, const char *dir, uint64_t n) {
    snprintf(buf, BKV_PATH_MAX, "%s/%06llu.sst", dir, (unsigned long long)n);
}
static inline void bkv_manifest_name(char *buf, const char *dir, uint64_t n) {
    snprintf(buf, BKV_PATH_MAX, "%s/MANIFEST-%06llu", dir, (unsigned long long)n);
}

/* The manifest number CURRENT names in dir; BKV_CORRUPTION (naming the
 * file and offset) when CURRENT is malformed. */
int bkv_read_current(const bkv_env *env, const char *dir, uint64_t *manifest, bkv_err *e);

/* Classifies a directory entry; *number is set for numbered files. */
int bkv_parse_file_name(const char *name, uint64_t *number);

/* Writes mem to a new level-0 table numbered number (no table when mem is
 * empty: *out stays NULL). The file is synced and its directory entry
 * made durable before returning. Called without db->mu held. */
int bkv_write_level0_table(bkv_db *db, bkv_memtable *mem, uint64_t number, bkv_file_meta **out, bkv_err *e);

/* Appends edit to the manifest, syncs it, and installs the new version.
 * REQUIRES: db->mu held. */
int bkv_log_and_apply(bkv_db *db, bkv_version_edit *edit, bkv_err *e);

/* Puts the database into its read-only error state (first error wins).
 * REQUIRES: db->mu. Returns rc. */
int bkv_db_set_bg_error(bkv_db *db, int rc, const bkv_err *e);

/* Records err as this thread's last error on db; returns rc. */
int bkv_db_error(bkv_db *db, int rc, const bkv_err *err);

bkv_memtable *bkv_db_new_memtable(const bkv_db *db);

/* Background thread entry. */
void *bkv_db_background(void *arg);

#endif
