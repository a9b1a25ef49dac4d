/* Entry layout in the arena: u32 ikey_len, ikey, u32 value_len, value
 * (host order: never leaves memory). */
#include "memtable/memtable.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "memtable/arena.h"
#include "util/hash.h"
#include "util/iterator.h"
#include "util/ikey.h"
#include "util/mutex.h"

#define MAX_HEIGHT 12
/* Each level holds about a quarter of the nodes of the one below. */
#define BRANCHING 4

typedef struct node {
    const uint8_t *entry;
    _Atomic(struct node *) next[]; /* height links */
} node;

typedef struct term_node {
    uint64_t h;
    const uint8_t *entry;
    struct term_node *next;
} term_node;

struct bkv_memtable {
    /* Read by every search and add. */
    node *head;
    atomic_int height;
    bkv_filter *filter; /* NULL if it could not be allocated: always "maybe" */
    uint64_t id;        /* unique in the process: names the memtable in adders' slices */
    /* Written as adds go, on lines of their own so that writing them does
     * not take the lines above from every search. */
    _Alignas(64) pthread_mutex_t arena_mu;
    bkv_arena arena;
    atomic_size_t memory;
    atomic_uint_fast64_t entries;
    _Alignas(64) atomic_int refs;
    /* Term index: published like skiplist links (release stores). */
    _Atomic(term_node *) *term_buckets;
    size_t term_mask;
    bkv_vf_params term_params;
    bkv_terms_fn terms;
    void *terms_arg;
};

static inline const uint8_t *entry_ikey(const uint8_t *e, size_t *len) {
    uint32_t n;
    memcpy(&n, e, 4);
    *len = n;
    return e + 4;
}

static inline const uint8_t *entry_value(const uint8_t *e, size_t *len) {
    uint32_t kn, vn;
    memcpy(&kn, e, 4);
    memcpy(&vn, e + 4 + kn, 4);
    *len = vn;
    return e + 8 + kn;
}

static size_t node_size(int height) { return sizeof(node) + (size_t)height * sizeof(_Atomic(node *)); }

/* A node's height comes from its key's hash and its sequence, not from a
 * generator the memtable keeps: concurrent adds share no state to draw
 * it, and two versions of one key still get independent heights. */
static int node_height(bkv_hash h, uint64_t seq) {
    uint64_t state = h ^ seq;
    uint64_t r = bkv_splitmix64(&state);
    int height = 1;
    while (height < MAX_HEIGHT && (r & (BRANCHING - 1)) == 0) {
        height++;
        r >>= 2;
    }
    return height;
}

/* A concurrent adder's slice of one memtable's arena: it bumps a pointer
 * of its own and takes the arena's lock once per slice, not once per
 * entry (with 16 adders the lock's line moved between cores on every
 * add). What is left of a slice when its thread moves to another
 * memtable is never used. */
#define SLICE_BYTES 4096
typedef struct arena_slice {
    uint64_t owner; /* the memtable's id; ids are never reused, so a freed memtable's slice is never taken */
    char *ptr;
    size_t left;
} arena_slice;
static _Thread_local arena_slice thread_slice;
static atomic_uint_fast64_t next_memtable_id = 1;

static void *locked_alloc(bkv_memtable *m, size_t n) {
    pthread_mutex_lock(&m->arena_mu);
    void *p = bkv_arena_alloc(&m->arena, n);
    atomic_store_explicit(&m->memory, m->arena.used, memory_order_relaxed);
    pthread_mutex_unlock(&m->arena_mu);
    return p;
}

/* Arena memory for an add, 8-byte aligned. */
static void *entry_alloc(bkv_memtable *m, size_t n, int concurrent) {
    if (!concurrent) {
        void *p = bkv_arena_alloc(&m->arena, n);
        atomic_store_explicit(&m->memory, m->arena.used, memory_order_relaxed);
        return p;
    }
    n = (n + 7) & ~(size_t)7;
    arena_slice *s = &thread_slice;
    if (s->owner != m->id || n > s->left) {
        if (n > SLICE_BYTES / 4) return locked_alloc(m, n);
        char *p = locked_alloc(m, SLICE_BYTES);
        if (!p) return NULL;
        *s = (arena_slice){m->id, p, SLICE_BYTES};
    }
    void *p = s->ptr;
    s->ptr += n;
    s->left -= n;
    return p;
}

/* A node with room for extra bytes right after its links: an entry put
 * there is read with the links, one cache miss per node a search visits
 * instead of two. */
static node *new_node(bkv_memtable *m, int height, size_t extra, int concurrent) {
    node *n = entry_alloc(m, node_size(height) + extra, concurrent);
    if (!n) return NULL;
    n->entry = extra ? (const uint8_t *)n + node_size(height) : NULL;
    for (int i = 0; i < height; i++) atomic_init(&n->next[i], NULL);
    return n;
}

bkv_memtable *bkv_memtable_new(uint64_t expected_keys, bkv_arena_pool *pool) {
    bkv_memtable *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    bkv_arena_init(&m->arena, pool);
    bkv_mutex_init_adaptive(&m->arena_mu);
    m->head = new_node(m, MAX_HEIGHT, 0, 0);
    if (!m->head) {
        bkv_arena_destroy(&m->arena);
        pthread_mutex_destroy(&m->arena_mu);
        free(m);
        return NULL;
    }
    atomic_init(&m->refs, 1);
    atomic_init(&m->height, 1);
    m->id = atomic_fetch_add_explicit(&next_memtable_id, 1, memory_order_relaxed);
    bkv_filter_spec spec = {.type = BKV_FILTER_BLOCKED_BLOOM, .bits_per_key = 10};
    if (!expected_keys || bkv_filter_create(&spec, expected_keys, &m->filter) != BKV_OK) m->filter = NULL;
    return m;
}

void bkv_memtable_ref(bkv_memtable *m) { atomic_fetch_add(&m->refs, 1); }

void bkv_memtable_unref(bkv_memtable *m) {
    if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
    bkv_filter_destroy(m->filter);
    pthread_mutex_destroy(&m->arena_mu);
    free(m->term_buckets);
    bkv_arena_destroy(&m->arena);
    free(m);
}

static inline int node_cmp(const node *n, const uint8_t *ikey, size_t ilen) {
    size_t nlen;
    const uint8_t *nk = entry_ikey(n->entry, &nlen);
    return bkv_ikey_compare(nk, nlen, ikey, ilen);
}

/* First node >= ikey; fills prev[] with the last node < ikey per level. */
static node *find_ge(const bkv_memtable *m, const uint8_t *ikey, size_t ilen, node **prev) {
    node *x = m->head;
    int level = atomic_load_explicit(&m->height, memory_order_relaxed) - 1;
    for (;;) {
        node *next = atomic_load_explicit(&x->next[level], memory_order_acquire);
        if (next && node_cmp(next, ikey, ilen) < 0) {
            x = next;
            continue;
        }
        if (prev) prev[level] = x;
        if (level == 0) return next;
        level--;
    }
}

static node *find_lt(const bkv_memtable *m, const uint8_t *ikey, size_t ilen) {
    node *prev[MAX_HEIGHT];
    find_ge(m, ikey, ilen, prev);
    return prev[0] == m->head ? NULL : prev[0];
}

static node *find_last(const bkv_memtable *m) {
    node *x = m->head;
    int level = atomic_load_explicit(&m->height, memory_order_relaxed) - 1;
    for (;;) {
        node *next = atomic_load_explicit(&x->next[level], memory_order_acquire);
        if (next) {
            x = next;
            continue;
        }
        if (level == 0) return x == m->head ? NULL : x;
        level--;
    }
}

int bkv_memtable_index_terms(bkv_memtable *m, const bkv_vf_params *p, bkv_terms_fn terms, void *terms_arg,
                             uint64_t expected) {
    size_t n = 1024;
    while (n < expected && n < (SIZE_MAX >> 4)) n <<= 1;
    if (!(m->term_buckets = calloc(n, sizeof *m->term_buckets))) return BKV_NOMEM;
    m->term_mask = n - 1;
    m->term_params = *p;
    m->terms = terms;
    m->terms_arg = terms_arg;
    return BKV_OK;
}

typedef struct term_sink {
    bkv_memtable *m;
    const uint8_t *entry;
    int concurrent;
    int rc;
} term_sink;

static void index_term(void *ctx, const void *term, size_t len) {
    term_sink *ts = ctx;
    bkv_memtable *m = ts->m;
    term_node *tn = entry_alloc(m, sizeof *tn, ts->concurrent);
    if (!tn) {
        ts->rc = BKV_NOMEM;
        return;
    }
    tn->h = bkv_vf_term_hash(&m->term_params, term, len);
    tn->entry = ts->entry;
    _Atomic(term_node *) *b = &m->term_buckets[tn->h & m->term_mask];
    tn->next = atomic_load_explicit(b, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(b, &tn->next, tn, memory_order_release, memory_order_relaxed)) {
    }
}

int bkv_memtable_find_term(const bkv_memtable *m, uint64_t h, bkv_memtable_entry_fn fn, void *arg) {
    if (!m->term_buckets) return 0;
    for (const term_node *tn = atomic_load_explicit(&m->term_buckets[h & m->term_mask], memory_order_acquire); tn;
         tn = tn->next) {
        if (tn->h != h) continue;
        size_t ilen, vlen;
        const uint8_t *ikey = entry_ikey(tn->entry, &ilen), *val = entry_value(tn->entry, &vlen);
        int rc = fn(arg, ikey, ilen, val, vlen);
        if (rc) return rc;
    }
    return 0;
}

/* Moves *prev along level forward to the last node < ikey there; *next
 * becomes its successor. */
static void seek_level(node **prev, node **next, int level, const uint8_t *ikey, size_t ilen) {
    node *x = *prev;
    for (;;) {
        node *n = atomic_load_explicit(&x->next[level], memory_order_acquire);
        if (!n || node_cmp(n, ikey, ilen) >= 0) {
            *prev = x;
            *next = n;
            return;
        }
        x = n;
    }
}

/* Links x in at each of its levels, bottom up, so a reader that finds it
 * at a level finds it below too. For a concurrent add each link is a
 * compare-and-swap from the successor the search found: when another add
 * linked a node there first, the level is searched again from the same
 * predecessor, which is still before ikey. */
static void link_node(bkv_memtable *m, node *x, int height, const uint8_t *ikey, size_t ilen, int concurrent) {
    int top = atomic_load_explicit(&m->height, memory_order_relaxed);
    /* Readers seeing the new height early find head links NULL at the new
     * levels, which is harmless. */
    while (height > top &&
           !atomic_compare_exchange_weak_explicit(&m->height, &top, height, memory_order_relaxed, memory_order_relaxed)) {
    }
    if (height > top) top = height;
    node *prev[MAX_HEIGHT], *next[MAX_HEIGHT];
    node *p = m->head;
    for (int level = top - 1; level >= 0; level--) {
        seek_level(&p, &next[level], level, ikey, ilen);
        prev[level] = p;
    }
    for (int i = 0; i < height; i++) {
        if (!concurrent) {
            atomic_store_explicit(&x->next[i], next[i], memory_order_relaxed);
            atomic_store_explicit(&prev[i]->next[i], x, memory_order_release);
            continue;
        }
        for (;;) {
            atomic_store_explicit(&x->next[i], next[i], memory_order_relaxed);
            node *expected = next[i];
            if (atomic_compare_exchange_strong_explicit(&prev[i]->next[i], &expected, x, memory_order_release,
                                                        memory_order_relaxed))
                break;
            seek_level(&prev[i], &next[i], i, ikey, ilen);
        }
    }
}

static int add_entry(bkv_memtable *m, uint64_t seq, unsigned type, const void *key, size_t klen, const void *val,
                     size_t vlen, bkv_hash h, int concurrent) {
    size_t ilen = klen + BKV_IKEY_TRAILER;
    if (ilen > UINT32_MAX || vlen > UINT32_MAX) return BKV_INVALID;
    int height = node_height(h, seq);
    node *x = new_node(m, height, 8 + ilen + vlen, concurrent);
    if (!x) return BKV_NOMEM;
    uint8_t *e = (uint8_t *)x->entry;
    uint32_t n32 = (uint32_t)ilen;
    memcpy(e, &n32, 4);
    if (klen) memcpy(e + 4, key, klen);
    bkv_put_u64(e + 4 + klen, bkv_pack_trailer(seq, type));
    n32 = (uint32_t)vlen;
    memcpy(e + 4 + ilen, &n32, 4);
    if (vlen) memcpy(e + 8 + ilen, val, vlen);
    if (m->term_buckets && type == BKV_TYPE_VALUE) {
        /* Indexed before the entry is reachable, and both before the
         * sequence becomes visible: a search never misses a visible entry. */
        term_sink ts = {m, e, concurrent, BKV_OK};
        if (m->terms) m->terms(m->terms_arg, e + 8 + ilen, vlen, index_term, &ts);
        else index_term(&ts, e + 8 + ilen, vlen);
        if (ts.rc) return ts.rc;
    }
    /* The key must be in the filter before the node is reachable. */
    if (m->filter) bkv_filter_add_concurrent(m->filter, h);
    link_node(m, x, height, e + 4, ilen, concurrent);
    if (!concurrent) atomic_fetch_add_explicit(&m->entries, 1, memory_order_relaxed);
    return BKV_OK;
}

int bkv_memtable_add(bkv_memtable *m, uint64_t seq, unsigned type, const void *key, size_t klen,
                     const void *val, size_t vlen, bkv_hash h) {
    return add_entry(m, seq, type, key, klen, val, vlen, h, 0);
}

int bkv_memtable_add_concurrent(bkv_memtable *m, uint64_t seq, unsigned type, const void *key, size_t klen,
                                const void *val, size_t vlen, bkv_hash h) {
    return add_entry(m, seq, type, key, klen, val, vlen, h, 1);
}

void bkv_memtable_count_added(bkv_memtable *m, uint64_t n) {
    atomic_fetch_add_explicit(&m->entries, n, memory_order_relaxed);
}

int bkv_memtable_get(const bkv_memtable *m, const void *key, size_t klen, bkv_hash h,
                     uint64_t snapshot, unsigned *type, const uint8_t **val, size_t *vlen,
                     int *filter_negative, uint64_t *seq) {
    *filter_negative = 0;
    if (m->filter && !bkv_filter_may_contain(m->filter, h)) {
        *filter_negative = 1;
        return 0;
    }
    /* Seek to (key, snapshot, highest type): the newest visible version. */
    uint8_t stackbuf[256];
    size_t ilen = klen + BKV_IKEY_TRAILER;
    uint8_t *ikey = ilen <= sizeof stackbuf ? stackbuf : malloc(ilen);
    if (!ikey) return 0;
    if (klen) memcpy(ikey, key, klen);
    bkv_put_u64(ikey + klen, bkv_pack_trailer(snapshot, 0xff));
    node *n = find_ge(m, ikey, ilen, NULL);
    if (ikey != stackbuf) free(ikey);
    if (!n) return 0;
    size_t nlen;
    const uint8_t *nk = entry_ikey(n->entry, &nlen);
    if (bkv_user_key_compare(nk, nlen - BKV_IKEY_TRAILER, key, klen) != 0) return 0;
    *type = bkv_ikey_type(nk, nlen);
    if (seq) *seq = bkv_ikey_seq(nk, nlen);
    *val = entry_value(n->entry, vlen);
    return 1;
}

size_t bkv_memtable_memory(const bkv_memtable *m) {
    return atomic_load_explicit(&m->memory, memory_order_relaxed);
}

uint64_t bkv_memtable_entries(const bkv_memtable *m) {
    return atomic_load_explicit(&m->entries, memory_order_relaxed);
}

void bkv_memtable_iter_init(bkv_memtable_iter *it, const bkv_memtable *m) {
    it->m = m;
    it->node = NULL;
}

int bkv_memtable_iter_valid(const bkv_memtable_iter *it) { return it->node != NULL; }

void bkv_memtable_iter_first(bkv_memtable_iter *it) {
    it->node = atomic_load_explicit(&it->m->head->next[0], memory_order_acquire);
}

void bkv_memtable_iter_last(bkv_memtable_iter *it) { it->node = find_last(it->m); }

void bkv_memtable_iter_seek(bkv_memtable_iter *it, const uint8_t *ikey, size_t ilen) {
    it->node = find_ge(it->m, ikey, ilen, NULL);
}

void bkv_memtable_iter_next(bkv_memtable_iter *it) {
    const node *n = it->node;
    it->node = atomic_load_explicit(&((node *)n)->next[0], memory_order_acquire);
}

void bkv_memtable_iter_prev(bkv_memtable_iter *it) {
    size_t len;
    const uint8_t *k = entry_ikey(((const node *)it->node)->entry, &len);
    it->node = find_lt(it->m, k, len);
}

const uint8_t *bkv_memtable_iter_ikey(const bkv_memtable_iter *it, size_t *len) {
    return entry_ikey(((const node *)it->node)->entry, len);
}

const uint8_t *bkv_memtable_iter_value(const bkv_memtable_iter *it, size_t *len) {
    return entry_value(((const node *)it->node)->entry, len);
}

typedef struct mem_iiter {
    bkv_ikey_iter base;
    bkv_memtable *m;
    bkv_memtable_iter it;
} mem_iiter;

static int mt_valid(bkv_ikey_iter *b) { return bkv_memtable_iter_valid(&((mem_iiter *)b)->it); }
static void mt_first(bkv_ikey_iter *b) { bkv_memtable_iter_first(&((mem_iiter *)b)->it); }
static void mt_last(bkv_ikey_iter *b) { bkv_memtable_iter_last(&((mem_iiter *)b)->it); }
static void mt_seek(bkv_ikey_iter *b, const uint8_t *k, size_t n) { bkv_memtable_iter_seek(&((mem_iiter *)b)->it, k, n); }
static void mt_next(bkv_ikey_iter *b) { bkv_memtable_iter_next(&((mem_iiter *)b)->it); }
static void mt_prev(bkv_ikey_iter *b) { bkv_memtable_iter_prev(&((mem_iiter *)b)->it); }
static const uint8_t *mt_key(bkv_ikey_iter *b, size_t *n) { return bkv_memtable_iter_ikey(&((mem_iiter *)b)->it, n); }
static const uint8_t *mt_value(bkv_ikey_iter *b, size_t *n) { return bkv_memtable_iter_value(&((mem_iiter *)b)->it, n); }
static int mt_status(bkv_ikey_iter *b, bkv_err *e) {
    (void)b, (void)e;
    return BKV_OK;
}
static void mt_destroy(bkv_ikey_iter *b) {
    mem_iiter *mi = (mem_iiter *)b;
    bkv_memtable_unref(mi->m);
    free(mi);
}

static const bkv_ikey_iter_ops mem_iiter_ops = {mt_valid, mt_first, mt_last,  mt_seek,   mt_next,
                                            mt_prev,  mt_key,   mt_value, mt_status, mt_destroy};

bkv_ikey_iter *bkv_memtable_ikey_iter_new(bkv_memtable *m) {
    mem_iiter *mi = malloc(sizeof *mi);
    if (!mi) return NULL;
    mi->base.ops = &mem_iiter_ops;
    bkv_memtable_ref(m);
    mi->m = m;
    bkv_memtable_iter_init(&mi->it, m);
    return &mi->base;
}
