#include "valuesearch/value_tags.h"

#include <stdlib.h>
#include <string.h>

#include "util/coding.h"

#define BAD(why, at)                                                                                            \
    bkv_fail(e, BKV_CORRUPTION, "%s: value tags index: %s at offset %llu", name, why,                          \
             (unsigned long long)(index_offset + (at)))

int bkv_vt_decode_index(const uint8_t *p, size_t len, uint64_t num_data_blocks, uint64_t index_offset,
                        bkv_vt_index *out, const char *name, bkv_err *e) {
    memset(out, 0, sizeof *out);
    if (len < BKV_VT_HEADER) return BAD("block too short", 0);
    if (bkv_get_u32(p) != BKV_VT_MAGIC) return BAD("bad magic", 0);
    if (bkv_get_u16(p + 4) != BKV_VT_VERSION) return BAD("unsupported version", 4);
    if (bkv_get_u16(p + 6) || bkv_get_u32(p + 12)) return BAD("reserved bits set", 6);
    uint32_t n = bkv_get_u32(p + 8);
    if (n == 0 || n > num_data_blocks) return BAD("partition count out of range", 8);
    if ((len - BKV_VT_HEADER) / BKV_VT_ENTRY != n || (len - BKV_VT_HEADER) % BKV_VT_ENTRY)
        return BAD("length does not match the partition count", 8);
    void *mem = malloc((size_t)(n + 1) * sizeof *out->first_block + (size_t)n * sizeof *out->size +
                       (size_t)n * sizeof *out->offset);
    if (!mem) return bkv_fail(e, BKV_NOMEM, "%s: out of memory reading value tags", name);
    out->offset = mem;
    out->first_block = (uint32_t *)(out->offset + n);
    out->size = out->first_block + n + 1;
    out->seed = bkv_get_u64(p + 16);
    out->n = n;
    uint64_t next_free = 0; /* tags blocks come one after another, each with its trailer */
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *q = p + BKV_VT_HEADER + (size_t)i * BKV_VT_ENTRY;
        size_t at = BKV_VT_HEADER + (size_t)i * BKV_VT_ENTRY;
        uint32_t first = bkv_get_u32(q), size = bkv_get_u32(q + 4);
        uint64_t off = bkv_get_u64(q + 8);
        const char *why = NULL;
        if (i == 0 ? first != 0 : first <= out->first_block[i - 1]) why = "partitions out of order";
        else if (first >= num_data_blocks) why = "partition past the last data block";
        else if (off < next_free || off > index_offset || index_offset - off < (uint64_t)size + 9)
            why = "tags block outside the table's tags";
        if (why) {
            bkv_vt_index_free(out);
            return BAD(why, at);
        }
        out->first_block[i] = first;
        out->size[i] = size;
        out->offset[i] = off;
        next_free = off + size + 9;
    }
    out->first_block[n] = (uint32_t)num_data_blocks;
    return BKV_OK;
}

void bkv_vt_index_free(bkv_vt_index *x) {
    free(x->offset);
    memset(x, 0, sizeof *x);
}

int bkv_vt_part_valid(const uint8_t *p, size_t len, uint32_t nblocks) {
    if (len / 4 < nblocks) return -1;
    uint64_t entries = 0;
    for (uint32_t i = 0; i < nblocks; i++) entries += bkv_get_u32(p + 4 * (size_t)i);
    return len - 4 * (size_t)nblocks == 2 * entries ? 0 : -1;
}

/* Whether any of the n tags at t equals tag: four at a time, as lanes of
 * a word (a lane of x is zero where the tags are equal, and the borrow
 * trick finds a zero lane exactly), then the rest one by one. */
static int has_tag(const uint8_t *t, uint32_t n, uint16_t tag) {
    const uint64_t ones = UINT64_C(0x0001000100010001), highs = UINT64_C(0x8000800080008000);
    uint64_t pattern = tag * ones;
    uint32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint64_t x = bkv_get_u64(t + 2 * (size_t)i) ^ pattern;
        if ((x - ones) & ~x & highs) return 1;
    }
    for (; i < n; i++)
        if (bkv_get_u16(t + 2 * (size_t)i) == tag) return 1;
    return 0;
}

void bkv_vt_match(const uint8_t *p, uint32_t nblocks, const uint16_t *tags, size_t ntags, uint8_t *maybe) {
    const uint8_t *t = p + 4 * (size_t)nblocks;
    for (uint32_t b = 0; b < nblocks; b++) {
        uint32_t count = bkv_get_u32(p + 4 * (size_t)b);
        uint8_t hit = 0;
        for (size_t j = 0; j < ntags && !hit; j++) hit = (uint8_t)has_tag(t, count, tags[j]);
        maybe[b] = hit;
        t += 2 * (size_t)count;
    }
}
