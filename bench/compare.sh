#!/bin/sh
# compare.sh — softverbs against raw TCP, measured in the same run on this machine.
#
#   bench/compare.sh [--build DIR] [--out FILE] [--seconds N]
#
# Raw TCP baselines over 127.0.0.1:
#   - bandwidth: iperf3, one stream, 64 KiB writes (-l 64K);
#   - latency: sockperf ping-pong over TCP, busy-polling (non-blocking sockets read in a
#     recvfrom loop, -F r) with 14-byte messages (sockperf's minimum); sockperf reports
#     half the round trip, as svperf does for its ping-pong.
# softverbs, svperf --loopback (two device contexts in one process, real sockets):
#   - RDMA WRITE 64 KiB bandwidth, RDMA READ 1 MiB bandwidth, 8-byte RDMA WRITE latency,
#     each with MPA CRC32c on and off.
# Prints a table with ratios (svperf / raw TCP) and writes every figure as JSON to --out
# (default /tmp/softverbs-bench.json). Every step is bounded by a timeout. Needs python3
# (for JSON only), iperf3 and sockperf; not part of CI.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

build=build
out=/tmp/softverbs-bench.json
secs=5
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	-h|--help) sed -n '2,17p' "$0"; exit 0 ;;
	*) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
need compare.sh python3 iperf3 sockperf "$build/svperf"
bench_tmp svbench
lim=$((secs + 30))

wait_listen() {	# port: until something listens on 127.0.0.1:port (at most ~5 s)
	python3 - "$1" <<'EOF'
import socket, sys, time
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
EOF
}

echo "compare.sh: $(nproc) cores, $(uname -r); ${secs} s per measurement" >&2

# --- raw TCP bandwidth: iperf3 -----------------------------------------------------------
port=$(free_port)
timeout "$lim" iperf3 -s -1 -B 127.0.0.1 -p "$port" >"$tmp/iperf3-server.log" 2>&1 &
pids="$pids $!"
sleep 0.3
echo "compare.sh: iperf3 -c 127.0.0.1 -l 64K -t $secs" >&2
timeout "$lim" iperf3 -c 127.0.0.1 -p "$port" -l 64K -t "$secs" -J >"$tmp/iperf3.json"

# --- raw TCP latency: sockperf ping-pong, busy-polling -----------------------------------
port=$(free_port)
echo "T:127.0.0.1:$port" >"$tmp/feed"
timeout "$lim" sockperf server -f "$tmp/feed" -F r --nonblocked >"$tmp/sockperf-server.log" 2>&1 &
spid=$!
pids="$pids $spid"
wait_listen "$port" || { echo "compare.sh: sockperf server did not start" >&2; exit 1; }
echo "compare.sh: sockperf ping-pong (TCP, busy-poll, 14 B) -t $secs" >&2
timeout "$lim" sockperf ping-pong -f "$tmp/feed" -F r --nonblocked -m 14 -t "$secs" \
	>"$tmp/sockperf.log" 2>&1
kill "$spid" 2>/dev/null || true

# --- svperf ------------------------------------------------------------------------------
runs=""
svperf() {	# name, then svperf arguments
	name=$1
	shift
	echo "compare.sh: svperf --loopback $*" >&2
	"$build/svperf" --loopback --port 0 --json --timeout "$lim" "$@" >"$tmp/$name.json" ||
		echo "compare.sh: svperf $name exited with status $?" >&2
	runs="$runs $name"
}
for crc in on off; do
	svperf "write_64k_bw_crc_$crc" --op write --mode bw --size 64K --duration "$secs" --crc "$crc"
	svperf "read_1m_bw_crc_$crc" --op read --mode bw --size 1M --duration "$secs" --crc "$crc"
	svperf "write_8_lat_crc_$crc" --op write --mode lat --size 8 --duration "$secs" --crc "$crc"
done

# --- table and JSON ----------------------------------------------------------------------
# shellcheck disable=SC2086 # $runs is a list of words
python3 - "$tmp" "$out" "$secs" $runs <<'EOF'
import json, os, platform, re, sys, time

tmp, out, secs, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]

ip = json.load(open(os.path.join(tmp, "iperf3.json")))
iperf_gbps = ip["end"]["sum_received"]["bits_per_second"] / 1e9
log = open(os.path.join(tmp, "sockperf.log")).read()
def sp(pattern):
    m = re.search(pattern, log)
    return float(m.group(1)) if m else None
sock = {
    "p50_us": sp(r"percentile 50\.000 =\s*([0-9.]+)"),
    "p99_us": sp(r"percentile 99\.000 =\s*([0-9.]+)"),
    "avg_us": sp(r"avg-latency=([0-9.]+)"),
    "min_us": sp(r"<MIN> observation =\s*([0-9.]+)"),
}

runs = {}
for n in names:
    try:
        runs[n] = json.load(open(os.path.join(tmp, n + ".json")))
    except (OSError, ValueError):
        runs[n] = {"error": "no result"}

def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None

rows = []
print()
print("%-32s %12s %12s %12s %9s %9s" % ("measurement", "Gbit/s", "lat p50 us", "lat p99 us",
                                        "ratio", "verified"))
print("%-32s %12.2f %12s %12s %9s %9s" % ("raw TCP iperf3 64K, 1 stream", iperf_gbps, "-", "-",
                                          "1", "-"))
print("%-32s %12s %12.2f %12.2f %9s %9s" % ("raw TCP sockperf pp 14B busy", "-",
                                            sock["p50_us"] or 0, sock["p99_us"] or 0, "1", "-"))
for n in names:
    r = runs[n]
    bw = "bw" in n
    g = r.get("gbit_per_s")
    p50, p99 = r.get("lat_us_p50"), r.get("lat_us_p99")
    rt = ratio(g, iperf_gbps) if bw else ratio(p50, sock["p50_us"])
    rows.append({"name": n, "ratio_to_raw": rt, "ratio_of": "gbit_per_s" if bw else "lat_us_p50",
                 "result": r})
    print("%-32s %12s %12s %12s %9s %9s" % (
        "svperf " + n, "%.2f" % g if bw and g is not None else "-",
        "%.2f" % p50 if not bw and p50 is not None else "-",
        "%.2f" % p99 if not bw and p99 is not None else "-",
        rt if rt is not None else "-", str(r.get("verified", False)).lower()))
print()
print("ratio: svperf / raw TCP (bandwidth: higher is better; latency: lower is better).")
print("svperf latency is half the ping-pong round trip, as sockperf reports.")

doc = {
    "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": {"cores": os.cpu_count(), "kernel": platform.release(),
                "load_avg": os.getloadavg()},
    "seconds_per_measurement": secs,
    "raw_tcp": {
        "iperf3": {"command": "iperf3 -c 127.0.0.1 -l 64K -t %d" % secs,
                   "gbit_per_s": round(iperf_gbps, 4)},
        "sockperf": dict(sock, command="sockperf ping-pong -f FEED(T:127.0.0.1:PORT) -F r "
                                       "--nonblocked -m 14 -t %d" % secs,
                         message_bytes=14, kind="half_round_trip"),
    },
    "svperf": rows,
}
with open(out, "w") as f:
    json.dump(doc, f, indent=2)
print("results written to", out)
bad = [n for n in names if runs[n].get("verified") is not True]
sys.exit(1 if bad else 0)
EOF
