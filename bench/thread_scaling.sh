#!/usr/bin/env bash
# Two threads against one, beside two processes against one.
#
#   bench/thread_scaling.sh BLOOMKV_BENCH [N] [ROUNDS] [ENGINE] > table.txt
#
# A ratio of two threads to one mixes what the engine shares between
# threads with what the machine shares between its cores (caches, memory
# bandwidth, a hypervisor's sibling threads). Two processes, each on its
# own copy of the database, share nothing of the engine: their summed rate
# over one process's is what this machine gives two independent workers.
# Each round runs, in turn: one thread, two processes at once, two
# threads in one process.
#   reads: readrandom and readmissing, 4 x N gets per run, over a copy of
#          one database filled and compacted beforehand (N keys);
#   writes: fillrandom of N keys into a fresh database (each process its
#          own N keys, so each pays a full database's flushes and
#          compactions, as the one process does).
# Prints one line per round and benchmark, then medians:
#   benchmark round one_thread two_processes two_threads processes/one threads/one threads/processes
set -eu
B=$1
N=${2:-1000000}
ROUNDS=${3:-5}
ENGINE=${4:-bloomkv}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bkv-scale-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
rate() { grep -o '"ops_per_sec":[0-9.]*' | head -1 | cut -d: -f2; }
bench() { # DB BENCHMARK THREADS: ops per second
    local db=$1 what=$2 threads=$3 args
    if [ "$what" = fillrandom ]; then
        rm -rf "$db"
        args="--num $N"
    else
        args="--use_existing_db --num $N --reads $((4 * N)) --compact_for_reads 0"
    fi
    # shellcheck disable=SC2086
    "$B" db --engine "$ENGINE" --db "$db" $args --threads "$threads" --benchmarks "$what" --json 2>/dev/null | rate
}
"$B" db --engine "$ENGINE" --db "$WORK/a" --num "$N" --benchmarks fillrandom,compact >/dev/null 2>&1
cp -r "$WORK/a" "$WORK/b"
echo "# benchmark round one_thread two_processes two_threads processes/one threads/one threads/processes"
for round in $(seq "$ROUNDS"); do
    for what in readrandom readmissing fillrandom; do
        a=$WORK/a b=$WORK/b
        [ "$what" = fillrandom ] && a=$WORK/fa b=$WORK/fb
        one=$(bench "$a" "$what" 1)
        bench "$a" "$what" 1 >"$WORK/pa" &
        pa=$!
        bench "$b" "$what" 1 >"$WORK/pb" &
        pb=$!
        wait "$pa" "$pb"
        two_proc=$(awk '{s += $1} END {printf "%.0f", s}' "$WORK/pa" "$WORK/pb")
        two_thr=$(bench "$a" "$what" 2)
        awk -v w="$what" -v r="$round" -v o="$one" -v p="$two_proc" -v t="$two_thr" \
            'BEGIN {printf "%s %d %.0f %.0f %.0f %.2f %.2f %.2f\n", w, r, o, p, t, p / o, t / o, t / p}'
    done
done | tee "$WORK/rows"
echo "# medians"
median() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for what in readrandom readmissing fillrandom; do
    line="$what median"
    for c in 3 4 5 6 7 8; do
        line="$line $(awk -v w="$what" -v c="$c" '$1 == w {print $c}' "$WORK/rows" | median)"
    done
    echo "$line"
done
