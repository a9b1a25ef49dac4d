"""One redis-server with the module loaded, for the Redis benchmark
scripts: on a free localhost port, in a directory of its own, stopped by
its PID and its directory removed on the way out.

    with redis_local.server(MODULE) as r: ...   # r: a redis-py client"""
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time

import redis


@contextlib.contextmanager
def server(module):
    work = tempfile.mkdtemp(prefix="bkv-bench-redis-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--dir", work, "--loadmodule", os.path.abspath(module), "dir", os.path.join(work, "bkv")],
                            stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(port=port)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            raise RuntimeError("redis-server with %s did not start (a module that fails to load?)" % module)
        yield client
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)
