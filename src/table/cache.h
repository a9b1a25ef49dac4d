/*
 * A sharded LRU cache with a byte (or count) capacity, used both as the
 * block cache (charge = block bytes) and the table cache (charge = 1 per
 * open table). Entries are reference counted: a looked-up entry stays valid
 * until released, even if evicted meanwhile.
 *
 * Thread safety: all functions may be called concurrently.
 */
#ifndef BKV_TABLE_CACHE_H
#define BKV_TABLE_CACHE_H

#include <stddef.h>
#include <stdint.h>

typedef struct bkv_cache bkv_cache;
typedef struct bkv_cache_entry bkv_cache_entry;

/* Called once an entry is evicted (or erased) and no longer referenced. */
typedef void (*bkv_cache_deleter)(uint64_t k1, uint64_t k2, void *value);

bkv_cache *bkv_cache_new(size_t capacity);
void bkv_cache_free(bkv_cache *c);

/* A referenced entry for (k1, k2), or NULL. */
bkv_cache_entry *bkv_cache_lookup(bkv_cache *c, uint64_t k1, uint64_t k2);
/* Inserts (replacing any entry with the same key) and returns it
 * referenced; NULL when out of memory (the value is then not owned). */
bkv_cache_entry *bkv_cache_insert(bkv_cache *c, uint64_t k1, uint64_t k2, void *value, size_t charge,
                                  bkv_cache_deleter deleter);
void *bkv_cache_value(const bkv_cache_entry *e);
void bkv_cache_release(bkv_cache *c, bkv_cache_entry *e);
/* Drops every entry whose k1 equals k1 (a deleted table's blocks). */
void bkv_cache_erase_k1(bkv_cache *c, uint64_t k1);
size_t bkv_cache_usage(bkv_cache *c);
/* Around fork(): prepare takes every shard lock, parent releases them,
 * child makes them anew (the threads that held them do not exist there). */
void bkv_cache_fork_prepare(bkv_cache *c);
void bkv_cache_fork_parent(bkv_cache *c);
void bkv_cache_fork_child(bkv_cache *c);

/* An entry that belongs to no cache: for a value its owner keeps for as
 * long as it lives (an open table pinned in its file's metadata). Lookups
 * of it cost nothing and releasing it does nothing, so it can be handed
 * out wherever a cached entry is; bkv_cache_pinned_free deletes the value
 * and the entry, once nobody uses it. */
bkv_cache_entry *bkv_cache_pinned_new(uint64_t k1, void *value, bkv_cache_deleter deleter);
void bkv_cache_pinned_free(bkv_cache_entry *e);

#endif
