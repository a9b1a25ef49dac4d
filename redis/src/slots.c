/*
 * Rows by hash slot (docs/redis.md). Every row lives in the node's bloomkv
 * under its slot number and user key, outside Redis's keyspace; each slot
 * that holds rows also has one key in the keyspace, "bkv:slot:{tag}" (the
 * tag hashes to the slot), of module type bkv-slot. That key is the unit
 * Redis moves: its RDB form carries every row of the slot, so MIGRATE
 * (resharding), DUMP/RESTORE and a replica's full sync take the rows with
 * it, and removing it from a node removes the rows there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_int.h"

#define SLOT_KEY_FMT "bkv:slot:{%s}"
#define IMPORT_BATCH 1000

typedef struct slot_value {
    unsigned slot;
    uint64_t incarnation; /* which arrival of the slot's key this is */
} slot_value;

/* CRC16-CCITT (XMODEM), the hash of Redis Cluster's key slots, a byte at
 * a time from a table made once at load (every command hashes its key). */
static uint16_t crc_table[256];

static void make_crc_table(void) {
    for (unsigned i = 0; i < 256; i++) {
        uint16_t crc = (uint16_t)(i << 8);
        for (int b = 0; b < 8; b++) crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
        crc_table[i] = crc;
    }
}

static uint16_t crc16(const char *buf, size_t len) {
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) crc = (uint16_t)((crc << 8) ^ crc_table[((crc >> 8) ^ (uint8_t)buf[i]) & 0xff]);
    return crc;
}

unsigned bkv_redis_key_slot(const char *key, size_t len) {
    /* A non-empty {tag} hashes alone, as Redis does. */
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t start = (size_t)(open - key) + 1;
        const char *close = memchr(key + start, '}', len - start);
        if (close && close > key + start) return crc16(key + start, (size_t)(close - key) - start) & 16383;
    }
    return crc16(key, len) & 16383;
}

size_t bkv_redis_row_key(unsigned slot, const char *k, size_t len, char *buf) {
    buf[0] = (char)(slot >> 8);
    buf[1] = (char)(slot & 0xff);
    memcpy(buf + BKV_SLOT_PREFIX, k, len);
    return len + BKV_SLOT_PREFIX;
}

/* A short tag per slot, found by counting in base 62 until every slot has
 * one (about 160 k hashes). */
static void make_tags(bkv_redis *g) {
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    unsigned left = BKV_REDIS_SLOTS;
    for (uint64_t n = 0; left; n++) {
        char tag[8];
        size_t len = 0;
        uint64_t x = n;
        do {
            tag[len++] = digits[x % 62];
            x /= 62;
        } while (x && len < 6);
        tag[len] = 0;
        unsigned s = crc16(tag, len) & 16383;
        if (!g->slot_tags[s][0]) {
            memcpy(g->slot_tags[s], tag, len + 1);
            left--;
        }
    }
}

static RedisModuleString *slot_key_name(RedisModuleCtx *ctx, unsigned slot) {
    char name[32];
    int n = snprintf(name, sizeof name, SLOT_KEY_FMT, bkv_redis_state->slot_tags[slot]);
    return RedisModule_CreateString(ctx, name, (size_t)n);
}

/* Calls fn on every row of slot (user key without the slot prefix);
 * stops when fn returns non-zero. */
typedef int (*row_fn)(void *arg, const char *k, size_t kl, const char *v, size_t vl);
static int for_each_row(unsigned slot, row_fn fn, void *arg) {
    bkv_redis_commit(NULL); /* a fork child has none: its parent committed before the fork */
    char lo[2] = {(char)(slot >> 8), (char)(slot & 0xff)}, hi[2];
    unsigned next = slot + 1;
    hi[0] = (char)(next >> 8);
    hi[1] = (char)(next & 0xff);
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.fill_cache = 0;
    ro.lower_bound = lo;
    ro.lower_bound_len = 2;
    ro.upper_bound = hi; /* for the last slot, 0x4000: the module's own rows lie past it */
    ro.upper_bound_len = 2;
    bkv_iter *it;
    int rc = bkv_iter_create(bkv_redis_state->db, &ro, &it);
    if (rc) return rc;
    for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) {
        size_t kl, vl;
        const char *k = bkv_iter_key(it, &kl), *v = bkv_iter_value(it, &vl);
        if (kl < BKV_SLOT_PREFIX) continue;
        if ((rc = fn(arg, k + BKV_SLOT_PREFIX, kl - BKV_SLOT_PREFIX, v, vl))) break;
    }
    int st = bkv_iter_status(it);
    bkv_iter_destroy(it);
    return rc ? rc : st;
}

/* Deletes of every row of a slot, into a batch (a slot_batch). */
typedef struct slot_batch {
    bkv_batch *b;
    unsigned slot;
} slot_batch;

static int add_row_delete(void *arg, const char *k, size_t kl, const char *v, size_t vl) {
    (void)v, (void)vl;
    slot_batch *sb = arg;
    char buf[BKV_SLOT_PREFIX + 512], *key = kl + BKV_SLOT_PREFIX <= sizeof buf ? buf : malloc(kl + BKV_SLOT_PREFIX);
    if (!key) return BKV_NOMEM;
    int rc = bkv_batch_delete(sb->b, key, bkv_redis_row_key(sb->slot, k, kl, key));
    if (key != buf) free(key);
    return rc;
}

/* Every row of slot deleted: one range deletion, whatever it holds. */
static int drop_slot_rows(unsigned slot) {
    bkv_redis_commit(NULL); /* the writes before it go in first */
    char lo[2] = {(char)(slot >> 8), (char)(slot & 0xff)}, hi[2] = {(char)((slot + 1) >> 8), (char)((slot + 1) & 0xff)};
    int rc = bkv_delete_range(bkv_redis_state->db, NULL, lo, 2, hi, 2);
    if (rc)
        RedisModule_Log(NULL, "warning", "bloomkv: could not remove every row of slot %u: %s", slot, bkv_errmsg(NULL));
    return rc;
}

/* ---- the bkv-slot type ---- */

typedef struct save_ctx {
    RedisModuleIO *io;
} save_ctx;

static int save_row(void *arg, const char *k, size_t kl, const char *v, size_t vl) {
    RedisModuleIO *io = ((save_ctx *)arg)->io;
    RedisModule_SaveUnsigned(io, 1);
    RedisModule_SaveStringBuffer(io, k, kl);
    RedisModule_SaveStringBuffer(io, v, vl);
    return 0;
}

/* The rows of a slot end with 0; ROWS_INCOMPLETE instead marks a slot
 * whose rows could not all be read: a load refuses the file. */
#define ROWS_INCOMPLETE 2

/* A save that cannot read every row fails rather than write a file that
 * looks whole: in a child Redis forked (BGSAVE, a replica's sync, an AOF
 * rewrite) by ending it with an error, which Redis reports as the save's
 * failure; in the server itself (SAVE, SHUTDOWN, DEBUG RELOAD), which
 * cannot be stopped from here, by marking the slot so that no load takes
 * the file. */
static void slot_rdb_save(RedisModuleIO *io, void *value) {
    slot_value *sv = value;
    RedisModule_SaveUnsigned(io, sv->slot);
    save_ctx sc = {io};
    if (for_each_row(sv->slot, save_row, &sc) != BKV_OK) {
        RedisModule_LogIOError(io, "warning", "bloomkv: reading slot %u: %s; this save fails", sv->slot,
                               bkv_errmsg(NULL));
        if (bkv_redis_state->in_fork_child) _exit(1);
        RedisModule_SaveUnsigned(io, ROWS_INCOMPLETE);
        return;
    }
    RedisModule_SaveUnsigned(io, 0);
}

static slot_value *new_slot_value(unsigned slot) {
    slot_value *sv = RedisModule_Alloc(sizeof *sv);
    sv->slot = slot;
    sv->incarnation = ++bkv_redis_state->next_incarnation;
    bkv_redis_state->incarnation[slot] = sv->incarnation;
    return sv;
}

static void *slot_rdb_load(RedisModuleIO *io, int encver) {
    if (encver != BKV_SLOT_ENCVER) return NULL;
    uint64_t slot = RedisModule_LoadUnsigned(io);
    if (RedisModule_IsIOError(io) || slot >= BKV_REDIS_SLOTS) return NULL;
    bkv_redis *g = bkv_redis_state;
    bkv_redis_commit(NULL); /* earlier commands' writes land before the rows that arrive now */
    /* A whole file loading: the contract decides (persist.c). A RESTORE or
     * MIGRATE brings a slot's rows to take. */
    int restoring = g->load_state == BKV_LOAD_IDLE;
    /* A RESTORE replaces the rows of the slot its payload names: only under
     * a key of that slot, or a forged or misnamed payload would replace
     * another slot's rows and leave them owned by a key of a third. */
    const RedisModuleString *name = restoring ? RedisModule_GetKeyNameFromIO(io) : NULL;
    if (name) {
        size_t nl;
        const char *n = RedisModule_StringPtrLen(name, &nl);
        unsigned own = bkv_redis_key_slot(n, nl);
        if (own != slot) {
            RedisModule_LogIOError(io, "warning", "bloomkv: a RESTORE of slot %u's rows under a key of slot %u is refused",
                                   (unsigned)slot, own);
            return NULL;
        }
    }
    int take = restoring ? 1 : bkv_redis_loading_rows(NULL);
    if (take < 0) return NULL;
    bkv_batch *b = bkv_batch_create();
    if (!b) return NULL;
    /* A RESTORE replaces the slot's rows: the rows the node holds for it
     * are deleted in the same batch that writes the payload's, one write
     * once the whole payload has read well (a bad one changes nothing). */
    slot_batch sb = {b, (unsigned)slot};
    int rc = restoring ? for_each_row((unsigned)slot, add_row_delete, &sb) : BKV_OK;
    for (;;) {
        uint64_t more = RedisModule_LoadUnsigned(io);
        if (RedisModule_IsIOError(io)) goto bad;
        if (!more) break;
        if (more != 1) {
            RedisModule_LogIOError(io, "warning", "bloomkv: slot %u was saved incomplete (its rows could not be read): "
                                                  "this file is refused", (unsigned)slot);
            goto bad;
        }
        size_t kl, vl;
        char *k = RedisModule_LoadStringBuffer(io, &kl);
        char *v = k ? RedisModule_LoadStringBuffer(io, &vl) : NULL;
        if (!v) {
            if (k) RedisModule_Free(k);
            goto bad;
        }
        if (take) {
            char *row = RedisModule_Alloc(kl + BKV_SLOT_PREFIX);
            size_t n = bkv_redis_row_key((unsigned)slot, k, kl, row);
            if (!rc) rc = bkv_batch_put(b, row, n, v, vl);
            RedisModule_Free(row);
            if (!rc && !restoring && bkv_batch_count(b) >= IMPORT_BATCH) {
                rc = bkv_write(g->db, NULL, b);
                bkv_batch_clear(b);
            }
        }
        RedisModule_Free(k);
        RedisModule_Free(v);
    }
    if (!rc && bkv_batch_count(b)) rc = bkv_write(g->db, NULL, b);
    bkv_batch_destroy(b);
    if (rc) {
        RedisModule_LogIOError(io, "warning", "bloomkv: importing slot %u: %s", (unsigned)slot, bkv_errmsg(g->db));
        return NULL;
    }
    return new_slot_value((unsigned)slot);
bad:
    bkv_batch_destroy(b);
    return NULL;
}

typedef struct aof_ctx {
    RedisModuleIO *aof;
    unsigned slot;
} aof_ctx;

static int rewrite_row(void *arg, const char *k, size_t kl, const char *v, size_t vl) {
    RedisModule_EmitAOF(((aof_ctx *)arg)->aof, "BKV.SET", "bb", k, kl, v, vl);
    return 0;
}

static void slot_aof_rewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    (void)key;
    aof_ctx ac = {aof, ((slot_value *)value)->slot};
    if (for_each_row(ac.slot, rewrite_row, &ac) != BKV_OK)
        RedisModule_LogIOError(aof, "warning", "bloomkv: reading slot %u for the AOF", ac.slot);
}

static int digest_row(void *arg, const char *k, size_t kl, const char *v, size_t vl) {
    RedisModuleDigest *md = arg;
    RedisModule_DigestAddStringBuffer(md, k, kl);
    RedisModule_DigestAddStringBuffer(md, v, vl);
    RedisModule_DigestEndSequence(md);
    return 0;
}

static void slot_digest(RedisModuleDigest *md, void *value) {
    for_each_row(((slot_value *)value)->slot, digest_row, md);
}

static size_t slot_mem_usage(const void *value) {
    (void)value;
    return sizeof(slot_value); /* the rows live in bloomkv, on disk and in its caches */
}

static void slot_free(void *value) { RedisModule_Free(value); }

/* The key left this node's keyspace (DEL, MIGRATE to another node, an
 * overwrite): its rows go with it, unless a newer arrival of the slot's
 * key (RESTORE ... REPLACE loads before it deletes) owns them now. */
static void slot_unlink(RedisModuleString *key, const void *value) {
    (void)key;
    const slot_value *sv = value;
    bkv_redis *g = bkv_redis_state;
    if (g->incarnation[sv->slot] != sv->incarnation) return;
    g->incarnation[sv->slot] = 0;
    drop_slot_rows(sv->slot);
}

/* Puts the slot's key into the keyspace unless it is there. */
static void make_slot_key(RedisModuleCtx *ctx, unsigned slot) {
    RedisModuleString *name = slot_key_name(ctx, slot);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_WRITE);
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY)
        RedisModule_ModuleTypeSetValue(key, bkv_redis_state->slot_type, new_slot_value(slot));
    RedisModule_CloseKey(key);
    RedisModule_FreeString(ctx, name);
}

/* ---- ownership ---- */

/* Whether CLUSTER NODES lists slot among this node's own (not one it is
 * importing). */
static int own_slot(RedisModuleCtx *ctx, unsigned slot) {
    RedisModuleCallReply *r = RedisModule_Call(ctx, "CLUSTER", "c", "NODES");
    if (!r) return 0;
    size_t len;
    const char *s = RedisModule_CallReplyStringPtr(r, &len);
    int owned = 0;
    for (const char *line = s; s && line < s + len;) {
        const char *eol = memchr(line, '\n', (size_t)(s + len - line));
        if (!eol) eol = s + len;
        char buf[65536];
        size_t n = (size_t)(eol - line) < sizeof buf - 1 ? (size_t)(eol - line) : sizeof buf - 1;
        memcpy(buf, line, n);
        buf[n] = 0;
        if (strstr(buf, "myself")) {
            char *save, *tok = strtok_r(buf, " ", &save);
            for (int field = 0; tok; tok = strtok_r(NULL, " ", &save), field++) {
                if (field < 8 || tok[0] == '[') continue;
                unsigned a, b;
                int got = sscanf(tok, "%u-%u", &a, &b);
                if (got == 1) b = a;
                if (got >= 1 && slot >= a && slot <= b) owned = 1;
            }
            break;
        }
        line = eol + 1;
    }
    RedisModule_FreeCallReply(r);
    return owned;
}

int bkv_redis_slot_ready(RedisModuleCtx *ctx, unsigned slot, int create) {
    bkv_redis *g = bkv_redis_state;
    if (g->incarnation[slot]) return 0;
    int flags = RedisModule_GetContextFlags(ctx);
    /* A command reaches a node without the slot's key as the slot's owner
     * (an empty slot), or as the target of a migration (ASKING) before the
     * key arrived: the rows are still on the source, so the client tries
     * again shortly. Replicas, replicated commands and loading follow the
     * master. */
    if ((flags & REDISMODULE_CTX_FLAGS_CLUSTER) && (flags & REDISMODULE_CTX_FLAGS_MASTER) &&
        !(flags & (REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING)) && !own_slot(ctx, slot)) {
        RedisModule_ReplyWithError(ctx, "TRYAGAIN the slot's rows are still being moved to this node");
        return -1;
    }
    if (create) make_slot_key(ctx, slot);
    return 0;
}

void bkv_redis_slots_restore_keys(RedisModuleCtx *ctx) {
    bkv_redis *g = bkv_redis_state;
    bkv_redis_commit(ctx);
    bkv_iter *it;
    if (bkv_iter_create(g->db, NULL, &it)) return;
    /* One seek per slot holding rows: the first row of each. */
    for (unsigned slot = 0; slot < BKV_REDIS_SLOTS;) {
        char lo[2] = {(char)(slot >> 8), (char)(slot & 0xff)};
        bkv_iter_seek(it, lo, 2);
        if (!bkv_iter_valid(it)) break;
        size_t kl;
        const unsigned char *k = bkv_iter_key(it, &kl);
        if (kl < BKV_SLOT_PREFIX) break;
        slot = (unsigned)k[0] << 8 | k[1];
        if (slot >= BKV_REDIS_SLOTS) break;
        if (!g->incarnation[slot]) make_slot_key(ctx, slot);
        slot++;
    }
    bkv_iter_destroy(it);
}

int bkv_redis_drop_all(RedisModuleCtx *ctx) {
    bkv_redis *g = bkv_redis_state;
    /* Every slot's rows, as one range deletion: the module's own rows,
     * past the last slot's prefix, stay. */
    bkv_redis_commit(ctx);
    static const char end[2] = {(char)(BKV_REDIS_SLOTS >> 8), (char)(BKV_REDIS_SLOTS & 0xff)};
    int rc = bkv_delete_range(g->db, NULL, NULL, 0, end, sizeof end);
    if (!rc) rc = bkv_redis_new_branch(); /* no file saved before this holds these rows */
    if (rc) RedisModule_Log(ctx, "warning", "bloomkv: could not empty %s: %s", g->dir, bkv_errmsg(NULL));
    memset(g->incarnation, 0, sizeof g->incarnation);
    return rc;
}

/* ---- the slot keys cannot be used to lose rows ----
 *
 * A slot key leaves a node's keyspace, taking its rows, only by MIGRATE
 * (resharding), a RESTORE ... REPLACE of a newer copy, or a flush. Every
 * command that would delete, rename, move, copy over, overwrite or expire
 * one is turned, before Redis looks it up, into BKV.REFUSED, which
 * refuses it; the same command from a master (it did it: a MIGRATE's
 * DEL) or an AOF is run as it was. Slot keys never carry a TTL, and the
 * allkeys-* eviction policies, which would evict them, are refused. */

#define SLOT_KEY_PREFIX "bkv:slot:{"

static int is_slot_key(RedisModuleString *s) {
    size_t n;
    const char *p = RedisModule_StringPtrLen(s, &n);
    return n >= sizeof SLOT_KEY_PREFIX - 1 && memcmp(p, SLOT_KEY_PREFIX, sizeof SLOT_KEY_PREFIX - 1) == 0;
}

static int arg_is(RedisModuleString *s, const char *text) {
    size_t n;
    const char *p = RedisModule_StringPtrLen(s, &n);
    return n == strlen(text) && strncasecmp(p, text, n) == 0;
}

/* Where a command names a key it would remove, rename, expire or
 * overwrite. Every command Redis runs passes the filter: a rule is found
 * by the name's length and first letter first, so most commands cost a
 * few integer compares (a case-blind compare for each rule of the same
 * length was about 1% of a BKV.GET's server time). */
enum { KEYS_FROM, KEY_AFTER_STORE, SWAPDB_ZERO, RESTORE_TTL, CONFIG_ALLKEYS };
typedef struct key_rule {
    const char *cmd;
    size_t len;
    int kind, from, step; /* KEYS_FROM: args from, from + step, ... (step 0: from alone) */
} key_rule;

#define RULE(name, kind, from, step) {name, sizeof name - 1, kind, from, step}
static const key_rule key_rules[] = {
    RULE("del", KEYS_FROM, 1, 1),          RULE("unlink", KEYS_FROM, 1, 1),      RULE("expire", KEYS_FROM, 1, 0),
    RULE("pexpire", KEYS_FROM, 1, 0),      RULE("expireat", KEYS_FROM, 1, 0),    RULE("pexpireat", KEYS_FROM, 1, 0),
    RULE("move", KEYS_FROM, 1, 0),         RULE("set", KEYS_FROM, 1, 0),         RULE("setex", KEYS_FROM, 1, 0),
    RULE("psetex", KEYS_FROM, 1, 0),       RULE("getset", KEYS_FROM, 1, 0),      RULE("getdel", KEYS_FROM, 1, 0),
    RULE("getex", KEYS_FROM, 1, 0),        RULE("rename", KEYS_FROM, 1, 1),      RULE("renamenx", KEYS_FROM, 1, 1),
    RULE("copy", KEYS_FROM, 1, 1),         RULE("mset", KEYS_FROM, 1, 2),        RULE("sinterstore", KEYS_FROM, 1, 0),
    RULE("sunionstore", KEYS_FROM, 1, 0),  RULE("sdiffstore", KEYS_FROM, 1, 0),  RULE("zunionstore", KEYS_FROM, 1, 0),
    RULE("zinterstore", KEYS_FROM, 1, 0),  RULE("zdiffstore", KEYS_FROM, 1, 0),  RULE("zrangestore", KEYS_FROM, 1, 0),
    RULE("geosearchstore", KEYS_FROM, 1, 0), RULE("bitop", KEYS_FROM, 2, 0),     RULE("lmove", KEYS_FROM, 2, 0),
    RULE("rpoplpush", KEYS_FROM, 2, 0),    RULE("smove", KEYS_FROM, 2, 0),       RULE("sort", KEY_AFTER_STORE, 0, 0),
    RULE("georadius", KEY_AFTER_STORE, 0, 0), RULE("georadiusbymember", KEY_AFTER_STORE, 0, 0),
    RULE("swapdb", SWAPDB_ZERO, 0, 0),     RULE("restore", RESTORE_TTL, 0, 0),   RULE("config", CONFIG_ALLKEYS, 0, 0),
};

/* Whether the command in fctx would take away or hide a slot key. */
static int endangers_slot_key(RedisModuleCommandFilterCtx *fctx) {
    int argc = RedisModule_CommandFilterArgsCount(fctx);
    if (argc < 2) return 0;
    size_t n;
    const char *name = RedisModule_StringPtrLen(RedisModule_CommandFilterArgGet(fctx, 0), &n);
    /* A module's command (BKV.GET, BF.ADD) is none of Redis's own: no rule
     * name holds a dot. */
    if (n > 3 && (name[2] == '.' || name[3] == '.')) return 0;
    const key_rule *k = NULL;
    int first = n ? name[0] | 0x20 : 0; /* lower case for letters; a rule's first byte is a letter */
    for (size_t r = 0; r < sizeof key_rules / sizeof *key_rules && !k; r++)
        if (key_rules[r].len == n && key_rules[r].cmd[0] == first && strncasecmp(name, key_rules[r].cmd, n) == 0)
            k = &key_rules[r];
    if (!k) return 0;
    RedisModuleString *a1 = RedisModule_CommandFilterArgGet(fctx, 1);
    switch (k->kind) {
    case SWAPDB_ZERO:
        return argc >= 3 && (arg_is(a1, "0") || arg_is(RedisModule_CommandFilterArgGet(fctx, 2), "0"));
    case RESTORE_TTL: /* with a TTL, the key would expire */
        return argc >= 3 && is_slot_key(a1) && !arg_is(RedisModule_CommandFilterArgGet(fctx, 2), "0");
    case CONFIG_ALLKEYS:
        if (!arg_is(a1, "set")) return 0;
        for (int i = 2; i + 1 < argc; i += 2) {
            size_t vn;
            const char *v = RedisModule_StringPtrLen(RedisModule_CommandFilterArgGet(fctx, i + 1), &vn);
            if (arg_is(RedisModule_CommandFilterArgGet(fctx, i), "maxmemory-policy") && vn >= 7 &&
                strncasecmp(v, "allkeys", 7) == 0)
                return 1;
        }
        return 0;
    case KEY_AFTER_STORE:
        for (int i = 1; i + 1 < argc; i++)
            if ((arg_is(RedisModule_CommandFilterArgGet(fctx, i), "store") ||
                 arg_is(RedisModule_CommandFilterArgGet(fctx, i), "storedist")) &&
                is_slot_key(RedisModule_CommandFilterArgGet(fctx, i + 1)))
                return 1;
        return 0;
    default:
        if (k->step == 0) return k->from < argc && is_slot_key(RedisModule_CommandFilterArgGet(fctx, k->from));
        for (int i = k->from; i < argc; i += k->step)
            if (is_slot_key(RedisModule_CommandFilterArgGet(fctx, i))) return 1;
        return 0;
    }
}

static void slot_key_filter(RedisModuleCommandFilterCtx *fctx) {
    if (!endangers_slot_key(fctx)) return;
    /* BKV.REFUSED <command> <its arguments...> */
    RedisModule_CommandFilterArgInsert(fctx, 0, RedisModule_CreateString(NULL, "BKV.REFUSED", 11));
}

static int cmd_refused(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return RedisModule_WrongArity(ctx);
    size_t n;
    const char *name = RedisModule_StringPtrLen(argv[1], &n);
    if (RedisModule_GetContextFlags(ctx) & (REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING)) {
        /* The master did it (a MIGRATE's DEL of a slot that left), or the
         * AOF recorded it: this node follows. */
        RedisModuleCallReply *r = RedisModule_Call(ctx, name, "v", argv + 2, (size_t)argc - 2);
        if (!r) return RedisModule_ReplyWithError(ctx, "ERR bloomkv: cannot run a replicated command");
        RedisModule_ReplyWithCallReply(ctx, r);
        RedisModule_FreeCallReply(r);
        return REDISMODULE_OK;
    }
    char msg[256];
    snprintf(msg, sizeof msg,
             "ERR bloomkv: %.*s would delete, move, expire or overwrite a bkv:slot key (or evict them all), and with "
             "it its slot's rows; rows are removed by BKV.DEL, FLUSHDB/FLUSHALL and resharding only",
             (int)(n < 40 ? n : 40), name);
    return RedisModule_ReplyWithError(ctx, msg);
}

/* Refuses to load under an eviction policy that would evict slot keys. */
static int eviction_policy_ok(RedisModuleCtx *ctx) {
    RedisModuleCallReply *r = RedisModule_Call(ctx, "CONFIG", "cc", "GET", "maxmemory-policy");
    int ok = 1;
    if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY && RedisModule_CallReplyLength(r) == 2) {
        size_t n;
        const char *v = RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(r, 1), &n);
        if (v && n >= 7 && strncasecmp(v, "allkeys", 7) == 0) {
            RedisModule_Log(ctx, "warning",
                            "bloomkv: maxmemory-policy %.*s would evict the bkv:slot keys that own the rows: use "
                            "noeviction or a volatile-* policy", (int)n, v);
            ok = 0;
        }
    }
    if (r) RedisModule_FreeCallReply(r);
    return ok;
}

int bkv_redis_slots_init(RedisModuleCtx *ctx) {
    if (!eviction_policy_ok(ctx)) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "bkv.refused", cmd_refused, "fast", 0, 0, 0) == REDISMODULE_ERR ||
        !RedisModule_RegisterCommandFilter(ctx, slot_key_filter, REDISMODULE_CMDFILTER_NOSELF))
        return REDISMODULE_ERR;
    make_crc_table();
    make_tags(bkv_redis_state);
    RedisModuleTypeMethods tm = {.version = REDISMODULE_TYPE_METHOD_VERSION,
                                 .rdb_load = slot_rdb_load,
                                 .rdb_save = slot_rdb_save,
                                 .aof_rewrite = slot_aof_rewrite,
                                 .mem_usage = slot_mem_usage,
                                 .digest = slot_digest,
                                 .free = slot_free,
                                 .unlink = slot_unlink};
    bkv_redis_persist_methods(&tm);
    bkv_redis_state->slot_type = RedisModule_CreateDataType(ctx, "bkv-slot0", BKV_SLOT_ENCVER, &tm);
    return bkv_redis_state->slot_type ? REDISMODULE_OK : REDISMODULE_ERR;
}
