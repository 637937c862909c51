/* schedule.c - the order a training step's nodes run in, before code
 * generation: what depends on the parameters alone (their low-precision
 * copies) goes first.
 *
 * Requires: a training step after the passes (and after --memory-budget's
 * recomputation). Produces: the same graph, renumbered, with the values made
 * from parameters and constants alone that the backward pass also reads, or
 * that are small (at most 1 MiB), moved ahead of everything else. Such a
 * copy lives into the backward pass anyway, so making it at the start costs
 * no peak memory (the peak is at the end of the forward pass, where every
 * copy is alive either way); and
 * side by side, the fusion planner joins them as loops of few kernels: the
 * bf16 copies of GPT-2's 148 parameters in a handful of launches instead of
 * one each, before every layer. */
#include "passes.h"
#include "schedule.h"

#include <stdlib.h>

#define SMALL_COPY_BYTES (1 << 20)

/* At most SMALL_COPY_BYTES, whatever the symbolic dims are bound to. */
static bool small(const ir_graph *g, const ir_node *n)
{
    int64_t bytes = dtype_size(n->dtype), d;
    for (int k = 0; k < n->rank; k++) {
        if (!dim_is_const(&g->dims[n->shape[k]], &d) || d > SMALL_COPY_BYTES) return false;
        bytes *= d;
        if (bytes > SMALL_COPY_BYTES) return false;
    }
    return true;
}

ir_graph *schedule_parameter_copies_first(const ir_graph *g, FILE *report)
{
    if (!g->train.present || g->train.loss == IR_NONE) return NULL;
    bool *from_params = ir_parameter_values(g), *early = nc_xcalloc(g->nnodes + 1, sizeof *early);
    for (ir_value u = g->train.loss + 1; u < g->nnodes; u++)   /* read by the backward pass ... */
        for (int i = 0; i < g->nodes[u].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[u])[i];
            if (a <= g->train.loss && from_params[a] && g->nodes[a].nargs) early[a] = true;
        }
    for (ir_value v = 0; v <= g->train.loss; v++)   /* ... or small (a bias's copy, a norm's weight) */
        if (from_params[v] && g->nodes[v].nargs && small(g, &g->nodes[v])) early[v] = true;
    uint32_t moved = 0;
    for (ir_value v = g->nnodes; v-- > 0;)   /* ... and what they are made of */
        if (early[v]) {
            moved++;
            for (int i = 0; i < g->nodes[v].nargs; i++) early[ir_args(g, &g->nodes[v])[i]] = true;
        }
    ir_graph *out = NULL;
    if (moved) {
        ir_value *order = nc_xmalloc((g->nnodes + 1) * sizeof *order);
        uint32_t n = 0;
        for (ir_value v = 0; v < g->nnodes; v++)
            if (early[v]) order[n++] = v;
        for (ir_value v = 0; v < g->nnodes; v++)
            if (!early[v]) order[n++] = v;
        out = ir_graph_reorder(g, order);
        free(order);
        if (report)
            fprintf(report, "schedule: the parameters' low-precision copies run first, where fusion joins them "
                            "(%u values: the copies and what they read)\n", moved);
    }
    free(from_params);
    free(early);
    return out;
}
