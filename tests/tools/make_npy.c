/* make_npy - write a .npy array for the tests, its values read from stdin.
 *
 *   make_npy OUT.npy DESCR SHAPE < values
 *
 * DESCR is one of <f4 <f2 <f8 <i4 <i8 |u1; SHAPE is "N" or "N,3,..." (C
 * order). The values are whitespace-separated numbers (nan and inf too, as
 * strtod reads them); exactly as many as the shape holds. The writer is its
 * own, not runtime/npy.c's, so the tests can make what netc's writer never
 * does (float64, int64). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* f32 to IEEE half, rounding to nearest even; the tests' values are normal. */
static uint16_t to_half(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    uint32_t sign = (b >> 16) & 0x8000, mant = b & 0x7fffff;
    int exp = (int)((b >> 23) & 0xff);
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    exp -= 127 - 15;
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) return (uint16_t)sign;   /* subnormals flushed: not needed here */
    uint32_t h = sign | (uint32_t)exp << 10 | mant >> 13, rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return (uint16_t)h;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: make_npy OUT.npy DESCR SHAPE < values\n");
        return 2;
    }
    const char *descr = argv[2];
    int bytes = !strcmp(descr, "|u1") ? 1 : !strcmp(descr, "<f2") ? 2 : !strcmp(descr, "<f4") || !strcmp(descr, "<i4") ? 4
              : !strcmp(descr, "<f8") || !strcmp(descr, "<i8") ? 8 : 0;
    if (!bytes) {
        fprintf(stderr, "make_npy: unknown dtype %s\n", descr);
        return 2;
    }
    long long numel = 1;
    char shape[256] = "";
    for (char *p = argv[3]; *p;) {
        char *end;
        long long d = strtoll(p, &end, 10);
        if (end == p || d < 0) {
            fprintf(stderr, "make_npy: bad shape %s\n", argv[3]);
            return 2;
        }
        numel *= d;
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%lld,%s", d, *end ? " " : "");
        p = *end == ',' ? end + 1 : end;
    }
    char header[512];
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    int total = 10 + n + 1, pad = (64 - total % 64) % 64;
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    uint16_t hlen = (uint16_t)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hlen & 0xff, f), fputc(hlen >> 8, f);
    fwrite(header, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    for (long long i = 0; i < numel; i++) {
        double v;
        if (scanf("%lf", &v) != 1) {
            fprintf(stderr, "make_npy: %lld values for a shape of %lld\n", i, numel);
            return 1;
        }
        unsigned char out[8];
        if (descr[1] == 'f' && bytes == 8) memcpy(out, &v, 8);
        else if (descr[1] == 'f' && bytes == 4) { float x = (float)v; memcpy(out, &x, 4); }
        else if (descr[1] == 'f') { uint16_t h = to_half((float)v); memcpy(out, &h, 2); }
        else if (bytes == 8) { int64_t x = (int64_t)v; memcpy(out, &x, 8); }
        else if (bytes == 4) { int32_t x = (int32_t)v; memcpy(out, &x, 4); }
        else out[0] = (unsigned char)v;
        fwrite(out, 1, (size_t)bytes, f);   /* little-endian host */
    }
    double extra;
    if (scanf("%lf", &extra) == 1) {
        fprintf(stderr, "make_npy: more values than the shape's %lld\n", numel);
        return 1;
    }
    return fclose(f) == 0 ? 0 : 1;
}
