/* Hashing helpers shared by every filter: the bkv_hash itself lives in the
 * public header; this is the arithmetic that turns it into positions. */
#ifndef BKV_UTIL_HASH_H
#define BKV_UTIL_HASH_H

#include <stdint.h>

#include "bloomkv_filter.h"

/* Maps a uniform 32-bit value onto [0, n) with one multiply and a shift
 * (Lemire's "fastrange"): no division, and unbiased to within n / 2^32. */
static inline uint32_t bkv_fastrange32(uint32_t x, uint32_t n) {
    return (uint32_t)(((uint64_t)x * n) >> 32);
}

/* The same for 64-bit values and ranges; the bias is n / 2^64. */
static inline uint64_t bkv_fastrange64(uint64_t x, uint64_t n) {
    return (uint64_t)(((unsigned __int128)x * n) >> 64);
}

/* Key prefixes are hashed with this seed, so that a table filter holding
 * both whole keys and prefixes keeps the two apart. */
#define BKV_PREFIX_SEED UINT64_C(0x7072656669785f31)

static inline uint32_t bkv_hash_lo(bkv_hash h) { return (uint32_t)h; }
static inline uint32_t bkv_hash_hi(bkv_hash h) { return (uint32_t)(h >> 32); }

static inline uint64_t bkv_rotl64(uint64_t x, unsigned r) {
    return (x << r) | (x >> ((64 - r) & 63));
}

/* splitmix64: a tiny, well-mixed generator for seeds and test data. */
static inline uint64_t bkv_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* XXH3-64 with seed 0: the checksum of serialized filters and of the
 * structures docs/format.md describes without a seed of their own (WAL
 * records and table blocks seed theirs with their type). */
uint64_t bkv_checksum(const void *data, size_t len);

#endif
