/* Behaviour of the Bloom filter types: no false negatives, false-positive
 * rates matching their models, sizing rules, batch = single probes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include <pthread.h>

#include "bloomkv_filter.h"
#include "test_util.h"

static const int types[] = {BKV_FILTER_BLOOM, BKV_FILTER_BLOCKED_BLOOM};

static bkv_filter *build(int type, double bpk, uint32_t tag, uint64_t n) {
    bkv_filter_spec spec = {.type = type, .bits_per_key = bpk};
    bkv_filter *f = NULL;
    assert_int_equal(bkv_filter_create(&spec, n, &f), BKV_OK);
    for (uint64_t i = 0; i < n; i++) assert_int_equal(bkv_filter_add(f, test_key_hash(tag, i)), BKV_OK);
    return f;
}

static double measured_fpr(const bkv_filter *f, uint32_t tag, uint64_t queries) {
    uint64_t fp = 0;
    for (uint64_t i = 0; i < queries; i++) fp += (uint64_t)bkv_filter_may_contain(f, test_key_hash(tag, i));
    return (double)fp / (double)queries;
}

static void no_false_negatives_at_every_bits_per_key(void **state) {
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        for (int bpk = 1; bpk <= 24; bpk++) {
            uint64_t n = 50000 + (uint64_t)bpk * 1000;
            bkv_filter *f = build(types[t], bpk, (uint32_t)bpk, n);
            for (uint64_t i = 0; i < n; i++) assert_int_equal(bkv_filter_may_contain(f, test_key_hash((uint32_t)bpk, i)), 1);
            bkv_filter_destroy(f);
        }
    }
}

static void no_false_negatives_with_millions_of_keys(void **state) {
    (void)state;
    const uint64_t n = 2000000;
    for (size_t t = 0; t < 2; t++) {
        bkv_filter *f = build(types[t], 10, 7, n);
        uint64_t misses = 0;
        for (uint64_t i = 0; i < n; i++) misses += bkv_filter_may_contain(f, test_key_hash(7, i)) == 0;
        assert_true(misses == 0);
        bkv_filter_destroy(f);
    }
}

/* The measured rate is a binomial proportion over the queries: allow six
 * standard deviations around the model plus 3% for the model's own
 * approximation (it ignores the dependence between probe positions). */
static void assert_near_model(double measured, double model, uint64_t queries) {
    double sigma = sqrt(model * (1 - model) / (double)queries);
    double tol = 6 * sigma + 0.03 * model;
    if (fabs(measured - model) > tol)
        fail_msg("fpr %.6f, model %.6f, tolerance %.6f", measured, model, tol);
}

static void standard_bloom_rate_matches_formula(void **state) {
    (void)state;
    const uint64_t n = 1000000, q = 1000000;
    for (int bpk = 4; bpk <= 16; bpk += 6) {
        bkv_filter *f = build(BKV_FILTER_BLOOM, bpk, 100, n);
        bkv_filter_info info;
        bkv_filter_get_info(f, &info);
        assert_true(info.num_keys == n);
        double model = pow(1 - exp(-(double)info.k * (double)n / (double)info.num_bits), info.k);
        assert_true(fabs(model - info.expected_fpr) < 1e-12);
        assert_near_model(measured_fpr(f, 101, q), model, q);
        bkv_filter_destroy(f);
    }
}

static void blocked_bloom_rate_matches_model_and_target(void **state) {
    (void)state;
    const uint64_t n = 1000000, q = 1000000;
    bkv_filter *f = build(BKV_FILTER_BLOCKED_BLOOM, 10, 200, n);
    bkv_filter_info info;
    bkv_filter_get_info(f, &info);
    double fpr = measured_fpr(f, 201, q);
    assert_near_model(fpr, info.expected_fpr, q);
    assert_true(fpr <= 0.010);
    bkv_filter_destroy(f);
}

static void optimal_k_and_clamping(void **state) {
    (void)state;
    bkv_filter_info info;
    bkv_filter *f = build(BKV_FILTER_BLOOM, 10, 1, 100);
    bkv_filter_get_info(f, &info);
    assert_int_equal(info.k, 7); /* 10 ln 2 = 6.93 */
    assert_true(info.num_bits == 1000);
    bkv_filter_destroy(f);
    f = build(BKV_FILTER_BLOOM, 100, 1, 100);
    bkv_filter_get_info(f, &info);
    assert_int_equal(info.k, 30);
    bkv_filter_destroy(f);
    f = build(BKV_FILTER_BLOOM, 0.5, 1, 10);
    bkv_filter_get_info(f, &info);
    assert_int_equal(info.k, 1);
    assert_true(info.num_bits == 64); /* floor for tiny filters */
    bkv_filter_destroy(f);
    f = build(BKV_FILTER_BLOCKED_BLOOM, 10, 1, 1000);
    bkv_filter_get_info(f, &info);
    assert_true(info.num_bits % 512 == 0);
    assert_in_range(info.k, 5, 7);
    bkv_filter_destroy(f);
}

static void fpr_constructor_meets_its_target(void **state) {
    (void)state;
    const double targets[] = {0.05, 0.01, 0.001};
    const uint64_t n = 200000, q = 1000000;
    for (size_t t = 0; t < 2; t++) {
        for (size_t i = 0; i < 3; i++) {
            bkv_filter_spec spec = {.type = types[t], .fpr = targets[i]};
            bkv_filter *f = NULL;
            assert_int_equal(bkv_filter_create(&spec, n, &f), BKV_OK);
            for (uint64_t j = 0; j < n; j++) bkv_filter_add(f, test_key_hash(300, j));
            double fpr = measured_fpr(f, 301, q);
            double sigma = sqrt(targets[i] / (double)q);
            if (fpr > targets[i] * 1.08 + 6 * sigma)
                fail_msg("type %d target %g measured %g", types[t], targets[i], fpr);
            if (types[t] == BKV_FILTER_BLOOM) {
                bkv_filter_info info;
                bkv_filter_get_info(f, &info);
                assert_int_equal(info.k, (unsigned)lround(-log2(targets[i])));
            }
            bkv_filter_destroy(f);
        }
    }
}

static void batch_agrees_with_single_probes(void **state) {
    (void)state;
    const size_t n = 20000, q = 10007; /* q not a multiple of the batch */
    bkv_hash *hs = malloc(q * sizeof *hs);
    uint8_t *out = malloc(q);
    assert_non_null(hs);
    assert_non_null(out);
    for (size_t t = 0; t < 2; t++) {
        bkv_filter *f = build(types[t], 6, 400, n);
        for (size_t i = 0; i < q; i++) hs[i] = test_key_hash(i % 2 ? 400 : 401, i);
        bkv_filter_may_contain_batch(f, hs, q, out);
        for (size_t i = 0; i < q; i++) assert_int_equal(out[i], bkv_filter_may_contain(f, hs[i]));
        bkv_filter_may_contain_batch(f, hs, 0, out);
        bkv_filter_destroy(f);
    }
    free(hs);
    free(out);
}

static void empty_filter_says_no_and_null_says_maybe(void **state) {
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        bkv_filter *f = build(types[t], 10, 1, 0);
        for (uint64_t i = 0; i < 1000; i++) assert_int_equal(bkv_filter_may_contain(f, test_key_hash(9, i)), 0);
        bkv_filter_destroy(f);
    }
    assert_int_equal(bkv_filter_may_contain(NULL, 123), 1);
    uint8_t out[3];
    bkv_hash hs[3] = {1, 2, 3};
    bkv_filter_may_contain_batch(NULL, hs, 3, out);
    assert_true(out[0] == 1 && out[1] == 1 && out[2] == 1);
}

static void bad_specs_are_rejected(void **state) {
    (void)state;
    bkv_filter *f = (bkv_filter *)1;
    bkv_filter_spec spec = {.type = 99, .bits_per_key = 10};
    assert_int_equal(bkv_filter_create(&spec, 10, &f), BKV_INVALID);
    assert_null(f);
    spec.type = BKV_FILTER_BLOOM;
    spec.bits_per_key = 0;
    spec.fpr = 1.5;
    assert_int_equal(bkv_filter_create(&spec, 10, &f), BKV_INVALID);
    spec.fpr = 0;
    assert_int_equal(bkv_filter_create(&spec, 10, &f), BKV_INVALID);
    assert_int_equal(bkv_filter_create(NULL, 10, &f), BKV_INVALID);
    assert_int_equal(bkv_filter_type_from_name("blocked"), BKV_FILTER_BLOCKED_BLOOM);
    assert_int_equal(bkv_filter_type_from_name("bloom"), BKV_FILTER_BLOOM);
    assert_int_equal(bkv_filter_type_from_name("nope"), -1);
    assert_string_equal(bkv_filter_type_name(BKV_FILTER_NONE), "none");
}

/* Adders side by side (a memtable's writers insert at once): a bit one
 * sets must never be lost to another's store into the same byte, or the
 * filter would say "no" for a key it holds. */
#define ADDERS 2
#define ADDED_EACH 200000

typedef struct adder {
    bkv_filter *f;
    int id;
    int *go;
} adder;

static void *add_keys(void *arg) {
    adder *a = arg;
    while (!__atomic_load_n(a->go, __ATOMIC_ACQUIRE)) {
    }
    for (uint64_t i = 0; i < ADDED_EACH; i++) bkv_filter_add_concurrent(a->f, test_key_hash((uint64_t)a->id + 10, i));
    return NULL;
}

static void concurrent_adders_lose_no_key(void **state) {
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        for (int round = 0; round < 4; round++) {
            bkv_filter_spec spec = {.type = types[t], .bits_per_key = 10};
            bkv_filter *f;
            assert_int_equal(bkv_filter_create(&spec, ADDERS * ADDED_EACH, &f), BKV_OK);
            int go = 0;
            adder a[ADDERS];
            pthread_t th[ADDERS];
            for (int i = 0; i < ADDERS; i++) {
                a[i] = (adder){f, i, &go};
                assert_int_equal(pthread_create(&th[i], NULL, add_keys, &a[i]), 0);
            }
            __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
            for (int i = 0; i < ADDERS; i++) pthread_join(th[i], NULL);
            uint64_t missing = 0;
            for (int i = 0; i < ADDERS; i++)
                for (uint64_t k = 0; k < ADDED_EACH; k++)
                    missing += !bkv_filter_may_contain(f, test_key_hash((uint64_t)i + 10, k));
            assert_int_equal(missing, 0);
            bkv_filter_info info;
            bkv_filter_get_info(f, &info);
            assert_true(info.num_keys == ADDERS * ADDED_EACH);
            bkv_filter_destroy(f);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_false_negatives_at_every_bits_per_key),
        cmocka_unit_test(no_false_negatives_with_millions_of_keys),
        cmocka_unit_test(standard_bloom_rate_matches_formula),
        cmocka_unit_test(blocked_bloom_rate_matches_model_and_target),
        cmocka_unit_test(optimal_k_and_clamping),
        cmocka_unit_test(fpr_constructor_meets_its_target),
        cmocka_unit_test(batch_agrees_with_single_probes),
        cmocka_unit_test(concurrent_adders_lose_no_key),
        cmocka_unit_test(empty_filter_says_no_and_null_says_maybe),
        cmocka_unit_test(bad_specs_are_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
