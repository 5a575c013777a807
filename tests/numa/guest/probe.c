/* probe.c - the checks numa_guest runs inside its multi-node qemu guest
 * (README.md here), as a reader would, independently of the loader:
 *   probe where ROOT NAME        each published copy: its node as published,
 *                                and where move_pages finds every page
 *   probe pick ROOT NAME CPU     pinned to CPU: the copy shmkv_attach maps
 *   probe swap ROOT NAME SECS STOPFILE  a reader thread pinned to every CPU,
 *                                each getting and refreshing while the loader
 *                                swaps, until STOPFILE exists (at most SECS):
 *                                generations seen, errors, its final copy's node
 *   probe migrate ROOT NAME A B  attached on CPU A, moved to CPU B: keeps
 *                                reading, takes B's copy at the next generation
 * One line per result on stdout; exit 0 unless the probe itself failed. */
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <shmkv.h>

static int ctl_copy(const char *root, const char *name, shmkv_ctl *out)
{
	const shmkv_ctl *ctl = NULL;
	char why[256];
	int err = shmkv_ctl_open(root, name, 0, (shmkv_ctl **)&ctl, why, sizeof why);
	if (err) {
		fprintf(stderr, "probe: %s\n", why);
		return err;
	}
	err = shmkv_ctl_read(ctl, out);
	shmkv_ctl_close(ctl);
	return err;
}

static int where(const char *root, const char *name)
{
	shmkv_ctl c;
	if (ctl_copy(root, name, &c))
		return 1;
	printf("gen %llu copies %u\n", (unsigned long long)c.generation, c.segment_count);
	for (uint32_t i = 0; i < c.segment_count; i++) {
		const shmkv_ctl_segment *s = &c.segments[i];
		int fd = open(s->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			printf("copy %u node %d error open %s\n", i, s->node, strerror(errno));
			continue;
		}
		uint8_t *m = mmap(NULL, s->map_size, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (m == MAP_FAILED) {
			printf("copy %u node %d error mmap %s\n", i, s->node, strerror(errno));
			continue;
		}
		size_t n = s->map_size / s->page_size;
		void **pages = calloc(n, sizeof *pages);
		int *st = calloc(n, sizeof *st);
		volatile uint8_t sink = 0;
		for (size_t k = 0; k < n; k++) {
			pages[k] = m + k * s->page_size;
			sink ^= m[k * s->page_size]; /* map it in this process (no new page) */
		}
		(void)sink;
		unsigned long per[64] = {0}, absent = 0;
		if (move_pages(0, n, pages, NULL, st, 0) != 0) {
			printf("copy %u node %d error move_pages %s\n", i, s->node, strerror(errno));
		} else {
			for (size_t k = 0; k < n; k++) {
				if (st[k] >= 0 && st[k] < 64)
					per[st[k]]++;
				else
					absent++;
			}
			printf("copy %u node %d pagesize %llu pages", i, s->node,
			       (unsigned long long)s->page_size);
			for (int k = 0; k < 64; k++)
				if (per[k])
					printf(" %d:%lu", k, per[k]);
			printf(" absent %lu\n", absent);
		}
		free(pages);
		free(st);
		munmap(m, s->map_size);
	}
	return 0;
}

static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof set, &set);
}

static int node_now(void)
{
	unsigned cpu = 0, node = 0;
	return getcpu(&cpu, &node) == 0 ? (int)node : -1;
}

static int pick(const char *root, const char *name, int cpu)
{
	if (pin(cpu)) {
		printf("pick cpu %d error pin %s\n", cpu, strerror(errno));
		return 1;
	}
	shmkv *db = NULL;
	char why[512];
	int err = shmkv_attach_diag(root, name, 0, &db, why, sizeof why);
	if (err) {
		printf("pick cpu %d error attach %s\n", cpu, why);
		return 1;
	}
	printf("pick cpu %d node %d replica %d gen %llu\n", cpu, node_now(), shmkv_node(db),
	       (unsigned long long)shmkv_generation(db));
	shmkv_close(db);
	return 0;
}

struct reader {
	pthread_t t;
	int cpu;
	const char *root, *name;
	uint64_t gets, errors, gens, last_gen;
	int node, replica;
	char err[200];
};

static atomic_int stop;

/* Every key k<i> of generation G holds "G:<i>": a handle serving a mix of
 * two generations would show it. */
static void *read_loop(void *arg)
{
	struct reader *r = arg;
	char why[512];
	shmkv *db = NULL;
	if (pin(r->cpu) || shmkv_attach_diag(r->root, r->name, 0, &db, why, sizeof why)) {
		snprintf(r->err, sizeof r->err, "attach: %.180s", db ? "" : why);
		r->errors++;
		return NULL;
	}
	r->last_gen = shmkv_generation(db);
	r->gens = 1;
	for (uint64_t i = 0; !atomic_load(&stop); i++) {
		char key[32], want[64];
		int64_t g = -1;
		if (shmkv_get_i64(db, "gen", 3, &g) != 0) {
			r->errors++;
			snprintf(r->err, sizeof r->err, "no gen key");
		}
		int kl = snprintf(key, sizeof key, "k%llu", (unsigned long long)(i % 2000));
		snprintf(want, sizeof want, "%lld:%llu", (long long)g, (unsigned long long)(i % 2000));
		const char *v = NULL;
		size_t vl = 0;
		if (shmkv_get_str(db, key, (size_t)kl, &v, &vl) != 0 || vl != strlen(want) ||
		    memcmp(v, want, vl)) {
			r->errors++;
			snprintf(r->err, sizeof r->err, "%s: want %s", key, want);
		}
		r->gets++;
		if ((i & 255) == 0) {
			int rc = shmkv_refresh(db);
			if (rc == 1 && shmkv_generation(db) != r->last_gen) {
				r->last_gen = shmkv_generation(db);
				r->gens++;
			} else if (rc < 0 && rc != -EAGAIN) {
				r->errors++;
				snprintf(r->err, sizeof r->err, "refresh %d", rc);
			}
		}
	}
	r->node = node_now();
	r->replica = shmkv_node(db);
	shmkv_close(db);
	return NULL;
}

static int swap(const char *root, const char *name, int secs, const char *stopfile)
{
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	struct reader *rs = calloc((size_t)ncpu, sizeof *rs);
	for (int i = 0; i < ncpu; i++) {
		rs[i].cpu = i;
		rs[i].root = root;
		rs[i].name = name;
		pthread_create(&rs[i].t, NULL, read_loop, &rs[i]);
	}
	/* until the script says the swaps are done (an event, not a time a
	 * loaded TCG guest may overrun); secs only bounds a script that died */
	time_t end = time(NULL) + secs;
	while (access(stopfile, F_OK) != 0 && time(NULL) < end)
		usleep(10000);
	atomic_store(&stop, 1);
	for (int i = 0; i < ncpu; i++) {
		pthread_join(rs[i].t, NULL);
		printf("reader cpu %d node %d replica %d gets %llu gens %llu errors %llu%s%s\n",
		       rs[i].cpu, rs[i].node, rs[i].replica, (unsigned long long)rs[i].gets,
		       (unsigned long long)rs[i].gens, (unsigned long long)rs[i].errors,
		       rs[i].err[0] ? " last " : "", rs[i].err);
	}
	free(rs);
	return 0;
}

/* A thread that migrates: attached on from_cpu's node, moved to to_cpu, it
 * keeps reading its copy (remote now) until a refresh maps a new generation,
 * which brings the copy of its new node. */
static int migrate(const char *root, const char *name, int from, int to)
{
	shmkv *db = NULL;
	char why[512];
	if (pin(from) || shmkv_attach_diag(root, name, 0, &db, why, sizeof why)) {
		printf("migrate error attach\n");
		return 1;
	}
	int r0 = shmkv_node(db);
	uint64_t g0 = shmkv_generation(db);
	if (pin(to)) {
		printf("migrate error pin %d\n", to);
		return 1;
	}
	int64_t g = -1;
	int get_ok = shmkv_get_i64(db, "gen", 3, &g) == 0;
	int r1 = shmkv_node(db);
	printf("migrate ready\n");
	int rc = 0;
	for (int i = 0; i < 6000 && rc != 1; i++) { /* up to 60 s for a new generation */
		rc = shmkv_refresh(db);
		if (rc != 1)
			usleep(10000);
	}
	int r2 = shmkv_node(db);
	printf("migrate from %d to %d node_now %d before %d moved %d get %d after %d gen %llu->%llu\n",
	       from, to, node_now(), r0, r1, get_ok, r2, (unsigned long long)g0,
	       (unsigned long long)shmkv_generation(db));
	shmkv_close(db);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "where"))
		return where(argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "pick"))
		return pick(argv[2], argv[3], atoi(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "swap"))
		return swap(argv[2], argv[3], atoi(argv[4]), argv[5]);
	if (argc == 6 && !strcmp(argv[1], "migrate"))
		return migrate(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
	fprintf(stderr, "usage: probe where ROOT NAME | pick ROOT NAME CPU | swap ROOT NAME SECS STOPFILE |"
		" migrate ROOT NAME FROM_CPU TO_CPU\n");
	return 2;
}
