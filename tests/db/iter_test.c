/* Iterators and snapshots against an in-memory model: random writes with
 * flushes (and compactions, both styles) interleaved with full scans both
 * ways, seeks mixed with next/prev, bounded scans, prefix scans, and
 * snapshot views checked long after they were taken. Seeds are fixed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "test_db.h"
#include "test_dir.h"

#define NKEYS 1500
#define NSNAPS 4

static char dir[256];

typedef struct model {
    char *val[NKEYS]; /* NULL: absent */
} model;

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Keys sort in index order; the first 3 characters are the prefix. */
static int key_of(char *buf, int i) { return snprintf(buf, 32, "p%02d:%06d", i % 40, i); }

static int key_index(const void *k, size_t n) {
    char buf[32];
    if (n >= sizeof buf) return -1;
    memcpy(buf, k, n);
    buf[n] = 0;
    return atoi(buf + 4);
}

static size_t prefix3(const void *key, size_t klen) {
    (void)key;
    return klen >= 3 ? 3 : SIZE_MAX;
}

/* Key order is "pNN:" then index, so sort indexes the same way. */
static int model_cmp(const void *a, const void *b) {
    char ka[32], kb[32];
    key_of(ka, *(const int *)a);
    key_of(kb, *(const int *)b);
    return strcmp(ka, kb);
}

static int order[NKEYS]; /* indexes in key order */

static void model_copy(model *dst, const model *src) {
    for (int i = 0; i < NKEYS; i++) dst->val[i] = src->val[i] ? strdup(src->val[i]) : NULL;
}

static void model_free(model *m) {
    for (int i = 0; i < NKEYS; i++) free(m->val[i]);
}

static void check_pos(bkv_iter *it, const model *m, int pos) {
    if (pos < 0 || pos >= NKEYS) {
        if (bkv_iter_valid(it)) {
            size_t kl;
            const char *k = bkv_iter_key(it, &kl);
            fail_msg("iterator valid at %.*s, model says end", (int)kl, k);
        }
        assert_int_equal(bkv_iter_status(it), BKV_OK);
        return;
    }
    assert_true(bkv_iter_valid(it));
    size_t kl, vl;
    const char *k = bkv_iter_key(it, &kl);
    const char *v = bkv_iter_value(it, &vl);
    char want[32];
    key_of(want, order[pos]);
    if (kl != strlen(want) || memcmp(k, want, kl) != 0) fail_msg("at %.*s, model says %s", (int)kl, k, want);
    const char *mv = m->val[order[pos]];
    assert_non_null(mv);
    assert_int_equal(vl, strlen(mv));
    assert_memory_equal(v, mv, vl);
}

static int next_pos(const model *m, int pos, int lo, int hi) {
    for (pos++; pos < hi; pos++)
        if (m->val[order[pos]]) return pos;
    (void)lo;
    return NKEYS;
}

static int prev_pos(const model *m, int pos, int lo) {
    for (pos--; pos >= lo; pos--)
        if (m->val[order[pos]]) return pos;
    return -1;
}

/* Full scans both ways, random seeks with next/prev walks, bounded scans. */
static void check_iterators(bkv_db *db, const bkv_snapshot *snap, const model *m, uint64_t *rng) {
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.snapshot = snap;
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, &ro, &it), BKV_OK);
    int pos = next_pos(m, -1, 0, NKEYS);
    for (bkv_iter_seek_to_first(it); pos < NKEYS; pos = next_pos(m, pos, 0, NKEYS), bkv_iter_next(it)) check_pos(it, m, pos);
    check_pos(it, m, NKEYS);
    pos = prev_pos(m, NKEYS, 0);
    for (bkv_iter_seek_to_last(it); pos >= 0; pos = prev_pos(m, pos, 0), bkv_iter_prev(it)) check_pos(it, m, pos);
    check_pos(it, m, -1);
    for (int s = 0; s < 30; s++) {
        int target = (int)(rng_next(rng) % NKEYS);
        /* Seek to the position of key index target in key order. */
        int tpos = 0;
        while (order[tpos] != target) tpos++;
        char key[32];
        key_of(key, target);
        bkv_iter_seek(it, key, strlen(key));
        pos = m->val[order[tpos]] ? tpos : next_pos(m, tpos, 0, NKEYS);
        check_pos(it, m, pos);
        for (int step = 0; step < 20 && pos >= 0 && pos < NKEYS; step++) {
            if (rng_next(rng) % 2) {
                bkv_iter_next(it);
                pos = next_pos(m, pos, 0, NKEYS);
            } else {
                bkv_iter_prev(it);
                pos = prev_pos(m, pos, 0);
            }
            check_pos(it, m, pos);
        }
    }
    bkv_iter_destroy(it);

    /* Bounded: [lo, hi) in key order. */
    int lo = (int)(rng_next(rng) % NKEYS), hi = (int)(rng_next(rng) % NKEYS);
    if (lo > hi) {
        int t = lo;
        lo = hi;
        hi = t;
    }
    char lok[32], hik[32];
    key_of(lok, order[lo]);
    key_of(hik, order[hi]);
    ro.lower_bound = lok;
    ro.lower_bound_len = strlen(lok);
    ro.upper_bound = hik;
    ro.upper_bound_len = strlen(hik);
    assert_int_equal(bkv_iter_create(db, &ro, &it), BKV_OK);
    pos = m->val[order[lo]] ? lo : next_pos(m, lo, lo, hi);
    if (pos >= hi) pos = NKEYS;
    for (bkv_iter_seek_to_first(it); pos < NKEYS; bkv_iter_next(it)) {
        check_pos(it, m, pos);
        pos = next_pos(m, pos, lo, hi);
        if (pos >= hi) pos = NKEYS;
    }
    check_pos(it, m, NKEYS);
    pos = prev_pos(m, hi, lo);
    for (bkv_iter_seek_to_last(it); pos >= 0; bkv_iter_prev(it)) {
        check_pos(it, m, pos);
        pos = prev_pos(m, pos, lo);
    }
    check_pos(it, m, -1);
    bkv_iter_destroy(it);
}

static void check_prefix_scan(bkv_db *db, const model *m, int prefix) {
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.prefix_same_as_start = 1;
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, &ro, &it), BKV_OK);
    char p[8];
    snprintf(p, sizeof p, "p%02d", prefix);
    int expect = 0, got = 0;
    for (int i = prefix; i < NKEYS; i += 40) expect += m->val[i] != NULL;
    for (bkv_iter_seek(it, p, 3); bkv_iter_valid(it); bkv_iter_next(it)) {
        size_t kl;
        const char *k = bkv_iter_key(it, &kl);
        assert_memory_equal(k, p, 3);
        assert_non_null(m->val[key_index(k, kl)]);
        got++;
    }
    assert_int_equal(bkv_iter_status(it), BKV_OK);
    assert_int_equal(got, expect);
    bkv_iter_destroy(it);
}


static void run_model(bkv_options *o, const char *name, int ops, uint64_t seed) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    model m = {{0}};
    model snap_model[NSNAPS];
    const bkv_snapshot *snaps[NSNAPS] = {0};
    bkv_db *db;
    assert_int_equal(bkv_open(path, o, &db), BKV_OK);
    uint64_t rng = seed;
    for (int op = 0; op < ops; op++) {
        uint64_t r = rng_next(&rng);
        int k = (int)(r % NKEYS);
        char key[32], val[64];
        key_of(key, k);
        int kind = (int)((r >> 32) % 1000);
        if (kind < 600) {
            snprintf(val, sizeof val, "v%d.%d", k, op);
            assert_int_equal(bkv_put(db, NULL, key, strlen(key), val, strlen(val)), BKV_OK);
            free(m.val[k]);
            m.val[k] = strdup(val);
        } else if (kind < 850) {
            assert_int_equal(bkv_delete(db, NULL, key, strlen(key)), BKV_OK);
            free(m.val[k]);
            m.val[k] = NULL;
        } else if (kind < 995) {
            void *v;
            size_t n;
            int rc = bkv_get(db, NULL, key, strlen(key), &v, &n);
            if (m.val[k]) {
                assert_int_equal(rc, BKV_OK);
                assert_memory_equal(v, m.val[k], n);
                bkv_free(v);
            } else {
                assert_int_equal(rc, BKV_NOTFOUND);
            }
        } else {
            /* Replace a snapshot, checking the old one first. */
            int s = (int)((r >> 20) % NSNAPS);
            if (snaps[s]) {
                check_iterators(db, snaps[s], &snap_model[s], &rng);
                bkv_snapshot_release(db, snaps[s]);
                model_free(&snap_model[s]);
            }
            snaps[s] = bkv_snapshot_create(db);
            assert_non_null(snaps[s]);
            model_copy(&snap_model[s], &m);
        }
        if (op % 5000 == 4999) {
            check_iterators(db, NULL, &m, &rng);
            if (o->prefix_extractor) check_prefix_scan(db, &m, (int)(r % 40));
        }
        if (op % 20000 == 19999) {
            /* Reopening drops the snapshots. */
            for (int s = 0; s < NSNAPS; s++)
                if (snaps[s]) {
                    check_iterators(db, snaps[s], &snap_model[s], &rng);
                    bkv_snapshot_release(db, snaps[s]);
                    model_free(&snap_model[s]);
                    snaps[s] = NULL;
                }
            assert_int_equal(bkv_close(db), BKV_OK);
            assert_int_equal(bkv_open(path, o, &db), BKV_OK);
        }
    }
    for (int s = 0; s < NSNAPS; s++)
        if (snaps[s]) {
            check_iterators(db, snaps[s], &snap_model[s], &rng);
            bkv_snapshot_release(db, snaps[s]);
            model_free(&snap_model[s]);
        }
    check_iterators(db, NULL, &m, &rng);
    assert_int_equal(bkv_close(db), BKV_OK);
    model_free(&m);
}

static bkv_options small_options(void) {
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 16 * 1024;
    o.block_size = 512;
    o.block_cache_size = 1 << 20;
    return o;
}

static void iterators_and_snapshots_match_model(void **state) {
    (void)state;
    bkv_options o = small_options();
    o.max_bytes_for_level_base = 64 * 1024;
    o.target_file_size = 16 * 1024;
    o.level_size_multiplier = 4;
    run_model(&o, "leveled", 60000, 99);
}

static void tiered_iterators_and_snapshots_match_model(void **state) {
    (void)state;
    bkv_options o = small_options();
    o.compaction_style = BKV_COMPACTION_TIERED;
    run_model(&o, "tiered", 60000, 1234);
}

static void prefix_iteration_skips_tables(void **state) {
    (void)state;
    bkv_options o = small_options();
    o.prefix_extractor = prefix3;
    run_model(&o, "prefix", 30000, 7);
    /* Every table spans p00..p39 but holds the keys of one prefix only:
     * all 40 are in range of a p17 seek, and their filters rule out 39. */
    char path[300];
    snprintf(path, sizeof path, "%s/prefix-skip", dir);
    o.level0_compaction_trigger = o.level0_slowdown_trigger = o.level0_stop_trigger = 1 << 20;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int p = 0; p < 40; p++) {
        char key[32];
        snprintf(key, sizeof key, "p00:edge%02d", p);
        assert_int_equal(bkv_put(db, NULL, key, strlen(key), "v", 1), BKV_OK);
        snprintf(key, sizeof key, "p39:edge%02d", p);
        assert_int_equal(bkv_put(db, NULL, key, strlen(key), "v", 1), BKV_OK);
        for (int i = 0; i < 50; i++) {
            snprintf(key, sizeof key, "p%02d:%06d", p, i);
            assert_int_equal(bkv_put(db, NULL, key, strlen(key), "v", 1), BKV_OK);
        }
        assert_int_equal(bkv_flush(db), BKV_OK);
    }
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.prefix_same_as_start = 1;
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, &ro, &it), BKV_OK);
    uint64_t probes = test_counter(db, "filter-probes"), negatives = test_counter(db, "filter-negatives");
    int n = 0;
    for (bkv_iter_seek(it, "p17", 3); bkv_iter_valid(it); bkv_iter_next(it)) n++;
    assert_int_equal(n, 50);
    /* One probe per table for the whole scan, and nearly all say no. */
    assert_int_equal(test_counter(db, "filter-probes") - probes, 40);
    assert_true(test_counter(db, "filter-negatives") - negatives >= 37);
    bkv_iter_destroy(it);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* Two flushed runs holding every key, below the level-0 trigger: nothing
 * is due by size, but once writes pause the seeks pay a block read in each, so once they
 * have paid more than the newer run is worth it is compacted down (the
 * counter says why), and the keys read as before. */
static void seeks_compact_the_runs_they_pay_for(void **state) {
    (void)state;
    bkv_options o = small_options();
    o.write_buffer_size = 1 << 20;
    char path[300];
    snprintf(path, sizeof path, "%s/seek-compact", dir);
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < NKEYS; i++) {
            char key[32];
            key_of(key, i);
            assert_int_equal(bkv_put(db, NULL, key, strlen(key), round ? "new" : "old", 3), BKV_OK);
        }
        assert_int_equal(bkv_flush(db), BKV_OK);
    }
    char *files = bkv_property(db, "bloomkv.num-files-at-level0");
    assert_string_equal(files, "2");
    free(files);
    assert_int_equal(test_counter(db, "seek-compactions"), 0);
    /* Reads charge seeks only once writes have paused for a second. */
    nanosleep(&(struct timespec){1, 100000000}, NULL);
    uint64_t rng = 5;
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
    for (int s = 0; s < 5000; s++) {
        char key[32];
        key_of(key, (int)(rng_next(&rng) % NKEYS));
        bkv_iter_seek(it, key, strlen(key));
        assert_true(bkv_iter_valid(it));
        size_t kl, vl;
        assert_memory_equal(bkv_iter_key(it, &kl), key, strlen(key));
        assert_memory_equal(bkv_iter_value(it, &vl), "new", 3);
    }
    bkv_iter_destroy(it);
    assert_int_equal(bkv_compact(db), BKV_OK);
    assert_int_equal(test_counter(db, "seek-compactions"), 1);
    files = bkv_property(db, "bloomkv.num-files-at-level0");
    assert_string_equal(files, "0");
    free(files);
    assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
    int n = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it), n++) {
        size_t kl, vl;
        char want[32];
        key_of(want, order[n]);
        assert_memory_equal(bkv_iter_key(it, &kl), want, strlen(want));
        assert_memory_equal(bkv_iter_value(it, &vl), "new", 3);
    }
    assert_int_equal(n, NKEYS);
    bkv_iter_destroy(it);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static int setup(void **state) {
    (void)state;
    test_make_dir(dir, sizeof dir, "iter");
    for (int i = 0; i < NKEYS; i++) order[i] = i;
    qsort(order, NKEYS, sizeof order[0], model_cmp);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    test_remove_dir(dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(iterators_and_snapshots_match_model),
        cmocka_unit_test(tiered_iterators_and_snapshots_match_model),
        cmocka_unit_test(prefix_iteration_skips_tables),
        cmocka_unit_test(seeks_compact_the_runs_they_pay_for),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
