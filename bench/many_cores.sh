#!/usr/bin/env bash
# Thread scaling of several engines or builds on one many-core machine, in
# one go: fills at every thread count into a fresh database, and reads of
# present and absent keys over one filled and compacted database per
# engine. Runs alternate between the entries round by round (the first to
# run changes each round), every run's figure goes to a raw file, and the
# summary gives medians, ranges and gains over one thread.
#
#   bench/many_cores.sh OUT_DIR LABEL=BINARY:ENGINE[:ARG,ARG...]...
#
#   bench/many_cores.sh out new=./bloomkv-bench:bloomkv rocksdb=./bloomkv-bench:rocksdb \
#       base=./bloomkv-bench-1738a70:bloomkv sub8=./bloomkv-bench:bloomkv:--max_subcompactions=8 \
#       jobs4=./bloomkv-bench:bloomkv:--max_background_jobs=4 nobg=./bloomkv-bench:bloomkv:--write_buffer_size=268435456
#
# ARGs are more `bloomkv-bench db` options for that label's runs: the same
# binary with other settings (a write buffer that holds the whole fill
# measures the write path with no flush or compaction behind it).
# BINARY is a `bloomkv-bench` program (bench/static_tool.sh makes one that runs
# where no library is installed). Settings by environment, with defaults:
# FILL_KEYS=1000000 READ_KEYS=2000000 ROUNDS=3 FILL_THREADS="1 2 4 8 16"
# READ_THREADS="1 4 16" FILL_ONLY="" (labels that skip the reads)
# READ_ONLY="" (labels that skip the fills); MISSING_PER_THREAD=2000000
# and RANDOM_PER_THREAD=500000 reads per thread. Every engine gets a 4 MiB
# write buffer, an 8 MiB cache, 10 bits per key and no compression:
# `bloomkv-bench db`'s defaults, under which RocksDB is configured as its
# tuning guide says (bench/engine_rocksdb.c).
# Writes OUT_DIR/raw.tsv (label, benchmark, threads, round, ops/s) and
# OUT_DIR/summary.txt.
set -u
out=$1
shift
mkdir -p "$out"
FILL_KEYS=${FILL_KEYS:-1000000}
READ_KEYS=${READ_KEYS:-2000000}
ROUNDS=${ROUNDS:-3}
FILL_THREADS=${FILL_THREADS:-1 2 4 8 16}
READ_THREADS=${READ_THREADS:-1 4 16}
FILL_ONLY=${FILL_ONLY:-}
READ_ONLY=${READ_ONLY:-}
MISSING_PER_THREAD=${MISSING_PER_THREAD:-2000000}
RANDOM_PER_THREAD=${RANDOM_PER_THREAD:-500000}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bkv-cores-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
raw=$out/raw.tsv
printf '# label\tbenchmark\tthreads\tround\tops_per_sec\n' >"$raw"
labels=()
declare -A bin eng extra
for spec in "$@"; do
    label=${spec%%=*}
    IFS=: read -r bin[$label] eng[$label] extra[$label] <<<"${spec#*=}"
    extra[$label]=${extra[$label]//,/ }
    labels+=("$label")
done
listed() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }
rate() { grep -o '"ops_per_sec":[0-9.]*' | tail -1 | cut -d: -f2; }
run() { # LABEL BENCHMARK THREADS ROUND ARGS...
    local label=$1 what=$2 threads=$3 round=$4
    shift 4
    local r
    # shellcheck disable=SC2086
    r=$("${bin[$label]}" db --engine "${eng[$label]}" --threads "$threads" --benchmarks "$what" --json "$@" ${extra[$label]} \
        2>>"$out/stderr.txt" | rate)
    printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$what" "$threads" "$round" "${r:-0}" | tee -a "$raw"
}
echo "# $(nproc) processors; $(date -u +%FT%TZ)" | tee "$out/summary.txt"

# One database per engine for the reads, filled and compacted once, read
# by every build that runs that engine (they share a format).
declare -A readdb
for label in "${labels[@]}"; do
    listed "$label" "$FILL_ONLY" && continue
    e=${eng[$label]}
    if [ -z "${readdb[$e]:-}" ]; then
        readdb[$e]=$WORK/read-$e
        "${bin[$label]}" db --engine "$e" --db "${readdb[$e]}" --num "$READ_KEYS" \
            --benchmarks fillrandom,compact >/dev/null 2>>"$out/stderr.txt"
    fi
done

n=${#labels[@]}
for round in $(seq "$ROUNDS"); do
    for i in $(seq 0 $((n - 1))); do
        label=${labels[$(((i + round - 1) % n))]}
        listed "$label" "$READ_ONLY" && continue
        for t in $FILL_THREADS; do
            rm -rf "$WORK/fill"
            run "$label" fillrandom "$t" "$round" --db "$WORK/fill" --num "$FILL_KEYS"
        done
    done
    for i in $(seq 0 $((n - 1))); do
        label=${labels[$(((i + round - 1) % n))]}
        listed "$label" "$FILL_ONLY" && continue
        db=${readdb[${eng[$label]}]}
        for t in $READ_THREADS; do
            run "$label" readmissing "$t" "$round" --db "$db" --use_existing_db --compact_for_reads 0 \
                --num "$READ_KEYS" --reads $((MISSING_PER_THREAD * t))
            run "$label" readrandom "$t" "$round" --db "$db" --use_existing_db --compact_for_reads 0 \
                --num "$READ_KEYS" --reads $((RANDOM_PER_THREAD * t))
        done
    done
done
rm -rf "$WORK/fill"

# Medians [min-max] and the gain over one thread, per label and benchmark.
awk -F'\t' '
    /^#/ { next }
    { key = $1 "\t" $2 "\t" $3; v[key] = v[key] " " $5; if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
    function median(list,   a, m, i, j, t) {
        m = split(list, a, " ")
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        lo = a[1]; hi = a[m]
        return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    END {
        for (i = 1; i <= n; i++) {
            split(order[i], f, "\t")
            one = f[1] "\t" f[2] "\t1"
            base = (one in v) ? median(v[one]) : 0
            med = median(v[order[i]])
            printf "%-10s %-12s %7s %12.0f %12.0f %12.0f %7.2fx\n", f[1], f[2], f[3], med, lo, hi, base ? med / base : 0
        }
    }' "$raw" | sort -b -s -k2,2 -k1,1 -k3,3n >"$WORK/summary"
printf "%-10s %-12s %7s %12s %12s %12s %8s\n" label benchmark threads median min max x1 | tee -a "$out/summary.txt"
tee -a "$out/summary.txt" <"$WORK/summary"
