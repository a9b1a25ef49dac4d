/* Per-level filter policy (white-box: inspects the tables of each level). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "db/db_int.h"
#include "test_dir.h"

TEST_DIR_FIXTURE("policy")

typedef struct level_filters {
    size_t tables;
    int types_seen;        /* bit per filter type */
    double bits_per_key;   /* filter bits over entries, summed over tables */
} level_filters;

static void inspect(bkv_db *db, level_filters out[BKV_NUM_LEVELS]) {
    memset(out, 0, sizeof(level_filters) * BKV_NUM_LEVELS);
    bkv_db_lock(db);
    bkv_tree_version *v = db->current;
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    bkv_db_unlock(db);
    for (int l = 0; l < BKV_NUM_LEVELS; l++) {
        uint64_t bits = 0, keys = 0;
        for (size_t i = 0; i < v->nfiles[l]; i++) {
            bkv_cache_entry *e;
            assert_int_equal(bkv_db_get_table(db, v->files[l][i], &e, NULL), BKV_OK);
            const bkv_table_props *p = bkv_table_properties(bkv_cache_value(e));
            out[l].tables++;
            out[l].types_seen |= 1 << p->filter_type;
            if (p->filter_bytes) bits += (p->filter_bytes - 72) * 8; /* less header and checksum */
            keys += p->num_entries;
            bkv_cache_release(db->table_cache, e);
        }
        out[l].bits_per_key = keys ? (double)bits / (double)keys : 0;
    }
    bkv_tree_version_unref(v);
}

static void filters_follow_the_level_policy(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/policy", dir);
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 32 * 1024;
    o.max_bytes_for_level_base = 128 * 1024;
    o.target_file_size = 32 * 1024;
    o.level_size_multiplier = 4;
    o.level0_compaction_trigger = 8;
    o.level0_slowdown_trigger = o.level0_stop_trigger = 1 << 20;
    o.filter_type_per_level[0] = BKV_FILTER_BLOOM;
    o.bits_per_key_per_level[0] = 16;
    o.filter_type = BKV_FILTER_BLOCKED_BLOOM;
    o.bits_per_key = 6;
    o.optimize_filters_for_hits = 1;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    char val[100];
    memset(val, 'x', sizeof val);
    for (int i = 0; i < 20000; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%08d", (i * 7919) % 20000);
        assert_int_equal(bkv_put(db, NULL, key, strlen(key), val, sizeof val), BKV_OK);
    }
    assert_int_equal(bkv_compact(db), BKV_OK);
    /* Leave a few fresh tables in level 0. */
    for (int i = 0; i < 3000; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%08d", i);
        assert_int_equal(bkv_put(db, NULL, key, strlen(key), val, sizeof val), BKV_OK);
    }
    assert_int_equal(bkv_flush(db), BKV_OK);
    level_filters lf[BKV_NUM_LEVELS];
    inspect(db, lf);
    int bottom = -1, middle = 0;
    for (int l = 1; l < BKV_NUM_LEVELS; l++)
        if (lf[l].tables) bottom = l;
    assert_true(lf[0].tables > 0);
    assert_int_equal(lf[0].types_seen, 1 << BKV_FILTER_BLOOM);
    assert_true(lf[0].bits_per_key > 14 && lf[0].bits_per_key < 18);
    assert_true(bottom >= 2);
    /* Tables compacted into the bottom level get no filter; one moved down
     * whole (a trivial move) keeps the filter it was written with. */
    assert_true(lf[bottom].types_seen & (1 << BKV_FILTER_NONE));
    assert_true(lf[bottom].bits_per_key < lf[1].bits_per_key / 2);
    for (int l = 1; l < bottom; l++)
        if (lf[l].tables) {
            middle = 1;
            assert_int_equal(lf[l].types_seen & (1 << BKV_FILTER_BLOOM), 0);
            assert_true(lf[l].types_seen & (1 << BKV_FILTER_BLOCKED_BLOOM));
        }
    assert_true(middle);
    /* Reads still right everywhere. */
    for (int i = 0; i < 20000; i += 97) {
        char key[32];
        snprintf(key, sizeof key, "k%08d", i);
        void *v;
        size_t n;
        assert_int_equal(bkv_get(db, NULL, key, strlen(key), &v, &n), BKV_OK);
        bkv_free(v);
    }
    assert_int_equal(bkv_close(db), BKV_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(filters_follow_the_level_policy)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
