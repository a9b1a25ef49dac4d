/*
 * `bloomkv-bench`: the benchmarks, a program of their own so that the
 * installed `bloomkv` tool links neither them nor the peers they compare
 * against (LevelDB and RocksDB, when built with BKV_WITH_PEERS).
 *   bloomkv-bench db [options]        db_bench-style engine benchmark
 *   bloomkv-bench filters [options]   one filter type: build, probe, false positives
 * Exit status: 0 success, 2 usage error, 3 a failure while measuring.
 */
#include <stdio.h>
#include <string.h>

#include "bloomkv_common.h"
#include "db_bench.h"
#include "filter_bench.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} benches[] = {
    {"db", bkv_db_bench_main, "db_bench-style engine benchmark (fillrandom, readrandom, readmissing, ...)"},
    {"filters", bkv_filter_bench_main, "measure a filter type: build cost, probe cost, false positives"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: bloomkv-bench <benchmark> [options]\n\nbenchmarks:\n");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        fprintf(out, "  %-10s %s\n", benches[i].name, benches[i].summary);
    fprintf(out, "\n'bloomkv-bench <benchmark> --help' lists its options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("bloomkv-bench %d.%d.%d\n", BKV_VERSION_MAJOR, BKV_VERSION_MINOR, BKV_VERSION_PATCH);
        return 0;
    }
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        if (strcmp(argv[1], benches[i].name) == 0) return benches[i].run(argc - 1, argv + 1);
    fprintf(stderr, "bloomkv-bench: unknown benchmark '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
