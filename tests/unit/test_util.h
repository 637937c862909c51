/* test_util.h - what the C unit tests share: a CHECK that counts failures
 * and goes on, bit-for-bit comparison of floats, whole-file reads and
 * writes for corruption tests, and (with driver.h and cpu_exec.h included
 * first) .net text compiled to a graph and run on the CPU executor. */
#ifndef NETC_TEST_UTIL_H
#define NETC_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

#ifdef NC_DRIVER_H
/* The checked graph of the .net text, under o (NULL: verified, nothing
 * else), or NULL; name is the file its diagnostics (on stderr) name. */
static inline ir_graph *compile_text(const char *name, const char *text, const driver_opts *o)
{
    src_table src = {0};
    diag_ctx d;
    diag_init(&d, &src, stderr);
    uint32_t id = src_add(&src, name, text, strlen(text));
    const driver_opts verified = {.verify = true};
    ir_graph *g = driver_compile(&src, id, o ? o : &verified, &d);
    src_free(&src);
    return g;
}
#endif

#ifdef NRT_CPU_EXEC_H
/* Every input of g allocated at its declared shape, zeros, for the test to
 * fill: each dim a constant (the source's or the options' binding). */
static inline void alloc_inputs(const ir_graph *g, cpu_tensor *inputs)
{
    for (uint32_t i = 0; i < g->ninputs; i++) {
        int64_t shape[NC_MAX_RANK];
        for (int k = 0; k < g->inputs[i].rank; k++) dim_is_const(&g->dims[g->inputs[i].shape[k]], &shape[k]);
        cpu_tensor_alloc(&inputs[i], g->inputs[i].dtype, g->inputs[i].rank, shape, 0);
    }
}

/* g run on the CPU executor; false with its error on stderr after what. */
static inline bool run_cpu(const char *what, const ir_graph *g, const cpu_tensor *inputs, const cpu_tensor *params,
                           cpu_exec_result *res)
{
    char err[512];
    cpu_exec_opts o = {.inputs = inputs, .params = params};
    if (cpu_exec_run(g, &o, res, err, sizeof err) == 0) return true;
    fprintf(stderr, "%s: %s\n", what, err);
    return false;
}
#endif

#if defined(NC_DRIVER_H) && defined(NC_CUDA_EMIT_H) && defined(NRT_MODULE_H)
/* A temporary file from the mkstemp pattern in path (XXXXXX, replaced). */
static inline bool temp_file(char *path)
{
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

/* The module of the .net text (its training step where train) written to a
 * temporary file from the pattern path, and its CUDA source to one from
 * cuda (for the mock GPU, NETC_MOCK_CUDA_SOURCE); diagnostics on stderr. */
static inline bool write_module_file(const char *name, const char *text, bool train, char *path, char *cuda)
{
    src_table src = {0};
    uint32_t id = src_add(&src, name, text, strlen(text));
    diag_ctx d;
    diag_init(&d, &src, stderr);
    driver_opts o = {.verify = true, .train_step = train};
    ir_graph *g = driver_compile(&src, id, &o, &d);
    nrt_module_data m = {.graph = g};
    char err[1024];
    bool ok = g && cuda_emit_program(g, &m.program, err, sizeof err) && temp_file(path) && temp_file(cuda) &&
              module_write(path, &m, err, sizeof err) == 0;
    if (ok) spit(cuda, (const unsigned char *)m.program.source, strlen(m.program.source));
    if (g) module_data_free(&m);
    src_free(&src);
    return ok;
}
#endif

#endif
