/*
 * Cuckoo filter (Fan, Andersen, Kaminsky & Mitzenmacher, 2014): buckets of
 * four f-bit fingerprints (f = 8, 12 or 16, bit-packed). A key's
 * fingerprint lives in one of two buckets, i1 from the hash and
 * i2 = (H(fingerprint) - i1) mod buckets ("partial-key cuckoo hashing"):
 * the map is its own inverse, so either bucket and the fingerprint give
 * the other one and entries move without their keys. Unlike the usual
 * XOR form it works for any bucket count, so the table is sized to the
 * expected keys instead of the next power of two (which can waste half).
 *
 * Insertion evicts ("kicks") a random fingerprint to its other bucket when
 * both buckets are full, at most MAX_KICKS times. When that fails every
 * kick is undone, so the filter is exactly as before and BKV_FULL is
 * returned: no key already added is ever lost.
 *
 * params[0] = number of buckets (< 2^32); k = fingerprint bits;
 * num_keys = count.
 */
#include <stdlib.h>
#include <string.h>

#include "filter/filter_int.h"
#include "util/hash.h"

#define SLOTS 4
#define MAX_KICKS 500
/* Sized so that the expected keys fill 90% of the slots: inserts first fail
 * near 95-98%, so adding the expected number of keys succeeds. */
#define TARGET_LOAD 0.90

static inline unsigned bits_of(const bkv_filter *f) { return f->k; }

static inline uint32_t slot_get(const bkv_filter *f, uint64_t bucket, unsigned slot) {
    uint64_t bit = (bucket * SLOTS + slot) * bits_of(f);
    const uint8_t *p = f->payload + bit / 8;
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16; /* spare bytes make this safe */
    return (v >> (bit % 8)) & ((1u << bits_of(f)) - 1);
}

static inline void slot_set(bkv_filter *f, uint64_t bucket, unsigned slot, uint32_t fp) {
    uint64_t bit = (bucket * SLOTS + slot) * bits_of(f);
    for (unsigned i = 0; i < bits_of(f); i++, bit++) {
        uint8_t mask = (uint8_t)(1u << (bit % 8));
        if ((fp >> i) & 1) f->payload[bit / 8] |= mask;
        else f->payload[bit / 8] &= (uint8_t)~mask;
    }
}

static inline uint32_t fingerprint(const bkv_filter *f, bkv_hash h) {
    uint32_t fp = (uint32_t)(h >> 32) & ((1u << bits_of(f)) - 1);
    return fp ? fp : 1; /* 0 marks an empty slot */
}

static inline uint64_t bucket1(const bkv_filter *f, bkv_hash h) { return bkv_fastrange32((uint32_t)h, (uint32_t)f->params[0]); }

static inline uint64_t alt_bucket(const bkv_filter *f, uint64_t b, uint32_t fp) {
    uint64_t nb = f->params[0];
    uint64_t target = bkv_fastrange32((uint32_t)(fp * 0x9e3779b1u), (uint32_t)nb);
    return target >= b ? target - b : target + nb - b;
}

static int bucket_has(const bkv_filter *f, uint64_t b, uint32_t fp) {
    for (unsigned s = 0; s < SLOTS; s++)
        if (slot_get(f, b, s) == fp) return 1;
    return 0;
}

static int bucket_put(bkv_filter *f, uint64_t b, uint32_t fp) {
    for (unsigned s = 0; s < SLOTS; s++)
        if (slot_get(f, b, s) == 0) {
            slot_set(f, b, s, fp);
            return 1;
        }
    return 0;
}

static int cuckoo_size(bkv_filter *f, const bkv_filter_spec *spec, uint64_t n) {
    (void)spec;
    uint64_t buckets = (uint64_t)((double)n / (SLOTS * TARGET_LOAD)) + 1;
    if (buckets > UINT32_MAX) return BKV_INVALID;
    f->params[0] = buckets;
    f->num_bits = buckets * SLOTS * bits_of(f);
    /* Two spare bytes so a slot read never runs past the end. */
    f->payload_len = (size_t)((f->num_bits + 7) / 8 + 2);
    return BKV_OK;
}

static int cuckoo8_size(bkv_filter *f, const bkv_filter_spec *spec, uint64_t n) {
    f->k = 8;
    return cuckoo_size(f, spec, n);
}
static int cuckoo12_size(bkv_filter *f, const bkv_filter_spec *spec, uint64_t n) {
    f->k = 12;
    return cuckoo_size(f, spec, n);
}
static int cuckoo16_size(bkv_filter *f, const bkv_filter_spec *spec, uint64_t n) {
    f->k = 16;
    return cuckoo_size(f, spec, n);
}

typedef struct kick {
    uint64_t bucket;
    unsigned slot;
    uint32_t old;
} kick;

static int cuckoo_add(bkv_filter *f, bkv_hash h, bool atomic) {
    (void)atomic;
    uint32_t fp = fingerprint(f, h);
    uint64_t b1 = bucket1(f, h), b2 = alt_bucket(f, b1, fp);
    if (bucket_put(f, b1, fp) || bucket_put(f, b2, fp)) return BKV_OK;
    kick log[MAX_KICKS];
    uint64_t b = (f->rng = f->rng * 6364136223846793005ULL + 1442695040888963407ULL) >> 63 ? b1 : b2;
    for (int n = 0; n < MAX_KICKS; n++) {
        f->rng = f->rng * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned s = (unsigned)(f->rng >> 62);
        uint32_t victim = slot_get(f, b, s);
        log[n] = (kick){b, s, victim};
        slot_set(f, b, s, fp);
        fp = victim;
        b = alt_bucket(f, b, fp);
        if (bucket_put(f, b, fp)) return BKV_OK;
    }
    /* Undo every kick, newest first: the filter is as it was. */
    for (int n = MAX_KICKS; n-- > 0;) slot_set(f, log[n].bucket, log[n].slot, log[n].old);
    return BKV_FULL;
}

static int cuckoo_may_contain(const bkv_filter *f, bkv_hash h) {
    uint32_t fp = fingerprint(f, h);
    uint64_t b1 = bucket1(f, h);
    return bucket_has(f, b1, fp) || bucket_has(f, alt_bucket(f, b1, fp), fp);
}

static uint64_t cuckoo_count(const bkv_filter *f, bkv_hash h) {
    uint32_t fp = fingerprint(f, h);
    uint64_t b1 = bucket1(f, h), b2 = alt_bucket(f, b1, fp), n = 0;
    for (unsigned s = 0; s < SLOTS; s++) n += slot_get(f, b1, s) == fp;
    for (unsigned s = 0; b2 != b1 && s < SLOTS; s++) n += slot_get(f, b2, s) == fp;
    return n;
}

static int cuckoo_remove(bkv_filter *f, bkv_hash h) {
    uint32_t fp = fingerprint(f, h);
    uint64_t b1 = bucket1(f, h), bs[2] = {b1, alt_bucket(f, b1, fp)};
    for (int i = 0; i < 2; i++)
        for (unsigned s = 0; s < SLOTS; s++)
            if (slot_get(f, bs[i], s) == fp) {
                slot_set(f, bs[i], s, 0);
                return BKV_OK;
            }
    return BKV_NOTFOUND;
}

/* Every slot of from, bucket by bucket, into the same bucket of to or its
 * other one: a fingerprint in bucket b has its other bucket at
 * alt_bucket(b), the same in both filters when they have as many buckets,
 * so a key found through its two buckets in from is found through them in
 * to. No kicks: an entry whose two buckets are full in to stays. */
static uint64_t cuckoo_move(bkv_filter *from, bkv_filter *to, uint64_t limit) {
    uint64_t moved = 0;
    for (uint64_t b = 0; b < from->params[0] && moved < limit; b++)
        for (unsigned s = 0; s < SLOTS && moved < limit; s++) {
            uint32_t fp = slot_get(from, b, s);
            if (fp && (bucket_put(to, b, fp) || bucket_put(to, alt_bucket(to, b, fp), fp))) {
                slot_set(from, b, s, 0);
                moved++;
            }
        }
    return moved;
}

/* The two buckets of key i + CUCKOO_AHEAD are requested as key i is
 * tested: a rolling window keeps the loads in flight about constant, where
 * requesting a whole group and then testing it let them drain. */
#define CUCKOO_AHEAD 16
/* A macro: GCC drops calls to a function that only prefetches. */
#define CUCKOO_REQUEST(f, h)                                                                      \
    do {                                                                                          \
        uint64_t b1_ = bucket1((f), (h));                                                         \
        __builtin_prefetch((f)->payload + b1_ * SLOTS * bits_of(f) / 8);                          \
        __builtin_prefetch((f)->payload + alt_bucket((f), b1_, fingerprint((f), (h))) * SLOTS * bits_of(f) / 8); \
    } while (0)

static void cuckoo_batch(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out) {
    for (size_t i = 0; i < n && i < CUCKOO_AHEAD; i++) CUCKOO_REQUEST(f, h[i]);
    for (size_t i = 0; i < n; i++) {
        if (i + CUCKOO_AHEAD < n) CUCKOO_REQUEST(f, h[i + CUCKOO_AHEAD]);
        out[i] = (uint8_t)cuckoo_may_contain(f, h[i]);
    }
}

static const char *cuckoo_check(bkv_filter *f, unsigned bits) {
    uint64_t b = f->params[0];
    if (f->k != bits) return "fingerprint bits do not match the type";
    if (b == 0 || b > UINT32_MAX || f->params[1] || f->params[2]) return "bad bucket count";
    if (f->num_bits != b * SLOTS * bits) return "bit count does not match buckets";
    if (f->payload_len != (f->num_bits + 7) / 8 + 2) return "payload length does not match buckets";
    if (f->filter_seed) return "nonzero seed";
    return NULL;
}

static const char *cuckoo8_check(bkv_filter *f) { return cuckoo_check(f, 8); }
static const char *cuckoo12_check(bkv_filter *f) { return cuckoo_check(f, 12); }
static const char *cuckoo16_check(bkv_filter *f) { return cuckoo_check(f, 16); }

#define CUCKOO_OPS(T, N, SZ, CK)                                                                          \
    {.type = T, .name = N, .size = SZ, .add = cuckoo_add, .remove = cuckoo_remove, .count = cuckoo_count,  \
     .move = cuckoo_move, .may_contain = cuckoo_may_contain, .may_contain_batch = cuckoo_batch,           \
     .check_geometry = CK}

const bkv_filter_ops bkv_cuckoo8_ops = CUCKOO_OPS(BKV_FILTER_CUCKOO8, "cuckoo8", cuckoo8_size, cuckoo8_check);
const bkv_filter_ops bkv_cuckoo12_ops = CUCKOO_OPS(BKV_FILTER_CUCKOO12, "cuckoo12", cuckoo12_size, cuckoo12_check);
const bkv_filter_ops bkv_cuckoo16_ops = CUCKOO_OPS(BKV_FILTER_CUCKOO16, "cuckoo16", cuckoo16_size, cuckoo16_check);
