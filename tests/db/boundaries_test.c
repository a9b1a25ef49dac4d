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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(largest_key_and_value_at_every_path),
        cmocka_unit_test(block_size_is_bounded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
