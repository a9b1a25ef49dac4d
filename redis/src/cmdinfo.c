/*
 * What COMMAND DOCS and COMMAND INFO say of each command of the module:
 * summary, arity, key specs (which arguments are keys, and what the
 * command does to them) and arguments, set through RedisModule_SetCommandInfo
 * once every command exists.
 *
 * Arguments are written as a line of items, each [TOKEN=]name:type with
 * "?" (optional) or "*" (may repeat) after it; type is key, string,
 * integer, double or pure (a token alone: TOKEN=name:pure names it apart
 * from its token); {item item}* groups items that
 * repeat together (MSET's key value pairs).
 */
#include <stdlib.h>
#include <string.h>

#include "redis_int.h"

typedef struct cmd_doc {
    const char *name, *summary;
    int arity;
    int first_key, last_key, key_step; /* first_key 0: no key */
    uint64_t key_flags;
    const char *args;
} cmd_doc;

#define RO (REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS)
#define RW_INSERT (REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_INSERT)
#define RW_UPDATE (REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_UPDATE)
#define OW (REDISMODULE_CMD_KEY_OW | REDISMODULE_CMD_KEY_UPDATE)
#define RM (REDISMODULE_CMD_KEY_RM | REDISMODULE_CMD_KEY_DELETE)

static const cmd_doc docs[] = {
    {"bkv.set", "Stores a row (its value under its key) in bloomkv", 3, 1, 0, 1, OW, "key:key value:string"},
    {"bkv.get", "Returns a row's value", 2, 1, 0, 1, RO, "key:key"},
    {"bkv.exists", "Whether a row exists", 2, 1, 0, 1, RO, "key:key"},
    {"bkv.del", "Deletes a row", 2, 1, 0, 1, RM, "key:key"},
    {"bkv.mset", "Stores several rows of one slot, all or none", -3, 1, -1, 2, OW, "{key:key value:string}*"},
    {"bkv.mget", "Returns the values of several rows", -2, 1, -1, 1, RO, "key:key*"},
    {"bkv.scan", "Walks the node's rows in key order, COUNT rows at a time", -2, 0, 0, 0, 0,
     "cursor:string MATCH=prefix:string? COUNT=count:integer?"},
    {"bkv.findvalue", "Returns the rows whose value is the given one, through the value index, a page at a time", -2,
     0, 0, 0, 0, "value:string LIMIT=limit:integer? AFTER=key:string?"},
    {"bkv.info", "bloomkv's report on the node's database", 1, 0, 0, 0, 0, ""},
    {"bkv.compact", "Compacts the node's database (on a worker; the client waits)", 1, 0, 0, 0, 0, ""},
    {"bkv.refused", "Refuses a command that would take away a slot key and its rows", -2, 0, 0, 0, 0,
     "command:string argument:string*"},
    {"bf.reserve", "Creates an empty Bloom filter", -4, 1, 0, 1, RW_INSERT,
     "key:key error_rate:double capacity:integer EXPANSION=expansion:integer? NONSCALING=nonscaling:pure?"},
    {"bf.add", "Adds an item to a Bloom filter", 3, 1, 0, 1, RW_INSERT, "key:key item:string"},
    {"bf.madd", "Adds items to a Bloom filter", -3, 1, 0, 1, RW_INSERT, "key:key item:string*"},
    {"bf.insert", "Adds items to a Bloom filter, creating it with the given parameters", -4, 1, 0, 1, RW_INSERT,
     "key:key CAPACITY=capacity:integer? ERROR=error:double? EXPANSION=expansion:integer? NOCREATE=nocreate:pure? "
     "NONSCALING=nonscaling:pure? ITEMS=items:pure item:string*"},
    {"bf.exists", "Whether an item may be in a Bloom filter", 3, 1, 0, 1, RO, "key:key item:string"},
    {"bf.mexists", "Whether items may be in a Bloom filter", -3, 1, 0, 1, RO, "key:key item:string*"},
    {"bf.info", "A Bloom filter's parameters and use", -2, 1, 0, 1, RO, "key:key single_value:string?"},
    {"bf.card", "The number of items added to a Bloom filter", 2, 1, 0, 1, RO, "key:key"},
    {"cf.reserve", "Creates an empty cuckoo filter", -3, 1, 0, 1, RW_INSERT,
     "key:key capacity:integer BUCKETSIZE=bucketsize:integer? MAXITERATIONS=maxiterations:integer? "
     "EXPANSION=expansion:integer?"},
    {"cf.add", "Adds an item to a cuckoo filter", 3, 1, 0, 1, RW_INSERT, "key:key item:string"},
    {"cf.addnx", "Adds an item to a cuckoo filter unless it may be there", 3, 1, 0, 1, RW_INSERT,
     "key:key item:string"},
    {"cf.insert", "Adds items to a cuckoo filter, creating it with the given capacity", -4, 1, 0, 1, RW_INSERT,
     "key:key CAPACITY=capacity:integer? NOCREATE=nocreate:pure? ITEMS=items:pure item:string*"},
    {"cf.insertnx", "Adds items to a cuckoo filter unless they may be there", -4, 1, 0, 1, RW_INSERT,
     "key:key CAPACITY=capacity:integer? NOCREATE=nocreate:pure? ITEMS=items:pure item:string*"},
    {"cf.exists", "Whether an item may be in a cuckoo filter", 3, 1, 0, 1, RO, "key:key item:string"},
    {"cf.mexists", "Whether items may be in a cuckoo filter", -3, 1, 0, 1, RO, "key:key item:string*"},
    {"cf.del", "Deletes one copy of an item from a cuckoo filter", 3, 1, 0, 1, RW_UPDATE, "key:key item:string"},
    {"cf.count", "How many copies of an item a cuckoo filter may hold", 3, 1, 0, 1, RO, "key:key item:string"},
    {"cf.info", "A cuckoo filter's parameters and use", 2, 1, 0, 1, RO, "key:key"},
    {"cf.compact", "Moves a cuckoo filter's entries into older sub-filters and frees the emptied newest ones", 2, 1,
     0, 1, RW_UPDATE, "key:key"},
    {"bf.debug", "Describes a Bloom filter's sub-filters: bytes, bits, probes, capacity, items, error rate", 2, 1, 0,
     1, RO, "key:key"},
    {"cf.debug", "Describes a cuckoo filter in one line: buckets, items, deletes, sub-filters", 2, 1, 0, 1, RO,
     "key:key"},
    {"bf.scandump", "Returns a Bloom filter in pieces, one per call, for BF.LOADCHUNK", 3, 1, 0, 1, RO,
     "key:key iterator:integer"},
    {"bf.loadchunk", "Restores a piece of a Bloom filter that BF.SCANDUMP returned", 4, 1, 0, 1, RW_INSERT,
     "key:key iterator:integer data:string"},
    {"cf.scandump", "Returns a cuckoo filter in pieces, one per call, for CF.LOADCHUNK", 3, 1, 0, 1, RO,
     "key:key iterator:integer"},
    {"cf.loadchunk", "Restores a piece of a cuckoo filter that CF.SCANDUMP returned", 4, 1, 0, 1, RW_INSERT,
     "key:key iterator:integer data:string"},
    {"bkv.filter.build", "Builds a static filter (ribbon, fuse, xor...) over the given items", -5, 1, 0, 1, OW,
     "key:key type:string error_rate:double item:string*"},
    {"bkv.filter.exists", "Whether an item may be in a static filter", 3, 1, 0, 1, RO, "key:key item:string"},
    {"bkv.filter.mexists", "Whether items may be in a static filter", -3, 1, 0, 1, RO, "key:key item:string*"},
    {"bkv.filter.loadblob", "Stores a filter from its serialized form (what an AOF rewrite writes)", 3, 1, 0, 1, OW,
     "key:key blob:string"},
};

#define MAX_ARGS 12

/* Parses one item at *p into a (subargs from pool); 0, or -1 if malformed. */
static int parse_item(const char **p, RedisModuleCommandArg *a, RedisModuleCommandArg *pool, size_t *used,
                      size_t cap) {
    const char *s = *p;
    memset(a, 0, sizeof *a);
    a->key_spec_index = -1;
    if (*s == '{') {
        s++;
        size_t first = *used, n = 0;
        while (*s && *s != '}') {
            while (*s == ' ') s++;
            if (*s == '}') break;
            if (*used + 1 >= cap) return -1; /* and room for the terminator */
            if (parse_item(&s, &pool[(*used)++], pool, used, cap)) return -1;
            n++;
        }
        if (*s != '}' || !n) return -1;
        memset(&pool[(*used)++], 0, sizeof *pool);
        s++;
        a->name = "data";
        a->type = REDISMODULE_ARG_TYPE_BLOCK;
        a->subargs = &pool[first];
    } else {
        size_t len = strcspn(s, " ?*}");
        char *item = RedisModule_Alloc(len + 1); /* kept for the module's life, as Redis may keep pointers */
        memcpy(item, s, len);
        item[len] = 0;
        s += len;
        char *eq = strchr(item, '='), *colon = strrchr(item, ':');
        if (!colon) return -1;
        *colon = 0;
        const char *type = colon + 1;
        if (eq) {
            *eq = 0;
            a->token = item;
            a->name = eq + 1;
        } else {
            a->name = item;
        }
        if (!strcmp(type, "key")) a->type = REDISMODULE_ARG_TYPE_KEY, a->key_spec_index = 0;
        else if (!strcmp(type, "string")) a->type = REDISMODULE_ARG_TYPE_STRING;
        else if (!strcmp(type, "integer")) a->type = REDISMODULE_ARG_TYPE_INTEGER;
        else if (!strcmp(type, "double")) a->type = REDISMODULE_ARG_TYPE_DOUBLE;
        else if (!strcmp(type, "pure")) a->type = REDISMODULE_ARG_TYPE_PURE_TOKEN, a->token = a->token ? a->token : a->name;
        else return -1;
    }
    for (; *s == '?' || *s == '*'; s++) a->flags |= *s == '?' ? REDISMODULE_CMD_ARG_OPTIONAL : REDISMODULE_CMD_ARG_MULTIPLE;
    *p = s;
    return 0;
}

int bkv_redis_describe_commands(RedisModuleCtx *ctx) {
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        const cmd_doc *d = &docs[i];
        RedisModuleCommand *cmd = RedisModule_GetCommand(ctx, d->name);
        if (!cmd) continue; /* not made in this build */
        /* Kept for the module's life, like the texts. */
        RedisModuleCommandArg *args = RedisModule_Calloc(MAX_ARGS + 1, sizeof *args);
        RedisModuleCommandArg *pool = RedisModule_Calloc(MAX_ARGS * 2, sizeof *pool);
        size_t n = 0, used = 0;
        for (const char *p = d->args; *p;) {
            while (*p == ' ') p++;
            if (!*p) break;
            if (n == MAX_ARGS || parse_item(&p, &args[n++], pool, &used, MAX_ARGS * 2)) {
                RedisModule_Log(ctx, "warning", "bloomkv: malformed argument description of %s", d->name);
                return REDISMODULE_ERR;
            }
        }
        RedisModuleCommandKeySpec *specs = RedisModule_Calloc(2, sizeof *specs);
        if (d->first_key) {
            specs[0].flags = d->key_flags;
            specs[0].begin_search_type = REDISMODULE_KSPEC_BS_INDEX;
            specs[0].bs.index.pos = d->first_key;
            specs[0].find_keys_type = REDISMODULE_KSPEC_FK_RANGE;
            specs[0].fk.range.lastkey = d->last_key;
            specs[0].fk.range.keystep = d->key_step;
            specs[0].fk.range.limit = 0;
        }
        RedisModuleCommandInfo info = {.version = REDISMODULE_COMMAND_INFO_VERSION,
                                       .summary = d->summary,
                                       .since = "0.2.0",
                                       .arity = d->arity,
                                       .key_specs = d->first_key ? specs : NULL,
                                       .args = n ? args : NULL};
        if (RedisModule_SetCommandInfo(cmd, &info) == REDISMODULE_ERR) {
            RedisModule_Log(ctx, "warning", "bloomkv: Redis refused the description of %s", d->name);
            return REDISMODULE_ERR;
        }
    }
    return REDISMODULE_OK;
}
