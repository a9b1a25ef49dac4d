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
if grep -q "^compacted .* before, .* after$" "$D/out"; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: compact does not say what it did: $(cat "$D/out")"
fi
expect 0 "get after compact" -- "$B" get "$db" k3
output_is "value after compact" "v3"
expect 0 "stats" -- "$B" stats "$db"
grep -q "^L0" "$D/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: stats lacks levels"; }
expect 0 "check clean" -- "$B" check "$db"
sst=$(ls "$db"/*.sst | head -1)
expect 0 "dump-sst" -- "$B" dump-sst --entries "$sst"
grep -q "filter: blocked" "$D/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: dump-sst lacks filter"; }
expect 0 "dump-sst --json" -- "$B" dump-sst --entries --json "$sst"
if python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
head = json.loads(lines[0])
rows = [json.loads(l) for l in lines[1:]]
assert head["filter"]["type"] == "blocked" and head["entries"] == len(rows), head
assert all(r["type"] in ("value", "deletion") and "key" in r for r in rows)
' "$D/out"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: dump-sst --json does not parse"; fi

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
expect 0 "find-value --any" -- "$B" find-value "$vdb" red blue --any
output_is "find-value --any output" "$(printf 'k1\tred\nk2\tblue\nk4\tred')"
expect 1 "find-value --all of two values" -- "$B" find-value "$vdb" red blue --all
expect 0 "find-value --all of one value twice" -- "$B" find-value "$vdb" red red
output_is "find-value --all output" "$(printf 'k1\tred\nk4\tred')"
expect 0 "find-value --limit" -- "$B" find-value "$vdb" red blue --any --limit 2
output_is "find-value --limit output" "$(printf 'k1\tred\nk2\tblue')"
expect 0 "find-value --after (the next page)" -- "$B" find-value "$vdb" red blue --any --limit 2 --after k2
output_is "find-value --after output" "$(printf 'k4\tred')"
expect 1 "find-value past the last page" -- "$B" find-value "$vdb" red blue --any --after k4
expect 0 "find-value --keys-only" -- "$B" find-value "$vdb" red --keys-only
output_is "find-value --keys-only output" "$(printf 'k1\nk4')"
expect 0 "find-value --count" -- "$B" find-value "$vdb" red blue --any --count
output_is "find-value --count output" "3"
expect 0 "find-value --json" -- "$B" find-value "$vdb" red --json
output_is "find-value --json output" "$(printf '{"key":"k1","value":"red"}\n{"key":"k4","value":"red"}')"
expect 0 "find-value --json --count" -- "$B" find-value "$vdb" red --json --count
output_is "find-value --json --count output" '{"count":2}'
expect 0 "find-value --json escapes" -- "$B" put "$vdb" 'q"\' "$(printf 'red\001\377')"
expect 0 "find-value --json of odd bytes" -- "$B" find-value "$vdb" "$(printf 'red\001\377')" --json
output_is "find-value --json odd bytes output" '{"key":"q\"\\","value":"red\u0001\u00ff"}'
expect 2 "find-value --count with --keys-only" -- "$B" find-value "$vdb" red --count --keys-only
# A built-in terms extractor, recorded: later commands need not name it.
printf 'w1\tThe quick brown Fox\nw2\tlazy dog, quick!\n' >"$D/words.tsv"
expect 0 "load with --terms words" -- "$B" load "$D/words" "$D/words.tsv" --value-index flat --terms words
expect 0 "find-value by word" -- "$B" find-value "$D/words" quick --keys-only
output_is "find-value by word output" "$(printf 'w1\nw2')"
expect 0 "find-value by a lower-cased word" -- "$B" find-value "$D/words" fox --keys-only
output_is "find-value lower-cased output" "w1"
printf 'w9\tSlow but QUICK\n' >"$D/words2.tsv"
expect 0 "make-table --terms words" -- "$B" make-table "$D/words.sst" "$D/words2.tsv" --value-index flat --terms words
expect 0 "ingest it" -- "$B" ingest "$D/words" "$D/words.sst"
expect 0 "its words are found" -- "$B" find-value "$D/words" quick --keys-only
output_is "ingested words output" "$(printf 'w1\nw2\nw9')"
expect 3 "another extractor refused" -- "$B" put "$D/words" w3 x --terms prefix:2
stderr_has "both extractors named" "words/1"
# json:FIELD and prefix:N, and --prefix only where prefixes are indexed.
printf 'j1\t{"user":{"name":"ann"},"n":1}\nj2\t{"user":{"name":"bob"}}\nj3\tnot json ann\n' >"$D/json.tsv"
expect 0 "load with --terms json:user.name" -- "$B" load "$D/json" "$D/json.tsv" --value-index bitsliced --terms json:user.name
expect 0 "find-value by a JSON field" -- "$B" find-value "$D/json" ann --keys-only
output_is "JSON field output" "j1"
expect 2 "--prefix on a database without prefixes" -- "$B" find-value "$D/json" an --prefix
stderr_has "--prefix explains" "json:user.name/1"
printf 'p1\tapple\np2\tapricot\np3\tbanana\n' >"$D/prefix.tsv"
expect 0 "load with --terms prefix:3" -- "$B" load "$D/prefix" "$D/prefix.tsv" --value-index flat --terms prefix:3
expect 0 "find-value --prefix" -- "$B" find-value "$D/prefix" ap --prefix --keys-only
output_is "--prefix output" "$(printf 'p1\np2')"
expect 2 "--prefix longer than indexed" -- "$B" find-value "$D/prefix" appl --prefix
stderr_has "--prefix names the limit" "prefixes of 1 to 3"
# An index for a database made without one, built in place; then dropped.
printf 'n1\tred fox\nn2\tblue fox\nn3\tred hen\n' >"$D/noidx.tsv"
expect 0 "load without an index" -- "$B" load "$D/noidx" "$D/noidx.tsv"
expect 0 "into a table" -- "$B" compact "$D/noidx"
expect 0 "value-index build" -- "$B" value-index build "$D/noidx" --shape bitsliced --terms words
output_is "build reports" "value index built: 1 rewrite of older tables"
expect 0 "find-value after the build" -- "$B" find-value "$D/noidx" red --keys-only
output_is "built index output" "$(printf 'n1\nn3')"
expect 2 "value-index build without --shape" -- "$B" value-index build "$D/noidx"
expect 2 "value-index bad action" -- "$B" value-index rebuild "$D/noidx"
expect 0 "value-index drop" -- "$B" value-index drop "$D/noidx"
expect 2 "find-value after the drop" -- "$B" find-value "$D/noidx" red
expect 3 "no such extractor" -- "$B" put "$D/noterms" k v --value-index flat --terms bogus
expect 2 "--terms without --value-index" -- "$B" put "$D/noterms2" k v --terms words
expect 2 "find-value bad hex in a later value" -- "$B" find-value --hex "$vdb" 626c7565 zz
stderr_has "names the value" "bad hex in value 2"
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
expect 2 "check missing db" -- "$B" check "$D/none"

# Corruption: flip a byte inside the first data block of a table.
printf '\x55' | dd of="$sst" bs=1 seek=10 conv=notrunc status=none
expect 3 "check finds corruption" -- "$B" check "$db"
grep -q "offset" "$D/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: check output lacks offset: $(cat "$D/out")"; }
expect 3 "dump-sst of corrupt table" -- "$B" dump-sst --entries "$sst"
expect 3 "scan over corrupt table" -- "$B" scan "$db"
stderr_has "scan names the table" ".sst"
printf 'garbage' >"$D/not-a-table.sst"
expect 3 "dump-sst of garbage" -- "$B" dump-sst "$D/not-a-table.sst"

# --- Hardening (the first outside attack): each case as the attacker ran it.
h="$D/hard"
mkdir -p "$h"
# A planted link never makes the database write through it.
echo secret >"$h/victim"
mkdir "$h/S"
ln -s ../victim "$h/S/CURRENT.tmp"
expect 0 "put beside a planted CURRENT.tmp link" -- "$B" put "$h/S" k v
[ "$(cat "$h/victim")" = secret ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: victim overwritten"; }
mkdir "$h/L"
ln -s ../lock-target "$h/L/LOCK"
expect 3 "dangling LOCK link refused" -- "$B" put "$h/L" k v
stderr_has "LOCK link named" "symbolic link"
[ ! -e "$h/lock-target" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: LOCK link followed"; }
# --hex takes hex only, everywhere.
for args in "put --hex $h/X 0g0g 00" "put --hex $h/X 00 +f-f" "put --hex $h/X 0 00" "get --hex $h/S zz" \
    "delete --hex $h/S 1x" "scan --hex $h/S --from qq" "find-value --hex $h/S gg"; do
    expect 2 "bad hex: $args" -- $B $args
done
[ ! -e "$h/X" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: bad hex created a database"; }
printf '0g\t00\n' >"$h/badhex.tsv"
expect 2 "load --hex refuses non-hex" -- "$B" load --hex "$h/S" "$h/badhex.tsv"
# -- ends the options; a help flag after it is a key.
expect 0 "put -- -h value" -- "$B" put "$h/S" -- -h value
expect 0 "get -- -h" -- "$B" get "$h/S" -- -h
output_is "key -h stored" "value"
expect 0 "--help prints usage" -- "$B" put --help
grep -q "usage: bloomkv put" "$D/out" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: --help"; }
# Flags of other commands are refused by name; so are unknown ones.
expect 2 "get --sync" -- "$B" get "$h/S" k --sync
stderr_has "flag named" "\-\-sync is not an option"
expect 2 "get --entries" -- "$B" get "$h/S" k --entries
expect 2 "scan --value-index" -- "$B" scan "$h/S" --value-index flat
expect 2 "unknown flag" -- "$B" scan "$h/S" --bogus
stderr_has "unknown flag named" "\-\-bogus"
expect 2 "missing flag value" -- "$B" scan "$h/S" --from
# A read error is not the end of the input.
mkdir "$h/adir"
expect 3 "load a directory" -- "$B" load "$h/S" "$h/adir"
stderr_has "read error reported" "Is a directory"
# An aborted load says what it committed and where it stopped.
awk 'BEGIN { for (i = 1; i <= 2499; i++) printf "k%05d\tv%d\n", i, i; print "no tab on line 2500" }' >"$h/partial.tsv"
expect 3 "load with a bad line after commits" -- "$B" load "$h/P" "$h/partial.tsv"
stderr_has "committed count" "2000 records committed (input lines 1-2000), stopped at line 2500"
expect 0 "committed rows are there" -- "$B" get "$h/P" k02000
expect 1 "uncommitted rows are not" -- "$B" get "$h/P" k02001
printf 'a\tb\nno tab\n' >"$h/early.tsv"
expect 2 "bad line before any commit is a usage error" -- "$B" load "$h/E" "$h/early.tsv"
stderr_has "nothing committed" "nothing committed, stopped at line 2"
# A signal during load commits what was read and says so (the input is a
# pipe that stays open, so the load is still running when the signal comes).
{ awk 'BEGIN { for (i = 1; i <= 5000; i++) printf "s%07d\tv\n", i }'; sleep 5; } | "$B" load "$h/G" - 2>"$h/sig.err" >/dev/null &
lp=$!
sleep 1
kill -TERM $lp
wait $lp
st=$?
if [ "$st" -eq 143 ] && grep -q "interrupted by signal 15" "$h/sig.err" && grep -q "5000 records committed" "$h/sig.err"; then
    pass=$((pass + 1))
else fail=$((fail + 1)); echo "FAIL: load on SIGTERM: exit $st: $(cat "$h/sig.err")"; fi
expect 0 "database usable after an interrupted load" -- "$B" check "$h/G"
# A deleted LOCK does not let a second writer in, and check says "in use".
expect 0 "seed" -- "$B" put "$h/K" seed 1
# The writer is a load reading a FIFO this script holds open, so it is
# certainly still running while the second writer and check try.
mkfifo "$h/feed"
"$B" load "$h/K" - <"$h/feed" >/dev/null 2>&1 &
lp=$!
exec 7>"$h/feed"
# Written through a 64 KiB pipe: when awk is done, the load has read most
# of it, so it has long opened the database.
awk 'BEGIN { for (i = 1; i <= 300000; i++) printf "l%07d\tv\n", i }' >&7
rm -f "$h/K/LOCK"
expect 3 "second writer refused after LOCK was deleted" -- "$B" put "$h/K" x y
stderr_has "in use" "in use"
expect 3 "check refuses a live database" -- "$B" check "$h/K"
stderr_has "check says in use" "in use"
awk 'BEGIN { for (i = 300001; i <= 600000; i++) printf "l%07d\tv\n", i }' >&7
exec 7>&-
wait $lp && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: the load beside the refused writers failed"; }
expect 0 "load completed whole" -- "$B" scan "$h/K" --limit 0
"$B" scan "$h/K" | wc -l | grep -q '^600001$' && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: rows lost after LOCK deletion"; }
# Damage in the WAL's last block before intact records: refused, naming file and offset.
awk 'BEGIN { for (i = 1; i <= 3500; i++) printf "w%05d\t%s\n", i, "value-of-some-length" }' >"$h/w.tsv"
expect 0 "load into WAL only" -- "$B" load "$h/W" "$h/w.tsv"
wal=$(ls "$h/W"/*.log | head -1)
printf '\x20' | dd of="$wal" bs=1 seek=40000 conv=notrunc status=none
cp -r "$h/W" "$h/W2"
cp -r "$h/W" "$h/W3"
expect 3 "scan refuses a damaged WAL" -- "$B" scan "$h/W"
stderr_has "WAL file and offset" ".log: fragment checksum mismatch at offset"
expect 3 "check reports it" -- "$B" check "$h/W"
expect 0 "point-in-time recovery" -- "$B" scan "$h/W2" --wal-recovery point-in-time --limit 0
expect 0 "skip-damaged recovery" -- "$B" scan "$h/W3" --wal-recovery skip-damaged
lines=$(wc -l <"$D/out")
# The flip lands in one 1000-row batch (one WAL record): only it is lost.
[ "$lines" -eq 2500 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: skip-damaged kept $lines"; }
# Errors keep their reason.
expect 3 "missing database" -- "$B" get "$h/none" k
stderr_has "does not exist" "does not exist"
expect 2 "check of a missing directory" -- "$B" check "$h/none"
stderr_has "check: does not exist" "does not exist"
echo plain >"$h/afile"
expect 3 "database under a file" -- "$B" put "$h/afile/db" k v
stderr_has "errno text" "Not a directory"
# A value index is chosen at creation; another shape is refused, not switched.
expect 0 "create with bit-sliced index" -- "$B" put "$h/V" k v --value-index bitsliced
expect 2 "reopen asking for hierarchy" -- "$B" put "$h/V" k2 v --value-index hierarchy
stderr_has "shape named" "has a bitsliced value index"
expect 0 "same shape is fine" -- "$B" put "$h/V" k3 v --value-index bitsliced
expect 2 "index on a database without one" -- "$B" put "$h/S" k v --value-index flat

# Checkpoint, compact a range, destroy.
c="$D/admin"
mkdir -p "$c"
awk 'BEGIN { for (i = 1; i <= 3000; i++) printf "c%05d\tv%d\n", i, i }' >"$c/in.tsv"
expect 0 "load for checkpoint" -- "$B" load "$c/db" "$c/in.tsv"
expect 0 "checkpoint" -- "$B" checkpoint "$c/db" "$c/ck"
expect 0 "write after the checkpoint" -- "$B" put "$c/db" c00001 changed
expect 0 "checkpoint holds the old value" -- "$B" get "$c/ck" c00001
output_is "checkpoint value" "v1"
expect 0 "checkpoint checks clean" -- "$B" check "$c/ck"
expect 2 "checkpoint into an existing directory" -- "$B" checkpoint "$c/db" "$c/ck"
stderr_has "checkpoint names the existing directory" "already exists"
stderr_has "exists named" "exists"
expect 0 "compact a range" -- "$B" compact "$c/db" --from c00100 --to c00200
expect 0 "value after range compaction" -- "$B" get "$c/db" c00150
output_is "range compaction kept values" "v150"
expect 2 "compact --limit refused" -- "$B" compact "$c/db" --limit 3
expect 0 "destroy" -- "$B" destroy "$c/ck"
[ ! -e "$c/ck" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: destroy left the directory"; }
expect 2 "destroy a missing database" -- "$B" destroy "$c/ck"
expect 2 "checkpoint to an empty path" -- "$B" checkpoint "$c/db" ""

# Commands take only what is theirs: destroy refuses a directory that is not
# a database and a link to one; an open that creates nothing leaves nothing.
u="$D/foreign"
mkdir -p "$u"
touch "$u/notes.tmp" "$u/1.log" "$u/2024.sst" "$u/CURRENT" "$u/keep.txt"
expect 2 "destroy of a directory that is not a database" -- "$B" destroy "$u"
[ "$(ls "$u" | wc -l)" -eq 5 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: destroy removed foreign files"; }
ln -s "$c/db" "$D/dblink"
expect 2 "destroy through a symbolic link" -- "$B" destroy "$D/dblink"
expect 0 "the linked database is whole" -- "$B" get "$c/db" c00150
touch "$c/db/notes.tmp"
expect 0 "an open keeps a user's .tmp file" -- "$B" get "$c/db" c00150
[ -e "$c/db/notes.tmp" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: open removed notes.tmp"; }
mkdir -p "$D/plain"
expect 3 "scan where there is no database" -- "$B" scan "$D/plain" --limit 1
[ -z "$(ls "$D/plain")" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: scan left files in a plain directory"; }
expect 2 "check where there is no database" -- "$B" check "$D/plain"
[ -z "$(ls "$D/plain")" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: check left files in a plain directory"; }
expect 3 "get of a missing database" -- "$B" get "$D/notdb" k
[ ! -e "$D/notdb" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: get created a directory"; }
expect 2 "load of input with no record" -- "$B" load "$D/db5" "$D/bad.tsv"
[ ! -e "$D/db5" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: load created a database for bad input"; }

# A lost CURRENT: no write command creates a database over the tables;
# repair points CURRENT at the newest intact manifest, every row back.
cp -r "$c/db" "$D/lost"
rm "$D/lost/CURRENT"
expect 3 "put over a database that lost CURRENT" -- "$B" put "$D/lost" k v
stderr_has "refusal names repair" "bloomkv repair"
expect 3 "load over a database that lost CURRENT" -- "$B" load "$D/lost" "$c/in.tsv"
expect 0 "repair" -- "$B" repair "$D/lost"
expect 0 "rows after repair" -- "$B" scan "$D/lost" --from c02999
output_is "last rows after repair" "$(printf 'c02999\tv2999\nc03000\tv3000')"
expect 0 "repair of an intact database" -- "$B" repair "$D/lost"
rm "$D/lost"/MANIFEST-*
expect 3 "repair without a manifest" -- "$B" repair "$D/lost"
expect 2 "repair of a directory that is not there" -- "$B" repair "$D/nothere"

# A damaged table: scan stops at the damage; repair keeps every other row
# and sets the original aside in lost/.
awk 'BEGIN { for (i = 0; i < 20000; i++) printf "s%06d\tvalue%d\n", i, i }' >"$D/salvage.tsv"
"$B" load "$D/salv" "$D/salvage.tsv" >/dev/null && "$B" compact "$D/salv" >/dev/null
sst=$(ls "$D/salv"/*.sst | head -1)
printf 'XXXXXXXX' | dd of="$sst" bs=1 seek=$(($(stat -c %s "$sst") / 3)) conv=notrunc 2>/dev/null
expect 3 "scan of a damaged table" -- "$B" scan "$D/salv" --count
expect 3 "scan --continue-on-error past the damage" -- "$B" scan "$D/salv" --count --continue-on-error
stderr_has "names what it skipped" "unreadable part"
past=$(cat "$D/out")
[ "$past" -gt 19000 ] && [ "$past" -lt 20000 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: read past the damage: $past"; }
expect 0 "repair of a damaged table" -- "$B" repair "$D/salv"
if grep -q "data blocks damaged" "$D/out" && grep -q "lost/" "$D/out"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: repair names what it kept and set aside: $(cat "$D/out")"; fi
[ -f "$D/salv/lost/$(basename "$sst")" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: no original in lost/"; }
expect 0 "scan after repair" -- "$B" scan "$D/salv" --count
kept=$(cat "$D/out")
[ "$kept" -gt 19000 ] && [ "$kept" -lt 20000 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: kept $kept rows"; }
expect 0 "check after repair" -- "$B" check "$D/salv"

# Usage errors are usage errors; results are never silently clamped.
expect 2 "compact with --from after --to" -- "$B" compact "$c/db" --from z --to a
expect 2 "scan with --from after --to" -- "$B" scan "$c/db" --from z --to a
expect 0 "scan of an empty range" -- "$B" scan "$c/db" --from c00010 --to c00010
expect 2 "--limit past a long" -- "$B" scan "$c/db" --limit 99999999999999999999
expect 2 "find-value --limit 0 without an index" -- "$B" find-value "$c/db" v1 --limit 0
expect 2 "find-value --all with --any" -- "$B" find-value "$c/db" v1 --all --any
expect 1 "value-index drop without an index" -- "$B" value-index drop "$c/db"
stderr_has "nothing dropped" "no value index"
{ printf 'a\t1\n'; head -c 1048577 /dev/zero | tr '\0' k; printf '\tv\n'; } >"$D/bigkey.tsv"
expect 2 "load of a key over the maximum" -- "$B" load "$D/big" "$D/bigkey.tsv"
stderr_has "the limit is named" "at most 1048576"
[ ! -e "$D/big" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: an oversized load created a database"; }

# make-table and ingest: a sorted input becomes a table added at once.
i="$D/ingest"
mkdir -p "$i"
for n in $(seq 1 300); do printf 'i%05d\tnew%d\n' "$n" "$n"; done >"$i/sorted.tsv"
printf 'b\t1\na\t2\n' >"$i/unsorted.tsv"
expect 0 "put before ingest" -- "$B" put "$i/db" i00010 old
expect 0 "make-table" -- "$B" make-table "$i/t.sst" "$i/sorted.tsv"
output_is "make-table report" "wrote 300 entries to $i/t.sst"
expect 2 "make-table refuses unsorted input" -- "$B" make-table "$i/u.sst" "$i/unsorted.tsv"
stderr_has "the order named in the tool's terms" "strictly increasing byte order"
stderr_has "unsorted input names the line" "line 2"
[ ! -e "$i/u.sst" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: make-table left a partial table"; }
expect 3 "make-table never overwrites" -- "$B" make-table "$i/t.sst" "$i/sorted.tsv"
expect 0 "ingest" -- "$B" ingest "$i/db" "$i/t.sst"
expect 0 "ingested value replaces the older one" -- "$B" get "$i/db" i00010
output_is "ingested value" "new10"
expect 0 "make-table from stdin" -- "$B" make-table "$i/t2.sst" - <<<"j00001	x"
expect 0 "ingest --move" -- "$B" ingest "$i/db" "$i/t2.sst" --move
[ ! -e "$i/t2.sst" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: ingest --move left the file"; }
expect 3 "ingest of a file that is not a table" -- "$B" ingest "$i/db" "$i/sorted.tsv"
stderr_has "not a table names the file" "sorted.tsv"
expect 0 "check after ingest" -- "$B" check "$i/db"

# Reading commands change nothing: every file's bytes, size and
# modification time stay as they were (no LOCK, no new WAL or manifest,
# no flush of the WAL), and they read a database another process holds.
ro="$D/ro"
printf 'r%05d\tv%05d\n' $(seq 1 3000 | awk '{print $1, $1}') >"$D/ro.tsv"
expect 0 "load for read-only" -- "$B" load "$ro" "$D/ro.tsv"
expect 0 "put into the WAL" -- "$B" put "$ro" walkey walvalue
snapshot() { (cd "$ro" && for f in *; do printf '%s %s %s\n' "$f" "$(stat -c '%s %Y.%y' "$f")" "$(md5sum <"$f")"; done); }
before=$(snapshot)
expect 0 "read-only get" -- "$B" get "$ro" walkey
output_is "read-only get sees the WAL" "walvalue"
expect 0 "read-only scan" -- "$B" scan "$ro" --limit 2
expect 0 "read-only stats" -- "$B" stats "$ro"
expect 1 "read-only get of a missing key" -- "$B" get "$ro" nokey
if [ "$(snapshot)" = "$before" ]; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: reading commands changed the database: $(diff <(echo "$before") <(snapshot))"
fi
# Beside a writer: a load in another process holds the database open.
printf 'w%06d\tx\n' $(seq 1 200000) >"$D/big.tsv"
"$B" load "$ro" "$D/big.tsv" >/dev/null 2>&1 &
loader=$!
sleep 0.2
expect 0 "get beside a loading writer" -- "$B" get "$ro" r00042
output_is "get beside a writer" "v00042"
expect 0 "checkpoint beside a loading writer" -- "$B" checkpoint "$ro" "$D/ro-copy"
wait "$loader"
expect 0 "get after the load" -- "$B" get "$ro" w200000
expect 0 "the checkpoint reads" -- "$B" get "$D/ro-copy" walkey
output_is "the checkpoint holds what the WAL held" "walvalue"
# A reading command pointed at a directory that is not a database leaves nothing there.
mkdir "$D/plainro"
expect 3 "scan of a directory that is no database" -- "$B" scan "$D/plainro" --limit 1
expect 3 "get in a directory that does not exist" -- "$B" get "$D/nowhere" k
if [ -z "$(ls -A "$D/plainro")" ] && [ ! -e "$D/nowhere" ]; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: a reading command left files: $(ls -A "$D/plainro") $(ls -d "$D/nowhere" 2>&1)"
fi

# Text output is binary-safe: tabs, newlines, backslashes and control
# bytes are escaped, load reads the escapes back, so scan | load
# round-trips; a backslash that starts no escape is refused.
printf 'a\\tb\tline1\\nline2\nback\\\\slash\tx\\x01y\n' >"$D/esc.tsv"
expect 0 "load escapes" -- "$B" load "$D/esc" "$D/esc.tsv"
expect 0 "scan escapes" -- "$B" scan "$D/esc"
output_is "scan prints the escapes" "$(cat "$D/esc.tsv")"
expect 0 "key with a tab, read as hex" -- "$B" get --hex "$D/esc" 610962
output_is "the tab and newline are bytes" "6c696e65310a6c696e6532"
"$B" scan "$D/esc" >"$D/esc2.tsv" 2>/dev/null
expect 0 "scan | load" -- "$B" load "$D/esc2" "$D/esc2.tsv"
expect 0 "round trip" -- "$B" scan --hex "$D/esc2"
output_is "round trip keeps the bytes" "$(printf '610962\t6c696e65310a6c696e6532\n6261636b5c736c617368\t780179')"
printf 'bad\\q\tv\n' >"$D/badesc.tsv"
expect 2 "a backslash that starts no escape" -- "$B" load "$D/badesc" "$D/badesc.tsv"
stderr_has "bad escape named" "starts no escape"

# scan: a prefix, reversed, counted, keys alone, JSON.
printf 'ab1\tv1\nab2\tv2\nab3\tv3\nb1\tx\n' >"$D/sc.tsv"
expect 0 "load for scan" -- "$B" load "$D/sc" "$D/sc.tsv"
expect 0 "scan --prefix --reverse" -- "$B" scan "$D/sc" --prefix ab --reverse --limit 2
output_is "prefix, reversed, limited" "$(printf 'ab3\tv3\nab2\tv2')"
expect 0 "scan --prefix=P --count" -- "$B" scan "$D/sc" --prefix=ab --count
output_is "count" "3"
expect 0 "scan --keys-only --json" -- "$B" scan "$D/sc" --keys-only --json --from b
output_is "keys as JSON" '{"key":"b1"}'
expect 0 "scan --prefix of 0xff bytes" -- "$B" scan "$D/sc" --hex --prefix ff
output_is "nothing after the last key" ""
expect 2 "scan --prefix with --from" -- "$B" scan "$D/sc" --prefix ab --from a
expect 2 "scan --count --keys-only" -- "$B" scan "$D/sc" --count --keys-only
expect 2 "find-value --prefix=VALUE" -- "$B" find-value "$D/sc" v1 --prefix=v

# get and delete take several keys, or keys from stdin.
expect 1 "get of several keys, one absent" -- "$B" get "$D/sc" ab1 nokey ab3
output_is "several keys print key<TAB>value" "$(printf 'ab1\tv1\nab3\tv3')"
stderr_has "the absent key is named" "not found: nokey"
printf 'ab2\nb1\n' >"$D/keys.txt"
expect 0 "get keys from stdin" -- sh -c "\"\$0\" get \"\$1\" - <\"\$2\"" "$B" "$D/sc" "$D/keys.txt"
output_is "keys from stdin" "$(printf 'ab2\tv2\nb1\tx')"
expect 0 "delete several keys" -- "$B" delete "$D/sc" ab1 ab2
expect 0 "what is left" -- "$B" scan "$D/sc" --keys-only
output_is "both deleted" "$(printf 'ab3\nb1')"

# Help: -h and help as --help; help CMD gives that command's usage.
expect 0 "-h" -- "$B" -h
expect 0 "help put" -- "$B" help put
if grep -q "^usage: bloomkv put DB KEY VALUE" "$D/out"; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: help put printed: $(head -1 "$D/out")"
fi
expect 3 "scan where no database is" -- "$B" scan "$D/plainro"
stderr_has "in the tool's terms" "bloomkv put"

# stats: what the files hold, for people or as JSON; --all the engine's report.
expect 0 "stats" -- "$B" stats "$D/sc"
if grep -q "^L0 " "$D/out" && grep -q "^write-ahead log " "$D/out"; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: stats lacks levels or the log: $(cat "$D/out")"
fi
expect 0 "stats --json" -- "$B" stats "$D/sc" --json
if /usr/bin/python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); assert len(d["levels"]) == 7 and d["entries"] >= 0 and d["memtable_entries"] + d["entries"] >= d["estimated_live_keys"]' "$D/out"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: stats --json: $(cat "$D/out")"
fi
expect 0 "stats --all" -- "$B" stats "$D/sc" --all
if grep -q "^counters:" "$D/out"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: stats --all"; fi

# Options are spelled out: an abbreviation is refused (it once ran as
# whichever option it happened to prefix), with the option meant named.
expect 2 "abbreviated option" -- "$B" find-value "$ro" v00001 --cont
stderr_has "abbreviation names the option" "did you mean --count?"
expect 2 "misspelled option" -- "$B" scan "$ro" --limt 3
stderr_has "typo names the option" "did you mean --limit?"
expect 0 "an option's value may start with --" -- "$B" scan "$ro" --from --x --limit 1
expect 0 "--name=value form" -- "$B" scan "$ro" --limit=1

# Keys and values hex apart, 0x accepted; get and check as JSON.
xdb="$D/xdb"
expect 0 "put --key-hex" -- "$B" put --key-hex "$xdb" 0x6b31 plain
expect 0 "get --key-hex" -- "$B" get --key-hex "$xdb" 6b31
output_is "--key-hex prints the value as text" "plain"
expect 0 "get --value-hex, two keys" -- "$B" get --value-hex "$xdb" k1 k1
output_is "--value-hex prints the key as text" "$(printf 'k1\t706c61696e\nk1\t706c61696e')"
expect 0 "scan --key-hex" -- "$B" scan --key-hex "$xdb"
output_is "scan --key-hex output" "$(printf '6b31\tplain')"
expect 0 "put --value-hex with 0X" -- "$B" put --value-hex "$xdb" k2 0X00ff
expect 0 "get --hex" -- "$B" get --hex "$xdb" 0x6b32
output_is "0X value stored as bytes" "00ff"
expect 2 "0x alone is not a key with --hex" -- "$B" get --hex "$xdb" 0xzz
expect 2 "--value-hex is no option of delete" -- "$B" delete --value-hex "$xdb" k1
expect 1 "get --json with an absent key" -- "$B" get --json "$xdb" k1 nope
output_is "get --json output" "$(printf '{"key":"k1","value":"plain"}\n{"key":"nope","value":null}')"
expect 0 "check --json" -- "$B" check --json "$xdb"
output_is "check --json of a sound database" '{"problems":[],"ok":true}'
expect 2 "check --json of no database" -- "$B" check --json "$D/nothing-here"
if grep -q '"ok":false,"error":' "$D/out"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: check --json names the error: $(cat "$D/out")"; fi

# load --deletes: a line holding only a key deletes it; without the flag
# such a line is refused and nothing is written.
printf 'a\t1\nb\t2\nc\t3\n' >"$D/puts.tsv"
expect 0 "load puts" -- "$B" load "$D/ldel" "$D/puts.tsv"
printf 'b\nd\t4\n' >"$D/dels.tsv"
expect 2 "a key alone needs --deletes" -- "$B" load "$D/ldel" "$D/dels.tsv"
stderr_has "names --deletes" "with --deletes"
expect 0 "load --deletes" -- "$B" load --deletes "$D/ldel" "$D/dels.tsv"
output_is "load counts the deletes" "loaded 2 records (1 of them deletes)"
expect 0 "scan after deletes" -- "$B" scan "$D/ldel" --keys-only
output_is "b deleted, d added" "$(printf 'a\nc\nd')"
"$B" scan "$D/ldel" --keys-only --from c | "$B" load --deletes "$D/ldel" - >/dev/null
expect 0 "scan --keys-only | load --deletes" -- "$B" scan "$D/ldel" --keys-only
output_is "the keys scanned are deleted" "a"

# cluster find-value: bad arguments are refused before any connection.
expect 2 "cluster: bad hex value" -- "$B" cluster find-value 127.0.0.1:1 zz --hex
expect 2 "cluster: odd hex value" -- "$B" cluster find-value 127.0.0.1:1 abc --hex
expect 2 "cluster: address without a port" -- "$B" cluster find-value nohost v
expect 2 "cluster: missing value" -- "$B" cluster find-value 127.0.0.1:1

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
