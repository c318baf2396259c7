#!/bin/bash
# The manual pages given: each renders with no warning from groff -ww, man
# reads it, and every nsbox page its SEE ALSO names is among them.
# Exit status: 0 clean, 1 a page failed (each failure printed).
set -u
fail=0
names=" "
for page in "$@"; do
	base=${page##*/}
	names+="${base%.*}(${base##*.}) "
done
for page in "$@"; do
	if [ ! -s "$page" ]; then
		echo "man: $page: missing or empty"
		fail=1
		continue
	fi
	warnings=$(LC_ALL=C.UTF-8 groff -ww -z -man "$page" 2>&1)
	if [ -n "$warnings" ]; then
		echo "man: $page: groff -ww:"
		echo "$warnings" | sed 's/^/  /'
		fail=1
	fi
	if ! MANWIDTH=80 LC_ALL=C.UTF-8 man -l "$page" 2>&1 >/dev/null | grep -q . &&
		MANWIDTH=80 man -l "$page" >/dev/null 2>&1; then
		:
	else
		echo "man: $page: man -l cannot render it"
		fail=1
	fi
	# SEE ALSO: .BR name (N) lines after the .SH SEE ALSO heading; the
	# project's own pages (nsbox*, libnsbox) must be among those given.
	while read -r ref; do
		case "$ref" in
		nsbox* | libnsbox*) ;;
		*) continue ;;
		esac
		case "$names" in
		*" $ref "*) ;;
		*) echo "man: $page: SEE ALSO names $ref, which is not among the pages"; fail=1 ;;
		esac
	done < <(sed -n '/^\.SH SEE ALSO/,/^\.SH/p' "$page" |
		sed -n 's/^\.BR* \([a-z0-9\\.-]*\) *(\([1-8]\)).*/\1(\2)/p' | sed 's/\\-/-/g')
done
echo "man: $# pages checked" >&2
exit "$fail"
