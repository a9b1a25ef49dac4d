/* Opens a table (footer, properties and filter, or the partition index of
 * a partitioned filter, validated and kept for the table's life; the index
 * on first use) and serves point reads through the block cache. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table/block.h"
#include "table/format.h"
#include "util/iterator.h"
#include "table/table.h"
#include "util/coding.h"
#include "util/ikey.h"

struct bkv_table {
    bkv_rfile *file;
    char *name;
    uint64_t number;
    bkv_cache *cache;
    /* The index is read into index_data when a read first needs it (a get
     * its filter rejects never does): opening a table reads only its
     * footer, properties and filter (or partition index). index_ready
     * says it is read; index_mu serializes the reading. */
    bkv_handle index_handle;
    atomic_int index_ready;
    pthread_mutex_t index_mu;
    uint8_t *index_data;
    bkv_block index;
    /* Per data block (index entry i): its checksum held when first read in
     * place from the map. Table files are never rewritten, so a block read
     * in place again gets no second pass (as a block in the block cache). */
    atomic_uchar *verified;  /* per data block: its checksum was verified */
    /* Per index entry: eight bytes of its user key after the prefix every
     * key of the table shares, big-endian, so that a search compares
     * integers in one small array and reads whole keys only where those
     * bytes tie. NULL when the index could not be read whole. */
    uint64_t *fences;
    size_t fence_prefix;      /* the shared prefix: the first fence_prefix bytes of fence_key */
    const uint8_t *fence_key;
    uint8_t *filter_data;
    size_t filter_len;
    bkv_filter *filter;   /* NULL: no filter, a damaged one ("maybe") or partitions */
    uint8_t *range_data;  /* the range filter block, and the filter on it (NULL: none or damaged) */
    bkv_filter *range_filter;
    size_t range_shared;  /* its keys skip this much of the prefix every key shares (props.smallest's) */
    /* A partitioned filter: the handles of its partitions (pinned), and
     * what is known of each (PART_*): a damaged one answers "maybe"
     * without being read again. */
    uint32_t nparts;
    bkv_handle *parts;
    atomic_uchar *part_state;
    /* Per partition of a mapped file, once verified: a handle probing it
     * in place (its header parsed once: reading it again per probe cost a
     * cache miss of its own). view_bytes: their memory. */
    _Atomic(bkv_filter *) *views;
    atomic_size_t view_bytes;
    /* The layer above's slot (bkv_table_slot), made under index_mu. */
    _Atomic(void *) slot;
    void (*slot_destroy)(void *);
    /* Properties the reader does not know itself (a collector's). */
    struct aux_prop {
        char name[BKV_TABLE_PROPERTY_MAX + 1];
        uint64_t v;
    } *aux_props;
    size_t naux_props;
    bkv_table_stats *stats;   /* where partition reads are counted */
    bkv_table_props props;
    uint64_t global_seq;  /* 0, or the sequence every key of an ingested table reads at */
};

void bkv_table_set_global_seq(bkv_table *t, uint64_t seq) { t->global_seq = seq; }

uint64_t bkv_table_file_size(const bkv_table *t) { return bkv_file_size(t->file); }

/* The key as readers see it: an ingested table's keys were written with
 * sequence 0 and read at its global sequence, assembled in scratch. NULL
 * when scratch cannot grow. */
static const uint8_t *visible_key(const bkv_table *t, const bkv_buf *raw, bkv_buf *scratch) {
    if (!t->global_seq || raw->len < BKV_IKEY_TRAILER) return raw->data;
    if (bkv_buf_set(scratch, raw->data, raw->len)) return NULL;
    uint8_t *trailer = scratch->data + raw->len - BKV_IKEY_TRAILER;
    bkv_put_u64(trailer, bkv_pack_trailer(t->global_seq, bkv_ikey_type(raw->data, raw->len)));
    return scratch->data;
}

typedef struct cached_block {
    uint8_t *data;
    size_t len;
    bkv_block blk;
} cached_block;

static void delete_block(uint64_t k1, uint64_t k2, void *v) {
    (void)k1, (void)k2;
    cached_block *cb = v;
    free(cb->data);
    free(cb);
}

/* Where a block being read lives: in the block cache (entry), in a private
 * copy (own), or, for an uncompressed block of a mapped file, in the map
 * itself (view: no copy, no cache; the page cache is its cache). */
typedef struct block_ref {
    bkv_cache_entry *entry;
    cached_block *own;
    cached_block view;
    const bkv_block *blk;
} block_ref;

static int ikey_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
    if (alen < BKV_IKEY_TRAILER || blen < BKV_IKEY_TRAILER) {
        /* Damaged keys sort bytewise so that a search still terminates. */
        size_t n = alen < blen ? alen : blen;
        int c = memcmp(a, b, n);
        return c ? c : (alen > blen) - (alen < blen);
    }
    return bkv_ikey_compare(a, alen, b, blen);
}

#define AUX_PROPS_MAX 64

static void read_props(bkv_table *t, const uint8_t *data, size_t len) {
    bkv_block blk;
    if (bkv_block_parse(&blk, data, len) < 0) return;
    bkv_block_iter it;
    bkv_block_iter_init(&it, &blk);
    static const struct {
        const char *name;
        size_t off;
    } fields[] = {
        {"data.bytes", offsetof(bkv_table_props, data_bytes)},
        {"filter.bytes", offsetof(bkv_table_props, filter_bytes)},
        {"filter.fpr.ppb", offsetof(bkv_table_props, filter_fpr_ppb)},
        {"filter.partitions", offsetof(bkv_table_props, filter_partitions)},
        {"num.data.blocks", offsetof(bkv_table_props, num_data_blocks)},
        {"num.deletions", offsetof(bkv_table_props, num_deletions)},
        {"num.entries", offsetof(bkv_table_props, num_entries)},
        {"num.keys", offsetof(bkv_table_props, num_keys)},
        {"raw.key.bytes", offsetof(bkv_table_props, raw_key_bytes)},
        {"raw.value.bytes", offsetof(bkv_table_props, raw_value_bytes)},
        {"creation.time", offsetof(bkv_table_props, creation_time)},
        {"range.filter.offset", offsetof(bkv_table_props, range_filter_offset)},
        {"range.filter.size", offsetof(bkv_table_props, range_filter_bytes)},
        {"range.filter.skip", offsetof(bkv_table_props, range_filter_skip)},
    };
    for (bkv_block_iter_first(&it); it.valid; bkv_block_iter_next(&it)) {
        uint8_t **key_prop = NULL;
        size_t *key_len = NULL;
        if (it.key.len == 11 && memcmp(it.key.data, "key.largest", 11) == 0) key_prop = &t->props.largest, key_len = &t->props.largest_len;
        if (it.key.len == 12 && memcmp(it.key.data, "key.smallest", 12) == 0) key_prop = &t->props.smallest, key_len = &t->props.smallest_len;
        if (key_prop && !*key_prop && (*key_prop = malloc(it.vlen ? it.vlen : 1))) {
            memcpy(*key_prop, it.val, it.vlen);
            *key_len = it.vlen;
            continue;
        }
        uint64_t v;
        if (!bkv_get_varint64(it.val, it.val + it.vlen, &v)) continue;
        int known = 0;
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            if (strlen(fields[i].name) == it.key.len && memcmp(fields[i].name, it.key.data, it.key.len) == 0) {
                *(uint64_t *)((char *)&t->props + fields[i].off) = v;
                known = 1;
            }
        if (it.key.len == 11 && memcmp(it.key.data, "filter.type", 11) == 0) t->props.filter_type = (int)v, known = 1;
        if (it.key.len == 11 && memcmp(it.key.data, "compression", 11) == 0) t->props.compression = (int)v, known = 1;
        /* A collector's, kept for bkv_table_property; a name no builder
         * writes (too long) is not kept, nor more than a damaged block's
         * worth of them. */
        if (!known && it.key.len <= BKV_TABLE_PROPERTY_MAX && t->naux_props < AUX_PROPS_MAX) {
            struct aux_prop *grown = realloc(t->aux_props, (t->naux_props + 1) * sizeof *grown);
            if (!grown) continue; /* unknown to the reader: read as absent */
            t->aux_props = grown;
            memcpy(grown[t->naux_props].name, it.key.data, it.key.len);
            grown[t->naux_props].name[it.key.len] = 0;
            grown[t->naux_props++].v = v;
        }
    }
    bkv_block_iter_free(&it);
}

/* Reads and validates the range filter block; on failure the table keeps
 * none, and answers every range "maybe". */
static int open_range_filter(bkv_table *t) {
    size_t len;
    bkv_handle h = {t->props.range_filter_offset, t->props.range_filter_bytes};
    if (bkv_read_filter_block(t->file, t->name, h, &t->range_data, &len, NULL) != BKV_OK) return BKV_CORRUPTION;
    bkv_filter_info info;
    const bkv_table_props *p = &t->props;
    if (p->smallest && p->largest && p->smallest_len >= BKV_IKEY_TRAILER && p->largest_len >= BKV_IKEY_TRAILER &&
        bkv_filter_open(t->range_data, len, 0, &t->range_filter, NULL, 0) == BKV_OK &&
        (bkv_filter_get_info(t->range_filter, &info), info.type == BKV_FILTER_RANGE)) {
        /* The skipped bytes must be ones every key shares. */
        size_t shared = bkv_table_shared_prefix(p->smallest, p->smallest_len - BKV_IKEY_TRAILER, p->largest,
                                                p->largest_len - BKV_IKEY_TRAILER);
        if (p->range_filter_skip <= shared) {
            t->range_shared = (size_t)p->range_filter_skip;
            return BKV_OK;
        }
    }
    bkv_filter_destroy(t->range_filter);
    t->range_filter = NULL;
    free(t->range_data);
    t->range_data = NULL;
    return BKV_CORRUPTION;
}

int bkv_table_has_range_filter(const bkv_table *t) { return t->range_filter != NULL; }

/* Where user key k stands against the table's shared prefix: -1 below
 * every key of the table, 1 above every key, 0 sharing it. */
static int against_shared(const bkv_table *t, const uint8_t *k, size_t n) {
    size_t m = n < t->range_shared ? n : t->range_shared;
    int c = m ? memcmp(k, t->props.smallest, m) : 0;
    if (c) return c < 0 ? -1 : 1;
    return n < t->range_shared ? -1 : 0;
}

const bkv_filter *bkv_table_range_filter(const bkv_table *t) { return t->range_filter; }

int bkv_table_range_question(const bkv_table *t, const uint8_t *lo, size_t lolen, const uint8_t *hi, size_t hilen,
                             uint64_t *a, uint64_t *z) {
    *a = 0;
    *z = UINT64_MAX;
    if (lo) {
        int c = against_shared(t, lo, lolen);
        if (c > 0) return 0;
        if (c == 0) *a = bkv_key_prefix64(lo + t->range_shared, lolen - t->range_shared);
    }
    if (hi) {
        int c = against_shared(t, hi, hilen);
        if (c < 0) return 0;
        if (c == 0) *z = bkv_key_prefix64(hi + t->range_shared, hilen - t->range_shared);
    }
    return 1;
}

int bkv_table_range_may_intersect(const bkv_table *t, const uint8_t *lo, size_t lolen, const uint8_t *hi,
                                  size_t hilen) {
    if (!t->range_filter) return 1;
    uint64_t a, z;
    return bkv_table_range_question(t, lo, lolen, hi, hilen, &a, &z) && bkv_filter_may_intersect(t->range_filter, a, z);
}

/* Reads the filter block: one filter (version 1) or a partition index
 * (version 2), whose every handle must lie in the table before the index
 * itself. On failure the table keeps no filter. */
static int open_filter(bkv_table *t, const bkv_footer *f) {
    if (bkv_read_filter_block(t->file, t->name, f->filter, &t->filter_data, &t->filter_len, NULL) != BKV_OK)
        return BKV_CORRUPTION;
    const uint8_t *p = t->filter_data;
    size_t len = t->filter_len;
    if (f->version == BKV_TABLE_VERSION) {
        if (bkv_filter_open(p, len, BKV_FILTER_OPEN_TRUSTED, &t->filter, NULL, 0) == BKV_OK) return BKV_OK;
    } else if (len >= BKV_FILTER_PARTITION_HEADER && bkv_get_u32(p) == BKV_FILTER_PARTITION_MAGIC &&
               bkv_get_u16(p + 4) == BKV_FILTER_PARTITION_VERSION && bkv_get_u16(p + 6) == 0 &&
               bkv_get_u32(p + 12) == 0) {
        uint32_t n = bkv_get_u32(p + 8);
        int ok = n >= 1 && n <= BKV_FILTER_PARTITIONS_MAX &&
                 len == BKV_FILTER_PARTITION_HEADER + (size_t)n * BKV_FILTER_PARTITION_ENTRY &&
                 (t->parts = malloc((size_t)n * sizeof *t->parts)) && (t->part_state = calloc(n, 1)) &&
                 (t->views = calloc(n, sizeof *t->views));
        for (uint32_t i = 0; ok && i < n; i++) {
            const uint8_t *entry = p + BKV_FILTER_PARTITION_HEADER + (size_t)i * BKV_FILTER_PARTITION_ENTRY;
            bkv_handle h = {bkv_get_u64(entry), bkv_get_u64(entry + 8)};
            ok = h.offset <= f->filter.offset && h.size <= f->filter.offset - h.offset &&
                 f->filter.offset - h.offset - h.size >= BKV_BLOCK_TRAILER;
            t->parts[i] = h;
        }
        if (ok) {
            t->nparts = n;
            free(t->filter_data);
            t->filter_data = NULL;
            t->filter_len = (size_t)n * (sizeof *t->parts + sizeof *t->views + 1);
            return BKV_OK;
        }
    }
    free(t->parts);
    free(t->part_state);
    free(t->views);
    free(t->filter_data);
    t->parts = NULL;
    t->part_state = NULL;
    t->views = NULL;
    t->filter_data = NULL;
    t->filter_len = 0;
    t->filter = NULL;
    return BKV_CORRUPTION;
}

int bkv_table_open(const bkv_env *env, const char *path, uint64_t file_number, bkv_cache *block_cache,
                   bkv_table_stats *stats, bkv_table **out, bkv_err *e) {
    *out = NULL;
    bkv_table *t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(path))) {
        free(t);
        return bkv_fail(e, BKV_NOMEM, "%s: out of memory opening table", path);
    }
    t->number = file_number;
    t->cache = block_cache;
    t->stats = stats;
    pthread_mutex_init(&t->index_mu, NULL);
    int rc = env->new_readable(env, path, 1, &t->file, e);
    if (rc) goto fail;
    uint64_t size = bkv_file_size(t->file);
    if (size < BKV_FOOTER_LEN) {
        rc = bkv_fail(e, BKV_CORRUPTION, "%s: file too short for a table (%llu bytes, offset 0)", path,
                      (unsigned long long)size);
        goto fail;
    }
    uint8_t footer_buf[BKV_FOOTER_LEN];
    size_t got;
    rc = bkv_file_read_at(t->file, size - BKV_FOOTER_LEN, BKV_FOOTER_LEN, footer_buf, &got, e);
    if (rc) goto fail;
    bkv_footer f;
    rc = bkv_footer_decode(&f, footer_buf, size, path, e);
    if (rc) goto fail;
    t->index_handle = f.index;
    uint8_t *pdata;
    size_t plen;
    rc = bkv_read_block(t->file, path, f.props, &pdata, &plen, e);
    if (rc) goto fail;
    read_props(t, pdata, plen);
    free(pdata);
    if (f.filter.size > 0 && open_filter(t, &f) != BKV_OK) {
        /* A filter that cannot be read or validated costs speed, never
         * correctness: the table then answers "maybe". */
        if (stats) atomic_fetch_add_explicit(&stats->filter_corrupt, 1, memory_order_relaxed);
    }
    if (t->props.range_filter_bytes && open_range_filter(t) != BKV_OK && stats)
        atomic_fetch_add_explicit(&stats->filter_corrupt, 1, memory_order_relaxed); /* the same: "maybe" */
    *out = t;
    return BKV_OK;
fail:
    bkv_table_close(t);
    return rc;
}

void bkv_table_close(bkv_table *t) {
    if (!t) return;
    if (t->cache) bkv_cache_erase_k1(t->cache, t->number);
    if (t->file) bkv_file_close_readable(t->file);
    bkv_filter_destroy(t->filter);
    bkv_filter_destroy(t->range_filter);
    free(t->range_data);
    free(t->props.smallest);
    free(t->props.largest);
    free(t->filter_data);
    for (uint32_t i = 0; i < t->nparts; i++) bkv_filter_destroy(atomic_load(&t->views[i]));
    free(t->views);
    free(t->parts);
    free(t->part_state);
    free(t->index_data);
    free(t->fences);
    free(t->verified);
    if (t->slot_destroy) t->slot_destroy(atomic_load(&t->slot));
    free(t->aux_props);
    pthread_mutex_destroy(&t->index_mu);
    free(t->name);
    free(t);
}

/* A filter partition as the block cache holds it: the filter is opened in
 * place over data. */
typedef struct cached_partition {
    bkv_filter *filter;
    uint8_t *data;
    size_t charge;
    atomic_uint_fast64_t *resident; /* the bytes counter it was added to, or NULL */
} cached_partition;

static void delete_partition(uint64_t k1, uint64_t k2, void *v) {
    (void)k1, (void)k2;
    cached_partition *cp = v;
    if (cp->resident) atomic_fetch_sub_explicit(cp->resident, cp->charge, memory_order_relaxed);
    bkv_filter_destroy(cp->filter);
    free(cp->data);
    free(cp);
}

static int read_partition(bkv_table *t, uint32_t i, cached_partition **out, bkv_err *e) {
    *out = NULL;
    cached_partition *cp = calloc(1, sizeof *cp);
    if (!cp) return bkv_fail(e, BKV_NOMEM, "%s: out of memory reading a filter partition", t->name);
    size_t len;
    int rc = bkv_read_filter_block(t->file, t->name, t->parts[i], &cp->data, &len, e);
    if (!rc) {
        char why[160];
        rc = bkv_filter_open(cp->data, len, BKV_FILTER_OPEN_TRUSTED, &cp->filter, why, sizeof why);
        if (rc)
            rc = bkv_fail(e, BKV_CORRUPTION, "%s: filter partition %u at offset %llu: %s", t->name, i,
                          (unsigned long long)t->parts[i].offset, why);
    }
    if (rc) {
        delete_partition(0, 0, cp);
        return rc;
    }
    cp->charge = len + sizeof *cp;
    *out = cp;
    return BKV_OK;
}

/* What an open table knows of a partition: nothing yet, or damaged. A
 * partition verified in place has its view instead; one read through the
 * block cache stays UNCHECKED (the cache entry says the rest). */
enum { PART_UNCHECKED, PART_DAMAGED };

static void partition_damaged(const bkv_table *t, uint32_t i) {
    atomic_store_explicit(&t->part_state[i], PART_DAMAGED, memory_order_relaxed);
    if (t->stats) atomic_fetch_add_explicit(&t->stats->filter_corrupt, 1, memory_order_relaxed);
}

/* A partition pinned for probing: a view of it in the file's map, or a
 * filter held through the block cache (or privately, without one). */
typedef struct partition_ref {
    const bkv_filter *filter;
    bkv_cache_entry *entry;
    cached_partition *own;
} partition_ref;

/* Pins partition i. A table whose file is mapped probes its partitions
 * where they lie, as it reads its uncompressed data blocks: the page
 * cache holds them, and each is verified once, on first use. Otherwise
 * they go through the block cache. 0 when the partition is damaged (or
 * memory runs out): the caller answers "maybe". */
static int pin_partition(const bkv_table *t, uint32_t i, partition_ref *r) {
    memset(r, 0, sizeof *r);
    if ((r->filter = atomic_load_explicit(&t->views[i], memory_order_acquire))) return 1;
    if (atomic_load_explicit(&t->part_state[i], memory_order_relaxed) == PART_DAMAGED) return 0;
    bkv_handle h = t->parts[i];
    const uint8_t *map = bkv_file_mapped(t->file);
    if (map && map[h.offset + h.size] == BKV_COMPRESS_NONE) { /* in bounds: checked at open */
        if (t->stats) atomic_fetch_add_explicit(&t->stats->filter_partitions_read, 1, memory_order_relaxed);
        bkv_filter *view = NULL;
        if (bkv_block_verify(map + h.offset, h, t->name, NULL) != BKV_OK ||
            bkv_filter_open(map + h.offset, (size_t)h.size, BKV_FILTER_OPEN_TRUSTED, &view, NULL, 0) != BKV_OK) {
            partition_damaged(t, i);
            return 0;
        }
        bkv_filter *none = NULL;
        if (atomic_compare_exchange_strong(&t->views[i], &none, view)) {
            atomic_fetch_add_explicit(&((bkv_table *)t)->view_bytes, bkv_filter_memory(view), memory_order_relaxed);
        } else {
            bkv_filter_destroy(view); /* another reader was first */
            view = none;
        }
        r->filter = view;
        return 1;
    }
    if (t->cache && (r->entry = bkv_cache_lookup(t->cache, t->number, h.offset))) {
        r->filter = ((cached_partition *)bkv_cache_value(r->entry))->filter;
        return 1;
    }
    cached_partition *cp;
    int rc = read_partition((bkv_table *)t, i, &cp, NULL);
    if (t->stats) atomic_fetch_add_explicit(&t->stats->filter_partitions_read, 1, memory_order_relaxed);
    if (rc) {
        if (rc == BKV_CORRUPTION) partition_damaged(t, i);
        return 0;
    }
    r->filter = cp->filter;
    if (t->cache) {
        if (t->stats) {
            cp->resident = &t->stats->filter_cache_bytes;
            atomic_fetch_add_explicit(cp->resident, cp->charge, memory_order_relaxed);
        }
        if ((r->entry = bkv_cache_insert(t->cache, t->number, h.offset, cp, cp->charge, delete_partition))) return 1;
    }
    r->own = cp;
    return 1;
}

static void unpin_partition(const bkv_table *t, partition_ref *r) {
    if (r->entry) bkv_cache_release(t->cache, r->entry);
    if (r->own) delete_partition(0, 0, r->own);
}

int bkv_table_may_contain(const bkv_table *t, bkv_hash h) {
    if (t->filter) return bkv_filter_may_contain(t->filter, h);
    if (!t->nparts) return 1;
    partition_ref r;
    if (!pin_partition(t, bkv_filter_partition_of(h, t->nparts), &r)) return 1;
    int maybe = bkv_filter_may_contain(r.filter, h);
    unpin_partition(t, &r);
    return maybe;
}

/* Partitioned: the hashes are grouped by partition (a chunk at a time), so
 * each partition is pinned once and probed with one prefetched batch. */
#define PROBE_CHUNK 64
void bkv_table_may_contain_batch(const bkv_table *t, const bkv_hash *h, size_t n, uint8_t *out) {
    if (t->filter || !t->nparts) {
        bkv_filter_may_contain_batch(t->filter, h, n, out);
        return;
    }
    for (size_t base = 0; base < n; base += PROBE_CHUNK) {
        size_t m = n - base < PROBE_CHUNK ? n - base : PROBE_CHUNK;
        uint32_t part[PROBE_CHUNK];
        uint8_t order[PROBE_CHUNK], maybe[PROBE_CHUNK];
        bkv_hash group[PROBE_CHUNK];
        for (size_t j = 0; j < m; j++) {
            part[j] = bkv_filter_partition_of(h[base + j], t->nparts);
            size_t k = j; /* insertion sort of the chunk's positions by partition */
            while (k > 0 && part[order[k - 1]] > part[j]) {
                order[k] = order[k - 1];
                k--;
            }
            order[k] = (uint8_t)j;
        }
        for (size_t g = 0; g < m;) {
            size_t end = g;
            while (end < m && part[order[end]] == part[order[g]]) group[end - g] = h[base + order[end]], end++;
            partition_ref r;
            if (pin_partition(t, part[order[g]], &r)) bkv_filter_may_contain_batch(r.filter, group, end - g, maybe);
            else memset(maybe, 1, end - g);
            unpin_partition(t, &r);
            for (size_t j = g; j < end; j++) out[base + order[j]] = maybe[j - g];
            g = end;
        }
    }
}

uint32_t bkv_table_filter_partitions(const bkv_table *t) { return t->nparts; }

int bkv_table_filter_partition(bkv_table *t, uint32_t i, bkv_filter **out, bkv_err *e) {
    *out = NULL;
    if (i >= t->nparts) return bkv_fail(e, BKV_INVALID, "%s: no filter partition %u", t->name, i);
    cached_partition *cp;
    int rc = read_partition(t, i, &cp, e);
    if (rc) return rc;
    /* A copy of its own: the caller's filter must not depend on cp->data. */
    rc = bkv_filter_open(cp->data, bkv_filter_encoded_size(cp->filter), BKV_FILTER_OPEN_COPY | BKV_FILTER_OPEN_TRUSTED,
                         out, NULL, 0);
    delete_partition(0, 0, cp);
    return rc ? bkv_fail(e, rc, "%s: cannot copy filter partition %u", t->name, i) : BKV_OK;
}

int bkv_table_has_filter(const bkv_table *t) { return t->filter || t->nparts; }

const bkv_table_props *bkv_table_properties(const bkv_table *t) { return &t->props; }

size_t bkv_table_filter_memory(const bkv_table *t) {
    if (t->nparts) return t->filter_len + atomic_load_explicit(&((bkv_table *)t)->view_bytes, memory_order_relaxed);
    return t->filter ? t->filter_len : 0;
}

const bkv_filter *bkv_table_filter(const bkv_table *t) { return t->filter; }

static int decode_handle(const bkv_table *t, const uint8_t *v, size_t n, bkv_handle *h, bkv_err *e) {
    const uint8_t *p = bkv_get_varint64(v, v + n, &h->offset);
    if (!p || !bkv_get_varint64(p, v + n, &h->size) || h->size > BKV_MAX_BLOCK_SIZE)
        return bkv_fail(e, BKV_CORRUPTION, "%s: malformed block handle in the index", t->name);
    return BKV_OK;
}

/* The block and its trailer lie within the file. */
static int block_in_file(const bkv_table *t, bkv_handle h) {
    uint64_t size = bkv_file_size(t->file);
    return h.offset <= size && size - h.offset >= h.size + BKV_BLOCK_TRAILER;
}

/* Readahead for a reader that goes through blocks in file order. Table
 * maps are read at random (env_posix.c), so what comes next is asked for
 * explicitly: from the third block in a row that each follow the one
 * before (a seek and a step or two ask for nothing), the next window
 * (doubling from RA_MIN to RA_MAX) is prefetched, half a window before it
 * is needed. A jump starts over. */
#define RA_MIN (64u << 10)
#define RA_MAX (2u << 20)
#define RA_AFTER 3

typedef struct readahead {
    uint64_t next;   /* where a block following the last one starts */
    uint64_t end;    /* prefetched up to here */
    uint64_t window; /* 0: not prefetching yet */
    uint64_t limit;  /* nothing at or past here is asked for */
    unsigned run;    /* blocks in file order, this one included */
} readahead;

static void readahead_before(bkv_table *t, readahead *ra, bkv_handle h) {
    uint64_t end = h.offset + h.size + BKV_BLOCK_TRAILER;
    ra->run = h.offset == ra->next ? ra->run + 1 : 1;
    ra->next = end;
    if (ra->run < RA_AFTER) {
        ra->window = 0;
        ra->end = end;
        return;
    }
    ra->window = ra->window ? (ra->window * 2 < RA_MAX ? ra->window * 2 : RA_MAX) : RA_MIN;
    if (ra->end > end + ra->window / 2) return;
    uint64_t from = ra->end > h.offset ? ra->end : h.offset;
    uint64_t n = from < ra->limit ? ra->limit - from : 0;
    if (n > ra->window) n = ra->window;
    if (n) bkv_file_prefetch(t->file, from, n);
    ra->end = from + n;
}

/* Index entry i (stored whole: a restart point at every entry): the last
 * internal key of data block i and its handle's bytes. */
static int index_entry_at(const bkv_table *t, uint32_t i, const uint8_t **key, size_t *klen, const uint8_t **val,
                          size_t *vlen, bkv_err *e) {
    const bkv_block *ix = &t->index;
    if (i < ix->num_restarts) {
        uint32_t off = bkv_get_u32(ix->restarts + 4 * (size_t)i);
        const uint8_t *p = ix->data + off, *end = ix->data + ix->len;
        uint32_t shared, unshared, vl;
        if (off < ix->len && (p = bkv_get_varint32(p, end, &shared)) && (p = bkv_get_varint32(p, end, &unshared)) &&
            (p = bkv_get_varint32(p, end, &vl)) && shared == 0 && (size_t)(end - p) >= (size_t)unshared + vl) {
            *key = p;
            *klen = unshared;
            *val = p + unshared;
            *vlen = vl;
            return BKV_OK;
        }
    }
    return bkv_fail(e, BKV_CORRUPTION, "%s: index has no well-formed entry for data block %u", t->name, i);
}

static int index_handle_at(const bkv_table *t, uint32_t i, bkv_handle *h, bkv_err *e) {
    const uint8_t *k, *v;
    size_t kl, vl;
    int rc = index_entry_at(t, i, &k, &kl, &v, &vl, e);
    return rc ? rc : decode_handle(t, v, vl, h, e);
}

static void release_block(bkv_table *t, block_ref *b) {
    if (b->entry) bkv_cache_release(t->cache, b->entry);
    if (b->own) delete_block(0, 0, b->own);
    b->entry = NULL;
    b->own = NULL;
    b->blk = NULL;
}

/* A mapped block's entries are read front to back, but the processor's
 * own prefetcher stops at every page and starts late in each: readers that
 * go through blocks in order request all of the next block's lines while
 * they decode one. A macro: GCC drops a call to a static function that
 * only prefetches. */
#define REQUEST_MAPPED_BLOCK(t, hd)                                         \
    do {                                                                    \
        const uint8_t *map_ = bkv_file_mapped((t)->file);                   \
        if (map_ && block_in_file(t, hd))                                   \
            for (uint64_t off_ = 0; off_ <= (hd).size; off_ += 64)          \
                __builtin_prefetch(map_ + (hd).offset + off_);              \
    } while (0)

/* number: the block's index entry, or -1 when unknown. */
static int load_block(bkv_table *t, bkv_handle h, int64_t number, int read_flags, block_ref *b, bkv_table_stats *stats,
                      bkv_err *e) {
    int verify_all = read_flags & BKV_READ_VERIFY_ALL;
    b->entry = NULL;
    b->own = NULL;
    const uint8_t *map = bkv_file_mapped(t->file);
    if (map) {
        if (!block_in_file(t, h))
            return bkv_fail(e, BKV_CORRUPTION, "%s: block at offset %llu runs past the end of the file", t->name,
                            (unsigned long long)h.offset);
        const uint8_t *p = map + h.offset;
        uint8_t type = p[h.size];
        if (type == BKV_COMPRESS_NONE) {
            if (stats) atomic_fetch_add_explicit(&stats->blocks_read, 1, memory_order_relaxed);
            if (verify_all || number < 0 || !atomic_load_explicit(&t->verified[number], memory_order_acquire)) {
                int rc = bkv_block_verify(p, h, t->name, e);
                if (rc) return rc;
                if (number >= 0) atomic_store_explicit(&t->verified[number], 1, memory_order_release);
            }
            if (bkv_block_parse(&b->view.blk, p, (size_t)h.size) < 0)
                return bkv_fail(e, BKV_CORRUPTION, "%s: malformed data block at offset %llu", t->name,
                                (unsigned long long)h.offset);
            b->blk = &b->view.blk;
            return BKV_OK;
        }
    }
    /* A cached block was verified when it was read; verify_all reads it again. */
    if (t->cache && !verify_all && (b->entry = bkv_cache_lookup(t->cache, t->number, h.offset))) {
        if (stats) atomic_fetch_add_explicit(&stats->cache_hits, 1, memory_order_relaxed);
        b->blk = &((cached_block *)bkv_cache_value(b->entry))->blk;
        return BKV_OK;
    }
    if (stats) {
        if (t->cache) atomic_fetch_add_explicit(&stats->cache_misses, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&stats->blocks_read, 1, memory_order_relaxed);
    }
    cached_block *cb = calloc(1, sizeof *cb);
    if (!cb) return bkv_fail(e, BKV_NOMEM, "%s: out of memory", t->name);
    int rc = bkv_read_block(t->file, t->name, h, &cb->data, &cb->len, e);
    if (rc) {
        free(cb);
        return rc;
    }
    if (bkv_block_parse(&cb->blk, cb->data, cb->len) < 0) {
        delete_block(0, 0, cb);
        return bkv_fail(e, BKV_CORRUPTION, "%s: malformed data block at offset %llu", t->name,
                        (unsigned long long)h.offset);
    }
    if (t->cache && (read_flags & BKV_READ_FILL_CACHE) &&
        (b->entry = bkv_cache_insert(t->cache, t->number, h.offset, cb, cb->len + sizeof *cb, delete_block))) {
        b->blk = &cb->blk;
        return BKV_OK;
    }
    b->own = cb;
    b->blk = &cb->blk;
    return BKV_OK;
}

static uint64_t fence_of(const uint8_t *k, size_t klen, size_t prefix) {
    uint64_t f = 0;
    for (size_t i = 0; i < 8; i++) f = f << 8 | (prefix + i < klen ? k[prefix + i] : 0);
    return f;
}

/* Builds t->fences from the index; leaves it NULL (searches then read the
 * index as before) when an entry does not parse or memory is short. */
static void build_fences(bkv_table *t) {
    uint32_t n = t->index.num_restarts;
    const uint8_t *first, *last, *v;
    size_t flen, llen, vl;
    if (n == 0 || index_entry_at(t, 0, &first, &flen, &v, &vl, NULL) ||
        index_entry_at(t, n - 1, &last, &llen, &v, &vl, NULL) || flen < BKV_IKEY_TRAILER || llen < BKV_IKEY_TRAILER)
        return;
    flen -= BKV_IKEY_TRAILER;
    llen -= BKV_IKEY_TRAILER;
    size_t prefix = 0;
    while (prefix < flen && prefix < llen && first[prefix] == last[prefix]) prefix++;
    uint64_t *fences = malloc((size_t)n * sizeof *fences);
    if (!fences) return;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *k;
        size_t kl;
        if (index_entry_at(t, i, &k, &kl, &v, &vl, NULL) || kl < BKV_IKEY_TRAILER) {
            free(fences);
            return;
        }
        fences[i] = fence_of(k, kl - BKV_IKEY_TRAILER, prefix);
    }
    t->fences = fences;
    t->fence_prefix = prefix;
    t->fence_key = first;
}

/* Positions ii (over t->index) at the first entry whose key >= target, as
 * bkv_block_iter_seek does, through the fences when the table has them:
 * entries whose fence is below the target's are before it, above it after
 * it, and only equal ones need their keys compared. */
static void index_seek(const bkv_table *t, bkv_block_iter *ii, const uint8_t *target, size_t tlen) {
    if (!t->fences || tlen < BKV_IKEY_TRAILER) {
        bkv_block_iter_seek(ii, target, tlen, ikey_cmp);
        return;
    }
    uint32_t n = t->index.num_restarts, lo = 0, hi = n;
    /* A target shorter than the shared prefix but equal to it so far gets
     * fence 0, at or before every entry. */
    size_t ulen = tlen - BKV_IKEY_TRAILER, p = t->fence_prefix;
    int c = memcmp(target, t->fence_key, ulen < p ? ulen : p);
    if (c < 0) {
        hi = 0;
    } else if (c > 0) {
        lo = n;
    } else {
        uint64_t f = fence_of(target, ulen, p);
        while (lo < hi) { /* the first fence >= f */
            uint32_t mid = lo + (hi - lo) / 2;
            if (t->fences[mid] < f) lo = mid + 1;
            else hi = mid;
        }
        hi = lo;
        while (hi < n && t->fences[hi] == f) hi++;
        while (lo < hi) { /* among the ties, the first key >= target */
            uint32_t mid = lo + (hi - lo) / 2;
            const uint8_t *k, *v;
            size_t kl, vl;
            if (index_entry_at(t, mid, &k, &kl, &v, &vl, NULL)) {
                bkv_block_iter_seek(ii, target, tlen, ikey_cmp); /* let the iterator report the damage */
                return;
            }
            if (ikey_cmp(k, kl, target, tlen) < 0) lo = mid + 1;
            else hi = mid;
        }
    }
    bkv_block_iter_seek_restart(ii, lo);
}

/* Reads the index (once; a failed read is tried again by the next caller),
 * checksummed and parsed. */
static int load_index(bkv_table *t, bkv_err *e) {
    if (atomic_load_explicit(&t->index_ready, memory_order_acquire)) return BKV_OK;
    pthread_mutex_lock(&t->index_mu);
    int rc = BKV_OK;
    if (!atomic_load_explicit(&t->index_ready, memory_order_relaxed)) {
        bkv_handle h = t->index_handle;
        size_t len;
        /* A private copy even of a mapped file: searched in place in the
         * map, the index made readrandom 0.92x and seekrandom 0.88x
         * (medians of four alternated runs at 10 M keys). */
        rc = bkv_read_block(t->file, t->name, h, &t->index_data, &len, e);
        bkv_block index;
        if (!rc && bkv_block_parse(&index, t->index_data, len) < 0)
            rc = bkv_fail(e, BKV_CORRUPTION, "%s: malformed index block at offset %llu", t->name,
                          (unsigned long long)h.offset);
        if (!rc && !(t->verified = calloc(index.num_restarts + 1, sizeof *t->verified)))
            rc = bkv_fail(e, BKV_NOMEM, "%s: out of memory", t->name);
        if (rc) {
            free(t->index_data);
            t->index_data = NULL;
        } else {
            t->index = index;
            build_fences(t);
            atomic_store_explicit(&t->index_ready, 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&t->index_mu);
    return rc;
}

void bkv_table_prefetch_get(bkv_table *t, const void *key, size_t klen) {
    const uint8_t *map = bkv_file_mapped(t->file);
    uint8_t lookup[256];
    if (!map || klen + BKV_IKEY_TRAILER > sizeof lookup || !atomic_load_explicit(&t->index_ready, memory_order_acquire))
        return;
    if (klen) memcpy(lookup, key, klen);
    bkv_put_u64(lookup + klen, bkv_pack_trailer(BKV_MAX_SEQ, 0xff));
    bkv_block_iter ii;
    bkv_block_iter_init(&ii, &t->index);
    index_seek(t, &ii, lookup, klen + BKV_IKEY_TRAILER);
    bkv_handle h;
    if (ii.valid && !decode_handle(t, ii.val, ii.vlen, &h, NULL) && block_in_file(t, h)) {
        /* The end of the block (restart count and points, trailer) is
         * read first, then its first entries. */
        const uint8_t *p = map + h.offset;
        __builtin_prefetch(p + h.size);
        if (h.size >= 64) __builtin_prefetch(p + h.size - 64);
        __builtin_prefetch(p);
        int64_t number = bkv_block_iter_restart_ordinal(&ii);
        if (number >= 0) __builtin_prefetch(&t->verified[number]);
    }
    bkv_block_iter_free(&ii);
}

int bkv_table_get(bkv_table *t, const void *key, size_t klen, uint64_t snapshot, int read_flags, int *found,
                  unsigned *type, void **val, size_t *vlen, uint64_t *seq, bkv_table_stats *stats, bkv_err *e) {
    *found = 0;
    int rc = load_index(t, e);
    if (rc) return rc;
    uint8_t stackbuf[256];
    size_t ilen = klen + BKV_IKEY_TRAILER;
    uint8_t *lookup = ilen <= sizeof stackbuf ? stackbuf : malloc(ilen);
    if (!lookup) return bkv_fail(e, BKV_NOMEM, "out of memory");
    if (klen) memcpy(lookup, key, klen);
    bkv_put_u64(lookup + klen, bkv_pack_trailer(snapshot, 0xff));

    bkv_block_iter ii;
    bkv_block_iter_init(&ii, &t->index);
    index_seek(t, &ii, lookup, ilen);
    if (ii.oom || ii.corrupt) {
        rc = ii.oom ? bkv_fail(e, BKV_NOMEM, "%s: out of memory reading the index", t->name)
                    : bkv_fail(e, BKV_CORRUPTION, "%s: malformed index entry", t->name);
        goto out;
    }
    if (!ii.valid) goto out;
    bkv_handle h;
    if ((rc = decode_handle(t, ii.val, ii.vlen, &h, e))) goto out;
    block_ref br;
    if ((rc = load_block(t, h, bkv_block_iter_restart_ordinal(&ii), read_flags, &br, stats, e))) goto out;
    bkv_block_iter bi;
    bkv_block_iter_init(&bi, br.blk);
    bkv_block_iter_seek(&bi, lookup, ilen, ikey_cmp);
    if (bi.oom) {
        rc = bkv_fail(e, BKV_NOMEM, "%s: out of memory reading a data block", t->name);
    } else if (bi.corrupt) {
        rc = bkv_fail(e, BKV_CORRUPTION, "%s: malformed entry in data block at offset %llu", t->name,
                      (unsigned long long)h.offset);
    } else if (bi.valid && bi.key.len >= BKV_IKEY_TRAILER && t->global_seq <= snapshot &&
               bkv_user_key_compare(bi.key.data, bi.key.len - BKV_IKEY_TRAILER, key, klen) == 0) {
        *type = bkv_ikey_type(bi.key.data, bi.key.len);
        if (*type != BKV_TYPE_VALUE && *type != BKV_TYPE_DELETION) {
            rc = bkv_fail(e, BKV_CORRUPTION, "%s: bad entry type %u in data block at offset %llu", t->name, *type,
                          (unsigned long long)h.offset);
        } else {
            *found = 1;
            if (seq) *seq = t->global_seq ? t->global_seq : bkv_ikey_seq(bi.key.data, bi.key.len);
            *vlen = 0;
            *val = NULL;
            if (*type == BKV_TYPE_VALUE) {
                *val = malloc(bi.vlen ? bi.vlen : 1);
                if (!*val) rc = bkv_fail(e, BKV_NOMEM, "out of memory");
                else {
                    memcpy(*val, bi.val, bi.vlen);
                    *vlen = bi.vlen;
                }
            }
        }
    }
    bkv_block_iter_free(&bi);
    release_block(t, &br);
out:
    bkv_block_iter_free(&ii);
    if (lookup != stackbuf) free(lookup);
    return rc;
}

uint64_t bkv_table_approximate_offset(bkv_table *t, const uint8_t *ikey, size_t ilen) {
    if (load_index(t, NULL)) return 0; /* unknown: nothing is counted from this table */
    bkv_block_iter ii;
    bkv_block_iter_init(&ii, &t->index);
    index_seek(t, &ii, ikey, ilen);
    uint64_t off = t->props.data_bytes; /* past every block: the key is beyond the table */
    bkv_handle h;
    if (ii.valid && decode_handle(t, ii.val, ii.vlen, &h, NULL) == BKV_OK) off = h.offset;
    bkv_block_iter_free(&ii);
    return off;
}

/* The user key of index entry i: the last key of data block i. */
static int index_user_key_at(const bkv_table *t, uint32_t i, const uint8_t **k, size_t *klen, bkv_err *e) {
    const uint8_t *v;
    size_t vl;
    int rc = index_entry_at(t, i, k, klen, &v, &vl, e);
    if (!rc && *klen < BKV_IKEY_TRAILER)
        rc = bkv_fail(e, BKV_CORRUPTION, "%s: index entry %u holds a malformed key", t->name, i);
    if (!rc) *klen -= BKV_IKEY_TRAILER;
    return rc;
}

int bkv_table_blocks_key_range(bkv_table *t, uint32_t first, uint32_t last, const uint8_t **lo, size_t *lo_len,
                               const uint8_t **hi, size_t *hi_len, bkv_err *e) {
    int rc = load_index(t, e);
    if (rc) return rc;
    *lo = *hi = NULL;
    *lo_len = *hi_len = 0;
    uint64_t nblocks = t->props.num_data_blocks < t->index.num_restarts ? t->props.num_data_blocks
                                                                        : t->index.num_restarts;
    if (last >= nblocks) last = (uint32_t)(nblocks - 1);
    if (nblocks == 0 || first > last) return BKV_OK; /* no blocks: no keys */
    if (first > 0 && (rc = index_user_key_at(t, first - 1, lo, lo_len, e))) return rc;
    return index_user_key_at(t, last, hi, hi_len, e);
}

int bkv_table_scan_blocks(bkv_table *t, uint32_t first, uint32_t last, int read_flags, bkv_table_stats *stats,
                          bkv_table_entry_fn fn, void *arg, bkv_err *e) {
    int rc = load_index(t, e);
    if (rc) return rc;
    uint64_t nblocks = t->props.num_data_blocks < t->index.num_restarts ? t->props.num_data_blocks
                                                                        : t->index.num_restarts;
    if (nblocks == 0) return BKV_OK;
    if (last >= nblocks) last = (uint32_t)(nblocks - 1);
    /* More than one block: read in order from the first, so read ahead at
     * once, unless this process has verified the first and last blocks
     * already: their pages were read and are most likely still cached,
     * and asking the kernel again cost a tenth of a warm search by value. */
    const uint8_t *map = bkv_file_mapped(t->file);
    int seen = map && !(read_flags & BKV_READ_VERIFY_ALL) &&
               atomic_load_explicit(&t->verified[first], memory_order_relaxed) &&
               atomic_load_explicit(&t->verified[last], memory_order_relaxed);
    bkv_handle first_h, last_h;
    readahead ra = {UINT64_MAX, 0, 0, 0, 0};
    if (last > first && !seen && !index_handle_at(t, first, &first_h, NULL) &&
        !index_handle_at(t, last, &last_h, NULL))
        ra = (readahead){first_h.offset, 0, 0, last_h.offset + last_h.size + BKV_BLOCK_TRAILER, RA_AFTER - 1};
    bkv_handle h, next_h;
    int next_rc = index_handle_at(t, first, &next_h, e);
    if (!next_rc) REQUEST_MAPPED_BLOCK(t, next_h);
    for (uint32_t i = first; i <= last; i++) {
        block_ref br;
        if (next_rc) return i == first ? next_rc : index_handle_at(t, i, &h, e); /* again, for its message */
        h = next_h;
        readahead_before(t, &ra, h);
        rc = load_block(t, h, i, read_flags, &br, stats, e);
        if (rc) return rc;
        if (i < last && !(next_rc = index_handle_at(t, i + 1, &next_h, NULL))) REQUEST_MAPPED_BLOCK(t, next_h);
        bkv_block_iter bi;
        bkv_block_iter_init(&bi, br.blk);
        bkv_buf scratch;
        bkv_buf_init(&scratch);
        for (bkv_block_iter_first(&bi); !rc && bi.valid; bkv_block_iter_next(&bi)) {
            const uint8_t *k = visible_key(t, &bi.key, &scratch);
            if (!k) bi.oom = 1;
            else rc = fn(arg, k, bi.key.len, bi.val, bi.vlen);
        }
        bkv_buf_free(&scratch);
        if (!rc && bi.oom) rc = bkv_fail(e, BKV_NOMEM, "%s: out of memory reading a data block", t->name);
        if (!rc && bi.corrupt)
            rc = bkv_fail(e, BKV_CORRUPTION, "%s: malformed entry in data block at offset %llu", t->name,
                          (unsigned long long)h.offset);
        bkv_block_iter_free(&bi);
        release_block(t, &br);
        if (rc) return rc;
    }
    return BKV_OK;
}

/* A bulk reader's copy of the file's bytes [off, off + len). */
typedef struct bulk_chunk {
    uint8_t *buf;
    size_t cap, len;
    uint64_t off;
} bulk_chunk;

/* A system call per 64 blocks of 4 KiB, in a buffer that stays in the
 * second-level cache while its blocks are merged. */
#define BULK_CHUNK (256u << 10)

/* Two-level iterator: the pinned index block, and one data block at a
 * time (held through the block cache or privately). */
typedef struct table_iter {
    bkv_ikey_iter base;
    bkv_table *t;
    int read_flags;
    bkv_table_stats *stats;
    bkv_block_iter index_it;
    block_ref cur;            /* the current block */
    bkv_block_iter it;
    int have_block;
    int rc;                   /* first error */
    bkv_err err;
    bkv_buf key;              /* an ingested table's current key, at its global sequence */
    readahead ra;
    bulk_chunk chunk;         /* BKV_READ_BULK: the bytes read ahead */
    bkv_skip_log *skips;      /* skipping damage: where it went (NULL: damage is an error) */
} table_iter;

void bkv_skip_log_free(bkv_skip_log *s) {
    for (size_t i = 0; i < s->n; i++) {
        bkv_buf_free(&s->lo[i]);
        bkv_buf_free(&s->hi[i]);
    }
    free(s->lo);
    free(s->hi);
    free(s->lo_in);
    memset(s, 0, sizeof *s);
}

void bkv_skip_log_add(bkv_skip_log *s, const uint8_t *lo, size_t lol, int lo_inclusive, const uint8_t *hi, size_t hil,
                      const bkv_err *why) {
    if (!s->n && !s->incomplete && why) s->first = *why;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4;
        bkv_buf *l = realloc(s->lo, cap * sizeof *l);
        if (l) s->lo = l;
        bkv_buf *h = l ? realloc(s->hi, cap * sizeof *h) : NULL;
        if (h) s->hi = h;
        uint8_t *in = h ? realloc(s->lo_in, cap) : NULL;
        if (!in) {
            s->incomplete = 1;
            return;
        }
        s->lo_in = in;
        s->cap = cap;
    }
    bkv_buf_init(&s->lo[s->n]);
    bkv_buf_init(&s->hi[s->n]);
    if (bkv_buf_set(&s->lo[s->n], lo, lol) || bkv_buf_set(&s->hi[s->n], hi, hil)) {
        bkv_buf_free(&s->lo[s->n]);
        bkv_buf_free(&s->hi[s->n]);
        s->incomplete = 1;
        return;
    }
    s->lo_in[s->n++] = (uint8_t)(lo_inclusive != 0);
}

int bkv_skip_log_holds(const bkv_skip_log *s, const uint8_t *k, size_t kl) {
    if (s->incomplete) return 1;
    for (size_t i = 0; i < s->n; i++) {
        int c = bkv_user_key_compare(k, kl, s->lo[i].data, s->lo[i].len);
        if ((c > 0 || (c == 0 && s->lo_in[i])) && bkv_user_key_compare(k, kl, s->hi[i].data, s->hi[i].len) <= 0)
            return 1;
    }
    return 0;
}

static void drop_block(table_iter *ti);

/* The user key of an internal key, or all of a key too short to have a
 * trailer (damage: still a place in the key order). */
static size_t user_len(size_t len) { return len >= BKV_IKEY_TRAILER ? len - BKV_IKEY_TRAILER : len; }

/* Skipping damage: records the current block's key range (after the
 * separator before it, up to its own) with why, and drops it. */
static void skip_block(table_iter *ti, const bkv_err *why) {
    const bkv_table_props *p = &ti->t->props;
    int64_t at = bkv_block_iter_restart_ordinal(&ti->index_it);
    bkv_buf prev;
    bkv_buf_init(&prev);
    int have_prev = 0;
    if (at > 0) {
        bkv_block_iter ii;
        bkv_block_iter_init(&ii, &ti->t->index);
        bkv_block_iter_first(&ii);
        for (int64_t i = 0; i + 1 < at && ii.valid; i++) bkv_block_iter_next(&ii);
        have_prev = ii.valid && !bkv_buf_set(&prev, ii.key.data, user_len(ii.key.len));
        if (ii.valid && !have_prev) ti->skips->incomplete = 1;
        bkv_block_iter_free(&ii);
    }
    const uint8_t *lo = have_prev ? prev.data : p->smallest;
    size_t lol = have_prev ? prev.len : (p->smallest ? user_len(p->smallest_len) : 0);
    const uint8_t *hi = ti->index_it.valid ? ti->index_it.key.data : NULL;
    size_t hil = hi ? user_len(ti->index_it.key.len) : 0;
    if (!lo || !hi) ti->skips->incomplete = 1; /* no bound to give: every key is in doubt */
    else bkv_skip_log_add(ti->skips, lo, lol, !have_prev, hi, hil, why);
    bkv_buf_free(&prev);
    drop_block(ti);
}

static void drop_block(table_iter *ti) {
    if (ti->have_block) bkv_block_iter_free(&ti->it);
    ti->have_block = 0;
    release_block(ti->t, &ti->cur);
}

static void set_error(table_iter *ti, int rc, const bkv_err *e) {
    if (!ti->rc) {
        ti->rc = rc;
        if (e) ti->err = *e;
    }
    drop_block(ti);
}

/* Loads block h for a bulk reader (BKV_READ_BULK) from its chunk, first
 * reading the chunk from h on (up to the end of the data blocks) when h is
 * not wholly in it. A block stored plain is read in place in the chunk,
 * which stays as it is until the next load; a compressed one is
 * decompressed into a copy of its own. Every block is verified, as a
 * compaction or check reads each once. */
static int load_bulk(table_iter *ti, bkv_handle h, bkv_err *e) {
    bkv_table *t = ti->t;
    bulk_chunk *c = &ti->chunk;
    block_ref *b = &ti->cur;
    if (!block_in_file(t, h))
        return bkv_fail(e, BKV_CORRUPTION, "%s: block at offset %llu runs past the end of the file", t->name,
                        (unsigned long long)h.offset);
    uint64_t need = h.size + BKV_BLOCK_TRAILER;
    if (h.offset < c->off || h.offset + need > c->off + c->len) {
        /* The chunk's tail from h on (the start of a block that did not
         * fit) is kept, so that each byte is read once. */
        size_t kept = h.offset >= c->off && h.offset < c->off + c->len ? (size_t)(c->off + c->len - h.offset) : 0;
        uint64_t end = bkv_table_data_end(t), left = end > h.offset ? end - h.offset : 0;
        uint64_t want = left < BULK_CHUNK ? left : BULK_CHUNK;
        if (want < need) want = need;
        if (kept) memmove(c->buf, c->buf + (h.offset - c->off), kept);
        c->off = h.offset;
        c->len = kept;
        if (want > c->cap) {
            uint8_t *buf = realloc(c->buf, (size_t)want);
            if (!buf) return bkv_fail(e, BKV_NOMEM, "%s: out of memory reading blocks", t->name);
            c->buf = buf;
            c->cap = (size_t)want;
        }
        size_t got;
        int rc = bkv_file_read_at(t->file, h.offset + kept, (size_t)want - kept, c->buf + kept, &got, e);
        if (rc) return rc;
        c->len += got;
        if (c->len < need)
            return bkv_fail(e, BKV_CORRUPTION, "%s: block at offset %llu truncated (%zu of %llu bytes)", t->name,
                            (unsigned long long)h.offset, c->len, (unsigned long long)need);
    }
    if (ti->stats) atomic_fetch_add_explicit(&ti->stats->blocks_read, 1, memory_order_relaxed);
    const uint8_t *stored = c->buf + (h.offset - c->off);
    uint8_t *raw;
    size_t len;
    int rc = bkv_block_unpack(stored, h, t->name, &raw, &len, e);
    if (rc) return rc;
    cached_block *cb = &b->view;
    if (raw) {
        if (!(cb = calloc(1, sizeof *cb))) {
            free(raw);
            return bkv_fail(e, BKV_NOMEM, "%s: out of memory reading blocks", t->name);
        }
        cb->data = raw;
        cb->len = len;
        b->own = cb;
    }
    if (bkv_block_parse(&cb->blk, raw ? raw : stored, len) < 0) {
        release_block(t, b);
        return bkv_fail(e, BKV_CORRUPTION, "%s: malformed data block at offset %llu", t->name,
                        (unsigned long long)h.offset);
    }
    b->blk = &cb->blk;
    return BKV_OK;
}

/* Loads the block the index iterator points at: 1 on success, 0 at the
 * end or on an error, -1 when skipping damage and the block was skipped. */
static int load_current(table_iter *ti) {
    drop_block(ti);
    if (!ti->index_it.valid) {
        if (ti->index_it.oom || ti->index_it.corrupt) {
            bkv_err e;
            int rc = ti->index_it.oom ? bkv_fail(&e, BKV_NOMEM, "%s: out of memory reading the index", ti->t->name)
                                      : bkv_fail(&e, BKV_CORRUPTION, "%s: malformed index block", ti->t->name);
            set_error(ti, rc, &e);
        }
        return 0;
    }
    bkv_handle h;
    bkv_err e;
    int rc = decode_handle(ti->t, ti->index_it.val, ti->index_it.vlen, &h, &e);
    if (!rc && (ti->read_flags & BKV_READ_BULK)) {
        rc = load_bulk(ti, h, &e);
    } else if (!rc) {
        readahead_before(ti->t, &ti->ra, h);
        rc = load_block(ti->t, h, bkv_block_iter_restart_ordinal(&ti->index_it), ti->read_flags, &ti->cur, ti->stats,
                        &e);
    }
    if (rc && ti->skips && (rc == BKV_CORRUPTION || rc == BKV_IOERROR)) {
        skip_block(ti, &e);
        return -1;
    }
    if (rc) {
        set_error(ti, rc, &e);
        return 0;
    }
    bkv_block_iter_init(&ti->it, ti->cur.blk);
    ti->have_block = 1;
    return 1;
}

/* Loads the block the index points at, or skipping damage the first
 * readable one from there in direction dir, positioned at its first
 * (dir > 0) or last entry. 1 when one was loaded. */
static int load_usable(table_iter *ti, int dir) {
    int r;
    while ((r = load_current(ti)) < 0) {
        if (dir > 0) bkv_block_iter_next(&ti->index_it);
        else bkv_block_iter_prev(&ti->index_it);
    }
    if (r > 0 && dir > 0) bkv_block_iter_first(&ti->it);
    else if (r > 0) bkv_block_iter_last(&ti->it);
    return r;
}

/* After a move inside the block: checks for damage and, when the block is
 * exhausted, moves to the neighbouring block in direction dir. */
static void settle(table_iter *ti, int dir) {
    while (ti->have_block) {
        if (ti->it.corrupt && ti->skips) {
            bkv_err e;
            bkv_fail(&e, BKV_CORRUPTION, "%s: malformed entry in a data block", ti->t->name);
            skip_block(ti, &e);
            if (dir > 0) bkv_block_iter_next(&ti->index_it);
            else bkv_block_iter_prev(&ti->index_it);
            load_usable(ti, dir);
            continue;
        }
        if (ti->it.oom || ti->it.corrupt) {
            bkv_err e;
            int rc = ti->it.oom ? bkv_fail(&e, BKV_NOMEM, "%s: out of memory reading a data block", ti->t->name)
                                : bkv_fail(&e, BKV_CORRUPTION, "%s: malformed entry in a data block", ti->t->name);
            set_error(ti, rc, &e);
            return;
        }
        if (ti->it.valid) return;
        if (dir > 0) bkv_block_iter_next(&ti->index_it);
        else bkv_block_iter_prev(&ti->index_it);
        if (load_usable(ti, dir) <= 0) return;
        if (dir > 0) {
            int64_t i = bkv_block_iter_restart_ordinal(&ti->index_it);
            bkv_handle next;
            if (i >= 0 && (uint64_t)i + 1 < ti->t->index.num_restarts &&
                !index_handle_at(ti->t, (uint32_t)i + 1, &next, NULL))
                REQUEST_MAPPED_BLOCK(ti->t, next);
        }
    }
}

static int ti_valid(bkv_ikey_iter *b) {
    table_iter *ti = (table_iter *)b;
    return ti->have_block && ti->it.valid;
}

static void ti_first(bkv_ikey_iter *b) {
    table_iter *ti = (table_iter *)b;
    if (ti->rc) return;
    bkv_block_iter_first(&ti->index_it);
    load_usable(ti, 1);
    settle(ti, 1);
}

static void ti_last(bkv_ikey_iter *b) {
    table_iter *ti = (table_iter *)b;
    if (ti->rc) return;
    bkv_block_iter_last(&ti->index_it);
    load_usable(ti, -1);
    settle(ti, -1);
}

static void ti_seek(bkv_ikey_iter *b, const uint8_t *k, size_t n) {
    table_iter *ti = (table_iter *)b;
    if (ti->rc) return;
    index_seek(ti->t, &ti->index_it, k, n);
    int r = load_current(ti);
    if (r > 0) bkv_block_iter_seek(&ti->it, k, n, ikey_cmp);
    else if (r < 0) { /* the block holding k was skipped: on from the next */
        bkv_block_iter_next(&ti->index_it);
        load_usable(ti, 1);
    }
    settle(ti, 1);
}

static void ti_next(bkv_ikey_iter *b) {
    table_iter *ti = (table_iter *)b;
    bkv_block_iter_next(&ti->it);
    settle(ti, 1);
}

static void ti_prev(bkv_ikey_iter *b) {
    table_iter *ti = (table_iter *)b;
    bkv_block_iter_prev(&ti->it);
    settle(ti, -1);
}

static const uint8_t *ti_key(bkv_ikey_iter *b, size_t *len) {
    table_iter *ti = (table_iter *)b;
    const uint8_t *k = visible_key(ti->t, &ti->it.key, &ti->key);
    if (!k) {
        bkv_err e;
        set_error(ti, bkv_fail(&e, BKV_NOMEM, "%s: out of memory reading a key", ti->t->name), &e);
        *len = 0;
        return (const uint8_t *)"";
    }
    *len = ti->it.key.len;
    return k;
}

static const uint8_t *ti_value(bkv_ikey_iter *b, size_t *len) {
    table_iter *ti = (table_iter *)b;
    *len = ti->it.vlen;
    return ti->it.val;
}

static int ti_status(bkv_ikey_iter *b, bkv_err *e) {
    table_iter *ti = (table_iter *)b;
    if (ti->rc && e) *e = ti->err;
    return ti->rc;
}

static void ti_destroy(bkv_ikey_iter *b) {
    table_iter *ti = (table_iter *)b;
    drop_block(ti);
    bkv_block_iter_free(&ti->index_it);
    bkv_buf_free(&ti->key);
    free(ti->chunk.buf);
    free(ti);
}

static const bkv_ikey_iter_ops table_iter_ops = {ti_valid, ti_first, ti_last, ti_seek, ti_next,
                                             ti_prev,  ti_key,   ti_value, ti_status, ti_destroy};

void bkv_table_iter_skip_damage(bkv_ikey_iter *it, bkv_skip_log *log) {
    table_iter *ti = (table_iter *)it;
    ti->skips = log;
    if (!ti->rc || (ti->rc != BKV_CORRUPTION && ti->rc != BKV_IOERROR)) return;
    /* An index that cannot be read: the whole table is skipped. */
    const bkv_table_props *p = &ti->t->props;
    if (p->smallest && p->largest)
        bkv_skip_log_add(log, p->smallest, user_len(p->smallest_len), 1, p->largest, user_len(p->largest_len), &ti->err);
    else log->incomplete = 1;
    ti->rc = 0;
}

int bkv_table_iter_new(bkv_table *t, int read_flags, bkv_table_stats *stats, bkv_ikey_iter **out) {
    table_iter *ti = calloc(1, sizeof *ti);
    if (!ti) return BKV_NOMEM;
    ti->base.ops = &table_iter_ops;
    ti->t = t;
    ti->read_flags = read_flags;
    ti->stats = stats;
    ti->ra = (readahead){UINT64_MAX, 0, 0, bkv_table_data_end(t), 0};
    /* An index that cannot be read makes an iterator that reports why. */
    static const bkv_block no_index;
    ti->rc = load_index(t, &ti->err);
    bkv_block_iter_init(&ti->index_it, ti->rc ? &no_index : &t->index);
    bkv_buf_init(&ti->key);
    *out = &ti->base;
    return BKV_OK;
}

/* ---- auxiliary blocks ---- */

const char *bkv_table_path(const bkv_table *t) { return t->name; }

int bkv_table_property(const bkv_table *t, const char *name, uint64_t *v) {
    for (size_t i = 0; i < t->naux_props; i++)
        if (strcmp(t->aux_props[i].name, name) == 0) {
            *v = t->aux_props[i].v;
            return 1;
        }
    return 0;
}

int bkv_table_aux_handle(const bkv_table *t, const char *name, bkv_handle *h) {
    char key[BKV_TABLE_PROPERTY_MAX + 8];
    snprintf(key, sizeof key, "%s.offset", name);
    int has = bkv_table_property(t, key, &h->offset);
    snprintf(key, sizeof key, "%s.size", name);
    return has && bkv_table_property(t, key, &h->size) && h->size > 0;
}

int bkv_table_holds_block(const bkv_table *t, bkv_handle h) { return block_in_file(t, h); }

int bkv_table_read_block(bkv_table *t, bkv_handle h, uint8_t **data, size_t *len, bkv_err *e) {
    *data = NULL;
    if (!block_in_file(t, h))
        return bkv_fail(e, BKV_CORRUPTION, "%s: block at offset %llu runs past the end of the file", t->name,
                        (unsigned long long)h.offset);
    return bkv_read_block(t->file, t->name, h, data, len, e);
}

/* A block a layer above reads through the block cache. */
typedef struct cached_aux {
    uint8_t *data;
    size_t len;
} cached_aux;

static void delete_aux(uint64_t k1, uint64_t k2, void *v) {
    (void)k1, (void)k2;
    cached_aux *r = v;
    free(r->data);
    free(r);
}

static int bit_verified(atomic_uchar *bits, uint32_t i) {
    return atomic_load_explicit(&bits[i / 8], memory_order_acquire) >> (i % 8) & 1;
}

const uint8_t *bkv_table_aux_block(bkv_table *t, bkv_handle h, atomic_uchar *verified, uint32_t bit, int read_flags,
                                   bkv_table_aux_ref *ref) {
    *ref = (bkv_table_aux_ref){NULL, NULL};
    if (!block_in_file(t, h)) return NULL;
    const uint8_t *map = bkv_file_mapped(t->file);
    int verify_all = read_flags & BKV_READ_VERIFY_ALL;
    if (map && map[h.offset + h.size] == BKV_COMPRESS_NONE) {
        if (verify_all || !bit_verified(verified, bit)) {
            if (bkv_block_verify(map + h.offset, h, t->name, NULL)) return NULL;
            atomic_fetch_or_explicit(&verified[bit / 8], (unsigned char)(1u << (bit % 8)), memory_order_release);
        }
        return map + h.offset;
    }
    if (t->cache && !verify_all && (ref->entry = bkv_cache_lookup(t->cache, t->number, h.offset)))
        return ((cached_aux *)bkv_cache_value(ref->entry))->data;
    cached_aux *r = calloc(1, sizeof *r);
    if (!r || bkv_read_block(t->file, t->name, h, &r->data, &r->len, NULL) || r->len != h.size) {
        if (r) free(r->data);
        free(r);
        return NULL;
    }
    if (t->cache && (read_flags & BKV_READ_FILL_CACHE) &&
        (ref->entry = bkv_cache_insert(t->cache, t->number, h.offset, r, r->len + sizeof *r, delete_aux)))
        return r->data;
    ref->own = r;
    return r->data;
}

void bkv_table_aux_release(bkv_table *t, bkv_table_aux_ref *ref) {
    if (ref->entry) bkv_cache_release(t->cache, ref->entry);
    if (ref->own) delete_aux(0, 0, ref->own);
    *ref = (bkv_table_aux_ref){NULL, NULL};
}

int bkv_table_is_mapped(const bkv_table *t) { return bkv_file_mapped(t->file) != NULL; }

void bkv_table_prefetch_bytes(bkv_table *t, uint64_t offset, uint64_t len) { bkv_file_prefetch(t->file, offset, len); }

int bkv_table_byte_resident(bkv_table *t, uint64_t offset) { return bkv_file_resident(t->file, offset, 1); }

void bkv_table_prefetch_index(bkv_table *t) {
    if (bkv_file_mapped(t->file) && !atomic_load_explicit(&t->index_ready, memory_order_relaxed))
        bkv_file_prefetch(t->file, t->index_handle.offset, t->index_handle.size + BKV_BLOCK_TRAILER);
}

int bkv_table_data_block(bkv_table *t, uint32_t i, bkv_handle *h) {
    if (!bkv_file_mapped(t->file) || load_index(t, NULL) || index_handle_at(t, i, h, NULL)) return -1;
    return atomic_load_explicit(&t->verified[i], memory_order_relaxed) ? 1 : 0;
}

uint64_t bkv_table_data_end(const bkv_table *t) {
    return t->props.data_bytes ? t->props.data_bytes : t->index_handle.offset;
}

void bkv_table_count_damage(const bkv_table *t) {
    if (t->stats) atomic_fetch_add_explicit(&t->stats->filter_corrupt, 1, memory_order_relaxed);
}

void *bkv_table_slot(bkv_table *t, void *(*make)(bkv_table *t), void (*destroy)(void *)) {
    void *s = atomic_load_explicit(&t->slot, memory_order_acquire);
    if (s) return s;
    pthread_mutex_lock(&t->index_mu);
    if (!(s = atomic_load_explicit(&t->slot, memory_order_relaxed)) && (s = make(t))) {
        t->slot_destroy = destroy;
        atomic_store_explicit(&t->slot, s, memory_order_release);
    }
    pthread_mutex_unlock(&t->index_mu);
    return s;
}

void *bkv_table_slot_peek(const bkv_table *t) {
    return atomic_load_explicit(&((bkv_table *)t)->slot, memory_order_acquire);
}

void bkv_table_slot_prefetch(const bkv_table *t) { __builtin_prefetch(&t->slot); }
