/*
 * RedisBloom's cuckoo filter arithmetic (classic_cuckoo.h). The order in
 * which slots are tried and fingerprints kicked is part of the layout: it
 * decides when a filter reports full and grows, which RedisBloom's clients
 * observe as counts.
 */
#include "classic_cuckoo.h"

#include "classic_bloom.h"

#define ALT_FACTOR 0x5bd1e995ULL

static uint64_t other_bucket(uint8_t fp, uint64_t h) { return h ^ ((uint64_t)fp * ALT_FACTOR); }

static uint8_t *bucket_at(const cuckoo_table *t, uint64_t h) {
    return t->slots + (h % t->buckets) * t->bucket_size;
}

static uint8_t *free_slot(uint8_t *bucket, unsigned bucket_size) {
    for (unsigned i = 0; i < bucket_size; i++)
        if (bucket[i] == 0) return &bucket[i];
    return NULL;
}

cuckoo_item classic_cuckoo_item(const void *data, size_t len) {
    uint64_t h = bkv_murmur64a(data, len, 0);
    cuckoo_item it;
    it.fp = (uint8_t)(h % 255 + 1);
    it.h1 = h;
    it.h2 = other_bucket(it.fp, h);
    return it;
}

uint64_t classic_cuckoo_buckets(uint64_t capacity, unsigned bucket_size) {
    uint64_t want = capacity / bucket_size, n = 1;
    while (n < want) n <<= 1;
    return n;
}

static unsigned count_in(const uint8_t *bucket, unsigned bucket_size, uint8_t fp) {
    unsigned n = 0;
    for (unsigned i = 0; i < bucket_size; i++) n += bucket[i] == fp;
    return n;
}

unsigned classic_cuckoo_count(const cuckoo_table *t, const cuckoo_item *it) {
    return count_in(bucket_at(t, it->h1), t->bucket_size, it->fp) +
           count_in(bucket_at(t, it->h2), t->bucket_size, it->fp);
}

static int delete_in(uint8_t *bucket, unsigned bucket_size, uint8_t fp) {
    for (unsigned i = 0; i < bucket_size; i++)
        if (bucket[i] == fp) {
            bucket[i] = 0;
            return 1;
        }
    return 0;
}

int classic_cuckoo_delete(const cuckoo_table *t, const cuckoo_item *it) {
    return delete_in(bucket_at(t, it->h1), t->bucket_size, it->fp) ||
           delete_in(bucket_at(t, it->h2), t->bucket_size, it->fp);
}

int classic_cuckoo_place(const cuckoo_table *t, const cuckoo_item *it) {
    uint8_t *slot = free_slot(bucket_at(t, it->h1), t->bucket_size);
    if (!slot) slot = free_slot(bucket_at(t, it->h2), t->bucket_size);
    if (!slot) return 0;
    *slot = it->fp;
    return 1;
}

int classic_cuckoo_kick_in(const cuckoo_table *t, const cuckoo_item *it, unsigned max_iterations) {
    unsigned bs = t->bucket_size, victim = 0;
    uint8_t fp = it->fp;
    uint64_t b = it->h1 % t->buckets;
    for (unsigned n = 0; n < max_iterations; n++) {
        uint8_t *slot = t->slots + b * bs + victim, out = *slot;
        *slot = fp;
        fp = out;
        b = other_bucket(fp, b) % t->buckets;
        uint8_t *room = free_slot(t->slots + b * bs, bs);
        if (room) {
            *room = fp;
            return 1;
        }
        victim = (victim + 1) % bs;
    }
    /* Walk the same path back, each kicked fingerprint to where it was. */
    for (unsigned n = 0; n < max_iterations; n++) {
        victim = (victim + bs - 1) % bs;
        b = other_bucket(fp, b) % t->buckets;
        uint8_t *slot = t->slots + b * bs + victim, out = *slot;
        *slot = fp;
        fp = out;
    }
    return 0;
}

int classic_cuckoo_move_down(const cuckoo_table *t, const cuckoo_table *older, size_t n) {
    int emptied = 1;
    for (uint64_t b = 0; b < t->buckets; b++) {
        for (unsigned i = 0; i < t->bucket_size; i++) {
            uint8_t *slot = t->slots + b * t->bucket_size + i;
            if (!*slot) continue;
            /* b is the fingerprint's bucket number reduced mod a larger
             * power of two, so mod a smaller one it is still its own. */
            cuckoo_item it = {.h1 = b, .h2 = other_bucket(*slot, b), .fp = *slot};
            size_t j = 0;
            while (j < n && !classic_cuckoo_place(&older[j], &it)) j++;
            if (j == n) {
                emptied = 0;
                continue;
            }
            *slot = 0;
        }
    }
    return emptied;
}
