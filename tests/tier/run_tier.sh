#!/bin/sh
# run_tier.sh SHMCTL READER [RUNNER...] - the reader checks of one SIMD tier.
# Builds three images on this machine with shmctl (plain, collisions, saturated
# displacement) and runs READER (reader_tier.c built for the tier, possibly for
# another architecture, then run through RUNNER, e.g. qemu-aarch64-static).
# Exit 77 (skipped) when the tier needs a CPU feature this machine lacks.
set -eu
shmctl=$1
reader=$2
shift 2
case "$(basename "$reader")" in
*avx2*) grep -qw avx2 /proc/cpuinfo || { echo "skip: CPU has no AVX2"; exit 77; } ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gen() { # gen N HASH_BITS > jsonl
	awk -v n="$1" -v bits="$2" 'BEGIN {
		if (bits < 64) printf "{\"shmkv_meta\": {\"hash_bits\": %d}}\n", bits
		for (i = 0; i < n; i++) printf "{\"key\": \"key_%d\", \"value\": \"val_%d\"}\n", i, i
	}'
}
for spec in "100000 64" "3000 4" "12000 2"; do
	set -- $spec
	gen "$1" "$2" >"$tmp/in.jsonl"
	"$shmctl" image build -o "$tmp/t.shmkv" "$tmp/in.jsonl" >/dev/null
	echo "== $1 keys, hash_bits $2"
	${RUNNER:-} "$reader" "$tmp/t.shmkv" "$1"
done
