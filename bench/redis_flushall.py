#!/usr/bin/python3
"""FLUSHALL's time on a node holding ROWS rows, for two builds of the module.

    /usr/bin/python3 bench/redis_flushall.py BEFORE.so AFTER.so [ROWS] [ROUNDS]

Each round starts a fresh node per build (alternating), loads ROWS rows
with bench/redis_latency.py's loader (default 2,000,000), times one
FLUSHALL, checks that no row is left, and stops the node by its pid.
Prints each round, then the median and range per build.
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

BUILDS = {"before": os.path.abspath(sys.argv[1]), "after": os.path.abspath(sys.argv[2])}
ROWS = int(sys.argv[3]) if len(sys.argv) > 3 else 2_000_000
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 3
sys.argv = [sys.argv[0], BUILDS["after"], str(ROWS), "1"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis_latency as rl  # noqa: E402  (reads sys.argv as set above)


def main():
    times = {name: [] for name in BUILDS}
    for rnd in range(ROUNDS):
        for name, module in BUILDS.items():
            rl.MODULE = module
            work = tempfile.mkdtemp(prefix="bkv-flushall-")
            proc, port = rl.start(work)
            try:
                r = rl.redis.Redis(host="127.0.0.1", port=port, socket_timeout=600)
                rl.load(r, ROWS)
                t = time.perf_counter()
                r.flushall()
                ms = (time.perf_counter() - t) * 1000
                left = r.execute_command("BKV.SCAN", 0, "COUNT", 10)[1]
                if left:
                    raise RuntimeError("%s: rows left after FLUSHALL" % name)
                times[name].append(ms)
                print("round %d %-6s %.2f ms" % (rnd, name, ms), flush=True)
            finally:
                proc.kill()
                proc.wait()
                shutil.rmtree(work, ignore_errors=True)
    for name, v in times.items():
        print("%-6s median %.2f ms (%.2f-%.2f)" % (name, statistics.median(v), min(v), max(v)))


if __name__ == "__main__":
    main()
