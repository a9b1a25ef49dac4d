#!/usr/bin/env bash
# The benchmark's engines answer correctly on a small run: every
# readrandom get finds its key, no readmissing get does, and readseq sees
# every key once.
set -u
B="$1"
pass=0 fail=0
for engine in bloomkv leveldb rocksdb; do
    out=$("$B" bench --engine "$engine" --num 20000 --reads 5000 \
        --benchmarks fillrandom,readrandom,readmissing,readseq,multireadrandom --json 2>/dev/null)
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
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
