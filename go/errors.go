package shmkv

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sentinel errors, one per error class of the format and the protocol
// (lib/README.md, "Errors"; the class names of tests/vectors/manifest.json).
// Every such error this package returns matches exactly one of them with
// errors.Is; most are an *Error that adds where and why (the section, the
// offset, the field). An error of the operating system (opening, mapping)
// matches none of them: it keeps its errno (errors.Is(err,
// fs.ErrNotExist), ...), and Class names it.
var (
	ErrNotFound  = errors.New("shmkv: key not found")
	ErrType      = errors.New("shmkv: value has a different type")
	ErrMagic     = errors.New("shmkv: not a shmkv image (bad magic)")
	ErrVersion   = errors.New("shmkv: unsupported image format version")
	ErrLayout    = errors.New("shmkv: image layout hash does not match this reader")
	ErrTruncated = errors.New("shmkv: image is truncated")
	ErrChecksum  = errors.New("shmkv: checksum mismatch")
	ErrCorrupt   = errors.New("shmkv: image structure is corrupt")
	ErrKeyLen    = errors.New("shmkv: key too long")
	ErrProto     = errors.New("shmkv: control segment protocol mismatch")
	// ErrBase: a delta read with an image it does not apply to (FORMAT.md
	// §19.4): the message names both checksums.
	ErrBase  = errors.New("shmkv: delta does not apply to this image")
	ErrStale = errors.New("shmkv: cache dropped or control segment replaced: attach again")
	// ErrAgain: nothing is published yet, or the loader is mid-publish (or
	// died in one); try again later (the C reader's -EAGAIN).
	ErrAgain = errors.New("shmkv: nothing published, or a publish in progress: try again")
	// ErrClosed: the Image, Cache or View was closed or released.
	ErrClosed = errors.New("shmkv: use of a closed image, cache or released view")
)

// Error is an error of one class (Kind, a sentinel above) with the detail
// that names what failed: errors.Is(err, ErrCorrupt) and the like work on it.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Kind.Error() + ": " + e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

func errf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// detail is err's message without its class (for an error nested in
// another of the same class).
func detail(err error) string {
	if e, ok := err.(*Error); ok {
		return e.Msg
	}
	return err.Error()
}

// Class names the error class of err, for every error this package
// returns: "OK" for nil; the C reader's name for the format's and the
// protocol's classes, as the vectors' manifest spells them
// ("SHMKV_ECORRUPT", ...; "EAGAIN" and "ECLOSED" for ErrAgain and
// ErrClosed); for an error of the operating system (a missing file, a
// permission, a failed mmap) the name of its errno ("ENOENT", "EACCES",
// "EPERM", "EINVAL", "ELOOP", ...), which errors.Is also matches against
// fs.ErrNotExist and fs.ErrPermission. "UNKNOWN" only for an error that
// did not come from this package.
func Class(err error) string {
	if err == nil {
		return "OK"
	}
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return fmt.Sprintf("errno %d", int(errno))
	}
	for _, c := range osClasses { // the io/fs sentinels without an errno
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "UNKNOWN"
}

var classes = []struct {
	err  error
	name string
}{
	{ErrNotFound, "SHMKV_ENOTFOUND"}, {ErrType, "SHMKV_ETYPE"}, {ErrMagic, "SHMKV_EMAGIC"},
	{ErrVersion, "SHMKV_EVERSION"}, {ErrLayout, "SHMKV_ELAYOUT"},
	{ErrTruncated, "SHMKV_ETRUNCATED"}, {ErrChecksum, "SHMKV_ECHECKSUM"},
	{ErrCorrupt, "SHMKV_ECORRUPT"}, {ErrKeyLen, "SHMKV_EKEYLEN"}, {ErrProto, "SHMKV_EPROTO"},
	{ErrStale, "SHMKV_ESTALE"}, {ErrBase, "SHMKV_EBASE"}, {ErrAgain, "EAGAIN"}, {ErrClosed, "ECLOSED"},
}

var osClasses = []struct {
	err  error
	name string
}{
	{fs.ErrNotExist, "ENOENT"}, {fs.ErrPermission, "EACCES"}, {fs.ErrExist, "EEXIST"},
	{fs.ErrInvalid, "EINVAL"}, {fs.ErrClosed, "ECLOSED"},
}
