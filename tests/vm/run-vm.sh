#!/usr/bin/env bash
# make check-vm: prove nsbox's cgroup v2 limits on a kernel with cgroup v2
# only, in qemu (TCG: no KVM needed).
#
#   tests/vm/run-vm.sh [BUILD_DIR]     (default build; run as root)
#
# 1. builds BUILD_DIR/tests/vm/vmhelper (static) and cgroup2_test;
# 2. gets the cached guest (tests/vm/build-guest.sh: kernel, initramfs,
#    base image of the fixture rootfs with systemd and D-Bus);
# 3. makes the payload disk: nsbox, the integration and cgroup2 test
#    binaries, the shared libraries the base image lacks, vmhelper and
#    guest-init.sh (the guest's PID 1, which runs the passes);
# 4. boots qemu-system-x86_64 (2 vCPUs, serial console on stdout, the base
#    image as a throw-away snapshot) under a timeout, and reads the verdict
#    from isa-debug-exit: 99 pass, 97 fail, anything else a broken guest.
# qemu is killed whatever happens to this script.
#
# Knobs: NSBOX_VM_TIMEOUT (seconds, default 900); NSBOX_VM_MEMORY (MiB,
# default 2048: with less, the heuristic overcommit check refuses the tests'
# 1 GiB allocations before any cgroup limit is reached); NSBOX_VM_CACHE (guest
# cache directory); NSBOX_VM_LOG (keep the serial log there); NSBOX_VM_PASSES
# (comma-separated labels of the guest's passes to run: root, shared,
# delegated, undelegated, systemd; default all).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
repo="$(cd "$here/../.." && pwd -P)"
build_arg="${1:-build}"
vm_timeout="${NSBOX_VM_TIMEOUT:-900}"
vm_memory="${NSBOX_VM_MEMORY:-2048}"

log() { printf 'check-vm: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

start=$SECONDS
[ "$(id -u)" -eq 0 ] || die "must run as root (builds ext4 images keeping file owners)"
command -v qemu-system-x86_64 >/dev/null 2>&1 || die "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
[ -d "$build_arg" ] || die "build directory $build_arg not found (make all build/tests/integration)"
build="$(cd "$build_arg" && pwd -P)"
for f in "$build/nsbox" "$build/tests/integration" "$build/libnsbox.a"; do
	[ -f "$f" ] || die "$f missing (make all $build_arg/tests/integration)"
done

# 1. The VM-only binaries. Same warnings as the project's own tests.
mkdir -p "$build/tests/vm"
pkgs="libseccomp libcap yaml-0.1 jansson libcurl libarchive libcrypto zlib libzstd"
# shellcheck disable=SC2046,SC2086 # word splitting of flag lists is intended
{
	cflags=(-std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
		-Wformat=2 -Wpointer-arith -Wwrite-strings -Wvla -Wimplicit-fallthrough -Wnull-dereference
		-fno-common -D_FORTIFY_SOURCE=3 -fstack-protector-strong)
	cc "${cflags[@]}" -Wmissing-prototypes -static -o "$build/tests/vm/vmhelper" "$here/vmhelper.c"
	cc "${cflags[@]}" -I"$repo/include" $(for l in common result config sandbox egress runtime service; do echo -iquote "$repo/src/$l"; done) \
		-iquote "$repo/src" -iquote "$repo/rootfs-tools" \
		-iquote "$repo/tests/lib" \
		$(pkg-config --cflags $pkgs) -pie -fPIE -o "$build/tests/vm/cgroup2_test" \
		"$here/cgroup2_test.c" "$repo/tests/lib/harness.c" "$build/libnsbox.a" \
		$(pkg-config --libs $pkgs) $(pkg-config --libs criterion 2>/dev/null || echo -lcriterion)
}

# 2. The guest.
guest="$("$here/build-guest.sh")" || die "could not build the guest (tests/vm/build-guest.sh)"
rootfs="$("$repo/tests/fixtures/rootfs.sh")"

tmp="$(mktemp -d /tmp/nsbox-check-vm.XXXXXX)"
qemu_pid=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	if [ -n "$qemu_pid" ]; then
		log "stopping qemu"
		# timeout(1) leads a process group of its own with qemu in it.
		kill -KILL -- "-$qemu_pid" 2>/dev/null || kill -KILL "$qemu_pid" 2>/dev/null || true
		wait "$qemu_pid" 2>/dev/null || true
	fi
	rm -rf -- "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 3. The payload disk.
pl="$tmp/payload"
mkdir -p "$pl/bin" "$pl/lib"
cp "$build/nsbox" "$build/tests/integration" "$build/tests/vm/cgroup2_test" \
	"$build/tests/vm/vmhelper" "$here/nsbox-scoped" "$pl/bin/"
cp "$here/guest-init.sh" "$pl/guest-init.sh"
# Libraries the base image does not have (it is a bare Python rootfs).
for bin in "$pl/bin/nsbox" "$pl/bin/integration" "$pl/bin/cgroup2_test"; do
	ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while IFS= read -r lib; do
	name="${lib##*/}"
	if [ ! -e "$rootfs/usr/lib/x86_64-linux-gnu/$name" ] && [ ! -e "$rootfs/lib/x86_64-linux-gnu/$name" ]; then
		cp -L "$lib" "$pl/lib/$name"
	fi
done
chmod -R a+rX "$pl"
size_mb=$(($(du -sm "$pl" | cut -f1) * 3 / 2 + 16))
mkfs.ext4 -q -F -L nsbox-payload -d "$pl" "$tmp/payload.img" "${size_mb}M" >&2
log "guest $guest, payload $(du -sh "$pl" | cut -f1) ($(find "$pl/lib" -type f | wc -l) libraries), ready after $((SECONDS - start))s"

# 4. Boot. The kernel powers off (qemu exits 0) on panic or a broken init:
# no verdict, a failure.
serial="${NSBOX_VM_LOG:-$tmp/serial.log}"
append="console=ttyS0 cgroup_no_v1=all panic=-1 loglevel=4 rdinit=/init"
[ -n "${NSBOX_VM_PASSES:-}" ] && append="$append nsbox_vm_passes=$NSBOX_VM_PASSES"
boot=$SECONDS
set +e
# Belt and braces besides the EXIT trap: timeout and qemu die with their
# parents (setpriv --pdeathsig), even if this script is killed outright.
setpriv --pdeathsig KILL timeout --kill-after=10 "$vm_timeout" \
	setpriv --pdeathsig KILL qemu-system-x86_64 -accel tcg -machine pc -cpu "${NSBOX_VM_CPU:-max}" -smp 2 -m "$vm_memory" \
	-nodefaults -display none -no-reboot -serial stdio -monitor none \
	-kernel "$guest/vmlinuz" -initrd "$guest/initrd.img" -append "$append" \
	-drive "file=$guest/base.img,format=raw,if=virtio,snapshot=on" \
	-drive "file=$tmp/payload.img,format=raw,if=virtio,readonly=on" \
	-device isa-debug-exit,iobase=0xf4,iosize=0x04 \
	</dev/null > >(tee "$serial") 2>&1 &
qemu_pid=$!
wait "$qemu_pid"
rc=$?
qemu_pid=
set -e
took="boot to verdict $((SECONDS - boot))s, total $((SECONDS - start))s"
case "$rc" in
99)
	log "PASS ($took)"
	exit 0
	;;
97) log "FAIL: the guest reported failing tests ($took)" ;;
124 | 137) log "FAIL: the guest did not finish within ${vm_timeout}s ($took)" ;;
*) log "FAIL: qemu exited $rc without a verdict (kernel panic or broken init?) ($took)" ;;
esac
[ -n "${NSBOX_VM_LOG:-}" ] && log "serial log: $serial"
exit 1
