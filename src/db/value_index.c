/*
 * The value index's state (docs/design.md, "Search by value"): the
 * parameters fixed when the database is opened, and the index kept over
 * every table of the current version as flushes and compactions change
 * it. The search that reads it is db_value.c's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "db/db_int.h"
#include "db/version_set.h"
#include "valuesearch/table_values.h"
#include "valuesearch/terms.h"

/* Value filters are hashed with this seed ("value_v1"), recorded in the
 * manifest so it can change for new databases without breaking old ones.
 * A new index with a terms extractor mixes the extractor's recorded name
 * in: a table's filters then only match an index that finds the same
 * terms (a table made by a table writer with another extractor, or kept
 * from an index dropped and made again with another, becomes a table the
 * search reads whole instead of one whose filters wrongly answer "no"). */
#define BKV_VALUE_SEED UINT64_C(0x76616c75655f7631)

static uint64_t value_seed(const char *terms_name) {
    if (!terms_name || !*terms_name) return BKV_VALUE_SEED;
    return BKV_VALUE_SEED ^ XXH3_64bits(terms_name, strlen(terms_name));
}

/* ln 2 x bits per value, at most 6: beyond that each extra bit set costs
 * every write more than it saves searches (32 bits per value at k = 6 is a
 * rate of 2.5e-5, against 1e-7 at the optimum), and inner nodes of a
 * hierarchy saturate later with fewer bits per term. */
#define MAX_AUTO_HASHES 6
#define ONE_FILTER_PER_TABLE_HASHES 4 /* P = 0: the paper's layout and its k */
static uint32_t auto_hashes(uint32_t m, uint32_t p) {
    if (p == 0) return ONE_FILTER_PER_TABLE_HASHES;
    double k = M_LN2 * m / p;
    return k < 1 ? 1 : k > MAX_AUTO_HASHES ? MAX_AUTO_HASHES : (uint32_t)(k + 0.5);
}

/* 32 bits per value of a full partition: a false-positive rate of 2.5e-5
 * per partition at k = 6 (see auto_hashes); the paper's one filter per
 * table gets 16,384 bits. At most 2^21 bits (256 KiB, the paper's filter
 * per table): a huge P must not make every table carry a filter of
 * hundreds of megabytes; P above 65,536 gets fewer bits per value. */
#define AUTO_BITS_PER_VALUE 32
#define ONE_FILTER_PER_TABLE_BITS 16384
#define AUTO_MAX_BITS (UINT64_C(1) << 21)
static uint32_t auto_bits(uint32_t p) {
    if (p == 0) return ONE_FILTER_PER_TABLE_BITS;
    uint64_t m = ((uint64_t)p * AUTO_BITS_PER_VALUE + 63) / 64 * 64;
    return (uint32_t)(m > AUTO_MAX_BITS ? AUTO_MAX_BITS : m);
}

/* A paged index reads a row per filter word a term's bits fall in, from
 * every table whose summary says "maybe": a term's bits go in two words
 * (two reads instead of k). Confined that way, k bits answer "maybe"
 * more often; two more bring the rate back (a simulation at f73b5ce: at
 * m = 32 bits per value, 6 spread bits 2.3e-5, 6 in two
 * words 6.6e-5, 8 in two words 2.0e-5). The in-memory shapes read every
 * filter's words anyway, and keep the spread. */
#define TWO_WORD_EXTRA_HASHES 2

int bkv_value_params(const bkv_options *o, const char *terms_name, bkv_vf_params *out) {
    if (o->value_index == BKV_VALUE_INDEX_NONE) return 0;
    uint32_t m = o->value_filter_bits ? o->value_filter_bits : auto_bits(o->value_partition_entries);
    uint32_t words = o->value_index == BKV_VALUE_INDEX_PAGED ? BKV_VF_TWO_WORDS : BKV_VF_SPREAD;
    uint32_t k = auto_hashes(m, o->value_partition_entries);
    if (words == BKV_VF_TWO_WORDS) k += TWO_WORD_EXTRA_HASHES;
    *out = (bkv_vf_params){.m_bits = m,
                           .k = o->value_filter_hashes ? (uint32_t)o->value_filter_hashes : k,
                           .seed = value_seed(terms_name),
                           .partition_entries = o->value_partition_entries,
                           .words = words};
    return 1;
}

int bkv_resolve_builtin_terms(bkv_options *o, const char *recorded, void **arg, const char **name, char *canonical,
                              size_t cap, bkv_err *e) {
    *arg = NULL;
    int asked = o->value_terms_name && *o->value_terms_name;
    const char *spec = asked ? o->value_terms_name : recorded;
    if (o->value_terms || !*spec) return BKV_OK;
    int rc = bkv_terms_builtin(spec, &o->value_terms, arg, canonical, cap, e);
    if (rc == BKV_NOTFOUND)
        return asked ? bkv_fail(e, BKV_INVALID,
                                "no built-in terms extractor is named \"%s\" (words, field:SEP:N, prefix:N, json:FIELD; "
                                "or pass value_terms for one of your own)",
                                spec)
                     : BKV_OK; /* the caller's own, which must be passed: reported by the caller */
    if (rc) return rc;
    o->value_terms_arg = *arg;
    *name = canonical;
    return BKV_OK;
}

int bkv_db_value_index_setup(bkv_db *db, bkv_err *e) {
    const bkv_options *o = &db->opts;
    const char *name = o->value_terms ? o->value_terms_name : "";
    char canonical[BKV_TERMS_NAME_MAX + 1];
    int rc = bkv_resolve_builtin_terms(&db->opts, db->values.has_rec ? db->values.rec.terms_name : "",
                                       &db->values.terms_arg, &name, canonical, sizeof canonical, e);
    if (rc) return rc;
    bkv_value_index_rec *r = &db->values.rec;
    if (o->value_index_drop) {
        /* The manifest this open writes has no value index record. */
        db->values.has_rec = 0;
        return BKV_OK;
    }
    if (db->values.has_rec) {
        if (strcmp(r->terms_name, name) != 0)
            return bkv_fail(e, BKV_INVALID,
                            "%s: the value index was built with terms extractor \"%s\", not \"%s\" (open it with "
                            "value_terms and value_terms_name \"%s\")",
                            db->path, r->terms_name, name, r->terms_name);
        if (o->value_index != BKV_VALUE_INDEX_NONE) {
            /* m and k left automatic and P at its default take what the
             * index has, so an index made under other defaults still opens. */
            int p_given = o->value_filter_bits || o->value_partition_entries != BKV_DEFAULT_VALUE_PARTITION;
            if ((o->value_filter_bits && o->value_filter_bits != r->m_bits) ||
                (p_given && o->value_partition_entries != r->partition_entries) ||
                (o->value_filter_hashes && (uint64_t)o->value_filter_hashes != r->k))
                return bkv_fail(e, BKV_INVALID,
                                "%s: the value index was built with m=%llu, k=%llu, P=%llu; opened with m=%u, k=%d, P=%u "
                                "(0: automatic)",
                                db->path, (unsigned long long)r->m_bits, (unsigned long long)r->k,
                                (unsigned long long)r->partition_entries, o->value_filter_bits, o->value_filter_hashes,
                                o->value_partition_entries);
            /* Shape and order only describe memory: they may change, the
             * shape only when asked to (a typo must not rebuild it). */
            if ((uint64_t)o->value_index != r->shape && !o->value_index_reshape)
                return bkv_fail(e, BKV_INVALID,
                                "%s: the value index is %s, opened as %s (set value_index_reshape to change it, or "
                                "open with BKV_VALUE_INDEX_NONE to keep it)",
                                db->path, bkv_vindex_shape_name((int)r->shape), bkv_vindex_shape_name(o->value_index));
            r->shape = (uint64_t)o->value_index;
            r->order = (uint64_t)o->value_index_order;
        }
    } else {
        bkv_vf_params p;
        /* A read-only open reads the index the database has; making one
         * would write the manifest. */
        if (o->read_only || !bkv_value_params(o, name, &p)) return BKV_OK;
        r->m_bits = p.m_bits;
        r->k = p.k;
        r->seed = p.seed;
        r->partition_entries = p.partition_entries;
        r->words = p.words;
        r->shape = (uint64_t)o->value_index;
        r->order = (uint64_t)o->value_index_order;
        snprintf(r->terms_name, sizeof r->terms_name, "%s", name);
        db->values.has_rec = 1;
    }
    db->values.params = (bkv_vf_params){.m_bits = (uint32_t)r->m_bits, .k = (uint32_t)r->k, .seed = r->seed,
                                  .partition_entries = (uint32_t)r->partition_entries, .words = (uint32_t)r->words};
    /* The paged index reads rows from version 2 blocks; the in-memory
     * shapes read every filter whole, for which version 1 is smaller. */
    if (r->shape == BKV_VALUE_INDEX_PAGED)
        db->values.params.summary_bits = (uint32_t)(o->value_summary_bits ? o->value_summary_bits
                                                                    : BKV_DEFAULT_VALUE_SUMMARY_BITS);
    return BKV_OK;
}

/* Adds table f to the index: from the filters its builder handed over, or
 * (may_read) from its file. Filters that are missing, damaged or built with
 * other parameters become one "maybe" leaf: the whole table is scanned. */
static void index_table(bkv_db *db, bkv_file_meta *f, int may_read) {
    bkv_vf_set loaded = {0}, *vf = f->vf;
    if (db->values.rec.shape == BKV_VALUE_INDEX_PAGED) {
        /* Searches ask the tables themselves; this only notes the tables
         * a build must rewrite (a version 1 block is read whole per
         * search), reading what each keeps in memory on the way. */
        int paged = vf != NULL;
        bkv_cache_entry *entry;
        bkv_err e;
        if (!vf && may_read && bkv_db_get_table(db, f, &entry, &e) == BKV_OK) {
            paged = bkv_vs_paged(bkv_cache_value(entry), &db->values.params);
            bkv_cache_release(db->table_cache, entry);
        }
        if (!paged) BKV_COUNT(db, value_filters_unusable, 1);
        atomic_store_explicit(&f->value_unindexed, !paged, memory_order_relaxed);
        bkv_vf_set_destroy(f->vf);
        f->vf = NULL;
        return;
    }
    if (!vf && may_read) {
        bkv_cache_entry *entry;
        bkv_err e;
        if (bkv_db_get_table(db, f, &entry, &e) == BKV_OK) {
            if (bkv_vs_table_filters(bkv_cache_value(entry), &loaded, &e) == BKV_OK) vf = &loaded;
            bkv_cache_release(db->table_cache, entry);
        }
    }
    int unusable = bkv_vindex_add_table(db->values.index, f->number, vf) != BKV_OK || !vf;
    if (unusable) BKV_COUNT(db, value_filters_unusable, 1);
    atomic_store_explicit(&f->value_unindexed, unusable, memory_order_relaxed);
    bkv_vf_set_free(&loaded);
    bkv_vf_set_destroy(f->vf);
    f->vf = NULL;
}

int bkv_db_value_index_open(bkv_db *db, bkv_err *e) {
    if (!db->values.has_rec) return BKV_OK;
    if (!(db->values.index = bkv_vindex_new((int)db->values.rec.shape, &db->values.params, (int)db->values.rec.order)))
        return bkv_fail(e, BKV_NOMEM, "out of memory creating the value index");
    bkv_vindex_set_publish_lock(db->values.index, &db->values.lock);
    const bkv_tree_version *v = bkv_vset_current(&db->vset);
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < v->nfiles[l]; i++) index_table(db, v->files[l][i], 1);
    bkv_vindex_commit(db->values.index);
    return BKV_OK;
}

static int edit_adds(const bkv_version_edit *edit, uint64_t number) {
    for (size_t i = 0; i < edit->nadded; i++)
        if (edit->added[i].meta->number == number) return 1;
    return 0;
}

/* Index updates never hold db->mu (a bit-sliced update of a large table
 * takes milliseconds, and writers need the mutex), nor the index's lock
 * but to publish (searches would wait behind them): a new table enters the
 * index before the version holding it is installed, and an old one leaves
 * only after a version without it is. So the index always covers every
 * table of the current version (it may also name a few that are not, which
 * a search skips), and a search that holds the index's read lock from
 * before it picks its version until it has probed sees all of them. */
void bkv_db_value_index_forget(bkv_db *db, const uint64_t *numbers, size_t n) {
    if (!db->values.index || !n) return;
    pthread_mutex_lock(&db->values.update_mu);
    for (size_t i = 0; i < n; i++) bkv_vindex_remove_table(db->values.index, numbers[i]);
    uint64_t nodes = bkv_vindex_commit(db->values.index);
    pthread_mutex_unlock(&db->values.update_mu);
    BKV_COUNT(db, value_index_updates, 1);
    BKV_COUNT(db, value_index_nodes_recomputed, nodes);
}

static void index_update(bkv_db *db, const bkv_version_edit *edit, int add, int remove_added) {
    uint64_t t0 = bkv_monotonic_nanos();
    pthread_mutex_lock(&db->values.update_mu);
    for (size_t i = 0; add && i < edit->nadded; i++)
        if (!bkv_vindex_has_table(db->values.index, edit->added[i].meta->number))
            index_table(db, edit->added[i].meta, 1);
    for (size_t i = 0; !add && !remove_added && i < edit->ndeleted; i++)
        if (!edit_adds(edit, edit->deleted[i].number))
            bkv_vindex_remove_table(db->values.index, edit->deleted[i].number);
    for (size_t i = 0; remove_added && i < edit->nadded; i++)
        bkv_vindex_remove_table(db->values.index, edit->added[i].meta->number);
    uint64_t n = bkv_vindex_commit(db->values.index), locked = bkv_vindex_take_locked_micros(db->values.index);
    pthread_mutex_unlock(&db->values.update_mu);
    BKV_COUNT(db, value_index_updates, 1);
    BKV_COUNT(db, value_index_nodes_recomputed, n);
    BKV_COUNT(db, value_index_update_micros, (bkv_monotonic_nanos() - t0) / 1000);
    BKV_COUNT(db, value_index_locked_micros, locked);
}

void bkv_db_value_index_add(bkv_db *db, const bkv_version_edit *edit) {
    BKV_ASSERT_UNLOCKED(db);
    if (db->values.index && edit->nadded) index_update(db, edit, 1, 0);
}

void bkv_db_value_index_finish(bkv_db *db, const bkv_version_edit *edit, int installed) {
    BKV_ASSERT_UNLOCKED(db);
    if (db->values.index && (installed ? edit->ndeleted : edit->nadded)) index_update(db, edit, 0, !installed);
}

void bkv_db_value_state_init(bkv_db *db) {
    pthread_rwlock_init(&db->values.lock, NULL);
    pthread_mutex_init(&db->values.update_mu, NULL);
}

void bkv_db_value_state_free(bkv_db *db) {
    bkv_vindex_free(db->values.index);
    free(db->values.terms_arg);
    free(db->values.leaving);
    pthread_rwlock_destroy(&db->values.lock);
    pthread_mutex_destroy(&db->values.update_mu);
}

void bkv_db_value_fork_prepare(bkv_db *db) {
    pthread_mutex_lock(&db->values.update_mu);
    pthread_rwlock_wrlock(&db->values.lock);
}

void bkv_db_value_fork_parent(bkv_db *db) {
    pthread_rwlock_unlock(&db->values.lock);
    pthread_mutex_unlock(&db->values.update_mu);
}

void bkv_db_value_fork_child(bkv_db *db) { bkv_db_value_state_init(db); }

const bkv_value_index_rec *bkv_db_value_rec(const bkv_db *db) {
    return db->values.has_rec ? &db->values.rec : NULL;
}

const bkv_vf_params *bkv_db_value_params(const bkv_db *db) {
    return db->values.has_rec ? &db->values.params : NULL;
}

void bkv_db_value_rec_recovered(bkv_db *db, const bkv_value_index_rec *rec) {
    db->values.rec = *rec;
    db->values.has_rec = 1;
}

void bkv_db_value_copy_params(bkv_db *to, const bkv_db *from) { to->values.params = from->values.params; }

int bkv_db_value_same_index(const bkv_db *a, const bkv_db *b) {
    return a->values.has_rec == b->values.has_rec &&
           (!a->values.has_rec || memcmp(&a->values.rec, &b->values.rec, sizeof a->values.rec) == 0);
}

int bkv_db_has_value_index(const bkv_db *db) { return db->values.index != NULL; }

int bkv_db_value_index_info(bkv_db *db, bkv_vindex_info *in) {
    if (!db->values.index) return 0;
    pthread_rwlock_rdlock(&db->values.lock);
    bkv_vindex_get_info(db->values.index, in);
    pthread_rwlock_unlock(&db->values.lock);
    return 1;
}

void bkv_db_value_leave_later(bkv_db *db, const bkv_version_edit *edit) {
    BKV_ASSERT_LOCKED(db);
    bkv_value_state *vs = &db->values;
    if (vs->nleaving + edit->ndeleted > vs->cap_leaving) {
        size_t cap = (vs->nleaving + edit->ndeleted) * 2;
        uint64_t *grown = realloc(vs->leaving, cap * sizeof *grown);
        if (!grown) {
            bkv_db_unlock(db);
            bkv_db_value_index_finish(db, edit, 1);
            bkv_db_lock(db);
            return;
        }
        vs->leaving = grown;
        vs->cap_leaving = cap;
    }
    for (size_t i = 0; i < edit->ndeleted; i++) vs->leaving[vs->nleaving++] = edit->deleted[i].number;
}

int bkv_db_value_forget_leaving(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    bkv_value_state *vs = &db->values;
    if (!vs->nleaving) return 0;
    uint64_t *leaving = vs->leaving;
    size_t n = vs->nleaving;
    vs->leaving = NULL;
    vs->nleaving = vs->cap_leaving = 0;
    bkv_db_unlock(db);
    bkv_db_value_index_forget(db, leaving, n);
    free(leaving);
    bkv_db_lock(db);
    return 1;
}

void bkv_db_value_index_read_lock(bkv_db *db) { pthread_rwlock_rdlock(&db->values.lock); }

void bkv_db_value_index_read_unlock(bkv_db *db) { pthread_rwlock_unlock(&db->values.lock); }

int bkv_db_value_index_broken(const bkv_db *db) { return bkv_vindex_broken(db->values.index); }

int bkv_db_value_index_search(bkv_db *db, const bkv_vf_probe *probe, bkv_vindex_hit_fn fn, void *arg,
                              bkv_find_stats *st) {
    return bkv_vindex_search(db->values.index, probe, fn, arg, st);
}
