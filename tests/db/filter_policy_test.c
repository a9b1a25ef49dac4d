/* Per-level filter policy (white-box: inspects the tables of each level). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/filter_budget.h"
#include "db/table_file.h"
#include "db/version_set.h"
#include "table/table.h"
#include "test_db.h"
#include "test_dir.h"

TEST_DIR_FIXTURE("policy")

typedef struct level_filters {
    size_t tables;
    size_t partitioned;    /* tables whose filter is partitioned */
    int types_seen;        /* bit per filter type */
    double bits_per_key;   /* filter bits over entries, summed over tables */
    size_t ranged;         /* tables with a range filter */
    double range_bits;     /* their range filter bits over their keys */
} level_filters;

static void inspect(bkv_db *db, level_filters out[BKV_MAX_LEVELS]) {
    memset(out, 0, sizeof(level_filters) * BKV_MAX_LEVELS);
    bkv_db_lock(db);
    bkv_tree_version *v = bkv_vset_current(&db->vset);
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    bkv_db_unlock(db);
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        uint64_t bits = 0, keys = 0, rbits = 0, rkeys = 0;
        for (size_t i = 0; i < v->nfiles[l]; i++) {
            bkv_cache_entry *e;
            assert_int_equal(bkv_db_get_table(db, v->files[l][i], &e, NULL), BKV_OK);
            const bkv_table_props *p = bkv_table_properties(bkv_cache_value(e));
            out[l].tables++;
            out[l].types_seen |= 1 << p->filter_type;
            out[l].partitioned += p->filter_partitions > 0;
            if (p->filter_bytes) bits += (p->filter_bytes - 72) * 8; /* less header and checksum */
            keys += p->num_entries;
            if (p->range_filter_bytes) {
                out[l].ranged++;
                rbits += p->range_filter_bytes * 8;
                rkeys += p->num_keys;
            }
            bkv_cache_release(db->table_cache, e);
        }
        out[l].bits_per_key = keys ? (double)bits / (double)keys : 0;
        out[l].range_bits = rkeys ? (double)rbits / (double)rkeys : 0;
    }
    bkv_tree_version_unref(v);
}

static void put_keys(bkv_db *db, int n, int stride, int offset) {
    char val[100];
    memset(val, 'x', sizeof val);
    for (int i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%08d", (i * stride + offset) % n);
        assert_int_equal(bkv_put(db, NULL, key, strlen(key), val, sizeof val), BKV_OK);
    }
}

/* Keys 0, step, 2 step, ... below n are all found. */
static void expect_keys(bkv_db *db, int n, int step) {
    for (int i = 0; i < n; i += step) {
        char key[32];
        snprintf(key, sizeof key, "k%08d", i);
        void *v;
        size_t len;
        assert_int_equal(bkv_get(db, NULL, key, strlen(key), &v, &len), BKV_OK);
        bkv_free(v);
    }
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
    /* Level 0 (short-lived tables) without a range filter; the others at the default. */
    bkv_level_options levels[1] = {{.filter_type = BKV_FILTER_BLOOM, .bits_per_key = 16, .range_filter_bits_per_key = -1}};
    o.range_filter_bits_per_key = 12;
    o.level_options = levels;
    o.level_options_count = 1;
    o.filter_type = BKV_FILTER_BLOCKED_BLOOM;
    o.bits_per_key = 6;
    o.optimize_filters_for_hits = 1;
    /* More levels than the engine has is refused, naming the field. */
    o.level_options_count = BKV_MAX_LEVELS + 1;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "level_options_count"));
    /* A range filter a level cannot have is refused, naming the field. */
    o.level_options_count = 1;
    levels[0].range_filter_bits_per_key = 2;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "level_options[0].range_filter_bits_per_key"));
    levels[0].range_filter_bits_per_key = -1;
    o.level_options_count = 1;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    /* The open kept a copy: the caller's array may change or go. */
    levels[0] = (bkv_level_options){.filter_type = 12345, .bits_per_key = 1e9};
    put_keys(db, 20000, 7919, 0);
    assert_int_equal(bkv_compact(db), BKV_OK);
    /* Leave a few fresh tables in level 0. */
    put_keys(db, 3000, 1, 0);
    assert_int_equal(bkv_flush(db), BKV_OK);
    level_filters lf[BKV_MAX_LEVELS];
    inspect(db, lf);
    int bottom = -1, middle = 0;
    for (int l = 1; l < BKV_MAX_LEVELS; l++)
        if (lf[l].tables) bottom = l;
    assert_true(lf[0].tables > 0);
    assert_int_equal(lf[0].types_seen, 1 << BKV_FILTER_BLOOM);
    assert_true(lf[0].bits_per_key > 14 && lf[0].bits_per_key < 18);
    assert_int_equal(lf[0].ranged, 0);
    /* No table reaches a deeper level whole: level 0's range policy differs. */
    for (int l = 1; l < BKV_MAX_LEVELS; l++) {
        assert_int_equal(lf[l].ranged, lf[l].tables);
        if (lf[l].tables && !(lf[l].range_bits > 12 && lf[l].range_bits < 16)) /* a small table pays its header */
            fail_msg("level %d: range filters of %.2f bits/key", l, lf[l].range_bits);
    }
    assert_true(bottom >= 2);
    /* Tables compacted into the bottom level get no filter; one moved down
     * whole (a trivial move) keeps the filter it was written with. */
    assert_true(lf[bottom].types_seen & (1 << BKV_FILTER_NONE));
    /* How many tables reach the bottom whole depends on the compactions'
     * timing (a sanitizer build moved more): fewer bits there, not a share. */
    if (!(lf[bottom].bits_per_key < lf[1].bits_per_key))
        fail_msg("bottom level %d: %.2f bits/key, level 1: %.2f", bottom, lf[bottom].bits_per_key, lf[1].bits_per_key);
    for (int l = 1; l < bottom; l++)
        if (lf[l].tables) {
            middle = 1;
            assert_int_equal(lf[l].types_seen & (1 << BKV_FILTER_BLOOM), 0);
            assert_true(lf[l].types_seen & (1 << BKV_FILTER_BLOCKED_BLOOM));
        }
    assert_true(middle);
    /* Reads still right everywhere. */
    expect_keys(db, 20000, 97);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void report_problem(void *arg, const char *problem) {
    (void)arg;
    fail_msg("check: %s", problem);
}

/* The deepest level holding tables (0 when only level 0 does). */
static int bottom_level(const level_filters lf[BKV_MAX_LEVELS]) {
    int bottom = 0;
    for (int l = 1; l < BKV_MAX_LEVELS; l++)
        if (lf[l].tables) bottom = l;
    return bottom;
}

static void small_tree_options(bkv_options *o) {
    bkv_options_init(o);
    o->write_buffer_size = 32 * 1024;
    o->max_bytes_for_level_base = 128 * 1024;
    o->target_file_size = 32 * 1024;
    o->level_size_multiplier = 4;
    o->level0_compaction_trigger = 4;
}

/* Partitioned filters through the whole engine: every key found, absent
 * keys stopped by the filters, the database checks clean, and one opened
 * later without partitions reads the old tables and writes whole filters. */
static int write_to_file(void *arg, const char *text, size_t len) {
    return fwrite(text, 1, len, arg) == len ? 0 : -1;
}

static void partitioned_filters_in_a_database(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/parted", dir);
    bkv_options o;
    small_tree_options(&o);
    o.partition_filters = 1;
    o.filter_partition_size = 256;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    put_keys(db, 20000, 7919, 0);
    assert_int_equal(bkv_flush(db), BKV_OK);
    level_filters lf[BKV_MAX_LEVELS];
    inspect(db, lf);
    size_t tables = 0, partitioned = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) tables += lf[l].tables, partitioned += lf[l].partitioned;
    assert_true(tables > 2);
    assert_int_equal(partitioned, tables);
    uint64_t blocks = test_counter(db, "blocks-read");
    expect_keys(db, 20000, 1);
    for (int i = 0; i < 20000; i++) {
        char key[32];
        snprintf(key, sizeof key, "m%08d", i);
        void *v;
        size_t n;
        assert_int_equal(bkv_get(db, NULL, key, strlen(key), &v, &n), BKV_NOTFOUND);
    }
    /* About one block per found key; the absent ones add a few percent. */
    uint64_t read = test_counter(db, "blocks-read") - blocks;
    if (read > 20000 * 13 / 10) fail_msg("%llu blocks read for 20000 found and 20000 absent keys", (unsigned long long)read);
    assert_true(test_counter(db, "filter-partitions-read") > 0);
    /* bloomkv dump describes a partitioned filter. */
    bkv_db_lock(db);
    uint64_t number = 0;
    const bkv_tree_version *v = bkv_vset_current(&db->vset);
    for (int l = 0; l < BKV_MAX_LEVELS && !number; l++)
        if (v->nfiles[l]) number = v->files[l][0]->number;
    bkv_db_unlock(db);
    assert_true(number > 0);
    char table[BKV_PATH_MAX], *text = NULL;
    size_t text_len = 0;
    bkv_table_name(table, path, number);
    FILE *out = open_memstream(&text, &text_len);
    assert_int_equal(bkv_dump_table(table, 0, write_to_file, out), BKV_OK);
    fclose(out);
    assert_non_null(strstr(text, "partitions"));
    assert_null(strstr(text, "DAMAGED"));
    free(text);
    char *stats = bkv_property(db, "bloomkv.stats");
    assert_non_null(strstr(stats, "expected false-positive block reads per missing get"));
    bkv_free(stats);
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_check(path, report_problem, NULL), BKV_OK);

    o.partition_filters = 0;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    put_keys(db, 3000, 1, 20000);
    assert_int_equal(bkv_flush(db), BKV_OK);
    inspect(db, lf);
    tables = partitioned = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) tables += lf[l].tables, partitioned += lf[l].partitioned;
    assert_true(tables > partitioned);
    expect_keys(db, 20000, 7);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* Monkey's rule: rates proportional to run sizes, exactly the budget
 * spent, and a run whose rate would reach 1 left without a filter. */
static void monkey_allocation(void **state) {
    (void)state;
    const uint64_t n[] = {1000, 10000, 100000, 1000000};
    double budget = 6.0 * 1111000, spent = 0, ratio = 0;
    for (size_t i = 0; i < 4; i++) {
        double bits = bkv_monkey_bits_per_key(n, 4, i, budget);
        spent += bits * (double)n[i];
        double rate = exp(-bits * M_LN2 * M_LN2);
        if (i) assert_true(fabs(rate / (double)n[i] / ratio - 1) < 1e-9);
        ratio = rate / (double)n[i];
        if (i) assert_true(bits < bkv_monkey_bits_per_key(n, 4, i - 1, budget));
    }
    assert_true(fabs(spent / budget - 1) < 1e-9);
    /* 10000 bits for a million keys: the biggest run gets none, the others
     * share the budget. */
    const uint64_t skewed[] = {100, 1000, 1000000};
    assert_true(bkv_monkey_bits_per_key(skewed, 3, 2, 10000) == 0);
    double small = bkv_monkey_bits_per_key(skewed, 3, 0, 10000);
    assert_true(small > 0 && small <= BKV_BUDGET_MAX_BITS);
    assert_true(bkv_monkey_bits_per_key(n, 4, 0, 0) == 0);
}

/* With a budget, deeper (bigger) levels get fewer bits per key than the
 * small ones above, the total stays near the budget, and an explicit
 * per-level setting still wins. */
static void budget_sizes_filters_by_level(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/budget", dir);
    bkv_options o;
    small_tree_options(&o);
    o.level0_slowdown_trigger = o.level0_stop_trigger = 1 << 20;
    o.filter_memory_budget = 40000 * 6 / 8; /* 6 bits per key on average at 40000 keys */
    bkv_level_options levels[2] = {{.filter_type = -1, .bits_per_key = -1}, {.filter_type = -1, .bits_per_key = 12}};
    o.level_options = levels;
    o.level_options_count = 2;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    put_keys(db, 40000, 7919, 0);
    assert_int_equal(bkv_compact(db), BKV_OK);
    /* Fresh level-0 tables that stay there, however slow the machine. */
    assert_int_equal(bkv_close(db), BKV_OK);
    o.level0_compaction_trigger = 1000;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    put_keys(db, 2000, 1, 0);
    assert_int_equal(bkv_flush(db), BKV_OK);
    level_filters lf[BKV_MAX_LEVELS];
    inspect(db, lf);
    int bottom = bottom_level(lf);
    assert_true(bottom >= 2 && lf[0].tables > 0);
    if (!(lf[0].bits_per_key > lf[bottom].bits_per_key + 2))
        fail_msg("level 0: %.2f bits/key, level %d: %.2f", lf[0].bits_per_key, bottom, lf[bottom].bits_per_key);
    /* (Tables this small round their filters up to whole cache lines.) */
    if (lf[1].tables) assert_true(lf[1].bits_per_key >= 12 && lf[1].bits_per_key < 14);
    expect_keys(db, 40000, 13);
    char *stats = bkv_property(db, "bloomkv.stats");
    assert_non_null(strstr(stats, "sized by filter_memory_budget"));
    bkv_free(stats);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* Range filters are paid from the budget first: the key filters of a new
 * table share the budget less the range filters' bits for every key of
 * the tree, none once those take it all (checked on each database's own
 * tree, which background compactions shape differently from run to run);
 * and through the whole engine, key filters beside 4-bit range filters
 * end with fewer bits than alone, the range filters with their own. */
static double bottom_key_bits(const char *name, double range_bits, double *range_bits_seen) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    bkv_options o;
    small_tree_options(&o);
    o.filter_memory_budget = 40000 * 6 / 8;
    o.range_filter_bits_per_key = range_bits;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    put_keys(db, 40000, 7919, 0);
    assert_int_equal(bkv_compact(db), BKV_OK);
    level_filters lf[BKV_MAX_LEVELS];
    inspect(db, lf);
    int bottom = bottom_level(lf);
    *range_bits_seen = lf[bottom].range_bits;
    bkv_db_lock(db);
    const bkv_tree_version *v = bkv_vset_current(&db->vset);
    uint64_t entries = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < v->nfiles[l]; i++) entries += v->files[l][i]->entries;
    double left = (double)o.filter_memory_budget - range_bits * (double)(entries + 1000) / 8;
    double got = bkv_table_file_budget_bits(db, v, bottom, 1000);
    double want = left < 1 ? 0 : bkv_filter_budget_bits(v, (uint64_t)left, bottom, 1000);
    if (fabs(got - want) > 1e-9) fail_msg("%s: %.4f bits per key for a new table, %.4f expected", name, got, want);
    if (range_bits > 0 && left >= 1)
        assert_true(got < bkv_filter_budget_bits(v, o.filter_memory_budget, bottom, 1000));
    bkv_db_unlock(db);
    expect_keys(db, 40000, 13);
    assert_int_equal(bkv_close(db), BKV_OK);
    return lf[bottom].bits_per_key;
}

static void budget_pays_range_filters_first(void **state) {
    (void)state;
    double range_seen;
    double alone = bottom_key_bits("budget-alone", 0, &range_seen);
    double shared = bottom_key_bits("budget-range4", 4, &range_seen);
    assert_true(range_seen >= 4);
    if (!(shared < alone)) fail_msg("key filter bits: %.2f alone, %.2f beside 4-bit range filters", alone, shared);
    bottom_key_bits("budget-range8", 8, &range_seen); /* a new table gets no key filter: checked inside */
    assert_true(range_seen >= 8);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(filters_follow_the_level_policy),
                                       cmocka_unit_test(partitioned_filters_in_a_database),
                                       cmocka_unit_test(monkey_allocation),
                                       cmocka_unit_test(budget_sizes_filters_by_level),
                                       cmocka_unit_test(budget_pays_range_filters_first)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
