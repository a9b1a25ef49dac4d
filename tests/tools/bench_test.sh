#!/usr/bin/env bash
# The benchmark's engines answer correctly on a small run: every
# readrandom get finds its key, no readmissing get does, and readseq sees
# every key once, and every search by value finds the key it came from
# (through bloomkv's value index, or a full scan elsewhere).
set -u
B="$1"
pass=0 fail=0
for engine in bloomkv leveldb rocksdb; do
    out=$("$B" bench --engine "$engine" --num 20000 --reads 5000 \
        --benchmarks fillrandom,readrandom,readmissing,readseq,multireadrandom,findvalue,findvalue_scan \
        --value_index hierarchy --searches 200 --scan_searches 2 --json 2>/dev/null)
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
    if [ "$engine" = bloomkv ]; then
        check "findvalue found" "$(field findvalue found)" 200
        check "findvalue results" "$(echo "$out" | grep '"benchmark":"findvalue"' | grep -o '"results":[0-9.]*' | cut -d: -f2)" 1.000
    else
        check "findvalue (a scan) found" "$(field findvalue found)" 2
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
