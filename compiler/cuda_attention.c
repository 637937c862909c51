/* cuda_attention.c - attention on tensor cores, flash style: a block of four
 * warps takes 64 rows (queries, or keys for the key gradients); each warp
 * owns 16 of them and multiplies with mma.sync m16n8k16 (f16/bf16 in, f32
 * accumulators), tiles of 64 of the other side pass through shared memory,
 * and the softmax is online, so no [T, S] matrix is ever stored.
 *
 * For f16/bf16 operands with head sizes D = E of 64 or 128; other shapes
 * use cuda_emit.c's scalar kernels. The fragment layouts are PTX's for
 * m16n8k16 (lane = 4 gid + tig): an A register holds two consecutive
 * columns of row gid or gid + 8, a B register two consecutive rows (k) of
 * column gid, an accumulator columns 2 tig, 2 tig + 1 of rows gid, gid + 8.
 * So a score tile's accumulators are, packed in pairs, the A operand of the
 * next product (P V, dS K) without a trip through memory. Probabilities and
 * score gradients are rounded to the operands' dtype for that product, as
 * flash attention does; everything else stays f32.
 *
 * Five kernels from two templates: forward, lse and dq walk key tiles for a
 * query tile (dq with dO, rebuilding P from lse); dk and dv walk query tiles
 * for a key tile, and for heads of 64 one kernel computes both (P once for
 * dV += P^T dO and dS = P (dP - delta) for dK += dS^T Q, as flash attention's
 * backward does). Causal masks skip whole tiles. tests/unit/cuda_host_shim.hpp
 * runs them on the host, mma.sync, ldmatrix and cp.async included, lane by
 * lane.
 *
 * The kernels are bound by instructions issued more than by bytes: per tile
 * of 64 x 64 scores a warp of GPT-2's forward issues 413 instructions around
 * its 64 mma.sync (sm_90 SASS; 1606 with 32-bit loads, a transposed copy and
 * expf), the q gradient's 414 around 96, the key and value gradients' 572
 * around 128 (bench/sass_loops.py counts them). Heads of 64 copy
 * the next tile while they multiply this one (two buffers); the forward
 * and dq, at 168 registers, run three blocks a multiprocessor.
 *
 * The kernels also carry a Hopper path, compiled only into sm_90a images
 * (NC_WGMMA, the prelude): the block's 4 warps are one warpgroup, and each
 * product of its 64 rows with a tile is wgmma m64n64k16 (m64n128k16 for P V
 * at heads of 128), A from the same register fragments, B from the tile by
 * a shared-memory descriptor, the results in the same accumulators; the
 * tiles lose their padding for the 128-byte swizzle wgmma reads. A step's
 * products are issued together and waited for once. At heads of 64 the
 * loops issue 15-17% fewer instructions (369, 355 and 471 a tile;
 * bench/sass_loops.py --arch sm_90a), at 128 23-39%: 4 instructions a
 * product of 64 columns instead of 32 mma.sync and 16 ldmatrix a warp.
 * Unmeasured on a GPU so far, the path is opt-in (--target sm_90a). The host
 * shim emulates wgmma; tests/gpu/test_wgmma.c checks the layouts alone.
 *
 * q, k and v are usually slices of one matmul's result [B, T, 3C], split
 * into heads and transposed to [B, H, T, D]. cuda_attention_plan lets the
 * kernels read such an operand where it lies (row (b, t) of the matmul's
 * result, columns c0 + h D ...), so the transposed copies are never made:
 * every matrix access goes through a per-operand base and row stride. The
 * gradients' kernels write dq, dk and dv into the columns of the gradient
 * of that result, and when a bias's gradient sums its rows they add up the
 * columns of each tile as they store it (plan_gradient_colsums). */
#include "cuda_emit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { TILE = 64 };

typedef struct attn_shape {
    int64_t D, E;
    const char *type, *mma, *pack;   /* storage type, nc_mma_* and nc_pack_* of the dtype */
    const char *wgmma;               /* nc_wgmma_* of the dtype (NULL: D and E differ) */
    bool causal;
    int lens;                        /* with key lengths: the int slot of the heads a length (-1: none) */
    char scale[48], scale_log2[48];
    bool prescale;                   /* scale <= 0: scores are scaled before their max (max(s) scale is not max(s scale)) */
    bool with_lse;                   /* the forward kernel also writes the log-sum-exp */
    bool computes_delta;             /* the q gradient's kernel computes rowsum(dO * O) and writes it */
    ir_value dv;                     /* the key gradient's kernel also computes this value gradient (IR_NONE: no) */
} attn_shape;

static bool tiled_shape_of(const ir_graph *g, ir_value v, attn_shape *a)
{
    const ir_node *n = &g->nodes[v], *q = &g->nodes[ir_args(g, n)[0]], *k = &g->nodes[ir_args(g, n)[1]];
    if (q->dtype != NC_BF16 && q->dtype != NC_F16) return false;
    if (!dim_is_const(&g->dims[q->shape[q->rank - 1]], &a->D) || (a->D != 64 && a->D != 128)) return false;
    a->E = a->D;
    a->dv = IR_NONE;
    if (n->op != OP_ATTENTION_LSE) {
        const ir_node *vv = &g->nodes[ir_args(g, n)[2]];
        if (!dim_is_const(&g->dims[vv->shape[vv->rank - 1]], &a->E) || a->E != a->D || vv->dtype != q->dtype) return false;
    }
    if (k->dtype != q->dtype) return false;
    for (int i = 3; n->op == OP_ATTENTION_GRAD && i < 4; i++)
        if (g->nodes[ir_args(g, n)[i]].dtype != q->dtype) return false;
    bool bf = q->dtype == NC_BF16;
    a->type = bf ? "nc_bf16" : "nc_f16";
    a->mma = bf ? "nc_mma_bf16" : "nc_mma_f16";
    a->pack = bf ? "nc_pack_bf16" : "nc_pack_f16";
    a->wgmma = a->D == a->E ? (bf ? "nc_wgmma_bf16" : "nc_wgmma_f16") : NULL;   /* D is 64 or 128 */
    a->causal = n->attr.causal;
    a->lens = -1;
    double scale = n->attr.f != 0 ? n->attr.f : 1.0 / sqrt((double)a->D);
    cuda_float_literal(a->scale, scale);
    cuda_float_literal(a->scale_log2, scale * 1.4426950408889634);
    a->prescale = !(scale > 0);
    return true;
}

static bool tiled_shape(cg_ctx *cg, ir_value v, attn_shape *a) { return tiled_shape_of(cg->g, v, a); }

static bool is_attention(nc_op op) { return op == OP_ATTENTION || op == OP_ATTENTION_LSE || op == OP_ATTENTION_GRAD; }

/* v's readers in node order, each once: the next after *k of its
 * cg->reader_list entries (which hold a reader once per slot), IR_NONE
 * past the last. */
static ir_value next_reader(const cg_ctx *cg, ir_value v, uint32_t *k)
{
    const cuda_reader_index *ri = &cg->reader_list;
    uint32_t at = ri->start[v] + *k, end = ri->start[v + 1];
    if (at >= end) return IR_NONE;
    ir_value u = ri->at[at];
    while (at < end && ri->at[at] == u) at++;
    *k = at - ri->start[v];
    return u;
}

/* Whether every reader of w is a tensor-core attention step reading it as
 * q, k, v or (a gradient) dO, or a part of a delta a q gradient's kernel
 * computes (in_delta). */
static bool read_by_tiled_attention_only(const cg_ctx *cg, ir_value w, const bool *in_delta)
{
    const ir_graph *g = cg->g;
    uint32_t seen = 0, k = 0;
    for (ir_value u; (u = next_reader(cg, w, &k)) != IR_NONE;)
        for (int i = 0; i < g->nodes[u].nargs; i++) {
            if (ir_args(g, &g->nodes[u])[i] != w) continue;
            seen++;
            if (in_delta[u]) continue;
            attn_shape a;
            int last = g->nodes[u].op == OP_ATTENTION_GRAD ? 3 : 2;
            if (!is_attention(g->nodes[u].op) || i > last || !tiled_shape_of(g, u, &a)) return false;
        }
    return seen == cg->readers[w] && seen > 0;
}

/* A constant multiple of 8 elements: 16 bytes of f16/bf16, a cp.async. */
static bool constant_of_8(const ir_graph *g, uint32_t dim)
{
    int64_t v;
    return dim_is_const(&g->dims[dim], &v) && v % 8 == 0;
}

/* w = transpose(reshape(slice(x, last axis, c0), [B, T, H, D]), [0, 2, 1, 3])
 * (or without the slice): sets *root = x and *col = c0's dim id (UINT32_MAX:
 * column 0). The row stride and column must be constant multiples of 8:
 * the kernels copy rows 16 bytes at a time. */
static bool head_interleaved(const cg_ctx *cg, ir_value w, ir_value *root, uint32_t *col)
{
    const ir_graph *g = cg->g;
    const uint32_t *users = cg->readers;
    const ir_node *t = &g->nodes[w];
    static const int8_t perm[4] = {0, 2, 1, 3};
    if (t->op != OP_TRANSPOSE || t->rank != 4 || memcmp(t->attr.axes, perm, sizeof perm) != 0) return false;
    ir_value r = ir_args(g, t)[0];
    const ir_node *rn = &g->nodes[r];
    if (rn->op != OP_RESHAPE || users[r] != 1 || cg->escapes[r] || rn->rank != 4) return false;
    ir_value x = ir_args(g, rn)[0];
    *col = UINT32_MAX;
    if (g->nodes[x].op == OP_SLICE && users[x] == 1 && !cg->escapes[x] && g->nodes[x].attr.axis == 2) {
        *col = g->nodes[x].attr.lo;
        x = ir_args(g, &g->nodes[x])[0];
    }
    const ir_node *xn = &g->nodes[x], *head_src = &g->nodes[ir_args(g, rn)[0]];
    if (xn->rank != 3 || head_src->rank != 3) return false;
    /* [B, T, H*D] split into [B, T, H, D]: the same B and T */
    if (rn->shape[0] != head_src->shape[0] || rn->shape[1] != head_src->shape[1]) return false;
    if (xn->shape[0] != rn->shape[0] || xn->shape[1] != rn->shape[1]) return false;
    int64_t h, d, width;
    if (!dim_is_const(&g->dims[rn->shape[2]], &h) || !dim_is_const(&g->dims[rn->shape[3]], &d) ||
        !dim_is_const(&g->dims[head_src->shape[2]], &width) || h * d != width)
        return false;
    if (cg->group[x] == 0 && cg->inlined[x]) return false;   /* x itself must be in memory */
    *root = x;
    return constant_of_8(g, xn->shape[2]) && (*col == UINT32_MAX || constant_of_8(g, *col));
}

/* Whether every reader of v is an attention gradient (on tensor cores). */
static bool read_by_tiled_gradients_only(const cg_ctx *cg, ir_value v)
{
    const ir_graph *g = cg->g;
    uint32_t seen = 0, k = 0;
    for (ir_value u; (u = next_reader(cg, v, &k)) != IR_NONE;)
        for (int i = 0; i < g->nodes[u].nargs; i++) {
            if (ir_args(g, &g->nodes[u])[i] != v) continue;
            attn_shape a;
            if (g->nodes[u].op != OP_ATTENTION_GRAD || !tiled_shape_of(g, u, &a)) return false;
            seen++;
        }
    return seen == cg->readers[v] && seen > 0;
}

/* An attention node's key lengths (ir_keyword_operand_slot), IR_NONE if none. */
static ir_value lengths_of(const ir_graph *g, const ir_node *n)
{
    int slot = ir_keyword_operand_slot(n);
    return slot >= 0 ? ir_args(g, n)[slot] : IR_NONE;
}

static bool same_attention(const ir_graph *g, const ir_node *a, const ir_node *b)
{
    for (int i = 0; i < 3; i++)
        if (ir_args(g, a)[i] != ir_args(g, b)[i]) return false;
    return a->attr.causal == b->attr.causal && a->attr.f == b->attr.f && lengths_of(g, a) == lengths_of(g, b);
}

/* x = cast(src) to f32, read once: src, else IR_NONE. */
static ir_value widened(const cg_ctx *cg, ir_value x)
{
    const ir_node *n = &cg->g->nodes[x];
    return n->op == OP_CAST && n->dtype == NC_F32 && cg->readers[x] == 1 ? ir_args(cg->g, n)[0] : IR_NONE;
}

/* delta = sum(cast(dO) * cast(O), last axis, keepdim), O the forward output
 * of u's attention, read only by u and the other gradients of that
 * attention after it: the forward output whose rows u's kernel reads, and
 * the four nodes marked in in_delta; else IR_NONE. */
static ir_value delta_source(const cg_ctx *cg, ir_value u, bool *in_delta)
{
    const ir_graph *g = cg->g;
    const ir_node *gu = &g->nodes[u];
    ir_value d = ir_args(g, gu)[5], dout = ir_args(g, gu)[3];
    const ir_node *dn = &g->nodes[d];
    if (dn->op != OP_SUM || dn->dtype != NC_F32 || !dn->attr.keepdim || dn->attr.naxes != 1 || dn->attr.axes[0] != dn->rank - 1 ||
        cg->escapes[d] || cg->group[d])
        return IR_NONE;
    uint32_t k = 0;
    for (ir_value r; (r = next_reader(cg, d, &k)) != IR_NONE;)   /* its readers: u first, then gradients of the same attention */
        for (int i = 0; i < g->nodes[r].nargs; i++)
            if (ir_args(g, &g->nodes[r])[i] == d &&
                (r < u || g->nodes[r].op != OP_ATTENTION_GRAD || i != 5 || !same_attention(g, &g->nodes[r], gu) ||
                 ir_args(g, &g->nodes[r])[3] != dout))
                return IR_NONE;
    ir_value m = ir_args(g, dn)[0];
    const ir_node *mn = &g->nodes[m];
    if (mn->op != OP_MUL || cg->readers[m] != 1 || cg->escapes[m]) return IR_NONE;
    ir_value a = ir_args(g, mn)[0], b = ir_args(g, mn)[1];
    ir_value sa = widened(cg, a), sb = widened(cg, b);
    if (sa == IR_NONE || sb == IR_NONE || cg->escapes[a] || cg->escapes[b]) return IR_NONE;
    ir_value o = sa == dout ? sb : sb == dout ? sa : IR_NONE;
    if (o == IR_NONE || g->nodes[o].op != OP_ATTENTION || !same_attention(g, &g->nodes[o], gu)) return IR_NONE;
    in_delta[d] = in_delta[m] = in_delta[a] = in_delta[b] = true;
    return o;
}

/* The q gradient's kernel computes the delta the key gradients read:
 * no kernel for rowsum(dO * O), and dO is read by attention kernels only. */
static void plan_delta(cg_ctx *cg, bool *in_delta)
{
    const ir_graph *g = cg->g;
    cg->delta_from = cuda_no_values(g);
    for (ir_value u = 0; u < g->nnodes; u++) {
        attn_shape a;
        const ir_node *n = &g->nodes[u];
        if (n->op != OP_ATTENTION_GRAD || n->attr.axis != 0 || !tiled_shape_of(g, u, &a)) continue;
        cg->delta_from[u] = delta_source(cg, u, in_delta);
    }
    for (ir_value v = 0; v < g->nnodes; v++)
        if (in_delta[v]) cg->inlined[v] = true, cuda_fuse_set_group(cg, v, 0);
}

/* The backward pass's attention_lse recomputes what the forward kernel
 * already had: the forward kernel of the same q, k (and mask, scale) writes
 * it. */
static void plan_lse(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->lse_with = cuda_no_values(g);
    for (ir_value u = 0; u < g->nnodes; u++) {
        const ir_node *l = &g->nodes[u];
        attn_shape a;
        if (l->op != OP_ATTENTION_LSE || cg->escapes[u] || !tiled_shape_of(g, u, &a) || !read_by_tiled_gradients_only(cg, u))
            continue;
        for (ir_value f = 0; f < u; f++) {
            const ir_node *fn = &g->nodes[f];
            if (fn->op != OP_ATTENTION || cg->lse_with[f] != IR_NONE || !tiled_shape_of(g, f, &a) ||
                ir_args(g, fn)[0] != ir_args(g, l)[0] || ir_args(g, fn)[1] != ir_args(g, l)[1] ||
                fn->attr.causal != l->attr.causal || fn->attr.f != l->attr.f || lengths_of(g, fn) != lengths_of(g, l))
                continue;
            cg->lse_with[f] = u;
            cg->inlined[u] = true;
            break;
        }
    }
}

static ir_value sole_reader(const cg_ctx *cg, ir_value v) { return cg->readers[v] == 1 ? cg->reader[v] : IR_NONE; }

/* Part i of concat c, reshape(transpose(x, [0, 2, 1, 3])) of a tensor-core
 * attention gradient x read by nothing else: x, else IR_NONE. */
static ir_value gradient_part(const cg_ctx *cg, ir_value c, int i)
{
    const ir_graph *g = cg->g;
    static const int8_t perm[4] = {0, 2, 1, 3};
    ir_value r = ir_args(g, &g->nodes[c])[i];
    if (g->nodes[r].op != OP_RESHAPE || sole_reader(cg, r) != c || cg->escapes[r]) return IR_NONE;
    ir_value t = ir_args(g, &g->nodes[r])[0];
    const ir_node *tn = &g->nodes[t];
    if (tn->op != OP_TRANSPOSE || tn->rank != 4 || memcmp(tn->attr.axes, perm, sizeof perm) != 0 || sole_reader(cg, t) != r ||
        cg->escapes[t])
        return IR_NONE;
    ir_value x = ir_args(g, tn)[0];
    attn_shape a;
    if (g->nodes[x].op != OP_ATTENTION_GRAD || !tiled_shape_of(g, x, &a) || sole_reader(cg, x) != t || cg->escapes[x] ||
        cg->out_as[x] != IR_NONE)
        return IR_NONE;
    return x;
}

/* The gradients of q, k and v joined as the gradient of the matmul result
 * they were sliced from, concat(reshape(transpose(dq)), ...): each gradient
 * kernel writes its columns of the concat, so neither the transposes nor
 * the concat need a kernel. */
static void plan_gradient_concat(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    for (ir_value c = 0; c < g->nnodes; c++) {
        const ir_node *cn = &g->nodes[c];
        int64_t width;
        if (cn->op != OP_CONCAT || cn->rank != 3 || cn->attr.axis != 2 || cn->nargs > 8 || cg->escapes[c] || cg->group[c] ||
            cg->inlined[c] || !dim_is_const(&g->dims[cn->shape[2]], &width))
            continue;
        ir_value parts[8];
        bool all = true;
        for (int i = 0; i < cn->nargs && all; i++) all = (parts[i] = gradient_part(cg, c, i)) != IR_NONE;
        if (!all) continue;
        int64_t col = 0;
        for (int i = 0; i < cn->nargs; i++) {
            ir_value r = ir_args(g, cn)[i], t = ir_args(g, &g->nodes[r])[0];
            cg->out_as[parts[i]] = c, cg->out_col[parts[i]] = col;
            cg->inlined[r] = cg->inlined[t] = true;
            int64_t w = 0;
            dim_is_const(&g->dims[g->nodes[r].shape[2]], &w);
            col += w;
        }
        cg->inlined[c] = true;   /* written by the gradient kernels */
    }
}

/* out = attention(...) read by one t = transpose(out, [0, 2, 1, 3]) (and by
 * the q gradient's delta): the kernel writes t, each row (b, t) holding the
 * heads side by side, so t needs no kernel and out no memory. */
static void plan_output(cg_ctx *cg, const bool *in_delta)
{
    const ir_graph *g = cg->g;
    static const int8_t perm[4] = {0, 2, 1, 3};
    cg->out_as = cuda_no_values(g);
    cg->out_col = nc_xcalloc(g->nnodes + 1, sizeof *cg->out_col);
    for (ir_value f = 0; f < g->nnodes; f++) {
        attn_shape a;
        if (g->nodes[f].op != OP_ATTENTION || cg->escapes[f] || g->nodes[f].rank != 4 || !tiled_shape_of(g, f, &a)) continue;
        ir_value t = IR_NONE;
        bool others = false;
        uint32_t k = 0;
        for (ir_value u; !others && (u = next_reader(cg, f, &k)) != IR_NONE;)
            for (int i = 0; i < g->nodes[u].nargs; i++) {
                if (ir_args(g, &g->nodes[u])[i] != f || in_delta[u]) continue;
                const ir_node *un = &g->nodes[u];
                bool transposes = un->op == OP_TRANSPOSE && memcmp(un->attr.axes, perm, sizeof perm) == 0 && t == IR_NONE &&
                                  !cg->escapes[u] && !cg->group[u] && !cg->inlined[u] && !cg->absorbed[u];
                if (transposes) t = u;
                else others = true;
            }
        if (others || t == IR_NONE) continue;
        cg->out_as[f] = t;
        cg->inlined[t] = true;   /* no kernel: the attention step writes it */
    }
    plan_gradient_concat(cg);
}

/* The key and value gradients of one attention, heads of 64: the key
 * gradient's kernel computes both (cg->dv_with); the value gradient has no
 * kernel of its own. */
static void plan_key_value_pairs(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->dv_with = cuda_no_values(g);
    for (ir_value k = 0; k < g->nnodes; k++) {
        const ir_node *kn = &g->nodes[k];
        attn_shape a;
        if (kn->op != OP_ATTENTION_GRAD || kn->attr.axis != 1 || !tiled_shape_of(g, k, &a) || a.D != 64 || a.E != 64) continue;
        for (ir_value v = k + 1; v < g->nnodes; v++) {
            const ir_node *vn = &g->nodes[v];
            if (vn->op != OP_ATTENTION_GRAD || vn->attr.axis != 2 || vn->nargs != kn->nargs || vn->attr.causal != kn->attr.causal ||
                vn->attr.f != kn->attr.f || memcmp(ir_args(g, vn), ir_args(g, kn), kn->nargs * sizeof(ir_value)) != 0 || cg->inlined[v])
                continue;
            cg->dv_with[k] = v;
            cg->inlined[v] = true;   /* computed by k's kernel */
            break;
        }
    }
}

/* sum(c, axes 0 and 1) of a [B, T, W] concat whose every part a tiled
 * gradient kernel writes (plan_gradient_concat), T constant: the kernels
 * add up each tile's columns as they store them (a bias's gradient: no
 * pass over the concat). */
static void plan_gradient_colsums(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->attn_colsum = cuda_no_values(g);
    for (ir_value s = 0; s < g->nnodes; s++) {
        const ir_node *sn = &g->nodes[s];
        if (sn->op != OP_SUM || !dtype_is_float(sn->dtype) || sn->rank != 1 || sn->attr.naxes != 2 || sn->attr.axes[0] != 0 ||
            sn->attr.axes[1] != 1 || cg->group[s] || cg->inlined[s])
            continue;
        ir_value c = ir_args(g, sn)[0];
        const ir_node *cn = &g->nodes[c];
        int64_t T;
        if (cn->op != OP_CONCAT || cn->rank != 3 || cn->dtype != sn->dtype || !cg->inlined[c] ||
            !dim_is_const(&g->dims[cn->shape[1]], &T) || T < 1)
            continue;
        bool all = true;
        for (int i = 0; i < cn->nargs && all; i++) {   /* reshape(transpose(x)), x written into c */
            const ir_node *r = &g->nodes[ir_args(g, cn)[i]];
            const ir_node *t = r->op == OP_RESHAPE ? &g->nodes[ir_args(g, r)[0]] : NULL;
            ir_value x = t && t->op == OP_TRANSPOSE ? ir_args(g, t)[0] : IR_NONE;
            all = x != IR_NONE && g->nodes[x].op == OP_ATTENTION_GRAD && cg->out_as[x] == c;
        }
        if (all) cg->attn_colsum[s] = c;
    }
}

void cuda_attention_plan(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->attn_root = cuda_no_values(g);
    cg->attn_col = nc_xcalloc(g->nnodes + 1, sizeof *cg->attn_col);
    bool *in_delta = nc_xcalloc(g->nnodes + 1, sizeof *in_delta);
    plan_delta(cg, in_delta);
    for (ir_value w = 0; w < g->nnodes; w++) {
        ir_value root;
        uint32_t col;
        if (cg->escapes[w] || cg->group[w] || !head_interleaved(cg, w, &root, &col) ||
            !read_by_tiled_attention_only(cg, w, in_delta))
            continue;
        cg->attn_root[w] = root, cg->attn_col[w] = col;
        /* the transpose, its reshape and slice: no kernels */
        for (ir_value link = w; link != root; link = ir_args(g, &g->nodes[link])[0]) cg->inlined[link] = true;
    }
    plan_lse(cg);
    plan_output(cg, in_delta);
    plan_key_value_pairs(cg);
    plan_gradient_colsums(cg);
    free(in_delta);
}

/* The step: ints = heads (the product of the leading dims), the tiled
 * length, T, S; one 128-thread block per 64 rows of each head. */
static nrt_step *begin_tiled(cg_ctx *cg, ir_value v, bool by_key)
{
    const ir_graph *g = cg->g;
    const ir_node *n = &g->nodes[v], *q = &g->nodes[ir_args(g, n)[0]], *k = &g->nodes[ir_args(g, n)[1]];
    ir_node heads = *q;
    heads.rank = (uint8_t)(q->rank - 2);
    uint32_t nheads;
    if (!cuda_numel_dim(cg, &heads, &nheads)) return NULL;
    bool with_dv = cg->dv_with && cg->dv_with[v] != IR_NONE;   /* "_kv": inspect.c counts the value gradient too */
    nrt_step *s = cuda_begin_kernel(cg, v, with_dv ? "_tc_kv" : "_tc", NRT_GRID_TILES);
    cuda_add_int(s, nheads);
    cuda_add_int(s, by_key ? k->shape[k->rank - 2] : q->shape[q->rank - 2]);
    cuda_add_int(s, q->shape[q->rank - 2]);
    cuda_add_int(s, k->shape[k->rank - 2]);
    static const char *const names[] = {"q", "k", "v", "g", "lse", "delta"};
    bool computes_delta = cg->delta_from && cg->delta_from[v] != IR_NONE;
    int lens = ir_keyword_operand_slot(n);
    for (int i = 0; i < n->nargs; i++) {
        ir_value a = ir_args(g, n)[i];
        bool in_place = i < 4 && i != lens && cg->attn_root && cg->attn_root[a] != IR_NONE;
        cuda_add_buf(s, in_place ? cg->attn_root[a] : a);
        cuda_decl_ptr(cg, i == lens ? "lens" : names[i], i, g->nodes[a].dtype, !(computes_delta && i == 5));   /* delta: written */
    }
    cuda_add_buf(s, cg->out_as && cg->out_as[v] != IR_NONE ? cg->out_as[v] : v);
    cuda_decl_ptr(cg, "out", n->nargs, n->dtype, false);
    if (cg->lse_with && cg->lse_with[v] != IR_NONE) {
        cuda_add_buf(s, cg->lse_with[v]);
        cuda_decl_ptr(cg, "lse_out", n->nargs + 1, g->nodes[cg->lse_with[v]].dtype, false);
    }
    if (computes_delta) {
        ir_value o = cg->delta_from[v];
        cuda_add_buf(s, cg->out_as && cg->out_as[o] != IR_NONE ? cg->out_as[o] : o);
        cuda_decl_ptr(cg, "fwd_out", n->nargs + 1, g->nodes[cg->delta_from[v]].dtype, true);
    }
    ir_value dv = cg->dv_with ? cg->dv_with[v] : IR_NONE;
    if (dv != IR_NONE) {   /* the value gradient, written along */
        cuda_decl_ptr(cg, "out_v", s->nbufs, g->nodes[dv].dtype, false);
        cuda_add_buf(s, cg->out_as && cg->out_as[dv] != IR_NONE ? cg->out_as[dv] : dv);
    }
    return s;
}

static int int_slot(nrt_step *s, uint32_t dim)
{
    for (int k = 0; k < s->nints; k++)
        if (s->ints[k] == dim) return k;
    cuda_add_int(s, dim);
    return s->nints - 1;
}

/* name_base and name_rs for result r of W columns a head, len rows: its
 * own [heads, len, W], or rows of out_as[r] with the heads side by side
 * from column out_col[r]. */
static void emit_result_layout(cg_ctx *cg, nrt_step *s, ir_value r, const char *name, const char *len, int64_t W)
{
    const ir_graph *g = cg->g;
    if (!cg->out_as || cg->out_as[r] == IR_NONE) {
        cg_printf(&cg->body, "  const long long %s_base = head * %s * %lld, %s_rs = %lld;\n", name, len, (long long)W, name, (long long)W);
        return;
    }
    const ir_node *dst = &g->nodes[cg->out_as[r]];
    int heads = int_slot(s, g->nodes[r].shape[1]);
    int64_t rs = 1;
    for (int k = 2; k < dst->rank; k++) {   /* [B, T, W] or [B, T, H, D]: the row's length */
        int64_t d = 1;
        dim_is_const(&g->dims[dst->shape[k]], &d);
        rs *= d;
    }
    cg_printf(&cg->body, "  const long long %s_base = %lld + (head / A.n[%d]) * %s * %lld + (head %% A.n[%d]) * %lld, %s_rs = %lld;\n", name,
              (long long)cg->out_col[r], heads, len, (long long)rs, heads, (long long)W, name, (long long)rs);
}

/* p_base and p_rs for each matrix operand: where this block's head starts
 * and the distance between its rows. Canonical [heads, len, W]: head * len *
 * W and W; read in place from [B, len, RS] rows holding H heads of W from
 * column c0: c0 + b len RS + h W and RS. */
static void emit_layouts(cg_ctx *cg, nrt_step *s, ir_value v, const attn_shape *a)
{
    const ir_graph *g = cg->g;
    const ir_node *n = &g->nodes[v];
    static const char *const names[] = {"q", "k", "v", "g"};
    int lens = ir_keyword_operand_slot(n);
    for (int i = 0; i < (lens >= 0 ? lens : n->nargs) && i < 4; i++) {
        ir_value x = ir_args(g, n)[i];
        const char *len = i == 0 || i == 3 ? "T" : "S";
        long long W = i == 0 || i == 1 ? a->D : a->E;
        if (cg->attn_root && cg->attn_root[x] != IR_NONE) {
            const ir_node *root = &g->nodes[cg->attn_root[x]];
            int heads = int_slot(s, g->nodes[x].shape[1]), rs = int_slot(s, root->shape[2]);
            char c0[16] = "0";
            if (cg->attn_col[x] != UINT32_MAX) cg_snprintf(c0, sizeof c0, "A.n[%d]", int_slot(s, cg->attn_col[x]));
            cg_printf(&cg->body, "  const long long %s_base = %s + (head / A.n[%d]) * %s * A.n[%d] + (head %% A.n[%d]) * %lld, %s_rs = A.n[%d];\n",
                      names[i], c0, heads, len, rs, heads, W, names[i], rs);
        } else {
            cg_printf(&cg->body, "  const long long %s_base = head * %s * %lld, %s_rs = %lld;\n", names[i], len, W, names[i], W);
        }
    }
    /* the result, and the forward output a q gradient's kernel reads */
    bool by_key = n->op == OP_ATTENTION_GRAD && n->attr.axis > 0;
    bool of_qk = n->op == OP_ATTENTION_GRAD && n->attr.axis < 2;   /* dq, dk: D columns a head; dv and out: E */
    emit_result_layout(cg, s, v, "out", by_key ? "S" : "T", of_qk ? a->D : a->E);
    if (cg->delta_from && cg->delta_from[v] != IR_NONE) emit_result_layout(cg, s, cg->delta_from[v], "fwd_out", "T", a->E);
    if (a->dv != IR_NONE) emit_result_layout(cg, s, a->dv, "out_v", "S", a->E);
}

/* Common prologue: which head and rows this block has, which rows this thread's
 * accumulators hold (r0 = gid, r1 = gid + 8 of the warp's 16). */
static void emit_prologue(cg_buf *b, const attn_shape *a, const char *rows_len)
{
    /* Causal, the last query tiles see the most keys (the first key tiles
     * the most queries): blocks take their tiles heaviest first, so the
     * grid does not end on a few long blocks. */
    bool reverse = a->causal && strcmp(rows_len, "T") == 0;
    cg_printf(b, "  const long long T = A.n[2], S = A.n[3], tiles = (%s + %d) / %d;\n", rows_len, TILE - 1, TILE);
    cg_printf(b, "  const long long head = blockIdx.x / tiles, row0 = (%sblockIdx.x %% tiles) * %d;\n", reverse ? "tiles - 1 - " : "",
              TILE);
    cg_printf(b, "  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;\n");
    cg_printf(b, "  const long long r0 = row0 + warp * 16 + gid, r1 = r0 + 8;\n");
    /* not every kernel reads every constant */
    cg_printf(b, "  [[maybe_unused]] const float scale = %s, sl2 = %s;   /* sl2: scale log2(e) */\n", a->scale, a->scale_log2);
    cg_printf(b, "  [[maybe_unused]] const float mul = %s;   /* what the scores still need: 2^(s mul - m) */\n", a->prescale ? "1.0f" : "sl2");
    cg_printf(b, "  [[maybe_unused]] const float LN2 = 0.693147181f;\n");
    cg_printf(b, "  const float NEG_INF = -__int_as_float(0x7f800000);\n");
}

/* A fragments of 16 rows (r0, r1) x W columns of matrix p (row length W)
 * into name[W / 16][4]; rows at or past len are zeros. */
static void emit_a_fragments(cg_buf *b, const char *name, const char *p, int64_t W, const char *len)
{
    cg_printf(b, "  unsigned %s[%lld][4];\n", name, (long long)W / 16);
    cg_printf(b, "  for (int kk = 0; kk < %lld; kk++) {\n", (long long)W / 16);
    cg_printf(b, "    const unsigned *p0 = (const unsigned *)(%s + %s_base + r0 * %s_rs), *p1 = (const unsigned *)(%s + %s_base + r1 * %s_rs);\n",
              p, p, p, p, p, p);
    cg_printf(b, "    %s[kk][0] = r0 < %s ? p0[kk * 8 + tig] : 0u; %s[kk][1] = r1 < %s ? p1[kk * 8 + tig] : 0u;\n", name, len, name, len);
    cg_printf(b, "    %s[kk][2] = r0 < %s ? p0[kk * 8 + 4 + tig] : 0u; %s[kk][3] = r1 < %s ? p1[kk * 8 + 4 + tig] : 0u;\n  }\n", name,
              len, name, len);
}

/* A 64-row tile of one operand in shared memory, row by row, a row every
 * row_stride(W) 32-bit words: W/2 words of bf16/f16 pairs and 4 of padding,
 * so the 8 rows of 16 bytes one ldmatrix phase reads start 4 banks apart
 * and fall in 32 distinct banks. Rows arrive by cp.async, 16 bytes a copy,
 * without passing through registers. B fragments come out of the tile by
 * ldmatrix, four 8x8 matrices an instruction (two products' worth): as they
 * lie for products with the tile's rows as B's columns (the scores), and
 * transposed (.trans) for products with the tile itself as B (P V, dS K). */
typedef struct attn_tile {
    const char *name;        /* the tile: unsigned name[] */
    const char *src, *len;   /* the operand and its length (T or S) */
    int64_t W;               /* its columns */
    bool wg;                 /* also laid out for wgmma, under NC_WGMMA (each 64 columns 128 bytes a row, swizzled) */
} attn_tile;

enum { SHARED_LIMIT = 48 * 1024 };   /* static shared memory a block may have */

static int64_t row_stride(int64_t W) { return W / 2 + 4; }

/* wgmma reads a tile of 64 rows of 128 bytes through the 128-byte swizzle:
 * 16-byte piece p of row r lies at piece p ^ (r % 8), so the 8 rows of a
 * piece fall in distinct banks without padding. A tile of 128 columns is
 * two of those, its first 64 columns and its last, 8 KiB apart. */
static void emit_tile_decls(cg_buf *b, const attn_tile *t, int n, int buffers)
{
    bool wg = n > 0 && t[0].wg;
    if (wg) cg_printf(b, "#if NC_WGMMA\n");
    for (int i = 0; wg && i < n; i++)
        cg_printf(b, "  __shared__ __align__(1024) uint4 %s_mem[%d][%lld];\n  nc_wg_check_aligned(%s_mem);\n", t[i].name, buffers,
                  (long long)(TILE * t[i].W / 8), t[i].name);
    if (wg) cg_printf(b, "#else\n");
    for (int i = 0; i < n; i++)   /* uint4: 16-byte aligned, as cp.async and ldmatrix want */
        cg_printf(b, "  __shared__ uint4 %s_mem[%d][%lld];\n", t[i].name, buffers, (long long)(TILE * row_stride(t[i].W) / 4));
    if (wg) cg_printf(b, "#endif\n");
}

/* Starts copying rows [cn, cn + 64) of the operand into its tile's buffer
 * buf, zeros past the end; nc_cp_wait and a barrier must come before the
 * tile is read. 8 neighbouring lanes copy 128 contiguous bytes of a row:
 * coalesced reads, no bank conflicts. The operand's rows start at multiples
 * of 16 bytes (head_interleaved asks for it). */
static void emit_tile_load(cg_buf *b, const attn_tile *t, const char *buf, const char *cn)
{
    const char *p = t->src;
    int64_t per_row = t->W / 8;   /* 16-byte pieces */
    cg_printf(b, "#pragma unroll\n    for (int i = 0; i < %lld; i++) {\n", (long long)(TILE * per_row / 128));
    cg_printf(b, "      const int x = threadIdx.x + 128 * i, row = x / %lld, piece = x %% %lld;\n", (long long)per_row, (long long)per_row);
    cg_printf(b, "      const bool ok = %s + row < %s;\n", cn, t->len);
    if (t->wg) cg_printf(b, "#if NC_WGMMA\n      const int at = (piece >> 3) * 2048 + row * 32 + ((piece & 7) ^ (row & 7)) * 4;\n#else\n");
    cg_printf(b, "      const int at = row * %lld + piece * 4;\n", (long long)row_stride(t->W));
    if (t->wg) cg_printf(b, "#endif\n");
    cg_printf(b, "      nc_cp16((unsigned *)%s_mem[%s] + at, %s + %s_base + (ok ? %s + row : 0) * %s_rs + piece * 8, ok);\n    }\n", t->name, buf,
              p, p, cn, p);
}

/* The walk over the other side's tiles, c0 from start below end. With room
 * for two buffers of each tile in 48 KiB of static shared memory, the next
 * tile's copies are in flight while this one is multiplied, and one barrier
 * a tile both publishes the tile and frees the buffer the copies fill;
 * else each tile is copied, waited for and then used. With stats (the key
 * gradients) the queries' lse (in units of log2) and delta come along, in
 * float2 pairs lses[], dls[]. Opens the loop's body, with a pointer named
 * after each tile to its current buffer. */
typedef struct attn_walk {
    const attn_tile *t;
    int n;
    bool stats;
    const char *start, *end;
} attn_walk;

static int64_t walk_bytes(const attn_walk *w, int buffers)
{
    int64_t bytes = w->stats ? buffers * 2 * TILE * (int64_t)sizeof(float) : 0;
    for (int i = 0; i < w->n; i++) bytes += buffers * TILE * row_stride(w->t[i].W) * 4;
    return bytes;
}

static void emit_walk_loads(cg_buf *b, const attn_walk *w, const char *buf, const char *cn)
{
    for (int i = 0; i < w->n; i++) emit_tile_load(b, &w->t[i], buf, cn);
    if (!w->stats) return;
    cg_printf(b, "    for (int x = threadIdx.x; x < 64; x += blockDim.x) {\n");
    cg_printf(b, "      ((float *)lses_mem[%s])[x] = %s + x < T ? nc_ld(lse, head * T + %s + x) * NC_LOG2E : 0.0f;\n", buf, cn, cn);
    cg_printf(b, "      ((float *)dls_mem[%s])[x] = %s + x < T ? nc_ld(delta, head * T + %s + x) : 0.0f;\n    }\n", buf, cn, cn);
}

/* cp.async writes the tiles through the generic proxy and wgmma reads them
 * through the async one: each thread fences its copies before the barrier. */
static void emit_proxy_fence(cg_buf *b, const attn_walk *w)
{
    if (w->n > 0 && w->t[0].wg) cg_printf(b, "#if NC_WGMMA\n    nc_proxy_fence();\n#endif\n");
}

static void emit_walk_begin(cg_buf *b, const attn_walk *w)
{
    bool two = walk_bytes(w, 2) <= SHARED_LIMIT;
    int buffers = two ? 2 : 1;
    emit_tile_decls(b, w->t, w->n, buffers);
    if (w->stats) cg_printf(b, "  __shared__ float2 lses_mem[%d][32], dls_mem[%d][32];\n", buffers, buffers);
    const char *cur = two ? "it & 1" : "0";
    if (two) {   /* the first tile, unless there is none (keys past the last query): no copy is left unwaited for */
        cg_printf(b, "  if (%s < %s) {\n    const long long c0 = %s;\n", w->start, w->end, w->start);
        emit_walk_loads(b, w, "0", "c0");
        cg_printf(b, "  }\n");
    }
    cg_printf(b, "  for (long long c0 = %s, it = 0; c0 < %s; c0 += 64, it++) {\n", w->start, w->end);
    if (two) {
        cg_printf(b, "    nc_cp_wait();\n");
        emit_proxy_fence(b, w);
        cg_printf(b, "    __syncthreads();   /* this tile is in; everyone is done with the other buffer */\n");
        cg_printf(b, "    if (c0 + 64 < %s) {\n", w->end);
        emit_walk_loads(b, w, "(it + 1) & 1", "(c0 + 64)");
        cg_printf(b, "    }\n");
    } else {
        cg_printf(b, "    __syncthreads();\n");
        emit_walk_loads(b, w, "0", "c0");
        cg_printf(b, "    nc_cp_wait();\n");
        emit_proxy_fence(b, w);
        cg_printf(b, "    __syncthreads();\n");
    }
    for (int i = 0; i < w->n; i++) cg_printf(b, "    const unsigned *const %s = (const unsigned *)%s_mem[%s];\n", w->t[i].name, w->t[i].name, cur);
    if (w->stats) cg_printf(b, "    const float2 *const lses = lses_mem[%s], *const dls = dls_mem[%s];\n", cur, cur);
}

/* One product of a warp's 16 rows with a tile: scores acc = X (A fragments
 * x[W/16]) times the tile's rows transposed, or out += P (acc packed as A
 * fragments) times the tile itself. A kernel's products of one step are
 * emitted together: on the wgmma path they are issued back to back and
 * waited for once. */
typedef struct attn_product {
    const char *acc;         /* scores: what they go to; times tile: P */
    const char *x;           /* scores: A fragments; times tile: what it adds to */
    const attn_tile *t;
} attn_product;

/* The wgmma path's products, issued back to back and waited for once: the
 * scores (K-major: the tile's rows transposed, a product 16 of its columns,
 * 32 bytes on, the second 64 columns 8 KiB on) into acc from the A fragments
 * x, or times the tile (N-major: a product 16 of its rows, 2048 bytes on;
 * 128 columns at once) into x from P's fragments pa<i>. */
static void emit_wg_products(cg_buf *b, const attn_shape *a, const attn_product *p, int n, bool times_tile)
{
    for (int i = 0; i < n; i++) {
        const attn_tile *t = p[i].t;
        bool wide = times_tile && t->W == 128;
        if (times_tile)
            cg_printf(b, "    {\n      const unsigned long long dsc = nc_wg_desc%s(%s);\n#pragma unroll\n"
                         "      for (int kk = 0; kk < 4; kk++) %s_n%s(&%s[0][0], pa%d[kk], dsc + kk * 128, 1);\n    }\n",
                      wide ? "_wide" : "", t->name, a->wgmma, wide ? "128" : "", p[i].x, i);
        else
            cg_printf(b, "    {\n      const unsigned long long dsc = nc_wg_desc(%s);\n#pragma unroll\n"
                         "      for (int kk = 0; kk < %lld; kk++) %s_k(&%s[0][0], %s[kk], dsc + (kk >> 2) * 512 + (kk & 3) * 2, kk);\n    }\n",
                      t->name, (long long)t->W / 16, a->wgmma, p[i].acc, p[i].x);
    }
    cg_printf(b, "    nc_wg_commit();\n");
    for (int i = 0; i < n; i++)   /* 32 accumulators a wait */
        for (int64_t half = 0; half < (times_tile ? p[i].t->W / 64 : 1); half++)
            cg_printf(b, "    nc_wg_wait(&%s[%lld][0]);\n", times_tile ? p[i].x : p[i].acc, (long long)half * 8);
}

/* acc[8][4] (16 rows x 64 tile rows) = X (A fragments xa[W/16]) times the
 * tile's rows transposed: B[k][n] = tile[n][k]. Lane l points at row l % 8
 * of the 8 rows nb and at the columns of matrix l / 8: B's two registers for
 * kk, then for kk + 1. With wgmma the warpgroup's 64 rows at once, 16 columns
 * of the tile (32 bytes on) a product. */
static void emit_scores(cg_buf *b, const attn_shape *a, const attn_product *p, int n)
{
    bool wg = p[0].t->wg;
    for (int i = 0; i < n; i++) cg_printf(b, "    float %s[8][4];\n", p[i].acc);
    if (wg) {
        cg_printf(b, "#if NC_WGMMA\n    nc_wg_fence();\n");
        emit_wg_products(b, a, p, n, false);
        cg_printf(b, "#else\n");
    }
    for (int i = 0; i < n; i++) {
        const char *acc = p[i].acc, *xa = p[i].x;
        const attn_tile *t = p[i].t;
        cg_printf(b, "#pragma unroll\n");
        cg_printf(b, "    for (int nb = 0; nb < 8; nb++) {\n      %s[nb][0] = %s[nb][1] = %s[nb][2] = %s[nb][3] = 0.0f;\n#pragma unroll\n", acc,
                  acc, acc, acc);
        cg_printf(b, "      for (int kk = 0; kk < %lld; kk += 2) {\n        unsigned bf[4];\n", (long long)t->W / 16);
        cg_printf(b, "        nc_ldsm4(bf, %s + (nb * 8 + (lane & 7)) * %lld + kk * 8 + (lane >> 3) * 4);\n", t->name,
                  (long long)row_stride(t->W));
        cg_printf(b, "        %s(%s[nb], %s[kk], bf);\n        %s(%s[nb], %s[kk + 1], bf + 2);\n      }\n    }\n", a->mma, acc, xa, a->mma,
                  acc, xa);
    }
    if (wg) cg_printf(b, "#endif\n");
}

/* P's A fragment for the 16 tile rows kk, as a brace list: acc's
 * accumulator pairs of columns 16 kk .. 16 kk + 15, rounded to the
 * operands' dtype and packed (an accumulator's layout is an A fragment's). */
static void emit_p_fragment(cg_buf *b, const attn_shape *a, const char *acc)
{
    cg_printf(b, "{%s(%s[2 * kk][0], %s[2 * kk][1]), %s(%s[2 * kk][2], %s[2 * kk][3]),\n", a->pack, acc, acc, a->pack, acc, acc);
    cg_printf(b, "       %s(%s[2 * kk + 1][0], %s[2 * kk + 1][1]), %s(%s[2 * kk + 1][2], %s[2 * kk + 1][3])}", a->pack, acc, acc, a->pack,
              acc, acc);
}

/* out[W/8][4] += P (acc[8][4] packed as A fragments, 64 tile rows as k) times
 * the tile itself: B[k][n] = tile[k][n], read transposed. Lane l points at
 * row l % 16 of the 16 rows kk and at the columns of nb + l / 16: B's two
 * registers for nb, then for nb + 1. With wgmma 16 rows of the tile (2048
 * bytes on) a product, every A fragment and out fenced before the first. */
static void emit_times_tile(cg_buf *b, const attn_shape *a, const attn_product *p, int n)
{
    bool wg = p[0].t->wg;
    if (wg) {
        cg_printf(b, "#if NC_WGMMA\n  {   /* pa<i>: P's A fragments, this step's only */\n");
        for (int i = 0; i < n; i++) {
            cg_printf(b, "    unsigned pa%d[4][4];\n#pragma unroll\n    for (int kk = 0; kk < 4; kk++) {\n      const unsigned f[4] = ", i);
            emit_p_fragment(b, a, p[i].acc);
            cg_printf(b, ";\n      for (int e = 0; e < 4; e++) pa%d[kk][e] = f[e];\n    }\n", i);
            cg_printf(b, "    nc_wg_hold(&pa%d[0][0], 16);\n", i);
            for (int64_t half = 0; half < p[i].t->W / 64; half++) cg_printf(b, "    nc_wg_hold_acc(&%s[%lld][0]);\n", p[i].x, (long long)half * 8);
        }
        cg_printf(b, "    nc_wg_fence();\n");
        emit_wg_products(b, a, p, n, true);
        cg_printf(b, "  }\n#else\n");
    }
    for (int i = 0; i < n; i++) {
        const char *out = p[i].x, *acc = p[i].acc;
        const attn_tile *t = p[i].t;
        cg_printf(b, "#pragma unroll\n    for (int kk = 0; kk < 4; kk++) {\n      const unsigned pa[4] = ");
        emit_p_fragment(b, a, acc);
        cg_printf(b, ";\n");
        cg_printf(b, "#pragma unroll\n      for (int nb = 0; nb < %lld; nb += 2) {\n        unsigned bf[4];\n", (long long)t->W / 8);
        cg_printf(b, "        nc_ldsm4_t(bf, %s + (kk * 16 + (lane & 15)) * %lld + nb * 4 + (lane >> 4) * 4);\n", t->name,
                  (long long)row_stride(t->W));
        cg_printf(b, "        %s(%s[nb], pa, bf);\n        %s(%s[nb + 1], pa, bf + 2);\n      }\n    }\n", a->mma, out, a->mma, out);
    }
    if (wg) cg_printf(b, "#endif\n");
}

/* The quad (the 4 lanes sharing a row) agrees on x: max or sum. */
static void emit_quad(cg_buf *b, const char *x, const char *op)
{
    cg_printf(b, "    %s = %s(%s, __shfl_xor_sync(0xffffffffu, %s, 1));\n", x, op, x, x);
    cg_printf(b, "    %s = %s(%s, __shfl_xor_sync(0xffffffffu, %s, 2));\n", x, op, x, x);
}

/* Whether score (row r, column c) counts: inside S (or T), causal, and
 * (with key lengths) a key below the head's length. */
static const char *visible(const attn_shape *a, bool by_key)
{
    if (a->lens >= 0 && by_key) return a->causal ? "(c < T && c >= key && key < len)" : "(c < T && key < len)";
    if (a->lens >= 0) return a->causal ? "(c < len && c <= row)" : "(c < len)";
    if (by_key) return a->causal ? "(c < T && c >= key)" : "(c < T)";
    return a->causal ? "(c < S && c <= row)" : "(c < S)";
}

/* The softmax runs in powers of 2: p = 2^(s mul - m), m in units of log2,
 * an element one multiply-add and one ex2 (mul = scale log2(e); for a scale
 * that is not positive the scores are scaled here and mul is 1). On the
 * tiles that cross the end of the rows or the causal diagonal (c0 == row0:
 * tiles start at multiples of 64), hidden scores become -inf; the tiles
 * inside skip the test. */
static void emit_mask_scores(cg_buf *b, const attn_shape *a, bool by_key)
{
    const char *end = by_key ? "T" : a->lens >= 0 ? "len" : "S";
    cg_printf(b, "    if (c0 + 64 > %s%s%s) {\n", end, a->causal ? " || c0 == row0" : "", a->lens >= 0 && by_key ? " || row0 + 64 > len" : "");
    cg_printf(b, "#pragma unroll\n      for (int nb = 0; nb < 8; nb++)\n#pragma unroll\n        for (int e = 0; e < 4; e++) {\n");
    cg_printf(b, "          const long long c = c0 + nb * 8 + tig * 2 + (e & 1), %s = e < 2 ? r0 : r1;\n", by_key ? "key" : "row");
    cg_printf(b, "          s[nb][e] = %s ? s[nb][e]%s : NEG_INF;\n        }\n    }", visible(a, by_key), a->prescale ? " * sl2" : "");
    if (a->prescale)
        cg_printf(b, " else {\n#pragma unroll\n      for (int nb = 0; nb < 8; nb++)\n#pragma unroll\n        for (int e = 0; e < 4; e++) s[nb][e] *= sl2;\n    }");
    cg_printf(b, "\n");
}

/* The 16 rows' results o[W/8][4] (times f) into out: rows r0, r1 below lim. */
static void emit_store_rows(cg_buf *b, const char *out, const char *o, int64_t W, const char *lim, const char *f0, const char *f1)
{
    cg_printf(b, "  for (int nb = 0; nb < %lld; nb++) {\n    const int col = nb * 8 + tig * 2;\n", (long long)W / 8);
    cg_printf(b, "    if (r0 < %s) { nc_st(%s, %s_base + r0 * %s_rs + col, %s[nb][0]%s); nc_st(%s, %s_base + r0 * %s_rs + col + 1, %s[nb][1]%s); }\n",
              lim, out, out, out, o, f0, out, out, out, o, f0);
    cg_printf(b, "    if (r1 < %s) { nc_st(%s, %s_base + r1 * %s_rs + col, %s[nb][2]%s); nc_st(%s, %s_base + r1 * %s_rs + col + 1, %s[nb][3]%s); }\n  }\n",
              lim, out, out, out, o, f1, out, out, out, o, f1);
}

/* The sum that adds up the columns of the concat kernel v writes into
 * (cg->attn_colsum), IR_NONE if none; its partial rows [B tiles, W] are
 * cg->kept_temp[sum], made by the first kernel that writes them. */
static ir_value colsum_of(cg_ctx *cg, ir_value v)
{
    const ir_graph *g = cg->g;
    ir_value c = cg->out_as ? cg->out_as[v] : IR_NONE;
    for (ir_value s = 0; c != IR_NONE && cg->attn_colsum && s < g->nnodes; s++) {
        if (cg->attn_colsum[s] != c) continue;
        if (!cg->kept_temp[s]) {
            const ir_node *cn = &g->nodes[c];
            int64_t T = 0, W = 0;
            dim_is_const(&g->dims[cn->shape[1]], &T);
            dim_is_const(&g->dims[cn->shape[2]], &W);
            dim_expr rows, per = dim_const(((T + TILE - 1) / TILE) * W);
            if (dim_mul(&g->dims[cn->shape[0]], &per, &rows) != DIM_OK) return IR_NONE;
            cg->kept_temp[s] = cuda_new_temp(cg, ir_dim_intern((ir_graph *)g, &rows), NC_F32);
        }
        return s;
    }
    return IR_NONE;
}

/* After the rows of result r (o[W/8][4], times f, rounded as stored) went
 * to out: this block's column sums of them into its partial
 * row of parts (row b tiles + tile, columns as in out's rows). A lane adds
 * its two rows of each column it holds; the warp's 8 row pairs of every
 * column are then added by halving exchanges (each step a lane keeps half
 * its sums and adds its partner's half of the same columns: 14 shuffles
 * for 64 columns, not 48), leaving a lane W/32 sums of its own columns;
 * the 4 warps are added in shared memory, always in the same order. */
static void emit_store_colsum(cg_ctx *cg, nrt_step *s, ir_value r, const char *o, int64_t W, const char *lim, const char *f,
                              int parts_slot)
{
    const ir_graph *g = cg->g;
    cg_buf *b = &cg->body;
    const ir_node *c = &g->nodes[cg->out_as[r]];
    int64_t PW = 0;
    dim_is_const(&g->dims[c->shape[2]], &PW);
    const char *rnd = cuda_round_fn(g->nodes[r].dtype);
    int heads = int_slot(s, g->nodes[r].shape[1]);
    long long nv = W / 4, keep = W / 32;   /* a lane's column values; what it keeps of them */
    cg_printf(b, "  {   /* the column sums of what this block stored */\n    __shared__ float cs[4][%lld];\n    float v[%lld];\n", (long long)W, nv);
    cg_printf(b, "#pragma unroll\n    for (int nb = 0; nb < %lld; nb++) {\n", (long long)W / 8);
    cg_printf(b, "      v[2 * nb] = (r0 < %s ? %s(%s[nb][0]%s) : 0.0f) + (r1 < %s ? %s(%s[nb][2]%s) : 0.0f);\n", lim, rnd, o, f, lim, rnd, o, f);
    cg_printf(b, "      v[2 * nb + 1] = (r0 < %s ? %s(%s[nb][1]%s) : 0.0f) + (r1 < %s ? %s(%s[nb][3]%s) : 0.0f);\n    }\n", lim, rnd, o, f, lim,
              rnd, o, f);
    cg_printf(b, "#pragma unroll\n    for (int h = %lld, m = 16; m >= 4; h >>= 1, m >>= 1) {   /* m: the lane bit of gid this step pairs */\n", nv / 2);
    cg_printf(b, "      const bool up = (lane & m) != 0;\n#pragma unroll\n      for (int i = 0; i < h; i++) {\n");
    cg_printf(b, "        const float send = up ? v[i] : v[i + h], mine = up ? v[i + h] : v[i];\n");
    cg_printf(b, "        v[i] = mine + __shfl_xor_sync(0xffffffffu, send, m);\n      }\n    }\n");
    cg_printf(b, "#pragma unroll\n    for (int i = 0; i < %lld; i++) {   /* value k = %lld gid + i: column (k / 2) 8 + 2 tig + k %% 2 */\n", keep, keep);
    cg_printf(b, "      const int k = %lld * gid + i;\n      cs[warp][(k >> 1) * 8 + tig * 2 + (k & 1)] = v[i];\n    }\n    __syncthreads();\n", keep);
    cg_printf(b, "    float *parts = (float *)A.buf[%d];\n", parts_slot);
    cg_printf(b, "    for (int c = threadIdx.x; c < %lld; c += blockDim.x)\n", (long long)W);
    cg_printf(b, "      parts[((head / A.n[%d]) * tiles + row0 / %d) * %lld + %lld + (head %% A.n[%d]) * %lld + c] = cs[0][c] + cs[1][c] + cs[2][c] + cs[3][c];\n",
              heads, TILE, (long long)PW, (long long)cg->out_col[r], heads, (long long)W);
    cg_printf(b, "    __syncthreads();   /* cs is free again */\n  }\n");
}

/* The slot of the partial column sums kernel v adds to (colsum_of), -1 if none. */
static int add_colsum_parts(cg_ctx *cg, nrt_step *s, ir_value v)
{
    ir_value sum = colsum_of(cg, v);
    if (sum == IR_NONE) return -1;
    cuda_add_buf(s, cg->kept_temp[sum]);
    return s->nbufs - 1;
}

/* forward (with lse: only the log-sum-exp), and dq. */
static void emit_by_query(cg_ctx *cg, nrt_step *st, ir_value v, const attn_shape *a, nc_op op)
{
    cg_buf *b = &cg->body;
    bool fwd = op == OP_ATTENTION, lse = op == OP_ATTENTION_LSE, dq = op == OP_ATTENTION_GRAD;
    emit_prologue(b, a, "T");
    emit_layouts(cg, st, v, a);
    /* keys past the length are neither loaded nor seen */
    const char *keys = a->lens >= 0 ? "len" : "S";
    if (a->lens >= 0) cuda_emit_attention_length(b, "  ", "head", a->lens);
    /* k: for the scores and dq's dS K; v: for the forward's P V and dq's dP = dO V^T */
    attn_tile t[2] = {{"ks", "k", keys, a->D, a->wgmma != NULL}, {"vs", "v", keys, a->E, a->wgmma != NULL}};
    int ntiles = lse ? 1 : 2;
    emit_a_fragments(b, "qa", "q", a->D, "T");
    if (dq) {
        emit_a_fragments(b, "ga", "g", a->E, "T");
        cg_printf(b, "  const float lse0 = r0 < T ? nc_ld(lse, head * T + r0) * NC_LOG2E : 0.0f, lse1 = r1 < T ? nc_ld(lse, head * T + r1) * NC_LOG2E : 0.0f;\n");
        if (a->computes_delta) {   /* rowsum(dO * O): a quarter of each row a lane, then the quad */
            cg_printf(b, "  float dl0 = 0.0f, dl1 = 0.0f;\n  for (int d = tig; d < %lld; d += 4) {\n", (long long)a->E);
            cg_printf(b, "    if (r0 < T) dl0 += nc_ld(g, g_base + r0 * g_rs + d) * nc_ld(fwd_out, fwd_out_base + r0 * fwd_out_rs + d);\n");
            cg_printf(b, "    if (r1 < T) dl1 += nc_ld(g, g_base + r1 * g_rs + d) * nc_ld(fwd_out, fwd_out_base + r1 * fwd_out_rs + d);\n  }\n");
            emit_quad(b, "dl0", "nc_add");
            emit_quad(b, "dl1", "nc_add");
            cg_printf(b, "  if (tig == 0 && r0 < T) nc_st(delta, head * T + r0, dl0);\n  if (tig == 0 && r1 < T) nc_st(delta, head * T + r1, dl1);\n");
        } else {
            cg_printf(b, "  const float dl0 = r0 < T ? nc_ld(delta, head * T + r0) : 0.0f, dl1 = r1 < T ? nc_ld(delta, head * T + r1) : 0.0f;\n");
        }
    }
    int64_t W = dq ? a->D : a->E;
    if (!lse) cg_printf(b, "  float o[%lld][4];\n  for (int nb = 0; nb < %lld; nb++) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.0f;\n",
                        (long long)W / 8, (long long)W / 8);
    if (!dq) cg_printf(b, "  float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.0f, l1 = 0.0f;   /* m: in units of log2 */\n");
    if (a->lens >= 0) cg_printf(b, "  const long long cend = %s;\n", a->causal ? "(row0 + 64 < len ? row0 + 64 : len)" : "len");
    else cg_printf(b, "  const long long cend = %s;\n", a->causal ? "(row0 + 64 < S ? row0 + 64 : S)" : "S");
    emit_walk_begin(b, &(attn_walk){.t = t, .n = ntiles, .start = "0", .end = "cend"});
    emit_scores(b, a, (attn_product[]){{"s", "qa", &t[0]}, {"dp", "ga", &t[1]}}, dq ? 2 : 1);
    emit_mask_scores(b, a, false);
    if (dq) {   /* the probabilities from lse */
        cg_printf(b, "#pragma unroll\n    for (int nb = 0; nb < 8; nb++)\n#pragma unroll\n      for (int e = 0; e < 4; e++)\n");
        cg_printf(b, "        s[nb][e] = nc_exp2(fmaf(s[nb][e], mul, e < 2 ? -lse0 : -lse1)) * (dp[nb][e] - (e < 2 ? dl0 : dl1));   /* dS */\n");
        emit_times_tile(b, a, &(attn_product){"s", "o", &t[0]}, 1);
        cg_printf(b, "  }\n");
        emit_store_rows(b, "out", "o", a->D, "T", " * scale", " * scale");
        int parts = add_colsum_parts(cg, st, v);
        if (parts >= 0) emit_store_colsum(cg, st, v, "o", a->D, "T", " * scale", parts);
        return;
    }
    cg_printf(b, "    float mx0 = NEG_INF, mx1 = NEG_INF;\n#pragma unroll\n    for (int nb = 0; nb < 8; nb++) {\n");
    cg_printf(b, "      mx0 = fmaxf(mx0, fmaxf(s[nb][0], s[nb][1])), mx1 = fmaxf(mx1, fmaxf(s[nb][2], s[nb][3]));\n    }\n");
    emit_quad(b, "mx0", "fmaxf");
    emit_quad(b, "mx1", "fmaxf");
    /* Online softmax: a row with nothing visible yet keeps its zeros. The
     * base m moves (and l and o are rescaled) only when a row's max passed
     * it by more than 8, in log2 units, anywhere in the warp: otherwise the
     * probabilities stay below 2^8 (f32 sums, bf16 and f16 products keep
     * their relative precision) and the tile skips the rescale's
     * multiplies and exponentials; the end divides by l of the same base. */
    cg_printf(b, "    mx0 = fmaxf(m0, mx0 * mul), mx1 = fmaxf(m1, mx1 * mul);\n");
    cg_printf(b, "    if (!__all_sync(0xffffffffu, mx0 <= m0 + 8.0f && mx1 <= m1 + 8.0f)) {\n");
    cg_printf(b, "      const float c0f = nc_exp2(m0 - (mx0 == NEG_INF ? 0.0f : mx0)), c1f = nc_exp2(m1 - (mx1 == NEG_INF ? 0.0f : mx1));\n");
    cg_printf(b, "      l0 *= c0f, l1 *= c1f, m0 = mx0, m1 = mx1;\n");
    if (fwd)
        cg_printf(b, "#pragma unroll\n      for (int nb = 0; nb < %lld; nb++) o[nb][0] *= c0f, o[nb][1] *= c0f, o[nb][2] *= c1f, o[nb][3] *= c1f;\n",
                  (long long)a->E / 8);
    cg_printf(b, "    }\n");
    cg_printf(b, "    const float base0 = m0 == NEG_INF ? 0.0f : m0, base1 = m1 == NEG_INF ? 0.0f : m1;\n");
    cg_printf(b, "#pragma unroll\n    for (int nb = 0; nb < 8; nb++) {\n");
    cg_printf(b, "      s[nb][0] = nc_exp2(fmaf(s[nb][0], mul, -base0)), s[nb][1] = nc_exp2(fmaf(s[nb][1], mul, -base0));\n");
    cg_printf(b, "      s[nb][2] = nc_exp2(fmaf(s[nb][2], mul, -base1)), s[nb][3] = nc_exp2(fmaf(s[nb][3], mul, -base1));\n");
    cg_printf(b, "      l0 += s[nb][0] + s[nb][1], l1 += s[nb][2] + s[nb][3];\n    }\n");
    if (fwd) emit_times_tile(b, a, &(attn_product){"s", "o", &t[1]}, 1);
    cg_printf(b, "  }\n");
    emit_quad(b, "l0", "nc_add");
    emit_quad(b, "l1", "nc_add");
    if (lse || a->with_lse) {   /* natural log: m ln 2 + ln l */
        const char *to = lse ? "out" : "lse_out";
        cg_printf(b, "  if (tig == 0 && r0 < T) nc_st(%s, head * T + r0, m0 * LN2 + logf(l0));\n", to);
        cg_printf(b, "  if (tig == 0 && r1 < T) nc_st(%s, head * T + r1, m1 * LN2 + logf(l1));\n", to);
        if (lse) return;
    }
    if (a->lens >= 0) cg_printf(b, "  if (l0 == 0.0f) l0 = 1.0f;   /* no key seen: zeros */\n  if (l1 == 0.0f) l1 = 1.0f;\n");
    emit_store_rows(b, "out", "o", a->E, "T", " / l0", " / l1");
}

/* dk (wrt 1) and dv (wrt 2): a key tile meets the query tiles that see it. */
static void emit_by_key(cg_ctx *cg, nrt_step *st, ir_value v, const attn_shape *a, int wrt)
{
    cg_buf *b = &cg->body;
    emit_prologue(b, a, "S");
    emit_layouts(cg, st, v, a);
    /* keys past the length: zero rows, hidden scores, and a block of them only stores zeros */
    const char *keys = a->lens >= 0 ? "len" : "S";
    if (a->lens >= 0) {
        cuda_emit_attention_length(b, "  ", "head", a->lens);
        cg_printf(b, "  const long long tend = row0 < len ? T : 0;\n");
    }
    bool both = wrt == 1 && a->dv != IR_NONE;   /* P^T for dV, dS^T for dK */
    /* q: for S^T = K Q^T and dK += dS^T Q; dO: for dP^T = V dO^T and dV += P^T dO */
    attn_tile t[2] = {{"qs", "q", "T", a->D, a->wgmma != NULL}, {"gs", "g", "T", a->E, a->wgmma != NULL}};
    emit_a_fragments(b, "ka", "k", a->D, keys);
    if (wrt == 1) emit_a_fragments(b, "va", "v", a->E, keys);
    int64_t W = wrt == 1 ? a->D : a->E;
    cg_printf(b, "  float o[%lld][4];\n  for (int nb = 0; nb < %lld; nb++) o[nb][0] = o[nb][1] = o[nb][2] = o[nb][3] = 0.0f;\n",
              (long long)W / 8, (long long)W / 8);
    if (both)
        cg_printf(b, "  float ov[%lld][4];\n  for (int nb = 0; nb < %lld; nb++) ov[nb][0] = ov[nb][1] = ov[nb][2] = ov[nb][3] = 0.0f;\n",
                  (long long)a->E / 8, (long long)a->E / 8);
    emit_walk_begin(b, &(attn_walk){.t = t, .n = 2, .stats = true, .start = a->causal ? "row0" : "0",
                                  .end = a->lens >= 0 ? "tend" : "T"});
    /* S^T: 16 keys x 64 queries; dP^T = V dO^T */
    emit_scores(b, a, (attn_product[]){{"s", "ka", &t[0]}, {"dp", "va", &t[1]}}, wrt == 1 ? 2 : 1);
    emit_mask_scores(b, a, true);
    cg_printf(b, "#pragma unroll\n    for (int nb = 0; nb < 8; nb++) {\n      const float2 L = lses[nb * 4 + tig], Dl = dls[nb * 4 + tig];\n");
    cg_printf(b, "#pragma unroll\n      for (int e = 0; e < 4; e++) {\n");
    cg_printf(b, "        const float p = nc_exp2(fmaf(s[nb][e], mul, e & 1 ? -L.y : -L.x));\n");
    if (both) cg_printf(b, "        s[nb][e] = p;\n        dp[nb][e] = p * (dp[nb][e] - (e & 1 ? Dl.y : Dl.x));\n      }\n    }\n");
    else cg_printf(b, "        s[nb][e] = %s;\n      }\n    }\n", wrt == 1 ? "p * (dp[nb][e] - (e & 1 ? Dl.y : Dl.x))" : "p");
    if (both)   /* dV += P^T dO, dK += dS^T Q */
        emit_times_tile(b, a, (attn_product[]){{"s", "ov", &t[1]}, {"dp", "o", &t[0]}}, 2);
    else
        emit_times_tile(b, a, &(attn_product){"s", "o", wrt == 1 ? &t[0] : &t[1]}, 1);
    cg_printf(b, "  }\n");
    const char *f = wrt == 1 ? " * scale" : "";
    emit_store_rows(b, "out", "o", W, "S", f, f);
    if (both) emit_store_rows(b, "out_v", "ov", a->E, "S", "", "");
    int parts = add_colsum_parts(cg, st, v);
    if (parts >= 0) emit_store_colsum(cg, st, v, "o", W, "S", f, parts);
    if (parts >= 0 && both) emit_store_colsum(cg, st, a->dv, "ov", a->E, "S", "", parts);
}

bool cuda_emit_attention_tiled(cg_ctx *cg, ir_value v, bool *emitted)
{
    attn_shape a;
    *emitted = false;
    if (!tiled_shape(cg, v, &a)) return true;
    const ir_node *n = &cg->g->nodes[v];
    bool by_key = n->op == OP_ATTENTION_GRAD && n->attr.axis > 0;
    a.with_lse = n->op == OP_ATTENTION && cg->lse_with && cg->lse_with[v] != IR_NONE;
    a.computes_delta = cg->delta_from && cg->delta_from[v] != IR_NONE;
    a.dv = cg->dv_with ? cg->dv_with[v] : IR_NONE;
    nrt_step *s = begin_tiled(cg, v, by_key);
    if (!s) return false;
    uint32_t per;
    if (ir_keyword_operand_slot(n) >= 0) {
        if (!cuda_attention_per_length(cg, v, &per)) return false;
        a.lens = int_slot(s, per);
    }
    /* heads of 64 by query: three blocks a multiprocessor at 168 registers
     * (sm_90: the forward without spills, dq with 4 spill instructions a
     * tile against 252 registers and two blocks; the key gradients' kernel
     * would spill 16 and issue 10% more, so it keeps its 255 and two) */
    if (!by_key && a.D == 64) cuda_kernel_bounds(cg, 128, 3);
    if (by_key) emit_by_key(cg, s, v, &a, n->attr.axis);
    else emit_by_query(cg, s, v, &a, n->op);
    cuda_end_kernel(cg);
    *emitted = true;
    return true;
}
