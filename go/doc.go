// Package shmkv reads shmkv images and loader-served caches: read-only,
// memory-mapped key/value files of format 2 (lib/FORMAT.md in the shmkv
// repository), in pure Go (no cgo).
//
// An image file is opened with [OpenFile] (or [OpenBytes] for an image
// already in memory); a cache that shmkv-loader serves is attached with
// [Attach] and followed from generation to generation with
// [Cache.Refresh]. Both offer copying getters, safe and simple, one per
// value type ([Image.Text], [Image.Int64], [Image.Float32s], ...):
//
//	img, err := shmkv.OpenFile("users.shmkv", 0)
//	if err != nil {
//		return err
//	}
//	defer img.Close()
//	name, err := img.Text("user:1:name")
//
// For zero-copy reads, Pin returns a [View]: its values point into the
// mapping and stay valid, and unchanged, until [View.Release], whatever
// refreshes and closes happen meanwhile (bbolt's rule for its
// transactions). A View's Get allocates nothing; [View.GetBatch] looks up
// many keys with their memory reads overlapped; [View.Entries] and
// [View.Records] iterate (range-over-func).
//
// A delta image (FORMAT.md §19: upserts and tombstones for one base
// image, and a key filter) opens as any image does; read alone, its
// tombstones' keys are absent. [Image.WithDelta] reads a base through a
// delta: the delta's upserts and tombstones first, the base for every
// other key, in every getter, batch and iteration, with no allocation
// per get; a delta built for another image is refused with [ErrBase].
// [Image.WithDeltas] reads a base through two deltas of it, a lower and a
// top over it (FORMAT.md §19.6): the top's records first, then the
// lower's, then the base's. A cache with changes (shmctl cache set,
// remove, apply; protocol 2 of lib/PROTOCOL.md) is served as a base and
// one or two overlays, deltas of it: a [Cache] reads each generation
// through its lower overlay, and its top one where it has one, the same
// way.
//
//	users, err := base.WithDelta(delta) // base, delta: Images (OpenFile)
//	if err != nil {
//		return err // ErrBase: delta is not a delta of base
//	}
//	defer users.Close()
//	name, err := users.Text("user:1:name")
//
// Every error matches one class with errors.Is: [ErrNotFound],
// [ErrCorrupt], [ErrVersion] and the other sentinels of the format, or an
// error of the operating system (errors.Is(err, fs.ErrNotExist), ...).
// [Class] names the class of any error the package returns, as the C
// reader does ("SHMKV_ECORRUPT", "ENOENT", ...). An image of the retired
// format 1 is refused with ErrVersion, its message naming the command that
// converts it: shmctl image upgrade OLD -o NEW.
//
// Image, Cache and View are safe for any number of goroutines. Images are
// untrusted: every offset is bounds-checked before it is followed, and no
// image, however damaged or forged, makes the reader read outside it or
// panic.
package shmkv
