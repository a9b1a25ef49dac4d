#!/usr/bin/env bash
# The benchmark's engines answer correctly on a small run (its tables
# settled by compact): every readrandom get finds its key, no readmissing
# get does, readseq sees every key once, every search by value finds the
# key it came from (through bloomkv's value index, or a full scan
# elsewhere), and the key filters' false positives are reported.
set -u
B="$1"
pass=0 fail=0
for engine in bloomkv leveldb rocksdb; do
    out=$("$B" db --engine "$engine" --num 20000 --reads 5000 \
        --benchmarks fillrandom,compact,readrandom,readmissing,readseq,multireadrandom,findvalue,findvalue_first,findvalue_and,findvalue_scan \
        --value_index hierarchy --searches 200 --scan_searches 2 --filter_stats --json 2>/dev/null)
    status=$?
    if [ $status -eq 2 ] && [ "$engine" != bloomkv ]; then
        echo "skip: $engine not built in"
        continue
    fi
    field() { echo "$out" | grep "\"benchmark\":\"$1\"" | grep -o "\"$2\":[0-9]*" | cut -d: -f2; }
    check() {
        if [ "$2" = "$3" ]; then pass=$((pass + 1)); else
            fail=$((fail + 1))
            echo "FAIL: $engine $1: got '$2', wanted '$3'"
        fi
    }
    check "exit status" "$status" 0
    check "readrandom found" "$(field readrandom found)" 5000
    check "readmissing found" "$(field readmissing found)" 0
    check "readseq found" "$(field readseq found)" 20000
    check "multireadrandom found" "$(field multireadrandom found)" 5000
    check "findvalue_scan found" "$(field findvalue_scan found)" 2
    if [ "$engine" != leveldb ]; then
        # Key filters' false positives per read benchmark (RocksDB's from
        # its statistics, kept with --filter_stats): ~1% at 10 bits a key.
        check "readmissing filter probes reported" "$(field readmissing filter_probes_run | grep -c '^[1-9]')" 1
        fpr=$(echo "$out" | grep '"benchmark":"readmissing"' | grep -o '"filter_fpr_pct":[0-9.]*' | cut -d: -f2)
        check "readmissing filter rate near 1%" "$(awk "BEGIN{print (\"${fpr:-x}\" + 0 > 0.2 && \"${fpr:-x}\" + 0 < 3)}")" 1
    fi
    if [ "$engine" = bloomkv ]; then
        check "findvalue found" "$(field findvalue found)" 200
        check "findvalue results" "$(echo "$out" | grep '"benchmark":"findvalue"' | grep -o '"results":[0-9.]*' | cut -d: -f2)" 1.000
        check "findvalue_first found" "$(field findvalue_first found)" 200
        check "findvalue_and found" "$(field findvalue_and found)" 200
    else
        check "findvalue (a scan) found" "$(field findvalue found)" 2
        check "findvalue_first (a scan) found" "$(field findvalue_first found)" 2
        check "findvalue_and (a scan) found" "$(field findvalue_and found)" 2
    fi
    # The composite-key secondary index users build by hand: every search
    # finds its key through the index, on every engine.
    out=$("$B" db --engine "$engine" --num 5000 --benchmarks fillrandom,overwrite,findvalue \
        --secondary_index composite --searches 200 --json 2>/dev/null)
    check "composite index exit status" "$?" 0
    check "composite index findvalue found" "$(field findvalue found)" 200
    # Range benchmarks over keys spread across 2^64: no empty range holds a
    # key, every scan finds its keys (bloomkv with range filters).
    out=$("$B" db --engine "$engine" --num 5000 --reads 2000 --key_space spread --range_filter 16 \
        --benchmarks fillrandom,compact,rangeempty,rangecorrelated,rangescan --seek_nexts 5 --json 2>/dev/null)
    check "range benchmarks exit status" "$?" 0
    check "rangeempty not empty" "$(field rangeempty found)" 0
    check "rangecorrelated not empty" "$(field rangecorrelated found)" 0
    check "rangescan found" "$(field rangescan found)" 2000
done
expect_range_needs_spread() {
    "$B" db --num 100 --benchmarks fillrandom,rangeempty >/dev/null 2>&1
    if [ $? -ne 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: rangeempty ran over decimal keys"; fi
}
expect_range_needs_spread

# The paged value index from a cold cache: every search reopens the
# database with its pages dropped, finds its key, and absent values none.
engine="bloomkv (paged, cold)"
out=$("$B" db --num 20000 --benchmarks fillrandom,compact,findvalue,findvalue_absent --value_index paged \
    --searches 40 --cold --json 2>/dev/null)
check "findvalue found" "$(field findvalue found)" 40
check "findvalue_absent found" "$(field findvalue_absent found)" 0
check "reopened" "$(echo "$out" | grep -c '"cold_open_ms"')" 2
check "index memory reported" "$(field findvalue value_index_memory_bytes | grep -c '^[1-9]')" 1

# Partitioned filters and a filter memory budget: same answers, and the
# per-benchmark blocks read and filter memory are reported.
out=$("$B" db --num 20000 --reads 5000 --benchmarks fillrandom,readrandom,readmissing \
    --partition_filters --filter_partition_size 1024 --filter_memory_budget 20000 --json 2>/dev/null)
pfield() { echo "$out" | grep "\"benchmark\":\"$1\"" | grep -o "\"$2\":[0-9.]*" | cut -d: -f2; }
for want in "readrandom found 5000" "readmissing found 0"; do
    set -- $want
    if [ "$(pfield "$1" "$2")" = "$3" ]; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: partitioned $1 $2: got '$(pfield "$1" "$2")', wanted $3"
    fi
done
if [ -n "$(pfield readmissing blocks_read_per_op)" ] && [ -n "$(pfield readmissing filter_memory_bytes)" ]; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: readmissing does not report blocks_read_per_op and filter_memory_bytes"
fi

# The background threads' knobs reach the engine: one thread, or a
# compaction thread run below the caller, still fill and find every key.
out=$("$B" db --num 20000 --reads 5000 --benchmarks fillrandom,readrandom --write_buffer_size 65536 \
    --max_background_jobs 1 --json 2>/dev/null; "$B" db --num 20000 --reads 5000 \
    --benchmarks fillrandom,readrandom --write_buffer_size 65536 --compaction_nice 10 --json 2>/dev/null; \
    "$B" db --num 20000 --reads 5000 --benchmarks fillrandom,readrandom --write_buffer_size 65536 \
    --max_subcompactions 4 --json 2>/dev/null)
found=$(echo "$out" | grep '"benchmark":"readrandom"' | grep -o '"found":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
if [ "$found" = "5000 5000 5000 " ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: thread knobs: found '$found'"; fi

# A sweep: every engine built in, at 1 and 2 threads, over 2 rounds; the
# raw file holds one line per run (engines x counts x rounds x benchmarks),
# the table one row per count for each benchmark, and --db gives each
# engine its own directory.
raw=$(mktemp)
sweepdb=$(mktemp -d)
engines=$("$B" db --engine rocksdb --num 10 --benchmarks fillrandom >/dev/null 2>&1 && echo 3 || echo 1)
out=$("$B" db --compare --num 5000 --threads 1,2 --rounds 2 --raw "$raw" --db "$sweepdb/db" \
    --benchmarks fillrandom,readrandom 2>/dev/null)
status=$?
lines=$(grep -vc '^#' "$raw")
rows=$(echo "$out" | grep -cE '^ +[12] ')
subdirs=$(find "$sweepdb/db" -mindepth 1 -maxdepth 1 -type d | wc -l)
if [ $status -eq 0 ] && [ "$lines" = $((engines * 2 * 2 * 2)) ] && [ "$rows" = 4 ] && [ "$subdirs" = "$engines" ]; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: sweep: exit $status, $lines raw lines, $rows table rows, $subdirs engine directories ($engines engines)"
fi
# Rounds alternate the engines: each round starts with a different one.
firsts=$(awk -F'\t' '!/^#/ && $2 == 1 && $4 == "fillrandom" { if (!($3 in f)) f[$3] = $1 } END { for (r in f) print f[r] }' "$raw" | sort -u | wc -l)
if [ "$engines" = 1 ] || [ "$firsts" = 2 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: sweep rounds all start with one engine"; fi
rm -rf "$raw" "$sweepdb"

# The anchor table: one row per anchor, each with our figures beside.
rows=$("$B" filters --compare-anchor --keys 20000 --json 2>/dev/null | grep -c '"anchor_measured_now":false')
if [ "$rows" = 6 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: compare-anchor gave $rows rows"; fi

# Bad flags fail at once, before any benchmark runs, with the flag named.
expect_fail() { # expect_fail STATUS MESSAGE -- args...
    local want=$1 msg=$2
    shift 3
    local err
    err=$("$B" db "$@" 2>&1 >/dev/null)
    local got=$?
    if [ "$got" -eq "$want" ] && echo "$err" | grep -q -- "$msg"; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: bench $*: exit $got, wanted $want with '$msg': $err"
    fi
}
T=$(mktemp -d "${TMPDIR:-/tmp}/bkv-bench-flags-XXXXXX")
expect_fail 2 "--num takes a number, not 'abc'" -- --num abc
expect_fail 2 "--reads takes a number" -- --num 100 --reads 10x
expect_fail 2 "--value_size takes a number" -- --num 100 --value_size ""
expect_fail 2 "--compaction_nice does not take '20'" -- --num 100 --compaction_nice 20
expect_fail 2 "--max_background_jobs does not take '0'" -- --num 100 --max_background_jobs 0
expect_fail 2 "--threads takes counts from 1 to 64" -- --num 100 --threads 1,0
expect_fail 2 "--threads takes counts from 1 to 64" -- --num 100 --threads 1,,2
expect_fail 2 "--rounds does not take '16'" -- --num 100 --rounds 16
expect_fail 2 "--max_subcompactions does not take '9'" -- --num 100 --max_subcompactions 9
expect_fail 2 "--value_summary_bits does not take '1'" -- --num 100 --value_summary_bits 1
expect_fail 2 "one thread, no writer beside" -- --num 100 --cold --threads 2
expect_fail 2 "one thread, no writer beside" -- --num 100 --cold --benchmarks fillrandom,findvaluewhilewriting
expect_fail 3 "cannot create" -- --num 100 --plot "$T/missing/parent/dir"
# --db never deletes a directory that is not a database.
mkdir -p "$T/precious"
echo keep >"$T/precious/file"
expect_fail 3 "not a database; not deleting it" -- --num 100 --db "$T/precious"
if [ -f "$T/precious/file" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --db deleted a directory"; fi
rm -rf "$T"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
