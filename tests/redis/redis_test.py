#!/usr/bin/python3
"""bloomkv_redis.so under a real redis-server: one node, then a 6-node
Redis Cluster (3 masters, 3 replicas). Run by ctest:

    /usr/bin/python3 tests/redis/redis_test.py build/bloomkv_redis.so [single|cluster]

Every server listens on 127.0.0.1 only, on ports probed free, and is
stopped by its own pid at the end (or when the test fails). Seeds are fixed.
"""
import math
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import redis

from redis_forms import BUILD_TYPES, cut_payload, keyslot

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.abspath(sys.argv[1])
TOOL = next((a for a in sys.argv[2:] if os.path.sep in a), None)  # the bloomkv tool, when built
PARTS = [a for a in sys.argv[2:] if a in ("single", "cluster")] or ["single", "cluster"]
ROOT = tempfile.mkdtemp(prefix="bkv-redis-")
SERVERS = []
CHECKS = 0


def check(cond, what):
    global CHECKS
    CHECKS += 1
    if not cond:
        raise AssertionError(what)


def free_port():
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port + 10000 < 65536:  # the cluster bus port must be free too
            b = socket.socket()
            try:
                b.bind(("127.0.0.1", port + 10000))
                return port
            except OSError:
                pass
            finally:
                b.close()


class Server:
    def __init__(self, name, cluster=False, save=False, extra=(), module_args=(), bkv_dir=None):
        """extra: more server options, e.g. ["--appendonly", "yes"];
        module_args: more module options, e.g. ["sync", "yes"];
        bkv_dir: the module's directory (default: bkv in the server's)."""
        self.module_args = list(module_args)
        self.bkv_dir = bkv_dir
        self.dir = os.path.join(ROOT, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.cluster = cluster
        self.save = save
        self.extra = list(extra)
        self.proc = None
        self.start()

    def start(self):
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                "--save", "3600 1" if self.save else "", "--logfile", "server.log",
                "--enable-debug-command", "local",
                "--loadmodule", MODULE, "dir", self.bkv_dir or os.path.join(self.dir, "bkv")] + self.module_args
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-node-timeout", "1500", "--cluster-replica-validity-factor", "0"]
        args += self.extra if "--appendonly" in self.extra else self.extra + ["--appendonly", "no"]
        env = dict(os.environ)
        if os.environ.get("BKV_REDIS_PRELOAD"):  # a sanitized module in an uninstrumented server
            env["LD_PRELOAD"] = os.environ["BKV_REDIS_PRELOAD"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "stderr"), "a"),
                                     env=env)
        if self not in SERVERS:
            SERVERS.append(self)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                if self.client().ping():
                    return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
            except redis.exceptions.BusyLoadingError:
                time.sleep(0.05)
        raise RuntimeError("redis-server on port %d did not start; see %s/server.log" % (self.port, self.dir))

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=20)

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.proc = None

    def restart(self, sig=signal.SIGTERM):
        self.kill(sig)
        self.start()


def stop_all():
    for s in SERVERS:
        try:
            s.kill(signal.SIGKILL)
        except Exception:
            pass


def expect_error(fn, fragment, what):
    try:
        fn()
    except redis.exceptions.ResponseError as e:
        check(fragment.lower() in str(e).lower(), "%s: error %r lacks %r" % (what, str(e), fragment))
        return
    check(False, what + ": no error")


# ------------------------------------------------- filters moved in pieces

def dump_chunks(r, cmd, key):
    chunks, it = [], 0
    while True:
        it, data = r.execute_command(cmd, key, it)
        if not it:
            return chunks
        chunks.append((it, data))


MURMUR_M = 0xC6A4A7935BD1E995
MASK64 = (1 << 64) - 1


def murmur64a(data, seed):
    """MurmurHash64A, written from its published description: the hash
    RedisBloom gives an item."""
    h = (seed ^ (len(data) * MURMUR_M)) & MASK64
    whole = len(data) // 8 * 8
    for i in range(0, whole, 8):
        k = int.from_bytes(data[i:i + 8], "little")
        k = (k * MURMUR_M) & MASK64
        k ^= k >> 47
        k = (k * MURMUR_M) & MASK64
        h = ((h ^ k) * MURMUR_M) & MASK64
    if len(data) & 7:
        h ^= int.from_bytes(data[whole:], "little")
        h = (h * MURMUR_M) & MASK64
    h ^= h >> 47
    h = (h * MURMUR_M) & MASK64
    return h ^ (h >> 47)


def redisbloom_bf_size(capacity, error):
    """RedisBloom's sizing: (bytes, probes) of a sub-filter."""
    bpe = -(math.log(error) / 0.480453013918201)
    bits = max(int(capacity * bpe), 1)
    return (bits + 63) // 64 * 8, math.ceil(0.693147180559945 * bpe)


def redisbloom_bf_header(capacity, error, items):
    """RedisBloom's SCANDUMP header of a non-scaling filter of capacity
    that holds items (a count)."""
    nbytes, hashes = redisbloom_bf_size(capacity, error)
    bpe = -(math.log(error) / 0.480453013918201)
    header = struct.pack("<QIII", items, 1, 1 | 4 | 8, 2)  # NOROUND | FORCE64 | NO_SCALING
    return header + struct.pack("<QQQddIQB", nbytes, nbytes * 8, items, error, bpe, hashes, capacity, 0)


def redisbloom_bf_dump(capacity, error, items):
    """The SCANDUMP chunks RedisBloom gives for a non-scaling filter of
    capacity that holds items: its header, then the bits, set as RedisBloom
    sets them. Made here, independently of the module."""
    nbytes, hashes = redisbloom_bf_size(capacity, error)
    bits = bytearray(nbytes)
    for item in items:
        a = murmur64a(item, MURMUR_M)
        b = murmur64a(item, a)
        for i in range(hashes):
            x = ((a + i * b) & MASK64) % (nbytes * 8)
            bits[x >> 3] |= 1 << (x & 7)
    return [(1, redisbloom_bf_header(capacity, error, len(items))), (1 + nbytes, bytes(bits))]


def filter_chunks_and_limits():
    """RedisBloom's SCANDUMP/LOADCHUNK, DEBUG, error-rate tightening and
    capacity rules, as its clients rely on them."""
    s = Server("filters")
    r = s.client()
    # A scaling filter stays at or under the requested rate as it grows:
    # the mean over ten filters, each 200 times its first capacity (one
    # filter's own rate varies by some 20% with the items it happens to get).
    fp = 0
    for f in range(10):
        key = "rate%d" % f
        r.execute_command("BF.RESERVE", key, 0.001, 100)
        for i in range(0, 20000, 1000):
            r.execute_command("BF.MADD", key, *["%d:in%d" % (f, j) for j in range(i, i + 1000)])
        for i in range(0, 100000, 5000):
            fp += sum(r.execute_command("BF.MEXISTS", key, *["%d:out%d" % (f, j) for j in range(i, i + 5000)]))
    check(fp / 1000000 <= 0.001, "grown BFs keep the requested rate: %.5f" % (fp / 1000000))
    # Sized as RedisBloom sizes them: the same bytes and probes per
    # sub-filter, each at half the rate of the one before.
    r.execute_command("BF.RESERVE", "sized", 0.01, 1000, "EXPANSION", 3)
    r.execute_command("BF.MADD", "sized", *["z%d" % i for i in range(2500)])
    lines = [x.decode() for x in r.execute_command("BF.DEBUG", "sized")[1:]]
    capacity, rate = 1000, 0.005
    for line in lines:
        nbytes, hashes = redisbloom_bf_size(capacity, rate)
        check(line.startswith("bytes:%d bits:%d hashes:%d hashwidth:64 capacity:%d " % (nbytes, nbytes * 8, hashes, capacity)),
              "BF.DEBUG line %r, RedisBloom's sizing gives %d bytes and %d probes" % (line, nbytes, hashes))
        capacity, rate = capacity * 3, rate / 2
    check(len(lines) == 2, "2500 items at capacity 1000, expansion 3: two sub-filters (%d)" % len(lines))
    # Small filters cost little: their bits and two small structs.
    r.execute_command("BF.RESERVE", "small", 0.01, 100)
    size = r.execute_command("BF.INFO", "small", "SIZE")[0]
    check(size == 96 + redisbloom_bf_size(100, 0.005)[0], "BF.INFO Size of a 100-item filter is %d bytes" % size)

    # A filter RedisBloom dumped loads and answers as it did there.
    made = [b"rb%d" % i for i in range(300)]
    for it, data in redisbloom_bf_dump(1000, 0.001, made):
        check(r.execute_command("BF.LOADCHUNK", "moved", it, data) == b"OK", "BF.LOADCHUNK of RedisBloom's chunk %d" % it)
    check(all(r.execute_command("BF.MEXISTS", "moved", *made)), "every item of RedisBloom's filter is found")
    absent = sum(r.execute_command("BF.MEXISTS", "moved", *[b"no%d" % i for i in range(20000)]))
    check(absent < 20000 * 0.001 * 3, "RedisBloom's filter answers absent items as it did there (%d of 20000)" % absent)
    check(r.execute_command("BF.ADD", "moved", "new") == 1 and r.execute_command("BF.EXISTS", "moved", "new") == 1,
          "a moved filter takes new items")
    check(dump_chunks(r, "BF.SCANDUMP", "moved")[0][1][12:16] == struct.pack("<I", 1 | 4 | 8),
          "it dumps with RedisBloom's option bits, so RedisBloom can load it back")
    foreign = redisbloom_bf_dump(1000, 0.001, made)[0][1]
    for at, what in ((12, "32-bit hashes"), (20, "a size not RedisBloom's for its capacity")):
        bad = bytearray(foreign)
        bad[at] ^= 4 if at == 12 else 8
        expect_error(lambda: r.execute_command("BF.LOADCHUNK", "refused", 1, bytes(bad)), "received bad data",
                     "a RedisBloom header with " + what)
    # Made by this module before it took RedisBloom's layout: loads and grows.
    old = bytes.fromhex(open(os.path.join(HERE, "data", "bf-blocked-bloom.dump.hex")).read().strip())
    r.restore("old", 0, old)
    check(all(r.execute_command("BF.MEXISTS", "old", *["o%d" % i for i in range(200)])),
          "a blocked-Bloom BF from an RDB keeps every item")
    r.execute_command("BF.MADD", "old", *["p%d" % i for i in range(1000)])
    check(all(r.execute_command("BF.MEXISTS", "old", *["p%d" % i for i in range(1000)])) and
          r.execute_command("BF.INFO", "old", "FILTERS")[0] > 3, "and grows")
    s.client().execute_command("DEBUG", "RELOAD")
    check(all(r.execute_command("BF.MEXISTS", "old", *["p%d" % i for i in range(1000)])), "and survives a reload")

    # Dumped and loaded: every item back, under another key, through
    # several sub-filters and (the big one) several chunks.
    r.execute_command("BF.RESERVE", "grown", 0.01, 50, "EXPANSION", 2)
    r.execute_command("BF.MADD", "grown", *["g%d" % i for i in range(2000)])
    r.execute_command("BF.RESERVE", "big", 0.01, 20000000)
    r.execute_command("BF.MADD", "big", *["b%d" % i for i in range(1000)])
    for key, prefix, n in (("grown", "g", 2000), ("big", "b", 1000)):
        chunks = dump_chunks(r, "BF.SCANDUMP", key)
        check(len(chunks) >= (3 if key == "big" else 2), "%s: header and payload chunks (%d)" % (key, len(chunks)))
        for it, data in chunks:
            check(r.execute_command("BF.LOADCHUNK", key + "2", it, data) == b"OK", "BF.LOADCHUNK %s %d" % (key, it))
        check(all(r.execute_command("BF.MEXISTS", key + "2", *["%s%d" % (prefix, i) for i in range(n)])),
              "%s: every item in the loaded copy" % key)
        check(r.execute_command("BF.DEBUG", key) == r.execute_command("BF.DEBUG", key + "2"),
              "%s: the copy's sub-filters are the original's" % key)
    debug = r.execute_command("BF.DEBUG", "grown")
    check(debug[0] == b"size:%d" % r.execute_command("BF.CARD", "grown") and
          len(debug) == 1 + r.execute_command("BF.INFO", "grown", "FILTERS")[0],
          "BF.DEBUG: the item count, then a line per sub-filter: %r" % debug[:2])
    chunks = dump_chunks(r, "BF.SCANDUMP", "grown")
    header = bytearray(chunks[0][1])
    header[20] ^= 1
    expect_error(lambda: r.execute_command("BF.LOADCHUNK", "bad", 1, bytes(header)), "received bad data",
                 "a damaged dump header")
    check(r.exists("bad") == 0, "a refused header makes no key")
    expect_error(lambda: r.execute_command("BF.LOADCHUNK", "grown", 1, chunks[0][1]), "already holds",
                 "a header into a key that holds a filter")
    total = sum(len(d) for _, d in chunks[1:])
    expect_error(lambda: r.execute_command("BF.LOADCHUNK", "grown2", total + 2 + 5, b"x" * 5), "invalid offset",
                 "a chunk past the filter's end")
    expect_error(lambda: r.execute_command("BF.LOADCHUNK", "grown2", chunks[1][0] + 1, chunks[1][1]), "too big",
                 "a chunk running past its sub-filter")
    # RedisBloom's chunks may start anywhere: a piece of one is loaded where its iterator says.
    check(r.execute_command("BF.LOADCHUNK", "grown2", chunks[1][0] - 3, chunks[1][1][:-3]) == b"OK",
          "a shorter chunk at its own place")
    expect_error(lambda: r.execute_command("BF.SCANDUMP", "grown", "x"), "iterator", "a SCANDUMP iterator not a number")
    s.client().execute_command("DEBUG", "RELOAD")
    check(all(r.execute_command("BF.MEXISTS", "big2", *["b%d" % i for i in range(1000)])),
          "a loaded filter survives DEBUG RELOAD")

    # Cuckoo: RedisBloom's layout. BUCKETSIZE is honoured; the buckets are
    # capacity / bucket size rounded up to a power of two, one byte a slot.
    r.execute_command("CF.RESERVE", "shaped", 1000, "BUCKETSIZE", 4, "EXPANSION", 3)
    info = dict(zip(*[iter(r.execute_command("CF.INFO", "shaped"))] * 2))
    check(info[b"Number of buckets"] == 256 and info[b"Bucket size"] == 4 and info[b"Expansion rate"] == 4 and
          info[b"Size"] == 56 + 1024, "CF.INFO of capacity 1000 in 4-slot buckets: %r" % info)
    # A filter RedisBloom dumped loads and answers as there: its header, and
    # slots holding fingerprints where RedisBloom's hashing puts them.
    slots = bytearray(64 * 2)
    placed = []
    for i in range(60):
        h = murmur64a(b"m%d" % i, 0)
        fp = h % 255 + 1
        for b in (h % 64, (h ^ (fp * 0x5BD1E995)) % 64):
            free = [j for j in range(2) if slots[b * 2 + j] == 0]
            if free:
                slots[b * 2 + free[0]] = fp
                placed.append(b"m%d" % i)
                break
    header = struct.pack("<QQQQHHH", len(placed), 64, 0, 1, 2, 20, 1)
    check(r.execute_command("CF.LOADCHUNK", "movedcf", 1, header) == b"OK" and
          r.execute_command("CF.LOADCHUNK", "movedcf", 1 + len(slots), bytes(slots)) == b"OK",
          "RedisBloom's CF header and slots load")
    check(all(r.execute_command("CF.MEXISTS", "movedcf", *placed)) and
          r.execute_command("CF.COUNT", "movedcf", placed[0]) >= 1, "every item of RedisBloom's CF is found")
    check(r.execute_command("CF.DEL", "movedcf", placed[0]) == 1, "and can be deleted")
    for bad, what in ((struct.pack("<QQQQHHH", 0, 63, 0, 1, 2, 20, 1), "buckets not a power of two"),
                      (struct.pack("<QQQQHHH", 0, 64, 0, 2, 2, 20, 0), "two sub-filters that cannot grow"),
                      (struct.pack("<QQQQHHH", 0, 1 << 40, 0, 1, 2, 20, 1), "a table past any bound"),
                      (header[:-1], "a short header")):
        expect_error(lambda: r.execute_command("CF.LOADCHUNK", "refusedcf", 1, bad), "Couldn't create filter",
                     "a RedisBloom CF header with " + what)
    # Dumped and loaded here: deletes counted; empty filters dump nothing.
    r.execute_command("CF.RESERVE", "cf", 100, "EXPANSION", 2)
    check(r.execute_command("CF.SCANDUMP", "cf", 0) == [0, None], "an empty CF dumps nothing")
    r.execute_command("CF.INSERT", "cf", "ITEMS", *["c%d" % i for i in range(500)])
    r.execute_command("CF.DEL", "cf", "c0")
    chunks = dump_chunks(r, "CF.SCANDUMP", "cf")
    check(len(chunks) > 2 and len(chunks[0][1]) == 38, "a CF dumps RedisBloom's header, then a chunk per sub-filter")
    for it, data in chunks:
        r.execute_command("CF.LOADCHUNK", "cf2", it, data)
    check(r.execute_command("CF.DEBUG", "cf") == r.execute_command("CF.DEBUG", "cf2"), "CF.DEBUG of the loaded copy")
    check(all(r.execute_command("CF.MEXISTS", "cf2", *["c%d" % i for i in range(1, 500)])), "CF copy keeps its items")
    expect_error(lambda: r.execute_command("CF.LOADCHUNK", "cf2", chunks[1][0] + 1, chunks[1][1]), "Couldn't load chunk",
                 "a CF chunk running past its sub-filter")
    for src, dst, cmd in (("cf", "cfcopy", "CF.DEBUG"), ("grown", "growncopy", "BF.DEBUG")):
        check(r.execute_command("COPY", src, dst) == 1 and
              r.execute_command(cmd, src) == r.execute_command(cmd, dst) and
              r.execute_command("DEBUG", "DIGEST-VALUE", src) == r.execute_command("DEBUG", "DIGEST-VALUE", dst),
              "COPY of %s: the same filter under another key" % src)
    expect_error(lambda: r.execute_command("CF.LOADCHUNK", "cf3", 1, b"junk" * 30), "Couldn't create filter",
                 "a damaged CF header")
    # Made by this module before it took RedisBloom's layout: loads, answers, changes.
    old = bytes.fromhex(open(os.path.join(HERE, "data", "cf-cuckoo12.dump.hex")).read().strip())
    r.restore("oldcf", 0, old)
    check(all(r.execute_command("CF.MEXISTS", "oldcf", *["q%d" % i for i in range(1, 300)])) and
          r.execute_command("CF.DEL", "oldcf", "q1") == 1 and r.execute_command("CF.ADD", "oldcf", "new") == 1,
          "a CF of 12-bit fingerprints from an RDB keeps its items and takes changes")
    # Full: a filter that cannot grow answers "Filter is full" (-1 each from
    # CF.INSERT); one that grows stops at cf-max-expansions sub-filters.
    r.execute_command("CF.RESERVE", "fixed", 4, "EXPANSION", 0)
    added = [r.execute_command("CF.INSERT", "fixed", "ITEMS", str(i))[0] for i in range(8)]
    check(added.count(1) <= 4 and added[-1] == -1 and added == sorted(added, reverse=True),
          "a 4-slot CF takes at most 4, then -1: %r" % added)
    expect_error(lambda: r.execute_command("CF.ADD", "fixed", "7"), "Filter is full", "CF.ADD past capacity")
    r.execute_command("CF.RESERVE", "steps", 4)
    for i in range(1000):
        try:
            r.execute_command("CF.ADD", "steps", "s%d" % i)
        except redis.ResponseError as e:
            check("Maximum expansions reached" in str(e), "a CF past its expansions: %s" % e)
            break
    check(r.execute_command("CF.INFO", "steps")[5] == 32, "a CF grows to 32 sub-filters")

    # Damaged dumps and blobs, byte by byte (seeded): each is refused or
    # loads as a filter every command then works on; the server stays up.
    rnd = random.Random(47)
    bf_header = dump_chunks(r, "BF.SCANDUMP", "grown")[0][1]
    cf_header = dump_chunks(r, "CF.SCANDUMP", "cf")[0][1]
    r.execute_command("BF.RESERVE", "blobbed", 0.01, 30)
    r.execute_command("BF.MADD", "blobbed", *["x%d" % i for i in range(100)])
    r.execute_command("CF.RESERVE", "cblobbed", 64, "EXPANSION", 2)
    r.execute_command("CF.INSERT", "cblobbed", "ITEMS", *["y%d" % i for i in range(200)])
    loaded = 0
    for i in range(600):
        kind = i % 3
        if kind == 2:
            key = rnd.choice(["blobbed", "cblobbed"])
            data = bytearray(r.dump(key))
        else:
            data = bytearray(bf_header if kind == 0 else cf_header)
        for _ in range(rnd.randint(1, 3)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        target = "mut%d" % i
        try:
            if kind == 2:
                r.restore(target, 0, bytes(data))
            else:
                r.execute_command("BF.LOADCHUNK" if kind == 0 else "CF.LOADCHUNK", target, 1, bytes(data))
        except redis.ResponseError:
            continue
        loaded += 1
        for cmd in (("BF.ADD", "CF.ADD"), ("BF.EXISTS", "CF.EXISTS"), ("BF.INFO", "CF.INFO"), ("BF.DEBUG", "CF.DEBUG"),
                    ("BF.SCANDUMP", "CF.SCANDUMP"), ("BF.CARD", "CF.DEL"), ("BF.MADD", "CF.COUNT")):
            typ = r.type(target)
            name = cmd[0] if typ == b"MBbloom--" or typ.startswith(b"bkv-bloom") else cmd[1]
            args = [target, "probe"] if not name.endswith(("INFO", "DEBUG", "CARD", "SCANDUMP")) else [target]
            if name.endswith("SCANDUMP"):
                args.append(0)
            try:
                r.execute_command(name, *args)
            except redis.ResponseError:
                pass
        r.delete(target)
    check(r.ping() and loaded > 0, "damaged dumps and blobs: refused or usable (%d loaded), the server up" % loaded)

    # RESP3: booleans and maps where RedisBloom gives them; RESP2 unchanged.
    check(r.execute_command("BF.EXISTS", "small", "nothing") == 0, "RESP2: BF.EXISTS answers an integer")
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"HELLO 3\r\n")
    hello = b""
    while b"modules" not in hello:
        hello += sock.recv(65536)
    replies = b""
    sock.sendall(b"BF.ADD r3 a\r\nBF.EXISTS r3 a\r\nCF.ADD r3c a\r\nCF.DEL r3c a\r\n"
                 b"CF.INSERT r3c ITEMS b c\r\nCF.INSERTNX r3c ITEMS b d\r\nBF.INFO r3\r\n")
    deadline = time.time() + 5
    while replies.count(b"Expansion rate") == 0 and time.time() < deadline:
        replies += sock.recv(65536)
    sock.close()
    check(replies.startswith(b"#t\r\n#t\r\n#t\r\n#t\r\n*2\r\n#t\r\n#t\r\n*2\r\n:0\r\n:1\r\n%5\r\n"),
          "RESP3: booleans (CF.INSERTNX: integers, as RedisBloom's), then BF.INFO a map: %r" % replies[:60])
    s.kill()

    # RedisBloom's settings: its module arguments, and CONFIG at run time.
    s = Server("filter-settings", module_args=["ERROR_RATE", "0.02", "INITIAL_SIZE", "200", "CF_MAX_EXPANSIONS", "3",
                                               "cf-initial-size", "8"])
    r = s.client()
    conf = r.config_get("bloomkv.*")
    check(conf.get("bloomkv.bf-error-rate") == "0.02" and conf.get("bloomkv.bf-initial-size") == "200" and
          conf.get("bloomkv.cf-max-expansions") == "3", "module arguments set the filter defaults: %r" % conf)
    r.execute_command("BF.ADD", "d", "x")
    check(r.execute_command("BF.INFO", "d", "CAPACITY") == [200], "BF.ADD's filter takes bf-initial-size")
    refused = None
    for i in range(100):
        try:
            r.execute_command("CF.ADD", "c", str(i))
        except redis.ResponseError as e:
            refused = str(e)
            break
    check(refused and "Maximum expansions reached" in refused and r.execute_command("CF.INFO", "c")[5] == 3,
          "cf-max-expansions bounds the sub-filters: %r" % refused)
    r.config_set("bloomkv.bf-initial-size", 300)
    r.execute_command("BF.ADD", "e", "x")
    check(r.execute_command("BF.INFO", "e", "CAPACITY") == [300], "CONFIG SET changes the next filter's size")
    expect_error(lambda: r.config_set("bloomkv.bf-error-rate", "1.5"), "range", "an error rate out of range")
    expect_error(lambda: r.config_set("bloomkv.cf-bucket-size", 256), "between", "a bucket size out of range")
    s.kill()
    s.module_args = ["ERROR_RATE", "2"]
    fails_to_start(s, "ERROR_RATE must be in the range", "a filter setting out of range at load")


# ---------------------------------------------------------------- single node

def single_node():
    rnd = random.Random(7)
    s = Server("single", save=True)
    r = s.client()
    model = {}
    for i in range(3000):
        k, v = "key%05d" % rnd.randrange(2000), "v%d" % rnd.randrange(50)
        if rnd.random() < 0.15:
            check(r.execute_command("BKV.DEL", k) == (1 if k in model else 0), "BKV.DEL reply")
            model.pop(k, None)
        else:
            check(r.execute_command("BKV.SET", k, v) == b"OK", "BKV.SET reply")
            model[k] = v
    for k in ["key%05d" % i for i in range(2000)]:
        got = r.execute_command("BKV.GET", k)
        check(got == (model[k].encode() if k in model else None), "BKV.GET %s" % k)
        check(r.execute_command("BKV.EXISTS", k) == (1 if k in model else 0), "BKV.EXISTS %s" % k)
    check(r.execute_command("BKV.MSET", "m1", "a", "m2", "b") == b"OK", "BKV.MSET")
    model.update({"m1": "a", "m2": "b"})
    check(r.execute_command("BKV.MGET", "m1", "nope", "m2") == [b"a", None, b"b"], "BKV.MGET")
    # SCAN walks every row once.
    seen, cursor = set(), b"0"
    while True:
        cursor, keys = r.execute_command("BKV.SCAN", cursor, "COUNT", 97)
        for k in keys:
            check(k not in seen, "BKV.SCAN repeats %r" % k)
            seen.add(k)
        if cursor in (b"0", 0, "0"):
            break
    check(seen == {k.encode() for k in model}, "BKV.SCAN saw %d of %d rows" % (len(seen), len(model)))
    _, keys = r.execute_command("BKV.SCAN", 0, "MATCH", "m", "COUNT", 10000)
    check(set(keys) == {b"m1", b"m2"}, "BKV.SCAN MATCH prefix")
    # FINDVALUE against the model.
    for v in ["v3", "v17", "absent"]:
        flat = r.execute_command("BKV.FINDVALUE", v)
        got = {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}
        want = {k.encode(): v.encode() for k, mv in model.items() if mv == v}
        check(got == want, "BKV.FINDVALUE %s: %d results, wanted %d" % (v, len(got), len(want)))
    check(len(r.execute_command("BKV.FINDVALUE", "v3", "LIMIT", 2)) == 4, "BKV.FINDVALUE LIMIT")
    # Pages: LIMIT and AFTER the last key walk the whole result, in order.
    whole = r.execute_command("BKV.FINDVALUE", "v3")
    pages, after = [], None
    while True:
        page = r.execute_command("BKV.FINDVALUE", "v3", "LIMIT", 3, *(["AFTER", after] if after else []))
        if not page:
            break
        pages += page
        after = page[-2]
    check(pages == whole and len(whole) > 6, "FINDVALUE pages: %d of %d" % (len(pages), len(whole)))
    # Where a client cannot block (MULTI, a script) the search runs inline,
    # with the same answer as on a worker.
    p = r.pipeline(transaction=True)
    p.execute_command("BKV.FINDVALUE", "v17")
    p.execute_command("BKV.COMPACT")
    in_multi = p.execute()
    check(sorted(in_multi[0]) == sorted(r.execute_command("BKV.FINDVALUE", "v17")) and in_multi[1] == b"OK",
          "FINDVALUE and COMPACT in MULTI")
    check(sorted(r.eval("return redis.call('BKV.FINDVALUE', ARGV[1])", 0, "v17")) ==
          sorted(r.execute_command("BKV.FINDVALUE", "v17")), "FINDVALUE in a script")
    # Every command describes itself: COMMAND DOCS has a summary, and the
    # arguments of every command that takes any.
    names = ["bkv.set", "bkv.get", "bkv.exists", "bkv.del", "bkv.mset", "bkv.mget", "bkv.scan", "bkv.findvalue",
             "bkv.info", "bkv.compact", "bf.reserve", "bf.add", "bf.madd", "bf.insert", "bf.exists", "bf.mexists",
             "bf.info", "bf.card", "cf.reserve", "cf.add", "cf.addnx", "cf.insert", "cf.insertnx", "cf.exists",
             "cf.mexists", "cf.del", "cf.count", "cf.info", "cf.compact", "bkv.filter.build", "bkv.filter.exists",
             "bkv.filter.mexists", "bkv.filter.loadblob"]
    for name in names:
        # redis-py parses every COMMAND reply as COMMAND's own: asked raw.
        doc = subprocess.run(["redis-cli", "-p", str(s.port), "COMMAND", "DOCS", name], capture_output=True,
                             text=True).stdout
        check("summary" in doc and (name in ("bkv.info", "bkv.compact") or "arguments" in doc),
              "COMMAND DOCS %s: %s" % (name, doc[:200]))
    keys = subprocess.run(["redis-cli", "-p", str(s.port), "COMMAND", "GETKEYS", "BKV.MSET", "a", "1", "b", "2"],
                          capture_output=True, text=True).stdout.split()
    check(keys == ["a", "b"], "key specs: BKV.MSET's keys are %r" % keys)
    info = r.command().get("bkv.compact", {})
    check("write" in str(info.get("flags")), "BKV.COMPACT is a write command: %r" % (info,))
    check(b"level" in r.execute_command("BKV.INFO") or "level" in str(r.execute_command("BKV.INFO")), "BKV.INFO")
    check(r.execute_command("BKV.COMPACT") == b"OK", "BKV.COMPACT")

    # Bad input: standard errors, the server stays up.
    expect_error(lambda: r.execute_command("BKV.SET", "k"), "wrong number of arguments", "arity")
    expect_error(lambda: r.execute_command("BKV.SCAN", "zz"), "invalid cursor", "bad cursor")
    expect_error(lambda: r.execute_command("BKV.SCAN", 0, "COUNT", "x"), "integer", "COUNT not a number")
    expect_error(lambda: r.execute_command("BKV.FINDVALUE", "v", "LIMIT", "-1"), "integer", "negative LIMIT")
    expect_error(lambda: r.execute_command("BKV.SET", "x" * (1 << 20 + 1), "v"), "too large", "huge key")
    # The largest key and value the engine stores, and one byte over each.
    max_key, max_value = "k" * ((1 << 20) - 2), b"v" * (256 << 20)
    check(r.execute_command("BKV.SET", max_key, "small") == b"OK", "BKV.SET of the longest key")
    expect_error(lambda: r.execute_command("BKV.SET", max_key + "k", "v"), "at most 1048574 bytes", "key one byte over")
    check(r.execute_command("BKV.SET", "bigvalue", max_value) == b"OK", "BKV.SET of the longest value")
    expect_error(lambda: r.execute_command("BKV.SET", "bigvalue2", max_value + b"v"), "longer than the maximum",
                 "value one byte over")
    expect_error(lambda: r.execute_command("BKV.MSET", "m9", "x", "bigvalue2", max_value + b"v"),
                 "longer than the maximum", "MSET value one byte over")
    check(r.execute_command("BKV.EXISTS", "m9") == 0, "a refused MSET stores nothing")
    check(r.execute_command("BKV.GET", max_key) == b"small", "BKV.GET of the longest key")
    check(r.execute_command("BKV.GET", "bigvalue") == max_value, "BKV.GET of the longest value")
    check(r.execute_command("BKV.DEL", max_key) == 1 and r.execute_command("BKV.DEL", "bigvalue") == 1,
          "longest key and value deleted")
    del max_value
    r1 = redis.Redis(host="127.0.0.1", port=s.port, db=1)
    expect_error(lambda: r1.execute_command("BKV.SET", "k", "v"), "database 0", "rows only in database 0")
    r1.flushdb()  # another database's flush leaves the rows alone
    check(r.execute_command("BKV.GET", "m1") == b"a", "rows survive FLUSHDB of database 1")
    r.set("plain", "string")
    expect_error(lambda: r.execute_command("BF.ADD", "plain", "a"), "WRONGTYPE", "BF on a string")
    expect_error(lambda: r.execute_command("CF.ADD", "plain", "a"), "WRONGTYPE", "CF on a string")
    expect_error(lambda: r.execute_command("BF.RESERVE", "b0", "1.5", 100), "error rate", "error rate >= 1")
    expect_error(lambda: r.execute_command("BF.RESERVE", "b0", "x", 100), "error rate", "error rate not a number")
    expect_error(lambda: r.execute_command("BF.RESERVE", "b0", "0.01", 0), "capacity", "capacity 0")
    expect_error(lambda: r.execute_command("BKV.FILTER.BUILD", "s0", "nosuch", "0.01", "a"), "unknown filter type",
                 "unknown static type")
    expect_error(lambda: r.execute_command("BKV.FILTER.LOADBLOB", "s0", "garbage"), "blob", "bad blob")
    check(r.ping(), "server alive after bad input")

    # BF: false positives within the requested rate; scaling; INFO.
    r.execute_command("BF.RESERVE", "bf", 0.01, 20000)
    items = ["item%d" % i for i in range(20000)]
    added = r.execute_command("BF.MADD", "bf", *items)
    check(sum(added) >= 0.99 * len(items), "BF.MADD: new items answer 1 (but a false positive answers 0)")
    check(all(r.execute_command("BF.MEXISTS", "bf", *items)), "no false negatives")
    probes = ["other%d" % i for i in range(40000)]
    fp = sum(r.execute_command("BF.MEXISTS", "bf", *probes))
    check(fp / len(probes) <= 0.01, "BF false positive rate %.4f > 0.01" % (fp / len(probes)))
    check(r.execute_command("BF.CARD", "bf") == sum(added), "BF.CARD counts the items added")
    check(r.execute_command("BF.ADD", "bf", "item5") == 0, "BF.ADD existing")
    r.execute_command("BF.RESERVE", "grow", 0.01, 100, "EXPANSION", 2)
    for i in range(0, 1000, 100):
        r.execute_command("BF.MADD", "grow", *["g%d" % j for j in range(i, i + 100)])
    info = r.execute_command("BF.INFO", "grow")
    fields = {info[i]: info[i + 1] for i in range(0, len(info), 2)}
    check(fields[b"Number of filters"] >= 3 and 980 <= fields[b"Number of items inserted"] <= 1000,
          "BF scaling: %r" % fields)
    check(fields[b"Expansion rate"] == 2 and fields[b"Capacity"] >= 1000, "BF.INFO fields %r" % fields)
    check(all(r.execute_command("BF.MEXISTS", "grow", *["g%d" % j for j in range(1000)])), "scaled filter keeps items")
    r.execute_command("BF.RESERVE", "fixed", 0.01, 10, "NONSCALING")
    replies = r.execute_command("BF.INSERT", "fixed", "ITEMS", *["f%d" % i for i in range(11)])
    check(isinstance(replies[-1], redis.exceptions.ResponseError) or replies[-1] == b"ERR non scaling filter is full"
          or "full" in str(replies[-1]), "NONSCALING full: %r" % replies[-1:])
    replies = r.execute_command("BF.INSERT", "fixed", "ITEMS", "x", "y", "z")
    check(len(replies) == 1 and "non scaling filter is full" in str(replies[0]),
          "a full NONSCALING filter ends BF.INSERT's reply at its error, as RedisBloom's: %r" % replies)
    check(r.execute_command("BF.INFO", "fixed", "EXPANSION") == [None], "NONSCALING has no expansion")
    expect_error(lambda: r.execute_command("BF.RESERVE", "bf", 0.01, 10), "item exists", "BF.RESERVE existing")
    expect_error(lambda: r.execute_command("BF.INSERT", "none", "NOCREATE", "ITEMS", "a"), "not found", "NOCREATE")
    check(r.execute_command("BF.EXISTS", "missing", "a") == 0, "BF.EXISTS on a missing key")

    # CF: add, addnx, count, delete, scaling and INFO.
    r.execute_command("CF.RESERVE", "cf", 1000)
    check(r.execute_command("CF.ADD", "cf", "a") == 1 and r.execute_command("CF.ADD", "cf", "a") == 1, "CF.ADD twice")
    check(r.execute_command("CF.COUNT", "cf", "a") == 2, "CF.COUNT duplicates")
    check(r.execute_command("CF.ADDNX", "cf", "a") == 0 and r.execute_command("CF.ADDNX", "cf", "b") == 1, "CF.ADDNX")
    check(r.execute_command("CF.DEL", "cf", "a") == 1 and r.execute_command("CF.EXISTS", "cf", "a") == 1, "CF.DEL one copy")
    check(r.execute_command("CF.DEL", "cf", "a") == 1 and r.execute_command("CF.EXISTS", "cf", "a") == 0, "CF.DEL last copy")
    check(r.execute_command("CF.DEL", "cf", "zzz") == 0, "CF.DEL absent")
    expect_error(lambda: r.execute_command("CF.DEL", "nocf", "a"), "not found", "CF.DEL on a missing key")
    r.execute_command("CF.INSERT", "cfgrow", "CAPACITY", 100, "ITEMS", *["c%d" % i for i in range(2000)])
    info = r.execute_command("CF.INFO", "cfgrow")
    fields = {info[i]: info[i + 1] for i in range(0, len(info), 2)}
    check(fields[b"Number of filters"] > 1 and fields[b"Number of items inserted"] == 2000, "CF scaling %r" % fields)
    check(all(r.execute_command("CF.MEXISTS", "cfgrow", *["c%d" % i for i in range(2000)])), "CF keeps items")
    # CF.COMPACT: entries move into older sub-filters of the same size and
    # the emptied newest ones are freed; every item left stays found.
    r.execute_command("CF.RESERVE", "cfc", 1000, "EXPANSION", 1)
    r.execute_command("CF.INSERT", "cfc", "ITEMS", *["k%d" % i for i in range(3500)])
    def cf_field(key, name):
        info = r.execute_command("CF.INFO", key)
        return {info[i]: info[i + 1] for i in range(0, len(info), 2)}[name]
    filters_before = cf_field("cfc", b"Number of filters")
    # Deleted oldest first, one a command: a delete past a tenth of the
    # items compacts as RedisBloom's does, so the count falls as it goes.
    for i in range(2600):
        r.execute_command("CF.DEL", "cfc", "k%d" % i)
    check(cf_field("cfc", b"Number of filters") < filters_before, "deletes compact the filter")
    check(r.execute_command("CF.COMPACT", "cfc") == b"OK", "CF.COMPACT")
    check(cf_field("cfc", b"Number of items inserted") == 900 and cf_field("cfc", b"Number of items deleted") == 0,
          "CF.COMPACT keeps the counts")
    check(all(r.execute_command("CF.MEXISTS", "cfc", *["k%d" % i for i in range(2600, 3500)])),
          "CF.COMPACT keeps every item")
    check(r.execute_command("CF.ADD", "cfc", "after") == 1 and r.execute_command("CF.EXISTS", "cfc", "after") == 1,
          "adds after CF.COMPACT")
    expect_error(lambda: r.execute_command("CF.COMPACT", "nocf"), "not found", "CF.COMPACT on a missing key")
    expect_error(lambda: r.execute_command("CF.COMPACT", "cfc", "x"), "wrong number", "CF.COMPACT arity")
    r.execute_command("CF.RESERVE", "cffixed", 8, "EXPANSION", 0)
    results = [r.execute_command("CF.INSERT", "cffixed", "ITEMS", "x%d" % i)[0] for i in range(64)]
    check(-1 in results, "a non-expanding cuckoo filter fills up")
    expect_error(lambda: r.execute_command("CF.ADD", "cffixed", "y-full"), "full", "CF.ADD to a full filter")

    # Static filters.
    r.execute_command("BKV.FILTER.BUILD", "rib", "ribbon", 0.01, *items[:5000])
    check(all(r.execute_command("BKV.FILTER.MEXISTS", "rib", *items[:5000])), "ribbon holds its set")
    fp = sum(r.execute_command("BKV.FILTER.MEXISTS", "rib", *probes[:20000]))
    check(fp / 20000 <= 0.02, "ribbon false positives %.4f" % (fp / 20000))

    # BKV.FILTER.BUILD takes every type, those that also take adds among
    # them; each must come back from an RDB as it was built.
    for t in BUILD_TYPES:
        r.execute_command("BKV.FILTER.BUILD", "st-" + t, t, 0.01, *items[:300])
    r.execute_command("DEBUG", "RELOAD")
    for t in BUILD_TYPES:
        check(all(r.execute_command("BKV.FILTER.MEXISTS", "st-" + t, *items[:300])), "%s filter after DEBUG RELOAD" % t)

    # DUMP/RESTORE: filters and a slot's rows travel through Redis's own form.
    s2 = Server("single2")
    r2 = s2.client()
    for key in ["bf", "cfgrow", "rib"] + ["st-" + t for t in BUILD_TYPES]:
        r2.restore(key, 0, r.dump(key))
    for t in BUILD_TYPES:
        check(all(r2.execute_command("BKV.FILTER.MEXISTS", "st-" + t, *items[:300])), "%s filter after RESTORE" % t)
    check(all(r2.execute_command("BF.MEXISTS", "bf", *items[:1000])), "BF after RESTORE")
    check(all(r2.execute_command("CF.MEXISTS", "cfgrow", *["c%d" % i for i in range(2000)])), "CF after RESTORE")
    check(all(r2.execute_command("BKV.FILTER.MEXISTS", "rib", *items[:1000])), "static after RESTORE")
    check(r.memory_usage("bf") > 20000, "MEMORY USAGE of a filter")
    check(r.execute_command("DEBUG", "DIGEST-VALUE", "bf") == r2.execute_command("DEBUG", "DIGEST-VALUE", "bf"),
          "digest equal after RESTORE")
    slotkey = [k for k in r.keys("bkv:slot:*")]
    check(len(slotkey) > 100, "a key per slot holding rows")
    for k in slotkey[:50]:
        r2.restore(k, 0, r.dump(k))
    # Every row of a restored slot is readable on the second server.
    restored = {keyslot(bytes(k).split(b"{")[1].rstrip(b"}")) for k in slotkey[:50]}
    n_checked = 0
    for k, v in model.items():
        if keyslot(k) in restored:
            check(r2.execute_command("BKV.GET", k) == v.encode(), "row %s after RESTORE of its slot" % k)
            n_checked += 1
    check(n_checked > 0, "some rows moved with their slots")
    # RESTORE ... REPLACE replaces the slot's rows: a row only the second
    # server had in that slot is gone, the payload's are there.
    k0 = slotkey[0]
    tag0 = bytes(k0).split(b"{")[1].rstrip(b"}")
    slot0 = keyslot(tag0)
    # The slot key's own hash tag puts a row in that slot: some slots are
    # never reached by a plain counter's names ("extra:N" misses 96).
    extra = b"extra:{" + tag0 + b"}"
    check(keyslot(extra) == slot0, "a row named with the slot's hash tag lands in the slot")
    r2.execute_command("BKV.SET", extra, "only-here")
    r2.restore(k0, 0, r.dump(k0), replace=True)
    check(r2.execute_command("BKV.GET", extra) is None, "RESTORE REPLACE left a row the payload lacks")
    for k, v in model.items():
        if keyslot(k) == slot0:
            check(r2.execute_command("BKV.GET", k) == v.encode(), "row %s after RESTORE REPLACE" % k)
    expect_error(lambda: r2.restore(k0, 0, b"\x07garbage" + r.dump(k0)[8:], replace=True), "payload",
                 "a bad payload")
    for k, v in model.items():
        if keyslot(k) == slot0:
            check(r2.execute_command("BKV.GET", k) == v.encode(), "row %s after a refused RESTORE" % k)
    # Payloads whose checksum holds but whose value does not: cut short at
    # any point (the server stopped at the first short read), or a slot's
    # rows under a key of another slot (they replaced that other slot's
    # rows). Each is refused and changes no row.
    good = r.dump(k0)
    for cut in (2, 9, len(good) // 2, len(good) - 12):
        expect_error(lambda: r2.restore(k0, 0, cut_payload(good, cut), replace=True), "bad data format",
                     "a slot payload cut at byte %d" % cut)
    other = slotkey[1]
    expect_error(lambda: r2.restore(other, 0, good, replace=True), "bad data format", "a slot's rows under another slot's key")
    for key in ["bf", "cfgrow", "rib"]:
        whole = r.dump(key)
        expect_error(lambda: r2.restore(key + "-cut", 0, cut_payload(whole, len(whole) // 2)),
                     "bad data format", "%s payload cut short" % key)
    check(r2.ping() and not r2.exists("bf-cut", "cfgrow-cut", "rib-cut"), "the server up, no cut filter stored")
    other_slot = keyslot(bytes(other).split(b"{")[1].rstrip(b"}"))
    for k, v in model.items():
        if keyslot(k) in (slot0, other_slot):
            check(r2.execute_command("BKV.GET", k) == v.encode(), "row %s after refused forged payloads" % k)
    # No command an operator types takes a slot key, and its rows, away:
    # each is refused, and every row is still there.
    victim = slotkey[0]
    other_key = slotkey[1]
    refused = [("DEL", victim), ("UNLINK", "x", victim), ("EXPIRE", victim, 1), ("PEXPIREAT", victim, 1),
               ("RENAME", victim, "elsewhere"), ("RENAME", "plain", victim), ("RENAMENX", victim, "z"),
               ("MOVE", victim, 1), ("COPY", "plain", victim, "REPLACE"), ("SET", victim, "x"),
               ("GETDEL", victim), ("MSET", "a", "1", victim, "2"), ("SUNIONSTORE", victim, "s1"),
               ("SORT", "list", "STORE", victim), ("SWAPDB", 0, 1), ("RESTORE", other_key, 5000, r.dump(other_key),
                                                                     "REPLACE"),
               ("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")]
    for cmd in refused:
        expect_error(lambda: r.execute_command(*cmd), "bkv:slot key", "%s refused" % cmd[0])
    check(r.exists(victim) == 1 and r.ttl(victim) == -1, "the slot key is still there, with no TTL")
    check(r.config_get("maxmemory-policy")["maxmemory-policy"] != "allkeys-lru", "allkeys eviction refused")
    same_rows(r, model, "after the refused commands")
    p = r.pipeline(transaction=True)
    p.execute_command("DEL", victim)
    res = p.execute(raise_on_error=False)[0]
    check(isinstance(res, Exception) and "bkv:slot key" in str(res), "DEL in MULTI refused: %r" % (res,))
    expect_error(lambda: r.eval("return redis.call('DEL', KEYS[1])", 1, victim), "bkv:slot key", "DEL in a script")

    # Restarts: SIGTERM and kill -9 keep every row (bloomkv's own files);
    # the RDB keeps the filters.
    r.save()
    s.restart(signal.SIGTERM)
    r = s.client()
    for k, v in model.items():
        check(r.execute_command("BKV.GET", k) == v.encode(), "row %s after SIGTERM restart" % k)
    check(all(r.execute_command("BF.MEXISTS", "bf", *items[:1000])), "BF after restart from RDB")
    r.execute_command("BKV.SET", "late", "write")
    s.restart(signal.SIGKILL)
    r = s.client()
    check(r.execute_command("BKV.GET", "late") == b"write", "acknowledged write after kill -9")
    check(len(r.keys("bkv:slot:*")) >= len(slotkey) - 1, "slot keys back after restart")
    s.kill(signal.SIGTERM)
    s2.kill(signal.SIGTERM)


def aof_node():
    """The AOF keeps rows and filters: a rewrite without the RDB preamble
    writes them as commands (BKV.SET, BKV.FILTER.LOADBLOB)."""
    s = Server("aof", extra=["--appendonly", "yes", "--aof-use-rdb-preamble", "no"])
    r = s.client()
    for i in range(500):
        r.execute_command("BKV.SET", "a%d" % i, "v%d" % i)
    r.execute_command("BF.MADD", "abf", *["i%d" % i for i in range(300)])
    r.execute_command("CF.ADD", "acf", "x")
    for t in BUILD_TYPES:
        r.execute_command("BKV.FILTER.BUILD", "st-" + t, t, 0.01, *["s%d" % i for i in range(200)])
    # A CF made before the module took RedisBloom's layout: its blob keeps the library's form.
    r.restore("oldcf", 0, bytes.fromhex(open(os.path.join(HERE, "data", "cf-cuckoo12.dump.hex")).read().strip()))
    r.bgrewriteaof()
    deadline = time.time() + 30
    while r.info("persistence")["aof_rewrite_in_progress"] and time.time() < deadline:
        time.sleep(0.05)
    check(r.info("persistence")["aof_last_bgrewrite_status"] == "ok", "AOF rewrite succeeded")
    r.execute_command("BKV.SET", "after", "rewrite")
    shutil.rmtree(os.path.join(s.dir, "bkv"))  # the AOF alone must bring everything back
    s.restart(signal.SIGKILL)
    r = s.client()
    for i in range(0, 500, 7):
        check(r.execute_command("BKV.GET", "a%d" % i) == b"v%d" % i, "row a%d from the AOF" % i)
    check(r.execute_command("BKV.GET", "after") == b"rewrite", "a write after the rewrite, from the AOF")
    check(all(r.execute_command("BF.MEXISTS", "abf", *["i%d" % i for i in range(300)])), "BF from the AOF")
    check(r.execute_command("CF.EXISTS", "acf", "x") == 1, "CF from the AOF")
    for t in BUILD_TYPES:
        check(all(r.execute_command("BKV.FILTER.MEXISTS", "st-" + t, *["s%d" % i for i in range(200)])),
              "%s filter from the AOF" % t)
    # The blob an AOF holds, forged: LOADBLOB refuses counts that do not
    # add up, a number past any bound, a sub-filter of another type.
    aof_dir = os.path.join(s.dir, "appendonlydir")
    base = [f for f in os.listdir(aof_dir) if ".base." in f][0]
    blob = next(c[2] for c in resp_commands(open(os.path.join(aof_dir, base), "rb").read())
                if c[0].upper() == b"BKV.FILTER.LOADBLOB" and c[1] == b"abf")
    check(r.execute_command("BKV.FILTER.LOADBLOB", "copy", blob) == b"OK", "the blob as written loads")
    forged = bytearray(blob)
    forged[24:32] = (2 ** 63 + 5).to_bytes(8, "little")  # items
    expect_error(lambda: r.execute_command("BKV.FILTER.LOADBLOB", "f1", bytes(forged)), "filter blob",
                 "a forged item count")
    forged = bytearray(blob)
    forged[8:16] = (2 ** 40).to_bytes(8, "little")  # expansion
    expect_error(lambda: r.execute_command("BKV.FILTER.LOADBLOB", "f2", bytes(forged)), "filter blob",
                 "a forged expansion")
    forged = bytearray(blob)
    forged[6] = 2  # a BF (RedisBloom's layout) as a CF
    expect_error(lambda: r.execute_command("BKV.FILTER.LOADBLOB", "f3", bytes(forged)), "filter blob", "a forged kind")
    check(r.execute_command("CF.EXISTS", "oldcf", "q5") == 1, "a CF in the library's layout from the AOF")
    cf_blob = next(c[2] for c in resp_commands(open(os.path.join(aof_dir, base), "rb").read())
                   if c[0].upper() == b"BKV.FILTER.LOADBLOB" and c[1] == b"oldcf")
    forged = bytearray(cf_blob)
    forged[6] = 1  # a CF's cuckoo sub-filters as a BF's
    expect_error(lambda: r.execute_command("BKV.FILTER.LOADBLOB", "f4", bytes(forged)), "type", "a forged kind")
    forged = bytearray(blob)
    forged[-40] ^= 1  # a bit of the last sub-filter
    expect_error(lambda: r.execute_command("BKV.FILTER.LOADBLOB", "f5", bytes(forged)), "checksum", "a damaged bit")
    check(r.exists("f1", "f2", "f3", "f4", "f5") == 0, "no forged filter was stored")
    s.kill(signal.SIGTERM)


# -------------------------------------------------------------------- cluster

class Cluster:
    """A small cluster client: routes by key slot from CLUSTER SLOTS and
    follows MOVED, ASK (with ASKING) and TRYAGAIN as the protocol says."""

    def __init__(self, servers):
        self.servers = servers
        self.conns = {}
        self.redirects = {"MOVED": 0, "ASK": 0, "TRYAGAIN": 0}
        self.slots = [None] * 16384
        self.refresh()

    def conn(self, port):
        if port not in self.conns:
            self.conns[port] = redis.Redis(host="127.0.0.1", port=port, socket_timeout=20)
        return self.conns[port]

    def refresh(self):
        for s in self.servers:
            if not s.proc:
                continue
            try:
                for a, b, master, *_ in self.conn(s.port).execute_command("CLUSTER", "SLOTS"):
                    for i in range(a, b + 1):
                        self.slots[i] = master[1]
                return
            except redis.exceptions.RedisError:
                continue

    def call(self, *args):
        slot = keyslot(args[1])
        port, asking = self.slots[slot], False
        for _ in range(400):
            try:
                if asking:
                    p = self.conn(port).pipeline(transaction=False)
                    p.execute_command("ASKING")
                    p.execute_command(*args)
                    res = p.execute(raise_on_error=False)[1]
                    if isinstance(res, Exception):
                        raise res
                    return res
                return self.conn(port).execute_command(*args)
            except redis.exceptions.ConnectionError:
                time.sleep(0.1)
                self.refresh()
                port, asking = self.slots[slot], False
            except redis.exceptions.ResponseError as e:
                # Redirections, as the client library names them or as raw text.
                code, _, rest = (getattr(e, "message", None) or str(e)).partition(" ")
                if isinstance(e, redis.exceptions.MovedError) or code == "MOVED":
                    self.redirects["MOVED"] += 1
                    self.refresh()
                    port, asking = int(rest.split(":")[-1]), False
                elif isinstance(e, redis.exceptions.AskError) or code == "ASK":
                    self.redirects["ASK"] += 1
                    port, asking = int(rest.split(":")[-1]), True
                elif isinstance(e, (redis.exceptions.TryAgainError, redis.exceptions.ClusterDownError)) or \
                        code in ("TRYAGAIN", "CLUSTERDOWN"):
                    self.redirects["TRYAGAIN"] += 1
                    time.sleep(0.02)
                    port, asking = self.slots[slot], False
                else:
                    raise
        raise RuntimeError("no node answered %r" % (args,))


def cluster():
    rnd = random.Random(11)
    nodes = [Server("node%d" % i, cluster=True) for i in range(6)]
    addrs = ["127.0.0.1:%d" % n.port for n in nodes]
    subprocess.run(["redis-cli", "--cluster", "create", *addrs, "--cluster-replicas", "1", "--cluster-yes"],
                   check=True, stdout=subprocess.DEVNULL, timeout=60)
    wait_cluster_ok(nodes)
    rc = Cluster(nodes)
    model = {}
    for i in range(4000):
        k = "user:%d" % i
        v = "val%d" % rnd.randrange(40)
        check(rc.call("BKV.SET", k, v) == b"OK", "cluster BKV.SET")
        model[k] = v
    for k, v in model.items():
        check(rc.call("BKV.GET", k) == v.encode(), "cluster BKV.GET %s" % k)
    check(rc.call("BKV.GET", "user:none") is None, "cluster absent key")

    # Cluster-wide search: the union of every master's answer.
    for v in ["val3", "val30"]:
        got = cluster_find(nodes, v)
        want = {k for k, mv in model.items() if mv == v}
        check(got == want, "cluster-wide find-value %s: %d vs %d" % (v, len(got), len(want)))

    if TOOL:
        out = subprocess.run([TOOL, "cluster", "find-value", "127.0.0.1:%d" % nodes[0].port, "val3"],
                             capture_output=True, timeout=60)
        got = {line.split(b"\t")[0].decode() for line in out.stdout.splitlines()}
        check(out.returncode == 0 and got == {k for k, mv in model.items() if mv == "val3"},
              "bloomkv cluster find-value: exit %d, %d keys" % (out.returncode, len(got)))
        out = subprocess.run([TOOL, "cluster", "find-value", "127.0.0.1:%d" % nodes[0].port, "nosuchvalue"],
                             capture_output=True, timeout=60)
        check(out.returncode == 1 and not out.stdout, "bloomkv cluster find-value of an absent value exits 1")

    # Failover: writes acknowledged by a replica (WAIT 1) survive kill -9 of
    # their master.
    masters = cluster_masters(nodes)
    victim = masters[0]
    vr = victim.client()
    acked = {}
    for i in range(300):
        k = "acked:%d" % i
        if keyslot(k) in owned_slots(vr):
            vr.execute_command("BKV.SET", k, "w%d" % i)
            acked[k] = "w%d" % i
    check(vr.execute_command("WAIT", 1, 5000) >= 1, "WAIT 1 acknowledged")
    victim.kill(signal.SIGKILL)
    wait_cluster_ok([n for n in nodes if n is not victim], timeout=30)
    for k, v in acked.items():
        check(rc.call("BKV.GET", k) == v.encode(), "acknowledged %s after failover" % k)
    model.update(acked)
    victim_slots = {keyslot(k) for k in acked}
    while_down = {}
    for i in range(3000):
        k = "whiledown:%d" % i
        if keyslot(k) in victim_slots or i % 10 == 0:
            rc.call("BKV.SET", k, "d%d" % i)
            while_down[k] = "d%d" % i
    model.update(while_down)
    victim.start()  # comes back as a replica of the promoted node: a full sync
    vr = victim.client()
    deadline = time.time() + 30
    while time.time() < deadline:
        role = vr.execute_command("ROLE")
        if role[0] == b"slave" and role[3] == b"connected":
            break
        time.sleep(0.1)
    check(role[0] == b"slave" and role[3] == b"connected", "the old master rejoined as a replica: %r" % (role,))
    vr.execute_command("READONLY")
    time.sleep(0.5)
    synced = 0
    for k, v in {**acked, **while_down}.items():
        try:
            got = vr.execute_command("BKV.GET", k)
        except redis.exceptions.ResponseError:
            continue  # a slot of another master: MOVED
        check(got == v.encode(), "%s on the replica after its full sync" % k)
        synced += 1
    check(synced >= len(acked), "the replica answers for its master's slots (%d rows)" % synced)

    # Reshard a quarter of the slots while a reader checks every key.
    masters = cluster_masters([n for n in nodes if n.proc])
    src, dst = masters[0], masters[1]
    stop = threading.Event()
    errors, stats = [], {}
    written = {}

    def reader():
        c = Cluster(nodes)
        keys, reads = list(model), 0
        while not stop.is_set():
            k = keys[rnd.randrange(len(keys))]
            try:
                got = c.call("BKV.GET", k)
                reads += 1
                if got != model[k].encode():
                    errors.append("reader: %s read %r, wanted %r" % (k, got, model[k]))
            except Exception as e:
                errors.append("reader: %s: %r" % (k, e))
        stats["reads"], stats["redirects"] = reads, dict(c.redirects)

    def writer():
        c, i = Cluster(nodes), 0
        while not stop.is_set():
            k = "during:%d" % i
            try:
                if c.call("BKV.SET", k, "d%d" % i) == b"OK":
                    written[k] = "d%d" % i
            except Exception as e:
                errors.append("writer: %s: %r" % (k, e))
            i += 1

    filters = ["bloom:%d" % i for i in range(64)]
    for name in filters:
        rc.call("BF.MADD", name, *["x%d" % i for i in range(200)])
        rc.call("CF.ADD", name + ":cf", "x7")
    moved_before = sum(1 for name in filters if keyslot(name) in owned_slots(src.client()))
    check(moved_before > 0, "some filters live on the source")
    threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
    for t in threads:
        t.start()
    subprocess.run(["redis-cli", "--cluster", "reshard", "127.0.0.1:%d" % src.port, "--cluster-from",
                    node_id(src), "--cluster-to", node_id(dst), "--cluster-slots", "4096", "--cluster-yes"],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    check(not errors, "reads and writes during resharding: %s" % errors[:5])
    check(stats["reads"] > 100 and len(written) > 100, "traffic during the move: %r, %d writes" % (stats, len(written)))
    print("resharding 4096 slots: %d checked reads, %d writes, redirects %r" % (stats["reads"], len(written),
                                                                              stats["redirects"]))
    model.update(written)
    check(len(owned_slots(dst.client())) >= 4096 + 4000, "the slots moved")
    for k, v in model.items():
        check(rc.call("BKV.GET", k) == v.encode(), "%s after resharding" % k)
    # One slot moved by hand, step by step, as redis-cli does it: while the
    # slot's key is still on the source the target answers TRYAGAIN (the
    # rows have not arrived); after MIGRATE the target serves them.
    masters = cluster_masters([n for n in nodes if n.proc])
    src, dst = masters[0], masters[1]
    sr, dr = src.client(), dst.client()
    slot = min(owned_slots(sr))
    keys_in_slot = [k for k in model if keyslot(k) == slot]
    if not keys_in_slot:
        k = next("probe:%d" % i for i in range(100000) if keyslot("probe:%d" % i) == slot)
        rc.call("BKV.SET", k, "probe")
        model[k] = "probe"
        keys_in_slot = [k]
    k = keys_in_slot[0]
    dr.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(src))
    sr.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(dst))
    expect_error(lambda: sr.execute_command("BKV.GET", k), "ASK", "the source redirects a migrating slot")
    p = dr.pipeline(transaction=False)
    p.execute_command("ASKING")
    p.execute_command("BKV.GET", k)
    res = p.execute(raise_on_error=False)[1]
    check(isinstance(res, Exception) and "TRYAGAIN" in str(res), "target before the rows arrive: %r" % (res,))
    slot_key = sr.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 10)
    check(len(slot_key) == 1 and slot_key[0].startswith(b"bkv:slot:"), "one key holds the slot: %r" % slot_key)
    sr.execute_command("MIGRATE", "127.0.0.1", dst.port, slot_key[0], 0, 10000)
    p = dr.pipeline(transaction=False)
    p.execute_command("ASKING")
    p.execute_command("BKV.GET", k)
    check(p.execute()[1] == model[k].encode(), "target serves the slot once its key arrived")
    check(sr.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0, "nothing of the slot left on the source")
    for n in (sr, dr):
        n.execute_command("CLUSTER", "SETSLOT", slot, "NODE", node_id(dst))
    time.sleep(0.5)
    for kk in keys_in_slot:
        check(rc.call("BKV.GET", kk) == model[kk].encode(), "%s after the hand-made move" % kk)

    # Filters made before the move answer the same after it, wherever their slot went.
    for name in filters:
        check(all(rc.call("BF.MEXISTS", name, *["x%d" % i for i in range(200)])), "%s after resharding" % name)
        check(rc.call("CF.EXISTS", name + ":cf", "x7") == 1, "%s:cf after resharding" % name)

    # A restarted master keeps its rows.
    masters = cluster_masters([n for n in nodes if n.proc])
    m = masters[-1]
    m.restart(signal.SIGTERM)
    wait_cluster_ok([n for n in nodes if n.proc], timeout=30)
    for k, v in model.items():
        check(rc.call("BKV.GET", k) == v.encode(), "%s after a master restart" % k)
    for n in nodes:
        n.kill(signal.SIGTERM)


def node_id(server):
    return server.client().execute_command("CLUSTER", "MYID").decode()


def owned_slots(client):
    out = set()
    for line in client.execute_command("CLUSTER", "NODES").decode().splitlines():
        f = line.split()
        if "myself" in f[2]:
            for tok in f[8:]:
                if tok.startswith("["):
                    continue
                a, _, b = tok.partition("-")
                out.update(range(int(a), int(b or a) + 1))
    return out


def cluster_masters(servers):
    return [s for s in servers if s.proc and s.client().execute_command("ROLE")[0] == b"master"
            and owned_slots(s.client())]


def all_rows(r):
    """Every row a node serves, through BKV.SCAN and BKV.MGET."""
    rows, cursor = {}, b"0"
    while True:
        cursor, keys = r.execute_command("BKV.SCAN", cursor, "COUNT", 1000)
        if keys:
            for k, v in zip(keys, r.execute_command("BKV.MGET", *keys)):
                check(k not in rows, "BKV.SCAN repeats %r" % k)
                rows[k.decode()] = v.decode() if v is not None else None
        if cursor in (b"0", 0, "0"):
            return rows


def same_rows(r, model, what):
    got = all_rows(r)
    lost = [k for k in model if got.get(k) != model[k]]
    extra = [k for k in got if k not in model]
    check(not lost and not extra, "%s: %d acknowledged rows lost or changed (%s), %d rows resurrected (%s)" %
          (what, len(lost), lost[:3], len(extra), extra[:3]))


def write_rows(r, model, rnd, n, prefix):
    for i in range(n):
        k = "%s%04d" % (prefix, rnd.randrange(n))
        if rnd.random() < 0.2:
            r.execute_command("BKV.DEL", k)
            model.pop(k, None)
        else:
            v = "v%d" % rnd.randrange(10 ** 6)
            r.execute_command("BKV.SET", k, v)
            model[k] = v


def log_has(server, text):
    with open(os.path.join(server.dir, "server.log")) as f:
        return text in f.read()


def fails_to_start(server, log_text, what):
    """server must refuse to start, its log saying why."""
    try:
        server.start()
        check(False, "%s: the server started" % what)
    except RuntimeError:
        pass
    check(log_has(server, log_text), "%s: the log lacks %r" % (what, log_text))
    server.kill(signal.SIGKILL)  # by its own pid, should it still be there: never left running untracked


def eviction():
    """Slot keys are never evicted: an allkeys-* policy stops the module
    loading (and CONFIG SET to one is refused), and under volatile-* slot
    keys, which never carry a TTL, stay while other keys go."""
    s = Server("evict-allkeys-probe")
    s.kill(signal.SIGTERM)
    s.extra = ["--maxmemory-policy", "allkeys-lru"]
    fails_to_start(s, "would evict the bkv:slot keys", "the module under allkeys-lru")
    v = Server("evict-volatile", extra=["--maxmemory", "8mb", "--maxmemory-policy", "volatile-lru"])
    r = v.client()
    model = {}
    for i in range(3000):
        r.execute_command("BKV.SET", "e%05d" % i, "x" * 100)
        model["e%05d" % i] = "x" * 100
        r.set("cache%05d" % i, "y" * 5000, ex=3600)
    check(r.info("stats")["evicted_keys"] > 0, "volatile keys were evicted")
    same_rows(r, model, "rows under volatile-lru eviction")
    v.kill(signal.SIGTERM)


def hostile_clients():
    """Numbers from a client are bounded before they become sizes; filters
    count against maxmemory; a forged blob is refused; SCAN does bounded
    work whatever it is asked."""
    s = Server("hostile")
    r = s.client()
    for i in range(300):
        r.execute_command("BKV.SET", "h%04d" % i, "v")
    cursor, keys = r.execute_command("BKV.SCAN", 0, "COUNT", 2305843009213693952)
    check(len(keys) == 300 and cursor in (b"0", 0), "SCAN with a huge COUNT: %d keys" % len(keys))
    cursor, keys = r.execute_command("BKV.SCAN", 0, "MATCH", "nothing-matches", "COUNT", 50)
    check(keys == [] and cursor not in (b"0", 0), "SCAN with MATCH examines COUNT rows and returns a cursor")
    expect_error(lambda: r.execute_command("BF.RESERVE", "big", 0.01, 4294967296), "bad capacity", "BF capacity")
    expect_error(lambda: r.execute_command("BF.RESERVE", "big", 0.01, 100, "EXPANSION", 4294967296), "expansion must be in the range",
                 "BF expansion")
    expect_error(lambda: r.execute_command("CF.RESERVE", "big", 4294967296), "bad capacity", "CF capacity")
    expect_error(lambda: r.execute_command("CF.RESERVE", "big", 100, "BUCKETSIZE", 100000), "bad bucket size",
                 "CF bucket size")
    check(r.ping(), "the server is up")
    # maxmemory counts the filters' own bytes.
    r.config_set("maxmemory", "20mb")
    expect_error(lambda: r.execute_command("BF.RESERVE", "huge", 0.01, 150000000), "OOM", "a filter past maxmemory")
    huge = redisbloom_bf_header(150000000, 0.01, 0)
    expect_error(lambda: r.execute_command("BF.LOADCHUNK", "huge", 1, huge), "OOM", "a loaded header past maxmemory")
    huge = struct.pack("<QQQQHHH", 0, 1 << 26, 0, 1, 2, 20, 1)
    expect_error(lambda: r.execute_command("CF.LOADCHUNK", "huge", 1, huge), "OOM", "a loaded CF header past maxmemory")
    check(r.exists("huge") == 0, "no key for a refused header")
    r.execute_command("BF.RESERVE", "small", 0.01, 1000000)  # about 1.2 MB
    made = 1
    try:
        for i in range(40):
            r.execute_command("BF.RESERVE", "more%d" % i, 0.01, 1000000)
            made += 1
    except redis.exceptions.ResponseError as e:
        check("OOM" in str(e), "filters stop at maxmemory: %s" % e)
    fb = int(r.info("bloomkv")["bloomkv_filter_bytes"])
    used = r.info("memory")["used_memory"]
    check(made < 40 and used + fb <= 22 * 1024 * 1024, "filters held to maxmemory: %d made, %d + %d bytes" %
          (made, used, fb))
    check(r.memory_usage("small") >= 1000000, "MEMORY USAGE sees a filter's bytes")
    r.config_set("maxmemory", "0")
    s.kill(signal.SIGTERM)


def resp_commands(data):
    """The commands of an AOF (RESP arrays of bulk strings)."""
    at, out = 0, []
    while at < len(data):
        end = data.index(b"\r\n", at)
        n = int(data[at + 1:end])
        at = end + 2
        args = []
        for _ in range(n):
            end = data.index(b"\r\n", at)
            ln = int(data[at + 1:end])
            args.append(data[end + 2:end + 2 + ln])
            at = end + 2 + ln + 2
        out.append(args)
    return out


def start_replica(name, master, extra=()):
    """A replica of master, and a client of it, once its link is up."""
    rep = Server(name, extra=["--replicaof", "127.0.0.1", str(master.port)] + list(extra))
    rr = rep.client()
    deadline = time.time() + 20
    while rr.info("replication").get("master_link_status") != "up" and time.time() < deadline:
        time.sleep(0.1)
    return rep, rr


def diskless_replica():
    """A replica with an empty data set loads a full sync straight from the
    socket (repl-diskless-load on-empty-db), which Redis allows only for
    modules that handle short reads: every row and filter arrives."""
    m = Server("diskless-master")
    r = m.client()
    rnd = random.Random(45)
    model = {}
    write_rows(r, model, rnd, 3000, "dl")
    r.execute_command("BF.MADD", "dlbf", *["b%d" % i for i in range(500)])
    rep, rr = start_replica("diskless-replica", m, extra=["--repl-diskless-load", "on-empty-db"])
    check(log_has(rep, "Loading DB in memory") and not log_has(rep, "Skipping diskless-load"),
          "the replica loaded the sync from the socket")
    same_rows(rr, model, "a replica loaded without a file")
    check(all(rr.execute_command("BF.MEXISTS", "dlbf", *["b%d" % i for i in range(500)])), "BF on the diskless replica")
    write_rows(r, model, rnd, 200, "dl2")
    check(r.execute_command("WAIT", 1, 10000) == 1, "the replica acknowledged later writes")
    same_rows(rr, model, "the diskless replica after later writes")
    rep.kill(signal.SIGTERM)
    m.kill(signal.SIGTERM)


def pipelined_writes_replicated():
    """A pipeline of sets, multi-sets and deletes of the same keys reaches a
    replica and the AOF in order: each run of sets as one BKV.MSET, each
    delete between them as itself. The replica, a DEBUG LOADAOF and a
    restart from the AOF alone all end with the master's rows."""
    m = Server("runs-master", extra=["--appendonly", "yes", "--aof-use-rdb-preamble", "no"])
    rep, rr = start_replica("runs-replica", m)
    r = m.client()
    rnd = random.Random(44)
    model = {}
    for n in range(20):
        # Keys of this pipeline alone, a few of them: a set, its delete and
        # a set again share a pipeline, and the last of them decides the row.
        p = r.pipeline(transaction=False)
        for _ in range(200):
            k = "run%02d-%02d" % (n, rnd.randrange(15))
            x = rnd.random()
            if x < 0.25:
                p.execute_command("BKV.DEL", k)
                model.pop(k, None)
            elif x < 0.35:
                k2 = "run%02d-%02d" % (n, rnd.randrange(15))
                v, v2 = "m%d" % rnd.randrange(10 ** 6), "n%d" % rnd.randrange(10 ** 6)
                p.execute_command("BKV.MSET", k, v, k2, v2)
                model[k], model[k2] = v, v2
            else:
                v = "s%d" % rnd.randrange(10 ** 6)
                p.execute_command("BKV.SET", k, v)
                model[k] = v
        p.execute()
    check(r.execute_command("WAIT", 1, 10000) == 1, "the replica acknowledged the pipelines")
    same_rows(r, model, "the master after pipelines")
    same_rows(rr, model, "the replica after pipelines of sets and deletes")
    aof_dir = os.path.join(m.dir, "appendonlydir")
    incr = [f for f in os.listdir(aof_dir) if ".incr." in f][0]
    names = [c[0].upper() for c in resp_commands(open(os.path.join(aof_dir, incr), "rb").read())]
    check(b"BKV.SET" not in names and names.count(b"BKV.MSET") < 20 * 200 * 0.75,
          "the AOF holds runs of sets as BKV.MSET (%d of them)" % names.count(b"BKV.MSET"))
    r.execute_command("DEBUG", "LOADAOF")
    same_rows(r, model, "DEBUG LOADAOF after pipelines")
    m.kill(signal.SIGTERM)
    shutil.rmtree(os.path.join(m.dir, "bkv"))  # the AOF alone must bring every row back
    m.start()
    same_rows(m.client(), model, "the AOF of pipelines with an empty bloomkv directory")
    m.kill(signal.SIGTERM)
    rep.kill(signal.SIGTERM)


def failed_commit_with_a_replica():
    """A commit that fails (the master's bloomkv directory on a full
    file system) is never replicated: the replica holds no row the master
    did not acknowledge. Needs a tmpfs mount (root); skipped without."""
    tfs = os.path.join(ROOT, "tfs")
    os.makedirs(tfs)
    if subprocess.call(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", tfs], stderr=subprocess.DEVNULL) != 0:
        print("failed_commit_with_a_replica: skipped (cannot mount a tmpfs)")
        return
    try:
        m = Server("full-master", bkv_dir=os.path.join(tfs, "bkv"))
        rep, rr = start_replica("full-replica", m)
        r = m.client()
        acked, failed = set(), None
        for i in range(20000):
            k = "full%05d" % i
            try:
                r.execute_command("BKV.SET", k, "x" * 4000)
                acked.add(k)
            except redis.exceptions.ConnectionError:
                failed = k
                break
        check(failed is not None, "the master's file system filled up")
        r = m.client()
        for i in range(5):  # later writes fail too (the engine's error state)
            try:
                r.execute_command("BKV.SET", "after%d" % i, "x")
                check(False, "a write after the failure was acknowledged")
            except redis.exceptions.ConnectionError:
                r = m.client()
        time.sleep(1)
        rows = all_rows(rr)
        check(failed not in rows and not any(k.startswith("after") for k in rows),
              "the replica holds a row its master refused")
        check(set(rows) <= acked, "the replica holds only acknowledged rows")
        check(len(rows) >= len(acked) * 0.9, "the replica has the acknowledged rows (%d of %d)" % (len(rows), len(acked)))
        m.kill(signal.SIGKILL)
        rep.kill(signal.SIGTERM)
    finally:
        subprocess.call(["umount", "-l", tfs])


def failed_save():
    """A save that cannot read every row fails: BGSAVE reports an error,
    and a file SAVE wrote in the server is refused at load, never taken
    as whole."""
    s = Server("badsave", save=True)
    r = s.client()
    for i in range(3000):
        r.execute_command("BKV.SET", "bs%05d" % i, "value-%05d" % i * 10)
    r.execute_command("BKV.COMPACT")
    # The job thread that ran the compaction may still be freeing as the
    # reply arrives; under GCC 12's ASan (no fork interceptor before LLVM
    # 16) a BGSAVE child forked then can hang on the allocator's lock, as
    # one did in redisSetProcTitle. Let it end first.
    time.sleep(0.5)
    bkv = os.path.join(s.dir, "bkv")
    for name in os.listdir(bkv):
        if name.endswith(".sst"):
            with open(os.path.join(bkv, name), "r+b") as f:
                f.seek(2000)
                b = f.read(1)
                f.seek(2000)
                f.write(bytes([b[0] ^ 0xFF]))
    r.bgsave()
    deadline = time.time() + 20
    while r.info("persistence")["rdb_bgsave_in_progress"] and time.time() < deadline:
        time.sleep(0.05)
    check(r.info("persistence")["rdb_last_bgsave_status"] == "err", "BGSAVE over unreadable rows fails")
    r.save()
    s.kill(signal.SIGKILL)
    fails_to_start(s, "was saved incomplete", "a file saved over unreadable rows")


def persistence():
    """Each path Redis takes ends with exactly the acknowledged rows
    (docs/redis.md, "Persistence"): the local rows when they are the
    file's state or newer, the file's otherwise."""
    rnd = random.Random(11)
    s = Server("persist", save=True, module_args=["sync", "yes"])
    r = s.client()
    model = {}
    write_rows(r, model, rnd, 2000, "p")
    r.execute_command("BF.ADD", "pbf", "a")
    # DEBUG RELOAD: save, empty the keyspace (Redis's flush), load.
    r.execute_command("DEBUG", "RELOAD")
    same_rows(r, model, "DEBUG RELOAD")
    check(r.execute_command("BF.EXISTS", "pbf", "a") == 1, "filter after DEBUG RELOAD")
    write_rows(r, model, rnd, 500, "q")
    r.execute_command("DEBUG", "RELOAD")
    same_rows(r, model, "a second DEBUG RELOAD")
    # SAVE, more writes, kill -9: the file is older than the local rows,
    # which are kept (sync yes: every acknowledged write).
    r.save()
    write_rows(r, model, rnd, 500, "r")
    s.restart(signal.SIGKILL)
    r = s.client()
    same_rows(r, model, "SAVE, writes, kill -9, restart")
    check(log_has(s, "are kept"), "the log says the local rows were kept")
    # SHUTDOWN (which saves) and restart.
    write_rows(r, model, rnd, 300, "s")
    s.restart(signal.SIGTERM)
    r = s.client()
    same_rows(r, model, "SHUTDOWN and restart")
    # An older copy of the local directory than the file: the file's rows.
    s.kill(signal.SIGTERM)
    old_copy = os.path.join(ROOT, "persist-old-bkv")
    shutil.copytree(os.path.join(s.dir, "bkv"), old_copy)
    s.start()
    r = s.client()
    write_rows(r, model, rnd, 300, "t")
    s.restart(signal.SIGTERM)  # saves the newer state
    s.kill(signal.SIGTERM)
    shutil.rmtree(os.path.join(s.dir, "bkv"))
    shutil.copytree(old_copy, os.path.join(s.dir, "bkv"))
    s.start()
    r = s.client()
    same_rows(r, model, "an older local directory than the RDB")
    check(log_has(s, "are dropped, the file's taken"), "the log says why the rows were rebuilt")
    # The RDB on a new machine: an empty directory.
    s.kill(signal.SIGTERM)
    shutil.rmtree(os.path.join(s.dir, "bkv"))
    s.start()
    r = s.client()
    same_rows(r, model, "the RDB with an empty bloomkv directory")
    # Another node's directory: never served, the file's rows instead.
    other = Server("persist-other", save=True)
    ro = other.client()
    ro.execute_command("BKV.SET", "other-node-row", "x")
    other.kill(signal.SIGTERM)
    s.kill(signal.SIGTERM)
    shutil.rmtree(os.path.join(s.dir, "bkv"))
    shutil.copytree(os.path.join(other.dir, "bkv"), os.path.join(s.dir, "bkv"))
    s.start()
    r = s.client()
    same_rows(r, model, "another node's bloomkv directory")
    # FLUSHALL among writes of the same event-loop pass (one pipeline):
    # the writes before it are gone, the writes after it kept.
    p = r.pipeline(transaction=False)
    for i in range(200):
        p.execute_command("BKV.SET", "before%03d" % i, "x")
    p.flushall()
    for i in range(200):
        p.execute_command("BKV.SET", "after%03d" % i, "y")
    p.execute()
    model.clear()
    model.update({"after%03d" % i: "y" for i in range(200)})
    same_rows(r, model, "FLUSHALL between writes of one pipeline")
    s.restart(signal.SIGKILL)
    r = s.client()
    same_rows(r, model, "FLUSHALL between writes, then kill -9")
    # FLUSHALL then DEBUG RELOAD: nothing comes back.
    r.flushall()
    model.clear()
    r.execute_command("DEBUG", "RELOAD")
    same_rows(r, model, "FLUSHALL then DEBUG RELOAD")
    # FLUSHALL while another client writes: every write sent after FLUSHALL
    # returned is there, and nothing written before it came back.
    stop = threading.Event()
    sent_after = []
    flushed = threading.Event()

    def keep_writing():
        w = s.client()
        i = 0
        while not stop.is_set():
            after = flushed.is_set()
            w.execute_command("BKV.SET", "busy%06d" % i, "z")
            if after:
                sent_after.append("busy%06d" % i)
            i += 1

    t = threading.Thread(target=keep_writing)
    t.start()
    time.sleep(0.3)
    r.flushall()
    flushed.set()
    time.sleep(0.3)
    stop.set()
    t.join()
    rows = all_rows(r)
    check(sent_after and all(k in rows for k in sent_after), "every write sent after FLUSHALL is kept")
    # What survives is every write from some point on: the ones FLUSHALL
    # came after are gone, none of them left behind.
    present = sorted(int(k[4:]) for k in rows)
    check(present and present == list(range(present[0], present[-1] + 1)) and present[0] <= int(sent_after[0][4:]),
          "FLUSHALL under writes keeps exactly the writes after it")
    r.flushall()
    s.kill(signal.SIGTERM)

    # The AOF (with its RDB preamble): DEBUG LOADAOF, and a restart after
    # writes that came after the rewrite.
    a = Server("persist-aof", extra=["--appendonly", "yes", "--appendfsync", "always"], module_args=["sync", "yes"])
    r = a.client()
    model = {}
    write_rows(r, model, rnd, 1000, "a")
    r.bgrewriteaof()
    deadline = time.time() + 30
    while r.info("persistence")["aof_rewrite_in_progress"] and time.time() < deadline:
        time.sleep(0.05)
    write_rows(r, model, rnd, 500, "b")
    r.execute_command("DEBUG", "LOADAOF")
    same_rows(r, model, "DEBUG LOADAOF")
    write_rows(r, model, rnd, 300, "c")
    a.restart(signal.SIGKILL)
    r = a.client()
    same_rows(r, model, "the AOF after kill -9")
    a.kill(signal.SIGTERM)
    shutil.rmtree(os.path.join(a.dir, "bkv"))
    a.start()
    same_rows(a.client(), model, "the AOF with an empty bloomkv directory")
    a.kill(signal.SIGTERM)


def cluster_find(nodes, value):
    found = set()
    for s in cluster_masters([n for n in nodes if n.proc]):
        flat = s.client().execute_command("BKV.FINDVALUE", value)
        found.update(flat[i].decode() for i in range(0, len(flat), 2))
    return found


def wait_cluster_ok(servers, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if all(b"cluster_state:ok" in s.client().execute_command("CLUSTER", "INFO") for s in servers if s.proc):
                return
        except redis.exceptions.RedisError:
            pass
        time.sleep(0.2)
    raise RuntimeError("cluster not ok after %ds" % timeout)


def main():
    try:
        if "single" in PARTS:
            single_node()
            filter_chunks_and_limits()
            aof_node()
            persistence()
            eviction()
            hostile_clients()
            pipelined_writes_replicated()
            diskless_replica()
            failed_commit_with_a_replica()
            failed_save()
        if "cluster" in PARTS:
            cluster()
        print("redis_test: %d checks passed" % CHECKS)
        return 0
    except Exception:
        import traceback
        traceback.print_exc()
        for s in SERVERS:
            for log in ("server.log", "stderr"):
                print("--- tail of %s/%s" % (s.dir, log))
                try:
                    print("".join(open(os.path.join(s.dir, log)).readlines()[-15:]))
                except OSError:
                    pass
        return 1
    finally:
        stop_all()
        shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
