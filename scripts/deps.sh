#!/bin/sh
# deps.sh [--test] — makes sure the Debian packages softverbs needs are installed.
#
# Without --test: what the build needs (make, make demo). With --test (make check): also
# what the test groups run — the rdma-core headers the drop-ins build against, the
# rdma-core programs they are tested with and its own test suite (python3-pyverbs), the
# frameworks run on the drop-ins (libfabric-bin, ucx-utils), tshark for the wire
# captures, iproute2 for the network namespaces. As root it installs whatever
# is missing. As a normal user it prints the one apt-get line that would; it fails only
# when a build dependency is missing (the tests that need a missing package skip
# themselves, and make check lists them at the end with the reason).
set -eu
build="build-essential cmake pkg-config libuv1-dev libssl-dev zlib1g-dev libisal-dev libcriterion-dev"
tests="libibverbs-dev librdmacm-dev ibverbs-utils rdmacm-utils perftest qperf python3 python3-pyverbs tshark
	iproute2 libfabric-bin ucx-utils openssl socat netcat-openbsd"
want=$build
[ "${1:-}" = "--test" ] && want="$build $tests"

installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}
missing="" missing_build=""
for p in $want; do
	installed "$p" && continue
	missing="$missing $p"
	case " $build " in *" $p "*) missing_build="$missing_build $p" ;; esac
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	if [ -n "$missing_build" ]; then
		echo "softverbs: missing build dependencies. Run as root:" >&2
		echo "  apt-get install -y$missing" >&2
		exit 1
	fi
	echo "softverbs: some test groups will be skipped; for the whole suite run as root:" >&2
	echo "  apt-get install -y$missing" >&2
	exit 0
fi
echo "softverbs: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# tshark's package asks whether non-root users may capture: answer "no" beforehand.
echo "wireshark-common wireshark-common/install-setuid boolean false" |
	debconf-set-selections 2>/dev/null || true
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends $missing >/dev/null
