package shmkv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// DefaultRoot is the loader's root when neither the caller nor $SHMKV_ROOT
// names one (lib/PROTOCOL.md, "Files").
const DefaultRoot = "/run/shmkv"

// AttachOptions are Attach's choices; the zero value is Attach's defaults.
type AttachOptions struct {
	// Root is the loader's root directory: "" means $SHMKV_ROOT, else
	// DefaultRoot.
	Root string
	// Node fixes the NUMA node whose copy is read (PROTOCOL.md, "Replicas");
	// nil: the node of the calling thread at attach and at each refresh that
	// maps a new generation (getcpu(2)).
	Node *int
	// Verify checks every checksum of each generation mapped (the C
	// reader's SHMKV_ATTACH_VERIFY); the loader has checked them already.
	Verify bool
}

// Cache is a loader-managed cache (lib/PROTOCOL.md): its current
// generation, and Refresh to follow the loader to the next one. A
// generation of a cache with changes (protocol 2) is a base read through
// its overlays, delta images of it (FORMAT.md §19): the lower one, and the
// top one over it where the generation has one (§19.6); every getter
// answers as Image.WithDeltas' do. A Cache,
// Refresh and Close included, is safe for any number of goroutines: a
// refresh swaps the generation for new pins, while every pinned View keeps
// its own generation mapped until it is released. The copying getters
// (Bytes, Text, Int64, ...) each read one generation.
type Cache struct {
	source
	name string

	mu      sync.Mutex // refresh and close; the readers never take it
	ctl     *ctlFile
	node    int // fixed node, or -1: the calling thread's
	verify  bool
	failSeq uint64 // the seq of the last failed refresh, and its error
	failErr error
}

// Attach attaches to the cache name served under root ("": $SHMKV_ROOT,
// else /run/shmkv), reading the copy of the calling thread's NUMA node.
func Attach(name, root string) (*Cache, error) {
	return AttachWith(name, AttachOptions{Root: root})
}

// AttachWith is Attach with options.
func AttachWith(name string, o AttachOptions) (*Cache, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	root := o.Root
	if root == "" {
		root = os.Getenv("SHMKV_ROOT")
	}
	if root == "" {
		root = DefaultRoot
	}
	ctl, err := openCtl(filepath.Join(root, name+".ctl"))
	if err != nil {
		return nil, err
	}
	c := &Cache{name: name, ctl: ctl, node: -1, verify: o.Verify}
	if o.Node != nil {
		c.node = *o.Node
	}
	for tries := 0; ; tries++ {
		snap, err := ctl.snapshot(ctlSeqSpins)
		if err == nil {
			var m *mapping
			m, err = c.mapSnap(snap, nil)
			if err == nil {
				c.cur.Store(m)
				return c, nil
			}
			// The loader replaced the segment between the snapshot and the
			// open: take a new snapshot.
			if errors.Is(err, os.ErrNotExist) && ctl.generation() != snap.gen && tries < 64 {
				continue
			}
		}
		ctl.close()
		return nil, err
	}
}

// checkName: 1-63 bytes of A-Z a-z 0-9 _ - ., not starting with '.'.
func checkName(name string) error {
	ok := len(name) >= 1 && len(name) <= 63 && name[0] != '.'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
	}
	if !ok {
		return fmt.Errorf("shmkv: cache name %q: 1 to 63 of A-Z a-z 0-9 _ - ., not starting with '.': %w", name, os.ErrInvalid)
	}
	return nil
}

// mapSnap opens, maps and checks the generation a snapshot names: a base
// copy, read through a lower overlay copy and a top overlay copy where the
// generation has them (PROTOCOL.md, "Replicas" and "Protocol 2"), keeping
// what it shares with generation keep (the current one at a refresh; nil
// at attach: keep.go).
func (c *Cache) mapSnap(s ctlSnap, keep *mapping) (*mapping, error) {
	if s.flags&ctlRetired != 0 {
		return nil, errf(ErrStale, "cache %q: the loader dropped it or replaced its control segment (generation %d)", c.name, s.gen)
	}
	if s.gen == 0 {
		return nil, errf(ErrAgain, "cache %q: nothing published yet", c.name)
	}
	bases, lowers, tops, err := s.roles(c.ctl.version)
	if err != nil {
		return nil, errf(ErrProto, "cache %q: %s", c.name, detail(err))
	}
	if len(bases) == 0 {
		return nil, errf(ErrAgain, "cache %q: nothing published (generation %d has no segment)", c.name, s.gen)
	}
	want := c.node
	if want < 0 {
		want = currentNode()
	}
	i := pickSegment(bases, want)
	m, err := c.mapGen(bases[i], lowers, tops, s.gen, keep)
	if err != nil && i != 0 { // the chosen copy will not map: the first, and its overlays
		m, err = c.mapGen(bases[0], lowers, tops, s.gen, keep)
	}
	return m, err
}

// mapGen maps base copy seg and the copies of the overlays that go with
// it (each of its node, else the first; none without copies), and reads
// the base through the lower overlay, and the top one over it: ErrBase (as
// a bad segment) if an overlay does not apply to the base (FORMAT.md
// §19.4; the top is a delta of the base, as the lower is). A level that is
// the same image as keep's at that level is kept (keep.go), an overlay's
// only over a kept base; a refused generation drops only what it took.
func (c *Cache) mapGen(seg ctlSegment, lowers, tops []ctlSegment, gen uint64, keep *mapping) (*mapping, error) {
	segs := []ctlSegment{seg}
	for _, o := range [...]*ctlSegment{pickOverlay(lowers, seg.node), pickOverlay(tops, seg.node)} {
		if o == nil {
			break
		}
		segs = append(segs, *o)
	}
	var ls []*mapping
	release := func() {
		for _, m := range ls {
			m.release()
		}
	}
	for i, s := range segs {
		m, err := c.mapSegment(s, gen, segRole(i), level(keep, i))
		if err != nil {
			release()
			return nil, err
		}
		ls = append(ls, m)
		if i == 0 {
			if m != level(keep, 0) {
				keep = nil // a new base: its overlays are new too
			}
			continue
		}
		if err := applies(ls[0], m); err != nil {
			release()
			return nil, errf(ErrBase, "cache %q: %s %s: %s", c.name, segRoleName[i], s.path, detail(err))
		}
	}
	return through(gen, seg.node, ls...), nil
}

// segRole is what a control segment's entry is a copy of (PROTOCOL.md,
// "Protocol 2"): the base, the lower overlay or the top overlay.
type segRole int

const (
	roleBase segRole = iota
	roleLower
	roleTop
)

var segRoleName = [...]string{roleBase: "base", roleLower: "overlay", roleTop: "top overlay"}

// mapSegment: the entry's page_size (a power of two from 4096 to 2^30) and
// map_size (a multiple of it), else ErrProto; O_NONBLOCK, fstat (a regular
// file, else ErrProto; of the control segment's
// owner, writable by neither group nor others, at least size bytes, a
// map_size not below size); then
// keep, with one more reference, if it is the same image (sameImage), else
// map, check the image header (every checksum with Verify): a delta image
// for an overlay copy (lower or top), a plain image for a base copy, else
// ErrProto.
func (c *Cache) mapSegment(seg ctlSegment, gen uint64, role segRole, keep *mapping) (*mapping, error) {
	if ps := seg.pageSize; ps < 4096 || ps > 1<<30 || ps&(ps-1) != 0 || seg.mapSize%ps != 0 {
		return nil, errf(ErrProto, "control segment: %s: page size %d, map size %d are not a mapping's", seg.path, ps, seg.mapSize)
	}
	fd, err := unix.Open(seg.path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shmkv: segment: %w", &os.PathError{Op: "open", Path: seg.path, Err: err})
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shmkv: segment %s: %w", seg.path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, errf(ErrProto, "segment %s: not a regular file (mode %#o)", seg.path, st.Mode)
	case st.Uid != c.ctl.uid || st.Mode&0o022 != 0: // EPERM, as lib's attach
		return nil, fmt.Errorf("shmkv: segment %s: owned by uid %d mode %#o; segments must be owned by the control segment's owner (uid %d) and writable by no one else: not mapped: %w",
			seg.path, st.Uid, st.Mode&0o7777, c.ctl.uid, unix.EPERM)
	case seg.size < headerBlock || uint64(st.Size) < seg.size:
		return nil, errf(ErrTruncated, "segment %s: %d bytes, the control segment says the image has %d", seg.path, st.Size, seg.size)
	case seg.mapSize < seg.size: // as lib's attach: a mapping shorter than its image
		return nil, errf(ErrTruncated, "segment %s: map_size %d below the image's size %d", seg.path, seg.mapSize, seg.size)
	}
	if keep != nil && sameImage(keep, seg, fd, &st) && keep.acquire() {
		return keep, nil
	}
	mapLen := seg.size
	if seg.mapSize >= seg.size && seg.mapSize <= uint64(st.Size) {
		mapLen = seg.mapSize // a hugetlbfs mapping must be whole pages
	}
	mem, err := mapFile(fd, mapLen, false)
	if err != nil {
		return nil, fmt.Errorf("shmkv: mmap %s: %w", seg.path, err)
	}
	im, err := checkImage(mem[:seg.size], c.verify)
	if err == nil && im.delta != (role != roleBase) {
		err = errf(ErrProto, "%s where the control segment names %s", imageKind[im.delta], segmentRole[role])
	}
	if err != nil {
		unmapFile(mem)
		return nil, fmt.Errorf("segment %s: %w", seg.path, err)
	}
	m := newMapping(mem, im, gen, seg.node)
	m.id = &segID{seg: seg, dev: uint64(st.Dev), ino: uint64(st.Ino)}
	return m, nil
}

var (
	imageKind   = map[bool]string{false: "a plain image", true: "a delta image"}
	segmentRole = [...]string{
		roleBase: "a base copy (a plain image)", roleLower: "an overlay copy (a delta image)",
		roleTop: "a top overlay copy (a delta image)",
	}
)

// Refresh follows the loader to its current generation (PROTOCOL.md,
// "Refresh"): false if it is the one this Cache reads already (one fstat
// and one atomic load), true if it switched; ErrAgain mid-publish or with
// nothing published, ErrStale when the cache was dropped or its control
// segment replaced (attach again), another error if the new generation will
// not map (tried again after the next publish). On error the Cache keeps
// its generation. Views pinned before keep theirs until released. A
// generation whose base is the same image as the current one's keeps the
// base's mapping, and each overlay's that is the same image at the same
// level: only the new overlays are mapped and checked (PROTOCOL.md,
// "Protocol 2"), so a stream of top-only publishes faults in a top, not
// the base, per refresh.
func (c *Cache) Refresh() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.cur.Load()
	if cur == nil {
		return false, ErrClosed
	}
	if stale, err := c.ctl.stale(); err != nil || stale {
		if err == nil {
			err = errf(ErrStale, "cache %q: its control segment was removed, replaced or truncated", c.name)
		}
		return false, err
	}
	if c.ctl.generation() == cur.gen {
		return false, nil
	}
	s := c.ctl.seq()
	if s&1 != 0 {
		return false, errf(ErrAgain, "cache %q: a publish is in progress", c.name)
	}
	if c.failErr != nil && s == c.failSeq {
		return false, c.failErr
	}
	snap, err := c.ctl.snapshot(ctlRefreshPass)
	var m *mapping
	if err == nil {
		m, err = c.mapSnap(snap, cur) // cur stays current (c.mu held) until the swap below
	}
	if err != nil {
		c.failSeq, c.failErr = s, err
		return false, err
	}
	c.failErr = nil
	c.swap(m)
	return true, nil
}

// Generation is the generation new pins and the copying getters read.
func (c *Cache) Generation() uint64 {
	if m := c.cur.Load(); m != nil {
		return m.gen
	}
	return 0
}

// Node is the NUMA node whose copy the current generation is (-1: not
// pinned to a node).
func (c *Cache) Node() int {
	if m := c.cur.Load(); m != nil {
		return m.node
	}
	return -1
}

// Name is the cache's name.
func (c *Cache) Name() string { return c.name }

// Close drops the Cache's reference to its generation (unmapped when the
// last View of it is released) and closes the control segment.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur.Load() == nil {
		return nil
	}
	c.swap(nil)
	c.ctl.close()
	return nil
}
