/* segment.c - create, back, name and inspect segment files. */
#include "segment.h"
#include "segname.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define HUGETLBFS_MAGIC_ 0x958458f6

void seg_prefix(const char *root, char *out, size_t len)
{
	segname_root_prefix(root, out, len); /* the naming rule lives in common/segname.h */
}

int seg_parse(const char *file, const char *prefix, char *cache, size_t cache_len,
	      uint64_t *load_id, int *loading)
{
	size_t pl = strlen(prefix), n = strlen(file);
	if (n <= pl || strncmp(file, prefix, pl))
		return -EINVAL;
	const char *rest = file + pl;
	n -= pl;
	*loading = 0;
	size_t sl = strlen(SEG_LOADING_SUFFIX);
	if (n > sl && !strcmp(rest + n - sl, SEG_LOADING_SUFFIX)) {
		*loading = 1;
		n -= sl;
	}
	size_t d = n;
	while (d > 0 && rest[d - 1] >= '0' && rest[d - 1] <= '9')
		d--;
	if (d == n || d < 2 || rest[d - 1] != '-' || n - d > 19)
		return -EINVAL;
	if (d - 1 >= cache_len)
		return -EINVAL;
	memcpy(cache, rest, d - 1);
	cache[d - 1] = 0;
	*load_id = strtoull(rest + d, NULL, 10);
	return 0;
}

int seg_create(struct seg *s, const char *dir, int hugetlb, uint64_t page_size,
	       const char *prefix, const char *cache, uint64_t load_id, uint64_t size, mode_t mode,
	       gid_t gid, char *why, size_t why_len)
{
	int err = 0;
	memset(s, 0, sizeof *s);
	s->fd = -1;
	struct seg_info *in = &s->info;
	if ((size_t)snprintf(in->path, sizeof in->path, "%s/%s%s-%llu", dir, prefix, cache,
			     (unsigned long long)load_id) >= sizeof in->path)
		return shmkv__fail(-ENAMETOOLONG, why, why_len,
				   "segment path in %s longer than the control segment's %u bytes",
				   dir, SHMKV_CTL_PATH_MAX - 1);
	snprintf(s->tmp, sizeof s->tmp, "%s%s", in->path, SEG_LOADING_SUFFIX);
	in->load_id = load_id;
	in->size = size;
	in->page_size = page_size;
	in->map_size = (size + page_size - 1) / page_size * page_size;
	in->flags = hugetlb ? SHMKV_SEG_HUGETLB : 0;
	s->fd = open(s->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (s->fd < 0) {
		err = -errno;
		return shmkv__fail(err, why, why_len, "%s: %s", s->tmp, strerror(-err));
	}
	if (fchmod(s->fd, mode) != 0 || (gid != (gid_t)-1 && fchown(s->fd, (uid_t)-1, gid) != 0)) {
		err = -errno;
		shmkv__fail(err, why, why_len, "%s: set mode/group: %s", s->tmp, strerror(-err));
		goto fail;
	}
	if (ftruncate(s->fd, (off_t)in->map_size) != 0) {
		err = -errno;
		shmkv__fail(err, why, why_len, "%s: ftruncate %llu: %s", s->tmp,
			    (unsigned long long)in->map_size, strerror(-err));
		goto fail;
	}
	/* hugetlbfs: the MAP_SHARED mmap below reserves every huge page of the
	 * file (ENOMEM when short), so faults during the load cannot fail, and
	 * the pages are zeroed as the reads reach them rather than all up front.
	 * tmpfs: posix_fallocate takes the memory now (ENOSPC when short). */
	if (!hugetlb) {
		err = -posix_fallocate(s->fd, 0, (off_t)in->map_size);
		if (err) {
			shmkv__fail(err, why, why_len, "%s: fallocate %llu: %s", s->tmp,
				    (unsigned long long)in->map_size, strerror(-err));
			goto fail;
		}
	}
	void *m = mmap(NULL, (size_t)in->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (m == MAP_FAILED) {
		err = -errno;
		shmkv__fail(err, why, why_len, "%s: mmap %llu: %s", s->tmp,
			    (unsigned long long)in->map_size, strerror(-err));
		goto fail;
	}
	s->map = m;
	return 0;
fail:
	close(s->fd);
	s->fd = -1;
	unlink(s->tmp);
	return err;
}

int seg_commit(struct seg *s, char *why, size_t why_len)
{
	int err = 0;
	munmap(s->map, (size_t)s->info.map_size);
	s->map = NULL;
	close(s->fd);
	s->fd = -1;
	if (rename(s->tmp, s->info.path) != 0) {
		err = -errno;
		shmkv__fail(err, why, why_len, "rename %s: %s", s->tmp, strerror(-err));
		unlink(s->tmp);
	}
	return err;
}

void seg_discard(struct seg *s)
{
	if (s->map)
		munmap(s->map, (size_t)s->info.map_size);
	s->map = NULL;
	if (s->fd >= 0) {
		close(s->fd);
		unlink(s->tmp);
	}
	s->fd = -1;
}

int seg_inspect(const char *path_in, struct seg_info *in, char *why, size_t why_len)
{
	int err;
	char path[SHMKV_CTL_PATH_MAX]; /* path_in may be in->path */
	size_t plen = strlen(path_in);
	if (plen >= sizeof path)
		return shmkv__fail(-ENAMETOOLONG, why, why_len, "%s: path too long", path_in);
	memcpy(path, path_in, plen + 1);
	memset(in, 0, sizeof *in);
	memcpy(in->path, path, plen + 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		return shmkv__fail(err, why, why_len, "%s: %s", path, strerror(-err));
	}
	struct stat st;
	struct statfs sf;
	if (fstat(fd, &st) != 0 || fstatfs(fd, &sf) != 0) {
		err = -errno;
		close(fd);
		return shmkv__fail(err, why, why_len, "%s: %s", path, strerror(-err));
	}
	in->flags = (unsigned long)sf.f_type == HUGETLBFS_MAGIC_ ? SHMKV_SEG_HUGETLB : 0;
	in->page_size = in->flags ? (uint64_t)sf.f_bsize : (uint64_t)sysconf(_SC_PAGESIZE);
	in->map_size = (uint64_t)st.st_size;
	if (!S_ISREG(st.st_mode) || in->map_size < SHMKV_HEADER_SIZE ||
	    in->map_size % in->page_size) {
		close(fd);
		return shmkv__fail(SHMKV_ETRUNCATED, why, why_len,
				   "%s: %llu bytes: not a whole image segment", path,
				   (unsigned long long)in->map_size);
	}
	void *m = mmap(NULL, (size_t)in->map_size, PROT_READ, MAP_SHARED, fd, 0);
	err = m == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err)
		return shmkv__fail(err, why, why_len, "%s: mmap: %s", path, strerror(-err));
	const shmkv_image_header *h = m;
	uint64_t size = h->file_size;
	if (size < SHMKV_HEADER_SIZE || size > in->map_size) {
		munmap(m, (size_t)in->map_size);
		return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
				   "%s: image header says %llu bytes, the file has %llu", path,
				   (unsigned long long)size, (unsigned long long)in->map_size);
	}
	char reason[256];
	err = shmkv_image_check(m, size, SHMKV_OPEN_NOVERIFY, reason, sizeof reason);
	if (!err) {
		in->size = size;
		in->entries = h->entry_count;
	}
	munmap(m, (size_t)in->map_size);
	if (err)
		return shmkv__fail(err, why, why_len, "%s: %s", path, reason);
	const char *base = strrchr(path, '/');
	const char *dash = strrchr(base ? base : path, '-');
	in->load_id = dash ? strtoull(dash + 1, NULL, 10) : 0;
	return 0;
}

shmkv_ctl_segment seg_ctl_entry(const struct seg_info *in)
{
	shmkv_ctl_segment cs;
	memset(&cs, 0, sizeof cs);
	cs.node = -1;
	cs.flags = in->flags;
	cs.size = in->size;
	cs.map_size = in->map_size;
	cs.page_size = in->page_size;
	snprintf(cs.path, sizeof cs.path, "%s", in->path);
	return cs;
}
