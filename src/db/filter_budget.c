#include "db/filter_budget.h"

#include <math.h>

#define LN2_SQUARED (M_LN2 * M_LN2)
#define MAX_RUNS 64 /* level-0 tables beyond 56 are not counted (writes stop long before) */

/* With rates p_i = c n_i and a standard Bloom filter's n_i (-ln p_i) / ln²2
 * bits for run i, spending exactly the budget M fixes
 *   ln c = -(M ln²2 + sum n_i ln n_i) / sum n_i.
 * Runs with p_i >= 1 drop out (no filter) and c is solved again for the
 * rest, which can only lower it: no dropped run comes back. */
double bkv_monkey_bits_per_key(const uint64_t *n, size_t runs, size_t target, double budget_bits) {
    if (target >= runs || n[target] == 0 || budget_bits <= 0) return 0;
    unsigned char dropped[MAX_RUNS] = {0};
    if (runs > sizeof dropped) runs = sizeof dropped;
    double log_c = 0;
    for (;;) {
        double total = 0, weighted = 0;
        for (size_t i = 0; i < runs; i++)
            if (!dropped[i] && n[i]) {
                total += (double)n[i];
                weighted += (double)n[i] * log((double)n[i]);
            }
        log_c = -(budget_bits * LN2_SQUARED + weighted) / total;
        int any = 0;
        for (size_t i = 0; i < runs; i++)
            if (!dropped[i] && n[i] && log_c + log((double)n[i]) >= 0) dropped[i] = any = 1;
        if (!any || dropped[target]) break;
    }
    if (dropped[target]) return 0;
    double bits = -(log_c + log((double)n[target])) / LN2_SQUARED;
    return bits > BKV_BUDGET_MAX_BITS ? BKV_BUDGET_MAX_BITS : bits;
}

static uint64_t level_entries(const bkv_tree_version *v, int level) {
    uint64_t total = 0;
    for (size_t i = 0; i < v->nfiles[level]; i++) total += v->files[level][i]->entries;
    return total;
}

double bkv_filter_budget_bits(const bkv_tree_version *v, uint64_t budget_bytes, int level, uint64_t run_entries) {
    /* Runs: every level-0 table, then one per deeper level. */
    uint64_t n[MAX_RUNS];
    size_t runs = 0, target;
    for (size_t i = 0; i < v->nfiles[0] && runs < MAX_RUNS - BKV_MAX_LEVELS; i++) n[runs++] = v->files[0][i]->entries;
    if (level == 0) {
        target = runs;
        n[runs++] = run_entries;
    } else {
        target = SIZE_MAX;
    }
    for (int l = 1; l < BKV_MAX_LEVELS; l++) {
        uint64_t entries = level_entries(v, l);
        if (l == level) {
            target = runs;
            entries += run_entries;
        }
        n[runs++] = entries;
    }
    return bkv_monkey_bits_per_key(n, runs, target, 8.0 * (double)budget_bytes);
}
