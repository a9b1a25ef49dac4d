/*
 * Internal keys: the user key followed by an 8-byte little-endian trailer
 * (sequence << 8 | type). Ordered by user key ascending, then by trailer
 * descending, so the newest version of a key comes first. See
 * docs/format.md, "Internal key".
 *
 * It lives in util/ rather than db/ because the memtable and the table
 * reader order internal keys too, and the folders depend one way only
 * (util <- memtable, table <- db).
 */
#ifndef BKV_UTIL_IKEY_H
#define BKV_UTIL_IKEY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/buf.h"
#include "util/coding.h"

enum { BKV_TYPE_DELETION = 0, BKV_TYPE_VALUE = 1 };

#define BKV_MAX_SEQ ((UINT64_C(1) << 56) - 1)
#define BKV_IKEY_TRAILER 8

static inline uint64_t bkv_pack_trailer(uint64_t seq, unsigned type) { return (seq << 8) | type; }

/* Sets b to an internal key that sorts before every entry of user key k
 * (the largest sequence and type): where a seek for k starts. 0, or -1
 * when b cannot grow. */
static inline int bkv_ikey_seek_key(bkv_buf *b, const void *k, size_t klen) {
    return bkv_buf_set(b, k, klen) || bkv_buf_put_u64(b, bkv_pack_trailer(BKV_MAX_SEQ, 0xff)) ? -1 : 0;
}

static inline uint64_t bkv_ikey_trailer(const uint8_t *ikey, size_t len) {
    return bkv_get_u64(ikey + len - BKV_IKEY_TRAILER);
}

/* The parts of an internal key, the one place that knows the trailer's
 * layout. REQUIRES: len >= BKV_IKEY_TRAILER. */
static inline uint64_t bkv_ikey_seq(const uint8_t *ikey, size_t len) { return bkv_ikey_trailer(ikey, len) >> 8; }
static inline unsigned bkv_ikey_type(const uint8_t *ikey, size_t len) {
    return (unsigned)(bkv_ikey_trailer(ikey, len) & 0xff);
}

typedef struct bkv_parsed_ikey {
    const uint8_t *ukey;
    size_t ulen;
    uint64_t seq;
    unsigned type;
} bkv_parsed_ikey;

static inline bkv_parsed_ikey bkv_ikey_parse(const uint8_t *ikey, size_t len) {
    uint64_t t = bkv_ikey_trailer(ikey, len);
    return (bkv_parsed_ikey){ikey, len - BKV_IKEY_TRAILER, t >> 8, (unsigned)(t & 0xff)};
}

/* Keys are short, and every structure compares them on its hot path: eight
 * bytes at a time as big-endian words (memcmp's order) beat a call to
 * memcmp, which took a tenth of a fill's CPU with 16-byte keys. */
static inline int bkv_user_key_compare(const void *a, size_t alen, const void *b, size_t blen) {
    size_t n = alen < blen ? alen : blen;
    const uint8_t *x = a, *y = b;
    for (; n >= 8; n -= 8, x += 8, y += 8) {
        uint64_t u = bkv_get_be64(x), v = bkv_get_be64(y);
        if (u != v) return u < v ? -1 : 1;
    }
    int c = n ? memcmp(x, y, n) : 0;
    if (c) return c;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

/* REQUIRES: both lengths >= 8. */
static inline int bkv_ikey_compare(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
    int c = bkv_user_key_compare(a, alen - BKV_IKEY_TRAILER, b, blen - BKV_IKEY_TRAILER);
    if (c) return c;
    uint64_t ta = bkv_ikey_trailer(a, alen), tb = bkv_ikey_trailer(b, blen);
    return ta > tb ? -1 : ta < tb ? 1 : 0;
}

#endif
