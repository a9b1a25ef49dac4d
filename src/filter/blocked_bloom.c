/*
 * Cache-line blocked Bloom filter, after RocksDB's FastLocalBloom.
 *
 * The low 32 bits of the hash choose one 512-bit (64-byte) line; all k
 * probes fall inside it, their 9-bit offsets taken from the top of the high
 * 32 bits, which are remixed by a multiply with the golden-ratio constant
 * between probes. A negative query therefore costs one cache miss instead
 * of up to k, for about 0.1 percentage point of extra false positives at
 * 10 bits per key (see bkv_blocked_model_fpr).
 *
 * Probe schemes studied, at 10 bits per key over 10 M keys and
 * 10-20 M absent keys: "sim" is a simulation with splitmix64 hashes,
 * "bench" is bloomkv-bench filters on this build (negative probe ns, single / batch,
 * at 64 M keys):
 *
 *   scheme (k = 6 unless said)                 fpr       probe cost
 *   one line, golden-ratio multiply (this)     0.966-0.971%  31 / 9.6 ns (a41e5f8)
 *   one line, golden-ratio multiply, k = 7     0.972-0.974%  (sim)
 *   one line, independent probes               0.967%    (sim)
 *   one line, k distinct probes                0.955%    (sim; the
 *                                                         figure for RocksDB's
 *                                                         FastLocalBloom)
 *   one line, a + i b mod 512 (b odd)          1.089%    (sim: too few patterns)
 *   512-bit window on any 32-byte half-line    0.937-0.943%  35 / 14.2 ns
 *   512-bit window on any 8-byte word          0.932%    (sim)
 *
 * k distinct probes in one line is the floor of this layout, so 0.955%
 * cannot be beaten without leaving the line. Windows that start on a
 * half-line share a crowded line's load with its neighbours, but half of
 * them straddle two lines: single probes cost 3-10% more and batched ones
 * 48% more at 64 M keys (memory bandwidth: 1.5 lines a key), for 3% fewer
 * false positives, the worth of 0.06 bits per key. Built, measured and
 * not kept (a41e5f8).
 */
#include <math.h>

#include "filter/filter_int.h"
#include "util/hash.h"

#define LINE_BYTES 64
#define LINE_BITS 512
#define PROBE_MIX 0x9e3779b9u

static int blocked_size(bkv_filter *f, const bkv_filter_spec *spec, uint64_t n) {
    double bpk = spec->bits_per_key > 0 ? spec->bits_per_key : bkv_blocked_bits_for_fpr(spec->fpr);
    double lines = ceil((double)n * bpk / LINE_BITS);
    if (lines < 1) lines = 1;
    /* The line index is a 32-bit fastrange. */
    if (lines > (double)UINT32_MAX) return BKV_INVALID;
    f->k = bkv_blocked_best_k(bpk);
    f->num_lines = (uint64_t)lines;
    f->num_bits = f->num_lines * LINE_BITS;
    f->payload_len = (size_t)(f->num_lines * LINE_BYTES);
    return BKV_OK;
}

static inline const uint8_t *line_of(const bkv_filter *f, bkv_hash h) {
    return f->payload + (size_t)bkv_fastrange32(bkv_hash_lo(h), (uint32_t)f->num_lines) * LINE_BYTES;
}

static int blocked_add(bkv_filter *f, bkv_hash h, bool atomic) {
    uint8_t *line = (uint8_t *)line_of(f, h);
    uint32_t g = bkv_hash_hi(h);
    for (unsigned i = 0; i < f->k; i++) {
        uint32_t bit = g >> (32 - 9);
        bkv_payload_set(line, bit, atomic);
        g *= PROBE_MIX;
    }
    return BKV_OK;
}

/* Ways to test a line, picked by the filter's size (bloomkv-bench filters --type
 * blocked --keys N on this 2-core VM, alternated runs, absent keys, ns;
 * cd71840, before batches tested three bits first, below):
 *
 *   keys  filter   single: exit / branch-free   batch: exit / branch-free
 *   1 M   1.25 MB          16.7-21.8 / 9.3-12.0          12.8-15.1 / 7.7-9.2
 *   10 M  12.5 MB          20-27 (either)                13.4-16.8 / 21.2-26.0
 *   64 M  80 MB            27.5-41.3 / 37-49             13.5-18.3 / 21.4-28.9
 *
 * A line in cache is tested branch-free: all k bits cost less than a
 * mispredicted exit. A single probe of a line from memory leaves at its
 * first zero bit: while the line is on its way the processor runs on past
 * the exit into the caller's next steps, where testing every bit spent
 * its time on arithmetic. A batch's line from memory was requested keys
 * ago, and is tested as probe_line_three_first says. */
static inline int probe_line(const uint8_t *line, uint32_t g, unsigned k) {
    unsigned all = 1;
    for (unsigned i = 0; i < k; i++) {
        uint32_t bit = g >> (32 - 9);
        all &= bkv_payload_bit(line, bit);
        g *= PROBE_MIX;
    }
    return (int)(all & 1);
}

static inline int probe_line_exit(const uint8_t *line, uint32_t g, unsigned k) {
    for (unsigned i = 0; i < k; i++) {
        uint32_t bit = g >> (32 - 9);
        if (!bkv_payload_bit(line, bit)) return 0;
        g *= PROBE_MIX;
    }
    return 1;
}

/* A batch's test of a line from memory: the first three bits together,
 * then the rest. An absent key leaves at its first zero bit, whose place
 * is a coin toss per bit in a half-full line: the exit per bit above
 * mispredicts about once a key, which in a batch (the line already
 * requested, nothing to wait for) is most of the cost. All three of the
 * first bits are set for one absent key in eight, so this exit is
 * predicted. bloomkv-bench filters --type blocked --keys 64000000 --queries
 * 10000000, negative ns single / batch, ten alternated runs (cd71840):
 * exit per bit 28.5-39.7 / 13.5-17.3 (2.06-2.57x); three, then the rest
 * 28.9-41.8 / 9.9-15.1 (2.63-3.16x). The same test for single probes
 * measured 5-10% faster for absent keys and 10% slower for present ones,
 * and was left out. */
static inline int probe_line_three_first(const uint8_t *line, uint32_t g, unsigned k) {
    unsigned first = k < 3 ? k : 3;
    if (!probe_line(line, g, first)) return 0;
    for (unsigned i = 0; i < first; i++) g *= PROBE_MIX;
    return probe_line(line, g, k - first);
}

static int blocked_may_contain(const bkv_filter *f, bkv_hash h) {
    const uint8_t *line = line_of(f, h);
    return f->payload_len < BKV_FILTER_CACHED_BYTES ? probe_line(line, bkv_hash_hi(h), f->k)
                                                    : probe_line_exit(line, bkv_hash_hi(h), f->k);
}

static inline const uint8_t *prefetch_line(const bkv_filter *f, bkv_hash h) {
    const uint8_t *line = line_of(f, h);
    __builtin_prefetch(line);
    /* A filter opened over an unaligned buffer straddles two lines. */
    if (!f->aligned) __builtin_prefetch(line + LINE_BYTES - 1);
    return line;
}

/* A rolling window: the line of key i + BLOCKED_AHEAD is requested as key
 * i is tested, so about BLOCKED_AHEAD loads stay in flight. (Double-
 * buffered groups of 32, each requested whole before the previous one was
 * tested, measured 23 ns a key at 64 M keys against 10 for the window.) */
#define BLOCKED_AHEAD 32
static void blocked_may_contain_batch(const bkv_filter *f, const bkv_hash *h, size_t n,
                                      uint8_t *out) {
    const uint8_t *ring[BLOCKED_AHEAD];
    int cached = f->payload_len < BKV_FILTER_CACHED_BYTES;
    for (size_t i = 0; i < n && i < BLOCKED_AHEAD; i++) ring[i] = prefetch_line(f, h[i]);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *line = ring[i % BLOCKED_AHEAD];
        if (i + BLOCKED_AHEAD < n) ring[i % BLOCKED_AHEAD] = prefetch_line(f, h[i + BLOCKED_AHEAD]);
        out[i] = (uint8_t)(cached ? probe_line(line, bkv_hash_hi(h[i]), f->k)
                                  : probe_line_three_first(line, bkv_hash_hi(h[i]), f->k));
    }
}

static const char *blocked_check_geometry(bkv_filter *f) {
    if (f->filter_seed || f->params[0] || f->params[1] || f->params[2]) return "nonzero seed or parameters";
    if (f->k < 1 || f->k > BKV_FILTER_MAX_K) return "k out of range 1..30";
    if (f->num_bits == 0 || f->num_bits % LINE_BITS != 0) return "bit count not a positive multiple of 512";
    if (f->num_bits / LINE_BITS > UINT32_MAX) return "too many lines";
    if (f->payload_len != f->num_bits / 8) return "payload length does not match bit count";
    f->num_lines = f->num_bits / LINE_BITS;
    return NULL;
}

/* Written out: GCC drops a call to prefetch_line whose result is unused. */
static void blocked_prefetch(const bkv_filter *f, bkv_hash h) {
    const uint8_t *line = line_of(f, h);
    __builtin_prefetch(line);
    if (!f->aligned) __builtin_prefetch(line + LINE_BYTES - 1);
}

const bkv_filter_ops bkv_blocked_bloom_ops = {
    .type = BKV_FILTER_BLOCKED_BLOOM,
    .name = "blocked",
    .size = blocked_size,
    .add = blocked_add,
    .may_contain = blocked_may_contain,
    .may_contain_batch = blocked_may_contain_batch,
    .prefetch = blocked_prefetch,
    .check_geometry = blocked_check_geometry,
};
