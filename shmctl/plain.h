/* plain.h - parsed JSON (json_parse.h) as plain text: aligned "key  value"
 * lines for an object, a table for an array of objects. For the loader's
 * replies (cache.c). */
#ifndef SHMCTL_PLAIN_H
#define SHMCTL_PLAIN_H

#include <stdio.h>

#include "jv.h"

/* Prints obj's members as "key  value" lines, the names padded to one width.
 * Nested objects are flattened ("last_load.ms"); arrays of scalars are
 * joined with ", "; arrays of objects follow the lines as tables, each under
 * "name:". Strings print raw, null as "-", and numbers named "bytes", "size",
 * "*_bytes" or "*_size" also in binary units: "1073741824 (1.00 GiB)".
 * Members named in skip (NULL-terminated, may be NULL) are left out. */
void plain_object(FILE *f, const jv *obj, const char *const *skip);

/* Prints an array of objects as a table: a header of the upper-cased member
 * names, then a row per object, columns padded to their widest cell (the
 * last one not). cols (NULL-terminated) picks the members and their order;
 * NULL shows every member in the order first seen. Absent members show "-";
 * nested values show as compact JSON; numbers in "bytes" or "size" columns
 * (as plain_object names them) in binary units only. Each line starts with indent. */
void plain_table(FILE *f, const jv *arr, const char *const *cols, const char *indent);

#endif /* SHMCTL_PLAIN_H */
