/* bkv_find_value against a brute-force oracle: random puts, overwrites,
 * deletes, batches, snapshots, flushes, compactions (both styles) and
 * reopens, for every index shape, whole values and terms, partitioned and
 * whole-table filters. Every search must return exactly the keys whose
 * visible value holds the term, in key order. Also: memtable values found
 * without a scan, damaged value filters degrade to scanning, and the
 * parameters are fixed per database. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bloomkv.h"
#include "table/format.h"
#include "table/table.h"
#include "valuesearch/table_values.h"
#include "test_db.h"
#include "test_dir.h"
#include "util/hash.h"

TEST_DIR_FIXTURE("vsearch")

#define NKEYS 2000
#define NSNAP 3

typedef struct state {
    char *val[NKEYS]; /* NULL: absent */
} state;

static void state_free(state *s) {
    for (int i = 0; i < NKEYS; i++) free(s->val[i]);
    memset(s, 0, sizeof *s);
}

static void state_copy(state *dst, const state *src) {
    for (int i = 0; i < NKEYS; i++) dst->val[i] = src->val[i] ? strdup(src->val[i]) : NULL;
}

/* Records "a=<x>;b=<y>": the terms extractor yields "a=<x>" and "b=<y>". */
static void split_terms(void *arg, const void *val, size_t vlen, bkv_term_emit_fn emit, void *ctx) {
    (void)arg;
    const char *v = val, *end = v + vlen;
    while (v < end) {
        const char *semi = memchr(v, ';', (size_t)(end - v));
        size_t n = semi ? (size_t)(semi - v) : (size_t)(end - v);
        emit(ctx, v, n);
        v += n + (semi != NULL);
    }
}

/* The oracle's terms: 0 the whole value, 1 split_terms, 2 the built-in
 * "words" (lower-cased runs of letters and digits), 3 the built-in
 * "json:b" (the string field b of a JSON object value). */
enum { TERMS_WHOLE, TERMS_SPLIT, TERMS_WORDS, TERMS_JSON };

static int holds_word(const char *val, const char *term) {
    size_t tl = strlen(term);
    for (const char *p = val; *p;) {
        while (*p && !isalnum((unsigned char)*p)) p++;
        const char *start = p;
        while (*p && isalnum((unsigned char)*p)) p++;
        size_t n = (size_t)(p - start);
        if (n != tl || n == 0) continue;
        size_t i = 0;
        while (i < n && tolower((unsigned char)start[i]) == term[i]) i++;
        if (i == n) return 1;
    }
    return 0;
}

static int holds_json_b(const char *val, const char *term) {
    if (val[0] != '{') return 0; /* the values that are not JSON */
    const char *b = strstr(val, "\"b\":\"");
    if (!b) return 0;
    b += 5;
    const char *end = strchr(b, '"');
    return end && (size_t)(end - b) == strlen(term) && memcmp(b, term, strlen(term)) == 0;
}

static int holds(const char *val, const char *term, int terms) {
    if (terms == TERMS_WHOLE) return strcmp(val, term) == 0;
    if (terms == TERMS_WORDS) return holds_word(val, term);
    if (terms == TERMS_JSON) return holds_json_b(val, term);
    size_t tl = strlen(term);
    for (const char *p = val; p;) {
        const char *semi = strchr(p, ';');
        size_t n = semi ? (size_t)(semi - p) : strlen(p);
        if (n == tl && memcmp(p, term, n) == 0) return 1;
        p = semi ? semi + 1 : NULL;
    }
    return 0;
}

/* FNV-1a: results are checked by their values' hashes. */
static uint64_t value_hash(const void *v, size_t n) {
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)v)[i]) * 0x100000001b3u;
    return h;
}

typedef struct found {
    char keys[NKEYS][16];
    uint64_t vhash[NKEYS];
    int n;
    int order_ok;
} found;

static int on_result(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    found *f = arg;
    assert_true(klen < 16 && f->n < NKEYS);
    memcpy(f->keys[f->n], key, klen);
    f->keys[f->n][klen] = 0;
    f->vhash[f->n] = value_hash(val, vlen);
    if (f->n > 0 && strcmp(f->keys[f->n - 1], f->keys[f->n]) >= 0) f->order_ok = 0;
    f->n++;
    return 0;
}

/* The same search as the iterator, a page at a time (each page a new
 * iterator resuming after the last key of the one before): the pages
 * together are exactly the callback's results. */
static void check_pages(bkv_db *db, const bkv_read_options *ro, const char *const *qterms, const size_t *lens,
                        size_t nterms, unsigned mode, const found *f, const char *ctx) {
    bkv_find_options fo;
    bkv_find_options_init(&fo);
    fo.mode = mode;
    fo.limit = f->n / 4 > 7 ? (uint64_t)f->n / 4 : 7;
    fo.keys_only = f->n % 2;
    char last[16] = "";
    int got = 0;
    for (int page = 0;; page++) {
        bkv_find_iter *it;
        if (bkv_find_iter_create(db, ro, (const void *const *)qterms, lens, nterms, &fo, &it) != BKV_OK)
            fail_msg("%s: bkv_find_iter_create: %s", ctx, bkv_errmsg(db));
        uint64_t in_page = 0;
        int rc;
        while ((rc = bkv_find_iter_next(it)) == BKV_OK) {
            size_t kl, vl;
            const char *k = bkv_find_iter_key(it, &kl);
            const void *v = bkv_find_iter_value(it, &vl);
            assert_true(fo.keys_only ? v == NULL : v != NULL);
            if (got >= f->n || kl != strlen(f->keys[got]) || memcmp(k, f->keys[got], kl) != 0)
                fail_msg("%s: page %d: result %d differs from the callback's", ctx, page, got);
            memcpy(last, k, kl);
            last[kl] = 0;
            got++;
            in_page++;
        }
        assert_int_equal(rc, BKV_NOTFOUND);
        assert_int_equal(bkv_find_iter_status(it), BKV_OK);
        assert_int_equal(bkv_find_iter_next(it), BKV_NOTFOUND); /* stays at the end */
        assert_null(bkv_find_iter_key(it, NULL));
        bkv_find_iter_destroy(it);
        assert_true(in_page <= fo.limit);
        if (in_page < fo.limit) break;
        fo.after = last;
        fo.after_len = strlen(last);
    }
    if (got != f->n) fail_msg("%s: pages gave %d results, the callback %d", ctx, got, f->n);
}

/* The same search with each plan forced: the same results. */
static void check_forced_plans(bkv_db *db, const bkv_read_options *ro, const char *const *qterms, const size_t *lens,
                               size_t nterms, unsigned mode, const found *f, const char *ctx) {
    for (unsigned plan = BKV_FIND_PLAN_INDEX; plan <= BKV_FIND_PLAN_SCAN; plan++) {
        bkv_find_options fo;
        bkv_find_options_init(&fo);
        fo.mode = mode;
        fo.plan = plan;
        bkv_find_iter *it;
        if (bkv_find_iter_create(db, ro, (const void *const *)qterms, lens, nterms, &fo, &it) != BKV_OK)
            fail_msg("%s: bkv_find_iter_create (plan %u): %s", ctx, plan, bkv_errmsg(db));
        int got = 0, rc;
        while ((rc = bkv_find_iter_next(it)) == BKV_OK) {
            size_t kl;
            const char *k = bkv_find_iter_key(it, &kl);
            if (got >= f->n || kl != strlen(f->keys[got]) || memcmp(k, f->keys[got], kl) != 0)
                fail_msg("%s: plan %u: result %d differs", ctx, plan, got);
            got++;
        }
        assert_int_equal(rc, BKV_NOTFOUND);
        bkv_find_stats st;
        bkv_find_iter_stats(it, &st);
        assert_int_equal(st.plan_scan, plan == BKV_FIND_PLAN_SCAN);
        bkv_find_iter_destroy(it);
        if (got != f->n) fail_msg("%s: plan %u gave %d results, expected %d", ctx, plan, got, f->n);
    }
}

/* One search of nterms terms combined by mode (a single term goes
 * through bkv_find_value, the wrapper), checked against the model. */
static void check_query(bkv_db *db, const bkv_snapshot *snap, const state *s, const char *const *qterms, size_t nterms,
                        unsigned mode, int terms, const char *ctx) {
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.snapshot = snap;
    static found f;
    f.n = 0;
    f.order_ok = 1;
    bkv_find_stats st;
    size_t lens[4];
    for (size_t t = 0; t < nterms; t++) lens[t] = strlen(qterms[t]);
    int rc = nterms == 1 ? bkv_find_value(db, &ro, qterms[0], lens[0], on_result, &f, &st)
                         : bkv_find_values(db, &ro, (const void *const *)qterms, lens, nterms, mode, on_result, &f, &st);
    if (rc) fail_msg("%s: find(%s, %zu terms) = %d: %s", ctx, qterms[0], nterms, rc, bkv_errmsg(db));
    assert_true(f.order_ok);
    int want = 0;
    for (int i = 0; i < NKEYS; i++) {
        if (!s->val[i]) continue;
        size_t held = 0;
        for (size_t t = 0; t < nterms; t++) held += (size_t)holds(s->val[i], qterms[t], terms);
        if (mode == BKV_FIND_ALL ? held < nterms : held == 0) continue;
        char key[16];
        snprintf(key, sizeof key, "k%05d", i);
        if (want >= f.n || strcmp(f.keys[want], key) != 0)
            fail_msg("%s: %s (%zu terms, %s): expected key %s at result %d (got %d results)", ctx, qterms[0], nterms,
                     mode == BKV_FIND_ALL ? "all" : "any", key, want, f.n);
        if (f.vhash[want] != value_hash(s->val[i], strlen(s->val[i])))
            fail_msg("%s: %s: key %s returned with another value than its visible one", ctx, qterms[0], key);
        want++;
    }
    if (want != f.n) fail_msg("%s: %s (%zu terms): %d results, expected %d", ctx, qterms[0], nterms, f.n, want);
    assert_int_equal(st.results, (uint64_t)want);
    check_pages(db, &ro, qterms, lens, nterms, mode, &f, ctx);
    if (nterms == 1) check_forced_plans(db, &ro, qterms, lens, nterms, mode, &f, ctx);
    /* The scan validates nothing by point reads (its entries are the newest
     * versions already): what was validated is the index plan's before the
     * scan took over. */
    if (st.plan_scan) assert_true(st.scan_cost >= st.results && st.candidates <= st.memtable_candidates + st.entries_scanned);
    else assert_true(st.candidates >= st.results && st.leaves_positive <= st.leaves_probed + st.leaves);
}

static void check_search(bkv_db *db, const bkv_snapshot *snap, const state *s, const char *term, int terms,
                         const char *ctx) {
    check_query(db, snap, s, &term, 1, BKV_FIND_ALL, terms, ctx);
}

static char *make_value(uint64_t *rng, int terms) {
    char buf[64];
    unsigned a = (unsigned)(bkv_splitmix64(rng) % 40), b = (unsigned)(bkv_splitmix64(rng) % 25);
    if (terms == TERMS_SPLIT) snprintf(buf, sizeof buf, "a=%u;b=%u", a, b);
    else if (terms == TERMS_WORDS) snprintf(buf, sizeof buf, "Red%u, blue%u!", a, b);
    else if (terms == TERMS_JSON && a % 8 == 0) snprintf(buf, sizeof buf, "b x%u", b); /* not JSON: no terms */
    else if (terms == TERMS_JSON) snprintf(buf, sizeof buf, "{\"a\":%u,\"b\":\"x%u\"}", a, b);
    else snprintf(buf, sizeof buf, "val%03u", (unsigned)(bkv_splitmix64(rng) % 60));
    return strdup(buf);
}

static void random_term(uint64_t *rng, int terms, char *out, size_t n) {
    int first = bkv_splitmix64(rng) & 1;
    unsigned a = (unsigned)(bkv_splitmix64(rng) % 42), b = (unsigned)(bkv_splitmix64(rng) % 27);
    if (terms == TERMS_WHOLE) snprintf(out, n, "val%03u", (unsigned)(bkv_splitmix64(rng) % 64));
    else if (terms == TERMS_WORDS) snprintf(out, n, first ? "red%u" : "blue%u", first ? a : b);
    else if (terms == TERMS_JSON) snprintf(out, n, "x%u", b);
    else if (first) snprintf(out, n, "a=%u", a);
    else snprintf(out, n, "b=%u", b);
}

typedef struct config {
    const char *name;
    int shape, style, terms;
    uint32_t m, partition;
    int order;
} config;

static void options_for(const config *c, bkv_options *o) {
    bkv_options_init(o);
    o->write_buffer_size = 4 << 10;
    o->target_file_size = 8 << 10;
    o->max_bytes_for_level_base = 32 << 10;
    o->block_size = 256;
    o->compaction_style = c->style;
    o->value_index = c->shape;
    o->value_filter_bits = c->m;
    o->value_partition_entries = c->partition;
    o->value_index_order = c->order;
    if (c->terms == TERMS_SPLIT) {
        o->value_terms = split_terms;
        o->value_terms_name = "split-semicolon";
    }
    if (c->terms == TERMS_WORDS) o->value_terms_name = "words";
    if (c->terms == TERMS_JSON) o->value_terms_name = "json:b";
}

static void run_config(const config *c) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, c->name);
    bkv_options o;
    options_for(c, &o);
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    uint64_t rng = 0x5eed ^ (uint64_t)c->shape * 31 ^ (uint64_t)c->terms * 7 ^ c->partition;
    static state model, snaps[NSNAP];
    const bkv_snapshot *snap_handles[NSNAP] = {0};
    memset(&model, 0, sizeof model);
    memset(snaps, 0, sizeof snaps);
    bkv_batch *batch = bkv_batch_create();
    char ctx[128];
    for (int step = 0; step < 12000; step++) {
        uint64_t r = bkv_splitmix64(&rng) % 1000;
        int k = (int)(bkv_splitmix64(&rng) % NKEYS);
        char key[16];
        snprintf(key, sizeof key, "k%05d", k);
        if (r < 700) {
            char *v = make_value(&rng, c->terms);
            assert_int_equal(bkv_put(db, NULL, key, strlen(key), v, strlen(v)), BKV_OK);
            free(model.val[k]);
            model.val[k] = v;
        } else if (r < 900) {
            assert_int_equal(bkv_delete(db, NULL, key, strlen(key)), BKV_OK);
            free(model.val[k]);
            model.val[k] = NULL;
        } else if (r < 960) {
            bkv_batch_clear(batch);
            for (int j = 0; j < 5; j++) {
                int bk = (int)(bkv_splitmix64(&rng) % NKEYS);
                char bkey[16];
                snprintf(bkey, sizeof bkey, "k%05d", bk);
                char *v = make_value(&rng, c->terms);
                assert_int_equal(bkv_batch_put(batch, bkey, strlen(bkey), v, strlen(v)), BKV_OK);
                free(model.val[bk]);
                model.val[bk] = v;
            }
            assert_int_equal(bkv_write(db, NULL, batch), BKV_OK);
        } else if (r < 975) {
            int i = (int)(bkv_splitmix64(&rng) % NSNAP);
            if (snap_handles[i]) bkv_snapshot_release(db, snap_handles[i]);
            state_free(&snaps[i]);
            snap_handles[i] = bkv_snapshot_create(db);
            state_copy(&snaps[i], &model);
        } else if (r < 985) {
            assert_int_equal(bkv_flush(db), BKV_OK);
        } else if (r < 990) {
            assert_int_equal(bkv_compact(db), BKV_OK);
        } else if (r < 993) {
            for (int i = 0; i < NSNAP; i++) {
                if (snap_handles[i]) bkv_snapshot_release(db, snap_handles[i]);
                snap_handles[i] = NULL;
                state_free(&snaps[i]);
            }
            assert_int_equal(bkv_close(db), BKV_OK);
            assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        }
        if (step % 300 == 299) {
            for (int q = 0; q < 6; q++) {
                char term[32];
                random_term(&rng, c->terms, term, sizeof term);
                snprintf(ctx, sizeof ctx, "%s step %d", c->name, step);
                check_search(db, NULL, &model, term, c->terms, ctx);
                int i = q % NSNAP;
                if (snap_handles[i]) {
                    snprintf(ctx, sizeof ctx, "%s step %d snapshot %d", c->name, step, i);
                    check_search(db, snap_handles[i], &snaps[i], term, c->terms, ctx);
                }
                /* Several terms: an AND of an a= and a b= term (or of a
                 * whole value with itself or another), an OR of three. */
                char t2[32], t3[32];
                random_term(&rng, c->terms, t2, sizeof t2);
                random_term(&rng, c->terms, t3, sizeof t3);
                if (c->terms == TERMS_SPLIT) {
                    if (term[0] == t2[0]) t2[0] = term[0] == 'a' ? 'b' : 'a', t2[2] = '1', t2[3] = 0;
                } else if (c->terms == TERMS_WHOLE && (q & 1)) {
                    strcpy(t2, term);
                }
                const char *pair[2] = {term, t2}, *three[3] = {term, t2, t3};
                snprintf(ctx, sizeof ctx, "%s step %d", c->name, step);
                check_query(db, NULL, &model, pair, 2, BKV_FIND_ALL, c->terms, ctx);
                check_query(db, NULL, &model, three, 3, BKV_FIND_ANY, c->terms, ctx);
                if (snap_handles[i]) {
                    snprintf(ctx, sizeof ctx, "%s step %d snapshot %d", c->name, step, i);
                    check_query(db, snap_handles[i], &snaps[i], pair, 2, BKV_FIND_ALL, c->terms, ctx);
                    check_query(db, snap_handles[i], &snaps[i], three, 3, BKV_FIND_ANY, c->terms, ctx);
                }
            }
        }
    }
    char *files = bkv_property(db, "bloomkv.stats");
    assert_non_null(strstr(files, "value index: "));
    bkv_free(files);
    char *vi = bkv_property(db, "bloomkv.value-index");
    fprintf(stderr, "%s: %s", c->name, vi);
    bkv_free(vi);
    assert_int_equal(test_counter(db, "value-filters-unusable"), 0);
    for (int i = 0; i < NSNAP; i++) {
        if (snap_handles[i]) bkv_snapshot_release(db, snap_handles[i]);
        state_free(&snaps[i]);
    }
    state_free(&model);
    bkv_batch_destroy(batch);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void test_oracle_flat(void **s) {
    (void)s;
    run_config(&(config){"flat", BKV_VALUE_INDEX_FLAT, BKV_COMPACTION_LEVELED, 0, 256, 16, 2});
}

static void test_oracle_hierarchy(void **s) {
    (void)s;
    run_config(&(config){"hier", BKV_VALUE_INDEX_HIERARCHY, BKV_COMPACTION_LEVELED, 0, 512, 16, 2});
    run_config(&(config){"hier5", BKV_VALUE_INDEX_HIERARCHY, BKV_COMPACTION_TIERED, 0, 1024, 32, 5});
}

static void test_oracle_bitsliced(void **s) {
    (void)s;
    run_config(&(config){"sliced", BKV_VALUE_INDEX_BITSLICED, BKV_COMPACTION_LEVELED, 0, 256, 8, 2});
    run_config(&(config){"sliced-tiered", BKV_VALUE_INDEX_BITSLICED, BKV_COMPACTION_TIERED, 0, 256, 16, 2});
}

static void test_oracle_terms(void **s) {
    (void)s;
    run_config(&(config){"terms-hier", BKV_VALUE_INDEX_HIERARCHY, BKV_COMPACTION_LEVELED, 1, 512, 16, 3});
    run_config(&(config){"terms-sliced", BKV_VALUE_INDEX_BITSLICED, BKV_COMPACTION_TIERED, 1, 512, 16, 2});
}

/* The built-in extractors against the same brute-force model. */
static void test_oracle_builtin(void **s) {
    (void)s;
    run_config(&(config){"words-sliced", BKV_VALUE_INDEX_BITSLICED, BKV_COMPACTION_LEVELED, TERMS_WORDS, 512, 16, 2});
    run_config(&(config){"json-hier", BKV_VALUE_INDEX_HIERARCHY, BKV_COMPACTION_TIERED, TERMS_JSON, 512, 16, 3});
}

/* The paged index answers from the tables' summaries and rows: the same
 * results as every in-memory shape, with whole values and with terms. */
static void test_oracle_paged(void **s) {
    (void)s;
    run_config(&(config){"paged", BKV_VALUE_INDEX_PAGED, BKV_COMPACTION_LEVELED, 0, 256, 8, 2});
    run_config(&(config){"paged-tiered", BKV_VALUE_INDEX_PAGED, BKV_COMPACTION_TIERED, 0, 512, 16, 2});
    run_config(&(config){"terms-paged", BKV_VALUE_INDEX_PAGED, BKV_COMPACTION_LEVELED, TERMS_SPLIT, 512, 16, 2});
    run_config(&(config){"words-paged", BKV_VALUE_INDEX_PAGED, BKV_COMPACTION_TIERED, TERMS_WORDS, 256, 0, 2});
}

static void test_oracle_whole_table(void **s) {
    (void)s;
    run_config(&(config){"whole", BKV_VALUE_INDEX_HIERARCHY, BKV_COMPACTION_LEVELED, 0, 4096, 0, 2});
}

static int count_result(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)key, (void)klen, (void)val, (void)vlen;
    (*(int *)arg)++;
    return 0;
}

/* Values still in the memtable are found through its term index: a search
 * looks at the entries holding the term, not at every entry. */
static void test_memtable_no_scan(void **s) {
    (void)s;
    char path[300];
    snprintf(path, sizeof path, "%s/mem", dir);
    bkv_options o;
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int i = 0; i < 20000; i++) {
        char k[16], v[32];
        snprintf(k, sizeof k, "k%06d", i);
        snprintf(v, sizeof v, "value-%06d", i);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
    }
    int n = 0;
    bkv_find_stats st;
    assert_int_equal(bkv_find_value(db, NULL, "value-012345", 12, count_result, &n, &st), BKV_OK);
    assert_int_equal(n, 1);
    assert_int_equal(st.memtable_candidates, 1);
    assert_true(st.entries_scanned <= 2);
    assert_int_equal(st.partitions_scanned, 0);
    n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "absent", 6, count_result, &n, &st), BKV_OK);
    assert_int_equal(n, 0);
    assert_true(st.entries_scanned <= 1);
    /* After a flush the same value is found through one partition. */
    assert_int_equal(bkv_flush(db), BKV_OK);
    n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "value-012345", 12, count_result, &n, &st), BKV_OK);
    assert_int_equal(n, 1);
    assert_true(st.partitions_scanned >= 1 && st.partitions_scanned <= 3);
    assert_int_equal(st.partitions_matched, 1);
    assert_true(st.entries_scanned <= 3 * 1024);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* The number of path's newest table, its file's path in tpath. */
static uint64_t newest_table(const char *path, char tpath[400]) {
    uint64_t best = 0;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep 'sst$'", path);
    FILE *p = popen(cmd, "r");
    char line[64];
    while (fgets(line, sizeof line, p)) best = strtoull(line, NULL, 10);
    pclose(p);
    snprintf(tpath, 400, "%s/%06llu.sst", path, (unsigned long long)best);
    return best;
}

/* A database (dir/name, value index shape) holding one flushed table of
 * 5,000 keys k000000.. with values v<i % mod>, in blocks of block_size
 * bytes (0: the default); its path, its table's path and the options it
 * was made with. Returns the table's number. */
static uint64_t one_table_db_blocks(const char *name, int shape, int mod, size_t block_size, char path[300],
                                    char tpath[400], bkv_options *o) {
    snprintf(path, 300, "%s/%s", dir, name);
    bkv_options_init(o);
    o->value_index = shape;
    if (block_size) o->block_size = block_size;
    bkv_db *db;
    assert_int_equal(bkv_open(path, o, &db), BKV_OK);
    for (int i = 0; i < 5000; i++) {
        char k[16], v[32];
        snprintf(k, sizeof k, "k%06d", i);
        snprintf(v, sizeof v, "v%d", i % mod);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
    }
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
    return newest_table(path, tpath);
}

static uint64_t one_table_db(const char *name, int shape, int mod, char path[300], char tpath[400], bkv_options *o) {
    return one_table_db_blocks(name, shape, mod, 0, path, tpath, o);
}

/* A damaged value filter block costs a scan of its table, never a result. */
static void test_damaged_value_filters(void **s) {
    (void)s;
    char path[300], tpath[400];
    bkv_options o;
    uint64_t number = one_table_db("damaged", BKV_VALUE_INDEX_HIERARCHY, 50, path, tpath, &o);
    bkv_db *db;
    bkv_table *t;
    assert_int_equal(bkv_table_open(bkv_env_posix(), tpath, number, NULL, NULL, &t, NULL), BKV_OK);
    bkv_handle vh;
    assert_true(bkv_vs_filter_handle(t, &vh));
    uint64_t off = vh.offset, len = vh.size;
    bkv_table_close(t);
    assert_true(len > 0);
    uint64_t spots[] = {off + 1, off + 40, off + len - 3};
    for (size_t i = 0; i < sizeof spots / sizeof spots[0]; i++) {
        assert_int_equal(test_xor_byte(tpath, (long)spots[i], 0x5a), 0);
        assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        assert_int_equal(test_counter(db, "value-filters-unusable"), 1);
        int n = 0;
        bkv_find_stats st;
        assert_int_equal(bkv_find_value(db, NULL, "v7", 2, count_result, &n, &st), BKV_OK);
        assert_int_equal(n, 100);
        assert_int_equal(st.partitions_scanned, 1); /* the whole table, once */
        assert_int_equal(st.entries_scanned, 5000);
        assert_int_equal(bkv_close(db), BKV_OK);
        assert_int_equal(test_xor_byte(tpath, (long)spots[i], 0x5a), 0); /* repaired */
    }
    /* Repaired, it is used again. */
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(test_counter(db, "value-filters-unusable"), 0);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* Rewrites the trailer of the block at h in path so that it verifies
 * again (damage a checksum cannot see). */
static void reseal_block(const char *path, bkv_handle h) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    uint8_t *data = malloc((size_t)h.size + 1);
    assert_int_equal(fseek(f, (long)h.offset, SEEK_SET), 0);
    assert_int_equal(fread(data, 1, (size_t)h.size + 1, f), (size_t)h.size + 1);
    uint64_t sum = bkv_block_checksum(data, (size_t)h.size, data[h.size]);
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(sum >> (8 * i));
    assert_int_equal(fseek(f, (long)(h.offset + h.size + 1), SEEK_SET), 0);
    assert_int_equal(fwrite(le, 1, 8, f), 8);
    assert_int_equal(fclose(f), 0);
    free(data);
}

static void expect_v7_holders(const char *path, const bkv_options *o, const char *ctx) {
    bkv_db *db;
    assert_int_equal(bkv_open(path, o, &db), BKV_OK);
    int n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "v7", 2, count_result, &n, NULL), BKV_OK);
    if (n != 10) fail_msg("%s: %d results, not 10", ctx, n);
    n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "v777", 4, count_result, &n, NULL), BKV_OK);
    if (n != 0) fail_msg("%s: %d results for an absent value", ctx, n);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void check_problems(void *arg, const char *line) {
    (void)line;
    (*(int *)arg)++;
}

/* The paged layout (format.md, value filter block version 2): an absent
 * value stops at a table's summary; a damaged row answers "maybe" for its
 * bits only; a summary that does not open costs reading the rows; a
 * damaged head costs a scan of the table. Never a missed result, and
 * check names each. */
static void test_paged_damage(void **s) {
    (void)s;
    char path[300], tpath[400];
    bkv_options o;
    uint64_t number = one_table_db("paged-damage", BKV_VALUE_INDEX_PAGED, 500, path, tpath, &o);
    bkv_table *t;
    assert_int_equal(bkv_table_open(bkv_env_posix(), tpath, number, NULL, NULL, &t, NULL), BKV_OK);
    bkv_handle head;
    assert_true(bkv_vs_filter_handle(t, &head));
    bkv_filter *summary;
    assert_int_equal(bkv_vs_summary(t, &summary, NULL), BKV_OK);
    bkv_filter_info fi;
    bkv_filter_get_info(summary, &fi);
    assert_int_equal(fi.type, BKV_FILTER_BLOCKED_BLOOM); /* a flush's table: a compaction will rewrite it */
    assert_int_equal(fi.num_keys, 500);                  /* each distinct value once */
    bkv_filter_destroy(summary);
    bkv_table_close(t);
    FILE *f = fopen(tpath, "rb");
    uint8_t hdr[48];
    assert_int_equal(fseek(f, (long)head.offset, SEEK_SET), 0);
    assert_int_equal(fread(hdr, 1, sizeof hdr, f), sizeof hdr);
    fclose(f);
    assert_int_equal(hdr[4], 2); /* version 2 */
    uint32_t nparts = (uint32_t)hdr[12] | (uint32_t)hdr[13] << 8 | (uint32_t)hdr[14] << 16 | (uint32_t)hdr[15] << 24;
    uint64_t rows_offset = 0;
    for (int i = 7; i >= 0; i--) rows_offset = rows_offset << 8 | hdr[32 + i];
    uint32_t per_block = (uint32_t)hdr[40] | (uint32_t)hdr[41] << 8;
    /* m = 4096: 64 rows of 8 n bytes, as many to a block as fit 4 KiB. */
    assert_true(nparts > 1 && per_block >= 1 && per_block * 8 * nparts <= 4096 && 64 % per_block == 0);
    uint64_t block_len = 8 * (uint64_t)nparts * per_block + 9, summary_at = head.offset + 48 + 24 * (uint64_t)nparts;
    assert_int_equal(rows_offset + 64 / per_block * block_len, head.offset);

    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(test_counter(db, "value-filters-unusable"), 0);
    bkv_find_stats st;
    int n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "absent", 6, count_result, &n, &st), BKV_OK);
    assert_int_equal(n, 0);
    assert_int_equal(st.nodes_probed, 1);
    assert_int_equal(st.nodes_positive, 0); /* the summary said no: no row was read */
    assert_int_equal(st.partitions_scanned, 0);
    assert_int_equal(bkv_find_value(db, NULL, "v7", 2, count_result, &n, &st), BKV_OK);
    assert_int_equal(n, 10);
    assert_true(st.partitions_scanned <= 12); /* the rows narrowed 40 partitions to the 10 holders' */
    char *mem = bkv_property(db, "bloomkv.value-index-memory");
    assert_true(strtoull(mem, NULL, 10) > 0 && strtoull(mem, NULL, 10) < 5000); /* a byte per entry at most */
    bkv_free(mem);
    assert_int_equal(bkv_close(db), BKV_OK);

    /* Blocks of rows damaged in turn (in the middle of their words): still every result. */
    for (uint64_t g = 0; g < 64 / per_block; g++) {
        uint64_t at = rows_offset + g * block_len + block_len / 2;
        assert_int_equal(test_xor_byte(tpath, (long)at, 0xff), 0);
        char ctx[64];
        snprintf(ctx, sizeof ctx, "rows block %llu damaged", (unsigned long long)g);
        expect_v7_holders(path, &o, ctx);
        int problems = 0;
        assert_int_equal(bkv_check(path, check_problems, &problems), BKV_CORRUPTION);
        assert_true(problems >= 1);
        assert_int_equal(test_xor_byte(tpath, (long)at, 0xff), 0);
    }

    /* A summary whose bytes are wrong but whose block checksum holds: it
     * does not open as a filter, so the rows decide. */
    assert_int_equal(summary_at + 2 < head.offset + head.size, 1);
    assert_int_equal(test_xor_byte(tpath, (long)summary_at + 2, 0x40), 0);
    reseal_block(tpath, head);
    expect_v7_holders(path, &o, "summary damaged");
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(bkv_find_value(db, NULL, "absent", 6, count_result, &n, &st), BKV_OK);
    assert_int_equal(st.nodes_positive, 1); /* past the summary it cannot trust */
    assert_int_equal(st.leaves_probed, nparts); /* to the rows, not to a scan of the table */
    assert_int_equal(st.partitions_scanned, 0);
    assert_int_equal(test_counter(db, "value-filters-unusable"), 0);
    assert_true(test_counter(db, "filter-corrupt") >= 1);
    assert_int_equal(bkv_close(db), BKV_OK);
    int problems = 0;
    assert_int_equal(bkv_check(path, check_problems, &problems), BKV_CORRUPTION);
    assert_int_equal(problems, 1);
    assert_int_equal(test_xor_byte(tpath, (long)summary_at + 2, 0x40), 0);
    reseal_block(tpath, head);
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_OK);

    /* A head whose rows would not end at it, resealed; then a head that
     * fails its checksum: the whole table is scanned. */
    assert_int_equal(test_xor_byte(tpath, (long)head.offset + 32, 0x08), 0);
    reseal_block(tpath, head);
    expect_v7_holders(path, &o, "rows misplaced");
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(test_counter(db, "value-filters-unusable"), 1);
    assert_int_equal(bkv_find_value(db, NULL, "v7", 2, count_result, &(int){0}, &st), BKV_OK);
    assert_int_equal(st.entries_scanned, 5000);
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(test_xor_byte(tpath, (long)head.offset + 32, 0x08), 0);
    reseal_block(tpath, head);
    assert_int_equal(test_xor_byte(tpath, (long)head.offset + 13, 0x01), 0);
    expect_v7_holders(path, &o, "head damaged");
    assert_int_equal(test_xor_byte(tpath, (long)head.offset + 13, 0x01), 0);
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_OK);
}

/* Value tags (format.md, "Value tags"): a search reads only the blocks of
 * a candidate partition whose tags may match; damaged tags cost reading
 * the whole partition, never a result; check compares every tag with its
 * entry; an index with a terms extractor has none. */
static void test_value_tags(void **s) {
    (void)s;
    char path[300], tpath[400];
    bkv_options o;
    uint64_t number = one_table_db_blocks("tags", BKV_VALUE_INDEX_BITSLICED, 500, 512, path, tpath, &o);
    bkv_table *t;
    assert_int_equal(bkv_table_open(bkv_env_posix(), tpath, number, NULL, NULL, &t, NULL), BKV_OK);
    bkv_vf_set vf;
    assert_int_equal(bkv_vs_table_filters(t, &vf, NULL), BKV_OK);
    bkv_vt_index tix;
    assert_int_equal(bkv_vs_tags_index(t, &tix, NULL), BKV_OK);
    assert_int_equal(tix.n, vf.nparts);
    assert_true(vf.nparts >= 5);
    uint32_t blocks = tix.first_block[tix.n];
    assert_true(blocks >= 2 * tix.n); /* partitions of several blocks: tags have something to skip */
    for (uint32_t i = 0; i < tix.n; i++) assert_int_equal(tix.first_block[i], vf.parts[i].first_block);
    bkv_handle index;
    assert_true(bkv_vs_tags_handle(t, &index));
    bkv_handle part0 = {tix.offset[0], tix.size[0]};
    uint32_t part0_blocks = tix.first_block[1];
    bkv_vt_index_free(&tix);
    bkv_vf_set_free(&vf);
    bkv_table_close(t);

    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    bkv_find_stats st;
    int n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "v7", 2, count_result, &n, &st), BKV_OK);
    assert_int_equal(n, 10);
    uint64_t tagged_scan = st.entries_scanned;
    /* About one block of each partition holding a v7, of 6 or 7. */
    assert_true(st.partitions_scanned >= 10);
    assert_true(tagged_scan * 3 < 128 * st.partitions_scanned);
    n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "v777", 4, count_result, &n, NULL), BKV_OK);
    assert_int_equal(n, 0);
    assert_int_equal(test_counter(db, "filter-corrupt"), 0);
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_OK);

    /* A tags block failing its checksum: its partition is read whole. */
    long at = (long)(part0.offset + 4 * part0_blocks + 6);
    assert_int_equal(test_xor_byte(tpath, at, 0x21), 0);
    expect_v7_holders(path, &o, "tags block damaged");
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(bkv_find_value(db, NULL, "v7", 2, count_result, &(int){0}, &st), BKV_OK);
    assert_true(st.entries_scanned > tagged_scan);
    assert_true(test_counter(db, "filter-corrupt") >= 1);
    assert_int_equal(bkv_close(db), BKV_OK);
    int problems = 0;
    assert_int_equal(bkv_check(path, check_problems, &problems), BKV_CORRUPTION);
    assert_int_equal(problems, 1);

    /* A wrong tag the checksum cannot see (resealed): check finds it. */
    reseal_block(tpath, part0);
    problems = 0;
    assert_int_equal(bkv_check(path, check_problems, &problems), BKV_CORRUPTION);
    assert_int_equal(problems, 1);
    assert_int_equal(test_xor_byte(tpath, at, 0x21), 0);
    reseal_block(tpath, part0);
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_OK);

    /* A block count that disagrees with the size, resealed: "maybe". */
    assert_int_equal(test_xor_byte(tpath, (long)part0.offset, 0x01), 0);
    reseal_block(tpath, part0);
    expect_v7_holders(path, &o, "tags counts wrong");
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_CORRUPTION);
    assert_int_equal(test_xor_byte(tpath, (long)part0.offset, 0x01), 0);
    reseal_block(tpath, part0);

    /* A damaged index: no tags at all for the table; every partition whole. */
    assert_int_equal(test_xor_byte(tpath, (long)index.offset + 9, 0x10), 0);
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "v7", 2, count_result, &n, &st), BKV_OK);
    assert_int_equal(n, 10);
    assert_true(st.entries_scanned >= 120 * st.partitions_scanned);
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_CORRUPTION);
    assert_int_equal(test_xor_byte(tpath, (long)index.offset + 9, 0x10), 0);
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_OK);

    /* With a terms extractor an entry has many terms: no tags. */
    snprintf(path, 300, "%s/tags-terms", dir);
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    o.value_terms = split_terms;
    o.value_terms_name = "split-semicolon";
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int i = 0; i < 2000; i++) {
        char k[16], v[32];
        snprintf(k, sizeof k, "k%06d", i);
        snprintf(v, sizeof v, "a%d;b%d", i % 50, i % 7);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
    }
    assert_int_equal(bkv_flush(db), BKV_OK);
    n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "b3", 2, count_result, &n, NULL), BKV_OK);
    assert_true(n >= 285 && n <= 286);
    assert_int_equal(bkv_close(db), BKV_OK);
    number = newest_table(path, tpath);
    assert_int_equal(bkv_table_open(bkv_env_posix(), tpath, number, NULL, NULL, &t, NULL), BKV_OK);
    bkv_handle none;
    assert_false(bkv_vs_tags_handle(t, &none));
    assert_int_equal(bkv_vs_tags_index(t, &tix, NULL), BKV_NOTFOUND);
    bkv_table_close(t);
}

static int mark_result(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)vlen;
    uint8_t *seen = arg;
    char digits[16] = ""; /* key is not NUL-terminated: k01234 -> 1234 */
    if (klen > 1 && klen < sizeof digits) memcpy(digits, (const char *)key + 1, klen - 1);
    int i = atoi(digits);
    assert_memory_equal(val, "v7", 2);
    seen[i]++;
    return 0;
}

/* A damaged data block in a candidate partition fails the search naming
 * the table and offset; with continue_on_error the other partitions'
 * results still come (each once, right), then the same error. */
static void test_damaged_partition(void **s) {
    (void)s;
    char path[300], tpath[400];
    bkv_options o;
    one_table_db("damaged-block", BKV_VALUE_INDEX_BITSLICED, 500, path, tpath, &o);
    bkv_db *db;
    assert_int_equal(test_xor_byte(tpath, 20, 0x5a), 0); /* in the first data block */

    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    uint8_t seen[5000] = {0};
    bkv_find_stats st;
    assert_int_equal(bkv_find_value(db, NULL, "v7", 2, mark_result, seen, &st), BKV_CORRUPTION);
    assert_int_equal(st.plan_scan, 0);
    assert_non_null(strstr(bkv_errmsg(db), ".sst"));
    assert_non_null(strstr(bkv_errmsg(db), "offset"));

    bkv_find_options fo;
    bkv_find_options_init(&fo);
    fo.continue_on_error = 1;
    const void *term = "v7";
    size_t tlen = 2;
    bkv_find_iter *it;
    assert_int_equal(bkv_find_iter_create(db, NULL, &term, &tlen, 1, &fo, &it), BKV_OK);
    memset(seen, 0, sizeof seen);
    int rc, n = 0;
    while ((rc = bkv_find_iter_next(it)) == BKV_OK) {
        size_t kl, vl;
        const void *k = bkv_find_iter_key(it, &kl), *v = bkv_find_iter_value(it, &vl);
        mark_result(seen, k, kl, v, vl);
        n++;
    }
    assert_int_equal(rc, BKV_CORRUPTION);
    assert_int_equal(bkv_find_iter_status(it), BKV_CORRUPTION);
    assert_non_null(strstr(bkv_errmsg(db), "offset"));
    assert_non_null(strstr(bkv_errmsg(db), "skipped"));
    bkv_find_iter_destroy(it);
    assert_true(n >= 7 && n < 10); /* keys 7, 507, ..., 4507: those of the damaged partition are lost */
    for (int i = 7; i < 5000; i += 500) {
        if (i >= 1024) assert_int_equal(seen[i], 1);
        else assert_true(seen[i] <= 1);
    }
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* Random puts and deletes (values "a=x;b=y") into db and the model. */
static void write_random(bkv_db *db, state *m, uint64_t *rng, int steps) {
    for (int step = 0; step < steps; step++) {
        int k = (int)(bkv_splitmix64(rng) % NKEYS);
        char key[16];
        snprintf(key, sizeof key, "k%05d", k);
        free(m->val[k]);
        m->val[k] = NULL;
        if (bkv_splitmix64(rng) % 5 == 0) {
            assert_int_equal(bkv_delete(db, NULL, key, strlen(key)), BKV_OK);
        } else {
            m->val[k] = make_value(rng, 1);
            assert_int_equal(bkv_put(db, NULL, key, strlen(key), m->val[k], strlen(m->val[k])), BKV_OK);
        }
    }
}

/* Searches for terms (a=x, b=y) or whole values (some present, one not). */
static void check_lifecycle(bkv_db *db, const state *m, int terms, uint64_t *rng, const char *ctx) {
    for (int q = 0; q < 8; q++) {
        char term[32];
        if (terms) {
            random_term(rng, 1, term, sizeof term);
        } else {
            const char *v = m->val[bkv_splitmix64(rng) % NKEYS];
            snprintf(term, sizeof term, "%s", v && q ? v : "a=99;b=99");
        }
        check_search(db, NULL, m, term, terms, ctx);
    }
}

static void lifecycle_options(bkv_options *o, int shape, int terms) {
    options_for(&(config){"", shape, BKV_COMPACTION_LEVELED, terms, 1024, 16, 4}, o);
    if (terms) o->value_terms_name = "split/1";
}

/* An existing database gets a value index: searchable at once (tables
 * that predate it are read whole), then built by rewriting them, also
 * after a kill -9 in the middle; dropped; made again with an extractor
 * whose terms the old filters do not hold, which must not trust them. */
static void test_value_index_lifecycle(void **s) {
    (void)s;
    char path[300];
    snprintf(path, sizeof path, "%s/lifecycle", dir);
    static state model;
    memset(&model, 0, sizeof model);
    uint64_t rng = 0x11fe;
    bkv_options o;
    lifecycle_options(&o, BKV_VALUE_INDEX_NONE, 0);
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    write_random(db, &model, &rng, 6000);
    assert_int_equal(bkv_compact(db), BKV_OK);
    write_random(db, &model, &rng, 400); /* level 0 and the memtable */
    assert_int_equal(bkv_find_value(db, NULL, "x", 1, count_result, &(int){0}, NULL), BKV_INVALID);
    assert_int_equal(bkv_close(db), BKV_OK);

    lifecycle_options(&o, BKV_VALUE_INDEX_BITSLICED, 0);
    /* No compaction of its own meanwhile: the build rewrites every table. */
    o.level0_compaction_trigger = o.level0_slowdown_trigger = o.level0_stop_trigger = 1000;
    o.max_bytes_for_level_base = 1u << 30;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_true(test_counter(db, "value-filters-unusable") > 3);
    check_lifecycle(db, &model, 0, &rng, "before the build");
    uint64_t rewritten;
    assert_int_equal(bkv_value_index_build(db, &rewritten), BKV_OK);
    assert_true(rewritten > 3); /* one per table of levels 1+, one for level 0 */
    check_lifecycle(db, &model, 0, &rng, "after the build");
    write_random(db, &model, &rng, 300);
    check_lifecycle(db, &model, 0, &rng, "after more writes");
    assert_int_equal(bkv_value_index_build(db, &rewritten), BKV_OK);
    assert_int_equal(rewritten, 0);
    assert_int_equal(bkv_close(db), BKV_OK);
    bkv_options plain;
    bkv_options_init(&plain);
    assert_int_equal(bkv_open(path, &plain, &db), BKV_OK); /* recorded */
    assert_int_equal(test_counter(db, "value-filters-unusable"), 0);
    check_lifecycle(db, &model, 0, &rng, "reopened");
    assert_int_equal(bkv_close(db), BKV_OK);

    plain.value_index_drop = 1;
    assert_int_equal(bkv_open(path, &plain, &db), BKV_OK);
    assert_int_equal(bkv_find_value(db, NULL, "x", 1, count_result, &(int){0}, NULL), BKV_INVALID);
    write_random(db, &model, &rng, 300);
    assert_int_equal(bkv_close(db), BKV_OK);
    plain.value_index_drop = 0;
    assert_int_equal(bkv_open(path, &plain, &db), BKV_OK);
    char *vi = bkv_property(db, "bloomkv.value-index");
    assert_string_equal(vi, "");
    bkv_free(vi);
    assert_int_equal(bkv_value_index_build(db, NULL), BKV_INVALID);
    assert_int_equal(bkv_close(db), BKV_OK);

    /* Again, finding terms now: the whole-value filters of the older tables
     * would answer "no" for every term. A kill -9 stops the first build. */
    lifecycle_options(&o, BKV_VALUE_INDEX_FLAT, 1);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        if (bkv_open(path, &o, &db) != BKV_OK) _exit(2);
        uint32_t ack = 1;
        if (write(fds[1], &ack, sizeof ack) != sizeof ack) _exit(3);
        bkv_value_index_build(db, NULL);
        pause(); /* killed, built or not */
        _exit(0);
    }
    close(fds[1]);
    uint32_t ack;
    assert_int_equal(read(fds[0], &ack, sizeof ack), sizeof ack);
    usleep(20000);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    close(fds[0]);
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    check_lifecycle(db, &model, 1, &rng, "terms, after a killed build");
    assert_int_equal(bkv_value_index_build(db, NULL), BKV_OK);
    check_lifecycle(db, &model, 1, &rng, "terms, built");
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(test_counter(db, "value-filters-unusable"), 0);
    check_lifecycle(db, &model, 1, &rng, "terms, reopened");
    assert_int_equal(bkv_close(db), BKV_OK);
    state_free(&model);
}

/* The filter type of a paged table's summary. */
static int summary_type(const char *tpath, uint64_t number) {
    bkv_table *t;
    bkv_filter *summary;
    bkv_filter_info fi;
    assert_int_equal(bkv_table_open(bkv_env_posix(), tpath, number, NULL, NULL, &t, NULL), BKV_OK);
    assert_int_equal(bkv_vs_summary(t, &summary, NULL), BKV_OK);
    bkv_filter_get_info(summary, &fi);
    bkv_filter_destroy(summary);
    bkv_table_close(t);
    return fi.type;
}

/* Tables a compaction writes to the bottom level get a Ribbon summary;
 * every other table (flushes, upper levels) a cheaper blocked Bloom one. */
static void test_paged_summary_by_level(void **s) {
    (void)s;
    char path[300], tpath[400];
    bkv_options o;
    one_table_db("paged-levels", BKV_VALUE_INDEX_PAGED, 500, path, tpath, &o);
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int i = 0; i < 5000; i += 3) { /* the same rows again: the compaction rewrites the table */
        char k[16], v[32];
        snprintf(k, sizeof k, "k%06d", i);
        snprintf(v, sizeof v, "v%d", i % 500);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
    }
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(summary_type(tpath, newest_table(path, tpath)), BKV_FILTER_RIBBON);
    expect_v7_holders(path, &o, "after the compaction");
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_OK);
}

/* A flushed table (a cheap summary) that would move whole into an empty
 * bottom level is rewritten there instead, with the bottom's summary. */
static void test_paged_move_to_bottom(void **s) {
    (void)s;
    char path[300], tpath[400];
    bkv_options o;
    uint64_t flushed = one_table_db("paged-move", BKV_VALUE_INDEX_PAGED, 500, path, tpath, &o);
    assert_int_equal(summary_type(tpath, flushed), BKV_FILTER_BLOCKED_BLOOM);
    /* A second table of other keys makes level 0 due; its oldest table
     * overlaps no other and goes down alone: a move. */
    o.level0_compaction_trigger = 2;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "z", 1, "v7", 2), BKV_OK);
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(bkv_compact(db), BKV_OK);
    assert_int_equal(test_counter(db, "summary-rewrites"), 1);
    assert_int_equal(test_counter(db, "trivial-moves"), 0);
    assert_int_equal(bkv_close(db), BKV_OK);
    uint64_t number = newest_table(path, tpath);
    assert_true(number > flushed + 1); /* after the second flush's */
    assert_int_equal(summary_type(tpath, number), BKV_FILTER_RIBBON);
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    int n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "v7", 2, count_result, &n, NULL), BKV_OK);
    assert_int_equal(n, 11); /* k000007, ..., k004507 and z */
    assert_int_equal(bkv_close(db), BKV_OK);

    /* Without a value index the same tables are moved. */
    snprintf(path, sizeof path, "%s/plain-move", dir);
    bkv_options_init(&o);
    o.level0_compaction_trigger = 2;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "a", 1, "v", 1), BKV_OK);
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "z", 1, "v", 1), BKV_OK);
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(bkv_compact(db), BKV_OK);
    assert_int_equal(test_counter(db, "trivial-moves"), 1);
    assert_int_equal(test_counter(db, "summary-rewrites"), 0);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* A new paged index puts a term's bits in two words of each filter (two
 * rows a table) and two more of them; the tables record it, and the
 * database keeps it when it changes shape. */
static void test_two_word_probes(void **s) {
    (void)s;
    char path[300], tpath[400];
    bkv_options o;
    uint64_t number = one_table_db("two-words", BKV_VALUE_INDEX_PAGED, 500, path, tpath, &o);
    bkv_table *t;
    assert_int_equal(bkv_table_open(bkv_env_posix(), tpath, number, NULL, NULL, &t, NULL), BKV_OK);
    bkv_handle vh;
    assert_true(bkv_vs_filter_handle(t, &vh));
    uint64_t off = vh.offset;
    bkv_table_close(t);
    FILE *f = fopen(tpath, "rb");
    uint8_t head[8];
    assert_int_equal(fseek(f, (long)off, SEEK_SET), 0);
    assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
    fclose(f);
    assert_int_equal(head[4], BKV_VF_VERSION_PAGED);
    assert_int_equal(head[6], 8);                /* k */
    assert_int_equal(head[7], BKV_VF_TWO_WORDS); /* probe words */
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    char *vi = bkv_property(db, "bloomkv.value-index");
    assert_non_null(strstr(vi, "m=4096 k=8 in two words P=128"));
    bkv_free(vi);
    assert_int_equal(bkv_close(db), BKV_OK);
    expect_v7_holders(path, &o, "two words, paged");
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    o.value_index_reshape = 1;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    vi = bkv_property(db, "bloomkv.value-index");
    assert_non_null(strstr(vi, "bitsliced, m=4096 k=8 in two words P=128"));
    bkv_free(vi);
    assert_int_equal(test_counter(db, "value-filters-unusable"), 0);
    int n = 0;
    bkv_find_stats st;
    assert_int_equal(bkv_find_value(db, NULL, "v7", 2, count_result, &n, &st), BKV_OK);
    assert_int_equal(n, 10);
    assert_true(st.partitions_scanned <= 12); /* the ten holders' partitions (of 40), no scan of the table */
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_OK);
}

/* A database moves between the paged layout and the in-memory shapes at
 * an open: version 1 tables are read whole by the paged index until
 * bkv_value_index_build rewrites them, version 2 tables feed an in-memory
 * index through their rows. */
static void test_paged_reshape(void **s) {
    (void)s;
    char path[300];
    snprintf(path, sizeof path, "%s/reshape-paged", dir);
    static state model;
    memset(&model, 0, sizeof model);
    uint64_t rng = 0x9a6ed;
    bkv_options o;
    lifecycle_options(&o, BKV_VALUE_INDEX_BITSLICED, 0);
    o.level0_compaction_trigger = o.level0_slowdown_trigger = o.level0_stop_trigger = 1000;
    o.max_bytes_for_level_base = 1u << 30;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    write_random(db, &model, &rng, 3000);
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);

    o.value_index = BKV_VALUE_INDEX_PAGED;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID); /* a shape change is asked for */
    o.value_index_reshape = 1;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    uint64_t old_tables = test_counter(db, "value-filters-unusable");
    assert_true(old_tables > 3);
    check_lifecycle(db, &model, 0, &rng, "paged over version 1 tables");
    write_random(db, &model, &rng, 600); /* new tables are version 2 */
    assert_int_equal(bkv_flush(db), BKV_OK);
    check_lifecycle(db, &model, 0, &rng, "paged, both versions");
    uint64_t rewritten;
    assert_int_equal(bkv_value_index_build(db, &rewritten), BKV_OK);
    assert_true(rewritten > 0);
    check_lifecycle(db, &model, 0, &rng, "paged, built");
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(test_counter(db, "value-filters-unusable"), 0);
    check_lifecycle(db, &model, 0, &rng, "paged, reopened");
    assert_int_equal(bkv_close(db), BKV_OK);
    assert_int_equal(bkv_check(path, NULL, NULL), BKV_OK);

    o.value_index = BKV_VALUE_INDEX_HIERARCHY;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(test_counter(db, "value-filters-unusable"), 0); /* their rows read */
    check_lifecycle(db, &model, 0, &rng, "hierarchy over version 2 tables");
    assert_int_equal(bkv_close(db), BKV_OK);
    state_free(&model);
}

static void test_parameters_fixed(void **s) {
    (void)s;
    char path[300];
    snprintf(path, sizeof path, "%s/params", dir);
    bkv_options o;
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_HIERARCHY;
    o.value_filter_bits = 4096;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "a", 1, "x", 1), BKV_OK);
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
    o.value_filter_bits = 8192;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    o.value_filter_bits = 4096;
    o.value_terms = split_terms;
    o.value_terms_name = "split";
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    /* Shape (when asked) and order may change; NONE keeps what the database has. */
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    o.value_index_reshape = 1;
    o.value_filter_bits = 4096;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
    bkv_options_init(&o);
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    int n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "x", 1, count_result, &n, NULL), BKV_OK);
    assert_int_equal(n, 1);
    char *vi = bkv_property(db, "bloomkv.value-index");
    assert_non_null(strstr(vi, "bitsliced"));
    assert_non_null(strstr(vi, "m=4096"));
    bkv_free(vi);
    assert_int_equal(bkv_close(db), BKV_OK);
    /* An index made under the old defaults (m = 16384, P = 512) opens with
     * today's (m automatic, P = 128) and keeps its own; P or m given and
     * different is refused. */
    snprintf(path, sizeof path, "%s/olddefaults", dir);
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    o.value_filter_bits = 16384;
    o.value_partition_entries = 512;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "a", 1, "x", 1), BKV_OK);
    assert_int_equal(bkv_close(db), BKV_OK);
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    assert_int_equal(o.value_filter_bits, 0);
    assert_int_equal(o.value_partition_entries, BKV_DEFAULT_VALUE_PARTITION);
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    vi = bkv_property(db, "bloomkv.value-index");
    assert_non_null(strstr(vi, "m=16384 k=6 P=512"));
    bkv_free(vi);
    n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "x", 1, count_result, &n, NULL), BKV_OK);
    assert_int_equal(n, 1);
    assert_int_equal(bkv_close(db), BKV_OK);
    o.value_partition_entries = 256;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    o.value_partition_entries = BKV_DEFAULT_VALUE_PARTITION;
    o.value_filter_bits = 4096;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    /* A new index at the defaults: 32 bits per value. */
    snprintf(path, sizeof path, "%s/newdefaults", dir);
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    vi = bkv_property(db, "bloomkv.value-index");
    assert_non_null(strstr(vi, "m=4096 k=6 P=128"));
    bkv_free(vi);
    assert_int_equal(bkv_close(db), BKV_OK);
    /* A huge P does not make the automatic m huge. */
    snprintf(path, sizeof path, "%s/hugep", dir);
    o.value_partition_entries = UINT32_C(1) << 30;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    vi = bkv_property(db, "bloomkv.value-index");
    assert_non_null(strstr(vi, "m=2097152 "));
    bkv_free(vi);
    assert_int_equal(bkv_close(db), BKV_OK);
    /* Without an index, a search is refused. */
    snprintf(path, sizeof path, "%s/noindex", dir);
    assert_int_equal(bkv_open(path, NULL, &db), BKV_OK);
    assert_int_equal(bkv_find_value(db, NULL, "x", 1, count_result, &n, NULL), BKV_INVALID);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static int stop_after_two(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)key, (void)klen, (void)val, (void)vlen;
    return ++*(int *)arg == 2;
}

static void test_find_values_arguments(void **s) {
    (void)s;
    char path[300];
    snprintf(path, sizeof path, "%s/args", dir);
    bkv_options o;
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    const void *terms[65];
    size_t lens[65];
    for (int i = 0; i < 65; i++) terms[i] = "x", lens[i] = 1;
    found f = {.n = 0};
    assert_int_equal(bkv_find_values(db, NULL, terms, lens, 0, BKV_FIND_ALL, on_result, &f, NULL), BKV_INVALID);
    assert_int_equal(bkv_find_values(db, NULL, terms, lens, 65, BKV_FIND_ANY, on_result, &f, NULL), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(db), "1 to 64 terms"));
    assert_int_equal(bkv_find_values(db, NULL, terms, lens, 2, 7, on_result, &f, NULL), BKV_INVALID);
    assert_int_equal(bkv_find_values(db, NULL, terms, lens, 64, BKV_FIND_ANY, on_result, &f, NULL), BKV_OK);
    const void *null_term[1] = {NULL};
    assert_int_equal(bkv_find_values(db, NULL, null_term, lens, 1, BKV_FIND_ANY, on_result, &f, NULL), BKV_INVALID);
    bkv_find_iter *it = (bkv_find_iter *)&f;
    bkv_find_options fo;
    bkv_find_options_init(&fo);
    fo.after_len = 3; /* with no bytes */
    assert_int_equal(bkv_find_iter_create(db, NULL, terms, lens, 1, &fo, &it), BKV_INVALID);
    assert_null(it);
    fo.after_len = 0;
    fo.mode = 9;
    assert_int_equal(bkv_find_iter_create(db, NULL, terms, lens, 1, &fo, &it), BKV_INVALID);
    fo.mode = BKV_FIND_ANY;
    assert_int_equal(bkv_find_iter_create(db, NULL, terms, lens, 1, &fo, &it), BKV_OK);
    assert_int_equal(bkv_find_iter_next(it), BKV_NOTFOUND);
    bkv_find_iter_destroy(it);
    assert_int_equal(bkv_find_iter_next(NULL), BKV_INVALID);
    bkv_find_iter_destroy(NULL);
    assert_int_equal(f.n, 0);
    assert_int_equal(bkv_close(db), BKV_OK);
}

static void test_early_stop(void **s) {
    (void)s;
    char path[300];
    snprintf(path, sizeof path, "%s/stop", dir);
    bkv_options o;
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_FLAT;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int i = 0; i < 10; i++) {
        char k[8];
        snprintf(k, sizeof k, "k%d", i);
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), "same", 4), BKV_OK);
    }
    int n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "same", 4, stop_after_two, &n, NULL), BKV_OK);
    assert_int_equal(n, 2);
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* A search streams at the read state it was made at: partitions read
 * after create, and candidates validated then, answer as of create, even
 * when the keys are rewritten, flushed and compacted meanwhile. Both
 * plans, over several tables and the memtable. */
static void test_search_outlives_changes(void **s) {
    (void)s;
    for (unsigned plan = BKV_FIND_PLAN_INDEX; plan <= BKV_FIND_PLAN_SCAN; plan++) {
        char path[300];
        snprintf(path, sizeof path, "%s/outlives%u", dir, plan);
        bkv_options o;
        bkv_options_init(&o);
        o.value_index = BKV_VALUE_INDEX_BITSLICED;
        o.value_partition_entries = 64;
        o.write_buffer_size = 64 << 10;
        bkv_db *db;
        assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        for (int i = 0; i < 4000; i++) {
            char k[16];
            snprintf(k, sizeof k, "k%05d", i);
            const char *v = i % 4 == 0 ? "wanted" : "other";
            assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
            if (i == 3000) assert_int_equal(bkv_flush(db), BKV_OK); /* the last thousand stay in the memtable */
        }
        bkv_find_options fo;
        bkv_find_options_init(&fo);
        fo.plan = plan;
        const void *term[1] = {"wanted"};
        size_t len = 6;
        bkv_find_iter *it;
        assert_int_equal(bkv_find_iter_create(db, NULL, term, &len, 1, &fo, &it), BKV_OK);
        int got = 0;
        for (; got < 100; got++) assert_int_equal(bkv_find_iter_next(it), BKV_OK);
        /* Every wanted key is rewritten or deleted, new ones appear among them. */
        for (int i = 0; i < 4000; i++) {
            char k[16];
            snprintf(k, sizeof k, "k%05d", i);
            if (i % 4 == 0 && i % 8) assert_int_equal(bkv_delete(db, NULL, k, strlen(k)), BKV_OK);
            else if (i % 4 == 0) assert_int_equal(bkv_put(db, NULL, k, strlen(k), "gone", 4), BKV_OK);
            else if (i % 4 == 1) assert_int_equal(bkv_put(db, NULL, k, strlen(k), "wanted", 6), BKV_OK);
        }
        assert_int_equal(bkv_compact(db), BKV_OK);
        int rc;
        char last[16] = "";
        while ((rc = bkv_find_iter_next(it)) == BKV_OK) {
            size_t kl, vl;
            const char *k = bkv_find_iter_key(it, &kl);
            const char *v = bkv_find_iter_value(it, &vl);
            char want[16];
            snprintf(want, sizeof want, "k%05d", 4 * got);
            if (kl != strlen(want) || memcmp(k, want, kl) != 0 || vl != 6 || memcmp(v, "wanted", 6) != 0)
                fail_msg("plan %u: result %d is %.*s, expected %s", plan, got, (int)kl, k, want);
            memcpy(last, k, kl);
            last[kl] = 0;
            got++;
        }
        assert_int_equal(rc, BKV_NOTFOUND);
        assert_int_equal(got, 1000);
        assert_string_equal(last, "k03996");
        bkv_find_iter_destroy(it);
        /* A new search sees the new state. */
        int n = 0;
        assert_int_equal(bkv_find_value(db, NULL, "wanted", 6, count_result, &n, NULL), BKV_OK);
        assert_int_equal(n, 1000);
        assert_int_equal(bkv_close(db), BKV_OK);
    }
}

/* The plan follows selectivity: a value every key holds is found by one
 * pass over the data, a unique one through the index; both exactly. */
static void test_plan_follows_selectivity(void **s) {
    (void)s;
    char path[300];
    snprintf(path, sizeof path, "%s/plan", dir);
    bkv_options o;
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    o.write_buffer_size = 64 << 10;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    for (int i = 0; i < 20000; i++) {
        char k[16], v[32];
        snprintf(k, sizeof k, "k%06d", i);
        snprintf(v, sizeof v, "%s", i == 12345 ? "unique" : i % 2 ? "common" : "half");
        assert_int_equal(bkv_put(db, NULL, k, strlen(k), v, strlen(v)), BKV_OK);
    }
    assert_int_equal(bkv_compact(db), BKV_OK);
    bkv_find_stats st;
    int n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "common", 6, count_result, &n, &st), BKV_OK);
    assert_int_equal(n, 10000 - 1); /* the odd keys but the unique one */
    assert_int_equal(st.plan_scan, 1);
    assert_int_equal(st.candidates, 0);
    /* The scan plan pages too: 3000 at a time from where the last stopped. */
    bkv_find_options fo;
    bkv_find_options_init(&fo);
    fo.limit = 3000;
    fo.keys_only = 1;
    const void *common[1] = {"common"};
    size_t common_len = 6;
    char last[16] = "";
    int total = 0, pages = 0;
    uint64_t prev_scan_cost = UINT64_MAX;
    for (;; pages++) {
        bkv_find_iter *it;
        assert_int_equal(bkv_find_iter_create(db, NULL, common, &common_len, 1, &fo, &it), BKV_OK);
        int in_page = 0;
        while (bkv_find_iter_next(it) == BKV_OK) {
            size_t kl;
            const char *k = bkv_find_iter_key(it, &kl);
            if (total) assert_true(strncmp(k, last, kl) > 0);
            memcpy(last, k, kl);
            last[kl] = 0;
            in_page++, total++;
        }
        bkv_find_stats ist;
        bkv_find_iter_stats(it, &ist);
        /* A page resumed further on leaves the scan less to read, and
         * the plan follows the costs it reports. */
        assert_true(ist.scan_cost < prev_scan_cost);
        assert_int_equal(ist.plan_scan, ist.index_cost > ist.scan_cost);
        if (pages == 0) assert_int_equal(ist.plan_scan, 1);
        prev_scan_cost = ist.scan_cost;
        bkv_find_iter_destroy(it);
        if (in_page < 3000) break;
        fo.after = last;
        fo.after_len = strlen(last);
    }
    assert_int_equal(total, 10000 - 1);
    assert_int_equal(pages, 3);
    n = 0;
    assert_int_equal(bkv_find_value(db, NULL, "unique", 6, count_result, &n, &st), BKV_OK);
    assert_int_equal(n, 1);
    assert_int_equal(st.plan_scan, 0);
    assert_true(st.index_cost < st.scan_cost / 2);
    assert_true(st.partitions_scanned >= 1 && st.entries_scanned < 20000 / 2);
    assert_int_equal(bkv_close(db), BKV_OK);
}


static int collect_keys(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)val, (void)vlen;
    char *out = arg;
    strncat(out, key, klen);
    strcat(out, " ");
    return 0;
}

static const char *find_keys(bkv_db *db, const char *term) {
    static char out[256];
    out[0] = 0;
    assert_int_equal(bkv_find_value(db, NULL, term, strlen(term), collect_keys, out, NULL), BKV_OK);
    return out;
}

/* "key=value " for each result of the index plan (forced: these
 * databases are small enough for a scan to be cheaper). */
static const char *find_pairs(bkv_db *db, const bkv_snapshot *snap, const char *term) {
    static char out[256];
    out[0] = 0;
    bkv_read_options ro;
    bkv_read_options_init(&ro);
    ro.snapshot = snap;
    bkv_find_options fo;
    bkv_find_options_init(&fo);
    fo.plan = BKV_FIND_PLAN_INDEX;
    size_t tlen = strlen(term);
    bkv_find_iter *it;
    assert_int_equal(bkv_find_iter_create(db, &ro, (const void *const *)&term, &tlen, 1, &fo, &it), BKV_OK);
    while (bkv_find_iter_next(it) == BKV_OK) {
        size_t kl, vl;
        const char *k = bkv_find_iter_key(it, &kl), *v = bkv_find_iter_value(it, &vl);
        strncat(out, k, kl);
        strcat(out, "=");
        strncat(out, v, vl);
        strcat(out, " ");
    }
    assert_int_equal(bkv_find_iter_status(it), BKV_OK);
    bkv_find_iter_destroy(it);
    return out;
}

/* A result is taken from the partition that named it when its table
 * holds one version of each key and no newer source holds the key; else
 * it is read again. Snapshots keep a key's versions, which then fill
 * several partitions of one table: each snapshot must get the version it
 * sees, and a newer table or memtable must hide an older match. */
static void test_versions_across_partitions(void **s) {
    (void)s;
    char path[300];
    snprintf(path, sizeof path, "%s/versions", dir);
    bkv_options o;
    bkv_options_init(&o);
    o.block_size = 64;
    o.value_index = BKV_VALUE_INDEX_BITSLICED;
    o.value_filter_bits = 256;
    o.value_partition_entries = 4;
    bkv_db *db;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "k0", 2, "x", 1), BKV_OK);
    assert_int_equal(bkv_put(db, NULL, "k2", 2, "x", 1), BKV_OK);
    enum { NV = 12 };
    const bkv_snapshot *snaps[NV];
    for (int i = 0; i < NV; i++) {
        if (i % 3 == 2) assert_int_equal(bkv_delete(db, NULL, "k1", 2), BKV_OK);
        else assert_int_equal(bkv_put(db, NULL, "k1", 2, i % 3 ? "y" : "x", 1), BKV_OK);
        snaps[i] = bkv_snapshot_create(db);
    }
    assert_int_equal(bkv_compact(db), BKV_OK);
    /* A table holding several versions of a key has every result read again. */
    uint64_t proven = test_counter(db, "value-candidates-proven");
    for (int i = 0; i < NV; i++)
        assert_string_equal(find_pairs(db, snaps[i], "x"), i % 3 == 0 ? "k0=x k1=x k2=x " : "k0=x k2=x ");
    assert_int_equal(test_counter(db, "value-candidates-proven"), proven);
    for (int i = 0; i < NV; i++) bkv_snapshot_release(db, snaps[i]);
    assert_int_equal(bkv_compact_range(db, NULL, 0, NULL, 0), BKV_OK);
    assert_string_equal(find_pairs(db, NULL, "x"), "k0=x k2=x ");
    assert_int_equal(test_counter(db, "value-candidates-proven"), proven + 2);
    /* A newer table, then a memtable, over the match. */
    assert_int_equal(bkv_put(db, NULL, "k1", 2, "x", 1), BKV_OK);
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_string_equal(find_pairs(db, NULL, "x"), "k0=x k1=x k2=x ");
    assert_int_equal(test_counter(db, "value-candidates-proven"), proven + 5);
    assert_int_equal(bkv_put(db, NULL, "k1", 2, "y", 1), BKV_OK);
    assert_string_equal(find_pairs(db, NULL, "x"), "k0=x k2=x ");
    assert_int_equal(bkv_flush(db), BKV_OK);
    assert_string_equal(find_pairs(db, NULL, "x"), "k0=x k2=x ");
    assert_string_equal(find_pairs(db, NULL, "y"), "k1=y ");
    assert_int_equal(bkv_compact(db), BKV_OK);
    assert_string_equal(find_pairs(db, NULL, "x"), "k0=x k2=x ");
    assert_int_equal(bkv_close(db), BKV_OK);
}

/* Built-in extractors are recorded: a later open needs no terms options
 * (as the bloomkv tool's), another extractor or version is refused naming
 * both, and each finds what it promises. Changing the shape is explicit. */
/* json:PATH: the field of a JSON object value, strictly parsed by json-c;
 * strings by their bytes, numbers and booleans as written, arrays by their
 * scalars; values that are not one whole JSON object give no terms. */
static void test_json_extractor(void **s) {
    (void)s;
    static const char *const vals[] = {
        "{\"user\":\"ann\",\"age\":31,\"tags\":[\"x\",\"y\",{\"z\":1}],\"addr\":{\"city\":\"Oslo\"}}",
        "{\"user\":\"bob\",\"age\":31.50,\"addr\":{\"city\":\"Rome\"},\"ok\":true}",
        "user ann",
        "{\"user\":\"ann\"}\n",
        "[\"ann\"]",
        "{\"user\":\"ann\",}",
        "{\"user\":{\"name\":\"ann\"}}",
        "{\"user\":\"ann\"} x",
        "{\"user\":\"\\u00e9ve\"}",
    };
    static const struct {
        const char *spec, *term, *want;
    } cases[] = {
        {"json:user", "ann", "a d "},   {"json:user", "bob", "b "},      {"json:user", "\xc3\xa9ve", "i "},
        {"json:age", "31", "a "},       {"json:age", "31.50", "b "},     {"json:tags", "y", "a "},
        {"json:addr.city", "Rome", "b "}, {"json:ok", "true", "b "},     {"json:user.name", "ann", "g "},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[300];
        snprintf(path, sizeof path, "%s/json%zu", dir, c);
        bkv_options o;
        bkv_options_init(&o);
        o.value_index = BKV_VALUE_INDEX_BITSLICED;
        o.value_terms_name = cases[c].spec;
        bkv_db *db;
        assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
            char k[2] = {(char)('a' + i), 0};
            assert_int_equal(bkv_put(db, NULL, k, 1, vals[i], strlen(vals[i])), BKV_OK);
        }
        assert_string_equal(find_keys(db, cases[c].term), cases[c].want);
        assert_int_equal(bkv_flush(db), BKV_OK);
        assert_string_equal(find_keys(db, cases[c].term), cases[c].want);
        assert_int_equal(bkv_close(db), BKV_OK);
        bkv_options plain;
        bkv_options_init(&plain);
        assert_int_equal(bkv_open(path, &plain, &db), BKV_OK);
        assert_string_equal(find_keys(db, cases[c].term), cases[c].want);
        char *vi = bkv_property(db, "bloomkv.value-index");
        char recorded[64];
        snprintf(recorded, sizeof recorded, "%s/1", cases[c].spec);
        assert_non_null(strstr(vi, recorded));
        bkv_free(vi);
        assert_int_equal(bkv_close(db), BKV_OK);
    }
    static const char *const malformed[] = {"json:", "json:a..b", "json:.a", "json:a."};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        bkv_options m;
        bkv_options_init(&m);
        m.value_index = BKV_VALUE_INDEX_FLAT;
        m.value_terms_name = malformed[i];
        char path[300];
        snprintf(path, sizeof path, "%s/jsonbad%zu", dir, i);
        bkv_db *db;
        assert_int_equal(bkv_open(path, &m, &db), BKV_INVALID);
    }
}

static void test_builtin_extractors(void **s) {
    (void)s;
    static const struct {
        const char *spec, *recorded, *term, *want;
    } cases[] = {
        {"words", "words/1", "quick", "a b "},
        {"field:,:2", "field:,:2/1", "brown fox", "a "},
        {"field:tab:1", "field:tab:1/1", "lazy", "c "},
        {"prefix:3", "prefix:3/1", "The", "a "},
    };
    const char *vals[] = {"The,brown fox,QUICK", "quick dog", "lazy\tcat"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[300];
        snprintf(path, sizeof path, "%s/builtin%zu", dir, c);
        bkv_options o;
        bkv_options_init(&o);
        o.value_index = BKV_VALUE_INDEX_BITSLICED;
        o.value_terms_name = cases[c].spec;
        bkv_db *db;
        assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
        for (int i = 0; i < 3; i++) {
            char k[2] = {(char)('a' + i), 0};
            assert_int_equal(bkv_put(db, NULL, k, 1, vals[i], strlen(vals[i])), BKV_OK);
        }
        assert_string_equal(find_keys(db, cases[c].term), cases[c].want);
        assert_int_equal(bkv_close(db), BKV_OK);
        bkv_options plain;
        bkv_options_init(&plain);
        assert_int_equal(bkv_open(path, &plain, &db), BKV_OK);
        assert_string_equal(find_keys(db, cases[c].term), cases[c].want); /* from the WAL, memtable */
        assert_int_equal(bkv_flush(db), BKV_OK);
        assert_string_equal(find_keys(db, cases[c].term), cases[c].want); /* from a table */
        char *vi = bkv_property(db, "bloomkv.value-index");
        assert_non_null(strstr(vi, cases[c].recorded));
        bkv_free(vi);
        assert_int_equal(bkv_close(db), BKV_OK);
        plain.value_terms_name = c ? "words" : "prefix:3";
        assert_int_equal(bkv_open(path, &plain, &db), BKV_INVALID);
        assert_non_null(strstr(bkv_errmsg(NULL), cases[c].recorded));
    }
    bkv_options o;
    bkv_options_init(&o);
    char path[300];
    snprintf(path, sizeof path, "%s/builtin0", dir);
    bkv_db *db;
    o.value_terms_name = "words/2";
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "version 2"));
    /* A table written outside with the same built-in extractor is found by
     * its terms once ingested, as the database's own tables are. */
    char table[320];
    snprintf(table, sizeof table, "%s/words.sst", dir);
    bkv_options wo;
    bkv_options_init(&wo);
    wo.value_index = BKV_VALUE_INDEX_BITSLICED;
    wo.value_terms_name = "words";
    bkv_table_writer *w;
    assert_int_equal(bkv_table_writer_create(&wo, table, &w), BKV_OK);
    assert_int_equal(bkv_table_writer_put(w, "z", 1, "Very QUICK", 10), BKV_OK);
    assert_int_equal(bkv_table_writer_finish(w), BKV_OK);
    bkv_table_writer_destroy(w);
    bkv_options_init(&o);
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    const char *tables[1] = {table};
    assert_int_equal(bkv_ingest(db, tables, 1, 0), BKV_OK);
    assert_string_equal(find_keys(db, "quick"), "a b z ");
    assert_int_equal(bkv_close(db), BKV_OK);
    wo.value_terms_name = "bogus";
    assert_int_equal(bkv_table_writer_create(&wo, table, &w), BKV_INVALID);
    static const char *const malformed[] = {"field:,:0", "field:ab:1", "prefix:300", "field:,", "bogus"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        bkv_options m;
        bkv_options_init(&m);
        m.value_index = BKV_VALUE_INDEX_FLAT;
        m.value_terms_name = malformed[i];
        snprintf(path, sizeof path, "%s/malformed%zu", dir, i);
        assert_int_equal(bkv_open(path, &m, &db), BKV_INVALID);
    }
    /* The shape: refused, unless asked for. */
    snprintf(path, sizeof path, "%s/builtin0", dir);
    bkv_options_init(&o);
    o.value_index = BKV_VALUE_INDEX_HIERARCHY;
    assert_int_equal(bkv_open(path, &o, &db), BKV_INVALID);
    assert_non_null(strstr(bkv_errmsg(NULL), "bitsliced"));
    o.value_index_reshape = 1;
    assert_int_equal(bkv_open(path, &o, &db), BKV_OK);
    char *vi = bkv_property(db, "bloomkv.value-index");
    assert_non_null(strstr(vi, "hierarchy"));
    bkv_free(vi);
    assert_string_equal(find_keys(db, "quick"), "a b z ");
    assert_int_equal(bkv_close(db), BKV_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_follows_selectivity), cmocka_unit_test(test_search_outlives_changes),
        cmocka_unit_test(test_versions_across_partitions),
        cmocka_unit_test(test_oracle_flat),       cmocka_unit_test(test_oracle_hierarchy),
        cmocka_unit_test(test_oracle_bitsliced),  cmocka_unit_test(test_oracle_terms),
        cmocka_unit_test(test_oracle_builtin),
        cmocka_unit_test(test_oracle_whole_table), cmocka_unit_test(test_memtable_no_scan),
        cmocka_unit_test(test_oracle_paged),       cmocka_unit_test(test_paged_damage),
        cmocka_unit_test(test_paged_reshape),      cmocka_unit_test(test_paged_summary_by_level),
        cmocka_unit_test(test_paged_move_to_bottom), cmocka_unit_test(test_two_word_probes),
        cmocka_unit_test(test_damaged_value_filters), cmocka_unit_test(test_parameters_fixed),
        cmocka_unit_test(test_damaged_partition), cmocka_unit_test(test_value_index_lifecycle),
        cmocka_unit_test(test_value_tags),
        cmocka_unit_test(test_early_stop),        cmocka_unit_test(test_builtin_extractors),
        cmocka_unit_test(test_json_extractor),    cmocka_unit_test(test_find_values_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
