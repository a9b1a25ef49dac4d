/* Compactions: the picker (compaction_picker.c) chooses the inputs from a
 * version and the options alone; compaction.c merges and commits them. */
#ifndef BKV_DB_COMPACTION_H
#define BKV_DB_COMPACTION_H

#include "db/db_int.h"

/* An output overlapping more than this many target files of the level
 * below it is cut early, and a file overlapping more is not moved down
 * whole: a later compaction of it then reads a bounded amount (LevelDB's
 * kMaxGrandParentOverlapBytes is 10 target files too). */
#define BKV_MAX_GRANDPARENT_OVERLAP 10

struct bkv_compaction {
    int level;                     /* inputs[0] level */
    int output_level;
    bkv_file_meta **inputs[2];
    size_t ninputs[2];
    bkv_file_meta **grandparents;  /* level output_level + 1, for cutting */
    size_t ngrand;
    int trivial_move;
    int tiered_bottommost;         /* tiered: the oldest run is an input */
    int for_seeks;                 /* picked for the seeks its table cost, not for size */
    int for_range_deletion;        /* picked for entries a range deletion covers: never a trivial move */
    uint64_t smallest_snapshot;
    bkv_tree_version *version;     /* the version inputs were picked from */
    int claimed;                   /* inputs referenced and marked busy (a pick that gives up has not) */
};

/* The next compaction due in v under o, or NULL. compact_pointer[l] is
 * where level l's round robin stopped (updated by the pick). With no
 * level over its size: a table reads paid for, then one holding entries
 * that a range deletion every reader sees (sequence <= oldest_snapshot)
 * covers, rewritten (in place at the last level) so that they and the
 * deletion can go. The result holds references to v and its inputs,
 * which are marked busy; free it with bkv_compaction_free.
 * smallest_snapshot is left 0 for the caller. */
bkv_compaction *bkv_compaction_pick(const bkv_options *o, bkv_tree_version *v, bkv_buf *compact_pointer,
                                    uint64_t oldest_snapshot);
/* A compaction asked for by bkv_compact_range: the tables of level that
 * hold user keys in [lo, hi] (NULL: unbounded; all of level 0, which
 * overlaps itself), merged into output_level (= level: rewritten in
 * place). NULL when there is nothing to do, or (*busy) when an input is
 * being compacted now. Never a trivial move: the point is to rewrite. */
bkv_compaction *bkv_compaction_manual(const bkv_options *o, bkv_tree_version *v, int level, int output_level,
                                      const uint8_t *lo, size_t lol, const uint8_t *hi, size_t hil, int *busy);
void bkv_compaction_free(bkv_compaction *c);

#endif
