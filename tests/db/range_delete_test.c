/* bkv_delete_range against a model: random puts, deletes and range
 * deletions (bounded, unbounded, empty, reversed) through flushes,
 * compactions, reopens, snapshots and checkpoints; every get, multi-get
 * and iteration in both directions reads what the model holds, and a
 * snapshot what the model held when it was taken. Then the cases that
 * make the feature worth having: a whole-database range deletion drops
 * every table at once, and compaction retires the deletion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "test_dir.h"

TEST_DIR_FIXTURE("rangedel")

#define KEYS 300
#define SNAPSHOTS 3


typedef struct model {
    int present[KEYS];
    unsigned value[KEYS];
} model;

static void key_of(int i, char *k) { snprintf(k, 16, "k%04d", i); }


static int compaction_style = BKV_COMPACTION_LEVELED;

static bkv_db *open_db(const char *path) {
    bkv_options o;
    bkv_options_init(&o);
    o.compaction_style = compaction_style;
    o.create_if_missing = 1;
    o.write_buffer_size = 16 * 1024; /* flushes every few hundred writes */
    o.level0_compaction_trigger = 2;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    return db;
}

static uint64_t next_random(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Every key read three ways (get, one multi-get, iteration forward and
 * back) at snapshot s (NULL: latest) agrees with m. */
static void expect_model(bkv_db *db, const bkv_snapshot *s, const model *m, const char *when) {
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.snapshot = s;
    static char keys[KEYS][16];
    const void *kp[KEYS];
    size_t kl[KEYS];
    for (int i = 0; i < KEYS; i++) {
        key_of(i, keys[i]);
        kp[i] = keys[i];
        kl[i] = strlen(keys[i]);
        void *v;
        size_t n;
        int rc = bkv_get(db, &ro, keys[i], kl[i], &v, &n);
        if (rc != (m->present[i] ? BKV_OK : BKV_NOTFOUND)) fail_msg("%s: get %s: %d", when, keys[i], rc);
        if (rc == BKV_OK) {
            assert_int_equal(n, sizeof(unsigned));
            unsigned got;
            memcpy(&got, v, sizeof got);
            if (got != m->value[i]) fail_msg("%s: get %s: value %u, model %u", when, keys[i], got, m->value[i]);
            bkv_free(v);
        }
    }
    static void *vals[KEYS];
    static size_t vlens[KEYS];
    static int st[KEYS];
    assert_int_equal(bkv_multi_get(db, &ro, KEYS, kp, kl, vals, vlens, st), BKV_OK);
    for (int i = 0; i < KEYS; i++) {
        if (st[i] != (m->present[i] ? BKV_OK : BKV_NOTFOUND)) fail_msg("%s: multi-get %s: %d", when, keys[i], st[i]);
        if (st[i] == BKV_OK) {
            assert_memory_equal(vals[i], &m->value[i], sizeof(unsigned));
            bkv_free(vals[i]);
        }
    }
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, &ro, &it), BKV_OK);
    int i = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it), i++) {
        while (i < KEYS && !m->present[i]) i++;
        size_t n;
        const char *k = bkv_iter_key(it, &n);
        if (i >= KEYS || n != strlen(keys[i]) || memcmp(k, keys[i], n))
            fail_msg("%s: forward iteration shows %.*s, model %s", when, (int)n, k, i < KEYS ? keys[i] : "(end)");
        const void *v = bkv_iter_value(it, &n);
        assert_memory_equal(v, &m->value[i], sizeof(unsigned));
    }
    while (i < KEYS && !m->present[i]) i++;
    if (i != KEYS) fail_msg("%s: forward iteration ends before %s", when, keys[i]);
    assert_int_equal(bkv_iter_status(it), BKV_OK);
    i = KEYS - 1;
    for (bkv_iter_seek_to_last(it); bkv_iter_valid(it); bkv_iter_prev(it), i--) {
        while (i >= 0 && !m->present[i]) i--;
        size_t n;
        const char *k = bkv_iter_key(it, &n);
        if (i < 0 || n != strlen(keys[i]) || memcmp(k, keys[i], n))
            fail_msg("%s: backward iteration shows %.*s", when, (int)n, k);
    }
    while (i >= 0 && !m->present[i]) i--;
    if (i >= 0) fail_msg("%s: backward iteration ends before %s", when, keys[i]);
    bkv_iter_destroy(it);
}

static int range_deletions(bkv_db *db) {
    char *v = bkv_property(db, "bloomkv.range-deletions");
    int n = atoi(v);
    bkv_free(v);
    return n;
}

static void random_ops(const char *name) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    bkv_db *db = open_db(path);
    model m = {{0}, {0}}, at[SNAPSHOTS];
    const bkv_snapshot *snaps[SNAPSHOTS] = {0};
    uint64_t rnd = 0x9e3779b97f4a7c15ULL;
    unsigned stamp = 0;
    int range_deletes = 0;
    for (int step = 0; step < 6000; step++) {
        int op = (int)(next_random(&rnd) % 1000);
        int a = (int)(next_random(&rnd) % KEYS), b = (int)(next_random(&rnd) % (KEYS + 1));
        char ka[16], kb[16];
        key_of(a, ka);
        key_of(b, kb);
        if (op < 600) {
            unsigned v = ++stamp;
            assert_int_equal(bkv_put(db, NULL, ka, strlen(ka), &v, sizeof v), BKV_OK);
            m.present[a] = 1;
            m.value[a] = v;
        } else if (op < 800) {
            assert_int_equal(bkv_delete(db, NULL, ka, strlen(ka)), BKV_OK);
            m.present[a] = 0;
        } else if (op < 830) {
            /* [a, b): reversed or empty deletes nothing; b == KEYS: unbounded. */
            int unbounded = b == KEYS;
            assert_int_equal(bkv_delete_range(db, NULL, ka, strlen(ka), unbounded ? NULL : kb, unbounded ? 0 : strlen(kb)),
                             BKV_OK);
            for (int i = a; i < (unbounded ? KEYS : b); i++) m.present[i] = 0;
            range_deletes++;
        } else if (op < 840) {
            assert_int_equal(bkv_flush(db), BKV_OK);
        } else if (op < 848) {
            /* a partial compaction, or all of it */
            const char *lo = op < 844 ? ka : NULL;
            assert_int_equal(bkv_compact_range(db, lo, lo ? strlen(lo) : 0, NULL, 0), BKV_OK);
        } else if (op < 856) {
            int s = (int)(next_random(&rnd) % SNAPSHOTS);
            if (snaps[s]) {
                expect_model(db, snaps[s], &at[s], "snapshot before release");
                bkv_snapshot_release(db, snaps[s]);
            }
            snaps[s] = bkv_snapshot_create(db);
            assert_non_null(snaps[s]);
            at[s] = m;
        } else if (op < 860) {
            for (int s = 0; s < SNAPSHOTS; s++)
                if (snaps[s]) bkv_snapshot_release(db, snaps[s]), snaps[s] = NULL;
            assert_int_equal(bkv_close(db), BKV_OK);
            db = open_db(path);
            expect_model(db, NULL, &m, "after reopen");
        } else if (op < 862) {
            char copy[330];
            snprintf(copy, sizeof copy, "%s/copy%d", dir, step);
            assert_int_equal(bkv_checkpoint(db, copy), BKV_OK);
            bkv_db *c = open_db(copy);
            expect_model(c, NULL, &m, "checkpoint");
            assert_int_equal(bkv_close(c), BKV_OK);
            test_remove_dir(copy);
        }
        if (step % 250 == 0) {
            expect_model(db, NULL, &m, "latest");
            for (int s = 0; s < SNAPSHOTS; s++)
                if (snaps[s]) expect_model(db, snaps[s], &at[s], "snapshot");
        }
    }
    assert_true(range_deletes > 100);
    expect_model(db, NULL, &m, "end");
    for (int s = 0; s < SNAPSHOTS; s++)
        if (snaps[s]) bkv_snapshot_release(db, snaps[s]);
    /* With no snapshot left, compaction removes what the deletions
     * covered, and they leave once their WALs are retired too. */
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "k0000", 5, &stamp, sizeof stamp), BKV_OK);
    m.present[0] = 1;
    m.value[0] = stamp;
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    /* Tiered merges runs as they come: a deletion may stay longer there. */
    if (compaction_style == BKV_COMPACTION_LEVELED) assert_int_equal(range_deletions(db), 0);
    expect_model(db, NULL, &m, "every deletion gone");
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_OK);
}

static void random_ops_match_the_model(void **state) {
    (void)state;
    compaction_style = BKV_COMPACTION_LEVELED;
    random_ops("leveled");
}

static void random_ops_match_the_model_tiered(void **state) {
    (void)state;
    compaction_style = BKV_COMPACTION_TIERED;
    random_ops("tiered");
    compaction_style = BKV_COMPACTION_LEVELED;
}

static size_t files(bkv_db *db) {
    size_t n = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        char name[64];
        snprintf(name, sizeof name, "bloomkv.num-files-at-level%d", l);
        char *v = bkv_property(db, name);
        n += strtoull(v, NULL, 10);
        bkv_free(v);
    }
    return n;
}


/* Everything deleted at once: every table goes in the same call, the WAL's
 * rows read as deleted, writes after it stand, and once the memtables are
 * flushed the deletion itself is gone. */
static void whole_database_drops_every_table(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/all", dir);
    bkv_db *db = open_db(path);
    for (unsigned i = 0; i < 5000; i++) {
        char k[16];
        key_of((int)(i % KEYS), k);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), &i, sizeof i), BKV_OK);
    }
    /* Tables that no compaction is rewriting when the deletion comes. */
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "k0001", 5, "wal", 3), BKV_OK); /* in the memtable only */
    assert_true(files(db) > 0);
    assert_int_equal(bkv_delete_range(db, NULL, NULL, 0, NULL, 0), BKV_OK);
    assert_int_equal(files(db), 0);
    model empty = {{0}, {0}};
    expect_model(db, NULL, &empty, "after deleting everything");
    assert_int_equal(range_deletions(db), 1);
    unsigned v = 7;
    assert_int_equal(bkv_put(db, NULL, "k0002", 5, &v, sizeof v), BKV_OK);
    empty.present[2] = 1;
    empty.value[2] = 7;
    expect_model(db, NULL, &empty, "a write after the deletion");
    assert_int_equal(bkv_close(db), BKV_OK);
    db = open_db(path);
    expect_model(db, NULL, &empty, "reopened");
    /* The WAL's older row went into a table at the open; a compaction
     * (the background thread's, which seeks such tables out, or this one)
     * removes it, and with it the last thing the deletion covered. */
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    assert_int_equal(range_deletions(db), 0);
    expect_model(db, NULL, &empty, "compacted");
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* A snapshot keeps what a range deletion covers: the tables stay until it
 * is released, and compaction then removes the rows and the deletion. */
static void snapshot_keeps_tables_until_released(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/snap", dir);
    bkv_db *db = open_db(path);
    model m = {{0}, {0}};
    for (unsigned i = 0; i < KEYS; i++) {
        char k[16];
        key_of((int)i, k);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), &i, sizeof i), BKV_OK);
        m.present[i] = 1;
        m.value[i] = i;
    }
    assert_int_equal(bkv_flush(db), BKV_OK);
    const bkv_snapshot *s = bkv_snapshot_create(db);
    model before = m;
    assert_int_equal(bkv_delete_range(db, NULL, "k0100", 5, "k0200", 5), BKV_OK);
    for (int i = 100; i < 200; i++) m.present[i] = 0;
    expect_model(db, s, &before, "the snapshot");
    expect_model(db, NULL, &m, "latest");
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    expect_model(db, s, &before, "the snapshot after compaction");
    assert_int_equal(range_deletions(db), 1);
    bkv_snapshot_release(db, s);
    unsigned again = 4242;
    assert_int_equal(bkv_put(db, NULL, "k0250", 5, &again, sizeof again), BKV_OK);
    m.value[250] = again;
    assert_int_equal(bkv_flush(db), BKV_OK); /* the WAL it was written beside is retired */
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    assert_int_equal(range_deletions(db), 0);
    expect_model(db, NULL, &m, "after the deletion left");
    assert_int_equal(bkv_close(db), BKV_OK);
}

static int count_found(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)val, (void)vlen;
    assert_true(klen == 5 && (memcmp(key, "k0100", 5) < 0 || memcmp(key, "k0200", 5) >= 0));
    ++*(int *)arg;
    return 0;
}

/* A search by value finds no row a range deletion covers: not in the
 * memtable, not in a table it dropped, not in one it only covers. */
static void value_search_skips_deleted_rows(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/values", dir);
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 1;
    o.write_buffer_size = 16 * 1024;
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < KEYS; i++) {
            char k[16];
            key_of(i, k);
            assert_int_equal(bkv_put(db, NULL, k, strlen(k), "blue", 4), BKV_OK);
        }
        if (round == 0) assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
        if (round == 1) assert_int_equal(bkv_flush(db), BKV_OK);
        assert_int_equal(bkv_delete_range(db, NULL, "k0100", 5, "k0200", 5), BKV_OK);
        int found = 0;
        assert_int_equal(bkv_find_value(db, NULL, "blue", 4, count_found, &found, NULL), BKV_OK);
        assert_int_equal(found, KEYS - 100);
    }
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    int found = 0;
    assert_int_equal(bkv_find_value(db, NULL, "blue", 4, count_found, &found, NULL), BKV_OK);
    assert_int_equal(found, KEYS - 100);
    assert_int_equal(bkv_delete_range(db, NULL, NULL, 0, NULL, 0), BKV_OK);
    found = 0;
    assert_int_equal(bkv_find_value(db, NULL, "blue", 4, count_found, &found, NULL), BKV_OK);
    assert_int_equal(found, 0);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void refuses_what_it_should(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/refuse", dir);
    bkv_db *db = open_db(path);
    assert_int_equal(bkv_delete_range(NULL, NULL, "a", 1, "b", 1), BKV_INVALID);
    assert_int_equal(bkv_delete_range(db, NULL, NULL, 1, "b", 1), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "bkv_delete_range"));
    assert_int_equal(bkv_delete_range(db, NULL, "b", 1, "a", 1), BKV_OK); /* nothing in it */
    assert_int_equal(range_deletions(db), 0);
    assert_int_equal(bkv_close(db), BKV_OK);
    bkv_options o;
    bkv_options_init(&o);
    o.read_only = 1;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(bkv_delete_range(db, NULL, "a", 1, "b", 1), BKV_INVALID);
    assert_int_equal(bkv_close(db), BKV_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_ops_match_the_model),
        cmocka_unit_test(random_ops_match_the_model_tiered),
        cmocka_unit_test(whole_database_drops_every_table),
        cmocka_unit_test(snapshot_keeps_tables_until_released),
        cmocka_unit_test(value_search_skips_deleted_rows),
        cmocka_unit_test(refuses_what_it_should),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
