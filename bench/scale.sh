#!/bin/sh
# scale.sh — N connected RC QPs in one process against a peer process, every QP moving
# verified data (bench/scale.c), on each transport (issue 15, "Scale").
#
#   bench/scale.sh [--qps N] [--transport tcp|udp] [--build DIR] [--timeout S]
#
# Default 10000 QPs on both transports, one after the other. Per transport it prints the
# connection setup rate (conn_per_s), the memory per QP and per MR (RSS delta over N, and
# the allocator's bytes in use over N), the descriptors and threads of both processes at
# their peak, the phases' times and the counts of verified connections and completions,
# with the load average before and after. Exits non-zero if any connection failed, any
# data was wrong, or any WR did not complete exactly once. Every run is bounded by
# --timeout (default 600 s, alarm(2) in both processes). As root it runs in a private
# network namespace with only lo.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

build=build
qps=10000
transports="tcp udp"
limit=600
while [ $# -gt 0 ]; do
	case $1 in
	--qps) qps=$2; shift 2 ;;
	--transport) transports=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--timeout) limit=$2; shift 2 ;;
	-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
	*) echo "scale.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
scale=$build/sv_scale
need scale.sh "$scale"
bench_netns --qps "$qps" --transport "$transports" --build "$build" --timeout "$limit"
bench_tmp scale
rc=0
echo "scale: $qps QPs; nofile soft/hard $(ulimit -Sn)/$(ulimit -Hn); load $(loadavg)"
for t in $transports; do
	r=0
	"$scale" --qps "$qps" --transport "$t" --timeout "$limit" >"$tmp/$t.out" \
		2>"$tmp/$t.err" || r=$?
	echo "== $t (exit $r), load $(loadavg)"
	grep -E '^(connect_s|conn_per_s|data_s|teardown_s|rss_per_qp_B|heap_per_qp_B|rss_per_qp_created_B|heap_per_qp_created_B|rss_per_mr_B|heap_per_mr_B|client_(fds|threads|established|verified|failed|wc_success|wc_flush|wc_other|violations|posted|completed))=' \
		"$tmp/$t.out" | tr '\n' ' ' | fold -s -w 100
	echo
	grep -E '^server_(peak_fds|peak_threads|verified|failed|violations|posted|completed)=' \
		"$tmp/$t.err" | tr '\n' ' ' | fold -s -w 100
	echo
	grep -v '^server_\|^idle ' "$tmp/$t.err" | sort | uniq -c | sort -rn | head -n 5
	[ "$r" = 0 ] || rc=1
done
exit $rc
