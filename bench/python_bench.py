#!/usr/bin/env python3
"""bloomkv's Python extension beside plyvel (LevelDB's), in one run.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py [--num N] [--rounds R]

Both stores get the same settings: 4 MiB write buffer, 8 MiB block cache,
no compression, a 10 bits/key Bloom filter (LevelDB's built-in one, given
to plyvel explicitly: its default has none). Each round loads a fresh
database of N random 16-byte keys with 100-byte values one put at a time,
loads another with write batches of 1,000, compacts the first fully, then
reads it: N/4 random gets of present keys, N/4 of absent ones, one full
forward iteration. Engines alternate within each round; the table shows
the median ops/s over the rounds and bloomkv's ratio. Last, a filter of N
keys: may_contain_many against a Python loop of may_contain.
"""
import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import bloomkv

try:
    import plyvel
except ImportError:  # the report still shows bloomkv's own figures
    plyvel = None

VALUE_BYTES = 100
BATCH = 1000


class Bloomkv:
    name = "bloomkv"

    def open(self, path):
        return bloomkv.DB(path, create_if_missing=True, write_buffer_size=4 << 20, block_cache_size=8 << 20,
                          filter="blocked", bits_per_key=10)

    def compact(self, db):
        db.compact()


class Plyvel:
    name = "plyvel"

    def open(self, path):
        return plyvel.DB(path, create_if_missing=True, write_buffer_size=4 << 20, lru_cache_size=8 << 20,
                         bloom_filter_bits=10, compression=None)

    def compact(self, db):
        db.compact_range()


def timed(fn):
    start = time.perf_counter()
    count = fn()
    return count / (time.perf_counter() - start)


def run_round(engine, keys, present, absent, value, workdir):
    results = {}
    path = os.path.join(workdir, engine.name)
    db = engine.open(path)

    def put():
        p = db.put
        for k in keys:
            p(k, value)
        return len(keys)

    results["put"] = timed(put)
    engine.compact(db)

    def get():
        g = db.get
        for k in present:
            g(k)
        return len(present)

    def get_absent():
        g = db.get
        for k in absent:
            g(k)
        return len(absent)

    def iterate():
        n = 0
        for _ in db.iterator():
            n += 1
        return n

    results["get"] = timed(get)
    results["get absent"] = timed(get_absent)
    results["iterate"] = timed(iterate)
    db.close()
    shutil.rmtree(path)

    db = engine.open(path)

    def batch():
        for i in range(0, len(keys), BATCH):
            with db.write_batch() as wb:
                p = wb.put
                for k in keys[i:i + BATCH]:
                    p(k, value)
        return len(keys)

    results["batch write"] = timed(batch)
    db.close()
    shutil.rmtree(path)
    return results


def filter_round(keys, probes):
    f = bloomkv.Filter.build(keys, type="blocked", bits_per_key=10)

    def loop():
        m = f.may_contain
        for k in probes:
            m(k)
        return len(probes)

    def many():
        f.may_contain_many(probes)
        return len(probes)

    return timed(loop), timed(many)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the databases go (default: a temporary directory)")
    args = parser.parse_args()
    if args.num < 1000 or args.rounds < 1:
        parser.error("--num must be >= 1000 and --rounds >= 1")

    rng = random.Random(301)
    ids = list(range(args.num))
    rng.shuffle(ids)
    keys = [b"%016d" % (2 * i) for i in ids]
    present = rng.sample(keys, args.num // 4)
    absent = [b"%016d" % (2 * rng.randrange(args.num) + 1) for _ in range(args.num // 4)]
    value = bytes(rng.randrange(256) for _ in range(VALUE_BYTES))

    engines = [Bloomkv()] + ([Plyvel()] if plyvel else [])
    workdir = tempfile.mkdtemp(prefix="bkv-pybench-", dir=args.dir)
    figures = {e.name: {} for e in engines}
    try:
        for r in range(args.rounds):
            order = engines if r % 2 == 0 else engines[::-1]
            for engine in order:
                for workload, ops in run_round(engine, keys, present, absent, value, workdir).items():
                    figures[engine.name].setdefault(workload, []).append(ops)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print("bloomkv %s (Python extension) vs %s, %d keys, median of %d rounds (ops/s)"
          % (bloomkv.__version__, "plyvel %s" % plyvel.__version__ if plyvel else "no plyvel (python3-plyvel)",
             args.num, args.rounds))
    print("%-12s %12s %12s %8s" % ("workload", "bloomkv", "plyvel", "ratio"))
    for workload in figures["bloomkv"]:
        ours = statistics.median(figures["bloomkv"][workload])
        if plyvel:
            theirs = statistics.median(figures["plyvel"][workload])
            print("%-12s %12.0f %12.0f %7.2fx" % (workload, ours, theirs, ours / theirs))
        else:
            print("%-12s %12.0f" % (workload, ours))

    loop, many = filter_round(keys, present + absent)
    print("\nFilter (blocked Bloom, %d keys): may_contain loop %.0f probes/s, may_contain_many %.0f probes/s: %.2fx"
          % (len(keys), loop, many, many / loop))
    return 0


if __name__ == "__main__":
    sys.exit(main())
