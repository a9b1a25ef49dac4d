/* Helpers shared by the tests: deterministic key streams. */
#ifndef BKV_TEST_UTIL_H
#define BKV_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "bloomkv_filter.h"

/* The hash of the i-th key of a stream. Distinct i give distinct keys, and
 * streams with different tags never share a key, so a "never inserted"
 * query set is exact, not merely likely. */
static inline bkv_hash test_key_hash(uint32_t tag, uint64_t i) {
    char key[32];
    int n = snprintf(key, sizeof key, "k%08x-%016llx", tag, (unsigned long long)i);
    return bkv_hash_bytes(key, (size_t)n);
}

#endif
