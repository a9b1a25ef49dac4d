/* Merging iterator: the union of sorted children, in internal-key order.
 * Moving forward after moving backward (or the reverse) repositions every
 * child around the current key, as the children only know one direction
 * at a time. Internal keys are unique, so no two children tie. */
#include <stdlib.h>

#include "util/iterator.h"
#include "util/ikey.h"

/* Each child's position is cached when it moves (as LevelDB's
 * IteratorWrapper does): choosing the next entry then compares cached keys
 * instead of making three indirect calls per child per step, which was
 * most of the cost of a sequential scan. */
typedef struct child {
    bkv_ikey_iter *it;
    const uint8_t *key; /* valid while the child does not move */
    size_t klen;
    int valid;
    int failed;         /* stopped on an error */
} child;

typedef struct merging_iter {
    bkv_ikey_iter base;
    child *children;
    size_t n;
    child *current;
    int forward;
} merging_iter;

static void refresh(child *c) {
    c->valid = bkv_ikey_iter_valid(c->it);
    c->key = c->valid ? bkv_ikey_iter_key(c->it, &c->klen) : NULL;
    /* A child that stopped on an error (damage, out of memory) ends the
     * merge: going on without it would skip its entries and could show an
     * older version, or a deleted key, from another child as if it were
     * the latest. The error is then the merge's status. */
    c->failed = !c->valid && bkv_ikey_iter_status(c->it, NULL) != BKV_OK;
}

static int key_cmp(const child *a, const child *b) { return bkv_ikey_compare(a->key, a->klen, b->key, b->klen); }

static void find_smallest(merging_iter *m) {
    child *best = NULL;
    for (size_t i = 0; i < m->n; i++) {
        child *c = &m->children[i];
        if (c->failed) {
            best = NULL;
            break;
        }
        if (c->valid && (!best || key_cmp(c, best) < 0)) best = c;
    }
    m->current = best;
}

static void find_largest(merging_iter *m) {
    child *best = NULL;
    for (size_t i = m->n; i-- > 0;) {
        child *c = &m->children[i];
        if (c->failed) {
            best = NULL;
            break;
        }
        if (c->valid && (!best || key_cmp(c, best) > 0)) best = c;
    }
    m->current = best;
}

static int mi_valid(bkv_ikey_iter *b) { return ((merging_iter *)b)->current != NULL; }

static void mi_first(bkv_ikey_iter *b) {
    merging_iter *m = (merging_iter *)b;
    for (size_t i = 0; i < m->n; i++) {
        bkv_ikey_iter_first(m->children[i].it);
        refresh(&m->children[i]);
    }
    m->forward = 1;
    find_smallest(m);
}

static void mi_last(bkv_ikey_iter *b) {
    merging_iter *m = (merging_iter *)b;
    for (size_t i = 0; i < m->n; i++) {
        bkv_ikey_iter_last(m->children[i].it);
        refresh(&m->children[i]);
    }
    m->forward = 0;
    find_largest(m);
}

static void mi_seek(bkv_ikey_iter *b, const uint8_t *k, size_t n) {
    merging_iter *m = (merging_iter *)b;
    for (size_t i = 0; i < m->n; i++) {
        bkv_ikey_iter_seek(m->children[i].it, k, n);
        refresh(&m->children[i]);
    }
    m->forward = 1;
    find_smallest(m);
}

static void mi_next(bkv_ikey_iter *b) {
    merging_iter *m = (merging_iter *)b;
    child *cur = m->current;
    if (!m->forward) {
        for (size_t i = 0; i < m->n; i++) {
            child *c = &m->children[i];
            if (c == cur) continue;
            bkv_ikey_iter_seek(c->it, cur->key, cur->klen);
            refresh(c);
            if (c->valid && key_cmp(c, cur) == 0) {
                bkv_ikey_iter_next(c->it);
                refresh(c);
            }
        }
        m->forward = 1;
    }
    bkv_ikey_iter_next(cur->it);
    refresh(cur);
    find_smallest(m);
}

static void mi_prev(bkv_ikey_iter *b) {
    merging_iter *m = (merging_iter *)b;
    child *cur = m->current;
    if (m->forward) {
        for (size_t i = 0; i < m->n; i++) {
            child *c = &m->children[i];
            if (c == cur) continue;
            bkv_ikey_iter_seek(c->it, cur->key, cur->klen);
            /* Now at the first entry >= key: step back to the last < key. */
            if (bkv_ikey_iter_valid(c->it)) bkv_ikey_iter_prev(c->it);
            else bkv_ikey_iter_last(c->it);
            refresh(c);
        }
        m->forward = 0;
    }
    bkv_ikey_iter_prev(cur->it);
    refresh(cur);
    find_largest(m);
}

static const uint8_t *mi_key(bkv_ikey_iter *b, size_t *len) {
    const child *c = ((merging_iter *)b)->current;
    *len = c->klen;
    return c->key;
}
static const uint8_t *mi_value(bkv_ikey_iter *b, size_t *len) { return bkv_ikey_iter_value(((merging_iter *)b)->current->it, len); }

static int mi_status(bkv_ikey_iter *b, bkv_err *e) {
    merging_iter *m = (merging_iter *)b;
    for (size_t i = 0; i < m->n; i++) {
        int rc = bkv_ikey_iter_status(m->children[i].it, e);
        if (rc) return rc;
    }
    return BKV_OK;
}

static void mi_destroy(bkv_ikey_iter *b) {
    merging_iter *m = (merging_iter *)b;
    for (size_t i = 0; i < m->n; i++) bkv_ikey_iter_destroy(m->children[i].it);
    free(m->children);
    free(m);
}

static const bkv_ikey_iter_ops merging_ops = {mi_valid, mi_first, mi_last,  mi_seek,   mi_next,
                                          mi_prev,  mi_key,   mi_value, mi_status, mi_destroy};

bkv_ikey_iter *bkv_merging_iter_new(bkv_ikey_iter **children, size_t n) {
    merging_iter *m = calloc(1, sizeof *m);
    child *cached = calloc(n ? n : 1, sizeof *cached);
    if (!m || !cached) {
        for (size_t i = 0; i < n; i++) bkv_ikey_iter_destroy(children[i]);
        free(children);
        free(cached);
        free(m);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) cached[i].it = children[i];
    free(children); /* the children now live in cached */
    m->base.ops = &merging_ops;
    m->children = cached;
    m->n = n;
    m->forward = 1;
    return &m->base;
}
