#!/bin/sh
# Makes sure the Debian packages softverbs builds and tests with are installed.
# As root it installs what is missing; otherwise it prints the exact command and fails.
set -eu
pkgs="build-essential cmake pkg-config libuv1-dev libssl-dev zlib1g-dev libcriterion-dev"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
cmd="apt-get install -y$missing"
if [ "$(id -u)" != 0 ]; then
	echo "softverbs: missing build dependencies. Run as root:" >&2
	echo "  $cmd" >&2
	exit 1
fi
echo "softverbs: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q $missing >/dev/null
