/* Small helpers shared by the benchmarks. */
#ifndef BKV_BENCH_UTIL_H
#define BKV_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

static inline double bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* splitmix64: a fixed, reproducible stream of 64-bit values. */
static inline uint64_t bench_splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Benchmarks built without optimisation measure the compiler, not us. */
static inline const char *bench_build_warning(void) {
#if !defined(__OPTIMIZE__)
    return "warning: built without optimisation; timings are not meaningful";
#elif !defined(NDEBUG)
    return "warning: built with assertions enabled";
#else
    return NULL;
#endif
}

#endif
