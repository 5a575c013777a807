/* value.h - printing shmkv values: as JSON (get -j, dump) and as plain text.
 *
 * JSON form, which the builder's JSONL reader reads back to the same bits:
 *   bytes            base64 string
 *   string           string
 *   i64, i64list     integers
 *   bool             true / false
 *   f64, f64list     "%.17g", with ".0" added when neither '.' nor 'e' shows
 *   f32list          "%.9g", same rule
 *   non-finite       the strings "inf", "-inf", "nan" (the positive quiet NaN
 *                    without payload), else "nan:0x<hex of the bits>"
 *   strlist          array of strings
 * Plain form: strings raw, bytes base64, numbers in the shortest form that
 * reads back exactly, lists as [a, b], string lists as ["a", "b"].
 */
#ifndef SHMCTL_VALUE_H
#define SHMCTL_VALUE_H

#include <stdbool.h>
#include <stdio.h>

#include <shmkv.h>

#include "json.h"

#define NUM_BUF 40

/* Format a number for JSON into buf[NUM_BUF]; returns true when the text is
 * a token to be written as a JSON string (inf, nan...), false for a number. */
bool fmt_f64_json(char *buf, double v);
bool fmt_f32_json(char *buf, float v);

/* True when every string in v (string, strlist) is valid UTF-8. */
bool value_utf8_ok(const shmkv_value *v);

/* Writes v as one JSON value (strings not UTF-8 get U+FFFD: check first). */
void value_json(struct json *w, const shmkv_value *v);

/* Writes v as plain text and a newline. */
void value_plain(FILE *f, const shmkv_value *v);

#endif /* SHMCTL_VALUE_H */
