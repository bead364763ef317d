#!/bin/sh
# cmtime.sh — rdma-core's cmtime (rdmacm-utils), unmodified, under svrun: N connections
# at once through rdma_cm between a server and a client process, on each transport
# (issue 15, "Scale": cmtime -c 10000 on both devices).
#
#   bench/cmtime.sh [-c N] [--transport tcp|udp] [--build DIR] [--timeout S]
#
# Default 10000 connections on both transports, one after the other. Per transport it
# prints the client's failed connections (its "event:" lines), cmtime's table of step
# times, the client's wall time and peak RSS, how the server ended, the descriptors the
# client may open, and the load average before and after. cmtime's server waits for
# every connection it expects and never exits by itself, so it is ended here once the
# client is done ("server: still running, ended" is the normal end). Exits non-zero when
# a connection failed or the server died. Bounded by --timeout (default 300 s) per
# process. As root it runs in a private network namespace with only lo.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

build=build
n=10000
transports="tcp udp"
limit=300
while [ $# -gt 0 ]; do
	case $1 in
	-c) n=$2; shift 2 ;;
	--transport) transports=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--timeout) limit=$2; shift 2 ;;
	-h|--help) sed -n '2,15p' "$0"; exit 0 ;;
	*) echo "cmtime.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
svrun=$build/svrun
need cmtime.sh "$svrun" cmtime timeout
bench_netns -c "$n" --transport "$transports" --build "$build" --timeout "$limit"
bench_tmp cmtime
rc=0
echo "cmtime: $n connections; nofile soft/hard $(ulimit -Sn)/$(ulimit -Hn); load $(loadavg)"
for t in $transports; do
	port=$(free_port)
	"$svrun" --transport "$t" timeout "$limit" cmtime -b 127.0.0.1 -p "$port" -c "$n" \
		>"$tmp/srv.$t" 2>&1 &
	srv=$!
	pids="$pids $srv"
	# The server listens once its rdma_cm id is bound: wait for its port, bounded.
	i=0
	until ss -Hltn "sport = :$port" | grep -q . || ss -Huan | grep -q ":4791 " ||
		[ $i -ge 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 0.5
	start=$(date +%s.%N)
	"$svrun" --transport "$t" timeout "$limit" cmtime -s 127.0.0.1 -p "$port" -c "$n" \
		>"$tmp/cli.$t" 2>&1 || true
	end=$(date +%s.%N)
	fails=$(grep -c '^event:' "$tmp/cli.$t" || true)
	if kill -0 "$srv" 2>/dev/null; then
		fate="still running, ended"
		kill "$srv" 2>/dev/null || true
		wait "$srv" 2>/dev/null || true
	else
		wait "$srv" && st=0 || st=$?
		fate="exited with status $st"
		[ "$st" = 0 ] || rc=1
	fi
	echo "--- $t: $fails of $n connections failed; client $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s;" \
		"server: $fate; load $(loadavg)"
	sed -n '/^step/,$p' "$tmp/cli.$t"
	grep '^event:' "$tmp/cli.$t" | sort | uniq -c | head -5
	grep -v -e '^svrun:' -e 'failing connection request' "$tmp/srv.$t" |
		sed 's/CM [0-9a-f]*:/CM:/' | sort | uniq -c | sort -rn | head -5
	[ "$fails" = 0 ] || rc=1
done
exit $rc
