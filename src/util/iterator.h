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

typedef struct bkv_iiter bkv_iiter;

typedef struct bkv_iiter_ops {
    int (*valid)(bkv_iiter *it);
    void (*first)(bkv_iiter *it);
    void (*last)(bkv_iiter *it);
    /* First entry >= the internal key. */
    void (*seek)(bkv_iiter *it, const uint8_t *ikey, size_t len);
    void (*next)(bkv_iiter *it);
    void (*prev)(bkv_iiter *it);
    const uint8_t *(*key)(bkv_iiter *it, size_t *len);
    const uint8_t *(*value)(bkv_iiter *it, size_t *len);
    /* BKV_OK, or the first error met (described in e). */
    int (*status)(bkv_iiter *it, bkv_err *e);
    void (*destroy)(bkv_iiter *it);
} bkv_iiter_ops;

struct bkv_iiter {
    const bkv_iiter_ops *ops;
};

static inline int bkv_iiter_valid(bkv_iiter *it) { return it->ops->valid(it); }
static inline void bkv_iiter_first(bkv_iiter *it) { it->ops->first(it); }
static inline void bkv_iiter_last(bkv_iiter *it) { it->ops->last(it); }
static inline void bkv_iiter_seek(bkv_iiter *it, const uint8_t *k, size_t n) { it->ops->seek(it, k, n); }
static inline void bkv_iiter_next(bkv_iiter *it) { it->ops->next(it); }
static inline void bkv_iiter_prev(bkv_iiter *it) { it->ops->prev(it); }
static inline const uint8_t *bkv_iiter_key(bkv_iiter *it, size_t *n) { return it->ops->key(it, n); }
static inline const uint8_t *bkv_iiter_value(bkv_iiter *it, size_t *n) { return it->ops->value(it, n); }
static inline int bkv_iiter_status(bkv_iiter *it, bkv_err *e) { return it->ops->status(it, e); }
static inline void bkv_iiter_destroy(bkv_iiter *it) {
    if (it) it->ops->destroy(it);
}

/* Merges children (taking ownership of them and of the array). */
bkv_iiter *bkv_merging_iter_new(bkv_iiter **children, size_t n);

#endif
