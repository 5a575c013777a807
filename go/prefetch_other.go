//go:build !(amd64 || arm64) || purego

package shmkv

// prefetchNext is a no-op where the package has no assembly for it: a hint
// only, lookups answer the same without it.
func prefetchNext(bk *[bucketBytes]byte) {}

// prefetchHome is a no-op here (a hint only).
func prefetchHome(bk *[bucketBytes]byte) {}

// prefetchHomes is a no-op here (a hint only).
func prefetchHomes(bks *[pipeBlock]*[bucketBytes]byte) {}

// prefetchNexts is a no-op here (a hint only).
func prefetchNexts(bks *[pipeBlock]*[bucketBytes]byte, ann *[pipeBlock]bool) {}

// havePrefetch: no hints here; GetBatch touches its buckets with loads.
const havePrefetch = false
