/* The compaction picker on its own: versions built by hand, the options
 * changed one at a time, the chosen inputs checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "db/compaction.h"
#include "util/ikey.h"

/* A table of size bytes holding user keys lo..hi (one letter each, so
 * ranges read at a glance), its versions sequenced from seq. */
static bkv_file_meta *table(uint64_t number, uint64_t size, char lo, char hi, uint64_t seq) {
    uint8_t s[9], l[9];
    s[0] = (uint8_t)lo;
    l[0] = (uint8_t)hi;
    bkv_put_u64(s + 1, bkv_pack_trailer(seq + 1, BKV_TYPE_VALUE));
    bkv_put_u64(l + 1, bkv_pack_trailer(seq, BKV_TYPE_VALUE));
    bkv_file_meta *f = bkv_file_meta_new(number, size, 10, s, 9, l, 9);
    assert_non_null(f);
    f->smallest_seq = seq;
    f->largest_seq = seq + 1;
    return f;
}

typedef struct fixture {
    bkv_tree_version *v;
    bkv_buf pointers[BKV_MAX_LEVELS];
    bkv_options o;
} fixture;

static void start(fixture *fx) {
    memset(fx, 0, sizeof *fx);
    fx->v = bkv_tree_version_new();
    assert_non_null(fx->v);
    for (int l = 0; l < BKV_MAX_LEVELS; l++) bkv_buf_init(&fx->pointers[l]);
    bkv_options_init(&fx->o);
    fx->o.write_buffer_size = 1000;
    fx->o.level0_compaction_trigger = 4;
    fx->o.max_bytes_for_level_base = 10000;
    fx->o.target_file_size = 1000;
    fx->o.level_compaction_dynamic_level_bytes = 0;
}

/* Applies an edit adding f (whose reference it takes) at level; on
 * success the fixture's version is the new one, on failure unchanged and
 * no version was made. */
static int try_add(fixture *fx, int level, bkv_file_meta *f) {
    bkv_version_edit e;
    bkv_edit_init(&e);
    assert_int_equal(bkv_edit_add_file(&e, level, f), BKV_OK);
    bkv_file_meta_unref(f);
    bkv_tree_version *nv = NULL;
    int rc = bkv_tree_version_apply(fx->v, &e, &nv);
    bkv_edit_free(&e);
    if (rc) {
        assert_null(nv);
        return rc;
    }
    bkv_tree_version_unref(fx->v);
    fx->v = nv;
    return BKV_OK;
}

static void add(fixture *fx, int level, bkv_file_meta *f) { assert_int_equal(try_add(fx, level, f), BKV_OK); }

static void finish(fixture *fx) {
    bkv_tree_version_unref(fx->v);
    for (int l = 0; l < BKV_MAX_LEVELS; l++) bkv_buf_free(&fx->pointers[l]);
}

static bkv_compaction *pick(fixture *fx) { return bkv_compaction_pick(&fx->o, fx->v, fx->pointers, 0); }

static int has_input(const bkv_compaction *c, int which, uint64_t number) {
    for (size_t i = 0; i < c->ninputs[which]; i++)
        if (c->inputs[which][i]->number == number) return 1;
    return 0;
}

/* Releases a pick as a finished compaction would: inputs no longer busy. */
static void done(bkv_compaction *c) {
    for (int w = 0; w < 2; w++)
        for (size_t i = 0; i < c->ninputs[w]; i++) c->inputs[w][i]->being_compacted = 0;
    bkv_compaction_free(c);
}

static void level0_waits_for_its_trigger(void **state) {
    (void)state;
    fixture fx;
    start(&fx);
    for (int i = 0; i < 3; i++) add(&fx, 0, table(10 + (uint64_t)i, 500, 'a', 'm', 100 * (uint64_t)i));
    add(&fx, 1, table(20, 500, 'a', 'c', 1));
    add(&fx, 1, table(21, 500, 'x', 'z', 1));
    assert_null(pick(&fx));
    add(&fx, 0, table(13, 500, 'b', 'd', 400));
    bkv_compaction *c = pick(&fx);
    assert_non_null(c);
    assert_int_equal(c->level, 0);
    assert_int_equal(c->output_level, 1);
    assert_int_equal(c->ninputs[0], 4); /* every level-0 table: they overlap */
    assert_int_equal(c->ninputs[1], 1); /* only the level-1 table in a..m */
    assert_true(has_input(c, 1, 20));
    assert_false(c->trivial_move);
    /* While they are being compacted, nothing else may take them. */
    assert_null(pick(&fx));
    done(c);
    finish(&fx);
}

/* Level 0 goes down from its oldest table with every table overlapping it
 * (transitively), not all of level 0: sequential writes then move down
 * whole, while overlapping versions never get separated. */
static void level0_takes_the_oldest_and_what_overlaps_it(void **state) {
    (void)state;
    fixture fx;
    start(&fx);
    add(&fx, 0, table(10, 500, 'a', 'b', 100)); /* oldest */
    add(&fx, 0, table(11, 500, 'd', 'e', 200));
    add(&fx, 0, table(12, 500, 'g', 'h', 300));
    add(&fx, 0, table(13, 500, 'j', 'k', 400));
    bkv_compaction *c = pick(&fx);
    assert_non_null(c);
    assert_int_equal(c->ninputs[0], 1);
    assert_true(has_input(c, 0, 10));
    assert_true(c->trivial_move);
    done(c);
    finish(&fx);

    start(&fx);
    add(&fx, 0, table(10, 500, 'a', 'c', 100)); /* oldest; 12 overlaps it, 11 overlaps 12 */
    add(&fx, 0, table(11, 500, 'e', 'g', 200));
    add(&fx, 0, table(12, 500, 'c', 'e', 300));
    add(&fx, 0, table(13, 500, 'x', 'z', 400));
    c = pick(&fx);
    assert_non_null(c);
    assert_int_equal(c->ninputs[0], 3);
    assert_false(has_input(c, 0, 13));
    assert_false(c->trivial_move);
    done(c);
    finish(&fx);

    /* Levels with different filter settings: a table is rewritten, not moved. */
    start(&fx);
    bkv_level_options levels[1] = {{.filter_type = -1, .bits_per_key = 16}};
    fx.o.level_options = levels;
    fx.o.level_options_count = 1;
    for (int i = 0; i < 4; i++) add(&fx, 0, table(10 + (uint64_t)i, 500, (char)('a' + 3 * i), (char)('b' + 3 * i), 100 * (uint64_t)(i + 1)));
    c = pick(&fx);
    assert_non_null(c);
    assert_int_equal(c->ninputs[0], 1);
    assert_false(c->trivial_move);
    done(c);
    finish(&fx);
}

static void deeper_levels_round_robin(void **state) {
    (void)state;
    fixture fx;
    start(&fx);
    /* Level 1 over its 10000-byte target; level 2 below some of it. */
    const char ranges[][2] = {{'a', 'b'}, {'c', 'd'}, {'e', 'f'}, {'g', 'h'}};
    for (int i = 0; i < 4; i++) add(&fx, 1, table(30 + (uint64_t)i, 4000, ranges[i][0], ranges[i][1], 1));
    add(&fx, 2, table(40, 4000, 'c', 'e', 0));
    uint64_t picked[4];
    for (int round = 0; round < 4; round++) {
        bkv_compaction *c = pick(&fx);
        assert_non_null(c);
        assert_int_equal(c->level, 1);
        assert_int_equal(c->ninputs[0], 1);
        picked[round] = c->inputs[0][0]->number;
        /* Tables with no overlap below move down whole. */
        uint64_t n = picked[round];
        assert_int_equal(c->trivial_move, n == 30 || n == 33);
        assert_int_equal(has_input(c, 1, 40), n == 31 || n == 32);
        done(c);
    }
    /* Round robin: each table once, in key order, then again from the start. */
    for (int round = 0; round < 4; round++) assert_int_equal(picked[round], 30 + (uint64_t)round);
    bkv_compaction *c = pick(&fx);
    assert_int_equal(c->inputs[0][0]->number, 30);
    done(c);
    finish(&fx);
}

/* Compactions run side by side, so a pick meets tables another holds:
 * the round robin passes over a table whose tables below are busy, and a
 * level that cannot be compacted now gives way to the next most over. */
static void busy_tables_give_way_to_the_next_choice(void **state) {
    (void)state;
    for (int with_level0 = 0; with_level0 < 2; with_level0++) {
        fixture fx;
        start(&fx);
        for (int i = 0; i < 3; i++)
            add(&fx, 1, table(30 + (uint64_t)i, 4000, (char)('a' + 2 * i), (char)('b' + 2 * i), 1));
        add(&fx, 2, table(40, 4000, 'a', 'b', 0));
        add(&fx, 2, table(41, 4000, 'c', 'd', 0));
        /* Level 0 twice its trigger, over table 30 alone. */
        for (int i = 0; with_level0 && i < 8; i++)
            add(&fx, 0, table(10 + (uint64_t)i, 100, 'a', 'a', 100 * (uint64_t)(i + 1)));
        bkv_file_meta *t30 = fx.v->files[1][0], *t40 = fx.v->files[2][0];
        bkv_compaction *c = pick(&fx);
        assert_int_equal(c->level, with_level0 ? 0 : 1);
        assert_int_equal(has_input(c, 0, 30) || has_input(c, 1, 30), 1);
        done(c);
        bkv_buf_clear(&fx.pointers[1]);
        /* Level 0 cannot go while table 30 is busy; level 1 passes over
         * 30 for its busy table below (40), or for itself. */
        (with_level0 ? t30 : t40)->being_compacted = 1;
        c = pick(&fx);
        assert_non_null(c);
        assert_int_equal(c->level, 1);
        assert_int_equal(c->inputs[0][0]->number, 31);
        assert_true(has_input(c, 1, 41));
        done(c);
        t30->being_compacted = t40->being_compacted = 0;
        finish(&fx);
    }
}

static void within_target_nothing_is_due(void **state) {
    (void)state;
    fixture fx;
    start(&fx);
    add(&fx, 1, table(50, 9000, 'a', 'z', 1));
    assert_null(pick(&fx));
    add(&fx, 2, table(51, 90000, 'a', 'y', 0));
    assert_null(pick(&fx)); /* level 2's target is 100000 */
    add(&fx, 2, table(52, 20000, 'z', 'z', 0));
    bkv_compaction *c = pick(&fx);
    assert_non_null(c);
    assert_int_equal(c->level, 2);
    done(c);
    finish(&fx);
}

/* Below level 0 a user key lives in one table: a version that would put it
 * in two (a compaction's ranges cut wrongly, a damaged manifest) is
 * refused, while level 0 takes overlapping tables. */
static void overlapping_tables_below_level_0_are_refused(void **state) {
    (void)state;
    fixture fx;
    start(&fx);
    add(&fx, 0, table(60, 100, 'a', 'm', 5));
    add(&fx, 0, table(61, 100, 'k', 'z', 7));
    add(&fx, 1, table(62, 100, 'a', 'k', 1));
    const char ranges[][2] = {{'k', 'p'}, {'b', 'c'}, {'a', 'z'}};
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        assert_int_equal(try_add(&fx, 1, table(63, 100, ranges[i][0], ranges[i][1], 1)), BKV_CORRUPTION);
    assert_int_equal(fx.v->nfiles[1], 1);
    add(&fx, 1, table(64, 100, 'l', 'p', 1)); /* next to it, not over it */
    assert_int_equal(fx.v->nfiles[1], 2);
    finish(&fx);
}

/* Seeks charged to the newest of two tables holding a key make it due once
 * they pass its allowance (100 seeks for a small table); a key only one
 * table holds charges nothing. */
static void seeks_make_a_table_due(void **state) {
    (void)state;
    fixture fx;
    start(&fx);
    add(&fx, 1, table(70, 2000, 'c', 'f', 1));
    add(&fx, 1, table(71, 2000, 'm', 'p', 1));
    add(&fx, 2, table(72, 50000, 'a', 'z', 0));
    assert_null(pick(&fx)); /* both levels within their targets */
    assert_int_equal(bkv_tree_version_charge_seeks(fx.v, (const uint8_t *)"b", 1, 1000), 0); /* level 2 only */
    assert_null(atomic_load(&fx.v->seek_compact));
    assert_int_equal(bkv_tree_version_charge_seeks(fx.v, (const uint8_t *)"n", 1, 99), 0);
    assert_null(atomic_load(&fx.v->seek_compact));
    assert_int_equal(bkv_tree_version_charge_seeks(fx.v, (const uint8_t *)"o", 1, 1), 1);
    assert_int_equal(bkv_tree_version_charge_seeks(fx.v, (const uint8_t *)"d", 1, 1000), 0); /* already one due */
    bkv_compaction *c = pick(&fx);
    assert_non_null(c);
    assert_true(c->for_seeks);
    assert_int_equal(c->level, 1);
    assert_int_equal(c->ninputs[0], 1);
    assert_int_equal(c->inputs[0][0]->number, 71);
    assert_true(has_input(c, 1, 72));
    assert_int_equal(fx.pointers[1].len, 0); /* the round robin is not moved */
    assert_null(pick(&fx)); /* it is busy */
    done(c);
    /* A size-driven compaction goes first. */
    add(&fx, 1, table(73, 9000, 'r', 's', 1));
    c = pick(&fx);
    assert_non_null(c);
    assert_false(c->for_seeks);
    assert_int_equal(c->inputs[0][0]->number, 70);
    done(c);
    finish(&fx);
}

/* In level 0 the newest of the tables holding the key pays. */
static void level0_seeks_charge_the_newest(void **state) {
    (void)state;
    fixture fx;
    start(&fx);
    add(&fx, 0, table(80, 2000, 'a', 'z', 10));
    add(&fx, 0, table(81, 2000, 'a', 'k', 20));
    assert_int_equal(bkv_tree_version_charge_seeks(fx.v, (const uint8_t *)"q", 1, 1000), 0); /* one table */
    assert_int_equal(bkv_tree_version_charge_seeks(fx.v, (const uint8_t *)"c", 1, 100), 1);
    assert_int_equal(atomic_load(&fx.v->seek_compact)->number, 81);
    bkv_compaction *c = pick(&fx);
    assert_non_null(c);
    assert_true(c->for_seeks);
    assert_int_equal(c->level, 0);
    assert_int_equal(c->ninputs[0], 2); /* with the older table it overlaps */
    done(c);
    finish(&fx);
}

static void tiered_merges_similar_runs(void **state) {
    (void)state;
    fixture fx;
    start(&fx);
    fx.o.compaction_style = BKV_COMPACTION_TIERED;
    fx.o.tiered_size_ratio = 20;
    fx.o.tiered_max_size_amplification = 200;
    /* Oldest first: one big run, then three small ones of similar size. */
    add(&fx, 0, table(60, 100000, 'a', 'z', 0));
    add(&fx, 0, table(61, 1000, 'a', 'z', 100));
    add(&fx, 0, table(62, 1100, 'a', 'z', 200));
    assert_null(pick(&fx)); /* three runs, trigger four */
    add(&fx, 0, table(63, 1050, 'a', 'z', 300));
    bkv_compaction *c = pick(&fx);
    assert_non_null(c);
    assert_int_equal(c->output_level, 0);
    assert_int_equal(c->ninputs[0], 3);
    assert_false(has_input(c, 0, 60)); /* the big run waits */
    assert_false(c->tiered_bottommost);
    done(c);
    /* Newer runs past 200% of the oldest: everything is merged. */
    add(&fx, 0, table(64, 300000, 'a', 'z', 400));
    c = pick(&fx);
    assert_non_null(c);
    assert_int_equal(c->ninputs[0], 5);
    assert_true(c->tiered_bottommost);
    done(c);
    finish(&fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(level0_waits_for_its_trigger),
        cmocka_unit_test(level0_takes_the_oldest_and_what_overlaps_it),
        cmocka_unit_test(deeper_levels_round_robin),
        cmocka_unit_test(busy_tables_give_way_to_the_next_choice),
        cmocka_unit_test(within_target_nothing_is_due),
        cmocka_unit_test(overlapping_tables_below_level_0_are_refused),
        cmocka_unit_test(seeks_make_a_table_due),
        cmocka_unit_test(level0_seeks_charge_the_newest),
        cmocka_unit_test(tiered_merges_similar_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
