#include "valuesearch/value_filter.h"

#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "util/coding.h"
#include "util/hash.h"

uint64_t *bkv_vf_alloc_bits(size_t words) {
    size_t bytes = (words * 8 + 63) & ~(size_t)63;
    uint64_t *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p) memset(p, 0, bytes);
    return p;
}

int bkv_vf_params_valid(const bkv_vf_params *p) {
    return p->m_bits >= 64 && p->m_bits % 64 == 0 && p->m_bits <= (UINT32_C(1) << 31) && p->k >= 1 &&
           p->k <= BKV_VF_MAX_K && (p->words == BKV_VF_SPREAD || p->words == BKV_VF_TWO_WORDS);
}

uint64_t bkv_vf_term_hash(const bkv_vf_params *p, const void *term, size_t len) {
    return XXH3_64bits_withSeed(term, len, p->seed);
}

void bkv_vf_probe_from_hash(bkv_vf_probe *probe, const bkv_vf_params *p, uint64_t h) {
    uint64_t state = h;
    uint64_t g = bkv_splitmix64(&state) | 1;
    probe->k = p->k;
    if (p->words != BKV_VF_TWO_WORDS) {
        for (uint32_t i = 0; i < p->k; i++) probe->pos[i] = (uint32_t)bkv_fastrange64(h + i * g, p->m_bits);
        return;
    }
    /* The first half of the bits in word a, the rest in word b != a; each
     * bit's place in its word is six fresh bits of the generator. */
    uint64_t words = p->m_bits / 64;
    uint64_t a = bkv_fastrange64(h, words);
    uint64_t b = words < 2 ? a : (a + 1 + bkv_fastrange64(g, words - 1)) % words;
    uint64_t r = 0;
    for (uint32_t i = 0; i < p->k; i++) {
        if (i % 10 == 0) r = bkv_splitmix64(&state);
        probe->pos[i] = (uint32_t)(((i < (p->k + 1) / 2 ? a : b) << 6) | (r & 63));
        r >>= 6;
    }
}

void bkv_vf_set_free(bkv_vf_set *s) {
    free(s->parts);
    free(s->bits);
    s->parts = NULL;
    s->bits = NULL;
    s->nparts = 0;
}

void bkv_vf_set_destroy(bkv_vf_set *s) {
    if (!s) return;
    bkv_vf_set_free(s);
    free(s);
}

/* Grows by doubling; bits stay 64-byte aligned so a filter never straddles
 * more cache lines than it must. */
int bkv_vf_set_add_part(bkv_vf_set *s, uint32_t first_block) {
    size_t words = bkv_vf_words(&s->params), n = s->nparts;
    if ((n & (n - 1)) == 0) { /* 0, 1, 2, 4, ...: capacity is full */
        size_t cap = n ? n * 2 : 1;
        bkv_vf_part *parts = realloc(s->parts, cap * sizeof *parts);
        if (!parts) return BKV_NOMEM;
        s->parts = parts;
        uint64_t *bits = bkv_vf_alloc_bits(cap * words);
        if (!bits) return BKV_NOMEM;
        if (n) memcpy(bits, s->bits, n * words * 8);
        free(s->bits);
        s->bits = bits;
    }
    memset(s->bits + n * words, 0, words * 8);
    s->parts[n] = (bkv_vf_part){.first_block = first_block, .last_block = first_block};
    s->nparts++;
    return BKV_OK;
}

static int encode_header(const bkv_vf_set *s, int version, uint32_t word28, bkv_buf *out) {
    int rc = bkv_buf_put_u32(out, BKV_VF_MAGIC);
    uint8_t v[4] = {(uint8_t)version, 0, (uint8_t)s->params.k, (uint8_t)s->params.words};
    rc |= bkv_buf_append(out, v, 4);
    rc |= bkv_buf_put_u32(out, s->params.m_bits);
    rc |= bkv_buf_put_u32(out, s->nparts);
    rc |= bkv_buf_put_u64(out, s->params.seed);
    rc |= bkv_buf_put_u32(out, s->params.partition_entries);
    rc |= bkv_buf_put_u32(out, word28);
    return rc;
}

static int encode_directory(const bkv_vf_set *s, int paged, bkv_buf *out) {
    int rc = 0;
    for (uint32_t i = 0; i < s->nparts; i++) {
        rc |= bkv_buf_put_u32(out, s->parts[i].first_block);
        rc |= bkv_buf_put_u32(out, s->parts[i].last_block);
        rc |= bkv_buf_put_u32(out, s->parts[i].entries);
        rc |= bkv_buf_put_u32(out, s->parts[i].terms);
        if (paged) rc |= bkv_buf_put_u64(out, s->parts[i].offset);
    }
    return rc;
}

int bkv_vf_encode(const bkv_vf_set *s, bkv_buf *out) {
    int rc = encode_header(s, BKV_VF_VERSION, 0, out);
    rc |= encode_directory(s, 0, out);
    size_t words = bkv_vf_words(&s->params) * s->nparts;
    for (size_t i = 0; i < words; i++) rc |= bkv_buf_put_u64(out, s->bits[i]);
    return rc;
}

int bkv_vf_encode_row(const bkv_vf_set *s, uint32_t w, bkv_buf *out) {
    size_t words = bkv_vf_words(&s->params);
    int rc = 0;
    for (uint32_t i = 0; i < s->nparts; i++) rc |= bkv_buf_put_u64(out, s->bits[(size_t)i * words + w]);
    return rc;
}

uint32_t bkv_vf_rows_per_block(const bkv_vf_set *s) {
    uint64_t row = 8 * (uint64_t)s->nparts, words = bkv_vf_words(&s->params);
    uint32_t r = 1;
    while (words % (2 * r) == 0 && 2 * r * row <= BKV_VF_ROW_BLOCK) r *= 2;
    return r;
}

int bkv_vf_encode_paged(const bkv_vf_set *s, uint64_t rows_offset, uint32_t rows_per_block, const uint8_t *summary,
                        size_t summary_len, bkv_buf *out) {
    if (summary_len > UINT32_MAX) return -1;
    int rc = encode_header(s, BKV_VF_VERSION_PAGED, (uint32_t)summary_len, out);
    rc |= bkv_buf_put_u64(out, rows_offset);
    rc |= bkv_buf_put_u32(out, rows_per_block);
    rc |= bkv_buf_put_u32(out, 0);
    rc |= encode_directory(s, 1, out);
    rc |= bkv_buf_append(out, summary, summary_len);
    return rc;
}

void bkv_vf_set_row(bkv_vf_set *s, uint32_t w, const uint8_t *row) {
    size_t words = bkv_vf_words(&s->params);
    for (uint32_t i = 0; i < s->nparts; i++) s->bits[(size_t)i * words + w] = bkv_get_u64(row + 8 * (size_t)i);
}

int bkv_vf_decode(const uint8_t *p, size_t len, uint64_t num_data_blocks, uint64_t num_entries,
                  bkv_vf_set *out, bkv_vf_layout *layout, const char *name, uint64_t offset, bkv_err *e) {
    memset(out, 0, sizeof *out);
    bkv_vf_layout lay = {0};
#define BAD(at, what) \
    return bkv_fail(e, BKV_CORRUPTION, "%s: value filter block: %s at offset %llu", name, what, \
                    (unsigned long long)(offset + (at)))
    if (len < BKV_VF_HEADER) BAD(0, "truncated header");
    if (bkv_get_u32(p) != BKV_VF_MAGIC) BAD(0, "bad magic");
    lay.version = bkv_get_u16(p + 4);
    if (lay.version != BKV_VF_VERSION && !(layout && lay.version == BKV_VF_VERSION_PAGED))
        BAD(4, "unsupported version");
    bkv_vf_params params = {.k = p[6], .words = p[7], .m_bits = bkv_get_u32(p + 8), .seed = bkv_get_u64(p + 16),
                            .partition_entries = bkv_get_u32(p + 24)};
    uint32_t n = bkv_get_u32(p + 12);
    int paged = lay.version == BKV_VF_VERSION_PAGED;
    if (!paged && bkv_get_u32(p + 28) != 0) BAD(28, "reserved bytes not zero");
    if (!bkv_vf_params_valid(&params)) BAD(6, "bad m, k or probe words");
    uint64_t words = params.m_bits / 64;
    size_t header = BKV_VF_HEADER, entry = BKV_VF_DIR_ENTRY;
    if (paged) {
        if (len < BKV_VF_HEADER_PAGED) BAD(0, "truncated header");
        header = BKV_VF_HEADER_PAGED;
        entry = BKV_VF_DIR_ENTRY_PAGED;
        lay.summary_len = bkv_get_u32(p + 28);
        lay.rows_offset = bkv_get_u64(p + 32);
        lay.rows_per_block = bkv_get_u32(p + 40);
        if (lay.rows_per_block == 0 || words % lay.rows_per_block) BAD(40, "rows per block do not divide the rows");
        if (bkv_get_u32(p + 44) != 0) BAD(44, "reserved bytes not zero");
    }
    uint64_t tail = paged ? lay.summary_len : (uint64_t)n * words * 8;
    if ((uint64_t)len != header + (uint64_t)n * entry + tail)
        BAD(12, "length does not match the partition count");
    if ((n == 0) != (num_data_blocks == 0)) BAD(12, "partition count does not match the table");
    out->params = params;
    out->nparts = n;
    out->parts = malloc((n ? n : 1) * sizeof *out->parts);
    out->bits = bkv_vf_alloc_bits((n ? n : 1) * words);
    if (!out->parts || !out->bits) {
        bkv_vf_set_free(out);
        return bkv_fail(e, BKV_NOMEM, "%s: out of memory reading value filters", name);
    }
    uint64_t next = 0, entries = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *d = p + header + (size_t)i * entry;
        bkv_vf_part *pt = &out->parts[i];
        *pt = (bkv_vf_part){bkv_get_u32(d), bkv_get_u32(d + 4), bkv_get_u32(d + 8), bkv_get_u32(d + 12),
                            paged ? bkv_get_u64(d + 16) : 0};
        entries += pt->entries;
        if (pt->first_block != next || pt->last_block < pt->first_block || pt->last_block >= num_data_blocks ||
            (paged && (i == 0 ? pt->offset != 0 : pt->offset <= out->parts[i - 1].offset))) {
            bkv_vf_set_free(out);
            BAD((size_t)(d - p), "partition does not follow the previous one");
        }
        next = (uint64_t)pt->last_block + 1;
    }
    if (next != num_data_blocks || entries != num_entries) {
        bkv_vf_set_free(out);
        BAD(12, "partitions do not cover the table");
    }
    const uint8_t *b = p + header + (size_t)n * entry;
    if (paged && lay.summary_len) lay.summary = b;
    for (size_t i = 0; !paged && i < n * words; i++) out->bits[i] = bkv_get_u64(b + 8 * i);
    if (layout) *layout = lay;
#undef BAD
    return BKV_OK;
}
