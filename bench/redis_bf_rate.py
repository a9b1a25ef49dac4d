#!/usr/bin/python3
"""The false-positive rate BF.* delivers, for each probe placement the
module knows: bloomkv's own (a filter made by BF.RESERVE) and RedisBloom's
(a filter loaded from a RedisBloom header, which keeps RedisBloom's
placement, then filled by BF.MADD). Same sizes, same items, same hashes;
only where the probes land differs.

    bench/redis_bf_rate.py build/bloomkv_redis.so [filters] [probes]

For each case: `filters` filters (default 10) with their own items, each
asked about `probes` absent items (default 100000); prints the mean rate
as a multiple of the requested one, and the lowest and highest filter's.
One redis-server on a free localhost port, stopped by its PID."""
import math
import struct
import sys

import redis_local

MODULE = sys.argv[1]
FILTERS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
PROBES = int(sys.argv[3]) if len(sys.argv) > 3 else 100000
# (requested rate, first capacity, items added, scaling)
CASES = [(0.01, 100, 100, False), (0.001, 100, 100, False), (0.001, 1000, 1000, False), (0.01, 100000, 100000, False),
         (0.01, 100, 20000, True), (0.001, 100, 20000, True), (0.0001, 1000, 100000, True)]


def redisbloom_header(rate, capacity, scaling):
    """An empty filter in RedisBloom's own dump form (its placement)."""
    first = rate / 2 if scaling else rate
    bpe = -(math.log(first) / 0.480453013918201)
    nbytes = (max(int(capacity * bpe), 1) + 63) // 64 * 8
    hashes = math.ceil(0.693147180559945 * bpe)
    options = 1 | 4 | (0 if scaling else 8)
    return (struct.pack("<QIII", 0, 1, options, 2) +
            struct.pack("<QQQddIQB", nbytes, nbytes * 8, 0, first, bpe, hashes, capacity, 0))


def main():
    with redis_local.server(MODULE) as r:
        print("rate capacity items scaling placement: mean (min-max) x requested, over %d filters x %d probes"
              % (FILTERS, PROBES))
        for rate, capacity, items, scaling in CASES:
            for placement in ("bloomkv", "redisbloom"):
                ratios = []
                for f in range(FILTERS):
                    key = "f"
                    r.delete(key)
                    if placement == "bloomkv":
                        r.execute_command("BF.RESERVE", key, rate, capacity, *([] if scaling else ["NONSCALING"]))
                    else:
                        r.execute_command("BF.LOADCHUNK", key, 1, redisbloom_header(rate, capacity, scaling))
                    for i in range(0, items, 5000):
                        r.execute_command("BF.MADD", key, *["%d:in%d" % (f, j) for j in range(i, min(items, i + 5000))])
                    hits = 0
                    for i in range(0, PROBES, 10000):
                        hits += sum(r.execute_command("BF.MEXISTS", key,
                                                      *["%d:out%d" % (f, j) for j in range(i, min(PROBES, i + 10000))]))
                    ratios.append(hits / PROBES / rate)
                print("%g %d %d %s %s: %.3f (%.3f-%.3f)" % (rate, capacity, items, "scaling" if scaling else "nonscaling",
                                                             placement, sum(ratios) / len(ratios), min(ratios),
                                                             max(ratios)))
                sys.stdout.flush()


if __name__ == "__main__":
    main()
