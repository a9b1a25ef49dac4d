/*
 * Standard Ribbon filter (Dillinger & Walzer, 2021), 128-bit bands.
 *
 * Every key gives a start slot s, a 128-bit coefficient row c (lowest bit
 * set) and an r-bit result; the filter stores a solution Z (r bits per
 * slot) of the linear system "XOR of Z over the slots c selects from s on
 * = result" over all keys. A query recomputes (s, c, result) and checks
 * the equation: a stored key always satisfies it, any other key with
 * probability 2^-r. Rows are banded (they only touch slots s..s+127), so
 * Gaussian elimination runs on the fly as keys arrive, in O(n) expected
 * time, and needs only a few percent more slots than keys.
 *
 * Layout: slots are grouped in blocks of 64; for each block the r result
 * columns are stored as r consecutive 64-bit words (bit i of word j = bit
 * j of slot 64*block + i). A query touches 3 consecutive blocks, i.e.
 * 3*r contiguous words.
 *
 * params[0] = number of slots m (a multiple of 64, >= 128); k = r;
 * filter_seed = the seed construction succeeded with. The payload has
 * m/64 + 1 blocks (the last one always zero) so a window never reads past
 * the end.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "filter/filter_int.h"
#include "util/alloc.h"
#include "util/coding.h"
#include "util/hash.h"

#define MAX_R 32
#define MAX_SEEDS 32

typedef unsigned __int128 u128;

typedef struct row {
    uint64_t start;
    u128 coeff;
    uint32_t result;
} row;

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The row of a key whose hash, remixed with the filter's seed, is a. */
static inline row row_of(uint64_t a, uint64_t slots, unsigned r) {
    uint64_t b = mix64(a ^ 0x5851f42d4c957f2dULL), c = mix64(b + 0x14057b7ef767814fULL);
    row w;
    w.start = bkv_fastrange64(a, slots - 127);
    w.coeff = ((u128)c << 64) | b | 1;
    w.result = (uint32_t)(mix64(a + 0x2545f4914f6cdd1dULL) >> 32) & (uint32_t)((1ull << r) - 1);
    return w;
}

static inline row make_row(bkv_hash h, uint32_t seed, uint64_t slots, unsigned r) {
    return row_of(bkv_filter_remix(h, seed), slots, r);
}

/* Inlined into the popcnt and plain versions alike (below). */
#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE unsigned parity128(u128 x) {
    return (unsigned)__builtin_parityll((uint64_t)x ^ (uint64_t)(x >> 64));
}

static inline unsigned ctz128(u128 x) {
    uint64_t lo = (uint64_t)x;
    return lo ? (unsigned)__builtin_ctzll(lo) : 64 + (unsigned)__builtin_ctzll((uint64_t)(x >> 64));
}

static inline uint64_t load_word(const uint8_t *p) { return bkv_get_u64(p); }

/* Each column's check ends in a parity; without the popcnt instruction
 * (not in the x86-64 baseline this library is built for) it is a dozen
 * shifts and XORs. The probes and the back substitution are therefore
 * compiled twice, with and without it, and pick one by the processor at
 * each call (a predicted branch). Not by ifunc (target_clones): its
 * resolvers run before ThreadSanitizer's runtime is ready. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define POPCNT_TARGET __attribute__((target("popcnt")))
#define HAVE_POPCNT() __builtin_cpu_supports("popcnt")
#else
#define POPCNT_TARGET
#define HAVE_POPCNT() 0
#endif
/* The coefficient is shifted to the window's offset once, as three words
 * aligned with the three blocks the window spans; each result column is
 * then three loads, three ANDs and a parity, where shifting the window
 * cost four funnel shifts per column. The first three columns are
 * checked together, then the rest: an absent key's first wrong column is
 * a coin toss per column, so an exit after each one mispredicted about
 * once a key, while all three of the first are right for one absent key
 * in eight, an exit that is predicted. bloomkv-bench filters --type ribbon --fpr
 * 0.0078 --queries 5000000, absent keys, ns single / batch, three
 * alternated runs (460cf97): 10 M keys 44.2-61.4 / 27.8-38.1 with an
 * exit per column, 35.8-49.3 / 21.1-32.5 three first; 1 M 31.9-32.0 /
 * 28.7-30.4 and 20.8-30.6 / 19.1-28.1; 100 k 30.3-37.8 / 27.9-33.8 and
 * 19.9-26.3 / 17.9-20.1. (Every column without a branch, 460cf97, was
 * 7% faster than the exit per column in cache but 1.2x slower at 10 M:
 * it waits for all four lines of the window.) */
static ALWAYS_INLINE int row_matches(const bkv_filter *f, const row *w) {
    unsigned r = f->k, off = (unsigned)(w->start % 64);
    uint64_t lo = (uint64_t)w->coeff, hi = (uint64_t)(w->coeff >> 64);
    uint64_t c0 = lo << off, c1 = off ? (hi << off) | (lo >> (64 - off)) : hi, c2 = off ? hi >> (64 - off) : 0;
    const uint8_t *p = f->payload + (w->start / 64) * r * 8;
    unsigned wrong = 0, j = 0;
#define CHECK_COLUMN(j)                                                                                           \
    wrong |= (unsigned)__builtin_parityll((load_word(p + 8 * (j)) & c0) ^ (load_word(p + 8 * (r + (j))) & c1) ^ \
                                          (load_word(p + 8 * (2 * r + (j))) & c2)) ^                          \
             ((w->result >> (j)) & 1)
    for (; j < r && j < 3; j++) CHECK_COLUMN(j);
    if (wrong) return 0;
    for (; j < r; j++) CHECK_COLUMN(j);
#undef CHECK_COLUMN
    return !wrong;
}

static ALWAYS_INLINE int may_contain_body(const bkv_filter *f, bkv_hash h) {
    row w = make_row(h, f->filter_seed, f->params[0], f->k);
    return row_matches(f, &w);
}
POPCNT_TARGET static int may_contain_popcnt(const bkv_filter *f, bkv_hash h) { return may_contain_body(f, h); }
static int may_contain_plain(const bkv_filter *f, bkv_hash h) { return may_contain_body(f, h); }
static int ribbon_may_contain(const bkv_filter *f, bkv_hash h) {
    return HAVE_POPCNT() ? may_contain_popcnt(f, h) : may_contain_plain(f, h);
}

/* Requests every line of w's window (3 x r words, up to four lines). */
#define RIBBON_REQUEST(f, w)                                                      \
    do {                                                                          \
        const uint8_t *p_ = (f)->payload + ((w).start / 64) * (f)->k * 8;          \
        size_t span_ = 3 * (size_t)(f)->k * 8;                                    \
        for (size_t off_ = 0; off_ < span_; off_ += 64) __builtin_prefetch(p_ + off_); \
        __builtin_prefetch(p_ + span_ - 1);                                       \
    } while (0)

static void ribbon_prefetch(const bkv_filter *f, bkv_hash h) {
    row w = make_row(h, f->filter_seed, f->params[0], f->k);
    RIBBON_REQUEST(f, w);
}

/* A key's window is prefetched a few keys ahead, each row computed once.
 * Below 4 MiB the filter sits in cache and a plain loop is faster. */
#define RIBBON_AHEAD 8
static ALWAYS_INLINE void batch_body(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out) {
    if (f->payload_len < BKV_FILTER_CACHED_BYTES) {
        for (size_t i = 0; i < n; i++) out[i] = (uint8_t)may_contain_body(f, h[i]);
        return;
    }
    row ring[RIBBON_AHEAD];
    for (size_t i = 0; i < n + RIBBON_AHEAD; i++) {
        if (i >= RIBBON_AHEAD) out[i - RIBBON_AHEAD] = (uint8_t)row_matches(f, &ring[(i - RIBBON_AHEAD) % RIBBON_AHEAD]);
        if (i < n) {
            row w = make_row(h[i], f->filter_seed, f->params[0], f->k);
            RIBBON_REQUEST(f, w);
            ring[i % RIBBON_AHEAD] = w;
        }
    }
}
POPCNT_TARGET static void batch_popcnt(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out) {
    batch_body(f, h, n, out);
}
static void batch_plain(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out) { batch_body(f, h, n, out); }
static void ribbon_may_contain_batch(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out) {
    if (HAVE_POPCNT()) batch_popcnt(f, h, n, out);
    else batch_plain(f, h, n, out);
}

/* Slots for n keys: a few percent more than n keeps construction failures
 * rare (the band needs slack to absorb local crowding), more for small n
 * where crowding weighs more. Provenance: Dillinger & Walzer, "Ribbon
 * filter: practically smaller than Bloom and Xor" (2021), give the space
 * overhead of standard Ribbon with 128-bit bands as a few percent growing
 * slowly with n; the steps here were tuned at 8ff5ada so that
 * bloomkv-bench filters sees build retries below 1% at every size from 1 k to
 * 64 M keys (docs/design.md, Filters). The "/ 1.04" in the bits-per-key
 * conversion below is the same overhead, taken as its mid value. */
static uint64_t slots_for(size_t n) {
    double overhead = n < 1000 ? 0.25 : n < 100000 ? 0.08 : n < 2000000 ? 0.04 : n < 20000000 ? 0.05 : 0.06;
    uint64_t m = (uint64_t)ceil((double)n * (1.0 + overhead)) + 128;
    return (m + 63) / 64 * 64;
}

/* On-the-fly banding of the remixed hashes a (sorted by start, roughly);
 * 0 when the system has no solution for this seed. A row touches only
 * slots start..start+127, so the arrays are zeroed a chunk at a time just
 * ahead of the rows, while the chunk will stay in cache (the coefficients
 * held the sort's scratch, and both arrays the rows of a seed that
 * failed). */
#define ZERO_AHEAD 4096
static void zero_slots(u128 *coeff, uint32_t *result, uint64_t from, uint64_t to) {
    memset(coeff + from, 0, (to - from) * sizeof *coeff);
    memset(result + from, 0, (to - from) * sizeof *result);
}

static int band(const uint64_t *a, size_t n, uint64_t m, unsigned r, u128 *coeff, uint32_t *result) {
    uint64_t zeroed = 0;
    for (size_t i = 0; i < n; i++) {
        row w = row_of(a[i], m, r);
        uint64_t s = w.start; /* s + 128 <= m */
        if (zeroed < s + 128) {
            uint64_t to = m - (s + 128) > ZERO_AHEAD ? s + 128 + ZERO_AHEAD : m;
            zero_slots(coeff, result, zeroed, to);
            zeroed = to;
        }
        u128 c = w.coeff;
        uint32_t res = w.result;
        for (;;) {
            if (coeff[s] == 0) {
                coeff[s] = c;
                result[s] = res;
                break;
            }
            c ^= coeff[s];
            res ^= result[s];
            if (c == 0) {
                if (res != 0) return 0; /* contradiction */
                break;                  /* redundant: a duplicate key */
            }
            unsigned tz = ctz128(c);
            s += tz;
            c >>= tz;
        }
    }
    zero_slots(coeff, result, zeroed, m);
    return 1;
}

/* Back substitution, last slot first; free slots get 0. */
static ALWAYS_INLINE void solve_body(bkv_filter *f, const u128 *coeff, const uint32_t *result) {
    uint64_t m = f->params[0];
    unsigned r = f->k;
    u128 state[MAX_R] = {0};
    uint64_t words[MAX_R] = {0};
    for (uint64_t i = m; i-- > 0;) {
        for (unsigned j = 0; j < r; j++) {
            state[j] <<= 1;
            unsigned z = coeff[i] ? parity128(state[j] & coeff[i]) ^ ((result[i] >> j) & 1) : 0;
            state[j] |= z;
            words[j] |= (uint64_t)z << (i % 64);
        }
        if (i % 64 == 0) {
            uint8_t *p = f->payload + (i / 64) * r * 8;
            for (unsigned j = 0; j < r; j++) {
                bkv_put_u64(p + 8 * j, words[j]);
                words[j] = 0;
            }
        }
    }
}

POPCNT_TARGET static void solve_popcnt(bkv_filter *f, const u128 *coeff, const uint32_t *result) {
    solve_body(f, coeff, result);
}
static void solve_plain(bkv_filter *f, const u128 *coeff, const uint32_t *result) { solve_body(f, coeff, result); }

static int ribbon_build(bkv_filter *f, const bkv_filter_spec *spec, const bkv_hash *h, size_t n) {
    int r;
    if (spec->bits_per_key > 0) r = (int)floor(spec->bits_per_key / 1.04);
    else r = (int)lround(-log2(spec->fpr));
    if (r < 1) r = 1;
    if (r > MAX_R) r = MAX_R;
    uint64_t m = slots_for(n);
    f->k = (unsigned)r;
    f->params[0] = m;
    f->num_bits = m * (uint64_t)r;
    f->payload_len = (size_t)((m / 64 + 1) * (uint64_t)r * 8);
    size_t coeff_len = m * sizeof(u128), result_len = m * sizeof(uint32_t), a_len = (n ? n : 1) * sizeof(uint64_t);
    u128 *coeff = bkv_alloc_scratch(coeff_len);
    uint32_t *result = bkv_alloc_scratch(result_len);
    uint64_t *a = bkv_alloc_scratch(a_len);
    int rc = coeff && result && a ? BKV_FULL : BKV_NOMEM;
    for (uint32_t seed = 0; rc == BKV_FULL && seed < MAX_SEEDS; seed++) {
        /* A row's start slot grows with its remixed hash (fastrange is
         * monotonic): banding keys sorted by their top bits walks the
         * coefficient array front to back instead of jumping across it for
         * every key, which was three quarters of the build at 10 M keys.
         * The sort borrows the coefficient array (m > n slots) as buffer. */
        for (size_t i = 0; i < n; i++) a[i] = bkv_filter_remix(h[i], seed);
        bkv_sort_by_top_bits(a, n, (uint64_t *)coeff);
        if (!band(a, n, m, (unsigned)r, coeff, result)) continue;
        f->filter_seed = seed;
        rc = bkv_filter_alloc_payload(f);
        if (rc == BKV_OK) {
            if (HAVE_POPCNT()) solve_popcnt(f, coeff, result);
            else solve_plain(f, coeff, result);
        }
    }
    bkv_free_scratch(coeff, coeff_len), bkv_free_scratch(result, result_len), bkv_free_scratch(a, a_len);
    return rc;
}

static const char *ribbon_check_geometry(bkv_filter *f) {
    uint64_t m = f->params[0];
    if (f->k < 1 || f->k > MAX_R) return "result bits out of range 1..32";
    if (m < 128 || m % 64 || m > (UINT64_C(1) << 40)) return "bad slot count";
    if (f->params[1] || f->params[2]) return "nonzero parameters";
    if (f->num_bits != m * f->k) return "bit count does not match slots";
    if (f->payload_len != (m / 64 + 1) * f->k * 8) return "payload length does not match slots";
    return NULL;
}

const bkv_filter_ops bkv_ribbon_ops = {
    .type = BKV_FILTER_RIBBON,
    .name = "ribbon",
    .build = ribbon_build,
    .may_contain = ribbon_may_contain,
    .may_contain_batch = ribbon_may_contain_batch,
    .prefetch = ribbon_prefetch,
    .check_geometry = ribbon_check_geometry,
};
