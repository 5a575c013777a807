/* ops.c - the worker's other operations: reload, rollback, drop, config. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ops.h"

#include "json.h"
#include "load.h"
#include "log.h"
#include "overlay.h"
#include "probes.h"
#include "state.h"

/* Reads the expiry times of c's current image (expiry.h) and installs them:
 * after a rollback, and at startup for a generation adopted from the last
 * loader (a load reads them itself before it publishes). Worker. */
static void refresh_expiry(struct loader *L, struct cache *c)
{
	struct expiry e;
	char why[300], q[400];
	int err = expiry_scan_file(c->cur.path, L->conf->expiry_times, &e, why, sizeof why);
	pthread_mutex_lock(&L->lock); /* read by status.c:status_take() */
	struct expiry old = c->exp;
	c->exp = e;
	pthread_mutex_unlock(&L->lock);
	expiry_free(&old);
	if (err)
		log_warn("expiry unknown cache=%s gen=%llu file=%s error=%s", c->name,
			 (unsigned long long)c->cur.generation, c->cur.path,
			 log_quote(q, sizeof q, why));
	else if (c->exp.expiring)
		log_info("expiry cache=%s gen=%llu expiring=%llu expiry_ms=%llu", c->name,
			 (unsigned long long)c->cur.generation, (unsigned long long)c->exp.expiring,
			 (unsigned long long)c->exp.scan_ms);
}

int op_reload(struct loader *L, const char *name, char **reply)
{
	struct cache *c = cache_find(L, name);
	const struct cache_def *d = conf_find(L->conf, name);
	if (!d && !c) {
		return json_reply_no_cache(reply, name);
	}
	if (!d || !d->c.source[0]) {
		return json_reply_error(reply, -ENOENT,
			    "cache %s has no source= in the config: use load NAME PATH", name);
	}
	char src[PATH_MAX];
	snprintf(src, sizeof src, "%s", d->c.source);
	return op_load(L, name, src, 0, NULL, reply, NULL, 0);
}


int op_rollback(struct loader *L, const char *name, char **reply)
{
	struct cache *c = cache_find(L, name);
	char why[400];
	if (!c) {
		return json_reply_no_cache(reply, name);
	}
	if (!c->have_rb || !c->ctl.map) {
		return json_reply_error(reply, -ENOENT, "cache %s has no rollback segment", name);
	}
	struct seg_info chk;
	int err = seg_inspect(c->rb.path, &chk, why, sizeof why);
	if (err) {
		cache_drop_rollback(L, c, "unusable");
		return json_reply_error(reply, err, "cache %s: the rollback segment is unusable: %s", name, why);
	}
	uint64_t gen = ctl_generation(&c->ctl) + 1, from = c->cur.generation;
	/* its overlays with it (a top only over a lower) */
	const struct seg_info *ov[2] = {c->have_rbov ? &c->rbov : NULL,
					c->have_rbov && c->have_rbtop ? &c->rbtop : NULL};
	for (int i = 0; i < 2; i++) {
		if (ov[i] && (err = seg_inspect(ov[i]->path, &chk, why, sizeof why)) != 0) {
			cache_drop_rollback(L, c, "unusable overlay");
			return json_reply_error(reply, err, "cache %s: the rollback's %s overlay is "
						"unusable: %s", name, i ? "top" : "lower", why);
		}
	}
	shmkv_ctl_segment cs[SHMKV_CTL_MAX_SEGMENTS];
	uint32_t ncs = 0;
	err = cache_gen_entries(&c->rb, c->rb_more, c->nrb_more, ov[0], ov[1], cs, &ncs, why,
				sizeof why);
	if (!err && L->durable_fd >= 0) {
		/* the durable log names the generation before until the worker
		 * writes it anew after this publish; killed in between, a
		 * restart must not replay it over this one (overlay.c) */
		c->wal_behind = 1;
		err = cache_save_before_publish(L, c, "that the durable log is behind", why,
						sizeof why);
	}
	/* its replicas with it; a cache that had changes stays protocol 2 */
	if (!err)
		err = ctl_publish(&c->ctl, gen, cs, ncs, why, sizeof why);
	if (err) {
		c->wal_behind = 0; /* the log names what is served */
		cache_set_error(L, c, "rollback: %s", why);
		return json_reply_error(reply, err, "cache %s: %s", name, why);
	}
	PROBE(publish, c->name, gen, c->rb.size, c->rb.path);
	PROBE(rollback, c->name, from, gen, c->rb.generation);
	pthread_mutex_lock(&L->lock);
	struct seg_info t = c->cur;
	struct load_stats ts = c->stats;
	int had_cur = c->have_cur;
	c->cur = c->rb;
	c->cur.generation = gen;
	c->stats = c->rb_stats;
	c->rb = t;
	c->rb_stats = ts;
	struct seg_info tm[SHMKV_CTL_MAX_SEGMENTS - 1];
	unsigned tn = c->ncur_more;
	memcpy(tm, c->cur_more, sizeof tm);
	memcpy(c->cur_more, c->rb_more, sizeof tm);
	c->ncur_more = c->nrb_more;
	memcpy(c->rb_more, tm, sizeof tm);
	c->nrb_more = tn;
	for (unsigned i = 0; i < c->ncur_more; i++)
		c->cur_more[i].generation = gen;
	c->have_rb = had_cur;
	c->have_cur = 1;
	{ /* the overlays and chain positions swap with their bases */
		struct seg_info to = c->ov, tt = c->top;
		int th = c->have_ov, tth = c->have_top;
		uint64_t tk = c->ov_keys;
		c->top = c->rbtop;
		c->have_top = c->have_rbov && c->have_rbtop;
		c->rbtop = tt;
		c->have_rbtop = tth;
		c->ov_keys = c->rb_ov_keys;
		c->rb_ov_keys = tk;
		c->top.generation = gen;
		uint64_t tl = c->chain_last, ts2 = c->chain_seq;
		uint64_t os = c->origin_sum, oz = c->origin_size;
		c->origin_sum = c->rb_origin_sum;
		c->origin_size = c->rb_origin_size;
		c->rb_origin_sum = os;
		c->rb_origin_size = oz;
		c->ov = c->rbov;
		c->have_ov = c->have_rbov;
		c->rbov = to;
		c->have_rbov = th;
		c->ov.generation = gen;
		c->chain_last = c->rb_chain_last;
		c->chain_seq = c->rb_chain_seq;
		c->rb_chain_last = tl;
		c->rb_chain_seq = ts2;
	}
	c->last_error[0] = 0;
	struct expiry old_exp = c->exp; /* of the generation rolled back from */
	memset(&c->exp, 0, sizeof c->exp); /* pending until read below */
	pthread_mutex_unlock(&L->lock);
	expiry_free(&old_exp);
	refresh_expiry(L, c);
	cache_save_state(L, c);
	log_info("rolled back cache=%s gen=%llu load=%llu file=%s (gen %llu is the rollback now)",
		 name, (unsigned long long)gen, (unsigned long long)c->cur.load_id, c->cur.path,
		 (unsigned long long)from);
	notify_status("cache %s: rolled back, generation %llu", name, (unsigned long long)gen);
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_str(&j, "cache", name);
	json_u64(&j, "generation", gen);
	json_str(&j, "segment", c->cur.path);
	json_u64(&j, "rollback_generation", from);
	*reply = json_finish(&j);
	return 0;
}

int op_drop(struct loader *L, const char *name, char **reply)
{
	struct cache *c = cache_find(L, name);
	if (!c) {
		return json_reply_no_cache(reply, name);
	}
	uint64_t gen = ctl_generation(&c->ctl);
	/* the ctl first: a reader attaching now finds no cache rather than a
	 * control segment naming a file that is gone */
	if (c->ctl.map) {
		ctl_remove(&c->ctl);
		c->ctl.version = 0; /* a load after the drop starts at protocol 1 */
		cache_note_protocol(L, c);
	} else if (c->broken) {
		char p[SHMKV_CACHE_NAME_MAX + 8];
		snprintf(p, sizeof p, "%s.ctl", name);
		unlinkat(L->root_fd, p, 0);
	}
	if (c->have_ov)
		unlink(c->ov.path);
	if (c->have_top)
		unlink(c->top.path);
	if (c->have_rbov)
		unlink(c->rbov.path);
	if (c->have_rbtop)
		unlink(c->rbtop.path);
	if (c->have_cur && unlink(c->cur.path) == 0)
		PROBE(unlink, c->name, c->cur.generation, c->cur.path);
	if (c->have_rb && unlink(c->rb.path) == 0)
		PROBE(unlink, c->name, c->rb.generation, c->rb.path);
	if (c->have_cur)
		cache_unlink_more(c, c->cur_more, c->ncur_more);
	if (c->have_rb)
		cache_unlink_more(c, c->rb_more, c->nrb_more);
	state_remove(L->root_fd, name);
	log_info("dropped cache=%s gen=%llu", name, (unsigned long long)gen);
	notify_status("cache %s dropped", name);
	if (c->configured) {
		pthread_mutex_lock(&L->lock);
		c->have_cur = c->have_rb = 0;
		c->have_ov = c->have_rbov = c->have_top = c->have_rbtop = 0;
		c->ov_keys = c->rb_ov_keys = 0;
		c->chain_last = c->chain_seq = c->rb_chain_last = c->rb_chain_seq = 0;
		c->origin_sum = c->origin_size = c->rb_origin_sum = c->rb_origin_size = 0;
		c->ncur_more = c->nrb_more = 0;
		c->broken = 0;
		memset(&c->stats, 0, sizeof c->stats);
		memset(&c->rb_stats, 0, sizeof c->rb_stats);
		struct expiry old_exp = c->exp;
		memset(&c->exp, 0, sizeof c->exp);
		c->last_error[0] = 0;
		pthread_mutex_unlock(&L->lock);
		expiry_free(&old_exp);
	} else {
		cache_remove(L, c);
	}
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_str(&j, "cache", name);
	json_u64(&j, "dropped_generation", gen);
	*reply = json_finish(&j);
	return 0;
}

/* Mode and group of the files of a cache, after a config change. */
static void apply_perms(struct cache *c)
{
	if (c->ctl.map && ctl_chmod(&c->ctl, c->conf.mode, c->conf.gid))
		log_warn("cache=%s: chmod %s: %s", c->name, c->ctl.path, strerror(errno));
	const struct seg_info *s[2] = {c->have_cur ? &c->cur : NULL, c->have_rb ? &c->rb : NULL};
	for (int i = 0; i < 2; i++) {
		if (!s[i])
			continue;
		if (chmod(s[i]->path, c->conf.mode) != 0 ||
		    (c->conf.gid != (gid_t)-1 && chown(s[i]->path, (uid_t)-1, c->conf.gid) != 0))
			log_warn("cache=%s: chmod %s: %s", c->name, s[i]->path, strerror(errno));
	}
}

/* Loads every configured cache that has a source and nothing published. */
static void load_missing(struct loader *L)
{
	for (size_t i = 0; i < L->conf->ncaches; i++) {
		const struct cache_def *d = &L->conf->caches[i];
		struct cache *c = cache_find(L, d->name);
		if (!d->c.source[0] || (c && (c->have_cur || c->broken)))
			continue;
		/* relaxed: a stop request only; pairs with the store in worker.c:worker_stop() */
		if (atomic_load_explicit(&L->cancel, memory_order_relaxed))
			return;
		char *reply = NULL;
		char src[PATH_MAX];
		snprintf(src, sizeof src, "%s", d->c.source);
		if (op_load(L, d->name, src, 0, NULL, &reply, NULL, 0) == 0)
			overlay_log_reset(L, d->name); /* as after a load job (worker.c) */
		free(reply);
	}
}

void op_config(struct loader *L, struct loader_conf *conf)
{
	struct loader_conf *old = L->conf;
	if (strcmp(old->root, conf->root) || strcmp(old->spool, conf->spool) ||
	    strcmp(old->durable_dir, conf->durable_dir))
		log_warn("config: root, spool and durable_dir changes take effect at the next "
			 "start");
	snprintf(conf->root, sizeof conf->root, "%s", old->root);
	snprintf(conf->spool, sizeof conf->spool, "%s", old->spool);
	snprintf(conf->durable_dir, sizeof conf->durable_dir, "%s", old->durable_dir);
	pthread_mutex_lock(&L->lock);
	L->conf = conf;
	for (size_t i = 0; i < L->ncaches; i++) {
		struct cache *c = L->caches[i];
		const struct cache_def *d = conf_find(conf, c->name);
		c->configured = d != NULL;
		if (d)
			c->conf = d->c;
		else
			conf_cache_defaults(conf, &c->conf);
	}
	pthread_mutex_unlock(&L->lock);
	conf_free(old);
	for (size_t i = 0; i < L->ncaches; i++)
		apply_perms(L->caches[i]);
	for (size_t i = 0; i < conf->ncaches; i++) {
		struct cache *c;
		if (!cache_find(L, conf->caches[i].name) && cache_add(L, conf->caches[i].name, &c))
			log_err("config: out of memory");
	}
	log_info("config reloaded file=%s caches=%zu", L->config_path, conf->ncaches);
	notify_status("config reloaded, %zu caches configured", conf->ncaches);
	load_missing(L);
}

static int is_ghost(const struct cache *c)
{
	return c->failed_ms && !c->configured && !c->have_cur && !c->ctl.map && !c->broken;
}

uint64_t op_expire_due(const struct loader *L)
{
	uint64_t ttl = L->conf->failed_expire_s * 1000u, due = 0;
	if (!ttl)
		return 0;
	for (size_t i = 0; i < L->ncaches; i++) {
		const struct cache *c = L->caches[i];
		if (is_ghost(c) && (!due || c->failed_ms + ttl < due))
			due = c->failed_ms + ttl;
	}
	return due;
}

void op_expire(struct loader *L)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	uint64_t ttl = L->conf->failed_expire_s * 1000u;
	for (size_t i = 0; ttl && i < L->ncaches;) {
		struct cache *c = L->caches[i];
		if (!is_ghost(c) || now < c->failed_ms + ttl) {
			i++;
			continue;
		}
		char q[600];
		log_info("forgot cache=%s: it never served and its loads failed for %llus "
			 "(failed_expire) last_error=%s", c->name,
			 (unsigned long long)L->conf->failed_expire_s,
			 log_quote(q, sizeof q, c->last_error));
		notify_status("cache %s forgotten: it never loaded", c->name);
		cache_remove(L, c); /* moves the last cache to i */
	}
}

void op_start(struct loader *L)
{
	for (size_t i = 0; i < L->conf->ncaches; i++) {
		struct cache *c;
		if (!cache_find(L, L->conf->caches[i].name) &&
		    cache_add(L, L->conf->caches[i].name, &c))
			log_err("out of memory");
	}
	/* generations adopted from the last loader (adopt.c) */
	for (size_t i = 0; i < L->ncaches; i++)
		if (L->caches[i]->have_cur && L->caches[i]->exp.state == EXPIRY_PENDING)
			refresh_expiry(L, L->caches[i]);
	/* durable logs first: a cache with one gets its base and the log's
	 * changes in one publish (overlay.c), then the rest loads */
	overlay_recover(L);
	load_missing(L);
}
