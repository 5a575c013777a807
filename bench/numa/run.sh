#!/bin/bash
# bench/numa/run.sh - NUMA benchmarks of shmkv (README.md here; numbers:
# RESULTS.md and numa/README.md). Root; one loader with a private root,
# spool, tmpfs directory and (cost) hugetlbfs mount, all removed on exit.
#
#   run.sh matrix --build DIR [--size 1G] [--secs 5]
#       local versus remote: the image loaded once per node (numa=node=M)
#       and replicated; a reader pinned to the first CPU of each node R reads
#       random keys from each copy: ns per get, and the ratio to R's own copy.
#       For an operator's multi-node host (here: one node, one cell).
#   run.sh cost --build DIR [--size 512M] [--reps 5]
#       what binding and verifying placement cost a load: numa=none against
#       node=0 and interleave, tmpfs and hugetlbfs, interleaved repetitions,
#       medians of the loader's own load time (ms), after one round not
#       counted; NBENCH_RAW=1 prints every repetition to stderr.
set -euo pipefail
mode=${1:-}
shift || true
BUILD= SIZE= SECS=5 REPS=5
while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$2; shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	--secs) SECS=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
case $mode in matrix | cost) ;; *) sed -n '2,16s/^# \{0,1\}//p' "$0"; exit 2 ;; esac
[ -n "$BUILD" ] || { echo "run.sh: --build DIR (a build with -Dbench=true)" >&2; exit 2; }
LOADER=$BUILD/loader/shmkv-loader SHMCTL=$BUILD/shmctl/shmctl
MKIMG=$BUILD/bench/loader/lbench_mkimage GET=$BUILD/bench/numa/nbench_get
for p in "$LOADER" "$SHMCTL" "$MKIMG" "$GET"; do [ -x "$p" ] || { echo "run.sh: no $p" >&2; exit 2; }; done

W=$(mktemp -d /tmp/nbench.XXXXXX)
SHM=$(mktemp -d /dev/shm/nbench.XXXXXX)
HUGE= ADDED=0 LPID=
cleanup() {
	[ -n "$LPID" ] && kill "$LPID" 2>/dev/null && wait "$LPID" 2>/dev/null
	rm -rf "$SHM"
	if [ -n "$HUGE" ]; then
		rm -rf "$HUGE"/shmkv* 2>/dev/null || true
		umount "$HUGE" && rmdir "$HUGE"
	fi
	if [ "$ADDED" -gt 0 ]; then
		local f=/proc/sys/vm/nr_hugepages
		echo $(($(cat $f) - ADDED)) >$f
	fi
	rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/root" "$W/spool"
chmod 755 "$W/root" "$W/spool"
pre=()
command -v flock >/dev/null && pre=(flock /tmp/shmkv-bench.lock)
[ "$(id -u)" = 0 ] && pre=(nice -n -10 "${pre[@]}")

start_loader() { # extra options
	"$LOADER" --root "$W/root" --spool "$W/spool" --shm-dir "$SHM" --foreground "$@" \
		2>"$W/loader.log" &
	LPID=$!
	for _ in $(seq 200); do [ -S "$W/root/control.sock" ] && return; sleep 0.05; done
	echo "run.sh: the loader did not start" >&2
	cat "$W/loader.log" >&2
	exit 1
}
ctl() { "$SHMCTL" -r "$W/root" "$@"; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
nodes() { tr ',' '\n' </sys/devices/system/node/online |
	awk -F- '{if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1}'; }
first_cpu() { cut -d, -f1 "/sys/devices/system/node/node$1/cpulist" | cut -d- -f1; }

echo "- host: $(nproc) CPUs, nodes $(cat /sys/devices/system/node/online), kernel $(uname -r), $(date -u +%FT%TZ)"
if [ "$mode" = matrix ]; then
	"$MKIMG" "$W/img.shmkv" --size "${SIZE:-1G}" --value-size 100 --tag m >/dev/null
	start_loader --memory shm
	for m in $(nodes); do ctl cache load --numa node=$m "n$m" "$W/img.shmkv" >/dev/null; done
	ctl cache load --numa replicate rep "$W/img.shmkv" >/dev/null
	echo "- image $(stat -c %s "$W/img.shmkv") bytes, random gets for ${SECS}s per cell (ns per get; x = over the reader's own node's copy)"
	echo
	printf '| reader on node |'
	for m in $(nodes); do printf ' copy on node %s |' "$m"; done
	printf ' replicate (its own copy) |\n|---|'
	for m in $(nodes); do printf -- '---|'; done
	printf -- '---|\n'
	for r in $(nodes); do
		cpu=$(first_cpu "$r")
		declare -A ns=()
		for m in $(nodes); do
			ns[$m]=$("${pre[@]}" "$GET" "$W/root" "n$m" "$cpu" "$SECS" | awk '{print $10}')
		done
		rep=$("${pre[@]}" "$GET" "$W/root" rep "$cpu" "$SECS" | awk '{print $10}')
		printf '| %s |' "$r"
		for m in $(nodes); do
			printf ' %s (%sx) |' "${ns[$m]}" "$(awk -v a="${ns[$m]}" -v b="${ns[$r]}" 'BEGIN {printf "%.2f", a / b}')"
		done
		printf ' %s (%sx) |\n' "$rep" "$(awk -v a="$rep" -v b="${ns[$r]}" 'BEGIN {printf "%.2f", a / b}')"
	done
	exit 0
fi

# cost: the same image loaded with numa=none, node=0, interleave
HUGE=$(mktemp -d /tmp/nbench-huge.XXXXXX)
mount -t hugetlbfs -o pagesize=2M none "$HUGE"
SZ=${SIZE:-512M}
"$MKIMG" "$W/img.shmkv" --size "$SZ" --value-size 2040 --tag c >/dev/null
bytes=$(stat -c %s "$W/img.shmkv")
pages=$(((bytes + 2097151) / 2097152 * 2 + 8)) # current and rollback
f=/proc/sys/vm/nr_hugepages
echo $(($(cat $f) + pages)) >$f
ADDED=$pages
cat >"$W/conf" <<CONF
[loader]
root = $W/root
spool = $W/spool
shm_dir = $SHM
hugetlb_dir = $HUGE
[cache shm]
memory = shm
[cache huge]
memory = hugetlb
CONF
start_loader --config "$W/conf"
cat "$W/img.shmkv" >/dev/null # warm: the loader reads from the page cache
echo "- image $bytes bytes, $REPS interleaved repetitions, medians of the loader's load time (ms; reply field ms)"
echo
echo "| memory | numa=none | node=0 (bind + verify) | interleave (bind + verify) | node=0 / none | interleave / none |"
echo "|---|---|---|---|---|---|"
for mem in shm huge; do
	# one round not counted: a VM's first touch of guest memory it never
	# used costs host faults (seen: 2.5-4 s for the first load into fresh
	# huge pages, bound or not)
	for pol in none node=0 interleave none; do
		"${pre[@]}" "$SHMCTL" -r "$W/root" cache load --numa "$pol" "$mem" "$W/img.shmkv" >/dev/null
	done
	: >"$W/none" ; : >"$W/node" ; : >"$W/inter"
	for _ in $(seq "$REPS"); do
		for p in none node inter; do
			pol=$p
			[ $p = node ] && pol=node=0
			[ $p = inter ] && pol=interleave
			"${pre[@]}" "$SHMCTL" -r "$W/root" -j cache load --numa "$pol" "$mem" "$W/img.shmkv" |
				json '["ms"]' >>"$W/$p"
		done
	done
	a=$(median <"$W/none") b=$(median <"$W/node") c=$(median <"$W/inter")
	if [ -n "${NBENCH_RAW:-}" ]; then # every repetition, to stderr
		for p in none node inter; do echo "raw $mem $p: $(tr '\n' ' ' <"$W/$p")" >&2; done
	fi
	printf '| %s | %s | %s | %s | %s | %s |\n' "$mem" "$a" "$b" "$c" \
		"$(awk -v x="$b" -v y="$a" 'BEGIN {printf "%.3f", x / y}')" \
		"$(awk -v x="$c" -v y="$a" 'BEGIN {printf "%.3f", x / y}')"
done
