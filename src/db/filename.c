#include "db/filename.h"

#include <string.h>

int bkv_parse_file_name(const char *name, uint64_t *number) {
    *number = 0;
    if (strcmp(name, "CURRENT") == 0) return BKV_FILE_CURRENT;
    if (strcmp(name, "LOCK") == 0) return BKV_FILE_LOCK;
    size_t len = strlen(name);
    if (len > 4 && strcmp(name + len - 4, ".tmp") == 0) return BKV_FILE_TEMP;
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
