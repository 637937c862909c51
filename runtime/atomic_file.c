/* atomic_file.c - temporary, fsync, rename. */
#include "atomic_file.h"
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What path names in the end: path itself, or where its chain of symbolic
 * links leads, which need not exist yet (a link made for the output first). */
static int resolve_target(const char *path, char *target, size_t cap, char *err, size_t errcap)
{
    if ((size_t)snprintf(target, cap, "%s", path) >= cap) goto too_long;
    for (int depth = 0; depth < 40; depth++) {   /* the kernel's own limit on a chain */
        struct stat st;
        if (lstat(target, &st) != 0 || !S_ISLNK(st.st_mode)) return 0;
        char link[4096];
        ssize_t n = readlink(target, link, sizeof link - 1);
        if (n < 0 || (size_t)n >= sizeof link - 1) {
            nc_errf(err, errcap, "%s: cannot read the symbolic link: %s", path, n < 0 ? strerror(errno) : "too long");
            return -1;
        }
        link[n] = 0;
        char *slash = strrchr(target, '/');
        if (link[0] == '/' || !slash) {   /* absolute, or relative to the current directory like target */
            if ((size_t)snprintf(target, cap, "%s", link) >= cap) goto too_long;
        } else {   /* relative to the directory the link lies in */
            if ((size_t)(slash + 1 - target) + (size_t)n >= cap) goto too_long;
            memcpy(slash + 1, link, (size_t)n + 1);
        }
    }
    nc_errf(err, errcap, "%s: too many levels of symbolic links", path);
    return -1;
too_long:
    nc_errf(err, errcap, "%s: path too long", path);
    return -1;
}

/* A FIFO opened only where something reads it (else NULL, errno ENXIO): a
 * blocking open would wait for a reader through Ctrl-C and SIGTERM, whose
 * handlers (netc train's) let it restart. */
static FILE *open_fifo(const char *path)
{
    int fd = open(path, O_WRONLY | O_NONBLOCK);
    if (fd < 0) return NULL;
    FILE *f = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0 ? fdopen(fd, "wb") : NULL;
    if (!f) close(fd);
    return f;
}

int atomic_file_open(atomic_file *a, const char *path, char *err, size_t errcap)
{
    memset(a, 0, sizeof *a);
    if (resolve_target(path, a->target, sizeof a->target, err, errcap) != 0) return -1;
    struct stat st;
    if (stat(a->target, &st) == 0 && S_ISDIR(st.st_mode)) {
        nc_errf(err, errcap, "%s: is a directory", path);
        return -1;
    }
    a->in_place = stat(a->target, &st) == 0 && !S_ISREG(st.st_mode);
    /* the pid and a number of the process's own keep two writers of one
     * target from sharing a temporary, be they processes or threads (two
     * sessions storing the kernels they compiled: one truncated the other's) */
    static atomic_uint writers;
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld.%u", a->target, (long)getpid(), atomic_fetch_add(&writers, 1));
    a->f = a->in_place && S_ISFIFO(st.st_mode) ? open_fifo(a->target) : fopen(a->in_place ? a->target : a->tmp, "wb");
    if (!a->f && a->in_place && errno == ENXIO) {
        snprintf(err, errcap, "%s: a FIFO that nothing reads (start its reader first)", path);
        return -1;
    }
    if (!a->f) {
        nc_errf(err, errcap, "%s: cannot write %s: %s", path, a->in_place ? "it" : "a file beside it", strerror(errno));
        return -1;
    }
    return 0;
}

int atomic_file_commit(atomic_file *a, const char *path, bool written_ok, char *err, size_t errcap)
{
    errno = 0;
    bool ok = written_ok && fflush(a->f) == 0 && (a->in_place || fsync(fileno(a->f)) == 0);
    int why = errno;
    ok = fclose(a->f) == 0 && ok;
    a->f = NULL;
    if (!why) why = errno;
    if (ok && (a->in_place || rename(a->tmp, a->target) == 0)) return 0;
    nc_errf(err, errcap, "%s: write failed: %s", path, why ? strerror(why) : strerror(errno ? errno : EIO));
    if (!a->in_place) remove(a->tmp);
    return -1;
}

int atomic_file_check(const char *path, char *err, size_t errcap)
{
    struct stat st;   /* a device or FIFO is written in place: opened now, a FIFO's reader would see its end */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        if (access(path, W_OK) == 0) return 0;
        snprintf(err, errcap, "%s: cannot write it: %s", path, strerror(errno));
        return -1;
    }
    atomic_file a;
    if (atomic_file_open(&a, path, err, errcap) != 0) return -1;
    fclose(a.f);
    if (!a.in_place) remove(a.tmp);
    return 0;
}

int atomic_file_make_dir(const char *dir, char *err, size_t errcap)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path) {
        nc_errf(err, errcap, "%s: path too long", dir);
        return -1;
    }
    for (char *p = path + 1; *p; p++)   /* the parents first; a failure shows at the last one */
        if (*p == '/') {
            *p = 0;
            mkdir(path, 0755);
            *p = '/';
        }
    struct stat st;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        nc_errf(err, errcap, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        nc_errf(err, errcap, "%s: not a directory", dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        nc_errf(err, errcap, "%s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}
