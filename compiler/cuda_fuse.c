/* cuda_fuse.c - elementwise fusion: a run of elementwise ops over one shape
 * becomes one kernel that keeps the intermediate values in registers.
 *
 * Requires: the graph cuda_emit is emitting. Produces: for each run, one
 * kernel step (at the run's last op) reading the run's outside operands and
 * writing only the values something outside the run reads. Groups are runs
 * of consecutive nodes in schedule order, so every outside operand is ready
 * before the kernel and no outside reader runs before it. Scalar constants
 * (a fill broadcast to the shape) are written into the kernel as literals.
 *
 * Semantics are those of the unfused kernels: each intermediate is rounded
 * to its own dtype (f16/bf16) exactly as storing and reloading it would. */
#include "cuda_emit.h"

#include <stdlib.h>
#include <string.h>

/* A rank-0 float fill: its value can be a literal. */
static bool scalar_fill(const ir_graph *g, ir_value v)
{
    const ir_node *n = &g->nodes[v];
    return n->op == OP_FILL && n->rank == 0 && dtype_is_float(n->dtype);
}

/* Values a fused kernel keeps in float registers exactly: floats, and bools
 * as 0 or 1 (a causal mask and the where it selects with). Integers stay out:
 * a float cannot hold every i32. */
static bool in_registers(nc_dtype t) { return dtype_is_float(t) || t == NC_BOOL; }

/* A gather a fused kernel loads its rows through (plan_group_reads): no
 * kernel of its own; the group reads the index and the picked row's element. */
static bool gathered(const cg_ctx *cg, ir_value a) { return cg->inlined[a] && cg->g->nodes[a].op == OP_GATHER; }

/* A broadcast a fused kernel reads through: it loads the source at the
 * broadcast element's offset, so the full-size tensor is never written
 * (unless an unfused op reads it). */
static bool spread(const ir_graph *g, ir_value v)
{
    const ir_node *n = &g->nodes[v];
    return n->op == OP_BROADCAST && in_registers(n->dtype);
}

/* What a fused kernel loads for operand a: the source under any broadcasts
 * (broadcasts compose: right-aligned, so the source broadcast straight to
 * a's shape is the same tensor). */
static ir_value through_spread(const ir_graph *g, ir_value a)
{
    while (spread(g, a)) a = ir_args(g, &g->nodes[a])[0];
    return a;
}

/* Nodes a run passes over without splitting: fills and broadcasts, which
 * every fused reader inlines. */
static bool inlinable(const ir_graph *g, ir_value v) { return scalar_fill(g, v) || spread(g, v); }

/* Elementwise ops over such values, and casts of bytes to them (a float
 * holds every u8: images are widened by the kernel that scales them). A
 * random op's step (an i32 scalar) is loaded as an integer of its own. */
static bool fusable(const ir_graph *g, ir_value v)
{
    const ir_node *n = &g->nodes[v];
    if (!in_registers(n->dtype) || !cuda_emit_is_elementwise(n->op)) return false;
    for (int i = 0; i < n->nargs; i++) {
        nc_dtype t = g->nodes[ir_args(g, n)[i]].dtype;
        if (!in_registers(t) && !(n->op == OP_CAST && t == NC_U8) && i != ir_step_slot(n)) return false;
    }
    return true;
}

static bool same_shape(const ir_node *a, const ir_node *b)
{
    return a->rank == b->rank && memcmp(a->shape, b->shape, a->rank * sizeof *a->shape) == 0;
}

typedef cuda_reader_index reader_index;

/* One index serves every planner: nodes keep their places while fusion is
 * planned. */
static reader_index index_readers(const ir_graph *g)
{
    reader_index ri = {nc_xcalloc(g->nnodes + 2, sizeof *ri.start), NULL};
    for (ir_value u = 0; u < g->nnodes; u++)
        for (int i = 0; i < g->nodes[u].nargs; i++) ri.start[ir_args(g, &g->nodes[u])[i] + 1]++;
    for (ir_value v = 0; v < g->nnodes; v++) ri.start[v + 1] += ri.start[v];
    ri.at = nc_xmalloc((ri.start[g->nnodes] + 1) * sizeof *ri.at);
    uint32_t *fill = nc_xmalloc((g->nnodes + 1) * sizeof *fill);
    memcpy(fill, ri.start, g->nnodes * sizeof *fill);
    for (ir_value u = 0; u < g->nnodes; u++)
        for (int i = 0; i < g->nodes[u].nargs; i++) ri.at[fill[ir_args(g, &g->nodes[u])[i]]++] = u;
    free(fill);
    return ri;
}

static void free_readers(reader_index *ri)
{
    free(ri->start);
    free(ri->at);
}

/* Each group's first and last member, kept as members join and leave:
 * the planners and the emitter ask for a group's extent once or more per
 * group, and scanning every node each time was quadratic. Indexed once the
 * groups are formed (index_extents); ids below group_room. */
static void index_extents(cg_ctx *cg, uint32_t room)
{
    cg->group_room = room;
    cg->group_first = nc_xmalloc(room * sizeof *cg->group_first);
    cg->group_last = nc_xmalloc(room * sizeof *cg->group_last);
    for (uint32_t id = 0; id < room; id++) cg->group_first[id] = cg->group_last[id] = IR_NONE;
    for (ir_value v = 0; v < cg->g->nnodes; v++) {
        uint32_t id = cg->group[v];
        NC_ASSERT(id < room);
        if (id && cg->group_first[id] == IR_NONE) cg->group_first[id] = v;
        if (id) cg->group_last[id] = v;
    }
}

/* v left group id: an end it held moves to the next member inwards. Each
 * step passes a node that is no longer id's, so members leaving in node
 * order (a group sunk into another, or moved back) cost their span once. */
static void shrink_extent(cg_ctx *cg, uint32_t id, ir_value v)
{
    ir_value *first = &cg->group_first[id], *last = &cg->group_last[id];
    if (*first == v && *last == v) {
        *first = *last = IR_NONE;
    } else if (*first == v) {   /* *last is still a member: the walk stops there at the latest */
        while (cg->group[*first] != id) ++*first;
    } else if (*last == v) {
        while (cg->group[*last] != id) --*last;
    }
}

static void set_group(cg_ctx *cg, ir_value v, uint32_t id)
{
    uint32_t was = cg->group[v];
    cg->group[v] = id;
    if (!cg->group_first || was == id) return;   /* the groups are being formed: nothing indexed yet */
    NC_ASSERT(id < cg->group_room);
    if (id && (cg->group_first[id] == IR_NONE || v < cg->group_first[id])) cg->group_first[id] = v;
    if (id && (cg->group_last[id] == IR_NONE || v > cg->group_last[id])) cg->group_last[id] = v;
    if (was) shrink_extent(cg, was, v);
}

void cuda_fuse_set_group(cg_ctx *cg, ir_value v, uint32_t id) { set_group(cg, v, id); }

static void group_extent(const cg_ctx *cg, uint32_t id, ir_value *first, ir_value *last)
{
    NC_ASSERT(id < cg->group_room);
    *first = cg->group_first[id];
    *last = cg->group_last[id];
}

/* The buffers of group id over [first, last]: what it loads (outside
 * operands, through broadcasts) in first-use order, then the members read
 * after the group or by an output. Counts both (the lists hold at most cap
 * each; a join is tested with at most NRT_MAX_BUFS + 4). */
#define GROUP_IO_CAP (NRT_MAX_BUFS + 8)

static void group_io(const cg_ctx *cg, uint32_t id, ir_value first, ir_value last, ir_value *in, int *nin, ir_value *out,
                     int *nout)
{
    const ir_graph *g = cg->g;
    *nin = *nout = 0;
    for (ir_value v = first; v <= last; v++) {
        if (cg->group[v] != id) continue;
        const ir_node *node = &g->nodes[v];
        for (int i = 0; i < node->nargs; i++) {
            ir_value a = ir_args(g, node)[i];
            if (cg->group[a] == id) continue;
            a = through_spread(g, a);
            if (scalar_fill(g, a)) continue;
            bool seen = false;   /* each outside operand once */
            for (int k = 0; k < *nin; k++) seen |= in[k] == a;
            if (!seen) {
                NC_ASSERT(*nin < GROUP_IO_CAP);
                in[(*nin)++] = a;
            }
            ir_value idx = gathered(cg, a) ? ir_args(g, &g->nodes[a])[1] : IR_NONE;   /* its indices: loaded too */
            for (int k = 0; k < *nin && idx != IR_NONE; k++)
                if (in[k] == idx) idx = IR_NONE;
            if (idx != IR_NONE) {
                NC_ASSERT(*nin < GROUP_IO_CAP);
                in[(*nin)++] = idx;
            }
        }
        if (cg->escapes[v] || cg->last_use[v] > last) {
            NC_ASSERT(*nout < GROUP_IO_CAP);
            out[(*nout)++] = v;
        }
        if (cg->carry_into && cg->carry_into[v] != IR_NONE) {   /* a parameter's copy, stored rounded */
            NC_ASSERT(*nout < GROUP_IO_CAP);
            out[(*nout)++] = cg->carry_into[v];
        }
    }
}

/* last_use[v]: the last node that reads v, counting a broadcast's readers
 * as readers of its source (they load the source). */
static void plan_last_use(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    for (ir_value v = 0; v < g->nnodes; v++) cg->last_use[v] = v;
    for (ir_value u = g->nnodes; u-- > 0;) {
        const ir_node *n = &g->nodes[u];
        ir_value until = spread(g, u) ? cg->last_use[u] : u;   /* readers of u come after u */
        for (int i = 0; i < n->nargs; i++) {
            ir_value a = ir_args(g, n)[i];
            if (until > cg->last_use[a]) cg->last_use[a] = until;
        }
    }
}

/* A constant the reader's kernel writes as a literal: the loss gradient's
 * seed, 1, read by cross_entropy_grad (cuda_emit.c). */
static bool literal_operand(const ir_graph *g, ir_value reader, int k)
{
    return g->nodes[reader].op == OP_CROSS_ENTROPY_GRAD && k == 2 && scalar_fill(g, ir_args(g, &g->nodes[reader])[k]);
}

/* A fill or broadcast needs no kernel when every reader is fused, itself
 * inlined, or writes it as a literal; readers come later, so one pass from
 * the end decides. */
static void plan_inlined(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    bool *plain_reader = nc_xcalloc(g->nnodes + 1, sizeof *plain_reader);
    const uint32_t *users = cg->readers;
    for (ir_value v = g->nnodes; v-- > 0;) {
        cg->inlined[v] = inlinable(g, v) && !cg->escapes[v] && users[v] > 0 && !plain_reader[v];
        if (cg->group[v] || cg->inlined[v]) continue;
        bool epilogue_op = cg->absorbed[v] && g->nodes[v].op != OP_MATMUL;   /* loads a bias under its broadcast */
        for (int k = 0; k < g->nodes[v].nargs; k++) {
            ir_value a = ir_args(g, &g->nodes[v])[k];
            if (!(epilogue_op && g->nodes[a].op == OP_BROADCAST) && !literal_operand(g, v, k)) plain_reader[a] = true;
        }
    }
    free(plain_reader);
}

/* Movement ops a transpose, slice or concat reads through (cuda_emit.c):
 * a reshape, transpose or slice whose one reader is such an op, or another
 * link of the chain, needs no kernel. A chain stops where its kernel would
 * need more sizes than a step holds (op_is_movement_link, op_reads_through
 * in ops.h). */
typedef struct dim_set {
    uint32_t id[2 * NRT_MAX_INTS];
    int n;
} dim_set;

static void dims_add(dim_set *d, const uint32_t *ids, int n)
{
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int k = 0; k < d->n; k++) seen |= d->id[k] == ids[i];
        if (!seen && d->n < 2 * NRT_MAX_INTS) d->id[d->n++] = ids[i];
    }
}

static void plan_read_through(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    const uint32_t *users = cg->readers;
    for (ir_value r = g->nnodes; r-- > 0;) {
        const ir_node *rn = &g->nodes[r];
        bool reader = op_reads_through(rn->op);
        if (!reader || cg->group[r] || cg->inlined[r] || cg->absorbed[r]) continue;
        dim_set d = {.n = 1};   /* the element count */
        dims_add(&d, rn->shape, rn->rank);
        for (int i = 0; i < rn->nargs; i++) dims_add(&d, g->nodes[ir_args(g, rn)[i]].shape, g->nodes[ir_args(g, rn)[i]].rank);
        if (rn->op == OP_SLICE) dims_add(&d, &rn->attr.lo, 1);
        for (int i = 0; i < rn->nargs; i++) {
            ir_value w = ir_args(g, rn)[i];
            while (op_is_movement_link(g->nodes[w].op) && users[w] == 1 && !cg->escapes[w] && !cg->group[w] && !cg->absorbed[w]) {
                const ir_node *wn = &g->nodes[w], *un = &g->nodes[ir_args(g, wn)[0]];
                dim_set more = d;
                dims_add(&more, wn->shape, wn->rank);
                dims_add(&more, un->shape, un->rank);
                if (wn->op == OP_SLICE) dims_add(&more, &wn->attr.lo, 1);
                if (more.n > NRT_MAX_INTS) break;
                d = more;
                cg->inlined[w] = true;
                w = ir_args(g, wn)[0];
            }
        }
    }
}

static ir_value spread_of(const cg_ctx *cg, ir_value first, ir_value last, uint32_t id, ir_value a);

static bool reduction_with_prologue(nc_op op) { return op == OP_SUM || op == OP_MEAN; }

/* Whether every operand slot reading m is in a member of `part` between m
 * and a (m's readers all come before a, the reduction's operand). */
static bool read_only_by(const cg_ctx *cg, ir_value m, ir_value a, const bool *part)
{
    const ir_graph *g = cg->g;
    uint32_t seen = 0;
    for (ir_value u = m + 1; u <= a; u++)
        for (int i = 0; part[u] && i < g->nodes[u].nargs; i++) seen += ir_args(g, &g->nodes[u])[i] == m;
    return !cg->escapes[m] && seen == cg->readers[m];
}

/* The reduction's operand a ends a group whose other results are stored
 * anyway (a gradient, then its square for the norm): a becomes a group of
 * its own, with the members only it reads (a value recomputed for it:
 * schedule.c's x - spread(m)), which the reduction can compute as it loads.
 * Returns the new group id, or 0 when a cannot leave (it is not the
 * group's last member, or it reads a member that is not stored). */
static uint32_t split_off_last(cg_ctx *cg, uint32_t id, ir_value a, const ir_value *out, int nout)
{
    const ir_graph *g = cg->g;
    ir_value first, last;
    group_extent(cg, id, &first, &last);
    if (last != a || first == a) return 0;
    bool *part = nc_xcalloc(a + 1, sizeof *part);
    part[a] = true;
    for (ir_value m = a; m-- > first;) part[m] = cg->group[m] == id && read_only_by(cg, m, a, part);
    bool ok = !part[first];   /* something stays */
    for (ir_value m = first; m <= a && ok; m++) {
        for (int i = 0; part[m] && i < g->nodes[m].nargs && ok; i++) {
            ir_value x = ir_args(g, &g->nodes[m])[i];
            bool stored = cg->group[x] != id || part[x];
            for (int k = 0; k < nout && !stored; k++) stored = out[k] == x;
            ok = stored;
        }
    }
    if (ok) {
        cg->ngroups++;
        for (ir_value m = first; m <= a; m++)
            if (part[m]) set_group(cg, m, cg->ngroups);
    }
    free(part);
    return ok ? cg->ngroups : 0;
}

/* Whether r's kernel can store group result a as it computes it, for a's
 * other readers: r a column reduction (each element loaded once, by one
 * thread), a in f32 (stored as computed) and no output, and nothing but r
 * (through reshapes) reading a before r: a conv's dy, computed by the
 * kernel of its bias gradient's sum, which the conv's products read after
 * it (a pass over dy and a launch fewer). */
static bool stores_prologue(const cg_ctx *cg, const reader_index *ri, ir_value r, ir_value a)
{
    const ir_graph *g = cg->g;
    if (g->nodes[a].dtype != NC_F32 || cg->escapes[a] || !cuda_reduce_by_columns(cg, r)) return false;
    ir_value w = ir_args(g, &g->nodes[r])[0];
    /* a's readers from the index, in node order: scanning every node
     * between a and r for each candidate was quadratic */
    for (uint32_t j = ri->start[a]; j < ri->start[a + 1] && ri->at[j] < r; j++)
        if (ri->at[j] != w) return false;
    return true;
}

/* Reduction r's prologue: the group whose result a is r's operand (through
 * reshapes), stored too (stores_prologue) where others read a. Returns
 * whether it is planned. */
static bool plan_prologue(cg_ctx *cg, const reader_index *ri, ir_value r, bool stored)
{
    const ir_graph *g = cg->g;
    const ir_node *rn = &g->nodes[r];
    const uint32_t *users = cg->readers;
    if (!reduction_with_prologue(rn->op) || !dtype_is_float(rn->dtype) || cg->group[r] || cg->absorbed[r]) return false;
    ir_value a = ir_args(g, rn)[0];
    while (g->nodes[a].op == OP_RESHAPE && users[a] == 1 && !cg->escapes[a] && !cg->group[a]) a = ir_args(g, &g->nodes[a])[0];
    uint32_t id = cg->group[a];
    if (!id || cg->escapes[a] || cg->prologue_of[id] != IR_NONE || (users[a] != 1) != stored) return false;
    if (stored && (cg->loaded_by_prologue[a] || !stores_prologue(cg, ri, r, a))) return false;
    ir_value first, last, in[GROUP_IO_CAP], out[GROUP_IO_CAP];
    int nin, nout;
    group_extent(cg, id, &first, &last);
    group_io(cg, id, first, last, in, &nin, out, &nout);
    if (nout > 1 && !stored && (id = split_off_last(cg, id, a, out, nout)) != 0) {
        group_extent(cg, id, &first, &last);
        group_io(cg, id, first, last, in, &nin, out, &nout);
    }
    if (!id) return false;
    bool ok = nout == 1 && out[0] == a && nin + 1 + stored <= NRT_MAX_BUFS;
    for (int k = 0; k < nin && ok; k++) ok = !gathered(cg, in[k]) && !cuda_reads_through(cg, in[k]);
    if (!ok) return false;
    cg->prologue_of[id] = r;
    cg->prologue_stored[id] = stored;
    for (int k = 0; k < nin; k++) cg->loaded_by_prologue[in[k]] = true;
    for (ir_value w = ir_args(g, rn)[0]; w != a && !stored; w = ir_args(g, &g->nodes[w])[0])
        cg->inlined[w] = true;   /* no copy of what is never stored */
    return true;
}

/* A sum or mean whose operand, through reshapes with no other reader, is a
 * group's only result read by nothing else computes the group as it loads:
 * the squares of the gradient norm are never stored. A group that loads
 * through a broadcast (x - mean in a batch norm's variance) is passed its
 * own dims for the offsets (cuda_fuse_prologue_inputs). Then a group read
 * by others too, but only after a column sum (stores_prologue), is stored
 * by that sum's kernel in place of a kernel of its own; not one that
 * another prologue loads, whose plain sum joins that prologue's reduction
 * instead (plan_sibling_sums: a batch norm's sum(dy) with sum(dy * xhat)). */
static void plan_prologues(cg_ctx *cg, const reader_index *ri)
{
    const ir_graph *g = cg->g;
    uint32_t room = cg->ngroups + (uint32_t)g->nnodes + 1;   /* split_off_last may add groups */
    cg->prologue_of = nc_xmalloc(room * sizeof *cg->prologue_of);
    cg->prologue_dim0 = nc_xcalloc(room, sizeof *cg->prologue_dim0);
    cg->prologue_stored = nc_xcalloc(room, sizeof *cg->prologue_stored);
    cg->loaded_by_prologue = nc_xcalloc(g->nnodes + 1, sizeof *cg->loaded_by_prologue);
    for (uint32_t k = 0; k < room; k++) cg->prologue_of[k] = IR_NONE;
    for (ir_value r = 0; r < g->nnodes; r++) plan_prologue(cg, ri, r, false);
    for (ir_value r = 0; r < g->nnodes; r++) plan_prologue(cg, ri, r, true);
    free(cg->loaded_by_prologue);
    cg->loaded_by_prologue = NULL;
}

/* The group of values only one other group reads (0: a value outside
 * groups, or something else, reads them too). */
static uint32_t *sole_reader_groups(const cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    uint32_t *into = nc_xcalloc(cg->ngroups + 1, sizeof *into), *seen = nc_xcalloc(cg->ngroups + 1, sizeof *seen);
    bool *mixed = nc_xcalloc(cg->ngroups + 1, sizeof *mixed);
    for (ir_value u = 0; u < g->nnodes; u++) {
        const ir_node *un = &g->nodes[u];
        uint32_t h = cg->group[u];
        for (int i = 0; i < un->nargs; i++) {
            uint32_t a = cg->group[ir_args(g, un)[i]];
            if (!a || a == h) continue;
            mixed[a] |= !h || (seen[a] && seen[a] != h);
            seen[a] = h;
        }
        if (h && cg->escapes[u]) mixed[h] = true;
    }
    for (uint32_t id = 1; id <= cg->ngroups; id++) into[id] = mixed[id] ? 0 : seen[id];
    free(seen);
    free(mixed);
    return into;
}

/* Whether computing group id's members (first..last) at at, in a later
 * group's kernel, keeps no operand alive longer than the value it saves
 * storing: each operand they load from outside is read again at or after
 * at (last_read: the last node reading a value), or is no larger than
 * their result (same shape, or of lower rank, as a per-channel scale). A
 * chunked loss's slices would otherwise hold a larger input until the last
 * slice, and the plan's peak grow. */
static bool operands_live_at(const cg_ctx *cg, const ir_value *last_read, uint32_t id, ir_value first, ir_value last, ir_value at)
{
    const ir_graph *g = cg->g;
    const ir_node *result = &g->nodes[last];
    for (ir_value m = first; m <= last; m++) {
        if (cg->group[m] != id) continue;
        for (int i = 0; i < g->nodes[m].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[m])[i];
            const ir_node *an = &g->nodes[a];
            if (cg->group[a] == id || an->rank < result->rank || same_shape(an, result)) continue;
            if (!cg->escapes[a] && (last_read[a] == IR_NONE || last_read[a] < at)) return false;
        }
    }
    return true;
}

/* A group whose results only one later group of the same shape reads joins
 * that group: its members are computed in the later group's kernel from the
 * operands they load, and their results are never stored and read back (a
 * batch norm's gradient dy * scale, made before the column sums that the
 * group reading it waits for: a launch, and a tensor written and read, per
 * norm). The two groups then interleave with other kernels: the members'
 * operands are ready before the group's kernel, at its last member, and
 * nothing between reads what they compute. Neither group may be a
 * reduction's prologue (one result, loaded at the reduction's index). */
static void plan_sunk_groups(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    uint32_t *into = sole_reader_groups(cg), *moved = nc_xcalloc(cg->ngroups + 1, sizeof *moved);
    bool *absorbed = nc_xcalloc(cg->ngroups + 1, sizeof *absorbed);   /* a group that took another in sinks no further */
    ir_value *last_read = cuda_no_values(g);   /* nodes keep their places: one pass serves every group */
    for (ir_value u = 0; u < g->nnodes; u++)
        for (int i = 0; i < g->nodes[u].nargs; i++) last_read[ir_args(g, &g->nodes[u])[i]] = u;
    for (uint32_t id = 1; id <= cg->ngroups; id++) {
        uint32_t h = into[id];
        while (h && moved[h]) h = moved[h];
        if (!h || h == id || cg->prologue_of[id] != IR_NONE || cg->prologue_of[h] != IR_NONE || absorbed[id]) continue;
        ir_value first, last, hfirst, hlast;
        group_extent(cg, id, &first, &last);
        group_extent(cg, h, &hfirst, &hlast);
        if (first == IR_NONE || hfirst == IR_NONE || last > hfirst || !same_shape(&g->nodes[last], &g->nodes[hfirst])) continue;
        uint32_t members = 0;
        bool copy = false;   /* a parameter's low-precision copy: an update's kernel may store it (plan_carried_copies) */
        for (ir_value m = first; m <= hlast; m++) {
            members += cg->group[m] == id || cg->group[m] == h;
            copy |= cg->group[m] == id && g->nodes[m].op == OP_CAST && g->nodes[ir_args(g, &g->nodes[m])[0]].op == OP_PARAM;
        }
        if (members > CUDA_FUSE_MAX_OPS || copy || !operands_live_at(cg, last_read, id, first, last, hfirst)) continue;
        for (ir_value m = first; m <= last; m++)
            if (cg->group[m] == id) set_group(cg, m, h);
        ir_value in[GROUP_IO_CAP], out[GROUP_IO_CAP];
        int nin, nout;
        group_io(cg, h, first, hlast, in, &nin, out, &nout);
        if (nin + nout > NRT_MAX_BUFS) {   /* too many buffers for one kernel: undone */
            for (ir_value m = first; m <= last; m++)
                if (cg->group[m] == h) set_group(cg, m, id);   /* h's own members all come after last */
            continue;
        }
        moved[id] = h;
        absorbed[h] = true;
    }
    free(last_read);
    free(absorbed);
    free(moved);
    free(into);
}

/* A part of a concat that a joined kernel can sum: a sum over the last
 * axis of a float operand, read only by the concat (through a reshape to
 * [1] for a scalar), every size a constant. Returns the sum, or IR_NONE. */
static ir_value joinable_sum(const cg_ctx *cg, ir_value part, const uint32_t *concat_reads)
{
    const uint32_t *users = cg->readers;
    const ir_graph *g = cg->g;
    ir_value s = part;
    if (g->nodes[s].op == OP_RESHAPE) {
        if (users[s] != 1 || cg->escapes[s]) return IR_NONE;
        s = ir_args(g, &g->nodes[s])[0];
        if (users[s] != 1) return IR_NONE;
    }
    const ir_node *sn = &g->nodes[s];
    /* read by concats only: a sum CSE found twice (two parameters' equal gradients) is added up in each place */
    if (sn->op != OP_SUM || sn->dtype != NC_F32 || cg->group[s] || cg->absorbed[s] || cg->escapes[s] ||
        (users[s] != 1 && users[s] != concat_reads[s]) || sn->attr.keepdim || sn->attr.naxes != 1)
        return IR_NONE;
    const ir_node *x = &g->nodes[ir_args(g, sn)[0]];
    if (x->rank < 1 || sn->attr.axes[0] != x->rank - 1 || !dtype_is_float(x->dtype)) return IR_NONE;
    for (int k = 0; k < x->rank; k++) {
        int64_t d;
        if (!dim_is_const(&g->dims[x->shape[k]], &d)) return IR_NONE;
    }
    return s;
}

/* Whether c is a concat whose kernel could compute its parts' sums. */
static bool joinable_concat(const cg_ctx *cg, ir_value c, const uint32_t *concat_reads)
{
    const ir_graph *g = cg->g;
    const ir_node *cn = &g->nodes[c];
    if (cn->op != OP_CONCAT || cn->rank != 1 || cn->dtype != NC_F32 || cg->group[c] || cg->inlined[c] || cn->nargs < 2) return false;
    int bufs = 1;
    for (int i = 0; i < cn->nargs; i++) {
        ir_value s = joinable_sum(cg, ir_args(g, cn)[i], concat_reads);
        if (s == IR_NONE) return false;
        uint32_t id = cuda_fuse_prologue_group(cg, s);
        if (!id) {
            bufs++;
            continue;
        }
        ir_value first, last, in[GROUP_IO_CAP], out[GROUP_IO_CAP];
        int nin, nout;
        group_extent(cg, id, &first, &last);
        group_io(cg, id, first, last, in, &nin, out, &nout);
        bufs += nin;
        for (int k = 0; k < nin; k++)   /* its dims would take the kernel's ints, one set a part */
            if (g->nodes[in[k]].rank > 0 && spread_of(cg, first, last, id, in[k]) != IR_NONE) return false;
    }
    return bufs <= NRT_MAX_BUFS;
}

/* A sum in f16/bf16 widened to f32 by its one reader (a bias's gradient,
 * summed over the rows in the activations' dtype, then widened for the f32
 * parameter) stores its f32 accumulator as the widened value: no kernel for
 * the cast, and no rounding to the narrow dtype in between (as a matmul's
 * widening epilogue). */
static void plan_widened_sums(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->widened_to = cuda_no_values(g);
    const uint32_t *users = cg->readers;
    const ir_value *user = cg->reader;
    for (ir_value r = 0; r < g->nnodes; r++) {
        const ir_node *rn = &g->nodes[r];
        if ((rn->op != OP_SUM && rn->op != OP_MEAN) || (rn->dtype != NC_F16 && rn->dtype != NC_BF16) || users[r] != 1 ||
            cg->escapes[r] || cg->group[r] || cg->inlined[r] || cg->absorbed[r])
            continue;
        ir_value c = user[r];
        const ir_node *cn = &g->nodes[c];
        if (cn->op != OP_CAST || cn->dtype != NC_F32 || cg->inlined[c] || cg->absorbed[c]) continue;
        cg->widened_to[r] = c;
        cg->inlined[c] = true;   /* stored by the reduction */
        set_group(cg, c, 0);
    }
}

/* A gradient norm joins its partial sums with concats: one kernel computes
 * all the parts of such a concat, each warp one output, instead of a kernel
 * per sum. */
static void plan_joined_sums(cg_ctx *cg, const reader_index *ri)
{
    const ir_graph *g = cg->g;
    cg->joined_sums = nc_xcalloc(g->nnodes + 1, sizeof *cg->joined_sums);
    uint32_t *concat_reads = nc_xcalloc(g->nnodes + 1, sizeof *concat_reads);
    for (ir_value c = 0; c < g->nnodes; c++)
        if (g->nodes[c].op == OP_CONCAT)
            for (int i = 0; i < g->nodes[c].nargs; i++) concat_reads[ir_args(g, &g->nodes[c])[i]]++;
    for (ir_value c = 0; c < g->nnodes; c++) cg->joined_sums[c] = joinable_concat(cg, c, concat_reads);
    /* a sum several concats read has no kernel only if every one of them adds it up */
    for (bool changed = true; changed;) {
        changed = false;
        for (ir_value c = 0; c < g->nnodes; c++) {
            if (!cg->joined_sums[c] || g->nodes[c].nargs == 0) continue;
            for (int i = 0; i < g->nodes[c].nargs && cg->joined_sums[c]; i++) {
                ir_value s = ir_args(g, &g->nodes[c])[i];
                if (cg->readers[s] == 1) continue;
                for (uint32_t j = ri->start[s]; j < ri->start[s + 1] && cg->joined_sums[c]; j++)
                    if (!cg->joined_sums[ri->at[j]]) cg->joined_sums[c] = false, changed = true;
            }
        }
    }
    for (ir_value c = 0; c < g->nnodes; c++) {
        if (!cg->joined_sums[c]) continue;
        for (int i = 0; i < g->nodes[c].nargs; i++) {
            ir_value part = ir_args(g, &g->nodes[c])[i];
            cg->inlined[part] = true;
            if (g->nodes[part].op == OP_RESHAPE) cg->inlined[ir_args(g, &g->nodes[part])[0]] = true;
        }
    }
    free(concat_reads);
}

/* The extent of each group in schedule order, with what it loads and
 * writes: the unit plan_kernels puts side by side. */
typedef struct group_span {
    uint32_t id;
    ir_value first, last;
    ir_value in[GROUP_IO_CAP], out[GROUP_IO_CAP];
    int nin, nout;
    bool spreads;          /* loads a source at another element's offset (a broadcast's, through movement links or a
                              gather), or runs over a node with a kernel: keeps its kernel to itself */
} group_span;

static ir_value spread_of(const cg_ctx *cg, ir_value first, ir_value last, uint32_t id, ir_value a);

static bool reads_group_of(const cg_ctx *cg, const group_span *s, const bool *in_kernel)
{
    const ir_graph *g = cg->g;
    for (ir_value m = s->first; m <= s->last; m++) {
        if (cg->group[m] != s->id) continue;
        for (int i = 0; i < g->nodes[m].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[m])[i];
            if (in_kernel[cg->group[a]] || in_kernel[cg->group[through_spread(g, a)]]) return true;
        }
    }
    return false;
}

/* Groups that follow one another with nothing between them that needs a
 * kernel, and do not read each other, become loops of one kernel (up to
 * NRT_MAX_SECTIONS, within the kernel's buffer slots): a training step's
 * update of every parameter then takes a few launches, not one per
 * parameter. Groups that load through broadcasts of other shapes stay alone
 * (their offsets use the kernel's dims). */
static void plan_kernels(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->kernel_of = nc_xcalloc(cg->ngroups + 1, sizeof *cg->kernel_of);
    for (uint32_t k = 0; k <= cg->ngroups; k++) cg->kernel_of[k] = k;
    bool *in_kernel = nc_xcalloc(cg->ngroups + 1, sizeof *in_kernel);
    group_span *next = nc_xmalloc(sizeof *next);
    uint32_t leader = 0, nsections = 0;
    uint32_t sections[NRT_MAX_SECTIONS + 1] = {0};   /* the kernel's groups: what in_kernel marks */
    ir_value shared[GROUP_IO_CAP * NRT_MAX_SECTIONS];
    int nshared = 0, nouts = 0;
    bool open = false, clear_between = true;
    for (ir_value v = 0; v < g->nnodes; v++) {
        uint32_t id = cg->group[v];
        if (!id) {   /* a node with a kernel of its own ends the run of neighbours */
            bool no_kernel = cg->inlined[v] || g->nodes[v].op == OP_PARAM || g->nodes[v].op == OP_INPUT;
            if (!no_kernel) clear_between = false;
            continue;
        }
        if (v > 0 && cg->group[v - 1] == id) continue;   /* not the group's first member */
        if (cg->prologue_of[id] != IR_NONE) continue;   /* computed by its reduction: no kernel, no loop */
        *next = (group_span){.id = id, .first = v, .last = cg->group_last[id]};
        group_io(cg, id, next->first, next->last, next->in, &next->nin, next->out, &next->nout);
        for (ir_value u = next->first + 1; u < next->last && !next->spreads; u++)   /* a kernel inside the run runs first */
            next->spreads = cg->group[u] != id && !cg->inlined[u] && g->nodes[u].op != OP_PARAM && g->nodes[u].op != OP_INPUT;
        for (int k = 0; k < next->nin && !next->spreads; k++)
            next->spreads = (g->nodes[next->in[k]].rank > 0 && spread_of(cg, next->first, next->last, id, next->in[k]) != IR_NONE) ||
                            cuda_reads_through(cg, next->in[k]) || gathered(cg, next->in[k]);
        int extra = 0;   /* inputs the kernel does not load yet */
        for (int k = 0; k < next->nin; k++) {
            bool seen = false;
            for (int j = 0; j < nshared; j++) seen |= shared[j] == next->in[k];
            extra += !seen;
        }
        bool joins = open && clear_between && !next->spreads && nsections < NRT_MAX_SECTIONS &&
                     next->nout > 0 && nshared + extra + nouts + next->nout <= NRT_MAX_BUFS && 1 + nsections + 1 <= NRT_MAX_INTS &&
                     !reads_group_of(cg, next, in_kernel);
        if (!joins) {   /* a new kernel starts with this group */
            for (uint32_t k = 0; k < nsections; k++) in_kernel[sections[k]] = false;
            leader = id, nsections = 0, nshared = 0, nouts = 0;
        }
        cg->kernel_of[id] = leader;
        in_kernel[id] = true;
        sections[nsections++] = id;
        for (int k = 0; k < next->nin; k++) {
            bool seen = false;
            for (int j = 0; j < nshared; j++) seen |= shared[j] == next->in[k];
            if (!seen) shared[nshared++] = next->in[k];
        }
        nouts += next->nout;
        open = next->nout > 0 && !next->spreads;   /* a group loading through broadcasts keeps its kernel to itself */
        clear_between = true;
        v = next->last;
    }
    free(next);
    free(in_kernel);
}

/* A layernorm's weight and bias gradients sum g xhat and g over the same
 * rows: the weight's kernels compute both, reading x and g once. */
static void plan_norm_pairs(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->bias_grad_with = cuda_no_values(g);
    for (ir_value w = 0; w < g->nnodes; w++) {
        const ir_node *wn = &g->nodes[w];
        if (wn->op != OP_NORM_PARAM_GRAD || wn->attr.axis != 1) continue;
        for (ir_value b = w + 1; b < g->nnodes; b++) {
            const ir_node *bn = &g->nodes[b];
            if (bn->op != OP_NORM_PARAM_GRAD || bn->attr.axis != 0 || cg->inlined[b] || bn->dtype != wn->dtype ||
                ir_args(g, bn)[0] != ir_args(g, wn)[0] || ir_args(g, bn)[1] != ir_args(g, wn)[1])
                continue;
            cg->bias_grad_with[w] = b;
            cg->inlined[b] = true;   /* computed by w's kernels, earlier than its own place */
            break;
        }
    }
}

/* A norm's weight gradient sums g xhat over the rows, xhat from each
 * row's mean and rstd; the norm's input gradient, earlier, computes the same
 * statistics of the same rows: its kernel writes them, and the weight
 * gradient becomes a column sum that reads them (no block-wide reductions
 * per row). */
static void plan_norm_stats(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->stats_from = cuda_no_values(g);
    cg->kept_temp = nc_xcalloc(g->nnodes + 1, sizeof *cg->kept_temp);
    for (ir_value w = 0; w < g->nnodes; w++) {
        const ir_node *wn = &g->nodes[w];
        if (wn->op != OP_NORM_PARAM_GRAD || wn->attr.axis == 0 || cg->inlined[w]) continue;
        nc_op want = wn->attr.axis == 1 ? OP_LAYERNORM_GRAD : OP_RMSNORM_GRAD;
        for (ir_value d = 0; d < w; d++) {
            const ir_node *dn = &g->nodes[d];
            if (dn->op == want && ir_args(g, dn)[0] == ir_args(g, wn)[0] && ir_args(g, dn)[2] == ir_args(g, wn)[1] &&
                dn->attr.f == wn->attr.f) {
                cg->stats_from[w] = d;
                break;
            }
        }
    }
}

/* x's gradient is the sum of what its norm gives back and what reaches x
 * otherwise (the residual stream): an add, alone in its group, of a norm's
 * input gradient read by nothing else and a gradient made before it. The
 * norm's kernel adds it as it stores dx: dx is never written. */
static void plan_norm_grad_sums(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->sum_to = cuda_no_values(g);
    for (ir_value a = 0; a < g->nnodes; a++) {
        const ir_node *an = &g->nodes[a];
        ir_value first, last;
        if (an->op != OP_ADD || !cg->group[a] || cg->absorbed[a]) continue;
        group_extent(cg, cg->group[a], &first, &last);
        if (first != a || last != a) continue;   /* not alone in its group */
        for (int i = 0; i < 2; i++) {
            ir_value d = ir_args(g, an)[i], o = ir_args(g, an)[1 - i];
            const ir_node *dn = &g->nodes[d], *on = &g->nodes[o];
            if ((dn->op != OP_LAYERNORM_GRAD && dn->op != OP_RMSNORM_GRAD) || cg->readers[d] != 1 || cg->escapes[d] || o == d ||
                o > d || on->op == OP_BROADCAST || dn->dtype != an->dtype || on->dtype != an->dtype || !same_shape(dn, an) ||
                !same_shape(on, an))
                continue;
            cg->sum_to[d] = a;
            set_group(cg, a, 0);
            cg->inlined[a] = true;   /* written by the norm's kernel */
            break;
        }
    }
}

/* A norm gradient whose kernel can sum its stored rows' columns too: a
 * warp a row, and the block's warps' sums of C floats in shared memory (at
 * most 32 KiB). */
#define COLSUM_MAX_C 1024

static bool colsum_rows(const cg_ctx *cg, ir_value d)
{
    int64_t C;
    return cuda_warp_rows(cg, &cg->g->nodes[ir_args(cg->g, &cg->g->nodes[d])[0]], &C) && C <= COLSUM_MAX_C;
}

/* A float sum over every axis but the last of r, which a layernorm_grad or
 * rmsnorm_grad d stores (as its result, or the add it writes, sum_to): d's
 * kernel adds up its rows' columns as it stores them (GPT-2's projection
 * biases' gradients, over the residual stream's gradient), and the sum only
 * adds up the partial sums. */
static void plan_norm_grad_colsums(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->colsum_by = cuda_no_values(g);
    bool *taken = nc_xcalloc(g->nnodes + 1, sizeof *taken);
    for (ir_value s = 0; s < g->nnodes; s++) {
        const ir_node *sn = &g->nodes[s];
        if (sn->op != OP_SUM || !dtype_is_float(sn->dtype) || cg->group[s] || cg->absorbed[s] || cg->inlined[s] || sn->rank != 1)
            continue;
        ir_value r = ir_args(g, sn)[0];
        const ir_node *rn = &g->nodes[r];
        bool leading = sn->attr.naxes == rn->rank - 1 && rn->rank >= 2 && sn->shape[0] == rn->shape[rn->rank - 1];
        for (int k = 0; k < sn->attr.naxes && leading; k++) leading = sn->attr.axes[k] == k;
        if (!leading || rn->dtype != sn->dtype) continue;
        ir_value d = (rn->op == OP_LAYERNORM_GRAD || rn->op == OP_RMSNORM_GRAD) && cg->sum_to[r] == IR_NONE ? r : IR_NONE;
        for (ir_value u = 0; u < r && d == IR_NONE; u++)
            if (cg->sum_to[u] == r) d = u;
        if (d == IR_NONE || taken[d] || !colsum_rows(cg, d)) continue;
        cg->colsum_by[s] = d;
        taken[d] = true;
    }
    free(taken);
}

/* A norm's weight gradient (and its bias's along, bias_grad_with) sums
 * g xhat and g over the very rows its input gradient's warp-row kernel
 * holds in registers (stats_from): that kernel adds them up too, each lane
 * over its own columns, so x and g are read once for all three gradients
 * and the weight gradient's kernel only adds the partial rows. */
static void plan_norm_param_folds(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->params_by = cuda_no_values(g);
    bool *taken = nc_xcalloc(g->nnodes + 1, sizeof *taken);
    for (ir_value w = 0; w < g->nnodes; w++) {
        ir_value d = cg->stats_from[w];
        if (d == IR_NONE || taken[d] || !colsum_rows(cg, d)) continue;
        cg->params_by[w] = d;
        taken[d] = true;
    }
    free(taken);
}

/* A cross_entropy_grad scheduled before the cross_entropy of the same
 * logits (schedule.c) finds each row's max and sum of exponentials, all the
 * loss needs: its kernel writes the row losses. */
static void plan_loss_rows(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->loss_rows_with = cuda_no_values(g);
    for (ir_value c = 0; c < g->nnodes; c++) {
        const ir_node *cn = &g->nodes[c];
        if (cn->op != OP_CROSS_ENTROPY) continue;
        for (ir_value d = 0; d < c; d++) {
            const ir_node *dn = &g->nodes[d];
            if (dn->op == OP_CROSS_ENTROPY_GRAD && cg->loss_rows_with[d] == IR_NONE && ir_args(g, dn)[0] == ir_args(g, cn)[0] &&
                ir_args(g, dn)[1] == ir_args(g, cn)[1] && dn->attr.f == cn->attr.f) {
                cg->loss_rows_with[d] = c;
                break;
            }
        }
    }
}

/* A norm's parameter gradient reaches its f32 parameter through the bf16
 * copy the forward pass used: f32(bf16(grad)), a rounding the program asks
 * for. The gradient's sum kernel stores the rounded value itself. */
static void plan_round_trips(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->round_trip_to = cuda_no_values(g);
    const uint32_t *users = cg->readers;
    const ir_value *user = cg->reader;
    for (ir_value v = 0; v < g->nnodes; v++) {
        if (g->nodes[v].op != OP_NORM_PARAM_GRAD || g->nodes[v].dtype != NC_F32 || users[v] != 1 || cg->escapes[v]) continue;
        ir_value narrow = user[v];
        const ir_node *nn = &g->nodes[narrow];
        if (nn->op != OP_CAST || (nn->dtype != NC_BF16 && nn->dtype != NC_F16) || users[narrow] != 1 || cg->escapes[narrow]) continue;
        ir_value wide = user[narrow];
        const ir_node *wn = &g->nodes[wide];
        if (wn->op != OP_CAST || wn->dtype != NC_F32 || cg->inlined[wide] || cg->absorbed[wide] || cg->absorbed[narrow]) continue;
        cg->round_trip_to[v] = wide;
        cg->inlined[narrow] = cg->inlined[wide] = true;
        set_group(cg, narrow, 0), set_group(cg, wide, 0);
    }
}

/* Whether v has a buffer of its own that a step writes: not computed in
 * its readers, and if a matmul's epilogue takes it, as what the step stores. */
static bool in_memory(const cg_ctx *cg, ir_value v)
{
    if (cg->inlined[v]) return false;
    for (uint32_t k = 0; cg->absorbed[v] && k < cg->nepilogues; k++)
        if (cg->epilogues[k].out == v || cg->epilogues[k].colsum == v || cg->epilogues[k].aux == v) return true;
    return !cg->absorbed[v];
}

/* A narrow scatter-add s read only by its widening w = f32(s), read only by
 * a = w + o (or o + w), where o is an f32 value in memory made before s, or
 * f32(r(x)) of such a value x rounded to a narrow dtype (the tied
 * embedding's other gradient, rounded as its bf16 copy's): the scatter's
 * last kernel, which rounds each accumulated row to s's dtype, adds the
 * other term and stores a (the same roundings and the same f32 add); s, w
 * and the other term's casts are never stored and read back (GPT-2's tied
 * embedding: 154 MB a step). */
static void plan_scatter_sums(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->sum_into = cuda_no_values(g);
    const uint32_t *users = cg->readers;
    const ir_value *user = cg->reader;
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        if (n->op != OP_SCATTER_ADD || n->dtype == NC_F32 || !dtype_is_float(n->dtype) || users[v] != 1 || cg->escapes[v]) continue;
        ir_value w = user[v], a = users[w] == 1 ? user[w] : IR_NONE;
        const ir_node *wn = &g->nodes[w];
        if (wn->op != OP_CAST || wn->dtype != NC_F32 || cg->escapes[w] || cg->absorbed[w] || a == IR_NONE) continue;
        const ir_node *an = &g->nodes[a];
        if (an->op != OP_ADD || an->dtype != NC_F32 || an->rank != n->rank || memcmp(an->shape, n->shape, n->rank * sizeof *n->shape) ||
            cg->absorbed[a] || ir_args(g, an)[0] == ir_args(g, an)[1])
            continue;
        ir_value o = ir_args(g, an)[0] == w ? ir_args(g, an)[1] : ir_args(g, an)[0], narrow;
        ir_value x = cuda_scatter_addend(g, o, &narrow);
        if (x == IR_NONE || x > v || !in_memory(cg, x)) continue;
        bool rounds = narrow != IR_NONE && narrow != x;   /* f32(r(x)): r too is computed in the kernel */
        if (o != x && (users[o] != 1 || cg->escapes[o] || (rounds && (users[narrow] != 1 || cg->escapes[narrow])))) continue;
        cg->sum_into[v] = a;
        cg->inlined[w] = cg->inlined[a] = true;   /* no kernels of their own: a is stored by the scatter */
        set_group(cg, w, 0), set_group(cg, a, 0);
        if (o != x) cg->inlined[o] = true, set_group(cg, o, 0);
        if (rounds) cg->inlined[narrow] = true, set_group(cg, narrow, 0);
    }
}

ir_value cuda_scatter_addend(const ir_graph *g, ir_value o, ir_value *narrow)
{
    *narrow = IR_NONE;
    const ir_node *on = &g->nodes[o];
    if (on->dtype != NC_F32 || on->op == OP_BROADCAST || on->op == OP_FILL) return IR_NONE;
    if (on->op != OP_CAST) return o;
    ir_value r = ir_args(g, on)[0];
    const ir_node *rn = &g->nodes[r];
    if (rn->dtype != NC_BF16 && rn->dtype != NC_F16) return IR_NONE;
    *narrow = r;   /* f32(y): y loaded and widened; f32(r(x)), x f32: x loaded and rounded */
    if (rn->op == OP_CAST && g->nodes[ir_args(g, rn)[0]].dtype == NC_F32) return ir_args(g, rn)[0];
    return r;
}

/* A transpose or slice (with reshapes around it) that only a fused group
 * reads needs no kernel: the group loads each element from the value in
 * memory under the chain, at the offset the links map it to, so the moved
 * tensor is never written and read back (cast_chain.net: the slice of the
 * product's transpose). The links are those cuda_emit.c's read-through
 * kernels follow; a chain is taken up to its last transpose or slice whose
 * sizes still fit the step (a reshape alone is a view already). Prologue
 * groups load at the element's own index and keep their operands. */
static bool chain_link(const cg_ctx *cg, ir_value w, uint32_t readers)
{
    return op_is_movement_link(cg->g->nodes[w].op) && cg->readers[w] == readers && !cg->escapes[w] && !cg->group[w] &&
           !cg->absorbed[w] && !cg->inlined[w];
}

/* How many operand slots of group id's members (over [first, last]) read
 * v: where that is all of v's readers, the group alone reads it. */
static uint32_t group_reads(const cg_ctx *cg, uint32_t id, ir_value first, ir_value last, ir_value v)
{
    const reader_index *ri = &cg->reader_list;   /* v's readers, a slot each: not the group's every member */
    uint32_t n = 0;
    for (uint32_t k = ri->start[v]; k < ri->start[v + 1]; k++) {
        ir_value m = ri->at[k];
        n += m >= first && m <= last && cg->group[m] == id;
    }
    return n;
}

/* How many links of the chain a member reads as operand a the group
 * takes (0: none; a must have no readers but the group's `readers`
 * slots), with the sizes they add to d: up to a value in memory,
 * through a transpose or slice at least. Links a read-through kernel took
 * already (a transpose under the slice) come along. */
static int take_chain(const cg_ctx *cg, ir_value a, uint32_t readers, dim_set *d, int spare)
{
    const ir_graph *g = cg->g;
    dim_set at = *d;
    int taken = 0, n = 0;
    bool moves = false;
    for (ir_value w = a; chain_link(cg, w, w == a ? readers : 1) || (w != a && cuda_reads_through(cg, w)); w = ir_args(g, &g->nodes[w])[0]) {
        const ir_node *wn = &g->nodes[w], *un = &g->nodes[ir_args(g, wn)[0]];
        dims_add(&at, wn->shape, wn->rank);
        dims_add(&at, un->shape, un->rank);
        if (wn->op == OP_SLICE) dims_add(&at, &wn->attr.lo, 1);
        if (at.n + spare > NRT_MAX_INTS) break;
        n++;
        moves |= wn->op != OP_RESHAPE;
        if (moves && in_memory(cg, ir_args(g, wn)[0])) taken = n, *d = at;
    }
    return taken;
}

/* A gather of float rows that only the group's members read, as operand a
 * (or through broadcasts only they read: the position embedding, the same rows
 * for every batch): the group loads the index and the row's element itself
 * (an embedding's lookup and what follows it: one kernel, the rows never
 * stored). */
static bool take_gather(cg_ctx *cg, uint32_t id, ir_value first, ir_value last, ir_value a, dim_set *d, int spare)
{
    const ir_graph *g = cg->g;
    uint32_t readers = group_reads(cg, id, first, last, a);   /* the group's members read it, and nothing else */
    for (; spread(g, a); a = ir_args(g, &g->nodes[a])[0], readers = 1)
        if (!cg->inlined[a] || cg->readers[a] != readers) return false;
    const ir_node *an = &g->nodes[a];
    if (an->op != OP_GATHER || !dtype_is_float(an->dtype) || cg->readers[a] != readers || cg->escapes[a] || cg->group[a] ||
        cg->absorbed[a] || cg->inlined[a])
        return false;
    ir_value table = ir_args(g, an)[0], idx = ir_args(g, an)[1];
    uint32_t nidx;
    if (g->nodes[idx].rank == 0 || !in_memory(cg, table) || !in_memory(cg, idx) || !cuda_numel_dim(cg, &g->nodes[idx], &nidx))
        return false;
    uint32_t count;   /* the gather's elements: the group's, or fewer under a broadcast */
    if (!cuda_numel_dim(cg, an, &count)) return false;
    dim_set at = *d;
    dims_add(&at, &nidx, 1);
    dims_add(&at, &g->nodes[table].shape[0], 1);
    dims_add(&at, &count, 1);
    ir_value in[GROUP_IO_CAP], out[GROUP_IO_CAP];
    int nin, nout;
    group_io(cg, id, first, last, in, &nin, out, &nout);
    if (at.n + spare > NRT_MAX_INTS || nin + nout + 1 > NRT_MAX_BUFS) return false;
    *d = at;
    cg->inlined[a] = true;
    return true;
}

static void plan_group_reads(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    for (uint32_t id = 1; id <= cg->ngroups; id++) {
        ir_value first, last;
        group_extent(cg, id, &first, &last);
        if (first == IR_NONE || cg->prologue_of[id] != IR_NONE) continue;
        const ir_node *ln = &g->nodes[last];
        dim_set d = {.n = 1};   /* the element count; the shape's dims count apart, repeats too (emit_single) */
        for (ir_value m = first; m <= last; m++) {
            if (cg->group[m] != id) continue;
            for (int i = 0; i < g->nodes[m].nargs; i++) {
                ir_value a = ir_args(g, &g->nodes[m])[i];
                if (take_gather(cg, id, first, last, a, &d, ln->rank)) continue;
                int n = take_chain(cg, a, group_reads(cg, id, first, last, a), &d, ln->rank);
                for (int k = 0; k < n; k++, a = ir_args(g, &g->nodes[a])[0]) cg->inlined[a] = true;
            }
        }
    }
}

/* The step that computes r runs at this node: its matmul epilogue's last
 * op, its group's last member, or r itself. */
static ir_value emitted_at(const cg_ctx *cg, ir_value r)
{
    for (uint32_t k = 0; cg->absorbed && cg->absorbed[r] && k < cg->nepilogues; k++)   /* a matmul's epilogue: at its last op */
        for (int i = 0; i < cg->epilogues[k].nchain; i++)
            if (cg->epilogues[k].chain[i] == r || cg->epilogues[k].colsum == r) return cg->epilogues[k].out;
    return cg->group[r] ? cg->group_last[cg->group[r]] : r;
}

/* Whether every step that reads v runs before node `first`: v's own, and
 * those of its readers, and of an inlined reader's readers (a bias's
 * broadcast, loaded where it is used). */
static bool read_before(const cg_ctx *cg, const reader_index *ri, ir_value v, ir_value first)
{
    if (emitted_at(cg, v) >= first) return false;
    for (uint32_t k = ri->start[v]; k < ri->start[v + 1]; k++) {
        ir_value r = ri->at[k];
        if (cg->inlined[r] ? !read_before(cg, ri, r, first) : emitted_at(cg, r) >= first) return false;
    }
    return true;
}

/* A training step's low-precision copy c = cast(p) of a parameter p whose
 * new value u a fused kernel computes (the optimizer's update) is stored by
 * that kernel too, rounded from u, when every reader of c runs before it:
 * the next step finds the copy made, and the copy's own kernel (a prepare
 * step, cuda_emit_program_ex) runs only when the parameters are set from
 * outside. Exact: the copy is the same rounding of the same value. GPT-2's
 * step no longer reads each f32 weight to make its copy (13 kernels, 0.68
 * GiB); the updates write 0.23 GiB more. */
static void plan_carried_copies(cg_ctx *cg, const reader_index *ri)
{
    const ir_graph *g = cg->g;
    cg->carry_into = cuda_no_values(g);
    cg->carry_from = cuda_no_values(g);
    if (!g->nupdates || !g->train.present || g->train.copies_each_step) return;
    ir_value *update_of = cuda_no_values(g);   /* a parameter's node -> its new value */
    ir_value *new_value = nc_xmalloc((g->nparams + 1) * sizeof *new_value);   /* a parameter's index -> its new value */
    for (uint32_t i = 0; i <= g->nparams; i++) new_value[i] = IR_NONE;
    for (uint32_t i = 0; i < g->nupdates; i++) new_value[g->updates[i].param] = g->updates[i].value;
    for (ir_value p = 0; p < g->nnodes; p++)
        if (g->nodes[p].op == OP_PARAM && g->nodes[p].attr.index < g->nparams) update_of[p] = new_value[g->nodes[p].attr.index];
    free(new_value);
    for (ir_value c = 0; c < g->nnodes; c++) {
        const ir_node *cn = &g->nodes[c];
        if (cn->op != OP_CAST || (cn->dtype != NC_BF16 && cn->dtype != NC_F16) || !cg->group[c] || cg->inlined[c] ||
            cg->absorbed[c] || cg->escapes[c])
            continue;
        ir_value p = ir_args(g, cn)[0], u = update_of[p];
        if (u == IR_NONE || g->nodes[p].dtype != NC_F32 || g->nodes[u].dtype != NC_F32 || !cg->group[u] || cg->inlined[u] ||
            cg->absorbed[u] || cg->carry_into[u] != IR_NONE)
            continue;
        ir_value first = cg->group_first[cg->group[u]];   /* u's kernel starts at its group's first member */
        if (!read_before(cg, ri, c, first)) continue;
        cg->carry_into[u] = c;
        cg->carry_from[c] = u;
    }
    free(update_of);
}

/* Cheap nodes that read no member of the open group do not close its
 * run: a movement link or a gather the group may load through
 * (plan_group_reads), an iota (a gather's positions). One that keeps a
 * kernel runs before the group's, which comes at its last member. */
static bool passes_over(const cg_ctx *cg, ir_value v, uint32_t id)
{
    const ir_graph *g = cg->g;
    const ir_node *n = &g->nodes[v];
    if (!(op_is_movement_link(n->op) || n->op == OP_GATHER || n->op == OP_IOTA) || cg->absorbed[v]) return false;
    for (int i = 0; i < n->nargs; i++)
        if (cg->group[through_spread(g, ir_args(g, n)[i])] == id) return false;
    return true;
}

static uint32_t uf_find(uint32_t *root, uint32_t v)
{
    while (root[v] != v) v = root[v] = root[root[v]];
    return v;
}

static void uf_join(uint32_t *root, uint32_t a, uint32_t b) { root[uf_find(root, a)] = uf_find(root, b); }

/* Whether group id, whose members are [first, last], splits into parts:
 * joins in root (a union-find over nodes) each member with the members and
 * element inputs it reads, so a part is a root; false if the group stays
 * whole (one part, a load through a broadcast or of another shape, or
 * parts interleaved in node order). */
static bool group_parts(const cg_ctx *cg, uint32_t id, ir_value first, ir_value last, uint32_t *root)
{
    const ir_graph *g = cg->g;
    for (ir_value m = first; m <= last; m++) {
        if (cg->group[m] != id) continue;
        const ir_node *n = &g->nodes[m];
        for (int i = 0; i < n->nargs; i++) {
            ir_value a = ir_args(g, n)[i], src = through_spread(g, a);
            if (cg->group[a] == id) uf_join(root, m, a);
            else if (g->nodes[src].rank == 0 || i == ir_step_slot(n)) continue;   /* a scalar ties no parts together */
            else if (!spread(g, a) && same_shape(&g->nodes[a], n)) uf_join(root, m, a);   /* one element load */
            else return false;
        }
    }
    uint32_t parts = 0, current = UINT32_MAX;
    for (ir_value m = first; m <= last; m++) {   /* each part's members in one run */
        if (cg->group[m] != id || uf_find(root, m) == current) continue;
        current = uf_find(root, m);
        for (ir_value u = first; u < m; u++)
            if (cg->group[u] == id && uf_find(root, u) == current) return false;
        parts++;
    }
    return parts > 1;
}

/* Chains that share no member and load no element in common (the updates
 * of parameters of one size, adjacent in the step) join one group only by
 * being neighbours: each becomes a group of its own, which plan_kernels
 * makes a loop of the same kernel. One loop then holds one chain's eight
 * elements of its inputs and results at a time, not every chain's (the
 * AdamW update's loops over three parameters took 192 registers a thread
 * and kept one block on a multiprocessor). Group ids stay in node order. */
static uint32_t split_independent(cg_ctx *cg, uint32_t ngroups)
{
    const ir_graph *g = cg->g;
    uint32_t *root = nc_xmalloc((g->nnodes + 1) * sizeof *root);
    ir_value *first = nc_xmalloc((ngroups + 1) * sizeof *first), *last = nc_xmalloc((ngroups + 1) * sizeof *last);
    for (ir_value v = 0; v < g->nnodes; v++) root[v] = v;
    for (uint32_t id = 0; id <= ngroups; id++) first[id] = last[id] = IR_NONE;
    for (ir_value v = 0; v < g->nnodes; v++) {
        uint32_t id = cg->group[v];
        if (id) last[id] = v, first[id] = first[id] == IR_NONE ? v : first[id];
    }
    bool *split = nc_xcalloc(ngroups + 1, sizeof *split);
    for (uint32_t id = 1; id <= ngroups; id++)
        if (first[id] != IR_NONE) split[id] = group_parts(cg, id, first[id], last[id], root);
    /* groups never interleave (one closes before the next opens), nor do a
     * split group's parts: a new id at each change of group or part */
    uint32_t next = 0, prev_group = 0, prev_part = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        uint32_t id = cg->group[v];
        if (!id) continue;
        uint32_t part = split[id] ? uf_find(root, v) : 0;
        if (id != prev_group || part != prev_part) next++;
        prev_group = id, prev_part = part;
        set_group(cg, v, next);
    }
    free(split);
    free(first);
    free(last);
    free(root);
    return next;
}

/* A plain column reduction that can share host h's kernel: over an input
 * of h's prologue group of h's operand's shape, the same axes, with
 * nothing reading it between the two (the kernel runs at the later). */
static bool sibling_of(const cg_ctx *cg, ir_value h, uint32_t id, ir_value p, const uint32_t *prologue, const reader_index *ri)
{
    const ir_graph *g = cg->g;
    const ir_node *hn = &g->nodes[h], *pn = &g->nodes[p];
    int64_t hrows, prows;
    if ((pn->op != OP_SUM && pn->op != OP_MEAN) || !dtype_is_float(pn->dtype) || cg->group[p] || cg->inlined[p] ||
        cg->absorbed[p] || cg->widened_to[p] != IR_NONE || cg->sibling_sum[p] != IR_NONE || prologue[p] ||
        pn->attr.naxes != hn->attr.naxes || memcmp(pn->attr.axes, hn->attr.axes, (size_t)hn->attr.naxes) ||
        !cuda_reduce_takes_sibling(cg, p, &prows) || !cuda_reduce_takes_sibling(cg, h, &hrows) || prows != hrows ||
        cuda_fuse_prologue_input(cg, id, ir_args(g, pn)[0]) < 0)
        return false;
    const ir_node *px = &g->nodes[ir_args(g, pn)[0]], *hx = &g->nodes[ir_args(g, hn)[0]];
    if (!same_shape(px, hx)) return false;
    ir_value first = p < h ? p : h, last = p < h ? h : p;   /* nothing reads the earlier one before the later one's kernel */
    for (uint32_t k = ri->start[first]; k < ri->start[first + 1]; k++)
        if (ri->at[k] <= last) return false;
    return true;
}

/* A column sum or mean computed with a prologue (sum(dy * xhat), a batch
 * norm's weight gradient) and a plain one of an input that prologue loads
 * (sum(dy), the bias's) over the same rows: one kernel, at the later of the
 * two, keeps both sums and reads the input once. Any model's pairs, not only
 * a batch norm's. Candidates are the readers of the prologue's inputs (an
 * index of readers: every reduction against every other, scanning the nodes
 * between each pair, was quadratic). */
static void plan_sibling_sums(cg_ctx *cg, const reader_index *ri)
{
    const ir_graph *g = cg->g;
    cg->sibling_sum = cuda_no_values(g);
    uint32_t *prologue = nc_xcalloc(g->nnodes + 1, sizeof *prologue);   /* each reduction's prologue group */
    for (uint32_t id = 1; id <= cg->ngroups; id++)
        if (cg->prologue_of[id] != IR_NONE) prologue[cg->prologue_of[id]] = id;
    for (ir_value h = 0; h < g->nnodes; h++) {
        const ir_node *hn = &g->nodes[h];
        uint32_t id = prologue[h];
        if ((hn->op != OP_SUM && hn->op != OP_MEAN) || !dtype_is_float(hn->dtype) || cg->absorbed[h] || cg->inlined[h] ||
            cg->widened_to[h] != IR_NONE || cg->sibling_sum[h] != IR_NONE || !id || cg->prologue_stored[id])
            continue;
        ir_value first, last, in[GROUP_IO_CAP], out[GROUP_IO_CAP], p = IR_NONE;
        int nin, nout;
        group_extent(cg, id, &first, &last);
        group_io(cg, id, first, last, in, &nin, out, &nout);
        for (int k = 0; k < nin; k++)   /* a sibling reads an input of the prologue: the first such */
            for (uint32_t j = ri->start[in[k]]; j < ri->start[in[k] + 1]; j++) {
                ir_value u = ri->at[j];
                if (u != h && (p == IR_NONE || u < p) && sibling_of(cg, h, id, u, prologue, ri)) p = u;
            }
        if (p == IR_NONE) continue;
        ir_value later = p > h ? p : h, earlier = p > h ? h : p;
        cg->sibling_sum[later] = earlier;
        cg->inlined[earlier] = true;   /* computed by the later one's kernel */
    }
    free(prologue);
}

/* Whether group id's inputs can be loaded in a column total's lane: floats
 * at the group's own index (shape) or scalars; returns the latest one that
 * is a column reduction whose total is added up apart (own: by a kernel of
 * its own, not yet given a group) in r, IR_NONE if none. */
static bool epilogue_inputs(const cg_ctx *cg, uint32_t id, const ir_node *shape, const bool *own, ir_value *r)
{
    const ir_graph *g = cg->g;
    ir_value first, last, in[GROUP_IO_CAP], out[GROUP_IO_CAP];
    int nin, nout;
    group_extent(cg, id, &first, &last);
    group_io(cg, id, first, last, in, &nin, out, &nout);
    if (nout == 0 || !same_shape(&g->nodes[last], shape)) return false;
    for (int k = 0; k < nin; k++) {
        ir_value a = in[k];
        const ir_node *an = &g->nodes[a];
        if (!in_registers(an->dtype) || gathered(cg, a) || cuda_reads_through(cg, a)) return false;
        if (an->rank > 0 && (!same_shape(an, shape) || spread_of(cg, first, last, id, a) != IR_NONE)) return false;
        if (own[a] && cg->group[a] == 0 && (*r == IR_NONE || a > *r) && (!cg->widened_to || cg->widened_to[a] == IR_NONE) &&
            cuda_reduce_total_apart(cg, a))
            *r = a;
    }
    return true;
}

/* The buffers group id's epilogue adds to its kernel: its inputs but r, and
 * its results. */
static int epilogue_bufs(const cg_ctx *cg, uint32_t id, ir_value r)
{
    ir_value first, last, in[GROUP_IO_CAP], out[GROUP_IO_CAP];
    int nin, nout, n = 0;
    group_extent(cg, id, &first, &last);
    group_io(cg, id, first, last, in, &nin, out, &nout);
    for (int k = 0; k < nin; k++) n += in[k] != r;
    return n + nout;
}

/* A kernel of groups (one or several loops) of the shape of a column
 * reduction's result, which one of them reads, runs in the kernel adding up
 * that reduction's partial results (cuda_reduce_total_apart), emitted where
 * the groups' kernel was: the lane that has each column's total computes
 * the groups' members at that column, loading their other inputs there.
 * A batch norm's scale from its variance (with the running statistics'
 * updates), and its weight's gradient terms from sum(dy * xhat), are no
 * launches of their own. The latest such reduction read takes the kernel,
 * if nothing else reads it before the kernel's place; a reduction takes
 * one kernel. */
static void plan_epilogues(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->epilogue_of = nc_xmalloc((cg->ngroups + 1) * sizeof *cg->epilogue_of);
    bool *own = nc_xmalloc((g->nnodes + 1) * sizeof *own);
    for (ir_value v = 0; v < g->nnodes; v++) own[v] = !cg->inlined[v] && !cg->absorbed[v];   /* a kernel of its own, at v */
    for (ir_value v = 0; v < g->nnodes; v++)
        if (cg->sibling_sum[v] != IR_NONE) own[cg->sibling_sum[v]] = true;   /* added up apart, after v's kernel */
    for (uint32_t id = 1; id <= cg->ngroups; id++) cg->epilogue_of[id] = IR_NONE;
    for (uint32_t leader = 1; leader <= cg->ngroups; leader++) {
        if (cg->kernel_of[leader] != leader || cg->prologue_of[leader] != IR_NONE) continue;
        ir_value r = IR_NONE, end = IR_NONE, first, last;
        const ir_node *shape = NULL;
        bool ok = true;
        for (uint32_t id = leader; id <= cg->ngroups && ok; id++) {
            if (cg->kernel_of[id] != leader) continue;
            group_extent(cg, id, &first, &last);
            if (first == IR_NONE) { ok = false; break; }
            if (!shape) shape = &g->nodes[last];
            ok = epilogue_inputs(cg, id, shape, own, &r);
            end = end == IR_NONE || last > end ? last : end;
        }
        if (!ok || r == IR_NONE) continue;
        int bufs = 2;   /* the total's partial rows and result */
        for (uint32_t id = leader; id <= cg->ngroups; id++)
            if (cg->kernel_of[id] == leader) bufs += epilogue_bufs(cg, id, r);
        for (ir_value u = r + 1; u < end && ok; u++)   /* r is stored at end now */
            for (int i = 0; cg->kernel_of[cg->group[u]] != leader && i < g->nodes[u].nargs && ok; i++)
                ok = ir_args(g, &g->nodes[u])[i] != r;
        if (!ok || bufs > NRT_MAX_BUFS) continue;
        for (uint32_t id = leader; id <= cg->ngroups; id++)
            if (cg->kernel_of[id] == leader) cg->epilogue_of[id] = r;
        own[r] = false;
    }
    free(own);
}

void cuda_fuse_plan(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->group = nc_xcalloc(g->nnodes + 1, sizeof *cg->group);
    cg->inlined = nc_xcalloc(g->nnodes + 1, sizeof *cg->inlined);
    cg->last_use = nc_xmalloc((g->nnodes + 1) * sizeof *cg->last_use);
    cg->escapes = nc_xcalloc(g->nnodes + 1, sizeof *cg->escapes);
    cg->readers = nc_xcalloc(g->nnodes + 1, sizeof *cg->readers);
    cg->reader = cuda_no_values(g);
    for (ir_value u = 0; u < g->nnodes; u++)
        for (int k = 0; k < g->nodes[u].nargs; k++) cg->readers[ir_args(g, &g->nodes[u])[k]]++, cg->reader[ir_args(g, &g->nodes[u])[k]] = u;
    plan_last_use(cg);
    for (uint32_t i = 0; i < g->noutputs; i++) cg->escapes[g->outputs[i].value] = true;
    for (uint32_t i = 0; i < g->nupdates; i++) cg->escapes[g->updates[i].value] = true;
    if (g->train.present && g->train.loss != IR_NONE) cg->escapes[g->train.loss] = true;
    cuda_epilogue_plan(cg);
    uint32_t id = 0, members = 0;
    ir_value first = IR_NONE;
    for (ir_value v = 0; v < g->nnodes; v++) {
        if (inlinable(g, v)) {
            /* a broadcast of the open group's member would run before the
             * group's kernel if it needs a kernel of its own: close the run */
            if (first != IR_NONE && spread(g, v) && cg->group[ir_args(g, &g->nodes[v])[0]] == id) first = IR_NONE;
            continue;
        }
        if (g->nodes[v].op == OP_PARAM || g->nodes[v].op == OP_INPUT) continue;   /* no kernel: nothing to split */
        if (first != IR_NONE && passes_over(cg, v, id)) continue;
        bool can_fuse = fusable(g, v) && !cg->absorbed[v];
        bool joins = can_fuse && first != IR_NONE && members < CUDA_FUSE_MAX_OPS && same_shape(&g->nodes[first], &g->nodes[v]);
        if (joins) {
            set_group(cg, v, id);
            ir_value in[GROUP_IO_CAP], out[GROUP_IO_CAP];
            int nin, nout;
            group_io(cg, id, first, v, in, &nin, out, &nout);
            if (nin + nout > NRT_MAX_BUFS) set_group(cg, v, 0), joins = false;
            else members++;
        }
        if (!joins) {
            first = IR_NONE;
            if (can_fuse) set_group(cg, v, ++id), first = v, members = 1;
        }
    }
    id = split_independent(cg, id);
    index_extents(cg, id + (uint32_t)g->nnodes + 1);   /* split_off_last adds at most a group a node */
    plan_inlined(cg);
    plan_read_through(cg);
    cg->reader_list = index_readers(g);
    const reader_index *ri = &cg->reader_list;
    cuda_attention_plan(cg);
    plan_norm_pairs(cg);
    plan_norm_stats(cg);
    plan_norm_grad_sums(cg);
    plan_norm_grad_colsums(cg);
    plan_norm_param_folds(cg);
    plan_loss_rows(cg);
    plan_round_trips(cg);
    cg->ngroups = id;
    plan_prologues(cg, ri);
    plan_sunk_groups(cg);
    plan_joined_sums(cg, ri);
    plan_widened_sums(cg);
    plan_scatter_sums(cg);
    plan_group_reads(cg);
    plan_carried_copies(cg, ri);
    plan_kernels(cg);
    plan_sibling_sums(cg, ri);
    plan_epilogues(cg);
}

void cuda_fuse_free(cg_ctx *cg)
{
    free_readers(&cg->reader_list);
    free(cg->group);
    free(cg->group_first);
    free(cg->group_last);
    cg->group_first = cg->group_last = NULL;
    free(cg->inlined);
    free(cg->last_use);
    free(cg->escapes);
    free(cg->kernel_of);
    free(cg->prologue_of);
    free(cg->prologue_dim0);
    free(cg->prologue_stored);
    cg->prologue_stored = NULL;
    free(cg->epilogue_of);
    free(cg->attn_root);
    free(cg->attn_col);
    free(cg->attn_colsum);
    free(cg->lse_with);
    free(cg->delta_from);
    free(cg->dv_with);
    cg->dv_with = NULL;
    free(cg->out_as);
    free(cg->out_col);
    free(cg->bias_grad_with);
    free(cg->stats_from);
    free(cg->kept_temp);
    free(cg->loss_rows_with);
    free(cg->sum_to);
    free(cg->colsum_by);
    free(cg->params_by);
    cg->params_by = NULL, cg->stats_from = NULL, cg->kept_temp = NULL, cg->loss_rows_with = NULL, cg->sum_to = NULL, cg->colsum_by = NULL;
    free(cg->joined_sums);
    free(cg->widened_to);
    free(cg->sibling_sum);
    cg->sibling_sum = NULL;
    free(cg->round_trip_to);
    free(cg->sum_into);
    cg->sum_into = NULL;
    free(cg->carry_into);
    free(cg->carry_from);
    cg->carry_into = cg->carry_from = NULL;
    free(cg->readers);
    free(cg->reader);
    cg->readers = NULL, cg->reader = NULL;
    cg->joined_sums = NULL, cg->widened_to = NULL, cg->round_trip_to = NULL;
    cg->prologue_of = NULL, cg->prologue_dim0 = NULL, cg->epilogue_of = NULL, cg->attn_root = NULL, cg->attn_col = NULL, cg->attn_colsum = NULL, cg->lse_with = NULL, cg->delta_from = NULL;
    cg->out_as = NULL, cg->out_col = NULL, cg->bias_grad_with = NULL;
    cuda_epilogue_free(cg);
    cg->group = NULL, cg->inlined = NULL, cg->last_use = NULL, cg->escapes = NULL, cg->kernel_of = NULL;
}

bool cuda_fuse_is_member(const cg_ctx *cg, ir_value v) { return cg->group[v] != 0; }

bool cuda_fuse_gathers(const cg_ctx *cg, ir_value v) { return cg->group && gathered(cg, v); }

bool cuda_fuse_same_kernel(const cg_ctx *cg, ir_value a, ir_value b)
{
    uint32_t ga = cg->group[a], gb = cg->group[b];
    return ga && gb && cg->kernel_of[ga] == cg->kernel_of[gb];
}

ir_value *cuda_no_values(const ir_graph *g)
{
    ir_value *a = nc_xmalloc((g->nnodes + 1) * sizeof *a);
    for (ir_value v = 0; v <= g->nnodes; v++) a[v] = IR_NONE;
    return a;
}

bool cuda_kernel_writes(const cg_ctx *cg, ir_value node, ir_value v)
{
    if (v == node) return true;
    if (!cg->group || v >= cg->g->nnodes || node >= cg->g->nnodes) return false;
    if (cg->delta_from && cg->delta_from[node] != IR_NONE && v == ir_args(cg->g, &cg->g->nodes[node])[5]) return true;
    if (cg->out_as && cg->out_as[node] == v) return true;
    if (cg->dv_with && cg->dv_with[node] != IR_NONE &&
        (cg->dv_with[node] == v || (cg->out_as && cg->out_as[cg->dv_with[node]] == v)))
        return true;
    if (cg->bias_grad_with && cg->bias_grad_with[node] == v) return true;
    if (cg->round_trip_to && (cg->round_trip_to[node] == v ||
                              (cg->bias_grad_with && cg->bias_grad_with[node] != IR_NONE && cg->round_trip_to[cg->bias_grad_with[node]] == v)))
        return true;
    if (cg->widened_to && cg->widened_to[node] == v) return true;
    if (cg->sibling_sum && cg->sibling_sum[node] == v) return true;
    if (cg->sum_to && cg->sum_to[node] == v) return true;
    if (cg->sum_into && cg->sum_into[node] == v) return true;
    if (cg->carry_from && cg->carry_from[v] != IR_NONE && cuda_fuse_same_kernel(cg, cg->carry_from[v], node)) return true;
    if (cg->epilogue_of && cg->group[v] && cg->epilogue_of[cg->group[v]] == node) return true;
    if (cg->prologue_stored && cg->group[v] && cg->prologue_stored[cg->group[v]] && cg->prologue_of[cg->group[v]] == node) return true;
    return cuda_fuse_same_kernel(cg, v, node) || (cg->lse_with && cg->lse_with[node] == v);
}

static bool is_last(const cg_ctx *cg, ir_value v)
{
    ir_value first, last;
    if (!cg->group[v]) return false;
    group_extent(cg, cg->group[v], &first, &last);
    return last == v;
}

/* Registers are numbered by position in the group, not by IR value, so the
 * same layer repeated gives the same kernel text (and one kernel). */
static uint32_t ordinal(const cg_ctx *cg, ir_value first, ir_value m)
{
    uint32_t k = 0;
    for (ir_value u = first; u < m; u++) k += cg->group[u] == cg->group[m];
    return k;
}

/* Where a member reads operand a: a register, a literal, or a loaded input. */
static void operand_expr(const cg_ctx *cg, ir_value first, ir_value a, uint32_t id, const ir_value *inputs, int ninputs,
                         const char *lane, char *buf, size_t cap)
{
    const ir_graph *g = cg->g;
    if (cg->group[a] == id) { cg_snprintf(buf, cap, "t%u%s", ordinal(cg, first, a), lane); return; }
    a = through_spread(g, a);
    if (scalar_fill(g, a)) {   /* a narrow fill holds its value rounded, as the executor's and a stored one do */
        char lit[48];
        cg_snprintf(buf, cap, "%s", cuda_float_literal(lit, nc_round_to(g->nodes[a].dtype, (float)g->nodes[a].attr.f)));
        return;
    }
    for (int k = 0; k < ninputs; k++)
        if (inputs[k] == a) { cg_snprintf(buf, cap, "in%d%s", k, lane); return; }
    NC_BUG("fused operand %%%u not found", a);
}

/* The broadcast through which the group loads input a at other elements than
 * its own (IR_NONE: a is loaded at the element's own index). */
static ir_value spread_of(const cg_ctx *cg, ir_value first, ir_value last, uint32_t id, ir_value a)
{
    const ir_graph *g = cg->g;
    for (ir_value m = first; m <= last; m++) {
        if (cg->group[m] != id) continue;
        for (int i = 0; i < g->nodes[m].nargs; i++) {
            ir_value b = ir_args(g, &g->nodes[m])[i];
            if (cg->group[b] != id && spread(g, b) && through_spread(g, b) == a && !same_shape(&g->nodes[a], &g->nodes[b]))
                return b;
        }
    }
    return IR_NONE;
}

/* Code setting o<k> to the offset in broadcast b's source of element i of b,
 * whose dims are A.n[dim0..dim0 + rank - 1]. Axes are taken in runs of kept or broadcast
 * axes from the last one, so [C] -> [B, T, C] costs one modulo and
 * [B, T, 1] -> [B, T, C] one division. */
static void emit_spread_offset(cg_ctx *cg, const ir_node *b, const ir_node *x, int k, int dim0)
{
    uint32_t one = ir_dim_const((ir_graph *)cg->g, 1);
    cg_printf(&cg->body, "    nc_ix o%d = 0;\n    { nc_ix rem = (nc_ix)i, stride = 1; (void)stride;\n", k);
    int axis = b->rank - 1;
    while (axis >= 0) {
        int sa = axis - (b->rank - x->rank);
        bool kept = sa >= 0 && x->shape[sa] != one;
        int end = axis;   /* the run is [start, end] */
        while (axis >= 0) {
            int s2 = axis - (b->rank - x->rank);
            if ((s2 >= 0 && x->shape[s2] != one) != kept) break;
            axis--;
        }
        char size[160] = "";   /* the run's dims, a product as the kernel's divisors are named (cg_divisor) */
        size_t len = 0;
        for (int a = axis + 1; a <= end; a++) len += (size_t)cg_snprintf(size + len, sizeof size - len, "%sA.n[%d]", len ? " * " : "", dim0 + a);
        bool leading = axis < 0;
        cg_name d;
        if (!leading) cg_divisor(cg, size, d.s, sizeof d.s);
        if (kept && leading) cg_printf(&cg->body, "      o%d += rem * stride;\n", k);
        else if (kept) cg_printf(&cg->body, "      { nc_ix c; rem = nc_divmod(rem, %s, &c); o%d += c * stride; stride *= (nc_ix)(%s); }\n", d.s, k, size);
        else if (!leading) cg_printf(&cg->body, "      rem = nc_quot(rem, %s);\n", d.s);
    }
    cg_printf(&cg->body, "    }\n");
}


/* The members' code, one register each, then the stores of what leaves.
 * vec: in the vector loop, each member for two elements (lanes h = 0, 1
 * of the pair e, e + 1) and then rounded as a pair: one cvt rounds two
 * floats, and conversions are among the slowest instructions on sm_90, so
 * a chain of bf16 ops rounded one element at a time is bound by them. */
static void emit_members(cg_ctx *cg, ir_value first, ir_value last, uint32_t id, const ir_value *inputs, int nin,
                         const ir_value *outs, int nout, int out_slot0, bool vec)
{
    const ir_graph *g = cg->g;
    const char *lane = vec ? "[h]" : "";
    for (ir_value m = first; m <= last; m++) {
        if (cg->group[m] != id) continue;
        const ir_node *n = &g->nodes[m];
        char ops[3][64] = {"0.0f", "0.0f", "0.0f"}, step[64] = "";
        int slot = ir_step_slot(n);   /* the step: its integer input, in no float register */
        for (int i = 0; i < n->nargs && i < 3; i++)
            if (i != slot) operand_expr(cg, first, ir_args(g, n)[i], id, inputs, nin, lane, ops[i], sizeof ops[i]);
        if (slot >= 0) operand_expr(cg, first, ir_args(g, n)[slot], id, inputs, nin, lane, step, sizeof step);
        uint32_t t = ordinal(cg, first, m);
        if (vec)
            cg_printf(&cg->body, "    float t%u[2];\n#pragma unroll\n    for (int h = 0; h < 2; h++) {\n      const long long i = i0 + e + h; (void)i;\n"
                                 "      const float a = %s, b = %s, c = %s; (void)a; (void)b; (void)c;\n      t%u[h] = (",
                      t, ops[0], ops[1], ops[2], t);
        else
            cg_printf(&cg->body, "    float t%u;\n    { const float a = %s, b = %s, c = %s; (void)a; (void)b; (void)c;\n      t%u = %s(",
                      t, ops[0], ops[1], ops[2], t, cuda_round_fn(n->dtype));
        cuda_expand_expr(cg, n, n->op == OP_BROADCAST ? "a" : cuda_expr_of(cg, n), slot >= 0 ? step : NULL);
        cg_printf(&cg->body, "); }\n");
        if (vec && *cuda_round_pair_fn(n->dtype)) cg_printf(&cg->body, "    %s(t%u);\n", cuda_round_pair_fn(n->dtype), t);
    }
    for (int k = 0; k < nout; k++) {   /* a carried copy is its new value, rounded as the store converts it */
        ir_value v = cg->group[outs[k]] == id ? outs[k] : cg->carry_from[outs[k]];
        uint32_t t = ordinal(cg, first, v);
        if (vec) cg_printf(&cg->body, "    w%d[e] = t%u[0]; w%d[e + 1] = t%u[1];\n", out_slot0 + k, t, out_slot0 + k, t);
        else cg_printf(&cg->body, "    nc_st(y%d, i, t%u);\n", out_slot0 + k, t);
    }
}

/* Where input k's loaded value goes: a register of its own, or in the
 * vector loop its lane of the pair's array (emit_loads). */
static void load_into(cg_ctx *cg, int k, const char *type, bool vec)
{
    if (vec) cg_printf(&cg->body, "      in%d[h] = ", k);
    else cg_printf(&cg->body, "    const %s in%d = ", type, k);
}

/* Code loading in<k>, the element at index `at` of gather ins[k], from
 * its table (x<k>) at the row its index (the indices' input) picks. */
static void emit_gather_load(cg_ctx *cg, nrt_step *s, const ir_value *ins, int k, const char *at, bool vec)
{
    const ir_graph *g = cg->g;
    const ir_node *gn = &g->nodes[ins[k]];
    ir_value idx = ir_args(g, gn)[1];
    int q = 0;
    while (ins[q] != idx) q++;
    uint32_t nidx, count;
    if (!cuda_numel_dim(cg, &g->nodes[idx], &nidx) || !cuda_numel_dim(cg, gn, &count)) NC_BUG("gather sizes");
    int sn = cuda_dim_slot(s, nidx), sc = cuda_dim_slot(s, count), sr = cuda_dim_slot(s, g->nodes[ir_args(g, gn)[0]].shape[0]);
    char row[96];
    cg_name d;
    cg_snprintf(row, sizeof row, "A.n[%d] / (A.n[%d] > 0 ? A.n[%d] : 1)", sc, sn, sn);
    cg_divisor(cg, row, d.s, sizeof d.s);
    cg_printf(&cg->body, "    long long g%d;\n    { nc_ix col; const long long r = x%d[nc_divmod((nc_ix)%s, %s, &col)];\n"
                         "      g%d = r < 0 || r >= A.n[%d] ? -1 : r * %s.d + col; }\n",   /* d: the row's length, set up once */
              k, q, at, d.s, k, sr, d.s);
    load_into(cg, k, "float", vec);
    cg_printf(&cg->body, "g%d < 0 ? __int_as_float(0x7fc00000) : nc_ld(x%d, g%d);   // out of range: NaN\n", k, k, k);
}

/* How a loop loads each of its kernel's inputs. */
typedef enum load_kind {
    LOAD_NONE,       /* another loop's */
    LOAD_ELEMENT,    /* at the element's own index: eight at a time in the vector loop */
    LOAD_SCALAR,     /* a rank-0 value, a scalar broadcast's source */
    LOAD_SPREAD,     /* through a broadcast, at the source offset of the element */
    LOAD_THROUGH,    /* through movement links (plan_group_reads), from the value under them */
    LOAD_GATHER,     /* a gather's element: its row's index, then the row's element (NaN out of range) */
    LOAD_INDEX,      /* a gather's indices, read by its LOAD_GATHER */
} load_kind;

/* The type input k is loaded as (integers only as a random op's step). */
static const char *load_type(const cg_ctx *cg, const ir_value *ins, int k, const load_kind *how)
{
    return how[k] == LOAD_SCALAR && !in_registers(cg->g->nodes[ins[k]].dtype) ? "long long" : "float";
}

/* vec: the vector loop's pair of elements, each input into an array of
 * two (the members' lanes). The group's dims are A.n[dim0...]. */
static void emit_loads(cg_ctx *cg, nrt_step *s, const ir_value *ins, int nins, const load_kind *how, const ir_value *spread_via,
                       bool vec, int dim0)
{
    const ir_graph *g = cg->g;
    if (vec) {
        for (int k = 0; k < nins; k++)
            if (how[k] != LOAD_NONE && how[k] != LOAD_INDEX) cg_printf(&cg->body, "    %s in%d[2];\n", load_type(cg, ins, k, how), k);
        cg_printf(&cg->body, "#pragma unroll\n    for (int h = 0; h < 2; h++) {\n      const long long i = i0 + e + h; (void)i;\n");
    }
    for (int k = 0; k < nins; k++) {
        const char *type = load_type(cg, ins, k, how);
        if (how[k] == LOAD_ELEMENT && vec) cg_printf(&cg->body, "      in%d[h] = v%d[e + h];\n", k, k);
        else if (how[k] == LOAD_ELEMENT) cg_printf(&cg->body, "    const float in%d = nc_ld(x%d, i);\n", k, k);
        else if (how[k] == LOAD_SCALAR) {
            load_into(cg, k, type, vec);
            cg_printf(&cg->body, "nc_ld(x%d, 0);\n", k);
        } else if (how[k] == LOAD_SPREAD) {
            emit_spread_offset(cg, &g->nodes[spread_via[k]], &g->nodes[ins[k]], k, dim0);
            load_into(cg, k, type, vec);
            cg_printf(&cg->body, "nc_ld(x%d, o%d);\n", k, k);
        } else if (how[k] == LOAD_GATHER) {
            char at[16] = "i";
            if (spread_via && spread_via[k] != IR_NONE) {   /* the element of the broadcast's source first */
                emit_spread_offset(cg, &g->nodes[spread_via[k]], &g->nodes[ins[k]], k, dim0);
                cg_snprintf(at, sizeof at, "o%d", k);
            }
            emit_gather_load(cg, s, ins, k, at, vec);
        } else if (how[k] == LOAD_THROUGH) {
            char var[16];
            cg_snprintf(var, sizeof var, "o%d", k);
            cg_printf(&cg->body, "    nc_ix %s = (nc_ix)i;\n", var);
            cuda_emit_read_through(cg, s, ins[k], var);
            load_into(cg, k, type, vec);
            cg_printf(&cg->body, "nc_ld(x%d, %s);\n", k, var);
        }
    }
    if (vec) cg_printf(&cg->body, "    }\n");
}

/* One loop over count elements of a group: eight consecutive elements a
 * thread with 16-byte loads and stores when every buffer it loads or
 * stores at the element's index is 16-byte aligned (checked at run time),
 * then the rest one at a time. Broadcast sources are loaded one element at
 * a time in both. */
static void emit_loop(cg_ctx *cg, nrt_step *s, const char *count, ir_value first, ir_value last, uint32_t id, const ir_value *ins,
                      int nins, const load_kind *how, const ir_value *spread_via, const ir_value *outs, int nout,
                      int out_slot0)
{
    cg_bound(cg, count);   /* the loop's indices */
    cg_printf(&cg->body, "  {\n  long long nvec = 0;\n  if (((0ull");
    for (int k = 0; k < nins; k++)
        if (how[k] == LOAD_ELEMENT) cg_printf(&cg->body, " | (unsigned long long)x%d", k);
    for (int k = 0; k < nout; k++) cg_printf(&cg->body, " | (unsigned long long)y%d", out_slot0 + k);
    cg_printf(&cg->body, ") & 15) == 0) nvec = %s / 8;\n  NC_GRID_STRIDE(vi, nvec) {\n    const long long i0 = vi * 8;\n", count);
    for (int k = 0; k < nins; k++)
        if (how[k] == LOAD_ELEMENT) cg_printf(&cg->body, "    float v%d[8];\n    nc_ld8(x%d, i0, v%d);\n", k, k, k);
    for (int k = 0; k < nout; k++) cg_printf(&cg->body, "    float w%d[8];\n", out_slot0 + k);
    cg_printf(&cg->body, "#pragma unroll\n    for (int e = 0; e < 8; e += 2) {\n");
    /* the pairs' loads and members are a function of what the scalar loop
     * below writes (the same operands, registers and roundings), and their
     * side effects (sizes, divisors, bounds) the same calls: a cost-only
     * body has them once */
    if (!cg->cost_only) {
        emit_loads(cg, s, ins, nins, how, spread_via, true, 1);
        emit_members(cg, first, last, id, ins, nins, outs, nout, out_slot0, true);
    }
    cg_printf(&cg->body, "    }\n");
    for (int k = 0; k < nout; k++)   /* a member's bf16 value is rounded: its store packs the top halves */
        cg_printf(&cg->body, "    nc_st8%s(y%d, i0, w%d);\n", cg->group[outs[k]] == id && cg->g->nodes[outs[k]].dtype == NC_BF16 ? "_rounded" : "",
                  out_slot0 + k, out_slot0 + k);
    cg_printf(&cg->body, "  }\n  NC_GRID_STRIDE_FROM(i, nvec * 8, %s) {\n", count);
    emit_loads(cg, s, ins, nins, how, spread_via, false, 1);
    emit_members(cg, first, last, id, ins, nins, outs, nout, out_slot0, false);
    cg_printf(&cg->body, "  }\n  }\n");
}

/* the comment names every op the kernel implements */
static void comment_members(cg_ctx *cg, ir_value first, ir_value last, uint32_t id)
{
    for (ir_value m = first; m <= last; m++)
        if (cg->group[m] == id) cg_printf(&cg->cur_comment, " %%%u %s", m, nc_ops[cg->g->nodes[m].op].name);
}

/* Whether input k is the indices of a gather among the inputs. */
static bool gather_index(const cg_ctx *cg, const ir_value *ins, int nin, int k)
{
    for (int q = 0; q < nin; q++)
        if (gathered(cg, ins[q]) && ir_args(cg->g, &cg->g->nodes[ins[q]])[1] == ins[k]) return true;
    return false;
}

/* The buffer input a is loaded from: a gather's table, the value under a
 * read-through chain, or a itself. */
static ir_value input_buffer(const cg_ctx *cg, ir_value a)
{
    return gathered(cg, a) ? ir_args(cg->g, &cg->g->nodes[a])[0] : cuda_chain_root(cg, a);
}

/* Declares the kernel's pointer to buffer slot `slot`: x<k>, the group's
 * input k (const), or y<k>, its output k. */
static void decl_io(cg_ctx *cg, bool input, int k, int slot, nc_dtype t)
{
    char name[16];
    cg_snprintf(name, sizeof name, "%c%d", input ? 'x' : 'y', k);
    cuda_decl_ptr(cg, name, slot, t, input);
}

/* One group, one loop over its elements. */
static bool emit_single(cg_ctx *cg, uint32_t id, ir_value first, ir_value v)
{
    const ir_graph *g = cg->g;
    ir_value inputs[GROUP_IO_CAP], outs[GROUP_IO_CAP];
    int nin, nout;
    group_io(cg, id, first, v, inputs, &nin, outs, &nout);
    NC_ASSERT(nin + nout <= NRT_MAX_BUFS);
    if (nout == 0) return true;   /* nothing reads the group (dead code kept with --no-dce) */
    nrt_step *s = cuda_begin_kernel(cg, v, "_fused", NRT_GRID_ELEMENTS);
    uint32_t numel;
    if (!cuda_numel_dim(cg, &g->nodes[v], &numel)) return false;
    cuda_add_int(s, numel);
    ir_value spread_via[GROUP_IO_CAP];   /* the broadcast each input is loaded through, if any */
    load_kind how[GROUP_IO_CAP];
    bool any_spread = false;
    for (int k = 0; k < nin; k++) {
        spread_via[k] = spread_of(cg, first, v, id, inputs[k]);
        /* read through links even at rank 0 (a scalar group's slice is not at offset 0) */
        how[k] = gather_index(cg, inputs, nin, k)        ? LOAD_INDEX
                 : gathered(cg, inputs[k])             ? LOAD_GATHER
                 : cuda_reads_through(cg, inputs[k])   ? LOAD_THROUGH
                 : g->nodes[inputs[k]].rank == 0       ? LOAD_SCALAR
                 : spread_via[k] != IR_NONE            ? LOAD_SPREAD
                                                       : LOAD_ELEMENT;
        if (spread_via[k] != IR_NONE || (how[k] != LOAD_ELEMENT && how[k] != LOAD_SCALAR)) s->spread_reads |= (uint64_t)1 << k;
        any_spread |= spread_via[k] != IR_NONE && g->nodes[inputs[k]].rank > 0;
    }
    if (any_spread)
        for (int d = 0; d < g->nodes[v].rank; d++) cuda_add_int(s, g->nodes[v].shape[d]);
    for (int k = 0; k < nin; k++) {
        decl_io(cg, true, k, k, g->nodes[inputs[k]].dtype);
        cuda_add_buf(s, input_buffer(cg, inputs[k]));
    }
    for (int k = 0; k < nout; k++) {
        decl_io(cg, false, k, nin + k, g->nodes[outs[k]].dtype);
        cuda_add_buf(s, outs[k]);
    }
    emit_loop(cg, s, "A.n[0]", first, v, id, inputs, nin, how, spread_via, outs, nout, 0);
    cg_printf(&cg->cur_comment, "\n// fused:");
    comment_members(cg, first, v, id);
    cuda_end_kernel(cg);
    return true;
}

/* Several independent groups, one loop each over its own elements: every
 * thread runs the loops in turn. Inputs several loops read (the learning
 * rate, the clipping factor) are loaded once per element from one slot. */
static bool emit_sections(cg_ctx *cg, const uint32_t *ids, int n, ir_value v)
{
    const ir_graph *g = cg->g;
    ir_value first[NRT_MAX_SECTIONS], last[NRT_MAX_SECTIONS];
    ir_value ins[NRT_MAX_BUFS], outs[NRT_MAX_SECTIONS][GROUP_IO_CAP];
    int nins = 0, nout[NRT_MAX_SECTIONS], out_slot0[NRT_MAX_SECTIONS];
    uint8_t in_section[NRT_MAX_BUFS];
    uint32_t numel[NRT_MAX_SECTIONS];
    for (int j = 0; j < n; j++) {
        group_extent(cg, ids[j], &first[j], &last[j]);
        ir_value in[GROUP_IO_CAP];
        int nin;
        group_io(cg, ids[j], first[j], last[j], in, &nin, outs[j], &nout[j]);
        for (int k = 0; k < nin; k++) {
            int at = -1;
            for (int q = 0; q < nins; q++)
                if (ins[q] == in[k]) at = q;
            if (at >= 0) { in_section[at] = in_section[at] == j ? (uint8_t)j : NRT_SECTION_SHARED; continue; }
            NC_ASSERT(nins < NRT_MAX_BUFS);
            in_section[nins] = (uint8_t)j;
            ins[nins++] = in[k];
        }
        if (!cuda_numel_dim(cg, &g->nodes[last[j]], &numel[j])) return false;
    }
    nrt_step *s = cuda_begin_kernel(cg, v, "_fused", NRT_GRID_ELEMENTS);
    s->sections = (uint8_t)n;
    dim_expr total = g->dims[numel[0]];   /* sizes the grid: the loops' elements together */
    for (int j = 1; j < n; j++)
        if (dim_add(&total, &g->dims[numel[j]], &total) != DIM_OK) total = g->dims[numel[0]];
    cuda_add_int(s, ir_dim_intern((ir_graph *)g, &total));
    for (int j = 0; j < n; j++) cuda_add_int(s, numel[j]);
    for (int k = 0; k < nins; k++) {
        s->slot_section[s->nbufs] = in_section[k];
        cuda_add_buf(s, ins[k]);
    }
    int slot = nins;
    for (int j = 0; j < n; j++) {
        out_slot0[j] = slot - nins;
        for (int k = 0; k < nout[j]; k++, slot++) {
            s->slot_section[s->nbufs] = (uint8_t)j;
            cuda_add_buf(s, outs[j][k]);
        }
    }
    cg_printf(&cg->cur_comment, "\n// fused, %d loops:", n);
    for (int j = 0; j < n; j++) {
        ir_value in[GROUP_IO_CAP], unused[GROUP_IO_CAP];
        int nin, nu;
        group_io(cg, ids[j], first[j], last[j], in, &nin, unused, &nu);
        load_kind how[NRT_MAX_BUFS] = {LOAD_NONE};
        for (int k = 0; k < nin; k++)
            for (int q = 0; q < nins; q++)
                if (ins[q] == in[k]) how[q] = g->nodes[ins[q]].rank == 0 ? LOAD_SCALAR : LOAD_ELEMENT;
        /* Each loop names only its own buffers, in its own scope: in a batch
         * the arguments are read from device memory, and the AdamW update's
         * loops all named at the top kept some 60 pointers in registers
         * through every loop (240 registers a thread). */
        cg_printf(&cg->body, "  {\n");
        for (int q = 0; q < nins; q++)
            if (how[q] != LOAD_NONE) decl_io(cg, true, q, q, g->nodes[ins[q]].dtype);
        for (int k = 0; k < nout[j]; k++) decl_io(cg, false, out_slot0[j] + k, nins + out_slot0[j] + k, g->nodes[outs[j][k]].dtype);
        char count[32];
        cg_snprintf(count, sizeof count, "A.n[%d]", 1 + j);
        emit_loop(cg, s, count, first[j], last[j], ids[j], ins, nins, how, NULL, outs[j], nout[j], out_slot0[j]);
        cg_printf(&cg->body, "  }\n");
        cg_printf(&cg->cur_comment, "%s", j ? " |" : "");
        comment_members(cg, first[j], last[j], ids[j]);
    }
    cuda_end_kernel(cg);
    return true;
}

bool cuda_fuse_emit(cg_ctx *cg, ir_value v, bool *ok)
{
    *ok = true;
    if (!is_last(cg, v)) return false;
    uint32_t id = cg->group[v], leader = cg->kernel_of[id];
    if (cg->prologue_of[id] != IR_NONE) return true;   /* its reduction computes it */
    for (uint32_t k = id + 1; k <= cg->ngroups; k++)
        if (cg->kernel_of[k] == leader) return true;   /* a loop of a kernel emitted with its last group */
    uint32_t ids[NRT_MAX_SECTIONS];
    int n = 0;
    for (uint32_t k = leader; k <= id; k++)
        if (cg->kernel_of[k] == leader) ids[n++] = k;
    if (cg->epilogue_of[leader] != IR_NONE) {   /* the reduction's second kernel computes them, here */
        *ok = cuda_emit_reduce_total(cg, cg->epilogue_of[leader], ids, n);
    } else if (n == 1) {
        ir_value first, last;
        group_extent(cg, id, &first, &last);
        *ok = emit_single(cg, id, first, v);
    } else {
        *ok = emit_sections(cg, ids, n, v);
    }
    return true;
}

uint32_t cuda_fuse_prologue_group(const cg_ctx *cg, ir_value r)
{
    if (!cg->group || !cg->prologue_of) return 0;
    for (uint32_t id = 1; id <= cg->ngroups; id++)
        if (cg->prologue_of[id] == r) return id;
    return 0;
}

/* A group's inputs loaded through broadcasts (spread_via[k]), IR_NONE for
 * one loaded at the element's index or a scalar; how each is loaded. */
static bool prologue_loads(const cg_ctx *cg, uint32_t id, ir_value first, ir_value last, const ir_value *in, int nin,
                           ir_value *spread_via, load_kind *how)
{
    bool any = false;
    for (int k = 0; k < nin; k++) {
        bool scalar = cg->g->nodes[in[k]].rank == 0;
        spread_via[k] = scalar ? IR_NONE : spread_of(cg, first, last, id, in[k]);
        how[k] = scalar ? LOAD_SCALAR : spread_via[k] != IR_NONE ? LOAD_SPREAD : LOAD_ELEMENT;
        any |= how[k] == LOAD_SPREAD;
    }
    return any;
}

void cuda_fuse_prologue_inputs(cg_ctx *cg, uint32_t id, nrt_step *s)
{
    const ir_graph *g = cg->g;
    ir_value first, last, in[GROUP_IO_CAP], out[GROUP_IO_CAP], spread_via[GROUP_IO_CAP];
    load_kind how[GROUP_IO_CAP];
    int nin, nout;
    group_extent(cg, id, &first, &last);
    group_io(cg, id, first, last, in, &nin, out, &nout);
    bool spreads = prologue_loads(cg, id, first, last, in, nin, spread_via, how);
    for (int k = 0; k < nin; k++) {
        if (how[k] == LOAD_SPREAD) s->spread_reads |= (uint64_t)1 << s->nbufs;
        decl_io(cg, true, k, s->nbufs, g->nodes[in[k]].dtype);
        cuda_add_buf(s, in[k]);
    }
    cg->prologue_dim0[id] = s->nints;   /* the group's own dims, which its spread offsets divide by */
    for (int d = 0; spreads && d < g->nodes[last].rank; d++) cuda_add_int(s, g->nodes[last].shape[d]);
}

void cuda_fuse_prologue_value(cg_ctx *cg, uint32_t id)
{
    const ir_graph *g = cg->g;
    ir_value first, last, in[GROUP_IO_CAP], out[GROUP_IO_CAP], spread_via[GROUP_IO_CAP];
    int nin, nout;
    group_extent(cg, id, &first, &last);
    group_io(cg, id, first, last, in, &nin, out, &nout);
    load_kind how[GROUP_IO_CAP] = {LOAD_NONE};
    if (prologue_loads(cg, id, first, last, in, nin, spread_via, how)) {   /* the offsets stay below the group's count */
        char numel[CG_DIVISOR_LEN] = "nc_capped_product(";
        int dim0 = cg->prologue_dim0[id], rank = g->nodes[last].rank;
        for (int d = 0; d < rank; d++)
            cg_snprintf(numel + strlen(numel), sizeof numel - strlen(numel), "%sA.n[%d]%s", d ? ", " : "", dim0 + d, d == rank - 1 ? ")" : "");
        cg_bound(cg, numel);
    }
    emit_loads(cg, NULL, in, nin, how, spread_via, false, cg->prologue_dim0[id]);
    emit_members(cg, first, last, id, in, nin, out, 0, 0, false);
    cg_printf(&cg->body, "    pv = t%u;\n", ordinal(cg, first, out[0]));
}

ir_value cuda_fuse_prologue_stored(const cg_ctx *cg, uint32_t id)
{
    if (!cg->prologue_stored || !cg->prologue_stored[id]) return IR_NONE;
    ir_value first, last, in[GROUP_IO_CAP], out[GROUP_IO_CAP];
    int nin, nout;
    group_extent(cg, id, &first, &last);
    group_io(cg, id, first, last, in, &nin, out, &nout);
    return out[0];
}

int cuda_fuse_prologue_input(const cg_ctx *cg, uint32_t id, ir_value v)
{
    ir_value first, last, in[GROUP_IO_CAP], out[GROUP_IO_CAP];
    int nin, nout;
    group_extent(cg, id, &first, &last);
    group_io(cg, id, first, last, in, &nin, out, &nout);
    for (int k = 0; k < nin; k++)
        if (in[k] == v && cg->g->nodes[v].rank > 0) return k;
    return -1;
}

uint32_t cuda_fuse_epilogue_group(const cg_ctx *cg, ir_value r)
{
    if (!cg->group || !cg->epilogue_of) return 0;
    for (uint32_t id = 1; id <= cg->ngroups; id++)
        if (cg->epilogue_of[id] == r) return id;
    return 0;
}

void cuda_fuse_epilogue(cg_ctx *cg, nrt_step *s, const uint32_t *ids, int n, ir_value r, const char *acc, const char *index)
{
    const ir_graph *g = cg->g;
    ir_value first[NRT_MAX_SECTIONS], last[NRT_MAX_SECTIONS], ins[NRT_MAX_BUFS], outs[NRT_MAX_SECTIONS][GROUP_IO_CAP];
    int nins = 0, nout[NRT_MAX_SECTIONS];
    for (int j = 0; j < n; j++) {   /* every group's inputs, once each */
        ir_value in[GROUP_IO_CAP];
        int nin;
        group_extent(cg, ids[j], &first[j], &last[j]);
        group_io(cg, ids[j], first[j], last[j], in, &nin, outs[j], &nout[j]);
        for (int k = 0; k < nin; k++) {
            int q = 0;
            while (q < nins && ins[q] != in[k]) q++;
            if (q == nins) ins[nins++] = in[k];
        }
    }
    /* every load before any store: a result may take the memory of an operand that dies here */
    cg_printf(&cg->body, "      {   // groups of the result's shape, from the total\n    const long long i = %s;\n", index);
    for (int k = 0; k < nins; k++) {
        if (ins[k] == r) {   /* as stored: rounded to r's dtype */
            cg_printf(&cg->body, "    const float in%d = %s(%s);\n", k, cuda_round_fn(g->nodes[r].dtype), acc);
            continue;
        }
        decl_io(cg, true, k, s->nbufs, g->nodes[ins[k]].dtype);
        cuda_add_buf(s, ins[k]);
        cg_printf(&cg->body, "    const float in%d = nc_ld(x%d, %s);\n", k, k, g->nodes[ins[k]].rank == 0 ? "0" : "i");
    }
    cg_printf(&cg->cur_comment, "\n// and an epilogue:");
    for (int j = 0, slot0 = 0; j < n; slot0 += nout[j], j++) {
        for (int k = 0; k < nout[j]; k++) {
            decl_io(cg, false, slot0 + k, s->nbufs, g->nodes[outs[j][k]].dtype);
            cuda_add_buf(s, outs[j][k]);
        }
        cg_printf(&cg->body, "    {\n");
        emit_members(cg, first[j], last[j], ids[j], ins, nins, outs[j], nout[j], slot0, false);
        cg_printf(&cg->body, "    }\n");
        cg_printf(&cg->cur_comment, "%s", j ? " |" : "");
        comment_members(cg, first[j], last[j], ids[j]);
    }
    cg_printf(&cg->body, "      }\n");
}
