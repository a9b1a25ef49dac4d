/* SSTables: every key found with its newest visible version, absent keys
 * not, all compressions, and damage never turning into a wrong answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/iterator.h"
#include "filter/filter_int.h"
#include "table/format.h"
#include "table/table.h"
#include "util/env_fault.h"
#include "test_dir.h"
#include "util/coding.h"
#include "util/hash.h"
#include "util/ikey.h"

TEST_DIR_FIXTURE("table")

static void make_key(char *k, int i) { snprintf(k, 32, "key%08d", i); }
static void make_val(char *v, int i, int ver) { snprintf(v, 64, "value-%d-v%d-padpadpadpadpadpad", i, ver); }

/* Keys 0, 2, 4, ... (n of them); even keys below 100 have two versions
 * (seq 1 and 2), and keys divisible by 10 are deleted at seq 3. */
static void build_table_opts(const char *path, int n, const bkv_table_options *opts) {
    bkv_wfile *f;
    assert_int_equal(bkv_env_posix()->new_writable(bkv_env_posix(), path, 0644, &f, NULL), BKV_OK);
    bkv_table_options o = *opts;
    bkv_table_builder *b = bkv_table_builder_new(&o, f, path);
    for (int j = 0; j < n; j++) {
        int i = 2 * j;
        char k[40], v[64];
        make_key(k, i);
        size_t kl = strlen(k);
        uint8_t ik[48];
        memcpy(ik, k, kl);
        if (i % 10 == 0) {
            bkv_put_u64(ik + kl, bkv_pack_trailer(3, BKV_TYPE_DELETION));
            assert_int_equal(bkv_table_builder_add(b, ik, kl + 8, NULL, 0, NULL), BKV_OK);
        }
        if (i < 100) {
            make_val(v, i, 2);
            bkv_put_u64(ik + kl, bkv_pack_trailer(2, BKV_TYPE_VALUE));
            assert_int_equal(bkv_table_builder_add(b, ik, kl + 8, (uint8_t *)v, strlen(v), NULL), BKV_OK);
        }
        make_val(v, i, 1);
        bkv_put_u64(ik + kl, bkv_pack_trailer(1, BKV_TYPE_VALUE));
        assert_int_equal(bkv_table_builder_add(b, ik, kl + 8, (uint8_t *)v, strlen(v), NULL), BKV_OK);
    }
    bkv_err e;
    if (bkv_table_builder_finish(b, &e) != BKV_OK) fail_msg("%s", e.msg);
    bkv_table_builder_free(b);
    assert_int_equal(bkv_file_sync(f, NULL), BKV_OK);
    assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
}

static void build_table(const char *path, int n, int compression, int filter_type) {
    bkv_table_options o = {.block_size = 1024, .restart_interval = 16, .filter_type = filter_type,
                           .bits_per_key = 10, .compression = compression};
    build_table_opts(path, n, &o);
}

static void check_table(bkv_table *t, int n, bkv_table_stats *st) {
    for (int i = 0; i < 2 * n + 10; i++) {
        char k[40], expect[64];
        make_key(k, i);
        int found;
        unsigned type;
        void *v;
        size_t vlen;
        bkv_err e;
        assert_int_equal(bkv_table_get(t, k, strlen(k), 100, BKV_READ_FILL_CACHE, &found, &type, &v, &vlen, NULL, st, &e), BKV_OK);
        int present = i % 2 == 0 && i < 2 * n;
        assert_int_equal(found, present);
        if (!present) continue;
        if (i % 10 == 0) {
            assert_int_equal(type, BKV_TYPE_DELETION);
        } else {
            assert_int_equal(type, BKV_TYPE_VALUE);
            make_val(expect, i, i < 100 ? 2 : 1);
            assert_int_equal(vlen, strlen(expect));
            assert_memory_equal(v, expect, vlen);
            free(v);
        }
        /* Older snapshot sees version 1. */
        if (i < 100 && i % 10 != 0) {
            assert_int_equal(bkv_table_get(t, k, strlen(k), 1, BKV_READ_FILL_CACHE, &found, &type, &v, &vlen, NULL, st, &e), BKV_OK);
            assert_int_equal(found, 1);
            make_val(expect, i, 1);
            assert_memory_equal(v, expect, vlen);
            free(v);
        }
    }
}

static void point_reads_all_compressions(void **state) {
    (void)state;
    const int comps[] = {BKV_COMPRESS_NONE, BKV_COMPRESS_LZ4, BKV_COMPRESS_ZSTD};
    for (int c = 0; c < 3; c++) {
        char path[300];
        snprintf(path, sizeof path, "%s/%06d.sst", dir, c + 1);
        build_table(path, 5000, comps[c], BKV_FILTER_BLOCKED_BLOOM);
        bkv_cache *cache = bkv_cache_new(1 << 20);
        bkv_table_stats st = {0};
        bkv_table *t;
        bkv_err e;
        assert_int_equal(bkv_table_open(bkv_env_posix(), path, (uint64_t)c + 1, cache, &st, &t, &e), BKV_OK);
        const bkv_table_props *p = bkv_table_properties(t);
        assert_true(p->num_entries == 5000 + 50 + 1000);
        assert_true(p->num_deletions == 1000);
        assert_true(p->num_keys == 5000); /* versions of one key count once */
        assert_true(p->num_data_blocks > 10);
        /* Read into a buffer of its own, the filter's payload still starts
         * a cache line, so a probe touches one line. */
        const bkv_filter *f = bkv_table_filter(t);
        assert_non_null(f);
        assert_int_equal((uintptr_t)f->payload & 63, 0);
        assert_non_null(p->smallest);
        assert_int_equal(p->smallest_len, 11 + 8);
        assert_memory_equal(p->smallest, "key00000000", 11);
        assert_memory_equal(p->largest, "key00009998", 11);
        check_table(t, 5000, &st);
        /* Uncompressed blocks are read in place from the mapped file;
         * compressed ones are decompressed once into the block cache. */
        if (comps[c] == BKV_COMPRESS_NONE) assert_true(st.cache_hits == 0 && st.blocks_read > 0);
        else assert_true(st.cache_hits > 0);
        /* The filter knows every key and few others. */
        int fp = 0;
        for (int i = 0; i < 10000; i++) {
            char k[40];
            make_key(k, 2 * i);
            if (i < 5000) assert_int_equal(bkv_table_may_contain(t, bkv_hash_bytes(k, strlen(k))), 1);
            make_key(k, 2 * i + 1);
            fp += bkv_table_may_contain(t, bkv_hash_bytes(k, strlen(k)));
        }
        assert_true(fp < 200);
        /* Full scan in order, forwards and backwards, and seeks. */
        bkv_ikey_iter *it;
        assert_int_equal(bkv_table_iter_new(t, 1, &st, &it), BKV_OK);
        int count = 0;
        size_t plen = 0;
        uint8_t prev[64];
        for (bkv_ikey_iter_first(it); bkv_ikey_iter_valid(it); bkv_ikey_iter_next(it), count++) {
            size_t n;
            const uint8_t *k = bkv_ikey_iter_key(it, &n);
            if (count) assert_true(bkv_ikey_compare(prev, plen, k, n) < 0);
            memcpy(prev, k, n);
            plen = n;
        }
        assert_int_equal(bkv_ikey_iter_status(it, &e), BKV_OK);
        assert_int_equal(count, 6050);
        count = 0;
        for (bkv_ikey_iter_last(it); bkv_ikey_iter_valid(it); bkv_ikey_iter_prev(it), count++) {
            size_t n;
            const uint8_t *k = bkv_ikey_iter_key(it, &n);
            if (count) assert_true(bkv_ikey_compare(k, n, prev, plen) < 0);
            memcpy(prev, k, n);
            plen = n;
        }
        assert_int_equal(count, 6050);
        for (int i = 0; i < 10000; i += 333) {
            char k[40];
            uint8_t ik[48];
            make_key(k, i);
            memcpy(ik, k, strlen(k));
            bkv_put_u64(ik + strlen(k), bkv_pack_trailer(BKV_MAX_SEQ, 0xff));
            bkv_ikey_iter_seek(it, ik, strlen(k) + 8);
            assert_true(bkv_ikey_iter_valid(it));
            size_t n;
            const uint8_t *got = bkv_ikey_iter_key(it, &n);
            char want[40];
            make_key(want, i % 2 ? i + 1 : i);
            assert_memory_equal(got, want, strlen(want));
        }
        bkv_ikey_iter_destroy(it);
        bkv_table_close(t);
        bkv_cache_free(cache);
    }
}

static int cmp_str(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t xl = strlen(x), yl = strlen(y);
    int c = memcmp(x, y, xl < yl ? xl : yl);
    return c ? c : (xl > yl) - (xl < yl);
}

/* Index searches go through eight bytes of each block's last key after
 * the prefix every key shares, comparing whole keys only where those tie:
 * keys of every length around the shared prefix and the eight bytes after
 * it (shorter keys, keys equal in those bytes and differing later, keys
 * holding zero bytes there) must seek exactly where a search of whole
 * keys does, for targets inside, between, before and past them. */
static void index_seeks_match_whole_keys(void **state) {
    (void)state;
    enum { N = 3000 };
    static char keys[N][40];
    const char *sorted[N];
    uint64_t rng = 7;
    int n = 0;
    while (n < N) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        uint64_t r = rng >> 20;
        char *k = keys[n];
        /* The shared prefix "pre/", then 0..12 more bytes from a small alphabet
         * (with NUL-free zero-like '0'), often alike in the first eight. */
        int len = 4 + (int)(r % 13);
        memcpy(k, "pre/", 4);
        for (int j = 4; j < len; j++) k[j] = j < 10 && (r >> 8) % 3 ? 'a' : "0ab~"[(r >> (2 * j)) & 3];
        k[len] = 0;
        int dup = 0;
        for (int j = 0; j < n && !dup; j++) dup = strcmp(keys[j], k) == 0;
        if (!dup) sorted[n] = keys[n], n++;
    }
    qsort(sorted, N, sizeof *sorted, cmp_str);
    char path[300];
    snprintf(path, sizeof path, "%s/fences.sst", dir);
    bkv_wfile *f;
    assert_int_equal(bkv_env_posix()->new_writable(bkv_env_posix(), path, 0644, &f, NULL), BKV_OK);
    bkv_table_options o = {.block_size = 64, .restart_interval = 4, .filter_type = BKV_FILTER_BLOCKED_BLOOM,
                           .bits_per_key = 10};
    bkv_table_builder *b = bkv_table_builder_new(&o, f, path);
    for (int i = 0; i < N; i++) {
        uint8_t ik[48];
        size_t kl = strlen(sorted[i]);
        memcpy(ik, sorted[i], kl);
        bkv_put_u64(ik + kl, bkv_pack_trailer(1, BKV_TYPE_VALUE));
        assert_int_equal(bkv_table_builder_add(b, ik, kl + 8, (const uint8_t *)"v", 1, NULL), BKV_OK);
    }
    assert_int_equal(bkv_table_builder_finish(b, NULL), BKV_OK);
    bkv_table_builder_free(b);
    assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
    bkv_table *t;
    bkv_err e;
    assert_int_equal(bkv_table_open(bkv_env_posix(), path, 1, NULL, NULL, &t, &e), BKV_OK);
    assert_true(bkv_table_properties(t)->num_data_blocks > 500);
    bkv_ikey_iter *it;
    assert_int_equal(bkv_table_iter_new(t, 0, NULL, &it), BKV_OK);
    static const char *const extra[] = {"", "p", "pre", "pre/", "pre.", "pre0", "pre/~~~~~~~~~~~~~~",
                                        "pre/aaaaaa", "pre/aaaaaa0", "pre/aaaaaaaaaaaaaaaaaaaaz", "q"};
    for (int i = 0; i < N + 40 + (int)(sizeof extra / sizeof extra[0]); i++) {
        char target[48];
        if (i < N) { /* each key, and each key with a byte added or its last one dropped */
            snprintf(target, sizeof target, "%s%s", sorted[i], i % 3 == 0 ? "" : i % 3 == 1 ? "0" : "");
            if (i % 3 == 2 && strlen(target) > 0) target[strlen(target) - 1] = 0;
        } else if (i < N + 40) {
            rng = rng * 6364136223846793005u + 1442695040888963407u;
            snprintf(target, sizeof target, "pre/%llx", (unsigned long long)(rng >> 4));
        } else {
            snprintf(target, sizeof target, "%s", extra[i - N - 40]);
        }
        size_t tl = strlen(target);
        uint8_t ik[56];
        memcpy(ik, target, tl);
        bkv_put_u64(ik + tl, bkv_pack_trailer(BKV_MAX_SEQ, 0xff));
        bkv_ikey_iter_seek(it, ik, tl + 8);
        int want = 0;
        while (want < N && cmp_str(&(const char *){sorted[want]}, &(const char *){target}) < 0) want++;
        if (want == N) {
            assert_false(bkv_ikey_iter_valid(it));
            continue;
        }
        assert_true(bkv_ikey_iter_valid(it));
        size_t gl;
        const uint8_t *got = bkv_ikey_iter_key(it, &gl);
        if (gl - 8 != strlen(sorted[want]) || memcmp(got, sorted[want], gl - 8) != 0)
            fail_msg("seek(\"%s\") gave \"%.*s\", expected \"%s\"", target, (int)(gl - 8), got, sorted[want]);
    }
    assert_int_equal(bkv_ikey_iter_status(it, &e), BKV_OK);
    bkv_ikey_iter_destroy(it);
    bkv_table_close(t);
}

/* Where each partition of a version-2 table lies (from its footer and
 * partition index). */
/* An env that is the POSIX one but notes every prefetch it is asked for. */
typedef struct prefetch_log {
    uint64_t off[4096], len[4096];
    size_t n;
} prefetch_log;

static prefetch_log *logged;

static void note_prefetch(bkv_rfile *f, uint64_t off, uint64_t n) {
    (void)f;
    if (logged->n < 4096) logged->off[logged->n] = off, logged->len[logged->n++] = n;
}

/* A reader that goes through the blocks in order asks for what comes next,
 * in growing windows that stay within the data and cover it; a seek with
 * a short read after it asks for nothing ahead. */
static void readers_in_order_prefetch_ahead(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/readahead.sst", dir);
    bkv_table_options o = {.block_size = 1024, .restart_interval = 16, .bits_per_key = 10,
                           .filter_type = BKV_FILTER_BLOCKED_BLOOM};
    build_table_opts(path, 200000, &o);
    static prefetch_log log;
    logged = &log;
    bkv_env env = *bkv_env_posix();
    env.prefetch = note_prefetch;
    bkv_table *t;
    assert_int_equal(bkv_table_open(&env, path, 1, NULL, NULL, &t, NULL), BKV_OK);
    uint64_t data_end = bkv_table_properties(t)->data_bytes;
    assert_true(data_end > (8u << 20)); /* several of the largest windows */

    bkv_ikey_iter *it;
    assert_int_equal(bkv_table_iter_new(t, 0, NULL, &it), BKV_OK);
    log.n = 0;
    size_t entries = 0;
    for (bkv_ikey_iter_first(it); bkv_ikey_iter_valid(it); bkv_ikey_iter_next(it)) entries++;
    assert_int_equal(bkv_ikey_iter_status(it, NULL), BKV_OK);
    assert_true(entries >= 200000);
    assert_true(log.n >= 4 && log.n < 64);
    uint64_t covered = log.off[0], largest = 0;
    assert_true(covered < 4 * 1024); /* from the third block */
    for (size_t i = 0; i < log.n; i++) {
        assert_true(log.off[i] + log.len[i] <= data_end);
        assert_true(log.len[i] <= (2u << 20));
        assert_true(log.off[i] <= covered); /* no gap */
        if (log.off[i] + log.len[i] > covered) covered = log.off[i] + log.len[i];
        if (log.len[i] > largest) largest = log.len[i];
    }
    assert_true(covered == data_end);
    assert_true(largest == (2u << 20)); /* grown to the largest window */

    /* Seeks, each followed by a next or two: nothing is read ahead. */
    log.n = 0;
    for (int i = 0; i < 200; i++) {
        char k[40];
        make_key(k, (int)((uint64_t)i * 7919 % 400000));
        uint8_t ik[48];
        size_t kl = strlen(k);
        memcpy(ik, k, kl);
        bkv_put_u64(ik + kl, bkv_pack_trailer(BKV_MAX_SEQ, 0xff));
        bkv_ikey_iter_seek(it, ik, kl + 8);
        if (bkv_ikey_iter_valid(it)) bkv_ikey_iter_next(it);
    }
    assert_int_equal(log.n, 0);
    bkv_ikey_iter_destroy(it);
    bkv_table_close(t);
    logged = NULL;
}

static uint32_t partition_handles(const uint8_t *data, size_t len, uint64_t (*h)[2], uint32_t max) {
    const uint8_t *footer = data + len - BKV_FOOTER_LEN;
    const uint8_t *ix = data + bkv_get_u64(footer + 16);
    uint32_t n = bkv_get_u32(ix + 8);
    for (uint32_t i = 0; i < n && i < max; i++) {
        h[i][0] = bkv_get_u64(ix + 16 + 16 * (size_t)i);
        h[i][1] = bkv_get_u64(ix + 24 + 16 * (size_t)i);
    }
    return n;
}

/* Flip each byte of a small table in turn (whole filter, then a
 * partitioned one): opening or reading may fail with a corruption naming
 * the file, but never returns a wrong value, and the filter never says
 * "no" to a key the table holds. */
static void damage_never_yields_wrong_values(void **state) {
    (void)state;
    for (int partitioned = 0; partitioned <= 1; partitioned++) {
        char path[300], bad[300];
        snprintf(path, sizeof path, "%s/%06d.sst", dir, 10 + 2 * partitioned);
        snprintf(bad, sizeof bad, "%s/%06d.sst", dir, 11 + 2 * partitioned);
        bkv_table_options o = {.block_size = 1024, .restart_interval = 16, .filter_type = BKV_FILTER_BLOCKED_BLOOM,
                               .bits_per_key = 10, .filter_partition_size = partitioned ? 64 : 0};
        build_table_opts(path, 60, &o);
        uint8_t *data;
        size_t len;
        assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
        /* Bytes no reader looks at: the zeros that align each partition. */
        size_t padding = 0;
        if (partitioned) {
            uint64_t h[8][2];
            uint32_t n = partition_handles(data, len, h, 8);
            assert_true(n >= 2 && n <= 8);
            bkv_table_stats st = {0};
            bkv_table *t;
            assert_int_equal(bkv_table_open(bkv_env_posix(), path, 10, NULL, &st, &t, NULL), BKV_OK);
            uint64_t end = bkv_table_properties(t)->data_bytes; /* the partitions follow the data blocks */
            bkv_table_close(t);
            for (uint32_t i = 0; i < n; i++) {
                padding += h[i][0] - end;
                end = h[i][0] + h[i][1] + BKV_BLOCK_TRAILER;
            }
        }
        int detected = 0, filter_maybe = 0;
        for (size_t pos = 0; pos < len; pos++) {
            data[pos] ^= 0x20;
            remove(bad);
            FILE *f = fopen(bad, "wb");
            assert_non_null(f);
            assert_int_equal(fwrite(data, 1, len, f), len);
            fclose(f);
            data[pos] ^= 0x20;
            bkv_table_stats st = {0};
            bkv_table *t;
            bkv_err e;
            int rc = bkv_table_open(bkv_env_posix(), bad, 11, NULL, &st, &t, &e);
            if (rc != BKV_OK) {
                assert_int_equal(rc, BKV_CORRUPTION);
                assert_non_null(strstr(e.msg, ".sst"));
                assert_non_null(strstr(e.msg, "offset"));
                detected++;
                continue;
            }
            int bad_read = 0;
            for (int i = 0; i < 120; i++) {
                char k[40], expect[64];
                make_key(k, i);
                if (i % 2 == 0) assert_int_equal(bkv_table_may_contain(t, bkv_hash_bytes(k, strlen(k))), 1);
                int found;
                unsigned type;
                void *v;
                size_t vlen;
                rc = bkv_table_get(t, k, strlen(k), 100, BKV_READ_FILL_CACHE | BKV_READ_VERIFY_ALL, &found, &type, &v,
                                   &vlen, NULL, &st, &e);
                if (rc != BKV_OK) {
                    assert_int_equal(rc, BKV_CORRUPTION);
                    assert_non_null(strstr(e.msg, "offset"));
                    bad_read = 1;
                    continue;
                }
                int present = i % 2 == 0;
                assert_int_equal(found, present);
                if (found && type == BKV_TYPE_VALUE) {
                    make_val(expect, i, i < 100 ? 2 : 1);
                    assert_int_equal(vlen, strlen(expect));
                    assert_memory_equal(v, expect, vlen);
                    free(v);
                } else if (found) {
                    assert_int_equal(i % 10, 0);
                }
            }
            /* Every absent key too, so that each partition is probed. */
            for (int i = 1; i < 2000; i += 2) {
                char k[40];
                make_key(k, i);
                bkv_table_may_contain(t, bkv_hash_bytes(k, strlen(k)));
            }
            filter_maybe += st.filter_corrupt > 0;
            detected += bad_read;
            bkv_table_close(t);
        }
        /* Every byte but padding is covered by a checksum; damage to the
         * filter reads as "maybe" instead of failing the table. */
        if (detected + filter_maybe + (int)padding < (int)len)
            fail_msg("%d detected + %d filter maybe + %zu padding of %zu bytes", detected, filter_maybe, padding, len);
        free(data);
    }
}

/* Damage that appears after a block was first read (and verified): a
 * normal read trusts the earlier verification, BKV_READ_VERIFY_ALL (the
 * verify_checksums read option) finds it, on the mapped and on the cached
 * path (compressed blocks live in the block cache). */
static void verify_all_rereads_every_block(void **state) {
    (void)state;
    for (int compression = 0; compression <= 1; compression++) {
        char p[300];
        snprintf(p, sizeof p, "%s/%06d.sst", dir, 30 + compression);
        build_table(p, 200, compression ? BKV_COMPRESS_LZ4 : BKV_COMPRESS_NONE, BKV_FILTER_BLOCKED_BLOOM);
        bkv_cache *cache = bkv_cache_new(1 << 20);
        bkv_table_stats st = {0};
        bkv_table *t;
        bkv_err e;
        assert_int_equal(bkv_table_open(bkv_env_posix(), p, 30 + compression, cache, &st, &t, &e), BKV_OK);
        int found;
        unsigned type;
        void *v;
        size_t vlen;
        assert_int_equal(bkv_table_get(t, "key00000002", 11, 100, BKV_READ_FILL_CACHE, &found, &type, &v, &vlen, NULL, &st, &e),
                         BKV_OK);
        assert_true(found);
        free(v);
        assert_int_equal(test_xor_byte(p, 20, 0x08), 0); /* the first data block starts at offset 0 */
        assert_int_equal(bkv_table_get(t, "key00000002", 11, 100, BKV_READ_FILL_CACHE, &found, &type, &v, &vlen, NULL, &st, &e),
                         BKV_OK); /* verified once, trusted since */
        if (found && type == BKV_TYPE_VALUE) free(v);
        assert_int_equal(bkv_table_get(t, "key00000002", 11, 100, BKV_READ_FILL_CACHE | BKV_READ_VERIFY_ALL, &found, &type,
                                       &v, &vlen, NULL, &st, &e),
                         BKV_CORRUPTION);
        assert_non_null(strstr(e.msg, "offset"));
        bkv_table_close(t);
        bkv_cache_free(cache);
    }
}


/* Bulk readers (BKV_READ_BULK: compactions, checks, ingests) against the
 * block readers they replace: with every compression, mapped or not, and
 * with values larger than a bulk chunk, both give the same entries in
 * order, after seeks too; the scan takes one large read per chunk, not one
 * per block; a bulk reader verifies blocks a block reader already trusts;
 * a failed read ends it with the error. */
static size_t bulk_reads, bulk_read_bytes;
/* The POSIX env's read_at, which counting_read_at passes reads on to. */
static int (*inner_read_at)(bkv_rfile *f, uint64_t off, size_t n, void *dst, size_t *got, bkv_err *e);

static int counting_read_at(bkv_rfile *f, uint64_t off, size_t n, void *dst, size_t *got, bkv_err *e) {
    bulk_reads++;
    bulk_read_bytes += n;
    return inner_read_at(f, off, n, dst, got, e);
}

/* Entry i's value: 100 bytes, or 300 KiB for every 997th (more than a
 * chunk, and a block of its own); random-looking, so that compressed
 * tables are as large. */
static size_t bulk_value(int i, uint8_t *v) {
    size_t n = i % 997 == 5 ? 300u << 10 : 100;
    uint32_t x = (uint32_t)i * 2654435761u + 1; /* xorshift: compresses little */
    for (size_t j = 0; j < n; j++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v[j] = (uint8_t)x;
    }
    return n;
}

static void build_bulk_table(const char *path, int n, int compression) {
    bkv_wfile *f;
    assert_int_equal(bkv_env_posix()->new_writable(bkv_env_posix(), path, 0644, &f, NULL), BKV_OK);
    bkv_table_options o = {.block_size = 4096, .restart_interval = 16, .filter_type = BKV_FILTER_BLOCKED_BLOOM,
                           .bits_per_key = 10, .compression = compression};
    bkv_table_builder *b = bkv_table_builder_new(&o, f, path);
    uint8_t *v = malloc(300u << 10);
    assert_non_null(v);
    for (int i = 0; i < n; i++) {
        uint8_t ik[48];
        make_key((char *)ik, i);
        bkv_put_u64(ik + 11, bkv_pack_trailer(1, BKV_TYPE_VALUE));
        assert_int_equal(bkv_table_builder_add(b, ik, 19, v, bulk_value(i, v), NULL), BKV_OK);
    }
    free(v);
    assert_int_equal(bkv_table_builder_finish(b, NULL), BKV_OK);
    bkv_table_builder_free(b);
    assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
}

/* Steps it from where it is to the end: every entry from first on, with
 * its value. */
static void expect_entries_from(bkv_ikey_iter *it, int first, int n) {
    uint8_t *v = malloc(300u << 10);
    assert_non_null(v);
    int i = first;
    for (; bkv_ikey_iter_valid(it); bkv_ikey_iter_next(it), i++) {
        char k[40];
        make_key(k, i);
        size_t kl, vl;
        const uint8_t *key = bkv_ikey_iter_key(it, &kl), *val = bkv_ikey_iter_value(it, &vl);
        assert_int_equal(kl, 19);
        assert_memory_equal(key, k, 11);
        assert_int_equal(vl, bulk_value(i, v));
        assert_memory_equal(val, v, vl);
    }
    assert_int_equal(bkv_ikey_iter_status(it, NULL), BKV_OK);
    assert_int_equal(i, n);
    free(v);
}

static void bulk_readers_match_block_readers(void **state) {
    (void)state;
    const int comps[] = {BKV_COMPRESS_NONE, BKV_COMPRESS_LZ4, BKV_COMPRESS_ZSTD};
    const int n = 30000;
    bkv_fault_env *fe = bkv_fault_env_new();
    for (int c = 0; c < 3; c++) {
        char path[300];
        snprintf(path, sizeof path, "%s/%06d.sst", dir, 40 + c);
        build_bulk_table(path, n, comps[c]);
        bkv_env counting = *bkv_env_posix();
        inner_read_at = counting.read_at;
        counting.read_at = counting_read_at;
        for (int mapped = 0; mapped <= 1; mapped++) {
            /* Unmapped: the fault env, which never maps. */
            const bkv_env *env = mapped ? &counting : bkv_fault_env_get(fe);
            bkv_table *t;
            assert_int_equal(bkv_table_open(env, path, 40 + (uint64_t)c, NULL, NULL, &t, NULL), BKV_OK);
            uint64_t data_bytes = bkv_table_properties(t)->data_bytes;
            assert_true(data_bytes > (6u << 20)); /* many chunks */
            for (int flags = 0; flags <= BKV_READ_BULK; flags += BKV_READ_BULK) {
                bkv_ikey_iter *it;
                assert_int_equal(bkv_table_iter_new(t, flags, NULL, &it), BKV_OK);
                bulk_reads = bulk_read_bytes = 0;
                bkv_ikey_iter_first(it);
                expect_entries_from(it, 0, n);
                if (mapped && flags) {
                    /* Every byte of the data blocks once, a chunk at a time
                     * (values over a chunk are one read each). */
                    assert_int_equal(bulk_read_bytes, data_bytes);
                    assert_true(bulk_reads <= data_bytes / (256u << 10) + (size_t)n / 997 * 2 + 2);
                } else if (mapped && comps[c] == BKV_COMPRESS_NONE) {
                    assert_true(bulk_reads == 0); /* read in place in the map */
                }
                /* Seeks, then on to the end. */
                for (int at = 0; at < n; at += 7919) {
                    uint8_t ik[48];
                    make_key((char *)ik, at);
                    bkv_put_u64(ik + 11, bkv_pack_trailer(BKV_MAX_SEQ, 0xff));
                    bkv_ikey_iter_seek(it, ik, 19);
                    expect_entries_from(it, at, n);
                }
                bkv_ikey_iter_destroy(it);
            }
            bkv_table_close(t);
        }
        /* Damage in a block a block reader verified before: it trusts the
         * block, a bulk reader does not. */
        bkv_table *t;
        assert_int_equal(bkv_table_open(bkv_env_posix(), path, 40 + (uint64_t)c, NULL, NULL, &t, NULL), BKV_OK);
        bkv_ikey_iter *it;
        assert_int_equal(bkv_table_iter_new(t, 0, NULL, &it), BKV_OK);
        bkv_ikey_iter_first(it);
        expect_entries_from(it, 0, n);
        assert_int_equal(test_xor_byte(path, 100, 0x08), 0); /* in the first data block */
        if (comps[c] == BKV_COMPRESS_NONE) {
            bkv_ikey_iter_first(it);
            assert_int_equal(bkv_ikey_iter_status(it, NULL), BKV_OK);
        }
        bkv_ikey_iter_destroy(it);
        assert_int_equal(bkv_table_iter_new(t, BKV_READ_BULK, NULL, &it), BKV_OK);
        bkv_ikey_iter_first(it);
        assert_false(bkv_ikey_iter_valid(it));
        bkv_err e;
        assert_int_equal(bkv_ikey_iter_status(it, &e), BKV_CORRUPTION);
        assert_non_null(strstr(e.msg, "offset 0"));
        bkv_ikey_iter_destroy(it);
        bkv_table_close(t);
        assert_int_equal(test_xor_byte(path, 100, 0x08), 0);
        /* A read that fails part way ends the scan with the error. */
        assert_int_equal(bkv_table_open(bkv_fault_env_get(fe), path, 40 + (uint64_t)c, NULL, NULL, &t, NULL), BKV_OK);
        assert_int_equal(bkv_table_iter_new(t, BKV_READ_BULK, NULL, &it), BKV_OK);
        bkv_fault_env_fail_at(fe, BKV_FAULT_READ, 5, BKV_FAULT_EIO, 0); /* the fifth read from now */
        size_t seen = 0;
        for (bkv_ikey_iter_first(it); bkv_ikey_iter_valid(it); bkv_ikey_iter_next(it)) seen++;
        assert_int_equal(bkv_ikey_iter_status(it, NULL), BKV_IOERROR);
        assert_true(seen > 0 && seen < (size_t)n);
        bkv_fault_env_clear_faults(fe);
        bkv_ikey_iter_destroy(it);
        bkv_table_close(t);
    }
    bkv_fault_env_free(fe);
}

/* The footer's format version (docs/format.md, "SSTable"). */
static uint32_t table_version(const char *path) {
    uint8_t *data;
    size_t len;
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    uint32_t v = bkv_get_u32(data + len - BKV_FOOTER_LEN + 48);
    free(data);
    return v;
}

/* Counts the keys the filter rejects: present keys (even) must never be,
 * absent ones (odd) mostly are; single and batched probes agree. */
static int filter_negatives(const bkv_table *t, int n) {
    int negatives = 0;
    bkv_hash h[64];
    uint8_t maybe[64];
    for (int base = 0; base < 2 * n; base += 64) {
        int m = 2 * n - base < 64 ? 2 * n - base : 64;
        for (int j = 0; j < m; j++) {
            char k[40];
            make_key(k, base + j);
            h[j] = bkv_hash_bytes(k, strlen(k));
        }
        bkv_table_may_contain_batch(t, h, (size_t)m, maybe);
        for (int j = 0; j < m; j++) {
            int single = bkv_table_may_contain(t, h[j]);
            assert_int_equal(single, maybe[j]);
            if ((base + j) % 2 == 0) assert_int_equal(single, 1);
            negatives += !single;
        }
    }
    return negatives;
}

/* A partitioned filter of every type knows every key, on the mapped path
 * (probed in place) and through the block cache (a file read without a
 * map, as the fault env does), with as many false positives as one whole
 * filter; the table is format version 2, an unpartitioned one stays 1.
 * Tiny partitions at 100 bits per key leave some partitions empty. */
static void partitioned_filters_know_every_key(void **state) {
    (void)state;
    const int types[] = {BKV_FILTER_BLOCKED_BLOOM, BKV_FILTER_BLOOM, BKV_FILTER_RIBBON, BKV_FILTER_FUSE8,
                         BKV_FILTER_XOR8, BKV_FILTER_CUCKOO12, BKV_FILTER_COUNTING};
    bkv_fault_env *fe = bkv_fault_env_new();
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (int tiny = 0; tiny <= 1; tiny++) {
            char whole[300], parted[300];
            snprintf(whole, sizeof whole, "%s/%06zu.sst", dir, 100 + 4 * ti + 2 * (size_t)tiny);
            snprintf(parted, sizeof parted, "%s/%06zu.sst", dir, 101 + 4 * ti + 2 * (size_t)tiny);
            bkv_table_options o = {.block_size = 1024, .restart_interval = 16, .filter_type = types[ti],
                                   .bits_per_key = tiny ? 100 : 10};
            int n = tiny ? 1500 : 5000;
            build_table_opts(whole, n, &o);
            o.filter_partition_size = tiny ? 64 : 512;
            build_table_opts(parted, n, &o);
            assert_int_equal(table_version(whole), 1);
            assert_int_equal(table_version(parted), 2);
            bkv_table_stats st = {0};
            bkv_table *tw, *tp;
            bkv_err e;
            assert_int_equal(bkv_table_open(bkv_env_posix(), whole, 1, NULL, &st, &tw, &e), BKV_OK);
            int whole_negatives = filter_negatives(tw, n);
            bkv_table_close(tw);
            for (int via_cache = 0; via_cache <= 1; via_cache++) {
                bkv_cache *cache = via_cache ? bkv_cache_new(1 << 20) : NULL;
                const bkv_env *env = via_cache ? bkv_fault_env_get(fe) : bkv_env_posix();
                assert_int_equal(bkv_table_open(env, parted, 2, cache, &st, &tp, &e), BKV_OK);
                const bkv_table_props *p = bkv_table_properties(tp);
                assert_true(p->filter_partitions > (tiny ? 100u : 5u));
                assert_int_equal(bkv_table_filter_partitions(tp), p->filter_partitions);
                assert_true(bkv_table_has_filter(tp) && !bkv_table_filter(tp));
                /* Until probed, only the partition index is in memory. */
                assert_true(bkv_table_filter_memory(tp) <= 32 * p->filter_partitions);
                int negatives = filter_negatives(tp, n);
                if (negatives < whole_negatives - n / 20)
                    fail_msg("type %d: %d negatives partitioned, %d whole", types[ti], negatives, whole_negatives);
                check_table(tp, n, &st);
                for (uint32_t i = 0; i < bkv_table_filter_partitions(tp); i++) {
                    bkv_filter *f;
                    assert_int_equal(bkv_table_filter_partition(tp, i, &f, &e), BKV_OK);
                    bkv_filter_destroy(f);
                }
                /* Partitions in the cache are counted until they leave it. */
                if (cache) assert_true(st.filter_cache_bytes > 0 && st.filter_cache_bytes <= bkv_cache_usage(cache));
                else assert_int_equal(st.filter_cache_bytes, 0);
                bkv_table_close(tp);
                assert_int_equal(st.filter_cache_bytes, 0);
                bkv_cache_free(cache);
            }
            assert_int_equal(st.filter_corrupt, 0);
        }
    }
    bkv_fault_env_free(fe);
}

/* A damaged partition answers "maybe" (counted once, never read again)
 * while the others still say "no"; bkv_table_filter_partition names the
 * file and offset; a damaged partition index makes the whole filter
 * "maybe". Both probe paths. */
static void damaged_partitions_read_maybe(void **state) {
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/000200.sst", dir);
    bkv_table_options o = {.block_size = 1024, .restart_interval = 16, .filter_type = BKV_FILTER_BLOCKED_BLOOM,
                           .bits_per_key = 10, .filter_partition_size = 256};
    build_table_opts(path, 4000, &o);
    uint8_t *data;
    size_t len;
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    uint64_t h[64][2];
    uint32_t n = partition_handles(data, len, h, 64);
    assert_true(n > 4 && n <= 64);
    free(data);
    assert_int_equal(test_xor_byte(path, (long)(h[1][0] + 100), 0x10), 0);
    bkv_fault_env *fe = bkv_fault_env_new();
    for (int via_cache = 0; via_cache <= 1; via_cache++) {
        bkv_cache *cache = via_cache ? bkv_cache_new(1 << 20) : NULL;
        bkv_table_stats st = {0};
        bkv_table *t;
        bkv_err e;
        assert_int_equal(bkv_table_open(via_cache ? bkv_fault_env_get(fe) : bkv_env_posix(), path, 200, cache, &st,
                                        &t, &e), BKV_OK);
        assert_int_equal(st.filter_corrupt, 0); /* partitions are read when first probed */
        int in_damaged = 0, rejected_elsewhere = 0;
        for (int round = 0; round < 2; round++)
            for (int i = 1; i < 8000; i += 2) {
                char k[40];
                make_key(k, i);
                bkv_hash hv = bkv_hash_bytes(k, strlen(k));
                int maybe = bkv_table_may_contain(t, hv);
                if (bkv_filter_partition_of(hv, n) == 1) in_damaged++, assert_int_equal(maybe, 1);
                else rejected_elsewhere += !maybe;
            }
        assert_true(in_damaged > 0 && rejected_elsewhere > 3000);
        assert_int_equal(st.filter_corrupt, 1);
        assert_int_equal(filter_negatives(t, 4000) > 0, 1); /* every present key still "maybe" */
        bkv_filter *f;
        assert_int_equal(bkv_table_filter_partition(t, 1, &f, &e), BKV_CORRUPTION);
        assert_null(f);
        assert_non_null(strstr(e.msg, "000200.sst"));
        assert_non_null(strstr(e.msg, "offset"));
        bkv_table_close(t);
        bkv_cache_free(cache);
    }
    /* The partition index itself. */
    assert_int_equal(test_xor_byte(path, (long)(h[1][0] + 100), 0x10), 0);
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    long index_at = (long)bkv_get_u64(data + len - BKV_FOOTER_LEN + 16);
    free(data);
    assert_int_equal(test_xor_byte(path, index_at + 8, 0x01), 0);
    bkv_table_stats st = {0};
    bkv_table *t;
    bkv_err e;
    assert_int_equal(bkv_table_open(bkv_env_posix(), path, 200, NULL, &st, &t, &e), BKV_OK);
    assert_int_equal(st.filter_corrupt, 1);
    assert_false(bkv_table_has_filter(t));
    assert_int_equal(filter_negatives(t, 4000), 0);
    bkv_table_close(t);
    bkv_fault_env_free(fe);
}

/* An entry that does not follow the one before it (a smaller user key,
 * or the same user key at a newer sequence, or the same entry twice)
 * fails the builder, and the builder stays failed. */
static void builder_refuses_entries_out_of_order(void **state) {
    (void)state;
    static const struct {
        const char *second;
        uint64_t seq;
    } cases[] = {{"a", 5}, {"b", 6}, {"b", 5}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[300];
        snprintf(path, sizeof path, "%s/order%zu.sst", dir, c);
        bkv_wfile *f;
        assert_int_equal(bkv_env_posix()->new_writable(bkv_env_posix(), path, 0644, &f, NULL), BKV_OK);
        bkv_table_options o = {.block_size = 1024, .restart_interval = 16, .filter_type = BKV_FILTER_BLOOM,
                               .bits_per_key = 10};
        bkv_table_builder *b = bkv_table_builder_new(&o, f, path);
        uint8_t ik[16];
        ik[0] = 'b';
        bkv_put_u64(ik + 1, bkv_pack_trailer(5, BKV_TYPE_VALUE));
        assert_int_equal(bkv_table_builder_add(b, ik, 9, (const uint8_t *)"v", 1, NULL), BKV_OK);
        ik[0] = (uint8_t)cases[c].second[0];
        bkv_put_u64(ik + 1, bkv_pack_trailer(cases[c].seq, BKV_TYPE_VALUE));
        bkv_err e = {{0}};
        assert_int_equal(bkv_table_builder_add(b, ik, 9, (const uint8_t *)"v", 1, &e), BKV_CORRUPTION);
        assert_non_null(strstr(e.msg, "internal-key order"));
        ik[0] = 'z';
        assert_int_not_equal(bkv_table_builder_add(b, ik, 9, (const uint8_t *)"v", 1, NULL), BKV_OK);
        assert_int_not_equal(bkv_table_builder_finish(b, NULL), BKV_OK);
        bkv_table_builder_free(b);
        assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
    }
}

/* A collector that ends a data block every `every` entries and writes one
 * block of its own: a byte per entry (the entry's value's first byte). */
typedef struct toy_collector {
    uint32_t every, entries, blocks_done, last_block;
    int set_bad_name; /* 1: a property the table uses itself; 2: a name too long */
    uint8_t bytes[4096];
} toy_collector;

static int toy_add(void *state, bkv_table_builder *b, const uint8_t *ikey, size_t ilen, const uint8_t *val,
                   size_t vlen, bkv_err *e) {
    (void)ikey, (void)ilen;
    toy_collector *c = state;
    if (c->entries && c->entries % c->every == 0) {
        int rc = bkv_table_builder_end_block(b, e);
        if (rc) return rc;
        assert_int_equal(bkv_table_builder_data_blocks(b), c->entries / c->every);
    }
    c->bytes[c->entries++] = vlen ? val[0] : 0;
    return BKV_OK;
}

static void toy_block_done(void *state, uint32_t block) {
    toy_collector *c = state;
    c->blocks_done++;
    c->last_block = block;
}

static int toy_finish(void *state, bkv_table_builder *b, bkv_err *e) {
    toy_collector *c = state;
    bkv_handle h;
    int rc = bkv_table_builder_write_block(b, c->bytes, c->entries, &h, e);
    if (!rc) rc = bkv_table_builder_set_property(b, "toy.offset", h.offset, e);
    if (!rc) rc = bkv_table_builder_set_property(b, "toy.size", h.size, e);
    if (!rc) rc = bkv_table_builder_set_property(b, "toy.count", c->entries, e);
    if (!rc && c->set_bad_name == 1) rc = bkv_table_builder_set_property(b, "num.entries", 1, e);
    if (!rc && c->set_bad_name == 2)
        rc = bkv_table_builder_set_property(b, "a.name.longer.than.any.property.a.table.keeps", 1, e);
    return rc;
}

static uint64_t toy_estimate(const void *state) { return ((const toy_collector *)state)->entries; }

static int slots_made, slots_destroyed;
static void *make_slot(bkv_table *t) {
    (void)t;
    slots_made++;
    return malloc(16);
}
static void destroy_slot(void *p) {
    slots_destroyed++;
    free(p);
}

/* The table format knows nothing of what a collector keeps: its blocks
 * and properties come back by name, its block boundaries hold, a name the
 * table uses itself (or one too long) fails the table, and the slot is
 * made once and destroyed with the table. */
static void collector_blocks_come_back_by_name(void **state) {
    (void)state;
    for (int bad = 0; bad <= 2; bad++) {
        char path[300];
        snprintf(path, sizeof path, "%s/collector%d.sst", dir, bad);
        bkv_wfile *f;
        assert_int_equal(bkv_env_posix()->new_writable(bkv_env_posix(), path, 0644, &f, NULL), BKV_OK);
        toy_collector tc = {.every = 7, .set_bad_name = bad};
        bkv_table_collector hook = {&tc, toy_add, toy_block_done, toy_finish, toy_estimate};
        bkv_table_options o = {.block_size = 1 << 20, .restart_interval = 16, .filter_type = BKV_FILTER_BLOOM,
                               .bits_per_key = 10, .collector = &hook};
        bkv_table_builder *b = bkv_table_builder_new(&o, f, path);
        for (int i = 0; i < 100; i++) {
            char k[32];
            uint8_t ik[48], v = (uint8_t)('a' + i % 26);
            make_key(k, i);
            memcpy(ik, k, strlen(k));
            bkv_put_u64(ik + strlen(k), bkv_pack_trailer(1, BKV_TYPE_VALUE));
            assert_int_equal(bkv_table_builder_add(b, ik, strlen(k) + 8, &v, 1, NULL), BKV_OK);
        }
        assert_true(bkv_table_builder_estimated_size(b) >= 100);
        bkv_err e = {{0}};
        int rc = bkv_table_builder_finish(b, &e);
        bkv_table_builder_free(b);
        assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
        if (bad) {
            assert_int_equal(rc, BKV_INVALID);
            assert_true(e.msg[0] != 0);
            continue;
        }
        assert_int_equal(rc, BKV_OK);
        assert_int_equal(tc.blocks_done, 15); /* 100 entries, 7 a block */
        assert_int_equal(tc.last_block, 14);
        bkv_table *t;
        assert_int_equal(bkv_table_open(bkv_env_posix(), path, 300, NULL, NULL, &t, NULL), BKV_OK);
        assert_int_equal(bkv_table_properties(t)->num_data_blocks, 15);
        uint64_t count = 0;
        assert_true(bkv_table_property(t, "toy.count", &count));
        assert_int_equal(count, 100);
        assert_false(bkv_table_property(t, "toy.absent", &count));
        bkv_handle h;
        assert_true(bkv_table_aux_handle(t, "toy", &h));
        bkv_handle none;
        assert_false(bkv_table_aux_handle(t, "absent", &none));
        uint8_t *data;
        size_t len;
        assert_int_equal(bkv_table_read_block(t, h, &data, &len, NULL), BKV_OK);
        assert_int_equal(len, 100);
        assert_memory_equal(data, tc.bytes, 100);
        free(data);
        atomic_uchar verified[1] = {0};
        for (int pass = 0; pass < 2; pass++) {
            bkv_table_aux_ref ref;
            const uint8_t *p = bkv_table_aux_block(t, h, verified, 0, BKV_READ_FILL_CACHE, &ref);
            assert_non_null(p);
            assert_memory_equal(p, tc.bytes, 100);
            bkv_table_aux_release(t, &ref);
        }
        bkv_handle past = {bkv_table_file_size(t) - 4, 100};
        bkv_table_aux_ref ref;
        assert_null(bkv_table_aux_block(t, past, verified, 0, 0, &ref));
        assert_int_equal(bkv_table_read_block(t, past, &data, &len, NULL), BKV_CORRUPTION);
        slots_made = slots_destroyed = 0;
        assert_null(bkv_table_slot_peek(t));
        void *slot = bkv_table_slot(t, make_slot, destroy_slot);
        assert_non_null(slot);
        assert_ptr_equal(bkv_table_slot(t, make_slot, destroy_slot), slot);
        assert_ptr_equal(bkv_table_slot_peek(t), slot);
        assert_int_equal(slots_made, 1);
        bkv_table_close(t);
        assert_int_equal(slots_destroyed, 1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(point_reads_all_compressions),
        cmocka_unit_test(damage_never_yields_wrong_values),
        cmocka_unit_test(verify_all_rereads_every_block),
        cmocka_unit_test(bulk_readers_match_block_readers),
        cmocka_unit_test(partitioned_filters_know_every_key),
        cmocka_unit_test(damaged_partitions_read_maybe),
        cmocka_unit_test(index_seeks_match_whole_keys),
        cmocka_unit_test(readers_in_order_prefetch_ahead),
        cmocka_unit_test(builder_refuses_entries_out_of_order),
        cmocka_unit_test(collector_blocks_come_back_by_name),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
