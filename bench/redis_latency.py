#!/usr/bin/python3
"""Latency of other clients while the module works off the event loop.

    /usr/bin/python3 bench/redis_latency.py build/bloomkv_redis.so [ROWS] [ROUNDS]

One node on 127.0.0.1 (a free port, stopped by its pid) is loaded with
ROWS rows (default 2,000,000) that all hold the same value. Each round
then measures the latency of BKV.GET and GET, sent one at a time by a
second client, while a first client runs BKV.COMPACT, and again while it
runs a BKV.FINDVALUE that matches every row; then FLUSHALL's own time.
Prints, per phase, the requests answered during the long command, p50,
p99 and the longest wait, with the medians and ranges over the rounds.
The long command runs in a process of its own, so that its client's
parsing of the reply never holds up the probes.
"""
import os
import shutil
import socket
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time

import redis

MODULE = os.path.abspath(sys.argv[1])
ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000_000
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(work):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", work, "--save", "",
                             "--appendonly", "no", "--logfile", "server.log", "--loadmodule", MODULE, "dir",
                             os.path.join(work, "bkv")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=600)
    for _ in range(200):
        try:
            r.ping()
            return proc, port
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def load(r, rows):
    batch = 2000
    for start_at in range(0, rows, batch):
        p = r.pipeline(transaction=False)
        for i in range(start_at, min(rows, start_at + batch)):
            p.execute_command("BKV.SET", "row%09d" % i, "same")
        p.execute()
    r.set("native", "x")


def run_long(port, command, took):
    """Runs command in a process of its own: parsing a reply of millions
    of rows holds that interpreter's lock for seconds, and a probe in the
    same process would count that wait as the server's."""
    c = redis.Redis(host="127.0.0.1", port=port, socket_timeout=600)
    c.ping()
    t = time.perf_counter()
    c.execute_command(*command)
    took.value = (time.perf_counter() - t) * 1000


def probe_during(port, command):
    """Latencies (ms) of BKV.GET and GET from a second client while the
    first runs command; and how long command took."""
    probe = redis.Redis(host="127.0.0.1", port=port, socket_timeout=600)
    probe.ping()
    took = multiprocessing.Value("d", 0.0)
    proc = multiprocessing.Process(target=run_long, args=(port, command, took))
    proc.start()
    # Probes run from the moment the command is in the server's hands
    # until the server has handed over its whole reply (the client is no
    # longer blocked and no output waits in the server): the child's
    # parsing after that is not the server's time.
    def server_busy():
        for line in probe.execute_command("CLIENT", "LIST").decode().split("\n"):
            f = dict(kv.split("=", 1) for kv in line.split(" ") if "=" in kv)
            if f.get("cmd") == command[0].lower():
                return "b" in f.get("flags", "") or f.get("oll", "0") != "0" or f.get("omem", "0") != "0"
        return None  # not connected yet, or gone
    while proc.is_alive() and server_busy() is None:
        time.sleep(0.0005)
    lat, i = [], 0
    while proc.is_alive():
        if i % 256 == 255 and not server_busy():
            break
        t = time.perf_counter()
        if i % 2:
            probe.get("native")
        else:
            probe.execute_command("BKV.GET", "row%09d" % (i * 7919 % ROWS))
        lat.append((time.perf_counter() - t) * 1000)
        i += 1
    proc.join()
    return lat, took.value


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def summary(name, rounds):
    def med_range(vals, fmt):
        return "%s (%s-%s)" % (fmt % statistics.median(vals), fmt % min(vals), fmt % max(vals))
    print("%-30s %-22s %-22s %-22s %-22s %s" % (
        name, med_range([len(l) for l, _ in rounds], "%d"), med_range([pct(l, 50) for l, _ in rounds], "%.3f"),
        med_range([pct(l, 99) for l, _ in rounds], "%.3f"), med_range([max(l) if l else 0 for l, _ in rounds], "%.2f"),
        med_range([t for _, t in rounds], "%.0f")))


def main():
    work = tempfile.mkdtemp(prefix="bkv-rlat-")
    proc = None
    try:
        proc, port = start(work)
        r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=600)
        t = time.perf_counter()
        load(r, ROWS)
        print("loaded %d rows in %.1f s" % (ROWS, time.perf_counter() - t))
        compact, find, flush = [], [], []
        for _ in range(ROUNDS):
            # Fresh writes for the compaction to take in.
            p = r.pipeline(transaction=False)
            for i in range(0, ROWS, max(1, ROWS // 20000)):
                p.execute_command("BKV.SET", "row%09d" % i, "same")
            p.execute()
            compact.append(probe_during(port, ["BKV.COMPACT"]))
            find.append(probe_during(port, ["BKV.FINDVALUE", "same"]))
        print("%-30s %-22s %-22s %-22s %-22s %s" % ("while", "requests answered", "p50 ms", "p99 ms", "longest ms",
                                                    "the command's ms"))
        summary("BKV.COMPACT", compact)
        summary("BKV.FINDVALUE (every row)", find)
        for _ in range(ROUNDS):
            t = time.perf_counter()
            r.flushall()
            flush.append((time.perf_counter() - t) * 1000)
            load(r, min(ROWS, 200_000))
        print("FLUSHALL of a node: %.1f ms median (%.1f-%.1f), the first with %d rows, later ones with 200,000" %
              (statistics.median(flush), min(flush), max(flush), ROWS))
    finally:
        if proc:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
