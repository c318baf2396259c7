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
#   4. systemd: the summary so far is saved and systemd is exec'd as PID 1
#      (the guest image has systemd, D-Bus, logind and the user bus); it
#      runs this script again, as `guest-init.sh systemd`, from a service.
#      `loginctl enable-linger` starts user@UID.service, and the test user,
#      started from the service's cgroup (root's, not delegated), gets a
#      delegated scope from its systemd user instance: userscope/* and part
#      of cgroup2/*
# shellcheck disable=SC2086 # $LIMITS & co. are command lines, split on purpose
P=/opt/nsbox
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export LD_LIBRARY_PATH=$P/lib
export HOME=/root LANG=C.UTF-8
TEST_USER=nsbox-test
TEST_UID=990
DELEGATED=/sys/fs/cgroup/user.slice/user@$TEST_UID.service
STATE=/var/lib/nsbox-vm # the summary of passes 1-3, across the exec of systemd
# The bounds of the tests run here were tuned in this guest, where qemu's
# TCG makes a trivial run take about 1.2 s, not the host's 25 ms: that is
# the reference the tests' speed calibration measures against
# (tests/lib/harness.h).
NSBOX_TEST_REFERENCE_MS=1200

verdict() {
	"$P/bin/vmhelper" exit "$1"
	echo o >/proc/sysrq-trigger
}

# nsbox_vm_passes=a,b on the kernel command line (NSBOX_VM_PASSES of
# run-vm.sh) runs only the passes whose label starts with one of them.
selected() { # LABEL
	[ -z "$only" ] && return 0
	case ",$only," in
	*",${1%%[ :]*},"*) return 0 ;;
	esac
	return 1
}

pass() { # LABEL COMMAND...
	label="$1"
	shift
	selected "$label" || return 0
	echo
	echo "==== $label ===="
	t0=$(date +%s)
	# The pass's speed calibration (tests/lib/harness.h): measured once by
	# its first test that needs it, shared by the rest.
	NSBOX_TEST_CALIBRATION="$(mktemp /tmp/calibration.XXXXXX)"
	chmod 666 "$NSBOX_TEST_CALIBRATION"
	export NSBOX_TEST_CALIBRATION
	# Each test's verdict and time, without the list of other suites'.
	{
		"$@" --verbose
		echo $? >/tmp/pass-rc
	} 2>&1 | grep -v 'Test is disabled'
	rc=$(cat /tmp/pass-rc)
	t=$(($(date +%s) - t0))
	scale="$(awk '{ printf ", time scale %s (a trivial run took %s ms)", $1, $2 }' "$NSBOX_TEST_CALIBRATION")"
	rm -f "$NSBOX_TEST_CALIBRATION"
	unset NSBOX_TEST_CALIBRATION
	if [ "$rc" -eq 0 ]; then
		summary="$summary
ok    $label (${t}s$scale)"
	else
		failed=1
		summary="$summary
FAIL  $label: exit $rc (${t}s$scale)"
	fi
}

check_leftovers() { # WHAT
	leftover="$(find /sys/fs/cgroup -mindepth 1 -type d -name 'nsbox-*')"
	if [ -n "$leftover" ]; then
		failed=1
		summary="$summary
FAIL  $1 left behind: $leftover"
	fi
}

finish() {
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
}

# 4. The systemd pass (see the end of the first stage).
USERSCOPE="$P/bin/cgroup2_test --jobs 1 --filter userscope/*"
# Not the many-runs cases: twenty_cli_runs compares the cgroup tree right
# after each launcher exits, while systemd removes a launcher's scope a
# moment later; hundred_library_runs makes its own delegated scopes.
# userscope/* covers both, waiting for systemd.
CGROUP2_USERSCOPE="$P/bin/cgroup2_test --jobs 1 --filter cgroup2/!(twenty_cli_runs*|hundred_library_runs*)"

# nsbox as the test user through runuser from this shell's cgroup, as from
# a root shell: --strict runs only with cgroup limits (else nsbox says why),
# and the JSON result says cgroup2.
# shellcheck disable=SC2016,SC2317 # a script for the inner sh; called by pass
runuser_nsbox() {
	out="$(printf 'print("ok")\n' | runuser -u "$TEST_USER" -- /bin/sh -c \
		'echo "started in $(cat /proc/self/cgroup)" >&2; exec "$0" "$@"' \
		"$P/bin/nsbox" run --rootfs "$NSBOX_TEST_ROOTFS" --strict --json 2>&1)"
	echo "$out"
	case "$out" in
	*'"limits":{"memory":"cgroup2","cpus":"cgroup2","pids":"cgroup2"'*) return 0 ;;
	esac
	return 1
}

systemd_pass() {
	echo "guest: $(systemctl --version | head -n 1); system $(systemctl is-system-running)"
	loginctl enable-linger "$TEST_USER" || echo "guest: loginctl enable-linger $TEST_USER failed"
	bus=/run/user/$TEST_UID/bus
	i=0
	while [ ! -S "$bus" ] && [ "$i" -lt 600 ] && ! systemctl -q is-failed "user@$TEST_UID.service"; do
		sleep 0.2
		i=$((i + 1))
	done
	echo "guest: user@$TEST_UID.service $(systemctl is-active "user@$TEST_UID.service"), $bus after $((i / 5))s: $(stat -c '%F %U' "$bus" 2>&1)"
	systemctl -q is-active "user@$TEST_UID.service" ||
		systemctl status --no-pager "user@$TEST_UID.service"
	own="$(sed -n 's/^0:://p' /proc/self/cgroup)"
	echo "guest: this shell's cgroup $own, owned by $(stat -c %U "/sys/fs/cgroup$own")"
	export XDG_RUNTIME_DIR=/run/user/$TEST_UID NSBOX_BIN=$P/bin/nsbox
	who="systemd $TEST_USER from root's cgroup"
	pass "$who: runuser nsbox --json" runuser_nsbox
	NSBOX_TEST_USER=$TEST_USER
	export NSBOX_TEST_USER
	pass "$who: cgroup2_test userscope/*" $USERSCOPE
	pass "$who: cgroup2_test cgroup2/*" $CGROUP2_USERSCOPE
	# systemd removes an empty scope soon, not at once.
	i=0
	while [ -n "$(find /sys/fs/cgroup -mindepth 1 -type d -name 'nsbox-*')" ] && [ "$i" -lt 50 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	if [ "$failed" -ne 0 ]; then
		echo
		echo "==== journal (last 150 lines but the kernel's) ===="
		journalctl -b --no-pager -o short-monotonic | grep -v ' kernel: ' | tail -n 150
	fi
}

if [ "${1:-}" = systemd ]; then
	only="$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nsbox_vm_passes=//p')"
	summary="$(cat "$STATE/summary")"
	failed="$(cat "$STATE/failed")"
	export NSBOX_TEST_ROOTFS=/srv/rootfs NSBOX_TEST_MUST_WORK=1 NSBOX_TEST_REFERENCE_MS
	set -f # the filters are not globs for the shell
	systemd_pass
	check_leftovers "scopes or run cgroups"
	finish
	exit 1 # no verdict: check-vm.service fails and the guest powers off
fi

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p /dev/shm /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
hostname nsbox-vm

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
export NSBOX_TEST_ROOTFS=/srv/rootfs NSBOX_TEST_MUST_WORK=1 NSBOX_TEST_REFERENCE_MS
summary=""
failed=0
only="$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nsbox_vm_passes=//p')"

# Criterion's own timeouts bound every test; one job: the guest is slow and
# cgroup2_test looks at the one run cgroup alive.
# Not gigabyte_of_output_*: it measures the launcher's own memory, not a
# cgroup, and pushing 1 GiB through pipes takes 20 s per run here. Not
# timeout_without_json_*: it expects output within a 1 s timeout, less than
# Python's start-up at the default 0.5 CPU in this guest. Not
# a_dying_gvisor_kernel_*: the guest has no runsc (the host passes run it).
LIMITS="$P/bin/integration --jobs 1 --filter limits/!(gigabyte_of_output*|timeout_without_json*|a_dying_gvisor_kernel*)"
# As the delegated user also not timeout_kills_a_busy_loop_within_a_second:
# the scope wrapper and the launcher's start (0.3 s to load its libraries
# here) do not fit its 1 s margin. cgroup2/timeout_* covers the kill.
LIMITS_DELEGATED="$P/bin/integration --jobs 1 --filter limits/!(gigabyte_of_output*|timeout_without_json*|timeout_kills_a_busy_loop*|a_dying_gvisor_kernel*)"
# Many runs in a row: as root through the CLI (a launcher per run), as the
# delegated user through the library (one launcher, delegating once).
CGROUP2="$P/bin/cgroup2_test --jobs 1 --filter cgroup2/!(hundred_library_runs*)"
CGROUP2_DELEGATED="$P/bin/cgroup2_test --jobs 1 --filter cgroup2/!(twenty_cli_runs*)"
CGROUP2_SHARED="$P/bin/cgroup2_test --jobs 1 --filter cgroup2/@(json_limits*|sandbox_starts*|memory_limit*|timeout*)"
UNDELEGATED="$P/bin/cgroup2_test --jobs 1 --filter undelegated/*"
# The warm pool under cgroup v2 (entries started into their cgroups, CPU
# time read from cpu.stat, cgroup.kill). Not many_runs_*: 300 runs in a row
# are the host passes' job, too slow here.
POOL="$P/bin/integration --jobs 1 --filter pool/!(many_runs*)"
set -f # the filters are not globs for the shell

# 1. root
NSBOX_BIN=$P/bin/nsbox
export NSBOX_BIN
pass "root: integration limits/*" $LIMITS
pass "root: cgroup2_test cgroup2/*" $CGROUP2
pass "root: integration pool/*" $POOL

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
# The harness's host probe cannot see inside the wrapper: it is told where
# each CLI launcher starts (library runs stay in the harness's cgroup).
NSBOX_BIN=$P/bin/nsbox-scoped NSBOX_TEST_USER=$TEST_USER NSBOX_VM_DELEGATED=$DELEGATED
NSBOX_TEST_LAUNCHER_CGROUP=$DELEGATED
export NSBOX_BIN NSBOX_TEST_USER NSBOX_VM_DELEGATED NSBOX_TEST_LAUNCHER_CGROUP
pass "delegated $TEST_USER: integration limits/*" in_harness_leaf $LIMITS_DELEGATED
pass "delegated $TEST_USER: cgroup2_test cgroup2/*" in_harness_leaf $CGROUP2_DELEGATED
pass "delegated $TEST_USER: integration pool/*" in_harness_leaf $POOL

# 3. user without delegation: from the root cgroup, which it cannot write.
NSBOX_BIN=$P/bin/nsbox
unset NSBOX_TEST_LAUNCHER_CGROUP
pass "undelegated $TEST_USER: cgroup2_test undelegated/*" $UNDELEGATED

check_leftovers "run cgroups"

# 4. systemd as PID 1 runs this script again (`guest-init.sh systemd`, see
# systemd_pass above) from check-vm.service, the one unit of its default
# target besides what logind and D-Bus pull in.
if selected systemd; then
	mkdir -p "$STATE" /etc/systemd/system
	printf '%s' "$summary" >"$STATE/summary"
	echo "$failed" >"$STATE/failed"
	cat >/etc/systemd/system/check-vm.service <<-EOF
		[Unit]
		Description=nsbox check-vm: the systemd pass
		Wants=dbus.socket systemd-logind.service
		After=dbus.socket systemd-logind.service
		FailureAction=poweroff-force

		[Service]
		Type=oneshot
		ExecStart=$P/guest-init.sh systemd
		StandardInput=null
		StandardOutput=tty
		StandardError=inherit
		TTYPath=/dev/ttyS0
		TimeoutStartSec=infinity
	EOF
	cat >/etc/systemd/system/check-vm.target <<-EOF
		[Unit]
		Description=nsbox check-vm
		Requires=check-vm.service
		After=check-vm.service
	EOF
	ln -sf check-vm.target /etc/systemd/system/default.target
	# Every cgroup of the passes above is empty now: systemd starts on a
	# clean tree.
	find /sys/fs/cgroup -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
	unset LD_LIBRARY_PATH
	echo
	echo "==== exec systemd ===="
	exec /lib/systemd/systemd
fi
finish
