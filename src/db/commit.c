/*
 * Installing a version edit (a flush, a compaction, an ingest, a range
 * deletion): the version set logs and applies it, the value index is kept
 * in step, and the new version is published to reads. Above the parts it
 * ties together.
 */
#include "db/read_view.h"
#include "db/version_set.h"

int bkv_db_commit_edit(bkv_db *db, bkv_version_edit *edit, int reindex, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    if (reindex) {
        bkv_db_unlock(db);
        bkv_db_value_index_add(db, edit);
        bkv_db_lock(db);
    }
    int rc = bkv_vset_log_and_apply(db, edit, e);
    if (!rc) bkv_view_publish(db);
    if (reindex) {
        bkv_db_unlock(db);
        bkv_db_value_index_finish(db, edit, rc == BKV_OK);
        bkv_db_lock(db);
    }
    return rc;
}
