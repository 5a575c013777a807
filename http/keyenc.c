/* keyenc.c - percent-decoding of keys. See keyenc.h. */
#include "keyenc.h"

#include <stdint.h>

#include <shmkv.h>

#include "json.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long keyenc_decode(const char *in, size_t n, char *out, size_t *bad)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c == '%') {
			/* both digits inside the input: indices i + 1 and i + 2 < n */
			int hi = i + 2 < n ? hexval(in[i + 1]) : -1;
			int lo = i + 2 < n ? hexval(in[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				*bad = i;
				return -1;
			}
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else if (c <= 0x20 || c >= 0x7f) {
			*bad = i;
			return -1;
		} else {
			out[o++] = (char)c;
		}
	}
	return (long)o;
}

void keyenc_json(struct json *w, const char *key, size_t len)
{
	if (shmkv_utf8_valid((const uint8_t *)key, len))
		json_str_n(w, "key", key, len);
	else
		json_base64(w, "key_base64", key, len);
}
