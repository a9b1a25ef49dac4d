#!/usr/bin/env python3
"""`bloomkv shell` driven as a person drives it, through a pseudo-terminal
(prompt, commands, a completed command name, history kept in HOME), and as
a script drives it, from standard input. Usage: shell_test.py BLOOMKV"""
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import time

tool = os.path.abspath(sys.argv[1])
work = tempfile.mkdtemp(prefix="bkv-shell-")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def read_until(fd, text, timeout=10):
    out = b""
    deadline = time.time() + timeout
    while text.encode() not in out and time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


# Line editing, completion and history come from libedit when the tool was
# built with it (ldd shows it); without, the terminal checks are skipped.
editing = b"libedit" in subprocess.run(["ldd", tool], capture_output=True).stdout

try:
    db = os.path.join(work, "db")
    env = dict(os.environ, HOME=work, TERM="xterm")
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(tool, [tool, "shell", db], env)
    check("bloomkv>" in read_until(fd, "bloomkv> "), "a prompt on a terminal")
    os.write(fd, b"put 'a key' \"a value\"\r")
    read_until(fd, "bloomkv> ")
    os.write(fd, b"get 'a key'\r")
    check("a value" in read_until(fd, "bloomkv> "), "get answers at the prompt")
    # Tab completes a command's name.
    if editing:
        os.write(fd, b"sca\t --keys-only\r")
        check("a key" in read_until(fd, "bloomkv> "), "a completed command runs")
    os.write(fd, b"quit\r")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "quit leaves with status 0")
    hist = os.path.join(work, ".bloomkv_history")
    # (libedit writes a space as \040)
    check(not editing or os.path.exists(hist) and "get 'a key'" in open(hist, errors="replace").read().replace("\\040", " "),
          "the history is kept in HOME")

    # A script: commands from stdin, the last one's status the shell's.
    run = subprocess.run([tool, "shell", db], input=b"get 'a key'\ndelete 'a key'\nget 'a key'\n",
                         capture_output=True, env=env)
    check(run.stdout == b"a value\n", "stdin commands answer in order: %r" % run.stdout)
    check(run.returncode == 1, "the last command's status (an absent key: 1), got %d" % run.returncode)
    run = subprocess.run([tool, "shell", db], input=b"frobnicate\n", capture_output=True, env=env)
    check(run.returncode == 2 and b"no command" in run.stderr, "an unknown command: status 2 and why")
    run = subprocess.run([tool, "shell", db], input=b"put 'unclosed v\n", capture_output=True, env=env)
    check(run.returncode == 2 and b"quote" in run.stderr, "an unclosed quote is refused")
finally:
    shutil.rmtree(work, ignore_errors=True)
print("shell_test: %d failed" % len(failures))
sys.exit(1 if failures else 0)
