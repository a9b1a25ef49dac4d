/*
 * bloomkv_redis.so: bloomkv inside Redis (and Redis Cluster), and the
 * filter family as Redis data types (docs/redis.md).
 *
 *   redis-server --loadmodule bloomkv_redis.so [dir PATH] [sync yes|no]
 *                [value_index none|flat|hierarchy|bitsliced|paged]
 *                [write_buffer_size BYTES] [cache_size BYTES]
 *
 * Rows are routed by the user's key like any Redis key (commands declare
 * it, so cluster clients send each to its slot's master); slots.c keeps
 * them movable by Redis's own machinery.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define BKV_REDIS_OWNS_API
#include "redis_int.h"

bkv_redis *bkv_redis_state;

/* A user key: the engine's longest key less the slot prefix of its row.
 * Values are the engine's to refuse (BKV_MAX_VALUE_SIZE). */
#define MAX_KEY_BYTES (BKV_MAX_KEY_SIZE - BKV_SLOT_PREFIX)
_Static_assert(MAX_KEY_BYTES == 1048574, "the key limit in the reply below");

/* ---- helpers ---- */

static int reply_bkv_error(RedisModuleCtx *ctx, int rc) {
    char msg[600];
    const char *detail = bkv_errmsg(NULL); /* this thread's last error: the call that returned rc */
    snprintf(msg, sizeof msg, "ERR bloomkv: %s%s%s", bkv_strerror(rc), *detail ? ": " : "", detail);
    return RedisModule_ReplyWithError(ctx, msg);
}

/* The row key of argv's user key, in buf when it fits (else malloc'd). */
typedef struct row_key {
    char buf[256];
    char *p;
    size_t len;
    unsigned slot;
} row_key;

/* Rows, and the slot keys that move them, belong to database 0 (the only
 * one Redis Cluster has): a command from another SELECTed database is
 * refused rather than mixing keyspaces. */
static int refuse_other_db(RedisModuleCtx *ctx) {
    if (RedisModule_GetSelectedDb(ctx) == 0) return 0;
    RedisModule_ReplyWithError(ctx, "ERR bloomkv rows live in database 0 (SELECT 0)");
    return -1;
}

static int make_row_key(RedisModuleCtx *ctx, RedisModuleString *arg, row_key *rk) {
    if (refuse_other_db(ctx)) return -1;
    size_t len;
    const char *k = RedisModule_StringPtrLen(arg, &len);
    if (len > MAX_KEY_BYTES) return RedisModule_ReplyWithError(ctx, "ERR key too large (at most 1048574 bytes)"), -1;
    rk->slot = bkv_redis_key_slot(k, len);
    rk->p = len + BKV_SLOT_PREFIX <= sizeof rk->buf ? rk->buf : RedisModule_Alloc(len + BKV_SLOT_PREFIX);
    rk->len = bkv_redis_row_key(rk->slot, k, len, rk->p);
    return 0;
}

static void free_row_key(row_key *rk) {
    if (rk->p != rk->buf) RedisModule_Free(rk->p);
}

/* The row key of argv's user key, its slot ready for the command (create:
 * a write); -1 after replying when either is refused (nothing to free). */
static int open_row(RedisModuleCtx *ctx, RedisModuleString *arg, int create, row_key *rk) {
    if (make_row_key(ctx, arg, rk)) return -1;
    if (!bkv_redis_slot_ready(ctx, rk->slot, create)) return 0;
    free_row_key(rk);
    return -1;
}

static bkv_write_options write_options(void) {
    bkv_write_options wo;
    bkv_write_options_init(&wo);
    wo.sync = bkv_redis_state->sync;
    return wo;
}

/* ---- pending writes ---- */

#define PENDING_LIMIT (512u << 10) /* bytes of keys and values held before a commit mid-iteration */

/* Releases the strings of the runs from `from` on. */
static void free_runs_from(size_t from) {
    bkv_redis *g = bkv_redis_state;
    size_t first = from < g->nruns ? g->runs[from].first : g->nrepl_args;
    for (size_t i = first; i < g->nrepl_args; i++) RedisModule_FreeString(NULL, g->repl_args[i]);
    g->nrepl_args = first;
    g->nruns = from;
}

/* Hands the committed writes to replication and the AOF, in the order
 * they ran. Only a ctx can: a commit without one (before a fork) leaves
 * them for the next commit that has one. One RedisModule_Replicate per run
 * of sets, not per set: it looks the command up and copies its arguments
 * each time, which cost a pipeline of BKV.SETs a tenth of its speed. */
static void replicate_committed(RedisModuleCtx *ctx) {
    bkv_redis *g = bkv_redis_state;
    if (!ctx || !g->ncommitted) return;
    for (size_t i = 0; i < g->ncommitted; i++) {
        RedisModuleString **a = g->repl_args + g->runs[i].first;
        size_t n = g->runs[i].count;
        if (g->runs[i].sets) RedisModule_Replicate(ctx, "BKV.MSET", "v", a, n);
        else RedisModule_Replicate(ctx, RedisModule_StringPtrLen(a[0], NULL), "v", a + 1, n - 1);
    }
    size_t done = g->ncommitted < g->nruns ? g->runs[g->ncommitted].first : g->nrepl_args;
    for (size_t i = 0; i < done; i++) RedisModule_FreeString(NULL, g->repl_args[i]);
    memmove(g->repl_args, g->repl_args + done, (g->nrepl_args - done) * sizeof *g->repl_args);
    g->nrepl_args -= done;
    memmove(g->runs, g->runs + g->ncommitted, (g->nruns - g->ncommitted) * sizeof *g->runs);
    g->nruns -= g->ncommitted;
    for (size_t i = 0; i < g->nruns; i++) g->runs[i].first -= done;
    g->ncommitted = 0;
}

void bkv_redis_commit(RedisModuleCtx *ctx) {
    bkv_redis *g = bkv_redis_state;
    if (!g->pending || bkv_batch_count(g->pending) == 0) {
        replicate_committed(ctx);
        return;
    }
    bkv_write_options wo = write_options();
    int rc = bkv_write(g->db, &wo, g->pending);
    if (rc && ctx) {
        /* Their replies say OK but are not sent yet: the clients lose the
         * connection instead, so no failed write is ever acknowledged. */
        RedisModule_Log(ctx, "warning", "bloomkv: a write failed (%s); disconnecting %zu clients unanswered",
                        bkv_errmsg(g->db), g->npending_clients);
        for (size_t i = 0; i < g->npending_clients; i++) {
            char id[32];
            snprintf(id, sizeof id, "%llu", g->pending_clients[i]);
            RedisModuleCallReply *r = RedisModule_Call(ctx, "CLIENT", "ccc", "KILL", "ID", id);
            if (r) RedisModule_FreeCallReply(r);
        }
    }
    /* A write reaches replicas and the AOF only once it is committed: a
     * replica never holds a row its master refused. */
    if (rc) free_runs_from(g->ncommitted);
    else g->ncommitted = g->nruns;
    replicate_committed(ctx);
    bkv_batch_clear(g->pending);
    g->pending_bytes = 0;
    g->npending_clients = 0;
}

/* Keeps a write command to replicate once its batch commits (not for an
 * AOF being replayed: what it replays is already in the AOF). sets: the
 * command is BKV.SET or BKV.MSET, whose pairs join the run of sets before
 * it when that run is not committed yet. */
static void pending_replicate(RedisModuleString **argv, int argc, int sets) {
    bkv_redis *g = bkv_redis_state;
    if (g->loading) return;
    size_t skip = sets ? 1 : 0, n = (size_t)argc - skip;
    if (g->nrepl_args + n > g->cap_repl_args) {
        g->cap_repl_args = g->cap_repl_args ? 2 * g->cap_repl_args : 256;
        if (g->cap_repl_args < g->nrepl_args + n) g->cap_repl_args = g->nrepl_args + n;
        g->repl_args = RedisModule_Realloc(g->repl_args, g->cap_repl_args * sizeof *g->repl_args);
    }
    bkv_repl_run *last = g->nruns > g->ncommitted ? &g->runs[g->nruns - 1] : NULL;
    if (sets && last && last->sets) {
        last->count += n;
    } else {
        if (g->nruns == g->cap_runs) {
            g->cap_runs = g->cap_runs ? 2 * g->cap_runs : 64;
            g->runs = RedisModule_Realloc(g->runs, g->cap_runs * sizeof *g->runs);
        }
        g->runs[g->nruns++] = (bkv_repl_run){.sets = sets, .first = g->nrepl_args, .count = n};
    }
    /* Retained, not copied: the client's own strings outlive the command. */
    for (size_t i = 0; i < n; i++) RedisModule_RetainString(NULL, g->repl_args[g->nrepl_args++] = argv[skip + i]);
}

static int pending_add(const char *key, size_t klen, const char *val, size_t vlen, int del) {
    bkv_redis *g = bkv_redis_state;
    if (!g->pending && !(g->pending = bkv_batch_create())) return BKV_NOMEM;
    int rc = del ? bkv_batch_delete(g->pending, key, klen) : bkv_batch_put(g->pending, key, klen, val, vlen);
    if (!rc) g->pending_bytes += klen + vlen;
    return rc;
}

/* Drops the writes not committed yet (one MSET's, refused part-way). */
static void pending_discard(void) {
    bkv_batch_clear(bkv_redis_state->pending);
    bkv_redis_state->pending_bytes = 0;
}

/* Remembers the client whose reply now depends on the pending writes, and
 * commits early once they grow large. */
static void pending_done(RedisModuleCtx *ctx) {
    bkv_redis *g = bkv_redis_state;
    unsigned long long id = RedisModule_GetClientId(ctx);
    if (id && (!g->npending_clients || g->pending_clients[g->npending_clients - 1] != id)) {
        if (g->npending_clients == g->cap_pending_clients) {
            g->cap_pending_clients = g->cap_pending_clients ? 2 * g->cap_pending_clients : 64;
            g->pending_clients =
                RedisModule_Realloc(g->pending_clients, g->cap_pending_clients * sizeof *g->pending_clients);
        }
        g->pending_clients[g->npending_clients++] = id;
    }
    if (g->pending_bytes > PENDING_LIMIT) bkv_redis_commit(ctx);
}

/* A write replayed from an AOF being loaded: 1 when the local rows
 * already hold it (the contract kept them: the write is skipped, so an
 * older replayed write never undoes a newer local one), 0 to apply it, -1
 * after replying with an error. */
static int replayed_write_skipped(RedisModuleCtx *ctx) {
    if (!bkv_redis_state->loading) return 0;
    int take = bkv_redis_loading_rows(ctx);
    if (take < 0) return reply_bkv_error(ctx, BKV_IOERROR), -1;
    if (take) return 0;
    RedisModule_ReplyWithSimpleString(ctx, "OK");
    return 1;
}

/* ---- BKV.* ---- */

static int cmd_set(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    if (replayed_write_skipped(ctx)) return REDISMODULE_OK;
    row_key rk;
    if (open_row(ctx, argv[1], 1, &rk)) return REDISMODULE_OK;
    size_t vl;
    const char *v = RedisModule_StringPtrLen(argv[2], &vl);
    int rc = pending_add(rk.p, rk.len, v, vl, 0);
    free_row_key(&rk);
    if (rc) return reply_bkv_error(ctx, rc);
    pending_replicate(argv, argc, 1);
    pending_done(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int cmd_get(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    bkv_redis_commit(ctx); /* what this reads includes the writes before it */
    if (argc != 2) return RedisModule_WrongArity(ctx);
    row_key rk;
    if (open_row(ctx, argv[1], 0, &rk)) return REDISMODULE_OK;
    void *v;
    size_t vl;
    int rc = bkv_get(bkv_redis_state->db, NULL, rk.p, rk.len, &v, &vl);
    free_row_key(&rk);
    if (rc == BKV_NOTFOUND) return RedisModule_ReplyWithNull(ctx);
    if (rc) return reply_bkv_error(ctx, rc);
    RedisModule_ReplyWithStringBuffer(ctx, v, vl);
    bkv_free(v);
    return REDISMODULE_OK;
}

/* 1 if the row exists, 0 if not, or a negative bloomkv status. */
static int row_exists(const row_key *rk) {
    void *v;
    size_t vl;
    int rc = bkv_get(bkv_redis_state->db, NULL, rk->p, rk->len, &v, &vl);
    if (rc == BKV_OK) bkv_free(v);
    return rc == BKV_OK ? 1 : rc == BKV_NOTFOUND ? 0 : rc;
}

static int cmd_exists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    bkv_redis_commit(ctx); /* what this reads includes the writes before it */
    if (argc != 2) return RedisModule_WrongArity(ctx);
    row_key rk;
    if (open_row(ctx, argv[1], 0, &rk)) return REDISMODULE_OK;
    int r = row_exists(&rk);
    free_row_key(&rk);
    return r < 0 ? reply_bkv_error(ctx, r) : RedisModule_ReplyWithLongLong(ctx, r);
}

static int cmd_del(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    bkv_redis_commit(ctx); /* what this reads includes the writes before it */
    if (argc != 2) return RedisModule_WrongArity(ctx);
    if (replayed_write_skipped(ctx)) return REDISMODULE_OK;
    row_key rk;
    if (open_row(ctx, argv[1], 0, &rk)) return REDISMODULE_OK;
    int r = row_exists(&rk);
    if (r == 1) {
        int rc = pending_add(rk.p, rk.len, NULL, 0, 1);
        if (rc) r = rc;
    }
    free_row_key(&rk);
    if (r < 0) return reply_bkv_error(ctx, r);
    if (r) {
        pending_replicate(argv, argc, 0);
        pending_done(ctx);
    }
    return RedisModule_ReplyWithLongLong(ctx, r);
}

/* Keys of one command in one slot: Redis Cluster already refuses others
 * (CROSSSLOT); a single server checks nothing. */
static int cmd_mset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3 || argc % 2 == 0) return RedisModule_WrongArity(ctx);
    if (replayed_write_skipped(ctx)) return REDISMODULE_OK;
    /* All or nothing: after the commit the pending writes are this
     * command's alone, dropped whole if a key is refused. */
    bkv_redis_commit(ctx);
    for (int i = 1; i < argc; i += 2) {
        row_key rk;
        if (open_row(ctx, argv[i], 1, &rk)) return pending_discard(), REDISMODULE_OK;
        size_t vl;
        const char *v = RedisModule_StringPtrLen(argv[i + 1], &vl);
        int rc = pending_add(rk.p, rk.len, v, vl, 0);
        free_row_key(&rk);
        if (rc) return pending_discard(), reply_bkv_error(ctx, rc);
    }
    pending_replicate(argv, argc, 1);
    pending_done(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int cmd_mget(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    bkv_redis_commit(ctx); /* what this reads includes the writes before it */
    if (argc < 2) return RedisModule_WrongArity(ctx);
    size_t n = (size_t)argc - 1;
    row_key *rks = RedisModule_Calloc(n, sizeof *rks);
    const void **keys = RedisModule_Calloc(n, sizeof *keys);
    size_t *klens = RedisModule_Calloc(n, sizeof *klens), *vlens = RedisModule_Calloc(n, sizeof *vlens);
    void **vals = RedisModule_Calloc(n, sizeof *vals);
    int *st = RedisModule_Calloc(n, sizeof *st);
    size_t made = 0;
    int stop = 0;
    for (; made < n; made++) {
        if ((stop = open_row(ctx, argv[made + 1], 0, &rks[made]))) break;
        keys[made] = rks[made].p;
        klens[made] = rks[made].len;
    }
    if (!stop) {
        int rc = bkv_multi_get(bkv_redis_state->db, NULL, n, keys, klens, vals, vlens, st);
        if (rc && rc != BKV_NOTFOUND) {
            reply_bkv_error(ctx, rc);
        } else {
            RedisModule_ReplyWithArray(ctx, (long)n);
            for (size_t i = 0; i < n; i++) {
                if (st[i] == BKV_OK) RedisModule_ReplyWithStringBuffer(ctx, vals[i], vlens[i]);
                else RedisModule_ReplyWithNull(ctx);
                bkv_free(vals[i]);
            }
        }
    }
    for (size_t i = 0; i < made; i++) free_row_key(&rks[i]);
    RedisModule_Free(rks), RedisModule_Free(keys), RedisModule_Free(klens), RedisModule_Free(vlens);
    RedisModule_Free(vals), RedisModule_Free(st);
    return REDISMODULE_OK;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* BKV.SCAN cursor [MATCH prefix] [COUNT n]: the cursor is the next row
 * key in hex ("0": the start, and the end). COUNT is the work of one call,
 * as for Redis's SCAN: the rows examined, matching MATCH or not, at most
 * SCAN_MAX_WORK whatever the client asks, so no call walks the node on
 * the event loop. */
#define SCAN_MAX_WORK 100000
static int cmd_scan(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    bkv_redis_commit(ctx); /* what this reads includes the writes before it */
    if (argc < 2 || argc % 2) return RedisModule_WrongArity(ctx);
    if (refuse_other_db(ctx)) return REDISMODULE_OK;
    size_t cl, pl = 0;
    const char *cur = RedisModule_StringPtrLen(argv[1], &cl), *prefix = NULL;
    long long count = 10;
    for (int i = 2; i < argc; i += 2) {
        const char *opt = RedisModule_StringPtrLen(argv[i], NULL);
        if (!strcasecmp(opt, "MATCH")) prefix = RedisModule_StringPtrLen(argv[i + 1], &pl);
        else if (!strcasecmp(opt, "COUNT")) {
            if (RedisModule_StringToLongLong(argv[i + 1], &count) != REDISMODULE_OK || count < 1)
                return RedisModule_ReplyWithError(ctx, "ERR value is not an integer or out of range");
        } else return RedisModule_ReplyWithError(ctx, "ERR syntax error");
    }
    char *start = NULL;
    size_t sl = 0;
    if (!(cl == 1 && cur[0] == '0')) {
        if (cl % 2 || cl == 0) return RedisModule_ReplyWithError(ctx, "ERR invalid cursor");
        start = RedisModule_Alloc(cl / 2);
        for (size_t i = 0; i < cl / 2; i++) {
            int hi = hex_digit(cur[2 * i]), lo = hex_digit(cur[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                RedisModule_Free(start);
                return RedisModule_ReplyWithError(ctx, "ERR invalid cursor");
            }
            start[i] = (char)(hi << 4 | lo);
        }
        sl = cl / 2;
    }
    if (count > SCAN_MAX_WORK) count = SCAN_MAX_WORK;
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.fill_cache = 0;
    static const char rows_end[BKV_SLOT_PREFIX] = {(char)(BKV_REDIS_SLOTS >> 8), 0}; /* past the last slot */
    ro.upper_bound = rows_end;
    ro.upper_bound_len = sizeof rows_end;
    bkv_iter *it;
    int rc = bkv_iter_create(bkv_redis_state->db, &ro, &it);
    if (rc) {
        RedisModule_Free(start);
        return reply_bkv_error(ctx, rc);
    }
    if (start) bkv_iter_seek(it, start, sl);
    else bkv_iter_seek_to_first(it);
    RedisModule_Free(start);
    RedisModule_ReplyWithArray(ctx, 2);
    /* The keys come first in the reply but the cursor is known last. */
    RedisModuleString **keys = RedisModule_Alloc((size_t)count * sizeof *keys);
    long long n = 0;
    for (long long examined = 0; bkv_iter_valid(it) && examined < count; bkv_iter_next(it), examined++) {
        size_t kl;
        const char *k = bkv_iter_key(it, &kl);
        if (kl < BKV_SLOT_PREFIX) continue;
        if (prefix && (kl - BKV_SLOT_PREFIX < pl || memcmp(k + BKV_SLOT_PREFIX, prefix, pl) != 0)) continue;
        keys[n++] = RedisModule_CreateString(ctx, k + BKV_SLOT_PREFIX, kl - BKV_SLOT_PREFIX);
    }
    char *next = NULL;
    if (bkv_iter_valid(it)) {
        size_t kl;
        const unsigned char *k = bkv_iter_key(it, &kl);
        next = RedisModule_Alloc(2 * kl + 1);
        for (size_t i = 0; i < kl; i++) snprintf(next + 2 * i, 3, "%02x", k[i]);
    }
    rc = bkv_iter_status(it);
    bkv_iter_destroy(it);
    if (next) RedisModule_ReplyWithCString(ctx, next);
    else RedisModule_ReplyWithCString(ctx, "0");
    RedisModule_Free(next);
    RedisModule_ReplyWithArray(ctx, n);
    for (long long i = 0; i < n; i++) {
        RedisModule_ReplyWithString(ctx, keys[i]);
        RedisModule_FreeString(ctx, keys[i]);
    }
    RedisModule_Free(keys);
    if (rc) RedisModule_Log(ctx, "warning", "bloomkv: BKV.SCAN stopped early: %s", bkv_errmsg(bkv_redis_state->db));
    return REDISMODULE_OK;
}

/* The results of a search, gathered before any is sent: a search that
 * fails midway then replies with its error, never with a partial array
 * that reads as complete. Each result: u64 klen, key, u64 vlen, value. */
typedef struct found_rows {
    long long limit, n;
    char *buf;
    size_t len, cap;
    int oom;
} found_rows;

static int append_found(found_rows *f, const void *p, size_t n) {
    if (f->len + n > f->cap) {
        size_t cap = f->cap ? f->cap : 4096;
        while (cap < f->len + n) cap *= 2;
        char *g = RedisModule_Realloc(f->buf, cap);
        if (!g) return -1;
        f->buf = g;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, p, n);
    f->len += n;
    return 0;
}

static int gather_found(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    found_rows *f = arg;
    /* Rows only: a key past the last slot is the module's own. */
    if (klen < BKV_SLOT_PREFIX || (unsigned char)*(const char *)key >= (BKV_REDIS_SLOTS >> 8)) return 0;
    uint64_t kl = klen - BKV_SLOT_PREFIX, vl = vlen;
    if (append_found(f, &kl, sizeof kl) || append_found(f, (const char *)key + BKV_SLOT_PREFIX, kl) ||
        append_found(f, &vl, sizeof vl) || append_found(f, val, vl)) {
        f->oom = 1;
        return 1;
    }
    return ++f->n >= f->limit;
}

/* ---- work off the event loop ----
 *
 * A search over the node and a compaction run on a thread of their own,
 * the client blocked meanwhile (RedisModule_BlockClient) and every other
 * client served. Where a client cannot block (MULTI, a script) the work
 * runs inline. A FLUSHALL meanwhile is a range deletion the job's reads,
 * begun before it, do not see. */
enum { JOB_COMPACT, JOB_FINDVALUE };

typedef struct job {
    RedisModuleBlockedClient *bc;
    bkv_db *db;
    int kind, rc;
    char msg[BKV_ERRMSG_COPY];
    found_rows found;
    char *value;
    size_t vlen;
    char *after; /* FINDVALUE ... AFTER key: the row key results come after (NULL: from the first) */
    size_t after_len;
    int replied; /* the worker built the reply already (job_thread) */
} job;

/* The search, in row-key order from after, up to the limit. */
static int find_rows(job *j) {
    if (!j->found.limit) return BKV_OK;
    bkv_find_options fo;
    bkv_find_options_init(&fo);
    fo.after = j->after;
    fo.after_len = j->after_len;
    bkv_find_iter *it;
    const void *term = j->value;
    int rc = bkv_find_iter_create(j->db, NULL, &term, &j->vlen, 1, &fo, &it);
    while (!rc && (rc = bkv_find_iter_next(it)) == BKV_OK) {
        size_t kl, vl;
        const void *k = bkv_find_iter_key(it, &kl), *v = bkv_find_iter_value(it, &vl);
        if (gather_found(&j->found, k, kl, v, vl)) break;
    }
    bkv_find_iter_destroy(it);
    return rc;
}

static void run_job(job *j) {
    j->rc = j->kind == JOB_COMPACT ? bkv_compact(j->db) : find_rows(j);
    if (j->rc == BKV_NOTFOUND) j->rc = BKV_OK;
    if (!j->rc && j->found.oom) j->rc = BKV_NOMEM;
    /* The message is this thread's: copied for the reply on the main one. */
    if (j->rc) snprintf(j->msg, sizeof j->msg, "%s", bkv_errmsg(NULL));
}

static int reply_job(RedisModuleCtx *ctx, job *j) {
    if (j->rc) {
        char msg[BKV_ERRMSG_COPY + 64];
        snprintf(msg, sizeof msg, "ERR bloomkv: %s%s%s", bkv_strerror(j->rc), *j->msg ? ": " : "", j->msg);
        return RedisModule_ReplyWithError(ctx, msg);
    }
    if (j->kind == JOB_COMPACT) return RedisModule_ReplyWithSimpleString(ctx, "OK");
    RedisModule_ReplyWithArray(ctx, 2 * j->found.n);
    for (size_t at = 0; at < j->found.len;) {
        uint64_t n;
        memcpy(&n, j->found.buf + at, sizeof n);
        RedisModule_ReplyWithStringBuffer(ctx, j->found.buf + at + sizeof n, (size_t)n);
        at += sizeof n + (size_t)n;
    }
    return REDISMODULE_OK;
}

static void job_free(RedisModuleCtx *ctx, void *p) {
    (void)ctx;
    job *j = p;
    RedisModule_Free(j->found.buf);
    RedisModule_Free(j->value);
    RedisModule_Free(j->after);
    RedisModule_Free(j);
}

static int job_unblocked(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv, (void)argc;
    job *j = RedisModule_GetBlockedClientPrivateData(ctx);
    return j->replied ? REDISMODULE_OK : reply_job(ctx, j);
}

/* How far a job's thread, and the engine's compactions, stand back from
 * the event loop: where they share a core with it, the scheduler then
 * gives the loop the core whenever it has clients to answer, instead of
 * time slices in turn. */
#define WORKER_NICE 10

static void *job_thread(void *arg) {
    job *j = arg;
#ifdef __linux__
    errno = 0;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    int nice = getpriority(PRIO_PROCESS, (id_t)tid);
    if (nice != -1 || !errno)
        (void)setpriority(PRIO_PROCESS, (id_t)tid, nice + WORKER_NICE > 19 ? 19 : nice + WORKER_NICE);
#endif
    run_job(j);
    /* The reply is built here, into a context bound to the blocked client:
     * a search's millions of rows are copied into reply buffers on this
     * thread, and the event loop only hands the finished buffers to the
     * client when it unblocks it (a list join, not a copy), so other
     * clients do not wait for them. */
    RedisModuleCtx *reply = RedisModule_GetThreadSafeContext(j->bc);
    if (reply) {
        reply_job(reply, j);
        RedisModule_FreeThreadSafeContext(reply);
        j->replied = 1;
    }
    RedisModule_UnblockClient(j->bc, j);
    return NULL;
}

static int start_job(RedisModuleCtx *ctx, job *j) {
    j->db = bkv_redis_state->db;
    int flags = RedisModule_GetContextFlags(ctx);
    if (!(flags & (REDISMODULE_CTX_FLAGS_MULTI | REDISMODULE_CTX_FLAGS_LUA | REDISMODULE_CTX_FLAGS_DENY_BLOCKING))) {
        j->bc = RedisModule_BlockClient(ctx, job_unblocked, NULL, job_free, 0);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        int started = pthread_create(&t, &attr, job_thread, j) == 0;
        pthread_attr_destroy(&attr);
        if (started) return REDISMODULE_OK;
        RedisModule_AbortBlock(j->bc);
    }
    run_job(j);
    int r = reply_job(ctx, j);
    job_free(ctx, j);
    return r;
}

/* BKV.FINDVALUE value [LIMIT n] [AFTER key]: results in row order (by
 * slot, then key); AFTER the last key of a page gives the next page. */
static int cmd_findvalue(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    bkv_redis_commit(ctx); /* what this reads includes the writes before it */
    if (argc < 2 || argc % 2) return RedisModule_WrongArity(ctx);
    if (refuse_other_db(ctx)) return REDISMODULE_OK;
    long long limit = (long long)1 << 62;
    RedisModuleString *after = NULL;
    for (int i = 2; i < argc; i += 2) {
        const char *opt = RedisModule_StringPtrLen(argv[i], NULL);
        if (!strcasecmp(opt, "LIMIT")) {
            if (RedisModule_StringToLongLong(argv[i + 1], &limit) != REDISMODULE_OK || limit < 0)
                return RedisModule_ReplyWithError(ctx, "ERR value is not an integer or out of range");
        } else if (!strcasecmp(opt, "AFTER")) {
            after = argv[i + 1];
        } else {
            return RedisModule_ReplyWithError(ctx, "ERR syntax error");
        }
    }
    row_key rk = {0};
    if (after && make_row_key(ctx, after, &rk)) return REDISMODULE_OK;
    size_t vl;
    const char *v = RedisModule_StringPtrLen(argv[1], &vl);
    job *j = RedisModule_Calloc(1, sizeof *j);
    if (after) {
        j->after = RedisModule_Alloc(rk.len);
        memcpy(j->after, rk.p, rk.len);
        j->after_len = rk.len;
        free_row_key(&rk);
    }
    j->kind = JOB_FINDVALUE;
    j->found.limit = limit;
    j->value = RedisModule_Alloc(vl ? vl : 1);
    memcpy(j->value, v, vl);
    j->vlen = vl;
    return start_job(ctx, j);
}

static int cmd_info(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    bkv_redis_commit(ctx); /* what this reads includes the writes before it */
    (void)argv;
    if (argc != 1) return RedisModule_WrongArity(ctx);
    char *s = bkv_property(bkv_redis_state->db, "bloomkv.stats");
    if (!s) return RedisModule_ReplyWithError(ctx, "ERR out of memory");
    RedisModule_ReplyWithVerbatimString(ctx, s, strlen(s));
    bkv_free(s);
    return REDISMODULE_OK;
}

static int cmd_compact(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    bkv_redis_commit(ctx); /* what this reads includes the writes before it */
    (void)argv;
    if (argc != 1) return RedisModule_WrongArity(ctx);
    job *j = RedisModule_Calloc(1, sizeof *j);
    j->kind = JOB_COMPACT;
    return start_job(ctx, j);
}

/* ---- server events ---- */

static void on_flush(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e;
    const RedisModuleFlushInfo *fi = data;
    if (fi && fi->dbnum != -1 && fi->dbnum != 0) return; /* another database: not ours */
    if (sub == REDISMODULE_SUBEVENT_FLUSHDB_START) bkv_redis_commit(ctx);
    if (sub == REDISMODULE_SUBEVENT_FLUSHDB_END) bkv_redis_drop_all(ctx);
}

/* Before Redis sends the replies of this iteration: the writes they
 * acknowledge reach bloomkv's WAL first. */
static void on_event_loop(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e, (void)data;
    if (sub != REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP) return;
    bkv_redis_commit(ctx);
    /* A start with no RDB or AOF to load: the local rows still need their
     * slot keys (a load makes them when it ends). */
    if (!bkv_redis_state->keys_restored && !(RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_LOADING)) {
        bkv_redis_state->keys_restored = 1;
        bkv_redis_slots_restore_keys(ctx);
    }
}

/* Which rows a load keeps is the contract's to decide (persist.c) from
 * the file's identity; the event only says a load begins, ends, and
 * whether it is a full sync from a master (whose rows are always taken). */
static void on_loading(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e, (void)data;
    bkv_redis *g = bkv_redis_state;
    if (sub == REDISMODULE_SUBEVENT_LOADING_RDB_START || sub == REDISMODULE_SUBEVENT_LOADING_AOF_START ||
        sub == REDISMODULE_SUBEVENT_LOADING_REPL_START) {
        g->load_state = BKV_LOAD_PENDING;
        g->load_from_master = sub == REDISMODULE_SUBEVENT_LOADING_REPL_START;
        g->loading = 1;
    } else if (sub == REDISMODULE_SUBEVENT_LOADING_ENDED || sub == REDISMODULE_SUBEVENT_LOADING_FAILED) {
        g->loading = 0;
        bkv_redis_commit(ctx); /* an AOF's writes: no event loop ran while it loaded */
        if (bkv_redis_load_ended())
            RedisModule_Log(ctx, "warning", "bloomkv: cannot record the file the rows came from: %s", bkv_errmsg(NULL));
        g->keys_restored = 1;
        bkv_redis_slots_restore_keys(ctx);
    }
}

/* A child sees bloomkv as of the fork: pending writes go in first (no
 * client to tell about a failure here; the engine's error state stays). */
static void on_fork_prepare(void) {
    if (!bkv_redis_state) return;
    bkv_redis_commit(NULL);
    bkv_fork_prepare(bkv_redis_state->db);
}
static void on_fork_parent(void) { bkv_fork_parent(bkv_redis_state ? bkv_redis_state->db : NULL); }
static void on_fork_child(void) {
    bkv_fork_child(bkv_redis_state ? bkv_redis_state->db : NULL);
    if (bkv_redis_state) bkv_redis_state->in_fork_child = 1;
}

/* INFO bloomkv: what Redis's own sections cannot show. */
static void info_func(RedisModuleInfoCtx *ctx, int for_crash_report) {
    (void)for_crash_report;
    bkv_redis *g = bkv_redis_state;
    if (!g) return;
    RedisModule_InfoAddSection(ctx, "");
    RedisModule_InfoAddFieldULongLong(ctx, "filter_bytes", bkv_redis_filter_bytes());
    RedisModule_InfoAddFieldCString(ctx, "branch", g->branch);
    char *seq = bkv_property(g->db, "bloomkv.last-sequence");
    RedisModule_InfoAddFieldCString(ctx, "last_sequence", seq ? seq : "");
    bkv_free(seq);
    RedisModule_InfoAddFieldCString(ctx, "dir", g->dir);
}

/* ---- loading ---- */

static int parse_args(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, bkv_redis *g) {
    snprintf(g->dir, sizeof g->dir, "bloomkv-data");
    bkv_options_init(&g->opts);
    g->opts.create_if_missing = 1;
    g->opts.value_index = BKV_VALUE_INDEX_BITSLICED;
    /* The module's arguments are the node's configuration: a value_index
     * shape given there is applied to an existing database on load. */
    g->opts.value_index_reshape = 1;
    /* A memtable of 4 MiB rather than the library's 64: a write's skiplist
     * search stays mostly in cache (measured: BKV.SET at 0.56x native SET
     * with 64 MiB, 0.80-0.91x with 4 MiB), and a node holds less in memory. */
    g->opts.write_buffer_size = 4u << 20;
    g->opts.compaction_nice = WORKER_NICE;
    if (argc % 2) {
        RedisModule_Log(ctx, "warning", "bloomkv: module arguments come in pairs: option value");
        return -1;
    }
    for (int i = 0; i < argc; i += 2) {
        const char *opt = RedisModule_StringPtrLen(argv[i], NULL), *val = RedisModule_StringPtrLen(argv[i + 1], NULL);
        long long n;
        int ok = 1;
        if (!strcasecmp(opt, "dir")) ok = snprintf(g->dir, sizeof g->dir, "%s", val) < (int)sizeof g->dir;
        else if (!strcasecmp(opt, "sync")) {
            ok = !strcasecmp(val, "yes") || !strcasecmp(val, "no");
            g->sync = !strcasecmp(val, "yes");
        } else if (!strcasecmp(opt, "value_index")) {
            static const char *const shapes[] = {"none", "flat", "hierarchy", "bitsliced", "paged"};
            ok = 0;
            for (int s = 0; s < 5; s++)
                if (!strcasecmp(val, shapes[s])) g->opts.value_index = s, ok = 1;
        } else if (!strcasecmp(opt, "write_buffer_size") || !strcasecmp(opt, "cache_size")) {
            ok = RedisModule_StringToLongLong(argv[i + 1], &n) == REDISMODULE_OK && n > 0;
            if (ok && !strcasecmp(opt, "cache_size")) g->opts.block_cache_size = (size_t)n;
            else if (ok) g->opts.write_buffer_size = (size_t)n;
        } else {
            char why[160];
            int rc = bkv_redis_filter_option(opt, val, why, sizeof why);
            if (rc < 0) {
                RedisModule_Log(ctx, "warning", "bloomkv: %s", why);
                return -1;
            }
            ok = rc == 0;
        }
        if (!ok) {
            RedisModule_Log(ctx, "warning", "bloomkv: bad module option %s %s", opt, val);
            return -1;
        }
    }
    return 0;
}

typedef struct command {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
    int first, last, step;
} command;

static const command commands[] = {
    {"bkv.set", cmd_set, "write deny-oom", 1, 1, 1},
    {"bkv.get", cmd_get, "readonly fast", 1, 1, 1},
    {"bkv.exists", cmd_exists, "readonly fast", 1, 1, 1},
    {"bkv.del", cmd_del, "write", 1, 1, 1},
    {"bkv.mset", cmd_mset, "write deny-oom", 1, -1, 2},
    {"bkv.mget", cmd_mget, "readonly", 1, -1, 1},
    {"bkv.scan", cmd_scan, "readonly", 0, 0, 0},
    {"bkv.findvalue", cmd_findvalue, "readonly", 0, 0, 0},
    {"bkv.info", cmd_info, "readonly", 0, 0, 0},
    {"bkv.compact", cmd_compact, "write", 0, 0, 0},
};

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, "bloomkv", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    /* A value that ends short (a forged or cut RESTORE payload, a broken
     * replication stream) makes the Load calls report an error, which every
     * loader here checks (RedisModule_IsIOError) and answers by refusing
     * the value; without the option Redis stops the server at the first
     * short read. It also lets a replica whose data set is empty load a full
     * sync straight from the socket (repl-diskless-load on-empty-db): the
     * rows are taken as from a file, and a load that fails empties the data
     * set, rows included, as Redis does for its own types. */
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
    bkv_redis *g = RedisModule_Calloc(1, sizeof *g);
    if (parse_args(ctx, argv, argc, g)) {
        RedisModule_Free(g);
        return REDISMODULE_ERR;
    }
    if (bkv_open(g->dir, &g->opts, &g->db) != BKV_OK) {
        RedisModule_Log(ctx, "warning", "bloomkv: cannot open %s: %s", g->dir, bkv_errmsg(NULL));
        RedisModule_Free(g);
        return REDISMODULE_ERR;
    }
    bkv_redis_state = g;
    int ok = bkv_redis_branch_init() == BKV_OK;
    if (!ok) RedisModule_Log(ctx, "warning", "bloomkv: cannot record the identity of %s: %s", g->dir, bkv_errmsg(NULL));
    ok = ok && bkv_redis_slots_init(ctx) == REDISMODULE_OK && bkv_redis_filters_init(ctx) == REDISMODULE_OK;
    for (size_t i = 0; ok && i < sizeof commands / sizeof commands[0]; i++)
        ok = RedisModule_CreateCommand(ctx, commands[i].name, commands[i].fn, commands[i].flags, commands[i].first,
                                       commands[i].last, commands[i].step) == REDISMODULE_OK;
    ok = ok && bkv_redis_describe_commands(ctx) == REDISMODULE_OK;
    /* The filter settings registered as configs take redis.conf's values. */
    ok = ok && (!RedisModule_LoadConfigs || RedisModule_LoadConfigs(ctx) == REDISMODULE_OK);
    if (!ok) {
        /* Nothing of a failed load stays: the database (and its lock) is
         * released, so the server can retry the load or start without it. */
        bkv_close(g->db);
        bkv_batch_destroy(g->pending);
        RedisModule_Free(g);
        bkv_redis_state = NULL;
        return REDISMODULE_ERR;
    }
    RedisModule_RegisterInfoFunc(ctx, info_func);
    RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_FlushDB, on_flush);
    RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_Loading, on_loading);
    RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_EventLoop, on_event_loop);
    /* Redis forks to save and to sync replicas, and the child reads rows. */
    pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
    RedisModule_Log(ctx, "notice", "bloomkv: serving %s", g->dir);
    return REDISMODULE_OK;
}
