/* pass_cast_hoist.c - move casts to where they save bytes.
 *
 * Requires: a verified graph. Produces: the same values, bit for bit, with
 *   - a float down-cast (f32 -> f16/bf16) moved above the ops it follows when
 *     they commute with rounding (the OPF_ROUND_COMMUTES ops of the table:
 *     data movement, relu, max/min): those ops then move narrow values;
 *   - a float up-cast moved below such ops the same way, so they move the
 *     narrow values before widening;
 *   - an up-cast followed by a down-cast back to the original dtype removed
 *     (the identity); a down-cast followed by an up-cast is a rounding the
 *     program asked for and is never touched.
 * Each move is decided by a byte count (what the ops involved read and write
 * before and after), not by a rule: hoisting a cast above a slice that drops
 * three quarters of its input, or above a broadcast, can cost bytes.
 * A reshape moves nothing (it is a view), so a cast is not moved across one
 * for its own sake. Symbolic dims count as SYM_ESTIMATE for that comparison. Values that end up
 * unused are dropped at the end (as dce would). */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

#define SYM_ESTIMATE 512

typedef struct hoist_ctx {
    const ir_graph *g;         /* the input graph */
    FILE *report;
    ir_graph *out;
    ir_value *map;             /* old value -> new value */
    ir_value *narrow[NC_DTYPE_COUNT];   /* old value -> new value of cast(old, dtype), memo */
    uint32_t *users;           /* uses of each old value (outputs, updates, the loss count) */
    int64_t syms[NC_MAX_SYMS];
} hoist_ctx;

static int64_t numel_of(const hoist_ctx *c, const ir_graph *g, const ir_node *n)
{
    int64_t v;
    return ir_numel(g, n, c->syms, &v) ? v : INT64_MAX / 64;
}

static bool commutes(const ir_node *n) { return (nc_ops[n->op].flags & OPF_ROUND_COMMUTES) != 0; }

/* Bytes an op reads and writes when its float operands of dtype from are
 * stored as dtype to (and its result too). */
static int64_t op_bytes(const hoist_ctx *c, const ir_node *n, nc_dtype from, nc_dtype to)
{
    const ir_graph *g = c->g;
    if (n->op == OP_RESHAPE) return 0;   /* a view of its operand in the GPU program (cuda_alias.c) */
    int64_t b = numel_of(c, g, n) * (int64_t)dtype_size(n->dtype == from ? to : n->dtype);
    for (int i = 0; i < n->nargs; i++) {
        const ir_node *a = &g->nodes[ir_args(g, n)[i]];
        /* a gather reads the rows it picks, not its whole table */
        int64_t read = n->op == OP_GATHER && i == 0 ? numel_of(c, g, n) : numel_of(c, g, a);
        b += read * (int64_t)dtype_size(a->dtype == from ? to : a->dtype);
    }
    return b;
}

static int64_t cast_bytes(const hoist_ctx *c, const ir_node *n, nc_dtype a, nc_dtype b)
{
    return numel_of(c, c->g, n) * (int64_t)(dtype_size(a) + dtype_size(b));
}

static ir_value emit(hoist_ctx *c, const ir_node *proto, const ir_value *args, uint16_t nargs)
{
    return ir_add(c->out, proto, args, nargs);
}

/* A cast of new_value to `to`, keeping the source location and the autocast
 * mark of the cast it stands for (origin, in the input graph). */
static ir_value emit_cast(hoist_ctx *c, ir_value new_value, nc_dtype to, const ir_node *origin)
{
    ir_node p = *origin;
    p.dtype = to;
    memset(&p.attr, 0, sizeof p.attr);
    p.attr.to = to;
    const ir_node *src = &c->out->nodes[new_value];
    p.rank = src->rank;
    memcpy(p.shape, src->shape, sizeof p.shape);
    return emit(c, &p, &new_value, 1);
}

/* Bytes saved by computing n in dtype `to` from narrowed operands instead of
 * narrowing its result (<= 0: not worth it). n's wide computation disappears
 * only if the cast is its one use. */
static int64_t hoisting_saves(const hoist_ctx *c, ir_value v, nc_dtype to)
{
    const ir_node *n = &c->g->nodes[v];
    nc_dtype from = n->dtype;
    int64_t after = op_bytes(c, n, from, to), before = cast_bytes(c, n, from, to);
    if (c->users[v] <= 1) before += op_bytes(c, n, from, from);
    for (int i = 0; i < n->nargs; i++) {
        ir_value a = ir_args(c->g, n)[i];
        if (c->g->nodes[a].dtype == from && c->narrow[to][a] == IR_NONE)
            after += cast_bytes(c, &c->g->nodes[a], from, to);
    }
    return before - after;
}

/* The new-graph value equal to cast(old value v, to), a narrower float;
 * origin is the cast being moved. */
static ir_value narrowed(hoist_ctx *c, ir_value v, nc_dtype to, const ir_node *origin)
{
    if (c->narrow[to][v] != IR_NONE) return c->narrow[to][v];
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[v];
    ir_value r;
    int64_t saved;
    ir_value src = n->nargs ? ir_args(g, n)[0] : IR_NONE;
    if (ir_is_float_cast(g, n) && g->nodes[src].dtype == to && dtype_size(n->dtype) > dtype_size(to)) {
        r = c->map[src];                                   /* down(up(x)) == x */
        if (c->report) {
            char w[128];
            fprintf(c->report, "cast-hoist: %s -> %s -> %s at %s is the identity: both casts removed\n",
                    dtype_name(to), dtype_name(n->dtype), dtype_name(to), pass_where(g, origin, w, sizeof w));
        }
    } else if (commutes(n) && (saved = hoisting_saves(c, v, to)) > 0) {
        if (c->report) {
            char w1[128], w2[128];
            fprintf(c->report, "cast-hoist: the %s cast of %s moved above %s %%%u (%s): about %lld bytes less moved\n",
                    dtype_name(to), pass_where(c->g, origin, w1, sizeof w1), nc_ops[n->op].name, v,
                    pass_where(c->g, n, w2, sizeof w2), (long long)saved);
        }
        ir_value args[NC_MAX_RANK * 8];
        NC_ASSERT(n->nargs <= NC_COUNT(args));
        for (int i = 0; i < n->nargs; i++) {
            ir_value a = ir_args(g, n)[i];
            args[i] = g->nodes[a].dtype == n->dtype ? narrowed(c, a, to, origin) : c->map[a];
        }
        ir_node p = *n;
        p.dtype = to;
        r = emit(c, &p, args, n->nargs);
    } else {
        r = emit_cast(c, c->map[v], to, origin);
    }
    c->narrow[to][v] = r;
    return r;
}

/* n commutes and every float operand is an up-cast from one narrow dtype:
 * compute n narrow and widen after, when that moves fewer bytes. */
static bool sink_upcasts(hoist_ctx *c, ir_value v)
{
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[v];
    if (!commutes(n) || !dtype_is_float(n->dtype) || n->op == OP_CAST) return false;
    nc_dtype narrow = NC_DTYPE_COUNT;
    int64_t before = op_bytes(c, n, n->dtype, n->dtype), after = 0;
    for (int i = 0; i < n->nargs; i++) {
        const ir_node *a = &g->nodes[ir_args(g, n)[i]];
        if (a->dtype != n->dtype) continue;
        if (!ir_is_float_cast(g, a)) return false;
        nc_dtype d = g->nodes[ir_args(g, a)[0]].dtype;
        if (dtype_size(d) >= dtype_size(n->dtype) || (narrow != NC_DTYPE_COUNT && d != narrow)) return false;
        narrow = d;
        if (c->users[ir_args(g, n)[i]] <= 1) before += cast_bytes(c, a, d, n->dtype);
    }
    if (narrow == NC_DTYPE_COUNT) return false;
    after = op_bytes(c, n, n->dtype, narrow) + cast_bytes(c, n, narrow, n->dtype);
    if (after >= before) return false;
    if (c->report) {
        char w[128];
        fprintf(c->report, "cast-hoist: the %s -> %s cast sunk below %s %%%u (%s): about %lld bytes less moved\n",
                dtype_name(narrow), dtype_name(n->dtype), nc_ops[n->op].name, v, pass_where(g, n, w, sizeof w),
                (long long)(before - after));
    }
    ir_value args[NC_MAX_RANK * 8];
    NC_ASSERT(n->nargs <= NC_COUNT(args));
    const ir_node *upcast = NULL;
    for (int i = 0; i < n->nargs; i++) {
        ir_value a = ir_args(g, n)[i];
        if (g->nodes[a].dtype == n->dtype) upcast = &g->nodes[a];
        args[i] = g->nodes[a].dtype == n->dtype ? c->map[ir_args(g, &g->nodes[a])[0]] : c->map[a];
    }
    ir_node p = *n;
    p.dtype = narrow;
    ir_value r = emit(c, &p, args, n->nargs);
    c->narrow[narrow][v] = r;
    c->map[v] = emit_cast(c, r, n->dtype, upcast);
    return true;
}

bool pass_cast_hoist(ir_graph **gp, const pass_ctx *cx)
{
    const ir_graph *g = *gp;
    hoist_ctx c = {.g = g, .out = ir_graph_shell(g), .report = cx->report};
    size_t n = g->nnodes + 1;
    c.map = nc_xmalloc(n * sizeof *c.map);
    c.users = ir_count_uses(g);
    for (int d = 0; d < NC_DTYPE_COUNT; d++) {
        c.narrow[d] = nc_xmalloc(n * sizeof *c.narrow[d]);
        for (size_t i = 0; i < n; i++) c.narrow[d][i] = IR_NONE;
    }
    for (int k = 0; k < NC_MAX_SYMS; k++) c.syms[k] = SYM_ESTIMATE;
    ir_value args[NC_MAX_RANK * 8];
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *node = &g->nodes[v];
        if (ir_is_float_cast(g, node) && dtype_size(node->dtype) < dtype_size(g->nodes[ir_args(g, node)[0]].dtype)) {
            c.map[v] = narrowed(&c, ir_args(g, node)[0], node->dtype, node);
            continue;
        }
        if (sink_upcasts(&c, v)) continue;
        const ir_value *a = ir_args(g, node);
        ir_value *dst = node->nargs <= NC_COUNT(args) ? args : nc_xmalloc(node->nargs * sizeof *dst);
        for (int i = 0; i < node->nargs; i++) dst[i] = c.map[a[i]];
        c.map[v] = emit(&c, node, dst, node->nargs);
        if (dst != args) free(dst);
    }
    ir_graph *out = c.out;
    ir_graph_finish(out, g, c.map);
    free(c.map);
    free(c.users);
    for (int d = 0; d < NC_DTYPE_COUNT; d++) free(c.narrow[d]);
    ir_graph_free(*gp);
    *gp = out;
    pass_ctx quiet = {.err = cx->err};
    return pass_dce(gp, &quiet);   /* the wide computations a hoist bypassed */
}
