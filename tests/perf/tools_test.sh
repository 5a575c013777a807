#!/bin/bash
# tools_test.sh - perf/stat and perf/flame on a real workload (usdt_reader),
# and their errors. stat: the gets it counts are exactly those made; where
# the machine has no hardware counters (this CI's VM) it must say so, where
# it has them it must print them per get. flame: an SVG that parses, whose
# folded stacks hold every sample perf recorded.
# Exit 0 pass, 1 fail, 77 skip (not root, no perf events): the reason printed.
set -u
T=$(mktemp -d /tmp/shmkv-tools-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() {
	echo "FAIL: $*"
	exit 1
}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: not root (perf probe needs it; CI runs as root)"; exit 77; }
[ -d /sys/bus/event_source/devices/uprobe ] ||
	{ echo "SKIP: this kernel has no uprobes"; exit 77; }
command -v perf >/dev/null || fail "perf is not installed (Debian linux-perf, in ./run's PKGS)"

for i in $(seq 0 99); do echo "{\"key\": \"key$i\", \"value\": \"v$i\"}"; done >"$T/in.jsonl"
"$SHMCTL" image build -o "$T/img.shmkv" "$T/in.jsonl" >/dev/null || fail "image build"
# with expiry: key0..key99 expire in 2100 (not yet), gone0..gone99
# expired in 1970 (held, absent to readers)
for i in $(seq 0 99); do
	echo "{\"key\": \"key$i\", \"value\": \"v$i\", \"expires\": 4102444800}"
	echo "{\"key\": \"gone$i\", \"value\": \"g$i\", \"expires\": 1}"
done >"$T/exp.jsonl"
"$SHMCTL" image build -o "$T/exp.shmkv" "$T/exp.jsonl" >/dev/null || fail "image build exp"

# -- stat: exact get counts, hardware counters or the fallback message; the
# same build id cached under another path first (a copy since removed: an
# earlier checkout's identical binary made perf probe -x fail with ENOENT)
cp "$USDT_READER" "$T/copy" && perf buildid-cache --add "$T/copy" >/dev/null 2>&1
rm -f "$T/copy"
out=$("$PERF_DIR/stat" -- "$USDT_READER" get "$T/img.shmkv" 1000 500 2>&1) || fail "stat: $out"
echo "$out"
grep -Eq "^gets \(hits\+misses\) +1500$" <<<"$out" || fail "stat: gets are not 1500"
grep -Eq "^  hits +1000$" <<<"$out" || fail "stat: hits are not 1000"
grep -Eq "^  misses +500$" <<<"$out" || fail "stat: misses are not 500"
grep -Eq "^    of expired keys +0$" <<<"$out" || fail "stat: misses of expired keys are not 0"
grep -Eq "^task-clock \(ms\) +[0-9.]+ +[0-9.]+ ns$" <<<"$out" || fail "stat: no task-clock per get"
if perf stat -x, -e LLC-load-misses:u -- true 2>&1 | grep -q '^[0-9]'; then
	grep -Eq "^LLC-load-misses:u +[0-9]+ +[0-9.]+$" <<<"$out" || fail "stat: LLC misses per get missing"
else
	grep -q "no hardware counters" <<<"$out" || fail "stat: no fallback message without hardware counters"
fi
# the misses of expired keys apart (get_miss's expired argument)
out=$("$PERF_DIR/stat" -- "$USDT_READER" get "$T/exp.shmkv" 1000 500 300 2>&1) || fail "stat exp: $out"
echo "$out"
grep -Eq "^gets \(hits\+misses\) +1800$" <<<"$out" || fail "stat exp: gets are not 1800"
grep -Eq "^  hits +1000$" <<<"$out" || fail "stat exp: hits are not 1000"
grep -Eq "^  misses +800$" <<<"$out" || fail "stat exp: misses are not 800"
grep -Eq "^    of expired keys +300$" <<<"$out" || fail "stat exp: misses of expired keys are not 300"
perf probe -l 2>/dev/null | grep -q "in $USDT_READER" && fail "stat left its perf probe events behind"
out=$("$PERF_DIR/stat" -d x -p 1 2>&1) && fail "stat -d x succeeded"
grep -q "positive number of seconds" <<<"$out" || fail "stat -d x: $out"
out=$("$PERF_DIR/stat" -- /nonexistent/prog 2>&1) && fail "stat of a missing command succeeded"
grep -q "command not found" <<<"$out" || fail "stat of a missing command: $out"

# -- flame: a command from start to end
out=$("$PERF_DIR/flame" -o "$T/f.svg" -- "$USDT_READER" get "$T/img.shmkv" 3000000 0 2>&1) ||
	fail "flame: $out"
echo "$out"
python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$T/f.svg" || fail "flame: the SVG does not parse"
samples=$(perf script -i "$T/f.data" 2>/dev/null | grep -c '^[^ 	]')
folded=$(awk '{ s += $NF } END { print s + 0 }' "$T/f.folded")
[ "$samples" -gt 0 ] || fail "flame: perf recorded no sample"
[ "$samples" -eq "$folded" ] || fail "flame: perf recorded $samples samples, the folded stacks hold $folded"
grep -q "^usdt_reader;" "$T/f.folded" || fail "flame: no stack of usdt_reader"
grep -q "<title>all ($samples samples, 100.00%)</title>" "$T/f.svg" || fail "flame: no root frame of $samples samples"
grep -Eq "^flame: $samples samples -> " <<<"$out" || fail "flame: no summary"
out=$("$PERF_DIR/flame" -p 999999999 2>&1) && fail "flame -p of no process succeeded"
grep -q "no process 999999999" <<<"$out" || fail "flame -p 999999999: $out"
out=$("$PERF_DIR/flame" -g lbr -- true 2>&1) && fail "flame -g lbr succeeded"
grep -q "fp or dwarf" <<<"$out" || fail "flame -g lbr: $out"
echo PASS
