/*
 * Value search's part of a table: the blocks it keeps there and how a
 * search reads them. Built through the table's collector hook
 * (bkv_vs_collector) as the table is written, read through its auxiliary
 * block calls and per-table slot; the table format knows nothing of
 * values. Byte layouts: docs/format.md, "Value filter block" (properties
 * value.filter.offset and .size) and "Value tags" (value.tags.offset and
 * .size).
 */
#ifndef BKV_VALUESEARCH_TABLE_VALUES_H
#define BKV_VALUESEARCH_TABLE_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "bloomkv.h"
#include "table/table.h"
#include "valuesearch/value_filter.h"
#include "valuesearch/value_tags.h"

/* ---- building ---- */
typedef struct bkv_vs_collector bkv_vs_collector;

/* What a table's value blocks are built with. */
typedef struct bkv_vs_collector_options {
    bkv_vf_params params;     /* the database's */
    bkv_terms_fn terms;       /* NULL: the whole value is the term */
    void *terms_arg;
    /* The paged layout's summary (params.summary_bits): 1 builds a blocked
     * Bloom filter of the same size instead of a Ribbon one, a tenth of
     * the build for about four times the false-positive rate: for tables
     * that a compaction will rewrite soon. */
    int summary_cheap;
} bkv_vs_collector_options;
#define BKV_CHEAP_SUMMARY_TYPE BKV_FILTER_BLOCKED_BLOOM /* what summary_cheap builds; else Ribbon */

/* A collector for one table (NULL: out of memory); hand
 * bkv_vs_collector_hook's answer to the table builder's options, and free
 * it after the builder. */
bkv_vs_collector *bkv_vs_collector_new(const bkv_vs_collector_options *o);
const bkv_table_collector *bkv_vs_collector_hook(bkv_vs_collector *c);
/* After the table is finished: its value filters, handed to the caller
 * (free with bkv_vf_set_destroy), or NULL when it has none or memory ran
 * short (the table itself is whole either way). */
bkv_vf_set *bkv_vs_collector_take_filters(bkv_vs_collector *c);
void bkv_vs_collector_free(bkv_vs_collector *c);

/* ---- reading ---- */

/* Where the value filter block and the value tags index lie: 1 with *h,
 * 0 when the table has none. */
int bkv_vs_filter_handle(const bkv_table *t, bkv_handle *h);
int bkv_vs_tags_handle(const bkv_table *t, bkv_handle *h);

/* Reads and validates the table's value filter block: BKV_OK, BKV_NOTFOUND
 * when the table has none, or the error (naming file and offset). */
int bkv_vs_table_filters(bkv_table *t, bkv_vf_set *out, bkv_err *e);
/* The paged value index's probe of one table for the term hashed to h
 * under params (the database's), in two steps so that a search asks the
 * device for what every table needs before it waits for any.
 * bkv_vs_probe asks the table's summary (a version 2 block); when it says
 * "maybe" (*out), the rows the term names are prefetched and bkv_vs_match
 * then reads them (through the block cache when the file is not mapped)
 * and calls fn for each partition (its data blocks first..last, last =
 * UINT32_MAX: to the table's end) that may hold the term, after
 * prefetching the index and those partitions' blocks. A version 1 block is
 * read whole by match; a block that is missing, damaged or made with other
 * parameters answers "maybe" for the whole table. Both return BKV_NOMEM
 * when out of memory; match returns fn's first non-zero answer. */
typedef int (*bkv_vs_part_fn)(void *arg, uint32_t first_block, uint32_t last_block);
typedef struct bkv_vs_table_probe {
    uint32_t partitions; /* the table's (1: it answers for itself whole) */
    int summary_maybe;   /* past its summary: match must test every partition */
} bkv_vs_table_probe;
int bkv_vs_probe(bkv_table *t, const bkv_vf_params *params, uint64_t h, bkv_vs_table_probe *out);
/* Hints before bkv_vs_probe, in stages 0..BKV_VS_PREFETCH_STAGES - 1, each
 * asking the CPU for what the probe of h reads next and reading only what
 * the stage before asked for (the table's slot, what it holds, the
 * summary's handle, its lines): a caller spreads them over the tables
 * ahead of the one it probes, so their cache misses overlap instead of
 * following one another. */
#define BKV_VS_PREFETCH_STAGES 4
void bkv_vs_prefetch(bkv_table *t, uint64_t h, int stage);
int bkv_vs_match(bkv_table *t, const bkv_vf_params *params, uint64_t h, int read_flags, bkv_vs_part_fn fn, void *arg);
/* 1 when the table has a usable version 2 block for params (reading what
 * the paged index keeps of it in memory). */
int bkv_vs_paged(bkv_table *t, const bkv_vf_params *params);
/* 1 when that block's summary is the cheap kind the collector writes
 * above the bottom level (bkv_vs_collector_options.summary_cheap). */
int bkv_vs_summary_cheap(bkv_table *t, const bkv_vf_params *params);
/* The summary of a version 2 block, opened into a filter of its own (the
 * caller destroys it): BKV_OK, BKV_NOTFOUND when the table has none, or
 * the error naming file and offset. */
int bkv_vs_summary(bkv_table *t, bkv_filter **out, bkv_err *e);
/* Bytes the paged index keeps for the table (0 before it is first read). */
size_t bkv_vs_memory(const bkv_table *t);

/* Which data blocks of the value partition first..last may hold an entry
 * with one of the term tags[0, ntags) (bkv_vt_tag of term hashes made
 * with seed), from the table's value tags: 1 with maybe[i] set for block
 * first + i, or 0 when the table has no usable tags for exactly that
 * partition (no tags, another seed, damage: every block "maybe"), or when
 * the partition's blocks would come from the device anyway. */
int bkv_vs_blocks(bkv_table *t, uint64_t seed, uint32_t first, uint32_t last, const uint16_t *tags, size_t ntags,
                  int read_flags, uint8_t *maybe);

/* For bloomkv check: the value tags index, read and validated (BKV_NOTFOUND
 * when the table has none; free it with bkv_vt_index_free), and partition
 * i's tags block, checked against its index entry (*data malloc'd; its
 * length is ix->size[i]). Errors name the file and offset. */
int bkv_vs_tags_index(bkv_table *t, bkv_vt_index *out, bkv_err *e);
int bkv_vs_tags_part(bkv_table *t, const bkv_vt_index *ix, uint32_t i, uint8_t **data, bkv_err *e);

#endif
