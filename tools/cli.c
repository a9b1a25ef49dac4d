/* The database subcommands of `bloomkv`. Keys and values are taken and
 * printed as they are, or as hex with --hex (for arbitrary bytes). Every
 * failure prints one line on stderr. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bloomkv.h"
#include "cli.h"
#include "options.h"

enum { EXIT_NOTFOUND = 1, EXIT_USAGE = 2, EXIT_ERROR = 3 };

/* Which of the keys and values a command takes and prints as hex digits:
 * --hex both, --key-hex or --value-hex one. */
enum { HEX_KEYS = 1, HEX_VALUES = 2 };

typedef struct cli_opts {
    int hex; /* HEX_KEYS | HEX_VALUES */
    const char *from, *to;
    long limit;
    int entries;
    int deletes; /* load: a line holding only a key deletes it */
    int sync;
    int value_index; /* BKV_VALUE_INDEX_* for a database being created; -1: not asked */
    int stats;
    int wal_recovery;
    int move;
    int any, all; /* find-value: --any (OR) or --all (AND, the default) */
    int count, keys_only;  /* find-value, scan: print the number of results / only their keys */
    int json;              /* find-value, scan: one JSON object per line */
    int prefix;            /* find-value: the values are prefixes (a prefix:N database) */
    const char *prefix_key; /* scan: only keys starting with it (--prefix P) */
    int reverse;           /* scan: in descending key order */
    int continue_on_error; /* find-value: skip unreadable parts, report them at the end */
    const char *after;     /* find-value: resume after this key */
    const char *terms;     /* put/load: the built-in terms extractor of a new value index */
    int npos; /* positional arguments given */
} cli_opts;

/* A command taking a variable number of arguments (find-value's values)
 * takes at most this many. */
#define MAX_POSITIONAL 65

/* --value-index names, as the "bloomkv.value-index" property spells them. */
static const char *const shape_names[] = {
    [BKV_VALUE_INDEX_FLAT] = "flat", [BKV_VALUE_INDEX_HIERARCHY] = "hierarchy", [BKV_VALUE_INDEX_BITSLICED] = "bitsliced",
    [BKV_VALUE_INDEX_PAGED] = "paged"};

/* flags: the long options a command accepts; any other is refused by name. */
typedef struct usage_text {
    const char *cmd, *args, *help, *flags;
} usage_text;

#define RECOVERY_FLAG "[--wal-recovery absolute|point-in-time|skip-damaged]"

static const usage_text usages[] = {
    {"put", "DB KEY VALUE [--hex|--key-hex|--value-hex] [--sync] [--value-index flat|hierarchy|bitsliced|paged [--terms NAME]] " RECOVERY_FLAG,
     "store VALUE under KEY (creates DB if missing, with a value index when asked; --terms: found by the terms "
     "of values rather than whole values: words, field:SEP:N, prefix:N or json:FIELD[.FIELD...], recorded in DB)",
     "hex key-hex value-hex sync value-index terms wal-recovery"},
    {"get", "DB KEY [KEY...] [--json] [--hex|--key-hex|--value-hex] " RECOVERY_FLAG,
     "print the value of KEY; with several keys (or '-': one a line from stdin, escaped as scan prints them) "
     "key<TAB>value lines, absent keys named on stderr; --json: a {\"key\":...,\"value\":...} line a key, the "
     "value null when absent; exit 1 if any is absent", "json hex key-hex value-hex wal-recovery"},
    {"delete", "DB KEY [KEY...] [--hex] [--sync] " RECOVERY_FLAG,
     "delete the keys (or '-': one a line from stdin), all in one atomic batch", "hex sync wal-recovery"},
    {"scan", "DB [--from K] [--to K | --prefix P] [--reverse] [--limit N] [--keys-only|--count] [--json] "
             "[--hex|--key-hex|--value-hex] [--continue-on-error] " RECOVERY_FLAG,
     "print key<TAB>value lines in key order (--reverse: descending), from K (inclusive) to K (exclusive), or the "
     "keys starting with P; at most N, only the keys, or only their number; --json prints {\"key\":...,\"value\":...} "
     "lines; in text, \\\\, tab, newline, carriage return and other control bytes are printed as \\\\, \\t, \\n, "
     "\\r and \\xNN (load reads them back); --continue-on-error: parts that cannot be read are passed over "
     "(every key in their ranges left out, so nothing printed is stale) and reported at the end (exit 3)",
     "from to prefix reverse limit keys-only count json hex key-hex value-hex continue-on-error wal-recovery"},
    {"load", "DB FILE [--deletes] [--hex|--key-hex|--value-hex] [--value-index flat|hierarchy|bitsliced|paged [--terms NAME]] " RECOVERY_FLAG,
     "bulk load key<TAB>value lines from FILE ('-' for stdin; the escapes scan prints), committed 1000 at a time; "
     "on a bad line, an error "
     "or a signal it says how many records were committed and where it stopped; --deletes: a line holding only a key "
     "(no tab) deletes it",
     "deletes hex key-hex value-hex value-index terms wal-recovery"},
    {"find-value",
     "DB VALUE [VALUE...] [--all|--any] [--prefix] [--limit N] [--after KEY] [--keys-only|--count] [--json] [--hex|--key-hex|--value-hex] "
     "[--stats] [--continue-on-error] " RECOVERY_FLAG,
     "print key<TAB>value for every key whose value is VALUE (needs a value index), in key order; with several "
     "values, keys whose value holds all of them (--all, the default) or any (--any); at most N results, only "
     "keys after KEY (to page: pass the last key printed), only the keys, or only their number; --prefix: values "
     "starting with VALUE (a database made with --terms prefix:N, VALUE at most N bytes); --json prints "
     "{\"key\":...,\"value\":...} lines (bytes that are not UTF-8 as \\u00XX); exit 1 if none; "
     "--stats reports on stderr what the search touched; --continue-on-error: parts of tables that cannot be read "
     "are skipped, the other results printed, and the first error reported at the end (exit 3)",
     "all any prefix limit after keys-only count json hex key-hex value-hex stats continue-on-error wal-recovery"},
    {"value-index", "build DB --shape flat|hierarchy|bitsliced|paged [--terms NAME] | drop DB",
     "build: give an existing database a value index (or finish one: tables written before it are rewritten with "
     "value filters, in place; safe to interrupt and run again), searchable meanwhile; drop: remove it",
     "shape value-index terms wal-recovery"},
    {"stats", "DB [--json] [--all] " RECOVERY_FLAG,
     "what the database holds: tables, bytes and entries by level, the write-ahead log, an estimate of the live keys, "
     "disk use, the value index "
     "(--json: one JSON object; --all: the engine's full report, with the counters of this command's own open)",
     "json all wal-recovery"},
    {"compact", "DB [--from K] [--to K] [--hex] " RECOVERY_FLAG,
     "compact the keys from --from to --to (as in scan: at least every key K with from <= K < to; without "
     "them, everything) down to the deepest level holding them, and print the tables before and after",
     "from to hex wal-recovery"},
    {"checkpoint", "DB DIR " RECOVERY_FLAG,
     "write a consistent copy of DB into DIR (must not exist): tables hard-linked, a database of its own; DB is "
     "only read, and may be open in another process",
     "wal-recovery"},
    {"destroy", "DB", "delete the database: every file named as bloomkv names its files, then DB unless other files "
     "are in it; refused (exit 2, nothing removed) for a symbolic link or a directory that is not a database", ""},
    {"repair", "DB", "keep every row that can still be read: a lost CURRENT pointed at the newest intact manifest, "
     "missing tables dropped, damaged tables rewritten from their intact blocks, damaged WALs read around the damage; "
     "the originals go to DB/lost/ and each is named (exit 3 if no manifest is intact)", ""},
    {"make-table", "FILE INPUT [--hex|--key-hex|--value-hex] [--value-index flat|hierarchy|bitsliced|paged [--terms NAME]]",
     "write a table file for `ingest` from key<TAB>value lines of INPUT ('-' for stdin) in strictly increasing key "
     "order; --value-index (and --terms): for a database that has one", "hex key-hex value-hex value-index terms"},
    {"ingest", "DB FILE [--move] [--value-index flat|hierarchy|bitsliced|paged] " RECOVERY_FLAG,
     "add a table made by make-table (or bkv_table_writer) to DB at once, without the WAL (creates DB if missing); "
     "--move links it in and removes FILE instead of copying it", "move value-index wal-recovery"},
    {"check", "DB [--json]", "verify every checksum and invariant of every file; exit 3 on a problem (--json: one "
     "{\"problems\":[...],\"ok\":...} object)", "json"},
    {"dump-sst", "FILE [--entries] [--json]",
     "describe one table file: properties, filter, optionally entries (--json: one object, then an object a line "
     "per entry)", "entries json"},
};

static const usage_text *usage_of(const char *cmd) {
    for (size_t i = 0; i < sizeof usages / sizeof usages[0]; i++)
        if (strcmp(usages[i].cmd, cmd) == 0) return &usages[i];
    return NULL;
}

static void usage(FILE *out, const char *cmd) {
    const usage_text *u = usage_of(cmd);
    if (u) fprintf(out, "usage: bloomkv %s %s\n  %s\n  ('--' ends the options: later arguments starting with '-' are keys or values)\n",
                   cmd, u->args, u->help);
}

static int accepts(const usage_text *u, const char *flag) { return bkv_flag_listed(u->flags, flag); }

static int usage_error(const char *cmd, const char *fmt, const char *what) {
    fprintf(stderr, "bloomkv %s: ", cmd);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    usage(stderr, cmd);
    return -1;
}

/* Parses the flags and returns the positional arguments in pos; -1 after
 * printing why on a usage error, 1 when help was asked for (and printed). */
static int parse(int argc, char **argv, cli_opts *o, char **pos, int npos) {
    static const struct option opts[] = {{"hex", no_argument, 0, 'x'},   {"key-hex", no_argument, 0, 'K'},
                                         {"value-hex", no_argument, 0, 'V'},   {"from", required_argument, 0, 'f'},
                                         {"to", required_argument, 0, 't'}, {"limit", required_argument, 0, 'l'},
                                         {"entries", no_argument, 0, 'e'}, {"deletes", no_argument, 0, 'D'}, {"sync", no_argument, 0, 's'},
                                         {"value-index", required_argument, 0, 'v'},
                                         {"shape", required_argument, 0, 'v'},
                                         {"stats", no_argument, 0, 'S'},   {"wal-recovery", required_argument, 0, 'w'},
                                         {"move", no_argument, 0, 'm'},     {"all", no_argument, 0, 'a'},
                                         {"any", no_argument, 0, 'y'},
                                         {"after", required_argument, 0, 'A'},
                                         {"terms", required_argument, 0, 'T'},
                                         {"keys-only", no_argument, 0, 'k'}, {"count", no_argument, 0, 'c'},
                                         {"json", no_argument, 0, 'J'},
                                         {"prefix", optional_argument, 0, 'P'},
                                         {"reverse", no_argument, 0, 'R'},
                                         {"continue-on-error", no_argument, 0, 'E'},
                                         {"help", no_argument, 0, 'h'},    {0, 0, 0, 0}};
    const char *cmd = argv[0];
    const usage_text *u = usage_of(cmd);
    memset(o, 0, sizeof *o);
    o->limit = -1;
    o->value_index = -1;
    if (bkv_exact_options("bloomkv", argc, argv, opts, u->flags)) {
        usage(stderr, cmd);
        return -1;
    }
    optind = 1;
    opterr = 0;
    int c, idx;
    while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
        if (c == 'h') {
            usage(stdout, cmd);
            return 1;
        }
        if (c == '?' || c == ':') {
            const char *bad = argv[optind - 1];
            if (optopt && strncmp(bad, "--", 2) == 0 && strchr(bad, '=') == NULL)
                return usage_error(cmd, "option %s needs a value", bad);
            return usage_error(cmd, "unknown option %s", bad);
        }
        if (!accepts(u, opts[idx].name)) return usage_error(cmd, "--%s is not an option of this command", opts[idx].name);
        switch (c) {
        case 'x': o->hex = HEX_KEYS | HEX_VALUES; break;
        case 'K': o->hex |= HEX_KEYS; break;
        case 'V': o->hex |= HEX_VALUES; break;
        case 'f': o->from = optarg; break;
        case 't': o->to = optarg; break;
        case 'l': {
            char *end;
            errno = 0;
            o->limit = strtol(optarg, &end, 10);
            if (!*optarg || *end || o->limit < 0 || errno == ERANGE)
                return usage_error(cmd, "--limit takes a count from 0 to 9223372036854775807, not '%s'", optarg);
            break;
        }
        case 'e': o->entries = 1; break;
        case 'D': o->deletes = 1; break;
        case 's': o->sync = 1; break;
        case 'S': o->stats = 1; break;
        case 'm': o->move = 1; break;
        case 'a': o->all = 1; break;
        case 'y': o->any = 1; break;
        case 'A': o->after = optarg; break;
        case 'T': o->terms = optarg; break;
        case 'k': o->keys_only = 1; break;
        case 'c': o->count = 1; break;
        case 'J': o->json = 1; break;
        case 'P':
            if (optarg) o->prefix_key = optarg;
            else o->prefix = 1;
            break;
        case 'R': o->reverse = 1; break;
        case 'E': o->continue_on_error = 1; break;
        case 'v':
            o->value_index = -1;
            for (int shape = BKV_VALUE_INDEX_FLAT; shape <= BKV_VALUE_INDEX_PAGED; shape++)
                if (strcmp(optarg, shape_names[shape]) == 0) o->value_index = shape;
            if (o->value_index < 0)
                return usage_error(cmd, "--value-index (--shape) is flat, hierarchy, bitsliced or paged, not '%s'", optarg);
            break;
        case 'w':
            if (strcmp(optarg, "absolute") == 0) o->wal_recovery = BKV_WAL_RECOVERY_ABSOLUTE;
            else if (strcmp(optarg, "point-in-time") == 0) o->wal_recovery = BKV_WAL_RECOVERY_POINT_IN_TIME;
            else if (strcmp(optarg, "skip-damaged") == 0) o->wal_recovery = BKV_WAL_RECOVERY_SKIP_DAMAGED;
            else return usage_error(cmd, "--wal-recovery is absolute, point-in-time or skip-damaged, not '%s'", optarg);
            break;
        }
    }
    /* npos < 0: at least -npos, at most MAX_POSITIONAL. */
    int given = argc - optind;
    if (npos >= 0 ? given != npos : given < -npos || given > MAX_POSITIONAL) {
        if (npos >= 0)
            fprintf(stderr, "bloomkv %s: expects %d argument%s, got %d\n", cmd, npos, npos == 1 ? "" : "s", given);
        else
            fprintf(stderr, "bloomkv %s: expects %d to %d arguments, got %d\n", cmd, -npos, MAX_POSITIONAL, given);
        usage(stderr, cmd);
        return -1;
    }
    for (int i = 0; i < given; i++) pos[i] = argv[optind + i];
    o->npos = given;
    return 0;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes an argument (hex when asked: pairs of [0-9a-fA-F] after an
 * optional 0x, nothing else) into a malloc'd buffer; -1 (and *out NULL) on
 * bad input or no memory. */
int bkv_cli_decode(const char *s, int hex, char **out, size_t *len) {
    size_t n = strlen(s);
    *out = NULL;
    if (!hex) {
        *out = strdup(s);
        *len = n;
        return *out ? 0 : -1;
    }
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        n -= 2;
    }
    if (n % 2) return -1;
    *out = malloc(n / 2 + 1);
    if (!*out) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(*out);
            *out = NULL;
            return -1;
        }
        (*out)[i] = (char)(hi << 4 | lo);
    }
    *len = n / 2;
    return 0;
}

/* --from and --to, decoded (NULL when absent); -1 after saying why. */
/* The engine's key order: bytes compared unsigned, a prefix first. */
static int key_order(const char *a, size_t al, const char *b, size_t bl) {
    size_t common = al < bl ? al : bl;
    int c = common ? memcmp(a, b, common) : 0;
    return c ? c : (al > bl) - (al < bl);
}

static int decode_range(const cli_opts *o, const char *cmd, char **from, size_t *fl, char **to, size_t *tl) {
    *from = *to = NULL;
    *fl = *tl = 0;
    int hex = o->hex & HEX_KEYS;
    if ((o->from && bkv_cli_decode(o->from, hex, from, fl)) || (o->to && bkv_cli_decode(o->to, hex, to, tl))) {
        free(*from); /* decoded before a bad --to */
        fprintf(stderr, "bloomkv: %s: bad hex\n", cmd);
        return -1;
    }
    /* A range whose start is after its end is a mistake (the two swapped),
     * not an empty result. */
    if (o->from && o->to && key_order(*from, *fl, *to, *tl) > 0) {
        free(*from);
        free(*to);
        fprintf(stderr, "bloomkv: %s: --from is after --to\n", cmd);
        return -1;
    }
    return 0;
}

/* Hex digits, or text in which the bytes that would break a line of
 * key<TAB>value apart are escaped C-style: \\, \t, \n, \r and \xNN for
 * other control bytes; every other byte (UTF-8 too) as it is. load reads
 * the same escapes back (unescape), so scan | load round-trips. */
static void print_bytes(FILE *f, const void *p, size_t n, int hex) {
    const unsigned char *b = p;
    if (hex) {
        for (size_t i = 0; i < n; i++) fprintf(f, "%02x", b[i]);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = b[i];
        if (c == '\\') fputs("\\\\", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else putc(c, f);
    }
}

/* What print_bytes escapes, read back into a malloc'd buffer: 0, or -1 (and
 * *out NULL) on a backslash that starts no escape, or no memory. */
static int unescape(const char *s, char **out, size_t *len) {
    size_t n = strlen(s), j = 0;
    if (!(*out = malloc(n + 1))) return -1;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\\') {
            char e = s[++i];
            if (e == '\\' || e == 't' || e == 'n' || e == 'r') c = e == 't' ? '\t' : e == 'n' ? '\n' : e == 'r' ? '\r' : '\\';
            else if (e == 'x' && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
                c = (char)(hex_digit(s[i + 1]) << 4 | hex_digit(s[i + 2]));
                i += 2;
            } else {
                free(*out);
                *out = NULL;
                return -1;
            }
        }
        (*out)[j++] = c;
    }
    *len = j;
    return 0;
}

/* A refused argument (BKV_INVALID) is a usage error (exit 2); anything
 * else that failed is the database's or the system's (exit 3). */
static int exit_status(int rc) { return rc == BKV_INVALID ? EXIT_USAGE : EXIT_ERROR; }

/* How a command opens its database: reading commands change nothing
 * (no LOCK, no WAL or manifest rewritten, no flush: they work beside a
 * process that has it open, and on read-only media). */
enum { OPEN_READ, OPEN_WRITE, OPEN_CREATE };

/* Opens the database. A value index is chosen only when the database is
 * created (value_index >= 0); asking an existing database for another
 * shape, or for an index it lacks, is refused rather than done silently. */
static int open_db(const char *path, int mode, const cli_opts *co, bkv_db **db) {
    bkv_options o;
    bkv_options_init(&o);
    o.wal_recovery = co->wal_recovery;
    o.read_only = mode == OPEN_READ;
    char current[4096];
    snprintf(current, sizeof current, "%s/CURRENT", path);
    int is_new = mode == OPEN_CREATE && access(current, F_OK) != 0 && (errno == ENOENT || errno == ENOTDIR);
    o.create_if_missing = is_new;
    if (is_new && co->value_index >= 0) o.value_index = co->value_index;
    if (is_new && co->terms && co->value_index < 0) {
        fprintf(stderr, "bloomkv: --terms names the extractor of a value index: give --value-index too\n");
        return EXIT_USAGE;
    }
    o.value_terms_name = co->terms;
    int rc = bkv_open(path, &o, db);
    if (rc == BKV_OK && !is_new && co->value_index >= 0) {
        char *vi = bkv_property(*db, "bloomkv.value-index");
        const char *want = shape_names[co->value_index];
        char have[32] = "no";
        if (vi && sscanf(vi, "value index: %31[a-z]", have) != 1) snprintf(have, sizeof have, "no");
        bkv_free(vi);
        if (strcmp(have, want) != 0) {
            fprintf(stderr, "bloomkv: %s has %s%s value index; not changed to %s (`bloomkv value-index build %s "
                            "--shape %s` changes it)\n", path, strcmp(have, "no") == 0 ? "" : "a ", have, want, path, want);
            bkv_close(*db);
            *db = NULL;
            return EXIT_USAGE;
        }
    }
    if (rc) {
        /* The engine's message names its C option; the tool's command creates. */
        const char *msg = *bkv_errmsg(NULL) ? bkv_errmsg(NULL) : bkv_strerror(rc);
        int missing = strstr(msg, "does not exist") != NULL;
        if ((missing || strstr(msg, "create_if_missing")) && !strstr(msg, "repair"))
            fprintf(stderr, "bloomkv: cannot open %s: %s (`bloomkv put` or `bloomkv load` makes a database)\n", path,
                    missing ? "it does not exist" : "no database there");
        else fprintf(stderr, "bloomkv: cannot open %s: %s\n", path, msg);
        return EXIT_ERROR;
    }
    return 0;
}


static int fail_db(bkv_db *db, const char *what, int rc) {
    const char *detail = bkv_errmsg(NULL); /* this thread's last error: the call that returned rc */
    fprintf(stderr, "bloomkv: %s: %s%s%s\n", what, bkv_strerror(rc), *detail ? ": " : "", detail);
    bkv_close(db);
    return exit_status(rc);
}

/* Refuses, before anything is opened or created, a key or value the
 * engine would not store. */
static int entry_too_long(const char *cmd, size_t kl, size_t vl) {
    if (kl <= BKV_MAX_KEY_SIZE && vl <= BKV_MAX_VALUE_SIZE) return 0;
    fprintf(stderr, "bloomkv: %s: the %s is %zu bytes; at most %zu\n", cmd, kl > BKV_MAX_KEY_SIZE ? "key" : "value",
            kl > BKV_MAX_KEY_SIZE ? kl : vl, kl > BKV_MAX_KEY_SIZE ? (size_t)BKV_MAX_KEY_SIZE : (size_t)BKV_MAX_VALUE_SIZE);
    return 1;
}

#define PARSE_OR_USAGE(n)                                       \
    cli_opts o;                                                 \
    char *pos[MAX_POSITIONAL];                                  \
    switch (parse(argc, argv, &o, pos, n)) {                    \
    case 0: break;                                              \
    case 1: return 0;                                           \
    default: return EXIT_USAGE;                                 \
    }

int bkv_cli_put(int argc, char **argv) {
    PARSE_OR_USAGE(3);
    char *k = NULL, *v = NULL;
    size_t kl, vl;
    if (bkv_cli_decode(pos[1], o.hex & HEX_KEYS, &k, &kl) || bkv_cli_decode(pos[2], o.hex & HEX_VALUES, &v, &vl)) {
        free(k);
        fprintf(stderr, "bloomkv: put: bad hex\n");
        return EXIT_USAGE;
    }
    if (entry_too_long("put", kl, vl)) {
        free(k);
        free(v);
        return EXIT_USAGE;
    }
    bkv_db *db;
    int ec = open_db(pos[0], OPEN_CREATE, &o, &db);
    if (!ec) {
        bkv_write_options wo = {.size = sizeof(bkv_write_options), .sync = o.sync};
        int rc = bkv_put(db, &wo, k, kl, v, vl);
        ec = rc ? fail_db(db, "put", rc) : (bkv_close(db), 0);
    }
    free(k);
    free(v);
    return ec;
}

/* The keys a get or delete names: its arguments after DB, or with "-"
 * as the only one, the lines of stdin (escaped as scan prints them).
 * Decoded into a malloc'd array of malloc'd keys; -1 after saying why. */
typedef struct key_list {
    char **keys;
    size_t *lens;
    size_t n, cap;
} key_list;

static void key_list_free(key_list *kl) {
    for (size_t i = 0; i < kl->n; i++) free(kl->keys[i]);
    free(kl->keys);
    free(kl->lens);
}

static int key_list_add(key_list *kl, char *k, size_t len) {
    if (kl->n == kl->cap) {
        size_t cap = kl->cap ? kl->cap * 2 : 16;
        char **keys = realloc(kl->keys, cap * sizeof *keys);
        if (keys) kl->keys = keys;
        size_t *lens = keys ? realloc(kl->lens, cap * sizeof *lens) : NULL;
        if (!lens) {
            free(k);
            return -1;
        }
        kl->lens = lens;
        kl->cap = cap;
    }
    kl->keys[kl->n] = k;
    kl->lens[kl->n++] = len;
    return 0;
}

static int read_keys(const cli_opts *o, char **pos, const char *cmd, key_list *kl) {
    memset(kl, 0, sizeof *kl);
    int from_stdin = o->npos == 2 && strcmp(pos[1], "-") == 0;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    for (int i = 1; from_stdin || i < o->npos; i++) {
        const char *text = pos[i];
        if (from_stdin) {
            ssize_t n = getline(&line, &cap, stdin);
            if (n < 0) break;
            lineno++;
            if (n && line[n - 1] == '\n') line[--n] = 0;
            if (n && line[n - 1] == '\r') line[--n] = 0;
            if (n == 0) continue;
            text = line;
        }
        char *k;
        size_t len;
        int hex = o->hex & HEX_KEYS;
        int bad = hex || !from_stdin ? bkv_cli_decode(text, hex, &k, &len) : unescape(text, &k, &len);
        if (bad || key_list_add(kl, k, len)) {
            if (from_stdin) fprintf(stderr, "bloomkv: %s: stdin line %ld: %s\n", cmd, lineno, bad ? "bad key" : "out of memory");
            else fprintf(stderr, "bloomkv: %s: %s\n", cmd, bad ? "bad hex" : "out of memory");
            free(line);
            key_list_free(kl);
            return -1;
        }
    }
    free(line);
    return 0;
}

static void print_entry(const cli_opts *o, const void *k, size_t kl, const void *v, size_t vl);

int bkv_cli_get(int argc, char **argv) {
    PARSE_OR_USAGE(-2);
    key_list keys;
    if (read_keys(&o, pos, "get", &keys)) return EXIT_USAGE;
    bkv_db *db;
    int ec = open_db(pos[0], OPEN_READ, &o, &db);
    /* One key: its value alone. Several: key<TAB>value lines, in the order
     * asked; absent keys are named on stderr and make the exit 1. --json:
     * an object a key, whose value is null when the key is absent. */
    int several = o.npos > 2 || strcmp(pos[1], "-") == 0;
    size_t missing = 0;
    for (size_t i = 0; !ec && i < keys.n; i++) {
        void *v;
        size_t vl;
        int rc = bkv_get(db, NULL, keys.keys[i], keys.lens[i], &v, &vl);
        if (rc != BKV_OK && rc != BKV_NOTFOUND) {
            ec = fail_db(db, "get", rc); /* closes it */
            break;
        }
        missing += rc == BKV_NOTFOUND;
        if (o.json) {
            print_entry(&o, keys.keys[i], keys.lens[i], rc == BKV_OK ? v : NULL, vl);
        } else if (rc == BKV_OK) {
            if (several) {
                print_bytes(stdout, keys.keys[i], keys.lens[i], o.hex & HEX_KEYS);
                putchar('\t');
            }
            print_bytes(stdout, v, vl, o.hex & HEX_VALUES);
            putchar('\n');
        } else {
            fprintf(stderr, "bloomkv: get: not found%s", several ? ": " : "\n");
            if (several) {
                print_bytes(stderr, keys.keys[i], keys.lens[i], o.hex & HEX_KEYS);
                fputc('\n', stderr);
            }
        }
        if (rc == BKV_OK) bkv_free(v);
    }
    if (!ec) {
        bkv_close(db);
        if (missing) ec = EXIT_NOTFOUND;
    }
    key_list_free(&keys);
    return ec;
}

int bkv_cli_delete(int argc, char **argv) {
    PARSE_OR_USAGE(-2);
    key_list keys;
    if (read_keys(&o, pos, "delete", &keys)) return EXIT_USAGE;
    bkv_db *db;
    int ec = open_db(pos[0], OPEN_WRITE, &o, &db);
    if (!ec) {
        /* Every key in one batch: all deleted, or none. */
        bkv_batch *b = bkv_batch_create();
        int rc = b ? BKV_OK : BKV_NOMEM;
        for (size_t i = 0; !rc && i < keys.n; i++) rc = bkv_batch_delete(b, keys.keys[i], keys.lens[i]);
        bkv_write_options wo = {.size = sizeof(bkv_write_options), .sync = o.sync};
        if (!rc) rc = bkv_write(db, &wo, b);
        bkv_batch_destroy(b);
        ec = rc ? fail_db(db, "delete", rc) : (bkv_close(db), 0);
    }
    key_list_free(&keys);
    return ec;
}

static int scan_args(int argc, char **argv);

/* The first key after every key starting with p (n bytes), in a malloc'd
 * *end: its last byte below 0xff, raised by one; NULL when p is all 0xff
 * (no end). -1 out of memory. */
static int prefix_end(const char *p, size_t n, char **end, size_t *len) {
    *end = NULL;
    *len = 0;
    while (n > 0 && (unsigned char)p[n - 1] == 0xff) n--;
    if (n == 0) return 0;
    if (!(*end = malloc(n))) return -1;
    memcpy(*end, p, n);
    (*end)[n - 1] = (char)((unsigned char)p[n - 1] + 1);
    *len = n;
    return 0;
}

int bkv_cli_scan(int argc, char **argv) {
    /* scan's --prefix takes a value; getopt takes an optional one only
     * joined ("--prefix=P", find-value's --prefix takes none), so a value
     * after it is joined here. */
    char **args = malloc(((size_t)argc + 1) * sizeof *args), *joined = NULL;
    if (!args) return EXIT_ERROR;
    int nargs = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            while (i < argc) args[nargs++] = argv[i++];
            break;
        }
        if (strcmp(argv[i], "--prefix") == 0 && i + 1 < argc && !joined) {
            size_t n = strlen(argv[i + 1]) + sizeof "--prefix=";
            if (!(joined = malloc(n))) {
                free(args);
                return EXIT_ERROR;
            }
            snprintf(joined, n, "--prefix=%s", argv[++i]);
            args[nargs++] = joined;
            continue;
        }
        args[nargs++] = argv[i];
    }
    args[nargs] = NULL;
    int ec = scan_args(nargs, args);
    free(joined);
    free(args);
    return ec;
}

static int scan_args(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    const char *bad = o.prefix_key && (o.from || o.to) ? "--prefix takes the place of --from and --to"
                      : o.prefix                       ? "--prefix takes the prefix: --prefix P"
                      : o.count && o.keys_only         ? "--count and --keys-only do not go together"
                                                       : NULL;
    if (bad) {
        usage_error(argv[0], "%s", bad);
        return EXIT_USAGE;
    }
    char *from = NULL, *to = NULL;
    size_t fl = 0, tl = 0;
    if (o.prefix_key) {
        if (bkv_cli_decode(o.prefix_key, o.hex & HEX_KEYS, &from, &fl) || prefix_end(from, fl, &to, &tl)) {
            free(from);
            fprintf(stderr, "bloomkv: scan: bad hex\n");
            return EXIT_USAGE;
        }
    } else if (decode_range(&o, "scan", &from, &fl, &to, &tl)) {
        return EXIT_USAGE;
    }
    bkv_db *db;
    int ec = open_db(pos[0], OPEN_READ, &o, &db);
    if (!ec) {
        bkv_read_options ro;
        bkv_read_options_init(&ro);
        ro.fill_cache = 0;
        ro.lower_bound = from;
        ro.lower_bound_len = fl;
        ro.upper_bound = to;
        ro.upper_bound_len = tl;
        ro.skip_damaged = o.continue_on_error;
        bkv_iter *it;
        int rc = bkv_iter_create(db, &ro, &it);
        if (rc) {
            ec = fail_db(db, "scan", rc);
        } else {
            long n = 0;
            if (o.reverse) bkv_iter_seek_to_last(it);
            else bkv_iter_seek_to_first(it);
            for (; bkv_iter_valid(it) && (o.limit < 0 || n < o.limit); n++) {
                size_t kl, vl;
                const void *k = bkv_iter_key(it, &kl), *v = bkv_iter_value(it, &vl);
                if (!o.count) print_entry(&o, k, kl, v, vl);
                if (o.reverse) bkv_iter_prev(it);
                else bkv_iter_next(it);
            }
            if (o.count) printf(o.json ? "{\"count\":%ld}\n" : "%ld\n", n);
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

/* Set by SIGINT/SIGTERM during a load: the loop stops at the next line,
 * commits what it read and says so, instead of dying mid-batch. */
static volatile sig_atomic_t load_signal;

static void on_load_signal(int sig) { load_signal = sig; }

/* What a load got through, for its report. */
typedef struct load_state {
    bkv_db *db;            /* opened (or created) at the first commit: bad input creates nothing */
    const char *path;
    const cli_opts *opts;
    int open_failed;       /* open_db's exit status, once it failed */
    bkv_batch *batch;
    long committed, pending, lineno;
    long deleted, pending_deletes; /* of committed and pending: lines that delete */
    long committed_through; /* input line of the last committed record */
} load_state;

static int load_commit(load_state *ls) {
    if (!ls->db && (ls->open_failed = open_db(ls->path, OPEN_CREATE, ls->opts, &ls->db))) return BKV_IOERROR;
    int rc = bkv_write(ls->db, NULL, ls->batch);
    if (rc == BKV_OK) {
        ls->committed += ls->pending;
        ls->deleted += ls->pending_deletes;
        ls->committed_through = ls->lineno;
    }
    ls->pending = ls->pending_deletes = 0;
    bkv_batch_clear(ls->batch);
    return rc;
}

/* A load stopped early: exit 2 (usage) only when nothing was written, so
 * a script can tell "fix the input and rerun" from "partly loaded". */
static int load_stopped(const load_state *ls, const char *why) {
    if (ls->committed)
        fprintf(stderr, "bloomkv: load: %s; %ld records committed (input lines 1-%ld), stopped at line %ld\n", why,
                ls->committed, ls->committed_through, ls->lineno);
    else fprintf(stderr, "bloomkv: load: %s; nothing committed, stopped at line %ld\n", why, ls->lineno);
    return ls->committed ? EXIT_ERROR : EXIT_USAGE;
}

/* Decodes one key or value of an input line, hex or in scan's escapes. */
static int decode_field(const char *text, int hex, char **out, size_t *len, const char *what, long lineno, char *why,
                        size_t whylen) {
    if (!(hex ? bkv_cli_decode(text, 1, out, len) : unescape(text, out, len))) return 0;
    snprintf(why, whylen, "line %ld: the %s %s", lineno, what,
             hex ? "is not hex" : "has a backslash that starts no escape (\\\\ \\t \\n \\r \\xNN)");
    return -1;
}

/* One input line (its newline included in n), decoded into malloc'd *k
 * and *v: 1 for key<TAB>value, 2 for a line holding only a key when
 * deletes are allowed (*v NULL), 0 for an empty line, or -1 with the
 * reason in why. hex: HEX_KEYS | HEX_VALUES. */
static int parse_record(char *line, ssize_t n, int hex, int deletes, long lineno, char **k, size_t *kl, char **v,
                        size_t *vl, char *why, size_t whylen) {
    if (n && line[n - 1] == '\n') line[--n] = 0;
    if (n && line[n - 1] == '\r') line[--n] = 0;
    if (n == 0) return 0;
    char *tab = strchr(line, '\t');
    *v = NULL;
    *vl = 0;
    if (!tab && !deletes) {
        snprintf(why, whylen, "line %ld has no tab (a line of a key alone deletes it with --deletes)", lineno);
        return -1;
    }
    if (tab) *tab = 0;
    if (decode_field(line, hex & HEX_KEYS, k, kl, "key", lineno, why, whylen)) return -1;
    if (!tab) return 2;
    if (decode_field(tab + 1, hex & HEX_VALUES, v, vl, "value", lineno, why, whylen)) {
        free(*k);
        return -1;
    }
    return 1;
}

static FILE *open_input(const char *cmd, const char *path) {
    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!in) fprintf(stderr, "bloomkv: %s: cannot open %s: %s\n", cmd, path, strerror(errno));
    return in;
}

int bkv_cli_load(int argc, char **argv) {
    PARSE_OR_USAGE(2);
    FILE *in = open_input("load", pos[1]);
    if (!in) return EXIT_ERROR;
    long total = 0;
    if (in != stdin && fseek(in, 0, SEEK_END) == 0) {
        total = ftell(in);
        rewind(in);
    }
    int bar = isatty(STDERR_FILENO);
    load_state ls = {.path = pos[0], .opts = &o};
    int ec = 0;
    if (!(ls.batch = bkv_batch_create())) {
        if (in != stdin) fclose(in);
        fprintf(stderr, "bloomkv: load: out of memory\n");
        return EXIT_ERROR;
    }
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_load_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    char *line = NULL, why[128] = "";
    size_t cap = 0;
    ssize_t n;
    int rc = BKV_OK;
    while (!load_signal && (n = getline(&line, &cap, in)) >= 0) {
        ls.lineno++;
        char *k, *v;
        size_t kl, vl;
        int got = parse_record(line, n, o.hex, o.deletes, ls.lineno, &k, &kl, &v, &vl, why, sizeof why);
        if (got < 0) break;
        if (got == 0) continue;
        if (entry_too_long("load", kl, vl)) snprintf(why, sizeof why, "line %ld: too long", ls.lineno);
        else if (got == 2) rc = bkv_batch_delete(ls.batch, k, kl);
        else rc = bkv_batch_put(ls.batch, k, kl, v, vl);
        ls.pending_deletes += got == 2;
        free(k);
        free(v);
        if (rc || *why) break;
        if (++ls.pending >= 1000 && (rc = load_commit(&ls))) break;
        if (bar && (ls.committed + ls.pending) % 10000 == 0)
            progress(ls.committed + ls.pending, total, in != stdin ? ftell(in) : 0);
    }
    /* A signal interrupts a blocked read: that is the signal, not a read error. */
    int read_error = !load_signal && ferror(in) ? errno : 0;
    /* At the end of the input, or on a signal, the lines read are whole:
     * commit them. After a bad line or a read error the open batch is
     * dropped, so a bad line early in the input writes nothing. */
    if (!rc && !*why && !read_error && ls.pending) rc = load_commit(&ls);
    if (bar) {
        progress(ls.committed, total, in != stdin ? ftell(in) : total);
        fputc('\n', stderr);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (ls.open_failed) {
        ec = ls.open_failed; /* open_db said why */
    } else if (rc) {
        const char *detail = bkv_errmsg(NULL);
        snprintf(why, sizeof why, "%s%s%s", bkv_strerror(rc), *detail ? ": " : "", detail);
        load_stopped(&ls, why);
        ec = EXIT_ERROR;
    } else if (read_error) {
        snprintf(why, sizeof why, "cannot read %s: %s", pos[1], strerror(read_error));
        load_stopped(&ls, why);
        ec = EXIT_ERROR;
    } else if (load_signal) {
        snprintf(why, sizeof why, "interrupted by signal %d (%s)", (int)load_signal, strsignal(load_signal));
        load_stopped(&ls, why);
        ec = 128 + load_signal;
    } else if (*why) {
        ec = load_stopped(&ls, why);
    } else {
        if (ls.deleted) printf("loaded %ld records (%ld of them deletes)\n", ls.committed, ls.deleted);
        else printf("loaded %ld records\n", ls.committed);
    }
    bkv_batch_destroy(ls.batch);
    free(line);
    if (in != stdin) fclose(in);
    int crc = bkv_close(ls.db);
    if (crc && !ec) {
        fprintf(stderr, "bloomkv: load: closing %s: %s\n", pos[0], bkv_strerror(crc));
        ec = EXIT_ERROR;
    }
    return ec;
}

static void print_find_stats(bkv_db *db, const bkv_find_stats *st) {
    char *vi = bkv_property(db, "bloomkv.value-index");
    fprintf(stderr, "%s", vi ? vi : "");
    bkv_free(vi);
    fprintf(stderr,
            "leaves %llu, inner nodes probed %llu (%llu maybe), leaves probed %llu (%llu maybe), "
            "partitions scanned %llu (%llu with a match), entries scanned %llu, memtable candidates %llu, "
            "candidates %llu, results %llu; plan: %s (estimated entries: index %llu, scan %llu)\n",
            (unsigned long long)st->leaves, (unsigned long long)st->nodes_probed,
            (unsigned long long)st->nodes_positive, (unsigned long long)st->leaves_probed,
            (unsigned long long)st->leaves_positive, (unsigned long long)st->partitions_scanned,
            (unsigned long long)st->partitions_matched, (unsigned long long)st->entries_scanned,
            (unsigned long long)st->memtable_candidates, (unsigned long long)st->candidates,
            (unsigned long long)st->results, st->plan_scan ? "full scan" : "index", (unsigned long long)st->index_cost,
            (unsigned long long)st->scan_cost);
}

/* Length of the well-formed UTF-8 sequence at p (at most n bytes), 0 if none. */
static size_t utf8_length(const unsigned char *p, size_t n) {
    size_t len = p[0] < 0x80 ? 1 : (p[0] & 0xe0) == 0xc0 ? 2 : (p[0] & 0xf0) == 0xe0 ? 3 : (p[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || len > n || (len == 2 && p[0] < 0xc2)) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0; /* overlong, surrogate */
    if (len == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || p[0] > 0xf4 || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;
    return len;
}

/* A JSON string of the bytes (hex digits with --hex): well-formed UTF-8 as
 * is, anything else escaped, so that every line parses. */
static void print_json_string(const void *data, size_t n, int hex) {
    const unsigned char *p = data;
    putchar('"');
    if (hex) print_bytes(stdout, p, n, 1);
    for (size_t i = 0; !hex && i < n;) {
        size_t len = utf8_length(p + i, n - i);
        if (len == 1 && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\') putchar(p[i]);
        else if (len == 1 && (p[i] == '"' || p[i] == '\\')) printf("\\%c", p[i]);
        else if (len > 1) fwrite(p + i, 1, len, stdout);
        else printf("\\u%04x", p[i]);
        i += len ? len : 1;
    }
    putchar('"');
}

/* One entry as scan, find-value and get print it: key<TAB>value (the key
 * alone with --keys-only), or a JSON object with --json (a NULL value, a
 * key get did not find, as null). */
static void print_entry(const cli_opts *o, const void *k, size_t kl, const void *v, size_t vl) {
    if (o->json) {
        printf("{\"key\":");
        print_json_string(k, kl, o->hex & HEX_KEYS);
        if (!o->keys_only) {
            printf(",\"value\":");
            if (v) print_json_string(v, vl, o->hex & HEX_VALUES);
            else printf("null");
        }
        printf("}\n");
        return;
    }
    print_bytes(stdout, k, kl, o->hex & HEX_KEYS);
    if (!o->keys_only) {
        putchar('\t');
        print_bytes(stdout, v, vl, o->hex & HEX_VALUES);
    }
    putchar('\n');
}

/* Prints the results as the iterator yields them; the number found. */
static int print_results(bkv_find_iter *it, const cli_opts *o, uint64_t *n) {
    int rc;
    while ((rc = bkv_find_iter_next(it)) == BKV_OK) {
        (*n)++;
        if (o->count) continue;
        size_t kl, vl;
        const void *k = bkv_find_iter_key(it, &kl), *v = bkv_find_iter_value(it, &vl);
        print_entry(o, k, kl, v, vl);
    }
    if (o->count) printf(o->json ? "{\"count\":%llu}\n" : "%llu\n", (unsigned long long)*n);
    return rc == BKV_NOTFOUND ? BKV_OK : rc;
}

/* A prefix search needs the prefixes indexed: a prefix:N extractor, and
 * no value longer than N (its prefix would not be a term). */
static int check_prefix_search(bkv_db *db, const char *path, const size_t *lens, size_t n) {
    char *terms = bkv_property(db, "bloomkv.value-terms");
    unsigned max = 0;
    char slash = 0;
    int ok = terms && sscanf(terms, "prefix:%u%c", &max, &slash) == 2 && slash == '/';
    int ec = 0;
    if (!ok) {
        fprintf(stderr, "bloomkv: find-value --prefix: %s does not index prefixes (its terms extractor is \"%s\"; "
                        "make it with --terms prefix:N)\n", path, terms ? terms : "");
        ec = EXIT_USAGE;
    }
    for (size_t i = 0; !ec && i < n; i++)
        if (lens[i] == 0 || lens[i] > max) {
            fprintf(stderr, "bloomkv: find-value --prefix: value %zu is %zu bytes; %s indexes prefixes of 1 to %u\n",
                    i + 1, lens[i], path, max);
            ec = EXIT_USAGE;
        }
    bkv_free(terms);
    return ec;
}

int bkv_cli_find_value(int argc, char **argv) {
    PARSE_OR_USAGE(-2);
    if (o.count && o.keys_only) {
        usage_error(argv[0], "%s", "--count and --keys-only do not go together");
        return EXIT_USAGE;
    }
    if (o.prefix_key) {
        usage_error(argv[0], "%s", "--prefix takes no value here: the values given are the prefixes");
        return EXIT_USAGE;
    }
    if (o.any && o.all) {
        usage_error(argv[0], "%s", "--all and --any do not go together");
        return EXIT_USAGE;
    }
    size_t nterms = (size_t)o.npos - 1;
    char *terms[MAX_POSITIONAL], *after = NULL;
    size_t lens[MAX_POSITIONAL], after_len = 0;
    int ec = 0;
    size_t decoded = 0;
    for (; decoded < nterms; decoded++)
        if (bkv_cli_decode(pos[decoded + 1], o.hex & HEX_VALUES, &terms[decoded], &lens[decoded])) {
            fprintf(stderr, "bloomkv: find-value: bad hex in value %zu\n", decoded + 1);
            ec = EXIT_USAGE;
            break;
        }
    if (!ec && o.after && bkv_cli_decode(o.after, o.hex & HEX_KEYS, &after, &after_len)) {
        fprintf(stderr, "bloomkv: find-value: bad hex in --after\n");
        ec = EXIT_USAGE;
    }
    bkv_db *db;
    if (!ec) ec = open_db(pos[0], OPEN_READ, &o, &db);
    if (!ec && o.prefix && (ec = check_prefix_search(db, pos[0], lens, nterms)) != 0) bkv_close(db);
    if (!ec) {
        bkv_find_options fo;
        bkv_find_options_init(&fo);
        fo.mode = o.any ? BKV_FIND_ANY : BKV_FIND_ALL;
        /* No --limit: every result; --limit 0: the search is still set up
         * (a database without an index is refused), nothing printed. */
        fo.limit = o.limit < 0 ? 0 : o.limit > 0 ? (uint64_t)o.limit : 1;
        fo.keys_only = o.keys_only || o.count;
        fo.after = after;
        fo.after_len = after_len;
        fo.continue_on_error = o.continue_on_error;
        bkv_find_iter *it = NULL;
        uint64_t n = 0;
        int rc = bkv_find_iter_create(db, NULL, (const void *const *)terms, lens, nterms, &fo, &it);
        if (!rc && o.limit != 0) rc = print_results(it, &o, &n);
        else if (!rc && o.count) printf(o.json ? "{\"count\":0}\n" : "0\n");
        bkv_find_stats st = {0};
        bkv_find_iter_stats(it, &st);
        bkv_find_iter_destroy(it);
        if (rc == BKV_INVALID && !strstr(bkv_errmsg(db), "terms")) {
            fprintf(stderr, "bloomkv: find-value: %s has no value index (build one: bloomkv value-index build %s "
                            "--shape bitsliced)\n", pos[0], pos[0]);
            bkv_close(db);
            ec = EXIT_USAGE;
        } else if (rc) {
            ec = fail_db(db, "find-value", rc);
        } else {
            if (o.stats) print_find_stats(db, &st);
            bkv_close(db);
            ec = n || o.limit == 0 ? 0 : EXIT_NOTFOUND;
        }
    }
    for (size_t i = 0; i < decoded; i++) free(terms[i]);
    free(after);
    return ec;
}

/* A size for people: bytes, KiB, MiB or GiB with one decimal. */
static const char *human_bytes(unsigned long long n, char *buf, size_t cap) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    if (u == 0) snprintf(buf, cap, "%llu B", n);
    else snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

static unsigned long long property_u64(bkv_db *db, const char *fmt, int level) {
    char name[64];
    snprintf(name, sizeof name, fmt, level);
    char *v = bkv_property(db, name);
    unsigned long long n = v ? strtoull(v, NULL, 10) : 0;
    bkv_free(v);
    return n;
}

/* Bytes of the directory's files: all of them, and the write-ahead logs. */
static void disk_use(const char *path, unsigned long long *total, unsigned long long *wal) {
    *total = *wal = 0;
    DIR *d = opendir(path);
    for (struct dirent *de; d && (de = readdir(d)) != NULL;) {
        char p[4400];
        struct stat st;
        if (snprintf(p, sizeof p, "%s/%s", path, de->d_name) >= (int)sizeof p || lstat(p, &st) || !S_ISREG(st.st_mode))
            continue;
        *total += (unsigned long long)st.st_size;
        size_t n = strlen(de->d_name);
        if (n > 4 && strcmp(de->d_name + n - 4, ".log") == 0) *wal += (unsigned long long)st.st_size;
    }
    if (d) closedir(d);
}

int bkv_cli_stats(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    bkv_db *db;
    int ec = open_db(pos[0], OPEN_READ, &o, &db);
    if (ec) return ec;
    if (o.all) {
        char *s = bkv_property(db, "bloomkv.stats");
        if (s) fputs(s, stdout);
        bkv_free(s);
        bkv_close(db);
        return 0;
    }
    /* What the files hold, not what this command's own open counted. */
    unsigned long long total, wal, tables = 0, bytes = 0, entries = 0;
    disk_use(pos[0], &total, &wal);
    char *seq = bkv_property(db, "bloomkv.last-sequence"), *vi = bkv_property(db, "bloomkv.value-index");
    char *space = bkv_property(db, "bloomkv.space-amplification");
    unsigned long long live = property_u64(db, "bloomkv.estimate-live-keys", 0),
                       mem_rows = property_u64(db, "bloomkv.memtable-entries", 0);
    if (o.json) printf("{\"path\":");
    if (o.json) print_json_string(pos[0], strlen(pos[0]), 0);
    else printf("database   %s (bloomkv %d.%d.%d)\nlevel  tables        size      entries\n", pos[0], BKV_VERSION_MAJOR,
                BKV_VERSION_MINOR, BKV_VERSION_PATCH);
    if (o.json) printf(",\"levels\":[");
    for (int l = 0; l < 7; l++) {
        unsigned long long t = property_u64(db, "bloomkv.num-files-at-level%d", l),
                           b = property_u64(db, "bloomkv.bytes-at-level%d", l),
                           n = property_u64(db, "bloomkv.entries-at-level%d", l);
        tables += t, bytes += b, entries += n;
        char h[32];
        if (o.json) printf("%s{\"tables\":%llu,\"bytes\":%llu,\"entries\":%llu}", l ? "," : "", t, b, n);
        else if (t || l == 0) printf("L%-4d %7llu %11s %12llu\n", l, t, human_bytes(b, h, sizeof h), n);
    }
    char h1[32], h2[32], h3[32];
    if (o.json) {
        printf("],\"tables\":%llu,\"table_bytes\":%llu,\"entries\":%llu,\"wal_bytes\":%llu,\"disk_bytes\":%llu,"
               "\"memtable_entries\":%llu,\"estimated_live_keys\":%llu,\"last_sequence\":%s,"
               "\"space_amplification\":%s,\"value_index\":",
               tables, bytes, entries, wal, total, mem_rows, live, seq ? seq : "0", space ? space : "0");
        print_json_string(vi ? vi : "", vi ? strlen(vi) : 0, 0);
        printf("}\n");
    } else {
        printf("total  %7llu %11s %12llu  (entries count every version and tombstone)\n", tables,
               human_bytes(bytes, h1, sizeof h1), entries);
        printf("memtable (what the write-ahead log holds) %llu entries; live keys about %llu\n", mem_rows, live);
        printf("write-ahead log %s, on disk %s in all; last sequence %s; space amplification %s\n",
               human_bytes(wal, h2, sizeof h2), human_bytes(total, h3, sizeof h3), seq ? seq : "0", space ? space : "0");
        printf("value index: %s\n", vi && *vi ? vi : "none");
    }
    bkv_free(seq);
    bkv_free(vi);
    bkv_free(space);
    bkv_close(db);
    return 0;
}

/* "N tables, B bytes" over every level, and each level's table count. */
static void describe_levels(bkv_db *db, char *out, size_t cap) {
    unsigned long long tables = 0, bytes = 0;
    char counts[128] = "";
    for (int l = 0; l < 7; l++) {
        unsigned long long n = property_u64(db, "bloomkv.num-files-at-level%d", l);
        tables += n;
        bytes += property_u64(db, "bloomkv.bytes-at-level%d", l);
        snprintf(counts + strlen(counts), sizeof counts - strlen(counts), "%s%llu", l ? " " : "", n);
    }
    snprintf(out, cap, "%llu table%s, %llu bytes (by level: %s)", tables, tables == 1 ? "" : "s", bytes, counts);
}

int bkv_cli_compact(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    char *from, *to;
    size_t fl, tl;
    if (decode_range(&o, "compact", &from, &fl, &to, &tl)) return EXIT_USAGE;
    bkv_db *db;
    int ec = open_db(pos[0], OPEN_WRITE, &o, &db);
    if (!ec) {
        /* No range: the whole key space, down to the last level. */
        char before[256], after[256];
        describe_levels(db, before, sizeof before);
        int rc = bkv_compact_range(db, from, fl, to, tl);
        if (!rc) {
            describe_levels(db, after, sizeof after);
            printf("compacted %s%s: %s before, %s after\n", pos[0], o.from || o.to ? " (a key range)" : "", before,
                   after);
        }
        ec = rc ? fail_db(db, "compact", rc) : (bkv_close(db), 0);
    }
    free(from);
    free(to);
    return ec;
}

int bkv_cli_checkpoint(int argc, char **argv) {
    PARSE_OR_USAGE(2);
    bkv_db *db;
    struct stat st;
    if (lstat(pos[1], &st) == 0) { /* the engine refuses it too; this says so in the tool's terms */
        fprintf(stderr, "bloomkv: checkpoint: %s already exists: name a directory that does not\n", pos[1]);
        return EXIT_USAGE;
    }
    int ec = open_db(pos[0], OPEN_READ, &o, &db); /* the source is only read: it may be open elsewhere */
    if (ec) return ec;
    int rc = bkv_checkpoint(db, pos[1]);
    if (rc) return fail_db(db, "checkpoint", rc);
    bkv_close(db);
    printf("checkpoint of %s written to %s\n", pos[0], pos[1]);
    return 0;
}

int bkv_cli_destroy(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    struct stat st;
    if (lstat(pos[0], &st) != 0) {
        fprintf(stderr, "bloomkv: destroy: %s: %s\n", pos[0], strerror(errno));
        return EXIT_USAGE;
    }
    int rc = bkv_destroy(pos[0]);
    if (rc == BKV_OK) return 0;
    fprintf(stderr, "bloomkv: destroy: %s\n", *bkv_errmsg(NULL) ? bkv_errmsg(NULL) : bkv_strerror(rc));
    return exit_status(rc);
}

int bkv_cli_repair(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    char done[8192];
    int rc = bkv_repair(pos[0], done, sizeof done);
    if (rc == BKV_OK) {
        printf("%s: %s\n", pos[0], done);
        return 0;
    }
    fprintf(stderr, "bloomkv: repair: %s\n", *bkv_errmsg(NULL) ? bkv_errmsg(NULL) : bkv_strerror(rc));
    return exit_status(rc);
}

/* --json: how many problems were printed into the object's array. */
typedef struct problem_printer {
    int json;
    long n;
} problem_printer;

static void print_problem(void *arg, const char *problem) {
    problem_printer *pp = arg;
    if (pp->json) {
        printf(pp->n ? "," : "");
        print_json_string(problem, strlen(problem), 0);
    } else {
        printf("%s\n", problem);
    }
    pp->n++;
}

int bkv_cli_check(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    problem_printer pp = {.json = o.json};
    if (o.json) printf("{\"problems\":[");
    int rc = bkv_check(pos[0], print_problem, &pp);
    if (o.json) {
        /* ok: nothing found; error: the check itself could not run. */
        printf("],\"ok\":%s", rc == BKV_OK ? "true" : "false");
        if (rc != BKV_OK && rc != BKV_CORRUPTION) {
            printf(",\"error\":");
            const char *msg = *bkv_errmsg(NULL) ? bkv_errmsg(NULL) : bkv_strerror(rc);
            print_json_string(msg, strlen(msg), 0);
        }
        printf("}\n");
    }
    if (rc == BKV_OK) {
        if (!o.json) printf("%s: no problems found\n", pos[0]);
        return 0;
    }
    if (rc == BKV_CORRUPTION) fprintf(stderr, "bloomkv: check: %s has problems\n", pos[0]);
    else fprintf(stderr, "bloomkv: check: cannot check: %s\n", *bkv_errmsg(NULL) ? bkv_errmsg(NULL) : bkv_strerror(rc));
    return exit_status(rc); /* a wrong path is not damage */
}

static int write_stdout(void *arg, const char *text, size_t len) {
    (void)arg;
    return fwrite(text, 1, len, stdout) == len ? 0 : -1;
}

int bkv_cli_dump_sst(int argc, char **argv) {
    PARSE_OR_USAGE(1);
    int flags = (o.entries ? BKV_DUMP_ENTRIES : 0) | (o.json ? BKV_DUMP_JSON : 0);
    if (bkv_dump_table(pos[0], flags, write_stdout, NULL) == BKV_OK) return 0;
    fprintf(stderr, "bloomkv: dump-sst: %s\n", bkv_errmsg(NULL));
    return EXIT_ERROR;
}

int bkv_cli_make_table(int argc, char **argv) {
    PARSE_OR_USAGE(2);
    FILE *in = open_input("make-table", pos[1]);
    if (!in) return EXIT_ERROR;
    bkv_options opts;
    bkv_options_init(&opts);
    if (o.value_index >= 0) opts.value_index = o.value_index;
    opts.value_terms_name = o.terms;
    bkv_table_writer *w;
    int rc = bkv_table_writer_create(&opts, pos[0], &w);
    char *line = NULL, why[256] = "";
    size_t cap = 0;
    ssize_t n;
    long lineno = 0;
    char *prev = NULL; /* the key before, to name an out-of-order line in the tool's terms */
    size_t prev_len = 0;
    while (!rc && (n = getline(&line, &cap, in)) >= 0) {
        char *k, *v;
        size_t kl, vl;
        int got = parse_record(line, n, o.hex, 0, ++lineno, &k, &kl, &v, &vl, why, sizeof why);
        if (got < 0) break;
        if (got == 0) continue;
        if (prev && key_order(prev, prev_len, k, kl) >= 0) {
            snprintf(why, sizeof why, "line %ld: its key does not come after the key of the line before; make-table "
                     "needs keys in strictly increasing byte order (sort the input, or use bloomkv load)", lineno);
            free(k);
            free(v);
            break;
        }
        rc = bkv_table_writer_put(w, k, kl, v, vl);
        if (rc) snprintf(why, sizeof why, "line %ld: %s", lineno, bkv_errmsg(NULL));
        free(prev);
        prev = k;
        prev_len = kl;
        free(v);
    }
    free(prev);
    if (!rc && !*why && ferror(in)) snprintf(why, sizeof why, "cannot read %s: %s", pos[1], strerror(errno));
    if (!rc && !*why && (rc = bkv_table_writer_finish(w))) snprintf(why, sizeof why, "%s", bkv_errmsg(NULL));
    if (!rc && !*why) printf("wrote %llu entries to %s\n", (unsigned long long)bkv_table_writer_entries(w), pos[0]);
    bkv_table_writer_destroy(w); /* removes the file unless finished */
    free(line);
    if (in != stdin) fclose(in);
    if (!rc && !*why) return 0;
    if (!*why) snprintf(why, sizeof why, "%s: %s", bkv_strerror(rc), bkv_errmsg(NULL));
    fprintf(stderr, "bloomkv: make-table: %s\n", why);
    return rc == BKV_INVALID || (!rc && *why) ? EXIT_USAGE : EXIT_ERROR; /* bad input, or the file system */
}

int bkv_cli_ingest(int argc, char **argv) {
    PARSE_OR_USAGE(2);
    bkv_db *db;
    int ec = open_db(pos[0], OPEN_CREATE, &o, &db);
    if (ec) return ec;
    const char *paths[] = {pos[1]};
    int rc = bkv_ingest(db, paths, 1, o.move ? BKV_INGEST_MOVE : 0);
    if (rc) return fail_db(db, "ingest", rc);
    bkv_close(db);
    printf("ingested %s into %s\n", pos[1], pos[0]);
    return 0;
}

int bkv_cli_value_index(int argc, char **argv) {
    PARSE_OR_USAGE(2);
    int build = strcmp(pos[0], "build") == 0;
    if (!build && strcmp(pos[0], "drop") != 0) {
        usage_error(argv[0], "the action is build or drop, not '%s'", pos[0]);
        return EXIT_USAGE;
    }
    if (build != (o.value_index >= 0) || (!build && o.terms)) {
        usage_error(argv[0], "%s", build ? "build needs --shape" : "drop takes no --shape or --terms");
        return EXIT_USAGE;
    }
    bkv_options opts;
    bkv_options_init(&opts);
    opts.create_if_missing = 0;
    opts.wal_recovery = o.wal_recovery;
    if (build) {
        opts.value_index = o.value_index;
        opts.value_index_reshape = 1; /* asked for by name */
        opts.value_terms_name = o.terms;
    } else {
        opts.value_index_drop = 1;
    }
    bkv_db *db;
    if (!build) {
        /* Asked first, so a database without one is not told it was dropped. */
        bkv_options plain = opts;
        plain.value_index_drop = 0;
        int rc = bkv_open(pos[1], &plain, &db);
        if (rc) {
            fprintf(stderr, "bloomkv: cannot open %s: %s\n", pos[1], *bkv_errmsg(NULL) ? bkv_errmsg(NULL) : bkv_strerror(rc));
            return EXIT_ERROR;
        }
        char *vi = bkv_property(db, "bloomkv.value-index");
        int has = vi && strncmp(vi, "value index:", 12) == 0;
        bkv_free(vi);
        bkv_close(db);
        if (!has) {
            fprintf(stderr, "bloomkv: value-index drop: %s has no value index; nothing dropped\n", pos[1]);
            return EXIT_NOTFOUND;
        }
    }
    int rc = bkv_open(pos[1], &opts, &db);
    if (rc) {
        fprintf(stderr, "bloomkv: cannot open %s: %s\n", pos[1], *bkv_errmsg(NULL) ? bkv_errmsg(NULL) : bkv_strerror(rc));
        return EXIT_ERROR;
    }
    uint64_t rewritten = 0;
    if (build && (rc = bkv_value_index_build(db, &rewritten)) != BKV_OK) return fail_db(db, "value-index build", rc);
    if (build) printf("value index built: %llu rewrite%s of older tables\n", (unsigned long long)rewritten,
                      rewritten == 1 ? "" : "s");
    else printf("value index dropped\n");
    bkv_close(db);
    return 0;
}
