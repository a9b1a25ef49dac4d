/* Every filter type: no false negatives at any size (duplicates in the
 * input too), rates within tolerance of each model, delete semantics of
 * the deletable types, and a serialized form that rejects every
 * truncation and every single-byte change. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bloomkv_filter.h"
#include "test_util.h"

static const int all_types[] = {BKV_FILTER_BLOOM,   BKV_FILTER_BLOCKED_BLOOM, BKV_FILTER_RIBBON,   BKV_FILTER_FUSE8,
                                BKV_FILTER_FUSE16,  BKV_FILTER_XOR8,          BKV_FILTER_CUCKOO8,  BKV_FILTER_CUCKOO12,
                                BKV_FILTER_CUCKOO16, BKV_FILTER_COUNTING};
#define NTYPES (sizeof all_types / sizeof all_types[0])

static bkv_filter_spec spec_for(int type) {
    bkv_filter_spec s = {.type = type, .bits_per_key = 10};
    if (type == BKV_FILTER_RIBBON) s.bits_per_key = 0, s.fpr = 1.0 / 128;
    if (type == BKV_FILTER_COUNTING) s.bits_per_key = 40; /* 4 bits a counter */
    return s;
}

/* n keys, the first tenth of them given twice. */
static bkv_hash *key_set(uint32_t tag, size_t n, size_t *total) {
    size_t dups = n >= 2 ? n / 10 + 1 : 0;
    bkv_hash *h = malloc((n + dups + 1) * sizeof *h);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) h[i] = test_key_hash(tag, i);
    for (size_t i = 0; i < dups; i++) h[n + i] = h[i % n];
    *total = n + dups;
    return h;
}

static bkv_filter *make(int type, const bkv_hash *h, size_t n) {
    bkv_filter_spec s = spec_for(type);
    bkv_filter *f = NULL;
    int rc = bkv_filter_build(&s, h, n, &f);
    if (rc != BKV_OK) fail_msg("type %s: build of %zu keys failed: %s", bkv_filter_type_name(type), n, bkv_strerror(rc));
    return f;
}

static void no_false_negatives_at_any_size(void **state) {
    (void)state;
    const size_t sizes[] = {0, 1, 2, 1000, 1000000};
    for (size_t t = 0; t < NTYPES; t++)
        for (size_t si = 0; si < 5; si++) {
            size_t total;
            bkv_hash *h = key_set(50 + (uint32_t)si, sizes[si], &total);
            bkv_filter *f = make(all_types[t], h, total);
            for (size_t i = 0; i < total; i++)
                if (!bkv_filter_may_contain(f, h[i]))
                    fail_msg("type %s n %zu: key %zu missing", bkv_filter_type_name(all_types[t]), sizes[si], i);
            bkv_filter_destroy(f);
            free(h);
        }
}

/* Batches of filters past the size below which batches are plain loops
 * (4 MiB): the prefetching windows, whose keys finish out of order for
 * the standard Bloom filter, must answer as single probes do, for batch
 * lengths around the window sizes and an odd remainder. */
static void large_filters_batch_as_single_probes(void **state) {
    (void)state;
    const struct {
        int type;
        size_t n;
        double bits_per_key;
    } cases[] = {
        {BKV_FILTER_BLOOM, 4400000, 0}, {BKV_FILTER_BLOCKED_BLOOM, 4400000, 0}, {BKV_FILTER_RIBBON, 2400000, 0},
        {BKV_FILTER_FUSE16, 2400000, 0}, {BKV_FILTER_XOR8, 4000000, 0},          {BKV_FILTER_CUCKOO16, 2400000, 16},
    };
    const size_t q = 70001, lengths[] = {0, 1, 15, 16, 17, 31, 32, 33, 100, q};
    bkv_hash *qs = malloc(q * sizeof *qs);
    uint8_t *out = malloc(q);
    assert_non_null(qs);
    assert_non_null(out);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t total;
        bkv_hash *h = key_set(90 + (uint32_t)c, cases[c].n, &total);
        bkv_filter_spec s = spec_for(cases[c].type);
        if (cases[c].bits_per_key > 0) s.bits_per_key = cases[c].bits_per_key;
        if (cases[c].type == BKV_FILTER_RIBBON) s.fpr = 1.0 / (1u << 16);
        bkv_filter *f = NULL;
        assert_int_equal(bkv_filter_build(&s, h, total, &f), BKV_OK);
        bkv_filter_info info;
        bkv_filter_get_info(f, &info);
        if (info.encoded_bytes < (5u << 20))
            fail_msg("type %s: %zu bytes, not past 4 MiB", bkv_filter_type_name(cases[c].type), info.encoded_bytes);
        /* Half stored keys (every probe taken), half absent. */
        for (size_t i = 0; i < q; i++) qs[i] = i % 2 ? h[(i * 7919) % total] : test_key_hash(99, i);
        for (size_t i = 0; i < q; i++) bkv_filter_prefetch(f, qs[i]); /* a hint: answers below unchanged */
        bkv_filter_prefetch(NULL, qs[0]);
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            memset(out, 2, q);
            bkv_filter_may_contain_batch(f, qs, lengths[l], out);
            for (size_t i = 0; i < lengths[l]; i++)
                if (out[i] != bkv_filter_may_contain(f, qs[i]))
                    fail_msg("type %s: batch of %zu, key %zu", bkv_filter_type_name(cases[c].type), lengths[l], i);
            if (lengths[l] < q) assert_int_equal(out[lengths[l]], 2); /* nothing written past the batch */
        }
        bkv_filter_destroy(f);
        free(h);
    }
    free(qs);
    free(out);
}

static void rates_match_models(void **state) {
    (void)state;
    const size_t n = 200000, q = 1000000;
    for (size_t t = 0; t < NTYPES; t++) {
        size_t total;
        bkv_hash *h = key_set(60, n, &total);
        bkv_filter *f = make(all_types[t], h, n); /* no duplicates: models count distinct keys */
        uint64_t fp = 0;
        for (size_t i = 0; i < q; i++) fp += (uint64_t)bkv_filter_may_contain(f, test_key_hash(61, i));
        bkv_filter_info info;
        bkv_filter_get_info(f, &info);
        double rate = (double)fp / q, model = info.expected_fpr, sigma = sqrt(model / q);
        if (fabs(rate - model) > 0.15 * model + 6 * sigma)
            fail_msg("type %s: rate %.5f, model %.5f", bkv_filter_type_name(all_types[t]), rate, model);
        bkv_filter_destroy(f);
        free(h);
    }
}

static void ribbon_stays_near_the_bound(void **state) {
    (void)state;
    const size_t n = 1000000;
    size_t total;
    bkv_hash *h = key_set(70, n, &total);
    for (double fpr = 0.01; fpr > 0.00005; fpr /= 10) {
        bkv_filter_spec s = {.type = BKV_FILTER_RIBBON, .fpr = fpr};
        bkv_filter *f;
        assert_int_equal(bkv_filter_build(&s, h, n, &f), BKV_OK);
        bkv_filter_info info;
        bkv_filter_get_info(f, &info);
        double bound = -log2(info.expected_fpr);
        /* Well under 10% above log2(1/fpr) bits per key. */
        assert_true(info.bits_per_key < bound * 1.07);
        bkv_filter_destroy(f);
    }
    free(h);
}

static void cuckoo_fills_to_95_percent_and_loses_nothing(void **state) {
    (void)state;
    const int types[] = {BKV_FILTER_CUCKOO8, BKV_FILTER_CUCKOO12, BKV_FILTER_CUCKOO16};
    for (int t = 0; t < 3; t++) {
        bkv_filter_spec s = {.type = types[t], .bits_per_key = 10};
        bkv_filter *f;
        assert_int_equal(bkv_filter_create(&s, 100000, &f), BKV_OK);
        bkv_filter_info info;
        bkv_filter_get_info(f, &info);
        uint64_t slots = info.num_bits / info.k, added = 0;
        int rc;
        while ((rc = bkv_filter_add(f, test_key_hash(80, added))) == BKV_OK) added++;
        assert_int_equal(rc, BKV_FULL);
        if ((double)added / (double)slots < 0.95) fail_msg("first failure at load %.3f", (double)added / (double)slots);
        for (uint64_t i = 0; i < added; i++) assert_int_equal(bkv_filter_may_contain(f, test_key_hash(80, i)), 1);
        /* Deleting half leaves the other half; deleted keys mostly vanish. */
        for (uint64_t i = 0; i < added; i += 2) assert_int_equal(bkv_filter_delete(f, test_key_hash(80, i)), BKV_OK);
        uint64_t still = 0;
        for (uint64_t i = 0; i < added; i++) {
            if (i % 2) assert_int_equal(bkv_filter_may_contain(f, test_key_hash(80, i)), 1);
            else still += (uint64_t)bkv_filter_may_contain(f, test_key_hash(80, i));
        }
        assert_true(still < added / 20);
        bkv_filter_destroy(f);
    }
}

/* Entries move between cuckoo filters of one geometry without losing a
 * key: each found afterwards in one of the two, the moved ones in the
 * target; the limit holds; other shapes are refused. */
static void cuckoo_entries_move_between_equal_filters(void **state) {
    (void)state;
    const int types[] = {BKV_FILTER_CUCKOO8, BKV_FILTER_CUCKOO12, BKV_FILTER_CUCKOO16};
    for (int t = 0; t < 3; t++) {
        bkv_filter_spec s = {.type = types[t], .bits_per_key = 10};
        bkv_filter *older, *newer, *bigger;
        assert_int_equal(bkv_filter_create(&s, 4000, &older), BKV_OK);
        assert_int_equal(bkv_filter_create(&s, 4000, &newer), BKV_OK);
        assert_int_equal(bkv_filter_create(&s, 8000, &bigger), BKV_OK);
        /* older filled, then half of it deleted; newer holds 1,000 more. */
        for (uint32_t i = 0; i < 3600; i++) assert_int_equal(bkv_filter_add(older, test_key_hash(81, i)), BKV_OK);
        for (uint32_t i = 0; i < 3600; i += 2) assert_int_equal(bkv_filter_delete(older, test_key_hash(81, i)), BKV_OK);
        for (uint32_t i = 0; i < 1000; i++) assert_int_equal(bkv_filter_add(newer, test_key_hash(82, i)), BKV_OK);
        uint64_t moved;
        assert_int_equal(bkv_filter_move_entries(newer, bigger, 10, &moved), BKV_INVALID);
        assert_int_equal(moved, 0);
        assert_int_equal(bkv_filter_move_entries(newer, newer, 10, NULL), BKV_INVALID);
        assert_int_equal(bkv_filter_move_entries(newer, older, 300, &moved), BKV_OK);
        assert_int_equal(moved, 300);
        bkv_filter_info a, b;
        bkv_filter_get_info(older, &a);
        bkv_filter_get_info(newer, &b);
        assert_int_equal(a.num_keys, 1800 + 300);
        assert_int_equal(b.num_keys, 700);
        assert_int_equal(bkv_filter_move_entries(newer, older, UINT64_MAX, &moved), BKV_OK);
        if (moved <= 600) fail_msg("type %d: %llu of 700 moved", types[t], (unsigned long long)moved);
        for (uint32_t i = 0; i < 1000; i++)
            assert_true(bkv_filter_may_contain(older, test_key_hash(82, i)) ||
                        bkv_filter_may_contain(newer, test_key_hash(82, i)));
        for (uint32_t i = 1; i < 3600; i += 2) assert_int_equal(bkv_filter_may_contain(older, test_key_hash(81, i)), 1);
        /* What moved is deletable where it went. */
        uint64_t deleted = 0;
        for (uint32_t i = 0; i < 1000; i++)
            deleted += bkv_filter_delete(older, test_key_hash(82, i)) == BKV_OK ||
                       bkv_filter_delete(newer, test_key_hash(82, i)) == BKV_OK;
        assert_int_equal(deleted, 1000);
        bkv_filter_destroy(older);
        bkv_filter_destroy(newer);
        bkv_filter_destroy(bigger);
    }
    bkv_filter_spec bloom = {.type = BKV_FILTER_BLOOM, .bits_per_key = 10};
    bkv_filter *x, *y;
    assert_int_equal(bkv_filter_create(&bloom, 100, &x), BKV_OK);
    assert_int_equal(bkv_filter_create(&bloom, 100, &y), BKV_OK);
    assert_int_equal(bkv_filter_move_entries(x, y, 1, NULL), BKV_INVALID);
    bkv_filter_destroy(x);
    bkv_filter_destroy(y);
}

static void deletes_of_absent_keys_change_nothing(void **state) {
    (void)state;
    const int types[] = {BKV_FILTER_CUCKOO12, BKV_FILTER_COUNTING};
    for (int t = 0; t < 2; t++) {
        bkv_filter_spec s = spec_for(types[t]);
        bkv_filter *f;
        assert_int_equal(bkv_filter_create(&s, 1000, &f), BKV_OK);
        for (int i = 0; i < 1000; i++) assert_int_equal(bkv_filter_add(f, test_key_hash(90, (uint64_t)i)), BKV_OK);
        size_t len = bkv_filter_encoded_size(f);
        uint8_t *before = malloc(len), *after = malloc(len);
        assert_int_equal(bkv_filter_encode(f, before, len), BKV_OK);
        int refused = 0;
        for (int i = 0; i < 1000; i++) {
            bkv_hash h = test_key_hash(91, (uint64_t)i);
            if (bkv_filter_may_contain(f, h)) continue; /* a false positive cannot be told apart */
            assert_int_equal(bkv_filter_delete(f, h), BKV_NOTFOUND);
            refused++;
        }
        assert_true(refused > 900);
        assert_int_equal(bkv_filter_encode(f, after, len), BKV_OK);
        assert_memory_equal(before, after, len);
        free(before);
        free(after);
        bkv_filter_destroy(f);
    }
}

static void saturated_counters_never_cause_false_negatives(void **state) {
    (void)state;
    bkv_filter_spec s = {.type = BKV_FILTER_COUNTING, .bits_per_key = 16};
    bkv_filter *f;
    assert_int_equal(bkv_filter_create(&s, 200, &f), BKV_OK);
    bkv_hash hot = test_key_hash(100, 0);
    for (int i = 0; i < 40; i++) assert_int_equal(bkv_filter_add(f, hot), BKV_OK);
    for (int i = 1; i < 200; i++) assert_int_equal(bkv_filter_add(f, test_key_hash(100, (uint64_t)i)), BKV_OK);
    /* 40 deletes of 40 adds: counters stuck at 15 keep the key "present",
     * which is the price of never producing a false negative. */
    for (int i = 0; i < 40; i++) assert_int_equal(bkv_filter_delete(f, hot), BKV_OK);
    for (int i = 1; i < 200; i++) assert_int_equal(bkv_filter_may_contain(f, test_key_hash(100, (uint64_t)i)), 1);
    for (int i = 1; i < 200; i += 2) assert_int_equal(bkv_filter_delete(f, test_key_hash(100, (uint64_t)i)), BKV_OK);
    for (int i = 2; i < 200; i += 2) assert_int_equal(bkv_filter_may_contain(f, test_key_hash(100, (uint64_t)i)), 1);
    bkv_filter_destroy(f);
}

static void serialized_forms_reject_every_damage(void **state) {
    (void)state;
    for (size_t t = 0; t < NTYPES; t++) {
        size_t total;
        bkv_hash *h = key_set(110, 60, &total);
        bkv_filter *f = make(all_types[t], h, total);
        size_t len = bkv_filter_encoded_size(f);
        uint8_t *buf = malloc(len);
        assert_int_equal(bkv_filter_encode(f, buf, len), BKV_OK);
        bkv_filter *g;
        assert_int_equal(bkv_filter_open(buf, len, 0, &g, NULL, 0), BKV_OK);
        for (uint64_t i = 0; i < 5000; i++) {
            bkv_hash x = test_key_hash(i < total ? 110 : 111, i);
            assert_int_equal(bkv_filter_may_contain(f, x), bkv_filter_may_contain(g, x));
        }
        bkv_hash q[300];
        uint8_t out[300];
        for (int i = 0; i < 300; i++) q[i] = test_key_hash(i % 2 ? 110 : 112, (uint64_t)i);
        bkv_filter_may_contain_batch(g, q, 300, out);
        for (int i = 0; i < 300; i++) assert_int_equal(out[i], bkv_filter_may_contain(g, q[i]));
        bkv_filter_destroy(g);
        for (size_t cut = 0; cut < len; cut++) {
            uint8_t *copy = malloc(cut ? cut : 1);
            memcpy(copy, buf, cut);
            assert_int_equal(bkv_filter_open(copy, cut, 0, &g, NULL, 0), BKV_CORRUPTION);
            free(copy);
        }
        for (size_t pos = 0; pos < len; pos++) {
            uint8_t orig = buf[pos];
            for (int v = 0; v < 256; v += (pos < 64 ? 1 : 7)) {
                if (v == orig) continue;
                buf[pos] = (uint8_t)v;
                int rc = bkv_filter_open(buf, len, 0, &g, NULL, 0);
                if (rc == BKV_OK) fail_msg("type %s: byte %zu = %d accepted", bkv_filter_type_name(all_types[t]), pos, v);
            }
            buf[pos] = orig;
        }
        free(buf);
        bkv_filter_destroy(f);
        free(h);
    }
}

static void static_types_refuse_incremental_use(void **state) {
    (void)state;
    bkv_filter_spec s = {.type = BKV_FILTER_RIBBON, .fpr = 0.01};
    bkv_filter *f = NULL;
    assert_int_equal(bkv_filter_create(&s, 10, &f), BKV_INVALID);
    assert_true(bkv_filter_is_static(BKV_FILTER_FUSE8));
    assert_false(bkv_filter_is_static(BKV_FILTER_BLOOM));
    assert_true(bkv_filter_is_deletable(BKV_FILTER_CUCKOO8));
    assert_false(bkv_filter_is_deletable(BKV_FILTER_RIBBON));
    bkv_hash h[3] = {1, 2, 3};
    assert_int_equal(bkv_filter_build(&s, h, 3, &f), BKV_OK);
    assert_int_equal(bkv_filter_add(f, 4), BKV_INVALID);
    assert_int_equal(bkv_filter_delete(f, 1), BKV_INVALID);
    bkv_filter_destroy(f);
    for (size_t t = 0; t < NTYPES; t++)
        assert_int_equal(bkv_filter_type_from_name(bkv_filter_type_name(all_types[t])), all_types[t]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_false_negatives_at_any_size),
        cmocka_unit_test(large_filters_batch_as_single_probes),
        cmocka_unit_test(rates_match_models),
        cmocka_unit_test(ribbon_stays_near_the_bound),
        cmocka_unit_test(cuckoo_fills_to_95_percent_and_loses_nothing),
        cmocka_unit_test(cuckoo_entries_move_between_equal_filters),
        cmocka_unit_test(deletes_of_absent_keys_change_nothing),
        cmocka_unit_test(saturated_counters_never_cause_false_negatives),
        cmocka_unit_test(serialized_forms_reject_every_damage),
        cmocka_unit_test(static_types_refuse_incremental_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
