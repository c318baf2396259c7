#!/usr/bin/env bash
# CPython's own tests of the modules the seccomp policy touches most
# (socket, ssl, asyncio, urllib), run inside nsbox, to compare a policy
# change against the previous one. Not part of `make check` (test_asyncio
# alone takes minutes); run it by hand:
#
#   tests/compat/cpython-stdlib.sh NSBOX_BINARY [MODULE...]
#
# Builds (once, as root, cached in ${NSBOX_COMPAT_CACHE:-/var/cache/nsbox-compat})
# a Debian bookworm rootfs with python3 and libpython3.11-testsuite and an
# /etc/hosts naming localhost, then runs `python3 -m test -v MODULE` for each
# module with room to spare (2 GiB, 2 CPUs, 512 tasks, 20 minutes) and
# prints one summary line per module; the full logs stay in the cache.
set -euo pipefail

nsbox="${1:?usage: $0 NSBOX_BINARY [MODULE...]}"
shift
modules=("$@")
[ "${#modules[@]}" -gt 0 ] || modules=(test_socket test_ssl test_asyncio test_urllib test_urllib2
	test_urllib2_localnet test_urllibnet)
cache="${NSBOX_COMPAT_CACHE:-/var/cache/nsbox-compat}"
rootfs="$cache/rootfs-testsuite"
mkdir -p "$cache"
if [ ! -x "$rootfs/usr/bin/python3" ]; then
	rm -rf "$rootfs.tmp"
	mmdebstrap --variant=minbase --include=python3,libpython3.11-testsuite,python-is-python3 \
		bookworm "$rootfs.tmp" >&2
	printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$rootfs.tmp/etc/hosts"
	mv "$rootfs.tmp" "$rootfs"
fi
label="$(basename "$nsbox")-$$"
for m in "${modules[@]}"; do
	log="$cache/$label-$m.log"
	rc=0
	"$nsbox" run --rootfs "$rootfs" --timeout 1200s --memory 2g --pids-limit 512 --cpus 2 \
		--tmp-size 512m --max-output-bytes 64m -- python3 -m test -v "$m" </dev/null >"$log" 2>&1 || rc=$?
	printf '%s: exit %d; %s (log %s)\n' "$m" "$rc" \
		"$(grep -E '^(Ran |OK|FAILED)' "$log" | tr '\n' ' ')" "$log"
done
