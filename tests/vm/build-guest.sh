#!/usr/bin/env bash
# Build (once) the check-vm guest from Debian packages only, and print its
# directory on stdout:
#   vmlinuz     linux-image-cloud-amd64's kernel (apt-get download, dpkg-deb -x)
#   initrd.img  busybox-static + the virtio modules, in `modprobe
#               --show-depends` order; its /init mounts the disks and
#               switch_root's into the base image (see INITRAMFS_INIT)
#   base.img    ext4 (mkfs.ext4 -d) of the Python fixture rootfs
#               (tests/fixtures/rootfs.sh) plus the test user, the mount
#               point /opt/nsbox for the per-run payload disk, and
#               systemd, D-Bus, logind and the user bus (GUEST_PACKAGES,
#               downloaded by the host's apt, installed by the rootfs's in
#               a chroot) for the pass that boots systemd
#
# Cached in ${NSBOX_VM_CACHE:-/var/cache/nsbox-vm}/guest-<key>, the key being
# this script (the recipe), the kernel package it resolves to and the fixture
# rootfs's own key (GUEST_PACKAGES are in this script; their versions are
# what the host's package lists offer). A guest appears only when complete
# (built beside it, then renamed); a lock keeps concurrent builds apart.
# Guests unused for two weeks are removed. Needs root (the image keeps the
# rootfs's ownership, the packages are installed in a chroot), dpkg-deb,
# depmod/modprobe (kmod), busybox-static, e2fsprogs and apt with fresh
# package lists.
set -euo pipefail

KERNEL_PACKAGE=linux-image-cloud-amd64
MODULES=(virtio_pci virtio_blk) # ext4, jbd2 and crc32c are built in
TEST_USER=nsbox-test
TEST_UID=990
# The systemd pass (guest-init.sh): PID 1, the system bus, logind (loginctl
# enable-linger starts user@UID.service) and the user bus in it.
GUEST_PACKAGES=(systemd dbus dbus-user-session libpam-systemd)

log() { printf 'build-guest: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root (the image keeps the rootfs's owners)"
for tool in dpkg-deb depmod modprobe mkfs.ext4 apt-get apt-cache; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not found (make deps)"
done
busybox=/bin/busybox
if [ ! -x "$busybox" ] || readelf -d "$busybox" 2>/dev/null | grep -q NEEDED; then
	die "$busybox missing or not static (apt-get install busybox-static)"
fi

self="$(readlink -f "${BASH_SOURCE[0]}")"
here="$(dirname "$self")"
rootfs="$("$here/../fixtures/rootfs.sh")" || die "no fixture rootfs (tests/fixtures/rootfs.sh)"

# The metapackage names the versioned image package (the kernel ABI).
kpkg="$(apt-cache depends "$KERNEL_PACKAGE" 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }')"
[ -n "$kpkg" ] || die "cannot resolve $KERNEL_PACKAGE (apt-get update?)"
kver="${kpkg#linux-image-}"
kdeb_version="$(apt-cache policy "$kpkg" | awk '/Candidate:/ { print $2; exit }')"

key="$(
	{
		cat "$self"
		printf '%s\n' "$kpkg" "$kdeb_version" "$rootfs" "$(sha256sum "$busybox")"
	} | sha256sum | cut -c1-16
)"
cache="${NSBOX_VM_CACHE:-/var/cache/nsbox-vm}"
mkdir -p "$cache"
target="$cache/guest-$key"
if [ -f "$target/base.img" ]; then
	touch "$target"
	printf '%s\n' "$target"
	exit 0
fi
exec 9>"$cache/.lock-guest-$key"
flock 9
if [ -f "$target/base.img" ]; then
	printf '%s\n' "$target"
	exit 0
fi
find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'guest-*' ! -name "guest-$key" -mtime +14 \
	-exec rm -rf {} + 2>/dev/null || true

start=$SECONDS
tmp="$(mktemp -d "$cache/.tmp-guest-$key.XXXXXX")"
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	umount "$tmp/root/proc" "$tmp/root/dev" 2>/dev/null || true
	rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT
out="$tmp/guest"
mkdir "$out"

log "kernel: $kpkg $kdeb_version"
(cd "$tmp" && apt-get -q -o APT::Sandbox::User=root download "$kpkg" >&2)
mkdir "$tmp/kernel"
dpkg-deb -x "$tmp"/"$kpkg"_*.deb "$tmp/kernel"
cp "$tmp/kernel/boot/vmlinuz-$kver" "$out/vmlinuz"
grep -q '^CONFIG_CGROUPS=y' "$tmp/kernel/boot/config-$kver" || die "$kpkg has no cgroups"
# The package ships no modules.dep (its postinst makes it).
depmod -b "$tmp/kernel" "$kver"

# The initramfs: busybox, the modules in load order, /init.
ird="$tmp/initramfs"
mkdir -p "$ird/bin" "$ird/dev" "$ird/proc" "$ird/sys" "$ird/newroot" "$ird/modules"
cp "$busybox" "$ird/bin/busybox"
for applet in sh mount umount mkdir insmod switch_root sleep echo cat poweroff; do
	ln -s busybox "$ird/bin/$applet"
done
: >"$ird/modules/order"
for module in "${MODULES[@]}"; do
	modprobe -d "$tmp/kernel" -S "$kver" --show-depends "$module" |
		awk '$1 == "insmod" { print $2 }' |
		while IFS= read -r ko; do
			name="$(basename "$ko")"
			grep -qxF "$name" "$ird/modules/order" && continue
			cp "$ko" "$ird/modules/$name"
			printf '%s\n' "$name" >>"$ird/modules/order"
		done
done
log "initramfs modules: $(tr '\n' ' ' <"$ird/modules/order")"

# /dev/vda: this base image; /dev/vdb: the per-run payload (tests/vm/run-vm.sh)
# with the second-stage init, guest-init.sh.
cat >"$ird/init" <<'INITRAMFS_INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r ko; do
	insmod "/modules/$ko" || echo "initramfs: insmod $ko failed"
done </modules/order
i=0
while [ ! -b /dev/vdb ] && [ "$i" -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
mount -t ext4 /dev/vda /newroot && mount -t ext4 -o ro /dev/vdb /newroot/opt/nsbox || {
	echo "initramfs: cannot mount the guest disks"
	echo 1 >/proc/sys/kernel/sysrq
	poweroff -f
}
umount /proc /sys
mount --move /dev /newroot/dev
# switch_root, not chroot: in a chroot the root is not the mount namespace's
# root, and the kernel refuses unprivileged user namespaces (EPERM).
exec switch_root /newroot /opt/nsbox/guest-init.sh
INITRAMFS_INIT
chmod 755 "$ird/init"
(cd "$ird" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$out/initrd.img"

# The base image: the fixture rootfs, GUEST_PACKAGES, the test user,
# /opt/nsbox.
root="$tmp/root"
cp -a "$rootfs" "$root"
# The test user first: the packages' system users must not take its uid.
mkdir -p "$root/opt/nsbox" "$root/var/lib/$TEST_USER"
chown "$TEST_UID:$TEST_UID" "$root/var/lib/$TEST_USER"
printf '%s:x:%d:%d:nsbox tests:/var/lib/%s:/usr/sbin/nologin\n' \
	"$TEST_USER" "$TEST_UID" "$TEST_UID" "$TEST_USER" >>"$root/etc/passwd"
printf '%s:x:%d:\n' "$TEST_USER" "$TEST_UID" >>"$root/etc/group"
# No password, no ageing; PAM's account check (user@UID.service) needs it.
printf '%s:!*:::::::\n' "$TEST_USER" >>"$root/etc/shadow"
# The host's apt resolves against the rootfs's own dpkg status and only
# downloads; the rootfs's apt installs those files in a chroot (in
# pre-dependency order, maintainer scripts included: system users,
# machine-id, PAM), with no service started (policy-rc.d).
debs="$tmp/debs"
mkdir -p "$debs/partial"
apt-get -q -y --no-install-recommends --download-only -o APT::Sandbox::User=root \
	-o Debug::NoLocking=1 -o Dir::State::status="$root/var/lib/dpkg/status" \
	-o Dir::Cache::archives="$debs" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
	install "${GUEST_PACKAGES[@]}" >&2
mkdir "$root/tmp/guest-debs"
cp "$debs"/*.deb "$root/tmp/guest-debs/"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
mount --bind /dev "$root/dev"
mount -t proc proc "$root/proc"
installed=0
DEBIAN_FRONTEND=noninteractive chroot "$root" sh -c \
	'apt-get -q -y --no-install-recommends install /tmp/guest-debs/*.deb' >&2 && installed=1
umount "$root/proc" "$root/dev"
[ "$installed" -eq 1 ] || die "cannot install ${GUEST_PACKAGES[*]} in the guest root"
rm -rf "$root/tmp/guest-debs" "$root/usr/sbin/policy-rc.d"
log "installed: $(find "$debs" -maxdepth 1 -name '*.deb' -printf '%f\n' | sed 's/_.*//' | sort | tr '\n' ' ')"
size_mb=$(($(du -sm "$root" | cut -f1) * 5 / 4 + 64))
mkfs.ext4 -q -F -L nsbox-guest -d "$root" "$out/base.img" "${size_mb}M" >&2
rm -rf --one-file-system "$root"

mv -T "$out" "$target"
log "ready: $target ($(du -sh "$target" | cut -f1), $((SECONDS - start))s)"
printf '%s\n' "$target"
