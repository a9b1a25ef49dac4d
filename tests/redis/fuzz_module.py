#!/usr/bin/python3
"""The Redis module under hostile input, for a given time, with fixed seeds:

    /usr/bin/python3 tests/redis/fuzz_module.py MODULE.so SECONDS [SEED]

Half the time goes to commands: every BF.*, CF.* and BKV.* command the
module registers, mostly well formed (small capacities, so filters grow
and fill) with one argument in three replaced by a hostile token, the rest
random words and numbers, and LOADCHUNK given chunks that SCANDUMP
answered, some with a bit changed; a DEBUG RELOAD every 500 commands and a
DEBUG LOADAOF every 5,000, after which DEBUG DIGEST must be what it was. The other half
goes to RESTORE payloads of every module type, cut, spliced or with bytes
changed, their checksum made good so the module's loaders see them: each is
taken or refused, and the rows of every slot no payload was restored over
must stay as written.

Fails (exit 1) when the server stops answering or its log shows a crash or
a sanitizer report. For a sanitized module, BKV_REDIS_PRELOAD names the
sanitizer's runtime, preloaded into the server (redis-server itself is not
instrumented), as for redis_test; a forged length makes Redis's own loader
ask for huge allocations, so run with ASAN_OPTIONS=allocator_may_return_null=1.
Prints
"reliability: redis_fuzz_commands=N" and "redis_fuzz_payloads=N"."""
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import redis

from redis_forms import BUILD_TYPES, dump_payload, keyslot

HOSTILE = ["0", "-1", "1", "7", "255", "256", "65535", "65536", "4294967296", "9223372036854775807",
           "-9223372036854775808", "18446744073709551616", "0.5", "1e-300", "1e308", "nan", "inf", "-0.0", "0x10",
           " 1", "01", "", "*", "[", "\\", "CAPACITY", "ERROR", "EXPANSION", "NONSCALING", "ITEMS", "NOCREATE",
           "BUCKETSIZE", "MAXITERATIONS", "COUNT", "MATCH", "LIMIT", "x" * 70000, b"\x00\xff\x80", b"\xc0" * 40]


class Fuzz:
    def __init__(self, r, rnd):
        self.r, self.rnd = r, rnd
        # Keys of each family's own, so every type keeps existing, and keys
        # any command may take (a wrong type, a long name, a hash tag).
        self.family = {p: ["%s%d" % (p, i) for i in range(3)] for p in ("bf", "cf", "bkv.filter")}
        self.keys = ["k0", "{a}x", "k" * 300]
        self.chunks = []  # (command, iterator, data) that a SCANDUMP answered

    def key_for(self, cmd):
        own = self.family.get(cmd.lower().rsplit(".", 1)[0])
        return self.rnd.choice(own if own and self.rnd.random() < 0.8 else self.keys + sum(self.family.values(), []))

    def items(self, n=None):
        return ["i%d" % self.rnd.randrange(3000) for _ in range(n or self.rnd.choice([1, 2, 5, 20, 100]))]

    def small(self):
        return str(self.rnd.choice([0, 1, 2, 3, 8, 100, 1000, self.rnd.randrange(1, 5000)]))

    def rate(self):
        return self.rnd.choice(["0.5", "0.1", "0.01", "0.0001", "0.9"])

    def options(self, *names):
        out = []
        for name, value in names:
            if self.rnd.random() < 0.4:
                out += [name] + ([value()] if value else [])
        return out

    def well_formed(self, cmd, key):
        """A command as its documentation spells it, or None."""
        c = cmd.upper()
        if c == "BF.RESERVE":
            return [c, key, self.rate(), self.small()] + self.options(("EXPANSION", self.small), ("NONSCALING", None))
        if c == "BF.INSERT":
            return [c, key] + self.options(("CAPACITY", self.small), ("ERROR", self.rate), ("EXPANSION", self.small),
                                           ("NOCREATE", None), ("NONSCALING", None)) + ["ITEMS"] + self.items()
        if c == "CF.RESERVE":
            return [c, key, self.small()] + self.options(("BUCKETSIZE", self.small), ("MAXITERATIONS", self.small),
                                                         ("EXPANSION", self.small))
        if c in ("CF.INSERT", "CF.INSERTNX"):
            return [c, key] + self.options(("CAPACITY", self.small), ("NOCREATE", None)) + ["ITEMS"] + self.items()
        if c in ("BF.ADD", "BF.EXISTS", "CF.ADD", "CF.ADDNX", "CF.EXISTS", "CF.DEL", "CF.COUNT", "BKV.FILTER.EXISTS"):
            return [c, key] + self.items(1)
        if c in ("BF.MADD", "BF.MEXISTS", "CF.MEXISTS", "BKV.FILTER.MEXISTS"):
            return [c, key] + self.items()
        if c == "BKV.FILTER.BUILD":
            return [c, key, self.rnd.choice(BUILD_TYPES), self.rate()] + self.items()
        if c in ("BF.SCANDUMP", "CF.SCANDUMP"):
            return [c, key, self.rnd.choice(["0", "1", self.small()])]
        if c == "BKV.SET":
            return [c, key, "v%d" % self.rnd.randrange(5)]
        if c == "BKV.MSET":
            return [c] + [x for _ in range(self.rnd.randrange(1, 4)) for x in (self.rnd.choice(self.keys), "v1")]
        if c == "BKV.SCAN":
            return [c, self.rnd.choice(["0", self.small()])] + self.options(
                ("MATCH", lambda: self.rnd.choice(["*", "k*", "[a-", "\\"])), ("COUNT", self.small))
        if c == "BKV.FINDVALUE":
            return [c, "v%d" % self.rnd.randrange(5)] + self.options(("LIMIT", self.small))
        return None

    def command(self, cmds):
        cmd = self.rnd.choice(cmds)
        key = self.key_for(cmd)
        if self.rnd.random() < 0.02:
            self.r.delete(key)  # filter keys come and go
            return
        args = self.well_formed(cmd, key) if self.rnd.random() < 0.7 else None
        if cmd.upper().endswith(".LOADCHUNK") and self.chunks and self.rnd.random() < 0.7:
            # A chunk another filter dumped, whole or with a bit changed.
            kind, it, data = self.rnd.choice(self.chunks)
            if data and self.rnd.random() < 0.5:
                i = self.rnd.randrange(len(data))
                data = data[:i] + bytes([data[i] ^ (1 << self.rnd.randrange(8))]) + data[i + 1:]
            args = [kind.replace("SCANDUMP", "LOADCHUNK"), key, it, data]
        if args is None:
            args = [cmd, key] + [self.rnd.choice(HOSTILE) for _ in range(self.rnd.choice([0, 1, 2, 3, 5, 8]))]
        elif self.rnd.random() < 0.3 and len(args) > 1:
            args[self.rnd.randrange(1, len(args))] = self.rnd.choice(HOSTILE)
        try:
            reply = self.r.execute_command(*args)
        except redis.exceptions.ResponseError:
            return
        if args[0].upper().endswith("SCANDUMP") and isinstance(reply, list) and len(reply) == 2 and reply[0]:
            self.chunks = (self.chunks + [(args[0].upper(), reply[0], reply[1])])[-40:]

    def reload_keeps_data(self, aof):
        """DEBUG RELOAD (an RDB saved and loaded in the server), or DEBUG
        LOADAOF (every command since the start replayed; the server never
        rewrites its AOF on its own here). Neither forks: GCC
        12's ASan does not guard fork against another thread inside its
        allocator (LLVM added that in 16), so a child forked while a
        compaction allocates can hang there, outside the module's code."""
        r = self.r
        before = r.execute_command("DEBUG", "DIGEST")
        how = "DEBUG LOADAOF" if aof else "DEBUG RELOAD"
        r.execute_command(*how.split())
        after = r.execute_command("DEBUG", "DIGEST")
        if before != after:
            raise AssertionError("%s changed the data: digest %s, then %s" % (how, before, after))

    def forge(self, payload, sources):
        body = bytearray(payload[:-8])
        for _ in range(self.rnd.choice([1, 1, 2, 4])):
            if len(body) < 4:  # the type byte and the RDB version are all that is left
                break
            op, at = self.rnd.random(), self.rnd.randrange(1, len(body) - 2)
            if op < 0.5:
                body[at] = self.rnd.choice([body[at] ^ (1 << self.rnd.randrange(8)), 0, 0xFF, 0x80, 0xC0])
            elif op < 0.65:
                del body[at:at + self.rnd.randrange(1, 9)]
            elif op < 0.8:
                body[at:at] = bytes(self.rnd.randrange(256) for _ in range(self.rnd.randrange(1, 9)))
            elif op < 0.9:
                body = body[:at] + body[-2:]
            else:
                other = sources[self.rnd.choice(list(sources))][:-8]
                body = body[:at] + other[self.rnd.randrange(1, max(2, len(other) - 2)):]
        return dump_payload(bytes(body))


def main():
    module, seconds = os.path.abspath(sys.argv[1]), float(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    work = tempfile.mkdtemp(prefix="bkv-redis-fuzz-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = os.path.join(work, "server.log")
    env = dict(os.environ)
    if os.environ.get("BKV_REDIS_PRELOAD"):
        env["LD_PRELOAD"] = os.environ["BKV_REDIS_PRELOAD"]
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", work,
                               "--save", "", "--appendonly", "yes", "--auto-aof-rewrite-percentage", "0",
                               "--logfile", log,
                               "--enable-debug-command", "local", "--loadmodule", module, "dir",
                               os.path.join(work, "bkv")], stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(work, "stderr"), "w"), env=env)  # sanitizer reports
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=120)
    rnd = random.Random(seed)
    commands = payloads = 0
    failure = None
    try:
        for _ in range(200):
            try:
                r.ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        fuzz = Fuzz(r, rnd)
        names = subprocess.run(["redis-cli", "-p", str(port), "COMMAND", "LIST"], capture_output=True,
                               text=True).stdout.split()
        cmds = sorted(c for c in names if c.lower().startswith(("bf.", "cf.", "bkv.")))
        end = time.time() + seconds / 2
        while time.time() < end:
            fuzz.command(cmds)
            commands += 1
            if commands % 500 == 0:
                fuzz.reload_keeps_data(aof=commands % 5000 == 0)

        # Payloads: one key of every module type, and rows in many slots.
        r.flushall()
        r.execute_command("BF.RESERVE", "bf", 0.01, 100, "EXPANSION", 2)
        r.execute_command("BF.MADD", "bf", *["i%d" % i for i in range(500)])
        r.execute_command("CF.RESERVE", "cf", 100, "EXPANSION", 1)
        r.execute_command("CF.INSERT", "cf", "ITEMS", *["i%d" % i for i in range(300)])
        for t in BUILD_TYPES:
            r.execute_command("BKV.FILTER.BUILD", "st-" + t, t, 0.01, *["i%d" % i for i in range(200)])
        rows = {}
        for i in range(3000):
            rows["row%d" % i] = "val%d" % rnd.randrange(100)
            r.execute_command("BKV.SET", "row%d" % i, rows["row%d" % i])
        slot_keys = sorted(k.decode() for k in r.keys("bkv:slot:*"))[:20]
        sources = {k: r.dump(k) for k in ["bf", "cf"] + ["st-" + t for t in BUILD_TYPES] + slot_keys}
        restored = {keyslot(k) for k in slot_keys}
        kept = {k: v for k, v in rows.items() if keyslot(k) not in restored}
        end = time.time() + seconds / 2
        while time.time() < end:
            source = rnd.choice(list(sources))
            target = source if source.startswith("bkv:slot:") else "forged"
            try:
                r.restore(target, 0, fuzz.forge(sources[source], sources), replace=True)
                if target == "forged":
                    for cmd in ("BF.EXISTS", "CF.EXISTS", "BKV.FILTER.EXISTS", "BF.ADD", "CF.ADD", "CF.DEL"):
                        try:
                            r.execute_command(cmd, target, "i1")
                        except redis.exceptions.ResponseError:
                            pass
            except redis.exceptions.ResponseError:
                pass
            payloads += 1
            if payloads % 500 == 0:
                sample = rnd.sample(sorted(kept), 100)
                got = r.execute_command("BKV.MGET", *sample)
                changed = [k for k, v in zip(sample, got) if v != kept[k].encode()]
                if changed:
                    raise AssertionError("rows of slots no payload was restored over changed: %s" % changed[:5])
        r.ping()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, AssertionError) as e:
        failure = "%s (after %d commands, %d payloads)" % (e, commands, payloads)
    finally:
        server.terminate()
        server.wait()
        text = ""
        for name in (log, os.path.join(work, "stderr")):
            with open(name, errors="replace") as f:
                text += f.read()
        shutil.rmtree(work, ignore_errors=True)
    for sign in ("=== REDIS BUG REPORT", "ERROR: AddressSanitizer", "runtime error:"):
        if sign in text:
            failure = failure or "the server log shows %r" % sign
            print(text[max(0, text.index(sign) - 2000):][:6000])
    print("reliability: redis_fuzz_commands=%d" % commands)
    print("reliability: redis_fuzz_payloads=%d" % payloads)
    if failure:
        print("fuzz_module: " + failure)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
