/*
 * Compaction: choosing inputs (leveled or tiered) and merging them.
 *
 * Leveled: level 0 is compacted into level 1 once it holds
 * level0_compaction_trigger tables; a deeper level n once its bytes exceed
 * its target (max_bytes_for_level_base * multiplier^(n-1)). Within a level
 * the file to compact is chosen round robin (after the last key compacted
 * there). A file with no overlap below is moved down without rewriting.
 * Outputs are cut at target_file_size, and earlier when they would overlap
 * more than ten target files of the level below the output (so a later
 * compaction of them stays bounded), always between user keys so that a
 * user key never spans two tables of one level.
 *
 * Tiered: every table is a sorted run in level 0, newest first. Everything
 * is merged when the newer runs together exceed
 * tiered_max_size_amplification percent of the oldest; otherwise, from
 * the newest run, the longest window of runs each not larger than
 * (100 + tiered_size_ratio)% of the runs before it in the window is merged;
 * failing that, the newest runs are merged to bring the count under the
 * trigger.
 *
 * Merging keeps, for every user key, the newest version, plus any older
 * version a live snapshot can still see; a tombstone goes once no snapshot
 * needs it and no older data for its key can exist below the output.
 */
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/table_file.h"
#include "db/version_set.h"
#include "util/coding.h"
#include "util/ikey.h"
#include "util/iterator.h"

struct bkv_compaction {
    int level;                     /* inputs[0] level */
    int output_level;
    bkv_file_meta **inputs[2];
    size_t ninputs[2];
    bkv_file_meta **grandparents;  /* level output_level + 1, for cutting */
    size_t ngrand;
    int trivial_move;
    int tiered_bottommost;         /* tiered: the oldest run is an input */
    uint64_t smallest_snapshot;
    bkv_tree_version *version;     /* the version inputs were picked from */
    int claimed;                   /* inputs referenced and marked busy (a pick that gives up has not) */
};

void bkv_db_table_obsolete(void *ctx, uint64_t number) {
    bkv_db *db = ctx;
    bkv_cache_erase_k1(db->table_cache, number);
    char path[BKV_PATH_MAX];
    bkv_table_name(path, db->path, number);
    db->env->remove_file(db->env, path, NULL);
}

bkv_table_options bkv_db_table_options(const bkv_db *db, int level, int bottommost) {
    const bkv_options *o = &db->opts;
    bkv_table_options to = {.block_size = o->block_size, .restart_interval = 16, .filter_type = o->filter_type,
                            .bits_per_key = o->bits_per_key, .compression = o->compression,
                            .prefix_extractor = o->prefix_extractor};
    if (o->filter_type_per_level[level] >= 0) to.filter_type = o->filter_type_per_level[level];
    if (o->bits_per_key_per_level[level] > 0) to.bits_per_key = o->bits_per_key_per_level[level];
    /* Gets that reach the bottom mostly find their key there (the
     * workload has few misses), so its filter would rarely say no. */
    if (o->optimize_filters_for_hits && bottommost) to.filter_type = BKV_FILTER_NONE;
    if (db->has_vrec) {
        to.value_filter = &db->vparams;
        to.value_terms = o->value_terms;
        to.value_terms_arg = o->value_terms_arg;
    }
    return to;
}


static uint64_t level_bytes(const bkv_tree_version *v, int level) {
    uint64_t total = 0;
    for (size_t i = 0; i < v->nfiles[level]; i++) total += v->files[level][i]->size;
    return total;
}

/* Level 1's target. By default (0) as large as a full level 0, so that an
 * L0 -> L1 compaction rewrites about as much of level 1 as it brings in. */
static double level_base(const bkv_options *o) {
    if (o->max_bytes_for_level_base) return (double)o->max_bytes_for_level_base;
    return (double)o->write_buffer_size * o->level0_compaction_trigger;
}

static double static_target(const bkv_options *o, int level) {
    double t = level_base(o);
    for (int l = 1; l < level; l++) t *= o->level_size_multiplier;
    return t;
}

/* Target bytes of level n >= 1. Static targets grow from the top; with
 * dynamic level bytes the levels above the deepest non-empty one are
 * sized from it instead (each a multiplier smaller than the next, never
 * below the base), so the last level holds ~90% of the data and space
 * amplification stays near 1.1 whatever the database size. The deepest
 * level keeps its static target, so the tree grows a level when needed. */
static double level_target(const bkv_options *o, const bkv_tree_version *v, int level) {
    if (!o->level_compaction_dynamic_level_bytes) return static_target(o, level);
    int last = 0;
    for (int l = BKV_NUM_LEVELS - 1; l >= 1 && !last; l--)
        if (v->nfiles[l]) last = l;
    if (level >= last) return static_target(o, level);
    double t = (double)level_bytes(v, last);
    for (int l = level; l < last; l++) t /= o->level_size_multiplier;
    return t > level_base(o) ? t : level_base(o);
}

static const uint8_t *ukey(const uint8_t *ikey, size_t len, size_t *ulen) {
    *ulen = len - BKV_IKEY_TRAILER;
    return ikey;
}

/* Files of level overlapping user keys [lo, hi]. */
static int overlapping(const bkv_tree_version *v, int level, const uint8_t *lo, size_t lol, const uint8_t *hi,
                       size_t hil, bkv_file_meta ***out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (!v->nfiles[level]) return BKV_OK;
    bkv_file_meta **arr = malloc(v->nfiles[level] * sizeof *arr);
    if (!arr) return BKV_NOMEM;
    for (size_t i = 0; i < v->nfiles[level]; i++) {
        bkv_file_meta *f = v->files[level][i];
        size_t sl, ll;
        const uint8_t *s = ukey(f->smallest, f->smallest_len, &sl), *l = ukey(f->largest, f->largest_len, &ll);
        if (bkv_user_key_compare(l, ll, lo, lol) < 0 || bkv_user_key_compare(s, sl, hi, hil) > 0) continue;
        arr[(*n)++] = f;
    }
    *out = arr;
    return BKV_OK;
}

static int any_busy(bkv_file_meta **files, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (files[i]->being_compacted) return 1;
    return 0;
}

/* The user-key range of a set of files. */
static void key_range(bkv_file_meta **files, size_t n, const uint8_t **lo, size_t *lol, const uint8_t **hi,
                      size_t *hil) {
    for (size_t i = 0; i < n; i++) {
        size_t sl, ll;
        const uint8_t *s = ukey(files[i]->smallest, files[i]->smallest_len, &sl);
        const uint8_t *l = ukey(files[i]->largest, files[i]->largest_len, &ll);
        if (i == 0 || bkv_user_key_compare(s, sl, *lo, *lol) < 0) *lo = s, *lol = sl;
        if (i == 0 || bkv_user_key_compare(l, ll, *hi, *hil) > 0) *hi = l, *hil = ll;
    }
}

static void compaction_free(bkv_compaction *c) {
    if (!c) return;
    for (int w = 0; w < 2; w++) {
        for (size_t i = 0; c->claimed && i < c->ninputs[w]; i++) bkv_file_meta_unref(c->inputs[w][i]);
        free(c->inputs[w]);
    }
    free(c->grandparents);
    bkv_tree_version_unref(c->version);
    free(c);
}

static bkv_compaction *new_compaction(bkv_db *db, int level, int output_level) {
    bkv_compaction *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->level = level;
    c->output_level = output_level;
    c->version = db->current;
    __atomic_add_fetch(&c->version->refs, 1, __ATOMIC_RELAXED);
    c->smallest_snapshot = bkv_db_oldest_snapshot(db);
    return c;
}

/* Takes references and marks the inputs busy. */
static void claim(bkv_compaction *c) {
    c->claimed = 1;
    for (int w = 0; w < 2; w++)
        for (size_t i = 0; i < c->ninputs[w]; i++) {
            bkv_file_meta_ref(c->inputs[w][i]);
            c->inputs[w][i]->being_compacted = 1;
        }
}

static bkv_compaction *pick_leveled(bkv_db *db) {
    const bkv_options *o = &db->opts;
    const bkv_tree_version *v = db->current;
    int best = -1;
    double best_score = 1.0;
    for (int l = 0; l < BKV_NUM_LEVELS - 1; l++) {
        double score = l == 0 ? (double)v->nfiles[0] / o->level0_compaction_trigger
                              : (double)level_bytes(v, l) / level_target(o, v, l);
        if (score >= best_score && !(l == 0 && any_busy(v->files[0], v->nfiles[0]))) {
            best = l;
            best_score = score;
        }
    }
    if (best < 0) return NULL;
    bkv_compaction *c = new_compaction(db, best, best + 1);
    if (!c) return NULL;
    if (best == 0) {
        c->inputs[0] = malloc(v->nfiles[0] * sizeof *c->inputs[0]);
        if (!c->inputs[0]) goto none;
        memcpy(c->inputs[0], v->files[0], v->nfiles[0] * sizeof *c->inputs[0]);
        c->ninputs[0] = v->nfiles[0];
    } else {
        /* Round robin: the first file past where this level last stopped. */
        const bkv_buf *ptr = &db->compact_pointer[best];
        bkv_file_meta *pick = NULL;
        for (size_t i = 0; i < v->nfiles[best] && !pick; i++) {
            bkv_file_meta *f = v->files[best][i];
            if (!f->being_compacted &&
                (!ptr->len || bkv_ikey_compare(f->largest, f->largest_len, ptr->data, ptr->len) > 0))
                pick = f;
        }
        for (size_t i = 0; i < v->nfiles[best] && !pick; i++)
            if (!v->files[best][i]->being_compacted) pick = v->files[best][i];
        if (!pick || !(c->inputs[0] = malloc(sizeof *c->inputs[0]))) goto none;
        c->inputs[0][0] = pick;
        c->ninputs[0] = 1;
    }
    const uint8_t *lo, *hi;
    size_t lol, hil;
    key_range(c->inputs[0], c->ninputs[0], &lo, &lol, &hi, &hil);
    if (overlapping(v, best + 1, lo, lol, hi, hil, &c->inputs[1], &c->ninputs[1])) goto none;
    if (any_busy(c->inputs[1], c->ninputs[1])) goto none;
    /* The whole range, for the grandparents. */
    bkv_file_meta **all = malloc((c->ninputs[0] + c->ninputs[1]) * sizeof *all);
    if (!all) goto none;
    memcpy(all, c->inputs[0], c->ninputs[0] * sizeof *all);
    if (c->ninputs[1]) memcpy(all + c->ninputs[0], c->inputs[1], c->ninputs[1] * sizeof *all);
    key_range(all, c->ninputs[0] + c->ninputs[1], &lo, &lol, &hi, &hil);
    free(all);
    if (best + 2 < BKV_NUM_LEVELS && overlapping(v, best + 2, lo, lol, hi, hil, &c->grandparents, &c->ngrand)) goto none;
    uint64_t gp_bytes = 0;
    for (size_t i = 0; i < c->ngrand; i++) gp_bytes += c->grandparents[i]->size;
    c->trivial_move = c->ninputs[0] == 1 && c->ninputs[1] == 0 && gp_bytes <= 10 * o->target_file_size;
    if (best > 0) {
        /* Out of memory, the pointer is left empty: the next pick starts
         * the level over, which is only a worse choice, not a wrong one. */
        bkv_file_meta *f = c->inputs[0][0];
        if (bkv_buf_set(&db->compact_pointer[best], f->largest, f->largest_len)) bkv_buf_clear(&db->compact_pointer[best]);
    }
    claim(c);
    return c;
none:
    compaction_free(c);
    return NULL;
}

static bkv_compaction *pick_tiered(bkv_db *db) {
    const bkv_options *o = &db->opts;
    const bkv_tree_version *v = db->current;
    size_t n = v->nfiles[0];
    if (n < (size_t)o->level0_compaction_trigger || any_busy(v->files[0], n)) return NULL;
    bkv_file_meta **runs = v->files[0]; /* newest first */
    size_t start = 0, len = 0;
    uint64_t newer = 0;
    for (size_t i = 0; i + 1 < n; i++) newer += runs[i]->size;
    if (newer * 100 >= (uint64_t)o->tiered_max_size_amplification * runs[n - 1]->size) {
        len = n;
    } else {
        for (size_t s = 0; s < n && len < 2; s++) {
            uint64_t acc = runs[s]->size;
            size_t j = s + 1;
            while (j < n && runs[j]->size * 100 <= acc * (uint64_t)(100 + o->tiered_size_ratio)) acc += runs[j++]->size;
            if (j - s >= 2) {
                start = s;
                len = j - s;
            }
        }
        if (len < 2) {
            start = 0;
            len = n - (size_t)o->level0_compaction_trigger + 2;
        }
    }
    bkv_compaction *c = new_compaction(db, 0, 0);
    if (!c || !(c->inputs[0] = malloc(len * sizeof *c->inputs[0]))) {
        compaction_free(c);
        return NULL;
    }
    memcpy(c->inputs[0], runs + start, len * sizeof *c->inputs[0]);
    c->ninputs[0] = len;
    c->tiered_bottommost = start + len == n;
    claim(c);
    return c;
}

bkv_compaction *bkv_pick_compaction(bkv_db *db) {
    return db->opts.compaction_style == BKV_COMPACTION_TIERED ? pick_tiered(db) : pick_leveled(db);
}

/* No table below the output level may hold this user key. */
static int is_base_level_for_key(const bkv_compaction *c, const uint8_t *k, size_t kl) {
    if (c->output_level == 0) return c->tiered_bottommost;
    for (int l = c->output_level + 1; l < BKV_NUM_LEVELS; l++)
        for (size_t i = 0; i < c->version->nfiles[l]; i++) {
            const bkv_file_meta *f = c->version->files[l][i];
            size_t sl, ll;
            const uint8_t *s = ukey(f->smallest, f->smallest_len, &sl), *g = ukey(f->largest, f->largest_len, &ll);
            if (bkv_user_key_compare(k, kl, s, sl) >= 0 && bkv_user_key_compare(k, kl, g, ll) <= 0) return 0;
        }
    return 1;
}

/* Starts the next output table. Bottommost: no older data for its keys
 * anywhere below, which decides its filter policy. */
static int open_output(bkv_db *db, const bkv_compaction *c, bkv_table_file *out, bkv_err *e) {
    pthread_mutex_lock(&db->mu);
    uint64_t number = db->next_file++;
    pthread_mutex_unlock(&db->mu);
    int bottom = c->tiered_bottommost;
    if (c->output_level > 0) {
        bottom = 1;
        for (int l = c->output_level + 1; l < BKV_NUM_LEVELS; l++)
            if (c->version->nfiles[l]) bottom = 0;
    }
    return bkv_table_file_open(db, number, c->output_level, bottom, out, e);
}

static int finish_output(bkv_db *db, bkv_table_file *out, bkv_version_edit *edit, int level, bkv_err *e) {
    bkv_file_meta *f;
    int rc = bkv_table_file_finish(out, &f, e);
    if (rc) return rc;
    if ((rc = bkv_edit_add_file(edit, level, f))) {
        rc = bkv_fail(e, rc, "out of memory");
        db->env->remove_file(db->env, out->path, NULL);
    } else {
        atomic_fetch_add_explicit(&db->c.compaction_bytes_written, f->size, memory_order_relaxed);
    }
    bkv_file_meta_unref(f);
    return rc;
}

/* Merges the inputs into new tables listed in edit. Runs without db->mu. */
static int merge_inputs(bkv_db *db, bkv_compaction *c, bkv_version_edit *edit, bkv_err *e) {
    size_t n = c->ninputs[0] + c->ninputs[1];
    bkv_iiter **children = calloc(n ? n : 1, sizeof *children);
    bkv_cache_entry **tables = calloc(n ? n : 1, sizeof *tables);
    int rc = children && tables ? BKV_OK : bkv_fail(e, BKV_NOMEM, "out of memory");
    size_t opened = 0;
    for (int w = 0; w < 2 && !rc; w++)
        for (size_t i = 0; i < c->ninputs[w] && !rc; i++) {
            rc = bkv_db_get_table(db, c->inputs[w][i], &tables[opened], e);
            if (rc) break;
            rc = bkv_table_iter_new(bkv_cache_value(tables[opened]), 0, &db->tstats, &children[opened]);
            opened++;
            atomic_fetch_add_explicit(&db->c.compaction_bytes_read, c->inputs[w][i]->size, memory_order_relaxed);
        }
    bkv_iiter *it = NULL;
    if (!rc) {
        it = bkv_merging_iter_new(children, opened);
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
    if (it) bkv_iiter_first(it);
    while (!rc && it && bkv_iiter_valid(it)) {
        if (__atomic_load_n(&db->shutting_down, __ATOMIC_RELAXED)) {
            rc = bkv_fail(e, BKV_BUSY, "compaction interrupted by close");
            break;
        }
        size_t kl, vl;
        const uint8_t *k = bkv_iiter_key(it, &kl), *val = bkv_iiter_value(it, &vl);
        if (kl < BKV_IKEY_TRAILER) {
            rc = bkv_fail(e, BKV_CORRUPTION, "compaction met a malformed key");
            break;
        }
        size_t ul = kl - BKV_IKEY_TRAILER;
        uint64_t trailer = bkv_ikey_trailer(k, kl), seq = trailer >> 8;
        unsigned type = (unsigned)(trailer & 0xff);
        int new_key = !have_current || bkv_user_key_compare(k, ul, current.data, current.len) != 0;
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
                 gp_overlap > 10 * db->opts.target_file_size)) {
                rc = finish_output(db, &out, edit, c->output_level, e);
                gp_overlap = 0;
                if (rc) break;
            }
        }
        int drop = 0;
        if (last_seq_for_key <= c->smallest_snapshot) drop = 1; /* a newer version every reader sees */
        else if (type == BKV_TYPE_DELETION && seq <= c->smallest_snapshot && is_base_level_for_key(c, k, ul)) drop = 1;
        last_seq_for_key = seq;
        if (!drop) {
            if (!out.builder && (rc = open_output(db, c, &out, e))) break;
            if ((rc = bkv_table_file_add(&out, k, kl, val, vl, e))) break;
        }
        bkv_iiter_next(it);
    }
    if (!rc && it) rc = bkv_iiter_status(it, e);
    if (!rc && out.builder) rc = finish_output(db, &out, edit, c->output_level, e);
    bkv_table_file_abandon(&out);
    bkv_buf_free(&current);
    bkv_iiter_destroy(it);
    if (children)
        for (size_t i = 0; i < opened; i++) bkv_iiter_destroy(children[i]);
    free(children);
    for (size_t i = 0; i < opened; i++) bkv_cache_release(db->table_cache, tables[i]);
    free(tables);
    if (!rc && edit->nadded) rc = db->env->sync_dir(db->env, db->path, e);
    return rc;
}

void bkv_run_compaction(bkv_db *db, bkv_compaction *c) {
    bkv_version_edit edit;
    bkv_edit_init(&edit);
    bkv_err e = {{0}};
    int rc = BKV_OK;
    int outputs_unrecorded = 1; /* until the edit may have reached the manifest */
    if (c->trivial_move) {
        rc = bkv_edit_delete_file(&edit, c->level, c->inputs[0][0]->number);
        if (!rc) rc = bkv_edit_add_file(&edit, c->output_level, c->inputs[0][0]);
        if (rc) bkv_fail(&e, rc, "out of memory");
        atomic_fetch_add_explicit(&db->c.trivial_moves, 1, memory_order_relaxed);
    } else {
        pthread_mutex_unlock(&db->mu);
        rc = merge_inputs(db, c, &edit, &e);
        pthread_mutex_lock(&db->mu);
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
        rc = bkv_vset_commit(db, &edit, !c->trivial_move, &e);
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
        atomic_fetch_add_explicit(&db->c.compactions, 1, memory_order_relaxed);
    }
    for (int w = 0; w < 2; w++)
        for (size_t i = 0; i < c->ninputs[w]; i++) c->inputs[w][i]->being_compacted = 0;
    bkv_edit_free(&edit);
    compaction_free(c);
}
