/* pass_cse.c - common subexpression elimination.
 * Requires: any graph. Produces: no two nodes with the same op, attributes,
 * type and operands (sources and random ops excepted: two dropouts with the
 * same seed are still two draws only if their seeds differ, so they are kept
 * as written). Exact: results are bit-identical. */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * 0x100000001b3ull; }

static uint64_t node_hash(const ir_graph *g, const ir_node *n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, n->op);
    h = mix(h, n->dtype);
    h = mix(h, n->rank);
    for (int i = 0; i < n->rank; i++) h = mix(h, n->shape[i]);
    for (int i = 0; i < n->nargs; i++) h = mix(h, ir_args(g, n)[i]);
    uint64_t f;
    memcpy(&f, &n->attr.f, sizeof f);
    return mix(h, f);
}

static bool same_node(const ir_graph *g, const ir_node *a, const ir_node *b)
{
    /* flags are part of a node's identity: a recomputed value must not merge
     * back into the original it exists to replace */
    return a->op == b->op && a->dtype == b->dtype && a->rank == b->rank && a->nargs == b->nargs && a->flags == b->flags &&
           a->region == b->region && memcmp(a->shape, b->shape, a->rank * sizeof(uint32_t)) == 0 &&
           memcmp(&a->attr, &b->attr, sizeof a->attr) == 0 &&
           (a->nargs == 0 || memcmp(ir_args(g, a), ir_args(g, b), a->nargs * sizeof(ir_value)) == 0);
}

bool pass_cse(ir_graph **gp, const pass_ctx *cx)
{
    ir_graph *g = *gp;
    uint32_t cap = 1;
    while (cap < g->nnodes * 2 + 2) cap *= 2;
    ir_value *table = nc_xmalloc(cap * sizeof *table);
    memset(table, 0xff, cap * sizeof *table);
    ir_value *replace = nc_xmalloc((g->nnodes + 1) * sizeof *replace);
    bool *keep = nc_xcalloc(g->nnodes + 1, sizeof *keep);
    /* Rewrite operands in place first so chains of duplicates collapse. */
    for (ir_value v = 0; v < g->nnodes; v++) {
        ir_node *n = &g->nodes[v];
        for (int i = 0; i < n->nargs; i++) g->args[n->args_at + i] = replace[g->args[n->args_at + i]];
        replace[v] = v;
        keep[v] = true;
        bool unique = nc_ops[n->op].category == CAT_SOURCE && n->op != OP_FILL && n->op != OP_IOTA && n->op != OP_DIM_VALUE;
        if (unique || (nc_ops[n->op].flags & OPF_RANDOM)) continue;
        uint64_t h = node_hash(g, n);
        for (uint32_t s = (uint32_t)h & (cap - 1);; s = (s + 1) & (cap - 1)) {
            if (table[s] == IR_NONE) { table[s] = v; break; }
            if (same_node(g, &g->nodes[table[s]], n)) { replace[v] = table[s]; keep[v] = false; break; }
        }
    }
    for (uint32_t i = 0; i < g->noutputs; i++) g->outputs[i].value = replace[g->outputs[i].value];
    if (g->train.present && g->train.loss != IR_NONE) g->train.loss = replace[g->train.loss];
    for (uint32_t i = 0; i < g->nupdates; i++) g->updates[i].value = replace[g->updates[i].value];
    ir_graph *out = ir_graph_filter(g, keep, replace);
    if (cx->report && out->nnodes < g->nnodes)
        fprintf(cx->report, "cse: %u duplicate values merged\n", g->nnodes - out->nnodes);
    free(table);
    free(replace);
    free(keep);
    ir_graph_free(g);
    *gp = out;
    return true;
}
