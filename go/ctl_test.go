package shmkv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Control segments built by hand (lib/PROTOCOL.md, "Layout"): ErrAgain
// (a publish in progress, nothing published) and the NUMA choice among
// replicas, without a loader.

type ctlFixture struct {
	t    testing.TB
	dir  string
	path string
	mem  []byte
}

// newCtl writes a control segment of protocol 1 at dir/c.ctl: generation
// gen, seq, and one entry per segment.
func newCtl(t *testing.T, seq, gen uint64, segs []ctlSegment) *ctlFixture {
	return newCtlVersion(t, 1, seq, gen, segs)
}

// newCtlVersion is newCtl of protocol version (1 or 2), with its layout
// hash.
func newCtlVersion(t testing.TB, version uint32, seq, gen uint64, segs []ctlSegment) *ctlFixture {
	t.Helper()
	c := &ctlFixture{t: t, dir: t.TempDir(), mem: make([]byte, ctlSize)}
	c.path = filepath.Join(c.dir, "c.ctl")
	copy(c.mem, ctlMagic)
	le.PutUint32(c.mem[8:], version)
	le.PutUint32(c.mem[12:], ctlSize)
	le.PutUint64(c.mem[16:], ctlLayoutHashOf(version))
	c.publish(seq, gen, segs)
	return c
}

// publish rewrites seq, generation and the segments (the file is rewritten
// in place: a reader's MAP_SHARED mapping sees it).
func (c *ctlFixture) publish(seq, gen uint64, segs []ctlSegment) {
	m := c.mem
	le.PutUint64(m[24:], seq)
	le.PutUint64(m[32:], gen)
	le.PutUint32(m[40:], uint32(len(segs)))
	clear(m[128:])
	for i, s := range segs {
		d := m[128+256*i:]
		le.PutUint32(d, uint32(int32(s.node)))
		le.PutUint32(d[4:], s.flags)
		le.PutUint64(d[8:], s.size)
		le.PutUint64(d[16:], s.mapSize)
		le.PutUint64(d[24:], 4096)
		copy(d[32:32+ctlPathMax-1], s.path)
	}
	f, err := os.OpenFile(c.path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err == nil {
		_, err = f.WriteAt(m, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Chmod(c.path, 0o644)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// segment writes an image (key "copy" -> which) as a segment file.
func (c *ctlFixture) segment(which string, node int) ctlSegment {
	c.t.Helper()
	b := encodeV2([]rec2{{key: "copy", typ: TypeString, value: []byte(which)}}, enc2Opts{buckets: 1, name: which})
	return c.file(which+".img", b, node, 0)
}

// file writes image bytes b as the segment file dir/name: a copy of node
// with segment flags.
func (c *ctlFixture) file(name string, b []byte, node int, flags uint32) ctlSegment {
	c.t.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		c.t.Fatal(err)
	}
	return ctlSegment{node: node, flags: flags, size: uint64(len(b)), mapSize: uint64(len(b)), path: p}
}

func attachCtl(c *ctlFixture, node *int) (*Cache, error) {
	return AttachWith("c", AttachOptions{Root: c.dir, Node: node})
}

// copyOf: which copy a cache reads (its "copy" value) and the view's node.
func copyOf(t *testing.T, c *Cache) (string, int) {
	t.Helper()
	v, err := c.Pin()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	s, err := c.Text("copy")
	if err != nil {
		t.Fatal(err)
	}
	return s, v.Node()
}

// ErrAgain, deterministically: a seq left odd (a publish in progress, or a
// loader that died in one) at attach and at refresh; nothing published yet
// (generation 0, no segment). Then the publish completes and both succeed.
func TestErrAgain(t *testing.T) {
	c := newCtl(t, 0, 0, nil)
	a := c.segment("a", -1)
	if _, err := attachCtl(c, nil); !errors.Is(err, ErrAgain) || Class(err) != "EAGAIN" {
		t.Fatalf("nothing published: %v", err)
	}
	c.publish(1, 1, []ctlSegment{a}) // odd: the loader is mid-publish
	if _, err := attachCtl(c, nil); !errors.Is(err, ErrAgain) {
		t.Fatalf("seq odd at attach: %v", err)
	}
	c.publish(2, 1, []ctlSegment{a})
	cache, err := attachCtl(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	b := c.segment("b", -1)
	c.publish(3, 2, []ctlSegment{b}) // generation 2 written, seq still odd
	if ok, err := cache.Refresh(); ok || !errors.Is(err, ErrAgain) {
		t.Fatalf("refresh mid-publish: %v, %v", ok, err)
	}
	if s, _ := copyOf(t, cache); s != "a" || cache.Generation() != 1 {
		t.Fatalf("after a refused refresh: copy %q generation %d", s, cache.Generation())
	}
	c.publish(4, 2, []ctlSegment{b})
	if ok, err := cache.Refresh(); !ok || err != nil {
		t.Fatalf("refresh after the publish: %v, %v", ok, err)
	}
	if s, _ := copyOf(t, cache); s != "b" || cache.Generation() != 2 {
		t.Fatalf("copy %q generation %d, want b 2", s, cache.Generation())
	}
	// the snapshot's bounded retry itself: an odd seq is never read through
	cf, err := openCtl(c.path)
	if err != nil {
		t.Fatal(err)
	}
	defer cf.close()
	c.publish(5, 3, []ctlSegment{a})
	if _, err := cf.snapshot(3); !errors.Is(err, ErrAgain) {
		t.Fatalf("snapshot of an odd seq: %v", err)
	}
}

// NUMA replicas (PROTOCOL.md, "Replicas"): the copy of the node asked for;
// without a copy of that node (and no distances known for it) segment 0; a
// copy that will not map, segment 0; an unknown node, segment 0; the
// calling thread's node when none is asked for.
func TestNUMAReplicas(t *testing.T) {
	c := newCtl(t, 0, 0, nil)
	s0, s1, s2 := c.segment("unpinned", -1), c.segment("node0", 0), c.segment("node1", 1)
	c.publish(2, 1, []ctlSegment{s0, s1, s2})
	for _, tc := range []struct {
		node     int
		copyName string
		copyNode int
	}{
		{1, "node1", 1},
		{0, "node0", 0},
		{63, "unpinned", -1}, // no copy on node 63, no distance from it: segment 0
	} {
		n := tc.node
		cache, err := attachCtl(c, &n)
		if err != nil {
			t.Fatal(err)
		}
		if got, node := copyOf(t, cache); got != tc.copyName || node != tc.copyNode || cache.Node() != tc.copyNode {
			t.Errorf("node %d: read copy %q (node %d), want %q (node %d)", n, got, node, tc.copyName, tc.copyNode)
		}
		cache.Close()
	}
	if i := pickSegment([]ctlSegment{s0, s1, s2}, -1); i != 0 {
		t.Errorf("unknown node: segment %d, want 0", i)
	}
	// the calling thread's node, where getcpu(2) knows it
	cache, err := attachCtl(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := currentNode()
	if _, node := copyOf(t, cache); want >= 0 && want <= 1 && node != want {
		t.Errorf("the thread's node is %d, the copy read is node %d's", want, node)
	}
	cache.Close()
	// node 1's copy is gone (unlinked, say): segment 0 instead
	if err := os.Remove(s2.path); err != nil {
		t.Fatal(err)
	}
	c.publish(4, 2, []ctlSegment{s0, s1, s2})
	one := 1
	cache, err = attachCtl(c, &one)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	if got, node := copyOf(t, cache); got != "unpinned" || node != -1 {
		t.Errorf("node 1's copy missing: read %q (node %d), want segment 0", got, node)
	}
}
