#include "valuesearch/vindex.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"

typedef struct bnode bnode;

typedef struct vleaf {
    bkv_vleaf_ref ref;
    uint64_t *bits;   /* flat and hierarchy: a copy of the filter; bit-sliced: NULL */
    bnode *parent;    /* hierarchy */
    uint32_t col;     /* bit-sliced column */
} vleaf;

typedef struct vtable {
    uint64_t file;
    uint32_t n;
    vleaf *leaves;
} vtable;

struct bnode {
    bnode *parent;
    int height;       /* 1: the children are leaves */
    int n;
    int dirty;        /* bits are stale; every ancestor of a dirty node is dirty */
    void **child;     /* 2d + 1 slots: one spare while a split is pending */
    const uint64_t **child_bits; /* child[i]'s filter, so a search never touches child structs */
    uint64_t *bits;
};

struct bkv_vindex {
    int shape, order;
    bkv_vf_params p;
    size_t words;
    vtable **tables;
    size_t ntables, cap_tables;
    uint64_t nleaves;
    int broken;       /* an update ran out of memory: answer "maybe" everywhere */
    /* hierarchy */
    bnode *root;
    uint64_t ninner;
    uint64_t recomputed; /* inner nodes recomputed since the last commit */
    /* bit-sliced: row r (filter bit r) holds one bit per column at
     * rows[r * row_words ...]. A column is taken (col_taken: the updater's
     * own bookkeeping) while its bits are written, and only then made live
     * (col_live, col_leaf: what a search reads, changed under the publish
     * lock); a removed column stops being live first and is cleared and
     * given back after. So the slow part of an update, writing or clearing
     * a table's columns across every row, holds no lock a search waits
     * for. */
    _Atomic uint64_t *rows;
    size_t row_words;
    vleaf **col_leaf;
    uint64_t *col_live;
    uint64_t *col_taken;
    /* Taken for writing around every change a search could see (NULL: no
     * concurrent searches, as in tests). */
    pthread_rwlock_t *publish;
    uint64_t locked_since, locked_ns; /* the updater's: time it held publish */
};

static void publish_begin(bkv_vindex *vi) {
    if (!vi->publish) return;
    pthread_rwlock_wrlock(vi->publish);
    vi->locked_since = bkv_monotonic_nanos();
}

static void publish_end(bkv_vindex *vi) {
    if (!vi->publish) return;
    vi->locked_ns += bkv_monotonic_nanos() - vi->locked_since;
    pthread_rwlock_unlock(vi->publish);
}

uint64_t bkv_vindex_take_locked_micros(bkv_vindex *vi) {
    uint64_t us = vi->locked_ns / 1000;
    vi->locked_ns -= us * 1000;
    return us;
}

void bkv_vindex_set_publish_lock(bkv_vindex *vi, pthread_rwlock_t *lock) { vi->publish = lock; }

/* Row words are read by searches while the one updater writes columns
 * they do not look at (yet, or any more): relaxed atomics, plain loads and
 * stores here, make that sharing defined. */
static inline uint64_t row_get(const _Atomic uint64_t *w) { return atomic_load_explicit(w, memory_order_relaxed); }
static inline void row_set(_Atomic uint64_t *w, uint64_t v) { atomic_store_explicit(w, v, memory_order_relaxed); }

const char *bkv_vindex_shape_name(int shape) {
    switch (shape) {
    case BKV_VALUE_INDEX_FLAT: return "flat";
    case BKV_VALUE_INDEX_HIERARCHY: return "hierarchy";
    case BKV_VALUE_INDEX_BITSLICED: return "bitsliced";
    case BKV_VALUE_INDEX_PAGED: return "paged"; /* the tables answer: this index stays empty */
    default: return NULL;
    }
}

bkv_vindex *bkv_vindex_new(int shape, const bkv_vf_params *params, int order) {
    if (!bkv_vindex_shape_name(shape) || !bkv_vf_params_valid(params) || order < 2 || order > 1024) return NULL;
    bkv_vindex *vi = calloc(1, sizeof *vi);
    if (!vi) return NULL;
    vi->shape = shape;
    vi->order = order;
    vi->p = *params;
    vi->words = bkv_vf_words(params);
    return vi;
}

/* ---- hierarchy ---- */

static bnode *node_new(bkv_vindex *vi, int height) {
    bnode *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->child = calloc((size_t)(2 * vi->order + 1), sizeof *n->child);
    n->child_bits = calloc((size_t)(2 * vi->order + 1), sizeof *n->child_bits);
    n->bits = bkv_vf_alloc_bits(vi->words);
    if (!n->child || !n->child_bits || !n->bits) {
        free(n->child);
        free(n->child_bits);
        free(n->bits);
        free(n);
        return NULL;
    }
    n->height = height;
    n->dirty = 1;
    vi->ninner++;
    return n;
}

static void node_free(bkv_vindex *vi, bnode *n) {
    free(n->child);
    free(n->child_bits);
    free(n->bits);
    free(n);
    vi->ninner--;
}

static void tree_free(bkv_vindex *vi, bnode *n) {
    if (!n) return;
    if (n->height > 1)
        for (int i = 0; i < n->n; i++) tree_free(vi, n->child[i]);
    node_free(vi, n);
}

static void adopt(bnode *n, int i) {
    if (n->height == 1) {
        ((vleaf *)n->child[i])->parent = n;
        n->child_bits[i] = ((vleaf *)n->child[i])->bits;
    } else {
        ((bnode *)n->child[i])->parent = n;
        n->child_bits[i] = ((bnode *)n->child[i])->bits;
    }
}

static void mark_dirty(bnode *n) {
    for (; n; n = n->parent) n->dirty = 1;
}

static int child_index(const bnode *p, const void *c) {
    for (int i = 0; i < p->n; i++)
        if (p->child[i] == c) return i;
    return -1;
}

static void insert_child(bnode *p, int at, void *c) {
    memmove(&p->child[at + 1], &p->child[at], (size_t)(p->n - at) * sizeof p->child[0]);
    memmove(&p->child_bits[at + 1], &p->child_bits[at], (size_t)(p->n - at) * sizeof p->child_bits[0]);
    p->child[at] = c;
    p->n++;
    adopt(p, at);
}

static void remove_child(bnode *p, int at) {
    memmove(&p->child[at], &p->child[at + 1], (size_t)(p->n - at - 1) * sizeof p->child[0]);
    memmove(&p->child_bits[at], &p->child_bits[at + 1], (size_t)(p->n - at - 1) * sizeof p->child_bits[0]);
    p->n--;
}

/* Splits full nodes from b upwards: halves of d and d + 1 children. */
static int split_up(bkv_vindex *vi, bnode *b) {
    while (b->n > 2 * vi->order) {
        bnode *r = node_new(vi, b->height);
        if (!r) return BKV_NOMEM;
        int keep = b->n / 2;
        for (int i = keep; i < b->n; i++) insert_child(r, r->n, b->child[i]);
        b->n = keep;
        bnode *p = b->parent;
        if (!p) {
            if (!(p = node_new(vi, b->height + 1))) {
                node_free(vi, r);
                return BKV_NOMEM;
            }
            insert_child(p, 0, b);
            vi->root = p;
        }
        insert_child(p, child_index(p, b) + 1, r);
        mark_dirty(b);
        mark_dirty(r);
        b = p;
    }
    return BKV_OK;
}

static int tree_append(bkv_vindex *vi, vleaf *lf) {
    if (!vi->root && !(vi->root = node_new(vi, 1))) return BKV_NOMEM;
    bnode *b = vi->root;
    while (b->height > 1) b = b->child[b->n - 1];
    insert_child(b, b->n, lf);
    mark_dirty(b);
    return split_up(vi, b);
}

/* Restores d <= fan-out below the root after b lost a child: borrow from a
 * sibling with more than d, else merge with it (d - 1 + d <= 2d). */
static void rebalance(bkv_vindex *vi, bnode *b) {
    int d = vi->order;
    while (b != vi->root && b->n < d) {
        bnode *p = b->parent;
        int i = child_index(p, b), left = i > 0;
        bnode *s = p->child[left ? i - 1 : i + 1];
        if (s->n > d) {
            if (left) {
                insert_child(b, 0, s->child[s->n - 1]);
                s->n--;
            } else {
                insert_child(b, b->n, s->child[0]);
                remove_child(s, 0);
            }
            mark_dirty(b);
            mark_dirty(s);
            break;
        }
        bnode *l = left ? s : b, *r = left ? b : s;
        for (int j = 0; j < r->n; j++) insert_child(l, l->n, r->child[j]);
        remove_child(p, child_index(p, r));
        node_free(vi, r);
        mark_dirty(l);
        b = p;
    }
    while (vi->root && vi->root->height > 1 && vi->root->n == 1) {
        bnode *old = vi->root;
        vi->root = old->child[0];
        vi->root->parent = NULL;
        node_free(vi, old);
    }
    if (vi->root && vi->root->n == 0) {
        node_free(vi, vi->root);
        vi->root = NULL;
    }
}

static void tree_remove(bkv_vindex *vi, vleaf *lf) {
    bnode *b = lf->parent;
    remove_child(b, child_index(b, lf));
    mark_dirty(b);
    rebalance(vi, b);
}

static void or_into(uint64_t *restrict dst, const uint64_t *restrict src, size_t words) {
    for (size_t i = 0; i < words; i++) dst[i] |= src[i];
}

static uint64_t recompute(bkv_vindex *vi, bnode *n, int all) {
    if (!n->dirty && !all) return 0;
    uint64_t count = 1;
    memset(n->bits, 0, vi->words * 8);
    for (int i = 0; i < n->n; i++) {
        if (n->height == 1) {
            or_into(n->bits, ((vleaf *)n->child[i])->bits, vi->words);
        } else {
            bnode *c = n->child[i];
            count += recompute(vi, c, all);
            or_into(n->bits, c->bits, vi->words);
        }
    }
    n->dirty = 0;
    return count;
}

/* ---- bit-sliced ---- */

/* Grows the rows by a quarter (at least a word): amortized like doubling,
 * but a matrix never holds more than a quarter of unused columns beyond
 * what its tables needed at their largest (doubling left up to half:
 * 67 MB for the 19,568 leaves of 10 M entries, where 306 words of 64
 * columns need 40). Searches read every word of k rows, so the slack
 * costs them too. */
static int bs_grow(bkv_vindex *vi) {
    size_t ow = vi->row_words, nw = ow + (ow / 4 ? ow / 4 : 1), m = vi->p.m_bits;
    /* Built beside the old matrix, which searches go on reading, and
     * swapped in under the publish lock. */
    _Atomic uint64_t *rows = (_Atomic uint64_t *)bkv_vf_alloc_bits(m * nw);
    vleaf **cols = calloc(nw * 64, sizeof *cols);
    uint64_t *live = calloc(nw, sizeof *live), *taken = calloc(nw, sizeof *taken);
    if (!rows || !cols || !live || !taken) {
        free((void *)rows);
        free(cols);
        free(live);
        free(taken);
        return BKV_NOMEM;
    }
    for (size_t r = 0; r < m && ow; r++)
        for (size_t w = 0; w < ow; w++) row_set(&rows[r * nw + w], row_get(&vi->rows[r * ow + w]));
    if (ow) {
        memcpy(cols, vi->col_leaf, ow * 64 * sizeof *cols);
        memcpy(live, vi->col_live, ow * 8);
        memcpy(taken, vi->col_taken, ow * 8);
    }
    _Atomic uint64_t *old_rows = vi->rows;
    vleaf **old_cols = vi->col_leaf;
    uint64_t *old_live = vi->col_live;
    publish_begin(vi);
    vi->rows = rows;
    vi->col_leaf = cols;
    vi->col_live = live;
    vi->row_words = nw;
    publish_end(vi);
    free((void *)old_rows);
    free(old_cols);
    free(old_live);
    free(vi->col_taken);
    vi->col_taken = taken;
    return BKV_OK;
}

static int bs_take_col(bkv_vindex *vi, uint32_t *col) {
    for (;;) {
        for (size_t w = 0; w < vi->row_words; w++)
            if (~vi->col_taken[w]) {
                int b = __builtin_ctzll(~vi->col_taken[w]);
                vi->col_taken[w] |= UINT64_C(1) << b;
                *col = (uint32_t)(w * 64 + (size_t)b);
                return BKV_OK;
            }
        if (bs_grow(vi)) return BKV_NOMEM;
    }
}

/* Writes the columns of leaves[0..n) into the rows. Leaves sharing a row
 * word are transposed together, so each row word is written once per
 * group rather than once per leaf. */
static void bs_write(bkv_vindex *vi, vleaf *leaves, const uint64_t *const *bits, uint32_t n) {
    size_t W = vi->row_words;
    for (uint32_t g = 0; g < n;) {
        size_t w = leaves[g].col / 64;
        uint32_t end = g;
        while (end < n && leaves[end].col / 64 == w) end++;
        for (size_t chunk = 0; chunk < vi->words; chunk++) {
            uint64_t out[64] = {0};
            int any = 0;
            for (uint32_t j = g; j < end; j++) {
                uint64_t src = bits[j][chunk], colbit = UINT64_C(1) << (leaves[j].col & 63);
                any |= src != 0;
                while (src) {
                    out[__builtin_ctzll(src)] |= colbit;
                    src &= src - 1;
                }
            }
            if (!any) continue;
            /* Rows are a row's width apart: every word is a miss, so ask
             * for all 64 before writing any. */
            for (size_t b = 0; b < 64; b++) __builtin_prefetch((const void *)&vi->rows[(chunk * 64 + b) * W + w], 1);
            for (size_t b = 0; b < 64; b++) {
                _Atomic uint64_t *word = &vi->rows[(chunk * 64 + b) * W + w];
                row_set(word, row_get(word) | out[b]);
            }
        }
        g = end;
    }
}

/* Takes t's columns out of what searches read. REQUIRES: publishing. */
static void bs_unpublish(bkv_vindex *vi, const vtable *t) {
    for (uint32_t i = 0; i < t->n; i++) {
        uint32_t col = t->leaves[i].col;
        vi->col_leaf[col] = NULL;
        vi->col_live[col / 64] &= ~(UINT64_C(1) << (col & 63));
    }
}

/* Clears t's columns, no longer live, and gives them back. */
static void bs_release(bkv_vindex *vi, const vtable *t) {
    size_t W = vi->row_words;
    for (uint32_t g = 0; g < t->n;) {
        size_t w = t->leaves[g].col / 64;
        uint64_t mask = 0;
        uint32_t end = g;
        for (; end < t->n && t->leaves[end].col / 64 == w; end++) mask |= UINT64_C(1) << (t->leaves[end].col & 63);
        for (size_t r = 0; r < vi->p.m_bits; r++) {
            if (r + 32 < vi->p.m_bits) __builtin_prefetch((const void *)&vi->rows[(r + 32) * W + w], 1);
            _Atomic uint64_t *word = &vi->rows[r * W + w];
            row_set(word, row_get(word) & ~mask);
        }
        vi->col_taken[w] &= ~mask;
        g = end;
    }
}

/* ---- tables ---- */

static void table_free(vtable *t) {
    if (!t) return;
    for (uint32_t i = 0; i < t->n; i++) free(t->leaves[i].bits);
    free(t->leaves);
    free(t);
}

static ssize_t find_table(const bkv_vindex *vi, uint64_t file) {
    for (size_t i = 0; i < vi->ntables; i++)
        if (vi->tables[i]->file == file) return (ssize_t)i;
    return -1;
}

int bkv_vindex_has_table(const bkv_vindex *vi, uint64_t file) { return find_table(vi, file) >= 0; }

int bkv_vindex_broken(const bkv_vindex *vi) { return vi->broken; }

/* Builds t's leaves without touching what searches read: a copy of each
 * partition's bits (flat, hierarchy), or columns taken and written
 * (bit-sliced, not yet live). */
static int stage_leaves(bkv_vindex *vi, vtable *t, const bkv_vf_set *vf) {
    uint32_t n = t->n;
    /* Bit-sliced: t->n counts the columns taken, for a failure to give back. */
    if (vi->shape == BKV_VALUE_INDEX_BITSLICED) t->n = 0;
    const uint64_t **src = calloc(n, sizeof *src);
    uint64_t *ones = vf ? NULL : bkv_vf_alloc_bits(vi->words);
    if (!src || (!vf && !ones)) {
        free(src);
        free(ones);
        return BKV_NOMEM;
    }
    if (ones) memset(ones, 0xff, vi->words * 8);
    for (uint32_t i = 0; i < n; i++) {
        vleaf *lf = &t->leaves[i];
        lf->ref = vf ? (bkv_vleaf_ref){t->file, i, vf->parts[i].first_block, vf->parts[i].last_block}
                     : (bkv_vleaf_ref){t->file, 0, 0, UINT32_MAX};
        src[i] = vf ? bkv_vf_part_bits(vf, i) : ones;
    }
    int rc = BKV_OK;
    if (vi->shape == BKV_VALUE_INDEX_BITSLICED) {
        while (t->n < n && !(rc = bs_take_col(vi, &t->leaves[t->n].col))) t->n++;
        if (!rc) bs_write(vi, t->leaves, src, n);
    } else {
        for (uint32_t i = 0; i < n && !rc; i++) {
            if (!(t->leaves[i].bits = bkv_vf_alloc_bits(vi->words))) rc = BKV_NOMEM;
            else memcpy(t->leaves[i].bits, src[i], vi->words * 8);
        }
    }
    free(src);
    free(ones);
    return rc;
}

int bkv_vindex_add_table(bkv_vindex *vi, uint64_t file, const bkv_vf_set *vf) {
    int rc = BKV_OK;
    if (vf && !bkv_vf_same_bits(&vf->params, &vi->p)) {
        vf = NULL;
        rc = BKV_INVALID;
    }
    if (vf && vf->nparts == 0) return rc; /* an empty table: nothing to find */
    vtable *t = calloc(1, sizeof *t);
    uint32_t n = vf ? vf->nparts : 1;
    if (!t || !(t->leaves = calloc(n, sizeof *t->leaves))) {
        free(t);
        t = NULL;
    } else {
        t->file = file;
        t->n = n;
    }
    int staged = t && stage_leaves(vi, t, vf) == BKV_OK;
    publish_begin(vi);
    int added = 0;
    if (staged && vi->ntables == vi->cap_tables) {
        size_t cap = vi->cap_tables ? vi->cap_tables * 2 : 16;
        vtable **g = realloc(vi->tables, cap * sizeof *g);
        if (g) vi->tables = g, vi->cap_tables = cap;
    }
    if (staged && vi->ntables < vi->cap_tables) {
        vi->tables[vi->ntables++] = t;
        vi->nleaves += n;
        if (vi->shape == BKV_VALUE_INDEX_BITSLICED) {
            for (uint32_t i = 0; i < n; i++) {
                uint32_t col = t->leaves[i].col;
                vi->col_leaf[col] = &t->leaves[i];
                vi->col_live[col / 64] |= UINT64_C(1) << (col & 63);
            }
        } else if (vi->shape == BKV_VALUE_INDEX_HIERARCHY) {
            for (uint32_t i = 0; i < n; i++)
                if (tree_append(vi, &t->leaves[i])) vi->broken = 1;
            /* A node must hold the OR of its children whenever a search
             * can see it. */
            vi->recomputed += recompute(vi, vi->root, 0);
        }
        added = 1;
    } else {
        vi->broken = 1; /* the table's partitions would be missing: never answer "no" again */
    }
    publish_end(vi);
    if (added) return rc;
    if (t && vi->shape == BKV_VALUE_INDEX_BITSLICED) bs_release(vi, t);
    table_free(t);
    return BKV_NOMEM;
}

void bkv_vindex_remove_table(bkv_vindex *vi, uint64_t file) {
    ssize_t at = find_table(vi, file);
    if (at < 0) return;
    vtable *t = vi->tables[at];
    publish_begin(vi);
    if (vi->shape == BKV_VALUE_INDEX_BITSLICED) bs_unpublish(vi, t);
    if (vi->shape == BKV_VALUE_INDEX_HIERARCHY) {
        for (uint32_t i = 0; i < t->n; i++)
            if (t->leaves[i].parent) tree_remove(vi, &t->leaves[i]);
        /* Rebalancing moves children between nodes: recomputed before a
         * search can see a node missing a child's bits. */
        if (vi->root) vi->recomputed += recompute(vi, vi->root, 0);
    }
    vi->nleaves -= t->n;
    vi->tables[at] = vi->tables[--vi->ntables];
    publish_end(vi);
    if (vi->shape == BKV_VALUE_INDEX_BITSLICED) bs_release(vi, t);
    table_free(t);
}

uint64_t bkv_vindex_commit(bkv_vindex *vi) {
    uint64_t n = vi->recomputed;
    vi->recomputed = 0;
    return n;
}

uint64_t bkv_vindex_rebuild(bkv_vindex *vi) {
    if (vi->shape != BKV_VALUE_INDEX_HIERARCHY || !vi->root) return 0;
    publish_begin(vi);
    uint64_t n = recompute(vi, vi->root, 1);
    publish_end(vi);
    return n;
}

void bkv_vindex_free(bkv_vindex *vi) {
    if (!vi) return;
    tree_free(vi, vi->root);
    for (size_t i = 0; i < vi->ntables; i++) table_free(vi->tables[i]);
    free(vi->tables);
    free((void *)vi->rows);
    free(vi->col_leaf);
    free(vi->col_live);
    free(vi->col_taken);
    free(vi);
}

/* ---- search ---- */

static int hit(const vleaf *lf, bkv_vindex_hit_fn fn, void *arg, bkv_find_stats *st) {
    st->leaves_positive++;
    return fn(arg, &lf->ref);
}

static int search_all(const bkv_vindex *vi, int test, const bkv_vf_probe *pr, bkv_vindex_hit_fn fn, void *arg,
                      bkv_find_stats *st);

/* Node and leaf filters are far apart in memory and each probe is a cache
 * miss. The tree is searched a level at a time: the first words every
 * child of every "maybe" node needs are requested before any is tested,
 * so the misses overlap instead of following one another. The nodes
 * probed are exactly those of a depth-first search (Algorithm 1). A
 * macro, not a function: GCC judged a function that only prefetches free
 * of side effects and dropped every call. */
#define PREFETCH_PROBE(bits, pr)                                                                               \
    do {                                                                                                       \
        for (uint32_t pi_ = 0; pi_ < (pr)->k && pi_ < 4; pi_++) __builtin_prefetch(&(bits)[(pr)->pos[pi_] >> 6]); \
    } while (0)

typedef struct frontier {
    const bnode **nodes;
    size_t n, cap;
} frontier;

static int frontier_push(frontier *f, const bnode *n) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 64;
        const bnode **g = realloc(f->nodes, cap * sizeof *g);
        if (!g) return -1;
        f->nodes = g;
        f->cap = cap;
    }
    f->nodes[f->n++] = n;
    return 0;
}

static int search_tree(const bkv_vindex *vi, const bkv_vf_probe *pr, bkv_vindex_hit_fn fn, void *arg,
                       bkv_find_stats *st) {
    frontier cur = {0}, next = {0};
    st->nodes_probed++;
    int rc = 0;
    if (bkv_vf_test(vi->root->bits, pr)) {
        st->nodes_positive++;
        if (frontier_push(&cur, vi->root)) rc = BKV_NOMEM;
    }
    while (!rc && cur.n) {
        for (size_t j = 0; j < cur.n; j++)
            for (int i = 0; i < cur.nodes[j]->n; i++) PREFETCH_PROBE(cur.nodes[j]->child_bits[i], pr);
        next.n = 0;
        for (size_t j = 0; j < cur.n && !rc; j++) {
            const bnode *n = cur.nodes[j];
            for (int i = 0; i < n->n && !rc; i++) {
                int maybe = bkv_vf_test(n->child_bits[i], pr);
                if (n->height == 1) {
                    st->leaves_probed++;
                    if (maybe) rc = hit(n->child[i], fn, arg, st);
                } else {
                    st->nodes_probed++;
                    st->nodes_positive += (uint64_t)maybe;
                    if (maybe && frontier_push(&next, n->child[i])) rc = BKV_NOMEM;
                }
            }
        }
        frontier t = cur;
        cur = next;
        next = t;
    }
    free(cur.nodes);
    free(next.nodes);
    if (rc == BKV_NOMEM) return search_all(vi, 0, pr, fn, arg, st);
    return rc;
}

static int search_all(const bkv_vindex *vi, int test, const bkv_vf_probe *pr, bkv_vindex_hit_fn fn, void *arg,
                      bkv_find_stats *st) {
    for (size_t i = 0; i < vi->ntables; i++)
        for (uint32_t j = 0; j < vi->tables[i]->n; j++) {
            const vleaf *lf = &vi->tables[i]->leaves[j];
            /* The same overlap of misses, eight leaves ahead. */
            if (test && j + 8 < vi->tables[i]->n) PREFETCH_PROBE(vi->tables[i]->leaves[j + 8].bits, pr);
            st->leaves_probed += test;
            if (!test || bkv_vf_test(lf->bits, pr)) {
                int rc = hit(lf, fn, arg, st);
                if (rc) return rc;
            }
        }
    return 0;
}

static int search_sliced(const bkv_vindex *vi, const bkv_vf_probe *pr, bkv_vindex_hit_fn fn, void *arg,
                         bkv_find_stats *st) {
    size_t W = vi->row_words;
    if (W == 0 || pr->k == 0) return 0;
    /* One pass over the k rows side by side, a word of each at a time:
     * the k streams are fetched in parallel and nothing is copied. */
    const _Atomic uint64_t *rows[BKV_VF_MAX_K];
    for (uint32_t i = 0; i < pr->k; i++) rows[i] = vi->rows + (size_t)pr->pos[i] * W;
    st->nodes_probed += pr->k;
    st->leaves_probed += vi->nleaves;
    int rc = 0;
    for (size_t w = 0; w < W && !rc; w++) {
        uint64_t x = vi->col_live[w];
        for (uint32_t i = 0; i < pr->k && x; i++) x &= row_get(&rows[i][w]);
        for (; x && !rc; x &= x - 1) rc = hit(vi->col_leaf[w * 64 + (size_t)__builtin_ctzll(x)], fn, arg, st);
    }
    return rc;
}

int bkv_vindex_search(const bkv_vindex *vi, const bkv_vf_probe *pr, bkv_vindex_hit_fn fn, void *arg,
                      bkv_find_stats *st) {
    bkv_find_stats local = {0};
    if (!st) st = &local;
    st->leaves += vi->nleaves;
    if (vi->broken) return search_all(vi, 0, pr, fn, arg, st);
    switch (vi->shape) {
    case BKV_VALUE_INDEX_HIERARCHY: return vi->root ? search_tree(vi, pr, fn, arg, st) : 0;
    case BKV_VALUE_INDEX_BITSLICED: return search_sliced(vi, pr, fn, arg, st);
    default: return search_all(vi, 1, pr, fn, arg, st);
    }
}

/* ---- invariants ---- */

static int check_node(const bkv_vindex *vi, const bnode *n, int is_root, uint64_t *leaves, char *why, size_t len) {
    int d = vi->order;
    if (n->n > 2 * d || (!is_root && n->n < d) || (is_root && n->height > 1 && n->n < 2) || n->n < 1) {
        snprintf(why, len, "node of height %d has %d children (order %d%s)", n->height, n->n, d, is_root ? ", root" : "");
        return -1;
    }
    uint64_t *or = bkv_vf_alloc_bits(vi->words);
    if (!or) return 0;
    int rc = 0;
    for (int i = 0; i < n->n && !rc; i++) {
        if (n->height == 1) {
            const vleaf *lf = n->child[i];
            if (lf->parent != n) rc = -1, snprintf(why, len, "leaf with a wrong parent");
            else or_into(or, lf->bits, vi->words), (*leaves)++;
        } else {
            const bnode *c = n->child[i];
            if (c->parent != n || c->height != n->height - 1)
                rc = -1, snprintf(why, len, "node with a wrong parent or height");
            else if (!(rc = check_node(vi, c, 0, leaves, why, len))) or_into(or, c->bits, vi->words);
        }
    }
    if (!rc && !n->dirty && memcmp(or, n->bits, vi->words * 8) != 0)
        rc = -1, snprintf(why, len, "node of height %d is not the OR of its children", n->height);
    free(or);
    return rc;
}

int bkv_vindex_check(const bkv_vindex *vi, char *why, size_t n) {
    if (vi->shape != BKV_VALUE_INDEX_HIERARCHY) return 0;
    uint64_t leaves = 0;
    if (vi->root && (vi->root->parent || check_node(vi, vi->root, 1, &leaves, why, n))) return -1;
    if (leaves != vi->nleaves) {
        snprintf(why, n, "tree holds %llu leaves, index %llu", (unsigned long long)leaves,
                 (unsigned long long)vi->nleaves);
        return -1;
    }
    return 0;
}

/* ---- info ---- */

static void tree_info(const bkv_vindex *vi, const bnode *n, uint64_t *ones) {
    for (size_t w = 0; w < vi->words; w++) *ones += (uint64_t)__builtin_popcountll(n->bits[w]);
    if (n->height > 1)
        for (int i = 0; i < n->n; i++) tree_info(vi, n->child[i], ones);
}

void bkv_vindex_get_info(const bkv_vindex *vi, bkv_vindex_info *info) {
    memset(info, 0, sizeof *info);
    info->shape = vi->shape;
    info->order = vi->order;
    info->tables = vi->ntables;
    info->leaves = vi->nleaves;
    info->inner_nodes = vi->ninner;
    info->height = vi->root ? vi->root->height : vi->nleaves > 0;
    if (vi->shape == BKV_VALUE_INDEX_BITSLICED) {
        info->leaf_bytes = (uint64_t)vi->p.m_bits * vi->row_words * 8;
    } else {
        info->leaf_bytes = vi->nleaves * vi->words * 8;
        info->inner_bytes = vi->ninner * vi->words * 8;
    }
    if (vi->root && vi->ninner) {
        uint64_t ones = 0;
        tree_info(vi, vi->root, &ones);
        info->inner_ones_permille = ones * 1000 / (vi->ninner * vi->p.m_bits);
    }
}
