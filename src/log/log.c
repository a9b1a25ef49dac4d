#include "log/log.h"

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

/* The first offset >= from where a valid fragment starts, or len. A
 * fragment can start at any offset (records are not aligned), so every
 * one is tried; a random match needs a 32-bit checksum hit, about 2^-32. */
static size_t next_valid_fragment(const bkv_log_reader *r, size_t from) {
    for (size_t off = from; off < r->len; off++) {
        if (BKV_LOG_BLOCK - off % BKV_LOG_BLOCK < BKV_LOG_HEADER) continue;
        if (!fragment_problem(r, off)) return off;
    }
    return r->len;
}

/* Damage at off is a torn tail when no valid fragment starts at or after
 * search_from: a crash can only have cut the unsynced end of the file. A
 * valid fragment after the damage, even in the same block, means bytes in
 * the middle went bad and records that were written after them are still
 * there: dropping them with the tail would lose acknowledged writes
 * without a word. */
static int damage(bkv_log_reader *r, size_t off, const char *what, size_t search_from, bkv_err *e) {
    size_t next = next_valid_fragment(r, search_from);
    if (r->tolerate_torn_tail && next == r->len) {
        r->dropped_bytes = r->len - (r->record.len ? r->record_offset : off);
        r->pos = r->len;
        return BKV_NOTFOUND;
    }
    if (r->on_damage == BKV_LOG_DAMAGE_FAIL) {
        if (next < r->len)
            return bkv_fail(e, BKV_CORRUPTION, "%s: %s at offset %zu, with valid records after it (from offset %zu)",
                            r->name, what, off, next);
        return bkv_fail(e, BKV_CORRUPTION, "%s: %s at offset %zu", r->name, what, off);
    }
    size_t from = r->record.len ? r->record_offset : off;
    if (!r->skipped_bytes) r->damage_offset = from;
    if (r->on_damage == BKV_LOG_DAMAGE_STOP) {
        r->skipped_bytes += r->len - from;
        r->stopped = 1;
        r->pos = r->len;
        return BKV_NOTFOUND;
    }
    r->skipped_bytes += next - from;
    r->pos = next;
    bkv_buf_clear(&r->record);
    return BKV_OK; /* the caller goes on reading at next */
}

static int zeros_to_end(const bkv_log_reader *r, size_t off) {
    for (size_t i = off; i < r->len; i++)
        if (r->data[i]) return 0;
    return 1;
}

int bkv_log_read_record(bkv_log_reader *r, bkv_err *e) {
    bkv_buf_clear(&r->record);
    int in_record = 0, rc;
    for (;;) {
        size_t block_left = BKV_LOG_BLOCK - r->pos % BKV_LOG_BLOCK;
        if (block_left < BKV_LOG_HEADER) {
            r->pos += block_left; /* trailer padding */
            continue;
        }
        if (r->pos >= r->len) {
            if (!in_record) return BKV_NOTFOUND;
            rc = damage(r, r->record_offset, "record cut short by end of file", r->len, e);
            if (rc) return rc;
            in_record = 0;
            continue;
        }
        size_t off = r->pos;
        const char *why = fragment_problem(r, off);
        if (why && !in_record && zeros_to_end(r, off)) {
            r->pos = r->len; /* the preallocated, never written end of a mapped log */
            return BKV_NOTFOUND;
        }
        if (why) {
            if ((rc = damage(r, off, why, off + 1, e))) return rc;
            in_record = 0;
            continue;
        }
        const uint8_t *h = r->data + off;
        size_t n = bkv_get_u16(h + 4);
        unsigned type = h[6];
        r->pos = off + BKV_LOG_HEADER + n;
        const uint8_t *payload = h + BKV_LOG_HEADER;
        switch (type) {
        case BKV_LOG_FULL:
        case BKV_LOG_FIRST:
            if (in_record) {
                /* Its end was lost: damage to the record in progress. */
                r->pos = off;
                if ((rc = damage(r, r->record_offset, "record never ended", off, e))) return rc;
                in_record = 0;
                continue;
            }
            r->record_offset = off;
            if (bkv_buf_append(&r->record, payload, n)) goto done;
            if (type == BKV_LOG_FULL) goto done;
            in_record = 1;
            break;
        default:
            if (!in_record) {
                /* An orphan can never complete a record: the search for
                 * the next valid fragment starts past it (from off, it
                 * would find this one again and never move). */
                if ((rc = damage(r, off, "fragment without a start", r->pos, e))) return rc;
                continue;
            }
            if (bkv_buf_append(&r->record, payload, n)) goto done;
            if (type == BKV_LOG_LAST) goto done;
            break;
        }
    }
done:
    if (r->record.oom) return bkv_fail(e, BKV_NOMEM, "%s: out of memory reading a record", r->name);
    return BKV_OK;
}
