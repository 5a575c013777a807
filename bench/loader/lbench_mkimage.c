/* lbench_mkimage.c - build a benchmark image with the builder C API.
 *
 * Usage: lbench_mkimage OUT (--size SIZE | --keys N) [--value-size V] [--tag T]
 *
 * Keys key_<i> (i from 0) with V-byte values (bytes; pseudo-random, derived
 * from the tag and i, so two tags give different images), plus __gen_tag (the
 * tag, string) and __n (the key count, i64). --size picks the key count so
 * that the values alone fill SIZE bytes (the image is a little bigger).
 * Prints one line: path, bytes, keys, seconds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lbench_util.h"
#include "shmkv.h"
#include "shmkv_build.h"

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

int main(int argc, char **argv)
{
	const char *out = NULL, *tag = "a";
	uint64_t size = 0, keys = 0, vsize = 2040;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--size") && i + 1 < argc)
			size = lb_parse_size(argv[++i]);
		else if (!strcmp(argv[i], "--keys") && i + 1 < argc)
			keys = lb_parse_size(argv[++i]);
		else if (!strcmp(argv[i], "--value-size") && i + 1 < argc)
			vsize = lb_parse_size(argv[++i]);
		else if (!strcmp(argv[i], "--tag") && i + 1 < argc)
			tag = argv[++i];
		else if (argv[i][0] != '-' && !out)
			out = argv[i];
		else
			lb_die("usage: %s OUT (--size SIZE | --keys N) [--value-size V] [--tag T]",
			       argv[0]);
	}
	if (!out || (!size == !keys) || vsize < 8 || vsize > 65536)
		lb_die("usage: %s OUT (--size SIZE | --keys N) [--value-size V (8..64K)] [--tag T]",
		       argv[0]);
	if (size)
		keys = (size + vsize - 1) / vsize;

	shmkv_build_options o;
	if (shmkv_build_options_init(&o))
		lb_die("shmkv_build_options_init failed");
	o.dedup = 0; /* every value differs: skip the hashing */
	o.created = 1700000000;
	snprintf(o.name, sizeof o.name, "lbench-%s", tag);
	o.fixed |= SHMKV_OPT_DEDUP | SHMKV_OPT_CREATED | SHMKV_OPT_NAME;
	shmkv_builder *b = NULL;
	int err = shmkv_builder_new(&o, &b);
	if (err)
		lb_die("shmkv_builder_new: %s", shmkv_strerror(err));
	uint64_t seed = 0;
	for (const char *t = tag; *t; t++)
		seed = seed * 131 + (uint8_t)*t;
	uint8_t *v = malloc(vsize + 8);
	if (!v)
		lb_die("out of memory");
	uint64_t t0 = lb_now_ns(CLOCK_MONOTONIC);
	char k[32];
	for (uint64_t i = 0; i < keys && !err; i++) {
		size_t kl = lb_key(k, i);
		uint64_t s = seed ^ (i * UINT64_C(0x2545f4914f6cdd1d));
		for (uint64_t j = 0; j < vsize; j += 8) {
			uint64_t r = splitmix64(&s);
			memcpy(v + j, &r, 8);
		}
		err = shmkv_builder_add_bytes(b, k, kl, v, vsize);
	}
	if (!err)
		err = shmkv_builder_add_str(b, "__gen_tag", 9, tag, strlen(tag));
	if (!err)
		err = shmkv_builder_add_i64(b, "__n", 3, (int64_t)keys);
	shmkv_build_stats st;
	if (!err)
		err = shmkv_builder_finish(b, out, &st);
	if (err)
		lb_die("%s: %s: %s", out, shmkv_strerror(err), shmkv_builder_error(b));
	shmkv_builder_free(b);
	free(v);
	printf("image %s bytes=%llu keys=%llu seconds=%.1f\n", out,
	       (unsigned long long)st.image_bytes, (unsigned long long)keys,
	       (double)(lb_now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
	return 0;
}
