/* infer_netc.c - inference latency of a module through libnetrt: load time,
 * session creation, then the median of many runs (after warm-up; runs replay
 * one CUDA graph). Prints one JSON line.
 *   infer_netc MODULE DIM=VALUE... [--iters N] [--device cpu|gpu] */
#include "netrt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Small valid values of each dtype: class indices and tokens below 64,
 * pixels, floats in [0, 1). */
static void fill_input(unsigned char *buf, nrt_dtype t, size_t count)
{
    for (size_t k = 0; k < count; k++) {
        uint32_t r = (uint32_t)(k * 2654435761u) >> 26;   /* 0 .. 63 */
        if (t == NRT_I32) ((int32_t *)buf)[k] = (int32_t)r;
        else if (t == NRT_F32) ((float *)buf)[k] = (float)r / 64.0f;
        else if (t == NRT_F16 || t == NRT_BF16) ((uint16_t *)buf)[k] = 0;   /* +0.0 in both */
        else buf[k] = (unsigned char)(t == NRT_BOOL ? r & 1 : r);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: infer_netc MODULE DIM=VALUE... [--iters N] [--device cpu|gpu]\n"); return 2; }
    const char *names[16];
    int64_t values[16];
    int nd = 0, iters = 200;
    nrt_device dev = NRT_DEVICE_AUTO;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) dev = !strcmp(argv[++i], "cpu") ? NRT_DEVICE_CPU : NRT_DEVICE_GPU;
        else if (strchr(argv[i], '=') && nd < 16) {
            char *eq = strchr(argv[i], '=');
            *eq = 0;
            names[nd] = argv[i];
            values[nd++] = atoll(eq + 1);
        }
    }
    nrt_error e;
    nrt_module *m;
    double t0 = now_us();
    if (nrt_module_load(argv[1], &m, &e)) { fprintf(stderr, "%s\n", e.message); return 1; }
    double t1 = now_us();
    nrt_session_opts o = nrt_session_defaults();
    o.device = dev;
    o.dim_names = names, o.dim_values = values, o.ndims = nd;
    nrt_session *s;
    if (nrt_session_create(m, &o, &s, &e)) { fprintf(stderr, "%s\n", e.message); return 1; }
    double t2 = now_us();
    for (int i = 0; i < nrt_module_num_inputs(m); i++) {
        nrt_tensor_info info;
        nrt_module_input(m, i, &info);
        if (nrt_session_input_info(s, info.name, &info, &e)) continue;
        size_t count = 1, n;
        for (int k = 0; k < info.rank; k++) count *= (size_t)info.shape[k];
        n = count * nrt_dtype_size(info.dtype);
        unsigned char *buf = malloc(n + 1);
        fill_input(buf, info.dtype, count);
        nrt_session_set_input(s, info.name, info.dtype, info.rank, info.shape, buf, &e);
        free(buf);
    }
    double *lat = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < 20; i++)
        if (nrt_session_run(s, &e)) { fprintf(stderr, "%s\n", e.message); return 1; }
    for (int i = 0; i < iters; i++) {
        double a = now_us();
        nrt_session_run(s, &e);
        lat[i] = now_us() - a;
    }
    qsort(lat, (size_t)iters, sizeof *lat, cmp_double);
    printf("{\"module\": \"%s\", \"device\": \"%s\", \"load_ms\": %.3f, \"session_ms\": %.3f, \"median_us\": %.2f, "
           "\"p10_us\": %.2f, \"p90_us\": %.2f, \"arena_bytes\": %lld}\n",
           argv[1], nrt_session_device(s), (t1 - t0) / 1e3, (t2 - t1) / 1e3, lat[iters / 2], lat[iters / 10],
           lat[iters * 9 / 10], (long long)nrt_session_arena_bytes(s));
    free(lat);
    nrt_session_free(s);
    nrt_module_free(m);
    return 0;
}
