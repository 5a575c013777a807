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
func prefetchNext(bk *[v2Bucket]byte)

// prefetchPair asks the CPU for both lines of bucket bk (a hint, as above;
// GetBatch's request of a home bucket).
//
//go:noescape
func prefetchPair(bk *[v2Bucket]byte)

// havePrefetch: the prefetch functions are hints the CPU acts on.
const havePrefetch = true
