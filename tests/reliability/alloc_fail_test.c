/* Out of memory, everywhere: the n-th allocation the library makes fails
 * (once, or from then on), for n = 1, 2, ... until a workload finishes
 * without reaching n, as SQLite's malloc tests do. The workload writes,
 * deletes, batches, flushes, compacts (with a value index), reads, iterates
 * and searches by value. Whatever fails must fail with a status, never a
 * crash or a wrong answer: every value read is one the key may hold, and
 * after a clean reopen every acknowledged write is there and check finds
 * nothing wrong.
 *
 * The library's calls to malloc, calloc, realloc, strdup, aligned_alloc
 * and bkv_alloc_pages (the memtable's arena blocks) are redirected here at
 * link time (-Wl,--wrap): the static library's objects are linked into
 * this program, so no hook is compiled into the shipped library. */
#include <execinfo.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "test_dir.h"
#include "test_scale.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__real_aligned_alloc(size_t align, size_t n);
void *__real_bkv_alloc_pages(size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
void *__wrap_aligned_alloc(size_t align, size_t n);
void *__wrap_bkv_alloc_pages(size_t n);

/* Counting starts when armed; allocation number fail_at (and, persistent,
 * every later one) returns NULL. */
static atomic_int armed;
static atomic_ulong allocations;
static unsigned long fail_at;
static int persistent;
static atomic_ulong injected, injected_this_run;
static unsigned long long clean_compactions, clean_flushes;

static int should_fail(void) {
    if (!atomic_load(&armed)) return 0;
    unsigned long n = atomic_fetch_add(&allocations, 1) + 1;
    if (n == fail_at || (persistent && n > fail_at)) {
        atomic_fetch_add(&injected, 1);
        atomic_fetch_add(&injected_this_run, 1);
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return should_fail() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return should_fail() ? NULL : __real_strdup(s); }
void *__wrap_aligned_alloc(size_t align, size_t n) { return should_fail() ? NULL : __real_aligned_alloc(align, n); }
void *__wrap_bkv_alloc_pages(size_t n) { return should_fail() ? NULL : __real_bkv_alloc_pages(n); }

#define NKEYS 97
#define NSTEPS 360
#define DELETED (1u << 15)

/* What each key may hold: its acknowledged state, or any state a failed
 * write may have left (the WAL can hold a write whose memtable insert ran
 * out of memory). A state is a version number, 0 = never written, or
 * DELETED | version. */
typedef struct key_state {
    unsigned acked;
    unsigned maybe[8];
    int nmaybe;
    unsigned next_version;
} key_state;

static key_state keys[NKEYS];
static char dir[256];
static char path[300];

static void key_name(char *buf, int i) { snprintf(buf, 16, "key%03d", i); }

/* Values share a few distinct payloads, so a value search has results. */
static int value_text(char *buf, int i, unsigned version) {
    return snprintf(buf, 64, "val%03d-%u-%s", i, version, version % 3 ? "common" : "rare");
}

static int state_allowed(const key_state *k, unsigned state) {
    if (k->acked == state) return 1;
    for (int j = 0; j < k->nmaybe; j++)
        if (k->maybe[j] == state) return 1;
    return 0;
}

/* The state a read found: a value's version, or absent. */
static int found_allowed(int i, const void *val, size_t vlen) {
    const key_state *k = &keys[i];
    if (!val) {
        if (state_allowed(k, 0)) return 1;
        for (int j = -1; j < k->nmaybe; j++) {
            unsigned s = j < 0 ? k->acked : k->maybe[j];
            if (s & DELETED) return 1;
        }
        return 0;
    }
    char text[64];
    unsigned version;
    int idx;
    if (vlen >= sizeof text || sscanf((const char *)val, "val%3d-%u", &idx, &version) != 2 || idx != i) return 0;
    if (value_text(text, i, version) != (int)vlen || memcmp(text, val, vlen) != 0) return 0;
    return state_allowed(k, version);
}

static void record(int i, unsigned state, int rc) {
    key_state *k = &keys[i];
    if (rc == BKV_OK) {
        k->acked = state;
        k->nmaybe = 0;
    } else if (k->nmaybe < 8) {
        k->maybe[k->nmaybe++] = state;
    }
}

static void options(bkv_options *o) {
    bkv_options_init(o);
    o->write_buffer_size = 2048;
    o->block_size = 256;
    o->block_cache_size = 16 << 10;
    o->target_file_size = 1024;
    o->level0_compaction_trigger = 2;
    o->level0_slowdown_trigger = 2;
    o->level0_stop_trigger = 40;
    o->max_bytes_for_level_base = 4096;
    o->max_background_jobs = 1;
    o->value_index = BKV_VALUE_INDEX_BITSLICED;
    o->value_filter_bits = 256;
    o->value_partition_entries = 16;
}

typedef struct search_check {
    int bad;
} search_check;

static int on_found(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    search_check *sc = arg;
    int i;
    if (klen != 6 || sscanf((const char *)key, "key%3d", &i) != 1 || i < 0 || i >= NKEYS || !found_allowed(i, val, vlen))
        sc->bad++;
    return 0;
}

/* Reads every key, scans, searches: any answer must be allowed. */
static void read_everything(bkv_db *db) {
    char k[16];
    for (int i = 0; i < NKEYS; i++) {
        key_name(k, i);
        void *v = NULL;
        size_t vl = 0;
        int rc = bkv_get(db, NULL, k, strlen(k), &v, &vl);
        if (rc == BKV_OK || rc == BKV_NOTFOUND) {
            if (!found_allowed(i, rc == BKV_OK ? v : NULL, vl)) {
                fprintf(stderr, "wrong answer for %s at fail_at %lu%s (%s): %.*s; acked %#x, %d maybe\n", k, fail_at,
                        persistent ? " persistently" : "", atomic_load(&armed) ? "under faults" : "after reopen",
                        rc == BKV_OK ? (int)vl : 8, rc == BKV_OK ? (char *)v : "(absent)", keys[i].acked, keys[i].nmaybe);
                fail();
            }
        } else {
            assert_true(rc < 0);
            assert_true(*bkv_errmsg(db) != 0);
        }
        bkv_free(v);
    }
    bkv_iter *it;
    if (bkv_iter_create(db, NULL, &it) == BKV_OK) {
        int last = -1;
        for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) {
            size_t kl, vl;
            const char *key = bkv_iter_key(it, &kl);
            const void *val = bkv_iter_value(it, &vl);
            int i;
            assert_int_equal(kl, 6);
            assert_int_equal(sscanf(key, "key%3d", &i), 1);
            assert_true(i > last);
            for (int j = last + 1; j < i; j++) assert_true(found_allowed(j, NULL, 0)); /* skipped = absent */
            assert_true(found_allowed(i, val, vl));
            last = i;
        }
        if (bkv_iter_status(it) == BKV_OK)
            for (int j = last + 1; j < NKEYS; j++) assert_true(found_allowed(j, NULL, 0));
        bkv_iter_destroy(it);
    }
    search_check sc = {0};
    int rc = bkv_find_value(db, NULL, "val005-1-common", 15, on_found, &sc, NULL);
    assert_true(rc == BKV_OK || rc < 0);
    assert_int_equal(sc.bad, 0);
}

static void workload(void) {
    bkv_options o;
    options(&o);
    bkv_db *db;
    if (bkv_open(path, &o, &db) != BKV_OK) {
        assert_true(*bkv_errmsg(NULL) != 0);
        return;
    }
    char k[16], v[64];
    for (int step = 0; step < NSTEPS; step++) {
        int i = (step * 31) % NKEYS;
        key_state *ks = &keys[i];
        int rc;
        if (step % 25 == 24) {
            /* A batch: all of it, or none of it. */
            bkv_batch *b = bkv_batch_create();
            if (!b) continue;
            int members[5];
            unsigned states[5];
            rc = BKV_OK;
            for (int j = 0; j < 5 && rc == BKV_OK; j++) {
                members[j] = (i + j * 13) % NKEYS;
                states[j] = ++keys[members[j]].next_version;
                key_name(k, members[j]);
                rc = bkv_batch_put(b, k, strlen(k), v, (size_t)value_text(v, members[j], states[j]));
            }
            if (rc == BKV_OK) {
                rc = bkv_write(db, NULL, b);
                for (int j = 0; j < 5; j++) record(members[j], states[j], rc);
            }
            bkv_batch_destroy(b);
        } else if (step % 5 == 4) {
            unsigned state = DELETED | ++ks->next_version;
            key_name(k, i);
            rc = bkv_delete(db, NULL, k, strlen(k));
            record(i, state, rc);
        } else {
            unsigned version = ++ks->next_version;
            key_name(k, i);
            rc = bkv_put(db, NULL, k, strlen(k), v, (size_t)value_text(v, i, version));
            record(i, version, rc);
        }
        if (rc != BKV_OK) assert_true(rc < 0);
        if (step % 120 == 119) (void)bkv_flush(db);
    }
    (void)bkv_compact(db);
    read_everything(db);
    if (!atomic_load(&injected_this_run)) {
        /* A run with no fault must have exercised what the sweep claims to. */
        char *c = bkv_property(db, "bloomkv.counter.compactions"), *f = bkv_property(db, "bloomkv.counter.flushes");
        clean_compactions = c ? strtoull(c, NULL, 10) : 0;
        clean_flushes = f ? strtoull(f, NULL, 10) : 0;
        bkv_free(c);
        bkv_free(f);
    }
    bkv_close(db);
}

static void problem(void *arg, const char *text) {
    fprintf(stderr, "check: %s\n", text);
    ++*(int *)arg;
}

/* After the faults: a clean open holds every acknowledged write. */
static void verify(void) {
    bkv_options o;
    options(&o);
    bkv_db *db;
    int rc = bkv_open(path, &o, &db);
    if (rc != BKV_OK) fprintf(stderr, "reopen after fail_at %lu: %s\n", fail_at, bkv_errmsg(NULL));
    assert_int_equal(rc, BKV_OK);
    read_everything(db);
    /* Reads above may legitimately fail only under faults: here none may. */
    char k[16];
    for (int i = 0; i < NKEYS; i++) {
        key_name(k, i);
        void *v = NULL;
        size_t vl;
        rc = bkv_get(db, NULL, k, strlen(k), &v, &vl);
        assert_true(rc == BKV_OK || rc == BKV_NOTFOUND);
        bkv_free(v);
    }
    assert_int_equal(bkv_close(db), BKV_OK);
    int problems = 0;
    assert_int_equal(bkv_check(path, problem, &problems), BKV_OK);
    assert_int_equal(problems, 0);
}

static void fresh_database(int n) {
    snprintf(path, sizeof path, "%s/db%d", dir, n);
    memset(keys, 0, sizeof keys);
}

/* Runs the workload failing allocation n; 1 if the run reached it. */
static int run_once(unsigned long n, int persist) {
    fresh_database((int)n);
    fail_at = n;
    persistent = persist;
    atomic_store(&allocations, 0);
    atomic_store(&injected_this_run, 0);
    atomic_store(&armed, 1);
    workload();
    atomic_store(&armed, 0);
    int reached = atomic_load(&allocations) >= n;
    verify();
    test_remove_dir(path);
    return reached;
}

/* A crash in any thread prints that thread's stack before the process
 * ends: cmocka's own handler would report the signal alone (and, from a
 * background thread, jump into the main thread's frame). */
static void on_fatal_signal(int sig) {
    void *frames[64];
    int n = backtrace(frames, 64);
    static const char msg[] = "alloc_fail_test: fatal signal; the stack of the thread that took it:\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    _exit(128 + sig);
}

static void every_allocation_may_fail(void **state) {
    (void)state;
    signal(SIGSEGV, on_fatal_signal);
    signal(SIGBUS, on_fatal_signal);
    void *warm[1];
    backtrace(warm, 1); /* loads what backtrace needs now, not in the handler */
    /* Step through the allocation numbers: every one at first, then (at
     * the quick and CI scales) a growing stride over the long tail. */
    unsigned long stride_div = (unsigned long)test_scale_pick(40, 200, 1000000);
    unsigned long runs = 0, n = 1;
    for (;; runs++) {
        int persist = runs % 4 == 3;
        if (!run_once(n, persist)) break;
        n += n < 200 ? 1 : n / stride_div + 1;
    }
    printf("alloc sweep: %lu runs, allocations up to %lu failed, %lu failures injected\n", runs, n,
           (unsigned long)atomic_load(&injected));
    test_report("allocation_failures_injected", atomic_load(&injected));
    printf("the run without a fault flushed %llu and compacted %llu times\n", clean_flushes, clean_compactions);
    assert_true(runs > 200);
    assert_true(clean_flushes >= 3 && clean_compactions >= 2);
}

static int setup(void **state) {
    (void)state;
    struct stat st;
    /* The sweep opens hundreds of databases: memory-backed when possible. */
    if (!getenv("TMPDIR") && stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) setenv("TMPDIR", "/dev/shm", 1);
    test_make_dir(dir, sizeof dir, "allocfail");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    test_remove_dir(dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(every_allocation_may_fail)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
