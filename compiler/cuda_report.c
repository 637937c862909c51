/* cuda_report.c - netc build --report, for code generation: which ops each
 * fused kernel computes, which ops a matmul's epilogue applies, what a
 * kernel reads in place or computes along (attention's operands, a
 * gradient's widening), and which values live in another value's buffer
 * (views, in-place updates), each with the .net line it comes from.
 *
 * Requires: the graph and the program cuda_emit_program_ex made from it
 * (with slot_values). The fusion plan is made again, as the tests do, so
 * the report is the emitter's own decision, not a second opinion. */
#include "cuda_emit.h"
#include "passes.h"

#include <stdlib.h>
#include <string.h>

static void list_op(FILE *out, const ir_graph *g, ir_value v, bool *first)
{
    char w[128];
    fprintf(out, "%s%%%u %s (%s)", *first ? "" : ", ", v, nc_ops[g->nodes[v].op].name, pass_where(g, &g->nodes[v], w, sizeof w));
    *first = false;
}

static void name_value(FILE *out, const ir_graph *g, ir_value v);

static void report_kernel(FILE *out, const cg_ctx *cg, const nrt_program *p, uint32_t k)
{
    const nrt_step *s = &p->steps[k];
    if (cg->group && !cg->group[s->node] && cuda_fuse_epilogue_group(cg, s->node) && strstr(p->kernel_names[s->kernel], "_cols_sum")) {
        fprintf(out, "fuse: step %u, kernel %s also computes ", k, p->kernel_names[s->kernel]);
        bool first = true;
        for (ir_value v = 0; v < cg->g->nnodes; v++)
            if (cg->group[v] && cuda_kernel_writes(cg, s->node, v) && cg->epilogue_of[cg->group[v]] == s->node) list_op(out, cg->g, v, &first);
        fprintf(out, " from each column's total of ");
        name_value(out, cg->g, s->node);
        fprintf(out, ": no kernel of their own\n");
        return;
    }
    if (!cg->group || !cg->group[s->node]) return;
    fprintf(out, "fuse: step %u, kernel %s computes ", k, p->kernel_names[s->kernel]);
    bool first = true;
    for (ir_value v = 0; v < cg->g->nnodes; v++)
        if (cg->group[v] && cuda_fuse_same_kernel(cg, v, s->node)) list_op(out, cg->g, v, &first);
    fprintf(out, "\n");
}

static void report_epilogue(FILE *out, const cg_ctx *cg, uint32_t k, const nrt_step *s)
{
    for (uint32_t i = 0; i < cg->nepilogues; i++) {
        const cuda_epilogue *e = &cg->epilogues[i];
        if (e->matmul != s->node || s->mm_epilogue != e->flags) continue;
        fprintf(out, "epilogue: step %u, one cuBLASLt call computes ", k);
        bool first = true;
        for (int j = 0; j < e->nchain; j++) list_op(out, cg->g, e->chain[j], &first);
        fprintf(out, "; the product is not written%s\n",
                e->aux != IR_NONE ? ", the value before the GELU is (the backward reads it)" : "");
        return;
    }
}

static void name_value(FILE *out, const ir_graph *g, ir_value v)
{
    char w[128];
    fprintf(out, "%%%u %s (%s)", v, nc_ops[g->nodes[v].op].name, pass_where(g, &g->nodes[v], w, sizeof w));
}

static bool touches(const nrt_step *s, uint32_t b)
{
    for (int j = 0; j < s->nbufs; j++)
        if (s->bufs[j] == b) return true;
    return false;
}

/* Attention's operands it reads where they lie, inside another value. */
static void report_reads_in_place(FILE *out, const cg_ctx *cg, uint32_t k, const char *kernel, const ir_node *n)
{
    const ir_graph *g = cg->g;
    for (int i = 0; cg->attn_root && i < n->nargs && i < 4; i++) {
        ir_value a = ir_args(g, n)[i];
        if (cg->attn_root[a] == IR_NONE) continue;
        fprintf(out, "along: step %u, kernel %s reads ", k, kernel);
        name_value(out, g, a);
        fprintf(out, " where it lies, in ");
        name_value(out, g, cg->attn_root[a]);
        fprintf(out, ": no copy is made\n");
    }
}

/* Values the kernel of step s (computing v) writes besides its own result,
 * each named in one of the emitter's maps; the step that writes it says so. */
static void report_written_along(FILE *out, const cg_ctx *cg, const nrt_step *s, uint32_t k, const char *kernel, ir_value v)
{
    const ir_graph *g = cg->g;
    struct { const ir_value *of; const char *what; } along[] = {
        {cg->out_as, "writes its result as"}, {cg->lse_with, "also writes"}, {cg->bias_grad_with, "also computes"},
        {cg->widened_to, "stores its f32 accumulator as"}, {cg->round_trip_to, "stores, rounded as the program asks,"},
        {cg->sum_into, "adds its rounded rows to the other term of"},
    };
    for (size_t i = 0; i < NC_COUNT(along); i++) {
        if (!along[i].of || along[i].of[v] == IR_NONE || !touches(s, along[i].of[v])) continue;   /* the step that writes it */
        ir_value made = along[i].of[v];
        bool columns = along[i].of == cg->out_as && g->nodes[made].op == OP_CONCAT;
        fprintf(out, "along: step %u, kernel %s %s ", k, kernel, columns ? "writes its columns of" : along[i].what);
        name_value(out, g, made);
        fprintf(out, ": no kernel of its own\n");
    }
    ir_value bias = cg->bias_grad_with ? cg->bias_grad_with[v] : IR_NONE;
    ir_value bias_rounded = bias != IR_NONE && cg->round_trip_to ? cg->round_trip_to[bias] : IR_NONE;
    if (bias_rounded != IR_NONE && touches(s, bias_rounded)) {   /* the bias's gradient, rounded too */
        fprintf(out, "along: step %u, kernel %s also computes ", k, kernel);
        name_value(out, g, bias);
        fprintf(out, " and stores, rounded as the program asks, ");
        name_value(out, g, bias_rounded);
        fprintf(out, ": no kernels of their own\n");
    }
}

/* Gradients and losses the kernel computing v computes from what it has
 * read already, and the row statistics it reuses. */
static void report_computed_along(FILE *out, const cg_ctx *cg, uint32_t k, const char *kernel, ir_value v)
{
    const ir_graph *g = cg->g;
    if (cg->dv_with && cg->dv_with[v] != IR_NONE) {
        fprintf(out, "along: step %u, kernel %s also computes ", k, kernel);
        name_value(out, g, cg->dv_with[v]);
        fprintf(out, " from the same probabilities: no kernel of its own\n");
    }
    if (cg->sum_to && cg->sum_to[v] != IR_NONE) {
        fprintf(out, "along: step %u, kernel %s adds the other gradient of its input and stores ", k, kernel);
        name_value(out, g, cg->sum_to[v]);
        fprintf(out, ": dx is never written\n");
    }
    if (cg->loss_rows_with && cg->loss_rows_with[v] != IR_NONE) {
        fprintf(out, "along: step %u, kernel %s also computes the row losses of ", k, kernel);
        name_value(out, g, cg->loss_rows_with[v]);
        fprintf(out, ", which only averages them: the logits are read once for both\n");
    }
    if (cg->stats_from && cg->stats_from[v] != IR_NONE && strstr(kernel, "_cols")) {
        fprintf(out, "along: step %u, kernel %s reads the rows' mean and rstd kept by ", k, kernel);
        name_value(out, g, cg->stats_from[v]);
        fprintf(out, "'s kernel: a column sum, no statistics computed again\n");
    }
}

/* Parameter gradients (and their biases') summed over the rows the kernel
 * computing v holds. */
static void report_param_sums(FILE *out, const cg_ctx *cg, uint32_t k, const char *kernel, ir_value v)
{
    const ir_graph *g = cg->g;
    for (ir_value w = v + 1; cg->params_by && w < g->nnodes; w++) {
        if (cg->params_by[w] != v) continue;
        ir_value bias = cg->bias_grad_with ? cg->bias_grad_with[w] : IR_NONE;
        fprintf(out, "along: step %u, kernel %s also sums the terms of ", k, kernel);
        name_value(out, g, w);
        if (bias != IR_NONE) {
            fprintf(out, " and ");
            name_value(out, g, bias);
        }
        fprintf(out, " over the rows it holds: x and g are read once, the gradient%s only %s its partial rows\n",
                bias != IR_NONE ? "s" : "", bias != IR_NONE ? "add" : "adds");
    }
}

/* Sums the kernel computing v (node n) takes over from others: attention
 * gradients' column sums, attention's rowsum(dO * O), a concat of sums. */
static void report_sums_along(FILE *out, const cg_ctx *cg, uint32_t k, const char *kernel, ir_value v, const ir_node *n)
{
    const ir_graph *g = cg->g;
    if (cg->attn_colsum && cg->attn_colsum[v] != IR_NONE) {
        fprintf(out, "along: step %u, kernel %s adds up the column sums the attention gradients' kernels made of ", k, kernel);
        name_value(out, g, cg->attn_colsum[v]);
        fprintf(out, " as they stored it: no pass over it\n");
    }
    if (cg->delta_from && cg->delta_from[v] != IR_NONE) {
        fprintf(out, "along: step %u, kernel %s computes ", k, kernel);
        name_value(out, g, ir_args(g, n)[5]);
        fprintf(out, " = rowsum(dO * O) from ");
        name_value(out, g, cg->delta_from[v]);
        fprintf(out, ": no kernel of its own\n");
    }
    if (cg->joined_sums && cg->joined_sums[v] && strstr(kernel, "_concat_totals")) {   /* a spread concat's second kernel */
        fprintf(out, "along: step %u, kernel %s adds up in order the blocks' partial sums of ", k, kernel);
        name_value(out, g, v);
        fprintf(out, " (parts too large for one block)\n");
    } else if (cg->joined_sums && cg->joined_sums[v]) {
        fprintf(out, "along: step %u, kernel %s computes the %d sums joined by ", k, kernel, n->nargs);
        name_value(out, g, v);
        fprintf(out, ": one kernel, not one each\n");
    }
}

/* What a kernel does beyond its own op: attention reading or writing other
 * values in place, results it computes along, rounding or widening it
 * stores. One line each. */
static void report_along(FILE *out, const cg_ctx *cg, const nrt_program *p, uint32_t k)
{
    const ir_graph *g = cg->g;
    const nrt_step *s = &p->steps[k];
    ir_value v = s->node;
    if (!cg->group || v >= g->nnodes) return;
    const ir_node *n = &g->nodes[v];
    const char *kernel = p->kernel_names[s->kernel];
    report_reads_in_place(out, cg, k, kernel, n);
    report_written_along(out, cg, s, k, kernel, v);
    report_computed_along(out, cg, k, kernel, v);
    report_param_sums(out, cg, k, kernel, v);
    report_sums_along(out, cg, k, kernel, v, n);
}

/* Movement ops a kernel reads through (cuda_emit.c, plan_group_reads in
 * cuda_fuse.c): for each chain whose reader the kernel computes, the links
 * from the reader down and the value in memory they index. */
static void report_read_through(FILE *out, const cg_ctx *cg, const nrt_program *p, uint32_t k)
{
    const ir_graph *g = cg->g;
    const nrt_step *s = &p->steps[k];
    if (!cg->group || s->kind != NRT_STEP_KERNEL || s->node >= g->nnodes) return;
    for (ir_value top = 0; top < g->nnodes; top++) {
        ir_value r = cg->reader[top];
        if (!cuda_reads_through(cg, top) || r == IR_NONE || cuda_reads_through(cg, r)) continue;
        bool here = cg->group[r] ? cuda_fuse_same_kernel(cg, r, s->node) : r == s->node;
        if (!here) continue;
        fprintf(out, "along: step %u, kernel %s reads through ", k, p->kernel_names[s->kernel]);
        bool first = true;
        ir_value w = top;
        for (; cuda_reads_through(cg, w); w = ir_args(g, &g->nodes[w])[0]) list_op(out, g, w, &first);
        fprintf(out, " into ");
        name_value(out, g, w);
        fprintf(out, ": no kernels of their own\n");
    }
    for (ir_value v = 0; v < g->nnodes; v++) {
        if (!cuda_fuse_gathers(cg, v)) continue;
        ir_value r = cg->reader[v];
        while (r != IR_NONE && !cg->group[r] && g->nodes[r].op == OP_BROADCAST) r = cg->reader[r];   /* loaded through */
        if (r == IR_NONE || !cg->group[r] || !cuda_fuse_same_kernel(cg, r, s->node)) continue;
        fprintf(out, "along: step %u, kernel %s gathers the rows of ", k, p->kernel_names[s->kernel]);
        name_value(out, g, v);
        fprintf(out, " from ");
        name_value(out, g, ir_args(g, &g->nodes[v])[0]);
        fprintf(out, " as it loads them: no kernel of its own, the rows are never stored\n");
    }
}

/* A value that lives in another's buffer, once, where it is first written. */
static void report_sharing(FILE *out, const ir_graph *g, const nrt_program *p, uint32_t k, bool *told)
{
    const nrt_step *s = &p->steps[k];
    for (int j = 0; p->slot_values && j < s->nbufs; j++) {
        uint32_t v = p->slot_values[k * NRT_MAX_BUFS + j], b = s->bufs[j];
        if (v == b || v >= g->nnodes || b >= g->nnodes || told[v]) continue;
        told[v] = true;
        char w1[128], w2[128];
        const ir_node *n = &g->nodes[v];
        fprintf(out, "share: %%%u %s (%s) lives in the buffer of %%%u %s (%s): %s\n", v, nc_ops[n->op].name,
                pass_where(g, n, w1, sizeof w1), b, nc_ops[g->nodes[b].op].name, pass_where(g, &g->nodes[b], w2, sizeof w2),
                n->op == OP_RESHAPE ? "a view, no copy" : "the update is computed in place, no copy at the end of the step");
    }
}

/* A batch: the steps one launch runs (cuda_batch.c). */
static void report_batch(FILE *out, const cg_ctx *cg, const nrt_program *p, uint32_t k)
{
    const ir_graph *g = cg->g;
    const nrt_step *s = &p->steps[k];
    uint32_t updates = 0;   /* assignments to parameters and optimizer state the batch computes */
    for (uint32_t i = 0; i < g->nupdates; i++) {
        bool here = false;
        for (uint32_t j = k; j < k + s->batch && !here; j++) here = cuda_kernel_writes(cg, p->steps[j].node, g->updates[i].value);
        updates += here;
    }
    fprintf(out, "batch: steps %u-%u run as one launch, kernel %s (they touch nothing another of them writes)", k,
            k + s->batch - 1u, p->kernel_names[s->batch_kernel]);
    if (updates) fprintf(out, ": %u of the step's %u assignments to parameters and optimizer state", updates, g->nupdates);
    fprintf(out, "\n");
}

void cuda_report(const ir_graph *g, const nrt_program *p, bool fused, FILE *out)
{
    cg_ctx cg = {.g = g};
    if (fused) cuda_fuse_plan(&cg);
    bool *told = nc_xcalloc(g->nnodes + 1, sizeof *told);
    uint32_t epilogues = 0;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        const nrt_step *s = &p->steps[k];
        if (s->batch >= 2) report_batch(out, &cg, p, k);
        if (s->kind == NRT_STEP_KERNEL && s->node < g->nnodes)
            report_kernel(out, &cg, p, k), report_along(out, &cg, p, k), report_read_through(out, &cg, p, k);
        if (s->kind == NRT_STEP_MATMUL && s->mm_epilogue) report_epilogue(out, &cg, k, s), epilogues++;
        report_sharing(out, g, p, k, told);
    }
    fprintf(out, "codegen: %u steps, %u launches (kernels and cuBLASLt calls), %u matmuls with an epilogue%s\n", p->nsteps,
            nrt_program_num_launches(p), epilogues, fused ? "" : " (--no-fuse: no fusion, no epilogues)");
    free(told);
    cuda_fuse_free(&cg);
}
