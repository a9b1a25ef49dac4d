/* Helpers for tests that drive a database through the public API. */
#ifndef BKV_TEST_DB_H
#define BKV_TEST_DB_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bloomkv.h"

/* A "bloomkv.counter.<name>" property as a number (aborts if unknown). */
static inline uint64_t test_counter(bkv_db *db, const char *name) {
    char prop[64];
    snprintf(prop, sizeof prop, "bloomkv.counter.%s", name);
    char *v = bkv_property(db, prop);
    if (!v) {
        fprintf(stderr, "no counter %s\n", name);
        abort();
    }
    uint64_t n = strtoull(v, NULL, 10);
    bkv_free(v);
    return n;
}

/* A database at path opened with default options, created if missing
 * (aborts, saying why, if it cannot be). */
static inline bkv_db *test_open_default(const char *path) {
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 1;
    bkv_db *db;
    if (bkv_open(path, &o, &db) != BKV_OK) {
        fprintf(stderr, "cannot open %s: %s\n", path, bkv_errmsg(NULL));
        abort();
    }
    return db;
}

/* A bkv_find_value callback for keys named "key<number>": counts the
 * results and keeps the last key's number. */
typedef struct test_found {
    int n, key;
} test_found;

static inline int test_on_found(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)val, (void)vlen;
    test_found *f = arg;
    f->n++;
    char k[32] = ""; /* key is not NUL-terminated: key000321 -> 321 */
    if (klen > 3 && klen < sizeof k) memcpy(k, (const char *)key + 3, klen - 3);
    f->key = atoi(k);
    return 0;
}

/* For kill -9 tests: a child writes one 32-bit acknowledgement into fd per
 * acknowledged write. Reads wait_for of them (fewer if the child ends),
 * kills the child, drains what it acknowledged before dying and closes fd.
 * Returns the last acknowledgement, or last when there was none. */
static inline uint32_t test_kill_after(pid_t pid, int fd, uint64_t wait_for, uint32_t last, int *status) {
    uint32_t got;
    for (uint64_t seen = 0; seen < wait_for && read(fd, &got, sizeof got) == sizeof got; seen++) last = got;
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    while (read(fd, &got, sizeof got) == sizeof got) last = got;
    close(fd);
    return last;
}

#endif
