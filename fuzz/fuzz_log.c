/* Fuzz target: any bytes as a WAL or manifest: records are read in every
 * damage mode (fail, stop, skip), torn tails tolerated or not, each read
 * ending and moving forward, and each record is decoded as a write batch and
 * as a version edit, without reading out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "db/version.h"
#include "db/write_batch.h"
#include "log/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_entry(void *arg, uint64_t seq, unsigned type, const uint8_t *key, size_t klen, const uint8_t *val,
                       size_t vlen) {
    (void)seq, (void)type, (void)key, (void)val;
    *(size_t *)arg += klen + vlen;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int mode = 0; mode < 6; mode++) {
        bkv_log_reader r;
        bkv_log_reader_init(&r, "fuzz.log", data, size, mode & 1);
        r.on_damage = mode >> 1; /* BKV_LOG_DAMAGE_FAIL, _STOP, _SKIP */
        bkv_err e;
        int records = 0;
        size_t last_pos = 0;
        while (records < 10000 && bkv_log_read_record(&r, &e) == BKV_OK) {
            /* Every record read takes at least its header's bytes. */
            if (records && r.pos <= last_pos) abort();
            last_pos = r.pos;
            records++;
            size_t bytes = 0;
            (void)bkv_batch_iterate(r.record.data, r.record.len, count_entry, &bytes, "fuzz.log", r.record_offset, &e);
            bkv_version_edit ed;
            if (bkv_edit_decode(&ed, r.record.data, r.record.len, "fuzz", 0, &e) == BKV_OK) {
                bkv_tree_version *base = bkv_tree_version_new(), *v = NULL;
                if (base && bkv_tree_version_apply(base, &ed, &v) == BKV_OK) bkv_tree_version_unref(v);
                bkv_tree_version_unref(base);
                bkv_edit_free(&ed);
            }
        }
        bkv_log_reader_free(&r);
    }
    return 0;
}
