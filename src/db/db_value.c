/*
 * Search by value (docs/design.md, "Search by value").
 *
 * A search hashes its term once. The value index names the table
 * partitions whose filters may hold it; the memtables' term indexes name
 * their entries directly. Every entry found that holds the term at a
 * sequence the snapshot can see makes its key a candidate; each distinct
 * candidate is then validated with a point read at the same snapshot
 * (its newest visible version must hold the term), so results are exact
 * whatever the filters say.
 */
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"
#include "valuesearch/table_values.h"
#include "util/ikey.h"

/* ---- search ---- */

/* A search: terms combined with BKV_FIND_ALL or BKV_FIND_ANY. */
typedef struct query {
    const uint8_t *const *terms;
    const size_t *lens;
    size_t n;
    unsigned mode;
} query;

typedef struct term_match {
    const query *q;
    uint64_t found; /* bit i: the value holds term i */
} term_match;

static void match_term(void *ctx, const void *t, size_t len) {
    term_match *m = ctx;
    for (size_t i = 0; i < m->q->n; i++)
        if (!(m->found >> i & 1) && len == m->q->lens[i] && (len == 0 || memcmp(t, m->q->terms[i], len) == 0))
            m->found |= UINT64_C(1) << i;
}

static uint64_t load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Whole values are compared first by their first and last eight bytes,
 * inline: a search compares every entry of the partitions it reads, and
 * values that differ mostly differ at one end. */
static int same_value(const uint8_t *a, const uint8_t *b, size_t n) {
    if (n < 8) return n == 0 || memcmp(a, b, n) == 0;
    return load_u64(a) == load_u64(b) && load_u64(a + n - 8) == load_u64(b + n - 8) && memcmp(a, b, n) == 0;
}

static int holds_query(const bkv_db *db, const uint8_t *val, size_t vlen, const query *q) {
    if (!db->opts.value_terms && q->n == 1) return vlen == q->lens[0] && same_value(val, q->terms[0], vlen);
    term_match m = {q, 0};
    /* Without an extractor a value's one term is the value itself. */
    if (!db->opts.value_terms) match_term(&m, val, vlen);
    else db->opts.value_terms(db->opts.value_terms_arg, val, vlen, match_term, &m);
    uint64_t all = q->n == 64 ? UINT64_MAX : (UINT64_C(1) << q->n) - 1;
    return q->mode == BKV_FIND_ANY ? m.found != 0 : m.found == all;
}

typedef struct key_ref {
    const uint8_t *p;
    uint32_t len;
    uint32_t vlen;
    const uint8_t *val; /* in a list with a file: the entry's value */
} key_ref;

static int cmp_key_ref(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    return bkv_user_key_compare(x->p, x->len, y->p, y->len);
}

/* The candidate keys of one source (a scanned partition, or the
 * memtables), sorted; the search takes them front to back. */
typedef struct cand_list {
    bkv_buf bytes; /* a candidate record each (see consider) */
    key_ref *refs;
    size_t n, pos;
    uint64_t file; /* the table of a partition's candidates when it holds one version of each key
                    * (each is then its key's newest there); else 0 */
} cand_list;

/* A candidate partition and the user keys its entries lie within. */
typedef struct leaf_span {
    bkv_vleaf_ref leaf;
    const bkv_file_meta *file; /* its table, in the version the search holds */
    size_t lo_off, hi_off;   /* into finder.bounds, until sorted */
    const uint8_t *lo, *hi;
    size_t lo_len, hi_len;
} leaf_span;

typedef struct finder {
    bkv_db *db;
    const query *q;
    uint64_t snapshot;
    bkv_find_stats *st;
    bkv_vleaf_ref *leaves;      /* the index's answer: candidate partitions */
    size_t nleaves, cap_leaves;
    leaf_span *spans;           /* ... in the order of their least keys; [next_span, nspans) not read yet */
    size_t nspans, next_span;
    bkv_buf bounds;             /* the spans' key bytes */
    bkv_buf filling;            /* the candidates of the source being read (see consider) */
    size_t nfilling;
    uint64_t unique_file;       /* the table being read, when it holds one version of each key; else 0 */
    int keys_only;
    uint64_t found;             /* candidate keys found so far (with repeats) */
    cand_list **heap;           /* the sources read that have keys left, least key on top */
    size_t nheap, cap_heap;
    uint64_t planned;           /* entries in the candidate partitions */
    uint64_t covered;           /* ... in those visited so far, whether their tags let the scan pass over them or not */
    uint16_t tags[64];          /* value tags (bkv_vt_tag) an entry must have one of; ntags 0: none (an extractor) */
    size_t ntags;
    int matched;                /* the partition being scanned held the term */
    int continue_on_error;
    unsigned plan;              /* BKV_FIND_PLAN_* */
    uint64_t damaged;           /* partitions or candidates that could not be read, skipped */
    int damage_rc;              /* ... the first one's status and message */
    bkv_err damage;
} finder;

/* With continue_on_error, a partition or candidate that cannot be read
 * (damage, an I/O error) is skipped and remembered, and the search goes
 * on; the first such error ends it once every other result is out. */
static int skip_unreadable(finder *fd, int rc, const bkv_err *e) {
    if (!fd->continue_on_error || (rc != BKV_CORRUPTION && rc != BKV_IOERROR)) return 0;
    if (fd->damaged++ == 0) {
        fd->damage_rc = rc;
        fd->damage = *e;
    }
    return 1;
}

/* Costs in entries read from a candidate partition (~30-40 ns each since
 * a partition's blocks are requested ahead): an entry of the full scan's
 * merging iterator costs about three (~100 ns), a candidate's validation
 * about six (~200 ns: the newer tables' filters, most candidates needing
 * no re-read). Fitted to E6 of docs/value-search.md at 1 M and 10 M. */
#define SCAN_ENTRY_COST 3
#define VALIDATE_COST 6

/* What the index plan is on course to cost, projected from the share of
 * the candidate partitions visited so far. (Value tags cost about a
 * sixtieth of an entry read each, and are not counted.) */
static uint64_t projected_index_cost(const finder *fd) {
    uint64_t done = fd->covered, spent = fd->st->entries_scanned + VALIDATE_COST * fd->found;
    if (!done || done >= fd->planned) return spent;
    return (uint64_t)((double)spent * (double)fd->planned / (double)done);
}

/* Once a thirty-second of the candidate partitions is read (so a few
 * cannot mislead), the rate of candidates projects what the index plan
 * will cost; when that exceeds one pass over the snapshot, the pass takes
 * over. Checked after every partition read. */
static int index_plan_lost(finder *fd) {
    if (fd->covered * 32 < fd->planned) return 0;
    fd->st->index_cost = projected_index_cost(fd);
    return fd->plan == BKV_FIND_PLAN_AUTO && fd->st->index_cost > fd->st->scan_cost;
}

static int add_leaf(void *arg, const bkv_vleaf_ref *leaf) {
    finder *fd = arg;
    if (fd->nleaves == fd->cap_leaves) {
        size_t cap = fd->cap_leaves ? fd->cap_leaves * 2 : 64;
        bkv_vleaf_ref *g = realloc(fd->leaves, cap * sizeof *g);
        if (!g) return BKV_NOMEM;
        fd->leaves = g;
        fd->cap_leaves = cap;
    }
    fd->leaves[fd->nleaves++] = *leaf;
    return 0;
}

/* A candidate record in finder.filling: u32 key length, key, u32 value
 * length, value (kept only from a table with one version of each key, for
 * the result). */
static int append_candidate(finder *fd, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen) {
    uint8_t klen_bytes[4], vlen_bytes[4];
    if (!fd->unique_file || fd->keys_only) vlen = 0;
    bkv_put_u32(klen_bytes, (uint32_t)klen);
    bkv_put_u32(vlen_bytes, (uint32_t)vlen);
    if (bkv_buf_append(&fd->filling, klen_bytes, 4) || bkv_buf_append(&fd->filling, key, klen) ||
        bkv_buf_append(&fd->filling, vlen_bytes, 4) || bkv_buf_append(&fd->filling, val, vlen))
        return BKV_NOMEM;
    fd->nfilling++;
    fd->found++;
    return 0;
}

/* An entry of a memtable or table: its key is a candidate when this
 * version holds the term and the snapshot can see it. */
static int consider(void *arg, const uint8_t *ikey, size_t ilen, const uint8_t *val, size_t vlen) {
    finder *fd = arg;
    fd->st->entries_scanned++;
    if (ilen < BKV_IKEY_TRAILER) return 0;
    bkv_parsed_ikey pk = bkv_ikey_parse(ikey, ilen);
    if (pk.type != BKV_TYPE_VALUE || !holds_query(fd->db, val, vlen, fd->q)) return 0;
    fd->matched = 1;
    if (pk.seq > fd->snapshot) return 0;
    return append_candidate(fd, ikey, ilen - BKV_IKEY_TRAILER, val, vlen);
}

/* ---- the sources read, merged in key order by a binary heap ---- */

static const key_ref *list_key(const cand_list *l) { return &l->refs[l->pos]; }

static int list_before(const cand_list *a, const cand_list *b) { return cmp_key_ref(list_key(a), list_key(b)) < 0; }

static void heap_sift_down(cand_list **h, size_t n, size_t i) {
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && list_before(h[c + 1], h[c])) c++;
        if (!list_before(h[c], h[i])) return;
        cand_list *t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

static void free_list(cand_list *l) {
    if (!l) return;
    bkv_buf_free(&l->bytes);
    free(l->refs);
    free(l);
}

/* Makes the keys found since the last call one sorted source. */
static int push_filled(finder *fd) {
    size_t n = fd->nfilling;
    fd->nfilling = 0;
    if (n == 0) {
        bkv_buf_clear(&fd->filling);
        return BKV_OK;
    }
    if (fd->nheap == fd->cap_heap) {
        size_t cap = fd->cap_heap ? fd->cap_heap * 2 : 16;
        cand_list **g = realloc(fd->heap, cap * sizeof *g);
        if (!g) return BKV_NOMEM;
        fd->heap = g;
        fd->cap_heap = cap;
    }
    cand_list *l = calloc(1, sizeof *l);
    if (!l || !(l->refs = malloc(n * sizeof *l->refs))) {
        free(l);
        return BKV_NOMEM;
    }
    l->bytes = fd->filling;
    bkv_buf_init(&fd->filling);
    const uint8_t *p = l->bytes.data;
    for (size_t i = 0; i < n; i++) {
        key_ref *r = &l->refs[i];
        r->len = bkv_get_u32(p);
        r->p = p + 4;
        p += 4 + r->len;
        r->vlen = bkv_get_u32(p);
        r->val = p + 4;
        p += 4 + r->vlen;
    }
    l->file = fd->unique_file;
    qsort(l->refs, n, sizeof *l->refs, cmp_key_ref); /* a partition's are in order already: the memtables' are not */
    l->n = n;
    size_t i = fd->nheap++;
    fd->heap[i] = l;
    while (i > 0 && list_before(fd->heap[i], fd->heap[(i - 1) / 2])) {
        cand_list *t = fd->heap[i];
        fd->heap[i] = fd->heap[(i - 1) / 2];
        fd->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    return BKV_OK;
}

/* Moves the least key into out and steps past it. When the key's table
 * holds no newer version of it, *file is that table and val holds the
 * value found there (unless keys_only); else *file is 0. REQUIRES: nheap > 0. */
static int pop_least(finder *fd, bkv_buf *out, bkv_buf *val, uint64_t *file) {
    cand_list *l = fd->heap[0];
    const key_ref *k = list_key(l);
    if (bkv_buf_set(out, k->p, k->len)) return BKV_NOMEM;
    *file = l->file;
    if (*file && bkv_buf_set(val, k->val, k->vlen)) return BKV_NOMEM;
    if (++l->pos == l->n) {
        fd->heap[0] = fd->heap[--fd->nheap];
        free_list(l);
    }
    heap_sift_down(fd->heap, fd->nheap, 0);
    return BKV_OK;
}

static void free_index_plan(finder *fd) {
    for (size_t i = 0; i < fd->nheap; i++) free_list(fd->heap[i]);
    free(fd->heap);
    fd->heap = NULL;
    fd->nheap = fd->cap_heap = 0;
    free(fd->spans);
    fd->spans = NULL;
    fd->nspans = fd->next_span = 0;
    free(fd->leaves);
    fd->leaves = NULL;
    fd->nleaves = fd->cap_leaves = 0;
    bkv_buf_free(&fd->bounds);
    bkv_buf_free(&fd->filling);
}

static const bkv_file_meta *find_file(const bkv_tree_version *v, uint64_t number) {
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < v->nfiles[l]; i++)
            if (v->files[l][i]->number == number) return v->files[l][i];
    return NULL;
}

/* The entries a candidate partition holds, as the plan counts them: P,
 * or the whole table's when it is one partition or smaller than P. */
static uint64_t span_entries(const finder *fd, const leaf_span *sp) {
    uint64_t p = bkv_db_value_params(fd->db)->partition_entries, n = sp->file->entries;
    return p && sp->leaf.last_block != UINT32_MAX && p < n ? p : n;
}

/* Reads the blocks of a partition that its value tags do not rule out:
 * every block when there are none to use. */
static int scan_tagged(finder *fd, bkv_table *t, const bkv_vleaf_ref *lf, int read_flags, bkv_err *e) {
    uint8_t stack[256], *maybe = NULL;
    uint32_t nb = lf->last_block != UINT32_MAX ? lf->last_block - lf->first_block + 1 : 0;
    if (fd->ntags && nb) maybe = nb <= sizeof stack ? stack : malloc(nb);
    if (!maybe || !bkv_vs_blocks(t, bkv_db_value_params(fd->db)->seed, lf->first_block, lf->last_block, fd->tags,
                                          fd->ntags, read_flags, maybe)) {
        if (maybe != stack) free(maybe);
        return bkv_table_scan_blocks(t, lf->first_block, lf->last_block, read_flags, bkv_db_tstats(fd->db), consider,
                                     fd, e);
    }
    int rc = 0;
    for (uint32_t i = 0; i < nb && !rc; i++) {
        if (!maybe[i]) continue;
        uint32_t j = i;
        while (j + 1 < nb && maybe[j + 1]) j++;
        rc = bkv_table_scan_blocks(t, lf->first_block + i, lf->first_block + j, read_flags, bkv_db_tstats(fd->db),
                                   consider, fd, e);
        i = j;
    }
    if (maybe != stack) free(maybe);
    return rc;
}

static int scan_partition(finder *fd, const bkv_read_options *ro, const leaf_span *sp, bkv_err *e) {
    const bkv_vleaf_ref *lf = &sp->leaf;
    bkv_cache_entry *entry;
    int rc = bkv_db_get_table(fd->db, sp->file, &entry, e);
    if (rc) return rc;
    fd->matched = 0;
    /* Where each key has one version, the one a partition shows is the
     * table's newest (tables before num.keys was recorded show 0). */
    const bkv_table_props *props = bkv_table_properties(bkv_cache_value(entry));
    fd->unique_file = props->num_keys && props->num_keys == props->num_entries ? sp->file->number : 0;
    rc = scan_tagged(fd, bkv_cache_value(entry), lf, ro ? bkv_db_read_flags(ro) : 0, e);
    bkv_cache_release(fd->db->table_cache, entry);
    fd->covered += span_entries(fd, sp);
    if (rc == BKV_NOMEM) bkv_fail(e, rc, "out of memory collecting candidates");
    if (rc) fd->unique_file = 0;
    fd->st->partitions_scanned++;
    fd->st->partitions_matched += (uint64_t)fd->matched;
    return rc;
}

/* Reads the next candidate partition into a source of its own. */
static int open_next_span(finder *fd, const bkv_read_options *ro, bkv_err *e) {
    int rc = scan_partition(fd, ro, &fd->spans[fd->next_span++], e);
    if (rc && skip_unreadable(fd, rc, e)) rc = 0; /* the keys it gave before the damage are still candidates */
    if (!rc && push_filled(fd)) rc = bkv_fail(e, BKV_NOMEM, "out of memory collecting candidates");
    fd->unique_file = 0;
    return rc;
}

#define FULL_SCAN 1 /* the planner's answer when a scan of the whole snapshot is cheaper */

/* The entries a scan of the snapshot reads: from the resume key on when
 * there is one (a page of results costs the scan only the rest), a table
 * the key falls inside counted by the share of its bytes after the key. */
static uint64_t snapshot_entries(bkv_db *db, const bkv_read_state *rs, const bkv_buf *after) {
    uint64_t n = bkv_memtable_entries(rs->mem);
    for (int i = 0; i < rs->nimm; i++) n += bkv_memtable_entries(rs->imm[i]);
    bkv_buf lo;
    bkv_buf_init(&lo);
    int cut = after && !bkv_ikey_seek_key(&lo, after->data, after->len);
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < rs->version->nfiles[l]; i++) {
            const bkv_file_meta *f = rs->version->files[l][i];
            if (!cut || bkv_ikey_compare(f->smallest, f->smallest_len, lo.data, lo.len) >= 0) {
                n += f->entries;
                continue;
            }
            if (bkv_ikey_compare(f->largest, f->largest_len, lo.data, lo.len) < 0) continue;
            bkv_cache_entry *entry;
            bkv_err e;
            if (f->size == 0 || bkv_db_get_table(db, f, &entry, &e) != BKV_OK) {
                n += f->entries;
                continue;
            }
            uint64_t from = bkv_table_approximate_offset(bkv_cache_value(entry), lo.data, lo.len);
            bkv_cache_release(db->table_cache, entry);
            n += from >= f->size ? 0 : (uint64_t)((double)f->entries * (double)(f->size - from) / (double)f->size);
        }
    bkv_buf_free(&lo);
    return n;
}

static int cmp_leaf(const void *a, const void *b) {
    const bkv_vleaf_ref *x = a, *y = b;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    return x->part < y->part ? -1 : x->part > y->part;
}

static size_t sort_unique_leaves(bkv_vleaf_ref *v, size_t n) {
    if (n < 2) return n; /* v may be NULL when n is 0 */
    qsort(v, n, sizeof *v, cmp_leaf);
    size_t out = 0;
    for (size_t i = 0; i < n; i++)
        if (out == 0 || cmp_leaf(&v[out - 1], &v[i]) != 0) v[out++] = v[i];
    return out;
}

/* Keeps the leaves of v[0, na) that are also in v[na, na + nb) (both
 * sorted), in place at the front; their number. */
static size_t intersect_leaves(bkv_vleaf_ref *v, size_t na, size_t nb) {
    size_t i = 0, j = na, out = 0;
    while (i < na && j < na + nb) {
        int c = cmp_leaf(&v[i], &v[j]);
        if (c == 0) v[out++] = v[i], j++;
        if (c <= 0) i++;
        else j++;
    }
    return out;
}

typedef struct table_hits {
    finder *fd;
    uint64_t file;
} table_hits;

static int add_table_part(void *arg, uint32_t first_block, uint32_t last_block) {
    table_hits *th = arg;
    th->fd->st->leaves_positive++;
    return add_leaf(th->fd, &(bkv_vleaf_ref){th->file, first_block, first_block, last_block});
}

/* The paged index: each table of the read's version answers from its
 * summary and, past it, from the rows of its filters. Every table's
 * summary first, so that the rows of all the tables that say "maybe" are
 * asked of the device together (a cold search then waits about once for
 * rows, once for the blocks they name). What a table's probe reads is
 * asked of the CPU in stages over the SUMMARY_AHEAD tables before it: one
 * after the other, each table's chain of cache misses (its head, the
 * summary's handle, the summary's lines) cost about a microsecond after
 * an open, a quarter of a cold search at 30 M entries (docs/design.md). */
#define STAGE_SPACING 2
#define SUMMARY_AHEAD (STAGE_SPACING * BKV_VS_PREFETCH_STAGES)
static int search_tables(finder *fd, const bkv_read_state *rs, uint64_t h, int read_flags) {
    size_t n = 0;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) n += rs->version->nfiles[l];
    typedef struct maybe_table {
        bkv_cache_entry *entry;
        uint64_t number;
    } maybe_table;
    bkv_file_meta *fstack[256], **files = n <= 256 ? fstack : malloc(n * sizeof *files);
    maybe_table mstack[64], *maybe = n <= 64 ? mstack : malloc(n * sizeof *maybe);
    int rc = files && maybe ? 0 : BKV_NOMEM;
    size_t nfiles = 0, nmaybe = 0;
    for (int l = 0; l < BKV_MAX_LEVELS && !rc; l++)
        for (size_t i = 0; i < rs->version->nfiles[l]; i++) files[nfiles++] = rs->version->files[l][i];
    bkv_cache_entry *ring[SUMMARY_AHEAD] = {0};
    for (size_t i = 0; !rc && i < nfiles + SUMMARY_AHEAD; i++) {
        bkv_cache_entry **slot = &ring[i % SUMMARY_AHEAD];
        if (i >= SUMMARY_AHEAD) { /* the table asked for SUMMARY_AHEAD steps ago: probed */
            const bkv_file_meta *f = files[i - SUMMARY_AHEAD];
            bkv_cache_entry *entry = *slot;
            *slot = NULL;
            if (!entry) {
                /* A table that cannot be opened is left to the scan of its partitions, which reports it. */
                rc = add_leaf(fd, &(bkv_vleaf_ref){f->number, 0, 0, UINT32_MAX});
            } else {
                bkv_vs_table_probe vs;
                rc = bkv_vs_probe(bkv_cache_value(entry), bkv_db_value_params(fd->db), h, &vs);
                fd->st->nodes_probed++;
                fd->st->nodes_positive += (uint64_t)vs.summary_maybe;
                fd->st->leaves += vs.partitions;
                if (!rc && vs.summary_maybe) {
                    fd->st->leaves_probed += vs.partitions;
                    maybe[nmaybe++] = (maybe_table){entry, f->number};
                } else {
                    bkv_cache_release(fd->db->table_cache, entry);
                }
            }
        }
        bkv_err e;
        if (!rc && i < nfiles && bkv_db_get_table(fd->db, files[i], slot, &e) != BKV_OK) *slot = NULL;
        for (int stage = 0; !rc && stage < BKV_VS_PREFETCH_STAGES; stage++) {
            size_t back = (size_t)stage * STAGE_SPACING; /* table i - back, at this stage */
            if (i >= back && i - back < nfiles && ring[(i - back) % SUMMARY_AHEAD])
                bkv_vs_prefetch(bkv_cache_value(ring[(i - back) % SUMMARY_AHEAD]), h, stage);
        }
    }
    for (size_t i = 0; i < SUMMARY_AHEAD; i++) /* left by a failure */
        if (ring[i]) bkv_cache_release(fd->db->table_cache, ring[i]);
    for (size_t i = 0; i < nmaybe; i++) {
        table_hits th = {fd, maybe[i].number};
        if (!rc)
            rc = bkv_vs_match(bkv_cache_value(maybe[i].entry), bkv_db_value_params(fd->db), h, read_flags, add_table_part,
                                       &th);
        bkv_cache_release(fd->db->table_cache, maybe[i].entry);
    }
    if (files != fstack) free(files);
    if (maybe != mstack) free(maybe);
    return rc;
}

/* The candidate partitions: for ANY the union of each term's, for ALL
 * their intersection, found before any partition is read. */
static int search_index(finder *fd, const bkv_read_state *rs, const uint64_t *hashes, int read_flags) {
    bkv_db *db = fd->db;
    const query *q = fd->q;
    uint64_t leaves = 0;
    for (size_t t = 0; t < q->n; t++) {
        if (t > 0 && q->mode == BKV_FIND_ALL && fd->nleaves == 0) break;
        bkv_vf_probe probe;
        bkv_vf_probe_from_hash(&probe, bkv_db_value_params(db), hashes[t]);
        size_t before = fd->nleaves;
        uint64_t counted = fd->st->leaves;
        int rc = bkv_db_value_rec(db)->shape == BKV_VALUE_INDEX_PAGED
                     ? search_tables(fd, rs, hashes[t], read_flags)
                     : bkv_db_value_index_search(db, &probe, add_leaf, fd, fd->st);
        if (rc) return rc;
        leaves = fd->st->leaves - counted;
        fd->st->leaves = counted;
        if (q->n == 1 || q->mode == BKV_FIND_ANY) continue;
        size_t added = sort_unique_leaves(fd->leaves + before, fd->nleaves - before);
        fd->nleaves = t == 0 ? added : intersect_leaves(fd->leaves, before, added);
    }
    fd->st->leaves += leaves;
    if (q->n > 1 && q->mode == BKV_FIND_ANY) fd->nleaves = sort_unique_leaves(fd->leaves, fd->nleaves);
    return 0;
}

static int cmp_span(const void *a, const void *b) {
    const leaf_span *x = a, *y = b;
    return bkv_user_key_compare(x->lo, x->lo_len, y->lo, y->lo_len);
}

static int keep_bound(finder *fd, const uint8_t *k, size_t n, size_t *off) {
    *off = fd->bounds.len;
    return bkv_buf_append(&fd->bounds, k, n);
}

/* Orders the candidate partitions by the least key each may hold, so the
 * search reads one only when the merge reaches it: what is held at once
 * is the candidates of the partitions overlapping one key (about one per
 * sorted run), never all the results. A partition wholly at or before
 * the resume key (after, when given) is left out. Also counts planned. */
static int order_spans(finder *fd, const bkv_read_state *rs, const bkv_buf *after, bkv_err *e) {
    if (fd->nleaves && !(fd->spans = malloc(fd->nleaves * sizeof *fd->spans)))
        return bkv_fail(e, BKV_NOMEM, "out of memory ordering partitions");
    for (size_t i = 0; i < fd->nleaves; i++) {
        const bkv_vleaf_ref *lf = &fd->leaves[i];
        const bkv_file_meta *f = find_file(rs->version, lf->file);
        if (!f) continue; /* indexed ahead of its version, or after it left: not part of this read */
        bkv_cache_entry *entry;
        int rc = bkv_db_get_table(fd->db, f, &entry, e);
        if (rc && skip_unreadable(fd, rc, e)) continue;
        if (rc) return rc;
        const uint8_t *lo, *hi;
        size_t lo_len, hi_len;
        rc = bkv_table_blocks_key_range(bkv_cache_value(entry), lf->first_block, lf->last_block, &lo, &lo_len, &hi,
                                        &hi_len, e);
        if (!rc && !lo) { /* the table's first block: its least key */
            lo = f->smallest;
            lo_len = f->smallest_len - BKV_IKEY_TRAILER;
        }
        leaf_span sp = {.leaf = *lf, .file = f, .lo_len = lo_len, .hi_len = hi_len};
        int keep = !rc && hi && !(after && bkv_user_key_compare(hi, hi_len, after->data, after->len) <= 0);
        if (keep && (keep_bound(fd, lo, lo_len, &sp.lo_off) || keep_bound(fd, hi, hi_len, &sp.hi_off)))
            rc = bkv_fail(e, BKV_NOMEM, "out of memory ordering partitions");
        bkv_cache_release(fd->db->table_cache, entry);
        if (rc && skip_unreadable(fd, rc, e)) continue;
        if (rc) return rc;
        if (!keep) continue;
        fd->spans[fd->nspans++] = sp;
        fd->planned += span_entries(fd, &sp);
    }
    for (size_t i = 0; i < fd->nspans; i++) {
        fd->spans[i].lo = fd->bounds.data + fd->spans[i].lo_off;
        fd->spans[i].hi = fd->bounds.data + fd->spans[i].hi_off;
    }
    if (fd->nspans > 1) qsort(fd->spans, fd->nspans, sizeof *fd->spans, cmp_span);
    free(fd->leaves); /* the spans hold what is left of the index's answer */
    fd->leaves = NULL;
    fd->nleaves = fd->cap_leaves = 0;
    return BKV_OK;
}

/* Plans a search at the read state it takes into rs: finds the candidate
 * partitions and the memtables' candidates, reads the first thirty-second
 * of the partitions to learn the rate of candidates, and answers BKV_OK
 * (the index plan, to go on in next_candidate) or FULL_SCAN. */
static int plan_search(finder *fd, const bkv_read_options *ro, bkv_read_state *rs, const uint64_t *hashes,
                       const bkv_buf *after, bkv_err *e) {
    bkv_db *db = fd->db;
    int rc = 0;
    /* Without an extractor an entry's one term is its value, so its tag
     * is that term's: one of the terms' (ANY), or the first's (ALL: an
     * entry holding every term holds the first). */
    if (!db->opts.value_terms) {
        fd->ntags = fd->q->mode == BKV_FIND_ALL ? 1 : fd->q->n;
        for (size_t t = 0; t < fd->ntags; t++) fd->tags[t] = bkv_vt_tag(hashes[t]);
    }
    if (bkv_db_value_rec(db)->shape == BKV_VALUE_INDEX_PAGED) {
        /* Nothing to lock: each table of the version answers for itself. */
        bkv_read_state_acquire(db, ro, rs);
        rc = search_index(fd, rs, hashes, ro ? bkv_db_read_flags(ro) : BKV_READ_FILL_CACHE);
    } else {
        /* The lock first: the version picked under it has all its tables
         * in the index until the probe is done. */
        bkv_db_value_index_read_lock(db);
        bkv_read_state_acquire(db, ro, rs);
        if (!bkv_db_value_index_broken(db)) {
            rc = search_index(fd, rs, hashes, 0);
        } else {
            for (int l = 0; l < BKV_MAX_LEVELS; l++)
                for (size_t i = 0; !rc && i < rs->version->nfiles[l]; i++)
                    rc = add_leaf(fd, &(bkv_vleaf_ref){rs->version->files[l][i]->number, 0, 0, UINT32_MAX});
        }
        bkv_db_value_index_read_unlock(db);
    }
    fd->snapshot = rs->snapshot;
    if (rc) return bkv_fail(e, BKV_NOMEM, "out of memory collecting partitions");

    /* A memtable names the entries holding a term; every entry holding
     * all of them holds the first. */
    size_t lookups = fd->q->mode == BKV_FIND_ALL ? 1 : fd->q->n;
    for (size_t t = 0; !rc && t < lookups; t++)
        for (int i = -1; !rc && i < rs->nimm; i++)
            rc = bkv_memtable_find_term(i < 0 ? rs->mem : rs->imm[i], hashes[t], consider, fd);
    fd->st->memtable_candidates = fd->found;
    if (rc || push_filled(fd)) return bkv_fail(e, BKV_NOMEM, "out of memory collecting candidates");
    if ((rc = order_spans(fd, rs, after, e))) return rc;
    /* Every candidate costs a point read to validate, which the index
     * cannot foresee: the plan learns the rate from the partitions read. */
    fd->st->scan_cost = SCAN_ENTRY_COST * snapshot_entries(db, rs, after);
    fd->st->index_cost = fd->planned + VALIDATE_COST * fd->found;
    if (fd->plan == BKV_FIND_PLAN_SCAN) return FULL_SCAN;
    if (fd->plan != BKV_FIND_PLAN_AUTO) return BKV_OK;
    while (fd->next_span < fd->nspans && fd->covered * 32 < fd->planned)
        if ((rc = open_next_span(fd, ro, e))) return rc;
    return index_plan_lost(fd) ? FULL_SCAN : BKV_OK;
}

#define MAX_QUERY_TERMS 64

/* A search in progress. The index plan merges the candidate keys of the
 * partitions it reads, in key order, reading each partition only when
 * the merge reaches its least key, and validates one candidate per next()
 * at the read state it holds; the scan plan walks an iterator over the
 * whole snapshot at that same state and checks each entry. */
struct bkv_find_iter {
    bkv_db *db;
    bkv_read_options ro;
    const bkv_read_options *rop;  /* &ro, or NULL for the defaults */
    query q;
    uint8_t *term_bytes;          /* the terms, copied */
    const uint8_t *terms[MAX_QUERY_TERMS];
    size_t lens[MAX_QUERY_TERMS];
    uint64_t limit;               /* 0: none */
    int keys_only;
    bkv_buf last;                 /* every key up to it is decided (when have_last): the resume key at first */
    int have_last;
    bkv_buf cand, cand_val;       /* the candidate being validated, and its value when its table's newest */
    bkv_find_stats st;
    finder fd;
    bkv_read_state rs;
    int have_rs;                  /* rs is held (the scan's iterator takes it over) */
    bkv_iter *scan;               /* the scan plan's iterator (NULL until the first next) */
    bkv_buf key, val;
    int valid;
    uint64_t returned;
    int rc;
    bkv_err err;
};

void bkv_find_options_init_sized(bkv_find_options *fo, size_t size) {
    bkv_find_options d;
    memset(&d, 0, sizeof d);
    bkv_init_sized(fo, size, &d, sizeof d);
}

void(bkv_find_options_init)(bkv_find_options *fo) { bkv_find_options_init_sized(fo, sizeof *fo); }

static int fail_iter(bkv_find_iter *it, int rc) {
    it->rc = rc;
    it->valid = 0;
    return bkv_db_error(it->db, rc, &it->err);
}

static int set_result(bkv_find_iter *it, const void *k, size_t kl, const void *v, size_t vl) {
    if (bkv_buf_set(&it->key, k, kl) || (!it->keys_only && bkv_buf_set(&it->val, v, vl)))
        return fail_iter(it, bkv_fail(&it->err, BKV_NOMEM, "out of memory returning a result"));
    it->valid = 1;
    it->returned++;
    it->st.results++;
    return BKV_OK;
}

int bkv_find_iter_create(bkv_db *db, const bkv_read_options *ro, const void *const *terms, const size_t *tlens,
                         size_t n, const bkv_find_options *fo, bkv_find_iter **out) {
    if (!out) return bkv_db_arg_error(db, "bkv_find_iter_create");
    *out = NULL;
    if (!db || !terms || !tlens) return bkv_db_arg_error(db, "bkv_find_iter_create");
    bkv_err e = {{0}};
    bkv_find_options fo_local;
    bkv_find_options_init(&fo_local);
    if (fo && bkv_adopt_options(&fo_local, sizeof fo_local, fo, "bkv_find_options", &e))
        return bkv_db_error(db, BKV_INVALID, &e);
    if (n == 0 || n > MAX_QUERY_TERMS || (fo_local.mode != BKV_FIND_ALL && fo_local.mode != BKV_FIND_ANY))
        return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "a search takes 1 to %d terms and BKV_FIND_ALL or "
                                                           "BKV_FIND_ANY (got %zu terms, mode %u)",
                                         MAX_QUERY_TERMS, n, fo_local.mode),
                            &e);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!terms[i] && tlens[i]) return bkv_db_arg_error(db, "bkv_find_iter_create");
        total += tlens[i];
    }
    if ((fo_local.after == NULL && fo_local.after_len) || (fo_local.continue_on_error & ~1) ||
        fo_local.plan > BKV_FIND_PLAN_SCAN)
        return bkv_db_error(db, BKV_INVALID, &(bkv_err){"bkv_find_iter_create: bkv_find_options.after is NULL with a length, or continue_on_error or plan is out of range"});
    bkv_read_options ro_local;
    if (bkv_db_read_options(db, &ro, &ro_local, &e)) return bkv_db_error(db, BKV_INVALID, &e);
    if (!bkv_db_has_value_index(db))
        return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "%s: the database has no value index", db->path), &e);
    bkv_find_iter *it = calloc(1, sizeof *it);
    if (!it || !(it->term_bytes = malloc(total ? total : 1))) {
        free(it);
        return bkv_db_error(db, BKV_NOMEM, NULL);
    }
    it->db = db;
    atomic_fetch_add_explicit(&db->live_iters, 1, memory_order_relaxed);
    if (ro) {
        it->ro = *ro;
        it->rop = &it->ro;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (tlens[i]) memcpy(it->term_bytes + at, terms[i], tlens[i]);
        it->terms[i] = it->term_bytes + at;
        it->lens[i] = tlens[i];
        at += tlens[i];
    }
    it->q = (query){it->terms, it->lens, n, fo_local.mode};
    it->limit = fo_local.limit;
    it->keys_only = fo_local.keys_only;
    bkv_buf_init(&it->last);
    bkv_buf_init(&it->cand);
    bkv_buf_init(&it->cand_val);
    bkv_buf_init(&it->key);
    bkv_buf_init(&it->val);
    it->fd = (finder){.db = db, .q = &it->q, .st = &it->st, .continue_on_error = fo_local.continue_on_error,
                      .plan = fo_local.plan, .keys_only = fo_local.keys_only};
    bkv_buf_init(&it->fd.bounds);
    bkv_buf_init(&it->fd.filling);
    if (fo_local.after) {
        it->have_last = 1;
        if (bkv_buf_set(&it->last, fo_local.after, fo_local.after_len)) {
            bkv_find_iter_destroy(it);
            return bkv_db_error(db, BKV_NOMEM, NULL);
        }
    }
    BKV_COUNT(db, value_searches, 1);
    uint64_t hashes[MAX_QUERY_TERMS];
    for (size_t i = 0; i < n; i++) hashes[i] = bkv_vf_term_hash(bkv_db_value_params(db), it->terms[i], it->lens[i]);
    it->have_rs = 1;
    int rc = plan_search(&it->fd, it->rop, &it->rs, hashes, it->have_last ? &it->last : NULL, &it->err);
    if (rc == FULL_SCAN) {
        free_index_plan(&it->fd);
        it->st.plan_scan = 1;
        rc = BKV_OK;
    }
    if (rc) {
        int status = bkv_db_error(db, rc, &it->err);
        bkv_find_iter_destroy(it);
        return status;
    }
    *out = it;
    return BKV_OK;
}

/* The scan plan: an iterator at the search's read state, from the first
 * key not yet decided. */
static int next_scanned(bkv_find_iter *it) {
    if (!it->scan) {
        it->have_rs = 0; /* taken over by the iterator, even when it cannot be made */
        int rc = bkv_iter_create_at(it->db, it->rop, &it->rs, &it->scan);
        if (rc) return fail_iter(it, bkv_fail(&it->err, rc, "out of memory creating the scan's iterator"));
        if (it->have_last) {
            bkv_iter_seek(it->scan, it->last.data, it->last.len);
            size_t kl;
            const void *k;
            if (bkv_iter_valid(it->scan) && (k = bkv_iter_key(it->scan, &kl)) &&
                bkv_user_key_compare(k, kl, it->last.data, it->last.len) == 0)
                bkv_iter_next(it->scan);
        } else {
            bkv_iter_seek_to_first(it->scan);
        }
    } else {
        bkv_iter_next(it->scan);
    }
    for (; bkv_iter_valid(it->scan); bkv_iter_next(it->scan)) {
        size_t kl, vl;
        const void *k = bkv_iter_key(it->scan, &kl), *v = bkv_iter_value(it->scan, &vl);
        it->st.entries_scanned++;
        if (holds_query(it->db, v, vl, &it->q)) return set_result(it, k, kl, v, vl);
    }
    int rc = bkv_iter_status(it->scan);
    if (rc) return fail_iter(it, bkv_fail(&it->err, rc, "%s", bkv_errmsg(it->db)));
    return BKV_NOTFOUND;
}

static int next_candidate(bkv_find_iter *it) {
    finder *fd = &it->fd;
    for (;;) {
        /* A partition that may hold a key up to the least one found is
         * read before that key is taken: results come in key order. */
        while (fd->next_span < fd->nspans) {
            const leaf_span *sp = &fd->spans[fd->next_span];
            const key_ref *least = fd->nheap ? list_key(fd->heap[0]) : NULL;
            if (least && bkv_user_key_compare(sp->lo, sp->lo_len, least->p, least->len) > 0) break;
            int rc = open_next_span(fd, it->rop, &it->err);
            if (rc) return fail_iter(it, rc);
            if (index_plan_lost(fd)) {
                /* Every key up to the last one taken is decided; the scan goes on after it. */
                free_index_plan(fd);
                it->st.plan_scan = 1;
                return next_scanned(it);
            }
        }
        if (fd->nheap == 0) return BKV_NOTFOUND;
        uint64_t file;
        if (pop_least(fd, &it->cand, &it->cand_val, &file))
            return fail_iter(it, bkv_fail(&it->err, BKV_NOMEM, "out of memory"));
        const uint8_t *k = it->cand.data;
        size_t kl = it->cand.len;
        if (it->have_last && bkv_user_key_compare(k, kl, it->last.data, it->last.len) <= 0) continue;
        if (bkv_buf_set(&it->last, k, kl)) return fail_iter(it, bkv_fail(&it->err, BKV_NOMEM, "out of memory"));
        it->have_last = 1;
        it->st.candidates++;
        void *v;
        size_t vn;
        /* A candidate that is the newest version in its table needs only
         * the newer sources asked: when none holds the key, the value
         * found in the partition is the answer, without reading it again.
         * Not when a range deletion may cover the key: the whole get
         * decides, from the version's sequence. */
        if (file && bkv_tree_version_covers(it->rs.version, k, kl, 0, it->rs.snapshot)) file = 0;
        int reached;
        int rc = bkv_db_get_before(it->db, it->rop, &it->rs, k, kl, file, &reached, &v, &vn, &it->err);
        if (reached) {
            BKV_COUNT(it->db, value_candidates_proven, 1);
            return set_result(it, k, kl, it->cand_val.data, it->cand_val.len);
        }
        if (rc == BKV_NOTFOUND || (rc && skip_unreadable(fd, rc, &it->err))) continue;
        if (rc) return fail_iter(it, rc);
        rc = holds_query(it->db, v, vn, &it->q) ? set_result(it, k, kl, v, vn) : BKV_NOTFOUND;
        free(v);
        if (rc != BKV_NOTFOUND) return rc;
    }
}

int bkv_find_iter_next(bkv_find_iter *it) {
    if (!it) return bkv_db_arg_error(NULL, "bkv_find_iter_next");
    if (it->rc) return it->rc;
    it->valid = 0;
    int rc = BKV_NOTFOUND;
    if (!it->limit || it->returned < it->limit) rc = it->st.plan_scan ? next_scanned(it) : next_candidate(it);
    if (rc != BKV_NOTFOUND || !it->fd.damaged) return rc;
    /* The end, short of what could not be read: say so, naming the first. */
    bkv_fail(&it->err, it->fd.damage_rc, "%s (%llu unreadable part%s skipped; every other result was returned)",
             it->fd.damage.msg, (unsigned long long)it->fd.damaged, it->fd.damaged == 1 ? "" : "s");
    return fail_iter(it, it->fd.damage_rc);
}

const void *bkv_find_iter_key(const bkv_find_iter *it, size_t *klen) {
    if (!it || !it->valid) {
        if (klen) *klen = 0;
        return NULL;
    }
    if (klen) *klen = it->key.len;
    return it->key.len ? it->key.data : (const void *)"";
}

const void *bkv_find_iter_value(const bkv_find_iter *it, size_t *vlen) {
    if (!it || !it->valid || it->keys_only) {
        if (vlen) *vlen = 0;
        return NULL;
    }
    if (vlen) *vlen = it->val.len;
    return it->val.len ? it->val.data : (const void *)"";
}

int bkv_find_iter_status(const bkv_find_iter *it) { return it ? it->rc : BKV_INVALID; }

void bkv_find_iter_stats(const bkv_find_iter *it, bkv_find_stats *st) {
    if (it && st) *st = it->st;
}

void bkv_find_iter_destroy(bkv_find_iter *it) {
    if (!it) return;
    bkv_iter_destroy(it->scan);
    if (it->have_rs) bkv_read_state_release(&it->rs);
    atomic_fetch_sub_explicit(&it->db->live_iters, 1, memory_order_relaxed);
    free_index_plan(&it->fd);
    bkv_buf_free(&it->last);
    bkv_buf_free(&it->cand);
    bkv_buf_free(&it->cand_val);
    bkv_buf_free(&it->key);
    bkv_buf_free(&it->val);
    free(it->term_bytes);
    free(it);
}

/* The callback form: the iterator, driven to the end or until fn stops. */
int bkv_find_values(bkv_db *db, const bkv_read_options *ro, const void *const *terms, const size_t *tlens, size_t n,
                    unsigned mode, int (*fn)(void *arg, const void *key, size_t klen, const void *val, size_t vlen),
                    void *arg, bkv_find_stats *stats) {
    if (!fn) return bkv_db_arg_error(db, "bkv_find_values");
    bkv_find_options fo;
    bkv_find_options_init(&fo);
    fo.mode = mode;
    bkv_find_iter *it;
    int rc = bkv_find_iter_create(db, ro, terms, tlens, n, &fo, &it);
    if (stats) memset(stats, 0, sizeof *stats);
    if (rc) return rc;
    while ((rc = bkv_find_iter_next(it)) == BKV_OK) {
        size_t kl, vl;
        const void *k = bkv_find_iter_key(it, &kl), *v = bkv_find_iter_value(it, &vl);
        if (fn(arg, k, kl, v, vl)) break;
    }
    if (rc == BKV_NOTFOUND) rc = BKV_OK;
    if (rc == BKV_OK) rc = bkv_find_iter_status(it);
    bkv_find_iter_stats(it, stats);
    bkv_find_iter_destroy(it);
    return rc;
}

int bkv_find_value(bkv_db *db, const bkv_read_options *ro, const void *val, size_t vlen,
                   int (*fn)(void *arg, const void *key, size_t klen, const void *val, size_t vlen), void *arg,
                   bkv_find_stats *stats) {
    if (!val && vlen) return bkv_db_arg_error(db, "bkv_find_value");
    const void *terms[1] = {val ? val : ""};
    return bkv_find_values(db, ro, terms, &vlen, 1, BKV_FIND_ALL, fn, arg, stats);
}

