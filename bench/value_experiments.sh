#!/usr/bin/env bash
# Reproduces the value-search experiments of docs/value-search.md (after
# Macyna & Ordonez, "A Bloom Filter Hierarchy for Non-key Search"): full
# scan vs flat leaf scan vs hierarchy vs bit-sliced index, over database
# sizes, hierarchy orders, filter sizes, value domains, the paper's
# one-filter-per-table layout, and the write cost of keeping the index.
#
#   bench/value_experiments.sh BLOOMKV_BENCH OUT_DIR [SCALE]
#
# SCALE=full (default) uses N = 1M, 10M, 30M (about 30 minutes and 4 GB
# of disk here); SCALE=small uses N = 100k, 300k, 1M (a minute). Results
# go to OUT_DIR/*.dat (whitespace columns) and OUT_DIR/*.png (gnuplot).
# ONLY=search (E1-E4), ONLY=write (E5), ONLY=plan (E6), ONLY=memory (E8:
# the paged index against the bit-sliced one at the defaults, warm and
# from a cold cache, absent values too) or ONLY=workloads (E9: overwrites
# and deletes without a final compaction, searches beside a writer, the
# paper's own layout; ONLY=paper runs that last one alone) runs one part. E8 and E9 go up to 30 M and 50 M
# entries (about an hour and 15 GB of disk in all).
set -eu
declare -A fills
B=$1
OUT=$2
SCALE=${3:-full}
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bkv-vx-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
if [ "$SCALE" = small ]; then SIZES="100000 300000 1000000"; MID=300000; BIG=1000000; PAPER="300000 1000000"
    SEARCHES=500; else
    SIZES="1000000 10000000 30000000"; MID=10000000; BIG=30000000; PAPER="10000000 50000000"; SEARCHES=1000; fi
PAPER=${PAPER_SIZES:-$PAPER} # E9c's sizes, e.g. PAPER_SIZES=10000000 for the first alone
RUNS=${RUNS:-5}     # E8, E9: alternated runs, reported each and as median and spread
COLD=${COLD:-300}   # searches per cold run (each reopens the database)
ORDERS="2 3 5 10"

num() { grep -o "\"$1\":[0-9.e+-]*" | head -1 | cut -d: -f2; }
# findvalue on an existing database: prints micros/op and the index figures.
search() { # DB N SHAPE ORDER PARAMS...
    local db=$1 n=$2 shape=$3 order=$4
    shift 4
    local line
    line=$("$B" db --db "$db" --use_existing_db --num "$n" --benchmarks findvalue --value_index "$shape" \
        --value_index_order "$order" --searches "$SEARCHES" --json "$@" 2>/dev/null | grep '"findvalue"')
    local leaves probed scanned matched vi inner_b leaf_b
    leaves=$(echo "$line" | num leaves)
    probed=$(echo "$line" | num leaves_probed)
    scanned=$(echo "$line" | num partitions_scanned)
    matched=$(echo "$line" | num partitions_matched)
    vi=$(echo "$line" | grep -o '"value_index":"[^"]*"')
    leaf_b=$(echo "$vi" | sed -n 's/.*leaves (\([0-9]*\) bytes).*/\1/p')
    inner_b=$(echo "$vi" | sed -n 's/.*inner nodes (\([0-9]*\) bytes.*/\1/p')
    echo "$(echo "$line" | num micros_per_op) $leaves $probed $scanned $matched ${leaf_b:-0} ${inner_b:-0}"
}
scan() { # DB N: the full scan's micros per search
    "$B" db --db "$1" --use_existing_db --num "$2" --benchmarks findvalue_scan --scan_searches 3 --json \
        2>/dev/null | grep '"findvalue_scan"' | num micros_per_op
}
fill() { # DB N PARAMS...: micros per fillrandom op
    local db=$1 n=$2
    shift 2
    "$B" db --db "$db" --num "$n" --benchmarks fillrandom,compact --json "$@" 2>/dev/null |
        grep '"fillrandom"' | num micros_per_op
}
best_order() { # file with "order micros ..." rows: the fastest row
    sort -k2 -g "$1" | head -1
}

# Parameters for partitioned filters: P = 256 entries per leaf, 64 bits
# per value, k = 4 (a leaf false-positive rate near 1e-5, and inner nodes
# that stay selective for a few levels).
P_ARGS="--value_filter_bits 16384 --value_partition_entries 256 --value_filter_hashes 4"

want() { [ -z "${ONLY:-}" ] || [ "$ONLY" = "$1" ]; }

if want search; then
echo "# E1: scale. N scan_us flat_us hier_us hier_order sliced_us leaves hier_probed_pct sliced_scanned leaf_bytes inner_bytes" >"$OUT/scale.dat"
for n in $SIZES; do
    db="$WORK/scale-$n"
    fill "$db" "$n" --value_index bitsliced $P_ARGS >/dev/null
    s=$(scan "$db" "$n")
    flat=$(search "$db" "$n" flat 2 $P_ARGS)
    : >"$WORK/orders"
    for d in $ORDERS; do echo "$d $(search "$db" "$n" hierarchy "$d" $P_ARGS)" >>"$WORK/orders"; done
    set -- $(best_order "$WORK/orders")
    hd=$1 hus=$2 leaves=$3 hprobed=$4 inner=$8
    sliced=$(search "$db" "$n" bitsliced 2 $P_ARGS)
    set -- $sliced
    echo "$n $s $(echo "$flat" | cut -d' ' -f1) $hus $hd $1 $leaves $(awk "BEGIN{printf \"%.3f\", 100*$hprobed/$leaves}") $4 $6 $inner" >>"$OUT/scale.dat"
    [ "$n" = "$MID" ] || rm -rf "$db"
    echo "scale $n done" >&2
done

# E2: order d x filter size m at the middle size (P = 256, k = 4).
echo "# E2: m d hier_us leaves probed_pct partitions_scanned flat_us sliced_us inner_bytes" >"$OUT/order.dat"
for m in 4096 16384 65536; do
    db="$WORK/m-$m"
    if [ "$m" = 16384 ]; then db="$WORK/scale-$MID"; else
        fill "$db" "$MID" --value_index bitsliced --value_filter_bits "$m" --value_partition_entries 256 \
            --value_filter_hashes 4 >/dev/null; fi
    args="--value_filter_bits $m --value_partition_entries 256 --value_filter_hashes 4"
    flat=$(search "$db" "$MID" flat 2 $args | cut -d' ' -f1)
    sliced=$(search "$db" "$MID" bitsliced 2 $args | cut -d' ' -f1)
    for d in $ORDERS; do
        set -- $(search "$db" "$MID" hierarchy "$d" $args)
        echo "$m $d $1 $2 $(awk "BEGIN{printf \"%.3f\", 100*$3/$2}") $4 $flat $sliced $7" >>"$OUT/order.dat"
    done
    [ "$m" = 16384 ] || rm -rf "$db"
    echo "order m=$m done" >&2
done

# E3: the paper's layout, one filter per table (P = 0), m = 2^21 bits.
echo "# E3: d hier_us leaves probed_pct partitions_scanned flat_us sliced_us scan_us leaf_bytes inner_bytes" >"$OUT/paper.dat"
db="$WORK/paper"
args="--value_filter_bits 2097152 --value_partition_entries 0 --value_filter_hashes 4"
fill "$db" "$MID" --value_index hierarchy $args >/dev/null
flat=$(search "$db" "$MID" flat 2 $args | cut -d' ' -f1)
sliced=$(search "$db" "$MID" bitsliced 2 $args | cut -d' ' -f1)
s=$(scan "$db" "$MID")
for d in $ORDERS; do
    set -- $(search "$db" "$MID" hierarchy "$d" $args)
    echo "$d $1 $2 $(awk "BEGIN{printf \"%.3f\", 100*$3/$2}") $4 $flat $sliced $s $6 $7" >>"$OUT/paper.dat"
done
rm -rf "$db"
echo "paper layout done" >&2

# E4: value domains (1%, 10%, 100% distinct values) at the middle size.
echo "# E4: distinct_pct scan_us flat_us hier_us sliced_us results partitions_scanned" >"$OUT/domain.dat"
for pct in 1 10 100; do
    db="$WORK/dom-$pct"
    if [ "$pct" = 100 ]; then db="$WORK/scale-$MID"; else
        fill "$db" "$MID" --value_index bitsliced $P_ARGS --value_distinct "$pct" >/dev/null; fi
    s=$(scan "$db" "$MID")
    flat=$(search "$db" "$MID" flat 2 $P_ARGS --value_distinct "$pct" | cut -d' ' -f1)
    hier=$(search "$db" "$MID" hierarchy 3 $P_ARGS --value_distinct "$pct" | cut -d' ' -f1)
    set -- $(search "$db" "$MID" bitsliced 2 $P_ARGS --value_distinct "$pct")
    echo "$pct $s $flat $hier $1 $(awk "BEGIN{printf \"%.0f\", 100/$pct}") $4" >>"$OUT/domain.dat"
    rm -rf "$db"
    echo "domain $pct% done" >&2
done
fi

# E5: the write cost of the index at its defaults: fillrandom with none,
# the bit-sliced index, the hierarchy (d = 3) and the paged index, alternated; with the
# index's own background time and, for the hierarchy, the inner nodes
# recomputed over how many updates.
fill_counters() { # DB N PARAMS...: micros/op, index update seconds, nodes recomputed, updates
    local db=$1 n=$2 line
    shift 2
    line=$("$B" db --db "$db" --num "$n" --benchmarks fillrandom,compact --json "$@" 2>/dev/null | grep '"fillrandom"')
    echo "$(echo "$line" | num micros_per_op) $(awk "BEGIN{printf \"%.2f\", $(echo "$line" | num value-index-update-micros)/1e6}") $(echo "$line" | num value-index-nodes-recomputed) $(echo "$line" | num value-index-updates)"
}
if want write; then
echo "# E5: run none_us bitsliced_us hierarchy_us bitsliced_update_s hierarchy_update_s hierarchy_nodes_recomputed hierarchy_updates paged_us" >"$OUT/write.dat"
for run in $(seq "$RUNS"); do
    a=$(fill "$WORK/w" "$MID" --value_index none)
    set -- $(fill_counters "$WORK/w" "$MID" --value_index bitsliced)
    b=$1 bu=$2
    set -- $(fill_counters "$WORK/w" "$MID" --value_index hierarchy --value_index_order 3)
    h="$1 $bu $2 $3 $4"
    p=$(fill "$WORK/w" "$MID" --value_index paged)
    echo "$run $a $b $h $p" >>"$OUT/write.dat"
done
fi

# E6: the plan by selectivity, at the defaults (bit-sliced, P = 512): from
# one match per search to every entry matching, the chosen plan against
# each plan forced, at 1 M entries and the middle size.
plan_search() { # DB N PLAN SEARCHES DISTINCT_PCT: micros per search, results per search, share of scan plans
    local line
    line=$("$B" db --db "$1" --use_existing_db --num "$2" --benchmarks findvalue --value_index bitsliced \
        --find_plan "$3" --searches "$4" --value_distinct "$5" --json 2>/dev/null | grep '"findvalue"')
    echo "$(echo "$line" | num micros_per_op) $(echo "$line" | num results) $(echo "$line" | num plan_scan)"
}
if want plan; then
echo "# E6: n matched_fraction value_distinct_pct results auto_us index_us scan_us auto_over_best auto_scan_share" >"$OUT/plan.dat"
for n in $(echo "$SIZES" | cut -d' ' -f1) $MID; do
    for f in 1e-9 0.0001 0.001 0.01 0.1 1; do
        pct=$(awk "BEGIN{p = 100 / ($f * $n); if (p > 100) p = 100; printf \"%.8f\", p}")
        searches=$(awk "BEGIN{print ($f >= 0.01) ? 3 : ($f >= 0.001 ? 20 : 200)}")
        db="$WORK/plan"
        "$B" db --db "$db" --num "$n" --benchmarks fillrandom,compact --value_index bitsliced \
            --value_distinct "$pct" >/dev/null 2>&1
        set -- $(plan_search "$db" "$n" auto "$searches" "$pct")
        auto=$1 results=$2 share=$3
        index=$(plan_search "$db" "$n" index "$searches" "$pct" | cut -d' ' -f1)
        scanned=$(plan_search "$db" "$n" scan 3 "$pct" | cut -d' ' -f1)
        echo "$n $f $pct $results $auto $index $scanned $(awk "BEGIN{b = $index < $scanned ? $index : $scanned; printf \"%.2f\", $auto / b}") $share" >>"$OUT/plan.dat"
        rm -rf "$db"
        echo "plan $n $f done" >&2
    done
done
fi
rm -rf "$WORK/w"

# One findvalue-family benchmark on an existing database: micros/op, p50,
# p99, p999, mean cold open ms (0 when warm), index bytes, found.
measure() { # DB N SHAPE BENCHMARK SEARCHES PARAMS...
    local db=$1 n=$2 shape=$3 bm=$4 searches=$5 line
    shift 5
    line=$("$B" db --db "$db" --use_existing_db --num "$n" --benchmarks "$bm" --value_index "$shape" \
        --searches "$searches" --compact_for_reads 0 --json "$@" 2>/dev/null | grep "\"$bm\"")
    local f v out=""
    for f in micros_per_op p50_us p99_us p999_us cold_open_ms value_index_memory_bytes found; do
        v=$(echo "$line" | num $f)
        out="$out ${v:-0}"
    done
    echo $out
}

# Reads every file of a database, so that warm figures are warm even
# after a cold run dropped its pages.
warm_up() { cat "$1"/* >/dev/null; }

# E8: bounded memory. The paged index (summaries in memory, rows on disk)
# against the bit-sliced one (every filter in memory) at the defaults, at
# the middle and the largest size: warm searches (the page cache holding
# the database), the paged index from a cold cache (each search on the
# database reopened with its pages dropped: what stays in memory is the
# summaries and partition starts), and values nobody holds.
if want memory; then
echo "# E8: n shape run fill_us warm_us warm_p50 warm_p99 warm_p999 cold_us cold_p50 cold_p99 cold_p999 open_ms index_bytes absent_us absent_p99" >"$OUT/memory.dat"
for n in $MID $BIG; do
    for shape in paged bitsliced; do
        fills[$shape]=$(fill "$WORK/mem-$shape" "$n" --value_index $shape)
    done
    for run in $(seq "$RUNS"); do
        for shape in paged bitsliced; do
            db="$WORK/mem-$shape"
            warm_up "$db"
            set -- $(measure "$db" "$n" $shape findvalue 2000 --histogram)
            warm="$1 $2 $3 $4" bytes=$6
            set -- $(measure "$db" "$n" $shape findvalue_absent 2000 --histogram)
            absent="$1 $3"
            cold="- - - - -"
            if [ $shape = paged ]; then
                set -- $(measure "$db" "$n" $shape findvalue "$COLD" --cold --histogram)
                cold="$1 $2 $3 $4 $5"
            fi
            echo "$n $shape $run ${fills[$shape]} $warm $cold $bytes $absent" >>"$OUT/memory.dat"
        done
    done
    rm -rf "$WORK"/mem-*
    echo "memory $n done" >&2
done
fi

# E9: the workloads users meet, at the middle size, paged and bit-sliced:
# (a) overwrites and deletes with no final compaction (fillrandom, then
# overwrite and deleterandom of as many random keys: about 37% of the
# keys stay, every level holds versions), then only the compactions that
# are due (bench's "compact", bkv_compact: no level over its target; not a
# full compaction). Without that step the state measured was wherever the
# fill stopped: the cold runs reopen the database before every search, so
# a background compaction never finishes, and one fill left 1 table in
# level 0 where another left 8 (3.4 against 13.4 tables' summaries saying
# "maybe" a search, 2 against 4-5 ms cold); (b) searches while
# a writer overwrites at full speed; and (c) the paper's own layout: 2 MB
# tables of ~29-byte entries (13-byte keys, 16-byte values), one filter
# of m = 2^21 bits per table (P = 0, k = 4), searched from a cold cache
# by the paper's hierarchy and by the paged index.
if want workloads; then
echo "# E9a: shape run fill_us warm_us warm_p50 warm_p99 warm_p999 cold_us cold_p50 cold_p99 cold_p999 open_ms found" >"$OUT/churn.dat"
for shape in paged bitsliced; do
    fill_us=$("$B" db --db "$WORK/churn-$shape" --num "$MID" --benchmarks fillrandom,overwrite,deleterandom,compact \
        --value_index $shape --json 2>/dev/null | grep '"fillrandom"' | num micros_per_op)
    fills[$shape]=$fill_us
done
for run in $(seq "$RUNS"); do
    for shape in paged bitsliced; do
        db="$WORK/churn-$shape"
        warm_up "$db"
        set -- $(measure "$db" "$MID" $shape findvalue 2000 --histogram)
        warm="$1 $2 $3 $4" found=$7
        cold="- - - - -"
        if [ $shape = paged ]; then
            set -- $(measure "$db" "$MID" $shape findvalue "$COLD" --cold --histogram)
            cold="$1 $2 $3 $4 $5"
        fi
        echo "$shape $run ${fills[$shape]} $warm $cold $found" >>"$OUT/churn.dat"
    done
done
echo "# E9b: shape run idle_us idle_p50 idle_p99 idle_p999 writing_us writing_p50 writing_p99 writing_p999 writer_puts_per_s" >"$OUT/writing.dat"
for run in $(seq "$RUNS"); do
    for shape in paged bitsliced; do
        warm_up "$WORK/churn-$shape"
        line=$("$B" db --db "$WORK/churn-$shape" --use_existing_db --num "$MID" --value_index $shape \
            --benchmarks findvalue,findvaluewhilewriting --searches 5000 --compact_for_reads 0 --histogram --json 2>/dev/null)
        idle=$(echo "$line" | grep '"findvalue"')
        busy=$(echo "$line" | grep '"findvaluewhilewriting"')
        echo "$shape $run $(for f in micros_per_op p50_us p99_us p999_us; do echo "$idle" | num $f; done | tr '\n' ' ')" \
            "$(for f in micros_per_op p50_us p99_us p999_us writer_ops_per_sec; do echo "$busy" | num $f; done | tr '\n' ' ')" >>"$OUT/writing.dat"
    done
done
rm -rf "$WORK"/churn-*
echo "churn and writing done" >&2
fi
if want workloads || want paper; then
echo "# E9c: n shape run fill_us tables cold_us cold_p50 cold_p99 cold_p999 open_ms index_bytes warm_us" >"$OUT/paper-layout.dat"
PL="--key_size 13 --value_size 16 --target_file_size 2097152 --value_filter_bits 2097152 --value_partition_entries 0 --value_filter_hashes 4"
for n in $PAPER; do
    for shape in hierarchy paged; do
        fills[$shape]=$(fill "$WORK/pl-$shape" "$n" --value_index $shape $PL)
    done
    for run in $(seq "$RUNS"); do
        for shape in hierarchy paged; do
            db="$WORK/pl-$shape"
            tables=$(ls "$db" | grep -c 'sst$')
            set -- $(measure "$db" "$n" $shape findvalue "$((COLD / 3))" --cold --histogram --value_index_order 3 $PL)
            cold="$1 $2 $3 $4 $5" bytes=$6
            warm_up "$db"
            warm=$(measure "$db" "$n" $shape findvalue 500 --value_index_order 3 $PL | cut -d' ' -f1)
            echo "$n $shape $run ${fills[$shape]} $tables $cold $bytes $warm" >>"$OUT/paper-layout.dat"
        done
    done
    rm -rf "$WORK"/pl-*
    echo "paper layout $n done" >&2
done
fi

if want search && command -v gnuplot >/dev/null; then
    gnuplot <<GP
set terminal png size 900,520
set grid
set output '$OUT/scale.png'
set title 'Search by value: time per search (unique values, P = 256, m = 16384, k = 4)'
set logscale xy
set xlabel 'entries'
set ylabel 'microseconds per search'
set key top left
plot '$OUT/scale.dat' using 1:2 with linespoints title 'full scan', \
     '' using 1:3 with linespoints title 'flat leaf scan', \
     '' using 1:4 with linespoints title 'hierarchy (best order)', \
     '' using 1:6 with linespoints title 'bit-sliced'
set output '$OUT/order.png'
set title 'Hierarchy: time per search by order d and filter size m ($MID entries, P = 256)'
unset logscale x
set logscale y
set xlabel 'order d'
plot for [m in "4096 16384 65536"] '$OUT/order.dat' using (\$1==m ? \$2 : 1/0):3 with linespoints title 'hierarchy, m = '.m, \
     '$OUT/order.dat' using (\$1==65536 ? \$2 : 1/0):7 with lines dashtype 2 title 'flat, m = 65536', \
     '$OUT/order.dat' using (\$1==65536 ? \$2 : 1/0):8 with lines dashtype 3 title 'bit-sliced, m = 65536'
set output '$OUT/order_probed.png'
set title 'Hierarchy: share of leaf filters probed ($MID entries, P = 256)'
set ylabel 'percent of leaves probed'
plot for [m in "4096 16384 65536"] '$OUT/order.dat' using (\$1==m ? \$2 : 1/0):5 with linespoints title 'm = '.m
set output '$OUT/domain.png'
set title 'Time per search by value domain ($MID entries)'
set logscale xy
set xlabel 'distinct values, percent of entries'
set ylabel 'microseconds per search'
plot '$OUT/domain.dat' using 1:2 with linespoints title 'full scan', \
     '' using 1:3 with linespoints title 'flat', '' using 1:4 with linespoints title 'hierarchy d = 3', \
     '' using 1:5 with linespoints title 'bit-sliced'
GP
fi
echo "results in $OUT" >&2
