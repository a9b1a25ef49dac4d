/* The value index shapes against each other and against the leaves
 * themselves: whatever the shape, a search reports exactly the leaves whose
 * own filter answers "maybe", through random adds and removes; the
 * hierarchy keeps its B+-tree invariants throughout. Also the value filter
 * block codec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "valuesearch/value_filter.h"
#include "util/hash.h"
#include "valuesearch/vindex.h"

#define MAX_TABLES 64

typedef struct model_table {
    uint64_t file;
    bkv_vf_set vf;
} model_table;

typedef struct model {
    model_table t[MAX_TABLES];
    int n;
} model;

static const bkv_vf_params params = {.m_bits = 512, .k = 3, .seed = 42, .partition_entries = 8};

/* A table of nparts partitions holding terms "v<i>" for random i < domain. */
static void make_table(model_table *mt, uint64_t file, uint32_t nparts, uint64_t *rng, uint32_t domain) {
    memset(&mt->vf, 0, sizeof mt->vf);
    mt->file = file;
    mt->vf.params = params;
    for (uint32_t p = 0; p < nparts; p++) {
        assert_int_equal(bkv_vf_set_add_part(&mt->vf, p), BKV_OK);
        for (int j = 0; j < 8; j++) {
            char term[16];
            int n = snprintf(term, sizeof term, "v%u", (unsigned)(bkv_splitmix64(rng) % domain));
            bkv_vf_probe pr;
            bkv_vf_probe_init(&pr, &params, term, (size_t)n);
            bkv_vf_insert(bkv_vf_part_bits(&mt->vf, p), &pr);
        }
    }
}

typedef struct hits {
    uint64_t keys[4096];
    int n;
} hits;

static int collect(void *arg, const bkv_vleaf_ref *leaf) {
    hits *h = arg;
    if (h->n < 4096) h->keys[h->n++] = leaf->file << 20 | leaf->part;
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void expected_hits(const model *m, const bkv_vf_probe *pr, hits *h) {
    h->n = 0;
    for (int i = 0; i < m->n; i++)
        for (uint32_t p = 0; p < m->t[i].vf.nparts; p++)
            if (bkv_vf_test(bkv_vf_part_bits(&m->t[i].vf, p), pr)) h->keys[h->n++] = m->t[i].file << 20 | p;
    qsort(h->keys, (size_t)h->n, sizeof h->keys[0], cmp_u64);
}

static void run_shape(int shape, int order) {
    uint64_t rng = 7 + (uint64_t)shape * 100 + (uint64_t)order;
    bkv_vindex *vi = bkv_vindex_new(shape, &params, order);
    assert_non_null(vi);
    model m = {.n = 0};
    uint64_t next_file = 1;
    char why[200];
    for (int step = 0; step < 400; step++) {
        int add = m.n == 0 || (m.n < MAX_TABLES && bkv_splitmix64(&rng) % 100 < 55);
        if (add) {
            model_table *mt = &m.t[m.n++];
            make_table(mt, next_file++, 1 + (uint32_t)(bkv_splitmix64(&rng) % 9), &rng, 500);
            assert_int_equal(bkv_vindex_add_table(vi, mt->file, &mt->vf), BKV_OK);
        } else {
            int victim = (int)(bkv_splitmix64(&rng) % (uint64_t)m.n);
            bkv_vindex_remove_table(vi, m.t[victim].file);
            bkv_vf_set_free(&m.t[victim].vf);
            m.t[victim] = m.t[--m.n];
        }
        bkv_vindex_commit(vi);
        if (bkv_vindex_check(vi, why, sizeof why) != 0) fail_msg("step %d: %s", step, why);
        for (int q = 0; q < 20; q++) {
            char term[16];
            int n = snprintf(term, sizeof term, "v%u", (unsigned)(bkv_splitmix64(&rng) % 700));
            bkv_vf_probe pr;
            bkv_vf_probe_init(&pr, &params, term, (size_t)n);
            static hits got, want;
            got.n = 0;
            bkv_find_stats st = {0};
            bkv_vindex_search(vi, &pr, collect, &got, &st);
            qsort(got.keys, (size_t)got.n, sizeof got.keys[0], cmp_u64);
            expected_hits(&m, &pr, &want);
            assert_int_equal(got.n, want.n);
            assert_memory_equal(got.keys, want.keys, (size_t)want.n * sizeof want.keys[0]);
            assert_int_equal(st.leaves_positive, (uint64_t)want.n);
        }
    }
    bkv_vindex_info info;
    bkv_vindex_get_info(vi, &info);
    assert_int_equal(info.tables, (uint64_t)m.n);
    /* A full rebuild gives the same tree bits as the incremental updates. */
    if (shape == BKV_VALUE_INDEX_HIERARCHY) {
        assert_true(bkv_vindex_rebuild(vi) == info.inner_nodes);
        assert_int_equal(bkv_vindex_check(vi, why, sizeof why), 0);
    }
    for (int i = 0; i < m.n; i++) bkv_vf_set_free(&m.t[i].vf);
    bkv_vindex_free(vi);
}

static void test_flat(void **state) {
    (void)state;
    run_shape(BKV_VALUE_INDEX_FLAT, 2);
}

static void test_hierarchy(void **state) {
    (void)state;
    int orders[] = {2, 3, 5, 10};
    for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) run_shape(BKV_VALUE_INDEX_HIERARCHY, orders[i]);
}

static void test_bitsliced(void **state) {
    (void)state;
    run_shape(BKV_VALUE_INDEX_BITSLICED, 2);
}

/* A table without usable filters is one leaf that always answers maybe,
 * in every shape; filters with other parameters are refused as such. */
static void test_maybe_leaf(void **state) {
    (void)state;
    for (int shape = 1; shape <= 3; shape++) {
        bkv_vindex *vi = bkv_vindex_new(shape, &params, 2);
        assert_int_equal(bkv_vindex_add_table(vi, 5, NULL), BKV_OK);
        model_table other;
        uint64_t rng = 1;
        make_table(&other, 6, 2, &rng, 10);
        other.vf.params.seed = 43;
        assert_int_equal(bkv_vindex_add_table(vi, 6, &other.vf), BKV_INVALID);
        bkv_vindex_commit(vi);
        bkv_vf_probe pr;
        bkv_vf_probe_init(&pr, &params, "nothing", 7);
        static hits got;
        got.n = 0;
        bkv_vindex_search(vi, &pr, collect, &got, NULL);
        assert_int_equal(got.n, 2);
        bkv_vf_set_free(&other.vf);
        bkv_vindex_free(vi);
    }
}

static void test_codec(void **state) {
    (void)state;
    model_table mt;
    uint64_t rng = 3;
    make_table(&mt, 1, 4, &rng, 100);
    for (uint32_t i = 0; i < 4; i++) mt.vf.parts[i].entries = 8, mt.vf.parts[i].last_block = i;
    bkv_buf b;
    bkv_buf_init(&b);
    assert_int_equal(bkv_vf_encode(&mt.vf, &b), 0);
    assert_int_equal(b.len, BKV_VF_HEADER + 4 * BKV_VF_DIR_ENTRY + 4 * 512 / 8);
    bkv_vf_set out;
    assert_int_equal(bkv_vf_decode(b.data, b.len, 4, 32, &out, NULL, "t", 0, NULL), BKV_OK);
    assert_int_equal(out.nparts, 4);
    assert_memory_equal(out.bits, mt.vf.bits, 4 * 512 / 8);
    bkv_vf_set_free(&out);
    /* Wrong table shape, truncation, and damage to any header or directory
     * byte are refused (the block checksum covers the bits). */
    assert_int_equal(bkv_vf_decode(b.data, b.len, 5, 32, &out, NULL, "t", 0, NULL), BKV_CORRUPTION);
    assert_int_equal(bkv_vf_decode(b.data, b.len, 4, 31, &out, NULL, "t", 0, NULL), BKV_CORRUPTION);
    for (size_t cut = 0; cut < b.len; cut += 7)
        assert_int_equal(bkv_vf_decode(b.data, cut, 4, 32, &out, NULL, "t", 0, NULL), BKV_CORRUPTION);
    for (size_t i = 0; i < BKV_VF_HEADER + 4 * BKV_VF_DIR_ENTRY; i++) {
        /* k, the seed and P may take other well-formed values (the block
         * checksum catches those). */
        if (i == 6 || (i >= 16 && i < 28)) continue;
        if (i >= BKV_VF_HEADER && (i - BKV_VF_HEADER) % 16 >= 12) continue; /* term counts */
        b.data[i] ^= 0x10;
        int rc = bkv_vf_decode(b.data, b.len, 4, 32, &out, NULL, "t", 0, NULL);
        if (rc == BKV_OK) bkv_vf_set_free(&out);
        if (rc != BKV_CORRUPTION) fail_msg("flip at byte %zu accepted", i);
        b.data[i] ^= 0x10;
    }

    /* Version 2: the head (directory and summary) and the rows apart; the
     * rows put back together give the same filters. */
    const uint8_t summary[5] = {1, 2, 3, 4, 5};
    for (uint32_t i = 0; i < 4; i++) mt.vf.parts[i].offset = 4000 * i;
    bkv_buf_clear(&b);
    assert_int_equal(bkv_vf_rows_per_block(&mt.vf), 8); /* 8 rows of 32 bytes */
    assert_int_equal(bkv_vf_encode_paged(&mt.vf, 1000, 2, summary, sizeof summary, &b), 0);
    assert_int_equal(b.len, BKV_VF_HEADER_PAGED + 4 * BKV_VF_DIR_ENTRY_PAGED + sizeof summary);
    bkv_vf_layout lay;
    assert_int_equal(bkv_vf_decode(b.data, b.len, 4, 32, &out, NULL, "t", 0, NULL), BKV_CORRUPTION); /* v1 only */
    assert_int_equal(bkv_vf_decode(b.data, b.len, 4, 32, &out, &lay, "t", 0, NULL), BKV_OK);
    assert_int_equal(lay.version, BKV_VF_VERSION_PAGED);
    assert_int_equal(lay.rows_offset, 1000);
    assert_int_equal(lay.rows_per_block, 2);
    assert_int_equal(lay.summary_len, sizeof summary);
    assert_memory_equal(lay.summary, summary, sizeof summary);
    assert_int_equal(out.parts[3].offset, 12000);
    bkv_buf row;
    bkv_buf_init(&row);
    for (uint32_t w = 0; w < 512 / 64; w++) {
        bkv_buf_clear(&row);
        assert_int_equal(bkv_vf_encode_row(&mt.vf, w, &row), 0);
        assert_int_equal(row.len, 4 * 8);
        bkv_vf_set_row(&out, w, row.data);
    }
    assert_memory_equal(out.bits, mt.vf.bits, 4 * 512 / 8);
    bkv_vf_set_free(&out);
    bkv_buf_free(&row);
    for (size_t cut = 0; cut < b.len; cut++)
        assert_int_equal(bkv_vf_decode(b.data, cut, 4, 32, &out, &lay, "t", 0, NULL), BKV_CORRUPTION);
    for (size_t i = 0; i < BKV_VF_HEADER_PAGED + 4 * BKV_VF_DIR_ENTRY_PAGED; i++) {
        /* k, seed, P as in version 1; m and rows_offset are checked by the
         * table reader, against where the rows end (value_search_test). */
        if (i == 6 || (i >= 8 && i < 12) || (i >= 16 && i < 28) || (i >= 32 && i < 40)) continue;
        /* Term counts; offsets past the first only steer prefetching (an
         * increasing one is as good as the true one to the decoder). */
        if (i >= BKV_VF_HEADER_PAGED && (i - BKV_VF_HEADER_PAGED) % 24 >= 12 && (i - BKV_VF_HEADER_PAGED) % 24 < 16)
            continue;
        if (i >= BKV_VF_HEADER_PAGED + 24 && (i - BKV_VF_HEADER_PAGED) % 24 >= 16) continue;
        b.data[i] ^= 0x10;
        int rc = bkv_vf_decode(b.data, b.len, 4, 32, &out, &lay, "t", 0, NULL);
        if (rc == BKV_OK) bkv_vf_set_free(&out);
        if (rc != BKV_CORRUPTION) fail_msg("version 2: flip at byte %zu accepted", i);
        b.data[i] ^= 0x10;
    }
    bkv_buf_free(&b);
    bkv_vf_set_free(&mt.vf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flat),       cmocka_unit_test(test_hierarchy), cmocka_unit_test(test_bitsliced),
        cmocka_unit_test(test_maybe_leaf), cmocka_unit_test(test_codec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
