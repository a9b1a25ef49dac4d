#include "table/cache.h"

#include <pthread.h>
#include <stdlib.h>

#include "util/hash.h"

#define SHARDS 16

struct bkv_cache_entry {
    uint64_t k1, k2;
    void *value;
    size_t charge;
    bkv_cache_deleter deleter;
    unsigned refs;      /* users + 1 while in the table */
    int in_table;
    int pinned;         /* outside every cache: release is free, bkv_cache_pinned_free ends it */
    bkv_cache_entry *hnext;             /* hash chain */
    bkv_cache_entry *lru_prev, *lru_next; /* LRU list (only unreferenced-by-users entries matter) */
};

typedef struct shard {
    pthread_mutex_t mu;
    size_t capacity, usage;
    bkv_cache_entry **table;
    size_t buckets, count;
    bkv_cache_entry lru; /* sentinel: lru.lru_next is the oldest */
} shard;

struct bkv_cache {
    shard shards[SHARDS];
};

static uint64_t key_hash(uint64_t k1, uint64_t k2) {
    uint64_t s = k1 * 0x9e3779b97f4a7c15ULL ^ k2;
    return bkv_splitmix64(&s);
}

bkv_cache *bkv_cache_new(size_t capacity) {
    bkv_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        pthread_mutex_init(&s->mu, NULL);
        s->capacity = (capacity + SHARDS - 1) / SHARDS;
        s->buckets = 64;
        s->table = calloc(s->buckets, sizeof *s->table);
        s->lru.lru_next = s->lru.lru_prev = &s->lru;
        if (!s->table) {
            bkv_cache_free(c);
            return NULL;
        }
    }
    return c;
}

static void lru_remove(bkv_cache_entry *e) {
    e->lru_prev->lru_next = e->lru_next;
    e->lru_next->lru_prev = e->lru_prev;
    e->lru_prev = e->lru_next = NULL;
}

static void lru_append(shard *s, bkv_cache_entry *e) {
    e->lru_next = &s->lru;
    e->lru_prev = s->lru.lru_prev;
    e->lru_prev->lru_next = e;
    s->lru.lru_prev = e;
}

static void unref(bkv_cache_entry *e) {
    if (--e->refs == 0) {
        if (e->deleter) e->deleter(e->k1, e->k2, e->value);
        free(e);
    }
}

/* Unlinks e from the hash table and LRU; REQUIRES s->mu. Returns it so the
 * caller can drop the table's reference outside the lock when needed. */
static void table_remove(shard *s, bkv_cache_entry *e) {
    bkv_cache_entry **pp = &s->table[key_hash(e->k1, e->k2) & (s->buckets - 1)];
    while (*pp != e) pp = &(*pp)->hnext;
    *pp = e->hnext;
    if (e->lru_next) lru_remove(e);
    e->in_table = 0;
    s->usage -= e->charge;
    s->count--;
}

static void grow(shard *s) {
    size_t nb = s->buckets * 2;
    bkv_cache_entry **t = calloc(nb, sizeof *t);
    if (!t) return; /* longer chains, still correct */
    for (size_t i = 0; i < s->buckets; i++) {
        bkv_cache_entry *e = s->table[i];
        while (e) {
            bkv_cache_entry *next = e->hnext;
            size_t b = key_hash(e->k1, e->k2) & (nb - 1);
            e->hnext = t[b];
            t[b] = e;
            e = next;
        }
    }
    free(s->table);
    s->table = t;
    s->buckets = nb;
}

void bkv_cache_free(bkv_cache *c) {
    if (!c) return;
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        if (s->table) {
            for (size_t b = 0; b < s->buckets; b++) {
                bkv_cache_entry *e = s->table[b];
                while (e) {
                    bkv_cache_entry *next = e->hnext;
                    unref(e);
                    e = next;
                }
            }
        }
        free(s->table);
        pthread_mutex_destroy(&s->mu);
    }
    free(c);
}

static shard *shard_for(bkv_cache *c, uint64_t k1, uint64_t k2) {
    return &c->shards[key_hash(k1, k2) >> 60];
}

bkv_cache_entry *bkv_cache_lookup(bkv_cache *c, uint64_t k1, uint64_t k2) {
    shard *s = shard_for(c, k1, k2);
    pthread_mutex_lock(&s->mu);
    bkv_cache_entry *e = s->table[key_hash(k1, k2) & (s->buckets - 1)];
    while (e && !(e->k1 == k1 && e->k2 == k2)) e = e->hnext;
    if (e) {
        e->refs++;
        lru_remove(e);
        lru_append(s, e);
    }
    pthread_mutex_unlock(&s->mu);
    return e;
}

bkv_cache_entry *bkv_cache_insert(bkv_cache *c, uint64_t k1, uint64_t k2, void *value, size_t charge,
                                  bkv_cache_deleter deleter) {
    bkv_cache_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->k1 = k1;
    e->k2 = k2;
    e->value = value;
    e->charge = charge;
    e->deleter = deleter;
    e->refs = 2; /* the table's and the caller's */
    e->in_table = 1;
    shard *s = shard_for(c, k1, k2);
    bkv_cache_entry *victims = NULL;
    pthread_mutex_lock(&s->mu);
    size_t b = key_hash(k1, k2) & (s->buckets - 1);
    for (bkv_cache_entry *old = s->table[b]; old; old = old->hnext)
        if (old->k1 == k1 && old->k2 == k2) {
            table_remove(s, old);
            old->hnext = victims;
            victims = old;
            break;
        }
    e->hnext = s->table[b];
    s->table[b] = e;
    lru_append(s, e);
    s->usage += charge;
    s->count++;
    /* Evict from the old end, sparing the entry just added. */
    while (s->usage > s->capacity && s->lru.lru_next != e) {
        bkv_cache_entry *old = s->lru.lru_next;
        table_remove(s, old);
        old->hnext = victims;
        victims = old;
    }
    if (s->count > s->buckets) grow(s);
    pthread_mutex_unlock(&s->mu);
    while (victims) {
        bkv_cache_entry *next = victims->hnext;
        pthread_mutex_lock(&s->mu);
        victims->refs--;
        unsigned left = victims->refs;
        pthread_mutex_unlock(&s->mu);
        if (left == 0) {
            if (victims->deleter) victims->deleter(victims->k1, victims->k2, victims->value);
            free(victims);
        }
        victims = next;
    }
    return e;
}

void *bkv_cache_value(const bkv_cache_entry *e) { return e->value; }

void bkv_cache_release(bkv_cache *c, bkv_cache_entry *e) {
    if (e->pinned) return;
    shard *s = shard_for(c, e->k1, e->k2);
    pthread_mutex_lock(&s->mu);
    unsigned left = --e->refs;
    pthread_mutex_unlock(&s->mu);
    if (left == 0) {
        if (e->deleter) e->deleter(e->k1, e->k2, e->value);
        free(e);
    }
}

void bkv_cache_erase_k1(bkv_cache *c, uint64_t k1) {
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        bkv_cache_entry *victims = NULL;
        pthread_mutex_lock(&s->mu);
        for (size_t b = 0; b < s->buckets; b++) {
            bkv_cache_entry *e = s->table[b];
            while (e) {
                bkv_cache_entry *next = e->hnext;
                if (e->k1 == k1) {
                    table_remove(s, e);
                    e->hnext = victims;
                    victims = e;
                }
                e = next;
            }
        }
        for (bkv_cache_entry *e = victims; e;) {
            bkv_cache_entry *next = e->hnext;
            if (--e->refs == 0) {
                if (e->deleter) e->deleter(e->k1, e->k2, e->value);
                free(e);
            }
            e = next;
        }
        pthread_mutex_unlock(&s->mu);
    }
}

size_t bkv_cache_usage(bkv_cache *c) {
    size_t total = 0;
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&c->shards[i].mu);
        total += c->shards[i].usage;
        pthread_mutex_unlock(&c->shards[i].mu);
    }
    return total;
}

bkv_cache_entry *bkv_cache_pinned_new(uint64_t k1, void *value, bkv_cache_deleter deleter) {
    bkv_cache_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->k1 = k1;
    e->value = value;
    e->deleter = deleter;
    e->pinned = 1;
    return e;
}

void bkv_cache_pinned_free(bkv_cache_entry *e) {
    if (!e) return;
    if (e->deleter) e->deleter(e->k1, 0, e->value);
    free(e);
}

void bkv_cache_fork_prepare(bkv_cache *c) {
    if (c)
        for (int i = 0; i < SHARDS; i++) pthread_mutex_lock(&c->shards[i].mu);
}

void bkv_cache_fork_parent(bkv_cache *c) {
    if (c)
        for (int i = SHARDS - 1; i >= 0; i--) pthread_mutex_unlock(&c->shards[i].mu);
}

void bkv_cache_fork_child(bkv_cache *c) {
    if (c)
        for (int i = 0; i < SHARDS; i++) pthread_mutex_init(&c->shards[i].mu, NULL);
}
