/*
 * Bulk load without the WAL: tables written outside the database by a
 * table writer, then ingested whole (RocksDB's SstFileWriter and
 * IngestExternalFile; docs/design.md "Bulk ingest").
 *
 * A writer's keys all carry sequence 0. An ingested table keeps them so
 * when it can be placed at the bottom of the tree with nothing it could
 * hide or be hidden by: its range overlaps no memtable and no table, and no
 * snapshot is live that must not see it. Otherwise the ingest takes one
 * fresh sequence number with every write held back, recorded in the
 * manifest as the table's global sequence, which readers substitute for
 * the 0 in every key; the table goes to the deepest level whose range and
 * every level above are free of its keys (level 0 if that one overlaps),
 * after the memtables were flushed if they held any of its keys.
 */
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/memtables.h"
#include "db/scheduler.h"
#include "db/table_file.h"
#include "db/version_set.h"
#include "db/write_batch.h"
#include "util/coding.h"
#include "util/hash.h"
#include "util/ikey.h"
#include "util/iterator.h"

/* ---- the table writer ---- */

struct bkv_table_writer {
    const bkv_env *env;
    char path[BKV_PATH_MAX];
    bkv_wfile *file;              /* NULL once finished or failed */
    bkv_table_builder *builder;
    bkv_vs_collector *values;     /* NULL: written without value filters */
    void *terms_arg;              /* a built-in terms extractor's argument, or NULL */
    bkv_buf last;                 /* the last user key added */
    bkv_buf ikey;
    uint64_t entries;
};

int bkv_table_writer_create_env(const bkv_options *opts, const char *path, const bkv_env *env,
                                bkv_table_writer **out) {
    bkv_err e = {{0}};
    if (!out) return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_table_writer_create: out is NULL"});
    *out = NULL;
    bkv_options o;
    bkv_options_init(&o);
    int rc = BKV_OK;
    if (!path || !*path) rc = bkv_fail(&e, BKV_INVALID, "bkv_table_writer_create: no path given");
    else if (strlen(path) >= BKV_PATH_MAX) rc = bkv_fail(&e, BKV_INVALID, "bkv_table_writer_create: path too long");
    else if (opts) rc = bkv_adopt_options(&o, sizeof o, opts, "bkv_options", &e);
    if (!rc) rc = bkv_check_options(&o, &e);
    /* A built-in extractor's terms, as the database will find them. */
    void *terms_arg = NULL;
    const char *terms_name = o.value_terms ? o.value_terms_name : "";
    char canonical[BKV_TERMS_NAME_MAX + 1];
    if (!rc) rc = bkv_resolve_builtin_terms(&o, "", &terms_arg, &terms_name, canonical, sizeof canonical, &e);
    if (rc) return bkv_db_error(NULL, rc, &e);
    bkv_table_writer *w = calloc(1, sizeof *w);
    if (!w) {
        free(terms_arg);
        return bkv_db_error(NULL, BKV_NOMEM, &(bkv_err){"bkv_table_writer_create: out of memory"});
    }
    w->terms_arg = terms_arg;
    w->env = env;
    snprintf(w->path, sizeof w->path, "%s", path);
    bkv_buf_init(&w->last);
    bkv_buf_init(&w->ikey);
    bkv_vf_params vparams;
    int has_values = bkv_value_params(&o, terms_name, &vparams);
    /* Laid out as a flush would lay it out: where it lands is not known
     * yet, and level 0's settings never drop the filter. */
    bkv_table_options to = bkv_table_options_for(&o, 0, 0);
    if ((rc = env->new_writable(env, path, o.file_mode, &w->file, &e))) {
        bkv_table_writer_destroy(w);
        return bkv_db_error(NULL, rc, &e);
    }
    if (has_values && (w->values = bkv_table_values_for(&o, 0, &vparams)))
        to.collector = bkv_vs_collector_hook(w->values);
    if ((has_values && !w->values) || !(w->builder = bkv_table_builder_new(&to, w->file, w->path))) {
        bkv_table_writer_destroy(w);
        return bkv_db_error(NULL, BKV_NOMEM, &(bkv_err){"bkv_table_writer_create: out of memory"});
    }
    *out = w;
    return BKV_OK;
}

int bkv_table_writer_create(const bkv_options *opts, const char *path, bkv_table_writer **out) {
    return bkv_table_writer_create_env(opts, path, bkv_env_posix(), out);
}

/* Gives up on the file after a failure: later calls are refused. */
static int writer_fail(bkv_table_writer *w, int rc, const bkv_err *e) {
    if (w->file) {
        bkv_file_close(w->file, NULL);
        w->file = NULL;
        w->env->remove_file(w->env, w->path, NULL);
    }
    return bkv_db_error(NULL, rc, e);
}

static int writer_add(bkv_table_writer *w, unsigned type, const void *key, size_t klen, const void *val,
                      size_t vlen) {
    bkv_err e = {{0}};
    if (!w || (!key && klen) || (!val && vlen))
        return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_table_writer: NULL writer, or a NULL key or value with a length"});
    if (bkv_entry_size_check("bkv_table_writer", klen, vlen, &e)) return bkv_db_error(NULL, BKV_INVALID, &e);
    if (!w->file)
        return bkv_db_error(NULL, BKV_INVALID,
                            &(bkv_err){"bkv_table_writer: the table was finished or failed; nothing more can be added"});
    if (w->entries && bkv_user_key_compare(key, klen, w->last.data, w->last.len) <= 0) {
        bkv_fail(&e, BKV_INVALID, "bkv_table_writer: %s: key %llu is not greater than the key before it",
                 w->path, (unsigned long long)w->entries);
        return bkv_db_error(NULL, BKV_INVALID, &e); /* the table so far is intact: the caller may go on */
    }
    if (bkv_buf_set(&w->ikey, key, klen) || bkv_buf_put_u64(&w->ikey, bkv_pack_trailer(0, type)) ||
        bkv_buf_set(&w->last, key, klen))
        return writer_fail(w, BKV_NOMEM, &(bkv_err){"bkv_table_writer: out of memory"});
    int rc = bkv_table_builder_add(w->builder, w->ikey.data, w->ikey.len, val, vlen, &e);
    if (rc) return writer_fail(w, rc, &e);
    w->entries++;
    return BKV_OK;
}

int bkv_table_writer_put(bkv_table_writer *w, const void *key, size_t klen, const void *val, size_t vlen) {
    return writer_add(w, BKV_TYPE_VALUE, key, klen, val, vlen);
}

int bkv_table_writer_delete(bkv_table_writer *w, const void *key, size_t klen) {
    return writer_add(w, BKV_TYPE_DELETION, key, klen, NULL, 0);
}

int bkv_table_writer_finish(bkv_table_writer *w) {
    bkv_err e = {{0}};
    if (!w) return bkv_db_arg_error(NULL, "bkv_table_writer_finish");
    if (!w->file)
        return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_table_writer: the table was finished or failed"});
    if (!w->entries) {
        bkv_fail(&e, BKV_INVALID, "bkv_table_writer: %s: a table needs at least one entry", w->path);
        return writer_fail(w, BKV_INVALID, &e);
    }
    int rc = bkv_table_builder_finish(w->builder, &e);
    if (!rc) rc = bkv_file_sync(w->file, &e);
    if (rc) return writer_fail(w, rc, &e);
    rc = bkv_file_close(w->file, &e);
    w->file = NULL;
    if (rc) {
        w->env->remove_file(w->env, w->path, NULL);
        return bkv_db_error(NULL, rc, &e);
    }
    return BKV_OK;
}

uint64_t bkv_table_writer_entries(const bkv_table_writer *w) { return w ? w->entries : 0; }

void bkv_table_writer_destroy(bkv_table_writer *w) {
    if (!w) return;
    if (w->file) writer_fail(w, BKV_OK, NULL);
    bkv_table_builder_free(w->builder);
    bkv_vs_collector_free(w->values);
    bkv_buf_free(&w->last);
    bkv_buf_free(&w->ikey);
    free(w->terms_arg);
    free(w);
}

/* ---- ingest ---- */

typedef struct ingest_file {
    const char *src;
    uint64_t number;          /* its name in the database */
    uint64_t size, entries;
    bkv_buf smallest, largest; /* internal keys, sequence 0 */
    int placed;               /* its copy or link in the database exists */
} ingest_file;

static int filter_says_no(const bkv_table *t, bkv_hash h) {
    return bkv_table_has_filter(t) && !bkv_table_may_contain(t, h);
}

/* Checks one entry of a table being ingested. */
static int inspect_entry(const bkv_db *db, const bkv_table *t, ingest_file *f, const uint8_t *k, size_t kl,
                         bkv_err *e) {
    if (kl < BKV_IKEY_TRAILER)
        return bkv_fail(e, BKV_CORRUPTION, "%s: entry %llu has a key shorter than its trailer", f->src,
                        (unsigned long long)f->entries);
    unsigned type = bkv_ikey_type(k, kl);
    uint64_t seq = bkv_ikey_seq(k, kl);
    const uint8_t *uk = k;
    size_t ul = kl - BKV_IKEY_TRAILER;
    if (seq != 0)
        return bkv_fail(e, BKV_INVALID,
                        "%s: entry %llu has sequence number %llu; only tables made by a bkv_table_writer (every "
                        "sequence 0) can be ingested", f->src, (unsigned long long)f->entries, (unsigned long long)seq);
    if (type != BKV_TYPE_VALUE && type != BKV_TYPE_DELETION)
        return bkv_fail(e, BKV_CORRUPTION, "%s: entry %llu has unknown type %u", f->src, (unsigned long long)f->entries,
                        type);
    if (f->entries &&
        bkv_user_key_compare(f->largest.data, f->largest.len - BKV_IKEY_TRAILER, uk, ul) >= 0)
        return bkv_fail(e, BKV_CORRUPTION, "%s: entry %llu is not in increasing key order", f->src,
                        (unsigned long long)f->entries);
    if (filter_says_no(t, bkv_hash_bytes(uk, ul)))
        return bkv_fail(e, BKV_CORRUPTION, "%s: its key filter does not hold the key of entry %llu", f->src,
                        (unsigned long long)f->entries);
    size_t plen = db->opts.prefix_extractor ? db->opts.prefix_extractor(uk, ul) : SIZE_MAX;
    if (plen != SIZE_MAX && plen <= ul && filter_says_no(t, bkv_hash_bytes_seeded(uk, plen, BKV_PREFIX_SEED)))
        return bkv_fail(e, BKV_INVALID,
                        "%s: its key filter lacks the prefix of entry %llu: write it with the prefix extractor the "
                        "database uses", f->src, (unsigned long long)f->entries);
    if ((!f->entries && bkv_buf_set(&f->smallest, k, kl)) || bkv_buf_set(&f->largest, k, kl))
        return bkv_fail(e, BKV_NOMEM, "out of memory ingesting %s", f->src);
    f->entries++;
    return BKV_OK;
}

/* The value filters of a table ingested into a database with a value
 * index must be the ones it would have built itself: a search trusts a
 * "no" from them. */
static int inspect_value_filters(const bkv_db *db, bkv_table *t, const char *path, bkv_err *e) {
    const bkv_vf_params *want = bkv_db_value_params(db);
    if (!want) return BKV_OK;
    bkv_vf_set vf;
    int rc = bkv_vs_table_filters(t, &vf, e);
    if (rc == BKV_NOTFOUND)
        return bkv_fail(e, BKV_INVALID,
                        "%s has no value filters and the database has a value index: write it with the options the "
                        "database was created with", path);
    if (rc) return rc;
    const bkv_vf_params *p = &vf.params;
    if (!bkv_vf_same_bits(p, want) || p->partition_entries != want->partition_entries)
        rc = bkv_fail(e, BKV_INVALID,
                      "%s: value filters built with m=%u, k=%u, P=%u, probe words %u; the database's value index has "
                      "m=%u, k=%u, P=%u, probe words %u",
                      path, p->m_bits, p->k, p->partition_entries, p->words, want->m_bits, want->k,
                      want->partition_entries, want->words);
    bkv_vf_set_free(&vf);
    return rc;
}

/* Reads a table to be ingested whole, verifying every block, and learns
 * its range. */
static int inspect(const bkv_db *db, ingest_file *f, bkv_err *e) {
    bkv_table_stats st = {0};
    bkv_table *t;
    int rc = bkv_table_open(db->env, f->src, 0, NULL, &st, &t, e);
    if (rc) return rc;
    f->size = bkv_table_file_size(t);
    if (st.filter_corrupt) rc = bkv_fail(e, BKV_CORRUPTION, "%s: its key filter block is damaged", f->src);
    if (!rc) rc = inspect_value_filters(db, t, f->src, e);
    bkv_ikey_iter *it = NULL;
    if (!rc && bkv_table_iter_new(t, BKV_READ_BULK, NULL, &it)) rc = bkv_fail(e, BKV_NOMEM, "out of memory ingesting %s", f->src);
    if (!rc) {
        for (bkv_ikey_iter_first(it); !rc && bkv_ikey_iter_valid(it); bkv_ikey_iter_next(it)) {
            size_t kl;
            const uint8_t *k = bkv_ikey_iter_key(it, &kl);
            rc = inspect_entry(db, t, f, k, kl, e);
        }
        if (!rc) rc = bkv_ikey_iter_status(it, e);
        bkv_ikey_iter_destroy(it);
    }
    const bkv_table_props *p = bkv_table_properties(t);
    if (!rc && f->entries == 0) rc = bkv_fail(e, BKV_INVALID, "%s: the table holds no entries", f->src);
    if (!rc && p->num_entries != f->entries)
        rc = bkv_fail(e, BKV_CORRUPTION, "%s: its properties say %llu entries; it holds %llu", f->src,
                      (unsigned long long)p->num_entries, (unsigned long long)f->entries);
    bkv_table_close(t);
    return rc;
}

static int user_compare(const bkv_buf *a, const bkv_buf *b) {
    return bkv_user_key_compare(a->data, a->len - BKV_IKEY_TRAILER, b->data, b->len - BKV_IKEY_TRAILER);
}

static int by_smallest(const void *a, const void *b) {
    return user_compare(&((const ingest_file *)a)->smallest, &((const ingest_file *)b)->smallest);
}

/* Whether a table file's range and f's share a user key range. */
static int meta_overlaps(const bkv_file_meta *m, const ingest_file *f) {
    return bkv_user_key_compare(m->smallest, m->smallest_len - BKV_IKEY_TRAILER, f->largest.data,
                                f->largest.len - BKV_IKEY_TRAILER) <= 0 &&
           bkv_user_key_compare(m->largest, m->largest_len - BKV_IKEY_TRAILER, f->smallest.data,
                                f->smallest.len - BKV_IKEY_TRAILER) >= 0;
}

static int level_overlaps(const bkv_tree_version *v, int level, const ingest_file *f) {
    for (size_t i = 0; i < v->nfiles[level]; i++)
        if (meta_overlaps(v->files[level][i], f)) return 1;
    return 0;
}

static int memtable_overlaps(const bkv_memtable *m, const ingest_file *f) {
    bkv_buf seek;
    bkv_buf_init(&seek);
    if (bkv_ikey_seek_key(&seek, f->smallest.data, f->smallest.len - BKV_IKEY_TRAILER)) {
        bkv_buf_free(&seek);
        return 1; /* out of memory: assume the worst, a flush is only slower */
    }
    bkv_memtable_iter it;
    bkv_memtable_iter_init(&it, m);
    bkv_memtable_iter_seek(&it, seek.data, seek.len);
    int overlaps = 0;
    if (bkv_memtable_iter_valid(&it)) {
        size_t kl;
        const uint8_t *k = bkv_memtable_iter_ikey(&it, &kl);
        overlaps = bkv_user_key_compare(k, kl - BKV_IKEY_TRAILER, f->largest.data,
                                        f->largest.len - BKV_IKEY_TRAILER) <= 0;
    }
    bkv_buf_free(&seek);
    return overlaps;
}

/* REQUIRES: db->mu held. */
static int memtables_overlap(const bkv_db *db, const ingest_file *files, size_t n) {
    bkv_memtable *mems[1 + BKV_MAX_IMM];
    int nmems = bkv_mems_list(db, mems);
    for (size_t i = 0; i < n; i++) {
        for (int j = 0; j < nmems; j++)
            if (memtable_overlaps(mems[j], &files[i])) return 1;
    }
    return 0;
}

/* Where f goes: see the file comment. REQUIRES: db->mu held. */
static int pick_level(const bkv_db *db, const ingest_file *f, uint64_t seq) {
    const int last = BKV_MAX_LEVELS - 1;
    if (db->opts.compaction_style == BKV_COMPACTION_TIERED) return 0; /* every run lives in level 0 */
    if (seq == 0) return last;
    for (int l = 0; l <= last; l++)
        if (level_overlaps(bkv_vset_current(&db->vset), l, f)) return l > 0 ? l - 1 : 0;
    return last;
}

static bkv_file_meta *ingest_meta(const ingest_file *f, uint64_t seq) {
    bkv_file_meta *m = bkv_file_meta_new(f->number, f->size, f->entries, f->smallest.data, f->smallest.len,
                                         f->largest.data, f->largest.len);
    if (!m) return NULL;
    bkv_put_u64(m->smallest + m->smallest_len - BKV_IKEY_TRAILER,
                bkv_pack_trailer(seq, bkv_ikey_type(f->smallest.data, f->smallest.len)));
    bkv_put_u64(m->largest + m->largest_len - BKV_IKEY_TRAILER,
                bkv_pack_trailer(seq, bkv_ikey_type(f->largest.data, f->largest.len)));
    m->smallest_seq = m->largest_seq = m->global_seq = seq;
    return m;
}

/* Places the tables in the tree; *committing is set once the manifest
 * may name them. REQUIRES: db->mu held, writes held. */
static int install(bkv_db *db, ingest_file *files, size_t n, int *committing, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    if (db->bg_error) return bkv_db_bg_status(db, e);
    int rc;
    /* A read looks in the memtables before any table: one of them holding
     * an older version of an ingested key would hide the new one. */
    if (memtables_overlap(db, files, n) && (rc = bkv_db_flush_held(db, e))) return rc;
    /* No compaction may be moving tables while the levels are chosen. */
    if ((rc = bkv_sched_hold_compaction(db, e))) return rc;
    int overlap = db->snapshots.next != &db->snapshots;
    const bkv_tree_version *v = bkv_vset_current(&db->vset);
    for (size_t i = 0; i < n && !overlap; i++)
        for (int l = 0; l < BKV_MAX_LEVELS && !overlap; l++) overlap = level_overlaps(v, l, &files[i]);
    uint64_t seq = 0;
    rc = BKV_OK;
    if (overlap) {
        if (db->last_sequence >= BKV_MAX_SEQ) rc = bkv_fail(e, BKV_INVALID, "sequence numbers exhausted");
        else seq = db->last_sequence + 1;
    }
    bkv_version_edit edit;
    bkv_edit_init(&edit);
    for (size_t i = 0; !rc && i < n; i++) {
        bkv_file_meta *m = ingest_meta(&files[i], seq);
        if (!m || bkv_edit_add_file(&edit, pick_level(db, &files[i], seq), m))
            rc = bkv_fail(e, BKV_NOMEM, "out of memory ingesting %s", files[i].src);
        bkv_file_meta_unref(m);
    }
    if (!rc) {
        if (seq) db->last_sequence = seq; /* written to the manifest with the edit */
        else db->ingesting_unsequenced = 1;
        *committing = 1;
        rc = bkv_db_commit_edit(db, &edit, 1, e);
        if (!rc) atomic_store_explicit(&db->visible_sequence, db->last_sequence, memory_order_release);
    }
    bkv_edit_free(&edit);
    db->ingesting_unsequenced = 0;
    bkv_sched_release_compaction(db);
    return rc;
}

/* Copies (or, when moving, links) f into the database as table f->number. */
static int place(bkv_db *db, ingest_file *f, int move, bkv_err *e) {
    char path[BKV_PATH_MAX];
    bkv_table_name(path, db->path, f->number);
    int rc = move ? db->env->link_file(db->env, f->src, path, e) : -1;
    if (rc) rc = bkv_env_copy_file(db->env, f->src, path, db->opts.file_mode, e); /* another file system */
    if (!rc) f->placed = 1;
    return rc;
}

static void remove_placed(bkv_db *db, ingest_file *files, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (files[i].placed) {
            char path[BKV_PATH_MAX];
            bkv_table_name(path, db->path, files[i].number);
            db->env->remove_file(db->env, path, NULL);
        }
}

int bkv_ingest(bkv_db *db, const char *const *paths, size_t n, unsigned flags) {
    bkv_err e = {{0}};
    if (!db) return bkv_db_arg_error(db, "bkv_ingest");
    if (db->opts.read_only) return bkv_db_read_only_error(db, "bkv_ingest");
    if ((n && !paths) || (flags & ~(unsigned)BKV_INGEST_MOVE))
        return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "bkv_ingest: no paths given, or unknown flags"), &e);
    if (n == 0) return BKV_OK;
    ingest_file *files = calloc(n, sizeof *files);
    if (!files) return bkv_db_error(db, BKV_NOMEM, &(bkv_err){"bkv_ingest: out of memory"});
    int rc = BKV_OK;
    for (size_t i = 0; i < n; i++) {
        bkv_buf_init(&files[i].smallest);
        bkv_buf_init(&files[i].largest);
        files[i].src = paths[i];
        if (!rc && !paths[i]) rc = bkv_fail(&e, BKV_INVALID, "bkv_ingest: path %zu is NULL", i);
        if (!rc) rc = inspect(db, &files[i], &e);
    }
    if (!rc) qsort(files, n, sizeof *files, by_smallest);
    for (size_t i = 1; !rc && i < n; i++)
        if (user_compare(&files[i - 1].largest, &files[i].smallest) >= 0)
            rc = bkv_fail(&e, BKV_INVALID, "bkv_ingest: %s and %s hold overlapping key ranges", files[i - 1].src,
                          files[i].src);
    if (!rc) {
        bkv_db_lock(db);
        if (db->bg_error) rc = bkv_db_bg_status(db, &e);
        for (size_t i = 0; !rc && i < n; i++) files[i].number = bkv_vset_new_file_number(&db->vset);
        bkv_db_unlock(db);
    }
    for (size_t i = 0; !rc && i < n; i++) rc = place(db, &files[i], flags & BKV_INGEST_MOVE, &e);
    /* The names must be durable before the manifest refers to them. */
    if (!rc) rc = db->env->sync_dir(db->env, db->path, &e);
    int committing = 0;
    if (!rc) {
        bkv_writer w;
        bkv_db_lock(db);
        bkv_db_hold_writes(db, &w);
        rc = install(db, files, n, &committing, &e);
        bkv_db_release_writes(db, &w);
        bkv_db_unlock(db);
    }
    /* After a failed manifest write the record may still be on disk and
     * name the tables: they stay, and the next open removes them if not. */
    if (rc && !committing) remove_placed(db, files, n);
    if (!rc && (flags & BKV_INGEST_MOVE))
        for (size_t i = 0; i < n; i++) db->env->remove_file(db->env, files[i].src, NULL);
    for (size_t i = 0; i < n; i++) {
        bkv_buf_free(&files[i].smallest);
        bkv_buf_free(&files[i].largest);
    }
    free(files);
    return bkv_db_error(db, rc, &e);
}
