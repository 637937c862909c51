/* npy_digest.c - a short, tolerant fingerprint of a .npy array for golden
 * tests of whole-model outputs: storing the arrays themselves would put
 * megabytes in git, and exact text would break on the last bit of a BLAS.
 *
 *   npy_digest FILE.npy            print the digest
 *   npy_digest FILE.npy DIGEST     compare with a stored digest (rtol 1e-3,
 *                                  atol 1e-5); exit 1 with the differences
 *
 * The digest: dtype and shape, then mean, standard deviation, min, max and
 * 16 elements at evenly spaced indices. */
#include "tensor_io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSAMPLES 16
#define NSTATS (4 + NSAMPLES)

static void digest(const cpu_tensor *t, double *v)
{
    double s = 0, s2 = 0, lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < t->numel; i++) {
        double x = cpu_get(t, i);
        s += x, s2 += x * x;
        if (x < lo) lo = x;
        if (x > hi) hi = x;
    }
    double n = t->numel ? (double)t->numel : 1, mean = s / n;
    v[0] = mean, v[1] = sqrt(fmax(0, s2 / n - mean * mean)), v[2] = lo, v[3] = hi;
    for (int k = 0; k < NSAMPLES; k++) v[4 + k] = t->numel ? cpu_get(t, (int64_t)k * (t->numel - 1) / (NSAMPLES - 1)) : 0;
}

static void header(const cpu_tensor *t, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "%s[", dtype_name(t->dtype));
    for (int d = 0; d < t->rank && n < cap; d++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: npy_digest FILE.npy [DIGEST]\n");
        return 2;
    }
    cpu_tensor t;
    char err[512], head[256];
    if (npy_read(argv[1], &t, 0, err, sizeof err) != 0) {
        fprintf(stderr, "npy_digest: %s\n", err);
        return 2;
    }
    double v[NSTATS];
    digest(&t, v);
    header(&t, head, sizeof head);
    cpu_tensor_free(&t);
    if (argc == 2) {
        printf("%s\n", head);
        for (int k = 0; k < NSTATS; k++) printf("%.9g\n", v[k]);
        return 0;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        fprintf(stderr, "npy_digest: cannot open %s\n", argv[2]);
        return 2;
    }
    char want_head[256] = "";
    int bad = 0;
    if (!fgets(want_head, sizeof want_head, f)) want_head[0] = 0;
    want_head[strcspn(want_head, "\n")] = 0;
    if (strcmp(want_head, head) != 0) {
        fprintf(stderr, "%s: %s, expected %s\n", argv[1], head, want_head);
        bad++;
    }
    static const char *names[4] = {"mean", "std", "min", "max"};
    for (int k = 0; k < NSTATS && !bad; k++) {
        double w;
        if (fscanf(f, "%lf", &w) != 1) {
            fprintf(stderr, "%s: digest file is short\n", argv[2]);
            bad++;
            break;
        }
        if (!(fabs(v[k] - w) <= 1e-5 + 1e-3 * fabs(w))) {
            if (k < 4) fprintf(stderr, "%s: %s %.9g, expected %.9g\n", argv[1], names[k], v[k], w);
            else fprintf(stderr, "%s: sample %d = %.9g, expected %.9g\n", argv[1], k - 4, v[k], w);
            bad++;
        }
    }
    fclose(f);
    return bad != 0;
}
