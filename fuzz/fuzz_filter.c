/* Fuzz target: any bytes handed to bkv_filter_open are either rejected or
 * probed safely, trusted or not. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bloomkv_filter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (unsigned flags = 0; flags < 2; flags++) {
        /* A private copy: the handle probes the buffer in place. */
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf) return 0;
        if (size) memcpy(buf, data, size);
        bkv_filter *f;
        char err[128];
        if (bkv_filter_open(buf, size, flags ? BKV_FILTER_OPEN_TRUSTED : 0, &f, err, sizeof err) == BKV_OK) {
            bkv_hash hs[40];
            uint8_t out[40];
            for (int i = 0; i < 40; i++) hs[i] = bkv_hash_bytes(&i, sizeof i);
            for (int i = 0; i < 40; i++) (void)bkv_filter_may_contain(f, hs[i]);
            bkv_filter_may_contain_batch(f, hs, 40, out);
            /* Range filters answer ranges: every kind, from points to the whole universe. */
            for (int i = 0; i < 40; i++) {
                uint64_t lo = hs[i], len = i < 10 ? 0 : i < 20 ? hs[i] % 4096 : i < 30 ? hs[i] >> 20 : UINT64_MAX;
                (void)bkv_filter_may_intersect(f, lo, UINT64_MAX - lo < len ? UINT64_MAX : lo + len);
            }
            bkv_filter_info info;
            bkv_filter_get_info(f, &info);
            bkv_filter_destroy(f);
        }
        free(buf);
    }
    return 0;
}
