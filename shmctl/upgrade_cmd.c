/* upgrade_cmd.c - image upgrade: a format 1 image (retired, lib/FORMAT.md
 * §15) becomes the format 2 image a fresh build of its records gives, byte
 * for byte. The options are join's (image_rebuild, join_cmd.c); the reading
 * of format 1, its checks and messages are shmkv_build_upgrade()'s
 * (builder/upgrade_v1.cc), shared with the Python package. */
#include <shmkv_build.h>

#include "image.h"

static int upgrade_one(const char *out, const char *const *in, size_t n, unsigned flags,
		       const shmkv_join_options *jo, shmkv_build_stats *st, char *why, size_t len)
{
	(void)n; /* image_rebuild passes exactly one */
	(void)flags;
	return shmkv_build_upgrade(out, in[0], jo, st, why, len);
}

int do_image_upgrade(int argc, char **argv)
{
	static const struct rebuild_verb v = {"upgrade", "one OLD image", 1, 1, false, upgrade_one};
	return image_rebuild(argc, argv, &v);
}
