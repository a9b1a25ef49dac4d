/*
 * bloomkv_filter.h — the bloomkv approximate-membership filter library.
 *
 * Usable on its own, without the storage engine.
 *
 * Hash once, probe many: a key is turned into a bkv_hash exactly once
 * (bkv_hash_bytes), and every filter takes that hash, never the key. A
 * caller that checks the same key against many filters (an LSM read path
 * asking one filter per table) pays for one hash, not one per filter.
 *
 * Serialized form: every filter encodes to a self-describing, checksummed,
 * little-endian byte string (docs/format.md, "Filter"). bkv_filter_open()
 * validates such a string and probes it in place, without copying it.
 *
 * Thread safety: probing a filter is safe from any number of threads at
 * once; adding to a filter needs exclusive access.
 *
 * Errors: a call returns a BKV_* status and leaves no message behind
 * (bkv_errmsg is the engine's): the statuses below say what each means,
 * and bkv_filter_open writes its reason into the caller's buffer. The
 * engine calls these functions itself, so a filter call made inside an
 * engine call never replaces the message of an engine error.
 *
 * Ownership: every bkv_filter handle is freed with bkv_filter_destroy()
 * (handles are made by _create/_build/_open and ended by _destroy, as in
 * the engine's API). A handle from bkv_filter_open() borrows the caller's
 * buffer, which must stay alive and unchanged until the handle is freed.
 */
#ifndef BLOOMKV_FILTER_H
#define BLOOMKV_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include "bloomkv_common.h" /* BKV_EXPORT, versions, status codes */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Hashing ----------------------------------------------------------- */

/* The one hash of a key: 64 bits of XXH3. Filters split it into two 32-bit
 * halves for double hashing, so all of its bits matter. */
typedef uint64_t bkv_hash;

BKV_EXPORT bkv_hash bkv_hash_bytes(const void *data, size_t len);
/* Seeded variant, for callers that need families of independent filters.
 * A filter records the seed its keys were hashed with (spec.hash_seed) but
 * never re-hashes: hashing with the right seed is the caller's job. */
BKV_EXPORT bkv_hash bkv_hash_bytes_seeded(const void *data, size_t len, uint64_t seed);

/* ---- Filter types: BKV_FILTER_* (bloomkv_common.h) ------------------- */

/* "bloom", "blocked", "ribbon", "fuse8", "fuse16", "xor8", "cuckoo8",
 * "cuckoo12", "cuckoo16", "counting", "none"; NULL for an unknown type. */
BKV_EXPORT const char *bkv_filter_type_name(int type);
/* The inverse; -1 for an unknown name. */
BKV_EXPORT int bkv_filter_type_from_name(const char *name);

/* How to size a filter. Exactly one of bits_per_key and fpr is used:
 * bits_per_key when it is > 0, else fpr (which must lie in (0, 1)). */
typedef struct bkv_filter_spec {
    int      type;          /* BKV_FILTER_* */
    double   bits_per_key;  /* memory budget per key, e.g. 10 */
    double   fpr;           /* target false-positive rate, e.g. 0.01 */
    uint32_t hash_seed;     /* seed the caller's keys were hashed with */
} bkv_filter_spec;

typedef struct bkv_filter bkv_filter;

/* Static types (bkv_filter_is_static) need every key up front; deletable
 * ones (bkv_filter_is_deletable) support bkv_filter_delete. */
BKV_EXPORT int bkv_filter_is_static(int type);
BKV_EXPORT int bkv_filter_is_deletable(int type);

/* A filter sized for about expected_keys keys, to be filled with
 * bkv_filter_add() (not for static types: BKV_INVALID). Adding more keys
 * than expected to a Bloom type works but raises the false-positive rate;
 * a cuckoo filter answers BKV_FULL instead. Returns BKV_INVALID for a bad
 * spec. */
BKV_EXPORT int bkv_filter_create(const bkv_filter_spec *spec, uint64_t expected_keys,
                              bkv_filter **out);

/* A filter holding exactly the n given hashes, of any type. Duplicates
 * are allowed and count once: a deletable filter built from a key given
 * twice holds it once (one bkv_filter_delete removes it). Static types size themselves from spec: Ribbon keeps
 * r = round(log2(1/fpr)) result bits (or bits_per_key / 1.04), fuse and
 * xor their fingerprint width. Construction of a static filter retries
 * with new seeds and returns BKV_FULL if it still fails (vanishingly
 * rare); the caller's array is not modified. BKV_INVALID for a bad spec,
 * out NULL, or hashes NULL with n > 0. */
BKV_EXPORT int bkv_filter_build(const bkv_filter_spec *spec, const bkv_hash *hashes,
                                size_t n, bkv_filter **out);

/* Adds a key. BKV_INVALID for a handle from bkv_filter_open() (read-only)
 * or a static type; BKV_FULL when a cuckoo filter has no room (the filter
 * is unchanged and still holds every key added before). */
BKV_EXPORT int bkv_filter_add(bkv_filter *f, bkv_hash h);

/* Deletable types only: removes one earlier addition of the key. Returns
 * BKV_NOTFOUND, changing nothing, when the filter shows the key absent.
 * Deleting a key that was never added but reads as present (a false
 * positive) removes another key's trace: only delete what you added. */
BKV_EXPORT int bkv_filter_delete(bkv_filter *f, bkv_hash h);

/* How many times the key is held: for a cuckoo filter the copies of its
 * fingerprint in its two buckets (an upper bound: another key may share
 * them); for other types bkv_filter_may_contain's 0 or 1. */
BKV_EXPORT uint64_t bkv_filter_count(const bkv_filter *f, bkv_hash h);

/* Moves entries of from into to, which must be filters of one cuckoo type
 * and one bucket count (a stack of equal sub-filters, compacted after
 * deletes): each entry goes into one of its two buckets in to when either
 * has a free slot (no entry of to is displaced), so every key each held is
 * held by one of the two afterwards. At most limit entries move (to then holds no more than
 * its capacity: the caller's count of it); *moved (if not NULL) says how
 * many. Both filters' key counts follow. BKV_OK, or BKV_INVALID (NULL, a
 * filter not made by bkv_filter_create, other types or bucket counts;
 * nothing moved). */
BKV_EXPORT int bkv_filter_move_entries(bkv_filter *from, bkv_filter *to, uint64_t limit, uint64_t *moved);

/* Adds a key while other threads may be probing the same filter or adding
 * to it: the bits are set with atomic read-modify-writes. Slower than
 * bkv_filter_add; meant for in-memory filters of live data such as a
 * memtable's. */
BKV_EXPORT int bkv_filter_add_concurrent(bkv_filter *f, bkv_hash h);

/* 1 if the key may be in the set, 0 if it certainly is not. Never 0 for an
 * added key. A NULL filter answers 1. */
BKV_EXPORT int bkv_filter_may_contain(const bkv_filter *f, bkv_hash h);

/* The same answer for n keys, one byte each in out[] (1 = maybe, 0 = no).
 * The memory of keys further on is requested while earlier keys are
 * tested, so that cache misses overlap instead of following one another:
 * much faster than n single probes once the filter is larger than the CPU
 * caches. */
BKV_EXPORT void bkv_filter_may_contain_batch(const bkv_filter *f, const bkv_hash *hashes,
                                             size_t n, uint8_t *out);

/* A hint: asks the CPU for the memory a probe of h will read first, so a
 * caller about to probe several filters overlaps their cache misses. No
 * effect on answers; a NULL filter or a type without a hint does nothing. */
BKV_EXPORT void bkv_filter_prefetch(const bkv_filter *f, bkv_hash h);

typedef struct bkv_filter_info {
    int      type;
    unsigned k;               /* probes per key */
    uint32_t hash_seed;
    uint64_t num_keys;        /* keys added (counting duplicates) */
    uint64_t num_bits;        /* m, the positions probes range over (bits, slots, cells, counters) */
    size_t   encoded_bytes;   /* size of the serialized form */
    double   bits_per_key;    /* payload bits / num_keys (0 when empty) */
    double   expected_fpr;    /* the model's false-positive rate at num_keys */
} bkv_filter_info;

BKV_EXPORT void bkv_filter_get_info(const bkv_filter *f, bkv_filter_info *info);

/* The model's false-positive rate of a filter of the given type, k and m
 * holding n keys: (1 - e^(-kn/m))^k for the standard Bloom filter, the
 * same averaged over the Poisson-distributed load of each line for the
 * blocked one. */
BKV_EXPORT double bkv_filter_model_fpr(int type, unsigned k, uint64_t num_bits, uint64_t n);

/* Serialized size, and serialization into dst (cap >= that size). */
BKV_EXPORT size_t bkv_filter_encoded_size(const bkv_filter *f);
BKV_EXPORT int bkv_filter_encode(const bkv_filter *f, void *dst, size_t cap);

/* Flags for bkv_filter_open(). */
enum {
    /* Skip the checksum pass (O(size)) when the bytes were already verified,
     * e.g. by the checksum of the file block that holds them. The structure
     * is still fully validated, so probing stays in bounds. */
    BKV_FILTER_OPEN_TRUSTED = 1u << 0,
    /* Copy the filter into memory of its own: buf may be freed as soon as
     * the call returns, and a dynamic type can be added to (or deleted
     * from) again, as before it was encoded. */
    BKV_FILTER_OPEN_COPY = 1u << 1
};

/* Validates a serialized filter of exactly len bytes and returns a read-only
 * handle probing it in place (zero copy; buf must outlive the handle),
 * or with BKV_FILTER_OPEN_COPY a writable copy. On
 * failure returns BKV_CORRUPTION (damaged or truncated bytes) or
 * BKV_INVALID (a version or type this library does not know), and, when
 * err is not NULL, writes a one-line reason naming the offending offset.
 * A caller that cannot open a filter must treat it as "maybe". */
BKV_EXPORT int bkv_filter_open(const void *buf, size_t len, unsigned flags, bkv_filter **out,
                               char *err, size_t errlen);

BKV_EXPORT void bkv_filter_destroy(bkv_filter *f);

/* ---- Range filters (type BKV_FILTER_RANGE) ----
 *
 * Built from n 64-bit keys (any order, duplicates allowed) at
 * bits_per_key B (3..66, the integer part counts), answering whether the
 * set may hold a key in [lo, hi]: 0 is certain, 1 may be a false
 * positive. For a range of length L (L = hi - lo + 1) the false-positive
 * rate is at most L / 2^(B-2) (bkv_filter_range_fpr_bound), for any
 * choice of ranges, including ranges that start just past a key; a range
 * longer than n * 2^(B-2) always answers 1. Keys map to the order of
 * their bytes by their first eight (big-endian, zero-padded: a variable
 * length key's prefix). seed varies the hashing between filters. It
 * serializes, validates and opens like every filter (bkv_filter_encode,
 * bkv_filter_open); point probes with a bkv_hash always answer 1, ask
 * bkv_filter_may_intersect(f, x, x) instead. Errors: BKV_INVALID (out
 * NULL, keys NULL with n > 0, B out of range), BKV_NOMEM. */
BKV_EXPORT int bkv_filter_build_range(const uint64_t *keys, size_t n, double bits_per_key, uint32_t seed,
                                      bkv_filter **out);
/* 1 when f may hold a key in [lo, hi] (always for a filter of another
 * type, or NULL), 0 when it certainly holds none (or lo > hi). */
BKV_EXPORT int bkv_filter_may_intersect(const bkv_filter *f, uint64_t lo, uint64_t hi);
/* bkv_filter_may_intersect(f, lo, hi) taken in steps, for a caller about
 * to ask several range filters: start a lookup on each, then run
 * bkv_filter_range_lookup_step BKV_FILTER_RANGE_STEPS times over all of
 * them, then take each one's answer. Each call asks the CPU for what the
 * lookup reads next (a sample of the filter's index, its upper bits, its
 * low bits) and reads only what the call before asked for, so the cache
 * misses of the filters overlap instead of following one another; the
 * answer goes on from where the steps stopped. The struct is the
 * caller's storage, nothing to free; its fields are private to the
 * library. f must live until the answer; another type, or NULL, answers
 * 1. The answer equals bkv_filter_may_intersect's, whatever steps ran. */
typedef struct bkv_range_lookup {
    const bkv_filter *filter;
    uint64_t lo, hi, first, pos;
    int answer, step;
} bkv_range_lookup;
#define BKV_FILTER_RANGE_STEPS 2
BKV_EXPORT void bkv_filter_range_lookup_start(bkv_range_lookup *q, const bkv_filter *f, uint64_t lo, uint64_t hi);
BKV_EXPORT void bkv_filter_range_lookup_step(bkv_range_lookup *q);
BKV_EXPORT int bkv_filter_range_lookup_answer(const bkv_range_lookup *q);
/* The bound on the false-positive rate for ranges of range_len + 1 keys
 * (at most 1; 0 when f keeps keys exactly; 1 for another type). */
BKV_EXPORT double bkv_filter_range_fpr_bound(const bkv_filter *f, uint64_t range_len);

/* A filter moved in pieces (a server dumping a large filter in chunks):
 * its encoded header, the first BKV_FILTER_HEADER_BYTES bytes of
 * bkv_filter_encode's output, describes it; its payload, the bytes probes
 * read, follows in any number of pieces. */
#define BKV_FILTER_HEADER_BYTES 64
/* The encoded header of f alone, as bkv_filter_encode writes it, into dst
 * (at least BKV_FILTER_HEADER_BYTES; BKV_INVALID otherwise): no payload
 * copied, no checksum computed. */
BKV_EXPORT int bkv_filter_encode_header(const bkv_filter *f, void *dst, size_t cap);
/* The payload of f and its length (owned by f, valid while f is). */
BKV_EXPORT const void *bkv_filter_payload(const bkv_filter *f, size_t *len);
/* A writable filter with the header's type and geometry, validated as
 * bkv_filter_open validates a header, and a zeroed payload: what the
 * header describes before any payload arrives. A payload longer than
 * max_payload bytes (the caller's bound, checked before anything is
 * allocated) is BKV_INVALID; a damaged header BKV_CORRUPTION; BKV_NOMEM.
 * err as for bkv_filter_open. */
BKV_EXPORT int bkv_filter_open_header(const void *header, size_t len, size_t max_payload, bkv_filter **out,
                                      char *err, size_t errlen);
/* Copies len bytes into f's payload at offset: BKV_INVALID unless f is
 * writable and the bytes lie within the payload. Any bytes are a filter
 * that probes safely; wrong ones only answer wrongly for their keys. */
BKV_EXPORT int bkv_filter_load_payload(bkv_filter *f, size_t offset, const void *data, size_t len);

/* Bytes of memory the handle holds: its structure, and its payload when
 * it has one of its own (not when it probes a caller's buffer in place). */
BKV_EXPORT size_t bkv_filter_memory(const bkv_filter *f);

#ifdef __cplusplus
}
#endif

#endif /* BLOOMKV_FILTER_H */
