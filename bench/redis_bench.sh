#!/usr/bin/env bash
# The Redis module against Redis's own types, on one node of this machine
# (docs/redis.md): throughput of BKV.* and BF.* as ratios of the native
# commands in the same run (redis-benchmark, pipelined), and the anonymous
# memory of N rows of 100-byte values in bloomkv vs in native strings.
#
#   bench/redis_bench.sh MODULE [N]        (N rows for the memory test, default 1000000)
#
# Servers listen on 127.0.0.1 on free ports and are stopped by their pid.
set -eu
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
    echo "usage: bench/redis_bench.sh MODULE [N]   (MODULE: a built bloomkv_redis.so)" >&2
    exit 2
fi
MODULE=$(readlink -f "$1")
N=${2:-1000000}
OPS=${OPS:-300000}
PIPE=${PIPE:-16}
. "$(dirname "$0")/redis_servers.sh"
bench_work bkv-rbench

NATIVE=$(start_server native)
BKV=$(start_server bkv --loadmodule "$MODULE" dir "$WORK/bkv/data" ${MODULE_ARGS:-})

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
row() { printf "%-34s %12s %12s %8s\n" "$1" "$2" "$3" "$(ratio "$2" "$3")"; }

echo "redis-benchmark: $OPS requests, pipeline $PIPE, 4 clients, keys from 1 M; ops/s"
printf "%-34s %12s %12s %8s\n" "bloomkv command vs native" "bloomkv" "native" "ratio"
row "BKV.SET vs SET" "$(rps "$BKV" BKV.SET key:__rand_int__ "$VALUE")" "$(rps "$NATIVE" SET key:__rand_int__ "$VALUE")"
# GET reads keys that are there: every key __rand_int__ can name is
# written first (the SET run above leaves about a quarter of them).
fill_keys() {
    awk -v cmd="$2" -v val="$VALUE" 'BEGIN {
        for (i = 0; i < 1000000; i++) {
            k = sprintf("key:%012d", i)
            printf "*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(cmd), cmd, length(k), k, length(val), val
        }
    }' | redis-cli -p "$1" --pipe >/dev/null
}
fill_keys "$NATIVE" SET
fill_keys "$BKV" BKV.SET
row "BKV.GET (present) vs GET" "$(rps "$BKV" BKV.GET key:__rand_int__)" "$(rps "$NATIVE" GET key:__rand_int__)"
row "BKV.EXISTS (absent) vs EXISTS" "$(rps "$BKV" BKV.EXISTS miss:__rand_int__)" "$(rps "$NATIVE" EXISTS miss:__rand_int__)"
row "BF.ADD vs SADD" "$(rps "$BKV" BF.ADD bf __rand_int__)" "$(rps "$NATIVE" SADD set __rand_int__)"
row "BF.EXISTS vs SISMEMBER" "$(rps "$BKV" BF.EXISTS bf __rand_int__)" "$(rps "$NATIVE" SISMEMBER set __rand_int__)"

# Memory: N distinct rows, loaded with redis-cli --pipe.
load() {
    local port=$1 cmd=$2
    awk -v n="$N" -v cmd="$cmd" -v val="$VALUE" 'BEGIN {
        for (i = 0; i < n; i++) {
            k = sprintf("row:%012d", i)
            printf "*3\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(cmd), cmd, length(k), k, length(val), val
        }
    }' | redis-cli -p "$port" --pipe >/dev/null
}
rss_anon() { awk '/RssAnon/ {print $2}' "/proc/$(cat "$WORK/$1/pid")/status"; }
# Resident pages of files the server maps: the module's tables.
rss_file() { awk '/RssFile/ {print $2}' "/proc/$(cat "$WORK/$1/pid")/status"; }
# Fresh servers: memory a FLUSHALL frees stays with the allocator and
# would hide what the load takes.
NATIVE=$(start_server native-memory)
BKV=$(start_server bkv-memory --loadmodule "$MODULE" dir "$WORK/bkv-memory/data" ${MODULE_ARGS:-})
base_native=$(rss_anon native-memory)
base_bkv=$(rss_anon bkv-memory)
base_bkv_file=$(rss_file bkv-memory)
load "$NATIVE" SET
load "$BKV" BKV.SET
redis-cli -p "$BKV" BKV.COMPACT >/dev/null
n_native=$(redis-cli -p "$NATIVE" dbsize)
echo
echo "memory, $N rows of 100-byte values (RssAnon; native holds $n_native keys)"
mem_native=$(( $(rss_anon native-memory) - base_native ))
mem_bkv=$(( $(rss_anon bkv-memory) - base_bkv ))
mem_bkv_file=$(( $(rss_file bkv-memory) - base_bkv_file ))
printf "%-34s %10d KiB\n" "native strings" "$mem_native" "bloomkv module" "$mem_bkv" \
    "bloomkv's mapped table pages" "$mem_bkv_file"
awk -v a="$mem_bkv" -v b="$mem_native" -v f="$mem_bkv_file" 'BEGIN {
    printf "bloomkv / native: %.1f%% anonymous, %.1f%% with its mapped table pages (the kernel may drop those)\n",
        100 * a / b, 100 * (a + f) / b }'
