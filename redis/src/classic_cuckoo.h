/*
 * The cuckoo filter RedisBloom keeps under CF.*, computed the same way so
 * that CF.* answers, grows and fills as it does there: a sub-filter is a
 * power-of-two number of buckets of bucket_size one-byte slots (0 =
 * empty); an item's hash is MurmurHash64A(item, seed 0), its fingerprint
 * hash mod 255 + 1, its buckets hash and hash XOR fingerprint x 0x5bd1e995,
 * each taken mod the number of buckets. A full pair of buckets makes room
 * by kicking fingerprints to their other bucket, up to max_iterations
 * times, and undoes the kicks when that fails. docs/format.md gives the
 * bytes.
 */
#ifndef BKV_CLASSIC_CUCKOO_H
#define BKV_CLASSIC_CUCKOO_H

#include <stddef.h>
#include <stdint.h>

typedef struct cuckoo_item {
    uint64_t h1, h2; /* bucket numbers before reduction mod a sub-filter's buckets */
    uint8_t fp;
} cuckoo_item;

/* One sub-filter: slots = buckets x bucket_size bytes. */
typedef struct cuckoo_table {
    uint8_t *slots;
    uint64_t buckets; /* a power of two */
    unsigned bucket_size;
} cuckoo_table;

cuckoo_item classic_cuckoo_item(const void *data, size_t len);

/* The number of buckets RedisBloom gives a filter of capacity items. */
uint64_t classic_cuckoo_buckets(uint64_t capacity, unsigned bucket_size);

/* Copies of fp in the item's two buckets of t (each counted). */
unsigned classic_cuckoo_count(const cuckoo_table *t, const cuckoo_item *it);

/* Clears one copy of the item's fingerprint in its buckets; 1 if found. */
int classic_cuckoo_delete(const cuckoo_table *t, const cuckoo_item *it);

/* Puts the item in a free slot of one of its buckets; 1 if there was one. */
int classic_cuckoo_place(const cuckoo_table *t, const cuckoo_item *it);

/* Kicks fingerprints out of the item's first bucket to make room, at most
 * max_iterations times; 1 when the item went in, 0 when it did not (and
 * then t is as it was). */
int classic_cuckoo_kick_in(const cuckoo_table *t, const cuckoo_item *it, unsigned max_iterations);

/* Moves fingerprints of t into the tables before it (older[0..n)), each
 * into the first with room in one of its buckets, as RedisBloom's
 * compaction does. 1 when t is empty afterwards. */
int classic_cuckoo_move_down(const cuckoo_table *t, const cuckoo_table *older, size_t n);

#endif
