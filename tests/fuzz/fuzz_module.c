/* fuzz_module.c - libFuzzer target for the module reader and where a module
 * it accepts goes next. Any bytes must be refused with a message or read into
 * a module that the rest of the runtime can take, never crash, leak or hang:
 *
 *   1. module_read_buffer, every section and entry point; what it accepts
 *      must write back (module_write) as the same bytes, section for section;
 *   2. for each entry point read, the host side of a GPU session without a
 *      GPU: the memory plan (program_plan_memory), the launch DAG
 *      (dag_plan_build) and every step's launch at its evaluated sizes, with
 *      each symbolic dim bound to 2;
 *   3. through libnetrt's public API (nrt_module_load_entry, from a memfd),
 *      each entry point, which must be the graph the reader read for it: a
 *      CPU session with every dim bound to 2, seeded inputs, one run and
 *      every output read back; modules too big to run quickly are only loaded.
 *
 * Random bytes rarely get past the header's total length and the section
 * table's offsets, so module_mutator.c mutates inside one section and seals
 * the file again. Seeds: modules written by netc build (scripts/test.sh). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* memfd_create */
#endif
#include "dim.h"
#include "launch_dag.h"
#include "module.h"
#include "module_mutator.h"
#include "netrt.h"
#include "ops.h"
#include "program.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { SYM_BINDING = 2 };
/* Elements touched (products' multiply-adds) above which a module is loaded
 * but not run: the CPU executor must stay well inside the per-input timeout. */
static const double max_run_work = 1e6;

static bool eval_at_binding(const ir_graph *g, uint32_t dim, int64_t *out)
{
    int64_t syms[NC_MAX_SYMS];
    for (int i = 0; i < NC_MAX_SYMS; i++) syms[i] = SYM_BINDING;
    return dim_eval(&g->dims[dim], syms, out) && *out >= 0;
}

static bool numel_at_binding(const ir_graph *g, uint8_t rank, const uint32_t *dims, double *numel)
{
    *numel = 1;
    for (int k = 0; k < rank; k++) {
        int64_t n;
        if (!eval_at_binding(g, dims[k], &n)) return false;
        *numel *= (double)n;
    }
    return true;
}

/* Whether one CPU run finishes quickly (what fuzz_compile.c asks too). */
static bool small_enough(const ir_graph *g)
{
    double work = 0, numel;
    for (uint32_t i = 0; i < g->nparams; i++) {
        if (!numel_at_binding(g, g->params[i].decl.rank, g->params[i].decl.shape, &numel)) return false;
        work += numel;
    }
    for (uint32_t v = 0; v < g->nnodes && work <= max_run_work; v++) {
        const ir_node *n = &g->nodes[v];
        if (!numel_at_binding(g, n->rank, n->shape, &numel)) return false;
        double inner = 1;
        nc_op_category cat = nc_ops[n->op].category;
        if ((cat == CAT_CONTRACTION || cat == CAT_ATTENTION) && n->nargs >= 2) {
            const ir_node *a = &g->nodes[g->args[n->args_at + (cat == CAT_ATTENTION)]];
            int64_t k;
            if (a->rank >= 2 && eval_at_binding(g, a->shape[a->rank - (cat == CAT_ATTENTION ? 2 : 1)], &k))
                inner = (double)k * (cat == CAT_ATTENTION ? 2 : 1);
        }
        work += numel * inner;
    }
    return work <= max_run_work;
}

/* The host side of a GPU session (gpu.c's plan_memory, plan_streams and
 * prepare_steps) on what the reader accepted. */
static void plan_program(const ir_graph *g, const nrt_program *p)
{
    int64_t syms[NC_MAX_SYMS];
    for (int i = 0; i < NC_MAX_SYMS; i++) syms[i] = SYM_BINDING;
    char err[512];
    memplan_result r;
    memplan_buf *b = program_plan_memory(g, p, syms, &r, err, sizeof err);
    if (!b) return;
    uint32_t nbuf = g->nnodes + p->ntemps;
    int64_t *offset = calloc(nbuf + 1, sizeof *offset), *bytes = calloc(nbuf + 1, sizeof *bytes);
    for (uint32_t i = 0; i < nbuf; i++) {
        offset[i] = b[i].offset, bytes[i] = b[i].bytes;
        if (b[i].bytes < 0 || b[i].offset < 0 || (b[i].bytes && b[i].offset + b[i].bytes > r.arena_bytes)) {
            fprintf(stderr, "fuzz_module: buffer %u (%lld bytes at %lld) outside the %lld-byte arena\n", i,
                    (long long)b[i].bytes, (long long)b[i].offset, (long long)r.arena_bytes);
            abort();
        }
    }
    free(b);
    for (int prepare = 0; prepare < 2; prepare++) {
        dag_plan d;
        dag_memory mem = {offset, bytes, nbuf, prepare != 0};
        if (dag_plan_build(p, &mem, prepare != 0, 4, &d, err, sizeof err) == 0) dag_plan_free(&d);
    }
    free(offset);
    free(bytes);
    free(nrt_program_launches(p));
    (void)nrt_program_num_launches(p);
    for (uint32_t k = 0; k < p->nsteps; k++) {
        const nrt_step *s = &p->steps[k];
        int64_t n[NRT_MAX_INTS] = {0}, blocks, threads;
        bool sized = true;
        for (int j = 0; j < s->nints && sized; j++) sized = eval_at_binding(g, s->ints[j], &n[j]);
        if (sized && s->kind == NRT_STEP_KERNEL) (void)nrt_step_launch(s, n, 1 << 16, &blocks, &threads);
        if (s->kind == NRT_STEP_MATMUL) (void)nrt_matmul_slots_of(s);
    }
}

/* Seeded data of an input: small integers (most tables index [0, 2)),
 * floats in [-2, 2) as their bits (f16 and bf16 from the top half). */
static void *make_input(const nrt_tensor_info *info, size_t *bytes)
{
    size_t numel = 1;
    for (int k = 0; k < info->rank; k++) numel *= (size_t)info->shape[k];
    size_t esize = nrt_dtype_size(info->dtype);
    *bytes = numel * esize;
    unsigned char *d = malloc(*bytes + 1);
    for (size_t j = 0; j < numel; j++) {
        float f = (float)((j * 2654435761u) % 4000) / 1000.0f - 2.0f;
        uint32_t u;
        memcpy(&u, &f, 4);
        int32_t i = (int32_t)(j % 2);
        if (info->dtype == NRT_F32) memcpy(d + 4 * j, &u, 4);
        else if (info->dtype == NRT_F16 || info->dtype == NRT_BF16) d[2 * j] = (unsigned char)(u >> 16), d[2 * j + 1] = (unsigned char)(u >> 24);
        else if (info->dtype == NRT_I32) memcpy(d + 4 * j, &i, 4);
        else d[j] = (unsigned char)i;
    }
    return d;
}

static void run_session(const nrt_module *m)
{
    int ndims = nrt_module_num_dims(m);
    const char *names[NC_MAX_SYMS];
    int64_t values[NC_MAX_SYMS];
    for (int i = 0; i < ndims && i < NC_MAX_SYMS; i++) names[i] = nrt_module_dim_name(m, i), values[i] = SYM_BINDING;
    nrt_session_opts o = nrt_session_defaults();
    o.device = NRT_DEVICE_CPU;
    o.dim_names = names, o.dim_values = values, o.ndims = ndims;
    nrt_session *s;
    nrt_error e;
    if (nrt_session_create(m, &o, &s, &e) != NRT_OK) return;
    bool ok = true;
    for (int i = 0; ok && i < nrt_module_num_inputs(m); i++) {
        nrt_tensor_info info;
        nrt_module_input(m, i, &info);
        const char *name = info.name;
        if (nrt_session_input_info(s, name, &info, &e) != NRT_OK) break;
        size_t bytes;
        void *d = make_input(&info, &bytes);
        ok = nrt_session_set_input(s, name, info.dtype, info.rank, info.shape, d, &e) == NRT_OK;
        free(d);
    }
    if (ok && nrt_session_run(s, &e) == NRT_OK) {
        for (int i = 0; i < nrt_module_num_outputs(m); i++) {
            nrt_tensor_info info;
            nrt_module_output(m, i, &info);
            const char *name = info.name;
            if (nrt_session_output_info(s, name, &info, &e) != NRT_OK) continue;
            size_t numel = 1;
            for (int k = 0; k < info.rank; k++) numel *= (size_t)info.shape[k];
            size_t bytes = numel * nrt_dtype_size(info.dtype);
            void *d = malloc(bytes + 1);
            if (nrt_session_get_output(s, name, d, bytes, &e) != NRT_OK) {
                fprintf(stderr, "fuzz_module: output %s after a run that succeeded: %s\n", name, e.message);
                abort();
            }
            free(d);
        }
    }
    nrt_session_free(s);
}

/* The bytes as a file of their own for the public API, which loads paths. */
static const char *as_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_module.netm", 0);
        if (fd < 0) {
            perror("fuzz_module: memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) {
        perror("fuzz_module: memfd");
        abort();
    }
    return path;
}

/* What the reader accepts, the writer must give back byte for byte: every
 * field is read into the module, and nothing of the file may be skipped or
 * taken in a form the writer would not write (else the reader accepted
 * bytes it did not check). The order of the sections may differ: the
 * reader takes any, the writer writes one. */
static void round_trip(const nrt_module_data *m, const uint8_t *data, size_t size)
{
    static char path[1024];
    if (!path[0]) {   /* memory, where there is a /dev/shm: module_write syncs the file */
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, sizeof path, "%s/fuzz_module.%d.netm", dir, (int)getpid());
    }
    char err[512];
    if (module_write(path, m, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_module: the reader took the module, the writer not: %s\n", err);
        abort();
    }
    FILE *f = fopen(path, "rb");
    uint8_t *back = malloc(size + 1);
    size_t got = f ? fread(back, 1, size + 1, f) : 0;
    if (f) fclose(f);
    if (got > size || !module_mutator_same(data, size, back, got)) {
        fprintf(stderr, "fuzz_module: the reader took a module of %zu bytes that writes back as %zu other bytes (%s)\n",
                size, got, path);
        abort();
    }
    unlink(path);
    free(back);
}

/* The entry named entry (NULL: the top level), whose graph the reader read
 * as want, loaded through the public API: it must be that graph. */
static void load_and_run(const char *path, const char *entry, const ir_graph *want)
{
    nrt_module *m;
    nrt_error e;
    if (nrt_module_load_entry(path, entry, &m, &e) != NRT_OK) {
        fprintf(stderr, "fuzz_module: the reader took the module, nrt_module_load_entry(%s) not: %s\n",
                entry ? entry : "NULL", e.message);
        abort();
    }
    const ir_graph *got = nrt_module_graph(m);
    if (got->nnodes != want->nnodes || got->nupdates != want->nupdates || strcmp(got->name, want->name) != 0) {
        fprintf(stderr, "fuzz_module: nrt_module_load_entry(%s) loaded another entry's graph\n", entry ? entry : "NULL");
        abort();
    }
    if (small_enough(nrt_module_graph(m))) run_session(m);
    nrt_module_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nrt_module_data m;
    char err[512];
    if (module_read_buffer(data, size, &m, err, sizeof err) != 0) return 0;
    round_trip(&m, data, size);
    plan_program(m.graph, &m.program);
    for (uint32_t i = 0; i < m.nentries; i++) plan_program(m.entries[i].data.graph, &m.entries[i].data.program);
    const char *path = as_file(data, size);
    load_and_run(path, NULL, m.graph);
    for (uint32_t i = 0; i < m.nentries; i++) load_and_run(path, m.entries[i].name, m.entries[i].data.graph);
    module_data_free(&m);
    return 0;
}
