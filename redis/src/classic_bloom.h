/*
 * The Bloom filter RedisBloom keeps under BF.*, sized the same way so that
 * a filter costs what it costs there and its reported layout (bytes,
 * bits, probes) is the same: the textbook bits per item for the error
 * rate, the bit count rounded up to whole 64-bit words, probes = ln 2 *
 * bits per item rounded up. An item's hash is RedisBloom's pair of 64-bit
 * MurmurHash64A values (a, b); bits count from the low bit of each byte.
 *
 * Two ways to place probe i: RedisBloom's, (a + i*b) mod the bit count,
 * kept for filters moved in from RedisBloom so they answer as they did
 * there; and the module's own for the filters it makes, a + i*b passed
 * through a 64-bit mixer and scaled onto the bit count. RedisBloom's way
 * puts an item's probes on a lattice (few distinct bits when b shares a
 * factor with the bit count, always a multiple of 64), which raises a
 * small filter's error rate by 30-50% over its target; mixed probes are
 * independent and meet it. docs/redis.md has the measurements,
 * docs/format.md the bytes.
 */
#ifndef BKV_CLASSIC_BLOOM_H
#define BKV_CLASSIC_BLOOM_H

#include <stddef.h>
#include <stdint.h>

/* MurmurHash64A as its author published it (little-endian reads). */
uint64_t bkv_murmur64a(const void *data, size_t len, uint64_t seed);

typedef struct classic_hash {
    uint64_t a, b;
} classic_hash;

classic_hash classic_bloom_hash(const void *item, size_t len);

/* The size of a filter for capacity items at error rate error (0 < error
 * < 1, capacity >= 1): its bytes (a multiple of 8) and number of probes;
 * -1 where the size would not fit 64 bits. */
int classic_bloom_size(uint64_t capacity, double error, uint64_t *bytes, uint32_t *hashes);

enum { CLASSIC_PROBE_SPREAD = 0, CLASSIC_PROBE_REDISBLOOM = 1 };

/* Whether every probe of h (placed as probe says) is set in bits, nbits
 * = 8 * its bytes. */
int classic_bloom_test(const uint8_t *bits, uint64_t nbits, uint32_t hashes, int probe, classic_hash h);

/* Sets h's probes. */
void classic_bloom_set(uint8_t *bits, uint64_t nbits, uint32_t hashes, int probe, classic_hash h);

#endif
