/* Writers, readers and background flushes at once: every acknowledged
 * write is visible afterwards, readers never see a value that was not
 * written, and concurrent sync writers share fsyncs (group commit). */
#include <pthread.h>
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

#define WRITERS 4
#define READERS 2
#define PER_WRITER 4000

TEST_DIR_FIXTURE("conc")
static bkv_db *db;
static int stop_readers;

static void *writer(void *arg) {
    int id = (int)(intptr_t)arg;
    bkv_write_options wo = {0};
    for (int i = 0; i < PER_WRITER; i++) {
        char key[32], val[48];
        snprintf(key, sizeof key, "w%d-%05d", id, i);
        snprintf(val, sizeof val, "value-%d-%d", id, i);
        wo.sync = i % 50 == 0;
        if (bkv_put(db, &wo, key, strlen(key), val, strlen(val)) != BKV_OK) return (void *)1;
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
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    pthread_t w[WRITERS], r[READERS];
    for (int i = 0; i < READERS; i++) pthread_create(&r[i], NULL, reader, (void *)(intptr_t)(i + 1));
    for (int i = 0; i < WRITERS; i++) pthread_create(&w[i], NULL, writer, (void *)(intptr_t)i);
    for (int i = 0; i < WRITERS; i++) {
        void *res;
        pthread_join(w[i], &res);
        assert_null(res);
    }
    __atomic_store_n(&stop_readers, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < READERS; i++) {
        void *res;
        pthread_join(r[i], &res);
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
    assert_int_equal(strtoull(s, NULL, 10), WRITERS * PER_WRITER);
    bkv_free(s);
    s = bkv_property(db, "bloomkv.counter.flushes");
    assert_true(strtoull(s, NULL, 10) > 5);
    bkv_free(s);
    assert_int_equal(bkv_close(db), BKV_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(writers_readers_and_flushes)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
