/*
 * Blocks: sorted entries with prefix-compressed keys and restart points.
 * Layout in docs/format.md, "Block".
 */
#ifndef BKV_TABLE_BLOCK_H
#define BKV_TABLE_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

typedef struct bkv_block_builder {
    bkv_buf buf;
    bkv_buf restarts;     /* u32 offsets */
    bkv_buf last_key;
    int interval;         /* entries between restart points */
    int counter;
    uint64_t entries;
} bkv_block_builder;

void bkv_block_builder_init(bkv_block_builder *b, int restart_interval);
void bkv_block_builder_free(bkv_block_builder *b);
void bkv_block_builder_reset(bkv_block_builder *b);
/* REQUIRES: key > every key added since the last reset. */
/* -1 when out of memory: the block is then unusable (reset it). */
BKV_MUST_CHECK int bkv_block_builder_add(bkv_block_builder *b, const uint8_t *key, size_t klen, const uint8_t *val,
                                         size_t vlen);
size_t bkv_block_builder_size_estimate(const bkv_block_builder *b);
/* Appends the restart array; the block is then b->buf. */
BKV_MUST_CHECK int bkv_block_builder_finish(bkv_block_builder *b); /* -1: out of memory */
int bkv_block_builder_empty(const bkv_block_builder *b);

/* A parsed block over borrowed bytes. */
typedef struct bkv_block {
    const uint8_t *data;
    size_t len;            /* bytes of entries (restart array excluded) */
    const uint8_t *restarts;
    uint32_t num_restarts;
} bkv_block;

/* 0 when the restart array is well formed, else -1. */
int bkv_block_parse(bkv_block *blk, const uint8_t *data, size_t len);

typedef struct bkv_block_iter {
    const bkv_block *blk;
    size_t offset;       /* current entry */
    size_t next;         /* entry after it */
    uint32_t restart;    /* the last restart point at or before the current entry */
    bkv_buf key;         /* in key_mem until a key outgrows it: most seeks allocate nothing */
    uint8_t key_mem[64];
    const uint8_t *val;
    size_t vlen;
    int valid;
    int corrupt;         /* set when an entry failed to decode */
    int oom;             /* set when its key could not be assembled: no memory, not damage */
} bkv_block_iter;

/* The iterator keeps its key inside itself: it must not be copied. */
void bkv_block_iter_init(bkv_block_iter *it, const bkv_block *blk);
void bkv_block_iter_free(bkv_block_iter *it);
void bkv_block_iter_first(bkv_block_iter *it);
void bkv_block_iter_next(bkv_block_iter *it);
/* The number of the restart point the current entry sits on, or -1 when
 * it sits between two: in a block with a restart at every entry (an
 * index block) the entry's ordinal. */
int64_t bkv_block_iter_restart_ordinal(const bkv_block_iter *it);
/* First entry whose key >= target under cmp (memcmp-style on full keys). */
typedef int (*bkv_key_cmp)(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);
void bkv_block_iter_seek(bkv_block_iter *it, const uint8_t *target, size_t tlen, bkv_key_cmp cmp);
void bkv_block_iter_last(bkv_block_iter *it);
/* The entry at restart point i (invalid past the last): in a block with a
 * restart at every entry, entry i. */
void bkv_block_iter_seek_restart(bkv_block_iter *it, uint32_t i);
/* The entry before the current one (invalid before the first). Costs a
 * scan from the previous restart point. */
void bkv_block_iter_prev(bkv_block_iter *it);

#endif
