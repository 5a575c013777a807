#!/bin/bash
# run.sh - the loader's write path (bench/README.md, "Writes"): one change
# until every reader sees it (wbench_set), where a publish's time goes (the
# loader's USDT probes, publish_phases.bt), a compaction of the changed
# cache, and a paced stream of upserts against readers' gets (wbench_stream).
# Prints markdown on stdout, progress on stderr.
#
# Everything it writes lives in one temporary directory (images, the
# loader's root, spool and segments), removed on exit, also on failure or
# Ctrl-C, after the loader it started is stopped. Heavy steps run at nice 10
# under flock /tmp/shmkv-bench.lock, the lock other benchmarks on the machine
# take.
set -euo pipefail

usage() {
	cat <<EOF
usage: $0 --build BUILDDIR [options]
  --build DIR       meson build dir with -Dbench=true (loader, shmctl, bench/writes)
  --keys N          keys of the base image, key_0 .. key_<N-1> (default 10000000)
  --pending N       changes pending in case (b), one delta applied (default 100000)
  --sets N          timed sets per cache and client (default 200)
  --readers K       reader processes (default 2)
  --rate R          stream: upserts per second (default 20000)
  --secs S          stream: seconds per phase (default 60)
  --reps N          stream: off/on/after repetitions; compactions (default 2)
  --via shmctl|socket  stream client (default shmctl: cache apply NAME -)
  --no-compact      caches a, b and c with compact_entries = compact_ratio = 0 (a
                    config file): no compaction, the publishes alone
  --stream-interval T  the loader's stream_interval (a config file; default
                    100ms): a stream publishes at most once per T
  --fold-entries N  caches a, b and c with fold_entries = N (a config file; 0: no
                    top overlay, every change rebuilds the one overlay, as
                    the loader did before it had a top: the baseline)
  --parts LIST      1 sets, 2 publish phases (bpftrace), 3 compaction of case (b)
                    against a full rebuild (--reps times), 4 stream (default 1,2,3,4)
  --work DIR        where the temporary directory goes (default /dev/shm)
  --keep DIR        copy the raw outputs (per-set lines, acknowledgements,
                    traces, the loader's log) to DIR before cleaning up
  --no-lock         do not take /tmp/shmkv-bench.lock
EOF
}

BUILD= KEYS=10000000 PENDING=100000 SETS=200 READERS=2 RATE=20000 SECS=60 REPS=2 VIA=shmctl
PARTS=1,2,3,4 WORKDIR=/dev/shm KEEP= LOCK=/tmp/shmkv-bench.lock COMPACT=default FOLD= SINTERVAL=
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--keys) KEYS=$2; shift 2 ;;
	--pending) PENDING=$2; shift 2 ;;
	--sets) SETS=$2; shift 2 ;;
	--readers) READERS=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--secs) SECS=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	--via) VIA=$2; shift 2 ;;
	--parts) PARTS=$2; shift 2 ;;
	--work) WORKDIR=$2; shift 2 ;;
	--keep) KEEP=$2; shift 2 ;;
	--no-lock) LOCK=; shift ;;
	--no-compact) COMPACT=off; shift ;;
	--fold-entries) FOLD=$2; shift 2 ;;
	--stream-interval) SINTERVAL=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[ -n "$BUILD" ] || { usage >&2; exit 2; }
for n in KEYS PENDING SETS READERS RATE SECS REPS; do
	[[ ${!n} =~ ^[1-9][0-9]*$ ]] || { echo "--${n,,} ${!n}: expected a positive integer" >&2; exit 2; }
done
[ -z "$SINTERVAL" ] || [[ $SINTERVAL =~ ^[0-9]+(ms|s)?$ ]] || { echo "--stream-interval $SINTERVAL: expected a duration like 500ms" >&2; exit 2; }
[ -z "$FOLD" ] || [[ $FOLD =~ ^[0-9]+$ ]] || { echo "--fold-entries $FOLD: expected a number" >&2; exit 2; }
[ "$PENDING" -lt "$KEYS" ] || { echo "--pending $PENDING: must be below --keys $KEYS" >&2; exit 2; }
case "$VIA" in shmctl|socket) ;; *) echo "--via $VIA: expected shmctl or socket" >&2; exit 2 ;; esac
BUILD=$(realpath "$BUILD")
HERE=$(dirname "$(realpath "$0")")
LOADER=$BUILD/loader/shmkv-loader SHMCTL=$BUILD/shmctl/shmctl W=$BUILD/bench/writes
LIB=$BUILD/builder/libshmkv-build.so.0
command -v jq > /dev/null || { echo "needs jq (Debian: apt-get install jq)" >&2; exit 2; }
for f in "$LOADER" "$SHMCTL" "$W/wbench_set" "$W/wbench_stream"; do
	[ -x "$f" ] || { echo "missing $f (meson setup with -Dbench=true; ninja -C $BUILD)" >&2; exit 2; }
done
has_part() { case ",$PARTS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# Memory: the image and its input, three cache copies of it (cases (a),
# (b), (c)), the deltas, a compaction's temporary and new segment, a rebuilt image
# and its load with the merged records (part 3), and the
# stream's overlays (the current one, the rollback and one being built;
# ~50 bytes a record).
img_est=$((KEYS * 50))
need=$((img_est * 10 + RATE * SECS * 50 * 3 + (256 << 20)))
avail=$(($(awk '/MemAvailable/ {print $2}' /proc/meminfo) * 1024))
if [ "$avail" -lt "$need" ]; then
	echo "needs about $((need >> 20)) MiB of memory, $((avail >> 20)) MiB available: use fewer --keys" >&2
	exit 1
fi

T=$(mktemp -d "$WORKDIR/shmkv-wbench.XXXXXX")
LOADER_PID= TRACE_PID=
cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	[ -n "$TRACE_PID" ] && kill -INT "$TRACE_PID" 2>/dev/null && wait "$TRACE_PID" 2>/dev/null
	if [ -n "$LOADER_PID" ]; then
		kill -TERM "$LOADER_PID" 2>/dev/null
		for _ in $(seq 100); do kill -0 "$LOADER_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$LOADER_PID" 2>/dev/null
		wait "$LOADER_PID" 2>/dev/null
	fi
	if [ -n "$KEEP" ]; then
		mkdir -p "$KEEP" && cp "$T"/*.txt "$T"/loader.log "$KEEP"/ 2>/dev/null
		log "raw outputs in $KEEP"
	fi
	rm -rf "$T"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "run.sh: line $LINENO: $BASH_COMMAND failed" >&2' ERR

timed() {
	if [ -n "$LOCK" ]; then flock "$LOCK" nice -n 10 "$@"; else nice -n 10 "$@"; fi
}
load_now() { uptime | sed 's/.*load average: /load average /'; }

ROOT=$T/root
mkdir -p "$ROOT" "$T/spool" "$T/shm"
S=("$SHMCTL" -r "$ROOT")

echo "## Writes: bench/writes/run.sh --keys $KEYS --pending $PENDING --sets $SETS --readers $READERS --rate $RATE --secs $SECS --reps $REPS --via $VIA$([ "$COMPACT" = off ] && echo ' --no-compact')$([ -n "$FOLD" ] && echo " --fold-entries $FOLD")$([ -n "$SINTERVAL" ] && echo " --stream-interval $SINTERVAL")"
echo
echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) CPUs; $(load_now) at the start"
echo "- memory: shm (tmpfs, 4 KiB pages) in $WORKDIR; stream_interval ${SINTERVAL:-100 ms (the default)}; compaction: $([ "$COMPACT" = off ] && echo "off (compact_entries = compact_ratio = 0)" || echo "the defaults (compact_entries 1000000, compact_ratio 0.25)"); folds: $([ -n "$FOLD" ] && echo "fold_entries $FOLD$([ "$FOLD" = 0 ] && echo ' (no top: every change rebuilds the one overlay)')" || echo "the defaults (fold_entries 2048, fold_ratio 0.125)")"
echo

# ---- images ----------------------------------------------------------------------------------
log "building the base image: $KEYS keys"
awk -v n="$KEYS" 'BEGIN { for (i = 0; i < n; i++) printf "key_%d\tval-%012d\n", i, i }' > "$T/base.tsv"
timed "${S[@]}" image build -o "$T/base.img" "$T/base.tsv" > "$T/build.txt"
rm -f "$T/base.tsv"
# the delta: PENDING distinct existing keys (a stride prime to KEYS), new values
stride=999983
[ $((KEYS % stride)) -ne 0 ] || stride=1000003
awk -v n="$KEYS" -v m="$PENDING" -v s="$stride" \
	'BEGIN { for (i = 0; i < m; i++) printf "key_%d\tdelta-%d\n", (i * s + 7) % n, i }' > "$T/delta.tsv"
timed "${S[@]}" image build --delta-of "$T/base.img" -o "$T/delta.img" "$T/delta.tsv" >> "$T/build.txt"
rm -f "$T/delta.tsv"
# case (c)'s second delta: PENDING / 10 other existing keys (the next of the stride)
awk -v n="$KEYS" -v m="$PENDING" -v s="$stride" \
	'BEGIN { for (i = m; i < m + m / 10; i++) printf "key_%d\tlate-%d\n", (i * s + 7) % n, i }' > "$T/top.tsv"
timed "${S[@]}" image build --delta-of "$T/base.img" -o "$T/top.img" "$T/top.tsv" >> "$T/build.txt"
rm -f "$T/top.tsv"
echo "- base image: $KEYS keys \`key_N\` → 16-byte strings, $(($(stat -c %s "$T/base.img") >> 20)) MiB (\`shmctl image build\`); delta: $PENDING upserts, $(($(stat -c %s "$T/delta.img") >> 20)) MiB (\`--delta-of\`)"

# ---- the loader ------------------------------------------------------------------------------
conf=()
if [ "$COMPACT" = off ] || [ -n "$FOLD" ] || [ -n "$SINTERVAL" ]; then
	{
		if [ -n "$SINTERVAL" ]; then printf '[loader]\nstream_interval = %s\n' "$SINTERVAL"; fi
		for c in a b c; do
			printf '[cache %s]\nmemory = shm\n' "$c"
			if [ "$COMPACT" = off ]; then printf 'compact_entries = 0\ncompact_ratio = 0\n'; fi
			if [ -n "$FOLD" ]; then printf 'fold_entries = %s\n' "$FOLD"; fi
		done
	} > "$T/loader.conf"
	conf=(--config "$T/loader.conf")
fi
nice -n 10 "$LOADER" --foreground "${conf[@]}" --root "$ROOT" --spool "$T/spool" \
	--shm-dir "$T/shm" --memory shm > "$T/loader.log" 2>&1 &
LOADER_PID=$!
for _ in $(seq 300); do # its "ready" line: the socket listens
	grep -qs '^ready ' "$T/loader.log" && break
	kill -0 "$LOADER_PID" 2>/dev/null || { cat "$T/loader.log" >&2; exit 1; }
	sleep 0.1
done
grep -q '^ready ' "$T/loader.log" || { echo "the loader is not ready after 30 s" >&2; exit 1; }

load_cache() { "${S[@]}" -j cache load "$1" "$T/base.img" > /dev/null; }

# ---- 1: sets ---------------------------------------------------------------------------------
if has_part 1 || has_part 2 || has_part 3; then
	log "loading caches a (nothing pending), b ($PENDING pending) and c (and $((PENDING / 10)) more)"
	load_cache a
	load_cache b
	applied=$("${S[@]}" -j cache apply b "$T/delta.img")
	echo "- case (b): \`cache apply b delta.img\` of $PENDING changes: overlay $(jq -r .overlay_bytes <<<"$applied") bytes"
fi
if has_part 1; then # (c): the same, then a second delta, in the top overlay unless folds are off
	load_cache c
	"${S[@]}" -j cache apply c "$T/delta.img" > /dev/null
	applied=$("${S[@]}" -j cache apply c "$T/top.img")
	echo "- case (c): the same, then \`cache apply c top.img\` of $((PENDING / 10)) other keys: $(jq -r .lower_records <<<"$applied") records in the lower overlay, $(jq -r .top_records <<<"$applied") in the top (the sets go there: a publish rebuilds it; below the fold bound, max(2048, $PENDING / 8), for all the sets of part 1)"
fi
if has_part 1; then
	echo
	echo "### 1. One set until every reader sees it"
	echo
	echo "$READERS reader processes attached to the caches, polling (refresh + one get of the key set) every 50 µs; sets interleaved over cache × client, $SETS each. a: nothing pending; b: $PENDING pending (the lower overlay: the sets go into a top of their own); c: $((PENDING + PENDING / 10)) pending, $((PENDING / 10)) of them in the top. socket: a direct control-socket client (\`change\`); shmctl: \`shmctl cache set\` exec'ed (its process start included)."
	echo
	log "part 1: $SETS sets per cache and client ($(load_now))"
	echo "- $(load_now) before"
	timed "$W/wbench_set" --root "$ROOT" --cache a --cache b --cache c --keys "$KEYS" --sets "$SETS" \
		--readers "$READERS" --shmctl "$SHMCTL" > "$T/sets.txt"
	"${S[@]}" cache drop c > /dev/null
	echo "- $(load_now) after"
	sed -n '/^| cache/,$p' "$T/sets.txt"
fi

# ---- 2: where a publish's time goes ----------------------------------------------------------
# median of column $2 (key=value) over the lines of file $1 matching $3
med_kv() {
	grep -- "$3" "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p" | sort -g |
		awk '{a[NR] = $1} END {if (!NR) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
phases_row() { # FILE LABEL FILTER
	local f
	printf '| %s | %s |' "$2" "$(grep -c -- "$3" "$1")"
	for f in records change_us feed_us layout_us write_us verify_us load_us publish_us total_us; do
		printf ' %s |' "$(med_kv "$1" $f "$3")"
	done
	echo
}
trace_start() { # OUT
	bpftrace -p "$LOADER_PID" -B line "$HERE/publish_phases.bt" "$LOADER" "$LIB" > "$1" 2> "$1.err" &
	TRACE_PID=$!
	for _ in $(seq 600); do
		grep -q 'tracing' "$1" 2>/dev/null && return 0
		kill -0 "$TRACE_PID" 2>/dev/null || break
		sleep 0.1
	done
	cat "$1.err" >&2
	echo "bpftrace did not start (see above)" >&2
	exit 1
}
trace_stop() {
	kill -INT "$TRACE_PID"
	wait "$TRACE_PID" || true
	TRACE_PID=
}
if has_part 2; then
	if ! command -v bpftrace > /dev/null || [ "$(id -u)" != 0 ] ||
		! "$HERE/../../perf/probes_check" "$LOADER" shmkv_loader:load_start shmkv_loader:publish > /dev/null 2>&1; then
		echo
		echo "### 2. Publish phases: skipped (needs root, bpftrace and a loader built with USDT probes)"
	else
		ulimit -l unlimited 2> /dev/null || true
		echo
		echo "### 2. Where a publish's time goes (loader USDT probes, medians, µs)"
		echo
		echo "The same sets (socket client), and a stream of $RATE/s for $((SECS < 20 ? SECS : 20)) s into a fresh copy of the base, traced by publish_phases.bt: change = the new changes' delta built, feed = current overlay opened and both fed to the builder, layout/write = the new overlay built, verify = its full check, load = copied into a segment and verified, publish = committed. us/record = total / overlay records."
		echo
		log "part 2: publish phases ($(load_now))"
		echo "- $(load_now) before"
		trace_start "$T/trace_sets.txt"
		timed "$W/wbench_set" --root "$ROOT" --cache a --cache b --keys "$KEYS" --sets 50 \
			--warmup 1 --readers "$READERS" > /dev/null
		trace_stop
		ssecs=$((SECS < 20 ? SECS : 20))
		load_cache a
		trace_start "$T/trace_stream.txt"
		timed "$W/wbench_stream" --root "$ROOT" --cache a --keys "$KEYS" --base "$T/base.img" \
			--rate "$RATE" --secs "$ssecs" --reps 1 --readers "$READERS" --via socket > "$T/stream_traced.txt"
		trace_stop
		echo "- $(load_now) after"
		echo
		echo "| publishes | n | records | change | feed | layout | write | verify | load | publish | total |"
		echo "|---|---|---|---|---|---|---|---|---|---|---|"
		half=$((PENDING / 2))
		awk -v h="$half" '/^publish/ { for (i = 1; i <= NF; i++) if ($i ~ /^records=/) { split($i, a, "="); print > (a[2] < h ? FILENAME ".a" : FILENAME ".b") } }' "$T/trace_sets.txt"
		touch "$T/trace_sets.txt.a" "$T/trace_sets.txt.b"
		phases_row "$T/trace_sets.txt.a" "set, a" "^publish"
		phases_row "$T/trace_sets.txt.b" "set, b" "^publish"
		phases_row "$T/trace_stream.txt" "stream batch" "^publish"
		# cost per overlay record: linear in what is pending?
		awk '/^publish/ { r = t = 0; for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == "records") r = a[2]; if (a[1] == "total_us") t = a[2] } if (r > 1000) print t / r }' \
			"$T/trace_sets.txt.b" "$T/trace_stream.txt" | sort -g |
			awk '{a[NR] = $1} END {if (NR) printf "\n- µs per overlay record (publishes of over 1000 records): median %.3f, range %.3f-%.3f over %d publishes\n", a[int((NR + 1) / 2)], a[1], a[NR], NR}'
		last=$(grep "^publish" "$T/trace_stream.txt" | tail -n1 || true)
		[ -n "$last" ] && echo "- the stream's last publish: ${last#publish }"
		sed -n 's/^stream rep=1 /- the traced stream: /p' "$T/stream_traced.txt"
	fi
fi

# ---- 3: compaction of case (b) against a full rebuild ----------------------------------------
# The rebuild a producer would do without compaction: `image build` of
# the merged records (the base's with the delta's values), then `cache
# load` of the new image; interleaved with compactions, --reps times.
if has_part 3; then
	echo
	echo "### 3. Compaction against a full rebuild"
	echo
	log "part 3: compaction of b against a rebuild, $REPS reps ($(load_now))"
	awk -v n="$KEYS" -v m="$PENDING" -v s="$stride" 'BEGIN {
		for (i = 0; i < m; i++) d[(i * s + 7) % n] = i
		for (i = 0; i < n; i++)
			if (i in d) printf "key_%d\tdelta-%d\n", i, d[i]; else printf "key_%d\tval-%012d\n", i, i
	}' > "$T/merged.tsv"
	echo "| rep | compaction (loader) ms | at the client ms | rebuild: image build ms | load ms | rebuild ms | compaction ÷ rebuild |"
	echo "|---|---|---|---|---|---|---|"
	ratios=()
	for r in $(seq "$REPS"); do
		if [ "$r" -gt 1 ]; then # b again: the base and the delta pending
			load_cache b
			"${S[@]}" -j cache apply b "$T/delta.img" > /dev/null
		fi
		t0=$(date +%s%N)
		c=$(timed "${S[@]}" -j cache compact b)
		t1=$(date +%s%N)
		timed "${S[@]}" image build -o "$T/full.img" "$T/merged.tsv" > /dev/null
		t2=$(date +%s%N)
		timed "${S[@]}" -j cache load full "$T/full.img" > /dev/null
		t3=$(date +%s%N)
		"${S[@]}" cache drop full > /dev/null
		rm -f "$T/full.img"
		cm=$(((t1 - t0) / 1000000)) bm=$(((t2 - t1) / 1000000)) lm=$(((t3 - t2) / 1000000))
		ratio=$(awk -v a="$cm" -v b="$((bm + lm))" 'BEGIN { printf "%.2f", a / b }')
		ratios+=("$ratio")
		echo "| $r | $(jq -r .ms <<<"$c") | $cm | $bm | $lm | $((bm + lm)) | $ratio |"
	done
	rm -f "$T/merged.tsv"
	med=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
	echo
	echo "- $(jq -r .records <<<"$c") pending changes merged into the $KEYS-key base (\`shmctl cache compact b\`, loader/README.md \"Compaction\"), a new base of $(jq -r .entries <<<"$c") entries, $(($(jq -r .bytes <<<"$c") >> 20)) MiB; compaction ÷ rebuild, median of $REPS: **$med** (goal ≤ 0.5); $(load_now)"
fi

# ---- 4: the stream ---------------------------------------------------------------------------
if has_part 4; then
	"${S[@]}" cache drop b > /dev/null 2>&1 || true # its memory: only a is streamed into
	echo
	echo "### 4. A stream of $RATE upserts/s against readers' gets"
	echo
	echo "$READERS reader processes doing random gets (a refresh every 1000); per repetition the base is loaded again, then $SECS s off (readers alone), on (the stream, via $VIA), after (readers alone, the stream's overlay served). CPU in cores over each phase from /proc; others = the whole machine minus this benchmark's processes."
	echo
	log "part 4: stream, $REPS x (off, on, after) x $SECS s ($(load_now))"
	echo "- $(load_now) before"
	timed "$W/wbench_stream" --root "$ROOT" --cache a --keys "$KEYS" --base "$T/base.img" \
		--rate "$RATE" --secs "$SECS" --reps "$REPS" --readers "$READERS" --via "$VIA" \
		--shmctl "$SHMCTL" --raw "$T/acks.txt" > "$T/stream.txt"
	echo "- $(load_now) after"
	sed -n '/^| rep/,$p' "$T/stream.txt"
	echo
	grep '^stream ' "$T/stream.txt" | sed 's/^/- /'
	# compactions the stream's overlay set off (past compact_entries or compact_ratio)
	grep '^compacted cache=a ' "$T/loader.log" | sed 's/^/- loader: /' || true
fi
log "done"
