/* bkv_property: counters, per-level file counts and a readable report. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/memtables.h"
#include "db/version_set.h"
#include "valuesearch/table_values.h"

typedef struct counter_name {
    const char *name;
    size_t offset; /* into bkv_db_counters, or ~0 for table stats */
} counter_name;

#define DB_COUNTER(n, f) {n, offsetof(bkv_db_counters, f)}

static const counter_name db_counters[] = {
    DB_COUNTER("gets", gets),
    DB_COUNTER("key-hashes", key_hashes),
    DB_COUNTER("filter-probes", filter_probes),
    DB_COUNTER("filter-negatives", filter_negatives),
    DB_COUNTER("filter-false-positives", filter_false_positives),
    DB_COUNTER("memtable-filter-negatives", memtable_filter_negatives),
    DB_COUNTER("bytes-written", bytes_written),
    DB_COUNTER("writes", writes),
    DB_COUNTER("syncs", syncs),
    DB_COUNTER("flushes", flushes),
    DB_COUNTER("write-stalls", write_stalls),
    DB_COUNTER("write-slowdowns", write_slowdowns),
    DB_COUNTER("tables-consulted", tables_consulted),
    DB_COUNTER("flush-bytes-written", flush_bytes_written),
    DB_COUNTER("compactions", compactions),
    DB_COUNTER("trivial-moves", trivial_moves),
    DB_COUNTER("summary-rewrites", summary_rewrites),
    DB_COUNTER("seek-compactions", seek_compactions),
    DB_COUNTER("subcompactions", subcompactions),
    DB_COUNTER("range-filter-probes", range_filter_probes),
    DB_COUNTER("range-filter-negatives", range_filter_negatives),
    DB_COUNTER("compaction-bytes-read", compaction_bytes_read),
    DB_COUNTER("compaction-bytes-written", compaction_bytes_written),
    DB_COUNTER("value-searches", value_searches),
    DB_COUNTER("value-index-updates", value_index_updates),
    DB_COUNTER("value-index-nodes-recomputed", value_index_nodes_recomputed),
    DB_COUNTER("value-index-update-micros", value_index_update_micros),
    DB_COUNTER("value-index-locked-micros", value_index_locked_micros),
    DB_COUNTER("value-filters-unusable", value_filters_unusable),
    DB_COUNTER("value-candidates-proven", value_candidates_proven),
};

#define TABLE_COUNTER(n, f) {n, offsetof(bkv_table_stats, f)}
static const counter_name table_counters[] = {
    TABLE_COUNTER("blocks-read", blocks_read),
    TABLE_COUNTER("cache-hits", cache_hits),
    TABLE_COUNTER("cache-misses", cache_misses),
    TABLE_COUNTER("filter-corrupt", filter_corrupt),
    TABLE_COUNTER("filter-partitions-read", filter_partitions_read),
    TABLE_COUNTER("filter-cache-bytes", filter_cache_bytes),
};

/* The sum of a counter's stripes; offset is within the stripe. */
_Thread_local unsigned bkv_stripe_plus_one;

unsigned bkv_stripe_assign(void) {
    static atomic_uint next;
    unsigned s = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) % BKV_STRIPES;
    bkv_stripe_plus_one = s + 1;
    return s;
}

static uint64_t sum_stripes(const bkv_db *db, size_t offset) {
    uint64_t total = 0;
    for (int i = 0; i < BKV_STRIPES; i++)
        total += atomic_load_explicit((const atomic_uint_fast64_t *)((const char *)&db->stripes[i] + offset),
                                      memory_order_relaxed);
    return total;
}

static int counter_value(bkv_db *db, const char *name, uint64_t *v) {
    for (size_t i = 0; i < sizeof db_counters / sizeof db_counters[0]; i++)
        if (strcmp(name, db_counters[i].name) == 0) {
            *v = sum_stripes(db, offsetof(bkv_counter_stripe, c) + db_counters[i].offset);
            return 1;
        }
    for (size_t i = 0; i < sizeof table_counters / sizeof table_counters[0]; i++)
        if (strcmp(name, table_counters[i].name) == 0) {
            *v = sum_stripes(db, offsetof(bkv_counter_stripe, t) + table_counters[i].offset);
            return 1;
        }
    return 0;
}

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static void append(bkv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(bkv_buf *b, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* A report is checked once, by its terminating NUL: a failed append
     * leaves the buffer failing every later one (oom is sticky). */
    if (n > 0) (void)!bkv_buf_append(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* The table of f if it is open now (release it with bkv_cache_release on
 * the table cache), else NULL: statistics never open a table. */
static bkv_cache_entry *open_table(bkv_db *db, bkv_file_meta *f) {
    bkv_cache_entry *e = atomic_load_explicit(&f->pinned, memory_order_acquire);
    return e ? e : bkv_cache_lookup(db->table_cache, f->number, 0);
}

/* What bytes() counts over the tables of v that are open now. */
static uint64_t open_tables_sum(bkv_db *db, const bkv_tree_version *v, size_t (*bytes)(const bkv_table *)) {
    uint64_t total = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < v->nfiles[l]; i++) {
            bkv_cache_entry *e = open_table(db, v->files[l][i]);
            if (!e) continue;
            total += bytes(bkv_cache_value(e));
            bkv_cache_release(db->table_cache, e);
        }
    return total;
}

/* Rows in rs's memtables: puts and deletions, every version. */
static uint64_t memtable_rows(const bkv_read_state *rs) {
    uint64_t n = bkv_memtable_entries(rs->mem);
    for (int i = 0; i < rs->nimm; i++) n += bkv_memtable_entries(rs->imm[i]);
    return n;
}

/* RocksDB's estimate of live keys: every row of the memtables and tables,
 * less each table's deletions twice (a deletion and the row it is taken
 * to hide). Rows overwritten across levels count once each. Unlike the
 * other statistics it opens every table, through the table cache; a
 * table that cannot be opened counts its manifest entries. */
static uint64_t estimate_live_keys(bkv_db *db) {
    bkv_read_state rs;
    bkv_read_state_acquire(db, NULL, &rs);
    uint64_t rows = memtable_rows(&rs), deletions = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < rs.version->nfiles[l]; i++) {
            const bkv_file_meta *f = rs.version->files[l][i];
            bkv_cache_entry *e;
            rows += f->entries;
            if (bkv_db_get_table(db, f, &e, NULL)) continue;
            deletions += bkv_table_properties(bkv_cache_value(e))->num_deletions;
            bkv_cache_release(db->table_cache, e);
        }
    bkv_read_state_release(&rs);
    return rows > 2 * deletions ? rows - 2 * deletions : 0;
}

/* Bytes of key filters of the tables in v that are open now. */
static uint64_t filter_memory(bkv_db *db, const bkv_tree_version *v) {
    return open_tables_sum(db, v, bkv_table_filter_memory);
}

static bkv_tree_version *ref_current(bkv_db *db) {
    bkv_db_lock(db);
    bkv_tree_version *v = bkv_vset_current(&db->vset);
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    bkv_db_unlock(db);
    return v;
}

/* Bytes the value index keeps in memory: the in-memory shapes' leaves and
 * nodes, or the paged index's summaries and partition starts of the open
 * tables (the rows it reads are charged to the block cache). */
static uint64_t value_index_memory(bkv_db *db, const bkv_vindex_info *in) {
    if (in->shape != BKV_VALUE_INDEX_PAGED) return in->leaf_bytes + in->inner_bytes;
    bkv_tree_version *v = ref_current(db);
    uint64_t m = open_tables_sum(db, v, bkv_vs_memory);
    bkv_tree_version_unref(v);
    return m;
}

/* Per level, from the open tables' properties: key filter bits per key
 * and modelled false-positive rate, and the false-positive block reads a
 * get for an absent key should expect (every level-0 table is probed, and
 * one table of each deeper level). */
static void filter_report(bkv_db *db, const bkv_tree_version *v, bkv_buf *b) {
    append(b, "key filters%s:  level  bits/key  expected FPR  (open tables)\n",
           db->opts.filter_memory_budget ? " (sized by filter_memory_budget)" : "");
    double reads = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        double bits = 0, keys = 0, fp_keys = 0, l0_fp = 0;
        for (size_t i = 0; i < v->nfiles[l]; i++) {
            bkv_cache_entry *e = open_table(db, v->files[l][i]);
            if (!e) continue;
            const bkv_table *t = bkv_cache_value(e);
            const bkv_table_props *p = bkv_table_properties(t);
            double fpr = bkv_table_has_filter(t) ? (double)p->filter_fpr_ppb / 1e9 : 1.0;
            bits += 8.0 * (double)(bkv_table_has_filter(t) ? p->filter_bytes : 0);
            keys += (double)p->num_entries;
            fp_keys += fpr * (double)p->num_entries;
            l0_fp += fpr;
            bkv_cache_release(db->table_cache, e);
        }
        if (keys == 0) continue;
        append(b, "               L%-4d %8.2f  %11.4f%%\n", l, bits / keys, 100 * fp_keys / keys);
        reads += l == 0 ? l0_fp : fp_keys / keys;
    }
    append(b, "expected false-positive block reads per missing get: %.4f\n", reads);
}

typedef struct amplification {
    double write;   /* table bytes written (flush + compaction) per byte written by users */
    double space;   /* table bytes per byte of the last level (leveled) or oldest run (tiered) */
    double read;    /* tables consulted per get */
} amplification;

static amplification amplifications(bkv_db *db, const bkv_tree_version *v) {
    amplification a = {0, 0, 0};
    uint64_t user = 0, flushed = 0, compacted = 0, gets = 0, consulted = 0;
    counter_value(db, "bytes-written", &user);
    counter_value(db, "flush-bytes-written", &flushed);
    counter_value(db, "compaction-bytes-written", &compacted);
    counter_value(db, "gets", &gets);
    counter_value(db, "tables-consulted", &consulted);
    if (user) a.write = (double)(flushed + compacted) / (double)user;
    if (gets) a.read = (double)consulted / (double)gets;
    uint64_t total = 0, base = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < v->nfiles[l]; i++) total += v->files[l][i]->size;
    if (db->opts.compaction_style == BKV_COMPACTION_TIERED) {
        if (v->nfiles[0]) base = v->files[0][v->nfiles[0] - 1]->size;
    } else {
        for (int l = BKV_MAX_LEVELS - 1; l >= 0 && !base; l--)
            for (size_t i = 0; i < v->nfiles[l]; i++) base += v->files[l][i]->size;
    }
    if (base) a.space = (double)total / (double)base;
    return a;
}

/* One line describing the value index ("" without one). */
static void value_index_report(bkv_db *db, bkv_buf *b) {
    bkv_vindex_info in;
    if (!bkv_db_value_index_info(db, &in)) return;
    const bkv_value_index_rec *r = bkv_db_value_rec(db);
    append(b, "value index: %s", bkv_vindex_shape_name(in.shape));
    if (in.shape == BKV_VALUE_INDEX_HIERARCHY) append(b, " order %d height %d", in.order, in.height);
    append(b, ", m=%llu k=%llu%s P=%llu%s%s%s", (unsigned long long)r->m_bits, (unsigned long long)r->k,
           r->words ? " in two words" : "", (unsigned long long)r->partition_entries, *r->terms_name ? ", terms \"" : "",
           r->terms_name, *r->terms_name ? "\"" : "");
    if (in.shape == BKV_VALUE_INDEX_PAGED) {
        append(b, ", summaries of %u bits per term, %llu bytes in memory (open tables)\n",
               bkv_db_value_params(db)->summary_bits,
               (unsigned long long)value_index_memory(db, &in));
        return;
    }
    append(b, ", %llu tables, %llu leaves (%llu bytes)", (unsigned long long)in.tables,
           (unsigned long long)in.leaves, (unsigned long long)in.leaf_bytes);
    if (in.shape == BKV_VALUE_INDEX_HIERARCHY)
        append(b, ", %llu inner nodes (%llu bytes, %.1f%% of bits set)", (unsigned long long)in.inner_nodes,
               (unsigned long long)in.inner_bytes, in.inner_ones_permille / 10.0);
    append(b, "\n");
}

/* Every counter, each formatted by fmt from its name and value. */
static void append_counters(bkv_db *db, bkv_buf *b, const char *fmt) {
    for (size_t i = 0; i < sizeof db_counters / sizeof db_counters[0]; i++) {
        uint64_t val = 0;
        counter_value(db, db_counters[i].name, &val);
        append(b, fmt, db_counters[i].name, (unsigned long long)val);
    }
    for (size_t i = 0; i < sizeof table_counters / sizeof table_counters[0]; i++) {
        uint64_t val = 0;
        counter_value(db, table_counters[i].name, &val);
        append(b, fmt, table_counters[i].name, (unsigned long long)val);
    }
}

static char *finish_text(bkv_buf *b) {
    if (bkv_buf_put_u8(b, 0)) {
        bkv_buf_free(b);
        return NULL;
    }
    return (char *)b->data;
}

static char *stats_report(bkv_db *db) {
    bkv_buf b;
    bkv_buf_init(&b);
    bkv_db_lock(db);
    bkv_tree_version *v = bkv_vset_current(&db->vset);
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    int nimm = bkv_mems_immutable(db);
    size_t mem = bkv_memtable_memory(bkv_mems_active(db));
    uint64_t seq = db->last_sequence;
    int err = db->bg_error;
    bkv_db_unlock(db);

    append(&b, "bloomkv %d.%d.%d  %s\n", BKV_VERSION_MAJOR, BKV_VERSION_MINOR, BKV_VERSION_PATCH, db->path);
    size_t kept = bkv_mems_pool_bytes(db);
    append(&b, "sequence %llu, memtable %zu bytes, %d immutable, %zu arena bytes kept for reuse%s\n",
           (unsigned long long)seq, mem, nimm, kept, err ? ", READ-ONLY after an error" : "");
    append(&b, "level  files        bytes      entries\n");
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        uint64_t bytes = 0, entries = 0;
        for (size_t i = 0; i < v->nfiles[l]; i++) bytes += v->files[l][i]->size, entries += v->files[l][i]->entries;
        if (v->nfiles[l] || l == 0)
            append(&b, "L%-4d %6zu %12llu %12llu\n", l, v->nfiles[l], (unsigned long long)bytes,
                   (unsigned long long)entries);
    }
    uint64_t cached = 0;
    counter_value(db, "filter-cache-bytes", &cached);
    append(&b, "filter memory (open tables): %llu bytes pinned, %llu bytes of partitions in the block cache\n",
           (unsigned long long)filter_memory(db, v), (unsigned long long)cached);
    filter_report(db, v, &b);
    amplification a = amplifications(db, v);
    append(&b, "amplification: write %.2f, space %.2f, read %.2f tables per get\n", a.write, a.space, a.read);
    value_index_report(db, &b);
    bkv_tree_version_unref(v);
    uint64_t probes = 0, negatives = 0, fps = 0;
    counter_value(db, "filter-probes", &probes);
    counter_value(db, "filter-negatives", &negatives);
    counter_value(db, "filter-false-positives", &fps);
    append(&b, "filters: %llu probes, %llu negatives, %llu false positives (observed rate %.4f%%)\n",
           (unsigned long long)probes, (unsigned long long)negatives, (unsigned long long)fps,
           fps + negatives ? 100.0 * (double)fps / (double)(fps + negatives) : 0.0);
    append(&b, "counters:");
    append_counters(db, &b, " %s=%llu");
    append(&b, "\n");
    return finish_text(&b);
}

/* Appends a key, printable bytes as they are and the rest as \xNN. */
static void append_key(bkv_buf *b, const uint8_t *k, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\') append(b, "%c", k[i]);
        else append(b, "\\x%02x", k[i]);
    }
}

/* Every table of the current version, level by level: its number, size
 * and key range (LevelDB's "leveldb.sstables"). */
static char *sstables_report(bkv_db *db) {
    bkv_buf b;
    bkv_buf_init(&b);
    bkv_tree_version *v = ref_current(db);
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        append(&b, "--- level %d ---\n", l);
        for (size_t i = 0; i < v->nfiles[l]; i++) {
            const bkv_file_meta *f = v->files[l][i];
            append(&b, " %llu:%llu[", (unsigned long long)f->number, (unsigned long long)f->size);
            append_key(&b, f->smallest, f->smallest_len - BKV_IKEY_TRAILER);
            append(&b, " .. ");
            append_key(&b, f->largest, f->largest_len - BKV_IKEY_TRAILER);
            append(&b, "]\n");
        }
    }
    bkv_tree_version_unref(v);
    return finish_text(&b);
}

char *bkv_property(bkv_db *db, const char *name) {
    if (!db || !name) return NULL;
    /* LevelDB's names for the same properties. */
    char renamed[128];
    if (strncmp(name, "leveldb.", 8) == 0 && strlen(name) < sizeof renamed - 8) {
        snprintf(renamed, sizeof renamed, "bloomkv.%s", name + 8);
        name = renamed;
    }
    if (strcmp(name, "bloomkv.sstables") == 0) return sstables_report(db);
    if (strcmp(name, "bloomkv.stats") == 0) return stats_report(db);
    if (strcmp(name, "bloomkv.last-sequence") == 0)
        return format("%llu", (unsigned long long)atomic_load(&db->visible_sequence));
    if (strncmp(name, "bloomkv.counter.", 16) == 0) {
        uint64_t v;
        return counter_value(db, name + 16, &v) ? format("%llu", (unsigned long long)v) : NULL;
    }
    if (strcmp(name, "bloomkv.estimate-live-keys") == 0)
        return format("%llu", (unsigned long long)estimate_live_keys(db));
    if (strcmp(name, "bloomkv.memtable-entries") == 0) {
        bkv_read_state rs;
        bkv_read_state_acquire(db, NULL, &rs);
        uint64_t n = memtable_rows(&rs);
        bkv_read_state_release(&rs);
        return format("%llu", (unsigned long long)n);
    }
    if (strcmp(name, "bloomkv.range-deletions") == 0) {
        bkv_db_lock(db);
        size_t n = bkv_vset_current(&db->vset)->ntombstones;
        bkv_db_unlock(db);
        return format("%zu", n);
    }
    if (strncmp(name, "bloomkv.num-files-at-level", 26) == 0) {
        char *end;
        long level = strtol(name + 26, &end, 10);
        if (end == name + 26 || *end || level < 0 || level >= BKV_MAX_LEVELS) return NULL;
        bkv_db_lock(db);
        size_t n = bkv_vset_current(&db->vset)->nfiles[level];
        bkv_db_unlock(db);
        return format("%zu", n);
    }
    if (strcmp(name, "bloomkv.write-amplification") == 0 || strcmp(name, "bloomkv.space-amplification") == 0 ||
        strcmp(name, "bloomkv.read-amplification") == 0) {
        bkv_db_lock(db);
        amplification a = amplifications(db, bkv_vset_current(&db->vset));
        bkv_db_unlock(db);
        return format("%.4f", name[8] == 'w' ? a.write : name[8] == 's' ? a.space : a.read);
    }
    int entries = strncmp(name, "bloomkv.entries-at-level", 24) == 0;
    if (entries || strncmp(name, "bloomkv.bytes-at-level", 22) == 0) {
        const char *digits = name + (entries ? 24 : 22);
        char *end;
        long level = strtol(digits, &end, 10);
        if (end == digits || *end || level < 0 || level >= BKV_MAX_LEVELS) return NULL;
        bkv_db_lock(db);
        uint64_t sum = 0;
        const bkv_tree_version *v = bkv_vset_current(&db->vset);
        for (size_t i = 0; i < v->nfiles[level]; i++)
            sum += entries ? v->files[level][i]->entries : v->files[level][i]->size;
        bkv_db_unlock(db);
        return format("%llu", (unsigned long long)sum);
    }
    if (strcmp(name, "bloomkv.value-index") == 0) {
        bkv_buf b;
        bkv_buf_init(&b);
        value_index_report(db, &b);
        return finish_text(&b);
    }
    if (strcmp(name, "bloomkv.value-terms") == 0) /* fixed at open */
        return format("%s", bkv_db_value_rec(db) ? bkv_db_value_rec(db)->terms_name : "");
    if (strcmp(name, "bloomkv.counters") == 0) {
        bkv_buf b;
        bkv_buf_init(&b);
        append_counters(db, &b, "%s %llu\n");
        return finish_text(&b);
    }
    if (strcmp(name, "bloomkv.value-index-memory") == 0) {
        bkv_vindex_info in;
        if (!bkv_db_value_index_info(db, &in)) return NULL;
        return format("%llu", (unsigned long long)value_index_memory(db, &in));
    }
    if (strcmp(name, "bloomkv.filter-memory") == 0) {
        bkv_tree_version *v = ref_current(db);
        uint64_t m = filter_memory(db, v);
        bkv_tree_version_unref(v);
        return format("%llu", (unsigned long long)m);
    }
    return NULL;
}
