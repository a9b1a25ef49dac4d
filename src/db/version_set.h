/* The version set: the current version, the file numbers, and the
 * manifest read at open, written anew, and appended to by every flush and
 * compaction (version_set.c). The struct's fields are version_set.c's
 * alone (and the inline calls below); every other file goes through these
 * calls. Unless a call says otherwise its caller holds the database mutex
 * (BKV_ASSERT_LOCKED), or is the only thread (open, close, a scratch
 * handle). */
#ifndef BKV_DB_VERSION_SET_H
#define BKV_DB_VERSION_SET_H

#include <stdint.h>

#include "bloomkv.h"
#include "db/version.h"
#include "log/log.h"
#include "util/env.h"
#include "util/status.h"

typedef struct bkv_version_set {
    bkv_tree_version *current;  /* what reads and compactions start from (one reference held) */
    uint64_t next_file;         /* the next file number handed out */
    uint64_t manifest_number;   /* the manifest CURRENT names */
    bkv_wfile *manifest;        /* open for appends (NULL: read-only, or before the first is written) */
    bkv_log_writer manifest_log;
    int manifest_busy;          /* an edit is being appended, without the database mutex */
} bkv_version_set;

/* An empty version, file numbers from 2: BKV_NOMEM or BKV_OK. */
int bkv_vset_init(bkv_version_set *vs);
/* Closes the manifest and drops the version (a zeroed set is fine). */
void bkv_vset_free(bkv_version_set *vs);
static inline bkv_tree_version *bkv_vset_current(const bkv_version_set *vs) { return vs->current; }
/* A new file number, never handed out before. */
static inline uint64_t bkv_vset_new_file_number(bkv_version_set *vs) { return vs->next_file++; }
/* The next number new_file_number would hand out. */
static inline uint64_t bkv_vset_next_file(const bkv_version_set *vs) { return vs->next_file; }
/* A file numbered used exists (found at recovery): numbers after it only. */
static inline void bkv_vset_note_file_number(bkv_version_set *vs, uint64_t used) {
    if (used >= vs->next_file) vs->next_file = used + 1;
}
static inline uint64_t bkv_vset_manifest_number(const bkv_version_set *vs) { return vs->manifest_number; }
/* Applies edit to the current version without logging it (recovery and
 * repair, before the manifest that records it is written): BKV_OK,
 * BKV_NOMEM, or BKV_CORRUPTION when tables of one level would overlap. */
int bkv_vset_apply_unlogged(bkv_version_set *vs, const bkv_version_edit *edit);
/* Installs v as current (taking the caller's reference) and returns the
 * one it replaces (the caller's now): a read-only handle catching up. */
bkv_tree_version *bkv_vset_swap(bkv_version_set *vs, bkv_tree_version *v);

/* The manifest number CURRENT names in dir; BKV_CORRUPTION (naming the
 * file and offset) when CURRENT is malformed. */
int bkv_read_current(const bkv_env *env, const char *dir, uint64_t *manifest, bkv_err *e);

/* What a manifest's replay finds besides the version, for the parts
 * that own it: the oldest WAL still needed, the value index record, and
 * whether the database's WALs carry durable marks. */
typedef struct bkv_manifest_found {
    uint64_t log_number;
    int has_value_index;
    bkv_value_index_rec value_index;
    int wal_marks;
} bkv_manifest_found;

/* Replays the manifest CURRENT names into db's current version, next
 * file number and last_sequence, and the rest into *found. A damaged last
 * record is dropped only when it cannot have been committed. */
int bkv_vset_recover(bkv_db *db, bkv_manifest_found *found, bkv_err *e);
/* bkv_vset_recover from manifest number, whatever CURRENT names. */
int bkv_vset_replay(bkv_db *db, uint64_t number, bkv_manifest_found *found, bkv_err *e);

/* Writes a new manifest holding the whole current state, with log_number
 * (the new active WAL's) and vrec (the value index record; NULL: none),
 * and points CURRENT at it. Called while opening (no other thread runs). */
int bkv_vset_write_manifest(bkv_db *db, uint64_t log_number, const bkv_value_index_rec *vrec, bkv_err *e);

/* Writes in dir manifest number manifest_number holding the whole of v
 * (with the value index record vrec, NULL for none, and the given log
 * number, next file and last sequence), synced, and points dir's CURRENT
 * at it. keep: the file stays open for appends through *lw (NULL:
 * closed). */
int bkv_vset_write_snapshot(const bkv_db *db, const char *dir, const bkv_tree_version *v, uint64_t manifest_number,
                            const bkv_value_index_rec *vrec, uint64_t log_number, uint64_t next_file,
                            uint64_t last_sequence, bkv_wfile **keep, bkv_log_writer *lw, bkv_err *e);

/* Appends edit to the manifest, syncs it, and installs the new version
 * (which the caller then publishes to reads); a failure puts the database
 * into its read-only error state. REQUIRES: db->mu held. */
int bkv_vset_log_and_apply(bkv_db *db, bkv_version_edit *edit, bkv_err *e);

#endif
