/* False-positive models. They size filters (choice of k and bits) and give
 * the "theory" figures bloomkv-bench filters prints beside its measurements. */
#include <math.h>

#include "filter/filter_int.h"

#define LINE_BITS 512.0

double bkv_bloom_model_fpr(unsigned k, uint64_t m, uint64_t n) {
    if (n == 0) return 0.0;
    if (m == 0) return 1.0;
    return pow(1.0 - exp(-(double)k * (double)n / (double)m), (double)k);
}

/* A blocked filter is a set of 512-bit Bloom filters, one per cache line;
 * the number of keys landing in a line is Poisson with mean 512 / bpk, and
 * the rate is the standard formula averaged over that load. Crowded lines
 * cost more than empty lines save, which is why blocking needs a little
 * more memory (or one probe less) for the same rate. */
double bkv_blocked_model_fpr(unsigned k, double bits_per_key) {
    /* Below a tenth of a bit per key a line holds thousands of keys and is
     * all ones; the sum below would also take as many terms (a header
     * claiming billions of keys must not stall its reader). */
    if (bits_per_key < 0.1) return 1.0;
    double lambda = LINE_BITS / bits_per_key;
    double hi = lambda + 12.0 * sqrt(lambda) + 40.0;
    double sum = 0.0;
    for (double x = 0; x <= hi; x += 1.0) {
        int sign; /* lgamma_r: plain lgamma writes the global signgam, a data race */
        double log_p = -lambda + x * log(lambda) - lgamma_r(x + 1.0, &sign);
        double per_line = pow(1.0 - pow(1.0 - 1.0 / LINE_BITS, (double)k * x), (double)k);
        sum += exp(log_p) * per_line;
    }
    return sum;
}

/* The fewest probes whose modelled rate is within 1% of the best k's.
 * Near the optimum the model is flat, and measured the smaller k is as
 * good or better (the multiplicative probe sequence makes the later probes
 * of a key a little correlated), and every probe costs. RocksDB's
 * FastLocalBloom likewise takes 6 probes at 10 bits per key. Measured over
 * 10 M keys and 10 M absent keys (splitmix64 hashes):
 *
 *   bits/key   k   measured   model
 *       8      4    2.523%    2.508%
 *       8      5    2.327%    2.312%   <- chosen (model's best)
 *       8      6    2.368%    2.342%
 *      10      6    0.967%    0.958%   <- chosen
 *      10      7    0.969%    0.957%      (model's best)
 *      10      8    1.028%    1.014%
 *      12      7    0.412%    0.409%   <- chosen
 *      12      8    0.414%    0.407%      (model's best)
 *      12      9    0.435%    0.426%
 *      16      9    0.083%    0.083%   <- chosen
 *      16     10    0.083%    0.083%      (model's best)
 *      16     11    0.088%    0.086%
 */
unsigned bkv_blocked_best_k(double bits_per_key) {
    /* The model falls to its best k and rises after it: the search stops
     * two k past the best (each evaluation sums a few hundred terms, and
     * every new filter, a memtable's too, asks). */
    double fpr[BKV_FILTER_MAX_K + 1];
    unsigned best = 1;
    fpr[1] = bkv_blocked_model_fpr(1, bits_per_key);
    for (unsigned k = 2; k <= BKV_FILTER_MAX_K && k <= best + 2; k++) {
        fpr[k] = bkv_blocked_model_fpr(k, bits_per_key);
        if (fpr[k] < fpr[best]) best = k;
    }
    for (unsigned k = 1; k < best; k++)
        if (fpr[k] <= 1.01 * fpr[best]) return k;
    return best;
}

double bkv_blocked_bits_for_fpr(double fpr) {
    double lo = 0.5, hi = 128.0;
    for (int i = 0; i < 50; i++) {
        double mid = 0.5 * (lo + hi);
        if (bkv_blocked_model_fpr(bkv_blocked_best_k(mid), mid) <= fpr) hi = mid;
        else lo = mid;
    }
    return hi;
}

double bkv_spec_bits_per_key(const bkv_filter_spec *spec) {
    if (spec->bits_per_key > 0) return spec->bits_per_key;
    /* m/n = -ln(p) / ln(2)^2 at the optimal k */
    return -log(spec->fpr) / (M_LN2 * M_LN2);
}

double bkv_filter_model_fpr(int type, unsigned k, uint64_t num_bits, uint64_t n) {
    switch (type) {
    case BKV_FILTER_BLOOM: return bkv_bloom_model_fpr(k, num_bits, n);
    case BKV_FILTER_BLOCKED_BLOOM:
        if (n == 0) return 0.0;
        return bkv_blocked_model_fpr(k, (double)num_bits / (double)n);
    case BKV_FILTER_COUNTING: return bkv_bloom_model_fpr(k, num_bits, n);
    case BKV_FILTER_RIBBON: return ldexp(1.0, -(int)k);
    case BKV_FILTER_FUSE8:
    case BKV_FILTER_FUSE16:
    case BKV_FILTER_XOR8: return n ? ldexp(1.0, -(int)k) : 0.0;
    /* Two buckets of four slots, each matching with chance 1/(2^f - 1). */
    case BKV_FILTER_CUCKOO8:
    case BKV_FILTER_CUCKOO12:
    case BKV_FILTER_CUCKOO16: return n ? 1.0 - pow(1.0 - 1.0 / (ldexp(1.0, (int)k) - 1), 8.0 * fmin(1.0, (double)n / ((double)num_bits / k))) : 0.0;
    case BKV_FILTER_NONE: return 1.0;
    default: return 1.0;
    }
}
