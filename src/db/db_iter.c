/*
 * The database iterator: user keys in order over a merging iterator of the
 * memtables and tables, showing for each user key its newest version at
 * the read sequence and hiding deleted keys.
 *
 * Forward, the merging iterator sits on the entry being shown. Backward,
 * it sits just before all entries of the key being shown, whose key and
 * value are then kept in saved_key / saved_value (the newest visible
 * version is the last one met when walking backwards).
 *
 * With prefix_same_as_start, the children are chosen at each seek: only
 * tables whose key filter may hold the seek key's prefix (one hash for the
 * seek) join the merge, and iteration ends where the prefix changes.
 */
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/level_iter.h"
#include "db/read_view.h"
#include "db/version_set.h"
#include "util/coding.h"
#include "util/hash.h"
#include "util/ikey.h"
#include "util/iterator.h"

struct bkv_iter {
    bkv_db *db;
    bkv_read_state rs;
    bkv_read_options ro;
    bkv_ikey_iter *iter;            /* merge of the current children */
    bkv_cache_entry **tables;   /* open tables the children read */
    size_t ntables;
    int forward;
    int valid;
    bkv_buf saved_key, saved_value;
    bkv_buf prefix;             /* prefix_same_as_start: the seek key's prefix */
    int has_prefix;
    int rc;
    bkv_err err;
    bkv_skip_log skips;         /* ro.skip_damaged: the ranges passed over */
    /* Read sampling: the seek, and the step of a scan, at which this
     * iterator next tells the version what reading cost it
     * (bkv_db_charge_seeks); random, so that iterators of one seek each
     * still charge their share. */
    uint32_t random;
    int seeks_to_sample;
    int steps_to_sample;
};

/* One seek in SEEK_SAMPLING is charged, for SEEK_SAMPLING seeks, so that
 * the charge (an atomic on a table shared by every reader) stays rare.
 * A scan charges one seek per STEP_SAMPLING entries (about a megabyte of
 * 100-byte entries), as LevelDB charges one per megabyte read. */
#define SEEK_SAMPLING 16
#define STEP_SAMPLING 8192

static uint32_t next_random(bkv_iter *it) {
    uint32_t x = it->random;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return it->random = x;
}

static void drop_children(bkv_iter *it) {
    bkv_ikey_iter_destroy(it->iter);
    it->iter = NULL;
    for (size_t i = 0; i < it->ntables; i++) bkv_cache_release(it->db->table_cache, it->tables[i]);
    free(it->tables);
    it->tables = NULL;
    it->ntables = 0;
}

static void fail(bkv_iter *it, int rc, const bkv_err *e) {
    if (!it->rc) {
        it->rc = rc;
        if (e) it->err = *e;
        bkv_db_error(it->db, rc, e);
    }
    it->valid = 0;
}

/* Builds the merge over every memtable and every table that may hold keys
 * with the given prefix (all tables when prefix is NULL). */
/* Where the children record damage they pass over; NULL: damage stops them. */
static bkv_skip_log *skip_log(bkv_iter *it) { return it->ro.skip_damaged ? &it->skips : NULL; }

static int build_children(bkv_iter *it, const uint8_t *prefix, size_t plen) {
    drop_children(it);
    const bkv_tree_version *v = it->rs.version;
    size_t nfiles = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) nfiles += v->nfiles[l];
    size_t cap = nfiles + (size_t)it->rs.nimm + 1;
    bkv_ikey_iter **children = malloc(cap * sizeof *children);
    it->tables = malloc((nfiles ? nfiles : 1) * sizeof *it->tables);
    if (!children || !it->tables) {
        free(children);
        bkv_err e;
        fail(it, bkv_fail(&e, BKV_NOMEM, "out of memory creating an iterator"), &e);
        return BKV_NOMEM;
    }
    size_t n = 0;
    bkv_err e;
    bkv_err_clear(&e);
    int rc = BKV_OK;
    if (!(children[n++] = bkv_memtable_ikey_iter_new(it->rs.mem))) rc = BKV_NOMEM;
    for (int i = 0; !rc && i < it->rs.nimm; i++)
        if (!(children[n++] = bkv_memtable_ikey_iter_new(it->rs.imm[i]))) rc = BKV_NOMEM;
    bkv_hash ph = prefix ? bkv_hash_bytes_seeded(prefix, plen, BKV_PREFIX_SEED) : 0;
    /* With bounds, tables whose range filter rules them out are left out:
     * every key shown lies in [lower, upper). */
    int bounded = it->ro.lower_bound || it->ro.upper_bound;
    for (int l = 0; !rc && l < BKV_MAX_LEVELS; l++) {
        if (l > 0 && !prefix) {
            /* Without a prefix to filter tables by, a deeper level is one
             * lazily opened run. */
            if (v->nfiles[l] && !(children[n++] = bkv_level_iter_new(it->db, v->files[l], v->nfiles[l],
                                                                     bkv_db_read_flags(&it->ro), 1, skip_log(it))))
                rc = BKV_NOMEM;
            else if (v->nfiles[l] && bounded) bkv_level_iter_set_bounds(children[n - 1], &it->ro);
            continue;
        }
        for (size_t i = 0; !rc && i < v->nfiles[l]; i++) {
            const bkv_file_meta *f = v->files[l][i];
            if (prefix) {
                /* Out of the file's key range, or ruled out by its filter. */
                size_t sl = f->smallest_len - BKV_IKEY_TRAILER, ll = f->largest_len - BKV_IKEY_TRAILER;
                size_t cl = sl < plen ? sl : plen;
                if (memcmp(f->largest, prefix, ll < plen ? ll : plen) < 0 ||
                    (ll < plen && memcmp(f->largest, prefix, ll) == 0) || memcmp(f->smallest, prefix, cl) > 0)
                    continue;
            }
            bkv_cache_entry *entry;
            if ((rc = bkv_db_get_table(it->db, f, &entry, &e)) && skip_log(it) &&
                (rc == BKV_CORRUPTION || rc == BKV_IOERROR)) {
                bkv_skip_log_add_file(&it->skips, f, &e);
                rc = BKV_OK;
                continue;
            }
            if (rc) break;
            bkv_table *t = bkv_cache_value(entry);
            if (bounded && !bkv_db_range_may_intersect(it->db, t, &it->ro)) {
                bkv_cache_release(it->db->table_cache, entry); /* none of its keys in the bounds */
                continue;
            }
            if (prefix) {
                BKV_COUNT(it->db, filter_probes, 1);
                if (!bkv_table_may_contain(t, ph)) {
                    BKV_COUNT(it->db, filter_negatives, 1);
                    bkv_cache_release(it->db->table_cache, entry);
                    continue;
                }
            }
            it->tables[it->ntables++] = entry;
            rc = bkv_table_iter_new(t, bkv_db_read_flags(&it->ro), bkv_db_tstats(it->db), &children[n]);
            if (!rc && skip_log(it)) bkv_table_iter_skip_damage(children[n], &it->skips);
            if (!rc) n++;
        }
    }
    if (rc) {
        for (size_t i = 0; i < n; i++) bkv_ikey_iter_destroy(children[i]);
        free(children);
        fail(it, rc, e.msg[0] ? &e : NULL);
        return rc;
    }
    if (!(it->iter = bkv_merging_iter_new(children, n))) {
        fail(it, bkv_fail(&e, BKV_NOMEM, "out of memory creating an iterator"), &e);
        return BKV_NOMEM;
    }
    return BKV_OK;
}

int bkv_iter_create_at(bkv_db *db, const bkv_read_options *ro, bkv_read_state *rs, bkv_iter **out) {
    bkv_iter *it = calloc(1, sizeof *it);
    if (!it) {
        bkv_read_state_release(rs);
        return bkv_db_error(db, BKV_NOMEM, NULL);
    }
    it->db = db;
    atomic_fetch_add_explicit(&db->live_iters, 1, memory_order_relaxed);
    if (ro) it->ro = *ro;
    else bkv_read_options_init(&it->ro);
    bkv_buf_init(&it->saved_key);
    bkv_buf_init(&it->saved_value);
    bkv_buf_init(&it->prefix);
    it->rs = *rs;
    it->random = (uint32_t)((bkv_monotonic_nanos() ^ (uintptr_t)it) * UINT64_C(0x9E3779B97F4A7C15) >> 32) | 1;
    it->seeks_to_sample = 1 + (int)(next_random(it) % SEEK_SAMPLING);
    it->steps_to_sample = 1 + (int)(next_random(it) % (2 * STEP_SAMPLING));
    int rc = build_children(it, NULL, 0);
    if (rc) {
        bkv_iter_destroy(it);
        return rc;
    }
    *out = it;
    return BKV_OK;
}

int bkv_iter_create(bkv_db *db, const bkv_read_options *ro, bkv_iter **out) {
    if (!db || !out) return bkv_db_arg_error(db, "bkv_iter_create");
    *out = NULL;
    bkv_err e;
    bkv_err_clear(&e);
    bkv_read_options local;
    if (bkv_db_read_options(db, &ro, &local, &e)) return bkv_db_error(db, BKV_INVALID, &e);
    bkv_read_state rs;
    bkv_read_state_acquire(db, ro, &rs);
    return bkv_iter_create_at(db, ro, &rs, out);
}

/* Whether user key k lies before hi (hi NULL: unbounded), the bounds' exclusive end. */
static int before_hi(const uint8_t *k, size_t n, const void *hi, size_t hilen) {
    return !hi || bkv_user_key_compare(k, n, hi, hilen) < 0;
}

/* Tables whose range filters surely_empty asks together, each with its
 * filter's lookup of the question bkv_table_range_question works out. */
#define RANGE_BATCH 16
typedef struct range_batch {
    bkv_cache_entry *entry[RANGE_BATCH];
    bkv_range_lookup lookup[RANGE_BATCH];
    int open[RANGE_BATCH];
    int n;
} range_batch;

/* Asks the batch's tables, unless maybe already says a key may be there,
 * and empties it: 1 when one may hold a key in the bounds. Each step of
 * the lookups runs over every table before the next, so the filters'
 * cache misses (three dependent ones a table) overlap: asked one table
 * after the other, at 10 M keys they were most of an empty range's time. */
static int batch_may_hold(bkv_db *db, range_batch *b, const bkv_read_options *bounds, int maybe) {
    for (int i = 0; !maybe && i < b->n; i++) {
        const bkv_table *t = bkv_cache_value(b->entry[i]);
        uint64_t a, z;
        b->open[i] = bkv_table_range_question(t, bounds->lower_bound, bounds->lower_bound_len, bounds->upper_bound,
                                              bounds->upper_bound_len, &a, &z);
        if (b->open[i]) bkv_filter_range_lookup_start(&b->lookup[i], bkv_table_range_filter(t), a, z);
    }
    for (int step = 0; !maybe && step < BKV_FILTER_RANGE_STEPS; step++)
        for (int i = 0; i < b->n; i++)
            if (b->open[i]) bkv_filter_range_lookup_step(&b->lookup[i]);
    for (int i = 0; i < b->n; i++) {
        if (!maybe) maybe = bkv_db_range_counted(db, b->open[i] && bkv_filter_range_lookup_answer(&b->lookup[i]));
        bkv_cache_release(db->table_cache, b->entry[i]);
    }
    b->n = 0;
    return maybe;
}

/* Whether no memtable entry and no table may hold a key in [lo, hi): the
 * memtables by a seek, the tables by their key ranges and range filters.
 * 0 (maybe) also when the state cannot be read cheaply. Inside a read
 * section. */
static int surely_empty(bkv_db *db, const bkv_read_state *rs, const bkv_read_options *bounds) {
    const uint8_t *lo = bounds->lower_bound, *hi = bounds->upper_bound;
    size_t lolen = bounds->lower_bound_len, hilen = bounds->upper_bound_len;
    uint8_t stack[256];
    bkv_buf seek;
    bkv_buf_init_with(&seek, stack, sizeof stack);
    if (bkv_ikey_seek_key(&seek, lo, lolen)) {
        bkv_buf_free(&seek);
        return 0;
    }
    int maybe = 0;
    for (int i = -1; !maybe && i < rs->nimm; i++) {
        bkv_memtable_iter mi;
        bkv_memtable_iter_init(&mi, i < 0 ? rs->mem : rs->imm[i]);
        bkv_memtable_iter_seek(&mi, seek.data, seek.len);
        size_t n;
        maybe = bkv_memtable_iter_valid(&mi) &&
                before_hi(bkv_memtable_iter_ikey(&mi, &n), n - BKV_IKEY_TRAILER, hi, hilen);
    }
    bkv_buf_free(&seek);
    const bkv_tree_version *v = rs->version;
    range_batch batch;
    batch.n = 0;
    for (int l = 0; !maybe && l < BKV_MAX_LEVELS; l++) {
        /* Level 0 whole; deeper, from the first table whose largest key is
         * >= lo, found by the level's fences (a binary search over the
         * tables' own keys took a cache miss or two a step). */
        size_t i = l > 0 ? bkv_tree_version_level_lower_bound(v, l, lo, lolen) : 0, n = v->nfiles[l];
        for (; !maybe && i < n; i++) {
            const bkv_file_meta *f = v->files[l][i];
            int past_hi = !before_hi(f->smallest, f->smallest_len - BKV_IKEY_TRAILER, hi, hilen);
            if (past_hi && l > 0) break; /* and every later table of the level */
            if (past_hi ||
                bkv_user_key_compare(f->largest, f->largest_len - BKV_IKEY_TRAILER, lo, lolen) < 0)
                continue;
            bkv_cache_entry *entry;
            if (bkv_db_get_table(db, f, &entry, NULL)) {
                maybe = 1;
                break;
            }
            if (!bkv_table_has_range_filter(bkv_cache_value(entry))) {
                bkv_cache_release(db->table_cache, entry);
                maybe = 1; /* it would have to be read */
                break;
            }
            batch.entry[batch.n++] = entry;
            if (batch.n == RANGE_BATCH) maybe = batch_may_hold(db, &batch, bounds, 0);
        }
    }
    maybe = batch_may_hold(db, &batch, bounds, maybe); /* once the answer is maybe, only releases */
    return !maybe;
}

int bkv_range_empty(bkv_db *db, const bkv_read_options *ro, const void *lo, size_t lolen, const void *hi, size_t hilen,
                    int *empty) {
    if (!db || !empty || (!lo && lolen) || (!hi && hilen)) return bkv_db_arg_error(db, "bkv_range_empty");
    *empty = 0;
    bkv_err e;
    bkv_err_clear(&e);
    bkv_read_options local;
    if (bkv_db_read_options(db, &ro, &local, &e)) return bkv_db_error(db, BKV_INVALID, &e);
    bkv_read_options bounded = ro ? *ro : local;
    if (!ro) bkv_read_options_init(&bounded);
    bounded.lower_bound = lo ? lo : "";
    bounded.lower_bound_len = lolen;
    bounded.upper_bound = hi;
    bounded.upper_bound_len = hilen;
    /* The common case, an empty range that every filter rules out, needs
     * no iterator: asked under a read section as a get is. */
    bkv_read_state rs;
    bkv_view_section sec;
    bkv_view_enter(db, &bounded, &rs, &sec);
    int sure = surely_empty(db, &rs, &bounded);
    bkv_view_leave(db, &rs, &sec);
    if (sure) {
        *empty = 1;
        return BKV_OK;
    }
    bkv_iter *it;
    int rc = bkv_iter_create(db, &bounded, &it);
    if (rc) return rc;
    bkv_iter_seek_to_first(it);
    *empty = !bkv_iter_valid(it);
    rc = bkv_iter_status(it);
    bkv_iter_destroy(it);
    if (rc) *empty = 0;
    return rc;
}

void bkv_iter_destroy(bkv_iter *it) {
    if (!it) return;
    drop_children(it);
    bkv_read_state_release(&it->rs);
    atomic_fetch_sub_explicit(&it->db->live_iters, 1, memory_order_relaxed);
    bkv_buf_free(&it->saved_key);
    bkv_buf_free(&it->saved_value);
    bkv_buf_free(&it->prefix);
    bkv_skip_log_free(&it->skips);
    free(it);
}

static int parse_current(bkv_iter *it, bkv_parsed_ikey *p) {
    size_t n;
    const uint8_t *k = bkv_ikey_iter_key(it->iter, &n);
    if (n < BKV_IKEY_TRAILER) {
        bkv_err e;
        fail(it, bkv_fail(&e, BKV_CORRUPTION, "iterator met a malformed internal key"), &e);
        return 0;
    }
    *p = bkv_ikey_parse(k, n);
    return 1;
}

/* Is the user key past the end of the range in this direction? */
static int beyond_upper(const bkv_iter *it, const uint8_t *k, size_t n) {
    if (it->ro.upper_bound && bkv_user_key_compare(k, n, it->ro.upper_bound, it->ro.upper_bound_len) >= 0) return 1;
    return it->has_prefix && (n < it->prefix.len || memcmp(k, it->prefix.data, it->prefix.len) != 0);
}

static int below_lower(const bkv_iter *it, const uint8_t *k, size_t n) {
    if (it->ro.lower_bound && bkv_user_key_compare(k, n, it->ro.lower_bound, it->ro.lower_bound_len) < 0) return 1;
    return it->has_prefix && (n < it->prefix.len || memcmp(k, it->prefix.data, it->prefix.len) != 0);
}

/* A value a range deletion visible to the iterator covers reads as a
 * deletion of its key; so does one in a range skipped as unreadable (a
 * version there may have overwritten or deleted it). */
static int range_deleted(const bkv_iter *it, const bkv_parsed_ikey *p) {
    if (p->type != BKV_TYPE_VALUE) return 0;
    if (bkv_tree_version_covers(it->rs.version, p->ukey, p->ulen, p->seq, it->rs.snapshot)) return 1;
    return (it->skips.n || it->skips.incomplete) && bkv_skip_log_holds(&it->skips, p->ukey, p->ulen);
}

static void check_status(bkv_iter *it) {
    bkv_err e;
    int rc = bkv_ikey_iter_status(it->iter, &e);
    if (rc) fail(it, rc, &e);
}

/* Copies a key or value the iterator must remember; out of memory ends
 * the iteration with BKV_NOMEM (a stale saved key would show shadowed or
 * deleted entries). -1 then. */
static int save(bkv_iter *it, bkv_buf *b, const void *p, size_t n) {
    if (!bkv_buf_set(b, p, n)) return 0;
    bkv_err e;
    fail(it, bkv_fail(&e, BKV_NOMEM, "out of memory iterating"), &e);
    return -1;
}

/* Moves forward to the next entry to show. With skipping, entries of user
 * keys <= saved_key are passed over (shadowed or already shown). */
static void find_next_user_entry(bkv_iter *it, int skipping) {
    it->valid = 0;
    for (; bkv_ikey_iter_valid(it->iter); bkv_ikey_iter_next(it->iter)) {
        bkv_parsed_ikey p;
        if (!parse_current(it, &p)) return;
        if (p.seq > it->rs.snapshot) continue;
        if (skipping && bkv_user_key_compare(p.ukey, p.ulen, it->saved_key.data, it->saved_key.len) <= 0) continue;
        if (beyond_upper(it, p.ukey, p.ulen)) break;
        if (p.type == BKV_TYPE_DELETION || range_deleted(it, &p)) {
            if (save(it, &it->saved_key, p.ukey, p.ulen)) return;
            skipping = 1;
            continue;
        }
        it->valid = 1;
        return;
    }
    check_status(it);
}

/* Moves backward to the previous entry to show; on return the merging
 * iterator is before every entry of the saved key. */
static void find_prev_user_entry(bkv_iter *it) {
    unsigned type = BKV_TYPE_DELETION;
    for (; bkv_ikey_iter_valid(it->iter); bkv_ikey_iter_prev(it->iter)) {
        bkv_parsed_ikey p;
        if (!parse_current(it, &p)) return;
        if (p.seq > it->rs.snapshot) continue;
        if (type != BKV_TYPE_DELETION &&
            bkv_user_key_compare(p.ukey, p.ulen, it->saved_key.data, it->saved_key.len) < 0)
            break; /* passed every version of the saved key */
        if (below_lower(it, p.ukey, p.ulen)) break; /* the saved key, if any, is the answer */
        type = range_deleted(it, &p) ? BKV_TYPE_DELETION : p.type;
        if (type == BKV_TYPE_DELETION) {
            bkv_buf_clear(&it->saved_key);
            bkv_buf_clear(&it->saved_value);
        } else {
            size_t vn;
            const uint8_t *v = bkv_ikey_iter_value(it->iter, &vn);
            if (save(it, &it->saved_key, p.ukey, p.ulen) || save(it, &it->saved_value, v, vn)) return;
        }
    }
    it->valid = type != BKV_TYPE_DELETION;
    check_status(it);
}

/* Internal key (user key, read sequence, highest type): the first entry a
 * reader at this sequence may see for key. */
static void seek_internal(bkv_iter *it, const void *key, size_t klen, uint64_t seq) {
    bkv_buf *k = &it->saved_key;
    if (save(it, k, key, klen)) return;
    if (bkv_buf_put_u64(k, bkv_pack_trailer(seq, 0xff))) {
        bkv_err e;
        fail(it, bkv_fail(&e, BKV_NOMEM, "out of memory seeking"), &e);
        return;
    }
    bkv_ikey_iter_seek(it->iter, k->data, k->len);
    bkv_buf_clear(k);
}

static int usable(bkv_iter *it) {
    if (it->rc) {
        it->valid = 0;
        return 0;
    }
    return 1;
}

/* Leaves prefix mode (seek to first / last have no prefix to keep to). */
static int reset_children(bkv_iter *it) {
    if (!it->has_prefix) return BKV_OK;
    it->has_prefix = 0;
    return build_children(it, NULL, 0);
}

void bkv_iter_seek(bkv_iter *it, const void *key, size_t klen) {
    if (!usable(it)) return;
    if (it->ro.prefix_same_as_start && it->db->opts.prefix_extractor) {
        size_t plen = it->db->opts.prefix_extractor(key, klen);
        if (plen <= klen) {
            if (save(it, &it->prefix, key, plen)) return;
            it->has_prefix = 1;
            if (build_children(it, it->prefix.data, plen)) return;
        } else if (reset_children(it)) {
            return;
        }
    }
    if (it->ro.lower_bound && bkv_user_key_compare(key, klen, it->ro.lower_bound, it->ro.lower_bound_len) < 0) {
        key = it->ro.lower_bound;
        klen = it->ro.lower_bound_len;
    }
    it->forward = 1;
    seek_internal(it, key, klen, it->rs.snapshot);
    find_next_user_entry(it, 0);
    if (--it->seeks_to_sample == 0) {
        bkv_db_charge_seeks(it->db, it->rs.version, key, klen, SEEK_SAMPLING);
        it->seeks_to_sample = 1 + (int)(next_random(it) % (2 * SEEK_SAMPLING - 1));
    }
}

/* After a step of a scan. */
static void sample_step(bkv_iter *it) {
    if (--it->steps_to_sample > 0 || !it->valid) return;
    size_t n;
    const void *k = bkv_iter_key(it, &n);
    bkv_db_charge_seeks(it->db, it->rs.version, k, n, 1);
    it->steps_to_sample = 1 + (int)(next_random(it) % (2 * STEP_SAMPLING));
}

void bkv_iter_seek_to_first(bkv_iter *it) {
    if (!usable(it) || reset_children(it)) return;
    it->forward = 1;
    if (it->ro.lower_bound) seek_internal(it, it->ro.lower_bound, it->ro.lower_bound_len, it->rs.snapshot);
    else bkv_ikey_iter_first(it->iter);
    find_next_user_entry(it, 0);
}

void bkv_iter_seek_to_last(bkv_iter *it) {
    if (!usable(it) || reset_children(it)) return;
    it->forward = 0;
    bkv_buf_clear(&it->saved_value);
    if (it->ro.upper_bound) {
        /* Before every entry of the bound itself. */
        seek_internal(it, it->ro.upper_bound, it->ro.upper_bound_len, BKV_MAX_SEQ);
        if (bkv_ikey_iter_valid(it->iter)) bkv_ikey_iter_prev(it->iter);
        else bkv_ikey_iter_last(it->iter);
    } else {
        bkv_ikey_iter_last(it->iter);
    }
    find_prev_user_entry(it);
}

void bkv_iter_next(bkv_iter *it) {
    if (!usable(it) || !it->valid) return;
    if (!it->forward) {
        it->forward = 1;
        /* The merge sits before the saved key's entries: step onto them,
         * then skip them all. */
        if (!bkv_ikey_iter_valid(it->iter)) bkv_ikey_iter_first(it->iter);
        else bkv_ikey_iter_next(it->iter);
    } else {
        bkv_parsed_ikey p;
        if (!parse_current(it, &p) || save(it, &it->saved_key, p.ukey, p.ulen)) return;
        bkv_ikey_iter_next(it->iter);
    }
    find_next_user_entry(it, 1);
    sample_step(it);
}

void bkv_iter_prev(bkv_iter *it) {
    if (!usable(it) || !it->valid) return;
    if (it->forward) {
        /* Step back past every entry of the current user key. */
        bkv_parsed_ikey p;
        if (!parse_current(it, &p) || save(it, &it->saved_key, p.ukey, p.ulen)) return;
        for (;;) {
            bkv_ikey_iter_prev(it->iter);
            if (!bkv_ikey_iter_valid(it->iter)) {
                it->valid = 0;
                check_status(it);
                return;
            }
            if (!parse_current(it, &p)) return;
            if (bkv_user_key_compare(p.ukey, p.ulen, it->saved_key.data, it->saved_key.len) < 0) break;
        }
        it->forward = 0;
    }
    find_prev_user_entry(it);
    sample_step(it);
}

int bkv_iter_valid(const bkv_iter *it) { return it && it->valid; }

const void *bkv_iter_key(const bkv_iter *it, size_t *klen) {
    if (!it || !it->valid) {
        if (klen) *klen = 0;
        return NULL;
    }
    if (it->forward) {
        size_t n;
        const uint8_t *k = bkv_ikey_iter_key(it->iter, &n);
        *klen = n - BKV_IKEY_TRAILER;
        return k;
    }
    *klen = it->saved_key.len;
    return it->saved_key.data;
}

const void *bkv_iter_value(const bkv_iter *it, size_t *vlen) {
    if (!it || !it->valid) {
        if (vlen) *vlen = 0;
        return NULL;
    }
    if (it->forward) return bkv_ikey_iter_value(it->iter, vlen);
    *vlen = it->saved_value.len;
    return it->saved_value.data;
}

int bkv_iter_status(const bkv_iter *it) {
    if (!it) return bkv_db_arg_error(NULL, "bkv_iter_status");
    if (it->rc || !(it->skips.n || it->skips.incomplete)) return it->rc;
    bkv_err e;
    bkv_fail(&e, BKV_CORRUPTION, "%zu unreadable part%s skipped, the keys in %s left out; the first: %s",
             it->skips.n, it->skips.n == 1 ? "" : "s", it->skips.n == 1 ? "its range" : "their ranges",
             it->skips.incomplete && !it->skips.n ? "(not recorded: out of memory)" : it->skips.first.msg);
    return bkv_db_error(it->db, BKV_CORRUPTION, &e);
}
