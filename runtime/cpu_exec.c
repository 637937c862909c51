/* cpu_exec.c - runs an IR graph node by node on the CPU.
 *
 * The executor owns shapes and memory: it evaluates each node's symbolic shape
 * at the session's binding, refuses sizes it cannot hold, and frees a value
 * after its last use. Kernels (cpu_kernels.c) only compute. Inputs and params
 * are not copied: their values alias the caller's tensors (res->borrowed). */
#include "cpu_exec.h"
#include "cpu_crew.h"
#include "cpu_kernels.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CPU_DEFAULT_MAX_BYTES ((int64_t)16 << 30)

/* ------------------------------------------------------------------ */
/* tensors                                                              */

static bool shape_numel(uint8_t rank, const int64_t *shape, int64_t *out)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n)) return false;
    *out = n;
    return true;
}

/* t describes data: numel n of the given shape (checked by the caller). */
static void tensor_wrap(cpu_tensor *t, nc_dtype dtype, uint8_t rank, const int64_t *shape, int64_t n, void *data)
{
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->rank = rank;
    if (rank) memcpy(t->shape, shape, rank * sizeof *shape);
    t->numel = n;
    if (dtype_is_float(dtype)) t->f = data;
    else t->i = data;
}

bool cpu_tensor_alloc(cpu_tensor *t, nc_dtype dtype, uint8_t rank, const int64_t *shape, int64_t limit_bytes)
{
    memset(t, 0, sizeof *t);
    int64_t n;
    if (limit_bytes <= 0) limit_bytes = CPU_DEFAULT_MAX_BYTES;
    if (rank > NC_MAX_RANK || dtype >= NC_DTYPE_COUNT || !shape_numel(rank, shape, &n)) return false;
    if (n > limit_bytes / CPU_ELEM_BYTES) return false;
    /* calloc, not nc_xcalloc: a size the machine cannot give is an error to report, not an abort. */
    void *p = calloc((size_t)(n ? n : 1), CPU_ELEM_BYTES);
    if (!p) return false;
    tensor_wrap(t, dtype, rank, shape, n, p);
    return true;
}

void cpu_tensor_free(cpu_tensor *t)
{
    if (!t) return;
    free(t->f);
    free(t->i);
    t->f = NULL;
    t->i = NULL;
}

static void *data_of(const cpu_tensor *t) { return t->f ? (void *)t->f : (void *)t->i; }

double cpu_get(const cpu_tensor *t, int64_t i) { return t->f ? (double)t->f[i] : (double)t->i[i]; }

/* float -> int: truncate toward zero, clamp to the dtype's range, NaN -> 0. */
static int32_t saturate_int(nc_dtype t, double v)
{
    if (t == NC_BOOL) return v != 0;
    if (isnan(v)) return 0;
    double lo = t == NC_U8 ? 0.0 : (double)INT32_MIN, hi = t == NC_U8 ? 255.0 : (double)INT32_MAX;
    v = trunc(v);
    return v <= lo ? (int32_t)lo : v >= hi ? (int32_t)hi : (int32_t)v;
}

void cpu_set(cpu_tensor *t, int64_t i, double v)
{
    if (t->f) t->f[i] = nc_round_to(t->dtype, (float)v);
    else t->i[i] = saturate_int(t->dtype, v);
}

double cpu_native_get(nc_dtype t, const void *data, int64_t i)
{
    const unsigned char *p = data;
    switch (t) {
    case NC_F32: { float f; memcpy(&f, p + 4 * i, 4); return f; }
    case NC_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return nc_f16_bits_to_f32(h); }
    case NC_BF16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return nc_bf16_bits_to_f32(h); }
    case NC_I32: { int32_t x; memcpy(&x, p + 4 * i, 4); return x; }
    case NC_BOOL: return p[i] != 0;
    default: return p[i];
    }
}

void cpu_tensor_from_native(const void *data, cpu_tensor *t)
{
    for (int64_t i = 0; i < t->numel; i++) {
        double v = cpu_native_get(t->dtype, data, i);
        if (t->f) t->f[i] = (float)v;
        else t->i[i] = (int32_t)v;
    }
}

void cpu_tensor_to_native(const cpu_tensor *t, void *data)
{
    unsigned char *p = data;
    for (int64_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case NC_F32: memcpy(p + 4 * i, &t->f[i], 4); break;
        case NC_F16: { uint16_t h = nc_f32_to_f16_bits(t->f[i]); memcpy(p + 2 * i, &h, 2); break; }
        case NC_BF16: { uint16_t h = nc_f32_to_bf16_bits(t->f[i]); memcpy(p + 2 * i, &h, 2); break; }
        case NC_I32: memcpy(p + 4 * i, &t->i[i], 4); break;
        case NC_BOOL: p[i] = t->i[i] != 0; break;
        default: p[i] = (unsigned char)t->i[i]; break;
        }
    }
}

/* ------------------------------------------------------------------ */
/* the pool                                                             */

static size_t storage_bytes(int64_t numel) { return (size_t)(numel ? numel : 1) * CPU_ELEM_BYTES; }

/* A free buffer of exactly `bytes`: the one given back last, likely still in cache. */
static void *pool_take(cpu_pool *p, size_t bytes)
{
    for (uint32_t k = p->n; k-- > 0;)
        if (p->bufs[k].bytes == bytes) {
            void *data = p->bufs[k].data;
            memmove(&p->bufs[k], &p->bufs[k + 1], (p->n - k - 1) * sizeof *p->bufs);
            p->n--;
            return data;
        }
    return NULL;
}

static void pool_give(cpu_pool *p, void *data, size_t bytes)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 32;
        p->bufs = nc_xrealloc(p->bufs, p->cap * sizeof *p->bufs);
    }
    p->bufs[p->n++] = (cpu_pool_buf){.data = data, .bytes = bytes, .run = p->run};
}

/* Storage of `bytes` comes into the pool's keeping (bytes > 0) or leaves it. */
static void pool_count(cpu_pool *p, int64_t bytes)
{
    p->held_bytes += bytes;
    if (p->held_bytes > p->peak_bytes) p->peak_bytes = p->held_bytes;
}

/* At a run's end: what the run did not use (another binding's sizes) goes. */
static void pool_trim(cpu_pool *p)
{
    uint32_t kept = 0;
    for (uint32_t k = 0; k < p->n; k++) {
        if (p->bufs[k].run == p->run) {
            p->bufs[kept++] = p->bufs[k];
            continue;
        }
        free(p->bufs[k].data);
        pool_count(p, -(int64_t)p->bufs[k].bytes);
    }
    p->n = kept;
}

/* ------------------------------------------------------------------ */
/* constants kept from run to run (cpu_const_cache in cpu_exec.h)       */

#define CPU_CONST_CACHE_BYTES ((size_t)64 << 20)

struct cpu_const_cache {
    const ir_graph *g;         /* the graph, binding and size limit the kept values belong to */
    uint32_t nnodes, nsyms;
    int64_t *syms;
    int64_t max_bytes;
    cpu_tensor *kept;          /* per node: its kept value (NULL data: none) */
    size_t bytes;              /* their storage */
    bool complete;             /* a whole run built it: later runs may read it */
};

static void const_cache_clear(cpu_const_cache *cc)
{
    for (uint32_t v = 0; v < cc->nnodes; v++) cpu_tensor_free(&cc->kept[v]);
    free(cc->kept);
    free(cc->syms);
    memset(cc, 0, sizeof *cc);
}

static bool const_kept(const cpu_const_cache *cc, ir_value v) { return cc->kept[v].f || cc->kept[v].i; }

/* The pool's cache, usable as it is (complete) when it was built for this
 * graph at this binding and limit (a lower one must refuse what it would
 * have); otherwise emptied and keyed to them, to be built. */
static cpu_const_cache *const_cache_for(cpu_pool *p, const ir_graph *g, const int64_t *syms, int64_t max_bytes)
{
    if (!p->consts) p->consts = nc_xcalloc(1, sizeof *p->consts);
    cpu_const_cache *cc = p->consts;
    if (cc->complete && cc->g == g && cc->nnodes == g->nnodes && cc->nsyms == g->nsyms && cc->max_bytes == max_bytes &&
        (g->nsyms == 0 || memcmp(cc->syms, syms, g->nsyms * sizeof *syms) == 0))
        return cc;
    pool_count(p, -(int64_t)cc->bytes);
    const_cache_clear(cc);
    cc->g = g;
    cc->max_bytes = max_bytes;
    cc->nnodes = g->nnodes;
    cc->nsyms = g->nsyms;
    cc->kept = nc_xcalloc(g->nnodes ? g->nnodes : 1, sizeof *cc->kept);
    cc->syms = nc_xmalloc((g->nsyms ? g->nsyms : 1) * sizeof *cc->syms);
    if (g->nsyms) memcpy(cc->syms, syms, g->nsyms * sizeof *syms);
    p->const_builds++;
    return cc;
}

void cpu_pool_free(cpu_pool *p)
{
    if (!p) return;
    for (uint32_t k = 0; k < p->n; k++) free(p->bufs[k].data);
    free(p->bufs);
    if (p->consts) const_cache_clear(p->consts);
    free(p->consts);
    memset(p, 0, sizeof *p);
}

void cpu_pool_release(cpu_pool *p)
{
    for (uint32_t k = 0; k < p->n; k++) {
        free(p->bufs[k].data);
        pool_count(p, -(int64_t)p->bufs[k].bytes);
    }
    p->n = 0;
    if (p->consts) {
        pool_count(p, -(int64_t)p->consts->bytes);
        const_cache_clear(p->consts);
    }
}

/* A value's storage: from the pool when there is one (not zeroed), else fresh. */
static bool value_alloc(cpu_pool *p, cpu_tensor *t, nc_dtype dtype, uint8_t rank, const int64_t *shape,
                        int64_t limit_bytes)
{
    int64_t n;
    void *data;
    if (p && shape_numel(rank, shape, &n) && (data = pool_take(p, storage_bytes(n)))) {
        tensor_wrap(t, dtype, rank, shape, n, data);
        return true;
    }
    if (!cpu_tensor_alloc(t, dtype, rank, shape, limit_bytes)) return false;
    if (p) p->fresh++, pool_count(p, (int64_t)storage_bytes(t->numel));
    return true;
}

static void value_free(cpu_pool *p, cpu_tensor *t)
{
    if (p && data_of(t)) pool_give(p, data_of(t), storage_bytes(t->numel));
    else cpu_tensor_free(t);
    t->f = NULL;
    t->i = NULL;
}

/* ------------------------------------------------------------------ */
/* one run                                                              */

/* ir_args would form NULL + 0 for a graph without any operands (UB). */
static const ir_value *node_args(const ir_graph *g, const ir_node *n)
{
    static const ir_value none[1];
    return n->nargs ? ir_args(g, n) : none;
}

/* A chain of elementwise nodes whose kernels run tile by tile (chain_run):
 * each tile of every operand and result stays in cache from one node to the
 * next, instead of each node streaming whole tensors through memory (an
 * optimizer's dozen ops on each weight). Every element gets the same
 * operations as a whole-tensor run (the kernels are position independent),
 * so the bits are the same. */
#define CPU_CHAIN_MAX 32
#define CPU_CHAIN_TILE 4096        /* elements: a tile of a dozen values fits in L2 */
#define CPU_CHAIN_SCRATCH ((size_t)CPU_CHAIN_MAX * CPU_CHAIN_TILE * CPU_ELEM_BYTES)

enum chain_state {
    CHAIN_NONE,
    CHAIN_PENDING,                 /* in the chain, its tiles go to its buffer */
    CHAIN_LOCAL,                   /* in the chain, its tiles go to one tile of scratch */
};

typedef struct cpu_chain {
    ir_value first;                /* the node the chain began at: later nodes' releases wait */
    uint32_t n;                    /* nodes whose kernel waits (0: no chain) */
    ir_value nodes[CPU_CHAIN_MAX];
    int64_t numel;                 /* every chained result's element count */
} cpu_chain;

typedef struct cpu_run {
    const ir_graph *g;
    const cpu_exec_opts *o;
    const int64_t *syms;
    int64_t max_bytes;
    cpu_exec_result *res;
    uint32_t *last_use;            /* node that reads the value last; UINT32_MAX = keep */
    uint32_t *base;                /* the operand whose buffer v may view (v itself: none) */
    uint8_t *mode;                 /* how v gets its value (run_mode) */
    bool *frontier;                /* a constant value that a non-constant node reads */
    cpu_const_cache *consts;       /* the pool's constants (NULL: none kept) */
    const cpu_tensor **argv;       /* scratch for a node's operands */
    cpu_chain chain;
    uint8_t *pending;              /* v's kernel waits in the chain (chain_state) */
    bool *cond_only;               /* only where's condition reads v (plan_views) */
    void *scratch;                 /* the chain's local tiles, a CPU_CHAIN_SCRATCH for each
                                      thread (NULL: none yet) */
    int threads;                   /* what a chain's tiles may be spread over (cpu_crew_threads) */
    cpu_crew *crew;                /* the workers, once a chain is long enough (NULL: none yet) */
    ir_value *in_place;            /* update_in_place: the param node an update value may be
                                      written over (in_place_plan; IR_NONE: none), else NULL */
    bool building;                 /* the constant cache is being built this run */
    char *err;
    size_t errcap;
} cpu_run;

static int run_fail(cpu_run *r, const ir_node *n, const char *fmt, ...)
{
    if (!r->err || r->errcap == 0) return -1;
    va_list ap;
    va_start(ap, fmt);
    char *msg = nc_xvasprintf(fmt, ap);
    va_end(ap);
    const ir_graph *g = r->g;
    const bool located = n && n->loc.file && n->loc.file <= g->nfiles;
    /* a long source path or tensor name ends the text in "...", not mid-word */
    if (!n) nc_errf(r->err, r->errcap, "%s", msg);
    else if (!located) nc_errf(r->err, r->errcap, "%%%u: %s", (unsigned)(n - g->nodes), msg);
    else nc_errf(r->err, r->errcap, "%s:%u:%u: %%%u: %s", g->files[n->loc.file - 1], n->loc.line, n->loc.col,
                 (unsigned)(n - g->nodes), msg);
    free(msg);
    return -1;
}

static void format_shape(nc_dtype t, uint8_t rank, const int64_t *shape, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "%s[", dtype_name(t));
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static bool eval_shape(const cpu_run *r, uint8_t rank, const uint32_t *dims, int64_t *out)
{
    for (int i = 0; i < rank; i++)
        if (dims[i] >= r->g->ndims || !dim_eval(&r->g->dims[dims[i]], r->syms, &out[i])) return false;
    return true;
}

static bool shapes_equal(uint8_t ra, const int64_t *a, uint8_t rb, const int64_t *b)
{
    return ra == rb && (ra == 0 || memcmp(a, b, ra * sizeof *a) == 0);
}

/* A caller's tensor must be what the graph declares, evaluated at the binding. */
static int check_bound(cpu_run *r, const char *kind, const ir_tensor_decl *d, const cpu_tensor *t)
{
    int64_t want[NC_MAX_RANK];
    char ws[256], gs[256];
    if (d->rank > NC_MAX_RANK) return run_fail(r, NULL, "%s %s: malformed declaration (rank %d)", kind, d->name, d->rank);
    if (!eval_shape(r, d->rank, d->shape, want)) {
        char *declared = ir_shape_str(r->g, d->dtype, d->rank, d->shape);
        int rc = run_fail(r, NULL, "%s %s: declared shape %s does not evaluate at this binding (overflow or negative)", kind,
                          d->name, declared);
        free(declared);
        return rc;
    }
    format_shape(d->dtype, d->rank, want, ws, sizeof ws);
    if (t->rank > NC_MAX_RANK) return run_fail(r, NULL, "%s %s: expected %s, got rank %d", kind, d->name, ws, t->rank);
    format_shape(t->dtype, t->rank, t->shape, gs, sizeof gs);
    if (t->dtype != d->dtype || !shapes_equal(d->rank, want, t->rank, t->shape))
        return run_fail(r, NULL, "%s %s: expected %s, got %s", kind, d->name, ws, gs);
    int64_t n;
    if (!shape_numel(t->rank, t->shape, &n) || n != t->numel)
        return run_fail(r, NULL, "%s %s: numel %" PRId64 " does not match its shape %s", kind, d->name, t->numel, gs);
    if ((dtype_is_float(t->dtype) ? (void *)t->f : (void *)t->i) == NULL || (t->f && t->i))
        return run_fail(r, NULL, "%s %s: no data", kind, d->name);
    return 0;
}

static int check_binding(cpu_run *r)
{
    const ir_graph *g = r->g;
    if (g->nsyms && !r->syms)
        return run_fail(r, NULL, "the graph has %u symbolic dims (%s, ...) but no values were given", g->nsyms,
                        g->sym_names[0]);
    for (uint32_t s = 0; s < g->nsyms; s++)
        if (r->syms[s] < 0)
            return run_fail(r, NULL, "%s = %" PRId64 ": a dimension cannot be negative", g->sym_names[s], r->syms[s]);
    if (g->ninputs && !r->o->inputs) return run_fail(r, NULL, "the graph has %u inputs but none were given", g->ninputs);
    if (g->nparams && !r->o->params) return run_fail(r, NULL, "the graph has %u params but none were given", g->nparams);
    /* Only what the graph reads must be given: an inference build keeps the
     * training inputs declared but reads none of them. */
    for (uint32_t v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        if (n->op == OP_INPUT && check_bound(r, "input", &g->inputs[n->attr.index], &r->o->inputs[n->attr.index])) return -1;
        if (n->op == OP_PARAM && check_bound(r, "param", &g->params[n->attr.index].decl, &r->o->params[n->attr.index]))
            return -1;
    }
    return 0;
}

/* Elementwise kernels of two or three operands read a one-element operand
 * in place (cpu_tensor.splat). */
static bool reads_splat(const ir_node *n)
{
    return nc_ops[n->op].category == CAT_ELEMENTWISE && nc_ops[n->op].nargs >= 2;
}

/* Values that may be views of their operand's buffer instead of a copy: a
 * reshape, and a broadcast only such kernels read (one of one element
 * becomes a splat; one over the last axis that only where's condition
 * reads, a repeat: a padded window's mask, a constant the cache keeps, is
 * then kept a C-th of the windows' size, and its where reads that much).
 * Values are never written after their node, so a view sees its base's
 * bytes as long as the base lives; kept values (outputs, updates, the loss)
 * are never views, so nothing outlives the run. */
static void plan_views(cpu_run *r)
{
    const ir_graph *g = r->g;
    bool *splat_only = nc_xmalloc((g->nnodes ? g->nnodes : 1) * sizeof *splat_only);
    for (uint32_t v = 0; v < g->nnodes; v++) splat_only[v] = r->cond_only[v] = true;
    for (uint32_t v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        const ir_value *a = node_args(g, n);
        for (int k = 0; k < n->nargs; k++) {
            if (!reads_splat(n)) splat_only[a[k]] = false;
            if (n->op != OP_WHERE || k != 0) r->cond_only[a[k]] = false;
        }
    }
    for (uint32_t v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        r->base[v] = v;
        if (r->last_use[v] == UINT32_MAX || n->nargs != 1) continue;
        if (n->op == OP_RESHAPE || (n->op == OP_BROADCAST && splat_only[v])) r->base[v] = ir_args(g, n)[0];
    }
    free(splat_only);
}

/* Graph outputs, the values a training step assigns to parameters, and the
 * loss are never freed (last_use UINT32_MAX); every value with keep_all. */
static void mark_kept(cpu_run *r)
{
    const ir_graph *g = r->g;
    for (uint32_t v = 0; v < g->nnodes; v++) r->last_use[v] = r->o->keep_all ? UINT32_MAX : v;
    for (uint32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value < g->nnodes) r->last_use[g->outputs[i].value] = UINT32_MAX;
    for (uint32_t i = 0; i < g->nupdates; i++)
        if (g->updates[i].value < g->nnodes) r->last_use[g->updates[i].value] = UINT32_MAX;
    if (g->train.present && g->train.loss < g->nnodes) r->last_use[g->train.loss] = UINT32_MAX;
}

enum run_mode {
    MODE_RUN,                      /* computed (or bound) by its node */
    MODE_KEPT,                     /* read from the pool's constants */
    MODE_SKIP,                     /* not needed: only kept constants depended on it */
};

/* Constant values: the compiler's (computed from fills and iotas alone,
 * nothing random), less those handed to the caller (kept values are never
 * borrowed). A value read after such a one stays constant: that one is
 * computed every run from its own kept operands. */
static void mark_constants(cpu_run *r, bool *is_const)
{
    const ir_graph *g = r->g;
    bool *from_constants = ir_constant_values(g);
    for (uint32_t v = 0; v < g->nnodes; v++) is_const[v] = from_constants[v] && r->last_use[v] != UINT32_MAX;
    for (uint32_t v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        for (int k = 0; k < n->nargs; k++) r->frontier[node_args(g, n)[k]] |= is_const[node_args(g, n)[k]] && !is_const[v];
    }
    free(from_constants);
}

/* With a complete cache, a kept value is read from it, and a constant that
 * nothing computed this run reads is skipped. While the cache is being built,
 * every node runs (keep_const keeps the frontier's values as they come). */
static void plan_consts(cpu_run *r)
{
    const ir_graph *g = r->g;
    cpu_pool *p = r->o->pool;
    if (!p || r->o->keep_all) return;
    bool *is_const = nc_xcalloc(g->nnodes ? g->nnodes : 1, sizeof *is_const);
    bool *need = nc_xcalloc(g->nnodes ? g->nnodes : 1, sizeof *need);
    mark_constants(r, is_const);
    r->consts = const_cache_for(p, g, r->syms, r->max_bytes);
    for (uint32_t v = g->nnodes; r->consts->complete && v-- > 0;) {
        const ir_node *n = &g->nodes[v];
        need[v] |= !is_const[v];
        if (!need[v]) r->mode[v] = MODE_SKIP;
        else if (const_kept(r->consts, v)) r->mode[v] = MODE_KEPT;
        else
            for (int k = 0; k < n->nargs; k++) need[node_args(g, n)[k]] = true;
    }
    free(need);
    free(is_const);
}

/* last_use[v] = the last node reading v (only nodes that run read). A
 * view's base lives until the view's last reader (and so on down a chain of
 * views: backwards, a view's own end is final before it reaches its base). */
static void compute_last_uses(cpu_run *r)
{
    const ir_graph *g = r->g;
    mark_kept(r);
    plan_consts(r);
    for (uint32_t v = 0; v < g->nnodes; v++) {
        if (r->mode[v] != MODE_RUN) continue;
        const ir_value *a = node_args(g, &g->nodes[v]);
        for (int k = 0; k < g->nodes[v].nargs; k++)
            if (r->last_use[a[k]] != UINT32_MAX) r->last_use[a[k]] = v;
    }
    plan_views(r);
    for (uint32_t v = g->nnodes; v-- > 0;) {
        if (r->mode[v] != MODE_RUN) continue;   /* reads nothing this run */
        uint32_t *end = &r->last_use[r->base[v]];
        if (*end != UINT32_MAX && r->last_use[v] > *end) *end = r->last_use[v];
    }
}

/* Elementwise kernels index every operand by the result's index (but a
 * random op's step, a scalar). */
static int check_operands(cpu_run *r, const ir_node *n)
{
    if (nc_ops[n->op].category != CAT_ELEMENTWISE) return 0;
    for (int k = 0; k < n->nargs; k++)
        if (k != ir_step_slot(n) && r->argv[k]->numel != r->res->values[n - r->g->nodes].numel)
            return run_fail(r, n, "%s: operand %d has %" PRId64 " elements, the result %" PRId64, op_name(n->op),
                            k, r->argv[k]->numel, r->res->values[n - r->g->nodes].numel);
    return 0;
}

/* out describes n's result at shape, without storage yet (store_result):
 * a chained value may never need any. Refuses a size over the limit. */
static int size_result(cpu_run *r, const ir_node *n, const int64_t *shape, cpu_tensor *out)
{
    char s[256];
    int64_t numel;
    format_shape(n->dtype, n->rank, shape, s, sizeof s);
    if (!shape_numel(n->rank, shape, &numel))
        return run_fail(r, n, "%s: result %s has more elements than fit in 64 bits", op_name(n->op), s);
    if (numel > r->max_bytes / CPU_ELEM_BYTES) {
        run_fail(r, n, "%s: result %s needs %" PRId64 "%s bytes, over the limit of %" PRId64 " bytes",
                 op_name(n->op), s, numel > INT64_MAX / CPU_ELEM_BYTES ? INT64_MAX : numel * CPU_ELEM_BYTES,
                 numel > INT64_MAX / CPU_ELEM_BYTES ? "+" : "", r->max_bytes);
        return CPU_EXEC_NO_MEMORY;
    }
    tensor_wrap(out, n->dtype, n->rank, shape, numel, NULL);
    return 0;
}

/* Storage for v's result, as size_result described it. */
static int store_result(cpu_run *r, ir_value v)
{
    const ir_node *n = &r->g->nodes[v];
    cpu_tensor *out = &r->res->values[v];
    int64_t shape[NC_MAX_RANK], numel = out->numel;
    char s[256];
    if (out->rank) memcpy(shape, out->shape, out->rank * sizeof *shape);   /* value_alloc rewrites out */
    if (value_alloc(r->o->pool, out, n->dtype, n->rank, shape, r->max_bytes)) return 0;
    format_shape(n->dtype, n->rank, shape, s, sizeof s);
    run_fail(r, n, "%s: out of memory allocating %s (%" PRId64 " bytes)", op_name(n->op), s, numel * CPU_ELEM_BYTES);
    return CPU_EXEC_NO_MEMORY;
}

static int alloc_result(cpu_run *r, const ir_node *n, const int64_t *shape, cpu_tensor *out)
{
    int rc = size_result(r, n, shape, out);
    return rc ? rc : store_result(r, (ir_value)(n - r->g->nodes));
}

static bool is_output(const ir_graph *g, ir_value v)
{
    for (uint32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value == v) return true;
    return false;
}

/* Sources alias the caller's tensor, except graph outputs: those are copied so
 * a result never dangles when the caller replaces its inputs or params. */
static int bind_source(cpu_run *r, ir_value v, const int64_t *shape)
{
    const ir_node *n = &r->g->nodes[v];
    bool input = n->op == OP_INPUT;
    uint32_t count = input ? r->g->ninputs : r->g->nparams;
    if (n->attr.index >= count) return run_fail(r, n, "%s index %u out of range", op_name(n->op), n->attr.index);
    const cpu_tensor *t = input ? &r->o->inputs[n->attr.index] : &r->o->params[n->attr.index];
    if (t->dtype != n->dtype || !shapes_equal(n->rank, shape, t->rank, t->shape))
        return run_fail(r, n, "%s: the node's type differs from its declaration", op_name(n->op));
    if (!is_output(r->g, v)) {
        r->res->values[v] = *t;
        r->res->borrowed[v] = true;
        return 0;
    }
    cpu_tensor *out = &r->res->values[v];
    int rc = alloc_result(r, n, shape, out);
    if (rc) return rc;
    memcpy(data_of(out), data_of(t), (size_t)t->numel * CPU_ELEM_BYTES);
    return 0;
}

/* How many times broadcast v at shape repeats each element of x, a repeat
 * view (plan_views): x of v's shape but a last axis of 1, read only by
 * where's condition; 1: none. A chain's tile must not cut one element's
 * run, so the count divides the tile. */
static int64_t repeat_of(const cpu_run *r, ir_value v, const cpu_tensor *x, const int64_t *shape)
{
    const ir_node *n = &r->g->nodes[v];
    if (!r->cond_only[v] || n->rank == 0 || x->rank != n->rank || x->shape[n->rank - 1] != 1) return 1;
    if (n->rank > 1 && memcmp(x->shape, shape, (n->rank - 1) * sizeof *shape) != 0) return 1;
    int64_t c = shape[n->rank - 1];
    return c > 1 && CPU_CHAIN_TILE % c == 0 ? c : 1;
}

/* v as a view of its operand's buffer (plan_views); false where it must be
 * computed instead: a broadcast of more than one element but a repeat, or
 * anything the kernel would refuse (it then says why). */
static bool bind_view(cpu_run *r, ir_value v, const int64_t *shape)
{
    const ir_node *n = &r->g->nodes[v];
    const cpu_tensor *x = &r->res->values[ir_args(r->g, n)[0]];
    bool widen = n->op == OP_BROADCAST;
    int64_t numel, repeat = widen && x->numel != 1 ? repeat_of(r, v, x, shape) : 1;
    if (!shape_numel(n->rank, shape, &numel) || x->dtype != n->dtype || x->splat || x->repeat > 1) return false;
    if (widen ? (x->numel != 1 && repeat == 1) || x->rank > n->rank : x->numel != numel) return false;
    cpu_tensor *t = &r->res->values[v];
    *t = *x;
    t->rank = n->rank;
    if (n->rank) memcpy(t->shape, shape, n->rank * sizeof *shape);
    t->numel = numel;
    t->splat = widen && x->numel == 1;
    t->repeat = repeat;
    r->res->borrowed[v] = true;
    return true;
}

static void release(cpu_run *r, ir_value v)
{
    if (!r->res->borrowed[v]) value_free(r->o->pool, &r->res->values[v]);
    r->res->values[v].f = NULL;
    r->res->values[v].i = NULL;
}

/* Kernels that make a tile of their result from operands read whole. A
 * broadcast that is not a view (bind_view) joins the chain of its readers:
 * max's gradient compares x with the max widened to x's windows and picks
 * the share widened again, and each widened copy of a fashion_cnn pool's
 * windows was a 12.8 MB buffer written and read once. A constant one the
 * cache keeps is stored whole all the same (chain_local), so a padded
 * window's mask is not widened again every run (that was slower). */
static bool makes_tiles(nc_op op) { return op == OP_GATHER || op == OP_BROADCAST; }

/* Dropout draws by element index, so it alone is not position independent. */
static bool chainable_op(nc_op op)
{
    return (nc_ops[op].category == CAT_ELEMENTWISE && op != OP_DROPOUT) || makes_tiles(op);
}

static bool reads_pending(const cpu_run *r, const ir_node *n)
{
    for (int k = 0; k < n->nargs; k++)
        if (r->pending[node_args(r->g, n)[k]]) return true;
    return false;
}

/* v (result sized, operands checked) may wait in the chain: its operands
 * are all the result's size (check_operands) or splats, and it is as large
 * as the chain's results. Small results are not worth the tiles. A gather
 * reads its operands whole, so none of them may wait in the chain; its
 * tiles save a pass of the elementwise op after it over its result (a
 * padded window's where). */
static bool chain_fits(const cpu_run *r, ir_value v)
{
    const cpu_chain *ch = &r->chain;
    const ir_node *n = &r->g->nodes[v];
    int64_t numel = r->res->values[v].numel;
    if (!chainable_op(n->op) || numel < 2 * CPU_CHAIN_TILE) return false;
    if (makes_tiles(n->op) && reads_pending(r, n)) return false;
    return ch->n == 0 || (ch->n < CPU_CHAIN_MAX && ch->numel == numel);
}

static void chain_push(cpu_run *r, ir_value v)
{
    cpu_chain *ch = &r->chain;
    if (ch->n == 0) ch->first = v, ch->numel = r->res->values[v].numel;
    ch->nodes[ch->n++] = v;
    r->pending[v] = CHAIN_PENDING;
}

/* Elements [off, off + len) of value v, as a rank-1 tensor; a splat stays
 * whole, and a local value's tile is all its scratch holds (the thread's
 * own scratch: thread 0's, and then each other's CPU_CHAIN_SCRATCH on). */
static cpu_tensor tile_of(const cpu_run *r, ir_value v, int64_t off, int64_t len, int thread)
{
    const cpu_tensor *t = &r->res->values[v];
    cpu_tensor s = *t;
    if (t->splat) return s;
    if (r->pending[v] == CHAIN_LOCAL) off = (int64_t)thread * (int64_t)(CPU_CHAIN_SCRATCH / CPU_ELEM_BYTES);
    if (t->repeat > 1) off /= t->repeat;   /* tiles never cut a run: the repeat divides them */
    if (s.f) s.f += off;
    else s.i += off;
    s.rank = 1;
    s.shape[0] = len;
    s.numel = len;
    return s;
}

/* Run u's kernel on one tile (makes_tiles: the operands whole) on a
 * thread; a kernel's refusal goes to kerr (non-empty: failed). */
static void chain_kernel(const cpu_run *r, ir_value u, int64_t off, int64_t len, int thread, char *kerr,
                         size_t errcap)
{
    const ir_node *n = &r->g->nodes[u];
    const ir_value *a = node_args(r->g, n);
    cpu_tensor args[3], out = tile_of(r, u, off, len, thread);
    const cpu_tensor *argv[3];   /* not r->argv: that holds the operands of the node that ran the chain */
    NC_ASSERT(n->nargs <= 3);
    for (int k = 0; k < n->nargs; k++) {
        args[k] = makes_tiles(n->op) ? r->res->values[a[k]] : tile_of(r, a[k], off, len, thread);
        argv[k] = &args[k];
    }
    cpu_op_ctx c = {.g = r->g, .node = n, .args = argv, .out = &out, .syms = r->syms, .first = off,
                    .whole = r->chain.numel, .err = kerr, .errcap = errcap};
    cpu_kernels[n->op](&c);
}

/* One chain_run: its tiles, and per thread what its failed kernel said. */
typedef struct chain_job {
    const cpu_run *r;
    int64_t tile;                  /* elements a tile (the last may be short) */
    ir_value failed[CPU_CREW_MAX];
    char err[CPU_CREW_MAX][512];
} chain_job;

/* Every chained kernel, in node order, on one tile. */
static int chain_tile(void *ctx, int64_t t, int thread)
{
    chain_job *job = ctx;
    const cpu_chain *ch = &job->r->chain;
    int64_t off = t * job->tile, len = ch->numel - off < job->tile ? ch->numel - off : job->tile;
    for (uint32_t k = 0; k < ch->n; k++) {
        job->err[thread][0] = 0;
        chain_kernel(job->r, ch->nodes[k], off, len, thread, job->err[thread], sizeof job->err[thread]);
        if (job->err[thread][0]) {
            job->failed[thread] = ch->nodes[k];
            return -1;
        }
    }
    return 0;
}

/* Tiles worth the workers' wake-up: fewer run on the calling thread. */
#define CPU_CREW_MIN_TILES 4

/* The crew to spread ntiles over (NULL: the calling thread alone),
 * started at the first chain that wants one. */
static cpu_crew *run_crew(void *run)
{
    cpu_run *r = run;
    if (r->threads < 2) return NULL;
    if (!r->crew) r->crew = cpu_crew_new(r->threads);
    if (!r->crew) r->threads = 1;   /* no thread would start: alone from now on */
    return r->crew;
}

static cpu_crew *chain_crew(cpu_run *r, int64_t ntiles)
{
    return ntiles < CPU_CREW_MIN_TILES ? NULL : run_crew(r);
}

static void finish_node(cpu_run *r, ir_value v);

/* u, a chained value, is read by chained nodes alone and freed once the
 * chain has run: no tile of it need reach a buffer, and one tile of
 * scratch, still in cache when the next node reads it, serves instead. Any
 * other node reading u runs the chain first (a kernel, or a view of a
 * pending value), so a last use within the chain is a chained one. Not a
 * constant the cache may keep (frontier). It never gets a buffer
 * (chain_store): with one, untouched, Adam's chains on fashion_mlp's 4 MB
 * weights took its step's values to 110.8 MiB at most, 34.4 MiB without. */
static bool chain_local(const cpu_run *r, ir_value u, ir_value last)
{
    return r->last_use[u] != UINT32_MAX && r->last_use[u] <= last && !r->frontier[u];
}

/* t's storage (by its dtype: a value waiting in a chain has none yet). */
static void set_data(cpu_tensor *t, void *data)
{
    if (dtype_is_float(t->dtype)) t->f = data;
    else t->i = data;
}

static size_t scratch_bytes(const cpu_run *r) { return (size_t)r->threads * CPU_CHAIN_SCRATCH; }

static void *chain_scratch(cpu_run *r)
{
    cpu_pool *p = r->o->pool;
    if (r->scratch || (p && (r->scratch = pool_take(p, scratch_bytes(r))))) return r->scratch;
    r->scratch = nc_xmalloc(scratch_bytes(r));
    if (p) pool_count(p, (int64_t)scratch_bytes(r));
    return r->scratch;
}

/* The pool of the run c belongs to (NULL: none). c->run is a cpu_run only
 * where the executor's crew callback comes with it; a test may give a kernel
 * a crew of its own. */
static cpu_pool *kernel_pool(const cpu_op_ctx *c)
{
    return c->crew == run_crew && c->run ? ((const cpu_run *)c->run)->o->pool : NULL;
}

void *cpu_kernel_scratch(const cpu_op_ctx *c, size_t bytes)
{
    cpu_pool *p = kernel_pool(c);
    void *data = p ? pool_take(p, bytes) : NULL;
    if (data) return data;
    data = nc_xmalloc(bytes);
    if (p) p->fresh++, pool_count(p, (int64_t)bytes);
    return data;
}

void cpu_kernel_scratch_done(const cpu_op_ctx *c, void *data, size_t bytes)
{
    cpu_pool *p = kernel_pool(c);
    if (p) pool_give(p, data, bytes);
    else free(data);
}

/* Whether v reads p's buffer: p itself, or a view of it. */
static bool reads_buffer_of(const cpu_run *r, ir_value v, ir_value p)
{
    for (;; v = r->base[v]) {
        if (v == p) return true;
        if (r->base[v] == v) return false;
    }
}

/* u, chained, may be written over its parameter's buffer (in_place_plan):
 * every node that reads that buffer (through views too) comes before u,
 * and those from the chain's first on are kernels of the chain reading it
 * tile by tile (not a gather or broadcast reading it whole), so when a
 * tile of u is written, no one reads that tile's old values any more. */
static bool chain_in_place(const cpu_run *r, ir_value u)
{
    ir_value p = r->in_place ? r->in_place[u] : IR_NONE;
    if (p == IR_NONE || r->last_use[p] > u || !r->res->borrowed[p] || !data_of(&r->res->values[p]) ||
        r->res->values[p].numel != r->chain.numel)
        return false;
    for (ir_value w = r->chain.first; w <= u; w++) {
        const ir_node *n = &r->g->nodes[w];
        bool chained = r->pending[w] == CHAIN_PENDING && !makes_tiles(n->op);
        for (int k = 0; k < n->nargs && !chained; k++) {
            ir_value a = node_args(r->g, n)[k];
            if (reads_buffer_of(r, a, p) && !(r->base[w] != w && r->res->borrowed[w])) return false;
        }
    }
    return true;
}

/* Storage for the chain's values: a buffer each for those read after it,
 * all taken before any points into scratch (a failed allocation leaves
 * nothing there for the run's cleanup to free), and a tile of scratch for
 * the local ones. */
static int chain_store(cpu_run *r)
{
    cpu_chain *ch = &r->chain;
    ir_value last = ch->nodes[ch->n - 1];
    int rc;
    for (uint32_t k = 0; k < ch->n; k++) {
        ir_value u = ch->nodes[k];
        if (chain_local(r, u, last)) continue;
        if (chain_in_place(r, u)) {
            set_data(&r->res->values[u], data_of(&r->res->values[r->in_place[u]]));
            r->res->borrowed[u] = true;   /* the caller's parameter, now holding u */
        } else if ((rc = store_result(r, u))) {
            return rc;
        }
    }
    for (uint32_t k = 0; k < ch->n; k++) {
        ir_value u = ch->nodes[k];
        if (!chain_local(r, u, last)) continue;
        set_data(&r->res->values[u], (char *)chain_scratch(r) + (size_t)k * CPU_CHAIN_TILE * CPU_ELEM_BYTES);
        r->pending[u] = CHAIN_LOCAL;
    }
    return 0;
}

/* Run the chain's kernels, tile by tile, then do what the nodes from its
 * first up to end (not included) left for after their value: their
 * releases, in node order, as an unchained run would have done them (a
 * local value, storage-less again, has nothing to release). */
static int chain_run(cpu_run *r, ir_value end)
{
    cpu_chain *ch = &r->chain;
    int rc = chain_store(r);
    chain_job job = {.r = r, .tile = CPU_CHAIN_TILE};
    int64_t ntiles = (ch->numel + CPU_CHAIN_TILE - 1) / CPU_CHAIN_TILE;
    cpu_crew *crew = rc ? NULL : chain_crew(r, ntiles);
    /* a node alone, with a buffer, gains nothing from tiles on one thread: one of it all */
    if (!crew && ch->n == 1 && r->pending[ch->nodes[0]] != CHAIN_LOCAL) job.tile = ch->numel, ntiles = 1;
    int thread;
    if (rc == 0 && cpu_crew_run(crew, ntiles, chain_tile, &job, &thread) < ntiles)
        rc = run_fail(r, &r->g->nodes[job.failed[thread]], "%s", job.err[thread]);
    for (uint32_t k = 0; k < ch->n; k++) {
        ir_value u = ch->nodes[k];
        if (r->pending[u] == CHAIN_LOCAL) set_data(&r->res->values[u], NULL);   /* dead: never read again */
        r->pending[u] = CHAIN_NONE;
    }
    ch->n = 0;
    for (ir_value u = ch->first; u < end && rc == 0; u++)
        if (r->mode[u] != MODE_SKIP) finish_node(r, u);
    return rc;
}

/* The scratch an attention node's kernel takes from the pool at most on
 * threads (cpu_attention_scratch_bytes), 0 for any other node. */
static int64_t planned_scratch(const ir_graph *g, const ir_node *node, const int64_t *syms, int threads)
{
    if (node->op != OP_ATTENTION && node->op != OP_ATTENTION_LSE && node->op != OP_ATTENTION_GRAD) return 0;
    const ir_value *a = node_args(g, node);
    const ir_node *q = &g->nodes[a[0]], *k = &g->nodes[a[1]], *v = node->op != OP_ATTENTION_LSE ? &g->nodes[a[2]] : q;
    int r = q->rank;
    int64_t T, S, D, E, numel;
    if (r < 2 || k->rank != r || v->rank != r || !ir_shape_numel(g, 1, &q->shape[r - 2], syms, &T) ||
        !ir_shape_numel(g, 1, &k->shape[r - 2], syms, &S) || !ir_shape_numel(g, 1, &q->shape[r - 1], syms, &D) ||
        !ir_shape_numel(g, 1, &v->shape[r - 1], syms, &E) || !ir_numel(g, q, syms, &numel) || T * D == 0)
        return 0;
    return cpu_attention_scratch_bytes(node->op, node->attr.axis, numel / (T * D), T, S, D, E, threads);
}

int64_t cpu_exec_planned_bytes(const ir_graph *g, const int64_t *syms)
{
    char err[160];
    int threads = cpu_crew_threads(err, sizeof err);   /* the run's crew (a malformed count fails the run) */
    const uint32_t n = g->nnodes;
    uint32_t *base = nc_xmalloc((n + 1) * sizeof *base), *end = nc_xmalloc((n + 1) * sizeof *end);
    for (uint32_t v = 0; v < n; v++) {
        const ir_node *node = &g->nodes[v];
        base[v] = node->op == OP_RESHAPE && node->nargs == 1 ? base[node_args(g, node)[0]] : v;
        end[v] = v;
        for (int k = 0; k < node->nargs; k++) {
            uint32_t b = base[node_args(g, node)[k]];
            if (end[b] < v) end[b] = v;
        }
    }
    for (uint32_t i = 0; i < g->noutputs; i++) end[base[g->outputs[i].value]] = n;
    /* size classes: live[c] results of size[c] hold storage now, most[c] at once at most */
    /* a class a node's result and one its scratch at most */
    int64_t *size = nc_xcalloc(2 * n + 2, sizeof *size), *live = nc_xcalloc(2 * n + 2, sizeof *live);
    int64_t *most = nc_xcalloc(2 * n + 2, sizeof *most);
    uint32_t nclasses = 0, *class_of = nc_xcalloc(n + 1, sizeof *class_of);
    bool *owns = nc_xcalloc(n + 1, sizeof *owns);
    for (uint32_t v = 0; v < n; v++) {   /* v's storage taken, then what v read last given back */
        const ir_node *node = &g->nodes[v];
        int64_t numel = 0;
        owns[v] = base[v] == v && node->op != OP_INPUT && node->op != OP_PARAM;
        if (owns[v]) {
            const int64_t bytes = (int64_t)storage_bytes(ir_numel(g, node, syms, &numel) ? numel : 0);
            uint32_t c = 0;
            while (c < nclasses && size[c] != bytes) c++;
            if (c == nclasses) size[nclasses++] = bytes;
            class_of[v] = c;
            if (++live[c] > most[c]) most[c] = live[c];
        }
        /* the kernel's scratch, taken and given back while v's result and operands live */
        int64_t scratch = planned_scratch(g, node, syms, threads);
        if (scratch > 0) {
            uint32_t c = 0;
            while (c < nclasses && size[c] != scratch) c++;
            if (c == nclasses) size[nclasses++] = scratch;
            if (live[c] + 1 > most[c]) most[c] = live[c] + 1;
        }
        for (int k = 0; k < node->nargs; k++) {
            uint32_t b = base[node_args(g, node)[k]];
            if (end[b] == v && owns[b]) owns[b] = false, live[class_of[b]]--;
        }
        if (end[v] == v && owns[v]) owns[v] = false, live[class_of[v]]--;   /* read by nothing */
    }
    int64_t held = 0;
    for (uint32_t c = 0; c < nclasses; c++) held += size[c] * most[c];
    free(base), free(end), free(size), free(live), free(most), free(class_of), free(owns);
    return held;
}

static int eval_node(cpu_run *r, ir_value v)
{
    const ir_graph *g = r->g;
    const ir_node *n = &g->nodes[v];
    int64_t shape[NC_MAX_RANK];
    if (n->op >= OP_COUNT || n->rank > NC_MAX_RANK) return run_fail(r, n, "malformed node");
    if (!eval_shape(r, n->rank, n->shape, shape)) {
        char *s = ir_shape_str(g, n->dtype, n->rank, n->shape);
        int rc = run_fail(r, n, "%s: shape %s does not evaluate at this binding (overflow or negative)", op_name(n->op), s);
        free(s);
        return rc;
    }
    if (n->op == OP_INPUT || n->op == OP_PARAM) return bind_source(r, v, shape);
    if (r->mode[v] == MODE_KEPT) {
        r->res->values[v] = r->consts->kept[v];
        r->res->borrowed[v] = true;
        r->o->pool->const_reads++;
        return 0;
    }
    const ir_value *a = node_args(g, n);
    for (int k = 0; k < n->nargs; k++) {
        const cpu_tensor *t = &r->res->values[a[k]];
        /* operands precede users and are alive (a chained one gets its storage when the chain runs) */
        NC_ASSERT(a[k] < v && (t->f || t->i || r->pending[a[k]]));
        r->argv[k] = t;
    }
    int rc;
    if (r->base[v] != v) {
        if (r->chain.n && reads_pending(r, n) && (rc = chain_run(r, v))) return rc;
        if (bind_view(r, v, shape)) return 0;
    }
    cpu_tensor *out = &r->res->values[v];
    rc = size_result(r, n, shape, out);
    if (rc || (rc = check_operands(r, n))) return rc;
    if (r->chain.n && !chain_fits(r, v) && (rc = chain_run(r, v))) return rc;
    if (chain_fits(r, v)) {   /* joins the chain, or begins the next one; storage when it runs */
        chain_push(r, v);
        return 0;
    }
    if ((rc = store_result(r, v))) return rc;
    char kerr[512] = "";
    cpu_op_ctx c = {.g = g, .node = n, .args = r->argv, .out = out, .syms = r->syms, .err = kerr, .errcap = sizeof kerr,
                    .crew = run_crew, .run = r};
    cpu_kernels[n->op](&c);
    if (kerr[0]) return run_fail(r, n, "%s", kerr);
    return 0;
}

static bool alive(const cpu_run *r, ir_value v) { return r->res->values[v].f || r->res->values[v].i; }

/* Free operands read for the last time by v (and the buffers they view),
 * and v itself if nothing reads it. */
static void release_dead(cpu_run *r, ir_value v)
{
    const ir_node *n = &r->g->nodes[v];
    const ir_value *a = node_args(r->g, n);
    for (int k = 0; k < n->nargs && r->mode[v] == MODE_RUN; k++)
        for (ir_value u = a[k];; u = r->base[u]) {
            if (r->last_use[u] == v && alive(r, u)) release(r, u);
            if (r->base[u] == u) break;
        }
    if (r->last_use[v] == v) release(r, v);
}

/* While the cache is being built: v, a constant that the rest of the graph
 * reads, has its value; the buffer behind it (v's own, or the one it views)
 * moves from the run to the cache, if the budget allows. */
static void keep_const(cpu_run *r, ir_value v)
{
    cpu_const_cache *cc = r->consts;
    ir_value u = v;
    while (!const_kept(cc, u) && r->res->borrowed[u] && r->base[u] != u) u = r->base[u];
    cpu_tensor *t = &r->res->values[u];
    size_t bytes = storage_bytes(t->numel);
    if (const_kept(cc, u) || r->res->borrowed[u] || !alive(r, u) || cc->bytes + bytes > CPU_CONST_CACHE_BYTES)
        return;
    cc->kept[u] = *t;
    cc->bytes += bytes;
    r->res->borrowed[u] = true;   /* the cache's now: a release leaves it alone */
}

/* After v has its value: keep it if it is a constant the cache wants, and
 * free what v read last (and v, if nothing reads it). */
static void finish_node(cpu_run *r, ir_value v)
{
    if (r->building && r->frontier[v]) keep_const(r, v);
    release_dead(r, v);
}

/* update_in_place: for each update value that alone sets its parameter,
 * and that parameter's one node, not an output (so the run borrows the
 * caller's tensor) and of its dtype: the node whose buffer it may take
 * (chain_in_place decides, when its chain runs). NULL without the option. */
static ir_value *in_place_plan(const cpu_run *r)
{
    const ir_graph *g = r->g;
    if (!r->o->update_in_place || r->o->keep_all || g->nupdates == 0) return NULL;
    ir_value *plan = nc_xmalloc(g->nnodes * sizeof *plan), *node_of = nc_xmalloc(g->nparams * sizeof *node_of);
    for (uint32_t p = 0; p < g->nparams; p++) node_of[p] = IR_NONE;
    for (uint32_t v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        plan[v] = IR_NONE;
        if (n->op == OP_PARAM && n->attr.index < g->nparams)   /* a second node of one parameter: neither */
            node_of[n->attr.index] = node_of[n->attr.index] == IR_NONE && !is_output(g, v) ? v : IR_NONE - 1;
    }
    for (uint32_t k = 0; k < g->nupdates; k++) {
        ir_value u = g->updates[k].value, p = g->updates[k].param < g->nparams ? node_of[g->updates[k].param] : IR_NONE;
        bool alone = u < g->nnodes && !is_output(g, u) && p < g->nnodes && g->nodes[u].dtype == g->nodes[p].dtype;
        for (uint32_t j = 0; j < g->nupdates && alone; j++)
            alone = j == k || (g->updates[j].value != u && g->updates[j].param != g->updates[k].param);
        if (alone) plan[u] = p;
    }
    free(node_of);
    return plan;
}

int cpu_exec_run(const ir_graph *g, const cpu_exec_opts *o, cpu_exec_result *res, char *err, size_t errcap)
{
    memset(res, 0, sizeof *res);
    res->pool = o->pool;
    if (o->pool) o->pool->run++;
    if (err && errcap) err[0] = 0;
    cpu_run r = {.g = g, .o = o, .syms = o->syms, .res = res, .err = err, .errcap = errcap,
                 .max_bytes = o->max_bytes > 0 ? o->max_bytes : CPU_DEFAULT_MAX_BYTES};
    if (check_binding(&r)) {
        if (o->pool) pool_trim(o->pool);
        return -1;
    }
    uint32_t maxargs = 1;
    for (uint32_t v = 0; v < g->nnodes; v++)
        if (g->nodes[v].nargs > maxargs) maxargs = g->nodes[v].nargs;
    res->values = nc_xcalloc(g->nnodes, sizeof *res->values);
    res->borrowed = nc_xcalloc(g->nnodes, sizeof *res->borrowed);
    res->nvalues = g->nnodes;
    r.last_use = nc_xmalloc((g->nnodes ? g->nnodes : 1) * sizeof *r.last_use);
    r.argv = nc_xmalloc(maxargs * sizeof *r.argv);
    r.base = nc_xmalloc((g->nnodes ? g->nnodes : 1) * sizeof *r.base);
    r.mode = nc_xcalloc(g->nnodes ? g->nnodes : 1, sizeof *r.mode);
    r.frontier = nc_xcalloc(g->nnodes ? g->nnodes : 1, sizeof *r.frontier);
    r.cond_only = nc_xcalloc(g->nnodes ? g->nnodes : 1, sizeof *r.cond_only);
    int threads = cpu_crew_threads(err, errcap);
    r.threads = threads < 1 ? 1 : threads;
    compute_last_uses(&r);
    r.in_place = in_place_plan(&r);
    bool building = r.consts && !r.consts->complete;
    r.building = building;
    r.pending = nc_xcalloc(g->nnodes ? g->nnodes : 1, sizeof *r.pending);
    int rc = threads < 1 ? -1 : 0;
    for (uint32_t v = 0; v < g->nnodes && rc == 0; v++) {
        if (r.mode[v] == MODE_SKIP) continue;
        rc = eval_node(&r, v);
        if (rc == 0 && r.chain.n == 0) finish_node(&r, v);
    }
    if (rc == 0 && r.chain.n) rc = chain_run(&r, g->nnodes);
    free(r.pending);
    cpu_crew_free(r.crew);
    if (r.scratch && o->pool) pool_give(o->pool, r.scratch, scratch_bytes(&r));   /* the next run's, without page faults */
    else free(r.scratch);
    free(r.last_use);
    free(r.base);
    free(r.argv);
    free(r.mode);
    free(r.frontier);
    free(r.cond_only);
    free(r.in_place);
    if (rc) cpu_exec_result_free(res);
    if (building) {
        if (rc) {   /* half built: the next run starts over */
            pool_count(o->pool, -(int64_t)r.consts->bytes);
            const_cache_clear(r.consts);
        }
        else r.consts->complete = true;
    }
    if (o->pool) pool_trim(o->pool);
    return rc;
}

/* An update's value can become its parameter's storage: the run's own buffer
 * of the same size, which nothing reads after the step (not an output, not
 * the new value of a second parameter). */
static bool update_movable(const ir_graph *g, const cpu_exec_result *res, uint32_t k, const cpu_tensor *dst)
{
    ir_value v = g->updates[k].value;
    const cpu_tensor *src = &res->values[v];
    if (res->borrowed[v] || src->numel != dst->numel || is_output(g, v)) return false;
    for (uint32_t j = 0; j < g->nupdates; j++)
        if (j != k && g->updates[j].value == v) return false;
    return true;
}

void cpu_exec_apply_updates(const ir_graph *g, cpu_exec_result *res, cpu_tensor *params)
{
    for (uint32_t k = 0; k < g->nupdates; k++) {
        cpu_tensor *dst = &params[g->updates[k].param];
        cpu_tensor *src = &res->values[g->updates[k].value];
        if (!dst->f || !src->f || dst->f == src->f) continue;
        if (!update_movable(g, res, k, dst)) {
            memcpy(dst->f, src->f, (size_t)dst->numel * sizeof *dst->f);
            continue;
        }
        /* Swap rather than copy (a step of fashion_mlp copied 22 MB). The old
         * parameter goes where the value's buffer would have gone, and the
         * run's borrowed views of it are dropped. */
        float *old = dst->f;
        dst->f = src->f;
        src->f = old;
        value_free(res->pool, src);
        for (uint32_t v = 0; v < res->nvalues; v++)
            if (res->borrowed[v] && res->values[v].f == old) res->values[v].f = NULL;
    }
}

void cpu_exec_result_free(cpu_exec_result *res)
{
    for (uint32_t v = 0; v < res->nvalues; v++)
        if (!res->borrowed || !res->borrowed[v]) value_free(res->pool, &res->values[v]);
    free(res->values);
    free(res->borrowed);
    memset(res, 0, sizeof *res);
}
