/* Fixed-width little-endian coding. Every integer bloomkv writes to disk is
 * little-endian whatever the host, so files move between machines; the
 * byte-wise form compiles to a plain load or store on little-endian CPUs. */
#ifndef BKV_UTIL_CODING_H
#define BKV_UTIL_CODING_H

#include <stdint.h>

static inline void bkv_put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void bkv_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void bkv_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t bkv_get_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t bkv_get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline uint64_t bkv_get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
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
