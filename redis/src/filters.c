/*
 * The filter family as Redis data types, with RedisBloom's commands and
 * replies (docs/redis.md): BF.* on a stack of Bloom filters and CF.* on a
 * stack of cuckoo filters, both in RedisBloom's layouts (classic_bloom.h,
 * classic_cuckoo.h; each stack grows by a sub-filter when the newest is
 * full), and BKV.FILTER.* on one filter of any of the library's types
 * (Ribbon, binary fuse and xor above all) built once over a given set. BF
 * and CF stacks made before the module took RedisBloom's layouts keep the
 * filter library's blocked Bloom and cuckoo filters they were made with
 * (LAYOUT_LIBRARY), and work as they did.
 *
 * Each item is hashed once per command and that hash probes every
 * sub-filter. A value is stored, replicated and moved as one blob: a
 * header and the sub-filters, checksummed (docs/format.md, "Redis module
 * values"), so RDB, DUMP/RESTORE, MIGRATE and the AOF (BKV.FILTER.LOADBLOB)
 * all share one validated decoder.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "classic_bloom.h"
#include "classic_cuckoo.h"
#include "redis_int.h"

#define BLOB_MAGIC 0x46564B42u /* "BKVF" */
#define BLOB_VERSION_LIBRARY 1   /* sub-filters in the filter library's form */
#define BLOB_VERSION_REDISBLOOM 2 /* BF and CF sub-filters in RedisBloom's layouts, one checksum */
#define BLOB_HEADER 64
#define FILTER_ENCVER 1
/* Sub-filters a stack may grow to: each is at least as large as the one
 * before, so this bounds only the smallest, slowest-growing stacks. */
#define MAX_SUBS 65536
/* A scaling filter's sub-filters take half the error rate, then a quarter,
 * and so on, so their sum, the rate an absent item meets, stays under the
 * requested one however far the stack grows (a non-scaling filter's one
 * sub-filter takes the requested rate itself). */
#define BF_TIGHTENING 0.5
#define CF_BUCKET_SLOTS 4   /* the library's cuckoo buckets (LAYOUT_LIBRARY) */
#define CF_TYPE BKV_FILTER_CUCKOO12
/* A client's numbers become sizes only within these bounds: a sub-filter
 * of 2^30 items is about 1.2 GB at 1%, and each growth step is checked
 * against it before it is multiplied. */
#define MAX_CAPACITY ((uint64_t)1 << 30)
#define MAX_EXPANSION 32768
#define MAX_BUCKET_SIZE 255
#define MAX_ITERATIONS 65535

enum { KIND_BF = 1, KIND_CF = 2, KIND_STATIC = 3 };
/* What a stack's sub-filters are: the filter library's, or RedisBloom's
 * Bloom or cuckoo filter layout (classic_bloom.h, classic_cuckoo.h). */
enum { LAYOUT_LIBRARY = 0, LAYOUT_REDISBLOOM = 1 };

/* Both kept small: a filter of a few items costs its structs more than
 * its bits, and RedisBloom's cost no more. A CF in RedisBloom's layout
 * keeps only a pointer per sub-filter: the rest follows from the stack. */
typedef struct sub_filter {
    union {
        bkv_filter *f; /* LAYOUT_LIBRARY */
        uint8_t *bits; /* LAYOUT_REDISBLOOM (BF): bytes of bits, hashes probes, sized for error */
    };
    uint64_t bytes;
    double error;
    uint64_t capacity, count;
    uint32_t hashes;
} sub_filter;

typedef struct fstack {
    uint8_t kind, layout, nonscaling;
    uint8_t probe;            /* LAYOUT_REDISBLOOM: CLASSIC_PROBE_*, of every sub-filter */
    uint16_t max_iterations;  /* CF: as reserved (reported by CF.INFO) */
    uint8_t bucket_size;      /* CF: as reserved */
    uint32_t expansion;
    uint32_t nsubs;           /* in subs, which has room for the next power of two */
    union {
        double error;         /* the requested rate */
        uint64_t cf_buckets;  /* CF in RedisBloom's layout: the first sub-filter's buckets */
    };
    uint64_t items, deletes;
    union {
        sub_filter *subs;
        uint8_t **slots;      /* CF in RedisBloom's layout: sub-filter i has cf_buckets x
                                 expansion^i buckets of bucket_size one-byte slots */
    };
} fstack;

static int has_slots(const fstack *s) { return s->kind == KIND_CF && s->layout == LAYOUT_REDISBLOOM; }

/* The slots of a RedisBloom-layout CF's sub-filter i (UINT64_MAX past
 * MAX_CAPACITY: no sub-filter has that many). */
static uint64_t cf_sub_slots(const fstack *s, uint32_t i) {
    uint64_t n = s->cf_buckets * s->bucket_size;
    if (i > 0 && s->expansion == 0) return UINT64_MAX;
    /* expansion is a power of two: sub-filter i has n << (i x its log) */
    uint64_t shift = i == 0 ? 0 : (uint64_t)__builtin_ctz(s->expansion) * i;
    return shift < 31 && n <= MAX_CAPACITY >> shift ? n << shift : UINT64_MAX;
}

/* Sub-filter i of a RedisBloom-layout stack: its bytes and their length. */
static uint8_t *classic_bytes(const fstack *s, uint32_t i, uint64_t *len) {
    *len = has_slots(s) ? cf_sub_slots(s, i) : s->subs[i].bytes;
    return has_slots(s) ? s->slots[i] : s->subs[i].bits;
}

static RedisModuleType *bf_type, *cf_type, *static_type;

/* What a command that names no size, rate or limit falls back on:
 * RedisBloom's settings, with its names and defaults. Set by module
 * arguments at load (RedisBloom's spellings accepted too) and by CONFIG
 * SET bloomkv.<name> at run time. */
static double bf_error_rate = 0.01;
typedef struct numeric_setting {
    const char *name, *alias; /* alias: RedisBloom's module-argument name, or NULL */
    long long value, min, max;
} numeric_setting;
enum { BF_INITIAL_SIZE, BF_EXPANSION, CF_BUCKET_SIZE, CF_INITIAL_SIZE, CF_MAX_ITERATIONS, CF_EXPANSION,
       CF_MAX_EXPANSIONS, NSETTINGS };
static numeric_setting settings[NSETTINGS] = {
    [BF_INITIAL_SIZE] = {"bf-initial-size", "INITIAL_SIZE", 100, 1, MAX_CAPACITY},
    [BF_EXPANSION] = {"bf-expansion-factor", NULL, 2, 1, MAX_EXPANSION},
    [CF_BUCKET_SIZE] = {"cf-bucket-size", "BUCKET_SIZE", 2, 1, MAX_BUCKET_SIZE},
    [CF_INITIAL_SIZE] = {"cf-initial-size", NULL, 1024, 2, MAX_CAPACITY},
    [CF_MAX_ITERATIONS] = {"cf-max-iterations", "MAX_ITERATIONS", 20, 1, MAX_ITERATIONS},
    [CF_EXPANSION] = {"cf-expansion-factor", NULL, 1, 0, MAX_EXPANSION},
    [CF_MAX_EXPANSIONS] = {"cf-max-expansions", "CF_MAX_EXPANSIONS", 32, 1, MAX_SUBS},
};
#define SETTING(i) ((uint64_t)settings[i].value)

/* The filters' bytes: their payloads come from the filter library's own
 * allocator, which Redis's used_memory does not see. Counted here for
 * maxmemory, INFO bloomkv and MEMORY USAGE. */
static uint64_t filter_bytes;

/* Whether the server may grow by bytes more of filters: with maxmemory
 * set, used_memory plus every filter's bytes must stay within it. */
static int memory_allows(uint64_t bytes) {
    RedisModuleServerInfoData *info = RedisModule_GetServerInfo(NULL, "memory");
    if (!info) return 1;
    int err = 0;
    uint64_t max = RedisModule_ServerInfoGetFieldUnsigned(info, "maxmemory", &err);
    uint64_t used = err ? 0 : RedisModule_ServerInfoGetFieldUnsigned(info, "used_memory", &err);
    RedisModule_FreeServerInfo(NULL, info);
    return err || max == 0 || (used + filter_bytes <= max && bytes <= max - used - filter_bytes);
}

static RedisModuleType *type_of(int kind) {
    return kind == KIND_BF ? bf_type : kind == KIND_CF ? cf_type : static_type;
}

/* The bytes sub-filter i's own memory takes (counted in filter_bytes). */
static uint64_t sub_memory(const fstack *s, uint32_t i) {
    uint64_t len;
    if (s->layout == LAYOUT_LIBRARY) return bkv_filter_memory(s->subs[i].f);
    classic_bytes(s, i, &len);
    return len;
}

static void sub_free(const fstack *s, uint32_t i) {
    filter_bytes -= sub_memory(s, i);
    uint64_t len;
    if (s->layout == LAYOUT_LIBRARY) bkv_filter_destroy(s->subs[i].f);
    else free(classic_bytes(s, i, &len));
}

static void fstack_free(fstack *s) {
    if (!s) return;
    for (uint32_t i = 0; i < s->nsubs; i++) sub_free(s, i);
    RedisModule_Free(s->subs);
    RedisModule_Free(s);
}

static size_t sub_entry_size(const fstack *s) { return has_slots(s) ? sizeof *s->slots : sizeof *s->subs; }

/* The sub-filters subs has room for: nsubs rounded up to a power of two,
 * so the array doubles as it grows without a field to say so. */
static uint32_t subs_room(uint32_t nsubs) {
    uint32_t room = 1;
    while (room < nsubs) room *= 2;
    return room;
}

/* Makes room for one more sub-filter; BKV_FULL past MAX_SUBS. */
static int room_for_sub(fstack *s) {
    if (s->nsubs == MAX_SUBS) return BKV_FULL;
    if (!s->subs || s->nsubs == subs_room(s->nsubs))
        s->subs = RedisModule_Realloc(s->subs, subs_room(s->nsubs + 1) * sub_entry_size(s));
    return BKV_OK;
}

/* Appends sf; BKV_FULL past MAX_SUBS. */
static int push_sub(fstack *s, sub_filter sf) {
    if (room_for_sub(s)) return BKV_FULL;
    s->subs[s->nsubs++] = sf;
    return BKV_OK;
}

/* Appends a RedisBloom-layout CF's sub-filter; BKV_FULL past MAX_SUBS. */
static int push_slots(fstack *s, uint8_t *slots) {
    if (room_for_sub(s)) return BKV_FULL;
    s->slots[s->nsubs++] = slots;
    return BKV_OK;
}

/* Frees the newest sub-filter (the stack keeps at least one). */
static void pop_sub(fstack *s) {
    sub_free(s, --s->nsubs);
    if (s->nsubs == subs_room(s->nsubs)) s->subs = RedisModule_Realloc(s->subs, s->nsubs * sub_entry_size(s));
}

/* BKV_FULL: no room for another sub-filter (or its capacity is past
 * MAX_CAPACITY); BKV_NOMEM: it would take the server past maxmemory. */
static int add_sub(fstack *s, uint64_t capacity, double error) {
    if (s->nsubs == MAX_SUBS || capacity == 0 || capacity > MAX_CAPACITY) return BKV_FULL;
    if (has_slots(s)) { /* capacity: the slots, which the stack's numbers fix */
        uint8_t *slots;
        if (!memory_allows(capacity) || !(slots = calloc(1, capacity))) return BKV_NOMEM;
        if (s->nsubs == 0) s->cf_buckets = capacity / s->bucket_size;
        filter_bytes += capacity;
        return push_slots(s, slots);
    }
    if (s->layout == LAYOUT_REDISBLOOM) {
        sub_filter sf = {.capacity = capacity, .error = error};
        if (classic_bloom_size(capacity, error, &sf.bytes, &sf.hashes)) return BKV_FULL;
        if (!memory_allows(sf.bytes)) return BKV_NOMEM;
        /* calloc: a large filter's zero pages cost nothing until set. */
        if (!(sf.bits = calloc(1, sf.bytes))) return BKV_NOMEM;
        filter_bytes += sf.bytes;
        return push_sub(s, sf);
    }
    bkv_filter_spec spec = {.type = s->kind == KIND_BF ? BKV_FILTER_BLOCKED_BLOOM : CF_TYPE, .fpr = error};
    bkv_filter *f;
    int rc = bkv_filter_create(&spec, capacity, &f);
    if (rc) return rc;
    /* Made first (its pages untouched until used), then weighed. */
    if (!memory_allows(bkv_filter_memory(f))) {
        bkv_filter_destroy(f);
        return BKV_NOMEM;
    }
    filter_bytes += bkv_filter_memory(f);
    return push_sub(s, (sub_filter){.f = f, .capacity = capacity});
}

/* The next sub-filter's capacity, or 0 past MAX_CAPACITY (no overflow). */
static uint64_t grown(uint64_t capacity, uint64_t expansion) {
    if (!expansion) expansion = 1;
    return capacity > MAX_CAPACITY / expansion ? 0 : capacity * expansion;
}

uint64_t bkv_redis_filter_bytes(void) { return filter_bytes; }

/* The error rate a Bloom stack's sub-filter i is built for: the first
 * takes what was asked (halved when the stack may grow); the ones a
 * growing stack adds stop at 1e-12, so its newest stay of a finite size.
 * In RedisBloom's layout each sub-filter keeps its rate, and a new one
 * takes half the one before's, as RedisBloom's dumps carry them. */
static double bf_sub_rate(const fstack *s, uint32_t i) {
    if (i == 0) return s->nonscaling ? s->error : s->error * BF_TIGHTENING;
    double e = s->layout == LAYOUT_REDISBLOOM ? s->subs[i - 1].error * BF_TIGHTENING
               : s->nonscaling                 ? s->error
                                               : s->error * pow(BF_TIGHTENING, i + 1);
    return e > 1e-12 ? e : 1e-12;
}

/* NULL with *rc (add_sub's) when the first sub-filter cannot be made. */
static fstack *fstack_new(int kind, uint64_t capacity, double error, uint64_t expansion, int nonscaling, int *rc) {
    fstack *s = RedisModule_Calloc(1, sizeof *s);
    s->kind = kind;
    s->error = error;
    s->expansion = expansion;
    s->nonscaling = nonscaling;
    s->layout = kind == KIND_BF ? LAYOUT_REDISBLOOM : LAYOUT_LIBRARY;
    if ((*rc = add_sub(s, capacity, kind == KIND_BF ? bf_sub_rate(s, 0) : error))) {
        fstack_free(s);
        return NULL;
    }
    return s;
}

/* The reply for a filter that could not be made or grown. */
static int reply_no_filter(RedisModuleCtx *ctx, int rc) {
    if (rc == BKV_NOMEM)
        return RedisModule_ReplyWithError(ctx, "OOM command not allowed when used memory > 'maxmemory' "
                                               "(counting the bloomkv filters' own memory)");
    return RedisModule_ReplyWithError(ctx, "ERR could not create filter");
}

/* An item's hash as its stack's layout takes it. */
typedef struct item_key {
    bkv_hash h;     /* LAYOUT_LIBRARY */
    classic_hash c; /* LAYOUT_REDISBLOOM, BF */
    cuckoo_item ci; /* LAYOUT_REDISBLOOM, CF */
} item_key;

static item_key key_of(const fstack *s, const char *p, size_t n) {
    item_key k = {0};
    if (s->layout == LAYOUT_LIBRARY) k.h = bkv_hash_bytes(p, n);
    else if (s->kind == KIND_BF) k.c = classic_bloom_hash(p, n);
    else k.ci = classic_cuckoo_item(p, n);
    return k;
}

/* A RedisBloom-layout CF's sub-filter i as the cuckoo arithmetic takes it. */
static cuckoo_table cf_table(const fstack *s, uint32_t i) {
    return (cuckoo_table){s->slots[i], cf_sub_slots(s, i) / s->bucket_size, s->bucket_size};
}

static int cf_sub_delete(const fstack *s, uint32_t i, const item_key *k) {
    if (s->layout == LAYOUT_LIBRARY) return bkv_filter_delete(s->subs[i].f, k->h) == BKV_OK;
    cuckoo_table t = cf_table(s, i);
    return classic_cuckoo_delete(&t, &k->ci);
}

static uint64_t cf_sub_count(const fstack *s, uint32_t i, const item_key *k) {
    if (s->layout == LAYOUT_LIBRARY) return bkv_filter_count(s->subs[i].f, k->h);
    cuckoo_table t = cf_table(s, i);
    return classic_cuckoo_count(&t, &k->ci);
}

static int sub_contains(const fstack *s, uint32_t i, const item_key *k) {
    if (s->layout == LAYOUT_LIBRARY) return bkv_filter_may_contain(s->subs[i].f, k->h);
    if (s->kind == KIND_CF) return cf_sub_count(s, i, k) > 0;
    const sub_filter *sf = &s->subs[i];
    return classic_bloom_test(sf->bits, sf->bytes * 8, sf->hashes, s->probe, k->c);
}

/* Newest first: it is the largest and holds most of the items. */
static int stack_contains(const fstack *s, const item_key *k) {
    for (uint32_t i = s->nsubs; i-- > 0;)
        if (sub_contains(s, i, k)) return 1;
    return 0;
}

/* ---- the blob ---- */

/* Little-endian numbers of n bytes, as every form here stores them. */
static void put_le(char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (char)(v >> (8 * i));
}

static uint64_t get_le(const char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)(uint8_t)p[i] << (8 * i);
    return v;
}

static void put64(char *p, uint64_t v) { put_le(p, v, 8); }
static uint64_t get64(const char *p) { return get_le(p, 8); }

/* Header: magic u32, version u8, probe placement u8 (version 2; 0 in
 * version 1), kind u8, nonscaling u8, then expansion, error (IEEE bits;
 * a version 2 CF: its first sub-filter's buckets), items, deletes, bucket
 * size, max iterations, number of sub-filters (u64 each, little-endian).
 * Version 1 then has per sub-filter its capacity, count, length and the
 * library's encoded filter. */
static void write_blob_header(const fstack *s, char *p) {
    memset(p, 0, BLOB_HEADER);
    uint32_t magic = BLOB_MAGIC;
    memcpy(p, &magic, 4);
    p[4] = s->layout == LAYOUT_REDISBLOOM ? BLOB_VERSION_REDISBLOOM : BLOB_VERSION_LIBRARY;
    p[5] = (char)s->probe;
    p[6] = (char)s->kind;
    p[7] = (char)s->nonscaling;
    uint64_t ebits;
    memcpy(&ebits, &s->error, 8);
    put64(p + 8, s->expansion);
    put64(p + 16, ebits);
    put64(p + 24, s->items);
    put64(p + 32, s->deletes);
    put64(p + 40, s->bucket_size);
    put64(p + 48, s->max_iterations);
    put64(p + 56, s->nsubs);
}

/* Version 2: per sub-filter its capacity, count, error rate (IEEE bits;
 * 0 for a CF) and length in bytes, then its bits (BF) or slots (CF); an
 * XXH3 of everything before it ends the blob. */
#define CLASSIC_SUB_HEADER 32

static char *encode_classic_blob(const fstack *s, size_t *len) {
    size_t n = BLOB_HEADER + 8;
    uint64_t l;
    for (uint32_t i = 0; i < s->nsubs; i++, n += CLASSIC_SUB_HEADER + l) classic_bytes(s, i, &l);
    char *b = RedisModule_Alloc(n), *p = b;
    write_blob_header(s, p);
    p += BLOB_HEADER;
    for (uint32_t i = 0; i < s->nsubs; i++) {
        const uint8_t *bytes = classic_bytes(s, i, &l);
        const sub_filter *sf = has_slots(s) ? NULL : &s->subs[i];
        uint64_t ebits = 0;
        if (sf) memcpy(&ebits, &sf->error, 8);
        put64(p, sf ? sf->capacity : l);
        put64(p + 8, sf ? sf->count : 0);
        put64(p + 16, ebits);
        put64(p + 24, l);
        memcpy(p + CLASSIC_SUB_HEADER, bytes, l);
        p += CLASSIC_SUB_HEADER + l;
    }
    put64(p, bkv_hash_bytes(b, n - 8));
    *len = n;
    return b;
}

static char *encode_blob(const fstack *s, size_t *len) {
    if (s->layout == LAYOUT_REDISBLOOM) return encode_classic_blob(s, len);
    size_t n = BLOB_HEADER;
    for (uint32_t i = 0; i < s->nsubs; i++) n += 24 + bkv_filter_encoded_size(s->subs[i].f);
    char *b = RedisModule_Alloc(n), *p = b;
    write_blob_header(s, p);
    p += BLOB_HEADER;
    for (uint32_t i = 0; i < s->nsubs; i++) {
        size_t fl = bkv_filter_encoded_size(s->subs[i].f);
        put64(p, s->subs[i].capacity);
        put64(p + 8, s->subs[i].count);
        put64(p + 16, fl);
        bkv_filter_encode(s->subs[i].f, p + 24, fl);
        p += 24 + fl;
    }
    *len = n;
    return b;
}

/* A new stack with the fields of the BLOB_HEADER bytes at b, and its
 * number of sub-filters; NULL unless the header is a blob's (magic,
 * version) and, as strict as the engine is with its own files, every
 * number a reply or a size is made from is within what a command could
 * have set. */
static fstack *read_stack_header(const char *b, uint64_t *nsubs) {
    uint32_t magic;
    memcpy(&magic, b, 4);
    uint64_t expansion = get64(b + 8), ebits = get64(b + 16), bucket_size = get64(b + 40);
    uint64_t max_iterations = get64(b + 48);
    double error;
    memcpy(&error, &ebits, 8);
    *nsubs = get64(b + 56);
    int kind = (uint8_t)b[6], layout = b[4] == BLOB_VERSION_REDISBLOOM ? LAYOUT_REDISBLOOM : LAYOUT_LIBRARY;
    if (magic != BLOB_MAGIC || (b[4] != BLOB_VERSION_LIBRARY && b[4] != BLOB_VERSION_REDISBLOOM) ||
        (uint8_t)b[5] > (layout == LAYOUT_REDISBLOOM ? CLASSIC_PROBE_REDISBLOOM : 0) ||
        (layout == LAYOUT_REDISBLOOM && kind == KIND_STATIC) ||
        (layout == LAYOUT_REDISBLOOM && kind == KIND_CF &&
         (bucket_size == 0 || max_iterations == 0 || (expansion & (expansion - 1)))) ||
        kind < KIND_BF || kind > KIND_STATIC || *nsubs == 0 ||
        *nsubs > MAX_SUBS || (kind == KIND_STATIC && *nsubs != 1) ||
        /* a RedisBloom-layout CF keeps its first sub-filter's buckets where the others keep a rate */
        (kind == KIND_CF && layout == LAYOUT_REDISBLOOM ? ebits == 0 || (ebits & (ebits - 1)) || ebits > MAX_CAPACITY
                                                        : !(error > 0 && error < 1)) ||
        expansion > MAX_EXPANSION || get64(b + 24) > INT64_MAX || get64(b + 32) > INT64_MAX ||
        bucket_size > MAX_BUCKET_SIZE || max_iterations > MAX_ITERATIONS)
        return NULL;
    fstack *s = RedisModule_Calloc(1, sizeof *s);
    s->kind = (uint8_t)kind;
    s->layout = (uint8_t)layout;
    s->probe = (uint8_t)b[5];
    s->nonscaling = b[7] != 0;
    s->expansion = (uint32_t)expansion;
    s->error = error;
    s->items = get64(b + 24);
    s->deletes = get64(b + 32);
    s->bucket_size = (uint8_t)bucket_size;
    s->max_iterations = (uint16_t)max_iterations;
    return s;
}

/* Takes a RedisBloom-layout sub-filter's description (its bits still to
 * come, zero) if it is one add_sub could have made: sized by the formula
 * for its capacity and error rate (a CF's slots by the stack's numbers).
 * BKV_INVALID when it is not; BKV_NOMEM when it cannot be allocated or,
 * if weigh (a client's LOADCHUNK, not a load Redis must finish), would take
 * the server past maxmemory: weighed before anything is allocated. */
static int push_classic_sub(fstack *s, uint64_t capacity, uint64_t count, double error, uint64_t bytes, int weigh) {
    if (capacity == 0 || capacity > MAX_CAPACITY || count > capacity) return BKV_INVALID;
    if (has_slots(s)) { /* its slots follow from the stack's numbers (cf_buckets set) */
        uint8_t *slots;
        if (capacity != cf_sub_slots(s, s->nsubs) || bytes != capacity || count) return BKV_INVALID;
        if ((weigh && !memory_allows(bytes)) || !(slots = calloc(1, bytes))) return BKV_NOMEM;
        filter_bytes += bytes;
        push_slots(s, slots); /* room: the caller checked the count against MAX_SUBS */
        return BKV_OK;
    }
    sub_filter sf = {.capacity = capacity, .count = count, .error = error};
    if (!(error > 0 && error < 1) || classic_bloom_size(capacity, error, &sf.bytes, &sf.hashes) || sf.bytes != bytes)
        return BKV_INVALID;
    if ((weigh && !memory_allows(bytes)) || !(sf.bits = calloc(1, bytes))) return BKV_NOMEM;
    filter_bytes += sf.bytes;
    push_sub(s, sf); /* room: the caller checked the count against MAX_SUBS */
    return BKV_OK;
}

static fstack *decode_classic_blob(fstack *s, uint64_t nsubs, const char *b, size_t len, char *why, size_t wl) {
    if (len < BLOB_HEADER + 8 || get64(b + len - 8) != bkv_hash_bytes(b, len - 8)) {
        snprintf(why, wl, "filter blob checksum mismatch");
        fstack_free(s);
        return NULL;
    }
    size_t off = BLOB_HEADER, end = len - 8;
    uint64_t counted = 0;
    for (uint64_t i = 0; i < nsubs; i++) {
        const char *p = b + off;
        uint64_t ebits = end - off < CLASSIC_SUB_HEADER ? 0 : get64(p + 16);
        uint64_t bytes = end - off < CLASSIC_SUB_HEADER ? 0 : get64(p + 24);
        double error;
        memcpy(&error, &ebits, 8);
        if (end - off < CLASSIC_SUB_HEADER || bytes > end - off - CLASSIC_SUB_HEADER ||
            push_classic_sub(s, get64(p), get64(p + 8), error, bytes, 0) != BKV_OK) {
            snprintf(why, wl, "sub-filter %llu: truncated, or its size does not follow from its capacity and rate",
                     (unsigned long long)i);
            fstack_free(s);
            return NULL;
        }
        uint64_t l;
        memcpy(classic_bytes(s, (uint32_t)i, &l), p + CLASSIC_SUB_HEADER, bytes);
        counted += has_slots(s) ? 0 : s->subs[i].count;
        off += CLASSIC_SUB_HEADER + bytes;
    }
    /* A CF keeps no count per sub-filter (RedisBloom's dumps carry none). */
    if ((s->kind == KIND_BF && counted != s->items) || off != end) {
        snprintf(why, wl, "filter blob counts %llu items, its sub-filters %llu, or has bytes after them",
                 (unsigned long long)s->items, (unsigned long long)counted);
        fstack_free(s);
        return NULL;
    }
    return s;
}

/* NULL, with the reason in why, for anything but a well-formed blob. */
static fstack *decode_blob(const char *b, size_t len, char *why, size_t wl) {
    uint64_t nsubs;
    fstack *s = len < BLOB_HEADER ? NULL : read_stack_header(b, &nsubs);
    if (!s) {
        snprintf(why, wl, "not a bloomkv filter blob, or its header is out of range");
        return NULL;
    }
    if (s->layout == LAYOUT_REDISBLOOM) return decode_classic_blob(s, nsubs, b, len, why, wl);
    size_t off = BLOB_HEADER;
    uint64_t counted = 0;
    for (uint64_t i = 0; i < nsubs; i++) {
        if (len - off < 24 || get64(b + off + 16) > len - off - 24) {
            snprintf(why, wl, "filter blob truncated at offset %zu", off);
            fstack_free(s);
            return NULL;
        }
        size_t fl = (size_t)get64(b + off + 16);
        bkv_filter *f;
        char err[160];
        if (bkv_filter_open(b + off + 24, fl, BKV_FILTER_OPEN_COPY, &f, err, sizeof err) != BKV_OK) {
            snprintf(why, wl, "sub-filter %llu: %s", (unsigned long long)i, err);
            fstack_free(s);
            return NULL;
        }
        sub_filter sf = {.f = f, .capacity = get64(b + off), .count = get64(b + off + 8)};
        filter_bytes += bkv_filter_memory(f);
        push_sub(s, sf); /* room: nsubs was checked against MAX_SUBS */
        off += 24 + fl;
        /* A static key holds whatever filter bkv_filter_open accepted:
         * BKV.FILTER.BUILD makes one of any type, the ones that take adds
         * too (blocked, bloom, counting). A BF's or CF's sub-filter is its
         * kind's type, with counts in bounds. */
        bkv_filter_info fi;
        bkv_filter_get_info(f, &fi);
        if (s->kind != KIND_STATIC &&
            (fi.type != (s->kind == KIND_BF ? BKV_FILTER_BLOCKED_BLOOM : CF_TYPE) || sf.capacity == 0 ||
             sf.capacity > MAX_CAPACITY || sf.count > 4 * MAX_CAPACITY)) {
            snprintf(why, wl, "sub-filter %llu: its type or counts do not fit a %s filter", (unsigned long long)i,
                     s->kind == KIND_BF ? "BF" : "CF");
            fstack_free(s);
            return NULL;
        }
        counted += sf.count;
    }
    if (s->kind != KIND_STATIC && counted != s->items) {
        snprintf(why, wl, "filter blob counts %llu items, its sub-filters %llu", (unsigned long long)s->items,
                 (unsigned long long)counted);
        fstack_free(s);
        return NULL;
    }
    if (off != len) {
        snprintf(why, wl, "filter blob has %zu bytes after its last sub-filter", len - off);
        fstack_free(s);
        return NULL;
    }
    return s;
}

/* ---- SCANDUMP and LOADCHUNK: a filter moved in pieces ----
 *
 * RedisBloom's protocol, bloomkv's bytes. Iterator 1's chunk is the
 * stack's description: the blob header, then per sub-filter its capacity,
 * count and encoded filter header (the library's 64 bytes), then an XXH3
 * of all of it, so any damaged byte is refused. Every later chunk is a
 * piece of one sub-filter's payload, at most DUMP_CHUNK bytes, numbered
 * 2 + its offset in the payloads laid end to end; a chunk ends at its
 * sub-filter's end. LOADCHUNK takes back exactly the chunks SCANDUMP
 * gives: a header into an empty key (a filter whose payloads are zero
 * until their chunks come), then each chunk where it was. */

#define DUMP_CHUNK ((size_t)16 << 20)

/* RedisBloom's error texts, which clients of its chunked dumps match. */
static const char *bad_header(int kind) { return kind == KIND_BF ? "received bad data" : "Couldn't create filter!"; }
static const char *bad_position(int kind) {
    return kind == KIND_BF ? "invalid offset - no link found" : "Invalid position";
}
static const char *bad_chunk(int kind, int too_big) {
    return kind == KIND_CF ? "Couldn't load chunk!" : too_big ? "invalid chunk - Too big for current filter"
                                                              : "received bad data";
}
#define DUMP_SUB 80 /* capacity, count, encoded filter header */

static size_t sub_payload_len(const sub_filter *sf) {
    size_t n;
    bkv_filter_payload(sf->f, &n);
    return n;
}

/* The chunk starting at byte off of the payloads: its sub-filter, offset
 * in it and length; 0 when off is not where SCANDUMP starts a chunk. */
static int chunk_at(const fstack *s, uint64_t off, uint32_t *sub, size_t *sub_off, size_t *len) {
    uint64_t base = 0;
    for (uint32_t i = 0; i < s->nsubs; i++) {
        size_t n = sub_payload_len(&s->subs[i]);
        if (off < base + n) {
            size_t in = (size_t)(off - base);
            if (in % DUMP_CHUNK) return 0;
            *sub = i, *sub_off = in, *len = n - in < DUMP_CHUNK ? n - in : DUMP_CHUNK;
            return 1;
        }
        base += n;
    }
    return 0;
}

static char *encode_dump_header(const fstack *s, size_t *len) {
    size_t n = BLOB_HEADER + (size_t)s->nsubs * DUMP_SUB + 8;
    char *b = RedisModule_Alloc(n);
    write_blob_header(s, b);
    char *p = b + BLOB_HEADER;
    for (uint32_t i = 0; i < s->nsubs; i++, p += DUMP_SUB) {
        put64(p, s->subs[i].capacity);
        put64(p + 8, s->subs[i].count);
        bkv_filter_encode_header(s->subs[i].f, p + 16, BKV_FILTER_HEADER_BYTES);
    }
    put64(p, bkv_hash_bytes(b, n - 8));
    *len = n;
    return b;
}

/* The bytes a sub-filter of capacity items may take, as a bound on what a
 * header may ask to allocate: far above what any error rate needs. */
static size_t payload_bound(uint64_t capacity) { return (size_t)capacity * 64 + 4096; }

/* A stack of kind from a header chunk, payloads zero; NULL after replying. */
static fstack *decode_dump_header(RedisModuleCtx *ctx, const char *b, size_t len, int kind) {
    if (len < BLOB_HEADER + 8 || get64(b + len - 8) != bkv_hash_bytes(b, len - 8)) {
        RedisModule_ReplyWithError(ctx, bad_header(kind));
        return NULL;
    }
    uint64_t nsubs;
    fstack *s = read_stack_header(b, &nsubs);
    if (!s || s->kind != kind || len != BLOB_HEADER + nsubs * DUMP_SUB + 8) {
        if (s) RedisModule_Free(s);
        RedisModule_ReplyWithError(ctx, bad_header(kind));
        return NULL;
    }
    int ok = 1;
    uint64_t counted = 0;
    const char *p = b + BLOB_HEADER;
    for (uint64_t i = 0; ok && i < nsubs; i++, p += DUMP_SUB) {
        sub_filter sf = {.capacity = get64(p), .count = get64(p + 8)};
        if (sf.capacity == 0 || sf.capacity > MAX_CAPACITY || sf.count > 4 * MAX_CAPACITY) {
            ok = 0;
            break;
        }
        if (bkv_filter_open_header(p + 16, BKV_FILTER_HEADER_BYTES, payload_bound(sf.capacity), &sf.f, NULL, 0) !=
            BKV_OK) {
            ok = 0;
            break;
        }
        bkv_filter_info fi;
        bkv_filter_get_info(sf.f, &fi);
        filter_bytes += bkv_filter_memory(sf.f);
        push_sub(s, sf);
        counted += sf.count;
        ok = fi.type == (kind == KIND_BF ? BKV_FILTER_BLOCKED_BLOOM : CF_TYPE);
    }
    if (!ok || counted != s->items) {
        fstack_free(s);
        RedisModule_ReplyWithError(ctx, bad_header(kind));
        return NULL;
    }
    if (!memory_allows(0)) {
        fstack_free(s);
        reply_no_filter(ctx, BKV_NOMEM);
        return NULL;
    }
    return s;
}

/* ---- RedisBloom's own SCANDUMP form, for stacks in its layouts ----
 *
 * Byte for byte what RedisBloom's BF.SCANDUMP gives, so a filter dumped
 * there loads here and back. Iterator 0 gives iterator 1 and the header:
 * the number of items (u64), of sub-filters (u32), option bits (u32) and
 * the expansion (u32), then per sub-filter its bytes, bits, items (u64
 * each), error rate and bits per item (f64 each), probes (u32), capacity
 * (u64) and a power-of-two exponent (u8, 0 here), little-endian, unpadded.
 * Every later iterator is 1 + an offset into the sub-filters' bits laid
 * end to end; a chunk stays within one sub-filter and may start anywhere,
 * and LOADCHUNK is given the iterator SCANDUMP returned with it, its end. */

#define RB_HEADER 20
#define RB_LINK 53
#define RB_OPT_NOROUND 1 /* sized exactly, not to a power of two */
#define RB_OPT_FORCE64 4 /* 64-bit hashes */
#define RB_OPT_NO_SCALING 8
/* Not RedisBloom's: the module's own probe placement (classic_bloom.h).
 * RedisBloom refuses a header with a bit it does not know, so a filter
 * it would read wrongly never loads there. */
#define RB_OPT_SPREAD_PROBES 0x10000

static void put32(char *p, uint32_t v) { put_le(p, v, 4); }
static uint32_t get32(const char *p) { return (uint32_t)get_le(p, 4); }
static double getf64(const char *p) {
    uint64_t v = get64(p);
    double d;
    memcpy(&d, &v, 8);
    return d;
}
static void putf64(char *p, double d) {
    uint64_t v;
    memcpy(&v, &d, 8);
    put64(p, v);
}

static char *encode_rb_header(const fstack *s, size_t *len) {
    size_t n = RB_HEADER + (size_t)s->nsubs * RB_LINK;
    char *b = RedisModule_Alloc(n), *p = b + RB_HEADER;
    put64(b, s->items);
    put32(b + 8, s->nsubs);
    put32(b + 12, RB_OPT_NOROUND | RB_OPT_FORCE64 | (s->nonscaling ? RB_OPT_NO_SCALING : 0) |
                      (s->probe == CLASSIC_PROBE_SPREAD ? RB_OPT_SPREAD_PROBES : 0));
    put32(b + 16, (uint32_t)s->expansion);
    for (uint32_t i = 0; i < s->nsubs; i++, p += RB_LINK) {
        const sub_filter *sf = &s->subs[i];
        put64(p, sf->bytes);
        put64(p + 8, sf->bytes * 8);
        put64(p + 16, sf->count);
        putf64(p + 24, sf->error);
        putf64(p + 32, -(log(sf->error) / 0.480453013918201));
        put32(p + 40, sf->hashes);
        put64(p + 44, sf->capacity);
        p[52] = 0;
    }
    *len = n;
    return b;
}

/* A stack from a RedisBloom header, bits zero; NULL (*rc BKV_INVALID)
 * unless every field is what RedisBloom's current layout (exact sizes,
 * 64-bit hashes) writes and the counts add up, or (BKV_NOMEM) past
 * maxmemory. Filters RedisBloom made in its older layouts (32-bit hashes,
 * power-of-two sizes) are refused. */
static fstack *decode_rb_header(const char *b, size_t len, int *rc) {
    *rc = BKV_INVALID;
    if (len < RB_HEADER) return NULL;
    uint64_t items = get64(b), nsubs = get32(b + 8);
    uint32_t options = get32(b + 12), growth = get32(b + 16);
    if (nsubs == 0 || nsubs > MAX_SUBS || len != RB_HEADER + nsubs * RB_LINK ||
        (options & ~(uint32_t)(RB_OPT_NO_SCALING | RB_OPT_SPREAD_PROBES)) != (RB_OPT_NOROUND | RB_OPT_FORCE64) ||
        growth > MAX_EXPANSION ||
        (growth == 0 && !(options & RB_OPT_NO_SCALING)) || items > INT64_MAX)
        return NULL;
    fstack *s = RedisModule_Calloc(1, sizeof *s);
    s->kind = KIND_BF;
    s->layout = LAYOUT_REDISBLOOM;
    s->probe = options & RB_OPT_SPREAD_PROBES ? CLASSIC_PROBE_SPREAD : CLASSIC_PROBE_REDISBLOOM;
    s->nonscaling = (options & RB_OPT_NO_SCALING) != 0;
    s->expansion = growth;
    s->items = items;
    uint64_t counted = 0;
    const char *p = b + RB_HEADER;
    for (uint64_t i = 0; i < nsubs; i++, p += RB_LINK) {
        uint64_t bytes = get64(p);
        double error = getf64(p + 24);
        if (get64(p + 8) != bytes * 8 || p[52] != 0 ||
            (*rc = push_classic_sub(s, get64(p + 44), get64(p + 16), error, bytes, 1)) != BKV_OK ||
            get32(p + 40) != s->subs[i].hashes) {
            if (*rc == BKV_OK) *rc = BKV_INVALID;
            fstack_free(s);
            return NULL;
        }
        counted += s->subs[i].count;
    }
    s->error = s->nonscaling ? s->subs[0].error : s->subs[0].error / BF_TIGHTENING;
    if (counted != items) {
        *rc = BKV_INVALID;
        fstack_free(s);
        return NULL;
    }
    *rc = BKV_OK;
    return s;
}

/* The bytes of the sub-filter holding byte off of all of them laid end to
 * end, from off on, and how many are left in it; NULL past the end. */
static uint8_t *rb_bytes_at(const fstack *s, uint64_t off, uint64_t *left) {
    for (uint32_t i = 0; i < s->nsubs; i++) {
        uint64_t len;
        uint8_t *bytes = classic_bytes(s, i, &len);
        if (off < len) {
            *left = len - off;
            return bytes + off;
        }
        off -= len;
    }
    return NULL;
}

/* RedisBloom's CF header: items, buckets of the first sub-filter,
 * deletes, sub-filters (u64 each), bucket size, max iterations and
 * expansion (u16 each), little-endian, unpadded. */
#define RB_CF_HEADER 38

static char *encode_rb_cf_header(const fstack *s, size_t *len) {
    char *b = RedisModule_Alloc(RB_CF_HEADER);
    put64(b, s->items);
    put64(b + 8, s->cf_buckets);
    put64(b + 16, s->deletes);
    put64(b + 24, s->nsubs);
    put_le(b + 32, s->bucket_size, 2);
    put_le(b + 34, s->max_iterations, 2);
    put_le(b + 36, s->expansion, 2);
    *len = RB_CF_HEADER;
    return b;
}

/* A CF stack from RedisBloom's header, slots zero; NULL (*rc
 * BKV_INVALID) unless every number is one a CF.RESERVE here could have
 * led to (and the bucket count a power of two, so every sub-filter's is),
 * or (BKV_NOMEM) past maxmemory. */
static fstack *decode_rb_cf_header(const char *b, size_t len, int *rc) {
    *rc = BKV_INVALID;
    if (len != RB_CF_HEADER) return NULL;
    uint64_t items = get64(b), buckets = get64(b + 8), deletes = get64(b + 16), nsubs = get64(b + 24);
    unsigned bucket_size = (unsigned)get_le(b + 32, 2), iterations = (unsigned)get_le(b + 34, 2);
    unsigned expansion = (unsigned)get_le(b + 36, 2);
    if (bucket_size < 1 || bucket_size > MAX_BUCKET_SIZE || iterations < 1 || nsubs < 1 || nsubs > MAX_SUBS ||
        (expansion == 0 && nsubs > 1) || expansion > MAX_EXPANSION || (expansion & (expansion - 1)) || buckets == 0 ||
        (buckets & (buckets - 1)) || buckets > MAX_CAPACITY / bucket_size || items > INT64_MAX ||
        deletes > INT64_MAX)
        return NULL;
    fstack *s = RedisModule_Calloc(1, sizeof *s);
    s->kind = KIND_CF;
    s->layout = LAYOUT_REDISBLOOM;
    s->cf_buckets = buckets;
    s->bucket_size = (uint8_t)bucket_size;
    s->max_iterations = (uint16_t)iterations;
    s->expansion = expansion;
    s->items = items;
    s->deletes = deletes;
    uint64_t total = 0;
    *rc = BKV_OK;
    for (uint32_t i = 0; i < nsubs && *rc == BKV_OK; i++) {
        uint64_t slots = cf_sub_slots(s, i);
        *rc = push_classic_sub(s, slots, 0, 0, slots, 1);
        total += slots;
    }
    if (*rc != BKV_OK || items > total) {
        if (*rc == BKV_OK) *rc = BKV_INVALID;
        fstack_free(s);
        return NULL;
    }
    return s;
}

/* The rest of SCANDUMP's reply for iterator it >= 1: the next iterator
 * and the chunk. */
static int rb_dump_chunk(RedisModuleCtx *ctx, const fstack *s, long long it) {
    uint64_t left;
    const uint8_t *bytes = rb_bytes_at(s, (uint64_t)it - 1, &left);
    if (!bytes) {
        RedisModule_ReplyWithLongLong(ctx, 0);
        return s->kind == KIND_BF ? RedisModule_ReplyWithStringBuffer(ctx, "", 0) : RedisModule_ReplyWithNull(ctx);
    }
    uint64_t len = left < DUMP_CHUNK ? left : DUMP_CHUNK;
    RedisModule_ReplyWithLongLong(ctx, it + (long long)len);
    return RedisModule_ReplyWithStringBuffer(ctx, (const char *)bytes, len);
}

static int rb_loadchunk(RedisModuleCtx *ctx, fstack *s, long long it, const char *data, size_t len) {
    int bf = s->kind == KIND_BF;
    if ((uint64_t)it <= len || (!bf && len == 0))
        return RedisModule_ReplyWithError(ctx, bf ? "ERR received bad data" : "Couldn't load chunk!");
    uint64_t left;
    uint8_t *bytes = rb_bytes_at(s, (uint64_t)it - len - 1, &left);
    if (!bytes) return RedisModule_ReplyWithError(ctx, bf ? "ERR invalid offset - no link found" : "Couldn't load chunk!");
    if (len > left)
        return RedisModule_ReplyWithError(ctx, bf ? "ERR invalid chunk - Too big for current filter"
                                                  : "Couldn't load chunk!");
    memcpy(bytes, data, len);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* ---- type callbacks (shared by the three types) ---- */

static void f_rdb_save(RedisModuleIO *io, void *value) {
    size_t len;
    char *b = encode_blob(value, &len);
    RedisModule_SaveStringBuffer(io, b, len);
    RedisModule_Free(b);
}

static void *f_rdb_load(RedisModuleIO *io, int encver) {
    if (encver != FILTER_ENCVER) return NULL;
    size_t len;
    char *b = RedisModule_LoadStringBuffer(io, &len);
    if (!b) return NULL;
    char why[200];
    fstack *s = decode_blob(b, len, why, sizeof why);
    if (!s) RedisModule_LogIOError(io, "warning", "bloomkv: %s", why);
    RedisModule_Free(b);
    return s;
}

static void f_aof_rewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    size_t len;
    char *b = encode_blob(value, &len);
    RedisModule_EmitAOF(aof, "BKV.FILTER.LOADBLOB", "sb", key, b, len);
    RedisModule_Free(b);
}

static size_t f_mem_usage(const void *value) {
    const fstack *s = value;
    size_t n = sizeof *s + subs_room(s->nsubs) * sub_entry_size(s);
    for (uint32_t i = 0; i < s->nsubs; i++)
        n += s->layout == LAYOUT_REDISBLOOM ? sub_memory(s, i) : bkv_filter_encoded_size(s->subs[i].f);
    return n;
}

static void f_digest(RedisModuleDigest *md, void *value) {
    size_t len;
    char *b = encode_blob(value, &len);
    RedisModule_DigestAddStringBuffer(md, b, len);
    RedisModule_DigestEndSequence(md);
    RedisModule_Free(b);
}

static void f_free(void *value) { fstack_free(value); }

static void *f_copy(RedisModuleString *from, RedisModuleString *to, const void *value) {
    (void)from, (void)to;
    size_t len;
    char *b = encode_blob(value, &len), why[200];
    fstack *s = decode_blob(b, len, why, sizeof why);
    RedisModule_Free(b);
    return s;
}

/* ---- key access ---- */

enum { LOOKUP_OK, LOOKUP_EMPTY, LOOKUP_WRONGTYPE };

/* Opens name (mode: REDISMODULE_READ, with WRITE to change it) for a
 * filter of kind: LOOKUP_OK with *s, LOOKUP_EMPTY, or LOOKUP_WRONGTYPE
 * after replying with Redis's WRONGTYPE error. */
static int open_filter(RedisModuleCtx *ctx, RedisModuleString *name, int kind, int mode, RedisModuleKey **key,
                       fstack **s) {
    *key = RedisModule_OpenKey(ctx, name, mode);
    *s = NULL;
    int t = RedisModule_KeyType(*key);
    if (t == REDISMODULE_KEYTYPE_EMPTY) return LOOKUP_EMPTY;
    if (t != REDISMODULE_KEYTYPE_MODULE || RedisModule_ModuleTypeGetType(*key) != type_of(kind)) {
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return LOOKUP_WRONGTYPE;
    }
    *s = RedisModule_ModuleTypeGetValue(*key);
    return LOOKUP_OK;
}

static item_key item_hash(const fstack *s, RedisModuleString *item) {
    size_t n;
    const char *p = RedisModule_StringPtrLen(item, &n);
    return key_of(s, p, n);
}

static int arg_is(RedisModuleString *arg, const char *word) {
    return strcasecmp(RedisModule_StringPtrLen(arg, NULL), word) == 0;
}

/* ---- BF ---- */

/* 1 added, 0 (may have) existed, -1 a full non-scaling filter, -2 no room
 * for another sub-filter, -3 not past maxmemory. */
static int bf_add(fstack *s, const item_key *k) {
    if (stack_contains(s, k)) return 0;
    sub_filter *last = &s->subs[s->nsubs - 1];
    if (last->count >= last->capacity) {
        if (s->nonscaling) return -1;
        int rc = add_sub(s, grown(last->capacity, s->expansion), bf_sub_rate(s, s->nsubs));
        if (rc) return rc == BKV_NOMEM ? -3 : -2;
        last = &s->subs[s->nsubs - 1];
    }
    if (s->layout == LAYOUT_REDISBLOOM) classic_bloom_set(last->bits, last->bytes * 8, last->hashes, s->probe, k->c);
    else bkv_filter_add(last->f, k->h);
    last->count++;
    s->items++;
    return 1;
}

typedef struct bf_create {
    int create;
    uint64_t capacity, expansion;
    double error;
    int nonscaling;
} bf_create;

static int bf_insert_items(RedisModuleCtx *ctx, RedisModuleString *keyname, RedisModuleString **items, int n,
                           const bf_create *c, int multi) {
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, keyname, KIND_BF, REDISMODULE_READ | REDISMODULE_WRITE, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_EMPTY) {
        if (!c->create) return RedisModule_ReplyWithError(ctx, "ERR not found");
        int rc;
        if (!(s = fstack_new(KIND_BF, c->capacity, c->error, c->expansion, c->nonscaling, &rc)))
            return reply_no_filter(ctx, rc);
        RedisModule_ModuleTypeSetValue(key, bf_type, s);
    }
    /* RedisBloom's replies: a full NONSCALING filter ends the array at its
     * error (the items after it are not tried), and a sub-filter that
     * cannot be added is "problem inserting into filter". */
    if (multi) RedisModule_ReplyWithArray(ctx, REDISMODULE_POSTPONED_LEN);
    long replied = 0;
    for (int i = 0; i < n; i++, replied++) {
        item_key k = item_hash(s, items[i]);
        int r = bf_add(s, &k);
        if (r == -1) {
            RedisModule_ReplyWithError(ctx, "ERR non scaling filter is full");
            replied++;
            break;
        }
        if (r == -2) RedisModule_ReplyWithError(ctx, "ERR problem inserting into filter");
        else if (r == -3) reply_no_filter(ctx, BKV_NOMEM);
        else RedisModule_ReplyWithBool(ctx, r);
    }
    if (multi) RedisModule_ReplySetArrayLength(ctx, replied);
    RedisModule_ReplicateVerbatim(ctx);
    return REDISMODULE_OK;
}

static int parse_error_rate(RedisModuleCtx *ctx, RedisModuleString *arg, double *e) {
    if (RedisModule_StringToDouble(arg, e) != REDISMODULE_OK) return RedisModule_ReplyWithError(ctx, "ERR bad error rate"), -1;
    if (!(*e > 0 && *e < 1)) return RedisModule_ReplyWithError(ctx, "ERR (0 < error rate range < 1)"), -1;
    return 0;
}

static int parse_count(RedisModuleCtx *ctx, RedisModuleString *arg, uint64_t *v, long long min, uint64_t max,
                       const char *what) {
    long long x;
    if (RedisModule_StringToLongLong(arg, &x) != REDISMODULE_OK || x < min || (uint64_t)x > max) {
        char msg[128];
        if (strcmp(what, "expansion") == 0) /* RedisBloom's words, which its clients match */
            snprintf(msg, sizeof msg, "ERR expansion must be in the range [%lld, %llu]", min, (unsigned long long)max);
        else
            snprintf(msg, sizeof msg, "ERR bad %s (%lld to %llu)", what, min, (unsigned long long)max);
        RedisModule_ReplyWithError(ctx, msg);
        return -1;
    }
    *v = (uint64_t)x;
    return 0;
}

static int cmd_bf_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4 || argc > 7) return RedisModule_WrongArity(ctx);
    bf_create c = {1, 0, SETTING(BF_EXPANSION), 0, 0};
    if (parse_error_rate(ctx, argv[2], &c.error) || parse_count(ctx, argv[3], &c.capacity, 1, MAX_CAPACITY, "capacity"))
        return REDISMODULE_OK;
    int has_expansion = 0;
    for (int i = 4; i < argc; i++) {
        if (arg_is(argv[i], "NONSCALING")) c.nonscaling = 1;
        else if (arg_is(argv[i], "EXPANSION") && i + 1 < argc) {
            if (parse_count(ctx, argv[++i], &c.expansion, 1, MAX_EXPANSION, "expansion")) return REDISMODULE_OK;
            has_expansion = 1;
        } else return RedisModule_ReplyWithError(ctx, "ERR syntax error");
    }
    if (c.nonscaling && has_expansion) return RedisModule_ReplyWithError(ctx, "ERR nonscaling filters cannot expand");
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], KIND_BF, REDISMODULE_READ | REDISMODULE_WRITE, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_OK) return RedisModule_ReplyWithError(ctx, "ERR item exists");
    int rc;
    if (!(s = fstack_new(KIND_BF, c.capacity, c.error, c.expansion, c.nonscaling, &rc))) return reply_no_filter(ctx, rc);
    RedisModule_ModuleTypeSetValue(key, bf_type, s);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* A filter made by BF.ADD, BF.MADD or BF.INSERT without parameters. */
static bf_create bf_defaults(void) {
    return (bf_create){1, SETTING(BF_INITIAL_SIZE), SETTING(BF_EXPANSION), bf_error_rate, 0};
}

static int cmd_bf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    bf_create c = bf_defaults();
    return bf_insert_items(ctx, argv[1], argv + 2, 1, &c, 0);
}

static int cmd_bf_madd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    bf_create c = bf_defaults();
    return bf_insert_items(ctx, argv[1], argv + 2, argc - 2, &c, 1);
}

static int cmd_bf_insert(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4) return RedisModule_WrongArity(ctx);
    bf_create c = bf_defaults();
    int i = 2;
    for (; i < argc && !arg_is(argv[i], "ITEMS"); i++) {
        if (arg_is(argv[i], "NOCREATE")) c.create = 0;
        else if (arg_is(argv[i], "NONSCALING")) c.nonscaling = 1;
        else if (i + 1 >= argc) return RedisModule_WrongArity(ctx);
        else if (arg_is(argv[i], "CAPACITY")) {
            if (parse_count(ctx, argv[++i], &c.capacity, 1, MAX_CAPACITY, "capacity")) return REDISMODULE_OK;
        } else if (arg_is(argv[i], "ERROR")) {
            if (parse_error_rate(ctx, argv[++i], &c.error)) return REDISMODULE_OK;
        } else if (arg_is(argv[i], "EXPANSION")) {
            if (parse_count(ctx, argv[++i], &c.expansion, 1, MAX_EXPANSION, "expansion")) return REDISMODULE_OK;
        } else return RedisModule_ReplyWithError(ctx, "ERR unknown argument received");
    }
    if (i >= argc - 1) return RedisModule_WrongArity(ctx);
    return bf_insert_items(ctx, argv[1], argv + i + 1, argc - i - 1, &c, 1);
}

/* BF.EXISTS / CF.EXISTS and the M forms: a missing key holds nothing. */
static int exists_common(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int kind, int multi) {
    if (multi ? argc < 3 : argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], kind, REDISMODULE_READ, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    int n = argc - 2;
    if (multi) RedisModule_ReplyWithArray(ctx, n);
    if (st == LOOKUP_EMPTY) {
        for (int i = 0; i < n; i++) RedisModule_ReplyWithBool(ctx, 0);
        return REDISMODULE_OK;
    }
    if (n == 1 || s->layout == LAYOUT_REDISBLOOM) {
        for (int i = 0; i < n; i++) {
            item_key k = item_hash(s, argv[i + 2]);
            RedisModule_ReplyWithBool(ctx, stack_contains(s, &k));
        }
        return REDISMODULE_OK;
    }
    /* Many items: batched, prefetched probes, sub-filter by sub-filter. */
    bkv_hash *h = RedisModule_Alloc((size_t)n * sizeof *h);
    uint8_t *any = RedisModule_Calloc((size_t)n, 1), *one = RedisModule_Alloc((size_t)n);
    for (int i = 0; i < n; i++) h[i] = item_hash(s, argv[i + 2]).h;
    for (uint32_t j = 0; j < s->nsubs; j++) {
        bkv_filter_may_contain_batch(s->subs[j].f, h, (size_t)n, one);
        for (int i = 0; i < n; i++) any[i] |= one[i];
    }
    for (int i = 0; i < n; i++) RedisModule_ReplyWithBool(ctx, any[i]);
    RedisModule_Free(h), RedisModule_Free(any), RedisModule_Free(one);
    return REDISMODULE_OK;
}

static int cmd_bf_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return exists_common(ctx, argv, argc, KIND_BF, 0);
}
static int cmd_bf_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return exists_common(ctx, argv, argc, KIND_BF, 1);
}

static uint64_t total_capacity(const fstack *s) {
    uint64_t c = 0;
    for (uint32_t i = 0; i < s->nsubs; i++) c += s->subs[i].capacity;
    return c;
}

static int cmd_bf_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2 && argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], KIND_BF, REDISMODULE_READ, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_EMPTY) return RedisModule_ReplyWithError(ctx, "ERR not found");
    static const char *const names[] = {"Capacity", "Size", "Number of filters", "Number of items inserted",
                                        "Expansion rate"};
    static const char *const words[] = {"CAPACITY", "SIZE", "FILTERS", "ITEMS", "EXPANSION"};
    long long vals[] = {(long long)total_capacity(s), (long long)f_mem_usage(s), s->nsubs, (long long)s->items,
                        (long long)s->expansion};
    int pick = -1;
    if (argc == 3) {
        for (int i = 0; i < 5; i++)
            if (arg_is(argv[2], words[i])) pick = i;
        if (pick < 0) return RedisModule_ReplyWithError(ctx, "ERR invalid information value");
    }
    /* A map (RESP3; a flat array of pairs in RESP2), or one field's array. */
    if (pick < 0) RedisModule_ReplyWithMap(ctx, 5);
    else RedisModule_ReplyWithArray(ctx, 1);
    for (int i = 0; i < 5; i++) {
        if (pick >= 0 && i != pick) continue;
        if (pick < 0) RedisModule_ReplyWithSimpleString(ctx, names[i]);
        if (i == 4 && s->nonscaling) RedisModule_ReplyWithNull(ctx);
        else RedisModule_ReplyWithLongLong(ctx, vals[i]);
    }
    return REDISMODULE_OK;
}

static int cmd_bf_card(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], KIND_BF, REDISMODULE_READ, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    return RedisModule_ReplyWithLongLong(ctx, st == LOOKUP_OK ? (long long)s->items : 0);
}

/* BF.DEBUG key: RedisBloom's shape with bloomkv's numbers: "size:<items>",
 * then per sub-filter its bytes, bits, probes, capacity, items and the
 * error rate it was sized for. */
static int cmd_bf_debug(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], KIND_BF, REDISMODULE_READ, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_EMPTY) return RedisModule_ReplyWithError(ctx, "ERR not found");
    RedisModule_ReplyWithArray(ctx, 1 + (long)s->nsubs);
    char line[200];
    snprintf(line, sizeof line, "size:%llu", (unsigned long long)s->items);
    RedisModule_ReplyWithSimpleString(ctx, line);
    for (uint32_t i = 0; i < s->nsubs; i++) {
        const sub_filter *sf = &s->subs[i];
        size_t bytes = sf->bytes;
        uint64_t bits = sf->bytes * 8;
        unsigned hashes = sf->hashes;
        double rate = sf->error;
        if (s->layout == LAYOUT_LIBRARY) {
            bkv_filter_info fi;
            bkv_filter_get_info(sf->f, &fi);
            bkv_filter_payload(sf->f, &bytes);
            bits = fi.num_bits, hashes = fi.k, rate = bf_sub_rate(s, i);
        }
        snprintf(line, sizeof line, "bytes:%zu bits:%llu hashes:%u hashwidth:64 capacity:%llu size:%llu ratio:%g", bytes,
                 (unsigned long long)bits, hashes, (unsigned long long)sf->capacity, (unsigned long long)sf->count,
                 rate);
        RedisModule_ReplyWithSimpleString(ctx, line);
    }
    return REDISMODULE_OK;
}

/* ---- CF ---- */

/* RedisBloom's insertion: a free slot in the item's buckets of any
 * sub-filter, newest first; else room made by kicks in the newest; else a
 * new sub-filter. 1 added, -1 full, -3 not past maxmemory. */
static int cf_classic_add(fstack *s, const cuckoo_item *it) {
    for (uint32_t i = s->nsubs; i-- > 0;) {
        cuckoo_table t = cf_table(s, i);
        if (classic_cuckoo_place(&t, it)) {
            s->items++;
            return 1;
        }
    }
    cuckoo_table t = cf_table(s, s->nsubs - 1);
    if (!classic_cuckoo_kick_in(&t, it, s->max_iterations)) {
        if (!s->expansion) return -1;
        int rc = add_sub(s, cf_sub_slots(s, s->nsubs), 0); /* BKV_FULL past MAX_CAPACITY */
        if (rc) return rc == BKV_NOMEM ? -3 : -1;
        t = cf_table(s, s->nsubs - 1);
        classic_cuckoo_place(&t, it); /* an empty table has room */
    }
    s->items++;
    return 1;
}

/* 1 added, 0 existed (nx), -1 full, -2 no more sub-filters, -3 not past
 * maxmemory. */
static int cf_add(fstack *s, const item_key *k, int nx) {
    if (nx && stack_contains(s, k)) return 0;
    if (s->layout == LAYOUT_REDISBLOOM) return cf_classic_add(s, &k->ci);
    bkv_hash h = k->h;
    sub_filter *last = &s->subs[s->nsubs - 1];
    /* A sub-filter holds its capacity, no more (a cuckoo table sized for
     * it often has room past it): a filter of capacity n answers full, or
     * grows, at item n + 1, whatever the hashes did. */
    if (last->count >= last->capacity || bkv_filter_add(last->f, h) != BKV_OK) {
        if (!s->expansion) return -1;
        if (s->nsubs >= SETTING(CF_MAX_EXPANSIONS)) return -2;
        int rc = add_sub(s, grown(last->capacity, s->expansion), 0.01);
        if (rc) return rc == BKV_NOMEM ? -3 : -1;
        last = &s->subs[s->nsubs - 1];
        if (bkv_filter_add(last->f, h) != BKV_OK) return -1;
    }
    last->count++;
    s->items++;
    return 1;
}

/* RedisBloom's cuckoo filter: capacity / bucket_size buckets rounded up to
 * a power of two, and an expansion rounded up to one (0 stays 0). */
static fstack *cf_new(uint64_t capacity, uint64_t bucket_size, uint64_t max_iterations, uint64_t expansion, int *rc) {
    uint64_t rounded = 0;
    if (expansion) {
        rounded = 1;
        while (rounded < expansion) rounded *= 2;
    }
    fstack *s = RedisModule_Calloc(1, sizeof *s);
    s->kind = KIND_CF;
    s->layout = LAYOUT_REDISBLOOM;
    s->expansion = (uint32_t)rounded;
    s->bucket_size = (uint8_t)bucket_size;
    s->max_iterations = (uint16_t)max_iterations;
    if ((*rc = add_sub(s, classic_cuckoo_buckets(capacity, (unsigned)bucket_size) * bucket_size, 0))) {
        fstack_free(s);
        return NULL;
    }
    return s;
}

static int cf_insert_items(RedisModuleCtx *ctx, RedisModuleString *keyname, RedisModuleString **items, int n,
                           int create, uint64_t capacity, int nx, int multi) {
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, keyname, KIND_CF, REDISMODULE_READ | REDISMODULE_WRITE, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_EMPTY) {
        if (!create) return RedisModule_ReplyWithError(ctx, "ERR not found");
        int rc;
        if (!(s = cf_new(capacity, SETTING(CF_BUCKET_SIZE), SETTING(CF_MAX_ITERATIONS), SETTING(CF_EXPANSION), &rc)))
            return reply_no_filter(ctx, rc);
        RedisModule_ModuleTypeSetValue(key, cf_type, s);
    }
    /* As RedisBloom: a stack at its most sub-filters takes nothing more,
     * even where one would still fit, so that a flood of items cannot
     * make it grow without end. */
    if (s->layout == LAYOUT_REDISBLOOM && s->nsubs >= SETTING(CF_MAX_EXPANSIONS))
        return RedisModule_ReplyWithError(ctx, "ERR Maximum expansions reached");
    /* RedisBloom's replies: CF.INSERT answers booleans to a RESP3 client
     * (false where an item found no room), integers 1, 0, -1 otherwise. */
    int insert_bools = multi && !nx && (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_RESP3);
    if (multi) RedisModule_ReplyWithArray(ctx, n);
    for (int i = 0; i < n; i++) {
        item_key k = item_hash(s, items[i]);
        int r = cf_add(s, &k, nx);
        if (r == -3) {
            if (multi) reply_no_filter(ctx, BKV_NOMEM);
            else return reply_no_filter(ctx, BKV_NOMEM);
            continue;
        }
        if (r < 0 && !multi)
            return RedisModule_ReplyWithError(ctx, r == -2 ? "ERR Maximum expansions reached" : "ERR Filter is full");
        if (insert_bools) RedisModule_ReplyWithBool(ctx, r > 0);
        else if (multi) RedisModule_ReplyWithLongLong(ctx, r < 0 ? -1 : r);
        else RedisModule_ReplyWithBool(ctx, r);
    }
    RedisModule_ReplicateVerbatim(ctx);
    return REDISMODULE_OK;
}

static int cmd_cf_reserve(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3 || argc % 2 == 0) return RedisModule_WrongArity(ctx);
    uint64_t capacity, bucket = SETTING(CF_BUCKET_SIZE), iters = SETTING(CF_MAX_ITERATIONS), expansion = SETTING(CF_EXPANSION);
    if (parse_count(ctx, argv[2], &capacity, 1, MAX_CAPACITY, "capacity")) return REDISMODULE_OK;
    for (int i = 3; i < argc; i += 2) {
        if (arg_is(argv[i], "BUCKETSIZE")) {
            if (parse_count(ctx, argv[i + 1], &bucket, 1, MAX_BUCKET_SIZE, "bucket size")) return REDISMODULE_OK;
        } else if (arg_is(argv[i], "MAXITERATIONS")) {
            if (parse_count(ctx, argv[i + 1], &iters, 1, MAX_ITERATIONS, "max iterations")) return REDISMODULE_OK;
        } else if (arg_is(argv[i], "EXPANSION")) {
            if (parse_count(ctx, argv[i + 1], &expansion, 0, MAX_EXPANSION, "expansion")) return REDISMODULE_OK;
        } else return RedisModule_ReplyWithError(ctx, "ERR syntax error");
    }
    if (bucket * 2 > capacity) return RedisModule_ReplyWithError(ctx, "ERR Capacity must be at least (BucketSize * 2)");
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], KIND_CF, REDISMODULE_READ | REDISMODULE_WRITE, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_OK) return RedisModule_ReplyWithError(ctx, "ERR item exists");
    int rc;
    if (!(s = cf_new(capacity, bucket, iters, expansion, &rc))) return reply_no_filter(ctx, rc);
    RedisModule_ModuleTypeSetValue(key, cf_type, s);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int cmd_cf_add(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    return cf_insert_items(ctx, argv[1], argv + 2, 1, 1, SETTING(CF_INITIAL_SIZE), 0, 0);
}

static int cmd_cf_addnx(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    return cf_insert_items(ctx, argv[1], argv + 2, 1, 1, SETTING(CF_INITIAL_SIZE), 1, 0);
}

static int cf_insert_common(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int nx) {
    if (argc < 4) return RedisModule_WrongArity(ctx);
    uint64_t capacity = SETTING(CF_INITIAL_SIZE);
    int create = 1, i = 2;
    for (; i < argc && !arg_is(argv[i], "ITEMS"); i++) {
        if (arg_is(argv[i], "NOCREATE")) create = 0;
        else if (arg_is(argv[i], "CAPACITY") && i + 1 < argc) {
            if (parse_count(ctx, argv[++i], &capacity, 4, MAX_CAPACITY, "capacity")) return REDISMODULE_OK;
        } else return RedisModule_ReplyWithError(ctx, "ERR unknown argument received");
    }
    if (i >= argc - 1) return RedisModule_WrongArity(ctx);
    return cf_insert_items(ctx, argv[1], argv + i + 1, argc - i - 1, create, capacity, nx, 1);
}

static int cmd_cf_insert(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return cf_insert_common(ctx, argv, argc, 0);
}
static int cmd_cf_insertnx(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return cf_insert_common(ctx, argv, argc, 1);
}
static int cmd_cf_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return exists_common(ctx, argv, argc, KIND_CF, 0);
}
static int cmd_cf_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return exists_common(ctx, argv, argc, KIND_CF, 1);
}

/* Gives back the room deletes made: the entries of each sub-filter, newest
 * first, move into older sub-filters of the same size where those have
 * room (each still holding at most its capacity; sub-filters of another
 * size, made by an EXPANSION over 1, cannot take them), and emptied
 * sub-filters at the end of the stack are freed. all: go on past a
 * sub-filter that cannot be emptied (CF.COMPACT); without it, stop there
 * (a delete's own compaction, whose sub-filters below could not be freed
 * anyway). */
static void cf_compact(fstack *s, int all) {
    for (uint32_t i = s->nsubs; s->layout == LAYOUT_REDISBLOOM && i-- > 1;) {
        /* RedisBloom's: each fingerprint into the oldest sub-filter with
         * room in one of its two buckets there. */
        cuckoo_table *older = RedisModule_Alloc(i * sizeof *older);
        for (uint32_t j = 0; j < i; j++) older[j] = cf_table(s, j);
        cuckoo_table t = cf_table(s, i);
        int emptied = classic_cuckoo_move_down(&t, older, i);
        RedisModule_Free(older);
        if (emptied && i == s->nsubs - 1) pop_sub(s);
        if (!emptied && !all) break;
    }
    for (uint32_t i = s->nsubs; s->layout == LAYOUT_LIBRARY && i-- > 1;) { /* with per-sub-filter counts */
        sub_filter *from = &s->subs[i];
        for (uint32_t j = 0; j < i && from->count > 0; j++) {
            sub_filter *to = &s->subs[j];
            uint64_t moved;
            if (to->count >= to->capacity ||
                bkv_filter_move_entries(from->f, to->f, to->capacity - to->count, &moved) != BKV_OK)
                continue;
            from->count -= moved < from->count ? moved : from->count;
            to->count += moved;
        }
        if (from->count > 0 && !all) break;
    }
    while (s->layout == LAYOUT_LIBRARY && s->nsubs > 1 && s->subs[s->nsubs - 1].count == 0) pop_sub(s);
    s->deletes = 0;
}

/* CF.COMPACT key: RedisBloom's; OK, or an error when there is no filter. */
static int cmd_cf_compact(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], KIND_CF, REDISMODULE_READ | REDISMODULE_WRITE, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_EMPTY) return RedisModule_ReplyWithError(ctx, "Cuckoo filter was not found");
    cf_compact(s, 1);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int cmd_cf_del(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], KIND_CF, REDISMODULE_READ | REDISMODULE_WRITE, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_EMPTY) return RedisModule_ReplyWithError(ctx, "ERR not found");
    item_key k = item_hash(s, argv[2]);
    /* Newest first: a re-added item most likely sits in the newest. */
    for (uint32_t i = s->nsubs; i-- > 0;)
        if (cf_sub_delete(s, i, &k)) {
            if (s->layout == LAYOUT_LIBRARY) s->subs[i].count--;
            s->items--;
            s->deletes++;
            /* As RedisBloom: once deletes pass a tenth of the items, the
             * newest sub-filters are emptied into older ones and freed. */
            if (s->nsubs > 1 && (double)s->deletes > (double)s->items * 0.10) cf_compact(s, 0);
            RedisModule_ReplicateVerbatim(ctx);
            return RedisModule_ReplyWithBool(ctx, 1);
        }
    return RedisModule_ReplyWithBool(ctx, 0);
}

static int cmd_cf_count(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], KIND_CF, REDISMODULE_READ, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_EMPTY) return RedisModule_ReplyWithLongLong(ctx, 0);
    item_key k = item_hash(s, argv[2]);
    long long n = 0;
    for (uint32_t i = 0; i < s->nsubs; i++) n += (long long)cf_sub_count(s, i, &k);
    return RedisModule_ReplyWithLongLong(ctx, n);
}

/* The buckets of a cuckoo stack as RedisBloom counts them: the first
 * sub-filter's (in the library's layout its bits count fingerprint bits,
 * k of them a slot, four slots a bucket). */
static uint64_t cf_buckets(const fstack *s) {
    if (s->layout == LAYOUT_REDISBLOOM) return s->cf_buckets;
    bkv_filter_info fi;
    bkv_filter_get_info(s->subs[0].f, &fi);
    return fi.num_bits / (CF_BUCKET_SLOTS * fi.k);
}

/* The slots a bucket has: as reserved, or the library's four. */
static unsigned cf_bucket_slots(const fstack *s) {
    return s->layout == LAYOUT_REDISBLOOM ? s->bucket_size : CF_BUCKET_SLOTS;
}

/* CF.DEBUG key: RedisBloom's one line. */
static int cmd_cf_debug(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], KIND_CF, REDISMODULE_READ, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_EMPTY) return RedisModule_ReplyWithError(ctx, "ERR not found");
    uint64_t buckets = cf_buckets(s);
    char line[200];
    snprintf(line, sizeof line, "bktsize:%u buckets:%llu items:%llu deletes:%llu filters:%u max_iterations:%llu "
             "expansion:%llu", cf_bucket_slots(s), (unsigned long long)buckets, (unsigned long long)s->items,
             (unsigned long long)s->deletes, s->nsubs, (unsigned long long)s->max_iterations,
             (unsigned long long)s->expansion);
    return RedisModule_ReplyWithSimpleString(ctx, line);
}

static int cmd_cf_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], KIND_CF, REDISMODULE_READ, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_EMPTY) return RedisModule_ReplyWithError(ctx, "ERR not found");
    uint64_t buckets = cf_buckets(s);
    const char *names[] = {"Size", "Number of buckets", "Number of filters", "Number of items inserted",
                           "Number of items deleted", "Bucket size", "Expansion rate", "Max iterations"};
    long long vals[] = {(long long)f_mem_usage(s), (long long)buckets, s->nsubs, (long long)s->items,
                        (long long)s->deletes, cf_bucket_slots(s), (long long)s->expansion,
                        (long long)s->max_iterations};
    RedisModule_ReplyWithMap(ctx, 8);
    for (int i = 0; i < 8; i++) {
        RedisModule_ReplyWithSimpleString(ctx, names[i]);
        RedisModule_ReplyWithLongLong(ctx, vals[i]);
    }
    return REDISMODULE_OK;
}

/* ---- BKV.FILTER.* (static filters) ---- */

static int cmd_filter_build(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 5) return RedisModule_WrongArity(ctx);
    int type = bkv_filter_type_from_name(RedisModule_StringPtrLen(argv[2], NULL));
    if (type <= 0) return RedisModule_ReplyWithError(ctx, "ERR unknown filter type (ribbon, fuse8, fuse16, xor8, blocked, bloom, cuckoo8, cuckoo12, cuckoo16, counting)");
    double fpr;
    if (parse_error_rate(ctx, argv[3], &fpr)) return REDISMODULE_OK;
    size_t n = (size_t)argc - 4;
    bkv_hash *h = RedisModule_Alloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = RedisModule_StringPtrLen(argv[i + 4], &len);
        h[i] = bkv_hash_bytes(p, len);
    }
    bkv_filter_spec spec = {.type = type, .fpr = fpr};
    bkv_filter *f;
    int rc = bkv_filter_build(&spec, h, n, &f);
    RedisModule_Free(h);
    if (rc) return RedisModule_ReplyWithError(ctx, "ERR could not build the filter");
    if (!memory_allows(bkv_filter_memory(f))) {
        bkv_filter_destroy(f);
        return reply_no_filter(ctx, BKV_NOMEM);
    }
    filter_bytes += bkv_filter_memory(f);
    fstack *s = RedisModule_Calloc(1, sizeof *s);
    s->kind = KIND_STATIC;
    s->error = fpr;
    s->items = n;
    push_sub(s, (sub_filter){.f = f, .capacity = n, .count = n});
    RedisModuleKey *key;
    fstack *old;
    if (open_filter(ctx, argv[1], KIND_STATIC, REDISMODULE_READ | REDISMODULE_WRITE, &key, &old) == LOOKUP_WRONGTYPE) {
        fstack_free(s);
        return REDISMODULE_OK;
    }
    RedisModule_ModuleTypeSetValue(key, static_type, s); /* a rebuild replaces the old filter */
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int cmd_filter_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return exists_common(ctx, argv, argc, KIND_STATIC, 0);
}
static int cmd_filter_mexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return exists_common(ctx, argv, argc, KIND_STATIC, 1);
}

/* BKV.FILTER.LOADBLOB key blob: what an AOF rewrite writes for any of the
 * three types; the blob is validated like an RDB's. */
static int cmd_filter_loadblob(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    size_t len;
    const char *b = RedisModule_StringPtrLen(argv[2], &len);
    char why[200], msg[240];
    fstack *s = decode_blob(b, len, why, sizeof why);
    if (!s) {
        snprintf(msg, sizeof msg, "ERR %s", why);
        return RedisModule_ReplyWithError(ctx, msg);
    }
    /* A client's blob is held to maxmemory; an AOF's or a master's is
     * data this node must hold. */
    if (!(RedisModule_GetContextFlags(ctx) & (REDISMODULE_CTX_FLAGS_LOADING | REDISMODULE_CTX_FLAGS_REPLICATED)) &&
        !memory_allows(0)) {
        fstack_free(s);
        return reply_no_filter(ctx, BKV_NOMEM);
    }
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    RedisModule_ModuleTypeSetValue(key, type_of(s->kind), s);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* BF.SCANDUMP / CF.SCANDUMP key iterator -> [next iterator, chunk]; [0, ""] at the end. */
static int scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int kind) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    long long it;
    if (RedisModule_StringToLongLong(argv[2], &it) != REDISMODULE_OK || it < 0)
        return RedisModule_ReplyWithError(ctx, "ERR Invalid iterator");
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], kind, REDISMODULE_READ, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (st == LOOKUP_EMPTY) return RedisModule_ReplyWithError(ctx, "ERR not found");
    RedisModule_ReplyWithArray(ctx, 2);
    if (kind == KIND_CF && s->items == 0) { /* as RedisBloom: an empty cuckoo filter dumps nothing */
        RedisModule_ReplyWithLongLong(ctx, 0);
        return RedisModule_ReplyWithNull(ctx);
    }
    if (it == 0) {
        size_t len;
        char *h = s->layout == LAYOUT_LIBRARY ? encode_dump_header(s, &len)
                  : kind == KIND_BF           ? encode_rb_header(s, &len)
                                              : encode_rb_cf_header(s, &len);
        RedisModule_ReplyWithLongLong(ctx, 1);
        RedisModule_ReplyWithStringBuffer(ctx, h, len);
        RedisModule_Free(h);
        return REDISMODULE_OK;
    }
    if (s->layout == LAYOUT_REDISBLOOM) return rb_dump_chunk(ctx, s, it);
    /* The chunk after the one iterator names (any other number: the end). */
    uint64_t next = 0;
    uint32_t sub;
    size_t sub_off, len;
    if (it >= 2) {
        if (!chunk_at(s, (uint64_t)it - 2, &sub, &sub_off, &len)) next = UINT64_MAX;
        else next = (uint64_t)it - 2 + len;
    }
    if (next == UINT64_MAX || !chunk_at(s, next, &sub, &sub_off, &len)) {
        RedisModule_ReplyWithLongLong(ctx, 0);
        return RedisModule_ReplyWithStringBuffer(ctx, "", 0);
    }
    size_t n;
    const char *payload = bkv_filter_payload(s->subs[sub].f, &n);
    RedisModule_ReplyWithLongLong(ctx, (long long)(next + 2));
    return RedisModule_ReplyWithStringBuffer(ctx, payload + sub_off, len);
}

/* BF.LOADCHUNK / CF.LOADCHUNK key iterator chunk: what SCANDUMP gave. */
static int loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int kind) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    long long it;
    if (RedisModule_StringToLongLong(argv[2], &it) != REDISMODULE_OK || it < 1)
        return RedisModule_ReplyWithError(ctx, bad_position(kind));
    size_t len;
    const char *data = RedisModule_StringPtrLen(argv[3], &len);
    RedisModuleKey *key;
    fstack *s;
    int st = open_filter(ctx, argv[1], kind, REDISMODULE_READ | REDISMODULE_WRITE, &key, &s);
    if (st == LOOKUP_WRONGTYPE) return REDISMODULE_OK;
    if (it == 1) {
        if (st != LOOKUP_EMPTY && kind == KIND_CF) return RedisModule_ReplyWithError(ctx, "item exists");
        /* A BF header is RedisBloom's unless it has the blob's magic: this
         * module's own form, from before BF took RedisBloom's layout. */
        uint32_t magic = 0;
        if (len >= 4) memcpy(&magic, data, 4);
        fstack *loaded;
        int rc;
        if (magic != BLOB_MAGIC) {
            if (!(loaded = kind == KIND_BF ? decode_rb_header(data, len, &rc) : decode_rb_cf_header(data, len, &rc)))
                return rc == BKV_NOMEM ? reply_no_filter(ctx, BKV_NOMEM) : RedisModule_ReplyWithError(ctx, bad_header(kind));
        } else if (!(loaded = decode_dump_header(ctx, data, len, kind)))
            return REDISMODULE_OK;
        if (st != LOOKUP_EMPTY) { /* a filter is never replaced piece by piece */
            fstack_free(loaded);
            return RedisModule_ReplyWithError(ctx, "ERR the key already holds a filter");
        }
        RedisModule_ModuleTypeSetValue(key, type_of(kind), loaded);
    } else {
        if (st == LOOKUP_EMPTY) return RedisModule_ReplyWithError(ctx, bad_position(kind));
        if (s->layout == LAYOUT_REDISBLOOM) return rb_loadchunk(ctx, s, it, data, len);
        uint32_t sub;
        size_t sub_off, want;
        if (!chunk_at(s, (uint64_t)it - 2, &sub, &sub_off, &want)) /* RedisBloom's CF names no position */
            return RedisModule_ReplyWithError(ctx, kind == KIND_CF ? bad_chunk(kind, 0) : bad_position(kind));
        if (len != want || bkv_filter_load_payload(s->subs[sub].f, sub_off, data, len) != BKV_OK)
            return RedisModule_ReplyWithError(ctx, bad_chunk(kind, len > want));
    }
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int cmd_bf_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return scandump(ctx, argv, argc, KIND_BF);
}
static int cmd_cf_scandump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return scandump(ctx, argv, argc, KIND_CF);
}
static int cmd_bf_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return loadchunk(ctx, argv, argc, KIND_BF);
}
static int cmd_cf_loadchunk(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return loadchunk(ctx, argv, argc, KIND_CF);
}

typedef struct fcommand {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
} fcommand;

static const fcommand fcommands[] = {
    {"bf.reserve", cmd_bf_reserve, "write deny-oom"},   {"bf.add", cmd_bf_add, "write deny-oom"},
    {"bf.madd", cmd_bf_madd, "write deny-oom"},         {"bf.insert", cmd_bf_insert, "write deny-oom"},
    {"bf.exists", cmd_bf_exists, "readonly fast"},      {"bf.mexists", cmd_bf_mexists, "readonly fast"},
    {"bf.info", cmd_bf_info, "readonly fast"},          {"bf.card", cmd_bf_card, "readonly fast"},
    {"cf.reserve", cmd_cf_reserve, "write deny-oom"},   {"cf.add", cmd_cf_add, "write deny-oom"},
    {"cf.addnx", cmd_cf_addnx, "write deny-oom"},       {"cf.insert", cmd_cf_insert, "write deny-oom"},
    {"cf.insertnx", cmd_cf_insertnx, "write deny-oom"}, {"cf.exists", cmd_cf_exists, "readonly fast"},
    {"cf.mexists", cmd_cf_mexists, "readonly fast"},    {"cf.del", cmd_cf_del, "write fast"},
    {"cf.count", cmd_cf_count, "readonly fast"},        {"cf.info", cmd_cf_info, "readonly fast"},
    {"cf.compact", cmd_cf_compact, "write"},
    {"bf.debug", cmd_bf_debug, "readonly"},             {"cf.debug", cmd_cf_debug, "readonly"},
    {"bf.scandump", cmd_bf_scandump, "readonly"},       {"bf.loadchunk", cmd_bf_loadchunk, "write deny-oom"},
    {"cf.scandump", cmd_cf_scandump, "readonly"},       {"cf.loadchunk", cmd_cf_loadchunk, "write deny-oom"},
    {"bkv.filter.build", cmd_filter_build, "write deny-oom"},
    {"bkv.filter.exists", cmd_filter_exists, "readonly fast"},
    {"bkv.filter.mexists", cmd_filter_mexists, "readonly fast"},
    {"bkv.filter.loadblob", cmd_filter_loadblob, "write deny-oom"},
};

/* ---- settings: module arguments and CONFIG ---- */

static int setting_index(const char *name) {
    for (int i = 0; i < NSETTINGS; i++)
        if (!strcasecmp(name, settings[i].name) || (settings[i].alias && !strcasecmp(name, settings[i].alias)))
            return i;
    return -1;
}

int bkv_redis_filter_option(const char *name, const char *value, char *why, size_t wl) {
    char *end;
    if (!strcasecmp(name, "bf-error-rate") || !strcasecmp(name, "ERROR_RATE")) {
        double e = strtod(value, &end);
        if (end == value || *end || !(e > 0 && e < 1))
            return snprintf(why, wl, "%s must be in the range (0, 1), not %s", name, value), -1;
        bf_error_rate = e;
        return 0;
    }
    int i = setting_index(name);
    if (i < 0) return snprintf(why, wl, "unknown option %s", name), 1;
    long long v = strtoll(value, &end, 10);
    if (end == value || *end || v < settings[i].min || v > settings[i].max)
        return snprintf(why, wl, "%s must be in the range [%lld, %lld], not %s", name, settings[i].min,
                        settings[i].max, value),
               -1;
    settings[i].value = v;
    return 0;
}

static long long get_numeric(const char *name, void *privdata) {
    (void)name;
    return ((numeric_setting *)privdata)->value;
}

static int set_numeric(const char *name, long long value, void *privdata, RedisModuleString **err) {
    (void)name, (void)err; /* Redis checked the range registered */
    ((numeric_setting *)privdata)->value = value;
    return REDISMODULE_OK;
}

static RedisModuleString *get_error_rate(const char *name, void *privdata) {
    (void)name, (void)privdata;
    static RedisModuleString *held; /* Redis copies the string before the next call */
    if (held) RedisModule_FreeString(NULL, held);
    char text[32];
    snprintf(text, sizeof text, "%g", bf_error_rate);
    return held = RedisModule_CreateString(NULL, text, strlen(text));
}

static int set_error_rate(const char *name, RedisModuleString *value, void *privdata, RedisModuleString **err) {
    (void)privdata;
    char why[160];
    if (bkv_redis_filter_option(name, RedisModule_StringPtrLen(value, NULL), why, sizeof why)) {
        *err = RedisModule_CreateString(NULL, why, strlen(why));
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}

/* CONFIG GET/SET bloomkv.<name> (Redis names module configs after the
 * module), starting from what the module arguments set. */
static int register_settings(RedisModuleCtx *ctx) {
    if (!RedisModule_RegisterNumericConfig || !RedisModule_RegisterStringConfig) return REDISMODULE_OK;
    for (int i = 0; i < NSETTINGS; i++)
        if (RedisModule_RegisterNumericConfig(ctx, settings[i].name, settings[i].value, REDISMODULE_CONFIG_DEFAULT,
                                              settings[i].min, settings[i].max, get_numeric, set_numeric, NULL,
                                              &settings[i]) == REDISMODULE_ERR)
            return REDISMODULE_ERR;
    char rate[32];
    snprintf(rate, sizeof rate, "%g", bf_error_rate);
    return RedisModule_RegisterStringConfig(ctx, "bf-error-rate", rate, REDISMODULE_CONFIG_DEFAULT, get_error_rate,
                                            set_error_rate, NULL, NULL);
}

int bkv_redis_filters_init(RedisModuleCtx *ctx) {
    RedisModuleTypeMethods tm = {.version = REDISMODULE_TYPE_METHOD_VERSION,
                                 .rdb_load = f_rdb_load,
                                 .rdb_save = f_rdb_save,
                                 .aof_rewrite = f_aof_rewrite,
                                 .mem_usage = f_mem_usage,
                                 .digest = f_digest,
                                 .free = f_free,
                                 .copy = f_copy};
    /* Type names are exactly nine characters. */
    if (!(bf_type = RedisModule_CreateDataType(ctx, "bkv-bloom", FILTER_ENCVER, &tm)) ||
        !(cf_type = RedisModule_CreateDataType(ctx, "bkv-cucko", FILTER_ENCVER, &tm)) ||
        !(static_type = RedisModule_CreateDataType(ctx, "bkv-sfilt", FILTER_ENCVER, &tm)))
        return REDISMODULE_ERR;
    for (size_t i = 0; i < sizeof fcommands / sizeof fcommands[0]; i++)
        if (RedisModule_CreateCommand(ctx, fcommands[i].name, fcommands[i].fn, fcommands[i].flags, 1, 1, 1) ==
            REDISMODULE_ERR)
            return REDISMODULE_ERR;
    return register_settings(ctx);
}
