/* `bloomkv-bench db` adapter for RocksDB, through its C API (Debian's
 * librocksdb-dev). RocksDB is configured the way its own tuning guide
 * ("Setup Options and Basic Tuning") says for the memory bloomkv gets;
 * docs/benchmarks.md lists each setting with its reason:
 * - the same write buffer and three of them (bloomkv's
 *   max_write_buffer_number), merged one at a time;
 * - level 1 sized to hold a full level 0 (write buffer x level-0 trigger),
 *   files a tenth of that, and dynamic level sizing, as bloomkv sizes its
 *   levels; RocksDB's defaults (256 MB level 1, 64 MB files) are made for
 *   64 MB buffers and make each small level-0 compaction rewrite far more
 *   than it takes in;
 * - as many background jobs and subcompactions as bloomkv runs, background
 *   writes synced every 1 MiB (bytes_per_sync);
 * - mapped reads, as bloomkv maps its tables;
 * - 4 KiB blocks, an LRU block cache of the same size, a full-filter Bloom
 *   at the same bits per key, the same compression. */
#include <stdlib.h>
#include <string.h>

#include "bench_engine.h"

#ifdef BKV_HAVE_ROCKSDB
#include <rocksdb/c.h>

#include "bloomkv.h"

typedef struct rdb {
    int stats; /* statistics kept (--filter_stats) */
    rocksdb_t *db;
    rocksdb_options_t *opts;
    rocksdb_block_based_table_options_t *table;
    rocksdb_cache_t *cache;
    rocksdb_readoptions_t *ro;
    rocksdb_writeoptions_t *wo, *wo_sync;
    rocksdb_flushoptions_t *fo;
} rdb;

static void rdb_close(void *h) {
    rdb *r = h;
    if (r->db) rocksdb_close(r->db);
    rocksdb_options_destroy(r->opts);
    rocksdb_block_based_options_destroy(r->table);
    if (r->cache) rocksdb_cache_destroy(r->cache);
    rocksdb_readoptions_destroy(r->ro);
    rocksdb_writeoptions_destroy(r->wo);
    rocksdb_writeoptions_destroy(r->wo_sync);
    rocksdb_flushoptions_destroy(r->fo);
    free(r);
}

static int rdb_open(const bench_cfg *cfg, void **h) {
    rdb *r = calloc(1, sizeof *r);
    if (!r) return -1;
    r->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(r->opts, 1);
    if ((r->stats = cfg->filter_stats)) rocksdb_options_enable_statistics(r->opts);
    rocksdb_options_set_write_buffer_size(r->opts, cfg->write_buffer_size);
    rocksdb_options_set_max_write_buffer_number(r->opts, 3);
    rocksdb_options_set_min_write_buffer_number_to_merge(r->opts, 1);
    int l0_trigger = cfg->l0_trigger ? cfg->l0_trigger : 4;
    rocksdb_options_set_level0_file_num_compaction_trigger(r->opts, l0_trigger);
    if (cfg->l0_slowdown) rocksdb_options_set_level0_slowdown_writes_trigger(r->opts, cfg->l0_slowdown);
    if (cfg->l0_stop) rocksdb_options_set_level0_stop_writes_trigger(r->opts, cfg->l0_stop);
    uint64_t level_base = cfg->write_buffer_size * (uint64_t)l0_trigger;
    rocksdb_options_set_max_bytes_for_level_base(r->opts, level_base);
    rocksdb_options_set_target_file_size_base(r->opts, cfg->target_file_size ? cfg->target_file_size
                                                                            : level_base / 10);
    rocksdb_options_set_level_compaction_dynamic_level_bytes(r->opts, 1);
    rocksdb_options_set_max_background_jobs(r->opts, cfg->max_background_jobs ? cfg->max_background_jobs : 2);
    rocksdb_options_set_max_subcompactions(r->opts, cfg->max_subcompactions ? (uint32_t)cfg->max_subcompactions : 2);
    rocksdb_options_set_bytes_per_sync(r->opts, 1u << 20);
    rocksdb_options_set_allow_mmap_reads(r->opts, 1);
    rocksdb_options_set_max_open_files(r->opts, 1000);
    int comp = cfg->compression == BKV_COMPRESSION_LZ4    ? rocksdb_lz4_compression
               : cfg->compression == BKV_COMPRESSION_ZSTD ? rocksdb_zstd_compression
                                                           : rocksdb_no_compression;
    rocksdb_options_set_compression(r->opts, comp);
    r->table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_size(r->table, 4096);
    if (cfg->cache_size) {
        r->cache = rocksdb_cache_create_lru(cfg->cache_size);
        rocksdb_block_based_options_set_block_cache(r->table, r->cache);
    } else {
        rocksdb_block_based_options_set_no_block_cache(r->table, 1);
    }
    if (cfg->filter != 0)
        rocksdb_block_based_options_set_filter_policy(r->table, rocksdb_filterpolicy_create_bloom_full(cfg->bloom_bits));
    rocksdb_options_set_block_based_table_factory(r->opts, r->table);
    r->ro = rocksdb_readoptions_create();
    r->wo = rocksdb_writeoptions_create();
    r->wo_sync = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(r->wo_sync, 1);
    r->fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(r->fo, 1);
    char *err = NULL;
    r->db = rocksdb_open(r->opts, cfg->db, &err);
    if (err) {
        fprintf(stderr, "bench: rocksdb: %s\n", err);
        rocksdb_free(err);
        rdb_close(r);
        return -1;
    }
    *h = r;
    return 0;
}

static int check(char *err) {
    if (!err) return 0;
    fprintf(stderr, "bench: rocksdb: %s\n", err);
    rocksdb_free(err);
    return -1;
}

static int rdb_put(void *h, const char *k, size_t kl, const char *v, size_t vl, int sync) {
    rdb *r = h;
    char *err = NULL;
    rocksdb_put(r->db, sync ? r->wo_sync : r->wo, k, kl, v, vl, &err);
    return check(err);
}

static int rdb_del(void *h, const char *k, size_t kl) {
    rdb *r = h;
    char *err = NULL;
    rocksdb_delete(r->db, r->wo, k, kl, &err);
    return check(err);
}

static int rdb_get(void *h, const char *k, size_t kl) {
    rdb *r = h;
    char *err = NULL;
    size_t vl;
    char *v = rocksdb_get(r->db, r->ro, k, kl, &vl, &err);
    if (check(err)) return -1;
    if (!v) return 0;
    rocksdb_free(v);
    return 1;
}

static long rdb_multi_get(void *h, const char *const *keys, const size_t *klens, size_t n) {
    rdb *r = h;
    char *vals[64];
    size_t vls[64];
    char *errs[64];
    long found = 0;
    for (size_t base = 0; base < n; base += 64) {
        size_t m = n - base < 64 ? n - base : 64;
        rocksdb_multi_get(r->db, r->ro, m, keys + base, klens + base, vals, vls, errs);
        for (size_t i = 0; i < m; i++) {
            if (errs[i]) {
                check(errs[i]);
                return -1;
            }
            if (vals[i]) {
                found++;
                rocksdb_free(vals[i]);
            }
        }
    }
    return found;
}

static int rdb_compact(void *h) {
    rdb *r = h;
    char *err = NULL;
    rocksdb_flush(r->db, r->fo, &err);
    if (check(err)) return -1;
    rocksdb_compact_range(r->db, NULL, 0, NULL, 0);
    return 0;
}

/* Reads up to n entries from where it stands, then destroys it: entries
 * read, -1 on an error. */
static long rdb_walk(rocksdb_iterator_t *it, long n) {
    long seen = 0;
    size_t kl, vl;
    for (; seen < n && rocksdb_iter_valid(it); rocksdb_iter_next(it), seen++) {
        rocksdb_iter_key(it, &kl);
        rocksdb_iter_value(it, &vl);
    }
    char *err = NULL;
    rocksdb_iter_get_error(it, &err);
    rocksdb_iter_destroy(it);
    return check(err) ? -1 : seen;
}

static long rdb_scan(void *h, const char *from, size_t fl, long n) {
    rdb *r = h;
    rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ro);
    if (from) rocksdb_iter_seek(it, from, fl);
    else rocksdb_iter_seek_to_first(it);
    return rdb_walk(it, n);
}

static long rdb_range_scan(void *h, const char *lo, size_t ll, const char *hi, size_t hl, long n) {
    rdb *r = h;
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_readoptions_set_iterate_lower_bound(ro, lo, ll);
    rocksdb_readoptions_set_iterate_upper_bound(ro, hi, hl);
    rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, ro);
    rocksdb_iter_seek(it, lo, ll);
    long seen = rdb_walk(it, n);
    rocksdb_readoptions_destroy(ro);
    return seen;
}

static long rdb_scan_value(void *h, const char *v, size_t vl) {
    rdb *r = h;
    rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ro);
    long matches = 0;
    size_t kl, n;
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        rocksdb_iter_key(it, &kl);
        const char *val = rocksdb_iter_value(it, &n);
        matches += n == vl && memcmp(val, v, vl) == 0;
    }
    char *err = NULL;
    rocksdb_iter_get_error(it, &err);
    rocksdb_iter_destroy(it);
    return check(err) ? -1 : matches;
}

/* A ticker's count from the statistics' text ("NAME COUNT : N" lines). */
static int ticker(const char *text, const char *name, uint64_t *value) {
    size_t n = strlen(name);
    for (const char *p = text; (p = strstr(p, name)); p += n)
        if ((p == text || p[-1] == '\n') && !strncmp(p + n, " COUNT : ", 9)) {
            *value = strtoull(p + n + 9, NULL, 10);
            return 0;
        }
    return -1;
}

/* The key filters' counters under bloomkv's names, from RocksDB's tickers
 * for whole-key filters on point reads: "useful" is a filter's "no",
 * "full.positive" its "maybe", "full.true.positive" a "maybe" whose table
 * held the key. */
static int rdb_counter(void *h, const char *name, uint64_t *value) {
    rdb *r = h;
    int probes = strcmp(name, "filter-probes") == 0;
    if (!r->stats || (!probes && strcmp(name, "filter-false-positives") != 0)) return -1;
    char *text = rocksdb_options_statistics_get_string(r->opts);
    uint64_t useful = 0, positive = 0, true_positive = 0;
    int rc = text && !ticker(text, "rocksdb.bloom.filter.useful", &useful) &&
                     !ticker(text, "rocksdb.bloom.filter.full.positive", &positive) &&
                     !ticker(text, "rocksdb.bloom.filter.full.true.positive", &true_positive)
                 ? 0
                 : -1;
    if (text) rocksdb_free(text);
    *value = probes ? useful + positive : positive - true_positive;
    return rc;
}

static void rdb_report(void *h, FILE *out) {
    static const char *names[] = {"filter-probes", "filter-false-positives"};
    uint64_t v;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (rdb_counter(h, names[i], &v) == 0) fprintf(out, ",\"%s\":%llu", names[i], (unsigned long long)v);
}


/* The composite index as a rocksdb user writes it (bench_engine.h). */
static int rdb_put_indexed(void *h, const char *k, size_t kl, const char *v, size_t vl, int sync) {
    rdb *r = h;
    char *err = NULL;
    size_t ol = 0;
    char *old = rocksdb_get(r->db, r->ro, k, kl, &ol, &err);
    if (check(err)) return -1;
    char *ik = malloc(4 + (vl > ol ? vl : ol) + kl);
    rocksdb_writebatch_t *b = rocksdb_writebatch_create();
    if (ik && old && !(ol == vl && memcmp(old, v, vl) == 0))
        rocksdb_writebatch_delete(b, ik, bench_index_key(ik, old, ol, k, kl));
    rocksdb_writebatch_put(b, k, kl, v, vl);
    if (ik) rocksdb_writebatch_put(b, ik, bench_index_key(ik, v, vl, k, kl), "", 0);
    if (ik) rocksdb_write(r->db, sync ? r->wo_sync : r->wo, b, &err);
    rocksdb_writebatch_destroy(b);
    if (old) rocksdb_free(old);
    free(ik);
    return ik ? check(err) : -1;
}

static long rdb_find_indexed(void *h, const char *v, size_t vl) {
    rdb *r = h;
    char *prefix = malloc(4 + vl);
    if (!prefix) return -1;
    size_t pl = bench_index_key(prefix, v, vl, NULL, 0);
    rocksdb_iterator_t *it = rocksdb_create_iterator(r->db, r->ro);
    long found = 0;
    for (rocksdb_iter_seek(it, prefix, pl); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl;
        const char *k = rocksdb_iter_key(it, &kl);
        if (kl < pl || memcmp(k, prefix, pl) != 0) break;
        if (rdb_get(h, k + pl, kl - pl) == 1) found++;
    }
    char *err = NULL;
    rocksdb_iter_get_error(it, &err);
    rocksdb_iter_destroy(it);
    free(prefix);
    return check(err) ? -1 : found;
}

const bench_engine bkv_bench_engine_rocksdb = {
    .name = "rocksdb", .open = rdb_open, .put = rdb_put, .del = rdb_del, .get = rdb_get,
    .multi_get = rdb_multi_get, .compact = rdb_compact, .scan = rdb_scan,
    .range_scan = rdb_range_scan,
    .scan_value = rdb_scan_value, .put_indexed = rdb_put_indexed, .find_indexed = rdb_find_indexed,
    .report = rdb_report, .counter = rdb_counter, .close = rdb_close,
};
#else
const bench_engine bkv_bench_engine_rocksdb = {.name = NULL};
#endif
