/* Fuzz target: the value index. The first part of the input is decoded as a
 * value filter block (for a table shape taken from its first bytes); the
 * whole input is also read as a stream of index operations (add a table of
 * partitions whose bits come from the input, remove a table, search), run
 * on all three shapes at once: the hierarchy and the bit-sliced index must
 * name exactly the leaves the flat index names, and the hierarchy must keep
 * its invariants. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "valuesearch/value_filter.h"
#include "valuesearch/vindex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct leaf_set {
    uint64_t keys[512];
    int n;
} leaf_set;

static int collect(void *arg, const bkv_vleaf_ref *leaf) {
    leaf_set *s = arg;
    if (s->n < 512) s->keys[s->n++] = leaf->file << 16 | leaf->part;
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void search_all_shapes(bkv_vindex *const *vi, const bkv_vf_probe *pr) {
    static leaf_set got[3];
    for (int s = 0; s < 3; s++) {
        got[s].n = 0;
        bkv_vindex_search(vi[s], pr, collect, &got[s], NULL);
        qsort(got[s].keys, (size_t)got[s].n, sizeof got[s].keys[0], cmp_u64);
    }
    for (int s = 1; s < 3; s++)
        if (got[s].n != got[0].n || memcmp(got[s].keys, got[0].keys, (size_t)got[0].n * 8) != 0) {
            fprintf(stderr, "shape %d names %d leaves, flat %d\n", s + 1, got[s].n, got[0].n);
            abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 8) {
        bkv_vf_set vf;
        bkv_vf_layout layout; /* a version 2 header decodes too; its summary must lie within the input */
        uint64_t blocks = (uint64_t)data[0] | (uint64_t)data[1] << 8, entries = (uint64_t)data[2] | (uint64_t)data[3] << 8;
        if (bkv_vf_decode(data + 4, size - 4, blocks, entries, &vf, &layout, "fuzz", 0, NULL) == BKV_OK) {
            if (layout.summary && (layout.summary < data + 4 || layout.summary + layout.summary_len > data + size))
                abort();
            bkv_vindex *vi = bkv_vindex_new(BKV_VALUE_INDEX_HIERARCHY, &vf.params, 2);
            if (vi) {
                bkv_vindex_add_table(vi, 1, &vf);
                bkv_vindex_commit(vi);
                bkv_vf_probe pr;
                bkv_vf_probe_init(&pr, &vf.params, data, 4);
                bkv_vindex_search(vi, &pr, collect, &(leaf_set){.n = 0}, NULL);
                bkv_vindex_free(vi);
            }
            bkv_vf_set_free(&vf);
        }
    }

    const bkv_vf_params params = {.m_bits = 128, .k = 2, .seed = 9, .partition_entries = 4};
    int order = 2 + (size ? data[0] % 4 : 0);
    bkv_vindex *vi[3];
    for (int s = 0; s < 3; s++) vi[s] = bkv_vindex_new(s + 1, &params, order);
    uint64_t next_file = 1, live[64];
    int nlive = 0;
    char why[200];
    for (size_t at = 1; at < size;) {
        uint8_t op = data[at++];
        if (op % 3 == 0 && nlive < 64) { /* add a table */
            uint32_t nparts = 1 + op / 3 % 8;
            bkv_vf_set vf = {.params = params};
            for (uint32_t p = 0; p < nparts; p++) {
                if (bkv_vf_set_add_part(&vf, p)) abort();
                uint64_t *bits = bkv_vf_part_bits(&vf, p);
                for (int w = 0; w < 2 && at < size; w++)
                    for (int b = 0; b < 8 && at < size; b++) bits[w] |= (uint64_t)data[at++] << (8 * b);
            }
            for (int s = 0; s < 3; s++) bkv_vindex_add_table(vi[s], next_file, &vf);
            live[nlive++] = next_file++;
            bkv_vf_set_free(&vf);
        } else if (op % 3 == 1 && nlive > 0) { /* remove one */
            int victim = (op / 3) % nlive;
            for (int s = 0; s < 3; s++) bkv_vindex_remove_table(vi[s], live[victim]);
            live[victim] = live[--nlive];
        } else { /* search a term made of the next two bytes */
            for (int s = 0; s < 3; s++) bkv_vindex_commit(vi[s]);
            if (bkv_vindex_check(vi[1], why, sizeof why)) {
                fprintf(stderr, "hierarchy: %s\n", why);
                abort();
            }
            bkv_vf_probe pr;
            bkv_vf_probe_init(&pr, &params, data + at - 1, at < size ? 2 : 1);
            search_all_shapes(vi, &pr);
        }
    }
    for (int s = 0; s < 3; s++) bkv_vindex_free(vi[s]);
    return 0;
}
