/*
 * Compaction: merging the inputs the picker chose (compaction_picker.c)
 * into new tables, and committing the result.
 *
 * Merging keeps, for every user key, the newest version, plus any older
 * version a live snapshot can still see; a tombstone goes once no snapshot
 * needs it and no older data for its key can exist below the output.
 * Outputs are cut at target_file_size, and earlier when they would overlap
 * more than ten target files of the level below the output (so a later
 * compaction of them stays bounded), always between user keys so that a
 * user key never spans two tables of one level.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "db/compaction.h"
#include "db/filename.h"
#include "db/level_iter.h"
#include "db/scheduler.h"
#include "db/table_file.h"
#include "db/version_set.h"
#include "util/coding.h"
#include "util/ikey.h"
#include "util/iterator.h"


void bkv_db_table_obsolete(void *ctx, uint64_t number) {
    bkv_db *db = ctx;
    bkv_cache_erase_k1(db->table_cache, number);
    char path[BKV_PATH_MAX];
    bkv_table_name(path, db->path, number);
    db->env->remove_file(db->env, path, NULL);
}

bkv_compaction *bkv_pick_compaction(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    bkv_compaction *c =
        bkv_compaction_pick(&db->opts, bkv_vset_current(&db->vset), db->compact_pointer, bkv_db_oldest_snapshot(db));
    if (c) c->smallest_snapshot = bkv_db_oldest_snapshot(db);
    return c;
}

/* No table below the output level may hold this user key. */
static int is_base_level_for_key(const bkv_compaction *c, const uint8_t *k, size_t kl) {
    if (c->output_level == 0) return c->tiered_bottommost;
    for (int l = c->output_level + 1; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < c->version->nfiles[l]; i++) {
            const bkv_file_meta *f = c->version->files[l][i];
            size_t sl, ll;
            const uint8_t *s = f->smallest, *g = f->largest;
            sl = f->smallest_len - BKV_IKEY_TRAILER, ll = f->largest_len - BKV_IKEY_TRAILER;
            if (bkv_user_key_compare(k, kl, s, sl) >= 0 && bkv_user_key_compare(k, kl, g, ll) <= 0) return 0;
        }
    return 1;
}

/* Bottommost: no older data for the output's keys anywhere below, which
 * decides its filter policy. */
static int output_is_bottom(const bkv_compaction *c) {
    if (c->output_level == 0) return c->tiered_bottommost;
    for (int l = c->output_level + 1; l < BKV_MAX_LEVELS; l++)
        if (c->version->nfiles[l]) return 0;
    return 1;
}

/* Starts the next output table. */
static int open_output(bkv_db *db, const bkv_compaction *c, bkv_table_file *out, bkv_err *e) {
    bkv_db_lock(db);
    uint64_t number = bkv_vset_new_file_number(&db->vset);
    bkv_db_unlock(db);
    int bottom = output_is_bottom(c);
    /* The output run holds its level's keys plus those moving in. */
    uint64_t moving = 0;
    for (int w = 0; w < 2; w++)
        if (c->level + w != c->output_level || c->output_level == 0)
            for (size_t i = 0; i < c->ninputs[w]; i++) moving += c->inputs[w][i]->entries;
    double bits = bkv_table_file_budget_bits(db, c->version, c->output_level, moving);
    return bkv_table_file_open(db, number, c->output_level, bottom, bits, out, e);
}

static int finish_output(bkv_db *db, const bkv_compaction *c, bkv_table_file *out, bkv_version_edit *edit, int level,
                         bkv_err *e) {
    bkv_file_meta *f;
    int rc = bkv_table_file_finish(out, &f, e);
    if (rc) return rc;
    /* Every entry a range deletion visible to all readers covered was
     * dropped (merge_range): the table is clean of those. */
    if (c->version->ntombstones) f->clean_seq = c->smallest_snapshot;
    if ((rc = bkv_edit_add_file(edit, level, f))) {
        rc = bkv_fail(e, rc, "out of memory");
        db->env->remove_file(db->env, out->path, NULL);
    } else {
        BKV_COUNT(db, compaction_bytes_written, f->size);
    }
    bkv_file_meta_unref(f);
    return rc;
}

/* A key range of a compaction: user keys from lo (NULL: the first) up to
 * hi (NULL: past the last), merged into tables listed in its own edit. */
typedef struct subcompaction {
    bkv_db *db;
    bkv_compaction *c;
    const uint8_t *lo, *hi;
    size_t lo_len, hi_len;
    bkv_version_edit edit;
    bkv_err e;
    int rc;
} subcompaction;

/* Whether inputs[w] are tables of a level >= 1, disjoint and in key
 * order: the merge then reads them as one input (level_iter.h), so each
 * entry is compared with one current key of that level, not with the
 * current key of each of its tables, and one of its tables is open at a
 * time. */
static int is_sorted_run(const bkv_compaction *c, int w) {
    int level = w == 0 ? c->level : c->output_level;
    if (level < 1 || c->ninputs[w] < 2) return 0;
    for (size_t i = 1; i < c->ninputs[w]; i++) {
        const bkv_file_meta *a = c->inputs[w][i - 1], *b = c->inputs[w][i];
        if (bkv_user_key_compare(a->largest, a->largest_len - BKV_IKEY_TRAILER, b->smallest,
                                 b->smallest_len - BKV_IKEY_TRAILER) >= 0)
            return 0;
    }
    return 1;
}

/* Merges the inputs' keys in [lo, hi) into new tables listed in
 * sub->edit. Runs without db->mu. */
static int merge_range(subcompaction *sub) {
    bkv_db *db = sub->db;
    bkv_compaction *c = sub->c;
    bkv_version_edit *edit = &sub->edit;
    bkv_err *e = &sub->e;
    size_t n = c->ninputs[0] + c->ninputs[1];
    bkv_ikey_iter **children = calloc(n ? n : 1, sizeof *children);
    bkv_cache_entry **tables = calloc(n ? n : 1, sizeof *tables);
    int rc = children && tables ? BKV_OK : bkv_fail(e, BKV_NOMEM, "out of memory");
    size_t nchildren = 0, opened = 0;
    for (int w = 0; w < 2 && !rc; w++) {
        /* Not counted as blocks read: that counter is what reads cost
         * (compaction-bytes-read counts this). */
        if (is_sorted_run(c, w)) {
            children[nchildren] = bkv_level_iter_new(db, c->inputs[w], c->ninputs[w], BKV_READ_BULK, 0, NULL);
            if (!children[nchildren++]) rc = bkv_fail(e, BKV_NOMEM, "out of memory");
            continue;
        }
        for (size_t i = 0; i < c->ninputs[w] && !rc; i++) {
            rc = bkv_db_get_table(db, c->inputs[w][i], &tables[opened], e);
            if (rc) break;
            rc = bkv_table_iter_new(bkv_cache_value(tables[opened++]), BKV_READ_BULK, NULL, &children[nchildren++]);
        }
    }
    bkv_ikey_iter *it = NULL;
    if (!rc) {
        it = bkv_merging_iter_new(children, nchildren);
        children = NULL;
        if (!it) rc = bkv_fail(e, BKV_NOMEM, "out of memory");
    }
    bkv_table_file out = {0};
    bkv_buf current;
    bkv_buf_init(&current);
    int have_current = 0;
    uint64_t last_seq_for_key = UINT64_MAX;
    size_t gp_index = 0;
    uint64_t gp_overlap = 0;
    int seen_key = 0;
    if (it && sub->lo) {
        /* The newest version of lo sorts first among its versions. */
        if (bkv_buf_set(&current, sub->lo, sub->lo_len) ||
            bkv_buf_put_u64(&current, bkv_pack_trailer(BKV_MAX_SEQ, BKV_TYPE_VALUE)))
            rc = bkv_fail(e, BKV_NOMEM, "out of memory in compaction");
        else
            bkv_ikey_iter_seek(it, current.data, current.len);
    } else if (it) {
        bkv_ikey_iter_first(it);
    }
    while (!rc && it && bkv_ikey_iter_valid(it)) {
        if (bkv_sched_stopping(db)) {
            rc = bkv_fail(e, BKV_BUSY, "compaction interrupted by close");
            break;
        }
        size_t kl, vl;
        const uint8_t *k = bkv_ikey_iter_key(it, &kl), *val = bkv_ikey_iter_value(it, &vl);
        if (kl < BKV_IKEY_TRAILER) {
            rc = bkv_fail(e, BKV_CORRUPTION, "compaction met a malformed key");
            break;
        }
        size_t ul = kl - BKV_IKEY_TRAILER;
        bkv_parsed_ikey pk = bkv_ikey_parse(k, kl);
        uint64_t seq = pk.seq;
        unsigned type = pk.type;
        int new_key = !have_current || bkv_user_key_compare(k, ul, current.data, current.len) != 0;
        if (new_key && sub->hi && bkv_user_key_compare(k, ul, sub->hi, sub->hi_len) >= 0) break;
        if (new_key) {
            if (bkv_buf_set(&current, k, ul)) {
                rc = bkv_fail(e, BKV_NOMEM, "out of memory in compaction");
                break;
            }
            have_current = 1;
            last_seq_for_key = UINT64_MAX;
            /* Cut only between user keys. */
            while (gp_index < c->ngrand) {
                const bkv_file_meta *g = c->grandparents[gp_index];
                if (bkv_user_key_compare(k, ul, g->largest, g->largest_len - BKV_IKEY_TRAILER) <= 0) break;
                if (seen_key) gp_overlap += g->size;
                gp_index++;
            }
            seen_key = 1;
            if (out.builder && c->output_level > 0 &&
                (bkv_table_file_size_estimate(&out) >= db->opts.target_file_size ||
                 gp_overlap > BKV_MAX_GRANDPARENT_OVERLAP * db->opts.target_file_size)) {
                rc = finish_output(db, c, &out, edit, c->output_level, e);
                gp_overlap = 0;
                if (rc) break;
            }
        }
        int drop = 0;
        if (last_seq_for_key <= c->smallest_snapshot) drop = 1; /* a newer version every reader sees */
        else if (type == BKV_TYPE_DELETION && seq <= c->smallest_snapshot && is_base_level_for_key(c, k, ul)) drop = 1;
        /* Under a range deletion every reader sees: the older versions
         * below keep the deletion in the version until they go too. */
        else if (bkv_tree_version_covers(c->version, k, ul, seq, c->smallest_snapshot)) drop = 1;
        last_seq_for_key = seq;
        if (!drop) {
            if (!out.builder && (rc = open_output(db, c, &out, e))) break;
            if ((rc = bkv_table_file_add(&out, k, kl, val, vl, e))) break;
        }
        bkv_ikey_iter_next(it);
    }
    if (!rc && it) rc = bkv_ikey_iter_status(it, e);
    if (!rc && out.builder) rc = finish_output(db, c, &out, edit, c->output_level, e);
    bkv_table_file_abandon(&out);
    bkv_buf_free(&current);
    bkv_ikey_iter_destroy(it);
    if (children)
        for (size_t i = 0; i < nchildren; i++) bkv_ikey_iter_destroy(children[i]);
    free(children);
    for (size_t i = 0; i < opened; i++) bkv_cache_release(db->table_cache, tables[i]);
    free(tables);
    return rc;
}

static void *run_subcompaction(void *arg) {
    subcompaction *sub = arg;
    bkv_sched_note_working(sub->db, 1);
    sub->rc = merge_range(sub);
    bkv_sched_note_working(sub->db, -1);
    return NULL;
}

/* How many ranges, and where they meet: at the smallest keys of evenly
 * spaced tables of the output level, which hold disjoint user keys. Too
 * few of them and a range would be mostly one table; level-0 outputs
 * (tiered runs) are not cut. */
#define MIN_TABLES_PER_RANGE 2
static size_t plan_ranges(bkv_db *db, bkv_compaction *c, subcompaction *subs) {
    int want = db->opts.max_subcompactions ? db->opts.max_subcompactions : BKV_DEFAULT_SUBCOMPACTIONS;
    size_t below = c->ninputs[1], n = 1;
    if (c->output_level > 0 && c->level != c->output_level)
        while ((int)n < want && below >= (n + 1) * MIN_TABLES_PER_RANGE) n++;
    for (size_t i = 0; i < n; i++) {
        subs[i] = (subcompaction){.db = db, .c = c};
        bkv_edit_init(&subs[i].edit);
        if (i > 0) {
            const bkv_file_meta *f = c->inputs[1][below * i / n];
            subs[i].lo = f->smallest;
            subs[i].lo_len = f->smallest_len - BKV_IKEY_TRAILER;
            subs[i - 1].hi = subs[i].lo;
            subs[i - 1].hi_len = subs[i].lo_len;
        }
    }
    return n;
}

/* Merges the inputs into new tables listed in edit, each range on its own
 * thread (the caller's runs the first). Runs without db->mu. */
static int merge_inputs(bkv_db *db, bkv_compaction *c, bkv_version_edit *edit, bkv_err *e) {
    subcompaction subs[BKV_MAX_SUBCOMPACTIONS];
    pthread_t helpers[BKV_MAX_SUBCOMPACTIONS];
    int started[BKV_MAX_SUBCOMPACTIONS] = {0};
    size_t n = plan_ranges(db, c, subs);
    /* Once for the compaction: every range opens every input. */
    for (int w = 0; w < 2; w++)
        for (size_t i = 0; i < c->ninputs[w]; i++) BKV_COUNT(db, compaction_bytes_read, c->inputs[w][i]->size);
    if (n > 1) BKV_COUNT(db, subcompactions, n);
    for (size_t i = 1; i < n; i++) started[i] = pthread_create(&helpers[i], NULL, run_subcompaction, &subs[i]) == 0;
    run_subcompaction(&subs[0]);
    int rc = BKV_OK;
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            if (started[i]) pthread_join(helpers[i], NULL);
            else run_subcompaction(&subs[i]); /* no thread to be had: in turn */
        }
        if (subs[i].rc && !rc) {
            rc = subs[i].rc;
            *e = subs[i].e;
        }
        /* Every range's tables join the edit, failed or not: the caller
         * deletes the tables of an edit that is not committed. */
        for (size_t j = 0; j < subs[i].edit.nadded; j++) {
            bkv_new_file *f = &subs[i].edit.added[j];
            if (bkv_edit_add_file(edit, f->level, f->meta)) {
                bkv_db_table_obsolete(db, f->meta->number);
                if (!rc) rc = bkv_fail(e, BKV_NOMEM, "out of memory");
            }
        }
        bkv_edit_free(&subs[i].edit);
    }
    if (!rc && edit->nadded) rc = db->env->sync_dir(db->env, db->path, e);
    return rc;
}

/* A table moved down whole keeps its value summary. One written above
 * the bottom has the cheap kind, which answers "maybe" about four times
 * as often as the bottom's (table_file.c): moved into the bottom level,
 * where most of a search's tables are, it would cost every later search
 * that much more, so it is rewritten instead (once: its rewrite has the
 * bottom's summary). This happens as a database grows a level, when a
 * whole level of tables moves into the one below. REQUIRES: db->mu held
 * (released while the table is opened; the input is claimed). */
static int move_keeps_cheap_summary(bkv_db *db, const bkv_compaction *c) {
    const bkv_value_index_rec *vrec = bkv_db_value_rec(db);
    if (!vrec || vrec->shape != BKV_VALUE_INDEX_PAGED || !output_is_bottom(c)) return 0;
    bkv_db_unlock(db);
    bkv_cache_entry *entry;
    bkv_err e;
    int cheap = 0;
    if (bkv_db_get_table(db, c->inputs[0][0], &entry, &e) == BKV_OK) {
        cheap = bkv_vs_summary_cheap(bkv_cache_value(entry), bkv_db_value_params(db));
        bkv_cache_release(db->table_cache, entry);
    }
    bkv_db_lock(db);
    return cheap;
}

void bkv_run_compaction(bkv_db *db, bkv_compaction *c) {
    BKV_ASSERT_LOCKED(db);
    bkv_version_edit edit;
    bkv_edit_init(&edit);
    bkv_err e = {{0}};
    int rc = BKV_OK;
    int outputs_unrecorded = 1; /* until the edit may have reached the manifest */
    if (c->trivial_move && move_keeps_cheap_summary(db, c)) {
        c->trivial_move = 0;
        BKV_COUNT(db, summary_rewrites, 1);
    }
    if (c->trivial_move) {
        rc = bkv_edit_delete_file(&edit, c->level, c->inputs[0][0]->number);
        if (!rc) rc = bkv_edit_add_file(&edit, c->output_level, c->inputs[0][0]);
        if (rc) bkv_fail(&e, rc, "out of memory");
        else bkv_file_meta_reset_seeks(c->inputs[0][0]);
        BKV_COUNT(db, trivial_moves, 1);
    } else {
        bkv_db_unlock(db);
        rc = merge_inputs(db, c, &edit, &e);
        bkv_db_lock(db);
        for (int w = 0; w < 2 && !rc; w++)
            for (size_t i = 0; i < c->ninputs[w] && !rc; i++)
                rc = bkv_edit_delete_file(&edit, w == 0 ? c->level : c->output_level, c->inputs[w][i]->number);
    }
    if (!rc) {
        /* Marked before the version drops them, so that the last reference
         * to go deletes the file; unmarked if the edit fails. */
        if (!c->trivial_move)
            for (int w = 0; w < 2; w++)
                for (size_t i = 0; i < c->ninputs[w]; i++) {
                    c->inputs[w][i]->owner = &db->owner;
                    c->inputs[w][i]->obsolete = 1;
                }
        outputs_unrecorded = 0;
        rc = bkv_db_commit_edit(db, &edit, !c->trivial_move, &e);
        if (rc)
            for (int w = 0; w < 2; w++)
                for (size_t i = 0; i < c->ninputs[w]; i++) c->inputs[w][i]->obsolete = 0;
    }
    /* A failed compaction stops writes (the database stays readable):
     * its cause, a full disk or damaged input, would fail the next one. */
    if (rc && rc != BKV_BUSY) bkv_db_set_bg_error(db, rc, &e);
    if (rc) {
        /* Outputs written but never recorded can go. Once the edit may have
         * been appended to the manifest (its sync failed, but the bytes may
         * be read at the next open) they must stay: the next open keeps
         * them if the edit is there and deletes them if it is not. */
        for (size_t i = 0; i < edit.nadded; i++)
            if (!c->trivial_move && outputs_unrecorded) bkv_db_table_obsolete(db, edit.added[i].meta->number);
    } else {
        BKV_COUNT(db, compactions, 1);
        if (c->for_seeks) BKV_COUNT(db, seek_compactions, 1);
    }
    for (int w = 0; w < 2; w++)
        for (size_t i = 0; i < c->ninputs[w]; i++) c->inputs[w][i]->being_compacted = 0;
    /* The last references to the inputs may go here, and with them the
     * files: unlinking a few tables took tens of milliseconds, which
     * writers would have spent waiting for the mutex. */
    bkv_db_unlock(db);
    bkv_edit_free(&edit);
    bkv_compaction_free(c);
    bkv_db_lock(db);
}
