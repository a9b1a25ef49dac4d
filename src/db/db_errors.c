/*
 * Errors: each thread's last message (bkv_errmsg), the messages shared by
 * every call, and the database's sticky background error. The bottom of
 * src/db: every other file may call these, and these call none of them.
 */
#include <stdio.h>

#include "db/db_int.h"

/* The last error of each thread, like errno: per thread, so any number of
 * threads keep their own message, and tagged with the handle it came from
 * (NULL for an open that failed) so a message is not shown for another. */
static _Thread_local struct {
    const void *owner;
    char msg[BKV_ERR_LEN];
} last_error;

#ifdef BKV_CHECK_INVARIANTS
/* A value unique to the calling thread, for the mutex owner check. */
uintptr_t bkv_thread_token(void) {
    static _Thread_local char token;
    return (uintptr_t)&token;
}
#endif

int bkv_db_error(bkv_db *db, int rc, const bkv_err *err) {
    if (rc >= 0) return rc;
    last_error.owner = db;
    snprintf(last_error.msg, sizeof last_error.msg, "%s", err && err->msg[0] ? err->msg : bkv_strerror(rc));
    return rc;
}

int bkv_db_arg_error(bkv_db *db, const char *call) {
    bkv_err e;
    return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "%s: a NULL handle or pointer argument (or a NULL key or value "
                                                     "with a length)", call), &e);
}

int bkv_db_read_only_error(bkv_db *db, const char *call) {
    bkv_err e;
    return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "%s: %s is open read-only: open it for writing", call,
                                     db->path), &e);
}

const char *bkv_errmsg(bkv_db *db) {
    if (db && last_error.owner != db) return "";
    return last_error.msg;
}

int bkv_db_set_bg_error(bkv_db *db, int rc, const bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    if (!db->bg_error) {
        db->bg_error = rc;
        snprintf(db->bg_msg, sizeof db->bg_msg, "%s", e && e->msg[0] ? e->msg : bkv_strerror(rc));
    }
    pthread_cond_broadcast(&db->bg_cv);
    return rc;
}

int bkv_db_bg_status(const bkv_db *db, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    return bkv_fail(e, db->bg_error, "database is read-only after an earlier error: %s", db->bg_msg);
}
