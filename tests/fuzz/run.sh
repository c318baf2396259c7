#!/usr/bin/env bash
# Runs libFuzzer targets (make fuzz / make fuzz-ci): each for SECONDS, from
# its seeds in tests/fuzz/corpus/<target>/ plus what earlier runs found in
# BUILD/corpus/<target>/ (new inputs go there, never into the seeds).
# Crashes, leaks, timeouts and out-of-memory inputs are written to
# BUILD/artifacts/<target>-*. Prints executions and findings per target;
# fails when any target found something.
#
# usage: run.sh BUILD SECONDS TARGET...
# Knobs: FUZZ_TIMEOUT (seconds per input, default 30), FUZZ_ARGS (extra
# libFuzzer options).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
build="$1"
seconds="$2"
shift 2
per_input="${FUZZ_TIMEOUT:-30}"
extra=()
if [ -n "${FUZZ_ARGS:-}" ]; then
	# Word-split on purpose: it holds several options.
	read -r -a extra <<<"$FUZZ_ARGS"
fi

mkdir -p "$build/artifacts"
summary=()
failed=0
for target in "$@"; do
	corpus="$build/corpus/$target"
	log="$build/$target.log"
	mkdir -p "$corpus"
	before="$(find "$build/artifacts" -name "$target-*" | wc -l)"
	printf '\n==== fuzz %s (%ss) ====\n' "$target" "$seconds"
	set +e
	"$build/$target" -max_total_time="$seconds" -timeout="$per_input" -print_final_stats=1 \
		-artifact_prefix="$build/artifacts/$target-" "${extra[@]}" \
		"$corpus" "$here/corpus/$target" >"$log" 2>&1
	rc=$?
	set -e
	grep -aE '^(INFO: seed corpus|#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)' \
		"$log" || true
	execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)"
	found=$(($(find "$build/artifacts" -name "$target-*" | wc -l) - before))
	if [ "$rc" -ne 0 ]; then
		failed=1
		[ "$found" -gt 0 ] || found=1
		tail -n 40 "$log"
		summary+=("FAIL  $target: ${execs:-?} executions, $found finding(s) in $build/artifacts/ (log $log)")
	else
		summary+=("ok    $target: ${execs:-?} executions, 0 findings")
	fi
done

printf '\n==== fuzz summary (%ss per target) ====\n' "$seconds"
printf '%s\n' "${summary[@]}"
exit "$failed"
