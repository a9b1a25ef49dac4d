#!/bin/bash
# The README's Redis quick start: scripts/redis-cluster makes a three-node
# cluster with the module, rows land on every node, a restart keeps them,
# and stop leaves no node running.
# Usage: cluster_script_test.sh MODULE BLOOMKV_TOOL
set -u
module=$1 tool=$2
here=$(cd "$(dirname "$0")/../.." && pwd)
D=$(mktemp -d /tmp/bkv-cluster-XXXXXX)
# Three ports free with their cluster bus ports (port + 10000), all below
# the kernel's ephemeral range (32768 up), where other tests' servers and
# clients take theirs.
free_ports() {
    /usr/bin/python3 - "$1" <<'PY'
import socket, sys
base = int(sys.argv[1])
for p in [base, base + 1, base + 2, base + 10000, base + 10001, base + 10002]:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        sys.exit(1)
    finally:
        s.close()
PY
}
port=$((20000 + ($$ % 800) * 3))
for _ in $(seq 20); do
    free_ports $port && break
    port=$((20000 + (port - 20000 + 3) % 2400))
done
pass=0 fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
cleanup() { "$here/scripts/redis-cluster" stop "$D" >/dev/null 2>&1; rm -rf "$D"; }
trap cleanup EXIT

check "start" '"$here/scripts/redis-cluster" start "$D" "$module" $port >/dev/null'
for i in $(seq 1 30); do redis-cli -c -p $port BKV.SET "user:$i" "v$((i % 3))" >/dev/null; done
check "rows on every node" '(for p in $port $((port + 1)) $((port + 2)); do [ "$(redis-cli -p $p BKV.SCAN 0 COUNT 100 | wc -l)" -gt 1 ] || exit 1; done)'
check "get through any node" '[ "$(redis-cli -c -p $((port + 2)) BKV.GET user:7)" = v1 ]'
check "find-value across the cluster" '[ "$("$tool" cluster find-value 127.0.0.1:$port v1 | wc -l)" = 10 ]'
check "a second start is refused" '! "$here/scripts/redis-cluster" start "$D" "$module" $port 2>/dev/null'
pids=$(cat "$D"/node*/redis.pid)
check "stop" '"$here/scripts/redis-cluster" stop "$D" >/dev/null'
check "no node left" '(for p in $pids; do ! kill -0 $p 2>/dev/null || exit 1; done)'
check "restart" '"$here/scripts/redis-cluster" start "$D" "$module" $port >/dev/null'
check "rows kept over the restart" '[ "$("$tool" cluster find-value 127.0.0.1:$port v0 | wc -l)" = 10 ]'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
