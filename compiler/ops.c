/* ops.c - the op table's information array and its type rules.
 *
 * ir_build is the one door through which sema (and later passes) add checked
 * nodes: it applies the op's dtype rule and shape rule and, on failure, says
 * what is wrong in words a model author understands. ir_verify reuses the same
 * rules to check that every node's type still follows from its operands. */
#include "ops.h"
#include "index_range.h"
#include "ir.h"
#include "typecheck.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const nc_op_info nc_ops[OP_COUNT] = {
#define X(e, name, nargs, cat, dt, flags, shape, cpu, cuda, cexpr, grad, kw, meaning) \
    [e] = {#name, nargs, cat, dt, flags, kw, meaning},
#include "ops.def"
#undef X
};

const char *op_name(nc_op op) { return op < OP_COUNT ? nc_ops[op].name : "?"; }

bool op_from_name(const char *name, nc_op *out)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(nc_ops[i].name, name) == 0) {
            *out = (nc_op)i;
            return true;
        }
    return false;
}

int op_optional_operands(nc_op op) { return strstr(nc_ops[op].kwargs, ":operand=") ? 1 : 0; }

/* ------------------------------------------------------------------ */
/* error reporting for rules                                           */

/* tc_error's msg and hint when empty: never freed. */
static char tc_none[1];

void tc_error_free(tc_error *e)
{
    if (e->msg && e->msg != tc_none) free(e->msg);
    if (e->hint && e->hint != tc_none) free(e->hint);
    e->msg = e->hint = tc_none;
    for (uint32_t i = 0; i < e->ntexts; i++) free(e->texts[i]);
    free(e->texts);
    e->texts = NULL;
    e->ntexts = 0;
}

static void tc_error_start(tc_error *e)
{
    *e = (tc_error){.msg = tc_none, .hint = tc_none, .arg = -1};
}

/* *field (msg or hint) replaced by the text fmt writes, at its length. */
static void set_text(char **field, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *text = n > 0 ? nc_xmalloc((size_t)n + 1) : tc_none;
    if (n > 0) vsnprintf(text, (size_t)n + 1, fmt, again);
    va_end(again);
    if (*field && *field != tc_none) free(*field);
    *field = text;
}

static bool fail(tc_error *e, int arg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_text(&e->msg, fmt, ap);
    va_end(ap);
    e->arg = arg;
    e->attr = NULL;
    return false;
}

/* A failure about an attribute: field is its field in the op's kwargs spec,
 * so the caret can go to the argument that set it (tc_error.attr). */
static bool fail_attr(tc_error *e, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_text(&e->msg, fmt, ap);
    va_end(ap);
    e->arg = -1;
    e->attr = field;
    return false;
}

/* Whether an op's kwargs spec ("name:field=default ...") fills field. */
static bool spec_has_field(const char *spec, const char *field)
{
    size_t len = strlen(field);
    for (const char *p = strchr(spec, ':'); p; p = strchr(p + 1, ':'))
        if (strncmp(p + 1, field, len) == 0 && p[1 + len] == '=') return true;
    return false;
}

/* Success, the result's dims set by an attribute (fill's shape,
 * scatter_add's rows): sema points there if they pass the tensor limits. */
static bool shaped_by(const ir_node *n, tc_error *e, const char *field)
{
    e->attr = spec_has_field(nc_ops[n->op].kwargs, field) ? field : NULL;
    return true;
}

static void hint(tc_error *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_text(&e->hint, fmt, ap);
    va_end(ap);
}

/* A text that e's msg or hint quotes (a shape, a dim, a binding), whole:
 * e holds it until tc_error_free, so a rule passes it straight to fail. */
static const char *keep_text(tc_error *e, char *text)
{
    e->texts = nc_xrealloc(e->texts, (e->ntexts + 1) * sizeof *e->texts);
    return e->texts[e->ntexts++] = text;
}

static const char *shape_text(tc_error *e, const ir_graph *g, const ir_node *n)
{
    return keep_text(e, ir_shape_str(g, n->dtype, n->rank, n->shape));
}

static const char *dim_text(tc_error *e, const ir_graph *g, uint32_t d) { return keep_text(e, ir_dim_str(g, d)); }

/* A dim the graph does not hold (T - 1 of a length T), as dim_text. */
static const char *dim_expr_text(tc_error *e, const ir_graph *g, const dim_expr *d)
{
    const char *const *names = (const char *const *)g->sym_names;
    size_t len = dim_format(d, names, NULL, 0) + 1;
    char *text = nc_xmalloc(len);
    dim_format(d, names, text, len);
    return keep_text(e, text);
}

static const char *syms_text(tc_error *e, const ir_graph *g, const int64_t *syms) { return keep_text(e, ir_syms_str(g, syms)); }

/* keep_text of the text fmt writes. */
static const char *keep_textf(tc_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *keep_textf(tc_error *e, const char *fmt, ...)
{
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    set_text(&text, fmt, ap);
    va_end(ap);
    return keep_text(e, text == tc_none ? nc_xstrdup("") : text);
}

/* " at models/lm.net:12", where n came from: "" for a node of no source. */
static const char *where_text(tc_error *e, const ir_graph *g, const ir_node *n)
{
    if (n->loc.file < 1 || n->loc.file > g->nfiles) return "";
    return keep_textf(e, " at %s:%u", g->files[n->loc.file - 1], n->loc.line);
}

/* ------------------------------------------------------------------ */
/* dtype rules                                                         */

static bool same_dtype(const ir_graph *g, const char *op, const ir_value *a, int from, int to,
                       tc_error *e)
{
    nc_dtype t0 = g->nodes[a[from]].dtype;
    for (int i = from + 1; i < to; i++) {
        nc_dtype ti = g->nodes[a[i]].dtype;
        if (ti == t0) continue;
        fail(e, i, "%s: operands differ in dtype: %s and %s", op, dtype_name(t0), dtype_name(ti));
        if (dtype_is_float(t0) && dtype_is_float(ti))
            hint(e, "no silent mixing of precisions: insert %s(...) around the %s operand, "
                    "or %s(...) around the %s one", dtype_name(t0), dtype_name(ti), dtype_name(ti),
                 dtype_name(t0));
        else
            hint(e, "insert an explicit cast, e.g. %s(...)", dtype_name(t0));
        return false;
    }
    return true;
}

static bool need_float(const ir_graph *g, const char *op, const ir_value *a, int i, tc_error *e)
{
    nc_dtype t = g->nodes[a[i]].dtype;
    if (dtype_is_float(t)) return true;
    fail(e, i, "%s: expects a floating-point tensor, got %s", op, dtype_name(t));
    hint(e, "convert it first, e.g. f32(...)");
    return false;
}

static bool need_dtype(const ir_graph *g, const char *op, const ir_value *a, int i, nc_dtype want,
                       const char *role, tc_error *e)
{
    nc_dtype t = g->nodes[a[i]].dtype;
    if (t == want) return true;
    fail(e, i, "%s: %s must be %s, got %s", op, role, dtype_name(want), dtype_name(t));
    if (want == NC_BOOL) hint(e, "write a comparison such as (... > 0.0), or bool(...), which is (... != 0)");
    else hint(e, "convert it: %s(...)", dtype_name(want));
    return false;
}

/* One rule per nc_dtype_rule (ops.h says what each accepts): checks the
 * operands' dtypes and sets the result's. op is the op's name, na its
 * operands (a random op's step left out). */
typedef bool dtype_rule(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e);

static bool dt_declared(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    return true;
}

static bool dt_numeric(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    if (!same_dtype(g, op, a, 0, na, e)) return false;
    if (g->nodes[a[0]].dtype == NC_BOOL) {
        fail(e, 0, "%s: not defined on bool tensors", op);
        hint(e, "convert the mask first, e.g. f32(...) or i32(...): true becomes 1");
        return false;
    }
    n->dtype = g->nodes[a[0]].dtype;
    return true;
}

/* Every operand float, all one dtype. */
static bool all_float_alike(const ir_graph *g, const ir_value *a, const char *op, int na, tc_error *e)
{
    for (int i = 0; i < na; i++)
        if (!need_float(g, op, a, i, e)) return false;
    return same_dtype(g, op, a, 0, na, e);
}

static bool dt_float(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    if (!all_float_alike(g, a, op, na, e)) return false;
    n->dtype = g->nodes[a[0]].dtype;
    return true;
}

static bool dt_float_f32(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    if (!all_float_alike(g, a, op, na, e)) return false;
    n->dtype = NC_F32;
    return true;
}

static bool dt_compare(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    if (!same_dtype(g, op, a, 0, na, e)) return false;
    n->dtype = NC_BOOL;
    return true;
}

static bool dt_where(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    if (!need_dtype(g, op, a, 0, NC_BOOL, "the condition", e)) return false;
    if (!same_dtype(g, op, a, 1, 3, e)) return false;
    n->dtype = g->nodes[a[1]].dtype;
    return true;
}

static bool dt_cast(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    n->dtype = n->attr.to;
    return true;
}

static bool dt_any(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    n->dtype = g->nodes[a[0]].dtype;
    return true;
}

static bool dt_same_any(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    if (!same_dtype(g, op, a, 0, na, e)) return false;
    n->dtype = g->nodes[a[0]].dtype;
    return true;
}

static bool dt_gather(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    if (!need_dtype(g, op, a, 1, NC_I32, "the indices", e)) return false;
    n->dtype = g->nodes[a[0]].dtype;
    return true;
}

static bool dt_scatter(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    if (!need_dtype(g, op, a, 0, NC_I32, "the indices", e)) return false;
    if (!need_float(g, op, a, 1, e)) return false;
    n->dtype = g->nodes[a[1]].dtype;
    return true;
}

static bool dt_attention(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    int lens = ir_keyword_operand_slot(n), nt = lens >= 0 ? lens : na;
    if (lens >= 0 && !need_dtype(g, op, a, lens, NC_I32, "the key lengths", e)) return false;
    int nsame = nt < 4 ? nt : 4;
    if (!all_float_alike(g, a, op, nsame, e)) return false;
    for (int i = nsame; i < nt; i++)
        if (!need_dtype(g, op, a, i, NC_F32, "the row statistics", e)) return false;
    n->dtype = n->op == OP_ATTENTION_LSE ? NC_F32 : g->nodes[a[0]].dtype;
    return true;
}

static bool dt_loss(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    if (!need_float(g, op, a, 0, e)) return false;
    if (!need_dtype(g, op, a, 1, NC_I32, "the targets", e)) return false;
    n->dtype = NC_F32;
    return true;
}

/* the gradient, in the logits' own dtype */
static bool dt_loss_grad(const ir_graph *g, ir_node *n, const ir_value *a, const char *op, int na, tc_error *e)
{
    if (!need_float(g, op, a, 0, e)) return false;
    if (!need_dtype(g, op, a, 1, NC_I32, "the targets", e)) return false;
    if (!need_dtype(g, op, a, 2, NC_F32, "the scale", e)) return false;
    n->dtype = g->nodes[a[0]].dtype;
    return true;
}

static dtype_rule *const dtype_rules[] = {
    [DT_DECLARED] = dt_declared, [DT_NUMERIC] = dt_numeric,     [DT_FLOAT] = dt_float,
    [DT_COMPARE] = dt_compare,   [DT_WHERE] = dt_where,         [DT_CAST] = dt_cast,
    [DT_ANY] = dt_any,           [DT_SAME_ANY] = dt_same_any,   [DT_GATHER] = dt_gather,
    [DT_SCATTER] = dt_scatter,   [DT_LOSS] = dt_loss,           [DT_LOSS_GRAD] = dt_loss_grad,
    [DT_FLOAT_F32] = dt_float_f32, [DT_ATTENTION] = dt_attention,
};
_Static_assert(NC_COUNT(dtype_rules) == DT_COUNT, "a dtype rule without its function");

static bool apply_dtype_rule(const ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    nc_dtype_rule r = nc_ops[n->op].dtype_rule;
    if (r >= DT_COUNT || !dtype_rules[r]) NC_BUG("dtype rule %d", r);
    return dtype_rules[r](g, n, a, nc_ops[n->op].name, n->nargs, e);
}

/* ------------------------------------------------------------------ */
/* shape rules: each sets n->rank and n->shape from the operands       */

typedef bool shape_rule(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e);

static void copy_shape(ir_node *n, const ir_node *from)
{
    n->rank = from->rank;
    memcpy(n->shape, from->shape, sizeof n->shape);
}

static bool shape_declared(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    (void)g, (void)a;
    return shaped_by(n, e, "shape");   /* fill's; an input's or parameter's are declared */
}

static int norm_axis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

/* The largest whole number a dtype holds exactly with all below it:
 * 2^(mantissa bits + 1) for floats, the largest value for u8 and bool (an
 * iota past it would wrap to 0 or collapse to true), and i32 every index. */
static int64_t float_exact_limit(nc_dtype t)
{
    switch (t) {
    case NC_BF16: return 256;
    case NC_F16: return 2048;
    case NC_F32: return 16777216;
    case NC_U8: return 255;
    case NC_BOOL: return 1;
    default: return INT64_MAX;
    }
}

static bool shape_iota(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    (void)g, (void)a;
    int ax = norm_axis(n->attr.axis, n->rank);
    if (ax < 0 || ax >= n->rank) return fail_attr(e, "axis", "iota: axis %d out of range for rank %d", n->attr.axis, n->rank);
    n->attr.axis = ax;
    /* a bf16 iota of 300 would silently repeat 256 where 257 belongs; a
     * symbolic length is checked when a session binds it (bind_iota) */
    int64_t len;
    const int64_t exact = float_exact_limit(n->dtype);
    if (dim_is_const(&g->dims[n->shape[ax]], &len) && len - 1 > exact) {
        fail_attr(e, "dtype", "iota: indices up to %lld are not %s %s, which holds whole numbers only up to %lld",
                  (long long)(len - 1), dtype_is_float(n->dtype) ? "exact in" : "held by", dtype_name(n->dtype),
                  (long long)exact);
        hint(e, "make the iota i32 (or f32) and cast the values you compute from it");
        return false;
    }
    return shaped_by(n, e, "shape");
}

/* A size's value as a scalar: f32 holds any count (rounded past 2^24, as a
 * float literal is), i32 the indices and counts integer arithmetic needs;
 * one wider than 2^31 - 1 is refused where a session binds it (bind_dim_value). */
static bool shape_dim_value(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    (void)a;
    if (n->rank != 0) return fail(e, -1, "dim_value: the result is a scalar, got rank %d", n->rank);
    if (n->dtype != NC_F32 && n->dtype != NC_I32)
        return fail_attr(e, "dtype", "dim_value: counts in f32 or i32, got %s", dtype_name(n->dtype));
    if (n->attr.lo >= g->ndims) return fail_attr(e, "size", "dim_value: dim %u out of range", n->attr.lo);
    return true;
}

static bool shapes_equal(const ir_node *x, const ir_node *y)
{
    return x->rank == y->rank && memcmp(x->shape, y->shape, x->rank * sizeof(uint32_t)) == 0;
}

static bool shape_same(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]];
    for (int i = 1; i < n->nargs; i++) {
        const ir_node *y = &g->nodes[a[i]];
        if (!shapes_equal(x, y)) {
            return fail(e, i, "%s: operand shapes differ: %s and %s", nc_ops[n->op].name,
                        shape_text(e, g, x), shape_text(e, g, y));
        }
    }
    copy_shape(n, x);
    return true;
}

/* dropout(x, p): zeroes an element with probability p and scales the rest by
 * 1 / (1 - p), so p = 1 would divide by zero */
static bool shape_dropout(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    if (!(n->attr.f >= 0 && n->attr.f < 1)) return fail_attr(e, "f", "dropout: p must be in [0, 1), got %g", n->attr.f);
    return shape_same(g, n, a, e);
}

/* Reduce axes: none given = all; normalised, sorted, distinct. */
static bool shape_reduce(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]];
    bool reduced[NC_MAX_RANK] = {0};
    if (n->attr.naxes == 0) {
        n->attr.naxes = x->rank;
        for (int i = 0; i < x->rank; i++) n->attr.axes[i] = (int8_t)i;
    }
    for (int i = 0; i < n->attr.naxes; i++) {
        int ax = norm_axis(n->attr.axes[i], x->rank);
        if (ax < 0 || ax >= x->rank)
            return fail_attr(e, "axes", "%s: axis %d out of range for a rank-%d tensor", nc_ops[n->op].name,
                             n->attr.axes[i], x->rank);
        if (reduced[ax]) return fail_attr(e, "axes", "%s: axis %d given twice", nc_ops[n->op].name, ax);
        reduced[ax] = true;
    }
    int k = 0, r = 0;
    for (int i = 0; i < x->rank; i++) {
        if (reduced[i]) {
            n->attr.axes[k++] = (int8_t)i;
            if (n->attr.keepdim) n->shape[r++] = ir_dim_const(g, 1);
        } else {
            n->shape[r++] = x->shape[i];
        }
    }
    n->rank = (uint8_t)r;
    return true;
}

static bool shape_rowwise(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]];
    if (x->rank == 0) return fail(e, 0, "%s: needs a tensor of rank 1 or more", nc_ops[n->op].name);
    copy_shape(n, x);
    return true;
}

/* layernorm(x, w, b) / rmsnorm(x, w): w and b are vectors over x's last axis. */
static bool shape_norm(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    if (!shape_rowwise(g, n, a, e)) return false;
    if (!(n->attr.f > 0 && isfinite(n->attr.f)))   /* sqrt(var + eps) of a constant row */
        return fail_attr(e, "f", "%s: eps must be finite and above 0, got %g", nc_ops[n->op].name, n->attr.f);
    const ir_node *x = &g->nodes[a[0]];
    uint32_t c = x->shape[x->rank - 1];
    for (int i = 1; i < n->nargs; i++) {
        const ir_node *w = &g->nodes[a[i]];
        if (w->rank != 1 || w->shape[0] != c) {
            return fail(e, i, "%s: %s must have shape [%s] (the last axis of x), got %s",
                        nc_ops[n->op].name, i == 1 ? "the weight" : "the bias",
                        dim_text(e, g, c), shape_text(e, g, w));
        }
    }
    return true;
}

/* (x [..., C], w [C], g shaped like x): dx, shaped like x */
static bool shape_norm_grad(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]], *w = &g->nodes[a[1]], *gr = &g->nodes[a[2]];
    if (x->rank < 1 || w->rank != 1 || w->shape[0] != x->shape[x->rank - 1])
        return fail(e, 1, "%s: the weight must have shape [C] of x's last axis, got %s and %s", nc_ops[n->op].name,
                    shape_text(e, g, x), shape_text(e, g, w));
    if (!shapes_equal(gr, x))
        return fail(e, 2, "%s: the gradient must be shaped like x, got %s and %s", nc_ops[n->op].name,
                    shape_text(e, g, x), shape_text(e, g, gr));
    copy_shape(n, x);
    return true;
}

/* norm_param_grad(x, g): [C] of x's last axis */
static bool shape_norm_param_grad(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]], *gr = &g->nodes[a[1]];
    if (x->rank < 1 || !shapes_equal(gr, x))
        return fail(e, 1, "norm_param_grad: the gradient must be shaped like x, got %s and %s", shape_text(e, g, x),
                    shape_text(e, g, gr));
    if (n->attr.axis < 0 || n->attr.axis > 2) return fail_attr(e, "axis", "norm_param_grad: wrt must be 0 (bias), 1 (layernorm weight) or 2 (rmsnorm weight)");
    n->rank = 1;
    n->shape[0] = x->shape[x->rank - 1];
    return true;
}

static bool shape_cross_entropy(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *lg = &g->nodes[a[0]], *tg = &g->nodes[a[1]];
    if (lg->rank < 1 || tg->rank != lg->rank - 1 ||
        memcmp(lg->shape, tg->shape, tg->rank * sizeof(uint32_t)) != 0)
        return fail(e, 1, "cross_entropy: targets must have the logits' shape without the class axis: "
                          "logits %s, targets %s", shape_text(e, g, lg), shape_text(e, g, tg));
    if (n->attr.f < 0 || n->attr.f >= 1)
        return fail_attr(e, "f", "cross_entropy: smoothing must be in [0, 1), got %g", n->attr.f);
    n->rank = 0;
    return true;
}

/* cross_entropy_grad(logits, targets, g): the logits' shape; g, the mean
 * loss's gradient, is a scalar. */
static bool shape_cross_entropy_grad(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    if (!shape_cross_entropy(g, n, a, e)) return false;
    if (g->nodes[a[2]].rank != 0) return fail(e, 2, "cross_entropy_grad: the loss's gradient must be a scalar");
    copy_shape(n, &g->nodes[a[0]]);
    return true;
}

/* The key lengths, if given: i32 over q's leading axes [B, H, ...] or a
 * prefix of them ([B]: one length for every head of a sequence). */
static bool attention_lengths(ir_graph *g, const ir_node *n, const ir_value *a, tc_error *e)
{
    int slot = ir_keyword_operand_slot(n);
    if (slot < 0) return true;
    const ir_node *q = &g->nodes[a[0]], *len = &g->nodes[a[slot]];
    int lead = q->rank - 2;
    if (len->rank <= lead && memcmp(len->shape, q->shape, len->rank * sizeof(uint32_t)) == 0) return true;
    ir_node want = *q;
    want.rank = (uint8_t)(lead > 0 ? lead : 0);
    want.dtype = NC_I32;
    fail(e, slot, "%s: lengths must be q's leading axes %s (or a prefix of them), got %s; q is %s", nc_ops[n->op].name,
         shape_text(e, g, &want), shape_text(e, g, len), shape_text(e, g, q));
    hint(e, "one length per sequence (and head): query row b sees key j only when j < lengths[b]");
    return false;
}

/* q [..., T, D] and k [..., S, D] (and v [..., S, E] when nv): the same
 * batch axes, one head size; causal needs T == S. */
/* q's (and k's) head size and v's, constants the GPU kernels can hold: a
 * row of q and of v lives in registers (cuda_emit.c). */
static bool attention_heads_fit(const ir_graph *g, const ir_node *n, const ir_value *a, bool with_v, tc_error *e)
{
    int r = g->nodes[a[0]].rank;
    for (int i = 0; i < (with_v ? 3 : 1); i += 2) {
        uint32_t head = g->nodes[a[i]].shape[r - 1];
        int64_t d;
        if (dim_is_const(&g->dims[head], &d) && d <= OP_ATTENTION_MAX_HEAD) continue;
        fail(e, i, "%s: %s must be a constant of at most %d, got %s", nc_ops[n->op].name,
             i == 0 ? "the head size (q's and k's last axis)" : "v's last axis", OP_ATTENTION_MAX_HEAD, dim_text(e, g, head));
        if (dim_is_const(&g->dims[head], &d))
            hint(e, "the GPU kernels hold a row of q and of v in registers: use more, narrower heads");
        else
            hint(e, "the kernels are made for one size: write the axis as a number or a config constant");
        return false;
    }
    return true;
}

static bool attention_operands(ir_graph *g, const ir_node *n, const ir_value *a, bool with_v, tc_error *e)
{
    const char *op = nc_ops[n->op].name;
    const ir_node *q = &g->nodes[a[0]], *k = &g->nodes[a[1]];
    int r = q->rank;
    for (int i = 1; i < (with_v ? 3 : 2); i++) {
        const ir_node *x = &g->nodes[a[i]];
        if (r < 2 || x->rank != r || memcmp(x->shape, q->shape, (r - 2) * sizeof(uint32_t)) != 0)
            return fail(e, i, "%s: q, k and v must be [..., length, head size] with the same leading axes, got %s and %s", op,
                        shape_text(e, g, q), shape_text(e, g, x));
    }
    if (k->shape[r - 1] != q->shape[r - 1])
        return fail(e, 1, "%s: q and k have different head sizes: %s and %s", op, shape_text(e, g, q),
                    shape_text(e, g, k));
    if (with_v && g->nodes[a[2]].shape[r - 2] != k->shape[r - 2])
        return fail(e, 2, "%s: k and v have different lengths: %s and %s", op, shape_text(e, g, k),
                    shape_text(e, g, &g->nodes[a[2]]));
    if (n->attr.causal && k->shape[r - 2] != q->shape[r - 2]) {
        fail_attr(e, "causal", "%s: causal attention needs as many keys as queries: q %s, k %s", op,
                  shape_text(e, g, q), shape_text(e, g, k));
        hint(e, "causal: true lets query i see keys 0..i of the same sequence; attention across two sequences "
                "(cross-attention) is not causal");
        return false;
    }
    if (!isfinite(n->attr.f)) return fail_attr(e, "f", "%s: scale must be finite, got %g", op, n->attr.f);
    return attention_lengths(g, n, a, e) && attention_heads_fit(g, n, a, with_v, e);
}

static bool shape_attention(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    if (!attention_operands(g, n, a, true, e)) return false;
    copy_shape(n, &g->nodes[a[0]]);
    n->shape[n->rank - 1] = g->nodes[a[2]].shape[n->rank - 1];
    return true;
}

/* log-sum-exp of each query's scores: [..., T, 1] */
static bool shape_attention_lse(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    if (!attention_operands(g, n, a, false, e)) return false;
    copy_shape(n, &g->nodes[a[0]]);
    n->shape[n->rank - 1] = ir_dim_const(g, 1);
    return true;
}

/* attention_grad(q, k, v, g, lse, delta): the gradient of operand attr.axis */
static bool shape_attention_grad(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    if (!attention_operands(g, n, a, true, e)) return false;
    if (n->attr.axis < 0 || n->attr.axis > 2) return fail_attr(e, "axis", "attention_grad: wrt must be 0 (q), 1 (k) or 2 (v)");
    ir_node o = g->nodes[a[0]], rows = g->nodes[a[0]];
    o.shape[o.rank - 1] = g->nodes[a[2]].shape[o.rank - 1];
    rows.shape[rows.rank - 1] = ir_dim_const(g, 1);
    const ir_node *want[3] = {&o, &rows, &rows};
    for (int i = 3; i < 6; i++) {
        const ir_node *x = &g->nodes[a[i]];
        if (!shapes_equal(x, want[i - 3]))
            return fail(e, i, "attention_grad: operand %d is %s, expected %s", i, shape_text(e, g, x),
                        shape_text(e, g, want[i - 3]));
    }
    copy_shape(n, &g->nodes[a[n->attr.axis]]);
    return true;
}

static bool shape_matmul(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]], *y = &g->nodes[a[1]];
    if (x->rank < 2 || y->rank < 2)
        return fail(e, x->rank < 2 ? 0 : 1, "matmul: operands must have rank 2 or more, got %s and %s",
                    shape_text(e, g, x), shape_text(e, g, y));
    if (y->rank != 2 && y->rank != x->rank)
        return fail(e, 1, "matmul: the right operand must be a matrix or have the left's batch axes: %s and %s",
                    shape_text(e, g, x), shape_text(e, g, y));
    if (y->rank == x->rank && memcmp(x->shape, y->shape, (x->rank - 2) * sizeof(uint32_t)) != 0)
        return fail(e, 1, "matmul: batch axes differ: %s and %s", shape_text(e, g, x),
                    shape_text(e, g, y));
    int xr = x->rank, yr = y->rank;
    uint32_t m = x->shape[xr - (n->attr.ta ? 1 : 2)], kx = x->shape[xr - (n->attr.ta ? 2 : 1)];
    uint32_t ky = y->shape[yr - (n->attr.tb ? 1 : 2)], nn = y->shape[yr - (n->attr.tb ? 2 : 1)];
    if (kx != ky) {
        fail(e, 1, "matmul: inner dimensions differ: %s vs %s", dim_text(e, g, kx),
             dim_text(e, g, ky));
        hint(e, "left is %s, right is %s%s", shape_text(e, g, x), shape_text(e, g, y),
             n->attr.tb ? "" : "; did you mean transpose_b: true?");
        return false;
    }
    copy_shape(n, x);
    n->shape[xr - 2] = m;
    n->shape[xr - 1] = nn;
    return true;
}

static bool shape_transpose(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]];
    if (n->attr.naxes == 0) {
        if (x->rank < 2) return fail(e, 0, "transpose: needs rank 2 or more, got rank %d", x->rank);
        n->attr.naxes = x->rank;
        for (int i = 0; i < x->rank; i++) n->attr.axes[i] = (int8_t)i;
        n->attr.axes[x->rank - 2] = (int8_t)(x->rank - 1);
        n->attr.axes[x->rank - 1] = (int8_t)(x->rank - 2);
    }
    if (n->attr.naxes != x->rank)
        return fail_attr(e, "axes", "transpose: permutation has %d axes, the tensor has %d", n->attr.naxes, x->rank);
    bool seen[NC_MAX_RANK] = {0};
    for (int i = 0; i < x->rank; i++) {
        int p = norm_axis(n->attr.axes[i], x->rank);
        if (p < 0 || p >= x->rank || seen[p])
            return fail_attr(e, "axes", "transpose: not a permutation of 0..%d", x->rank - 1);
        seen[p] = true;
        n->attr.axes[i] = (int8_t)p;
        n->shape[i] = x->shape[p];
    }
    n->rank = x->rank;
    return true;
}

/* attr: the shape's field when it is an attribute, NULL for an operand's */
static bool numel_dim(ir_graph *g, uint8_t rank, const uint32_t *shape, const char *attr, dim_expr *out, tc_error *e)
{
    dim_expr p = dim_const(1);
    for (int i = 0; i < rank; i++) {
        dim_status s = dim_mul(&p, &g->dims[shape[i]], &p);
        if (s != DIM_OK) return fail_attr(e, attr, "element count: %s", dim_status_message(s));
    }
    *out = p;
    return true;
}

/* A flatten after pooling that miscounts ([B, 14 * 14 * 16] of a
 * [B, 14, 14, 8]): the count all but the first axis hold. */
static void flatten_hint(ir_graph *g, const ir_node *x, const ir_node *n, tc_error *e)
{
    if (x->rank < 3 || n->rank != 2 || x->shape[0] != n->shape[0]) return;
    dim_expr rest;
    tc_error scratch;   /* a failure here must not replace the error being reported */
    tc_error_start(&scratch);
    bool counted = numel_dim(g, (uint8_t)(x->rank - 1), x->shape + 1, NULL, &rest, &scratch);
    tc_error_free(&scratch);
    if (!counted) return;
    uint32_t count = ir_dim_intern(g, &rest);
    hint(e, "flattening all but the first axis gives [%s, %s]", dim_text(e, g, x->shape[0]), dim_text(e, g, count));
}

static bool shape_reshape(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]];
    dim_expr px, pn;
    if (!numel_dim(g, x->rank, x->shape, NULL, &px, e) || !numel_dim(g, n->rank, n->shape, "shape", &pn, e)) return false;
    if (!dim_equal(&px, &pn)) {
        uint32_t cx = ir_dim_intern(g, &px), cn = ir_dim_intern(g, &pn);
        fail_attr(e, "shape", "reshape: element counts differ: %s has %s, %s has %s", shape_text(e, g, x),
                  dim_text(e, g, cx), shape_text(e, g, n), dim_text(e, g, cn));
        flatten_hint(g, x, n, e);
        return false;
    }
    return shaped_by(n, e, "shape");
}

/* Whether d is at least 1 at every binding of its symbols (each at least
 * 1): a sum of terms whose coefficients are all positive (B + 1, 2*B, 3). */
static bool dim_positive_always(const dim_expr *d)
{
    for (int i = 0; i < d->nterms; i++)
        if (d->term[i].coeff <= 0) return false;
    return d->nterms > 0;
}

static bool shape_slice(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]];
    int ax = norm_axis(n->attr.axis, x->rank);
    if (ax < 0 || ax >= x->rank) return fail_attr(e, "axis", "slice: axis %d out of range for rank %d", n->attr.axis, x->rank);
    n->attr.axis = ax;
    dim_expr len;
    dim_status s = dim_sub(&g->dims[n->attr.hi], &g->dims[n->attr.lo], &len);
    if (s != DIM_OK) return fail_attr(e, "hi", "slice: %s", dim_status_message(s));
    int64_t lo;
    if (dim_is_const(&g->dims[n->attr.lo], &lo) && lo < 0) return fail_attr(e, "lo", "slice: start %lld is negative", (long long)lo);
    /* an empty range, or an end past the axis, at every binding of the dims
     * (start B, end B; end B + 1 or 2*B of an axis B): an error here, not
     * when the model runs */
    dim_expr over, rev;
    bool empty = dim_sub(&g->dims[n->attr.lo], &g->dims[n->attr.hi], &rev) == DIM_OK && (rev.nterms == 0 || dim_positive_always(&rev));
    if (empty || (dim_sub(&g->dims[n->attr.hi], &g->dims[x->shape[ax]], &over) == DIM_OK && dim_positive_always(&over))) {
        const char *slo = dim_text(e, g, n->attr.lo), *shi = dim_text(e, g, n->attr.hi);
        if (empty) return fail_attr(e, "hi", "slice: empty or reversed range [%s, %s)", slo, shi);
        return fail_attr(e, "hi", "slice: end %s is past the axis size %s", shi, dim_text(e, g, x->shape[ax]));
    }
    copy_shape(n, x);
    n->shape[ax] = ir_dim_intern(g, &len);
    return true;
}

static bool shape_concat(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]];
    int ax = norm_axis(n->attr.axis, x->rank);
    if (ax < 0 || ax >= x->rank) return fail_attr(e, "axis", "concat: axis %d out of range for rank %d", n->attr.axis, x->rank);
    n->attr.axis = ax;
    dim_expr total = g->dims[x->shape[ax]];
    for (int i = 1; i < n->nargs; i++) {
        const ir_node *y = &g->nodes[a[i]];
        bool ok = y->rank == x->rank;
        for (int k = 0; ok && k < x->rank; k++) ok = k == ax || x->shape[k] == y->shape[k];
        if (!ok) {
            return fail(e, i, "concat: shapes must agree except on axis %d: %s and %s", ax,
                        shape_text(e, g, x), shape_text(e, g, y));
        }
        dim_status s = dim_add(&total, &g->dims[y->shape[ax]], &total);
        if (s != DIM_OK) return fail(e, i, "concat: %s", dim_status_message(s));
    }
    copy_shape(n, x);
    n->shape[ax] = ir_dim_intern(g, &total);
    return true;
}

/* Numpy rule: align trailing axes; each operand axis is 1 or equals the result's. */
static bool shape_broadcast(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *x = &g->nodes[a[0]];
    uint32_t one = ir_dim_const(g, 1);
    if (x->rank > n->rank) goto bad;
    for (int i = 0; i < x->rank; i++) {
        uint32_t xd = x->shape[x->rank - 1 - i], nd = n->shape[n->rank - 1 - i];
        if (xd != nd && xd != one) goto bad;
    }
    return shaped_by(n, e, "shape");
bad:;
    return fail(e, 0, "cannot broadcast %s to %s", shape_text(e, g, x), shape_text(e, g, n));
}

/* Indices that are an iota hold 0 .. len-1 along its axis, whatever the
 * data: a reshape, broadcast or transpose of it moves or repeats those values
 * but makes none larger. True with *len the axis' dim id. */
static bool iota_extent(const ir_graph *g, ir_value v, uint32_t *len)
{
    const ir_node *x = &g->nodes[v];
    while ((x->op == OP_RESHAPE || x->op == OP_BROADCAST || x->op == OP_TRANSPOSE) && x->nargs >= 1)
        x = &g->nodes[ir_args(g, x)[0]];
    if (x->op != OP_IOTA || x->attr.axis < 0 || x->attr.axis >= x->rank) return false;
    *len = x->shape[x->attr.axis];
    return true;
}

/* The name a user knows the table by: a parameter or input, looked for
 * through the casts a precision block puts around it; "the table" else. */
static const char *table_name(const ir_graph *g, const ir_node *t)
{
    while (t->op == OP_CAST && t->nargs == 1) t = &g->nodes[ir_args(g, t)[0]];
    if (t->op == OP_PARAM && t->attr.index < g->nparams) return g->params[t->attr.index].decl.name;
    if (t->op == OP_INPUT && t->attr.index < g->ninputs) return g->inputs[t->attr.index].name;
    return "the table";
}

/* gather(table, iota over an axis of len): index len-1 must be a row, so a
 * len known to exceed the rows (2048 and 1024, or T + 1 and T) is a type
 * error here, not an index error in the first run. */
static bool gather_iota_fits(ir_graph *g, const ir_value *a, tc_error *e)
{
    uint32_t len;
    if (!iota_extent(g, a[1], &len)) return true;
    uint32_t rows = g->nodes[a[0]].shape[0];
    dim_expr over;
    int64_t k;
    if (dim_sub(&g->dims[len], &g->dims[rows], &over) != DIM_OK || !dim_is_const(&over, &k) || k <= 0) return true;
    const char *name = table_name(g, &g->nodes[a[0]]);
    dim_expr one = dim_const(1), last;
    const char *sl = dim_text(e, g, len), *sr = dim_text(e, g, rows);
    const char *smax = dim_sub(&g->dims[len], &one, &last) == DIM_OK ? dim_expr_text(e, g, &last) : keep_textf(e, "%s - 1", sl);
    fail(e, 1, "gather: the indices are an iota over %s positions, 0 to %s, but %s has %s rows", sl, smax, name, sr);
    hint(e, "the iota's length must be at most %s's %s rows: a shorter sequence, or a larger table", name, sr);
    return false;
}

/* "nn.net" of ".../stdlib/nn.net", the file loc is in; NULL for none. */
static const char *loc_file_base(const ir_graph *g, nc_loc loc)
{
    const char *file = loc.file >= 1 && loc.file <= g->nfiles ? g->files[loc.file - 1] : NULL;
    return file && strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
}

/* "the add at nn.net:107": the op of the indices' arithmetic that wraps */
static const char *op_at(tc_error *e, const ir_graph *g, ir_value v)
{
    const ir_node *n = &g->nodes[v];
    const char *base = loc_file_base(g, n->loc);
    if (base) return keep_textf(e, "the %s at %s:%u", nc_ops[n->op].name, base, n->loc.line);
    return keep_textf(e, "its %s", nc_ops[n->op].name);
}

/* The values an op of the indices' arithmetic would reach past i32. */
static void wrap_values(const irange *r, char *out, size_t cap)
{
    if (r->wrap_hi > INT32_MAX) snprintf(out, cap, "values up to %lld, past i32's largest, 2147483647", (long long)r->wrap_hi);
    else snprintf(out, cap, "values down to %lld, below i32's smallest, -2147483648", (long long)r->wrap_lo);
}

/* Indices computed in i32 from iotas (nn.windows': the image's iota times
 * its pixels) that would wrap past 2^31 - 1 pick wrong rows, silently: a
 * type error where the sizes are known (bind_indices where they are not). */
static bool indices_fit_i32(ir_graph *g, const char *op, ir_value idx, int arg, uint32_t rows, tc_error *e)
{
    irange r;
    if (!irange_find(g, idx, NULL, &r) || r.wraps == IR_NONE) return true;
    char vals[128];
    wrap_values(&r, vals, sizeof vals);
    fail(e, arg, "%s: the indices, i32 arithmetic on iotas, would wrap around: %s computes %s", op, op_at(e, g, r.wraps), vals);
    hint(e, "the indices pick rows of a table of %s rows: fewer at once (a smaller batch) keeps them in i32", dim_text(e, g, rows));
    return false;
}

static bool shape_gather(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *t = &g->nodes[a[0]], *idx = &g->nodes[a[1]];
    if (t->rank < 1) return fail(e, 0, "gather: the table must have rank 1 or more");
    if (!gather_iota_fits(g, a, e)) return false;
    if (!indices_fit_i32(g, "gather", a[1], 1, t->shape[0], e)) return false;
    if (idx->rank + t->rank - 1 > NC_MAX_RANK) return fail(e, 1, "gather: result rank exceeds %d", NC_MAX_RANK);
    n->rank = (uint8_t)(idx->rank + t->rank - 1);
    memcpy(n->shape, idx->shape, idx->rank * sizeof(uint32_t));
    memcpy(n->shape + idx->rank, t->shape + 1, (t->rank - 1) * sizeof(uint32_t));
    return true;
}

static bool shape_scatter_add(ir_graph *g, ir_node *n, const ir_value *a, tc_error *e)
{
    const ir_node *idx = &g->nodes[a[0]], *src = &g->nodes[a[1]];
    if (src->rank < idx->rank || memcmp(src->shape, idx->shape, idx->rank * sizeof(uint32_t)) != 0)
        return fail(e, 1, "scatter_add: src must start with the indices' shape: indices %s, src %s",
                    shape_text(e, g, idx), shape_text(e, g, src));
    if (!indices_fit_i32(g, "scatter_add", a[0], 0, n->attr.lo, e)) return false;
    n->rank = (uint8_t)(src->rank - idx->rank + 1);
    n->shape[0] = n->attr.lo;
    memcpy(n->shape + 1, src->shape + idx->rank, (src->rank - idx->rank) * sizeof(uint32_t));
    return shaped_by(n, e, "lo");
}

static shape_rule *const shape_rules[OP_COUNT] = {
#define X(e, name, nargs, cat, dt, flags, shape, cpu, cuda, cexpr, grad, kw, meaning) [e] = shape,
#include "ops.def"
#undef X
};

/* ------------------------------------------------------------------ */
/* binding rules: what an op needs of the symbolic dims' values, checked
 * when a session binds them (a module built without --dim)                */

typedef bool binding_rule(const ir_graph *g, const ir_node *n, const int64_t *syms, tc_error *e);

/* The one symbolic dim's largest value at which idx keeps in i32 (it wraps
 * at *syms): by halving, sizes growing the indices' values. 0: none found. */
static int64_t largest_binding(const ir_graph *g, ir_value idx, const int64_t *syms)
{
    int64_t ok = 0, bad = syms[0];
    while (bad - ok > 1) {
        int64_t mid = ok + (bad - ok) / 2;
        irange r;
        if (irange_find(g, idx, &mid, &r) && r.wraps != IR_NONE) bad = mid;
        else ok = mid;
    }
    return ok;
}

/* indices_fit_i32 at run time, the sizes known now. */
static bool bind_indices(const ir_graph *g, const ir_node *n, ir_value idx, const int64_t *syms, tc_error *e)
{
    irange r;
    if (!irange_find(g, idx, syms, &r) || r.wraps == IR_NONE) return true;
    char vals[128];
    wrap_values(&r, vals, sizeof vals);
    int64_t m = g->nsyms == 1 ? largest_binding(g, idx, syms) : 0;
    const char *most = m > 0 ? keep_textf(e, ": %s must be at most %lld", g->sym_names[0], (long long)m) : "";
    fail(e, -1, "%s%s %s too large for the %s%s, whose indices, i32 arithmetic on iotas, would wrap around: %s computes %s%s",
         g->nsyms == 1 ? "dim " : "", syms_text(e, g, syms), g->nsyms == 1 ? "is" : "are", nc_ops[n->op].name,
         where_text(e, g, n), op_at(e, g, r.wraps), vals, most);
    return false;
}

/* indices_fit_i32 and gather_iota_fits at run time: the indices must keep
 * in i32, and the iota's length, known now, must not pass the table's rows,
 * or the first run would fail on an index. */
static bool bind_gather(const ir_graph *g, const ir_node *n, const int64_t *syms, tc_error *e)
{
    const ir_value *a = ir_args(g, n);
    uint32_t len;
    int64_t vl, vr;
    if (!bind_indices(g, n, a[1], syms, e)) return false;
    if (!iota_extent(g, a[1], &len)) return true;
    uint32_t rows = g->nodes[a[0]].shape[0];
    if (!dim_eval(&g->dims[len], syms, &vl) || !dim_eval(&g->dims[rows], syms, &vr) || vl <= vr) return true;
    const dim_expr *d = &g->dims[len];
    bool lone = d->nterms == 1 && d->term[0].coeff == 1 && d->term[0].nfactors == 1;
    const char *sl = dim_text(e, g, len), *where = where_text(e, g, n);
    const char *name = table_name(g, &g->nodes[a[0]]);
    fail(e, -1, "%s%s = %lld is more than the %lld rows of %s, which the gather%s indexes with an iota over %s: "
                "%s must be at most %lld",
         lone ? "dim " : "", sl, (long long)vl, (long long)vr, name, where, sl, sl, (long long)vr);
    return false;
}

static bool bind_scatter_add(const ir_graph *g, const ir_node *n, const int64_t *syms, tc_error *e)
{
    return bind_indices(g, n, ir_args(g, n)[0], syms, e);
}

/* shape_iota's exactness at run time: a float iota over a symbolic length
 * (iota([T], dtype: bf16)) must count every index exactly at the bound size. */
static bool bind_iota(const ir_graph *g, const ir_node *n, const int64_t *syms, tc_error *e)
{
    uint32_t d = n->shape[n->attr.axis];
    int64_t len;
    const int64_t exact = float_exact_limit(n->dtype);
    if (!dim_eval(&g->dims[d], syms, &len) || len - 1 <= exact) return true;
    const char *sl = dim_text(e, g, d), *where = where_text(e, g, n);
    fail(e, -1, "%s = %lld is too long for the %s iota%s: %s holds whole numbers exactly only up to %lld, "
                "so %s must be at most %lld",
         sl, (long long)len, dtype_name(n->dtype), where, dtype_name(n->dtype), (long long)exact, sl, (long long)exact + 1);
    return false;
}

/* shape_slice's bounds at run time: a bound past a symbolic axis at some
 * sizes only (x[:, 5] of an axis T) is refused here, before a kernel reads
 * outside the axis. */
static bool bind_slice(const ir_graph *g, const ir_node *n, const int64_t *syms, tc_error *e)
{
    uint32_t size = g->nodes[ir_args(g, n)[0]].shape[n->attr.axis];
    int64_t lo, hi, len;
    if (!dim_eval(&g->dims[n->shape[n->attr.axis]], syms, &len)) return true;   /* no length: the session's size check says so */
    if (dim_eval(&g->dims[n->attr.lo], syms, &lo) && dim_eval(&g->dims[n->attr.hi], syms, &hi) &&
        dim_eval(&g->dims[size], syms, &len) && lo < hi && hi <= len)
        return true;
    fail(e, -1, "the slice%s takes [%s, %s) of an axis of size %s: at %s that is not inside the axis", where_text(e, g, n),
         dim_text(e, g, n->attr.lo), dim_text(e, g, n->attr.hi), dim_text(e, g, size), syms_text(e, g, syms));
    return false;
}

/* shape_dim_value's i32 at run time: B * T * C past 2^31 - 1 would wrap
 * (a sum of ones in i32 did, silently); refused before a kernel runs. */
static bool bind_dim_value(const ir_graph *g, const ir_node *n, const int64_t *syms, tc_error *e)
{
    int64_t v;
    if (n->dtype != NC_I32 || !dim_eval(&g->dims[n->attr.lo], syms, &v) || v <= INT32_MAX) return true;
    const char *sv = dim_text(e, g, n->attr.lo), *where = where_text(e, g, n);
    return fail(e, -1, "%s = %lld is too large for the i32 value of that size%s: i32 holds at most %d, so %s must be at most %d",
                sv, (long long)v, where, INT32_MAX, sv, INT32_MAX);
}

static binding_rule *const binding_rules[OP_COUNT] = {
    [OP_DIM_VALUE] = bind_dim_value,
    [OP_GATHER] = bind_gather,
    [OP_SCATTER_ADD] = bind_scatter_add,
    [OP_IOTA] = bind_iota,
    [OP_SLICE] = bind_slice,
};

bool tc_check_binding(const ir_graph *g, const ir_node *n, const int64_t *syms, tc_error *e)
{
    tc_error_start(e);
    bool ok = !binding_rules[n->op] || binding_rules[n->op](g, n, syms, e);
    if (ok) tc_error_free(e);
    return ok;
}

/* "nn.net:315" */
static const char *loc_text(tc_error *e, const ir_graph *g, nc_loc loc)
{
    const char *base = loc_file_base(g, loc);
    return keep_textf(e, "%s:%u", base ? base : "?", loc.line);
}

bool tc_check_requires(const ir_graph *g, const int64_t *syms, tc_error *e)
{
    tc_error_start(e);
    for (uint32_t i = 0; i < g->nrequires; i++) {
        const ir_require *q = &g->requires[i];
        if (ir_require_holds(g, q, syms)) continue;
        const char *site = q->site.line ? keep_textf(e, " (in the call at %s)", loc_text(e, g, q->site)) : "";
        fail(e, -1, "the require at %s%s fails at %s, where %s %s %s is false: %s", loc_text(e, g, q->loc), site, syms_text(e, g, syms),
             dim_text(e, g, q->lhs), ir_cmp_text(q->cmp), dim_text(e, g, q->rhs), keep_text(e, ir_require_str(g, q->message, syms)));
        const char *hint_text = keep_text(e, ir_require_str(g, q->hint, syms));
        if (hint_text[0]) hint(e, "%s", hint_text);
        return false;
    }
    return true;
}

bool tc_check_bound_sizes(const ir_graph *g, const int64_t *syms, tc_error *e)
{
    for (ir_value v = 0; g->nsyms && v < g->nnodes; v++)
        if (!tc_check_binding(g, &g->nodes[v], syms, e)) return false;
    return tc_check_requires(g, syms, e);
}

/* ------------------------------------------------------------------ */
/* value bounds: the integer values an op accepts in an operand, [0, bound):
 * what a caller inventing inputs (netc run --random-inputs) must keep to  */

typedef bool value_bound_rule(const ir_graph *g, const ir_node *n, int operand, const int64_t *syms, int64_t *bound);

static bool bound_dim(const ir_graph *g, uint32_t dim, const int64_t *syms, int64_t *bound)
{
    return dim_eval(&g->dims[dim], syms, bound);
}

/* gather(table, indices): a row of the table */
static bool bound_gather(const ir_graph *g, const ir_node *n, int operand, const int64_t *syms, int64_t *bound)
{
    return operand == 1 && bound_dim(g, g->nodes[ir_args(g, n)[0]].shape[0], syms, bound);
}

/* scatter_add(indices, src) of attr.lo rows: a row of the result */
static bool bound_scatter_add(const ir_graph *g, const ir_node *n, int operand, const int64_t *syms, int64_t *bound)
{
    return operand == 0 && bound_dim(g, n->attr.lo, syms, bound);
}

/* cross_entropy(logits, targets) and its gradient: a class, the logits' last axis */
static bool bound_targets(const ir_graph *g, const ir_node *n, int operand, const int64_t *syms, int64_t *bound)
{
    const ir_node *lg = &g->nodes[ir_args(g, n)[0]];
    return operand == 1 && lg->rank >= 1 && bound_dim(g, lg->shape[lg->rank - 1], syms, bound);
}

static value_bound_rule *const value_bound_rules[OP_COUNT] = {
    [OP_GATHER] = bound_gather,
    [OP_SCATTER_ADD] = bound_scatter_add,
    [OP_CROSS_ENTROPY] = bound_targets,
    [OP_CROSS_ENTROPY_GRAD] = bound_targets,
};

/* Ops whose result holds only values of their operands (moved, repeated,
 * picked), so a bound on the result's values binds the operands' too. */
static bool passes_values_on(nc_op op)
{
    return op == OP_RESHAPE || op == OP_TRANSPOSE || op == OP_SLICE || op == OP_CONCAT || op == OP_BROADCAST;
}

int64_t ops_value_bound(const ir_graph *g, ir_value v, const int64_t *syms)
{
    bool *carries = nc_xcalloc(g->nnodes + 1, sizeof *carries);   /* holds values of v */
    carries[v] = true;
    int64_t best = 0;
    for (ir_value u = v + 1; u < g->nnodes; u++) {   /* operands precede their users */
        const ir_node *n = &g->nodes[u];
        const ir_value *a = ir_args(g, n);
        for (int k = 0; k < n->nargs; k++) {
            if (!carries[a[k]]) continue;
            int64_t b;
            if (passes_values_on(n->op)) carries[u] = true;
            else if (value_bound_rules[n->op] && value_bound_rules[n->op](g, n, k, syms, &b) && b >= 1 && (!best || b < best))
                best = b;
        }
    }
    free(carries);
    return best;
}

/* ------------------------------------------------------------------ */

/* An accumulating op storing its f16/bf16 operands' result as f32 (OPF_WIDE_RESULT). */
static bool widen_result(ir_node *n, tc_error *e)
{
    if (!n->attr.f32_result) return true;
    if (!(nc_ops[n->op].flags & OPF_WIDE_RESULT))
        return fail(e, -1, "%s: cannot store a widened result", nc_ops[n->op].name);
    if (n->dtype != NC_F16 && n->dtype != NC_BF16)
        return fail(e, -1, "%s: a widened result of %s operands", nc_ops[n->op].name, dtype_name(n->dtype));
    n->dtype = NC_F32;
    return true;
}

bool tc_infer(ir_graph *g, ir_node *n, const ir_value *args, tc_error *e)
{
    tc_error_start(e);
    int want = nc_ops[n->op].nargs;
    /* a random op's training step (ir_step_slot): an i32 scalar after its
     * own operands, which the op's rules below do not see */
    int step = ir_step_slot(n);
    if (step >= 0) {
        const ir_node *s = &g->nodes[args[step]];
        if (s->dtype != NC_I32 || s->rank != 0)
            return fail(e, step, "%s: the training step must be an i32 scalar, got %s%s", nc_ops[n->op].name,
                        dtype_name(s->dtype), s->rank ? " with dims" : "");
    }
    int own = step >= 0 ? step : n->nargs;
    if (want >= 0 ? own < want || own > want + op_optional_operands(n->op) : own < 1)
        return fail(e, -1, "%s: expects %d tensor operand%s, got %d", nc_ops[n->op].name, want < 0 ? 1 : want,
                    want == 1 ? "" : "s", n->nargs);
    uint16_t all = n->nargs;
    n->nargs = (uint16_t)own;
    bool ok = apply_dtype_rule(g, n, args, e) && widen_result(n, e) && shape_rules[n->op](g, n, args, e);
    n->nargs = all;
    if (e->attr && !spec_has_field(nc_ops[n->op].kwargs, e->attr))
        NC_BUG("%s: a rule names attribute '%s', which its kwargs in ops.def do not fill", nc_ops[n->op].name, e->attr);
    if (ok) tc_error_free(e);   /* a rule that tried one way and then another leaves nothing behind */
    return ok;
}

bool ir_build(ir_graph *g, const ir_node *proto, const ir_value *args, uint16_t nargs, ir_value *out, tc_error *e)
{
    ir_node n = *proto;
    n.nargs = nargs;
    if (!tc_infer(g, &n, args, e)) return false;
    *out = ir_add(g, &n, args, nargs);
    return true;
}

ir_value irb_node(ir_builder *b, ir_node proto, const ir_value *args, int nargs)
{
    if (b->failed) return IR_NONE;
    for (int i = 0; i < nargs; i++)
        if (args[i] == IR_NONE) { b->failed = true; return IR_NONE; }
    proto.loc = b->loc;
    ir_value out;
    tc_error e;
    if (!ir_build(b->g, &proto, args, (uint16_t)nargs, &out, &e)) {
        snprintf(b->err, b->errcap, "%s: %s", b->who, e.msg);
        tc_error_free(&e);
        b->failed = true;
        return IR_NONE;
    }
    return out;
}

ir_value irb_op1(ir_builder *b, nc_op op, ir_value x) { return irb_node(b, (ir_node){.op = op}, &x, 1); }

ir_value irb_op2(ir_builder *b, nc_op op, ir_value x, ir_value y)
{
    ir_value xy[2] = {x, y};
    return irb_node(b, (ir_node){.op = op}, xy, 2);
}
