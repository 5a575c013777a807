package shmkv_test

import (
	"errors"
	"fmt"
	"log"

	shmkv "github.com/shmkv/shmkv/go"
)

// The users image of the first read (example/users.jsonl) and a delta of
// it (testdata/delta/: TestDeltaExampleFiles writes them with the test
// encoder, FORMAT.md §19): user:1:visits upserted to 43, user:2:name
// added, user:1:tags removed. go/README.md, "Reading through a delta",
// shows this function as it stands (TestREADMEDelta).
func ExampleImage_WithDelta() {
	base, err := shmkv.OpenFile("testdata/delta/users.shmkv", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer base.Close()
	delta, err := shmkv.OpenFile("testdata/delta/users.delta", 0) // opens as any image
	if err != nil {
		log.Fatal(err)
	}
	defer delta.Close()
	id, _ := delta.DeltaID() // what its header names: its base's checksum and size, its place in a chain
	fmt.Println("a delta of this image:", delta.IsDelta() && id.BaseChecksum == base.Checksum())

	users, err := base.WithDelta(delta) // ErrBase: a delta of another image
	if err != nil {
		log.Fatal(err)
	}
	defer users.Close() // base and delta may be closed before it: it holds both

	visits, err := users.Int64("user:1:visits") // the delta's upsert
	if err != nil {
		log.Fatal(err)
	}
	name, err := users.Text("user:2:name") // a key the delta adds
	if err != nil {
		log.Fatal(err)
	}
	emb, err := users.Float32s("user:1:embedding") // a key it does not hold: the base's
	if err != nil {
		log.Fatal(err)
	}
	_, err = users.Strings("user:1:tags") // its tombstone: absent
	fmt.Println(visits, name, emb, errors.Is(err, shmkv.ErrNotFound))

	v, err := users.Pin()
	if err != nil {
		log.Fatal(err)
	}
	defer v.Release()
	for e, err := range v.Entries() { // the delta's upserts, then the base's live entries it does not hold
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s (%s)\n", e.Key, e.Value.Type())
	}
	// Output:
	// a delta of this image: true
	// 43 Grace Hopper [0.25 -1 3.5] true
	// user:2:name (string)
	// user:1:visits (i64)
	// user:1:name (string)
	// user:1:embedding (f32list)
}
