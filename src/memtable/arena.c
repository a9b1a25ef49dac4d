#include "memtable/arena.h"

#include <stdlib.h>

#include "util/alloc.h"

#define ARENA_BLOCK (256 * 1024)

struct bkv_arena_block {
    bkv_arena_block *next;
    size_t bytes;
    _Alignas(8) char data[];
};

void bkv_arena_init(bkv_arena *a) {
    a->ptr = NULL;
    a->left = 0;
    a->blocks = NULL;
    a->memory = 0;
    a->used = 0;
}

void bkv_arena_destroy(bkv_arena *a) {
    bkv_arena_block *b = a->blocks;
    while (b) {
        bkv_arena_block *next = b->next;
        bkv_free_pages(b, b->bytes);
        b = next;
    }
    bkv_arena_init(a);
}

static char *new_block(bkv_arena *a, size_t n) {
    bkv_arena_block *b = bkv_alloc_pages(sizeof *b + n);
    if (!b) return NULL;
    b->bytes = sizeof *b + n;
    b->next = a->blocks;
    a->blocks = b;
    a->memory += sizeof *b + n;
    return b->data;
}

void *bkv_arena_alloc(bkv_arena *a, size_t n) {
    n = (n + 7) & ~(size_t)7;
    a->used += n;
    if (n <= a->left) {
        char *p = a->ptr;
        a->ptr += n;
        a->left -= n;
        return p;
    }
    /* Large entries get a block of their own so the current block's tail
     * is not wasted. */
    if (n > ARENA_BLOCK / 4) return new_block(a, n);
    char *p = new_block(a, ARENA_BLOCK);
    if (!p) return NULL;
    a->ptr = p + n;
    a->left = ARENA_BLOCK - n;
    return p;
}
