#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/coding.h"
#include "util/hash.h"

static void fixed_width_is_little_endian(void **state) {
    (void)state;
    uint8_t b[8];
    bkv_put_u32(b, 0x11223344u);
    assert_int_equal(b[0], 0x44);
    assert_int_equal(b[3], 0x11);
    assert_int_equal(bkv_get_u32(b), 0x11223344u);
    bkv_put_u64(b, 0x0102030405060708ULL);
    assert_int_equal(b[0], 0x08);
    assert_int_equal(b[7], 0x01);
    assert_true(bkv_get_u64(b) == 0x0102030405060708ULL);
    bkv_put_u16(b, 0xBEEF);
    assert_int_equal(b[0], 0xEF);
    assert_int_equal(bkv_get_u16(b), 0xBEEF);
}

static void fastrange_stays_in_range_and_spreads(void **state) {
    (void)state;
    uint64_t s = 42;
    unsigned counts[10] = {0};
    for (int i = 0; i < 100000; i++) {
        uint64_t x = bkv_splitmix64(&s);
        uint32_t r = bkv_fastrange32((uint32_t)x, 10);
        assert_true(r < 10);
        counts[r]++;
        assert_true(bkv_fastrange64(x, 7) < 7);
    }
    for (int i = 0; i < 10; i++) assert_in_range(counts[i], 9500, 10500);
    assert_int_equal(bkv_fastrange32(UINT32_MAX, 10), 9);
    assert_true(bkv_fastrange64(UINT64_MAX, 1000) == 999);
}

static void hash_is_stable(void **state) {
    (void)state;
    /* Filters on disk depend on this value never changing. */
    assert_true(bkv_hash_bytes("", 0) == 0x2D06800538D394C2ULL);
    assert_true(bkv_hash_bytes("abc", 3) == bkv_hash_bytes("abc", 3));
    assert_true(bkv_hash_bytes("abc", 3) != bkv_hash_bytes("abd", 3));
    assert_true(bkv_hash_bytes_seeded("abc", 3, 1) != bkv_hash_bytes("abc", 3));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixed_width_is_little_endian),
        cmocka_unit_test(fastrange_stays_in_range_and_spreads),
        cmocka_unit_test(hash_is_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
