/* The filter pool (bkv_alloc_filter_memory): allocations never overlap,
 * start on a cache line, are found again by their address alone when
 * freed, reuse the holes frees leave, and give every chunk back once all
 * of it is free; the same from several threads at once (TSan). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "util/alloc.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

#define LIVE 300

static uint64_t next_random(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Mostly table-sized filters, some tiny, some past the pool's limit. */
static size_t random_size(uint64_t *rnd) {
    switch (next_random(rnd) % 8) {
    case 0: return (size_t)(next_random(rnd) % 300);
    case 1: return (size_t)(600000 + next_random(rnd) % 3000000);
    default: return (size_t)(next_random(rnd) % 400000);
    }
}

typedef struct live {
    uint8_t *p;
    size_t len;
    uint8_t fill;
} live;

/* Every 64th byte and the last are filled and checked: an overlap spans
 * at least a 256-byte slot. */
static void fill(live *l) {
    for (size_t i = 0; i < l->len; i += 64) l->p[i] = l->fill;
    if (l->len) l->p[l->len - 1] = l->fill;
}

static void check_and_free(live *l) {
    for (size_t i = 0; i < l->len; i += 64)
        if (l->p[i] != l->fill) fail_msg("byte %zu of a %zu-byte allocation overwritten", i, l->len);
    if (l->len && l->p[l->len - 1] != l->fill) fail_msg("the last byte of a %zu-byte allocation overwritten", l->len);
    bkv_free_filter_memory(l->p);
    l->p = NULL;
}

/* Random allocations and frees, each allocation filled with its own
 * byte and checked whole before its free; the usage counts follow. */
static void run_model(uint64_t seed, int steps) {
    uint64_t rnd = seed;
    live slots[LIVE] = {{0}};
    for (int step = 0; step < steps; step++) {
        live *l = &slots[next_random(&rnd) % LIVE];
        if (l->p) {
            check_and_free(l);
            continue;
        }
        l->len = random_size(&rnd);
        l->fill = (uint8_t)(next_random(&rnd) | 1);
        l->p = bkv_alloc_filter_memory(l->len);
        assert_non_null(l->p);
        assert_int_equal((uintptr_t)l->p % 64, 0);
        fill(l);
    }
    for (int i = 0; i < LIVE; i++)
        if (slots[i].p) check_and_free(&slots[i]);
}

static void allocations_stay_apart(void **state) {
    (void)state;
    run_model(1, 8000);
    size_t held, used;
    bkv_filter_memory_usage(&held, &used);
    assert_int_equal(used, 0);
    assert_int_equal(held, 0); /* every chunk given back */
    bkv_free_filter_memory(NULL);
}

static void holes_are_reused_and_counted(void **state) {
    (void)state;
    uint8_t *a = bkv_alloc_filter_memory(1000), *b = bkv_alloc_filter_memory(5000), *c = bkv_alloc_filter_memory(1);
    size_t held, used;
    bkv_filter_memory_usage(&held, &used);
    assert_int_equal(held, 2u << 20);
    assert_int_equal(used, 1024 + 5120 + 256); /* whole 256-byte slots */
    assert_ptr_equal(b, a + 1024);
    assert_ptr_equal(c, b + 5120);
    bkv_free_filter_memory(b);
    /* First fit: the hole takes what fits in it, in order, and what does
     * not fit goes past the last allocation. */
    uint8_t *d = bkv_alloc_filter_memory(4000), *e = bkv_alloc_filter_memory(1024), *f = bkv_alloc_filter_memory(300);
    assert_ptr_equal(d, b);
    assert_ptr_equal(e, b + 4096);
    assert_ptr_equal(f, c + 256);
    /* Neighbours freed apart leave each other whole. */
    memset(d, 7, 4000);
    bkv_free_filter_memory(f);
    bkv_free_filter_memory(e);
    for (int i = 0; i < 4000; i++) assert_int_equal(d[i], 7);
    bkv_free_filter_memory(a);
    bkv_free_filter_memory(d);
    bkv_free_filter_memory(c);
    bkv_filter_memory_usage(&held, &used);
    assert_int_equal(held, 0);
    assert_int_equal(used, 0);
    /* Past a quarter chunk, a region of its own. */
    uint8_t *big = bkv_alloc_filter_memory(1u << 20);
    bkv_filter_memory_usage(&held, &used);
    assert_int_equal(held, 0);
    bkv_free_filter_memory(big);
}

/* Under AddressSanitizer a read past a filter in the pool is caught as
 * past a malloc'd one: the bytes after it, and freed ones, are poisoned. */
static void bytes_outside_are_poisoned(void **state) {
    (void)state;
#ifdef __SANITIZE_ADDRESS__
    uint8_t *a = bkv_alloc_filter_memory(1000), *b = bkv_alloc_filter_memory(1000);
    assert_false(__asan_address_is_poisoned(a + 999));
    assert_true(__asan_address_is_poisoned(a + 1000));
    assert_true(__asan_address_is_poisoned(a + 1023));
    bkv_free_filter_memory(a);
    assert_true(__asan_address_is_poisoned(a));
    assert_false(__asan_address_is_poisoned(b));
    bkv_free_filter_memory(b);
#else
    skip();
#endif
}

static void *model_thread(void *arg) {
    run_model((uint64_t)(uintptr_t)arg, 1500);
    return NULL;
}

static void threads_share_the_pool(void **state) {
    (void)state;
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) assert_int_equal(pthread_create(&t[i], NULL, model_thread, (void *)(i + 7)), 0);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    size_t held, used;
    bkv_filter_memory_usage(&held, &used);
    assert_int_equal(held, 0);
    assert_int_equal(used, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allocations_stay_apart),
        cmocka_unit_test(holes_are_reused_and_counted),
        cmocka_unit_test(bytes_outside_are_poisoned),
        cmocka_unit_test(threads_share_the_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
