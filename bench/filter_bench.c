/*
 * `bloomkv-bench filters`: builds a filter over N random distinct keys and
 * measures it. Before timing anything it checks that every inserted key is
 * found (a filter with a false negative is broken, however fast).
 *
 * Keys are hashed once, up front, and the hashing cost is reported on its
 * own line (hash_ns): the probe timings are pure filter work, which is what
 * an engine sharing one hash across many tables pays per table.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "bloomkv_filter.h"
#include "filter_bench.h"
#include "options.h"

typedef struct bench_config {
    int type;
    uint64_t keys;
    uint64_t queries;
    double bits_per_key; /* used when > 0 */
    double fpr;          /* else this */
    uint64_t seed;
    int json;
} bench_config;

typedef struct bench_result {
    bkv_filter_info info;
    double hash_ns, build_ns_per_key, query_pos_ns, query_neg_ns, query_neg_batch_ns;
    double delete_ns; /* deletable types only, else < 0 */
    double fpr;
} bench_result;

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* 16-byte keys: a random word, then the index with the top bit marking the
 * query set, so inserted and queried keys can never coincide. */
static void hash_keys(bkv_hash *out, uint64_t n, uint64_t seed, int negative) {
    for (uint64_t i = 0; i < n; i++) {
        uint64_t key[2] = {mix64(seed * 0x9e3779b97f4a7c15ULL + i), i | ((uint64_t)negative << 63)};
        out[i] = bkv_hash_bytes(key, sizeof key);
    }
}

static int run_one(const bench_config *cfg, bench_result *r) {
    memset(r, 0, sizeof *r);
    bkv_hash *pos = malloc(cfg->keys * sizeof *pos);
    bkv_hash *neg = malloc(cfg->queries * sizeof *neg);
    uint8_t *answers = malloc(cfg->queries ? cfg->queries : 1);
    if (!pos || !neg || !answers) {
        fprintf(stderr, "filter-bench: out of memory\n");
        free(pos), free(neg), free(answers);
        return 3;
    }
    double t0 = bench_now_ns();
    hash_keys(pos, cfg->keys, cfg->seed, 0);
    r->hash_ns = cfg->keys ? (bench_now_ns() - t0) / (double)cfg->keys : 0;
    hash_keys(neg, cfg->queries, cfg->seed, 1);

    bkv_filter_spec spec = {.type = cfg->type, .bits_per_key = cfg->bits_per_key, .fpr = cfg->fpr};
    bkv_filter *f = NULL;
    t0 = bench_now_ns();
    /* Static types need every key at once; the others are filled one add
     * at a time, as a table builder or a live set would. */
    int rc;
    if (bkv_filter_is_static(cfg->type)) {
        rc = bkv_filter_build(&spec, pos, cfg->keys, &f);
    } else {
        rc = bkv_filter_create(&spec, cfg->keys, &f);
        for (uint64_t i = 0; rc == BKV_OK && i < cfg->keys; i++) rc = bkv_filter_add(f, pos[i]);
    }
    double build = bench_now_ns() - t0;
    if (rc != BKV_OK) {
        fprintf(stderr, "filter-bench: cannot build filter: %s\n", bkv_strerror(rc));
        free(pos), free(neg), free(answers);
        return 2;
    }
    r->build_ns_per_key = cfg->keys ? build / (double)cfg->keys : 0;

    /* Validate before timing. */
    uint64_t found = 0;
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < cfg->keys; i++) found += (uint64_t)bkv_filter_may_contain(f, pos[i]);
    r->query_pos_ns = cfg->keys ? (bench_now_ns() - t0) / (double)cfg->keys : 0;
    if (found != cfg->keys) {
        fprintf(stderr, "filter-bench: %llu false negatives: the filter is broken\n",
                (unsigned long long)(cfg->keys - found));
        bkv_filter_destroy(f);
        free(pos), free(neg), free(answers);
        return 3;
    }

    uint64_t hits = 0;
    t0 = bench_now_ns();
    for (uint64_t i = 0; i < cfg->queries; i++) hits += (uint64_t)bkv_filter_may_contain(f, neg[i]);
    r->query_neg_ns = cfg->queries ? (bench_now_ns() - t0) / (double)cfg->queries : 0;

    t0 = bench_now_ns();
    bkv_filter_may_contain_batch(f, neg, cfg->queries, answers);
    r->query_neg_batch_ns = cfg->queries ? (bench_now_ns() - t0) / (double)cfg->queries : 0;
    uint64_t batch_hits = 0;
    for (uint64_t i = 0; i < cfg->queries; i++) batch_hits += answers[i];
    if (batch_hits != hits) {
        fprintf(stderr, "filter-bench: batch and single probes disagree (%llu vs %llu)\n",
                (unsigned long long)batch_hits, (unsigned long long)hits);
        bkv_filter_destroy(f);
        free(pos), free(neg), free(answers);
        return 3;
    }
    r->fpr = cfg->queries ? (double)hits / (double)cfg->queries : 0;
    bkv_filter_get_info(f, &r->info);
    r->delete_ns = -1;
    if (bkv_filter_is_deletable(cfg->type)) {
        t0 = bench_now_ns();
        for (uint64_t i = 0; i < cfg->keys; i++)
            if (bkv_filter_delete(f, pos[i]) != BKV_OK) {
                fprintf(stderr, "filter-bench: delete of an added key failed\n");
                bkv_filter_destroy(f);
                free(pos), free(neg), free(answers);
                return 3;
            }
        r->delete_ns = cfg->keys ? (bench_now_ns() - t0) / (double)cfg->keys : 0;
    }
    bkv_filter_destroy(f);
    free(pos), free(neg), free(answers);
    return 0;
}

static void print_json(const bench_config *cfg, const bench_result *r);

static void print_json(const bench_config *cfg, const bench_result *r) {
    printf("\"type\":\"%s\",\"keys\":%llu,\"queries\":%llu,\"seed\":%llu,\"bits_per_key\":%.4f,"
           "\"k\":%u,\"fpr\":%.6g,\"fpr_theory\":%.6g,\"hash_ns\":%.2f,\"build_ns_per_key\":%.2f,"
           "\"query_pos_ns\":%.2f,\"query_neg_ns\":%.2f,\"query_neg_batch_ns\":%.2f,\"bytes\":%zu",
           bkv_filter_type_name(cfg->type), (unsigned long long)cfg->keys,
           (unsigned long long)cfg->queries, (unsigned long long)cfg->seed, r->info.bits_per_key,
           r->info.k, r->fpr, r->info.expected_fpr, r->hash_ns, r->build_ns_per_key,
           r->query_pos_ns, r->query_neg_ns, r->query_neg_batch_ns, r->info.encoded_bytes);
    if (r->delete_ns >= 0) printf(",\"delete_ns\":%.2f}\n", r->delete_ns);
    else printf(",\"delete_ns\":null}\n");
}

static void print_header(void) {
    printf("%-8s %9s %3s %9s %9s %9s %8s %8s %8s %9s %8s %12s\n", "type", "bits/key", "k", "fpr%",
           "model%", "fpr/model", "build", "pos", "neg", "neg-batch", "delete", "bytes");
    printf("%-8s %9s %3s %9s %9s %9s %8s %8s %8s %9s %8s %12s\n", "", "", "", "", "", "",
           "ns/key", "ns", "ns", "ns", "ns", "");
}

static void print_row(const bench_config *cfg, const bench_result *r) {
    double ratio = r->info.expected_fpr > 0 ? r->fpr / r->info.expected_fpr : 0;
    char del[16] = "-";
    if (r->delete_ns >= 0) snprintf(del, sizeof del, "%.1f", r->delete_ns);
    printf("%-8s %9.2f %3u %9.4f %9.4f %9.3f %8.1f %8.1f %8.1f %9.1f %8s %12zu\n",
           bkv_filter_type_name(cfg->type), r->info.bits_per_key, r->info.k, 100 * r->fpr,
           100 * r->info.expected_fpr, ratio, r->build_ns_per_key, r->query_pos_ns, r->query_neg_ns,
           r->query_neg_batch_ns, del, r->info.encoded_bytes);
}

/* The configuration of type that comes closest to the target rate; 0 when
 * the type has no configuration near it (fixed-width fingerprints). */
static int space_config(int type, double target, bench_config *c) {
    c->type = type;
    c->bits_per_key = 0;
    c->fpr = target;
    switch (type) {
    case BKV_FILTER_FUSE8:
    case BKV_FILTER_XOR8: return target >= 0.005;
    case BKV_FILTER_FUSE16: return target < 0.005;
    case BKV_FILTER_CUCKOO8: return 0;
    case BKV_FILTER_CUCKOO12: return target >= 0.005;
    case BKV_FILTER_CUCKOO16: return target < 0.005;
    default: return 1;
    }
}

static int space_table(const bench_config *base, int have_keys, int json) {
    static const int types[] = {BKV_FILTER_BLOOM, BKV_FILTER_BLOCKED_BLOOM, BKV_FILTER_RIBBON, BKV_FILTER_FUSE8,
                                BKV_FILTER_FUSE16, BKV_FILTER_XOR8, BKV_FILTER_CUCKOO12, BKV_FILTER_CUCKOO16,
                                BKV_FILTER_COUNTING};
    static const double targets[] = {0.01, 0.001, 0.0001};
    const uint64_t sizes[] = {have_keys ? base->keys : 1000000, 10000000};
    size_t nsizes = have_keys ? 1 : 2;
    if (!json)
        printf("%10s %8s %-9s %9s %9s %9s %9s %8s %8s %8s\n", "keys", "target%", "type", "bits/key", "fpr%",
               "bound", "overhead", "build", "neg", "batch");
    for (size_t si = 0; si < nsizes; si++)
        for (size_t ti = 0; ti < 3; ti++)
            for (size_t ty = 0; ty < sizeof types / sizeof types[0]; ty++) {
                bench_config c = *base;
                c.keys = sizes[si];
                c.queries = 2000000;
                if (!space_config(types[ty], targets[ti], &c)) continue;
                bench_result r;
                int rc = run_one(&c, &r);
                if (rc) return rc;
                double bound = -log2(targets[ti]);
                /* Overhead against the bound of the rate actually reached. */
                double reached = r.fpr > 0 ? -log2(r.fpr) : bound;
                double overhead = 100.0 * (r.info.bits_per_key / reached - 1.0);
                if (json) {
                    printf("{\"space_table\":true,\"target_fpr\":%g,\"bound_bits\":%.3f,\"overhead_pct\":%.2f,", targets[ti],
                           bound, overhead);
                    print_json(&c, &r);
                } else {
                    printf("%10llu %8.2f %-9s %9.2f %9.4f %9.2f %8.1f%% %8.1f %8.1f %8.1f\n", (unsigned long long)c.keys,
                           100 * targets[ti], bkv_filter_type_name(c.type), r.info.bits_per_key, 100 * r.fpr, bound,
                           overhead, r.build_ns_per_key, r.query_neg_ns, r.query_neg_batch_ns);
                }
                fflush(stdout);
            }
    return 0;
}

/* Figures recorded once, not measured by this program: fastfilter_cpp's
 * on the project's 2-core VM, RocksDB's published false-positive rate, and
 * two build targets. Printed beside ours, which this run measures, and
 * labelled as recorded so they are never read as this machine's. */
typedef struct anchor {
    int type;
    double fpr;              /* the configuration compared (0: bits_per_key 10) */
    const char *what;        /* the peer */
    double bits_per_key, fpr_pct, build_ns, neg_ns; /* < 0: not published */
} anchor;

static int compare_anchor(const bench_config *base, int have_keys, int json) {
    static const anchor anchors[] = {
        {BKV_FILTER_BLOCKED_BLOOM, 0, "RocksDB FastLocalBloom", 10, 0.955, -1, -1},
        {BKV_FILTER_BLOCKED_BLOOM, 0, "fastfilter_cpp BlockedBloom64", 10, 0.935, -1, 14},
        {BKV_FILTER_RIBBON, 0.0078, "fastfilter_cpp BalancedRibbon64Pack", 7.05, 0.78, 102, -1},
        {BKV_FILTER_FUSE8, 0.0039, "fastfilter_cpp BinaryFuse8 (neg 8-18 ns)", 9.02, -1, -1, 18},
        {BKV_FILTER_FUSE16, 0.0000153, "target (build <= 60 ns/key)", -1, -1, 60, -1},
        {BKV_FILTER_XOR8, 0.0039, "target (build <= 60 ns/key)", -1, -1, 60, -1},
    };
    if (!json) {
        printf("anchor columns: figures recorded once on another run or taken from their authors, NOT measured\n"
               "now; 'ours' columns: measured by this run on this machine. Compare ratios only within a run.\n");
        printf("%-8s %-42s %9s %9s %9s %9s %9s %9s %9s %9s\n", "type", "anchor (recorded)", "bits/key", "ours", "fpr%",
               "ours", "build ns", "ours", "neg ns", "ours");
    }
    for (size_t i = 0; i < sizeof anchors / sizeof anchors[0]; i++) {
        const anchor *a = &anchors[i];
        bench_config c = *base;
        c.keys = have_keys ? base->keys : 10000000;
        c.queries = c.keys < 10000000 ? c.keys : 10000000;
        c.type = a->type;
        c.fpr = a->fpr;
        c.bits_per_key = a->fpr > 0 ? 0 : 10;
        bench_result r;
        int rc = run_one(&c, &r);
        if (rc) return rc;
        if (json) {
            printf("{\"anchor\":\"%s\",\"anchor_measured_now\":false,\"anchor_bits_per_key\":%g,\"anchor_fpr_pct\":%g,\"anchor_build_ns\":%g,"
                   "\"anchor_neg_ns\":%g,", a->what, a->bits_per_key, a->fpr_pct, a->build_ns, a->neg_ns);
            print_json(&c, &r);
            continue;
        }
        char ab[16] = "-", af[16] = "-", abu[16] = "-", an[16] = "-";
        if (a->bits_per_key >= 0) snprintf(ab, sizeof ab, "%.2f", a->bits_per_key);
        if (a->fpr_pct >= 0) snprintf(af, sizeof af, "%.3f", a->fpr_pct);
        if (a->build_ns >= 0) snprintf(abu, sizeof abu, "%.0f", a->build_ns);
        if (a->neg_ns >= 0) snprintf(an, sizeof an, "%.0f", a->neg_ns);
        printf("%-8s %-42s %9s %9.2f %9s %9.3f %9s %9.1f %9s %9.1f\n", bkv_filter_type_name(c.type), a->what, ab,
               r.info.bits_per_key, af, 100 * r.fpr, abu, r.build_ns_per_key, an, r.query_neg_ns);
        fflush(stdout);
    }
    return 0;
}

/* The range filter: for --bits-per-key (or 10, 14, 18 and 22), the bits
 * per key stored and, by range length, the false-positive rate of empty
 * ranges placed uniformly and of empty ranges starting just past a key
 * (the correlated case that breaks prefix-based range filters), beside
 * the bound L / 2^(B-2). Queries: --queries per cell. */
static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int range_table(const bench_config *cfg, int have_bpk) {
    uint64_t n = cfg->keys, rnd = cfg->seed * 0x9e3779b97f4a7c15ULL + 1;
    uint64_t *keys = malloc((n ? n : 1) * sizeof *keys), *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!keys || !sorted) {
        free(keys);
        free(sorted);
        return 3;
    }
    for (uint64_t i = 0; i < n; i++) keys[i] = sorted[i] = bench_splitmix(&rnd);
    qsort(sorted, n, sizeof *sorted, compare_u64);
    static const double table_bpk[] = {10, 14, 18, 22};
    static const uint64_t lens[] = {1, 16, 256, 1024, 4096, 65536};
    size_t nb = have_bpk ? 1 : 4;
    if (cfg->json) printf("[");
    else printf("range filter: %llu uniform random 64-bit keys, %llu empty ranges a cell, seed %llu\n"
                "%9s %9s %8s %12s %12s %12s %10s\n", (unsigned long long)n, (unsigned long long)cfg->queries,
                (unsigned long long)cfg->seed, "B", "bits/key", "L", "uniform fpr%", "correl. fpr%", "bound%",
                "build ns/key");
    for (size_t b = 0; b < nb; b++) {
        double bpk = have_bpk ? cfg->bits_per_key : table_bpk[b];
        bkv_filter *f;
        double t0 = bench_now_ns();
        int rc = bkv_filter_build_range(keys, n, bpk, (uint32_t)cfg->seed, &f);
        double build_ns = (bench_now_ns() - t0) / (double)(n ? n : 1);
        if (rc) {
            fprintf(stderr, "filter-bench: range filter at %g bits per key: %s\n", bpk, bkv_strerror(rc));
            free(keys);
            free(sorted);
            return 3;
        }
        double stored = n ? 8.0 * (double)bkv_filter_encoded_size(f) / (double)n : 0;
        for (size_t i = 0; i < n; i++)
            if (!bkv_filter_may_intersect(f, keys[i], keys[i])) {
                fprintf(stderr, "filter-bench: FALSE NEGATIVE for key %llu\n", (unsigned long long)keys[i]);
                return 4;
            }
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            uint64_t len = lens[li], fp[2] = {0, 0};
            for (int correlated = 0; correlated < 2; correlated++)
                for (uint64_t q = 0; q < cfg->queries;) {
                    uint64_t lo = correlated && n ? sorted[bench_splitmix(&rnd) % n] + 1 : bench_splitmix(&rnd);
                    if (UINT64_MAX - lo < len) continue;
                    uint64_t hi = lo + len - 1;
                    /* Only empty ranges: the first key >= lo must be past hi. */
                    size_t a = 0, z = n;
                    while (a < z) {
                        size_t mid = a + (z - a) / 2;
                        if (sorted[mid] < lo) a = mid + 1;
                        else z = mid;
                    }
                    if (a < n && sorted[a] <= hi) continue;
                    q++;
                    fp[correlated] += (uint64_t)bkv_filter_may_intersect(f, lo, hi);
                }
            double u = cfg->queries ? 100.0 * (double)fp[0] / (double)cfg->queries : 0;
            double c = cfg->queries ? 100.0 * (double)fp[1] / (double)cfg->queries : 0;
            double bound = 100.0 * bkv_filter_range_fpr_bound(f, len - 1);
            if (cfg->json)
                printf("%s{\"bits_per_key_asked\":%g,\"bits_per_key\":%.3f,\"range_len\":%llu,\"uniform_fpr\":%.6f,"
                       "\"correlated_fpr\":%.6f,\"bound\":%.6f,\"build_ns_per_key\":%.1f}",
                       b || li ? "," : "", bpk, stored, (unsigned long long)len, u / 100, c / 100, bound / 100,
                       build_ns);
            else
                printf("%9g %9.2f %8llu %12.4f %12.4f %12.4f %10.1f\n", bpk, stored, (unsigned long long)len, u, c,
                       bound, build_ns);
        }
        bkv_filter_destroy(f);
    }
    if (cfg->json) printf("]\n");
    free(keys);
    free(sorted);
    return 0;
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: bloomkv-bench filters [--type T] [--keys N] [--bits-per-key B | --fpr E]\n"
            "                            [--queries Q] [--seed S] [--json] [--space-table] [--compare-anchor]\n"
            "types: bloom blocked ribbon fuse8 fuse16 xor8 cuckoo8 cuckoo12 cuckoo16 counting range\n"
            "Builds a filter over N random distinct keys, checks it has no false negative, and\n"
            "measures build and probe cost and the false-positive rate over Q keys never inserted.\n"
            "Without --type: bloom and blocked at 4, 8, 10, 12, 16 and 20 bits per key.\n"
            "--type range: the range filter at 10, 14, 18 and 22 bits per key (or --bits-per-key):\n"
            "false positives of empty ranges of 1 to 65536 keys, uniform and starting just past a\n"
            "key, beside the bound L / 2^(B-2).\n"
            "--space-table: every type at false-positive rates near 1%%, 0.1%% and 0.01%%, for 1 M and\n"
            "10 M keys (or --keys), beside the bound log2(1/fpr).\n"
            "--compare-anchor: blocked, ribbon, fuse and xor at 10 M keys (or --keys) beside figures\n"
            "recorded once for RocksDB and fastfilter_cpp, and the build targets (not measured by this run).\n"
            "Defaults: --keys 1000000 --queries = keys (at most 10000000) --bits-per-key 10 --seed 1\n");
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || v < 0 || v > 1e12) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_double(const char *s, double *out) {
    char *end;
    *out = strtod(s, &end);
    return end == s || *end ? -1 : 0;
}

int bkv_filter_bench_main(int argc, char **argv) {
    bench_config cfg = {.type = -1, .keys = 1000000, .bits_per_key = 0, .seed = 1};
    int have_queries = 0, have_bpk = 0, have_keys = 0, space = 0, anchor_table = 0;
    static const struct option opts[] = {
        {"type", required_argument, 0, 't'},  {"keys", required_argument, 0, 'n'},
        {"bits-per-key", required_argument, 0, 'b'}, {"fpr", required_argument, 0, 'f'},
        {"queries", required_argument, 0, 'q'}, {"seed", required_argument, 0, 's'},
        {"json", no_argument, 0, 'j'},          {"help", no_argument, 0, 'h'},
        {"space-table", no_argument, 0, 'S'},
        {"compare-anchor", no_argument, 0, 'A'},
        {0, 0, 0, 0}};
    if (bkv_exact_options("bloomkv-bench", argc, argv, opts, NULL)) return 2;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            cfg.type = bkv_filter_type_from_name(optarg);
            if (cfg.type <= BKV_FILTER_NONE) {
                fprintf(stderr, "filter-bench: unknown filter type '%s'\n", optarg);
                return 2;
            }
            break;
        case 'n':
            if (parse_u64(optarg, &cfg.keys) < 0) goto bad;
            have_keys = 1;
            break;
        case 'S': space = 1; break;
        case 'A': anchor_table = 1; break;
        case 'q':
            if (parse_u64(optarg, &cfg.queries) < 0) goto bad;
            have_queries = 1;
            break;
        case 's':
            if (parse_u64(optarg, &cfg.seed) < 0) goto bad;
            break;
        case 'b':
            if (parse_double(optarg, &cfg.bits_per_key) < 0 || !(cfg.bits_per_key > 0 && cfg.bits_per_key <= 1024)) goto bad;
            have_bpk = 1;
            break;
        case 'f':
            if (parse_double(optarg, &cfg.fpr) < 0 || !(cfg.fpr > 0 && cfg.fpr < 1)) goto bad;
            break;
        case 'j': cfg.json = 1; break;
        case 'h': usage(stdout); return 0;
        default: goto bad;
        }
    }
    if (optind != argc) goto bad;
    if (cfg.bits_per_key > 0 && cfg.fpr > 0) {
        fprintf(stderr, "filter-bench: give --bits-per-key or --fpr, not both\n");
        return 2;
    }
    if (!have_queries) cfg.queries = cfg.keys < 10000000 ? cfg.keys : 10000000;
    if (cfg.bits_per_key == 0 && cfg.fpr == 0) cfg.bits_per_key = 10;

    const char *warn = bench_build_warning();
    if (warn) fprintf(stderr, "%s\n", warn);
    if (space) return space_table(&cfg, have_keys, cfg.json);
    if (anchor_table) return compare_anchor(&cfg, have_keys, cfg.json);
    if (cfg.type == BKV_FILTER_RANGE) {
        if (!have_queries) cfg.queries = 100000;
        return range_table(&cfg, have_bpk);
    }

    static const int all_types[] = {BKV_FILTER_BLOOM, BKV_FILTER_BLOCKED_BLOOM};
    static const double table_bpk[] = {4, 8, 10, 12, 16, 20};
    int table = cfg.type < 0;
    size_t ntypes = table ? 2 : 1;
    size_t nbpk = table && !have_bpk && cfg.fpr == 0 ? 6 : 1;
    if (!cfg.json) {
        printf("filter-bench: %llu keys, %llu negative queries, seed %llu\n",
               (unsigned long long)cfg.keys, (unsigned long long)cfg.queries,
               (unsigned long long)cfg.seed);
        print_header();
    }
    for (size_t b = 0; b < nbpk; b++) {
        for (size_t t = 0; t < ntypes; t++) {
            bench_config one = cfg;
            if (table) one.type = all_types[t];
            if (nbpk > 1) one.bits_per_key = table_bpk[b];
            bench_result r;
            int rc = run_one(&one, &r);
            if (rc) return rc;
            if (cfg.json) {
                printf("{");
                print_json(&one, &r);
            }
            else print_row(&one, &r);
            fflush(stdout);
        }
    }
    return 0;
bad:
    usage(stderr);
    return 2;
}
