/* The database subcommands of `bloomkv`. Keys and values are taken and
 * printed as they are, or as hex with --hex (for arbitrary bytes). Every
 * failure prints one line on stderr. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bloomkv.h"
#include "cli.h"

enum { EXIT_NOTFOUND = 1, EXIT_USAGE = 2, EXIT_ERROR = 3 };

typedef struct cli_opts {
    int hex;
    const char *from, *to;
    long limit;
    int entries;
    int sync;
    int value_index; /* BKV_VALUE_INDEX_* for a database being created */
    int stats;
} cli_opts;

typedef struct usage_text {
    const char *cmd, *args, *help;
} usage_text;

static const usage_text usages[] = {
    {"put", "DB KEY VALUE [--hex] [--sync] [--value-index flat|hierarchy|bitsliced]",
     "store VALUE under KEY (creates DB if missing, with a value index when asked)"},
    {"get", "DB KEY [--hex]", "print the value of KEY; exit 1 if absent"},
    {"delete", "DB KEY [--hex] [--sync]", "delete KEY"},
    {"scan", "DB [--from K] [--to K] [--limit N] [--hex]", "print key<TAB>value lines in key order, from K (inclusive) to K (exclusive)"},
    {"load", "DB FILE [--hex] [--value-index flat|hierarchy|bitsliced]",
     "bulk load key<TAB>value lines from FILE ('-' for stdin)"},
    {"find-value", "DB VALUE [--hex] [--stats]",
     "print key<TAB>value for every key whose value is VALUE (needs a value index); exit 1 if none; "
     "--stats reports on stderr what the search touched"},
    {"stats", "DB", "levels, tables, filter memory and counters"},
    {"compact", "DB", "flush and run every due compaction"},
    {"check", "DB", "verify every checksum and invariant of every file; exit 3 on a problem"},
    {"dump-sst", "FILE [--entries]", "describe one table file: properties, filter, optionally entries"},
};

static void usage(const char *cmd) {
    for (size_t i = 0; i < sizeof usages / sizeof usages[0]; i++)
        if (strcmp(usages[i].cmd, cmd) == 0) fprintf(stderr, "usage: bloomkv %s %s\n  %s\n", cmd, usages[i].args, usages[i].help);
}

static int help_requested(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    return 0;
}

/* Parses the flags and returns the positional arguments in pos. */
static int parse(int argc, char **argv, cli_opts *o, char **pos, int npos) {
    static const struct option opts[] = {{"hex", no_argument, 0, 'x'},   {"from", required_argument, 0, 'f'},
                                         {"to", required_argument, 0, 't'}, {"limit", required_argument, 0, 'l'},
                                         {"entries", no_argument, 0, 'e'}, {"sync", no_argument, 0, 's'},
                                         {"value-index", required_argument, 0, 'v'},
                                         {"stats", no_argument, 0, 'S'},   {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->limit = -1;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'x': o->hex = 1; break;
        case 'f': o->from = optarg; break;
        case 't': o->to = optarg; break;
        case 'l': {
            char *end;
            o->limit = strtol(optarg, &end, 10);
            if (*end || o->limit < 0) return -1;
            break;
        }
        case 'e': o->entries = 1; break;
        case 's': o->sync = 1; break;
        case 'S': o->stats = 1; break;
        case 'v':
            if (strcmp(optarg, "flat") == 0) o->value_index = BKV_VALUE_INDEX_FLAT;
            else if (strcmp(optarg, "hierarchy") == 0) o->value_index = BKV_VALUE_INDEX_HIERARCHY;
            else if (strcmp(optarg, "bitsliced") == 0) o->value_index = BKV_VALUE_INDEX_BITSLICED;
            else return -1;
            break;
        default: return -1;
        }
    }
    if (argc - optind != npos) return -1;
    for (int i = 0; i < npos; i++) pos[i] = argv[optind + i];
    return 0;
}

/* Decodes an argument (hex when asked) into a malloc'd buffer. */
static int decode(const char *s, int hex, char **out, size_t *len) {
    size_t n = strlen(s);
    if (!hex) {
        *out = strdup(s);
        *len = n;
        return *out ? 0 : -1;
    }
    if (n % 2) return -1;
    *out = malloc(n / 2 + 1);
    if (!*out) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) {
            free(*out);
            return -1;
        }
        (*out)[i] = (char)v;
    }
    *len = n / 2;
    return 0;
}

static void print_bytes(FILE *f, const void *p, size_t n, int hex) {
    const unsigned char *b = p;
    if (hex)
        for (size_t i = 0; i < n; i++) fprintf(f, "%02x", b[i]);
    else fwrite(p, 1, n, f);
}

/* Opens with the database's own value index, if any; value_index asks for
 * one when the database is created. */
static int open_db(const char *path, int create, int value_index, bkv_db **db) {
    bkv_options o;
    bkv_options_init(&o);
    o.create_if_missing = create;
    o.value_index = value_index;
    int rc = bkv_open(path, &o, db);
    if (rc) {
        fprintf(stderr, "bloomkv: cannot open %s: %s\n", path, bkv_strerror(rc));
        return EXIT_ERROR;
    }
    return 0;
}

static int fail_db(bkv_db *db, const char *what, int rc) {
    const char *detail = bkv_errmsg(db);
    fprintf(stderr, "bloomkv: %s: %s%s%s\n", what, bkv_strerror(rc), *detail ? ": " : "", detail);
    bkv_close(db);
    return EXIT_ERROR;
}

#define PARSE_OR_USAGE(n)                                       \
    cli_opts o;                                                 \
    char *pos[3];                                               \
    if (help_requested(argc, argv)) {                           \
        usage(argv[0]);                                         \
        return 0;                                               \
    }                                                           \
    if (parse(argc, argv, &o, pos, n) < 0) {                    \
        usage(argv[0]);                                         \
        return EXIT_USAGE;                                      \
    }

int bkv_cli_put(int argc, char **argv) {
    PARSE_OR_USAGE(3);
    char *k, *v;
    size_t kl, vl;
    if (decode(pos[1], o.hex, &k, &kl) || decode(pos[2], o.hex, &v, &vl)) {
        fprintf(stderr, "bloomkv: put: bad hex\n");
        return EXIT_USAGE;
    }
    bkv_db *db;
    int ec = open_db(pos[0], 1, o.value_index, &db);
    if (!ec) {
        bkv_write_options wo = {.sync = o.sync};
        int rc = bkv_put(db, &wo, k, kl, v, vl);
        ec = rc ? fail_db(db, "put", rc) : (bkv_close(db), 0);
    }
    free(k);
    free(v);
    return ec;
}

int bkv_cli_get(int argc, char **argv) {
    PARSE_OR_USAGE(2);
    char *k;
    size_t kl;
    if (decode(pos[1], o.hex, &k, &kl)) {
        fprintf(stderr, "bloomkv: get: bad hex\n");
        return EXIT_USAGE;
    }
    bkv_db *db;
    int ec = open_db(pos[0], 0, 0, &db);
    if (!ec) {
        void *v;
        size_t vl;
        int rc = bkv_get(db, NULL, k, kl, &v, &vl);
        if (rc == BKV_OK) {
            print_bytes(stdout, v, vl, o.hex);
            putchar('\n');
            bkv_free(v);
            bkv_close(db);
        } else if (rc == BKV_NOTFOUND) {
            fprintf(stderr, "bloomkv: get: not found\n");
            bkv_close(db);
            ec = EXIT_NOTFOUND;
        } else {
            ec = fail_db(db, "get", rc);
        }
    }
    free(k);
    return ec;
}

int bkv_cli_delete(int argc, char **argv) {
    PARSE_OR_USAGE(2);
    char *k;
    size_t kl;
    if (decode(pos[1], o.hex, &k, &kl)) {
        fprintf(stderr, "bloomkv: delete: bad hex\n");
        return EXIT_USAGE;
    }
    bkv_db *db;
    int ec = open_db(pos[0], 0, 0, &db);
    if (!ec) {
        bkv_write_options wo = {.sync = o.sync};
        int rc = bkv_delete(db, &wo, k, kl);
        ec = rc ? fail_db(db, "delete", rc) : (bkv_close(db), 0);
    }
    free(k);
    return ec;
}

int bkv_cli_scan(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    char *from = NULL, *to = NULL;
    size_t fl = 0, tl = 0;
    if ((o.from && decode(o.from, o.hex, &from, &fl)) || (o.to && decode(o.to, o.hex, &to, &tl))) {
        fprintf(stderr, "bloomkv: scan: bad hex\n");
        return EXIT_USAGE;
    }
    bkv_db *db;
    int ec = open_db(pos[0], 0, 0, &db);
    if (!ec) {
        bkv_read_options ro;
        bkv_read_options_init(&ro);
        ro.fill_cache = 0;
        ro.lower_bound = from;
        ro.lower_bound_len = fl;
        ro.upper_bound = to;
        ro.upper_bound_len = tl;
        bkv_iter *it;
        int rc = bkv_iter_create(db, &ro, &it);
        if (rc) {
            ec = fail_db(db, "scan", rc);
        } else {
            long n = 0;
            for (bkv_iter_seek_to_first(it); bkv_iter_valid(it) && (o.limit < 0 || n < o.limit); bkv_iter_next(it), n++) {
                size_t kl, vl;
                const void *k = bkv_iter_key(it, &kl), *v = bkv_iter_value(it, &vl);
                print_bytes(stdout, k, kl, o.hex);
                putchar('\t');
                print_bytes(stdout, v, vl, o.hex);
                putchar('\n');
            }
            rc = bkv_iter_status(it);
            bkv_iter_destroy(it);
            ec = rc ? fail_db(db, "scan", rc) : (bkv_close(db), 0);
        }
    }
    free(from);
    free(to);
    return ec;
}

static void progress(long done, long total_bytes, long pos_bytes) {
    int width = 40, filled = total_bytes > 0 ? (int)(width * pos_bytes / total_bytes) : 0;
    fprintf(stderr, "\r[%.*s%*s] %ld records", filled, "########################################", width - filled, "", done);
}

int bkv_cli_load(int argc, char **argv) {
    PARSE_OR_USAGE(2);
    FILE *in = strcmp(pos[1], "-") == 0 ? stdin : fopen(pos[1], "r");
    if (!in) {
        fprintf(stderr, "bloomkv: load: cannot open %s\n", pos[1]);
        return EXIT_ERROR;
    }
    long total = 0;
    if (in != stdin && fseek(in, 0, SEEK_END) == 0) {
        total = ftell(in);
        rewind(in);
    }
    int bar = isatty(STDERR_FILENO);
    bkv_db *db;
    int ec = open_db(pos[0], 1, o.value_index, &db);
    if (ec) {
        if (in != stdin) fclose(in);
        return ec;
    }
    bkv_batch *b = bkv_batch_create();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long count = 0, lineno = 0;
    while (!ec && (n = getline(&line, &cap, in)) >= 0) {
        lineno++;
        if (n && line[n - 1] == '\n') line[--n] = 0;
        if (n && line[n - 1] == '\r') line[--n] = 0;
        if (n == 0) continue;
        char *tab = strchr(line, '\t');
        char *k, *v;
        size_t kl, vl;
        if (!tab) {
            fprintf(stderr, "bloomkv: load: line %ld has no tab\n", lineno);
            ec = EXIT_USAGE;
            break;
        }
        *tab = 0;
        if (decode(line, o.hex, &k, &kl) || decode(tab + 1, o.hex, &v, &vl)) {
            fprintf(stderr, "bloomkv: load: line %ld: bad hex\n", lineno);
            ec = EXIT_USAGE;
            break;
        }
        int rc = bkv_batch_put(b, k, kl, v, vl);
        free(k);
        free(v);
        if (!rc && bkv_batch_count(b) >= 1000) {
            rc = bkv_write(db, NULL, b);
            bkv_batch_clear(b);
        }
        if (rc) {
            ec = fail_db(db, "load", rc);
            db = NULL;
            break;
        }
        count++;
        if (bar && count % 10000 == 0) progress(count, total, in != stdin ? ftell(in) : 0);
    }
    if (!ec) {
        int rc = bkv_write(db, NULL, b);
        if (rc) {
            ec = fail_db(db, "load", rc);
            db = NULL;
        }
    }
    if (bar) {
        progress(count, total, total);
        fputc('\n', stderr);
    }
    if (!ec) printf("loaded %ld records\n", count);
    bkv_batch_destroy(b);
    free(line);
    if (in != stdin) fclose(in);
    if (db) bkv_close(db);
    return ec;
}

typedef struct find_out {
    int hex;
    long n;
} find_out;

static int print_found(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    find_out *f = arg;
    print_bytes(stdout, key, klen, f->hex);
    putchar('\t');
    print_bytes(stdout, val, vlen, f->hex);
    putchar('\n');
    f->n++;
    return 0;
}

int bkv_cli_find_value(int argc, char **argv) {
    PARSE_OR_USAGE(2);
    char *v;
    size_t vl;
    if (decode(pos[1], o.hex, &v, &vl)) {
        fprintf(stderr, "bloomkv: find-value: bad hex\n");
        return EXIT_USAGE;
    }
    bkv_db *db;
    int ec = open_db(pos[0], 0, 0, &db);
    if (!ec) {
        find_out f = {o.hex, 0};
        bkv_find_stats st;
        int rc = bkv_find_value(db, NULL, v, vl, print_found, &f, &st);
        if (rc == BKV_INVALID) {
            fprintf(stderr, "bloomkv: find-value: %s has no value index (create it with --value-index)\n", pos[0]);
            bkv_close(db);
            ec = EXIT_USAGE;
        } else if (rc) {
            ec = fail_db(db, "find-value", rc);
        } else {
            if (o.stats) {
                char *vi = bkv_property(db, "bloomkv.value-index");
                fprintf(stderr, "%s", vi ? vi : "");
                bkv_free(vi);
                fprintf(stderr,
                        "leaves %llu, inner nodes probed %llu (%llu maybe), leaves probed %llu (%llu maybe), "
                        "partitions scanned %llu (%llu with a match), entries scanned %llu, memtable candidates %llu, "
                        "candidates %llu, results %llu\n",
                        (unsigned long long)st.leaves, (unsigned long long)st.nodes_probed,
                        (unsigned long long)st.nodes_positive, (unsigned long long)st.leaves_probed,
                        (unsigned long long)st.leaves_positive, (unsigned long long)st.partitions_scanned,
                        (unsigned long long)st.partitions_matched, (unsigned long long)st.entries_scanned,
                        (unsigned long long)st.memtable_candidates, (unsigned long long)st.candidates,
                        (unsigned long long)st.results);
            }
            bkv_close(db);
            ec = f.n ? 0 : EXIT_NOTFOUND;
        }
    }
    free(v);
    return ec;
}

int bkv_cli_stats(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    bkv_db *db;
    int ec = open_db(pos[0], 0, 0, &db);
    if (ec) return ec;
    char *s = bkv_property(db, "bloomkv.stats");
    if (s) fputs(s, stdout);
    bkv_free(s);
    bkv_close(db);
    return 0;
}

int bkv_cli_compact(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    bkv_db *db;
    int ec = open_db(pos[0], 0, 0, &db);
    if (ec) return ec;
    int rc = bkv_compact(db);
    if (rc) return fail_db(db, "compact", rc);
    bkv_close(db);
    return 0;
}

static void print_problem(void *arg, const char *problem) {
    (void)arg;
    printf("%s\n", problem);
}

int bkv_cli_check(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    int rc = bkv_check(pos[0], print_problem, NULL);
    if (rc == BKV_OK) {
        printf("%s: no problems found\n", pos[0]);
        return 0;
    }
    fprintf(stderr, "bloomkv: check: %s has problems\n", pos[0]);
    return EXIT_ERROR;
}

int bkv_cli_dump_sst(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    return bkv_dump_table(pos[0], o.entries, stdout) ? EXIT_ERROR : 0;
}
