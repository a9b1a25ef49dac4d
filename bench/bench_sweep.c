/*
 * `bloomkv-bench db` over several engines, thread counts and rounds: runs
 * every combination, alternating the engines inside each round and
 * rotating which goes first from one round to the next (a machine that
 * drifts over minutes then favours none of them), and reports medians
 * with their ranges: per benchmark, one row per thread count, each
 * engine's ops/s and its gain over its own smallest thread count, and
 * bloomkv's ratio to each peer. Every single run can go to a raw file
 * (--raw), so a table in the docs carries its figures beside it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db_bench.h"

/* ops/s of one run: [engine][thread count][round][benchmark] */
static double *at(const bench_sweep *sw, double *ops, size_t e, int t, int r, size_t b) {
    return ops + (((e * (size_t)sw->nthreads + (size_t)t) * (size_t)sw->rounds + (size_t)r) * BENCH_MAX_BENCHMARKS + b);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct spread {
    double median, lo, hi;
} spread;

static spread spread_of(const bench_sweep *sw, double *ops, size_t e, int t, size_t b) {
    double v[BENCH_MAX_ROUNDS];
    for (int r = 0; r < sw->rounds; r++) v[r] = *at(sw, ops, e, t, r, b);
    qsort(v, (size_t)sw->rounds, sizeof *v, cmp_double);
    int n = sw->rounds;
    double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return (spread){median, v[0], v[n - 1]};
}

/* Opens dir/name for writing, replacing a file but never following a link
 * planted in its name. */
static FILE *create_in(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f) {
        fprintf(stderr, "bench: cannot write %s: %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
    }
    return f;
}

int bench_prepare_dir(const char *dir, const char *what) {
    struct stat st;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench: %s: cannot create %s: %s\n", what, dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "bench: %s: %s is not a directory\n", what, dir);
        return -1;
    }
    return 0;
}

static int run_gnuplot(const char *dir, const char *script, const char *data) {
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir) == 0) execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int wst = 0;
    if (pid < 0 || waitpid(pid, &wst, 0) < 0 || !WIFEXITED(wst) || WEXITSTATUS(wst) != 0) {
        fprintf(stderr, "bench: gnuplot failed (is it installed?); data in %s/%s\n", dir, data);
        return 3;
    }
    return 0;
}

/* --plot DIR: medians as a chart, its data and gnuplot script beside it;
 * gnuplot runs in DIR with relative names, so no path is ever pasted into
 * a shell or gnuplot command. One thread count: a bar per engine and
 * benchmark (compare.png); several: ops/s against threads, a line per
 * engine and benchmark (scaling.png). */
static int plot(const bench_sweep *sw, double *ops) {
    int scaling = sw->nthreads > 1;
    const char *data = scaling ? "scaling.dat" : "compare.dat", *script = scaling ? "scaling.gp" : "compare.gp";
    FILE *f = create_in(sw->plot_dir, data);
    if (!f) return 3;
    if (scaling) {
        fprintf(f, "threads");
        for (size_t b = 0; b < sw->nbench; b++)
            for (size_t e = 0; e < sw->nengines; e++) fprintf(f, " %s/%s", sw->engines[e]->name, sw->names[b]);
        fprintf(f, "\n");
        for (int t = 0; t < sw->nthreads; t++) {
            fprintf(f, "%d", sw->threads[t]);
            for (size_t b = 0; b < sw->nbench; b++)
                for (size_t e = 0; e < sw->nengines; e++) fprintf(f, " %.1f", spread_of(sw, ops, e, t, b).median);
            fprintf(f, "\n");
        }
    } else {
        fprintf(f, "benchmark");
        for (size_t e = 0; e < sw->nengines; e++) fprintf(f, " %s", sw->engines[e]->name);
        fprintf(f, "\n");
        for (size_t b = 0; b < sw->nbench; b++) {
            fprintf(f, "%s", sw->names[b]);
            for (size_t e = 0; e < sw->nengines; e++) fprintf(f, " %.1f", spread_of(sw, ops, e, 0, b).median);
            fprintf(f, "\n");
        }
    }
    int werr = fclose(f);
    if (werr || !(f = create_in(sw->plot_dir, script))) return 3;
    const bench_cfg *c = sw->cfg;
    fprintf(f, "set terminal png size 1000,500\nset output '%s'\n"
               "set title 'ops/sec, %llu keys x %d B values, median of %d (higher is better)'\nset logscale y\n"
               "set key outside right\nset grid ytics\n",
            scaling ? "scaling.png" : "compare.png", (unsigned long long)c->num, c->value_size, sw->rounds);
    if (scaling)
        fprintf(f, "set logscale x 2\nset xlabel 'threads'\n"
                   "plot for [i=2:*] '%s' using 1:i with linespoints title columnheader\n", data);
    else
        fprintf(f, "set style data histograms\nset style histogram clustered\nset style fill solid border -1\n"
                   "set xtics rotate by -30\nplot for [i=2:*] '%s' using i:xtic(1) title columnheader\n", data);
    if (fclose(f) != 0) {
        fprintf(stderr, "bench: cannot write %s/%s\n", sw->plot_dir, script);
        return 3;
    }
    int rc = run_gnuplot(sw->plot_dir, script, data);
    if (!rc) printf("chart: %s/%s\n", sw->plot_dir, scaling ? "scaling.png" : "compare.png");
    return rc;
}

static void print_rate(double v) {
    if (v >= 1e6) printf("%7.2f M", v / 1e6);
    else printf("%7.1f k", v / 1e3);
}

static void print_tables(const bench_sweep *sw, double *ops) {
    for (size_t b = 0; b < sw->nbench; b++) {
        printf("\n%s: ops/s, median of %d round%s [range], xN over %d thread%s\n", sw->names[b], sw->rounds,
               sw->rounds > 1 ? "s" : "", sw->threads[0], sw->threads[0] > 1 ? "s" : "");
        printf("%7s", "threads");
        for (size_t e = 0; e < sw->nengines; e++) printf(" %38s", sw->engines[e]->name);
        for (size_t e = 1; e < sw->nengines; e++) printf("  %s/%s", sw->engines[0]->name, sw->engines[e]->name);
        printf("\n");
        for (int t = 0; t < sw->nthreads; t++) {
            printf("%7d", sw->threads[t]);
            for (size_t e = 0; e < sw->nengines; e++) {
                spread s = spread_of(sw, ops, e, t, b), one = spread_of(sw, ops, e, 0, b);
                printf(" ");
                print_rate(s.median);
                printf(" [");
                print_rate(s.lo);
                printf(" -");
                print_rate(s.hi);
                printf("] %5.2fx", one.median > 0 ? s.median / one.median : 0);
            }
            double own = spread_of(sw, ops, 0, t, b).median;
            for (size_t e = 1; e < sw->nengines; e++) {
                double peer = spread_of(sw, ops, e, t, b).median;
                int width = (int)(strlen(sw->engines[0]->name) + strlen(sw->engines[e]->name));
                printf("  %*.2fx", width, peer > 0 ? own / peer : 0);
            }
            printf("\n");
        }
    }
}

int bench_sweep_run(bench_sweep *sw) {
    bench_cfg c = *sw->cfg;
    char *list = strdup(c.benchmarks), *save = NULL;
    if (!list) return 3;
    sw->nbench = 0;
    for (char *name = strtok_r(list, ",", &save); name && sw->nbench < BENCH_MAX_BENCHMARKS;
         name = strtok_r(NULL, ",", &save))
        sw->names[sw->nbench++] = name;
    double *ops = calloc(sw->nengines * (size_t)sw->nthreads * (size_t)sw->rounds * BENCH_MAX_BENCHMARKS, sizeof *ops);
    FILE *raw = NULL;
    int rc = ops ? 0 : 3;
    if (!rc && sw->raw_path && !(raw = fopen(sw->raw_path, "w"))) {
        fprintf(stderr, "bench: --raw: cannot write %s: %s\n", sw->raw_path, strerror(errno));
        rc = 3;
    }
    int per_engine_dirs = c.db && sw->nengines > 1; /* each engine keeps its own database under --db */
    if (!rc && per_engine_dirs && bench_prepare_dir(c.db, "--db") != 0) rc = 3;
    if (raw) fprintf(raw, "# engine\tthreads\tround\tbenchmark\tops_per_sec\n");
    c.quiet = sw->nengines > 1 || sw->nthreads > 1 || sw->rounds > 1;
    for (int r = 0; !rc && r < sw->rounds; r++)
        for (int t = 0; !rc && t < sw->nthreads; t++)
            for (size_t i = 0; !rc && i < sw->nengines; i++) {
                size_t e = (i + (size_t)r) % sw->nengines;
                bench_cfg one = c;
                one.threads = sw->threads[t];
                char dir[4096];
                if (per_engine_dirs) {
                    snprintf(dir, sizeof dir, "%s/%s", c.db, sw->engines[e]->name);
                    one.db = dir;
                }
                if (!c.json) printf("--- %s, %d thread%s, round %d\n", sw->engines[e]->name, one.threads,
                                    one.threads > 1 ? "s" : "", r + 1);
                fflush(stdout);
                double run[BENCH_MAX_BENCHMARKS] = {0};
                size_t nb = 0;
                rc = bench_run_engine(one, sw->engines[e], run, &nb);
                for (size_t b = 0; !rc && b < nb && b < sw->nbench; b++) {
                    *at(sw, ops, e, t, r, b) = run[b];
                    if (raw)
                        fprintf(raw, "%s\t%d\t%d\t%s\t%.1f\n", sw->engines[e]->name, one.threads, r + 1,
                                sw->names[b], run[b]);
                }
            }
    if (raw && fclose(raw) != 0 && !rc) {
        fprintf(stderr, "bench: --raw: cannot write %s\n", sw->raw_path);
        rc = 3;
    }
    if (!rc) print_tables(sw, ops);
    if (!rc && sw->plot_dir) rc = plot(sw, ops);
    free(ops);
    free(list);
    return rc;
}
