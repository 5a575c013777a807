/* value.h - printing shmkv values: as JSON (shmctl get -j, dump; shmkv-http) and as plain text.
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
#ifndef SHMKV_COMMON_VALUE_H
#define SHMKV_COMMON_VALUE_H

#include <stdbool.h>
#include <stdio.h>

#include <shmkv.h>

#include "json.h"

#define NUM_BUF 40

/* Format a number for JSON into buf[NUM_BUF]; returns true when the text is
 * a token to be written as a JSON string (inf, nan...), false for a number. */
bool fmt_f64_json(char *buf, double v);
bool fmt_f32_json(char *buf, float v);

/* A get reads a string list's strings one by one (shmkv_strlist_at): the
 * first that is damaged (its bounds, its NUL, or not UTF-8), 0 for a list
 * whose count does not fit, or -1 when v is no strlist or all are sound. */
long value_strlist_bad(const shmkv_value *v);

/* Writes v as one JSON value (a strlist: check value_strlist_bad first;
 * strings are UTF-8, the reader refuses others). */
void value_json(struct json *w, const shmkv_value *v);

/* Writes v as plain text and a newline. */
void value_plain(FILE *f, const shmkv_value *v);

#endif /* SHMKV_COMMON_VALUE_H */
