/*
 * The cost of LevelDB's C API layer (libbloomkv-leveldb) over bloomkv's
 * own: fillrandom then readrandom of the same keys, through each API in
 * turn, rounds alternating which goes first; prints each round and the
 * medians, and the layer's rate over the native one.
 *   leveldb_api_bench [NUM [ROUNDS [DIR]]]   (defaults 1000000, 5, /tmp)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bloomkv.h"
#include "leveldb/c.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t next_key(uint64_t *state) { /* splitmix64: the same keys for both APIs */
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ops per second of fill (rates[0]) and read (rates[1]) through one API. */
static void run(int layer, const char *path, uint64_t num, double rates[2]) {
    char key[17], val[100];
    memset(val, 'v', sizeof val);
    char *err = NULL;
    leveldb_t *l = NULL;
    bkv_db *db = NULL;
    leveldb_options_t *lo = leveldb_options_create();
    leveldb_writeoptions_t *lw = leveldb_writeoptions_create();
    leveldb_readoptions_t *lr = leveldb_readoptions_create();
    /* The layer's defaults (LevelDB's sizes, LZ4) set on the native side too. */
    leveldb_options_set_create_if_missing(lo, 1);
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 4 << 20;
    o.block_cache_size = 8 << 20;
    o.target_file_size = 2 << 20;
    o.compression = BKV_COMPRESSION_LZ4;
    leveldb_destroy_db(lo, path, &err);
    if (layer) l = leveldb_open(lo, path, &err);
    else if (bkv_open(path, &o, &db) != BKV_OK) err = strdup(bkv_errmsg(NULL));
    if (err) {
        fprintf(stderr, "open %s: %s\n", path, err);
        exit(1);
    }
    for (int phase = 0; phase < 2; phase++) {
        uint64_t state = 42;
        double t0 = now();
        for (uint64_t i = 0; i < num; i++) {
            snprintf(key, sizeof key, "%016llx", (unsigned long long)next_key(&state));
            if (phase == 0) {
                if (layer) leveldb_put(l, lw, key, 16, val, sizeof val, &err);
                else if (bkv_put(db, NULL, key, 16, val, sizeof val) != BKV_OK) err = strdup("put");
            } else {
                size_t n;
                void *v = NULL;
                if (layer) v = leveldb_get(l, lr, key, 16, &n, &err);
                else bkv_get(db, NULL, key, 16, &v, &n);
                if (!v) err = err ? err : strdup("a key went missing");
                free(v);
            }
            if (err) {
                fprintf(stderr, "%s\n", err);
                exit(1);
            }
        }
        rates[phase] = (double)num / (now() - t0);
    }
    if (layer) leveldb_close(l);
    else bkv_close(db);
    leveldb_destroy_db(lo, path, &err);
    leveldb_options_destroy(lo);
    leveldb_writeoptions_destroy(lw);
    leveldb_readoptions_destroy(lr);
}

int main(int argc, char **argv) {
    uint64_t num = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    const char *dir = argc > 3 ? argv[3] : "/tmp";
    if (num == 0 || rounds < 1 || rounds > 99) {
        fprintf(stderr, "usage: leveldb_api_bench [NUM [ROUNDS [DIR]]]\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/bkv-leveldb-api-bench", dir);
    double rate[2][2][99]; /* [api][phase][round] */
    printf("round  native fill   layer fill   native read   layer read\n");
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int layer = (r + k) % 2; /* a different API goes first each round */
            double rates[2];
            run(layer, path, num, rates);
            rate[layer][0][r] = rates[0], rate[layer][1][r] = rates[1];
        }
        printf("%5d %12.0f %12.0f %13.0f %12.0f\n", r + 1, rate[0][0][r], rate[1][0][r], rate[0][1][r], rate[1][1][r]);
    }
    const char *names[2] = {"fillrandom", "readrandom"};
    for (int p = 0; p < 2; p++) {
        qsort(rate[0][p], (size_t)rounds, sizeof(double), cmp_double);
        qsort(rate[1][p], (size_t)rounds, sizeof(double), cmp_double);
        double n = rate[0][p][rounds / 2], l = rate[1][p][rounds / 2];
        printf("%s: native %.0f ops/s, layer %.0f ops/s (medians of %d), layer/native %.3f\n", names[p], n, l, rounds,
               l / n);
    }
    return 0;
}
