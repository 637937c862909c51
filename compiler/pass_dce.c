/* pass_dce.c - dead code elimination.
 * Requires: any graph. Produces: only nodes that an output or the train loss
 * (when the graph is built for training) depends on. Inputs and params stay declared even when unused, so a module's
 * interface does not depend on what the optimizer removed. */
#include "passes.h"

#include <stdlib.h>

bool pass_dce(ir_graph **gp, const pass_ctx *cx)
{
    ir_graph *g = *gp;
    bool *live = nc_xcalloc(g->nnodes + 1, sizeof *live);
    for (uint32_t i = 0; i < g->noutputs; i++) live[g->outputs[i].value] = true;
    if (g->train.present && g->train.loss != IR_NONE) live[g->train.loss] = true;
    for (uint32_t i = 0; i < g->nupdates; i++) live[g->updates[i].value] = true;
    for (ir_value v = g->nnodes; v-- > 0;) {
        if (!live[v]) continue;
        const ir_node *n = &g->nodes[v];
        for (int i = 0; i < n->nargs; i++) live[ir_args(g, n)[i]] = true;
    }
    ir_graph *out = ir_graph_filter(g, live, NULL);
    if (cx->report && out->nnodes < g->nnodes)
        fprintf(cx->report, "dce: %u values no output, loss or update depends on dropped\n", g->nnodes - out->nnodes);
    free(live);
    ir_graph_free(g);
    *gp = out;
    return true;
}
