/* The filter handle: type dispatch, sizing, the serialized form and its
 * validation. Layout in filter_int.h and docs/format.md. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter/filter_int.h"
#include "util/alloc.h"
#include "util/coding.h"
#include "util/hash.h"

static const bkv_filter_ops *ops_for_type(int type) {
    switch (type) {
    case BKV_FILTER_BLOOM: return &bkv_bloom_ops;
    case BKV_FILTER_BLOCKED_BLOOM: return &bkv_blocked_bloom_ops;
    case BKV_FILTER_RIBBON: return &bkv_ribbon_ops;
    case BKV_FILTER_FUSE8: return &bkv_fuse8_ops;
    case BKV_FILTER_FUSE16: return &bkv_fuse16_ops;
    case BKV_FILTER_XOR8: return &bkv_xor8_ops;
    case BKV_FILTER_CUCKOO8: return &bkv_cuckoo8_ops;
    case BKV_FILTER_CUCKOO12: return &bkv_cuckoo12_ops;
    case BKV_FILTER_CUCKOO16: return &bkv_cuckoo16_ops;
    case BKV_FILTER_COUNTING: return &bkv_counting_ops;
    case BKV_FILTER_RANGE: return &bkv_range_ops;
    default: return NULL;
    }
}

const char *bkv_filter_type_name(int type) {
    if (type == BKV_FILTER_NONE) return "none";
    const bkv_filter_ops *ops = ops_for_type(type);
    return ops ? ops->name : NULL;
}

int bkv_filter_type_from_name(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "none") == 0) return BKV_FILTER_NONE;
    for (int t = 1; t < 256; t++) {
        const bkv_filter_ops *ops = ops_for_type(t);
        if (ops && strcmp(ops->name, name) == 0) return t;
    }
    return -1;
}

static int spec_valid(const bkv_filter_spec *spec) {
    if (!spec || !ops_for_type(spec->type)) return 0;
    if (spec->bits_per_key > 0) return spec->bits_per_key <= 1024;
    return spec->fpr > 0 && spec->fpr < 1;
}

int bkv_filter_alloc_payload(bkv_filter *f) {
    f->payload = bkv_alloc_probe_region(f->payload_len);
    if (!f->payload) return BKV_NOMEM;
    f->owned = true;
    f->aligned = true;
    return BKV_OK;
}

/* Few buckets keep the scatter's write streams few: 2^16 made the sort
 * 2-3x slower at 10 M keys, with no gain in the banding that follows. */
void bkv_sort_by_top_bits(uint64_t *keys, size_t n, uint64_t *tmp) {
    unsigned bits = 1;
    while (bits < 12 && ((size_t)4096 << bits) <= n) bits++;
    size_t nb = (size_t)1 << bits;
    size_t *count = calloc(nb + 1, sizeof *count);
    if (!count) return;
    for (size_t i = 0; i < n; i++) count[(keys[i] >> (64 - bits)) + 1]++;
    for (size_t b = 0; b < nb; b++) count[b + 1] += count[b];
    for (size_t i = 0; i < n; i++) tmp[count[keys[i] >> (64 - bits)]++] = keys[i];
    memcpy(keys, tmp, n * sizeof *keys);
    free(count);
}

int bkv_filter_create(const bkv_filter_spec *spec, uint64_t expected_keys, bkv_filter **out) {
    if (!out) return BKV_INVALID;
    *out = NULL;
    if (!spec_valid(spec)) return BKV_INVALID;
    const bkv_filter_ops *ops = ops_for_type(spec->type);
    if (!ops->size) return BKV_INVALID; /* static: needs every key up front */
    bkv_filter *f = calloc(1, sizeof *f);
    if (!f) return BKV_NOMEM;
    f->ops = ops;
    f->hash_seed = spec->hash_seed;
    f->rng = 0x853c49e6748fea9bULL;
    int rc = f->ops->size(f, spec, expected_keys);
    if (rc == BKV_OK) rc = bkv_filter_alloc_payload(f);
    if (rc != BKV_OK) {
        free(f);
        return rc;
    }
    *out = f;
    return BKV_OK;
}

static int cmp_hash(const void *a, const void *b) {
    bkv_hash x = *(const bkv_hash *)a, y = *(const bkv_hash *)b;
    return x < y ? -1 : x > y;
}

int bkv_filter_build(const bkv_filter_spec *spec, const bkv_hash *hashes, size_t n, bkv_filter **out) {
    if (!out) return BKV_INVALID;
    *out = NULL;
    if (!spec_valid(spec) || (n && !hashes)) return BKV_INVALID;
    const bkv_filter_ops *ops = ops_for_type(spec->type);
    if (ops->build) {
        bkv_filter *f = calloc(1, sizeof *f);
        if (!f) return BKV_NOMEM;
        f->ops = ops;
        f->hash_seed = spec->hash_seed;
        int rc = ops->build(f, spec, hashes, n);
        if (rc != BKV_OK) {
            bkv_filter_destroy(f);
            return rc;
        }
        f->num_keys = n;
        *out = f;
        return BKV_OK;
    }
    /* A deletable filter stores a copy per add: a key given twice would
     * take two slots (a cuckoo bucket pair holds at most eight copies, then
     * answers BKV_FULL), so it gets each distinct hash once, as a set. */
    bkv_hash *distinct = NULL;
    if (bkv_filter_is_deletable(spec->type) && n > 1) {
        if (!(distinct = malloc(n * sizeof *distinct))) return BKV_NOMEM;
        memcpy(distinct, hashes, n * sizeof *distinct);
        qsort(distinct, n, sizeof *distinct, cmp_hash);
        size_t m = 1;
        for (size_t i = 1; i < n; i++)
            if (distinct[i] != distinct[m - 1]) distinct[m++] = distinct[i];
        hashes = distinct;
        n = m;
    }
    /* A cuckoo filter sized for exactly n keys can still fill up (a small
     * one especially, whose few buckets leave little room to kick): a
     * whole set must always build, so it is sized up and built again. */
    int rc = BKV_FULL;
    for (uint64_t capacity = n, tries = 0; rc == BKV_FULL && tries < 8; capacity += capacity / 2 + 8, tries++) {
        rc = bkv_filter_create(spec, capacity, out);
        for (size_t i = 0; rc == BKV_OK && i < n; i++) rc = bkv_filter_add(*out, hashes[i]);
        if (rc != BKV_OK) {
            bkv_filter_destroy(*out);
            *out = NULL;
        }
    }
    free(distinct);
    return rc;
}

int bkv_filter_add(bkv_filter *f, bkv_hash h) {
    if (!f || !f->owned || !f->ops->add) return BKV_INVALID;
    int rc = f->ops->add(f, h, false);
    if (rc == BKV_OK) f->num_keys++;
    return rc;
}

int bkv_filter_add_concurrent(bkv_filter *f, bkv_hash h) {
    if (!f || !f->owned || !f->ops->add || f->ops->remove) return BKV_INVALID;
    int rc = f->ops->add(f, h, true);
    if (rc == BKV_OK) __atomic_fetch_add(&f->num_keys, 1, __ATOMIC_RELAXED);
    return rc;
}

uint64_t bkv_filter_count(const bkv_filter *f, bkv_hash h) {
    if (!f) return 1;
    return f->ops->count ? f->ops->count(f, h) : (uint64_t)f->ops->may_contain(f, h);
}

int bkv_filter_delete(bkv_filter *f, bkv_hash h) {
    if (!f || !f->owned || !f->ops->remove) return BKV_INVALID;
    int rc = f->ops->remove(f, h);
    if (rc == BKV_OK) f->num_keys--;
    return rc;
}

int bkv_filter_move_entries(bkv_filter *from, bkv_filter *to, uint64_t limit, uint64_t *moved) {
    if (moved) *moved = 0;
    if (!from || !to || from == to || !from->owned || !to->owned || !from->ops->move || from->ops != to->ops ||
        from->num_bits != to->num_bits || memcmp(from->params, to->params, sizeof from->params) != 0)
        return BKV_INVALID;
    uint64_t n = from->ops->move(from, to, limit);
    from->num_keys -= n < from->num_keys ? n : from->num_keys;
    to->num_keys += n;
    if (moved) *moved = n;
    return BKV_OK;
}

int bkv_filter_is_static(int type) {
    const bkv_filter_ops *ops = ops_for_type(type);
    return ops && ops->build != NULL;
}

int bkv_filter_is_deletable(int type) {
    const bkv_filter_ops *ops = ops_for_type(type);
    return ops && ops->remove != NULL;
}

void bkv_filter_batch_by_single(const bkv_filter *f, const bkv_hash *h, size_t n, uint8_t *out) {
    for (size_t i = 0; i < n; i++) out[i] = (uint8_t)f->ops->may_contain(f, h[i]);
}

int bkv_filter_may_contain(const bkv_filter *f, bkv_hash h) {
    return f ? f->ops->may_contain(f, h) : 1;
}

void bkv_filter_may_contain_batch(const bkv_filter *f, const bkv_hash *hashes, size_t n,
                                  uint8_t *out) {
    if (!f) {
        memset(out, 1, n);
        return;
    }
    f->ops->may_contain_batch(f, hashes, n, out);
}

void bkv_filter_prefetch(const bkv_filter *f, bkv_hash h) {
    if (f && f->ops->prefetch) f->ops->prefetch(f, h);
}

void bkv_filter_get_info(const bkv_filter *f, bkv_filter_info *info) {
    memset(info, 0, sizeof *info);
    info->type = f->ops->type;
    info->k = f->k;
    info->hash_seed = f->hash_seed;
    info->num_keys = f->num_keys;
    info->num_bits = f->num_bits;
    info->encoded_bytes = bkv_filter_encoded_size(f);
    /* Memory, not m: the types differ in how many bits a position takes. */
    info->bits_per_key = f->num_keys ? (double)f->payload_len * 8 / (double)f->num_keys : 0.0;
    info->expected_fpr = bkv_filter_model_fpr(info->type, f->k, f->num_bits, f->num_keys);
}

size_t bkv_filter_encoded_size(const bkv_filter *f) {
    return BKV_FILTER_HEADER_LEN + f->payload_len + BKV_FILTER_TRAILER_LEN;
}

int bkv_filter_encode_header(const bkv_filter *f, void *dst, size_t cap) {
    if (!f || !dst || cap < BKV_FILTER_HEADER_LEN) return BKV_INVALID;
    uint8_t *p = dst;
    memset(p, 0, BKV_FILTER_HEADER_LEN);
    bkv_put_u32(p + 0, BKV_FILTER_MAGIC);
    bkv_put_u16(p + 4, BKV_FILTER_VERSION);
    p[6] = (uint8_t)f->ops->type;
    p[7] = (uint8_t)f->k;
    bkv_put_u32(p + 8, f->hash_seed);
    bkv_put_u32(p + 12, f->filter_seed);
    bkv_put_u64(p + 16, f->num_keys);
    bkv_put_u64(p + 24, f->num_bits);
    bkv_put_u64(p + 32, f->payload_len);
    for (int i = 0; i < 3; i++) bkv_put_u64(p + 40 + 8 * i, f->params[i]);
    return BKV_OK;
}

int bkv_filter_encode(const bkv_filter *f, void *dst, size_t cap) {
    size_t need = bkv_filter_encoded_size(f);
    if (cap < need) return BKV_INVALID;
    uint8_t *p = dst;
    bkv_filter_encode_header(f, p, cap);
    memcpy(p + BKV_FILTER_HEADER_LEN, f->payload, f->payload_len);
    size_t body = BKV_FILTER_HEADER_LEN + f->payload_len;
    bkv_put_u64(p + body, bkv_checksum(p, body));
    return BKV_OK;
}

static int fail(int rc, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Parses and validates a serialized filter into *f, which then probes buf
 * in place. */
/* The magic and version every header starts with. */
static int check_ident(const uint8_t *p, char *err, size_t errlen) {
    if (bkv_get_u32(p) != BKV_FILTER_MAGIC) return fail(BKV_CORRUPTION, err, errlen, "filter: bad magic at offset 0");
    uint16_t version = bkv_get_u16(p + 4);
    if (version != BKV_FILTER_VERSION)
        return fail(BKV_INVALID, err, errlen, "filter: unsupported version %u at offset 4", version);
    return BKV_OK;
}

/* The header's fields into f (its payload pointer left unset), validated:
 * a known type, counts the payload can hold, the type's own geometry. */
static int read_fields(const uint8_t *p, bkv_filter *f, char *err, size_t errlen) {
    const bkv_filter_ops *ops = ops_for_type(p[6]);
    if (!ops) return fail(BKV_INVALID, err, errlen, "filter: unknown type %u at offset 6", p[6]);
    memset(f, 0, sizeof *f);
    f->ops = ops;
    f->k = p[7];
    f->hash_seed = bkv_get_u32(p + 8);
    f->filter_seed = bkv_get_u32(p + 12);
    for (int i = 0; i < 3; i++) f->params[i] = bkv_get_u64(p + 40 + 8 * i);
    f->num_keys = bkv_get_u64(p + 16);
    f->num_bits = bkv_get_u64(p + 24);
    f->payload_len = (size_t)bkv_get_u64(p + 32);
    /* No type stores fewer than a bit per bit, counter or cell counted,
     * so a count beyond the payload's bits is refused here, for every
     * type: the types' rules round counts up to bytes, which wraps near
     * 2^64 (found by fuzz_filter: a count of 2^64 - 1 matched an empty
     * payload). Bounded here, those rules need no guard of their own. */
    if (f->num_bits > (uint64_t)f->payload_len * 8)
        return fail(BKV_CORRUPTION, err, errlen, "filter: bit count at offset 24 exceeds the %zu-byte payload",
                    f->payload_len);
    const char *why = ops->check_geometry(f);
    if (why) return fail(BKV_CORRUPTION, err, errlen, "filter: %s (header offsets 7..63)", why);
    return BKV_OK;
}

static int parse_view(const uint8_t *p, size_t len, unsigned flags, bkv_filter *f, char *err, size_t errlen) {
    if (!p || len < BKV_FILTER_HEADER_LEN + BKV_FILTER_TRAILER_LEN)
        return fail(BKV_CORRUPTION, err, errlen, "filter truncated: %zu bytes, header and trailer need %d",
                    len, BKV_FILTER_HEADER_LEN + BKV_FILTER_TRAILER_LEN);
    int rc = check_ident(p, err, errlen);
    if (rc) return rc;
    uint64_t payload_len = bkv_get_u64(p + 32);
    if (payload_len != len - BKV_FILTER_HEADER_LEN - BKV_FILTER_TRAILER_LEN)
        return fail(BKV_CORRUPTION, err, errlen,
                    "filter: payload length %llu at offset 32 does not fit a %zu-byte filter",
                    (unsigned long long)payload_len, len);
    size_t body = len - BKV_FILTER_TRAILER_LEN;
    if (!(flags & BKV_FILTER_OPEN_TRUSTED) && bkv_get_u64(p + body) != bkv_checksum(p, body))
        return fail(BKV_CORRUPTION, err, errlen, "filter: checksum mismatch (trailer at offset %zu)", body);
    if ((rc = read_fields(p, f, err, errlen))) return rc;
    f->payload = (uint8_t *)p + BKV_FILTER_HEADER_LEN;
    f->aligned = ((uintptr_t)f->payload & 63) == 0;
    return BKV_OK;
}

int bkv_filter_open(const void *buf, size_t len, unsigned flags, bkv_filter **out, char *err,
                    size_t errlen) {
    if (!out) return fail(BKV_INVALID, err, errlen, "bkv_filter_open: out is NULL");
    *out = NULL;
    bkv_filter view;
    int rc = parse_view(buf, len, flags, &view, err, errlen);
    if (rc) return rc;
    bkv_filter *f = malloc(sizeof *f);
    if (!f) return BKV_NOMEM;
    *f = view;
    if (flags & BKV_FILTER_OPEN_COPY) {
        const uint8_t *src = f->payload;
        size_t n = f->payload_len;
        if (bkv_filter_alloc_payload(f)) {
            free(f);
            return fail(BKV_NOMEM, err, errlen, "filter: out of memory copying %zu bytes", n);
        }
        memcpy(f->payload, src, f->payload_len);
        f->rng = 0x853c49e6748fea9bULL;
    }
    *out = f;
    return BKV_OK;
}

_Static_assert(BKV_FILTER_HEADER_BYTES == BKV_FILTER_HEADER_LEN, "the public header size is the format's");

const void *bkv_filter_payload(const bkv_filter *f, size_t *len) {
    *len = f ? f->payload_len : 0;
    return f ? f->payload : NULL;
}

int bkv_filter_open_header(const void *header, size_t len, size_t max_payload, bkv_filter **out, char *err,
                           size_t errlen) {
    if (!out) return fail(BKV_INVALID, err, errlen, "bkv_filter_open_header: out is NULL");
    *out = NULL;
    const uint8_t *p = header;
    if (!p || len != BKV_FILTER_HEADER_LEN)
        return fail(BKV_CORRUPTION, err, errlen, "filter header: %zu bytes, not %d", len, BKV_FILTER_HEADER_LEN);
    uint64_t payload_len = bkv_get_u64(p + 32);
    if (payload_len > max_payload)
        return fail(BKV_INVALID, err, errlen, "filter header: a payload of %llu bytes is over the bound of %zu",
                    (unsigned long long)payload_len, max_payload);
    bkv_filter view;
    int rc = check_ident(p, err, errlen);
    if (rc || (rc = read_fields(p, &view, err, errlen))) return rc;
    bkv_filter *f = malloc(sizeof *f);
    if (!f) return fail(BKV_NOMEM, err, errlen, "filter header: out of memory");
    *f = view;
    if (bkv_filter_alloc_payload(f)) { /* zeroed: the empty filter the header describes */
        free(f);
        return fail(BKV_NOMEM, err, errlen, "filter header: out of memory for %zu bytes", view.payload_len);
    }
    f->rng = 0x853c49e6748fea9bULL;
    *out = f;
    return BKV_OK;
}
int bkv_filter_load_payload(bkv_filter *f, size_t offset, const void *data, size_t len) {
    if (!f || !f->owned || (len && !data) || offset > f->payload_len || len > f->payload_len - offset)
        return BKV_INVALID;
    if (len) memcpy(f->payload + offset, data, len);
    return BKV_OK;
}

size_t bkv_filter_memory(const bkv_filter *f) {
    return f ? sizeof *f + (f->owned ? f->payload_len : 0) : 0;
}

void bkv_filter_destroy(bkv_filter *f) {
    if (!f) return;
    if (f->owned) free(f->payload);
    free(f);
}
