/*
 * The memtable: a skiplist of (internal key, value) entries in an arena,
 * plus a blocked Bloom filter of its user keys probed with the caller's
 * shared hash, so a get of an absent key skips the skiplist search.
 *
 * Thread safety: bkv_memtable_add is for one writer at a time;
 * bkv_memtable_add_concurrent may run in any number of threads at once
 * (never beside a plain add). Readers need no lock in either case: node
 * links are published with release stores (compare-and-swaps for
 * concurrent adds) and read with acquire loads, so a reader sees a node
 * only after its contents are complete. Concurrent adds share the arena,
 * under a mutex taken once per slice of it a thread bumps through alone.
 *
 * Lifetime: reference counted; entries (and the pointers get/iterators
 * hand out) stay valid until the last reference is dropped.
 */
#ifndef BKV_MEMTABLE_H
#define BKV_MEMTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "bloomkv.h"
#include "valuesearch/value_filter.h"
#include "memtable/arena.h"

typedef struct bkv_memtable bkv_memtable;

/* expected_keys sizes the key filter (more keys only raise its rate);
 * 0 means no filter. The arena's blocks come from pool (NULL: none) when it
 * has any, and go back to it when the memtable is freed. */
bkv_memtable *bkv_memtable_new(uint64_t expected_keys, bkv_arena_pool *pool);
void bkv_memtable_ref(bkv_memtable *m);
void bkv_memtable_unref(bkv_memtable *m);

/* Makes the memtable index the terms of the values added from now on
 * (call before the first add), so a value search finds its entries by the
 * term's hash instead of scanning: a chained hash table of term hash ->
 * entry in the arena, sized for expected entries. */
int bkv_memtable_index_terms(bkv_memtable *m, const bkv_vf_params *p, bkv_terms_fn terms, void *terms_arg,
                             uint64_t expected);
/* Calls fn on every entry with a term whose bkv_vf_term_hash is h, in no
 * set order; collisions and repeats are possible: the caller checks the
 * value. Stops when fn returns non-zero (returned). REQUIRES: indexed
 * (every memtable of a database with a value index is). */
typedef int (*bkv_memtable_entry_fn)(void *arg, const uint8_t *ikey, size_t ilen, const uint8_t *val, size_t vlen);
int bkv_memtable_find_term(const bkv_memtable *m, uint64_t h, bkv_memtable_entry_fn fn, void *arg);

/* Adds one entry. h is the bkv_hash of the user key. BKV_NOMEM on failure
 * (nothing added). */
int bkv_memtable_add(bkv_memtable *m, uint64_t seq, unsigned type, const void *key, size_t klen,
                     const void *val, size_t vlen, bkv_hash h);
/* The same, safe beside other concurrent adds: what lets the writers of
 * a group, and groups one after another, insert at once. It does not
 * count the entry (every adder would write one shared line): the caller
 * reports what its adds added with bkv_memtable_count_added once they are
 * done. Each adding thread takes arena memory in slices of its own. */
int bkv_memtable_add_concurrent(bkv_memtable *m, uint64_t seq, unsigned type, const void *key, size_t klen,
                                const void *val, size_t vlen, bkv_hash h);
void bkv_memtable_count_added(bkv_memtable *m, uint64_t n);

/* Looks up the newest version of key with sequence <= snapshot. Returns 1
 * and fills *type (BKV_TYPE_VALUE / BKV_TYPE_DELETION), its sequence (seq,
 * when not NULL) and the value when the memtable holds one, 0 when it
 * holds none. *filter_negative is set to 1 when the key filter alone
 * answered (no skiplist search). */
int bkv_memtable_get(const bkv_memtable *m, const void *key, size_t klen, bkv_hash h,
                     uint64_t snapshot, unsigned *type, const uint8_t **val, size_t *vlen,
                     int *filter_negative, uint64_t *seq);

/* Bytes of entries and nodes stored (what write_buffer_size bounds). */
size_t bkv_memtable_memory(const bkv_memtable *m);
uint64_t bkv_memtable_entries(const bkv_memtable *m);

/* Iteration in internal-key order. */
typedef struct bkv_memtable_iter {
    const bkv_memtable *m;
    const void *node;
} bkv_memtable_iter;

void bkv_memtable_iter_init(bkv_memtable_iter *it, const bkv_memtable *m);
int bkv_memtable_iter_valid(const bkv_memtable_iter *it);
void bkv_memtable_iter_first(bkv_memtable_iter *it);
void bkv_memtable_iter_last(bkv_memtable_iter *it);
/* First entry >= the internal key. */
void bkv_memtable_iter_seek(bkv_memtable_iter *it, const uint8_t *ikey, size_t ilen);
void bkv_memtable_iter_next(bkv_memtable_iter *it);
void bkv_memtable_iter_prev(bkv_memtable_iter *it);
const uint8_t *bkv_memtable_iter_ikey(const bkv_memtable_iter *it, size_t *len);
const uint8_t *bkv_memtable_iter_value(const bkv_memtable_iter *it, size_t *len);

/* An internal iterator (util/iterator.h) holding a reference to m. */
struct bkv_ikey_iter;
struct bkv_ikey_iter *bkv_memtable_ikey_iter_new(bkv_memtable *m);

#endif
