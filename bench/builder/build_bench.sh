#!/bin/sh
# build_bench.sh - image build throughput, interleaved with its floors.
# usage: build_bench.sh INPUT.jsonl REPEATS OUTDIR SYSTEM=CMD...
#   each SYSTEM=CMD is run REPEATS times, round-robin with the others (each
#   round starting one system later than the last) and with the floors (cat INPUT > /dev/null; LC_ALL=C sort INPUT | uniq > /dev/null);
#   CMD is given "-o OUTDIR/SYSTEM.shmkv INPUT" after its own words.
# Prints per run "system seconds peak_rss_kb", then per system the medians.
set -eu
in=$1 reps=$2 out=$3
shift 3
log=$out/build_bench.log
: > "$log"
run() { # name, command...
	name=$1
	shift
	/usr/bin/time -f "$name %e %M" -a -o "$log" "$@" > /dev/null
}
r=1
while [ "$r" -le "$reps" ]; do
	run cat sh -c "cat '$in' > /dev/null"
	run sort_uniq sh -c "LC_ALL=C sort -S 25% '$in' | uniq > /dev/null"
	# each round starts one system later: none always follows the floors
	i=0
	for s in "$@"; do
		eval "sys_$i=\$s"
		i=$((i + 1))
	done
	j=0
	while [ "$j" -lt "$#" ]; do
		eval "s=\$sys_$(((j + r - 1) % $#))"
		j=$((j + 1))
		name=${s%%=*}
		cmd=${s#*=}
		rm -f "$out/$name.shmkv"
		# shellcheck disable=SC2086 # CMD is words
		run "$name" $cmd -o "$out/$name.shmkv" "$in"
	done
	r=$((r + 1))
done
cat "$log"
echo "median: system seconds peak_rss_kb"
# of sorted numbers: the middle one, or the mean of the two middle ones
med='{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
awk '{ t[$1] = t[$1] " " $2; m[$1] = m[$1] " " $3 }
     END { for (s in t) print s, t[s], "|", m[s] }' "$log" |
while read -r s rest; do
	secs=$(echo "${rest%%|*}" | tr ' ' '\n' | grep . | sort -g | awk "$med")
	rss=$(echo "${rest#*|}" | tr ' ' '\n' | grep . | sort -g | awk "$med")
	echo "$s $secs $rss"
done
