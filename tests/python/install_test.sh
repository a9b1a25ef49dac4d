#!/usr/bin/env bash
# `pip install ./python` as the README gives it, into a fresh virtual
# environment (offline: setuptools comes from Debian's python3-setuptools),
# then `import bloomkv` from somewhere else. A copy of the sources is
# installed so the checkout stays clean; the library comes from this build.
set -euo pipefail
python=$1 src=$2 build=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/python" "$src/include" "$work/"
"$python" -m venv --system-site-packages "$work/venv"
BLOOMKV_BUILD_DIR="$build" "$work/venv/bin/pip" install -q --no-index "$work/python"
cd "$work"
"$work/venv/bin/python" - <<'PY'
import os, bloomkv
assert "venv" in bloomkv.__file__, bloomkv.__file__
with bloomkv.DB("db", create_if_missing=True) as db:
    db.put(b"k", b"v")
    assert db.get(b"k") == b"v"
f = bloomkv.Filter.build([b"a", b"b"])
assert b"a" in f
print("installed", bloomkv.__version__, "at", os.path.dirname(bloomkv.__file__))
PY
