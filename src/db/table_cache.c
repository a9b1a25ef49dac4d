/*
 * Tables open for reading: pinned in their file's metadata while
 * max_open_files allows, else through the table cache. Below every file
 * of src/db that reads a table.
 */
#include "db/db_int.h"
#include "db/filename.h"

static void table_deleter(uint64_t k1, uint64_t k2, void *v) {
    (void)k1, (void)k2;
    bkv_table_close(v);
}

/* A table stays pinned in its file's metadata while max_open_files
 * allows: a get then reaches it with one atomic load, where a table cache
 * lookup takes a shard lock twice (lookup and release), and two threads
 * reading the same tables would fight over those locks. Past the budget,
 * tables go through the table cache as before. */
int bkv_db_get_table(bkv_db *db, const bkv_file_meta *f, bkv_cache_entry **entry, bkv_err *e) {
    bkv_file_meta *meta = (bkv_file_meta *)f; /* the pin is a cache, not part of the version */
    if ((*entry = atomic_load_explicit(&meta->pinned, memory_order_acquire))) return BKV_OK;
    if ((*entry = bkv_cache_lookup(db->table_cache, f->number, 0))) return BKV_OK;
    char path[BKV_PATH_MAX];
    bkv_table_name(path, db->path, f->number);
    bkv_table *t;
    int rc = bkv_table_open(db->env, path, f->number, db->block_cache, bkv_db_tstats(db), &t, e);
    if (rc) return rc;
    bkv_table_set_global_seq(t, f->global_seq);
    if (atomic_fetch_add_explicit(&db->pinned_tables, 1, memory_order_relaxed) < db->opts.max_open_files) {
        bkv_cache_entry *pin = bkv_cache_pinned_new(f->number, t, table_deleter), *none = NULL;
        if (pin) {
            if (atomic_compare_exchange_strong(&meta->pinned, &none, pin)) {
                meta->pin_count = &db->pinned_tables; /* only the winner writes it; read when the meta is freed */
                atomic_store_explicit(&meta->key_filter, bkv_table_filter(t), memory_order_release);
                *entry = pin;
                return BKV_OK;
            }
            bkv_cache_pinned_free(pin); /* another reader pinned it first: use theirs */
            atomic_fetch_sub_explicit(&db->pinned_tables, 1, memory_order_relaxed);
            *entry = none;
            return BKV_OK;
        }
    }
    atomic_fetch_sub_explicit(&db->pinned_tables, 1, memory_order_relaxed);
    if (!(*entry = bkv_cache_insert(db->table_cache, f->number, 0, t, 1, table_deleter))) {
        bkv_table_close(t);
        return bkv_fail(e, BKV_NOMEM, "out of memory caching %s", path);
    }
    return BKV_OK;
}

int bkv_db_open_new_table(bkv_db *db, const bkv_file_meta *f, bkv_err *e) {
    if (!db->table_cache) return BKV_OK;
    bkv_cache_entry *entry;
    int rc = bkv_db_get_table(db, f, &entry, e);
    if (!rc) bkv_cache_release(db->table_cache, entry);
    return rc;
}
