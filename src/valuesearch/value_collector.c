/* Value search's blocks of a table, built as the table is written: a
 * value filter per partition of the table's entries (ending data blocks
 * at partition boundaries), the paged layout's rows and summary, and the
 * value tags. The table builder drives it through its collector hook. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/coding.h"
#include "util/ikey.h"
#include "valuesearch/table_values.h"

struct bkv_vs_collector {
    bkv_vs_collector_options opts;
    bkv_table_collector hook;
    bkv_vf_set vf;
    uint32_t part_entries;     /* entries in the open partition */
    uint64_t entries;          /* entries seen */
    uint64_t *term_hashes;     /* every term's hash, for the summary (paged layout) */
    size_t nterm_hashes, term_hash_cap;
    int term_hashes_lost;      /* out of memory collecting them */
    /* Value tags (whole-value indexes only): a u16 per entry and a u32
     * entry count per data block, written after the value filters. They
     * are optional, so running out of memory drops them, not the table. */
    int tagging;
    bkv_buf tags, block_counts;
    uint64_t block_first_entry; /* entries when the open data block began */
};

static void keep_term_hash(bkv_vs_collector *c, uint64_t h) {
    if (c->nterm_hashes == c->term_hash_cap) {
        size_t cap = c->term_hash_cap ? c->term_hash_cap * 2 : 1024;
        uint64_t *grown = c->term_hashes_lost ? NULL : realloc(c->term_hashes, cap * sizeof *grown);
        if (!grown) {
            c->term_hashes_lost = 1;
            return;
        }
        c->term_hashes = grown;
        c->term_hash_cap = cap;
    }
    c->term_hashes[c->nterm_hashes++] = h;
}

typedef struct term_sink {
    bkv_vs_collector *c;
    uint64_t *bits;
} term_sink;

static void add_term_hash(term_sink *ts, uint64_t h) {
    bkv_vs_collector *c = ts->c;
    bkv_vf_probe pr;
    bkv_vf_probe_from_hash(&pr, &c->vf.params, h);
    bkv_vf_insert(ts->bits, &pr);
    c->vf.parts[c->vf.nparts - 1].terms++;
    if (c->vf.params.summary_bits) keep_term_hash(c, h);
}

static void add_term(void *ctx, const void *term, size_t len) {
    term_sink *ts = ctx;
    add_term_hash(ts, bkv_vf_term_hash(&ts->c->vf.params, term, len));
}

static void add_tag(bkv_vs_collector *c, uint16_t tag) {
    uint8_t le[2];
    bkv_put_u16(le, tag);
    if (c->tagging && bkv_buf_append(&c->tags, le, 2)) c->tagging = 0;
}

/* Partitions end on a block boundary: a full partition ends its block
 * early, so a search scans exactly the blocks of the partitions that may
 * hold the value. */
static int collect(void *state, bkv_table_builder *b, const uint8_t *ikey, size_t ilen, const uint8_t *val,
                   size_t vlen, bkv_err *e) {
    bkv_vs_collector *c = state;
    uint32_t limit = c->vf.params.partition_entries;
    if (c->vf.nparts == 0 || (limit && c->part_entries >= limit)) {
        int rc = bkv_table_builder_end_block(b, e);
        if (!rc && bkv_vf_set_add_part(&c->vf, bkv_table_builder_data_blocks(b)))
            rc = bkv_fail(e, BKV_NOMEM, "%s: out of memory building value filters", bkv_table_builder_name(b));
        if (rc) return rc;
        c->vf.parts[c->vf.nparts - 1].offset = bkv_table_builder_file_size(b); /* where the block ended above */
        c->part_entries = 0;
    }
    c->entries++;
    c->part_entries++;
    c->vf.parts[c->vf.nparts - 1].entries++;
    if (bkv_ikey_type(ikey, ilen) != BKV_TYPE_VALUE) {
        add_tag(c, 0);
        return BKV_OK;
    }
    term_sink ts = {c, bkv_vf_part_bits(&c->vf, c->vf.nparts - 1)};
    if (c->opts.terms) {
        c->opts.terms(c->opts.terms_arg, val, vlen, add_term, &ts);
        return BKV_OK;
    }
    uint64_t h = bkv_vf_term_hash(&c->vf.params, val, vlen);
    add_term_hash(&ts, h);
    add_tag(c, bkv_vt_tag(h));
    return BKV_OK;
}

static void block_done(void *state, uint32_t block) {
    bkv_vs_collector *c = state;
    if (c->vf.nparts) c->vf.parts[c->vf.nparts - 1].last_block = block;
    if (c->tagging && bkv_buf_put_u32(&c->block_counts, (uint32_t)(c->entries - c->block_first_entry)))
        c->tagging = 0;
    c->block_first_entry = c->entries;
}

static int write_whole(bkv_vs_collector *c, bkv_table_builder *b, bkv_handle *vh, bkv_err *e) {
    bkv_buf enc;
    bkv_buf_init(&enc);
    int rc = bkv_vf_encode(&c->vf, &enc)
                 ? bkv_fail(e, BKV_NOMEM, "%s: out of memory encoding value filters", bkv_table_builder_name(b))
                 : bkv_table_builder_write_block(b, enc.data, enc.len, vh, e);
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
static void build_summary(bkv_vs_collector *c, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (c->term_hashes_lost || c->nterm_hashes == 0) return;
    /* Either filter is sized by the hashes it is given: values repeated in
     * a table would otherwise take the room of distinct ones. */
    uint64_t *tmp = malloc(c->nterm_hashes * sizeof *tmp);
    if (tmp) c->nterm_hashes = sort_unique(c->term_hashes, c->nterm_hashes, tmp);
    free(tmp);
    bkv_filter_spec spec = {.type = BKV_FILTER_RIBBON, .fpr = ldexp(1.0, -(int)c->vf.params.summary_bits),
                            .hash_seed = (uint32_t)c->vf.params.seed};
    if (c->opts.summary_cheap)
        spec = (bkv_filter_spec){.type = BKV_CHEAP_SUMMARY_TYPE, .bits_per_key = 1.04 * c->vf.params.summary_bits,
                                 .hash_seed = spec.hash_seed};
    bkv_filter *flt;
    if (bkv_filter_build(&spec, c->term_hashes, c->nterm_hashes, &flt) != BKV_OK) return;
    *len = bkv_filter_encoded_size(flt);
    if ((*out = malloc(*len))) bkv_filter_encode(flt, *out, *len);
    else *len = 0;
    bkv_filter_destroy(flt);
}

/* Version 2 (docs/format.md): the rows (word w of each partition's
 * filter) in blocks of a few KiB at most, so a search reads the blocks of
 * the k rows its term names; then the block naming them. */
static int write_paged(bkv_vs_collector *c, bkv_table_builder *b, bkv_handle *vh, bkv_err *e) {
    uint8_t *summary;
    size_t slen;
    build_summary(c, &summary, &slen);
    int rc = BKV_OK;
    uint64_t rows_offset = bkv_table_builder_file_size(b);
    uint32_t per_block = bkv_vf_rows_per_block(&c->vf);
    bkv_buf enc;
    bkv_buf_init(&enc);
    for (uint32_t w = 0; !rc && w < bkv_vf_words(&c->vf.params); w += per_block) {
        bkv_handle rh;
        int failed = 0;
        bkv_buf_clear(&enc);
        for (uint32_t r = 0; r < per_block; r++) failed |= bkv_vf_encode_row(&c->vf, w + r, &enc);
        rc = failed ? bkv_fail(e, BKV_NOMEM, "%s: out of memory encoding value filters", bkv_table_builder_name(b))
                    : bkv_table_builder_write_block(b, enc.data, enc.len, &rh, e);
    }
    if (!rc) {
        bkv_buf_clear(&enc);
        rc = bkv_vf_encode_paged(&c->vf, rows_offset, per_block, summary, slen, &enc)
                 ? bkv_fail(e, BKV_NOMEM, "%s: out of memory encoding value filters", bkv_table_builder_name(b))
                 : bkv_table_builder_write_block(b, enc.data, enc.len, vh, e);
    }
    bkv_buf_free(&enc);
    free(summary);
    return rc;
}

/* Value tags (docs/format.md): a block per partition, then their index
 * (*th). Where memory runs short the table gets no index, so no tags. */
static int write_tags(bkv_vs_collector *c, bkv_table_builder *b, bkv_handle *th, bkv_err *e) {
    uint32_t n = c->vf.nparts;
    size_t ilen = BKV_VT_HEADER + (size_t)n * BKV_VT_ENTRY;
    uint8_t *ix = malloc(ilen);
    bkv_buf part;
    bkv_buf_init(&part);
    int rc = BKV_OK, lost = !ix;
    const uint8_t *tags = c->tags.data;
    for (uint32_t i = 0; i < n && !rc && !lost; i++) {
        const bkv_vf_part *vp = &c->vf.parts[i];
        size_t nb = (size_t)vp->last_block - vp->first_block + 1;
        bkv_buf_clear(&part);
        lost = bkv_buf_append(&part, c->block_counts.data + 4 * (size_t)vp->first_block, 4 * nb) ||
               bkv_buf_append(&part, tags, 2 * (size_t)vp->entries);
        tags += 2 * (size_t)vp->entries;
        bkv_handle h;
        if (!lost) rc = bkv_table_builder_write_block(b, part.data, part.len, &h, e);
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
        bkv_put_u64(ix + 16, c->vf.params.seed);
        rc = bkv_table_builder_write_block(b, ix, ilen, th, e);
    }
    bkv_buf_free(&part);
    free(ix);
    return rc;
}

static int finish(void *state, bkv_table_builder *b, bkv_err *e) {
    bkv_vs_collector *c = state;
    bkv_handle vh;
    int rc = c->vf.params.summary_bits ? write_paged(c, b, &vh, e) : write_whole(c, b, &vh, e);
    if (!rc && !(rc = bkv_table_builder_set_property(b, "value.filter.offset", vh.offset, e)))
        rc = bkv_table_builder_set_property(b, "value.filter.size", vh.size, e);
    /* Every entry has its tag and every block its count, or none are written. */
    if (!rc && c->tagging && c->vf.nparts && c->tags.len == 2 * c->entries &&
        c->block_counts.len == 4 * (size_t)bkv_table_builder_data_blocks(b)) {
        bkv_handle th = {0, 0};
        if (!(rc = write_tags(c, b, &th, e)) && th.size &&
            !(rc = bkv_table_builder_set_property(b, "value.tags.offset", th.offset, e)))
            rc = bkv_table_builder_set_property(b, "value.tags.size", th.size, e);
    }
    return rc;
}

static uint64_t estimate(const void *state) {
    const bkv_vs_collector *c = state;
    return c->tags.len + (uint64_t)c->vf.nparts * (BKV_VF_DIR_ENTRY + c->vf.params.m_bits / 8);
}

bkv_vs_collector *bkv_vs_collector_new(const bkv_vs_collector_options *o) {
    bkv_vs_collector *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->opts = *o;
    c->vf.params = o->params;
    c->tagging = !o->terms;
    bkv_buf_init(&c->tags);
    bkv_buf_init(&c->block_counts);
    c->hook = (bkv_table_collector){c, collect, block_done, finish, estimate};
    return c;
}

const bkv_table_collector *bkv_vs_collector_hook(bkv_vs_collector *c) { return &c->hook; }

bkv_vf_set *bkv_vs_collector_take_filters(bkv_vs_collector *c) {
    if (c->vf.nparts == 0) return NULL;
    bkv_vf_set *vf = malloc(sizeof *vf);
    if (!vf) return NULL;
    *vf = c->vf;
    c->vf.nparts = 0;
    c->vf.parts = NULL;
    c->vf.bits = NULL;
    return vf;
}

void bkv_vs_collector_free(bkv_vs_collector *c) {
    if (!c) return;
    free(c->term_hashes);
    bkv_buf_free(&c->tags);
    bkv_buf_free(&c->block_counts);
    bkv_vf_set_free(&c->vf);
    free(c);
}
