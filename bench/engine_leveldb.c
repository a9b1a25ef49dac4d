/* `bloomkv-bench db` adapter for LevelDB, through its C API (Debian's
 * libleveldb-dev). Settings mirror bloomkv's: write buffer, block size,
 * block cache, Bloom bits per key; LevelDB offers no LZ4/zstd, so those
 * run uncompressed. */
#include <stdlib.h>
#include <string.h>

#include "bench_engine.h"

#ifdef BKV_HAVE_LEVELDB
#include <leveldb/c.h>

typedef struct ldb {
    leveldb_t *db;
    leveldb_options_t *opts;
    leveldb_cache_t *cache;
    leveldb_filterpolicy_t *filter;
    leveldb_readoptions_t *ro;
    leveldb_writeoptions_t *wo, *wo_sync;
} ldb;

static void ldb_close(void *h) {
    ldb *l = h;
    if (l->db) leveldb_close(l->db);
    leveldb_options_destroy(l->opts);
    if (l->cache) leveldb_cache_destroy(l->cache);
    if (l->filter) leveldb_filterpolicy_destroy(l->filter);
    leveldb_readoptions_destroy(l->ro);
    leveldb_writeoptions_destroy(l->wo);
    leveldb_writeoptions_destroy(l->wo_sync);
    free(l);
}

static int ldb_open(const bench_cfg *cfg, void **h) {
    ldb *l = calloc(1, sizeof *l);
    if (!l) return -1;
    l->opts = leveldb_options_create();
    leveldb_options_set_create_if_missing(l->opts, 1);
    leveldb_options_set_write_buffer_size(l->opts, cfg->write_buffer_size);
    leveldb_options_set_block_size(l->opts, 4096);
    leveldb_options_set_max_open_files(l->opts, 1000);
    if (cfg->target_file_size) leveldb_options_set_max_file_size(l->opts, cfg->target_file_size);
    leveldb_options_set_compression(l->opts, leveldb_no_compression);
    if (cfg->cache_size) {
        l->cache = leveldb_cache_create_lru(cfg->cache_size);
        leveldb_options_set_cache(l->opts, l->cache);
    }
    if (cfg->filter != 0) {
        l->filter = leveldb_filterpolicy_create_bloom((int)(cfg->bloom_bits + 0.5));
        leveldb_options_set_filter_policy(l->opts, l->filter);
    }
    l->ro = leveldb_readoptions_create();
    l->wo = leveldb_writeoptions_create();
    l->wo_sync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(l->wo_sync, 1);
    char *err = NULL;
    l->db = leveldb_open(l->opts, cfg->db, &err);
    if (err) {
        fprintf(stderr, "bench: leveldb: %s\n", err);
        leveldb_free(err);
        ldb_close(l);
        return -1;
    }
    *h = l;
    return 0;
}

static int check(char *err) {
    if (!err) return 0;
    fprintf(stderr, "bench: leveldb: %s\n", err);
    leveldb_free(err);
    return -1;
}

static int ldb_put(void *h, const char *k, size_t kl, const char *v, size_t vl, int sync) {
    ldb *l = h;
    char *err = NULL;
    leveldb_put(l->db, sync ? l->wo_sync : l->wo, k, kl, v, vl, &err);
    return check(err);
}

static int ldb_del(void *h, const char *k, size_t kl) {
    ldb *l = h;
    char *err = NULL;
    leveldb_delete(l->db, l->wo, k, kl, &err);
    return check(err);
}

static int ldb_get(void *h, const char *k, size_t kl) {
    ldb *l = h;
    char *err = NULL;
    size_t vl;
    char *v = leveldb_get(l->db, l->ro, k, kl, &vl, &err);
    if (check(err)) return -1;
    if (!v) return 0;
    leveldb_free(v);
    return 1;
}

/* LevelDB has no multi-get: what its users write instead. */
static long ldb_multi_get(void *h, const char *const *keys, const size_t *klens, size_t n) {
    long found = 0;
    for (size_t i = 0; i < n; i++) {
        int r = ldb_get(h, keys[i], klens[i]);
        if (r < 0) return -1;
        found += r;
    }
    return found;
}

static int ldb_compact(void *h) {
    leveldb_compact_range(((ldb *)h)->db, NULL, 0, NULL, 0);
    return 0;
}

static long ldb_scan(void *h, const char *from, size_t fl, long n) {
    ldb *l = h;
    leveldb_iterator_t *it = leveldb_create_iterator(l->db, l->ro);
    if (from) leveldb_iter_seek(it, from, fl);
    else leveldb_iter_seek_to_first(it);
    long seen = 0;
    size_t kl, vl;
    for (; seen < n && leveldb_iter_valid(it); leveldb_iter_next(it), seen++) {
        leveldb_iter_key(it, &kl);
        leveldb_iter_value(it, &vl);
    }
    char *err = NULL;
    leveldb_iter_get_error(it, &err);
    leveldb_iter_destroy(it);
    return check(err) ? -1 : seen;
}

/* LevelDB's C API has no iterator bounds: seek, then stop at hi. */
static long ldb_range_scan(void *h, const char *lo, size_t ll, const char *hi, size_t hl, long n) {
    ldb *l = h;
    leveldb_iterator_t *it = leveldb_create_iterator(l->db, l->ro);
    leveldb_iter_seek(it, lo, ll);
    long seen = 0;
    size_t kl, vl;
    for (; seen < n && leveldb_iter_valid(it); leveldb_iter_next(it), seen++) {
        const char *k = leveldb_iter_key(it, &kl);
        int c = memcmp(k, hi, kl < hl ? kl : hl);
        if (c > 0 || (c == 0 && kl >= hl)) break;
        leveldb_iter_value(it, &vl);
    }
    char *err = NULL;
    leveldb_iter_get_error(it, &err);
    leveldb_iter_destroy(it);
    return check(err) ? -1 : seen;
}

static long ldb_scan_value(void *h, const char *v, size_t vl) {
    ldb *l = h;
    leveldb_iterator_t *it = leveldb_create_iterator(l->db, l->ro);
    long matches = 0;
    size_t kl, n;
    for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        leveldb_iter_key(it, &kl);
        const char *val = leveldb_iter_value(it, &n);
        matches += n == vl && memcmp(val, v, vl) == 0;
    }
    char *err = NULL;
    leveldb_iter_get_error(it, &err);
    leveldb_iter_destroy(it);
    return check(err) ? -1 : matches;
}

static void ldb_report(void *h, FILE *out) {
    (void)h;
    (void)out;
}


/* The composite index as a leveldb user writes it (bench_engine.h). */
static int ldb_put_indexed(void *h, const char *k, size_t kl, const char *v, size_t vl, int sync) {
    ldb *l = h;
    char *err = NULL;
    size_t ol = 0;
    char *old = leveldb_get(l->db, l->ro, k, kl, &ol, &err);
    if (check(err)) return -1;
    char *ik = malloc(4 + (vl > ol ? vl : ol) + kl);
    leveldb_writebatch_t *b = leveldb_writebatch_create();
    if (ik && old && !(ol == vl && memcmp(old, v, vl) == 0))
        leveldb_writebatch_delete(b, ik, bench_index_key(ik, old, ol, k, kl));
    leveldb_writebatch_put(b, k, kl, v, vl);
    if (ik) leveldb_writebatch_put(b, ik, bench_index_key(ik, v, vl, k, kl), "", 0);
    if (ik) leveldb_write(l->db, sync ? l->wo_sync : l->wo, b, &err);
    leveldb_writebatch_destroy(b);
    if (old) leveldb_free(old);
    free(ik);
    return ik ? check(err) : -1;
}

static long ldb_find_indexed(void *h, const char *v, size_t vl) {
    ldb *l = h;
    char *prefix = malloc(4 + vl);
    if (!prefix) return -1;
    size_t pl = bench_index_key(prefix, v, vl, NULL, 0);
    leveldb_iterator_t *it = leveldb_create_iterator(l->db, l->ro);
    long found = 0;
    for (leveldb_iter_seek(it, prefix, pl); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t kl;
        const char *k = leveldb_iter_key(it, &kl);
        if (kl < pl || memcmp(k, prefix, pl) != 0) break;
        if (ldb_get(h, k + pl, kl - pl) == 1) found++;
    }
    char *err = NULL;
    leveldb_iter_get_error(it, &err);
    leveldb_iter_destroy(it);
    free(prefix);
    return check(err) ? -1 : found;
}

const bench_engine bkv_bench_engine_leveldb = {
    .name = "leveldb", .open = ldb_open, .put = ldb_put, .del = ldb_del, .get = ldb_get,
    .multi_get = ldb_multi_get, .compact = ldb_compact, .scan = ldb_scan,
    .range_scan = ldb_range_scan,
    .scan_value = ldb_scan_value, .put_indexed = ldb_put_indexed, .find_indexed = ldb_find_indexed,
    .report = ldb_report, .close = ldb_close,
};
#else
const bench_engine bkv_bench_engine_leveldb = {.name = NULL};
#endif
