/*
 * Value tags: 16 bits of each entry's term hash, a block of them per
 * value filter partition, so that a search reads only the data blocks of
 * a candidate partition that may hold the value. Byte layout:
 * docs/format.md, "Value tags". Tags are a filter: a tag that matches
 * says "maybe", one that does not says "no" for that entry, and tags that
 * cannot be read or fail a check say "maybe" for every block.
 */
#ifndef BKV_VALUESEARCH_VALUE_TAGS_H
#define BKV_VALUESEARCH_VALUE_TAGS_H

#include <stddef.h>
#include <stdint.h>

#include "util/status.h"

#define BKV_VT_MAGIC 0x67564B42u /* "BKVg" */
#define BKV_VT_VERSION 1
#define BKV_VT_HEADER 24
#define BKV_VT_ENTRY 16

/* A multiplication, so that the tag does not repeat the top bits of h,
 * which place the term's first filter bit. */
static inline uint16_t bkv_vt_tag(uint64_t h) { return (uint16_t)((h * UINT64_C(0xd6e8feb86659fd93)) >> 48); }

/* The index block, decoded: partition i's tags block is at offset[i]
 * (size[i] bytes, trailer excluded) and its data blocks run from
 * first_block[i] to first_block[i + 1] - 1 (first_block[n] is the
 * table's data block count). Free with bkv_vt_index_free. */
typedef struct bkv_vt_index {
    uint64_t seed;
    uint32_t n;
    uint32_t *first_block; /* n + 1 */
    uint32_t *size;        /* n */
    uint64_t *offset;      /* n */
} bkv_vt_index;

/* Decodes and validates index block contents (docs/format.md) of a table
 * with num_data_blocks data blocks whose index block starts at
 * index_offset; errors name the file (name) and the block's offset. */
int bkv_vt_decode_index(const uint8_t *p, size_t len, uint64_t num_data_blocks, uint64_t index_offset,
                        bkv_vt_index *out, const char *name, bkv_err *e);
void bkv_vt_index_free(bkv_vt_index *x);

/* Checks a partition's tags block contents for nblocks data blocks: 0
 * when its size and counts agree, -1 otherwise. */
int bkv_vt_part_valid(const uint8_t *p, size_t len, uint32_t nblocks);

/* Sets maybe[i] (i < nblocks) to 1 when data block i of the partition
 * (tags block p, valid) has an entry whose tag is one of tags[0, ntags),
 * else 0. */
void bkv_vt_match(const uint8_t *p, uint32_t nblocks, const uint16_t *tags, size_t ntags, uint8_t *maybe);

#endif
