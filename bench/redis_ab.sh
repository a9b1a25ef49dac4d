#!/usr/bin/env bash
# Two (or more) builds of the Redis module against each other on one
# command, rounds alternated, a fresh server per round (docs/redis.md):
# what a change to the module costs BKV.SET or BKV.GET, with this host's
# drift spread over every build alike.
#
#   bench/redis_ab.sh ROUNDS SET|GET MODULE...
#
# SET: redis-benchmark -n N -P 16 -c 4 of BKV.SET on keys drawn from 1 M
# (N from the environment, default 300000, as bench/redis_bench.sh).
# GET: the same number of BKV.SETs first, then as many BKV.GETs.
# Prints "round module ops/s" per run, then each module's median and range.
# Servers listen on 127.0.0.1 on free ports and are stopped by their pid.
set -eu
usage() {
    echo "usage: bench/redis_ab.sh ROUNDS SET|GET MODULE...   (ROUNDS >= 1; each MODULE a built bloomkv_redis.so)" >&2
    exit 2
}
[ $# -ge 3 ] || usage
ROUNDS=$1
WHAT=$2
shift 2
case "$ROUNDS" in '' | *[!0-9]* | 0) usage ;; esac
case "$WHAT" in SET | GET) ;; *) usage ;; esac
for m in "$@"; do [ -f "$m" ] || { echo "redis_ab.sh: no module at $m" >&2; exit 2; }; done
OPS=${N:-300000}
PIPE=16
. "$(dirname "$0")/redis_servers.sh"
bench_work bkv-rab

for r in $(seq "$ROUNDS"); do
    for m in "$@"; do
        rm -rf "$WORK/s"
        port=$(start_server s --loadmodule "$(readlink -f "$m")" dir "$WORK/s/data")
        if [ "$WHAT" = GET ]; then
            rps "$port" BKV.SET key:__rand_int__ "$VALUE" >/dev/null
            x=$(rps "$port" BKV.GET key:__rand_int__)
        else
            x=$(rps "$port" BKV.SET key:__rand_int__ "$VALUE")
        fi
        echo "$r $m $x" | tee -a "$WORK/runs"
        stop_server s
    done
done
for m in "$@"; do
    awk -v m="$m" '$2 == m { print $3 }' "$WORK/runs" | sort -n | awk -v m="$m" '{ a[NR] = $1 } END {
        med = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
        printf "%s: median %d ops/s, range %d-%d, %d rounds\n", m, med, a[1], a[NR], NR
    }'
done
