/* atomic_file.c - temporary, fsync, rename. */
#include "atomic_file.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int atomic_file_open(atomic_file *a, const char *path, char *err, size_t errcap)
{
    /* the pid keeps two writers of one target from sharing a temporary */
    if ((size_t)snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof a->tmp) {
        snprintf(err, errcap, "%s: path too long", path);
        return -1;
    }
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        snprintf(err, errcap, "%s: %s", a->tmp, strerror(errno));
        return -1;
    }
    return 0;
}

int atomic_file_commit(atomic_file *a, const char *path, bool written_ok, char *err, size_t errcap)
{
    bool ok = written_ok && fflush(a->f) == 0 && fsync(fileno(a->f)) == 0;
    ok = fclose(a->f) == 0 && ok;
    a->f = NULL;
    if (ok && rename(a->tmp, path) == 0) return 0;
    snprintf(err, errcap, "%s: write failed: %s", path, strerror(errno));
    remove(a->tmp);
    return -1;
}
