/* passes.c - the pipeline: which passes run, in which order, and the
 * verifier and dumps between them. */
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const pass_info pass_pipeline[] = {
    {"cast-hoist", pass_cast_hoist, "move casts across data movement where it saves bytes (exact)"},
    {"join", pass_join, "join a concat of concats into one and a slice of a slice into one (exact)"},
    {"cse", pass_cse, "merge identical computations"},
    {"recompute", pass_recompute, "backward passes recompute @checkpoint blocks instead of keeping them"},
    {"dce", pass_dce, "drop computations no output depends on"},
};
const int pass_count = (int)NC_COUNT(pass_pipeline);

const pass_info *pass_find(const char *name)
{
    for (int i = 0; i < pass_count; i++)
        if (strcmp(pass_pipeline[i].name, name) == 0) return &pass_pipeline[i];
    return NULL;
}

static bool disabled(const pass_opts *o, const char *name)
{
    for (int i = 0; i < o->ndisabled; i++)
        if (strcmp(o->disabled[i], name) == 0) return true;
    return false;
}

static bool verify(const ir_graph *g, const char *after, FILE *err)
{
    int problems = ir_verify(g, err);
    if (problems) fprintf(err, "netc: internal error: the IR is invalid after %s (%d problems)\n", after, problems);
    return problems == 0;
}

static bool is_source_tensor(const ir_graph *g, ir_value v)
{
    return g->nodes[v].op == OP_INPUT || g->nodes[v].op == OP_PARAM;
}

/* A copy of each source tensor an output is, just after it: the GPU keeps
 * an output in its value's memory, and an input's or a parameter's is
 * written again (set_input, set_param, the training step's update) while the
 * CPU executor keeps the run's copy. With its own value the output is what
 * the run read on both. After the passes, so CSE and DCE never see it; not a
 * pass of the list, since the runtime relies on it (the module reader refuses
 * an output that is a source). */
void pass_output_copies(ir_graph **gp)
{
    const ir_graph *g = *gp;
    bool *wanted = nc_xcalloc(g->nnodes + 1, sizeof *wanted), any = false;
    for (uint32_t i = 0; i < g->noutputs; i++)
        if (is_source_tensor(g, g->outputs[i].value)) wanted[g->outputs[i].value] = any = true;
    if (!any) {
        free(wanted);
        return;
    }
    ir_graph *out = ir_graph_shell(g);
    ir_value *map = nc_xmalloc((g->nnodes + 1) * sizeof *map), *copy = nc_xmalloc((g->nnodes + 1) * sizeof *copy);
    ir_value *args = nc_xmalloc((g->nargs + 1) * sizeof *args);
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        for (int i = 0; i < n->nargs; i++) args[i] = map[ir_args(g, n)[i]];
        map[v] = ir_add(out, n, args, n->nargs);
        copy[v] = map[v];
        if (!wanted[v]) continue;
        ir_node c = {.op = OP_COPY, .dtype = n->dtype, .rank = n->rank, .loc = n->loc};
        memcpy(c.shape, n->shape, sizeof c.shape);
        copy[v] = ir_add(out, &c, &map[v], 1);
    }
    for (uint32_t i = 0; i < g->noutputs; i++) ir_output_add(out, g->outputs[i].name, copy[g->outputs[i].value]);
    if (g->train.present && g->train.loss != IR_NONE) out->train.loss = map[g->train.loss];
    for (uint32_t i = 0; i < g->nupdates; i++) ir_update_add(out, g->updates[i].param, map[g->updates[i].value]);
    free(args);
    free(copy);
    free(map);
    free(wanted);
    ir_graph_free(*gp);
    *gp = out;
}

bool pass_run_all(ir_graph **g, const pass_opts *o, FILE *err)
{
    if (o->verify && !verify(*g, "sema", err)) return false;
    if (o->dump_after && strcmp(o->dump_after, "sema") == 0) ir_print(*g, o->dump_out);
    for (int i = 0; i < pass_count; i++) {
        const pass_info *p = &pass_pipeline[i];
        if (disabled(o, p->name)) continue;
        pass_ctx cx = {.err = err, .report = o->report};
        if (!p->run(g, &cx)) return false;
        if (o->verify && !verify(*g, p->name, err)) return false;
        if (o->dump_after && strcmp(o->dump_after, p->name) == 0) ir_print(*g, o->dump_out);
    }
    pass_output_copies(g);
    if (o->verify && !verify(*g, "output copies", err)) return false;
    if (o->dump_after && !o->dump_after[0]) ir_print(*g, o->dump_out);
    return true;
}

const char *pass_where(const ir_graph *g, const ir_node *n, char *buf, size_t cap)
{
    const char *f = n->loc.file && n->loc.file <= g->nfiles ? g->files[n->loc.file - 1] : "?";
    const char *slash = strrchr(f, '/');
    snprintf(buf, cap, "%s:%u", slash ? slash + 1 : f, n->loc.line);
    return buf;
}

uint32_t *ir_count_uses(const ir_graph *g)
{
    uint32_t *n = nc_xcalloc(g->nnodes + 1, sizeof *n);
    for (ir_value v = 0; v < g->nnodes; v++)
        for (int i = 0; i < g->nodes[v].nargs; i++) n[ir_args(g, &g->nodes[v])[i]]++;
    for (uint32_t i = 0; i < g->noutputs; i++) n[g->outputs[i].value]++;
    for (uint32_t i = 0; i < g->nupdates; i++) n[g->updates[i].value]++;
    if (g->train.present && g->train.loss != IR_NONE) n[g->train.loss]++;
    return n;
}

bool ir_is_float_cast(const ir_graph *g, const ir_node *n)
{
    return n->op == OP_CAST && dtype_is_float(n->dtype) && dtype_is_float(g->nodes[ir_args(g, n)[0]].dtype);
}

ir_graph *ir_graph_shell(const ir_graph *g)
{
    ir_graph *out = ir_graph_new(g->name);
    for (uint32_t i = 0; i < g->ndims; i++) ir_dim_intern(out, &g->dims[i]);
    for (uint32_t i = 0; i < g->nsyms; i++) ir_sym_add(out, g->sym_names[i]);
    for (uint32_t i = 0; i < g->nfiles; i++) ir_file_add(out, g->files[i]);
    for (uint32_t i = 0; i < g->ninputs; i++) ir_input_add(out, &g->inputs[i]);
    for (uint32_t i = 0; i < g->nparams; i++) ir_param_add(out, &g->params[i]);
    for (uint32_t i = 0; i < g->nrequires; i++) ir_require_add(out, &g->requires[i]);
    out->train = g->train;
    return out;
}

void ir_graph_finish(ir_graph *out, const ir_graph *g, const ir_value *map)
{
    for (uint32_t i = 0; i < g->noutputs; i++) ir_output_add(out, g->outputs[i].name, map[g->outputs[i].value]);
    if (g->train.present && g->train.loss != IR_NONE) out->train.loss = map[g->train.loss];
    for (uint32_t i = 0; i < g->nupdates; i++) ir_update_add(out, g->updates[i].param, map[g->updates[i].value]);
}

ir_graph *ir_graph_reorder(const ir_graph *g, const ir_value *order)
{
    ir_graph *out = ir_graph_shell(g);
    ir_value *map = nc_xmalloc((g->nnodes + 1) * sizeof *map), *dst = nc_xmalloc((g->nargs + 1) * sizeof *dst);
    for (ir_value v = 0; v < g->nnodes; v++) map[v] = IR_NONE;
    for (ir_value k = 0; k < g->nnodes; k++) {
        ir_value v = order[k];
        const ir_node *n = &g->nodes[v];
        for (int i = 0; i < n->nargs; i++) {
            dst[i] = map[ir_args(g, n)[i]];
            NC_ASSERT(dst[i] != IR_NONE);
        }
        map[v] = ir_add(out, n, dst, n->nargs);
    }
    ir_graph_finish(out, g, map);
    free(dst);
    free(map);
    return out;
}

ir_graph *ir_graph_filter(const ir_graph *g, const bool *keep, const ir_value *replace)
{
    ir_graph *out = ir_graph_shell(g);
    ir_value *map = nc_xmalloc((g->nnodes + 1) * sizeof *map);
    ir_value args[256];
    for (ir_value v = 0; v < g->nnodes; v++) {
        map[v] = IR_NONE;
        ir_value src = replace ? replace[v] : v;
        if (src != v) { map[v] = map[src]; continue; }
        if (!keep[v]) continue;
        const ir_node *n = &g->nodes[v];
        const ir_value *a = ir_args(g, n);
        ir_value *dst = n->nargs <= 256 ? args : nc_xmalloc(n->nargs * sizeof *dst);
        for (int i = 0; i < n->nargs; i++) {
            dst[i] = map[a[i]];
            NC_ASSERT(dst[i] != IR_NONE);
        }
        map[v] = ir_add(out, n, dst, n->nargs);
        if (dst != args) free(dst);
    }
    ir_graph_finish(out, g, map);
    free(map);
    return out;
}
