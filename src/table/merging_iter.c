/* Merging iterator: the union of sorted children, in internal-key order.
 * Moving forward after moving backward (or the reverse) repositions every
 * child around the current key, as the children only know one direction
 * at a time. Internal keys are unique, so no two children tie. */
#include <stdlib.h>

#include "util/iterator.h"
#include "util/ikey.h"

typedef struct merging_iter {
    bkv_ikey_iter base;
    bkv_ikey_iter **children;
    size_t n;
    bkv_ikey_iter *current;
    int forward;
} merging_iter;

static int key_cmp(bkv_ikey_iter *a, bkv_ikey_iter *b) {
    size_t al, bl;
    const uint8_t *ak = bkv_ikey_iter_key(a, &al), *bk = bkv_ikey_iter_key(b, &bl);
    return bkv_ikey_compare(ak, al, bk, bl);
}

/* A child that stopped on an error (damage, out of memory) ends the
 * merge: going on without it would skip its entries and could show an
 * older version, or a deleted key, from another child as if it were the
 * latest. The error is then the merge's status. */
static int child_failed(bkv_ikey_iter *c) { return !bkv_ikey_iter_valid(c) && bkv_ikey_iter_status(c, NULL) != BKV_OK; }

static void find_smallest(merging_iter *m) {
    bkv_ikey_iter *best = NULL;
    for (size_t i = 0; i < m->n; i++) {
        bkv_ikey_iter *c = m->children[i];
        if (child_failed(c)) {
            best = NULL;
            break;
        }
        if (bkv_ikey_iter_valid(c) && (!best || key_cmp(c, best) < 0)) best = c;
    }
    m->current = best;
}

static void find_largest(merging_iter *m) {
    bkv_ikey_iter *best = NULL;
    for (size_t i = m->n; i-- > 0;) {
        bkv_ikey_iter *c = m->children[i];
        if (child_failed(c)) {
            best = NULL;
            break;
        }
        if (bkv_ikey_iter_valid(c) && (!best || key_cmp(c, best) > 0)) best = c;
    }
    m->current = best;
}

static int mi_valid(bkv_ikey_iter *b) { return ((merging_iter *)b)->current != NULL; }

static void mi_first(bkv_ikey_iter *b) {
    merging_iter *m = (merging_iter *)b;
    for (size_t i = 0; i < m->n; i++) bkv_ikey_iter_first(m->children[i]);
    m->forward = 1;
    find_smallest(m);
}

static void mi_last(bkv_ikey_iter *b) {
    merging_iter *m = (merging_iter *)b;
    for (size_t i = 0; i < m->n; i++) bkv_ikey_iter_last(m->children[i]);
    m->forward = 0;
    find_largest(m);
}

static void mi_seek(bkv_ikey_iter *b, const uint8_t *k, size_t n) {
    merging_iter *m = (merging_iter *)b;
    for (size_t i = 0; i < m->n; i++) bkv_ikey_iter_seek(m->children[i], k, n);
    m->forward = 1;
    find_smallest(m);
}

static void mi_next(bkv_ikey_iter *b) {
    merging_iter *m = (merging_iter *)b;
    if (!m->forward) {
        size_t kl;
        const uint8_t *k = bkv_ikey_iter_key(m->current, &kl);
        for (size_t i = 0; i < m->n; i++) {
            bkv_ikey_iter *c = m->children[i];
            if (c == m->current) continue;
            bkv_ikey_iter_seek(c, k, kl);
            if (bkv_ikey_iter_valid(c) && key_cmp(c, m->current) == 0) bkv_ikey_iter_next(c);
        }
        m->forward = 1;
    }
    bkv_ikey_iter_next(m->current);
    find_smallest(m);
}

static void mi_prev(bkv_ikey_iter *b) {
    merging_iter *m = (merging_iter *)b;
    if (m->forward) {
        size_t kl;
        const uint8_t *k = bkv_ikey_iter_key(m->current, &kl);
        for (size_t i = 0; i < m->n; i++) {
            bkv_ikey_iter *c = m->children[i];
            if (c == m->current) continue;
            bkv_ikey_iter_seek(c, k, kl);
            /* Now at the first entry >= key: step back to the last < key. */
            if (bkv_ikey_iter_valid(c)) bkv_ikey_iter_prev(c);
            else bkv_ikey_iter_last(c);
        }
        m->forward = 0;
    }
    bkv_ikey_iter_prev(m->current);
    find_largest(m);
}

static const uint8_t *mi_key(bkv_ikey_iter *b, size_t *len) { return bkv_ikey_iter_key(((merging_iter *)b)->current, len); }
static const uint8_t *mi_value(bkv_ikey_iter *b, size_t *len) { return bkv_ikey_iter_value(((merging_iter *)b)->current, len); }

static int mi_status(bkv_ikey_iter *b, bkv_err *e) {
    merging_iter *m = (merging_iter *)b;
    for (size_t i = 0; i < m->n; i++) {
        int rc = bkv_ikey_iter_status(m->children[i], e);
        if (rc) return rc;
    }
    return BKV_OK;
}

static void mi_destroy(bkv_ikey_iter *b) {
    merging_iter *m = (merging_iter *)b;
    for (size_t i = 0; i < m->n; i++) bkv_ikey_iter_destroy(m->children[i]);
    free(m->children);
    free(m);
}

static const bkv_ikey_iter_ops merging_ops = {mi_valid, mi_first, mi_last,  mi_seek,   mi_next,
                                          mi_prev,  mi_key,   mi_value, mi_status, mi_destroy};

bkv_ikey_iter *bkv_merging_iter_new(bkv_ikey_iter **children, size_t n) {
    merging_iter *m = calloc(1, sizeof *m);
    if (!m) {
        for (size_t i = 0; i < n; i++) bkv_ikey_iter_destroy(children[i]);
        free(children);
        return NULL;
    }
    m->base.ops = &merging_ops;
    m->children = children;
    m->n = n;
    m->forward = 1;
    return &m->base;
}
