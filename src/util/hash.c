#include "util/hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

bkv_hash bkv_hash_bytes(const void *data, size_t len) {
    return XXH3_64bits(data, len);
}

bkv_hash bkv_hash_bytes_seeded(const void *data, size_t len, uint64_t seed) {
    return XXH3_64bits_withSeed(data, len, seed);
}

uint64_t bkv_checksum(const void *data, size_t len) {
    return XXH3_64bits(data, len);
}
