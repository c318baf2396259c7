#!/bin/sh
# PID 1 of the check-vm guest, started by the initramfs's switch_root. The
# root is the fixture rootfs (base.img, a throw-away snapshot), this script
# sits on the payload disk at /opt/nsbox with nsbox, the test binaries and
# vmhelper. Mounts cgroup2 only (the kernel runs with cgroup_no_v1=all), runs
# the passes below, and reports the verdict through isa-debug-exit:
# 0x31 all passed, 0x30 something failed (qemu exits 99 or 97).
#
#   1. root, from the root cgroup: limits/* of the integration suite and
#      cgroup2/* of cgroup2_test; then, from a cgroup shared with other
#      processes (a login session's scope), part of cgroup2/*
#   2. the test user with a subtree delegated the way systemd delegates
#      user@UID.service (the directory and its cgroup.procs,
#      cgroup.subtree_control and cgroup.threads chowned to the user); each
#      launcher starts alone in a fresh scope below it (vmhelper scope, as
#      `systemd-run --user --scope` would) and does its own delegation:
#      the same tests
#   3. the test user without any delegated cgroup: undelegated/* (rlimit
#      fallback reported, --strict refuses)
# shellcheck disable=SC2086 # $LIMITS & co. are command lines, split on purpose
P=/opt/nsbox
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export LD_LIBRARY_PATH=$P/lib
export HOME=/root LANG=C.UTF-8
TEST_USER=nsbox-test
TEST_UID=990
DELEGATED=/sys/fs/cgroup/user.slice/user@$TEST_UID.service

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p /dev/shm /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
hostname nsbox-vm

verdict() {
	"$P/bin/vmhelper" exit "$1"
	echo o >/proc/sysrq-trigger
}

echo "guest: $(uname -r), $(nproc) cpus, $(awk '/MemTotal/ { print $2 " kB" }' /proc/meminfo)"
echo "guest: cgroup mounts: $(awk '$3 ~ /^cgroup/ { printf "%s %s; ", $3, $2 }' /proc/mounts)"
echo "guest: root cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
if grep -q '^[^ ]* [^ ]* cgroup ' /proc/mounts || [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
	echo "guest: FAIL: not a cgroup2-only system"
	verdict 0x30
fi

# The sandboxes' rootfs: the guest's own root, bound without the mounts on
# it (in a user namespace, a non-recursive bind of a mount with mounts on it
# fails with EINVAL: they are locked).
mkdir -p /srv/rootfs
mount --bind / /srv/rootfs
mount -o remount,bind,ro /srv/rootfs
export NSBOX_TEST_ROOTFS=/srv/rootfs NSBOX_TEST_MUST_WORK=1
summary=""
failed=0
# nsbox_vm_passes=a,b on the kernel command line (NSBOX_VM_PASSES of
# run-vm.sh) runs only the passes whose label starts with one of them.
only="$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nsbox_vm_passes=//p')"
pass() { # LABEL COMMAND...
	label="$1"
	shift
	if [ -n "$only" ]; then
		case ",$only," in
		*",${label%%[ :]*},"*) ;;
		*) return 0 ;;
		esac
	fi
	echo
	echo "==== $label ===="
	t0=$(date +%s)
	# Each test's verdict and time, without the list of other suites'.
	{
		"$@" --verbose
		echo $? >/tmp/pass-rc
	} 2>&1 | grep -v 'Test is disabled'
	rc=$(cat /tmp/pass-rc)
	t=$(($(date +%s) - t0))
	if [ "$rc" -eq 0 ]; then
		summary="$summary
ok    $label (${t}s)"
	else
		failed=1
		summary="$summary
FAIL  $label: exit $rc (${t}s)"
	fi
}

# Criterion's own timeouts bound every test; one job: the guest is slow and
# cgroup2_test looks at the one run cgroup alive.
# Not gigabyte_of_output_*: it measures the launcher's own memory, not a
# cgroup, and pushing 1 GiB through pipes takes 20 s per run here. Not
# timeout_without_json_*: it expects output within a 1 s timeout, less than
# Python's start-up at the default 0.5 CPU in this guest.
LIMITS="$P/bin/integration --jobs 1 --filter limits/!(gigabyte_of_output*|timeout_without_json*)"
# As the delegated user also not timeout_kills_a_busy_loop_within_a_second:
# the scope wrapper and the launcher's start (0.3 s to load its libraries
# here) do not fit its 1 s margin. cgroup2/timeout_* covers the kill.
LIMITS_DELEGATED="$P/bin/integration --jobs 1 --filter limits/!(gigabyte_of_output*|timeout_without_json*|timeout_kills_a_busy_loop*)"
# Many runs in a row: as root through the CLI (a launcher per run), as the
# delegated user through the library (one launcher, delegating once).
CGROUP2="$P/bin/cgroup2_test --jobs 1 --filter cgroup2/!(hundred_library_runs*)"
CGROUP2_DELEGATED="$P/bin/cgroup2_test --jobs 1 --filter cgroup2/!(twenty_cli_runs*)"
CGROUP2_SHARED="$P/bin/cgroup2_test --jobs 1 --filter cgroup2/@(json_limits*|sandbox_starts*|memory_limit*|timeout*)"
UNDELEGATED="$P/bin/cgroup2_test --jobs 1 --filter undelegated/*"
set -f # the filters are not globs for the shell

# 1. root
NSBOX_BIN=$P/bin/nsbox
export NSBOX_BIN
pass "root: integration limits/*" $LIMITS
pass "root: cgroup2_test cgroup2/*" $CGROUP2

# 1b. root from a cgroup it shares with other processes, as from a login
# shell's session scope: nsbox cannot use that cgroup, but root may make
# its own at the top of the hierarchy.
mkdir -p /sys/fs/cgroup/session-1.scope
in_session() {
	/bin/sh -c 'echo $$ >/sys/fs/cgroup/session-1.scope/cgroup.procs && exec "$@"' x "$@"
}
pass "shared root cgroup: cgroup2_test cgroup2/*" in_session $CGROUP2_SHARED

# 2. delegated user. What systemd sets up for user@.service with
# Delegate=yes, then what the user's manager does inside (a leaf for its
# own processes, controllers enabled for its children).
echo "+memory +pids +cpu" >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p /sys/fs/cgroup/user.slice "$DELEGATED"
echo "+memory +pids +cpu" >/sys/fs/cgroup/user.slice/cgroup.subtree_control
chown "$TEST_UID:$TEST_UID" "$DELEGATED" "$DELEGATED/cgroup.procs" \
	"$DELEGATED/cgroup.subtree_control" "$DELEGATED/cgroup.threads"
"$P/bin/vmhelper" as "$TEST_UID" "$TEST_UID" /bin/sh -c \
	"mkdir '$DELEGATED/harness' && echo '+memory +pids +cpu' >'$DELEGATED/cgroup.subtree_control'"
echo "guest: delegated $DELEGATED: $(stat -c %U "$DELEGATED"), subtree_control: $(cat "$DELEGATED/cgroup.subtree_control")"
in_harness_leaf() { # the test binary (root) sits in the delegated tree, so
	# its children may move into scopes there (common-ancestor rule)
	/bin/sh -c 'echo $$ >"$0/harness/cgroup.procs" && exec "$@"' "$DELEGATED" "$@"
}
NSBOX_BIN=$P/bin/nsbox-scoped NSBOX_TEST_USER=$TEST_USER NSBOX_VM_DELEGATED=$DELEGATED
export NSBOX_BIN NSBOX_TEST_USER NSBOX_VM_DELEGATED
pass "delegated $TEST_USER: integration limits/*" in_harness_leaf $LIMITS_DELEGATED
pass "delegated $TEST_USER: cgroup2_test cgroup2/*" in_harness_leaf $CGROUP2_DELEGATED

# 3. user without delegation: from the root cgroup, which it cannot write.
NSBOX_BIN=$P/bin/nsbox
pass "undelegated $TEST_USER: cgroup2_test undelegated/*" $UNDELEGATED

leftover="$(find /sys/fs/cgroup -mindepth 1 -type d -name 'nsbox-*')"
if [ -n "$leftover" ]; then
	failed=1
	summary="$summary
FAIL  run cgroups left behind: $leftover"
fi

echo
echo "==== check-vm summary ===="
echo "${summary#?}"
if [ "$failed" -eq 0 ]; then
	echo "check-vm: PASS"
	verdict 0x31
else
	echo "check-vm: FAIL"
	verdict 0x30
fi
