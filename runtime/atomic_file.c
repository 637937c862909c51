/* atomic_file.c - temporary, fsync, rename. */
#include "atomic_file.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
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

int atomic_file_make_dir(const char *dir, char *err, size_t errcap)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path) {
        snprintf(err, errcap, "%s: path too long", dir);
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
        snprintf(err, errcap, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errcap, "%s: not a directory", dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errcap, "%s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}
