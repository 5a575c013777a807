/* cache_ctl.c - reading control segments (lib/PROTOCOL.md) without the
 * loader, through the reader's shmkv_ctl_open()/shmkv_ctl_read(): ctl_read()
 * for `cache readers` and the fallback of `cache list`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "ctlnames.h"
#include "diag.h"
#include "json.h"
#include "memkind.h"

int ctl_read(const char *root, const char *name, shmkv_ctl *out, char *why, size_t why_len)
{
	shmkv_ctl *ctl;
	int err = shmkv_ctl_open(root, name, 0, &ctl, why, why_len);
	if (err)
		return err;
	err = shmkv_ctl_read(ctl, out);
	if (err == -EAGAIN)
		diag_fail(err, why, why_len,
			  "%s/%s.ctl: stays mid-update (loader died while publishing?); try again",
			  root, name);
	else if (err)
		diag_fail(err, why, why_len, "%s/%s.ctl: %s", root, name, shmkv_strerror(err));
	shmkv_ctl_close(ctl);
	return err;
}

const char *fmt_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (n < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)n);
		return buf;
	}
	double v = (double)n;
	unsigned u = 0;
	while (v >= 1024 && u + 1 < sizeof units / sizeof *units) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
	return buf;
}

/* One cache's figures, as the loader's list names them. */
static void list_one(struct json *w, const char *root, const char *name)
{
	shmkv_ctl ctl;
	char why[512], mem[32];
	json_obj_begin(w, NULL);
	json_str(w, "name", name);
	int err = ctl_read(root, name, &ctl, why, sizeof why);
	if (err) {
		json_str(w, "error", why);
		json_obj_end(w);
		return;
	}
	const shmkv_ctl_segment *s = &ctl.segments[0];
	bool published = ctl.generation != 0 && ctl.segment_count > 0;
	json_u64(w, "generation", ctl.generation);
	json_bool(w, "published", published);
	json_u64(w, "image_size", published ? s->size : 0);
	json_name(w, "memory");
	if (published)
		json_str(w, NULL, memkind_name(s->flags, s->page_size, mem, sizeof mem));
	else
		json_null(w, NULL);
	json_u64(w, "copies", published ? ctl.segment_count : 0);
	json_name(w, "segment");
	if (published)
		json_str(w, NULL, s->path);
	else
		json_null(w, NULL);
	json_u64(w, "loader_pid", ctl.loader_pid);
	json_i64(w, "published_ns", ctl.published_ns);
	json_obj_end(w);
}

int ctl_list(const char *root, const char *note, jv **out, char *why, size_t why_len)
{
	why[0] = 0;
	char **names = NULL;
	size_t n = 0;
	int err = ctlnames_list(root, &names, &n);
	if (err) {
		snprintf(why, why_len, "%s: %s", root, strerror(-err));
		return -1;
	}
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	struct json w;
	int rc = -1;
	if (!(f = open_memstream(&text, &len)))
		goto out;
	json_init_file(&w, f, false);
	json_obj_begin(&w, NULL);
	json_bool(&w, "loader_running", false);
	json_str(&w, "note", note);
	json_name(&w, "caches");
	json_arr_begin(&w, NULL);
	for (size_t i = 0; i < n; i++)
		list_one(&w, root, names[i]);
	json_arr_end(&w);
	json_obj_end(&w);
	fclose(f);
	rc = (*out = jv_parse(text, len, why, why_len)) ? 0 : -1;
	free(text);
out:
	if (rc && !why[0])
		snprintf(why, why_len, "out of memory");
	ctlnames_free(names, n);
	return rc;
}
