#ifndef BKV_DB_BENCH_H
#define BKV_DB_BENCH_H

/* `bloomkv bench`: argv[0] is "bench". Returns an exit status. */
int bkv_db_bench_main(int argc, char **argv);

#endif
