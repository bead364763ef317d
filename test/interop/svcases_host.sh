#!/usr/bin/env bash
# test/interop/svcases_host.sh BUILD TRANSPORT — svcases server and client on this host
# (127.0.0.1) over TRANSPORT (tcp, udp, nic), every case; a ctest test (test/CMakeLists.txt).
# Passes when both exit 0 and the client counted no failure. Exit 77 (a skip) when the
# transport cannot be opened here and svcases said why: a library without it, or a host
# without an rdma-core device, for nic. As root it runs in a network namespace of its
# own, so its ports meet no other test's. Every wait is bounded.
set -u
build=$1 transport=$2
if [ "$(id -u)" = 0 ] && [ -z "${SVCASES_NETNS:-}" ] && command -v unshare >/dev/null &&
	unshare -n true 2>/dev/null; then
	exec env SVCASES_NETNS=1 unshare -n sh -c 'ip link set lo up && exec bash "$0" "$@"' \
		"$0" "$@"
fi
case "$transport" in tcp) port=17301 ;; udp) port=17311 ;; *) port=17321 ;; esac
tmp=$(mktemp -d)
trap 'kill "$spid" 2>/dev/null; rm -rf "$tmp"' EXIT
timeout 200 "$build/svcases" server --transport "$transport" --port "$port" --timeout 150 \
	>"$tmp/server.log" 2>&1 &
spid=$!
# The server is ready when it prints its ports (or has exited, saying why).
for _ in $(seq 100); do
	grep -q 'control on TCP port' "$tmp/server.log" && break
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
if ! grep -q 'control on TCP port' "$tmp/server.log"; then
	wait "$spid"; src=$?
	cat "$tmp/server.log"
	if [ "$src" = 77 ]; then
		# scripts/check.sh lists the skipped groups from lines of this form.
		why=$(sed -n 's/^svcases: //p' "$tmp/server.log" | head -n 1)
		echo "interop/svcases_$transport: SKIPPED: ${why:-the $transport transport cannot be opened here}"
		exit 77
	fi
	echo "svcases_host: the server did not start (exit $src)"
	exit 1
fi
timeout 180 "$build/svcases" client --transport "$transport" --connect "127.0.0.1:$port" \
	--timeout 150
crc=$?
wait "$spid"; src=$?
echo "--- server (exit $src)"
cat "$tmp/server.log"
[ "$crc" = 0 ] && [ "$src" = 0 ] && exit 0
echo "svcases_host: client exit $crc, server exit $src"
exit 1
