#!/usr/bin/env bash
# The nsbox mcp test (make check runs it through tests/run-tests.sh):
# installs the official MCP SDK client pinned by package-lock.json outside
# the repository, then runs mcp.test.mjs with `node --test` (TAP on stdout).
#
# The node_modules tree is cached, keyed by the lock file's hash, built by
# `npm ci` (its own npm cache beside it) in a temp dir renamed when complete,
# under a lock:
#   root:     ${NSBOX_FIXTURE_CACHE:-/var/cache/nsbox-fixtures}/npm-mcp-<hash>
#   non-root: ${NSBOX_FIXTURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nsbox-fixtures}/npm-mcp-<hash>
# readable by every user, as the test also runs as the unprivileged test user.
#
# Environment: NSBOX_BIN, NSBOX_TEST_ROOTFS (as for the other suites),
# NSBOX_TEST_USER (run node as that user; needs root), NSBOX_TEST_RUNTIME.
# With --install-only it prints the node_modules path and stops.
# Exit status: node's (1 when a test failed), 2 when node or npm is missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
log() { printf 'mcp: %s\n' "$*" >&2; }

for tool in node npm; do
	command -v "$tool" >/dev/null 2>&1 || {
		log "$tool not found (tests/fixtures/deps.sh installs it)"
		exit 2
	}
done

if [ "$(id -u)" -eq 0 ]; then
	cache="${NSBOX_FIXTURE_CACHE:-/var/cache/nsbox-fixtures}"
else
	cache="${NSBOX_FIXTURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nsbox-fixtures}"
fi
hash="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)"
dir="$cache/npm-mcp-$hash"

if [ ! -d "$dir/node_modules" ]; then
	mkdir -p "$cache"
	chmod 755 "$cache"
	exec 9>"$cache/npm-mcp.lock"
	flock 9
	if [ ! -d "$dir/node_modules" ]; then
		log "installing the MCP SDK (npm ci) into $dir"
		tmp="$(mktemp -d "$cache/npm-mcp-tmp.XXXXXX")"
		cp "$here/package.json" "$here/package-lock.json" "$tmp/"
		if ! (cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
			--cache "$cache/npm-mcp-cache" >&2); then
			rm -rf "$tmp"
			log "npm ci failed"
			exit 1
		fi
		chmod -R a+rX "$tmp"
		mv "$tmp" "$dir"
	fi
	exec 9>&-
fi

if [ "${1:-}" = "--install-only" ]; then
	printf '%s\n' "$dir/node_modules"
	exit 0
fi

: "${NSBOX_BIN:?NSBOX_BIN must name the nsbox binary}"
: "${NSBOX_TEST_ROOTFS:?NSBOX_TEST_ROOTFS must name the test rootfs}"
# The test file is copied where the test user can read it: it may not
# reach the repository.
work="$(mktemp -d /tmp/nsbox-mcp-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
install -m 644 "$here/mcp.test.mjs" "$work/mcp.test.mjs"
run=(env NSBOX_BIN="$NSBOX_BIN" NSBOX_TEST_ROOTFS="$NSBOX_TEST_ROOTFS"
	NSBOX_MCP_NODE_MODULES="$dir/node_modules" ${NSBOX_TEST_RUNTIME:+NSBOX_TEST_RUNTIME="$NSBOX_TEST_RUNTIME"}
	node --test --test-reporter=tap "$work/mcp.test.mjs")
status=0
if [ -n "${NSBOX_TEST_USER:-}" ]; then
	uid="$(id -u "$NSBOX_TEST_USER")"
	gid="$(id -g "$NSBOX_TEST_USER")"
	(cd / && setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all -- \
		env HOME="$(getent passwd "$NSBOX_TEST_USER" | cut -d: -f6)" "${run[@]}") || status=$?
else
	"${run[@]}" || status=$?
fi
exit "$status"
