/* The engine end to end through the public API: a model-based randomized
 * test with reopens and hundreds of tables, crash recovery, hash sharing,
 * corruption reporting and locking. Seeds are fixed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "test_db.h"
#include "util/buf.h"
#include "test_dir.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

TEST_DIR_FIXTURE("db")

static bkv_options small_options(void) {
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 8 * 1024;
    o.block_size = 512;
    o.block_cache_size = 256 * 1024;
    return o;
}

/* Level 0 only: every flush stays a table of its own. */
static void no_compaction(bkv_options *o) {
    o->level0_compaction_trigger = o->level0_slowdown_trigger = o->level0_stop_trigger = 1 << 20;
    o->compact_for_reads = 0;
}


static size_t files_at_level0(bkv_db *db) {
    char *v = bkv_property(db, "bloomkv.num-files-at-level0");
    assert_non_null(v);
    size_t n = strtoul(v, NULL, 10);
    bkv_free(v);
    return n;
}

static void check_value(bkv_db *db, const char *key, const char *want) {
    void *v;
    size_t n;
    int rc = bkv_get(db, NULL, key, strlen(key), &v, &n);
    if (!want) {
        if (rc != BKV_NOTFOUND) fail_msg("key %s: expected not found, rc %d", key, rc);
        return;
    }
    if (rc != BKV_OK) fail_msg("key %s: rc %d (%s)", key, rc, bkv_errmsg(db));
    assert_int_equal(n, strlen(want));
    assert_memory_equal(v, want, n);
    bkv_free(v);
}

static void basic_operations_and_reopen(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/basic", dir);
    bkv_db *db;
    assert_int_equal(bkv_open(path, NULL, &db), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "a", 1, "1", 1), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "b", 1, "2", 1), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "", 0, "empty", 5), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "bin\0key", 7, "\0\1\2", 3), BKV_OK);
    assert_int_equal(bkv_delete(db, NULL, "b", 1), BKV_OK);
    bkv_batch *b = bkv_batch_create();
    assert_int_equal(bkv_batch_put(b, "c", 1, "3", 1), BKV_OK);
    assert_int_equal(bkv_batch_delete(b, "a", 1), BKV_OK);
    assert_int_equal(bkv_batch_put(b, "a", 1, "4", 1), BKV_OK);
    assert_int_equal(bkv_batch_count(b), 3);
    assert_int_equal(bkv_write(db, NULL, b), BKV_OK);
    bkv_batch_destroy(b);
    check_value(db, "a", "4");
    check_value(db, "b", NULL);
    check_value(db, "c", "3");
    check_value(db, "", "empty");
    void *v;
    size_t n;
    assert_int_equal(bkv_get(db, NULL, "bin\0key", 7, &v, &n), BKV_OK);
    assert_int_equal(n, 3);
    assert_memory_equal(v, "\0\1\2", 3);
    bkv_free(v);
    /* A second open is refused while this one is live. */
    bkv_db *other;
    assert_int_equal(bkv_open(path, NULL, &other), BKV_BUSY);
    /* And so is one from another process. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(bkv_open(path, NULL, &other) == BKV_BUSY ? 0 : 1);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(bkv_close(db), BKV_OK);

    /* Reopen: recovered from the WAL. */
    assert_int_equal(bkv_open(path, NULL, &db), BKV_OK);
    check_value(db, "a", "4");
    check_value(db, "b", NULL);
    check_value(db, "c", "3");
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(files_at_level0(db), 1);
    check_value(db, "c", "3");
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_open(path, NULL, &db), BKV_OK);
    check_value(db, "a", "4");
    check_value(db, "b", NULL);
    assert_int_equal(bkv_close(db), BKV_OK);

    bkv_options o;
    bkv_options_init(&o);
    o.error_if_exists = 1;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    bkv_options_init(&o);
    o.create_if_missing = 0;
    snprintf(path, sizeof path, "%s/missing", dir);
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    o.create_if_missing = 1;
    o.block_size = 1;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    bkv_options_init(&o);
    o.compaction_nice = 20;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "compaction_nice"));
    bkv_options_init(&o);
    o.max_subcompactions = 9;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "max_subcompactions"));
}

/* The nice value of this process's thread tid (field 19 of its stat), or
 * -100 for a thread that ended since its directory was listed. */
static int thread_nice(const char *tid) {
    char p[300], line[1024];
    snprintf(p, sizeof p, "/proc/self/task/%s/stat", tid);
    FILE *f = fopen(p, "r");
    if (!f) return -100;
    size_t len = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[len] = 0;
    const char *after_name = strrchr(line, ')'); /* the name may hold spaces */
    int nice;
    assert_non_null(after_name);
    assert_int_equal(sscanf(after_name + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %d",
                            &nice), 1);
    return nice;
}

/* How many threads of this process run at the main thread's nice + delta. */
static int threads_at_nice(int delta) {
    char self[32];
    snprintf(self, sizeof self, "%d", (int)getpid());
    int base = thread_nice(self), n = 0;
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d));)
        if (de->d_name[0] != '.' && strcmp(de->d_name, self) != 0) n += thread_nice(de->d_name) == base + delta;
    closedir(d);
    return n;
}

/* Asked to, the compaction thread runs below the caller's priority and
 * the flushing one at it (bkv_options.compaction_nice); a single thread is
 * never lowered, nor any by default. */
static void compaction_thread_priority(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/nice", dir);
    struct { int jobs, nice, lowered; } cases[] = {{2, 10, 1}, {2, 3, 1}, {2, 0, 0}, {1, 10, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        bkv_options o;
        bkv_options_init(&o);
        o.max_background_jobs = cases[c].jobs;
        o.compaction_nice = cases[c].nice;
        int delta = cases[c].nice ? cases[c].nice : 10;
        bkv_db *db;
        assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        /* Each thread lowers itself as it starts. */
        for (int tries = 0; tries < 1000 && threads_at_nice(delta) < cases[c].lowered; tries++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        assert_int_equal(threads_at_nice(delta), cases[c].lowered);
        assert_int_equal(bkv_close(db), BKV_OK);
    }
}

#define MODEL_KEYS 3000

/* multi_get of 64 random keys agrees with the model: keys in no table,
 * keys before and after every table, and keys asked twice among them. */
static void check_multi_get(bkv_db *db, char **model, uint64_t *rng) {
    const void *keys[64];
    size_t klens[64];
    char kbuf[64][32];
    int want_k[64];
    void *vals[64];
    size_t vlens[64];
    int st[64];
    for (int i = 0; i < 64; i++) {
        uint64_t r = rng_next(rng);
        int k = i > 0 && r % 8 == 0 ? want_k[r % (uint64_t)i] : (int)(r % (MODEL_KEYS + 100));
        want_k[i] = k;
        if (r % 31 == 0) snprintf(kbuf[i], sizeof kbuf[i], "a%d", k), want_k[i] = -1;
        else if (r % 37 == 0) snprintf(kbuf[i], sizeof kbuf[i], "zz%d", k), want_k[i] = -1;
        else snprintf(kbuf[i], sizeof kbuf[i], "key%06d", k);
        keys[i] = kbuf[i];
        klens[i] = strlen(kbuf[i]);
    }
    assert_int_equal(bkv_multi_get(db, NULL, 64, keys, klens, vals, vlens, st), BKV_OK);
    for (int i = 0; i < 64; i++) {
        int k = want_k[i];
        const char *want = k >= 0 && k < MODEL_KEYS ? model[k] : NULL;
        if (!want) {
            assert_int_equal(st[i], BKV_NOTFOUND);
            assert_null(vals[i]);
        } else {
            if (st[i] != BKV_OK) fail_msg("multi_get %s: status %d, model has %s", kbuf[i], st[i], want);
            assert_int_equal(vlens[i], strlen(want));
            assert_memory_equal(vals[i], want, vlens[i]);
            bkv_free(vals[i]);
        }
    }
}

/* Random puts, deletes, batches and gets against an in-memory model, with
 * tiny memtables and periodic reopens. */
static void run_model(const char *name, bkv_options o, size_t min_tables) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char **model = calloc(MODEL_KEYS, sizeof *model);
    assert_non_null(model);
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    uint64_t rng = 12345;
    const int ops = 150000;
    for (int op = 0; op < ops; op++) {
        uint64_t r = rng_next(&rng);
        int k = (int)(r % MODEL_KEYS);
        char key[32], val[64];
        snprintf(key, sizeof key, "key%06d", k);
        int kind = (int)((r >> 32) % 100);
        if (kind < 35) {
            snprintf(val, sizeof val, "v%d-%llu", k, (unsigned long long)(r >> 40));
            assert_int_equal(bkv_put(db, NULL, key, strlen(key), val, strlen(val)), BKV_OK);
            free(model[k]);
            model[k] = strdup(val);
        } else if (kind < 45) {
            assert_int_equal(bkv_delete(db, NULL, key, strlen(key)), BKV_OK);
            free(model[k]);
            model[k] = NULL;
        } else if (kind < 50) {
            bkv_batch *b = bkv_batch_create();
            for (int j = 0; j < 5; j++) {
                int kk = (k + j * 7) % MODEL_KEYS;
                char bk[32];
                snprintf(bk, sizeof bk, "key%06d", kk);
                free(model[kk]);
                if (j == 2) {
                    bkv_batch_delete(b, bk, strlen(bk));
                    model[kk] = NULL;
                } else {
                    snprintf(val, sizeof val, "b%d-%d", op, j);
                    bkv_batch_put(b, bk, strlen(bk), val, strlen(val));
                    model[kk] = strdup(val);
                }
            }
            assert_int_equal(bkv_write(db, NULL, b), BKV_OK);
            bkv_batch_destroy(b);
        } else {
            check_value(db, key, model[k]);
        }
        if (op % 5000 == 4999) check_multi_get(db, model, &rng);
        if (op % 40000 == 39999) {
            assert_int_equal(bkv_close(db), BKV_OK);
            assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        }
    }
    assert_true(files_at_level0(db) >= min_tables);
    if (o.compaction_style == BKV_COMPACTION_LEVELED && min_tables == 0) assert_true(test_counter(db, "compactions") > 0);
    for (int k = 0; k < MODEL_KEYS; k++) {
        char key[32];
        snprintf(key, sizeof key, "key%06d", k);
        check_value(db, key, model[k]);
    }
    check_multi_get(db, model, &rng);
    assert_int_equal(bkv_close(db), BKV_OK);
    for (int k = 0; k < MODEL_KEYS; k++) free(model[k]);
    free(model);
}

/* Hundreds of level-0 tables: every get asks every table's filter. */
static void model_based_random_operations(void **state) {
    (void)state;
    bkv_options o = small_options();
    no_compaction(&o);
    run_model("model", o, 100);
}

/* Leveled, with levels small enough that the model's writes reach
 * several of them. */
static bkv_options leveled_options(uint64_t level_base, uint64_t target_file_size) {
    bkv_options o = small_options();
    o.max_bytes_for_level_base = level_base;
    o.target_file_size = target_file_size;
    o.level_size_multiplier = 4;
    return o;
}

static void model_with_leveled_compaction(void **state) {
    (void)state;
    bkv_options o = leveled_options(64 * 1024, 16 * 1024);
    /* Blocked Bloom where tables come and go, Ribbon (built once, ~30%
     * smaller) below. */
    bkv_level_options levels[BKV_MAX_LEVELS] = {{.filter_type = -1}};
    for (int l = 1; l < BKV_MAX_LEVELS; l++) levels[l].filter_type = BKV_FILTER_RIBBON;
    o.level_options = levels;
    o.level_options_count = BKV_MAX_LEVELS;
    run_model("leveled", o, 0);
}

/* Three compacting threads: compactions of different levels (level 0
 * while a deeper one runs) and of disjoint tables of one level run side
 * by side, and commit their edits in turn, with flushes beside them. */
static void model_with_concurrent_compactions(void **state) {
    (void)state;
    bkv_options o = leveled_options(32 * 1024, 4 * 1024);
    o.max_background_jobs = 4;
    run_model("concurrent", o, 0);
}

/* Compactions cut into four key ranges merged at once: every range's
 * tables join one edit, keys at the cuts are neither lost nor doubled. */
static void model_with_subcompactions(void **state) {
    (void)state;
    bkv_options o = leveled_options(64 * 1024, 8 * 1024);
    o.max_subcompactions = 4;
    run_model("subcompactions", o, 0);
    bkv_db *db;
    char path[300];
    snprintf(path, sizeof path, "%s/subcompactions", dir);
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    /* The whole key range compacted again, through the cuts: the same rows
     * in the same order afterwards. */
    bkv_buf before, after;
    bkv_buf_init(&before);
    bkv_buf_init(&after);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
        bkv_buf *rows = pass ? &after : &before;
        bkv_iter *it;
        assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
        for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) {
            size_t kl, vl;
            const void *k = bkv_iter_key(it, &kl), *v = bkv_iter_value(it, &vl);
            assert_int_equal(bkv_buf_put_varint(rows, kl) || bkv_buf_append(rows, k, kl) ||
                                 bkv_buf_put_varint(rows, vl) || bkv_buf_append(rows, v, vl),
                             0);
        }
        assert_int_equal(bkv_iter_status(it), BKV_OK);
        bkv_iter_destroy(it);
    }
    assert_true(test_counter(db, "subcompactions") > 0);
    assert_true(before.len > 0);
    assert_int_equal(after.len, before.len);
    assert_memory_equal(after.data, before.data, before.len);
    bkv_buf_free(&before);
    bkv_buf_free(&after);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void model_with_tiered_compaction(void **state) {
    (void)state;
    bkv_options o = small_options();
    o.compaction_style = BKV_COMPACTION_TIERED;
    o.filter_type = BKV_FILTER_FUSE16;
    run_model("tiered", o, 0);
}

/* Keys of lengths around the 256 bytes multi_get prefetches for, in a
 * deeper level, a level-0 table and the memtable, read back in one batch
 * with absent keys as long. */
static void multi_get_with_long_keys(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/long-keys", dir);
    bkv_options o = small_options();
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    static const size_t lens[] = {1, 200, 247, 248, 249, 255, 256, 300, 5000};
    enum { N = sizeof lens / sizeof lens[0] };
    char *keys[2 * N];
    for (size_t i = 0; i < 2 * N; i++) {
        size_t n = lens[i % N];
        keys[i] = malloc(n);
        assert_non_null(keys[i]);
        memset(keys[i], i < N ? 'k' : 'a', n);
        keys[i][0] = (char)((i < N ? 'A' : 'a') + i % N); /* the second half is never written */
    }
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(bkv_put(db, NULL, keys[i], lens[i], &keys[i][0], 1), BKV_OK);
        if (i == N / 2) assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK); /* a deeper level */
        if (i == N - 2) assert_int_equal(bkv_flush(db), BKV_OK);
    }
    const void *k[2 * N];
    size_t kl[2 * N], vl[2 * N];
    void *v[2 * N];
    int st[2 * N];
    for (size_t i = 0; i < 2 * N; i++) k[i] = keys[i], kl[i] = lens[i % N];
    assert_int_equal(bkv_multi_get(db, NULL, 2 * N, k, kl, v, vl, st), BKV_OK);
    for (size_t i = 0; i < 2 * N; i++) {
        if (i >= N) {
            assert_int_equal(st[i], BKV_NOTFOUND);
            continue;
        }
        assert_int_equal(st[i], BKV_OK);
        assert_int_equal(vl[i], 1);
        assert_memory_equal(v[i], &keys[i][0], 1);
        bkv_free(v[i]);
    }
    for (size_t i = 0; i < 2 * N; i++) free(keys[i]);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* One hash per get, however many tables there are. */
static void one_hash_per_get_with_200_tables(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/hash", dir);
    bkv_options o = small_options();
    no_compaction(&o);
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int t = 0; t < 200; t++) {
        for (int i = 0; i < 5; i++) {
            char key[32];
            snprintf(key, sizeof key, "t%03d-%d", t, i);
            assert_int_equal(bkv_put(db, NULL, key, strlen(key), "v", 1), BKV_OK);
        }
        /* Every table spans the whole key range, so all are candidates. */
        assert_int_equal(bkv_put(db, NULL, "a", 1, "v", 1), BKV_OK);
        assert_int_equal(bkv_put(db, NULL, "z", 1, "v", 1), BKV_OK);
        assert_int_equal(bkv_flush(db), BKV_OK);
    }
    assert_int_equal(files_at_level0(db), 200);
    uint64_t hashes = test_counter(db, "key-hashes"), probes = test_counter(db, "filter-probes");
    uint64_t negatives = test_counter(db, "filter-negatives");
    void *v;
    size_t n;
    assert_int_equal(bkv_get(db, NULL, "m-absent", 8, &v, &n), BKV_NOTFOUND);
    assert_int_equal(test_counter(db, "key-hashes") - hashes, 1);
    assert_int_equal(test_counter(db, "filter-probes") - probes, 200);
    assert_true(test_counter(db, "filter-negatives") - negatives >= 190);
    assert_int_equal(bkv_get(db, NULL, "t000-3", 6, &v, &n), BKV_OK);
    bkv_free(v);
    assert_int_equal(test_counter(db, "key-hashes") - hashes, 2);
    char *report = bkv_property(db, "bloomkv.stats");
    assert_non_null(report);
    assert_non_null(strstr(report, "L0"));
    bkv_free(report);
    assert_null(bkv_property(db, "bloomkv.nope"));
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* A child writes with sync and reports each acknowledged key through a
 * pipe; the parent kills it mid-stream and checks every acknowledged write
 * survived. */
static void synced_writes_survive_kill_9(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/crash", dir);
    for (int round = 0; round < 5; round++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            bkv_options o = small_options();
            o.wal_mmap = round != 1 && round != 2; /* the mapped WAL and write() per group, synced or not */
            bkv_db *db;
            if (bkv_open(path, &o, &db) != BKV_OK) _exit(2);
            bkv_write_options wo = {.size = sizeof(bkv_write_options), .sync = round % 2 == 0};
            for (uint32_t i = 0;; i++) {
                char key[32], val[32];
                snprintf(key, sizeof key, "r%d-%06u", round, i);
                snprintf(val, sizeof val, "val-%u", i);
                if (bkv_put(db, &wo, key, strlen(key), val, strlen(val)) != BKV_OK) _exit(3);
                if (write(fds[1], &i, sizeof i) != sizeof i) _exit(4);
            }
        }
        close(fds[1]);
        int status;
        uint32_t acked = test_kill_after(pid, fds[0], 300 + 200 * (uint64_t)round, 0, &status);
        bkv_options o = small_options();
        bkv_db *db;
        assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        for (int r = 0; r <= round; r++) {
            uint32_t upto = r == round ? acked : 299; /* every round saw at least 300 acks */
            for (uint32_t i = 0; i <= upto; i++) {
                char key[32], val[32];
                snprintf(key, sizeof key, "r%d-%06u", r, i);
                snprintf(val, sizeof val, "val-%u", i);
                check_value(db, key, val);
            }
        }
        assert_int_equal(bkv_close(db), BKV_OK);
    }
}

static void corrupt_table_is_reported_not_misread(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/corrupt", dir);
    bkv_options o = small_options();
    o.block_cache_size = 0;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int i = 0; i < 50; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%03d", i);
        assert_int_equal(bkv_put(db, NULL, key, strlen(key), "value-value-value", 17), BKV_OK);
    }
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
    /* Flip a byte in the first data block of the one table. */
    char cmd[700];
    snprintf(cmd, sizeof cmd,
             "f=$(ls %s/*.sst | head -1) && printf '\\x55' | dd of=\"$f\" bs=1 seek=20 conv=notrunc status=none", path);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    void *v;
    size_t n;
    assert_int_equal(bkv_get(db, NULL, "k000", 4, &v, &n), BKV_CORRUPTION);
    assert_non_null(strstr(bkv_errmsg(db), ".sst"));
    assert_non_null(strstr(bkv_errmsg(db), "offset 0"));
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void damaged_wal_middle_is_corruption(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/walbad", dir);
    bkv_options o;
    bkv_options_init(&o);
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    char val[1000];
    memset(val, 'x', sizeof val);
    for (int i = 0; i < 200; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%03d", i);
        assert_int_equal(bkv_put(db, NULL, key, strlen(key), val, sizeof val), BKV_OK);
    }
    assert_int_equal(bkv_close(db), BKV_OK);
    char cmd[700];
    snprintf(cmd, sizeof cmd,
             "f=$(ls %s/*.log | tail -1) && printf '\\x55' | dd of=\"$f\" bs=1 seek=5000 conv=notrunc status=none", path);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(bkv_open(path, &o, &db), BKV_CORRUPTION);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(basic_operations_and_reopen),
        cmocka_unit_test(compaction_thread_priority),
        cmocka_unit_test(model_based_random_operations),
        cmocka_unit_test(model_with_leveled_compaction),
        cmocka_unit_test(model_with_subcompactions),
        cmocka_unit_test(model_with_concurrent_compactions),
        cmocka_unit_test(model_with_tiered_compaction),
        cmocka_unit_test(multi_get_with_long_keys),
        cmocka_unit_test(one_hash_per_get_with_200_tables),
        cmocka_unit_test(synced_writes_survive_kill_9),
        cmocka_unit_test(corrupt_table_is_reported_not_misread),
        cmocka_unit_test(damaged_wal_middle_is_corruption),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
