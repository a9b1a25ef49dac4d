/* Write batches: the record format of docs/format.md, "Write batch". */
#ifndef BKV_DB_WRITE_BATCH_H
#define BKV_DB_WRITE_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "bloomkv.h"
#include "util/buf.h"
#include "util/coding.h"
#include "util/status.h"

#define BKV_BATCH_HEADER 12
#define BKV_LOG_END_LEN (BKV_BATCH_HEADER + 8) /* an end record: a header of no entries + the next WAL */
#define BKV_LOG_MARK_LEN (BKV_BATCH_HEADER + 9) /* a durable mark: no entries + this WAL + the byte 1 */

struct bkv_batch {
    bkv_buf rep; /* header (sequence, count) + entries */
};

void bkv_batch_set_sequence(bkv_buf *rep, uint64_t seq);
uint64_t bkv_batch_sequence(const uint8_t *rep);
uint32_t bkv_batch_rep_count(const uint8_t *rep);
/* A batch of no entries is never written for a caller: in a WAL it is the
 * end record a log gets when a memtable switch closes it. */
static inline int bkv_batch_is_log_end(const uint8_t *rep, size_t len) {
    return (len == BKV_BATCH_HEADER || len == BKV_LOG_END_LEN) && bkv_batch_rep_count(rep) == 0;
}
/* The number of the WAL that follows, as an end record names it (0 for
 * one written before end records named it). A WAL missing from between
 * two others is told by it: nothing else can tell. */
static inline uint64_t bkv_log_end_next(const uint8_t *rep, size_t len) {
    return len == BKV_LOG_END_LEN ? bkv_get_u64(rep + BKV_BATCH_HEADER) : 0;
}
/* A durable mark: every WAL numbered below the one holding it was synced,
 * with its name, before the mark was written (docs/format.md). */
static inline int bkv_batch_is_log_mark(const uint8_t *rep, size_t len) {
    return len == BKV_LOG_MARK_LEN && bkv_batch_rep_count(rep) == 0 && rep[BKV_LOG_MARK_LEN - 1] == 1;
}
/* BKV_OK when a key of klen bytes and a value of vlen bytes may be stored
 * (bloomkv.h's BKV_MAX_KEY_SIZE, BKV_MAX_VALUE_SIZE), else BKV_INVALID with
 * what: the one rule every write path (batches, the table writer) applies. */
int bkv_entry_size_check(const char *what, size_t klen, size_t vlen, bkv_err *e);
/* bkv_batch_put/_delete with the reason for a failure in e (type: a
 * BKV_TYPE_*), for callers that report it against their own handle. */
int bkv_batch_add(bkv_batch *b, unsigned type, const void *key, size_t klen, const void *val, size_t vlen,
                  bkv_err *e);
/* Appends src's entries to dst (both valid reps). */
BKV_MUST_CHECK int bkv_batch_append(bkv_buf *dst, const bkv_buf *src); /* -1: out of memory */

typedef int (*bkv_batch_fn)(void *arg, uint64_t seq, unsigned type, const uint8_t *key, size_t klen,
                            const uint8_t *val, size_t vlen);
/* Validates rep and calls fn (when not NULL) for each entry (sequence first + i); stops at
 * the first non-zero return and returns it. BKV_CORRUPTION (described with
 * name and offset) for a malformed rep. */
int bkv_batch_iterate(const uint8_t *rep, size_t len, bkv_batch_fn fn, void *arg, const char *name,
                      uint64_t offset, bkv_err *e);

#endif
