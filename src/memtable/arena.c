#include "memtable/arena.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "util/alloc.h"

#define ARENA_BLOCK (256 * 1024)

struct bkv_arena_block {
    bkv_arena_block *next;
    size_t bytes;
    _Alignas(8) char data[];
};

#define STANDARD_BLOCK (sizeof(bkv_arena_block) + ARENA_BLOCK)

struct bkv_arena_pool {
    atomic_int refs;
    pthread_mutex_t mu;
    bkv_arena_block *free; /* standard blocks only */
    size_t bytes, max_bytes;
};

bkv_arena_pool *bkv_arena_pool_new(size_t max_bytes) {
    bkv_arena_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    atomic_init(&p->refs, 1);
    pthread_mutex_init(&p->mu, NULL);
    p->max_bytes = max_bytes;
    return p;
}

void bkv_arena_pool_unref(bkv_arena_pool *p) {
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
    for (bkv_arena_block *b = p->free, *next; b; b = next) {
        next = b->next;
        bkv_free_pages(b, b->bytes);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

size_t bkv_arena_pool_bytes(bkv_arena_pool *p) {
    pthread_mutex_lock(&p->mu);
    size_t n = p->bytes;
    pthread_mutex_unlock(&p->mu);
    return n;
}

static bkv_arena_block *pool_take(bkv_arena_pool *p) {
    pthread_mutex_lock(&p->mu);
    bkv_arena_block *b = p->free;
    if (b) {
        p->free = b->next;
        p->bytes -= b->bytes;
    }
    pthread_mutex_unlock(&p->mu);
    return b;
}

/* Keeps what fits; returns the rest, for the caller to give back outside
 * the lock. */
static bkv_arena_block *pool_keep(bkv_arena_pool *p, bkv_arena_block *blocks) {
    bkv_arena_block *rest = NULL;
    pthread_mutex_lock(&p->mu);
    for (bkv_arena_block *b = blocks, *next; b; b = next) {
        next = b->next;
        if (b->bytes == STANDARD_BLOCK && p->bytes + b->bytes <= p->max_bytes) {
            b->next = p->free;
            p->free = b;
            p->bytes += b->bytes;
        } else {
            b->next = rest;
            rest = b;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rest;
}

void bkv_arena_init(bkv_arena *a, bkv_arena_pool *pool) {
    a->ptr = NULL;
    a->left = 0;
    a->blocks = NULL;
    a->memory = 0;
    a->used = 0;
    a->pool = pool;
    if (pool) atomic_fetch_add(&pool->refs, 1);
}

void bkv_arena_destroy(bkv_arena *a) {
    bkv_arena_block *b = a->pool ? pool_keep(a->pool, a->blocks) : a->blocks;
    while (b) {
        bkv_arena_block *next = b->next;
        bkv_free_pages(b, b->bytes);
        b = next;
    }
    bkv_arena_pool_unref(a->pool);
    bkv_arena_init(a, NULL);
}

static char *new_block(bkv_arena *a, size_t n) {
    bkv_arena_block *b = a->pool && n == ARENA_BLOCK ? pool_take(a->pool) : NULL;
    if (!b) b = bkv_alloc_pages(sizeof *b + n);
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
