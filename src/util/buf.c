#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

#include "util/coding.h"

void bkv_buf_init(bkv_buf *b) { memset(b, 0, sizeof *b); }

void bkv_buf_init_with(bkv_buf *b, void *mem, size_t cap) {
    memset(b, 0, sizeof *b);
    b->data = mem;
    b->cap = cap;
    b->borrowed = 1;
}

void bkv_buf_free(bkv_buf *b) {
    if (!b->borrowed) free(b->data);
    memset(b, 0, sizeof *b);
}

/* A cleared buffer starts a new sequence of appends: an earlier failure no
 * longer taints it. */
void bkv_buf_clear(bkv_buf *b) {
    b->len = 0;
    b->oom = 0;
}

int bkv_buf_grow(bkv_buf *b, size_t n) {
    if (b->oom) return -1;
    if (b->cap - b->len >= n) return 0;
    if (n > SIZE_MAX - b->len) { /* no buffer holds that much */
        b->oom = 1;
        return -1;
    }
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < n) cap = cap > SIZE_MAX / 2 ? b->len + n : cap * 2;
    uint8_t *d = b->borrowed ? malloc(cap) : realloc(b->data, cap);
    if (!d) {
        b->oom = 1;
        return -1;
    }
    if (b->borrowed && b->len) memcpy(d, b->data, b->len);
    b->borrowed = 0;
    b->data = d;
    b->cap = cap;
    return 0;
}

int bkv_buf_put_u32(bkv_buf *b, uint32_t v) {
    if (bkv_buf_reserve(b, 4) < 0) return -1;
    bkv_put_u32(b->data + b->len, v);
    b->len += 4;
    return 0;
}

int bkv_buf_put_u64(bkv_buf *b, uint64_t v) {
    if (bkv_buf_reserve(b, 8) < 0) return -1;
    bkv_put_u64(b->data + b->len, v);
    b->len += 8;
    return 0;
}

int bkv_buf_put_u8(bkv_buf *b, uint8_t v) { return bkv_buf_append(b, &v, 1); }

int bkv_buf_put_slice(bkv_buf *b, const void *p, size_t n) {
    return bkv_buf_put_varint(b, n) || bkv_buf_append(b, p, n) ? -1 : 0;
}

int bkv_buf_set(bkv_buf *b, const void *p, size_t n) {
    bkv_buf_clear(b);
    return bkv_buf_append(b, p, n);
}
