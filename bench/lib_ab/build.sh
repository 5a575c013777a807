#!/bin/sh
# bench/lib_ab/build.sh OLD_TREE [OUT] - build lib_ab (ab_main.c) into OUT
# (default /tmp/lib_ab): the reader of OLD_TREE/lib (a git worktree of the
# commit to compare with: git worktree add --detach /tmp/old REV) as "old"
# and this tree's as "new", in one program. Never run by CI or the build.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 OLD_TREE [OUT]" >&2; exit 2; }
OLD=$(cd "$1" && pwd)
OUT=${2:-/tmp/lib_ab}
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
[ -f "$OLD/lib/shmkv.h" ] || { echo "$0: $OLD/lib/shmkv.h missing: OLD_TREE is a checkout of this repository" >&2; exit 1; }
CC=${CC:-cc}
CFLAGS=${CFLAGS:--O3}
W="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror"
mkdir -p "$OUT"
$CC $CFLAGS $W -I"$OLD/lib" -DSIDE=old -c "$HERE/ab_side.c" -o "$OUT/old.o"
$CC $CFLAGS $W -I"$TOP/lib" -DSIDE=new -c "$HERE/ab_side.c" -o "$OUT/new.o"
$CC $CFLAGS $W -c "$HERE/ab_main.c" -o "$OUT/main.o"
$CC "$OUT/main.o" "$OUT/old.o" "$OUT/new.o" -o "$OUT/lib_ab" -lxxhash
echo "$OUT/lib_ab"
