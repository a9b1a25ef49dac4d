/* A growable byte buffer, used to assemble blocks and records. */
#ifndef BKV_UTIL_BUF_H
#define BKV_UTIL_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/coding.h"

typedef struct bkv_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    int oom;      /* set once an allocation failed; later appends fail too until a clear */
    int borrowed; /* data is the caller's memory (never freed or resized) */
} bkv_buf;

void bkv_buf_init(bkv_buf *b);
/* Starts in the caller's memory (e.g. a stack array) and moves to the heap
 * only if it outgrows it: small buffers cost no allocation. */
void bkv_buf_init_with(bkv_buf *b, void *mem, size_t cap);
void bkv_buf_free(bkv_buf *b);
void bkv_buf_clear(bkv_buf *b);
/* Every call that grows a buffer returns 0, or -1 when memory ran out (oom
 * is then set and the buffer keeps what it had: later appends do nothing).
 * The result must be looked at: a record built from a failed append is
 * short, and written out it would be wrong data. */
#define BKV_MUST_CHECK __attribute__((warn_unused_result))

/* The slow path of bkv_buf_reserve: a new allocation. */
BKV_MUST_CHECK int bkv_buf_grow(bkv_buf *b, size_t n);

/* Makes room for n more bytes. Inline, with the appends below: blocks and
 * records are built from many small appends, and a call each showed in
 * profiles of flushes and compactions. */
BKV_MUST_CHECK static inline int bkv_buf_reserve(bkv_buf *b, size_t n) {
    if (!b->oom && b->cap - b->len >= n) return 0;
    return bkv_buf_grow(b, n);
}

BKV_MUST_CHECK static inline int bkv_buf_append(bkv_buf *b, const void *p, size_t n) {
    if (n == 0) return b->oom ? -1 : 0;
    if (bkv_buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

BKV_MUST_CHECK static inline int bkv_buf_put_varint(bkv_buf *b, uint64_t v) {
    if (bkv_buf_reserve(b, 10) < 0) return -1;
    b->len = (size_t)(bkv_put_varint64(b->data + b->len, v) - b->data);
    return 0;
}
BKV_MUST_CHECK int bkv_buf_put_u32(bkv_buf *b, uint32_t v);
BKV_MUST_CHECK int bkv_buf_put_u64(bkv_buf *b, uint64_t v);
BKV_MUST_CHECK int bkv_buf_put_u8(bkv_buf *b, uint8_t v);
/* varint length + bytes */
BKV_MUST_CHECK int bkv_buf_put_slice(bkv_buf *b, const void *p, size_t n);
/* Replaces the content with n bytes at p. */
BKV_MUST_CHECK int bkv_buf_set(bkv_buf *b, const void *p, size_t n);

#endif
