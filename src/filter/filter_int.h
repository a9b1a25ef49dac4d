/*
 * Internals shared by the filter implementations.
 *
 * Serialized layout (docs/format.md, "Filter"), all integers little-endian:
 *
 *   offset size  field
 *   0      4     magic        "BKVf" (0x66564B42)
 *   4      2     version      1
 *   6      1     type         BKV_FILTER_*
 *   7      1     k            probes per key
 *   8      4     hash_seed    seed the keys were hashed with
 *   12     4     filter_seed  type-specific remix seed (0 for Bloom types)
 *   16     8     num_keys     keys added
 *   24     8     num_bits     m
 *   32     8     payload_len  bytes of payload
 *   40     24    params       three u64, type-specific (zero for Bloom types)
 *   64     P     payload      the bits
 *   64+P   8     checksum     XXH3-64 of bytes [0, 64+P)
 *
 * The 64-byte header keeps the payload cache-line aligned whenever the
 * buffer is, which the blocked Bloom filter relies on for one miss a probe.
 */
#ifndef BKV_FILTER_INT_H
#define BKV_FILTER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomkv_filter.h"

#define BKV_FILTER_MAGIC 0x66564B42u
#define BKV_FILTER_VERSION 1
#define BKV_FILTER_HEADER_LEN 64
#define BKV_FILTER_TRAILER_LEN 8
#define BKV_FILTER_MAX_K 30
/* Below this a filter sits in cache: batched probes have no misses to
 * overlap, and their bookkeeping made them up to 5% slower than a plain
 * loop of single probes. */
#define BKV_FILTER_CACHED_BYTES (4u << 20)

typedef struct bkv_filter_ops bkv_filter_ops;

struct bkv_filter {
    const bkv_filter_ops *ops;
    unsigned k;              /* probes per key, or fingerprint / result bits */
    uint32_t hash_seed;      /* recorded, never applied: keys arrive hashed */
    uint32_t filter_seed;    /* static filters: the seed construction succeeded with */
    uint64_t params[3];      /* type-specific geometry, stored in the header */
    uint64_t rng;            /* cuckoo: kick choices (not stored) */
    uint64_t num_keys;       /* keys added */
    uint64_t num_bits;       /* m */
    uint64_t num_lines;      /* blocked Bloom: m / 512 */
    size_t payload_len;      /* bytes at payload */
    uint8_t *payload;        /* the bits: owned, or inside the opened buffer */
    bool owned;              /* payload was allocated by us (64-byte aligned) */
    bool aligned;            /* payload starts on a 64-byte boundary */
};

struct bkv_filter_ops {
    int type;
    const char *name;
    /* Dynamic types: sets k, num_bits, num_lines, params and payload_len
     * for n keys. NULL for static types. */
    int (*size)(bkv_filter *f, const bkv_filter_spec *spec, uint64_t n);
    /* Static types: builds f (ops, hash_seed set) over the n hashes,
     * allocating its payload. NULL for dynamic types. */
    int (*build)(bkv_filter *f, const bkv_filter_spec *spec, const bkv_hash *h, size_t n);
    /* atomic: readers may probe while we add (bkv_filter_add_concurrent).
     * Returns BKV_OK or BKV_FULL (nothing changed). */
    int (*add)(bkv_filter *f, bkv_hash h, bool atomic);
    /* Deletable types: BKV_OK, or BKV_NOTFOUND (nothing changed). */
    int (*remove)(bkv_filter *f, bkv_hash h);
    int (*may_contain)(const bkv_filter *f, bkv_hash h);
    /* Deletable types: how many times the key (or a key that collides
     * with it) is held. NULL: may_contain's 0 or 1. */
    uint64_t (*count)(const bkv_filter *f, bkv_hash h);
    /* Cuckoo types: moves up to limit entries of from into to (same type
     * and geometry, checked by the caller), returning how many. */
    uint64_t (*move)(bkv_filter *from, bkv_filter *to, uint64_t limit);
    void (*may_contain_batch)(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out);
    /* Requests the first memory a probe of h reads; NULL: no hint. */
    void (*prefetch)(const bkv_filter *f, bkv_hash h);
    /* Checks the decoded geometry (k, num_bits, payload_len) of an opened
     * filter and derives the rest; returns NULL when sound, else a reason. */
    const char *(*check_geometry)(bkv_filter *f);
};

/* Bit access in the payload. Loads are relaxed atomics (plain loads on
 * every mainstream CPU) so that probing while another thread adds with
 * atomic stores is well defined. The payload is plain memory (a caller's
 * serialized buffer, a mapped table block) that the other probe paths read
 * without atomics, which C11's typed atomics cannot express: this is the
 * one place that uses the compiler's __atomic builtins on plain bytes; the
 * engine uses <stdatomic.h> everywhere else. */
static inline unsigned bkv_payload_bit(const uint8_t *p, uint64_t bit) {
    return (unsigned)(__atomic_load_n(&p[bit >> 3], __ATOMIC_RELAXED) >> (bit & 7)) & 1u;
}

/* atomic: readers and other adders may use the byte at once (a memtable's
 * writers insert side by side). A load and a store would lose a bit another
 * adder set in the same byte between them, and the filter would then say
 * "no" for a key it holds; so the bit is set with a read-modify-write, and
 * only when the load shows it clear (the locked cycle is paid once a bit). */
static inline void bkv_payload_set(uint8_t *p, uint64_t bit, bool atomic) {
    uint8_t mask = (uint8_t)(1u << (bit & 7));
    if (atomic) {
        if (!(__atomic_load_n(&p[bit >> 3], __ATOMIC_RELAXED) & mask))
            __atomic_fetch_or(&p[bit >> 3], mask, __ATOMIC_RELAXED);
    } else {
        p[bit >> 3] |= mask;
    }
}

extern const bkv_filter_ops bkv_bloom_ops;
extern const bkv_filter_ops bkv_blocked_bloom_ops;
extern const bkv_filter_ops bkv_ribbon_ops;
extern const bkv_filter_ops bkv_fuse8_ops;
extern const bkv_filter_ops bkv_fuse16_ops;
extern const bkv_filter_ops bkv_xor8_ops;
extern const bkv_filter_ops bkv_cuckoo8_ops;
extern const bkv_filter_ops bkv_cuckoo12_ops;
extern const bkv_filter_ops bkv_cuckoo16_ops;
extern const bkv_filter_ops bkv_range_ops;
extern const bkv_filter_ops bkv_counting_ops;

/* Allocates f->payload (zeroed, 64-byte aligned, f->payload_len bytes). */
int bkv_filter_alloc_payload(bkv_filter *f);
/* Sorts keys by their top bits, roughly: one counting-sort pass through
 * tmp (room for n) into at most 2^12 buckets of 4096 keys or more, enough
 * for a caller that walks an array in key order to stay within L2. Out of
 * memory, keys stay as they were: construction is then only slower. */
void bkv_sort_by_top_bits(uint64_t *keys, size_t n, uint64_t *tmp);

/* A well-mixed 64-bit value from a key hash and a seed (static filters
 * retry construction with new seeds, so they remix the shared hash). */
static inline uint64_t bkv_filter_remix(bkv_hash h, uint64_t seed) {
    uint64_t z = h + seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A generic batch probe: prefetch nothing, probe each. */
void bkv_filter_batch_by_single(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out);

/* Bits per key a spec asks for: its bits_per_key, or the standard Bloom
 * filter's optimum for its fpr. */
double bkv_spec_bits_per_key(const bkv_filter_spec *spec);

/* False-positive models (fp_math.c). */
double bkv_bloom_model_fpr(unsigned k, uint64_t m, uint64_t n);
double bkv_blocked_model_fpr(unsigned k, double bits_per_key);
/* The k minimising the blocked model at this many bits per key. */
unsigned bkv_blocked_best_k(double bits_per_key);
/* The fewest bits per key whose best k meets the target rate. */
double bkv_blocked_bits_for_fpr(double fpr);

#endif
