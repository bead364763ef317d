#!/bin/sh
# shellcheck disable=SC2086 # $dev is a word list on purpose
# nic_cost.sh — what the nic transport adds to sv_post_send, sv_post_recv and sv_poll_cq
# over the rdma-core call each wraps, counted in instructions (callgrind), as
# dropin_cost.sh counts the drop-in.
#
#   bench/nic_cost.sh [--build DIR] [--device NAME] [--host ADDR] [--iters N] [--out DIR]
#   bench/nic_cost.sh --annotate DIR
#
# The first form needs an rdma-core device (a NIC, or rxe as in the interop guest) and
# valgrind: for svperf's SEND latency (post_send, post_recv, poll_cq on both sides) and
# WRITE bandwidth runs, the server runs natively and the client under callgrind, over
# the device to ADDR (default: the device's own IPv4 address, its first IPv4-mapped
# GID, so both ends share the device). The callgrind files land in --out (default a
# scratch directory). Then, or with --annotate DIR on a machine with callgrind_annotate
# and python3 (the guest has neither), each verb's own cost per call is printed: the
# instructions inside sv_post_send (and sv__nic_post_send, which it calls) minus those
# inside what sv__nic_post_send called, i.e. the provider's post_send; likewise for
# post_recv and poll_cq. Kernel instructions (the provider's doorbell syscalls) are not
# counted by callgrind, so neither side includes them.
set -eu
here=$(dirname "$0")

build=build
iters=2000
device=""
host=""
out=""
annotate=""
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--device) device=$2; shift 2 ;;
	--host) host=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--annotate) annotate=$2; shift 2 ;;
	-h|--help) sed -n '3,22p' "$0"; exit 0 ;;
	*) echo "nic_cost.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

run() {
	command -v valgrind >/dev/null || { echo "nic_cost.sh: valgrind not found" >&2; exit 2; }
	[ -x "$build/svperf" ] || { echo "nic_cost.sh: no $build/svperf" >&2; exit 2; }
	dev="--transport nic"
	[ -n "$device" ] && dev="$dev --device $device"
	if [ -z "$host" ]; then
		host=$("$build/svperf" --list-devices 2>/dev/null |
			sed -n 's/.*GID\[ *[0-9]*\]:[[:space:]]*::ffff:\([0-9.]*\)$/\1/p' | head -1)
		[ -n "$host" ] || { echo "nic_cost.sh: no device with an IPv4 GID (--host)" >&2; exit 2; }
	fi
	[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/nic_cost.XXXXXX")
	mkdir -p "$out"
	port=18600
	for t in "send lat 8" "write bw 4096"; do
		set -- $t
		port=$((port + 1))
		timeout 600 "$build/svperf" $dev -p "$port" >"$out/$1_$2.srv" 2>&1 &
		spid=$!
		sleep 1
		timeout 600 valgrind --tool=callgrind --callgrind-out-file="$out/$1_$2.cg" \
			"$build/svperf" $dev --op "$1" --mode "$2" -s "$3" -n "$iters" -p "$port" \
			"$host" >"$out/$1_$2.out" 2>&1 ||
			{ echo "nic_cost.sh: $1 $2: client failed" >&2; sed 's/^/  /' "$out/$1_$2.out" >&2; }
		wait "$spid" || echo "nic_cost.sh: $1 $2: server failed" >&2
	done
	echo "nic_cost.sh: callgrind files in $out" >&2
}

report() {
	command -v callgrind_annotate >/dev/null && command -v python3 >/dev/null ||
		{ echo "nic_cost.sh: annotate needs callgrind_annotate and python3" >&2; exit 2; }
	for f in "$1"/*.cg; do
		for tree in caller calling; do
			callgrind_annotate --inclusive=yes --tree=$tree --threshold=100 "$f" \
				>"${f%.cg}.$tree" 2>/dev/null || true
		done
	done
	python3 - "$1" <<'PY'
import glob, os, re, sys

d = sys.argv[1]
VERBS = [("sv_post_send", "sv__nic_post_send"), ("sv_post_recv", "sv__nic_post_recv"),
         ("sv_poll_cq", "sv__nic_poll_cq")]
LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+([<>*])\s+(\S+)(?:\s+\(([\d,]+)x\))?")

def num(s):
    return int(s.replace(",", "")) if s else 0

def blocks(path):
    out, cur = [], []
    for line in open(path).read().splitlines():
        m = LINE.match(line)
        if not m:
            if cur:
                out.append(cur)
            cur = []
            continue
        cur.append((num(m.group(1)), m.group(2), m.group(3).split(":")[-1], num(m.group(4))))
    if cur:
        out.append(cur)
    return out

def block(bs, fn):
    return next((b for b in bs if any(k == "*" and n == fn for _, k, n, _ in b)), None)

print("%-12s %-13s %8s %14s %12s" % ("run", "verb", "calls", "rdma-core Ir", "added Ir"))
for cg in sorted(glob.glob(os.path.join(d, "*.cg"))):
    base = cg[:-3]
    if not os.path.exists(base + ".calling"):
        continue
    calling = blocks(base + ".calling")
    for verb, inner in VERBS:
        # The verb's block that lists what it called: sv__nic_* (and, once, the dynamic
        # loader resolving that call, which is no cost of a call).
        vb = [b for b in calling if any(k == "*" and n == verb for _, k, n, _ in b)
              and any(k == ">" for _, k, _, _ in b)]
        ib = [b for b in calling if any(k == "*" and n == inner for _, k, n, _ in b)]
        if not vb:
            continue
        incl = next(ir for ir, k, n, _ in vb[0] if k == "*")
        calls = sum(c for _, k, n, c in vb[0] if k == ">" and n == inner)
        resolver = sum(ir for ir, k, n, _ in vb[0] if k == ">" and n != inner)
        # Everything sv__nic_* calls is the device's: the provider's post/poll.
        dev_ir = sum(ir for b in ib for ir, k, _, _ in b if k == ">")
        dev_n = sum(c for b in ib for _, k, _, c in b if k == ">")
        if not calls or not dev_n:
            continue
        dev = dev_ir / dev_n
        print("%-12s %-13s %8d %14.1f %12.1f" % (os.path.basename(base), verb, calls, dev,
              (incl - resolver) / calls - dev))
PY
}

if [ -n "$annotate" ]; then
	report "$annotate"
	exit 0
fi
run
if command -v callgrind_annotate >/dev/null && command -v python3 >/dev/null; then
	report "$out"
fi
