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
#include "log/log.h"

static char dir[256];
static char path[300];

static size_t record_len(int i) { return i % 10 == 9 ? 70000 + (size_t)i : (size_t)(i * 37 % 3000); }

static void fill(uint8_t *p, size_t n, int i) {
    for (size_t j = 0; j < n; j++) p[j] = (uint8_t)(i * 31 + (int)j);
}

/* Writes count records; mapped: through the env's mapped log, left open
 * (as a crash leaves it) and returned in *open_file. Returns the bytes
 * the records took. */
static uint64_t write_log_as(int count, int mapped, bkv_wfile **open_file) {
    bkv_wfile *f;
    remove(path); /* the env never overwrites a file */
    const bkv_env *env = bkv_env_posix();
    assert_int_equal((mapped ? bkv_env_new_log : env->new_writable)(env, path, 0644, &f, NULL), BKV_OK);
    bkv_log_writer w;
    bkv_log_writer_init(&w, f);
    uint8_t *buf = malloc(80000);
    for (int i = 0; i < count; i++) {
        size_t n = record_len(i);
        fill(buf, n, i);
        assert_int_equal(bkv_log_add_record(&w, buf, n, NULL), BKV_OK);
        assert_int_equal(bkv_file_flush(f, NULL), BKV_OK);
    }
    free(buf);
    assert_int_equal(bkv_file_sync(f, NULL), BKV_OK);
    if (open_file) *open_file = f;
    else assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
    return w.size;
}

static void write_log(int count) { write_log_as(count, 0, NULL); }

/* Reads all records in on_damage mode; returns the final status and how
 * many came back, each intact and in order (a skipped one may be missing). */
static int read_log_mode(const uint8_t *data, size_t len, int tolerate, int on_damage, int *count, bkv_err *e,
                         bkv_log_reader *out) {
    bkv_log_reader r;
    bkv_log_reader_init(&r, "test.log", data, len, tolerate);
    r.on_damage = on_damage;
    uint8_t *expect = malloc(80000);
    int rc, next = 0;
    *count = 0;
    while ((rc = bkv_log_read_record(&r, e)) == BKV_OK) {
        while (on_damage == BKV_LOG_DAMAGE_SKIP && next < 1000 &&
               (r.record.len != record_len(next) || (r.record.len && r.record.data[0] != (uint8_t)(next * 31))))
            next++;
        size_t n = record_len(next);
        fill(expect, n, next);
        assert_int_equal(r.record.len, n);
        assert_memory_equal(r.record.data, expect, n);
        next++;
        (*count)++;
    }
    free(expect);
    if (out) *out = r;
    bkv_log_reader_free(&r);
    return rc;
}

static int read_log(const uint8_t *data, size_t len, int tolerate, int *count, bkv_err *e) {
    return read_log_mode(data, len, tolerate, BKV_LOG_DAMAGE_FAIL, count, e, NULL);
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

/* Damage in the last block with intact records after it is not a torn
 * tail (the outside attack: a flip at 40,000 of a 48 KB WAL dropped the
 * batches after it silently). Each mode does what it says. */
static void damage_before_valid_records_in_the_last_block(void **state) {
    (void)state;
    write_log(99); /* records 91..98 are small and share the last block */
    uint8_t *data;
    size_t len;
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    uint64_t offsets[99];
    bkv_log_reader r;
    bkv_log_reader_init(&r, "test.log", data, len, 0);
    for (int i = 0; i < 99; i++) {
        assert_int_equal(bkv_log_read_record(&r, NULL), BKV_OK);
        offsets[i] = r.record_offset;
    }
    bkv_log_reader_free(&r);
    size_t flip = (size_t)offsets[96] + BKV_LOG_HEADER + 3;
    assert_true(flip / BKV_LOG_BLOCK == (len - 1) / BKV_LOG_BLOCK);
    data[flip] ^= 0x40;
    int count;
    bkv_err e;
    assert_int_equal(read_log_mode(data, len, 1, BKV_LOG_DAMAGE_FAIL, &count, &e, NULL), BKV_CORRUPTION);
    assert_non_null(strstr(e.msg, "valid records after it"));
    char at[32];
    snprintf(at, sizeof at, "offset %llu", (unsigned long long)offsets[96]);
    assert_non_null(strstr(e.msg, at));

    assert_int_equal(read_log_mode(data, len, 1, BKV_LOG_DAMAGE_STOP, &count, &e, &r), BKV_NOTFOUND);
    assert_int_equal(count, 96);
    assert_true(r.stopped);
    assert_int_equal(r.damage_offset, offsets[96]);

    assert_int_equal(read_log_mode(data, len, 1, BKV_LOG_DAMAGE_SKIP, &count, &e, &r), BKV_NOTFOUND);
    assert_int_equal(count, 98); /* all but the damaged one */
    assert_false(r.stopped);
    assert_int_equal(r.damage_offset, offsets[96]);
    assert_int_equal(r.skipped_bytes, offsets[97] - offsets[96]);

    /* An older log (no torn tail allowed) damaged at its very end: STOP
     * and SKIP keep what precedes, FAIL refuses. */
    data[flip] ^= 0x40;
    data[len - 2] ^= 0x40;
    assert_int_equal(read_log_mode(data, len, 0, BKV_LOG_DAMAGE_FAIL, &count, &e, NULL), BKV_CORRUPTION);
    assert_int_equal(read_log_mode(data, len, 0, BKV_LOG_DAMAGE_STOP, &count, &e, NULL), BKV_NOTFOUND);
    assert_int_equal(count, 98);
    assert_int_equal(read_log_mode(data, len, 0, BKV_LOG_DAMAGE_SKIP, &count, &e, NULL), BKV_NOTFOUND);
    assert_int_equal(count, 98);
    free(data);
}

/* Damage in the first or a middle fragment of a record that spans
 * several blocks leaves later fragments of it with no start: every mode
 * still ends (the orphans are skipped, never taken as the next valid
 * fragment at the offset where reading stopped), SKIP keeps every other
 * record, STOP keeps those before, FAIL refuses. Then a sweep: one byte
 * flipped at a time across a long record, every mode and tolerance ends. */
static void damage_inside_a_long_record_ends_in_every_mode(void **state) {
    (void)state;
    write_log(30);
    uint8_t *data;
    size_t len;
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    bkv_log_reader r;
    bkv_log_reader_init(&r, "test.log", data, len, 0);
    uint64_t offsets[30];
    for (int i = 0; i < 30; i++) {
        assert_int_equal(bkv_log_read_record(&r, NULL), BKV_OK);
        offsets[i] = r.record_offset;
    }
    bkv_log_reader_free(&r);
    /* Record 19: 70,019 bytes, three fragments. */
    size_t first_frag = (size_t)offsets[19] + BKV_LOG_HEADER + 10;
    size_t middle_frag = ((size_t)offsets[19] / BKV_LOG_BLOCK + 1) * BKV_LOG_BLOCK + BKV_LOG_HEADER + 10;
    size_t spots[] = {first_frag, middle_frag};
    for (int s = 0; s < 2; s++) {
        data[spots[s]] ^= 0x01;
        int count;
        bkv_err e;
        for (int tolerate = 0; tolerate <= 1; tolerate++) {
            assert_int_equal(read_log_mode(data, len, tolerate, BKV_LOG_DAMAGE_FAIL, &count, &e, NULL), BKV_CORRUPTION);
            assert_int_equal(read_log_mode(data, len, tolerate, BKV_LOG_DAMAGE_STOP, &count, &e, NULL), BKV_NOTFOUND);
            assert_int_equal(count, 19);
            assert_int_equal(read_log_mode(data, len, tolerate, BKV_LOG_DAMAGE_SKIP, &count, &e, NULL), BKV_NOTFOUND);
            assert_int_equal(count, 29);
        }
        data[spots[s]] ^= 0x01;
    }
    for (size_t at = (size_t)offsets[19]; at < (size_t)offsets[20] + 64; at += 257) {
        data[at] ^= 0x20;
        for (int mode = BKV_LOG_DAMAGE_FAIL; mode <= BKV_LOG_DAMAGE_SKIP; mode++)
            for (int tolerate = 0; tolerate <= 1; tolerate++) {
                bkv_log_reader_init(&r, "test.log", data, len, tolerate);
                r.on_damage = mode;
                int n = 0;
                while (bkv_log_read_record(&r, NULL) == BKV_OK) assert_true(++n <= 30);
                bkv_log_reader_free(&r);
            }
        data[at] ^= 0x20;
    }
    free(data);
}

/* A mapped log read before it was closed (as after a crash) ends in the
 * zeros of its preallocated chunk: that is its end, not a torn tail, in
 * the newest log and in an older one alike; a record whose end is zeros
 * is still torn; zeros in the middle are damage; closing cuts the file to
 * what was written. */
static void mapped_log_ends_at_its_preallocated_zeros(void **state) {
    (void)state;
    bkv_wfile *f;
    uint64_t written = write_log_as(120, 1, &f);
    uint8_t *data;
    size_t len;
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    assert_true(len > written); /* the preallocated end is there */
    for (size_t i = (size_t)written; i < len; i++) assert_int_equal(data[i], 0);
    int count;
    bkv_err e;
    bkv_log_reader r;
    for (int tolerate = 0; tolerate <= 1; tolerate++) {
        assert_int_equal(read_log_mode(data, len, tolerate, BKV_LOG_DAMAGE_FAIL, &count, &e, &r), BKV_NOTFOUND);
        assert_int_equal(count, 120);
        assert_int_equal(r.dropped_bytes, 0);
    }
    /* The last record (119: 70,119 bytes, three fragments) lost its end. */
    size_t cut = (size_t)written - 100;
    memset(data + cut, 0, len - cut);
    assert_int_equal(read_log_mode(data, len, 1, BKV_LOG_DAMAGE_FAIL, &count, &e, &r), BKV_NOTFOUND);
    assert_int_equal(count, 119);
    assert_true(r.dropped_bytes > 70000);
    assert_int_equal(read_log(data, len, 0, &count, &e), BKV_CORRUPTION);
    free(data);

    /* Zeros before records that follow are damage, as any other bytes. */
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    memset(data + BKV_LOG_BLOCK, 0, BKV_LOG_BLOCK);
    assert_int_equal(read_log(data, len, 1, &count, &e), BKV_CORRUPTION);
    assert_non_null(strstr(e.msg, "valid records after it"));
    free(data);

    assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    assert_int_equal(len, written);
    assert_int_equal(read_log(data, len, 0, &count, &e), BKV_NOTFOUND);
    assert_int_equal(count, 120);
    free(data);
}

/* Syncs in the middle of a mapped chunk unmap it when much was appended
 * since the last one (env_posix.c, UNMAP_BEFORE_SYNC) and keep it mapped
 * when little was: appends after either go on where they stopped, across
 * chunk boundaries, and every record reads back. */
static void mapped_log_appends_resume_after_syncs(void **state) {
    (void)state;
    bkv_wfile *f;
    remove(path);
    assert_int_equal(bkv_env_new_log(bkv_env_posix(), path, 0644, &f, NULL), BKV_OK);
    bkv_log_writer w;
    bkv_log_writer_init(&w, f);
    uint8_t *buf = malloc(80000);
    const int count = 400; /* about 3 MB: three chunks */
    for (int i = 0; i < count; i++) {
        size_t n = record_len(i);
        fill(buf, n, i);
        assert_int_equal(bkv_log_add_record(&w, buf, n, NULL), BKV_OK);
        if (i % 7 == 3 || i % 10 == 9) assert_int_equal(bkv_file_sync(f, NULL), BKV_OK);
    }
    free(buf);
    assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
    uint8_t *data;
    size_t len;
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    assert_int_equal(len, w.size);
    int got;
    assert_int_equal(read_log(data, len, 0, &got, NULL), BKV_NOTFOUND);
    assert_int_equal(got, count);
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
        cmocka_unit_test(damage_before_valid_records_in_the_last_block),
        cmocka_unit_test(damage_inside_a_long_record_ends_in_every_mode),
        cmocka_unit_test(mapped_log_ends_at_its_preallocated_zeros),
        cmocka_unit_test(mapped_log_appends_resume_after_syncs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
