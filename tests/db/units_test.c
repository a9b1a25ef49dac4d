/* The engine's small parts on their own: version edits (encode, decode,
 * apply), write batches, and the cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "db/version.h"
#include "db/write_batch.h"
#include "table/cache.h"
#include "util/ikey.h"

static bkv_file_meta *meta(uint64_t number, const char *lo, const char *hi, uint64_t seq) {
    uint8_t s[64], l[64];
    size_t sl = strlen(lo), ll = strlen(hi);
    memcpy(s, lo, sl);
    memcpy(l, hi, ll);
    bkv_put_u64(s + sl, bkv_pack_trailer(seq, BKV_TYPE_VALUE));
    bkv_put_u64(l + ll, bkv_pack_trailer(seq, BKV_TYPE_VALUE));
    bkv_file_meta *f = bkv_file_meta_new(number, 1000 + number, 7, s, sl + 8, l, ll + 8);
    assert_non_null(f);
    f->smallest_seq = seq;
    f->largest_seq = seq + 5;
    return f;
}

static void edit_round_trip_and_truncations(void **state) {
    (void)state;
    bkv_version_edit e;
    bkv_edit_init(&e);
    e.has_log_number = e.has_next_file = e.has_last_sequence = e.has_value_index = 1;
    e.log_number = 7;
    e.next_file = 99;
    e.last_sequence = 123456789;
    e.value_index = (bkv_value_index_rec){.m_bits = 16384, .k = 6, .seed = 3, .partition_entries = 512,
                                          .shape = 3, .order = 4, .terms_name = "fields", .words = 2};
    for (uint64_t i = 0; i < 3; i++) {
        bkv_file_meta *f = meta(10 + i, "apple", "zebra", 100 * i);
        assert_int_equal(bkv_edit_add_file(&e, (int)i, f), BKV_OK);
        bkv_file_meta_unref(f);
    }
    assert_int_equal(bkv_edit_delete_file(&e, 2, 5), BKV_OK);
    bkv_buf b;
    bkv_buf_init(&b);
    assert_int_equal(bkv_edit_encode(&e, &b), 0);
    bkv_version_edit d;
    bkv_err err;
    assert_int_equal(bkv_edit_decode(&d, b.data, b.len, "MANIFEST-000001", 0, &err), BKV_OK);
    assert_int_equal(d.log_number, 7);
    assert_int_equal(d.next_file, 99);
    assert_int_equal(d.last_sequence, 123456789);
    assert_true(d.has_value_index);
    assert_string_equal(d.value_index.terms_name, "fields");
    assert_int_equal(d.value_index.m_bits, 16384);
    assert_int_equal(d.value_index.words, 2);
    assert_int_equal(d.nadded, 3);
    assert_int_equal(d.ndeleted, 1);
    assert_int_equal(d.deleted[0].number, 5);
    for (size_t i = 0; i < 3; i++) {
        const bkv_file_meta *f = d.added[i].meta;
        assert_int_equal(d.added[i].level, (int)i);
        assert_int_equal(f->number, 10 + i);
        assert_int_equal(f->size, 1010 + i);
        assert_int_equal(f->smallest_seq, 100 * i);
        assert_int_equal(f->largest_seq, 100 * i + 5);
        assert_int_equal(f->smallest_len, 13);
        assert_memory_equal(f->largest, "zebra", 5);
    }
    bkv_edit_free(&d);
    /* Every proper prefix is refused, naming the file and an offset (a
     * prefix that ends between records would be accepted only if it decoded
     * to the same fields, and none does here: files come last). */
    for (size_t cut = 1; cut < b.len; cut++) {
        int rc = bkv_edit_decode(&d, b.data, cut, "MANIFEST-000001", 40, &err);
        if (rc == BKV_OK) {
            assert_true(d.nadded < 3);
        } else {
            assert_int_equal(rc, BKV_CORRUPTION);
            assert_non_null(strstr(err.msg, "MANIFEST-000001"));
        }
        bkv_edit_free(&d);
    }
    bkv_buf_free(&b);
    bkv_edit_free(&e);
    /* Tag 9 (probe words) only says 2, and only beside tag 6. */
    const uint8_t alone[] = {9, 2}, three[] = {6, 64, 6, 3, 0x80, 1, 4, 3, 0, 9, 3},
                  both[] = {6, 64, 6, 3, 0x80, 1, 4, 3, 0, 9, 2};
    assert_int_equal(bkv_edit_decode(&d, alone, sizeof alone, "MANIFEST-000001", 0, &err), BKV_CORRUPTION);
    assert_int_equal(bkv_edit_decode(&d, three, sizeof three, "MANIFEST-000001", 0, &err), BKV_CORRUPTION);
    assert_int_equal(bkv_edit_decode(&d, both, sizeof both, "MANIFEST-000001", 0, &err), BKV_OK);
    assert_int_equal(d.value_index.words, 2);
    assert_int_equal(d.value_index.partition_entries, 128);
    bkv_edit_free(&d);
}

static void apply_orders_levels(void **state) {
    (void)state;
    bkv_tree_version *v = bkv_tree_version_new();
    bkv_version_edit e;
    bkv_edit_init(&e);
    /* Level 0 newest first; level 1 by smallest key. */
    bkv_file_meta *fs[] = {meta(1, "a", "m", 10), meta(2, "b", "c", 30), meta(3, "c", "z", 20),
                           meta(4, "n", "p", 1), meta(5, "d", "f", 1)};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(bkv_edit_add_file(&e, i < 3 ? 0 : 1, fs[i]), BKV_OK);
        bkv_file_meta_unref(fs[i]);
    }
    bkv_tree_version *v2;
    assert_int_equal(bkv_tree_version_apply(v, &e, &v2), BKV_OK);
    bkv_edit_free(&e);
    assert_int_equal(v2->nfiles[0], 3);
    assert_int_equal(v2->files[0][0]->number, 2);
    assert_int_equal(v2->files[0][1]->number, 3);
    assert_int_equal(v2->files[0][2]->number, 1);
    assert_int_equal(v2->files[1][0]->number, 5);
    assert_int_equal(v2->files[1][1]->number, 4);
    assert_true(bkv_tree_version_has_table(v2, 4));
    assert_false(bkv_tree_version_has_table(v, 4)); /* the base is unchanged */
    bkv_edit_init(&e);
    assert_int_equal(bkv_edit_delete_file(&e, 0, 3), BKV_OK);
    bkv_tree_version *v3;
    assert_int_equal(bkv_tree_version_apply(v2, &e, &v3), BKV_OK);
    bkv_edit_free(&e);
    assert_false(bkv_tree_version_has_table(v3, 3));
    assert_int_equal(v3->nfiles[0], 2);
    /* A snapshot edit rebuilds the same version from nothing. */
    bkv_edit_init(&e);
    assert_int_equal(bkv_tree_version_snapshot_edit(v3, &e), BKV_OK);
    bkv_tree_version *v4;
    assert_int_equal(bkv_tree_version_apply(v, &e, &v4), BKV_OK);
    bkv_edit_free(&e);
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        assert_int_equal(v4->nfiles[l], v3->nfiles[l]);
        for (size_t i = 0; i < v3->nfiles[l]; i++) assert_int_equal(v4->files[l][i]->number, v3->files[l][i]->number);
    }
    bkv_tree_version_unref(v4);
    bkv_tree_version_unref(v3);
    bkv_tree_version_unref(v2);
    bkv_tree_version_unref(v);
}

typedef struct seen {
    int n;
    uint64_t seqs[8];
    unsigned types[8];
    char keys[8][16];
} seen;

static int collect(void *arg, uint64_t seq, unsigned type, const uint8_t *key, size_t klen, const uint8_t *val,
                   size_t vlen) {
    (void)val, (void)vlen;
    seen *s = arg;
    s->seqs[s->n] = seq;
    s->types[s->n] = type;
    snprintf(s->keys[s->n], sizeof s->keys[0], "%.*s", (int)klen, (const char *)key);
    s->n++;
    return 0;
}

/* Random keys over a small alphabet with zero bytes, behind a common
 * prefix of 0 to 12 bytes: their fences (8 bytes after the prefix) often
 * tie, and some keys are prefixes of others. */
static size_t random_key(uint64_t *rng, uint8_t *k, size_t prefix) {
    *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t len = prefix + (size_t)(*rng >> 33) % 12;
    memset(k, 'p', prefix);
    for (size_t i = prefix; i < len; i++) {
        *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
        k[i] = "\0\1ab\377"[(*rng >> 40) % 5];
    }
    return len;
}

static int key_cmp(const void *a, const void *b) {
    const uint8_t *x = a, *y = b; /* length-prefixed: byte 0 is the length */
    return bkv_user_key_compare(x + 1, x[0], y + 1, y[0]);
}

/* A level's binary search through fences finds exactly the table a scan
 * of every table's range finds, for keys inside, between, around and
 * outside the tables, including keys without the level's prefix. */
static void level_file_agrees_with_a_scan(void **state) {
    (void)state;
    uint64_t rng = 42;
    for (size_t prefix = 0; prefix <= 12; prefix += 3) {
        enum { KEYS = 64 };
        uint8_t keys[KEYS][32];
        for (int i = 0; i < KEYS; i++) keys[i][0] = (uint8_t)random_key(&rng, keys[i] + 1, prefix);
        qsort(keys, KEYS, sizeof keys[0], key_cmp);
        bkv_version_edit e;
        bkv_edit_init(&e);
        uint64_t number = 1;
        for (int i = 0; i + 1 < KEYS; i += 2) { /* pairs of distinct keys, disjoint */
            if (!key_cmp(keys[i], keys[i + 1]) || (i && !key_cmp(keys[i - 1], keys[i]))) continue;
            uint8_t s[40], l[40];
            memcpy(s, keys[i] + 1, keys[i][0]);
            memcpy(l, keys[i + 1] + 1, keys[i + 1][0]);
            bkv_put_u64(s + keys[i][0], bkv_pack_trailer(1, BKV_TYPE_VALUE));
            bkv_put_u64(l + keys[i + 1][0], bkv_pack_trailer(1, BKV_TYPE_VALUE));
            bkv_file_meta *f = bkv_file_meta_new(number++, 100, 2, s, keys[i][0] + 8u, l, keys[i + 1][0] + 8u);
            assert_non_null(f);
            assert_int_equal(bkv_edit_add_file(&e, 2, f), BKV_OK);
            bkv_file_meta_unref(f);
        }
        bkv_tree_version *empty = bkv_tree_version_new(), *v;
        assert_int_equal(bkv_tree_version_apply(empty, &e, &v), BKV_OK);
        bkv_edit_free(&e);
        assert_true(v->nfiles[2] > 8);
        assert_true(v->fence_skip[2] >= prefix);
        for (int q = 0; q < 4000; q++) {
            uint8_t k[32];
            size_t kl;
            if (q < KEYS) memcpy(k, keys[q] + 1, kl = keys[q][0]);  /* every boundary */
            else kl = random_key(&rng, k, q % 3 ? prefix : q % 2 ? 0 : prefix / 2 + 1);
            const bkv_file_meta *want = NULL;
            for (size_t i = 0; i < v->nfiles[2]; i++)
                if (bkv_file_meta_holds(v->files[2][i], k, kl)) want = v->files[2][i];
            assert_ptr_equal(bkv_tree_version_level_file(v, 2, k, kl), want);
        }
        assert_null(bkv_tree_version_level_file(v, 3, "p", 1)); /* an empty level */
        bkv_tree_version_unref(v);
        bkv_tree_version_unref(empty);
    }
}

static void batch_entries_and_validation(void **state) {
    (void)state;
    bkv_batch *b = bkv_batch_create();
    assert_int_equal(bkv_batch_put(b, "k1", 2, "v1", 2), BKV_OK);
    assert_int_equal(bkv_batch_delete(b, "k2", 2), BKV_OK);
    assert_int_equal(bkv_batch_put(b, "", 0, "", 0), BKV_OK); /* empty key and value are keys and values */
    assert_int_equal(bkv_batch_count(b), 3);
    bkv_batch_set_sequence(&b->rep, 40);
    seen s = {0};
    bkv_err e;
    assert_int_equal(bkv_batch_iterate(b->rep.data, b->rep.len, collect, &s, "batch", 0, &e), BKV_OK);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.seqs[0], 40);
    assert_int_equal(s.seqs[2], 42);
    assert_int_equal(s.types[1], BKV_TYPE_DELETION);
    assert_string_equal(s.keys[1], "k2");
    for (size_t cut = 0; cut < b->rep.len; cut++)
        assert_int_equal(bkv_batch_iterate(b->rep.data, cut, NULL, NULL, "batch", 0, &e), BKV_CORRUPTION);
    bkv_buf group;
    bkv_buf_init(&group);
    assert_int_equal(bkv_buf_set(&group, b->rep.data, b->rep.len), 0);
    assert_int_equal(bkv_batch_append(&group, &b->rep), 0);
    assert_int_equal(bkv_batch_rep_count(group.data), 6);
    assert_int_equal(bkv_batch_iterate(group.data, group.len, NULL, NULL, "group", 0, &e), BKV_OK);
    bkv_buf_free(&group);
    bkv_batch_clear(b);
    assert_int_equal(bkv_batch_count(b), 0);
    bkv_batch_destroy(b);
}

static int deleted[2000];

static void note_delete(uint64_t k1, uint64_t k2, void *value) {
    (void)k2;
    deleted[k1]++;
    free(value);
}

static void insert(bkv_cache *c, uint64_t k1, uint64_t k2) {
    bkv_cache_entry *e = bkv_cache_insert(c, k1, k2, malloc(1), 1, note_delete);
    assert_non_null(e);
    bkv_cache_release(c, e);
}

/* The cache is sharded, so these are properties that hold whatever shard
 * a key lands in: usage stays within capacity, a referenced entry outlives
 * its eviction, the most recently used entry of a shard is never the one
 * evicted, replaced and erased values are deleted once. */
static void cache_evicts_least_recent_and_honours_references(void **state) {
    (void)state;
    memset(deleted, 0, sizeof deleted);
    bkv_cache *c = bkv_cache_new(64);
    insert(c, 0, 0);
    insert(c, 1, 0);
    bkv_cache_entry *held = bkv_cache_lookup(c, 1, 0);
    assert_non_null(held);
    for (uint64_t k = 2; k < 1000; k++) {
        insert(c, k, 0);
        bkv_cache_entry *hot = bkv_cache_lookup(c, 0, 0); /* kept the most recent of its shard */
        assert_non_null(hot);
        bkv_cache_release(c, hot);
        assert_true(bkv_cache_usage(c) <= 64 + 1);
    }
    assert_int_equal(deleted[0], 0);
    assert_int_equal(deleted[1], 0); /* evicted long ago, but still referenced */
    assert_non_null(bkv_cache_value(held));
    bkv_cache_release(c, held);
    assert_int_equal(deleted[1], 1);
    int evicted = 0;
    for (int k = 2; k < 1000; k++) evicted += deleted[k];
    assert_true(evicted >= 1000 - 2 - 64);
    insert(c, 1500, 7);
    insert(c, 1500, 7);
    assert_int_equal(deleted[1500], 1);
    insert(c, 1500, 8);
    bkv_cache_erase_k1(c, 1500);
    assert_int_equal(deleted[1500], 3);
    assert_null(bkv_cache_lookup(c, 1500, 7));
    bkv_cache_free(c);
    assert_int_equal(deleted[0], 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edit_round_trip_and_truncations),
        cmocka_unit_test(apply_orders_levels),
        cmocka_unit_test(level_file_agrees_with_a_scan),
        cmocka_unit_test(batch_entries_and_validation),
        cmocka_unit_test(cache_evicts_least_recent_and_honours_references),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
