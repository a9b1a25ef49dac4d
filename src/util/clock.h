/* The monotonic clock, for durations and "how long since" (never for
 * anything stored). */
#ifndef BKV_UTIL_CLOCK_H
#define BKV_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t bkv_monotonic_nanos(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same to within a few milliseconds, for a few nanoseconds instead of
 * a clock read: for timing on the scale of seconds on hot paths. */
static inline uint64_t bkv_coarse_nanos(void) {
#ifdef CLOCK_MONOTONIC_COARSE
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#else
    return bkv_monotonic_nanos();
#endif
}

#endif
