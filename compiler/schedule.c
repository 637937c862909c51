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
 * one each, before every layer.
 *
 * A loss's gradient goes just before the loss: cross_entropy_grad reads
 * every logit of a row to find its softmax, which is all the loss needs
 * too, so its kernel writes the row losses and the loss only averages them
 * (the logits are read once for both). */
#include "passes.h"
#include "schedule.h"

#include <stdlib.h>
#include <string.h>

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

/* The cross_entropy_grad of c's logits, targets and smoothing after c, and
 * the closure of what it reads after c (need[]), or IR_NONE when none is
 * found or it depends on c. */
static ir_value loss_gradient_of(const ir_graph *g, ir_value c, bool *need)
{
    const ir_node *cn = &g->nodes[c];
    ir_value d = IR_NONE;
    for (ir_value u = c + 1; u < g->nnodes && d == IR_NONE; u++) {
        const ir_node *un = &g->nodes[u];
        if (un->op == OP_CROSS_ENTROPY_GRAD && ir_args(g, un)[0] == ir_args(g, cn)[0] && ir_args(g, un)[1] == ir_args(g, cn)[1] &&
            un->attr.f == cn->attr.f)
            d = u;
    }
    if (d == IR_NONE) return IR_NONE;
    need[d] = true;
    for (ir_value u = d + 1; u-- > c + 1;) {
        if (!need[u]) continue;
        for (int i = 0; i < g->nodes[u].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[u])[i];
            if (a == c) return IR_NONE;   /* the gradient depends on the loss: it stays */
            if (a > c) need[a] = true;
        }
    }
    return d;
}

ir_graph *schedule_loss_gradients_first(const ir_graph *g, FILE *report)
{
    if (!g->train.present || g->train.loss == IR_NONE) return NULL;
    bool *need = nc_xcalloc(g->nnodes + 1, sizeof *need), *placed = nc_xcalloc(g->nnodes + 1, sizeof *placed);
    ir_value *order = nc_xmalloc((g->nnodes + 1) * sizeof *order);
    uint32_t n = 0, moved = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        if (placed[v]) continue;
        if (g->nodes[v].op == OP_CROSS_ENTROPY) {
            for (ir_value u = v; u < g->nnodes; u++) need[u] = false;
            if (loss_gradient_of(g, v, need) != IR_NONE) {
                for (ir_value u = v + 1; u < g->nnodes; u++)   /* a second cross entropy's may share nodes the first's moved */
                    if (need[u] && !placed[u]) order[n++] = u, placed[u] = true;
                moved++;
            }
        }
        order[n++] = v, placed[v] = true;
    }
    ir_graph *out = moved ? ir_graph_reorder(g, order) : NULL;
    if (out && report)
        fprintf(report, "schedule: %u cross-entropy gradients run before their loss, whose row losses their kernels write\n", moved);
    free(order);
    free(need);
    free(placed);
    return out;
}

ir_graph *schedule_round_trips_late(const ir_graph *g, FILE *report)
{
    uint32_t *uses = ir_count_uses(g);
    ir_value *reader = nc_xmalloc((g->nnodes + 1) * sizeof *reader), *late = nc_xmalloc((g->nnodes + 1) * sizeof *late);
    for (ir_value v = 0; v < g->nnodes; v++) {
        late[v] = IR_NONE;
        for (int i = 0; i < g->nodes[v].nargs; i++) reader[ir_args(g, &g->nodes[v])[i]] = v;
    }
    uint32_t moved = 0;
    for (ir_value c = 0; c < g->nnodes; c++) {   /* c = f32(c0), c0 = bf16(x): both read once, by the next */
        if (!ir_is_float_cast(g, &g->nodes[c]) || uses[c] != 1) continue;
        ir_value c0 = ir_args(g, &g->nodes[c])[0], r = reader[c];
        const ir_node *rn = &g->nodes[r], *cn = &g->nodes[c];
        if (!ir_is_float_cast(g, &g->nodes[c0]) || uses[c0] != 1 || c0 + 1 != c || r <= c + 1 || nc_ops[rn->op].category != CAT_ELEMENTWISE ||
            rn->rank != cn->rank || memcmp(rn->shape, cn->shape, cn->rank * sizeof *cn->shape) != 0)
            continue;
        late[c0] = late[c] = r;
        moved++;
    }
    ir_graph *out = NULL;
    if (moved) {
        ir_value *order = nc_xmalloc((g->nnodes + 1) * sizeof *order), *waiting = nc_xmalloc((2 * moved + 1) * sizeof *waiting);
        uint32_t n = 0, nwaiting = 0;
        for (ir_value v = 0; v < g->nnodes; v++)
            if (late[v] != IR_NONE) waiting[nwaiting++] = v;
        for (ir_value v = 0; v < g->nnodes; v++) {
            for (uint32_t i = 0; i < nwaiting; i++)   /* what waits for v, in its own order */
                if (late[waiting[i]] == v) order[n++] = waiting[i];
            if (late[v] == IR_NONE) order[n++] = v;
        }
        free(waiting);
        out = ir_graph_reorder(g, order);
        free(order);
        if (report) fprintf(report, "schedule: %u rounding round trips run just before the op that reads them, which computes them\n", moved);
    }
    free(uses);
    free(reader);
    free(late);
    return out;
}

/* How each value is read: operand slots, distinct reader nodes (mul(g, g)
 * is one), and whether every reader is elementwise. */
typedef struct read_counts {
    uint32_t *slots, *readers;
    bool *elementwise;
} read_counts;

static read_counts count_reads(const ir_graph *g)
{
    read_counts r = {nc_xcalloc(g->nnodes + 1, sizeof *r.slots), nc_xcalloc(g->nnodes + 1, sizeof *r.readers),
                     nc_xmalloc((g->nnodes + 1) * sizeof *r.elementwise)};
    for (ir_value v = 0; v < g->nnodes; v++) r.elementwise[v] = true;
    for (ir_value u = 0; u < g->nnodes; u++) {
        const ir_node *un = &g->nodes[u];
        for (int i = 0; i < un->nargs; i++) {
            ir_value a = ir_args(g, un)[i];
            bool again = false;
            for (int k = 0; k < i; k++) again |= ir_args(g, un)[k] == a;
            r.slots[a]++;
            r.readers[a] += !again;
            r.elementwise[a] &= nc_ops[un->op].category == CAT_ELEMENTWISE;
        }
    }
    return r;
}

/* A widening cast f32(x) of a matmul's f16/bf16 product read by several
 * elementwise ops and nothing else (no output, update or loss). */
static bool split_widening(const ir_graph *g, ir_value c, const uint32_t *uses, const read_counts *r)
{
    const ir_node *n = &g->nodes[c];
    if (!ir_is_float_cast(g, n) || n->dtype != NC_F32) return false;
    const ir_node *x = &g->nodes[ir_args(g, n)[0]];
    return (x->dtype == NC_BF16 || x->dtype == NC_F16) && x->op == OP_MATMUL && r->readers[c] >= 2 &&
           uses[c] == r->slots[c] && r->elementwise[c];
}

/* Whether v is in memory whatever its readers do: a product, a reduction,
 * a row-wise or attention op, an input or parameter, or a product's bias
 * add (cuBLASLt's epilogue stores it). */
static bool stored_anyway(const ir_graph *g, ir_value v)
{
    const ir_node *n = &g->nodes[v];
    nc_op_category cat = nc_ops[n->op].category;
    if (cat == CAT_CONTRACTION || cat == CAT_REDUCTION || cat == CAT_ROWWISE || cat == CAT_ATTENTION) return true;
    if (n->op == OP_INPUT || n->op == OP_PARAM) return true;
    return n->op == OP_ADD && g->nodes[ir_args(g, n)[0]].op == OP_MATMUL && g->nodes[ir_args(g, n)[1]].op == OP_BROADCAST;
}

/* A sub or mul of a value in memory (stored_anyway) and a broadcast of a
 * smaller one (x - mean(x) in a batch norm), read by several elementwise ops
 * and nothing else: each reader's kernel computes it from x as it loads it,
 * one op an element, instead of a kernel storing it and every reader loading
 * it back (x is read as often, and lives instead of the result, which has
 * its size). An add is left alone: on a product it is the bias cuBLASLt
 * adds. */
static bool split_recomputed(const ir_graph *g, ir_value c, const uint32_t *uses, const read_counts *r)
{
    const ir_node *n = &g->nodes[c];
    if ((n->op != OP_SUB && n->op != OP_MUL) || !dtype_is_float(n->dtype) || r->readers[c] < 2 || uses[c] != r->slots[c] ||
        !r->elementwise[c])
        return false;
    ir_value a = ir_args(g, n)[0], b = ir_args(g, n)[1];
    if (g->nodes[a].op == OP_BROADCAST) { ir_value t = a; a = b; b = t; }
    return g->nodes[b].op == OP_BROADCAST && g->nodes[a].op != OP_BROADCAST && stored_anyway(g, a) &&
           g->nodes[a].dtype == n->dtype;
}

/* The largest elementwise expression recomputed_tree takes (nodes). */
#define TREE_MAX 16

/* Whether a (read by a tree node) can join c's expression: elementwise,
 * not an output or update, and every slot reading it in the tree. */
static bool tree_member(const ir_graph *g, ir_value a, const uint32_t *uses, const read_counts *r, const uint32_t *tree_slots)
{
    const ir_node *n = &g->nodes[a];
    return nc_ops[n->op].category == CAT_ELEMENTWISE && n->op != OP_CAST && n->nargs > 0 && uses[a] == r->slots[a] &&
           tree_slots[a] == r->slots[a];
}

/* Whether v reads a product: cuBLASLt's epilogue computes it as it stores
 * the product (a bias, a residual, a widening), for no load at all. */
static bool reads_product(const ir_graph *g, ir_value v)
{
    const ir_node *n = &g->nodes[v];
    for (int i = 0; i < n->nargs; i++)
        if (nc_ops[g->nodes[ir_args(g, n)[i]].op].category == CAT_CONTRACTION) return true;
    return false;
}

/* Bytes of a value with c's element count that a kernel loads for leaf l
 * (0: a broadcast, a source or a smaller value, read as good as free). */
static int64_t leaf_bytes(const ir_graph *g, ir_value l, const ir_node *c)
{
    const ir_node *n = &g->nodes[l];
    if (n->op == OP_BROADCAST || nc_ops[n->op].category == CAT_SOURCE || n->rank != c->rank) return 0;
    for (int k = 0; k < n->rank; k++)
        if (n->shape[k] != c->shape[k]) return 0;
    return dtype_size(n->dtype);
}

/* An expression recomputed_tree walks down from its root: its ops and its
 * leaves (at most 3 operands an op, so 4 * TREE_MAX leaves are room enough). */
typedef struct expr_tree {
    ir_value nodes[TREE_MAX], leaves[4 * TREE_MAX];
    int nn, nl;
} expr_tree;

/* Whether c may root a recomputed expression: a float elementwise op of
 * rank 2 or more, read by several elementwise ops and nothing else (its
 * readers are what would compute it). A cast stays: it is the widening a
 * product's readers share (split_widening). */
static bool tree_root(const ir_graph *g, ir_value c, const uint32_t *uses, const read_counts *r)
{
    const ir_node *n = &g->nodes[c];
    return nc_ops[n->op].category == CAT_ELEMENTWISE && n->op != OP_CAST && dtype_is_float(n->dtype) && n->rank >= 2 &&
           r->readers[c] >= 2 && uses[c] == r->slots[c] && r->elementwise[c];
}

/* The queued node with the highest id, swapped into nodes[done]: every
 * reader of a node comes after it, so when it is taken all its slots in
 * the tree have been counted (tree_member can tell an inner node). */
static ir_value take_latest(expr_tree *t, int done)
{
    int best = done;
    for (int k = done + 1; k < t->nn; k++)
        if (t->nodes[k] > t->nodes[best]) best = k;
    ir_value v = t->nodes[best];
    t->nodes[best] = t->nodes[done], t->nodes[done] = v;
    return v;
}

/* Queues v's operands not queued yet, counting every slot in tree_slots;
 * false when the tree would pass TREE_MAX ops (larger expressions stay
 * stored: their kernels would grow with every reader). */
static bool queue_operands(const ir_graph *g, ir_value v, uint32_t *tree_slots, expr_tree *t)
{
    for (int i = 0; i < g->nodes[v].nargs; i++) {
        ir_value a = ir_args(g, &g->nodes[v])[i];
        if (tree_slots[a]++ > 0) continue;
        if (t->nn == TREE_MAX) return false;
        t->nodes[t->nn++] = a;
    }
    return true;
}

/* Walks c's expression down by decreasing id into *t, marking in_tree[] its
 * ops: a queued node read outside the tree is a leaf after all, and leaves
 * the queue. False when the expression is too large or an op reads a
 * product (cuBLASLt's epilogue computes that op for no load at all); *t
 * then still holds every node whose scratch must be cleared. */
static bool walk_tree(const ir_graph *g, ir_value c, const uint32_t *uses, const read_counts *r, uint32_t *tree_slots,
                      bool *in_tree, expr_tree *t)
{
    t->nodes[0] = c, t->nn = 1, t->nl = 0;
    for (int done = 0; done < t->nn; done++) {
        ir_value v = take_latest(t, done);
        if (v != c && !tree_member(g, v, uses, r, tree_slots)) {
            t->nodes[done--] = t->nodes[--t->nn];
            if (t->nl < 4 * TREE_MAX) t->leaves[t->nl++] = v;
            continue;
        }
        if (reads_product(g, v)) return false;
        in_tree[v] = true;
        if (!queue_operands(g, v, tree_slots, t)) return false;
    }
    return true;
}

/* Whether each of c's readers loading the tree's leaves moves fewer bytes
 * an element than one kernel storing c and every reader loading it back. */
static bool tree_pays(const ir_graph *g, ir_value c, const read_counts *r, const expr_tree *t)
{
    const ir_node *n = &g->nodes[c];
    int64_t load = 0, out = dtype_size(n->dtype), readers = r->readers[c];
    for (int k = 0; k < t->nl; k++) load += leaf_bytes(g, t->leaves[k], n);
    return t->nn > 1 && readers * load < load + out + readers * out;
}

/* Leaves tree_slots all 0 and in_tree as it was for the next root, but for
 * a tree that pays: its ops stay in_tree and its leaves become leaf[] (the
 * copies read them more often than counted, so they are not recomputed in
 * turn). Every leaf and every queued node is an operand of an op still in
 * t->nodes, so clearing the ops' operands clears all the scratch. */
static void settle_tree(const ir_graph *g, const expr_tree *t, bool pays, uint32_t *tree_slots, bool *in_tree, bool *leaf)
{
    for (int k = 0; k < t->nn; k++) {
        const ir_node *v = &g->nodes[t->nodes[k]];
        for (int i = 0; i < v->nargs; i++) tree_slots[ir_args(g, v)[i]] = 0;
        in_tree[t->nodes[k]] = pays && in_tree[t->nodes[k]];
    }
    for (int k = 0; k < t->nl; k++) leaf[t->leaves[k]] |= pays;
}

/* An elementwise expression c over values in memory (its leaves: values
 * read by more than it, or not elementwise), read by several elementwise
 * ops and nothing else, whose readers all computing it from the leaves
 * load fewer bytes than a kernel storing it and the readers loading it
 * back: a batch norm's gradient before the centring sum, dd = dy * s +
 * 2 * (x - mu) * t, read by sum(-dd) and by dx = dd + mean(-dd), is two
 * loads (dy, x) a reader against four bytes stored and loaded per element
 * more. Marks in_tree[] the expression's ops (2 to TREE_MAX), its inner
 * ones read only inside it, and leaf[] its leaves. A single sub or mul is
 * split_recomputed's. tree_slots[] is scratch, all 0. */
static bool recomputed_tree(const ir_graph *g, ir_value c, const uint32_t *uses, const read_counts *r, uint32_t *tree_slots,
                            bool *in_tree, bool *leaf)
{
    if (!tree_root(g, c, uses, r)) return false;
    expr_tree t;
    bool pays = walk_tree(g, c, uses, r, tree_slots, in_tree, &t) && tree_pays(g, c, r, &t);
    settle_tree(g, &t, pays, tree_slots, in_tree, leaf);
    return pays;
}

/* v in out for one reader: a value made by each of its readers (split)
 * copied, with its split operands, once a reader (memo). */
static ir_value reader_copy(ir_graph *out, const ir_graph *g, const ir_value *map, const bool *split, ir_value v,
                            ir_value *memo_from, ir_value *memo_to, int *nmemo)
{
    if (!split[v]) return map[v];
    for (int k = 0; k < *nmemo; k++)
        if (memo_from[k] == v) return memo_to[k];   /* mul(g, g): one copy */
    const ir_node *an = &g->nodes[v];
    ir_value src[8];
    NC_ASSERT(an->nargs <= 8);   /* elementwise ops and casts */
    for (int i = 0; i < an->nargs; i++)
        src[i] = reader_copy(out, g, map, split, ir_args(g, an)[i], memo_from, memo_to, nmemo);
    ir_value copy = ir_add(out, an, src, an->nargs);   /* this reader's own copy */
    if (*nmemo < 2 * TREE_MAX) memo_from[*nmemo] = v, memo_to[(*nmemo)++] = copy;
    return copy;
}

ir_graph *schedule_widenings_per_reader(const ir_graph *g, FILE *report)
{
    uint32_t *uses = ir_count_uses(g);
    read_counts r = count_reads(g);
    bool *split = nc_xcalloc(g->nnodes + 1, sizeof *split);
    uint32_t nsplit = 0, nwidened = 0, nrecomputed = 0, ntrees = 0;
    for (ir_value c = 0; c < g->nnodes; c++) nsplit += nwidened += split[c] = split_widening(g, c, uses, &r);
    for (ir_value c = 0; c < g->nnodes; c++)
        if (!split[c] && split_recomputed(g, c, uses, &r)) split[c] = true, nsplit++, nrecomputed++;
    uint32_t *tree_slots = nc_xcalloc(g->nnodes + 1, sizeof *tree_slots);
    bool *in_tree = nc_xcalloc(g->nnodes + 1, sizeof *in_tree), *leaf = nc_xcalloc(g->nnodes + 1, sizeof *leaf);
    for (ir_value c = g->nnodes; c-- > 0;)   /* outermost first: a tree's inner nodes are read by it alone */
        if (!split[c] && !in_tree[c] && !leaf[c] && recomputed_tree(g, c, uses, &r, tree_slots, in_tree, leaf)) ntrees++;
    for (ir_value c = 0; c < g->nnodes; c++)
        if (in_tree[c] && !split[c]) split[c] = true, nsplit++;
    free(tree_slots);
    free(in_tree);
    free(leaf);
    ir_graph *out = NULL;
    if (nsplit) {
        out = ir_graph_shell(g);
        ir_value *map = nc_xmalloc((g->nnodes + 1) * sizeof *map), small[16];
        ir_value memo_from[2 * TREE_MAX], memo_to[2 * TREE_MAX];
        for (ir_value v = 0; v < g->nnodes; v++) {
            const ir_node *n = &g->nodes[v];
            map[v] = IR_NONE;
            if (split[v]) continue;   /* made by each of its readers */
            ir_value *dst = n->nargs <= 16 ? small : nc_xmalloc(n->nargs * sizeof *dst);
            int nmemo = 0;
            for (int i = 0; i < n->nargs; i++)
                dst[i] = reader_copy(out, g, map, split, ir_args(g, n)[i], memo_from, memo_to, &nmemo);
            map[v] = ir_add(out, n, dst, n->nargs);
            if (dst != small) free(dst);
        }
        ir_graph_finish(out, g, map);
        free(map);
        if (report && nwidened)
            fprintf(report, "schedule: %u widened matmul products (weight gradients) are widened by each op that reads "
                            "them: the product is stored in its own dtype\n", nwidened);
        if (report && nrecomputed)
            fprintf(report, "schedule: %u values x - spread(m) or x * spread(m) are computed by each op that reads them, "
                            "from x in memory: not stored\n", nrecomputed);
        if (report && ntrees)
            fprintf(report, "schedule: %u elementwise expressions are computed by each op that reads them, from the "
                            "values in memory they are made of: fewer bytes than storing them\n", ntrees);
    }
    free(split);
    free(uses);
    free(r.slots);
    free(r.readers);
    free(r.elementwise);
    return out;
}

ir_graph *schedule_training_step(const ir_graph *g, bool fuse, FILE *report)
{
    ir_graph *a = schedule_parameter_copies_first(g, report);
    ir_graph *b = fuse ? schedule_loss_gradients_first(a ? a : g, report) : NULL;
    if (b) ir_graph_free(a), a = b;
    ir_graph *c = fuse ? schedule_round_trips_late(a ? a : g, report) : NULL;
    if (c) ir_graph_free(a), a = c;
    ir_graph *d = fuse ? schedule_widenings_per_reader(a ? a : g, report) : NULL;
    if (!d) return a;
    ir_graph_free(a);
    return d;
}
