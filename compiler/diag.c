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

/* Terminal columns of a character: 2 for the wide (CJK, Hangul, fullwidth,
 * emoji), 0 for a combining mark, else 1; -1 for one not to print as itself
 * (C1 controls, line separators, the bidi controls that reorder what a
 * terminal shows). A short table, not the locale's: what matters is that
 * the caret's padding takes the columns the line took. */
static int char_width(uint32_t cp)
{
    static const struct { uint32_t lo, hi; int w; } ranges[] = {
        {0x80, 0x9f, -1},        {0x300, 0x36f, 0},       {0x483, 0x489, 0},       {0x1100, 0x115f, 2},
        {0x1ab0, 0x1aff, 0},     {0x1dc0, 0x1dff, 0},     {0x200b, 0x200f, 0},     {0x2028, 0x202e, -1},
        {0x2066, 0x2069, -1},    {0x20d0, 0x20ff, 0},     {0x2e80, 0x303e, 2},     {0x3041, 0x33ff, 2},
        {0x3400, 0x4dbf, 2},     {0x4e00, 0x9fff, 2},     {0xa000, 0xa4cf, 2},     {0xac00, 0xd7a3, 2},
        {0xf900, 0xfaff, 2},     {0xfe00, 0xfe0f, 0},     {0xfe20, 0xfe2f, 0},     {0xfe30, 0xfe4f, 2},
        {0xff00, 0xff60, 2},     {0xffe0, 0xffe6, 2},     {0x1f300, 0x1f64f, 2},   {0x1f900, 0x1f9ff, 2},
        {0x20000, 0x3fffd, 2},
    };
    for (size_t i = 0; i < NC_COUNT(ranges); i++)
        if (cp >= ranges[i].lo && cp <= ranges[i].hi) return ranges[i].w;
    return 1;
}

/* Print the line with what cannot be shown as itself (a control byte, a byte
 * that is not UTF-8) as one '?', so garbage input cannot mess up the terminal,
 * a tab as one space, and a caret under the column: the caret's padding takes
 * the columns each character before it took, so it lands under the character
 * the column's byte is in. A long line is shown as a window around the
 * column, with "..." marking the cut ends. */
static void print_source_line(diag_ctx *d, nc_loc loc)
{
    size_t len;
    const char *line = src_line(d->sources, loc.file, loc.line, &len);
    if (!line) return;
    const size_t width = 160;
    size_t col = loc.col ? loc.col - 1 : 0, start = 0;
    if (col > len) col = len;
    /* a CRLF line ends before its \r; a \r alone (refused) ends what is shown */
    const char *cr = memchr(line + col, '\r', len - col);
    if (cr) len = (size_t)(cr - line);
    if (col > width / 2 && len > width) {
        start = col - width / 2;
        while (start > 0 && ((unsigned char)line[start] & 0xc0) == 0x80) start--;   /* whole characters */
    }
    size_t end = start + width < len ? start + width : len, pad = 0;
    fputs(start ? "  ..." : "  ", d->out);
    for (size_t i = start, n; i < end; i += n) {
        n = src_utf8_len(line + i, end - i);
        int w = n > 1 ? char_width(src_utf8_decode(line + i, n)) : 1;
        unsigned char c = (unsigned char)line[i];
        if (n > 1 && w >= 0) fwrite(line + i, 1, n, d->out);
        else fputc(n == 1 && c == '\t' ? ' ' : n == 1 && c >= 32 && c != 127 ? c : '?', d->out);
        if (n == 0) n = 1;
        if (w < 0) w = 1;
        if (i + n <= col) pad += (size_t)w;
    }
    fputs(end < len ? "...\n  " : "\n  ", d->out);
    if (start) fputs("   ", d->out);
    for (size_t i = 0; i < pad; i++) fputc(' ', d->out);
    fputs("^\n", d->out);
}

/* The import a file's chain goes on through: the one that first loaded it,
 * else (the file netc was given, imported back by a file it imports) the
 * one that closed that cycle; file 0 for neither. */
static nc_loc import_link(const src_file *f)
{
    return f->imported_at.file ? f->imported_at : f->cycle_at;
}

/* Whether the chain from file `from`, steps links long, has passed through
 * file id: the chain of a cycle ends where it comes back round. */
static bool chain_has(const src_table *t, uint32_t from, uint32_t steps, uint32_t id)
{
    for (uint32_t n = 0; from && n <= steps; n++) {
        if (from == id) return true;
        const src_file *f = src_get(t, from);
        from = f ? import_link(f).file : 0;
    }
    return false;
}

/* "In file included from": for a diagnostic in an imported file, the import
 * that loaded it, then the one that loaded that file, and so on to the file
 * netc was given. The error already names the file; each note names the
 * module file it is about, as the import spells it less the directory.
 * Through an import cycle that comes back to the file netc was given, the
 * chain goes on round the cycle and stops before a file it has named, so an
 * import cycle's error shows each import that closes it. */
static void print_import_chain(diag_ctx *d, uint32_t file)
{
    const src_file *f = src_get(d->sources, file);
    for (uint32_t n = 0; f && n < d->sources->nfiles; n++) {
        nc_loc at = import_link(f);
        const src_file *by = src_get(d->sources, at.file);
        if (!by || chain_has(d->sources, file, n, at.file)) return;
        const char *slash = strrchr(f->path, '/');
        fprintf(d->out, "%s:%u:%u: note: %s is imported here\n", by->path, at.line, at.col, slash ? slash + 1 : f->path);
        print_source_line(d, at);
        f = by;
    }
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
    if (level != DIAG_NOTE && !d->call_noted) {
        if (loc.file != d->last_file) print_import_chain(d, loc.file);
        d->last_file = loc.file;
    }
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
