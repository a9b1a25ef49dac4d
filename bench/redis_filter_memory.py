#!/usr/bin/python3
"""What one empty BF and CF cost, as BF.INFO / CF.INFO `Size` (the module's
MEMORY USAGE of the value) reports it, against what RedisBloom's reports for
the same command: its BFMemUsage and CFMemUsage add the stack struct (32 and
40 bytes), each sub-filter's struct (64 and 16) and the bits or slots, and
the bits and slots are sized by the same formulas (RedisBloom's own flow
tests check those totals, e.g. 296 bytes for BF.RESERVE 0.001 100 and 1080
for CF.RESERVE 1000).

    bench/redis_filter_memory.py build/bloomkv_redis.so

One redis-server on a free localhost port, stopped by its PID."""
import math
import sys

import redis_local

MODULE = sys.argv[1]


def redisbloom_bf(capacity, rate):
    bpe = -(math.log(rate / 2) / 0.480453013918201)  # a scaling filter's first sub-filter
    return 32 + 64 + (max(int(capacity * bpe), 1) + 63) // 64 * 8


def redisbloom_cf(capacity, bucket_size=2):
    buckets = 1
    while buckets < capacity // bucket_size:
        buckets *= 2
    return 40 + 16 + buckets * bucket_size


def main():
    with redis_local.server(MODULE) as r:
        print("type capacity bloomkv_bytes redisbloom_bytes ratio")
        for capacity in [1, 4, 10, 100, 1000, 10 ** 4, 10 ** 5, 10 ** 6, 10 ** 7, 10 ** 8]:
            r.execute_command("BF.RESERVE", "bf", 0.01, capacity)
            ours, theirs = r.execute_command("BF.INFO", "bf", "SIZE")[0], redisbloom_bf(capacity, 0.01)
            print("BF %d %d %d %.3f" % (capacity, ours, theirs, ours / theirs))
            r.delete("bf")
            if capacity >= 4:
                r.execute_command("CF.RESERVE", "cf", capacity)
                info = dict(zip(*[iter(r.execute_command("CF.INFO", "cf"))] * 2))
                ours, theirs = info[b"Size"], redisbloom_cf(capacity)
                print("CF %d %d %d %.3f" % (capacity, ours, theirs, ours / theirs))
                r.delete("cf")


if __name__ == "__main__":
    main()
