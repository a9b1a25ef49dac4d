/* Uses nothing but the installed public header, as a client program would:
 * hash once, probe a filter built in memory and its serialized copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <bloomkv_filter.h>

static void hash_once_probe_many(void **state) {
    (void)state;
    bkv_filter_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.type = BKV_FILTER_BLOCKED_BLOOM;
    spec.bits_per_key = 10;
    bkv_filter *mem = NULL;
    assert_int_equal(bkv_filter_create(&spec, 3, &mem), BKV_OK);
    const char *words[] = {"apple", "banana", "cherry"};
    for (int i = 0; i < 3; i++) bkv_filter_add(mem, bkv_hash_bytes(words[i], strlen(words[i])));

    size_t len = bkv_filter_encoded_size(mem);
    void *buf = malloc(len);
    assert_non_null(buf);
    assert_int_equal(bkv_filter_encode(mem, buf, len), BKV_OK);
    bkv_filter *disk = NULL;
    assert_int_equal(bkv_filter_open(buf, len, 0, &disk, NULL, 0), BKV_OK);

    bkv_hash h = bkv_hash_bytes("banana", 6);
    assert_int_equal(bkv_filter_may_contain(mem, h), 1);
    assert_int_equal(bkv_filter_may_contain(disk, h), 1);
    assert_string_equal(bkv_strerror(BKV_CORRUPTION), "corruption");
    bkv_filter_destroy(disk);
    bkv_filter_destroy(mem);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(hash_once_probe_many)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
