/* cuda_emit.h - CUDA C code generation: the IR scheduled into steps, with one
 * kernel per group of ops. Every op's emitter is named in ops.def.
 *
 * Requires: a verified graph. Produces: an nrt_program whose source compiles
 * with NVRTC (compiler/nvrtc.c) and whose steps the runtime follows. */
#ifndef NC_CUDA_EMIT_H
#define NC_CUDA_EMIT_H

#include "ir.h"
#include "program.h"

#include <stdio.h>

/* A growable string. */
typedef struct cg_buf {
    char *s;
    size_t n, cap;
} cg_buf;

void cg_printf(cg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct cg_ctx {
    const ir_graph *g;
    nrt_program *prog;
    cg_buf src;            /* the translation unit */
    cg_buf body;           /* the kernel being written */
    cg_buf cur_comment;
    char cur_name[96];
    uint32_t cur_step;
    char **bodies;         /* distinct kernel bodies so far, index = kernel */
    uint32_t nbodies;
    bool training;         /* a training step: dropout drops */
    char err[512];
} cg_ctx;

/* One emitter per op (ops.def's cuda_emit column). It appends kernels to
 * cg->src and steps to cg->prog for the node v; false with cg->err set if the
 * node cannot run on the GPU. */
typedef bool cuda_emit_fn(cg_ctx *cg, ir_value v);

/* Schedule and emit the whole graph. Returns false with err set. */
bool cuda_emit_program(const ir_graph *g, nrt_program *out, char *err, size_t errcap);

#endif
