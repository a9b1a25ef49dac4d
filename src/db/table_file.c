#include "db/table_file.h"

#include <string.h>

#include "db/filter_budget.h"

double bkv_table_file_budget_bits(const bkv_db *db, const bkv_tree_version *v, int level, uint64_t run_entries) {
    const bkv_options *o = &db->opts;
    if (!o->filter_memory_budget || o->filter_type == BKV_FILTER_NONE) return -1;
    /* Range filters are paid first, at their levels' own bits per key, for
     * every key of the tables now and of the one being written: their
     * rate is set by the range lengths a user asks about, not traded
     * against point misses. Key filters share what is left. */
    double range_bits = (double)run_entries * bkv_level_range_filter_bits(o, level);
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        double b = bkv_level_range_filter_bits(o, l);
        for (size_t i = 0; b > 0 && i < v->nfiles[l]; i++) range_bits += b * (double)v->files[l][i]->entries;
    }
    double key_bytes = (double)o->filter_memory_budget - range_bits / 8;
    return key_bytes < 1 ? 0 : bkv_filter_budget_bits(v, (uint64_t)key_bytes, level, run_entries);
}

bkv_table_options bkv_table_options_for(const bkv_options *o, int level, int bottommost) {
    bkv_table_options to = {.block_size = o->block_size, .restart_interval = 16,
                            .filter_type = bkv_level_filter_type(o, level),
                            .bits_per_key = bkv_level_bits_per_key(o, level), .compression = o->compression,
                            .filter_partition_size = o->partition_filters ? (o->filter_partition_size ? o->filter_partition_size : 4096) : 0,
                            .prefix_extractor = o->prefix_extractor,
                            .range_filter_bits = bkv_level_range_filter_bits(o, level)};
    /* Gets that reach the bottom mostly find their key there (the
     * workload has few misses), so its filter would rarely say no. */
    if (o->optimize_filters_for_hits && bottommost) to.filter_type = BKV_FILTER_NONE;
    return to;
}

bkv_vs_collector *bkv_table_values_for(const bkv_options *o, int bottommost, const bkv_vf_params *vparams) {
    /* Most of an entry's rewrites happen above the bottom level, where a
     * Ribbon summary for every table was most of the paged index's write
     * cost; the bottom level's tables are most of the tables a search
     * asks, and keep theirs for long (docs/design.md). */
    bkv_vs_collector_options vo = {.params = *vparams, .terms = o->value_terms, .terms_arg = o->value_terms_arg,
                                   .summary_cheap = !bottommost};
    return bkv_vs_collector_new(&vo);
}

int bkv_table_file_open(bkv_db *db, uint64_t number, int level, int bottommost, double budget_bits,
                        bkv_table_file *tf, bkv_err *e) {
    memset(tf, 0, sizeof *tf);
    tf->db = db;
    tf->number = number;
    bkv_table_name(tf->path, db->path, number);
    int rc = db->env->new_writable(db->env, tf->path, db->opts.file_mode, &tf->file, e);
    if (rc) return rc;
    bkv_table_options to = bkv_table_options_for(&db->opts, level, bottommost);
    if (budget_bits >= 0 && !bkv_level_sets_bits(&db->opts, level)) {
        /* Below a bit per key a filter would answer "maybe" to most absent keys. */
        if (budget_bits < 1) to.filter_type = BKV_FILTER_NONE;
        else to.bits_per_key = budget_bits;
    }
    const bkv_vf_params *vp = bkv_db_value_params(db);
    if (vp && (tf->values = bkv_table_values_for(&db->opts, bottommost, vp)))
        to.collector = bkv_vs_collector_hook(tf->values);
    if ((vp && !tf->values) || !(tf->builder = bkv_table_builder_new(&to, tf->file, tf->path))) {
        bkv_table_file_abandon(tf);
        return bkv_fail(e, BKV_NOMEM, "out of memory building %s", tf->path);
    }
    return BKV_OK;
}

int bkv_table_file_add(bkv_table_file *tf, const uint8_t *ikey, size_t ilen, const uint8_t *val, size_t vlen,
                       bkv_err *e) {
    return bkv_table_builder_add(tf->builder, ikey, ilen, val, vlen, e);
}

uint64_t bkv_table_file_size_estimate(const bkv_table_file *tf) {
    return bkv_table_builder_estimated_size(tf->builder);
}

int bkv_table_file_finish(bkv_table_file *tf, bkv_file_meta **out, bkv_err *e) {
    *out = NULL;
    bkv_db *db = tf->db;
    int rc = bkv_table_builder_finish(tf->builder, e);
    bkv_vf_set *vf = rc || !tf->values ? NULL : bkv_vs_collector_take_filters(tf->values);
    if (!rc) rc = bkv_file_sync(tf->file, e);
    int crc = bkv_file_close(tf->file, rc ? NULL : e);
    tf->file = NULL;
    if (!rc) rc = crc;
    if (!rc) {
        const uint8_t *smallest, *largest;
        size_t slen, llen;
        bkv_table_builder_key_range(tf->builder, &smallest, &slen, &largest, &llen);
        *out = bkv_file_meta_new(tf->number, bkv_table_builder_file_size(tf->builder),
                                 bkv_table_builder_entries(tf->builder), smallest, slen, largest, llen);
        if (!*out) rc = bkv_fail(e, BKV_NOMEM, "out of memory");
    }
    if (!rc) {
        bkv_table_builder_seq_range(tf->builder, &(*out)->smallest_seq, &(*out)->largest_seq);
        (*out)->vf = vf;
        vf = NULL;
        rc = bkv_db_open_new_table(db, *out, e);
    }
    bkv_vf_set_destroy(vf);
    bkv_table_builder_free(tf->builder);
    tf->builder = NULL;
    bkv_vs_collector_free(tf->values);
    tf->values = NULL;
    if (rc) {
        bkv_file_meta_unref(*out);
        *out = NULL;
        db->env->remove_file(db->env, tf->path, NULL);
    }
    return rc;
}

void bkv_table_file_abandon(bkv_table_file *tf) {
    if (!tf->file) return;
    bkv_table_builder_free(tf->builder);
    tf->builder = NULL;
    bkv_vs_collector_free(tf->values);
    tf->values = NULL;
    bkv_file_close(tf->file, NULL);
    tf->file = NULL;
    tf->db->env->remove_file(tf->db->env, tf->path, NULL);
}
