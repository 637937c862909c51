/* test_util.h - what the C unit tests share: a CHECK that counts failures
 * and goes on, bit-for-bit comparison of floats, and whole-file reads and
 * writes for corruption tests. */
#ifndef NETC_TEST_UTIL_H
#define NETC_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

/* a and b the same bits (0 is not -0); a NaN matches any NaN, since which
 * NaN an operation makes (sign, payload) is not part of its meaning. */
static inline bool same_bits(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    uint32_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x == y;
}

/* The whole file (NUL-terminated, size without the NUL), or NULL. */
static inline unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)n + 1);
    *size = fread(p, 1, (size_t)n, f);
    p[*size] = 0;
    fclose(f);
    return p;
}

static inline void spit(const char *path, const unsigned char *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(p, 1, n, f);
    fclose(f);
}

#ifdef NC_DRIVER_H
/* The checked graph of the .net file at path with options o (diagnostics
 * on stderr), or NULL; src keeps the file for the graph's locations. */
static inline ir_graph *compile_file(const char *path, const driver_opts *o, src_table *src)
{
    char err[1024];
    uint32_t id = src_load(src, path, err, sizeof err);
    if (!id) {
        fprintf(stderr, "%s\n", err);
        return NULL;
    }
    diag_ctx d;
    diag_init(&d, src, stderr);
    return driver_compile(src, id, o, &d);
}
#endif

#endif
