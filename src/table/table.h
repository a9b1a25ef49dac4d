/*
 * SSTables: immutable sorted files of internal keys. Layout in
 * docs/format.md, "SSTable":
 *
 *   [data block 1] ... [data block N] [filter block] [value filter block]
 *   [properties block] [index block] [footer, 72 bytes]
 *
 * Every block is followed by a 9-byte trailer (compression type, XXH3-64).
 */
#ifndef BKV_TABLE_H
#define BKV_TABLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomkv.h"
#include "filter/value_filter.h"
#include "filter/value_tags.h"
#include "table/cache.h"
#include "util/coding.h"
#include "util/env.h"

#define BKV_TABLE_MAGIC 0x31425354564B4C42ULL /* "BLKVTSB1" */
/* Version 1: the filter block is one filter. Version 2: it is a filter
 * partition index (written only when filters are partitioned, so tables
 * without partitions stay readable by every release). */
#define BKV_TABLE_VERSION 1
#define BKV_TABLE_VERSION_PARTITIONED 2
#define BKV_FOOTER_LEN 72
#define BKV_BLOCK_TRAILER 9
/* The largest block, stored or decompressed, a reader accepts; a builder
 * refuses to write a larger one rather than leave a table no read can
 * open. A data block holds at most block_size bytes (<= 64 MiB) plus one
 * entry (<= BKV_MAX_KEY_SIZE + BKV_MAX_VALUE_SIZE): far below it. */
#define BKV_MAX_BLOCK_SIZE ((uint64_t)1 << 30)

/* A block's compression byte (docs/format.md) is the public option's value. */
enum {
    BKV_COMPRESS_NONE = BKV_COMPRESSION_NONE,
    BKV_COMPRESS_LZ4 = BKV_COMPRESSION_LZ4,
    BKV_COMPRESS_ZSTD = BKV_COMPRESSION_ZSTD
};

typedef struct bkv_table_options {
    size_t block_size;
    int restart_interval;
    int filter_type;        /* BKV_FILTER_* (NONE: no filter block) */
    double bits_per_key;
    size_t filter_partition_size; /* 0: one filter; else bytes of filter per partition */
    int compression;        /* BKV_COMPRESS_* */
    /* When set, the filter also holds every key's prefix (hashed with
     * BKV_PREFIX_SEED); returns SIZE_MAX for keys without one. */
    size_t (*prefix_extractor)(const void *key, size_t klen);
    /* When set, the table carries value filters with these parameters
     * over the terms of its values (docs/format.md "Value filter block"). */
    const bkv_vf_params *value_filter;
    bkv_terms_fn value_terms;    /* NULL: the whole value is the term */
    void *value_terms_arg;
    /* The paged layout's summary (value_filter->summary_bits): 1 builds a
     * blocked Bloom filter of the same size instead of a Ribbon one, a
     * tenth of the build for about four times the false-positive rate: for
     * tables that a compaction will rewrite soon. */
    int value_summary_cheap;
#define BKV_CHEAP_SUMMARY_TYPE BKV_FILTER_BLOCKED_BLOOM /* what value_summary_cheap builds; else Ribbon */
    /* When > 0, a range filter (bkv_filter_build_range) at this many bits
     * per key over eight bytes of every user key, from a place inside the
     * prefix all the table's keys share (bkv_table_shared_prefix): reads
     * of a key range ask it before the index (properties
     * "range.filter.offset", ".size" and ".skip"). */
    double range_filter_bits;
} bkv_table_options;

/* The length of the prefix user keys a and b share: every key of a table
 * between its smallest and largest shares that one's. */
static inline size_t bkv_table_shared_prefix(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    size_t n = 0;
    while (n < an && n < bn && a[n] == b[n]) n++;
    return n;
}



typedef struct bkv_table_props {
    uint64_t num_entries, num_deletions, num_data_blocks;
    uint64_t num_keys;                    /* distinct user keys; 0: not recorded (tables before it was) */
    uint64_t raw_key_bytes, raw_value_bytes, data_bytes;
    uint64_t index_bytes, filter_bytes;   /* filter_bytes: every partition's, when partitioned */
    uint64_t filter_partitions;           /* 0: the filter is not partitioned */
    uint64_t filter_fpr_ppb;              /* the filter's modelled false-positive rate, parts per 10^9 */
    uint64_t value_filter_offset, value_filter_bytes; /* 0 bytes: none */
    uint64_t value_tags_offset, value_tags_bytes;     /* the value tags index block; 0 bytes: none */
    uint64_t range_filter_offset, range_filter_bytes; /* the range filter block; 0 bytes: none */
    uint64_t range_filter_skip;   /* its keys: eight bytes of each user key from here (bkv_key_prefix64) */
    int filter_type;
    int compression;
    uint64_t creation_time;
    uint8_t *smallest, *largest;  /* internal keys, malloc'd (NULL if absent) */
    size_t smallest_len, largest_len;
} bkv_table_props;

/* ---- builder ---- */
typedef struct bkv_table_builder bkv_table_builder;

/* Writes into file (owned by the caller, who syncs and closes it). */
bkv_table_builder *bkv_table_builder_new(const bkv_table_options *opts, bkv_wfile *file, const char *name);
/* REQUIRES: ikey greater than every key added before. */
int bkv_table_builder_add(bkv_table_builder *b, const uint8_t *ikey, size_t ilen, const uint8_t *val,
                          size_t vlen, bkv_err *e);
int bkv_table_builder_finish(bkv_table_builder *b, bkv_err *e);
uint64_t bkv_table_builder_file_size(const bkv_table_builder *b);
uint64_t bkv_table_builder_entries(const bkv_table_builder *b);
/* The first and last internal keys added (valid until the builder is freed). */
void bkv_table_builder_key_range(const bkv_table_builder *b, const uint8_t **smallest, size_t *slen,
                                 const uint8_t **largest, size_t *llen);
/* Smallest and largest sequence numbers added. */
void bkv_table_builder_seq_range(const bkv_table_builder *b, uint64_t *lo, uint64_t *hi);
/* Hands the value filters built (after finish) to the caller, who frees
 * them with bkv_vf_set_free; an empty set when the table has none. */
void bkv_table_builder_take_value_filters(bkv_table_builder *b, bkv_vf_set *out);
/* Size of the file if finished now (for cutting outputs). */
uint64_t bkv_table_builder_estimated_size(const bkv_table_builder *b);
void bkv_table_builder_free(bkv_table_builder *b);

/* ---- reader ---- */
typedef struct bkv_table bkv_table;

typedef struct bkv_table_stats { /* relaxed atomics: bumped by every reader */
    atomic_uint_fast64_t blocks_read;        /* from the file */
    atomic_uint_fast64_t cache_hits, cache_misses;
    atomic_uint_fast64_t filter_probes, filter_negatives;
    atomic_uint_fast64_t filter_corrupt;     /* filter blocks that failed validation */
    atomic_uint_fast64_t filter_partitions_read; /* filter partitions read from their file */
    /* Bytes of filter partitions in the block cache: added when one is
     * cached, taken away when it leaves, so the sum over the counters a
     * database sums is what is resident. */
    atomic_uint_fast64_t filter_cache_bytes;
} bkv_table_stats;

/* Opens a table and validates its footer, properties and filter (the
 * index is read and validated when a read first needs it: a damaged one
 * fails that read, naming file and offset). A damaged filter is not an
 * error: the table then answers "maybe" for every key (counted in
 * stats->filter_corrupt). block_cache may be NULL; stats, when not NULL,
 * must outlive the table and the block cache entries it makes. */
int bkv_table_open(const bkv_env *env, const char *path, uint64_t file_number, bkv_cache *block_cache,
                   bkv_table_stats *stats, bkv_table **out, bkv_err *e);
void bkv_table_close(bkv_table *t);
/* Makes every key of the table read at sequence seq (an ingested table's
 * global sequence, docs/format.md "Manifest records"; 0: as written).
 * Call before the table is shared. */
void bkv_table_set_global_seq(bkv_table *t, uint64_t seq);

/* Probes the key filter only: 0 = certainly absent. A partitioned filter
 * reads the key's partition through the block cache; a partition that
 * cannot be read or validated answers "maybe" (counted in filter_corrupt,
 * and not read again). */
int bkv_table_may_contain(const bkv_table *t, bkv_hash h);
/* The same for n hashes with prefetching (bkv_filter_may_contain_batch). */
void bkv_table_may_contain_batch(const bkv_table *t, const bkv_hash *h, size_t n, uint8_t *out);

/* How a read treats blocks (the read_flags of the calls below; 0 = neither). */
enum {
    BKV_READ_FILL_CACHE = 1, /* blocks read from the file go into the block cache */
    BKV_READ_VERIFY_ALL = 2  /* every block's checksum is verified on every read, read again from
                                the file on a cache hit; without it each block is verified once,
                                when first read from the file */
};

/* Where a reader that skips damage (bkv_table_iter_skip_damage) passed
 * over some: ranges of user keys whose entries it could not read, and the
 * first reason. Range i is lo[i] .. hi[i], lo inclusive when lo_in[i]
 * (else exclusive), hi inclusive. */
typedef struct bkv_skip_log {
    bkv_buf *lo, *hi;
    uint8_t *lo_in;
    size_t n, cap;
    bkv_err first;
    int incomplete; /* a range could not be recorded (no memory): treat every key as skipped */
} bkv_skip_log;
void bkv_skip_log_free(bkv_skip_log *s);
/* Records a range; the reason is kept for the first. */
void bkv_skip_log_add(bkv_skip_log *s, const uint8_t *lo, size_t lol, int lo_inclusive, const uint8_t *hi, size_t hil,
                      const bkv_err *why);
/* Whether user key k lies in a recorded range. */
int bkv_skip_log_holds(const bkv_skip_log *s, const uint8_t *k, size_t kl);

/* Starts loading from memory what a get of key would read first in a
 * mapped table whose index is loaded (a no-op otherwise), so that the
 * gets of a batch wait for memory together rather than one after the
 * other. */
void bkv_table_prefetch_get(bkv_table *t, const void *key, size_t klen);
/* Newest version of key with sequence <= snapshot. Returns BKV_OK and
 * *found = 1 with *type, its sequence (seq, when not NULL) and a malloc'd
 * copy of the value (when type is BKV_TYPE_VALUE), or *found = 0; errors
 * name the file and offset. The filter is not consulted: call
 * bkv_table_may_contain first. */
int bkv_table_get(bkv_table *t, const void *key, size_t klen, uint64_t snapshot, int read_flags, int *found,
                  unsigned *type, void **val, size_t *vlen, uint64_t *seq, bkv_table_stats *stats, bkv_err *e);

const bkv_table_props *bkv_table_properties(const bkv_table *t);
/* The size of the table's file in bytes. */
uint64_t bkv_table_file_size(const bkv_table *t);

/* Reads and validates the table's value filter block: BKV_OK, BKV_NOTFOUND
 * when the table has none, or the error (naming file and offset). */
int bkv_table_value_filters(bkv_table *t, bkv_vf_set *out, bkv_err *e);
/* The paged value index's probe of one table for the term hashed to h
 * under params (the database's), in two steps so that a search asks the
 * device for what every table needs before it waits for any.
 * bkv_table_value_probe asks the table's summary (a version 2 block);
 * when it says "maybe" (*out), the rows the term names are prefetched
 * and bkv_table_value_match then reads them (through the block cache when
 * the file is not mapped) and calls fn for each partition (its data blocks
 * first..last, last = UINT32_MAX: to the table's end) that may hold the
 * term, after prefetching the index and those partitions' blocks. A
 * version 1 block is read whole by match; a block that is missing,
 * damaged or made with other parameters answers "maybe" for the whole
 * table. Both return BKV_NOMEM when out of memory; match returns fn's
 * first non-zero answer. */
typedef int (*bkv_table_part_fn)(void *arg, uint32_t first_block, uint32_t last_block);
typedef struct bkv_table_vsearch {
    uint32_t partitions; /* the table's (1: it answers for itself whole) */
    int summary_maybe;   /* past its summary: match must test every partition */
} bkv_table_vsearch;
int bkv_table_value_probe(bkv_table *t, const bkv_vf_params *params, uint64_t h, bkv_table_vsearch *out);
/* Hints before bkv_table_value_probe, in stages 0..BKV_TABLE_PREFETCH_STAGES
 * - 1, each asking the CPU for what the probe of h reads next and reading
 * only what the stage before asked for (the table's head, the summary's
 * handle, its lines): a caller spreads them over the tables ahead of the
 * one it probes, so their cache misses overlap instead of following one
 * another. */
#define BKV_TABLE_PREFETCH_STAGES 4
void bkv_table_value_prefetch(bkv_table *t, uint64_t h, int stage);
int bkv_table_value_match(bkv_table *t, const bkv_vf_params *params, uint64_t h, int read_flags, bkv_table_part_fn fn,
                          void *arg);
/* 1 when the table has a usable version 2 block for params (reading what
 * the paged index keeps of it in memory). */
int bkv_table_value_paged(bkv_table *t, const bkv_vf_params *params);
/* 1 when that block's summary is the cheap kind the builder writes above
 * the bottom level (bkv_table_options.value_summary_cheap). */
int bkv_table_value_summary_cheap(bkv_table *t, const bkv_vf_params *params);
/* The summary of a version 2 block, opened into a filter of its own (the
 * caller destroys it): BKV_OK, BKV_NOTFOUND when the table has none, or
 * the error naming file and offset. */
int bkv_table_value_summary(bkv_table *t, bkv_filter **out, bkv_err *e);
/* Bytes the paged index keeps for the table (0 before it is first read). */
size_t bkv_table_value_memory(const bkv_table *t);

/* Which data blocks of the value partition first..last may hold an entry
 * with one of the term tags[0, ntags) (bkv_vt_tag of term hashes made
 * with seed), from the table's value tags: 1 with maybe[i] set for block
 * first + i, or 0 when the table has no usable tags for exactly that
 * partition (no tags, another seed, damage: every block "maybe"), or when
 * the partition's blocks would come from the device anyway. */
int bkv_table_value_blocks(bkv_table *t, uint64_t seed, uint32_t first, uint32_t last, const uint16_t *tags,
                           size_t ntags, int read_flags, uint8_t *maybe);

/* For bloomkv check: the value tags index, read and validated (BKV_NOTFOUND
 * when the table has none; free it with bkv_vt_index_free), and partition
 * i's tags block, checked against its index entry (*data malloc'd; its
 * length is ix->size[i]). Errors name the file and offset. */
int bkv_table_value_tags_index(bkv_table *t, bkv_vt_index *out, bkv_err *e);
int bkv_table_value_tags_part(bkv_table *t, const bkv_vt_index *ix, uint32_t i, uint8_t **data, bkv_err *e);

/* The user keys of data blocks first..last (last clamped) lie in
 * [*lo, *hi]: *lo is the last key of block first - 1 (NULL for the first
 * block), *hi the last key of block last (NULL for a table without
 * blocks, or for a range past its last block). The bytes live as long
 * as the table. */
int bkv_table_blocks_key_range(bkv_table *t, uint32_t first, uint32_t last, const uint8_t **lo, size_t *lo_len,
                               const uint8_t **hi, size_t *hi_len, bkv_err *e);

/* Calls fn on every entry of data blocks first..last (ordinals, inclusive;
 * last is clamped to the table's last block). Stops early, returning fn's
 * value, when fn returns non-zero. */
typedef int (*bkv_table_entry_fn)(void *arg, const uint8_t *ikey, size_t ilen, const uint8_t *val, size_t vlen);
int bkv_table_scan_blocks(bkv_table *t, uint32_t first, uint32_t last, int read_flags, bkv_table_stats *stats,
                          bkv_table_entry_fn fn, void *arg, bkv_err *e);
size_t bkv_table_filter_memory(const bkv_table *t);
/* The file offset where entries >= ikey begin, to a block: the start of
 * the data block holding the first such entry (the end of the data when
 * none does). From the index alone: no data block is read. */
uint64_t bkv_table_approximate_offset(bkv_table *t, const uint8_t *ikey, size_t ilen);
/* Whether the table may hold a user key in [lo, hi] (lo NULL: from the
 * first; hi NULL: unbounded; an exclusive upper bound may be given as hi,
 * which only widens the answer): its range filter's answer, 1 when it has
 * none or a damaged one. */
int bkv_table_range_may_intersect(const bkv_table *t, const uint8_t *lo, size_t lolen, const uint8_t *hi,
                                  size_t hilen);
int bkv_table_has_range_filter(const bkv_table *t);
/* The key filter, NULL when absent, damaged or partitioned. */
const bkv_filter *bkv_table_filter(const bkv_table *t);
/* Whether the table has a usable key filter (whole or partitioned). */
int bkv_table_has_filter(const bkv_table *t);
/* Partitions of the key filter (0: not partitioned, or its index is
 * damaged). bkv_table_filter_partition opens partition i from the file
 * (no cache): BKV_OK with *out (destroy with bkv_filter_destroy), or the
 * error naming file and offset. */
uint32_t bkv_table_filter_partitions(const bkv_table *t);
int bkv_table_filter_partition(bkv_table *t, uint32_t i, bkv_filter **out, bkv_err *e);

/* An internal iterator over the table's entries (util/iterator.h). It
 * reads blocks through the block cache as read_flags say. The table must
 * stay open while the iterator lives. */
struct bkv_ikey_iter;
int bkv_table_iter_new(bkv_table *t, int read_flags, bkv_table_stats *stats, struct bkv_ikey_iter **out);
/* Makes a table iterator (from bkv_table_iter_new) pass over what it
 * cannot read (its index, a data block that fails its checksum or does
 * not decode), recording the key ranges in log (which must outlive it),
 * instead of stopping with the error. */
void bkv_table_iter_skip_damage(struct bkv_ikey_iter *it, bkv_skip_log *log);

#endif
