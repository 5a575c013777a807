//go:build (amd64 || arm64) && !purego

package shmkv

// prefetchNext asks the CPU for the second line of bucket bk and both
// lines of the bucket after it in memory (PREFETCHT0 on amd64, PRFM
// PLDL1KEEP on arm64): hints, which retire at once and never fault, where
// loads would hold the lookup until their lines came. For the last bucket
// the next lines lie past INDEX (bucket 0 follows it in the probe order,
// not in memory): a hint about bytes the lookup will not read, harmless.
// Go has no prefetch builtin; this is its assembly, no cgo (build tag
// purego: none).
//
//go:noescape
func prefetchNext(bk *[bucketBytes]byte)

// prefetchHome asks for both lines of bucket bk and both of the bucket
// after it (a hint, as above): a get read through deltas requests its base
// lines before it reads the deltas' filters.
//
//go:noescape
func prefetchHome(bk *[bucketBytes]byte)

// prefetchHomes asks for both lines of each of the eight home buckets of
// a GetBatch block (a hint, as above; one call a block: Go keeps no
// register across a call).
//
//go:noescape
func prefetchHomes(bks *[pipeBlock]*[bucketBytes]byte)

// prefetchNexts asks for both lines of the bucket after bks[i] in memory
// where ann[i] (GetBatch's b+1 requests of a block); where not, for bks[i]'s
// own lines again, already in cache: no branch in the loop.
//
//go:noescape
func prefetchNexts(bks *[pipeBlock]*[bucketBytes]byte, ann *[pipeBlock]bool)

// havePrefetch: the prefetch functions are hints the CPU acts on.
const havePrefetch = true
