/* atomic_file.h - files that are replaced whole or not at all: written to a
 * temporary beside the target, synced to disk, then renamed over it, so a
 * crash (or kill -9) leaves the old file or the new one, never half of one.
 * Modules, weights, checkpoints and .npy outputs are written this way.
 *
 * The target is what the path names in the end: a symbolic link is followed
 * (the file it points to is replaced, the link stays), and a device or FIFO
 * (`-o /dev/null`) is written in place, since renaming over it would put a
 * regular file where the device was. */
#ifndef NRT_ATOMIC_FILE_H
#define NRT_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct atomic_file {
    FILE *f;                   /* write here */
    bool in_place;             /* f is the target itself (a device or FIFO): nothing to rename */
    char target[4096];         /* the file replaced: the path, or where its links lead */
    char tmp[4160];
} atomic_file;

/* 0, or -1 with err naming path. */
int atomic_file_open(atomic_file *a, const char *path, char *err, size_t errcap);
/* written_ok: every write succeeded. Syncs, closes and renames onto the
 * target; on any failure removes the temporary. 0, or -1 with err naming path. */
int atomic_file_commit(atomic_file *a, const char *path, bool written_ok, char *err, size_t errcap);
/* Whether path could be written now (its temporary made and removed), so a
 * long run finds out before its work, not after. 0, or -1 with err. */
int atomic_file_check(const char *path, char *err, size_t errcap);

/* The directory such files land in, made with its parents if missing. 0, or
 * -1 with err when it is not a directory this process may write to. */
int atomic_file_make_dir(const char *dir, char *err, size_t errcap);

#endif
