/*
 * SSTables: immutable sorted files of internal keys. Layout in
 * docs/format.md, "SSTable":
 *
 *   [data block 1] ... [data block N] [filter block] [collectors' blocks]
 *   [range filter block] [properties block] [index block] [footer, 72 bytes]
 *
 * Every block is followed by a 9-byte trailer (compression type, XXH3-64).
 * A layer above (value search) keeps blocks of its own in a table without
 * this module knowing what they hold: a collector writes them as the table
 * is built, and names them in the properties; the reader hands them back
 * by name, through the block cache, with a per-table slot for what that
 * layer keeps of a table in memory ("Auxiliary blocks" below).
 */
#ifndef BKV_TABLE_H
#define BKV_TABLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bloomkv.h"
#include "table/cache.h"
#include "table/format.h"
#include "util/buf.h"
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

typedef struct bkv_table_builder bkv_table_builder;

/* A collector builds blocks of its own from the entries of a table as the
 * builder writes it. add sees every entry (in order, before it goes into
 * a data block: it may end the open block first, with
 * bkv_table_builder_end_block); block_done follows each data block
 * written (its ordinal); finish runs after the key filter, writing the
 * collector's blocks (bkv_table_builder_write_block) and naming them in
 * the properties (bkv_table_builder_set_property). estimate is the bytes
 * finish would write now. A non-zero return from add or finish fails the
 * table with that status. */
typedef struct bkv_table_collector {
    void *state;
    int (*add)(void *state, bkv_table_builder *b, const uint8_t *ikey, size_t ilen, const uint8_t *val, size_t vlen,
               bkv_err *e);
    void (*block_done)(void *state, uint32_t block);
    int (*finish)(void *state, bkv_table_builder *b, bkv_err *e);
    uint64_t (*estimate)(const void *state);
} bkv_table_collector;

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
    /* NULL, or a collector whose blocks the table carries (it must
     * outlive the builder). */
    const bkv_table_collector *collector;
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
    uint64_t range_filter_offset, range_filter_bytes; /* the range filter block; 0 bytes: none */
    uint64_t range_filter_skip;   /* its keys: eight bytes of each user key from here (bkv_key_prefix64) */
    int filter_type;
    int compression;
    uint64_t creation_time;
    uint8_t *smallest, *largest;  /* internal keys, malloc'd (NULL if absent) */
    size_t smallest_len, largest_len;
} bkv_table_props;

/* ---- builder ---- */
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
/* For a collector: data blocks written so far; the open data block
 * written now (a no-op when it is empty); an uncompressed block written at
 * the end of the file (*h its place); a property recorded as a varint,
 * written in the properties block at finish (name: at most
 * BKV_TABLE_PROPERTY_MAX bytes, and none the table itself or another
 * collector uses; BKV_INVALID or BKV_NOMEM leave a message). */
#define BKV_TABLE_PROPERTY_MAX 40
uint32_t bkv_table_builder_data_blocks(const bkv_table_builder *b);
int bkv_table_builder_end_block(bkv_table_builder *b, bkv_err *e);
int bkv_table_builder_write_block(bkv_table_builder *b, const uint8_t *data, size_t len, bkv_handle *h, bkv_err *e);
int bkv_table_builder_set_property(bkv_table_builder *b, const char *name, uint64_t v, bkv_err *e);
/* The name the builder was given, for messages. */
const char *bkv_table_builder_name(const bkv_table_builder *b);
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

/* How a read treats blocks (the read_flags of the calls below; 0 = none). */
enum {
    BKV_READ_FILL_CACHE = 1, /* blocks read from the file go into the block cache */
    BKV_READ_VERIFY_ALL = 2, /* every block's checksum is verified on every read, read again from
                                the file on a cache hit; without it each block is verified once,
                                when first read from the file */
    BKV_READ_BULK = 4        /* for an iterator that reads the table once, front to back (a
                                compaction, a check, an ingest): it copies its blocks from the file
                                in large chunks into a buffer of its own, never through the map or
                                the block cache, and verifies every block it reads; other reads
                                ignore it */
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
/* The range filter, NULL when absent or damaged. */
const bkv_filter *bkv_table_range_filter(const bkv_table *t);
/* The question bkv_table_range_may_intersect puts to the range filter,
 * worked out once for a caller that asks in steps
 * (bkv_filter_range_lookup_start over several tables): 0 when the keys'
 * shared prefix alone rules [lo, hi] out, else 1 with the filter's
 * [*a, *z]. */
int bkv_table_range_question(const bkv_table *t, const uint8_t *lo, size_t lolen, const uint8_t *hi, size_t hilen,
                             uint64_t *a, uint64_t *z);
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

/* ---- auxiliary blocks: the reader's calls for a collector's layer ---- */
/* The table's file name, for messages. */
const char *bkv_table_path(const bkv_table *t);
/* A property the table's own reader does not know (a collector's): 1 with
 * *v, or 0 when the table has none by that name (or it is not a varint). */
int bkv_table_property(const bkv_table *t, const char *name, uint64_t *v);
/* The block named by properties "<name>.offset" and "<name>.size": 1 with
 * *h, or 0 when either is missing or the size is 0. */
int bkv_table_aux_handle(const bkv_table *t, const char *name, bkv_handle *h);
/* Whether block h and its trailer lie in the file. */
int bkv_table_holds_block(const bkv_table *t, bkv_handle h);
/* Block h read into a malloc'd copy (*data, *len; its checksum verified,
 * decompressed): BKV_OK, or the error naming file and offset. */
int bkv_table_read_block(bkv_table *t, bkv_handle h, uint8_t **data, size_t *len, bkv_err *e);
/* Block h as a search reads it again and again: from the map (verified
 * once: bit `bit` of verified records it, or at every read with
 * BKV_READ_VERIFY_ALL), the block cache or the file (into the cache with
 * BKV_READ_FILL_CACHE). NULL when it cannot be read, fails its checksum or
 * decompresses to other than h.size bytes; otherwise release *ref with
 * bkv_table_aux_release when done with the bytes. */
typedef struct bkv_table_aux_ref {
    bkv_cache_entry *entry;
    void *own;
} bkv_table_aux_ref;
const uint8_t *bkv_table_aux_block(bkv_table *t, bkv_handle h, atomic_uchar *verified, uint32_t bit, int read_flags,
                                   bkv_table_aux_ref *ref);
void bkv_table_aux_release(bkv_table *t, bkv_table_aux_ref *ref);
/* Whether the file is mapped (a prefetch then asks the kernel ahead). */
int bkv_table_is_mapped(const bkv_table *t);
/* Asks for bytes [offset, offset + len) of a mapped file ahead of use. */
void bkv_table_prefetch_bytes(bkv_table *t, uint64_t offset, uint64_t len);
/* Whether byte offset of a mapped file is in memory: 1, 0, or -1 when
 * that cannot be told. */
int bkv_table_byte_resident(bkv_table *t, uint64_t offset);
/* Asks for the index of a mapped table not read yet. */
void bkv_table_prefetch_index(bkv_table *t);
/* Data block i: 1 when this process has verified it in place in the map
 * (so it is in memory); 0 with *h its handle; -1 when the file is not
 * mapped or the index cannot be read. */
int bkv_table_data_block(bkv_table *t, uint32_t i, bkv_handle *h);
/* Where the data blocks end (the first byte past the last one). */
uint64_t bkv_table_data_end(const bkv_table *t);
/* Counts a damaged filter-like block in the stats the table was opened
 * with (filter_corrupt). */
void bkv_table_count_damage(const bkv_table *t);
/* The table's slot for the layer above: what make returns, made on the
 * first call (NULL: make failed, tried again on the next call; make must
 * not call bkv_table_slot, bkv_table_data_block or the index's reads) and
 * destroyed with destroy when the table closes. One layer uses it; peek
 * returns it or NULL without making it; prefetch asks the CPU for the
 * slot's pointer ahead of a peek. */
void *bkv_table_slot(bkv_table *t, void *(*make)(bkv_table *t), void (*destroy)(void *));
void *bkv_table_slot_peek(const bkv_table *t);
void bkv_table_slot_prefetch(const bkv_table *t);

/* An internal iterator over the table's entries (util/iterator.h). It
 * reads blocks through the map or the block cache as read_flags say, or
 * with BKV_READ_BULK in chunks of its own. The table must stay open while
 * the iterator lives. */
struct bkv_ikey_iter;
int bkv_table_iter_new(bkv_table *t, int read_flags, bkv_table_stats *stats, struct bkv_ikey_iter **out);
/* Makes a table iterator (from bkv_table_iter_new) pass over what it
 * cannot read (its index, a data block that fails its checksum or does
 * not decode), recording the key ranges in log (which must outlive it),
 * instead of stopping with the error. */
void bkv_table_iter_skip_damage(struct bkv_ikey_iter *it, bkv_skip_log *log);

#endif
