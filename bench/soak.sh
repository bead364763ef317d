#!/bin/sh
# soak.sh — connections under fire (issue 15, "Soak"): a server per transport (TCP and
# UDP), and client processes that connect, move verified data (bench/scale.c: WRITE a
# pattern, SEND its seed, the server checks and echoes, the client checks), disconnect
# and connect again, while clients are SIGKILLed at random and new ones started.
#
#   bench/soak.sh [--minutes N | --seconds N] [--build DIR] [--clients K] [--qps Q]
#
# Default 30 minutes, 4 clients (half on each transport), 16 QPs per client round. The
# run is split in two: a warm-up third, after which every client is killed and each
# server's RSS and open descriptors are read once it has no connection left (its "idle"
# line); then the rest, with the same reading at the end. Checks, each a FAIL line:
#   - open descriptors equal at both readings; RSS (after the server gave the allocator's
#     free pages back) and the heap in use each within 2 MiB + 5 % (flat); in a sanitizer
#     build the heap in use is the sanitizer's count, and the RSS, which its quarantine
#     of freed memory inflates, is not checked;
#   - every client that ran to its end exited 0: all its QPs verified their data and
#     every WR it posted completed exactly once, success or flush (bench/scale.c);
#   - each server exits 0 on SIGTERM: no completion for a WR not outstanding, no
#     connection left undrained, the same exactly-once accounting;
#   - nothing hangs: every process is bounded by alarm(2) (sv_scale --timeout), whose
#     SIGALRM ends it with status 142, a failure;
#   - with a sanitizer build (--build build-asan) no AddressSanitizer or LeakSanitizer
#     report in any process's output.
# Prints the counts (clients started, killed, finished; connections served; WRs posted
# and completed by the servers) and the load average, and exits 0 only if all hold.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

build=build
secs=1800
nclients=4
qps=16
while [ $# -gt 0 ]; do
	case $1 in
	--minutes) secs=$(($2 * 60)); shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	--clients) nclients=$2; shift 2 ;;
	--qps) qps=$2; shift 2 ;;
	-h|--help) sed -n '2,22p' "$0"; exit 0 ;;
	*) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
scale=$build/sv_scale
need soak.sh "$scale" od
bench_tmp soak
fail=0
say_fail() { echo "FAIL: $*"; fail=1; }

# A sanitizer build reports leaks at exit, and halts at the first error, in every process.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"

start_server() {	# start_server tcp|udp: sets $srv_pid and $srv_port
	out=$tmp/server_$1.out
	"$scale" --serve --transport "$1" --qps 4096 --idle-ms 8000 --timeout $((secs + 110)) \
		>"$out" 2>"$tmp/server_$1.err" &
	srv_pid=$!
	pids="$pids $srv_pid"
	n=0
	until grep -q '^port ' "$out" 2>/dev/null; do
		n=$((n + 1))
		[ $n -le 100 ] || { echo "soak.sh: the $1 server did not start" >&2; cat "$tmp/server_$1.err" >&2; exit 1; }
		sleep 0.1
	done
	srv_port=$(sed -n 's/^port //p' "$out")
}
start_server tcp
tcp_pid=$srv_pid tcp_port=$srv_port
start_server udp
udp_pid=$srv_pid udp_port=$srv_port

started=0 killed=0 finished=0 bad=0
# Client slot i: transport by parity, its pid in $tmp/c$i.pid, its output in c$i.N.
launch() {
	i=$1
	if [ $((i % 2)) = 0 ]; then t=tcp p=$tcp_port; else t=udp p=$udp_port; fi
	started=$((started + 1))
	life=$((3 + $(rand) % 8))	# seconds of rounds before it ends by itself
	"$scale" --connect "$p" --transport "$t" --qps "$qps" --seconds "$life" \
		--timeout $((life + 50)) >"$tmp/c$i.$started.out" 2>"$tmp/c$i.$started.err" &
	echo "$! $started" >"$tmp/c$i.pid"
}
rand() { od -An -N2 -tu2 /dev/urandom | tr -d ' '; }
# Reaps slot i if its process ended: counts it, and a survivor's failure.
reap() {
	i=$1
	[ -f "$tmp/c$i.pid" ] || return 0
	read -r cp cn <"$tmp/c$i.pid"
	kill -0 "$cp" 2>/dev/null && return 0
	rc=0
	wait "$cp" || rc=$?
	rm -f "$tmp/c$i.pid"
	if [ -f "$tmp/c$i.$cn.killed" ]; then
		return 0
	fi
	finished=$((finished + 1))
	if [ "$rc" != 0 ]; then
		bad=$((bad + 1))
		say_fail "client $cn (slot $i) exited $rc: $(tail -n 3 "$tmp/c$i.$cn.err" | tr '\n' ' ')"
	fi
}
kill_slot() {
	i=$1
	[ -f "$tmp/c$i.pid" ] || return 0
	read -r cp cn <"$tmp/c$i.pid"
	if kill -KILL "$cp" 2>/dev/null; then
		: >"$tmp/c$i.$cn.killed"
		killed=$((killed + 1))
	fi
	wait "$cp" 2>/dev/null || true
	rm -f "$tmp/c$i.pid"
}
# Runs the storm for $1 seconds: keep every slot busy, kill one at random every 0.5-2 s.
storm() {
	end=$(($(date +%s) + $1))
	while [ "$(date +%s)" -lt "$end" ]; do
		i=0
		while [ $i -lt "$nclients" ]; do
			reap $i
			[ -f "$tmp/c$i.pid" ] || launch $i
			i=$((i + 1))
		done
		sleep "0.$((5 + $(rand) % 5))"
		[ $(($(rand) % 3)) = 0 ] && kill_slot $(($(rand) % nclients))
	done
	i=0
	while [ $i -lt "$nclients" ]; do
		kill_slot $i
		i=$((i + 1))
	done
}
# idle_reading tcp|udp: asks the server for its idle line (SIGUSR1: printed once it has
# no connection left) and prints it, or "none" if it does not come within 60 s.
idle_reading() {
	f=$tmp/server_$1.out
	eval "sp=\$${1}_pid"
	c=$(grep -c '^idle ' "$f" || true)
	kill -USR1 "$sp"
	n=0
	while [ "$(grep -c '^idle ' "$f" || true)" -le "$c" ]; do
		n=$((n + 1))
		[ $n -le 600 ] || { echo none; return 0; }
		sleep 0.1
	done
	grep '^idle ' "$f" | tail -n 1
}
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

echo "soak: ${secs}s, $nclients clients x $qps QPs, tcp port $tcp_port, udp port $udp_port, load $(loadavg)"
warm=$((secs / 3))
[ $warm -ge 5 ] || warm=5
storm "$warm"
b_tcp=$(idle_reading tcp)
b_udp=$(idle_reading udp)
echo "soak: after warm-up: tcp server $b_tcp; udp server $b_udp"
storm $((secs - warm))
e_tcp=$(idle_reading tcp)
e_udp=$(idle_reading udp)
echo "soak: at the end:     tcp server $e_tcp; udp server $e_udp"
for t in tcp udp; do
	eval "b=\$b_$t e=\$e_$t"
	if [ "$b" = none ] || [ "$e" = none ] || [ -z "$b" ] || [ -z "$e" ]; then
		say_fail "$t server: no idle reading (connections not drained)"
		continue
	fi
	bf=$(field "$b" fds) ef=$(field "$e" fds) br=$(field "$b" rss_kB) er=$(field "$e" rss_kB)
	bh=$(field "$b" heap_B) eh=$(field "$e" heap_B)
	[ "$bf" = "$ef" ] || say_fail "$t server: open descriptors $bf -> $ef"
	if [ "$(field "$e" rss_holds_freed)" = 1 ]; then
		echo "soak: $t server: RSS not checked (AddressSanitizer's quarantine keeps freed memory resident); the heap in use is checked instead"
	else
		[ "$er" -le $((br + 2048 + br / 20)) ] || say_fail "$t server: RSS $br kB -> $er kB"
	fi
	[ "$eh" -le $((bh + 2097152 + bh / 20)) ] || say_fail "$t server: heap in use $bh B -> $eh B"
done
for t in tcp udp; do
	eval "sp=\$${t}_pid"
	kill -TERM "$sp" 2>/dev/null || true
	rc=0
	wait "$sp" || rc=$?
	[ "$rc" = 0 ] || say_fail "$t server exited $rc: $(grep -v '^server_\|^idle\|^port' "$tmp/server_$t.err" | tail -n 3 | tr '\n' ' ')"
	echo "soak: $t server: $(grep -h '^server_\(established\|verified\|posted\|completed\|wc_success\|wc_flush\|wc_other\|violations\|live_at_exit\)=' "$tmp/server_$t.out" | tr '\n' ' ')"
done
if cat "$tmp"/*.err | grep -q 'AddressSanitizer\|LeakSanitizer\|runtime error:'; then
	say_fail "sanitizer report:"
	cat "$tmp"/*.err | grep -A5 'AddressSanitizer\|LeakSanitizer\|runtime error:' | head -n 40
fi
echo "soak: clients started $started, killed $killed, ran to their end $finished ($bad failed); load $(loadavg)"
[ "$finished" -gt 0 ] || say_fail "no client ran to its end"
[ $fail = 0 ] && echo "soak: PASS" || echo "soak: FAILED"
exit $fail
