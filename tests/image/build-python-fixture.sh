#!/usr/bin/env bash
# Prints the path of a docker-registry storage directory holding
# test/python:bookworm, an image of the Python fixture rootfs
# (tests/fixtures/rootfs.sh) as one gzip layer with Cmd python3, building it
# first when missing. Cached beside the small registry fixtures, keyed by
# this script and the rootfs path (which is keyed by its recipe).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf 'build-python-fixture: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
for tool in docker-registry umoci skopeo python3 curl; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not found"
done
rootfs="$("$here/../fixtures/rootfs.sh")"
[ -x "$rootfs/usr/bin/python3" ] || die "no python3 in $rootfs"

hash="$({
	cat "$here/build-python-fixture.sh"
	printf '%s\n' "$rootfs"
} | sha256sum | cut -c1-16)"
cache="${NSBOX_FIXTURE_CACHE:-${TMPDIR:-/tmp}}"
target="$cache/nsbox-registry-python-$hash"
if [ -f "$target/.complete" ]; then
	printf '%s\n' "$target/storage"
	exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock-nsbox-registry-python-$hash"
flock 9
if [ -f "$target/.complete" ]; then
	printf '%s\n' "$target/storage"
	exit 0
fi

work="$(mktemp -d "$cache/.tmp-nsbox-registry-python.XXXXXX")"
registry_pid=
cleanup() {
	if [ -n "$registry_pid" ]; then
		kill "$registry_pid" 2>/dev/null || true
		wait "$registry_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

start=$SECONDS
tar -C "$rootfs" --numeric-owner --one-file-system -cf "$work/rootfs.tar" .
L="$work/layout"
umoci init --layout "$L" >&2
umoci new --image "$L:bookworm" >&2
umoci raw add-layer --image "$L:bookworm" "$work/rootfs.tar" >&2
rm -f "$work/rootfs.tar"
umoci config --image "$L:bookworm" --config.cmd=python3 \
	--config.env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	--config.env=LANG=C.UTF-8 >&2

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "$work/storage"
cat >"$work/registry.yml" <<YAML
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $work/storage}
http: {addr: 127.0.0.1:$port}
YAML
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 100); do
	curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break
	sleep 0.1
done
skopeo copy --quiet --dest-tls-verify=false "oci:$L:bookworm" \
	"docker://127.0.0.1:$port/test/python:bookworm" >&2
kill "$registry_pid"
wait "$registry_pid" 2>/dev/null || true
registry_pid=
rm -rf "$L"
touch "$work/.complete"
mv -T "$work" "$target"
trap - EXIT
log "ready: $target ($((SECONDS - start))s)"
printf '%s\n' "$target/storage"
