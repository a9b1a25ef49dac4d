/*
 * The compaction picker: which tables to compact next (leveled or tiered).
 * It sees a version and the options only, so it is tested on its own
 * (tests/db/compaction_pick_test.c).
 *
 * Leveled: level 0 is compacted into level 1 once it holds
 * level0_compaction_trigger tables; a deeper level n once its bytes exceed
 * its target (max_bytes_for_level_base * multiplier^(n-1)). Within a level
 * the file to compact is chosen round robin (after the last key compacted
 * there). A file with no overlap below, and overlapping at most
 * BKV_MAX_GRANDPARENT_OVERLAP target files two levels down, is moved down
 * without rewriting. When no level is over its target, a table that reads
 * have paid to look past (bkv_tree_version_charge_seeks) is compacted into
 * the level below, as LevelDB does: with no writes the tree would
 * otherwise keep its upper runs, which every read pays for.
 *
 * Tiered: every table is a sorted run in level 0, newest first. Everything
 * is merged when the newer runs together exceed
 * tiered_max_size_amplification percent of the oldest; otherwise, from
 * the newest run, the longest window of runs each not larger than
 * (100 + tiered_size_ratio)% of the runs before it in the window is merged;
 * failing that, the newest runs are merged to bring the count under the
 * trigger.
 *
 */
#include <stdlib.h>
#include <string.h>

#include "db/compaction.h"
#include "util/ikey.h"

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
    for (int l = BKV_MAX_LEVELS - 1; l >= 1 && !last; l--)
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

void bkv_compaction_free(bkv_compaction *c) {
    if (!c) return;
    for (int w = 0; w < 2; w++) {
        for (size_t i = 0; c->claimed && i < c->ninputs[w]; i++) bkv_file_meta_unref(c->inputs[w][i]);
        free(c->inputs[w]);
    }
    free(c->grandparents);
    bkv_tree_version_unref(c->version);
    free(c);
}

static bkv_compaction *new_compaction(bkv_tree_version *v, int level, int output_level) {
    bkv_compaction *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->level = level;
    c->output_level = output_level;
    c->version = v;
    atomic_fetch_add_explicit(&c->version->refs, 1, memory_order_relaxed);
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

/* Given inputs[0], adds the files of the output level they overlap (unless
 * the level is rewritten in place) and the grandparents the output is cut
 * against. -1 when out of memory or when an added input is busy. */
static int add_outputs_inputs(const bkv_tree_version *v, bkv_compaction *c) {
    const uint8_t *lo, *hi;
    size_t lol, hil;
    key_range(c->inputs[0], c->ninputs[0], &lo, &lol, &hi, &hil);
    if (c->output_level != c->level) {
        if (overlapping(v, c->output_level, lo, lol, hi, hil, &c->inputs[1], &c->ninputs[1])) return -1;
        if (any_busy(c->inputs[1], c->ninputs[1])) return -1;
        /* The whole range, for the grandparents. */
        bkv_file_meta **all = malloc((c->ninputs[0] + c->ninputs[1]) * sizeof *all);
        if (!all) return -1;
        memcpy(all, c->inputs[0], c->ninputs[0] * sizeof *all);
        if (c->ninputs[1]) memcpy(all + c->ninputs[0], c->inputs[1], c->ninputs[1] * sizeof *all);
        key_range(all, c->ninputs[0] + c->ninputs[1], &lo, &lol, &hi, &hil);
        free(all);
    }
    int gp = c->output_level + 1;
    if (gp < BKV_MAX_LEVELS && overlapping(v, gp, lo, lol, hi, hil, &c->grandparents, &c->ngrand)) return -1;
    return 0;
}

/* Level 0's oldest table and every table of level 0 overlapping what is
 * taken so far: all versions of a key in level 0 go down together, since
 * an older one left above would shadow a newer one moved below. Random
 * writes take every table; sequential ones take one, which then moves
 * down without a rewrite. */
static int level0_inputs(const bkv_tree_version *v, bkv_compaction *c) {
    size_t n = v->nfiles[0];
    bkv_file_meta **in = malloc(n * sizeof *in);
    char *taken = calloc(n, 1);
    if (!in || !taken) {
        free(in);
        free(taken);
        return -1;
    }
    in[0] = v->files[0][n - 1]; /* newest first: the last is the oldest */
    taken[n - 1] = 1;
    size_t k = 1;
    for (int grew = 1; grew;) {
        grew = 0;
        const uint8_t *lo, *hi;
        size_t lol, hil;
        key_range(in, k, &lo, &lol, &hi, &hil);
        for (size_t i = 0; i < n; i++) {
            if (taken[i]) continue;
            size_t sl, ll;
            const uint8_t *s = ukey(v->files[0][i]->smallest, v->files[0][i]->smallest_len, &sl);
            const uint8_t *l = ukey(v->files[0][i]->largest, v->files[0][i]->largest_len, &ll);
            if (bkv_user_key_compare(l, ll, lo, lol) < 0 || bkv_user_key_compare(s, sl, hi, hil) > 0) continue;
            taken[i] = 1;
            in[k++] = v->files[0][i];
            grew = 1;
        }
    }
    free(taken);
    c->inputs[0] = in;
    c->ninputs[0] = k;
    return 0;
}

/* The level of a table of v, or -1. */
static int level_of(const bkv_tree_version *v, const bkv_file_meta *f) {
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < v->nfiles[l]; i++)
            if (v->files[l][i] == f) return l;
    return -1;
}

/* A table moved down whole keeps its filters: only where the two levels
 * ask for the same ones. */
static int same_filter_policy(const bkv_options *o, int a, int b) {
    return bkv_level_filter_type(o, a) == bkv_level_filter_type(o, b) &&
           bkv_level_bits_per_key(o, a) == bkv_level_bits_per_key(o, b) &&
           bkv_level_range_filter_bits(o, a) == bkv_level_range_filter_bits(o, b);
}

/* A table not being compacted that holds entries a range deletion every
 * reader sees may cover, and its level; NULL when none does. */
static bkv_file_meta *range_deleted_table(const bkv_tree_version *v, uint64_t oldest_snapshot, int *level) {
    for (size_t t = 0; t < v->ntombstones; t++) {
        if (v->tombstones[t]->seq > oldest_snapshot) continue;
        for (int l = 0; l < BKV_MAX_LEVELS; l++)
            for (size_t i = 0; i < v->nfiles[l]; i++)
                if (!v->files[l][i]->being_compacted && bkv_range_tombstone_may_cover(v->tombstones[t], v->files[l][i])) {
                    *level = l;
                    return v->files[l][i];
                }
    }
    return NULL;
}

/* A compaction of level into the next level (or, in_place, into itself),
 * or NULL when none can be had. With sought, of that table; else of the
 * level's next table in round robin (the first past where the level last
 * stopped) whose tables below are not in another compaction. Level 0
 * takes every table it overlaps. */
static bkv_compaction *pick_at(const bkv_options *o, bkv_tree_version *v, bkv_buf *compact_pointer, int level,
                               bkv_file_meta *sought, int covered, int in_place) {
    if ((level == BKV_MAX_LEVELS - 1 && !in_place) || (level == 0 && any_busy(v->files[0], v->nfiles[0])))
        return NULL;
    size_t n = v->nfiles[level], first = 0;
    const bkv_buf *ptr = &compact_pointer[level];
    if (level > 0 && !sought && ptr->len)
        while (first < n && bkv_ikey_compare(v->files[level][first]->largest, v->files[level][first]->largest_len,
                                             ptr->data, ptr->len) <= 0)
            first++;
    size_t tries = level == 0 || sought ? 1 : n;
    for (size_t t = 0; t < tries; t++) {
        bkv_file_meta *pick = level == 0 ? NULL : sought ? sought : v->files[level][(first + t) % n];
        if (pick && pick->being_compacted) continue;
        bkv_compaction *c = new_compaction(v, level, in_place ? level : level + 1);
        if (!c) return NULL;
        c->for_seeks = sought != NULL && !covered;
        c->for_range_deletion = covered;
        int failed = level == 0 ? level0_inputs(v, c) : !(c->inputs[0] = malloc(sizeof *c->inputs[0]));
        if (!failed && pick) {
            c->inputs[0][0] = pick;
            c->ninputs[0] = 1;
        }
        if (failed || add_outputs_inputs(v, c)) {
            bkv_compaction_free(c); /* out of memory, or a table below is busy: the next table may do */
            continue;
        }
        uint64_t gp_bytes = 0;
        for (size_t i = 0; i < c->ngrand; i++) gp_bytes += c->grandparents[i]->size;
        c->trivial_move = c->ninputs[0] == 1 && c->ninputs[1] == 0 && !c->for_range_deletion &&
                          gp_bytes <= BKV_MAX_GRANDPARENT_OVERLAP * o->target_file_size &&
                          same_filter_policy(o, c->level, c->output_level);
        if (level > 0 && !sought) {
            /* Out of memory, the pointer is left empty: the next pick starts
             * the level over, which is only a worse choice, not a wrong one. */
            if (bkv_buf_set(&compact_pointer[level], pick->largest, pick->largest_len))
                bkv_buf_clear(&compact_pointer[level]);
        }
        claim(c);
        return c;
    }
    return NULL;
}

/* The level most over its size that can be compacted now, trying the
 * others in order of how far over they are when a running compaction
 * holds the tables one would take (compactions run side by side:
 * background.c). With no level over its size, a table reads have paid
 * for; then one holding entries a range deletion every reader sees
 * covers (rewritten in place at the last level). */
static bkv_compaction *pick_leveled(const bkv_options *o, bkv_tree_version *v, bkv_buf *compact_pointer,
                                    uint64_t oldest_snapshot) {
    double score[BKV_MAX_LEVELS - 1];
    int over = 0;
    for (int l = 0; l < BKV_MAX_LEVELS - 1; l++) {
        score[l] = l == 0 ? (double)v->nfiles[0] / o->level0_compaction_trigger
                          : (double)level_bytes(v, l) / level_target(o, v, l);
        if (l == 0 && any_busy(v->files[0], v->nfiles[0])) score[0] = 0; /* being compacted already */
        if (score[l] >= 1.0) over = 1;
    }
    for (;;) {
        int best = -1;
        for (int l = 0; l < BKV_MAX_LEVELS - 1; l++)
            if (score[l] >= 1.0 && (best < 0 || score[l] >= score[best])) best = l; /* ties: the deeper */
        if (best < 0) break;
        bkv_compaction *c = pick_at(o, v, compact_pointer, best, NULL, 0, 0);
        if (c) return c;
        score[best] = 0; /* tried */
    }
    if (over) return NULL; /* what is over its size waits for the compactions running */
    bkv_file_meta *sought = atomic_load_explicit(&v->seek_compact, memory_order_acquire);
    if (sought && !sought->being_compacted) {
        int level = level_of(v, sought);
        if (level >= 0) return pick_at(o, v, compact_pointer, level, sought, 0, 0);
    }
    int level;
    bkv_file_meta *covered = range_deleted_table(v, oldest_snapshot, &level);
    return covered ? pick_at(o, v, compact_pointer, level, covered, 1, level == BKV_MAX_LEVELS - 1) : NULL;
}

static bkv_compaction *pick_tiered(const bkv_options *o, bkv_tree_version *v) {
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
    bkv_compaction *c = new_compaction(v, 0, 0);
    if (!c || !(c->inputs[0] = malloc(len * sizeof *c->inputs[0]))) {
        bkv_compaction_free(c);
        return NULL;
    }
    memcpy(c->inputs[0], runs + start, len * sizeof *c->inputs[0]);
    c->ninputs[0] = len;
    c->tiered_bottommost = start + len == n;
    claim(c);
    return c;
}

bkv_compaction *bkv_compaction_pick(const bkv_options *o, bkv_tree_version *v, bkv_buf *compact_pointer,
                                    uint64_t oldest_snapshot) {
    return o->compaction_style == BKV_COMPACTION_TIERED ? pick_tiered(o, v)
                                                         : pick_leveled(o, v, compact_pointer, oldest_snapshot);
}


bkv_compaction *bkv_compaction_manual(const bkv_options *o, bkv_tree_version *v, int level, int output_level,
                                      const uint8_t *lo, size_t lol, const uint8_t *hi, size_t hil, int *busy) {
    *busy = 0;
    size_t n = v->nfiles[level];
    if (n == 0) return NULL;
    /* Unbounded ends: the level's own first and last keys. */
    const uint8_t *flo, *fhi;
    size_t flol, fhil;
    key_range(v->files[level], n, &flo, &flol, &fhi, &fhil);
    if (!lo) lo = flo, lol = flol;
    if (!hi) hi = fhi, hil = fhil;
    bkv_compaction *c = new_compaction(v, level, output_level);
    if (!c) return NULL;
    if (overlapping(v, level, lo, lol, hi, hil, &c->inputs[0], &c->ninputs[0])) c->ninputs[0] = 0;
    /* Tiered runs are merged whole; level-0 tables overlap one another, so
     * once one is in the range all go (as in an automatic level-0
     * compaction). Deeper, only the tables in the range. */
    int tiered = o->compaction_style == BKV_COMPACTION_TIERED;
    if (tiered || (level == 0 && c->ninputs[0])) {
        free(c->inputs[0]);
        c->inputs[0] = malloc(n * sizeof *c->inputs[0]);
        if (c->inputs[0]) memcpy(c->inputs[0], v->files[level], n * sizeof *c->inputs[0]);
        c->ninputs[0] = c->inputs[0] ? n : 0;
    }
    if (c->ninputs[0] == 0) goto none;
    if (any_busy(c->inputs[0], c->ninputs[0])) {
        *busy = 1;
        goto none;
    }
    if (tiered) {
        c->tiered_bottommost = 1;
    } else if (add_outputs_inputs(v, c)) {
        *busy = any_busy(c->inputs[1], c->ninputs[1]);
        goto none;
    }
    claim(c);
    return c;
none:
    bkv_compaction_free(c);
    return NULL;
}
