/*
 * The version set: the database's persistent state, as the manifest
 * records it. Reading the manifest at open, writing a fresh one, and
 * logging each change (a flush or a compaction) as a version edit that is
 * appended and synced before the new version is installed. What else an
 * installed edit sets off (the value index kept in step, the read view
 * published) is commit.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/version_set.h"

int bkv_read_current(const bkv_env *env, const char *dir, uint64_t *manifest, bkv_err *e) {
    char path[BKV_PATH_MAX];
    bkv_current_name(path, dir);
    uint8_t *data;
    size_t len;
    int rc = bkv_env_read_all(env, path, &data, &len, e);
    if (rc) return rc;
    char name[64];
    if (len < 2 || len >= sizeof name || data[len - 1] != '\n') {
        free(data);
        return bkv_fail(e, BKV_CORRUPTION, "%s: malformed (offset 0)", path);
    }
    memcpy(name, data, len - 1);
    name[len - 1] = 0;
    free(data);
    if (strlen(name) != len - 1 || bkv_parse_file_name(name, manifest) != BKV_FILE_MANIFEST)
        return bkv_fail(e, BKV_CORRUPTION, "%s: does not name a manifest (offset 0)", path);
    return BKV_OK;
}

int bkv_vset_recover(bkv_db *db, bkv_manifest_found *found, bkv_err *e) {
    uint64_t number;
    int rc = bkv_read_current(db->env, db->path, &number, e);
    return rc ? rc : bkv_vset_replay(db, number, found, e);
}

int bkv_vset_replay(bkv_db *db, uint64_t number, bkv_manifest_found *found, bkv_err *e) {
    memset(found, 0, sizeof *found);
    char path[BKV_PATH_MAX];
    uint8_t *data;
    size_t len;
    bkv_manifest_name(path, db->path, number);
    int rc = bkv_env_read_all(db->env, path, &data, &len, e);
    if (rc) return rc;

    bkv_log_reader r;
    bkv_log_reader_init(&r, path, data, len, 1);
    bkv_tree_version *v = bkv_tree_version_new();
    int have_next = 0, have_log = 0, have_seq = 0;
    if (!v) rc = bkv_fail(e, BKV_NOMEM, "out of memory");
    while (rc == BKV_OK && (rc = bkv_log_read_record(&r, e)) == BKV_OK) {
        bkv_version_edit ed;
        rc = bkv_edit_decode(&ed, r.record.data, r.record.len, path, r.record_offset, e);
        if (rc) break;
        if (ed.has_log_number) found->log_number = ed.log_number, have_log = 1;
        if (ed.has_next_file) db->vset.next_file = ed.next_file, have_next = 1;
        if (ed.has_last_sequence) db->last_sequence = ed.last_sequence, have_seq = 1;
        if (ed.has_value_index) found->value_index = ed.value_index, found->has_value_index = 1;
        if (ed.wal_marks) found->wal_marks = 1;
        bkv_tree_version *nv;
        rc = bkv_tree_version_apply(v, &ed, &nv);
        bkv_edit_free(&ed);
        if (rc == BKV_CORRUPTION)
            bkv_fail(e, rc, "%s: the record at offset %llu leaves two tables of one level overlapping", path,
                     (unsigned long long)r.record_offset);
        if (rc) break;
        bkv_tree_version_unref(v);
        v = nv;
    }
    if (rc == BKV_NOTFOUND) rc = BKV_OK;
    uint64_t dropped = r.dropped_bytes, dropped_at = len - dropped;
    bkv_log_reader_free(&r);
    free(data);
    /* A damaged last record is dropped like a torn write only if it can
     * have been one: an edit is committed (and the WAL it retires deleted)
     * only after its sync returned, so while the WAL named by the surviving
     * log number is still there, nothing committed is being dropped. */
    if (rc == BKV_OK && dropped && have_log) {
        char log[BKV_PATH_MAX];
        bkv_wal_name(log, db->path, found->log_number);
        if (!db->env->file_exists(db->env, log))
            rc = bkv_fail(e, BKV_CORRUPTION, "%s: damaged record at offset %llu was committed (%06llu.log is gone)",
                          path, (unsigned long long)dropped_at, (unsigned long long)found->log_number);
    }
    if (rc == BKV_OK && !(have_next && have_log && have_seq))
        rc = bkv_fail(e, BKV_CORRUPTION, "%s: manifest lacks its log number, next file or sequence (offset 0)", path);
    if (rc) {
        bkv_tree_version_unref(v);
        return rc;
    }
    db->vset.manifest_number = number;
    bkv_tree_version_unref(db->vset.current);
    db->vset.current = v;
    return BKV_OK;
}

int bkv_vset_write_snapshot(const bkv_db *db, const char *dir, const bkv_tree_version *v, uint64_t manifest_number,
                            const bkv_value_index_rec *vrec, uint64_t log_number, uint64_t next_file,
                            uint64_t last_sequence, bkv_wfile **keep, bkv_log_writer *lw, bkv_err *e) {
    char path[BKV_PATH_MAX];
    bkv_manifest_name(path, dir, manifest_number);
    bkv_wfile *f;
    int rc = db->env->new_writable(db->env, path, db->opts.file_mode, &f, e);
    if (rc) return rc;
    bkv_log_writer_init(lw, f);
    bkv_version_edit edit;
    bkv_edit_init(&edit);
    edit.has_log_number = edit.has_next_file = edit.has_last_sequence = 1;
    edit.log_number = log_number;
    edit.next_file = next_file;
    edit.last_sequence = last_sequence;
    edit.has_value_index = vrec != NULL;
    if (vrec) edit.value_index = *vrec;
    edit.wal_marks = 1; /* every WAL written from now on follows log_sync.c */
    bkv_buf rec;
    bkv_buf_init(&rec);
    rc = bkv_tree_version_snapshot_edit(v, &edit);
    if (!rc) {
        rc = bkv_edit_encode(&edit, &rec) ? bkv_fail(e, BKV_NOMEM, "out of memory encoding the manifest")
                                          : bkv_log_add_record(lw, rec.data, rec.len, e);
    }
    if (!rc) rc = bkv_file_sync(f, e);
    bkv_buf_free(&rec);
    bkv_edit_free(&edit);
    if (!rc) {
        char current[BKV_PATH_MAX], content[64];
        bkv_current_name(current, dir);
        int n = snprintf(content, sizeof content, "MANIFEST-%06llu\n", (unsigned long long)manifest_number);
        rc = bkv_env_write_atomic(db->env, dir, current, db->opts.file_mode, content, (size_t)n, e);
    }
    if (rc || !keep) {
        int crc = bkv_file_close(f, rc ? NULL : e);
        if (!rc) rc = crc;
    } else {
        *keep = f;
    }
    return rc;
}

int bkv_vset_write_manifest(bkv_db *db, uint64_t log_number, const bkv_value_index_rec *vrec, bkv_err *e) {
    uint64_t number = db->vset.next_file++;
    bkv_wfile *f;
    bkv_log_writer lw;
    int rc = bkv_vset_write_snapshot(db, db->path, db->vset.current, number, vrec, log_number, db->vset.next_file,
                                     db->last_sequence, &f, &lw, e);
    if (rc) return rc;
    db->vset.manifest = f;
    db->vset.manifest_log = lw;
    db->vset.manifest_number = number;
    /* As a replay of the new manifest would read it (nothing else holds
     * the version yet: this runs at open). */
    db->vset.current->log_number = log_number;
    return BKV_OK;
}

/* The append and sync run without the mutex (each took milliseconds, and
 * writers need the mutex twice a write group); edits still go to the
 * manifest one at a time, in the order their versions are installed, and
 * each is applied to the version that is current when it is its turn. */
int bkv_vset_log_and_apply(bkv_db *db, bkv_version_edit *edit, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    while (db->vset.manifest_busy) bkv_db_wait(db, &db->bg_cv);
    /* A failed append may have left a partial record: nothing more may be
     * appended after it. */
    if (db->bg_error) return bkv_db_bg_status(db, e);
    edit->has_next_file = edit->has_last_sequence = 1;
    edit->next_file = db->vset.next_file;
    edit->last_sequence = db->last_sequence;
    bkv_tree_version *nv;
    int rc = bkv_tree_version_apply(db->vset.current, edit, &nv);
    if (rc == BKV_CORRUPTION) return bkv_fail(e, rc, "a version edit would leave two tables of one level overlapping");
    if (rc) return bkv_fail(e, rc, "out of memory applying a version edit");
    bkv_buf rec;
    bkv_buf_init(&rec);
    if (bkv_edit_encode(edit, &rec)) {
        bkv_buf_free(&rec);
        bkv_tree_version_unref(nv);
        return bkv_fail(e, BKV_NOMEM, "out of memory encoding a version edit");
    }
    db->vset.manifest_busy = 1;
    const bkv_tree_version *base = db->vset.current;
    bkv_db_unlock(db);
    rc = bkv_log_add_record(&db->vset.manifest_log, rec.data, rec.len, e);
    if (!rc) rc = bkv_file_sync(db->vset.manifest, e);
    bkv_buf_free(&rec);
    bkv_db_lock(db);
    db->vset.manifest_busy = 0;
    pthread_cond_broadcast(&db->bg_cv);
    /* nv was made from base: had current moved meanwhile (manifest_busy
     * is what keeps it still), installing nv would drop that change, so
     * the database stops taking writes instead. */
    if (!rc && BKV_NEVER(db->vset.current != base))
        rc = bkv_internal_error(e, "the version changed while its edit was being logged");
    if (rc) {
        bkv_tree_version_unref(nv);
        return bkv_db_set_bg_error(db, rc, e);
    }
    bkv_tree_version_unref(db->vset.current);
    db->vset.current = nv;
    return BKV_OK;
}


int bkv_vset_init(bkv_version_set *vs) {
    memset(vs, 0, sizeof *vs);
    vs->next_file = 2;
    return (vs->current = bkv_tree_version_new()) ? BKV_OK : BKV_NOMEM;
}

void bkv_vset_free(bkv_version_set *vs) {
    if (vs->manifest) bkv_file_close(vs->manifest, NULL);
    vs->manifest = NULL;
    bkv_tree_version_unref(vs->current);
    vs->current = NULL;
}

int bkv_vset_apply_unlogged(bkv_version_set *vs, const bkv_version_edit *edit) {
    bkv_tree_version *nv;
    int rc = bkv_tree_version_apply(vs->current, edit, &nv);
    if (rc) return rc;
    bkv_tree_version_unref(vs->current);
    vs->current = nv;
    return BKV_OK;
}

bkv_tree_version *bkv_vset_swap(bkv_version_set *vs, bkv_tree_version *v) {
    bkv_tree_version *old = vs->current;
    vs->current = v;
    return old;
}
