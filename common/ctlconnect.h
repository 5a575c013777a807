/* ctlconnect.h - a client's connection to the loader's control socket,
 * ROOT/control.sock (lib/PROTOCOL.md "Control socket"): the one connect of
 * shmctl and shmkv-http, so that both reach a root of any length. */
#ifndef SHMKV_COMMON_CTLCONNECT_H
#define SHMKV_COMMON_CTLCONNECT_H

#define CTL_SOCK_NAME "control.sock"

/* Connects to ROOT/control.sock; a root too long for sun_path is reached
 * through /proc/self/fd of its directory. sock_flags: 0 or SOCK_NONBLOCK
 * (CLOEXEC always). The socket, or -errno. */
int ctl_connect(const char *root, int sock_flags);

#endif
