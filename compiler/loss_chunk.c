/* loss_chunk.c - the language-model head and its loss, a chunk at a time.
 *
 * Requires: a training graph before autodiff whose loss is
 * cross_entropy(matmul(h, W, transpose_b: true), targets) over many classes
 * (a tied output projection: GPT-2's logits are [B, T, 50304]). Produces:
 * the same loss computed over K slices of the rows, with each slice's
 * backward (the gradient of its logits, then of h and W) placed right after
 * its forward, so one slice's logits exist at a time instead of the whole
 * [B, T, V] tensor and its gradient: at batch 16 x 1024 those are 1.5 GiB
 * each in bf16. Returns the gradients of h and W as contributions for the
 * rest of the backward pass (autodiff_run_with).
 *
 * The loss is the same sum, in another order: each slice's mean cross
 * entropy weighted by its share of the rows. The slices run along a leading
 * axis of constant size (T for [B, T, V]), so the weights are exact
 * fractions whatever B is. W's gradient adds up in f32. */
#include "autodiff.h"
#include "diag.h"
#include "typecheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOSS_CHUNK_MIN_CLASSES 4096   /* below this the logits are small: not worth slicing */
#define LOSS_CHUNK_MAX LOSS_SLICES_MOST
/* A forward slice's product reads the whole weight for its rows: with fewer
 * than this many it is bound by those bytes, not its FLOPs (an H100's 750
 * TFLOP/s over 3 TB/s), and each slice more would add a read of the weight. */
#define LOSS_CHUNK_MIN_ROWS 256
/* Training's slices, unless told how many: as few as keep a slice's logits
 * (and their gradient, as big) within this. Each slice costs a pass over
 * the weight's f32 gradient (GPT-2's is 147 MiB, read and written), and its
 * input-gradient product has only the slice's rows to spread over the GPU
 * (rows x 768 outputs with K = 50304): GPT-2 at 16 x 1024 takes 4 slices of
 * 4096 rows (393 MiB of bf16 logits each), not 8 of 2048. */
#define LOSS_CHUNK_SLICE_BYTES ((int64_t)512 << 20)

static ir_value scalar(ir_builder *c, double v)
{
    ir_node p = {.op = OP_FILL, .dtype = NC_F32};
    p.attr.f = v;
    return irb_node(c, p, NULL, 0);
}

static ir_value slice(ir_builder *c, ir_value x, int axis, int64_t lo, int64_t hi)
{
    ir_node p = {.op = OP_SLICE};
    p.attr.axis = axis;
    p.attr.lo = ir_dim_const(c->g, lo);
    p.attr.hi = ir_dim_const(c->g, hi);
    return irb_node(c, p, &x, 1);
}

static int users_of(const ir_graph *g, ir_value v)
{
    int n = 0;
    for (ir_value u = 0; u < g->nnodes; u++)
        for (int i = 0; i < g->nodes[u].nargs; i++) n += ir_args(g, &g->nodes[u])[i] == v;
    for (uint32_t i = 0; i < g->noutputs; i++) n += g->outputs[i].value == v;
    return n;
}

/* Whether a trained parameter is behind v: its gradient is wanted. */
static bool trained_behind(const ir_graph *g, ir_value v)
{
    bool *needs = nc_xcalloc((size_t)v + 1, sizeof *needs), found;
    for (ir_value u = 0; u <= v; u++) {   /* a node's arguments come before it */
        const ir_node *n = &g->nodes[u];
        needs[u] = n->op == OP_PARAM && g->params[n->attr.index].role == IR_ROLE_WEIGHT;
        for (int i = 0; i < n->nargs && !needs[u]; i++) needs[u] = needs[ir_args(g, n)[i]];
    }
    found = needs[v];
    free(needs);
    return found;
}

/* The head a rewrite slices: loss = cross_entropy(logits, targets), logits =
 * matmul(h, w, transpose_b), sliced along axis (of constant length len). */
typedef struct chunk_head {
    ir_value logits, h, w, targets;
    double smoothing;
    int axis;
    int64_t len;
} chunk_head;

/* Whether loss is a head the rewrite applies to, and the axis to slice: the
 * last leading axis of the logits, when its size is a constant of 2 or more. */
static bool find_head(const ir_graph *g, ir_value loss, chunk_head *hd)
{
    hd->len = 0;   /* a symbolic axis's: not known (head_unbound) */
    if (loss == IR_NONE || g->nodes[loss].op != OP_CROSS_ENTROPY) return false;
    hd->logits = ir_args(g, &g->nodes[loss])[0];
    const ir_node *l = &g->nodes[hd->logits];
    int64_t classes;
    if (l->op != OP_MATMUL || !l->attr.tb || l->attr.ta || l->rank < 2 || users_of(g, hd->logits) != 1) return false;
    if (g->nodes[ir_args(g, l)[1]].rank != 2) return false;   /* one weight matrix shared by every row */
    if (!dim_is_const(&g->dims[l->shape[l->rank - 1]], &classes) || classes < LOSS_CHUNK_MIN_CLASSES) return false;
    hd->h = ir_args(g, l)[0], hd->w = ir_args(g, l)[1];
    hd->targets = ir_args(g, &g->nodes[loss])[1];
    hd->smoothing = g->nodes[loss].attr.f;
    hd->axis = l->rank - 2;
    return dim_is_const(&g->dims[l->shape[hd->axis]], &hd->len) && hd->len >= 2;
}

/* Whether find_head refused loss only for its sliced axis's size being
 * symbolic (T of an unbound [B, T, V]): a head once --dim binds it. */
static bool head_unbound(const ir_graph *g, ir_value loss)
{
    chunk_head hd = {.axis = -1};   /* find_head sets the axis once every other check has passed */
    int64_t d;
    return !find_head(g, loss, &hd) && hd.axis >= 0 && !dim_is_const(&g->dims[g->nodes[hd.logits].shape[hd.axis]], &d);
}

/* Slice k of chunks: cross_entropy(matmul(hk, w) as the head's logits are,
 * the targets' slice) weighted by the slice's share of the rows; *hk: the
 * slice of h it reads. */
static ir_value slice_part(ir_builder *c, const chunk_head *hd, int k, int chunks, ir_value *hk)
{
    int64_t lo = hd->len * k / chunks, hi = hd->len * (k + 1) / chunks;
    *hk = slice(c, hd->h, hd->axis, lo, hi);
    ir_value tk = slice(c, hd->targets, hd->axis, lo, hi);
    ir_node mm = {.op = OP_MATMUL, .attr = c->g->nodes[hd->logits].attr}, cp = {.op = OP_CROSS_ENTROPY};
    ir_value hw[2] = {*hk, hd->w};
    ir_value lk = irb_node(c, mm, hw, 2);
    cp.attr.f = hd->smoothing;
    ir_value lt[2] = {lk, tk};
    return irb_op2(c, OP_MUL, irb_node(c, cp, lt, 2), scalar(c, (double)(hi - lo) / (double)hd->len));
}

/* The slices asked for (slices > 0), or how many a training step's head
 * takes (see LOSS_CHUNK_SLICE_BYTES); a dim unknown at build time may be
 * large at run time: the most then. Never more than the axis's length. */
static int train_chunks(const ir_graph *g, const chunk_head *hd, int slices)
{
    int most = hd->len < LOSS_CHUNK_MAX ? (int)hd->len : LOSS_CHUNK_MAX;
    if (slices > 0) return slices < most ? slices : most;
    const ir_node *l = &g->nodes[hd->logits];
    int64_t bytes = (int64_t)dtype_size(l->dtype), d;
    for (int k = 0; k < l->rank; k++) {
        if (!dim_is_const(&g->dims[l->shape[k]], &d)) return most;
        bytes *= d;
    }
    int64_t fewest = (bytes + LOSS_CHUNK_SLICE_BYTES - 1) / LOSS_CHUNK_SLICE_BYTES;
    return fewest < most ? (int)fewest : most;
}

int loss_chunk_build(ir_graph *g, ir_value seed, int slices, ad_contribution out[2], FILE *report, char *err, size_t errcap)
{
    chunk_head hd;
    if (!find_head(g, g->train.loss, &hd)) return 0;
    int chunks = train_chunks(g, &hd, slices);
    if (chunks < 2) {   /* the ordinary backward pass */
        if (report) fprintf(report, "chunk-loss: cross_entropy over %%%u in one piece: its logits fit one slice\n", hd.logits);
        return 0;
    }
    ir_builder c = {.g = g, .who = "chunked loss", .loc = g->nodes[g->train.loss].loc, .err = err, .errcap = errcap};
    if (seed == IR_NONE) seed = scalar(&c, 1.0);
    ir_value loss = IR_NONE, dw = IR_NONE, dh_parts[LOSS_CHUNK_MAX];
    /* the gradients wanted: none of an input's h, or of a buffer's W */
    const bool want_h = trained_behind(g, hd.h), want_w = trained_behind(g, hd.w);
    for (int k = 0; k < chunks && !c.failed; k++) {
        ir_value hk, part = slice_part(&c, &hd, k, chunks, &hk);
        loss = loss == IR_NONE ? part : irb_op2(&c, OP_ADD, loss, part);
        /* this slice's backward, now: its logits die here */
        ir_value wrt[2], got[2], grads[2] = {IR_NONE, IR_NONE};
        int nwrt = 0;
        if (want_h) wrt[nwrt++] = hk;
        if (want_w) wrt[nwrt++] = hd.w;
        if (c.failed || (nwrt && !autodiff_vjp(g, part, seed, wrt, nwrt, got, err, errcap))) return -1;
        if (want_h) grads[0] = got[0];
        if (want_w) grads[1] = got[want_h];
        dh_parts[k] = grads[0];   /* IR_NONE where no trained parameter is behind h (or W) */
        if (grads[1] != IR_NONE) {
            ir_node up = {.op = OP_CAST};
            up.attr.to = NC_F32;
            ir_value dwk = irb_node(&c, up, &grads[1], 1);
            dw = dw == IR_NONE ? dwk : irb_op2(&c, OP_ADD, dw, dwk);
        }
    }
    ir_value dh = dh_parts[0];
    if (dh != IR_NONE) {
        ir_node cat = {.op = OP_CONCAT};
        cat.attr.axis = hd.axis;
        dh = irb_node(&c, cat, dh_parts, chunks);
    }
    if (c.failed) return -1;
    for (uint32_t i = 0; i < g->noutputs; i++)   /* a model that returns its loss returns the new one */
        if (g->outputs[i].value == g->train.loss) g->outputs[i].value = loss;
    g->train.loss = loss;
    int n = 0;
    if (dh != IR_NONE) out[n++] = (ad_contribution){.value = hd.h, .grad = dh};
    if (dw != IR_NONE) out[n++] = (ad_contribution){.value = hd.w, .grad = dw};
    if (report)   /* no backward where no trained parameter is behind the logits (a buffer's weight, h an input) */
        fprintf(report, "chunk-loss: cross_entropy over %%%u computed in %d slices of axis %d%s (one slice of logits alive "
                "at a time)\n", hd.logits, chunks, hd.axis,
                n ? ", each with its backward" : " with no backward, no trained parameter being behind its logits");
    return n;   /* 0 when no trained parameter is behind h or W: the ordinary sweep then finds nothing either */
}

/* How many slices a forward loss takes: as many as asked (slices > 0), or
 * as many as keep every slice at LOSS_CHUNK_MIN_ROWS rows or more (a dim
 * unknown at build time counted as 1), up to LOSS_CHUNK_MAX and the sliced
 * axis's length. GPT-2 at
 * 16 x 1024: 8; at 1024 tokens and a batch bound only at run time: 4; at
 * 1 x 64: none (the weight read once, not eight times, for 64 rows). */
static int forward_chunks(const ir_graph *g, const chunk_head *hd, int slices)
{
    if (slices > 0) return slices < hd->len ? slices : (int)hd->len;
    const ir_node *l = &g->nodes[hd->logits];
    int64_t rows = 1, d;
    for (int k = 0; k + 1 < l->rank; k++)
        if (dim_is_const(&g->dims[l->shape[k]], &d)) rows *= d;
    int64_t chunks = rows / LOSS_CHUNK_MIN_ROWS;
    if (chunks > LOSS_CHUNK_MAX) chunks = LOSS_CHUNK_MAX;
    return (int)(chunks < hd->len ? chunks : hd->len);
}

int loss_chunk_forward(ir_graph *g, int slices, FILE *report, char *err, size_t errcap)
{
    int rewritten = 0;
    for (uint32_t i = 0; i < g->noutputs; i++) {
        ir_value ce = g->outputs[i].value;
        chunk_head hd;
        if (!find_head(g, ce, &hd) || users_of(g, ce) != 1) continue;
        int chunks = forward_chunks(g, &hd, slices);
        if (chunks < 2) continue;
        ir_builder c = {.g = g, .who = "chunked loss", .loc = g->nodes[ce].loc, .err = err, .errcap = errcap};
        ir_value loss = IR_NONE;
        for (int k = 0; k < chunks && !c.failed; k++) {   /* in order: each slice's logits die before the next's */
            ir_value hk, part = slice_part(&c, &hd, k, chunks, &hk);
            loss = loss == IR_NONE ? part : irb_op2(&c, OP_ADD, loss, part);
        }
        if (c.failed) return -1;
        if (g->train.loss == ce) g->train.loss = loss;   /* a forward build that keeps its loss (train_cmd's evaluation) */
        g->outputs[i].value = loss;
        rewritten++;
        if (report)
            fprintf(report, "chunk-loss: cross_entropy over %%%u (output %s) computed in %d slices of axis %d "
                    "(one slice of logits alive at a time)\n", hd.logits, g->outputs[i].name, chunks, hd.axis);
    }
    return rewritten;
}

static void count_head(const ir_graph *g, ir_value loss, bool train, loss_chunk_tally *t)
{
    if (!train && users_of(g, loss) != 1) return;
    if (head_unbound(g, loss)) t->unbound++;
    chunk_head hd;
    if (!find_head(g, loss, &hd)) return;
    const int64_t rows = hd.len;
    if (!t->rows || rows < t->rows) t->rows = rows;
    t->heads++;
}

void loss_chunk_count(const ir_graph *g, bool train, loss_chunk_tally *t)
{
    if (train) count_head(g, g->train.loss, true, t);
    else
        for (uint32_t i = 0; i < g->noutputs; i++) count_head(g, g->outputs[i].value, false, t);
}

/* --loss-slices 1 (--no-chunk-loss) asks for the whole loss, which is what
 * a loss too small to slice gets: only a count above 1 goes unheard. */
bool loss_chunk_warnings(int slices, const loss_chunk_tally *t, bool werror, FILE *out)
{
    const int64_t rows = t->rows;
    if (slices < 2) return false;
    if (!t->heads && t->unbound)   /* there is such a loss: it was said to have none */
        return diag_cli_warning(out, werror,
                                "bind the logits' axis that is sliced with --dim (T of [B, T, V]: --dim T=1024), or drop --loss-slices",
                                "--loss-slices %d has no effect: the large-vocabulary loss is sliced along its logits' "
                                "second-to-last axis, whose size is symbolic here", slices);
    if (t->heads > 0) {
        char hint[64];
        snprintf(hint, sizeof hint, "give --loss-slices %lld or less", (long long)rows);
        return rows > 0 && rows < slices &&   /* train_chunks and forward_chunks take no more */
               diag_cli_warning(out, werror, hint, "--loss-slices %d asks for more slices than the loss has rows to split: its "
                                "logits have %lld along the axis sliced, so it is computed in %lld slices",
                                slices, (long long)rows, (long long)rows);
    }
    return diag_cli_warning(out, werror,
                            "drop --loss-slices: only such a large-vocabulary loss is sliced (a smaller one's logits are small)",
                            "--loss-slices %d has no effect: the model has no loss of the form "
                            "cross_entropy(matmul(h, W, transpose_b: true)) over %d or more classes to slice",
                            slices, LOSS_CHUNK_MIN_CLASSES);
}
