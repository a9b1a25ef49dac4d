/* bkv_repair's salvage: whatever was damaged, every row that can still be
 * read comes back with its own value (never a wrong one), the rows lost
 * are the damaged part's only, the originals wait in lost/, and the
 * repaired database passes bkv_check. */
#include <dirent.h>
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
#include "table/table.h"
#include "test_dir.h"

TEST_DIR_FIXTURE("repair")

#define ROWS 20000

static void sub(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static bkv_db *open_db(const char *path, int value_index) {
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 1;
    o.value_index = value_index;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    return db;
}

static void row(int i, char *k, char *v) {
    snprintf(k, 32, "key%06d", i);
    snprintf(v, 32, "value%d", i % 97);
}

/* Rows [from, to), one write each (so a WAL holds one record per row). */
static void put_rows(bkv_db *db, int from, int to) {
    for (int i = from; i < to; i++) {
        char k[32], v[32];
        row(i, k, v);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
    }
}

/* The rows of a database, each checked against row(): the number found.
 * A row with another value, or a key row() never wrote, fails the test. */
static int count_rows(const char *path) {
    bkv_options o;
    bkv_options_init(&o);
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
    int n = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it), n++) {
        size_t kl, vl;
        const char *k = bkv_iter_key(it, &kl), *v = bkv_iter_value(it, &vl);
        char key[32] = "", want_k[32], want_v[32];
        assert_true(kl == 9 && memcmp(k, "key", 3) == 0);
        memcpy(key, k, kl);
        row(atoi(key + 3), want_k, want_v);
        assert_int_equal(vl, strlen(want_v));
        assert_memory_equal(v, want_v, vl);
    }
    assert_int_equal(bkv_iter_status(it), BKV_OK);
    bkv_iter_destroy(it);
    assert_int_equal(bkv_close(db), BKV_OK);
    return n;
}

static void count_problem(void *arg, const char *problem) {
    (void)problem;
    ++*(int *)arg;
}

static void expect_sound(const char *path) {
    int problems = 0;
    assert_int_equal(bkv_check(path, count_problem, &problems), BKV_OK);
    assert_int_equal(problems, 0);
}

/* The database's one table (the test compacts into one): its number. */
static uint64_t only_table(const char *path) {
    DIR *d = opendir(path);
    assert_non_null(d);
    uint64_t number = 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len > 4 && strcmp(de->d_name + len - 4, ".sst") == 0) {
            number = strtoull(de->d_name, NULL, 10);
            n++;
        }
    }
    closedir(d);
    assert_int_equal(n, 1);
    return number;
}

static void table_path(char *out, size_t n, const char *db, uint64_t number) {
    snprintf(out, n, "%s/%06llu.sst", db, (unsigned long long)number);
}

/* A database of ROWS rows in one table, closed. */
static void one_table(const char *path, int value_index) {
    bkv_db *db = open_db(path, value_index);
    put_rows(db, 0, ROWS);
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void props_of(const char *path, uint64_t number, bkv_table_props *out) {
    bkv_table *t;
    bkv_err e = {{0}};
    assert_int_equal(bkv_table_open(bkv_env_posix(), path, number, NULL, NULL, &t, &e), BKV_OK);
    *out = *bkv_table_properties(t);
    out->smallest = out->largest = NULL; /* freed with the table */
    bkv_table_close(t);
}

/* A database of ROWS rows in one table: its number, path (in t) and properties. */
static uint64_t one_table_at(const char *path, int value_index, char *t, size_t tn, bkv_table_props *p) {
    one_table(path, value_index);
    uint64_t number = only_table(path);
    table_path(t, tn, path, number);
    props_of(t, number, p);
    return number;
}

static void repair_says(const char *path, const char *what) {
    char done[4096];
    assert_int_equal(bkv_repair(path, done, sizeof done), BKV_OK);
    if (!strstr(done, what)) fail_msg("repair said '%s', not '%s'", done, what);
}

/* One damaged data block: the rows of that block are lost, every other
 * row kept with its value; the original is in lost/; a second repair
 * finds nothing to do. */
static void damaged_block_costs_its_rows_only(void **state) {
    (void)state;
    char path[300], t[400], aside[400];
    sub(path, sizeof path, "block");
    bkv_table_props p;
    uint64_t number = one_table_at(path, BKV_VALUE_INDEX_NONE, t, sizeof t, &p);
    assert_int_equal(test_xor_byte(t, (long)(p.data_bytes / 2), 0x40), 0);
    assert_int_not_equal(bkv_check(path, NULL, NULL), BKV_OK);

    repair_says(path, "1 of");
    snprintf(aside, sizeof aside, "%s/lost/%06llu.sst", path, (unsigned long long)number);
    assert_true(exists(aside));
    assert_false(exists(t));
    int n = count_rows(path);
    uint64_t per_block = p.num_entries / p.num_data_blocks + 1;
    assert_true(n < ROWS && n >= ROWS - (int)(2 * per_block));
    expect_sound(path);
    repair_says(path, "nothing to repair");
    assert_int_equal(count_rows(path), n);
}

/* A filter or the footer: the filter is rebuilt with every row; a table
 * whose footer is gone cannot be read, and is set aside whole. */
static void damaged_filter_is_rebuilt_and_unreadable_table_set_aside(void **state) {
    (void)state;
    char path[300], t[400];
    sub(path, sizeof path, "filter");
    bkv_table_props p;
    uint64_t number = one_table_at(path, BKV_VALUE_INDEX_NONE, t, sizeof t, &p);
    assert_true(p.filter_bytes > 1000);
    /* The filter block follows the data blocks and their 9-byte trailers. */
    long filter_middle = (long)(p.data_bytes + 9 * p.num_data_blocks + p.filter_bytes / 2);
    assert_int_equal(test_xor_byte(t, filter_middle, 0x01), 0);
    repair_says(path, "with all 20000 entries");
    assert_int_equal(count_rows(path), ROWS);
    expect_sound(path);

    number = only_table(path);
    table_path(t, sizeof t, path, number);
    struct stat st;
    assert_int_equal(stat(t, &st), 0);
    assert_int_equal(test_xor_byte(t, (long)st.st_size - 1, 0xff), 0); /* the footer's magic */
    repair_says(path, "unreadable");
    assert_int_equal(count_rows(path), 0);
    expect_sound(path);
}

/* A table the manifest names that is gone: dropped, the rest kept. */
static void missing_table_is_dropped(void **state) {
    (void)state;
    char path[300], t[400];
    sub(path, sizeof path, "missing");
    one_table(path, BKV_VALUE_INDEX_NONE);
    table_path(t, sizeof t, path, only_table(path));
    bkv_db *db = open_db(path, BKV_VALUE_INDEX_NONE);
    put_rows(db, ROWS, ROWS + 100); /* in the WAL only */
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(unlink(t), 0);
    repair_says(path, "missing, but the manifest listed it");
    assert_int_equal(count_rows(path), 100);
    expect_sound(path);
}

/* A damaged record in the middle of a WAL: an ordinary open refuses the
 * database; repair keeps the records before and after it. */
static void damaged_wal_record_is_skipped(void **state) {
    (void)state;
    char path[300], log[600] = "", aside[700];
    sub(path, sizeof path, "wal");
    bkv_db *db = open_db(path, BKV_VALUE_INDEX_NONE);
    put_rows(db, 0, 2000);
    assert_int_equal(bkv_close(db), BKV_OK);
    DIR *d = opendir(path);
    struct dirent *de;
    long biggest = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        struct stat st;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        if (len > 4 && strcmp(de->d_name + len - 4, ".log") == 0 && stat(p, &st) == 0 && st.st_size > biggest) {
            biggest = st.st_size;
            snprintf(log, sizeof log, "%s", p);
        }
    }
    closedir(d);
    assert_true(biggest > 40000);
    assert_int_equal(test_xor_byte(log, biggest / 2, 0x10), 0);
    bkv_options o;
    bkv_options_init(&o);
    assert_int_equal(bkv_open(path, &o, &db), BKV_CORRUPTION);

    repair_says(path, "damaged bytes from offset");
    snprintf(aside, sizeof aside, "%s/lost/%s", path, strrchr(log, '/') + 1);
    assert_true(exists(aside));
    int n = count_rows(path);
    assert_true(n < 2000 && n >= 1900);
    expect_sound(path);
}

/* A database with a value index: the rewritten table gets its value
 * filters, and a search finds exactly the rows a scan shows. */
typedef struct found_keys {
    char keys[ROWS][10];
    int n;
} found_keys;

static int collect(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)val, (void)vlen;
    found_keys *f = arg;
    assert_int_equal(klen, 9);
    memcpy(f->keys[f->n], key, 9);
    f->keys[f->n++][9] = 0;
    return 0;
}

static void value_search_after_salvage(void **state) {
    (void)state;
    char path[300], t[400];
    sub(path, sizeof path, "values");
    bkv_table_props p;
    one_table_at(path, BKV_VALUE_INDEX_FLAT, t, sizeof t, &p);
    assert_int_equal(test_xor_byte(t, (long)(p.data_bytes / 3), 0x08), 0);
    repair_says(path, "entries kept in");
    assert_true(count_rows(path) < ROWS);
    bkv_options o;
    bkv_options_init(&o);
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    static found_keys searched, scanned;
    searched.n = scanned.n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "value42", 7, collect, &searched, NULL), BKV_OK);
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) {
        size_t kl, vl;
        const char *k = bkv_iter_key(it, &kl), *v = bkv_iter_value(it, &vl);
        if (vl == 7 && memcmp(v, "value42", 7) == 0) collect(&scanned, k, kl, v, vl);
    }
    bkv_iter_destroy(it);
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_true(scanned.n > 100);
    assert_int_equal(searched.n, scanned.n);
    for (int i = 0; i < scanned.n; i++) assert_string_equal(searched.keys[i], scanned.keys[i]);
    expect_sound(path);
}

/* The keys an iterator with skip_damaged shows, checked as it goes:
 * every value is the newest written for its key; returns how many keys
 * it showed, in order, and the iterator's status in *status. */
static int scan_skipping(const char *path, int forward, int *status) {
    bkv_options o;
    bkv_options_init(&o);
    o.read_only = 1;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.skip_damaged = 1;
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, &ro, &it), BKV_OK);
    int n = 0, last = forward ? -1 : ROWS;
    for (forward ? bkv_iter_seek_to_first(it) : bkv_iter_seek_to_last(it); bkv_iter_valid(it);
         forward ? bkv_iter_next(it) : bkv_iter_prev(it), n++) {
        size_t kl, vl;
        const char *k = bkv_iter_key(it, &kl), *v = bkv_iter_value(it, &vl);
        char key[32] = "";
        memcpy(key, k, kl < 31 ? kl : 31);
        int i = atoi(key + 3);
        assert_true(forward ? i > last : i < last);
        last = i;
        const char *want = i >= 5000 && i < 6000 ? "new" : "old";
        if (vl != 3 || memcmp(v, want, 3)) fail_msg("%s shows %.*s, not %s", key, (int)vl, v, want);
    }
    *status = bkv_iter_status(it);
    if (*status) assert_non_null(strstr(bkv_errmsg(db), "unreadable part"));
    bkv_iter_destroy(it);
    assert_int_equal(bkv_close(db), BKV_OK);
    return n;
}

/* Reading past damage (bkv_read_options.skip_damaged): a damaged block of
 * the newer table leaves its keys out altogether, never showing the older
 * table's versions of them; a table that cannot be opened leaves its
 * range out; the status names what was skipped. */
static void iterators_skip_damage_without_stale_rows(void **state) {
    (void)state;
    char path[300], t[400];
    sub(path, sizeof path, "skip");
    bkv_db *db = open_db(path, BKV_VALUE_INDEX_NONE);
    for (int i = 0; i < ROWS; i++) {
        char k[32];
        snprintf(k, sizeof k, "key%06d", i);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), "old", 3), BKV_OK);
    }
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    uint64_t older = 0; /* the highest table number so far: the newer table's is above */
    DIR *d = opendir(path);
    for (struct dirent *de; (de = readdir(d));)
        if (strstr(de->d_name, ".sst") && strtoull(de->d_name, NULL, 10) > older) older = strtoull(de->d_name, NULL, 10);
    closedir(d);
    for (int i = 5000; i < 6000; i++) {
        char k[32];
        snprintf(k, sizeof k, "key%06d", i);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), "new", 3), BKV_OK);
    }
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
    uint64_t newer = 0;
    d = opendir(path);
    for (struct dirent *de; (de = readdir(d));)
        if (strstr(de->d_name, ".sst") && strtoull(de->d_name, NULL, 10) > older) newer = strtoull(de->d_name, NULL, 10);
    closedir(d);
    assert_true(newer != 0);
    int status;
    assert_int_equal(scan_skipping(path, 1, &status), ROWS);
    assert_int_equal(status, BKV_OK);

    table_path(t, sizeof t, path, newer);
    bkv_table_props p;
    props_of(t, newer, &p);
    assert_true(p.num_data_blocks >= 3);
    assert_int_equal(test_xor_byte(t, (long)(p.data_bytes / 2), 0x20), 0);
    int forward = scan_skipping(path, 1, &status);
    assert_int_equal(status, BKV_CORRUPTION);
    int per_block = (int)(p.num_entries / p.num_data_blocks) + 1;
    if (forward >= ROWS || forward < ROWS - 3 * per_block) fail_msg("%d keys shown", forward);
    assert_int_equal(scan_skipping(path, 0, &status), forward);
    assert_int_equal(status, BKV_CORRUPTION);

    /* Without skipping, the same damage stops the iteration. */
    bkv_options o;
    bkv_options_init(&o);
    o.read_only = 1;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
    int n = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) n++;
    assert_int_equal(bkv_iter_status(it), BKV_CORRUPTION);
    assert_true(n < forward);
    bkv_iter_destroy(it);
    assert_int_equal(bkv_close(db), BKV_OK);

    /* The newer table unreadable whole: its range, key005000..key005999,
     * is left out. */
    struct stat st;
    assert_int_equal(stat(t, &st), 0);
    assert_int_equal(test_xor_byte(t, (long)st.st_size - 1, 0xff), 0);
    assert_int_equal(scan_skipping(path, 1, &status), ROWS - 1000);
    assert_int_equal(status, BKV_CORRUPTION);
}

/* A database in use is not repaired underneath its writer. */
static void open_database_is_refused(void **state) {
    (void)state;
    char path[300], done[256];
    sub(path, sizeof path, "busy");
    bkv_db *db = open_db(path, BKV_VALUE_INDEX_NONE);
    put_rows(db, 0, 10);
    assert_int_equal(bkv_repair(path, done, sizeof done), BKV_BUSY);
    assert_non_null(strstr(bkv_errmsg(NULL), "in use"));
    assert_int_equal(bkv_close(db), BKV_OK);
    char missing[320];
    snprintf(missing, sizeof missing, "%s/not-there", path);
    assert_int_equal(bkv_repair(missing, done, sizeof done), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "not-there"));
    assert_int_equal(bkv_repair(NULL, done, sizeof done), BKV_INVALID);
    repair_says(path, "nothing to repair");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(damaged_block_costs_its_rows_only),
        cmocka_unit_test(damaged_filter_is_rebuilt_and_unreadable_table_set_aside),
        cmocka_unit_test(missing_table_is_dropped),
        cmocka_unit_test(damaged_wal_record_is_skipped),
        cmocka_unit_test(value_search_after_salvage),
        cmocka_unit_test(iterators_skip_damage_without_stale_rows),
        cmocka_unit_test(open_database_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
