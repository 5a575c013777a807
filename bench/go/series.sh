#!/bin/sh
# One process per (outer round, size, pages), each under
# flock /tmp/shmkv-bench.lock (that process only). README.md.
#   DIR: where kv$n.shmkv (images by shmctl) are and AxonCache's caches go
#   SIZES, OUTER (processes per size), ARGS (to compare, e.g. -rounds 5),
#   HUGE=1: also a row with a copy of the image on /dev/shm opened with HugePages
set -eu
cd "$(dirname "$0")"
DIR=${DIR:?set DIR} SIZES=${SIZES:-"1000000 10000000"} OUTER=${OUTER:-3}
for r in $(seq 1 "$OUTER"); do
	for n in $SIZES; do
		flock /tmp/shmkv-bench.lock ./compare -n "$n" -img "$DIR/kv$n.shmkv" -axdir "$DIR/ax$n" ${ARGS:-}
		if [ "${HUGE:-0}" = 1 ]; then
			flock /tmp/shmkv-bench.lock ./compare -n "$n" -img "/dev/shm/shmkv-go-bench/kv$n.shmkv" -hugepages -axdir "$DIR/ax$n" ${ARGS:-}
		fi
	done
done
