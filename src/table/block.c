#include "table/block.h"

#include <string.h>

#include "util/coding.h"

void bkv_block_builder_init(bkv_block_builder *b, int restart_interval) {
    bkv_buf_init(&b->buf);
    bkv_buf_init(&b->restarts);
    bkv_buf_init(&b->last_key);
    b->interval = restart_interval > 0 ? restart_interval : 16;
    bkv_block_builder_reset(b);
}

void bkv_block_builder_free(bkv_block_builder *b) {
    bkv_buf_free(&b->buf);
    bkv_buf_free(&b->restarts);
    bkv_buf_free(&b->last_key);
}

/* Allocates nothing: the first add records restart point 0. */
void bkv_block_builder_reset(bkv_block_builder *b) {
    bkv_buf_clear(&b->buf);
    bkv_buf_clear(&b->restarts);
    bkv_buf_clear(&b->last_key);
    b->counter = b->interval;
    b->entries = 0;
}

int bkv_block_builder_empty(const bkv_block_builder *b) { return b->entries == 0; }

int bkv_block_builder_add(bkv_block_builder *b, const uint8_t *key, size_t klen, const uint8_t *val,
                          size_t vlen) {
    size_t shared = 0;
    if (b->counter < b->interval) {
        size_t n = klen < b->last_key.len ? klen : b->last_key.len;
        while (shared < n && key[shared] == b->last_key.data[shared]) shared++;
    } else {
        if (bkv_buf_put_u32(&b->restarts, (uint32_t)b->buf.len)) return -1;
        b->counter = 0;
    }
    if (bkv_buf_put_varint(&b->buf, shared) || bkv_buf_put_varint(&b->buf, klen - shared) ||
        bkv_buf_put_varint(&b->buf, vlen) || bkv_buf_append(&b->buf, key + shared, klen - shared) ||
        bkv_buf_append(&b->buf, val, vlen) || bkv_buf_set(&b->last_key, key, klen))
        return -1;
    b->counter++;
    b->entries++;
    return 0;
}

size_t bkv_block_builder_size_estimate(const bkv_block_builder *b) {
    return b->buf.len + b->restarts.len + 4;
}

int bkv_block_builder_finish(bkv_block_builder *b) {
    if (b->restarts.len == 0 && bkv_buf_put_u32(&b->restarts, 0)) return -1; /* an empty block */
    return bkv_buf_append(&b->buf, b->restarts.data, b->restarts.len) ||
                   bkv_buf_put_u32(&b->buf, (uint32_t)(b->restarts.len / 4))
               ? -1
               : 0;
}

int bkv_block_parse(bkv_block *blk, const uint8_t *data, size_t len) {
    if (len < 4) return -1;
    uint32_t n = bkv_get_u32(data + len - 4);
    if (n == 0 || n > (len - 4) / 4) return -1;
    blk->data = data;
    blk->restarts = data + len - 4 - 4 * (size_t)n;
    blk->num_restarts = n;
    blk->len = (size_t)(blk->restarts - data);
    for (uint32_t i = 0; i < n; i++)
        if (bkv_get_u32(blk->restarts + 4 * i) > blk->len) return -1;
    return 0;
}

void bkv_block_iter_init(bkv_block_iter *it, const bkv_block *blk) {
    it->blk = blk;
    it->offset = it->next = 0;
    it->restart = 0;
    it->val = NULL;
    it->vlen = 0;
    it->valid = it->corrupt = it->oom = 0;
    bkv_buf_init_with(&it->key, it->key_mem, sizeof it->key_mem);
}

void bkv_block_iter_free(bkv_block_iter *it) { bkv_buf_free(&it->key); }

static uint32_t restart_offset(const bkv_block *blk, uint32_t i) { return bkv_get_u32(blk->restarts + 4 * (size_t)i); }

/* An entry's header: three varints, each almost always one byte. */
static inline const uint8_t *decode_header(const uint8_t *p, const uint8_t *end, uint64_t *shared,
                                           uint64_t *unshared, uint64_t *vlen) {
    if (end - p >= 3 && ((p[0] | p[1] | p[2]) & 0x80) == 0) {
        *shared = p[0];
        *unshared = p[1];
        *vlen = p[2];
        return p + 3;
    }
    if (!(p = bkv_get_varint64(p, end, shared)) || !(p = bkv_get_varint64(p, end, unshared))) return NULL;
    return bkv_get_varint64(p, end, vlen);
}

/* Decodes the entry at it->next; the key so far is its predecessor's. */
static void decode_next(bkv_block_iter *it) {
    const bkv_block *blk = it->blk;
    if (it->next >= blk->len) {
        it->valid = 0;
        return;
    }
    const uint8_t *p = blk->data + it->next, *end = blk->data + blk->len;
    uint64_t shared, unshared, vlen;
    if (!(p = decode_header(p, end, &shared, &unshared, &vlen)) || shared > it->key.len ||
        unshared > (uint64_t)(end - p) || vlen > (uint64_t)(end - p) - unshared) {
        it->valid = 0;
        it->corrupt = 1;
        return;
    }
    it->offset = it->next;
    while (it->restart + 1 < blk->num_restarts && restart_offset(blk, it->restart + 1) <= it->offset) it->restart++;
    if (shared + unshared <= it->key.cap) {
        memcpy(it->key.data + shared, p, (size_t)unshared);
        it->key.len = (size_t)(shared + unshared);
    } else {
        it->key.len = (size_t)shared;
        if (bkv_buf_append(&it->key, p, (size_t)unshared)) {
            it->valid = 0;
            it->oom = 1;
            return;
        }
    }
    it->val = p + unshared;
    it->vlen = (size_t)vlen;
    it->next = (size_t)(it->val + vlen - blk->data);
    it->valid = 1;
}

static void seek_restart(bkv_block_iter *it, uint32_t i) {
    it->key.len = 0;
    it->restart = i;
    it->next = restart_offset(it->blk, i);
}

void bkv_block_iter_seek_restart(bkv_block_iter *it, uint32_t i) {
    if (i >= it->blk->num_restarts) {
        it->valid = 0;
        return;
    }
    seek_restart(it, i);
    decode_next(it);
}

void bkv_block_iter_first(bkv_block_iter *it) {
    seek_restart(it, 0);
    decode_next(it);
}

void bkv_block_iter_next(bkv_block_iter *it) { decode_next(it); }

int64_t bkv_block_iter_restart_ordinal(const bkv_block_iter *it) {
    if (!it->valid || restart_offset(it->blk, it->restart) != it->offset) return -1;
    return it->restart;
}

/* The key stored whole at restart point i, compared in place (no copy);
 * 0 and it->corrupt set when the entry is malformed. */
static int restart_key(bkv_block_iter *it, uint32_t i, const uint8_t **key, size_t *klen) {
    const bkv_block *blk = it->blk;
    size_t off = restart_offset(blk, i);
    const uint8_t *p = blk->data + off, *end = blk->data + blk->len;
    uint64_t shared, unshared, vlen;
    if (off >= blk->len || !(p = decode_header(p, end, &shared, &unshared, &vlen)) || shared != 0 ||
        unshared > (uint64_t)(end - p)) {
        it->valid = 0;
        it->corrupt = 1;
        return 0;
    }
    *key = p;
    *klen = (size_t)unshared;
    return 1;
}

void bkv_block_iter_seek(bkv_block_iter *it, const uint8_t *target, size_t tlen, bkv_key_cmp cmp) {
    /* Binary search for the last restart point whose key < target. */
    uint32_t lo = 0, hi = it->blk->num_restarts - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        const uint8_t *k;
        size_t kl;
        if (!restart_key(it, mid, &k, &kl)) return;
        if (cmp(k, kl, target, tlen) >= 0) hi = mid - 1;
        else lo = mid;
    }
    seek_restart(it, lo);
    for (decode_next(it); it->valid; decode_next(it))
        if (cmp(it->key.data, it->key.len, target, tlen) >= 0) return;
}

void bkv_block_iter_last(bkv_block_iter *it) {
    seek_restart(it, it->blk->num_restarts - 1);
    decode_next(it);
    while (it->valid && it->next < it->blk->len) {
        decode_next(it);
    }
}

void bkv_block_iter_prev(bkv_block_iter *it) {
    size_t original = it->offset;
    /* The last restart point before the current entry. */
    uint32_t lo = 0, hi = it->blk->num_restarts;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (bkv_get_u32(it->blk->restarts + 4 * (size_t)mid) < original) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) {
        it->valid = 0;
        return;
    }
    seek_restart(it, lo - 1);
    do {
        decode_next(it);
    } while (it->valid && it->next < original);
    if (it->valid && it->next != original) {
        it->valid = 0;
        it->corrupt = 1;
    }
}
