/* Fuzz target: any bytes as a table file: opening, point reads, full
 * scans in both directions and value tags either fail cleanly or stay in
 * bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "table/table.h"
#include "valuesearch/table_values.h"
#include "util/coding.h"
#include "util/iterator.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/bkv-fuzz-table-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        unlink(path);
        return 0;
    }
    close(fd);
    bkv_cache *cache = bkv_cache_new(1 << 16);
    bkv_table_stats st = {0};
    bkv_table *t;
    bkv_err e;
    if (bkv_table_open(bkv_env_posix(), path, 1, cache, &st, &t, &e) == BKV_OK) {
        for (int i = 0; i < 8; i++) {
            char key[16];
            int n = snprintf(key, sizeof key, "key%d", i);
            int found;
            unsigned type;
            void *v = NULL;
            size_t vl;
            (void)bkv_table_may_contain(t, bkv_hash_bytes(key, (size_t)n));
            if (bkv_table_get(t, key, (size_t)n, UINT64_C(1) << 50, BKV_READ_FILL_CACHE | BKV_READ_VERIFY_ALL, &found, &type, &v, &vl, NULL, &st, &e) == BKV_OK && found)
                free(v);
        }
        bkv_ikey_iter *it;
        if (bkv_table_iter_new(t, 1, &st, &it) == BKV_OK) {
            int steps = 0;
            for (bkv_ikey_iter_first(it); bkv_ikey_iter_valid(it) && steps < 10000; bkv_ikey_iter_next(it), steps++) {
                size_t kl, vl;
                bkv_ikey_iter_key(it, &kl);
                bkv_ikey_iter_value(it, &vl);
            }
            steps = 0;
            for (bkv_ikey_iter_last(it); bkv_ikey_iter_valid(it) && steps < 10000; bkv_ikey_iter_prev(it), steps++) {
            }
            uint8_t probe[12] = "key3";
            bkv_put_u64(probe + 4, 0);
            bkv_ikey_iter_seek(it, probe, sizeof probe);
            (void)bkv_ikey_iter_status(it, &e);
            bkv_ikey_iter_destroy(it);
        }
        bkv_vt_index tix;
        if (bkv_vs_tags_index(t, &tix, &e) == BKV_OK) {
            for (uint32_t i = 0; i < tix.n && i < 64; i++) {
                uint8_t *tags_block, maybe[256];
                if (bkv_vs_tags_part(t, &tix, i, &tags_block, &e) == BKV_OK) free(tags_block);
                uint32_t first = tix.first_block[i], last = tix.first_block[i + 1] - 1;
                uint16_t tags[2] = {0, 0x1234};
                if (last - first < sizeof maybe)
                    (void)bkv_vs_blocks(t, tix.seed, first, last, tags, 2, BKV_READ_FILL_CACHE, maybe);
            }
            bkv_vt_index_free(&tix);
        }
        bkv_table_close(t);
    }
    bkv_cache_free(cache);
    unlink(path);
    return 0;
}
