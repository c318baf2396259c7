#!/usr/bin/env bash
# The nsbox mcp test (make check runs it through tests/run-tests.sh):
# installs the official MCP SDK client pinned by package-lock.json outside
# the repository, then runs mcp.test.mjs with `node --test` (TAP on stdout).
#
# The node_modules tree is cached by tests/fixtures/npm-tree.sh (npm-mcp-<hash>),
# readable by every user, as the test also runs as the unprivileged test user.
#
# Environment: NSBOX_BIN, NSBOX_TEST_ROOTFS (as for the other suites),
# NSBOX_TEST_USER (run node as that user; needs root), NSBOX_TEST_RUNTIME.
# With --install-only it prints the node_modules path and stops.
# Exit status: node's (1 when a test failed), 2 when node or npm is missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
log() { printf 'mcp: %s\n' "$*" >&2; }

modules="$("$here/../fixtures/npm-tree.sh" mcp "$here")" || exit $?
dir="$(dirname "$modules")"

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
