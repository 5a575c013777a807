#!/bin/bash
# run.sh - shmkv-http against BigCache's own HTTP server (bench/README.md,
# "HTTP"): GET requests per second and latency percentiles with wrk (or
# requests per second with h2load: --client), the server pinned to one core
# and the client to the other, both servers holding the
# same keys key_N -> val_N, interleaved and repeated; then shmkv-http's batch
# endpoint (POST .../get, --batch keys a request). Prints markdown on stdout,
# progress on stderr.
#
# BigCache's server is its `server` package at v3.1.0 from the Go module proxy
# (go install, into a cache directory, never committed). Everything else lives
# in one temporary directory, removed on exit (also on failure or Ctrl-C)
# after the processes it started are stopped. Timed runs take
# /tmp/shmkv-bench.lock, the lock other benchmarks on the machine take.
set -euo pipefail

usage() {
	cat <<EOF
usage: $0 --build BUILDDIR [options]
  --build DIR        meson build dir (http/shmkv-http, loader/shmkv-loader, shmctl/shmctl)
  --keys N           keys key_0 .. key_<N-1> -> val_N (default 1000000)
  --secs S           seconds per timed run (default 10)
  --reps N           interleaved repetitions of each system (default 5)
  --conns C          wrk's connections (default 64)
  --batch K          keys per POST .../get of the batch runs (default 64)
  --server-cpu N     the CPU both servers are pinned to (default 0)
  --client-cpu N     the CPU the client is pinned to (default 1)
  --client C         the GET runs' client: wrk (default) or h2load (nghttp2's,
                     HTTP/1.1, the same connections; no percentiles: its
                     per-request log costs its core 13%); the batch runs use wrk
  --bigcache DIR     where BigCache's server is built (default
                     \${XDG_CACHE_HOME:-~/.cache}/shmkv-bench/bigcache-v3.1.0)
  --work DIR         where the temporary directory goes (default /dev/shm)
  --no-lock          do not take /tmp/shmkv-bench.lock
EOF
}

BUILD= KEYS=1000000 SECS=10 WARM=5 REPS=5 CONNS=64 BATCH=64 SCPU=0 CCPU=1 WORKDIR=/dev/shm CLIENT=wrk
LOCK=/tmp/shmkv-bench.lock BCVER=v3.1.0
BCDIR=${XDG_CACHE_HOME:-$HOME/.cache}/shmkv-bench/bigcache-$BCVER
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--keys) KEYS=$2; shift 2 ;;
	--secs) SECS=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	--conns) CONNS=$2; shift 2 ;;
	--batch) BATCH=$2; shift 2 ;;
	--server-cpu) SCPU=$2; shift 2 ;;
	--client-cpu) CCPU=$2; shift 2 ;;
	--client) CLIENT=$2; shift 2 ;;
	--bigcache) BCDIR=$2; shift 2 ;;
	--work) WORKDIR=$2; shift 2 ;;
	--no-lock) LOCK=; shift ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[ -n "$BUILD" ] || { usage >&2; exit 2; }
for n in KEYS SECS REPS CONNS BATCH; do
	[[ ${!n} =~ ^[1-9][0-9]*$ ]] || { echo "--${n,,} ${!n}: expected a positive integer" >&2; exit 2; }
done
for n in SCPU CCPU; do
	[[ ${!n} =~ ^[0-9]+$ ]] && [ "${!n}" -lt "$(nproc)" ] ||
		{ echo "--server-cpu/--client-cpu ${!n}: expected a CPU below $(nproc)" >&2; exit 2; }
done
[ "$SCPU" != "$CCPU" ] || { echo "--server-cpu and --client-cpu must differ" >&2; exit 2; }
case $CLIENT in
wrk) ;;
h2load) command -v h2load > /dev/null || { echo "--client h2load needs h2load (Debian: nghttp2-client)" >&2; exit 2; } ;;
*) echo "--client $CLIENT: expected wrk or h2load" >&2; exit 2 ;;
esac
BUILD=$(realpath "$BUILD")
HERE=$(dirname "$(realpath "$0")")
HTTPD=$BUILD/http/shmkv-http LOADER=$BUILD/loader/shmkv-loader SHMCTL=$BUILD/shmctl/shmctl
for f in "$HTTPD" "$LOADER" "$SHMCTL"; do
	[ -x "$f" ] || { echo "missing $f (meson setup; ninja -C $BUILD)" >&2; exit 2; }
done
for c in wrk go taskset curl python3; do
	command -v "$c" > /dev/null || { echo "needs $c (Debian: wrk, golang or Go 1.21+, util-linux, curl, python3)" >&2; exit 2; }
done
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
load_now() { uptime | sed 's/.*load average: /load average /'; }

# BigCache's server, built once per version
if [ ! -x "$BCDIR/server" ]; then
	log "building BigCache's server $BCVER (go install github.com/allegro/bigcache/v3/server@$BCVER)"
	mkdir -p "$BCDIR"
	GOBIN=$BCDIR GOFLAGS=-mod=mod go install "github.com/allegro/bigcache/v3/server@$BCVER"
fi

T=$(mktemp -d "$WORKDIR/shmkv-hbench.XXXXXX")
PIDS=()
cleanup() {
	local rc=$? p
	set +e
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$T"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "run.sh: line $LINENO: $BASH_COMMAND failed" >&2' ERR

# As root, the servers and wrk run at nice -10 (as ./run bench does): the
# machine is shared, and what is measured should get its cores.
PRIO=()
[ "$(id -u)" -ne 0 ] || PRIO=(nice -n -10)
# The lock is held for a whole round (both servers and the batch), so that
# the two runs compared are neighbours in time (fd 9, opened once the
# servers run: they do not inherit it).
lock_round() { [ -z "$LOCK" ] || flock 9; }
unlock_round() { [ -z "$LOCK" ] || flock -u 9; }
# wait_for FILE PATTERN PID WHAT: a line of the process's log, 60 s at most
wait_for() {
	for _ in $(seq 600); do
		grep -qs -- "$2" "$1" && return 0
		kill -0 "$3" 2>/dev/null || { cat "$1" >&2; echo "$4 exited" >&2; exit 1; }
		sleep 0.1
	done
	cat "$1" >&2
	echo "$4: not ready after 60 s" >&2
	exit 1
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

echo "## HTTP: bench/http/run.sh --keys $KEYS --secs $SECS --reps $REPS --conns $CONNS --batch $BATCH --client $CLIENT"
echo
echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) CPUs; $(load_now) at the start"
if [ "$CLIENT" = h2load ]; then
	# (versions: wrk --version exits 1, and an assignment's status is its $(...)'s)
	CDESC="h2load ($(h2load --version 2>&1 | head -n1 | cut -d' ' -f2 || true), --h1, 1 thread, $CONNS connections, keep-alive, a uniformly random key a request; wrk for the batch)"
else
	CDESC="wrk ($(wrk --version 2>&1 | head -n1 | cut -d' ' -f2 || true), 1 thread, $CONNS connections, keep-alive, a uniformly random key a request)"
fi
echo "- servers pinned to CPU $SCPU (taskset)$([ ${#PRIO[@]} = 0 ] || echo ' at nice -10'), the client to CPU $CCPU: $CDESC; loopback"
echo

# ---- the shmkv side: an image, the loader, shmkv-http ----------------------------------------
log "building the image: $KEYS keys"
awk -v n="$KEYS" 'BEGIN { for (i = 0; i < n; i++) printf "key_%d\tval_%d\n", i, i }' > "$T/kv.tsv"
"$SHMCTL" image build -o "$T/kv.img" "$T/kv.tsv" > /dev/null
ROOT=$T/root
mkdir -p "$ROOT" "$T/spool" "$T/shm"
taskset -c "$CCPU" "$LOADER" --foreground --root "$ROOT" --spool "$T/spool" --shm-dir "$T/shm" \
	--memory shm > "$T/loader.log" 2>&1 &
PIDS+=($!)
wait_for "$T/loader.log" '^ready ' "${PIDS[-1]}" "shmkv-loader"
"$SHMCTL" -r "$ROOT" cache load kv "$T/kv.img" > /dev/null
rm -f "$T/kv.img"
"${PRIO[@]}" taskset -c "$SCPU" "$HTTPD" --root "$ROOT" --listen 127.0.0.1:0 --port-file "$T/http.port" \
	--caches kv > "$T/http.log" 2>&1 &
PIDS+=($!)
SPID=$!
wait_for "$T/http.log" 'listening on' "${PIDS[-1]}" "shmkv-http"
SPORT=$(cat "$T/http.port")

# ---- BigCache's server, filled with the same keys by PUTs ------------------------------------
# Its flags: entries live 24 h (the default is 10 min), memory for every
# key. It logs each request to its log file: /dev/null here.
BPORT=$(free_port)
"${PRIO[@]}" taskset -c "$SCPU" "$BCDIR/server" -port "$BPORT" -lifetime 24h -maxInWindow "$KEYS" \
	-max $(((KEYS * 64 >> 20) + 256)) -logfile /dev/null > "$T/bigcache.log" 2>&1 &
PIDS+=($!)
BPID=$!
for _ in $(seq 600); do
	curl -s -o /dev/null "http://127.0.0.1:$BPORT/api/v1/stats" && break
	kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$T/bigcache.log" >&2; exit 1; }
	sleep 0.1
done
log "filling BigCache: $KEYS PUTs"
go run "$HERE/fill.go" "http://127.0.0.1:$BPORT/api/v1/cache/" "$KEYS" 16 > "$T/fill.txt" 2>&1 &
PIDS+=($!)
wait "${PIDS[-1]}" || true
grep -q '^filled ' "$T/fill.txt" || { cat "$T/fill.txt" >&2; echo "filling BigCache failed" >&2; exit 1; }

# Both answer the same 1,000 keys (a sample: the timed runs then count any
# non-200 answer over millions of random keys, and fail on one).
log "checking both servers' answers"
python3 - "$KEYS" "$SPORT" "$BPORT" <<'EOF'
import random, sys, urllib.request
n, sport, bport = (int(a) for a in sys.argv[1:])
rnd = random.Random(1)
for i in [0, n - 1] + [rnd.randrange(n) for _ in range(998)]:
    for url in (f"http://127.0.0.1:{sport}/v1/caches/kv/keys/key_{i}",
                f"http://127.0.0.1:{bport}/api/v1/cache/key_{i}"):
        with urllib.request.urlopen(url) as r:
            body = r.read().decode()
            if r.status != 200 or body != f"val_{i}":
                sys.exit(f"{url}: {r.status} {body!r}, expected 200 'val_{i}'")
EOF

# ---- timed runs --------------------------------------------------------------------------------
# run_wrk NAME URL SCRIPT SERVER_PID: one timed run of round $r; appends "NAME rps p50_us
# p99_us timeouts round" to $T/runs.txt
to_us() { # wrk's 1.23ms / 456.00us / 1.02s
	awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) print n; else if (v ~ /ms$/) print n * 1000; else if (v ~ /s$/) print n * 1e6; else print n }'
}
# CPU seconds: a process's (PID), or this shell's waited-for children (so
# wrk's, around one run)
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
cpu_children() { # into $T/times by the shell itself (in a subshell, times counts its children)
	times > "$T/times"
	awk 'NR == 2 {gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4}' "$T/times"
}
run_wrk() {
	local out=$T/wrk.txt spid=$4 s0 c0 s1 c1
	s0=$(cpu_of "$spid")
	cpu_children > "$T/c0"
	KEYS=$KEYS BATCH=$BATCH "${PRIO[@]}" taskset -c "$CCPU" wrk -t1 -c"$CONNS" -d"${SECS}s" --latency -s "$3" "$2" > "$out" 2>&1
	cpu_children > "$T/c1"
	s1=$(cpu_of "$spid") c0=$(cat "$T/c0") c1=$(cat "$T/c1")
	# a wrong answer or a broken connection fails the run; wrk's timeouts
	# (no answer within 2 s: a stalled server on a busy machine) are counted
	local se
	se=$(sed -n 's/.*Socket errors: connect \([0-9]*\), read \([0-9]*\), write \([0-9]*\), timeout \([0-9]*\).*/\1 \2 \3 \4/p' "$out")
	if grep -q 'Non-2xx' "$out" || { [ -n "$se" ] && [ "$(echo "$se" | awk '{print $1 + $2 + $3}')" != 0 ]; }; then
		cat "$out" >&2
		echo "$1: errors or non-200 answers (above)" >&2
		exit 1
	fi
	local rps p50 p99 tmo=${se##* }
	rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
	p50=$(to_us "$(awk '$1 == "50%" {print $2}' "$out")")
	p99=$(to_us "$(awk '$1 == "99%" {print $2}' "$out")")
	[ -n "$rps" ] || { cat "$out" >&2; echo "$1: no result from wrk" >&2; exit 1; }
	local busy
	busy=$(awk -v s="$s1" -v t="$s0" -v c="$c1" -v d="$c0" -v n="$SECS" \
		'BEGIN {printf "server %.0f%%, wrk %.0f%% of a core", (s - t) * 100 / n, (c - d) * 100 / n}')
	echo "$1 $rps $p50 $p99 ${tmo:-0} $r" >> "$T/runs.txt"
	log "$1: $rps req/s, p50 $p50 us, p99 $p99 us, ${tmo:-0} timeouts; $busy ($(load_now))"
}
# run_h2load NAME URLS SERVER_PID: run_wrk's timed GET run with h2load, from
# the file URLS (2^18 URLs of random keys, made below, cycled); no
# percentiles ("-" in runs.txt)
run_h2load() {
	local out=$T/h2load.txt spid=$3 s0 c0 s1 c1
	s0=$(cpu_of "$spid")
	cpu_children > "$T/c0"
	"${PRIO[@]}" taskset -c "$CCPU" h2load --h1 -t1 -c"$CONNS" -D"$SECS" -i "$2" > "$out" 2>&1 || true
	cpu_children > "$T/c1"
	s1=$(cpu_of "$spid") c0=$(cat "$T/c0") c1=$(cat "$T/c1")
	# requests: N total, N started, N done, N succeeded, F failed, E errored, T timeout
	local req codes rps
	req=$(sed -n 's/^requests: .* \([0-9]*\) failed, \([0-9]*\) errored, \([0-9]*\) timeout.*/\1 \2 \3/p' "$out")
	codes=$(sed -n 's/^status codes: [0-9]* 2xx, \([0-9]*\) 3xx, \([0-9]*\) 4xx, \([0-9]*\) 5xx.*/\1 \2 \3/p' "$out")
	rps=$(sed -n 's/^finished in [0-9.]*s, \([0-9.]*\) req\/s.*/\1/p' "$out")
	if [ -z "$rps" ] || [ -z "$req" ] || [ -z "$codes" ] ||
		[ "$(echo "$req $codes" | awk '{print $1 + $2 + $4 + $5 + $6}')" != 0 ]; then
		cat "$out" >&2
		echo "$1: no result, errors or non-2xx answers from h2load (above)" >&2
		exit 1
	fi
	local tmo=${req##* } busy
	busy=$(awk -v s="$s1" -v t="$s0" -v c="$c1" -v d="$c0" -v n="$SECS" \
		'BEGIN {printf "server %.0f%%, h2load %.0f%% of a core", (s - t) * 100 / n, (c - d) * 100 / n}')
	echo "$1 $rps - - $tmo $r" >> "$T/runs.txt"
	log "$1: $rps req/s, $tmo timeouts; $busy ($(load_now))"
}
# run_get NAME: one timed GET run of NAME (shmkv or bigcache) with $CLIENT
run_get() {
	if [ "$CLIENT" = h2load ]; then
		run_h2load "$1" "$T/urls-$1.txt" "$([ "$1" = shmkv ] && echo "$SPID" || echo "$BPID")"
	elif [ "$1" = shmkv ]; then
		run_wrk shmkv "$SHMKV_GET" "$HERE/get.lua" "$SPID"
	else
		run_wrk bigcache "$BC_GET" "$HERE/get.lua" "$BPID"
	fi
}
[ -z "$LOCK" ] || exec 9> "$LOCK"
SHMKV_GET=http://127.0.0.1:$SPORT/v1/caches/kv/keys/
BC_GET=http://127.0.0.1:$BPORT/api/v1/cache/
# One untimed pass of each server first: the first requests after a start
# fault in the pages they touch (shmkv-http's mapping of the image, Go's
# heap), which is not what a serving host pays.
log "warming both servers (${WARM}s each, untimed)"
for url in "$SHMKV_GET" "$BC_GET"; do
	KEYS=$KEYS taskset -c "$CCPU" wrk -t1 -c"$CONNS" -d"${WARM}s" -s "$HERE/get.lua" "$url" > /dev/null 2>&1
done
if [ "$CLIENT" = h2load ]; then
	# get.lua's requests as URLs: 2^18 uniformly random keys
	python3 - "$KEYS" "$SHMKV_GET" "$T/urls-shmkv.txt" "$BC_GET" "$T/urls-bigcache.txt" <<'EOF'
import random, sys
n = int(sys.argv[1])
for base, path in zip(sys.argv[2::2], sys.argv[3::2]):
    with open(path, "w") as f:
        f.writelines(f"{base}key_{random.randrange(n)}\n" for _ in range(1 << 18))
EOF
fi
echo "- $(load_now) before the timed runs"
for r in $(seq "$REPS"); do
	lock_round
	if [ $((r % 2)) = 1 ]; then
		run_get shmkv
		run_get bigcache
	else
		run_get bigcache
		run_get shmkv
	fi
	run_wrk batch "http://127.0.0.1:$SPORT/v1/caches/kv/get" "$HERE/batch.lua" "$SPID"
	unlock_round
done
echo "- $(load_now) after"
echo

# ---- the table -----------------------------------------------------------------------------------
med() { # NAME COLUMN
	awk -v s="$1" -v c="$2" '$1 == s {print $c}' "$T/runs.txt" | sort -g |
		awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
all() { awk -v s="$1" -v c="$2" '$1 == s {printf "%s%.0f", sep, $c; sep = " "}' "$T/runs.txt"; }
s_rps=$(med shmkv 2) b_rps=$(med bigcache 2) s_p99=$(med shmkv 4) b_p99=$(med bigcache 4)
k_rps=$(med batch 2)
echo "Medians of $REPS runs of $SECS s each (every run in brackets)."
echo
tmo() { awk -v s="$1" '$1 == s {t += $5} END {print t + 0}' "$T/runs.txt"; }
# shmkv-http ÷ BigCache of column $1 within each round: their median, every round's
ratios() {
	awk -v c="$1" '$1 == "shmkv" {a[$6] = $c} $1 == "bigcache" {b[$6] = $c}
		END {for (r in a) if (r in b) printf "%.2f\n", a[r] / b[r]}' "$T/runs.txt" | sort -g |
		awk '{v[NR] = $1; all = all sep $1; sep = " "}
			END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f (%s)", m, all}'
}
if [ "$CLIENT" = h2load ]; then
	# h2load: requests/s only (its timeouts column is its own count)
	echo "| server | GET req/s (h2load) | timeouts |"
	echo "|---|---|---|"
	printf '| shmkv-http | %.0f (%s) | %d |\n' "$s_rps" "$(all shmkv 2)" "$(tmo shmkv)"
	printf '| BigCache server %s | %.0f (%s) | %d |\n' "$BCVER" "$b_rps" "$(all bigcache 2)" "$(tmo bigcache)"
	printf '| shmkv-http ÷ BigCache, per round | **%s** | |\n' "$(ratios 2)"
else
	echo "| server | GET req/s | p50 µs | p99 µs | timeouts (> 2 s) |"
	echo "|---|---|---|---|---|"
	printf '| shmkv-http | %.0f (%s) | %.0f | %.0f (%s) | %d |\n' "$s_rps" "$(all shmkv 2)" "$(med shmkv 3)" "$s_p99" "$(all shmkv 4)" "$(tmo shmkv)"
	printf '| BigCache server %s | %.0f (%s) | %.0f | %.0f (%s) | %d |\n' "$BCVER" "$b_rps" "$(all bigcache 2)" "$(med bigcache 3)" "$b_p99" "$(all bigcache 4)" "$(tmo bigcache)"
	printf '| shmkv-http ÷ BigCache, per round | **%s** | | **%s** | |\n' "$(ratios 2)" "$(ratios 4)"
fi
echo
printf 'Batch (`POST /v1/caches/kv/get`, %d random keys a request, JSON): %.0f requests/s = **%.0f keys/s** (p99 %.0f µs; runs: %s req/s).\n' \
	"$BATCH" "$k_rps" "$(awk -v a="$k_rps" -v b="$BATCH" 'BEGIN {print a * b}')" "$(med batch 4)" "$(all batch 2)"
