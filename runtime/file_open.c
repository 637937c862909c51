/* file_open.c - open without blocking, fstat, then refuse non-regular files.
 * O_NONBLOCK only keeps the open itself from waiting for a FIFO's writer;
 * it is cleared again before any read. fstat on the descriptor, not stat on
 * the path, so the file checked is the file read. */
#include "file_open.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* O_CLOEXEC is POSIX 2008 but some libcs hide it under _POSIX_C_SOURCE. */
#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

static const char *kind_refused(mode_t mode)
{
    if (S_ISDIR(mode)) return "is a directory";
    if (S_ISFIFO(mode)) return "not a regular file (a FIFO)";
    if (S_ISCHR(mode)) return "not a regular file (a character device)";
    if (S_ISBLK(mode)) return "not a regular file (a block device)";
    if (S_ISSOCK(mode)) return "not a regular file (a socket)";
    return "not a regular file";
}

int file_open_regular_fd(const char *path, const char **why)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    struct stat st;
    int flags;
    if (fstat(fd, &st) != 0 || (flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        *why = kind_refused(st.st_mode);
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    return fd;
}

FILE *file_open_regular(const char *path, const char **why)
{
    int fd = file_open_regular_fd(path, why);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        *why = strerror(errno);
        close(fd);
    }
    return f;
}
