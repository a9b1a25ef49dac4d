/* Read-only opens (bkv_options.read_only): they change nothing (every
 * file's bytes, size and modification time, and the set of files, are as
 * before: no LOCK, no new WAL or manifest, no flush of the replayed WAL),
 * see what the WAL holds, open beside a writer that holds the database,
 * refuse every call that would write (a checkpoint, into its own new
 * directory, aside), and never create a database. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "test_dir.h"

TEST_DIR_FIXTURE("readonly")

/* What a directory looks like: each entry's name, size, modification time
 * and a hash of its bytes, sorted by name. */
static void fingerprint(const char *path, char *out, size_t cap) {
    DIR *d = opendir(path);
    assert_non_null(d);
    char names[64][256];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && n < 64)
            memcpy(names[n++], de->d_name, strlen(de->d_name) + 1);
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        char p[4400];
        assert_true(snprintf(p, sizeof p, "%s/%s", path, names[i]) < (int)sizeof p);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        uint64_t h = 1469598103934665603ULL;
        FILE *f = fopen(p, "rb");
        for (int c; f && (c = fgetc(f)) != EOF;) h = (h ^ (uint64_t)c) * 1099511628211ULL;
        if (f) fclose(f);
        used += (size_t)snprintf(out + used, cap - used, "%s %lld %lld.%09ld %016llx\n", names[i], (long long)st.st_size,
                                 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (unsigned long long)h);
        assert_true(used < cap);
    }
}

static bkv_options read_only_options(void) {
    bkv_options o;
    bkv_options_init(&o);
    o.read_only = 1;
    return o;
}

static void expect_stored(bkv_db *db, const char *key, const char *want) {
    void *v;
    size_t n;
    int rc = bkv_get(db, NULL, key, strlen(key), &v, &n);
    if (!want) {
        assert_int_equal(rc, BKV_NOTFOUND);
        return;
    }
    assert_int_equal(rc, BKV_OK);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(v, want, n);
    bkv_free(v);
}

/* A database with tables and a WAL holding writes no table has yet. */
static void make_db(const char *path) {
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 16 * 1024;
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int i = 0; i < 2000; i++) {
        char k[32], v[32];
        snprintf(k, sizeof k, "key%05d", i);
        snprintf(v, sizeof v, "value%05d", i);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
    }
    assert_int_equal(bkv_compact(db), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "wal-only", 8, "in the log", 10), BKV_OK);
    assert_int_equal(bkv_delete(db, NULL, "key00007", 8), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static int count_found(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)key, (void)klen, (void)val, (void)vlen;
    ++*(int *)arg;
    return 0;
}

/* A fresh database dir/name (in path), its fingerprint in before, open
 * read-only. */
static bkv_db *open_fresh_read_only(const char *name, char *path, size_t cap, char *before, size_t before_cap) {
    snprintf(path, cap, "%s/%s", dir, name);
    make_db(path);
    fingerprint(path, before, before_cap);
    bkv_options o = read_only_options();
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    return db;
}

static void changes_nothing(void **state) {
    (void)state;
    char path[300];
    static char before[16384], after[16384];
    bkv_db *db = open_fresh_read_only("db", path, sizeof path, before, sizeof before);
    expect_stored(db, "wal-only", "in the log"); /* replayed into memory */
    expect_stored(db, "key00007", NULL);
    expect_stored(db, "key01999", "value01999");
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
    int n = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) n++;
    assert_int_equal(bkv_iter_status(it), BKV_OK);
    bkv_iter_destroy(it);
    assert_int_equal(n, 2000); /* 2000 keys, one deleted, one from the WAL */
    int found = 0;
    assert_int_equal(bkv_find_value(db, NULL, "value01234", 10, count_found, &found, NULL), BKV_OK);
    assert_int_equal(found, 1); /* the value index, rebuilt in memory from the tables' value filters */
    char *p = bkv_property(db, "bloomkv.stats");
    assert_non_null(p);
    bkv_free(p);
    assert_int_equal(bkv_close(db), BKV_OK);
    fingerprint(path, after, sizeof after);
    assert_string_equal(before, after);
}

static void refuses_writes(void **state) {
    (void)state;
    char path[300], other[300];
    snprintf(other, sizeof other, "%s/refuse-checkpoint", dir);
    static char before[16384], after[16384];
    bkv_db *db = open_fresh_read_only("refuse", path, sizeof path, before, sizeof before);
    assert_int_equal(bkv_put(db, NULL, "k", 1, "v", 1), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "read-only"));
    assert_int_equal(bkv_delete(db, NULL, "key00001", 8), BKV_INVALID);
    bkv_batch *b = bkv_batch_create();
    assert_int_equal(bkv_batch_put(b, "k", 1, "v", 1), BKV_OK);
    assert_int_equal(bkv_write(db, NULL, b), BKV_INVALID);
    bkv_batch_destroy(b);
    assert_int_equal(bkv_flush(db), BKV_INVALID);
    assert_int_equal(bkv_compact(db), BKV_INVALID);
    assert_int_equal(bkv_compact_range(db, "a", 1, "z", 1), BKV_INVALID);
    const char *none[] = {"/nonexistent.sst"};
    assert_int_equal(bkv_ingest(db, none, 1, 0), BKV_INVALID);
    uint64_t rewritten;
    assert_int_equal(bkv_value_index_build(db, &rewritten), BKV_INVALID);
    expect_stored(db, "key00001", "value00001"); /* reads still work after the refusals */
    /* A checkpoint is the one write allowed, into its own directory: what
     * the open replayed from the WALs goes into the copy's WAL. */
    assert_int_equal(bkv_checkpoint(db, other), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
    fingerprint(path, after, sizeof after);
    assert_string_equal(before, after);
    bkv_options plain;
    bkv_options_init(&plain);
    plain.create_if_missing = 0;
    bkv_db *copy;
    assert_int_equal(bkv_open(other, &plain, &copy), BKV_OK);
    expect_stored(copy, "wal-only", "in the log");
    expect_stored(copy, "key00007", NULL);
    expect_stored(copy, "key01999", "value01999");
    assert_int_equal(bkv_close(copy), BKV_OK);
    /* Options that would write the manifest are refused at open. */
    bkv_options o = read_only_options();
    o.value_index_drop = 1;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
}

/* No database is created, whatever create_if_missing says, and a
 * directory that is not a database gets no file. */
static void creates_nothing(void **state) {
    (void)state;
    char path[300], empty[300];
    snprintf(path, sizeof path, "%s/absent", dir);
    snprintf(empty, sizeof empty, "%s/empty", dir);
    bkv_options o = read_only_options();
    o.create_if_missing = 1;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
    assert_int_equal(mkdir(empty, 0755), 0);
    assert_int_equal(bkv_open(empty, &o, &db), BKV_INVALID);
    char lock[320];
    snprintf(lock, sizeof lock, "%s/LOCK", empty);
    assert_int_not_equal(stat(lock, &st), 0);
}

/* A writer holds the database (and its LOCK); a read-only open beside it
 * sees what was written before it opened, not what came after. */
static void beside_a_writer(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/live", dir);
    make_db(path);
    bkv_options w;
    bkv_options_init(&w);
    bkv_db *writer, *reader;
    assert_int_equal(bkv_open(path, &w, &writer), BKV_OK);
    assert_int_equal(bkv_put(writer, NULL, "before", 6, "1", 1), BKV_OK);
    bkv_options o = read_only_options();
    int rc = bkv_open(path, &o, &reader);
    if (rc) fail_msg("read-only open beside a writer: %s", bkv_errmsg(NULL));
    assert_int_equal(bkv_put(writer, NULL, "after", 5, "2", 1), BKV_OK);
    expect_stored(reader, "before", "1");
    expect_stored(reader, "after", NULL);
    expect_stored(reader, "wal-only", "in the log");
    assert_int_equal(bkv_close(reader), BKV_OK);
    assert_int_equal(bkv_close(writer), BKV_OK);
}

static int count_and_check(bkv_db *db, const bkv_read_options *ro) {
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, ro, &it), BKV_OK);
    int n = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) n++;
    assert_int_equal(bkv_iter_status(it), BKV_OK);
    bkv_iter_destroy(it);
    return n;
}

static void put_numbered(bkv_db *db, int from, int to, const char *tag) {
    for (int i = from; i < to; i++) {
        char k[32], v[32];
        snprintf(k, sizeof k, "row%05d", i);
        snprintf(v, sizeof v, "%s%d", tag, i % 13);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
    }
}

static int on_found(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)key, (void)klen, (void)val, (void)vlen;
    ++*(int *)arg;
    return 0;
}

/* A secondary: a read-only handle follows the writer with
 * bkv_try_catch_up, through WAL appends, flushes and compactions that
 * delete the tables it had; an iterator keeps its state; searches by
 * value see the new rows; snapshots and writers are refused. */
static void follows_a_writer(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/secondary", dir);
    bkv_options w;
    bkv_options_init(&w);
    w.create_if_missing = 1;
    w.write_buffer_size = 64 * 1024;
    w.value_index = BKV_VALUE_INDEX_BITSLICED;
    bkv_db *writer, *reader;
    assert_int_equal(bkv_open(path, &w, &writer), BKV_OK);
    put_numbered(writer, 0, 1000, "a");
    assert_int_equal(bkv_flush(writer), BKV_OK); /* no flush of its own still to come */
    bkv_options o = read_only_options();
    assert_int_equal(bkv_open(path, &o, &reader), BKV_OK);
    int changed = -1;
    assert_int_equal(bkv_try_catch_up(reader, &changed), BKV_OK);
    assert_int_equal(changed, 0);
    assert_int_equal(count_and_check(reader, NULL), 1000);

    bkv_iter *before;
    assert_int_equal(bkv_iter_create(reader, NULL, &before), BKV_OK);
    put_numbered(writer, 1000, 3000, "b"); /* past the buffer: flushes */
    expect_stored(reader, "row02999", NULL);
    assert_int_equal(bkv_try_catch_up(reader, &changed), BKV_OK);
    assert_int_equal(changed, 1);
    expect_stored(reader, "row02999", "b9");
    assert_int_equal(count_and_check(reader, NULL), 3000);
    int n = 0;
    for (bkv_iter_seek_to_first(before); bkv_iter_valid(before); bkv_iter_next(before)) n++;
    assert_int_equal(n, 1000);
    bkv_iter_destroy(before);

    /* The writer replaces every table the reader had; the reader follows. */
    put_numbered(writer, 0, 500, "c");
    assert_int_equal(bkv_compact_range(writer, NULL, 0, NULL, 0), BKV_OK);
    assert_int_equal(bkv_try_catch_up(reader, &changed), BKV_OK);
    assert_int_equal(changed, 1);
    assert_int_equal(count_and_check(reader, NULL), 3000);
    expect_stored(reader, "row00007", "c7");
    int found = 0;
    assert_int_equal(bkv_find_value(reader, NULL, "c7", 2, on_found, &found, NULL), BKV_OK);
    int want = 0;
    for (int i = 0; i < 500; i++) want += i % 13 == 7;
    assert_int_equal(found, want);

    const bkv_snapshot *snap = bkv_snapshot_create(reader);
    assert_non_null(snap);
    assert_int_equal(bkv_try_catch_up(reader, NULL), BKV_BUSY);
    assert_non_null(strstr(bkv_errmsg(reader), "snapshots"));
    bkv_snapshot_release(reader, snap);
    assert_int_equal(bkv_try_catch_up(writer, NULL), BKV_INVALID);
    assert_int_equal(bkv_try_catch_up(NULL, NULL), BKV_INVALID);
    assert_int_equal(bkv_close(reader), BKV_OK);
    assert_int_equal(bkv_close(writer), BKV_OK);
}

typedef struct reading {
    bkv_db *db;
    atomic_int stop;
    int errors;
} reading;

static void *read_loop(void *arg) {
    reading *r = arg;
    for (unsigned i = 0; !atomic_load(&r->stop); i++) {
        char k[32];
        snprintf(k, sizeof k, "row%05u", i % 2000);
        void *v;
        size_t n;
        int rc = bkv_get(r->db, NULL, k, strlen(k), &v, &n);
        if (rc == BKV_OK) bkv_free(v);
        else if (rc != BKV_NOTFOUND) r->errors++;
    }
    return NULL;
}

/* Reads in other threads run through catch-ups, each seeing a whole state. */
static void catch_up_beside_readers(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/secondary-threads", dir);
    bkv_options w;
    bkv_options_init(&w);
    w.create_if_missing = 1;
    w.write_buffer_size = 32 * 1024;
    bkv_db *writer, *reader;
    assert_int_equal(bkv_open(path, &w, &writer), BKV_OK);
    put_numbered(writer, 0, 100, "a");
    bkv_options o = read_only_options();
    assert_int_equal(bkv_open(path, &o, &reader), BKV_OK);
    reading r = {.db = reader};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, read_loop, &r), 0);
    for (int round = 1; round <= 10; round++) {
        put_numbered(writer, round * 100, round * 100 + 100, "b");
        assert_int_equal(bkv_try_catch_up(reader, NULL), BKV_OK);
        char k[32], v[32];
        snprintf(k, sizeof k, "row%05d", round * 100 + 99);
        snprintf(v, sizeof v, "b%d", (round * 100 + 99) % 13);
        expect_stored(reader, k, v);
    }
    atomic_store(&r.stop, 1);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    assert_int_equal(r.errors, 0);
    assert_int_equal(count_and_check(reader, NULL), 1100);
    assert_int_equal(bkv_close(reader), BKV_OK);
    assert_int_equal(bkv_close(writer), BKV_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(changes_nothing),
        cmocka_unit_test(refuses_writes),
        cmocka_unit_test(creates_nothing),
        cmocka_unit_test(beside_a_writer),
        cmocka_unit_test(follows_a_writer),
        cmocka_unit_test(catch_up_beside_readers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
