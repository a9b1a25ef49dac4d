#!/usr/bin/env bash
# The man page's source says what the tool does: every command that
# `bloomkv help` lists has its entry, and every option each command's own
# help names appears in the page. Usage: man_test.sh BLOOMKV MAN_SOURCE
set -u
B=$1
page=$2
pass=0 fail=0
commands=$("$B" help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
[ -n "$commands" ] || { echo "FAIL: bloomkv help lists no command"; exit 1; }
for c in $commands; do
    if grep -q "^\*$c\*" "$page"; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: the man page has no entry for $c"
    fi
    for flag in $("$B" help "$c" 2>&1 | head -1 | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        if grep -q -- "\*$flag\*" "$page"; then pass=$((pass + 1)); else
            fail=$((fail + 1))
            echo "FAIL: $c's $flag is not in the man page"
        fi
    done
done
for status in 0 1 2 3; do
    if grep -q "^\*$status\*" "$page"; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: exit status $status is not described"
    fi
done
# Bash completion offers every command, and a command's own options.
completion=$(dirname "$0")/../../tools/bloomkv.bash-completion
complete_words() { # WORDS...: what completing the last one offers
    PATH="$(dirname "$B"):$PATH" bash -c 'source "$0"; COMP_WORDS=("${@}"); COMP_CWORD=$(($# - 1)); _bloomkv;
        printf "%s\n" "${COMPREPLY[@]}"' "$completion" "$@"
}
offered=$(complete_words bloomkv "")
for c in $commands; do
    if grep -qx "$c" <<<"$offered"; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: completion does not offer $c"
    fi
done
if complete_words bloomkv scan DB --rev | grep -qx -- --reverse; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: completion does not offer scan's --reverse"
fi
# The COUNTERS section names every counter stats --all prints.
db=$(mktemp -d /tmp/bkv-man-XXXXXX)
"$B" put "$db/d" k v >/dev/null
for c in $("$B" stats "$db/d" --all | sed -n 's/^counters: //p' | tr ' ' '\n' | cut -d= -f1); do
    if sed -n '/^# COUNTERS/,/^# EXIT STATUS/p' "$page" | grep -q "\*$c\*"; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: counter $c is not described"
    fi
done
rm -rf "$db"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
