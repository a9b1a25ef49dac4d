#include "db/write_batch.h"

#include <stdlib.h>
#include <string.h>

#include "db/db_int.h" /* bkv_db_error */
#include "util/coding.h"
#include "util/ikey.h"

static int init_rep(bkv_buf *rep) {
    uint8_t h[BKV_BATCH_HEADER] = {0};
    return bkv_buf_set(rep, h, sizeof h);
}

bkv_batch *bkv_batch_create(void) {
    bkv_batch *b = malloc(sizeof *b);
    if (!b) return NULL;
    bkv_buf_init(&b->rep);
    if (init_rep(&b->rep)) {
        free(b);
        return NULL;
    }
    return b;
}

void bkv_batch_destroy(bkv_batch *b) {
    if (!b) return;
    bkv_buf_free(&b->rep);
    free(b);
}

void bkv_batch_clear(bkv_batch *b) {
    if (!b) return;
    /* The header fits in what the batch already holds: this cannot fail. */
    (void)!init_rep(&b->rep);
}

uint32_t bkv_batch_rep_count(const uint8_t *rep) { return bkv_get_u32(rep + 8); }
uint32_t bkv_batch_count(const bkv_batch *b) { return b && b->rep.len >= BKV_BATCH_HEADER ? bkv_batch_rep_count(b->rep.data) : 0; }
uint64_t bkv_batch_sequence(const uint8_t *rep) { return bkv_get_u64(rep); }

void bkv_batch_set_sequence(bkv_buf *rep, uint64_t seq) { bkv_put_u64(rep->data, seq); }

int bkv_entry_size_check(const char *what, size_t klen, size_t vlen, bkv_err *e) {
    if (klen > BKV_MAX_KEY_SIZE)
        return bkv_fail(e, BKV_INVALID, "%s: key of %zu bytes is longer than the maximum, %zu", what, klen,
                        (size_t)BKV_MAX_KEY_SIZE);
    if (vlen > BKV_MAX_VALUE_SIZE)
        return bkv_fail(e, BKV_INVALID, "%s: value of %zu bytes is longer than the maximum, %zu", what, vlen,
                        (size_t)BKV_MAX_VALUE_SIZE);
    return BKV_OK;
}

int bkv_batch_add(bkv_batch *b, unsigned type, const void *key, size_t klen, const void *val, size_t vlen,
                  bkv_err *e) {
    if (!b || (klen && !key) || (vlen && !val))
        return bkv_fail(e, BKV_INVALID, "write: NULL batch, or a NULL key or value with a length");
    int rc = bkv_entry_size_check("write", klen, vlen, e);
    if (rc) return rc;
    size_t before = b->rep.len;
    if (bkv_buf_put_u8(&b->rep, (uint8_t)type) || bkv_buf_put_slice(&b->rep, key, klen) ||
        (type == BKV_TYPE_VALUE && bkv_buf_put_slice(&b->rep, val, vlen))) {
        b->rep.oom = 0;
        b->rep.len = before;
        return bkv_fail(e, BKV_NOMEM, "write: out of memory adding %zu bytes to a batch", klen + vlen);
    }
    bkv_put_u32(b->rep.data + 8, bkv_batch_rep_count(b->rep.data) + 1);
    return BKV_OK;
}

int bkv_batch_put(bkv_batch *b, const void *key, size_t klen, const void *val, size_t vlen) {
    bkv_err e;
    int rc = bkv_batch_add(b, BKV_TYPE_VALUE, key, klen, val, vlen, &e);
    return rc ? bkv_db_error(NULL, rc, &e) : BKV_OK;
}

int bkv_batch_delete(bkv_batch *b, const void *key, size_t klen) {
    bkv_err e;
    int rc = bkv_batch_add(b, BKV_TYPE_DELETION, key, klen, NULL, 0, &e);
    return rc ? bkv_db_error(NULL, rc, &e) : BKV_OK;
}

int bkv_batch_append_batch(bkv_batch *dst, const bkv_batch *src) {
    if (!dst || !src) return bkv_db_arg_error(NULL, "bkv_batch_append_batch");
    if ((uint64_t)bkv_batch_count(dst) + bkv_batch_count(src) > UINT32_MAX)
        return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_batch_append_batch: more than 2^32-1 operations"});
    if (dst == src) {
        /* Appending a buffer to itself would read what it is writing. */
        bkv_batch *copy = bkv_batch_create();
        int rc = !copy || bkv_batch_append(&copy->rep, &src->rep) ? BKV_NOMEM : bkv_batch_append_batch(dst, copy);
        bkv_batch_destroy(copy);
        return rc == BKV_NOMEM ? bkv_db_error(NULL, rc, &(bkv_err){"bkv_batch_append_batch: out of memory"}) : rc;
    }
    if (bkv_batch_append(&dst->rep, &src->rep))
        return bkv_db_error(NULL, BKV_NOMEM, &(bkv_err){"bkv_batch_append_batch: out of memory"});
    return BKV_OK;
}

size_t bkv_batch_approximate_size(const bkv_batch *b) { return b ? b->rep.len : 0; }

int bkv_batch_append(bkv_buf *dst, const bkv_buf *src) {
    if (bkv_buf_append(dst, src->data + BKV_BATCH_HEADER, src->len - BKV_BATCH_HEADER)) return -1;
    bkv_put_u32(dst->data + 8, bkv_batch_rep_count(dst->data) + bkv_batch_rep_count(src->data));
    return 0;
}

int bkv_batch_iterate(const uint8_t *rep, size_t len, bkv_batch_fn fn, void *arg, const char *name,
                      uint64_t offset, bkv_err *e) {
    if (len < BKV_BATCH_HEADER)
        return bkv_fail(e, BKV_CORRUPTION, "%s: write batch too short at offset %llu", name, (unsigned long long)offset);
    uint64_t seq = bkv_batch_sequence(rep);
    uint32_t count = bkv_batch_rep_count(rep);
    const uint8_t *p = rep + BKV_BATCH_HEADER, *end = rep + len;
    for (uint32_t i = 0; i < count; i++) {
        if (p >= end) goto bad;
        unsigned type = *p++;
        uint64_t klen, vlen = 0;
        const uint8_t *key, *val = NULL;
        if (type != BKV_TYPE_VALUE && type != BKV_TYPE_DELETION) goto bad;
        if (!(p = bkv_get_varint64(p, end, &klen)) || klen > (uint64_t)(end - p)) goto bad;
        key = p;
        p += klen;
        if (type == BKV_TYPE_VALUE) {
            if (!(p = bkv_get_varint64(p, end, &vlen)) || vlen > (uint64_t)(end - p)) goto bad;
            val = p;
            p += vlen;
        }
        if (fn) {
            int rc = fn(arg, seq + i, type, key, (size_t)klen, val, (size_t)vlen);
            if (rc) return rc;
        }
    }
    if (p != end) goto bad;
    return BKV_OK;
bad:
    return bkv_fail(e, BKV_CORRUPTION, "%s: malformed write batch in record at offset %llu", name,
                    (unsigned long long)offset);
}
