/* The engine adapters of `bloomkv-bench db`: one struct of functions per
 * engine, so one workload generator and timing loop drives them all. */
#ifndef BKV_BENCH_ENGINE_H
#define BKV_BENCH_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bloomkv.h"

typedef struct bench_cfg {
    const char *benchmarks;
    uint64_t num, reads;
    int key_size, value_size;
    double bloom_bits;
    int filter;
    size_t cache_size, write_buffer_size;
    int compression;
    const char *db;
    int use_existing_db;
    uint64_t seed;
    int histogram, json, sync;
    int compaction_style;
    int l0_trigger, l0_slowdown, l0_stop; /* 0: engine defaults */
    int quiet;                            /* no engine report after the run */
    int threads;                          /* client threads; default 1 */
    /* Search by value (bloomkv only; 0 = engine defaults). */
    int value_index;
    uint32_t value_filter_bits;
    long value_partition_entries;         /* -1: engine default (0 means one filter per table) */
    int value_filter_hashes, value_index_order;
    double value_distinct;                /* percent of keys with distinct values; default 100 */
    uint64_t searches, scan_searches;     /* findvalue / findvalue_scan operations */
    /* Key filters when memory is the limit (bloomkv only). */
    int partition_filters;
    int wal_mmap;                 /* bloomkv: write the WAL through a map (default) */
    int compact_for_reads;        /* bloomkv: reads may make compactions due (default) */
    int release_free_memory;      /* bloomkv: trim the C library's heaps after flushes and compactions */
    int max_background_jobs;      /* bloomkv, RocksDB: background threads; 0: the default (2) */
    int compaction_nice;          /* bloomkv: nice steps below the caller for the compaction thread */
    int max_subcompactions;       /* bloomkv, RocksDB: threads a large compaction is split across; 0: 2 */
    unsigned find_plan;           /* findvalue: BKV_FIND_PLAN_* */
    int secondary_index;          /* 1: rows carry a composite-key index (--secondary_index composite) */
    size_t filter_partition_size;         /* 0: engine default */
    uint64_t filter_memory_budget;        /* 0: none */
    int value_summary_bits;               /* bloomkv, paged value index: 0: the default */
    uint64_t target_file_size;            /* table size (LevelDB: max_file_size); 0: engine default */
    /* findvalue: each search on the database reopened with its pages
     * dropped from the page cache first (a cold cache: what stays in
     * memory is only what the engine keeps resident from its open). */
    int cold;
    int filter_stats; /* RocksDB: keep statistics, for the key filters' counters */
    /* Range benchmarks: keys spread evenly over 2^64 (key i: the big-endian
     * eight bytes of i * 2^64 / num, padded), ranges of range_len
     * consecutive 64-bit values, rangescan reading seek_nexts keys;
     * bloomkv's range filters at range_filter_bits per key (0: none), from
     * level range_filter_from_level down (levels above it: none). */
    int spread_keys;
    uint64_t range_len;
    long seek_nexts;
    double range_filter_bits;
    int range_filter_from_level;
} bench_cfg;

#define BENCH_FIND_FIRST 1    /* stop at the first match */
#define BENCH_FIND_AND_SELF 2 /* search for the value AND the value */

typedef struct bench_engine {
    const char *name;
    int (*open)(const bench_cfg *cfg, void **h);
    int (*put)(void *h, const char *k, size_t kl, const char *v, size_t vl, int sync);
    int (*del)(void *h, const char *k, size_t kl);
    /* 1 found, 0 not found, < 0 error */
    int (*get)(void *h, const char *k, size_t kl);
    /* found count for n keys, < 0 on error */
    long (*multi_get)(void *h, const char *const *keys, const size_t *klens, size_t n);
    int (*compact)(void *h); /* flush, then compact everything into the last level */
    /* Iterators: visit n entries from the first (readseq), or seek to key
     * and read up to n entries (seekrandom); entries visited, < 0 error. */
    long (*scan)(void *h, const char *from, size_t fl, long n);
    /* Entries in [lo, hi), at most n of them: an iterator given both
     * bounds where the engine takes them; entries visited, < 0 error. */
    long (*range_scan)(void *h, const char *lo, size_t ll, const char *hi, size_t hl, long n);
    /* 1 when [lo, hi) holds no key, 0 when it holds one, < 0 error; NULL:
     * range_scan of one entry (an engine without a call of its own). */
    int (*range_empty)(void *h, const char *lo, size_t ll, const char *hi, size_t hl);
    /* The keys whose value is v, found by reading every entry (what a user
     * of an engine without a value index must do): matches, < 0 error. */
    long (*scan_value)(void *h, const char *v, size_t vl);
    /* The same through a value index (flags: BENCH_FIND_*); NULL when the
     * engine has none. */
    long (*find_value)(void *h, const char *v, size_t vl, unsigned plan, unsigned flags, bkv_find_stats *st);
    /* --secondary_index composite, the index users build by hand: the row
     * and its index entry (bench_index_key, empty value) in one write
     * batch, the entry of the row's old value (read first) deleted; and the
     * lookup: a prefix scan of the index, each row read back. */
    int (*put_indexed)(void *h, const char *k, size_t kl, const char *v, size_t vl, int sync);
    long (*find_indexed)(void *h, const char *v, size_t vl);
    void (*report)(void *h, FILE *out); /* engine counters as JSON fields (leading comma) */
    /* One engine counter by its bloomkv name (blocks-read, filter memory);
     * NULL when the engine has none. */
    int (*counter)(void *h, const char *name, uint64_t *value);
    void (*close)(void *h);
} bench_engine;


/* A composite index entry: 0xFF 'v', the value's length (u16, big
 * endian), the value, the key. Every entry sorts after every row (bench
 * keys are digits) and the entries of one value are one key range.
 * buf holds 4 + vl + kl bytes; with k NULL, the prefix of value v. */
static inline size_t bench_index_key(char *buf, const char *v, size_t vl, const char *k, size_t kl) {
    buf[0] = (char)0xFF;
    buf[1] = 'v';
    buf[2] = (char)(vl >> 8);
    buf[3] = (char)vl;
    memcpy(buf + 4, v, vl);
    if (k) memcpy(buf + 4 + vl, k, kl);
    return 4 + vl + (k ? kl : 0);
}

extern const bench_engine bkv_bench_engine_bloomkv;
extern const bench_engine bkv_bench_engine_leveldb;   /* name NULL when not built */
extern const bench_engine bkv_bench_engine_rocksdb;

#endif
