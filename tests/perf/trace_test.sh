#!/bin/bash
# trace_test.sh - every perf/ bpftrace script against a real workload, with
# exact counts (tests/perf/README.md). Environment (tests/perf/meson.build):
# PERF_DIR (the source perf/), SHMCTL, SHMKV_LOADER, USDT_READER, BUILD_LIB.
# Exit 0 pass, 1 fail, 77 skip (not root, or no uprobes: the reason printed).
set -u
T=$(mktemp -d /tmp/shmkv-trace-test.XXXXXX)
PIDS=()  # background processes to stop at exit: ours only, by pid
LOADER_PID=
# exited PID SECS: until our child PID has exited (bash reaps it), a
# deadline of SECS times $SHMKV_TEST_SLOW (a factor; ./run test-loaded);
# 1 if it still runs then
exited() {
	local slow=${SHMKV_TEST_SLOW:-1}
	local end=$((SECONDS + $2 * ${slow%%.*}))
	while kill -0 "$1" 2>/dev/null; do
		((SECONDS <= end)) || return 1
		sleep 0.05
	done
	wait "$1" 2>/dev/null
	return 0
}
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -INT -- "-$p" 2>/dev/null || kill -INT "$p" 2>/dev/null
	done
	if [ -n "$LOADER_PID" ]; then
		"$SHMCTL" -r "$T/root" cache drop c >/dev/null 2>&1
		kill "$LOADER_PID" 2>/dev/null
		wait "$LOADER_PID" 2>/dev/null
	fi
	# a tracer that ignores Ctrl-C is killed, not waited for forever
	for p in "${PIDS[@]}"; do
		exited "$p" 30 || { kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; }
		wait "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	exit 1
}
skip() {
	echo "SKIP: $*"
	exit 77
}

[ "$(id -u)" -eq 0 ] || skip "not root: bpftrace needs CAP_BPF and CAP_PERFMON (CI runs as root)"
[ -d /sys/bus/event_source/devices/uprobe ] ||
	skip "this kernel has no uprobes (/sys/bus/event_source/devices/uprobe is missing)"
command -v bpftrace >/dev/null || fail "bpftrace is not installed (Debian bpftrace, in ./run's PKGS)"
for v in PERF_DIR SHMCTL SHMKV_LOADER USDT_READER BUILD_LIB; do
	[ -n "${!v:-}" ] || fail "$v is not set (run through meson test)"
done

# wait_for FILE REGEX [SECS]: until a line of FILE matches (grep -E), a
# deadline of SECS (60) times $SHMKV_TEST_SLOW (a factor; ./run test-loaded)
wait_for() {
	local slow=${SHMKV_TEST_SLOW:-1}
	local end=$((SECONDS + ${3:-60} * ${slow%%.*}))
	while ((SECONDS <= end)); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "--- $1:"
	cat "$1" 2>/dev/null
	fail "timed out waiting for /$2/ in $(basename "$1")"
}
# start_trace NAME CMD...: in its own process group, output to $T/NAME.out
start_trace() {
	local name=$1
	shift
	setsid "$@" >"$T/$name.out" 2>"$T/$name.err" &
	PIDS+=($!)
	eval "TRACE_$name=$!"
}
# stop_trace NAME: Ctrl-C to its process group, as a terminal would send
stop_trace() {
	local p
	p=$(eval echo "\$TRACE_$1")
	kill -INT -- "-$p" 2>/dev/null
	local late=
	exited "$p" 60 || late=1
	echo "--- $1:"
	cat "$T/$1.out"
	grep -v RLIMIT_MEMLOCK "$T/$1.err" || true
	[ -z "$late" ] || fail "$1 still runs 60 s (times SHMKV_TEST_SLOW) after Ctrl-C"
}
# expect NAME REGEX: the trace's output has a line matching it
expect() {
	grep -Eq -- "$2" "$T/$1.out" || fail "$1: no line matches /$2/"
}
# count_lines NAME REGEX N
count_lines() {
	local n
	n=$(grep -Ec -- "$2" "$T/$1.out")
	[ "$n" -eq "$3" ] || fail "$1: $n lines match /$2/, expected $3"
}

# -- the workload's images: key0..key99, generation-specific values
for g in 1 2 3; do
	for i in $(seq 0 99); do echo "{\"key\": \"key$i\", \"value\": \"gen$g-$i\"}"; done >"$T/in$g.jsonl"
	"$SHMCTL" image build -o "$T/img$g.shmkv" "$T/in$g.jsonl" >/dev/null || fail "image build $g"
done
for i in $(seq 0 49); do echo "{\"key\": \"more$i\", \"value\": $i}"; done >"$T/more.jsonl"
# with expiry: key0..key49 expire in 2100 (not yet), key50..key99
# never, gone0..gone99 expired in 1970 (held, absent to readers)
{
	for i in $(seq 0 99); do
		later=
		((i < 50)) && later=', "expires": 4102444800'
		echo "{\"key\": \"key$i\", \"value\": \"x$i\"$later}"
		echo "{\"key\": \"gone$i\", \"value\": \"y$i\", \"expires\": 1}"
	done
} >"$T/exp.jsonl"
"$SHMCTL" image build -o "$T/exp.shmkv" "$T/exp.jsonl" >/dev/null || fail "image build exp"

# -- errors are clear, before anything is traced
out=$("$PERF_DIR/trace" get_latency /bin/sh 2>&1) && fail "trace of a binary without probes succeeded"
grep -q "has no USDT probe shmkv:get_hit" <<<"$out" || fail "no clear error for a binary without probes: $out"
out=$("$PERF_DIR/trace" nosuch 2>&1)
[ $? -eq 2 ] && grep -q "no script 'nosuch'" <<<"$out" || fail "unknown script: $out"
out=$("$PERF_DIR/trace" load_phases "$T/none" 2>&1) && fail "trace of a missing file succeeded"
grep -q "no such file" <<<"$out" || fail "no clear error for a missing file: $out"

# -- builder: build_phases.bt over shmctl image build (libshmkv-build.so)
start_trace build "$PERF_DIR/trace" build_phases "$BUILD_LIB"
wait_for "$T/build.out" "tracing"
"$SHMCTL" image build -o "$T/two.shmkv" "$T/in1.jsonl" "$T/more.jsonl" >/dev/null || fail "image build two"
wait_for "$T/build.out" "write .*two.shmkv"
stop_trace build
size=$(stat -c %s "$T/two.shmkv")
expect build "parse .*in1.jsonl: records=100 bytes=$(stat -c %s "$T/in1.jsonl") .* err=0"
expect build "parse .*more.jsonl: records=50 bytes=$(stat -c %s "$T/more.jsonl") .* err=0"
expect build "layout: records=150 entries=150 buckets=[0-9]+ max_probe=[0-9]+ .* err=0"
expect build "write .*two.shmkv: bytes=$size .* err=0"
expect build "^@builds\[[0-9]+\]: 1$"
expect build "^@records\[[0-9]+\]: 150$"

# -- reader gets: hitmiss.bt and get_latency.bt at once, exact counts; an
# image without expiry, then the one with expiry: hits (of keys
# that expire later too), plain misses and misses of expired keys
# (get_miss's expired argument), each counted apart
start_trace hitmiss "$PERF_DIR/trace" hitmiss "$USDT_READER"
start_trace latency "$PERF_DIR/trace" get_latency "$USDT_READER"
wait_for "$T/hitmiss.out" "tracing"
wait_for "$T/latency.out" "tracing"
"$USDT_READER" get "$T/img1.shmkv" 1000 500 &
wpid=$!
wait $wpid || fail "usdt_reader get failed"
"$USDT_READER" get "$T/exp.shmkv" 1000 500 300 &
xpid=$!
wait $xpid || fail "usdt_reader get of the expiry image failed"
stop_trace hitmiss
stop_trace latency
expect hitmiss "^@hits\[$wpid, usdt_reader\]: 1000$"
expect hitmiss "^@misses\[$wpid, usdt_reader\]: 500$"
expect hitmiss "^@miss_reason\[$wpid, usdt_reader, SHMKV_ENOTFOUND\]: 500$"
count_lines hitmiss "^@miss_reason\[$wpid, " 1
expect hitmiss "^@hits\[$xpid, usdt_reader\]: 1000$"
expect hitmiss "^@misses\[$xpid, usdt_reader\]: 800$"
expect hitmiss "^@miss_reason\[$xpid, usdt_reader, SHMKV_ENOTFOUND\]: 500$"
expect hitmiss "^@miss_reason\[$xpid, usdt_reader, expired\]: 300$"
count_lines hitmiss "^@miss_reason\[$xpid, " 2
# the histogram's buckets add up to every get (other usdt_reader processes,
# of tests running beside this one, are traced too: only this pid's counts)
for pg in "$wpid 1500" "$xpid 1800"; do
	read -r p n <<<"$pg"
	expect latency "^@gets\[$p, usdt_reader\]: $n$"
	sum=$(awk -v h="@get_ns[$p, usdt_reader]:" '/^@/ { on = index($0, h) == 1; next }
		on && /^\[/ { gsub(/.*\) */, ""); s += $1 } END { print s + 0 }' "$T/latency.out")
	[ "$sum" -eq "$n" ] || fail "get_latency: the histogram of pid $p holds $sum gets, expected $n"
done

# -- the loader: load_phases.bt, swaps.bt and old_readers at once
mkdir -p "$T/root" "$T/spool"
"$SHMKV_LOADER" --root "$T/root" --spool "$T/spool" --shm-dir /dev/shm --memory shm \
	--foreground 2>"$T/loader.log" &
LOADER_PID=$!
wait_for "$T/loader.log" "." # its first log line: it is up
start_trace load "$PERF_DIR/trace" load_phases "$SHMKV_LOADER"
start_trace swaps "$PERF_DIR/trace" swaps "$USDT_READER" "$SHMKV_LOADER"
start_trace old "$PERF_DIR/old_readers" "$USDT_READER" "$SHMKV_LOADER" 1
wait_for "$T/load.out" "tracing"
wait_for "$T/swaps.out" "tracing"
wait_for "$T/old.out" "tracing"
sleep 0.5 # old_readers: its bpftrace has printed begin; awk is reading

publish() { # publish N: rename image N into the spool
	cp "$T/img$1.shmkv" "$T/c.tmp" && mv "$T/c.tmp" "$T/spool/c.shmkv"
	wait_for "$T/swaps.out" "publish cache=c gen=$1 "
}
publish 1
"$USDT_READER" follow "$T/root" c 3 >"$T/follow.out" &
fpid=$!
PIDS+=($fpid)
"$USDT_READER" hold "$T/root" c "$T/stop" >"$T/hold.out" &
hpid=$!
PIDS+=($hpid)
wait_for "$T/follow.out" "^ready 1$"
wait_for "$T/hold.out" "^ready 1$"
publish 2
wait_for "$T/swaps.out" "refresh cache=c gen=2 pid=$fpid "
publish 3
wait_for "$T/swaps.out" "refresh cache=c gen=3 pid=$fpid "
wait $fpid || fail "usdt_reader follow failed"
# a bad image: rejected with its reason; generation 3 keeps serving
head -c 4096 /dev/zero >"$T/c.tmp" && mv "$T/c.tmp" "$T/spool/c.shmkv"
wait_for "$T/load.out" "REJECT cache=c"
# the holder still serves generation 1 of 3
wait_for "$T/old.out" "^$hpid +usdt_reader +0x[0-9a-f]+ +c +1 +3 "
touch "$T/stop"
wait $hpid || fail "usdt_reader hold failed"
wait_for "$T/old.out" "no reader behind"
stop_trace load
stop_trace swaps
stop_trace old

# load_phases: three loads with their sizes, one reject with its code
for g in 1 2 3; do
	expect load "load cache=c bytes=$(stat -c %s "$T/img$g.shmkv") "
done
count_lines load "^  place " 3
count_lines load "^  read\+verify .* err=0$" 3
count_lines load "^  publish .* gen=[123]; load total" 3
expect load "REJECT cache=c err=-31202 " # SHMKV_EMAGIC: zeros are no image
expect load "^@loads\[c\]: 3$"
expect load "^@bytes\[c\]: $(($(stat -c %s "$T/img1.shmkv") + $(stat -c %s "$T/img2.shmkv") + $(stat -c %s "$T/img3.shmkv")))$"
expect load "^@rejects\[c\]: 1$"
# swaps: three publishes; the follower moved to 2 and 3, the holder never
expect swaps "^@publishes\[c\]: 3$"
expect swaps "^@refreshed\[c, 2\]: 1$"
expect swaps "^@refreshed\[c, 3\]: 1$"
count_lines swaps "^@refreshed\[" 2
count_lines swaps "^@last_reader_us\[c, [23]\]: [0-9]+$" 2
grep -q "pid=$hpid " "$T/swaps.out" && fail "swaps: the holder never refreshed, yet it is listed"
# old_readers: the follower was never left behind for a tick after it moved on
grep -Eq "^$fpid .* c +3 +3 " "$T/old.out" && fail "old_readers: a reader at the latest generation listed"
echo "PASS"
exit 0
