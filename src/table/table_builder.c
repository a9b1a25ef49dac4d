/* Builds a table in one pass: data blocks, then the key filter over every
 * distinct user key (hashed once here), properties, index and footer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "table/block.h"
#include "table/format.h"
#include "table/table.h"
#include "util/coding.h"
#include "util/hash.h"
#include "util/ikey.h"

struct bkv_table_builder {
    bkv_table_options opts;
    bkv_wfile *file;
    const char *name;
    uint64_t offset;
    bkv_block_builder data, index;
    bkv_buf first_ikey, last_ikey;
    bkv_buf last_prefix;
    int have_prefix;
    bkv_buf compressed;
    bkv_hash *hashes;
    size_t nhashes, hash_cap;
    bkv_table_props props;
    uint64_t min_seq, max_seq;
    int failed;
    /* The collector's properties, written with the table's own. */
    struct extra_prop {
        char name[BKV_TABLE_PROPERTY_MAX + 1];
        uint64_t v;
    } *extra;
    size_t nextra;
    double fpr_keys;           /* sum over key filters of expected rate x keys */
    /* The range filter's keys: each user key's eight bytes after the prefix
     * it shares with the table's first key, and that prefix's length;
     * turned at finish into the eight bytes after the prefix every key of
     * the table shares (bkv_table_range_window). */
    uint64_t *rf_window;
    uint32_t *rf_shared;
    size_t nrf, rf_cap;
    size_t rf_max_len;         /* the longest user key */
};

bkv_table_builder *bkv_table_builder_new(const bkv_table_options *opts, bkv_wfile *file, const char *name) {
    bkv_table_builder *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->opts = *opts;
    b->file = file;
    b->name = name;
    bkv_block_builder_init(&b->data, opts->restart_interval);
    bkv_block_builder_init(&b->index, 1);
    bkv_buf_init(&b->first_ikey);
    bkv_buf_init(&b->last_prefix);
    bkv_buf_init(&b->last_ikey);
    bkv_buf_init(&b->compressed);
    b->props.filter_type = opts->filter_type;
    b->props.compression = opts->compression;
    return b;
}

void bkv_table_builder_free(bkv_table_builder *b) {
    if (!b) return;
    bkv_block_builder_free(&b->data);
    bkv_block_builder_free(&b->index);
    bkv_buf_free(&b->first_ikey);
    bkv_buf_free(&b->last_prefix);
    bkv_buf_free(&b->last_ikey);
    bkv_buf_free(&b->compressed);
    free(b->hashes);
    free(b->rf_window);
    free(b->rf_shared);
    free(b->extra);
    free(b);
}

static int write_raw_block(bkv_table_builder *b, const uint8_t *data, size_t len, int compression,
                           bkv_handle *h, bkv_err *e) {
    if (len > BKV_MAX_BLOCK_SIZE)
        return bkv_fail(e, BKV_INVALID, "%s: a block of %zu bytes is over the %llu a reader accepts", b->name, len,
                        (unsigned long long)BKV_MAX_BLOCK_SIZE);
    int type = bkv_block_compress(compression, data, len, &b->compressed);
    if (type != BKV_COMPRESS_NONE) {
        data = b->compressed.data;
        len = b->compressed.len;
    }
    uint8_t trailer[BKV_BLOCK_TRAILER];
    trailer[0] = (uint8_t)type;
    bkv_put_u64(trailer + 1, bkv_block_checksum(data, len, (uint8_t)type));
    int rc = bkv_file_append(b->file, data, len, e);
    if (!rc) rc = bkv_file_append(b->file, trailer, sizeof trailer, e);
    if (rc) return rc;
    h->offset = b->offset;
    h->size = len;
    b->offset += len + BKV_BLOCK_TRAILER;
    return BKV_OK;
}

static int flush_data_block(bkv_table_builder *b, bkv_err *e) {
    if (bkv_block_builder_empty(&b->data)) return BKV_OK;
    if (bkv_block_builder_finish(&b->data)) return bkv_fail(e, BKV_NOMEM, "%s: out of memory building a block", b->name);
    bkv_handle h;
    int rc = write_raw_block(b, b->data.buf.data, b->data.buf.len, b->opts.compression, &h, e);
    if (rc) return rc;
    b->props.num_data_blocks++;
    const bkv_table_collector *c = b->opts.collector;
    if (c) c->block_done(c->state, (uint32_t)(b->props.num_data_blocks - 1));
    uint8_t hv[20];
    size_t hl = (size_t)(bkv_put_varint64(bkv_put_varint64(hv, h.offset), h.size) - hv);
    /* The index key is the block's last key: the block holds every key in
     * (previous index key, this key]. */
    if (bkv_block_builder_add(&b->index, b->last_ikey.data, b->last_ikey.len, hv, hl))
        return bkv_fail(e, BKV_NOMEM, "%s: out of memory building the index", b->name);
    bkv_block_builder_reset(&b->data);
    return BKV_OK;
}

static int add_hash(bkv_table_builder *b, bkv_hash h, bkv_err *e) {
    if (b->nhashes == b->hash_cap) {
        size_t cap = b->hash_cap ? b->hash_cap * 2 : 1024;
        bkv_hash *grown = realloc(b->hashes, cap * sizeof *grown);
        if (!grown) {
            b->failed = 1;
            return bkv_fail(e, BKV_NOMEM, "%s: out of memory collecting key hashes", b->name);
        }
        b->hashes = grown;
        b->hash_cap = cap;
    }
    b->hashes[b->nhashes++] = h;
    return BKV_OK;
}

int bkv_table_builder_add(bkv_table_builder *b, const uint8_t *ikey, size_t ilen, const uint8_t *val,
                          size_t vlen, bkv_err *e) {
    if (b->failed) return bkv_fail(e, BKV_INVALID, "%s: builder already failed", b->name);
    /* On in release builds too: a table whose keys are out of order would
     * answer gets and seeks wrongly, and one comparison refuses it. */
    if (ilen < BKV_IKEY_TRAILER ||
        (b->last_ikey.len && bkv_ikey_compare(b->last_ikey.data, b->last_ikey.len, ikey, ilen) >= 0)) {
        b->failed = 1;
        return bkv_fail(e, BKV_CORRUPTION, "%s: entry %llu does not follow the one before it in internal-key order",
                        b->name, (unsigned long long)b->props.num_entries);
    }
    const bkv_table_collector *c = b->opts.collector;
    if (c) {
        int rc = c->add(c->state, b, ikey, ilen, val, vlen, e);
        if (rc) {
            b->failed = 1;
            return rc;
        }
    }
    size_t ulen = ilen - BKV_IKEY_TRAILER;
    int new_user_key = b->last_ikey.len == 0 ||
        bkv_user_key_compare(b->last_ikey.data, b->last_ikey.len - BKV_IKEY_TRAILER, ikey, ulen) != 0;
    b->props.num_keys += (uint64_t)new_user_key;
    if (new_user_key && b->opts.range_filter_bits > 0) {
        if (b->nrf == b->rf_cap) {
            size_t cap = b->rf_cap ? 2 * b->rf_cap : 1024;
            uint64_t *w = realloc(b->rf_window, cap * sizeof *w);
            if (w) b->rf_window = w;
            uint32_t *sh = w ? realloc(b->rf_shared, cap * sizeof *sh) : NULL;
            if (!sh) {
                b->failed = 1;
                return bkv_fail(e, BKV_NOMEM, "%s: out of memory collecting range filter keys", b->name);
            }
            b->rf_shared = sh;
            b->rf_cap = cap;
        }
        const uint8_t *first = b->props.num_entries ? b->first_ikey.data : ikey;
        size_t flen = b->props.num_entries ? b->first_ikey.len - BKV_IKEY_TRAILER : ulen, shared = 0;
        while (shared < flen && shared < ulen && first[shared] == ikey[shared]) shared++;
        b->rf_shared[b->nrf] = (uint32_t)shared; /* keys are at most BKV_MAX_KEY_SIZE */
        if (ulen > b->rf_max_len) b->rf_max_len = ulen;
        b->rf_window[b->nrf++] = bkv_key_prefix64(ikey + shared, ulen - shared);
    }
    if (new_user_key && b->opts.filter_type != 0) {
        int rc = add_hash(b, bkv_hash_bytes(ikey, ulen), e);
        size_t plen = b->opts.prefix_extractor ? b->opts.prefix_extractor(ikey, ulen) : SIZE_MAX;
        if (!rc && plen <= ulen &&
            !(b->have_prefix && b->last_prefix.len == plen && memcmp(b->last_prefix.data, ikey, plen) == 0)) {
            rc = add_hash(b, bkv_hash_bytes_seeded(ikey, plen, BKV_PREFIX_SEED), e);
            if (!rc && bkv_buf_set(&b->last_prefix, ikey, plen)) rc = bkv_fail(e, BKV_NOMEM, "%s: out of memory", b->name);
            b->have_prefix = 1;
        }
        if (rc) {
            b->failed = 1;
            return rc;
        }
    }
    if (bkv_block_builder_add(&b->data, ikey, ilen, val, vlen) ||
        (b->props.num_entries == 0 && bkv_buf_set(&b->first_ikey, ikey, ilen)) ||
        bkv_buf_set(&b->last_ikey, ikey, ilen)) {
        b->failed = 1;
        return bkv_fail(e, BKV_NOMEM, "%s: out of memory adding an entry", b->name);
    }
    uint64_t seq = bkv_ikey_seq(ikey, ilen);
    if (b->props.num_entries == 0 || seq < b->min_seq) b->min_seq = seq;
    if (seq > b->max_seq) b->max_seq = seq;
    b->props.num_entries++;
    if (bkv_ikey_type(ikey, ilen) == BKV_TYPE_DELETION) b->props.num_deletions++;
    b->props.raw_key_bytes += ilen;
    b->props.raw_value_bytes += vlen;
    if (bkv_block_builder_size_estimate(&b->data) >= b->opts.block_size) {
        int rc = flush_data_block(b, e);
        if (rc) b->failed = 1;
        return rc;
    }
    return BKV_OK;
}

/* Builds a filter over n hashes and writes it as a block of its own. */
static int write_filter(bkv_table_builder *b, const bkv_filter_spec *spec, const bkv_hash *hashes, size_t n,
                        bkv_handle *h, bkv_err *e) {
    bkv_filter *flt;
    int rc = bkv_filter_build(spec, hashes, n, &flt);
    if (rc) return bkv_fail(e, rc, "%s: cannot build filter: %s", b->name, bkv_strerror(rc));
    size_t len = bkv_filter_encoded_size(flt);
    uint8_t *enc = malloc(len);
    if (!enc) {
        bkv_filter_destroy(flt);
        return bkv_fail(e, BKV_NOMEM, "%s: out of memory encoding filter", b->name);
    }
    bkv_filter_encode(flt, enc, len);
    bkv_filter_info fi;
    bkv_filter_get_info(flt, &fi);
    b->fpr_keys += fi.expected_fpr * (double)n;
    bkv_filter_destroy(flt);
    rc = write_raw_block(b, enc, len, BKV_COMPRESS_NONE, h, e);
    free(enc);
    if (!rc) b->props.filter_bytes += len;
    return rc;
}

/* One filter per partition of about filter_partition_size bytes, each over
 * the hashes bkv_filter_partition_of sends it, then the partition index
 * that names them (docs/format.md "Filter partition index"). */
static int write_partitioned_filter(bkv_table_builder *b, const bkv_filter_spec *spec, bkv_handle *index,
                                    bkv_err *e) {
    double bytes = (double)b->nhashes * spec->bits_per_key / 8;
    double want = bytes / (double)b->opts.filter_partition_size;
    uint32_t n = want < 1 ? 1 : want >= BKV_FILTER_PARTITIONS_MAX ? BKV_FILTER_PARTITIONS_MAX : (uint32_t)ceil(want);
    size_t ilen = BKV_FILTER_PARTITION_HEADER + (size_t)n * BKV_FILTER_PARTITION_ENTRY;
    uint32_t *start = calloc((size_t)n + 1, sizeof *start);
    bkv_hash *sorted = malloc((b->nhashes ? b->nhashes : 1) * sizeof *sorted);
    uint8_t *ix = malloc(ilen);
    int rc = BKV_OK;
    if (!start || !sorted || !ix) {
        rc = bkv_fail(e, BKV_NOMEM, "%s: out of memory partitioning the filter", b->name);
        goto out;
    }
    /* A counting sort by partition: start[p] ends up where partition p begins. */
    for (size_t i = 0; i < b->nhashes; i++) start[bkv_filter_partition_of(b->hashes[i], n) + 1]++;
    for (uint32_t p = 0; p < n; p++) start[p + 1] += start[p];
    for (size_t i = 0; i < b->nhashes; i++) sorted[start[bkv_filter_partition_of(b->hashes[i], n)]++] = b->hashes[i];
    for (uint32_t p = n; p > 0; p--) start[p] = start[p - 1];
    start[0] = 0;
    bkv_put_u32(ix, BKV_FILTER_PARTITION_MAGIC);
    bkv_put_u16(ix + 4, BKV_FILTER_PARTITION_VERSION);
    bkv_put_u16(ix + 6, 0);
    bkv_put_u32(ix + 8, n);
    bkv_put_u32(ix + 12, 0);
    static const uint8_t zeros[64];
    for (uint32_t p = 0; p < n && !rc; p++) {
        /* Each partition starts on a 64-byte boundary, so that probed in
         * place in a mapped file its payload is cache-line aligned. */
        size_t pad = (size_t)(-b->offset & 63);
        if (pad && (rc = bkv_file_append(b->file, zeros, pad, e))) break;
        b->offset += pad;
        bkv_handle h;
        rc = write_filter(b, spec, sorted + start[p], start[p + 1] - start[p], &h, e);
        uint8_t *entry = ix + BKV_FILTER_PARTITION_HEADER + (size_t)p * BKV_FILTER_PARTITION_ENTRY;
        bkv_put_u64(entry, h.offset);
        bkv_put_u64(entry + 8, h.size);
    }
    if (!rc) rc = write_raw_block(b, ix, ilen, BKV_COMPRESS_NONE, index, e);
    b->props.filter_partitions = n;
out:
    free(start);
    free(sorted);
    free(ix);
    return rc;
}

/* A property as the block holds it: its name, and its value's bytes (a
 * key, or when val is NULL the varint in buf: sorting moves the entries). */
typedef struct prop {
    const char *name;
    const uint8_t *val;
    size_t len;
    uint8_t buf[10];
} prop;

static void set_prop(prop *p, const char *name, uint64_t v) {
    p->name = name;
    p->val = NULL;
    p->len = (size_t)(bkv_put_varint64(p->buf, v) - p->buf);
}

static int prop_order(const void *a, const void *b) { return strcmp(((const prop *)a)->name, ((const prop *)b)->name); }

/* The properties block: the table's own and its collector's, in name
 * order (it is an ordinary block); a name given twice is refused. */
static int write_props(bkv_table_builder *b, bkv_handle *h, bkv_err *e) {
    enum { OWN_MAX = 20 };
    prop *all = malloc((OWN_MAX + b->nextra) * sizeof *all);
    if (!all) return bkv_fail(e, BKV_NOMEM, "%s: out of memory building the properties", b->name);
    size_t n = 0;
    const bkv_table_props *tp = &b->props;
    set_prop(&all[n++], "compression", (uint64_t)tp->compression);
    set_prop(&all[n++], "creation.time", tp->creation_time);
    set_prop(&all[n++], "data.bytes", tp->data_bytes);
    set_prop(&all[n++], "filter.bytes", tp->filter_bytes);
    if (b->opts.filter_type) set_prop(&all[n++], "filter.fpr.ppb", tp->filter_fpr_ppb);
    if (tp->filter_partitions) set_prop(&all[n++], "filter.partitions", tp->filter_partitions);
    set_prop(&all[n++], "filter.type", (uint64_t)tp->filter_type);
    all[n++] = (prop){"key.largest", b->last_ikey.data, b->last_ikey.len, {0}};
    all[n++] = (prop){"key.smallest", b->first_ikey.data, b->first_ikey.len, {0}};
    set_prop(&all[n++], "num.data.blocks", tp->num_data_blocks);
    set_prop(&all[n++], "num.deletions", tp->num_deletions);
    set_prop(&all[n++], "num.entries", tp->num_entries);
    set_prop(&all[n++], "num.keys", tp->num_keys);
    if (tp->range_filter_bytes) {
        set_prop(&all[n++], "range.filter.offset", tp->range_filter_offset);
        set_prop(&all[n++], "range.filter.size", tp->range_filter_bytes);
        set_prop(&all[n++], "range.filter.skip", tp->range_filter_skip);
    }
    set_prop(&all[n++], "raw.key.bytes", tp->raw_key_bytes);
    set_prop(&all[n++], "raw.value.bytes", tp->raw_value_bytes);
    for (size_t i = 0; i < b->nextra; i++) set_prop(&all[n++], b->extra[i].name, b->extra[i].v);
    qsort(all, n, sizeof *all, prop_order);
    int rc = BKV_OK;
    for (size_t i = 1; i < n && !rc; i++)
        if (strcmp(all[i - 1].name, all[i].name) == 0)
            rc = bkv_fail(e, BKV_INVALID, "%s: property %s is given twice", b->name, all[i].name);
    bkv_block_builder blk;
    bkv_block_builder_init(&blk, 1);
    for (size_t i = 0; i < n && !rc; i++)
        if (bkv_block_builder_add(&blk, (const uint8_t *)all[i].name, strlen(all[i].name),
                                  all[i].val ? all[i].val : all[i].buf, all[i].len))
            rc = bkv_fail(e, BKV_NOMEM, "%s: out of memory building the properties", b->name);
    if (!rc && bkv_block_builder_finish(&blk))
        rc = bkv_fail(e, BKV_NOMEM, "%s: out of memory building the properties", b->name);
    if (!rc) rc = write_raw_block(b, blk.buf.data, blk.buf.len, BKV_COMPRESS_NONE, h, e);
    bkv_block_builder_free(&blk);
    free(all);
    return rc;
}

int bkv_table_builder_finish(bkv_table_builder *b, bkv_err *e) {
    /* A table missing the entry that failed must never be written whole. */
    if (b->failed) return bkv_fail(e, BKV_INVALID, "%s: builder already failed", b->name);
    int rc = flush_data_block(b, e);
    if (rc) return rc;
    b->props.data_bytes = b->offset;
    bkv_footer f = {.version = BKV_TABLE_VERSION};

    if (b->opts.filter_type != 0) {
        bkv_filter_spec spec = {.type = b->opts.filter_type, .bits_per_key = b->opts.bits_per_key};
        rc = b->opts.filter_partition_size ? write_partitioned_filter(b, &spec, &f.filter, e)
                                           : write_filter(b, &spec, b->hashes, b->nhashes, &f.filter, e);
        if (rc) return rc;
        if (b->opts.filter_partition_size) f.version = BKV_TABLE_VERSION_PARTITIONED;
        b->props.filter_fpr_ppb = b->nhashes ? (uint64_t)(1e9 * b->fpr_keys / (double)b->nhashes + 0.5) : 0;
    }

    if (b->opts.collector && (rc = b->opts.collector->finish(b->opts.collector->state, b, e))) return rc;

    if (b->opts.range_filter_bits > 0) {
        /* The window: eight bytes from skip, past the prefix every key
         * shares but no further than the longest key's last eight (so that
         * a range of L keys spans L windows, not L x 256 per byte skipped
         * too far). Each key's window: up to its own (longer) shared
         * prefix, the first key's bytes, then its own. */
        const uint8_t *first = b->first_ikey.data;
        size_t flen = b->first_ikey.len ? b->first_ikey.len - BKV_IKEY_TRAILER : 0;
        size_t skip = bkv_table_shared_prefix(first, flen, b->last_ikey.data,
                                              b->last_ikey.len ? b->last_ikey.len - BKV_IKEY_TRAILER : 0);
        if (b->rf_max_len < skip + 8) skip = b->rf_max_len > 8 ? b->rf_max_len - 8 : 0;
        b->props.range_filter_skip = skip;
        for (size_t i = 0; i < b->nrf; i++) {
            uint64_t w = 0;
            for (size_t j = 0; j < 8; j++) {
                size_t pos = skip + j;
                uint64_t byte = pos < b->rf_shared[i] ? first[pos] : (b->rf_window[i] >> (56 - 8 * (pos - b->rf_shared[i]))) & 0xff;
                w = w << 8 | byte;
            }
            b->rf_window[i] = w;
        }
        bkv_filter *rf;
        rc = bkv_filter_build_range(b->rf_window, b->nrf, b->opts.range_filter_bits, (uint32_t)b->props.num_keys, &rf);
        if (rc) return bkv_fail(e, rc, "%s: cannot build the range filter", b->name);
        size_t len = bkv_filter_encoded_size(rf);
        uint8_t *enc = malloc(len);
        rc = enc && bkv_filter_encode(rf, enc, len) == BKV_OK ? BKV_OK : BKV_NOMEM;
        bkv_filter_destroy(rf);
        bkv_handle rh;
        rc = rc ? bkv_fail(e, rc, "%s: out of memory encoding the range filter", b->name)
                : write_raw_block(b, enc, len, BKV_COMPRESS_NONE, &rh, e);
        free(enc);
        if (rc) return rc;
        b->props.range_filter_offset = rh.offset;
        b->props.range_filter_bytes = rh.size;
    }

    b->props.creation_time = (uint64_t)time(NULL);
    if ((rc = write_props(b, &f.props, e))) return rc;

    if (bkv_block_builder_finish(&b->index)) return bkv_fail(e, BKV_NOMEM, "%s: out of memory building the index", b->name);
    rc = write_raw_block(b, b->index.buf.data, b->index.buf.len, BKV_COMPRESS_NONE, &f.index, e);
    if (rc) return rc;
    uint8_t footer[BKV_FOOTER_LEN];
    bkv_footer_encode(&f, footer);
    rc = bkv_file_append(b->file, footer, sizeof footer, e);
    if (rc) return rc;
    b->offset += BKV_FOOTER_LEN;
    return BKV_OK;
}

uint64_t bkv_table_builder_file_size(const bkv_table_builder *b) { return b->offset; }
uint64_t bkv_table_builder_entries(const bkv_table_builder *b) { return b->props.num_entries; }

void bkv_table_builder_key_range(const bkv_table_builder *b, const uint8_t **smallest, size_t *slen,
                                 const uint8_t **largest, size_t *llen) {
    *smallest = b->first_ikey.data;
    *slen = b->first_ikey.len;
    *largest = b->last_ikey.data;
    *llen = b->last_ikey.len;
}

void bkv_table_builder_seq_range(const bkv_table_builder *b, uint64_t *lo, uint64_t *hi) {
    *lo = b->min_seq;
    *hi = b->max_seq;
}

uint64_t bkv_table_builder_estimated_size(const bkv_table_builder *b) {
    const bkv_table_collector *c = b->opts.collector;
    return b->offset + bkv_block_builder_size_estimate(&b->data) + b->nhashes * 10 / 8 +
           (c ? c->estimate(c->state) : 0);
}

uint32_t bkv_table_builder_data_blocks(const bkv_table_builder *b) { return (uint32_t)b->props.num_data_blocks; }

int bkv_table_builder_end_block(bkv_table_builder *b, bkv_err *e) {
    int rc = flush_data_block(b, e);
    if (rc) b->failed = 1;
    return rc;
}

int bkv_table_builder_write_block(bkv_table_builder *b, const uint8_t *data, size_t len, bkv_handle *h, bkv_err *e) {
    int rc = write_raw_block(b, data, len, BKV_COMPRESS_NONE, h, e);
    if (rc) b->failed = 1;
    return rc;
}

int bkv_table_builder_set_property(bkv_table_builder *b, const char *name, uint64_t v, bkv_err *e) {
    size_t len = strlen(name);
    if (len == 0 || len > BKV_TABLE_PROPERTY_MAX)
        return bkv_fail(e, BKV_INVALID, "%s: a property name must have 1 to %d bytes", b->name, BKV_TABLE_PROPERTY_MAX);
    struct extra_prop *grown = realloc(b->extra, (b->nextra + 1) * sizeof *grown);
    if (!grown) return bkv_fail(e, BKV_NOMEM, "%s: out of memory recording property %s", b->name, name);
    b->extra = grown;
    memcpy(grown[b->nextra].name, name, len + 1);
    grown[b->nextra++].v = v;
    return BKV_OK;
}

const char *bkv_table_builder_name(const bkv_table_builder *b) { return b->name; }
