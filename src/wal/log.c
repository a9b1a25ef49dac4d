#include "wal/log.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "util/coding.h"

/* The length and type are folded in through the seed, so the checksum
 * covers every byte of the fragment but itself. */
static uint32_t fragment_checksum(unsigned type, const uint8_t *p, size_t n) {
    return (uint32_t)XXH3_64bits_withSeed(p, n, (uint64_t)type | ((uint64_t)n << 8));
}

void bkv_log_writer_init(bkv_log_writer *w, bkv_wfile *file) {
    w->file = file;
    w->block_offset = 0;
    w->size = 0;
}

int bkv_log_add_record(bkv_log_writer *w, const void *data, size_t len, bkv_err *e) {
    const uint8_t *p = data;
    int begin = 1;
    do {
        size_t left = BKV_LOG_BLOCK - w->block_offset;
        if (left < BKV_LOG_HEADER) {
            static const uint8_t zeros[BKV_LOG_HEADER] = {0};
            if (left > 0) {
                int rc = bkv_file_append(w->file, zeros, left, e);
                if (rc) return rc;
                w->size += left;
            }
            w->block_offset = 0;
            left = BKV_LOG_BLOCK;
        }
        size_t avail = left - BKV_LOG_HEADER;
        size_t frag = len < avail ? len : avail;
        int end = frag == len;
        unsigned type = begin && end ? BKV_LOG_FULL : begin ? BKV_LOG_FIRST : end ? BKV_LOG_LAST : BKV_LOG_MIDDLE;
        uint8_t h[BKV_LOG_HEADER];
        bkv_put_u32(h, fragment_checksum(type, p, frag));
        bkv_put_u16(h + 4, (uint16_t)frag);
        h[6] = (uint8_t)type;
        int rc = bkv_file_append(w->file, h, BKV_LOG_HEADER, e);
        if (!rc && frag) rc = bkv_file_append(w->file, p, frag, e);
        if (rc) return rc;
        w->block_offset += BKV_LOG_HEADER + frag;
        w->size += BKV_LOG_HEADER + frag;
        p += frag;
        len -= frag;
        begin = 0;
    } while (len > 0);
    return BKV_OK;
}

void bkv_log_reader_init(bkv_log_reader *r, const char *name, const uint8_t *data, size_t len,
                         int tolerate_torn_tail) {
    memset(r, 0, sizeof *r);
    r->name = name;
    r->data = data;
    r->len = len;
    r->tolerate_torn_tail = tolerate_torn_tail;
    bkv_buf_init(&r->record);
}

void bkv_log_reader_free(bkv_log_reader *r) { bkv_buf_free(&r->record); }

/* NULL if a well-formed fragment with a valid checksum starts at off
 * (which must be at least a header's length before its block's end), else
 * what is wrong with it. */
static const char *fragment_problem(const bkv_log_reader *r, size_t off) {
    size_t block_left = BKV_LOG_BLOCK - off % BKV_LOG_BLOCK;
    if (r->len - off < BKV_LOG_HEADER) return "truncated fragment header";
    const uint8_t *h = r->data + off;
    size_t n = bkv_get_u16(h + 4);
    unsigned type = h[6];
    if (BKV_LOG_HEADER + n > block_left) return "fragment length crosses its block";
    if (r->len - off - BKV_LOG_HEADER < n) return "fragment cut short by end of file";
    if (type < BKV_LOG_FULL || type > BKV_LOG_LAST) return "bad fragment type";
    if (bkv_get_u32(h) != fragment_checksum(type, h + BKV_LOG_HEADER, n)) return "fragment checksum mismatch";
    return NULL;
}

/* Damage at off is a torn tail when nothing valid follows it: a crash can
 * only have cut the unsynced end of the file. A valid fragment after the
 * damage means bytes in the middle went bad. */
static int damage(bkv_log_reader *r, size_t off, const char *what, bkv_err *e) {
    int later_valid = 0;
    for (size_t b = (off / BKV_LOG_BLOCK + 1) * BKV_LOG_BLOCK; b < r->len; b += BKV_LOG_BLOCK)
        if (!fragment_problem(r, b)) {
            later_valid = 1;
            break;
        }
    if (r->tolerate_torn_tail && !later_valid) {
        r->dropped_bytes = r->len - (r->record.len ? r->record_offset : off);
        r->pos = r->len;
        return BKV_NOTFOUND;
    }
    return bkv_fail(e, BKV_CORRUPTION, "%s: %s at offset %zu", r->name, what, off);
}

int bkv_log_read_record(bkv_log_reader *r, bkv_err *e) {
    bkv_buf_clear(&r->record);
    int in_record = 0;
    for (;;) {
        size_t block_left = BKV_LOG_BLOCK - r->pos % BKV_LOG_BLOCK;
        if (block_left < BKV_LOG_HEADER) {
            r->pos += block_left; /* trailer padding */
            continue;
        }
        if (r->pos >= r->len) {
            if (in_record) return damage(r, r->record_offset, "record cut short by end of file", e);
            return BKV_NOTFOUND;
        }
        size_t off = r->pos;
        const char *why = fragment_problem(r, off);
        if (why) return damage(r, off, why, e);
        const uint8_t *h = r->data + off;
        size_t n = bkv_get_u16(h + 4);
        unsigned type = h[6];
        r->pos = off + BKV_LOG_HEADER + n;
        const uint8_t *payload = h + BKV_LOG_HEADER;
        switch (type) {
        case BKV_LOG_FULL:
        case BKV_LOG_FIRST:
            if (in_record) return bkv_fail(e, BKV_CORRUPTION, "%s: record at offset %llu never ended (new one at %zu)",
                                           r->name, (unsigned long long)r->record_offset, off);
            r->record_offset = off;
            bkv_buf_append(&r->record, payload, n);
            if (type == BKV_LOG_FULL) goto done;
            in_record = 1;
            break;
        default:
            if (!in_record)
                return bkv_fail(e, BKV_CORRUPTION, "%s: fragment without a start at offset %zu", r->name, off);
            bkv_buf_append(&r->record, payload, n);
            if (type == BKV_LOG_LAST) goto done;
            break;
        }
    }
done:
    if (r->record.oom) return bkv_fail(e, BKV_NOMEM, "%s: out of memory reading a record", r->name);
    return BKV_OK;
}
