/*
 * A memory budget for key filters, allocated across sorted runs by the
 * rule of Monkey (Dayan, Athanassoulis, Idreos, SIGMOD 2017): a get for an
 * absent key probes every run once, so the expected number of wasted data
 * block reads is the sum of the runs' false-positive rates; for a fixed
 * number of filter bits that sum is smallest when each run's rate is
 * proportional to its number of keys. Big (deep) runs get fewer bits per
 * key than small ones, and a run whose rate would reach 1 gets no filter.
 */
#ifndef BKV_DB_FILTER_BUDGET_H
#define BKV_DB_FILTER_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "db/version.h"

/* Bits per key are never raised above this: at 30 the rate is ~1e-6 and
 * more bits buy nothing a get could notice. */
#define BKV_BUDGET_MAX_BITS 30.0

/* Monkey's allocation of budget_bits over runs of n[0..runs) keys: the bits
 * per key of run target, 0 when it gets no filter. */
double bkv_monkey_bits_per_key(const uint64_t *n, size_t runs, size_t target, double budget_bits);

/* Bits per key for a new table given version v and the budget in bytes:
 * at level 0 (a flush) a new run of run_entries keys; below, the level's
 * run, which gains the run_entries keys moving into it. */
double bkv_filter_budget_bits(const bkv_tree_version *v, uint64_t budget_bytes, int level, uint64_t run_entries);

#endif
