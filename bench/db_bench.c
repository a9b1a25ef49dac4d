/*
 * `bloomkv-bench db`: a db_bench-style benchmark. Benchmarks are named and
 * flagged as in LevelDB's db_bench; keys are 16-byte decimal strings, and
 * values pseudo-random bytes of --value_size that start with a value id
 * (the key's number, or with --value_distinct P, that number modulo P% of
 * --num), so that values are as distinct as asked for value searches.
 *
 * Engines are reached through a small adapter (bench_engine) so that the
 * same key generator, value generator and timing loop can drive other
 * engines side by side.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "bloomkv.h"
#include "bloomkv_filter.h"
#include "bench_engine.h"
#include "db_bench.h"
#include "options.h"

/* ---- workload ---- */

typedef struct run_state {
    const bench_cfg *cfg;
    const bench_engine *eng;
    void *h;
    char *values;          /* a pool values are sliced from */
    size_t pool;
    uint64_t rng;
    uint32_t *lat_ns;      /* per-op latency (0 when not timed) */
    int timed;             /* latencies are reported (--histogram, --json): every op reads the clock twice */
    uint64_t nlat;
    uint64_t bytes;
    int tid, nthreads;     /* this thread's share of the work */
    const char *progress;  /* benchmark name while a bar is drawn (a terminal), else NULL */
    uint64_t expected;     /* ops this thread will record */
    bkv_find_stats fst;    /* summed over findvalue searches */
    char *vbuf;            /* value being built (value_size bytes) */
    /* --cold: time spent reopening between searches (not the benchmark's),
     * and the opens themselves. */
    double paused_ns, open_ns, open_ns_max;
    uint64_t opens;
} run_state;

static uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* --key_space spread: key i is the big-endian eight bytes of i * spread_step
 * (0: the decimal keys below), then '0's up to key_size. */
static uint64_t spread_step;

static size_t key_at(char *buf, int key_size, uint64_t x) {
    for (int b = 0; b < 8; b++) buf[b] = (char)(x >> (56 - 8 * b));
    int n = key_size > 8 ? key_size : 8;
    memset(buf + 8, '0', (size_t)(n - 8));
    return (size_t)n;
}

/* Key i: its decimal digits, zero-padded to key_size. A missing key is
 * key i followed by '.' (as in db_bench): it sorts right after key i, so
 * every table whose range holds key i holds it too, and only a filter
 * can rule it out. */
static size_t make_key(char *buf, int key_size, uint64_t i, int missing) {
    if (spread_step) {
        size_t len = key_at(buf, key_size, i * spread_step);
        if (missing) buf[len++] = '.';
        return len;
    }
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)i);
    int pad = key_size > n ? key_size - n : 0;
    memset(buf, '0', (size_t)pad);
    memcpy(buf + pad, digits, (size_t)n);
    size_t len = (size_t)(pad + n);
    if (missing) buf[len++] = '.';
    return len;
}

static uint64_t value_ids(const bench_cfg *c) {
    uint64_t distinct = (uint64_t)((double)c->num * c->value_distinct / 100.0);
    return distinct ? distinct : 1;
}

static uint64_t value_id(const bench_cfg *c, uint64_t i) { return i % value_ids(c); }

/* The value of id: a slice of the pool, its first bytes replaced by the
 * id in hex. buf holds value_size bytes. */
static const char *value_of_id(run_state *s, uint64_t id, char *buf) {
    size_t vs = (size_t)s->cfg->value_size;
    memcpy(buf, s->values + (id * 97) % (s->pool - vs), vs);
    for (size_t d = 0; d < 16 && d < vs; d++) buf[d] = "0123456789abcdef"[(id >> (60 - 4 * d)) & 15];
    return buf;
}

/* Key i's value. */
static const char *value_for(run_state *s, uint64_t i, char *buf) { return value_of_id(s, value_id(s->cfg, i), buf); }

static void add_find_stats(bkv_find_stats *sum, const bkv_find_stats *st) {
    const uint64_t *src = (const uint64_t *)st;
    uint64_t *dst = (uint64_t *)sum;
    for (size_t i = 0; i < sizeof *st / sizeof(uint64_t); i++) dst[i] += src[i];
}

/* Only when latencies are reported, as db_bench does: two clock reads per
 * op cost about 50 ns on this kind of machine, a tenth of a get of a
 * missing key, and would shrink the ratio between a fast engine and a
 * slow one. */
static inline double op_start(const run_state *s) { return s->timed ? bench_now_ns() : 0; }

static void record(run_state *s, double t0) {
    double dt = s->timed ? bench_now_ns() - t0 : 0;
    s->lat_ns[s->nlat++] = dt > 4e9 ? UINT32_MAX : (uint32_t)dt;
    /* A progress bar, on a terminal only, from one thread. */
    if (s->progress && s->tid == 0 && s->nlat % 4096 == 0 && s->expected) {
        int pct = (int)(100 * s->nlat / s->expected);
        fprintf(stderr, "\r%-16s [%-40.*s] %3d%%", s->progress, pct * 40 / 100,
                "########################################", pct > 100 ? 100 : pct);
    }
}

static void end_progress(run_state *s) {
    if (s->progress) fprintf(stderr, "\r%*s\r", 66, "");
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t dir_size(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    uint64_t total = 0;
    struct dirent *de;
    char p[4096];
    while ((de = readdir(d))) {
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", path, de->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) total += (uint64_t)st.st_size;
    }
    closedir(d);
    return total;
}

/* Drops the pages of every file in dir from the page cache (clean pages
 * that no process maps). */
static void drop_pages(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        int fd = open(p, O_RDONLY | O_NOFOLLOW);
        if (fd < 0) continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    closedir(d);
}

/* --cold, before a search: the database closed (unmapping its tables),
 * its pages dropped, opened again (timed), and the pages the open read
 * but does not keep mapped dropped again. */
static int reopen_cold(run_state *s) {
    double p0 = bench_now_ns();
    s->eng->close(s->h);
    s->h = NULL;
    drop_pages(s->cfg->db);
    double o0 = bench_now_ns();
    if (s->eng->open(s->cfg, &s->h)) return -1;
    double open_ns = bench_now_ns() - o0;
    drop_pages(s->cfg->db);
    s->open_ns += open_ns;
    if (open_ns > s->open_ns_max) s->open_ns_max = open_ns;
    s->opens++;
    s->paused_ns += bench_now_ns() - p0;
    return 0;
}

/* Runs one named benchmark; returns ops done, or -1 on error. */
/* --secondary_index composite is the index a user of an engine without a
 * value index builds by hand: every engine keeps one, except bloomkv when
 * --value_index gives it its own, so that one --compare run sets bloomkv's
 * value index against the peers' composite indexes. */
static int uses_composite(const bench_cfg *c, const bench_engine *eng) {
    return c->secondary_index && eng->find_indexed && !(c->value_index != BKV_VALUE_INDEX_NONE && eng->find_value);
}

static long run_benchmark(run_state *s, const char *name, uint64_t *found_out) {
    const bench_cfg *c = s->cfg;
    char key[64];
    uint64_t found = 0;
    int write = strncmp(name, "fill", 4) == 0 || strcmp(name, "overwrite") == 0;
    uint64_t ops = write || strcmp(name, "deleterandom") == 0 ? c->num : c->reads;
    /* An engine without a value index can only scan: findvalue is then
     * the full scan, run as often as findvalue_scan. */
    int indexed = uses_composite(c, s->eng); /* the composite index answers findvalue */
    /* findvalue_first: each search stops at its first result; findvalue_and:
     * each is the AND of the value with itself (both terms' index answers,
     * intersected, then the same partitions: the dearest two-term AND). */
    unsigned find_flags = strcmp(name, "findvalue_first") == 0 ? BENCH_FIND_FIRST
                          : strcmp(name, "findvalue_and") == 0 ? BENCH_FIND_AND_SELF
                                                               : 0;
    /* findvalue_absent: values no key holds (ids past those written). */
    int absent = strcmp(name, "findvalue_absent") == 0;
    int find = strcmp(name, "findvalue") == 0 || find_flags || absent;
    int scan_search = strcmp(name, "findvalue_scan") == 0 || (find && !s->eng->find_value && !indexed);
    if (find || scan_search) ops = scan_search ? c->scan_searches : c->searches;
    /* This thread's share: every nthreads-th key for fills, an equal part
     * of the operations otherwise. */
    uint64_t share = ops / (uint64_t)s->nthreads + ((uint64_t)s->tid < ops % (uint64_t)s->nthreads);
    s->nlat = 0;
    s->bytes = 0;
    s->paused_ns = s->open_ns = s->open_ns_max = 0;
    s->opens = 0;
    s->expected = share;
    memset(&s->fst, 0, sizeof s->fst);
    s->progress = isatty(STDERR_FILENO) && !c->json ? name : NULL;
    if (strcmp(name, "fillseq") == 0 || strcmp(name, "fillrandom") == 0 || strcmp(name, "overwrite") == 0) {
        /* fillrandom writes every key once, in random order, so a later
         * readrandom finds each key it asks for. */
        ops = share;
        uint64_t *order = malloc((ops ? ops : 1) * sizeof *order);
        if (!order) return -1;
        for (uint64_t i = 0; i < ops; i++) order[i] = i * (uint64_t)s->nthreads + (uint64_t)s->tid;
        if (strcmp(name, "fillseq") != 0)
            for (uint64_t i = ops; i > 1; i--) {
                uint64_t j = next_rand(&s->rng) % i, t = order[i - 1];
                order[i - 1] = order[j];
                order[j] = t;
            }
        for (uint64_t i = 0; i < ops; i++) {
            size_t kl = make_key(key, c->key_size, order[i], 0);
            double t0 = op_start(s);
            const char *v = value_for(s, order[i], s->vbuf);
            if (uses_composite(c, s->eng) ? s->eng->put_indexed(s->h, key, kl, v, (size_t)c->value_size, c->sync)
                                   : s->eng->put(s->h, key, kl, v, (size_t)c->value_size, c->sync)) {
                free(order);
                return -1;
            }
            record(s, t0);
            s->bytes += kl + (size_t)c->value_size;
        }
        free(order);
    } else if (strcmp(name, "readrandom") == 0 || strcmp(name, "readmissing") == 0 || strcmp(name, "readhot") == 0) {
        ops = share;
        int missing = name[4] == 'm';
        uint64_t range = strcmp(name, "readhot") == 0 ? (c->num / 100 ? c->num / 100 : 1) : c->num;
        for (uint64_t i = 0; i < ops; i++) {
            size_t kl = make_key(key, c->key_size, next_rand(&s->rng) % range, missing);
            double t0 = op_start(s);
            int r = s->eng->get(s->h, key, kl);
            record(s, t0);
            if (r < 0) return -1;
            found += (uint64_t)r;
        }
    } else if (strcmp(name, "multireadrandom") == 0) {
        ops = share;
        enum { BATCH = 64 };
        char kbuf[BATCH][64];
        const char *keys[BATCH];
        size_t klens[BATCH];
        for (uint64_t i = 0; i < ops; i += BATCH) {
            size_t m = ops - i < BATCH ? (size_t)(ops - i) : BATCH;
            for (size_t j = 0; j < m; j++) {
                klens[j] = make_key(kbuf[j], c->key_size, next_rand(&s->rng) % c->num, 0);
                keys[j] = kbuf[j];
            }
            double t0 = bench_now_ns();
            long r = s->eng->multi_get(s->h, keys, klens, m);
            if (r < 0) return -1;
            double per = (bench_now_ns() - t0) / (double)m;
            for (size_t j = 0; j < m; j++) s->lat_ns[s->nlat++] = (uint32_t)per;
            found += (uint64_t)r;
        }
    } else if (s->tid > 0 && (strcmp(name, "readseq") == 0 || strcmp(name, "compact") == 0)) {
        ops = 0; /* one thread does these */
    } else if (strcmp(name, "readseq") == 0) {
        double t0 = op_start(s);
        long r = s->eng->scan(s->h, NULL, 0, (long)c->num);
        if (r < 0) return -1;
        record(s, t0);
        ops = (uint64_t)r;
        found = (uint64_t)r;
    } else if (strcmp(name, "seekrandom") == 0) {
        ops = share;
        for (uint64_t i = 0; i < ops; i++) {
            size_t kl = make_key(key, c->key_size, next_rand(&s->rng) % c->num, 0);
            double t0 = op_start(s);
            long r = s->eng->scan(s->h, key, kl, 1);
            record(s, t0);
            if (r < 0) return -1;
            found += (uint64_t)r;
        }
    } else if (find || scan_search) {
        /* The value of a random key: unique values have one match. */
        ops = share;
        for (uint64_t i = 0; i < ops; i++) {
            uint64_t r = next_rand(&s->rng);
            const char *v = absent ? value_of_id(s, value_ids(c) + r % value_ids(c), s->vbuf)
                                   : value_for(s, r % c->num, s->vbuf);
            bkv_find_stats st = {0};
            if (c->cold && reopen_cold(s)) return -1;
            double t0 = op_start(s);
            long n = scan_search ? s->eng->scan_value(s->h, v, (size_t)c->value_size)
                     : indexed   ? s->eng->find_indexed(s->h, v, (size_t)c->value_size)
                                 : s->eng->find_value(s->h, v, (size_t)c->value_size, c->find_plan, find_flags, &st);
            record(s, t0);
            if (n < 0) return -1;
            found += n > 0;
            add_find_stats(&s->fst, &st);
        }
    } else if (strncmp(name, "range", 5) == 0) {
        /* rangeempty: ranges of range_len values between two keys, placed
         * at random; rangecorrelated: the same, starting just past a key
         * (where prefix-based range filters fail); rangescan: from a key,
         * through the next seek_nexts keys. */
        int scan = strcmp(name, "rangescan") == 0, correlated = strcmp(name, "rangecorrelated") == 0;
        if (!scan && !correlated && strcmp(name, "rangeempty") != 0) {
            fprintf(stderr, "bench: unknown benchmark '%s'\n", name);
            return -1;
        }
        if (!spread_step || !s->eng->range_scan || (!scan && c->range_len + 2 > spread_step)) {
            fprintf(stderr, "bench: %s needs --key_space spread and a --range_len below the keys' spacing (%llu)\n",
                    name, (unsigned long long)spread_step);
            return -1;
        }
        ops = share;
        char lo[64], hi[64];
        for (uint64_t i = 0; i < ops; i++) {
            uint64_t k = next_rand(&s->rng) % c->num, a, z;
            long most = 1;
            if (scan) {
                a = k * spread_step;
                z = k + (uint64_t)c->seek_nexts < c->num ? (k + (uint64_t)c->seek_nexts) * spread_step : UINT64_MAX;
                most = c->seek_nexts;
            } else {
                a = k * spread_step + 1 + (correlated ? 0 : next_rand(&s->rng) % (spread_step - c->range_len - 1));
                z = a + c->range_len;
            }
            size_t ll = key_at(lo, c->key_size, a), hl = key_at(hi, c->key_size, z);
            double t0 = op_start(s);
            long r;
            if (!scan && s->eng->range_empty) {
                int empty = s->eng->range_empty(s->h, lo, ll, hi, hl);
                r = empty < 0 ? -1 : !empty;
            } else {
                r = s->eng->range_scan(s->h, lo, ll, hi, hl, most);
            }
            record(s, t0);
            if (r < 0) return -1;
            found += (uint64_t)(r > 0); /* rangeempty, rangecorrelated: 0 when right */
        }
    } else if (strcmp(name, "compact") == 0) {
        ops = 1;
        double t0 = op_start(s);
        if (s->eng->compact(s->h)) return -1;
        record(s, t0);
    } else if (strcmp(name, "deleterandom") == 0) {
        ops = share;
        for (uint64_t i = 0; i < ops; i++) {
            size_t kl = make_key(key, c->key_size, next_rand(&s->rng) % c->num, 0);
            double t0 = op_start(s);
            if (s->eng->del(s->h, key, kl)) return -1;
            record(s, t0);
        }
    } else {
        fprintf(stderr, "bench: unknown benchmark '%s'\n", name);
        return -2;
    }
    *found_out = found;
    return (long)ops;
}

typedef struct thread_job {
    run_state s;
    const char *name;
    long ops;
    uint64_t found;
    pthread_t thread;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *j = arg;
    j->s.vbuf = malloc((size_t)j->s.cfg->value_size);
    j->ops = j->s.vbuf ? run_benchmark(&j->s, j->name, &j->found) : -1;
    free(j->s.vbuf);
    return NULL;
}

/* NAMEwhilewriting: NAME (readrandom for "read") measured while one more
 * thread overwrites random keys with their own values as fast as it can
 * (db_bench's readwhilewriting): what reads and searches cost while
 * flushes, compactions and index updates go on. */
#define WHILE_WRITING "whilewriting"

typedef struct bg_writer {
    run_state s;
    atomic_int stop;
    uint64_t puts;
    int failed;
    pthread_t thread;
} bg_writer;

static void *bg_writer_main(void *arg) {
    bg_writer *w = arg;
    const bench_cfg *c = w->s.cfg;
    char key[64];
    while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
        uint64_t i = next_rand(&w->s.rng) % c->num;
        size_t kl = make_key(key, c->key_size, i, 0);
        if (w->s.eng->put(w->s.h, key, kl, value_for(&w->s, i, w->s.vbuf), (size_t)c->value_size, 0)) {
            w->failed = 1;
            break;
        }
        w->puts++;
    }
    return NULL;
}

/* The benchmark a name runs: NAME of NAMEwhilewriting (writing says so). */
static const char *base_benchmark(const char *name, char *buf, size_t cap, int *writing) {
    size_t n = strlen(name), w = strlen(WHILE_WRITING);
    *writing = n > w && strcmp(name + n - w, WHILE_WRITING) == 0;
    if (!*writing) return name;
    snprintf(buf, cap, "%.*s", (int)(n - w), name);
    return strcmp(buf, "read") == 0 ? "readrandom" : buf;
}

/* Runs a benchmark on cfg->threads threads, each with its own random
 * stream and latency slice; merges their counts and latencies into s. */
static long run_threads(run_state *s, const char *name, uint64_t *found, uint64_t max_ops) {
    int n = s->cfg->threads;
    if (n <= 1) return run_benchmark(s, name, found);
    thread_job *jobs = calloc((size_t)n, sizeof *jobs);
    if (!jobs) return -1;
    uint64_t slice = max_ops / (uint64_t)n + 1 + 64;
    for (int t = 0; t < n; t++) {
        jobs[t].s = *s;
        jobs[t].s.tid = t;
        jobs[t].s.nthreads = n;
        jobs[t].s.rng = s->rng + 0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1);
        jobs[t].s.lat_ns = s->lat_ns + slice * (uint64_t)t;
        jobs[t].name = name;
        pthread_create(&jobs[t].thread, NULL, thread_main, &jobs[t]);
    }
    long ops = 0;
    *found = 0;
    s->nlat = 0;
    s->bytes = 0;
    memset(&s->fst, 0, sizeof s->fst);
    for (int t = 0; t < n; t++) {
        pthread_join(jobs[t].thread, NULL);
        add_find_stats(&s->fst, &jobs[t].s.fst);
        if (jobs[t].ops < 0) ops = jobs[t].ops;
        if (ops >= 0) ops += jobs[t].ops;
        *found += jobs[t].found;
        s->bytes += jobs[t].s.bytes;
        memmove(s->lat_ns + s->nlat, jobs[t].s.lat_ns, jobs[t].s.nlat * sizeof *s->lat_ns);
        s->nlat += jobs[t].s.nlat;
    }
    s->rng += 0x632be59bd9b4e019ULL;
    free(jobs);
    return ops;
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: bloomkv-bench db [--benchmarks LIST] [--num N] [--reads N] [--key_size 16] [--value_size 100]\n"
            "                     [--bloom_bits 10] [--filter blocked|bloom|none] [--cache_size BYTES]\n"
            "                     [--write_buffer_size BYTES] [--compression none|lz4|zstd] [--db DIR]\n"
            "                     [--use_existing_db] [--seed S] [--sync] [--histogram] [--json]\n"
            "                     [--compaction_style leveled|tiered] [--level0_file_num_compaction_trigger N]\n"
            "                     [--level0_slowdown_writes_trigger N] [--level0_stop_writes_trigger N]\n"
            "                     [--engine bloomkv|leveldb|rocksdb] [--compare] [--threads N[,N...]]\n"
            "                     [--rounds N] [--raw FILE] [--plot DIR]\n"
            "                     [--value_index none|flat|hierarchy|bitsliced|paged] [--value_filter_bits M]\n"
            "                     [--value_filter_hashes K] [--value_partition_entries P] [--value_index_order D]\n"
            "                     [--value_distinct PERCENT] [--searches N] [--scan_searches N]\n"
            "                     [--partition_filters] [--filter_partition_size BYTES]\n"
            "                     [--filter_memory_budget BYTES] [--wal_mmap 1|0]\n"
            "                     [--compact_for_reads 1|0] [--release_free_memory 1|0]\n"
            "                     [--max_background_jobs N] [--compaction_nice 0..19]\n"
            "                     [--max_subcompactions 1..8]\n"
            "                     [--find_plan auto|index|scan] [--secondary_index none|composite]\n"
            "                     [--value_summary_bits 2..16] [--cold] [--target_file_size BYTES]\n"
            "                     [--filter_stats] [--key_space decimal|spread] [--range_len N] [--seek_nexts N]\n"
            "                     [--range_filter B] [--range_filter_from_level N]\n"
            "benchmarks: fillseq fillrandom overwrite readrandom readmissing readhot readseq seekrandom\n"
            "            multireadrandom deleterandom compact (flush, then compact everything into the last level)\n"
            "            findvalue (--searches searches by value: the value index, or a full scan on engines\n"
            "            without one, run --scan_searches times) findvalue_first (the same searches, each\n"
            "            stopped at its first result) findvalue_and (each the AND of the value with itself)\n"
            "            findvalue_absent (searches for values no key holds)\n"
            "            findvalue_scan (the full scan on any engine); NAMEwhilewriting runs NAME (readrandom for\n"
            "            read) while one more thread overwrites random keys as fast as it can; --cold: before\n"
            "            each search the database is closed, its pages dropped from the page cache, and opened\n"
            "            again (open times reported, not counted)\n"
            "            rangeempty, rangecorrelated (--range_len values between two keys, placed at random or\n"
            "            starting just past a key: no key in them), rangescan (a key and the next --seek_nexts):\n"
            "            these need --key_space spread (key i at i * 2^64 / num, big-endian) for the fill too;\n"
            "            --range_filter B gives bloomkv's tables range filters at B bits per key\n"
            "            (--range_filter_from_level N: only from level N down; level 0's tables are short-lived)\n"
            "--filter_stats: RocksDB keeps statistics (off by default: they cost it time), so that its\n"
            "            key filters' false positives are reported beside bloomkv's for each read benchmark.\n"
            "--compare runs the benchmarks on every engine built in (each under --db DIR/ENGINE when --db is\n"
            "            given); --threads 1,2,4,8,16 runs them at every count; --rounds N repeats it all N times,\n"
            "            the engines taking turns inside each round and a different one going first each round.\n"
            "            With any of these, a table per benchmark gives the median ops/s [range], the gain over\n"
            "            the first thread count and bloomkv's ratio to each peer; --raw FILE keeps every run's\n"
            "            figure (tab-separated), --plot DIR draws the medians (gnuplot).\n"
            "defaults: --benchmarks fillrandom,readrandom,readmissing --num 1000000 --reads = num\n");
}

/* Anonymous memory now (RssAnon): tables are mapped, so the peak RSS
 * counts the page cache's copy of the files too. 0 when unknown. */
static uint64_t anon_memory_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes a database directory and everything in it, without a shell and
 * without following links (FTW_PHYS). A directory that does not look like
 * a database (no CURRENT, not empty) is refused: --db ~ must not wipe a
 * home directory. */
static int remove_db_dir(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0) return errno == ENOENT ? 0 : -1;
    char current[4200];
    snprintf(current, sizeof current, "%s/CURRENT", dir);
    DIR *d = opendir(dir);
    int entries = 0;
    for (struct dirent *de; d && (de = readdir(d)) != NULL;)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) entries++;
    if (d) closedir(d);
    if (!S_ISDIR(st.st_mode) || (entries && access(current, F_OK) != 0)) {
        fprintf(stderr, "bench: %s exists and is not a database; not deleting it (choose another --db)\n", dir);
        return -1;
    }
    return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int bench_run_engine(bench_cfg c, const bench_engine *eng, double *ops_per_sec, size_t *nbench) {
    spread_step = c.spread_keys ? UINT64_MAX / (c.num ? c.num : 1) : 0;
    char tmpdir[256] = "";
    if (!c.db) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/bloomkv-bench-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("bench: mkdtemp");
            return 3;
        }
        c.db = tmpdir;
    } else if (!c.use_existing_db && remove_db_dir(c.db) != 0) {
        return 3;
    }
    const char *warn = bench_build_warning();
    if (warn) fprintf(stderr, "%s\n", warn);

    run_state s = {.cfg = &c, .eng = eng, .rng = c.seed, .tid = 0, .nthreads = 1, .timed = c.histogram || c.json};
    s.pool = (1u << 20) + (size_t)c.value_size;
    s.values = malloc(s.pool);
    uint64_t max_ops = c.num > c.reads ? c.num : c.reads;
    if (c.searches > max_ops) max_ops = c.searches;
    s.lat_ns = malloc((max_ops + 128) * (size_t)(c.threads > 1 ? 2 : 1) * sizeof *s.lat_ns);
    s.vbuf = malloc((size_t)c.value_size);
    if (!s.values || !s.lat_ns || !s.vbuf) return 3;
    uint64_t vr = c.seed ^ 0xabcdef;
    for (size_t i = 0; i < s.pool; i++) s.values[i] = (char)(i % 2 ? ' ' + next_rand(&vr) % 64 : 'a'); /* ~50% compressible */
    if (s.eng->open(&c, &s.h)) return 3;
    if (!c.json)
        printf("engine %s, keys %d bytes, values %d bytes, %llu entries, filter %s %.1f bits/key, "
               "write buffer %zu, cache %zu\n", s.eng->name, c.key_size, c.value_size, (unsigned long long)c.num,
               bkv_filter_type_name(c.filter), c.bloom_bits, c.write_buffer_size, c.cache_size);

    char *list = strdup(c.benchmarks);
    int status = 0;
    *nbench = 0;
    char *save = NULL;
    for (char *name = strtok_r(list, ",", &save); name && *nbench < BENCH_MAX_BENCHMARKS; name = strtok_r(NULL, ",", &save)) {
        uint64_t found = 0, blocks0 = 0, blocks1 = 0, filter_bytes = 0, probes0 = 0, probes1 = 0, fp0 = 0, fp1 = 0;
        int have_blocks = s.eng->counter && s.eng->counter(s.h, "blocks-read", &blocks0) == 0;
        int have_fp = s.eng->counter && s.eng->counter(s.h, "filter-probes", &probes0) == 0 &&
                      s.eng->counter(s.h, "filter-false-positives", &fp0) == 0;
        char base_buf[64];
        int writing;
        const char *base = base_benchmark(name, base_buf, sizeof base_buf, &writing);
        bg_writer *writer = NULL;
        if (writing) {
            char *vbuf = malloc((size_t)c.value_size);
            if (!vbuf || !(writer = calloc(1, sizeof *writer))) {
                free(vbuf);
                status = 3;
                break;
            }
            writer->s = (run_state){.cfg = &c, .eng = s.eng, .h = s.h, .values = s.values, .pool = s.pool,
                                    .rng = c.seed ^ 0x77726974ULL, .vbuf = vbuf};
            pthread_create(&writer->thread, NULL, bg_writer_main, writer);
        }
        double t0 = bench_now_ns();
        long ops = run_threads(&s, base, &found, max_ops);
        end_progress(&s);
        double secs = (bench_now_ns() - t0 - s.paused_ns) / 1e9;
        double writer_rate = 0;
        if (writer) {
            atomic_store(&writer->stop, 1);
            pthread_join(writer->thread, NULL);
            writer_rate = (double)writer->puts / (secs > 0 ? secs : 1);
            if (writer->failed && ops >= 0) {
                fprintf(stderr, "bench: the writer of %s failed\n", name);
                ops = -3;
            }
            free(writer->s.vbuf);
            free(writer);
        }
        if (ops < 0) {
            if (ops == -1) fprintf(stderr, "bench: %s failed\n", name);
            status = ops == -2 ? 2 : 3;
            break;
        }
        ops_per_sec[(*nbench)++] = ops / (secs > 0 ? secs : 1);
        int indexed_search = (strcmp(base, "findvalue") == 0 || strcmp(base, "findvalue_first") == 0 ||
                              strcmp(base, "findvalue_and") == 0 || strcmp(base, "findvalue_absent") == 0) &&
                             s.eng->find_value && !uses_composite(&c, s.eng);
        if (s.timed) qsort(s.lat_ns, s.nlat, sizeof *s.lat_ns, cmp_u32);
        double p50 = s.nlat ? s.lat_ns[s.nlat / 2] / 1e3 : 0, p99 = s.nlat ? s.lat_ns[s.nlat * 99 / 100] / 1e3 : 0;
        double p999 = s.nlat ? s.lat_ns[s.nlat * 999 / 1000] / 1e3 : 0;
        double micros = ops ? secs * 1e6 / (double)ops : 0;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        if (have_blocks) {
            s.eng->counter(s.h, "blocks-read", &blocks1);
            s.eng->counter(s.h, "filter-memory", &filter_bytes);
        }
        if (have_fp) {
            s.eng->counter(s.h, "filter-probes", &probes1);
            s.eng->counter(s.h, "filter-false-positives", &fp1);
        }
        /* A key filter's false-positive rate, where the benchmark probed
         * filters: every table a missing key falls inside is asked. */
        uint64_t probes = probes1 - probes0;
        int show_fp = have_fp && probes > 0 && (!strncmp(name, "read", 4) || !strcmp(name, "multireadrandom"));
        double fp_pct = probes ? 100.0 * (double)(fp1 - fp0) / (double)probes : 0;
        uint64_t vindex_bytes = 0;
        if (indexed_search && s.eng->counter) s.eng->counter(s.h, "value-index-memory", &vindex_bytes);
        double open_ms = s.opens ? s.open_ns / (double)s.opens / 1e6 : 0;
        double blocks_per_op = ops ? (double)(blocks1 - blocks0) / (double)ops : 0;
        uint64_t anon = anon_memory_bytes();
        if (c.json) {
            printf("{\"engine\":\"%s\",\"benchmark\":\"%s\",\"num\":%llu,\"ops\":%ld,\"seconds\":%.4f,"
                   "\"ops_per_sec\":%.1f,\"micros_per_op\":%.4f,\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,"
                   "\"found\":%llu,"
                   "\"bytes_written\":%llu,\"db_size_bytes\":%llu,\"peak_rss_bytes\":%llu,\"anon_bytes\":%llu",
                   s.eng->name, name, (unsigned long long)c.num, ops, secs, ops / (secs > 0 ? secs : 1), micros, p50,
                   p99, p999, (unsigned long long)found, (unsigned long long)s.bytes, (unsigned long long)dir_size(c.db),
                   (unsigned long long)ru.ru_maxrss * 1024, (unsigned long long)anon);
            if (have_blocks)
                printf(",\"blocks_read_per_op\":%.4f,\"filter_memory_bytes\":%llu", blocks_per_op,
                       (unsigned long long)filter_bytes);
            if (writing) printf(",\"writer_ops_per_sec\":%.1f", writer_rate);
            if (show_fp)
                printf(",\"filter_probes_run\":%llu,\"filter_fpr_pct\":%.4f", (unsigned long long)probes, fp_pct);
            if (s.opens) printf(",\"cold_open_ms\":%.3f,\"cold_open_ms_max\":%.3f", open_ms, s.open_ns_max / 1e6);
            if (indexed_search) printf(",\"value_index_memory_bytes\":%llu", (unsigned long long)vindex_bytes);
            if (indexed_search) {
                double n = (double)(ops ? ops : 1);
                printf(",\"find\":{\"leaves\":%.1f,\"nodes_probed\":%.2f,\"nodes_positive\":%.2f,"
                       "\"leaves_probed\":%.2f,\"leaves_positive\":%.2f,\"partitions_scanned\":%.3f,"
                       "\"partitions_matched\":%.3f,\"entries_scanned\":%.1f,\"candidates\":%.3f,\"results\":%.3f,"
                       "\"plan_scan\":%.3f}",
                       s.fst.leaves / n, s.fst.nodes_probed / n, s.fst.nodes_positive / n, s.fst.leaves_probed / n,
                       s.fst.leaves_positive / n, s.fst.partitions_scanned / n, s.fst.partitions_matched / n,
                       s.fst.entries_scanned / n, s.fst.candidates / n, s.fst.results / n, s.fst.plan_scan / n);
            }
            s.eng->report(s.h, stdout);
            printf("}\n");
        } else {
            printf("%-15s : %10.3f micros/op %9.0f ops/sec;", name, micros, ops / (secs > 0 ? secs : 1));
            if (writing) printf(" (a writer beside: %.0f puts/sec)", writer_rate);
            if (s.bytes) printf(" %7.1f MB/s", (double)s.bytes / 1048576.0 / secs);
            if (!strncmp(name, "read", 4) || !strcmp(name, "multireadrandom") || !strcmp(name, "seekrandom") ||
                !strncmp(name, "findvalue", 9) || !strncmp(name, "range", 5))
                printf(" (%llu of %ld %s)", (unsigned long long)found, ops,
                       !strcmp(name, "rangeempty") || !strcmp(name, "rangecorrelated") ? "not empty" : "found");
            if (have_blocks && (!strncmp(name, "read", 4) || !strcmp(name, "multireadrandom") ||
                                !strncmp(name, "range", 5)))
                printf(" %.3f blocks read/op, filters %.1f MB resident, anon %.1f MB", blocks_per_op,
                       (double)filter_bytes / 1048576.0, (double)anon / 1048576.0);
            if (show_fp)
                printf(" filter false positives %.4f%% of %llu probes", fp_pct, (unsigned long long)probes);
            if (indexed_search) {
                double n = (double)(ops ? ops : 1);
                printf(" leaves probed %.2f%% of %.0f, partitions scanned %.2f (%.2f false), %.0f%% scan plan",
                       s.fst.leaves ? 100.0 * s.fst.leaves_probed / (double)s.fst.leaves : 0.0,
                       s.fst.leaves / n, s.fst.partitions_scanned / n,
                       (s.fst.partitions_scanned - s.fst.partitions_matched) / n, 100.0 * s.fst.plan_scan / n);
                printf(", index memory %.1f MB (%.2f bytes/entry)", (double)vindex_bytes / 1048576.0,
                       c.num ? (double)vindex_bytes / (double)c.num : 0.0);
            }
            if (s.opens)
                printf(" [cold: reopened before each search, open %.1f ms mean, %.1f max]", open_ms,
                       s.open_ns_max / 1e6);
            printf("\n");
            if (c.histogram)
                printf("    latency us: p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", p50,
                       s.lat_ns[s.nlat * 9 / 10] / 1e3, p99, p999, s.lat_ns[s.nlat - 1] / 1e3);
        }
        fflush(stdout);
    }
    if (!c.json && status == 0 && eng == &bkv_bench_engine_bloomkv && !c.quiet) {
        char *st = bkv_property(s.h, "bloomkv.stats");
        if (st) printf("\n%s", st);
        bkv_free(st);
    }
    free(list);
    if (s.h) s.eng->close(s.h); /* NULL after a --cold reopen that failed */
    free(s.values);
    free(s.lat_ns);
    free(s.vbuf);
    if (tmpdir[0] && nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "bench: could not remove %s\n", tmpdir);
    return status;
}

/* Checked numbers for the flags: "10x", "" or "-1" for a count are refused
 * (strtoull alone would read 10, 0 and 2^64-1). *bad is set to the text. */
static uint64_t parse_u64(const char *s, const char **bad) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *s == '-' || *end || errno) *bad = s;
    return v;
}

static int parse_int(const char *s, const char **bad) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < INT_MIN || v > INT_MAX) *bad = s;
    return (int)v;
}

static double parse_double(const char *s, const char **bad) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || v != v) *bad = s;
    return v;
}

/* "1,2,4,8,16": ascending or not, as given; each 1..64. */
static int parse_thread_counts(const char *list, bench_sweep *sw) {
    sw->nthreads = 0;
    for (const char *p = list;;) {
        char *end;
        errno = 0;
        long n = strtol(p, &end, 10);
        if (end == p || errno || n < 1 || n > 64 || sw->nthreads == BENCH_MAX_THREAD_COUNTS) return -1;
        sw->threads[sw->nthreads++] = (int)n;
        if (*end == '\0') return 0;
        if (*end != ',') return -1;
        p = end + 1;
    }
}

int bkv_db_bench_main(int argc, char **argv) {
    const char *engine_name = "bloomkv", *plot_dir = NULL, *raw_path = NULL, *thread_list = "1";
    int compare = 0, rounds = 1;
    bench_cfg c = {.threads = 1, .benchmarks = "fillrandom,readrandom,readmissing", .num = 1000000, .key_size = 16,
                   .value_size = 100, .bloom_bits = 10, .filter = BKV_FILTER_BLOCKED_BLOOM,
                   .cache_size = 8u << 20, .write_buffer_size = 4u << 20, .seed = 301, .value_distinct = 100, .value_partition_entries = -1,
                   .searches = 1000, .scan_searches = 3, .wal_mmap = 1, .compact_for_reads = 1,
                   .range_len = 1024, .seek_nexts = 10,
                   .release_free_memory = 1};
    int have_reads = 0;
    static const struct option opts[] = {
        {"benchmarks", required_argument, 0, 'B'}, {"num", required_argument, 0, 'n'},
        {"reads", required_argument, 0, 'r'},      {"key_size", required_argument, 0, 'k'},
        {"value_size", required_argument, 0, 'v'}, {"bloom_bits", required_argument, 0, 'b'},
        {"filter", required_argument, 0, 'f'},     {"cache_size", required_argument, 0, 'c'},
        {"write_buffer_size", required_argument, 0, 'w'}, {"compression", required_argument, 0, 'z'},
        {"db", required_argument, 0, 'd'},         {"use_existing_db", no_argument, 0, 'u'},
        {"seed", required_argument, 0, 's'},       {"histogram", no_argument, 0, 'H'},
        {"json", no_argument, 0, 'j'},             {"sync", no_argument, 0, 'S'},
        {"compaction_style", required_argument, 0, 'C'},
        {"engine", required_argument, 0, 'E'},
        {"threads", required_argument, 0, 'T'},
        {"plot", required_argument, 0, 'P'},
        {"compare", no_argument, 0, 'X'},
        {"rounds", required_argument, 0, '+'},
        {"raw", required_argument, 0, '&'},
        {"level0_file_num_compaction_trigger", required_argument, 0, '0'},
        {"level0_slowdown_writes_trigger", required_argument, 0, '1'},
        {"level0_stop_writes_trigger", required_argument, 0, '2'},
        {"value_index", required_argument, 0, 'V'},
        {"value_filter_bits", required_argument, 0, 'M'},
        {"value_filter_hashes", required_argument, 0, 'K'},
        {"value_partition_entries", required_argument, 0, 'Q'},
        {"value_index_order", required_argument, 0, 'D'},
        {"value_distinct", required_argument, 0, 'U'},
        {"searches", required_argument, 0, 'R'},
        {"scan_searches", required_argument, 0, 'F'},
        {"partition_filters", no_argument, 0, 'p'},
        {"filter_partition_size", required_argument, 0, 'Z'},
        {"filter_memory_budget", required_argument, 0, 'G'},
        {"wal_mmap", required_argument, 0, 'W'},
        {"compact_for_reads", required_argument, 0, '3'},
        {"release_free_memory", required_argument, 0, '4'},
        {"max_background_jobs", required_argument, 0, '5'},
        {"compaction_nice", required_argument, 0, '6'},
        {"max_subcompactions", required_argument, 0, '7'},
        {"find_plan", required_argument, 0, 'L'},
        {"secondary_index", required_argument, 0, 'I'},
        {"value_summary_bits", required_argument, 0, '8'},
        {"cold", no_argument, 0, '9'},
        {"target_file_size", required_argument, 0, 'Y'},
        {"filter_stats", no_argument, 0, '%'},
        {"key_space", required_argument, 0, 'a'},
        {"range_len", required_argument, 0, 'e'},
        {"seek_nexts", required_argument, 0, 'g'},
        {"range_filter", required_argument, 0, 'i'},
        {"range_filter_from_level", required_argument, 0, 'l'},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
    if (bkv_exact_options("bloomkv-bench", argc, argv, opts, NULL)) {
        usage(stderr);
        return 2;
    }
    optind = 1;
    int ch, idx = 0;
    const char *bad_number = NULL, *bad_flag = NULL;
    while ((ch = getopt_long(argc, argv, "", opts, &idx)) != -1) {
        if (ch != '?' && !bad_number) bad_flag = opts[idx].name;
        switch (ch) {
        case 'B': c.benchmarks = optarg; break;
        case 'n': c.num = parse_u64(optarg, &bad_number); break;
        case 'r': c.reads = parse_u64(optarg, &bad_number), have_reads = 1; break;
        case 'k': c.key_size = parse_int(optarg, &bad_number); break;
        case 'v': c.value_size = parse_int(optarg, &bad_number); break;
        case 'b': c.bloom_bits = parse_double(optarg, &bad_number); break;
        case 'f':
            c.filter = bkv_filter_type_from_name(optarg);
            if (c.filter < 0) goto bad_value;
            break;
        case 'c': c.cache_size = parse_u64(optarg, &bad_number); break;
        case 'w': c.write_buffer_size = parse_u64(optarg, &bad_number); break;
        case 'z':
            if (strcmp(optarg, "none") == 0) c.compression = BKV_COMPRESSION_NONE;
            else if (strcmp(optarg, "lz4") == 0) c.compression = BKV_COMPRESSION_LZ4;
            else if (strcmp(optarg, "zstd") == 0) c.compression = BKV_COMPRESSION_ZSTD;
            else goto bad_value;
            break;
        case 'd': c.db = optarg; break;
        case 'u': c.use_existing_db = 1; break;
        case 's': c.seed = parse_u64(optarg, &bad_number); break;
        case 'H': c.histogram = 1; break;
        case 'j': c.json = 1; break;
        case 'S': c.sync = 1; break;
        case 'C':
            if (strcmp(optarg, "leveled") == 0) c.compaction_style = BKV_COMPACTION_LEVELED;
            else if (strcmp(optarg, "tiered") == 0) c.compaction_style = BKV_COMPACTION_TIERED;
            else goto bad_value;
            break;
        case 'E': engine_name = optarg; break;
        case 'T': thread_list = optarg; break;
        case '+':
            rounds = parse_int(optarg, &bad_number);
            if (rounds < 1 || rounds > BENCH_MAX_ROUNDS) goto bad_value;
            break;
        case '&': raw_path = optarg; break;
        case 'X': compare = 1; break;
        case 'P': plot_dir = optarg; break;
        case '0': c.l0_trigger = parse_int(optarg, &bad_number); break;
        case '1': c.l0_slowdown = parse_int(optarg, &bad_number); break;
        case '2': c.l0_stop = parse_int(optarg, &bad_number); break;
        case 'V':
            if (strcmp(optarg, "none") == 0) c.value_index = BKV_VALUE_INDEX_NONE;
            else if (strcmp(optarg, "flat") == 0) c.value_index = BKV_VALUE_INDEX_FLAT;
            else if (strcmp(optarg, "hierarchy") == 0) c.value_index = BKV_VALUE_INDEX_HIERARCHY;
            else if (strcmp(optarg, "bitsliced") == 0) c.value_index = BKV_VALUE_INDEX_BITSLICED;
            else if (strcmp(optarg, "paged") == 0) c.value_index = BKV_VALUE_INDEX_PAGED;
            else goto bad_value;
            break;
        case 'M': c.value_filter_bits = (uint32_t)parse_u64(optarg, &bad_number); break;
        case 'K': c.value_filter_hashes = parse_int(optarg, &bad_number); break;
        case 'Q': c.value_partition_entries = parse_int(optarg, &bad_number); break;
        case 'D': c.value_index_order = parse_int(optarg, &bad_number); break;
        case 'U': c.value_distinct = parse_double(optarg, &bad_number); break;
        case 'R': c.searches = parse_u64(optarg, &bad_number); break;
        case 'F': c.scan_searches = parse_u64(optarg, &bad_number); break;
        case 'p': c.partition_filters = 1; break;
        case 'Z': c.filter_partition_size = parse_u64(optarg, &bad_number); break;
        case 'G': c.filter_memory_budget = parse_u64(optarg, &bad_number); break;
        case 'I':
            if (strcmp(optarg, "composite") == 0) c.secondary_index = 1;
            else if (strcmp(optarg, "none") == 0) c.secondary_index = 0;
            else goto bad_value;
            break;
        case 'L':
            if (strcmp(optarg, "auto") == 0) c.find_plan = BKV_FIND_PLAN_AUTO;
            else if (strcmp(optarg, "index") == 0) c.find_plan = BKV_FIND_PLAN_INDEX;
            else if (strcmp(optarg, "scan") == 0) c.find_plan = BKV_FIND_PLAN_SCAN;
            else goto bad_value;
            break;
        case 'W':
            c.wal_mmap = parse_int(optarg, &bad_number);
            if (c.wal_mmap != 0 && c.wal_mmap != 1) goto bad_value;
            break;
        case '3':
            c.compact_for_reads = parse_int(optarg, &bad_number);
            if (c.compact_for_reads != 0 && c.compact_for_reads != 1) goto bad_value;
            break;
        case '4':
            c.release_free_memory = parse_int(optarg, &bad_number);
            if (c.release_free_memory != 0 && c.release_free_memory != 1) goto bad_value;
            break;
        case '5':
            c.max_background_jobs = parse_int(optarg, &bad_number);
            if (c.max_background_jobs < 1) goto bad_value;
            break;
        case '6':
            c.compaction_nice = parse_int(optarg, &bad_number);
            if (c.compaction_nice < 0 || c.compaction_nice > 19) goto bad_value;
            break;
        case '7':
            c.max_subcompactions = parse_int(optarg, &bad_number);
            if (c.max_subcompactions < 1 || c.max_subcompactions > 8) goto bad_value;
            break;
        case '8':
            c.value_summary_bits = parse_int(optarg, &bad_number);
            if (c.value_summary_bits < 2 || c.value_summary_bits > 16) goto bad_value;
            break;
        case '9': c.cold = 1; break;
        case 'Y': c.target_file_size = parse_u64(optarg, &bad_number); break;
        case '%': c.filter_stats = 1; break;
        case 'a':
            if (strcmp(optarg, "spread") == 0) c.spread_keys = 1;
            else if (strcmp(optarg, "decimal") == 0) c.spread_keys = 0;
            else bad_number = optarg;
            break;
        case 'e': c.range_len = (uint64_t)parse_int(optarg, &bad_number); break;
        case 'g': c.seek_nexts = parse_int(optarg, &bad_number); break;
        case 'l': c.range_filter_from_level = (int)parse_int(optarg, &bad_number); break;
        case 'i': {
            char *end;
            c.range_filter_bits = strtod(optarg, &end);
            if (*end || (c.range_filter_bits != 0 && (c.range_filter_bits < 3 || c.range_filter_bits > 66)))
                bad_number = optarg;
            break;
        }
        case 'h': usage(stdout); return 0;
        default: goto bad;
        }
    }
    if (bad_number) {
        fprintf(stderr, "bench: --%s takes a number, not '%s'\n", bad_flag, bad_number);
        return 2;
    }
    if (optind != argc || c.num == 0 || c.key_size < 8 || c.key_size > 60 || c.value_size < 1 ||
        c.value_size > (1 << 20) || c.bloom_bits <= 0 || c.value_distinct <= 0 || c.value_distinct > 100)
        goto bad;
    if (!have_reads) c.reads = c.num;

    static const bench_engine *const engines[] = {&bkv_bench_engine_bloomkv, &bkv_bench_engine_leveldb,
                                                  &bkv_bench_engine_rocksdb};
    bench_sweep sw = {.cfg = &c, .rounds = rounds, .plot_dir = plot_dir, .raw_path = raw_path};
    for (size_t i = 0; i < 3; i++)
        if (engines[i]->name && (compare || strcmp(engines[i]->name, engine_name) == 0))
            sw.engines[sw.nengines++] = engines[i];
    if (!sw.nengines) {
        fprintf(stderr, "bench: engine '%s' is not available in this build\n", engine_name);
        return 2;
    }
    if (parse_thread_counts(thread_list, &sw) != 0) {
        fprintf(stderr, "bench: --threads takes counts from 1 to 64, at most %d, comma-separated, not '%s'\n",
                BENCH_MAX_THREAD_COUNTS, thread_list);
        return 2;
    }
    if (c.cold && (sw.threads[sw.nthreads - 1] > 1 || strstr(c.benchmarks, WHILE_WRITING))) {
        fprintf(stderr, "bench: --cold reopens the database before each search: one thread, no writer beside\n");
        return 2;
    }
    if (plot_dir && bench_prepare_dir(plot_dir, "--plot") != 0) return 3; /* before the runs, not after */
    if (sw.nengines == 1 && sw.nthreads == 1 && rounds == 1 && !plot_dir && !raw_path) {
        c.threads = sw.threads[0];
        double ops[BENCH_MAX_BENCHMARKS];
        size_t nb;
        return bench_run_engine(c, sw.engines[0], ops, &nb);
    }
    return bench_sweep_run(&sw);
bad_value:
    fprintf(stderr, "bench: --%s does not take '%s'\n", bad_flag, optarg);
bad:
    usage(stderr);
    return 2;
}
