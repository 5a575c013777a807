package shmkv

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mappings: read-only, shared, at a 2 MiB-aligned address when the image is
// at least that long, since only an aligned range can be backed by huge
// pages (tmpfs THP, hugetlbfs, pages collapsed by HugePages).

const hugeAlign = 2 << 20

// mapFile maps length bytes of fd read-only. populate prefaults them.
func mapFile(fd int, length uint64, populate bool) ([]byte, error) {
	flags := unix.MAP_SHARED
	if populate {
		flags |= unix.MAP_POPULATE
	}
	if length < hugeAlign {
		return unix.Mmap(fd, 0, int(length), unix.PROT_READ, flags)
	}
	// Reserve length + 2 MiB of address space, map the file over its aligned
	// part, give the slack back.
	span := uintptr(length) + hugeAlign
	r, err := unix.MmapPtr(-1, 0, nil, span, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	skip := (hugeAlign - uintptr(r)%hugeAlign) % hugeAlign
	a := unsafe.Add(r, skip)
	if _, err := unix.MmapPtr(fd, 0, a, uintptr(length), unix.PROT_READ, flags|unix.MAP_FIXED); err != nil {
		// A file whose pages need more alignment (hugetlbfs with 1 GiB
		// pages): let the kernel place it.
		_ = unix.MunmapPtr(r, span)
		p, err := unix.MmapPtr(fd, 0, nil, uintptr(length), unix.PROT_READ, flags)
		if err != nil {
			return nil, err
		}
		return unsafe.Slice((*byte)(p), length), nil
	}
	if skip > 0 {
		_ = unix.MunmapPtr(r, skip)
	}
	if tail := span - skip - uintptr(length); tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(a, length), tail)
	}
	return unsafe.Slice((*byte)(a), length), nil
}

// advise gives an image's mapping the C reader's advice
// (shmkv_open_file): MADV_HUGEPAGE, before the first fault, so that a cold
// image on a filesystem with large folios (ext4, xfs) is read into 2 MiB
// folios, which the mapping then maps with 2 MiB entries. Advice: errors
// ignored.
func advise(mem []byte) {
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
}

// populate prefaults mem, a mapping of fd, after advise: MADV_POPULATE_READ
// (Linux 5.14) faults under the advice, where MAP_POPULATE at mmap would
// read a cold image in small folios before it. On an older kernel the file
// is mapped again with MAP_POPULATE and mem goes. Failures of the prefault
// itself are ignored, as MAP_POPULATE's are. It returns the mapping to use.
func populate(fd int, mem []byte) []byte {
	if err := unix.Madvise(mem, unix.MADV_POPULATE_READ); err != unix.EINVAL {
		return mem
	}
	m, err := mapFile(fd, uint64(len(mem)), true)
	if err != nil {
		return mem // keep the unpopulated mapping
	}
	unmapFile(mem)
	advise(m)
	return m
}

// unmapFile undoes mapFile.
func unmapFile(mem []byte) {
	if len(mem) < hugeAlign {
		_ = unix.Munmap(mem)
		return
	}
	_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(mem)), uintptr(len(mem)))
}

// collapse backs mem with huge pages now (MADV_COLLAPSE, Linux 6.1+): files
// on tmpfs whatever shmem_enabled says, read-only files elsewhere where the
// kernel has CONFIG_READ_ONLY_THP_FOR_FS. Where the kernel refuses, the
// image stays on small pages (the C reader's SHMKV_OPEN_HUGEPAGES).
func collapse(mem []byte) {
	_ = unix.Madvise(mem, unix.MADV_COLLAPSE)
}
