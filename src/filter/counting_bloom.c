/*
 * Counting Bloom filter: m 4-bit counters (two per byte, low nibble
 * first) instead of bits, probed like the standard Bloom filter (double
 * hashing from the two halves of the hash), so keys can be deleted.
 *
 * Counters saturate at 15 and a saturated counter is never decremented:
 * it may stand for more keys than it can count, and lowering it could
 * make a key still present read as absent. A delete first checks that the
 * key reads as present (every counter at least as large as the number of
 * its probes landing there); otherwise it returns BKV_NOTFOUND and changes
 * nothing.
 *
 * num_bits = m counters; k = probes; payload = ceil(m / 2) bytes.
 */
#include <math.h>

#include "filter/filter_int.h"
#include "util/hash.h"

#define MAX_COUNT 15

static inline unsigned counter_get(const bkv_filter *f, uint64_t i) {
    return (f->payload[i / 2] >> (4 * (i % 2))) & 0xf;
}

static inline void counter_set(bkv_filter *f, uint64_t i, unsigned v) {
    uint8_t *p = &f->payload[i / 2];
    unsigned shift = 4 * (i % 2);
    *p = (uint8_t)((*p & ~(0xfu << shift)) | (v << shift));
}

static void positions(const bkv_filter *f, bkv_hash h, uint64_t *pos) {
    uint64_t a = h, b = bkv_rotl64(h, 32);
    for (unsigned i = 0; i < f->k; i++, a += b) pos[i] = bkv_fastrange64(a, f->num_bits);
}

static int counting_size(bkv_filter *f, const bkv_filter_spec *spec, uint64_t n) {
    /* bits_per_key is the memory budget: 4 bits per counter. */
    double counters_per_key = spec->bits_per_key > 0 ? spec->bits_per_key / 4 : -log(spec->fpr) / (M_LN2 * M_LN2);
    unsigned k = (unsigned)lround(counters_per_key * M_LN2);
    if (k < 1) k = 1;
    if (k > BKV_FILTER_MAX_K) k = BKV_FILTER_MAX_K;
    double m = ceil((double)n * counters_per_key);
    if (m < 64) m = 64;
    if (m > (double)(UINT64_C(1) << 44)) return BKV_INVALID;
    f->k = k;
    f->num_bits = (uint64_t)m;
    f->payload_len = (size_t)((f->num_bits + 1) / 2);
    return BKV_OK;
}

static int counting_add(bkv_filter *f, bkv_hash h, bool atomic) {
    (void)atomic;
    uint64_t pos[BKV_FILTER_MAX_K];
    positions(f, h, pos);
    for (unsigned i = 0; i < f->k; i++) {
        unsigned c = counter_get(f, pos[i]);
        if (c < MAX_COUNT) counter_set(f, pos[i], c + 1);
    }
    return BKV_OK;
}

static int counting_may_contain(const bkv_filter *f, bkv_hash h) {
    uint64_t a = h, b = bkv_rotl64(h, 32);
    for (unsigned i = 0; i < f->k; i++, a += b)
        if (counter_get(f, bkv_fastrange64(a, f->num_bits)) == 0) return 0;
    return 1;
}

static int counting_remove(bkv_filter *f, bkv_hash h) {
    uint64_t pos[BKV_FILTER_MAX_K];
    positions(f, h, pos);
    /* A key whose probes share a counter added to it several times. */
    for (unsigned i = 0; i < f->k; i++) {
        unsigned times = 0;
        for (unsigned j = 0; j < f->k; j++) times += pos[j] == pos[i];
        unsigned c = counter_get(f, pos[i]);
        if (c != MAX_COUNT && c < times) return BKV_NOTFOUND;
    }
    for (unsigned i = 0; i < f->k; i++) {
        unsigned c = counter_get(f, pos[i]);
        if (c != MAX_COUNT) counter_set(f, pos[i], c - 1);
    }
    return BKV_OK;
}

static const char *counting_check(bkv_filter *f) {
    if (f->filter_seed || f->params[0] || f->params[1] || f->params[2]) return "nonzero seed or parameters";
    if (f->k < 1 || f->k > BKV_FILTER_MAX_K) return "k out of range 1..30";
    if (f->num_bits == 0) return "zero counters";
    if (f->payload_len != (f->num_bits + 1) / 2) return "payload length does not match counter count";
    return NULL;
}

const bkv_filter_ops bkv_counting_ops = {
    .type = BKV_FILTER_COUNTING,
    .name = "counting",
    .size = counting_size,
    .add = counting_add,
    .remove = counting_remove,
    .may_contain = counting_may_contain,
    .may_contain_batch = bkv_filter_batch_by_single,
    .check_geometry = counting_check,
};
