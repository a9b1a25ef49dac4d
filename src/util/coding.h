/* Fixed-width little-endian coding. Every integer bloomkv writes to disk is
 * little-endian whatever the host, so files move between machines. */
#ifndef BKV_UTIL_CODING_H
#define BKV_UTIL_CODING_H

#include <stdint.h>
#include <string.h>

/* memcpy is one unaligned load or store; the swap happens only on a
 * big-endian host. (The loop of shifts this replaces was not always
 * recognised: Ribbon queries spent a third of their time assembling bytes.) */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define BKV_LE16(x) __builtin_bswap16(x)
#define BKV_LE32(x) __builtin_bswap32(x)
#define BKV_LE64(x) __builtin_bswap64(x)
#else
#define BKV_LE16(x) (x)
#define BKV_LE32(x) (x)
#define BKV_LE64(x) (x)
#endif

/* Big-endian: the order in which memcmp compares bytes. */
static inline uint64_t bkv_get_be64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return v;
#else
    return __builtin_bswap64(v);
#endif
}

/* The first eight bytes of the n at k, big-endian, zero-padded: their
 * order agrees with memcmp's on the keys (ties aside). */
static inline uint64_t bkv_key_prefix64(const void *k, size_t n) {
    if (n >= 8) return bkv_get_be64(k); /* every get asks it once a level: one load, not a copy of unknown length */
    uint8_t b[8] = {0};
    if (n) memcpy(b, k, n);
    return bkv_get_be64(b);
}

static inline void bkv_put_u16(uint8_t *p, uint16_t v) {
    v = BKV_LE16(v);
    memcpy(p, &v, 2);
}

static inline void bkv_put_u32(uint8_t *p, uint32_t v) {
    v = BKV_LE32(v);
    memcpy(p, &v, 4);
}

static inline void bkv_put_u64(uint8_t *p, uint64_t v) {
    v = BKV_LE64(v);
    memcpy(p, &v, 8);
}

static inline uint16_t bkv_get_u16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return BKV_LE16(v);
}

static inline uint32_t bkv_get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return BKV_LE32(v);
}

static inline uint64_t bkv_get_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return BKV_LE64(v);
}

#endif

#ifndef BKV_UTIL_VARINT
#define BKV_UTIL_VARINT
#include <stddef.h>

/* LEB128 varints: 7 bits a byte, low bits first, high bit = more follows. */
static inline uint8_t *bkv_put_varint64(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline int bkv_varint_len(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Decodes a varint from [p, end); returns the byte after it, or NULL when
 * the input is truncated or the varint is longer than 10 bytes. */
static inline const uint8_t *bkv_get_varint64(const uint8_t *p, const uint8_t *end, uint64_t *v) {
    uint64_t result = 0;
    for (unsigned shift = 0; shift <= 63 && p < end; shift += 7) {
        uint64_t byte = *p++;
        result |= (byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *v = result;
            return p;
        }
    }
    return NULL;
}

static inline const uint8_t *bkv_get_varint32(const uint8_t *p, const uint8_t *end, uint32_t *v) {
    uint64_t x;
    p = bkv_get_varint64(p, end, &x);
    if (!p || x > UINT32_MAX) return NULL;
    *v = (uint32_t)x;
    return p;
}
#endif
