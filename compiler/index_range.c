/* index_range.c - interval arithmetic over i32 index expressions.
 *
 * Requires a typed graph (operands of an elementwise op have its shape, as
 * sema's explicit broadcasts make them); reads it, changes nothing. Each op
 * that can appear in index arithmetic has a rule giving its values from its
 * operands'. A where's condition comparing a value with a constant narrows
 * that value in each branch (nn.windows' ih >= H picks the padding, so the
 * other branch's ih * W + iw has ih < H): the values a where returns are then
 * what it picks, not everything both branches compute. */
#include "index_range.h"

#include <math.h>
#include <string.h>

enum { RANGE_MAX_FACTS = 8, RANGE_BUDGET = 4096 };

typedef struct span { int64_t lo, hi; } span;   /* lo > hi: no element takes this path */

/* What a where's condition says of a value where its branch is taken. Facts
 * hold element by element, so they are put aside below an op that moves
 * elements (a reshape, a broadcast...). */
typedef struct range_fact { ir_value v; span s; } range_fact;

typedef struct range_ctx {
    const ir_graph *g;
    const int64_t *syms;
    range_fact facts[RANGE_MAX_FACTS];
    int nfacts;
    int budget;          /* nodes left to visit: a large DAG gives up rather than take long */
    irange *out;
} range_ctx;

typedef bool range_rule(range_ctx *r, const ir_node *n, span *s);

static bool range_of(range_ctx *r, ir_value v, span *s);
static bool node_sound(const range_ctx *r, ir_value v);

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t s;
    return __builtin_add_overflow(a, b, &s) ? (b < 0 ? INT64_MIN : INT64_MAX) : s;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t p;
    return __builtin_mul_overflow(a, b, &p) ? ((a < 0) != (b < 0) ? INT64_MIN : INT64_MAX) : p;
}

static int64_t sat_neg(int64_t a) { return a == INT64_MIN ? INT64_MAX : -a; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static bool is_empty(span s) { return s.lo > s.hi; }

static bool dim_value(const range_ctx *r, uint32_t d, int64_t *v)
{
    return r->syms ? dim_eval(&r->g->dims[d], r->syms, v) : dim_is_const(&r->g->dims[d], v);
}

static const ir_value *args_of(const range_ctx *r, const ir_node *n) { return ir_args(r->g, n); }

/* operand i's values with the facts put aside (it is moved or reduced) */
static bool range_apart(range_ctx *r, ir_value v, span *s)
{
    int kept = r->nfacts;
    r->nfacts = 0;
    bool ok = range_of(r, v, s);
    r->nfacts = kept;
    return ok;
}

static bool range_iota(range_ctx *r, const ir_node *n, span *s)
{
    int64_t len;
    if (!dim_value(r, n->shape[n->attr.axis], &len)) return false;
    *s = (span){0, len > 0 ? len - 1 : 0};
    return true;
}

static bool range_fill(range_ctx *r, const ir_node *n, span *s)
{
    (void)r;
    double f = n->attr.f;
    if (f != floor(f) || fabs(f) > 4e18) return false;
    *s = (span){(int64_t)f, (int64_t)f};
    return true;
}

static bool range_dim_value(range_ctx *r, const ir_node *n, span *s)
{
    int64_t v;
    if (!dim_value(r, n->attr.lo, &v)) return false;
    *s = (span){v, v};
    return true;
}

/* reshape, broadcast, transpose, slice: the same values, elsewhere */
static bool range_move(range_ctx *r, const ir_node *n, span *s) { return range_apart(r, args_of(r, n)[0], s); }

/* a bool or u8 made i32 (i32(iota(...) < T)); an i32 cast is itself */
static bool range_cast(range_ctx *r, const ir_node *n, span *s)
{
    nc_dtype from = r->g->nodes[args_of(r, n)[0]].dtype;
    if (from == NC_BOOL) *s = (span){0, 1};
    else if (from == NC_U8) *s = (span){0, 255};
    else return from == NC_I32 && range_of(r, args_of(r, n)[0], s);
    return true;
}

static bool range_neg(range_ctx *r, const ir_node *n, span *s)
{
    span a;
    if (!range_of(r, args_of(r, n)[0], &a)) return false;
    *s = is_empty(a) ? a : (span){sat_neg(a.hi), sat_neg(a.lo)};
    return true;
}

/* the two operands of a binary op; false when either is unknown, *empty
 * when no element takes this path */
static bool range_pair(range_ctx *r, const ir_node *n, span *a, span *b, span *s, bool *empty)
{
    const ir_value *x = args_of(r, n);
    if (!range_of(r, x[0], a) || !range_of(r, x[1], b)) return false;
    *empty = is_empty(*a) || is_empty(*b);
    if (*empty) *s = is_empty(*a) ? *a : *b;
    return true;
}

static bool range_add(range_ctx *r, const ir_node *n, span *s)
{
    span a, b;
    bool empty;
    if (!range_pair(r, n, &a, &b, s, &empty)) return false;
    if (!empty) *s = (span){sat_add(a.lo, b.lo), sat_add(a.hi, b.hi)};
    return true;
}

static bool range_sub(range_ctx *r, const ir_node *n, span *s)
{
    span a, b;
    bool empty;
    if (!range_pair(r, n, &a, &b, s, &empty)) return false;
    if (!empty) *s = (span){sat_add(a.lo, sat_neg(b.hi)), sat_add(a.hi, sat_neg(b.lo))};
    return true;
}

static bool range_mul(range_ctx *r, const ir_node *n, span *s)
{
    span a, b;
    bool empty;
    if (!range_pair(r, n, &a, &b, s, &empty)) return false;
    if (empty) return true;
    int64_t p[4] = {sat_mul(a.lo, b.lo), sat_mul(a.lo, b.hi), sat_mul(a.hi, b.lo), sat_mul(a.hi, b.hi)};
    *s = (span){p[0], p[0]};
    for (int i = 1; i < 4; i++) s->lo = min64(s->lo, p[i]), s->hi = max64(s->hi, p[i]);
    return true;
}

static bool range_maximum(range_ctx *r, const ir_node *n, span *s)
{
    span a, b;
    bool empty;
    if (!range_pair(r, n, &a, &b, s, &empty)) return false;
    if (!empty) *s = n->op == OP_MAXIMUM ? (span){max64(a.lo, b.lo), max64(a.hi, b.hi)}
                                         : (span){min64(a.lo, b.lo), min64(a.hi, b.hi)};
    return true;
}

/* sum: as many values as the reduced axes hold; max: one of them */
static bool range_reduce(range_ctx *r, const ir_node *n, span *s)
{
    const ir_node *x = &r->g->nodes[args_of(r, n)[0]];
    if (!range_apart(r, args_of(r, n)[0], s)) return false;
    if (n->op == OP_MAX || is_empty(*s)) return true;
    int64_t count = 1, d;
    for (int i = 0; i < (n->attr.naxes ? n->attr.naxes : x->rank); i++) {   /* no axes: all of them */
        if (!dim_value(r, x->shape[n->attr.naxes ? n->attr.axes[i] : i], &d)) return false;
        count = sat_mul(count, d);
    }
    *s = count ? (span){sat_mul(count, s->lo), sat_mul(count, s->hi)} : (span){0, 0};
    return true;
}

/* What cond (w < k, w >= k, k > w ... with k a constant) says of w where it
 * holds (yes) and where it does not (no). False when it says nothing. */
static bool condition_facts(range_ctx *r, ir_value cond, range_fact *yes, range_fact *no)
{
    if (!node_sound(r, cond)) return false;
    const ir_node *c = &r->g->nodes[cond];
    if (c->op != OP_LT && c->op != OP_LE && c->op != OP_GT && c->op != OP_GE) return false;
    const ir_value *x = args_of(r, c);
    span a, b;
    bool a_known = range_apart(r, x[0], &a) && a.lo == a.hi, b_known = range_apart(r, x[1], &b) && b.lo == b.hi;
    if (a_known == b_known) return false;
    nc_op op = c->op;
    int64_t k = a_known ? a.lo : b.lo;
    if (a_known) op = op == OP_LT ? OP_GT : op == OP_LE ? OP_GE : op == OP_GT ? OP_LT : OP_LE;   /* k < w: w > k */
    yes->v = no->v = a_known ? x[1] : x[0];
    switch (op) {   /* w OP k */
    case OP_LT: yes->s = (span){INT64_MIN, sat_add(k, -1)}, no->s = (span){k, INT64_MAX}; break;
    case OP_LE: yes->s = (span){INT64_MIN, k}, no->s = (span){sat_add(k, 1), INT64_MAX}; break;
    case OP_GT: yes->s = (span){sat_add(k, 1), INT64_MAX}, no->s = (span){INT64_MIN, k}; break;
    default: yes->s = (span){k, INT64_MAX}, no->s = (span){INT64_MIN, sat_add(k, -1)}; break;
    }
    return true;
}

static bool range_branch(range_ctx *r, ir_value v, const range_fact *f, span *s)
{
    bool pushed = f && r->nfacts < RANGE_MAX_FACTS;
    if (pushed) r->facts[r->nfacts++] = *f;
    bool ok = range_of(r, v, s);
    if (pushed) r->nfacts--;
    return ok;
}

static bool range_where(range_ctx *r, const ir_node *n, span *s)
{
    const ir_value *x = args_of(r, n);
    const ir_node *c = &r->g->nodes[x[0]];
    range_fact yes, no;
    bool facts = c->rank == n->rank && memcmp(c->shape, n->shape, n->rank * sizeof(uint32_t)) == 0 &&
                 condition_facts(r, x[0], &yes, &no);
    span a, b;
    if (!range_branch(r, x[1], facts ? &yes : NULL, &a) || !range_branch(r, x[2], facts ? &no : NULL, &b)) return false;
    if (is_empty(a) || is_empty(b)) *s = is_empty(a) ? b : a;
    else *s = (span){min64(a.lo, b.lo), max64(a.hi, b.hi)};
    return true;
}

static range_rule *const range_rules[OP_COUNT] = {
    [OP_IOTA] = range_iota,       [OP_FILL] = range_fill,         [OP_CAST] = range_cast,
    [OP_NEG] = range_neg,         [OP_ADD] = range_add,           [OP_SUB] = range_sub,
    [OP_MUL] = range_mul,         [OP_MAXIMUM] = range_maximum,   [OP_MINIMUM] = range_maximum,
    [OP_WHERE] = range_where,     [OP_SUM] = range_reduce,        [OP_MAX] = range_reduce,
    [OP_RESHAPE] = range_move,    [OP_BROADCAST] = range_move,    [OP_TRANSPOSE] = range_move,
    [OP_SLICE] = range_move,      [OP_DIM_VALUE] = range_dim_value,
};

/* A graph read from a module file is checked by ir_verify, which reports a
 * malformed node and goes on to the next: one whose indices reach back to
 * it must not follow its operands, axes or dims. Only a node whose own
 * fields are in range is read (its operands are checked as the walk reaches
 * them). */
static bool node_sound(const range_ctx *r, ir_value v)
{
    const ir_graph *g = r->g;
    if (v >= g->nnodes) return false;
    const ir_node *n = &g->nodes[v];
    if (n->op >= OP_COUNT || n->rank > NC_MAX_RANK) return false;
    int want = nc_ops[n->op].nargs;
    int most = want + op_optional_operands(n->op);
    if ((want >= 0 ? n->nargs < want || n->nargs > most : n->nargs < 1) || (uint64_t)n->args_at + n->nargs > g->nargs) return false;
    for (int i = 0; i < n->rank; i++)
        if (n->shape[i] >= g->ndims) return false;
    for (int i = 0; i < n->nargs; i++)
        if (ir_args(g, n)[i] >= v) return false;
    if (n->op == OP_IOTA && (n->attr.axis < 0 || n->attr.axis >= n->rank)) return false;
    if (n->op == OP_DIM_VALUE && n->attr.lo >= g->ndims) return false;
    if (n->op == OP_SUM || n->op == OP_MAX) {
        const ir_node *x = &g->nodes[ir_args(g, n)[0]];
        if (n->attr.naxes > NC_MAX_RANK) return false;
        for (int i = 0; i < n->attr.naxes; i++)
            if (n->attr.axes[i] < 0 || n->attr.axes[i] >= x->rank || x->shape[n->attr.axes[i]] >= g->ndims) return false;
    }
    return true;
}

static bool range_of(range_ctx *r, ir_value v, span *s)
{
    if (!node_sound(r, v)) return false;
    const ir_node *n = &r->g->nodes[v];
    if (--r->budget < 0 || n->dtype != NC_I32 || !range_rules[n->op] || !range_rules[n->op](r, n, s)) return false;
    for (int i = 0; i < r->nfacts; i++)
        if (r->facts[i].v == v) s->lo = max64(s->lo, r->facts[i].s.lo), s->hi = min64(s->hi, r->facts[i].s.hi);
    if (!is_empty(*s) && (s->lo < INT32_MIN || s->hi > INT32_MAX) && r->out->wraps == IR_NONE)
        r->out->wraps = v, r->out->wrap_lo = s->lo, r->out->wrap_hi = s->hi;
    return true;
}

bool irange_find(const ir_graph *g, ir_value v, const int64_t *syms, irange *out)
{
    *out = (irange){.wraps = IR_NONE};
    range_ctx r = {.g = g, .syms = syms, .budget = RANGE_BUDGET, .out = out};
    span s;
    if (!range_of(&r, v, &s) || is_empty(s)) return false;
    out->lo = s.lo, out->hi = s.hi;
    return true;
}
