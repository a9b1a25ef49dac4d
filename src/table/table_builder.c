/* Builds a table in one pass: data blocks, then the key filter over every
 * distinct user key (hashed once here), properties, index and footer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "filter/value_tags.h"
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
    bkv_vf_set vf;             /* value filters (opts.value_filter) */
    uint32_t part_entries;     /* entries in the open partition */
    uint64_t *term_hashes;     /* every term's hash, for the summary (paged layout) */
    size_t nterm_hashes, term_hash_cap;
    int term_hashes_lost;      /* out of memory collecting them */
    /* Value tags (whole-value indexes only): a u16 per entry and a u32
     * entry count per data block, written after the value filters. They
     * are optional, so running out of memory drops them, not the table. */
    int tagging;
    bkv_buf tags, block_counts;
    uint64_t block_first_entry; /* num_entries when the open data block began */
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
    if (opts->value_filter) b->vf.params = *opts->value_filter;
    b->tagging = opts->value_filter && !opts->value_terms;
    bkv_buf_init(&b->tags);
    bkv_buf_init(&b->block_counts);
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
    free(b->term_hashes);
    bkv_buf_free(&b->tags);
    bkv_buf_free(&b->block_counts);
    bkv_vf_set_free(&b->vf);
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
    if (b->vf.nparts) b->vf.parts[b->vf.nparts - 1].last_block = (uint32_t)(b->props.num_data_blocks - 1);
    if (b->tagging && bkv_buf_put_u32(&b->block_counts, (uint32_t)(b->props.num_entries - b->block_first_entry)))
        b->tagging = 0;
    b->block_first_entry = b->props.num_entries;
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

typedef struct term_sink {
    bkv_table_builder *b;
    uint64_t *bits;
} term_sink;

static void keep_term_hash(bkv_table_builder *b, uint64_t h) {
    if (b->nterm_hashes == b->term_hash_cap) {
        size_t cap = b->term_hash_cap ? b->term_hash_cap * 2 : 1024;
        uint64_t *grown = b->term_hashes_lost ? NULL : realloc(b->term_hashes, cap * sizeof *grown);
        if (!grown) {
            b->term_hashes_lost = 1;
            return;
        }
        b->term_hashes = grown;
        b->term_hash_cap = cap;
    }
    b->term_hashes[b->nterm_hashes++] = h;
}

static void add_term_hash(term_sink *ts, uint64_t h) {
    bkv_table_builder *b = ts->b;
    bkv_vf_probe pr;
    bkv_vf_probe_from_hash(&pr, &b->vf.params, h);
    bkv_vf_insert(ts->bits, &pr);
    b->vf.parts[b->vf.nparts - 1].terms++;
    if (b->vf.params.summary_bits) keep_term_hash(b, h);
}

static void add_term(void *ctx, const void *term, size_t len) {
    term_sink *ts = ctx;
    add_term_hash(ts, bkv_vf_term_hash(&ts->b->vf.params, term, len));
}

static void add_tag(bkv_table_builder *b, uint16_t tag) {
    uint8_t le[2];
    bkv_put_u16(le, tag);
    if (b->tagging && bkv_buf_append(&b->tags, le, 2)) b->tagging = 0;
}

/* Partitions end on a block boundary: a full partition ends its block
 * early, so a search scans exactly the blocks of the partitions that may
 * hold the value. */
static int add_value_terms(bkv_table_builder *b, unsigned type, const uint8_t *val, size_t vlen, bkv_err *e) {
    uint32_t limit = b->vf.params.partition_entries;
    if (b->vf.nparts == 0 || (limit && b->part_entries >= limit)) {
        int rc = flush_data_block(b, e);
        if (!rc && bkv_vf_set_add_part(&b->vf, (uint32_t)b->props.num_data_blocks))
            rc = bkv_fail(e, BKV_NOMEM, "%s: out of memory building value filters", b->name);
        if (rc) return rc;
        b->vf.parts[b->vf.nparts - 1].offset = b->offset; /* where the block flushed above ended */
        b->part_entries = 0;
    }
    b->part_entries++;
    b->vf.parts[b->vf.nparts - 1].entries++;
    if (type != BKV_TYPE_VALUE) {
        add_tag(b, 0);
        return BKV_OK;
    }
    term_sink ts = {b, bkv_vf_part_bits(&b->vf, b->vf.nparts - 1)};
    if (b->opts.value_terms) {
        b->opts.value_terms(b->opts.value_terms_arg, val, vlen, add_term, &ts);
        return BKV_OK;
    }
    uint64_t h = bkv_vf_term_hash(&b->vf.params, val, vlen);
    add_term_hash(&ts, h);
    add_tag(b, bkv_vt_tag(h));
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
    if (b->opts.value_filter) {
        int rc = add_value_terms(b, bkv_ikey_type(ikey, ilen), val, vlen, e);
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

static int put_prop(bkv_block_builder *blk, const char *name, uint64_t v) {
    uint8_t buf[10];
    size_t n = (size_t)(bkv_put_varint64(buf, v) - buf);
    return bkv_block_builder_add(blk, (const uint8_t *)name, strlen(name), buf, n);
}

static int write_value_filters(bkv_table_builder *b, bkv_handle *vh, bkv_err *e) {
    bkv_buf enc;
    bkv_buf_init(&enc);
    int rc = bkv_vf_encode(&b->vf, &enc) ? bkv_fail(e, BKV_NOMEM, "%s: out of memory encoding value filters", b->name)
                                         : write_raw_block(b, enc.data, enc.len, BKV_COMPRESS_NONE, vh, e);
    bkv_buf_free(&enc);
    return rc;
}

/* Sorts h[0, n) and keeps each value once, in h; the count kept. Two
 * radix passes of 8 bits, the first over all of h into tmp, the second
 * within each of its 256 runs (small enough to stay in cache) back into
 * h, then insertion within runs of a few: every flush and compaction pays
 * this. One pass into 65,536 buckets, its writes scattered over the whole
 * array, measured 25 against 20 ns an entry at a table's 137,000. */
static size_t sort_unique(uint64_t *h, size_t n, uint64_t *tmp) {
    size_t start[257] = {0}, at[256];
    for (size_t i = 0; i < n; i++) start[(h[i] >> 56) + 1]++;
    for (size_t b = 0; b < 256; b++) start[b + 1] += start[b];
    memcpy(at, start, sizeof at);
    for (size_t i = 0; i < n; i++) tmp[at[h[i] >> 56]++] = h[i];
    size_t out = 0; /* h[0, out) is done; out never passes the run being sorted */
    for (size_t b = 0; b < 256; b++) {
        size_t lo = start[b], hi = start[b + 1], sub[257] = {0}, pos[256];
        for (size_t i = lo; i < hi; i++) sub[(tmp[i] >> 48 & 255) + 1]++;
        for (size_t s = 0; s < 256; s++) sub[s + 1] += sub[s];
        for (size_t s = 0; s < 256; s++) pos[s] = lo + sub[s];
        for (size_t i = lo; i < hi; i++) h[pos[tmp[i] >> 48 & 255]++] = tmp[i];
        for (size_t s = 0; s < 256; s++) {
            size_t a = lo + sub[s], z = lo + sub[s + 1];
            for (size_t i = a + 1; i < z; i++)
                for (size_t j = i; j > a && h[j - 1] > h[j]; j--) {
                    uint64_t x = h[j];
                    h[j] = h[j - 1];
                    h[j - 1] = x;
                }
            for (size_t i = a; i < z; i++)
                if (out == 0 || h[out - 1] != h[i]) h[out++] = h[i];
        }
    }
    return out;
}

/* The summary: a Ribbon filter answering "maybe" for about one absent
 * term in 2^summary_bits (or a blocked Bloom filter of the same size),
 * over the table's distinct terms; *out NULL when there is none (no
 * terms, or memory ran short: the summary only spares searches the rows,
 * so the table is written without it). */
static void build_summary(bkv_table_builder *b, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (b->term_hashes_lost || b->nterm_hashes == 0) return;
    /* Either filter is sized by the hashes it is given: values repeated in
     * a table would otherwise take the room of distinct ones. */
    uint64_t *tmp = malloc(b->nterm_hashes * sizeof *tmp);
    if (tmp) b->nterm_hashes = sort_unique(b->term_hashes, b->nterm_hashes, tmp);
    free(tmp);
    bkv_filter_spec spec = {.type = BKV_FILTER_RIBBON, .fpr = ldexp(1.0, -(int)b->vf.params.summary_bits),
                            .hash_seed = (uint32_t)b->vf.params.seed};
    if (b->opts.value_summary_cheap)
        spec = (bkv_filter_spec){.type = BKV_CHEAP_SUMMARY_TYPE, .bits_per_key = 1.04 * b->vf.params.summary_bits,
                                 .hash_seed = spec.hash_seed};
    bkv_filter *flt;
    if (bkv_filter_build(&spec, b->term_hashes, b->nterm_hashes, &flt) != BKV_OK) return;
    *len = bkv_filter_encoded_size(flt);
    if ((*out = malloc(*len))) bkv_filter_encode(flt, *out, *len);
    else *len = 0;
    bkv_filter_destroy(flt);
}

/* Version 2 (docs/format.md): the rows (word w of each partition's
 * filter) in blocks of a few KiB at most, so a search reads the blocks of
 * the k rows its term names; then the block naming them. */
static int write_paged_value_filters(bkv_table_builder *b, bkv_handle *vh, bkv_err *e) {
    uint8_t *summary;
    size_t slen;
    build_summary(b, &summary, &slen);
    int rc = BKV_OK;
    uint64_t rows_offset = b->offset;
    uint32_t per_block = bkv_vf_rows_per_block(&b->vf);
    bkv_buf enc;
    bkv_buf_init(&enc);
    for (uint32_t w = 0; !rc && w < bkv_vf_words(&b->vf.params); w += per_block) {
        bkv_handle rh;
        int failed = 0;
        bkv_buf_clear(&enc);
        for (uint32_t r = 0; r < per_block; r++) failed |= bkv_vf_encode_row(&b->vf, w + r, &enc);
        rc = failed ? bkv_fail(e, BKV_NOMEM, "%s: out of memory encoding value filters", b->name)
                    : write_raw_block(b, enc.data, enc.len, BKV_COMPRESS_NONE, &rh, e);
    }
    if (!rc) {
        bkv_buf_clear(&enc);
        rc = bkv_vf_encode_paged(&b->vf, rows_offset, per_block, summary, slen, &enc)
                 ? bkv_fail(e, BKV_NOMEM, "%s: out of memory encoding value filters", b->name)
                 : write_raw_block(b, enc.data, enc.len, BKV_COMPRESS_NONE, vh, e);
    }
    bkv_buf_free(&enc);
    free(summary);
    return rc;
}

/* Value tags (docs/format.md): a block per partition, then their index
 * (*th). Where memory runs short the table gets no index, so no tags. */
static int write_value_tags(bkv_table_builder *b, bkv_handle *th, bkv_err *e) {
    uint32_t n = b->vf.nparts;
    size_t ilen = BKV_VT_HEADER + (size_t)n * BKV_VT_ENTRY;
    uint8_t *ix = malloc(ilen);
    bkv_buf part;
    bkv_buf_init(&part);
    int rc = BKV_OK, lost = !ix;
    const uint8_t *tags = b->tags.data;
    for (uint32_t i = 0; i < n && !rc && !lost; i++) {
        const bkv_vf_part *vp = &b->vf.parts[i];
        size_t nb = (size_t)vp->last_block - vp->first_block + 1;
        bkv_buf_clear(&part);
        lost = bkv_buf_append(&part, b->block_counts.data + 4 * (size_t)vp->first_block, 4 * nb) ||
               bkv_buf_append(&part, tags, 2 * (size_t)vp->entries);
        tags += 2 * (size_t)vp->entries;
        bkv_handle h;
        if (!lost) rc = write_raw_block(b, part.data, part.len, BKV_COMPRESS_NONE, &h, e);
        if (lost || rc) break;
        uint8_t *entry = ix + BKV_VT_HEADER + (size_t)i * BKV_VT_ENTRY;
        bkv_put_u32(entry, vp->first_block);
        bkv_put_u32(entry + 4, (uint32_t)h.size);
        bkv_put_u64(entry + 8, h.offset);
    }
    if (!rc && !lost) {
        bkv_put_u32(ix, BKV_VT_MAGIC);
        bkv_put_u16(ix + 4, BKV_VT_VERSION);
        bkv_put_u16(ix + 6, 0);
        bkv_put_u32(ix + 8, n);
        bkv_put_u32(ix + 12, 0);
        bkv_put_u64(ix + 16, b->vf.params.seed);
        rc = write_raw_block(b, ix, ilen, BKV_COMPRESS_NONE, th, e);
    }
    bkv_buf_free(&part);
    free(ix);
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

    if (b->opts.value_filter) {
        bkv_handle vh;
        rc = b->vf.params.summary_bits ? write_paged_value_filters(b, &vh, e) : write_value_filters(b, &vh, e);
        if (rc) return rc;
        b->props.value_filter_offset = vh.offset;
        b->props.value_filter_bytes = vh.size;
        /* Every entry has its tag and every block its count, or none are written. */
        if (b->tagging && b->vf.nparts && b->tags.len == 2 * b->props.num_entries &&
            b->block_counts.len == 4 * b->props.num_data_blocks) {
            bkv_handle th = {0, 0};
            if ((rc = write_value_tags(b, &th, e))) return rc;
            b->props.value_tags_offset = th.offset;
            b->props.value_tags_bytes = th.size;
        }
    }

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

    /* Properties, in sorted name order (it is an ordinary block). */
    b->props.creation_time = (uint64_t)time(NULL);
    bkv_block_builder props;
    bkv_block_builder_init(&props, 1);
    int oom = put_prop(&props, "compression", (uint64_t)b->props.compression) ||
              put_prop(&props, "creation.time", b->props.creation_time) ||
              put_prop(&props, "data.bytes", b->props.data_bytes) ||
              put_prop(&props, "filter.bytes", b->props.filter_bytes) ||
              (b->opts.filter_type && put_prop(&props, "filter.fpr.ppb", b->props.filter_fpr_ppb)) ||
              (b->props.filter_partitions && put_prop(&props, "filter.partitions", b->props.filter_partitions)) ||
              put_prop(&props, "filter.type", (uint64_t)b->props.filter_type) ||
              bkv_block_builder_add(&props, (const uint8_t *)"key.largest", 11, b->last_ikey.data, b->last_ikey.len) ||
              bkv_block_builder_add(&props, (const uint8_t *)"key.smallest", 12, b->first_ikey.data, b->first_ikey.len) ||
              put_prop(&props, "num.data.blocks", b->props.num_data_blocks) ||
              put_prop(&props, "num.deletions", b->props.num_deletions) ||
              put_prop(&props, "num.entries", b->props.num_entries) ||
              put_prop(&props, "num.keys", b->props.num_keys) ||
              (b->props.range_filter_bytes && (put_prop(&props, "range.filter.offset", b->props.range_filter_offset) ||
                                               put_prop(&props, "range.filter.size", b->props.range_filter_bytes) ||
                                               put_prop(&props, "range.filter.skip", b->props.range_filter_skip))) ||
              put_prop(&props, "raw.key.bytes", b->props.raw_key_bytes) ||
              put_prop(&props, "raw.value.bytes", b->props.raw_value_bytes) ||
              (b->opts.value_filter && (put_prop(&props, "value.filter.offset", b->props.value_filter_offset) ||
                                        put_prop(&props, "value.filter.size", b->props.value_filter_bytes))) ||
              (b->props.value_tags_bytes && (put_prop(&props, "value.tags.offset", b->props.value_tags_offset) ||
                                             put_prop(&props, "value.tags.size", b->props.value_tags_bytes))) ||
              bkv_block_builder_finish(&props);
    rc = oom ? bkv_fail(e, BKV_NOMEM, "%s: out of memory building the properties", b->name)
             : write_raw_block(b, props.buf.data, props.buf.len, BKV_COMPRESS_NONE, &f.props, e);
    bkv_block_builder_free(&props);
    if (rc) return rc;

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
    return b->offset + bkv_block_builder_size_estimate(&b->data) + b->nhashes * 10 / 8 + b->tags.len +
           (uint64_t)b->vf.nparts * (BKV_VF_DIR_ENTRY + b->vf.params.m_bits / 8);
}

void bkv_table_builder_take_value_filters(bkv_table_builder *b, bkv_vf_set *out) {
    *out = b->vf;
    b->vf.nparts = 0;
    b->vf.parts = NULL;
    b->vf.bits = NULL;
}
