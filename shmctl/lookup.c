/* lookup.c - the get verb of image and cache. See lookup.h. */
#include "lookup.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "main.h"
#include "value.h"

void json_key_member(struct json *w, const void *key, size_t len)
{
	if (shmkv_utf8_valid(key, len)) {
		json_name(w, "key");
		json_str_n(w, NULL, key, len);
	} else {
		json_name(w, "key_base64");
		json_base64(w, NULL, key, len);
	}
}

/* Unix seconds as RFC 3339 UTC ("2030-01-31T12:00:00Z"). */
void expiry_text(char *buf, size_t n, uint32_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	gmtime_r(&tt, &tm);
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Prints the value found (and when it expires, 0: never); returns the exit
 * code. Plain: the value alone on stdout, as ever; the expiry on stderr. */
static int print_value(const char *what, const void *key, size_t key_len, const shmkv_value *v,
		       uint32_t expires, const char *hint)
{
	long bad = value_strlist_bad(v);
	if (bad >= 0) /* a string list's strings are checked as they are read */
		return p_err("%s: strlist string %ld is damaged (its bounds, its NUL, or not "
			     "UTF-8)%s", what, bad, hint ? hint : "");
	if (!json_output) {
		value_plain(stdout, v);
		if (expires) {
			char t[40];
			expiry_text(t, sizeof t, expires);
			fflush(stdout);
			fprintf(stderr, "%s: expires %s (%" PRIu32 ")\n", BIN_NAME, t, expires);
		}
		return EXIT_OK;
	}
	struct json *w = &json_out;
	json_obj_begin(w, NULL);
	json_key_member(w, key, key_len);
	json_str(w, "type", shmkv_type_name(v->type));
	json_name(w, "value");
	value_json(w, v);
	if (expires)
		json_u64(w, "expires", expires);
	json_obj_end(w);
	return EXIT_OK;
}

int get_verb(int argc, char **argv, const struct get_source *src)
{
	static const struct option opts[] = {
		VERB_LONGOPTS,
		{"key-base64", no_argument, NULL, 'k'},
		{"root", required_argument, NULL, 'r'},
		{NULL, 0, NULL, 0},
	};
	static const struct option opts_no_root[] = {
		VERB_LONGOPTS,
		{"key-base64", no_argument, NULL, 'k'},
		{NULL, 0, NULL, 0},
	};
	bool key_b64 = false;
	int c, rc;
	verb_getopt_reset();
	while ((c = getopt_long(argc, argv, src->takes_root ? "+" VERB_SHORTOPTS "r:" : "+" VERB_SHORTOPTS,
				src->takes_root ? opts : opts_no_root, NULL)) != -1) {
		if (c == 'k')
			key_b64 = true;
		else if (c == 'r')
			root_option = optarg;
		else if ((rc = verb_common_opt(c, argv, src->help, src->object)) >= 0)
			return rc;
	}
	if (argc - optind != 2)
		return p_usage(src->object, "get: expected %s", src->usage);
	const char *arg = argv[optind], *key_arg = argv[optind + 1];

	unsigned char *decoded = NULL;
	const void *key = key_arg;
	size_t key_len = strlen(key_arg);
	if (key_b64) {
		decoded = malloc(key_len / 4 * 3 + 3);
		long n = decoded ? base64_decode(key_arg, decoded) : -1;
		if (n < 0) {
			free(decoded);
			return p_usage(src->object, "get: KEY is not valid base64");
		}
		key = decoded;
		key_len = (size_t)n;
	}
	if (key_len > SHMKV_MAX_KEY_LEN) {
		free(decoded);
		return p_err("key is %zu bytes, keys are at most %u", key_len, SHMKV_MAX_KEY_LEN);
	}

	shmkv *db;
	if ((rc = src->open(arg, &db))) {
		free(decoded);
		return rc;
	}
	char what[256];
	snprintf(what, sizeof what, "%s%s", src->what_prefix ? src->what_prefix : "", arg);
	shmkv_value v;
	char why[512];
	/* the reader's lookup, every offset bounds-checked, with the reason */
	int err = shmkv_get_diag(db, key, key_len, &v, why, sizeof why);
	uint32_t expires = 0;
	if (!err && shmkv_get_expires(db, key, key_len, &expires) != 0)
		expires = 0; /* found a moment ago: cannot fail */
	if (err == SHMKV_ENOTFOUND) {
		rc = EXIT_NEGATIVE;
		if (strstr(why, "expired"))
			p_err("key not found: %s", why);
		else
			p_err("key not found");
	} else if (err == SHMKV_ECORRUPT) {
		rc = p_err("%s: %s%s", what, why, src->corrupt_hint ? src->corrupt_hint : "");
	} else if (err) {
		rc = p_err("%s: %s", what, shmkv_strerror(err));
	} else {
		rc = print_value(what, key, key_len, &v, expires, src->corrupt_hint);
	}
	shmkv_close(db);
	free(decoded);
	return rc;
}
