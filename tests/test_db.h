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

#endif
