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
#include "bloomkv_filter.h"
/* redismodule.h defines the API's function pointers in every file that
 * includes it; module.c owns them, the others only refer to them. */
#ifndef BKV_REDIS_OWNS_API
#define REDISMODULE_API extern
#endif
#include "redismodule.h"

#define BKV_REDIS_SLOTS 16384
#define BKV_SLOT_PREFIX 2 /* a row's bloomkv key: slot (2 bytes, big-endian), then the user key */
#define BKV_SLOT_ENCVER 1 /* of the slot type's values and of its aux field */
#define BKV_BRANCH_LEN 32 /* the local database's branch: 16 random bytes in hex (persist.c) */

/* What a load in progress does with the rows it brings (persist.c). */
enum {
    BKV_LOAD_IDLE,    /* no load: a RESTORE or MIGRATE brings a slot's rows, taken */
    BKV_LOAD_PENDING, /* loading, the file's identity not read yet */
    BKV_LOAD_TRUST,   /* the local rows are the file's state or newer: the file's rows are skipped */
    BKV_LOAD_REBUILD  /* the local rows were emptied: the file's rows are taken */
};

/* Write commands kept until their batch commits, then replicated: a run
 * of consecutive sets goes to replicas and the AOF as one BKV.MSET of
 * their pairs, any other write as itself. Its strings are repl_args[first,
 * first + count): the pairs of a run of sets, or a command's whole argv. */
typedef struct bkv_repl_run {
    int sets;
    size_t first, count;
} bkv_repl_run;

typedef struct bkv_redis {
    bkv_db *db;
    char dir[4096];
    bkv_options opts;
    int sync;                       /* module option "sync yes": writes are synced */
    char branch[BKV_BRANCH_LEN + 1]; /* the local database's identity (persist.c) */
    char base_branch[BKV_BRANCH_LEN + 1]; /* the file it was last rebuilt from ("" if none) */
    uint64_t base_sequence;
    char file_branch[BKV_BRANCH_LEN + 1]; /* the identity of the file loading now ("" if none read) */
    uint64_t file_sequence;
    int load_state;                 /* BKV_LOAD_* */
    int load_from_master;           /* the load in progress is a replica's full sync */
    int loading;                    /* between a load's start and end events: the writes are replayed
                                     * (RedisModule_GetContextFlags, which says the same, also weighs
                                     * memory on every call: too slow for every write) */
    int keys_restored;              /* slot keys made for the local rows since the module loaded */
    int in_fork_child;              /* this process is a child Redis forked (to save, to sync a replica) */
    uint64_t incarnation[BKV_REDIS_SLOTS]; /* of each slot's key now in the keyspace (0: none) */
    uint64_t next_incarnation;
    RedisModuleType *slot_type;
    /* Writes of this event-loop iteration, committed as one group before
     * Redis sends any reply (or before anything reads): one WAL write for a
     * pipeline of sets instead of one each. The clients they came from, to
     * disconnect them unanswered should the commit fail. */
    bkv_batch *pending;
    size_t pending_bytes;           /* of keys and values in pending */
    bkv_repl_run *runs;             /* the writes to replicate, in order: [0, ncommitted) committed */
    size_t nruns, ncommitted, cap_runs;
    RedisModuleString **repl_args;  /* retained strings of the runs */
    size_t nrepl_args, cap_repl_args;
    unsigned long long *pending_clients;
    size_t npending_clients, cap_pending_clients;
    char slot_tags[BKV_REDIS_SLOTS][8]; /* a hash tag per slot: "{tag}" hashes to the slot */
} bkv_redis;

extern bkv_redis *bkv_redis_state;

/* Redis calls this when it loads the module (module.c). */
__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* Commits the pending writes (module.c): before a read, a fork, or
 * Redis's replies; ctx may be NULL where no client can be told and nothing
 * replicated (the commands then wait for the next commit with a ctx). */
void bkv_redis_commit(RedisModuleCtx *ctx);

#define BKV_ERRMSG_COPY 320

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

/* ---- the persistence contract (persist.c) ---- */
/* Reads the local database's branch, making one for a new database. */
int bkv_redis_branch_init(void);
/* A new branch for the local database (it was emptied). */
int bkv_redis_new_branch(void);
/* Empties the local rows because of why (logged): the load in progress
 * takes the file's. */
int bkv_redis_rebuild(RedisModuleCtx *ctx, const char *why);
/* While loading, before rows of the file are applied: 1 to apply them, 0
 * to skip them (the local rows are kept), -1 on failure. */
int bkv_redis_loading_rows(RedisModuleCtx *ctx);
/* A load ended (or failed): back to taking the rows RESTORE brings. */
int bkv_redis_load_ended(void);
/* The aux field callbacks of the slot type. */
void bkv_redis_persist_methods(RedisModuleTypeMethods *tm);

/* Sets what COMMAND DOCS and COMMAND INFO say of every command (cmdinfo.c). */
int bkv_redis_describe_commands(RedisModuleCtx *ctx);

/* ---- filters (filters.c) ---- */
int bkv_redis_filters_init(RedisModuleCtx *ctx);
/* A module argument for the filters (RedisBloom's settings, by its names:
 * bf-error-rate or ERROR_RATE, bf-initial-size or INITIAL_SIZE, ...): 0
 * when taken, 1 when name is not one of them, -1 (why says) when its
 * value is out of range. */
int bkv_redis_filter_option(const char *name, const char *value, char *why, size_t wl);
/* The bytes every filter of the node holds (outside Redis's allocator). */
uint64_t bkv_redis_filter_bytes(void);

#endif
