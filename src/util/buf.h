/* A growable byte buffer, used to assemble blocks and records. */
#ifndef BKV_UTIL_BUF_H
#define BKV_UTIL_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct bkv_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    int oom;      /* set once an allocation failed; later appends do nothing */
    int borrowed; /* data is the caller's memory (never freed or resized) */
} bkv_buf;

void bkv_buf_init(bkv_buf *b);
/* Starts in the caller's memory (e.g. a stack array) and moves to the heap
 * only if it outgrows it: small buffers cost no allocation. */
void bkv_buf_init_with(bkv_buf *b, void *mem, size_t cap);
void bkv_buf_free(bkv_buf *b);
void bkv_buf_clear(bkv_buf *b);
/* Makes room for n more bytes; 0 on success, -1 (and oom set) on failure. */
int bkv_buf_reserve(bkv_buf *b, size_t n);
void bkv_buf_append(bkv_buf *b, const void *p, size_t n);
void bkv_buf_put_varint(bkv_buf *b, uint64_t v);
void bkv_buf_put_u32(bkv_buf *b, uint32_t v);
void bkv_buf_put_u64(bkv_buf *b, uint64_t v);
void bkv_buf_put_u8(bkv_buf *b, uint8_t v);
/* varint length + bytes */
void bkv_buf_put_slice(bkv_buf *b, const void *p, size_t n);

#endif
