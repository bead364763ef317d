#!/bin/sh
# shellcheck disable=SC2086 # $dev, $srv and $sizes are word lists on purpose
# dropin.sh — what the rdma-core drop-ins cost: perftest through build/svrun against
# svperf on the sv_* API, same operation, sizes and waiting, measured in one run here.
#
#   bench/dropin.sh [--build DIR] [--out FILE] [--seconds N] [--reps N] [--lat-iters N]
#                   [--sizes "S1 S2 ..."] [--transports "tcp udp"] [--quick]
#
# For sv_tcp0 (perftest -R: connected by rdma_cm) and sv_udp0 (perftest -x 0: connected out
# of band), each a server and a client process on 127.0.0.1:
#   - RDMA WRITE bandwidth at each size: ib_write_bw -s SIZE -D SECONDS against svperf
#     --op write --mode bw --depth 128 (perftest's tx depth) --duration SECONDS
#     --server-spin (its server polls its CQ throughout, as perftest's server does
#     rather than sleeping). perftest cannot time -a runs, so every size is a run of its own.
#   - 8-byte RDMA WRITE latency: ib_write_lat -s 8 against svperf --mode lat --wait memory,
#     which waits the way ib_write_lat does (spinning on the target's last byte without
#     calling the library, so the progress thread must place each WRITE), and, for
#     reference, svperf --wait cq (the application polls its CQ and reads its socket
#     itself, the transport's fastest path; see wire/iwarp_ep_io.c, "parking").
# Each measurement is taken --reps times (default 3), perftest and svperf alternating so a
# change in the machine's load hits both alike; the table shows medians. Bandwidth is MB/s
# as perftest prints it (2^20 bytes/s); latency is perftest's t_typical (its median) and
# svperf's p50, both half a round trip. "ratio" is perftest / svperf (the drop-in should
# cost < 5 %: >= 0.95) and "+us" perftest - svperf (< 0.5 us).
# --quick: sizes 2, 4K, 64K and 1 MiB, one rep of one second (a smoke run).
# Prints load averages before and after (other work on the machine skews everything) and
# writes every figure, each rep included, as JSON to --out (default
# /tmp/softverbs-dropin.json). Every step runs under a timeout. Needs perftest, python3
# and a build with the drop-ins.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

build=build
out=/tmp/softverbs-dropin.json
seconds=2
reps=3
lat_iters=10000
sizes=""
transports="tcp udp"
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--lat-iters) lat_iters=$2; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--transports) transports=$2; shift 2 ;;
	--quick) sizes="2 4096 65536 1048576"; seconds=1; reps=1; lat_iters=3000; shift ;;
	-h|--help) sed -n '3,28p' "$0"; exit 0 ;;
	*) echo "dropin.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
need dropin.sh python3 ib_write_bw ib_write_lat "$build/svperf" "$build/svrun"
build=$(cd "$build" && pwd)
if [ -z "$sizes" ]; then
	s=2
	while [ "$s" -le 1048576 ]; do
		sizes="$sizes $s"
		s=$((s * 2))
	done
fi

bench_tmp svdropin

# pair NAME SERVER-CMD... -- CLIENT-ARGS...: runs the server command in the background and
# the same command plus the client arguments in the foreground; the client's output goes
# to $tmp/NAME.out, the server's to $tmp/NAME.srv. A client argument @server stands for
# the address an svperf server announces ("connect to ADDR"): on UDP the IP names the
# device, which is 127.0.0.1 only if no other process holds 127.0.0.1:4791 (wire/roce.c
# falls back to 127.0.0.2 and up), and a client sent to 127.0.0.1 then reaches that other
# process and is refused.
pair() {
	name=$1
	shift
	lim=$((seconds + 60))
	srv=""
	while [ "$1" != "--" ]; do
		srv="$srv $1"
		shift
	done
	shift
	timeout "$lim" $srv >"$tmp/$name.srv" 2>&1 &
	pids=$!
	sleep 0.5
	cli=""
	for a in "$@"; do
		if [ "$a" = @server ]; then
			a=$(sed -n 's/.*(connect to \([^)]*\)).*/\1/p' "$tmp/$name.srv")
			[ -n "$a" ] || a=127.0.0.1
		fi
		cli="$cli $a"
	done
	# shellcheck disable=SC2086 # word lists on purpose
	timeout "$lim" $srv $cli >"$tmp/$name.out" 2>&1 ||
		echo "dropin.sh: $name: client exited with status $?" >&2
	wait "$pids" 2>/dev/null || echo "dropin.sh: $name: server exited with status $?" >&2
	pids=""
}

pt_bw() { # transport size rep
	p=$(free_port)
	pair "pt_$1_bw_$2_$3" "$build/svrun" ib_write_bw $dev -p "$p" -s "$2" -D "$seconds" \
		-- 127.0.0.1
}
sv_bw() {
	p=$(free_port)
	pair "sv_$1_bw_$2_$3" "$build/svperf" --transport "$1" -p "$p" -- \
		--op write --mode bw -s "$2" --duration "$seconds" --depth 128 --server-spin \
		--json @server
}

echo "dropin.sh: $(nproc) cores, $(uname -r), load average $(loadavg)" >&2
load_before=$(loadavg)
for tr in $transports; do
	if [ "$tr" = tcp ]; then dev="-d sv_tcp0 -R"; else dev="-d sv_udp0 -x 0"; fi
	echo "dropin.sh: $tr: RDMA WRITE bandwidth, $seconds s a run, sizes: $sizes" >&2
	r=1
	while [ "$r" -le "$reps" ]; do
		for s in $sizes; do
			if [ $((r % 2)) = 1 ]; then
				pt_bw "$tr" "$s" "$r"
				sv_bw "$tr" "$s" "$r"
			else
				sv_bw "$tr" "$s" "$r"
				pt_bw "$tr" "$s" "$r"
			fi
		done
		echo "dropin.sh: $tr: 8-byte RDMA WRITE latency, $lat_iters round trips, rep $r" >&2
		p=$(free_port)
		pair "pt_${tr}_lat_$r" "$build/svrun" ib_write_lat $dev -p "$p" -s 8 \
			-n "$lat_iters" -- 127.0.0.1
		for w in memory cq; do
			p=$(free_port)
			pair "sv_${tr}_lat_${w}_$r" "$build/svperf" --transport "$tr" -p "$p" -- \
				--op write --mode lat --wait "$w" -s 8 -n "$lat_iters" --json @server
		done
		r=$((r + 1))
	done
done
load_after=$(loadavg)

python3 - "$tmp" "$out" "$load_before" "$load_after" "$seconds" "$reps" "$lat_iters" \
	"$transports" $sizes <<'EOF'
import json, os, statistics, sys

tmp, out, lb, la, seconds, reps, lat_iters, transports = sys.argv[1:9]
sizes = [int(s) for s in sys.argv[9:]]
reps = int(reps)
MBS = 1048576.0

def text(name):
    try:
        return open(os.path.join(tmp, name + ".out")).read()
    except OSError:
        return ""

def pt_row(name):
    """perftest's result row (first field a byte count, second an iteration count)"""
    for line in text(name).splitlines():
        f = line.split()
        if len(f) >= 5 and f[0].isdigit() and f[1].isdigit():
            return f
    return None

def pt_bw(name):
    f = pt_row(name)
    return float(f[3]) if f else None		# BW average, MB/s

def pt_lat(name):
    f = pt_row(name)
    return {"typical": float(f[4]), "avg": float(f[5])} if f and len(f) >= 6 else None

def sv(name):
    for line in reversed(text(name).splitlines()):
        if line.startswith("{"):
            try:
                j = json.loads(line)
            except ValueError:
                return None
            return j if j.get("verified") and not j.get("error") else None
    return None

def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None

def fmt(v, spec="%.1f"):
    return spec % v if v is not None else "-"

res = {"load_avg_before": lb, "load_avg_after": la, "seconds": float(seconds),
       "reps": reps, "lat_iters": int(lat_iters), "bw": [], "lat": []}
print()
print("load average before: %s   after: %s   (%s s a run, median of %d)" %
      (lb, la, seconds, reps))
print()
print("%-4s %-24s %12s %12s %7s" % ("dev", "RDMA WRITE bandwidth", "perftest", "svperf",
                                    "ratio"))
print("%-4s %-24s %12s %12s %7s" % ("", "", "MB/s", "MB/s", ""))
for tr in transports.split():
    for s in sizes:
        pv = [pt_bw("pt_%s_bw_%d_%d" % (tr, s, r)) for r in range(1, reps + 1)]
        sj = [sv("sv_%s_bw_%d_%d" % (tr, s, r)) for r in range(1, reps + 1)]
        vv = [j["gbit_per_s"] * 1e9 / 8 / MBS if j else None for j in sj]
        p, v = med(pv), med(vv)
        ratio = p / v if p is not None and v else None
        res["bw"].append({"transport": tr, "size": s, "perftest_MBps": pv,
                          "svperf_MBps": vv, "ratio_of_medians": ratio})
        print("%-4s %-24s %12s %12s %7s" % (tr, "ib_write_bw -s %d" % s, fmt(p), fmt(v),
                                            fmt(ratio, "%.3f")))
print()
print("%-4s %-26s %10s %10s %10s %10s %8s" % ("dev", "RDMA WRITE latency, 8 B", "pt p50",
      "sv p50", "pt avg", "sv avg", "+us p50"))
for tr in transports.split():
    pl = [pt_lat("pt_%s_lat_%d" % (tr, r)) for r in range(1, reps + 1)]
    p50 = med([x["typical"] for x in pl if x])
    pavg = med([x["avg"] for x in pl if x])
    for w in ("memory", "cq"):
        sj = [sv("sv_%s_lat_%s_%d" % (tr, w, r)) for r in range(1, reps + 1)]
        s50 = med([j["lat_us_p50"] for j in sj if j])
        savg = med([j["lat_us_avg"] for j in sj if j])
        d = p50 - s50 if p50 is not None and s50 is not None else None
        res["lat"].append({"transport": tr, "svperf_wait": w,
                           "perftest": pl, "svperf": [
                               {"p50": j["lat_us_p50"], "avg": j["lat_us_avg"],
                                "p99": j["lat_us_p99"]} if j else None for j in sj],
                           "delta_p50_us": d})
        print("%-4s %-26s %10s %10s %10s %10s %8s" % (
            tr, "ib_write_lat vs --wait %s" % w, fmt(p50, "%.2f"), fmt(s50, "%.2f"),
            fmt(pavg, "%.2f"), fmt(savg, "%.2f"), fmt(d, "%+.2f")))
with open(out, "w") as f:
    json.dump(res, f, indent=1)
print()
print("JSON: %s" % out)
EOF
