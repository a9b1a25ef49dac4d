/*
 * The persistence contract (docs/redis.md, "Persistence"): whether the
 * rows in the node's own bloomkv directory are the state an RDB or AOF
 * being loaded describes, decided from an identity the file carries, never
 * from which loading event fired.
 *
 * The local database has a branch: a random id made when the database is
 * created or emptied (a flush, a rebuild), kept in a row of its own past
 * the last slot. Every RDB (and an AOF's RDB preamble) carries, as the
 * slot type's aux field, the branch and the last sequence its rows hold.
 * At a load the local rows are kept, and the file's rows skipped, only when
 * the branch is the file's and the local sequence is at or past the
 * file's: the same database, as new as the file or newer (its WAL holds
 * what came after the save). Anything else (a new machine's empty
 * directory, another node's, an older copy, a flush since the save, a
 * replica's full sync, a file with no identity) empties the local rows and
 * takes the file's, with one log line saying why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "redis_int.h"

#define BRANCH_KEY "\xff\xff" "bkv:branch" /* first byte past every slot's: never a row */

/* The branch row: "BRANCH BASE SEQ": this database's branch, and the
 * branch and sequence of the file it was last rebuilt from ("-" and 0 if
 * none): a node that took a master's file at a full sync, then its
 * stream, holds that file's state or newer, so that file (a replica keeps
 * it as its RDB) may keep the rows at a restart. */
static int write_branch(bkv_redis *g) {
    char row[BKV_BRANCH_LEN * 2 + 32];
    int n = snprintf(row, sizeof row, "%s %s %llu", g->branch, g->base_branch[0] ? g->base_branch : "-",
                     (unsigned long long)g->base_sequence);
    bkv_write_options wo;
    bkv_write_options_init(&wo);
    /* Synced as the node's writes are: the WAL keeps a prefix, so any row
     * written after the branch outlasting a crash keeps the branch too, and
     * a branch lost with no row after it only makes the next load take its
     * file's rows (a new branch is made at open). */
    wo.sync = g->sync;
    return bkv_put(g->db, &wo, BRANCH_KEY, sizeof BRANCH_KEY - 1, row, (size_t)n);
}

static int put_branch(bkv_redis *g) {
    unsigned char id[16];
    if (getrandom(id, sizeof id, 0) != (ssize_t)sizeof id) {
        /* No entropy source: the time and address still differ per node. */
        uint64_t t = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)g, c = (uint64_t)clock();
        memcpy(id, &t, 8);
        memcpy(id + 8, &c, 8);
    }
    for (size_t i = 0; i < sizeof id; i++) snprintf(g->branch + 2 * i, 3, "%02x", id[i]);
    g->base_branch[0] = 0;
    g->base_sequence = 0;
    return write_branch(g);
}

int bkv_redis_branch_init(void) {
    bkv_redis *g = bkv_redis_state;
    void *v;
    size_t vl;
    int rc = bkv_get(g->db, NULL, BRANCH_KEY, sizeof BRANCH_KEY - 1, &v, &vl);
    if (rc == BKV_NOTFOUND) return put_branch(g);
    if (rc) return rc;
    char row[BKV_BRANCH_LEN * 2 + 32] = "", base[BKV_BRANCH_LEN + 1];
    unsigned long long seq;
    memcpy(row, v, vl < sizeof row - 1 ? vl : sizeof row - 1);
    bkv_free(v);
    if (sscanf(row, "%32[0-9a-f] %32[-0-9a-f] %llu", g->branch, base, &seq) != 3 || strlen(g->branch) != BKV_BRANCH_LEN)
        return put_branch(g); /* unreadable: a new identity, so no file is taken for this state by mistake */
    snprintf(g->base_branch, sizeof g->base_branch, "%s", strcmp(base, "-") ? base : "");
    g->base_sequence = seq;
    return BKV_OK;
}

int bkv_redis_new_branch(void) { return put_branch(bkv_redis_state); }

static uint64_t local_sequence(void) {
    char *s = bkv_property(bkv_redis_state->db, "bloomkv.last-sequence");
    uint64_t seq = s ? strtoull(s, NULL, 10) : 0;
    bkv_free(s);
    return seq;
}

static void aux_save(RedisModuleIO *io, int when) {
    if (when != REDISMODULE_AUX_BEFORE_RDB) return;
    bkv_redis_commit(NULL); /* SAVE in the server itself: pending writes are part of the state saved */
    RedisModule_SaveStringBuffer(io, bkv_redis_state->branch, BKV_BRANCH_LEN);
    RedisModule_SaveUnsigned(io, local_sequence());
}

/* Empties the local rows for the file's: the new state is a new branch. */
int bkv_redis_rebuild(RedisModuleCtx *ctx, const char *why) {
    bkv_redis *g = bkv_redis_state;
    RedisModule_Log(ctx, "warning", "bloomkv: %s: the local rows in %s are dropped, the file's taken", why, g->dir);
    int rc = bkv_redis_drop_all(ctx);
    g->load_state = BKV_LOAD_REBUILD;
    return rc;
}

static int aux_load(RedisModuleIO *io, int encver, int when) {
    bkv_redis *g = bkv_redis_state;
    if (when != REDISMODULE_AUX_BEFORE_RDB || encver != BKV_SLOT_ENCVER) return REDISMODULE_ERR;
    size_t bl;
    char *branch = RedisModule_LoadStringBuffer(io, &bl);
    uint64_t seq = RedisModule_LoadUnsigned(io);
    if (!branch || RedisModule_IsIOError(io) || bl != BKV_BRANCH_LEN) {
        if (branch) RedisModule_Free(branch);
        return REDISMODULE_ERR;
    }
    memcpy(g->file_branch, branch, bl);
    g->file_branch[bl] = 0;
    g->file_sequence = seq;
    RedisModule_Free(branch);
    bkv_redis_commit(NULL);
    uint64_t local = local_sequence();
    int mine = strcmp(g->file_branch, g->branch) == 0 && local >= seq;
    int my_base = strcmp(g->file_branch, g->base_branch) == 0 && seq == g->base_sequence;
    char why[256];
    snprintf(why, sizeof why, "the file holds branch %s at sequence %llu, the local database branch %s at %llu",
             g->file_branch, (unsigned long long)seq, g->branch, (unsigned long long)local);
    int rc = BKV_OK;
    if (g->load_from_master) {
        rc = bkv_redis_rebuild(NULL, "a full sync from the master");
    } else if (mine || my_base) {
        g->load_state = BKV_LOAD_TRUST;
        RedisModule_Log(NULL, "notice", "bloomkv: %s%s: the local rows are this state or newer, and are kept", why,
                        mine ? "" : " (the file it was rebuilt from)");
    } else {
        rc = bkv_redis_rebuild(NULL, why);
    }
    return rc ? REDISMODULE_ERR : REDISMODULE_OK;
}

int bkv_redis_load_ended(void) {
    bkv_redis *g = bkv_redis_state;
    int rc = BKV_OK;
    /* Rebuilt from a file that named its state: that file may keep these
     * rows at a later load (see write_branch). */
    if (g->load_state == BKV_LOAD_REBUILD && g->file_branch[0]) {
        memcpy(g->base_branch, g->file_branch, sizeof g->base_branch);
        g->base_sequence = g->file_sequence;
        rc = write_branch(g);
    }
    g->file_branch[0] = 0;
    g->load_state = BKV_LOAD_IDLE;
    g->load_from_master = 0;
    return rc;
}

int bkv_redis_loading_rows(RedisModuleCtx *ctx) {
    bkv_redis *g = bkv_redis_state;
    if (g->load_state == BKV_LOAD_PENDING &&
        bkv_redis_rebuild(ctx, "the file carries no identity of the rows (no bloomkv aux field)"))
        return -1;
    return g->load_state == BKV_LOAD_TRUST ? 0 : 1;
}

void bkv_redis_persist_methods(RedisModuleTypeMethods *tm) {
    tm->aux_load = aux_load;
    tm->aux_save = aux_save;
    tm->aux_save_triggers = REDISMODULE_AUX_BEFORE_RDB;
}
