#!/usr/bin/env bash
# Unpack benchmark (called by tests/bench/run.sh): the Python fixture rootfs
# as a one-layer gzip OCI image (umoci), unpacked BENCH_UNPACK_N times
# (default 5) by
#   nsbox-image  `nsbox-image rootfs` into a store holding the blobs, after
#                removing the previous tree (verifies the DiffID, applies)
#   umoci        `umoci unpack --rootless` of the same layout
# interleaved; prints the median wall time of each and the ratio
# nsbox-image/umoci (target: <= 0.5).
#
# Each round unpacks right after removing the previous tree. On ext4
# without a journal that is costly in itself: creating an inode skips every
# inode of its block group freed in the last seconds, so the figures depend
# on where the filesystem places each tree (nsbox-image puts its work
# directories in block groups of their own; see rt_store_make_tmp). umoci
# gets the same hint (chattr +T on the directory its bundle is made in), so
# neither tool is measured against the other's freed inodes. TMPDIR picks the
# filesystem to measure on.
#
# Environment: NSBOX_BUILD (default build), NSBOX_TEST_ROOTFS (default
# tests/fixtures/rootfs.sh), BENCH_UNPACK_N, TMPDIR (default /tmp).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
build="${NSBOX_BUILD:-build}"
n="${BENCH_UNPACK_N:-5}"
img="$(cd "$build" && pwd -P)/nsbox-image"

log() { printf 'bench-unpack: %s\n' "$*" >&2; }
[ -x "$img" ] || {
	log "$img missing (make all)"
	exit 1
}
command -v umoci >/dev/null 2>&1 || {
	echo "unpack  umoci not installed (apt-get install umoci): skipped"
	exit 0
}
[ "$(id -u)" -eq 0 ] || {
	echo "unpack  skipped: packing the fixture rootfs into an image needs root (it has root-only files)"
	exit 0
}
rootfs="${NSBOX_TEST_ROOTFS:-$("$here/../fixtures/rootfs.sh")}"

work="$(mktemp -d "${TMPDIR:-/tmp}/nsbox-bench-unpack.XXXXXX")"
cleanup() {
	chmod -R u+rwx "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
tar -C "$rootfs" -cf layer.tar .
umoci init --layout oci >/dev/null
umoci new --image oci:t >/dev/null
umoci raw add-layer --image oci:t layer.tar >/dev/null
rm layer.tar
mkdir umoci
chattr +T umoci 2>/dev/null || true
ref="$("$img" --store store import oci:"$work/oci":t | cut -d' ' -f1)"

now_ms() { date +%s%N | awk '{ printf "%.1f", $1 / 1e6 }'; }
nsbox_ms=()
umoci_ms=()
for ((i = 0; i <= n; i++)); do
	chmod -R u+rwx store/rootfs 2>/dev/null || true
	rm -rf store/rootfs/*
	sync
	t0="$(now_ms)"
	"$img" --store store rootfs "$ref" >/dev/null
	t1="$(now_ms)"
	chmod -R u+rwx umoci/bundle 2>/dev/null || true
	rm -rf umoci/bundle
	sync
	t2="$(now_ms)"
	umoci unpack --rootless --image oci:t umoci/bundle >/dev/null 2>&1
	t3="$(now_ms)"
	# The first round warms the page cache and is not counted.
	if [ "$i" -gt 0 ]; then
		nsbox_ms+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")
		umoci_ms+=("$(awk -v a="$t2" -v b="$t3" 'BEGIN { print b - a }')")
	fi
done

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
a="$(median "${nsbox_ms[@]}")"
b="$(median "${umoci_ms[@]}")"
size="$(du -sh --apparent-size "$rootfs" | cut -f1)"
echo "unpack of a one-layer gzip image of the fixture rootfs ($size), median of $n:"
printf 'unpack  nsbox-image %8.1f ms\n' "$a"
printf 'unpack  umoci       %8.1f ms   (umoci unpack --rootless)\n' "$b"
awk -v a="$a" -v b="$b" 'BEGIN { printf "ratio nsbox-image/umoci (medians): %.2f (target <= 0.50)\n", a / b }'
