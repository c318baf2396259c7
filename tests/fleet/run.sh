#!/usr/bin/env bash
# The fleet pass (make check-fleet; make check runs it when HAProxy is
# installed): pyflakes, then pytest over tests/fleet: three nsbox serve
# nodes on 127.0.0.2-4 behind HAProxy with policies/deploy/haproxy/nsbox.cfg.
# Needs NSBOX_BIN and NSBOX_TEST_ROOTFS, and root's or any user's loopback;
# nothing is written into the source tree. Exit status: pytest's, 2 when
# HAProxy is missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
py=/usr/bin/python3
[ -x "$py" ] || py="$(command -v python3)"
haproxy="${NSBOX_HAPROXY:-/usr/sbin/haproxy}"
if [ ! -x "$haproxy" ]; then
	echo "tests/fleet: no HAProxy at $haproxy (tests/fixtures/deps.sh installs it)" >&2
	exit 2
fi
export PYTHONDONTWRITEBYTECODE=1
cd "$repo"
"$py" -m pyflakes tests/fleet
version="$("$haproxy" -v)"
printf '%s\n' "${version%%$'\n'*}"
scratch="$(mktemp -d)"
trap 'rm -rf -- "$scratch"' EXIT
status=0
"$py" -m pytest -p no:cacheprovider -q -rfEs --basetemp "$scratch/t" "$@" tests/fleet || status=$?
exit "$status"
