/*
 * The corruption matrix: for every file of a small database (tables,
 * WALs, the manifest, CURRENT) and byte positions across it, flip the byte
 * in a copy of the database; then, for every file, zero a range at three
 * offsets, truncate it at three lengths, append garbage and delete it. For
 * every damaged copy check that
 *   - `bkv_check` reports a problem naming the file (every byte a checksum
 *     covers; a damaged filter is reported too), and
 *   - reading every key either fails with an error or returns the right
 *     value: never a wrong value. A key may read as absent only when the
 *     damage hit the newest WAL, whose damaged tail is dropped as torn.
 *     Nor may a range holding a live key read as empty (tables carry
 *     range filters, damaged like every other byte).
 */
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
#include "test_scale.h"
#include "util/env.h"

TEST_DIR_FIXTURE("corrupt")

#define NKEYS 120

static void key_of(char *b, int k) { snprintf(b, 32, "key%04d", k); }
static void val_of(char *b, int k, int ver) { snprintf(b, 64, "val-%d-%d-padding-padding", k, ver); }

static int latest[NKEYS]; /* latest version written, -1 deleted */

static void build(const char *path) {
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 4096;
    o.block_size = 512;
    /* Tables carry value filter blocks, damaged like every other byte. */
    o.value_index = BKV_VALUE_INDEX_HIERARCHY;
    o.value_filter_bits = 512;
    o.value_partition_entries = 16;
    o.range_filter_bits_per_key = 16;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int ver = 0; ver < 3; ver++) {
        for (int k = 0; k < NKEYS; k++) {
            char key[32], val[64];
            key_of(key, k);
            if ((k + ver) % 11 == 0) {
                assert_int_equal(bkv_delete(db, NULL, key, strlen(key)), BKV_OK);
                latest[k] = -1;
            } else {
                val_of(val, k, ver);
                assert_int_equal(bkv_put(db, NULL, key, strlen(key), val, strlen(val)), BKV_OK);
                latest[k] = ver;
            }
        }
        if (ver == 1) assert_int_equal(bkv_compact(db), BKV_OK);
    }
    assert_int_equal(bkv_close(db), BKV_OK); /* the last round stays in the WAL */
}

static void copy_dir(const char *from, const char *to) {
    char cmd[1000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    assert_int_equal(system(cmd), 0);
}

static void flip(const char *file, size_t pos) { assert_int_equal(test_xor_byte(file, (long)pos, 0x40), 0); }

/* Whole-file damage: the ways a file system or an operator hurts a file. */
enum { ZERO_HEAD, ZERO_MIDDLE, ZERO_TAIL, TRUNCATE_EMPTY, TRUNCATE_HALF, TRUNCATE_LAST_BYTE, APPEND_GARBAGE, DELETE, DAMAGES };
static const char *const damage_names[DAMAGES] = {"zero-head", "zero-middle", "zero-tail", "truncate-empty",
                                                  "truncate-half", "truncate-last-byte", "append-garbage", "delete"};

static void damage(const char *file, size_t how) {
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    size_t len = (size_t)st.st_size, zero_len = len < 32 ? len : 32;
    if (how == DELETE) {
        assert_int_equal(remove(file), 0);
    } else if (how <= ZERO_TAIL) {
        size_t at = how == ZERO_HEAD ? 0 : how == ZERO_MIDDLE ? (len - zero_len) / 2 : len - zero_len;
        FILE *f = fopen(file, "r+b");
        assert_non_null(f);
        fseek(f, (long)at, SEEK_SET);
        for (size_t i = 0; i < zero_len; i++) fputc(0, f);
        fclose(f);
    } else if (how == APPEND_GARBAGE) {
        FILE *f = fopen(file, "ab");
        assert_non_null(f);
        uint64_t x = 0x2545f4914f6cdd1dULL;
        for (int i = 0; i < 64; i++, x = x * 6364136223846793005ULL + 1442695040888963407ULL) fputc((int)(x >> 56), f);
        fclose(f);
    } else {
        off_t to = how == TRUNCATE_EMPTY ? 0 : how == TRUNCATE_HALF ? (off_t)len / 2 : (off_t)len - 1;
        assert_int_equal(truncate(file, to), 0);
    }
}

static void count_problem(void *arg, const char *problem) {
    (void)problem;
    (*(int *)arg)++;
}

/* Reads every key of the damaged copy, and searches some by value; returns
 * 1 if the open or some read reported the damage. Fails on a wrong value or
 * a wrong search result. */
static int read_all(const char *path, int may_lose, const char *what, size_t pos) {
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 0;
    bkv_db *db;
    if (bkv_open(path, &o, &db) != BKV_OK) return 1;
    int reported = 0;
    for (int k = 0; k < NKEYS; k++) {
        char key[32], want[64];
        key_of(key, k);
        void *v;
        size_t n;
        int rc = bkv_get(db, NULL, key, strlen(key), &v, &n);
        if (rc < 0) {
            reported = 1;
            continue;
        }
        if (rc == BKV_OK) {
            int ok = 0;
            /* The newest version or, when a dropped WAL tail took the
             * latest writes back, an earlier one. */
            for (int ver = 0; ver < 3 && !ok; ver++) {
                if (ver != latest[k] && !may_lose) continue;
                val_of(want, k, ver);
                ok = n == strlen(want) && memcmp(v, want, n) == 0;
            }
            if (!ok) fail_msg("%s byte %zu: key %d read a wrong value", what, pos, k);
            bkv_free(v);
        } else if (latest[k] >= 0 && !may_lose) {
            fail_msg("%s byte %zu: key %d lost", what, pos, k);
        }
        if (latest[k] >= 0 && !may_lose) {
            /* [key, key + "\0") and [key, the next key's name) hold it. */
            char hi[32];
            key_of(hi, k + 1);
            int empty = 0;
            rc = bkv_range_empty(db, NULL, key, strlen(key), key, strlen(key) + 1, &empty);
            if (rc < 0) reported = 1;
            else if (empty) fail_msg("%s byte %zu: key %d's range read as empty", what, pos, k);
            rc = bkv_range_empty(db, NULL, key, strlen(key), hi, strlen(hi), &empty);
            if (rc < 0) reported = 1;
            else if (empty) fail_msg("%s byte %zu: the range from key %d read as empty", what, pos, k);
        }
        if (k % 10 == 0 && latest[k] >= 0) {
            /* Values are unique per key and version: only key k holds it. */
            val_of(want, k, latest[k]);
            test_found f = {0, -1};
            rc = bkv_find_value(db, NULL, want, strlen(want), test_on_found, &f, NULL);
            if (rc < 0) reported = 1;
            else if (f.n > 1 || (f.n == 1 && f.key != k) || (f.n == 0 && !may_lose))
                fail_msg("%s byte %zu: searching key %d's value found %d keys", what, pos, k, f.n);
        }
    }
    bkv_close(db);
    return reported;
}

/* Damages file name in a fresh copy (work) of base; 1 if bkv_check reports it. */
static int damage_reported(const char *base, const char *work, const char *name, void (*hurt)(const char *file, size_t arg),
                           size_t arg) {
    copy_dir(base, work);
    char target[400];
    snprintf(target, sizeof target, "%s/%s", work, name);
    hurt(target, arg);
    int problems = 0;
    return bkv_check(work, count_problem, &problems) != BKV_OK && problems > 0;
}

static void every_damage_is_caught(void **state) {
    (void)state;
    char base[300], work[300];
    snprintf(base, sizeof base, "%s/base", dir);
    snprintf(work, sizeof work, "%s/work", dir);
    build(base);
    int clean = 0;
    assert_int_equal(bkv_check(base, count_problem, &clean), BKV_OK);
    char **names;
    size_t nn;
    assert_int_equal(bkv_env_posix()->list_dir(bkv_env_posix(), base, &names, &nn, NULL), BKV_OK);
    /* The newest WAL's damage may read as a torn tail. */
    char newest_log[64] = "";
    for (size_t i = 0; i < nn; i++)
        if (strstr(names[i], ".log") && strcmp(names[i], newest_log) > 0) snprintf(newest_log, sizeof newest_log, "%s", names[i]);
    int files = 0, logs = 0;
    for (size_t i = 0; i < nn; i++) logs += strstr(names[i], ".log") != NULL;
    long tried = 0, detected = 0;
    for (size_t i = 0; i < nn; i++) {
        if (strcmp(names[i], "LOCK") == 0) continue;
        char file[400];
        snprintf(file, sizeof file, "%s/%s", base, names[i]);
        struct stat st;
        assert_int_equal(stat(file, &st), 0);
        if (st.st_size == 0) continue;
        files++;
        int is_newest_log = strcmp(names[i], newest_log) == 0;
        size_t step = st.st_size > 2048 ? 5 : 1;
        for (size_t pos = 0; pos < (size_t)st.st_size; pos += step) {
            tried++;
            if (!damage_reported(base, work, names[i], flip, pos))
                fail_msg("%s byte %zu: damage not reported by check", names[i], pos);
            detected++;
            /* Reading is slower (an open recovers): a sample of positions. */
            if (pos % 17 == 0) read_all(work, is_newest_log, names[i], pos);
        }
    }
    for (size_t i = 0; i < nn; i++) {
        if (strcmp(names[i], "LOCK") == 0) continue;
        int is_newest_log = strcmp(names[i], newest_log) == 0;
        for (size_t how = 0; how < DAMAGES; how++) {
            int reported = damage_reported(base, work, names[i], damage, how);
            /* An empty newest WAL is what a power loss before its first
             * sync leaves: nothing can tell it from damage. Nor can its
             * removal be told while an older WAL still awaits its flush:
             * the manifest names only the oldest live WAL. */
            int undetectable = is_newest_log && (how == TRUNCATE_EMPTY || (how == DELETE && logs > 1));
            tried += !undetectable;
            if (reported) detected += !undetectable;
            else if (!undetectable) fail_msg("%s %s: damage not reported by check", names[i], damage_names[how]);
            read_all(work, is_newest_log, names[i], how);
        }
    }
    bkv_env_free_list(names, nn);
    assert_true(files >= 4); /* CURRENT, manifest, tables, WAL */
    printf("corruption matrix: %d files, %ld damaged copies, %ld detected\n", files, tried, detected);
    test_report("corruptions_tried", (unsigned long long)tried);
    test_report("corruptions_detected", (unsigned long long)detected);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(every_damage_is_caught)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
