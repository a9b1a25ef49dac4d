#ifndef BKV_DB_BENCH_H
#define BKV_DB_BENCH_H

#include <stddef.h>

#include "bench_engine.h"

/* `bloomkv-bench db`: argv[0] is "db". Returns an exit status. */
int bkv_db_bench_main(int argc, char **argv);

#define BENCH_MAX_BENCHMARKS 32
#define BENCH_MAX_THREAD_COUNTS 8
#define BENCH_MAX_ROUNDS 15

/* Runs the benchmarks of c on one engine, in a fresh directory (or c.db);
 * fills ops_per_sec per benchmark. Returns an exit status. */
int bench_run_engine(bench_cfg c, const bench_engine *eng, double *ops_per_sec, size_t *nbench);

/* Makes dir (one level) unless it exists as a directory; what names the
 * flag in the message. 0 or -1. */
int bench_prepare_dir(const char *dir, const char *what);

/* Several engines (--compare), thread counts (--threads 1,2,4) and
 * rounds (--rounds N): see bench_sweep.c. */
typedef struct bench_sweep {
    const bench_cfg *cfg;
    const bench_engine *engines[3];
    size_t nengines;
    int threads[BENCH_MAX_THREAD_COUNTS];
    int nthreads;
    int rounds;
    const char *plot_dir; /* NULL: no chart */
    const char *raw_path; /* NULL: no raw figures */
    char *names[BENCH_MAX_BENCHMARKS]; /* filled by bench_sweep_run */
    size_t nbench;
} bench_sweep;

int bench_sweep_run(bench_sweep *sw);

#endif
