/* source.h - the source files of one compilation, kept whole so diagnostics
 * can show any line. A location's file field indexes this table (1-based). */
#ifndef NC_SOURCE_H
#define NC_SOURCE_H

#include "base.h"

typedef struct src_file {
    char *path;
    char *text;          /* NUL-terminated copy; embedded NULs are rejected by the lexer */
    size_t len;
    nc_loc imported_at;  /* the `import` that first loaded it; file 0 for a file netc was given */
    nc_loc cycle_at;     /* an `import` of it from a file it imports (a cycle): file 0 for none */
} src_file;

typedef struct src_table {
    src_file *files;
    uint32_t nfiles;
} src_table;

/* Add a file's contents; returns its 1-based id. */
uint32_t src_add(src_table *t, const char *path, const char *text, size_t len);
/* Read a file from disk; 0 and a message in err if it cannot be read. */
uint32_t src_load(src_table *t, const char *path, char *err, size_t errcap);
const src_file *src_get(const src_table *t, uint32_t id);
/* Record that file id was loaded by the import at `at`, so diagnostics in it
 * can say which import brought it in. The first import counts; one that
 * closes a cycle (from the file itself or from a file it imports) is kept
 * apart as its cycle_at, so the chain of imports stays finite. */
void src_set_imported_at(src_table *t, uint32_t id, nc_loc at);
/* The text of line `line` (1-based) of file id, without its newline. */
const char *src_line(const src_table *t, uint32_t id, uint32_t line, size_t *len);
void src_free(src_table *t);
/* The length in bytes of the well-formed UTF-8 character at s (1 for ASCII),
 * reading at most avail bytes; 0 when the bytes there are not one: a stray
 * continuation byte, a cut-short, overlong or surrogate sequence, past U+10FFFF. */
size_t src_utf8_len(const char *s, size_t avail);
/* The code point of a character src_utf8_len accepted, of n bytes. */
uint32_t src_utf8_decode(const char *s, size_t n);

#define SRC_MAX_BYTES (16u << 20)   /* a .net file larger than this is refused */

#endif
