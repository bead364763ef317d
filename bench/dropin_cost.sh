#!/bin/sh
# shellcheck disable=SC2086 # $dev is a word list on purpose
# dropin_cost.sh — what the drop-in libibverbs adds to each verb call, counted in
# instructions, so the figure does not depend on the machine's load.
#
#   bench/dropin_cost.sh [--build DIR] [--iters N] [--transports "tcp udp"]
#
# For each perftest program below, the server runs natively and the client under
# valgrind --tool=callgrind, both through build/svrun on sv_tcp0 (-R) or sv_udp0 (-x 0).
# For each fast-path verb the client called, callgrind gives the instructions spent
# inside the drop-in's function (svc_post_send, svc_post_recv, svc_poll_cq: argument
# translation and dispatch) and inside the sv_* call it makes; the difference divided by
# the number of calls is the drop-in's own cost per call. Instructions in the kernel
# (the socket syscalls) are not counted, so the "share" column (the drop-in's part of the
# user-space instructions of that verb) is an upper bound on its share of the verb's
# time. Needs valgrind, perftest and a build with the drop-ins.
set -eu
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

build=build
iters=2000
transports="tcp udp"
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--transports) transports=$2; shift 2 ;;
	-h|--help) sed -n '3,16p' "$0"; exit 0 ;;
	*) echo "dropin_cost.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
need dropin_cost.sh valgrind callgrind_annotate python3 ib_write_lat ib_send_lat ib_write_bw \
	"$build/svrun"
build=$(cd "$build" && pwd)

bench_tmp svcost

# profile NAME PROGRAM ARGS...: server natively, client under callgrind; the annotated
# call trees go to $tmp/NAME.caller and $tmp/NAME.calling.
profile() {
	name=$1
	shift
	p=$(free_port)
	timeout 600 "$build/svrun" "$@" $dev -p "$p" >"$tmp/$name.srv" 2>&1 &
	pids=$!
	sleep 0.5
	if ! timeout 600 "$build/svrun" valgrind --tool=callgrind \
		--callgrind-out-file="$tmp/$name.cg" "$@" $dev -p "$p" 127.0.0.1 \
		>"$tmp/$name.out" 2>&1; then
		echo "dropin_cost.sh: $name: client failed" >&2
		sed 's/^/  /' "$tmp/$name.out" >&2
	fi
	wait "$pids" 2>/dev/null || echo "dropin_cost.sh: $name: server failed" >&2
	pids=""
	for tree in caller calling; do
		callgrind_annotate --inclusive=yes --tree=$tree --threshold=100 "$tmp/$name.cg" \
			>"$tmp/$name.$tree" 2>/dev/null || true
	done
}

for tr in $transports; do
	if [ "$tr" = tcp ]; then dev="-d sv_tcp0 -R"; else dev="-d sv_udp0 -x 0"; fi
	echo "dropin_cost.sh: $tr: ib_write_lat, ib_send_lat, ib_write_bw, -n $iters" >&2
	profile "${tr}_write_lat" ib_write_lat -s 8 -n "$iters"
	profile "${tr}_send_lat" ib_send_lat -s 8 -n "$iters"
	profile "${tr}_write_bw" ib_write_bw -s 64 -n "$iters"
done

python3 - "$tmp" $transports <<'EOF'
import os, re, sys

tmp, transports = sys.argv[1], sys.argv[2:]
PAIRS = [("svc_post_send", "sv_post_send"), ("svc_post_recv", "sv_post_recv"),
         ("svc_poll_cq", "sv_poll_cq")]
LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+([<>*])\s+(\S+)(?:\s+\(([\d,]+)x\))?")

def num(s):
    return int(s.replace(",", "")) if s else 0

def entries(path):
    """callgrind_annotate tree: blocks of '<'/'>' lines around one '*' line."""
    try:
        text = open(path).read()
    except OSError:
        return []
    blocks, cur = [], []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            if cur:
                blocks.append(cur)
            cur = []
            continue
        cur.append((num(m.group(1)), m.group(2), m.group(3).split(":")[-1], num(m.group(4))))
    if cur:
        blocks.append(cur)
    return blocks

def fn_block(blocks, fn):
    for b in blocks:
        for ir, kind, name, _ in b:
            if kind == "*" and name == fn:
                return b
    return None

print()
print("%-4s %-13s %-14s %8s %12s %12s %7s" % ("dev", "program", "verb", "calls",
      "sv_* Ir/call", "drop-in Ir", "share"))
for tr in transports:
    for prog in ("write_lat", "send_lat", "write_bw"):
        name = "%s_%s" % (tr, prog)
        caller, calling = entries(os.path.join(tmp, name + ".caller")), \
            entries(os.path.join(tmp, name + ".calling"))
        for wrap, core in PAIRS:
            up = fn_block(caller, wrap)	# who called the wrapper, and how often
            down = fn_block(calling, wrap)	# what the wrapper called
            if not up or not down:
                continue
            calls = sum(c for ir, kind, n, c in up if kind == "<")
            incl = next(ir for ir, kind, n, c in up if kind == "*")
            inner = sum(ir for ir, kind, n, c in down if kind == ">" and n == core)
            if not calls:
                continue
            own = (incl - inner) / calls
            share = (incl - inner) / incl if incl else 0
            print("%-4s %-13s %-14s %8d %12.0f %12.1f %6.1f%%" % (
                tr, "ib_" + prog, wrap.replace("svc_", "ibv_"), calls, inner / calls,
                own, 100 * share))
EOF
