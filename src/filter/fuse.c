/*
 * Xor filters (Graf & Lemire, 2019) and binary fuse filters (Graf &
 * Lemire, 2022): every key maps to three cells of a fingerprint array,
 * and the array is filled so that the XOR of a key's three cells equals
 * its fingerprint. A query is three loads and two XORs; the
 * false-positive rate is 2^-bits.
 *
 * Construction is "peeling": count the keys of each cell, repeatedly take
 * a cell holding exactly one key off the structure (remembering it), and
 * finally assign cells in reverse order, each to the one value that
 * satisfies its key. Peeling fails when a core of cells with two or more
 * keys remains; a new seed almost always fixes it. Two equal hashes always
 * form such a core, so after a first failure the hashes are sorted and
 * deduplicated (in a private copy) before retrying.
 *
 * Xor: three equal blocks of 1.23 n + 32 cells in all, one cell in each.
 * Binary fuse: the array is cut into segments of a power-of-two length;
 * a key's three cells lie in three consecutive segments, which lets
 * peeling succeed with only ~12.5% extra cells for large n.
 *
 * params: xor: [0] block length. fuse: [0] segment length, [1] segment
 * count x segment length, [2] array length. k = fingerprint bits;
 * filter_seed = the seed construction succeeded with.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "filter/filter_int.h"
#include "util/alloc.h"
#include "util/coding.h"
#include "util/hash.h"

#define MAX_SEEDS 100

typedef struct cells {
    uint64_t h[3];
} cells;

static inline uint64_t fp_of(uint64_t x) { return x ^ (x >> 32); }

static inline cells xor_cells(const bkv_filter *f, uint64_t x) {
    uint64_t bl = f->params[0];
    cells c;
    c.h[0] = bkv_fastrange32((uint32_t)x, (uint32_t)bl);
    c.h[1] = bl + bkv_fastrange32((uint32_t)bkv_rotl64(x, 21), (uint32_t)bl);
    c.h[2] = 2 * bl + bkv_fastrange32((uint32_t)bkv_rotl64(x, 42), (uint32_t)bl);
    return c;
}

static inline cells fuse_cells(const bkv_filter *f, uint64_t x) {
    uint64_t seg = f->params[0], mask = seg - 1;
    cells c;
    c.h[0] = bkv_fastrange64(x, f->params[1]);
    c.h[1] = c.h[0] + seg;
    c.h[2] = c.h[1] + seg;
    c.h[1] ^= (x >> 18) & mask;
    c.h[2] ^= x & mask;
    return c;
}

static inline int is_fuse(const bkv_filter *f) { return f->ops->type != BKV_FILTER_XOR8; }

static inline cells cells_of(const bkv_filter *f, uint64_t x) { return is_fuse(f) ? fuse_cells(f, x) : xor_cells(f, x); }

static inline uint32_t cell_get(const bkv_filter *f, uint64_t i) {
    return f->k == 8 ? f->payload[i] : bkv_get_u16(f->payload + 2 * i);
}

static inline void cell_set(bkv_filter *f, uint64_t i, uint32_t v) {
    if (f->k == 8) f->payload[i] = (uint8_t)v;
    else bkv_put_u16(f->payload + 2 * i, (uint16_t)v);
}

static int fuse_may_contain(const bkv_filter *f, bkv_hash h) {
    uint64_t x = bkv_filter_remix(h, f->filter_seed);
    cells c = cells_of(f, x);
    uint32_t mask = (uint32_t)((1u << f->k) - 1);
    return ((uint32_t)fp_of(x) & mask) == (cell_get(f, c.h[0]) ^ cell_get(f, c.h[1]) ^ cell_get(f, c.h[2]));
}

/* A query is three independent loads, which the processor already
 * overlaps across consecutive queries of a loop; prefetching a group of
 * keys first only recomputed their cells (batches measured 1.7x slower
 * than single probes at 10 M keys). So the cells are computed once, and
 * the loads issued a few keys ahead of their use. */
#define FUSE_AHEAD 16
static void fuse_may_contain_batch(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out) {
    if (f->payload_len < BKV_FILTER_CACHED_BYTES) {
        for (size_t i = 0; i < n; i++) out[i] = (uint8_t)fuse_may_contain(f, h[i]);
        return;
    }
    unsigned w = f->k / 8;
    uint32_t mask = (uint32_t)((1u << f->k) - 1);
    cells ring[FUSE_AHEAD];
    uint32_t fps[FUSE_AHEAD];
    for (size_t i = 0; i < n + FUSE_AHEAD; i++) {
        if (i >= FUSE_AHEAD) {
            size_t q = i - FUSE_AHEAD;
            const cells *c = &ring[q % FUSE_AHEAD];
            out[q] = (uint8_t)(fps[q % FUSE_AHEAD] ==
                               (cell_get(f, c->h[0]) ^ cell_get(f, c->h[1]) ^ cell_get(f, c->h[2])));
        }
        if (i < n) {
            uint64_t x = bkv_filter_remix(h[i], f->filter_seed);
            cells c = cells_of(f, x);
            for (int j = 0; j < 3; j++) __builtin_prefetch(f->payload + c.h[j] * w);
            ring[i % FUSE_AHEAD] = c;
            fps[i % FUSE_AHEAD] = (uint32_t)fp_of(x) & mask;
        }
    }
}

/* Geometry for n keys. */
static void size_xor(bkv_filter *f, size_t n) {
    uint64_t capacity = (uint64_t)(32 + ceil(1.23 * (double)n));
    f->params[0] = capacity / 3;
    f->params[1] = f->params[2] = 0;
    f->num_bits = 3 * f->params[0];
}

/* Binary fuse sizing for arity 3, as published by Graf & Lemire, "Binary
 * Fuse Filters: Fast and Smaller Than Xor Filters" (JEA 2022), and their
 * reference implementation: segment length 2^floor(log_3.33(n) + 2.25)
 * capped at 2^18, and a size factor max(1.125, 0.875 + 0.25 ln(10^6) /
 * ln(n)) of n slots; the xor filter above uses their 1.23 n + 32. */
static void size_fuse(bkv_filter *f, size_t n) {
    double dn = (double)n;
    uint64_t seg = n > 1 ? UINT64_C(1) << (unsigned)floor(log(dn) / log(3.33) + 2.25) : 4;
    if (seg > (1u << 18)) seg = 1u << 18;
    double factor = n > 1 ? fmax(1.125, 0.875 + 0.25 * log(1e6) / log(dn)) : 0;
    uint64_t capacity = n > 1 ? (uint64_t)round(dn * factor) : 0;
    uint64_t count = (capacity + seg - 1) / seg;
    count = count > 2 ? count - 2 : 1;
    f->params[0] = seg;
    f->params[1] = count * seg;
    f->params[2] = (count + 2) * seg;
    f->num_bits = f->params[2];
}

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Peels keys (remixed) off the cells; on success fills the array. Per
 * cell, deg holds 4 x (keys on it) plus the XOR of which of their three
 * cells it is (0, 1 or 2), and xorh the XOR of their keys: a cell left
 * with one key names the key and its position at once. (One byte of deg
 * apart from xorh beats a 16-byte cell holding both: the counting pass
 * reads less; and beats an 8-byte cell holding the count and the XOR of
 * the keys' indices, whose peeling must then load the key itself.) keys
 * are only read by the counting pass, so the order of peeling is written
 * over them. Scratch: deg and xorh of the array's length, pos_of of n,
 * queue of the array's length.
 *
 * Each pass works on the keys PEEL_AHEAD positions ahead of the one it
 * handles, so that their cache misses overlap: an xor filter's cells, and
 * a binary fuse filter's beyond the second-level cache, are met at random.
 * That is why the queue of cells left with one key is taken first in,
 * first out: the cells to be peeled next are known in advance. */
#define PEEL_AHEAD 16

/* A macro, not a function: GCC judges a function that only prefetches
 * free of side effects and drops the calls. */
#define PREFETCH_CELLS(f, x, deg, xorh)                 \
    do {                                                \
        cells pc_ = cells_of((f), (x));                 \
        for (unsigned pj_ = 0; pj_ < 3; pj_++) {        \
            __builtin_prefetch((deg) + pc_.h[pj_], 1);  \
            __builtin_prefetch((xorh) + pc_.h[pj_], 1); \
        }                                               \
    } while (0)

static int peel(bkv_filter *f, uint64_t *keys, size_t n, uint8_t *deg, uint64_t *xorh, uint8_t *pos_of,
                uint32_t *queue) {
    uint64_t len = f->num_bits;
    memset(deg, 0, len);
    memset(xorh, 0, len * sizeof *xorh);
    for (size_t i = 0; i < n; i++) {
        if (i + PEEL_AHEAD < n) PREFETCH_CELLS(f, keys[i + PEEL_AHEAD], deg, xorh);
        cells c = cells_of(f, keys[i]);
        for (unsigned j = 0; j < 3; j++) {
            if (deg[c.h[j]] >= 252) return 0; /* 63 keys on one cell: a bad seed */
            deg[c.h[j]] = (uint8_t)((deg[c.h[j]] + 4) ^ j);
            xorh[c.h[j]] ^= keys[i];
        }
    }
    uint64_t *stack_key = keys;
    size_t qn = 0, sn = 0;
    for (uint64_t i = 0; i < len; i++)
        if (deg[i] >> 2 == 1) queue[qn++] = (uint32_t)i;
    for (size_t head = 0; head < qn; head++) {
        if (head + PEEL_AHEAD < qn) {
            __builtin_prefetch(deg + queue[head + PEEL_AHEAD], 1);
            __builtin_prefetch(xorh + queue[head + PEEL_AHEAD], 1);
        }
        if (head + PEEL_AHEAD / 2 < qn) PREFETCH_CELLS(f, xorh[queue[head + PEEL_AHEAD / 2]], deg, xorh);
        uint32_t cell = queue[head];
        if (deg[cell] >> 2 != 1) continue;
        uint64_t x = xorh[cell];
        unsigned pos = deg[cell] & 3;
        stack_key[sn] = x;
        pos_of[sn++] = (uint8_t)pos;
        cells c = cells_of(f, x);
        for (unsigned j = 0; j < 3; j++) {
            uint64_t o = c.h[j];
            deg[o] = (uint8_t)((deg[o] - 4) ^ j);
            xorh[o] ^= x;
            if (j != pos && deg[o] >> 2 == 1) queue[qn++] = (uint32_t)o;
        }
    }
    if (sn != n) return 0;
    memset(f->payload, 0, f->payload_len);
    uint32_t mask = (uint32_t)((1u << f->k) - 1);
    unsigned width = f->k / 8;
    while (sn-- > 0) {
        if (sn >= PEEL_AHEAD) {
            cells c = cells_of(f, stack_key[sn - PEEL_AHEAD]);
            for (unsigned j = 0; j < 3; j++) __builtin_prefetch(f->payload + c.h[j] * width, 1);
        }
        uint64_t x = stack_key[sn];
        unsigned pos = pos_of[sn];
        cells c = cells_of(f, x);
        uint32_t v = (uint32_t)fp_of(x) & mask;
        for (unsigned j = 0; j < 3; j++)
            if (j != pos) v ^= cell_get(f, c.h[j]);
        cell_set(f, c.h[pos], v);
    }
    return 1;
}

/* The keys remixed with seed into keys[], bucketed by the bits that place
 * their first cell (a fuse key's top bits, an xor key's low word), so the
 * counting and peeling passes walk that cell array front to back instead
 * of at random, as the binary fuse paper's construction does. 2^10
 * buckets: the scatter's write streams stay in the first-level cache
 * (2^16 measured slower), and a bucket's cells span a few KB at any n. */
#define FUSE_SORT_BITS 10
static inline size_t first_cell_bucket(const bkv_filter *f, uint64_t x) {
    return is_fuse(f) ? (size_t)(x >> (64 - FUSE_SORT_BITS)) : (size_t)((uint32_t)x >> (32 - FUSE_SORT_BITS));
}

static void remix_keys(const bkv_filter *f, const bkv_hash *in, size_t m, uint32_t seed, uint64_t *keys) {
    if (m < 4096) {
        for (size_t i = 0; i < m; i++) keys[i] = bkv_filter_remix(in[i], seed);
        return;
    }
    size_t count[(1u << FUSE_SORT_BITS) + 1] = {0};
    for (size_t i = 0; i < m; i++) count[first_cell_bucket(f, bkv_filter_remix(in[i], seed)) + 1]++;
    for (size_t b = 0; b < (1u << FUSE_SORT_BITS); b++) count[b + 1] += count[b];
    for (size_t i = 0; i < m; i++) {
        uint64_t x = bkv_filter_remix(in[i], seed);
        keys[count[first_cell_bucket(f, x)]++] = x;
    }
}

static int fuse_build_common(bkv_filter *f, const bkv_hash *h, size_t n, unsigned bits) {
    f->k = bits;
    if (is_fuse(f)) size_fuse(f, n);
    else size_xor(f, n);
    uint64_t len = f->num_bits;
    if (len > UINT32_MAX) return BKV_INVALID; /* cells are numbered in 32 bits while building */
    f->payload_len = (size_t)(len * bits / 8);
    int rc = bkv_filter_alloc_payload(f);
    if (rc) return rc;
    size_t nn = n ? n : 1, ln = len ? len : 1;
    size_t keys_len = nn * sizeof(uint64_t), xorh_len = ln * sizeof(uint64_t), queue_len = ln * sizeof(uint32_t);
    uint64_t *keys = bkv_alloc_scratch(keys_len), *uniq = NULL;
    uint8_t *deg = bkv_alloc_scratch(ln), *spos = malloc(nn);
    uint64_t *xorh = bkv_alloc_scratch(xorh_len);
    uint32_t *queue = bkv_alloc_scratch(queue_len);
    rc = keys && deg && spos && xorh && queue ? BKV_FULL : BKV_NOMEM;
    /* Duplicates are removed from the input hashes once, the first time
     * peeling fails, and for good: equal hashes stay equal under any seed. */
    const bkv_hash *in = h;
    size_t m = n;
    for (uint32_t seed = 0; rc == BKV_FULL && seed < MAX_SEEDS; seed++) {
        remix_keys(f, in, m, seed, keys);
        if (peel(f, keys, m, deg, xorh, spos, queue)) {
            f->filter_seed = seed;
            rc = BKV_OK;
        } else if (in == h) {
            if (!(uniq = malloc(nn * sizeof *uniq))) {
                rc = BKV_NOMEM;
                break;
            }
            memcpy(uniq, h, n * sizeof *uniq);
            qsort(uniq, n, sizeof *uniq, by_value);
            size_t u = 0;
            for (size_t i = 0; i < n; i++)
                if (i == 0 || uniq[i] != uniq[i - 1]) uniq[u++] = uniq[i];
            in = uniq;
            m = u;
            seed--; /* the same seed again, without duplicates */
        }
    }
    bkv_free_scratch(keys, keys_len), bkv_free_scratch(deg, ln), bkv_free_scratch(xorh, xorh_len);
    bkv_free_scratch(queue, queue_len), free(uniq), free(spos);
    return rc;
}

static int fuse8_build(bkv_filter *f, const bkv_filter_spec *spec, const bkv_hash *h, size_t n) {
    (void)spec;
    return fuse_build_common(f, h, n, 8);
}

static int fuse16_build(bkv_filter *f, const bkv_filter_spec *spec, const bkv_hash *h, size_t n) {
    (void)spec;
    return fuse_build_common(f, h, n, 16);
}

static const char *check_common(bkv_filter *f, unsigned bits) {
    if (f->k != bits) return "fingerprint bits do not match the type";
    if (f->payload_len != f->num_bits * bits / 8) return "payload length does not match cell count";
    return NULL;
}

static const char *xor_check_geometry(bkv_filter *f) {
    uint64_t bl = f->params[0];
    if (bl == 0 || bl > UINT32_MAX || f->params[1] || f->params[2]) return "bad block length";
    if (f->num_bits != 3 * bl) return "cell count does not match block length";
    return check_common(f, 8);
}

static const char *fuse_check_geometry(bkv_filter *f, unsigned bits) {
    uint64_t seg = f->params[0], scl = f->params[1], len = f->params[2];
    if (seg == 0 || (seg & (seg - 1)) || seg > (1u << 18)) return "segment length not a power of two";
    if (scl == 0 || scl % seg || len != scl + 2 * seg) return "segment counts do not fit";
    if (f->num_bits != len) return "cell count does not match the array";
    return check_common(f, bits);
}

static const char *fuse8_check(bkv_filter *f) { return fuse_check_geometry(f, 8); }
static const char *fuse16_check(bkv_filter *f) { return fuse_check_geometry(f, 16); }

const bkv_filter_ops bkv_fuse8_ops = {
    .type = BKV_FILTER_FUSE8, .name = "fuse8", .build = fuse8_build, .may_contain = fuse_may_contain,
    .may_contain_batch = fuse_may_contain_batch, .check_geometry = fuse8_check,
};

const bkv_filter_ops bkv_fuse16_ops = {
    .type = BKV_FILTER_FUSE16, .name = "fuse16", .build = fuse16_build, .may_contain = fuse_may_contain,
    .may_contain_batch = fuse_may_contain_batch, .check_geometry = fuse16_check,
};

const bkv_filter_ops bkv_xor8_ops = {
    .type = BKV_FILTER_XOR8, .name = "xor8", .build = fuse8_build, .may_contain = fuse_may_contain,
    .may_contain_batch = fuse_may_contain_batch, .check_geometry = xor_check_geometry,
};
