/* sema_builtins.c - calls of table ops, operators, broadcasting, autocast,
 * casts and parameter initializers.
 *
 * A call like sum(x, axis: -1) is checked generically from the op's row in
 * ops.def: the tensor operands come first, then the kwargs spec says which
 * attribute each further argument fills. No op is special-cased here except
 * where the language itself has sugar (operators, dtype casts, softmax's and
 * log_softmax's axis). */
#include "sema_int.h"
#include "program.h"   /* NRT_MAX_INTS: the sizes one kernel takes */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool sema_builtin_exists(const char *name)
{
    nc_op op;
    return op_from_name(name, &op) && !(nc_ops[op].flags & OPF_INTERNAL);
}

/* ------------------------------------------------------------------ */
/* the kwargs spec of an op                                             */

typedef struct kw_spec {
    char name[32];
    char field[16];
    char def[32];      /* "!" required, "-" absent unless given */
} kw_spec;

static int parse_spec(const char *spec, kw_spec *out, int cap)
{
    int n = 0;
    while (*spec && n < cap) {
        int used = 0;
        if (sscanf(spec, " %31[^:]:%15[^=]=%31s%n", out[n].name, out[n].field, out[n].def, &used) < 3 || !used) break;
        spec += used;
        n++;
    }
    return n;
}

/* A default written in the spec, as a value. */
static sv spec_default(const char *def)
{
    if (strcmp(def, "true") == 0) return (sv){.kind = SV_BOOL, .i = 1};
    if (strcmp(def, "false") == 0) return (sv){.kind = SV_BOOL, .i = 0};
    if (strcmp(def, "[]") == 0) return (sv){.kind = SV_LIST};
    nc_dtype t;
    if (dtype_from_name(def, &t)) return (sv){.kind = SV_DTYPE, .dtype = t};
    char *end;
    long long i = strtoll(def, &end, 10);
    if (*end == 0) return sv_int(i);
    return sv_float(strtod(def, NULL));
}

static bool want_int(sema_ctx *c, sv v, nc_loc loc, const char *what, int64_t *out)
{
    if (v.kind == SV_INT) { *out = v.i; return true; }
    if (v.kind != SV_ERROR) sema_err(c, loc, NULL, "%s must be an integer, got %s", what, sv_kind_phrase(v.kind));
    return false;
}

static bool fill_axes(sema_ctx *c, sv v, nc_loc loc, const char *what, ir_attr *a)
{
    sv one = v;
    uint32_t n = v.kind == SV_LIST ? v.n : 1;
    if (n > NC_MAX_RANK) {
        sema_err(c, loc, NULL, "%s: more than %d axes", what, NC_MAX_RANK);
        return false;
    }
    if (n == 0) {   /* naxes 0 is the spec's 'not given': every axis, or transpose's last two */
        sema_err(c, loc, strstr(what, "'perm'") ? "leave perm out to swap the last two axes" : "leave axis out to reduce every axis",
                 "%s: an empty list of axes", what);
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        int64_t ax;
        if (!want_int(c, v.kind == SV_LIST ? v.items[i] : one, loc, what, &ax)) return false;
        if (ax < -NC_MAX_RANK || ax >= NC_MAX_RANK) {
            sema_err(c, loc, NULL, "%s: axis %lld is out of range", what, (long long)ax);
            return false;
        }
        a->axes[i] = (int8_t)ax;
    }
    a->naxes = (uint8_t)n;
    return true;
}

static bool fill_shape(sema_ctx *c, sv v, nc_loc loc, ir_node *n)
{
    if (v.kind != SV_LIST) {
        if (v.kind != SV_ERROR) sema_err(c, loc, "write it as a list, like [B, 784]", "shape must be a list of dims");
        return false;
    }
    if (v.n > NC_MAX_RANK) {
        sema_err(c, loc, NULL, "rank %u is more than the supported %d", v.n, NC_MAX_RANK);
        return false;
    }
    for (uint32_t i = 0; i < v.n; i++)
        if (!sema_as_dim(c, v.items[i], loc, &n->shape[i])) return false;
    n->rank = (uint8_t)v.n;
    return true;
}

/* Put one non-tensor argument into the node, as its spec field says. */
static bool apply_field(sema_ctx *c, const kw_spec *k, sv v, nc_loc loc, ir_node *n, const char *op)
{
    char what[80];
    snprintf(what, sizeof what, "%s: '%s'", op, k->name);
    ir_attr *a = &n->attr;
    const char *f = k->field;
    if (v.kind == SV_ERROR) return false;
    if (strcmp(f, "f") == 0) {
        if (v.kind == SV_INT) v = sv_float((double)v.i);
        if (v.kind != SV_FLOAT) { sema_err(c, loc, NULL, "%s must be a number, got %s", what, sv_kind_phrase(v.kind)); return false; }
        a->f = v.f;
        return true;
    }
    if (strcmp(f, "seed") == 0) return want_int(c, v, loc, what, &a->seed);
    if (strcmp(f, "axis") == 0) {
        int64_t ax;
        if (!want_int(c, v, loc, what, &ax)) return false;
        if (ax < -NC_MAX_RANK || ax >= NC_MAX_RANK) { sema_err(c, loc, NULL, "%s: axis %lld is out of range", what, (long long)ax); return false; }
        a->axis = (int32_t)ax;
        return true;
    }
    if (strcmp(f, "axes") == 0) return fill_axes(c, v, loc, what, a);
    if (strcmp(f, "keepdim") == 0 || strcmp(f, "ta") == 0 || strcmp(f, "tb") == 0 || strcmp(f, "causal") == 0) {
        if (v.kind != SV_BOOL) { sema_err(c, loc, NULL, "%s must be true or false", what); return false; }
        bool *b = f[0] == 'k' ? &a->keepdim : f[0] == 'c' ? &a->causal : f[1] == 'a' ? &a->ta : &a->tb;
        *b = v.i != 0;
        return true;
    }
    if (strcmp(f, "shape") == 0) return fill_shape(c, v, loc, n);
    if (strcmp(f, "lo") == 0) return sema_as_dim(c, v, loc, &a->lo);
    if (strcmp(f, "hi") == 0) return sema_as_dim(c, v, loc, &a->hi);
    if (strcmp(f, "dtype") == 0) {
        if (v.kind != SV_DTYPE) { sema_err(c, loc, NULL, "%s must be a dtype such as f32", what); return false; }
        if (n->op == OP_CAST) a->to = v.dtype;
        else n->dtype = v.dtype;
        return true;
    }
    NC_BUG("unknown kwargs field '%s' in ops.def", f);
}

/* ------------------------------------------------------------------ */
/* operands: scalars become tensors, shapes broadcast, precisions meet  */

/* Whether the number v can be an element of a dtype tensor as written; an
 * error at loc when not. A number the dtype cannot hold would otherwise be
 * truncated, saturated, wrapped, or rounded to inf or to zero: 0.5 meeting
 * i32, 300 meeting u8, 70000.0 meeting f16, 1e-8 meeting f16 (an epsilon
 * that silently vanishes). Used wherever a number becomes a tensor: beside
 * an operator, and as the value of fill(v, dtype: ...). */
static bool number_fits(sema_ctx *c, double v, nc_dtype dtype, nc_loc loc)
{
    if (!dtype_is_float(dtype) && v != floor(v)) {
        sema_err(c, loc, "write an integer, or cast the tensor to a float dtype",
                 "the number %s cannot be used with an %s tensor", nc_number(v).s, dtype_name(dtype));
        return false;
    }
    if (dtype == NC_BOOL && v != 0 && v != 1) {   /* fill(2, dtype: bool) would be true */
        sema_err(c, loc, "write true or false", "the number %s cannot be a bool: a bool is false or true (0 or 1)", nc_number(v).s);
        return false;
    }
    static const double int_lo[NC_DTYPE_COUNT] = {[NC_I32] = -2147483648.0, [NC_U8] = 0};
    static const double int_hi[NC_DTYPE_COUNT] = {[NC_I32] = 2147483647.0, [NC_U8] = 255};
    const char *an = strchr("if", dtype_name(dtype)[0]) ? "an" : "a";   /* an i32, an f16, a u8, a bf16 */
    if (!dtype_is_float(dtype) && dtype != NC_BOOL && !(v >= int_lo[dtype] && v <= int_hi[dtype])) {
        char hint[96];
        snprintf(hint, sizeof hint, "%s holds %.0f to %.0f%s", dtype_name(dtype), int_lo[dtype], int_hi[dtype],
                 dtype == NC_U8 ? ": cast the tensor to a wider dtype, e.g. i32(...)" : "");
        sema_err(c, loc, hint, "the number %s is out of range for %s %s tensor", nc_number(v).s, an, dtype_name(dtype));
        return false;
    }
    if (dtype_is_float(dtype) && isfinite(v) && isinf(nc_round_to(dtype, (float)v))) {
        sema_err(c, loc, dtype == NC_F32 ? "write inf if that is meant" : "compute in f32, e.g. f32(...)",
                 "the number %s is out of range for %s %s tensor: it would round to inf", nc_number(v).s, an,
                 dtype_name(dtype));
        return false;
    }
    if (dtype_is_float(dtype) && v != 0 && nc_round_to(dtype, (float)v) == 0) {
        sema_err(c, loc, dtype == NC_F32 ? "write 0.0 if that is meant" : "compute in f32, e.g. f32(...)",
                 "the number %s is too small for %s %s tensor: it would round to 0", nc_number(v).s, an, dtype_name(dtype));
        return false;
    }
    return true;
}

static sv scalar_tensor(sema_ctx *c, sv s, nc_dtype dtype, nc_loc loc)
{
    double v = s.kind == SV_FLOAT ? s.f : (double)s.i;
    /* true/false are not numbers: x + true would silently add 1, and c == 2
     * on a bool mask would silently compare with true */
    if ((s.kind == SV_BOOL) != (dtype == NC_BOOL)) {
        const char *an = strchr("if", dtype_name(dtype)[0]) ? "an" : "a";
        if (s.kind == SV_BOOL)
            sema_err(c, loc, s.i ? (dtype_is_float(dtype) ? "write 1.0" : "write 1") : (dtype_is_float(dtype) ? "write 0.0" : "write 0"),
                     "%s cannot be used with %s %s tensor", s.i ? "true" : "false", an, dtype_name(dtype));
        else
            sema_err(c, loc, "write true or false, or cast the mask first, e.g. i32(...)",
                     "the number %g cannot be used with a bool tensor", v);
        return sv_error();
    }
    if (!number_fits(c, v, dtype, loc)) return sv_error();
    ir_node n = sema_proto(c, OP_FILL, loc);
    n.dtype = dtype;
    n.attr.f = v;
    return sv_tensor(c, ir_add(c->g, &n, NULL, 0));
}

static bool is_scalar(sv v) { return v.kind == SV_INT || v.kind == SV_FLOAT || v.kind == SV_BOOL; }

/* A dim whose size is known (a fn's H bound to 28) as that number. Division
 * stays dim arithmetic, exact or an error, rather than a fraction. */
static sv known_dim_as_int(sema_ctx *c, sv v)
{
    int64_t k;
    if (v.kind == SV_DIM && dim_is_const(&c->g->dims[v.dim], &k)) return sv_int(k);
    return v;
}

/* A dim beside a tensor of dtype t, as in x / T, ih < H or where(c, i, N - 1):
 * a number where the dim is known (a fn's H bound to 28), else a scalar
 * tensor of dtype t read from the symbols a session binds (dim_value). For a
 * bool t it stays a dim, for the caller's error. */
static sv dim_beside_tensor(sema_ctx *c, sv dim, nc_dtype t, nc_loc loc)
{
    sv known = known_dim_as_int(c, dim);
    if (known.kind != SV_DIM) return known;
    return t == NC_BOOL ? dim : sema_dim_tensor(c, dim.dim, t, loc);
}

/* The common shape of elementwise operands (numpy rule), or false. */
static bool broadcast_shape(sema_ctx *c, sv *ops, int n, nc_loc loc, uint8_t *rank, uint32_t *shape)
{
    uint32_t one = ir_dim_const(c->g, 1);
    int r = 0;
    for (int i = 0; i < n; i++) r = c->g->nodes[ops[i].t].rank > r ? c->g->nodes[ops[i].t].rank : r;
    for (int k = 0; k < r; k++) shape[k] = one;
    for (int i = 0; i < n; i++) {
        const ir_node *x = &c->g->nodes[ops[i].t];
        for (int k = 0; k < x->rank; k++) {
            uint32_t *dst = &shape[r - x->rank + k], d = x->shape[k];
            if (d == *dst || d == one) continue;
            if (*dst == one) { *dst = d; continue; }
            sema_err(c, loc, "sizes must be equal or 1 to broadcast", "shapes do not broadcast: %s and %s",
                     sema_node_text(c, ops[0].t), sema_shape_text(c, x->dtype, x->rank, x->shape));
            return false;
        }
    }
    *rank = (uint8_t)r;
    return true;
}


static bool seed_given(const kw_spec *spec, int nspec, const bool *has)
{
    for (int k = 0; k < nspec; k++)
        if (has[k] && strcmp(spec[k].field, "seed") == 0) return true;
    return false;
}

/* A random op written without a seed gets one of its own, so two dropouts
 * (two layers of a repeat, say) draw independent masks; the same model
 * always numbers them alike. splitmix64 of the op's number, kept
 * non-negative, is unlikely to meet a seed written by hand. */
static int64_t default_seed(sema_ctx *c)
{
    uint64_t z = ++c->random_sites * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (int64_t)((z ^ (z >> 31)) >> 1);
}

static sv broadcast_to(sema_ctx *c, sv x, uint8_t rank, const uint32_t *shape, nc_loc loc)
{
    const ir_node *n = &c->g->nodes[x.t];
    if (n->rank == rank && memcmp(n->shape, shape, rank * sizeof *shape) == 0) return x;
    ir_node b = sema_proto(c, OP_BROADCAST, loc);
    b.rank = rank;
    memcpy(b.shape, shape, rank * sizeof *shape);
    ir_value out;
    tc_error e;
    if (!ir_build(c->g, &b, &x.t, 1, &out, &e)) NC_BUG("broadcast rejected: %s", e.msg);
    return sv_tensor(c, out);
}

sv sema_number_tensor(sema_ctx *c, sv number, nc_dtype dtype, uint8_t rank, const uint32_t *shape, nc_loc loc)
{
    sv t = scalar_tensor(c, number, dtype, loc);
    return t.kind == SV_TENSOR ? broadcast_to(c, t, rank, shape, loc) : t;
}

/* Inside a precision block, f32 operands meeting low-precision ones are
 * narrowed to the block's dtype rather than rejected. */
static void autocast_operands(sema_ctx *c, sv *ops, int first, int n, nc_loc loc)
{
    if (!c->autocast) return;
    bool low = false, wide = false;
    for (int i = first; i < n; i++) {
        if (ops[i].kind != SV_TENSOR) continue;
        nc_dtype t = c->g->nodes[ops[i].t].dtype;
        low |= t == c->autocast_dtype;
        wide |= t == NC_F32;
    }
    if (!(low && wide)) return;
    for (int i = first; i < n; i++)
        if (ops[i].kind == SV_TENSOR && c->g->nodes[ops[i].t].dtype == NC_F32)
            ops[i] = sema_cast(c, ops[i], c->autocast_dtype, loc, true);
}

/* A concat's kernel takes its result's dims and each part's size along the
 * axis, plus the element count: rank + parts + 1 sizes of NRT_MAX_INTS. A
 * longer concat is joined in groups that fit, then the groups (exact: a
 * concat of concats along one axis is the concat of their parts). */
static sv concat_in_groups(sema_ctx *c, ir_node *proto, sv *ops, int n, const nc_loc *arg_locs,
                           const sema_attr_locs *attrs, bool *done)
{
    *done = false;
    if (proto->op != OP_CONCAT || ops[0].kind != SV_TENSOR) return sv_error();
    int most = NRT_MAX_INTS - 1 - c->g->nodes[ops[0].t].rank;
    if (most < 2 || n <= most || n > 64 * most) return sv_error();
    *done = true;
    sv groups[64];
    nc_loc locs[64];
    int m = 0;
    int ngroups = (n + most - 1) / most;   /* as few groups as fit, of even sizes */
    for (int i = 0; m < ngroups; m++) {
        int left = ngroups - m, k = (n - i + left - 1) / left;
        ir_node p = *proto;
        groups[m] = k == 1 ? ops[i] : sema_apply(c, &p, ops + i, k, arg_locs + i, attrs);
        if (groups[m].kind == SV_ERROR) return sv_error();
        locs[m] = proto->loc;
        i += k;
    }
    return sema_apply(c, proto, groups, m, locs, attrs);
}

/* Where the call wrote the attribute that fills field (the op's kwargs
 * spec in ops.def); the call itself for one left to its default or none. */
static nc_loc attr_loc(const sema_attr_locs *attrs, const char *field, nc_loc call)
{
    for (int k = 0; attrs && field && k < attrs->n; k++)
        if (strcmp(attrs->field[k], field) == 0) return attrs->loc[k];
    return call;
}

/* An f32 library weight meeting a bf16 or f16 argument outside a precision
 * block: the usual hint (insert a cast around an operand) points into the
 * library, where the user cannot write; say what the caller can do. */
static const char *library_mix_hint(const sema_ctx *c, const ir_value *args, int n, nc_loc at)
{
    if (c->autocast || c->call_depth == 0 || at.file == c->call_site.file) return NULL;
    bool f32 = false, low = false;
    for (int i = 0; i < n; i++) {
        nc_dtype t = c->g->nodes[args[i]].dtype;
        f32 |= t == NC_F32;
        low |= t == NC_BF16 || t == NC_F16;
    }
    if (!f32 || !low) return NULL;
    return "the library's parameters are f32: call it inside a precision block (precision bf16 { ... } reads "
           "them as bf16), or pass it f32(...) of its argument";
}

/* Where an op rule's error is about: the operand or attribute it names. */
static nc_loc rule_error_loc(const tc_error *e, int n, const nc_loc *arg_locs, const sema_attr_locs *attrs, nc_loc call)
{
    if (e->arg >= 0 && e->arg < n) return arg_locs[e->arg];
    return attr_loc(attrs, e->attr, call);
}

static void cast_body_set(sema_ctx *c, ir_value v);

/* An elementwise op's value operands' dtype: the first tensor's (where's
 * condition aside); *found false where all are numbers (where(c, 1, 0)). */
static nc_dtype elementwise_dtype(const sema_ctx *c, const ir_node *proto, const sv *ops, int n, bool *found)
{
    *found = false;
    for (int i = proto->op == OP_WHERE ? 1 : 0; i < n; i++)
        if (ops[i].kind == SV_TENSOR) {
            *found = true;
            return c->g->nodes[ops[i].t].dtype;
        }
    if (proto->op != OP_WHERE) NC_BUG("elementwise op on scalars only should have been folded");
    return NC_F32;
}

/* An elementwise op's operands as tensors of one shape: scalars and sizes
 * take the dtype of the tensors beside them, then all broadcast. */
static bool elementwise_operands(sema_ctx *c, const ir_node *proto, sv *ops, int n, const nc_loc *arg_locs)
{
    bool found;
    nc_dtype dt = elementwise_dtype(c, proto, ops, n, &found);
    for (int i = 0; i < n; i++) {
        nc_dtype want = proto->op == OP_WHERE && i == 0 ? NC_BOOL : dt;
        if (ops[i].kind == SV_DIM) ops[i] = dim_beside_tensor(c, ops[i], want, arg_locs[i]);
        if (ops[i].kind == SV_ERROR) return false;
        if (ops[i].kind != SV_TENSOR && !is_scalar(ops[i])) {
            sema_err(c, arg_locs[i], NULL, "%s: operand %d must be a tensor or a number, got %s", nc_ops[proto->op].name,
                     i + 1, sv_kind_phrase(ops[i].kind));
            return false;
        }
    }
    for (int i = 0; i < n; i++)
        if (is_scalar(ops[i])) {
            nc_dtype want = proto->op == OP_WHERE && i == 0 ? NC_BOOL : dt;
            if (ops[i].kind == SV_FLOAT && !dtype_is_float(want) && !found) want = NC_F32;
            ops[i] = scalar_tensor(c, ops[i], want, arg_locs[i]);
            if (ops[i].kind == SV_ERROR) return false;
        }
    autocast_operands(c, ops, proto->op == OP_WHERE ? 1 : 0, n, proto->loc);
    uint8_t rank;
    uint32_t shape[NC_MAX_RANK];
    if (!broadcast_shape(c, ops, n, proto->loc, &rank, shape)) return false;
    for (int i = 0; i < n; i++) ops[i] = broadcast_to(c, ops[i], rank, shape, proto->loc);
    return true;
}

/* Any other op's operands: tensors, mixed float dtypes autocast (but an
 * op's indices and targets, which are i32 by design). */
static bool tensor_operands(sema_ctx *c, const ir_node *proto, sv *ops, int n, const nc_loc *arg_locs)
{
    for (int i = 0; i < n; i++)
        if (ops[i].kind != SV_TENSOR) {
            sema_err(c, arg_locs[i], NULL, "%s: operand %d must be a tensor, got %s", nc_ops[proto->op].name, i + 1,
                     sv_kind_phrase(ops[i].kind));
            return false;
        }
    if (proto->op != OP_GATHER && proto->op != OP_SCATTER_ADD && proto->op != OP_CROSS_ENTROPY)
        autocast_operands(c, ops, 0, n, proto->loc);
    return true;
}

/* The node, through the op's type rules: their error at the operand or
 * attribute it is about, and the result within the tensor limits. */
static sv build_checked(sema_ctx *c, ir_node *proto, const sv *ops, int n, const nc_loc *arg_locs, const sema_attr_locs *attrs)
{
    ir_value args[64], out;
    if (n > 64) {
        sema_err(c, proto->loc, NULL, "%s: more than 64 operands", nc_ops[proto->op].name);
        return sv_error();
    }
    for (int i = 0; i < n; i++) args[i] = ops[i].t;
    tc_error e;
    if (!ir_build(c->g, proto, args, (uint16_t)n, &out, &e)) {
        nc_loc at = rule_error_loc(&e, n, arg_locs, attrs, proto->loc);
        const char *lib = library_mix_hint(c, args, n, at);
        sema_err(c, at, lib ? lib : e.hint[0] ? e.hint : NULL, "%s", e.msg);
        tc_error_free(&e);
        return sv_error();
    }
    if (proto->op == OP_CAST) cast_body_set(c, out);   /* cast(x, to: bf16) is as explicit as bf16(x) */
    const ir_node *r = &c->g->nodes[out];
    /* a result past the tensor limits: at the attribute that set its dims (tc_error.attr) */
    if (!sema_check_shape(c, r->dtype, r->rank, r->shape, attr_loc(attrs, e.attr, proto->loc))) return sv_error();
    return sv_tensor(c, out);
}

sv sema_apply(sema_ctx *c, ir_node *proto, sv *ops, int n, const nc_loc *arg_locs, const sema_attr_locs *attrs)
{
    for (int i = 0; i < n; i++) if (ops[i].kind == SV_ERROR) return sv_error();
    bool grouped;
    sv grouped_result = concat_in_groups(c, proto, ops, n, arg_locs, attrs, &grouped);
    if (grouped) return grouped_result;
    bool elementwise = nc_ops[proto->op].category == CAT_ELEMENTWISE && n >= 2;
    if (!(elementwise ? elementwise_operands(c, proto, ops, n, arg_locs) : tensor_operands(c, proto, ops, n, arg_locs)))
        return sv_error();
    return build_checked(c, proto, ops, n, arg_locs, attrs);
}

/* ------------------------------------------------------------------ */
/* calls of table ops                                                   */

/* Math on plain numbers is folded at compile time: sqrt(64) is 8. */
static const struct { const char *name; double (*fn)(double); } scalar_math[] = {
    {"sqrt", sqrt}, {"exp", exp}, {"log", log}, {"tanh", tanh}, {"abs", fabs}, {"sin", sin}, {"cos", cos},
};

static bool fold_scalar_math(sema_ctx *c, const char *name, const ast_node *call, sv *out)
{
    if (call->list.n != 1 || call->list.items[0]->kind == AST_KWARG) return false;
    for (size_t i = 0; i < NC_COUNT(scalar_math); i++) {
        if (strcmp(scalar_math[i].name, name) != 0) continue;
        const ast_node *arg = call->list.items[0];
        if (arg->kind != AST_INT && arg->kind != AST_FLOAT && arg->kind != AST_NAME && arg->kind != AST_BINARY &&
            arg->kind != AST_UNARY)
            return false;
        sv v = known_dim_as_int(c, sema_expr(c, arg));   /* sqrt(D) of a known size: a number */
        if (v.kind == SV_DIM) v = sema_dim_tensor(c, v.dim, NC_F32, arg->loc);   /* sqrt(T): T's value, as x / T reads it */
        if (v.kind != SV_INT && v.kind != SV_FLOAT) {
            if (v.kind == SV_TENSOR) {            /* not a number after all: apply the op */
                ir_node proto = sema_proto(c, OP_COUNT, call->loc);
                op_from_name(name, &proto.op);
                *out = sema_apply(c, &proto, &v, 1, &call->loc, NULL);
                return true;
            }
            return false;
        }
        double x = v.kind == SV_INT ? (double)v.i : v.f;
        double r = scalar_math[i].fn(x);
        if (!isfinite(r) && isfinite(x)) {
            sema_err(c, call->loc, NULL, "%s(%g) is not a finite number", name, x);
            *out = sv_error();
            return true;
        }
        *out = sv_float(r);
        return true;
    }
    return false;
}

/* The op a user likely meant when a reduction is given two tensors. */
static const char *tensor_slot_hint(const char *name, const kw_spec *spec, int nspec, char *buf, size_t cap)
{
    if (strcmp(name, "max") == 0) return "for the elementwise larger of two tensors, use maximum(a, b)";
    if (strcmp(name, "sum") == 0) return "to add two tensors, write a + b";
    for (int k = 0; k < nspec; k++)
        if (strcmp(spec[k].field, "operand") == 0) {   /* attention's lengths */
            snprintf(buf, cap, "a further tensor goes by its name: %s: ...", spec[k].name);
            return buf;
        }
    return NULL;
}

/* softmax(x, axis: k) and log_softmax(x, axis: k). The ops work on the last
 * axis; another axis is swapped with the last and back, two transposes that
 * autodiff and both backends already know, so the ops stay as they are. */
static sv rowwise_on_axis(sema_ctx *c, nc_op op, const ast_node *call, const ast_node *axis_arg)
{
    const char *name = nc_ops[op].name;
    const ast_node *xa = call->list.items[0];
    if (call->list.n != 2 || xa->kind == AST_KWARG) {
        sema_err(c, call->loc, NULL, "%s takes one tensor and 'axis': %s(x, axis: -1)", name, name);
        return sv_error();
    }
    sv x = sema_expr(c, xa);
    sv ax = sema_expr(c, axis_arg->a);
    if (x.kind == SV_ERROR || ax.kind == SV_ERROR) return sv_error();
    char what[48];
    snprintf(what, sizeof what, "%s: 'axis'", name);
    int64_t k;
    if (!want_int(c, ax, axis_arg->loc, what, &k)) return sv_error();
    if (x.kind != SV_TENSOR) {
        sema_err(c, xa->loc, NULL, "%s: x must be a tensor, got %s", name, sv_kind_phrase(x.kind));
        return sv_error();
    }
    int rank = c->g->nodes[x.t].rank;
    if (k < -rank || k >= rank) {
        char hint[96];
        snprintf(hint, sizeof hint, "x has rank %d: its axes are 0 to %d, or -%d to -1 from the end", rank, rank - 1, rank);
        sema_err(c, axis_arg->loc, rank ? hint : NULL, "%s: axis %lld is out of range for a tensor of rank %d",
                 name, (long long)k, rank);
        return sv_error();
    }
    if (k < 0) k += rank;
    ir_node row = sema_proto(c, op, call->loc);
    row.attr.axis = -1;
    if (k == rank - 1) return sema_apply(c, &row, &x, 1, &xa->loc, NULL);
    ir_node swap = sema_proto(c, OP_TRANSPOSE, call->loc);
    swap.attr.naxes = (uint8_t)rank;
    for (int i = 0; i < rank; i++) swap.attr.axes[i] = (int8_t)i;
    swap.attr.axes[k] = (int8_t)(rank - 1);
    swap.attr.axes[rank - 1] = (int8_t)k;
    ir_node back = swap;
    sv y = sema_apply(c, &swap, &x, 1, &xa->loc, NULL);
    if (y.kind != SV_ERROR) y = sema_apply(c, &row, &y, 1, &xa->loc, NULL);
    if (y.kind != SV_ERROR) y = sema_apply(c, &back, &y, 1, &xa->loc, NULL);
    return y;
}

static const ast_node *axis_kwarg(const ast_node *call)
{
    for (uint32_t i = 0; i < call->list.n; i++)
        if (call->list.items[i]->kind == AST_KWARG && strcmp(call->list.items[i]->name, "axis") == 0)
            return call->list.items[i];
    return NULL;
}

/* A tensor given by name where the spec's field is "operand" (attention's
 * lengths) goes after the positional operands. */
static bool append_keyword_operands(sema_ctx *c, const char *name, const kw_spec *spec, int nspec, const sv *given,
                                    const nc_loc *given_loc, const bool *has, sv *ops, nc_loc *locs, int *ntensor)
{
    for (int k = 0; k < nspec; k++) {
        if (!has[k] || strcmp(spec[k].field, "operand") != 0) continue;
        if (given[k].kind == SV_ERROR) return false;
        if (given[k].kind != SV_TENSOR) {
            sema_err(c, given_loc[k], NULL, "%s: '%s' must be a tensor, got %s", name, spec[k].name, sv_kind_phrase(given[k].kind));
            return false;
        }
        ops[*ntensor] = given[k];
        locs[(*ntensor)++] = given_loc[k];
    }
    return true;
}

/* A builtin call's arguments as its op takes them: the tensor operands in
 * order, and the spec's fields given by name or by position after them. */
typedef struct call_args {
    const char *name;        /* the builtin, for messages */
    kw_spec spec[8];
    int nspec;
    int ntensor;             /* tensor operands the op takes (a list: 1) */
    int npos;                /* positional arguments seen */
    sv ops[65];              /* a list of 64, or the operands and one given by name */
    nc_loc locs[65];
    sv given[8];             /* per spec field, where has[] */
    nc_loc given_loc[8];
    bool has[8];
} call_args;

/* name: VALUE; an unknown name's hint lists the names the builtin takes. */
static bool take_keyword(sema_ctx *c, call_args *ca, const ast_node *a)
{
    int k = 0;
    while (k < ca->nspec && strcmp(ca->spec[k].name, a->name) != 0) k++;
    if (k == ca->nspec) {
        char hint[1024] = "";
        for (int j = 0; j < ca->nspec; j++)
            snprintf(hint + strlen(hint), sizeof hint - strlen(hint), "%s%s", j ? ", " : "it takes: ", ca->spec[j].name);
        sema_err(c, a->loc, ca->nspec ? hint : NULL, "%s has no argument '%s'", ca->name, a->name);
        return false;
    }
    if (ca->has[k]) { sema_err(c, a->loc, NULL, "%s: '%s' given twice", ca->name, a->name); return false; }
    ca->given[k] = sema_expr(c, a->a);
    ca->given_loc[k] = a->loc;
    ca->has[k] = true;
    return true;
}

/* A positional argument: a tensor operand, then the spec's fields in order. */
static bool take_positional(sema_ctx *c, call_args *ca, const ast_node *a)
{
    if (ca->npos < ca->ntensor) {
        ca->ops[ca->npos] = sema_expr(c, a);
        ca->locs[ca->npos++] = a->loc;
        return true;
    }
    int k = ca->npos++ - ca->ntensor;
    if (k >= ca->nspec) {
        sema_err(c, a->loc, NULL, "too many arguments to %s", ca->name);
        return false;
    }
    if (ca->has[k]) { sema_err(c, a->loc, NULL, "%s: '%s' given twice", ca->name, ca->spec[k].name); return false; }
    ca->given[k] = sema_expr(c, a);
    if (ca->given[k].kind == SV_TENSOR && strcmp(ca->spec[k].field, "operand") != 0) {   /* max(a, b): a second tensor where a compile-time value goes */
        char hint[96];
        sema_err(c, a->loc, tensor_slot_hint(ca->name, ca->spec, ca->nspec, hint, sizeof hint),
                 "%s takes %d tensor operand%s; its argument '%s' is a compile-time value, got a tensor", ca->name, ca->ntensor,
                 ca->ntensor == 1 ? "" : "s", ca->spec[k].name);
        return false;
    }
    ca->given_loc[k] = a->loc;
    ca->has[k] = true;
    return true;
}

static bool take_call_args(sema_ctx *c, const ast_node *call, call_args *ca)
{
    for (uint32_t i = 0; i < call->list.n; i++) {
        const ast_node *a = call->list.items[i];
        if (!(a->kind == AST_KWARG ? take_keyword(c, ca, a) : take_positional(c, ca, a))) return false;
    }
    if (ca->npos >= ca->ntensor) return true;
    sema_err(c, call->loc, NULL, "%s expects %d tensor operand%s, got %d", ca->name, ca->ntensor, ca->ntensor == 1 ? "" : "s",
             ca->npos);
    return false;
}

/* The spec's compile-time fields into proto's attributes: given, or their
 * defaults; a random op given no seed draws the model's next one. */
static bool set_call_attrs(sema_ctx *c, const ast_node *call, const call_args *ca, nc_op op, ir_node *proto)
{
    for (int k = 0; k < ca->nspec; k++) {
        sv v;
        nc_loc loc = call->loc;
        if (strcmp(ca->spec[k].field, "operand") == 0) continue;   /* a tensor: appended to the operands */
        if (ca->has[k]) v = ca->given[k], loc = ca->given_loc[k];
        else if (strcmp(ca->spec[k].def, "!") == 0) {
            sema_err(c, call->loc, NULL, "%s: missing argument '%s'", ca->name, ca->spec[k].name);
            return false;
        } else if (strcmp(ca->spec[k].def, "-") == 0) continue;
        else v = spec_default(ca->spec[k].def);
        if (!apply_field(c, &ca->spec[k], v, loc, proto, ca->name)) return false;
    }
    if ((nc_ops[op].flags & OPF_RANDOM) && !seed_given(ca->spec, ca->nspec, ca->has)) proto->attr.seed = default_seed(c);
    /* a source op's value must fit its declared dtype, as a number beside an
     * operator must: fill(1.5, dtype: i32) would silently be 1 */
    for (int k = 0; k < ca->nspec; k++)
        if (nc_ops[op].dtype_rule == DT_DECLARED && strcmp(ca->spec[k].field, "f") == 0 &&
            !number_fits(c, proto->attr.f, proto->dtype, ca->has[k] ? ca->given_loc[k] : call->loc))
            return false;
    return true;
}

/* A list of tensors, concat([a, b], axis: 1)'s, as the operands. */
static bool spread_tensor_list(sema_ctx *c, call_args *ca)
{
    sv list = ca->ops[0];
    if (list.kind == SV_ERROR) return false;
    if (list.kind != SV_LIST || list.n == 0 || list.n > 64) {
        sema_err(c, ca->locs[0], NULL, "%s takes a non-empty list of tensors", ca->name);
        return false;
    }
    for (uint32_t i = 0; i < list.n; i++) ca->ops[i] = list.items[i], ca->locs[i] = ca->locs[0];
    ca->ntensor = (int)list.n;
    return true;
}

sv sema_call_builtin(sema_ctx *c, const char *name, const ast_node *call)
{
    c->pending_name = NULL;
    sv folded;
    if (fold_scalar_math(c, name, call, &folded)) return folded;
    nc_op op;
    if (!op_from_name(name, &op)) NC_BUG("not a builtin: %s", name);
    const ast_node *axis_arg = axis_kwarg(call);
    if ((op == OP_SOFTMAX || op == OP_LOG_SOFTMAX) && axis_arg) return rowwise_on_axis(c, op, call, axis_arg);
    const nc_op_info *info = &nc_ops[op];
    call_args ca = {.name = name, .ntensor = info->nargs < 0 ? 1 : info->nargs};
    ca.nspec = parse_spec(info->kwargs, ca.spec, 8);
    if (!take_call_args(c, call, &ca)) return sv_error();
    ir_node proto = sema_proto(c, op, call->loc);
    if (!set_call_attrs(c, call, &ca, op, &proto)) return sv_error();
    if (info->nargs < 0 && !spread_tensor_list(c, &ca)) return sv_error();
    if (!append_keyword_operands(c, name, ca.spec, ca.nspec, ca.given, ca.given_loc, ca.has, ca.ops, ca.locs, &ca.ntensor))
        return sv_error();
    if (op == OP_SOFTMAX || op == OP_LOG_SOFTMAX) proto.attr.axis = -1;
    sema_attr_locs written = {0};
    for (int k = 0; k < ca.nspec; k++)
        if (ca.has[k] && strcmp(ca.spec[k].field, "operand") != 0)
            written.field[written.n] = ca.spec[k].field, written.loc[written.n++] = ca.given_loc[k];
    return sema_apply(c, &proto, ca.ops, ca.ntensor, ca.locs, &written);
}

/* ------------------------------------------------------------------ */
/* operators                                                            */

static const nc_op binary_ops[] = {
    [AST_OP_ADD] = OP_ADD, [AST_OP_SUB] = OP_SUB, [AST_OP_MUL] = OP_MUL, [AST_OP_DIV] = OP_DIV,
    [AST_OP_MATMUL] = OP_MATMUL, [AST_OP_EQ] = OP_EQ, [AST_OP_NE] = OP_NE, [AST_OP_LT] = OP_LT,
    [AST_OP_LE] = OP_LE, [AST_OP_GT] = OP_GT, [AST_OP_GE] = OP_GE, [AST_OP_POW] = OP_POW,
};

static sv fold_compare(ast_op op, double x, double y)
{
    bool r = op == AST_OP_EQ ? x == y : op == AST_OP_NE ? x != y : op == AST_OP_LT ? x < y
           : op == AST_OP_LE ? x <= y : op == AST_OP_GT ? x > y : x >= y;
    return (sv){.kind = SV_BOOL, .i = r};
}

/* x ** y as Python folds it: a negative base takes only a whole exponent
 * (else the result is not a real number), zero no negative one, and a
 * result past the doubles is an error rather than inf. */
static sv fold_float_pow(sema_ctx *c, double x, double y, nc_loc loc)
{
    if (x == 0 && y < 0) {
        sema_err(c, loc, NULL, "zero cannot be raised to a negative power (%s)", nc_number(y).s);
        return sv_error();
    }
    if (x < 0 && isfinite(y) && y != floor(y)) {
        sema_err(c, loc, NULL, "(%s) ** %s is not a real number", nc_number(x).s, nc_number(y).s);
        return sv_error();
    }
    double r = pow(x, y);
    if (isinf(r) && isfinite(x) && isfinite(y)) {
        sema_err(c, loc, NULL, "%s ** %s is not a finite number", nc_number(x).s, nc_number(y).s);
        return sv_error();
    }
    return sv_float(r);
}

/* A whole power of a whole number is whole (2 ** 10 is 1024, overflow an
 * error); a negative exponent gives a fraction, as in Python (2 ** -1 is 0.5). */
static sv fold_int_pow(sema_ctx *c, int64_t x, int64_t y, nc_loc loc)
{
    if (y < 0) return fold_float_pow(c, (double)x, (double)y, loc);
    int64_t r = 1;
    for (bool ovf = false; y > 0; y >>= 1) {   /* by squaring: a squared x that overflows is a factor of r */
        if (y & 1) ovf |= __builtin_mul_overflow(r, x, &r);
        if (y > 1) ovf |= __builtin_mul_overflow(x, x, &x);
        if (ovf) { sema_err(c, loc, NULL, "integer overflow in a constant expression"); return sv_error(); }
    }
    return sv_int(r);
}

static sv fold_ints(sema_ctx *c, ast_op op, int64_t x, int64_t y, nc_loc loc)
{
    int64_t r = 0;
    bool ovf = false;
    switch (op) {
    case AST_OP_ADD: ovf = __builtin_add_overflow(x, y, &r); break;
    case AST_OP_SUB: ovf = __builtin_sub_overflow(x, y, &r); break;
    case AST_OP_MUL: ovf = __builtin_mul_overflow(x, y, &r); break;
    case AST_OP_DIV:
        if (y == 0) { sema_err(c, loc, NULL, "division by zero"); return sv_error(); }
        if (x == INT64_MIN && y == -1) { ovf = true; break; }   /* before x % y, which traps on it (SIGFPE) */
        if (x % y != 0) return sv_float((double)x / (double)y);
        r = x / y;
        break;
    case AST_OP_POW: return fold_int_pow(c, x, y, loc);
    default: return fold_compare(op, (double)x, (double)y);
    }
    if (ovf) { sema_err(c, loc, NULL, "integer overflow in a constant expression"); return sv_error(); }
    return sv_int(r);
}

/* An overflow to infinity is an error, as pow's is: 1e308 * 10.0 became an
 * inf that a model multiplied by, silently. */
static sv fold_float_arith(sema_ctx *c, ast_op op, double x, double y, nc_loc loc)
{
    double r = op == AST_OP_ADD ? x + y : op == AST_OP_SUB ? x - y : op == AST_OP_MUL ? x * y : x / y;
    if (!isfinite(r) && isfinite(x) && isfinite(y)) {
        sema_err(c, loc, NULL, "%s %s %s is not a finite number", nc_number(x).s, ast_op_text(op), nc_number(y).s);
        return sv_error();
    }
    return sv_float(r);
}

static sv fold_floats(sema_ctx *c, ast_op op, double x, double y, nc_loc loc)
{
    switch (op) {
    case AST_OP_ADD: case AST_OP_SUB: case AST_OP_MUL: return fold_float_arith(c, op, x, y, loc);
    case AST_OP_DIV:
        if (y == 0) { sema_err(c, loc, NULL, "division by zero"); return sv_error(); }
        return fold_float_arith(c, op, x, y, loc);
    case AST_OP_POW: return fold_float_pow(c, x, y, loc);
    default: return fold_compare(op, x, y);
    }
}

/* What lhs - rhs = p CMP 0 is at every binding (symbols are sizes, 1 or
 * more): 1 true, 0 false, -1 it depends. p's terms all growing with the
 * symbols puts its least value at all ones; all shrinking, its largest. */
static int size_sign_decides(const dim_expr *p, ir_cmp cmp)
{
    bool up = true, down = true;
    int64_t at_ones = 0;   /* at most DIM_MAX_TERMS coefficients of DIM_LIMIT: no overflow */
    for (int t = 0; t < p->nterms; t++) {
        at_ones += p->term[t].coeff;
        if (p->term[t].nfactors && p->term[t].coeff < 0) up = false;
        if (p->term[t].nfactors && p->term[t].coeff > 0) down = false;
    }
    int64_t lo = up ? at_ones : INT64_MIN, hi = down ? at_ones : INT64_MAX;
    switch (cmp) {
    case IR_CMP_LT: return hi < 0 ? 1 : lo >= 0 ? 0 : -1;
    case IR_CMP_LE: return hi <= 0 ? 1 : lo > 0 ? 0 : -1;
    case IR_CMP_GT: return lo > 0 ? 1 : hi <= 0 ? 0 : -1;
    case IR_CMP_GE: return lo >= 0 ? 1 : hi < 0 ? 0 : -1;
    case IR_CMP_EQ: return lo > 0 || hi < 0 ? 0 : -1;
    default: return lo > 0 || hi < 0 ? 1 : -1;
    }
}

/* A comparison of sizes in a require's condition: folded where every
 * binding gives the same answer (B * 784 > 1), else true for now and kept
 * for the session that binds the symbols (B > 1). */
static sv size_compare(sema_ctx *c, ast_op op, uint32_t da, uint32_t db, nc_loc loc)
{
    static const ir_cmp cmps[] = {[AST_OP_LT] = IR_CMP_LT, [AST_OP_LE] = IR_CMP_LE, [AST_OP_GT] = IR_CMP_GT,
                                  [AST_OP_GE] = IR_CMP_GE, [AST_OP_EQ] = IR_CMP_EQ, [AST_OP_NE] = IR_CMP_NE};
    ir_cmp cmp = cmps[op];
    dim_expr p;
    dim_status s = dim_sub(&c->g->dims[da], &c->g->dims[db], &p);
    int known = s == DIM_OK ? size_sign_decides(&p, cmp) : -1;
    if (known >= 0) return (sv){.kind = SV_BOOL, .i = known};
    if (c->npending == (int)NC_COUNT(c->pending)) {
        sema_err(c, loc, "split the require in two", "a require's condition compares at most %d symbolic sizes",
                 (int)NC_COUNT(c->pending));
        return sv_error();
    }
    c->pending[c->npending].lhs = da, c->pending[c->npending].rhs = db, c->pending[c->npending].cmp = cmp;
    c->npending++;
    return (sv){.kind = SV_BOOL, .i = 1};
}

/* B > 1 under a require's or or not: the session checks each comparison
 * alone, so it cannot check this one. */
static sv size_blocked(sema_ctx *c, ast_op op, nc_loc loc)
{
    sema_err(c, loc, "join such comparisons with and, or write them as requires of their own",
             "'%s' compares symbolic sizes, which a require leaves to the session binding them, but not under '%s'",
             ast_op_text(op), c->defer_blocked);
    return sv_error();
}

/* A == B, A != B of sizes: the same dim, or not; in a require, kept for
 * the session; one whose answer rests on a symbol's value (T == 1) is
 * noted, for an if not to choose by it (dim_eq_symbolic). */
static sv dim_equality(sema_ctx *c, ast_op op, uint32_t da, uint32_t db, nc_loc loc)
{
    const dim_expr *x = &c->g->dims[da], *y = &c->g->dims[db];
    int64_t k;
    if (c->defer_sizes && da != db) return size_compare(c, op, da, db, loc);
    if (c->defer_blocked && da != db && (!dim_is_const(x, &k) || !dim_is_const(y, &k))) return size_blocked(c, op, loc);
    if (da != db && (!dim_is_const(x, &k) || !dim_is_const(y, &k))) c->dim_eq_symbolic = true, c->dim_eq_loc = loc;
    return (sv){.kind = SV_BOOL, .i = (da == db) == (op == AST_OP_EQ)};
}

/* A < B and the like of sizes one of which is symbolic: a require keeps
 * it for the session; anywhere else it has no answer yet. */
static sv dim_order(sema_ctx *c, ast_op op, uint32_t da, uint32_t db, nc_loc loc)
{
    if (c->defer_sizes) return size_compare(c, op, da, db, loc);
    if (c->defer_blocked) return size_blocked(c, op, loc);
    /* a size a symbol stands for has no value until the model runs */
    int64_t k;
    sema_err(c, loc, "bind the symbol when building (--dim NAME=VALUE), or give its axis a number in the model's inputs",
             "'%s' compares sizes known when the model is built; %s is symbolic", ast_op_text(op),
             sema_dim_text(c, dim_is_const(&c->g->dims[da], &k) ? db : da));
    return sv_error();
}

static sv dim_arith(sema_ctx *c, ast_op op, sv a, sv b, nc_loc loc)
{
    uint32_t da, db;
    if (!sema_as_dim(c, a, loc, &da) || !sema_as_dim(c, b, loc, &db)) return sv_error();
    dim_expr r;
    const dim_expr *x = &c->g->dims[da], *y = &c->g->dims[db];
    dim_status s;
    switch (op) {
    case AST_OP_ADD: s = dim_add(x, y, &r); break;
    case AST_OP_SUB: s = dim_sub(x, y, &r); break;
    case AST_OP_MUL: s = dim_mul(x, y, &r); break;
    case AST_OP_DIV: s = dim_div(x, y, &r); break;
    case AST_OP_EQ: case AST_OP_NE: return dim_equality(c, op, da, db, loc);
    case AST_OP_LT: case AST_OP_LE: case AST_OP_GT: case AST_OP_GE: return dim_order(c, op, da, db, loc);
    default:
        sema_err(c, loc, NULL, "'%s' is not defined on symbolic dimensions", ast_op_text(op));
        return sv_error();
    }
    if (s != DIM_OK) {
        const char *hint = s == DIM_INEXACT ? "'/' of sizes is a size; for a fraction divide a float (2.0 / D), "
                                              "to round down write '//'" : NULL;
        sema_err(c, loc, hint, "%s %s %s: %s", sema_dim_text(c, da), ast_op_text(op), sema_dim_text(c, db),
                 dim_status_message(s));
        return sv_error();
    }
    int64_t k;
    if (dim_is_const(&r, &k)) return sv_int(k);
    return (sv){.kind = SV_DIM, .dim = ir_dim_intern(c->g, &r)};
}

/* A symbolic dim as a scalar tensor of dtype t, for x / T: its value is
 * known only when the dims are bound, so dim_value reads it from the bound
 * symbols at run time (no reduction), then it is cast. Float results take
 * the value in f32 (exact below 2^24); integer ones in i32, so that a u8
 * size saturates as a cast of the count does rather than wrapping at 256. */
sv sema_dim_tensor(sema_ctx *c, uint32_t dim, nc_dtype t, nc_loc loc)
{
    ir_value count, out;
    tc_error e;
    nc_dtype counting = dtype_is_float(t) ? NC_F32 : NC_I32;
    ir_node p = sema_proto(c, OP_DIM_VALUE, loc);
    p.dtype = counting;
    p.attr.lo = dim;
    if (!ir_build(c->g, &p, NULL, 0, &count, &e)) goto fail;
    if (t == counting) return sv_tensor(c, count);
    p = sema_proto(c, OP_CAST, loc);
    p.attr.to = t;
    if (!ir_build(c->g, &p, &count, 1, &out, &e)) goto fail;
    return sv_tensor(c, out);
fail:
    sema_err(c, loc, NULL, "%s", e.msg);
    tc_error_free(&e);
    return sv_error();
}

/* T ** 2 is T * T: a whole exponent of 0 or more keeps a symbolic size a
 * polynomial (a product of at most DIM_MAX_FACTORS symbols). */
static sv dim_power(sema_ctx *c, sv a, sv b, nc_loc loc)
{
    if (b.kind == SV_DIM) {
        sema_err(c, loc, "bind the symbol when building (--dim NAME=VALUE) to compute with its value",
                 "'**' with a symbolic exponent: %s is known only when the model runs", sema_dim_text(c, b.dim));
        return sv_error();
    }
    if (a.kind != SV_DIM || b.kind != SV_INT || b.i < 0) {
        sema_err(c, loc, "T ** 2 is T * T: a symbolic size takes a whole exponent of 0 or more",
                 "'**' of the symbolic size %s by %s", sema_dim_text(c, a.dim), b.kind == SV_INT ? "a negative number" : sv_kind_phrase(b.kind));
        return sv_error();
    }
    sv r = sv_int(1);
    for (int64_t k = 0; k < b.i && r.kind != SV_ERROR; k++) r = dim_arith(c, AST_OP_MUL, r, a, loc);
    return r;
}

/* pow is defined on floats: say how to get one from an integer operand of
 * '**' rather than the op's generic "expects a floating-point tensor". */
static bool pow_operand_float(sema_ctx *c, sv v, nc_loc loc)
{
    if (v.kind != SV_TENSOR || dtype_is_float(c->g->nodes[v.t].dtype)) return true;
    sema_err(c, loc, "cast it first, f32(x) ** 2, or multiply it out, x * x",
             "'**' raises floats to a power; this operand is %s", sema_node_text(c, v.t));
    return false;
}

/* A dim known when the model is built is a plain number to '//'. */
static bool known_size(sema_ctx *c, sv *v, nc_loc loc)
{
    *v = known_dim_as_int(c, *v);
    if (v->kind != SV_DIM) return true;
    sema_err(c, loc, "'/' divides symbolic sizes that divide exactly: T / 2",
             "'//' needs sizes known when the model is built; %s is symbolic", sema_dim_text(c, v->dim));
    return false;
}

/* a // b: the floor of a / b, for whole numbers (a conv's output size,
 * (H + 2 * padding - kernel) // stride + 1), rounding down as Python does. */
static sv floor_divide(sema_ctx *c, sv a, sv b, nc_loc loc)
{
    if (!known_size(c, &a, loc) || !known_size(c, &b, loc)) return sv_error();
    if (a.kind != SV_INT || b.kind != SV_INT) {
        sema_err(c, loc, a.kind == SV_TENSOR || b.kind == SV_TENSOR ? "'/' divides tensors" : NULL,
                 "'//' divides whole numbers, got %s and %s", sv_kind_phrase(a.kind), sv_kind_phrase(b.kind));
        return sv_error();
    }
    if (b.i == 0) { sema_err(c, loc, NULL, "division by zero"); return sv_error(); }
    if (a.i == INT64_MIN && b.i == -1) { sema_err(c, loc, NULL, "integer overflow in a constant expression"); return sv_error(); }
    int64_t q = a.i / b.i;
    if (a.i % b.i != 0 && (a.i < 0) != (b.i < 0)) q--;
    return sv_int(q);
}

/* a OP b with a tensor on one side: an elementwise node (or a matmul). */
static sv tensor_binary(sema_ctx *c, ast_op op, sv a, sv b, nc_loc loc, const nc_loc operand_locs[2])
{
    if ((a.kind != SV_TENSOR && !is_scalar(a)) || (b.kind != SV_TENSOR && !is_scalar(b))) {
        sema_err(c, loc, NULL, "'%s' between %s and %s", ast_op_text(op), sv_kind_phrase(a.kind), sv_kind_phrase(b.kind));
        return sv_error();
    }
    ir_node proto = sema_proto(c, binary_ops[op], loc);
    sv ops[2] = {a, b};
    /* an error about a number is about where it is written; one about the pair, at the operator */
    nc_loc locs[2] = {is_scalar(a) ? operand_locs[0] : loc, is_scalar(b) ? operand_locs[1] : loc};
    if (op == AST_OP_MATMUL && (a.kind != SV_TENSOR || b.kind != SV_TENSOR)) {
        sema_err(c, loc, NULL, "'@' multiplies two tensors");
        return sv_error();
    }
    if (op == AST_OP_POW && (!pow_operand_float(c, a, operand_locs[0]) || !pow_operand_float(c, b, operand_locs[1])))
        return sv_error();
    return sema_apply(c, &proto, ops, 2, locs, NULL);
}

/* a OP b of values known when the model is built: sizes, numbers, strings,
 * dtypes, folded now. */
/* A float beside a symbolic size in 1.0 / T or T * 0.5 takes the size's
 * value, as sqrt(T) does: as a size it was a division that could never be
 * exact ("1 / T does not divide exactly", hinting to write 1.0 / T) or a
 * fraction refused as a dimension. A whole float times a size (2.0 * T)
 * stays a size. */
static bool float_takes_size_value(ast_op op, sv a, sv b)
{
    if (op != AST_OP_ADD && op != AST_OP_SUB && op != AST_OP_MUL && op != AST_OP_DIV) return false;
    if (!(a.kind == SV_FLOAT && b.kind == SV_DIM) && !(a.kind == SV_DIM && b.kind == SV_FLOAT)) return false;
    double f = a.kind == SV_FLOAT ? a.f : b.f;
    return op == AST_OP_DIV || f != floor(f) || !isfinite(f);
}

static sv value_binary(sema_ctx *c, ast_op op, sv a, sv b, nc_loc loc, const nc_loc operand_locs[2])
{
    /* H + 2 * padding with padding -1, kernel <= H: a known size is a number; so
     * it is divided by or dividing a float (1.0 / D), where H / 2 divides sizes */
    if (op != AST_OP_DIV || a.kind == SV_FLOAT || b.kind == SV_FLOAT) {
        a = known_dim_as_int(c, a);
        b = known_dim_as_int(c, b);
    }
    if (float_takes_size_value(op, a, b)) {
        if (a.kind == SV_DIM) a = sema_dim_tensor(c, a.dim, NC_F32, operand_locs[0]);
        else b = sema_dim_tensor(c, b.dim, NC_F32, operand_locs[1]);
        if (a.kind == SV_ERROR || b.kind == SV_ERROR) return sv_error();
        return tensor_binary(c, op, a, b, loc, operand_locs);
    }
    if (op == AST_OP_POW && (a.kind == SV_DIM || b.kind == SV_DIM)) return dim_power(c, a, b, loc);
    if (a.kind == SV_DIM || b.kind == SV_DIM) return dim_arith(c, op, a, b, loc);
    if (op == AST_OP_MATMUL) {
        sema_err(c, loc, NULL, "'@' multiplies two tensors");
        return sv_error();
    }
    if (a.kind == SV_INT && b.kind == SV_INT) return fold_ints(c, op, a.i, b.i, loc);
    bool na = a.kind == SV_INT || a.kind == SV_FLOAT, nb = b.kind == SV_INT || b.kind == SV_FLOAT;
    if (na && nb)
        return fold_floats(c, op, a.kind == SV_INT ? (double)a.i : a.f, b.kind == SV_INT ? (double)b.i : b.f, loc);
    if (a.kind == b.kind && (op == AST_OP_EQ || op == AST_OP_NE)) {
        bool eq = a.kind == SV_STRING ? strcmp(a.s, b.s) == 0 : a.kind == SV_DTYPE ? a.dtype == b.dtype : a.i == b.i;
        return (sv){.kind = SV_BOOL, .i = op == AST_OP_EQ ? eq : !eq};
    }
    sema_err(c, loc, NULL, "'%s' between %s and %s", ast_op_text(op), sv_kind_phrase(a.kind), sv_kind_phrase(b.kind));
    return sv_error();
}

sv sema_binary(sema_ctx *c, ast_op op, sv a, sv b, nc_loc loc, const nc_loc operand_locs[2])
{
    if (a.kind == SV_ERROR || b.kind == SV_ERROR) return sv_error();
    if (op == AST_OP_FLOORDIV) return floor_divide(c, a, b, loc);
    /* a size beside a tensor is a scalar tensor of its dtype: x / T */
    if (a.kind == SV_TENSOR && b.kind == SV_DIM) b = dim_beside_tensor(c, b, c->g->nodes[a.t].dtype, loc);
    else if (b.kind == SV_TENSOR && a.kind == SV_DIM) a = dim_beside_tensor(c, a, c->g->nodes[b.t].dtype, loc);
    if (a.kind == SV_ERROR || b.kind == SV_ERROR) return sv_error();
    if (a.kind == SV_TENSOR || b.kind == SV_TENSOR) return tensor_binary(c, op, a, b, loc, operand_locs);
    return value_binary(c, op, a, b, loc, operand_locs);
}

sv sema_negate(sema_ctx *c, sv a, nc_loc loc)
{
    switch (a.kind) {
    case SV_ERROR: return a;
    case SV_INT:
        if (a.i == INT64_MIN) { sema_err(c, loc, NULL, "integer overflow"); return sv_error(); }
        return sv_int(-a.i);
    case SV_FLOAT: return sv_float(-a.f);
    case SV_DIM: return dim_arith(c, AST_OP_MUL, sv_int(-1), a, loc);
    case SV_TENSOR: {
        ir_node proto = sema_proto(c, OP_NEG, loc);
        return sema_apply(c, &proto, &a, 1, &loc, NULL);
    }
    default:
        sema_err(c, loc, NULL, "cannot negate %s", sv_kind_phrase(a.kind));
        return sv_error();
    }
}

/* ------------------------------------------------------------------ */
/* casts                                                                */

/* Which fn expansion's explicit cast made v (UINT32_MAX: none, or an autocast). */
static uint32_t cast_body_of(const sema_ctx *c, ir_value v) { return v < c->ncast_body ? c->cast_body[v] : UINT32_MAX; }

static void cast_body_set(sema_ctx *c, ir_value v)
{
    if (v >= c->ncast_body) {
        uint32_t n = v + 64;
        c->cast_body = nc_xrealloc(c->cast_body, n * sizeof *c->cast_body);
        for (uint32_t i = c->ncast_body; i < n; i++) c->cast_body[i] = UINT32_MAX;
        c->ncast_body = n;
    }
    c->cast_body[v] = c->body;
}

sv sema_cast(sema_ctx *c, sv x, nc_dtype to, nc_loc loc, bool automatic)
{
    const ir_node *src = &c->g->nodes[x.t];
    if (src->dtype == to) return x;
    /* lint: f16 -> f32 -> f16 is the identity, written twice. Only where one
     * body wrote both casts: across a call each is its fn's own contract
     * (nn.batch_norm returns x's dtype, nn.mse computes in f32), and nobody
     * could remove the pair. */
    if (!automatic && src->op == OP_CAST && cast_body_of(c, x.t) == c->body) {
        nc_dtype orig = c->g->nodes[ir_args(c->g, src)[0]].dtype;
        if (orig == to && dtype_is_float(to) && dtype_size(src->dtype) > dtype_size(to))
            sema_warn(c, loc, "remove both casts", "cast round trip %s -> %s -> %s has no effect", dtype_name(orig),
                      dtype_name(src->dtype), dtype_name(to));
        /* f32 -> bf16 -> f32 is not the identity: it throws away mantissa bits */
        else if (orig == to && dtype_is_float(to) && dtype_is_float(src->dtype) && dtype_size(src->dtype) < dtype_size(to))
            sema_warn(c, loc, "if the rounding is intended, keep it; otherwise remove both casts",
                      "cast round trip %s -> %s -> %s rounds the value to %s precision", dtype_name(orig),
                      dtype_name(src->dtype), dtype_name(to), dtype_name(src->dtype));
    }
    /* lint: f32(w) of an f32 parameter inside a bf16 block widens the block's
     * bf16 copy of w: it looks like a way back to the master weight, and is not */
    if (!automatic && src->op == OP_CAST && (src->flags & IR_FLAG_AUTOCAST) &&
        c->g->nodes[ir_args(c->g, src)[0]].dtype == to && dtype_size(src->dtype) < dtype_size(to))
        sema_warn(c, loc, "to compute with the f32 value, do it outside the block or in a precision f32 { ... } block",
                  "%s(...) of a parameter inside a %s block widens its %s copy: the value keeps %s precision",
                  dtype_name(to), dtype_name(src->dtype), dtype_name(src->dtype), dtype_name(src->dtype));
    ir_node proto = sema_proto(c, OP_CAST, loc);
    proto.attr.to = to;
    if (automatic) proto.flags |= IR_FLAG_AUTOCAST;
    ir_value out;
    tc_error e;
    if (!ir_build(c->g, &proto, &x.t, 1, &out, &e)) {
        sema_err(c, loc, NULL, "%s", e.msg);
        tc_error_free(&e);
        return sv_error();
    }
    if (!automatic) cast_body_set(c, out);
    return sv_tensor(c, out);
}

/* ------------------------------------------------------------------ */
/* parameter initializers                                               */

static const struct {
    const char *name;
    ir_init_kind kind;
    const char *args;          /* positional names */
    double a, b;               /* defaults */
} initializers[] = {
    {"zeros", IR_INIT_ZEROS, "", 0, 0},
    {"ones", IR_INIT_ONES, "", 0, 0},
    {"normal", IR_INIT_NORMAL, "std mean", 0.02, 0},
    {"uniform", IR_INIT_UNIFORM, "low high", -0.05, 0.05},
    {"xavier", IR_INIT_XAVIER_UNIFORM, "gain", 1, 0},
    {"xavier_uniform", IR_INIT_XAVIER_UNIFORM, "gain", 1, 0},
    {"xavier_normal", IR_INIT_XAVIER_NORMAL, "gain", 1, 0},
    {"kaiming", IR_INIT_KAIMING_UNIFORM, "gain", 1.4142135623730951, 0},
    {"kaiming_uniform", IR_INIT_KAIMING_UNIFORM, "gain", 1.4142135623730951, 0},
    {"kaiming_normal", IR_INIT_KAIMING_NORMAL, "gain", 1.4142135623730951, 0},
};

/* Parameters normal(std, mean) are stored as init_a = std, init_b = mean;
 * uniform(low, high) as init_a = low, init_b = high; the fan-based ones as
 * init_a = gain. */
/* An initializer's argument names ("std", "low high") and their values. */
typedef struct init_args {
    char names[2][16];
    int nnames;
    double vals[2];
    bool set_low;   /* the first given: uniform(a) */
} init_args;

/* The call's arguments, by position or name, into ia->vals: numbers. */
static bool take_init_args(sema_ctx *c, const ast_node *e, const char *name, init_args *ia)
{
    int pos = 0;
    for (uint32_t i = 0; e->kind == AST_CALL && i < e->list.n; i++) {
        const ast_node *a = e->list.items[i];
        int slot = a->kind == AST_KWARG ? -1 : pos++;
        if (a->kind == AST_KWARG)
            for (int k = 0; k < ia->nnames; k++) if (strcmp(ia->names[k], a->name) == 0) slot = k;
        if (slot < 0 || slot >= ia->nnames) {
            sema_err(c, a->loc, NULL, "%s: unexpected argument", name);
            return false;
        }
        sv v = sema_expr(c, a->kind == AST_KWARG ? a->a : a);
        if (v.kind == SV_ERROR) return false;
        if (v.kind != SV_INT && v.kind != SV_FLOAT) {
            sema_err(c, a->loc, NULL, "%s: arguments are numbers", name);
            return false;
        }
        ia->vals[slot] = v.kind == SV_INT ? (double)v.i : v.f;
        if (slot == 0) ia->set_low = true;
    }
    return true;
}

/* Values the initializer can draw from: finite, a std of 0 or more, low <= high. */
static bool init_values_ok(sema_ctx *c, const ast_node *e, const char *name, ir_init_kind kind, const init_args *ia)
{
    for (int k = 0; k < ia->nnames; k++)
        if (!isfinite(ia->vals[k])) {
            sema_err(c, e->loc, NULL, "%s: its %s is %g, not a finite number", name, ia->names[k], ia->vals[k]);
            return false;
        }
    if (kind == IR_INIT_NORMAL && ia->vals[0] < 0) {
        sema_err(c, e->loc, "a standard deviation is 0 or more", "normal: its std is %g", ia->vals[0]);
        return false;
    }
    if (kind == IR_INIT_UNIFORM && ia->vals[0] > ia->vals[1]) {
        sema_err(c, e->loc, "uniform(low, high) draws from [low, high]; uniform(a) from [-a, a]",
                 "uniform: its low %g is above its high %g", ia->vals[0], ia->vals[1]);
        return false;
    }
    return true;
}

bool sema_initializer(sema_ctx *c, const ast_node *e, ir_param *p)
{
    const char *name = e->kind == AST_NAME ? e->name : e->kind == AST_CALL && e->a->kind == AST_NAME ? e->a->name : NULL;
    int idx = -1;
    for (size_t i = 0; name && i < NC_COUNT(initializers); i++)
        if (strcmp(initializers[i].name, name) == 0) idx = (int)i;
    if (idx < 0) {
        sema_err(c, e->loc, "initializers: zeros, ones, normal(std), uniform(low, high), xavier, kaiming",
                 "unknown parameter initializer");
        return false;
    }
    p->init = initializers[idx].kind;
    init_args ia = {.vals = {initializers[idx].a, initializers[idx].b}};
    ia.nnames = sscanf(initializers[idx].args, "%15s %15s", ia.names[0], ia.names[1]);
    if (ia.nnames < 0) ia.nnames = 0;
    if (!take_init_args(c, e, name, &ia)) return false;
    /* uniform(a) means uniform(-a, a) */
    if (p->init == IR_INIT_UNIFORM && ia.set_low && e->list.n == 1) ia.vals[1] = fabs(ia.vals[0]), ia.vals[0] = -fabs(ia.vals[0]);
    if (!init_values_ok(c, e, name, p->init, &ia)) return false;
    p->init_a = ia.vals[0];
    p->init_b = ia.vals[1];
    return true;
}
