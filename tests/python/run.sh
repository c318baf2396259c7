#!/usr/bin/env bash
# The Python package's pass: mypy --strict over the package and its tests,
# pyflakes, then pytest (tests/python), as the invoking user or, with
# NSBOX_TEST_USER, as that user (setpriv, no capabilities). Needs NSBOX_BIN
# and NSBOX_TEST_ROOTFS (tests/run-tests.sh exports both); nothing is
# written into the source tree (no bytecode, no pytest cache).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
py=/usr/bin/python3
[ -x "$py" ] || py="$(command -v python3)"

for m in pytest mypy pyflakes; do
	if ! "$py" -c "import $m" 2>/dev/null; then
		echo "tests/python: $py has no $m (tests/fixtures/deps.sh installs it)" >&2
		exit 1
	fi
done

export PYTHONDONTWRITEBYTECODE=1
cd "$repo"
# Static checks: their caches go to a scratch directory.
scratch="$(mktemp -d)"
trap 'rm -rf -- "$scratch"' EXIT
"$py" -m mypy --strict --cache-dir "$scratch/mypy" src/python
MYPYPATH=src/python:tests/python "$py" -m mypy --strict --explicit-package-bases \
	--cache-dir "$scratch/mypy-tests" tests/python
"$py" -m pyflakes src/python tests/python
echo "tests/python: mypy --strict and pyflakes are clean"

args=(-p no:cacheprovider -q -rfEs "$@")
if [ -n "${NSBOX_TEST_USER:-}" ]; then
	uid="$(id -u "$NSBOX_TEST_USER")"
	gid="$(id -g "$NSBOX_TEST_USER")"
	base="$(mktemp -d /tmp/nsbox-pytest.XXXXXX)"
	chown "$uid:$gid" "$base"
	trap 'rm -rf -- "$scratch" "$base"' EXIT
	home="$(getent passwd "$NSBOX_TEST_USER" | cut -d: -f6)"
	status=0
	setpriv --reuid="$uid" --regid="$gid" --clear-groups --inh-caps=-all -- \
		env -u XDG_RUNTIME_DIR HOME="$home" TMPDIR="$base" "$py" -m pytest "${args[@]}" \
		--basetemp "$base/t" tests/python || status=$?
	exit "$status"
fi
status=0
"$py" -m pytest "${args[@]}" tests/python || status=$?
exit "$status"
