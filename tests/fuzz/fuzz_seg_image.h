/* fuzz_seg_image.h - the image fuzz_ctl attaches to, built the same way by
 * the target and by the corpus generator (fuzz_corpus.c), so that the seed
 * control segments carry its exact size. */
#ifndef SHMKV_FUZZ_SEG_IMAGE_H
#define SHMKV_FUZZ_SEG_IMAGE_H

#include <stdio.h>

#include "shmkv_build.h"

static inline int fuzz_build_seg_image(const char *path)
{
	shmkv_build_options o;
	shmkv_builder *b;
	if (shmkv_build_options_init(&o) != 0)
		return -1;
	o.created = 1;
	o.fixed |= SHMKV_OPT_CREATED;
	if (shmkv_builder_new(&o, &b) != 0)
		return -1;
	char key[32];
	for (int i = 0; i < 40; i++) {
		int n = snprintf(key, sizeof key, "key:%d", i);
		if (shmkv_builder_add_i64(b, key, (size_t)n, i) != 0) {
			shmkv_builder_free(b);
			return -1;
		}
	}
	int err = shmkv_builder_finish(b, path, NULL);
	shmkv_builder_free(b);
	return err;
}

#endif /* SHMKV_FUZZ_SEG_IMAGE_H */
