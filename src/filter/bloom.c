/*
 * Standard Bloom filter: k probes spread over all m bits.
 *
 * Probe positions come from one 64-bit hash by Kirsch-Mitzenmacher double
 * hashing, g_i = a + i*b, where a is the hash and b the hash with its two
 * 32-bit halves swapped. In the top bits of g_i this is the classic
 * h1 + i*h2 over the two halves; the low bits add precision, so fastrange
 * over 64 bits stays unbiased for any m (a 32-bit position would already
 * skew bits by several percent at the hundreds of millions of bits a large
 * table's filter reaches).
 */
#include <math.h>

#include "filter/filter_int.h"
#include "util/hash.h"

static int bloom_size(bkv_filter *f, const bkv_filter_spec *spec, uint64_t n) {
    double bpk = bkv_spec_bits_per_key(spec);
    unsigned k;
    if (spec->bits_per_key > 0) k = (unsigned)lround(bpk * M_LN2);
    else k = (unsigned)lround(-log2(spec->fpr));
    if (k < 1) k = 1;
    if (k > BKV_FILTER_MAX_K) k = BKV_FILTER_MAX_K;
    double bits = ceil((double)n * bpk);
    /* Tiny filters would have absurd rates from rounding alone. */
    if (bits < 64) bits = 64;
    if (bits > (double)(UINT64_MAX / 2)) return BKV_INVALID;
    f->k = k;
    f->num_bits = (uint64_t)bits;
    f->payload_len = (size_t)((f->num_bits + 7) / 8);
    return BKV_OK;
}

static int bloom_add(bkv_filter *f, bkv_hash h, bool atomic) {
    uint64_t a = h, b = bkv_rotl64(h, 32);
    for (unsigned i = 0; i < f->k; i++) {
        uint64_t pos = bkv_fastrange64(a, f->num_bits);
        bkv_payload_set(f->payload, pos, atomic);
        a += b;
    }
    return BKV_OK;
}

static int bloom_may_contain(const bkv_filter *f, bkv_hash h) {
    uint64_t a = h, b = bkv_rotl64(h, 32);
    for (unsigned i = 0; i < f->k; i++) {
        uint64_t pos = bkv_fastrange64(a, f->num_bits);
        if (!bkv_payload_bit(f->payload, pos)) return 0;
        a += b;
    }
    return 1;
}

/* Batches keep BLOOM_RING keys in flight, each waiting on its next probe's
 * line, requested when the key entered the ring's tail. The key at the head
 * is tested: a zero bit (or its last probe) ends it and a new key takes its
 * place, else it goes to the tail with its next probe requested. So about
 * BLOOM_RING loads are always outstanding, where key-by-key probing waited
 * on each load and branch in turn. Keys finish out of order. */
#define BLOOM_RING 32
typedef struct bloom_slot {
    uint64_t a, b;
    size_t idx;
    unsigned probe;
} bloom_slot;

/* A macro: GCC drops calls to a function that only prefetches. */
#define BLOOM_REQUEST(f, s) __builtin_prefetch((f)->payload + (bkv_fastrange64((s).a, (f)->num_bits) >> 3))

static void bloom_may_contain_batch(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out) {
    if (f->payload_len < BKV_FILTER_CACHED_BYTES) {
        for (size_t i = 0; i < n; i++) out[i] = (uint8_t)bloom_may_contain(f, h[i]);
        return;
    }
    bloom_slot ring[BLOOM_RING];
    size_t head = 0, len = 0, next = 0;
    for (; next < n && len < BLOOM_RING; next++, len++) {
        ring[len] = (bloom_slot){h[next], bkv_rotl64(h[next], 32), next, 0};
        BLOOM_REQUEST(f, ring[len]);
    }
    while (len > 0) {
        bloom_slot s = ring[head];
        head = (head + 1) % BLOOM_RING;
        len--;
        unsigned set = bkv_payload_bit(f->payload, bkv_fastrange64(s.a, f->num_bits));
        if (set && s.probe + 1 < f->k) {
            s.a += s.b;
            s.probe++;
        } else {
            out[s.idx] = (uint8_t)set;
            if (next == n) continue;
            s = (bloom_slot){h[next], bkv_rotl64(h[next], 32), next, 0};
            next++;
        }
        BLOOM_REQUEST(f, s);
        ring[(head + len) % BLOOM_RING] = s;
        len++;
    }
}

static const char *bloom_check_geometry(bkv_filter *f) {
    if (f->filter_seed || f->params[0] || f->params[1] || f->params[2]) return "nonzero seed or parameters";
    if (f->k < 1 || f->k > BKV_FILTER_MAX_K) return "k out of range 1..30";
    if (f->num_bits == 0) return "zero bits";
    if (f->payload_len != (f->num_bits + 7) / 8) return "payload length does not match bit count";
    return NULL;
}

const bkv_filter_ops bkv_bloom_ops = {
    .type = BKV_FILTER_BLOOM,
    .name = "bloom",
    .size = bloom_size,
    .add = bloom_add,
    .may_contain = bloom_may_contain,
    .may_contain_batch = bloom_may_contain_batch,
    .check_geometry = bloom_check_geometry,
};
