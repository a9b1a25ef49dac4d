#include "db/version.h"

#include "table/cache.h"

#include <stdlib.h>
#include <string.h>

#include "util/coding.h"
#include "util/ikey.h"

enum { TAG_LOG_NUMBER = 1, TAG_NEXT_FILE = 2, TAG_LAST_SEQUENCE = 3, TAG_NEW_FILE = 4, TAG_DELETED_FILE = 5,
       TAG_VALUE_INDEX = 6, TAG_INGESTED_FILE = 7, TAG_WAL_MARKS = 8, TAG_VALUE_PROBE_WORDS = 9,
       TAG_RANGE_TOMBSTONE = 10, TAG_FILE_CLEAN = 11 };

bkv_range_tombstone *bkv_range_tombstone_new(const void *begin, size_t blen, const void *end, size_t elen, uint64_t seq,
                                             uint64_t wal) {
    bkv_range_tombstone *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->begin = malloc(blen ? blen : 1);
    t->end = malloc(elen ? elen : 1);
    if (!t->begin || !t->end) {
        free(t->begin);
        free(t->end);
        free(t);
        return NULL;
    }
    if (blen) memcpy(t->begin, begin, blen);
    if (elen) memcpy(t->end, end, elen);
    t->begin_len = blen;
    t->end_len = elen;
    t->unbounded = end == NULL;
    t->seq = seq;
    t->wal = wal;
    t->refs = 1;
    return t;
}

void bkv_range_tombstone_unref(bkv_range_tombstone *t) {
    if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
    free(t->begin);
    free(t->end);
    free(t);
}

static void tombstone_ref(bkv_range_tombstone *t) { atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); }

bkv_file_meta *bkv_file_meta_new(uint64_t number, uint64_t size, uint64_t entries, const uint8_t *smallest,
                                 size_t slen, const uint8_t *largest, size_t llen) {
    bkv_file_meta *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->smallest = malloc(slen ? slen : 1);
    f->largest = malloc(llen ? llen : 1);
    if (!f->smallest || !f->largest) {
        free(f->smallest);
        free(f->largest);
        free(f);
        return NULL;
    }
    memcpy(f->smallest, smallest, slen);
    memcpy(f->largest, largest, llen);
    f->smallest_len = slen;
    f->largest_len = llen;
    f->refs = 1;
    f->number = number;
    f->size = size;
    f->entries = entries;
    bkv_file_meta_reset_seeks(f);
    return f;
}

void bkv_file_meta_reset_seeks(bkv_file_meta *f) {
    uint64_t worth = f->size / BKV_SEEK_BYTES;
    atomic_store_explicit(&f->allowed_seeks, worth < 100 ? 100 : worth > INT32_MAX / 2 ? INT32_MAX / 2 : (int)worth,
                          memory_order_relaxed);
}

void bkv_file_meta_unref(bkv_file_meta *f) {
    if (!f || atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1) return;
    if (f->obsolete && f->owner) f->owner->on_obsolete(f->owner->ctx, f->number);
    bkv_cache_entry *pinned = atomic_load_explicit(&f->pinned, memory_order_acquire);
    if (pinned) {
        bkv_cache_pinned_free(pinned);
        atomic_fetch_sub_explicit(f->pin_count, 1, memory_order_relaxed);
    }
    bkv_vf_set_destroy(f->vf);
    free(f->smallest);
    free(f->largest);
    free(f);
}

void bkv_file_meta_ref(bkv_file_meta *f) { atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed); }

void bkv_edit_init(bkv_version_edit *e) { memset(e, 0, sizeof *e); }

void bkv_edit_free(bkv_version_edit *e) {
    for (size_t i = 0; i < e->nadded; i++) bkv_file_meta_unref(e->added[i].meta);
    for (size_t i = 0; i < e->ntombstones; i++) bkv_range_tombstone_unref(e->tombstones[i]);
    free(e->tombstones);
    free(e->added);
    free(e->deleted);
    bkv_edit_init(e);
}

int bkv_edit_add_file(bkv_version_edit *e, int level, bkv_file_meta *meta) {
    if (e->nadded == e->cap_added) {
        size_t cap = e->cap_added ? e->cap_added * 2 : 4;
        bkv_new_file *g = realloc(e->added, cap * sizeof *g);
        if (!g) return BKV_NOMEM;
        e->added = g;
        e->cap_added = cap;
    }
    bkv_file_meta_ref(meta);
    e->added[e->nadded++] = (bkv_new_file){level, meta};
    return BKV_OK;
}

int bkv_edit_delete_file(bkv_version_edit *e, int level, uint64_t number) {
    if (e->ndeleted == e->cap_deleted) {
        size_t cap = e->cap_deleted ? e->cap_deleted * 2 : 4;
        bkv_deleted_file *g = realloc(e->deleted, cap * sizeof *g);
        if (!g) return BKV_NOMEM;
        e->deleted = g;
        e->cap_deleted = cap;
    }
    e->deleted[e->ndeleted++] = (bkv_deleted_file){level, number};
    return BKV_OK;
}

int bkv_edit_add_tombstone(bkv_version_edit *e, bkv_range_tombstone *t) {
    if (e->ntombstones == e->cap_tombstones) {
        size_t cap = e->cap_tombstones ? e->cap_tombstones * 2 : 4;
        bkv_range_tombstone **g = realloc(e->tombstones, cap * sizeof *g);
        if (!g) return BKV_NOMEM;
        e->tombstones = g;
        e->cap_tombstones = cap;
    }
    tombstone_ref(t);
    e->tombstones[e->ntombstones++] = t;
    return BKV_OK;
}

int bkv_edit_encode(const bkv_version_edit *e, bkv_buf *out) {
    int rc = 0;
    if (e->has_log_number) {
        rc |= bkv_buf_put_varint(out, TAG_LOG_NUMBER);
        rc |= bkv_buf_put_varint(out, e->log_number);
    }
    if (e->has_next_file) {
        rc |= bkv_buf_put_varint(out, TAG_NEXT_FILE);
        rc |= bkv_buf_put_varint(out, e->next_file);
    }
    if (e->has_last_sequence) {
        rc |= bkv_buf_put_varint(out, TAG_LAST_SEQUENCE);
        rc |= bkv_buf_put_varint(out, e->last_sequence);
    }
    if (e->has_value_index) {
        const bkv_value_index_rec *r = &e->value_index;
        rc |= bkv_buf_put_varint(out, TAG_VALUE_INDEX);
        rc |= bkv_buf_put_varint(out, r->m_bits);
        rc |= bkv_buf_put_varint(out, r->k);
        rc |= bkv_buf_put_varint(out, r->seed);
        rc |= bkv_buf_put_varint(out, r->partition_entries);
        rc |= bkv_buf_put_varint(out, r->shape);
        rc |= bkv_buf_put_varint(out, r->order);
        rc |= bkv_buf_put_slice(out, r->terms_name, strlen(r->terms_name));
        /* Its own tag, so that a build that would hash terms anywhere in
         * the filter refuses the manifest instead of answering "no". */
        if (r->words) {
            rc |= bkv_buf_put_varint(out, TAG_VALUE_PROBE_WORDS);
            rc |= bkv_buf_put_varint(out, r->words);
        }
    }
    if (e->wal_marks) {
        rc |= bkv_buf_put_varint(out, TAG_WAL_MARKS);
        rc |= bkv_buf_put_varint(out, 1);
    }
    for (size_t i = 0; i < e->ndeleted; i++) {
        rc |= bkv_buf_put_varint(out, TAG_DELETED_FILE);
        rc |= bkv_buf_put_varint(out, (uint64_t)e->deleted[i].level);
        rc |= bkv_buf_put_varint(out, e->deleted[i].number);
    }
    for (size_t i = 0; i < e->nadded; i++) {
        const bkv_file_meta *f = e->added[i].meta;
        rc |= bkv_buf_put_varint(out, f->global_seq ? TAG_INGESTED_FILE : TAG_NEW_FILE);
        rc |= bkv_buf_put_varint(out, (uint64_t)e->added[i].level);
        rc |= bkv_buf_put_varint(out, f->number);
        rc |= bkv_buf_put_varint(out, f->size);
        rc |= bkv_buf_put_varint(out, f->entries);
        rc |= bkv_buf_put_varint(out, f->smallest_seq);
        rc |= bkv_buf_put_varint(out, f->largest_seq);
        rc |= bkv_buf_put_slice(out, f->smallest, f->smallest_len);
        rc |= bkv_buf_put_slice(out, f->largest, f->largest_len);
        if (f->global_seq) rc |= bkv_buf_put_varint(out, f->global_seq);
        /* Only when it says something: a database that never had a range
         * deletion stays readable by releases before them. */
        if (f->clean_seq) {
            rc |= bkv_buf_put_varint(out, TAG_FILE_CLEAN);
            rc |= bkv_buf_put_varint(out, f->number);
            rc |= bkv_buf_put_varint(out, f->clean_seq);
        }
    }
    for (size_t i = 0; i < e->ntombstones; i++) {
        const bkv_range_tombstone *t = e->tombstones[i];
        rc |= bkv_buf_put_varint(out, TAG_RANGE_TOMBSTONE);
        rc |= bkv_buf_put_varint(out, t->seq);
        rc |= bkv_buf_put_varint(out, t->wal);
        rc |= bkv_buf_put_varint(out, (uint64_t)t->unbounded);
        rc |= bkv_buf_put_slice(out, t->begin, t->begin_len);
        rc |= bkv_buf_put_slice(out, t->end, t->unbounded ? 0 : t->end_len);
    }
    return rc;
}

int bkv_edit_decode(bkv_version_edit *e, const uint8_t *p, size_t len, const char *name, uint64_t offset,
                    bkv_err *err) {
    bkv_edit_init(e);
    if (len == 0) return BKV_OK; /* p may be NULL: no pointer arithmetic on it */
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t tag, a, b, c, d, sseq, lseq, slen, llen, gseq = 0;
        if (!(p = bkv_get_varint64(p, end, &tag))) goto bad;
        switch (tag) {
        case TAG_LOG_NUMBER:
            if (!(p = bkv_get_varint64(p, end, &e->log_number))) goto bad;
            e->has_log_number = 1;
            break;
        case TAG_NEXT_FILE:
            if (!(p = bkv_get_varint64(p, end, &e->next_file))) goto bad;
            e->has_next_file = 1;
            break;
        case TAG_LAST_SEQUENCE:
            if (!(p = bkv_get_varint64(p, end, &e->last_sequence)) || e->last_sequence > BKV_MAX_SEQ) goto bad;
            e->has_last_sequence = 1;
            break;
        case TAG_DELETED_FILE:
            if (!(p = bkv_get_varint64(p, end, &a)) || a >= BKV_MAX_LEVELS || !(p = bkv_get_varint64(p, end, &b)))
                goto bad;
            if (bkv_edit_delete_file(e, (int)a, b)) goto nomem;
            break;
        case TAG_NEW_FILE:
        case TAG_INGESTED_FILE: {
            if (!(p = bkv_get_varint64(p, end, &a)) || a >= BKV_MAX_LEVELS || !(p = bkv_get_varint64(p, end, &b)) ||
                !(p = bkv_get_varint64(p, end, &c)) || !(p = bkv_get_varint64(p, end, &d)) ||
                !(p = bkv_get_varint64(p, end, &sseq)) || !(p = bkv_get_varint64(p, end, &lseq)) || sseq > lseq ||
                !(p = bkv_get_varint64(p, end, &slen)) || slen > (uint64_t)(end - p) || slen < BKV_IKEY_TRAILER)
                goto bad;
            const uint8_t *s = p;
            p += slen;
            if (!(p = bkv_get_varint64(p, end, &llen)) || llen > (uint64_t)(end - p) || llen < BKV_IKEY_TRAILER) goto bad;
            const uint8_t *l = p;
            p += llen;
            /* Every key of an ingested table reads at its one global sequence. */
            if (tag == TAG_INGESTED_FILE && (!(p = bkv_get_varint64(p, end, &gseq)) || gseq == 0 ||
                                             gseq > BKV_MAX_SEQ || sseq != gseq || lseq != gseq))
                goto bad;
            bkv_file_meta *f = bkv_file_meta_new(b, c, d, s, (size_t)slen, l, (size_t)llen);
            if (!f) goto nomem;
            f->smallest_seq = sseq;
            f->largest_seq = lseq;
            f->global_seq = gseq;
            int rc = bkv_edit_add_file(e, (int)a, f);
            bkv_file_meta_unref(f);
            if (rc) goto nomem;
            break;
        }
        case TAG_VALUE_INDEX: {
            bkv_value_index_rec *r = &e->value_index;
            if (!(p = bkv_get_varint64(p, end, &r->m_bits)) || !(p = bkv_get_varint64(p, end, &r->k)) ||
                !(p = bkv_get_varint64(p, end, &r->seed)) || !(p = bkv_get_varint64(p, end, &r->partition_entries)) ||
                !(p = bkv_get_varint64(p, end, &r->shape)) || !(p = bkv_get_varint64(p, end, &r->order)) ||
                !(p = bkv_get_varint64(p, end, &slen)) || slen > (uint64_t)(end - p) || slen > BKV_TERMS_NAME_MAX ||
                memchr(p, 0, (size_t)slen))
                goto bad;
            bkv_vf_params vp = {.m_bits = (uint32_t)r->m_bits, .k = (uint32_t)r->k};
            if (r->m_bits > UINT32_MAX || r->k > BKV_VF_MAX_K || !bkv_vf_params_valid(&vp) ||
                r->partition_entries > UINT32_MAX || r->shape < 1 || r->shape > BKV_VALUE_INDEX_PAGED || r->order < 2 || r->order > 1024)
                goto bad;
            memcpy(r->terms_name, p, (size_t)slen);
            r->terms_name[slen] = 0;
            p += slen;
            e->has_value_index = 1;
            break;
        }
        case TAG_WAL_MARKS:
            if (!(p = bkv_get_varint64(p, end, &a)) || a != 1) goto bad;
            e->wal_marks = 1;
            break;
        case TAG_VALUE_PROBE_WORDS:
            if (!(p = bkv_get_varint64(p, end, &e->value_index.words)) || e->value_index.words != BKV_VF_TWO_WORDS)
                goto bad;
            break;
        case TAG_FILE_CLEAN: {
            /* Of a table this record added before it. */
            if (!(p = bkv_get_varint64(p, end, &a)) || !(p = bkv_get_varint64(p, end, &b)) || b > BKV_MAX_SEQ) goto bad;
            size_t i = e->nadded;
            while (i > 0 && e->added[i - 1].meta->number != a) i--;
            if (i == 0) goto bad;
            e->added[i - 1].meta->clean_seq = b;
            break;
        }
        case TAG_RANGE_TOMBSTONE: {
            /* seq, wal, unbounded (0/1), begin, end: a bounded range is not empty. */
            if (!(p = bkv_get_varint64(p, end, &a)) || a == 0 || a > BKV_MAX_SEQ || !(p = bkv_get_varint64(p, end, &b)) ||
                !(p = bkv_get_varint64(p, end, &c)) || c > 1 || !(p = bkv_get_varint64(p, end, &slen)) ||
                slen > (uint64_t)(end - p) || slen > BKV_MAX_KEY_SIZE)
                goto bad;
            const uint8_t *s = p;
            p += slen;
            if (!(p = bkv_get_varint64(p, end, &llen)) || llen > (uint64_t)(end - p) || llen > BKV_MAX_KEY_SIZE ||
                (c && llen) || (!c && bkv_user_key_compare(s, (size_t)slen, p, (size_t)llen) >= 0))
                goto bad;
            bkv_range_tombstone *t = bkv_range_tombstone_new(s, (size_t)slen, c ? NULL : p, (size_t)llen, a, b);
            p += llen;
            if (!t) goto nomem;
            int rc = bkv_edit_add_tombstone(e, t);
            bkv_range_tombstone_unref(t);
            if (rc) goto nomem;
            break;
        }
        default:
            goto bad;
        }
    }
    if (e->value_index.words && !e->has_value_index) goto bad; /* a part of tag 6's record, never alone */
    return BKV_OK;
bad:
    bkv_edit_free(e);
    return bkv_fail(err, BKV_CORRUPTION, "%s: malformed version edit in record at offset %llu", name,
                    (unsigned long long)offset);
nomem:
    bkv_edit_free(e);
    return bkv_fail(err, BKV_NOMEM, "%s: out of memory reading the manifest", name);
}

bkv_tree_version *bkv_tree_version_new(void) {
    bkv_tree_version *v = calloc(1, sizeof *v);
    if (v) v->refs = 1;
    return v;
}

int bkv_tree_version_has_table(const bkv_tree_version *v, uint64_t number) {
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < v->nfiles[l]; i++)
            if (v->files[l][i]->number == number) return 1;
    return 0;
}

int bkv_tree_version_level_has(const bkv_tree_version *v, int level, uint64_t number) {
    for (size_t i = 0; i < v->nfiles[level]; i++)
        if (v->files[level][i]->number == number) return 1;
    return 0;
}

int bkv_tree_version_charge_seeks(bkv_tree_version *v, const uint8_t *k, size_t klen, int seeks) {
    bkv_file_meta *newest = NULL;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        /* Level 0's tables overlap (newest first); deeper, one may hold k. */
        size_t n = l == 0 ? v->nfiles[0] : 1;
        for (size_t i = 0; i < n; i++) {
            /* A deeper level's lookup has already tested the range. */
            bkv_file_meta *f = l == 0 ? v->files[0][i] : bkv_tree_version_level_file(v, l, k, klen);
            if (!f || (l == 0 && !bkv_file_meta_holds(f, k, klen))) continue;
            if (newest) goto charge;
            newest = f;
        }
    }
    return 0;
charge:;
    /* Loads first: once a table is due (or one already is), readers stop
     * writing the shared lines. */
    int left = atomic_load_explicit(&newest->allowed_seeks, memory_order_relaxed);
    if (left > 0) left = atomic_fetch_sub_explicit(&newest->allowed_seeks, seeks, memory_order_relaxed) - seeks;
    bkv_file_meta *none = NULL;
    return left <= 0 && !atomic_load_explicit(&v->seek_compact, memory_order_relaxed) &&
           atomic_compare_exchange_strong(&v->seek_compact, &none, newest);
}

void bkv_tree_version_unref(bkv_tree_version *v) {
    if (!v || atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) != 1) return;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        for (size_t i = 0; i < v->nfiles[l]; i++) bkv_file_meta_unref(v->files[l][i]);
        free(v->files[l]);
        free(v->fences[l]);
    }
    for (size_t i = 0; i < v->ntombstones; i++) bkv_range_tombstone_unref(v->tombstones[i]);
    free(v->tombstones);
    free(v);
}

/* Newest data first. Flushes produce files in sequence order, but a
 * tiered merge gives old data a new, higher file number: order by the
 * sequences a file holds, not by its number. */
static int cmp_level0(const void *a, const void *b) {
    const bkv_file_meta *x = *(bkv_file_meta *const *)a, *y = *(bkv_file_meta *const *)b;
    if (x->largest_seq != y->largest_seq) return x->largest_seq < y->largest_seq ? 1 : -1;
    return x->number < y->number ? 1 : x->number > y->number ? -1 : 0;
}

static int cmp_by_smallest(const void *a, const void *b) {
    const bkv_file_meta *x = *(bkv_file_meta *const *)a, *y = *(bkv_file_meta *const *)b;
    return bkv_ikey_compare(x->smallest, x->smallest_len, y->smallest, y->smallest_len);
}

static int deleted(const bkv_version_edit *e, int level, uint64_t number) {
    for (size_t i = 0; i < e->ndeleted; i++)
        if (e->deleted[i].level == level && e->deleted[i].number == number) return 1;
    return 0;
}

/* Whether a table of v may hold an entry t covers. */
static int tombstone_may_cover(const bkv_tree_version *v, const bkv_range_tombstone *t) {
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < v->nfiles[l]; i++)
            if (bkv_range_tombstone_may_cover(t, v->files[l][i])) return 1;
    return 0;
}

/* The range deletions of base and edit that may still cover an entry of
 * v (whose tables are final). Depends only on what the manifest records,
 * so a replay keeps exactly the ones the live database kept. */
static int apply_tombstones(bkv_tree_version *v, const bkv_tree_version *base, const bkv_version_edit *edit) {
    size_t n = base->ntombstones + edit->ntombstones;
    if (!n) return BKV_OK;
    if (!(v->tombstones = malloc(n * sizeof *v->tombstones))) return BKV_NOMEM;
    for (size_t i = 0; i < n; i++) {
        bkv_range_tombstone *t = i < base->ntombstones ? base->tombstones[i] : edit->tombstones[i - base->ntombstones];
        if (v->log_number > t->wal && !tombstone_may_cover(v, t)) continue;
        tombstone_ref(t);
        v->tombstones[v->ntombstones++] = t;
    }
    return BKV_OK;
}

int bkv_tree_version_apply(const bkv_tree_version *base, const bkv_version_edit *edit, bkv_tree_version **out) {
    bkv_tree_version *v = bkv_tree_version_new();
    if (!v) return BKV_NOMEM;
    v->log_number = edit->has_log_number ? edit->log_number : base->log_number;
    for (int l = 0; l < BKV_MAX_LEVELS; l++) {
        size_t cap = base->nfiles[l];
        for (size_t i = 0; i < edit->nadded; i++) cap += edit->added[i].level == l;
        if (!cap) continue;
        v->files[l] = malloc(cap * sizeof *v->files[l]);
        if (!v->files[l]) {
            bkv_tree_version_unref(v);
            return BKV_NOMEM;
        }
        for (size_t i = 0; i < base->nfiles[l]; i++)
            if (!deleted(edit, l, base->files[l][i]->number)) {
                bkv_file_meta_ref(base->files[l][i]);
                v->files[l][v->nfiles[l]++] = base->files[l][i];
            }
        for (size_t i = 0; i < edit->nadded; i++)
            if (edit->added[i].level == l && !deleted(edit, l, edit->added[i].meta->number)) {
                bkv_file_meta_ref(edit->added[i].meta);
                v->files[l][v->nfiles[l]++] = edit->added[i].meta;
            }
        qsort(v->files[l], v->nfiles[l], sizeof *v->files[l], l == 0 ? cmp_level0 : cmp_by_smallest);
        /* Below level 0 a user key lives in one table at most: reads look
         * in one table a level, so an overlap would hide rows. */
        for (size_t i = 1; l > 0 && i < v->nfiles[l]; i++) {
            const bkv_file_meta *a = v->files[l][i - 1], *b = v->files[l][i];
            if (bkv_user_key_compare(a->largest, a->largest_len - BKV_IKEY_TRAILER, b->smallest,
                                     b->smallest_len - BKV_IKEY_TRAILER) >= 0) {
                bkv_tree_version_unref(v);
                return BKV_CORRUPTION;
            }
        }
        if (l > 0 && v->nfiles[l]) {
            if (!(v->fences[l] = malloc(v->nfiles[l] * sizeof *v->fences[l]))) {
                bkv_tree_version_unref(v);
                return BKV_NOMEM;
            }
            /* Sorted and disjoint: every key shares what the first and last share. */
            const bkv_file_meta *first = v->files[l][0], *last = v->files[l][v->nfiles[l] - 1];
            size_t a = first->smallest_len - BKV_IKEY_TRAILER, b = last->largest_len - BKV_IKEY_TRAILER, skip = 0;
            while (skip < a && skip < b && first->smallest[skip] == last->largest[skip]) skip++;
            v->fence_skip[l] = skip;
            for (size_t i = 0; i < v->nfiles[l]; i++) {
                const bkv_file_meta *f = v->files[l][i];
                v->fences[l][i] = bkv_key_fence(f->largest, f->largest_len - BKV_IKEY_TRAILER, skip);
            }
        }
    }
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        if (v->nfiles[l]) v->levels_used = l + 1;
    if (apply_tombstones(v, base, edit)) {
        bkv_tree_version_unref(v);
        return BKV_NOMEM;
    }
    *out = v;
    return BKV_OK;
}

int bkv_tree_version_snapshot_edit(const bkv_tree_version *v, bkv_version_edit *edit) {
    for (int l = 0; l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; i < v->nfiles[l]; i++)
            if (bkv_edit_add_file(edit, l, v->files[l][i])) return BKV_NOMEM;
    /* A range deletion's WAL is at least the snapshot's oldest live one:
     * what a copy's WAL holds (a checkpoint writes the memtables there)
     * may be older than the deletion, and is not yet in a table. */
    for (size_t i = 0; i < v->ntombstones; i++) {
        const bkv_range_tombstone *t = v->tombstones[i];
        uint64_t wal = edit->has_log_number && edit->log_number > t->wal ? edit->log_number : t->wal;
        bkv_range_tombstone *c = bkv_range_tombstone_new(t->begin, t->begin_len, t->unbounded ? NULL : t->end,
                                                         t->end_len, t->seq, wal);
        int rc = c ? bkv_edit_add_tombstone(edit, c) : BKV_NOMEM;
        bkv_range_tombstone_unref(c);
        if (rc) return BKV_NOMEM;
    }
    return BKV_OK;
}
