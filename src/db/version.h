/*
 * Versions: immutable, reference-counted sets of table files per level. A
 * reader takes a reference to the current version and keeps using it
 * while flushes and compactions install new ones.
 *
 * Version edits describe the change from one version to the next and are
 * appended to the manifest (a log file, docs/format.md "Manifest").
 */
#ifndef BKV_DB_VERSION_H
#define BKV_DB_VERSION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "valuesearch/value_filter.h"
#include "util/buf.h"
#include "util/ikey.h"
#include "util/status.h"

#include "bloomkv.h" /* BKV_MAX_LEVELS: the public per-level options have one slot per level */

/* Told when a file no longer belongs to any version (its last reference
 * is gone after a compaction removed it), so it can be deleted. */
typedef struct bkv_file_owner {
    void (*on_obsolete)(void *ctx, uint64_t number);
    void *ctx;
} bkv_file_owner;

typedef struct bkv_file_meta {
    atomic_int refs;          /* taken and dropped by readers without the db mutex */
    uint64_t number;
    uint64_t size;
    uint64_t entries;
    uint64_t smallest_seq, largest_seq;
    uint64_t global_seq;      /* an ingested table's: every key in it reads at this sequence (0: as written) */
    /* Written by a compaction that removed what every range deletion of
     * sequence <= clean_seq covered: none of those covers an entry of it
     * (manifest tag 11; 0: not known to be clean of any). */
    uint64_t clean_seq;
    uint8_t *smallest; size_t smallest_len; /* internal keys */
    uint8_t *largest;  size_t largest_len;
    int being_compacted;      /* under the db mutex */
    int obsolete;             /* set when an installed edit removed it */
    const bkv_file_owner *owner;
    bkv_vf_set *vf;           /* value filters built with the table, until the value index takes them */
    atomic_int value_unindexed; /* the value index reads it whole: no usable value filters (set when indexed) */
    /* The open table, pinned for the life of this metadata (NULL until a
     * read opens it, or when the pin budget was spent: the table cache
     * then holds it). Reads find it without a cache lookup or a lock. */
    _Atomic(struct bkv_cache_entry *) pinned;
    atomic_int *pin_count;    /* the budget it counts against, given back when freed */
    /* The pinned table's whole key filter (NULL: none, partitioned, or not
     * pinned yet): a get that the filter turns away touches nothing else
     * of the table. It lives as long as the pin. */
    _Atomic(const struct bkv_filter *) key_filter;
    /* Seeks that may still pay for this table before it is compacted into
     * the level below for them (bkv_tree_version_charge_seeks). */
    atomic_int allowed_seeks;
} bkv_file_meta;

/* The value index parameters a database was created with (manifest tag 6). */
#define BKV_TERMS_NAME_MAX 255
typedef struct bkv_value_index_rec {
    uint64_t m_bits, k, seed, partition_entries, shape, order;
    uint64_t words;   /* BKV_VF_SPREAD (no tag 9) or BKV_VF_TWO_WORDS (tag 9) */
    char terms_name[BKV_TERMS_NAME_MAX + 1];
} bkv_value_index_rec;

/* A range deletion (bkv_delete_range, manifest tag 10): every entry of a
 * user key in [begin, end) (end unbounded: every key from begin on) with
 * a sequence below seq reads as deleted at snapshots >= seq. Immutable
 * once made, shared between versions by reference. It leaves the version
 * once nothing it covers can remain: every WAL up to wal (live when it
 * was written, so holding every write before it that no table held) is
 * retired, and no table that overlaps its range holds a sequence below
 * seq. */
typedef struct bkv_range_tombstone {
    atomic_int refs;
    uint64_t seq;
    uint64_t wal;
    int unbounded;
    uint8_t *begin, *end;
    size_t begin_len, end_len;
} bkv_range_tombstone;

/* Whether table f may hold an entry t covers: its key range meets t's,
 * it holds a sequence below t's, and no compaction cleaned it of t. */
static inline int bkv_range_tombstone_may_cover(const bkv_range_tombstone *t, const bkv_file_meta *f) {
    return f->smallest_seq < t->seq && f->clean_seq < t->seq &&
           bkv_user_key_compare(f->largest, f->largest_len - BKV_IKEY_TRAILER, t->begin, t->begin_len) >= 0 &&
           (t->unbounded || bkv_user_key_compare(f->smallest, f->smallest_len - BKV_IKEY_TRAILER, t->end, t->end_len) < 0);
}

/* begin/end copied; end NULL: unbounded. */
bkv_range_tombstone *bkv_range_tombstone_new(const void *begin, size_t blen, const void *end, size_t elen, uint64_t seq,
                                             uint64_t wal);
void bkv_range_tombstone_unref(bkv_range_tombstone *t);
/* Whether user key k lies in t's range. */
static inline int bkv_range_tombstone_holds(const bkv_range_tombstone *t, const void *k, size_t klen) {
    return bkv_user_key_compare(k, klen, t->begin, t->begin_len) >= 0 &&
           (t->unbounded || bkv_user_key_compare(k, klen, t->end, t->end_len) < 0);
}

typedef struct bkv_tree_version {
    atomic_int refs;               /* taken under the db mutex, dropped anywhere */
    bkv_range_tombstone **tombstones; /* range deletions in force, oldest first */
    size_t ntombstones;
    uint64_t log_number;           /* as the edits applied so far say (0: none said) */
    bkv_file_meta **files[BKV_MAX_LEVELS];
    size_t nfiles[BKV_MAX_LEVELS];
    /* Below level 0, for a get's binary search: every user key of the
     * level starts with the first fence_skip[l] bytes of its first table's
     * smallest key, and fences[l][i] holds the next eight bytes of table
     * i's largest key (big-endian, zero-padded): one array to search, not
     * a pointer per step to a meta and then to its key. */
    uint64_t *fences[BKV_MAX_LEVELS];
    size_t fence_skip[BKV_MAX_LEVELS];
    int levels_used; /* one past the deepest level holding a table (0: none): where a get stops looking */
    /* A table of this version that reads have paid for more than its
     * compaction would cost, or NULL; set by readers without the mutex. */
    _Atomic(bkv_file_meta *) seek_compact;
} bkv_tree_version;

typedef struct bkv_new_file {
    int level;
    bkv_file_meta *meta;
} bkv_new_file;

typedef struct bkv_deleted_file {
    int level;
    uint64_t number;
} bkv_deleted_file;

typedef struct bkv_version_edit {
    int has_log_number, has_next_file, has_last_sequence;
    uint64_t log_number;      /* WALs below this number are no longer needed */
    uint64_t next_file;
    uint64_t last_sequence;
    bkv_new_file *added;
    size_t nadded, cap_added;
    bkv_deleted_file *deleted;
    size_t ndeleted, cap_deleted;
    int has_value_index;
    bkv_value_index_rec value_index;
    int wal_marks;            /* tag 8: live WALs are synced lazily and carry durable marks */
    bkv_range_tombstone **tombstones; /* tag 10: range deletions added */
    size_t ntombstones, cap_tombstones;
} bkv_version_edit;

bkv_file_meta *bkv_file_meta_new(uint64_t number, uint64_t size, uint64_t entries, const uint8_t *smallest,
                                 size_t slen, const uint8_t *largest, size_t llen);
void bkv_file_meta_ref(bkv_file_meta *f);
/* Gives f its full allowance of seeks again (it moved to another level). */
void bkv_file_meta_reset_seeks(bkv_file_meta *f);
void bkv_file_meta_unref(bkv_file_meta *f);

void bkv_edit_init(bkv_version_edit *e);
void bkv_edit_free(bkv_version_edit *e);
/* Takes a reference to meta. */
int bkv_edit_add_file(bkv_version_edit *e, int level, bkv_file_meta *meta);
int bkv_edit_delete_file(bkv_version_edit *e, int level, uint64_t number);
/* Takes a reference to t. */
int bkv_edit_add_tombstone(bkv_version_edit *e, bkv_range_tombstone *t);
/* -1 when out of memory (out is then incomplete). */
BKV_MUST_CHECK int bkv_edit_encode(const bkv_version_edit *e, bkv_buf *out);
int bkv_edit_decode(bkv_version_edit *e, const uint8_t *p, size_t len, const char *name, uint64_t offset, bkv_err *err);

bkv_tree_version *bkv_tree_version_new(void);
void bkv_tree_version_unref(bkv_tree_version *v);
/* The version obtained by applying edit to base (base unchanged). Level 0
 * is kept newest data first (by largest sequence); deeper levels by
 * smallest key. BKV_CORRUPTION when two tables of a level below 0 would
 * share a user key. */
int bkv_tree_version_apply(const bkv_tree_version *base, const bkv_version_edit *edit, bkv_tree_version **out);
/* Whether table number is in v, at any level. */
int bkv_tree_version_has_table(const bkv_tree_version *v, uint64_t number);
/* Whether table number is in v at level. */
int bkv_tree_version_level_has(const bkv_tree_version *v, int level, uint64_t number);
/* Whether a range deletion in v visible at snapshot covers the entry of
 * user key k at sequence seq. */
static inline int bkv_tree_version_covers(const bkv_tree_version *v, const void *k, size_t klen, uint64_t seq,
                                          uint64_t snapshot) {
    for (size_t i = 0; i < v->ntombstones; i++) {
        const bkv_range_tombstone *t = v->tombstones[i];
        if (t->seq > seq && t->seq <= snapshot && bkv_range_tombstone_holds(t, k, klen)) return 1;
    }
    return 0;
}
/* Whether f's key range holds user key k. */
static inline int bkv_file_meta_holds(const bkv_file_meta *f, const void *k, size_t klen) {
    return bkv_user_key_compare(k, klen, f->smallest, f->smallest_len - BKV_IKEY_TRAILER) >= 0 &&
           bkv_user_key_compare(k, klen, f->largest, f->largest_len - BKV_IKEY_TRAILER) <= 0;
}

/* The eight bytes of key k after its first skip (zero-padded). */
static inline uint64_t bkv_key_fence(const uint8_t *k, size_t klen, size_t skip) {
    return klen > skip ? bkv_key_prefix64(k + skip, klen - skip) : 0;
}

/* The first table of level >= 1 (disjoint tables in key order) whose
 * largest key is >= user key k: nfiles[level] when none is. */
static inline size_t bkv_tree_version_level_lower_bound(const bkv_tree_version *v, int level, const void *k,
                                                        size_t klen) {
    size_t lo = 0, hi = v->nfiles[level], skip = v->fence_skip[level];
    if (!hi) return 0;
    if (skip) { /* a key without the level's common prefix is before or after every table */
        int c = memcmp(k, v->files[level][0]->smallest, klen < skip ? klen : skip);
        if (c < 0 || (c == 0 && klen < skip)) return 0;
        if (c > 0) return hi;
    }
    const uint64_t *fence = v->fences[level];
    uint64_t kf = bkv_key_fence(k, klen, skip);
    /* Fences order as the keys do, except that equal fences say nothing. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int below;
        if (fence[mid] != kf) below = fence[mid] < kf;
        else {
            const bkv_file_meta *f = v->files[level][mid];
            below = bkv_user_key_compare(f->largest, f->largest_len - BKV_IKEY_TRAILER, k, klen) < 0;
        }
        if (below) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The table of level >= 1 that may hold user key k, or NULL. */
static inline bkv_file_meta *bkv_tree_version_level_file(const bkv_tree_version *v, int level, const void *k,
                                                         size_t klen) {
    size_t i = bkv_tree_version_level_lower_bound(v, level, k, klen);
    return i < v->nfiles[level] && bkv_file_meta_holds(v->files[level][i], k, klen) ? v->files[level][i] : NULL;
}

/* Charges seeks to the newest table holding user key k when another,
 * older table below it also may: one sorted run more than needed paid for
 * them (each costs a block read that a filter cannot save). Once a table
 * has been charged more seeks than it is worth (size / BKV_SEEK_BYTES,
 * at least 100, as LevelDB reckons) it becomes v->seek_compact. 1 when
 * this call set it, so the caller wakes the compactions. */
#define BKV_SEEK_BYTES 16384
int bkv_tree_version_charge_seeks(bkv_tree_version *v, const uint8_t *k, size_t klen, int seeks);
/* Encodes the whole of v as one edit (the first record of a manifest). */
int bkv_tree_version_snapshot_edit(const bkv_tree_version *v, bkv_version_edit *edit);

#endif
