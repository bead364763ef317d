#!/bin/sh
# security.sh — what TLS (TCP mode) and AEAD (UDP mode) cost, against the plain modes in
# the same run (issue 10's figures, doc/security.md).
#
#   bench/security.sh [--build DIR] [--runs N]
#
# Two svperf processes per figure over 127.0.0.1 (a server, then a client against it):
# 64 KiB RDMA WRITE bandwidth (20000 WRs) and 8-byte RDMA WRITE latency p50 (20000 round
# trips), each plain and with --tls, on both transports; plain TCP both with MPA CRC32c
# (the default) and without (TLS turns it off: the AEAD protects integrity). The
# certificate is a throwaway P-256 pair made here with openssl for 127.0.0.1. Prints one
# line per run with the load average beside it, then `openssl speed -evp aes-128-gcm` as
# the crypto limit of this machine. Run it in a private network namespace
# (unshare -n, lo up) to keep other traffic out. Every step is bounded; not part of CI.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

build=build runs=3
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	*) echo "usage: bench/security.sh [--build DIR] [--runs N]" >&2; exit 2 ;;
	esac
done
perf=$build/svperf
need security.sh "$perf" openssl python3
bench_tmp svsec
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
	-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
	-keyout "$tmp/key.pem" -out "$tmp/cert.pem" >/dev/null 2>&1

# one TRANSPORT MODE SIZE EXTRA_SERVER EXTRA_CLIENT: svperf's JSON line from the client.
one() {
	port=$(free_port)
	# shellcheck disable=SC2086 # the option words are meant to split
	timeout 120 "$perf" --transport "$1" --port "$port" $4 >/dev/null 2>&1 &
	pids="$pids $!"
	sleep 0.3
	# shellcheck disable=SC2086
	timeout 120 "$perf" --transport "$1" --op write --mode "$2" -s "$3" -n 20000 \
		--port "$port" --json $5 127.0.0.1 2>/dev/null || echo '{}'
	wait
}
field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }

tls_s="--tls --tls-cert $tmp/cert.pem --tls-key $tmp/key.pem"
tls_c="--tls --tls-ca $tmp/cert.pem --tls-peer 127.0.0.1"
i=1
while [ "$i" -le "$runs" ]; do
	for t in tcp udp; do
		bw_plain=$(one $t bw 64K "" "" | field gbit_per_s)
		bw_sec=$(one $t bw 64K "$tls_s" "$tls_c" | field gbit_per_s)
		lat_plain=$(one $t lat 8 "" "" | field lat_us_p50)
		lat_sec=$(one $t lat 8 "$tls_s" "$tls_c" | field lat_us_p50)
		printf 'run %d %s: 64K WRITE %s -> %s Gbit/s, 8 B WRITE p50 %s -> %s us (load %s)\n' \
			"$i" "$t" "$bw_plain" "$bw_sec" "$lat_plain" "$lat_sec" "$(loadavg)"
	done
	nocrc=$(one tcp bw 64K "--crc off" "--crc off" | field gbit_per_s)
	printf 'run %d tcp plain without MPA CRC: 64K WRITE %s Gbit/s\n' "$i" "$nocrc"
	i=$((i + 1))
done
echo "openssl speed -evp aes-128-gcm (bytes/s in thousands, 16 B ... 16 KiB):"
timeout 120 openssl speed -seconds 2 -evp aes-128-gcm 2>/dev/null | tail -1
