/*
 * RedisBloom's Bloom filter arithmetic (classic_bloom.h). Every constant
 * here is part of the layout: changing one changes which bits an item
 * sets, and filters moved in from RedisBloom would answer wrongly.
 */
#include "classic_bloom.h"

#include <math.h>
#include <string.h>

#define MURMUR_M 0xc6a4a7935bd1e995ULL
#define MURMUR_R 47
#define LN2 0.693147180559945
#define LN2_SQUARED 0.480453013918201

static uint64_t load_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

uint64_t bkv_murmur64a(const void *data, size_t len, uint64_t seed) {
    const unsigned char *p = data;
    uint64_t h = seed ^ (len * MURMUR_M);
    for (size_t n = len / 8; n > 0; n--, p += 8) {
        uint64_t k = load_le64(p);
        k *= MURMUR_M;
        k ^= k >> MURMUR_R;
        k *= MURMUR_M;
        h ^= k;
        h *= MURMUR_M;
    }
    size_t tail = len & 7;
    if (tail) {
        for (size_t i = tail; i-- > 0;) h ^= (uint64_t)p[i] << (8 * i);
        h *= MURMUR_M;
    }
    h ^= h >> MURMUR_R;
    h *= MURMUR_M;
    h ^= h >> MURMUR_R;
    return h;
}

classic_hash classic_bloom_hash(const void *item, size_t len) {
    classic_hash h;
    h.a = bkv_murmur64a(item, len, MURMUR_M);
    h.b = bkv_murmur64a(item, len, h.a);
    return h;
}

int classic_bloom_size(uint64_t capacity, double error, uint64_t *bytes, uint32_t *hashes) {
    /* The same expressions, in the same order, as RedisBloom evaluates
     * them: a different rounding would size a moved filter differently. */
    double bits_per_item = -(log(error) / LN2_SQUARED);
    double bits = (double)capacity * bits_per_item;
    if (!(bits < 18446744073709549568.0)) return -1; /* below 2^64, with room to round up to a word */
    uint64_t nbits = (uint64_t)bits;
    if (nbits == 0) nbits = 1;
    *bytes = (nbits + 63) / 64 * 8;
    *hashes = (uint32_t)ceil(LN2 * bits_per_item);
    return 0;
}

/* A bijection of 64-bit values whose every output bit depends on every
 * input bit (the SplitMix64 finaliser's constants). */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t probe_at(uint64_t nbits, int probe, classic_hash h, uint32_t i) {
    if (probe == CLASSIC_PROBE_REDISBLOOM) return (h.a + i * h.b) % nbits;
    /* Plain double hashing, even scaled rather than reduced mod the bit
     * count, places an item's probes on a lattice: at the few thousand
     * bits of a small sub-filter that costs 30-40% in error rate over
     * independent probes. Mixing each step makes them independent. */
    return (uint64_t)(((unsigned __int128)mix64(h.a + i * h.b) * nbits) >> 64);
}

int classic_bloom_test(const uint8_t *bits, uint64_t nbits, uint32_t hashes, int probe, classic_hash h) {
    for (uint32_t i = 0; i < hashes; i++) {
        uint64_t x = probe_at(nbits, probe, h, i);
        if (!(bits[x >> 3] & (1u << (x & 7)))) return 0;
    }
    return 1;
}

void classic_bloom_set(uint8_t *bits, uint64_t nbits, uint32_t hashes, int probe, classic_hash h) {
    for (uint32_t i = 0; i < hashes; i++) {
        uint64_t x = probe_at(nbits, probe, h, i);
        bits[x >> 3] |= (uint8_t)(1u << (x & 7));
    }
}
