/* route.c - a request's path and If-None-Match read. See route.h. */
#include "route.h"

#include <string.h>

enum route_shape route_shape(const char *p, size_t n, char name[SHMKV_CACHE_NAME_MAX + 1],
			     const char **key, size_t *key_len)
{
	static const char pre[] = "/v1/caches/";
	size_t pl = sizeof pre - 1;
	if (n <= pl || memcmp(p, pre, pl))
		return ROUTE_EXACT;
	const char *nm = p + pl;
	const char *slash = memchr(nm, '/', n - pl);
	/* a NUL would end the name early: the handlers would serve and
	 * authorize the cache of its first bytes */
	if (!slash || (size_t)(slash - nm) > SHMKV_CACHE_NAME_MAX || slash == nm ||
	    memchr(nm, 0, (size_t)(slash - nm)))
		return ROUTE_EXACT;
	memcpy(name, nm, (size_t)(slash - nm)); /* no snprintf: this is every request's path */
	name[slash - nm] = 0;
	const char *rest = slash + 1;
	size_t rl = n - (size_t)(rest - p);
	if (rl == 3 && !memcmp(rest, "get", 3))
		return ROUTE_CACHE_GET;
	if (rl > 5 && !memcmp(rest, "keys/", 5)) {
		*key = rest + 5;
		*key_len = rl - 5;
		return ROUTE_CACHE_KEY;
	}
	return ROUTE_EXACT;
}

int route_etag_listed(const char *v, size_t len, const char *tag)
{
	size_t tl = strlen(tag);
	size_t p = 0;
	while (p < len) {
		while (p < len && (v[p] == ' ' || v[p] == ','))
			p++;
		size_t s = p;
		while (p < len && v[p] != ',')
			p++;
		size_t e = p;
		while (e > s && v[e - 1] == ' ')
			e--;
		const char *t = v + s;
		size_t n = e - s;
		if (n == 1 && t[0] == '*')
			return 1;
		if (n > 2 && t[0] == 'W' && t[1] == '/')
			t += 2, n -= 2;
		if (n == tl && !memcmp(t, tag, tl))
			return 1;
	}
	return 0;
}
