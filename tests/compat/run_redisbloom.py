#!/usr/bin/env python3
"""Runs RedisBloom's own flow tests, unmodified, against bloomkv's Redis
module through the RLTest stand-in in tests/compat/rltest (their tests are
not part of this repository: fetch RedisBloom and point at tests/flow).

    run_redisbloom.py MODULE.so REDISBLOOM/tests/flow [test_file.py ...] [-v]

Prints each test's outcome (-v: with the first failed assertions) and a
count per file. One redis-server on a free localhost port, flushed before
each test, stopped by its PID at the end."""
import importlib
import inspect
import os
import shutil
import socket
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    verbose = "-v" in sys.argv
    module, flow = os.path.abspath(args[0]), os.path.abspath(args[1])
    files = args[2:] or ["test_overall.py", "test_cuckoo.py", "test_docs_help.py"]
    sys.path[:0] = [os.path.join(HERE, "rltest"), flow]
    import RLTest

    created = []
    real_init = RLTest.Env.__init__

    def tracking_init(self, *a, **kw):
        real_init(self, *a, **kw)
        created.append(self)

    RLTest.Env.__init__ = tracking_init
    work = tempfile.mkdtemp(prefix="bkv-redisbloom-")
    RLTest.SERVER = RLTest.Server(module, work, free_port())
    total = {"pass": 0, "fail": 0, "skip": 0}
    try:
        for name in files:
            mod = importlib.import_module(name[:-3])
            cases = []
            for obj_name, obj in vars(mod).items():
                if obj_name.startswith("test") and inspect.isfunction(obj) and obj.__module__ == mod.__name__:
                    cases.append((obj_name, None, obj))
                elif inspect.isclass(obj) and obj.__module__ == mod.__name__ and obj_name.lower().startswith("test"):
                    for m_name, m in vars(obj).items():
                        if m_name.startswith("test") and inspect.isfunction(m):
                            cases.append(("%s.%s" % (obj_name, m_name), obj, m))
            counts = {"pass": 0, "fail": 0, "skip": 0}
            for case_name, cls, fn in cases:
                created.clear()
                outcome, detail = "pass", []
                try:
                    RLTest.redis.Redis(port=RLTest.SERVER.port).flushall()
                    if cls is None:
                        params = inspect.signature(fn).parameters
                        fn(RLTest.Env()) if params else fn()
                    else:
                        fn(cls())
                except RLTest.SkipTest:
                    outcome = "skip"
                except Exception:
                    outcome, detail = "fail", [traceback.format_exc().strip().splitlines()[-1]]
                failures = [f for env in created for f in env.failures]
                if failures and outcome == "pass":
                    outcome, detail = "fail", failures
                counts[outcome] += 1
                print("%-4s %s:%s" % (outcome, name, case_name))
                if verbose and detail:
                    for d in detail[:6]:
                        print("       " + str(d)[:300])
            print("== %s: %d passed, %d failed, %d skipped" % (name, counts["pass"], counts["fail"], counts["skip"]))
            for k in total:
                total[k] += counts[k]
    finally:
        RLTest.stop_servers()
        shutil.rmtree(work, ignore_errors=True)
    print("== all: %d passed, %d failed, %d skipped" % (total["pass"], total["fail"], total["skip"]))


if __name__ == "__main__":
    main()
