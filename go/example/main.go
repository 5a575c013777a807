// Command example is go/README.md's first read: it opens the image named
// on its command line and reads typed values from it, copied and zero-copy.
package main

import (
	"errors"
	"fmt"
	"os"
	"slices"

	shmkv "github.com/shmkv/shmkv/go"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: example IMAGE")
		os.Exit(2)
	}
	if err := read(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err) // e.g. users.shmkv: shmkv: ...: no such file or directory
		os.Exit(1)
	}
}

func read(path string) error {
	img, err := shmkv.OpenFile(path, 0) // every check of FORMAT.md §12
	if err != nil {
		return err
	}
	defer img.Close()

	name, err := img.Text("user:1:name") // the copying getters: simple and safe
	if err != nil {
		return err
	}
	visits, err := img.Int64("user:1:visits")
	if err != nil {
		return err
	}
	tags, err := img.Strings("user:1:tags")
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d visits, tags %q\n", name, visits, tags)
	if _, err := img.Text("user:2:name"); errors.Is(err, shmkv.ErrNotFound) {
		fmt.Println("user:2:name is not there:", shmkv.Class(err))
	}

	v, err := img.Pin() // zero copy: a pinned view, valid until Release
	if err != nil {
		return err
	}
	defer v.Release()
	val, err := v.Get("user:1:embedding") // no allocation, hit or miss
	if err != nil {
		return err
	}
	emb, err := val.Float32s() // []float32 into the mapping
	if err != nil {
		return err
	}
	fmt.Println("embedding", emb)

	var keys []string
	for e, err := range v.Entries() { // live entries: the expired one is skipped
		if err != nil {
			return err
		}
		keys = append(keys, string(e.Key))
	}
	slices.Sort(keys)
	fmt.Printf("%d live entries of %d: %q\n", len(keys), v.Len(), keys)
	return nil
}
