#!/bin/sh
# matrix.sh — svperf --loopback for every op, in bw and lat mode, at several sizes.
#
#   bench/matrix.sh [--build DIR] [--out FILE] [--iters N | --seconds S] [--sizes "8 4096 ..."]
#                   [--transport tcp|udp]
#
# Atomics run once per mode (they always move 8 bytes). Prints one line per run and
# writes every JSON result as one array to --out (default /tmp/softverbs-matrix.json).
# Exits non-zero if any run failed or did not verify. Every run has a timeout.
set -eu

build=build
out=/tmp/softverbs-matrix.json
count="--iters 2000"
sizes="8 4096 65536 1048576"
transport=tcp
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--iters) count="--iters $2"; shift 2 ;;
	--seconds) count="--duration $2"; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--transport) transport=$2; shift 2 ;;
	-h|--help) sed -n '2,10p' "$0"; exit 0 ;;
	*) echo "matrix.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -x "$build/svperf" ] || { echo "matrix.sh: $build/svperf not found" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/svmatrix.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0
failed=0
printf '%-11s %-4s %8s %10s %12s %10s %10s %9s\n' op mode size iters Gbit/s p50_us p99_us verified
for op in write write-imm read send send-imm atomic-faa atomic-cas; do
	case $op in atomic-*) these=8 ;; *) these=$sizes ;; esac
	for mode in bw lat; do
		for size in $these; do
			n=$((n + 1))
			f="$tmp/$n.json"
			# shellcheck disable=SC2086 # $count is two words on purpose
			if ! "$build/svperf" --loopback --json --timeout 120 --transport "$transport" \
				--op "$op" --mode "$mode" \
				--size "$size" $count >"$f" 2>"$tmp/$n.err"; then
				failed=$((failed + 1))
			fi
			python3 - "$f" "$op" "$mode" "$size" "$tmp/$n.err" <<'EOF'
import json, sys
f, op, mode, size, err = sys.argv[1:]
try:
    r = json.load(open(f))
except ValueError:
    msg = open(err).read().strip().splitlines()
    print("%-11s %-4s %8s  FAILED: %s" % (op, mode, size, msg[-1] if msg else "no output"))
    sys.exit(0)
print("%-11s %-4s %8s %10d %12.3f %10.2f %10.2f %9s" % (
    op, mode, size, r["iters"], r["gbit_per_s"], r["lat_us_p50"], r["lat_us_p99"],
    str(r["verified"]).lower()))
EOF
		done
	done
done
python3 - "$tmp" "$out" "$n" <<'EOF'
import json, os, sys
tmp, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
res = []
for i in range(1, n + 1):
    try:
        res.append(json.load(open(os.path.join(tmp, "%d.json" % i))))
    except ValueError:
        res.append({"error": open(os.path.join(tmp, "%d.err" % i)).read()})
json.dump(res, open(out, "w"), indent=1)
print("results written to", out)
EOF
[ "$failed" -eq 0 ] || { echo "matrix.sh: $failed run(s) failed" >&2; exit 1; }
