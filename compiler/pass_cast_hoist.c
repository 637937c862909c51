/* pass_cast_hoist.c - move casts to where they save bytes.
 *
 * Requires: a verified graph. Produces: the same values, bit for bit, with
 *   - a float down-cast (f32 -> f16/bf16) moved above the ops it follows when
 *     they commute with rounding (the OPF_ROUND_COMMUTES ops of the table:
 *     data movement, relu, max/min, neg, abs, where): they then move narrow values;
 *   - a float up-cast moved below such ops the same way, so they move the
 *     narrow values before widening;
 *   - an up-cast followed by a down-cast back to the original dtype removed
 *     (the identity); a down-cast followed by an up-cast is a rounding the
 *     program asked for and is never touched;
 *   - at an accumulating op that can store a wide result (OPF_WIDE_RESULT:
 *     matmul, scatter_add): up-casts of all its float operands from one of
 *     f16/bf16 sunk into it (it reads them narrow and stores f32,
 *     attr.f32_result: it accumulates in f32 either way, and on the CPU
 *     executor the operands' values are the same floats), and a down-cast
 *     back to that dtype reaching such a result absorbed (the op rounds its
 *     f32 accumulator once, as the cast would; the f32 result is never
 *     written). cuBLASLt cannot store f16/bf16 from f32 operands, so a
 *     product of f32 operands keeps its cast; an embedding's backward
 *     (scatter_add of a widened gradient) reads the narrow gradient.
 * Each move is decided by a byte count (what the ops involved read and write
 * before and after, over the whole chain a cast would climb), not by a rule:
 * hoisting a cast above a slice that drops three quarters of its input, or
 * above a broadcast, can cost bytes. A reshape moves nothing (it is a view),
 * nor does a reshape, transpose or slice that the next transpose, slice or
 * concat reads through (cuda_fuse.c), so a cast is not moved across those
 * for their own sake. Symbolic dims count as SYM_ESTIMATE for that
 * comparison. Values that end up unused are dropped at the end (as dce
 * would). */
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
    ir_value *reader;          /* the last node reading each old value */
    int64_t *cost[NC_DTYPE_COUNT];   /* narrow_cost's memo at 2 v + wide_kept, COST_UNKNOWN until asked */
    uint8_t *way[NC_DTYPE_COUNT];    /* and the way it found (narrow_way), same index */
    int64_t syms[NC_MAX_SYMS];
} hoist_ctx;

#define COST_UNKNOWN INT64_MIN

/* How cast(v, to) is best provided. */
typedef enum narrow_way {
    NARROW_CAST,       /* a cast after v */
    NARROW_IDENTITY,   /* v is an up-cast from `to`: its operand */
    NARROW_HOIST,      /* v computed in `to` from narrowed operands (v commutes with rounding) */
    NARROW_RESULT,     /* v accumulates `to` operands (OPF_WIDE_RESULT): it stores its result in `to` */
} narrow_way;

/* Unknown sizes count as DIM_MAX_NUMEL elements, the most a tensor holds:
 * large, and still far from overflow when a chain of ops adds up their bytes. */
static int64_t numel_of(const hoist_ctx *c, const ir_graph *g, const ir_node *n)
{
    int64_t v;
    return ir_numel(g, n, c->syms, &v) && v <= DIM_MAX_NUMEL ? v : DIM_MAX_NUMEL;
}

static bool commutes(const ir_node *n) { return (nc_ops[n->op].flags & OPF_ROUND_COMMUTES) != 0; }

/* A link of a movement chain that the next transpose, slice or concat
 * reads through in the GPU program (cuda_fuse.c): no kernel of its own. */
static bool read_through(const hoist_ctx *c, ir_value v)
{
    const ir_graph *g = c->g;
    for (;;) {
        if (!op_is_movement_link(g->nodes[v].op) || c->users[v] != 1 || c->reader[v] == IR_NONE) return false;
        v = c->reader[v];
        if (op_reads_through(g->nodes[v].op)) return true;
    }
}

/* Bytes an op reads and writes when its float operands of dtype from are
 * stored as dtype to (and its result too). */
static int64_t op_bytes(const hoist_ctx *c, ir_value v, nc_dtype from, nc_dtype to)
{
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[v];
    if (n->op == OP_RESHAPE) return 0;   /* a view of its operand in the GPU program (cuda_alias.c) */
    if (read_through(c, v)) return 0;
    int64_t b = numel_of(c, g, n) * (int64_t)dtype_size(n->dtype == from ? to : n->dtype);
    for (int i = 0; i < n->nargs; i++) {
        const ir_node *a = &g->nodes[ir_args(g, n)[i]];
        /* a gather reads the rows it picks, not its whole table; a slice its part */
        bool picks = (n->op == OP_GATHER && i == 0) || n->op == OP_SLICE;
        int64_t read = picks ? numel_of(c, g, n) : numel_of(c, g, a);
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

/* The narrow float dtype v is an up-cast to f32 from (NC_DTYPE_COUNT: none). */
static nc_dtype upcast_from(const ir_graph *g, ir_value v)
{
    const ir_node *n = &g->nodes[v];
    if (!ir_is_float_cast(g, n) || n->dtype != NC_F32) return NC_DTYPE_COUNT;
    nc_dtype d = g->nodes[ir_args(g, n)[0]].dtype;
    return d == NC_F16 || d == NC_BF16 ? d : NC_DTYPE_COUNT;
}

static bool can_widen(const ir_node *n) { return (nc_ops[n->op].flags & OPF_WIDE_RESULT) != 0; }

/* The dtype an f32 OPF_WIDE_RESULT op could read its float operands in:
 * each up-cast from it, or its result widened already (NC_DTYPE_COUNT:
 * neither). */
static nc_dtype wide_narrow_dtype(const ir_graph *g, ir_value v)
{
    const ir_node *n = &g->nodes[v];
    if (!can_widen(n) || n->dtype != NC_F32) return NC_DTYPE_COUNT;
    nc_dtype d = NC_DTYPE_COUNT;
    for (int i = 0; i < n->nargs; i++) {
        ir_value a = ir_args(g, n)[i];
        if (!dtype_is_float(g->nodes[a].dtype)) continue;   /* scatter_add's indices */
        nc_dtype ad = n->attr.f32_result ? g->nodes[a].dtype : upcast_from(g, a);
        if (ad == NC_DTYPE_COUNT || (d != NC_DTYPE_COUNT && ad != d)) return NC_DTYPE_COUNT;
        d = ad;
    }
    return d;
}

/* Operand i of wide_narrow_dtype's op v, read narrow (a float operand's
 * up-cast's source). */
static ir_value narrow_operand(const ir_graph *g, ir_value v, int i)
{
    ir_value a = ir_args(g, &g->nodes[v])[i];
    return g->nodes[v].attr.f32_result || !dtype_is_float(g->nodes[a].dtype) ? a : ir_args(g, &g->nodes[a])[0];
}

/* Bytes that providing cast(v, to), a narrower float, adds to the program
 * (negative: it saves), by the cheapest way, which c->way records. wide_kept:
 * a user computed wide stays, so v's wide value is computed anyway (no
 * saving from dropping it, and a result is not computed twice). Asked of
 * the input graph, so the answer is memoized once per value, dtype and
 * wide_kept. */
static int64_t narrow_cost(hoist_ctx *c, ir_value v, nc_dtype to, bool wide_kept)
{
    size_t at = 2 * (size_t)v + wide_kept;
    if (c->cost[to][at] != COST_UNKNOWN) return c->cost[to][at];
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[v];
    nc_dtype from = n->dtype;
    bool sole = c->users[v] <= 1 && !wide_kept;   /* the wide v goes if this cast takes it */
    int64_t best = cast_bytes(c, n, from, to);
    narrow_way way = NARROW_CAST;
    ir_value src = n->nargs ? ir_args(g, n)[0] : IR_NONE;
    if (ir_is_float_cast(g, n) && g->nodes[src].dtype == to && dtype_size(from) > dtype_size(to)) {
        best = 0, way = NARROW_IDENTITY;
    } else if (wide_narrow_dtype(g, v) == to && sole) {
        best = -numel_of(c, g, n) * (int64_t)(dtype_size(from) - dtype_size(to)), way = NARROW_RESULT;
    } else if (commutes(n)) {
        int64_t hoist = op_bytes(c, v, from, to) - (sole ? op_bytes(c, v, from, from) : 0);
        for (int i = 0; i < n->nargs; i++) {
            ir_value a = ir_args(g, n)[i];
            if (g->nodes[a].dtype == from) hoist += narrow_cost(c, a, to, !sole);
        }
        if (hoist < best) best = hoist, way = NARROW_HOIST;
    }
    c->way[to][at] = (uint8_t)way;
    return c->cost[to][at] = best;
}

/* One line for each op a cast moves across; narrowed_top sums them up. */
static void report_move(const hoist_ctx *c, ir_value v, nc_dtype to, const ir_node *origin, size_t at)
{
    narrow_way way = (narrow_way)c->way[to][at];
    if (!c->report || way == NARROW_CAST) return;
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[v];
    char w1[128], w2[128];
    pass_where(g, origin, w1, sizeof w1);
    pass_where(g, n, w2, sizeof w2);
    if (way == NARROW_IDENTITY)
        fprintf(c->report, "cast-hoist: %s -> %s -> %s at %s is the identity: both casts removed\n", dtype_name(to),
                dtype_name(n->dtype), dtype_name(to), w1);
    else if (way == NARROW_RESULT)
        fprintf(c->report, "cast-hoist: the %s cast of %s taken by %s %%%u (%s): it stores its result in %s\n",
                dtype_name(to), w1, nc_ops[n->op].name, v, w2, dtype_name(to));
    else
        fprintf(c->report, "cast-hoist: the %s cast of %s moved above %s %%%u (%s)\n", dtype_name(to), w1,
                nc_ops[n->op].name, v, w2);
}

/* The new-graph value equal to cast(old value v, to), a narrower float;
 * origin is the cast being moved, wide_kept as for narrow_cost. */
static ir_value narrowed(hoist_ctx *c, ir_value v, nc_dtype to, const ir_node *origin, bool wide_kept)
{
    if (c->narrow[to][v] != IR_NONE) return c->narrow[to][v];
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[v];
    size_t at = 2 * (size_t)v + wide_kept;
    narrow_cost(c, v, to, wide_kept);
    narrow_way way = (narrow_way)c->way[to][at];
    bool sole = c->users[v] <= 1 && !wide_kept;
    ir_value r, args[NC_MAX_RANK * 8];
    NC_ASSERT(n->nargs <= NC_COUNT(args));
    report_move(c, v, to, origin, at);
    if (way == NARROW_IDENTITY) {
        r = c->map[ir_args(g, n)[0]];                      /* down(up(x)) == x */
    } else if (way == NARROW_RESULT) {
        for (int i = 0; i < n->nargs; i++) args[i] = c->map[narrow_operand(g, v, i)];
        ir_node p = *n;
        p.dtype = to;
        p.attr.f32_result = false;
        r = emit(c, &p, args, n->nargs);
    } else if (way == NARROW_HOIST) {
        for (int i = 0; i < n->nargs; i++) {
            ir_value a = ir_args(g, n)[i];
            args[i] = g->nodes[a].dtype == n->dtype ? narrowed(c, a, to, origin, !sole) : c->map[a];
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

/* The down-cast v of the input graph, moved where it saves the most. */
static ir_value narrowed_top(hoist_ctx *c, ir_value v)
{
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[v];
    ir_value src = ir_args(g, n)[0];
    bool fresh = c->narrow[n->dtype][src] == IR_NONE;
    ir_value r = narrowed(c, src, n->dtype, n, false);
    int64_t saved = cast_bytes(c, &g->nodes[src], g->nodes[src].dtype, n->dtype) - c->cost[n->dtype][2 * (size_t)src];
    if (c->report && fresh && c->way[n->dtype][2 * (size_t)src] != NARROW_CAST) {
        char w[128];
        fprintf(c->report, "cast-hoist: the %s cast of %s: about %lld bytes less moved\n", dtype_name(n->dtype),
                pass_where(g, n, w, sizeof w), (long long)saved);
    }
    return r;
}

/* An f32 OPF_WIDE_RESULT op (matmul, scatter_add) whose float operands are
 * up-cast from one of f16/bf16 reads them narrow and stores its f32 result
 * (f32_result): the same values, fewer bytes read (and, for a matmul,
 * tensor cores). */
static bool sink_upcasts_into_result(hoist_ctx *c, ir_value v)
{
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[v];
    nc_dtype narrow = wide_narrow_dtype(g, v);
    if (n->attr.f32_result || narrow == NC_DTYPE_COUNT) return false;
    ir_value args[NC_MAX_RANK * 8];
    NC_ASSERT(n->nargs <= NC_COUNT(args));
    int64_t saved = 0;
    for (int i = 0; i < n->nargs; i++) {
        ir_value a = ir_args(g, n)[i];
        args[i] = c->map[narrow_operand(g, v, i)];
        if (!dtype_is_float(g->nodes[a].dtype)) continue;
        saved += numel_of(c, g, &g->nodes[a]) * (int64_t)(dtype_size(NC_F32) - dtype_size(narrow));
        bool counted = false;   /* x @ x: one cast */
        for (int k = 0; k < i; k++) counted |= ir_args(g, n)[k] == a;
        if (c->users[a] <= 1 && !counted) saved += cast_bytes(c, &g->nodes[a], narrow, NC_F32);
    }
    if (c->report) {
        char w[128];
        fprintf(c->report, "cast-hoist: the %s -> f32 casts of %s %%%u's operands (%s) sunk into it: it reads %s, "
                "about %lld bytes less moved\n", dtype_name(narrow), nc_ops[n->op].name, v,
                pass_where(g, n, w, sizeof w), dtype_name(narrow), (long long)saved);
    }
    ir_node p = *n;
    p.attr.f32_result = true;
    c->map[v] = emit(c, &p, args, n->nargs);
    return true;
}

/* n commutes and every float operand is an up-cast from one narrow dtype:
 * compute n narrow and widen after, when that moves fewer bytes. */
static bool sink_upcasts(hoist_ctx *c, ir_value v)
{
    const ir_graph *g = c->g;
    const ir_node *n = &g->nodes[v];
    if (!commutes(n) || !dtype_is_float(n->dtype) || n->op == OP_CAST) return false;
    nc_dtype narrow = NC_DTYPE_COUNT;
    int64_t before = op_bytes(c, v, n->dtype, n->dtype), after = 0;
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
    after = op_bytes(c, v, n->dtype, narrow) + cast_bytes(c, n, narrow, n->dtype);
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
    c.reader = nc_xmalloc(n * sizeof *c.reader);
    for (size_t i = 0; i < n; i++) c.reader[i] = IR_NONE;
    for (ir_value v = 0; v < g->nnodes; v++)
        for (int i = 0; i < g->nodes[v].nargs; i++) c.reader[ir_args(g, &g->nodes[v])[i]] = v;
    for (int d = 0; d < NC_DTYPE_COUNT; d++) {
        c.narrow[d] = nc_xmalloc(n * sizeof *c.narrow[d]);
        c.cost[d] = nc_xmalloc(2 * n * sizeof *c.cost[d]);
        c.way[d] = nc_xcalloc(2 * n, sizeof *c.way[d]);
        for (size_t i = 0; i < n; i++) c.narrow[d][i] = IR_NONE;
        for (size_t i = 0; i < 2 * n; i++) c.cost[d][i] = COST_UNKNOWN;
    }
    for (int k = 0; k < NC_MAX_SYMS; k++) c.syms[k] = SYM_ESTIMATE;
    ir_value args[NC_MAX_RANK * 8];
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *node = &g->nodes[v];
        if (ir_is_float_cast(g, node) && dtype_size(node->dtype) < dtype_size(g->nodes[ir_args(g, node)[0]].dtype)) {
            c.map[v] = narrowed_top(&c, v);
            continue;
        }
        if (sink_upcasts_into_result(&c, v) || sink_upcasts(&c, v)) continue;
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
    free(c.reader);
    for (int d = 0; d < NC_DTYPE_COUNT; d++) free(c.narrow[d]), free(c.cost[d]), free(c.way[d]);
    ir_graph_free(*gp);
    *gp = out;
    pass_ctx quiet = {.err = cx->err};
    return pass_dce(gp, &quiet);   /* the wide computations a hoist bypassed */
}
