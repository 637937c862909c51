/* sema_index.c - x[i], x[a:b], x[..., -1]: indexing and slicing a tensor,
 * lowered to the slice op (one per axis not taken whole) and, where single
 * indices drop axes, one reshape. So the IR, the passes and autodiff see
 * nothing new. A bound is a dim: a number (negative counts from the end),
 * a symbolic size (x[:, 0:T]) or arithmetic on sizes (x[:, C:2 * C]).
 * Unlike Python, a known bound past the axis is an error, not clamped: a
 * slice that silently comes out shorter would move the error elsewhere. */
#include "sema_int.h"

#include <stdio.h>
#include <string.h>

/* What one item takes from its axis: [lo, hi), and whether it drops it. */
typedef struct index_axis {
    bool given, drop;
    uint32_t lo, hi;
    nc_loc loc, lo_loc, hi_loc;
} index_axis;

/* The indexed tensor's shape, copied: evaluating a bound may add nodes. */
typedef struct index_ctx {
    sema_ctx *c;
    int rank;
    uint32_t shape[NC_MAX_RANK];
    ir_value x;              /* the tensor, whose type messages name (index_type) */
} index_ctx;

static const char *index_type(const index_ctx *ic) { return sema_node_text(ic->c, ic->x); }

/* d >= 0 at every binding of its symbols (each at least 1): 0, or a sum of
 * terms with positive coefficients. */
static bool dim_never_negative(const dim_expr *d)
{
    for (int i = 0; i < d->nterms; i++)
        if (d->term[i].coeff <= 0) return false;
    return true;
}

static bool dim_always_negative(const dim_expr *d)
{
    for (int i = 0; i < d->nterms; i++)
        if (d->term[i].coeff >= 0) return false;
    return d->nterms > 0;
}

/* a - b as a dim id; false (reported at loc) when it does not fit the form */
static bool dim_minus(sema_ctx *c, uint32_t a, uint32_t b, nc_loc loc, dim_expr *out)
{
    dim_status s = dim_sub(&c->g->dims[a], &c->g->dims[b], out);
    if (s == DIM_OK) return true;
    sema_err(c, loc, NULL, "this bound: %s", dim_status_message(s));
    return false;
}

static void out_of_range(index_ctx *ic, nc_loc loc, int axis, bool is_end, const char *pos)
{
    sema_ctx *c = ic->c;
    const char *size = sema_dim_text(c, ic->shape[axis]);
    int64_t n;
    const char *hint = !dim_is_const(&c->g->dims[ic->shape[axis]], &n) ? sema_textf(c, "axis %d has %s elements", axis, size)
                       : is_end ? sema_textf(c, "slice bounds go from -%lld to %lld; they are not clamped to the axis as Python's are",
                                             (long long)n, (long long)n)
                                : sema_textf(c, "indices go from 0 to %lld, or from -%lld to -1 counting from the end",
                                             (long long)n - 1, (long long)n);
    sema_err(c, loc, hint, "%s %s is out of range for axis %d of %s (size %s)", is_end ? "slice bound" : "index", pos, axis,
             index_type(ic), size);
}

/* A bound or index as a position on the axis: counted from the end when it
 * is negative. `bound`: a slice bound, which may equal the axis size. */
static bool axis_position(index_ctx *ic, const ast_node *e, int axis, bool bound, uint32_t *out)
{
    sema_ctx *c = ic->c;
    uint32_t size = ic->shape[axis];
    sv v = sema_expr(c, e);
    int64_t k;
    if (v.kind == SV_DIM && dim_is_const(&c->g->dims[v.dim], &k)) v = sv_int(k);
    if (v.kind == SV_ERROR) return false;
    if (v.kind == SV_TENSOR) {
        const ir_node *t = &c->g->nodes[v.t];
        sema_err(c, e->loc, "to pick rows by a tensor of indices, use gather(x, ids): it takes rows of x's first axis",
                 "an index is a number or a size known when the model is built; this one is a tensor, %s",
                 sema_shape_text(c, t->dtype, t->rank, t->shape));
        return false;
    }
    if (v.kind == SV_FLOAT) {   /* C / 3 of a C that 3 does not divide */
        sema_err(c, e->loc, "a division that is not exact gives a fraction; '//' rounds down: C // 3",
                 "an index or slice bound is a whole number or a size, got %s", nc_number(v.f).s);
        return false;
    }
    if (v.kind != SV_INT && v.kind != SV_DIM) {
        sema_err(c, e->loc, NULL, "an index or slice bound is a whole number or a size, got %s", sv_kind_phrase(v.kind));
        return false;
    }
    dim_expr pos = v.kind == SV_DIM ? c->g->dims[v.dim] : dim_const(v.i);
    const char *text = v.kind == SV_DIM ? sema_dim_text(c, v.dim) : sema_textf(c, "%lld", (long long)v.i);
    if (v.kind == SV_INT && (v.i > DIM_LIMIT || v.i < -DIM_LIMIT)) {
        out_of_range(ic, e->loc, axis, bound, text);
        return false;
    }
    if (dim_always_negative(&pos)) {   /* -1, -T: from the end */
        dim_expr from_end;
        dim_status s = dim_add(&c->g->dims[size], &pos, &from_end);
        if (s != DIM_OK) { sema_err(c, e->loc, NULL, "this bound: %s", dim_status_message(s)); return false; }
        if (dim_always_negative(&from_end)) { out_of_range(ic, e->loc, axis, bound, text); return false; }
        pos = from_end;
    }
    *out = ir_dim_intern(c->g, &pos);
    dim_expr past;   /* an index at or past the size, a bound past it */
    if (!dim_minus(c, *out, size, e->loc, &past)) return false;
    if (bound ? dim_never_negative(&past) && past.nterms > 0 : dim_never_negative(&past)) {
        out_of_range(ic, e->loc, axis, bound, text);
        return false;
    }
    return true;
}

/* x[a:b] on one axis; a step (x[::2]) is refused. */
static bool slice_item(index_ctx *ic, const ast_node *it, int axis, index_axis *ax)
{
    sema_ctx *c = ic->c;
    if (it->c) {
        sema_err(c, it->c->loc, "to take every s-th element of an axis of size N, reshape it to [N / s, s] and index the new axis with 0",
                 "slices take no step");
        return false;
    }
    ax->loc = it->loc;
    ax->lo_loc = it->a ? it->a->loc : it->loc;
    ax->hi_loc = it->b ? it->b->loc : it->loc;
    ax->lo = ir_dim_const(c->g, 0);
    ax->hi = ic->shape[axis];
    if (it->a && !axis_position(ic, it->a, axis, true, &ax->lo)) return false;
    if (it->b && !axis_position(ic, it->b, axis, true, &ax->hi)) return false;
    dim_expr len;
    if (!dim_minus(c, ax->hi, ax->lo, it->loc, &len)) return false;
    if (len.nterms == 0 || dim_always_negative(&len)) {
        sema_err(c, it->loc, "a slice a:b takes the elements a to b - 1, and takes at least one",
                 "empty slice: [%s:%s] takes no element of axis %d of %s", sema_dim_text(c, ax->lo), sema_dim_text(c, ax->hi),
                 axis, index_type(ic));
        return false;
    }
    return true;
}

/* One item of x[...] against its axis. */
static bool index_item(index_ctx *ic, const ast_node *it, int axis, index_axis *ax)
{
    ax->given = true;
    if (it->kind == AST_SLICE) return slice_item(ic, it, axis, ax);
    if (it->kind == AST_WILDCARD) {
        sema_err(ic->c, it->loc, "write ':' for a whole axis, '...' for all the axes in between", "'_' is not an index");
        return false;
    }
    ax->drop = true;
    ax->loc = ax->lo_loc = ax->hi_loc = it->loc;
    if (!axis_position(ic, it, axis, false, &ax->lo)) return false;
    dim_expr next, one = dim_const(1);
    if (dim_add(&ic->c->g->dims[ax->lo], &one, &next) != DIM_OK) {
        sema_err(ic->c, it->loc, NULL, "this index does not fit a size");
        return false;
    }
    ax->hi = ir_dim_intern(ic->c->g, &next);
    return true;
}

/* Which axis each item stands for: in order, with '...' for as many axes
 * as the items after it leave. -1 for the '...' itself. */
static bool item_axes(index_ctx *ic, const ast_node *e, int *axis_of)
{
    int n = (int)e->list.n, ell = -1, rank = ic->rank;
    for (int i = 0; i < n; i++)
        if (e->list.items[i]->kind == AST_ELLIPSIS) {
            if (ell >= 0) { sema_err(ic->c, e->list.items[i]->loc, NULL, "an index has at most one '...'"); return false; }
            ell = i;
        }
    int written = n - (ell >= 0);
    if (written > rank) {
        int extra = 0;   /* the first item with no axis left */
        for (int i = 0, seen = 0; i < n; i++)
            if (i != ell && seen++ == rank) { extra = i; break; }
        const char *hint = sema_textf(ic->c, "%s has %d ax%s: one index or slice per axis, '...' for the axes in between",
                                      index_type(ic), rank, rank == 1 ? "is" : "es");
        sema_err(ic->c, e->list.items[extra]->loc, hint, "too many indices: %d for a tensor of rank %d", written, rank);
        return false;
    }
    for (int i = 0; i < n; i++)
        axis_of[i] = i == ell ? -1 : ell < 0 || i < ell ? i : rank - (n - i);
    return true;
}

static sv not_indexable(sema_ctx *c, const ast_node *e, sv v)
{
    if (v.kind == SV_ERROR) return v;
    sema_err(c, e->a->loc,
             v.kind == SV_LIST ? "a list is not a value to index; a function's several return values are taken apart by name: a, b = f(x)"
                               : NULL,
             "only a tensor can be indexed; this is %s", sv_kind_phrase(v.kind));
    return sv_error();
}

/* The slices, then the reshape that drops the indexed axes. */
static sv lower_index(sema_ctx *c, const ast_node *e, sv x, const index_axis *axes, int rank)
{
    uint32_t zero = ir_dim_const(c->g, 0);
    uint32_t kept[NC_MAX_RANK];
    int nkept = 0;
    bool drops = false;
    for (int a = 0; a < rank && x.kind == SV_TENSOR; a++) {
        const ir_node *n = &c->g->nodes[x.t];
        drops |= axes[a].drop;
        if (!axes[a].drop) kept[nkept++] = a;
        if (!axes[a].given || (axes[a].lo == zero && axes[a].hi == n->shape[a])) continue;
        ir_node p = sema_proto(c, OP_SLICE, axes[a].loc);
        p.attr.axis = a;
        p.attr.lo = axes[a].lo;
        p.attr.hi = axes[a].hi;
        sema_attr_locs where = {2, {"lo", "hi"}, {axes[a].lo_loc, axes[a].hi_loc}};
        x = sema_apply(c, &p, &x, 1, &axes[a].loc, &where);
    }
    if (x.kind != SV_TENSOR || !drops) return x;
    const ir_node *n = &c->g->nodes[x.t];
    ir_node p = sema_proto(c, OP_RESHAPE, e->loc);
    p.rank = (uint8_t)nkept;
    for (int k = 0; k < nkept; k++) p.shape[k] = n->shape[kept[k]];
    return sema_apply(c, &p, &x, 1, &e->loc, NULL);
}

sv sema_index(sema_ctx *c, const ast_node *e)
{
    sv x = sema_expr(c, e->a);
    if (x.kind != SV_TENSOR) return not_indexable(c, e, x);
    const ir_node *n = &c->g->nodes[x.t];
    index_ctx ic = {.c = c, .rank = n->rank, .x = x.t};
    memcpy(ic.shape, n->shape, sizeof ic.shape);
    int axis_of[NC_MAX_RANK + 1];
    if (e->list.n > NC_MAX_RANK + 1) {   /* more than any rank, and than axis_of holds */
        sema_err(c, e->list.items[NC_MAX_RANK + 1]->loc, NULL, "too many indices: a tensor has at most %d axes", NC_MAX_RANK);
        return sv_error();
    }
    if (!item_axes(&ic, e, axis_of)) return sv_error();
    index_axis axes[NC_MAX_RANK] = {0};
    bool ok = true;
    for (uint32_t i = 0; i < e->list.n; i++)
        if (axis_of[i] >= 0) ok &= index_item(&ic, e->list.items[i], axis_of[i], &axes[axis_of[i]]);
    if (!ok) return sv_error();
    return lower_index(c, e, x, axes, ic.rank);
}
