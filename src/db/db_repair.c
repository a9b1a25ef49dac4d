/*
 * Salvage during bkv_repair's open (repair.h). Nothing here runs in an
 * ordinary open: db->repair is set only by bkv_repair.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/repair.h"
#include "db/table_file.h"
#include "db/version.h"
#include "util/ikey.h"

#define LOST_DIR "lost"

void bkv_repair_state_free(bkv_repair_state *r) {
    free(r->report);
    free(r->aside);
    memset(r, 0, sizeof *r);
}

void bkv_repair_note(bkv_repair_state *r, const char *fmt, ...) {
    char line[BKV_ERR_LEN + 128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = strlen(line), sep = r->report_len ? 2 : 0;
    char *grown = realloc(r->report, r->report_len + sep + len + 1);
    if (!grown) {
        r->failed_note = 1;
        return;
    }
    r->report = grown;
    memcpy(r->report + r->report_len, "; ", sep);
    memcpy(r->report + r->report_len + sep, line, len + 1);
    r->report_len += sep + len;
}

/* DB/lost/NAME, or NAME.1, NAME.2 ... when an earlier repair left one. */
static int lost_name(bkv_db *db, const char *name, char *out, size_t cap, bkv_err *e) {
    char dir[BKV_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/" LOST_DIR, db->path);
    int rc = db->env->create_dir(db->env, dir, bkv_dir_mode(db->opts.file_mode), 0, e);
    if (rc) return rc;
    for (int i = 0; i < 1000; i++) {
        int n = i ? snprintf(out, cap, "%s/%s.%d", dir, name, i) : snprintf(out, cap, "%s/%s", dir, name);
        if (n < 0 || (size_t)n >= cap) return bkv_fail(e, BKV_INVALID, "%s: path too long", dir);
        if (!db->env->file_exists(db->env, out)) return BKV_OK;
    }
    return bkv_fail(e, BKV_IOERROR, "%s: 1000 earlier copies of %s: clear it out", dir, name);
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int bkv_repair_keep_log(bkv_db *db, const char *path, uint64_t damage_offset, uint64_t skipped_bytes, bkv_err *e) {
    char to[BKV_PATH_MAX];
    int rc = lost_name(db, base_name(path), to, sizeof to, e);
    if (!rc) rc = bkv_env_copy_file(db->env, path, to, db->opts.file_mode, e);
    if (!rc)
        bkv_repair_note(db->repair, "%s: %llu damaged bytes from offset %llu skipped, the records around them kept "
                        "(original in " LOST_DIR "/%s)", base_name(path), (unsigned long long)skipped_bytes,
                        (unsigned long long)damage_offset, base_name(to));
    return rc;
}

/* The first problem bkv_check finds in a table, for the report. */
static void first_problem(void *arg, const char *problem) {
    char *first = arg;
    if (!*first) snprintf(first, BKV_ERR_LEN, "%s", problem);
}

/* What a rewrite kept: entries in strictly increasing order (a block
 * whose checksum holds but whose keys do not follow the last kept one
 * is dropped entry by entry, never handed to the builder). */
typedef struct salvage {
    bkv_table_file tf;
    int opened;
    bkv_buf last;
    uint64_t kept, dropped_out_of_order;
    bkv_err err;
    int rc;
} salvage;

static int salvage_entry(void *arg, const uint8_t *ikey, size_t ilen, const uint8_t *val, size_t vlen) {
    salvage *s = arg;
    if (ilen < BKV_IKEY_TRAILER || (s->last.len && bkv_ikey_compare(s->last.data, s->last.len, ikey, ilen) >= 0)) {
        s->dropped_out_of_order++;
        return 0;
    }
    if ((s->rc = bkv_buf_set(&s->last, ikey, ilen))) return s->rc = bkv_fail(&s->err, BKV_NOMEM, "out of memory");
    if ((s->rc = bkv_table_file_add(&s->tf, ikey, ilen, val, vlen, &s->err))) return s->rc;
    s->kept++;
    return 0;
}

static int add_aside(bkv_repair_state *r, uint64_t number) {
    if (r->naside == r->cap_aside) {
        size_t cap = r->cap_aside ? 2 * r->cap_aside : 8;
        uint64_t *grown = realloc(r->aside, cap * sizeof *grown);
        if (!grown) return BKV_NOMEM;
        r->aside = grown;
        r->cap_aside = cap;
    }
    r->aside[r->naside++] = number;
    return BKV_OK;
}

/* Rewrites table f of level from its intact blocks into a new table
 * (*out; NULL when nothing could be read). */
static int rewrite_table(bkv_db *db, int level, int bottommost, const bkv_file_meta *f, const char *path,
                         const char *why, bkv_file_meta **out, bkv_err *e) {
    *out = NULL;
    bkv_table *t;
    bkv_err open_err = {{0}};
    if (bkv_table_open(db->env, path, f->number, NULL, NULL, &t, &open_err)) {
        bkv_repair_note(db->repair, "%s: unreadable (%s): its %llu entries are lost", base_name(path), open_err.msg,
                        (unsigned long long)f->entries);
        return BKV_OK;
    }
    if (f->global_seq) bkv_table_set_global_seq(t, f->global_seq);
    salvage s = {0};
    bkv_buf_init(&s.last);
    uint64_t blocks = bkv_table_properties(t)->num_data_blocks, bad_blocks = 0;
    int rc = bkv_table_file_open(db, bkv_vset_new_file_number(&db->vset), level, bottommost, -1, &s.tf, e);
    s.opened = !rc;
    char first_bad[BKV_ERR_LEN] = "";
    /* Block by block: a damaged block costs its own entries only. */
    for (uint64_t i = 0; !rc && i < blocks && i <= UINT32_MAX; i++) {
        bkv_err block_err = {{0}};
        int brc = bkv_table_scan_blocks(t, (uint32_t)i, (uint32_t)i, BKV_READ_VERIFY_ALL, NULL, salvage_entry, &s,
                                        &block_err);
        if (s.rc) rc = bkv_fail(e, s.rc, "%s", s.err.msg);
        else if (brc == BKV_NOMEM) rc = bkv_fail(e, brc, "out of memory");
        else if (brc) {
            bad_blocks++;
            if (!*first_bad) snprintf(first_bad, sizeof first_bad, "%s", block_err.msg);
        }
    }
    bkv_table_close(t);
    bkv_buf_free(&s.last);
    if (!rc && s.kept) {
        rc = bkv_table_file_finish(&s.tf, out, e);
    } else if (s.opened) {
        bkv_table_file_abandon(&s.tf);
    }
    if (rc) return rc;
    uint64_t lost = f->entries > s.kept ? f->entries - s.kept : 0;
    if (bad_blocks || s.dropped_out_of_order || lost)
        bkv_repair_note(db->repair, "%s: %llu of %llu data blocks damaged (%s); %llu entries kept in %s, %llu lost",
                        base_name(path), (unsigned long long)bad_blocks, (unsigned long long)blocks,
                        *first_bad ? first_bad : why, (unsigned long long)s.kept,
                        *out ? base_name(s.tf.path) : "no table", (unsigned long long)lost);
    else
        bkv_repair_note(db->repair, "%s: rebuilt as %s with all %llu entries (%s)", base_name(path),
                        base_name(s.tf.path), (unsigned long long)s.kept, why);
    return BKV_OK;
}

int bkv_repair_tables(bkv_db *db, bkv_err *e) {
    bkv_version_edit edit;
    bkv_edit_init(&edit);
    int rc = BKV_OK, whole_values = bkv_db_value_rec(db) && bkv_db_value_rec(db)->terms_name[0] == 0;
    int deepest = -1;
    const bkv_tree_version *v = bkv_vset_current(&db->vset);
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        if (v->nfiles[l]) deepest = l;
    for (int l = 0; !rc && l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; !rc && i < v->nfiles[l]; i++) {
            const bkv_file_meta *f = v->files[l][i];
            char path[BKV_PATH_MAX], why[BKV_ERR_LEN] = "";
            bkv_table_name(path, db->path, f->number);
            if (!db->env->file_exists(db->env, path)) {
                bkv_repair_note(db->repair, "%s: missing, but the manifest listed it at level %d: its %llu entries "
                                "are lost", base_name(path), l, (unsigned long long)f->entries);
                rc = bkv_edit_delete_file(&edit, l, f->number);
                continue;
            }
            if (bkv_check_one_table(path, f->number, whole_values, first_problem, why) == 0) continue;
            bkv_file_meta *nf;
            rc = rewrite_table(db, l, l == deepest, f, path, why, &nf, e);
            if (!rc) rc = bkv_edit_delete_file(&edit, l, f->number);
            if (!rc && nf) rc = bkv_edit_add_file(&edit, l, nf);
            if (nf) bkv_file_meta_unref(nf);
            if (!rc) rc = add_aside(db->repair, f->number);
            if (rc == BKV_NOMEM) bkv_fail(e, rc, "out of memory");
        }
    if (!rc && (edit.nadded || edit.ndeleted)) {
        /* The new tables' names are durable before a manifest names them. */
        if (edit.nadded) rc = db->env->sync_dir(db->env, db->path, e);
        if (!rc && (rc = bkv_vset_apply_unlogged(&db->vset, &edit)) == BKV_CORRUPTION)
            bkv_fail(e, rc, "repair: the rewritten tables do not fit their levels");
    }
    bkv_edit_free(&edit);
    return rc;
}

int bkv_repair_set_aside(bkv_db *db, bkv_err *e) {
    int rc = BKV_OK;
    for (size_t i = 0; !rc && i < db->repair->naside; i++) {
        char from[BKV_PATH_MAX], to[BKV_PATH_MAX];
        bkv_table_name(from, db->path, db->repair->aside[i]);
        rc = lost_name(db, base_name(from), to, sizeof to, e);
        if (!rc) rc = db->env->rename_file(db->env, from, to, e);
    }
    if (!rc && db->repair->naside) {
        char dir[BKV_PATH_MAX];
        snprintf(dir, sizeof dir, "%s/" LOST_DIR, db->path);
        rc = db->env->sync_dir(db->env, dir, e);
        if (!rc) rc = db->env->sync_dir(db->env, db->path, e);
        if (!rc) bkv_repair_note(db->repair, "the damaged originals are in " LOST_DIR "/");
    }
    return rc;
}
