#!/usr/bin/env bash
# Launcher memory under an output flood (make bench, after the start-up
# rows): `nsbox run` of a program writing 1 GiB to stdout in 1 MiB blocks
# (--timeout 60s --cpus 2 so it finishes), head-tail capture (the default)
# and head, against the same launcher running `print(1)` in the same run.
# The launcher's peak RSS is read from the host: VmHWM of its
# /proc/PID/status, sampled until it exits (the high-water mark, so the last
# sample is the peak), and wait4's ru_maxrss of the whole tree beside it.
# Target (issue 13): head-tail at most 16 MB.
#
# Environment: NSBOX_BIN (default build/nsbox), NSBOX_TEST_ROOTFS.
set -euo pipefail
nsbox="${NSBOX_BIN:-build/nsbox}"
rootfs="${NSBOX_TEST_ROOTFS:?NSBOX_TEST_ROOTFS must name the rootfs}"
python3 - "$nsbox" "$rootfs" <<'PY'
import os, subprocess, sys, time

nsbox, rootfs = sys.argv[1], sys.argv[2]
FLOOD = b"import sys\nb = b'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.buffer.write(b)\n"

def hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None

def run(code, extra):
    argv = [nsbox, "run", "--rootfs", rootfs, "--timeout", "60s", "--cpus", "2", "--json"] + extra
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    p.stdin.write(code)
    p.stdin.close()
    peak = None
    out = bytearray()
    os.set_blocking(p.stdout.fileno(), False)
    while True:
        h = hwm_kib(p.pid)
        if h is not None:
            peak = h if peak is None else max(peak, h)
        try:
            chunk = p.stdout.read()
            if chunk:
                out += chunk
        except BlockingIOError:
            pass
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.005)
    rest = p.stdout.read()
    if rest:
        out += rest
    return peak, ru.ru_maxrss, os.waitstatus_to_exitcode(status), bytes(out)

rows = [("print(1) (baseline)", b"print(1)\n", []),
        ("head-tail, 1 GB flood", FLOOD, []),
        ("head, 1 GB flood", FLOOD, ["--output-capture", "head"])]
failed = False
for label, code, extra in rows:
    peak, tree, rc, out = run(code, extra)
    if rc != 0:
        print(f"launcher peak RSS, {label}: FAILED (exit {rc}): {out[:200]!r}")
        failed = True
        continue
    own = f"{peak / 1024:.1f} MB" if peak else "n/a"
    print(f"launcher peak RSS, {label}: {own} (VmHWM of the launcher; "
          f"wait4 ru_maxrss of the tree {tree / 1024:.1f} MB)")
print("launcher peak RSS target under a 1 GB flood, head-tail: <= 16 MB")
sys.exit(1 if failed else 0)
PY
