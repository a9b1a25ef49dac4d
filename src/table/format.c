#include "table/format.h"

#include <lz4.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "table/table.h"
#include "util/alloc.h"
#include "util/coding.h"

void bkv_footer_encode(const bkv_footer *f, uint8_t *dst) {
    bkv_put_u64(dst + 0, f->index.offset);
    bkv_put_u64(dst + 8, f->index.size);
    bkv_put_u64(dst + 16, f->filter.offset);
    bkv_put_u64(dst + 24, f->filter.size);
    bkv_put_u64(dst + 32, f->props.offset);
    bkv_put_u64(dst + 40, f->props.size);
    bkv_put_u32(dst + 48, f->version);
    bkv_put_u32(dst + 52, 0);
    bkv_put_u64(dst + 56, XXH3_64bits(dst, 56));
    bkv_put_u64(dst + 64, BKV_TABLE_MAGIC);
}

static int handle_ok(bkv_handle h, uint64_t limit) {
    return h.offset <= limit && h.size <= limit && h.offset + h.size + BKV_BLOCK_TRAILER <= limit;
}

int bkv_footer_decode(bkv_footer *f, const uint8_t *src, uint64_t file_size, const char *name, bkv_err *e) {
    uint64_t at = file_size - BKV_FOOTER_LEN;
    if (bkv_get_u64(src + 64) != BKV_TABLE_MAGIC)
        return bkv_fail(e, BKV_CORRUPTION, "%s: not a bloomkv table (bad magic at offset %llu)", name,
                        (unsigned long long)(at + 64));
    if (bkv_get_u64(src + 56) != XXH3_64bits(src, 56))
        return bkv_fail(e, BKV_CORRUPTION, "%s: footer checksum mismatch at offset %llu", name,
                        (unsigned long long)at);
    f->version = bkv_get_u32(src + 48);
    if ((f->version != BKV_TABLE_VERSION && f->version != BKV_TABLE_VERSION_PARTITIONED) || bkv_get_u32(src + 52) != 0)
        return bkv_fail(e, BKV_CORRUPTION, "%s: unsupported table version %u at offset %llu", name, f->version,
                        (unsigned long long)(at + 48));
    f->index = (bkv_handle){bkv_get_u64(src), bkv_get_u64(src + 8)};
    f->filter = (bkv_handle){bkv_get_u64(src + 16), bkv_get_u64(src + 24)};
    f->props = (bkv_handle){bkv_get_u64(src + 32), bkv_get_u64(src + 40)};
    if (!handle_ok(f->index, at) || !handle_ok(f->filter, at) || !handle_ok(f->props, at))
        return bkv_fail(e, BKV_CORRUPTION, "%s: footer block handle out of bounds at offset %llu", name,
                        (unsigned long long)at);
    return BKV_OK;
}

uint64_t bkv_block_checksum(const uint8_t *data, size_t len, uint8_t type) {
    return XXH3_64bits_withSeed(data, len, type);
}

int bkv_block_compress(int type, const uint8_t *raw, size_t len, bkv_buf *out) {
    bkv_buf_clear(out);
    if (type == BKV_COMPRESS_NONE || len < 64 || len > INT32_MAX) return BKV_COMPRESS_NONE;
    size_t bound = type == BKV_COMPRESS_LZ4 ? (size_t)LZ4_compressBound((int)len) : ZSTD_compressBound(len);
    if (bkv_buf_reserve(out, 10 + bound) < 0) return BKV_COMPRESS_NONE;
    size_t hdr = (size_t)(bkv_put_varint64(out->data, len) - out->data);
    size_t n;
    if (type == BKV_COMPRESS_LZ4) {
        int r = LZ4_compress_default((const char *)raw, (char *)out->data + hdr, (int)len, (int)bound);
        n = r > 0 ? (size_t)r : 0;
    } else {
        size_t r = ZSTD_compress(out->data + hdr, bound, raw, len, 3);
        n = ZSTD_isError(r) ? 0 : r;
    }
    if (n == 0 || hdr + n > len - len / 8) return BKV_COMPRESS_NONE;
    out->len = hdr + n;
    return type;
}

int bkv_block_verify(const uint8_t *stored, bkv_handle h, const char *name, bkv_err *e) {
    uint8_t type = stored[h.size];
    if (bkv_get_u64(stored + h.size + 1) != bkv_block_checksum(stored, (size_t)h.size, type))
        return bkv_fail(e, BKV_CORRUPTION, "%s: block checksum mismatch at offset %llu", name,
                        (unsigned long long)h.offset);
    return BKV_OK;
}

static void *plain_alloc(size_t n) { return malloc(n ? n : 1); }

/* Verifies the stored block at stored and, when it is compressed,
 * decompresses it into *raw from alloc (freed with free()); *raw stays
 * NULL for a block stored plain, whose contents are stored itself. */
static int unpack_block(const uint8_t *stored, bkv_handle h, const char *name, uint8_t **raw, size_t *len,
                        bkv_err *e, void *(*alloc)(size_t)) {
    *raw = NULL;
    uint8_t type = stored[h.size];
    int rc = bkv_block_verify(stored, h, name, e);
    if (rc) return rc;
    if (type == BKV_COMPRESS_NONE) {
        *len = (size_t)h.size;
        return BKV_OK;
    }
    uint64_t raw_len;
    const uint8_t *p = bkv_get_varint64(stored, stored + h.size, &raw_len);
    uint8_t *out = NULL;
    int ok = 0;
    if (p && raw_len <= BKV_MAX_BLOCK_SIZE && (out = alloc((size_t)raw_len))) {
        size_t clen = (size_t)(stored + h.size - p);
        if (type == BKV_COMPRESS_LZ4) {
            int r = LZ4_decompress_safe((const char *)p, (char *)out, (int)clen, (int)raw_len);
            ok = r >= 0 && (uint64_t)r == raw_len;
        } else if (type == BKV_COMPRESS_ZSTD) {
            size_t r = ZSTD_decompress(out, raw_len, p, clen);
            ok = !ZSTD_isError(r) && r == raw_len;
        }
    }
    if (!ok) {
        free(out);
        return bkv_fail(e, BKV_CORRUPTION, "%s: cannot decompress block at offset %llu (type %u)", name,
                        (unsigned long long)h.offset, type);
    }
    *raw = out;
    *len = (size_t)raw_len;
    return BKV_OK;
}

int bkv_block_unpack(const uint8_t *stored, bkv_handle h, const char *name, uint8_t **raw, size_t *len, bkv_err *e) {
    return unpack_block(stored, h, name, raw, len, e, plain_alloc);
}

/* alloc: where the block's bytes go (freed with free()). */
static int read_block(bkv_rfile *file, const char *name, bkv_handle h, uint8_t **data, size_t *len, bkv_err *e,
                      void *(*alloc)(size_t)) {
    *data = NULL;
    *len = 0;
    size_t total = (size_t)h.size + BKV_BLOCK_TRAILER;
    uint8_t *buf = alloc(total);
    if (!buf) return bkv_fail(e, BKV_NOMEM, "%s: out of memory reading a block", name);
    size_t got;
    int rc = bkv_file_read_at(file, h.offset, total, buf, &got, e);
    if (!rc && got != total)
        rc = bkv_fail(e, BKV_CORRUPTION, "%s: block at offset %llu truncated (%zu of %zu bytes)", name,
                      (unsigned long long)h.offset, got, total);
    uint8_t *raw = NULL;
    if (!rc) rc = unpack_block(buf, h, name, &raw, len, e, alloc);
    if (rc || raw) free(buf);
    if (!rc) *data = raw ? raw : buf;
    return rc;
}

int bkv_read_block(bkv_rfile *file, const char *name, bkv_handle h, uint8_t **data, size_t *len, bkv_err *e) {
    return read_block(file, name, h, data, len, e, plain_alloc);
}

int bkv_read_filter_block(bkv_rfile *file, const char *name, bkv_handle h, uint8_t **data, size_t *len, bkv_err *e) {
    return read_block(file, name, h, data, len, e, bkv_alloc_random_access);
}
