// Command modelreader is the Go reader of the writes model test
// (tests/model/README.md): a Cache attached to a cache served by
// shmkv-loader for the whole run, answering the driver's commands on
// stdin, one reply line each (tests/model/model_reader.c has the list):
// keys, check GEN MS, iter, dump, dumpiter, quit. A check pins a View:
// its Gets, GetBatch and Expires, and the iter after it, read that one
// generation. Not part of the package's API: a test program.
package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	shmkv "github.com/shmkv/shmkv/go"
)

type answer struct {
	present bool
	value   []byte
	expires uint32
}

type entry struct {
	key, value []byte
	expires    uint32
}

type reader struct {
	root, name string
	cache      *shmkv.Cache
	view       *shmkv.View // pinned by the last check
	keys       []string
	answers    []answer
	entries    []entry
}

// field is LEN:BYTES, as the driver hashes it.
func field(b []byte) []byte {
	return append([]byte(strconv.Itoa(len(b))+":"), b...)
}

// follow refreshes (attaching again after ErrStale) until the generation
// is at least gen, for ms milliseconds at most.
func (r *reader) follow(gen uint64, ms int) error {
	end := time.Now().Add(time.Duration(ms) * time.Millisecond)
	var last error
	for {
		if r.cache == nil {
			c, err := shmkv.Attach(r.name, r.root)
			if err == nil {
				r.cache = c
			}
			last = err
		} else {
			_, err := r.cache.Refresh()
			if errors.Is(err, shmkv.ErrStale) { // the protocol 1 file retired: attach again
				r.cache.Close()
				r.cache = nil
				continue
			}
			last = err
		}
		if r.cache != nil && r.cache.Generation() >= gen {
			return nil
		}
		if time.Now().After(end) {
			have := uint64(0)
			if r.cache != nil {
				have = r.cache.Generation()
			}
			return fmt.Errorf("no generation %d within %d ms (at %d): %v", gen, ms, have, last)
		}
		time.Sleep(time.Millisecond)
	}
}

func (r *reader) check(gen uint64, ms int) (string, error) {
	if r.view != nil {
		r.view.Release()
		r.view = nil
	}
	if err := r.follow(gen, ms); err != nil {
		return "", err
	}
	v, err := r.cache.Pin()
	if err != nil {
		return "", err
	}
	r.view = v
	vals, errs := make([]shmkv.Value, len(r.keys)), make([]error, len(r.keys))
	v.GetBatch(r.keys, vals, errs)
	crc, present := crc32.NewIEEE(), 0
	r.answers = r.answers[:0]
	for i, k := range r.keys {
		val, err := v.Get(k)
		if err != nil && !errors.Is(err, shmkv.ErrNotFound) {
			return "", fmt.Errorf("key %d: Get: %w", i, err)
		}
		if (err == nil) != (errs[i] == nil) || err == nil && !bytes.Equal(val.Raw(), vals[i].Raw()) {
			return "", fmt.Errorf("key %d: GetBatch answers %v, Get %v", i, errs[i], err)
		}
		if err != nil {
			r.answers = append(r.answers, answer{})
			crc.Write([]byte("-\n"))
			continue
		}
		text, err := val.TextBytes()
		if err != nil {
			return "", fmt.Errorf("key %d: %w", i, err)
		}
		exp, err := v.Expires(k)
		if err != nil {
			return "", fmt.Errorf("key %d: Expires: %w", i, err)
		}
		r.answers = append(r.answers, answer{true, text, exp})
		crc.Write(field(text))
		crc.Write([]byte("," + strconv.FormatUint(uint64(exp), 10) + "\n"))
		present++
	}
	return fmt.Sprintf("ok %d %08x %d", v.Generation(), crc.Sum32(), present), nil
}

func (r *reader) iterate() (string, error) {
	if r.view == nil {
		return "", errors.New("iter before check")
	}
	r.entries = r.entries[:0]
	for e, err := range r.view.Entries() {
		if err != nil {
			return "", fmt.Errorf("iteration: %w", err)
		}
		text, err := e.Value.TextBytes()
		if err != nil {
			return "", fmt.Errorf("iteration: %w", err)
		}
		r.entries = append(r.entries, entry{e.Key, text, e.Expires})
	}
	slices.SortFunc(r.entries, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
	crc := crc32.NewIEEE()
	for i, e := range r.entries {
		if i > 0 && bytes.Equal(r.entries[i-1].key, e.key) {
			return "", errors.New("iteration yields a key twice")
		}
		crc.Write(field(e.key))
		crc.Write(field(e.value))
		crc.Write([]byte("," + strconv.FormatUint(uint64(e.expires), 10) + "\n"))
	}
	return fmt.Sprintf("ok %d %08x %d", r.view.Generation(), crc.Sum32(), len(r.entries)), nil
}

func (r *reader) generation() uint64 {
	if r.view == nil {
		return 0
	}
	return r.view.Generation()
}

func (r *reader) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ok %d", r.generation())
	for _, a := range r.answers {
		if !a.present {
			b.WriteString(" -")
			continue
		}
		fmt.Fprintf(&b, " %s,%d", hex.EncodeToString(a.value), a.expires)
	}
	return b.String()
}

func (r *reader) dumpiter() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ok %d", r.generation())
	for _, e := range r.entries {
		fmt.Fprintf(&b, " %s,%s,%d", hex.EncodeToString(e.key), hex.EncodeToString(e.value), e.expires)
	}
	return b.String()
}

func (r *reader) command(words []string) (string, error) {
	switch {
	case len(words) >= 1 && words[0] == "keys":
		r.keys = r.keys[:0]
		for _, w := range words[1:] {
			k, err := hex.DecodeString(w)
			if err != nil {
				return "", err
			}
			r.keys = append(r.keys, string(k))
		}
		return fmt.Sprintf("ok %d", len(r.keys)), nil
	case len(words) == 3 && words[0] == "check":
		gen, err := strconv.ParseUint(words[1], 10, 64)
		if err != nil {
			return "", err
		}
		ms, err := strconv.Atoi(words[2])
		if err != nil {
			return "", err
		}
		return r.check(gen, ms)
	case len(words) == 1 && words[0] == "iter":
		return r.iterate()
	case len(words) == 1 && words[0] == "dump":
		return r.dump(), nil
	case len(words) == 1 && words[0] == "dumpiter":
		return r.dumpiter(), nil
	}
	return "", fmt.Errorf("unknown command %q", strings.Join(words, " "))
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: modelreader ROOT CACHE (commands on stdin: tests/model/README.md)")
		os.Exit(2)
	}
	r := &reader{root: os.Args[1], name: os.Args[2]}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			break
		}
		words := strings.Fields(line)
		if len(words) == 1 && words[0] == "quit" {
			break
		}
		reply, err := r.command(words)
		if err != nil {
			reply = "error " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		out.WriteString(reply + "\n")
		out.Flush()
	}
	if r.view != nil {
		r.view.Release()
	}
	if r.cache != nil {
		r.cache.Close()
	}
}
