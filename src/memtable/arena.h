/* Bump allocator for the memtable: entries live as long as the memtable,
 * so nothing is freed one by one. Single writer; readers only follow
 * pointers into blocks, which never move. */
#ifndef BKV_MEMTABLE_ARENA_H
#define BKV_MEMTABLE_ARENA_H

#include <stddef.h>

typedef struct bkv_arena_block bkv_arena_block;

/* Blocks of destroyed arenas kept for the next ones, up to a byte limit:
 * a fresh block's pages fault in and are zeroed one by one as a memtable
 * fills (slow on virtual machines that back guest memory as it is first
 * touched), and giving them back costs a TLB flush on every core. One per
 * database, sized to one memtable, so resident memory never exceeds what
 * the memtables took anyway. Thread safe; reference counted: every arena
 * made with it holds a reference, so it outlives its database if a
 * memtable does. */
typedef struct bkv_arena_pool bkv_arena_pool;
bkv_arena_pool *bkv_arena_pool_new(size_t max_bytes); /* NULL when out of memory */
void bkv_arena_pool_unref(bkv_arena_pool *pool);
size_t bkv_arena_pool_bytes(bkv_arena_pool *pool); /* held now */

typedef struct bkv_arena {
    char *ptr;              /* next free byte of the current block */
    size_t left;            /* bytes left in it */
    bkv_arena_block *blocks;
    size_t memory;          /* bytes allocated from the system */
    size_t used;            /* bytes handed out */
    bkv_arena_pool *pool;   /* or NULL */
} bkv_arena;

/* pool may be NULL; the arena takes a reference to it. Blocks taken from a
 * pool are not zeroed. */
void bkv_arena_init(bkv_arena *a, bkv_arena_pool *pool);
void bkv_arena_destroy(bkv_arena *a);
/* 8-byte aligned; NULL when out of memory. */
void *bkv_arena_alloc(bkv_arena *a, size_t n);

#endif
