#!/bin/bash
# twohost.sh BUILD_DIR [FILTER] — softverbs between two hosts, no VM: two network
# namespaces joined by a veth pair at MTU 1500, 198.18.0.1/24 and fd53:7600::1/64 in A,
# 198.18.0.2/24 and fd53:7600::2/64 in B (RFC 2544's benchmarking range, a ULA prefix).
# Each case runs its server in one namespace and its client in the other, then the other
# way round, on both transports: sv_udp0 (RoCEv2 framing, its IB CM) bound to the
# namespace's address, and sv_tcp0 (iWARP). The cases are what loopback cannot show:
# packets that must fit a 1500-byte link (path MTU 1024), a CM that reaches a peer by
# its interface address, data that crosses a real (virtual) wire.
#
# The programs: svperf (every opcode, bw, and SEND latency), svping, rping -V (IPv4
# and IPv6), ucmatose, perftest -R (ib_write_bw, ib_read_bw, ib_send_bw; ib_atomic_bw on
# udp) on both transports; on udp also udaddy (UD through SIDR), ibv_rc_pingpong (4096
# and 512 bytes, IPv4 and IPv6 GIDs), ibv_srq_pingpong -q 16 and ibv_ud_pingpong (1024
# and 256 bytes), which connect out of band as only RoCE can. Last, a few again with
# both links at 9000 (path MTU 4096).
#
# Every case asserts what happened: exit codes of both sides, svperf's and svping's
# verified data, rping -V's comparison of every buffer, perftest's result rows, the
# pingpongs' byte counts, the CM tools' completed transfers, and on udp the port's active
# MTU as the device reports it. Every process runs under timeout(1) and is ended by PID
# at the end; the namespaces go with the trap. FILTER (a grep -E pattern) runs only the
# cases whose name matches it;
# TWOHOST_KEEP=1 keeps every program's output (the path is printed).
#
# Needs root (namespaces, veth); without it the script says so and exits 77, which
# ctest reports as skipped. Works from the initial namespace and from inside another
# (`unshare -n`), as the namespaces it makes are its own.
set -u

build=${1:?usage: twohost.sh BUILD_DIR [FILTER]}
filter=${2:-.}
build=$(cd "$build" && pwd) || exit 2
svrun=$build/svrun
T=60			# seconds any one program may run
BUDGET=900		# seconds for all cases; ctest's TIMEOUT (1200) kills without the trap

skip() {
	echo "net2/twohost: SKIPPED: $*"
	exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces and a veth pair" \
	"(run as root: cd $build && ctest -R net2 --output-on-failure)"
command -v ip >/dev/null || skip "ip (iproute2) not installed"
command -v ss >/dev/null || skip "ss (iproute2) not installed"
command -v timeout >/dev/null || skip "timeout (coreutils) not installed"
missing=""
for p in rping ucmatose udaddy ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw \
	ibv_rc_pingpong ibv_srq_pingpong ibv_ud_pingpong ibv_devinfo; do
	command -v "$p" >/dev/null || missing="$missing $p"
done
[ -z "$missing" ] || skip "rdma-core programs not installed:$missing (apt-get install" \
	"rdmacm-utils ibverbs-utils perftest)"
if [ ! -x "$svrun" ] || [ ! -x "$build/svperf" ]; then
	skip "no svrun/svperf in $build (built without SV_COMPAT?)"
fi

A=svA$$ B=svB$$
tmp=$(mktemp -d "${TMPDIR:-/tmp}/twohost.XXXXXX") || exit 2
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	ip netns del "$A" 2>/dev/null
	ip netns del "$B" 2>/dev/null
	if [ -n "${TWOHOST_KEEP:-}" ]; then echo "net2/twohost: outputs kept in $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

in_ns() { ns=$1; shift; ip netns exec "$ns" "$@"; }

if ! ip netns add "$A" || ! ip netns add "$B"; then
	echo "net2/twohost: ip netns add failed"
	exit 1
fi
# The pair is made inside A with its B end put straight into B: nothing appears in the
# namespace this script was started in.
in_ns "$A" ip link add va type veth peer name vb netns "$B" || exit 1
i=1
for ns in "$A" "$B"; do
	dev=vb
	[ "$ns" = "$A" ] && dev=va
	in_ns "$ns" ip link set lo up &&
	in_ns "$ns" ip link set "$dev" mtu 1500 up &&
	in_ns "$ns" ip addr add "198.18.0.$i/24" dev "$dev" &&
	in_ns "$ns" ip -6 addr add "fd53:7600::$i/64" dev "$dev" nodad || exit 1
	i=$((i + 1))
done

pass=0 fail=0
failed=""
start=$(date +%s)

# ns_of SIDE, ip4_of SIDE, ip6_of SIDE: SIDE is A or B.
ns_of() { if [ "$1" = A ]; then echo "$A"; else echo "$B"; fi; }
ip4_of() { if [ "$1" = A ]; then echo 198.18.0.1; else echo 198.18.0.2; fi; }
ip6_of() { if [ "$1" = A ]; then echo fd53:7600::1; else echo fd53:7600::2; fi; }
# ip_of SIDE FAMILY: SIDE's address of FAMILY (4 or 6).
ip_of() { if [ "$2" = 6 ]; then ip6_of "$1"; else ip4_of "$1"; fi; }

# bg NAME SIDE FAMILY CMD...: starts CMD in SIDE's namespace under timeout, its device
# bound to SIDE's address of FAMILY (4 or 6), logging at info (the "CM listening" line);
# output in $tmp/NAME.out. Sets $bgpid.
bg() {
	local name=$1 side=$2 fam=$3 addr
	shift 3
	addr=$(ip_of "$side" "$fam")
	in_ns "$(ns_of "$side")" env SV_BIND_ADDR="$addr" SV_LOG=info \
		timeout -k 5 "$T" "$@" >"$tmp/$name.out" 2>&1 &
	bgpid=$!
	pids="$pids $bgpid"
}

# await NAME PID WHAT: waits (at most 20 s) until WHAT holds; WHAT is "log:TEXT" (TEXT in
# NAME's output) or "tcp:PORT" (a TCP listener on PORT in the server's namespace, $sns).
await() {
	local name=$1 pid=$2 what=$3
	for _ in $(seq 200); do
		case $what in
		log:*) grep -qF -- "${what#log:}" "$tmp/$name.out" 2>/dev/null && return 0 ;;
		tcp:*) in_ns "$sns" ss -Hltn "sport = :${what#tcp:}" | grep -q . && return 0 ;;
		esac
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() {
	fail=$((fail + 1))
	failed="$failed $1"
	echo "FAIL $1: $2"
	for f in "$tmp/$1".*.out; do
		[ -f "$f" ] && sed "s|^|    ${f##*/}: |" "$f" | tail -n 40
	done
}

# pair NAME SSIDE FAMILY READY CHECK -- SERVER... -- CLIENT...: the server in SSIDE's
# namespace, the client in the other's; READY as for await; both must exit 0 and
# CHECK (a function, given the two output files) must hold. The words @PEER4 and @PEER6
# in the client's command stand for the server's addresses.
pair() {
	local name=$1 sside=$2 fam=$3 ready=$4 check=$5 cside spid cpid sst cst msg w
	shift 6
	local -a srv=() cli=()
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cside=A
	[ "$sside" = A ] && cside=B
	for w in "$@"; do
		case $w in
		@PEER4) cli+=("$(ip4_of "$sside")") ;;
		@PEER6) cli+=("$(ip6_of "$sside")") ;;
		*) cli+=("$w") ;;
		esac
	done
	echo "$name" | grep -Eq -- "$filter" || return 0
	if [ $(($(date +%s) - start)) -gt "$BUDGET" ]; then
		bad "$name" "not run: the group's $BUDGET s were used up"
		return
	fi
	sns=$(ns_of "$sside")
	bg "$name.srv" "$sside" "$fam" "${srv[@]}"
	spid=$bgpid
	if ! await "$name.srv" "$spid" "$ready"; then
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		bad "$name" "the server never got ready ($ready)"
		return
	fi
	bg "$name.cli" "$cside" "$fam" "${cli[@]}"
	cpid=$bgpid
	wait "$cpid"
	cst=$?
	wait "$spid"
	sst=$?
	if [ "$sst" != 0 ] || [ "$cst" != 0 ] && [ -z "${calib_retry:-}" ] &&
		grep -qF "Correlation coefficient" "$tmp/$name.srv.out" "$tmp/$name.cli.out"; then
		# perftest measures the CPU clock against gettimeofday before it reports, and
		# refuses ("r^2 < 0.9, Can't produce a report") when the machine's load spoils
		# that fit: its own calibration, not the transfer. One more run, said so.
		echo "note $name: perftest's clock calibration failed under load; run again"
		calib_retry=1 pair "$name" "$sside" "$fam" "$ready" "$check" -- "${srv[@]}" -- "$@"
		return
	elif [ "$sst" != 0 ] || [ "$cst" != 0 ]; then
		bad "$name" "server exit $sst, client exit $cst (124: timed out after $T s)"
	elif ! msg=$("$check" "$tmp/$name.srv.out" "$tmp/$name.cli.out"); then
		bad "$name" "$msg"
	else
		ok "$name"
	fi
}

# Checks: $1 server output, $2 client output; print why on failure.
has() { grep -qF -- "$2" "$1" || { echo "no '$2' in ${1##*/}"; return 1; }; }
mtu_1024() {	# an sv_udp0 device on the 1500-byte link: path MTU 1024
	has "$1" "MTU 1500: active MTU 1024" && has "$2" "MTU 1500: active MTU 1024"
}
svperf_ok() { has "$1" '"verified":true' && has "$2" '"verified":true'; }
svperf_udp() { svperf_ok "$@" && mtu_1024 "$@"; }
svping_ok() {
	has "$2" "50 verified" || return 1
	if grep -q CORRUPT "$2"; then echo "svping: a round was corrupt"; return 1; fi
}
svping_udp() { svping_ok "$@" && mtu_1024 "$@"; }
rping_ok() { ! grep -q "data mismatch" "$1" "$2" || { echo "rping: data mismatch"; return 1; }; }
rping_udp() { rping_ok "$@" && mtu_1024 "$@"; }
perf_rows() {	# one result row of 65536-byte messages with a non-zero figure
	awk '$1 == 65536 && ($4 + 0 > 0 || $5 + 0 > 0) { found = 1 } END { exit !found }' "$2" ||
		{ echo "no 65536-byte result row with a figure in ${2##*/}"; return 1; }
}
perf_udp() { perf_rows "$@" && mtu_1024 "$@"; }
perf_atomic() {	# ib_atomic_bw moves 8 bytes per operation
	awk '$1 == 8 && ($4 + 0 > 0 || $5 + 0 > 0) { found = 1 } END { exit !found }' "$2" ||
		{ echo "no 8-byte result row with a figure in ${2##*/}"; return 1; }
	mtu_1024 "$@"
}
cma_ok() {	# ucmatose and udaddy: every transfer done, status 0, on both sides
	has "$1" "data transfers complete" && has "$2" "data transfers complete" &&
		has "$1" "return status 0" && has "$2" "return status 0"
}
cma_udp() { cma_ok "$@" && mtu_1024 "$@"; }
pp_bytes=""
pp_ok() { has "$1" "$pp_bytes bytes in" && has "$2" "$pp_bytes bytes in" && mtu_1024 "$@"; }


# The device's own view first: ibv_devinfo on sv_udp0 bound to the 1500-byte link.
for side in A B; do
	name=devinfo_udp_$side
	echo "$name" | grep -Eq -- "$filter" || continue
	if in_ns "$(ns_of $side)" env SV_BIND_ADDR="$(ip4_of $side)" timeout "$T" "$svrun" --transport udp \
		ibv_devinfo -v -d sv_udp0 >"$tmp/$name.x.out" 2>&1 &&
	   grep -q "active_mtu:.*1024 (3)" "$tmp/$name.x.out" &&
	   grep -q "max_mtu:.*4096 (5)" "$tmp/$name.x.out"; then
		ok "$name"
	else
		bad "$name" "ibv_devinfo does not show active_mtu 1024, max_mtu 4096"
	fi
done

port=18600
for dir in A B; do
	# svperf: every opcode, the data of every operation checked (server and client).
	for tr in udp tcp; do
		check=svperf_ok
		[ $tr = udp ] && check=svperf_udp
		for op in write write-imm read send send-imm atomic-faa atomic-cas; do
			port=$((port + 1))
			pair "svperf_${tr}_${op}_srv$dir" $dir 4 "log:CM listening" $check -- \
				"$build/svperf" --transport $tr -p $port --timeout 50 --json -- \
				"$build/svperf" --transport $tr -p $port --op $op --mode bw \
				-s 65536 -n 300 --timeout 50 --json @PEER4
		done
		port=$((port + 1))
		pair "svperf_${tr}_send_lat_4096_srv$dir" $dir 4 "log:CM listening" $check -- \
			"$build/svperf" --transport $tr -p $port --timeout 50 --json -- \
			"$build/svperf" --transport $tr -p $port --op send --mode lat -s 4096 \
			-n 300 --timeout 50 --json @PEER4
		# svping: SEND + READ + WRITE per round, 64 KiB, verified both ends.
		port=$((port + 1))
		check=svping_ok
		[ $tr = udp ] && check=svping_udp
		pair "svping_${tr}_srv$dir" $dir 4 "log:CM listening" $check -- \
			"$build/svping" --transport $tr -s -p $port --timeout 50 -- \
			"$build/svping" --transport $tr -c @PEER4 -p $port -C 50 -S 65536 \
			--timeout 50
		# rping -V: every buffer compared; 8 KiB is eight packets at path MTU 1024.
		for fam in 4 6; do
			port=$((port + 1))
			check=rping_ok
			[ $tr = udp ] && check=rping_udp
			peer=@PEER$fam
			pair "rping_${tr}_ipv${fam}_srv$dir" $dir $fam "log:CM listening" $check -- \
				"$svrun" --transport $tr rping -s -a "$(ip_of $dir $fam)" \
				-p $port -V -C 200 -S 8192 -- \
				"$svrun" --transport $tr rping -c -a $peer -p $port -V -C 200 -S 8192
		done
		# perftest through rdma_cm (-R): 64 KiB messages, 64 packets each on UDP.
		progs="ib_write_bw ib_read_bw ib_send_bw"
		[ $tr = udp ] && progs="$progs ib_atomic_bw"
		for prog in $progs; do
			port=$((port + 1))
			check=perf_rows
			[ $tr = udp ] && check=perf_udp
			size="-s 65536"
			if [ "$prog" = ib_atomic_bw ]; then
				size=""
				check=perf_atomic
			fi
			# shellcheck disable=SC2086 # $size: a word list on purpose
			pair "${prog}_R_${tr}_srv$dir" $dir 4 "log:CM listening" \
				$check -- \
				"$svrun" --transport $tr $prog -d sv_${tr}0 -R -p $port -n 300 $size -- \
				"$svrun" --transport $tr $prog -d sv_${tr}0 -R -p $port -n 300 $size @PEER4
		done
	done
	# ibv_rc_pingpong (out of band, GID 0; only RoCE connects out of band): 4096 bytes
	# (four packets each way) and 512 (one); over IPv4 and IPv6 GIDs, the exchange of
	# QPN/PSN/GID on perftest-style TCP over IPv4 either way.
	for fam in 4 6; do
		for size in 4096 512; do
			port=$((port + 1))
			pp_bytes=$((size * 200 * 2))
			pair "ibv_rc_pingpong_${size}_ipv${fam}_srv$dir" $dir $fam "tcp:$port" pp_ok -- \
				"$svrun" --transport udp ibv_rc_pingpong -d sv_udp0 -g 0 -p $port -n 200 -s $size -- \
				"$svrun" --transport udp ibv_rc_pingpong -d sv_udp0 -g 0 -p $port -n 200 -s $size @PEER4
		done
	done
	# ibv_srq_pingpong: 16 QPs on one shared receive queue, 4096-byte messages.
	port=$((port + 1))
	pp_bytes=$((4096 * 200 * 2))
	pair "ibv_srq_pingpong_q16_srv$dir" $dir 4 "tcp:$port" pp_ok -- \
		"$svrun" --transport udp ibv_srq_pingpong -d sv_udp0 -g 0 -p $port -q 16 -n 200 -- \
		"$svrun" --transport udp ibv_srq_pingpong -d sv_udp0 -g 0 -p $port -q 16 -n 200 @PEER4
	# ucmatose (4 connections, 50 SENDs of 8 KiB each way on each) on both transports,
	# udaddy (4 UD QPs resolved by SIDR, 50 datagrams each way) on udp; both listen on
	# their fixed service port 7174 where the server's address names them.
	for tr in udp tcp; do
		check=cma_ok
		[ $tr = udp ] && check=cma_udp
		pair "ucmatose_${tr}_srv$dir" $dir 4 "log:CM listening" $check -- \
			"$svrun" --transport $tr ucmatose -b "$(ip4_of $dir)" -c 4 -C 50 -S 8192 -- \
			"$svrun" --transport $tr ucmatose -s @PEER4 -c 4 -C 50 -S 8192
	done
	pair "udaddy_udp_srv$dir" $dir 4 "log:CM listening" cma_udp -- \
		"$svrun" --transport udp udaddy -b "$(ip4_of $dir)" -c 4 -C 50 -S 512 -- \
		"$svrun" --transport udp udaddy -s @PEER4 -c 4 -C 50 -S 512
	# ibv_ud_pingpong: one datagram per message, 1024 bytes (the path MTU) and 256.
	for size in 1024 256; do
		port=$((port + 1))
		pp_bytes=$((size * 200 * 2))
		pair "ibv_ud_pingpong_${size}_srv$dir" $dir 4 "tcp:$port" pp_ok -- \
			"$svrun" --transport udp ibv_ud_pingpong -d sv_udp0 -g 0 -p $port -n 200 -s $size -- \
			"$svrun" --transport udp ibv_ud_pingpong -d sv_udp0 -g 0 -p $port -n 200 -s $size @PEER4
	done
done

# Jumbo frames: both links at 9000, so the port's active MTU and the path MTU are 4096.
in_ns "$A" ip link set va mtu 9000 && in_ns "$B" ip link set vb mtu 9000 || exit 1
mtu_4096() {
	has "$1" "MTU 9000: active MTU 4096" && has "$2" "MTU 9000: active MTU 4096"
}
perf_4096() { perf_rows "$@" && mtu_4096 "$@" && has "$2" "Mtu             : 4096[B]"; }
pp_4096() { has "$1" "$pp_bytes bytes in" && has "$2" "$pp_bytes bytes in" && mtu_4096 "$@"; }
for dir in A B; do
	port=$((port + 1))
	pair "ib_write_bw_R_udp_mtu9000_srv$dir" $dir 4 "log:CM listening" perf_4096 -- \
		"$svrun" --transport udp ib_write_bw -d sv_udp0 -R -p $port -n 300 -s 65536 -- \
		"$svrun" --transport udp ib_write_bw -d sv_udp0 -R -p $port -n 300 -s 65536 @PEER4
	port=$((port + 1))
	pp_bytes=$((8192 * 200 * 2))
	pair "ibv_rc_pingpong_8192_mtu9000_srv$dir" $dir 4 "tcp:$port" pp_4096 -- \
		"$svrun" --transport udp ibv_rc_pingpong -d sv_udp0 -g 0 -p $port -n 200 -s 8192 \
		-m 4096 -- \
		"$svrun" --transport udp ibv_rc_pingpong -d sv_udp0 -g 0 -p $port -n 200 -s 8192 \
		-m 4096 @PEER4
done

echo "net2/twohost: $(($(date +%s) - start)) s"
[ -n "$failed" ] && echo "net2/twohost: failed:$failed"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
