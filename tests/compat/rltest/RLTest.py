"""A stand-in for the parts of RLTest (Redis Labs' test harness) that
RedisBloom's flow tests use, so those tests run unmodified against a
redis-server with bloomkv's module loaded (tests/compat/run_redisbloom.py).
Assertions record a failure and let the test go on, as RLTest's do."""
import os
import socket
import subprocess
import time

import redis

Defaults = type("Defaults", (), {"decode_responses": False})


class SkipTest(Exception):
    pass


class Server:
    """One redis-server with the module, on a port of its own, stopped by
    its own PID."""

    def __init__(self, module, workdir, port, args=()):
        self.module, self.workdir, self.port, self.args = module, workdir, port, list(args)
        self.proc = None
        self.start()

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.workdir,
               "--save", "", "--appendonly", "no", "--enable-debug-command", "yes",
               "--loadmodule", self.module, "dir", os.path.join(self.workdir, "bkv")] + self.args
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                redis.Redis(port=self.port).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


SERVER = None  # set by the runner
REPLICA = None  # started for the first Env(useSlaves=True), a replica of SERVER


def stop_servers():
    for server in (REPLICA, SERVER):
        if server:
            server.stop()


class _Expect:
    def __init__(self, env, args):
        self.env, self.res, self.err = env, None, None
        try:
            self.res = env.cmd(*args)
        except redis.ResponseError as e:
            self.err = e

    def error(self):
        if self.err is None:
            self.env._fail("expected an error, got %r" % (self.res,))
        self.res = str(self.err) if self.err else ""
        return self

    def noError(self):
        if self.err is not None:
            self.env._fail("unexpected error %s" % self.err)
        return self

    def raiseError(self):
        return self.error()

    def contains(self, part):
        if self.res is None or part not in self.res:
            self.env._fail("%r does not contain %r" % (self.res, part))
        return self

    def equal(self, want):
        if self.err is not None or self.res != want:
            self.env._fail("%r != %r" % (self.err or self.res, want))
        return self

    def ok(self):
        return self.equal("OK" if self.env.decode else b"OK")

    def apply(self, fn):
        self.res = fn(self.res)
        return self


class _RaisesError:
    def __init__(self, env):
        self.env = env

    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        if typ is None:
            self.env._fail("expected a response error")
            return False
        return issubclass(typ, redis.ResponseError)


class Env:
    def __init__(self, decodeResponses=False, useSlaves=False, **kwargs):
        global REPLICA
        self.decode = decodeResponses
        self.failures = []
        self.conn = self._connect(SERVER.port)
        if useSlaves and not REPLICA:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            REPLICA = Server(SERVER.module, os.path.join(SERVER.workdir, "replica"), port,
                             ["--replicaof", "127.0.0.1", str(SERVER.port)])
        self.replica = REPLICA if useSlaves else None

    def _connect(self, port):
        conn = redis.Redis(port=port, decode_responses=self.decode)
        # redis-py parses COMMAND's reply as COMMAND INFO's, which breaks
        # COMMAND DOCS: RLTest hands that reply over as it comes.
        conn.response_callbacks.pop("COMMAND", None)
        return conn

    # -- commands --
    def cmd(self, *args):
        if len(args) == 1 and isinstance(args[0], str) and " " in args[0]:
            args = tuple(args[0].split())
        return self.conn.execute_command(*args)

    execute_command = cmd

    def expect(self, *args):
        if len(args) == 1 and isinstance(args[0], str) and " " in args[0]:
            args = tuple(args[0].split())
        return _Expect(self, args)

    def getConnection(self):
        return self.conn

    def isCluster(self):
        return False

    def getSlaveConnection(self):
        if not self.replica:
            raise SkipTest("the test asked for no replica")
        return self._connect(self.replica.port)

    def skipOnSlave(self):
        pass

    def skipOnCluster(self):
        pass

    def skip(self):
        raise SkipTest()

    def skipOnVersionSmaller(self, ver):
        have = tuple(int(x) for x in self.cmd("INFO", "server")["redis_version"].split("."))
        want = tuple(int(x) for x in str(ver).split("."))
        if have < want:
            raise SkipTest("needs Redis %s" % ver)

    def debugPrint(self, *args, **kwargs):
        pass

    def dumpAndReload(self, restart=False):
        self.cmd("DEBUG", "RELOAD")

    def restartAndReload(self):
        self.cmd("SAVE")
        SERVER.stop()
        SERVER.start()
        self.conn = self._connect()

    def retry_with_rdb_reload(self):
        yield 1
        self.dumpAndReload()
        yield 2

    def flush(self):
        self.cmd("FLUSHALL")

    # -- assertions: recorded, the test goes on --
    def _fail(self, what):
        self.failures.append(what)

    def assertEqual(self, a, b, *rest, **kw):
        if a != b:
            self._fail("%r != %r" % (a, b))

    def assertNotEqual(self, a, b, *rest, **kw):
        if a == b:
            self._fail("%r == %r" % (a, b))

    def assertOk(self, x, *rest, **kw):
        if x not in ("OK", b"OK", True):
            self._fail("%r is not OK" % (x,))

    def assertTrue(self, x, *rest, **kw):
        if not x:
            self._fail("%r is not true" % (x,))

    def assertFalse(self, x, *rest, **kw):
        if x:
            self._fail("%r is not false" % (x,))

    def assertGreater(self, a, b, *rest, **kw):
        if not a > b:
            self._fail("%r <= %r" % (a, b))

    def assertGreaterEqual(self, a, b, *rest, **kw):
        if not a >= b:
            self._fail("%r < %r" % (a, b))

    def assertLess(self, a, b, *rest, **kw):
        if not a < b:
            self._fail("%r >= %r" % (a, b))

    def assertLessEqual(self, a, b, *rest, **kw):
        if not a <= b:
            self._fail("%r > %r" % (a, b))

    def assertAlmostEqual(self, a, b, delta, *rest, **kw):
        if abs(a - b) > delta:
            self._fail("%r not within %r of %r" % (a, delta, b))

    def assertContains(self, part, whole, *rest, **kw):
        if part not in whole:
            self._fail("%r not in %r" % (part, whole))

    def assertResponseError(self, *rest, **kw):
        return _RaisesError(self)

    def assertRaises(self, exc, fn, *args, **kwargs):
        try:
            fn(*args, **kwargs)
        except exc:
            return
        except Exception as e:  # another error than the one expected
            self._fail("raised %r instead of %s" % (e, exc.__name__))
            return
        self._fail("did not raise %s" % exc.__name__)
