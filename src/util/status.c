#include "bloomkv_filter.h"

const char *bkv_strerror(int rc) {
    switch (rc) {
    case BKV_OK: return "ok";
    case BKV_NOTFOUND: return "not found";
    case BKV_CORRUPTION: return "corruption";
    case BKV_IOERROR: return "I/O error";
    case BKV_INVALID: return "invalid argument";
    case BKV_NOMEM: return "out of memory";
    case BKV_BUSY: return "busy";
    case BKV_FULL: return "filter full";
    default: return "unknown status";
    }
}

#include <stdarg.h>
#include <stdio.h>

#include "util/status.h"

int bkv_fail(bkv_err *e, int rc, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return rc;
}

#ifdef BKV_CHECK_INVARIANTS
#include <stdlib.h>

#include "util/check.h"

void bkv_check_failed(const char *cond, const char *file, int line) {
    fprintf(stderr, "bloomkv: invariant failed: %s (%s:%d)\n", cond, file, line);
    abort();
}
#endif
