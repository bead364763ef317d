#!/bin/sh
# tcp_fast.sh — softverbs' TCP (iWARP) mode against raw TCP and against perftest through
# the drop-in, two processes each, all in one run so the ratios hold on a shared machine.
#
#   bench/tcp_fast.sh [--build DIR] [--seconds N] [--runs N] [--out FILE]
#
# Per run (--runs, default 3, interleaved so a change of load hits every test):
#   iperf3 -l 1M            one TCP stream, the best raw TCP does here
#   svperf tcp WRITE and READ bandwidth at 1 MiB and 64 KiB
#   ib_write_bw -R -s 65536 on sv_tcp0 through svrun (perftest's busy-polling loop)
# Each softverbs test runs its data receiver (the WRITE's server, the READ's client) under
# `perf stat -e task-clock` when perf works, for the receiver's CPU per GiB moved.
# Prints the medians, the issue 13 ratios (WRITE and READ 1 MiB over iperf3, READ over
# WRITE 1 MiB, ib_write_bw over svperf WRITE 64 KiB) and the load average before and
# after; --out writes the figures as JSON (default /tmp/softverbs-tcp-fast.json).
#
# As root it runs itself in a private network namespace with only lo. Needs python3,
# iperf3 and ib_write_bw.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

build=build
secs=3
runs=3
out=/tmp/softverbs-tcp-fast.json
args="$*"
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) sed -n '2,18p' "$0"; exit 0 ;;
	*) echo "tcp_fast.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
need tcp_fast.sh python3 iperf3 ib_write_bw "$build/svperf" "$build/svrun"
# shellcheck disable=SC2086 # re-run with the same words
bench_netns $args
build=$(cd "$build" && pwd)
bench_tmp svtcpfast
lim=$((secs + 30))
# perf stat around the receiver, when this machine lets us count task-clock.
cpu=""
if command -v perf >/dev/null 2>&1 && perf stat -e task-clock -o /dev/null true 2>/dev/null
then
	cpu=yes
fi

# counted FILE CMD...: CMD, under perf stat writing its task-clock to FILE when $cpu.
counted() {
	f=$1
	shift
	if [ -n "$cpu" ]; then
		perf stat -e task-clock -x, -o "$f" "$@"
	else
		"$@"
	fi
}

sv() {	# name op size: one svperf server + client pair on tcp
	name=$1
	p=$(free_port)
	srv_cpu=/dev/null
	cli_cpu=/dev/null
	# The receiver of the data: WRITE's target is the server, READ's sink the client.
	if [ "$2" = write ]; then srv_cpu="$tmp/$name-$r.cpu"; else cli_cpu="$tmp/$name-$r.cpu"; fi
	counted "$srv_cpu" timeout "$lim" "$build/svperf" --transport tcp -p "$p" \
		--timeout "$lim" >/dev/null 2>"$tmp/$name-$r.server.err" &
	spid=$!
	pids="$pids $spid"
	sleep 0.3
	counted "$cli_cpu" timeout "$lim" "$build/svperf" --transport tcp -p "$p" \
		--timeout "$lim" --json --op "$2" --mode bw -s "$3" --duration "$secs" \
		127.0.0.1 >"$tmp/$name-$r.json" 2>"$tmp/$name-$r.err" ||
		echo "tcp_fast.sh: $name run $r exited with status $?" >&2
	wait "$spid" 2>/dev/null || true
}

iperf() {
	p=$(free_port)
	timeout "$lim" iperf3 -s -1 -p "$p" >/dev/null 2>&1 &
	spid=$!
	pids="$pids $spid"
	sleep 0.3
	timeout "$lim" iperf3 -c 127.0.0.1 -p "$p" -l 1M -t "$secs" -J \
		>"$tmp/iperf3-$r.json" 2>"$tmp/iperf3-$r.err" ||
		echo "tcp_fast.sh: iperf3 run $r exited with status $?" >&2
	wait "$spid" 2>/dev/null || true
}

perftest() {
	p=$(free_port)
	timeout "$lim" "$build/svrun" ib_write_bw -d sv_tcp0 -R -p "$p" -s 65536 \
		-D "$secs" >"$tmp/ibwb-$r.srv" 2>&1 &
	spid=$!
	pids="$pids $spid"
	sleep 0.5
	timeout "$lim" "$build/svrun" ib_write_bw -d sv_tcp0 -R -p "$p" -s 65536 \
		-D "$secs" 127.0.0.1 >"$tmp/ibwb-$r.out" 2>&1 ||
		echo "tcp_fast.sh: ib_write_bw run $r exited with status $?" >&2
	wait "$spid" 2>/dev/null || true
}

load0=$(loadavg)
echo "tcp_fast.sh: $(nproc) cores, load $load0; $runs runs of ${secs} s" >&2
r=1
while [ "$r" -le "$runs" ]; do
	iperf
	sv write_1m write 1M
	sv read_1m read 1M
	sv write_64k write 64K
	sv read_64k read 64K
	perftest
	r=$((r + 1))
done
load1=$(loadavg)

python3 - "$tmp" "$out" "$runs" "$load0" "$load1" <<'EOF'
import json, statistics, sys, time
tmp, out, runs, load0, load1 = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], \
    sys.argv[5]
GIB = float(1 << 30)

def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None

def iperf(r):
    try:
        j = json.load(open("%s/iperf3-%d.json" % (tmp, r)))
        return j["end"]["sum_received"]["bits_per_second"] / 1e9
    except (OSError, ValueError, KeyError):
        return None

def cpu_ms(name, r):
    """task-clock in ms from perf stat -x, (value,unit,event,...)"""
    try:
        for line in open("%s/%s-%d.cpu" % (tmp, name, r)):
            f = line.split(",")
            if len(f) > 2 and f[2].startswith("task-clock"):
                return float(f[0])
    except (OSError, ValueError):
        pass
    return None

def ibwb(r):
    """perftest's result row: bytes, iterations, BW peak, BW average (MB/s, 2^20 B)"""
    try:
        for line in open("%s/ibwb-%d.out" % (tmp, r)):
            f = line.split()
            if len(f) >= 4 and f[0].isdigit() and f[1].isdigit():
                return float(f[3]) * 1048576 * 8 / 1e9
    except (OSError, ValueError):
        pass
    return None

doc = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_before": load0,
       "load_after": load1, "runs": runs, "gbit_per_s": {}, "rx_cpu_ms_per_gib": {}}
rows = {"iperf3_1m": [iperf(r) for r in range(1, runs + 1)],
        "ib_write_bw_64k": [ibwb(r) for r in range(1, runs + 1)]}
verified = True
for name in ("write_1m", "read_1m", "write_64k", "read_64k"):
    vals, cpus = [], []
    for r in range(1, runs + 1):
        try:
            j = json.load(open("%s/%s-%d.json" % (tmp, name, r)))
        except (OSError, ValueError):
            verified = False
            continue
        verified = verified and j.get("verified") is True
        vals.append(j.get("gbit_per_s"))
        c = cpu_ms(name, r)
        cpus.append(c / (j["bytes"] / GIB) if c is not None and j.get("bytes") else None)
    rows[name] = vals
    doc["rx_cpu_ms_per_gib"][name] = {"values": cpus, "median": med(cpus)}
print("%-16s %9s %9s   %s" % ("test", "Gbit/s", "rx ms/GiB", "runs (Gbit/s)"))
for name, vals in rows.items():
    m = med(vals)
    c = doc["rx_cpu_ms_per_gib"].get(name, {}).get("median")
    doc["gbit_per_s"][name] = {"values": vals, "median": m}
    print("%-16s %9s %9s   %s" % (name, "%.2f" % m if m else "-", "%.0f" % c if c else "-",
                                  " ".join("%.2f" % v if v else "-" for v in vals)))

def ratio(a, b):
    a, b = doc["gbit_per_s"][a]["median"], doc["gbit_per_s"][b]["median"]
    return round(a / b, 3) if a and b else None

doc["ratios"] = {"write_1m/iperf3": ratio("write_1m", "iperf3_1m"),
                 "read_1m/iperf3": ratio("read_1m", "iperf3_1m"),
                 "read_1m/write_1m": ratio("read_1m", "write_1m"),
                 "ib_write_bw/svperf_write_64k": ratio("ib_write_bw_64k", "write_64k")}
doc["verified"] = verified
goal = {"write_1m/iperf3": 0.9, "read_1m/iperf3": 0.9, "read_1m/write_1m": 0.8,
        "ib_write_bw/svperf_write_64k": 0.9}
for k, v in doc["ratios"].items():
    print("%-30s %6s   (issue 13 goal >= %.1f)" % (k, v if v is not None else "-", goal[k]))
print("svperf data verified: %s" % str(verified).lower())
print("load average before: %s, after: %s" % (load0, load1))
json.dump(doc, open(out, "w"), indent=2)
print("results written to", out)
EOF
