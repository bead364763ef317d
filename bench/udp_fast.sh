#!/bin/sh
# udp_fast.sh — softverbs' UDP (RoCEv2-framed) mode against its TCP (iWARP) mode, two
# processes each, measured in the same run so the ratio holds on a shared machine.
#
#   bench/udp_fast.sh [--build DIR] [--seconds N] [--runs N] [--impair SPEC] [--out FILE]
#
# Three measurements per mode, each --runs times (default 3), the modes interleaved run
# by run so that a change of load hits both: RDMA WRITE 64 KiB bandwidth, RDMA READ 1 MiB
# bandwidth, 8-byte RDMA WRITE ping-pong latency (half the round trip). A run is one
# svperf server process and one svperf client process on 127.0.0.1. Prints the median of
# each, the UDP/TCP ratio, and the load average before and after; --out writes the
# figures as JSON (default /tmp/softverbs-udp-fast.json). --impair applies to the UDP
# runs only (e.g. rate_mbit=1000,delay_ms=10).
#
# As root it runs itself in a private network namespace with only lo (so ports and
# traffic collide with nobody); otherwise it uses the current one. Needs python3.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

build=build
secs=3
runs=3
impair=""
out=/tmp/softverbs-udp-fast.json
args="$*"
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--impair) impair=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "udp_fast.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
need udp_fast.sh python3 "$build/svperf"
# shellcheck disable=SC2086 # re-run with the same words
bench_netns $args
bench_tmp svudpfast
lim=$((secs + 30))
port=19000

one() {	# transport name: one server + one client run of test name
	t=$1
	name=$2
	shift 2
	port=$((port + 1))
	imp=""
	if [ "$t" = udp ] && [ -n "$impair" ]; then imp="--impair $impair"; fi
	# shellcheck disable=SC2086 # $imp is zero or two words
	timeout "$lim" "$build/svperf" --transport "$t" --port "$port" --timeout "$lim" \
		$imp >/dev/null 2>"$tmp/$t-$name-$r.server.err" &
	spid=$!
	pids="$pids $spid"
	sleep 0.3
	# shellcheck disable=SC2086
	timeout "$lim" "$build/svperf" --transport "$t" --port "$port" --timeout "$lim" \
		--json $imp "$@" 127.0.0.1 >"$tmp/$t-$name-$r.json" 2>"$tmp/$t-$name-$r.err" ||
		echo "udp_fast.sh: $t $name run $r exited with status $?" >&2
	wait "$spid" 2>/dev/null || true
}

load0=$(loadavg)
echo "udp_fast.sh: $(nproc) cores, load $load0; $runs runs of ${secs} s" >&2
r=1
while [ "$r" -le "$runs" ]; do
	for t in tcp udp; do
		one "$t" write_64k_bw --op write --mode bw --size 64K --duration "$secs"
		one "$t" read_1m_bw --op read --mode bw --size 1M --duration "$secs"
		one "$t" write_8_lat --op write --mode lat --size 8 --duration "$secs"
	done
	r=$((r + 1))
done
load1=$(loadavg)

python3 - "$tmp" "$out" "$runs" "$load0" "$load1" "$impair" <<'EOF'
import json, statistics, sys, time
tmp, out, runs, load0, load1, impair = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    sys.argv[4], sys.argv[5], sys.argv[6]
tests = [("write_64k_bw", "gbit_per_s", "Gbit/s"), ("read_1m_bw", "gbit_per_s", "Gbit/s"),
         ("write_8_lat", "lat_us_p50", "us p50")]
doc = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_before": load0,
       "load_after": load1, "udp_impair": impair, "runs": runs, "tests": {}}
print("%-14s %-7s %8s %8s %8s %8s   %s" % ("test", "unit", "tcp", "udp", "udp/tcp",
                                         "verified", "udp runs"))
for name, key, unit in tests:
    row = {}
    for t in ("tcp", "udp"):
        vals, ok = [], True
        for r in range(1, runs + 1):
            try:
                j = json.load(open("%s/%s-%s-%d.json" % (tmp, t, name, r)))
                vals.append(j[key])
                ok = ok and j.get("verified") is True
            except (OSError, ValueError, KeyError):
                ok = False
        row[t] = {"values": vals, "median": statistics.median(vals) if vals else None,
                  "verified": ok}
    a, b = row["tcp"]["median"], row["udp"]["median"]
    row["udp_over_tcp"] = round(b / a, 3) if a and b else None
    doc["tests"][name] = row
    print("%-14s %-7s %8s %8s %8s %8s   %s" % (
        name, unit, "%.2f" % a if a else "-", "%.2f" % b if b else "-",
        row["udp_over_tcp"] or "-",
        str(row["tcp"]["verified"] and row["udp"]["verified"]).lower(),
        " ".join("%.2f" % v for v in row["udp"]["values"])))
print("load average before: %s, after: %s" % (load0, load1))
json.dump(doc, open(out, "w"), indent=2)
print("results written to", out)
EOF
