#!/bin/sh
# private_names.sh SRCDIR - fails when code outside lib/ uses a private
# shmkv__* / SHMKV__* name (what two components share is public,
# documented API in lib/shmkv.h, or lives in common/). Meson test "private_names".
#
# Exceptions are white-box tests of lib's own internals, each with a reason.
# Known debt (files still being converted) is listed separately and reported;
# it is not a pass: remove each entry as its file converts.
set -eu
src=${1:?usage: private_names.sh SRCDIR}
cd "$src"

dirs="loader shmctl builder bench numa perf common lib/examples tests"

# white-box tests of lib internals: the SIMD variants of the directory
# compare, the displaced-key filter, the hot key compare and the text
# check against their references (checkasm style)
exceptions='
tests/probe_variants_test.cc
tests/probe_avx2.cc
tests/tier/reader_tier.c
'

# files that still use private names and are being converted (report them)
debt='
'

status=0
hits=$(for d in $dirs; do
	[ -d "$d" ] || continue
	grep -rlE '(shmkv__|SHMKV__)[A-Za-z0-9_]' "$d" \
		--include='*.c' --include='*.h' --include='*.cc' --include='*.cpp' \
		--include='*.hpp' --include='*.bpf.c' || true
done | sort -u)

for f in $hits; do
	if printf '%s\n' "$exceptions" | grep -qxF "$f"; then
		continue
	fi
	if printf '%s\n' "$debt" | grep -qxF "$f"; then
		echo "known debt: $f still uses private names:" >&2
		grep -nE '(shmkv__|SHMKV__)[A-Za-z0-9_]' "$f" | head -3 >&2
		continue
	fi
	echo "$f uses lib's private names (use the public API in lib/shmkv.h, or common/):" >&2
	grep -nE '(shmkv__|SHMKV__)[A-Za-z0-9_]*' "$f" >&2
	status=1
done
# an exception or a debt entry that no longer uses private names is stale
for f in $exceptions $debt; do
	if [ -f "$f" ] && ! printf '%s\n' "$hits" | grep -qxF "$f"; then
		echo "$f is listed as an exception or debt but uses no private name: remove it" >&2
		status=1
	fi
done
[ $status -eq 0 ] && echo "no private shmkv__ name outside lib/ (exceptions: white-box tests)"
exit $status
