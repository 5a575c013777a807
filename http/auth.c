/* auth.c - bearer tokens. See auth.h. */
#include "auth.h"

#include <string.h>
#include <strings.h>

static int lists(const struct http_token_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], "*") || !strcmp(l->v[i], name))
			return 1;
	return 0;
}

/* Equal, without a timing that tells how much of a guess was right. */
static int same(const char *a, size_t al, const char *b, size_t bl)
{
	unsigned char d = al != bl;
	for (size_t i = 0; i < al; i++)
		d |= (unsigned char)(a[i] ^ b[i % (bl ? bl : 1)]);
	return !d;
}

int auth_token(const struct http_conf *c, const char *hdr, size_t len)
{
	if (!hdr)
		return -1;
	if (len < 7 || strncasecmp(hdr, "Bearer ", 7))
		return -2;
	hdr += 7, len -= 7;
	while (len && *hdr == ' ')
		hdr++, len--;
	while (len && hdr[len - 1] == ' ')
		len--;
	int found = -2;
	for (size_t i = 0; i < c->n_tokens; i++)
		if (same(hdr, len, c->tokens[i].secret, strlen(c->tokens[i].secret)) && found == -2)
			found = (int)i;
	return found;
}

enum auth_result auth_check(const struct http_conf *c, int tok, const char *name, int what)
{
	int prot = 0, writable = 0;
	for (size_t i = 0; i < c->n_tokens; i++) {
		prot |= lists(&c->tokens[i].read, name) || lists(&c->tokens[i].write, name);
		writable |= lists(&c->tokens[i].write, name);
	}
	if (tok == -2)
		return AUTH_INVALID;
	if (what == AUTH_WRITE && !writable)
		return AUTH_DISABLED;
	if (what == AUTH_READ && !prot)
		return AUTH_OK;
	if (tok < 0)
		return AUTH_MISSING;
	const struct http_token *t = &c->tokens[tok];
	int ok = what == AUTH_WRITE ? lists(&t->write, name)
				    : lists(&t->read, name) || lists(&t->write, name);
	return ok ? AUTH_OK : AUTH_FORBIDDEN;
}
