/* How hard the reliability tests push, from the environment: BKV_SCALE
 * unset (the quick default of `make test`), "ci" (the reliability stage of
 * CI) or "long" (hours, by hand). Tests print "reliability: name=count"
 * lines that tests/reliability/run.sh sums into its summary. */
#ifndef BKV_TEST_SCALE_H
#define BKV_TEST_SCALE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int test_scale_pick(int quick, int ci, int longrun) {
    const char *s = getenv("BKV_SCALE");
    if (s && strcmp(s, "ci") == 0) return ci;
    if (s && strcmp(s, "long") == 0) return longrun;
    return quick;
}

static inline void test_report(const char *name, unsigned long long count) {
    printf("reliability: %s=%llu\n", name, count);
    fflush(stdout);
}

#endif
