#!/bin/bash
# compare_test.sh - bench/compare.py on two synthetic result sets: the ratios it
# prints, what it calls noise and what not, --fail-above's exit status, and
# clear errors for bad input. Needs python3 only.
set -u
T=$(mktemp -d /tmp/shmkv-compare-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() {
	echo "FAIL: $*"
	exit 1
}
C="$BENCH_DIR/compare.py"
mkdir -p "$T/old" "$T/new"
# old: 100 ns (passes 98..103); new: uniform 90 ns, clear of the old passes,
# zipf 101 ns inside them; absl the same in both; cachegrind: +2% and +0.2%
cat >"$T/old/results.json" <<'J'
{"bench": "lookup_bench", "date": "d1", "command": "c1", "cpu": "x", "timings": [
 {"keys": 1000, "workload": "uniform", "system": "shmkv", "ns_per_get_median": 100.0, "ratio_vs_absl": 0.8, "ns_passes": [98, 100, 103]},
 {"keys": 1000, "workload": "zipf", "system": "shmkv", "ns_per_get_median": 100.0, "ns_passes": [98, 100, 103]},
 {"keys": 1000, "workload": "uniform", "system": "absl", "ns_per_get_median": 125.0, "ns_passes": [124, 125, 126]}],
 "threads": [{"keys": 1000, "system": "shmkv", "threads": 2, "mops_median": 10.0, "mops": [9.5, 10, 10.5]}],
 "cachegrind": [{"keys": 1000, "system": "shmkv", "kind": "hit", "instructions": 100.0, "d1_misses": 2.0, "ll_misses": 1.0, "branches": 10.0, "mispredicts": 0.2},
                {"keys": 1000, "system": "shmkv", "kind": "miss", "instructions": 50.0, "d1_misses": 1.0, "ll_misses": 0.5, "branches": 5.0, "mispredicts": 0.3}]}
J
cat >"$T/new/results.json" <<'J'
{"bench": "lookup_bench", "date": "d2", "command": "c2", "cpu": "x", "timings": [
 {"keys": 1000, "workload": "uniform", "system": "shmkv", "ns_per_get_median": 90.0, "ratio_vs_absl": 0.72, "ns_passes": [89, 90, 91]},
 {"keys": 1000, "workload": "zipf", "system": "shmkv", "ns_per_get_median": 101.0, "ns_passes": [99, 101, 102]},
 {"keys": 1000, "workload": "uniform", "system": "absl", "ns_per_get_median": 125.0, "ns_passes": [124, 125, 126]}],
 "threads": [{"keys": 1000, "system": "shmkv", "threads": 2, "mops_median": 8.0, "mops": [7.8, 8, 8.2]}],
 "cachegrind": [{"keys": 1000, "system": "shmkv", "kind": "hit", "instructions": 102.0, "d1_misses": 2.0, "ll_misses": 1.0, "branches": 10.0, "mispredicts": 0.2},
                {"keys": 1000, "system": "shmkv", "kind": "miss", "instructions": 50.1, "d1_misses": 1.0, "ll_misses": 0.5, "branches": 5.0, "mispredicts": 0.3}]}
J
out=$("$C" "$T/old" "$T/new") || fail "compare exited $?: $out"
echo "$out"
grep -Fq "| 1000 | uniform | shmkv | 100.0 | 90.0 | 0.900 (-10.0%) | ±2.5%, ±1.1% | 0.800 | 0.720 | faster |" <<<"$out" || fail "uniform row"
grep -Fq "| 1000 | zipf | shmkv | 100.0 | 101.0 | 1.010 (+1.0%) | ±2.5%, ±1.5% | - | - | within noise |" <<<"$out" || fail "zipf row"
grep -Fq "| 1000 | shmkv | 2 | 10.00 | 8.00 | 0.800 (-20.0%) | slower |" <<<"$out" || fail "threads row"
grep -Fq "| 1000 | shmkv | hit | instructions | 100.000 | 102.000 | 1.0200 (+2.0%) | higher |" <<<"$out" || fail "cachegrind hit row"
grep -Fq "| 1000 | shmkv | miss | instructions | 50.000 | 50.100 | 1.0020 (+0.2%) | same |" <<<"$out" || fail "cachegrind miss row"
# --fail-above: threads 20% slower and instructions +2% are outside the noise
out=$("$C" --fail-above 5 "$T/old" "$T/new")
[ $? -eq 1 ] || fail "--fail-above 5 did not exit 1"
grep -Fq "1000 shmkv 2 threads Mops: -20.0% (25.0% worse)" <<<"$out" ||
	fail "--fail-above 5: the threads regression is not named: $out"
grep -q "hit instructions" <<<"$out" && fail "--fail-above 5 named a 2% change"
out=$("$C" --fail-above 30 "$T/old" "$T/new") || fail "--fail-above 30 exited $?"
grep -q "Nothing worse by more than 30%" <<<"$out" || fail "--fail-above 30: $out"
# bad input: clear errors, exit 2
err=$("$C" "$T/none" "$T/new" 2>&1)
[ $? -eq 2 ] && grep -q "compare: $T/none: No such file" <<<"$err" || fail "missing dir: $err"
echo "not json" >"$T/bad.json"
err=$("$C" "$T/bad.json" "$T/new" 2>&1)
[ $? -eq 2 ] && grep -q "not valid JSON" <<<"$err" || fail "bad JSON: $err"
echo '{"a": 1}' >"$T/other.json"
err=$("$C" "$T/other.json" "$T/new" 2>&1)
[ $? -eq 2 ] && grep -q "not a lookup_bench results.json" <<<"$err" || fail "other JSON: $err"
echo '{"bench": "lookup_bench", "timings": []}' >"$T/empty.json"
err=$("$C" "$T/empty.json" "$T/new" 2>&1)
[ $? -eq 2 ] && grep -q "no measurement in common" <<<"$err" || fail "nothing in common: $err"
echo PASS
