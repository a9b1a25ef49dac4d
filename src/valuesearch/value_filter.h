/*
 * Value filters: plain Bloom bit arrays over the terms of a table
 * partition's values, all of one database sharing m, k and seed so that
 * any two can be OR-ed (the value index builds inner nodes that way).
 * Byte layout of the block holding them: docs/format.md, "Value filter
 * block".
 */
#ifndef BKV_VALUESEARCH_VALUE_FILTER_H
#define BKV_VALUESEARCH_VALUE_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/status.h"

#define BKV_VF_MAGIC 0x76564B42u /* "BKVv" */
#define BKV_VF_VERSION 1
#define BKV_VF_VERSION_PAGED 2 /* filters stored as rows before the block, plus a table summary */
#define BKV_VF_MAX_K 30
#define BKV_VF_HEADER 32
#define BKV_VF_DIR_ENTRY 16
#define BKV_VF_HEADER_PAGED 48
#define BKV_VF_ROW_BLOCK 4096 /* the writer puts rows together up to this many bytes a block */
#define BKV_VF_DIR_ENTRY_PAGED 24 /* version 1's entry and the partition's file offset */
#define BKV_VF_SPREAD 0
#define BKV_VF_TWO_WORDS 2

typedef struct bkv_vf_params {
    uint32_t m_bits;            /* multiple of 64 */
    uint32_t k;
    uint64_t seed;
    uint32_t partition_entries; /* P; 0 = whole table */
    /* Where a term's k bits go: BKV_VF_SPREAD anywhere in the filter, or
     * BKV_VF_TWO_WORDS in two of its 64-bit words, so that the paged
     * index reads two rows a table instead of k. Must match, as m, k and
     * seed must, for two sets to be OR-ed. */
    uint32_t words;
    /* Layout of new tables' blocks: 0 writes version 1 (every filter in
     * the block, read whole into an in-memory index); > 0 writes version 2
     * (the paged index reads single rows on demand) with a summary filter
     * of about this many bits per distinct term. Not part of what must
     * match for two sets to be OR-ed. */
    uint32_t summary_bits;
} bkv_vf_params;

int bkv_vf_params_valid(const bkv_vf_params *p);
/* 1 when a term sets the same bits under both (m, k, seed, words). */
static inline int bkv_vf_same_bits(const bkv_vf_params *a, const bkv_vf_params *b) {
    return a->m_bits == b->m_bits && a->k == b->k && a->seed == b->seed && a->words == b->words;
}
/* Zeroed, 64-byte aligned words (free with free()); NULL when out of memory. */
uint64_t *bkv_vf_alloc_bits(size_t words);
static inline size_t bkv_vf_words(const bkv_vf_params *p) { return p->m_bits / 64; }

/* A term's k bit positions, computed once per term and reused for every
 * filter probed (one hash per search, however many filters). */
typedef struct bkv_vf_probe {
    uint32_t k;
    uint32_t pos[BKV_VF_MAX_K];
} bkv_vf_probe;

uint64_t bkv_vf_term_hash(const bkv_vf_params *p, const void *term, size_t len);
void bkv_vf_probe_from_hash(bkv_vf_probe *probe, const bkv_vf_params *p, uint64_t h);
static inline void bkv_vf_probe_init(bkv_vf_probe *probe, const bkv_vf_params *p, const void *term, size_t len) {
    bkv_vf_probe_from_hash(probe, p, bkv_vf_term_hash(p, term, len));
}
static inline void bkv_vf_insert(uint64_t *bits, const bkv_vf_probe *pr) {
    for (uint32_t i = 0; i < pr->k; i++) bits[pr->pos[i] >> 6] |= UINT64_C(1) << (pr->pos[i] & 63);
}
static inline int bkv_vf_test(const uint64_t *bits, const bkv_vf_probe *pr) {
    for (uint32_t i = 0; i < pr->k; i++)
        if (!(bits[pr->pos[i] >> 6] >> (pr->pos[i] & 63) & 1)) return 0;
    return 1;
}

typedef struct bkv_vf_part {
    uint32_t first_block, last_block; /* data block ordinals, inclusive */
    uint32_t entries, terms;
    uint64_t offset; /* version 2: file offset of data block first_block (a search prefetches from it) */
} bkv_vf_part;

/* The value filters of one table, decoded or being built. */
typedef struct bkv_vf_set {
    bkv_vf_params params;
    uint32_t nparts;
    bkv_vf_part *parts;         /* malloc'd */
    uint64_t *bits;             /* malloc'd, nparts x words, 64-byte aligned */
} bkv_vf_set;

void bkv_vf_set_free(bkv_vf_set *s);
/* Frees a malloc'd set and its contents; NULL is a no-op. */
void bkv_vf_set_destroy(bkv_vf_set *s);
/* Appends a zeroed partition starting at data block first. */
int bkv_vf_set_add_part(bkv_vf_set *s, uint32_t first_block);
static inline uint64_t *bkv_vf_part_bits(const bkv_vf_set *s, uint32_t i) {
    return s->bits + (size_t)i * bkv_vf_words(&s->params);
}

BKV_MUST_CHECK int bkv_vf_encode(const bkv_vf_set *s, bkv_buf *out); /* -1: out of memory */

/* Version 2 (docs/format.md): row w is word w of every partition's
 * filter; rows_per_block consecutive rows make a block, the blocks one
 * after the other from rows_offset; the value filter block itself holds
 * the header, the directory and the summary, a serialized filter
 * (bloomkv_filter.h) over the term hashes. bkv_vf_rows_per_block is the
 * writer's choice: as many rows as fit BKV_VF_ROW_BLOCK bytes (at least
 * one), a power of two dividing the row count. */
uint32_t bkv_vf_rows_per_block(const bkv_vf_set *s);
BKV_MUST_CHECK int bkv_vf_encode_row(const bkv_vf_set *s, uint32_t w, bkv_buf *out);
BKV_MUST_CHECK int bkv_vf_encode_paged(const bkv_vf_set *s, uint64_t rows_offset, uint32_t rows_per_block,
                                       const uint8_t *summary, size_t summary_len, bkv_buf *out);

/* What the block says beyond the filters' bits. */
typedef struct bkv_vf_layout {
    int version;                /* BKV_VF_VERSION or BKV_VF_VERSION_PAGED */
    uint64_t rows_offset;       /* version 2: file offset of the first block of rows */
    uint32_t rows_per_block;    /* version 2: >= 1, divides m / 64 */
    const uint8_t *summary;     /* version 2: within the decoded block; NULL when it has none */
    size_t summary_len;
} bkv_vf_layout;

/* Decodes and validates (docs/format.md) block contents of a table with
 * num_data_blocks data blocks and num_entries entries into a fresh set.
 * A version 2 block leaves the set's bits zero (they are in the rows:
 * bkv_vf_set_row fills them) and says where in layout (may be NULL for a
 * caller that only accepts version 1). */
int bkv_vf_decode(const uint8_t *p, size_t len, uint64_t num_data_blocks, uint64_t num_entries,
                  bkv_vf_set *out, bkv_vf_layout *layout, const char *name, uint64_t offset, bkv_err *e);
/* Copies row w (nparts little-endian words) into the set's filters. */
void bkv_vf_set_row(bkv_vf_set *s, uint32_t w, const uint8_t *row);

#endif
