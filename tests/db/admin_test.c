/* Whole-database calls: destroy, checkpoint, compact a range, approximate
 * sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "test_db.h"
#include "test_dir.h"

TEST_DIR_FIXTURE("admin")

static void key(char *k, int i) { snprintf(k, 32, "key%06d", i); }
static int val(char *v, int i, int ver) { return snprintf(v, 64, "value-%06d-version-%d-padding", i, ver); }

static bkv_db *open_small(const char *path, int style, int value_index) {
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 16 << 10;
    o.target_file_size = 16 << 10;
    o.max_bytes_for_level_base = 64 << 10;
    o.compaction_style = style;
    o.value_index = value_index;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    return db;
}

static void put_range(bkv_db *db, int from, int to, int ver) {
    char k[32], v[64];
    for (int i = from; i < to; i++) {
        key(k, i);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, (size_t)val(v, i, ver)), BKV_OK);
    }
}

/* version 0: absent. */
static void expect(bkv_db *db, int i, int ver) {
    char k[32], v[64];
    key(k, i);
    void *got;
    size_t gl;
    int rc = bkv_get(db, NULL, k, strlen(k), &got, &gl);
    if (!ver) {
        assert_int_equal(rc, BKV_NOTFOUND);
        return;
    }
    assert_int_equal(rc, BKV_OK);
    assert_int_equal(gl, (size_t)val(v, i, ver));
    assert_memory_equal(got, v, gl);
    bkv_free(got);
}

static uint64_t prop(bkv_db *db, const char *name) {
    char *s = bkv_property(db, name);
    assert_non_null(s);
    uint64_t n = strtoull(s, NULL, 10);
    bkv_free(s);
    return n;
}

static void destroy_removes_only_the_database(void **state) {
    (void)state;
    char db_path[300], other[400];
    snprintf(db_path, sizeof db_path, "%s/d1", dir);
    bkv_db *db = open_small(db_path, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    put_range(db, 0, 2000, 1);
    assert_int_equal(bkv_destroy(db_path), BKV_BUSY);
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_destroy(db_path), BKV_OK);
    assert_int_equal(access(db_path, F_OK), -1);
    assert_int_equal(bkv_destroy(db_path), BKV_OK); /* already gone */
    /* A file of the user's keeps it and its directory. */
    db = open_small(db_path, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    put_range(db, 0, 100, 1);
    assert_int_equal(bkv_close(db), BKV_OK);
    snprintf(other, sizeof other, "%s/notes.txt", db_path);
    FILE *f = fopen(other, "w");
    fputs("mine", f);
    fclose(f);
    assert_int_equal(bkv_destroy(db_path), BKV_OK);
    assert_int_equal(access(other, F_OK), 0);
    snprintf(other, sizeof other, "%s/CURRENT", db_path);
    assert_int_equal(access(other, F_OK), -1);
    assert_int_equal(bkv_destroy(NULL), BKV_INVALID);
}

static int count_found(void *arg, const void *k, size_t kl, const void *v, size_t vl) {
    (void)k, (void)kl, (void)v, (void)vl;
    ++*(int *)arg;
    return 0;
}

static void problem(void *arg, const char *text) {
    fprintf(stderr, "check: %s\n", text);
    ++*(int *)arg;
}

static void checkpoint_is_a_consistent_copy(void **state) {
    (void)state;
    char src[300], ck[300];
    snprintf(src, sizeof src, "%s/src", dir);
    snprintf(ck, sizeof ck, "%s/ck", dir);
    bkv_db *db = open_small(src, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_BITSLICED);
    put_range(db, 0, 5000, 1);
    put_range(db, 0, 100, 2); /* some still in the memtable */
    assert_int_equal(bkv_checkpoint(db, ck), BKV_OK);
    /* Tables are linked: a table of the copy is the same inode. */
    int linked = 0;
    for (int n = 1; n < 2000 && !linked; n++) {
        char a[400], b[400];
        snprintf(a, sizeof a, "%s/%06d.sst", src, n);
        snprintf(b, sizeof b, "%s/%06d.sst", ck, n);
        struct stat sa, sb;
        if (stat(a, &sa) == 0 && stat(b, &sb) == 0) linked = sa.st_ino == sb.st_ino;
    }
    assert_true(linked);
    /* Later writes, deletes and compactions reach only the source. */
    put_range(db, 5000, 6000, 1);
    char k[32];
    for (int i = 0; i < 1000; i++) {
        key(k, i);
        assert_int_equal(bkv_delete(db, NULL, k, strlen(k)), BKV_OK);
    }
    assert_int_equal(bkv_compact(db), BKV_OK);
    assert_int_equal(bkv_checkpoint(db, ck), BKV_INVALID); /* exists */
    assert_non_null(strstr(bkv_errmsg(db), "exists"));
    int problems = 0;
    assert_int_equal(bkv_check(ck, problem, &problems), BKV_OK);
    bkv_db *copy = open_small(ck, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    for (int i = 0; i < 6000; i += 7) expect(copy, i, i < 100 ? 2 : i < 5000 ? 1 : 0);
    int found = 0;
    char v[64];
    int vl = val(v, 4242, 1);
    assert_int_equal(bkv_find_value(copy, NULL, v, (size_t)vl, count_found, &found, NULL), BKV_OK);
    assert_int_equal(found, 1);
    put_range(copy, 0, 10, 3); /* the copy is a database of its own */
    assert_int_equal(bkv_close(copy), BKV_OK);
    for (int i = 0; i < 6000; i += 7) expect(db, i, i < 1000 ? 0 : 1);
    assert_int_equal(bkv_close(db), BKV_OK);
    problems = 0;
    assert_int_equal(bkv_check(src, problem, &problems), BKV_OK);
}

static void compact_range_reaches_the_last_level(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/cr", dir);
    bkv_db *db = open_small(path, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    put_range(db, 0, 8000, 1);
    put_range(db, 0, 8000, 2);
    char k[32];
    for (int i = 0; i < 8000; i += 2) {
        key(k, i);
        assert_int_equal(bkv_delete(db, NULL, k, strlen(k)), BKV_OK);
    }
    /* A range first (level-0 tables outside it may stay where they are). */
    char lo[32], hi[32];
    key(lo, 1000);
    key(hi, 1999);
    assert_int_equal(bkv_compact_range(db, lo, strlen(lo), hi, strlen(hi)), BKV_OK);
    for (int i = 0; i < 8000; i += 13) expect(db, i, i % 2 ? 2 : 0);
    /* Then everything: one level holds it all, without the tombstones. */
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    int levels = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        char name[64];
        snprintf(name, sizeof name, "bloomkv.num-files-at-level%d", l);
        levels += prop(db, name) > 0;
    }
    assert_int_equal(levels, 1);
    for (int i = 0; i < 8000; i += 13) expect(db, i, i % 2 ? 2 : 0);
    uint64_t all;
    assert_int_equal(bkv_approximate_size(db, NULL, 0, NULL, 0, &all), BKV_OK);
    /* 4000 live values of ~40 bytes, no old versions or tombstones left. */
    assert_true(all > 4000 * 40 && all < 4000 * 90);
    /* Approximate sizes: half the keys, about half the bytes; none beyond. */
    uint64_t half, none;
    key(lo, 4000);
    assert_int_equal(bkv_approximate_size(db, NULL, 0, lo, strlen(lo), &half), BKV_OK);
    assert_true(half > all / 3 && half < all * 2 / 3);
    key(lo, 9000);
    assert_int_equal(bkv_approximate_size(db, lo, strlen(lo), NULL, 0, &none), BKV_OK);
    assert_int_equal(none, 0);
    /* Rewriting in place when everything is already at the bottom. */
    for (int i = 1; i < 8000; i += 2) {
        key(k, i);
        assert_int_equal(bkv_delete(db, NULL, k, strlen(k)), BKV_OK);
    }
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    assert_int_equal(bkv_approximate_size(db, NULL, 0, NULL, 0, &all), BKV_OK);
    assert_true(all < 4096);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void compact_range_tiered_makes_one_run(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/tiered", dir);
    bkv_db *db = open_small(path, BKV_COMPACTION_TIERED, BKV_VALUE_INDEX_NONE);
    for (int round = 1; round <= 3; round++) put_range(db, 0, 3000, round);
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    assert_int_equal(prop(db, "bloomkv.num-files-at-level0"), 1);
    for (int i = 0; i < 3000; i += 11) expect(db, i, 3);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* The live-key estimate: memtable rows count as they are, each table
 * deletion takes itself and the row it hides off. */
static void live_key_estimate(void **state) {
    (void)state;
    char path[300], k[32];
    snprintf(path, sizeof path, "%s/live", dir);
    bkv_db *db = test_open_default(path);
    put_range(db, 0, 1000, 1);
    assert_int_equal(prop(db, "bloomkv.memtable-entries"), 1000);
    assert_int_equal(prop(db, "bloomkv.estimate-live-keys"), 1000);
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(prop(db, "bloomkv.memtable-entries"), 0);
    for (int i = 0; i < 100; i++) {
        key(k, i);
        assert_int_equal(bkv_delete(db, NULL, k, strlen(k)), BKV_OK);
    }
    assert_int_equal(prop(db, "bloomkv.estimate-live-keys"), 1100); /* deletions in a memtable count as rows */
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(prop(db, "bloomkv.estimate-live-keys"), 900);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* A flush opens the table it wrote: its filter is in memory before any
 * read asks for it. */
static void flush_opens_the_table_it_wrote(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/opened", dir);
    bkv_db *db = test_open_default(path);
    assert_int_equal(prop(db, "bloomkv.filter-memory"), 0);
    put_range(db, 0, 5000, 1);
    assert_int_equal(bkv_flush(db), BKV_OK);
    uint64_t filters = prop(db, "bloomkv.filter-memory");
    assert_true(filters >= 5000 * 10 / 8); /* 10 bits a key */
    expect(db, 17, 1);
    assert_int_equal(prop(db, "bloomkv.filter-memory"), filters); /* the read found it open */
    assert_int_equal(bkv_close(db), BKV_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(destroy_removes_only_the_database),
        cmocka_unit_test(flush_opens_the_table_it_wrote),
        cmocka_unit_test(checkpoint_is_a_consistent_copy),
        cmocka_unit_test(compact_range_reaches_the_last_level),
        cmocka_unit_test(compact_range_tiered_makes_one_run),
        cmocka_unit_test(live_key_estimate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
