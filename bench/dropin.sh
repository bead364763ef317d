#!/bin/sh
# dropin.sh — what the rdma-core drop-ins cost: perftest through build/svrun against
# svperf on the sv_* API, same operation and sizes, measured in one run on this machine.
#
#   bench/dropin.sh [--build DIR] [--out FILE] [--iters N] [--lat-iters N] [--quick]
#
# For sv_tcp0 (perftest -R: connected by rdma_cm) and sv_udp0 (perftest -x 0: connected out
# of band), each a server and a client process on 127.0.0.1:
#   - ib_write_bw -s 65536 and ib_write_bw -a (rows up to 1 MiB are kept), --iters each
#     (default 1000; perftest's own default of 5000 makes -a run for minutes);
#   - ib_write_lat -s 8, --lat-iters (default 10000);
#   - svperf --op write, --mode bw --depth 128 (perftest's tx depth) at every one of those
#     sizes, and --mode lat -s 8: two processes as well, not --loopback.
# Bandwidth is MB/s as perftest prints it (2^20 bytes/s); latency is perftest's t_typical
# (the median) and t_avg against svperf's p50 and average, both half a round trip.
# "ratio" is perftest / svperf for bandwidth (the drop-in should cost < 5 %: >= 0.95) and
# "+us" is perftest - svperf for latency (< 0.5 us). The two latency loops differ in one
# way that matters here: ib_write_lat waits on memory for the peer's WRITE and never polls
# its CQ meanwhile, so the progress thread must place every message; svperf polls its CQ
# while it waits, so it reads its socket itself (see wire/iwarp_cm.c, "parking").
# --quick: -a sizes 2, 4K, 64K and 1 MiB only, fewer iterations (a smoke run).
# Prints load averages before and after (other work on the machine skews everything) and
# writes every figure as JSON to --out (default /tmp/softverbs-dropin.json). Every step
# runs under a timeout. Needs perftest, python3 and a build with the drop-ins.
set -eu

build=build
out=/tmp/softverbs-dropin.json
iters=1000
lat_iters=10000
quick=0
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--lat-iters) lat_iters=$2; shift 2 ;;
	--quick) quick=1; iters=300; lat_iters=3000; shift ;;
	-h|--help) sed -n '2,25p' "$0"; exit 0 ;;
	*) echo "dropin.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
for t in python3 ib_write_bw ib_write_lat "$build/svperf" "$build/svrun"; do
	command -v "$t" >/dev/null 2>&1 || [ -x "$t" ] ||
		{ echo "dropin.sh: $t not found" >&2; exit 2; }
done
build=$(cd "$build" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/svdropin.XXXXXX")
spid=""
cleanup() {
	[ -z "$spid" ] || kill "$spid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# pair NAME LIMIT SERVER-CMD... -- CLIENT-ARGS...: runs the server command in the
# background and the same command plus the client arguments in the foreground; the
# client's output goes to $tmp/NAME.out, the server's to $tmp/NAME.srv. A client argument
# @server stands for the address an svperf server announces ("connect to ADDR"): on UDP
# the IP names the device, which is 127.0.0.1 only if no other process holds
# 127.0.0.1:4791 (wire/roce.c falls back to 127.0.0.2 and up), and a client sent to
# 127.0.0.1 then reaches that other process and is refused.
pair() {
	name=$1 lim=$2
	shift 2
	srv=""
	while [ "$1" != "--" ]; do
		srv="$srv $1"
		shift
	done
	shift
	# shellcheck disable=SC2086 # word lists on purpose
	timeout "$lim" $srv >"$tmp/$name.srv" 2>&1 &
	spid=$!
	sleep 0.5
	cli=""
	for a in "$@"; do
		if [ "$a" = @server ]; then
			a=$(sed -n 's/.*(connect to \([^)]*\)).*/\1/p' "$tmp/$name.srv")
			[ -n "$a" ] || a=127.0.0.1
		fi
		cli="$cli $a"
	done
	# shellcheck disable=SC2086
	timeout "$lim" $srv $cli >"$tmp/$name.out" 2>&1 ||
		echo "dropin.sh: $name: client exited with status $?" >&2
	wait "$spid" 2>/dev/null || echo "dropin.sh: $name: server exited with status $?" >&2
	spid=""
}

if [ "$quick" = 1 ]; then
	sizes="2 4096 65536 1048576"
else
	sizes=""
	s=2
	while [ "$s" -le 1048576 ]; do
		sizes="$sizes $s"
		s=$((s * 2))
	done
fi

echo "dropin.sh: $(nproc) cores, $(uname -r), load average $(loadavg)" >&2
load_before=$(loadavg)
for tr in tcp udp; do
	if [ "$tr" = tcp ]; then dev="-d sv_tcp0 -R"; else dev="-d sv_udp0 -x 0"; fi
	p=$(free_port)
	echo "dropin.sh: $tr: ib_write_bw -s 65536 -n $iters" >&2
	pair "pt_${tr}_bw64k" 120 "$build/svrun" ib_write_bw $dev -p "$p" -s 65536 -n "$iters" \
		-- 127.0.0.1
	p=$(free_port)
	echo "dropin.sh: $tr: ib_write_bw -a -n $iters" >&2
	pair "pt_${tr}_bwall" 900 "$build/svrun" ib_write_bw $dev -p "$p" -a -n "$iters" \
		-- 127.0.0.1
	p=$(free_port)
	echo "dropin.sh: $tr: ib_write_lat -s 8 -n $lat_iters" >&2
	pair "pt_${tr}_lat8" 300 "$build/svrun" ib_write_lat $dev -p "$p" -s 8 -n "$lat_iters" \
		-- 127.0.0.1
	echo "dropin.sh: $tr: svperf write bw at$sizes B; lat 8 B" >&2
	for s in $sizes; do
		p=$(free_port)
		pair "sv_${tr}_bw_$s" 300 "$build/svperf" --transport "$tr" -p "$p" -- \
			--op write --mode bw -s "$s" -n "$iters" --depth 128 --json @server
	done
	p=$(free_port)
	pair "sv_${tr}_lat8" 300 "$build/svperf" --transport "$tr" -p "$p" -- \
		--op write --mode lat -s 8 -n "$lat_iters" --json @server
done
load_after=$(loadavg)

python3 - "$tmp" "$out" "$load_before" "$load_after" "$iters" "$lat_iters" $sizes <<'EOF'
import json, os, re, sys

tmp, out, lb, la, iters, lat_iters = sys.argv[1:7]
sizes = [int(s) for s in sys.argv[7:]]
MBS = 1048576.0

def text(name):
    try:
        return open(os.path.join(tmp, name + ".out")).read()
    except OSError:
        return ""

def pt_bw(name):
    """perftest rows: bytes iterations peak avg msgrate -> {bytes: avg MB/s}"""
    rows = {}
    for line in text(name).splitlines():
        f = line.split()
        if len(f) >= 5 and f[0].isdigit() and f[1].isdigit():
            try:
                rows[int(f[0])] = float(f[3])
            except ValueError:
                pass
    return rows

def pt_lat(name):
    for line in text(name).splitlines():
        f = line.split()
        if len(f) >= 6 and f[0].isdigit() and f[1].isdigit():
            return {"typical": float(f[4]), "avg": float(f[5]), "min": float(f[2])}
    return None

def sv(name):
    j = None
    for line in reversed(text(name).splitlines()):
        if line.startswith("{"):
            try:
                j = json.loads(line)
            except ValueError:
                pass
            break
    if j is None:
        return None
    if j.get("error") or not j.get("verified"):
        return None
    return j

def fmt(v, spec="%.1f"):
    return spec % v if v is not None else "-"

res = {"load_avg_before": lb, "load_avg_after": la, "iters": int(iters),
       "lat_iters": int(lat_iters), "bw": [], "lat": []}
print()
print("load average before: %s   after: %s" % (lb, la))
print()
print("%-4s %-30s %12s %12s %7s" % ("dev", "RDMA WRITE bandwidth", "perftest", "svperf", "ratio"))
print("%-4s %-30s %12s %12s %7s" % ("", "", "MB/s", "MB/s", ""))
for tr in ("tcp", "udp"):
    one = pt_bw("pt_%s_bw64k" % tr).get(65536)
    allr = pt_bw("pt_%s_bwall" % tr)
    lines = [("-s 65536", 65536, one)] + [("-a, %d B" % s, s, allr.get(s)) for s in sizes]
    for label, s, p in lines:
        j = sv("sv_%s_bw_%d" % (tr, s))
        v = j["gbit_per_s"] * 1e9 / 8 / MBS if j else None
        r = p / v if p is not None and v else None
        res["bw"].append({"transport": tr, "perftest": label, "size": s,
                          "perftest_MBps": p, "svperf_MBps": v, "ratio": r})
        print("%-4s %-30s %12s %12s %7s" % (tr, "ib_write_bw " + label, fmt(p), fmt(v),
                                             fmt(r, "%.3f")))
print()
print("%-4s %-22s %10s %10s %10s %10s %8s %8s" % ("dev", "RDMA WRITE latency, 8 B",
      "pt median", "sv p50", "pt avg", "sv avg", "+us p50", "+us avg"))
for tr in ("tcp", "udp"):
    p = pt_lat("pt_%s_lat8" % tr)
    j = sv("sv_%s_lat8" % tr)
    d50 = p["typical"] - j["lat_us_p50"] if p and j else None
    davg = p["avg"] - j["lat_us_avg"] if p and j else None
    res["lat"].append({"transport": tr, "perftest": p,
                       "svperf": {"p50": j["lat_us_p50"], "avg": j["lat_us_avg"],
                                  "p99": j["lat_us_p99"]} if j else None,
                       "delta_p50_us": d50, "delta_avg_us": davg})
    print("%-4s %-22s %10s %10s %10s %10s %8s %8s" % (
        tr, "ib_write_lat -s 8", fmt(p and p["typical"], "%.2f"),
        fmt(j and j["lat_us_p50"], "%.2f"), fmt(p and p["avg"], "%.2f"),
        fmt(j and j["lat_us_avg"], "%.2f"), fmt(d50, "%+.2f"), fmt(davg, "%+.2f")))
with open(out, "w") as f:
    json.dump(res, f, indent=1)
print()
print("JSON: %s" % out)
EOF
