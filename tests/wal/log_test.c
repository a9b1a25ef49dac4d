/* Log records: round trips across block boundaries, torn tails dropped,
 * damage in the middle reported with its offset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "test_dir.h"
#include "util/hash.h"
#include "wal/log.h"

static char dir[256];
static char path[300];

static size_t record_len(int i) { return i % 10 == 9 ? 70000 + (size_t)i : (size_t)(i * 37 % 3000); }

static void fill(uint8_t *p, size_t n, int i) {
    for (size_t j = 0; j < n; j++) p[j] = (uint8_t)(i * 31 + (int)j);
}

static void write_log(int count) {
    bkv_wfile *f;
    assert_int_equal(bkv_env_posix()->new_writable(bkv_env_posix(), path, &f, NULL), BKV_OK);
    bkv_log_writer w;
    bkv_log_writer_init(&w, f);
    uint8_t *buf = malloc(80000);
    for (int i = 0; i < count; i++) {
        size_t n = record_len(i);
        fill(buf, n, i);
        assert_int_equal(bkv_log_add_record(&w, buf, n, NULL), BKV_OK);
    }
    free(buf);
    assert_int_equal(bkv_file_sync(f, NULL), BKV_OK);
    assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
}

/* Reads all records; returns how many matched, and the final status. */
static int read_log(const uint8_t *data, size_t len, int tolerate, int *count, bkv_err *e) {
    bkv_log_reader r;
    bkv_log_reader_init(&r, "test.log", data, len, tolerate);
    uint8_t *expect = malloc(80000);
    int rc;
    *count = 0;
    while ((rc = bkv_log_read_record(&r, e)) == BKV_OK) {
        size_t n = record_len(*count);
        fill(expect, n, *count);
        assert_int_equal(r.record.len, n);
        assert_memory_equal(r.record.data, expect, n);
        (*count)++;
    }
    free(expect);
    bkv_log_reader_free(&r);
    return rc;
}

static void round_trip(void **state) {
    (void)state;
    write_log(200);
    uint8_t *data;
    size_t len;
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    int count;
    assert_int_equal(read_log(data, len, 0, &count, NULL), BKV_NOTFOUND);
    assert_int_equal(count, 200);
    free(data);
}

static void every_truncation_is_a_clean_prefix(void **state) {
    (void)state;
    write_log(30);
    uint8_t *data;
    size_t len;
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    int last = 0;
    for (size_t cut = 0; cut <= len; cut += (cut < 2000 ? 1 : 997)) {
        int count;
        bkv_err e;
        assert_int_equal(read_log(data, cut, 1, &count, &e), BKV_NOTFOUND);
        assert_true(count >= last); /* longer prefix, never fewer records */
        last = count;
        /* Without tolerance a cut inside a record is corruption. */
        int rc = read_log(data, cut, 0, &count, &e);
        assert_true(rc == BKV_NOTFOUND || rc == BKV_CORRUPTION);
    }
    free(data);
}

static void damage_in_the_middle_is_reported(void **state) {
    (void)state;
    write_log(100);
    uint8_t *data;
    size_t len;
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    assert_true(len > 5 * BKV_LOG_BLOCK);
    data[BKV_LOG_BLOCK + 100] ^= 0x55;
    int count;
    bkv_err e;
    assert_int_equal(read_log(data, len, 1, &count, &e), BKV_CORRUPTION);
    assert_non_null(strstr(e.msg, "test.log"));
    assert_non_null(strstr(e.msg, "offset"));
    data[BKV_LOG_BLOCK + 100] ^= 0x55;
    /* The same flip in the final block is a torn tail. */
    data[len - 10] ^= 0x55;
    assert_int_equal(read_log(data, len, 1, &count, &e), BKV_NOTFOUND);
    assert_int_equal(read_log(data, len, 0, &count, &e), BKV_CORRUPTION);
    free(data);
}

static int setup(void **state) {
    (void)state;
    test_make_dir(dir, sizeof dir, "log");
    snprintf(path, sizeof path, "%s/000001.log", dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    test_remove_dir(dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(every_truncation_is_a_clean_prefix),
        cmocka_unit_test(damage_in_the_middle_is_reported),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
