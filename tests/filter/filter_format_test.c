/* The serialized filter form: round trips, zero-copy probing, and
 * rejection of every truncation and every single-byte change. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bloomkv_filter.h"
#include "test_util.h"
#include "util/coding.h"
#include "util/hash.h"

static const int types[] = {BKV_FILTER_BLOOM, BKV_FILTER_BLOCKED_BLOOM};

static uint8_t *encode_filter(int type, uint64_t n, double bpk, size_t *len) {
    bkv_filter_spec spec = {.type = type, .bits_per_key = bpk, .hash_seed = 77};
    bkv_filter *f = NULL;
    assert_int_equal(bkv_filter_create(&spec, n, &f), BKV_OK);
    for (uint64_t i = 0; i < n; i++) bkv_filter_add(f, test_key_hash(1, i));
    *len = bkv_filter_encoded_size(f);
    uint8_t *buf = malloc(*len);
    assert_non_null(buf);
    assert_int_equal(bkv_filter_encode(f, buf, *len - 1), BKV_INVALID);
    assert_int_equal(bkv_filter_encode(f, buf, *len), BKV_OK);
    bkv_filter_destroy(f);
    return buf;
}

static void round_trip_probes_in_place(void **state) {
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        const uint64_t n = 5000;
        bkv_filter_spec spec = {.type = types[t], .bits_per_key = 10, .hash_seed = 77};
        bkv_filter *f = NULL;
        assert_int_equal(bkv_filter_create(&spec, n, &f), BKV_OK);
        for (uint64_t i = 0; i < n; i++) bkv_filter_add(f, test_key_hash(1, i));
        size_t len = bkv_filter_encoded_size(f);
        /* One spare byte in front to probe an unaligned copy too. */
        uint8_t *raw = malloc(len + 1);
        assert_non_null(raw);
        for (int shift = 0; shift < 2; shift++) {
            uint8_t *buf = raw + shift;
            assert_int_equal(bkv_filter_encode(f, buf, len), BKV_OK);
            bkv_filter *g = NULL;
            assert_int_equal(bkv_filter_open(buf, len, 0, &g, NULL, 0), BKV_OK);
            bkv_filter_info a, b;
            bkv_filter_get_info(f, &a);
            bkv_filter_get_info(g, &b);
            assert_memory_equal(&a, &b, sizeof a);
            assert_int_equal(b.hash_seed, 77);
            assert_true(b.num_keys == n);
            for (uint64_t i = 0; i < 20000; i++) {
                bkv_hash h = test_key_hash(i < n ? 1 : 2, i);
                assert_int_equal(bkv_filter_may_contain(f, h), bkv_filter_may_contain(g, h));
            }
            bkv_hash hs[100];
            uint8_t out[100];
            for (int i = 0; i < 100; i++) hs[i] = test_key_hash(1, (uint64_t)i);
            bkv_filter_may_contain_batch(g, hs, 100, out);
            for (int i = 0; i < 100; i++) assert_int_equal(out[i], 1);
            /* Opened filters are read-only. */
            assert_int_equal(bkv_filter_add(g, 1), BKV_INVALID);
            bkv_filter_destroy(g);
        }
        free(raw);
        bkv_filter_destroy(f);
    }
}

static void every_truncation_is_rejected(void **state) {
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        size_t len;
        uint8_t *buf = encode_filter(types[t], 300, 10, &len);
        for (size_t cut = 0; cut < len; cut++) {
            /* A fresh allocation of exactly cut bytes lets ASan catch any
             * read past the end. */
            uint8_t *copy = malloc(cut ? cut : 1);
            assert_non_null(copy);
            memcpy(copy, buf, cut);
            bkv_filter *g = (bkv_filter *)1;
            char err[128] = "";
            assert_int_equal(bkv_filter_open(copy, cut, 0, &g, err, sizeof err), BKV_CORRUPTION);
            assert_null(g);
            assert_true(strlen(err) > 0);
            free(copy);
        }
        /* Appended garbage too. */
        uint8_t *longer = calloc(1, len + 1);
        assert_non_null(longer);
        memcpy(longer, buf, len);
        bkv_filter *g = NULL;
        assert_int_equal(bkv_filter_open(longer, len + 1, 0, &g, NULL, 0), BKV_CORRUPTION);
        free(longer);
        free(buf);
    }
}

static void every_single_byte_change_is_rejected(void **state) {
    (void)state;
    for (size_t t = 0; t < 2; t++) {
        size_t len;
        uint8_t *buf = encode_filter(types[t], 40, 10, &len);
        for (size_t pos = 0; pos < len; pos++) {
            uint8_t orig = buf[pos];
            for (int v = 0; v < 256; v++) {
                if (v == orig) continue;
                buf[pos] = (uint8_t)v;
                bkv_filter *g = NULL;
                int rc = bkv_filter_open(buf, len, 0, &g, NULL, 0);
                if (rc == BKV_OK) fail_msg("type %d: byte %zu set to %d accepted", types[t], pos, v);
                assert_true(rc == BKV_CORRUPTION || rc == BKV_INVALID);
            }
            buf[pos] = orig;
        }
        bkv_filter *g = NULL;
        assert_int_equal(bkv_filter_open(buf, len, 0, &g, NULL, 0), BKV_OK);
        bkv_filter_destroy(g);
        free(buf);
    }
}

static void trusted_open_still_checks_structure(void **state) {
    (void)state;
    size_t len;
    uint8_t *buf = encode_filter(BKV_FILTER_BLOCKED_BLOOM, 100, 10, &len);
    bkv_filter *g = NULL;
    /* A payload bit flip passes a trusted open: the caller vouched for it. */
    buf[70] ^= 1;
    assert_int_equal(bkv_filter_open(buf, len, BKV_FILTER_OPEN_TRUSTED, &g, NULL, 0), BKV_OK);
    bkv_filter_destroy(g);
    assert_int_equal(bkv_filter_open(buf, len, 0, &g, NULL, 0), BKV_CORRUPTION);
    buf[70] ^= 1;
    /* A geometry that would send probes out of bounds never does. */
    buf[24] ^= 0x40; /* num_bits */
    char err[128];
    assert_int_equal(bkv_filter_open(buf, len, BKV_FILTER_OPEN_TRUSTED, &g, err, sizeof err), BKV_CORRUPTION);
    assert_non_null(strstr(err, "offset"));
    buf[24] ^= 0x40;
    buf[7] = 31; /* k beyond the limit */
    assert_int_equal(bkv_filter_open(buf, len, BKV_FILTER_OPEN_TRUSTED, &g, NULL, 0), BKV_CORRUPTION);
    free(buf);
}

static void unknown_version_and_type_are_invalid_not_corrupt(void **state) {
    (void)state;
    size_t len;
    uint8_t *buf = encode_filter(BKV_FILTER_BLOOM, 100, 10, &len);
    bkv_filter *g = NULL;
    char err[128];
    buf[4] = 2;
    assert_int_equal(bkv_filter_open(buf, len, 0, &g, err, sizeof err), BKV_INVALID);
    assert_non_null(strstr(err, "version"));
    buf[4] = 1;
    buf[6] = 200;
    assert_int_equal(bkv_filter_open(buf, len, BKV_FILTER_OPEN_TRUSTED, &g, err, sizeof err), BKV_INVALID);
    assert_non_null(strstr(err, "type"));
    free(buf);
}

/* The worked example of docs/format.md, byte for byte. */
static void header_matches_format_doc(void **state) {
    (void)state;
    bkv_filter_spec spec = {.type = BKV_FILTER_BLOOM, .bits_per_key = 10};
    bkv_filter *f = NULL;
    assert_int_equal(bkv_filter_create(&spec, 3, &f), BKV_OK);
    for (int i = 0; i < 3; i++) bkv_filter_add(f, test_key_hash(5, (uint64_t)i));
    assert_int_equal(bkv_filter_encoded_size(f), 80);
    uint8_t buf[80];
    assert_int_equal(bkv_filter_encode(f, buf, sizeof buf), BKV_OK);
    const uint8_t expect[48] = {0x42, 0x4B, 0x56, 0x66, 1, 0, 1, 7, 0, 0, 0, 0, 0, 0, 0, 0,
                                3, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0,
                                8, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(buf, expect, sizeof expect);
    for (int i = 48; i < 64; i++) assert_int_equal(buf[i], 0);
    bkv_filter_destroy(f);
}

/* A blocked Bloom filter written by an earlier build: 200 keys
 * "key0".."key199" at 10 bits per key. Its bytes and its answers must not
 * change while the format version stays 1. */
static const uint8_t legacy_blocked[] = {
    0x42, 0x4b, 0x56, 0x66, 0x01, 0x00, 0x02, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xc8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xdf, 0xca, 0x92, 0x90, 0x91, 0xbf, 0x9d, 0x92, 0xe2, 0x22, 0x74, 0xaa, 0xdf, 0x53, 0x11, 0x26,
    0x10, 0x9b, 0x65, 0x83, 0x3e, 0x43, 0x4a, 0xfb, 0x04, 0x70, 0xe4, 0xe7, 0xdf, 0x93, 0x08, 0x22,
    0xe6, 0xd1, 0xd4, 0x22, 0xd1, 0xae, 0xbc, 0xf1, 0x34, 0x93, 0x29, 0x18, 0xd9, 0x43, 0x35, 0x6c,
    0x93, 0x0b, 0x99, 0xf0, 0x1f, 0x3e, 0x65, 0xbb, 0xe4, 0x2f, 0x80, 0x00, 0x66, 0xcd, 0x12, 0x32,
    0x80, 0x64, 0x19, 0x0c, 0x0c, 0x0e, 0xf7, 0xa2, 0x73, 0x1e, 0x04, 0x96, 0x00, 0x12, 0x17, 0xeb,
    0x9c, 0xa1, 0x26, 0x1e, 0x1f, 0x5b, 0x71, 0x42, 0x3a, 0xa1, 0xda, 0x37, 0x70, 0x4b, 0x24, 0xfc,
    0x88, 0x1d, 0x93, 0xe4, 0xb7, 0x60, 0x03, 0x00, 0x12, 0x57, 0x98, 0xc8, 0xaa, 0x41, 0x1c, 0xb9,
    0x24, 0x47, 0x60, 0x92, 0x94, 0x36, 0x91, 0x2a, 0x84, 0x31, 0x48, 0x6d, 0xce, 0x38, 0x15, 0x31,
    0x0a, 0xb5, 0x51, 0x5a, 0x3f, 0x24, 0xf2, 0xe5, 0xed, 0x90, 0x72, 0x36, 0x83, 0xd2, 0x6c, 0x0e,
    0x7d, 0x0a, 0x96, 0xf4, 0x3d, 0x27, 0x23, 0x32, 0xca, 0xa0, 0x01, 0xb0, 0x06, 0xda, 0xa5, 0x24,
    0x9c, 0xc5, 0xd9, 0x83, 0xd3, 0x28, 0x00, 0xe0, 0x85, 0x3e, 0xd8, 0x9a, 0x08, 0x09, 0x31, 0x3d,
    0x08, 0xf2, 0x23, 0x9d, 0x9b, 0x07, 0x32, 0x7d, 0xfb, 0xb9, 0x2e, 0x2d, 0xb8, 0xf7, 0x6d, 0xc6,
    0xea, 0x4c, 0x85, 0x77, 0xc0, 0xe9, 0x20, 0x30, 0xa6, 0x04, 0x00, 0x83, 0x47, 0x04, 0x69, 0x63,
    0xe8, 0x17, 0x15, 0x4b, 0x6b, 0x24, 0x4d, 0x53, 0x33, 0x1c, 0x07, 0x24, 0x0b, 0x44, 0xb2, 0xe0,
    0x80, 0x39, 0x01, 0x99, 0x46, 0x3c, 0xc1, 0x4c, 0x43, 0xd4, 0xb5, 0x04, 0x5a, 0xa5, 0xe7, 0x19,
    0x44, 0x42, 0xa1, 0x2b, 0x1c, 0xba, 0x47, 0x6c, 0x90, 0x35, 0x6a, 0x52, 0x2c, 0x00, 0x90, 0x7a,
    0x7a, 0x42, 0x50, 0x25, 0x4d, 0x46, 0xa3, 0x56
};

static int count_absent_passing(const bkv_filter *f) {
    int passing = 0;
    char k[32];
    for (int i = 0; i < 100000; i++) {
        snprintf(k, sizeof k, "absent%d", i);
        passing += bkv_filter_may_contain(f, bkv_hash_bytes(k, strlen(k)));
    }
    return passing;
}

/* A filter of an earlier build opens and answers exactly as it did, and
 * the same keys built now give the same bytes. */
static void blocked_filter_is_stable(void **state) {
    (void)state;
    bkv_filter *f;
    assert_int_equal(bkv_filter_open(legacy_blocked, sizeof legacy_blocked, 0, &f, NULL, 0), BKV_OK);
    char k[32];
    bkv_hash h[200];
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof k, "key%d", i);
        h[i] = bkv_hash_bytes(k, strlen(k));
        assert_true(bkv_filter_may_contain(f, h[i]));
    }
    assert_int_equal(count_absent_passing(f), 884); /* as the earlier build counted */
    bkv_filter_destroy(f);
    bkv_filter_spec spec = {.type = BKV_FILTER_BLOCKED_BLOOM, .bits_per_key = 10};
    assert_int_equal(bkv_filter_build(&spec, h, 200, &f), BKV_OK);
    uint8_t buf[sizeof legacy_blocked];
    assert_int_equal(bkv_filter_encoded_size(f), sizeof buf);
    assert_int_equal(bkv_filter_encode(f, buf, sizeof buf), BKV_OK);
    assert_memory_equal(buf, legacy_blocked, sizeof buf);
    bkv_filter_destroy(f);
}

/* Regression (found by fuzz_filter): a header claiming billions of keys
 * for a tiny filter made the rate model sum billions of terms. */
static void absurd_key_count_does_not_stall_info(void **state) {
    (void)state;
    size_t len;
    uint8_t *buf = encode_filter(BKV_FILTER_BLOCKED_BLOOM, 10, 10, &len);
    for (int i = 0; i < 8; i++) buf[16 + i] = i == 7 ? 0x10 : 0; /* num_keys = 2^60 */
    bkv_filter *g;
    assert_int_equal(bkv_filter_open(buf, len, BKV_FILTER_OPEN_TRUSTED, &g, NULL, 0), BKV_OK);
    bkv_filter_info info;
    bkv_filter_get_info(g, &info);
    assert_true(info.expected_fpr == 1.0);
    bkv_filter_destroy(g);
    free(buf);
}

/* A filter of a type, k, counts and params as given, its payload zero,
 * its checksum right: what only the geometry checks can refuse. */
static uint8_t *forge(int type, unsigned k, uint64_t num_bits, const uint64_t params[3], size_t payload_len,
                      size_t *len) {
    *len = 64 + payload_len + 8;
    uint8_t *buf = calloc(1, *len);
    assert_non_null(buf);
    memcpy(buf, "BKVf", 4);
    bkv_put_u16(buf + 4, 1);
    buf[6] = (uint8_t)type;
    buf[7] = (uint8_t)k;
    bkv_put_u64(buf + 16, 100);
    bkv_put_u64(buf + 24, num_bits);
    bkv_put_u64(buf + 32, payload_len);
    for (int i = 0; i < 3; i++) bkv_put_u64(buf + 40 + 8 * i, params[i]);
    bkv_put_u64(buf + 64 + payload_len, bkv_checksum(buf, 64 + payload_len));
    return buf;
}

/* Regression (found by fuzz_filter): a bit count near 2^64 made the byte
 * count a type rounds it up to wrap around and match a tiny payload, and
 * probes then read far outside it. Every type's wrap is refused. */
static void counts_that_wrap_are_refused(void **state) {
    (void)state;
    const uint64_t none[3] = {0, 0, 0}, fuse[3] = {4, UINT64_C(1) << 62, (UINT64_C(1) << 62) + 8};
    struct {
        int type;
        unsigned k;
        uint64_t num_bits;
        const uint64_t *params;
        size_t payload_len;
    } cases[] = {
        {BKV_FILTER_COUNTING, 2, UINT64_MAX, none, 0},   /* (m + 1) / 2 = 0 */
        {BKV_FILTER_BLOOM, 2, UINT64_MAX - 3, none, 0},  /* (m + 7) / 8 = 0 */
        {BKV_FILTER_FUSE16, 16, fuse[2], fuse, 16},       /* m * 16 / 8 = 16 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        uint8_t *buf = forge(cases[i].type, cases[i].k, cases[i].num_bits, cases[i].params, cases[i].payload_len, &len);
        bkv_filter *g = NULL;
        char err[160];
        assert_int_equal(bkv_filter_open(buf, len, 0, &g, err, sizeof err), BKV_CORRUPTION);
        assert_non_null(strstr(err, "offset"));
        assert_int_equal(bkv_filter_open(buf, len, BKV_FILTER_OPEN_TRUSTED, &g, NULL, 0), BKV_CORRUPTION);
        assert_null(g);
        free(buf);
    }
}

/* A filter moved in pieces: its header alone makes an empty filter of the
 * same geometry, and its payload loaded in any pieces gives back a filter
 * that answers as the original, byte for byte when encoded. */
static void header_and_payload_pieces_rebuild_a_filter(void **state) {
    (void)state;
    const int kinds[] = {BKV_FILTER_BLOCKED_BLOOM, BKV_FILTER_BLOOM, BKV_FILTER_CUCKOO12, BKV_FILTER_COUNTING};
    for (size_t t = 0; t < sizeof kinds / sizeof kinds[0]; t++) {
        bkv_filter_spec spec = {.type = kinds[t], .bits_per_key = 12};
        bkv_filter *f;
        assert_int_equal(bkv_filter_create(&spec, 3000, &f), BKV_OK);
        for (uint64_t i = 0; i < 3000; i++) assert_int_equal(bkv_filter_add(f, test_key_hash(3, i)), BKV_OK);
        size_t len = bkv_filter_encoded_size(f), plen;
        uint8_t *enc = malloc(len), *again = malloc(len);
        assert_int_equal(bkv_filter_encode(f, enc, len), BKV_OK);
        /* The header alone is what the whole encoding starts with. */
        uint8_t head[BKV_FILTER_HEADER_BYTES];
        assert_int_equal(bkv_filter_encode_header(f, head, sizeof head - 1), BKV_INVALID);
        assert_int_equal(bkv_filter_encode_header(f, head, sizeof head), BKV_OK);
        assert_memory_equal(head, enc, sizeof head);
        const uint8_t *payload = bkv_filter_payload(f, &plen);
        assert_int_equal(plen, len - BKV_FILTER_HEADER_BYTES - 8);
        char err[160];
        bkv_filter *g;
        /* The caller's bound is checked before anything is allocated. */
        assert_int_equal(bkv_filter_open_header(enc, BKV_FILTER_HEADER_BYTES, plen - 1, &g, err, sizeof err), BKV_INVALID);
        assert_null(g);
        assert_int_equal(bkv_filter_open_header(enc, BKV_FILTER_HEADER_BYTES - 1, plen, &g, err, sizeof err),
                         BKV_CORRUPTION);
        assert_int_equal(bkv_filter_open_header(enc, BKV_FILTER_HEADER_BYTES, plen, &g, err, sizeof err), BKV_OK);
        size_t glen;
        bkv_filter_payload(g, &glen);
        assert_int_equal(glen, plen);
        /* Out of range: refused, nothing written. */
        assert_int_equal(bkv_filter_load_payload(g, plen, payload, 1), BKV_INVALID);
        assert_int_equal(bkv_filter_load_payload(g, 1, payload, plen), BKV_INVALID);
        for (size_t off = 0; off < plen; off += 1000) {
            size_t n = plen - off < 1000 ? plen - off : 1000;
            assert_int_equal(bkv_filter_load_payload(g, off, payload + off, n), BKV_OK);
        }
        assert_int_equal(bkv_filter_encode(g, again, len), BKV_OK);
        assert_memory_equal(enc, again, len);
        for (uint64_t i = 0; i < 3000; i++) assert_true(bkv_filter_may_contain(g, test_key_hash(3, i)));
        /* A filter opened in place (read-only) takes no payload. */
        bkv_filter *ro;
        assert_int_equal(bkv_filter_open(enc, len, 0, &ro, NULL, 0), BKV_OK);
        assert_int_equal(bkv_filter_load_payload(ro, 0, payload, 1), BKV_INVALID);
        bkv_filter_destroy(ro);
        bkv_filter_destroy(g);
        bkv_filter_destroy(f);
        free(enc);
        free(again);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_matches_format_doc),
        cmocka_unit_test(blocked_filter_is_stable),
        cmocka_unit_test(absurd_key_count_does_not_stall_info),
        cmocka_unit_test(counts_that_wrap_are_refused),
        cmocka_unit_test(round_trip_probes_in_place),
        cmocka_unit_test(every_truncation_is_rejected),
        cmocka_unit_test(every_single_byte_change_is_rejected),
        cmocka_unit_test(trusted_open_still_checks_structure),
        cmocka_unit_test(unknown_version_and_type_are_invalid_not_corrupt),
        cmocka_unit_test(header_and_payload_pieces_rebuild_a_filter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
