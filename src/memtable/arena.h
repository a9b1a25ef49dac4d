/* Bump allocator for the memtable: entries live as long as the memtable,
 * so nothing is freed one by one. Single writer; readers only follow
 * pointers into blocks, which never move. */
#ifndef BKV_MEMTABLE_ARENA_H
#define BKV_MEMTABLE_ARENA_H

#include <stddef.h>

typedef struct bkv_arena_block bkv_arena_block;

typedef struct bkv_arena {
    char *ptr;              /* next free byte of the current block */
    size_t left;            /* bytes left in it */
    bkv_arena_block *blocks;
    size_t memory;          /* bytes allocated from the system */
    size_t used;            /* bytes handed out */
} bkv_arena;

void bkv_arena_init(bkv_arena *a);
void bkv_arena_destroy(bkv_arena *a);
/* 8-byte aligned; NULL when out of memory. */
void *bkv_arena_alloc(bkv_arena *a, size_t n);

#endif
