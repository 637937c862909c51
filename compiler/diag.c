/* diag.c - collecting and printing diagnostics with the source line and a caret. */
#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void diag_init(diag_ctx *d, const src_table *sources, FILE *out)
{
    memset(d, 0, sizeof *d);
    d->sources = sources;
    d->out = out ? out : stderr;
    d->max_errors = 50;
}

/* True if this exact diagnostic was printed recently (a function body checked
 * once per call site reports the same problem once). */
static bool seen_recently(diag_ctx *d, nc_loc loc, const char *msg)
{
    uint64_t h = nc_fnv1a(NC_FNV1A_BASIS, &loc, sizeof loc);
    h = nc_fnv1a(h, msg, strlen(msg));
    for (int i = 0; i < d->nrecent; i++)
        if (d->recent[i] == h) return true;
    d->recent[d->nrecent++ % 64] = h;
    if (d->nrecent > 64) d->nrecent = 64;
    return false;
}

/* Print the line with non-printable bytes shown as '?', so garbage input
 * cannot mess up the terminal, and a caret under the column. A long line is
 * shown as a window around the column, with "..." marking the cut ends. */
static void print_source_line(diag_ctx *d, nc_loc loc)
{
    size_t len;
    const char *line = src_line(d->sources, loc.file, loc.line, &len);
    if (!line) return;
    if (len && line[len - 1] == '\r') len--;   /* a CRLF file's line ends before its \r */
    const size_t width = 160;
    size_t col = loc.col ? loc.col - 1 : 0, start = 0;
    if (col > len) col = len;
    if (col > width / 2 && len > width) {
        start = col - width / 2;
        while (start > 0 && ((unsigned char)line[start] & 0xc0) == 0x80) start--;   /* whole characters */
    }
    size_t end = start + width < len ? start + width : len;
    fputs(start ? "  ..." : "  ", d->out);
    for (size_t i = start; i < end; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c >= 0x80) {            /* copy a well-formed UTF-8 sequence, else '?' */
            size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
            bool ok = n && i + n <= end;
            for (size_t k = 1; ok && k < n; k++) ok = ((unsigned char)line[i + k] & 0xc0) == 0x80;
            if (ok) {
                fwrite(line + i, 1, n, d->out);
                i += n - 1;
                continue;
            }
            c = '?';
        }
        fputc(c == '\t' ? ' ' : (c < 32 || c == 127) ? '?' : c, d->out);
    }
    fputs(end < len ? "...\n  " : "\n  ", d->out);
    if (start) fputs("   ", d->out);
    for (size_t i = start; i < col && i < end; i++) {
        unsigned char c = (unsigned char)line[i];
        if ((c & 0xc0) != 0x80) fputc(' ', d->out);   /* one column per UTF-8 character */
    }
    fputs("^\n", d->out);
}

static void print_report(diag_ctx *d, diag_level level, nc_loc loc, const char *hint, const char *msg)
{
    if (level != DIAG_NOTE && seen_recently(d, loc, msg)) return;
    if (level == DIAG_ERROR) d->errors++;
    if (level == DIAG_WARNING) d->warnings++;
    if (level == DIAG_ERROR && d->errors > d->max_errors) {
        if (d->errors == d->max_errors + 1) fprintf(d->out, "netc: too many errors; stopping\n");
        return;
    }
    static const char *names[] = {"error", "warning", "note"};
    /* under -Werror a warning fails the command: it is said as the error it is, and why */
    const bool promoted = level == DIAG_WARNING && d->werror;
    const char *name = promoted ? "error" : names[level], *why = promoted ? " [-Werror]" : "";
    const src_file *f = src_get(d->sources, loc.file);
    if (f && loc.line)
        fprintf(d->out, "%s:%u:%u: %s: %s%s\n", f->path, loc.line, loc.col, name, msg, why);
    else
        fprintf(d->out, "%s: %s: %s%s\n", f ? f->path : "netc", name, msg, why);
    if (f && loc.line) print_source_line(d, loc);
    if (hint && *hint) fprintf(d->out, "  hint: %s\n", hint);
}

void diag_report(diag_ctx *d, diag_level level, nc_loc loc, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vreport(d, level, loc, hint, fmt, ap);
    va_end(ap);
}

void diag_vreport(diag_ctx *d, diag_level level, nc_loc loc, const char *hint, const char *fmt, va_list ap)
{
    /* the whole message: a long name or shape in it is the user's, never cut */
    char *msg = nc_xvasprintf(fmt, ap);
    print_report(d, level, loc, hint, msg);
    free(msg);
}

int diag_failed(const diag_ctx *d) { return d->errors + (d->werror ? d->warnings : 0); }

bool diag_cli_warning(FILE *out, bool werror, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(out, "netc: %s: ", werror ? "error" : "warning");
    vfprintf(out, fmt, ap);
    va_end(ap);
    fprintf(out, "%s\n", werror ? " [-Werror]" : "");
    if (hint && *hint) fprintf(out, "  hint: %s\n", hint);
    return werror;
}
