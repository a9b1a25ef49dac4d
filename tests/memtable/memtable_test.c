#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "memtable/memtable.h"
#include "util/hash.h"
#include "util/ikey.h"

static void put(bkv_memtable *m, uint64_t seq, unsigned type, const char *k, const char *v) {
    assert_int_equal(bkv_memtable_add(m, seq, type, k, strlen(k), v, v ? strlen(v) : 0, bkv_hash_bytes(k, strlen(k))),
                     BKV_OK);
}

static int get(bkv_memtable *m, const char *k, uint64_t snap, unsigned *type, char *out) {
    const uint8_t *v;
    size_t vlen;
    int neg;
    int r = bkv_memtable_get(m, k, strlen(k), bkv_hash_bytes(k, strlen(k)), snap, type, &v, &vlen, &neg, NULL);
    if (r && out) {
        memcpy(out, v, vlen);
        out[vlen] = 0;
    }
    return r;
}

static void versions_and_snapshots(void **state) {
    (void)state;
    bkv_memtable *m = bkv_memtable_new(100, NULL);
    put(m, 1, BKV_TYPE_VALUE, "a", "a1");
    put(m, 2, BKV_TYPE_VALUE, "b", "b2");
    put(m, 3, BKV_TYPE_VALUE, "a", "a3");
    put(m, 4, BKV_TYPE_DELETION, "b", NULL);
    unsigned type;
    char buf[16];
    assert_int_equal(get(m, "a", 10, &type, buf), 1);
    assert_string_equal(buf, "a3");
    assert_int_equal(get(m, "a", 2, &type, buf), 1);
    assert_string_equal(buf, "a1");
    assert_int_equal(get(m, "a", 0, &type, buf), 0);
    assert_int_equal(get(m, "b", 10, &type, NULL), 1);
    assert_int_equal(type, BKV_TYPE_DELETION);
    assert_int_equal(get(m, "b", 3, &type, buf), 1);
    assert_int_equal(type, BKV_TYPE_VALUE);
    assert_int_equal(get(m, "c", 10, &type, NULL), 0);
    assert_int_equal(get(m, "", 10, &type, NULL), 0);
    bkv_memtable_unref(m);
}

static void iteration_is_sorted_newest_first(void **state) {
    (void)state;
    bkv_memtable *m = bkv_memtable_new(10000, NULL);
    uint64_t rng = 7;
    for (uint64_t seq = 1; seq <= 5000; seq++) {
        char k[16];
        snprintf(k, sizeof k, "k%04u", (unsigned)(bkv_splitmix64(&rng) % 1000));
        put(m, seq, BKV_TYPE_VALUE, k, "v");
    }
    assert_true(bkv_memtable_entries(m) == 5000);
    bkv_memtable_iter it;
    bkv_memtable_iter_init(&it, m);
    size_t n = 0, plen = 0;
    const uint8_t *prev = NULL;
    for (bkv_memtable_iter_first(&it); bkv_memtable_iter_valid(&it); bkv_memtable_iter_next(&it), n++) {
        size_t len;
        const uint8_t *k = bkv_memtable_iter_ikey(&it, &len);
        if (prev) assert_true(bkv_ikey_compare(prev, plen, k, len) < 0);
        prev = k;
        plen = len;
    }
    assert_int_equal(n, 5000);
    /* Backwards too. */
    n = 0;
    for (bkv_memtable_iter_last(&it); bkv_memtable_iter_valid(&it); bkv_memtable_iter_prev(&it)) n++;
    assert_int_equal(n, 5000);
    bkv_memtable_unref(m);
}

/* Fills a memtable of pool with count keys of round r, each holding its
 * key as value, and checks every one reads back. */
static void fill_and_check(bkv_arena_pool *pool, int count, int r) {
    bkv_memtable *m = bkv_memtable_new(10000, pool);
    char k[32], v[200];
    for (int i = 0; i < count; i++) {
        snprintf(k, sizeof k, "r%d-%05d", r, i * 7919 % count);
        snprintf(v, sizeof v, "%s-%0150d", k, i);
        put(m, (uint64_t)i + 1, BKV_TYPE_VALUE, k, v);
    }
    for (int i = 0; i < count; i++) {
        char want[200];
        snprintf(k, sizeof k, "r%d-%05d", r, i * 7919 % count);
        snprintf(want, sizeof want, "%s-%0150d", k, i);
        unsigned type;
        assert_int_equal(get(m, k, UINT64_MAX >> 8, &type, v), 1);
        assert_string_equal(v, want);
    }
    bkv_memtable_unref(m);
}

/* A freed memtable's arena blocks go to the pool up to its limit and the
 * next memtable reuses them, their old bytes no matter; the pool outlives
 * its owner's reference while a memtable holds one. */
static void arena_blocks_are_reused_through_the_pool(void **state) {
    (void)state;
    const size_t limit = 1u << 20;
    bkv_arena_pool *pool = bkv_arena_pool_new(limit);
    assert_non_null(pool);
    assert_int_equal(bkv_arena_pool_bytes(pool), 0);
    fill_and_check(pool, 20000, 1); /* about 4 MB: more than the pool keeps */
    size_t kept = bkv_arena_pool_bytes(pool);
    assert_true(kept > limit / 2 && kept <= limit);
    fill_and_check(pool, 1000, 2); /* takes blocks from the pool, gives them back */
    assert_int_equal(bkv_arena_pool_bytes(pool), kept);
    bkv_memtable *m = bkv_memtable_new(100, pool);
    assert_true(bkv_arena_pool_bytes(pool) < kept); /* the head node took a block */
    bkv_arena_pool_unref(pool);
    put(m, 1, BKV_TYPE_VALUE, "k", "v");
    bkv_memtable_unref(m); /* frees the pool: ASan reports a leak or a use after free */
}

static void absent_keys_mostly_answered_by_filter(void **state) {
    (void)state;
    bkv_memtable *m = bkv_memtable_new(10000, NULL);
    for (int i = 0; i < 10000; i++) {
        char k[16];
        snprintf(k, sizeof k, "in%d", i);
        put(m, (uint64_t)i + 1, BKV_TYPE_VALUE, k, "v");
    }
    int negatives = 0;
    for (int i = 0; i < 10000; i++) {
        char k[16];
        snprintf(k, sizeof k, "out%d", i);
        unsigned type;
        const uint8_t *v;
        size_t vlen;
        int neg;
        assert_int_equal(bkv_memtable_get(m, k, strlen(k), bkv_hash_bytes(k, strlen(k)), 1000000, &type, &v, &vlen, &neg, NULL), 0);
        negatives += neg;
    }
    assert_true(negatives > 9800);
    bkv_memtable_unref(m);
}

/* Adds from several threads at once (as the writers of a group make
 * them), with a reader walking the list meanwhile: every entry lands, in
 * order, and the reader only ever sees a sorted list. */
#define ADDERS 4
#define PER_ADDER 20000

typedef struct adder {
    bkv_memtable *m;
    int id;
    int failed;
} adder;

static void *add_many(void *arg) {
    adder *a = arg;
    for (uint64_t i = 0; i < PER_ADDER; i++) {
        /* Keys shared between threads (i % 500), each version its own sequence. */
        char k[24], v[24];
        snprintf(k, sizeof k, "k%03u", (unsigned)(i % 500));
        snprintf(v, sizeof v, "%d-%u", a->id, (unsigned)i);
        uint64_t seq = i * ADDERS + (uint64_t)a->id + 1;
        if (bkv_memtable_add_concurrent(a->m, seq, BKV_TYPE_VALUE, k, strlen(k), v, strlen(v),
                                        bkv_hash_bytes(k, strlen(k))))
            a->failed = 1;
    }
    bkv_memtable_count_added(a->m, PER_ADDER); /* concurrent adds leave the count to their caller */
    return NULL;
}

static int walk_is_sorted(const bkv_memtable *m, size_t *count) {
    bkv_memtable_iter it;
    bkv_memtable_iter_init(&it, m);
    size_t plen = 0;
    const uint8_t *prev = NULL;
    *count = 0;
    for (bkv_memtable_iter_first(&it); bkv_memtable_iter_valid(&it); bkv_memtable_iter_next(&it), (*count)++) {
        size_t len;
        const uint8_t *k = bkv_memtable_iter_ikey(&it, &len);
        if (prev && bkv_ikey_compare(prev, plen, k, len) >= 0) return 0;
        prev = k;
        plen = len;
    }
    return 1;
}

static void *walk_while_adding(void *arg) {
    const bkv_memtable *m = arg;
    size_t n = 0;
    while (n < (size_t)ADDERS * PER_ADDER) {
        size_t seen;
        if (!walk_is_sorted(m, &seen) || seen < n) return (void *)1;
        n = seen;
    }
    return NULL;
}

static void concurrent_adds(void **state) {
    (void)state;
    bkv_memtable *m = bkv_memtable_new(ADDERS * PER_ADDER, NULL);
    pthread_t t[ADDERS], r;
    adder a[ADDERS];
    pthread_create(&r, NULL, walk_while_adding, m);
    for (int i = 0; i < ADDERS; i++) {
        a[i] = (adder){m, i, 0};
        pthread_create(&t[i], NULL, add_many, &a[i]);
    }
    for (int i = 0; i < ADDERS; i++) {
        pthread_join(t[i], NULL);
        assert_false(a[i].failed);
    }
    void *res;
    pthread_join(r, &res);
    assert_null(res);
    size_t n;
    assert_true(walk_is_sorted(m, &n));
    assert_int_equal(n, ADDERS * PER_ADDER);
    assert_int_equal(bkv_memtable_entries(m), ADDERS * PER_ADDER);
    /* Every version is found at its own snapshot, and the newest at all. */
    unsigned type;
    char buf[24];
    uint64_t newest = (uint64_t)ADDERS * PER_ADDER;
    for (uint64_t seq = newest - 2 * ADDERS * 500 + 1; seq <= newest; seq++) {
        uint64_t i = (seq - 1) / ADDERS;
        char k[24], want[24];
        snprintf(k, sizeof k, "k%03u", (unsigned)(i % 500));
        snprintf(want, sizeof want, "%d-%u", (int)((seq - 1) % ADDERS), (unsigned)i);
        assert_int_equal(get(m, k, seq, &type, buf), 1);
        assert_string_equal(buf, want);
    }
    bkv_memtable_unref(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(versions_and_snapshots),
        cmocka_unit_test(iteration_is_sorted_newest_first),
        cmocka_unit_test(absent_keys_mostly_answered_by_filter),
        cmocka_unit_test(arena_blocks_are_reused_through_the_pool),
        cmocka_unit_test(concurrent_adds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
