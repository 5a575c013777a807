#!/usr/bin/env bash
# run.sh BUILD [KEYS [VALUE_SIZE [MAX_VALUE]]] - the BPF export benchmark
# (README.md here): a cache of KEYS (1000000) keys with VALUE_SIZE (32) byte
# values served by shmkv-loader, exported to BPF with --max-value MAX_VALUE
# (256); prints markdown: export time and kernel memory (3 exports), the
# publish latency with the export on and off, and bpf_bench's lookups. Root (BPF). Uses a private root, spool, shm dir
# and bpf_dir, removed at the end.
set -euo pipefail
B=$(realpath "$1")
N=${2:-1000000}
V=${3:-32}
MV=${4:-256}
tmp=$(mktemp -d)
shm=$(mktemp -d /dev/shm/shmkv-bbench-XXXXXX)
bpfdir=/sys/fs/bpf/shmkv-bench-$$
mkdir "$tmp/root" "$tmp/spool"
printf '[loader]\nbpf_dir = %s\n' "$bpfdir" >"$tmp/conf"
S=("$B/shmctl/shmctl" -r "$tmp/root")
"$B/loader/shmkv-loader" --config "$tmp/conf" --root "$tmp/root" --spool "$tmp/spool" \
	--shm-dir "$shm" --memory shm --foreground 2>"$tmp/log" &
loader=$!
trap 'kill $loader 2>/dev/null; wait $loader 2>/dev/null; rm -rf "$tmp" "$shm" "$bpfdir"' EXIT
for _ in $(seq 200); do [ -S "$tmp/root/control.sock" ] && break; sleep 0.05; done
for t in a b c; do "$B/bench/loader/lbench_mkimage" "$tmp/$t.img" --keys "$N" --value-size "$V" --tag "$t" >/dev/null; done
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval("d"+sys.argv[1]))' "$1"; }
ms() { date +%s%3N; }

echo "## BPF export of $N keys, $V-byte values, --max-value $MV ($(uname -r), $(date -u +%FT%TZ))"
echo
"${S[@]}" cache load c "$tmp/a.img" >/dev/null
echo "| export | ms | memlock (bytes) | bytes per entry | entries |"
echo "|---|---|---|---|---|"
for i in 1 2 3; do
	out=$("${S[@]}" -j bpf export --max-value "$MV" c)
	e=$(field '["entries"]' <<<"$out")
	m=$(field '["memlock"]' <<<"$out")
	echo "| $i | $(field '["export_ms"]' <<<"$out") | $m | $((m / e)) | $e |"
done
echo
echo "| publish | cache load reply (ms) | then the export (loader's export_ms) |"
echo "|---|---|---|"
for t in b c; do
	gen=$("${S[@]}" -j cache status c | field '["generation"]')
	t0=$(ms)
	"${S[@]}" cache load c "$tmp/$t.img" >/dev/null
	t1=$(ms)
	while [ "$("${S[@]}" -j bpf status c | field '["caches"][0]["generation"]')" != $((gen + 1)) ]; do sleep 0.005; done
	echo "| with export (gen $((gen + 1))) | $((t1 - t0)) | $("${S[@]}" -j bpf status c | field '["caches"][0]["export_ms"]') |"
done
"${S[@]}" bpf unexport c >/dev/null
t0=$(ms)
"${S[@]}" cache load c "$tmp/a.img" >/dev/null
echo "| without export | $(($(ms) - t0)) | - |"
"${S[@]}" bpf export --max-value "$MV" c >/dev/null
echo
echo "Lookups (bpf_bench, BPF_PROG_TEST_RUN):"
echo
/usr/bin/time -f "    (bpf_bench: %e s)" "$B/bench/bpf/bpf_bench" "$B/bench/bpf/lookup.bpf.o" "$bpfdir/c" "$tmp/root" c 1000000 7
echo
grep -E '^bpf (exported|export failed)' "$tmp/log" | tail -3 | sed 's/^/    /'
