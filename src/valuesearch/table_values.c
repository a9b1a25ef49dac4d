/* Value search's reading of a table: the value filter block's head, kept
 * in the table's slot, the rows a search names, and the value tags. */
#include "valuesearch/table_values.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "table/format.h"
#include "util/coding.h"

/* What the paged value index keeps of a table (docs/format.md, value
 * filter block version 2): where each partition starts and the summary;
 * the rows are read per search, from the map or through the block cache.
 * A table without a usable block answers "maybe" for every term (WHOLE);
 * one with a version 1 block has it read whole by each search (V1). */
enum { VHEAD_PAGED, VHEAD_V1, VHEAD_WHOLE };

/* Where a partition starts: its first data block, and the 4 KiB page of
 * the file that block starts in (what a search prefetches from; 32 bits
 * of pages span 16 TiB). */
typedef struct value_part {
    uint32_t block, page;
} value_part;

#define VALUE_PAGE_SHIFT 12
/* What a search asks ahead of each partition it will scan: the table
 * reader's first readahead window (a whole 2 MiB table asked for in one go
 * measured about 10% slower to scan cold than the scan's own growing
 * windows). */
#define PARTITION_PREFETCH (64u << 10)

typedef struct value_head {
    int kind;
    bkv_vf_params params;
    uint32_t nparts;
    value_part *parts;       /* nparts + 1: each partition ends where the next begins */
    bkv_filter *summary;     /* NULL: none ("maybe") */
    uint64_t rows_offset;
    uint32_t rows_per_block;
    atomic_uchar *row_verified; /* a bit per block of rows of a mapped file: its checksum held */
    size_t memory;
} value_head;

/* What a table keeps of its value tags: the index, and a bit per
 * partition of a mapped file whose tags block passed its checksum. */
typedef struct value_tags {
    int usable;
    bkv_vt_index ix;
    atomic_uchar *verified;
} value_tags;

/* The table's slot: the head and the tags, each read on a search's first
 * use (under mu) and kept for the table's life, and whether the table's
 * pages looked cold when last asked. The head is held in place, so that a
 * probe reaches the summary in as few dependent loads as the prefetch
 * stages ask for. */
typedef struct table_values {
    pthread_mutex_t mu;
    int has_tags;
    bkv_handle tags_index; /* where the tags' index lies, when has_tags */
    atomic_int head_ready;
    value_head head;
    atomic_int tags_ready;
    value_tags tags;
    atomic_uint cold_checks;
    atomic_int cold;
} table_values;

static void free_head(value_head *vh) {
    free(vh->parts);
    bkv_filter_destroy(vh->summary);
    free(vh->row_verified);
    memset(vh, 0, sizeof *vh);
}

static void free_tags(value_tags *vt) {
    bkv_vt_index_free(&vt->ix);
    free(vt->verified);
    memset(vt, 0, sizeof *vt);
}

/* Where the tags lie is looked up once: a search asks per partition. */
static void *make_values(bkv_table *t) {
    table_values *tv = calloc(1, sizeof *tv);
    if (!tv) return NULL;
    pthread_mutex_init(&tv->mu, NULL);
    tv->has_tags = bkv_vs_tags_handle(t, &tv->tags_index);
    return tv;
}

static void destroy_values(void *p) {
    table_values *tv = p;
    if (!tv) return;
    free_head(&tv->head);
    free_tags(&tv->tags);
    pthread_mutex_destroy(&tv->mu);
    free(tv);
}

static table_values *values_of(bkv_table *t) { return bkv_table_slot(t, make_values, destroy_values); }

/* Bit i of a bitmap of verified blocks (of rows). */
static int bit_verified(atomic_uchar *bits, uint32_t i) {
    return atomic_load_explicit(&bits[i / 8], memory_order_relaxed) >> (i % 8) & 1;
}

int bkv_vs_filter_handle(const bkv_table *t, bkv_handle *h) { return bkv_table_aux_handle(t, "value.filter", h); }
int bkv_vs_tags_handle(const bkv_table *t, bkv_handle *h) { return bkv_table_aux_handle(t, "value.tags", h); }

/* Block g of the rows of a version 2 block: rows g * per_block onward,
 * each word w of every partition's filter. */
static bkv_handle rows_handle(uint64_t rows_offset, uint32_t nparts, uint32_t per_block, uint32_t g) {
    uint64_t len = 8 * (uint64_t)nparts * per_block;
    return (bkv_handle){rows_offset + (uint64_t)g * (len + BKV_BLOCK_TRAILER), len};
}

/* Reads the value filter block (head) and decodes it. */
static int read_value_block(bkv_table *t, bkv_vf_set *out, bkv_vf_layout *layout, uint8_t **data, bkv_err *e) {
    memset(out, 0, sizeof *out);
    memset(layout, 0, sizeof *layout);
    *data = NULL;
    bkv_handle h;
    if (!bkv_vs_filter_handle(t, &h)) return BKV_NOTFOUND;
    const char *name = bkv_table_path(t);
    if (!bkv_table_holds_block(t, h))
        return bkv_fail(e, BKV_CORRUPTION, "%s: value filter block at offset %llu runs past the end of the file",
                        name, (unsigned long long)h.offset);
    size_t len;
    int rc = bkv_table_read_block(t, h, data, &len, e);
    if (rc) return rc;
    const bkv_table_props *tp = bkv_table_properties(t);
    rc = bkv_vf_decode(*data, len, tp->num_data_blocks, tp->num_entries, out, layout, name, h.offset, e);
    /* The rows lie right before the block that names them. */
    uint64_t rows = layout->version == BKV_VF_VERSION_PAGED ? bkv_vf_words(&out->params) : 0;
    uint64_t rows_bytes = rows ? rows / layout->rows_per_block * BKV_BLOCK_TRAILER + rows * 8 * (uint64_t)out->nparts
                               : 0; /* < 2^61 */
    if (!rc && rows && (layout->rows_offset > h.offset || h.offset - layout->rows_offset != rows_bytes)) {
        bkv_vf_set_free(out);
        rc = bkv_fail(e, BKV_CORRUPTION, "%s: value filter rows at offset %llu do not end at the block (offset %llu)",
                      name, (unsigned long long)layout->rows_offset, (unsigned long long)h.offset);
    }
    if (rc) {
        free(*data);
        *data = NULL;
    }
    return rc;
}

int bkv_vs_table_filters(bkv_table *t, bkv_vf_set *out, bkv_err *e) {
    uint8_t *data;
    bkv_vf_layout layout;
    int rc = read_value_block(t, out, &layout, &data, e);
    uint32_t per = layout.rows_per_block;
    for (uint32_t w = 0; !rc && layout.version == BKV_VF_VERSION_PAGED && w < bkv_vf_words(&out->params); w += per) {
        uint8_t *rows;
        size_t len;
        bkv_handle rh = rows_handle(layout.rows_offset, out->nparts, per, w / per);
        if (!(rc = bkv_table_read_block(t, rh, &rows, &len, e))) {
            if (len != rh.size)
                rc = bkv_fail(e, BKV_CORRUPTION, "%s: value filter rows at offset %llu have %zu bytes, not %llu",
                              bkv_table_path(t), (unsigned long long)rh.offset, len, (unsigned long long)rh.size);
            for (uint32_t r = 0; !rc && r < per; r++) bkv_vf_set_row(out, w + r, rows + 8 * (size_t)out->nparts * r);
            free(rows);
        }
    }
    if (rc && rc != BKV_NOTFOUND) bkv_vf_set_free(out);
    free(data);
    return rc;
}

/* The verified bitmap's bytes: a bit per block of rows. */
static size_t verified_bytes(const bkv_vf_params *p, uint32_t rows_per_block) {
    return (bkv_vf_words(p) / rows_per_block + 7) / 8;
}

/* Fills vh from the table's block; BKV_NOMEM leaves vh empty. */
static int read_head(bkv_table *t, const bkv_vf_params *want, value_head *vh) {
    bkv_vf_set set;
    bkv_vf_layout layout = {0};
    uint8_t *data = NULL;
    bkv_err e;
    int read = read_value_block(t, &set, &layout, &data, &e);
    if (read == BKV_OK) {
        const bkv_vf_params *p = &set.params;
        vh->params = *p;
        vh->nparts = set.nparts;
        if (!bkv_vf_same_bits(p, want)) vh->kind = VHEAD_WHOLE;
        else if (layout.version != BKV_VF_VERSION_PAGED) vh->kind = VHEAD_V1;
        else if (!(vh->parts = malloc((set.nparts + 1) * sizeof *vh->parts)) ||
                 !(vh->row_verified = calloc(verified_bytes(p, layout.rows_per_block), 1)))
            read = BKV_NOMEM;
        else {
            vh->kind = VHEAD_PAGED;
            vh->rows_offset = layout.rows_offset;
            vh->rows_per_block = layout.rows_per_block;
            for (uint32_t i = 0; i < set.nparts; i++)
                vh->parts[i] = (value_part){set.parts[i].first_block, (uint32_t)(set.parts[i].offset >> VALUE_PAGE_SHIFT)};
            uint64_t data_end = bkv_table_data_end(t);
            vh->parts[set.nparts] = (value_part){(uint32_t)bkv_table_properties(t)->num_data_blocks,
                                                 (uint32_t)((data_end + (1u << VALUE_PAGE_SHIFT) - 1) >> VALUE_PAGE_SHIFT)};
            /* A summary that does not open costs reading the rows, never a wrong "no". */
            if (layout.summary && bkv_filter_open(layout.summary, layout.summary_len,
                                                  BKV_FILTER_OPEN_TRUSTED | BKV_FILTER_OPEN_COPY, &vh->summary, NULL,
                                                  0) != BKV_OK) {
                vh->summary = NULL;
                bkv_table_count_damage(t);
            }
            vh->memory = sizeof(table_values) + (set.nparts + 1) * sizeof *vh->parts +
                         verified_bytes(p, layout.rows_per_block) + (vh->summary ? bkv_filter_memory(vh->summary) : 0);
        }
        bkv_vf_set_free(&set);
    } else if (read != BKV_NOMEM) {
        vh->kind = VHEAD_WHOLE;
        if (read != BKV_NOTFOUND) bkv_table_count_damage(t);
    }
    free(data);
    if (read == BKV_NOMEM) free_head(vh);
    return read == BKV_NOMEM ? BKV_NOMEM : BKV_OK;
}

/* The head, read once. Any failure leaves the table answering "maybe"
 * (whole) for good, except a lack of memory, which the next search tries
 * again. */
static value_head *load_head(bkv_table *t, const bkv_vf_params *want) {
    table_values *tv = values_of(t);
    if (!tv) return NULL;
    if (atomic_load_explicit(&tv->head_ready, memory_order_acquire)) return &tv->head;
    pthread_mutex_lock(&tv->mu);
    int rc = BKV_OK;
    if (!atomic_load_explicit(&tv->head_ready, memory_order_relaxed) &&
        (rc = read_head(t, want, &tv->head)) == BKV_OK)
        atomic_store_explicit(&tv->head_ready, 1, memory_order_release);
    pthread_mutex_unlock(&tv->mu);
    return rc ? NULL : &tv->head;
}

int bkv_vs_summary(bkv_table *t, bkv_filter **out, bkv_err *e) {
    *out = NULL;
    bkv_vf_set set;
    bkv_vf_layout layout;
    uint8_t *data;
    int rc = read_value_block(t, &set, &layout, &data, e);
    if (rc) return rc;
    if (!layout.summary) {
        rc = BKV_NOTFOUND;
    } else {
        char why[200];
        bkv_handle h;
        bkv_vs_filter_handle(t, &h);
        if (bkv_filter_open(layout.summary, layout.summary_len, BKV_FILTER_OPEN_COPY, out, why, sizeof why))
            rc = bkv_fail(e, BKV_CORRUPTION, "%s: value summary at offset %llu: %s", bkv_table_path(t),
                          (unsigned long long)(h.offset + (uint64_t)(layout.summary - data)), why);
    }
    bkv_vf_set_free(&set);
    free(data);
    return rc;
}

int bkv_vs_paged(bkv_table *t, const bkv_vf_params *params) {
    const value_head *vh = load_head(t, params);
    return vh && vh->kind == VHEAD_PAGED;
}

int bkv_vs_summary_cheap(bkv_table *t, const bkv_vf_params *params) {
    const value_head *vh = load_head(t, params);
    if (!vh || vh->kind != VHEAD_PAGED || !vh->summary) return 0;
    bkv_filter_info info;
    bkv_filter_get_info(vh->summary, &info);
    return info.type == BKV_CHEAP_SUMMARY_TYPE;
}

size_t bkv_vs_memory(const bkv_table *t) {
    const table_values *tv = bkv_table_slot_peek(t);
    return tv && atomic_load_explicit(&tv->head_ready, memory_order_acquire) ? tv->head.memory : 0;
}

static bkv_handle rows_of(const value_head *vh, uint32_t w) {
    return rows_handle(vh->rows_offset, vh->nparts, vh->rows_per_block, w / vh->rows_per_block);
}

/* Row w's words (see bkv_table_aux_block). */
static const uint8_t *read_row(bkv_table *t, value_head *vh, uint32_t w, int read_flags, bkv_table_aux_ref *ref) {
    const uint8_t *p = bkv_table_aux_block(t, rows_of(vh, w), vh->row_verified, w / vh->rows_per_block, read_flags, ref);
    return p ? p + 8 * (size_t)vh->nparts * (w % vh->rows_per_block) : NULL;
}

/* A version 1 block, read whole: each partition is tested in turn. */
static int search_whole_block(bkv_table *t, const bkv_vf_probe *pr, bkv_vs_part_fn fn, void *arg) {
    bkv_vf_set set;
    bkv_err e;
    if (bkv_vs_table_filters(t, &set, &e) != BKV_OK) return fn(arg, 0, UINT32_MAX);
    int rc = 0;
    for (uint32_t i = 0; i < set.nparts && !rc; i++)
        if (bkv_vf_test(bkv_vf_part_bits(&set, i), pr)) rc = fn(arg, set.parts[i].first_block, set.parts[i].last_block);
    bkv_vf_set_free(&set);
    return rc;
}

void bkv_vs_prefetch(bkv_table *t, uint64_t h, int stage) {
    if (stage == 0) {
        bkv_table_slot_prefetch(t);
        return;
    }
    const table_values *tv = bkv_table_slot_peek(t);
    if (!tv) return;
    if (stage == 1) {
        __builtin_prefetch(tv);
        __builtin_prefetch(&tv->head.summary);
        return;
    }
    if (!atomic_load_explicit(&tv->head_ready, memory_order_acquire)) return;
    const value_head *vh = &tv->head;
    if (vh->kind == VHEAD_PAGED && vh->summary) {
        if (stage == 2) __builtin_prefetch(vh->summary); /* the filter's handle: its payload pointer and seeds */
        else bkv_filter_prefetch(vh->summary, h);
    }
}

int bkv_vs_probe(bkv_table *t, const bkv_vf_params *params, uint64_t h, bkv_vs_table_probe *out) {
    *out = (bkv_vs_table_probe){1, 1};
    value_head *vh = load_head(t, params);
    if (!vh) return BKV_NOMEM;
    if (vh->kind == VHEAD_WHOLE) return BKV_OK;
    out->partitions = vh->nparts;
    if (vh->kind != VHEAD_PAGED) return BKV_OK;
    if (vh->summary && !bkv_filter_may_contain(vh->summary, h)) {
        out->summary_maybe = 0;
        return BKV_OK;
    }
    /* Rows not read since the table was opened are likely on the device
     * only: asked for now, for every table the search will test, their
     * reads overlap instead of following one another. */
    if (bkv_table_is_mapped(t)) {
        bkv_vf_probe pr;
        bkv_vf_probe_from_hash(&pr, params, h);
        uint32_t asked[BKV_VF_MAX_K];
        for (uint32_t i = 0; i < pr.k; i++) {
            uint32_t g = (pr.pos[i] >> 6) / vh->rows_per_block, seen = 0;
            for (uint32_t j = 0; j < i && !seen; j++) seen = asked[j] == g; /* each block once: a syscall each */
            asked[i] = g;
            if (!seen && !bit_verified(vh->row_verified, g)) {
                bkv_handle rh = rows_of(vh, pr.pos[i] >> 6);
                bkv_table_prefetch_bytes(t, rh.offset, rh.size + BKV_BLOCK_TRAILER);
            }
        }
    }
    return BKV_OK;
}

/* The partitions of a paged table that may hold the term, narrowed row by
 * row into live[0, *nlive): the first row tests every partition, the
 * next ones only the survivors (about the filters' fill each time). A row
 * that cannot be read answers "maybe" for its bits. */
static void match_rows(bkv_table *t, value_head *vh, const bkv_vf_probe *pr, int read_flags, uint32_t *live,
                       uint32_t *nlive) {
    uint32_t n = vh->nparts, all = 1;
    uint32_t done[BKV_VF_MAX_K];
    for (uint32_t i = 0; i < pr->k && n; i++) {
        uint32_t w = pr->pos[i] >> 6, seen = 0;
        for (uint32_t j = 0; j < i && !seen; j++) seen = done[j] == w;
        done[i] = w;
        if (seen) continue; /* each row once, with the mask of every probe bit it holds */
        uint64_t mask = 0;
        for (uint32_t j = i; j < pr->k; j++)
            if (pr->pos[j] >> 6 == w) mask |= UINT64_C(1) << (pr->pos[j] & 63);
        bkv_table_aux_ref ref;
        const uint8_t *row = read_row(t, vh, w, read_flags, &ref);
        if (!row) {
            bkv_table_count_damage(t);
            continue;
        }
        uint32_t kept = 0;
        for (uint32_t x = 0; x < n; x++) {
            uint32_t p = all ? x : live[x];
            live[kept] = p;
            kept += (bkv_get_u64(row + 8 * (size_t)p) & mask) == mask;
        }
        n = kept;
        all = 0;
        bkv_table_aux_release(t, &ref);
    }
    if (all)
        for (uint32_t x = 0; x < n; x++) live[x] = x;
    *nlive = n;
}

int bkv_vs_match(bkv_table *t, const bkv_vf_params *params, uint64_t h, int read_flags, bkv_vs_part_fn fn, void *arg) {
    value_head *vh = load_head(t, params);
    if (!vh) return BKV_NOMEM;
    if (vh->kind == VHEAD_WHOLE) return fn(arg, 0, UINT32_MAX);
    bkv_vf_probe pr;
    bkv_vf_probe_from_hash(&pr, params, h);
    if (vh->kind == VHEAD_V1) return search_whole_block(t, &pr, fn, arg);
    uint32_t stack[256], *live = vh->nparts <= 256 ? stack : malloc(vh->nparts * sizeof *live);
    if (!live) return BKV_NOMEM;
    uint32_t nlive;
    match_rows(t, vh, &pr, read_flags, live, &nlive);
    /* The scan of these partitions needs the index and their blocks:
     * asked for at once, for every partition, before any is read. */
    if (nlive && bkv_table_is_mapped(t)) {
        bkv_table_prefetch_index(t);
        for (uint32_t x = 0; x < nlive; x++) {
            const value_part *p = &vh->parts[live[x]];
            uint64_t from = (uint64_t)p->page << VALUE_PAGE_SHIFT, to = (uint64_t)p[1].page << VALUE_PAGE_SHIFT;
            if (to > from) bkv_table_prefetch_bytes(t, from, to - from < PARTITION_PREFETCH ? to - from : PARTITION_PREFETCH);
        }
    }
    int rc = 0;
    for (uint32_t x = 0; x < nlive && !rc; x++)
        rc = fn(arg, vh->parts[live[x]].block, vh->parts[live[x] + 1].block - 1);
    if (live != stack) free(live);
    return rc;
}

/* The tags' index, read once; a table without one, or with one that
 * fails a check, keeps "unusable" for good (a lack of memory is tried
 * again). */
static value_tags *load_tags(bkv_table *t, table_values *tv) {
    if (atomic_load_explicit(&tv->tags_ready, memory_order_acquire)) return &tv->tags;
    pthread_mutex_lock(&tv->mu);
    int rc = BKV_OK;
    if (!atomic_load_explicit(&tv->tags_ready, memory_order_relaxed)) {
        value_tags *vt = &tv->tags;
        int read = bkv_vs_tags_index(t, &vt->ix, NULL);
        if (read == BKV_OK && !(vt->verified = calloc((vt->ix.n + 7) / 8, 1))) read = BKV_NOMEM;
        if (read == BKV_NOMEM) {
            free_tags(vt);
            rc = BKV_NOMEM;
        } else {
            vt->usable = read == BKV_OK;
            if (read != BKV_OK && read != BKV_NOTFOUND) bkv_table_count_damage(t);
            atomic_store_explicit(&tv->tags_ready, 1, memory_order_release);
        }
    }
    pthread_mutex_unlock(&tv->mu);
    return rc ? NULL : &tv->tags;
}

/* Whether the partition starting at data block first would come from the
 * device: the whole partition then arrives in one read ahead, and tags
 * would put reads of their own (their block, their index) before it
 * (measured at 10 M entries from a cold cache: a unique value's search
 * took 1.2x as long with the tags read first). A block this process has
 * verified is in memory; otherwise the pages are asked about, for one
 * partition in COLD_SAMPLE (a system call each time cost a warm 1%-domain
 * search a tenth), and the answer holds for the table until the next. */
#define COLD_SAMPLE 32
static int cold_partition(bkv_table *t, table_values *tv, uint32_t first) {
    bkv_handle h;
    if (bkv_table_data_block(t, first, &h) != 0) return 0;
    if (atomic_fetch_add_explicit(&tv->cold_checks, 1, memory_order_relaxed) % COLD_SAMPLE == 0) {
        int cold = bkv_table_byte_resident(t, h.offset) == 0 ||
                   (!atomic_load_explicit(&tv->tags_ready, memory_order_acquire) &&
                    bkv_table_byte_resident(t, tv->tags_index.offset) == 0);
        atomic_store_explicit(&tv->cold, cold, memory_order_relaxed);
    }
    return atomic_load_explicit(&tv->cold, memory_order_relaxed);
}

int bkv_vs_blocks(bkv_table *t, uint64_t seed, uint32_t first, uint32_t last, const uint16_t *tags, size_t ntags,
                  int read_flags, uint8_t *maybe) {
    table_values *tv = values_of(t);
    value_tags *vt;
    if (!tv || !tv->has_tags || cold_partition(t, tv, first) || !(vt = load_tags(t, tv)) || !vt->usable)
        return 0;
    const bkv_vt_index *ix = &vt->ix;
    if (ix->seed != seed) return 0;
    uint32_t lo = 0, hi = ix->n; /* the partition whose first data block is first */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ix->first_block[mid] <= first) lo = mid;
        else hi = mid;
    }
    if (ix->first_block[lo] != first || ix->first_block[lo + 1] - 1 != last) return 0;
    uint32_t nb = last - first + 1;
    bkv_table_aux_ref ref;
    bkv_handle h = {ix->offset[lo], ix->size[lo]};
    const uint8_t *p = bkv_table_aux_block(t, h, vt->verified, lo, read_flags, &ref);
    int ok = p && bkv_vt_part_valid(p, h.size, nb) == 0;
    if (ok) bkv_vt_match(p, nb, tags, ntags, maybe);
    else bkv_table_count_damage(t);
    bkv_table_aux_release(t, &ref);
    return ok;
}

int bkv_vs_tags_index(bkv_table *t, bkv_vt_index *out, bkv_err *e) {
    memset(out, 0, sizeof *out);
    bkv_handle h;
    if (!bkv_vs_tags_handle(t, &h)) return BKV_NOTFOUND;
    uint8_t *data;
    size_t len;
    int rc = bkv_table_read_block(t, h, &data, &len, e);
    if (rc) return rc;
    rc = bkv_vt_decode_index(data, len, bkv_table_properties(t)->num_data_blocks, h.offset, out, bkv_table_path(t), e);
    free(data);
    return rc;
}

int bkv_vs_tags_part(bkv_table *t, const bkv_vt_index *ix, uint32_t i, uint8_t **data, bkv_err *e) {
    bkv_handle h = {ix->offset[i], ix->size[i]};
    size_t len;
    int rc = bkv_table_read_block(t, h, data, &len, e);
    if (rc) return rc;
    if (len != h.size || bkv_vt_part_valid(*data, len, ix->first_block[i + 1] - ix->first_block[i])) {
        free(*data);
        *data = NULL;
        return bkv_fail(e, BKV_CORRUPTION, "%s: value tags of partition %u: counts do not match the size at offset %llu",
                        bkv_table_path(t), i, (unsigned long long)h.offset);
    }
    return BKV_OK;
}
