/* A run of disjoint tables in key order (a level >= 1) read as one
 * iterator, one table open at a time. */
#include "db/level_iter.h"

#include <stdlib.h>

#include "util/ikey.h"

typedef struct level_iter {
    bkv_ikey_iter base;
    bkv_db *db;
    bkv_file_meta *const *files; /* the caller's (a version's or a compaction's), outliving this */
    size_t nfiles;
    size_t cur;                  /* index of the open table, nfiles when none */
    bkv_cache_entry *entry;
    bkv_ikey_iter *table;
    int read_flags;
    int count_reads;             /* blocks read count in the database's table stats */
    bkv_skip_log *skips;         /* skipping damage: where it went (NULL: damage is an error) */
    const bkv_read_options *bounds; /* tables whose range filter rules out its bounds are passed over */
    int rc;
    bkv_err err;
} level_iter;

static void li_close_table(level_iter *li) {
    bkv_ikey_iter_destroy(li->table);
    li->table = NULL;
    if (li->entry) bkv_cache_release(li->db->table_cache, li->entry);
    li->entry = NULL;
    li->cur = li->nfiles;
}

/* Whether table f, and every table after it in direction forward, lies
 * outside [lower_bound, upper_bound). */
static int beyond_bounds(const bkv_file_meta *f, const bkv_read_options *b, int forward) {
    if (forward)
        return b->upper_bound && bkv_user_key_compare(f->smallest, f->smallest_len - BKV_IKEY_TRAILER, b->upper_bound,
                                                      b->upper_bound_len) >= 0;
    return b->lower_bound &&
           bkv_user_key_compare(f->largest, f->largest_len - BKV_IKEY_TRAILER, b->lower_bound, b->lower_bound_len) < 0;
}

/* Opens table i (closing the current one); 0 when i is out of range or the
 * table cannot be opened (the error is kept). Skipping damage, a table
 * that cannot be opened is recorded and the next one in the direction
 * (forward or not) is opened instead. */
static int li_open(level_iter *li, size_t i, int forward, int stepping) {
    for (;;) {
        if (li->cur == i && li->table) return 1;
        li_close_table(li);
        if (i >= li->nfiles || li->rc) return 0;
        /* Stepping on past the bounds, no later table (in this direction)
         * holds a key of them. Not on a seek: it must still find the first
         * entry at or after its key, which the merge steps back from. */
        if (stepping && li->bounds && beyond_bounds(li->files[i], li->bounds, forward)) return 0;
        int rc = bkv_db_get_table(li->db, li->files[i], &li->entry, &li->err);
        /* Passed over: none of its keys in the bounds (its index is never
         * read), or, skipping damage, it cannot be read. */
        int pass = !rc && li->bounds && !bkv_db_range_may_intersect(li->db, bkv_cache_value(li->entry), li->bounds);
        if (!rc && !pass)
            rc = bkv_table_iter_new(bkv_cache_value(li->entry), li->read_flags,
                                    li->count_reads ? bkv_db_tstats(li->db) : NULL, &li->table);
        if (!rc && !pass && li->skips) bkv_table_iter_skip_damage(li->table, li->skips);
        if ((rc == BKV_CORRUPTION || rc == BKV_IOERROR) && li->skips) {
            bkv_skip_log_add_file(li->skips, li->files[i], &li->err);
            rc = BKV_OK;
            pass = 1;
        }
        if (pass) {
            li_close_table(li);
            if (!forward && i == 0) return 0;
            i = forward ? i + 1 : i - 1;
            continue;
        }
        if (rc) {
            li->rc = rc;
            li_close_table(li);
            return 0;
        }
        li->cur = i;
        return 1;
    }
}

/* After a move inside the open table: on to the neighbour when it ran out. */
static void li_settle(level_iter *li, int forward) {
    while (li->table && !bkv_ikey_iter_valid(li->table)) {
        if (bkv_ikey_iter_status(li->table, &li->err)) {
            li->rc = bkv_ikey_iter_status(li->table, &li->err);
            li_close_table(li);
            return;
        }
        size_t next = li->cur;
        if (forward) next++;
        else if (next-- == 0) next = li->nfiles;
        if (!li_open(li, next, forward, 1)) return;
        if (forward) bkv_ikey_iter_first(li->table);
        else bkv_ikey_iter_last(li->table);
    }
}

static int li_valid(bkv_ikey_iter *b) {
    level_iter *li = (level_iter *)b;
    return li->table && bkv_ikey_iter_valid(li->table);
}

static void li_first(bkv_ikey_iter *b) {
    level_iter *li = (level_iter *)b;
    if (li_open(li, 0, 1, 0)) bkv_ikey_iter_first(li->table);
    li_settle(li, 1);
}

static void li_last(bkv_ikey_iter *b) {
    level_iter *li = (level_iter *)b;
    if (li->nfiles && li_open(li, li->nfiles - 1, 0, 0)) bkv_ikey_iter_last(li->table);
    li_settle(li, 0);
}

static void li_seek(bkv_ikey_iter *b, const uint8_t *k, size_t n) {
    level_iter *li = (level_iter *)b;
    /* The first table whose largest key is >= k. */
    size_t lo = 0, hi = li->nfiles;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const bkv_file_meta *f = li->files[mid];
        if (bkv_ikey_compare(f->largest, f->largest_len, k, n) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (li_open(li, lo, 1, 0)) bkv_ikey_iter_seek(li->table, k, n);
    li_settle(li, 1);
}

static void li_next(bkv_ikey_iter *b) {
    level_iter *li = (level_iter *)b;
    bkv_ikey_iter_next(li->table);
    li_settle(li, 1);
}

static void li_prev(bkv_ikey_iter *b) {
    level_iter *li = (level_iter *)b;
    bkv_ikey_iter_prev(li->table);
    li_settle(li, 0);
}

static const uint8_t *li_key(bkv_ikey_iter *b, size_t *n) { return bkv_ikey_iter_key(((level_iter *)b)->table, n); }
static const uint8_t *li_value(bkv_ikey_iter *b, size_t *n) { return bkv_ikey_iter_value(((level_iter *)b)->table, n); }

static int li_status(bkv_ikey_iter *b, bkv_err *e) {
    level_iter *li = (level_iter *)b;
    if (li->rc && e) *e = li->err;
    if (li->rc) return li->rc;
    return li->table ? bkv_ikey_iter_status(li->table, e) : BKV_OK;
}

static void li_destroy(bkv_ikey_iter *b) {
    level_iter *li = (level_iter *)b;
    li_close_table(li);
    free(li);
}

static const bkv_ikey_iter_ops level_iter_ops = {li_valid, li_first, li_last,  li_seek,   li_next,
                                             li_prev,  li_key,   li_value, li_status, li_destroy};

bkv_ikey_iter *bkv_level_iter_new(bkv_db *db, bkv_file_meta *const *files, size_t n, int read_flags,
                                  int count_reads, bkv_skip_log *skips) {
    level_iter *li = calloc(1, sizeof *li);
    if (!li) return NULL;
    li->base.ops = &level_iter_ops;
    li->db = db;
    li->files = files;
    li->nfiles = n;
    li->cur = n;
    li->read_flags = read_flags;
    li->count_reads = count_reads;
    li->skips = skips;
    return &li->base;
}

void bkv_skip_log_add_file(bkv_skip_log *log, const bkv_file_meta *f, const bkv_err *why) {
    bkv_skip_log_add(log, f->smallest, f->smallest_len - BKV_IKEY_TRAILER, 1, f->largest,
                     f->largest_len - BKV_IKEY_TRAILER, why);
}

void bkv_level_iter_set_bounds(bkv_ikey_iter *it, const bkv_read_options *bounds) {
    ((level_iter *)it)->bounds = bounds;
}

int bkv_db_range_counted(bkv_db *db, int maybe) {
    BKV_COUNT(db, range_filter_probes, 1);
    BKV_COUNT(db, range_filter_negatives, !maybe);
    return maybe;
}

int bkv_db_range_may_intersect(bkv_db *db, const bkv_table *t, const bkv_read_options *ro) {
    if (!bkv_table_has_range_filter(t)) return 1;
    return bkv_db_range_counted(db, bkv_table_range_may_intersect(t, ro->lower_bound, ro->lower_bound_len,
                                                                 ro->upper_bound, ro->upper_bound_len));
}
