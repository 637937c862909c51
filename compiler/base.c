/* base.c - bug reports and checked allocation. */
#include "base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void nc_bug(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "netc: internal error at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nthis is a bug in netc, not in your model; please report it\n");
    abort();
}

static void *check_alloc(void *p, size_t n)
{
    if (!p && n) {
        fprintf(stderr, "netc: out of memory (asked for %zu bytes)\n", n);
        abort();
    }
    return p;
}

void *nc_xmalloc(size_t n) { return check_alloc(malloc(n ? n : 1), n); }
void *nc_xcalloc(size_t n, size_t size) { return check_alloc(calloc(n ? n : 1, size ? size : 1), n * size); }
void *nc_xrealloc(void *p, size_t n) { return check_alloc(realloc(p, n ? n : 1), n); }

nc_number_text nc_number(double v)
{
    nc_number_text t;
    for (int digits = 6; digits <= 17; digits++) {   /* %g's 6 at least: 300, not 3e+02 */
        snprintf(t.s, sizeof t.s, "%.*g", digits, v);
        if (strtod(t.s, NULL) == v || v != v) break;
    }
    return t;
}

size_t nc_appendf(char *buf, size_t cap, size_t at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(at < cap ? buf + at : NULL, at < cap ? cap - at : 0, fmt, ap);
    va_end(ap);
    NC_ASSERT(n >= 0);
    return at + (size_t)n;
}

char *nc_xvasprintf(const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    NC_ASSERT(n >= 0);
    char *text = nc_xmalloc((size_t)n + 1);
    vsnprintf(text, (size_t)n + 1, fmt, again);
    va_end(again);
    return text;
}

char *nc_xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = nc_xvasprintf(fmt, ap);
    va_end(ap);
    return text;
}

void nc_text_cut(char *buf, size_t cap)
{
    if (cap < 4) return;
    size_t at = cap - 4;
    while (at > 0 && ((unsigned char)buf[at] & 0xc0) == 0x80) at--;
    memcpy(buf + at, "...", 4);
}

void nc_verrf(char *err, size_t cap, const char *fmt, va_list ap)
{
    if (!cap) return;
    int n = vsnprintf(err, cap, fmt, ap);
    if (n >= 0 && (size_t)n >= cap) nc_text_cut(err, cap);
}

void nc_errf(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nc_verrf(err, cap, fmt, ap);
    va_end(ap);
}

char *nc_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(nc_xmalloc(n), s, n);
}

uint64_t nc_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}
