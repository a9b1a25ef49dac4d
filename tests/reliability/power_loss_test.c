/*
 * Power loss and failed I/O, through the fault env.
 *
 * Power loss: a workload runs with tiny memtables (so WAL switches,
 * flushes, compactions and manifest edits keep coming); at every crash
 * point (a file sync, a directory sync, a rename, a removal, and every
 * seventh append) the directory is copied as a power loss at that instant
 * would leave it, the unsynced tails of files dropped, torn or turned to
 * garbage in turn. Each copy must
 * open cleanly and hold exactly the first j operations for some j between
 * the last acknowledged synced write and the last operation started: every
 * synced write survives, and what survives is a prefix. This is the test
 * that catches a missing fsync. With several writers at once, each
 * writer's keys must show a prefix of its own operations, and a copy that
 * holds an operation must hold every write acknowledged before it began.
 *
 * Failed I/O: the n-th write or sync fails (persistently) for every n the
 * workload reaches, with one writer and with four at once. The database
 * must refuse every later write, keep serving reads, and after a clean
 * reopen hold every acknowledged write (a group's failure reaches each of
 * its writers).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "db/db_int.h"
#include "test_dir.h"
#include "test_scale.h"
#include "util/env_fault.h"

#define NKEYS 40
#define MAX_OPS 400

TEST_DIR_FIXTURE("power")

typedef struct op {
    int key;
    int del;
    int sync;
} op;

#define MAX_WRITERS 4

/* The operations, shared out among writers: writer t applies, in order,
 * those on the keys it owns (key % writers == t). One writer owns all. */
typedef struct workload {
    op ops[MAX_OPS];
    int nops, writers;
    int own[MAX_WRITERS][MAX_OPS]; /* writer t's n-th operation */
    int nown[MAX_WRITERS];
    /* Progress, under mu (read by the durability hook, which may run on
     * any of the database's threads). Counts are of a writer's own
     * operations. */
    pthread_mutex_t mu;
    int started[MAX_WRITERS]; /* begun */
    int acked[MAX_WRITERS];   /* returned, all before the writer's first failure */
    int failure_seen;         /* a write has failed */
    int durable[MAX_WRITERS]; /* a synced write acknowledged since makes them durable */
    /* floor[i][u]: writer u's acknowledged count when operation i began.
     * Those writes are in the WAL before i, so a copy holding i holds them. */
    int floor[MAX_OPS][MAX_WRITERS];
    char path[300];
    bkv_fault_env *fe;
    int checked;
    char failure[600]; /* the first copy that failed, said by whichever thread found it */
} workload;

static workload *new_workload(uint64_t seed, int nops, int sync_every, int writers) {
    workload *w = calloc(1, sizeof *w);
    assert_non_null(w);
    uint64_t s = seed;
    w->nops = nops;
    w->writers = writers;
    for (int i = 0; i < nops; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        w->ops[i].key = (int)((s >> 33) % NKEYS);
        w->ops[i].del = (s >> 20) % 6 == 0;
        w->ops[i].sync = sync_every ? i % sync_every == 0 : 0;
        int t = w->ops[i].key % writers;
        w->own[t][w->nown[t]++] = i;
    }
    pthread_mutex_init(&w->mu, NULL);
    return w;
}

static void free_workload(workload *w) {
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static void key_of(char *b, int k) { snprintf(b, 32, "key%03d", k); }
static void val_of(char *b, int i) { snprintf(b, 64, "value-of-op-%04d-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i); }

static bkv_options small_options(void) {
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 2048;
    o.block_size = 256;
    o.level0_compaction_trigger = 2;
    o.max_bytes_for_level_base = 8 * 1024;
    o.target_file_size = 4096;
    o.max_background_jobs = 1;
    return o;
}

/* The operation each key writer t owns shows after the writer's first j
 * (-1: absent); other keys are left as they are. */
static void model_at(const workload *w, int t, int j, int *state) {
    for (int k = t; k < NKEYS; k += w->writers) state[k] = -1;
    for (int n = 0; n < j; n++) {
        const op *o = &w->ops[w->own[t][n]];
        state[o->key] = o->del ? -1 : w->own[t][n];
    }
}

/* Whether got[] (values read, NULL: absent) holds what model_at(t, j)
 * says for every key writer t owns. */
static int holds(const workload *w, char *const *got, int t, int j) {
    int state[NKEYS];
    model_at(w, t, j, state);
    for (int k = t; k < NKEYS; k += w->writers) {
        char want[64];
        if (state[k] >= 0) val_of(want, state[k]);
        if (state[k] < 0 ? got[k] != NULL : !got[k] || strcmp(got[k], want) != 0) return 0;
    }
    return 1;
}

/* With BKV_DEBUG set, a failing copy is kept as /tmp/failcopy. */
static void keep_for_debugging(const char *copy) {
    if (!getenv("BKV_DEBUG")) return;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf /tmp/failcopy && cp -r %s /tmp/failcopy", copy);
    if (system(cmd)) {}
}

/* Reads every key of a copy into got[] (NULL: absent); 0, or writes why
 * not into why. */
static int read_copy(const char *copy, char **got, char *why, size_t whylen) {
    bkv_options o = small_options();
    o.create_if_missing = 0;
    bkv_db *db;
    int rc = bkv_open(copy, &o, &db);
    if (rc != BKV_OK) {
        snprintf(why, whylen, "%s does not open: %s", copy, bkv_strerror(rc));
        return -1;
    }
    for (int k = 0; k < NKEYS; k++) {
        char key[32];
        key_of(key, k);
        void *v;
        size_t n;
        got[k] = NULL;
        rc = bkv_get(db, NULL, key, strlen(key), &v, &n);
        if (rc == BKV_OK) {
            got[k] = malloc(n + 1);
            memcpy(got[k], v, n);
            got[k][n] = 0;
            bkv_free(v);
        } else if (rc != BKV_NOTFOUND) {
            snprintf(why, whylen, "%s: get failed: %s", copy, bkv_errmsg(db));
            bkv_close(db);
            return -1;
        }
    }
    bkv_close(db);
    return 0;
}

/* Checks a copy: each writer's keys show a prefix of its operations, at
 * least lo[t] and at most hi[t] of them, and no prefix leaves a gap: a
 * copy that holds an operation holds every write acknowledged before it
 * began, whichever writer made it. 0, or writes why not into why. */
static int verify_copy(const workload *w, const char *copy, const int *lo, const int *hi, char *why, size_t whylen) {
    char *got[NKEYS];
    if (read_copy(copy, got, why, whylen)) return -1;
    int least[MAX_WRITERS], most[MAX_WRITERS], bad = 0;
    for (int t = 0; t < w->writers && !bad; t++) {
        least[t] = most[t] = -1;
        for (int j = lo[t]; j <= hi[t]; j++)
            if (holds(w, got, t, j)) {
                if (least[t] < 0) least[t] = j;
                most[t] = j;
            }
        if (most[t] < 0) {
            snprintf(why, whylen, "%s: writer %d's keys hold no prefix of its operations %d..%d", copy,
                     t, lo[t], hi[t]);
            bad = 1;
        }
    }
    /* The fewest operations of t the copy can hold, against the most of u:
     * a gap shows whichever of the prefixes that match is the true one. */
    for (int t = 0; t < w->writers && !bad; t++)
        for (int u = 0; u < w->writers && least[t] > 0 && !bad; u++) {
            int i = w->own[t][least[t] - 1];
            if (u != t && most[u] < w->floor[i][u]) {
                snprintf(why, whylen,
                         "%s holds writer %d's operation %d but not writer %d's first %d, "
                         "acknowledged before it began",
                         copy, t, i, u, w->floor[i][u]);
                bad = 1;
            }
        }
    if (bad && getenv("BKV_DEBUG")) {
        for (int k = 0; k < NKEYS; k++) fprintf(stderr, "key %d: %s\n", k, got[k] ? got[k] : "(absent)");
        keep_for_debugging(copy);
    }
    for (int k = 0; k < NKEYS; k++) free(got[k]);
    return bad ? -1 : 0;
}

/* Runs under the fault env's mutex: no sync completes meanwhile, so a
 * write acknowledged by the time durable[] is read had its sync done
 * before the snapshot. */
static void on_crash_point(void *arg, uint64_t n) {
    workload *w = arg;
    if (w->failure[0]) return;
    char copy[400], why[sizeof w->failure] = "";
    snprintf(copy, sizeof copy, "%s-loss%06llu", w->path, (unsigned long long)n);
    mkdir(copy, 0755);
    int rc = bkv_fault_env_snapshot(w->fe, w->path, copy, (int)(n % BKV_LOSS_MODES), n);
    int lo[MAX_WRITERS], hi[MAX_WRITERS], synced = 0;
    pthread_mutex_lock(&w->mu);
    for (int t = 0; t < w->writers; t++) {
        lo[t] = w->durable[t];
        hi[t] = w->started[t];
        synced += lo[t];
    }
    pthread_mutex_unlock(&w->mu);
    /* Opening before the first manifest exists is a fresh database. */
    char current[450];
    snprintf(current, sizeof current, "%s/CURRENT", copy);
    struct stat st;
    if (rc != BKV_OK) {
        snprintf(why, sizeof why, "snapshot %s failed: %s", copy, bkv_strerror(rc));
    } else if (stat(current, &st) == 0) {
        if (verify_copy(w, copy, lo, hi, why, sizeof why) == 0) w->checked++;
    } else if (synced > 0) {
        snprintf(why, sizeof why, "power loss copy %s has no CURRENT after %d synced writes", copy, synced);
    }
    if (why[0]) snprintf(w->failure, sizeof w->failure, "%s", why);
    else test_remove_dir(copy);
}

static int apply(bkv_db *db, const workload *w, int i) {
    char key[32], val[64];
    key_of(key, w->ops[i].key);
    val_of(val, i);
    bkv_write_options wo = {.size = sizeof(bkv_write_options), .sync = w->ops[i].sync};
    return w->ops[i].del ? bkv_delete(db, &wo, key, strlen(key)) : bkv_put(db, &wo, key, strlen(key), val, strlen(val));
}

/* One writer's share of the operations before end. It goes on after a
 * failure: once any writer has seen a write fail, every write that begins
 * must fail too, as the database is read-only from the first failure. */
typedef struct writer {
    workload *w;
    bkv_db *db;
    int t, end;
    int failed;       /* a write of this writer failed */
    int late_success; /* a write acknowledged after a failure had been seen */
} writer;

static void *write_share(void *arg) {
    writer *x = arg;
    workload *w = x->w;
    int t = x->t;
    for (int n = w->started[t]; n < w->nown[t] && w->own[t][n] < x->end; n++) {
        int i = w->own[t][n];
        pthread_mutex_lock(&w->mu);
        memcpy(w->floor[i], w->acked, sizeof w->floor[i]);
        w->started[t] = n + 1;
        int after_failure = w->failure_seen;
        pthread_mutex_unlock(&w->mu);
        int rc = apply(x->db, w, i);
        pthread_mutex_lock(&w->mu);
        if (rc != BKV_OK) {
            w->failure_seen = x->failed = 1;
        } else if (after_failure || x->failed) {
            x->late_success = 1;
        } else {
            w->acked[t] = n + 1;
            if (w->ops[i].sync) {
                if (w->durable[t] < n + 1) w->durable[t] = n + 1;
                for (int u = 0; u < w->writers; u++)
                    if (w->durable[u] < w->floor[i][u]) w->durable[u] = w->floor[i][u];
            }
        }
        pthread_mutex_unlock(&w->mu);
    }
    return NULL;
}

/* Runs each writer's share of the operations before end at once. */
static void write_all(workload *w, bkv_db *db, int end, writer *x) {
    pthread_t th[MAX_WRITERS];
    for (int t = 0; t < w->writers; t++) {
        x[t] = (writer){w, db, t, end, 0, 0};
        assert_int_equal(pthread_create(&th[t], NULL, write_share, &x[t]), 0);
    }
    for (int t = 0; t < w->writers; t++) pthread_join(th[t], NULL);
}

/* The workload runs in slices of 100 operations, each by its writers at
 * once, with a clean close and reopen between slices (recovery writes and
 * syncs too). Returns the copies checked. */
static int run_power_loss(const char *name, uint64_t seed, int sync_every, int writers) {
    workload *w = new_workload(seed, MAX_OPS, sync_every, writers);
    snprintf(w->path, sizeof w->path, "%s/%s", dir, name);
    w->fe = bkv_fault_env_new();
    bkv_fault_env_on_crash_point(w->fe, on_crash_point, w, 7);
    bkv_options o = small_options();
    bkv_db *db;
    assert_int_equal(bkv_open_env(w->path, &o, bkv_fault_env_get(w->fe), &db), BKV_OK);
    for (int end = 100; end <= w->nops; end += 100) {
        writer x[MAX_WRITERS];
        write_all(w, db, end, x);
        for (int t = 0; t < writers; t++)
            if (x[t].failed) fail_msg("%s: writer %d's write failed", name, t);
        if (w->failure[0]) fail_msg("%s", w->failure);
        assert_int_equal(bkv_close(db), BKV_OK);
        if (end < w->nops) assert_int_equal(bkv_open_env(w->path, &o, bkv_fault_env_get(w->fe), &db), BKV_OK);
    }
    if (w->failure[0]) fail_msg("%s", w->failure);
    int checked = w->checked;
    assert_true(checked > 50);
    bkv_fault_env_free(w->fe);
    free_workload(w);
    return checked;
}

/* Workloads cycle through every write synced, one in 7, one in 50. */
static int run_power_losses(const char *prefix, int workloads, int writers) {
    static const int sync_every[] = {1, 7, 50};
    int n = 0;
    for (int i = 0; i < workloads; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s-%d", prefix, i);
        n += run_power_loss(name, 11 + (uint64_t)i, sync_every[i % 3], writers);
    }
    return n;
}

static void every_durability_point_survives_power_loss(void **state) {
    (void)state;
    int n = run_power_losses("loss", test_scale_pick(3, 8, 60), 1);
    printf("simulated power losses checked: %d\n", n);
    test_report("power_losses", (unsigned long long)n);
}

/* Four writers at once, so groups hold several writers' batches and the
 * WAL's order is decided by the race: each copy still holds a prefix of
 * every writer's operations, every synced write, and everything written
 * before what it holds. */
static void concurrent_writers_survive_power_loss(void **state) {
    (void)state;
    int n = run_power_losses("writers", test_scale_pick(2, 4, 40), MAX_WRITERS);
    printf("simulated power losses with %d writers checked: %d\n", MAX_WRITERS, n);
    test_report("power_losses_concurrent_writers", (unsigned long long)n);
}

/* A checkpoint is a database of its own: once bkv_checkpoint returns, a
 * power loss leaves it whole, its directory's name included (the parent
 * is synced after the directory is made). */
static void checkpoint_survives_power_loss(void **state) {
    (void)state;
    bkv_fault_env *fe = bkv_fault_env_new();
    char src[300], cp[300], copy[300];
    snprintf(src, sizeof src, "%s/cp-src", dir);
    snprintf(cp, sizeof cp, "%s/cp", dir);
    snprintf(copy, sizeof copy, "%s/cp-loss", dir);
    bkv_options o = small_options();
    o.create_if_missing = 1;
    bkv_db *db;
    assert_int_equal(bkv_open_env(src, &o, bkv_fault_env_get(fe), &db), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "k", 1, "v", 1), BKV_OK);
    assert_int_equal(bkv_checkpoint(db, cp), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
    for (int mode = 0; mode < BKV_LOSS_MODES; mode++) {
        mkdir(copy, 0755);
        assert_int_equal(bkv_fault_env_snapshot(fe, cp, copy, mode, 7), BKV_OK);
        o.create_if_missing = 0;
        assert_int_equal(bkv_open(copy, &o, &db), BKV_OK);
        void *v;
        size_t n;
        assert_int_equal(bkv_get(db, NULL, "k", 1, &v, &n), BKV_OK);
        bkv_free(v);
        assert_int_equal(bkv_close(db), BKV_OK);
        test_remove_dir(copy);
    }
    bkv_fault_env_free(fe);
}

/* Fails the n-th operation of kind for n = 1, 2, ... until a run finishes
 * its workload without reaching the n-th operation (SQLite's loop). No count
 * is taken from a separate clean run: background flushes and compactions
 * make the number of operations vary from run to run. Each run's writers
 * write at once; after a clean reopen each writer's keys hold every write
 * it had acknowledged, and at most the one that failed first besides.
 * Several writers take every third n: which operation is the n-th is up
 * to the race anyway, and the one-writer sweep takes every n. */
static void sweep(int kind, const char *name, uint64_t min_points, int writers) {
    bkv_options o = small_options();
    uint64_t injected = 0, points = 0, stride = writers > 1 ? 3 : 1;
    for (uint64_t n = 1, reached = 1; reached; n += stride) {
        workload *w = new_workload(21, 150, 3, writers);
        bkv_fault_env *fe = bkv_fault_env_new();
        snprintf(w->path, sizeof w->path, "%s/%s-%llu", dir, name, (unsigned long long)n);
        uint64_t turn = n / stride % 3; /* the failure's kind goes round */
        bkv_fault_env_fail_at(fe, kind, n, turn == 0 ? BKV_FAULT_SHORT_WRITE : turn == 1 ? BKV_FAULT_EIO : BKV_FAULT_ENOSPC, 1);
        bkv_db *db;
        int rc = bkv_open_env(w->path, &o, bkv_fault_env_get(fe), &db);
        if (rc == BKV_OK) {
            writer x[MAX_WRITERS];
            write_all(w, db, w->nops, x);
            for (int t = 0; t < writers; t++)
                if (x[t].late_success) fail_msg("%s fault %llu: writer %d wrote after a failure", name, (unsigned long long)n, t);
            /* Reads still work (the one failed open may have been of the
             * table this read needs: that read reports it). */
            char key[32];
            key_of(key, 0);
            void *v;
            size_t vl;
            rc = bkv_get(db, NULL, key, strlen(key), &v, &vl);
            assert_true(rc == BKV_OK || rc == BKV_NOTFOUND || (kind == BKV_FAULT_OPEN && rc == BKV_IOERROR));
            if (rc == BKV_OK) bkv_free(v);
            bkv_close(db);
        }
        reached = bkv_fault_env_count(fe, kind) >= n;
        points += reached;
        assert_true(!reached || bkv_fault_env_faults_injected(fe) >= 1);
        injected += bkv_fault_env_faults_injected(fe);
        bkv_fault_env_free(fe);
        /* A clean reopen (a failed open may have left no database yet). */
        int lo[MAX_WRITERS], hi[MAX_WRITERS];
        for (int t = 0; t < writers; t++) {
            lo[t] = w->acked[t];
            hi[t] = w->acked[t] < w->started[t] ? w->acked[t] + 1 : w->acked[t];
        }
        bkv_db *clean;
        if ((rc = bkv_open(w->path, &o, &clean)) != BKV_OK)
            fail_msg("%s fault %llu: reopen failed: %s", name, (unsigned long long)n, bkv_strerror(rc));
        bkv_close(clean);
        char why[sizeof w->failure];
        if (verify_copy(w, w->path, lo, hi, why, sizeof why)) fail_msg("%s fault %llu: %s", name, (unsigned long long)n, why);
        test_remove_dir(w->path);
        free_workload(w);
    }
    assert_true(points >= min_points);
    printf("%s sweep with %d writer%s: %llu failure points, %llu faults injected\n", name, writers,
           writers > 1 ? "s" : "", (unsigned long long)points, (unsigned long long)injected);
    test_report("faults_injected", (unsigned long long)injected);
}

static void failed_writes_make_the_database_read_only(void **state) {
    (void)state;
    sweep(BKV_FAULT_WRITE, "write", 10, 1);
    sweep(BKV_FAULT_WRITE, "write-writers", 10, MAX_WRITERS);
}

static void failed_syncs_make_the_database_read_only(void **state) {
    (void)state;
    sweep(BKV_FAULT_SYNC, "sync", 10, 1);
    sweep(BKV_FAULT_SYNC, "sync-writers", 10, MAX_WRITERS);
}

/* Failed file creations and renames (a new WAL, table or manifest; CURRENT
 * replaced): the same contract. */
static void failed_opens_and_renames_lose_nothing(void **state) {
    (void)state;
    sweep(BKV_FAULT_OPEN, "open", 10, 1);
    sweep(BKV_FAULT_OPEN, "open-writers", 10, MAX_WRITERS);
    sweep(BKV_FAULT_RENAME, "rename", 1, 1);
}

/* Regression: a read error while replaying the WAL at open must fail the
 * open, not be taken for the end of the log (which would silently drop
 * acknowledged writes). */
static void wal_read_error_at_open_is_not_ignored(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/readerr", dir);
    bkv_options o = small_options();
    o.write_buffer_size = 1 << 20; /* everything stays in the WAL */
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    bkv_write_options wo = {.size = sizeof(bkv_write_options), .sync = 1};
    for (int i = 0; i < 50; i++) assert_int_equal(bkv_put(db, &wo, "k", 1, "v", 1), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
    int failed_opens = 0;
    for (uint64_t n = 1; n <= 4; n++) {
        bkv_fault_env *fe = bkv_fault_env_new();
        bkv_fault_env_fail_at(fe, BKV_FAULT_READ, n, BKV_FAULT_EIO, 0);
        int rc = bkv_open_env(path, &o, bkv_fault_env_get(fe), &db);
        if (bkv_fault_env_faults_injected(fe)) {
            assert_int_equal(rc, BKV_IOERROR);
            failed_opens++;
        } else if (rc == BKV_OK) {
            bkv_close(db);
        }
        bkv_fault_env_free(fe);
    }
    assert_true(failed_opens >= 2); /* CURRENT, the manifest, the WAL */
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    void *v;
    size_t n;
    assert_int_equal(bkv_get(db, NULL, "k", 1, &v, &n), BKV_OK);
    bkv_free(v);
    bkv_close(db);
}

/* Regression: junk at the end of the WAL after a power loss (a tail that
 * was allocated but never written) is dropped, never read as a value. */
static void junk_wal_tail_never_yields_a_damaged_value(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/junk", dir);
    bkv_options o = small_options();
    o.write_buffer_size = 1 << 20;
    for (int pattern = 0; pattern < 3; pattern++) {
        bkv_db *db;
        assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        bkv_write_options wo = {.size = sizeof(bkv_write_options), .sync = 1};
        char val[64];
        for (int i = 0; i < 20; i++) {
            val_of(val, i + 100 * pattern);
            assert_int_equal(bkv_put(db, &wo, "key", 3, val, strlen(val)), BKV_OK);
        }
        assert_int_equal(bkv_close(db), BKV_OK);
        /* Append junk to the newest log: zeros, 0xff, or a copy of a
         * valid-looking header with a wrong checksum. */
        char cmd[700];
        const char *junk = pattern == 0 ? "head -c 300 /dev/zero" : pattern == 1 ? "head -c 300 /dev/zero | tr '\\0' '\\377'"
                                                                   : "printf '\\x01\\x02\\x03\\x04\\x40\\x00\\x01'";
        snprintf(cmd, sizeof cmd, "f=$(ls %s/*.log | tail -1) && %s >> \"$f\"", path, junk);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        void *v;
        size_t n;
        assert_int_equal(bkv_get(db, NULL, "key", 3, &v, &n), BKV_OK);
        val_of(val, 19 + 100 * pattern);
        assert_int_equal(n, strlen(val));
        assert_memory_equal(v, val, n);
        bkv_free(v);
        assert_int_equal(bkv_close(db), BKV_OK);
    }
}

/* A table that cannot be read back once written (every read fails from
 * the flush on) never replaces its memtable: the flush fails, and after a
 * reopen every write is there, from the WAL. */
static void unreadable_new_table_replaces_nothing(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/unreadable", dir);
    bkv_options o = small_options();
    o.write_buffer_size = 1 << 20; /* only the explicit flush writes a table */
    bkv_fault_env *fe = bkv_fault_env_new();
    bkv_db *db;
    assert_int_equal(bkv_open_env(path, &o, bkv_fault_env_get(fe), &db), BKV_OK);
    char key[32], want[64];
    for (int k = 0; k < 200; k++) {
        key_of(key, k);
        val_of(want, k);
        assert_int_equal(bkv_put(db, NULL, key, strlen(key), want, strlen(want)), BKV_OK);
    }
    bkv_fault_env_fail_at(fe, BKV_FAULT_READ, 1, BKV_FAULT_EIO, 1); /* every read from the next one */
    assert_int_not_equal(bkv_flush(db), BKV_OK);
    assert_true(bkv_fault_env_faults_injected(fe) > 0);
    bkv_close(db);
    bkv_fault_env_free(fe);
    o.create_if_missing = 0;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int k = 0; k < 200; k++) {
        key_of(key, k);
        val_of(want, k);
        void *v;
        size_t n;
        assert_int_equal(bkv_get(db, NULL, key, strlen(key), &v, &n), BKV_OK);
        assert_memory_equal(v, want, strlen(want));
        bkv_free(v);
    }
    assert_int_equal(bkv_close(db), BKV_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_durability_point_survives_power_loss),
        cmocka_unit_test(concurrent_writers_survive_power_loss),
        cmocka_unit_test(checkpoint_survives_power_loss),
        cmocka_unit_test(failed_writes_make_the_database_read_only),
        cmocka_unit_test(failed_syncs_make_the_database_read_only),
        cmocka_unit_test(failed_opens_and_renames_lose_nothing),
        cmocka_unit_test(wal_read_error_at_open_is_not_ignored),
        cmocka_unit_test(junk_wal_tail_never_yields_a_damaged_value),
        cmocka_unit_test(unreadable_new_table_replaces_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
