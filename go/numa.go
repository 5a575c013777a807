package shmkv

import (
	"math"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NUMA replicas (lib/PROTOCOL.md, "Replicas"): which published copy to map.

// currentNode is the NUMA node of the CPU the calling goroutine's thread
// runs on at this instant (getcpu(2)); -1 if unknown. A goroutine may move
// to another thread, and a thread to another node, right after: this is
// the node at attach or refresh time, as in the C reader.
func currentNode() int {
	var cpu, node uint32
	_, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), uintptr(unsafe.Pointer(&node)), 0)
	if e != 0 || node >= 64 {
		return -1
	}
	return int(node)
}

// nodeDistances: the SLIT distance from node from to each online node
// (MaxInt where unknown); sysfs's nodeF/distance lists one number per
// online node, in the order of .../online.
func nodeDistances(from int) [64]int {
	var dist [64]int
	for i := range dist {
		dist[i] = math.MaxInt
	}
	online, err := os.ReadFile("/sys/devices/system/node/online")
	if err != nil {
		return dist
	}
	var ids []int
	for _, r := range strings.Split(strings.TrimSpace(string(online)), ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil {
			break
		}
		for i := a; i <= b && i >= 0 && i < 64; i++ {
			ids = append(ids, i)
		}
	}
	line, err := os.ReadFile("/sys/devices/system/node/node" + strconv.Itoa(from) + "/distance")
	if err != nil {
		return dist
	}
	for i, f := range strings.Fields(string(line)) {
		d, err := strconv.Atoi(f)
		if err != nil || i >= len(ids) {
			break
		}
		dist[ids[i]] = d
	}
	return dist
}

// pickSegment: the copy pinned to want, else the pinned copy nearest to
// want by distance, else segment 0 (want -1: unknown node).
func pickSegment(segs []ctlSegment, want int) int {
	if len(segs) <= 1 || want < 0 {
		return 0
	}
	for i, s := range segs {
		if s.node == want {
			return i
		}
	}
	dist, best, bestD := nodeDistances(want), 0, math.MaxInt
	for i, s := range segs {
		if s.node >= 0 && s.node < 64 && dist[s.node] < bestD {
			best, bestD = i, dist[s.node]
		}
	}
	return best
}
