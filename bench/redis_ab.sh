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
ROUNDS=$1
WHAT=$2
shift 2
N=${N:-300000}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bkv-rab-XXXXXX")
PID=
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
VALUE=$(head -c 100 /dev/zero | tr '\0' 'v')
rps() {
    redis-benchmark -p "$1" -n "$N" -P 16 -r 1000000 -c 4 --csv "${@:2}" 2>/dev/null | awk -F'"' 'NR==2 {print int($4)}'
}

for r in $(seq "$ROUNDS"); do
    for m in "$@"; do
        rm -rf "$WORK/s"
        mkdir -p "$WORK/s"
        port=$(free_port)
        redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/s" --save "" --appendonly no --logfile server.log \
            --loadmodule "$(readlink -f "$m")" dir "$WORK/s/data" >/dev/null 2>&1 &
        PID=$!
        for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
        if [ "$WHAT" = GET ]; then
            rps "$port" BKV.SET key:__rand_int__ "$VALUE" >/dev/null
            x=$(rps "$port" BKV.GET key:__rand_int__)
        else
            x=$(rps "$port" BKV.SET key:__rand_int__ "$VALUE")
        fi
        echo "$r $m $x"
        kill "$PID"
        wait "$PID" 2>/dev/null || true
        PID=
    done
done | tee "$WORK/runs"
for m in "$@"; do
    awk -v m="$m" '$2 == m { print $3 }' "$WORK/runs" | sort -n | awk -v m="$m" '{ a[NR] = $1 } END {
        med = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
        printf "%s: median %d ops/s, range %d-%d, %d rounds\n", m, med, a[1], a[NR], NR
    }'
done
