/* The engine's edges as a hostile caller finds them: the largest key and
 * value at every path that stores one (accepted at the maximum and read
 * back through the WAL, a flush, a compaction and an ingest, with each
 * compression; refused one byte over it), a directory whose CURRENT was
 * lost, destroy of a directory the engine did not make, opens that must
 * create nothing, and misuse of the C API that must fail, not crash. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#include "test_dir.h"

TEST_DIR_FIXTURE("boundaries")

static void sub(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static void expect_read(bkv_db *db, const void *key, size_t klen, const uint8_t *want, size_t wlen) {
    void *v = NULL;
    size_t vlen = 0;
    assert_int_equal(bkv_get(db, NULL, key, klen, &v, &vlen), BKV_OK);
    assert_int_equal(vlen, wlen);
    assert_memory_equal(v, want, wlen);
    bkv_free(v);
}

/* Compressible but not constant, so each codec does real work. */
static uint8_t *pattern(size_t n, unsigned seed) {
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i / 4096 + seed) * 7 + (i % 13 == 0));
    return p;
}

static void expect_too_long(int rc, const char *what) {
    assert_int_equal(rc, BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), what));
    assert_non_null(strstr(bkv_errmsg(NULL), "longer than the maximum"));
}

/* The maximum key and value are stored, survive the WAL's replay, a flush,
 * a compaction and an ingested table, and read back, with each codec (a
 * block's decompressed size was once capped at 64 MiB, far below what a
 * value could be); one byte over is refused by every writing call, with
 * nothing stored. */
static void largest_key_and_value_at_every_path(void **state) {
    (void)state;
#ifdef __SANITIZE_THREAD__
    skip(); /* no threads here, and a GiB of copies under ThreadSanitizer takes minutes: the other builds run it */
#endif
    const size_t K = BKV_MAX_KEY_SIZE, V = BKV_MAX_VALUE_SIZE;
    uint8_t *key = pattern(K + 1, 1), *val = pattern(V + 1, 2);
    static const int codecs[] = {BKV_COMPRESSION_LZ4, BKV_COMPRESSION_ZSTD};
    for (size_t c = 0; c < sizeof codecs / sizeof *codecs; c++) {
        char path[300], table[320];
        snprintf(path, sizeof path, "%s/db%zu", dir, c);
        snprintf(table, sizeof table, "%s/t%zu.sst", dir, c);
        bkv_options o;
        bkv_options_init(&o);
        o.create_if_missing = 1;
        o.compression = codecs[c];
        bkv_db *db;
        assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        assert_int_equal(bkv_put(db, NULL, "a", 1, "1", 1), BKV_OK);

        expect_too_long(bkv_put(db, NULL, key, K + 1, "v", 1), "key of 1048577 bytes");
        assert_string_not_equal(bkv_errmsg(db), "");
        expect_too_long(bkv_put(db, NULL, "k", 1, val, V + 1), "value of 268435457 bytes");
        expect_too_long(bkv_delete(db, NULL, key, K + 1), "key of");
        bkv_batch *b = bkv_batch_create();
        expect_too_long(bkv_batch_put(b, key, K + 1, "v", 1), "key of");
        expect_too_long(bkv_batch_put(b, "k", 1, val, V + 1), "value of");
        expect_too_long(bkv_batch_delete(b, key, K + 1), "key of");
        assert_int_equal(bkv_batch_count(b), 0);

        /* At the maximum: through the WAL (reopen), then a flush. */
        assert_int_equal(bkv_put(db, NULL, key, K, "small", 5), BKV_OK);
        assert_int_equal(bkv_batch_put(b, "big", 3, val, V), BKV_OK);
        assert_int_equal(bkv_write(db, NULL, b), BKV_OK);
        bkv_batch_destroy(b);
        assert_int_equal(bkv_close(db), BKV_OK);
        assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        expect_read(db, "big", 3, val, V);
        assert_int_equal(bkv_flush(db), BKV_OK);
        expect_read(db, "a", 1, (const uint8_t *)"1", 1);
        expect_read(db, "big", 3, val, V);
        expect_read(db, key, K, (const uint8_t *)"small", 5);

        /* A table writer refuses the same, and its table at the maximum
         * ingests and reads back. */
        bkv_table_writer *w;
        assert_int_equal(bkv_table_writer_create(&o, table, &w), BKV_OK);
        expect_too_long(bkv_table_writer_put(w, key, K + 1, "v", 1), "key of");
        expect_too_long(bkv_table_writer_put(w, "m", 1, val, V + 1), "value of");
        assert_int_equal(bkv_table_writer_put(w, "m", 1, val, V), BKV_OK);
        assert_int_equal(bkv_table_writer_finish(w), BKV_OK);
        bkv_table_writer_destroy(w);
        const char *files[] = {table};
        assert_int_equal(bkv_ingest(db, files, 1, 0), BKV_OK);
        expect_read(db, "m", 1, val, V);

        assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
        expect_read(db, "big", 3, val, V);
        expect_read(db, "m", 1, val, V);
        expect_read(db, key, K, (const uint8_t *)"small", 5);
        expect_read(db, "a", 1, (const uint8_t *)"1", 1);
        void *v = NULL;
        size_t vlen;
        assert_int_equal(bkv_get(db, NULL, key, K + 1, &v, &vlen), BKV_NOTFOUND);
        assert_int_equal(bkv_close(db), BKV_OK);
        assert_int_equal(bkv_destroy(path), BKV_OK);
    }
    free(key);
    free(val);
}

/* A block size that would let one data block grow past what a reader
 * accepts is refused at open. */
static void block_size_is_bounded(void **state) {
    (void)state;
    char path[300];
    sub(path, sizeof path, "bs");
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 1;
    o.block_size = ((size_t)64 << 20) + 1;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "block_size"));
    assert_false(exists(path));
}

static void put_rows(const char *path, int n) {
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 1;
    o.write_buffer_size = 16 << 10;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int i = 0; i < n; i++) {
        char k[16], v[32];
        snprintf(k, sizeof k, "k%05d", i);
        snprintf(v, sizeof v, "value-%05d-padding", i);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
    }
    assert_int_equal(bkv_compact(db), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static int count_rows(const char *path) {
    bkv_db *db;
    if (bkv_open(path, NULL, &db) != BKV_OK) return -1;
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
    int n = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) n++;
    bkv_iter_destroy(it);
    assert_int_equal(bkv_close(db), BKV_OK);
    return n;
}

/* A database whose CURRENT was lost is never taken for an empty directory:
 * an open that may create refuses (naming repair), one that may not
 * creates nothing; bkv_repair points CURRENT at the newest intact manifest
 * and every row is back. */
static void lost_current_is_refused_then_repaired(void **state) {
    (void)state;
    char path[300], current[320];
    sub(path, sizeof path, "lost");
    put_rows(path, 200);
    snprintf(current, sizeof current, "%s/CURRENT", path);
    assert_int_equal(unlink(current), 0);
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 1;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_CORRUPTION);
    assert_non_null(strstr(bkv_errmsg(NULL), "CURRENT is missing"));
    assert_non_null(strstr(bkv_errmsg(NULL), "bloomkv repair"));
    o.create_if_missing = 0;
    assert_int_equal(bkv_open(path, &o, &db), BKV_CORRUPTION);
    assert_false(exists(current));
    char done[200];
    assert_int_equal(bkv_repair(path, done, sizeof done), BKV_OK);
    assert_non_null(strstr(done, "CURRENT now names MANIFEST-"));
    assert_int_equal(count_rows(path), 200);
    assert_int_equal(bkv_repair(path, done, sizeof done), BKV_OK);
    assert_non_null(strstr(done, "nothing to repair"));

    /* A newer manifest that does not read whole was never named: the
     * older intact one is taken. */
    char junk[330];
    snprintf(junk, sizeof junk, "%s/MANIFEST-999999", path);
    FILE *f = fopen(junk, "w");
    assert_non_null(f);
    fputs("not a manifest", f);
    fclose(f);
    assert_int_equal(unlink(current), 0);
    assert_int_equal(bkv_repair(path, done, sizeof done), BKV_OK);
    assert_non_null(strstr(done, "newer manifests are not intact"));
    assert_int_equal(count_rows(path), 200);

    /* No intact manifest at all: refused, nothing written. */
    char empty[300];
    sub(empty, sizeof empty, "nomanifest");
    assert_int_equal(mkdir(empty, 0755), 0);
    assert_int_equal(bkv_repair(empty, done, sizeof done), BKV_CORRUPTION);
    snprintf(current, sizeof current, "%s/CURRENT", empty);
    assert_false(exists(current));
}

/* An open that may not create leaves nothing where there is no database:
 * no LOCK file in a plain directory, no directory where there was none. */
static void opens_that_create_nothing_leave_nothing(void **state) {
    (void)state;
    char plain[300], lock[320], missing[300];
    sub(plain, sizeof plain, "plain");
    sub(missing, sizeof missing, "missing");
    assert_int_equal(mkdir(plain, 0755), 0);
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 0;
    bkv_db *db;
    assert_int_equal(bkv_open(plain, &o, &db), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "no database here"));
    snprintf(lock, sizeof lock, "%s/LOCK", plain);
    assert_false(exists(lock));
    assert_int_equal(bkv_open(missing, &o, &db), BKV_INVALID);
    assert_false(exists(missing));
    /* A user's *.tmp file in a database is the user's. */
    char path[300], notes[320];
    sub(path, sizeof path, "withtmp");
    put_rows(path, 10);
    snprintf(notes, sizeof notes, "%s/notes.tmp", path);
    FILE *f = fopen(notes, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(count_rows(path), 10);
    assert_true(exists(notes));
}

/* Destroy takes only a database, by its own name: a directory of the
 * user's files (even named like the engine's), a link to a database, a
 * database that lost its CURRENT are refused with nothing removed. */
static void destroy_takes_only_a_database(void **state) {
    (void)state;
    char u[300], f[330];
    sub(u, sizeof u, "foreign");
    assert_int_equal(mkdir(u, 0755), 0);
    const char *names[] = {"notes.tmp", "1.log", "2024.sst", "CURRENT", "keep.txt"};
    for (size_t i = 0; i < 5; i++) {
        snprintf(f, sizeof f, "%s/%s", u, names[i]);
        FILE *fp = fopen(f, "w");
        assert_non_null(fp);
        fclose(fp);
    }
    assert_int_equal(bkv_destroy(u), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "not a bloomkv database"));
    for (size_t i = 0; i < 5; i++) {
        snprintf(f, sizeof f, "%s/%s", u, names[i]);
        assert_true(exists(f));
    }
    snprintf(f, sizeof f, "%s/LOCK", u);
    assert_false(exists(f));

    char path[300], link[300];
    sub(path, sizeof path, "real");
    sub(link, sizeof link, "link");
    put_rows(path, 10);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(bkv_destroy(link), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "symbolic link"));
    assert_int_equal(count_rows(path), 10);
    snprintf(f, sizeof f, "%s/keep.txt", path);
    FILE *fp = fopen(f, "w");
    assert_non_null(fp);
    fclose(fp);
    assert_int_equal(bkv_destroy(path), BKV_OK);
    assert_true(exists(f)); /* the user's file, and so its directory, stay */
    assert_int_equal(unlink(f), 0);
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(bkv_destroy(path), BKV_OK); /* missing: nothing to do */
}

static void *close_from_thread(void *arg) { return (void *)(intptr_t)bkv_close(arg); }

/* Misuse of handles fails instead of freeing what is in use: a close with
 * a live iterator, value search or snapshot is refused and closes nothing;
 * a second close (or two threads closing at once) is refused; an options
 * size no release could define is refused. Each failure has its own
 * message, never an earlier call's. */
static void handle_misuse_fails_cleanly(void **state) {
    (void)state;
    char path[300];
    sub(path, sizeof path, "misuse");
    put_rows(path, 10);
    bkv_db *db;
    assert_int_equal(bkv_open(path, NULL, &db), BKV_OK);
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_BUSY);
    assert_non_null(strstr(bkv_errmsg(NULL), "1 iterator"));
    bkv_iter_seek_to_first(it); /* the database is still open */
    assert_true(bkv_iter_valid(it));
    bkv_iter_destroy(it);
    const bkv_snapshot *snap = bkv_snapshot_create(db);
    assert_non_null(snap);
    assert_int_equal(bkv_close(db), BKV_BUSY);
    assert_non_null(strstr(bkv_errmsg(NULL), "snapshots"));
    bkv_snapshot_release(db, snap);
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "not an open database"));

    /* Two threads closing one handle: one closes it, the other is told. */
    for (int round = 0; round < 20; round++) {
        assert_int_equal(bkv_open(path, NULL, &db), BKV_OK);
        pthread_t t1, t2;
        void *r1, *r2;
        assert_int_equal(pthread_create(&t1, NULL, close_from_thread, db), 0);
        assert_int_equal(pthread_create(&t2, NULL, close_from_thread, db), 0);
        pthread_join(t1, &r1);
        pthread_join(t2, &r2);
        int a = (int)(intptr_t)r1, b = (int)(intptr_t)r2;
        assert_true((a == BKV_OK && b == BKV_INVALID) || (a == BKV_INVALID && b == BKV_OK));
    }

    /* An options struct that claims to be larger than any release's. */
    struct {
        bkv_options o;
        char tail[1 << 13];
    } big;
    memset(&big, 0, sizeof big);
    bkv_options_init(&big.o);
    big.o.size = sizeof big;
    assert_int_equal(bkv_open(path, &big.o, &db), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "bkv_options.size"));
    bkv_write_options wo;
    bkv_write_options_init(&wo);
    wo.size = (size_t)1 << 40;
    assert_int_equal(bkv_open(path, NULL, &db), BKV_OK);
    assert_int_equal(bkv_put(db, &wo, "k", 1, "v", 1), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "bkv_write_options.size"));

    /* Every failure leaves its own message. */
    void *v;
    size_t vl;
    assert_int_equal(bkv_get(db, NULL, NULL, 3, &v, &vl), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "bkv_get"));
    assert_int_equal(bkv_compact_range(db, "z", 1, "a", 1), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "begin is after end"));
    assert_int_equal(bkv_write(db, NULL, NULL), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "bkv_write"));
    assert_int_equal(bkv_iter_create(db, NULL, NULL), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "bkv_iter_create"));
    assert_int_equal(bkv_close(db), BKV_OK);
}

static int count_found(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)key, (void)klen, (void)val, (void)vlen;
    ++*(int *)arg;
    return 0;
}

/* The JSON extractor's number rule: an integer is found by its value
 * (zero as 0 or -0), a number with a fraction or exponent by its text as
 * written, an integer past 64 bits by nothing (never by a clamped value). */
static void json_numbers_follow_the_stated_rule(void **state) {
    (void)state;
    char path[300];
    sub(path, sizeof path, "json");
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 1;
    o.value_index = BKV_VALUE_INDEX_FLAT;
    o.value_terms_name = "json:user";
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    const char *rows[][2] = {{"a", "{\"user\":-0}"}, {"b", "{\"user\":0}"}, {"c", "{\"user\":1.50}"},
                             {"d", "{\"user\":99999999999999999999}"}, {"e", "{\"user\":-5}"}};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(bkv_put(db, NULL, rows[i][0], 1, rows[i][1], strlen(rows[i][1])), BKV_OK);
    for (int flushed = 0; flushed < 2; flushed++) {
        static const struct {
            const char *term;
            int found;
        } q[] = {{"-0", 2}, {"0", 2}, {"1.50", 1}, {"1.5", 0}, {"-5", 1}, {"18446744073709551615", 0},
                 {"99999999999999999999", 0}};
        for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
            int n = 0;
            assert_int_equal(bkv_find_value(db, NULL, q[i].term, strlen(q[i].term), count_found, &n, NULL), BKV_OK);
            if (n != q[i].found) fail_msg("term %s: found %d, want %d (flushed %d)", q[i].term, n, q[i].found, flushed);
        }
        assert_int_equal(bkv_flush(db), BKV_OK);
    }
    assert_int_equal(bkv_close(db), BKV_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(largest_key_and_value_at_every_path),
        cmocka_unit_test(block_size_is_bounded),
        cmocka_unit_test(lost_current_is_refused_then_repaired),
        cmocka_unit_test(opens_that_create_nothing_leave_nothing),
        cmocka_unit_test(destroy_takes_only_a_database),
        cmocka_unit_test(handle_misuse_fails_cleanly),
        cmocka_unit_test(json_numbers_follow_the_stated_rule),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
