/*
 * The `bloomkv` command-line tool: one binary, one subcommand per task.
 * Exit status: 0 success, 1 not found, 2 usage error, 3 corruption or I/O.
 */
#include <stdio.h>
#include <string.h>

#include "bloomkv_filter.h"
#include "cli.h"

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"put", bkv_cli_put, "store a value under a key"},
    {"get", bkv_cli_get, "print the values of keys"},
    {"delete", bkv_cli_delete, "delete keys"},
    {"scan", bkv_cli_scan, "print keys and values in order, optionally within a range"},
    {"load", bkv_cli_load, "bulk load tab-separated key/value lines"},
    {"find-value", bkv_cli_find_value, "print the keys whose value is a given value"},
    {"value-index", bkv_cli_value_index, "build a value index for an existing database, or drop it"},
    {"stats", bkv_cli_stats, "what a database holds: tables, bytes and entries by level, the log, disk use"},
    {"compact", bkv_cli_compact, "compact everything, or a key range, down to the last level"},
    {"checkpoint", bkv_cli_checkpoint, "write a consistent copy of a database into a new directory"},
    {"destroy", bkv_cli_destroy, "delete a database"},
    {"repair", bkv_cli_repair, "keep every readable row of a damaged database, the damaged files set aside"},
    {"make-table", bkv_cli_make_table, "write a table file from sorted key/value lines, for ingest"},
    {"ingest", bkv_cli_ingest, "add a table file to a database at once, without the WAL"},
    {"check", bkv_cli_check, "verify every checksum and invariant of a database"},
    {"dump-sst", bkv_cli_dump_sst, "describe one table file"},
    {"shell", bkv_cli_shell, "the commands above on one database, a line each: interactive, or from stdin"},
    {"cluster", bkv_cli_cluster, "find-value HOST:PORT VALUE: search by value across a Redis Cluster (docs/redis.md)"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: bloomkv <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(out, "  %-14s %s\n", subcommands[i].name, subcommands[i].summary);
    fprintf(out, "\n'bloomkv <command> --help' describes one command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        /* help CMD: that command's own help, as CMD --help gives it. */
        if (argc > 2 && strcmp(argv[1], "help") == 0)
            for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
                if (strcmp(argv[2], subcommands[i].name) == 0)
                    return subcommands[i].run(2, (char *[]){argv[2], "--help", NULL});
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("bloomkv %d.%d.%d\n", BKV_VERSION_MAJOR, BKV_VERSION_MINOR, BKV_VERSION_PATCH);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0) return subcommands[i].run(argc - 1, argv + 1);
    if (strcmp(argv[1], "bench") == 0 || strcmp(argv[1], "filter-bench") == 0) {
        fprintf(stderr, "bloomkv: the benchmarks are a program of their own: bloomkv-bench %s (in the build tree)\n",
                strcmp(argv[1], "bench") == 0 ? "db" : "filters");
        return 2;
    }
    fprintf(stderr, "bloomkv: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
