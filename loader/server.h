/* server.h - the control socket ROOT/control.sock (server.c). Main thread. */
#ifndef LOADER_SERVER_H
#define LOADER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "loader.h"

/* The limits (loader/README.md, "Control socket limits"). Connections of a
 * uid other than root and the loader's, and of all such uids together; root
 * and the loader's uid have SERVER_CONN_PRIV more of their own. Beyond a
 * limit a connection is told why (reason "busy") and closed. All of them fit
 * in RLIMIT_NOFILE (raised to fit when the hard limit allows) beside
 * SERVER_FD_RESERVE descriptors (at most a quarter of it) kept for loads,
 * the spool, reader scans and BPF exports; with a lower limit the
 * connection limits shrink to fit. */
#define SERVER_CONN_PER_UID 32
#define SERVER_CONN_OTHERS 256
#define SERVER_CONN_PRIV 64
#define SERVER_FD_RESERVE 256
/* Requests a connection runs per turn of the loop (root's and ours first). */
#define SERVER_BUDGET 4
#define SERVER_BUDGET_PRIV 16

/* Binds and listens, starts the reader scanner (readers.h); before the
 * event loop exists. */
int server_open(struct loader *L, char *why, size_t why_len);
/* Adds the socket and the server's other descriptors to L->ep_fd; each
 * entry's data.ptr goes to server_event(). Returns 0 or -errno. */
int server_watch(struct loader *L);
void server_event(struct loader *L, void *ptr, uint32_t events);
void server_deliver(struct loader *L, struct done *d);
void server_reap(void);
void server_close(struct loader *L);

#endif /* LOADER_SERVER_H */
