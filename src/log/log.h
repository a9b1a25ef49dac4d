/*
 * Log files (write-ahead logs and the manifest): records split into
 * fragments inside 32 KiB blocks, each fragment checksummed. Layout in
 * docs/format.md, "Log file".
 */
#ifndef BKV_LOG_LOG_H
#define BKV_LOG_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/env.h"

#define BKV_LOG_BLOCK 32768
#define BKV_LOG_HEADER 7

enum { BKV_LOG_FULL = 1, BKV_LOG_FIRST = 2, BKV_LOG_MIDDLE = 3, BKV_LOG_LAST = 4 };

typedef struct bkv_log_writer {
    bkv_wfile *file;
    size_t block_offset; /* bytes used in the current block */
    uint64_t size;       /* bytes written */
} bkv_log_writer;

void bkv_log_writer_init(bkv_log_writer *w, bkv_wfile *file);
/* Appends one record (buffered: bkv_file_flush/sync to push it out). */
int bkv_log_add_record(bkv_log_writer *w, const void *data, size_t len, bkv_err *e);

/* What a reader does at damage that is not a torn tail (valid fragments
 * follow it, or the log is not the newest): the bkv_options.wal_recovery
 * modes, in the same order. */
enum { BKV_LOG_DAMAGE_FAIL = 0, BKV_LOG_DAMAGE_STOP = 1, BKV_LOG_DAMAGE_SKIP = 2 };

typedef struct bkv_log_reader {
    const char *name;      /* for messages */
    const uint8_t *data;   /* the whole file */
    size_t len;
    size_t pos;            /* next fragment */
    int tolerate_torn_tail;
    int on_damage;           /* BKV_LOG_DAMAGE_*; FAIL unless set after init */
    bkv_buf record;
    uint64_t record_offset;  /* file offset of the last record returned */
    uint64_t dropped_bytes;  /* torn tail dropped, if any */
    int stopped;             /* STOP: reading ended at damage (later logs must be ignored too) */
    uint64_t damage_offset;  /* STOP/SKIP: where the first damage was found */
    uint64_t skipped_bytes;  /* STOP/SKIP: bytes of damage dropped or skipped */
} bkv_log_reader;

/* data must outlive the reader. tolerate_torn_tail: the log may end in a
 * record cut short by a crash (only true of the newest log). */
void bkv_log_reader_init(bkv_log_reader *r, const char *name, const uint8_t *data, size_t len,
                         int tolerate_torn_tail);
void bkv_log_reader_free(bkv_log_reader *r);
/* BKV_OK with the next record in r->record, BKV_NOTFOUND at the end, or
 * BKV_CORRUPTION naming the file and offset. */
int bkv_log_read_record(bkv_log_reader *r, bkv_err *e);

#endif
