/*
 * Point reads, multi-gets and snapshots.
 *
 * A get hashes its key once and hands that hash to every filter it asks:
 * the active memtable's, each immutable memtable's, then each candidate
 * table's, newest first. A table is a candidate when its key range holds
 * the key; its filter is asked next, and a "no" costs no I/O at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"
#include "db/read_view.h"
#include "db/scheduler.h"
#include "util/ikey.h"

#define WRITE_PAUSE_NANOS 1000000000u

void bkv_db_charge_seeks(bkv_db *db, bkv_tree_version *v, const void *key, size_t klen, int seeks) {
    BKV_ASSERT_UNLOCKED(db);
    if (db->opts.compaction_style != BKV_COMPACTION_LEVELED || !db->opts.compact_for_reads ||
        bkv_coarse_nanos() - atomic_load_explicit(&db->last_write_nanos, memory_order_relaxed) < WRITE_PAUSE_NANOS ||
        !bkv_tree_version_charge_seeks(v, key, klen, seeks))
        return;
    bkv_db_lock(db);
    bkv_sched_wake(db);
    bkv_db_unlock(db);
}

/* What a read counts, added to the thread's counter stripe once at its
 * end: an atomic add costs about as much as a filter probe that hits the
 * cache, and a miss through every level would otherwise make a dozen. */
typedef struct read_tally {
    uint64_t memtable_filter_negatives, tables_consulted, filter_probes, filter_negatives, filter_false_positives;
} read_tally;

static void tally_add(bkv_db *db, const read_tally *t) {
    bkv_db_counters *c = &db->stripes[bkv_stripe_index()].c;
#define ADD(name) \
    if (t->name) atomic_fetch_add_explicit(&c->name, t->name, memory_order_relaxed)
    ADD(memtable_filter_negatives);
    ADD(tables_consulted);
    ADD(filter_probes);
    ADD(filter_negatives);
    ADD(filter_false_positives);
#undef ADD
}

/* Looks a key up in the memtables. 1 if they decide (found or deleted). */
static int memtables_get(read_tally *tally, const bkv_read_state *rs, const void *key, size_t klen, bkv_hash h, int *rc,
                         void **val, size_t *vlen) {
    for (int i = -1; i < rs->nimm; i++) {
        const bkv_memtable *m = i < 0 ? rs->mem : rs->imm[rs->nimm - 1 - i];
        unsigned type;
        const uint8_t *v;
        size_t n;
        int neg;
        uint64_t seq;
        int hit = bkv_memtable_get(m, key, klen, h, rs->snapshot, &type, &v, &n, &neg, &seq);
        tally->memtable_filter_negatives += (unsigned)neg;
        if (!hit) continue;
        if (type == BKV_TYPE_DELETION || bkv_tree_version_covers(rs->version, key, klen, seq, rs->snapshot)) {
            *rc = BKV_NOTFOUND;
            return 1;
        }
        if (!(*val = malloc(n ? n : 1))) {
            *rc = BKV_NOMEM;
            return 1;
        }
        memcpy(*val, v, n);
        *vlen = n;
        *rc = BKV_OK;
        return 1;
    }
    return 0;
}

/* Asks one table; 1 if it decides. A value that a range deletion of
 * covered (the read's version) hides reads as deleted. */
static int table_get(bkv_db *db, read_tally *tally, const bkv_read_options *ro, const bkv_file_meta *f, const void *key, size_t klen,
                     bkv_hash h, int filter_checked, uint64_t snapshot, const bkv_tree_version *covered, int *rc,
                     void **val, size_t *vlen, bkv_err *e) {
    tally->tables_consulted++;
    const bkv_filter *kf = filter_checked ? NULL : atomic_load_explicit(&f->key_filter, memory_order_acquire);
    if (kf) {
        tally->filter_probes++;
        if (!bkv_filter_may_contain(kf, h)) {
            tally->filter_negatives++;
            return 0;
        }
        filter_checked = 1;
    }
    bkv_cache_entry *entry;
    if ((*rc = bkv_db_get_table(db, f, &entry, e))) return 1;
    bkv_table *t = bkv_cache_value(entry);
    if (!filter_checked) {
        tally->filter_probes++;
        if (!bkv_table_may_contain(t, h)) {
            tally->filter_negatives++;
            bkv_cache_release(db->table_cache, entry);
            return 0;
        }
    }
    int found = 0;
    unsigned type = 0;
    uint64_t seq = 0;
    *rc = bkv_table_get(t, key, klen, snapshot, bkv_db_read_flags(ro), &found, &type,
                        val, vlen, &seq, bkv_db_tstats(db), e);
    int has_filter = bkv_table_has_filter(t);
    bkv_cache_release(db->table_cache, entry); /* t may be gone from here on */
    if (*rc) return 1;
    if (!found) {
        tally->filter_false_positives += (unsigned)has_filter;
        return 0;
    }
    *rc = type == BKV_TYPE_VALUE ? BKV_OK : BKV_NOTFOUND;
    if (*rc == BKV_OK && covered && bkv_tree_version_covers(covered, key, klen, seq, snapshot)) {
        free(*val);
        *val = NULL;
        *vlen = 0;
        *rc = BKV_NOTFOUND;
    }
    return 1;
}

int bkv_get(bkv_db *db, const bkv_read_options *ro, const void *key, size_t klen, void **val, size_t *vlen) {
    if (!db || (!key && klen) || !val || !vlen) return bkv_db_arg_error(db, "bkv_get");
    *val = NULL;
    *vlen = 0;
    bkv_err e;
    bkv_err_clear(&e);
    bkv_read_options local;
    int rc = bkv_db_read_options(db, &ro, &local, &e);
    if (rc) return bkv_db_error(db, rc, &e);
    bkv_read_state rs;
    bkv_view_section sec;
    bkv_view_enter(db, ro, &rs, &sec);
    rc = bkv_db_get_at(db, ro, &rs, key, klen, val, vlen, &e);
    bkv_view_leave(db, &rs, &sec);
    return bkv_db_error(db, rc, &e);
}

/* One get in GET_SAMPLING charges the seeks of GET_SAMPLING gets
 * (bkv_tree_version_charge_seeks) when it asked two tables or more:
 * LevelDB's rule, a read that had to look past the first table pays for
 * it. Filters make most such looks free here, but each is still a filter
 * probe, a cache miss: a tree that stays deep costs every read. */
#define GET_SAMPLING 64

static int tables_get(bkv_db *db, read_tally *tally, const bkv_read_options *ro, const bkv_read_state *rs, const void *key, size_t klen,
                      bkv_hash h, uint64_t stop_file, int *reached, int *asked, void **val, size_t *vlen, bkv_err *e) {
    int rc = BKV_NOTFOUND;
    const bkv_tree_version *v = rs->version;
    /* Every candidate's filter line is requested before the first is
     * probed: on a miss the get waits for one memory latency, not one a
     * level. */
    const bkv_file_meta *level_file[BKV_MAX_LEVELS];
    for (size_t i = 0; i < v->nfiles[0]; i++)
        if (bkv_file_meta_holds(v->files[0][i], key, klen))
            bkv_filter_prefetch(atomic_load_explicit(&v->files[0][i]->key_filter, memory_order_acquire), h);
    for (int l = 1; l < v->levels_used; l++)
        if ((level_file[l] = bkv_tree_version_level_file(v, l, key, klen)))
            bkv_filter_prefetch(atomic_load_explicit(&level_file[l]->key_filter, memory_order_acquire), h);
    for (size_t i = 0; i < v->nfiles[0]; i++) {
        const bkv_file_meta *f = v->files[0][i];
        if (stop_file && f->number == stop_file) {
            *reached = 1;
            return BKV_NOTFOUND;
        }
        if (!bkv_file_meta_holds(f, key, klen)) continue;
        ++*asked;
        if (table_get(db, tally, ro, f, key, klen, h, 0, rs->snapshot, rs->version, &rc, val, vlen, e)) return rc;
    }
    for (int l = 1; l < v->levels_used; l++) {
        const bkv_file_meta *f = level_file[l];
        if (f && stop_file && f->number == stop_file) {
            *reached = 1;
            return BKV_NOTFOUND;
        }
        if (!f) continue;
        ++*asked;
        if (table_get(db, tally, ro, f, key, klen, h, 0, rs->snapshot, rs->version, &rc, val, vlen, e)) return rc;
    }
    return BKV_NOTFOUND;
}

int bkv_db_get_before(bkv_db *db, const bkv_read_options *ro, const bkv_read_state *rs, const void *key, size_t klen,
                      uint64_t stop_file, int *reached, void **val, size_t *vlen, bkv_err *e) {
    *reached = 0;
    uint64_t nth = atomic_fetch_add_explicit(&db->stripes[bkv_stripe_index()].c.gets, 1, memory_order_relaxed);
    bkv_hash h = bkv_hash_bytes(key, klen);
    BKV_COUNT(db, key_hashes, 1);
    int rc = BKV_NOTFOUND;
    read_tally tally = {0};
    int asked = 0;
    if (!memtables_get(&tally, rs, key, klen, h, &rc, val, vlen)) {
        rc = tables_get(db, &tally, ro, rs, key, klen, h, stop_file, reached, &asked, val, vlen, e);
        if (asked >= 2 && nth % GET_SAMPLING == 0 && !stop_file)
            bkv_db_charge_seeks(db, rs->version, key, klen, GET_SAMPLING);
    }
    tally_add(db, &tally);
    return rc;
}

int bkv_db_get_at(bkv_db *db, const bkv_read_options *ro, const bkv_read_state *rs, const void *key, size_t klen,
                  void **val, size_t *vlen, bkv_err *e) {
    int reached;
    return bkv_db_get_before(db, ro, rs, key, klen, 0, &reached, val, vlen, e);
}

/* A multi-get's keys, in key order. */
typedef struct mg_key {
    const uint8_t *key;
    size_t len;
    size_t i; /* its place in the caller's arrays */
} mg_key;

static int mg_key_cmp(const void *a, const void *b) {
    const mg_key *x = a, *y = b;
    return bkv_user_key_compare(x->key, x->len, y->key, y->len);
}

typedef struct multi_get {
    bkv_db *db;
    const bkv_read_options *ro;
    const bkv_read_state *rs;
    const void *const *keys;
    const size_t *klens;
    void **vals;
    size_t *vlens;
    int *statuses;
    bkv_hash *hashes;
    uint8_t *pending, *maybe;
    bkv_hash *batch;
    size_t *idx;
    read_tally tally;
} multi_get;

/* Asks table f for the keys idx[0..m): its filter for all of them at once
 * (probes prefetched), then blocks for the survivors, in key order. */
static void mg_ask_table(multi_get *g, const bkv_file_meta *f, size_t m) {
    bkv_db *db = g->db;
    bkv_err e;
    bkv_err_clear(&e);
    bkv_cache_entry *entry;
    int rc = bkv_db_get_table(db, f, &entry, &e);
    if (rc) {
        for (size_t j = 0; j < m; j++) g->statuses[g->idx[j]] = bkv_db_error(db, rc, &e), g->pending[g->idx[j]] = 0;
        return;
    }
    for (size_t j = 0; j < m; j++) g->batch[j] = g->hashes[g->idx[j]];
    bkv_table *t = bkv_cache_value(entry);
    bkv_table_may_contain_batch(t, g->batch, m, g->maybe);
    g->tally.filter_probes += m;
    size_t survivors = 0;
    for (size_t j = 0; j < m; j++)
        if (g->maybe[j]) {
            survivors++;
            bkv_table_prefetch_get(t, g->keys[g->idx[j]], g->klens[g->idx[j]]);
        }
    g->tally.filter_negatives += m - survivors;
    bkv_cache_release(db->table_cache, entry);
    for (size_t j = 0; j < m; j++) {
        if (!g->maybe[j]) continue;
        size_t i = g->idx[j];
        if (table_get(db, &g->tally, g->ro, f, g->keys[i], g->klens[i], g->hashes[i], 1, g->rs->snapshot, g->rs->version,
                      &g->statuses[i],
                      &g->vals[i], &g->vlens[i], &e)) {
            g->pending[i] = 0;
            if (g->statuses[i] < 0) bkv_db_error(db, g->statuses[i], &e);
        } else {
            g->statuses[i] = BKV_NOTFOUND;
        }
    }
}

int bkv_multi_get(bkv_db *db, const bkv_read_options *ro, size_t n, const void *const *keys, const size_t *klens,
                  void **vals, size_t *vlens, int *statuses) {
    if (!db || (n && (!keys || !klens || !vals || !vlens || !statuses))) return bkv_db_arg_error(db, "bkv_multi_get");
    bkv_err ro_err = {{0}};
    bkv_read_options local;
    if (bkv_db_read_options(db, &ro, &local, &ro_err)) return bkv_db_error(db, BKV_INVALID, &ro_err);
    /* Every per-key array below is at most 32 bytes an element (the sorted
     * keys): a count whose arrays cannot be sized is refused, not wrapped. */
    _Static_assert(sizeof(mg_key) <= 32, "per-key arrays fit the bound below");
    if (n > SIZE_MAX / 32)
        return bkv_db_error(db, BKV_INVALID, &(bkv_err){"bkv_multi_get: too many keys for one call"});
    size_t cap = n ? n : 1;
    multi_get g = {.db = db, .keys = keys, .klens = klens, .vals = vals, .vlens = vlens, .statuses = statuses};
    g.hashes = malloc(cap * sizeof *g.hashes);
    g.pending = malloc(cap);
    g.maybe = malloc(cap);
    g.batch = malloc(cap * sizeof *g.batch);
    g.idx = malloc(cap * sizeof *g.idx);
    mg_key *sorted = malloc(cap * sizeof *sorted);
    if (!g.hashes || !g.pending || !g.maybe || !g.batch || !g.idx || !sorted) {
        free(g.hashes), free(g.pending), free(g.maybe), free(g.batch), free(g.idx), free(sorted);
        return bkv_db_error(db, BKV_NOMEM, NULL);
    }
    BKV_COUNT(db, gets, n);
    bkv_read_state rs;
    bkv_view_section sec;
    bkv_view_enter(db, ro, &rs, &sec);
    g.ro = ro;
    g.rs = &rs;
    /* Phase 1: every key hashed once; memtables answer what they can. */
    for (size_t i = 0; i < n; i++) {
        vals[i] = NULL;
        vlens[i] = 0;
        g.hashes[i] = bkv_hash_bytes(keys[i], klens[i]);
        g.pending[i] = !memtables_get(&g.tally, &rs, keys[i], klens[i], g.hashes[i], &statuses[i], &vals[i], &vlens[i]);
        if (g.pending[i]) statuses[i] = BKV_NOTFOUND;
        sorted[i] = (mg_key){keys[i], klens[i], i};
    }
    BKV_COUNT(db, key_hashes, n);
    /* Phase 2: table by table, newest first, the pending keys in its range
     * asked together. The keys are sorted once, so a deeper level (disjoint
     * tables in key order) is one walk over its tables and the keys. */
    qsort(sorted, n, sizeof *sorted, mg_key_cmp);
    const bkv_tree_version *v = rs.version;
    for (size_t fi = 0; fi < v->nfiles[0]; fi++) {
        size_t m = 0;
        for (size_t j = 0; j < n; j++)
            if (g.pending[sorted[j].i] && bkv_file_meta_holds(v->files[0][fi], sorted[j].key, sorted[j].len))
                g.idx[m++] = sorted[j].i;
        if (m) mg_ask_table(&g, v->files[0][fi], m);
    }
    for (int l = 1; l < BKV_MAX_LEVELS; l++) {
        size_t fi = 0, nf = v->nfiles[l];
        for (size_t j = 0; j < n && fi < nf;) {
            const bkv_file_meta *f = v->files[l][fi];
            if (bkv_user_key_compare(f->largest, f->largest_len - BKV_IKEY_TRAILER, sorted[j].key, sorted[j].len) < 0) {
                fi++; /* this table ends before the key */
                continue;
            }
            size_t m = 0;
            for (; j < n && bkv_user_key_compare(sorted[j].key, sorted[j].len, f->largest,
                                                 f->largest_len - BKV_IKEY_TRAILER) <= 0; j++)
                if (g.pending[sorted[j].i] && bkv_file_meta_holds(f, sorted[j].key, sorted[j].len))
                    g.idx[m++] = sorted[j].i;
            if (m) mg_ask_table(&g, f, m);
            fi++;
        }
    }
    bkv_view_leave(db, &rs, &sec);
    tally_add(db, &g.tally);
    free(g.hashes), free(g.pending), free(g.maybe), free(g.batch), free(g.idx), free(sorted);
    return BKV_OK;
}

const bkv_snapshot *bkv_snapshot_create(bkv_db *db) {
    if (!db) {
        bkv_db_arg_error(NULL, "bkv_snapshot_create");
        return NULL;
    }
    bkv_snapshot *s = malloc(sizeof *s);
    if (!s) {
        bkv_db_error(db, BKV_NOMEM, NULL);
        return NULL;
    }
    bkv_db_lock(db);
    /* An ingest at sequence 0 counted on no snapshot being live until its
     * tables are in (db_ingest.c): this one would see them appear. */
    while (db->ingesting_unsequenced) bkv_db_wait(db, &db->bg_cv);
    s->seq = atomic_load_explicit(&db->visible_sequence, memory_order_acquire);
    s->db = db;
    /* Sequences only grow, so appending keeps the list oldest first. */
    s->next = &db->snapshots;
    s->prev = db->snapshots.prev;
    s->prev->next = s;
    db->snapshots.prev = s;
    bkv_db_unlock(db);
    return s;
}

/* Only a snapshot found in db's own list is released: a second release,
 * or one of another database, is ignored rather than corrupting the list
 * (the pointer is compared, never followed, until it is found). */
void bkv_snapshot_release(bkv_db *db, const bkv_snapshot *snap) {
    if (!db || !snap) return;
    bkv_db_lock(db);
    bkv_snapshot *s = db->snapshots.next;
    while (s != &db->snapshots && s != snap) s = s->next;
    if (s != &db->snapshots) {
        s->prev->next = s->next;
        s->next->prev = s->prev;
    }
    bkv_db_unlock(db);
    if (s != &db->snapshots) free(s);
}

int bkv_db_read_flags(const bkv_read_options *ro) {
    if (!ro) return BKV_READ_FILL_CACHE;
    return (ro->fill_cache ? BKV_READ_FILL_CACHE : 0) | (ro->verify_checksums ? BKV_READ_VERIFY_ALL : 0);
    /* skip_damaged is the iterator's own: it hands its log to each table. */
}

int bkv_db_read_options(const bkv_db *db, const bkv_read_options **rop, bkv_read_options *local, bkv_err *e) {
    const bkv_read_options *ro = *rop;
    if (ro && ro->size != sizeof *ro) {
        bkv_read_options_init(local);
        int rc = bkv_adopt_options(local, sizeof *local, ro, "bkv_read_options", e);
        if (rc) return rc;
        *rop = ro = local;
    }
    if (ro && ro->snapshot && ro->snapshot->db != db)
        return bkv_fail(e, BKV_INVALID, "%s: the read options' snapshot belongs to another database", db->path);
    return BKV_OK;
}

