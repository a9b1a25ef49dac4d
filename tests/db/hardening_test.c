/* Regression tests for the outside attack, each case as it was
 * found, plus its siblings: links planted in the database directory, file
 * modes, a deleted LOCK, damage in the WAL before intact records, errors
 * that must keep their reason, and the library's argument contract. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "bloomkv.h"
#include "db/write_batch.h"
#include "test_dir.h"
#include "util/env.h"
#include "log/log.h"

TEST_DIR_FIXTURE("hardening")

static void sub(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int file_is(const char *path, const char *text) {
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strcmp(buf, text) == 0;
}

static void put_some(bkv_db *db, int from, int to) {
    char k[32], v[64];
    for (int i = from; i < to; i++) {
        snprintf(k, sizeof k, "key%05d", i);
        snprintf(v, sizeof v, "value-%05d-padding-padding", i);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
    }
}

/* A link planted where the engine creates a file is never written through:
 * the temporary CURRENT, the LOCK file, and file names it will use. */
static void planted_links_are_never_followed(void **state) {
    (void)state;
    char db[300], victim[300], link[400], target[300];
    sub(db, sizeof db, "links");
    sub(victim, sizeof victim, "victim");
    write_file(victim, "secret");
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 4096;
    bkv_db *d;
    assert_int_equal(bkv_open(db, &o, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    snprintf(link, sizeof link, "%s/CURRENT.tmp", db);
    assert_int_equal(symlink(victim, link), 0);
    /* Names the next tables would take if numbering ignored them. */
    for (int n = 5; n <= 11; n += 2) {
        snprintf(link, sizeof link, "%s/%06d.sst", db, n);
        assert_int_equal(symlink(victim, link), 0);
    }
    assert_int_equal(bkv_open(db, &o, &d), BKV_OK);
    put_some(d, 0, 500);
    assert_int_equal(bkv_flush(d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    assert_true(file_is(victim, "secret"));
    assert_int_equal(bkv_open(db, &o, &d), BKV_OK);
    void *v;
    size_t vl;
    assert_int_equal(bkv_get(d, NULL, "key00499", 8, &v, &vl), BKV_OK);
    bkv_free(v);
    assert_int_equal(bkv_close(d), BKV_OK);
    assert_true(file_is(victim, "secret"));

    /* A link posing as a WAL is read (it could be one) but never written:
     * garbage with nothing valid after it reads as a torn tail, and the
     * link (not its target) is removed once the WAL is obsolete. */
    char db3[300];
    sub(db3, sizeof db3, "log-link");
    assert_int_equal(mkdir(db3, 0755), 0);
    snprintf(link, sizeof link, "%s/000002.log", db3);
    assert_int_equal(symlink(victim, link), 0);
    assert_int_equal(bkv_open(db3, NULL, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    assert_true(file_is(victim, "secret"));
    struct stat lst;
    assert_int_equal(lstat(link, &lst), -1);

    /* A dangling LOCK link: refused, and its target never created. */
    char db2[300];
    sub(db2, sizeof db2, "lock-link");
    sub(target, sizeof target, "lock-target");
    assert_int_equal(mkdir(db2, 0755), 0);
    snprintf(link, sizeof link, "%s/LOCK", db2);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(bkv_open(db2, NULL, &d), BKV_IOERROR);
    assert_non_null(strstr(bkv_errmsg(NULL), "symbolic link"));
    assert_int_equal(access(target, F_OK), -1);
}

static mode_t mode_of(const char *path) {
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

/* file_mode sets every file's mode (less the umask); 0600 keeps the data
 * private even under a permissive umask. */
static void file_mode_applies_to_every_file(void **state) {
    (void)state;
    mode_t old = umask(0);
    for (int private_ = 0; private_ < 2; private_++) {
        char db[300], p[400];
        sub(db, sizeof db, private_ ? "private" : "shared");
        bkv_options o;
        bkv_options_init(&o);
        assert_int_equal(o.file_mode, 0644);
        if (private_) o.file_mode = 0600;
        o.write_buffer_size = 4096;
        bkv_db *d;
        assert_int_equal(bkv_open(db, &o, &d), BKV_OK);
        put_some(d, 0, 300);
        assert_int_equal(bkv_flush(d), BKV_OK);
        assert_int_equal(bkv_close(d), BKV_OK);
        assert_int_equal(mode_of(db), private_ ? 0700 : 0755);
        const char *names[] = {"CURRENT", "LOCK"};
        for (int i = 0; i < 2; i++) {
            snprintf(p, sizeof p, "%s/%s", db, names[i]);
            assert_int_equal(mode_of(p), o.file_mode);
        }
        int tables = 0, logs = 0, manifests = 0;
        for (int n = 1; n < 200; n++) {
            const char *fmt[] = {"%s/%06d.sst", "%s/%06d.log", "%s/MANIFEST-%06d"};
            for (int k = 0; k < 3; k++) {
                snprintf(p, sizeof p, fmt[k], db, n);
                if (access(p, F_OK) != 0) continue;
                assert_int_equal(mode_of(p), o.file_mode);
                tables += k == 0, logs += k == 1, manifests += k == 2;
            }
        }
        assert_true(tables > 0 && logs > 0 && manifests > 0);
    }
    umask(old);
    bkv_options o;
    bkv_options_init(&o);
    o.file_mode = 0444; /* the engine could not write its own files */
    bkv_db *d;
    char db[300];
    sub(db, sizeof db, "badmode");
    assert_int_equal(bkv_open(db, &o, &d), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "file_mode"));
}

/* The lock lives on the directory: deleting LOCK under a live writer does
 * not let a second one in, and check says "in use" rather than reporting
 * the writer's unsynced tail as damage. */
static void deleted_lock_file_keeps_the_lock(void **state) {
    (void)state;
    char db[300], lock[400];
    sub(db, sizeof db, "lock");
    bkv_db *a, *b;
    assert_int_equal(bkv_open(db, NULL, &a), BKV_OK);
    put_some(a, 0, 10);
    snprintf(lock, sizeof lock, "%s/LOCK", db);
    assert_int_equal(unlink(lock), 0);
    assert_int_equal(bkv_open(db, NULL, &b), BKV_BUSY);
    assert_non_null(strstr(bkv_errmsg(NULL), "in use"));
    assert_int_equal(bkv_check(db, NULL, NULL), BKV_BUSY);
    assert_non_null(strstr(bkv_errmsg(NULL), "in use"));
    assert_int_equal(bkv_close(a), BKV_OK);
    assert_int_equal(bkv_open(db, NULL, &b), BKV_OK);
    assert_int_equal(bkv_close(b), BKV_OK);
    /* Two checks may run at once; a writer may not open beside one (the
     * shared lock is taken in bkv_check itself, so this is exercised by
     * the CLI test; here: a check after close finds nothing wrong). */
    assert_int_equal(bkv_check(db, NULL, NULL), BKV_OK);
}

/* Writes n records (one put each) into the WAL of a new database at path
 * and closes it without a flush; returns the WAL's path in wal. */
static void wal_only_database(const char *path, int n, char *wal, size_t wlen) {
    bkv_db *d;
    assert_int_equal(bkv_open(path, NULL, &d), BKV_OK);
    put_some(d, 0, n);
    assert_int_equal(bkv_close(d), BKV_OK);
    snprintf(wal, wlen, "%s/000002.log", path);
    assert_int_equal(access(wal, F_OK), 0);
}

static void flip_byte(const char *path, long off) { assert_int_equal(test_xor_byte(path, off, 0x20), 0); }

static int count_keys(bkv_db *d) {
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(d, NULL, &it), BKV_OK);
    int n = 0;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) n++;
    assert_int_equal(bkv_iter_status(it), BKV_OK);
    bkv_iter_destroy(it);
    return n;
}

static void count_problem(void *arg, const char *p) {
    (void)p;
    ++*(int *)arg;
}

/* Keeps the problems check reports, one line each, in a 600-byte buffer. */
static void keep_problem(void *arg, const char *p) {
    char *out = arg;
    size_t used = strlen(out);
    snprintf(out + used, 600 - used, "%s\n", p);
}

/* Damage in the last block of the newest WAL with intact records after it
 * is not a torn tail: refused by default, recovered as asked otherwise,
 * and reported by check in every case. Each record is one put of ~46
 * bytes, so a flip at offset 4000 hits one record in the middle. */
static void wal_damage_before_intact_records(void **state) {
    (void)state;
    const int modes[] = {BKV_WAL_RECOVERY_ABSOLUTE, BKV_WAL_RECOVERY_POINT_IN_TIME, BKV_WAL_RECOVERY_SKIP_DAMAGED};
    for (int m = 0; m < 3; m++) {
        char db[300], wal[400];
        snprintf(db, sizeof db, "%s/wal%d", dir, m);
        wal_only_database(db, 300, wal, sizeof wal);
        flip_byte(wal, 4000);
        int problems = 0;
        assert_int_equal(bkv_check(db, count_problem, &problems), BKV_CORRUPTION);
        assert_int_equal(problems, 1);
        bkv_options o;
        bkv_options_init(&o);
        o.create_if_missing = 0;
        o.wal_recovery = modes[m];
        bkv_db *d;
        int rc = bkv_open(db, &o, &d);
        if (modes[m] == BKV_WAL_RECOVERY_ABSOLUTE) {
            assert_int_equal(rc, BKV_CORRUPTION);
            assert_non_null(strstr(bkv_errmsg(NULL), "000002.log"));
            assert_non_null(strstr(bkv_errmsg(NULL), "offset"));
            assert_non_null(strstr(bkv_errmsg(NULL), "valid records after it"));
            continue;
        }
        assert_int_equal(rc, BKV_OK);
        int n = count_keys(d);
        if (modes[m] == BKV_WAL_RECOVERY_POINT_IN_TIME) {
            assert_true(n > 50 && n < 100); /* everything before the damage, nothing after */
            void *v;
            size_t vl;
            assert_int_equal(bkv_get(d, NULL, "key00299", 8, &v, &vl), BKV_NOTFOUND);
        } else {
            assert_int_equal(n, 299); /* only the damaged record is lost */
        }
        assert_int_equal(bkv_close(d), BKV_OK);
        problems = 0;
        assert_int_equal(bkv_check(db, count_problem, &problems), BKV_OK); /* recovered state is sound */
    }
    /* The same flip with nothing valid after it is a torn tail: dropped
     * silently in every mode. */
    char db[300], wal[400];
    sub(db, sizeof db, "torn");
    wal_only_database(db, 300, wal, sizeof wal);
    struct stat st;
    assert_int_equal(stat(wal, &st), 0);
    flip_byte(wal, (long)st.st_size - 5);
    bkv_db *d;
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_int_equal(count_keys(d), 299);
    assert_int_equal(bkv_close(d), BKV_OK);
}

/* Writes WAL number n in dir: with WAL_MARKED, a durable mark (every older
 * WAL was synced); one batch putting key at sequence seq; then (when next)
 * an end record naming WAL next. WAL_CUT: no end record, and the batch's
 * last byte lost, as a power loss leaves a WAL never synced. */
enum { WAL_PLAIN = 0, WAL_MARKED = 1, WAL_CUT = 2 };
static void write_wal_as(const char *dir_, uint64_t n, const char *key, uint64_t seq, uint64_t next, int how) {
    char path[400];
    snprintf(path, sizeof path, "%s/%06llu.log", dir_, (unsigned long long)n);
    unlink(path);
    bkv_wfile *f;
    assert_int_equal(bkv_env_posix()->new_writable(bkv_env_posix(), path, 0644, &f, NULL), BKV_OK);
    bkv_log_writer w;
    bkv_log_writer_init(&w, f);
    if (how & WAL_MARKED) {
        uint8_t mark[BKV_LOG_MARK_LEN] = {0};
        bkv_put_u64(mark + BKV_BATCH_HEADER, n);
        mark[BKV_LOG_MARK_LEN - 1] = 1;
        assert_int_equal(bkv_log_add_record(&w, mark, sizeof mark, NULL), BKV_OK);
    }
    bkv_batch *b = bkv_batch_create();
    assert_int_equal(bkv_batch_put(b, key, strlen(key), "v", 1), BKV_OK);
    bkv_batch_set_sequence(&b->rep, seq);
    assert_int_equal(bkv_log_add_record(&w, b->rep.data, b->rep.len, NULL), BKV_OK);
    bkv_batch_destroy(b);
    if (next && !(how & WAL_CUT)) {
        uint8_t end[BKV_LOG_END_LEN] = {0};
        bkv_put_u64(end, seq);
        bkv_put_u64(end + BKV_BATCH_HEADER, next);
        assert_int_equal(bkv_log_add_record(&w, end, sizeof end, NULL), BKV_OK);
    }
    assert_int_equal(bkv_file_sync(f, NULL), BKV_OK);
    assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
    if (how & WAL_CUT) assert_int_equal(truncate(path, (off_t)w.size - 1), 0);
}

static void write_wal(const char *dir_, uint64_t n, const char *key, uint64_t seq, uint64_t next) {
    write_wal_as(dir_, n, key, seq, next, WAL_PLAIN);
}

/* A live WAL deleted from between two others (the writes it held gone)
 * is found by the end record before it, at open and by check; with only
 * older WALs' end records of the old 12-byte form nothing could tell. The
 * WAL after the gap holds a durable mark, as every live WAL gets once the
 * ones before it are synced (at close at the latest): without one, the
 * gap could be a power loss before the name was synced (the next test). */
static void missing_middle_wal_is_reported(void **state) {
    (void)state;
    char db[300];
    sub(db, sizeof db, "midwal");
    bkv_db *d;
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    /* The manifest names 000002.log (the new database's WAL) as the oldest live. */
    char live[400];
    snprintf(live, sizeof live, "%s/000002.log", db);
    assert_int_equal(access(live, F_OK), 0);
    write_wal(db, 2, "a", 1, 9);                   /* ended: 000009.log comes next */
    write_wal_as(db, 11, "c", 3, 0, WAL_MARKED);   /* ... but 000009.log (sequence 2) is gone */
    int problems = 0;
    assert_int_equal(bkv_check(db, count_problem, &problems), BKV_CORRUPTION);
    assert_int_equal(problems, 1);
    assert_int_equal(bkv_open(db, NULL, &d), BKV_CORRUPTION);
    assert_non_null(strstr(bkv_errmsg(NULL), "000009.log: missing"));
    bkv_options o;
    bkv_options_init(&o);
    o.wal_recovery = BKV_WAL_RECOVERY_POINT_IN_TIME; /* the prefix before the gap */
    assert_int_equal(bkv_open(db, &o, &d), BKV_OK);
    void *v;
    size_t vl;
    assert_int_equal(bkv_get(d, NULL, "a", 1, &v, &vl), BKV_OK);
    bkv_free(v);
    assert_int_equal(bkv_get(d, NULL, "c", 1, &v, &vl), BKV_NOTFOUND);
    assert_int_equal(bkv_close(d), BKV_OK);
    /* With the WAL in place the chain is whole. */
    char db2[300];
    sub(db2, sizeof db2, "fullwal");
    assert_int_equal(bkv_open(db2, NULL, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    write_wal(db2, 2, "a", 1, 9);
    write_wal(db2, 9, "b", 2, 11);
    write_wal_as(db2, 11, "c", 3, 0, WAL_MARKED);
    problems = 0;
    assert_int_equal(bkv_check(db2, count_problem, &problems), BKV_OK);
    assert_int_equal(bkv_open(db2, NULL, &d), BKV_OK);
    assert_int_equal(bkv_get(d, NULL, "b", 1, &v, &vl), BKV_OK);
    bkv_free(v);
    assert_int_equal(bkv_close(d), BKV_OK);
}

static int has_key(bkv_db *d, const char *key) {
    void *v;
    size_t vl;
    int rc = bkv_get(d, NULL, key, strlen(key), &v, &vl);
    if (rc == BKV_OK) bkv_free(v);
    return rc == BKV_OK;
}

/* An older WAL is synced off the write path (src/db/log_sync.c), so a
 * power loss can cut it, or lose its name, while a later WAL survives. If
 * no later WAL holds a durable mark, none held a synced write: the open
 * keeps what comes before the cut and drops the rest (a prefix), and check
 * says so. A mark after the cut makes it damage, refused as before. */
static void older_wal_cut_by_power_loss(void **state) {
    (void)state;
    for (int marked = 0; marked <= 1; marked++) {
        char db[300];
        sub(db, sizeof db, marked ? "cutmarked" : "cut");
        bkv_db *d;
        assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
        assert_int_equal(bkv_close(d), BKV_OK);
        write_wal(db, 2, "a", 1, 9);
        write_wal_as(db, 9, "b", 2, 11, WAL_CUT);
        write_wal_as(db, 11, "c", 3, 0, marked ? WAL_MARKED : WAL_PLAIN);
        char problem[600] = "";
        assert_int_equal(bkv_check(db, keep_problem, problem), BKV_CORRUPTION);
        assert_non_null(strstr(problem, "000009.log"));
        assert_true((strstr(problem, "power loss") != NULL) == !marked);
        if (marked) {
            assert_int_equal(bkv_open(db, NULL, &d), BKV_CORRUPTION);
            assert_non_null(strstr(bkv_errmsg(NULL), "000009.log: truncated"));
            continue;
        }
        assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
        assert_true(has_key(d, "a"));
        assert_false(has_key(d, "b"));
        assert_false(has_key(d, "c")); /* after the cut: not a prefix */
        assert_int_equal(bkv_close(d), BKV_OK);
        assert_int_equal(bkv_check(db, NULL, NULL), BKV_OK);
    }
    /* A lost name, no mark after it: the same prefix. */
    char db[300];
    sub(db, sizeof db, "lostname");
    bkv_db *d;
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    write_wal(db, 2, "a", 1, 9);
    write_wal(db, 11, "c", 3, 0);
    char problem[600] = "";
    assert_int_equal(bkv_check(db, keep_problem, problem), BKV_CORRUPTION);
    assert_non_null(strstr(problem, "000009.log: lost before its name was synced, by a power loss"));
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_true(has_key(d, "a"));
    assert_false(has_key(d, "c"));
    assert_int_equal(bkv_close(d), BKV_OK);
}

static int count_wals(const char *path) {
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        n += len > 4 && strcmp(de->d_name + len - 4, ".log") == 0;
    }
    closedir(d);
    return n;
}

/* The next WAL is created ahead, empty, by a background thread
 * (src/db/log_sync.c). A crash leaves it beside the active WAL, which must
 * still be read as the newest (its unended tail is the crash's, not a
 * power loss's or damage), every write kept, and the spare removed. */
static void spare_wal_left_by_a_crash(void **state) {
    (void)state;
    char db[300];
    sub(db, sizeof db, "spare");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        bkv_options o;
        bkv_options_init(&o);
        o.write_buffer_size = 64 << 10; /* several switches, each taking the spare */
        bkv_db *d;
        if (bkv_open(db, &o, &d)) _exit(2);
        char k[32], v[64];
        for (int i = 0; i < 4000; i++) {
            snprintf(k, sizeof k, "key%05d", i);
            snprintf(v, sizeof v, "value-%05d-padding-padding", i);
            if (bkv_put(d, NULL, k, strlen(k), v, strlen(v))) _exit(3);
        }
        for (int tries = 0; count_wals(db) < 2; tries++) { /* the spare, beside the active WAL */
            if (tries == 5000) _exit(4);
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        _exit(0); /* no close: a crash */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    int problems = 0;
    assert_int_equal(bkv_check(db, count_problem, &problems), BKV_OK);
    assert_int_equal(problems, 0);
    bkv_db *d;
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_int_equal(count_keys(d), 4000);
    assert_true(has_key(d, "key03999"));
    assert_int_equal(bkv_close(d), BKV_OK);
    assert_int_equal(count_wals(db), 1); /* the old spare went at the open, the new one at close */
}

/* A spare WAL that a memtable switch overtook (it found none ready and
 * made its own, numbered higher) is removed, but a crash before that
 * leaves it, empty, after the WAL the switch ended: before the switch's
 * own WAL, or where that one was not yet made (crash_test found this
 * one). Holding nothing and named by no end record, it is no gap: every
 * write is kept and check is clean. A named WAL that is empty is still a
 * gap. */
static void stale_spare_wal_between_live_ones(void **state) {
    (void)state;
    char db[300], stale[400];
    sub(db, sizeof db, "stalespare");
    bkv_db *d;
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    write_wal(db, 2, "a", 1, 9);
    snprintf(stale, sizeof stale, "%s/000007.log", db);
    write_file(stale, "");
    write_wal(db, 9, "b", 2, 0);
    char problem[600] = "";
    assert_int_equal(bkv_check(db, keep_problem, problem), BKV_OK);
    assert_string_equal(problem, "");
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_true(has_key(d, "a"));
    assert_true(has_key(d, "b"));
    assert_int_equal(bkv_close(d), BKV_OK);

    /* The same spare after a WAL whose end record names one the crash kept
     * from being made: the end of the chain, not a gap. */
    sub(db, sizeof db, "stalespare2");
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    write_wal_as(db, 2, "a", 1, 9, WAL_MARKED);
    snprintf(stale, sizeof stale, "%s/000007.log", db);
    write_file(stale, "");
    problem[0] = 0;
    assert_int_equal(bkv_check(db, keep_problem, problem), BKV_OK);
    assert_string_equal(problem, "");
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_true(has_key(d, "a"));
    assert_int_equal(bkv_close(d), BKV_OK);

    sub(db, sizeof db, "namedempty");
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    write_wal(db, 2, "a", 1, 7);
    snprintf(stale, sizeof stale, "%s/000007.log", db);
    write_file(stale, "");
    write_wal_as(db, 9, "b", 2, 0, WAL_MARKED);
    assert_int_equal(bkv_check(db, NULL, NULL), BKV_CORRUPTION);
    assert_int_equal(bkv_open(db, NULL, &d), BKV_CORRUPTION);
    assert_non_null(strstr(bkv_errmsg(NULL), "000007.log"));
}

/* Errors name their cause: the missing database, the system's reason, the
 * option at fault. */
static void errors_keep_their_reason(void **state) {
    (void)state;
    char db[300], file[300], under[400];
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 0;
    bkv_db *d = (bkv_db *)&o; /* must stay untouched on failure: set to NULL */
    sub(db, sizeof db, "absent");
    assert_int_equal(bkv_open(db, &o, &d), BKV_INVALID);
    assert_null(d);
    assert_non_null(strstr(bkv_errmsg(NULL), "does not exist (use create_if_missing)"));
    sub(file, sizeof file, "plain-file");
    write_file(file, "x");
    snprintf(under, sizeof under, "%s/db", file);
    assert_int_equal(bkv_open(under, NULL, &d), BKV_IOERROR);
    assert_non_null(strstr(bkv_errmsg(NULL), strerror(ENOTDIR)));
    bkv_options_init(&o);
    o.write_buffer_size = 10;
    assert_int_equal(bkv_open(db, &o, &d), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "write_buffer_size = 10"));
    bkv_options_init(&o);
    o.level0_stop_trigger = 1;
    assert_int_equal(bkv_open(db, &o, &d), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "level0_stop_trigger"));
    bkv_options_init(&o);
    o.wal_recovery = 7;
    assert_int_equal(bkv_open(db, &o, &d), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "wal_recovery"));
    bkv_options_init(&o);
    o.release_free_memory = 2;
    assert_int_equal(bkv_open(db, &o, &d), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "release_free_memory = 2"));
    /* A damaged CURRENT names the file. */
    char cur[400];
    sub(db, sizeof db, "badcurrent");
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    snprintf(cur, sizeof cur, "%s/CURRENT", db);
    write_file(cur, "MANIFEST-9x\n");
    assert_int_equal(bkv_open(db, NULL, &d), BKV_CORRUPTION);
    assert_non_null(strstr(bkv_errmsg(NULL), "CURRENT"));
    assert_int_equal(bkv_check("", NULL, NULL), BKV_INVALID);
    assert_int_equal(bkv_check(file, NULL, NULL), BKV_INVALID);
}

/* Each thread keeps its own last error, however many there are (the old
 * table of 16 slots handed a 17th thread another thread's message). */
#define ERR_THREADS 40
static void *error_thread(void *arg) {
    long id = (long)arg;
    char path[400];
    snprintf(path, sizeof path, "%s/missing-%ld", dir, id);
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = 0;
    for (int i = 0; i < 50; i++) {
        bkv_db *d;
        if (bkv_open(path, &o, &d) != BKV_INVALID || !strstr(bkv_errmsg(NULL), path)) return (void *)1;
        sched_yield();
        if (!strstr(bkv_errmsg(NULL), path)) return (void *)1;
    }
    return NULL;
}

static void error_messages_are_per_thread(void **state) {
    (void)state;
    pthread_t t[ERR_THREADS];
    for (long i = 0; i < ERR_THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, error_thread, (void *)i), 0);
    for (int i = 0; i < ERR_THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        assert_null(r);
    }
}

static int count_result(void *arg, const void *k, size_t kl, const void *v, size_t vl) {
    (void)k, (void)kl, (void)v, (void)vl;
    ++*(int *)arg;
    return 0;
}

/* NULL handles and pointers are refused; snapshots are checked against the
 * database they came from and released at most once. */
static int write_nowhere(void *arg, const char *text, size_t len) {
    (void)arg, (void)text, (void)len;
    return 0;
}

static void library_contract(void **state) {
    (void)state;
    char db[300], db2[300];
    sub(db, sizeof db, "contract");
    sub(db2, sizeof db2, "contract2");
    assert_int_equal(bkv_open(db, NULL, NULL), BKV_INVALID);
    assert_int_equal(bkv_check(NULL, NULL, NULL), BKV_INVALID);
    assert_int_equal(bkv_dump_table(NULL, 0, write_nowhere, NULL), BKV_INVALID);
    assert_int_equal(bkv_dump_table("x", 0, NULL, NULL), BKV_INVALID);
    assert_int_equal(bkv_dump_table("x", 4, write_nowhere, NULL), BKV_INVALID);
    bkv_filter *f;
    assert_int_equal(bkv_filter_create(NULL, 10, &f), BKV_INVALID);
    bkv_filter_spec spec = {.type = BKV_FILTER_BLOOM, .bits_per_key = 10};
    assert_int_equal(bkv_filter_create(&spec, 10, NULL), BKV_INVALID);
    assert_int_equal(bkv_filter_build(&spec, NULL, 3, &f), BKV_INVALID);
    assert_int_equal(bkv_filter_open("x", 1, 0, NULL, NULL, 0), BKV_INVALID);
    assert_int_equal(bkv_put(NULL, NULL, "k", 1, "v", 1), BKV_INVALID);
    assert_int_equal(bkv_batch_put(NULL, "k", 1, "v", 1), BKV_INVALID);
    assert_int_equal(bkv_batch_count(NULL), 0);
    bkv_batch_clear(NULL);
    assert_int_equal(bkv_close(NULL), BKV_OK);

    bkv_options o;
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    bkv_db *a, *b;
    assert_int_equal(bkv_open(db, &o, &a), BKV_OK);
    assert_int_equal(bkv_open(db2, &o, &b), BKV_OK);
    assert_int_equal(bkv_put(a, NULL, "k", 1, "v", 1), BKV_OK);
    assert_int_equal(bkv_put(b, NULL, "k", 1, "w", 1), BKV_OK);
    const bkv_snapshot *sa = bkv_snapshot_create(a);
    assert_non_null(sa);
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.snapshot = sa;
    void *v;
    size_t vl;
    assert_int_equal(bkv_get(b, &ro, "k", 1, &v, &vl), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(b), "another database"));
    bkv_iter *it;
    assert_int_equal(bkv_iter_create(b, &ro, &it), BKV_INVALID);
    int n = 0;
    assert_int_equal(bkv_find_value(b, &ro, "w", 1, count_result, &n, NULL), BKV_INVALID);
    const void *keys[] = {"k"};
    size_t klens[] = {1};
    void *vals[1];
    size_t vlens[1];
    int st[1];
    assert_int_equal(bkv_multi_get(b, &ro, 1, keys, klens, vals, vlens, st), BKV_INVALID);
    assert_int_equal(bkv_get(a, &ro, "k", 1, &v, &vl), BKV_OK);
    assert_memory_equal(v, "v", 1);
    bkv_free(v);
    bkv_snapshot_release(b, sa); /* not b's: ignored */
    assert_int_equal(bkv_get(a, &ro, "k", 1, &v, &vl), BKV_OK);
    bkv_free(v);
    bkv_snapshot_release(a, sa);
    bkv_snapshot_release(a, sa); /* again: ignored (under ASan: no double free) */
    assert_int_equal(bkv_close(a), BKV_OK);
    assert_int_equal(bkv_close(b), BKV_OK);
}

/* Options structs carry their size: an older (smaller) layout gets the
 * defaults for what it lacks, a newer (larger) one is accepted while the
 * fields this library does not know are zero, an uninitialized one is
 * refused with a hint. */
static void options_carry_their_size(void **state) {
    (void)state;
    char db[300];
    sub(db, sizeof db, "abi");
    bkv_options o;
    bkv_options_init(&o);
    assert_int_equal(o.size, sizeof o);
    o.size = offsetof(bkv_options, value_index); /* compiled before the value index existed */
    o.value_index = 99;                            /* beyond its size: never read */
    bkv_db *d;
    assert_int_equal(bkv_open(db, &o, &d), BKV_OK);
    char *vi = bkv_property(d, "bloomkv.value-index");
    assert_string_equal(vi, "");
    bkv_free(vi);
    assert_int_equal(bkv_close(d), BKV_OK);

    struct {
        bkv_options o;
        uint64_t future[2];
    } newer;
    memset(&newer, 0, sizeof newer);
    bkv_options_init(&newer.o);
    newer.o.size = sizeof newer;
    assert_int_equal(bkv_open(db, &newer.o, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    newer.future[1] = 1;
    assert_int_equal(bkv_open(db, &newer.o, &d), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "does not know"));
    /* What bkv_options_init does in a program built against a newer
     * header: it passes that header's size, so the library zeroes the
     * fields it does not know and stamps the caller's size; one the caller
     * then sets is refused, never ignored. */
    memset(&newer, 0xab, sizeof newer);
    bkv_options_init_sized(&newer.o, sizeof newer);
    assert_int_equal(newer.o.size, sizeof newer);
    assert_int_equal(newer.future[0] | newer.future[1], 0);
    assert_int_equal(newer.o.write_buffer_size, 64u << 20);
    assert_int_equal(bkv_open(db, &newer.o, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);
    newer.future[0] = 7;
    assert_int_equal(bkv_open(db, &newer.o, &d), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "does not know"));
    /* And in one built against an older header: nothing is written past
     * the caller's struct. */
    memset(&newer, 0xcd, sizeof newer);
    size_t older = offsetof(bkv_options, value_index);
    bkv_options_init_sized(&newer.o, older);
    assert_int_equal(newer.o.size, older);
    for (size_t i = older; i < sizeof newer; i++) assert_int_equal(((unsigned char *)&newer)[i], 0xcd);
    assert_int_equal(bkv_open(db, &newer.o, &d), BKV_OK);
    assert_int_equal(bkv_close(d), BKV_OK);

    memset(&o, 0, sizeof o);
    assert_int_equal(bkv_open(db, &o, &d), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "bkv_options_init"));

    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    bkv_write_options wo = {0};
    assert_int_equal(bkv_put(d, &wo, "k", 1, "v", 1), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(d), "bkv_write_options_init"));
    bkv_write_options_init(&wo);
    wo.sync = 1;
    assert_int_equal(bkv_put(d, &wo, "k", 1, "v", 1), BKV_OK);
    bkv_read_options ro = {0};
    void *v;
    size_t vl;
    assert_int_equal(bkv_get(d, &ro, "k", 1, &v, &vl), BKV_INVALID);
    ro.size = offsetof(bkv_read_options, snapshot); /* older: snapshot and bounds unknown */
    ro.fill_cache = 1;
    assert_int_equal(bkv_get(d, &ro, "k", 1, &v, &vl), BKV_OK);
    bkv_free(v);
    assert_int_equal(bkv_close(d), BKV_OK);
}

/* LevelDB's batch calls and property names: a batch appended to another
 * (itself too) keeps its operations in order, its size is what its WAL
 * record takes, and "leveldb." names read as "bloomkv." ones. */
static void batch_append_and_leveldb_names(void **state) {
    (void)state;
    char db[300];
    sub(db, sizeof db, "leveldb-names");
    bkv_batch *a = bkv_batch_create(), *b = bkv_batch_create();
    size_t empty = bkv_batch_approximate_size(b);
    assert_int_equal(bkv_batch_put(a, "k", 1, "1", 1), BKV_OK);
    assert_int_equal(bkv_batch_put(b, "k", 1, "2", 1), BKV_OK);
    assert_int_equal(bkv_batch_delete(b, "gone", 4), BKV_OK);
    assert_true(bkv_batch_approximate_size(b) > empty);
    assert_int_equal(bkv_batch_append_batch(a, b), BKV_OK);
    assert_int_equal(bkv_batch_append_batch(b, b), BKV_OK);
    assert_int_equal(bkv_batch_count(a), 3);
    assert_int_equal(bkv_batch_count(b), 4);
    assert_int_equal(bkv_batch_append_batch(a, NULL), BKV_INVALID);
    bkv_db *d;
    assert_int_equal(bkv_open(db, NULL, &d), BKV_OK);
    assert_int_equal(bkv_write(d, NULL, a), BKV_OK);
    void *v;
    size_t n;
    assert_int_equal(bkv_get(d, NULL, "k", 1, &v, &n), BKV_OK); /* the appended put came after */
    assert_memory_equal(v, "2", 1);
    bkv_free(v);
    assert_int_equal(bkv_flush(d), BKV_OK);
    char *ours = bkv_property(d, "bloomkv.num-files-at-level0"), *theirs = bkv_property(d, "leveldb.num-files-at-level0");
    assert_string_equal(ours, "1");
    assert_string_equal(theirs, "1");
    bkv_free(ours);
    bkv_free(theirs);
    char *tables = bkv_property(d, "leveldb.sstables");
    assert_non_null(strstr(tables, "--- level 0 ---\n"));
    assert_non_null(strstr(tables, "[gone .. k]"));
    bkv_free(tables);
    assert_null(bkv_property(d, "leveldb.nothing"));
    assert_int_equal(bkv_close(d), BKV_OK);
    bkv_batch_destroy(a);
    bkv_batch_destroy(b);
}

/* A cuckoo filter built from keys given more than once holds each once
 * (it used to run out of slots and answer BKV_FULL). */
static void cuckoo_build_accepts_duplicates(void **state) {
    (void)state;
    bkv_hash h[2000];
    for (int i = 0; i < 2000; i++) h[i] = bkv_hash_bytes(&(int){i % 100}, sizeof(int));
    int types[] = {BKV_FILTER_CUCKOO8, BKV_FILTER_CUCKOO12, BKV_FILTER_CUCKOO16, BKV_FILTER_COUNTING};
    for (int t = 0; t < 4; t++) {
        bkv_filter_spec spec = {.type = types[t], .bits_per_key = 16};
        bkv_filter *f;
        assert_int_equal(bkv_filter_build(&spec, h, 2000, &f), BKV_OK);
        for (int i = 0; i < 100; i++) assert_true(bkv_filter_may_contain(f, h[i]));
        bkv_filter_info info;
        bkv_filter_get_info(f, &info);
        assert_int_equal(info.num_keys, 100);
        assert_int_equal(bkv_filter_delete(f, h[7]), BKV_OK);
        bkv_filter_destroy(f);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(planted_links_are_never_followed),
        cmocka_unit_test(file_mode_applies_to_every_file),
        cmocka_unit_test(deleted_lock_file_keeps_the_lock),
        cmocka_unit_test(wal_damage_before_intact_records),
        cmocka_unit_test(missing_middle_wal_is_reported),
        cmocka_unit_test(older_wal_cut_by_power_loss),
        cmocka_unit_test(spare_wal_left_by_a_crash),
        cmocka_unit_test(stale_spare_wal_between_live_ones),
        cmocka_unit_test(errors_keep_their_reason),
        cmocka_unit_test(error_messages_are_per_thread),
        cmocka_unit_test(library_contract),
        cmocka_unit_test(options_carry_their_size),
        cmocka_unit_test(batch_append_and_leveldb_names),
        cmocka_unit_test(cuckoo_build_accepts_duplicates),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
