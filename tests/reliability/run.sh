#!/usr/bin/env bash
# The reliability stage: crash (kill -9) cycles, simulated power losses,
# fail-at-N sweeps, the corruption matrix, every fuzz target and the Redis
# module under hostile input, at a chosen scale, then one summary.
#
#   SCALE=ci   bash tests/reliability/run.sh     # CI: about 5 minutes here (jobs run nproc at a time)
#   SCALE=long bash tests/reliability/run.sh     # over an hour, by hand (FUZZ_SECONDS=N per fuzz target, 600 by default)
#
# SCALE=ci: >= 300 crash cycles (100 with four writers at once), >= 2000 power losses, the full sweeps and
# matrix, FUZZ_SECONDS (60) per fuzz target. Any lost acknowledged write,
# wrong value or sanitizer report fails the stage (the tests abort on the
# first one), so a summary is only printed with zero of each.
set -euo pipefail
cd "$(dirname "$0")/../.."
SCALE=${SCALE:-ci}
case "$SCALE" in ci) FUZZ_SECONDS=${FUZZ_SECONDS:-60} ;; long) FUZZ_SECONDS=${FUZZ_SECONDS:-600} ;;
*) echo "run.sh: SCALE must be ci or long" >&2; exit 2 ;; esac
BUILD=${BUILD:-build-asan}
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
LOG=$(mktemp -d "${TMPDIR:-/tmp}/bkv-reliability-XXXXXX")
trap 'rm -rf "$LOG"' EXIT
start=$(date +%s)

# The tests run in the sanitized build: a sanitizer report fails them.
bash scripts/deps
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DBKV_SANITIZE=ON >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target crash_test power_loss_test corruption_test alloc_fail_test >/dev/null
# Jobs run nproc at a time; each leaves its exit status in $LOG/NAME.rc and
# the results are read back in a fixed order.
throttle() { while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done; }
run_job() { # NAME COMMAND...
    local name=$1
    shift
    if "$@" >"$LOG/$name.out" 2>&1; then echo 0 >"$LOG/$name.rc"; else echo $? >"$LOG/$name.rc"; fi
}
failed() { [ "$(cat "$LOG/$1.rc" 2>/dev/null || echo 1)" != 0 ]; }

for t in crash_test power_loss_test corruption_test alloc_fail_test; do
    throttle
    BKV_SCALE=$SCALE run_job "$t" "$BUILD/tests/$t" &
done
wait
for t in crash_test power_loss_test corruption_test alloc_fail_test; do
    echo "== $t (BKV_SCALE=$SCALE)"
    if failed "$t"; then cat "$LOG/$t.out"; echo "run.sh: $t FAILED" >&2; exit 1; fi
    grep -E "^reliability:|sweep:|matrix:|checked:|the run without" "$LOG/$t.out" || true
done

# Fuzzing needs clang and libFuzzer (Debian: clang, libclang-rt-dev).
bash scripts/deps fuzz
CC=clang cmake -S . -B "$FUZZ_BUILD" -DCMAKE_BUILD_TYPE=Debug -DBKV_SANITIZE=ON -DBKV_FUZZ=ON \
    -DBKV_BUILD_TESTS=OFF -DBKV_BUILD_TOOLS=OFF >/dev/null
cmake --build "$FUZZ_BUILD" -j "$(nproc)" >/dev/null
# The Redis module, sanitized, under hostile commands and forged RESTORE
# payloads (tests/redis/fuzz_module.py), beside the fuzz targets; skipped
# where the module is not built (no redismodule.h) or redis-server is missing.
redis_fuzz=0
if cmake --build "$BUILD" --target bloomkv_redis >/dev/null 2>&1 && [ -f "$BUILD/bloomkv_redis.so" ] &&
    command -v redis-server >/dev/null && /usr/bin/python3 -c "import redis" 2>/dev/null; then
    redis_fuzz=1
    throttle
    compiler=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
    BKV_REDIS_PRELOAD=$("$compiler" -print-file-name=libasan.so) \
        ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 \
        run_job redis_fuzz /usr/bin/python3 tests/redis/fuzz_module.py "$BUILD/bloomkv_redis.so" "$FUZZ_SECONDS" &
fi
for t in filter table log value_index api; do
    mkdir -p "$LOG/corpus-$t"
    throttle
    # New inputs go to a scratch corpus; fuzz/corpus seeds it (make fuzz grows it).
    run_job "fuzz_$t" "$FUZZ_BUILD/fuzz_$t" -max_total_time="$FUZZ_SECONDS" -max_len=65536 \
        -artifact_prefix="$LOG/" "$LOG/corpus-$t" "fuzz/corpus/$t" &
done
wait
if [ "$redis_fuzz" = 1 ]; then
    echo "== the Redis module for ${FUZZ_SECONDS}s"
    if failed redis_fuzz; then tail -n 60 "$LOG/redis_fuzz.out"; echo "run.sh: the Redis module fuzz failed" >&2; exit 1; fi
    grep "^reliability:" "$LOG/redis_fuzz.out"
fi
for t in filter table log value_index api; do
    echo "== fuzz_$t for ${FUZZ_SECONDS}s"
    if failed "fuzz_$t"; then tail -n 40 "$LOG/fuzz_$t.out"; echo "run.sh: fuzz_$t found a failure" >&2; exit 1; fi
    runs=$(grep -o "Done [0-9]* runs" "$LOG/fuzz_$t.out" | grep -o "[0-9]*" | tail -1)
    echo "reliability: fuzz_runs_$t=${runs:-0}"
    echo "reliability: fuzz_runs_$t=${runs:-0}" >>"$LOG/fuzz.out"
done

sum() { cat "$LOG"/*.out | grep "^reliability: $1=" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'; }
echo
echo "reliability summary (SCALE=$SCALE, $(($(date +%s) - start)) s):"
echo "  crash cycles (kill -9):        $(($(sum crash_cycles) + $(sum crash_cycles_concurrent_writers))) ($(sum crash_cycles_concurrent_writers) with four writers at once, $(sum crashes_during_open) before the open finished)"
echo "  simulated power losses:        $(($(sum power_losses) + $(sum power_losses_concurrent_writers))) ($(sum power_losses_concurrent_writers) with four writers at once)"
echo "  faults injected (fail-at-N):   $(sum faults_injected)"
echo "  allocation failures injected:  $(sum allocation_failures_injected)"
echo "  corruptions tried / detected:  $(sum corruptions_tried) / $(sum corruptions_detected)"
for t in filter table log value_index api; do
    printf "  fuzz executions %-13s  %s\n" "$t:" "$(sum "fuzz_runs_$t")"
done
if [ "$redis_fuzz" = 1 ]; then
    echo "  Redis module:                  $(sum redis_fuzz_commands) commands, $(sum redis_fuzz_payloads) forged RESTORE payloads"
fi
echo "  lost acknowledged writes: 0, wrong values: 0, sanitizer reports: 0"
