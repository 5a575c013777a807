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

/* The key as it is shown in a message: in double quotes, its printable
 * characters (UTF-8 included) as they are, '"' and '\\' after a backslash,
 * control characters and bytes that are not UTF-8 as \\n, \\t or \\xNN; the
 * first KEY_SHOWN bytes of a longer key, then how long it is. */
#define KEY_SHOWN 256
static void key_text(char *buf, size_t n, const unsigned char *key, size_t len)
{
	size_t o = 0, shown = len > KEY_SHOWN ? KEY_SHOWN : len;
#define PUT(...) (o += (size_t)snprintf(buf + o, o < n ? n - o : 0, __VA_ARGS__))
	PUT("\"");
	for (size_t i = 0; i < shown; i++) {
		unsigned char c = key[i];
		size_t seq = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 1;
		/* a whole UTF-8 character past the C1 controls (U+0080-U+009F) */
		if (seq > 1 && i + seq <= shown && shmkv_utf8_valid(key + i, seq) &&
		    !(c == 0xC2 && key[i + 1] < 0xA0)) {
			PUT("%.*s", (int)seq, (const char *)key + i);
			i += seq - 1;
		} else if (c == '"' || c == '\\') {
			PUT("\\%c", c);
		} else if (c == '\n') {
			PUT("\\n");
		} else if (c == '\t') {
			PUT("\\t");
		} else if (c < 0x20 || c >= 0x7F) {
			PUT("\\x%02x", c);
		} else {
			PUT("%c", c);
		}
	}
	PUT("\"");
	if (shown < len)
		PUT("... (%zu bytes)", len);
#undef PUT
}

/* Reports an absent key (exit 1), naming it and where it was looked up:
 * "key not found: "KEY" in image FILE[: why]" on stderr, or with -j
 * {"error": that, "key": KEY} ("key_base64" for a key that is not UTF-8). */
static int not_found(const void *key, size_t key_len, const char *where, const char *why)
{
	char shown[KEY_SHOWN * 4 + 64], msg[sizeof shown + 4200 + 600];
	key_text(shown, sizeof shown, key, key_len);
	snprintf(msg, sizeof msg, "key not found: %s in %s%s%s", shown, where, why ? ": " : "",
		 why ? why : "");
	if (!json_output) {
		fflush(stdout);
		fprintf(stderr, "%s: error: %s\n", BIN_NAME, msg);
		return EXIT_NEGATIVE;
	}
	struct json w;
	fflush(stdout);
	json_init_file(&w, stdout, pretty_output);
	json_obj_begin(&w, NULL);
	json_str(&w, "error", msg);
	json_key_member(&w, key, key_len);
	json_obj_end(&w);
	fflush(stdout);
	return EXIT_NEGATIVE;
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
	char what[4200]; /* "cache NAME" or "image FILE" */
	snprintf(what, sizeof what, "%s%s", src->what_prefix ? src->what_prefix : "", arg);
	shmkv_value v;
	char why[512];
	/* the reader's lookup, every offset bounds-checked, with the reason */
	int err = shmkv_get_diag(db, key, key_len, &v, why, sizeof why);
	uint32_t expires = 0;
	if (!err && shmkv_get_expires(db, key, key_len, &expires) != 0)
		expires = 0; /* found a moment ago: cannot fail */
	if (err == SHMKV_ENOTFOUND) {
		snprintf(what, sizeof what, "%s %s", src->object, arg);
		rc = not_found(key, key_len, what, strstr(why, "expired") ? why : NULL);
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
