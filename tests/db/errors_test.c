/* The errors the header lists for the core calls (put, delete, write,
 * get, iterators, batches), each made to happen: the status is the one
 * listed, and the call left a message that says what went wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "db/db_int.h"
#include "test_db.h"
#include "test_dir.h"
#include "util/env_fault.h"

TEST_DIR_FIXTURE("errors")

/* rc is want, and the thread's message for db holds every part given. */
static void expect(int rc, int want, bkv_db *db, const char *part) {
    assert_int_equal(rc, want);
    const char *msg = bkv_errmsg(db);
    if (!strstr(msg, part)) fail_msg("message '%s' lacks '%s'", msg, part);
}

static bkv_db *open_new(const char *name) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return test_open_default(path);
}

static void writes_list_their_errors(void **state) {
    (void)state;
    bkv_db *db = open_new("writes");
    expect(bkv_put(NULL, NULL, "k", 1, "v", 1), BKV_INVALID, NULL, "NULL");
    expect(bkv_put(db, NULL, NULL, 3, "v", 1), BKV_INVALID, db, "NULL");
    expect(bkv_delete(db, NULL, NULL, 3), BKV_INVALID, db, "NULL");
    char *big = calloc(1, BKV_MAX_KEY_SIZE + 1);
    assert_non_null(big);
    expect(bkv_put(db, NULL, big, BKV_MAX_KEY_SIZE + 1, "v", 1), BKV_INVALID, db, "longer than the maximum");
    free(big);
    bkv_write_options wo;
    memset(&wo, 0, sizeof wo); /* never initialized: size 0 */
    expect(bkv_put(db, &wo, "k", 1, "v", 1), BKV_INVALID, db, "bkv_write_options");
    expect(bkv_write(db, NULL, NULL), BKV_INVALID, db, "bkv_write");
    bkv_batch *b = bkv_batch_create();
    assert_non_null(b);
    assert_int_equal(bkv_write(db, NULL, b), BKV_OK); /* empty: nothing to do */
    bkv_batch_destroy(b);
    assert_int_equal(bkv_put(db, NULL, "k", 1, "v", 1), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);

    /* Read-only: every write refused, naming the mode. */
    char path[300];
    snprintf(path, sizeof path, "%s/writes", dir);
    bkv_options o;
    bkv_options_init(&o);
    o.read_only = 1;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    expect(bkv_put(db, NULL, "k", 1, "v", 1), BKV_INVALID, db, "read-only");
    expect(bkv_delete(db, NULL, "k", 1), BKV_INVALID, db, "read-only");
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* A WAL write that fails is an I/O error with the system's reason, and
 * every later write returns it too. */
static void a_failed_wal_write_stops_writes(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/wal-failure", dir);
    bkv_fault_env *fe = bkv_fault_env_new();
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 1;
    bkv_db *db;
    assert_int_equal(bkv_open_env(path, &o, bkv_fault_env_get(fe), &db), BKV_OK);
    bkv_fault_env_fail_at(fe, BKV_FAULT_WRITE, 1, BKV_FAULT_EIO, 1); /* every write from the next one */
    bkv_write_options wo;
    bkv_write_options_init(&wo);
    wo.sync = 1;
    int rc = bkv_put(db, &wo, "k", 1, "v", 1);
    assert_int_equal(rc, BKV_IOERROR);
    assert_true(strlen(bkv_errmsg(db)) > 0);
    bkv_fault_env_clear_faults(fe);
    assert_int_equal(bkv_put(db, &wo, "k2", 2, "v", 1), BKV_IOERROR);
    assert_true(strlen(bkv_errmsg(db)) > 0);
    bkv_close(db);
    bkv_fault_env_free(fe);
}

static void reads_list_their_errors(void **state) {
    (void)state;
    bkv_db *db = open_new("reads"), *other = open_new("reads-other");
    void *v;
    size_t vl;
    expect(bkv_get(db, NULL, "k", 1, NULL, &vl), BKV_INVALID, db, "bkv_get");
    expect(bkv_get(NULL, NULL, "k", 1, &v, &vl), BKV_INVALID, NULL, "bkv_get");
    const bkv_snapshot *foreign = bkv_snapshot_create(other);
    assert_non_null(foreign);
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.snapshot = foreign;
    expect(bkv_get(db, &ro, "k", 1, &v, &vl), BKV_INVALID, db, "another database");
    bkv_iter *it;
    expect(bkv_iter_create(db, &ro, &it), BKV_INVALID, db, "another database");
    expect(bkv_iter_create(db, NULL, NULL), BKV_INVALID, db, "bkv_iter_create");
    bkv_snapshot_release(other, foreign);

    /* Bounds the wrong way round: an iterator with no entry, not an error. */
    assert_int_equal(bkv_put(db, NULL, "m", 1, "v", 1), BKV_OK);
    bkv_read_options_init(&ro);
    ro.lower_bound = "z";
    ro.lower_bound_len = 1;
    ro.upper_bound = "a";
    ro.upper_bound_len = 1;
    assert_int_equal(bkv_iter_create(db, &ro, &it), BKV_OK);
    bkv_iter_seek_to_first(it);
    assert_false(bkv_iter_valid(it));
    bkv_iter_seek_to_last(it);
    assert_false(bkv_iter_valid(it));
    assert_int_equal(bkv_iter_status(it), BKV_OK);
    bkv_iter_destroy(it);
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_close(other), BKV_OK);
}

static void batches_list_their_errors(void **state) {
    (void)state;
    expect(bkv_batch_put(NULL, "k", 1, "v", 1), BKV_INVALID, NULL, "NULL");
    bkv_batch *b = bkv_batch_create();
    assert_non_null(b);
    expect(bkv_batch_put(b, NULL, 2, "v", 1), BKV_INVALID, NULL, "NULL");
    expect(bkv_batch_delete(b, NULL, 2), BKV_INVALID, NULL, "NULL");
    char *big = calloc(1, BKV_MAX_KEY_SIZE + 1);
    assert_non_null(big);
    expect(bkv_batch_put(b, big, BKV_MAX_KEY_SIZE + 1, "v", 1), BKV_INVALID, NULL, "longer than the maximum");
    free(big);
    assert_int_equal(bkv_batch_count(b), 0); /* nothing refused was added */
    expect(bkv_batch_append_batch(b, NULL), BKV_INVALID, NULL, "bkv_batch_append_batch");
    bkv_batch_destroy(b);
    const bkv_snapshot *s = bkv_snapshot_create(NULL);
    assert_null(s);
    assert_non_null(strstr(bkv_errmsg(NULL), "bkv_snapshot_create"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(writes_list_their_errors),
        cmocka_unit_test(a_failed_wal_write_stops_writes),
        cmocka_unit_test(reads_list_their_errors),
        cmocka_unit_test(batches_list_their_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
