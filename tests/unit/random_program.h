/* random_program.h - random .net programs that check, for tests of the code
 * generator (test_kernels_host on the host shim, test_gpu_models through the
 * runtime). A model over an input x: f32, bf16 or u8 [B, ...] (and token ids
 * when a gather wants them) chains elementwise ops, broadcasts (biases,
 * keepdim reductions, explicit), casts between f32, bf16 and f16,
 * transposes, reshapes, slices, concats, gathers, reductions, row ops and
 * norms, products, attention and dropout, in shapes the generator tracks,
 * with now and then a @checkpoint; its train section's loss (a square loss,
 * or a cross entropy over 10 classes or more) reads every output. The same
 * seed gives the same program.
 *
 * The mix leans on what fusion has to get right: chains of movement ops
 * between elementwise ones (read-through), broadcasts of every kind, rows
 * with and without a tail after the vector loops, dims of 1. Values stay
 * moderate (no exp of exp), and the generator avoids inputs whose exact
 * result is rounding noise (a layernorm of a constant row, attention over
 * repeated keys), so results compare within a dtype's rounding.
 *
 * random_program_ex varies a seed's program for test_pass_semantics: ended
 * in a tied language-model head (whose loss compiler/loss_chunk.c slices),
 * or with every statement @checkpoint. random_program's programs are the
 * same as they were before those existed. */
#ifndef NETC_RANDOM_PROGRAM_H
#define NETC_RANDOM_PROGRAM_H

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RP_SYM = -1, RP_MAX_VALUES = 48, RP_MAX_PARAMS = 16, RP_TEXT = 16384, RP_ROWS = 12 };

typedef struct rp_value {
    const char *dtype;               /* "f32", "bf16", "f16" */
    int rank;
    int64_t shape[4];                /* RP_SYM: the batch dim B */
    bool flat_rows;                  /* may hold one value along its last axis (a broadcast's) */
    bool same_rows;                  /* may repeat one row along an axis (a broadcast's) */
} rp_value;

typedef struct rp_gen {
    uint64_t state;
    rp_value v[RP_MAX_VALUES];
    int nv;
    char expr[RP_MAX_VALUES][768];   /* value k is expr[k] */
    bool checkpoint[RP_MAX_VALUES], used[RP_MAX_VALUES];
    char params[2048];
    size_t nparams_text;
    int nparams;
    bool uses_ids, uses_f16;
    bool lm_head;                    /* the program ends in a tied head (rp_lm_head) */
    bool checkpoint_all;             /* every statement @checkpoint (the same program otherwise) */
} rp_gen;

static uint64_t rp_next(rp_gen *g)
{
    g->state ^= g->state << 13;
    g->state ^= g->state >> 7;
    g->state ^= g->state << 17;
    return g->state;
}

static int rp_pick(rp_gen *g, int n) { return (int)(rp_next(g) % (uint64_t)n); }

static void rp_append(char *buf, size_t *len, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n < cap - *len ? (size_t)n : cap - *len - 1;
}

static void rp_shape_text(const rp_value *v, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    rp_append(buf, &n, cap, "[");
    for (int i = 0; i < v->rank; i++)
        if (v->shape[i] == RP_SYM) rp_append(buf, &n, cap, "%sB", i ? ", " : "");
        else rp_append(buf, &n, cap, "%s%lld", i ? ", " : "", (long long)v->shape[i]);
    rp_append(buf, &n, cap, "]");
}

static int rp_sym_axis(const rp_value *v)
{
    for (int i = 0; i < v->rank; i++)
        if (v->shape[i] == RP_SYM) return i;
    return -1;
}

/* A new parameter of the given shape (f32: trained weights are), as it reads
 * in an expression of dtype dt. */
static const char *rp_param(rp_gen *g, int rank, const int64_t *shape, const char *init, const char *dt, char *buf, size_t cap)
{
    rp_value p = {"f32", rank, {0}, false, false};
    memcpy(p.shape, shape, (size_t)rank * sizeof *shape);
    char s[64];
    rp_shape_text(&p, s, sizeof s);
    rp_append(g->params, &g->nparams_text, sizeof g->params, "  param p%d: f32%s = %s\n", g->nparams, s, init);
    if (strcmp(dt, "f32") == 0) snprintf(buf, cap, "p%d", g->nparams);
    else snprintf(buf, cap, "%s(p%d)", dt, g->nparams);
    g->nparams++;
    return buf;
}

static int64_t rp_size(rp_gen *g)
{
    static const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 8, 12, 16, 16, 24, 40, 64};   /* 64: heads for tensor-core attention */
    /* rarely, rows longer than a warp takes (a block a row past 2048) */
    if (rp_pick(g, 40) == 0) return rp_pick(g, 2) ? 1032 : 2056;
    return sizes[rp_pick(g, (int)(sizeof sizes / sizeof *sizes))];
}

/* An operand: one of the last few values most of the time, so chains form. */
static int rp_operand(rp_gen *g)
{
    int recent = g->nv < 3 ? g->nv : 3;
    return rp_pick(g, 4) ? g->nv - 1 - rp_pick(g, recent) : rp_pick(g, g->nv);
}

static int64_t rp_numel_const(const rp_value *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++)
        if (v->shape[i] != RP_SYM) n *= v->shape[i];
    return n;
}

/* Records value K = e, of type r, and which values e reads. */
static void rp_bind(rp_gen *g, const rp_value *r, const char *e)
{
    for (const char *p = e; *p; p++)   /* the values e reads: "v" and digits, not inside a name */
        if (*p == 'v' && p[1] >= '0' && p[1] <= '9' && (p == e || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')))
            g->used[atoi(p + 1)] = true;
    snprintf(g->expr[g->nv], sizeof g->expr[g->nv], "%s", e);
    g->checkpoint[g->nv] = rp_pick(g, 8) == 0;   /* the training step recomputes it instead of keeping it */
    g->checkpoint[g->nv] |= g->checkpoint_all;
    g->v[g->nv++] = *r;
}

/* The model's statements; a value nothing reads is named _vK, as the
 * checker asks of an unused binding. */
static void rp_body(const rp_gen *g, char *out, size_t *n, size_t cap)
{
    for (int k = 0; k < g->nv; k++)
        rp_append(out, n, cap, "  %s%sv%d = %s\n", g->checkpoint[k] ? "@checkpoint " : "", g->used[k] ? "" : "_", k, g->expr[k]);
}

/* The latest other value of a's dtype and shape, or -1. */
static int rp_twin(const rp_gen *g, int a)
{
    const rp_value *x = &g->v[a];
    for (int i = g->nv - 1; i >= 0; i--)
        if (i != a && g->v[i].rank == x->rank && !memcmp(g->v[i].shape, x->shape, (size_t)x->rank * sizeof *x->shape) &&
            !strcmp(g->v[i].dtype, x->dtype))
            return i;
    return -1;
}

static const char *const rp_unary[] = {"relu", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu", "neg", "abs", "square"};

static bool rp_step(rp_gen *g)
{
    char e[1024], pb[64];
    int a = rp_operand(g);
    rp_value x = g->v[a], r = x;
    const char *dt = x.dtype;
    int last = x.rank - 1, sym = rp_sym_axis(&x);
    switch (rp_pick(g, 21)) {
    case 0:   /* unary, maybe scaled */
        snprintf(e, sizeof e, "%s(v%d)%s", rp_unary[rp_pick(g, 9)], a, rp_pick(g, 2) ? " * 0.5" : "");
        break;
    case 1: { /* binary with a value of the same shape, or a bias over the last axes */
        int b = rp_twin(g, a);
        static const char *const ops[] = {"+", "-", "*"};
        if (b >= 0 && rp_pick(g, 2)) {
            snprintf(e, sizeof e, "v%d %s v%d", a, ops[rp_pick(g, 3)], b);
        } else {
            int k = last >= 1 && x.shape[last - 1] != RP_SYM && rp_pick(g, 3) == 0 ? 2 : 1;   /* a bias of one or two axes */
            if (last < 0 || x.shape[last] == RP_SYM) return false;
            snprintf(e, sizeof e, "v%d %s %s", a, ops[rp_pick(g, 3)],
                     rp_param(g, k, &x.shape[x.rank - k], "normal(0.5)", dt, pb, sizeof pb));
        }
        break;
    }
    case 2: { /* minus a reduction over one axis, kept */
        if (last < 0) return false;
        /* over repeated rows that is exact zeros: a head's cross entropy has a
         * gradient at any logits, and back through such a value every
         * parameter's gradient is cancellation noise, which a sliced loss
         * (another order of the same sums) does not reproduce */
        if (g->lm_head && x.same_rows) return false;
        int ax = rp_pick(g, x.rank);
        snprintf(e, sizeof e, "v%d - %s(v%d, axis: %d, keepdim: true)", a, rp_pick(g, 2) ? "max" : "mean", a, ax);
        break;
    }
    case 3: { /* a cast */
        static const char *const to[] = {"f32", "bf16", "f16"};
        const char *t = to[rp_pick(g, 3)];
        if (!strcmp(t, dt)) t = strcmp(dt, "f32") ? "f32" : "bf16";
        snprintf(e, sizeof e, "%s(v%d)", t, a);
        r.dtype = t;
        g->uses_f16 |= !strcmp(t, "f16");
        break;
    }
    case 4: { /* a transpose: the last two axes, or any permutation */
        if (x.rank < 2) return false;
        r.flat_rows = false;
        if (rp_pick(g, 2)) {
            snprintf(e, sizeof e, "transpose(v%d)", a);
            r.shape[last] = x.shape[last - 1], r.shape[last - 1] = x.shape[last];
        } else {
            int perm[4] = {0, 1, 2, 3};
            for (int i = x.rank - 1; i > 0; i--) {
                int j = rp_pick(g, i + 1), t = perm[i];
                perm[i] = perm[j], perm[j] = t;
            }
            size_t n = 0;
            rp_append(e, &n, sizeof e, "transpose(v%d, [", a);
            for (int i = 0; i < x.rank; i++) {
                rp_append(e, &n, sizeof e, "%s%d", i ? ", " : "", perm[i]);
                r.shape[i] = x.shape[perm[i]];
            }
            rp_append(e, &n, sizeof e, "])");
        }
        break;
    }
    case 5: { /* a reshape: merge two adjacent constant axes, or split one */
        int i = rp_pick(g, x.rank);
        r.flat_rows &= i < last - 1;
        if (i + 1 < x.rank && x.shape[i] != RP_SYM && x.shape[i + 1] != RP_SYM && rp_pick(g, 2)) {
            r.shape[i] = x.shape[i] * x.shape[i + 1];
            memmove(&r.shape[i + 1], &x.shape[i + 2], (size_t)(x.rank - i - 2) * sizeof *x.shape);
            r.rank--;
        } else if (x.rank < 4 && x.shape[i] != RP_SYM && x.shape[i] % 2 == 0 && x.shape[i] > 2) {
            memmove(&r.shape[i + 1], &x.shape[i], (size_t)(x.rank - i) * sizeof *x.shape);
            r.shape[i] = 2, r.shape[i + 1] = x.shape[i] / 2;
            r.rank++;
        } else {
            return false;
        }
        char s[64];
        rp_shape_text(&r, s, sizeof s);
        snprintf(e, sizeof e, "reshape(v%d, %s)", a, s);
        break;
    }
    case 6: { /* a slice of a constant axis */
        int i = rp_pick(g, x.rank > 0 ? x.rank : 1);
        if (x.rank == 0 || x.shape[i] == RP_SYM || x.shape[i] < 2) return false;
        int64_t start = rp_pick(g, (int)x.shape[i] - 1), end = start + 1 + rp_pick(g, (int)(x.shape[i] - start));
        snprintf(e, sizeof e, "slice(v%d, axis: %d, start: %lld, end: %lld)", a, i, (long long)start, (long long)end);
        r.shape[i] = end - start;
        break;
    }
    case 7: { /* a concat with itself transformed, along a constant axis */
        int i = rp_pick(g, x.rank > 0 ? x.rank : 1);
        if (x.rank == 0 || x.shape[i] == RP_SYM) return false;
        snprintf(e, sizeof e, "concat([v%d, %s(v%d)], axis: %d)", a, rp_unary[rp_pick(g, 9)], a, i);
        r.shape[i] *= 2;
        break;
    }
    case 8: { /* a reduction over one axis */
        if (x.rank < 2) return false;
        int ax = rp_pick(g, x.rank);
        static const char *const red[] = {"sum", "mean", "max"};
        snprintf(e, sizeof e, "%s(v%d, axis: %d)", red[rp_pick(g, 3)], a, ax);
        memmove(&r.shape[ax], &x.shape[ax + 1], (size_t)(x.rank - ax - 1) * sizeof *x.shape);
        r.rank--;
        if (ax == sym && r.rank == 0) return false;
        if (rp_sym_axis(&r) < 0) return false;   /* keep B in every value: outputs stay batched */
        break;
    }
    case 9: { /* row-wise over the last axis */
        if (last < 0 || x.shape[last] == RP_SYM) return false;
        int k = rp_pick(g, 3);
        /* flat rows: a variance of rounding noise, scaled by 1/sqrt(eps); rows of
         * 2 or 3 normalise to nearly constant values whose gradient is all
         * cancellation: neither gives comparable results */
        if (k == 2 && (x.flat_rows || x.shape[last] < 4)) return false;
        r.flat_rows = false;
        if (k == 2) {
            char w[64], bias[64];
            rp_param(g, 1, &x.shape[last], "ones", dt, w, sizeof w);
            rp_param(g, 1, &x.shape[last], "normal(0.1)", dt, bias, sizeof bias);
            snprintf(e, sizeof e, "layernorm(v%d, %s, %s)", a, w, bias);
        } else {
            snprintf(e, sizeof e, "%s(v%d)", k ? "softmax" : "log_softmax", a);
        }
        break;
    }
    case 10: { /* a product with a weight */
        if (last < 0 || x.shape[last] == RP_SYM) return false;
        int64_t shape[2] = {x.shape[last], rp_size(g)};
        if (shape[1] == 1) shape[1] = 6;
        snprintf(e, sizeof e, "v%d @ %s", a, rp_param(g, 2, shape, "xavier", dt, pb, sizeof pb));
        r.shape[last] = shape[1];
        r.flat_rows = false;
        break;
    }
    case 11: { /* rows of a table picked by the token ids, added to a [B, C] value */
        if (x.rank != 2 || x.shape[0] != RP_SYM || x.shape[1] == RP_SYM) return false;
        int64_t shape[2] = {RP_ROWS, x.shape[1]};
        rp_param(g, 2, shape, "normal(1.0)", dt, pb, sizeof pb);
        snprintf(e, sizeof e, "v%d + gather(%s, ids)", a, pb);
        r.flat_rows = false;
        g->uses_ids = true;
        break;
    }
    case 12: { /* an explicit broadcast: a new axis of 3 after B */
        if (x.rank < 1 || x.rank > 3 || sym != 0) return false;
        memmove(&r.shape[2], &x.shape[1], (size_t)(x.rank - 1) * sizeof *x.shape);
        r.shape[1] = 3;
        r.rank++;
        r.flat_rows = x.rank == 1;   /* the new axis is the last */
        r.same_rows = true;
        char s[64], k[64];
        rp_value keep = x;   /* [B, 1, ...] first: broadcast fills axes of 1 */
        memmove(&keep.shape[2], &x.shape[1], (size_t)(x.rank - 1) * sizeof *x.shape);
        keep.shape[1] = 1;
        keep.rank++;
        rp_shape_text(&keep, k, sizeof k);
        rp_shape_text(&r, s, sizeof s);
        snprintf(e, sizeof e, "broadcast(reshape(v%d, %s), %s) * 0.5", a, k, s);
        break;
    }
    case 13: { /* a select on the sign */
        snprintf(e, sizeof e, "where(v%d > 0.25, v%d, %s(v%d))", a, a, rp_unary[rp_pick(g, 9)], a);
        break;
    }
    case 14: { /* smooth arithmetic on bounded values */
        static const char *const forms[] = {"log(abs(v%d) + 1.0)", "sqrt(square(v%d) + 0.5)", "rsqrt(abs(v%d) + 0.5)",
                                            "exp(tanh(v%d))", "v%d / (abs(v%d) + 1.0)", "pow(abs(v%d) + 0.5, 1.5)"};
        snprintf(e, sizeof e, forms[rp_pick(g, 6)], a, a);
        break;
    }
    case 15: { /* rmsnorm over the last axis */
        if (last < 0 || x.shape[last] == RP_SYM || x.shape[last] < 4) return false;
        snprintf(e, sizeof e, "rmsnorm(v%d, %s)", a, rp_param(g, 1, &x.shape[last], "ones", dt, pb, sizeof pb));
        r.flat_rows = false;
        break;
    }
    case 16: /* dropout: the training step's mask */
        snprintf(e, sizeof e, "dropout(v%d, p: 0.25)", a);
        break;
    case 17: { /* attention over [B, T, D]: keys through a weight, values through tanh */
        /* not over repeated rows (equal keys), nor a handful of positions, where a
         * causal first query's gradient is all cancellation: no comparable result */
        if (x.rank != 3 || sym != 0 || x.shape[1] < 4 || x.shape[2] < 2 || x.same_rows) return false;
        const char *causal = rp_pick(g, 2) ? ", causal: true" : "";
        if (strcmp(dt, "f32") == 0 && rp_pick(g, 2)) {   /* heads of 64 in bf16: the tensor-core kernels */
            char q[64], k[64], w[64];
            int64_t shape[2] = {x.shape[2], 64};
            rp_param(g, 2, shape, "xavier", dt, q, sizeof q);
            rp_param(g, 2, shape, "xavier", dt, k, sizeof k);
            rp_param(g, 2, shape, "xavier", dt, w, sizeof w);
            snprintf(e, sizeof e, "f32(attention(bf16(v%d @ %s), bf16(v%d @ %s), bf16(tanh(v%d @ %s))%s))", a, q, a, k, a, w, causal);
            r.shape[2] = 64;
            r.flat_rows = false;
            break;
        }
        int64_t shape[2] = {x.shape[2], x.shape[2]};
        rp_param(g, 2, shape, "xavier", dt, pb, sizeof pb);
        snprintf(e, sizeof e, "attention(v%d, v%d @ %s, tanh(v%d)%s)", a, a, pb, a, causal);
        break;
    }
    case 18: /* minus the mean of everything */
        snprintf(e, sizeof e, "v%d - mean(v%d)", a, a);
        break;
    case 19: { /* the larger or smaller of two values of one shape, or of a value and a literal */
        int b = rp_twin(g, a);
        const char *f = rp_pick(g, 2) ? "maximum" : "minimum";
        if (b >= 0) snprintf(e, sizeof e, "%s(v%d, v%d)", f, a, b);
        else snprintf(e, sizeof e, "%s(v%d, 0.1)", f, a);
        break;
    }
    default: { /* scalar arithmetic */
        snprintf(e, sizeof e, "v%d * 1.5 + 0.25", a);
        break;
    }
    }
    if (rp_numel_const(&r) > 4096 || r.rank > 4 || r.rank < 1) return false;
    rp_bind(g, &r, e);
    return true;
}

/* The body's last value through a tied language-model head: the model
 * returns cross_entropy(matmul(h, W, transpose_b: true), targets) over
 * RP_LM_CLASSES classes, the loss compiler/loss_chunk.c slices (it wants
 * that many classes and one [classes, C] weight). False (no program) when
 * the last value has no constant last axis C of at most 64 (a larger W
 * would make a unit test slow) or no leading axis to slice. */
enum { RP_LM_CLASSES = 4096 };

static bool rp_lm_head(rp_gen *g, const char *xt, const char *sx, char *out, size_t cap)
{
    const rp_value *h = &g->v[g->nv - 1];
    int last = h->rank - 1;
    /* the head slices the axis before the classes: not one of 1 (B is bound to 2 or more where this is used) */
    if (last < 1 || h->shape[last] == RP_SYM || h->shape[last] > 64 || h->shape[last - 1] == 1) return false;
    rp_value t = *h;   /* the targets: the logits' shape without the classes */
    t.rank--;
    int64_t wshape[2] = {RP_LM_CLASSES, h->shape[last]};
    char w[64], st[64], hx[64];
    rp_param(g, 2, wshape, "normal(0.5)", "f32", w, sizeof w);
    rp_shape_text(&t, st, sizeof st);
    /* logits in f32 whatever h's dtype: the head's sums are what slicing reorders */
    snprintf(hx, sizeof hx, strcmp(h->dtype, "f32") ? "f32(v%d)" : "v%d", g->nv - 1);
    g->used[g->nv - 1] = true;
    size_t n = 0;
    rp_append(out, &n, cap, "# random program with a tied head\n");
    rp_append(out, &n, cap, "model m(x: %s%s%s, targets: i32%s) -> (loss: f32) {\n", xt, sx, g->uses_ids ? ", ids: i32[B]" : "", st);
    rp_append(out, &n, cap, "%s", g->params);
    rp_body(g, out, &n, cap);
    rp_append(out, &n, cap, "  return cross_entropy(matmul(%s, %s, transpose_b: true), targets%s)\n}\n", hx, w,
              rp_pick(g, 2) ? ", smoothing: 0.1" : "");
    rp_append(out, &n, cap, "train m {\n  optimizer sgd(lr: 0.01)\n%s}\n", g->uses_f16 ? "  loss_scale dynamic\n" : "");
    return n + 1 < cap;
}

/* How random_program_ex varies a program. */
enum {
    RP_LM_HEAD = 1,          /* end in a tied head (rp_lm_head): another program */
    RP_CHECKPOINT_ALL = 2,   /* the same program with every statement @checkpoint: the same values */
};

/* The program for seed, in out (cap bytes); false if it does not fit (or,
 * with RP_LM_HEAD, if its last value cannot feed the head: rp_lm_head).
 * Without RP_LM_HEAD the programs are those random_program gives. */
static bool random_program_ex(uint64_t seed, char *out, size_t cap, unsigned flags)
{
    bool lm_head = flags & RP_LM_HEAD;
    static rp_gen g;
    memset(&g, 0, sizeof g);
    g.state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    for (int i = 0; i < 8; i++) rp_next(&g);
    g.lm_head = lm_head;
    g.checkpoint_all = flags & RP_CHECKPOINT_ALL;
    static const char *const input_types[] = {"f32", "f32", "bf16", "u8"};
    const char *xt = input_types[rp_pick(&g, 4)];
    rp_value in = {"f32", 2 + rp_pick(&g, 2), {RP_SYM, rp_size(&g), rp_size(&g)}, false, false};
    if (in.shape[in.rank - 1] == 1) in.shape[in.rank - 1] = 8;
    if (strcmp(xt, "u8") != 0) in.dtype = xt;   /* bytes (an image's) are scaled to f32 first */
    char pb[64], e[256];
    rp_value first = in;   /* every program has a trained parameter */
    snprintf(e, sizeof e, "v0 * %s", rp_param(&g, 1, &in.shape[in.rank - 1], "normal(1.0)", in.dtype, pb, sizeof pb));
    rp_bind(&g, &in, strcmp(xt, "u8") ? "x" : "f32(x) * 0.1");
    rp_bind(&g, &first, e);
    int steps = 6 + rp_pick(&g, 8);
    for (int tries = 0; steps > 0 && tries < 400 && g.nv < RP_MAX_VALUES - 1 && g.nparams < RP_MAX_PARAMS - 2; tries++)
        if (rp_step(&g)) steps--;
    int y0 = g.nv - 1, y1 = 2 + rp_pick(&g, g.nv - 2 > 0 ? g.nv - 2 : 1);
    if (y1 >= y0) y1 = 1;
    if (lm_head) {
        char sxl[64];
        rp_shape_text(&in, sxl, sizeof sxl);
        return rp_lm_head(&g, xt, sxl, out, cap);
    }
    char s0[64], s1[64], sx[64];
    rp_shape_text(&g.v[y0], s0, sizeof s0);
    rp_shape_text(&g.v[y1], s1, sizeof s1);
    rp_shape_text(&in, sx, sizeof sx);
    size_t n = 0;
    rp_append(out, &n, cap, "# random program, seed %llu\n", (unsigned long long)seed);
    rp_append(out, &n, cap, "model m(x: %s%s%s) -> (y0: %s%s, y1: %s%s) {\n", xt, sx, g.uses_ids ? ", ids: i32[B]" : "",
              g.v[y0].dtype, s0, g.v[y1].dtype, s1);
    g.used[y0] = g.used[y1] = true;
    rp_append(out, &n, cap, "%s", g.params);
    rp_body(&g, out, &n, cap);
    rp_append(out, &n, cap, "  return v%d, v%d\n}\n", y0, y1);
    /* rows of 10 classes or more: a cross entropy over them (the labels are below 10) */
    const rp_value *o = &g.v[y0];
    bool classes = o->rank == 2 && o->shape[0] == RP_SYM && o->shape[1] >= 10;
    rp_append(out, &n, cap, "train m%s {\n", classes ? "(labels: i32[B])" : "");
    if (classes) rp_append(out, &n, cap, "  loss = cross_entropy(y0, labels%s)", rp_pick(&g, 2) ? ", smoothing: 0.1" : "");
    else rp_append(out, &n, cap, "  loss = mean(square(%s(y0)))", strcmp(o->dtype, "f32") ? "f32" : "");
    rp_append(out, &n, cap, " + mean(square(%s(y1)))\n  optimizer sgd(lr: 0.01)\n%s}\n", strcmp(g.v[y1].dtype, "f32") ? "f32" : "",
              g.uses_f16 ? "  loss_scale dynamic\n" : "");
    return n + 1 < cap;
}

static bool random_program(uint64_t seed, char *out, size_t cap) { return random_program_ex(seed, out, cap, 0); }

#endif
