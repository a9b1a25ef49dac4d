/* The version set: the manifest read at open, written anew, and appended
 * to by every flush and compaction (version_set.c). */
#ifndef BKV_DB_VERSION_SET_H
#define BKV_DB_VERSION_SET_H

#include "db/db_int.h"

/* The manifest number CURRENT names in dir; BKV_CORRUPTION (naming the
 * file and offset) when CURRENT is malformed. */
int bkv_read_current(const bkv_env *env, const char *dir, uint64_t *manifest, bkv_err *e);

/* Replays the manifest CURRENT names into db->current, next_file,
 * last_sequence and the value index record; *log_number is the oldest WAL
 * it still needs. A damaged last record is dropped only when it cannot
 * have been committed. */
int bkv_vset_recover(bkv_db *db, uint64_t *log_number, bkv_err *e);
/* bkv_vset_recover from manifest number, whatever CURRENT names. */
int bkv_vset_replay(bkv_db *db, uint64_t number, uint64_t *log_number, bkv_err *e);

/* Writes a new manifest holding the whole current state and points
 * CURRENT at it. REQUIRES: db->logfile is the new WAL, db->mem_log its
 * number; called while opening (no other thread runs). */
int bkv_vset_write_manifest(bkv_db *db, bkv_err *e);

/* Writes in dir manifest number manifest_number holding the whole of v
 * (with db's value index record and the given log number, next file and
 * last sequence), synced, and points dir's CURRENT at it. keep: the file
 * stays open for appends through *lw (NULL: closed). */
int bkv_vset_write_snapshot(const bkv_db *db, const char *dir, const bkv_tree_version *v, uint64_t manifest_number,
                            uint64_t log_number, uint64_t next_file, uint64_t last_sequence, bkv_wfile **keep,
                            bkv_log_writer *lw, bkv_err *e);

/* Appends edit to the manifest, syncs it, and installs the new version; a
 * failure puts the database into its read-only error state.
 * REQUIRES: db->mu held. */
int bkv_vset_log_and_apply(bkv_db *db, bkv_version_edit *edit, bkv_err *e);

/* bkv_vset_log_and_apply with the value index kept in step (reindex: the
 * edit adds or drops tables; 0 for a move that keeps every table): added
 * tables enter the index before the version is installed, dropped ones
 * leave after. REQUIRES: db->mu held; drops it while updating the index. */
int bkv_vset_commit(bkv_db *db, bkv_version_edit *edit, int reindex, bkv_err *e);

#endif
