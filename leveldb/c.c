/*
 * LevelDB's C API over bloomkv's public one (include/leveldb/c.h says
 * what differs). Each LevelDB handle wraps the bloomkv handle it stands
 * for; options are kept in LevelDB's form until leveldb_open turns them
 * into bkv_options, as LevelDB reads its Options at open.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bloomkv.h"
#include "leveldb/c.h"

/* LevelDB's own defaults, so a program that sets nothing gets what it got
 * from LevelDB: no create, 4 MiB write buffer, 4 KiB blocks, an 8 MiB
 * block cache, 1000 open files, 2 MiB tables, compression on. */
#define DEFAULT_WRITE_BUFFER (4u << 20)
#define DEFAULT_CACHE (8u << 20)
#define DEFAULT_FILE_SIZE (2u << 20)

struct leveldb_t {
    bkv_db *db;
};

struct leveldb_comparator_t {
    void *state;
    void (*destructor)(void *);
    int (*compare)(void *, const char *, size_t, const char *, size_t);
    const char *(*name)(void *);
};

struct leveldb_filterpolicy_t {
    void *state;
    void (*destructor)(void *);
    const char *(*name)(void *);
    int bits_per_key; /* > 0: made by leveldb_filterpolicy_create_bloom */
};

struct leveldb_cache_t {
    size_t capacity;
};

struct leveldb_env_t {
    int unused;
};

struct leveldb_options_t {
    int create_if_missing, error_if_exists, paranoid_checks, max_open_files, compression;
    size_t write_buffer_size, block_size, max_file_size, cache_size;
    const leveldb_comparator_t *comparator;
    const leveldb_filterpolicy_t *filter_policy;
};

struct leveldb_readoptions_t {
    int verify_checksums, fill_cache;
    const leveldb_snapshot_t *snapshot;
};

struct leveldb_writeoptions_t {
    int sync;
};

/* A batch keeps its operations twice: as bloomkv's batch, which
 * leveldb_write applies, and as a log of (type, key, value) that
 * leveldb_writebatch_iterate replays. */
struct leveldb_writebatch_t {
    bkv_batch *batch;
    char *log;
    size_t len, cap;
};

struct leveldb_iterator_t {
    bkv_iter *it;
};

/* ---- errors ---- */

/* LevelDB's way: *errptr gets a malloc'd "<kind>: <detail>", an earlier
 * message there freed first. */
static void save_error(char **errptr, const char *fmt, ...) {
    if (!errptr) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *msg = malloc((size_t)n + 1);
    if (!msg) return;
    va_start(ap, fmt);
    vsnprintf(msg, (size_t)n + 1, fmt, ap);
    va_end(ap);
    free(*errptr);
    *errptr = msg;
}

static const char *status_kind(int rc) {
    switch (rc) {
    case BKV_CORRUPTION: return "Corruption";
    case BKV_IOERROR: return "IO error";
    case BKV_NOTFOUND: return "NotFound";
    case BKV_INVALID: return "Invalid argument";
    default: return "IO error"; /* out of memory, busy: LevelDB reports these as I/O errors */
    }
}

/* 1 when rc is an error, which is then saved. */
static int failed(int rc, bkv_db *db, char **errptr) {
    if (rc >= 0) return 0;
    const char *msg = bkv_errmsg(db);
    save_error(errptr, "%s: %s", status_kind(rc), *msg ? msg : bkv_strerror(rc));
    return 1;
}

/* ---- options ---- */

leveldb_options_t *leveldb_options_create(void) {
    leveldb_options_t *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->write_buffer_size = DEFAULT_WRITE_BUFFER;
    o->block_size = 4096;
    o->max_open_files = 1000;
    o->max_file_size = DEFAULT_FILE_SIZE;
    o->cache_size = DEFAULT_CACHE;
    o->compression = leveldb_snappy_compression;
    return o;
}

void leveldb_options_destroy(leveldb_options_t *o) { free(o); }
void leveldb_options_set_comparator(leveldb_options_t *o, leveldb_comparator_t *c) { o->comparator = c; }
void leveldb_options_set_filter_policy(leveldb_options_t *o, leveldb_filterpolicy_t *p) { o->filter_policy = p; }
void leveldb_options_set_create_if_missing(leveldb_options_t *o, uint8_t v) { o->create_if_missing = v != 0; }
void leveldb_options_set_error_if_exists(leveldb_options_t *o, uint8_t v) { o->error_if_exists = v != 0; }
void leveldb_options_set_paranoid_checks(leveldb_options_t *o, uint8_t v) { o->paranoid_checks = v != 0; }
void leveldb_options_set_env(leveldb_options_t *o, leveldb_env_t *env) { (void)o, (void)env; }
void leveldb_options_set_info_log(leveldb_options_t *o, leveldb_logger_t *log) { (void)o, (void)log; }
void leveldb_options_set_write_buffer_size(leveldb_options_t *o, size_t n) { o->write_buffer_size = n; }
void leveldb_options_set_max_open_files(leveldb_options_t *o, int n) { o->max_open_files = n; }
/* NULL: LevelDB's own 8 MiB cache, as LevelDB makes one when given none. */
void leveldb_options_set_cache(leveldb_options_t *o, leveldb_cache_t *c) {
    o->cache_size = c ? c->capacity : DEFAULT_CACHE;
}
void leveldb_options_set_block_size(leveldb_options_t *o, size_t n) { o->block_size = n; }
/* bloomkv's blocks restart every 16 keys, and their index searches through
 * fences rather than restarts: the interval is taken and left unused. */
void leveldb_options_set_block_restart_interval(leveldb_options_t *o, int n) { (void)o, (void)n; }
void leveldb_options_set_max_file_size(leveldb_options_t *o, size_t n) { o->max_file_size = n; }
void leveldb_options_set_compression(leveldb_options_t *o, int level) { o->compression = level; }

leveldb_readoptions_t *leveldb_readoptions_create(void) {
    leveldb_readoptions_t *o = calloc(1, sizeof *o);
    if (o) o->fill_cache = 1;
    return o;
}

void leveldb_readoptions_destroy(leveldb_readoptions_t *o) { free(o); }
void leveldb_readoptions_set_verify_checksums(leveldb_readoptions_t *o, uint8_t v) { o->verify_checksums = v != 0; }
void leveldb_readoptions_set_fill_cache(leveldb_readoptions_t *o, uint8_t v) { o->fill_cache = v != 0; }
void leveldb_readoptions_set_snapshot(leveldb_readoptions_t *o, const leveldb_snapshot_t *s) { o->snapshot = s; }

leveldb_writeoptions_t *leveldb_writeoptions_create(void) { return calloc(1, sizeof(leveldb_writeoptions_t)); }
void leveldb_writeoptions_destroy(leveldb_writeoptions_t *o) { free(o); }
void leveldb_writeoptions_set_sync(leveldb_writeoptions_t *o, uint8_t v) { o->sync = v != 0; }

static void read_options(const leveldb_readoptions_t *in, bkv_read_options *ro) {
    bkv_read_options_init(ro);
    if (!in) return;
    ro->verify_checksums = in->verify_checksums;
    ro->fill_cache = in->fill_cache;
    ro->snapshot = (const bkv_snapshot *)in->snapshot;
}

static void write_options(const leveldb_writeoptions_t *in, bkv_write_options *wo) {
    bkv_write_options_init(wo);
    if (in) wo->sync = in->sync;
}

/* ---- comparators, filter policies, caches, envs ---- */

leveldb_comparator_t *leveldb_comparator_create(void *state, void (*destructor)(void *),
                                                int (*compare)(void *, const char *, size_t, const char *, size_t),
                                                const char *(*name)(void *)) {
    leveldb_comparator_t *c = malloc(sizeof *c);
    if (c) *c = (leveldb_comparator_t){state, destructor, compare, name};
    return c;
}

void leveldb_comparator_destroy(leveldb_comparator_t *c) {
    if (!c) return;
    if (c->destructor) c->destructor(c->state);
    free(c);
}

static int bytewise(const char *a, size_t alen, const char *b, size_t blen) {
    int r = memcmp(a, b, alen < blen ? alen : blen);
    return r ? r : (alen > blen) - (alen < blen);
}

/* Whether a caller's comparator orders keys as bloomkv does (bytewise),
 * judged on every pair of a probe set: equal and prefix keys, a byte
 * apart at either end, high bytes, zero bytes, and keys of mixed length. */
static int orders_bytewise(const leveldb_comparator_t *c) {
    static const char *const probes[] = {"", "a", "ab", "abc", "abd", "b", "ba", "z", "\x7f", "\x80", "\xff",
                                         "\xff\xff", "a\x00", "a\x00\x01", "0", "00", "1", "10", "9", "A", "Z",
                                         "key10", "key2", "key\xe9"};
    static const size_t lens[] = {0, 1, 2, 3, 3, 1, 2, 1, 1, 1, 1, 2, 2, 3, 1, 2, 1, 2, 1, 1, 1, 5, 4, 4};
    size_t n = sizeof probes / sizeof probes[0];
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            int want = bytewise(probes[i], lens[i], probes[j], lens[j]);
            int got = c->compare(c->state, probes[i], lens[i], probes[j], lens[j]);
            if ((want > 0) != (got > 0) || (want < 0) != (got < 0)) return 0;
        }
    return 1;
}

leveldb_filterpolicy_t *leveldb_filterpolicy_create(
    void *state, void (*destructor)(void *),
    char *(*create_filter)(void *, const char *const *, const size_t *, int, size_t *),
    uint8_t (*key_may_match)(void *, const char *, size_t, const char *, size_t), const char *(*name)(void *)) {
    (void)create_filter, (void)key_may_match; /* bloomkv's own filters serve (c.h) */
    leveldb_filterpolicy_t *p = calloc(1, sizeof *p);
    if (p) *p = (leveldb_filterpolicy_t){state, destructor, name, 0};
    return p;
}

leveldb_filterpolicy_t *leveldb_filterpolicy_create_bloom(int bits_per_key) {
    leveldb_filterpolicy_t *p = calloc(1, sizeof *p);
    if (p) p->bits_per_key = bits_per_key > 0 ? bits_per_key : 1;
    return p;
}

void leveldb_filterpolicy_destroy(leveldb_filterpolicy_t *p) {
    if (!p) return;
    if (p->destructor) p->destructor(p->state);
    free(p);
}

leveldb_cache_t *leveldb_cache_create_lru(size_t capacity) {
    leveldb_cache_t *c = malloc(sizeof *c);
    if (c) c->capacity = capacity;
    return c;
}

void leveldb_cache_destroy(leveldb_cache_t *c) { free(c); }

leveldb_env_t *leveldb_create_default_env(void) { return calloc(1, sizeof(leveldb_env_t)); }
void leveldb_env_destroy(leveldb_env_t *env) { free(env); }

char *leveldb_env_get_test_directory(leveldb_env_t *env) {
    (void)env;
    const char *base = getenv("TEST_TMPDIR");
    char path[4096];
    if (base && *base) snprintf(path, sizeof path, "%s", base);
    else snprintf(path, sizeof path, "/tmp/leveldbtest-%d", (int)geteuid());
    mkdir(path, 0755); /* as LevelDB's: made if missing, an existing one kept */
    return strdup(path);
}

void leveldb_free(void *ptr) { free(ptr); }
int leveldb_major_version(void) { return 1; }
int leveldb_minor_version(void) { return 23; }

/* ---- databases ---- */

leveldb_t *leveldb_open(const leveldb_options_t *in, const char *name, char **errptr) {
    if (!in || !name) {
        save_error(errptr, "Invalid argument: leveldb_open needs options and a name");
        return NULL;
    }
    if (in->comparator && !orders_bytewise(in->comparator)) {
        save_error(errptr, "Invalid argument: comparator %s does not order keys bytewise, the only order bloomkv "
                   "keeps", in->comparator->name ? in->comparator->name(in->comparator->state) : "(unnamed)");
        return NULL;
    }
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = in->create_if_missing;
    o.error_if_exists = in->error_if_exists;
    o.write_buffer_size = in->write_buffer_size;
    o.block_size = in->block_size;
    o.block_cache_size = in->cache_size;
    o.max_open_files = in->max_open_files;
    o.target_file_size = in->max_file_size;
    o.compression = in->compression == leveldb_snappy_compression ? BKV_COMPRESSION_LZ4 : BKV_COMPRESSION_NONE;
    if (in->filter_policy && in->filter_policy->bits_per_key > 0) o.bits_per_key = in->filter_policy->bits_per_key;
    bkv_db *db;
    if (failed(bkv_open(name, &o, &db), NULL, errptr)) return NULL;
    leveldb_t *l = malloc(sizeof *l);
    if (!l) {
        bkv_close(db);
        save_error(errptr, "IO error: out of memory");
        return NULL;
    }
    l->db = db;
    return l;
}

void leveldb_close(leveldb_t *db) {
    if (!db) return;
    bkv_close(db->db);
    free(db);
}

void leveldb_put(leveldb_t *db, const leveldb_writeoptions_t *options, const char *key, size_t keylen, const char *val,
                 size_t vallen, char **errptr) {
    bkv_write_options wo;
    write_options(options, &wo);
    failed(bkv_put(db->db, &wo, key, keylen, val, vallen), db->db, errptr);
}

void leveldb_delete(leveldb_t *db, const leveldb_writeoptions_t *options, const char *key, size_t keylen,
                    char **errptr) {
    bkv_write_options wo;
    write_options(options, &wo);
    failed(bkv_delete(db->db, &wo, key, keylen), db->db, errptr);
}

void leveldb_write(leveldb_t *db, const leveldb_writeoptions_t *options, leveldb_writebatch_t *batch, char **errptr) {
    bkv_write_options wo;
    write_options(options, &wo);
    failed(bkv_write(db->db, &wo, batch->batch), db->db, errptr);
}

char *leveldb_get(leveldb_t *db, const leveldb_readoptions_t *options, const char *key, size_t keylen, size_t *vallen,
                  char **errptr) {
    bkv_read_options ro;
    read_options(options, &ro);
    void *val = NULL;
    size_t len = 0;
    int rc = bkv_get(db->db, &ro, key, keylen, &val, &len);
    *vallen = 0;
    if (rc == BKV_NOTFOUND || failed(rc, db->db, errptr)) return NULL;
    *vallen = len;
    return val; /* bloomkv's values are malloc'd: leveldb_free (free) releases them */
}

const leveldb_snapshot_t *leveldb_create_snapshot(leveldb_t *db) {
    return (const leveldb_snapshot_t *)bkv_snapshot_create(db->db);
}

void leveldb_release_snapshot(leveldb_t *db, const leveldb_snapshot_t *snapshot) {
    bkv_snapshot_release(db->db, (const bkv_snapshot *)snapshot);
}

char *leveldb_property_value(leveldb_t *db, const char *propname) { return bkv_property(db->db, propname); }

void leveldb_approximate_sizes(leveldb_t *db, int num_ranges, const char *const *range_start_key,
                               const size_t *range_start_key_len, const char *const *range_limit_key,
                               const size_t *range_limit_key_len, uint64_t *sizes) {
    for (int i = 0; i < num_ranges; i++)
        if (bkv_approximate_size(db->db, range_start_key[i], range_start_key_len[i], range_limit_key[i],
                                 range_limit_key_len[i], &sizes[i]) != BKV_OK)
            sizes[i] = 0; /* LevelDB's call reports no error either */
}

void leveldb_compact_range(leveldb_t *db, const char *start_key, size_t start_key_len, const char *limit_key,
                           size_t limit_key_len) {
    bkv_compact_range(db->db, start_key, start_key_len, limit_key, limit_key_len);
}

/* LevelDB's DestroyDB of a name that holds nothing succeeds. */
void leveldb_destroy_db(const leveldb_options_t *options, const char *name, char **errptr) {
    (void)options;
    struct stat st;
    if (!name || (stat(name, &st) != 0 && errno == ENOENT)) return;
    failed(bkv_destroy(name), NULL, errptr);
}

void leveldb_repair_db(const leveldb_options_t *options, const char *name, char **errptr) {
    (void)options;
    failed(bkv_repair(name, NULL, 0), NULL, errptr);
}

/* ---- iterators ---- */

leveldb_iterator_t *leveldb_create_iterator(leveldb_t *db, const leveldb_readoptions_t *options) {
    bkv_read_options ro;
    read_options(options, &ro);
    leveldb_iterator_t *i = malloc(sizeof *i);
    if (!i) return NULL;
    if (bkv_iter_create(db->db, &ro, &i->it) != BKV_OK) {
        free(i);
        return NULL;
    }
    return i;
}

void leveldb_iter_destroy(leveldb_iterator_t *i) {
    if (!i) return;
    bkv_iter_destroy(i->it);
    free(i);
}

uint8_t leveldb_iter_valid(const leveldb_iterator_t *i) { return (uint8_t)(bkv_iter_valid(i->it) != 0); }
void leveldb_iter_seek_to_first(leveldb_iterator_t *i) { bkv_iter_seek_to_first(i->it); }
void leveldb_iter_seek_to_last(leveldb_iterator_t *i) { bkv_iter_seek_to_last(i->it); }
void leveldb_iter_seek(leveldb_iterator_t *i, const char *k, size_t klen) { bkv_iter_seek(i->it, k, klen); }
void leveldb_iter_next(leveldb_iterator_t *i) { bkv_iter_next(i->it); }
void leveldb_iter_prev(leveldb_iterator_t *i) { bkv_iter_prev(i->it); }
const char *leveldb_iter_key(const leveldb_iterator_t *i, size_t *klen) { return bkv_iter_key(i->it, klen); }
const char *leveldb_iter_value(const leveldb_iterator_t *i, size_t *vlen) { return bkv_iter_value(i->it, vlen); }

void leveldb_iter_get_error(const leveldb_iterator_t *i, char **errptr) {
    int rc = bkv_iter_status(i->it);
    if (rc != BKV_OK) save_error(errptr, "%s: %s", status_kind(rc), bkv_strerror(rc));
}

/* ---- write batches ---- */

leveldb_writebatch_t *leveldb_writebatch_create(void) {
    leveldb_writebatch_t *b = calloc(1, sizeof *b);
    if (b && !(b->batch = bkv_batch_create())) {
        free(b);
        return NULL;
    }
    return b;
}

void leveldb_writebatch_destroy(leveldb_writebatch_t *b) {
    if (!b) return;
    bkv_batch_destroy(b->batch);
    free(b->log);
    free(b);
}

void leveldb_writebatch_clear(leveldb_writebatch_t *b) {
    bkv_batch_clear(b->batch);
    b->len = 0;
}

/* The log's records: a type byte ('P' or 'D'), the key's and the value's
 * lengths, then their bytes. 0 when memory ran out (the operation is then
 * dropped: LevelDB's batch calls have no way to report it either). */
/* Room for need more bytes of log; 0 when memory ran out. */
static int reserve_log(leveldb_writebatch_t *b, size_t need) {
    if (b->cap - b->len >= need) return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < need) cap *= 2;
    char *grown = realloc(b->log, cap);
    if (!grown) return 0;
    b->log = grown, b->cap = cap;
    return 1;
}

static int log_op(leveldb_writebatch_t *b, char type, const char *k, size_t klen, const char *v, size_t vlen) {
    size_t need = 1 + 2 * sizeof(size_t) + klen + vlen;
    if (!reserve_log(b, need)) return 0;
    char *p = b->log + b->len;
    *p++ = type;
    memcpy(p, &klen, sizeof klen), p += sizeof klen;
    memcpy(p, &vlen, sizeof vlen), p += sizeof vlen;
    if (klen) memcpy(p, k, klen), p += klen;
    if (vlen) memcpy(p, v, vlen);
    b->len += need;
    return 1;
}

/* The log first, then the batch: an operation the batch refuses is taken
 * back out of the log, so the two always hold the same operations. */
void leveldb_writebatch_put(leveldb_writebatch_t *b, const char *key, size_t klen, const char *val, size_t vlen) {
    size_t before = b->len;
    if (log_op(b, 'P', key, klen, val, vlen) && bkv_batch_put(b->batch, key, klen, val, vlen) != BKV_OK)
        b->len = before;
}

void leveldb_writebatch_delete(leveldb_writebatch_t *b, const char *key, size_t klen) {
    size_t before = b->len;
    if (log_op(b, 'D', key, klen, NULL, 0) && bkv_batch_delete(b->batch, key, klen) != BKV_OK) b->len = before;
}

void leveldb_writebatch_iterate(const leveldb_writebatch_t *b, void *state,
                                void (*put)(void *, const char *, size_t, const char *, size_t),
                                void (*deleted)(void *, const char *, size_t)) {
    for (size_t off = 0; off < b->len;) {
        const char *p = b->log + off;
        size_t klen, vlen;
        memcpy(&klen, p + 1, sizeof klen);
        memcpy(&vlen, p + 1 + sizeof klen, sizeof vlen);
        const char *k = p + 1 + 2 * sizeof(size_t), *v = k + klen;
        if (p[0] == 'P') put(state, k, klen, v, vlen);
        else deleted(state, k, klen);
        off += 1 + 2 * sizeof(size_t) + klen + vlen;
    }
}

void leveldb_writebatch_append(leveldb_writebatch_t *dst, const leveldb_writebatch_t *src) {
    if (!reserve_log(dst, src->len) || bkv_batch_append_batch(dst->batch, src->batch) != BKV_OK) return;
    if (src->len) memcpy(dst->log + dst->len, src->log, src->len);
    dst->len += src->len;
}
