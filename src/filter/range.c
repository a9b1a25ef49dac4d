/*
 * Range filter (type 11): does a set of 64-bit keys meet [lo, hi]?
 *
 * Grafite's design (Costa, Ferragina, Vinciguerra, SIGMOD 2024): keys are
 * hashed into a reduced universe [0, r) by a hash that keeps order inside
 * each aligned run of r values and moves each run by a random offset:
 *
 *   h(x) = (x mod r + g(x div r)) mod r,   g a seeded 64-bit mix into [0, r).
 *
 * A query range of length L <= r maps to at most two runs, so to at most
 * four intervals of [0, r); it may meet the set only if a stored value lies
 * in one of them. Two keys collide into an interval only when one of them
 * was moved there by g, which happens with probability at most L/r for
 * any fixed query, whatever the keys: with r = n * 2^(B-2) the false
 * positive rate of a range of length L is at most L / 2^(B-2) for B bits
 * per key, on correlated queries (a range starting just past a key) as on
 * uniform ones. A key itself is always found: no false negatives.
 *
 * The sorted distinct hashed values are stored with Elias-Fano: l low
 * bits each, packed, and the high parts in unary (an upper bitvector of
 * m ones and about m zeros), with the position of every 256th zero
 * sampled for select: B - 2 + about 2.25 bits per key in all.
 *
 * Payload (little-endian u64 words): upper bitvector (U bits, U = m +
 * (max >> l) + 1), zero samples (one word each: positions of zeros 0, 256,
 * 512, ...), low bits (m * l bits). Header: k = l, num_keys = keys given,
 * num_bits = U + m * l, filter_seed = g's seed, params = {m, r (0: the
 * whole 2^64, no reduction), U}.
 */
#include <stdlib.h>
#include <string.h>

#include "filter/filter_int.h"
#include "util/coding.h"

#define SAMPLE_EVERY 256

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

typedef struct geometry {
    uint64_t m, r, U, l, zeros, samples;
    size_t upper_words, low_words;
} geometry;

static void geometry_of(const bkv_filter *f, geometry *g) {
    g->m = f->params[0];
    g->r = f->params[1];
    g->U = f->params[2];
    g->l = f->k;
    g->zeros = g->U - g->m;
    g->samples = g->zeros / SAMPLE_EVERY + 1;
    g->upper_words = (size_t)((g->U + 63) / 64);
    g->low_words = (size_t)((g->m * g->l + 63) / 64);
}

/* h(x): the run's offset g is mapped into [0, r) by a multiply-high
 * (uniform like a modulo, without a second division). */
static uint64_t hash_into(uint64_t x, uint64_t r, uint32_t seed) {
    if (r == 0) return x; /* the whole universe: keys kept exactly */
    uint64_t run = x / r, off = x - run * r;
    uint64_t g = (uint64_t)(((unsigned __int128)mix(run ^ ((uint64_t)seed << 32 | seed)) * r) >> 64);
    return off >= r - g ? off - (r - g) : off + g;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts n values below 2^bits: least significant digit first, 11 bits a
 * pass (a table's keys arrive sorted, but the hash scatters them; qsort
 * was most of a build, about 250 ns a key). qsort when out of memory. */
static void sort_values(uint64_t *v, size_t n, unsigned bits) {
    uint64_t *tmp = n > 1024 ? malloc(n * sizeof *tmp) : NULL;
    if (!tmp) {
        qsort(v, n, sizeof *v, cmp_u64);
        return;
    }
    uint64_t *from = v, *to = tmp;
    for (unsigned shift = 0; shift < bits; shift += 11) {
        size_t count[2049] = {0};
        for (size_t i = 0; i < n; i++) count[((from[i] >> shift) & 2047) + 1]++;
        for (size_t d = 0; d < 2048; d++) count[d + 1] += count[d];
        for (size_t i = 0; i < n; i++) to[count[(from[i] >> shift) & 2047]++] = from[i];
        uint64_t *t = from;
        from = to;
        to = t;
    }
    if (from != v) memcpy(v, from, n * sizeof *v);
    free(tmp);
}

static uint64_t word(const bkv_filter *f, size_t i) { return bkv_get_u64(f->payload + 8 * i); }

static uint64_t low_bits(const bkv_filter *f, const geometry *g, uint64_t i) {
    if (g->l == 0) return 0;
    size_t base = g->upper_words + (size_t)g->samples;
    uint64_t bit = i * g->l, w = bit / 64, off = bit % 64;
    uint64_t v = word(f, base + (size_t)w) >> off;
    if (off + g->l > 64) v |= word(f, base + (size_t)w + 1) << (64 - off);
    return v & ((UINT64_C(1) << g->l) - 1);
}

/* Position in the upper bitvector of zero number k (0-based), or U when
 * there is none; every step stays inside the payload whatever it holds. */
static uint64_t select_zero(const bkv_filter *f, const geometry *g, uint64_t k) {
    if (k >= g->zeros) return g->U;
    uint64_t pos = word(f, g->upper_words + (size_t)(k / SAMPLE_EVERY));
    uint64_t left = k % SAMPLE_EVERY; /* zeros to pass after the sampled one */
    if (pos >= g->U) return g->U;     /* a damaged sample: no answer below U */
    for (uint64_t w = pos / 64; w < g->upper_words; w++) {
        uint64_t zeros = ~word(f, (size_t)w);
        if (w == pos / 64) zeros &= ~UINT64_C(0) << (pos % 64);
        if (w == g->upper_words - 1 && g->U % 64) zeros &= (UINT64_C(1) << (g->U % 64)) - 1;
        uint64_t c = (uint64_t)__builtin_popcountll(zeros);
        if (c > left) {
            while (left--) zeros &= zeros - 1;
            return w * 64 + (uint64_t)__builtin_ctzll(zeros);
        }
        left -= c;
    }
    return g->U;
}

/* Where the scan for values >= a starts in the upper bitvector: just
 * after zero high - 1 (a's high part is high), at 0 for high 0; U when no
 * value can be that large. */
static uint64_t scan_start(const bkv_filter *f, const geometry *g, uint64_t high) {
    return high == 0 ? 0 : select_zero(f, g, high - 1) + 1;
}

/* pos: where the scan for a value starts when a lookup's steps found it
 * already, else NO_POS. */
#define NO_POS UINT64_MAX

/* Whether a stored value lies in [a, b] (a <= b < r, or any a <= b when r
 * is the whole universe; m > 0), scanning from pos, scan_start of a's
 * high part (worked out here when NO_POS). */
static int any_in(const bkv_filter *f, const geometry *g, uint64_t a, uint64_t b, uint64_t pos) {
    if (pos == NO_POS) pos = scan_start(f, g, a >> g->l);
    uint64_t i = pos - (a >> g->l); /* ones before pos */
    while (pos < g->U && i < g->m) {
        /* The next one at or after pos: whole words of zeros skipped. */
        uint64_t ones = word(f, (size_t)(pos / 64)) >> (pos % 64);
        if (!ones) {
            pos = (pos / 64 + 1) * 64;
            continue;
        }
        pos += (uint64_t)__builtin_ctzll(ones);
        if (pos >= g->U) break;
        uint64_t v = (pos - i) << g->l | low_bits(f, g, i); /* pos - i: its high part */
        if (v >= a) return v <= b;
        i++, pos++;
    }
    return 0;
}

/* The interval [s, s + len] of [0, r), wrapping past r - 1; pos as any_in's
 * for s. */
static int any_in_cyclic(const bkv_filter *f, const geometry *g, uint64_t s, uint64_t len, uint64_t pos) {
    uint64_t room = g->r - 1 - s;
    if (len <= room) return any_in(f, g, s, s + len, pos);
    return any_in(f, g, s, g->r - 1, pos) || any_in(f, g, 0, len - room - 1, NO_POS);
}

double bkv_filter_range_fpr_bound(const bkv_filter *f, uint64_t range_len) {
    if (!f || f->ops->type != BKV_FILTER_RANGE) return 1.0;
    if (f->params[1] == 0) return 0.0; /* keys kept exactly */
    double p = ((double)range_len + 1.0) * (double)f->num_keys / (double)f->params[1];
    return p < 1.0 ? p : 1.0;
}

/* The answer for [lo, hi] (lo <= hi, m > 0). Every lookup first asks for
 * values from first = lo's place in [0, r) (lo itself when r is the
 * whole universe); pos is where that scan starts, or NO_POS. */
static int intersect(const bkv_filter *f, const geometry *g, uint64_t lo, uint64_t hi, uint64_t first, uint64_t pos) {
    if (g->r == 0) return any_in(f, g, lo, hi, pos);
    uint64_t len = hi - lo;
    if (lo / g->r == hi / g->r) return any_in_cyclic(f, g, first, len, pos);
    /* Two runs (len < r): the end of lo's, then the start of hi's. */
    uint64_t to_end = g->r - 1 - lo % g->r, from_start = hi % g->r;
    if (any_in_cyclic(f, g, first, to_end, pos)) return 1;
    uint64_t hhi = hash_into(hi, g->r, f->filter_seed);
    return any_in_cyclic(f, g, (hhi + g->r - from_start) % g->r, from_start, NO_POS);
}

/* Whether [lo, hi] needs the filter's bits: not when lo > hi or the
 * filter is empty (*answer 0), nor when the range is too long for the
 * bound (*answer 1). */
static int needs_lookup(const geometry *g, uint64_t lo, uint64_t hi, int *answer) {
    *answer = lo <= hi && g->m;
    return *answer && !(g->r && hi - lo >= g->r);
}

int bkv_filter_may_intersect(const bkv_filter *f, uint64_t lo, uint64_t hi) {
    if (!f || f->ops->type != BKV_FILTER_RANGE) return 1;
    geometry g;
    geometry_of(f, &g);
    int answer;
    if (!needs_lookup(&g, lo, hi, &answer)) return answer;
    return intersect(f, &g, lo, hi, g.r ? hash_into(lo, g.r, f->filter_seed) : lo, NO_POS);
}

/* A lookup's steps follow intersect's first loads: start asks for the
 * sample of the zero before the first value's high part, the first step
 * reads it and asks for the upper word it leads to, the second finds the
 * scan's start there and asks for the low bits of the value it meets;
 * answer goes on from that start. */
void bkv_filter_range_lookup_start(bkv_range_lookup *q, const bkv_filter *f, uint64_t lo, uint64_t hi) {
    *q = (bkv_range_lookup){.filter = f, .lo = lo, .hi = hi, .first = lo, .pos = NO_POS, .answer = 1, .step = 0};
    if (!f || f->ops->type != BKV_FILTER_RANGE) return; /* maybe, as bkv_filter_may_intersect says */
    geometry g;
    geometry_of(f, &g);
    if (!needs_lookup(&g, lo, hi, &q->answer)) return;
    q->step = 1;
    if (g.r) q->first = hash_into(lo, g.r, f->filter_seed);
    uint64_t high = q->first >> g.l;
    if (high == 0) {
        q->pos = 0;
        __builtin_prefetch(f->payload);
    } else if (high - 1 < g.zeros) {
        __builtin_prefetch(f->payload + 8 * (g.upper_words + (size_t)((high - 1) / SAMPLE_EVERY)));
    }
}

void bkv_filter_range_lookup_step(bkv_range_lookup *q) {
    if (q->step == 0 || q->step > BKV_FILTER_RANGE_STEPS || q->pos != NO_POS) return;
    const bkv_filter *f = q->filter;
    geometry g;
    geometry_of(f, &g);
    uint64_t high = q->first >> g.l;
    if (high - 1 >= g.zeros) return; /* no such zero: answer finds U at once */
    if (q->step++ == 1) {
        uint64_t at = word(f, g.upper_words + (size_t)((high - 1) / SAMPLE_EVERY));
        if (at < g.U) __builtin_prefetch(f->payload + 8 * (size_t)(at / 64));
        return;
    }
    q->pos = select_zero(f, &g, high - 1) + 1;
    if (q->pos < g.U) {
        uint64_t bit = (q->pos - high) * g.l; /* the low bits of the value at pos */
        __builtin_prefetch(f->payload + 8 * (g.upper_words + (size_t)g.samples + (size_t)(bit / 64)));
    }
}

int bkv_filter_range_lookup_answer(const bkv_range_lookup *q) {
    if (q->step == 0) return q->answer;
    geometry g;
    geometry_of(q->filter, &g);
    return intersect(q->filter, &g, q->lo, q->hi, q->first, q->pos);
}

int bkv_filter_build_range(const uint64_t *keys, size_t n, double bits_per_key, uint32_t seed, bkv_filter **out) {
    if (!out) return BKV_INVALID;
    *out = NULL;
    if ((n && !keys) || !(bits_per_key >= 3 && bits_per_key <= 66)) return BKV_INVALID;
    /* r = n * 2^(B-2), or the whole universe when that does not fit. */
    unsigned shift = (unsigned)bits_per_key - 2;
    uint64_t r = 0, nn = n ? (uint64_t)n : 1;
    if (shift < 64 && nn <= (UINT64_MAX >> shift)) r = nn << shift;
    uint64_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return BKV_NOMEM;
    for (size_t i = 0; i < n; i++) v[i] = hash_into(keys[i], r, seed);
    sort_values(v, n, r ? 64 - (unsigned)__builtin_clzll(r > 1 ? r - 1 : 1) : 64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[i] != v[m - 1]) v[m++] = v[i];
    /* l = floor(log2(universe / m)), at most 63: the universe is r, or
     * 2^64 (then 64 - ceil(log2 m)). */
    unsigned l = 0;
    if (m && r) {
        while (l < 63 && (r >> (l + 1)) >= m) l++;
    } else if (m) {
        unsigned ceil_log2 = m > 1 ? 64 - (unsigned)__builtin_clzll((uint64_t)m - 1) : 0;
        l = ceil_log2 ? 64 - ceil_log2 : 63;
    }
    bkv_filter *f = calloc(1, sizeof *f);
    if (!f) {
        free(v);
        return BKV_NOMEM;
    }
    f->ops = &bkv_range_ops;
    f->k = l;
    f->filter_seed = seed;
    f->num_keys = n;
    uint64_t max_high = m ? v[m - 1] >> l : 0;
    f->params[0] = m;
    f->params[1] = r;
    f->params[2] = m + max_high + 1;
    geometry g;
    geometry_of(f, &g);
    f->num_bits = g.U + g.m * g.l;
    f->payload_len = 8 * (g.upper_words + (size_t)g.samples + g.low_words);
    if (bkv_filter_alloc_payload(f)) {
        free(f);
        free(v);
        return BKV_NOMEM;
    }
    memset(f->payload, 0, f->payload_len);
    uint64_t *upper = calloc(g.upper_words ? g.upper_words : 1, sizeof *upper);
    uint64_t *low = calloc(g.low_words ? g.low_words : 1, sizeof *low);
    if (!upper || !low) {
        free(upper);
        free(low);
        free(v);
        bkv_filter_destroy(f);
        return BKV_NOMEM;
    }
    for (uint64_t i = 0; i < m; i++) {
        uint64_t high = v[i] >> l, q = high + i;
        upper[q / 64] |= UINT64_C(1) << (q % 64);
        if (l) {
            uint64_t lowv = v[i] & ((UINT64_C(1) << l) - 1), bit = i * l;
            low[bit / 64] |= lowv << (bit % 64);
            if (bit % 64 + l > 64) low[bit / 64 + 1] |= lowv >> (64 - bit % 64);
        }
    }
    for (size_t w = 0; w < g.upper_words; w++) bkv_put_u64(f->payload + 8 * w, upper[w]);
    /* Every 256th zero's position. */
    uint64_t zero = 0;
    for (uint64_t q = 0; q < g.U; q++)
        if (!((upper[q / 64] >> (q % 64)) & 1)) {
            if (zero % SAMPLE_EVERY == 0)
                bkv_put_u64(f->payload + 8 * (g.upper_words + (size_t)(zero / SAMPLE_EVERY)), q);
            zero++;
        }
    for (size_t w = 0; w < g.low_words; w++)
        bkv_put_u64(f->payload + 8 * (g.upper_words + (size_t)g.samples + w), low[w]);
    free(upper);
    free(low);
    free(v);
    *out = f;
    return BKV_OK;
}

/* Hashes mean nothing to a range filter: every point probe is "maybe";
 * bkv_filter_may_intersect(f, x, x) asks about a key. */
static int range_may_contain(const bkv_filter *f, bkv_hash h) {
    (void)f, (void)h;
    return 1;
}

static void range_may_contain_batch(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out) {
    (void)f, (void)h;
    memset(out, 1, n);
}

static const char *range_check_geometry(bkv_filter *f) {
    uint64_t m = f->params[0], r = f->params[1], U = f->params[2];
    if (f->k > 63) return "range filter: more than 63 low bits";
    if (U <= m) return "range filter: fewer upper bits than values and one zero";
    if (r && m > r) return "range filter: more values than its universe";
    if (f->k && m > UINT64_MAX / f->k) return "range filter: low bits overflow";
    if (U > (uint64_t)f->payload_len * 8) return "range filter: upper bits exceed the payload";
    geometry g;
    geometry_of(f, &g);
    uint64_t words = (uint64_t)g.upper_words + g.samples + g.low_words;
    if (words != (uint64_t)f->payload_len / 8 || f->payload_len % 8) return "range filter: payload size does not match";
    if (f->num_bits != U + m * f->k) return "range filter: bit count does not match";
    return NULL;
}

const bkv_filter_ops bkv_range_ops = {
    .type = BKV_FILTER_RANGE,
    .name = "range",
    .may_contain = range_may_contain,
    .may_contain_batch = range_may_contain_batch,
    .check_geometry = range_check_geometry,
};
