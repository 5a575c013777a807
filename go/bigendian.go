//go:build armbe || arm64be || m68k || mips || mips64 || mips64p32 || ppc || ppc64 || s390 || s390x || shbe || sparc || sparc64

package shmkv

// Images are little-endian and read in place (lib/FORMAT.md §2), as the C
// reader does: a big-endian host does not compile this package.
var _ = bigEndianHostsAreNotSupported
