/* config.c - the INI config file, parsed with libinih. */
#include "config.h"

#include "diag.h"
#include "host.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>
#include <shmkv_bpf.h>

void conf_defaults(struct loader_conf *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->root, sizeof c->root, "%s", SHMKV_DEFAULT_ROOT);
	snprintf(c->shm_dir, sizeof c->shm_dir, "%s", CONF_DEFAULT_SHM_DIR);
	c->queue_depth = CONF_DEFAULT_QUEUE_DEPTH;
	c->block_size = CONF_DEFAULT_BLOCK_SIZE;
	c->memory = MEM_AUTO;
	c->gid = (gid_t)-1;
	c->failed_expire_s = CONF_DEFAULT_FAILED_EXPIRE_S;
	c->metrics_interval_s = CONF_DEFAULT_METRICS_INTERVAL_S;
	c->stream_interval_ms = CONF_DEFAULT_STREAM_INTERVAL_MS;
	c->expiry_times = CONF_DEFAULT_EXPIRY_TIMES;
}

void conf_cache_defaults(const struct loader_conf *lc, struct cache_conf *cc)
{
	memset(cc, 0, sizeof *cc);
	cc->memory = lc->memory;
	cc->mode = CONF_DEFAULT_MODE;
	cc->gid = (gid_t)-1;
	cc->compact_entries = CONF_DEFAULT_COMPACT_ENTRIES;
	cc->compact_ratio = CONF_DEFAULT_COMPACT_RATIO;
	cc->fold_entries = CONF_DEFAULT_FOLD_ENTRIES;
	cc->fold_ratio = CONF_DEFAULT_FOLD_RATIO;
}

int conf_parse_size(const char *s, uint64_t *out)
{
	return host_parse_size(s, out) ? -EINVAL : 0; /* common/host.h owns the syntax */
}

int conf_parse_queue_depth(const char *s, unsigned *out)
{
	uint64_t n;
	if (conf_parse_size(s, &n) || n < 1 || n > 4096)
		return -EINVAL;
	*out = (unsigned)n;
	return 0;
}

int conf_parse_block_size(const char *s, uint64_t *out)
{
	uint64_t n;
	if (conf_parse_size(s, &n) || n < 4096 || n > (UINT64_C(1) << 30) || n % 4096)
		return -EINVAL;
	*out = n;
	return 0;
}

int conf_parse_duration(const char *s, uint64_t *secs)
{
	uint64_t ms;
	/* whole seconds only (common/host.h owns the syntax) */
	if (host_parse_duration_ms(s, &ms) || ms % 1000)
		return -EINVAL;
	*secs = ms / 1000;
	return 0;
}

int conf_parse_policy(const char *s, enum mem_policy *out)
{
	if (!strcmp(s, "auto"))
		*out = MEM_AUTO;
	else if (!strcmp(s, "hugetlb"))
		*out = MEM_HUGETLB;
	else if (!strcmp(s, "shm"))
		*out = MEM_SHM;
	else
		return -EINVAL;
	return 0;
}

int conf_parse_io(const char *s, enum io_engine *out)
{
	if (!strcmp(s, "auto"))
		*out = IO_AUTO;
	else if (!strcmp(s, "io_uring"))
		*out = IO_URING;
	else if (!strcmp(s, "pread"))
		*out = IO_PREAD;
	else
		return -EINVAL;
	return 0;
}

const char *conf_io_name(enum io_engine io)
{
	return io == IO_URING ? "io_uring" : io == IO_PREAD ? "pread" : "auto";
}

/* State of one parse: the reader counts lines so that every message names one. */
struct parse {
	const char *file;
	FILE *fp;
	int line;          /* line of the text inih is handling now */
	int at_line_start; /* the last fragment read ended a line */
	int err_line;      /* first error we found (0 = none) */
	char err[512];
	struct loader_conf *c;
	struct cache_def *cur; /* the [cache NAME] being read */
	int in_loader;
	int seen_section;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int perr(struct parse *p, const char *fmt, ...)
{
	if (!p->err_line) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(p->err, sizeof p->err, fmt, ap);
		va_end(ap);
		p->err_line = p->line;
	}
	return 0; /* inih: handler failed */
}

static int enter_section(struct parse *p, const char *section);

/* fgets-style reader for inih that counts lines and refuses lines inih
 * would cut (INI_MAX_LINE): a cut line would be parsed as two. */
static char *reader(char *str, int num, void *stream)
{
	struct parse *p = stream;
	if (!fgets(str, num, p->fp))
		return NULL;
	if (p->at_line_start)
		p->line++;
	size_t n = strlen(str);
	p->at_line_start = n > 0 && str[n - 1] == '\n';
	if (!p->at_line_start && !feof(p->fp)) {
		perr(p, "line longer than %d bytes (the limit of libinih)", num - 1);
		int ch;
		while ((ch = fgetc(p->fp)) != EOF && ch != '\n')
			;
		p->at_line_start = 1;
		str[0] = '\n';
		str[1] = 0;
		return str;
	}
	const char *s = str;
	while (*s == ' ' || *s == '\t')
		s++;
	const char *end = *s == '[' ? strchr(s, ']') : NULL;
	if (end) {
		char section[256];
		snprintf(section, sizeof section, "%.*s", (int)(end - s - 1), s + 1);
		enter_section(p, section);
	}
	return str;
}

static int parse_mode(const char *v, mode_t *out)
{
	char *end;
	errno = 0;
	unsigned long m = strtoul(v, &end, 8);
	if (errno || *end || !*v || m > 07777)
		return -EINVAL;
	*out = (mode_t)m;
	return 0;
}

static int parse_group(struct parse *p, const char *v, char *name, size_t name_len, gid_t *gid)
{
	struct group *g = getgrnam(v);
	if (!g) {
		char *end;
		errno = 0;
		unsigned long id = strtoul(v, &end, 10);
		if (errno || *end || !*v)
			return perr(p, "unknown group \"%s\"", v);
		*gid = (gid_t)id;
	} else {
		*gid = g->gr_gid;
	}
	snprintf(name, name_len, "%s", v);
	return 1;
}

static int set_path(struct parse *p, const char *key, const char *v, char *dst, size_t len)
{
	if (v[0] != '/')
		return perr(p, "%s must be an absolute path, not \"%s\"", key, v);
	if (strlen(v) >= len)
		return perr(p, "%s is too long", key);
	snprintf(dst, len, "%s", v);
	return 1;
}

static int loader_key(struct parse *p, const char *k, const char *v)
{
	struct loader_conf *c = p->c;
	if (!strcmp(k, "root"))
		return set_path(p, k, v, c->root, sizeof c->root);
	if (!strcmp(k, "spool"))
		return set_path(p, k, v, c->spool, sizeof c->spool);
	if (!strcmp(k, "shm_dir"))
		return set_path(p, k, v, c->shm_dir, sizeof c->shm_dir);
	if (!strcmp(k, "hugetlb_dir"))
		return set_path(p, k, v, c->hugetlb_dir, sizeof c->hugetlb_dir);
	if (!strcmp(k, "bpf_dir"))
		return set_path(p, k, v, c->bpf_dir, sizeof c->bpf_dir);
	if (!strcmp(k, "queue_depth")) {
		if (conf_parse_queue_depth(v, &c->queue_depth))
			return perr(p, "queue_depth \"%s\" is not a number in " CONF_QUEUE_DEPTH_RANGE,
				    v);
		return 1;
	}
	if (!strcmp(k, "block_size")) {
		if (conf_parse_block_size(v, &c->block_size))
			return perr(p, "block_size \"%s\" must be " CONF_BLOCK_SIZE_RANGE, v);
		return 1;
	}
	if (!strcmp(k, "failed_expire")) {
		if (conf_parse_duration(v, &c->failed_expire_s))
			return perr(p, "failed_expire \"%s\" is not a duration like 90s, 15m, 1h "
				       "or 0", v);
		return 1;
	}
	if (!strcmp(k, "durable_dir"))
		return set_path(p, k, v, c->durable_dir, sizeof c->durable_dir);
	if (!strcmp(k, "metrics_file"))
		return set_path(p, k, v, c->metrics_file, sizeof c->metrics_file);
	if (!strcmp(k, "metrics_interval")) {
		if (conf_parse_duration(v, &c->metrics_interval_s) || !c->metrics_interval_s ||
		    c->metrics_interval_s > 86400)
			return perr(p, "metrics_interval \"%s\" is not a duration from 1s to 1d, "
				       "like 15s or 1m", v);
		return 1;
	}
	if (!strcmp(k, "stream_interval")) {
		char *end;
		errno = 0;
		unsigned long long ms = isdigit((unsigned char)*v) ? strtoull(v, &end, 10) : 0;
		if (ms && !errno && !strcmp(end, "s") && ms <= 60)
			ms *= 1000;
		else if (!ms || errno || strcmp(end, "ms"))
			ms = 0;
		if (!ms || ms > 60000)
			return perr(p, "stream_interval \"%s\" is not a duration in "
				       CONF_STREAM_INTERVAL_RANGE ", like 100ms or 1s", v);
		c->stream_interval_ms = ms;
		return 1;
	}
	if (!strcmp(k, "expiry_times")) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(v, &end, 10);
		if (errno || *end || !*v || v[0] == '-' || n > CONF_EXPIRY_TIMES_MAX)
			return perr(p, "expiry_times \"%s\" is not a number from 0 to %llu", v,
				    (unsigned long long)CONF_EXPIRY_TIMES_MAX);
		c->expiry_times = n;
		return 1;
	}
	if (!strcmp(k, "io")) {
		if (conf_parse_io(v, &c->io))
			return perr(p, "io \"%s\": expected auto, io_uring or pread", v);
		return 1;
	}
	if (!strcmp(k, "memory")) {
		if (conf_parse_policy(v, &c->memory))
			return perr(p, "memory \"%s\": expected auto, hugetlb or shm", v);
		return 1;
	}
	if (!strcmp(k, "group"))
		return parse_group(p, v, c->group, sizeof c->group, &c->gid);
	return perr(p, "unknown key \"%s\" in [loader] (root, spool, shm_dir, hugetlb_dir, "
		       "queue_depth, block_size, io, memory, group, failed_expire, metrics_file, "
		       "metrics_interval, stream_interval, durable_dir, bpf_dir, expiry_times)", k);
}

static int cache_key(struct parse *p, const char *k, const char *v)
{
	struct cache_conf *cc = &p->cur->c;
	if (!strcmp(k, "source"))
		return set_path(p, k, v, cc->source, sizeof cc->source);
	if (!strcmp(k, "memory")) {
		if (conf_parse_policy(v, &cc->memory))
			return perr(p, "memory \"%s\": expected auto, hugetlb or shm", v);
		cc->memory_set = 1;
		return 1;
	}
	if (!strcmp(k, "numa")) {
		char why[300];
		if (npolicy_parse(v, &cc->numa, why, sizeof why))
			return perr(p, "%s", why);
		return 1;
	}
	if (!strcmp(k, "group"))
		return parse_group(p, v, cc->group, sizeof cc->group, &cc->gid);
	if (!strcmp(k, "mode")) {
		if (parse_mode(v, &cc->mode))
			return perr(p, "mode \"%s\" is not an octal mode like 0640", v);
		if (cc->mode & 0133) /* readers read; never write or execute (README "Trust") */
			return perr(p, "mode %s: the files of a cache are read-only to group and "
				    "others and never executable (e.g. 0640, 0644)", v);
		return 1;
	}
	if (!strcmp(k, "max_size")) {
		if (conf_parse_size(v, &cc->max_size))
			return perr(p, "max_size \"%s\" is not a size like 10G", v);
		return 1;
	}
	if (!strcmp(k, "bpf")) {
		if (strcmp(v, "yes") && strcmp(v, "no"))
			return perr(p, "bpf \"%s\": expected yes or no", v);
		cc->bpf = !strcmp(v, "yes");
		return 1;
	}
	if (!strcmp(k, "bpf_prefix")) {
		if (strlen(v) >= sizeof cc->bpf_prefix)
			return perr(p, "bpf_prefix is longer than %zu bytes", sizeof cc->bpf_prefix - 1);
		snprintf(cc->bpf_prefix, sizeof cc->bpf_prefix, "%s", v);
		return 1;
	}
	if (!strcmp(k, "bpf_max_value")) {
		uint64_t n;
		if (conf_parse_size(v, &n) || n > SHMKV_BPF_VALUE_LIMIT)
			return perr(p, "bpf_max_value \"%s\": expected 0..%d bytes", v,
				    SHMKV_BPF_VALUE_LIMIT);
		cc->bpf_max_value = n ? (uint32_t)n : SHMKV_BPF_DEFAULT_VALUE_MAX;
		return 1;
	}
	if (!strcmp(k, "compact_entries")) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(v, &end, 10);
		if (errno || *end || !*v || v[0] == '-')
			return perr(p, "compact_entries \"%s\" is not a number (0: no bound)", v);
		cc->compact_entries = n;
		return 1;
	}
	if (!strcmp(k, "compact_ratio")) {
		char *end;
		errno = 0;
		double r = strtod(v, &end);
		if (errno || *end || !*v || !(r >= 0 && r <= 100))
			return perr(p, "compact_ratio \"%s\" is not a number from 0 (no bound) to "
				       "100, the overlay's bytes over the base's (0.25: a quarter)", v);
		cc->compact_ratio = r;
		return 1;
	}
	if (!strcmp(k, "fold_entries")) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(v, &end, 10);
		if (errno || *end || !*v || v[0] == '-')
			return perr(p, "fold_entries \"%s\" is not a number (0: no top overlay, "
				       "every change rebuilds the lower one)", v);
		cc->fold_entries = n;
		return 1;
	}
	if (!strcmp(k, "fold_ratio")) {
		char *end;
		errno = 0;
		double r = strtod(v, &end);
		if (errno || *end || !*v || !(r >= 0 && r <= 100))
			return perr(p, "fold_ratio \"%s\" is not a number from 0 (fold_entries "
				       "alone) to 100, the top overlay's records over the lower's "
				       "(0.125: an eighth)", v);
		cc->fold_ratio = r;
		return 1;
	}
	return perr(p, "unknown key \"%s\" in [cache %s] (source, memory, numa, group, mode, "
		       "max_size, bpf, bpf_prefix, bpf_max_value, compact_entries, compact_ratio, "
		       "fold_entries, fold_ratio)", k, p->cur->name);
}

/* A new section: "loader" or "cache NAME". */
static int enter_section(struct parse *p, const char *section)
{
	p->seen_section = 1;
	p->cur = NULL;
	p->in_loader = 0;
	if (!strcmp(section, "loader")) {
		p->in_loader = 1;
		return 1;
	}
	if (strncmp(section, "cache", 5) || (section[5] != ' ' && section[5] != '\t'))
		return perr(p, "unknown section [%s] (expected [loader] or [cache NAME])", section);
	const char *name = section + 6;
	while (*name == ' ' || *name == '\t')
		name++;
	if (!(shmkv_name_check(name) == 0))
		return perr(p, "invalid cache name \"%s\" (" SHMKV_CACHE_NAME_RULE ")", name);
	if (conf_find(p->c, name))
		return perr(p, "[cache %s] appears twice", name);
	struct cache_def *d = realloc(p->c->caches, (p->c->ncaches + 1) * sizeof *d);
	if (!d)
		return perr(p, "out of memory");
	p->c->caches = d;
	p->cur = &d[p->c->ncaches++];
	memset(p->cur, 0, sizeof *p->cur);
	/* the precision bounds what -Wformat-truncation sees (shmkv_name_check
	 * above already bounds the name) */
	snprintf(p->cur->name, sizeof p->cur->name, "%.*s", (int)sizeof p->cur->name - 1, name);
	conf_cache_defaults(p->c, &p->cur->c);
	p->cur->c.line = p->line;
	return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse *p = user;
	(void)section; /* the reader tracks sections, with their lines */
	if (!p->seen_section)
		return perr(p, "\"%s\" outside any section (put it under [loader] or [cache NAME])",
			    name);
	if (!p->cur && !p->in_loader)
		return 0; /* inside an invalid section: reported at its header */
	if (!*value)
		return perr(p, "%s has an empty value", name);
	return p->in_loader ? loader_key(p, name, value) : cache_key(p, name, value);
}

int conf_load(const char *path, struct loader_conf *c, char *why, size_t why_len)
{
	struct parse p;
	memset(&p, 0, sizeof p);
	p.file = path;
	p.c = c;
	p.at_line_start = 1;
	p.fp = fopen(path, "re");
	if (!p.fp) {
		int err = -errno;
		return diag_fail(err, why, why_len, "%s: %s", path, strerror(-err));
	}
	int r = ini_parse_stream(reader, &p, handler, &p);
	int io = ferror(p.fp);
	fclose(p.fp);
	if (io)
		return diag_fail(-EIO, why, why_len, "%s: read error", path);
	if (p.err_line && (r <= 0 || p.err_line <= r))
		return diag_fail(-EINVAL, why, why_len, "%s:%d: %s", path, p.err_line, p.err);
	if (r > 0)
		return diag_fail(-EINVAL, why, why_len,
				   "%s:%d: syntax error (expected [section], key = value or a comment)",
				   path, r);
	if (r < 0)
		return diag_fail(-ENOMEM, why, why_len, "%s: cannot parse", path);
	conf_apply_defaults(c);
	return 0;
}

void conf_apply_defaults(struct loader_conf *c)
{
	for (size_t i = 0; i < c->ncaches; i++)
		if (!c->caches[i].c.memory_set)
			c->caches[i].c.memory = c->memory;
}

int conf_check(const struct loader_conf *c, char *why, size_t why_len)
{
	if (!c->spool[0])
		return diag_fail(-EINVAL, why, why_len,
				   "no spool directory: set spool= in [loader] or pass --spool DIR");
	if (c->root[0] != '/' || c->spool[0] != '/' || c->shm_dir[0] != '/')
		return diag_fail(-EINVAL, why, why_len, "root, spool and shm_dir must be absolute paths");
	if (!strcmp(c->root, c->spool))
		return diag_fail(-EINVAL, why, why_len, "spool and root must be different directories");
	return 0;
}

const struct cache_def *conf_find(const struct loader_conf *c, const char *name)
{
	for (size_t i = 0; i < c->ncaches; i++)
		if (!strcmp(c->caches[i].name, name))
			return &c->caches[i];
	return NULL;
}

void conf_free(struct loader_conf *c)
{
	if (!c)
		return;
	free(c->caches);
	free(c);
}
