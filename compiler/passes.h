/* passes.h - the optimization pipeline. Each pass is IR -> IR in a file of
 * its own (pass_*.c), can be switched off, dumped after, and tested alone. */
#ifndef NC_PASSES_H
#define NC_PASSES_H

#include "ir.h"
#include <stdio.h>

/* Where a pass writes: err for failures, report (NULL: none) for one line
 * per decision it makes, for netc build --report. */
typedef struct pass_ctx {
    FILE *err;
    FILE *report;
} pass_ctx;

/* A pass rewrites *g (it may replace the graph) and returns false on a
 * failure it has already reported to cx->err. */
typedef bool pass_fn(ir_graph **g, const pass_ctx *cx);

typedef struct pass_info {
    const char *name;          /* --no-NAME, --dump-ir=after:NAME */
    pass_fn *run;
    const char *what;          /* one line for --help and reports */
} pass_info;

/* The pipeline in order: reading this list tells the whole compilation. */
extern const pass_info pass_pipeline[];
extern const int pass_count;
const pass_info *pass_find(const char *name);

typedef struct pass_opts {
    const char *const *disabled;   /* names given with --no-NAME */
    int ndisabled;
    bool verify;                   /* ir_verify after every pass */
    const char *dump_after;        /* pass name, or "" for the final IR, NULL = none */
    FILE *dump_out;
    FILE *report;                  /* the passes' decisions, one line each (NULL = none) */
} pass_opts;

/* Run the pipeline, then pass_output_copies; false if a pass or the
 * verifier failed. */
bool pass_run_all(ir_graph **g, const pass_opts *o, FILE *err);
/* Every output that is an input or a parameter itself reads a copy of it
 * instead (op copy), made by the run: an output keeps the value the run read
 * after that tensor is set again or updated. Always run (not switched off). */
void pass_output_copies(ir_graph **g);

/* The passes. */
bool pass_dce(ir_graph **g, const pass_ctx *cx);
bool pass_cast_hoist(ir_graph **g, const pass_ctx *cx);
bool pass_recompute(ir_graph **g, const pass_ctx *cx);
/* The training step g with the forward values where chosen[v] recomputed for
 * the backward pass (pass_recompute does this for @checkpoint regions); NULL
 * if g is not a training step. g is not modified. */
ir_graph *recompute_values(const ir_graph *g, const bool *chosen, const pass_ctx *cx);
bool pass_cse(ir_graph **g, const pass_ctx *cx);
bool pass_join(ir_graph **g, const pass_ctx *cx);

/* Per value: how many operand slots, outputs, updates and the loss use it
 * (a malloc'd array of nnodes + 1). */
uint32_t *ir_count_uses(const ir_graph *g);
/* A cast from a float dtype to a float dtype. */
bool ir_is_float_cast(const ir_graph *g, const ir_node *n);

/* "file.net:12" for a node's source line, into buf. */
const char *pass_where(const ir_graph *g, const ir_node *n, char *buf, size_t cap);

/* A new graph with g's dims, symbols, files, inputs, params and train spec,
 * and no nodes: passes that rebuild a graph start from it ... */
ir_graph *ir_graph_shell(const ir_graph *g);
/* ... and end with this: outputs, loss and updates through map (old -> new). */
void ir_graph_finish(ir_graph *out, const ir_graph *g, const ir_value *map);

/* Copy a graph keeping only the nodes where keep[v]; operands of kept nodes
 * must be kept too. Outputs and the train loss are remapped. */
ir_graph *ir_graph_filter(const ir_graph *g, const bool *keep, const ir_value *replace);
/* Copy a graph with its nodes in the given order (a permutation in which
 * every node comes after its operands). */
ir_graph *ir_graph_reorder(const ir_graph *g, const ir_value *order);

#endif
