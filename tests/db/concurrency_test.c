/* Writers, readers, searches by value and background flushes and
 * compactions at once: every acknowledged write is visible afterwards and
 * to its own writer at once, readers never see a value that was not
 * written nor half of a batch (the writers of a group insert their
 * batches in parallel, and groups overlap), a search finds every value
 * acknowledged before it began (and only the key holding it), and
 * concurrent sync writers share fsyncs (group commit); on one processor
 * too, where writers take turns. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "test_dir.h"

#define WRITERS 4
#define READERS 2
#define SEARCHERS 2
#define PER_WRITER 4000

TEST_DIR_FIXTURE("conc")
static bkv_db *db;
static int stop_readers;
static int acked[WRITERS]; /* writes each writer has had acknowledged */

static void *writer(void *arg) {
    int id = (int)(intptr_t)arg;
    bkv_write_options wo = {.size = sizeof(bkv_write_options)};
    for (int i = 0; i < PER_WRITER; i++) {
        char key[32], val[48];
        snprintf(key, sizeof key, "w%d-%05d", id, i);
        snprintf(val, sizeof val, "value-%d-%d", id, i);
        wo.sync = i % 50 == 0;
        if (bkv_put(db, &wo, key, strlen(key), val, strlen(val)) != BKV_OK) return (void *)1;
        __atomic_store_n(&acked[id], i + 1, __ATOMIC_RELEASE);
        void *v;
        size_t n;
        if (bkv_get(db, NULL, key, strlen(key), &v, &n) != BKV_OK) return (void *)2;
        int same = n == strlen(val) && memcmp(v, val, n) == 0;
        bkv_free(v);
        if (!same) return (void *)3;
        if (i % 8 == 0) {
            /* Both keys of the pair always hold the same value. */
            char pv[48];
            snprintf(pv, sizeof pv, "pair-%d-%d", id, i);
            bkv_batch *b = bkv_batch_create();
            int rc = !b || bkv_batch_put(b, "pair-a", 6, pv, strlen(pv)) || bkv_batch_put(b, "pair-b", 6, pv, strlen(pv)) ||
                     bkv_write(db, &wo, b);
            bkv_batch_destroy(b);
            if (rc) return (void *)4;
        }
    }
    return NULL;
}

static int get_at(const bkv_snapshot *snap, const char *key, char *out, size_t cap) {
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.snapshot = snap;
    void *v;
    size_t n;
    int rc = bkv_get(db, &ro, key, strlen(key), &v, &n);
    if (rc != BKV_OK) return rc;
    if (n >= cap) n = cap - 1;
    memcpy(out, v, n);
    out[n] = 0;
    bkv_free(v);
    return rc;
}

/* A batch is seen whole or not at all: at any snapshot the two keys of the
 * pair agree. */
static int pair_agrees(void) {
    const bkv_snapshot *snap = bkv_snapshot_create(db);
    if (!snap) return 0;
    char a[48] = "", b[48] = "";
    int ra = get_at(snap, "pair-a", a, sizeof a), rb = get_at(snap, "pair-b", b, sizeof b);
    bkv_snapshot_release(db, snap);
    return ra == rb && (ra == BKV_NOTFOUND || (ra == BKV_OK && strcmp(a, b) == 0));
}

typedef struct hit {
    int n;
    char key[32];
} hit;

static int on_hit(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)val, (void)vlen;
    hit *h = arg;
    if (h->n++ == 0 && klen < sizeof h->key) {
        memcpy(h->key, key, klen);
        h->key[klen] = 0;
    }
    return 0;
}

static void *searcher(void *arg) {
    uint64_t s = (uint64_t)(intptr_t)arg * 104729;
    while (!__atomic_load_n(&stop_readers, __ATOMIC_ACQUIRE)) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        int id = (int)((s >> 33) % WRITERS), i = (int)((s >> 40) % PER_WRITER);
        int written = __atomic_load_n(&acked[id], __ATOMIC_ACQUIRE) > i;
        char key[32], val[48];
        snprintf(key, sizeof key, "w%d-%05d", id, i);
        snprintf(val, sizeof val, "value-%d-%d", id, i);
        hit h = {0, ""};
        if (bkv_find_value(db, NULL, val, strlen(val), on_hit, &h, NULL) != BKV_OK) return (void *)1;
        if (h.n > 1 || (h.n == 1 && strcmp(h.key, key) != 0) || (written && h.n != 1)) return (void *)2;
    }
    return NULL;
}

static void *reader(void *arg) {
    uint64_t s = (uint64_t)(intptr_t)arg * 7919;
    while (!__atomic_load_n(&stop_readers, __ATOMIC_ACQUIRE)) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        int id = (int)((s >> 33) % WRITERS), i = (int)((s >> 40) % PER_WRITER);
        char key[32], val[48];
        snprintf(key, sizeof key, "w%d-%05d", id, i);
        snprintf(val, sizeof val, "value-%d-%d", id, i);
        void *v;
        size_t n;
        int rc = bkv_get(db, NULL, key, strlen(key), &v, &n);
        if (rc == BKV_OK) {
            int ok = n == strlen(val) && memcmp(v, val, n) == 0;
            bkv_free(v);
            if (!ok) return (void *)1;
        } else if (rc != BKV_NOTFOUND) {
            return (void *)1;
        }
        if (!pair_agrees()) return (void *)2;
    }
    return NULL;
}

static void writers_readers_and_flushes(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/conc", dir);
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 32 * 1024;
    o.value_index = BKV_VALUE_INDEX_HIERARCHY;
    o.value_filter_bits = 4096;
    o.value_partition_entries = 64;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    pthread_t w[WRITERS], r[READERS + SEARCHERS];
    for (int i = 0; i < READERS; i++) pthread_create(&r[i], NULL, reader, (void *)(intptr_t)(i + 1));
    for (int i = READERS; i < READERS + SEARCHERS; i++) pthread_create(&r[i], NULL, searcher, (void *)(intptr_t)(i + 1));
    for (int i = 0; i < WRITERS; i++) pthread_create(&w[i], NULL, writer, (void *)(intptr_t)i);
    for (int i = 0; i < WRITERS; i++) {
        void *res;
        pthread_join(w[i], &res);
        if (res) fprintf(stderr, "writer %d: %ld\n", i, (long)(intptr_t)res);
        assert_null(res);
    }
    __atomic_store_n(&stop_readers, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < READERS + SEARCHERS; i++) {
        void *res;
        pthread_join(r[i], &res);
        if (res) fprintf(stderr, "reader %d: %ld\n", i, (long)(intptr_t)res);
        assert_null(res);
    }
    for (int id = 0; id < WRITERS; id++)
        for (int i = 0; i < PER_WRITER; i++) {
            char key[32], val[48];
            snprintf(key, sizeof key, "w%d-%05d", id, i);
            snprintf(val, sizeof val, "value-%d-%d", id, i);
            void *v;
            size_t n;
            assert_int_equal(bkv_get(db, NULL, key, strlen(key), &v, &n), BKV_OK);
            assert_memory_equal(v, val, n);
            bkv_free(v);
        }
    char *s = bkv_property(db, "bloomkv.counter.writes");
    assert_int_equal(strtoull(s, NULL, 10), WRITERS * PER_WRITER + WRITERS * (PER_WRITER / 8) * 2);
    bkv_free(s);
    s = bkv_property(db, "bloomkv.counter.flushes");
    assert_true(strtoull(s, NULL, 10) > 5);
    bkv_free(s);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* Writers that only write, first as many as this machine's processors
 * (each follower of a group inserts its own batch, woken by the others),
 * then many more (the leader inserts the batches of those asleep): each
 * reads its own write back at once, and every write is there at the end
 * and counted once. */
#define MANY_PER_WRITER 2000

typedef struct many_writer {
    int id, failed;
} many_writer;

static void *write_many(void *arg) {
    many_writer *mw = arg;
    for (int i = 0; i < MANY_PER_WRITER && !mw->failed; i++) {
        char key[32];
        snprintf(key, sizeof key, "m%02d-%05d", mw->id, i);
        void *v;
        size_t n;
        mw->failed = bkv_put(db, NULL, key, strlen(key), key, strlen(key)) != BKV_OK ||
                     bkv_get(db, NULL, key, strlen(key), &v, &n) != BKV_OK;
        if (!mw->failed) {
            mw->failed = n != strlen(key) || memcmp(v, key, n) != 0;
            bkv_free(v);
        }
    }
    return NULL;
}

/* Writers in two rounds, as many as the processors and then 24, each
 * reading back what it wrote; afterwards every write is there. */
static void check_many_writers(const char *name) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 64 * 1024;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    cpu_set_t set;
    long cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    int counts[2] = {cpus > 1 && cpus < 24 ? (int)cpus : 2, 24}, total = 0;
    for (int round = 0; round < 2; round++) {
        int n = counts[round];
        pthread_t t[24];
        many_writer mw[24];
        for (int i = 0; i < n; i++) {
            mw[i] = (many_writer){total + i, 0};
            pthread_create(&t[i], NULL, write_many, &mw[i]);
        }
        for (int i = 0; i < n; i++) {
            pthread_join(t[i], NULL);
            assert_false(mw[i].failed);
        }
        total += n;
    }
    for (int id = 0; id < total; id++)
        for (int i = 0; i < MANY_PER_WRITER; i++) {
            char key[32];
            snprintf(key, sizeof key, "m%02d-%05d", id, i);
            void *v;
            size_t n;
            assert_int_equal(bkv_get(db, NULL, key, strlen(key), &v, &n), BKV_OK);
            assert_memory_equal(v, key, n);
            bkv_free(v);
        }
    char *s = bkv_property(db, "bloomkv.counter.writes");
    assert_int_equal(strtoull(s, NULL, 10), (unsigned long long)total * MANY_PER_WRITER);
    bkv_free(s);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void many_writers(void **state) {
    (void)state;
    check_many_writers("many");
}

/* On one processor, writers can only take turns: a leader inserts its
 * whole group before passing the lead, and writers sleep rather than
 * yield. The database's threads inherit the opening thread's processor
 * set, which the database reads at open. */
static void many_writers_on_one_processor(void **state) {
    (void)state;
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    check_many_writers("one_processor");
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(writers_readers_and_flushes), cmocka_unit_test(many_writers),
                                       cmocka_unit_test(many_writers_on_one_processor)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
