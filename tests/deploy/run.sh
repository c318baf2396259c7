#!/usr/bin/env bash
# make check-deploy (make check runs it): what a host installs from
# policies/deploy is checked offline.
#   - policies/deploy/kubernetes/*.yaml against the Kubernetes API schema
#     (validate.mjs, with npm packages pinned by package-lock.json), and
#     every manifest under tests/deploy/bad must be refused with the error
#     its "# expect:" line names (so that the validator can fail);
#   - policies/deploy/haproxy/nsbox.cfg by `haproxy -c` (example addresses),
#     when HAProxy is installed (the fleet pass runs it for real).
# The node_modules tree is cached outside the repository by
# tests/fixtures/npm-tree.sh (npm-deploy-<hash>).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(cd "$here/../.." && pwd -P)"
log() { printf 'deploy: %s\n' "$*" >&2; }

modules="$("$here/../fixtures/npm-tree.sh" deploy "$here")" || exit $?
dir="$(dirname "$modules")"
# The script runs from the cache, beside its node_modules.
cp "$here/validate.mjs" "$dir/validate.mjs"

status=0
node "$dir/validate.mjs" "$repo"/policies/deploy/kubernetes/*.yaml || status=1
for bad in "$here"/bad/*.yaml; do
	expect="$(sed -n 's/^# expect: //p' "$bad")"
	if out="$(node "$dir/validate.mjs" "$bad")"; then
		log "FAIL: $bad was accepted (expected: $expect)"
		status=1
	elif ! grep -qF -- "$expect" <<<"$out"; then
		log "FAIL: $bad refused, but not for '$expect': $out"
		status=1
	else
		log "refused as expected: ${bad#"$repo"/} ($expect)"
	fi
done

haproxy="${NSBOX_HAPROXY:-/usr/sbin/haproxy}"
if [ -x "$haproxy" ]; then
	NSBOX_FRONTEND=127.0.0.1:8080 NSBOX_NODE_0=127.0.0.2:8080 NSBOX_NODE_1=127.0.0.3:8080 \
		NSBOX_NODE_2=127.0.0.4:8080 "$haproxy" -c -q -f "$repo/policies/deploy/haproxy/nsbox.cfg" ||
		{
			log "FAIL: haproxy -c refuses policies/deploy/haproxy/nsbox.cfg"
			status=1
		}
	[ "$status" -ne 0 ] || log "haproxy -c: policies/deploy/haproxy/nsbox.cfg is valid"
else
	log "HAProxy not installed: its configuration is checked by the fleet pass only"
fi
exit "$status"
