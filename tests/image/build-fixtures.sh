#!/usr/bin/env bash
# Prints the path of a docker-registry storage directory holding the
# registry tests' images, building it first when missing. Tests copy it and
# serve the copy with their own docker-registry.
#
#   test/img:t        OCI manifest, two gzip layers (base, top)
#   test/img:v2s2     the same as Docker schema 2 (skopeo --format v2s2)
#   test/multi:t      OCI index {linux/amd64, linux/arm64/v8, unknown/unknown
#                     attestation}
#   test/list:t       Docker manifest list {linux/amd64, linux/arm64/v8}
#   test/big:t        one 2 MiB incompressible layer
#   test/baddiff:t    img:t with a wrong diff_id in its config
#
# Built with umoci from the layers of make_layers.py, pushed with skopeo to a
# docker-registry on a free loopback port. Cached under
# ${NSBOX_FIXTURE_CACHE:-${TMPDIR:-/tmp}} keyed by a hash of these scripts;
# it appears only when complete; a lock serialises concurrent builders.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf 'build-fixtures: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}
for tool in docker-registry umoci skopeo python3; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not found (apt-get install docker-registry skopeo umoci)"
done

hash="$(cat "$here/build-fixtures.sh" "$here/make_layers.py" "$here/oci_edit.py" | sha256sum | cut -c1-16)"
cache="${NSBOX_FIXTURE_CACHE:-${TMPDIR:-/tmp}}"
target="$cache/nsbox-registry-fixture-$hash"
if [ -f "$target/.complete" ]; then
	printf '%s\n' "$target/storage"
	exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock-nsbox-registry-fixture-$hash"
flock 9
if [ -f "$target/.complete" ]; then
	printf '%s\n' "$target/storage"
	exit 0
fi

work="$(mktemp -d "$cache/.tmp-nsbox-registry-fixture.XXXXXX")"
registry_pid=
cleanup() {
	if [ -n "$registry_pid" ]; then
		kill "$registry_pid" 2>/dev/null || true
		wait "$registry_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

python3 "$here/make_layers.py" "$work"
L="$work/layout"
umoci init --layout "$L" >&2
image() { # tag layers...
	local tag="$1"
	shift
	umoci new --image "$L:$tag" >&2
	for layer in "$@"; do
		umoci raw add-layer --image "$L:$tag" "$work/$layer" >&2
	done
	umoci config --image "$L:$tag" --config.cmd=/bin/tool --config.env=NSBOX_TEST=1 >&2
}
image t base.tar top.tar
image big big.tar
image amd64 arch-amd64.tar
umoci config --image "$L:amd64" --architecture amd64 --os linux >&2
image arm64 arch-arm64.tar
umoci config --image "$L:arm64" --architecture arm64 --os linux >&2
python3 "$here/oci_edit.py" "$L" index multi amd64:linux/amd64 arm64:linux/arm64/v8 \
	--attestation-for amd64
python3 "$here/oci_edit.py" "$L" index list amd64:linux/amd64 arm64:linux/arm64/v8
python3 "$here/oci_edit.py" "$L" bad-diffid t baddiff

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "$work/storage"
cat >"$work/registry.yml" <<YAML
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $work/storage}
  delete: {enabled: true}
http: {addr: 127.0.0.1:$port}
YAML
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 100); do
	curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null || die "registry did not start: $(cat "$work/registry.log")"

push() { # src dest [skopeo options]
	local src="$1" dest="$2"
	shift 2
	skopeo copy --quiet --dest-tls-verify=false "$@" "oci:$L:$src" "docker://127.0.0.1:$port/$dest" >&2
}
push t test/img:t
push t test/img:v2s2 --format v2s2
push multi test/multi:t --all
push list test/list:t --all --format v2s2
push big test/big:t
push baddiff test/baddiff:t

kill "$registry_pid"
wait "$registry_pid" 2>/dev/null || true
registry_pid=
touch "$work/.complete"
mv -T "$work" "$target"
trap - EXIT
log "ready: $target"
printf '%s\n' "$target/storage"
