# lib.sh — what the bench scripts share; sourced, not run: . "$(dirname "$0")/lib.sh"
# shellcheck shell=sh

# need PROG TOOL...: exits 2 unless every TOOL is on PATH or an executable path.
need() {
	prog=$1
	shift
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || [ -x "$t" ] ||
			{ echo "$prog: $t not found" >&2; exit 2; }
	done
}

# bench_tmp NAME: a scratch directory in $tmp, removed on exit together with the
# background processes whose pids are in $pids.
bench_tmp() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	pids=""
	trap bench_cleanup EXIT INT TERM
}
bench_cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}

# bench_netns ARG...: as root (and once only), runs the calling script again with ARG... in a
# private network namespace holding only lo, so its ports and traffic meet nobody else's.
# Otherwise returns and the script runs where it is.
bench_netns() {
	if [ "$(id -u)" = 0 ] && [ -z "${SV_BENCH_NETNS:-}" ] && command -v unshare >/dev/null; then
		SV_BENCH_NETNS=1 exec unshare -n sh -c 'ip link set lo up && exec "$0" "$@"' "$0" "$@"
	fi
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
