/*
 * bloomkv as a Redis module (docs/redis.md): shared state and helpers of
 * its files. Redis calls a module through one process-wide context, so
 * the module's state is one struct reached from a single pointer set at
 * load time; every other piece of state hangs off it.
 */
#ifndef BKV_REDIS_INT_H
#define BKV_REDIS_INT_H

#include <stddef.h>
#include <stdint.h>

#include "bloomkv.h"
/* redismodule.h defines the API's function pointers in every file that
 * includes it; module.c owns them, the others only refer to them. */
#ifndef BKV_REDIS_OWNS_API
#define REDISMODULE_API extern
#endif
#include "redismodule.h"

#define BKV_REDIS_SLOTS 16384
#define BKV_SLOT_PREFIX 2 /* a row's bloomkv key: slot (2 bytes, big-endian), then the user key */

typedef struct bkv_redis {
    bkv_db *db;
    char dir[4096];
    bkv_options opts;
    int sync;                       /* module option "sync yes": writes are synced */
    int trust_local;                /* loading our own RDB/AOF at startup: the local rows are newer */
    uint64_t incarnation[BKV_REDIS_SLOTS]; /* of each slot's key now in the keyspace (0: none) */
    uint64_t next_incarnation;
    RedisModuleType *slot_type;
    /* Writes of this event-loop iteration, committed as one group before
     * Redis sends any reply (or before anything reads): one WAL write for a
     * pipeline of sets instead of one each. The clients they came from, to
     * disconnect them unanswered should the commit fail. */
    bkv_batch *pending;
    unsigned long long *pending_clients;
    size_t npending_clients, cap_pending_clients;
    char slot_tags[BKV_REDIS_SLOTS][8]; /* a hash tag per slot: "{tag}" hashes to the slot */
} bkv_redis;

extern bkv_redis *bkv_redis_state;

/* Redis calls this when it loads the module (module.c). */
__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* The pending writes (module.c): add one for ctx's client, or commit them
 * all (before a read, a fork, or Redis's replies; ctx may be NULL where no
 * client can be told). put returns 0 or a bloomkv status. */
int bkv_redis_pending_put(RedisModuleCtx *ctx, const char *key, size_t klen, const char *val, size_t vlen, int del);
void bkv_redis_commit(RedisModuleCtx *ctx);

/* ---- slots (slots.c) ---- */
unsigned bkv_redis_key_slot(const char *key, size_t len);
/* The row key of user key k in slot s, in buf (len + 2 bytes). */
size_t bkv_redis_row_key(unsigned slot, const char *k, size_t len, char *buf);
int bkv_redis_slots_init(RedisModuleCtx *ctx);
/* Before a command touches slot s: 0 to go on, or -1 after replying (the
 * slot is being imported and its rows have not arrived: -TRYAGAIN).
 * create: a write, which makes the slot's key exist. */
int bkv_redis_slot_ready(RedisModuleCtx *ctx, unsigned slot, int create);
/* After loading: makes a key exist for every slot holding rows. */
void bkv_redis_slots_restore_keys(RedisModuleCtx *ctx);
/* Drops every row (the keyspace was flushed). */
int bkv_redis_drop_all(RedisModuleCtx *ctx);

/* ---- filters (filters.c) ---- */
int bkv_redis_filters_init(RedisModuleCtx *ctx);

#endif
