/* Bulk load: the table writer and bkv_ingest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "test_db.h"
#include "test_dir.h"

TEST_DIR_FIXTURE("ingest")

static void key(char *k, int i) { snprintf(k, 32, "key%06d", i); }
static int val(char *v, int i, int ver) { return snprintf(v, 64, "value-%06d-version-%d", i, ver); }

static const char *subdir(char *buf, const char *name) {
    snprintf(buf, 320, "%s/%s", dir, name);
    assert_int_equal(mkdir(buf, 0700), 0);
    return buf;
}

static void small_options(bkv_options *o, int style, int value_index) {
    bkv_options_init(o);
    o->create_if_missing = 1;
    o->write_buffer_size = 16 << 10;
    o->target_file_size = 16 << 10;
    o->max_bytes_for_level_base = 64 << 10;
    o->compaction_style = style;
    o->value_index = value_index;
}

static bkv_db *open_with(const char *path, const bkv_options *o) {
    bkv_db *db;
    assert_int_equal(bkv_open(path, o, &db), BKV_OK);
    return db;
}

/* A table of keys [from, to) step `step`, at version ver; every `del`-th
 * key (when del > 0) is a tombstone instead. */
static void write_table(const char *path, const bkv_options *o, int from, int to, int step, int ver, int del) {
    bkv_table_writer *w;
    assert_int_equal(bkv_table_writer_create(o, path, &w), BKV_OK);
    char k[32], v[64];
    for (int i = from; i < to; i += step) {
        key(k, i);
        if (del > 0 && i % del == 0) assert_int_equal(bkv_table_writer_delete(w, k, strlen(k)), BKV_OK);
        else assert_int_equal(bkv_table_writer_put(w, k, strlen(k), v, (size_t)val(v, i, ver)), BKV_OK);
    }
    assert_int_equal(bkv_table_writer_finish(w), BKV_OK);
    bkv_table_writer_destroy(w);
}

static void put_range(bkv_db *db, int from, int to, int ver) {
    char k[32], v[64];
    for (int i = from; i < to; i++) {
        key(k, i);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, (size_t)val(v, i, ver)), BKV_OK);
    }
}

/* ver 0: absent. */
static void expect_at(bkv_db *db, const bkv_snapshot *snap, int i, int ver) {
    char k[32], v[64];
    key(k, i);
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.snapshot = snap;
    void *got;
    size_t gl;
    int rc = bkv_get(db, &ro, k, strlen(k), &got, &gl);
    if (!ver) {
        if (rc != BKV_NOTFOUND) fail_msg("key %d: expected absent, got rc %d", i, rc);
        return;
    }
    if (rc != BKV_OK) fail_msg("key %d: expected version %d, got rc %d (%s)", i, ver, rc, bkv_errmsg(db));
    int n = val(v, i, ver);
    if (gl != (size_t)n || memcmp(got, v, gl) != 0)
        fail_msg("key %d: expected version %d, got %.*s", i, ver, (int)gl, (char *)got);
    bkv_free(got);
}

static void expect(bkv_db *db, int i, int ver) { expect_at(db, NULL, i, ver); }

static int files_at(bkv_db *db, int level) {
    char prop[64];
    snprintf(prop, sizeof prop, "bloomkv.num-files-at-level%d", level);
    char *s = bkv_property(db, prop);
    assert_non_null(s);
    int n = atoi(s);
    bkv_free(s);
    return n;
}

static void no_problem(void *arg, const char *problem) {
    (void)arg;
    fail_msg("check: %s", problem);
}

/* Counts the entries an iterator yields and checks each value. */
static int scan_count(bkv_db *db, const bkv_snapshot *snap) {
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.snapshot = snap;
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, &ro, &it), BKV_OK);
    int n = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) n++;
    assert_int_equal(bkv_iter_status(it), BKV_OK);
    bkv_iter_destroy(it);
    return n;
}

static void writer_refuses_bad_use(void **state) {
    (void)state;
    char base[320];
    const char *d = subdir(base, __func__);
    char path[512];
    snprintf(path, sizeof path, "%s/t.sst", d);
    bkv_table_writer *w;
    assert_int_equal(bkv_table_writer_create(NULL, path, &w), BKV_OK);
    assert_int_equal(bkv_table_writer_put(w, "b", 1, "1", 1), BKV_OK);
    /* Out of order, or repeated: refused, and the table goes on. */
    assert_int_equal(bkv_table_writer_put(w, "a", 1, "1", 1), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "not greater"));
    assert_int_equal(bkv_table_writer_delete(w, "b", 1), BKV_INVALID);
    assert_int_equal(bkv_table_writer_put(w, "c", 1, "2", 1), BKV_OK);
    assert_int_equal(bkv_table_writer_entries(w), 2);
    assert_int_equal(bkv_table_writer_finish(w), BKV_OK);
    assert_int_equal(bkv_table_writer_put(w, "d", 1, "3", 1), BKV_INVALID);
    assert_int_equal(bkv_table_writer_finish(w), BKV_INVALID);
    bkv_table_writer_destroy(w);
    assert_int_equal(access(path, F_OK), 0);

    /* The path must be new: an existing file is never overwritten. */
    assert_int_not_equal(bkv_table_writer_create(NULL, path, &w), BKV_OK);
    assert_null(w);
    unlink(path);

    /* An empty table is refused and removed; an unfinished one is removed. */
    assert_int_equal(bkv_table_writer_create(NULL, path, &w), BKV_OK);
    assert_int_equal(bkv_table_writer_finish(w), BKV_INVALID);
    bkv_table_writer_destroy(w);
    assert_int_not_equal(access(path, F_OK), 0);
    assert_int_equal(bkv_table_writer_create(NULL, path, &w), BKV_OK);
    assert_int_equal(bkv_table_writer_put(w, "a", 1, "1", 1), BKV_OK);
    bkv_table_writer_destroy(w);
    assert_int_not_equal(access(path, F_OK), 0);

    bkv_options o;
    bkv_options_init(&o);
    o.block_size = 0;
    assert_int_equal(bkv_table_writer_create(&o, path, &w), BKV_INVALID);
    assert_int_equal(bkv_table_writer_create(NULL, NULL, &w), BKV_INVALID);
}

/* Nothing overlaps and no snapshot is live: the table keeps sequence 0 and
 * goes to the last level, read like any other, after a reopen too. */
static void ingest_into_empty_database_goes_to_the_bottom(void **state) {
    (void)state;
    char base[320];
    const char *d = subdir(base, __func__);
    char db_path[512], t1[512], t2[512];
    snprintf(db_path, sizeof db_path, "%s/db", d);
    snprintf(t1, sizeof t1, "%s/t1.sst", d);
    snprintf(t2, sizeof t2, "%s/t2.sst", d);
    bkv_options o;
    small_options(&o, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    write_table(t1, &o, 0, 1000, 1, 1, 0);
    write_table(t2, &o, 1000, 2000, 1, 1, 0);
    bkv_db *db = open_with(db_path, &o);
    const char *paths[] = {t2, t1}; /* any order */
    assert_int_equal(bkv_ingest(db, paths, 2, 0), BKV_OK);
    assert_int_equal(files_at(db, BKV_MAX_LEVELS - 1), 2);
    assert_int_equal(access(t1, F_OK), 0); /* copied, not moved */
    for (int i = 0; i < 2000; i += 7) expect(db, i, 1);
    expect(db, 2000, 0);
    assert_int_equal(scan_count(db, NULL), 2000);
    put_range(db, 10, 20, 2); /* later writes win */
    expect(db, 15, 2);
    bkv_close(db);
    assert_int_equal(bkv_check(db_path, no_problem, NULL), BKV_OK);
    db = open_with(db_path, &o);
    expect(db, 15, 2);
    expect(db, 1999, 1);
    assert_int_equal(scan_count(db, NULL), 2000);
    bkv_close(db);
}

/* Over existing data in tables and the memtable: the ingested versions are
 * newer than everything before, older than everything after, and stay so
 * through compactions and reopens. */
static void ingest_over_existing_data_is_newest(void **state) {
    (void)state;
    char base[320];
    const char *d = subdir(base, __func__);
    for (int style = BKV_COMPACTION_LEVELED; style <= BKV_COMPACTION_TIERED; style++) {
        char db_path[512], t[512];
        snprintf(db_path, sizeof db_path, "%s/db%d", d, style);
        snprintf(t, sizeof t, "%s/t%d.sst", d, style);
        bkv_options o;
        small_options(&o, style, BKV_VALUE_INDEX_NONE);
        bkv_db *db = open_with(db_path, &o);
        put_range(db, 0, 3000, 1);
        assert_int_equal(bkv_compact(db), BKV_OK);
        put_range(db, 0, 100, 2); /* in the memtable */
        /* Even keys 0..1998 at version 3; multiples of 10 as tombstones. */
        write_table(t, &o, 0, 2000, 2, 3, 10);
        const char *paths[] = {t};
        assert_int_equal(bkv_ingest(db, paths, 1, BKV_INGEST_MOVE), BKV_OK);
        assert_int_not_equal(access(t, F_OK), 0); /* moved */
        put_range(db, 50, 60, 4);
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < 3000; i++) {
                int want = i >= 50 && i < 60 ? 4 : i < 2000 && i % 2 == 0 ? (i % 10 == 0 ? 0 : 3) : i < 100 ? 2 : 1;
                expect(db, i, want);
            }
            if (round == 0) {
                assert_int_equal(bkv_compact(db), BKV_OK);
            } else if (round == 1) {
                bkv_close(db);
                assert_int_equal(bkv_check(db_path, no_problem, NULL), BKV_OK);
                db = open_with(db_path, &o);
            }
        }
        assert_int_equal(scan_count(db, NULL), 3000 - 200 + 1); /* key 50 was written again */
        bkv_close(db);
    }
}

/* A snapshot or iterator from before an ingest never sees it, even when
 * the table overlaps nothing. */
static void ingest_is_invisible_to_older_snapshots(void **state) {
    (void)state;
    char base[320];
    const char *d = subdir(base, __func__);
    char db_path[512], t[512];
    snprintf(db_path, sizeof db_path, "%s/db", d);
    snprintf(t, sizeof t, "%s/t.sst", d);
    bkv_options o;
    small_options(&o, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    bkv_db *db = open_with(db_path, &o);
    put_range(db, 0, 100, 1);
    const bkv_snapshot *snap = bkv_snapshot_create(db);
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
    write_table(t, &o, 100, 200, 1, 1, 0);
    const char *paths[] = {t};
    assert_int_equal(bkv_ingest(db, paths, 1, 0), BKV_OK);
    expect_at(db, snap, 150, 0);
    expect(db, 150, 1);
    int n = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) n++;
    assert_int_equal(n, 100);
    bkv_iter_destroy(it);
    assert_int_equal(scan_count(db, snap), 100);
    assert_int_equal(scan_count(db, NULL), 200);
    bkv_snapshot_release(db, snap);
    assert_int_equal(bkv_compact(db), BKV_OK);
    expect(db, 150, 1);
    bkv_close(db);
}

/* Everything refused leaves the database and the files as they were. */
static void ingest_refuses_what_it_cannot_trust(void **state) {
    (void)state;
    char base[320];
    const char *d = subdir(base, __func__);
    char db_path[512], a[512], b[512], bad[512], foreign[512];
    snprintf(db_path, sizeof db_path, "%s/db", d);
    snprintf(a, sizeof a, "%s/a.sst", d);
    snprintf(b, sizeof b, "%s/b.sst", d);
    snprintf(bad, sizeof bad, "%s/bad.sst", d);
    snprintf(foreign, sizeof foreign, "%s/foreign.sst", d);
    bkv_options o;
    small_options(&o, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    write_table(a, &o, 0, 500, 1, 1, 0);
    write_table(b, &o, 400, 900, 1, 1, 0);
    bkv_db *db = open_with(db_path, &o);
    put_range(db, 0, 10, 2);

    const char *overlapping[] = {a, b};
    assert_int_equal(bkv_ingest(db, overlapping, 2, BKV_INGEST_MOVE), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "overlapping"));
    assert_int_equal(access(a, F_OK), 0);

    /* One byte changed in the middle of a data block. */
    write_table(bad, &o, 1000, 1500, 1, 1, 0);
    assert_int_equal(test_xor_byte(bad, 100, 0x20), 0);
    const char *damaged[] = {bad};
    assert_int_equal(bkv_ingest(db, damaged, 1, 0), BKV_CORRUPTION);
    assert_non_null(strstr(bkv_errmsg(db), "bad.sst"));

    /* A table of a database (real sequence numbers) is not a writer's. */
    assert_int_equal(bkv_flush(db), BKV_OK);
    char src_db[512];
    snprintf(src_db, sizeof src_db, "%s/src", d);
    bkv_db *other = open_with(src_db, &o);
    put_range(other, 5000, 5100, 1);
    assert_int_equal(bkv_flush(other), BKV_OK);
    bkv_close(other);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp \"$(ls %s/*.sst | head -1)\" %s", src_db, foreign);
    assert_int_equal(system(cmd), 0);
    const char *foreign_paths[] = {foreign};
    assert_int_equal(bkv_ingest(db, foreign_paths, 1, 0), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "sequence number"));

    const char *missing[] = {"/nonexistent/x.sst"};
    assert_int_not_equal(bkv_ingest(db, missing, 1, 0), BKV_OK);
    assert_int_equal(bkv_ingest(db, NULL, 1, 0), BKV_INVALID);
    assert_int_equal(bkv_ingest(db, overlapping, 1, 0x80), BKV_INVALID);
    assert_int_equal(bkv_ingest(db, NULL, 0, 0), BKV_OK);

    for (int i = 0; i < 10; i++) expect(db, i, 2);
    expect(db, 100, 0);
    expect(db, 1200, 0);
    bkv_close(db);
    assert_int_equal(bkv_check(db_path, no_problem, NULL), BKV_OK);
}

/* With a value index, the table must carry the database's value filters;
 * ingested values are then found by value, whichever way they were placed. */
static void ingest_with_a_value_index(void **state) {
    (void)state;
    char base[320];
    const char *d = subdir(base, __func__);
    char db_path[512], plain[512], t1[512], t2[512];
    snprintf(db_path, sizeof db_path, "%s/db", d);
    snprintf(plain, sizeof plain, "%s/plain.sst", d);
    snprintf(t1, sizeof t1, "%s/t1.sst", d);
    snprintf(t2, sizeof t2, "%s/t2.sst", d);
    bkv_options o, no_index;
    small_options(&o, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_BITSLICED);
    small_options(&no_index, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    bkv_db *db = open_with(db_path, &o);
    write_table(plain, &no_index, 0, 100, 1, 1, 0);
    const char *p0[] = {plain};
    assert_int_equal(bkv_ingest(db, p0, 1, 0), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "value"));

    bkv_options other_bits = o;
    other_bits.value_filter_bits = 64 * o.value_partition_entries; /* twice the automatic m */
    bkv_table_writer *w;
    char other[512];
    snprintf(other, sizeof other, "%s/other.sst", d);
    write_table(other, &other_bits, 0, 100, 1, 1, 0);
    const char *p1[] = {other};
    assert_int_equal(bkv_ingest(db, p1, 1, 0), BKV_INVALID);

    write_table(t1, &o, 0, 1000, 1, 1, 0); /* bottom, sequence 0 */
    const char *p2[] = {t1};
    assert_int_equal(bkv_ingest(db, p2, 1, 0), BKV_OK);
    /* Over it: a new version of key 500 through a global sequence. */
    assert_int_equal(bkv_table_writer_create(&o, t2, &w), BKV_OK);
    char v[64];
    assert_int_equal(bkv_table_writer_put(w, "key000500", 9, v, (size_t)val(v, 500, 7)), BKV_OK);
    assert_int_equal(bkv_table_writer_finish(w), BKV_OK);
    bkv_table_writer_destroy(w);
    const char *p3[] = {t2};
    assert_int_equal(bkv_ingest(db, p3, 1, 0), BKV_OK);

    test_found found = {0};
    int n = val(v, 321, 1);
    assert_int_equal(bkv_find_value(db, NULL, v, (size_t)n, test_on_found, &found, NULL), BKV_OK);
    assert_int_equal(found.n, 1);
    assert_int_equal(found.key, 321);
    memset(&found, 0, sizeof found);
    n = val(v, 500, 7);
    assert_int_equal(bkv_find_value(db, NULL, v, (size_t)n, test_on_found, &found, NULL), BKV_OK);
    assert_int_equal(found.n, 1);
    memset(&found, 0, sizeof found);
    n = val(v, 500, 1); /* overwritten by the second ingest */
    assert_int_equal(bkv_find_value(db, NULL, v, (size_t)n, test_on_found, &found, NULL), BKV_OK);
    assert_int_equal(found.n, 0);
    bkv_close(db);
    assert_int_equal(bkv_check(db_path, no_problem, NULL), BKV_OK);
}

static size_t first_byte_prefix(const void *key, size_t klen) {
    (void)key;
    return klen >= 4 ? 4 : SIZE_MAX; }

/* A prefix seek trusts each table's filter to hold prefixes: a table
 * written without the database's extractor would hide keys, so it is
 * refused. */
static void ingest_checks_the_prefix_extractor(void **state) {
    (void)state;
    char base[320];
    const char *d = subdir(base, __func__);
    char db_path[512], t[512], u[512];
    snprintf(db_path, sizeof db_path, "%s/db", d);
    snprintf(t, sizeof t, "%s/t.sst", d);
    snprintf(u, sizeof u, "%s/u.sst", d);
    bkv_options o, without;
    small_options(&o, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    o.prefix_extractor = first_byte_prefix;
    small_options(&without, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    bkv_db *db = open_with(db_path, &o);
    write_table(t, &without, 0, 200, 1, 1, 0);
    const char *p[] = {t};
    assert_int_equal(bkv_ingest(db, p, 1, 0), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "prefix"));
    write_table(u, &o, 0, 200, 1, 1, 0);
    const char *q[] = {u};
    assert_int_equal(bkv_ingest(db, q, 1, 0), BKV_OK);
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.prefix_same_as_start = 1;
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, &ro, &it), BKV_OK);
    int n = 0;
    for (bkv_iter_seek(it, "key0", 4); bkv_iter_valid(it); bkv_iter_next(it)) n++;
    assert_int_equal(n, 200);
    bkv_iter_destroy(it);
    bkv_close(db);
}

typedef struct writer_arg {
    bkv_db *db;
    int from, to;
} writer_arg;

static void *write_thread(void *arg) {
    writer_arg *a = arg;
    char k[32], v[64];
    for (int i = a->from; i < a->to; i++) {
        key(k, i);
        if (bkv_put(a->db, NULL, k, strlen(k), v, (size_t)val(v, i, 5)) != BKV_OK) return (void *)1;
    }
    return NULL;
}

/* Writes going on during ingests are neither lost nor reordered: keys
 * written by the thread end at its version whatever the ingests did. */
static void ingest_while_writing(void **state) {
    (void)state;
    char base[320];
    const char *d = subdir(base, __func__);
    char db_path[512];
    snprintf(db_path, sizeof db_path, "%s/db", d);
    bkv_options o;
    small_options(&o, BKV_COMPACTION_LEVELED, BKV_VALUE_INDEX_NONE);
    bkv_db *db = open_with(db_path, &o);
    writer_arg wa = {db, 0, 20000};
    pthread_t th;
    pthread_create(&th, NULL, write_thread, &wa);
    for (int r = 0; r < 8; r++) {
        char t[512];
        snprintf(t, sizeof t, "%s/t%d.sst", d, r);
        write_table(t, &o, 100000 + r * 1000, 100000 + (r + 1) * 1000, 1, 1, 0);
        const char *p[] = {t};
        assert_int_equal(bkv_ingest(db, p, 1, BKV_INGEST_MOVE), BKV_OK);
    }
    void *ret;
    pthread_join(th, &ret);
    assert_null(ret);
    for (int i = 0; i < 20000; i += 13) expect(db, i, 5);
    for (int i = 100000; i < 108000; i += 11) expect(db, i, 1);
    bkv_close(db);
    assert_int_equal(bkv_check(db_path, no_problem, NULL), BKV_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(writer_refuses_bad_use),
        cmocka_unit_test(ingest_into_empty_database_goes_to_the_bottom),
        cmocka_unit_test(ingest_over_existing_data_is_newest),
        cmocka_unit_test(ingest_is_invisible_to_older_snapshots),
        cmocka_unit_test(ingest_refuses_what_it_cannot_trust),
        cmocka_unit_test(ingest_with_a_value_index),
        cmocka_unit_test(ingest_checks_the_prefix_extractor),
        cmocka_unit_test(ingest_while_writing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
