#!/usr/bin/env bash
# bloomkv's value index against the composite-key secondary index users
# build by hand (value + key -> "", written in the row's batch), on
# bloomkv, LevelDB and RocksDB, through `bloomkv-bench db`:
# write throughput, bytes on disk and lookup latency for a unique value
# and for 1% and 10% value domains (that share of the entries distinct).
#
#   bench/secondary_index.sh BLOOMKV_BINARY [N] > table.txt
#
# N defaults to 2000000. Prints one line per configuration:
#   engine index distinct_pct fill_us db_bytes peak_rss findvalue_us results_per_search first_findvalue_us
# Each configuration searches twice in the process that filled it: the
# first pass (first_findvalue_us) pays for every table's first open, index
# read and block checksums in that process; the second (findvalue_us) is
# what a process that has been serving searches meets.
set -eu
B=$1
N=${2:-2000000}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bkv-si-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
num() { grep -o "\"$1\":[0-9.e+-]*" | head -1 | cut -d: -f2; }
run() { # ENGINE INDEX DISTINCT ARGS...: with INDEX none, the fill alone
    local engine=$1 index=$2 pct=$3 out fill first last benchmarks=fillrandom,compact,findvalue,findvalue
    shift 3
    [ "$index" = none ] && benchmarks=fillrandom,compact
    rm -rf "$WORK/db"
    out=$("$B" db --engine "$engine" --db "$WORK/db" --num "$N" --benchmarks "$benchmarks" \
        --value_distinct "$pct" --searches 500 --json "$@" 2>/dev/null)
    fill=$(echo "$out" | grep '"benchmark":"fillrandom"')
    first=$(echo "$out" | grep '"benchmark":"findvalue"' | head -1)
    last=$(echo "$out" | tail -1)
    echo "$engine $index $pct $(echo "$fill" | num micros_per_op) $(echo "$last" | num db_size_bytes)" \
        "$(echo "$last" | num peak_rss_bytes)" \
        "$([ "$index" = none ] && echo - || echo "$last" | num micros_per_op)" \
        "$(awk "BEGIN{printf \"%.0f\", 100 / $pct}")" \
        "$([ "$index" = none ] && echo - || echo "$first" | num micros_per_op)"
}
echo "# engine index distinct_pct fill_us db_bytes peak_rss findvalue_us results_per_search first_findvalue_us"
for engine in bloomkv leveldb rocksdb; do
    for pct in 100 10 1; do
        run "$engine" composite "$pct" --secondary_index composite
    done
    run "$engine" none 100
done
for shape in bitsliced paged; do
    for pct in 100 10 1; do
        run bloomkv "value-index-$shape" "$pct" --value_index "$shape"
    done
done
