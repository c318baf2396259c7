#!/usr/bin/env bash
# Start-up benchmark (make bench; NSBOX_BUILD set): run `print(sum(range(10)))`
# BENCH_N times (default 30) through
#   nsbox   $NSBOX_BUILD/nsbox run --rootfs ROOTFS
#   bwrap   bubblewrap with flags equivalent to nsbox's sandbox
#   chroot  plain `chroot ROOTFS python -` (root only: no isolation at all)
#   floor   $NSBOX_BUILD/tests/bench/floor ROOTFS: the same seven namespaces,
#           rootfs, /tmp, /proc and pivot_root, nothing else (no cgroups,
#           seccomp, capability drop, /dev or supervision): what the kernel
#           charges for the namespaces alone (tests/bench/floor.c)
# interleaved (nsbox bwrap chroot nsbox bwrap chroot ...) so drifts in machine
# load hit every tool alike, with the code always on python's stdin. Host
# python3 times each run with a monotonic clock. Prints median, p90 and min per
# tool, the ratios nsbox/chroot and nsbox/bwrap, and peak RSS from one extra
# run of each under /usr/bin/time -f %M (whole process tree, python included),
# plus nsbox's own. A tool that fails is
# reported with its exit status and stderr; the others still run. Exits 1 if a
# tool failed.
#
# Environment: NSBOX_BUILD (default build), NSBOX_BIN (default
# $NSBOX_BUILD/nsbox), NSBOX_TEST_ROOTFS (default tests/fixtures/rootfs.sh),
# BENCH_N, BENCH_TOOLS (default "nsbox bwrap chroot floor").
# Then tests/bench/capture.sh: the launcher's memory under an output flood;
# tests/bench/runsc.sh: the runtime runsc rows; then tests/bench/pool.c:
# the warm pool's rows; tests/bench/audit.c: an audit record's cost;
# tests/bench/egress.sh: the egress proxy's latency and throughput;
# tests/bench/python.py: the Python package's overhead; tests/bench/fleet.py:
# three nodes behind HAProxy against one; then
# tests/mcp/bench.mjs: an MCP tools/call round
# trip to nsbox mcp against a cold chroot python (needs node).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
build="${NSBOX_BUILD:-build}"
nsbox="${NSBOX_BIN:-$build/nsbox}"
n="${BENCH_N:-30}"
tools="${BENCH_TOOLS:-nsbox bwrap chroot floor}"

command -v python3 >/dev/null 2>&1 || {
	echo "bench: python3 is needed on the host for timing (make deps)" >&2
	exit 1
}
case "$n" in
'' | *[!0-9]* | 0)
	echo "bench: BENCH_N must be a positive integer, not '$n'" >&2
	exit 1
	;;
esac

rootfs="${NSBOX_TEST_ROOTFS:-$("$here/../fixtures/rootfs.sh")}"
if [ -e "$nsbox" ]; then
	nsbox="$(cd "$(dirname "$nsbox")" && pwd -P)/$(basename "$nsbox")"
fi

# Unpack time of one image, nsbox-image against umoci (tests/bench/unpack.sh).
NSBOX_BUILD="$build" NSBOX_TEST_ROOTFS="$rootfs" "$here/unpack.sh" ||
	echo "bench: the unpack benchmark failed (tests/bench/unpack.sh)"
echo

status=0
floor="$(cd "$build" && pwd -P)/tests/bench/floor"
python3 - "$nsbox" "$rootfs" "$n" "$tools" "$floor" <<'PY' || status=$?
import math
import os
import tempfile
import shutil
import statistics
import subprocess
import sys
import threading
import time

nsbox, rootfs, n, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
floor = sys.argv[5]
CODE = b"print(sum(range(10)))\n"
EXPECT = b"45\n"
TIMEOUT = 60.0
CLEAN_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
}
is_root = os.geteuid() == 0


def bwrap_argv():
    argv = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--ro-bind", rootfs, "/", "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev",
            "--uid", "65534", "--gid", "65534", "--hostname", "sandbox", "--chdir", "/tmp",
            "--clearenv"]
    for k, v in CLEAN_ENV.items():
        argv += ["--setenv", k, v]
    return argv + ["--cap-drop", "ALL", "python", "-"]


# name -> (argv, env) or a string saying why the tool is skipped
tools = {}
for name in wanted:
    if name == "nsbox":
        if os.access(nsbox, os.X_OK):
            # nsbox passes nothing from its environment into the sandbox, but
            # may need it itself (e.g. to find a delegated cgroup).
            tools[name] = ([nsbox, "run", "--rootfs", rootfs], dict(os.environ))
        else:
            tools[name] = f"not built: {nsbox} missing or not executable"
    elif name == "bwrap":
        if shutil.which("bwrap"):
            tools[name] = (bwrap_argv(), dict(os.environ))
        else:
            tools[name] = "bwrap not installed (apt-get install bubblewrap)"
    elif name == "chroot":
        if is_root:
            tools[name] = (["chroot", rootfs, "python", "-"], CLEAN_ENV)
        else:
            tools[name] = "skipped: chroot needs root"
    elif name == "floor":
        if os.access(floor, os.X_OK):
            tools[name] = ([floor, rootfs], CLEAN_ENV)
        else:
            tools[name] = f"not built: {floor} missing (make bench builds it)"
    else:
        tools[name] = "unknown tool (known: nsbox bwrap chroot floor)"


def vmhwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def run_once(argv, env, sample_hwm=False):
    """One run: (wall ms, exit code, stdout, stderr, launcher VmHWM KiB)."""
    t0 = time.monotonic_ns()
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, close_fds=True)
    except OSError as e:
        return None, 127, b"", str(e).encode(), 0, None
    out = {}

    def drain(key, f):
        out[key] = f.read()
        f.close()

    readers = [threading.Thread(target=drain, args=(k, f), daemon=True)
               for k, f in (("out", p.stdout), ("err", p.stderr))]
    for r in readers:
        r.start()
    try:
        p.stdin.write(CODE)
        p.stdin.close()
    except BrokenPipeError:
        pass
    killed = []

    def on_timeout():
        killed.append(True)
        try:
            p.kill()
        except OSError:
            pass

    timer = threading.Timer(TIMEOUT, on_timeout)
    timer.start()
    hwm = None
    if sample_hwm:
        # VmHWM is monotonic: the last reading before exit is the peak, give or
        # take what happened in the final ~0.2 ms.
        while True:
            pid_done, status = os.waitpid(p.pid, os.WNOHANG)
            if pid_done:
                break
            h = vmhwm_kib(p.pid)
            if h is not None:
                hwm = h
            time.sleep(0.0002)
    else:
        _, status = os.waitpid(p.pid, 0)
    t1 = time.monotonic_ns()
    timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join(5)
    err = out.get("err", b"")
    if killed:
        err += f"\n[bench: killed after {TIMEOUT:.0f}s]".encode()
    return (t1 - t0) / 1e6, p.returncode, out.get("out", b""), err, hwm


def peak_rss_kib(argv, env):
    """Peak RSS of a whole run, as GNU time's %M reports it, or None.

    Measured through /usr/bin/time rather than our own wait4(): a child forked
    (or vforked) from this python inherits its high-water mark through exec,
    so ru_maxrss seen here would never drop below the harness's own size."""
    time_bin = "/usr/bin/time"
    if not os.access(time_bin, os.X_OK):
        return None
    with tempfile.NamedTemporaryFile(prefix="nsbox-bench-rss.") as f:
        _, rc, so, _, _ = run_once([time_bin, "-f", "%M", "-o", f.name] + argv, env)
        if rc != 0 or so != EXPECT:
            return None
        try:
            return int(open(f.name).read().split()[-1])
        except (ValueError, IndexError):
            return None


def describe_failure(rc, stdout, stderr):
    what = f"exit {rc}" if rc >= 0 else f"killed by signal {-rc}"
    if rc == 0:
        what = f"exit 0 but stdout {stdout[:80]!r}, expected {EXPECT!r}"
    text = stderr.decode(errors="replace").strip()
    lines = text.splitlines()
    if len(lines) > 8:
        lines = lines[:8] + [f"... ({len(lines) - 8} more lines)"]
    body = "\n".join("      | " + l for l in lines) if lines else "      | (no stderr)"
    return f"{what}; stderr:\n{body}"


results = {}  # name -> dict(times=[ms], failures=int or "warm-up", first_failure=str)
active = []
print(f"bench: {n} interleaved runs per tool of {CODE.decode().strip()!r}")
print(f"bench: rootfs {rootfs}")
print(f"bench: host {os.uname().release}, {os.cpu_count()} cpus, running as uid {os.geteuid()}")

# Warm-up (page cache, first-run costs), not counted. A tool whose warm-up
# fails is reported and left out of the timed runs.
for name, spec in tools.items():
    results[name] = {"times": [], "failures": 0, "first_failure": None}
    if isinstance(spec, str):
        continue
    ms, rc, so, se, _ = run_once(*spec)
    if rc != 0 or so != EXPECT:
        results[name]["first_failure"] = describe_failure(rc, so, se)
        results[name]["failures"] = "warm-up"
    else:
        active.append(name)

for _ in range(n):
    for name in active:
        ms, rc, so, se, _ = run_once(*tools[name])
        r = results[name]
        if rc != 0 or so != EXPECT:
            r["failures"] += 1
            if r["first_failure"] is None:
                r["first_failure"] = describe_failure(rc, so, se)
            continue
        r["times"].append(ms)


def p90(xs):
    s = sorted(xs)
    return s[max(0, math.ceil(0.9 * len(s)) - 1)]


print()
failed = False
medians = {}
for name, spec in tools.items():
    r = results[name]
    label = f"{name:<7}"
    if isinstance(spec, str):
        # Not being able to run nsbox at all is a failure; the references are
        # optional.
        failed = failed or name == "nsbox"
        print(f"{label} {spec}")
        continue
    if r["failures"] == "warm-up":
        failed = True
        print(f"{label} FAILED (first run; not timed): {r['first_failure']}")
        continue
    t = r["times"]
    if not t:
        failed = True
        print(f"{label} FAILED: all {n} runs failed; first: {r['first_failure']}")
        continue
    medians[name] = statistics.median(t)
    if name == "bwrap":
        # With --unshare-pid, the sandbox's pid 1 is not reaped into bwrap's
        # rusage: %M would show the launcher alone (about 2 MiB).
        rss_text = "n/a for bwrap"
    else:
        rss = peak_rss_kib(*spec)
        rss_text = f"{rss} KiB" if rss is not None else "n/a (needs /usr/bin/time)"
    print(f"{label} median {medians[name]:8.2f} ms   p90 {p90(t):8.2f} ms   "
          f"min {min(t):8.2f} ms   ({len(t)}/{n} ok; peak RSS of the run {rss_text})")
    if r["failures"]:
        failed = True
        print(f"{' ' * 7} {r['failures']} of {n} runs FAILED; first: {r['first_failure']}")

print()
for ref in ("chroot", "bwrap", "floor"):
    if "nsbox" in medians and ref in medians:
        print(f"ratio nsbox/{ref} (medians): {medians['nsbox'] / medians[ref]:.2f}")
    elif "nsbox" in tools and ref in tools:
        print(f"ratio nsbox/{ref}: n/a (no successful runs of "
              f"{'nsbox' if 'nsbox' not in medians else ref})")

if "floor" in medians and "chroot" in medians:
    print(f"ratio floor/chroot (medians; the namespaces alone): "
          f"{medians['floor'] / medians['chroot']:.2f}")

if "nsbox" in medians:
    # The RSS column above is the largest process of the run (python, as a
    # rule); VmHWM sampled while nsbox runs is the launcher process alone.
    _, rc, so, _, hwm = run_once(*tools["nsbox"], sample_hwm=True)
    own = f"{hwm} KiB" if hwm is not None else "n/a (exited before the first sample)"
    print(f"nsbox peak RSS of the launcher process alone (VmHWM, sampled): {own}")

sys.exit(1 if failed else 0)
PY

# The launcher's peak RSS under a 1 GB output flood, head-tail and head,
# against print(1) in the same run (tests/bench/capture.sh).
echo
NSBOX_BIN="$nsbox" NSBOX_TEST_ROOTFS="$rootfs" "$here/capture.sh" || status=$?

# runtime runsc: nsbox --runtime runsc against raw `runsc run` on the same
# bundle (skipped with a note when runsc is not installed).
echo
NSBOX_BIN="$nsbox" NSBOX_TEST_ROOTFS="$rootfs" BENCH_N="$n" "$here/runsc.sh" || status=$?

# The warm pool (tests/bench/pool.c): library pool latency against a cold
# chroot python3 and a pre-started one, throughput, idle entry memory; then
# pooled runsc against a cold runsc run. Root only (the baselines chroot).
echo
pool_bench="$(cd "$build" && pwd -P)/tests/bench/pool"
if [ "$(id -u)" -ne 0 ]; then
	echo "bench: the pool rows need root (their baselines use chroot): skipped"
else
	"$pool_bench" "$rootfs" native "$n" "$nsbox" || status=$?
	if command -v runsc >/dev/null 2>&1 || [ -n "${NSBOX_RUNSC:-}" ]; then
		echo
		"$pool_bench" "$rootfs" runsc "$n" || status=$?
	else
		echo "bench: runsc not installed: no pooled runsc row"
	fi
fi

# The audit log (tests/bench/audit.c): what appending a record adds to a
# run, against the floor of any append-only log, interleaved.
echo
"$(cd "$build" && pwd -P)/tests/bench/audit" "$rootfs" "$n" || status=$?

# network: proxy (tests/bench/egress.sh): the latency the egress proxy adds
# to an HTTP request and its download throughput, against the host's direct
# connection to the same local server, interleaved.
echo
NSBOX_BIN="$nsbox" NSBOX_TEST_ROOTFS="$rootfs" "$here/egress.sh" || status=$?

# The Python package (tests/bench/python.py): client.run("print(1)") on a
# unix socket against `nsbox run --server`, and locally against `nsbox run`
# itself, interleaved.
echo
/usr/bin/python3 "$here/python.py" "$nsbox" "$rootfs" "$n" || status=$?

# A fleet (tests/bench/fleet.py): HAProxy's added latency, and three nodes
# behind it against one alone (on this machine's cores: overhead, not scale).
echo
/usr/bin/python3 "$here/fleet.py" "$nsbox" "$rootfs" "$n" || status=$?

# nsbox mcp (tests/mcp/bench.mjs): tools/call print(1) through the MCP SDK
# client, pool warm, against a cold chroot python, interleaved.
echo
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
	if modules="$("$here/../mcp/run.sh" --install-only)"; then
		NSBOX_BIN="$nsbox" NSBOX_TEST_ROOTFS="$rootfs" NSBOX_MCP_NODE_MODULES="$modules" \
			node "$here/../mcp/bench.mjs" || status=$?
	else
		echo "bench: the MCP SDK could not be installed (tests/mcp/run.sh): no mcp row"
		status=1
	fi
else
	echo "bench: node or npm not installed: no mcp row (tests/fixtures/deps.sh)"
fi
exit "$status"
