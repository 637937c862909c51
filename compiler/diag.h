/* diag.h - diagnostics: collected, capped, printed as
 *   file:line:col: error: message
 *     source line
 *         ^
 *   hint: ...
 * and, for one in a file an `import` loaded, a note at that import (when the
 * file differs from the last error's: a run of errors in a module says it
 * once), unless a note at the call that expanded the code follows.
 * User errors go here; netc's own bugs go through NC_BUG. */
#ifndef NC_DIAG_H
#define NC_DIAG_H

#include "base.h"
#include "source.h"

#include <stdio.h>

typedef enum diag_level { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } diag_level;

typedef struct diag_ctx {
    const src_table *sources;
    FILE *out;                 /* where diagnostics go (stderr by default) */
    int errors, warnings;
    int max_errors;            /* stop reporting (not counting) after this many */
    bool werror;               /* -Werror: warnings count as errors */
    bool color;
    /* the last few reported (loc, message) pairs, to drop exact repeats that
     * come from one function instantiated many times */
    uint64_t recent[64];
    int nrecent;
    uint32_t last_file;        /* the file of the last error or warning printed */
    bool call_noted;           /* set while the caller reports one it follows with a note at the call that
                                  expanded the code: that locates it in the user's file, no import note */
} diag_ctx;

void diag_init(diag_ctx *d, const src_table *sources, FILE *out);
void diag_report(diag_ctx *d, diag_level level, nc_loc loc, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void diag_vreport(diag_ctx *d, diag_level level, nc_loc loc, const char *hint, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));
#define diag_error(d, loc, ...) diag_report((d), DIAG_ERROR, (loc), NULL, __VA_ARGS__)
#define diag_warning(d, loc, ...) diag_report((d), DIAG_WARNING, (loc), NULL, __VA_ARGS__)
/* Errors, counting warnings too under -Werror. */
int diag_failed(const diag_ctx *d);
/* A warning of netc's own about its command line, with no source line: "netc:
 * warning: MESSAGE" and its hint; under -Werror (werror) the error it then
 * is, "netc: error: MESSAGE [-Werror]". Returns werror: whether it failed
 * the command (a bad command line, exit status 2). */
bool diag_cli_warning(FILE *out, bool werror, const char *hint, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
