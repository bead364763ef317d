#!/bin/sh
# wan.sh — the UDP (RoCEv2-framed) mode over an emulated WAN link: 1 Gbit/s with 10 ms
# each way (SV_IMPAIR rate_mbit=1000,delay_ms=10, a drop-tail queue of 1000 packets),
# two svperf processes, RDMA WRITE 64 KiB bandwidth (doc/congestion.md).
#
#   bench/wan.sh [--build DIR] [--seconds N] [--runs N] [--depth N] [--out FILE]
#
# Four cases, each --runs times (default 3), interleaved run by run so a change of load
# hits all of them: lossless with selective repeat; 1 % random loss with selective
# repeat; 1 % loss with go-back-N; two QPs on one device (svperf --qps 2, so one
# bottleneck) with selective repeat, lossless, and the ratio of their goodputs. Prints
# the median goodput of each (of a 1 Gbit/s link), retransmits, timeouts, the
# window's peak and the smoothed RTT of the median run, and the load average before and
# after; --out writes it all as JSON (default /tmp/softverbs-wan.json). The impairment
# applies at each sender, so the ACKs cross the 10 ms too (a 20 ms round trip).
#
# As root it runs itself in a private network namespace with only lo (so ports and
# traffic collide with nobody); otherwise it uses the current one. Needs python3.
set -eu
# shellcheck shell=sh source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

build=build
secs=5
runs=3
depth=128
out=/tmp/softverbs-wan.json
args="$*"
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--depth) depth=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) sed -n '2,18p' "$0"; exit 0 ;;
	*) echo "wan.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
need wan.sh python3 "$build/svperf"
# shellcheck disable=SC2086 # re-run with the same words
bench_netns $args
bench_tmp svwan
lim=$((secs + 30))
port=19400
link=rate_mbit=1000,delay_ms=10,queue_pkts=1000,seed=7

one() {	# name retx impair qps: one server + one client run
	name=$1
	retx=$2
	imp=$3
	qps=$4
	port=$((port + 4))
	timeout "$lim" "$build/svperf" --transport udp --port "$port" --timeout "$lim" \
		--retx "$retx" --impair "$imp" --qps "$qps" \
		>/dev/null 2>"$tmp/$name-$r.server.err" &
	spid=$!
	pids="$pids $spid"
	sleep 0.3
	timeout "$lim" "$build/svperf" --transport udp --port "$port" --timeout "$lim" \
		--retx "$retx" --impair "$imp" --qps "$qps" --json --op write --mode bw \
		--size 64K --depth "$depth" --duration "$secs" 127.0.0.1 \
		>"$tmp/$name-$r.json" 2>"$tmp/$name-$r.err" ||
		echo "wan.sh: $name run $r exited with status $?" >&2
	wait "$spid" 2>/dev/null || true
}

load0=$(loadavg)
echo "wan.sh: $(nproc) cores, load $load0; $runs runs of ${secs} s; link $link" >&2
r=1
while [ "$r" -le "$runs" ]; do
	one lossless_sr sr "$link" 1
	one loss1_sr sr "$link,loss=0.01" 1
	one loss1_gbn gbn "$link,loss=0.01" 1
	one two_qps_sr sr "$link" 2
	r=$((r + 1))
done
load1=$(loadavg)

python3 - "$tmp" "$out" "$runs" "$load0" "$load1" "$link" <<'EOF'
import json, statistics, sys, time
tmp, out, runs, load0, load1, link = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    sys.argv[4], sys.argv[5], sys.argv[6]
doc = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_before": load0,
       "load_after": load1, "link": link, "runs": runs, "tests": {}}

def runs_of(name):
    got = []
    for r in range(1, runs + 1):
        try:
            lines = [json.loads(l) for l in open("%s/%s-%d.json" % (tmp, name, r))
                     if l.strip()]
        except (OSError, ValueError):
            lines = []
        got.append(lines)
    return got

print("%-12s %8s %8s %8s %9s %8s %8s   %s" % (
    "case", "Gbit/s", "retx", "timeouts", "cwnd_peak", "srtt_ms", "verified",
    "runs"))
for name in ("lossless_sr", "loss1_sr", "loss1_gbn"):
    rs = [l[0] for l in runs_of(name) if l]
    vals = [j["gbit_per_s"] for j in rs]
    med = statistics.median(vals) if vals else None
    m = min(rs, key=lambda j: abs(j["gbit_per_s"] - med)) if rs else {}
    ok = len(rs) == runs and all(j.get("verified") is True for j in rs)
    doc["tests"][name] = {"gbit_per_s": vals, "median": med, "median_run": m,
                          "verified": ok}
    print("%-12s %8s %8s %8s %9s %8s %8s   %s" % (
        name, "%.3f" % med if med else "-",
        m.get("retransmits", "-"), m.get("timeouts", "-"), m.get("cwnd_peak", "-"),
        "%.1f" % (m["srtt_us"] / 1e3) if "srtt_us" in m else "-", str(ok).lower(),
        " ".join("%.3f" % v for v in vals)))
pairs = [l for l in runs_of("two_qps_sr") if len(l) == 2]
ratios = [max(a["gbit_per_s"], b["gbit_per_s"]) / min(a["gbit_per_s"], b["gbit_per_s"])
          for a, b in pairs if min(a["gbit_per_s"], b["gbit_per_s"]) > 0]
sums = [a["gbit_per_s"] + b["gbit_per_s"] for a, b in pairs]
ok = len(pairs) == runs and all(j.get("verified") is True for p in pairs for j in p)
doc["tests"]["two_qps_sr"] = {"pairs": [[j["gbit_per_s"] for j in p] for p in pairs],
                              "ratio_median": statistics.median(ratios) if ratios else None,
                              "sum_median": statistics.median(sums) if sums else None,
                              "verified": ok}
print("%-12s %8s   (sum) ratio of the two QPs (median) %s, verified %s   runs %s" % (
    "two_qps_sr", "%.3f" % statistics.median(sums) if sums else "-",
    "%.3f" % statistics.median(ratios) if ratios else "-", str(ok).lower(),
    " ".join("%.3f+%.3f" % (p[0]["gbit_per_s"], p[1]["gbit_per_s"]) for p in pairs)))
if doc["tests"]["lossless_sr"]["median"] and doc["tests"]["loss1_sr"]["median"]:
    print("1 %% loss SR / lossless: %.3f" % (doc["tests"]["loss1_sr"]["median"] /
                                            doc["tests"]["lossless_sr"]["median"]))
print("load average before: %s, after: %s" % (load0, load1))
json.dump(doc, open(out, "w"), indent=2)
print("results written to", out)
EOF
