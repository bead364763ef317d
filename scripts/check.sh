#!/bin/sh
# check.sh BUILD_DIR [CTEST_ARGS...] — runs the test suite (ctest) and ends with what did
# not run and why.
#
# ctest counts a Criterion binary whose tests skipped themselves (no root for a network
# namespace, no tshark, no rdma-core programs) as passed, so "100% tests passed" alone
# can hide whole groups. Every Criterion binary writes a JSON report (test/CMakeLists.txt
# passes --json=BUILD/test-reports/NAME.json); a script test that cannot run exits 77
# (ctest: "Skipped") after printing "NAME: SKIPPED: reason". This script reads both after
# the run and lists every skipped group with its reasons, and the groups that were not
# built at all. It exits with ctest's status: skipping is reported, not a failure.
set -u

build=${1:-build}
[ $# -gt 0 ] && shift
reports=$build/test-reports
rm -f "$reports"/*.json 2>/dev/null
mkdir -p "$reports"

(cd "$build" && ctest --output-on-failure -j 1 "$@")
rc=$?

summary=$(mktemp "${TMPDIR:-/tmp}/svcheck.XXXXXX") || exit 2
trap 'rm -f "$summary"' EXIT INT TERM

# Criterion's JSON report, one key per line: a test's "status" line is followed by its
# "messages" line. Prints "REPORT<TAB>reason" once per reason, with the count of tests.
for f in "$reports"/*.json; do
	[ -e "$f" ] || continue
	name=$(basename "$f" .json | sed "s,_,/,")
	awk -v name="$name" '
		/"status": "SKIPPED"/ { skipped = 1; next }
		skipped && /"messages":/ {
			m = $0
			sub(/^[^[]*\[ *"/, "", m); sub(/" *\].*$/, "", m)
			if (m == "" || m == "The test was skipped.") m = "skipped by its test"
			n[m]++; skipped = 0; next
		}
		/"status":/ { skipped = 0 }
		END { for (m in n) printf "%s\t%d test(s): %s\n", name, n[m], m }
	' "$f" >>"$summary"
done
# Script tests that exited 77: their own line says why.
if [ -f "$build/Testing/Temporary/LastTest.log" ]; then
	sed -n 's/^\([A-Za-z0-9_/.-]*\): SKIPPED: \(.*\)$/\1\twhole group: \2/p' \
		"$build/Testing/Temporary/LastTest.log" >>"$summary"
fi
# Groups built only with the drop-ins: not in sanitizer builds (they are loaded into
# uninstrumented programs; the regular build runs them), else only with the rdma-core
# headers at configure time.
if [ ! -x "$build/svrun" ]; then
	if grep -q '^SV_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
		printf 'apps/*, net2/twohost\tnot in a sanitizer build: the drop-ins load into %s\n' \
			"uninstrumented programs (plain make check runs these groups)" >>"$summary"
	else
		printf 'apps/*, net2/twohost\tnot built: the rdma-core headers were missing when %s\n' \
			"$build was configured (apt-get install libibverbs-dev librdmacm-dev, then make check again)" \
			>>"$summary"
	fi
fi

echo
if [ -s "$summary" ]; then
	echo "make check: these test groups did not run completely:"
	sort -u "$summary" | awk -F '\t' '{ printf "  %-28s %s\n", $1, $2 }'
	if [ "$(id -u)" != 0 ]; then
		echo "Most need root (network namespaces, captures) or packages root installs:"
		echo "run 'make check' as root for the whole suite."
	fi
else
	echo "make check: every test group ran; nothing was skipped."
fi
exit "$rc"
