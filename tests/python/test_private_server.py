"""The local client's private nsbox serve (streams and live sandboxes)
leaves nothing behind: not at close(), and not when the Python process that
owns it is killed with SIGKILL (its watcher stops the server and removes
its directory). Checked from the host: /proc and the file system."""

from __future__ import annotations

import atexit
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import nsbox
from conftest import HERE, NSBOX_BIN, ROOTFS, host_processes_with, scaled, wait_until

BACKGROUND = "import subprocess, sys\nk = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{tag}'])\n"


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_close_stops_the_private_server() -> None:
    tag = f"nsbox-py-priv-{secrets.token_hex(6)}"
    c = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS)
    sb = c.sandbox()
    sb.run(BACKGROUND.format(tag=tag))
    private = c._private
    assert private is not None and os.path.isdir(private.directory)
    pid = private.pid
    assert wait_until(lambda: bool(host_processes_with(tag)), 5)
    c.close()
    sb._closed = True
    assert gone(pid), "the private server still runs"
    assert not os.path.exists(private.directory)
    assert wait_until(lambda: not host_processes_with(tag), 5), "its sandbox's process remains"


def test_a_killed_owner_leaves_nothing(tmp_path: Path) -> None:
    tag = f"nsbox-py-orphan-{secrets.token_hex(6)}"
    code = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(HERE.parent.parent / 'src' / 'python')!r})\n"
        "import nsbox\n"
        f"c = nsbox.Client(nsbox={NSBOX_BIN!r}, rootfs={ROOTFS!r})\n"
        "sb = c.sandbox()\n"
        f"sb.run({BACKGROUND.format(tag=tag)!r})\n"
        "print(c._private.directory, c._private.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert owner.stdout is not None
    line = owner.stdout.readline().decode().split()
    assert len(line) == 2, "the owner did not open its sandbox"
    directory, pid = line[0], int(line[1])
    assert wait_until(lambda: bool(host_processes_with(tag)), 5)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert wait_until(lambda: gone(pid), 30), "the private server outlived its owner"
    assert wait_until(lambda: not os.path.exists(directory), 10), "the private directory remains"
    assert wait_until(lambda: not host_processes_with(tag), 10), "the sandbox's process remains"
    assert scaled(1) >= 1


def test_a_forked_child_leaves_the_parents_server_alone() -> None:
    c = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS)
    try:
        with c.sandbox() as sb:
            private = c._private
            assert private is not None
            child = os.fork()
            if child == 0:  # what the child's exit would run, then out
                try:
                    sb.close()
                    c.close()
                    atexit._run_exitfuncs()
                finally:
                    os._exit(0)
            _, status = os.waitpid(child, 0)
            assert os.WIFEXITED(status)
            assert os.path.isdir(private.directory), "the child removed the parent's directory"
            assert not gone(private.pid), "the child stopped the parent's server"
            assert sb.run("1 + 1").value == "2"
    finally:
        c.close()


def test_a_killed_watcher_takes_the_server_with_it() -> None:
    c = nsbox.Client(nsbox=NSBOX_BIN, rootfs=ROOTFS)
    try:
        list(c.run_stream("print(1)"))
        private = c._private
        assert private is not None
        pid = private.pid
        os.kill(private._watcher.pid, signal.SIGKILL)
        assert wait_until(lambda: gone(pid), 30), "the server outlived its watcher"
        # The client notices and starts another.
        events = list(c.run_stream("print(2)"))
        assert events[-1].stdout == "2\n"  # type: ignore[union-attr]
        assert c._private is not private
    finally:
        c.close()
