/* Block handles, the footer, and reading a checksummed block. */
#ifndef BKV_TABLE_FORMAT_H
#define BKV_TABLE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/env.h"

typedef struct bkv_handle {
    uint64_t offset;
    uint64_t size; /* contents, trailer excluded */
} bkv_handle;

/* The filter block of a version-2 table is a partition index (docs/format.md
 * "Filter partition index"): a key hash picks its partition, whose filter
 * is a block of its own, read on demand through the block cache. */
#define BKV_FILTER_PARTITION_MAGIC 0x50564B42u /* "BKVP" */
#define BKV_FILTER_PARTITION_VERSION 1
#define BKV_FILTER_PARTITION_HEADER 16
#define BKV_FILTER_PARTITION_ENTRY 16
#define BKV_FILTER_PARTITIONS_MAX (UINT32_C(1) << 20)
#define BKV_FILTER_PARTITION_SEED UINT64_C(0x7061727469743031)

/* The partition of n that holds key hash h: the hash is remixed first, so
 * that the keys of one partition are spread evenly over its filter's
 * positions whatever bits of h the filter type uses. */
static inline uint32_t bkv_filter_partition_of(uint64_t h, uint32_t n) {
    uint64_t z = h ^ BKV_FILTER_PARTITION_SEED;
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return (uint32_t)(((unsigned __int128)z * n) >> 64);
}

typedef struct bkv_footer {
    bkv_handle index, filter, props;
    uint32_t version;
} bkv_footer;

void bkv_footer_encode(const bkv_footer *f, uint8_t *dst /* BKV_FOOTER_LEN */);
/* Validates magic, checksum, version and that every handle lies before the
 * footer; file_size locates it. */
int bkv_footer_decode(bkv_footer *f, const uint8_t *src, uint64_t file_size, const char *name, bkv_err *e);

/* The block checksum: XXH3-64 of the stored contents, with the compression
 * type byte folded in as the seed. */
uint64_t bkv_block_checksum(const uint8_t *data, size_t len, uint8_t type);

/* Checks the trailer checksum of a stored block (contents + trailer,
 * h.size + BKV_BLOCK_TRAILER bytes at stored). */
int bkv_block_verify(const uint8_t *stored, bkv_handle h, const char *name, bkv_err *e);

/* Verifies a stored block already in memory (h.size + BKV_BLOCK_TRAILER
 * bytes at stored) and decompresses it when it is compressed: then *raw is
 * malloc'd (freed with free()) and holds its *len bytes; for a block
 * stored plain *raw is NULL and its contents are stored[0..*len). */
int bkv_block_unpack(const uint8_t *stored, bkv_handle h, const char *name, uint8_t **raw, size_t *len, bkv_err *e);

/* Compresses raw into out (prefixed with the raw length) when that saves at
 * least an eighth; otherwise leaves out empty and returns NONE. */
int bkv_block_compress(int type, const uint8_t *raw, size_t len, bkv_buf *out);

/* Reads the block at h, verifies its checksum (always: it costs little next
 * to the read) and decompresses it. *data is malloc'd. */
int bkv_read_block(bkv_rfile *file, const char *name, bkv_handle h, uint8_t **data, size_t *len, bkv_err *e);

/* The same for a block a filter is opened over in place: *data starts on
 * a cache line (freed with free()), and with it the payload after the
 * filter's 64-byte header, so a blocked Bloom probe touches one line, not
 * two. From malloc a table's filter started 16 bytes past a line;
 * cachegrind counted 1.45 first-level misses a probe there against 1.03
 * aligned (readmissing over a 1 M-key database). Data blocks keep malloc,
 * cheaper for the block read of nearly every random get. */
int bkv_read_filter_block(bkv_rfile *file, const char *name, bkv_handle h, uint8_t **data, size_t *len,
                          bkv_err *e);

#endif
