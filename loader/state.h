/* state.h - ROOT/NAME.state: what a restarted loader needs beyond the
 * control segment (the rollback candidate, the next load id, the figures of
 * the loads). Text, "key=value" lines, replaced atomically (temp + rename). */
#ifndef LOADER_STATE_H
#define LOADER_STATE_H

#include <stddef.h>
#include <sys/types.h>

#include "loader.h"

/* Writes c's state into ROOT (root_fd; root for messages). Returns 0 or
 * -errno (why says what failed). */
int state_write(int root_fd, const char *root, const struct cache *c, char *why,
		size_t why_len);
/* Reads into c, from fd (ROOT/NAME.state, opened and checked by the caller;
 * closed here): next_load, stats, and (if present) rb path and generation
 * into c->rb.path / c->rb.generation (unchecked: the caller inspects the
 * file). Returns 0 or -errno. */
int state_read(int fd, struct cache *c);
void state_remove(int root_fd, const char *name);

#endif /* LOADER_STATE_H */
