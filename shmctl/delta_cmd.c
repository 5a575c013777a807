/* delta_cmd.c - image diff and image apply: delta images (lib/FORMAT.md §19).
 * diff writes the delta that turns OLD into NEW; apply merges a base and a
 * chain of its deltas into the image a fresh build of the merged records
 * gives, byte for byte (or, --as-delta, into one delta of the base). The
 * options are join's (image_rebuild, join_cmd.c); the work, its checks and
 * messages are shmkv_build_diff() and shmkv_build_apply()'s
 * (builder/diff.cc, builder/apply.cc), shared with the Python package. */
#include <shmkv_build.h>

#include "image.h"

static int diff_two(const char *out, const char *const *in, size_t n, unsigned flags,
		    const shmkv_join_options *jo, shmkv_build_stats *st, char *why, size_t len)
{
	(void)n; /* image_rebuild passes exactly two */
	(void)flags;
	return shmkv_build_diff(out, in[0], in[1], jo, st, why, len);
}

int do_image_diff(int argc, char **argv)
{
	static const struct rebuild_verb v = {"diff", "two images, OLD and NEW", 2, 2, false,
					      diff_two};
	return image_rebuild(argc, argv, &v);
}

static int apply_chain(const char *out, const char *const *in, size_t n, unsigned flags,
		       const shmkv_join_options *jo, shmkv_build_stats *st, char *why, size_t len)
{
	return shmkv_build_apply(out, in[0], in + 1, n - 1, (flags & REBUILD_AS_DELTA) != 0, jo, st,
				 why, len);
}

int do_image_apply(int argc, char **argv)
{
	static const struct rebuild_verb v = {"apply", "BASE and at least one DELTA", 2, SIZE_MAX,
					      true, apply_chain};
	return image_rebuild(argc, argv, &v);
}
