/* Error detail: internal functions return a BKV_* status and, on failure,
 * describe it (naming the file and offset where there is one) in a
 * caller-supplied bkv_err. */
#ifndef BKV_UTIL_STATUS_H
#define BKV_UTIL_STATUS_H

#include "bloomkv_filter.h"

#define BKV_ERR_LEN 320

typedef struct bkv_err {
    char msg[BKV_ERR_LEN];
} bkv_err;

/* No message yet. Only the first byte is read until a failure writes a
 * whole message, so a hot path sets that byte instead of zeroing all
 * BKV_ERR_LEN (a get spent about 40 instructions clearing them). */
static inline void bkv_err_clear(bkv_err *e) { e->msg[0] = '\0'; }

/* Writes the message into e (when not NULL) and returns rc. */
int bkv_fail(bkv_err *e, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
