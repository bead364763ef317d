#!/bin/sh
# Runs every libFuzzer binary already built in BUILD_DIR (see `make fuzz`) for SECONDS each,
# one after another. Builds nothing. New interesting inputs go to a scratch directory
# (printed at the end), never into the seed corpus, so the repository stays small; crash
# inputs are written there as crash-*. Exits non-zero if any fuzzer failed.
#
#   test/fuzz/run_fuzzers.sh build-fuzz 60
set -eu

build=${1:?usage: run_fuzzers.sh BUILD_DIR [SECONDS]}
secs=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/sv-fuzz.XXXXXX")
found=0
failed=0

for bin in "$build"/test/fuzz_*; do
	[ -x "$bin" ] || continue
	found=1
	name=$(basename "$bin")
	short=${name#fuzz_}
	mkdir -p "$scratch/$short"
	echo "== $name for ${secs}s (seeds: $here/corpus/$short)"
	# -max_total_time bounds libFuzzer itself; timeout(1) bounds a hung process too.
	if ! timeout -k 10 $((secs + 60)) "$bin" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$scratch/$short/crash-" \
		"$scratch/$short" "$here/corpus/$short" >"$scratch/$short.log" 2>&1; then
		echo "!! $name failed; log: $scratch/$short.log"
		tail -n 30 "$scratch/$short.log"
		failed=1
	else
		grep -E "^stat::(number_of_executed_units|new_units_added)" "$scratch/$short.log" || true
	fi
done

if [ "$found" = 0 ]; then
	echo "no fuzz_* binaries in $build/test (build with: make fuzz)" >&2
	exit 1
fi
echo "scratch corpus and logs: $scratch"
exit $failed
