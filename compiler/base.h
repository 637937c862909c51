/* base.h - things every part of netc shares: fixed limits, source locations,
 * and the one macro for "this is a netc bug", distinct from user errors. */
#ifndef NC_BASE_H
#define NC_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#define NC_MAX_RANK 8       /* tensor rank limit; checked by sema with a diagnostic */
#define NC_MAX_SYMS 16      /* symbolic dims (B, T, ...) in one program */

/* A position in a .net source file. file indexes the source table (0 = none). */
typedef struct nc_loc {
    uint32_t file;
    uint32_t line;   /* 1-based; 0 = unknown */
    uint32_t col;    /* 1-based, in bytes */
} nc_loc;

/* Internal invariant failed: a netc bug, never a user error. Names netc's own
 * source position so the report points at the compiler, not at the model. */
_Noreturn void nc_bug(const char *file, int line, const char *fmt, ...);
#define NC_BUG(...) nc_bug(__FILE__, __LINE__, __VA_ARGS__)
#define NC_ASSERT(c) ((c) ? (void)0 : nc_bug(__FILE__, __LINE__, "assertion failed: %s", #c))

/* Allocation that cannot fail silently: out of memory aborts with a message. */
void *nc_xmalloc(size_t n);
void *nc_xcalloc(size_t n, size_t size);
void *nc_xrealloc(void *p, size_t n);
char *nc_xstrdup(const char *s);

/* A text built in pieces under snprintf's contract: fmt's text goes at
 * buf + at as far as cap allows (buf NUL-terminated whenever cap > at; buf
 * may be NULL with cap 0, to measure), and the result is at plus its whole
 * length, so a caller chains appends and learns the size the whole text
 * needs even where it did not fit. */
size_t nc_appendf(char *buf, size_t cap, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* fmt's whole text on the heap (free it), however long: for messages that
 * name what the user wrote, which no fixed buffer bounds. */
char *nc_xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
char *nc_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* snprintf into an error buffer of cap bytes, for texts that name a path or
 * a tensor of any length: one that does not fit ends in "..." (on a whole
 * UTF-8 character), so that a cut is never silent. */
void nc_errf(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void nc_verrf(char *err, size_t cap, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
/* buf, cap bytes that a text filled: its end made "..." as nc_errf does. */
void nc_text_cut(char *buf, size_t cap);

#define NC_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* v as %g writes it, with more digits where it needs them to read back as
 * v (0.9999999, where %g writes 1): for messages that show a number the
 * user wrote, or a limit to stay within. */
typedef struct nc_number_text { char s[32]; } nc_number_text;
nc_number_text nc_number(double v);

/* FNV-1a: h continued over n bytes (start from NC_FNV1A_BASIS). For keys
 * and checksums, not for security. */
#define NC_FNV1A_BASIS 0xcbf29ce484222325ull
uint64_t nc_fnv1a(uint64_t h, const void *p, size_t n);

#endif
