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
#include "table/table.h"
#include "test_dir.h"
#include "util/coding.h"
#include "util/ikey.h"

TEST_DIR_FIXTURE("table")

static void make_key(char *k, int i) { snprintf(k, 32, "key%08d", i); }
static void make_val(char *v, int i, int ver) { snprintf(v, 64, "value-%d-v%d-padpadpadpadpadpad", i, ver); }

/* Keys 0, 2, 4, ... (n of them); even keys below 100 have two versions
 * (seq 1 and 2), and keys divisible by 10 are deleted at seq 3. */
static void build_table(const char *path, int n, int compression, int filter_type) {
    bkv_wfile *f;
    assert_int_equal(bkv_env_posix()->new_writable(bkv_env_posix(), path, 0644, &f, NULL), BKV_OK);
    bkv_table_options o = {.block_size = 1024, .restart_interval = 16, .filter_type = filter_type,
                           .bits_per_key = 10, .compression = compression};
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
    assert_int_equal(bkv_table_builder_finish(b, &e), BKV_OK);
    bkv_table_builder_free(b);
    assert_int_equal(bkv_file_sync(f, NULL), BKV_OK);
    assert_int_equal(bkv_file_close(f, NULL), BKV_OK);
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
        assert_int_equal(bkv_table_get(t, k, strlen(k), 100, BKV_READ_FILL_CACHE, &found, &type, &v, &vlen, st, &e), BKV_OK);
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
            assert_int_equal(bkv_table_get(t, k, strlen(k), 1, BKV_READ_FILL_CACHE, &found, &type, &v, &vlen, st, &e), BKV_OK);
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
        assert_true(p->num_data_blocks > 10);
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

/* Flip each byte of a small table in turn: opening or reading may fail
 * with a corruption naming the file, but never returns a wrong value. */
static void damage_never_yields_wrong_values(void **state) {
    (void)state;
    char path[300], bad[300];
    snprintf(path, sizeof path, "%s/000010.sst", dir);
    snprintf(bad, sizeof bad, "%s/000011.sst", dir);
    build_table(path, 60, BKV_COMPRESS_NONE, BKV_FILTER_BLOCKED_BLOOM);
    uint8_t *data;
    size_t len;
    assert_int_equal(bkv_env_read_all(bkv_env_posix(), path, &data, &len, NULL), BKV_OK);
    int detected = 0, filter_maybe = 0;
    for (size_t pos = 0; pos < len; pos++) {
        data[pos] ^= 0x20;
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
            assert_non_null(strstr(e.msg, "000011.sst"));
            assert_non_null(strstr(e.msg, "offset"));
            detected++;
            continue;
        }
        filter_maybe += st.filter_corrupt > 0;
        int bad_read = 0;
        for (int i = 0; i < 120; i++) {
            char k[40], expect[64];
            make_key(k, i);
            int found;
            unsigned type;
            void *v;
            size_t vlen;
            rc = bkv_table_get(t, k, strlen(k), 100, BKV_READ_FILL_CACHE | BKV_READ_VERIFY_ALL, &found, &type, &v, &vlen, &st, &e);
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
        detected += bad_read;
        bkv_table_close(t);
    }
    /* Every byte is covered by a checksum; damage to the filter block
     * reads as "maybe" instead of failing the table. */
    if (detected + filter_maybe < (int)len)
        fail_msg("%d detected + %d filter maybe of %zu bytes", detected, filter_maybe, len);
    free(data);
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
        assert_int_equal(bkv_table_get(t, "key00000002", 11, 100, BKV_READ_FILL_CACHE, &found, &type, &v, &vlen, &st, &e),
                         BKV_OK);
        assert_true(found);
        free(v);
        assert_int_equal(test_xor_byte(p, 20, 0x08), 0); /* the first data block starts at offset 0 */
        assert_int_equal(bkv_table_get(t, "key00000002", 11, 100, BKV_READ_FILL_CACHE, &found, &type, &v, &vlen, &st, &e),
                         BKV_OK); /* verified once, trusted since */
        if (found && type == BKV_TYPE_VALUE) free(v);
        assert_int_equal(bkv_table_get(t, "key00000002", 11, 100, BKV_READ_FILL_CACHE | BKV_READ_VERIFY_ALL, &found, &type,
                                       &v, &vlen, &st, &e),
                         BKV_CORRUPTION);
        assert_non_null(strstr(e.msg, "offset"));
        bkv_table_close(t);
        bkv_cache_free(cache);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(point_reads_all_compressions),
        cmocka_unit_test(damage_never_yields_wrong_values),
        cmocka_unit_test(verify_all_rereads_every_block),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
