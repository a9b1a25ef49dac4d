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
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
