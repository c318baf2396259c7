#!/usr/bin/env bash
# Run nsbox's test suites (make check; NSBOX_BUILD=build or build-san):
#   1. $NSBOX_BUILD/tests/unit
#   2. $NSBOX_BUILD/tests/integration as the invoking user (root in CI)
#   3. $NSBOX_BUILD/tests/integration with NSBOX_TEST_USER=nsbox-test: the
#      harness stays root and drops to that unprivileged user to run nsbox.
#      Needs root; skipped otherwise (a failure when NSBOX_TEST_MUST_WORK=1).
#   4. passes 2 and 3 again with NSBOX_TEST_RUNTIME=runsc: every run under
#      gVisor (--runtime runsc). Skipped when runsc is not installed (a
#      failure when NSBOX_TEST_MUST_WORK=1); NSBOX_TEST_RUNSC=0 skips them.
#   5. $NSBOX_BUILD/tests/hostile (the corpus tests/hostile/*/*.py, library
#      hygiene, parent death) in the same four passes, when it was built.
#   6. tests/mcp/run.sh: nsbox mcp through the official MCP SDK client
#      (node --test), as the invoking user and as the test user. Skipped
#      when node or npm is missing (a failure when NSBOX_TEST_MUST_WORK=1).
#   7. tests/python/run.sh: the Python package (mypy --strict, pyflakes,
#      pytest against the CLI and real nsbox serve servers), as the invoking
#      user and as the test user.
#   8. tests/fleet/run.sh: three nsbox serve nodes behind HAProxy with the
#      shipped configuration, as the invoking user. Skipped when HAProxy is
#      missing (a failure when NSBOX_TEST_MUST_WORK=1).
# Exported to the test binaries: NSBOX_TEST_ROOTFS (tests/fixtures/rootfs.sh),
# NSBOX_BIN (the nsbox binary, copied where the test user can run it if the
# build directory is out of its reach) and, for pass 3, NSBOX_TEST_USER.
#
# A pass fails when its binary exits non-zero or when its output holds a
# sanitizer report: LeakSanitizer findings in a test's worker process do not
# fail the test in Criterion, so they are caught here. A pass that ran no
# test (an empty corpus, a filter that matches nothing) is a warning, and a
# failure when NSBOX_TEST_MUST_WORK=1.
#
# Sanitizer builds run with tests/lsan.supp (Criterion's own leak, see
# there) added to LSAN_OPTIONS.
#
# Speed: each pass gets a fresh NSBOX_TEST_CALIBRATION file, where the first
# test that needs it records how much slower than the reference machine a
# trivial run is here and now (tests/lib/harness.h, harness_time_scale); the
# tests scale their time bounds by it, and the summary shows it.
#
# Lanes: the passes run in two lanes side by side (see lane_runsc_self
# below), each pass printing its output as one block when it ends; the
# summary keeps one order. A pass alone leaves much of the machine idle;
# the time scale of each pass is measured under the load the lanes make
# together.
#
# Knobs: NSBOX_TEST_JOBS (Criterion --jobs; default 2), NSBOX_TEST_LANES (2,
# or 1: the passes one after another, output live), NSBOX_TEST_PASS_TIMEOUT
# (seconds per pass, default 1200), NSBOX_TEST_ARGS (extra Criterion
# options, e.g. "--filter 'limits/*'"), NSBOX_TEST_MUST_WORK=1 (CI: no pass
# may be skipped or run no test).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
build_arg="${NSBOX_BUILD:-build}"
must_work="${NSBOX_TEST_MUST_WORK:-0}"
pass_timeout="${NSBOX_TEST_PASS_TIMEOUT:-1200}"
extra_args=()
if [ -n "${NSBOX_TEST_ARGS:-}" ]; then
	# Word-split on purpose: it holds several options.
	read -r -a extra_args <<<"$NSBOX_TEST_ARGS"
fi

log() { printf 'run-tests: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[ -d "$build_arg" ] || die "build directory $build_arg not found (run make first)"
build="$(cd "$build_arg" && pwd -P)"
unit="$build/tests/unit"
integration="$build/tests/integration"
nsbox_bin="$build/nsbox"
for f in "$unit" "$integration" "$nsbox_bin"; do
	[ -x "$f" ] || die "$f missing (run: make check)"
done
jobs="${NSBOX_TEST_JOBS:-2}"
if readelf -d "$unit" 2>/dev/null | grep -q 'NEEDED.*libasan'; then
	export LSAN_OPTIONS="suppressions=$here/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
	export ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
	log "sanitizer build: LSAN_OPTIONS=$LSAN_OPTIONS ASAN_OPTIONS=$ASAN_OPTIONS"
fi

NSBOX_TEST_ROOTFS="$("$here/fixtures/rootfs.sh")" || die "could not get the test rootfs (tests/fixtures/rootfs.sh)"
export NSBOX_TEST_ROOTFS
export NSBOX_BIN="$nsbox_bin"
log "NSBOX_TEST_ROOTFS=$NSBOX_TEST_ROOTFS"
log "NSBOX_BIN=$NSBOX_BIN"

tmpdirs=()
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	local d
	for d in "${tmpdirs[@]}"; do
		rm -rf -- "$d"
	done
}
trap cleanup EXIT

# Each pass leaves its result in $results/NN (NN: its place in the summary):
# line 1 "<passed> <failed> <any_failed>", line 2 the summary line. The lanes
# below run in parallel, each in a subshell, so nothing is kept in shell
# variables across passes.
results="$(mktemp -d)"
tmpdirs+=("$results")
# The calibration files in it are the test user's too.
chmod 711 "$results"
# Whole pass outputs are printed under this lock, one block at a time.
print_lock="$results/print.lock"
: >"$print_lock"

record() { # SEQ PASSED FAILED ANY_FAILED SUMMARY_LINE
	printf '%s %s %s\n%s\n' "$2" "$3" "$4" "$5" >"$results/$1.tmp"
	mv -f -- "$results/$1.tmp" "$results/$1"
}

# show LABEL FILE: the pass's whole output, live when the lanes run one at a
# time, else as one block when the pass ends.
show_begin() { # LABEL FILE
	if [ "$lanes" -eq 1 ]; then
		printf '\n==== %s ====\n' "$1"
	fi
}
show_end() { # LABEL FILE
	if [ "$lanes" -gt 1 ]; then
		{
			flock 9
			printf '\n==== %s (ended at %s) ====\n' "$1" "$(date +%T)"
			cat -- "$2"
		} 9>>"$print_lock"
	fi
}
# out_sink FILE: where a pass's output goes (a pipe's reader).
out_sink() {
	if [ "$lanes" -eq 1 ]; then
		tee -- "$1"
	else
		cat >"$1"
	fi
}

# run_pass SEQ LABEL [VAR=VALUE...] -- BINARY
# Criterion exits 1 when a test logged a warning (cr_log_warn: the hostile
# harness's "too slow to judge", which reruns the case, and "ended before
# its RSS was sampled"), with every test passing: the passes run with
# --ignore-warnings and the summary counts the warnings. A pass that still
# exits non-zero with every test passing is run once more and the summary
# says so; any other failure is final.
run_pass() {
	local seq="$1"
	shift
	run_pass_once "$seq" "$@"
	if [ "$last_anomaly" -eq 1 ]; then
		log "$1: the runner exited non-zero with every test passing; running the pass again"
		run_pass_once "$seq" "$@"
		local counts line
		{
			read -r counts
			read -r line
		} <"$results/$seq"
		# shellcheck disable=SC2086 # three numbers
		record "$seq" $counts "$line (second run: the first exited non-zero with every test passing)"
	fi
}

last_anomaly=0
run_pass_once() {
	last_anomaly=0
	local seq="$1" label="$2"
	shift 2
	local envs=()
	while [ "$1" != "--" ]; do
		envs+=("$1")
		shift
	done
	shift
	local out rc line why tested=0 passing=0 failing=0 crashing=0 calib notes=""
	# A second run replaces what the first said failed.
	rm -f -- "$results/$seq.failed"
	out="$(mktemp -p "$results")"
	calib="$(mktemp -p "$results")"
	# Readable and writable by the test binary whoever it runs as.
	chmod 666 "$calib"
	show_begin "$label"
	local began=$SECONDS
	set +e
	env "${envs[@]}" NSBOX_TEST_CALIBRATION="$calib" timeout --kill-after=30 "$pass_timeout" \
		"$1" --jobs "$jobs" --ignore-warnings "${extra_args[@]}" 2>&1 | out_sink "$out"
	rc="${PIPESTATUS[0]}"
	set -e
	show_end "$label" "$out"
	# Criterion: "[====] Synthesis: Tested: 5 | Passing: 4 | Failing: 1 | Crashing: 0"
	line="$(grep -a 'Synthesis: Tested:' "$out" | tail -n1 || true)"
	if [ -n "$line" ]; then
		tested="$(sed -n 's/.*Tested: *\([0-9]*\).*/\1/p' <<<"$line")"
		passing="$(sed -n 's/.*Passing: *\([0-9]*\).*/\1/p' <<<"$line")"
		failing="$(sed -n 's/.*Failing: *\([0-9]*\).*/\1/p' <<<"$line")"
		crashing="$(sed -n 's/.*Crashing: *\([0-9]*\).*/\1/p' <<<"$line")"
	fi
	notes=" in $((SECONDS - began)) s"
	local warnings
	warnings="$(grep -ac '^\[WARN\]' "$out" || true)"
	if [ "${warnings:-0}" -gt 0 ]; then
		notes="$notes, $warnings warning(s) logged"
	fi
	if [ -s "$calib" ]; then
		# "<scale> <median ms>"
		notes="$notes$(awk '{ printf ", time scale %s (a trivial run took %s ms)", $1, $2 }' "$calib")"
	fi
	local bad=$((failing + crashing)) failed=0
	why="exit $rc"
	if [ "$rc" -eq 0 ] && grep -aqE 'ERROR: (Address|Leak|Memory|Thread)Sanitizer|runtime error:' "$out"; then
		rc=1
		why="sanitizer report in its output"
	fi
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && [ -n "$line" ] \
		&& [ "$failing" -eq 0 ] && [ "$crashing" -eq 0 ] && [ "$tested" -gt 0 ] \
		&& [ "$tested" -eq "$passing" ] && [ "$why" = "exit $rc" ]; then
		last_anomaly=1
	fi
	local summary_line
	if [ "$rc" -ne 0 ]; then
		failed=1
		# A failing exit with no failing test counted (timeout, crash of the
		# runner, sanitizer report at exit) still counts as one failure.
		[ "$bad" -gt 0 ] || bad=1
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			summary_line="FAIL  $label: timed out after ${pass_timeout}s$notes"
		else
			summary_line="FAIL  $label: $why; tested $tested, passing $passing, failing $failing, crashing $crashing$notes"
		fi
	elif [ "$tested" -eq 0 ] && [ "$must_work" = 1 ]; then
		# A pass that ran nothing proves nothing: in CI that is a failure.
		failed=1
		bad=1
		summary_line="FAIL  $label: ran no test (NSBOX_TEST_MUST_WORK=1)$notes"
	elif [ "$tested" -eq 0 ]; then
		summary_line="WARN  $label: ran no test"
	else
		summary_line="ok    $label: tested $tested, passing $passing$notes"
	fi
	record "$seq" "$passing" "$bad" "$failed" "$summary_line"
	if [ "$failed" -eq 1 ]; then
		# What failed, for the end of the log (CI keeps only its tail):
		# each failing test's name with the assertion lines before it.
		{
			printf '\n==== failed in: %s ====\n' "$label"
			grep -a -B12 '^\[FAIL\]' "$out" | grep -a -E '^\[(FAIL|----)\] *[^ ]' \
				| grep -av 'Running\|Synthesis' | tail -n 40
		} >"$results/$seq.failed" || true
	fi
}

skip_pass() { # SEQ LABEL REASON
	if [ "$must_work" = 1 ]; then
		record "$1" 0 1 1 "FAIL  $2: not run: $3 (NSBOX_TEST_MUST_WORK=1)"
	else
		record "$1" 0 0 0 "SKIP  $2: $3"
	fi
	log "SKIPPED $2: $3"
}

# nsbox mcp (tests/mcp): node's TAP summary ("# tests N", "# pass N",
# "# fail N") gives the counts.
run_mcp_pass() { # SEQ LABEL [VAR=VALUE...]
	local seq="$1" label="$2" out rc tested=0 passing=0 failing=0 began=$SECONDS
	shift 2
	out="$(mktemp -p "$results")"
	show_begin "$label"
	set +e
	env "$@" timeout --kill-after=30 "$pass_timeout" "$here/mcp/run.sh" 2>&1 | out_sink "$out"
	rc="${PIPESTATUS[0]}"
	set -e
	show_end "$label" "$out"
	tested="$(sed -n 's/^# tests \([0-9]*\)$/\1/p' "$out" | tail -n1)"
	passing="$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$out" | tail -n1)"
	failing="$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$out" | tail -n1)"
	tested="${tested:-0}" passing="${passing:-0}" failing="${failing:-0}"
	if [ "$rc" -ne 0 ] || [ "$failing" -gt 0 ] || { [ "$tested" -eq 0 ] && [ "$must_work" = 1 ]; }; then
		[ "$failing" -gt 0 ] || failing=1
		record "$seq" "$passing" "$failing" 1 "FAIL  $label: exit $rc; tested $tested, passing $passing in $((SECONDS - began)) s"
		{
			printf '\n==== failed in: %s ====\n' "$label"
			grep -a -E '^ *not ok ' "$out" | tail -n 20
		} >"$results/$seq.failed" || true
	else
		record "$seq" "$passing" 0 0 "ok    $label: tested $tested, passing $passing in $((SECONDS - began)) s"
	fi
}

# A pytest pass (tests/python/run.sh: mypy and pyflakes, then pytest;
# tests/fleet/run.sh), whose last line counts ("3 failed, 80 passed, 1
# skipped in 9s").
run_pytest_pass() { # SEQ LABEL SCRIPT [VAR=VALUE...]
	local seq="$1" label="$2" script="$3" out rc line passed=0 failed=0 errors=0 skipped=0 began=$SECONDS
	shift 3
	out="$(mktemp -p "$results")"
	show_begin "$label"
	set +e
	env "$@" timeout --kill-after=30 "$pass_timeout" "$script" 2>&1 | out_sink "$out"
	rc="${PIPESTATUS[0]}"
	set -e
	show_end "$label" "$out"
	line="$(grep -aE '^=*[ ]*[0-9]+ (passed|failed|error)' "$out" | tail -n1 || true)"
	passed="$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+' || true)"
	failed="$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+' || true)"
	errors="$(grep -oE '[0-9]+ errors?' <<<"$line" | grep -oE '[0-9]+' || true)"
	skipped="$(grep -oE '[0-9]+ skipped' <<<"$line" | grep -oE '[0-9]+' || true)"
	passed="${passed:-0}" failed="${failed:-0}" errors="${errors:-0}" skipped="${skipped:-0}"
	local bad=$((failed + errors)) tested=$((passed + failed + errors + skipped))
	if [ "$rc" -ne 0 ] || [ "$bad" -gt 0 ] || { [ "$must_work" = 1 ] && { [ "$passed" -eq 0 ] || [ "$skipped" -gt 0 ]; }; }; then
		[ "$bad" -gt 0 ] || bad=1
		record "$seq" "$passed" "$bad" 1 "FAIL  $label: exit $rc; tested $tested, passing $passed, skipped $skipped in $((SECONDS - began)) s"
		{
			printf '\n==== failed in: %s ====\n' "$label"
			grep -a -E '^(FAILED|ERROR|SKIPPED) |^E  |error:' "$out" | tail -n 40
		} >"$results/$seq.failed" || true
	else
		record "$seq" "$passed" 0 0 "ok    $label: tested $tested, passing $passed in $((SECONDS - began)) s"
	fi
}

# What the passes need, found before any lane starts.
runsc_bin="${NSBOX_RUNSC:-$(command -v runsc || true)}"
runsc_why=""
if [ "${NSBOX_TEST_RUNSC:-1}" = 0 ]; then
	runsc_why="NSBOX_TEST_RUNSC=0"
elif [ -z "$runsc_bin" ]; then
	runsc_why="runsc not installed (apt-get install runsc)"
fi

# user_why: why the passes as the unprivileged test user cannot run (empty
# when they can); then test_user, uid, gid and user_bin are set.
user_why=""
user_bin=""
if [ "$(id -u)" -ne 0 ]; then
	user_why="needs root to create and switch to the test user"
elif ! test_user="$("$here/fixtures/testuser.sh")"; then
	user_why="tests/fixtures/testuser.sh failed (see above)"
else
	uid="$(id -u "$test_user")"
	gid="$(id -g "$test_user")"
	as_user() {
		(cd / && setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all -- "$@")
	}
	user_bin="$NSBOX_BIN"
	if ! as_user test -x "$user_bin"; then
		# The build directory is out of the user's reach (e.g. under /root):
		# give it a copy in a directory it can traverse.
		bindir="$(mktemp -d /tmp/nsbox-test-bin.XXXXXX)"
		tmpdirs+=("$bindir")
		chmod 755 "$bindir"
		cp "$NSBOX_BIN" "$bindir/nsbox"
		chmod 755 "$bindir/nsbox"
		user_bin="$bindir/nsbox"
		log "$test_user cannot run $NSBOX_BIN; using a copy at $user_bin"
	fi
	if ! as_user test -x "$NSBOX_TEST_ROOTFS/usr/bin/python3"; then
		user_why="$test_user cannot reach $NSBOX_TEST_ROOTFS/usr/bin/python3 (check the modes of the rootfs and its parents)"
	fi
fi

hostile="$build/tests/hostile"
export NSBOX_HOSTILE_DIR="$here/hostile"
me="$(id -un) (uid $(id -u))"
user_label="unprivileged test user"
[ -n "$user_why" ] || user_label="$test_user (uid $uid)"

# The lanes: two sequences of passes that share nothing (each test makes
# its own directories, sockets and cgroups) and run side by side, since one
# pass leaves much of this machine idle (namespaces torn down, runs held to
# their CPU quota). Within a lane the passes run in turn; the summary keeps
# one order whatever the lanes. NSBOX_TEST_LANES=1 runs them one after
# another.
#   1. under runsc as the invoking user: integration, hostile. As root its
#      runs are held to the default cpus (0.5) by a cgroup: about one CPU.
#      Then native: hostile as both users, unit, mcp as both users,
#      image (the short passes, so that the lanes end together).
#   2. native: integration as the invoking user and as the test user.
#      Then under runsc as the test user (integration,
#      hostile): without a cgroup those runs take all the CPU they can, so
#      they come last, when lane 1 is on its native passes; beside another
#      runsc pass, gVisor's start-up alone made runs miss the default 5 s
#      timeout.
lane_runsc_self() {
	if [ -n "$runsc_why" ]; then
		skip_pass 03 "integration under runsc as $me" "$runsc_why"
		[ ! -x "$hostile" ] || skip_pass 07 "hostile under runsc as $me" "$runsc_why"
	else
		run_pass 03 "integration under runsc as $me" -u NSBOX_TEST_USER \
			NSBOX_TEST_RUNTIME=runsc -- "$integration"
		if [ -x "$hostile" ]; then
			run_pass 07 "hostile under runsc as $me" -u NSBOX_TEST_USER \
				NSBOX_TEST_RUNTIME=runsc -- "$hostile"
		fi
	fi
	if [ -x "$hostile" ]; then
		run_pass 06 "hostile as $me" -u NSBOX_TEST_USER -u NSBOX_TEST_RUNTIME -- "$hostile"
		if [ -n "$user_why" ]; then
			skip_pass 08 "hostile as $user_label" "$user_why"
		else
			run_pass 08 "hostile as $user_label" -u NSBOX_TEST_RUNTIME \
				NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin" -- "$hostile"
		fi
	fi
	run_pass 01 "unit" -- "$unit"
	local mcp_label="mcp (node, MCP SDK client)"
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		skip_pass 10 "$mcp_label" "node or npm not installed (tests/fixtures/deps.sh)"
	else
		run_mcp_pass 10 "$mcp_label as $me" -u NSBOX_TEST_USER -u NSBOX_TEST_RUNTIME
		if [ -n "$user_why" ]; then
			skip_pass 11 "$mcp_label as $user_label" "$user_why"
		else
			# Installed as root first: the test user only reads the cache.
			"$here/mcp/run.sh" --install-only >/dev/null
			run_mcp_pass 11 "$mcp_label as $user_label" -u NSBOX_TEST_RUNTIME \
				NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin"
		fi
	fi
	run_pytest_pass 13 "python (pytest) as $me" "$here/python/run.sh" -u NSBOX_TEST_USER \
		-u NSBOX_TEST_RUNTIME
	if [ -n "$user_why" ]; then
		skip_pass 14 "python (pytest) as $user_label" "$user_why"
	else
		run_pytest_pass 14 "python (pytest) as $user_label" "$here/python/run.sh" -u NSBOX_TEST_RUNTIME \
			NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin"
	fi
	# rootfs-tools: $NSBOX_BUILD/tests/image (store, layers, offline inputs,
	# registry client) when it was built, with NSBOX_IMAGE_BIN set. It drives
	# umoci, skopeo and docker-registry; without them the pass is skipped.
	local image_tests="$build/tests/image" tool image_missing=""
	if [ -x "$image_tests" ]; then
		for tool in umoci skopeo docker-registry; do
			command -v "$tool" >/dev/null 2>&1 || image_missing="$image_missing $tool"
		done
		if [ -n "$image_missing" ]; then
			skip_pass 12 "image" "missing:$image_missing (apt-get install$image_missing)"
		else
			run_pass 12 "image" NSBOX_IMAGE_BIN="$build/nsbox-image" -- "$image_tests"
		fi
	fi
}

# The fleet (tests/fleet/run.sh, make check-fleet): three nsbox serve nodes
# behind HAProxy, as the invoking user; skipped without HAProxy.
fleet_pass() {
	local haproxy="${NSBOX_HAPROXY:-/usr/sbin/haproxy}"
	if [ ! -x "$haproxy" ]; then
		skip_pass 15 "fleet (HAProxy, 3 nodes)" "HAProxy not installed (tests/fixtures/deps.sh)"
	else
		run_pytest_pass 15 "fleet (HAProxy, 3 nodes) as $me" "$here/fleet/run.sh" -u NSBOX_TEST_USER \
			-u NSBOX_TEST_RUNTIME
	fi
}

lane_native_then_runsc_user() {
	run_pass 02 "integration as $me" -u NSBOX_TEST_USER -u NSBOX_TEST_RUNTIME -- "$integration"
	if [ -n "$user_why" ]; then
		skip_pass 04 "integration as $user_label" "$user_why"
	else
		run_pass 04 "integration as $user_label" -u NSBOX_TEST_RUNTIME \
			NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin" -- "$integration"
	fi
	fleet_pass
	local why="${user_why:-$runsc_why}"
	if [ -n "$why" ]; then
		skip_pass 05 "integration under runsc as $user_label" "$why"
		[ ! -x "$hostile" ] || skip_pass 09 "hostile under runsc as $user_label" "$why"
		return 0
	fi
	run_pass 05 "integration under runsc as $user_label" NSBOX_TEST_RUNTIME=runsc \
		NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin" -- "$integration"
	if [ -x "$hostile" ]; then
		run_pass 09 "hostile under runsc as $user_label" NSBOX_TEST_RUNTIME=runsc \
			NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin" -- "$hostile"
	fi
}

lanes="${NSBOX_TEST_LANES:-2}"
case "$lanes" in
1 | 2) ;;
*) die "NSBOX_TEST_LANES must be 1 or 2, not '$lanes'" ;;
esac
if [ "$lanes" -eq 1 ]; then
	lane_native_then_runsc_user
	lane_runsc_self
else
	log "two lanes side by side (NSBOX_TEST_LANES=1 runs them in turn); each pass prints its output when it ends"
	lane_pids=()
	lane_runsc_self &
	lane_pids+=("$!")
	lane_native_then_runsc_user &
	lane_pids+=("$!")
fi

summary=()
total_passed=0
total_failed=0
any_failed=0
if [ "$lanes" -gt 1 ]; then
	# A lane that stopped on an error of its own (not a test's: those are
	# recorded) may have left passes unrun: that is a failure.
	for pid in "${lane_pids[@]}"; do
		rc=0
		wait "$pid" || rc=$?
		if [ "$rc" -ne 0 ]; then
			summary+=("FAIL  a lane stopped with status $rc before its last pass (see above)")
			any_failed=1
			total_failed=$((total_failed + 1))
		fi
	done
fi
for f in "$results"/[0-9][0-9]; do
	[ -e "$f" ] || continue
	{
		read -r p b a
		read -r line
	} <"$f"
	summary+=("$line")
	total_passed=$((total_passed + p))
	total_failed=$((total_failed + b))
	[ "$a" -eq 0 ] || any_failed=1
done
if ! compgen -G "$results/[0-9][0-9]" >/dev/null; then
	summary+=("FAIL  no pass recorded a result")
	any_failed=1
	total_failed=$((total_failed + 1))
fi

printf '\n==== summary (%s) ====\n' "$build_arg"
printf '%s\n' "${summary[@]}"
for f in "$results"/[0-9][0-9].failed; do
	[ -e "$f" ] || continue
	cat -- "$f"
done
printf 'tests: %d passed, %d failed\n' "$total_passed" "$total_failed"
exit "$any_failed"
