package shmkv

import "runtime"

// GetBatch runs as a pipeline over blocks of pipeBlock keys: a key's home
// bucket is requested two blocks before its lookup, its bucket b+1 (where
// announced) one block before; pipeRing holds their hashes (a power of
// two, a multiple of pipeBlock, at least three blocks).
const (
	pipeBlock = 8
	pipeRing  = 32
)

// GetBatch looks up keys[i] into vals[i] and errs[i] (both at least as long
// as keys), zero-copy like Get, each key answered as its Get would answer
// it: one key's damage or absence never changes another key's answer. The
// memory reads of the keys overlap (getBatch); the clock is read at most
// once for the whole call. Through a delta, each key as Get answers it
// through the delta (FORMAT.md §19); through a lower and a top, through
// both (§19.6).
func (v *View) GetBatch(keys []string, vals []Value, errs []error) {
	vals, errs = vals[:len(keys)], errs[:len(keys)]
	if v.released.Load() {
		for i := range keys {
			vals[i], errs[i] = Value{}, ErrClosed
		}
		return
	}
	v.im.getBatch(keys, vals, errs, v.clock, v.dm, v.top)
}

// getBatch is GetBatch, a pipeline over blocks of pipeBlock keys. Pass p
// hashes the keys of block p and requests their home buckets; for block
// p-1, whose homes have arrived by then, it decides whether bucket b+1 is
// requested too (probes: D and the filter announce displaced keys of its
// tag) and whether a key's home settles a miss by itself (homeSettles:
// then its lookup is a store of ErrNotFound, not getFast's walk, which
// cost a batched miss more than the memory the pipeline hides); block p-2
// is looked up. So the lookups of one stretch of keys run while the lines
// of the next are on their way, where requesting a group and then waiting
// for it left the core idle for a memory round trip per group. The
// requests of a block are one call (prefetchHomes, prefetchNexts): Go
// saves no register across a call, and a call a key cost reloads of the
// loop's values. A key's hash, home and bucket are computed once and kept
// in rings for its later stages. pin is a pinned clock, 0 for none. dm,
// when not nil, is the delta im is read through, and top, when not nil,
// the top delta over dm, asked before it (FORMAT.md §19.6): their filters
// are asked as a key is hashed, and a key one lets through (few keys) has
// that delta's bucket requested in the pipeline instead of the base's
// (lib's batch does the same); at its lookup the deltas answer where they
// hold the key, else the base does from its bucket, not requested (a
// filter's false "maybe").
func (im *image) getBatch(keys []string, vals []Value, errs []error, pin int64, dm, top *image) {
	var hs, homes [pipeRing]uint64
	var bks [pipeRing]*[bucketBytes]byte
	var ann, absent [pipeRing]bool // b+1 announced; settled by the home bucket alone
	var over [pipeRing]bool        // a delta's filter lets the key through: bks holds that delta's bucket
	const ring = pipeRing - 1      // a mask: pipeRing is a power of two
	now := pin                     // the clock, read at most once for the whole batch (getFast)
	n := uint(len(keys))
	var sink byte
	for lo := uint(0); lo < n+2*pipeBlock; lo += pipeBlock {
		if lo < n { // hash block p, request its home buckets
			for j := lo; j < min(lo+pipeBlock, n); j++ {
				h := uint64(0)
				if k := keys[j]; im.shortHash(len(k)) {
					h = xxh3Len9To16(strBytes(k), im.seed) // hash's common case, inlined
				} else if len(k) <= maxKeyLen {
					h = im.hash(strBytes(k))
				}
				b, bk := im.homeBucket(h)
				if dm != nil {
					// through deltas, a key a filter lets through (few
					// keys) has the bucket of the first delta that may
					// hold it requested instead of the base's (the top's,
					// else the lower's: FORMAT.md §19.6), as lib's batch:
					// a key a delta answers costs no base line
					o := false
					if top != nil && top.mayHold(h) {
						_, bk = top.homeBucket(h)
						o = true
					} else if dm.mayHold(h) {
						_, bk = dm.homeBucket(h)
						o = true
					}
					over[j&ring] = o
				}
				hs[j&ring], homes[j&ring], bks[j&ring] = h, b, bk
				if !havePrefetch {
					sink += bk[0] // a load where there is no hint: it holds the loop, still overlaps
				}
			}
			// Past n in a last short block: the ring's older buckets (or
			// nil): a hint, which never faults, of lines already asked for.
			prefetchHomes((*[pipeBlock]*[bucketBytes]byte)(bks[lo&ring:]))
		}
		if lo >= pipeBlock && lo-pipeBlock < n { // block p-1: b+1 where the home announces it
			for k := lo - pipeBlock; k < min(lo, n); k++ {
				if over[k&ring] { // a delta's bucket: the lookup decides
					ann[k&ring], absent[k&ring] = false, false
					continue
				}
				bk, tag := bks[k&ring], tagOf(hs[k&ring])
				a := im.probes(bk, tag) != 0
				ann[k&ring] = a
				absent[k&ring] = homeSettles(bk, dirTag(tag)*lanes16, a) // a miss needs nothing more
			}
			c := (lo - pipeBlock) & ring
			prefetchNexts((*[pipeBlock]*[bucketBytes]byte)(bks[c:]), (*[pipeBlock]bool)(ann[c:]))
		}
		if lo < 2*pipeBlock {
			continue
		}
		for i := lo - 2*pipeBlock; i < min(lo-pipeBlock, n); i++ { // block p-2: look up, its lines in cache by now
			r := i & ring
			k := keys[i]
			if over[r] {
				if len(k) > maxKeyLen {
					vals[i], errs[i] = Value{}, errKeyLen
					continue
				}
				if top != nil && top.mayHold(hs[r]) {
					tb, tbk := top.homeBucket(hs[r])
					if val, err := top.getFast(strBytes(k), hs[r], tb, tbk, &now); err != ErrNotFound {
						vals[i], errs[i] = val, err // as get: the top's upsert or tombstone
						continue
					}
				}
				if dm.mayHold(hs[r]) {
					db, dbk := dm.homeBucket(hs[r])
					if val, err := dm.getFast(strBytes(k), hs[r], db, dbk, &now); err != ErrNotFound {
						vals[i], errs[i] = val, err // as get: the delta's upsert or tombstone
						continue
					}
				}
				// no delta holds it (a filter's false "maybe"): the base,
				// its bucket not requested
				vals[i], errs[i] = im.getFast(strBytes(k), hs[r], homes[r], im.bucket(homes[r]), &now)
				continue
			}
			switch {
			case len(k) > maxKeyLen:
				vals[i], errs[i] = Value{}, errKeyLen
			case absent[r]:
				vals[i], errs[i] = Value{}, ErrNotFound
			default:
				vals[i], errs[i] = im.getFast(strBytes(k), hs[r], homes[r], bks[r], &now)
			}
		}
	}
	runtime.KeepAlive(sink)
}
