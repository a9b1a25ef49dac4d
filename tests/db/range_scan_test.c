/* Range filters in the engine (range_filter_bits_per_key): iterators with
 * bounds and bkv_range_empty agree with a model whatever the keys (fixed
 * eight-byte keys, variable-length keys sharing prefixes, the ends of the
 * key space) through flushes, compactions, reopens and snapshots; an
 * empty range reads (almost) no block; a damaged range filter reads as
 * "maybe". Seeds are fixed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>

#include "bloomkv.h"
#include "table/table.h"
#include "test_db.h"
#include "test_dir.h"

TEST_DIR_FIXTURE("rangescan")

#define KEYS 2000

static uint64_t next_random(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static bkv_db *open_with(const char *path, double range_bits) {
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 1;
    o.write_buffer_size = 16 * 1024;
    o.level0_compaction_trigger = 2;
    o.range_filter_bits_per_key = range_bits;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    return db;
}

static bkv_db *open_db(const char *path) { return open_with(path, 16); }

/* The key set: key i as bytes. Shapes mix: 8-byte big-endian numbers,
 * short and long keys sharing an 8-byte prefix, the smallest and largest. */
typedef struct key {
    uint8_t b[24];
    size_t n;
} key;

static void make_key(int i, uint64_t *rnd, key *k) {
    switch (i % 4) {
    case 0: /* a number, big-endian */
        k->n = 8;
        for (int j = 0; j < 8; j++) k->b[j] = (uint8_t)(next_random(rnd) >> (8 * j));
        break;
    case 1: /* a shared eight-byte prefix, then more */
        memcpy(k->b, "prefix!!", 8);
        k->n = 8 + (size_t)(next_random(rnd) % 12);
        for (size_t j = 8; j < k->n; j++) k->b[j] = (uint8_t)next_random(rnd);
        break;
    case 2: /* short keys */
        k->n = 1 + (size_t)(next_random(rnd) % 4);
        for (size_t j = 0; j < k->n; j++) k->b[j] = (uint8_t)next_random(rnd);
        break;
    default: /* the ends */
        k->n = 8 + (size_t)(i % 3);
        memset(k->b, i % 8 == 3 ? 0x00 : 0xff, k->n);
        break;
    }
}

static int key_cmp(const key *a, const key *b) {
    size_t n = a->n < b->n ? a->n : b->n;
    int c = memcmp(a->b, b->b, n);
    return c ? c : (a->n > b->n) - (a->n < b->n);
}

static int cmp_keys(const void *a, const void *b) { return key_cmp(a, b); }

/* What the model holds in [lo, hi): count. */
static int model_count(const key *keys, const int *present, int n, const key *lo, const key *hi) {
    int c = 0;
    for (int i = 0; i < n; i++)
        if (present[i] && key_cmp(&keys[i], lo) >= 0 && key_cmp(&keys[i], hi) < 0) c++;
    return c;
}

static int db_count(bkv_db *db, const bkv_snapshot *s, const key *lo, const key *hi, int *empty) {
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.snapshot = s;
    assert_int_equal(bkv_range_empty(db, &ro, lo->b, lo->n, hi->b, hi->n, empty), BKV_OK);
    ro.lower_bound = lo->b;
    ro.lower_bound_len = lo->n;
    ro.upper_bound = hi->b;
    ro.upper_bound_len = hi->n;
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, &ro, &it), BKV_OK);
    int c = 0, back = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) c++;
    for (bkv_iter_seek_to_last(it); bkv_iter_valid(it); bkv_iter_prev(it)) back++;
    assert_int_equal(bkv_iter_status(it), BKV_OK);
    assert_int_equal(c, back);
    bkv_iter_destroy(it);
    return c;
}

/* A query range: around a key of the set (just past it, the correlated
 * case), or anywhere. */
static void make_range(const key *keys, int n, uint64_t *rnd, key *lo, key *hi) {
    key a, b;
    if (next_random(rnd) % 2) {
        a = keys[next_random(rnd) % (uint64_t)n];
        if (a.n < sizeof a.b) a.b[a.n++] = 0; /* the first key after it */
    } else {
        make_key((int)(next_random(rnd) % 4), rnd, &a);
    }
    b = a;
    /* A short span: the last byte raised a little, or one of the keys. */
    if (next_random(rnd) % 3) b.b[b.n - 1] = (uint8_t)(b.b[b.n - 1] + 1 + next_random(rnd) % 4);
    else b = keys[next_random(rnd) % (uint64_t)n];
    if (key_cmp(&a, &b) <= 0) *lo = a, *hi = b;
    else *lo = b, *hi = a;
}

static void ranges_match_the_model(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/model", dir);
    bkv_db *db = open_db(path);
    static key keys[KEYS];
    static int present[KEYS], at_snap[KEYS];
    uint64_t rnd = 11;
    for (int i = 0; i < KEYS; i++) make_key(i, &rnd, &keys[i]);
    qsort(keys, KEYS, sizeof *keys, cmp_keys);
    int n = 0;
    for (int i = 0; i < KEYS; i++)
        if (n == 0 || key_cmp(&keys[n - 1], &keys[i])) keys[n++] = keys[i];
    const bkv_snapshot *snap = NULL;
    for (int round = 0; round < 12; round++) {
        for (int w = 0; w < 600; w++) {
            int i = (int)(next_random(&rnd) % (uint64_t)n);
            if (next_random(&rnd) % 4) {
                assert_int_equal(bkv_put(db, NULL, keys[i].b, keys[i].n, "v", 1), BKV_OK);
                present[i] = 1;
            } else {
                assert_int_equal(bkv_delete(db, NULL, keys[i].b, keys[i].n), BKV_OK);
                present[i] = 0;
            }
        }
        if (round % 3 == 1) assert_int_equal(bkv_flush(db), BKV_OK);
        if (round % 4 == 2) assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
        if (round == 6) {
            if (snap) bkv_snapshot_release(db, snap);
            snap = bkv_snapshot_create(db);
            memcpy(at_snap, present, sizeof present);
        }
        if (round == 9) {
            if (snap) bkv_snapshot_release(db, snap);
            snap = NULL;
            assert_int_equal(bkv_close(db), BKV_OK);
            db = open_db(path);
        }
        for (int q = 0; q < 300; q++) {
            key lo, hi;
            make_range(keys, n, &rnd, &lo, &hi);
            int empty, want = model_count(keys, present, n, &lo, &hi);
            int got = db_count(db, NULL, &lo, &hi, &empty);
            if (got != want || empty != (want == 0)) fail_msg("round %d: %d keys in range, model %d", round, got, want);
            if (snap) {
                want = model_count(keys, at_snap, n, &lo, &hi);
                got = db_count(db, snap, &lo, &hi, &empty);
                if (got != want || empty != (want == 0)) fail_msg("snapshot: %d keys, model %d", got, want);
            }
        }
    }
    if (snap) bkv_snapshot_release(db, snap);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void put_be64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (56 - 8 * i));
}

/* Keys spread over the 64-bit space; empty ranges of 1,024 keys between
 * them read no block but where the filter errs (at most 1024 / 2^20 of
 * them at 22 bits per key). */
static void empty_ranges_read_no_block(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/spread", dir);
    bkv_db *db = open_with(path, 22);
    const uint64_t step = UINT64_C(1) << 44; /* 2^20 keys over 2^64: 2^44 apart */
    for (uint64_t i = 0; i < 20000; i++) {
        uint8_t k[8];
        put_be64(k, i * step);
        assert_int_equal(bkv_put(db, NULL, k, 8, "value", 5), BKV_OK);
    }
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    uint64_t rnd = 5, before = test_counter(db, "blocks-read"), negatives = test_counter(db, "range-filter-negatives");
    int queries = 2000;
    for (int q = 0; q < queries; q++) {
        uint64_t base = (next_random(&rnd) % 20000) * step + 1 + next_random(&rnd) % (step / 2);
        uint8_t lo[8], hi[8];
        put_be64(lo, base);
        put_be64(hi, base + 1024);
        int empty;
        assert_int_equal(bkv_range_empty(db, NULL, lo, 8, hi, 8, &empty), BKV_OK);
        assert_true(empty);
    }
    double blocks = (double)(test_counter(db, "blocks-read") - before) / queries;
    assert_true(blocks <= 0.05);
    assert_true(test_counter(db, "range-filter-negatives") - negatives >= (uint64_t)queries * 9 / 10);
    /* A range holding a key is never skipped. */
    for (int q = 0; q < 500; q++) {
        uint64_t i = next_random(&rnd) % 20000;
        uint8_t lo[8], hi[8];
        put_be64(lo, i * step - (i ? 100 : 0));
        put_be64(hi, i * step + 1);
        int empty;
        assert_int_equal(bkv_range_empty(db, NULL, lo, 8, hi, 8, &empty), BKV_OK);
        assert_false(empty);
    }
    assert_int_equal(bkv_range_empty(db, NULL, NULL, 0, NULL, 0, &(int){0}), BKV_OK);
    assert_int_equal(bkv_range_empty(NULL, NULL, NULL, 0, NULL, 0, &(int){0}), BKV_INVALID);
    assert_int_equal(bkv_close(db), BKV_OK);

    /* Every table's range filter damaged: answers stay exact, reads cost more. */
    DIR *d = opendir(path);
    int damaged = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!strstr(de->d_name, ".sst")) continue;
        char t[600];
        snprintf(t, sizeof t, "%s/%s", path, de->d_name);
        bkv_table *tb;
        bkv_err e;
        assert_int_equal(bkv_table_open(bkv_env_posix(), t, 1, NULL, NULL, &tb, &e), BKV_OK);
        const bkv_table_props *p = bkv_table_properties(tb);
        uint64_t at = p->range_filter_offset + p->range_filter_bytes / 2, has = p->range_filter_bytes;
        bkv_table_close(tb);
        if (has) damaged += test_xor_byte(t, (long)at, 0x01) == 0;
    }
    closedir(d);
    assert_true(damaged > 0);
    db = open_with(path, 22);
    for (int q = 0; q < 200; q++) {
        uint64_t i = next_random(&rnd) % 20000;
        uint8_t lo[8], hi[8];
        put_be64(lo, i * step + 1);
        put_be64(hi, i * step + 1025);
        int empty;
        assert_int_equal(bkv_range_empty(db, NULL, lo, 8, hi, 8, &empty), BKV_OK);
        assert_true(empty);
        put_be64(lo, i * step);
        assert_int_equal(bkv_range_empty(db, NULL, lo, 8, hi, 8, &empty), BKV_OK);
        assert_false(empty);
    }
    assert_true(test_counter(db, "filter-corrupt") > 0);
    assert_int_equal(bkv_close(db), BKV_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ranges_match_the_model),
        cmocka_unit_test(empty_ranges_read_no_block),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
