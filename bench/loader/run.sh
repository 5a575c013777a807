#!/bin/bash
# run.sh - the shmkv-loader benchmarks: load throughput against fio and memcpy,
# swap latency with live readers, attach time and per-reader memory, the cost
# of shmkv_refresh() when nothing changed.
# Prints markdown tables on stdout; raw outputs go to --out. See README.md.
#
# Needs root (drop_caches, nr_hugepages, mounts), fio, jq, flock.
# Every timed step runs under `flock /tmp/shmkv-bench.lock` and `nice -n -10`
# (other benchmarks on the machine take the same lock).
#
# Everything it changes is undone on exit, also on failure or Ctrl-C: loaders
# stopped, segments and control files removed, hugetlbfs/tmpfs mounts
# unmounted, the huge pages it reserved given back, the work dir removed
# (images kept with --keep-images).
set -euo pipefail

usage() {
	cat <<EOF
usage: $0 --build BUILDDIR [options]
  --build DIR        meson build dir (bench/loader/lbench_* and loader/shmkv-loader)
  --loader PATH      shmkv-loader to measure (default: BUILDDIR/loader/shmkv-loader)
  --work DIR         work dir on the disk to measure (default /var/tmp/shmkv-lbench)
  --out DIR          raw outputs (default /tmp/shmkv-lbench-out.YYYYmmdd-HHMMSS)
  --parts LIST       which parts, comma-separated: 1 load, 2 swap, 3 attach, 4 refresh
                     (default 1,2,3,4)
  --reps N           part 1 repetitions, interleaved (default 5)
  --sweep LIST       part 1 queue settings QDxBS to try, space-separated
                     (default "16x4M 32x4M 64x4M 16x8M 64x1M"; "" to skip)
  --swaps N          part 2 swaps per configuration (default 7)
  --readers K        part 2 reader processes (default 4)
  --cycles N         part 3 attach cycles (default 10000)
  --calls N          part 4 refresh calls (and gets) per round, 5 rounds (default 1000000)
  --keep-images      build images once into WORK/img and keep them for later runs
EOF
}

BUILD= LOADER= WORK=/var/tmp/shmkv-lbench OUT= PARTS=1,2,3,4 REPS=5 SWAPS=7 READERS=4
CYCLES=10000 CALLS=1000000 KEEP_IMAGES=0 SWEEP="16x4M 32x4M 64x4M 16x8M 64x1M"
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--loader) LOADER=$2; shift 2 ;;
	--work) WORK=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--parts) PARTS=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	--sweep) SWEEP=$2; shift 2 ;;
	--swaps) SWAPS=$2; shift 2 ;;
	--readers) READERS=$2; shift 2 ;;
	--cycles) CYCLES=$2; shift 2 ;;
	--calls) CALLS=$2; shift 2 ;;
	--keep-images) KEEP_IMAGES=1; shift ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[ -n "$BUILD" ] || { usage >&2; exit 2; }
BUILD=$(realpath "$BUILD")
B=$BUILD/bench/loader
LOADER=${LOADER:-$BUILD/loader/shmkv-loader}
OUT=${OUT:-/tmp/shmkv-lbench-out.$(date +%Y%m%d-%H%M%S)}
LOCK=/tmp/shmkv-bench.lock
HP=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
for p in lbench_mkimage lbench_ctl lbench_copy lbench_swap lbench_attach; do
	[ -x "$B/$p" ] || { echo "missing $B/$p (ninja -C $BUILD)" >&2; exit 2; }
done
[ -x "$LOADER" ] || { echo "missing $LOADER" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root (drop_caches, hugetlbfs, nr_hugepages)" >&2; exit 2; }
for t in fio jq flock findmnt; do
	command -v $t >/dev/null || { echo "needs $t (apt-get install fio jq util-linux)" >&2; exit 2; }
done
has_part() { case ",$PARTS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# ---- setup and cleanup ---------------------------------------------------------

mkdir -p "$WORK" "$OUT"
WORK=$(realpath "$WORK")
IMG=$WORK/img HUGE=$WORK/huge THP=$WORK/thp
SHM= HP_ADDED=0 LOADER_PIDS=() MOUNTED=()

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

stop_loaders() {
	local pid
	for pid in "${LOADER_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || continue
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	LOADER_PIDS=()
}

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	stop_loaders
	[ -n "$SHM" ] && rm -rf "$SHM"
	local m
	for m in "${MOUNTED[@]}"; do
		rm -f "$m"/* 2>/dev/null
		umount "$m" && rmdir "$m"
	done
	if [ "$HP_ADDED" -gt 0 ]; then
		local now
		now=$(cat $HP)
		echo $((now - HP_ADDED)) > $HP
		log "huge pages: $(cat $HP) (gave back $HP_ADDED)"
	fi
	rm -rf "$WORK"/root* "$WORK"/spool* "$WORK"/loader*.conf
	if [ "$KEEP_IMAGES" = 1 ]; then
		log "images kept in $IMG"
	else
		rm -rf "$IMG"
		rmdir "$WORK" 2>/dev/null
	fi
	log "raw outputs in $OUT"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

timed() { flock "$LOCK" nice -n -10 "$@"; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
warm_file() { cat "$1" > /dev/null; }
export -f drop_caches warm_file

# "key=value" field of a line
kv() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" <<<"$1" | head -n1; }
# median / min / max of numbers
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
min() { printf '%s\n' "$@" | sort -g | head -n1; }
max() { printf '%s\n' "$@" | sort -g | tail -n1; }
calc() { awk "BEGIN {printf \"%.${2:-2}f\", $1}"; }

fs_line=$(findmnt -n -o SOURCE,FSTYPE,OPTIONS -T "$WORK")
fstype=$(findmnt -n -o FSTYPE -T "$WORK")
case "$fstype" in
tmpfs|overlay|ramfs)
	log "WARNING: $WORK is on $fstype: O_DIRECT and drop_caches do not behave like a disk there";;
esac

mkdir -p "$IMG" "$WORK/rootA" "$WORK/rootB" "$WORK/spool" "$WORK/spoolB" "$HUGE" "$THP"
SHM=$(mktemp -d /dev/shm/shmkv-lbench.XXXXXX)
mount -t hugetlbfs -o pagesize=2M none "$HUGE"
MOUNTED+=("$HUGE")
mount -t tmpfs -o size=8G,huge=always,mode=0755 none "$THP"
MOUNTED+=("$THP")

# ---- images ------------------------------------------------------------------------

image() { # NAME ARGS...: build IMG/NAME.shmkv unless kept from an earlier run
	local name=$1
	shift
	if [ ! -f "$IMG/$name.shmkv" ]; then
		log "building $name.shmkv ($*)"
		timed "$B/lbench_mkimage" "$IMG/$name.shmkv" "$@" >> "$OUT/images.txt"
	fi
}
has_part 1 && image big --size 2G --value-size 2040 --tag big
has_part 2 && image swap_a --size 1G --value-size 2040 --tag a
has_part 2 && image swap_b --size 1G --value-size 2040 --tag b
has_part 3 && image k10m --keys 10M --value-size 16 --tag k10m
has_part 4 && image k1m --keys 1M --value-size 16 --tag k1m
size_of() { stat -c %s "$IMG/$1.shmkv"; }
pages_of() { echo $((($(size_of "$1") + 2097151) / 2097152)); }

# Huge pages: part 1 needs the 2 GiB image twice at most (the loader's segment
# is dropped before the memcpy one) plus fio's buffers; part 2 three 1 GiB
# segments (current, rollback, loading); part 3 one 10M-key segment.
need=64
has_part 1 && need=$((need + $(pages_of big) + 64))
has_part 2 && { n=$((3 * $(pages_of swap_a) + 8)); [ $n -gt $need ] && need=$n; }
has_part 3 && { n=$(($(pages_of k10m) + 64)); [ $n -gt $need ] && need=$n; }
hp0=$(cat $HP)
free0=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
echo $((hp0 + need)) > $HP
HP_ADDED=$(($(cat $HP) - hp0))
log "huge pages: $hp0 -> $(cat $HP) (wanted +$need, $free0 were free)"
[ "$HP_ADDED" -ge "$need" ] || { echo "could not reserve $need huge pages" >&2; exit 1; }
# First touch: on a VM whose free memory is given back to the host, memory that
# was never (or not recently) touched costs host faults once. Touch the pool
# (hugetlbfs fallocate zeroes every page) and the THP tmpfs once, untimed.
timed fallocate -l $((need * 2097152)) "$HUGE/lbench-touch" && rm -f "$HUGE/lbench-touch"
has_part 1 && timed dd if=/dev/zero of="$THP/lbench-touch" bs=4M count=$(($(pages_of big) / 2 + 1)) status=none
rm -f "$THP/lbench-touch"

# ---- loaders -------------------------------------------------------------------------

# Loader A: hugetlb (our mount) and shm (a private dir in /dev/shm). Loader B:
# shm on a tmpfs mounted huge=always (transparent huge pages for shmem).
cat > "$WORK/loaderA.conf" <<EOF
[loader]
root = $WORK/rootA
spool = $WORK/spool
shm_dir = $SHM
hugetlb_dir = $HUGE
memory = auto
[cache big_huge]
memory = hugetlb
[cache big_shm]
memory = shm
[cache swap_huge]
memory = hugetlb
[cache swap_shm]
memory = shm
[cache k10m_huge]
memory = hugetlb
[cache k10m_shm]
memory = shm
[cache refresh_shm]
memory = shm
EOF
cat > "$WORK/loaderB.conf" <<EOF
[loader]
root = $WORK/rootB
spool = $WORK/spoolB
shm_dir = $THP
memory = shm
EOF
declare -A LPID
start_loader() { # A|B [options]
	local which=$1
	shift
	nice -n -10 "$LOADER" --config "$WORK/loader$which.conf" --foreground "$@" \
		2>> "$OUT/loader$which.log" &
	LPID[$which]=$!
	LOADER_PIDS+=($!)
	for _ in $(seq 100); do
		"$B/lbench_ctl" "$WORK/root$which" ping > /dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "loader $which did not start; see $OUT/loader$which.log" >&2
	exit 1
}
stop_loader() { # A|B
	local pid=${LPID[$1]} p keep=()
	kill -TERM "$pid" && wait "$pid" || true
	for p in "${LOADER_PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
	LOADER_PIDS=("${keep[@]}")
}
ctl() { # A|B WORD...: one request; the reply (exit 1 if not ok)
	local which=$1
	shift
	"$B/lbench_ctl" "$WORK/root$which" "$@"
}
start_loader A
start_loader B

# ---- header ----------------------------------------------------------------------------

cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
dev=$(findmnt -n -o SOURCE -T "$WORK")
echo "# shmkv-loader benchmarks"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); kernel $(uname -r); $cpu, $(nproc) CPUs, $mem"
echo "- work dir: $WORK on $fs_line ($(lsblk -n -d -o NAME,SIZE,ROTA,TYPE "$dev" 2>/dev/null | tr -s ' ' || echo "?"))"
echo "- loader: $LOADER (defaults queue_depth 16, block_size 4M); fio $(fio --version)"
echo "- image sizes: $(for f in "$IMG"/*.shmkv; do printf '%s %s bytes; ' "$(basename "$f")" "$(stat -c %s "$f")"; done)"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -d /sys/bus/virtio/drivers/virtio_balloon ]; then
	echo "- VM with virtio_balloon (free page reporting): freshly allocated memory may cost host faults"
fi
echo

# ---- part 1: load throughput ---------------------------------------------------------------

fio_read() { # QD BS DIRECT(0|1) IOMEM [cold|warm]: GB/s of a sequential read of the big image
	local qd=$1 bs=$2 direct=$3 iomem=$4 pre=$5 f="$IMG/big.shmkv" cmd
	if [ "$pre" = cold ]; then cmd="drop_caches"; else cmd="warm_file $f"; fi
	flock "$LOCK" bash -c "$cmd; nice -n -10 fio --name=seq --filename=$f --rw=read --bs=$bs \
		--iodepth=$qd --ioengine=io_uring --direct=$direct --invalidate=0 --iomem=$iomem \
		--output-format=json" > "$OUT/fio.json"
	cat "$OUT/fio.json" >> "$OUT/fio-all.json"
	jq -r '.jobs[0].read.bw_bytes / 1e9' "$OUT/fio.json"
}
segdir() { # CACHE: the directory its segments go to
	case $1 in *_huge) echo "$HUGE" ;; *_shm) echo "$SHM" ;; *_thp) echo "$THP" ;; esac
}
loader_load() { # A|B CACHE cold|warm: "gbps ms alloc_ms direct(yes|no) memory wall_ms"
	local which=$1 cache=$2 pre=$3 f="$IMG/big.shmkv" cmd r
	if [ "$pre" = cold ]; then cmd="drop_caches"; else cmd="warm_file $f"; fi
	# pre-touch (untimed): see lbench_copy.c
	cmd="$cmd; $B/lbench_copy --touch-only $(size_of big) --dir $(segdir "$cache")"
	r=$(flock "$LOCK" bash -c "$cmd; nice -n -10 $B/lbench_ctl $WORK/root$which load $cache $f")
	echo "$r" >> "$OUT/loads.jsonl"
	ctl "$which" drop "$cache" > /dev/null
	jq -r '"\(.bytes / .ms / 1e6) \(.ms) \(.alloc_ms) \(if .direct_io then "yes" else "no" end) \(.memory) \(.client_wall_ns / 1e6)"' <<<"$r"
}

if has_part 1; then
	log "part 1: load throughput, $REPS repetitions"
	BIG=$(size_of big)
	declare -A R # method -> "v1 v2 ..." GB/s
	declare -A ALLOC COPYS TOUCH HOT HASH XXH DIRECT # DIRECT: method -> the loader's direct_io
	add() { R[$1]="${R[$1]:-} $2"; }
	# untimed warm-up loads (first use of each memory kind)
	loader_load A big_huge cold > /dev/null
	loader_load A big_shm cold > /dev/null
	loader_load B big_thp cold > /dev/null
	for rep in $(seq "$REPS"); do
		log "  repetition $rep/$REPS"
		add fio_cold_4k "$(fio_read 16 4M 1 malloc cold)"
		add fio_cold_huge "$(fio_read 16 4M 1 "mmaphuge:$HUGE/lbench-fio-buf" cold)"
		for k in huge shm thp; do
			w=A; [ $k = thp ] && w=B
			set -- $(loader_load $w big_$k cold)
			add "loader_cold_$k" "$1"; ALLOC[cold_$k]="${ALLOC[cold_$k]:-} $3"
			DIRECT[loader_cold_$k]=$4
		done
		add fio_warm_buffered "$(fio_read 16 4M 0 malloc warm)"
		add fio_warm_direct_huge "$(fio_read 16 4M 1 "mmaphuge:$HUGE/lbench-fio-buf" warm)"
		for k in huge shm thp; do
			w=A; [ $k = thp ] && w=B
			set -- $(loader_load $w big_$k warm)
			add "loader_warm_$k" "$1"; ALLOC[warm_$k]="${ALLOC[warm_$k]:-} $3"
			DIRECT[loader_warm_$k]=$4
		done
		for k in huge shm thp; do
			d=$HUGE; [ $k = shm ] && d=$SHM; [ $k = thp ] && d=$THP
			out=$(timed "$B/lbench_copy" --src "$IMG/big.shmkv" --dir "$d" --reps 1)
			echo "$out" >> "$OUT/copy_$k.txt"
			head=$(head -n1 <<<"$out") line=$(grep '^median' <<<"$out")
			add "memcpy_$k" "$(calc "$BIG / $(kv "$line" total_s) / 1e9")"
			add "memcpyhash_$k" "$(calc "$BIG / $(kv "$line" copyhash_s) / 1e9")"
			ALLOC[copy_$k]="${ALLOC[copy_$k]:-} $(kv "$line" alloc_s)"
			COPYS[$k]="${COPYS[$k]:-} $(kv "$line" copy_s)"
			TOUCH[$k]="${TOUCH[$k]:-} $(kv "$line" touch_s)"
			HOT[$k]="${HOT[$k]:-} $(kv "$line" hot_s)"
			XXH[$k]="${XXH[$k]:-} $(kv "$head" xxh3_s)"
		done
	done
	row() { # METHOD LABEL MEMORY DIRECT
		local v=${R[$1]}
		# shellcheck disable=SC2086
		printf '| %s | %s | %s | %s | %s–%s | %s |\n' "$2" "$3" "$4" "$(calc "$(med $v)")" \
			"$(calc "$(min $v)")" "$(calc "$(max $v)")" "$(calc "$BIG / $(med $v) / 1e9" 3)"
	}
	m() { med ${R[$1]}; }
	echo "## 1. Load of a $(calc "$BIG / 1073741824") GiB image ($BIG bytes)"
	echo
	echo "Median of $REPS interleaved repetitions; GB = 10^9 bytes. Cold: \`sync; echo 3 >"
	echo "/proc/sys/vm/drop_caches\` right before. Warm: the file read with \`cat\` right before."
	echo "Loader: its own \`ms\` (open to verified, before publish); it checks every checksum."
	echo "It reads with O_DIRECT unless the page cache holds the file (then buffered: O_DIRECT = no)."
	echo "fio reads whole 4 MiB blocks only ($(( BIG / 4194304 * 4194304 )) bytes)."
	echo
	echo "| method | memory | O_DIRECT | GB/s median | min–max | s |"
	echo "|---|---|---|---|---|---|"
	row fio_cold_4k "fio io_uring 4M×16, cold, 4 KiB-page buffers (fio default)" "anon 4K" yes
	row fio_cold_huge "fio io_uring 4M×16, cold, 2 MiB-page buffers (\`--iomem=mmaphuge\`)" "hugetlb 2M" yes
	row loader_cold_huge "shmkv-loader, cold" "hugetlb 2M" "${DIRECT[loader_cold_huge]}"
	row loader_cold_shm "shmkv-loader, cold" "shm (tmpfs 4K)" "${DIRECT[loader_cold_shm]}"
	row loader_cold_thp "shmkv-loader, cold" "shm (tmpfs huge=always)" "${DIRECT[loader_cold_thp]}"
	row fio_warm_direct_huge "fio io_uring 4M×16, warm, 2 MiB-page buffers" "hugetlb 2M" yes
	row fio_warm_buffered "fio io_uring 4M×16, warm, buffered (\`--direct=0 --invalidate=0\`)" "anon 4K" no
	row loader_warm_huge "shmkv-loader, warm" "hugetlb 2M" "${DIRECT[loader_warm_huge]}"
	row loader_warm_shm "shmkv-loader, warm" "shm (tmpfs 4K)" "${DIRECT[loader_warm_shm]}"
	row loader_warm_thp "shmkv-loader, warm" "shm (tmpfs huge=always)" "${DIRECT[loader_warm_thp]}"
	row memcpy_huge "memcpy from the warm mmap into a fresh segment" "hugetlb 2M" "–"
	row memcpy_shm "memcpy from the warm mmap into a fresh segment (fallocate'd)" "shm (tmpfs 4K)" "–"
	row memcpy_thp "memcpy from the warm mmap into a fresh segment (fallocate'd)" "shm (tmpfs huge=always)" "–"
	row memcpyhash_huge "memcpy + XXH3 per 4 MiB chunk, fresh segment" "hugetlb 2M" "–"
	row memcpyhash_shm "memcpy + XXH3 per 4 MiB chunk, fresh segment" "shm (tmpfs 4K)" "–"
	row memcpyhash_thp "memcpy + XXH3 per 4 MiB chunk, fresh segment" "shm (tmpfs huge=always)" "–"
	echo
	echo "| ratio (medians) | hugetlb 2M | shm (tmpfs 4K) | shm (tmpfs huge=always) | goal |"
	echo "|---|---|---|---|---|"
	printf '| loader cold / fio cold (2 MiB-page buffers) | %s | %s | %s | ≥ 0.9 |\n' \
		"$(calc "$(m loader_cold_huge) / $(m fio_cold_huge)")" \
		"$(calc "$(m loader_cold_shm) / $(m fio_cold_huge)")" \
		"$(calc "$(m loader_cold_thp) / $(m fio_cold_huge)")"
	printf '| loader cold / fio cold (fio default 4 KiB-page buffers) | %s | %s | %s | |\n' \
		"$(calc "$(m loader_cold_huge) / $(m fio_cold_4k)")" \
		"$(calc "$(m loader_cold_shm) / $(m fio_cold_4k)")" \
		"$(calc "$(m loader_cold_thp) / $(m fio_cold_4k)")"
	printf '| loader warm / memcpy (same memory kind) | %s | %s | %s | ≥ 0.6 |\n' \
		"$(calc "$(m loader_warm_huge) / $(m memcpy_huge)")" \
		"$(calc "$(m loader_warm_shm) / $(m memcpy_shm)")" \
		"$(calc "$(m loader_warm_thp) / $(m memcpy_thp)")"
	printf '| loader warm / memcpy+XXH3 (same memory kind) | %s | %s | %s | |\n' \
		"$(calc "$(m loader_warm_huge) / $(m memcpyhash_huge)")" \
		"$(calc "$(m loader_warm_shm) / $(m memcpyhash_shm)")" \
		"$(calc "$(m loader_warm_thp) / $(m memcpyhash_thp)")"
	echo
	echo "Where the time goes (medians, seconds for the whole image):"
	echo
	echo "| component | hugetlb 2M | shm (tmpfs 4K) | shm (tmpfs huge=always) |"
	echo "|---|---|---|---|"
	# shellcheck disable=SC2086
	printf '| loader alloc_ms / 1000, cold (segment create + size; fallocate on tmpfs) | %s | %s | %s |\n' \
		"$(calc "$(med ${ALLOC[cold_huge]}) / 1000" 3)" "$(calc "$(med ${ALLOC[cold_shm]}) / 1000" 3)" \
		"$(calc "$(med ${ALLOC[cold_thp]}) / 1000" 3)"
	# shellcheck disable=SC2086
	printf '| memcpy bench: create + size (+ fallocate) + mmap | %s | %s | %s |\n' \
		"$(med ${ALLOC[copy_huge]})" "$(med ${ALLOC[copy_shm]})" "$(med ${ALLOC[copy_thp]})"
	# shellcheck disable=SC2086
	printf '| memcpy into the fresh mapping (page faults, zeroing included) | %s | %s | %s |\n' \
		"$(med ${COPYS[huge]})" "$(med ${COPYS[shm]})" "$(med ${COPYS[thp]})"
	# shellcheck disable=SC2086
	printf '| memcpy into the same mapping again (no faults) | %s | %s | %s |\n' \
		"$(med ${HOT[huge]})" "$(med ${HOT[shm]})" "$(med ${HOT[thp]})"
	# shellcheck disable=SC2086
	printf '| fresh segment, one write per 4 KiB (fault + zero only) | %s | %s | %s |\n' \
		"$(med ${TOUCH[huge]})" "$(med ${TOUCH[shm]})" "$(med ${TOUCH[thp]})"
	# shellcheck disable=SC2086
	printf '| XXH3-64 of the whole image (warm mmap) | %s | %s | %s |\n' \
		"$(med ${XXH[huge]})" "$(med ${XXH[shm]})" "$(med ${XXH[thp]})"
	echo

	if [ -n "$SWEEP" ]; then
		log "part 1: queue settings $SWEEP"
		echo "Queue settings (cold, hugetlb 2M, 2 repetitions each, median; fio with 2 MiB-page buffers):"
		echo
		echo "| queue depth × block size | loader GB/s | fio GB/s | loader / fio |"
		echo "|---|---|---|---|"
		for s in $SWEEP; do
			qd=${s%x*} bs=${s#*x}
			stop_loader A
			start_loader A --queue-depth "$qd" --block-size "$bs"
			lv=() fv=()
			for _ in 1 2; do
				set -- $(loader_load A big_huge cold)
				lv+=("$1")
				fv+=("$(fio_read "$qd" "$bs" 1 "mmaphuge:$HUGE/lbench-fio-buf" cold)")
			done
			printf '| %s × %s | %s | %s | %s |\n' "$qd" "$bs" "$(calc "$(med "${lv[@]}")")" \
				"$(calc "$(med "${fv[@]}")")" "$(calc "$(med "${lv[@]}") / $(med "${fv[@]}")")"
		done
		stop_loader A
		start_loader A
		echo
	fi
fi

# ---- part 2: swap latency --------------------------------------------------------------------

if has_part 2; then
	log "part 2: swap latency, $SWAPS swaps, $READERS readers"
	echo "## 2. Swap latency: rename of a new $(calc "$(size_of swap_a) / 1073741824") GiB image into the spool → all $READERS readers on it"
	echo
	echo "$SWAPS swaps per row (images alternate), after an untimed first load. Readers loop"
	echo "\`shmkv_refresh\` + 16 random gets, then sleep (or not). All times on CLOCK_REALTIME from the"
	echo "rename: publish = the control segment's \`published_ns\`; load = the loader's \`load_ms\`"
	echo "(open to verified); pick-up + publish = publish − load (inotify, queue, rename, publish);"
	echo "publish → readers = published_ns to the first / last reader's refresh returning 1."
	echo
	echo "| memory | readers | total ms min / median / max | load ms (median) | pick-up + publish ms (median) | publish → first reader ms (median) | publish → last reader ms min / median / max | slowest refresh µs (median) |"
	echo "|---|---|---|---|---|---|---|---|"
	for k in huge shm; do
		for sl in 100 0; do
			out=$(timed "$B/lbench_swap" --root "$WORK/rootA" --spool "$WORK/spool" --cache swap_$k \
				--image "$IMG/swap_a.shmkv" --image "$IMG/swap_b.shmkv" --swaps "$SWAPS" \
				--readers "$READERS" --sleep-us $sl --pretouch "$(segdir swap_$k)")
			echo "$out" >> "$OUT/swap_$k.txt"
			lo=$(grep '^min' <<<"$out") md=$(grep '^median' <<<"$out") hi=$(grep '^max' <<<"$out")
			mem=$(kv "$(grep '^swap=1 ' <<<"$out")" memory)
			if [ $sl = 0 ]; then rd="$READERS busy"; else rd="$READERS, sleep ${sl} µs"; fi
			printf '| %s | %s | %s / %s / %s | %s | %s | %s | %s / %s / %s | %s |\n' "$mem" "$rd" \
				"$(calc "$(kv "$lo" total_ms)" 1)" "$(calc "$(kv "$md" total_ms)" 1)" \
				"$(calc "$(kv "$hi" total_ms)" 1)" "$(calc "$(kv "$md" load_ms)" 0)" \
				"$(calc "$(kv "$md" pickup_ms)" 1)" "$(calc "$(kv "$md" first_ms)" 3)" \
				"$(calc "$(kv "$lo" last_ms)" 3)" "$(calc "$(kv "$md" last_ms)" 3)" \
				"$(calc "$(kv "$hi" last_ms)" 3)" "$(calc "$(kv "$md" refresh_us)" 0)"
			ctl A drop swap_$k > /dev/null
		done
	done
	echo
fi

# ---- part 3: attach time and reader memory -------------------------------------------------

if has_part 3; then
	log "part 3: attach time ($CYCLES cycles) and reader memory"
	K10M=$(size_of k10m)
	ctl A load k10m_huge "$IMG/k10m.shmkv" > /dev/null
	ctl A load k10m_shm "$IMG/k10m.shmkv" > /dev/null
	ctl B load k10m_thp "$IMG/k10m.shmkv" > /dev/null
	echo "## 3. Attach time and per-reader memory, 10M keys ($K10M-byte image)"
	echo
	echo "Attach: $CYCLES cycles of \`shmkv_attach_diag\` → get of a random key → get of another → \`shmkv_close\`, µs."
	echo
	echo "| memory | attach median | attach p99 | first get median | first get p99 | second get median | close median | whole cycle median |"
	echo "|---|---|---|---|---|---|---|---|"
	for k in huge shm thp; do
		w=A; [ $k = thp ] && w=B
		out=$(timed "$B/lbench_attach" time --root "$WORK/root$w" --cache k10m_$k --cycles "$CYCLES")
		echo "$out" >> "$OUT/attach_$k.txt"
		a=$(grep '^attach' <<<"$out") g1=$(grep '^first_get' <<<"$out") g2=$(grep '^second_get' <<<"$out")
		c=$(grep '^close' <<<"$out") cy=$(grep '^cycle' <<<"$out")
		case $k in huge) label="hugetlb 2M" ;; shm) label="shm (tmpfs 4K)" ;; thp) label="shm (tmpfs huge=always)" ;; esac
		printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$(kv "$a" median_us)" \
			"$(kv "$a" p99_us)" "$(kv "$g1" median_us)" "$(kv "$g1" p99_us)" "$(kv "$g2" median_us)" \
			"$(kv "$c" median_us)" "$(kv "$cy" median_us)"
	done
	echo
	echo "Reader memory: K reader processes each attach and get every key once (key_0 … key_n−1,"
	echo "which touches every page of the image), then wait; kB from /proc/PID/smaps_rollup,"
	echo "/proc/PID/status and the segment's mapping in /proc/PID/smaps, averaged over the readers."
	echo "Hugetlb mappings count in \`Shared/Private_Hugetlb\`, not in Rss/Pss (kernel accounting)."
	echo "System Δ: growth of /proc/meminfo \`Shmem\` (shm) or huge pages in use (hugetlb) from"
	echo "before the readers started to all of them ready. Own Private_Dirty: the reader's"
	echo "Private_Dirty outside the segment mapping. Overhead per reader = own Private_Dirty +"
	echo "VmPTE − the same of a process of the same program that did not attach."
	echo
	echo "| memory | K | segment Rss | segment Pss | Σ segment Pss (K readers) | segment hugetlb mapped | system Δ | own Private_Dirty | VmPTE | baseline Private_Dirty + VmPTE | overhead per reader |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|"
	for k in huge shm thp; do
		w=A; [ $k = thp ] && w=B
		case $k in huge) label="hugetlb 2M" ;; shm) label="shm (tmpfs 4K)" ;; thp) label="shm (tmpfs huge=always)" ;; esac
		for K in 1 4 16; do
			out=$(timed "$B/lbench_attach" mem --root "$WORK/root$w" --cache k10m_$k --readers $K --gets all)
			echo "$out" >> "$OUT/mem_$k.txt"
			s=$(grep '^summary' <<<"$out")
			if [ $k = huge ]; then delta=$(kv "$s" hugetlb_delta_kb); else delta=$(kv "$s" shmem_delta_kb); fi
			printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$K" \
				"$(kv "$s" seg_rss_kb)" "$(kv "$s" seg_pss_kb)" "$(kv "$s" seg_pss_sum_kb)" \
				"$(kv "$s" seg_hugetlb_kb)" "$delta" "$(kv "$s" own_private_dirty_kb)" "$(kv "$s" vmpte_kb)" \
				"$(( $(kv "$s" base_private_dirty_kb) + $(kv "$s" base_vmpte_kb) ))" "$(kv "$s" overhead_kb)"
		done
	done
	echo
	ctl A drop k10m_huge > /dev/null
	ctl A drop k10m_shm > /dev/null
	ctl B drop k10m_thp > /dev/null
fi

# ---- part 4: the cost of shmkv_refresh when nothing changed ---------------------------------

if has_part 4; then
	log "part 4: shmkv_refresh, nothing changed (5 rounds of $CALLS calls)"
	ctl A load refresh_shm "$IMG/k1m.shmkv" > /dev/null
	echo "## 4. shmkv_refresh with nothing changed, 1M keys (shm)"
	echo
	echo "One reader attached to a loaded cache; 5 rounds of $CALLS \`shmkv_refresh\` calls"
	echo "(each returns 0: one \`fstat\` of the control segment and an atomic load) and as many"
	echo "gets of random keys on the same handle; ns per call, median (best) round by the wall"
	echo "clock, and the median round by the thread's CPU time."
	echo
	echo "| refresh ns | get ns | refresh CPU ns | get CPU ns | refresh / get (CPU) | load average |"
	echo "|---|---|---|---|---|---|"
	out=$(timed "$B/lbench_attach" refresh --root "$WORK/rootA" --cache refresh_shm --calls "$CALLS" --reps 5)
	echo "$out" >> "$OUT/refresh.txt"
	s=$(grep '^summary' <<<"$out")
	printf '| %s (%s) | %s (%s) | %s | %s | %s | %s |\n' "$(kv "$s" refresh_median_ns)" \
		"$(kv "$s" refresh_best_ns)" "$(kv "$s" get_median_ns)" "$(kv "$s" get_best_ns)" \
		"$(kv "$s" refresh_cpu_median_ns)" "$(kv "$s" get_cpu_median_ns)" \
		"$(kv "$s" refresh_per_get_cpu)" "$(kv "$s" loadavg)"
	echo
	ctl A drop refresh_shm > /dev/null
fi
echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
