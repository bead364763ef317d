#!/bin/sh
# shellcheck disable=SC2162 # "read" below is an svperf op name, not the builtin
# demo.sh BUILD_DIR — a short loopback tour of softverbs (run by `make demo`).
#
# Two device contexts in one process talk over real TCP sockets on 127.0.0.1. The tour
# uses every work-request opcode: SEND, SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM, READ,
# FETCH_ADD and CMP_SWAP; then, if this build has it, three runs over the UDP transport
# (RoCEv2 framing). Every run checks the bytes that arrived (svping and svperf
# compare against seeded patterns on both sides), and any failure makes this script exit
# non-zero. Bounded: each step has its own timeout; the whole tour takes seconds.
set -u

build=${1:-build}
perf=$build/svperf
ping=$build/svping
for t in "$perf" "$ping"; do
	if [ ! -x "$t" ]; then
		echo "demo: $t not found; build first (make)" >&2
		exit 2
	fi
done

failures=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/svdemo.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM

# The value of a scalar field of svperf's one-line JSON object.
field() {
	sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p" "$2"
}

echo "softverbs demo: RDMA verbs over TCP, loopback on 127.0.0.1"
echo

# 1. svping: rping's pattern, so SEND, READ and WRITE in every round.
if "$ping" --loopback -C 50 -S 4096 --timeout 20 >"$tmp/ping.out" 2>"$tmp/ping.err"; then
	rtt=$(sed -n 's/^svping: rtt //p' "$tmp/ping.out")
	echo "svping: 50 rounds, each: the client SENT its buffer's address, the server"
	echo "  pulled 4096 bytes with RDMA READ, wrote them back with RDMA WRITE, and the"
	echo "  client found them intact. All 50 verified. Round trips: $rtt."
else
	echo "svping: FAILED"
	sed 's/^/  /' "$tmp/ping.out" "$tmp/ping.err"
	failures=$((failures + 1))
fi

# 2. svperf, one short run per opcode. $1 op, $2 mode, $3 size, $4 iterations, $5 words,
# then any further svperf options.
run() {
	op=$1 mode=$2 size=$3 iters=$4 words=$5
	out="$tmp/$op-$mode.json"
	shift 5
	if "$perf" --loopback --port 0 --op "$op" --mode "$mode" --size "$size" \
		--iters "$iters" --timeout 20 --json "$@" >"$out" 2>"$tmp/$op-$mode.err" &&
	   [ "$(field verified "$out")" = true ]; then
		n=$(field iters "$out")
		p50=$(field lat_us_p50 "$out")
		gbps=$(field gbit_per_s "$out")
		if [ "$mode" = lat ]; then
			figure="median latency $p50 us ($(field lat_kind "$out" | tr _ ' '))"
		else
			figure="$gbps Gbit/s"
		fi
		echo "$words"
		echo "  $n x $size bytes, verified; $figure."
	else
		echo "svperf --op $op --mode $mode: FAILED"
		sed 's/^/  /' "$out" "$tmp/$op-$mode.err"
		failures=$((failures + 1))
	fi
}

echo
run send lat 64 200 \
	"SEND: client and server bounced 64-byte messages into each other's posted receives."
run send-imm lat 64 200 \
	"SEND_WITH_IMM: the same, each message also carrying 32 bits of immediate data."
run write lat 4096 200 \
	"RDMA WRITE: each side wrote 4 KiB straight into the other's registered memory; no
  receive was consumed, and the peer, spinning on its last byte without calling the
  library, saw it change: its progress thread placed the bytes." --wait memory
run write-imm lat 4096 200 \
	"RDMA WRITE_WITH_IMM: the same, and the immediate completed a receive at the target."
run "read" lat 4096 200 \
	"RDMA READ: the client pulled 4 KiB from the server's memory, one READ at a time;
  the server application made no call, its progress thread answered."
run atomic-faa lat 8 200 \
	"ATOMIC FETCH_ADD: remote 8-byte adds; each returned the previous value and the
  counter ended at exactly count x addend."
run atomic-cas lat 8 200 \
	"ATOMIC CMP_SWAP: a chain of compare-and-swaps, each expecting the value the one
  before it wrote; every one succeeded."
run write bw 65536 2000 \
	"RDMA WRITE bandwidth: 64 KiB writes, 64 in flight, into the server's memory."
run "read" bw 65536 2000 \
	"RDMA READ bandwidth: 64 KiB reads from the server's memory."
run send bw 65536 2000 \
	"SEND bandwidth: 64 KiB messages into receives the server reposts (credit flow control)."

# 3. The other wire mode: the same verbs over UDP datagrams with RoCEv2 framing. Tiny
# messages too: there every WR is a datagram of its own, at the highest packet rate,
# and the WRITE ping-pong notices replies in memory, not on its CQ. $1 op, $2 mode,
# $3 size, $4 iterations, $5 extra options, $6 words. Exit status 2: no UDP in this build.
udp_run() {
	out="$tmp/udp-$1-$2-$3.json"
	# shellcheck disable=SC2086 # $5: a word list on purpose
	"$perf" --loopback --transport udp --op "$1" --mode "$2" --size "$3" --iters "$4" \
		$5 --timeout 20 --json >"$out" 2>"$tmp/udp.err"
	st=$?
	if [ "$st" -eq 0 ] && [ "$(field verified "$out")" = true ]; then
		if [ "$2" = lat ]; then
			figure="median latency $(field lat_us_p50 "$out") us"
		else
			figure="$(field gbit_per_s "$out") Gbit/s, $(field msg_per_s "$out") msg/s"
		fi
		echo "$6"
		echo "  $4 x $3 bytes over UDP datagrams, verified; $figure."
	elif [ "$st" -eq 2 ]; then
		echo "UDP (RoCEv2 framing): not available in this build; skipped."
		return 2
	else
		echo "UDP (RoCEv2 framing) $1 $2 $3 B: FAILED"
		sed 's/^/  /' "$out" "$tmp/udp.err"
		failures=$((failures + 1))
	fi
	return 0
}

echo
if udp_run write bw 4096 500 "" \
	"UDP (RoCEv2 framing): RDMA WRITEs of 4 KiB. Same API, other wire."; then
	udp_run write bw 2 2000 "--depth 128" \
		"UDP: 2-byte RDMA WRITEs, 128 in flight: a datagram each, as fast as they go."
	udp_run write lat 8 2000 "" \
		"UDP: 8-byte WRITE ping-pong; each side reaps its completions as it goes."
fi

echo
if [ "$failures" -eq 0 ]; then
	echo "demo: every opcode moved its data and every byte checked out."
	exit 0
fi
echo "demo: $failures step(s) FAILED" >&2
exit 1
