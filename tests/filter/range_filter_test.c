/* The range filter (BKV_FILTER_RANGE): never a false negative, over key
 * sets built to be hard (dense runs, shared prefixes, the ends of the
 * universe, duplicates); false positives within their bound for uniform
 * and for correlated ranges (starting just past a key); the serialized
 * form round-trips, damage is refused, and a trusted open of garbage
 * probes without reading outside the payload. Seeds are fixed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bloomkv_filter.h"

static uint64_t next_random(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

enum { UNIFORM, DENSE, PREFIXED, ENDS, DUPLICATES, SHAPES };

static size_t make_keys(int shape, uint64_t *keys, size_t n, uint64_t *rnd) {
    for (size_t i = 0; i < n; i++) {
        switch (shape) {
        case UNIFORM: keys[i] = next_random(rnd); break;
        case DENSE: keys[i] = 1000000 + i; break;                            /* one run of consecutive keys */
        case PREFIXED: keys[i] = 0xABCD000000000000ULL | (next_random(rnd) & 0xFFFFF); break; /* a shared prefix */
        case ENDS: keys[i] = i % 2 ? UINT64_MAX - i / 2 : i / 2; break;     /* both ends of the universe */
        default: keys[i] = next_random(rnd) % (n / 8 + 1) * 977; break;     /* many duplicates */
        }
    }
    return n;
}

/* Whether the sorted keys hold one in [lo, hi]. */
static int holds(const uint64_t *sorted, size_t n, uint64_t lo, uint64_t hi) {
    size_t a = 0, b = n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (sorted[mid] < lo) a = mid + 1;
        else b = mid;
    }
    return a < n && sorted[a] <= hi;
}

static void never_a_false_negative(void **state) {
    (void)state;
    static const double bits[] = {3, 4, 8, 12, 16, 20, 24, 40, 66};
    static uint64_t keys[20000], sorted[20000];
    uint64_t rnd = 42;
    for (int shape = 0; shape < SHAPES; shape++)
        for (size_t b = 0; b < sizeof bits / sizeof bits[0]; b++)
            for (size_t n = 0; n <= 20000; n = n ? n * 10 : 2) {
                make_keys(shape, keys, n, &rnd);
                bkv_filter *f;
                assert_int_equal(bkv_filter_build_range(keys, n, bits[b], (uint32_t)b, &f), BKV_OK);
                memcpy(sorted, keys, n * sizeof *keys);
                qsort(sorted, n, sizeof *sorted, cmp_u64);
                for (size_t i = 0; i < n; i++) {
                    if (!bkv_filter_may_intersect(f, keys[i], keys[i]))
                        fail_msg("shape %d, %g bits, %zu keys: key %llu missed", shape, bits[b], n,
                                 (unsigned long long)keys[i]);
                }
                /* Ranges that hold a key, of every length, around it. */
                for (int q = 0; q < 2000 && n; q++) {
                    uint64_t k = keys[next_random(&rnd) % n], before = next_random(&rnd) % 5000,
                             after = next_random(&rnd) % 5000;
                    uint64_t lo = k >= before ? k - before : 0, hi = UINT64_MAX - k >= after ? k + after : UINT64_MAX;
                    assert_true(bkv_filter_may_intersect(f, lo, hi));
                }
                assert_true(bkv_filter_may_intersect(f, 0, UINT64_MAX) == (n > 0));
                if (n == 0) assert_false(bkv_filter_may_intersect(f, 5, 500));
                assert_false(bkv_filter_may_intersect(f, 10, 9)); /* reversed: empty */
                (void)holds;
                bkv_filter_destroy(f);
            }
}

/* Empty ranges of length L, uniform or starting just past a key: the
 * share answered "maybe" stays within the bound (with room for chance:
 * 20,000 queries a point). */
static void false_positives_within_the_bound(void **state) {
    (void)state;
    enum { N = 50000, QUERIES = 20000 };
    static uint64_t keys[N], sorted[N];
    uint64_t rnd = 7;
    for (size_t i = 0; i < N; i++) keys[i] = next_random(&rnd);
    memcpy(sorted, keys, sizeof keys);
    qsort(sorted, N, sizeof *sorted, cmp_u64);
    static const double bits[] = {10, 14, 18};
    static const uint64_t lens[] = {1, 16, 256, 1024};
    for (size_t b = 0; b < 3; b++) {
        bkv_filter *f;
        assert_int_equal(bkv_filter_build_range(keys, N, bits[b], 1, &f), BKV_OK);
        bkv_filter_info info;
        bkv_filter_get_info(f, &info);
        double bits_per_key = 8.0 * (double)bkv_filter_encoded_size(f) / N;
        assert_true(bits_per_key < bits[b] + 0.6); /* B - 2 + about 2.25, plus the header */
        for (size_t li = 0; li < 4; li++) {
            uint64_t len = lens[li];
            double bound = bkv_filter_range_fpr_bound(f, len - 1);
            for (int correlated = 0; correlated < 2; correlated++) {
                int fp = 0, asked = 0;
                while (asked < QUERIES) {
                    uint64_t lo = correlated ? sorted[next_random(&rnd) % N] + 1 : next_random(&rnd);
                    if (UINT64_MAX - lo < len) continue;
                    uint64_t hi = lo + len - 1;
                    if (holds(sorted, N, lo, hi)) continue;
                    asked++;
                    fp += bkv_filter_may_intersect(f, lo, hi);
                }
                double rate = (double)fp / QUERIES;
                if (rate > bound * 1.3 + 0.002)
                    fail_msg("%g bits, L %llu, %s: fpr %.5f over the bound %.5f", bits[b], (unsigned long long)len,
                             correlated ? "correlated" : "uniform", rate, bound);
            }
        }
        bkv_filter_destroy(f);
    }
}

static void serialized_form(void **state) {
    (void)state;
    enum { N = 5000 };
    static uint64_t keys[N];
    uint64_t rnd = 99;
    for (size_t i = 0; i < N; i++) keys[i] = next_random(&rnd);
    bkv_filter *f;
    assert_int_equal(bkv_filter_build_range(keys, N, 16, 3, &f), BKV_OK);
    size_t len = bkv_filter_encoded_size(f);
    uint8_t *buf = malloc(len);
    assert_int_equal(bkv_filter_encode(f, buf, len), BKV_OK);
    bkv_filter *g;
    char err[256];
    assert_int_equal(bkv_filter_open(buf, len, 0, &g, err, sizeof err), BKV_OK);
    for (int q = 0; q < 20000; q++) {
        uint64_t lo = next_random(&rnd), hi = lo + next_random(&rnd) % 100000;
        if (hi < lo) hi = UINT64_MAX;
        assert_int_equal(bkv_filter_may_intersect(f, lo, hi), bkv_filter_may_intersect(g, lo, hi));
    }
    for (size_t i = 0; i < N; i++) assert_true(bkv_filter_may_intersect(g, keys[i], keys[i]));
    bkv_filter_destroy(g);
    assert_string_equal(bkv_filter_type_name(BKV_FILTER_RANGE), "range");
    /* Damage anywhere is refused by the checksum. */
    for (size_t at = 0; at < len; at += len / 37 + 1) {
        buf[at] ^= 0x10;
        assert_int_not_equal(bkv_filter_open(buf, len, 0, &g, err, sizeof err), BKV_OK);
        buf[at] ^= 0x10;
    }
    /* Trusted (no checksum): a payload of garbage probes inside its bounds. */
    for (int round = 0; round < 200; round++) {
        for (size_t i = 64; i < len - 8; i++)
            if (next_random(&rnd) % 8 == 0) buf[i] = (uint8_t)next_random(&rnd);
        if (bkv_filter_open(buf, len, BKV_FILTER_OPEN_TRUSTED, &g, err, sizeof err) == BKV_OK) {
            for (int q = 0; q < 200; q++) {
                uint64_t lo = next_random(&rnd);
                (void)bkv_filter_may_intersect(g, lo, lo + next_random(&rnd) % 1000000);
            }
            bkv_filter_destroy(g);
        }
    }
    /* Point probes by hash mean nothing here: always "maybe". */
    assert_true(bkv_filter_may_contain(f, 12345));
    free(buf);
    bkv_filter_destroy(f);
}

static void refuses_what_it_should(void **state) {
    (void)state;
    bkv_filter *f;
    uint64_t k = 1;
    assert_int_equal(bkv_filter_build_range(&k, 1, 2, 0, &f), BKV_INVALID);
    assert_int_equal(bkv_filter_build_range(&k, 1, 67, 0, &f), BKV_INVALID);
    assert_int_equal(bkv_filter_build_range(NULL, 1, 10, 0, &f), BKV_INVALID);
    assert_int_equal(bkv_filter_build_range(&k, 1, 10, 0, NULL), BKV_INVALID);
    assert_true(bkv_filter_may_intersect(NULL, 1, 2)); /* no filter: maybe */
}

/* A lookup's answer after any number of steps (none, some, all, more)
 * is bkv_filter_may_intersect's. */
static int answer_after(const bkv_filter *f, uint64_t lo, uint64_t hi, int steps) {
    bkv_range_lookup q;
    bkv_filter_range_lookup_start(&q, f, lo, hi);
    for (int s = 0; s < steps; s++) bkv_filter_range_lookup_step(&q);
    return bkv_filter_range_lookup_answer(&q);
}

static void assert_steps_agree(const bkv_filter *f, uint64_t lo, uint64_t hi) {
    int expected = bkv_filter_may_intersect(f, lo, hi);
    for (int steps = 0; steps <= BKV_FILTER_RANGE_STEPS + 1; steps++)
        assert_int_equal(answer_after(f, lo, hi, steps), expected);
}

/* Lookups in steps answer as bkv_filter_may_intersect, whatever the key
 * set, the bits per key (the whole universe kept at 66) or the range,
 * including ranges at 0 and 2^64 - 1 and lo > hi; NULL and other types
 * answer maybe; garbage payloads opened trusted are read inside their
 * bounds (ASan). */
static void lookup_in_steps_answers_the_same(void **state) {
    (void)state;
    uint64_t rnd = 77;
    static uint64_t keys[4000];
    static const double bits[] = {6, 20, 66};
    for (int shape = 0; shape < SHAPES; shape++)
        for (size_t b = 0; b < sizeof bits / sizeof bits[0]; b++) {
            size_t n = make_keys(shape, keys, 4000, &rnd);
            bkv_filter *f;
            assert_int_equal(bkv_filter_build_range(keys, n, bits[b], 9, &f), BKV_OK);
            for (int q = 0; q < 3000; q++) {
                uint64_t lo = q % 3 ? keys[next_random(&rnd) % n] - next_random(&rnd) % 64 : next_random(&rnd);
                uint64_t hi = lo + next_random(&rnd) % (q % 2 ? 4096 : 4);
                if (hi < lo) hi = UINT64_MAX;
                assert_steps_agree(f, lo, hi);
            }
            assert_steps_agree(f, 0, 0);
            assert_steps_agree(f, 0, 100);
            assert_steps_agree(f, UINT64_MAX - 100, UINT64_MAX);
            assert_steps_agree(f, UINT64_MAX, UINT64_MAX);
            assert_steps_agree(f, 0, UINT64_MAX);
            assert_int_equal(answer_after(f, 5, 4, BKV_FILTER_RANGE_STEPS), 0);
            size_t len = bkv_filter_encoded_size(f);
            uint8_t *buf = malloc(len);
            assert_int_equal(bkv_filter_encode(f, buf, len), BKV_OK);
            for (int round = 0; round < 20; round++) {
                for (size_t i = 64; i < len; i++)
                    if (next_random(&rnd) % 8 == 0) buf[i] = (uint8_t)next_random(&rnd);
                bkv_filter *g;
                if (bkv_filter_open(buf, len, BKV_FILTER_OPEN_TRUSTED, &g, NULL, 0) != BKV_OK) continue;
                for (int q = 0; q < 100; q++) {
                    uint64_t lo = next_random(&rnd);
                    assert_steps_agree(g, lo, lo + next_random(&rnd) % 100000);
                }
                bkv_filter_destroy(g);
            }
            free(buf);
            bkv_filter_destroy(f);
        }
    assert_int_equal(answer_after(NULL, 1, 2, BKV_FILTER_RANGE_STEPS), 1);
    bkv_filter_spec spec = {.type = BKV_FILTER_BLOOM, .bits_per_key = 10};
    bkv_hash h = 12345;
    bkv_filter *bloom;
    assert_int_equal(bkv_filter_build(&spec, &h, 1, &bloom), BKV_OK);
    assert_int_equal(answer_after(bloom, 1, 2, BKV_FILTER_RANGE_STEPS), 1);
    bkv_filter_destroy(bloom);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(never_a_false_negative),
        cmocka_unit_test(false_positives_within_the_bound),
        cmocka_unit_test(serialized_form),
        cmocka_unit_test(refuses_what_it_should),
        cmocka_unit_test(lookup_in_steps_answers_the_same),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
