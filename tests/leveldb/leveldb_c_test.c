/* LevelDB's C API as bloomkv serves it (leveldb/c.c): each call's
 * contract as a LevelDB program relies on it, and what bloomkv does
 * differently (bytewise order only) refused in words. Links only
 * libbloomkv-leveldb, as such a program would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "leveldb/c.h"

static char dir[256];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "%s/bkv-leveldb-c-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void check_value(leveldb_t *db, const leveldb_readoptions_t *ro, const char *key, const char *want) {
    char *err = NULL;
    size_t len = 99;
    char *v = leveldb_get(db, ro, key, strlen(key), &len, &err);
    assert_null(err);
    if (!want) {
        assert_null(v);
        assert_int_equal(len, 0);
        return;
    }
    assert_non_null(v);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(v, want, len);
    leveldb_free(v);
}

static leveldb_t *open_new(const char *name, leveldb_options_t *o) {
    char path[300], *err = NULL;
    path_of(path, sizeof path, name);
    leveldb_options_set_create_if_missing(o, 1);
    leveldb_t *db = leveldb_open(o, path, &err);
    assert_null(err);
    assert_non_null(db);
    return db;
}

/* LevelDB's defaults: nothing is created unless asked; errors come as
 * malloc'd "<kind>: <detail>" strings, an earlier one freed first. */
static void defaults_and_errors(void **state) {
    (void)state;
    char path[300], *err = NULL;
    path_of(path, sizeof path, "missing");
    leveldb_options_t *o = leveldb_options_create();
    assert_null(leveldb_open(o, path, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "Invalid argument: "));
    assert_null(leveldb_open(o, path, &err)); /* replaces (and frees) the first message */
    assert_non_null(err);
    leveldb_free(err);
    err = NULL;
    assert_int_equal(access(path, F_OK), -1); /* nothing made */
    leveldb_destroy_db(o, path, &err); /* nothing there: not an error, as in LevelDB */
    assert_null(err);
    leveldb_t *db = open_new("exists", o);
    leveldb_close(db);
    leveldb_options_set_error_if_exists(o, 1);
    path_of(path, sizeof path, "exists");
    assert_null(leveldb_open(o, path, &err));
    assert_non_null(err);
    leveldb_free(err);
    leveldb_options_destroy(o);
    assert_true(leveldb_major_version() >= 1);
}

static void reads_writes_and_batches(void **state) {
    (void)state;
    leveldb_options_t *o = leveldb_options_create();
    leveldb_cache_t *cache = leveldb_cache_create_lru(1 << 20);
    leveldb_options_set_cache(o, cache);
    leveldb_options_set_compression(o, leveldb_snappy_compression);
    leveldb_options_set_write_buffer_size(o, 64 << 10);
    leveldb_t *db = open_new("rw", o);
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(wo, 1);
    char *err = NULL;
    leveldb_put(db, wo, "a", 1, "1", 1, &err);
    leveldb_put(db, wo, "b", 1, "2", 1, &err);
    assert_null(err);
    check_value(db, ro, "a", "1");
    check_value(db, ro, "zz", NULL);
    leveldb_delete(db, wo, "a", 1, &err);
    check_value(db, ro, "a", NULL);

    /* A batch: applied whole, replayed in order by iterate, appendable. */
    leveldb_writebatch_t *wb = leveldb_writebatch_create(), *more = leveldb_writebatch_create();
    leveldb_writebatch_put(wb, "x", 1, "gone", 4);
    leveldb_writebatch_clear(wb);
    leveldb_writebatch_put(wb, "c", 1, "3", 1);
    leveldb_writebatch_delete(more, "b", 1);
    leveldb_writebatch_put(more, "d", 1, "4", 1);
    leveldb_writebatch_append(wb, more);
    leveldb_write(db, wo, wb, &err);
    assert_null(err);
    check_value(db, ro, "x", NULL);
    check_value(db, ro, "b", NULL);
    check_value(db, ro, "c", "3");
    check_value(db, ro, "d", "4");
    leveldb_writebatch_destroy(more);
    leveldb_writebatch_destroy(wb);

    /* Many writes through small memtables: flushed, compacted, all read back. */
    leveldb_writeoptions_set_sync(wo, 0);
    for (int i = 0; i < 5000; i++) {
        char k[32], v[32];
        snprintf(k, sizeof k, "k%06d", i);
        snprintf(v, sizeof v, "v%d", i);
        leveldb_put(db, wo, k, strlen(k), v, strlen(v), &err);
        assert_null(err);
    }
    leveldb_compact_range(db, NULL, 0, NULL, 0);
    check_value(db, ro, "k004321", "v4321");
    const char *start[1] = {"k"}, *limit[1] = {"l"};
    size_t start_len[1] = {1}, limit_len[1] = {1};
    uint64_t sizes[1] = {0};
    leveldb_approximate_sizes(db, 1, start, start_len, limit, limit_len, sizes);
    assert_true(sizes[0] > 0);
    char *prop = leveldb_property_value(db, "leveldb.stats");
    assert_non_null(prop);
    leveldb_free(prop);
    assert_null(leveldb_property_value(db, "leveldb.no-such-property"));
    leveldb_close(db);
    leveldb_readoptions_destroy(ro);
    leveldb_writeoptions_destroy(wo);
    leveldb_cache_destroy(cache);
    leveldb_options_destroy(o);
}

typedef struct replay {
    char ops[16];
    int n;
} replay;

static void replay_put(void *s, const char *k, size_t kl, const char *v, size_t vl) {
    replay *r = s;
    assert_int_equal(kl, 1);
    assert_int_equal(vl, 1);
    r->ops[r->n++] = 'P';
    r->ops[r->n++] = k[0];
    (void)v;
}

static void replay_delete(void *s, const char *k, size_t kl) {
    replay *r = s;
    assert_int_equal(kl, 1);
    r->ops[r->n++] = 'D';
    r->ops[r->n++] = k[0];
}

static void batch_iterates_in_order(void **state) {
    (void)state;
    leveldb_writebatch_t *wb = leveldb_writebatch_create(), *more = leveldb_writebatch_create();
    leveldb_writebatch_put(wb, "a", 1, "1", 1);
    leveldb_writebatch_delete(wb, "b", 1);
    leveldb_writebatch_put(more, "c", 1, "3", 1);
    leveldb_writebatch_append(wb, more);
    replay r = {{0}, 0};
    leveldb_writebatch_iterate(wb, &r, replay_put, replay_delete);
    assert_int_equal(r.n, 6);
    assert_memory_equal(r.ops, "PaDbPc", 6);
    leveldb_writebatch_clear(wb);
    r.n = 0;
    leveldb_writebatch_iterate(wb, &r, replay_put, replay_delete);
    assert_int_equal(r.n, 0);
    leveldb_writebatch_destroy(more);
    leveldb_writebatch_destroy(wb);
}

static void iterators_and_snapshots(void **state) {
    (void)state;
    leveldb_options_t *o = leveldb_options_create();
    leveldb_t *db = open_new("iter", o);
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL;
    leveldb_put(db, wo, "b", 1, "2", 1, &err);
    leveldb_put(db, wo, "d", 1, "4", 1, &err);
    const leveldb_snapshot_t *snap = leveldb_create_snapshot(db);
    leveldb_put(db, wo, "c", 1, "3", 1, &err);
    leveldb_delete(db, wo, "b", 1, &err);
    leveldb_readoptions_set_snapshot(ro, snap);
    check_value(db, ro, "b", "2");
    check_value(db, ro, "c", NULL);
    leveldb_iterator_t *it = leveldb_create_iterator(db, ro);
    assert_false(leveldb_iter_valid(it));
    leveldb_iter_seek_to_first(it);
    size_t len;
    assert_true(leveldb_iter_valid(it));
    assert_memory_equal(leveldb_iter_key(it, &len), "b", 1);
    leveldb_iter_next(it);
    assert_memory_equal(leveldb_iter_key(it, &len), "d", 1);
    assert_memory_equal(leveldb_iter_value(it, &len), "4", 1);
    leveldb_iter_next(it);
    assert_false(leveldb_iter_valid(it));
    leveldb_iter_get_error(it, &err);
    assert_null(err);
    leveldb_iter_destroy(it);
    leveldb_readoptions_set_snapshot(ro, NULL);
    it = leveldb_create_iterator(db, ro);
    leveldb_iter_seek(it, "bb", 2);
    assert_memory_equal(leveldb_iter_key(it, &len), "c", 1);
    leveldb_iter_prev(it);
    assert_false(leveldb_iter_valid(it));
    leveldb_iter_seek_to_last(it);
    assert_memory_equal(leveldb_iter_key(it, &len), "d", 1);
    leveldb_iter_destroy(it);
    leveldb_release_snapshot(db, snap);
    leveldb_close(db);
    leveldb_readoptions_destroy(ro);
    leveldb_writeoptions_destroy(wo);
    leveldb_options_destroy(o);
}

static int reversed(void *s, const char *a, size_t al, const char *b, size_t bl) {
    (void)s;
    int r = memcmp(a, b, al < bl ? al : bl);
    r = r ? r : (al > bl) - (al < bl);
    return -r;
}

static int same_as_bytes(void *s, const char *a, size_t al, const char *b, size_t bl) {
    (void)s;
    int r = memcmp(a, b, al < bl ? al : bl);
    return r ? r : (al > bl) - (al < bl);
}

static const char *cmp_name(void *s) {
    (void)s;
    return "test.order";
}

static int destroyed;
static void count_destroy(void *s) {
    (void)s;
    destroyed++;
}

/* Only bytewise order is kept: a comparator that orders otherwise is
 * refused at open, naming it; one that orders the same is taken. */
static void comparators_and_filter_policies(void **state) {
    (void)state;
    char path[300], *err = NULL;
    path_of(path, sizeof path, "cmp");
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    leveldb_comparator_t *rev = leveldb_comparator_create(NULL, count_destroy, reversed, cmp_name);
    leveldb_options_set_comparator(o, rev);
    assert_null(leveldb_open(o, path, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "test.order"));
    assert_non_null(strstr(err, "bytewise"));
    leveldb_free(err);
    err = NULL;
    leveldb_comparator_t *same = leveldb_comparator_create(NULL, count_destroy, same_as_bytes, cmp_name);
    leveldb_options_set_comparator(o, same);
    leveldb_filterpolicy_t *bloom = leveldb_filterpolicy_create_bloom(12);
    leveldb_options_set_filter_policy(o, bloom);
    leveldb_t *db = leveldb_open(o, path, &err);
    assert_null(err);
    assert_non_null(db);
    leveldb_close(db);
    leveldb_filterpolicy_destroy(bloom);
    leveldb_comparator_destroy(rev);
    leveldb_comparator_destroy(same);
    assert_int_equal(destroyed, 2);
    leveldb_options_destroy(o);
}

/* Repair after a lost CURRENT, as LevelDB's RepairDB is asked to. */
static void repair_after_a_lost_current(void **state) {
    (void)state;
    leveldb_options_t *o = leveldb_options_create();
    leveldb_t *db = open_new("repair", o);
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL, path[300], current[340];
    leveldb_put(db, wo, "kept", 4, "yes", 3, &err);
    leveldb_compact_range(db, NULL, 0, NULL, 0);
    leveldb_close(db);
    path_of(path, sizeof path, "repair");
    snprintf(current, sizeof current, "%s/CURRENT", path);
    assert_int_equal(unlink(current), 0);
    leveldb_options_set_create_if_missing(o, 0);
    assert_null(leveldb_open(o, path, &err));
    leveldb_free(err);
    err = NULL;
    leveldb_repair_db(o, path, &err);
    assert_null(err);
    db = leveldb_open(o, path, &err);
    assert_null(err);
    check_value(db, ro, "kept", "yes");
    leveldb_close(db);
    leveldb_destroy_db(o, path, &err);
    assert_null(err);
    assert_int_equal(access(path, F_OK), -1);
    leveldb_readoptions_destroy(ro);
    leveldb_writeoptions_destroy(wo);
    leveldb_options_destroy(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_and_errors),
        cmocka_unit_test(reads_writes_and_batches),
        cmocka_unit_test(batch_iterates_in_order),
        cmocka_unit_test(iterators_and_snapshots),
        cmocka_unit_test(comparators_and_filter_policies),
        cmocka_unit_test(repair_after_a_lost_current),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
