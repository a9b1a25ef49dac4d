/* Helpers for tests that drive a database through the public API. */
#ifndef BKV_TEST_DB_H
#define BKV_TEST_DB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bloomkv.h"

/* A "bloomkv.counter.<name>" property as a number (aborts if unknown). */
static inline uint64_t test_counter(bkv_db *db, const char *name) {
    char prop[64];
    snprintf(prop, sizeof prop, "bloomkv.counter.%s", name);
    char *v = bkv_property(db, prop);
    if (!v) {
        fprintf(stderr, "no counter %s\n", name);
        abort();
    }
    uint64_t n = strtoull(v, NULL, 10);
    bkv_free(v);
    return n;
}

/* A bkv_find_value callback for keys named "key<number>": counts the
 * results and keeps the last key's number. */
typedef struct test_found {
    int n, key;
} test_found;

static inline int test_on_found(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)klen, (void)val, (void)vlen;
    test_found *f = arg;
    f->n++;
    f->key = atoi((const char *)key + 3);
    return 0;
}

#endif
