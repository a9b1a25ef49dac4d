#include "db/filename.h"

#include <stdio.h>
#include <string.h>

#include "util/env.h"

int bkv_parse_file_name(const char *name, uint64_t *number) {
    *number = 0;
    if (strcmp(name, "CURRENT") == 0) return BKV_FILE_CURRENT;
    if (strcmp(name, "LOCK") == 0) return BKV_FILE_LOCK;
    /* The one temporary name the engine makes (CURRENT is replaced
     * through it): any other *.tmp is the user's. */
    if (strcmp(name, "CURRENT.tmp") == 0) return BKV_FILE_TEMP;
    const char *p = name;
    int kind;
    if (strncmp(name, "MANIFEST-", 9) == 0) {
        p += 9;
        kind = BKV_FILE_MANIFEST;
    } else {
        kind = -1;
    }
    if (*p < '0' || *p > '9') return BKV_FILE_OTHER;
    uint64_t n = 0;
    while (*p >= '0' && *p <= '9') {
        if (n > UINT64_MAX / 10 - 1) return BKV_FILE_OTHER;
        n = n * 10 + (uint64_t)(*p++ - '0');
    }
    *number = n;
    if (kind == BKV_FILE_MANIFEST) return *p ? BKV_FILE_OTHER : kind;
    if (strcmp(p, ".log") == 0) return BKV_FILE_LOG;
    if (strcmp(p, ".sst") == 0) return BKV_FILE_TABLE;
    return BKV_FILE_OTHER;
}

size_t bkv_count_tables(const bkv_env *env, const char *dir, char *first, size_t n) {
    char **names;
    size_t count = 0, len;
    if (n) *first = 0;
    if (env->list_dir(env, dir, &names, &len, NULL)) return 0;
    for (size_t i = 0; i < len; i++) {
        uint64_t number;
        int kind = bkv_parse_file_name(names[i], &number);
        if (kind != BKV_FILE_TABLE) continue;
        if (count++ == 0 && n) snprintf(first, n, "%s", names[i]);
    }
    bkv_env_free_list(names, len);
    return count;
}
