#!/usr/bin/env bash
# Installs the Debian packages that scripts/deb built (apt-get install
# ./...deb), tests the installed files only, then purges them and checks
# that nothing they installed is left. Needs root; run by CI (make
# deb-test) on a machine of its own.
#   deb_test.sh DEB_DIR
set -euo pipefail
debs=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/bkv-debtest-XXXXXX")
pkgs=(libbloomkv0.3 libbloomkv-dev bloomkv redis-bloomkv python3-bloomkv libbloomkv-leveldb0.3 libbloomkv-leveldb-dev)
files=()
for p in "${pkgs[@]}"; do files+=("$debs/$(cd "$debs" && ls "${p}"_*.deb | head -1)"); done
cleanup() {
    [ -n "${redis_pid:-}" ] && kill "$redis_pid" 2>/dev/null || true
    apt-get purge -y -q "${pkgs[@]}" >/dev/null 2>&1 || true
    rm -rf "$T"
}
trap cleanup EXIT
apt-get install -y -q "${files[@]}" >/dev/null
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
cd "$T" # nothing of the source tree on any path

# C, through pkg-config and through find_package.
cat >c.c <<'PROGRAM'
#include <bloomkv.h>
#include <string.h>
int main(int argc, char **argv) {
    bkv_db *db;
    if (bkv_open(argv[argc - 1], NULL, &db) != BKV_OK) return 1;
    void *v;
    size_t n;
    int ok = bkv_put(db, NULL, "k", 1, "v", 1) == BKV_OK && bkv_get(db, NULL, "k", 1, &v, &n) == BKV_OK && n == 1;
    if (ok) bkv_free(v);
    return bkv_close(db) == BKV_OK && ok ? 0 : 1;
}
PROGRAM
# shellcheck disable=SC2046
if cc -o c c.c $(pkg-config --cflags --libs bloomkv) && ./c "$T/db-c"; then ok; else bad "a C program built with pkg-config"; fi
if cmake -S "$src/tests/package" -B consumer -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build consumer >/dev/null &&
    consumer/consumer_shared "$T/db-cmake" >/dev/null && consumer/consumer_static "$T/db-cmake-static" >/dev/null; then ok
else bad "a project built with find_package(bloomkv)"; fi
cat >ldb.c <<'PROGRAM'
#include "leveldb/c.h"
int main(int argc, char **argv) {
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    char *err = NULL;
    leveldb_t *db = leveldb_open(o, argv[argc - 1], &err);
    if (err) return 1;
    leveldb_put(db, leveldb_writeoptions_create(), "k", 1, "v", 1, &err);
    size_t n;
    char *v = leveldb_get(db, leveldb_readoptions_create(), "k", 1, &n, &err);
    int ok = !err && v && n == 1;
    leveldb_free(v);
    leveldb_close(db);
    return ok ? 0 : 1;
}
PROGRAM
# shellcheck disable=SC2046
if cc -o ldb ldb.c $(pkg-config --cflags --libs bloomkv-leveldb) && ./ldb "$T/db-leveldb"; then ok
else bad "a LevelDB C program built with pkg-config bloomkv-leveldb"; fi

# The tool and its man page.
if [ "$(command -v bloomkv)" = /usr/bin/bloomkv ] && bloomkv put "$T/db-tool" k v >/dev/null &&
    [ "$(bloomkv get "$T/db-tool" k)" = v ] && bloomkv check "$T/db-tool" >/dev/null; then ok
else bad "bloomkv put/get/check"; fi
if man -w bloomkv >/dev/null 2>&1 || [ -f /usr/share/man/man1/bloomkv.1.gz ]; then ok; else bad "no man page"; fi
if [ -f /usr/share/bash-completion/completions/bloomkv ]; then ok; else bad "no bash completion"; fi

# The Redis module, from Debian's module directory.
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    redis-server --port "$port" --bind 127.0.0.1 --dir "$T" --save "" \
        --loadmodule /usr/lib/redis/modules/bloomkv_redis.so dir "$T/redis-bkv" >"$T/redis.log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
    if [ "$(redis-cli -p "$port" BKV.SET user:1 alice)" = OK ] && [ "$(redis-cli -p "$port" BKV.GET user:1)" = alice ] &&
        [ "$(redis-cli -p "$port" BF.ADD seen x)" = 1 ]; then ok; else bad "the installed Redis module"; fi
    kill "$redis_pid" && wait "$redis_pid" 2>/dev/null || true
    redis_pid=
else
    echo "deb_test: no redis-server: the module's load is not tried"
fi

# Python, Debian's interpreter, nothing on PYTHONPATH.
if env -u PYTHONPATH /usr/bin/python3 -c '
import bloomkv, sys
with bloomkv.DB(sys.argv[1], create_if_missing=True) as db:
    db.put(b"k", b"v")
    assert db.get(b"k") == b"v"
assert bloomkv.__file__.startswith("/usr/lib/python3/dist-packages/"), bloomkv.__file__
' "$T/db-py"; then ok; else bad "import bloomkv from python3-bloomkv"; fi

# Purged, nothing of theirs is left.
installed=$(dpkg -L "${pkgs[@]}" 2>/dev/null | sort -u)
apt-get purge -y -q "${pkgs[@]}" >/dev/null
left=0
while read -r f; do
    [ -n "$f" ] && [ -f "$f" ] && { echo "left behind: $f"; left=1; }
done <<<"$installed"
if [ "$left" = 0 ]; then ok; else bad "files left after apt-get purge"; fi
echo "deb_test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
