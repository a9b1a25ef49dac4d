#!/usr/bin/env bash
# Installs the build into a scratch prefix and builds a separate project
# against it with find_package(bloomkv), linking the shared and the static
# library, then runs both. Usage: package_test.sh BUILD_DIR CONSUMER_SOURCE
set -euo pipefail
build=$1
src=$2
if grep -q '^BKV_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
    echo "package_test: sanitized build, not installed (a user's program would need the same flags)"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/bkv-package-XXXXXX")
trap 'rm -rf "$T"' EXIT
cmake --install "$build" --prefix "$T/prefix" >/dev/null
cmake -S "$src" -B "$T/consumer" -DCMAKE_PREFIX_PATH="$T/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$T/consumer" >/dev/null
pass=0 fail=0
for kind in shared static; do
    if LD_LIBRARY_PATH="$T/prefix/lib:$T/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}" \
        "$T/consumer/consumer_$kind" "$T/db-$kind" >/dev/null; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        echo "FAIL: consumer linked $kind"
    fi
done
# The soname carries major.minor before 1.0.
if [ -n "$(find "$T/prefix" -name libbloomkv.so.0.3)" ]; then pass=$((pass + 1)); else
    fail=$((fail + 1))
    echo "FAIL: no libbloomkv.so.0.3 installed"
fi
# A LevelDB C program built the way its README says: pkg-config's flags
# for bloomkv-leveldb, leveldb/c.h unchanged in the source.
pcdir=$(dirname "$(find "$T/prefix" -name bloomkv-leveldb.pc | head -1)")
cat >"$T/ldb.c" <<'PROGRAM'
#include <stdio.h>
#include <string.h>
#include "leveldb/c.h"
int main(int argc, char **argv) {
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    char *err = NULL;
    leveldb_t *db = leveldb_open(o, argv[argc - 1], &err);
    if (err) return fprintf(stderr, "%s\n", err), 1;
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_put(db, wo, "k", 1, "v", 1, &err);
    size_t n;
    char *v = leveldb_get(db, ro, "k", 1, &n, &err);
    int ok = !err && v && n == 1 && v[0] == 'v';
    leveldb_free(v);
    leveldb_close(db);
    return ok ? 0 : 1;
}
PROGRAM
# (The library path lets the linker find libbloomkv, which the layer needs.)
libs="$T/prefix/lib:$T/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
if [ -n "$pcdir" ] && flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$T/prefix" --cflags --libs bloomkv-leveldb) &&
    LD_LIBRARY_PATH="$libs" cc -o "$T/ldb" "$T/ldb.c" $flags && LD_LIBRARY_PATH="$libs" "$T/ldb" "$T/db-leveldb"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1))
    echo "FAIL: a LevelDB C program built with pkg-config bloomkv-leveldb"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
