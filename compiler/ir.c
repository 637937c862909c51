/* ir.c - graph storage, dim interning, text form and verifier. */
#include "ir.h"
#include "typecheck.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Room for need more items after n, the capacity doubled as often as it
 * takes (from first): appending n items one at a time copies O(n) of them
 * in all, where growing by one each (a copying realloc: ASan's) copied n^2/2. */
static void *grow(void *p, size_t item, uint32_t n, uint32_t *cap, uint32_t need, uint32_t first)
{
    uint64_t want = (uint64_t)n + need;
    if (want <= *cap) return p;
    NC_ASSERT(want <= UINT32_MAX);
    uint64_t c = *cap ? *cap : first;
    while (c < want) c *= 2;
    if (c > UINT32_MAX) c = UINT32_MAX;
    *cap = (uint32_t)c;
    return nc_xrealloc(p, (size_t)c * item);
}

#define GROW(ptr, n, cap, need) ((ptr) = grow((ptr), sizeof *(ptr), (n), &(cap), (need), 64))
#define GROW_LIST(ptr, n, cap) ((ptr) = grow((ptr), sizeof *(ptr), (n), &(cap), 1, 4))

ir_graph *ir_graph_new(const char *name)
{
    ir_graph *g = nc_xcalloc(1, sizeof *g);
    g->name = nc_xstrdup(name ? name : "");
    return g;
}

static void free_decl(ir_tensor_decl *d) { free(d->name); }

void ir_graph_free(ir_graph *g)
{
    if (!g) return;
    free(g->nodes);
    free(g->args);
    free(g->dims);
    for (uint32_t i = 0; i < g->nsyms; i++) free(g->sym_names[i]);
    for (uint32_t i = 0; i < g->ninputs; i++) free_decl(&g->inputs[i]);
    for (uint32_t i = 0; i < g->nparams; i++) free_decl(&g->params[i].decl);
    for (uint32_t i = 0; i < g->noutputs; i++) free(g->outputs[i].name);
    for (uint32_t i = 0; i < g->nfiles; i++) free(g->files[i]);
    free(g->inputs);
    free(g->params);
    free(g->outputs);
    free(g->updates);
    for (uint32_t i = 0; i < g->nrequires; i++) free(g->requires[i].message), free(g->requires[i].hint);
    free(g->requires);
    free(g->files);
    free(g->name);
    free(g);
}

uint32_t ir_dim_intern(ir_graph *g, const dim_expr *d)
{
    for (uint32_t i = 0; i < g->ndims; i++)
        if (dim_equal(&g->dims[i], d)) return i;
    return ir_dim_append(g, d);
}

uint32_t ir_dim_append(ir_graph *g, const dim_expr *d)
{
    GROW(g->dims, g->ndims, g->cap_dims, 1);
    g->dims[g->ndims] = *d;
    return g->ndims++;
}

uint32_t ir_dim_const(ir_graph *g, int64_t v)
{
    dim_expr d = dim_const(v);
    return ir_dim_intern(g, &d);
}

size_t ir_sym_names_note(const ir_graph *g, char *buf, size_t cap)
{
    if (!g->nsyms) return nc_appendf(buf, cap, 0, " (all its dims are fixed)");
    size_t n = nc_appendf(buf, cap, 0, " (its symbolic dims: ");
    for (uint32_t k = 0; k < g->nsyms; k++) n = nc_appendf(buf, cap, n, "%s%s", k ? ", " : "", g->sym_names[k]);
    return nc_appendf(buf, cap, n, ")");
}

size_t ir_syms_format(const ir_graph *g, const int64_t *syms, char *buf, size_t cap)
{
    size_t n = nc_appendf(buf, cap, 0, "%s", "");
    for (uint32_t k = 0; k < g->nsyms; k++)
        n = nc_appendf(buf, cap, n, "%s%s = %lld", k ? ", " : "", g->sym_names[k], (long long)syms[k]);
    return n;
}

int ir_sym_find(const ir_graph *g, const char *name)
{
    for (uint32_t i = 0; i < g->nsyms; i++)
        if (strcmp(g->sym_names[i], name) == 0) return (int)i;
    return -1;
}

int ir_sym_add(ir_graph *g, const char *name)
{
    int s = ir_sym_find(g, name);
    if (s >= 0) return s;
    if (g->nsyms == NC_MAX_SYMS) return -1;
    g->sym_names[g->nsyms] = nc_xstrdup(name);
    return (int)g->nsyms++;
}

size_t ir_dim_format(const ir_graph *g, uint32_t dim, char *buf, size_t cap)
{
    return dim_format(&g->dims[dim], (const char *const *)g->sym_names, buf, cap);
}

/* ir_dim_format appended at buf + at, under nc_appendf's contract. */
static size_t append_dim(const ir_graph *g, uint32_t dim, char *buf, size_t cap, size_t at)
{
    return at + ir_dim_format(g, dim, at < cap ? buf + at : NULL, at < cap ? cap - at : 0);
}

size_t ir_shape_format(const ir_graph *g, nc_dtype t, uint8_t rank, const uint32_t *shape, char *buf, size_t cap)
{
    size_t n = nc_appendf(buf, cap, 0, "%s[", dtype_name(t));
    for (int i = 0; i < rank; i++) n = append_dim(g, shape[i], buf, cap, nc_appendf(buf, cap, n, "%s", i ? ", " : ""));
    return nc_appendf(buf, cap, n, "]");
}

/* The text, whole, in memory of its size (the caller frees it): each
 * measures its text with a first call, then writes it. */
char *ir_dim_str(const ir_graph *g, uint32_t dim)
{
    size_t n = ir_dim_format(g, dim, NULL, 0) + 1;
    char *s = nc_xmalloc(n);
    ir_dim_format(g, dim, s, n);
    return s;
}

char *ir_shape_str(const ir_graph *g, nc_dtype t, uint8_t rank, const uint32_t *shape)
{
    size_t n = ir_shape_format(g, t, rank, shape, NULL, 0) + 1;
    char *s = nc_xmalloc(n);
    ir_shape_format(g, t, rank, shape, s, n);
    return s;
}

char *ir_sym_names_str(const ir_graph *g)
{
    size_t n = ir_sym_names_note(g, NULL, 0) + 1;
    char *s = nc_xmalloc(n);
    ir_sym_names_note(g, s, n);
    return s;
}

char *ir_syms_str(const ir_graph *g, const int64_t *syms)
{
    size_t n = ir_syms_format(g, syms, NULL, 0) + 1;
    char *s = nc_xmalloc(n);
    ir_syms_format(g, syms, s, n);
    return s;
}

uint32_t ir_file_add(ir_graph *g, const char *path)
{
    for (uint32_t i = 0; i < g->nfiles; i++)
        if (strcmp(g->files[i], path) == 0) return i + 1;
    GROW_LIST(g->files, g->nfiles, g->cap_files);
    g->files[g->nfiles++] = nc_xstrdup(path);
    return g->nfiles;
}

ir_value ir_add(ir_graph *g, const ir_node *proto, const ir_value *args, uint16_t nargs)
{
    GROW(g->nodes, g->nnodes, g->cap_nodes, 1);
    GROW(g->args, g->nargs, g->cap_args, nargs);
    ir_node *n = &g->nodes[g->nnodes];
    *n = *proto;
    n->nargs = nargs;
    n->args_at = g->nargs;
    if (nargs) memcpy(g->args + g->nargs, args, nargs * sizeof *args);
    g->nargs += nargs;
    return g->nnodes++;
}

static void copy_decl(ir_tensor_decl *dst, const ir_tensor_decl *src)
{
    *dst = *src;
    dst->name = nc_xstrdup(src->name);
}

uint32_t ir_input_add(ir_graph *g, const ir_tensor_decl *d)
{
    GROW_LIST(g->inputs, g->ninputs, g->cap_inputs);
    copy_decl(&g->inputs[g->ninputs], d);
    return g->ninputs++;
}

uint32_t ir_param_add(ir_graph *g, const ir_param *p)
{
    GROW_LIST(g->params, g->nparams, g->cap_params);
    g->params[g->nparams] = *p;
    copy_decl(&g->params[g->nparams].decl, &p->decl);
    return g->nparams++;
}

void ir_output_add(ir_graph *g, const char *name, ir_value v)
{
    GROW_LIST(g->outputs, g->noutputs, g->cap_outputs);
    g->outputs[g->noutputs].name = nc_xstrdup(name);
    g->outputs[g->noutputs].value = v;
    g->noutputs++;
}

void ir_update_add(ir_graph *g, uint32_t param, ir_value v)
{
    GROW_LIST(g->updates, g->nupdates, g->cap_updates);
    g->updates[g->nupdates++] = (ir_update){.param = param, .value = v};
}

void ir_require_add(ir_graph *g, const ir_require *r)
{
    GROW_LIST(g->requires, g->nrequires, g->cap_requires);
    g->requires[g->nrequires] = *r;
    g->requires[g->nrequires].message = nc_xstrdup(r->message ? r->message : "");
    g->requires[g->nrequires++].hint = nc_xstrdup(r->hint ? r->hint : "");
}

size_t ir_require_span(const ir_graph *g, nc_dtype t, int rank, const uint32_t *shape, char *out, size_t cap)
{
    int ndims = rank < 0 ? 1 : rank;
    bool symbolic = false;
    int64_t v;
    for (int i = 0; i < ndims; i++) symbolic |= !dim_is_const(&g->dims[shape[i]], &v);
    if (!symbolic) return rank < 0 ? ir_dim_format(g, shape[0], out, cap) : ir_shape_format(g, t, (uint8_t)rank, shape, out, cap);
    size_t n = rank < 0 ? nc_appendf(out, cap, 0, "%cd", IR_SIZES_MARK) : nc_appendf(out, cap, 0, "%ct%d", IR_SIZES_MARK, (int)t);
    for (int i = 0; i < ndims; i++) n = nc_appendf(out, cap, n, "%s%u", rank < 0 ? "" : " ", shape[i]);
    return nc_appendf(out, cap, n, "%c", IR_SIZES_MARK);
}

/* One size span's text (its kind and numbers, between the marks): the dims
 * as written, then with syms their values ({T} in "T is {T}" reads as T's
 * value alone, a tensor as both: "f32[B, T] = f32[2, 5]"). A span a module could not have
 * been written with (an unknown dtype, a dim past the graph's) reads "?". */
static size_t sizes_span_text(const ir_graph *g, const char *span, const char *end, const int64_t *syms, char *out, size_t cap)
{
    char kind = *span++;
    uint32_t shape[NC_MAX_RANK];
    int rank = 0;
    char *next;
    long dtype = kind == 't' ? strtol(span, &next, 10) : 0;
    if (kind == 't') span = next;
    while (span < end && rank < NC_MAX_RANK) {
        unsigned long d = strtoul(span, &next, 10);
        if (next == span || d >= g->ndims) break;
        shape[rank++] = (uint32_t)d;
        span = next;
    }
    if ((kind != 't' && kind != 'd') || span != end || dtype < 0 || dtype >= NC_DTYPE_COUNT || (kind == 'd' && rank != 1))
        return nc_appendf(out, cap, 0, "?");
    int64_t value[NC_MAX_RANK];
    bool known = syms != NULL;
    for (int i = 0; i < rank && known; i++) known = dim_eval(&g->dims[shape[i]], syms, &value[i]);
    if (kind == 'd') return known ? nc_appendf(out, cap, 0, "%lld", (long long)value[0]) : ir_dim_format(g, shape[0], out, cap);
    size_t n = ir_shape_format(g, (nc_dtype)dtype, (uint8_t)rank, shape, out, cap);
    if (!known) return n;
    n = nc_appendf(out, cap, n, " = %s[", dtype_name((nc_dtype)dtype));
    for (int i = 0; i < rank; i++) n = nc_appendf(out, cap, n, "%s%lld", i ? ", " : "", (long long)value[i]);
    return nc_appendf(out, cap, n, "]");
}

size_t ir_require_text(const ir_graph *g, const char *text, const int64_t *syms, char *out, size_t cap)
{
    static const char mark[] = {IR_SIZES_MARK, 0};
    size_t o = nc_appendf(out, cap, 0, "%s", "");
    for (const char *p = text ? text : ""; *p;) {
        const char *end = *p == IR_SIZES_MARK ? strchr(p + 1, IR_SIZES_MARK) : NULL;
        if (end) {
            o += sizes_span_text(g, p + 1, end, syms, o < cap ? out + o : NULL, o < cap ? cap - o : 0);
            p = end + 1;
        } else {   /* a run of plain text, or a mark that opens no span, as it is */
            size_t run = 1 + strcspn(p + 1, mark);
            o = nc_appendf(out, cap, o, "%.*s", (int)run, p);
            p += run;
        }
    }
    return o;
}

char *ir_require_str(const ir_graph *g, const char *text, const int64_t *syms)
{
    size_t n = ir_require_text(g, text, syms, NULL, 0) + 1;
    char *s = nc_xmalloc(n);
    ir_require_text(g, text, syms, s, n);
    return s;
}

const char *ir_cmp_text(ir_cmp c)
{
    static const char *const text[IR_CMP_COUNT] = {"<", "<=", ">", ">=", "==", "!="};
    return c < IR_CMP_COUNT ? text[c] : "?";
}

bool ir_require_holds(const ir_graph *g, const ir_require *r, const int64_t *syms)
{
    int64_t a, b;
    if (!dim_eval(&g->dims[r->lhs], syms, &a) || !dim_eval(&g->dims[r->rhs], syms, &b)) return false;
    switch (r->cmp) {
    case IR_CMP_LT: return a < b;
    case IR_CMP_LE: return a <= b;
    case IR_CMP_GT: return a > b;
    case IR_CMP_GE: return a >= b;
    case IR_CMP_EQ: return a == b;
    default: return a != b;
    }
}

bool ir_shape_numel(const ir_graph *g, uint8_t rank, const uint32_t *shape, const int64_t *syms, int64_t *out)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        int64_t d;
        if (!dim_eval(&g->dims[shape[i]], syms, &d) || __builtin_mul_overflow(n, d, &n)) return false;
    }
    *out = n;
    return true;
}

bool ir_numel(const ir_graph *g, const ir_node *n, const int64_t *syms, int64_t *out)
{
    return ir_shape_numel(g, n->rank, n->shape, syms, out);
}

int64_t ir_bytes(const ir_graph *g, const ir_node *n, const int64_t *syms)
{
    int64_t numel;
    return ir_numel(g, n, syms, &numel) ? numel * (int64_t)dtype_size(n->dtype) : 0;
}

/* ------------------------------------------------------------------ */
/* text form                                                            */

static const char *init_names[IR_INIT_COUNT] = {
    "zeros", "ones", "normal", "uniform", "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal",
};

const char *ir_init_name(ir_init_kind k) { return k < IR_INIT_COUNT ? init_names[k] : "?"; }

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void print_type(const ir_graph *g, nc_dtype t, uint8_t rank, const uint32_t *shape, FILE *out)
{
    char *text = ir_shape_str(g, t, rank, shape);
    fputs(text, out);
    free(text);
}

static void print_dim(const ir_graph *g, uint32_t dim, FILE *out)
{
    char *text = ir_dim_str(g, dim);
    fputs(text, out);
    free(text);
}

/* Attributes are printed from the op's kwargs spec, so the text form shows
 * exactly the fields the op uses and nothing else. */
static void print_attrs(const ir_graph *g, const ir_node *n, FILE *out)
{
    const char *spec = nc_ops[n->op].kwargs;
    bool any = false;
    while (*spec) {
        char name[32] = {0}, field[16] = {0};
        int used = 0;
        if (sscanf(spec, " %31[^:]:%15[^=]=%*s%n", name, field, &used) < 2 || used == 0) break;
        spec += used;
        const char *sep = any ? ", " : " {";
        if (strcmp(field, "f") == 0) fprintf(out, "%s%s=%.9g", sep, name, n->attr.f);
        else if (strcmp(field, "seed") == 0) fprintf(out, "%s%s=%" PRId64, sep, name, n->attr.seed);
        else if (strcmp(field, "axis") == 0) fprintf(out, "%s%s=%d", sep, name, n->attr.axis);
        else if (strcmp(field, "keepdim") == 0) { if (!n->attr.keepdim) continue; fprintf(out, "%skeepdim", sep); }
        else if (strcmp(field, "ta") == 0) { if (!n->attr.ta) continue; fprintf(out, "%stranspose_a", sep); }
        else if (strcmp(field, "tb") == 0) { if (!n->attr.tb) continue; fprintf(out, "%stranspose_b", sep); }
        else if (strcmp(field, "causal") == 0) { if (!n->attr.causal) continue; fprintf(out, "%scausal", sep); }
        else if (strcmp(field, "dtype") == 0) {
            if (n->op != OP_CAST) continue;   /* sources show their dtype in the type */
            fprintf(out, "%s%s=%s", sep, name, dtype_name(n->attr.to));
        } else if (strcmp(field, "axes") == 0) {
            fprintf(out, "%s%s=[", sep, name);
            for (int i = 0; i < n->attr.naxes; i++) fprintf(out, "%s%d", i ? ", " : "", n->attr.axes[i]);
            fputc(']', out);
        } else if (strcmp(field, "lo") == 0 || strcmp(field, "hi") == 0) {
            fprintf(out, "%s%s=", sep, name);
            print_dim(g, field[0] == 'l' ? n->attr.lo : n->attr.hi, out);
        } else continue;                      /* shape: shown by the result type */
        any = true;
    }
    if (n->attr.f32_result) {   /* set by cast hoisting, not written in a source */
        fprintf(out, "%sf32_result", any ? ", " : " {");
        any = true;
    }
    if (any) fputc('}', out);
}

static void print_loc(const ir_graph *g, nc_loc loc, FILE *out)
{
    if (loc.file && loc.file <= g->nfiles)
        fprintf(out, "  # %s:%u:%u", base_name(g->files[loc.file - 1]), loc.line, loc.col);
}

void ir_print(const ir_graph *g, FILE *out)
{
    fprintf(out, "model %s\n", g->name);
    for (uint32_t i = 0; i < g->nsyms; i++) fprintf(out, "sym %s\n", g->sym_names[i]);
    for (uint32_t i = 0; i < g->ninputs; i++) {
        fprintf(out, "input %s: ", g->inputs[i].name);
        print_type(g, g->inputs[i].dtype, g->inputs[i].rank, g->inputs[i].shape, out);
        fputc('\n', out);
    }
    for (uint32_t i = 0; i < g->nparams; i++) {
        const ir_param *p = &g->params[i];
        fprintf(out, "%s %s: ", p->role == IR_ROLE_WEIGHT ? "param" : p->role == IR_ROLE_BUFFER ? "buffer" : "state", p->decl.name);
        print_type(g, p->decl.dtype, p->decl.rank, p->decl.shape, out);
        fprintf(out, " = %s(%.9g, %.9g)\n", init_names[p->init], p->init_a, p->init_b);
    }
    for (uint32_t i = 0; i < g->nrequires; i++) {
        const ir_require *r = &g->requires[i];
        fputs("require ", out);
        print_dim(g, r->lhs, out);
        fprintf(out, " %s ", ir_cmp_text(r->cmp));
        print_dim(g, r->rhs, out);
        print_loc(g, r->loc, out);
        fputc('\n', out);
    }
    for (uint32_t v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        fprintf(out, "%%%u = %s", v, nc_ops[n->op].name);
        if (n->op == OP_INPUT) fprintf(out, " %s", g->inputs[n->attr.index].name);
        if (n->op == OP_PARAM) fprintf(out, " %s", g->params[n->attr.index].decl.name);
        const ir_value *a = ir_args(g, n);
        for (int i = 0; i < n->nargs; i++) fprintf(out, "%s%%%u", i ? ", " : " ", a[i]);
        print_attrs(g, n, out);
        fputs(" : ", out);
        print_type(g, n->dtype, n->rank, n->shape, out);
        if (n->flags & IR_FLAG_AUTOCAST) fputs(" autocast", out);
        if (n->flags & IR_FLAG_RECOMPUTE) fputs(" recompute", out);
        if (n->region) fprintf(out, " checkpoint(%u)", n->region);
        print_loc(g, n->loc, out);
        fputc('\n', out);
    }
    for (uint32_t i = 0; i < g->noutputs; i++)
        fprintf(out, "output %s = %%%u\n", g->outputs[i].name, g->outputs[i].value);
    if (g->train.present && g->train.loss != IR_NONE) fprintf(out, "loss = %%%u\n", g->train.loss);
    for (uint32_t i = 0; i < g->nupdates; i++)
        fprintf(out, "update %s = %%%u\n", g->params[g->updates[i].param].decl.name, g->updates[i].value);
}

/* ------------------------------------------------------------------ */
/* verifier                                                             */

#define VFAIL(...) do { fprintf(err, "ir verify: " __VA_ARGS__); fputc('\n', err); problems++; } while (0)

/* The first attribute field in which a and b differ, or NULL. */
static const char *attr_difference(const ir_attr *a, const ir_attr *b)
{
    if (memcmp(&a->f, &b->f, sizeof a->f) != 0) return "f";
    if (a->seed != b->seed) return "seed";
    if (a->axis != b->axis) return "axis";
    if (a->naxes != b->naxes || memcmp(a->axes, b->axes, sizeof a->axes) != 0) return "axes";
    if (a->keepdim != b->keepdim || a->ta != b->ta || a->tb != b->tb || a->causal != b->causal || a->f32_result != b->f32_result)
        return "flags";
    if (a->lo != b->lo || a->hi != b->hi) return "lo/hi";
    if (a->to != b->to) return "dtype";
    if (a->index != b->index) return "index";
    return NULL;
}

static void print_axes(const ir_attr *a, FILE *out)
{
    fputc('[', out);
    for (int i = 0; i < a->naxes && i < NC_MAX_RANK; i++) fprintf(out, "%s%d", i ? ", " : "", a->axes[i]);
    fputc(']', out);
}

/* The rules normalise some attributes (an iota's axis -1 to rank - 1, a
 * reduce's axes none to all), and everything after them reads the stored
 * attributes as normalised: a session binding an iota of axis -1 read
 * shape[-1]. So a stored attribute must be what the rules make of it. */
static int verify_attrs(const ir_node *n, const ir_node *chk, ir_value v, FILE *err)
{
    int problems = 0;
    const char *field = attr_difference(&n->attr, &chk->attr);
    if (!field) return 0;
    if (strcmp(field, "axis") == 0) {
        VFAIL("%%%u (%s): axis %d, which its op's rules make %d", v, nc_ops[n->op].name, n->attr.axis, chk->attr.axis);
    } else if (strcmp(field, "axes") == 0) {
        fprintf(err, "ir verify: %%%u (%s): axes ", v, nc_ops[n->op].name);
        print_axes(&n->attr, err);
        fputs(", which its op's rules make ", err);
        print_axes(&chk->attr, err);
        fputc('\n', err);
        problems++;
    } else {
        VFAIL("%%%u (%s): attribute %s, which its op's rules change", v, nc_ops[n->op].name, field);
    }
    return problems;
}

/* One node's checks. A node reading a broken value (one with a problem, or
 * reading one) is marked broken itself, unchecked: its rules would read
 * that value's type and attributes, whose problem is reported once, there. */
static int verify_node_rules(const ir_graph *g, ir_value v, bool *broken, FILE *err)
{
    int problems = 0;
    const ir_node *n = &g->nodes[v];
    if (n->op >= OP_COUNT) { VFAIL("%%%u: bad op %d", v, n->op); return problems; }
    if (n->dtype >= NC_DTYPE_COUNT) VFAIL("%%%u: bad dtype %d", v, n->dtype);
    if (n->rank > NC_MAX_RANK) { VFAIL("%%%u: rank %d", v, n->rank); return problems; }
    for (int i = 0; i < n->rank; i++)
        if (n->shape[i] >= g->ndims) VFAIL("%%%u: dim id %u out of range", v, n->shape[i]);
    if (n->flags & ~IR_FLAG_KNOWN) VFAIL("%%%u: unknown flags 0x%x", v, n->flags);
    if ((uint64_t)n->args_at + n->nargs > g->nargs) { VFAIL("%%%u: operands out of range", v); return problems; }
    const ir_value *a = ir_args(g, n);
    for (int i = 0; i < n->nargs; i++)
        if (a[i] >= v) { VFAIL("%%%u: operand %d (%%%u) does not precede its user", v, i, a[i]); return problems; }
    if (n->op == OP_INPUT && n->attr.index >= g->ninputs) VFAIL("%%%u: input index %u", v, n->attr.index);
    if (n->op == OP_PARAM && n->attr.index >= g->nparams) VFAIL("%%%u: param index %u", v, n->attr.index);
    if (problems) return problems;
    for (int i = 0; i < n->nargs; i++)
        if (broken[a[i]]) return broken[v] = true, 0;
    if (n->op == OP_INPUT || n->op == OP_PARAM) {   /* sources match their declarations */
        const ir_tensor_decl *d = n->op == OP_INPUT ? &g->inputs[n->attr.index] : &g->params[n->attr.index].decl;
        if (d->dtype != n->dtype || d->rank != n->rank || memcmp(d->shape, n->shape, n->rank * sizeof(uint32_t)) != 0)
            VFAIL("%%%u: type differs from the declaration of %s", v, d->name);
    }
    /* The stored type must be what the op's rules give for these operands. */
    ir_node chk = *n;
    tc_error e;
    if (!tc_infer((ir_graph *)g, &chk, a, &e)) {
        VFAIL("%%%u (%s): %s", v, nc_ops[n->op].name, e.msg);
        tc_error_free(&e);
    } else if (chk.dtype != n->dtype || chk.rank != n->rank ||
               memcmp(chk.shape, n->shape, n->rank * sizeof(uint32_t)) != 0) {
        VFAIL("%%%u (%s): stored type differs from the inferred one", v, nc_ops[n->op].name);
    } else {
        problems += verify_attrs(n, &chk, v, err);
    }
    return problems;
}

static int verify_node(const ir_graph *g, ir_value v, bool *broken, FILE *err)
{
    int problems = verify_node_rules(g, v, broken, err);
    broken[v] = broken[v] || problems > 0;
    return problems;
}

int ir_verify(const ir_graph *g, FILE *err)
{
    int problems = 0;
    bool *broken = nc_xcalloc(g->nnodes + 1, sizeof *broken);
    for (ir_value v = 0; v < g->nnodes; v++) {
        problems += verify_node(g, v, broken, err);
    }
    free(broken);
    for (uint32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value >= g->nnodes) VFAIL("output %s: value out of range", g->outputs[i].name);
    if (g->train.present && g->train.loss != IR_NONE && g->train.loss >= g->nnodes) VFAIL("train loss out of range");
    for (uint32_t i = 0; i < g->nrequires; i++) {
        const ir_require *r = &g->requires[i];
        if (r->lhs >= g->ndims || r->rhs >= g->ndims || r->cmp >= IR_CMP_COUNT) VFAIL("require %u out of range", i);
    }
    for (uint32_t i = 0; i < g->nupdates; i++) {
        const ir_update *u = &g->updates[i];
        if (u->param >= g->nparams || u->value >= g->nnodes) { VFAIL("update %u out of range", i); continue; }
        const ir_param *p = &g->params[u->param];
        const ir_node *n = &g->nodes[u->value];
        if (p->decl.dtype != n->dtype || p->decl.rank != n->rank || memcmp(p->decl.shape, n->shape, n->rank * sizeof(uint32_t)))
            VFAIL("update of %s: the value's type differs from the parameter's", p->decl.name);
    }
    return problems;
}

/* Per value: computed from fills, iotas and sizes' values (and, with params,
 * parameters) alone, nothing random: the same at every run of a binding. */
static bool *values_from(const ir_graph *g, bool params)
{
    bool *from = nc_xcalloc(g->nnodes + 1, sizeof *from);
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        bool k = n->op == OP_FILL || n->op == OP_IOTA || n->op == OP_DIM_VALUE || (params && n->op == OP_PARAM);
        if (n->nargs && !(nc_ops[n->op].flags & OPF_RANDOM) && nc_ops[n->op].category != CAT_SOURCE) {
            k = true;
            for (int i = 0; i < n->nargs; i++) k = k && from[ir_args(g, n)[i]];
        }
        from[v] = k;
    }
    return from;
}

bool *ir_constant_values(const ir_graph *g) { return values_from(g, false); }
bool *ir_parameter_values(const ir_graph *g) { return values_from(g, true); }
