/* server.h - the control socket ROOT/control.sock (server.c). Main thread. */
#ifndef LOADER_SERVER_H
#define LOADER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "loader.h"

int server_open(struct loader *L, char *why, size_t why_len);
void server_accept(struct loader *L);
void server_client_event(struct loader *L, void *client, uint32_t events);
void server_deliver(struct loader *L, struct done *d);
void server_reap(void);
void server_close(struct loader *L);

#endif /* LOADER_SERVER_H */
