#!/usr/bin/env bash
# test/interop/vm.sh — a Debian 12 guest with the kernel's Soft-RoCE (rdma_rxe) on a tap
# in a private network namespace, for softverbs' interop tests (issue 9).
#
#   vm.sh up NAME [--mtu N]              boot guest NAME; exit 0 once its rxe0 is ACTIVE
#   vm.sh run NAME [--timeout S] -- CMD  run a shell command in the guest; its output and
#                                        exit status are the command's
#   vm.sh down NAME                      stop the guest, delete the namespace (idempotent)
#   vm.sh image                          only build (or reuse) the guest image
#
# Network: namespace svi-NAME holds tap device `svtap` with 198.18.0.1/24 and
# fd53:7600::1/64 (host side); the guest's eth0 has 198.18.0.2/24 and fd53:7600::2/64.
# Both ends have MTU N (default 1500). Host programs join with `ip netns exec svi-NAME`.
# The command channel is the guest's second serial port, a unix socket on the host: it
# never crosses the tap, so a capture on svtap shows only the traffic under test.
#
# The guest is built from packages installed on this host: the kernel (/boot/vmlinuz-6.1.*
# and its modules), busybox-static, and the host's rdma-core userland with the libraries
# it links (libibverbs with the rxe provider, librdmacm, ibverbs-utils, rdmacm-utils,
# perftest) and iproute2's ip, rdma, tc; and softverbs' own programs (svcases, svperf,
# svping) from the build in $SV_INTEROP_BUILD (run.sh sets it to its --build; unset: none)
# with libsoftverbs and every library they link. It is cached in $SV_INTEROP_DIR (default
# <repo>/build-interop) and rebuilt when its inputs change, a rebuilt program among them.
#
# qemu runs under TCG unless a bounded probe boot with KVM reached the guest's init
# (kvm_works below; done once per kernel image and cached). SV_INTEROP_KVM=0 skips the
# probe, SV_INTEROP_KVM=1 only forces a fresh one.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
dir=${SV_INTEROP_DIR:-$repo/build-interop}
BOOT_TIMEOUT=${SV_INTEROP_BOOT_TIMEOUT:-120}

die() { echo "vm.sh: $*" >&2; exit 1; }
usage() {
	sed -n '4,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

kernel_image() {
	local k
	k=$(ls /boot/vmlinuz-6.1.* 2>/dev/null | sort -V | tail -1)
	[ -n "$k" ] || die "no /boot/vmlinuz-6.1.* (apt-get install linux-image-amd64)"
	echo "$k"
}

# Programs the guest carries, each with the shared libraries ldd names for it.
GUEST_PROGRAMS="ibv_devices ibv_devinfo ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong
ibv_srq_pingpong ibv_xsrq_pingpong rping ucmatose udaddy rdma_server rdma_client
ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_send_bw ib_send_lat ib_atomic_bw
ib_atomic_lat ip rdma tc"
# softverbs' programs the guest carries, from $SV_INTEROP_BUILD.
SV_GUEST_PROGRAMS="svcases svperf svping"
sv_build_files() {
	local p
	[ -n "${SV_INTEROP_BUILD:-}" ] || return 0
	for p in $SV_GUEST_PROGRAMS; do echo "$SV_INTEROP_BUILD/$p"; done
}
# Kernel modules loaded in the guest (with their dependencies from modules.dep); rxe's
# ICRC asks the crypto API for "crc32", which crc32_generic provides.
GUEST_MODULES="virtio_pci virtio_net crc32_generic rdma_rxe rdma_ucm sch_netem sch_prio cls_u32"

# modules.dep lists, for each module, every module it needs, the ones needed last first.
module_order() {
	local kver=$1 m path deps d
	local -A seen=()
	for m in $GUEST_MODULES; do
		path=$(modinfo -k "$kver" -F filename "$m") || die "module $m not found for $kver"
		path=${path#/lib/modules/$kver/}
		deps=$(awk -v p="$path:" '$1 == p { for (i = NF; i > 1; i--) print $i }' \
			"/lib/modules/$kver/modules.dep")
		for d in $deps "$path"; do
			[ -n "${seen[$d]:-}" ] && continue
			seen[$d]=1
			echo "$d"
		done
	done
}

copy_with_libs() {
	local root=$1 f lib
	shift
	for f in "$@"; do
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
		for lib in $(ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }'); do
			[ -e "$root$lib" ] && continue
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done
	done
}

# softverbs' programs go to /usr/bin with the libraries ldd names; the ones from the build
# directory (libsoftverbs) to the multiarch directory, where the guest's loader finds
# them without the build directory the programs' RUNPATH names.
copy_softverbs() {
	local root=$1 multiarch=/usr/lib/x86_64-linux-gnu f lib dest
	for f in $(sv_build_files); do
		[ -x "$f" ] || die "$f missing (build softverbs first)"
		cp -L "$f" "$root/usr/bin/"
		for lib in $(ldd "$f" | awk '/=> \// { print $3 }'); do
			case "$lib" in
			"$SV_INTEROP_BUILD"/*) dest=$root$multiarch/$(basename "$lib") ;;
			*) dest=$root$lib ;;
			esac
			[ -e "$dest" ] && continue
			mkdir -p "$(dirname "$dest")"
			cp -L "$lib" "$dest"
		done
	done
}

inputs_digest() {
	local kimg=$1 kver=$2 p
	{
		echo "$kimg $kver"
		cat "$here/guest-rcS" "$here/guest-agent" "$here/guest-inittab" "$here/guest-svi-gid"
		sed -n '/^GUEST_PROGRAMS=/,/^build_image/p' "${BASH_SOURCE[0]}"
		for p in $GUEST_PROGRAMS /bin/busybox; do
			p=$(command -v "$p" 2>/dev/null) || p=missing
			echo "$p"; [ -e "$p" ] && stat -L -c '%s %Y' "$p"
		done
		stat -c '%s %Y' "$kimg"
		for p in $(sv_build_files); do
			echo "$p"; stat -L -c '%s %Y' "$p" 2>/dev/null
			ldd "$p" 2>/dev/null | awk -v b="$SV_INTEROP_BUILD/" 'index($3, b) == 1 { print $3 }' |
				xargs -r stat -L -c '%n %s %Y'
		done
	} | sha256sum | cut -d' ' -f1
}

build_image() {
	local kimg kver digest root p ko multiarch
	local paths=()
	kimg=$(kernel_image)
	kver=${kimg#/boot/vmlinuz-}
	[ -d "/lib/modules/$kver" ] || die "no /lib/modules/$kver"
	[ -x /bin/busybox ] && file -L /bin/busybox | grep -q 'statically linked' ||
		die "no static /bin/busybox (apt-get install busybox-static)"
	for p in $GUEST_PROGRAMS; do
		p=$(command -v "$p") || die "$p not installed on the host"
		paths+=("$p")
	done
	digest=$(inputs_digest "$kimg" "$kver")
	mkdir -p "$dir"
	# Guests of several names may start at once: one builds, the others wait and reuse.
	exec 9>"$dir/image.lock"
	flock 9
	if [ -f "$dir/initramfs.gz" ] && [ "$(cat "$dir/initramfs.digest" 2>/dev/null)" = "$digest" ]; then
		echo "$kimg"
		return
	fi
	echo "vm.sh: building the guest image in $dir (kernel $kver)" >&2
	root=$dir/root
	rm -rf "$root"
	mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc/init.d,proc,sys,dev,tmp,run,root}
	ln -s usr/bin "$root/bin"
	ln -s usr/sbin "$root/sbin"
	ln -s usr/lib "$root/lib"
	ln -s usr/lib64 "$root/lib64"
	cp /bin/busybox "$root/usr/bin/busybox"
	copy_with_libs "$root" "${paths[@]}"
	copy_softverbs "$root"
	multiarch=/usr/lib/x86_64-linux-gnu
	# The rxe provider is dlopen()ed by libibverbs: ldd of the programs does not name it.
	copy_with_libs "$root" "$(ls $multiarch/libibverbs/librxe-rdmav*.so | head -1)"
	mkdir -p "$root/etc/libibverbs.d"
	cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
	# glibc dlopen()s libgcc_s for pthread_cancel and unwinding.
	cp -L "$multiarch/libgcc_s.so.1" "$root$multiarch/"
	# softverbs' nic transport dlmopen()s libibverbs into a namespace of its own, where
	# libc's dependency on the dynamic loader is looked up by name in the library
	# directories (ldd names it only at /lib64): the same file there, as on the host.
	ln -sf /lib64/ld-linux-x86-64.so.2 "$root$multiarch/ld-linux-x86-64.so.2"
	# busybox applets for everything the copied programs do not provide. Debian's busybox
	# shell runs its own applet before searching PATH (ip, tc are applets too): the
	# profile every guest shell sources makes the copied programs win.
	: >"$root/etc/svi-profile"
	for p in $(/bin/busybox --list | grep -vx busybox); do
		if [ -e "$root/usr/bin/$p" ] || [ -e "$root/usr/sbin/$p" ]; then
			printf '%s() { %s "$@"; }\n' "$p" "$(cd "$root" && ls usr/sbin/$p usr/bin/$p 2>/dev/null |
				head -1 | sed 's|^|/|')" >>"$root/etc/svi-profile"
		else
			ln -s busybox "$root/usr/bin/$p"
		fi
	done
	mkdir -p "$root/lib/modules/$kver"
	module_order "$kver" >"$root/etc/svi-modules"
	while read -r ko; do
		mkdir -p "$root/lib/modules/$kver/$(dirname "$ko")"
		cp "/lib/modules/$kver/$ko" "$root/lib/modules/$kver/$ko"
	done <"$root/etc/svi-modules"
	install -m 755 "$here/guest-rcS" "$root/etc/init.d/rcS"
	install -m 755 "$here/guest-agent" "$root/usr/bin/svi-agent"
	install -m 755 "$here/guest-svi-gid" "$root/usr/bin/svi-gid"
	install -m 644 "$here/guest-inittab" "$root/etc/inittab"
	ln -s usr/bin/busybox "$root/init"
	printf '127.0.0.1 localhost\n198.18.0.1 host\n198.18.0.2 guest\n' >"$root/etc/hosts"
	printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
	printf 'root:x:0:\n' >"$root/etc/group"
	(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$dir/initramfs.gz.new"
	mv "$dir/initramfs.gz.new" "$dir/initramfs.gz"
	echo "$digest" >"$dir/initramfs.digest"
	rm -rf "$root"
	echo "$kimg"
}

ns_of() { echo "svi-$1"; }
vmdir_of() { echo "$dir/vm-$1"; }

check_name() {
	[[ "$1" =~ ^[A-Za-z0-9_]{1,10}$ ]] || die "NAME must be 1-10 letters, digits or _ (got '$1')"
}

qemu_alive() {
	local pid
	pid=$(cat "$1/qemu.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = qemu-system-x86 ]
}

cmd_down() {
	local name=$1 vmd ns pid i
	vmd=$(vmdir_of "$name")
	ns=$(ns_of "$name")
	if qemu_alive "$vmd"; then
		pid=$(cat "$vmd/qemu.pid")
		kill "$pid" 2>/dev/null || true
		for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	ip netns del "$ns" 2>/dev/null || true
	rm -rf "$vmd"
}

cmd_up() {
	local name=$1 mtu=$2 kimg vmd ns accel pid t0 i line
	kimg=$(build_image)
	vmd=$(vmdir_of "$name")
	ns=$(ns_of "$name")
	cmd_down "$name"
	mkdir -p "$vmd"
	t0=$(date +%s)
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip -n "$ns" tuntap add dev svtap mode tap
	ip -n "$ns" link set svtap mtu "$mtu"
	ip -n "$ns" addr add 198.18.0.1/24 dev svtap
	ip -n "$ns" -6 addr add fd53:7600::1/64 dev svtap nodad
	ip -n "$ns" link set svtap up
	accel=tcg
	[ "${SV_INTEROP_KVM:-auto}" = 1 ] && rm -f "$dir/kvm-probe"
	# Guests starting at once share one probe: the first runs it, the others read its answer.
	if [ "${SV_INTEROP_KVM:-auto}" != 0 ] && (flock 8 && kvm_works "$kimg") 8>"$dir/kvm.lock"; then
		accel=kvm
	fi
	echo "$accel" >"$vmd/accel"
	: >"$vmd/console.log"
	# ttyS0: the console, to a file; ttyS1: the command channel (guest-agent).
	ip netns exec "$ns" qemu-system-x86_64 \
		-name "svi-$name" -machine q35,accel="$accel" -cpu max -smp 1 -m 512 \
		-nodefaults -display none -no-reboot \
		-kernel "$kimg" -initrd "$dir/initramfs.gz" \
		-append "console=ttyS0 quiet panic=-1 svi.mtu=$mtu" \
		-chardev file,id=con,path="$vmd/console.log" -serial chardev:con \
		-chardev socket,id=cmd,path="$vmd/cmd.sock",server=on,wait=off -serial chardev:cmd \
		-netdev tap,id=n0,ifname=svtap,script=no,downscript=no \
		-device virtio-net-pci,netdev=n0,mac=52:54:00:53:76:02,host_mtu="$mtu" \
		-pidfile "$vmd/qemu.pid" -daemonize ||
		{ cmd_down "$name"; die "qemu failed to start"; }
	for i in $(seq $((BOOT_TIMEOUT * 5))); do
		line=$(grep -a -m1 -E '^SVI-(READY|FAILED)' "$vmd/console.log" || true)
		[ -n "$line" ] && break
		qemu_alive "$vmd" || break
		sleep 0.2
	done
	case "$line" in
	SVI-READY*)
		echo "vm.sh: $name up in $(( $(date +%s) - t0 ))s ($accel): ${line#SVI-READY }" >&2
		;;
	*)
		echo "vm.sh: $name did not become ready within ${BOOT_TIMEOUT}s; console:" >&2
		tail -30 "$vmd/console.log" >&2
		[ "${SV_INTEROP_KEEP:-0}" = 1 ] || cmd_down "$name"
		exit 1
		;;
	esac
	# The command channel answers too.
	cmd_run "$name" 30 'cat /sys/class/infiniband/rxe0/ports/1/state' >/dev/null ||
		{ cmd_down "$name"; die "the guest's command channel does not answer"; }
}

cmd_run() {
	local name=$1 to=$2 cmd=$3 vmd
	vmd=$(vmdir_of "$name")
	qemu_alive "$vmd" || die "guest $name is not running (vm.sh up $name)"
	python3 "$here/vmchan.py" "$vmd/cmd.sock" "$vmd/chan.lock" "$to" "$cmd"
}

# A KVM boot counts as working when a probe guest (no network) reaches its init within
# 20 s, where a working KVM takes a few seconds; the answer is cached per kernel image.
# (On some hosts KVM aborts, or hangs in the guest's early boot.)
kvm_works() {
	local kimg=$1 cache="$dir/kvm-probe" pdir="$dir/kvm-probe.d" pid ok=no i
	[ -e /dev/kvm ] || return 1
	if [ -f "$cache" ] && [ "$(head -1 "$cache")" = "$kimg" ]; then
		[ "$(tail -1 "$cache")" = yes ]
		return
	fi
	rm -rf "$pdir"; mkdir -p "$pdir"; : >"$pdir/console.log"
	timeout 30 qemu-system-x86_64 -machine q35,accel=kvm -cpu host -smp 1 -m 512 \
		-nodefaults -display none -no-reboot -kernel "$kimg" -initrd "$dir/initramfs.gz" \
		-append "console=ttyS0 quiet panic=-1" \
		-chardev file,id=con,path="$pdir/console.log" -serial chardev:con \
		-pidfile "$pdir/pid" -daemonize 2>/dev/null || { printf '%s\nno\n' "$kimg" >"$cache"; return 1; }
	pid=$(cat "$pdir/pid")
	for i in $(seq 100); do
		grep -q -a -E '^SVI-(READY|FAILED)' "$pdir/console.log" && { ok=yes; break; }
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	kill -9 "$pid" 2>/dev/null || true
	rm -rf "$pdir"
	printf '%s\n%s\n' "$kimg" "$ok" >"$cache"
	[ "$ok" = yes ]
}

[ $# -ge 1 ] || usage
verb=$1; shift
[ "$verb" = image ] && { build_image >/dev/null; exit 0; }
[ $# -ge 1 ] || usage
name=$1; shift
check_name "$name"
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, tap devices)"
case "$verb" in
up)
	mtu=1500
	while [ $# -gt 0 ]; do
		case "$1" in
		--mtu) [ $# -ge 2 ] || usage; mtu=$2; shift 2 ;;
		--mtu=*) mtu=${1#--mtu=}; shift ;;
		*) usage ;;
		esac
	done
	[[ "$mtu" =~ ^[0-9]+$ ]] && [ "$mtu" -ge 1280 ] && [ "$mtu" -le 65520 ] ||
		die "--mtu must be 1280..65520"
	cmd_up "$name" "$mtu"
	;;
run)
	to=600
	while [ $# -gt 0 ]; do
		case "$1" in
		--timeout) [ $# -ge 2 ] || usage; to=$2; shift 2 ;;
		--timeout=*) to=${1#--timeout=}; shift ;;
		--) shift; break ;;
		*) usage ;;
		esac
	done
	[ $# -ge 1 ] || usage
	[[ "$to" =~ ^[0-9]+$ ]] || die "--timeout takes seconds"
	cmd_run "$name" "$to" "$*"
	;;
down)
	cmd_down "$name"
	;;
*) usage ;;
esac
