#!/usr/bin/env bash
# network: proxy benchmark (part of make bench). A real HTTP server on this
# machine's loopback (tests/fixtures/egress/origin.py) is fetched from
#   direct   the host: python3 on the host, straight to the server
#   proxied  a sandbox: the same client code in `nsbox run --network proxy`,
#            through the launcher's egress proxy (the name pinned to 127.0.0.1)
# in BENCH_ROUNDS rounds (default 15), direct and proxied interleaved so drifts
# in machine load hit both alike (this 2-core machine's download rate drifts
# by a fifth from minute to minute: 5 rounds gave ratios from 0.70 to 0.96,
# 15 to 40 rounds 0.70 to 0.87). Each round times BENCH_REQUESTS (default
# 200) sequential GETs of a small page, each on a new connection (the proxy
# closes a plain-HTTP connection after one answer), and one download of
# BENCH_DOWNLOAD_MB (default 512) MiB. Prints the median request time of each
# side and the latency the proxy adds (target: at most 1 ms), and the
# download throughput of each side and their ratio (target: at least 0.8).
# The sandbox gets 2 CPUs so that the CPU limit does not stand in for the
# proxy. Environment: NSBOX_BIN, NSBOX_TEST_ROOTFS, BENCH_ROUNDS,
# BENCH_REQUESTS, BENCH_DOWNLOAD_MB.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
nsbox="${NSBOX_BIN:-build/nsbox}"
rootfs="${NSBOX_TEST_ROOTFS:-$("$here/../fixtures/rootfs.sh")}"
rounds="${BENCH_ROUNDS:-15}"
requests="${BENCH_REQUESTS:-200}"
download_mb="${BENCH_DOWNLOAD_MB:-512}"

work="$(mktemp -d)"
origin=""
cleanup() {
	if [ -n "$origin" ]; then
		kill "$origin" 2>/dev/null || true
		wait "$origin" 2>/dev/null || true
	fi
	rm -rf -- "$work"
}
trap cleanup EXIT

python3 "$here/../fixtures/egress/origin.py" --port-file "$work/port" --log /dev/null &
origin=$!
for _ in $(seq 100); do
	[ -s "$work/port" ] && break
	sleep 0.05
done
port="$(cat "$work/port")"

# The client, the same on both sides: HOST and PROXY come first.
cat >"$work/client.py" <<'PY'
import socket, statistics, sys, time
host, proxy, port, requests, download_mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
target = ("127.0.0.1", 3128) if proxy == "proxy" else ("127.0.0.1", port)
prefix = "http://%s:%d" % (host, port) if proxy == "proxy" else ""
def get(path, sink=None):
    s = socket.create_connection(target)
    s.sendall(("GET %s%s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (prefix, path, host, port)).encode())
    n = 0
    buf = bytearray(262144)
    while True:
        k = s.recv_into(buf)
        if not k:
            break
        n += k
    s.close()
    return n
times = []
for i in range(requests):
    t = time.perf_counter()
    get("/hello")
    times.append(time.perf_counter() - t)
t = time.perf_counter()
n = get("/bytes/%d" % (download_mb << 20))
d = time.perf_counter() - t
if n < download_mb << 20:
    sys.exit("short download: %d bytes" % n)
print("%.6f %.3f" % (statistics.median(times), n / d / 1e6))
PY

direct=()
proxied=()
for r in $(seq "$rounds"); do
	direct+=("$(python3 "$work/client.py" web.nsbox.test direct "$port" "$requests" "$download_mb")")
	proxied+=("$("$nsbox" run --rootfs "$rootfs" --network proxy --egress-allow web.nsbox.test \
		--egress-resolve web.nsbox.test=127.0.0.1 --egress-ports "$port" --cpus 2 --memory 512m \
		--timeout 120s --egress-bytes 4g --egress-connections 100000 --egress-concurrent 4 \
		-- python - web.nsbox.test proxy "$port" "$requests" "$download_mb" <"$work/client.py")")
	echo "egress round $r: direct ${direct[-1]}, proxied ${proxied[-1]}"
done

python3 - "${direct[@]}" "--" "${proxied[@]}" <<'PY'
import statistics, sys
args = sys.argv[1:]
cut = args.index("--")
direct = [tuple(map(float, a.split())) for a in args[:cut]]
proxied = [tuple(map(float, a.split())) for a in args[cut + 1:]]
dl = statistics.median(x[0] for x in direct) * 1000
pl = statistics.median(x[0] for x in proxied) * 1000
dt = statistics.median(x[1] for x in direct)
pt = statistics.median(x[1] for x in proxied)
print("egress: request median  direct %.3f ms  proxied %.3f ms  added %.3f ms  (target <= 1 ms)"
      % (dl, pl, pl - dl))
print("egress: download        direct %.0f MB/s  proxied %.0f MB/s  ratio %.2f  (target >= 0.8)"
      % (dt, pt, pt / dt))
PY
