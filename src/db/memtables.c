/*
 * The memtables of a database (memtables.h): the active one, the
 * immutable ones oldest first with their WALs, and the arena pool.
 */
#include <string.h>

#include "db/memtables.h"

void bkv_mems_init(bkv_db *db) {
    memset(&db->mems, 0, sizeof db->mems);
    db->mems.arena_pool = bkv_arena_pool_new(db->opts.write_buffer_size);
}

void bkv_mems_free(bkv_db *db) {
    bkv_memtable_unref(db->mems.active);
    for (int i = 0; i < db->mems.nimm; i++) bkv_memtable_unref(db->mems.imm[i]);
    bkv_arena_pool_unref(db->mems.arena_pool);
    memset(&db->mems, 0, sizeof db->mems);
}

/* The memtable's key filter is sized for entries of about 64 bytes, its
 * term index for about 128: more (smaller) entries only raise the filter's
 * false-positive rate and lengthen the term chains. */
bkv_memtable *bkv_mems_new_memtable(const bkv_db *db) {
    const bkv_options *o = &db->opts;
    uint64_t n = o->write_buffer_size / 64;
    bkv_memtable *m = bkv_memtable_new(o->memtable_filter ? (n < 1024 ? 1024 : n) : 0, db->mems.arena_pool);
    const bkv_vf_params *vp = bkv_db_value_params(db);
    if (m && vp && bkv_memtable_index_terms(m, vp, o->value_terms, o->value_terms_arg, o->write_buffer_size / 128)) {
        bkv_memtable_unref(m);
        return NULL;
    }
    return m;
}

bkv_memtable *bkv_mems_replace_active(bkv_db *db, bkv_memtable *m) {
    bkv_memtable *old = db->mems.active;
    db->mems.active = m;
    return old;
}

void bkv_mems_set_active_log(bkv_db *db, uint64_t log) { db->mems.active_log = log; }

void bkv_mems_switch(bkv_db *db, bkv_memtable *fresh, uint64_t log) {
    BKV_ASSERT_LOCKED(db);
    bkv_memtables *ms = &db->mems;
    BKV_ASSERT(ms->nimm < BKV_MAX_IMM);
    ms->imm[ms->nimm] = ms->active;
    ms->imm_log[ms->nimm] = ms->active_log;
    ms->nimm++;
    ms->active = fresh;
    ms->active_log = log;
}

bkv_memtable *bkv_mems_oldest(const bkv_db *db, uint64_t *log) {
    BKV_ASSERT_LOCKED(db);
    BKV_ASSERT(db->mems.nimm > 0);
    *log = db->mems.imm_log[0];
    return db->mems.imm[0];
}

uint64_t bkv_mems_log_after_oldest(const bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    return db->mems.nimm > 1 ? db->mems.imm_log[1] : db->mems.active_log;
}

bkv_memtable *bkv_mems_pop_oldest(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    bkv_memtables *ms = &db->mems;
    BKV_ASSERT(ms->nimm > 0);
    bkv_memtable *m = ms->imm[0];
    memmove(ms->imm, ms->imm + 1, (size_t)(ms->nimm - 1) * sizeof ms->imm[0]);
    memmove(ms->imm_log, ms->imm_log + 1, (size_t)(ms->nimm - 1) * sizeof ms->imm_log[0]);
    ms->nimm--;
    return m;
}

int bkv_mems_ref_immutable(const bkv_db *db, bkv_memtable **imm) {
    BKV_ASSERT_LOCKED(db);
    for (int i = 0; i < db->mems.nimm; i++) {
        imm[i] = db->mems.imm[i];
        bkv_memtable_ref(imm[i]);
    }
    return db->mems.nimm;
}

int bkv_mems_list(const bkv_db *db, bkv_memtable **out) {
    BKV_ASSERT_LOCKED(db);
    const bkv_memtables *ms = &db->mems;
    int n = 0;
    if (ms->active) out[n++] = ms->active;
    for (int i = ms->nimm - 1; i >= 0; i--) out[n++] = ms->imm[i];
    return n;
}

size_t bkv_mems_pool_bytes(const bkv_db *db) {
    return db->mems.arena_pool ? bkv_arena_pool_bytes(db->mems.arena_pool) : 0;
}
