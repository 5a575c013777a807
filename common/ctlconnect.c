/* ctlconnect.c - see ctlconnect.h. */
#include "ctlconnect.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int ctl_connect(const char *root, int sock_flags)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int dirfd = -1, err = 0;
	if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", root, CTL_SOCK_NAME) >=
	    sizeof sa.sun_path) {
		dirfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dirfd < 0)
			return -errno;
		snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dirfd, CTL_SOCK_NAME);
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | sock_flags, 0);
	if (fd < 0)
		err = -errno;
	else if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		err = -errno;
	if (dirfd >= 0)
		close(dirfd);
	if (err) {
		if (fd >= 0)
			close(fd);
		return err;
	}
	return fd;
}
