#!/bin/busybox sh
# init.sh - /init of numa_guest's qemu guest (README.md here): mounts, per-node
# huge page pools (the last node short), then every check against the real
# loader and a reader probe; one "CHECK name ok|FAIL detail" line each on the
# serial console, "GUEST-DONE" at the end, then power off.
echo # the firmware's escape sequences end the line before the first check's
# the host's sign that the kernel ran /init (guest_test.sh boots again without it)
echo "GUEST-START"
/bin/busybox mkdir -p /proc /sys /dev /tmp /run /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm /dev/hugepages
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t hugetlbfs -o pagesize=2M none /dev/hugepages
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
N=$(sed -n 's/.*numa_nodes=\([0-9]*\).*/\1/p' /proc/cmdline)
LAST=$((N - 1))
FAILS=0
# Waits are deadlines on an event, generous for TCG on a loaded host, times
# shmkv_slow= of the kernel command line (guest_test.sh passes
# $SHMKV_TEST_SLOW): wait_until SECS CMD... runs CMD until it succeeds.
SLOW=$(sed -n 's/.*shmkv_slow=\([0-9]*\).*/\1/p' /proc/cmdline)
SLOW=${SLOW:-1}
wait_until() {
	end=$(($(date +%s) + $1 * SLOW))
	shift
	until "$@"; do
		[ "$(date +%s)" -ge $end ] && return 1
		sleep 0.1
	done
}
quiet() { "$@" >/dev/null 2>&1; }
gone() { ! kill -0 "$1" 2>/dev/null; }
ok() { echo "CHECK $1 ok"; }
bad() { echo "CHECK $1 FAIL $2"; FAILS=$((FAILS + 1)); }
# per-node pools: 12 huge pages on each node, 1 on the last (short)
for n in $(seq 0 $LAST); do
	want=12
	[ $n -eq $LAST ] && want=1
	echo $want >/sys/devices/system/node/node$n/hugepages/hugepages-2048kB/nr_hugepages
done
R=/run/shmkv
mkdir -p $R /tmp/spool
chmod 755 $R /tmp/spool
cat >/tmp/loader.conf <<CONF
[loader]
root = $R
spool = /tmp/spool
shm_dir = /dev/shm
memory = shm
[cache huge]
memory = hugetlb
[cache hrep]
memory = hugetlb
numa = replicate
[cache autoshort]
memory = auto
CONF
shmkv-loader --config /tmp/loader.conf --foreground 2>/tmp/loader.log &
LP=$!
wait_until 120 [ -S $R/control.sock ]
S="shmctl -r $R"
W=/tmp/where

# line of copy $2 in $1
copy_line() { grep "^copy $2 " "$1"; }
# copy line $1 is pinned to node $2 and every page is there
on_node() { echo "$1" | grep -Eq "^copy [0-9]+ node $2 pagesize [0-9]+ pages $2:[0-9]+ absent 0$"; }

# 1. the topology the kernel shows
[ "$(cat /sys/devices/system/node/online)" = "0-$LAST" ] && ok topology ||
	bad topology "online=$(cat /sys/devices/system/node/online)"

# 2. node=N on tmpfs: every page on N, published pinned to N
for n in $(seq 0 $LAST); do
	if $S cache load --numa node=$n pin$n /img/g1.shmkv >/dev/null 2>/tmp/err &&
		probe where $R pin$n >$W && on_node "$(copy_line $W 0)" $n; then
		ok node$n-shm
	else
		bad node$n-shm "$(cat /tmp/err $W | tr '\n' ' ')"
	fi
done

# 3. interleave: one copy, unpinned, pages on every node
if $S cache load --numa interleave inter /img/g1.shmkv >/dev/null 2>/tmp/err &&
	probe where $R inter >$W; then
	l=$(copy_line $W 0)
	good=1
	echo "$l" | grep -q "node -1 .* absent 0$" || good=0
	for n in $(seq 0 $LAST); do echo "$l" | grep -q " $n:[0-9]" || good=0; done
	[ $good = 1 ] && ok interleave || bad interleave "$l"
else
	bad interleave "$(cat /tmp/err)"
fi

# 4. replicate over huge pages with the last node short: degrades to
#    interleave, logged and noted, and the swap goes ahead
if $S cache load hrep /img/g1.shmkv >/dev/null 2>/tmp/err &&
	$S -j cache status hrep >/tmp/st && probe where $R hrep >$W &&
	grep -q "replicate degraded to interleave" /tmp/st &&
	grep -q "degraded cache=hrep" /tmp/loader.log &&
	grep -q "^gen 1 copies 1$" $W &&
	copy_line $W 0 | grep -Eq "node -1 pagesize 2097152 pages .* absent 0$"; then
	ok hugetlb-replicate-degrades
else
	bad hugetlb-replicate-degrades "$(cat /tmp/err $W | tr '\n' ' ') $(grep -o '"note": *"[^"]*"' /tmp/st)"
fi

# 5. node=0 on huge pages: node 0's pool
if $S cache load --numa node=0 huge /img/g1.shmkv >/dev/null 2>/tmp/err &&
	probe where $R huge >$W && on_node "$(copy_line $W 0)" 0 &&
	copy_line $W 0 | grep -q "pagesize 2097152"; then
	ok hugetlb-node0
else
	bad hugetlb-node0 "$(cat /tmp/err $W | tr '\n' ' ')"
fi

# 6. the short node: a hugetlb-only cache is refused (the old generation
#    stays), an auto cache falls back to tmpfs on that node, noted
if $S cache load --numa node=$LAST huge /img/g2.shmkv >/dev/null 2>/tmp/err; then
	bad hugetlb-short-refused "loaded"
elif grep -q "huge pages" /tmp/err && probe where $R huge >$W && grep -q "^gen 1 " $W; then
	ok hugetlb-short-refused
else
	bad hugetlb-short-refused "$(cat /tmp/err $W | tr '\n' ' ')"
fi
if $S cache load --numa node=$LAST autoshort /img/g1.shmkv >/dev/null 2>/tmp/err &&
	$S -j cache status autoshort >/tmp/st && probe where $R autoshort >$W &&
	on_node "$(copy_line $W 0)" $LAST && copy_line $W 0 | grep -q "pagesize 4096" &&
	grep -q '"memory_note": *"fell back to shm' /tmp/st; then
	ok auto-short-falls-back
else
	bad auto-short-falls-back "$(cat /tmp/err $W | tr '\n' ' ')"
fi

# 7. replicate on tmpfs: one copy per node, each on its node
if $S cache load --numa replicate rep /img/g1.shmkv >/dev/null 2>/tmp/err &&
	probe where $R rep >$W && grep -q "^gen 1 copies $N$" $W; then
	good=1
	for n in $(seq 0 $LAST); do
		grep -Eq "^copy [0-9]+ node $n pagesize 4096 pages $n:[0-9]+ absent 0$" $W || good=0
	done
	[ $good = 1 ] && ok replicate || bad replicate "$(cat $W | tr '\n' ' ')"
else
	bad replicate "$(cat /tmp/err $W | tr '\n' ' ')"
fi

# 8. a reader pinned to each node's CPU maps that node's copy
for n in $(seq 0 $LAST); do
	out=$(probe pick $R rep $n)
	echo "$out" | grep -q "^pick cpu $n node $n replica $n " && ok pick-node$n ||
		bad pick-node$n "$out"
done

# 8b. no copy on a reader's node: the nearest by distance (4 nodes: the
#     guest has a line 0-1-2-3)
if [ $N = 4 ]; then
	if $S cache load --numa replicate=0,3 near /img/g1.shmkv >/dev/null 2>/tmp/err; then
		a=$(probe pick $R near 1)
		b=$(probe pick $R near 2)
		echo "$a" | grep -q "^pick cpu 1 node 1 replica 0 " &&
			echo "$b" | grep -q "^pick cpu 2 node 2 replica 3 " && ok nearest ||
			bad nearest "$a / $b"
	else
		bad nearest "$(cat /tmp/err)"
	fi
fi

# 9. a thread that migrates keeps reading, and takes its new node's copy
#    at the next generation
probe migrate $R rep 0 $LAST >/tmp/mig &
mp=$!
wait_until 120 grep -q ready /tmp/mig
$S cache load --numa replicate rep /img/g2.shmkv >/dev/null 2>/tmp/err
wait $mp
grep -Eq "^migrate from 0 to $LAST node_now $LAST before 0 moved 0 get 1 after $LAST " /tmp/mig &&
	ok migrate || bad migrate "$(cat /tmp/mig /tmp/err | tr '\n' ' ')"

# 10. swaps under a reader on every node: no error, no mixed generation,
#     every reader on its own node's copy at the end
# the readers run until the three swaps are done (a stop file), not for a
# fixed time a loaded TCG guest overran; the sleeps space the swaps
rm -f /tmp/swap.stop
probe swap $R rep $((600 * SLOW)) /tmp/swap.stop >/tmp/swap &
sp=$!
for g in 3 2 3; do
	sleep 1
	$S cache load --numa replicate rep /img/g$g.shmkv >/dev/null 2>>/tmp/err
done
sleep 1 # every reader refreshes each 256 gets: the last generation is seen
touch /tmp/swap.stop
wait $sp
good=1
[ "$(grep -c '^reader ' /tmp/swap)" = "$N" ] || good=0
while read -r _ _ cpu _ node _ replica _ gets _ gens _ errors rest; do
	[ "$node" = "$cpu" ] && [ "$replica" = "$cpu" ] && [ "$errors" = 0 ] &&
		[ "$gens" -ge 2 ] && [ "$gets" -gt 0 ] || good=0
done </tmp/swap
[ $good = 1 ] && ok swap-under-readers || bad swap-under-readers "$(cat /tmp/swap /tmp/err | tr '\n' ' ')"

# 10b. a restart adopts the rollback with its replicas: after a rollback,
#      one copy per node again, each on its node, and a reader on each node
#      maps its own
kill $LP
wait_until 120 gone $LP
shmkv-loader --config /tmp/loader.conf --foreground 2>>/tmp/loader.log &
LP=$!
# the restarted loader answers (not `cache list`: without a loader it reads
# the control segments and succeeds, so it waited for nothing)
wait_until 120 quiet $S cache status rep
if $S cache rollback rep >/dev/null 2>/tmp/err && probe where $R rep >$W &&
	grep -q "^gen [0-9]* copies $N$" $W; then
	good=1
	for n in $(seq 0 $LAST); do
		grep -Eq "^copy [0-9]+ node $n pagesize 4096 pages $n:[0-9]+ absent 0$" $W || good=0
		probe pick $R rep $n | grep -q "^pick cpu $n node $n replica $n " || good=0
	done
	[ $good = 1 ] && ok restart-rollback-replicas ||
		bad restart-rollback-replicas "$(cat $W | tr '\n' ' ')"
else
	bad restart-rollback-replicas "$(cat /tmp/err $W | tr '\n' ' ') $(grep -i 'rollback replica\|orphan\|removed' /tmp/loader.log | tail -n 4 | tr '\n' ' ')"
fi

# 11. placement found wrong: a tmpfs mounted mpol=bind:LAST gives its files
#     that policy, which tmpfs' fallocate follows over the loader's own; the
#     loader's check after the read sees the pages off node 0, says so and
#     publishes the copy as not pinned
mkdir -p /tmp/mshm /run/shmkv2 /tmp/spool2
chmod 755 /run/shmkv2 /tmp/spool2
mount -t tmpfs -o mpol=bind:$LAST tmpfs /tmp/mshm
shmkv-loader --root /run/shmkv2 --spool /tmp/spool2 --shm-dir /tmp/mshm --memory shm \
	--foreground 2>/tmp/loader2.log &
wait_until 120 [ -S /run/shmkv2/control.sock ]
if shmctl -r /run/shmkv2 cache load --numa node=0 wrong /img/g1.shmkv >/dev/null 2>/tmp/err &&
	shmctl -r /run/shmkv2 -j cache status wrong >/tmp/st && probe where /run/shmkv2 wrong >$W &&
	grep -q "placement wrong" /tmp/st && grep -q "misplaced cache=wrong" /tmp/loader2.log &&
	copy_line $W 0 | grep -Eq "^copy 0 node -1 pagesize 4096 pages $LAST:[0-9]+ absent 0$"; then
	ok misplaced-reported
else
	bad misplaced-reported "$(cat /tmp/err $W | tr '\n' ' ') $(grep -o '"note": *"[^"]*"' /tmp/st) $(tail -n 3 /tmp/loader2.log | tr '\n' ' ')"
fi

if [ $FAILS -ne 0 ]; then
	echo "---- loader log"
	tail -n 40 /tmp/loader.log
fi
echo "GUEST-DONE nodes=$N fails=$FAILS"
poweroff -f
