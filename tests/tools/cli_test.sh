#!/usr/bin/env bash
# Every `bloomkv` subcommand, with its error paths and exit statuses
# (0 ok, 1 not found, 2 usage, 3 corruption or I/O).
set -u
B="$1"
D=$(mktemp -d "${TMPDIR:-/tmp}/bkv-cli-XXXXXX")
trap 'rm -rf "$D"' EXIT
pass=0 fail=0

expect() { # expect STATUS DESCRIPTION -- command...
    local want=$1 what=$2
    shift 3
    "$@" >"$D/out" 2>"$D/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: $what: exit $got, wanted $want"
        cat "$D/err"
    fi
}
output_is() { # output_is DESCRIPTION EXPECTED
    if [ "$(cat "$D/out")" = "$2" ]; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: $1: got '$(cat "$D/out")', wanted '$2'"
    fi
}
stderr_has() {
    if grep -q -- "$2" "$D/err"; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: $1: stderr lacks '$2': $(cat "$D/err")"
    fi
}

db="$D/db"
expect 0 "put" -- "$B" put "$db" apple red
expect 0 "put sync" -- "$B" put --sync "$db" banana yellow
expect 0 "put hex" -- "$B" put --hex "$db" 00ff00 0a0b
expect 0 "get" -- "$B" get "$db" apple
output_is "get value" "red"
expect 0 "get hex" -- "$B" get --hex "$db" 00ff00
output_is "get hex value" "0a0b"
expect 1 "get missing key" -- "$B" get "$db" cherry
stderr_has "not found message" "not found"
expect 0 "delete" -- "$B" delete "$db" apple
expect 1 "get deleted" -- "$B" get "$db" apple
printf 'k1\tv1\nk2\tv2\nk3\tv3\n' >"$D/in.tsv"
expect 0 "load" -- "$B" load "$db" "$D/in.tsv"
output_is "load count" "loaded 3 records"
printf 'no tab here\n' >"$D/bad.tsv"
expect 2 "load without tab" -- "$B" load "$db" "$D/bad.tsv"
expect 3 "load missing file" -- "$B" load "$db" "$D/nope.tsv"
expect 0 "scan range" -- "$B" scan "$db" --from k1 --to k3
output_is "scan range output" "$(printf 'k1\tv1\nk2\tv2')"
expect 0 "scan limit" -- "$B" scan "$db" --limit 1 --hex
output_is "scan limit output" "$(printf '00ff00\t0a0b')"
expect 0 "compact" -- "$B" compact "$db"
expect 0 "get after compact" -- "$B" get "$db" k3
output_is "value after compact" "v3"
expect 0 "stats" -- "$B" stats "$db"
grep -q "^L0" "$D/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: stats lacks levels"; }
expect 0 "check clean" -- "$B" check "$db"
sst=$(ls "$db"/*.sst | head -1)
expect 0 "dump-sst" -- "$B" dump-sst --entries "$sst"
grep -q "filter: blocked" "$D/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: dump-sst lacks filter"; }

# Search by value.
vdb="$D/vdb"
printf 'k1\tred\nk2\tblue\nk3\tred\n' >"$D/colors.tsv"
expect 0 "load with a value index" -- "$B" load "$vdb" "$D/colors.tsv" --value-index hierarchy
expect 0 "put into it" -- "$B" put "$vdb" k4 red
expect 0 "find-value" -- "$B" find-value "$vdb" red
output_is "find-value output" "$(printf 'k1\tred\nk3\tred\nk4\tred')"
expect 0 "delete one" -- "$B" delete "$vdb" k3
expect 0 "compact" -- "$B" compact "$vdb"
expect 0 "find-value after delete" -- "$B" find-value "$vdb" red --stats
output_is "find-value after delete output" "$(printf 'k1\tred\nk4\tred')"
stderr_has "find-value --stats" "partitions scanned"
expect 1 "find-value nothing" -- "$B" find-value "$vdb" green
expect 0 "find-value hex" -- "$B" find-value --hex "$vdb" 626c7565
output_is "find-value hex output" "$(printf '6b32\t626c7565')"
expect 0 "stats shows the value index" -- "$B" stats "$vdb"
grep -q "value index: hierarchy" "$D/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: stats lacks the value index"; }
expect 2 "find-value without an index" -- "$B" find-value "$db" v1
stderr_has "find-value explains" "no value index"
expect 2 "bad value-index" -- "$B" put "$D/x" a b --value-index tree
expect 3 "find-value on missing db" -- "$B" find-value "$D/none" v

# Usage errors.
expect 2 "no args" -- "$B"
expect 2 "unknown command" -- "$B" frobnicate
expect 2 "missing key" -- "$B" get "$db"
expect 2 "bad flag" -- "$B" scan "$db" --bogus
expect 2 "bad hex" -- "$B" get --hex "$db" zz
expect 0 "help" -- "$B" get --help
expect 2 "bad limit" -- "$B" scan "$db" --limit -3

# Missing database.
expect 3 "get on missing db" -- "$B" get "$D/none" k
stderr_has "names the db" "none"
expect 3 "check missing db" -- "$B" check "$D/none"

# Corruption: flip a byte inside the first data block of a table.
printf '\x55' | dd of="$sst" bs=1 seek=10 conv=notrunc status=none
expect 3 "check finds corruption" -- "$B" check "$db"
grep -q "offset" "$D/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: check output lacks offset: $(cat "$D/out")"; }
expect 3 "dump-sst of corrupt table" -- "$B" dump-sst --entries "$sst"
expect 3 "scan over corrupt table" -- "$B" scan "$db"
stderr_has "scan names the table" ".sst"
printf 'garbage' >"$D/not-a-table.sst"
expect 3 "dump-sst of garbage" -- "$B" dump-sst "$D/not-a-table.sst"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
