/* kill -9 while flushes and compactions run, and sometimes while the
 * child is still recovering: after every crash the database holds exactly
 * the acknowledged writes (plus possibly the one in flight, of each of its
 * writers when several write at once), so compaction
 * never loses, resurrects or duplicates a key, and the value index finds
 * exactly what point reads see. Cycles per style: BKV_SCALE. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "test_db.h"
#include "test_dir.h"
#include "test_scale.h"

#define NKEYS 800
#define MAX_OPS 400000

TEST_DIR_FIXTURE("crash")

typedef struct op {
    int key;
    int del;
} op;

static op ops[MAX_OPS];

static void make_ops(uint64_t seed) {
    uint64_t s = seed;
    for (int i = 0; i < MAX_OPS; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        ops[i].key = (int)((s >> 33) % NKEYS);
        ops[i].del = (s >> 20) % 5 == 0;
    }
}

static void key_of(char *b, int k) { snprintf(b, 32, "key%05d", k); }
static void val_of(char *b, int i) { snprintf(b, 48, "value-of-op-%d-padding-padding", i); }

/* With several writers, three compacting threads too: kills land while
 * compactions run side by side. */
static bkv_options crash_options(int style, int writers) {
    bkv_options o;
    bkv_options_init(&o);
    if (writers > 1) o.max_background_jobs = 4;
    o.write_buffer_size = 8 * 1024;
    o.block_size = 512;
    o.compaction_style = style;
    o.max_bytes_for_level_base = 48 * 1024;
    o.target_file_size = 16 * 1024;
    o.level_size_multiplier = 4;
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    o.value_filter_bits = 1024;
    o.value_partition_entries = 32;
    return o;
}

/* The child's writers: writer t applies, in order, the ops from start[t]
 * on whose key it owns (key % writers == t), reporting each acknowledged
 * index; one writer owns every key. Several writers share the write
 * queue, group commit and concurrent memtable inserts, and each key keeps
 * one writer, so its history is still the script's. */
#define MAX_WRITERS 4

typedef struct writer {
    bkv_db *db;
    int t, writers, start, fd;
} writer;

static void *write_ops(void *arg) {
    const writer *w = arg;
    for (int i = w->start; i < MAX_OPS; i++) {
        if (ops[i].key % w->writers != w->t) continue;
        char k[32], v[48];
        key_of(k, ops[i].key);
        val_of(v, i);
        int rc = ops[i].del ? bkv_delete(w->db, NULL, k, strlen(k)) : bkv_put(w->db, NULL, k, strlen(k), v, strlen(v));
        if (rc != BKV_OK) _exit(3);
        if (write(w->fd, &i, sizeof i) != sizeof i) _exit(4); /* atomic: under PIPE_BUF */
    }
    return NULL;
}

static void child(const char *path, int style, int writers, const int *start, int fd) {
    bkv_options o = crash_options(style, writers);
    bkv_db *db;
    if (bkv_open(path, &o, &db) != BKV_OK) _exit(2);
    pthread_t th[MAX_WRITERS];
    writer w[MAX_WRITERS];
    for (int t = 0; t < writers; t++) {
        w[t] = (writer){db, t, writers, start[t], fd};
        if (t > 0 && pthread_create(&th[t], NULL, write_ops, &w[t])) _exit(5);
    }
    write_ops(&w[0]);
    for (int t = 1; t < writers; t++) pthread_join(th[t], NULL);
    _exit(0);
}

/* The op of writer t after its acknowledged one, which may have landed. */
static int in_flight(int writers, int t, int acked) {
    for (int i = acked + 1; i < MAX_OPS; i++)
        if (ops[i].key % writers == t) return i;
    return -1;
}

/* Expected: each writer's ops up to its acknowledged one; the op after it
 * may also have landed. */
static void verify(const char *path, int style, int writers, const int *acked) {
    static int last[NKEYS], maybe_of[NKEYS];
    for (int k = 0; k < NKEYS; k++) last[k] = maybe_of[k] = -1;
    for (int t = 0; t < writers; t++) {
        for (int i = 0; i <= acked[t]; i++)
            if (ops[i].key % writers == t) last[ops[i].key] = i;
        int maybe = in_flight(writers, t, acked[t]);
        if (maybe >= 0) maybe_of[ops[maybe].key] = maybe;
    }
    bkv_options o = crash_options(style, writers);
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int k = 0; k < NKEYS; k++) {
        char key[32], want[48];
        key_of(key, k);
        void *v;
        size_t n;
        int rc = bkv_get(db, NULL, key, strlen(key), &v, &n);
        int ok_old, ok_new = 0;
        int idx = last[k];
        if (idx < 0 || ops[idx].del) ok_old = rc == BKV_NOTFOUND;
        else {
            val_of(want, idx);
            ok_old = rc == BKV_OK && n == strlen(want) && memcmp(v, want, n) == 0;
        }
        int maybe = maybe_of[k];
        if (maybe >= 0) {
            if (ops[maybe].del) ok_new = rc == BKV_NOTFOUND;
            else {
                val_of(want, maybe);
                ok_new = rc == BKV_OK && n == strlen(want) && memcmp(v, want, n) == 0;
            }
        }
        if (!ok_old && !ok_new) fail_msg("key %d after op %d of its writer: rc %d", k, last[k], rc);
        /* The value index agrees with the point read (values are unique
         * per operation, so exactly this key holds it). */
        if (rc == BKV_OK && k % 8 == 0) {
            test_found f = {0, -1};
            assert_int_equal(bkv_find_value(db, NULL, v, n, test_on_found, &f, NULL), BKV_OK);
            if (f.n != 1 || f.key != k) fail_msg("find_value of key %d's value: %d results", k, f.n);
        }
        if (rc == BKV_OK) bkv_free(v);
    }
    /* A full scan agrees: no duplicates, no resurrected keys. */
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(db, NULL, &it), BKV_OK);
    int prev = -1;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) {
        size_t kl;
        const char *k = bkv_iter_key(it, &kl);
        char digits[16] = ""; /* the key is not NUL-terminated */
        if (kl > 3 && kl < sizeof digits) memcpy(digits, k + 3, kl - 3);
        int key = atoi(digits);
        assert_true(key > prev);
        prev = key;
        int idx = last[key];
        int live_old = idx >= 0 && !ops[idx].del;
        int live_new = maybe_of[key] >= 0 && !ops[maybe_of[key]].del;
        if (!live_old && !live_new) fail_msg("scan shows deleted key %d", key);
    }
    assert_int_equal(bkv_iter_status(it), BKV_OK);
    bkv_iter_destroy(it);
    assert_int_equal(bkv_close(db), BKV_OK);
}

typedef struct check_problems {
    int torn_tails, other;
    char first[600];
} check_problems;

/* A torn tail is an append the kill cut short: of the newest WAL, or of
 * the manifest, whose record reaches the file in more than one write()
 * when it crosses the writer's buffer (and a kill can stop one write()
 * between pages). It was never acknowledged, and open drops it. */
static void count_problem(void *arg, const char *problem) {
    check_problems *cp = arg;
    int torn = strstr(problem, ": torn tail of ") != NULL;
    if (!cp->torn_tails && !cp->other) snprintf(cp->first, sizeof cp->first, "%s", problem);
    cp->torn_tails += torn;
    cp->other += !torn;
}

/* Reads acknowledged indices until wait_for of them came (or the child
 * ended), kills the child, then reads what it had acknowledged before it
 * died: each writer's newest goes to acked. */
static void kill_after(pid_t pid, int fd, uint64_t wait_for, int writers, int *acked, int *status) {
    int got;
    for (uint64_t seen = 0; seen < wait_for && read(fd, &got, sizeof got) == sizeof got; seen++)
        acked[ops[got].key % writers] = got;
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    while (read(fd, &got, sizeof got) == sizeof got) acked[ops[got].key % writers] = got;
    close(fd);
}

static void crash_loop(int style, const char *name, int writers, int rounds, uint64_t seed) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint64_t rng = 77;
    int acked[MAX_WRITERS];
    for (int t = 0; t < writers; t++) acked[t] = -1;
    int rounds_done = 0, during_open = 0;
    make_ops(seed);
    for (int r = 0; r < rounds; r++) {
        /* A new database and new ops once any writer nears the script's
         * end: the ops left must outlast the longest round (14,000 acks),
         * or the child finishes them and is never killed. Each of several
         * writers owns only its share of the ops past its index, so every
         * writer needs 20,000 indices left, not merely the slowest. */
        int furthest = -1;
        for (int t = 0; t < writers; t++) furthest = acked[t] > furthest ? acked[t] : furthest;
        if (furthest >= MAX_OPS - 20000) {
            test_remove_dir(path);
            make_ops(++seed);
            for (int t = 0; t < writers; t++) acked[t] = -1;
        }
        int start[MAX_WRITERS];
        for (int t = 0; t < writers; t++) start[t] = acked[t] + 1;
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child(path, style, writers, start, fds[1]);
        }
        close(fds[1]);
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        /* One round in eight kills the child within its first few writes,
         * or before it has finished opening (recovering) at all. */
        int early = r % 8 == 7;
        int wait_for = early ? (r / 8 % 2 ? 0 : 1 + (int)((rng >> 33) % 3)) : 2000 + (int)((rng >> 33) % 12000);
        during_open += early && wait_for == 0;
        int status;
        kill_after(pid, fds[0], (uint64_t)wait_for, writers, acked, &status);
        if (WIFEXITED(status)) fail_msg("child exited with %d", WEXITSTATUS(status));
        /* Every checksum and invariant holds after the kill (a write cut
         * short at the end of the newest WAL aside) and after recovery. */
        check_problems cp = {0, 0, ""};
        bkv_check(path, count_problem, &cp);
        if (cp.other) fail_msg("after the kill, check reports: %s", cp.first);
        verify(path, style, writers, acked);
        cp = (check_problems){0, 0, ""};
        bkv_check(path, count_problem, &cp);
        if (cp.torn_tails || cp.other) fail_msg("after recovery, check reports: %s", cp.first);
        rounds_done++;
    }
    assert_true(rounds_done > 0);
    test_report(writers > 1 ? "crash_cycles_concurrent_writers" : "crash_cycles", (unsigned long long)rounds_done);
    test_report("crashes_during_open", (unsigned long long)during_open);
}

static void kill_during_leveled_compaction(void **state) {
    (void)state;
    crash_loop(BKV_COMPACTION_LEVELED, "leveled", 1, test_scale_pick(12, 100, 1000), 1);
}

static void kill_during_tiered_compaction(void **state) {
    (void)state;
    crash_loop(BKV_COMPACTION_TIERED, "tiered", 1, test_scale_pick(12, 100, 1000), 1000);
}

/* Four writers at once, and compactions side by side: what each writer
 * acknowledged survives, and of what was in flight at most each writer's
 * next op, so a recovered database is a prefix of the WAL's groups with
 * no gap in any writer's history. */
static void kill_with_concurrent_writers(void **state) {
    (void)state;
    crash_loop(BKV_COMPACTION_LEVELED, "writers", MAX_WRITERS, test_scale_pick(12, 100, 1000), 2000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kill_during_leveled_compaction),
        cmocka_unit_test(kill_during_tiered_compaction),
        cmocka_unit_test(kill_with_concurrent_writers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
