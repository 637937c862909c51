/* mem_budget.c - fit a training step into a memory budget by recomputation.
 *
 * Requires: a training-step graph after the passes, every dim bound (the
 * plan is made for one size). Produces: the same step, recomputing forward
 * values rather than keeping them for the backward pass, whose planned peak
 * - what a GPU session allocates: parameters, optimizer state, the
 * activation arena, cuBLASLt's workspace - fits the budget at the lowest
 * roofline floor the search finds; or an error giving the smallest peak
 * recomputation can reach.
 *
 * Two kinds of plan are made and the faster that fits wins. Single values:
 * the forward values the backward pass reads, each recomputed from kept
 * values only (one op deep), ranked by the work a recomputation costs per
 * byte it frees with each op category weighted (elementwise ops and data
 * movement cheap to redo, norms and reductions a little less, matmuls last);
 * the peak falls (nearly) monotonically along the ranking, so a binary
 * search finds the shortest prefix that fits. Segments: the forward pass cut
 * at its narrowest points (between layers; from the first op on a weight to
 * where the backward pass begins, what follows the last cut kept) into
 * automatic @checkpoint blocks; for each spacing of the cuts, keeping
 * every matmul and attention result (where the backward pass reads it; else
 * what it reads that is made from it, the value after a bias or GELU
 * epilogue), else as many of the values the backward pass reads as fit,
 * dearest to redo per byte first (redo_costs: as the fused program would
 * redo them), down to none; the room the best plan leaves goes to later
 * values of the ranking that make it faster. Each candidate is scored by
 * compiling it (plan_cost_of), and each cost is kept by what the candidate
 * recomputes (plan_cache): the search meets many again. */
#include "mem_budget.h"
#include "cuda_emit.h"
#include "inspect.h"
#include "schedule.h"
#include "passes.h"
#include "program.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct candidate {
    ir_value v;
    double score;              /* weighted work per byte freed: lower first */
    int64_t bytes;
} candidate;

static double category_weight(nc_op_category c)
{
    switch (c) {
    case CAT_ELEMENTWISE: case CAT_MOVEMENT: return 1;
    case CAT_REDUCTION: return 2;
    case CAT_ROWWISE: return 4;
    case CAT_CONTRACTION: case CAT_ATTENTION: return 1000;
    default: return 1e9;
    }
}

typedef struct plan_cache plan_cache;

/* What every step of the search needs: how the program will be emitted,
 * where to log, where to put an error, the costs already paid for. */
typedef struct budget_ctx {
    bool fuse;
    FILE *log;
    char *err;
    size_t errcap;
    plan_cache *cache;
    cuda_body_memo *memo;   /* the candidates' kernel bodies, which most share (cuda_emit_program_cost) */
} budget_ctx;

/* What a plan costs: its peak (bytes, -1 on error) and its roofline floor
 * on an H100 (seconds), the time the search weighs recomputation by. The
 * peak is what a GPU session allocates: the arena and what the runtime holds
 * beside it (nrt_program_side_bytes), inputs staged by a training loop
 * included. */
typedef struct plan_cost {
    int64_t peak;
    double floor_s;
    int64_t side;      /* of the peak, what the session holds beside the arena */
} plan_cost;

static plan_cost plan_cost_of(const ir_graph *unscheduled, bool fuse, cuda_body_memo *memo, char *err, size_t errcap)
{
    plan_cost c = {.peak = -1};
    ir_graph *scheduled = schedule_training_step(unscheduled, fuse, NULL);   /* as the driver will */
    const ir_graph *g = scheduled ? scheduled : unscheduled;
    nrt_program p;
    if (!cuda_emit_program_cost(g, fuse, memo, &p, err, errcap)) {
        ir_graph_free(scheduled);
        return c;
    }
    memplan_result r;
    memplan_buf *bufs = program_plan_memory(g, &p, NULL, &r, err, errcap);
    if (bufs) {
        int64_t side = nrt_program_side_bytes(&p, nrt_program_staged_bytes(g, NULL));
        c = (plan_cost){r.arena_bytes + side, inspect_floor_seconds(g, &p, bufs, NULL), side};
    }
    free(bufs);
    nrt_program_free(&p);
    ir_graph_free(scheduled);
    return c;
}

int64_t mem_budget_planned_peak(const ir_graph *g, bool fuse, char *err, size_t errcap)
{
    return plan_cost_of(g, fuse, NULL, err, errcap).peak;
}

double mem_budget_planned_floor(const ir_graph *g, bool fuse, char *err, size_t errcap)
{
    plan_cost c = plan_cost_of(g, fuse, NULL, err, errcap);
    return c.peak < 0 ? -1 : c.floor_s;
}

/* The search meets the same candidate again (each spacing's prefix search
 * and the headroom fill retry plans, wide spacings cut at the same points,
 * the chosen single-value plan is costed once more): a candidate is the
 * step with a choice of what to recompute (its regions, its chosen values),
 * and compiling it is nearly all of the search's time, so each choice's cost
 * is kept. One cache a step: the weights' copies carried or not change every
 * cost. */
typedef struct cached_cost {
    char kind;          /* 's': single values chosen, 'r': regions */
    uint64_t hash;
    unsigned char *key;
    size_t len;
    plan_cost cost;
} cached_cost;

struct plan_cache {
    cached_cost *e;
    uint32_t n, cap;
    uint32_t hits;
};

static uint64_t key_hash(const void *key, size_t len)
{
    const unsigned char *k = key;
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ k[i]) * 1099511628211ull;
    return h;
}

static const plan_cost *cache_find(const plan_cache *c, char kind, const void *key, size_t len)
{
    uint64_t h = key_hash(key, len);
    for (uint32_t i = 0; c && i < c->n; i++)
        if (c->e[i].kind == kind && c->e[i].hash == h && c->e[i].len == len && memcmp(c->e[i].key, key, len) == 0)
            return &c->e[i].cost;
    return NULL;
}

static void cache_add(plan_cache *c, char kind, const void *key, size_t len, plan_cost cost)
{
    if (!c) return;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->e = nc_xrealloc(c->e, c->cap * sizeof *c->e);
    }
    unsigned char *copy = nc_xmalloc(len ? len : 1);
    memcpy(copy, key, len);
    c->e[c->n++] = (cached_cost){kind, key_hash(key, len), copy, len, cost};
}

static void cache_free(plan_cache *c)
{
    for (uint32_t i = 0; i < c->n; i++) free(c->e[i].key);
    free(c->e);
}

/* The cost of candidate g, made from the search's step by the choice key
 * (the same key, the same graph): from the cache, or compiled and kept. */
static plan_cost candidate_cost(const ir_graph *g, char kind, const void *key, size_t len, const budget_ctx *b)
{
    const plan_cost *known = cache_find(b->cache, kind, key, len);
    if (known) {
        b->cache->hits++;
        return *known;
    }
    plan_cost c = plan_cost_of(g, b->fuse, b->memo, b->err, b->errcap);
    if (c.peak >= 0) cache_add(b->cache, kind, key, len, c);   /* an error is not kept: err says it each time */
    return c;
}

static int by_score(const void *x, const void *y)
{
    const candidate *a = x, *b = y;
    if (a->score != b->score) return a->score < b->score ? -1 : 1;
    return a->bytes != b->bytes ? (a->bytes > b->bytes ? -1 : 1) : (a->v < b->v ? -1 : 1);
}

/* Which values the backward pass reads (an array the caller frees). */
static bool *backward_reads(const ir_graph *g)
{
    bool *read_by_backward = nc_xcalloc(g->nnodes + 1, sizeof *read_by_backward);
    for (ir_value v = g->train.loss + 1; v < g->nnodes; v++)
        for (int i = 0; i < g->nodes[v].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[v])[i];
            read_by_backward[a] = true;
            /* a backward matmul reads its forward operand through a reshape, a view: the value behind it is read */
            while (a > g->train.loss && g->nodes[a].op == OP_RESHAPE) read_by_backward[a = ir_args(g, &g->nodes[a])[0]] = true;
        }
    return read_by_backward;
}

static uint32_t rank_candidates(const ir_graph *g, candidate *out)
{
    bool *read_by_backward = backward_reads(g);
    uint32_t n = 0;
    for (ir_value v = 0; v <= g->train.loss; v++) {
        const ir_node *node = &g->nodes[v];
        int64_t numel;
        if (!read_by_backward[v] || nc_ops[node->op].category == CAT_SOURCE || !ir_numel(g, node, NULL, &numel)) continue;
        int64_t bytes = numel * (int64_t)dtype_size(node->dtype);
        /* what recomputing it frees: its bytes, less operands that only the
         * recomputation would keep alive (x + bias frees nothing when x is
         * a matmul result the backward pass does not otherwise read) */
        for (int i = 0; i < node->nargs; i++) {
            const ir_node *a = &g->nodes[ir_args(g, node)[i]];
            int64_t an;
            if (!read_by_backward[ir_args(g, node)[i]] && nc_ops[a->op].category != CAT_SOURCE && a->op != OP_BROADCAST &&
                ir_numel(g, a, NULL, &an))
                bytes -= an * (int64_t)dtype_size(a->dtype);
        }
        if (bytes < 4096) continue;   /* not worth a kernel launch */
        double work = (double)numel * category_weight(nc_ops[node->op].category);
        out[n++] = (candidate){.v = v, .score = work / (double)bytes, .bytes = bytes};
    }
    free(read_by_backward);
    qsort(out, n, sizeof *out, by_score);
    return n;
}

/* The step with the first k candidates recomputed, and its cost. */
static ir_graph *with_prefix(const ir_graph *g, const candidate *c, uint32_t k, plan_cost *cost, const budget_ctx *b)
{
    /* A recomputed value is computed from kept ones: recomputing a chain would
     * bring the whole chain back to life at the first backward use, which
     * frees nothing. So a candidate whose operand or user is already chosen
     * is passed over. */
    bool *chosen = nc_xcalloc(g->nnodes + 1, sizeof *chosen), *kept = nc_xcalloc(g->nnodes + 1, sizeof *kept);
    for (uint32_t i = 0; i < k; i++) {
        const ir_node *n = &g->nodes[c[i].v];
        bool free_to_choose = !kept[c[i].v];
        for (int a = 0; a < n->nargs && free_to_choose; a++) free_to_choose = !chosen[ir_args(g, n)[a]];
        if (!free_to_choose) continue;
        chosen[c[i].v] = true;
        for (int a = 0; a < n->nargs; a++) kept[ir_args(g, n)[a]] = true;
    }
    free(kept);
    pass_ctx cx = {.err = b->log};
    ir_graph *out = recompute_values(g, chosen, &cx);
    *cost = out ? candidate_cost(out, 's', chosen, (size_t)g->nnodes + 1, b) : (plan_cost){.peak = -1};
    free(chosen);
    return out;
}

static void human(int64_t bytes, char *buf, size_t cap)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    snprintf(buf, cap, u ? "%.2f %s" : "%.0f %s", v, units[u]);
}

static bool expensive(const ir_node *n)
{
    return nc_ops[n->op].category == CAT_CONTRACTION || nc_ops[n->op].category == CAT_ATTENTION;
}

static int64_t bound_dim(const ir_graph *g, uint32_t dim)
{
    int64_t v = 1;
    dim_eval(&g->dims[dim], NULL, &v);
    return v;
}

/* Seconds per byte of result that computing v again costs, at the H100's
 * rates (as netc inspect's floor): a matmul 2K FLOPs per element on tensor
 * cores, attention two products over every key a query sees; elementwise,
 * row-wise ops and data movement the bytes they move, each plus what its
 * dearest operand costs when the backward pass does not read that operand
 * (it will not be kept, so computing v again means computing it again: a
 * bias added to a matmul's result costs the matmul), and nothing of their own
 * where a matmul's epilogue applies them; a parameter's low-precision copy
 * the bytes it moves. 0 for the rest (made from inputs and constants
 * alone): the segments redo that anyway. */
#define REDO_FLOPS_PER_S 750e12
#define REDO_BYTES_PER_S 2.9e12

/* The ops cuBLASLt applies as a matmul stores its product (cuda_epilogue.c):
 * redone with the matmul, they cost only what else they read. */
static bool epilogue_op(nc_op op) { return op == OP_ADD || op == OP_GELU_TANH || op == OP_RELU; }

typedef struct redo_ctx {
    const ir_graph *g;
    const bool *read_by_backward;
    double *cost;
    bool *in_epilogue;      /* a matmul's product, or an op its epilogue applies */
    const bool *from_params;
} redo_ctx;

static double bytes_of(const ir_graph *g, ir_value v) { return (double)ir_bytes(g, &g->nodes[v], NULL); }

/* What reading operand v moves: a broadcast is read through (a bias). */
static double read_bytes(const ir_graph *g, ir_value v)
{
    while (g->nodes[v].op == OP_BROADCAST) v = ir_args(g, &g->nodes[v])[0];
    return bytes_of(g, v);
}

/* An elementwise op or data movement: what it moves plus its dearest
 * operand the backward pass does not keep; nothing of its own when the
 * matmul's epilogue applies it. */
static void redo_elementwise(redo_ctx *r, ir_value v)
{
    const ir_graph *g = r->g;
    const ir_node *n = &g->nodes[v];
    double out = bytes_of(g, v), upstream = 0, moved = out, others = 0;
    ir_value product = IR_NONE;
    int dear = 0;
    for (int i = 0; i < n->nargs; i++) {
        ir_value a = ir_args(g, n)[i];
        if (a > g->train.loss || r->cost[a] <= 0) {
            others += read_bytes(g, a);
            continue;
        }
        dear++;
        double redo_a = r->cost[a] * bytes_of(g, a) / out;   /* a small operand (a norm's weight) costs little per byte of v */
        if (!r->read_by_backward[a] && redo_a > upstream) upstream = redo_a;
        if (r->in_epilogue[a] && (product == IR_NONE || !r->read_by_backward[a])) product = a;
        else others += read_bytes(g, a);
        moved += bytes_of(g, a);
    }
    /* a parameter's low-precision copy costs the bytes it moves too */
    bool param_copy = r->from_params[v] && ir_is_float_cast(g, n);
    if (!dear && !param_copy) return;
    if (param_copy) moved += others;
    r->cost[v] = upstream + moved / out / REDO_BYTES_PER_S;
    if (!epilogue_op(n->op) || product == IR_NONE) return;
    if (!r->read_by_backward[product]) {
        r->cost[v] = upstream + others / out / REDO_BYTES_PER_S;
        r->in_epilogue[v] = true;
    } else if (n->op == OP_GELU_TANH) {
        /* the value before the GELU is kept as the epilogue's auxiliary
         * output: redoing the matmul makes both, so dropping both costs
         * the matmul over their bytes together */
        double pair = r->cost[product] * bytes_of(g, product) / (bytes_of(g, product) + out);
        r->cost[product] = r->cost[v] = pair;
    }
}

static double *redo_costs(const ir_graph *g, const bool *read_by_backward)
{
    redo_ctx r = {.g = g, .read_by_backward = read_by_backward};
    r.cost = nc_xcalloc((size_t)g->train.loss + 1, sizeof *r.cost);
    r.in_epilogue = nc_xcalloc((size_t)g->train.loss + 1, sizeof *r.in_epilogue);
    bool *from_params = ir_parameter_values(g);
    r.from_params = from_params;
    for (ir_value v = 0; v <= g->train.loss; v++) {
        const ir_node *n = &g->nodes[v];
        double out = bytes_of(g, v);
        if (out <= 0) continue;
        nc_op_category cat = nc_ops[n->op].category;
        if (cat == CAT_CONTRACTION) {
            const ir_node *x = &g->nodes[ir_args(g, n)[0]];
            double k = (double)bound_dim(g, x->shape[x->rank - (n->attr.ta ? 2 : 1)]);
            r.cost[v] = 2.0 * k / dtype_size(n->dtype) / REDO_FLOPS_PER_S;
            r.in_epilogue[v] = n->op == OP_MATMUL;
        } else if (cat == CAT_ATTENTION) {
            const ir_node *k = &g->nodes[ir_args(g, n)[1]];
            double keys = (double)bound_dim(g, k->shape[k->rank - 2]) * (n->attr.causal ? 0.5 : 1.0);
            r.cost[v] = 4.0 * keys / dtype_size(n->dtype) / REDO_FLOPS_PER_S;
        } else if (cat == CAT_MOVEMENT || cat == CAT_ELEMENTWISE || cat == CAT_ROWWISE) {
            redo_elementwise(&r, v);
        }
    }
    free(from_params);
    free(r.in_epilogue);
    return r.cost;
}

typedef struct kept_value {
    ir_value v;
    double cost;
} kept_value;

static int by_redo_cost(const void *x, const void *y)
{
    const kept_value *a = x, *b = y;
    if (a->cost != b->cost) return a->cost > b->cost ? -1 : 1;
    return a->v < b->v ? -1 : 1;
}

/* The forward values the backward pass reads that come from a matmul or
 * attention, dearest to redo first. Keeping what the backward pass does not
 * read would only keep it alive until a recomputed segment reads it. */
static uint32_t rank_dear_values(const ir_graph *g, kept_value *out)
{
    bool *read_by_backward = backward_reads(g);
    double *cost = redo_costs(g, read_by_backward);
    uint32_t n = 0;
    for (ir_value v = 0; v <= g->train.loss; v++)
        if (cost[v] > 0 && read_by_backward[v]) out[n++] = (kept_value){v, cost[v]};
    free(cost);
    free(read_by_backward);
    qsort(out, n, sizeof *out, by_redo_cost);
    return n;
}

/* The values that hold a matmul's or attention's work for the backward
 * pass: each such result the backward pass reads, else the first values
 * made from one (through ops whose results it does not read) that it reads.
 * Keeping a matmul's raw product where only its epilogue (a bias add, a
 * GELU) reads it stored the product unfused, then ran the add and GELU as
 * kernels of their own in the forward pass and again in the backward: the
 * value after the epilogue is kept instead, with the same bytes. */
bool *mem_budget_dear_results(const ir_graph *g)
{
    bool *read_by_backward = backward_reads(g);
    bool *holds = nc_xcalloc((size_t)g->nnodes + 1, 1), *keep = nc_xcalloc((size_t)g->nnodes + 1, 1);
    for (ir_value v = 0; v <= g->train.loss; v++) {
        const ir_node *n = &g->nodes[v];
        holds[v] = expensive(n);
        for (int i = 0; i < n->nargs; i++) holds[v] |= holds[ir_args(g, n)[i]] && !read_by_backward[ir_args(g, n)[i]];
        keep[v] = holds[v] && read_by_backward[v];
    }
    free(holds);
    free(read_by_backward);
    return keep;
}

/* A segment plan: the step, its cost, how many segments. */
typedef struct segment_plan {
    ir_graph *graph;
    plan_cost cost;
    uint32_t segments, kept, of;   /* kept of `of` dear values; of == 0: all matmul and attention results, or none */
    uint32_t every, extra;         /* cuts at every `every`-th narrow point; values kept past the prefix */
    bool keep_expensive;
} segment_plan;

/* The step with the forward pass cut after each node where cut[v] (each
 * piece a recomputation region, as if an @checkpoint block): only values
 * that cross a cut stay alive for the backward pass, and those where keep[v]
 * (NULL: none) too: left out of every region, so the backward pass reads
 * them as kept and recomputes only what lies between them. */
#define SMALL_VALUE_BYTES (64 << 10)
static segment_plan with_cuts(const ir_graph *g, const bool *cut, const bool *keep, const budget_ctx *b)
{
    bool *all = nc_xmalloc((g->nnodes + 1) * sizeof *all);
    for (ir_value v = 0; v < g->nnodes; v++) all[v] = true;
    ir_graph *t = ir_graph_filter(g, all, NULL);
    free(all);
    /* what follows the last cut is kept: the backward pass starts there and
     * would redo it at once (a loss in slices, each slice's backward beside
     * its forward, would be done twice) */
    ir_value tail = 0;
    for (ir_value v = 0; v <= t->train.loss; v++)
        if (cut[v]) tail = v + 1;
    uint32_t region = 1;
    for (ir_value v = 0; v <= t->train.loss; v++) {
        /* small values are kept: redoing one frees next to nothing and costs a
         * launch (a slice of the labels, the loss's seed over its slices) */
        bool small = ir_bytes(t, &t->nodes[v], NULL) <= SMALL_VALUE_BYTES;
        bool outside = nc_ops[t->nodes[v].op].category == CAT_SOURCE || small || (keep && keep[v]);
        t->nodes[v].region = outside || v >= tail ? 0 : region;
        if (cut[v]) region++;
    }
    segment_plan plan = {.cost.peak = -1, .segments = region - 1};
    uint32_t nkey = t->train.loss + 1, *key = nc_xmalloc(nkey * sizeof *key);   /* the regions are the choice */
    for (ir_value v = 0; v < nkey; v++) key[v] = t->nodes[v].region;
    pass_ctx cx = {.err = b->log};
    if (!pass_recompute(&t, &cx)) {
        free(key);
        ir_graph_free(t);
        return plan;
    }
    plan.cost = candidate_cost(t, 'r', key, nkey * sizeof *key, b);
    free(key);
    if (plan.cost.peak < 0) {
        ir_graph_free(t);
        return plan;
    }
    plan.graph = t;
    return plan;
}

/* Bytes of forward values that cross the point after node p (made at or
 * before p, read by a forward node after it): where this is small - between
 * two layers only the residual stream crosses - a cut keeps little. */
static int64_t *cut_widths(const ir_graph *g)
{
    ir_value end = g->train.loss;
    int64_t *delta = nc_xcalloc((size_t)end + 2, sizeof *delta);
    ir_value *last = nc_xmalloc(((size_t)end + 1) * sizeof *last);
    for (ir_value v = 0; v <= end; v++) last[v] = v;
    for (ir_value u = 0; u <= end; u++)
        for (int i = 0; i < g->nodes[u].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[u])[i];
            if (u > last[a]) last[a] = u;
        }
    bool *constant = ir_constant_values(g);   /* made again in each segment: they cross nothing */
    /* a weight's low-precision copy lives through the step wherever the cuts
     * are (GPT-2's embedding, read by the first layer and the head: 74 MiB
     * over every point would hide which are narrow) */
    bool *from_params = ir_parameter_values(g);
    for (ir_value v = 0; v <= end; v++) {
        int64_t numel;
        if (nc_ops[g->nodes[v].op].category == CAT_SOURCE || constant[v] || from_params[v] || last[v] == v ||
            !ir_numel(g, &g->nodes[v], NULL, &numel))
            continue;
        int64_t bytes = numel * (int64_t)dtype_size(g->nodes[v].dtype);
        delta[v] += bytes;          /* crosses the points after v .. after last[v] - 1 */
        delta[last[v]] -= bytes;
    }
    free(last);
    free(constant);
    free(from_params);
    for (ir_value p = 1; p <= end; p++) delta[p] += delta[p - 1];
    return delta;
}

/* The first forward node that computes with a parameter: before it lie the
 * inputs' own values (a slice of the tokens, a cast of the pixels), which
 * the backward pass does not read, so a cut there saves nothing; and being
 * small (bytes, not activations) they would make every later point look
 * wide. */
static ir_value first_weighted(const ir_graph *g)
{
    bool *from_params = ir_parameter_values(g);
    ir_value first = 0;
    for (ir_value v = 0; v <= g->train.loss && !first; v++) {
        const ir_node *n = &g->nodes[v];
        if (from_params[v] || nc_ops[n->op].category == CAT_SOURCE) continue;
        for (int i = 0; i < n->nargs && !first; i++)
            if (from_params[ir_args(g, n)[i]]) first = v;
    }
    free(from_params);
    return first;
}

/* Where the backward pass begins: the first node before the loss that the
 * loss does not depend on and the backward pass does (the loss in slices
 * does each slice's backward beside its forward, loss_chunk.c; a batch
 * norm's running statistics feed neither); else the loss. Segments end
 * before it: one that held that work would do it twice. */
static ir_value backward_start(const ir_graph *g)
{
    ir_value end = g->train.loss;
    bool *feeds_loss = nc_xcalloc((size_t)g->nnodes + 1, sizeof *feeds_loss);
    bool *feeds_backward = nc_xcalloc((size_t)g->nnodes + 1, sizeof *feeds_backward);
    feeds_loss[end] = true;
    for (ir_value v = g->nnodes; v-- > 0;)
        for (int i = 0; i < g->nodes[v].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[v])[i];
            if (feeds_loss[v]) feeds_loss[a] = true;
            if (v > end || feeds_backward[v]) feeds_backward[a] = true;
        }
    /* constants and the weights' copies are shared with the backward pass
     * (CSE merged a 0.9 with Adam's): not its work */
    bool *constant = ir_constant_values(g), *from_params = ir_parameter_values(g);
    ir_value start = end;
    for (ir_value v = 0; v < end && start == end; v++)
        if (!feeds_loss[v] && feeds_backward[v] && !constant[v] && !from_params[v] &&
            nc_ops[g->nodes[v].op].category != CAT_SOURCE)
            start = v;
    free(feeds_loss);
    free(feeds_backward);
    free(constant);
    free(from_params);
    return start;
}

/* The narrowest points of the forward pass (within 1.25x of the narrowest,
 * at least 8 nodes apart) from its first weighted node to where the backward
 * pass begins: where segments may end. */
static ir_value *narrow_points(const ir_graph *g, uint32_t *npoints)
{
    ir_value end = g->train.loss, start = first_weighted(g), stop = backward_start(g);
    int64_t *width = cut_widths(g), narrowest = INT64_MAX;
    for (ir_value p = start > end / 20 ? start : end / 20; p + end / 20 < end && p < stop; p++)
        if (width[p] > 0 && width[p] < narrowest) narrowest = width[p];
    ir_value *points = nc_xmalloc(((size_t)end + 1) * sizeof *points);
    uint32_t n = 0;
    for (ir_value p = start; p + 1 < stop; p++)
        if (width[p] > 0 && width[p] <= narrowest + narrowest / 4 && (!n || p >= points[n - 1] + 8)) points[n++] = p;
    free(width);
    *npoints = n;
    return points;
}

/* best takes t when t fits the budget and is faster (or best is empty);
 * *smallest follows the lowest peak seen, fitting or not. */
static void consider(segment_plan *best, segment_plan t, int64_t budget, int64_t *smallest)
{
    if (t.cost.peak >= 0 && (*smallest < 0 || t.cost.peak < *smallest)) *smallest = t.cost.peak;
    if (t.graph && t.cost.peak <= budget && (!best->graph || t.cost.floor_s < best->cost.floor_s)) {
        ir_graph_free(best->graph);
        *best = t;
    } else {
        ir_graph_free(t.graph);
    }
}

/* Spacings of the cuts worth trying: every narrow point, every second, ...
 * growing by about a quarter, so a 12-layer model gets a cut per layer
 * among them without planning every spacing. */
static uint32_t next_spacing(uint32_t every) { return every < 4 ? every + 1 : every + every / 4; }

static void mark_cuts(bool *cut, size_t n, const ir_value *points, uint32_t npoints, uint32_t every)
{
    memset(cut, 0, n);
    for (uint32_t i = every - 1; i < npoints; i += every) cut[points[i]] = true;
    if (npoints) cut[points[npoints - 1]] = true;   /* the segments end where the kept tail begins */
}

static segment_plan keeping_first(const ir_graph *g, const bool *cut, uint32_t every, const kept_value *rank, uint32_t k,
                                  uint32_t n, bool *keep, const budget_ctx *b)
{
    memset(keep, 0, (size_t)g->nnodes + 1);
    for (uint32_t i = 0; i < k; i++) keep[rank[i].v] = true;
    segment_plan t = with_cuts(g, cut, keep, b);
    t.kept = k, t.of = n, t.every = every;
    return t;
}

/* With cuts every `every` narrow points, keep the first k of the dear
 * values: the largest k that fits, found by a binary search (the peak
 * mostly grows with k and the time falls). Mostly: keeping a value can also
 * lower the peak (its recomputation would have needed its operands alive
 * at once), so a short ranking is tried whole. */
#define EVERY_PREFIX_UP_TO 24
static void keep_what_fits(const ir_graph *g, int64_t budget, const bool *cut, const kept_value *rank, uint32_t n,
                           uint32_t every, bool whole_first, segment_plan *best, int64_t *smallest, const budget_ctx *b)
{
    bool *keep = nc_xmalloc((size_t)g->nnodes + 1);
    if (whole_first) {   /* likely to fit, and then no shorter prefix is faster */
        segment_plan t = keeping_first(g, cut, every, rank, n, n, keep, b);
        bool fits = t.graph && t.cost.peak <= budget;
        consider(best, t, budget, smallest);
        if (fits) {
            free(keep);
            return;
        }
    }
    if (n <= EVERY_PREFIX_UP_TO) {
        for (uint32_t k = 0; k <= n; k++) consider(best, keeping_first(g, cut, every, rank, k, n, keep, b), budget, smallest);
    } else {
        for (uint32_t lo = 0, hi = n; lo <= hi;) {
            uint32_t mid = lo + (hi - lo) / 2;
            segment_plan t = keeping_first(g, cut, every, rank, mid, n, keep, b);
            bool fits = t.graph && t.cost.peak <= budget;
            consider(best, t, budget, smallest);
            if (fits) lo = mid + 1;
            else if (mid == 0) break;
            else hi = mid - 1;
        }
    }
    free(keep);
}

/* The best plan keeps a prefix of the ranking; what room the budget still
 * has goes to the later values that fit, one at a time, each kept only if
 * the plan stays within the budget and gets faster. */
static void fill_headroom(const ir_graph *g, int64_t budget, const bool *cut, const kept_value *rank, uint32_t n,
                          segment_plan *best, int64_t *smallest, const budget_ctx *b)
{
    bool *keep = nc_xcalloc((size_t)g->nnodes + 1, 1);
    for (uint32_t i = 0; i < best->kept; i++) keep[rank[i].v] = true;
    uint32_t extra = 0, kept = best->kept, every = best->every;
    for (uint32_t i = best->kept; i < n; i++) {
        keep[rank[i].v] = true;
        segment_plan t = with_cuts(g, cut, keep, b);
        bool better = t.graph && t.cost.peak <= budget && t.cost.floor_s < best->cost.floor_s;
        if (better) {
            extra++;
            t.kept = kept, t.of = n, t.every = every, t.extra = extra;
        } else {
            keep[rank[i].v] = false;
        }
        consider(best, t, budget, smallest);   /* takes t only when better */
    }
    free(keep);
}

/* Recompute segments of the forward pass, trying for each spacing of the
 * cuts: keeping every matmul and attention result; else as many of them as
 * fit; and recomputing the segments whole. The fastest plan that fits by
 * the roofline floor wins; NULL if none fits (*smallest: the lowest peak). */
static segment_plan fit_by_segments(const ir_graph *g, int64_t budget, int64_t *smallest, const budget_ctx *b)
{
    uint32_t npoints, nrank;
    ir_value *points = narrow_points(g, &npoints);
    kept_value *rank = nc_xmalloc(((size_t)g->train.loss + 1) * sizeof *rank);
    nrank = rank_dear_values(g, rank);
    bool *all_expensive = mem_budget_dear_results(g), *cut = nc_xmalloc((size_t)g->nnodes + 1);
    /* the ranking's best plan is filled on its own: a faster plan keeping
     * every matmul and attention result must not stop that */
    segment_plan best = {.cost.peak = -1}, ranked = {.cost.peak = -1};
    bool loose_searched = false;
    for (uint32_t every = 1; every <= npoints; every = next_spacing(every)) {
        mark_cuts(cut, (size_t)g->nnodes + 1, points, npoints, every);
        segment_plan t = with_cuts(g, cut, all_expensive, b);
        t.keep_expensive = true, t.every = every;
        bool fits = t.graph && t.cost.peak <= budget;
        consider(&best, t, budget, smallest);
        /* where they fit, keeping more of the ranking can still be faster
         * (the matmuls' epilogues and the values they read); such a budget
         * leaves few values to redo, wherever the cuts are, so that is
         * searched at one spacing */
        if (!fits || !loose_searched) keep_what_fits(g, budget, cut, rank, nrank, every, fits, &ranked, smallest, b);
        loose_searched |= fits;
    }
    if (ranked.graph && ranked.kept < nrank) {
        mark_cuts(cut, (size_t)g->nnodes + 1, points, npoints, ranked.every);
        fill_headroom(g, budget, cut, rank, nrank, &ranked, smallest, b);
    }
    consider(&best, ranked, budget, smallest);
    free(all_expensive);
    free(cut);
    free(rank);
    free(points);
    return best;
}

/* Single values recomputed: the shortest prefix of the ranking that fits
 * (NULL graph if even the whole ranking does not). */
typedef struct single_plan {
    ir_graph *graph;
    plan_cost cost;
    uint32_t k, of;
} single_plan;

static single_plan fit_by_single_values(const ir_graph *g, int64_t budget, const budget_ctx *b)
{
    candidate *c = nc_xmalloc((g->nnodes + 1) * sizeof *c);
    uint32_t n = rank_candidates(g, c), lo = 1, hi = n;
    single_plan best = {.k = n, .of = n};
    best.graph = with_prefix(g, c, n, &best.cost, b);
    if (!best.graph || best.cost.peak < 0 || best.cost.peak > budget) {
        int64_t reached = best.graph ? best.cost.peak : -1;
        ir_graph_free(best.graph);
        free(c);
        return (single_plan){.cost.peak = reached};
    }
    while (lo < hi) {   /* the shortest prefix that fits */
        uint32_t mid = lo + (hi - lo) / 2;
        plan_cost cost;
        ir_graph *t = with_prefix(g, c, mid, &cost, b);
        if (t && cost.peak >= 0 && cost.peak <= budget) {
            ir_graph_free(best.graph);
            best.graph = t, best.cost = cost, best.k = mid, hi = mid;
        } else {
            ir_graph_free(t);
            lo = mid + 1;
        }
    }
    free(c);
    return best;
}

static bool budget_applies(const ir_graph *g, char *err, size_t errcap)
{
    if (!g->train.present || g->train.loss == IR_NONE || !g->nupdates) {
        snprintf(err, errcap, "--memory-budget applies to training steps (build with --entry train, or netc train)");
        return false;
    }
    if (g->nsyms) {
        snprintf(err, errcap, "--memory-budget plans for one size: bind every symbolic dim (--dim %s=...)", g->sym_names[0]);
        return false;
    }
    return true;
}

/* Single values recomputed, or segments of the forward pass: both are
 * planned, and the faster by the roofline floor is taken (below what single
 * values reach, segments are the only way; above it, segments that keep
 * what is dear can still be faster). The step as it is: with the weights'
 * copies carried from step to step or not (mem_budget_fit tries both). */
static bool fit_budget_cached(ir_graph **gp, int64_t budget, const budget_ctx *ctx)
{
    const budget_ctx bc = *ctx;
    FILE *log = bc.log;
    char *err = bc.err;
    size_t errcap = bc.errcap;
    const ir_graph *g = *gp;
    char a[32], b[32], want[32];
    human(budget, want, sizeof want);
    plan_cost step = plan_cost_of(g, bc.fuse, bc.memo, err, errcap);
    int64_t peak0 = step.peak;
    if (peak0 < 0) return false;
    human(peak0, a, sizeof a);
    if (peak0 <= budget) {
        if (log) fprintf(log, "netc: memory budget %s: the plan needs %s, nothing to recompute\n", want, a);
        return true;
    }
    if (log) {   /* the search plans the step many times: say what is going on before it does */
        fprintf(log, "netc: memory budget %s: the plan needs %s; choosing what to recompute...\n", want, a);
        fflush(log);
    }
    single_plan single = fit_by_single_values(g, budget, &bc);
    int64_t seg_peak = -1;
    segment_plan seg = fit_by_segments(g, budget, &seg_peak, &bc);
    if (single.graph && seg.graph && seg.cost.floor_s >= single.cost.floor_s) {
        ir_graph_free(seg.graph);
        seg.graph = NULL;
    }
    if (seg.graph) {
        ir_graph_free(single.graph);
        human(seg.cost.peak, b, sizeof b);
        char kept[96] = "";
        if (seg.keep_expensive) snprintf(kept, sizeof kept, ", matmul and attention results kept");
        else if (seg.kept) snprintf(kept, sizeof kept, ", %u of %u values made by matmuls and attention kept", seg.kept + seg.extra, seg.of);
        if (log)
            fprintf(log, "netc: memory budget %s: forward pass recomputed in %u segments%s; plan %s -> %s, floor %.3g ms\n",
                    want, seg.segments, kept, a, b, seg.cost.floor_s * 1e3);
        ir_graph_free(*gp);
        *gp = seg.graph;
        return true;
    }
    if (single.graph) {
        human(single.cost.peak, b, sizeof b);
        if (log)
            fprintf(log, "netc: memory budget %s: recomputing %u of %u forward values the backward pass reads; plan %s -> %s, floor %.3g ms\n",
                    want, single.k, single.of, a, b, single.cost.floor_s * 1e3);
        ir_graph_free(*gp);
        *gp = single.graph;
        return true;
    }
    int64_t smallest = seg_peak > 0 && (single.cost.peak < 0 || seg_peak < single.cost.peak) ? seg_peak : single.cost.peak;
    /* the step as it is can be smaller than any plan the search makes (its
     * own @checkpoint regions recomputed): that is the smallest then */
    if (smallest <= 0 || peak0 < smallest) smallest = peak0;
    human(smallest, b, sizeof b);
    /* the fixed part is most of a small model's peak: a budget below it cannot be met by any plan */
    char fixed[32];
    human(step.side > 0 ? step.side : 0, fixed, sizeof fixed);
    snprintf(err, errcap, "cannot fit the memory budget of %s: the smallest plan recomputation reaches needs %s, of which "
             "%s is what a GPU session holds beside its arena (cuBLASLt's workspace, argument tables)", want, b, fixed);
    return false;
}

/* NETC_BUDGET_CACHE=0 compiles every candidate (the cache's test compares
 * the plans), =trace says how many were compiled and how many met again. */
static bool fit_budget(ir_graph **gp, int64_t budget, const budget_ctx *ctx)
{
    const char *mode = getenv("NETC_BUDGET_CACHE");
    plan_cache cache = {0};
    budget_ctx bc = *ctx;
    bc.cache = mode && strcmp(mode, "0") == 0 ? NULL : &cache;
    bool ok = fit_budget_cached(gp, budget, &bc);
    if (ctx->log && mode && strcmp(mode, "trace") == 0)
        fprintf(ctx->log, "netc: memory budget search: %u plans compiled, %u met again\n", cache.n, cache.hits);
    cache_free(&cache);
    return ok;
}

bool mem_budget_fit(ir_graph **gp, int64_t budget, bool fuse, FILE *log, char *err, size_t errcap)
{
    if (!budget_applies(*gp, err, errcap)) return false;
    const budget_ctx bc = {.fuse = fuse, .log = log, .err = err, .errcap = errcap, .memo = cuda_body_memo_new()};
    bool ok = fit_budget(gp, budget, &bc);
    if (!ok && !(*gp)->train.copies_each_step) {
        /* the weights' low-precision copies the update stores for the next step
         * (compiler/cuda_fuse.c) live through the whole step; made in each step,
         * they live only while read: a smaller plan, at their bytes each step */
        (*gp)->train.copies_each_step = true;
        if (log) fprintf(log, "netc: trying again with the weights' low-precision copies made in each step\n");
        ok = fit_budget(gp, budget, &bc);
        if (!ok) (*gp)->train.copies_each_step = false;
    }
    cuda_body_memo_free(bc.memo);
    return ok;
}

bool mem_budget_parse(const char *text, int64_t *bytes)
{
    /* decimal only, as --lr and --set: strtod alone would also take leading
     * spaces and hex (0x10GiB) */
    if (!(text[0] >= '0' && text[0] <= '9') && text[0] != '.') return false;
    char *end;
    double v = strtod(text, &end);
    if (end == text || !(v > 0) || strspn(text, "0123456789.eE+-") < (size_t)(end - text)) return false;
    static const struct { const char *suffix; double scale; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1024}, {"KiB", 1024}, {"KB", 1e3}, {"M", 1048576}, {"MiB", 1048576}, {"MB", 1e6},
        {"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9}, {"T", 1099511627776.0}, {"TiB", 1099511627776.0}, {"TB", 1e12},
    };
    for (size_t i = 0; i < NC_COUNT(units); i++)
        if (strcmp(end, units[i].suffix) == 0) {
            double b = v * units[i].scale;
            /* under a byte would truncate to 0, which means no budget at all */
            if (b < 1 || b > 9e18) return false;
            *bytes = (int64_t)b;
            return true;
        }
    return false;
}
