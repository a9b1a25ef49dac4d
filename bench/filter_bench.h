#ifndef BKV_FILTER_BENCH_H
#define BKV_FILTER_BENCH_H

/* `bloomkv filter-bench`: argv[0] is "filter-bench". Returns an exit status. */
int bkv_filter_bench_main(int argc, char **argv);

#endif
