package shmkv

import (
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"
)

// The key hash must equal xxHash's XXH3_64bits_withSeed bit for bit. These
// values were computed by the C library (libxxhash 0.8.1, Debian 12) with
// the program in this comment, over buf[i] = i*131+7, every length class of
// XXH3 (0, 1-3, 4-8, 9-16, 17-128, 129-240, >240 with its stripes and
// blocks) and three seeds:
//
//	for each seed s, length l: printf(XXH3_64bits_withSeed(buf, l, s))
//	(cc -O2 xxgen.c -lxxhash; the generator is /tmp-only, not kept)
var xxh3Vectors = []struct {
	n    int
	seed uint64
	want uint64
}{
	{0, 0, 0x2d06800538d394c2},
	{1, 0, 0x4c5cca45d0f4811f},
	{2, 0, 0x29c60963cbfa4e6e},
	{3, 0, 0x6e3e2670e61106ac},
	{4, 0, 0x5c4c63133443d03f},
	{5, 0, 0x49f5eb3111280b63},
	{7, 0, 0x46a5c724d51fe43f},
	{8, 0, 0xf9fd4dd0b04d78f5},
	{9, 0, 0x7c20df9712c26edf},
	{15, 0, 0xb345a7b2698ba575},
	{16, 0, 0x86abf6baccea0858},
	{17, 0, 0xb58bf5dc5022d071},
	{31, 0, 0x48442fcd5518b086},
	{32, 0, 0xe3712ed84c04a66e},
	{33, 0, 0xa4dee99b093e1f73},
	{63, 0, 0x30ca01f63dcc223b},
	{64, 0, 0x1291d2d4042330dd},
	{65, 0, 0x97c6bf83217e5ec9},
	{100, 0, 0x5da67eac6d4093d5},
	{127, 0, 0xed4cf62104020db5},
	{128, 0, 0x10d17f72c0ccba41},
	{129, 0, 0x1648bdc3db49d1a2},
	{200, 0, 0xc0fbc0f4e181c826},
	{239, 0, 0xf0d154819adb16cd},
	{240, 0, 0xb6cfaf343fab81e6},
	{241, 0, 0x956cae592c67279e},
	{255, 0, 0x64a6073025eb7929},
	{256, 0, 0xb15e550733c5dfac},
	{257, 0, 0x87b3bf2d941cf085},
	{511, 0, 0x5a17da924907228a},
	{512, 0, 0xa0e9790eb93990d7},
	{1023, 0, 0xa94ffcd2254368e4},
	{1024, 0, 0x70bd377d9574f4bb},
	{1025, 0, 0x66c4487c41e127a7},
	{2048, 0, 0x8b46caa67dab3a30},
	{0, 0x53484d4b56763121, 0xc8e717b1f5039e27},
	{1, 0x53484d4b56763121, 0x98e4b64ae7987e8d},
	{2, 0x53484d4b56763121, 0x450fd5366c24bf59},
	{3, 0x53484d4b56763121, 0x9f13d63ccf3101dd},
	{4, 0x53484d4b56763121, 0x3137a44b230862bf},
	{5, 0x53484d4b56763121, 0xd3f2cdcedc19c743},
	{7, 0x53484d4b56763121, 0x9182b22e286efdcb},
	{8, 0x53484d4b56763121, 0x6cb39862e0bb133a},
	{9, 0x53484d4b56763121, 0xc8450cb68b982efd},
	{15, 0x53484d4b56763121, 0xa75d498d7a72feac},
	{16, 0x53484d4b56763121, 0xa710a27ef1f9608d},
	{17, 0x53484d4b56763121, 0xde047daaeaff2889},
	{31, 0x53484d4b56763121, 0xfb1f9e34e2f0778a},
	{32, 0x53484d4b56763121, 0xcbbaaf46cc7d0c51},
	{33, 0x53484d4b56763121, 0x9b6fb9c6ca010318},
	{63, 0x53484d4b56763121, 0x1b96e207633eca49},
	{64, 0x53484d4b56763121, 0x70f4b6501ebc5ff3},
	{65, 0x53484d4b56763121, 0x9892ce42975623f9},
	{100, 0x53484d4b56763121, 0xfe5044272c16f4d3},
	{127, 0x53484d4b56763121, 0x478dbba3cb7c55a2},
	{128, 0x53484d4b56763121, 0xdc6cfe977b67076e},
	{129, 0x53484d4b56763121, 0x30a694aa75ad1a4e},
	{200, 0x53484d4b56763121, 0x7a908abc3d085481},
	{239, 0x53484d4b56763121, 0x2c7bec4d6758d40c},
	{240, 0x53484d4b56763121, 0xf9fa4b7a814b180},
	{241, 0x53484d4b56763121, 0x3fe0e498074cf25c},
	{255, 0x53484d4b56763121, 0x38e9ba52c4e1a8b},
	{256, 0x53484d4b56763121, 0x6b3d08eb449b3de4},
	{257, 0x53484d4b56763121, 0x253c47690a1fea3d},
	{511, 0x53484d4b56763121, 0x675303afc9035364},
	{512, 0x53484d4b56763121, 0x8606a456e947ba3d},
	{1023, 0x53484d4b56763121, 0x559a73c69fc4441a},
	{1024, 0x53484d4b56763121, 0xedcae12851ad97e},
	{1025, 0x53484d4b56763121, 0x42bf05b54590bd25},
	{2048, 0x53484d4b56763121, 0xf6fe89fe40bc2ef0},
	{0, 0xffffffffffffffff, 0x4c093276ae47a555},
	{1, 0xffffffffffffffff, 0x36ce6de3f8ce2550},
	{2, 0xffffffffffffffff, 0x3c22fbf2e52c4222},
	{3, 0xffffffffffffffff, 0x4e704406273a2f10},
	{4, 0xffffffffffffffff, 0x7d3c976072267e11},
	{5, 0xffffffffffffffff, 0xf9ce6a22e619e421},
	{7, 0xffffffffffffffff, 0xd6dda6d227cb596b},
	{8, 0xffffffffffffffff, 0xcdb415eadb92d8c2},
	{9, 0xffffffffffffffff, 0xdaa24bb15e66f8c7},
	{15, 0xffffffffffffffff, 0xf2193b528742d238},
	{16, 0xffffffffffffffff, 0x3f0451510585cff3},
	{17, 0xffffffffffffffff, 0x397bbd722a5d5277},
	{31, 0xffffffffffffffff, 0x6194ca176ff896bb},
	{32, 0xffffffffffffffff, 0xcb9caa178b185b77},
	{33, 0xffffffffffffffff, 0x52b233361d732e92},
	{63, 0xffffffffffffffff, 0x23a9e04657203f05},
	{64, 0xffffffffffffffff, 0xf6ff5ad357d38ec6},
	{65, 0xffffffffffffffff, 0x8983ca26f86872b1},
	{100, 0xffffffffffffffff, 0xed43279628b1b311},
	{127, 0xffffffffffffffff, 0x493ed38bdabbf626},
	{128, 0xffffffffffffffff, 0x8ceb4f7c4cebff08},
	{129, 0xffffffffffffffff, 0x7706f67ef1f6cba6},
	{200, 0xffffffffffffffff, 0xf59f5dded5a53545},
	{239, 0xffffffffffffffff, 0xfbdfcb70df9a1a3f},
	{240, 0xffffffffffffffff, 0x44c6095d221569f6},
	{241, 0xffffffffffffffff, 0xc895ed9e580244d6},
	{255, 0xffffffffffffffff, 0x7cf75a595a30b0f7},
	{256, 0xffffffffffffffff, 0x72dbbc40bb89f1ea},
	{257, 0xffffffffffffffff, 0x514d710244f74dcd},
	{511, 0xffffffffffffffff, 0xbdeeeb936f71c7fa},
	{512, 0xffffffffffffffff, 0x5460f9644d7b0eb7},
	{1023, 0xffffffffffffffff, 0x74791d4aea824bbc},
	{1024, 0xffffffffffffffff, 0xcbb7e3e786ba8e7d},
	{1025, 0xffffffffffffffff, 0x48b8f100bc047e95},
	{2048, 0xffffffffffffffff, 0x3a21763408c86ba7},
}

func TestXXH3MatchesC(t *testing.T) {
	var buf [2048]byte
	for i := range buf {
		buf[i] = byte(i*131 + 7)
	}
	for _, v := range xxh3Vectors {
		if got := xxh3.HashSeed(buf[:v.n], v.seed); got != v.want {
			t.Errorf("XXH3(%d bytes, seed %#x) = %#x, C says %#x", v.n, v.seed, got, v.want)
		}
		if v.seed == 0 {
			if got := xxh3.Hash(buf[:v.n]); got != v.want {
				t.Errorf("XXH3(%d bytes) = %#x, C says %#x", v.n, got, v.want)
			}
		}
	}
}

// The layout description hashes to the layout hash (FORMAT.md §15), and
// the worked key hashes of FORMAT.md (default seed): hash, home, tag.
func TestFormatExamples(t *testing.T) {
	if len(layoutDesc) != 1127 || xxh3.HashString(layoutDesc) != layoutHash {
		t.Fatalf("layout description: %d bytes, hash %#x", len(layoutDesc), xxh3.HashString(layoutDesc))
	}
	if xxh3.Hash(nil) != 0x2d06800538d394c2 {
		t.Fatal("XXH3 of no bytes")
	}
	im := &image{seed: 0x53484d4b56763121, hashBits: 64, bucketCount: 2}
	for _, c := range []struct {
		key     string
		h, home uint64
		tag     uint64
	}{
		{"k9", 0x0c6af6e50cb3e5ac, 0, 0xe5ac},
		{"k10", 0xf8cf9a0de233a440, 1, 0xa440},
		{"k137", 0xee4864023170e757, 1, 0xe757},
		{"greeting", 0x9020d61fe8ac6289, 1, 0x6289},
	} {
		h := im.hash([]byte(c.key))
		if h != c.h || im.home(h) != c.home || tagOf(h) != c.tag {
			t.Errorf("%s: h %#x home %d tag %#x", c.key, h, im.home(h), tagOf(h))
		}
	}
	if tagOf(0x10000) != 1 {
		t.Error("a zero tag must become 1")
	}
}

// The inlined 9-to-16-byte case of the key hash equals the library's
// XXH3_64bits_withSeed (itself held to C by TestXXH3MatchesC) for every
// length it serves, random bytes and seeds, and the C vectors of its lengths.
func TestXXH3Len9To16(t *testing.T) {
	var buf [2048]byte
	for i := range buf {
		buf[i] = byte(i*131 + 7)
	}
	seen := 0
	for _, v := range xxh3Vectors {
		if v.n > 8 && v.n <= 16 {
			seen++
			if got := xxh3Len9To16(buf[:v.n], v.seed); got != v.want {
				t.Errorf("xxh3Len9To16(%d bytes, seed %#x) = %#x, C says %#x", v.n, v.seed, got, v.want)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no C vector of 9 to 16 bytes")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		n := 9 + rng.IntN(8)
		key := make([]byte, n)
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		seed := rng.Uint64()
		if i%4 == 0 {
			seed = 0
		}
		if got, want := xxh3Len9To16(key, seed), xxh3.HashSeed(key, seed); got != want {
			t.Fatalf("xxh3Len9To16(%x, %#x) = %#x, the library %#x", key, seed, got, want)
		}
	}
}
