/*
 * Internal iterators over internal keys: one interface for memtables,
 * tables and the merge of them, so the database iterator and compaction
 * see every source the same way.
 */
#ifndef BKV_UTIL_ITERATOR_H
#define BKV_UTIL_ITERATOR_H

#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

typedef struct bkv_ikey_iter bkv_ikey_iter;

typedef struct bkv_ikey_iter_ops {
    int (*valid)(bkv_ikey_iter *it);
    void (*first)(bkv_ikey_iter *it);
    void (*last)(bkv_ikey_iter *it);
    /* First entry >= the internal key. */
    void (*seek)(bkv_ikey_iter *it, const uint8_t *ikey, size_t len);
    void (*next)(bkv_ikey_iter *it);
    void (*prev)(bkv_ikey_iter *it);
    const uint8_t *(*key)(bkv_ikey_iter *it, size_t *len);
    const uint8_t *(*value)(bkv_ikey_iter *it, size_t *len);
    /* BKV_OK, or the first error met (described in e). */
    int (*status)(bkv_ikey_iter *it, bkv_err *e);
    void (*destroy)(bkv_ikey_iter *it);
} bkv_ikey_iter_ops;

struct bkv_ikey_iter {
    const bkv_ikey_iter_ops *ops;
};

static inline int bkv_ikey_iter_valid(bkv_ikey_iter *it) { return it->ops->valid(it); }
static inline void bkv_ikey_iter_first(bkv_ikey_iter *it) { it->ops->first(it); }
static inline void bkv_ikey_iter_last(bkv_ikey_iter *it) { it->ops->last(it); }
static inline void bkv_ikey_iter_seek(bkv_ikey_iter *it, const uint8_t *k, size_t n) { it->ops->seek(it, k, n); }
static inline void bkv_ikey_iter_next(bkv_ikey_iter *it) { it->ops->next(it); }
static inline void bkv_ikey_iter_prev(bkv_ikey_iter *it) { it->ops->prev(it); }
static inline const uint8_t *bkv_ikey_iter_key(bkv_ikey_iter *it, size_t *n) { return it->ops->key(it, n); }
static inline const uint8_t *bkv_ikey_iter_value(bkv_ikey_iter *it, size_t *n) { return it->ops->value(it, n); }
static inline int bkv_ikey_iter_status(bkv_ikey_iter *it, bkv_err *e) { return it->ops->status(it, e); }
static inline void bkv_ikey_iter_destroy(bkv_ikey_iter *it) {
    if (it) it->ops->destroy(it);
}

/* Merges children (taking ownership of them and of the array). */
bkv_ikey_iter *bkv_merging_iter_new(bkv_ikey_iter **children, size_t n);

#endif
