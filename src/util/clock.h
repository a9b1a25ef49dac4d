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

#endif
