#ifndef BKV_FILTER_BENCH_H
#define BKV_FILTER_BENCH_H

/* `bloomkv-bench filters`: argv[0] is "filters". Returns an exit status. */
int bkv_filter_bench_main(int argc, char **argv);

#endif
