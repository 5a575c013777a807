#!/bin/bash
# guest_test.sh - numa_guest: boots Debian's kernel under qemu-system-x86_64
# (TCG, no KVM needed) with 2 and then 4 NUMA nodes, one CPU each, and runs
# init.sh's checks inside against the real shmkv-loader, shmctl and probe.c
# (README.md here). Usage: guest_test.sh LOADER SHMCTL PROBE [NODES...]
set -euo pipefail
loader=$1 shmctl=$2 probe=$3
shift 3
t0=$(date +%s)
topologies=("$@")
[ ${#topologies[@]} -gt 0 ] || topologies=(2 4)
here=$(cd "$(dirname "$0")" && pwd)

skip() { echo "SKIP: $*"; exit 77; }
qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || skip "no qemu-system-x86_64 (Debian: qemu-system-x86)"
kernel=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$kernel" ] || skip "no kernel in /boot (Debian: linux-image-amd64)"
[ -r "$kernel" ] || skip "$kernel is not readable (root only)"
busybox=/bin/busybox
[ -x "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1 ||
	skip "no static busybox (Debian: busybox-static)"
command -v cpio >/dev/null || skip "no cpio"

work=$(mktemp -d /tmp/numa-guest.XXXXXX)
trap 'rm -rf "$work"' EXIT
rd=$work/rd
mkdir -p "$rd"/{bin,img,lib64,lib/x86_64-linux-gnu,etc}
cp "$busybox" "$rd/bin/busybox"
cp "$here/init.sh" "$rd/init"
# the programs and every shared library ldd names (the dynamic loader at its path)
cp "$loader" "$rd/bin/shmkv-loader"
cp "$shmctl" "$rd/bin/shmctl"
cp "$probe" "$rd/bin/probe"
for exe in "$loader" "$shmctl" "$probe"; do
	ldd "$exe" | awk '/=> \//{print $3} /^\t\/lib64\//{print $1}' | while read -r lib; do
		case $lib in
		/lib64/*) cp -L "$lib" "$rd/lib64/" ;;
		*) cp -L "$lib" "$rd/lib/x86_64-linux-gnu/" ;;
		esac
	done
done
# three generations of a 7 MiB image: "gen" = G, k<i> = "G:<i>" (probe.c's
# readers check every value against gen), and padding up to 4 huge pages
for g in 1 2 3; do
	awk -v g=$g 'BEGIN {
		printf "{\"key\": \"gen\", \"value\": %d}\n", g
		for (i = 0; i < 2000; i++) printf "{\"key\": \"k%d\", \"value\": \"%d:%d\"}\n", i, g, i
		pad = sprintf("%1000s", ""); gsub(/ /, "x", pad)
		for (i = 0; i < 6800; i++) printf "{\"key\": \"pad%d\", \"value\": \"%d%s\"}\n", i, g, pad
	}' >"$work/g$g.jsonl"
	"$shmctl" image build -o "$rd/img/g$g.shmkv" --name numa-guest --no-dedup \
		"$work/g$g.jsonl" >/dev/null
done
(cd "$rd" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd"

# $SHMKV_TEST_SLOW (an integer factor, ./run test-loaded): the guest's
# deadlines (init.sh) and this boot's bound are multiplied by it
slow=${SHMKV_TEST_SLOW:-1}
slow=${slow%%.*}
# The whole test ends within 840 s (times slow), under meson's 900 s
# timeout for it (tests/numa/meson.build; ./run test-loaded multiplies that
# by the same factor), so that a stalled guest is reported here, with its
# console, not by meson's kill.
deadline=$((t0 + 840 * slow))
# boot LOG QEMU-ARGS...: runs the guest to its power-off, within 400 s and
# the test's deadline. A boot whose /init never prints GUEST-START within
# 150 s is killed and started again (three tries): under TCG on a loaded
# host the firmware has been seen to stop at "Booting from ROM" for good,
# before the kernel ran; that is qemu's, not shmkv's, and a later boot of
# the same guest passes.
boot() {
	local log=$1 try pid end bound rc
	shift
	: >"$log"
	for try in 1 2 3; do
		bound=$((deadline - $(date +%s)))
		if [ "$bound" -le 0 ]; then
			echo "== boot $try not started: the test's $((840 * slow))s are spent"
			return 0
		fi
		[ "$bound" -le $((400 * slow)) ] || bound=$((400 * slow))
		timeout "$bound" "$qemu" "$@" </dev/null >"$log" 2>&1 &
		pid=$!
		end=$(($(date +%s) + 150 * slow))
		while kill -0 "$pid" 2>/dev/null && ! grep -q GUEST-START "$log" &&
			[ "$(date +%s)" -lt $end ]; do
			sleep 1
		done
		if grep -q GUEST-START "$log" || ! kill -0 "$pid" 2>/dev/null; then
			rc=0
			wait "$pid" || rc=$?
			[ $rc -ne 124 ] || echo "== boot $try: killed at its bound of ${bound}s"
			return 0
		fi
		kill "$pid" 2>/dev/null || true
		wait "$pid" || true
		echo "== boot $try: /init did not start within $((150 * slow))s; console's end:"
		tr -d '\r' <"$log" | tail -n 5
	done
}

fails=0
for n in "${topologies[@]}"; do
	mb=$((192 + 64))
	args=(-machine pc -cpu max -smp "$n" -m $((mb * n))M -nographic -no-reboot
	      -kernel "$kernel" -initrd "$work/initrd"
	      -append "console=ttyS0 panic=-1 rdinit=/init quiet loglevel=3 mitigations=off numa_nodes=$n shmkv_slow=$slow")
	for i in $(seq 0 $((n - 1))); do
		args+=(-object "memory-backend-ram,size=${mb}M,id=m$i"
		       -numa "node,nodeid=$i,cpus=$i,memdev=m$i")
	done
	# 4 nodes: a line 0-1-2-3 (SLIT), so that "nearest" means something:
	# node 1 is nearer to 0 than to 3, node 2 nearer to 3 than to 0
	if [ "$n" = 4 ]; then
		for d in 0,1,15 0,2,25 0,3,30 1,2,20 1,3,25 2,3,15; do
			IFS=, read -r a b v <<<"$d"
			args+=(-numa "dist,src=$a,dst=$b,val=$v")
		done
	fi
	log=$work/console-$n.log
	start=$(date +%s)
	boot "$log" "${args[@]}"
	secs=$(($(date +%s) - start))
	tr -d '\r' <"$log" >"$log.txt"
	if grep -q '^GUEST-DONE ' "$log.txt"; then
		echo "== $n nodes: booted and checked in ${secs}s"
	elif grep -q GUEST-START "$log.txt"; then
		echo "== $n nodes: /init ran but did not finish (${secs}s)"
	else
		echo "== $n nodes: /init never ran (${secs}s)"
	fi
	grep -E '^CHECK ' "$log.txt" || true
	if ! grep -q "^GUEST-DONE nodes=$n fails=0$" "$log.txt" || grep -q '^CHECK .* FAIL' "$log.txt"; then
		echo "== $n nodes FAILED; console:"
		tail -n 80 "$log.txt"
		fails=$((fails + 1))
	fi
done
exit $((fails != 0))
