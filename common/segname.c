/* segname.c - see segname.h. */
#include "segname.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <shmkv.h> /* xxhash.h, as the reader includes it */

void segname_root_prefix(const char *canon_root, char *out, size_t len)
{
	uint64_t h = XXH3_64bits(canon_root, strlen(canon_root));
	snprintf(out, len, "shmkv-%08x-", (unsigned)(h >> 32));
}

bool segname_cache_prefix(const char *canon_root, const char *cache, char *out, size_t len)
{
	char root[SEGNAME_ROOT_PREFIX_LEN + 1];
	segname_root_prefix(canon_root, root, sizeof root);
	return (size_t)snprintf(out, len, "%s%s-", root, cache) < len;
}

bool segname_match(const char *base, const char *cache_prefix, bool *loading)
{
	size_t pl = strlen(cache_prefix);
	*loading = false;
	if (strncmp(base, cache_prefix, pl))
		return false;
	const char *p = base + pl;
	size_t digits = strspn(p, "0123456789");
	if (digits == 0 || digits > 19) /* UINT64_MAX has 20 digits; load ids stay below */
		return false;
	if (!strcmp(p + digits, SEGNAME_LOADING_SUFFIX))
		*loading = true;
	return p[digits] == 0 || *loading;
}
