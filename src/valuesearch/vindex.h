/*
 * The value index: an in-memory structure over the value filters of every
 * live table partition (the leaves), answering which partitions may hold
 * a term. Three shapes share one interface:
 *   flat       every leaf is probed in turn (the baseline);
 *   hierarchy  a B+-tree-like tree of order d (d <= fan-out <= 2d, root
 *              2..2d) whose inner nodes are the bitwise OR of their
 *              children, searched from the root down only where a node
 *              answers "maybe" (Bloofi);
 *   bitsliced  the leaves stored transposed, one row of leaf bits per
 *              filter bit, so k row reads ANDed word by word test every
 *              leaf at once.
 * Leaves are appended in install order (the B+-tree key is that order),
 * so the leaves of one table or compaction sit side by side.
 *
 * Updates mark the nodes above changed leaves; bkv_vindex_commit then
 * recomputes only those. Not thread safe: the caller serializes updates
 * against searches (the database holds a read-write lock).
 */
#ifndef BKV_VALUESEARCH_VINDEX_H
#define BKV_VALUESEARCH_VINDEX_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomkv.h"
#include "valuesearch/value_filter.h"

typedef struct bkv_vindex bkv_vindex;

/* A leaf a search reports: partition part of table file, data blocks
 * first..last (last = UINT32_MAX: to the end of the table). */
typedef struct bkv_vleaf_ref {
    uint64_t file;
    uint32_t part;
    uint32_t first_block, last_block;
} bkv_vleaf_ref;

/* NULL when out of memory or the parameters are invalid. order >= 2. */
bkv_vindex *bkv_vindex_new(int shape, const bkv_vf_params *params, int order);
void bkv_vindex_free(bkv_vindex *vi);

/* Updates (add, remove, commit) may run while searches do, one updater at
 * a time (the caller serializes them): with a publish lock set, an update
 * takes it for writing only around the changes a search could see, and a
 * search holds it for reading. The bit-sliced shape does its slow part
 * (writing or clearing a table's columns across every row, growing the
 * matrix) outside the lock; the hierarchy recomputes its nodes inside
 * it. */
void bkv_vindex_set_publish_lock(bkv_vindex *vi, pthread_rwlock_t *lock);
/* Microseconds the publish lock was held for writing since the last call. */
uint64_t bkv_vindex_take_locked_micros(bkv_vindex *vi);

/* Adds the partitions of table file (copying the bits). vf NULL: the
 * table has no usable value filters, and one leaf that always answers
 * "maybe" stands for the whole table. BKV_INVALID when vf's m, k or seed
 * differ from the index's (treat the table as vf NULL); BKV_NOMEM. */
int bkv_vindex_add_table(bkv_vindex *vi, uint64_t file, const bkv_vf_set *vf);
void bkv_vindex_remove_table(bkv_vindex *vi, uint64_t file);
int bkv_vindex_has_table(const bkv_vindex *vi, uint64_t file);
/* 1 after an update ran out of memory: some tables may be missing, so a
 * search must not trust the index (the caller then scans every table). */
int bkv_vindex_broken(const bkv_vindex *vi);
/* How many inner nodes were recomputed since the last call (each add or
 * remove recomputes those above the leaves it changed before a search can
 * see them). */
uint64_t bkv_vindex_commit(bkv_vindex *vi);
/* Recomputes every inner node (what the paper does after each merge);
 * returns how many. */
uint64_t bkv_vindex_rebuild(bkv_vindex *vi);

/* Calls fn for every leaf that may hold the term; fn returns non-zero to
 * stop. Adds to st's index counters. */
typedef int (*bkv_vindex_hit_fn)(void *arg, const bkv_vleaf_ref *leaf);
int bkv_vindex_search(const bkv_vindex *vi, const bkv_vf_probe *probe, bkv_vindex_hit_fn fn, void *arg,
                      bkv_find_stats *st);

/* Checks the hierarchy's invariants (fan-out, equal leaf depth, parent
 * links, every committed node the OR of its children): 0 when they hold,
 * else -1 with the first violation in why. For tests. */
int bkv_vindex_check(const bkv_vindex *vi, char *why, size_t n);

typedef struct bkv_vindex_info {
    int shape, order, height;
    uint64_t tables, leaves, inner_nodes;
    uint64_t leaf_bytes, inner_bytes;   /* bit-sliced: the matrix counts as leaves */
    uint64_t inner_ones_permille;       /* average fill of inner nodes */
} bkv_vindex_info;
void bkv_vindex_get_info(const bkv_vindex *vi, bkv_vindex_info *info);
const char *bkv_vindex_shape_name(int shape);

#endif
