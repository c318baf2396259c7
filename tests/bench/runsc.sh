#!/usr/bin/env bash
# runtime runsc benchmark (called by tests/bench/run.sh; make bench): run
# `print(sum(range(10)))` BENCH_N times (default 30) through
#   nsbox-runsc  $NSBOX_BIN run --rootfs ROOTFS --runtime runsc
#   raw-runsc    runsc --rootless --network=none --ignore-cgroups --root STATE
#                run --bundle BUNDLE ID, on the very bundle nsbox writes
# interleaved, code on stdin, timed by host python3 with a monotonic clock.
# The bundle is copied from a live nsbox run (its work dir is private and
# removed afterwards), so both run the same config.json, helper and filter;
# raw runsc runs as the invoking user without nsbox's init, namespaces and
# cgroups around it. Prints median, p90 and min of each and the ratios of
# the medians (target: nsbox-runsc <= 1.05 x raw-runsc) and of the minimums.
#
# Environment: NSBOX_BUILD (default build), NSBOX_BIN, NSBOX_TEST_ROOTFS,
# BENCH_N, NSBOX_RUNSC (the runsc binary; default: runsc in PATH).
# Exits 0 (with a note) when runsc is not installed, 1 when a run failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
build="${NSBOX_BUILD:-build}"
nsbox="${NSBOX_BIN:-$build/nsbox}"
n="${BENCH_N:-30}"
runsc="${NSBOX_RUNSC:-$(command -v runsc || true)}"

if [ -z "$runsc" ] || [ ! -x "$runsc" ]; then
	echo "bench runsc: skipped: runsc not installed (apt-get install runsc)"
	exit 0
fi
case "$n" in
'' | *[!0-9]* | 0)
	echo "bench runsc: BENCH_N must be a positive integer, not '$n'" >&2
	exit 1
	;;
esac
rootfs="${NSBOX_TEST_ROOTFS:-$("$here/../fixtures/rootfs.sh")}"
if [ -e "$nsbox" ]; then
	nsbox="$(cd "$(dirname "$nsbox")" && pwd -P)/$(basename "$nsbox")"
fi

exec python3 - "$nsbox" "$rootfs" "$n" "$runsc" <<'PY'
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

nsbox, rootfs, n, runsc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
CODE = b"print(sum(range(10)))\n"
EXPECT = b"45\n"
TIMEOUT = 60.0
# Where nsbox puts its work dir (TMPDIR, else /dev/shm): the raw runs keep
# their copy of the bundle and runsc's state on the same file system.
work_base = os.environ.get("TMPDIR") or ("/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK)
                                         else "/tmp")
work = tempfile.mkdtemp(prefix="nsbox-bench-runsc-", dir=work_base)


def copy_bundle():
    """The bundle of a live nsbox run, made self-contained in `work`."""
    p = subprocess.Popen([nsbox, "run", "--rootfs", rootfs, "--runtime", "runsc",
                          "--timeout", "30s"], stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    p.stdin.write(b"import time\ntime.sleep(3)\n")
    p.stdin.close()
    pattern = f"{work_base}/nsbox-runsc-{p.pid}-*/bundle/config.json"
    deadline = time.monotonic() + 20
    found = []
    while not found and time.monotonic() < deadline and p.poll() is None:
        found = glob.glob(pattern)
        time.sleep(0.01)
    if not found:
        p.kill()
        err = p.stderr.read().decode(errors="replace")
        sys.exit(f"bench runsc: no nsbox runsc bundle seen ({pattern}); nsbox said: {err}")
    time.sleep(0.3)  # the bundle is complete before runsc starts; be safe
    src = os.path.dirname(found[0])
    dst = os.path.join(work, "bundle")
    shutil.copytree(src, dst, symlinks=True)
    with open(os.path.join(dst, "config.json")) as f:
        spec = json.load(f)
    workdir = os.path.dirname(src)
    for m in spec.get("mounts", []):
        if m.get("source", "").startswith(src):
            m["source"] = dst + m["source"][len(src):]
        elif m.get("source", "").startswith(workdir + "/"):
            # The helper's report file sits beside the bundle and goes
            # with the run: a fresh one, which raw runsc's uid 0 (not
            # nsbox's id mapping) may write.
            fresh = os.path.join(work, os.path.basename(m["source"]))
            with open(fresh, "wb"):
                pass
            os.chmod(fresh, 0o666)
            m["source"] = fresh
    p.wait()
    # The sleeping job's command was python3 -; so is the benchmark's.
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(spec, f)
    os.chmod(work, 0o755)
    return dst


bundle = copy_bundle()
counter = [0]


def raw_argv():
    counter[0] += 1
    return [runsc, "--rootless", "--network=none", "--ignore-cgroups",
            f"--root={work}/state", "run", "--bundle", bundle, f"bench-{os.getpid()}-{counter[0]}"]


def nsbox_argv():
    # --cpus = every CPU: the default 0.5 CPU quota would throttle gVisor
    # (a limit the caller asked for, not overhead of nsbox); raw runsc has
    # none. Memory and pids limits stay at their defaults.
    return [nsbox, "run", "--rootfs", rootfs, "--runtime", "runsc",
            "--cpus", str(os.cpu_count() or 1)]


def run_once(argv):
    t0 = time.monotonic()
    p = subprocess.run(argv, input=CODE, capture_output=True, timeout=TIMEOUT)
    ms = (time.monotonic() - t0) * 1000
    return ms, p.returncode, p.stdout, p.stderr


tools = {"nsbox-runsc": nsbox_argv, "raw-runsc": raw_argv}
times = {k: [] for k in tools}
failures = {k: [] for k in tools}
for name, argv in tools.items():  # warm-up: page cache, the self-check cache
    run_once(argv())
for i in range(n):
    for name, argv in tools.items():
        ms, rc, out, err = run_once(argv())
        if rc == 0 and out == EXPECT:
            times[name].append(ms)
        else:
            failures[name].append(f"exit {rc}, stdout {out[:60]!r}, stderr {err[:200]!r}")
shutil.rmtree(work, ignore_errors=True)


def p90(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.9 * len(xs)))]


print(f"runsc start-up ({n} runs each, interleaved; {runsc}; "
      f"{'root' if os.geteuid() == 0 else 'unprivileged'})")
failed = False
medians = {}
for name in tools:
    t = times[name]
    if t:
        medians[name] = statistics.median(t)
        print(f"{name:12} median {medians[name]:8.2f} ms   p90 {p90(t):8.2f} ms   "
              f"min {min(t):8.2f} ms   ({len(t)}/{n} ok)")
    if failures[name]:
        failed = True
        print(f"{name:12} {len(failures[name])} of {n} runs FAILED; first: {failures[name][0]}")
if len(medians) == 2:
    ratio = medians["nsbox-runsc"] / medians["raw-runsc"]
    print(f"ratio nsbox-runsc/raw-runsc (medians): {ratio:.3f} (target <= 1.05)")
    # Less sensitive to other load on the machine than the medians.
    print(f"ratio nsbox-runsc/raw-runsc (minimums): "
          f"{min(times['nsbox-runsc']) / min(times['raw-runsc']):.3f}")
sys.exit(1 if failed else 0)
PY
