/* Value tags: the word-at-a-time match against a tag-by-tag reading. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/coding.h"
#include "util/hash.h"
#include "valuesearch/value_tags.h"

/* bkv_vt_match against a tag-by-tag reading, for blocks of every count
 * from 0 to 9 (the word-at-a-time loop and its tail), one tag or three,
 * with tags that differ from the wanted one in a single lane bit. */
static void value_tags_match_every_entry(void **state) {
    (void)state;
    uint64_t rng = 42;
    for (int round = 0; round < 2000; round++) {
        uint32_t nblocks = 1 + (uint32_t)(bkv_splitmix64(&rng) % 6), counts[6], total = 0;
        for (uint32_t b = 0; b < nblocks; b++) total += counts[b] = (uint32_t)(bkv_splitmix64(&rng) % 10);
        uint8_t part[4 * 6 + 2 * 60];
        uint16_t want[3] = {(uint16_t)bkv_splitmix64(&rng), (uint16_t)bkv_splitmix64(&rng), (uint16_t)bkv_splitmix64(&rng)};
        size_t nwant = round % 2 ? 3 : 1;
        for (uint32_t b = 0; b < nblocks; b++) bkv_put_u32(part + 4 * b, counts[b]);
        for (uint32_t i = 0; i < total; i++) {
            uint64_t r = bkv_splitmix64(&rng);
            uint16_t tag = r % 8 == 0 ? want[r / 8 % nwant] : r % 8 == 1 ? (uint16_t)(want[0] ^ (1u << (r / 8 % 16))) : (uint16_t)(r >> 32);
            bkv_put_u16(part + 4 * nblocks + 2 * i, tag);
        }
        assert_int_equal(bkv_vt_part_valid(part, 4 * nblocks + 2 * (size_t)total, nblocks), 0);
        uint8_t maybe[6];
        bkv_vt_match(part, nblocks, want, nwant, maybe);
        const uint8_t *t = part + 4 * nblocks;
        for (uint32_t b = 0; b < nblocks; b++) {
            int expect = 0;
            for (uint32_t i = 0; i < counts[b]; i++)
                for (size_t j = 0; j < nwant; j++) expect |= bkv_get_u16(t + 2 * i) == want[j];
            assert_int_equal(maybe[b], expect);
            t += 2 * counts[b];
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(value_tags_match_every_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
