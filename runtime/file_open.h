/* file_open.h - opening an input file for reading, refusing what is not a
 * regular file. fopen of a FIFO blocks until a writer comes (forever, for a
 * mistyped path), and a directory opens and then reads as an empty or short
 * file, so each reader would report it as "bad magic"; every reader of
 * models, modules, weights, arrays and data goes through here instead. */
#ifndef NRT_FILE_OPEN_H
#define NRT_FILE_OPEN_H

#include <stdio.h>

/* What npy_read, safetensors_load_params and module_read return when the
 * file could not be opened or read, as distinct from -1 for a file whose
 * contents are wrong (the C API's NRT_ERR_IO against NRT_ERR_FORMAT). */
#define FILE_OPEN_IO_ERROR (-2)

/* A stream open for reading on path, or NULL with *why set to the reason
 * ("is a directory", "not a regular file (a FIFO)", or strerror's text) for
 * a message of the form "<path>: <why>". Opening never blocks. */
FILE *file_open_regular(const char *path, const char **why);
/* The same as a descriptor (for gzdopen), or -1 with *why set. */
int file_open_regular_fd(const char *path, const char **why);

#endif
