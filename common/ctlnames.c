/* ctlnames.c - see ctlnames.h. */
#include "ctlnames.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmkv.h>

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void ctlnames_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int ctlnames_list(const char *root, char ***out, size_t *nout)
{
	DIR *d = opendir(root);
	if (!d)
		return -errno;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int err = 0;
	for (struct dirent *e; (e = readdir(d));) {
		size_t l = strlen(e->d_name);
		if (l <= 4 || l - 4 > SHMKV_CACHE_NAME_MAX || strcmp(e->d_name + l - 4, ".ctl"))
			continue;
		char name[SHMKV_CACHE_NAME_MAX + 1];
		snprintf(name, sizeof name, "%.*s", (int)(l - 4), e->d_name);
		if (shmkv_name_check(name))
			continue; /* the loader's temporary files start with '.' */
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			char **nn = realloc(names, cap * sizeof *nn);
			if (!nn) {
				err = -ENOMEM;
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(name))) {
			err = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (err) {
		ctlnames_free(names, n);
		return err;
	}
	if (n)
		qsort(names, n, sizeof *names, by_name);
	*out = names;
	*nout = n;
	return 0;
}
