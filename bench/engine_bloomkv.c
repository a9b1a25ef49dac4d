/* `bloomkv-bench db` adapter for bloomkv itself. */
#include <stdlib.h>
#include <string.h>

#include "bench_engine.h"
#include "bloomkv.h"

static int bkv_bench_open(const bench_cfg *cfg, void **h) {
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = cfg->write_buffer_size;
    o.block_cache_size = cfg->cache_size;
    o.filter_type = cfg->filter;
    o.bits_per_key = cfg->bloom_bits;
    o.compression = cfg->compression;
    o.compaction_style = cfg->compaction_style;
    if (cfg->l0_trigger) o.level0_compaction_trigger = cfg->l0_trigger;
    if (cfg->l0_slowdown) o.level0_slowdown_trigger = cfg->l0_slowdown;
    if (cfg->l0_stop) o.level0_stop_trigger = cfg->l0_stop;
    o.value_index = cfg->value_index;
    /* A shape named for an existing database is meant: value_experiments.sh
     * measures every shape over one database. */
    o.value_index_reshape = cfg->use_existing_db && cfg->value_index != BKV_VALUE_INDEX_NONE;
    if (cfg->value_filter_bits) o.value_filter_bits = cfg->value_filter_bits;
    if (cfg->value_filter_hashes) o.value_filter_hashes = cfg->value_filter_hashes;
    if (cfg->value_partition_entries >= 0) o.value_partition_entries = (uint32_t)cfg->value_partition_entries;
    if (cfg->value_index_order) o.value_index_order = cfg->value_index_order;
    if (cfg->value_summary_bits) o.value_summary_bits = cfg->value_summary_bits;
    if (cfg->target_file_size) o.target_file_size = cfg->target_file_size;
    o.partition_filters = cfg->partition_filters;
    o.wal_mmap = cfg->wal_mmap;
    o.compact_for_reads = cfg->compact_for_reads;
    o.release_free_memory = cfg->release_free_memory;
    if (cfg->max_background_jobs) o.max_background_jobs = cfg->max_background_jobs;
    o.compaction_nice = cfg->compaction_nice;
    if (cfg->max_subcompactions) o.max_subcompactions = cfg->max_subcompactions;
    o.filter_partition_size = cfg->filter_partition_size;
    o.filter_memory_budget = cfg->filter_memory_budget;
    o.range_filter_bits_per_key = cfg->range_filter_bits;
    bkv_level_options levels[BKV_MAX_LEVELS];
    for (int l = 0; l < cfg->range_filter_from_level && l < BKV_MAX_LEVELS; l++)
        levels[l] = (bkv_level_options){.filter_type = -1, .bits_per_key = -1, .range_filter_bits_per_key = -1};
    if (cfg->range_filter_from_level > 0) {
        o.level_options = levels;
        o.level_options_count = (size_t)(cfg->range_filter_from_level < BKV_MAX_LEVELS ? cfg->range_filter_from_level
                                                                                        : BKV_MAX_LEVELS);
    }
    o.error_if_exists = 0;
    bkv_db *db;
    int rc = bkv_open(cfg->db, &o, &db);
    if (rc) {
        fprintf(stderr, "bench: cannot open %s: %s\n", cfg->db, bkv_strerror(rc));
        return rc;
    }
    *h = db;
    return 0;
}

static int bkv_bench_put(void *h, const char *k, size_t kl, const char *v, size_t vl, int sync) {
    bkv_write_options wo = {.size = sizeof(bkv_write_options), .sync = sync};
    return bkv_put(h, &wo, k, kl, v, vl);
}

static int bkv_bench_del(void *h, const char *k, size_t kl) { return bkv_delete(h, NULL, k, kl); }

static int bkv_bench_get(void *h, const char *k, size_t kl) {
    void *v;
    size_t n;
    int rc = bkv_get(h, NULL, k, kl, &v, &n);
    if (rc == BKV_OK) {
        bkv_free(v);
        return 1;
    }
    return rc == BKV_NOTFOUND ? 0 : rc;
}

static long bkv_bench_multi_get(void *h, const char *const *keys, const size_t *klens, size_t n) {
    void *vals[64];
    size_t vlens[64];
    int st[64];
    long found = 0;
    for (size_t base = 0; base < n; base += 64) {
        size_t m = n - base < 64 ? n - base : 64;
        int rc = bkv_multi_get(h, NULL, m, (const void *const *)keys + base, klens + base, vals, vlens, st);
        if (rc) return rc;
        for (size_t i = 0; i < m; i++) {
            if (st[i] == BKV_OK) {
                found++;
                bkv_free(vals[i]);
            } else if (st[i] < 0) {
                return st[i];
            }
        }
    }
    return found;
}

/* Everything into the last level, as the peers' CompactRange(NULL, NULL):
 * bkv_compact only settles the levels, and the shape it leaves varies
 * from run to run (reads then ask a table in one to three levels). */
static int bkv_bench_compact(void *h) { return bkv_compact_range(h, NULL, 0, NULL, 0); }

static void bkv_bench_report(void *h, FILE *out) {
    static const char *names[] = {"key-hashes", "filter-probes", "filter-negatives", "filter-false-positives",
                                  "blocks-read", "cache-hits", "cache-misses", "tables-consulted", "flushes",
                                  "compactions", "compaction-bytes-read", "compaction-bytes-written",
                                  "value-index-updates", "value-index-nodes-recomputed",
                                  "value-index-update-micros", "value-index-locked-micros", "write-stalls",
                                  "write-slowdowns"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char prop[64];
        snprintf(prop, sizeof prop, "bloomkv.counter.%s", names[i]);
        char *v = bkv_property(h, prop);
        fprintf(out, ",\"%s\":%s", names[i], v ? v : "null");
        bkv_free(v);
    }
    static const char *amps[] = {"write", "space", "read"};
    for (int i = 0; i < 3; i++) {
        char prop[64];
        snprintf(prop, sizeof prop, "bloomkv.%s-amplification", amps[i]);
        char *v = bkv_property(h, prop);
        fprintf(out, ",\"%s_amp\":%s", amps[i], v ? v : "null");
        bkv_free(v);
    }
    fprintf(out, ",\"levels\":[");
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        char prop[64];
        snprintf(prop, sizeof prop, "bloomkv.num-files-at-level%d", l);
        char *files = bkv_property(h, prop);
        snprintf(prop, sizeof prop, "bloomkv.bytes-at-level%d", l);
        char *bytes = bkv_property(h, prop);
        fprintf(out, "%s{\"files\":%s,\"bytes\":%s}", l ? "," : "", files ? files : "null", bytes ? bytes : "null");
        bkv_free(files);
        bkv_free(bytes);
    }
    fprintf(out, "]");
    char *vi = bkv_property(h, "bloomkv.value-index");
    if (vi && *vi) {
        fprintf(out, ",\"value_index\":\"");
        for (const char *p = vi; *p; p++)
            if (*p != '\n') fputc(*p == '"' ? '\'' : *p, out);
        fprintf(out, "\"");
    }
    bkv_free(vi);
}

/* "filter-memory": pinned filters plus partitions in the block cache;
 * "value-index-memory": what the value index keeps in memory. */
static int bkv_bench_counter(void *h, const char *name, uint64_t *value) {
    char prop[64];
    int filter = strcmp(name, "filter-memory") == 0;
    snprintf(prop, sizeof prop, filter || strcmp(name, "value-index-memory") == 0 ? "bloomkv.%s" : "bloomkv.counter.%s",
             name);
    char *v = bkv_property(h, prop);
    *value = v ? strtoull(v, NULL, 10) : 0;
    bkv_free(v);
    if (v && filter) {
        v = bkv_property(h, "bloomkv.counter.filter-cache-bytes");
        *value += v ? strtoull(v, NULL, 10) : 0;
        bkv_free(v);
    }
    return v ? 0 : -1;
}

static long bkv_bench_scan(void *h, const char *from, size_t fl, long n) {
    bkv_iter *it;
    if (bkv_iter_create(h, NULL, &it) != BKV_OK) return -1;
    if (from) bkv_iter_seek(it, from, fl);
    else bkv_iter_seek_to_first(it);
    long seen = 0;
    size_t kl, vl;
    for (; seen < n && bkv_iter_valid(it); bkv_iter_next(it), seen++) {
        bkv_iter_key(it, &kl);
        bkv_iter_value(it, &vl);
    }
    int rc = bkv_iter_status(it);
    bkv_iter_destroy(it);
    return rc ? -1 : seen;
}

static long bkv_bench_range_scan(void *h, const char *lo, size_t ll, const char *hi, size_t hl, long n) {
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.lower_bound = lo;
    ro.lower_bound_len = ll;
    ro.upper_bound = hi;
    ro.upper_bound_len = hl;
    bkv_iter *it;
    if (bkv_iter_create(h, &ro, &it) != BKV_OK) return -1;
    long seen = 0;
    size_t kl, vl;
    for (bkv_iter_seek_to_first(it); seen < n && bkv_iter_valid(it); bkv_iter_next(it), seen++) {
        bkv_iter_key(it, &kl);
        bkv_iter_value(it, &vl);
    }
    int rc = bkv_iter_status(it);
    bkv_iter_destroy(it);
    return rc ? -1 : seen;
}

static int bkv_bench_range_empty(void *h, const char *lo, size_t ll, const char *hi, size_t hl) {
    int empty;
    return bkv_range_empty(h, NULL, lo, ll, hi, hl, &empty) == BKV_OK ? empty : -1;
}

static long bkv_bench_scan_value(void *h, const char *v, size_t vl) {
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.fill_cache = 0;
    bkv_iter *it;
    if (bkv_iter_create(h, &ro, &it) != BKV_OK) return -1;
    long matches = 0;
    size_t n;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) {
        const void *val = bkv_iter_value(it, &n);
        matches += n == vl && memcmp(val, v, vl) == 0;
    }
    int rc = bkv_iter_status(it);
    bkv_iter_destroy(it);
    return rc ? -1 : matches;
}

static long bkv_bench_find_value(void *h, const char *v, size_t vl, unsigned plan, unsigned flags,
                                 bkv_find_stats *st) {
    bkv_find_options fo;
    bkv_find_options_init(&fo);
    fo.plan = plan;
    fo.limit = flags & BENCH_FIND_FIRST ? 1 : 0;
    const void *terms[2] = {v, v};
    size_t lens[2] = {vl, vl};
    bkv_find_iter *it;
    int rc = bkv_find_iter_create(h, NULL, terms, lens, flags & BENCH_FIND_AND_SELF ? 2 : 1, &fo, &it);
    if (rc == BKV_INVALID) fprintf(stderr, "bench: findvalue needs --value_index\n");
    if (rc) return -1;
    long matches = 0;
    while ((rc = bkv_find_iter_next(it)) == BKV_OK) matches++;
    bkv_find_iter_stats(it, st);
    bkv_find_iter_destroy(it);
    return rc == BKV_NOTFOUND ? matches : -1;
}

static int bkv_bench_put_indexed(void *h, const char *k, size_t kl, const char *v, size_t vl, int sync) {
    void *old = NULL;
    size_t ol = 0;
    int rc = bkv_get(h, NULL, k, kl, &old, &ol);
    int had = rc == BKV_OK;
    if (!had && rc != BKV_NOTFOUND) return rc;
    if (!had) old = NULL, ol = 0;
    char *ik = malloc(4 + (vl > ol ? vl : ol) + kl);
    bkv_batch *b = bkv_batch_create();
    rc = ik && b ? BKV_OK : BKV_NOMEM;
    if (!rc && had && !(ol == vl && memcmp(old, v, vl) == 0))
        rc = bkv_batch_delete(b, ik, bench_index_key(ik, old, ol, k, kl));
    if (!rc) rc = bkv_batch_put(b, k, kl, v, vl);
    if (!rc) rc = bkv_batch_put(b, ik, bench_index_key(ik, v, vl, k, kl), "", 0);
    bkv_write_options wo = {.size = sizeof(bkv_write_options), .sync = sync};
    if (!rc) rc = bkv_write(h, &wo, b);
    if (had) bkv_free(old);
    bkv_batch_destroy(b);
    free(ik);
    return rc;
}

static long bkv_bench_find_indexed(void *h, const char *v, size_t vl) {
    char *prefix = malloc(4 + vl);
    bkv_iter *it;
    if (!prefix || bkv_iter_create(h, NULL, &it) != BKV_OK) {
        free(prefix);
        return -1;
    }
    size_t pl = bench_index_key(prefix, v, vl, NULL, 0);
    long found = 0;
    for (bkv_iter_seek(it, prefix, pl); bkv_iter_valid(it); bkv_iter_next(it)) {
        size_t kl;
        const char *k = bkv_iter_key(it, &kl);
        if (kl < pl || memcmp(k, prefix, pl) != 0) break;
        if (bkv_bench_get(h, k + pl, kl - pl) == 1) found++;
    }
    int rc = bkv_iter_status(it);
    bkv_iter_destroy(it);
    free(prefix);
    return rc ? -1 : found;
}

static void bkv_bench_close(void *h) { bkv_close(h); }

const bench_engine bkv_bench_engine_bloomkv = {
    .name = "bloomkv", .open = bkv_bench_open, .put = bkv_bench_put, .del = bkv_bench_del, .get = bkv_bench_get,
    .multi_get = bkv_bench_multi_get, .compact = bkv_bench_compact, .scan = bkv_bench_scan,
    .range_scan = bkv_bench_range_scan, .range_empty = bkv_bench_range_empty,
    .scan_value = bkv_bench_scan_value, .find_value = bkv_bench_find_value,
    .put_indexed = bkv_bench_put_indexed, .find_indexed = bkv_bench_find_indexed,
    .report = bkv_bench_report, .counter = bkv_bench_counter, .close = bkv_bench_close,
};

