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
# Knobs: NSBOX_TEST_JOBS (Criterion --jobs; default 2), NSBOX_TEST_PASS_TIMEOUT
# (seconds per pass, default 600), NSBOX_TEST_ARGS (extra Criterion options,
# e.g. "--filter 'limits/*'"), NSBOX_TEST_MUST_WORK=1 (CI: no pass may be
# skipped or run no test).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
build_arg="${NSBOX_BUILD:-build}"
must_work="${NSBOX_TEST_MUST_WORK:-0}"
pass_timeout="${NSBOX_TEST_PASS_TIMEOUT:-600}"
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

# Per-pass results, and the totals for the closing line.
summary=()
total_passed=0
total_failed=0
any_failed=0

# run_pass LABEL [VAR=VALUE...] -- BINARY
# Criterion exits 1 when a test logged a warning (cr_log_warn: the hostile
# harness's "too slow to judge", which reruns the case, and "ended before
# its RSS was sampled"), with every test passing: the passes run with
# --ignore-warnings and the summary counts the warnings. A pass that still
# exits non-zero with every test passing is run once more and the summary
# says so; any other failure is final.
run_pass() {
	local before_failed="$total_failed" before_passed="$total_passed" before_any="$any_failed"
	run_pass_once "$@"
	if [ "$last_anomaly" -eq 1 ]; then
		total_failed="$before_failed"
		total_passed="$before_passed"
		any_failed="$before_any"
		unset 'summary[${#summary[@]}-1]'
		log "$1: the runner exited non-zero with every test passing; running the pass again"
		run_pass_once "$@"
		summary[${#summary[@]}-1]="${summary[${#summary[@]}-1]} (second run: the first exited non-zero with every test passing)"
	fi
}

last_anomaly=0
run_pass_once() {
	last_anomaly=0
	local label="$1"
	shift
	local envs=()
	while [ "$1" != "--" ]; do
		envs+=("$1")
		shift
	done
	shift
	local out rc line why tested=0 passing=0 failing=0 crashing=0 calib notes=""
	out="$(mktemp)"
	calib="$(mktemp)"
	tmpdirs+=("$out" "$calib")
	# Readable and writable by the test binary whoever it runs as.
	chmod 666 "$calib"
	printf '\n==== %s ====\n' "$label"
	local began=$SECONDS
	set +e
	env "${envs[@]}" NSBOX_TEST_CALIBRATION="$calib" timeout --kill-after=30 "$pass_timeout" \
		"$1" --jobs "$jobs" --ignore-warnings "${extra_args[@]}" 2>&1 | tee "$out"
	rc="${PIPESTATUS[0]}"
	set -e
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
	local bad=$((failing + crashing))
	total_passed=$((total_passed + passing))
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
	if [ "$rc" -ne 0 ]; then
		any_failed=1
		# A failing exit with no failing test counted (timeout, crash of the
		# runner, sanitizer report at exit) still counts as one failure.
		[ "$bad" -gt 0 ] || bad=1
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			summary+=("FAIL  $label: timed out after ${pass_timeout}s$notes")
		else
			summary+=("FAIL  $label: $why; tested $tested, passing $passing, failing $failing, crashing $crashing$notes")
		fi
	elif [ "$tested" -eq 0 ] && [ "$must_work" = 1 ]; then
		# A pass that ran nothing proves nothing: in CI that is a failure.
		any_failed=1
		bad=1
		summary+=("FAIL  $label: ran no test (NSBOX_TEST_MUST_WORK=1)$notes")
	elif [ "$tested" -eq 0 ]; then
		summary+=("WARN  $label: ran no test")
	else
		summary+=("ok    $label: tested $tested, passing $passing$notes")
	fi
	total_failed=$((total_failed + bad))
}

skip_pass() { # LABEL REASON
	if [ "$must_work" = 1 ]; then
		summary+=("FAIL  $1: not run: $2 (NSBOX_TEST_MUST_WORK=1)")
		any_failed=1
		total_failed=$((total_failed + 1))
	else
		summary+=("SKIP  $1: $2")
	fi
	log "SKIPPED $1: $2"
}

run_pass "unit" -- "$unit"
run_pass "integration as $(id -un) (uid $(id -u))" -u NSBOX_TEST_USER -u NSBOX_TEST_RUNTIME \
	-- "$integration"

runsc_bin="${NSBOX_RUNSC:-$(command -v runsc || true)}"
runsc_why=""
if [ "${NSBOX_TEST_RUNSC:-1}" = 0 ]; then
	runsc_why="NSBOX_TEST_RUNSC=0"
elif [ -z "$runsc_bin" ]; then
	runsc_why="runsc not installed (apt-get install runsc)"
fi
if [ -z "$runsc_why" ]; then
	run_pass "integration under runsc as $(id -un) (uid $(id -u))" -u NSBOX_TEST_USER \
		NSBOX_TEST_RUNTIME=runsc -- "$integration"
else
	skip_pass "integration under runsc as $(id -un)" "$runsc_why"
fi

user_label="integration as unprivileged test user"
if [ "$(id -u)" -ne 0 ]; then
	skip_pass "$user_label" "needs root to create and switch to the test user"
	skip_pass "$user_label under runsc" "needs root to create and switch to the test user"
elif ! test_user="$("$here/fixtures/testuser.sh")"; then
	skip_pass "$user_label" "tests/fixtures/testuser.sh failed (see above)"
	skip_pass "$user_label under runsc" "tests/fixtures/testuser.sh failed (see above)"
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
		skip_pass "$user_label" "$test_user cannot reach $NSBOX_TEST_ROOTFS/usr/bin/python3 (check the modes of the rootfs and its parents)"
	else
		run_pass "integration as $test_user (uid $uid)" -u NSBOX_TEST_RUNTIME \
			NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin" -- "$integration"
		if [ -z "$runsc_why" ]; then
			run_pass "integration under runsc as $test_user (uid $uid)" \
				NSBOX_TEST_RUNTIME=runsc NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin" \
				-- "$integration"
		else
			skip_pass "$user_label under runsc" "$runsc_why"
		fi
	fi
fi

# The hostile corpus: the same four passes as the integration suite, with
# NSBOX_HOSTILE_DIR naming the corpus.
hostile="$build/tests/hostile"
if [ -x "$hostile" ]; then
	export NSBOX_HOSTILE_DIR="$here/hostile"
	run_pass "hostile as $(id -un) (uid $(id -u))" -u NSBOX_TEST_USER -u NSBOX_TEST_RUNTIME \
		-- "$hostile"
	if [ -z "$runsc_why" ]; then
		run_pass "hostile under runsc as $(id -un) (uid $(id -u))" -u NSBOX_TEST_USER \
			NSBOX_TEST_RUNTIME=runsc -- "$hostile"
	else
		skip_pass "hostile under runsc as $(id -un)" "$runsc_why"
	fi
	if [ -n "${user_bin:-}" ] && as_user test -x "$NSBOX_TEST_ROOTFS/usr/bin/python3"; then
		run_pass "hostile as $test_user (uid $uid)" -u NSBOX_TEST_RUNTIME \
			NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin" -- "$hostile"
		if [ -z "$runsc_why" ]; then
			run_pass "hostile under runsc as $test_user (uid $uid)" NSBOX_TEST_RUNTIME=runsc \
				NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin" -- "$hostile"
		else
			skip_pass "hostile as unprivileged test user under runsc" "$runsc_why"
		fi
	else
		skip_pass "hostile as unprivileged test user" "no usable test user (see above)"
	fi
fi

# nsbox mcp (tests/mcp): node's TAP summary ("# tests N", "# pass N",
# "# fail N") gives the counts.
run_mcp_pass() { # LABEL [VAR=VALUE...]
	local label="$1" out rc tested=0 passing=0 failing=0 began=$SECONDS
	shift
	out="$(mktemp)"
	tmpdirs+=("$out")
	printf '\n==== %s ====\n' "$label"
	set +e
	env "$@" timeout --kill-after=30 "$pass_timeout" "$here/mcp/run.sh" 2>&1 | tee "$out"
	rc="${PIPESTATUS[0]}"
	set -e
	tested="$(sed -n 's/^# tests \([0-9]*\)$/\1/p' "$out" | tail -n1)"
	passing="$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$out" | tail -n1)"
	failing="$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$out" | tail -n1)"
	tested="${tested:-0}" passing="${passing:-0}" failing="${failing:-0}"
	total_passed=$((total_passed + passing))
	if [ "$rc" -ne 0 ] || [ "$failing" -gt 0 ] || { [ "$tested" -eq 0 ] && [ "$must_work" = 1 ]; }; then
		any_failed=1
		[ "$failing" -gt 0 ] || failing=1
		total_failed=$((total_failed + failing))
		summary+=("FAIL  $label: exit $rc; tested $tested, passing $passing in $((SECONDS - began)) s")
	else
		summary+=("ok    $label: tested $tested, passing $passing in $((SECONDS - began)) s")
	fi
}

mcp_label="mcp (node, MCP SDK client)"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	skip_pass "$mcp_label" "node or npm not installed (tests/fixtures/deps.sh)"
else
	run_mcp_pass "$mcp_label as $(id -un) (uid $(id -u))" -u NSBOX_TEST_USER -u NSBOX_TEST_RUNTIME
	if [ -n "${user_bin:-}" ] && as_user test -x "$NSBOX_TEST_ROOTFS/usr/bin/python3"; then
		# Installed as root first: the test user only reads the cache.
		"$here/mcp/run.sh" --install-only >/dev/null
		run_mcp_pass "$mcp_label as $test_user (uid $uid)" -u NSBOX_TEST_RUNTIME \
			NSBOX_TEST_USER="$test_user" NSBOX_BIN="$user_bin"
	else
		skip_pass "$mcp_label as unprivileged test user" "no usable test user (see above)"
	fi
fi

# rootfs-tools: $NSBOX_BUILD/tests/image (store, layers, offline inputs,
# registry client) when it was built, with NSBOX_IMAGE_BIN set. It drives
# umoci, skopeo and docker-registry; without them the pass is skipped.
image_tests="$build/tests/image"
if [ -x "$image_tests" ]; then
	image_missing=""
	for tool in umoci skopeo docker-registry; do
		command -v "$tool" >/dev/null 2>&1 || image_missing="$image_missing $tool"
	done
	if [ -n "$image_missing" ]; then
		skip_pass "image" "missing:$image_missing (apt-get install$image_missing)"
	else
		run_pass "image" NSBOX_IMAGE_BIN="$build/nsbox-image" -- "$image_tests"
	fi
fi

printf '\n==== summary (%s) ====\n' "$build_arg"
printf '%s\n' "${summary[@]}"
printf 'tests: %d passed, %d failed\n' "$total_passed" "$total_failed"
exit "$any_failed"
