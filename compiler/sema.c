/* sema.c - elaborating models: scopes, statements, function instantiation,
 * repeat unrolling, imports, model signatures and training sections.
 *
 * Requires: a parsed ast_file. Produces: a verified ir_graph, or diagnostics. */
#include "sema_int.h"
#include "parse.h"
#include "file_open.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEMA_MAX_CALL_DEPTH 64
#define SEMA_MAX_REPEAT 4096
/* Each repeat is at most SEMA_MAX_REPEAT, but nested ones (and fns that call
 * another twice, each level) multiply: repeats of 1000 in 1000 in 1000 ran for
 * hours. examples/gpt2.net runs 494 statements, 1934 with 48 layers; the
 * limit takes 0.1 s of CPU to reach here, 3 s in fuzz_parse at 4 times it. */
#define SEMA_MAX_STMTS ((uint64_t)1 << 16)
/* After an error the build has failed: what it runs further only looks for
 * more errors, and a fn expanded 2^16 times repeats its own (fuzz_compile
 * spent 14 s suggesting names for one unknown name, once per expansion). */
#define SEMA_MAX_STMTS_FAILED ((uint64_t)1 << 12)

/* ------------------------------------------------------------------ */
/* values and diagnostics                                              */

sv sv_error(void) { return (sv){.kind = SV_ERROR}; }
sv sv_int(int64_t i) { return (sv){.kind = SV_INT, .i = i}; }
sv sv_float(double f) { return (sv){.kind = SV_FLOAT, .f = f}; }

sv sv_tensor(sema_ctx *c, ir_value t)
{
    return (sv){.kind = SV_TENSOR, .t = t, .dtype = c->g->nodes[t].dtype};
}

const char *sv_kind_phrase(sv_kind k)
{
    static const char *names[] = {"an error", "nothing", "a tensor", "an integer", "a number", "a bool", "a string",
                                  "a dtype", "a dimension", "a list", "a module", "a function"};
    return k < NC_COUNT(names) ? names[k] : "?";
}

const char *sema_textf(sema_ctx *c, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    size_t n = (size_t)vsnprintf(NULL, 0, fmt, ap) + 1;
    char *text = ast_alloc(c->arena, n);
    vsnprintf(text, n, fmt, again);
    va_end(again);
    va_end(ap);
    return text;
}

const char *sema_dim_text(sema_ctx *c, uint32_t dim)
{
    size_t n = ir_dim_format(c->g, dim, NULL, 0) + 1;
    char *text = ast_alloc(c->arena, n);
    ir_dim_format(c->g, dim, text, n);
    return text;
}

const char *sema_shape_text(sema_ctx *c, nc_dtype t, uint8_t rank, const uint32_t *shape)
{
    size_t n = ir_shape_format(c->g, t, rank, shape, NULL, 0) + 1;
    char *text = ast_alloc(c->arena, n);
    ir_shape_format(c->g, t, rank, shape, text, n);
    return text;
}

const char *sema_node_text(sema_ctx *c, ir_value v)
{
    const ir_node *n = &c->g->nodes[v];
    return sema_shape_text(c, n->dtype, n->rank, n->shape);
}

static bool loc_same(nc_loc a, nc_loc b)
{
    return a.file == b.file && a.line == b.line && a.col == b.col;
}

static void vreport(sema_ctx *c, diag_level level, nc_loc loc, const char *hint, const char *fmt, va_list ap)
{
    int before = c->diag->errors + c->diag->warnings;
    c->diag->call_noted = c->call_depth > 0 && c->call_site.line;
    diag_vreport(c->diag, level, loc, hint, fmt, ap);
    c->diag->call_noted = false;
    /* Inside a function, also say which call instantiated it: the one in the
     * model's body, and before it the fn's direct caller when that is another
     * line (a fn of the user's calling a library's, where the bad argument is). */
    if (c->call_depth > 0 && c->call_site.line && c->diag->errors + c->diag->warnings > before) {
        nc_loc in = c->inner_call_site;
        bool other = in.line && !loc_same(in, c->call_site) &&
                     (in.file != loc.file || in.line != loc.line);   /* the error's own line shows it */
        if (other) diag_report(c->diag, DIAG_NOTE, in, NULL, "in the call from here");
        diag_report(c->diag, DIAG_NOTE, c->call_site, NULL, other ? "reached from the call here" : "in the call from here");
    }
}

void sema_err(sema_ctx *c, nc_loc loc, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(c, DIAG_ERROR, loc, hint, fmt, ap);
    va_end(ap);
}

void sema_warn(sema_ctx *c, nc_loc loc, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(c, DIAG_WARNING, loc, hint, fmt, ap);
    va_end(ap);
}

ir_node sema_proto(sema_ctx *c, nc_op op, nc_loc loc)
{
    ir_node n = {.op = op, .loc = loc, .region = c->region};
    if (c->region) n.flags |= IR_FLAG_CHECKPOINT;
    return n;
}

/* ------------------------------------------------------------------ */
/* scopes                                                               */

static binding *scope_find_local(scope *s, const char *name)
{
    for (uint32_t i = s->n; i-- > 0;)
        if (strcmp(s->b[i].name, name) == 0) return &s->b[i];
    return NULL;
}

static binding *lookup(sema_ctx *c, const char *name)
{
    for (scope *s = c->env; s; s = s->parent) {
        binding *b = scope_find_local(s, name);
        if (b) return b;
    }
    return NULL;
}

static void scope_put(scope *s, const char *name, sv v, nc_loc loc)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->b = nc_xrealloc(s->b, s->cap * sizeof *s->b);
    }
    s->b[s->n++] = (binding){.name = name, .value = v, .loc = loc};
}

/* Assignment: rebind the name where it lives inside the current function,
 * else define it in the innermost scope. */
void sema_bind(sema_ctx *c, const char *name, sv v, nc_loc loc)
{
    for (scope *s = c->env; s; s = s->parent) {
        binding *b = scope_find_local(s, name);
        if (b && b->fixed) {
            char *hint = nc_xasprintf("the index is the iteration's number for the whole body: bind a new name, e.g. %s1 = %s + 1", name, name);
            sema_err(c, loc, hint, "'%s' is the repeat's index; it cannot be assigned", name);
            free(hint);
            return;
        }
        if (b) {
            b->value = v;
            return;
        }
        if (s->fn_boundary) break;
    }
    scope_put(c->env, name, v, loc);
}

static void scope_enter(sema_ctx *c, scope *s, bool fn_boundary)
{
    if (fn_boundary) {   /* a new function or model: names a finished one at this address left are not its own */
        int k = 0;
        for (int i = 0; i < c->nended; i++)
            if (c->ended[i].owner != s) c->ended[k++] = c->ended[i];
        c->nended = k;
    }
    memset(s, 0, sizeof *s);
    s->parent = c->env;
    s->fn_boundary = fn_boundary;
    c->env = s;
}

/* The function or model scope a scope belongs to. */
static const scope *scope_owner(const scope *s)
{
    while (s && !s->fn_boundary) s = s->parent;
    return s;
}

/* A name whose scope ended (or an if's branch that was not taken binds):
 * an unknown name found here gets a hint; why is the if or repeat, or NULL. */
static void ended_push(sema_ctx *c, const char *name, nc_loc loc, const scope *owner, const ast_node *why)
{
    const int cap = (int)NC_COUNT(c->ended);
    if (c->nended == cap) memmove(c->ended, c->ended + 1, --c->nended * sizeof c->ended[0]);
    c->ended[c->nended].name = name;
    c->ended[c->nended].loc = loc;
    c->ended[c->nended].owner = owner;
    c->ended[c->nended++].why = why;
}

static void scope_end(sema_ctx *c, scope *s, const ast_node *why)
{
    int kept = 0;   /* a function's unknown names go with it: its next call (or another's scope here) reports its own */
    for (int i = 0; i < c->nunknown; i++)
        if (c->unknown[i].owner != s) c->unknown[kept++] = c->unknown[i];
    c->nunknown = kept;
    for (uint32_t i = 0; i < s->n && !s->fn_boundary; i++) ended_push(c, s->b[i].name, s->b[i].loc, scope_owner(s->parent), why);
    c->env = s->parent;
    free(s->b);
}

static void scope_leave(sema_ctx *c, scope *s) { scope_end(c, s, NULL); }

/* Edit distance, for "did you mean" hints. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32) return 99;
    int d[33][33];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The closest of the candidates within edit distance 2, for a hint. */
typedef struct suggestion {
    const char *best;
    int dist;
} suggestion;

static void suggest(suggestion *s, const char *name, const char *candidate)
{
    int d = edit_distance(name, candidate);
    if (d < s->dist) s->dist = d, s->best = candidate;
}

static void suggest_scope(suggestion *s, const char *name, const scope *sc)
{
    for (uint32_t i = 0; i < sc->n; i++) suggest(s, name, sc->b[i].name);
}

static void report_unknown(sema_ctx *c, const suggestion *s, nc_loc loc, const char *fmt, const char *a, const char *b)
{
    char hint[128];
    if (s->best) snprintf(hint, sizeof hint, "did you mean '%s'?", s->best);
    sema_err(c, loc, s->best ? hint : NULL, fmt, a, b);
}

/* Names in scope, built-in ops and dtypes are all candidates for the hint. */
static bool looks_like_dtype(const char *name)
{
    if (!strchr("fiu", name[0]) && strncmp(name, "bf", 2) != 0) return false;
    const char *p = name + (name[0] == 'b' ? 2 : 1);
    return *p && strspn(p, "0123456789") == strlen(p);
}

static bool loc_after(nc_loc a, nc_loc b) { return a.line > b.line || (a.line == b.line && a.col > b.col); }

/* The config constant named name declared after loc where configs are being
 * defined (config_model, config_module), or NULL. */
static const ast_node *config_declared_later(const sema_ctx *c, const char *name, nc_loc loc)
{
    if (c->config_model) {
        const ast_list *h = &c->config_model->list4;
        for (uint32_t i = 0; i < h->n; i++)
            if (h->items[i]->kind == AST_CONFIG && !strcmp(h->items[i]->name, name) && loc_after(h->items[i]->loc, loc))
                return h->items[i];
    }
    if (c->config_module) {
        const ast_list *decls = &c->config_module->ast->decls;
        for (uint32_t i = 0; i < decls->n; i++) {
            const ast_node *d = decls->items[i];
            for (uint32_t k = 0; d->kind == AST_LIST && k < d->list.n; k++)
                if (!strcmp(d->list.items[k]->name, name) && loc_after(d->list.items[k]->loc, loc)) return d->list.items[k];
        }
    }
    return NULL;
}

/* Whether name was reported unknown already in this function or model:
 * its later uses would repeat the error (and any cascade) line after line.
 * Records it when not. */
static bool unknown_already(sema_ctx *c, const char *name)
{
    const scope *owner = scope_owner(c->env);
    if (!owner) return false;   /* a file's config lines: few names, each reported */
    for (int i = 0; i < c->nunknown; i++)
        if (c->unknown[i].owner == owner && strcmp(c->unknown[i].name, name) == 0) return true;
    const int cap = (int)NC_COUNT(c->unknown);
    if (c->nunknown == cap) memmove(c->unknown, c->unknown + 1, --c->nunknown * sizeof c->unknown[0]);
    c->unknown[c->nunknown].name = name;
    c->unknown[c->nunknown++].owner = owner;
    return false;
}

/* Why a name bound inside a block that has ended is gone (an if's
 * branch, a repeat's index, a block's own); NULL for no such name. */
static const char *ended_name_hint(sema_ctx *c, const char *name)
{
    for (int i = c->nended; i-- > 0;) {
        if (strcmp(c->ended[i].name, name) != 0 || c->ended[i].owner != scope_owner(c->env)) continue;
        const ast_node *why = c->ended[i].why;
        if (why && why->kind == AST_IF)
            return sema_textf(c, "'%s' is bound inside the if at line %u, which it outlives only when every branch "
                                 "(with an else) binds it: bind it in each branch, or assign %s before the if",
                              name, why->loc.line, name);
        if (why && why->kind == AST_REPEAT && why->b && strcmp(why->b->name, name) == 0)
            return sema_textf(c, "'%s' is the index of the repeat at line %u: it exists only inside the loop's body", name,
                              why->loc.line);
        return sema_textf(c, "'%s' was bound at line %d inside a block and ended with it: "
                             "assign %s before the block, and the block's assignment rebinds it",
                          name, c->ended[i].loc.line, name);
    }
    return NULL;
}

/* A repeat's name (repeat N as blocks) read as a value: what it names. */
static const char *repeat_name_hint(sema_ctx *c, const char *name)
{
    for (int i = c->nrepeats < (int)NC_COUNT(c->repeats) ? c->nrepeats : (int)NC_COUNT(c->repeats); i-- > 0;)
        if (c->repeats[i]->name && strcmp(c->repeats[i]->name, name) == 0)
            return sema_textf(c, "'repeat N as %s' names the loop's parameters (%s.0.*, %s.1.*, ...); the iteration's "
                                 "number is its index: repeat N as %s, i { ... } binds i = 0, 1, ...",
                              name, name, name, name);
    return NULL;
}

/* Names PyTorch and NumPy users reach for that netc spells otherwise: edit
 * distance finds no match for them (cat is 3 edits from concat) or a
 * wrong one. */
static const char *other_spelling_hint(const char *name)
{
    static const struct { const char *name, *hint; } spellings[] = {
        {"clamp", "clamp x to [lo, hi] with minimum(maximum(x, lo), hi)"},
        {"clip", "clip x to [lo, hi] with minimum(maximum(x, lo), hi)"},
        {"cat", "tensors are joined by concat([a, b], axis: k)"},
        {"permute", "axes are permuted by transpose(x, [0, 2, 1, 3])"},
        {"view", "reshape(x, [sizes]) gives the same elements a new shape"},
        {"bmm", "matmul (or @) multiplies batches of matrices: [..., M, K] @ [..., K, N]"},
        {"mm", "matmul (or @) multiplies matrices"},
        {"softplus", "softplus(x) is log(1.0 + exp(x)) (for large x, relu(x) + log(1.0 + exp(-abs(x))))"},
        {"stack", "stack is a concat of reshaped tensors: concat([reshape(a, [B, 1, C]), reshape(b, [B, 1, C])], axis: 1)"},
        {"unsqueeze", "a size-1 axis is added by reshape: reshape(x, [B, 1, C])"},
        {"squeeze", "a size-1 axis is dropped by reshape(x, [B, C]) or by an index, x[:, 0]"},
        {"expand", "broadcast(x, shape: [sizes]) repeats x's size-1 axes (and adds leading ones)"},
        {"flip", "nn.flip(x, axis) reverses x along axis, as torch.flip (import nn)"},
        {"argmax", "nn.argmax(x, axis) is the i32 index of the largest along axis, the first of a tie, as torch.argmax (import nn)"},
        {"interpolate", "nn.upsample2d(x, scale) repeats each pixel of a (B, H, W, C) image scale x scale times (nearest)"},
        {"upsample", "nn.upsample2d(x, scale) repeats each pixel of a (B, H, W, C) image scale x scale times (nearest)"},
        {"einsum", "write the contraction as a matmul (@) after transpose and reshape, or as a broadcast product and sum(..., axis: k)"},
        {"repeat_interleave", "repeat each row twice with broadcast and reshape: reshape(broadcast(reshape(x, [N, 1, C]), shape: [N, 2, C]), [2 * N, C])"},
    };
    for (size_t i = 0; i < NC_COUNT(spellings); i++)
        if (strcmp(spellings[i].name, name) == 0) return spellings[i].hint;
    return NULL;
}

/* A name the fn's caller binds (a model's param w read in a fn): a fn's
 * scope is its arguments and its module's configs and fns, not the call's. */
static const char *caller_name_hint(sema_ctx *c, const char *name)
{
    for (scope *s = c->caller_env; s; s = s->parent) {
        const binding *b = scope_find_local(s, name);
        if (b && b->value.kind == SV_TENSOR)
            return sema_textf(c, "'%s' is bound where the fn is called (line %u), not in the fn: a fn sees its arguments and "
                                 "its module's configs and fns; pass %s as an argument", name, b->loc.line, name);
    }
    return NULL;
}

static void unknown_name(sema_ctx *c, const char *name, nc_loc loc)
{
    if (unknown_already(c, name)) return;
    const ast_node *later = config_declared_later(c, name, loc);
    if (later) {
        sema_err(c, loc, sema_textf(c, "config constants are read in order: declare '%s' before the one that uses it", name),
                 "config '%s' is not declared yet here: it comes later, at line %u", name, later->loc.line);
        return;
    }
    if (looks_like_dtype(name)) {
        sema_err(c, loc, "the dtypes are f32, f16, bf16, i32, u8 and bool", "unknown dtype '%s'", name);
        return;
    }
    const char *hint = ended_name_hint(c, name);
    if (!hint) hint = repeat_name_hint(c, name);
    if (!hint) hint = other_spelling_hint(name);
    if (!hint) hint = caller_name_hint(c, name);
    if (hint) {
        sema_err(c, loc, hint, "unknown name '%s'", name);
        return;
    }
    suggestion s = {NULL, 3};
    for (scope *sc = c->env; sc; sc = sc->parent) suggest_scope(&s, name, sc);
    for (int op = 0; op < OP_COUNT; op++)
        if (!(nc_ops[op].flags & OPF_INTERNAL)) suggest(&s, name, nc_ops[op].name);
    for (int t = 0; t < NC_DTYPE_COUNT; t++) suggest(&s, name, dtype_name((nc_dtype)t));
    report_unknown(c, &s, loc, "unknown name '%s'%s", name, "");
}

/* ------------------------------------------------------------------ */
/* modules and imports                                                 */

static sema_module *module_load(sema_ctx *c, const char *name, nc_loc loc);

static void module_add_decls(sema_ctx *c, sema_module *m);

static sema_module *module_new(sema_ctx *c, const char *name, ast_file *ast)
{
    sema_module *m = nc_xcalloc(1, sizeof *m);
    m->name = nc_xstrdup(name);
    m->ast = ast;
    m->next = c->modules;
    c->modules = m;
    return m;
}

/* A file here that is no regular file (a FIFO, a directory) counts as one,
 * so the import reports it by name instead of hanging or falling through. */
static bool file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* The standard library: --stdlib / NETC_STDLIB, else next to an installed
 * netc (<prefix>/share/netc/stdlib), else the source tree it was built from. */
static char *stdlib_path(sema_ctx *c, const char *name)
{
    const char *dir = c->opts && c->opts->stdlib_dir ? c->opts->stdlib_dir : getenv("NETC_STDLIB");
    if (dir) return nc_xasprintf("%s/%s.net", dir, name);
    char exe[4096];   /* PATH_MAX: a longer one (readlink fills it) is not used */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0 && (size_t)n < sizeof exe - 1) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        char *path = nc_xasprintf("%s/../share/netc/stdlib/%s.net", exe, name);
        if (file_exists(path)) return path;
        free(path);
    }
#ifdef NETC_STDLIB_DIR
    return nc_xasprintf("%s/%s.net", NETC_STDLIB_DIR, name);
#else
    return nc_xasprintf("stdlib/%s.net", name);
#endif
}

static sema_module *module_load(sema_ctx *c, const char *name, nc_loc loc)
{
    for (sema_module *m = c->modules; m; m = m->next)
        if (strcmp(m->name, name) == 0) {
            if (m->state == 1) {
                sema_err(c, loc, NULL, "import cycle through module '%s'", name);
                return NULL;
            }
            return m;
        }
    /* Next to the importing file first, then the standard library. */
    char *path = NULL;   /* whole: a cut path would name another file */
    const src_file *from = src_get(c->sources, loc.file);
    if (from) {
        const char *slash = strrchr(from->path, '/');
        int dirlen = slash ? (int)(slash - from->path + 1) : 0;
        path = nc_xasprintf("%.*s%s.net", dirlen, from->path, name);
    }
    if (!path || !file_exists(path)) free(path), path = stdlib_path(c, name);
    char err[512];
    uint32_t id = src_load(c->sources, path, err, sizeof err);
    if (!id && !file_exists(path)) {
        sema_err(c, loc, "modules are looked up next to the importing file, then in the standard "
                         "library (set NETC_STDLIB to move it)", "cannot import '%s': no file %s", name, path);
        free(path);
        return NULL;
    }
    free(path);
    if (!id) {
        sema_err(c, loc, NULL, "cannot import '%s': %s", name, err);
        return NULL;
    }
    src_set_imported_at(c->sources, id, loc);   /* its diagnostics then name this import */
    int errors = c->diag->errors;
    ast_file *ast = parse_file(c->sources, id, c->diag);
    sema_module *m = module_new(c, name, ast);
    if (c->diag->errors > errors) {
        m->state = 2;
        return NULL;
    }
    m->state = 1;
    module_add_decls(c, m);
    m->state = 2;
    return m;
}

static sv eval_in_module(sema_ctx *c, sema_module *m, const ast_node *e)
{
    scope *saved = c->env;
    c->env = &m->globals;
    sv v = sema_expr(c, e);
    c->env = saved;
    return v;
}

/* A --set value in place of the file's own (file_value): of the same kind,
 * or an integer where the file has a number (H = 4 takes 7, S = 0.5 takes
 * 2). Any other kind would be used where the program expects the file's,
 * and fail there with an error that does not say --set (a dtype's cast
 * given 1), or pass unnoticed (true for a width of 4). */
static sv config_set_value(sema_ctx *c, const ast_node *d, const char *text, sv file_value)
{
    driver_set_value v;
    const char *problem = driver_set_value_parse(text, &v);
    if (problem) {
        sema_err(c, d->loc, NULL, "--set %s=%s: %s", d->name, text, problem);
        return sv_error();
    }
    sv_kind want = file_value.kind;
    if (want == SV_ERROR) return file_value;
    if (want == SV_FLOAT && v.kind == DRIVER_SET_INT) return sv_float((double)v.i);
    if (want == SV_INT && v.kind == DRIVER_SET_INT) return sv_int(v.i);
    if (want == SV_FLOAT && v.kind == DRIVER_SET_NUMBER) return sv_float(v.f);
    if (want == SV_BOOL && v.kind == DRIVER_SET_BOOL) return (sv){.kind = SV_BOOL, .i = v.i};
    bool settable = want == SV_INT || want == SV_FLOAT || want == SV_BOOL;
    sema_err(c, d->loc,
             settable ? (want == SV_BOOL ? "give true or false" : want == SV_INT ? "give a whole number" : "give a number")
                      : "--set takes numbers and bools; change this one in the file",
             "--set %s=%s: config '%s' is %s in the file", d->name, text, d->name, sv_kind_phrase(want));
    return sv_error();
}

/* The --set value given for name, or NULL. */
static const char *config_set_text(sema_ctx *c, const char *name)
{
    if (!c->opts) return NULL;
    for (int i = 0; i < c->opts->nsets; i++)
        if (strcmp(c->opts->set_names[i], name) == 0) {
            if (i < 64) c->set_used[i] = true;
            return c->opts->set_values[i];
        }
    return NULL;
}

static void define_config(sema_ctx *c, scope *s, const ast_node *d)
{
    if (scope_find_local(s, d->name)) {
        sema_err(c, d->loc, NULL, "'%s' is already defined in this scope", d->name);
        return;
    }
    scope *saved = c->env;   /* the file's value, even when --set replaces it: its kind is the one --set must give */
    c->env = s;
    sv v = sema_expr(c, d->a);
    c->env = saved;
    const char *set = config_set_text(c, d->name);
    if (set) v = config_set_value(c, d, set, v);
    if (v.kind == SV_TENSOR) {
        sema_err(c, d->a->loc, "config constants are numbers, bools, strings or dtypes",
                 "config '%s' must be known at compile time", d->name);
        v = sv_error();
    }
    scope_put(s, d->name, v, d->loc);
}

static void module_add_decls(sema_ctx *c, sema_module *m)
{
    for (uint32_t i = 0; i < m->ast->decls.n; i++) {
        const ast_node *d = m->ast->decls.items[i];
        switch (d->kind) {
        case AST_IMPORT: {
            sema_module *im = module_load(c, d->name, d->loc);
            if (im) scope_put(&m->globals, d->name, (sv){.kind = SV_MODULE, .mod = im}, d->loc);
            else scope_put(&m->globals, d->name, sv_error(), d->loc);
            break;
        }
        case AST_LIST:   /* a config line */
            c->config_module = m;
            for (uint32_t k = 0; k < d->list.n; k++) define_config(c, &m->globals, d->list.items[k]);
            c->config_module = NULL;
            break;
        case AST_FN:
            if (scope_find_local(&m->globals, d->name) || sema_builtin_exists(d->name))
                sema_err(c, d->loc, NULL, "'%s' is already defined", d->name);
            for (uint32_t k = 1; k < d->list2.n; k++)
                for (uint32_t j = 0; j < k; j++)
                    if (strcmp(d->list2.items[j]->name, d->list2.items[k]->name) == 0) {
                        sema_err(c, d->list2.items[k]->loc, "give each argument a name of its own",
                                 "'%s' has two arguments named '%s'", d->name, d->list2.items[k]->name);
                        break;
                    }
            scope_put(&m->globals, d->name, (sv){.kind = SV_FN, .decl = d, .mod = m}, d->loc);
            break;
        default:
            break;
        }
    }
}

/* ------------------------------------------------------------------ */
/* dims and types                                                       */

bool sema_as_dim(sema_ctx *c, sv v, nc_loc loc, uint32_t *dim)
{
    if (v.kind == SV_ERROR) return false;
    if (v.kind == SV_DIM) { *dim = v.dim; return true; }
    if (v.kind == SV_INT) {
        if (v.i < 0) {
            const char *hint = "no size is inferred from a -1 (PyTorch's reshape(x, [-1, n])): write it out, e.g. x.numel / n";
            sema_err(c, loc, v.i == -1 ? hint : NULL, "a dimension cannot be negative (%lld)", (long long)v.i);
            return false;
        }
        if (v.i > DIM_LIMIT) { sema_err(c, loc, NULL, "dimension %lld is too large", (long long)v.i); return false; }
        *dim = ir_dim_const(c->g, v.i);
        return true;
    }
    if (v.kind == SV_FLOAT && v.f == floor(v.f) && fabs(v.f) <= (double)DIM_LIMIT) return sema_as_dim(c, sv_int((int64_t)v.f), loc, dim);
    const char *hint = v.kind == SV_TENSOR ? "a size is known when the model is built, or a symbol of an input's shape "
                                             "(x: f32[N, 4]) bound when it runs, never a tensor's value" : NULL;
    sema_err(c, loc, hint, "expected a dimension (an integer or a size name), got %s", sv_kind_phrase(v.kind));
    return false;
}

/* "2^80", "6442450944" or "about 2^62.5": an element count for a message. */
static void count_text(double n, char *buf, size_t cap)
{
    int e;
    double m = frexp(n, &e);
    if (m == 0.5) snprintf(buf, cap, "2^%d", e - 1);
    else if (n < 9007199254740992.0) snprintf(buf, cap, "%.0f", n);
    else snprintf(buf, cap, "about 2^%.1f", log2(n));
}

/* Every tensor netc types (an input, a parameter, an op's result) holds at
 * most DIM_MAX_NUMEL elements, the runtime's limit on one buffer: a shape
 * past it would build and be refused only when it runs. A symbolic dim counts as its largest coefficient (B as 1, 4*C as 4),
 * so the bound holds at the smallest sizes the symbols can take. A dim of
 * size 0 is refused too: no op, backend or gradient handles an empty tensor. */
bool sema_check_shape(sema_ctx *c, nc_dtype dtype, uint8_t rank, const uint32_t *shape, nc_loc loc)
{
    double count = 1;
    bool symbolic = false;
    for (int i = 0; i < rank; i++) {
        const dim_expr *d = &c->g->dims[shape[i]];
        int64_t v;
        if (dim_is_const(d, &v)) {
            if (v == 0) {
                sema_err(c, loc, "every dimension of a tensor is at least 1",
                         "%s: dimension %d has size 0", sema_shape_text(c, dtype, rank, shape), i);
                return false;
            }
            count *= (double)v;
            continue;
        }
        symbolic = true;
        int64_t big = 1;
        for (int k = 0; k < d->nterms; k++) {
            int64_t a = d->term[k].coeff < 0 ? -d->term[k].coeff : d->term[k].coeff;
            if (a > big) big = a;
        }
        count *= (double)big;
    }
    if (count <= (double)DIM_MAX_NUMEL) return true;
    char n[48];
    count_text(count, n, sizeof n);
    sema_err(c, loc, sema_textf(c, "the shape is %s; the runtime holds no tensor past 2^%d elements", sema_shape_text(c, dtype, rank, shape),
                                __builtin_ctzll((unsigned long long)DIM_MAX_NUMEL)),
             "tensor of %s%s elements: at most 2^%d", symbolic ? "at least " : "", n, __builtin_ctzll((unsigned long long)DIM_MAX_NUMEL));
    return false;
}

/* Resolve a name inside a type's dims: bound names evaluate; unbound ones
 * become new symbols (model signature) or pattern variables (fn args). */
typedef enum { DIMS_MODEL, DIMS_PATTERN, DIMS_PARAM, DIMS_OUTPUT } dims_mode;

static bool symbolic_dim(sema_ctx *c, const char *name, nc_loc loc, uint32_t *dim)
{
    if (c->opts)
        for (int i = 0; i < c->opts->ndims; i++)
            if (strcmp(c->opts->dim_names[i], name) == 0) {
                if (i < 64) c->dim_used[i] = true;
                *dim = ir_dim_const(c->g, c->opts->dim_values[i]);
                return true;
            }
    int s = ir_sym_add(c->g, name);
    if (s < 0) {
        sema_err(c, loc, NULL, "too many symbolic dimensions (the limit is %d)", NC_MAX_SYMS);
        return false;
    }
    dim_expr d = dim_sym(s);
    *dim = ir_dim_intern(c->g, &d);
    return true;
}

/* The first name in a dim expression (2 * B) that nothing binds, or NULL. */
static const ast_node *unbound_name(sema_ctx *c, const ast_node *e)
{
    if (!e) return NULL;
    if (e->kind == AST_NAME) return lookup(c, e->name) ? NULL : e;
    if (e->kind != AST_BINARY && e->kind != AST_UNARY) return NULL;
    const ast_node *n = unbound_name(c, e->a);
    return n ? n : e->kind == AST_BINARY ? unbound_name(c, e->b) : NULL;
}

/* The dims of a type written in a model signature or a param declaration. */
static bool eval_type_dims(sema_ctx *c, const ast_node *type, dims_mode mode, uint8_t *rank, uint32_t *shape)
{
    if (type->list.n > NC_MAX_RANK) {
        sema_err(c, type->loc, NULL, "rank %u is more than the supported %d", type->list.n, NC_MAX_RANK);
        return false;
    }
    bool ok = true;
    for (uint32_t i = 0; i < type->list.n; i++) {
        const ast_node *e = type->list.items[i];
        if (e->kind == AST_WILDCARD || e->kind == AST_ELLIPSIS) {
            static const char *const subject[] = {[DIMS_MODEL] = "model input", [DIMS_PARAM] = "parameter",
                                                  [DIMS_OUTPUT] = "model output's type", [DIMS_PATTERN] = "pattern"};
            sema_err(c, e->loc,
                     mode == DIMS_OUTPUT ? "write every dim, or leave the type out: -> (y) takes the value's"
                                         : "'_' and '...' match dims in function arguments only",
                     "a %s needs every dimension spelled out", subject[mode]);
            ok = false;
            continue;
        }
        const ast_node *u = mode == DIMS_MODEL && e->kind != AST_NAME ? unbound_name(c, e) : NULL;
        if (u) {   /* f32[2 * B, 4]: B has no size yet to compute with */
            char *hint = nc_xasprintf("give '%s' an axis of its own in an input, e.g. f32[%s, 4], then reshape or slice",
                                      u->name, u->name);
            sema_err(c, u->loc, hint, "symbolic dimension '%s' must first appear alone as an axis", u->name);
            free(hint);
            ok = false;
            continue;
        }
        if (e->kind == AST_NAME && !lookup(c, e->name)) {
            if (mode == DIMS_MODEL) {
                uint32_t d;
                if (!symbolic_dim(c, e->name, e->loc, &d)) return false;
                sema_bind(c, e->name, (sv){.kind = SV_DIM, .dim = d}, e->loc);
            } else {
                unknown_name(c, e->name, e->loc);
                ok = false;
                continue;
            }
        }
        if (!sema_as_dim(c, sema_expr(c, e), e->loc, &shape[i])) { ok = false; continue; }
        int64_t v;
        if (mode != DIMS_PATTERN && dim_is_const(&c->g->dims[shape[i]], &v) && v == 0) {
            sema_err(c, e->loc, "every dimension of a tensor is at least 1", "a dimension of size 0");
            ok = false;
        }
    }
    *rank = (uint8_t)type->list.n;
    return ok;
}

/* "'conv2d' takes x: [B, H, W, C]": the axes' names say what each axis is
 * (channels last), which a rank alone does not. Empty when an axis is an
 * expression. */
static void pattern_hint(const sema_ctx *c, const ast_node *type, const char *argname, char *out, size_t cap)
{
    out[0] = 0;
    if (!argname || !c->fn_decl) return;
    size_t o = (size_t)snprintf(out, cap, "'%s' takes %s: %s[", c->fn_decl->name, argname,
                                type->has_dtype ? dtype_name(type->dtype) : "");
    for (uint32_t i = 0; i < type->list.n && o < cap; i++) {
        const ast_node *e = type->list.items[i];
        const char *sep = i ? ", " : "";
        if (e->kind == AST_NAME) o += (size_t)snprintf(out + o, cap - o, "%s%s", sep, e->name);
        else if (e->kind == AST_INT) o += (size_t)snprintf(out + o, cap - o, "%s%lld", sep, (long long)e->ival);
        else if (e->kind == AST_WILDCARD || e->kind == AST_ELLIPSIS)
            o += (size_t)snprintf(out + o, cap - o, "%s%s", sep, e->kind == AST_WILDCARD ? "_" : "...");
        else { out[0] = 0; return; }
    }
    if (o + 1 < cap) snprintf(out + o, cap - o, "]");
    else out[0] = 0;
}

/* Match an fn argument's tensor against a pattern like f32[..., In]; binds
 * unbound names in the current (fn) scope. argname NULL: the fn's declared
 * `-> type`, checked against the value it returns. */
static bool match_pattern(sema_ctx *c, const ast_node *type, const char *argname, sv v, nc_loc argloc)
{
    const ir_node *n = &c->g->nodes[v.t];
    char subject[96];
    if (argname) snprintf(subject, sizeof subject, "argument '%s'", argname);
    else snprintf(subject, sizeof subject, "the return value");
    if (type->has_dtype && n->dtype != type->dtype) {
        char hint[128];
        snprintf(hint, sizeof hint, "insert %s(...) around the %s", dtype_name(type->dtype),
                 argname ? "argument" : "returned value");
        sema_err(c, argloc, hint, "%s must be %s, got %s", subject, dtype_name(type->dtype), sema_node_text(c, v.t));
        return false;
    }
    if (!type->ival) return true;                 /* no brackets: any shape */
    const ast_list *pat = &type->list;
    int ell = -1;
    for (uint32_t i = 0; i < pat->n; i++)
        if (pat->items[i]->kind == AST_ELLIPSIS) {
            if (ell >= 0) { sema_err(c, pat->items[i]->loc, NULL, "only one '...' per shape"); return false; }
            ell = (int)i;
        }
    int fixed = (int)pat->n - (ell >= 0);
    if (ell < 0 ? n->rank != fixed : n->rank < fixed) {
        char hint[256];
        pattern_hint(c, type, argname, hint, sizeof hint);
        sema_err(c, argloc, hint[0] ? hint : NULL, "%s must have rank %s%d, got %s", subject,
                 ell >= 0 ? "at least " : "", fixed, sema_node_text(c, v.t));
        return false;
    }
    for (uint32_t i = 0; i < pat->n; i++) {
        const ast_node *e = pat->items[i];
        if (e->kind == AST_ELLIPSIS || e->kind == AST_WILDCARD) continue;
        int axis = ell >= 0 && (int)i > ell ? n->rank - ((int)pat->n - (int)i) : (int)i;
        uint32_t actual = n->shape[axis];
        if (e->kind == AST_NAME && !lookup(c, e->name)) {
            scope_put(c->env, e->name, (sv){.kind = SV_DIM, .dim = actual}, e->loc);
            continue;
        }
        uint32_t want;
        if (!sema_as_dim(c, sema_expr(c, e), e->loc, &want)) return false;
        if (want != actual) {
            sema_err(c, argloc, NULL, "%s: axis %d must be %s, got %s (%s is %s)", subject, axis, sema_dim_text(c, want),
                     sema_dim_text(c, actual), argname ? "the argument" : "it", sema_node_text(c, v.t));
            return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* expressions                                                         */

/* Reading a parameter inside a precision block reads its low-precision copy. */
static sv read_name(sema_ctx *c, binding *b, nc_loc loc)
{
    b->used = true;
    sv v = b->value;
    if (v.kind == SV_TENSOR && v.is_param && c->autocast && dtype_is_float(v.dtype) && v.dtype != c->autocast_dtype)
        return sema_cast(c, v, c->autocast_dtype, loc, true);
    return v;
}

static sv call_fn(sema_ctx *c, sv fn, const ast_node *call);

/* f32(i + 1), i32(2.7): a number converted as a tensor's elements would be
 * (rounded to the float dtype; truncated toward zero and saturated to the
 * integer one, NaN to 0; bool: not zero), and still a number. */
static sv cast_number(sv x, nc_dtype to)
{
    double v = x.kind == SV_INT ? (double)x.i : x.f;
    if (dtype_is_float(to)) return sv_float((double)nc_round_to(to, (float)v));
    if (to == NC_BOOL) return (sv){.kind = SV_BOOL, .i = v != 0};
    double lo = to == NC_U8 ? 0 : (double)INT32_MIN, hi = to == NC_U8 ? 255 : (double)INT32_MAX;
    if (x.kind == SV_INT) return sv_int(x.i < lo ? (int64_t)lo : x.i > hi ? (int64_t)hi : x.i);
    return sv_int(v != v ? 0 : v <= lo ? (int64_t)lo : v >= hi ? (int64_t)hi : (int64_t)trunc(v));
}

static sv eval_call(sema_ctx *c, const ast_node *e)
{
    const ast_node *callee = e->a;
    if (callee->kind == AST_DTYPE) {                       /* bf16(x): explicit cast */
        if (e->list.n != 1 || e->list.items[0]->kind == AST_KWARG) {
            sema_err(c, e->loc, NULL, "a cast takes one tensor: %s(x)", dtype_name(callee->dtype));
            return sv_error();
        }
        sv x = sema_expr(c, e->list.items[0]);
        if (x.kind == SV_ERROR) return x;
        if (x.kind == SV_DIM && dtype_is_float(callee->dtype))   /* f32(T): the bound size, as a scalar */
            return sema_dim_tensor(c, x.dim, callee->dtype, e->loc);
        if (x.kind == SV_INT || x.kind == SV_FLOAT) return cast_number(x, callee->dtype);
        if (x.kind != SV_TENSOR) {
            sema_err(c, e->loc, NULL, "%s(...) casts a tensor or a number, got %s", dtype_name(callee->dtype), sv_kind_phrase(x.kind));
            return sv_error();
        }
        return sema_cast(c, x, callee->dtype, e->loc, false);
    }
    if (callee->kind == AST_NAME) {
        binding *b = lookup(c, callee->name);
        if (b) {
            b->used = true;
            if (b->value.kind == SV_FN) return call_fn(c, b->value, e);
            if (b->value.kind == SV_ERROR) return sv_error();
            /* a dtype held in a config: cast(x, DT) is the way to use it */
            char *hint = nc_xasprintf("to convert to the dtype %s holds, write cast(x, %s)", callee->name, callee->name);
            sema_err(c, callee->loc, b->value.kind == SV_DTYPE ? hint : NULL, "'%s' is %s, not a function", callee->name,
                     sv_kind_phrase(b->value.kind));
            free(hint);
            return sv_error();
        }
        if (sema_builtin_exists(callee->name)) return sema_call_builtin(c, callee->name, e);
        unknown_name(c, callee->name, callee->loc);
        return sv_error();
    }
    sv f = sema_expr(c, callee);
    if (f.kind == SV_FN) return call_fn(c, f, e);
    if (f.kind != SV_ERROR) sema_err(c, callee->loc, NULL, "%s cannot be called", sv_kind_phrase(f.kind));
    return sv_error();
}

/* x.numel, the product of x's sizes: the one size a pattern's `...` cannot
 * name, so that fn flatten(x: [B, ...]) can say x.numel / B. */
static sv tensor_numel(sema_ctx *c, sv x, nc_loc loc)
{
    const ir_node *n = &c->g->nodes[x.t];
    dim_expr r = dim_const(1);
    for (int i = 0; i < n->rank; i++) {
        dim_expr p;
        dim_status s = dim_mul(&r, &c->g->dims[n->shape[i]], &p);
        if (s != DIM_OK) {
            sema_err(c, loc, NULL, "'.numel': %s", dim_status_message(s));
            return sv_error();
        }
        r = p;
    }
    int64_t k;
    if (dim_is_const(&r, &k)) return sv_int(k);
    return (sv){.kind = SV_DIM, .dim = ir_dim_intern(c->g, &r)};
}

/* What a PyTorch user meant by x.NAME: x.T, x.sum() and the like are
 * functions of x here; x.shape is the argument's pattern. */
static const char *member_hint(const char *name)
{
    static const char *const calls[] = {"sum", "mean", "max", "reshape", "transpose", "softmax", "exp", "log", "abs",
                                        "sqrt", "relu", "tanh", "sigmoid", "float", "view", "permute"};
    if (!strcmp(name, "T") || !strcmp(name, "mT")) return "transpose(x) swaps the last two axes; transpose(x, [1, 0]) takes them in any order";
    for (size_t i = 0; i < NC_COUNT(calls); i++)
        if (!strcmp(name, calls[i])) return "ops are functions of the tensor, not its methods: sum(x, axis: 1), reshape(x, [B, 4])";
    return "a fn binds sizes by its argument's pattern: fn f(x: [B, H, W, C])";
}

static sv eval_member(sema_ctx *c, const ast_node *e)
{
    sv obj = sema_expr(c, e->a);
    if (obj.kind == SV_ERROR) return obj;
    if (obj.kind == SV_TENSOR) {   /* x.dtype: so a fn can make tensors of its argument's dtype */
        if (strcmp(e->name, "dtype") == 0) return (sv){.kind = SV_DTYPE, .dtype = obj.dtype};
        if (strcmp(e->name, "numel") == 0) return tensor_numel(c, obj, e->loc);
        sema_err(c, e->loc, member_hint(e->name), "'.%s': a tensor's members are .dtype and .numel", e->name);
        return sv_error();
    }
    if (obj.kind != SV_MODULE) {
        sema_err(c, e->loc, NULL, "'.%s': %s has no members", e->name, sv_kind_phrase(obj.kind));
        return sv_error();
    }
    binding *b = scope_find_local(&obj.mod->globals, e->name);
    if (!b) {
        suggestion sg = {NULL, 3};
        suggest_scope(&sg, e->name, &obj.mod->globals);
        report_unknown(c, &sg, e->loc, "module '%s' has no '%s'", obj.mod->name, e->name);
        return sv_error();
    }
    return b->value;
}

static sv eval_list(sema_ctx *c, const ast_node *e)
{
    sv v = {.kind = SV_LIST, .n = e->list.n};
    v.items = e->list.n ? ast_alloc(c->arena, e->list.n * sizeof(sv)) : NULL;
    for (uint32_t i = 0; i < e->list.n; i++) {
        v.items[i] = sema_expr(c, e->list.items[i]);
        if (v.items[i].kind == SV_ERROR) return sv_error();
    }
    return v;
}

/* An operand of and, or, not: true or false when the model is built. */
static bool logic_operand(sema_ctx *c, sv v, const ast_node *e, const ast_node *operand)
{
    if (v.kind == SV_BOOL) return true;
    if (v.kind == SV_ERROR) return false;
    if (v.kind == SV_TENSOR)
        sema_err(c, operand->loc, "on bool tensors: a and b is where(a, b, false), a or b is where(a, true, b), not a is a == false",
                 "'%s' combines true and false known when the model is built, not tensors", ast_op_text(e->op));
    else
        sema_err(c, operand->loc, NULL, "'%s' takes true or false, got %s", ast_op_text(e->op), sv_kind_phrase(v.kind));
    return false;
}

/* a and b, a or b, not a: the right side is read only when the left does
 * not decide, so it may rely on the left (n > 0 and H // n >= 2). */
static sv eval_logic(sema_ctx *c, const ast_node *e)
{
    bool defer = c->defer_sizes;   /* a require keeps a conjunction of comparisons, not their or nor their not */
    const char *blocked = c->defer_blocked;
    c->defer_sizes = defer && e->op == AST_OP_AND;
    if (defer && e->op != AST_OP_AND) c->defer_blocked = e->op == AST_OP_OR ? "or" : "not";
    sv a = sema_expr(c, e->a), b = a;
    bool ok = logic_operand(c, a, e, e->a);
    if (ok && e->op == AST_OP_NOT) b = (sv){.kind = SV_BOOL, .i = !a.i};
    else if (ok && a.i != (e->op == AST_OP_OR)) {
        b = sema_expr(c, e->b);
        ok = logic_operand(c, b, e, e->b);
    }
    c->defer_sizes = defer;
    c->defer_blocked = blocked;
    return ok ? b : sv_error();
}

sv sema_expr(sema_ctx *c, const ast_node *e)
{
    switch (e->kind) {
    case AST_INT: return sv_int(e->ival);
    case AST_FLOAT: return sv_float(e->fval);
    case AST_BOOL: return (sv){.kind = SV_BOOL, .i = e->ival};
    case AST_STRING: return (sv){.kind = SV_STRING, .s = e->name};
    case AST_DTYPE: return (sv){.kind = SV_DTYPE, .dtype = e->dtype};
    case AST_NAME: {
        binding *b = lookup(c, e->name);
        if (b) return read_name(c, b, e->loc);
        if (strcmp(e->name, "inf") == 0) return sv_float(INFINITY);
        if (strcmp(e->name, "nan") == 0) return sv_float(NAN);
        if (strcmp(e->name, "pi") == 0) return sv_float(3.14159265358979323846);
        if (strcmp(e->name, "training") == 0) {   /* the build's own: a training step, or the forward pass */
            c->read_training = true;
            c->body_read_training |= !c->fn_decl;
            return (sv){.kind = SV_BOOL, .i = c->training};
        }
        if (sema_builtin_exists(e->name)) {
            char hint[160];   /* passed to a fn (twice(relu, x)): only fns are values */
            snprintf(hint, sizeof hint, "built-in ops are not values; to pass it, wrap it in a fn: fn %s_fn(x) { return %s(x) }",
                     e->name, e->name);
            sema_err(c, e->loc, hint, "'%s' is a built-in function; call it with (...)", e->name);
            return sv_error();
        }
        unknown_name(c, e->name, e->loc);
        return sv_error();
    }
    case AST_MEMBER: return eval_member(c, e);
    case AST_CALL: return eval_call(c, e);
    case AST_LIST: return eval_list(c, e);
    case AST_INDEX: return sema_index(c, e);
    case AST_UNARY:
        if (e->op == AST_OP_NOT) return eval_logic(c, e);
        return sema_negate(c, sema_expr(c, e->a), e->loc);
    case AST_BINARY: {
        if (e->op == AST_OP_AND || e->op == AST_OP_OR) return eval_logic(c, e);
        sv a = sema_expr(c, e->a);
        sv b = sema_expr(c, e->b);
        return sema_binary(c, e->op, a, b, e->loc, (nc_loc[2]){e->a->loc, e->b->loc});
    }
    case AST_KWARG:
        sema_err(c, e->loc, NULL, "keyword argument '%s:' outside a call", e->name);
        return sv_error();
    case AST_WILDCARD:
    case AST_ELLIPSIS:
        sema_err(c, e->loc, NULL, "'%s' only matches dims in a function argument's type", ast_kind_name(e->kind));
        return sv_error();
    default:
        sema_err(c, e->loc, NULL, "expected an expression, found a %s", ast_kind_name(e->kind));
        return sv_error();
    }
}

/* ------------------------------------------------------------------ */
/* statements                                                          */

static void exec_stmts(sema_ctx *c, const ast_list *stmts);
static bool stmt_budget(sema_ctx *c, const ast_node *s);

/* Names scopes for parameters: "fc1", then "fc1_1" if taken. The path
 * grows without bound (a name is never cut: two cut names could collide);
 * push returns the length that pop cuts it back to. */
static size_t push_prefix(sema_ctx *c, const char *name)
{
    size_t len = strlen(c->prefix), need = len + 1 + strlen(name) + 1;
    if (need > c->prefix_cap) {
        c->prefix_cap = 2 * need;
        c->prefix = nc_xrealloc(c->prefix, c->prefix_cap);
    }
    snprintf(c->prefix + len, c->prefix_cap - len, "%s%s", len ? "." : "", name);
    return len;
}

static void pop_prefix(sema_ctx *c, size_t len) { c->prefix[len] = 0; }

/* name under the current prefix, on the heap. */
static char *prefixed_name(const sema_ctx *c, const char *name)
{
    return nc_xasprintf("%s%s%s", c->prefix, c->prefix[0] ? "." : "", name);
}

static bool name_taken(sema_ctx *c, const char *full)
{
    for (uint32_t i = 0; i < c->g->nparams; i++) {
        const char *p = c->g->params[i].decl.name;
        size_t n = strlen(full);
        if (strncmp(p, full, n) == 0 && (p[n] == '.' || p[n] == 0)) return true;
    }
    return false;
}

/* A call scope gets a name not used by any parameter yet (heap). */
static char *unique_scope_name(sema_ctx *c, const char *base)
{
    char *out = nc_xstrdup(base);
    for (int k = 1;; k++) {
        char *full = prefixed_name(c, out);
        bool taken = name_taken(c, full);
        free(full);
        if (!taken || k > 100000) return out;
        free(out);
        out = nc_xasprintf("%s_%d", base, k);
    }
}

/* The first symbol a non-constant dim is made of, to name in a --dim hint. */
static const char *dim_first_sym(const ir_graph *g, uint32_t d)
{
    for (int t = 0; t < g->dims[d].nterms; t++)
        if (g->dims[d].term[t].nfactors) return g->sym_names[g->dims[d].term[t].sym[0]];
    return "B";
}

/* param NAME: TYPE = INIT, or buffer NAME: ...: a tensor the model keeps
 * between runs. A parameter is trained; a buffer (running statistics) is
 * assigned by the model's own `update`, in the training step only. */
/* A parameter's or buffer's declared type into p: a float dtype, and
 * dims known when the model is built, within the tensor limits. */
static bool param_type(sema_ctx *c, const ast_node *s, const char *what, ir_param *p)
{
    const bool buffer = p->role == IR_ROLE_BUFFER;
    const ast_node *type = s->a;
    if (type->kind != AST_TYPE || !type->has_dtype) {
        sema_err(c, type->loc, "write it like f32[784, 1024]", "a %s needs a dtype and a shape", what);
        return false;
    }
    if (!dtype_is_float(type->dtype)) {
        sema_err(c, type->loc,
                 buffer ? "a buffer holds statistics of floats: declare it f32 (or f16, bf16)"
                        : "parameters are trained, so they hold floats: declare it f32 (or f16, bf16)",
                 "%ss are floating point, got %s", what, dtype_name(type->dtype));
        return false;
    }
    if (!eval_type_dims(c, type, DIMS_PARAM, &p->decl.rank, p->decl.shape)) return false;
    for (int i = 0; i < p->decl.rank; i++) {
        int64_t v;
        if (!dim_is_const(&c->g->dims[p->decl.shape[i]], &v)) {
            /* the input's dim it came from is bound at build time, or not at all */
            const char *sym = dim_first_sym(c->g, p->decl.shape[i]);
            char *hint = nc_xasprintf("parameter and buffer shapes are fixed when the model is built: bind %s with --dim %s=N", sym, sym);
            sema_err(c, type->list.items[i]->loc, hint,
                     "%s '%s' has a symbolic dimension %s", what, s->name, sema_dim_text(c, p->decl.shape[i]));
            free(hint);
            return false;
        }
    }
    if (!sema_check_shape(c, type->dtype, p->decl.rank, p->decl.shape, type->loc)) return false;
    p->decl.dtype = type->dtype;
    return true;
}

/* p into the graph under its full name (the calls' prefix: mlp_1.w), and
 * its param node bound to the name in scope. */
static void add_param(sema_ctx *c, const ast_node *s, const char *what, ir_param *p)
{
    char *full = prefixed_name(c, s->name);
    for (uint32_t i = 0; i < c->g->nparams; i++)
        if (strcmp(c->g->params[i].decl.name, full) == 0) {
            sema_err(c, s->loc, "each call of a function gets its own parameters; name the calls differently",
                     "%s '%s' is defined twice", what, full);
            free(full);
            return;
        }
    p->decl.name = full;
    uint32_t idx = ir_param_add(c->g, p);
    free(full);
    p->decl.name = c->g->params[idx].decl.name;
    ir_node n = sema_proto(c, OP_PARAM, s->loc);
    n.dtype = p->decl.dtype;
    n.rank = p->decl.rank;
    memcpy(n.shape, p->decl.shape, sizeof n.shape);
    n.attr.index = idx;
    sv v = sv_tensor(c, ir_add(c->g, &n, NULL, 0));
    v.is_param = true;
    scope_put(c->env, s->name, v, s->loc);
}

static void exec_param(sema_ctx *c, const ast_node *s)
{
    const bool buffer = s->kind == AST_BUFFER;
    const char *what = buffer ? "buffer" : "parameter";
    ir_param p = {.role = buffer ? IR_ROLE_BUFFER : IR_ROLE_WEIGHT};
    if (scope_find_local(c->env, s->name)) {
        sema_err(c, s->loc, NULL, "'%s' is already defined in this scope", s->name);
        return;
    }
    /* a parameter declared wrong is still declared: its uses say nothing more
     * (no "unknown name" after "parameters are floating point") */
    if (!param_type(c, s, what, &p)) {
        scope_put(c->env, s->name, sv_error(), s->loc);
        return;
    }
    p.decl.loc = s->loc;
    p.init = p.decl.rank >= 2 && !buffer ? IR_INIT_XAVIER_UNIFORM : IR_INIT_ZEROS;
    p.init_a = p.init == IR_INIT_XAVIER_UNIFORM ? 1.0 : 0.0;     /* as if written: xavier(1), zeros() */
    if (s->b && !sema_initializer(c, s->b, &p)) {
        scope_put(c->env, s->name, sv_error(), s->loc);
        return;
    }
    add_param(c, s, what, &p);
}

/* The buffer a name is bound to, as its parameter index; false, said, when it is none. */
static bool update_target(sema_ctx *c, const ast_node *s, uint32_t *index)
{
    binding *b = lookup(c, s->name);
    if (!b) {
        unknown_name(c, s->name, s->loc);
        return false;
    }
    b->used = true;
    if (b->value.kind == SV_ERROR) return false;
    const ir_node *n = b->value.kind == SV_TENSOR ? &c->g->nodes[b->value.t] : NULL;
    if (n && n->op == OP_PARAM && c->g->params[n->attr.index].role == IR_ROLE_BUFFER) {
        *index = n->attr.index;
        return true;
    }
    char *hint;
    if (n && n->op == OP_PARAM)
        hint = nc_xasprintf("a parameter is trained by the optimizer; a value the model keeps itself is a buffer: "
                            "buffer %s: f32[...] = zeros", s->name);
    else hint = nc_xasprintf("update assigns a buffer declared in this fn or model: buffer %s: f32[...] = zeros, "
                             "then update %s = ...; to bind a name, write %s = ...", s->name, s->name, s->name);
    sema_err(c, s->loc, hint, "'%s' is not a buffer", s->name);
    free(hint);
    return false;
}

/* update NAME = expr: the buffer's value after a training step. Checked in
 * every build; only a training step keeps the assignment (the forward pass
 * reads the buffer and changes nothing). */
static void exec_update(sema_ctx *c, const ast_node *s)
{
    uint32_t index;
    bool target = update_target(c, s, &index);
    sv v = sema_expr(c, s->a);
    if (!target || v.kind == SV_ERROR) return;
    const ir_param *p = &c->g->params[index];
    if (v.kind == SV_INT || v.kind == SV_FLOAT)   /* weakly typed: the buffer's dtype, every element */
        v = sema_number_tensor(c, v, p->decl.dtype, p->decl.rank, p->decl.shape, s->a->loc);
    if (v.kind == SV_ERROR) return;
    if (v.kind != SV_TENSOR || !dtype_is_float(v.dtype)) {
        sema_err(c, s->a->loc, "the new value is a float tensor of the buffer's shape",
                 "update %s: expected a float tensor, got %s", s->name,
                 v.kind == SV_TENSOR ? dtype_name(v.dtype) : sv_kind_phrase(v.kind));
        return;
    }
    const ir_node *n = &c->g->nodes[v.t];
    bool same = n->rank == p->decl.rank;
    for (int i = 0; same && i < n->rank; i++) same = dim_equal(&c->g->dims[n->shape[i]], &c->g->dims[p->decl.shape[i]]);
    if (!same) {
        const char *got = sema_node_text(c, v.t), *want = sema_shape_text(c, p->decl.dtype, p->decl.rank, p->decl.shape);
        sema_err(c, s->a->loc, "a buffer keeps its shape: reduce the value to it (mean(x, axis: 0) for a batch's statistics)",
                 "update %s: the value is %s, the buffer %s", s->name, got, want);
        return;
    }
    for (uint32_t i = 0; i < c->g->nupdates; i++)
        if (c->g->updates[i].param == index) {
            sema_err(c, s->loc, "a training step assigns a buffer once: combine the two values into one update",
                     "buffer '%s' is updated twice (first at line %u)", p->decl.name, c->g->nodes[c->g->updates[i].value].loc.line);
            return;
        }
    if (v.dtype != p->decl.dtype) v = sema_cast(c, v, p->decl.dtype, s->a->loc, true);
    if (v.kind == SV_TENSOR) ir_update_add(c->g, index, v.t);   /* a forward build drops them (build_one) */
}

static void exec_return(sema_ctx *c, const ast_node *s)
{
    c->nret = (int)s->list.n;
    c->ret = ast_alloc(c->arena, s->list.n * sizeof(sv));
    for (uint32_t i = 0; i < s->list.n; i++) c->ret[i] = sema_expr(c, s->list.items[i]);
    c->returned = true;
}

static uint32_t begin_region(sema_ctx *c, const ast_node *s)
{
    uint32_t saved = c->region;
    if (s->attrs & AST_ATTR_CHECKPOINT) c->region = ++c->next_region;
    return saved;
}

static void exec_block(sema_ctx *c, const ast_node *s)
{
    scope sc;
    bool saved_ac = c->autocast;
    nc_dtype saved_dt = c->autocast_dtype;
    if (s->has_dtype) {
        if (!dtype_is_float(s->dtype)) {
            sema_err(c, s->loc, NULL, "a precision block needs a floating-point dtype, got %s", dtype_name(s->dtype));
            return;
        }
        c->autocast = s->dtype != NC_F32;
        c->autocast_dtype = s->dtype;
    }
    uint32_t saved_region = begin_region(c, s);
    scope_enter(c, &sc, false);
    exec_stmts(c, &s->list);
    scope_leave(c, &sc);
    c->region = saved_region;
    c->autocast = saved_ac;
    c->autocast_dtype = saved_dt;
}

static bool bound_in_fn(sema_ctx *c, const char *name);

/* repeat N as name, i: i is the iteration's number, a compile-time int. */
static bool repeat_index_ok(sema_ctx *c, const ast_node *s)
{
    if (!s->b || !bound_in_fn(c, s->b->name)) return true;
    binding *b = lookup(c, s->b->name);
    char *hint = nc_xasprintf("'%s' is bound at line %u: give the index a name of its own", s->b->name, b->loc.line);
    sema_err(c, s->b->loc, hint, "the repeat's index '%s' would hide a name already bound here", s->b->name);
    free(hint);
    return false;
}

/* The names that stmts (and the blocks in them) rebind from outside: each
 * becomes an error. */
static void poison_rebound(sema_ctx *c, const ast_list *stmts)
{
    for (uint32_t i = 0; i < stmts->n; i++) {
        const ast_node *s = stmts->items[i];
        if (s->kind == AST_LET && s->name && bound_in_fn(c, s->name)) sema_bind(c, s->name, sv_error(), s->loc);
        for (uint32_t k = 0; s->kind == AST_LET && !s->name && k < s->list.n; k++)
            if (bound_in_fn(c, s->list.items[k]->name)) sema_bind(c, s->list.items[k]->name, sv_error(), s->list.items[k]->loc);
        for (const ast_node *b = s; b && (b->kind == AST_BLOCK || b->kind == AST_REPEAT || b->kind == AST_IF);
             b = b->kind == AST_IF ? b->c : NULL)
            poison_rebound(c, &b->list);
    }
}

/* A repeat's count: a non-negative int up to SEMA_MAX_REPEAT, or an error said. */
static bool repeat_count(sema_ctx *c, const ast_node *s, int64_t *count)
{
    sv n = sema_expr(c, s->a);
    if (n.kind == SV_ERROR) return false;
    int64_t known;   /* a size a fn's pattern bound to a number (T of x: [B, T, I]) counts as one */
    if (n.kind == SV_DIM && dim_is_const(&c->g->dims[n.dim], &known)) n = sv_int(known);
    if (n.kind == SV_DIM)
        sema_err(c, s->a->loc, "unrolling needs the count when the model is built: give the axis a number, or bind it with --dim",
                 "repeat's count %s is a symbolic size", sema_dim_text(c, n.dim));
    else if (n.kind == SV_INT && n.i < 0)
        sema_err(c, s->a->loc, NULL, "repeat count %lld is negative", (long long)n.i);
    else if (n.kind != SV_INT)
        sema_err(c, s->a->loc, "use a number or a config constant", "repeat needs a non-negative integer count, got %s",
                 sv_kind_phrase(n.kind));
    else if (n.i > SEMA_MAX_REPEAT)
        sema_err(c, s->a->loc, NULL, "repeat count %lld is more than the supported %d", (long long)n.i, SEMA_MAX_REPEAT);
    else
        return *count = n.i, true;
    return false;
}

static void exec_repeat(sema_ctx *c, const ast_node *s)
{
    sv n = {.kind = SV_INT};
    if (!repeat_count(c, s, &n.i)) {
        /* no iteration ran: what the body would have rebound says nothing more after the loop
           (the state it would have grown, sliced or returned) */
        poison_rebound(c, &s->list);
        return;
    }
    if (!repeat_index_ok(c, s)) return;
    char *base = unique_scope_name(c, s->name ? s->name : "layers");
    if (c->nrepeats < (int)NC_COUNT(c->repeats)) c->repeats[c->nrepeats] = s;
    c->nrepeats++;
    for (int64_t i = 0; i < n.i && !c->returned; i++) {
        if (!stmt_budget(c, s)) break;   /* an iteration counts, also of an empty body */
        char *name = nc_xasprintf("%s.%lld", base, (long long)i);
        size_t saved = push_prefix(c, name);
        free(name);
        uint32_t saved_region = begin_region(c, s);
        scope sc;
        scope_enter(c, &sc, false);
        if (s->b) {
            scope_put(&sc, s->b->name, sv_int(i), s->b->loc);
            sc.b[sc.n - 1].fixed = sc.b[sc.n - 1].used = true;
        }
        int errors = c->diag->errors;
        exec_stmts(c, &s->list);
        scope_end(c, &sc, s);
        c->region = saved_region;
        pop_prefix(c, saved);
        if (c->diag->errors > errors) break;     /* the same error in every iteration helps nobody */
    }
    free(base);
    c->nrepeats--;
}

/* ------------------------------------------------------------------ */
/* if / else: one branch is chosen when the model is built               */

static bool if_binds_always(const ast_node *s, const char *name);

/* A statement that binds its name: name = ..., param name, buffer name. */
static bool declares_name(const ast_node *s)
{
    return (s->kind == AST_LET || s->kind == AST_PARAM || s->kind == AST_BUFFER) && s->name;
}

/* Whether running stmts surely binds name: a binding or parameter of the
 * list itself, or one that every branch of an if in it binds. */
static bool stmts_bind(const ast_list *stmts, const char *name)
{
    for (uint32_t i = 0; i < stmts->n; i++) {
        const ast_node *s = stmts->items[i];
        if (declares_name(s) && strcmp(s->name, name) == 0) return true;
        for (uint32_t k = 0; s->kind == AST_LET && !s->name && k < s->list.n; k++)
            if (strcmp(s->list.items[k]->name, name) == 0) return true;
        if (s->kind == AST_IF && if_binds_always(s, name)) return true;
    }
    return false;
}

/* Whether every branch of the if (so it has an else) binds name. */
static bool if_binds_always(const ast_node *s, const char *name)
{
    for (; s; s = s->c) {
        if (!stmts_bind(&s->list, name)) return false;
        if (!s->c) return false;
        if (s->c->kind == AST_BLOCK) return stmts_bind(&s->c->list, name);
    }
    return false;
}

/* The names a branch not taken binds at its top level: used after the if,
 * each gets the hint that says why it is unknown, whichever branch ran. */
static void if_note_untaken(sema_ctx *c, const ast_node *head, const ast_list *stmts)
{
    for (uint32_t i = 0; i < stmts->n; i++) {
        const ast_node *s = stmts->items[i];
        if (declares_name(s)) ended_push(c, s->name, s->loc, scope_owner(c->env), head);
        for (uint32_t k = 0; s->kind == AST_LET && !s->name && k < s->list.n; k++)
            ended_push(c, s->list.items[k]->name, s->list.items[k]->loc, scope_owner(c->env), head);
    }
}

/* Run the taken branch as a block; the names every branch binds outlive it. */
static void if_run_branch(sema_ctx *c, const ast_node *head, const ast_list *stmts)
{
    scope sc;
    scope_enter(c, &sc, false);
    exec_stmts(c, stmts);
    if (c->returned) c->returned_in_if = true;
    for (uint32_t i = 0; i < sc.n; i++)
        if (if_binds_always(head, sc.b[i].name)) {
            binding kept = sc.b[i];
            scope_put(sc.parent, kept.name, kept.value, kept.loc);
            sc.parent->b[sc.parent->n - 1].used = kept.used;
        }
    scope_end(c, &sc, head);
}

/* The condition of an if or an assert (what: "an if"), evaluated; a bool
 * that rests on a symbolic size's value (T == 1, which folds to false only
 * because T is not 1 written out) is an error, SV_ERROR. */
static sv build_time_condition(sema_ctx *c, const ast_node *e, const char *what)
{
    bool outer = c->dim_eq_symbolic;   /* an if in a fn the condition calls must not clear the caller's */
    c->dim_eq_symbolic = false;
    sv v = sema_expr(c, e);
    bool symbolic = c->dim_eq_symbolic;
    c->dim_eq_symbolic = outer || symbolic;
    if (v.kind == SV_BOOL && symbolic) {
        sema_err(c, c->dim_eq_loc, "bind the symbol when building (--dim NAME=VALUE), or give its axis a number in the model's inputs",
                 "%s's condition compares a symbolic size, whose value is known only when the model runs", what);
        return (sv){.kind = SV_ERROR};
    }
    return v;
}

/* An if's condition: true or false when the model is built. */
static bool if_condition(sema_ctx *c, const ast_node *e, bool *taken)
{
    sv v = build_time_condition(c, e, "an if");
    if (v.kind == SV_ERROR) return false;
    if (v.kind == SV_BOOL) {
        *taken = v.i != 0;
        return true;
    }
    if (v.kind == SV_TENSOR)
        sema_err(c, e->loc, "an if chooses code when the model is built; to choose between tensors element by element, use where(cond, a, b)",
                 "an if's condition must be known when the model is built, not a tensor's values");
    else
        sema_err(c, e->loc, "compare it, as in if n > 1 { ... }: bools, numbers, configs, fn arguments and known sizes are known when the model is built",
                 "an if's condition must be true or false, got %s", sv_kind_phrase(v.kind));
    return false;
}

/* if A { ... } else if B { ... } else { ... }: the first branch whose
 * condition holds is checked and expanded; the others are not read. */
static void exec_if(sema_ctx *c, const ast_node *head)
{
    const ast_node *s = head;
    for (; s; s = s->c && s->c->kind == AST_IF ? s->c : NULL) {
        bool taken = false;
        if (!if_condition(c, s->a, &taken)) break;
        if (taken) {
            if_run_branch(c, head, &s->list);
            return;
        }
        if_note_untaken(c, head, &s->list);
        if (s->c && s->c->kind == AST_BLOCK) {
            if_run_branch(c, head, &s->c->list);
            return;
        }
    }
    if (!s) return;
    /* the condition was wrong: the names the if would bind are errors, not unknown */
    for (uint32_t i = 0; i < head->list.n; i++) {
        const ast_node *st = head->list.items[i];
        if (declares_name(st) && if_binds_always(head, st->name) && !bound_in_fn(c, st->name))
            scope_put(c->env, st->name, sv_error(), st->loc);
    }
}

static bool bound_in_fn(sema_ctx *c, const char *name)
{
    for (scope *s = c->env; s; s = s->parent) {
        if (scope_find_local(s, name)) return true;
        if (s->fn_boundary) break;
    }
    return false;
}

/* a, b = f(x): a function's several return values, one name each. */
static void exec_destructure(sema_ctx *c, const ast_node *s)
{
    uint32_t saved_region = begin_region(c, s);
    sv v = sema_expr(c, s->a);
    c->region = saved_region;
    if (v.kind == SV_ERROR) {
        for (uint32_t i = 0; i < s->list.n; i++) sema_bind(c, s->list.items[i]->name, sv_error(), s->list.items[i]->loc);
        return;
    }
    uint32_t have = v.kind == SV_LIST ? v.n : 1;
    if (v.kind != SV_LIST || have != s->list.n) {
        sema_err(c, s->a->loc, have == 1 ? "only a function with several return values can be taken apart" : NULL,
                 "%u names on the left, but the right side gives %u value%s", s->list.n, have, have == 1 ? "" : "s");
        for (uint32_t i = 0; i < s->list.n; i++) sema_bind(c, s->list.items[i]->name, sv_error(), s->list.items[i]->loc);
        return;
    }
    for (uint32_t i = 0; i < s->list.n; i++) {
        sv item = v.items[i];
        item.is_param = false;
        sema_bind(c, s->list.items[i]->name, item, s->list.items[i]->loc);
    }
}

void sema_exec_let(sema_ctx *c, const ast_node *s)
{
    if (!s->name) {
        exec_destructure(c, s);
        return;
    }
    uint32_t saved_region = begin_region(c, s);
    /* fc1 = nn.linear(...) names its params fc1.*; a rebinding such as
     * x = nn.block(x) names them after the function (block, block_1, ...). */
    c->pending_name = s->a->kind == AST_CALL && !bound_in_fn(c, s->name) ? s->name : NULL;
    sv v = sema_expr(c, s->a);
    c->pending_name = NULL;
    c->region = saved_region;
    if (v.kind == SV_NONE) {
        sema_err(c, s->a->loc, NULL, "this expression has no value to assign");
        v = sv_error();
    }
    if (v.kind == SV_LIST && v.decl) {   /* else the error comes where the name is used, as "a list" */
        sema_err(c, s->a->loc, sema_textf(c, "take them apart by name: a, b = %s(...)", v.decl->name),
                 "fn '%s' returns %u values; one name cannot hold them", v.decl->name, v.n);
        v = sv_error();
    }
    v.is_param = false;
    if (v.kind == SV_TENSOR) v.is_param = c->g->nodes[v.t].op == OP_PARAM && !c->autocast;
    sema_bind(c, s->name, v, s->loc);
}

/* The fn argument that a name in an assert's condition stands for: the
 * argument itself, or the one whose pattern binds it (H of x: [B, H, W, C]). */
static const ast_node *assert_arg(const ast_node *fn, const char *name)
{
    for (uint32_t i = 0; i < fn->list2.n; i++) {
        const ast_node *d = fn->list2.items[i];
        if (strcmp(d->name, name) == 0) return d;
        const ast_node *t = d->a;
        if (t && t->kind == AST_TYPE)
            for (uint32_t k = 0; k < t->list.n; k++)
                if (t->list.items[k]->kind == AST_NAME && strcmp(t->list.items[k]->name, name) == 0) return d;
    }
    return NULL;
}

/* Where a failed assert is reported: at the first argument its condition
 * reads that the caller wrote in the user's file (conv2d's `stride: 0`),
 * else at the assert; the note then names the user's call. */
static bool assert_loc(sema_ctx *c, const ast_node *e, nc_loc *loc)
{
    if (!e || !c->fn_decl) return false;
    if (e->kind == AST_NAME) {
        const ast_node *d = assert_arg(c->fn_decl, e->name);
        binding *b = NULL;
        for (scope *s = c->env; d && s && !b; s = s->fn_boundary ? NULL : s->parent) b = scope_find_local(s, d->name);
        if (b && b->loc.file == c->call_site.file && b->loc.line) { *loc = b->loc; return true; }
        return false;
    }
    if (e->kind == AST_MEMBER) return assert_loc(c, e->a, loc);   /* x.dtype */
    if (e->kind != AST_BINARY && e->kind != AST_UNARY) return false;
    return assert_loc(c, e->a, loc) || (e->kind == AST_BINARY && assert_loc(c, e->b, loc));
}

/* "{name}" in an assert's message: the value bound to name; for a require
 * (spans), a size or a tensor's type as a size span (ir_require_span), which
 * the session that binds its symbols shows beside their values. */
static size_t assert_value_text(sema_ctx *c, const char *name, bool spans, char *out, size_t cap)
{
    binding *b = lookup(c, name);
    if (!b) return nc_appendf(out, cap, 0, "{%s}", name);
    sv v = b->value;
    const ir_node *n = v.kind == SV_TENSOR ? &c->g->nodes[v.t] : NULL;
    switch (v.kind) {
    case SV_INT: return nc_appendf(out, cap, 0, "%lld", (long long)v.i);
    case SV_FLOAT: return nc_appendf(out, cap, 0, "%g", v.f);
    case SV_BOOL: return nc_appendf(out, cap, 0, "%s", v.i ? "true" : "false");
    case SV_STRING: return nc_appendf(out, cap, 0, "%s", v.s);
    case SV_DTYPE: return nc_appendf(out, cap, 0, "%s", dtype_name(v.dtype));
    case SV_DIM: return spans ? ir_require_span(c->g, NC_I32, -1, &v.dim, out, cap) : ir_dim_format(c->g, v.dim, out, cap);
    case SV_TENSOR:
        return spans ? ir_require_span(c->g, n->dtype, n->rank, n->shape, out, cap)
                     : ir_shape_format(c->g, n->dtype, n->rank, n->shape, out, cap);
    default: return nc_appendf(out, cap, 0, "{%s}", name);
    }
}

/* msg with each {name} as its value, under snprintf's contract. */
static size_t assert_format_to(sema_ctx *c, const char *msg, bool spans, char *out, size_t cap)
{
    size_t o = nc_appendf(out, cap, 0, "%s", "");
    for (const char *p = msg; *p;) {
        const char *end = *p == '{' ? strchr(p, '}') : NULL;
        if (end && end - p > 1 && end - p < 64) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(end - p - 1), p + 1);
            o += assert_value_text(c, name, spans, o < cap ? out + o : NULL, o < cap ? cap - o : 0);
            p = end + 1;
        } else {   /* a mark the user wrote would read as a span */
            o = nc_appendf(out, cap, o, "%c", spans && *p == IR_SIZES_MARK ? '?' : *p);
            p++;
        }
    }
    return o;
}

/* An assert's message or hint, whole, in c's arena. */
static char *assert_format(sema_ctx *c, const char *msg, bool spans)
{
    size_t n = assert_format_to(c, msg, spans, NULL, 0) + 1;
    char *text = ast_alloc(c->arena, n);
    assert_format_to(c, msg, spans, text, n);
    return text;
}

/* A failed assert, or one that could not be checked, ends the fn's
 * expansion: the rest would only report what the assert has said. */
static void assert_stop(sema_ctx *c)
{
    if (!c->fn_decl) return;
    c->assert_failed = c->returned = true;
    c->ret = ast_alloc(c->arena, sizeof *c->ret);
    *c->ret = sv_error();
    c->nret = 1;
}

/* The comparisons of symbolic sizes a passing require's condition left to
 * the session (pending[base, end)): one ir_require each, once per graph. */
static void assert_require(sema_ctx *c, const ast_node *s, int base, int end, const char *msg, const char *hint)
{
    if (base == end) return;
    char *text = assert_format(c, msg, true), *help = assert_format(c, hint ? hint : "", true);
    for (int i = base; i < end; i++) {
        ir_require q = {.lhs = c->pending[i].lhs, .rhs = c->pending[i].rhs, .cmp = c->pending[i].cmp,
                        .message = text, .hint = help, .loc = s->loc, .site = c->call_depth ? c->call_site : (nc_loc){0}};
        bool seen = false;
        for (uint32_t k = 0; k < c->g->nrequires && !seen; k++)
            seen = c->g->requires[k].lhs == q.lhs && c->g->requires[k].rhs == q.rhs && c->g->requires[k].cmp == q.cmp;
        if (!seen) ir_require_add(c->g, &q);
    }
}

/* assert COND, "message" [, "hint"]: a check a function makes of its
 * arguments when it is expanded; COND is a compile-time bool. require is
 * the same check, but its comparisons of symbolic sizes (B > 1) are kept
 * in the graph for the session that binds them (assert_require). */
static void exec_assert(sema_ctx *c, const ast_node *s)
{
    int base = c->npending;
    bool defer = c->defer_sizes;
    const char *blocked = c->defer_blocked;
    c->defer_sizes = s->kind == AST_REQUIRE;
    c->defer_blocked = NULL;
    const char *what = s->kind == AST_REQUIRE ? "a require" : "an assert";
    sv cond = build_time_condition(c, s->a, what);
    c->defer_sizes = defer;
    c->defer_blocked = blocked;
    int end = c->npending;
    c->npending = base;
    sv msg = sema_expr(c, s->b);
    sv hint = s->c ? sema_expr(c, s->c) : (sv){.kind = SV_NONE};
    if (cond.kind == SV_ERROR || msg.kind == SV_ERROR || hint.kind == SV_ERROR) { assert_stop(c); return; }
    if (msg.kind != SV_STRING || (s->c && hint.kind != SV_STRING)) {
        sema_err(c, msg.kind != SV_STRING ? s->b->loc : s->c->loc, "e.g. assert stride >= 1, \"stride must be at least 1\"",
                 "%s's message and hint are strings", what);
        assert_stop(c);
        return;
    }
    if (cond.kind != SV_BOOL) {
        sema_err(c, s->a->loc, "compare numbers or sizes known when the model is built: kernel <= H",
                 "%s's condition must be true or false when the model is built, got %s", what,
                 sv_kind_phrase(cond.kind));
        assert_stop(c);
        return;
    }
    if (cond.i) {
        assert_require(c, s, base, end, msg.s, s->c ? hint.s : NULL);
        return;
    }
    const char *text = assert_format(c, msg.s, false), *help = s->c ? assert_format(c, hint.s, false) : NULL;
    nc_loc loc = s->loc;
    assert_loc(c, s->a, &loc);
    sema_err(c, loc, help, "%s", text);
    assert_stop(c);
}

/* Whether one more statement may run; past SEMA_MAX_STMTS, an error (once)
 * and every statement after it is passed over (a repeat stops at an error
 * in its body); past SEMA_MAX_STMTS_FAILED in a build that has failed, the
 * same without a word. */
static bool stmt_budget(sema_ctx *c, const ast_node *s)
{
    ++c->nstmts;
    if (c->nstmts > SEMA_MAX_STMTS_FAILED && c->diag->errors > c->build_errors) c->stmts_cut = true;
    if (c->nstmts <= SEMA_MAX_STMTS && !c->stmts_cut) return true;
    if (!c->stmts_cut) {
        c->stmts_cut = true;
        char hint[192] = "a fn that calls another more than once multiplies its body at each level";
        if (c->nrepeats > 0 && c->nrepeats <= (int)NC_COUNT(c->repeats))
            snprintf(hint, sizeof hint, "a repeat in a repeat runs its body the product of their counts; the innermost here is at line %u",
                     c->repeats[c->nrepeats - 1]->loc.line);
        else if (c->nrepeats > 0)
            snprintf(hint, sizeof hint, "a repeat in a repeat runs its body the product of their counts");
        sema_err(c, s->loc, hint, "the model expands to more than %llu statements", (unsigned long long)SEMA_MAX_STMTS);
    }
    return false;
}

static void exec_stmt(sema_ctx *c, const ast_node *s)
{
    if (!stmt_budget(c, s)) return;
    if (c->train && s->kind != AST_IF) {
        sema_train_stmt(c, s);
        return;
    }
    switch (s->kind) {
    case AST_LET: sema_exec_let(c, s); break;
    case AST_PARAM:
    case AST_BUFFER: exec_param(c, s); break;
    case AST_UPDATE: exec_update(c, s); break;
    case AST_RETURN: exec_return(c, s); break;
    case AST_BLOCK: exec_block(c, s); break;
    case AST_REPEAT: exec_repeat(c, s); break;
    case AST_IF: exec_if(c, s); break;
    case AST_ASSERT:
    case AST_REQUIRE: exec_assert(c, s); break;
    case AST_DIRECTIVE:
        sema_err(c, s->loc, "optimizer, schedule, loss_scale and clip_grad_norm belong in a train section",
                 "'%s' is not a statement here", s->name);
        break;
    default:
        sema_err(c, s->loc, NULL, "unexpected %s", ast_kind_name(s->kind));
    }
}

static bool stmts_always_return(const ast_list *stmts);

/* Whether s returns whichever way its build-time conditions go: a return, a
 * block that does, an if with an else all of whose branches do. A repeat
 * does not count: its body may run once for one count and never for
 * another. The else-if chain is walked, not recursed: it may be long. */
static bool stmt_always_returns(const ast_node *s)
{
    if (s->kind == AST_RETURN) return true;
    if (s->kind == AST_BLOCK) return stmts_always_return(&s->list);
    for (; s && s->kind == AST_IF; s = s->c) {
        if (!stmts_always_return(&s->list) || !s->c) return false;
        if (s->c->kind == AST_BLOCK) return stmts_always_return(&s->c->list);
    }
    return false;
}

static bool stmts_always_return(const ast_list *stmts)
{
    for (uint32_t i = 0; i < stmts->n; i++)
        if (stmt_always_returns(stmts->items[i])) return true;
    return false;
}

/* After the statement that returned, the next one is unreachable when the
 * return was unconditional, or in an if whose every branch returns; a return
 * in one branch only leaves what follows reachable for other conditions. */
static void warn_unreachable(sema_ctx *c, const ast_node *done, const ast_node *next)
{
    if (c->assert_failed) return;
    if (!c->returned_in_if) {
        sema_warn(c, next->loc, "nothing after a return runs: remove it, or move it before the return",
                  "unreachable statement after return");
        return;
    }
    if (!stmt_always_returns(done)) return;
    if (done->kind != AST_IF) {
        sema_warn(c, next->loc, "the block above returns whichever way its ifs go: remove what follows it",
                  "unreachable statement after return");
        return;
    }
    sema_warn(c, next->loc, "remove it, or leave a branch without a return so that it runs after that branch",
              "unreachable statement: every branch of the if at line %u returns", done->loc.line);
}

void sema_exec_stmts(sema_ctx *c, const ast_list *stmts) { exec_stmts(c, stmts); }

static void exec_stmts(sema_ctx *c, const ast_list *stmts)
{
    for (uint32_t i = 0; i < stmts->n && !c->returned; i++) {
        exec_stmt(c, stmts->items[i]);
        if (c->returned && i + 1 < stmts->n) warn_unreachable(c, stmts->items[i], stmts->items[i + 1]);
    }
}

/* ------------------------------------------------------------------ */
/* function calls                                                       */

static bool static_kind_ok(const char *kind, sv v)
{
    if (strcmp(kind, "int") == 0) return v.kind == SV_INT || v.kind == SV_DIM;
    if (strcmp(kind, "float") == 0) return v.kind == SV_FLOAT || v.kind == SV_INT;
    if (strcmp(kind, "string") == 0) return v.kind == SV_STRING;
    return false;
}

/* Check one argument against its declared type and bind it in the fn scope. */
static bool bind_arg(sema_ctx *c, const ast_node *decl, sv v, nc_loc loc)
{
    const ast_node *t = decl->a;
    if (v.kind == SV_ERROR) return false;
    if (!t) {
        scope_put(c->env, decl->name, v, loc);
        return true;
    }
    bool is_static_bool = t->kind == AST_TYPE && t->has_dtype && t->dtype == NC_BOOL && !t->ival;
    if (t->kind == AST_KIND || is_static_bool) {
        const char *kind = t->kind == AST_KIND ? t->name : "bool";
        if (is_static_bool ? v.kind != SV_BOOL : !static_kind_ok(kind, v)) {
            sema_err(c, loc, NULL, "argument '%s' must be a%s %s, got %s", decl->name, kind[0] == 'i' ? "n" : "",
                     kind, sv_kind_phrase(v.kind));
            return false;
        }
        if (strcmp(kind, "float") == 0 && v.kind == SV_INT) v = sv_float((double)v.i);
        scope_put(c->env, decl->name, v, loc);
        return true;
    }
    if (v.kind != SV_TENSOR) {
        sema_err(c, loc, NULL, "argument '%s' must be a tensor, got %s", decl->name, sv_kind_phrase(v.kind));
        return false;
    }
    if (!match_pattern(c, t, decl->name, v, loc)) return false;
    v.is_param = false;
    scope_put(c->env, decl->name, v, loc);
    return true;
}

/* Pair call arguments with declared ones: positionals first, then keywords,
 * then defaults (evaluated in the function's module). */
static bool collect_args(sema_ctx *c, const ast_node *fn, const ast_node *call, sv *vals, nc_loc *locs, sema_module *mod)
{
    const ast_list *decls = &fn->list2;
    bool given[64] = {0};
    uint32_t pos = 0;
    for (uint32_t i = 0; i < call->list.n; i++) {
        const ast_node *a = call->list.items[i];
        int slot = -1;
        if (a->kind == AST_KWARG) {
            for (uint32_t k = 0; k < decls->n; k++)
                if (strcmp(decls->items[k]->name, a->name) == 0) slot = (int)k;
            if (slot < 0) {
                sema_err(c, a->loc, NULL, "'%s' has no argument named '%s'", fn->name, a->name);
                return false;
            }
        } else {
            if (pos >= decls->n) {
                sema_err(c, a->loc, NULL, "too many arguments: '%s' takes %u", fn->name, decls->n);
                return false;
            }
            slot = (int)pos++;
        }
        if (given[slot]) {
            sema_err(c, a->loc, NULL, "argument '%s' given twice", decls->items[slot]->name);
            return false;
        }
        given[slot] = true;
        vals[slot] = sema_expr(c, a->kind == AST_KWARG ? a->a : a);
        locs[slot] = a->loc;
    }
    for (uint32_t k = 0; k < decls->n; k++) {
        if (given[k]) continue;
        const ast_node *d = decls->items[k];
        if (!d->b) {
            sema_err(c, call->loc, NULL, "missing argument '%s' of '%s'", d->name, fn->name);
            return false;
        }
        vals[k] = eval_in_module(c, mod, d->b);
        locs[k] = d->b->loc;
    }
    return true;
}

/* What a call of a fn changes in c, kept to be restored when it returns:
 * the body runs in its module's scope, under its own name prefix, with its
 * own asserts, returns and (none of a train section's) statements. */
typedef struct fn_frame {
    scope *env, *caller_env;
    scope sc;
    nc_loc site, inner_site;
    const ast_node *decl;
    uint32_t body;
    bool defer_sizes;
    const char *defer_blocked;
    size_t prefix_len;   /* the caller's prefix, to cut back to */
} fn_frame;

static void fn_enter(sema_ctx *c, const ast_node *decl, const ast_node *call, sema_module *mod, const char *scope_name,
                     fn_frame *f)
{
    /* lexical scope is its module's globals */
    f->env = c->env;
    f->caller_env = c->caller_env;
    c->caller_env = c->env;
    c->env = &mod->globals;
    scope_enter(c, &f->sc, true);
    f->site = c->call_site;
    f->inner_site = c->inner_call_site;
    c->inner_call_site = call->loc;
    f->decl = c->fn_decl;
    f->body = c->body;
    c->body = ++c->next_body;
    f->defer_sizes = c->defer_sizes;   /* the fn's own asserts and ifs are its own */
    f->defer_blocked = c->defer_blocked;
    c->defer_sizes = false;
    c->defer_blocked = NULL;
    c->fn_decl = decl;
    if (c->call_depth == 0) c->call_site = call->loc;
    c->call_depth++;
    char *base = unique_scope_name(c, scope_name);
    f->prefix_len = push_prefix(c, base);
    free(base);
}

static void fn_leave(sema_ctx *c, fn_frame *f)
{
    pop_prefix(c, f->prefix_len);
    c->call_depth--;
    c->call_site = f->site;
    c->inner_call_site = f->inner_site;
    c->fn_decl = f->decl;
    c->defer_sizes = f->defer_sizes;
    c->defer_blocked = f->defer_blocked;
    c->body = f->body;
    scope_leave(c, &f->sc);
    c->env = f->env;
    c->caller_env = f->caller_env;
}

/* The fn's statements run, its arguments bound: what it returns (nothing,
 * a value, or a list of them), checked against its declared `-> type`. */
static sv fn_run_body(sema_ctx *c, const ast_node *decl)
{
    bool saved_returned = c->returned, saved_returned_in_if = c->returned_in_if;
    struct sema_train_state *saved_train = c->train;   /* a fn's body has a fn's statements, also when a train section calls it */
    c->train = NULL;
    sv *saved_ret = c->ret;
    int saved_nret = c->nret;
    c->returned = c->returned_in_if = false;
    c->ret = NULL;
    c->nret = 0;
    exec_stmts(c, &decl->list);
    c->assert_failed = false;
    sv result;
    if (c->stmts_cut) result = sv_error();   /* cut short by the statement budget: said */
    else if (!c->returned) result = (sv){.kind = SV_NONE};
    else if (c->nret == 1) result = c->ret[0];
    else result = (sv){.kind = SV_LIST, .items = c->ret, .n = (uint32_t)c->nret, .decl = decl};   /* decl: several results, not a list */
    if (decl->list3.n == 1 && result.kind == SV_TENSOR) {
        const ast_node *rt = decl->list3.items[0]->a;
        if (rt && rt->kind == AST_TYPE && !match_pattern(c, rt, NULL, result, rt->loc)) result = sv_error();
    }
    c->returned = saved_returned;
    c->returned_in_if = saved_returned_in_if;
    c->train = saved_train;
    c->ret = saved_ret;
    c->nret = saved_nret;
    return result;
}

static sv call_fn(sema_ctx *c, sv fn, const ast_node *call)
{
    const ast_node *decl = fn.decl;
    if (decl->list2.n > 64) {
        sema_err(c, decl->loc, NULL, "a function takes at most 64 arguments");
        return sv_error();
    }
    if (c->call_depth >= SEMA_MAX_CALL_DEPTH) {
        sema_err(c, call->loc, "functions are expanded at each call; recursion never ends",
                 "calls nested more than %d deep (recursion?)", SEMA_MAX_CALL_DEPTH);
        return sv_error();
    }
    sv vals[64];
    nc_loc locs[64];
    const char *scope_name = c->pending_name ? c->pending_name : decl->name;
    c->pending_name = NULL;
    if (!collect_args(c, decl, call, vals, locs, fn.mod)) return sv_error();
    fn_frame frame;
    fn_enter(c, decl, call, fn.mod, scope_name, &frame);
    bool ok = true;
    for (uint32_t k = 0; k < decl->list2.n && ok; k++) ok = bind_arg(c, decl->list2.items[k], vals[k], locs[k]);
    sv result = ok ? fn_run_body(c, decl) : sv_error();
    fn_leave(c, &frame);
    if (result.kind == SV_TENSOR) result.is_param = false;
    return result;
}

/* ------------------------------------------------------------------ */
/* models                                                               */

static void declare_inputs(sema_ctx *c, const ast_list *args, bool train_only)
{
    for (uint32_t i = 0; i < args->n; i++) {
        const ast_node *a = args->items[i];
        if (!a->a || a->a->kind != AST_TYPE || !a->a->has_dtype) {
            sema_err(c, a->loc, "write it like x: f32[B, 784]", "model input '%s' needs a dtype and a shape", a->name);
            continue;
        }
        if (a->b) sema_err(c, a->b->loc, NULL, "model inputs cannot have default values");
        binding *prev = lookup(c, a->name);
        if (prev && scope_find_local(c->env, a->name)) {
            sema_err(c, a->loc, NULL, "'%s' is already defined", a->name);
            continue;
        }
        if (train_only && prev && prev->value.kind == SV_TENSOR) {   /* would hide the model's own value */
            sema_err(c, a->loc, "give the train input a name of its own, e.g. labels",
                     "train input '%s' has the name of an input or value of the model", a->name);
            continue;
        }
        ir_tensor_decl d = {.name = a->name, .dtype = a->a->dtype, .loc = a->loc};
        if (!eval_type_dims(c, a->a, DIMS_MODEL, &d.rank, d.shape) ||
            !sema_check_shape(c, d.dtype, d.rank, d.shape, a->a->loc)) {
            scope_put(c->env, a->name, sv_error(), a->loc);   /* reported once: uses stay quiet */
            continue;
        }
        uint32_t idx = ir_input_add(c->g, &d);
        ir_node n = sema_proto(c, OP_INPUT, a->loc);
        n.dtype = d.dtype;
        n.rank = d.rank;
        memcpy(n.shape, d.shape, sizeof n.shape);
        n.attr.index = idx;
        scope_put(c->env, a->name, sv_tensor(c, ir_add(c->g, &n, NULL, 0)), a->loc);
    }
}

/* The returned values against the declared outputs. */
/* A returned tensor against its declared output type (decl->a): false,
 * said, where they differ. */
static bool output_matches_decl(sema_ctx *c, const ast_node *model, const ast_node *decl, sv v)
{
    const ir_node *n = &c->g->nodes[v.t];
    uint8_t rank;
    uint32_t shape[NC_MAX_RANK];
    if (!eval_type_dims(c, decl->a, DIMS_OUTPUT, &rank, shape)) return false;
    bool same_shape = n->rank == rank && memcmp(n->shape, shape, rank * sizeof *shape) == 0;
    if (n->dtype == decl->a->dtype && same_shape) return true;
    /* only the dtype differs (often a precision block's autocast narrowed
     * the value): say which cast converts it, and where the value was made,
     * since the caret is on the declaration */
    bool dtype_only = same_shape;
    char hint[96];
    snprintf(hint, sizeof hint, "to convert it, return %s(...): there is no silent precision change", dtype_name(decl->a->dtype));
    sema_err(c, decl->loc, dtype_only ? hint : NULL, "model '%s' returns %s but declares %s", model->name, sema_node_text(c, v.t),
             sema_shape_text(c, decl->a->dtype, rank, shape));
    if (dtype_only && n->loc.line) diag_report(c->diag, DIAG_NOTE, n->loc, NULL, "the %s value is made here", dtype_name(n->dtype));
    return false;
}

static void bind_outputs(sema_ctx *c, const ast_node *model)
{
    const ast_list *outs = &model->list3;
    if (c->stmts_cut) return;   /* its return was passed over with the rest: said */
    if (!c->returned) {
        sema_err(c, model->loc, NULL, "model '%s' has no return statement", model->name);
        return;
    }
    if (outs->n && (int)outs->n != c->nret) {
        sema_err(c, model->loc, NULL, "model '%s' declares %u output%s but returns %d", model->name, outs->n,
                 outs->n == 1 ? "" : "s", c->nret);
        return;
    }
    for (int i = 0; i < c->nret; i++) {
        sv v = c->ret[i];
        if (v.kind == SV_ERROR) continue;
        if (v.kind != SV_TENSOR) {
            sema_err(c, model->loc, NULL, "model outputs are tensors; output %d is %s", i, sv_kind_phrase(v.kind));
            continue;
        }
        const ast_node *decl = outs->n ? outs->items[i] : NULL;
        if (decl && decl->a && decl->a->kind == AST_TYPE && !output_matches_decl(c, model, decl, v)) continue;
        const char *name = decl && decl->name ? decl->name : (c->nret == 1 ? "output" : NULL);
        char buf[32];
        if (!name) snprintf(buf, sizeof buf, "output%d", i), name = buf;
        ir_output_add(c->g, name, v.t);
    }
}

/* Outputs are named apart from each other and from the inputs: netc run
 * writes each as NAME.npy, and a train section reads them by name. */
static void check_output_names(sema_ctx *c, const ast_node *model)
{
    const ast_list *outs = &model->list3, *ins = &model->list2;
    for (uint32_t i = 0; i < outs->n; i++) {
        const ast_node *o = outs->items[i];
        if (!o->name) continue;
        bool clash = false;
        for (uint32_t j = 0; j < i && !clash; j++)
            if (outs->items[j]->name && strcmp(outs->items[j]->name, o->name) == 0) {
                sema_err(c, o->loc, "give each output a name of its own", "output '%s' declared twice", o->name);
                clash = true;
            }
        for (uint32_t j = 0; j < ins->n && !clash; j++)
            if (strcmp(ins->items[j]->name, o->name) == 0) {
                sema_err(c, o->loc, "give the output a name of its own",
                         "output '%s' has the name of an input", o->name);
                clash = true;
            }
    }
}

static void check_unused_inputs(sema_ctx *c);
static ir_graph *build_one(sema_ctx *c, const ast_node *model);
static void check_unused_bindings(sema_ctx *c, const scope *body);
static void lint_casts(sema_ctx *c);

void sema_declare_train_inputs(sema_ctx *c, const ast_list *args) { declare_inputs(c, args, true); }

static const ast_node *find_decl(ast_file *f, ast_kind kind, const char *name)
{
    for (uint32_t i = 0; i < f->decls.n; i++) {
        const ast_node *d = f->decls.items[i];
        if (d->kind == kind && (!name || strcmp(d->name, name) == 0)) return d;
    }
    return NULL;
}

static void elaborate_model(sema_ctx *c, const ast_node *model)
{
    scope model_scope;
    c->env = &c->main->globals;
    scope_enter(c, &model_scope, true);
    const ast_node *precision = NULL;
    for (uint32_t i = 0; i < model->list4.n; i++) {
        const ast_node *h = model->list4.items[i];
        if (h->kind == AST_CONFIG) {
            c->config_model = model;
            define_config(c, c->env, h);
            c->config_model = NULL;
        } else if (h->kind == AST_TYPE && precision) {
            char at[64];
            snprintf(at, sizeof at, "the first is at line %u", precision->loc.line);
            sema_err(c, h->loc, at, "precision given twice");
        } else if (h->kind == AST_TYPE) {
            precision = h;
            if (!dtype_is_float(h->dtype)) sema_err(c, h->loc, NULL, "precision must be a float dtype, got %s", dtype_name(h->dtype));
            c->autocast = h->dtype != NC_F32;
            c->autocast_dtype = h->dtype;
        }
    }
    /* Inputs are declared before the body's precision applies to them. */
    bool ac = c->autocast;
    c->autocast = false;
    declare_inputs(c, &model->list2, false);
    c->autocast = ac;
    check_output_names(c, model);
    scope body;
    scope_enter(c, &body, false);
    exec_stmts(c, &model->list);
    bind_outputs(c, model);
    c->autocast = false;
    const ast_node *train = find_decl(c->main->ast, AST_TRAIN, model->name);
    if (train && c->diag->errors == 0) {
        /* the train section sees the model's body scope: outputs, inputs, configs */
        sema_train(c, model, train);
    }
    for (uint32_t i = 0; train && i < c->main->ast->decls.n; i++) {   /* one train section a model */
        const ast_node *d = c->main->ast->decls.items[i];
        if (d != train && d->kind == AST_TRAIN && strcmp(d->name, model->name) == 0) {
            char first[64];
            snprintf(first, sizeof first, "the first is at line %u", train->loc.line);
            sema_err(c, d->loc, first, "model '%s' has a second train section", model->name);
        }
    }
    if (c->diag->errors == 0) {      /* lints only make sense on a complete graph */
        check_unused_inputs(c);
        lint_casts(c);
        /* a body that chooses by `training` may bind a value for one build only */
        if (!c->body_read_training) check_unused_bindings(c, &body);
    }
    scope_leave(c, &body);
    scope_leave(c, &model_scope);
}

/* A tensor the model body names and never reads: a typo, or a layer that
 * was meant to be used. Rebinding (x = x + ...) reads the old value. */
static void check_unused_bindings(sema_ctx *c, const scope *body)
{
    for (uint32_t i = 0; i < body->n; i++) {
        const binding *b = &body->b[i];
        if (b->value.kind != SV_TENSOR) continue;
        nc_op op = c->g->nodes[b->value.t].op;
        if (op == OP_PARAM || op == OP_INPUT) continue;   /* reported as unused inputs and parameters */
        bool consumed = c->g->train.present && b->value.t == c->g->train.loss;   /* the train section's loss */
        for (uint32_t k = 0; k < c->g->noutputs && !consumed; k++) consumed = c->g->outputs[k].value == b->value.t;
        if (!b->used && !consumed && b->value.kind == SV_TENSOR && b->name[0] != '_')
            sema_warn(c, b->loc, "use it, or name it with a leading _ to say it is unused on purpose",
                      "'%s' is assigned but never used", b->name);
    }
}

/* An unused input or parameter: a warning now, or, where the model reads
 * `training`, kept until the other build says whether it reads it. */
static void report_unused(sema_ctx *c, const char *kind, const char *name, nc_loc loc)
{
    if (c->read_training) {
        c->unused = nc_xrealloc(c->unused, (c->nunused + 1) * sizeof *c->unused);
        c->unused[c->nunused++] = (struct sema_unused){.name = nc_xstrdup(name), .kind = kind, .loc = loc};
    } else if (!strcmp(kind, "input"))
        sema_warn(c, loc, "use it, or name it with a leading _ to say it is unused on purpose", "input '%s' is never used", name);
    else
        sema_warn(c, loc, "an unused parameter is still allocated, saved and loaded", "%s '%s' is never used", kind, name);
}

static void unused_free(struct sema_unused *u, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) free(u[i].name);
    free(u);
}

/* The two builds of a model that reads `training` (first: the first's
 * unused list; c->unused the other's): what neither reads is unused. A
 * parameter read only while training (or only by the forward pass) is not. */
static void report_unused_in_both(sema_ctx *c, struct sema_unused *first, uint32_t nfirst)
{
    bool saved = c->read_training;
    c->read_training = false;
    for (uint32_t i = 0; i < nfirst; i++)
        for (uint32_t k = 0; k < c->nunused; k++)
            if (!strcmp(first[i].name, c->unused[k].name) && !strcmp(first[i].kind, c->unused[k].kind)) {
                report_unused(c, first[i].kind, first[i].name, first[i].loc);
                break;
            }
    c->read_training = saved;
    unused_free(c->unused, c->nunused);
    c->unused = NULL;
    c->nunused = 0;
    unused_free(first, nfirst);
}

/* Whether the other build of a model that reads `training` could change
 * what this one says: only where this one left an input or a parameter
 * unused, which the other may read. A --dim or --set is matched by the
 * model's signature and configs, which both builds read, but one this build
 * did not match would be the other's to match. Else the other build is not
 * run: every example (batch norm's, dropout's) leaves nothing unused, and
 * its front end was 0.2 to 1 ms an entry (fashion_resnet's two: 2 ms of a
 * 95 ms netc build). */
static bool other_build_may_tell(const sema_ctx *c, uint32_t nunused)
{
    if (nunused) return true;
    for (int i = 0; c->opts && i < c->opts->ndims && i < 64; i++)
        if (!c->dim_used[i]) return true;
    for (int i = 0; c->opts && i < c->opts->nsets && i < 64; i++)
        if (!c->set_used[i]) return true;
    return false;
}

/* The other build of a model that reads `training`, for its unused inputs
 * and parameters alone: its diagnostics are the other build's to give
 * (netc check reports them), so they go nowhere here. */
static void quiet_other_build(sema_ctx *c, const ast_node *model)
{
    char *text = NULL;
    size_t len = 0;
    FILE *sink = open_memstream(&text, &len);
    diag_ctx quiet, *loud = c->diag;
    diag_init(&quiet, c->sources, sink);
    c->diag = &quiet;
    c->training = !c->training;
    ir_graph_free(build_one(c, model));
    c->training = !c->training;
    c->diag = loud;
    if (sink) fclose(sink);
    free(text);
}

/* Inputs and parameters nothing reads: usually a typo or a forgotten layer. */
static void check_unused_inputs(sema_ctx *c)
{
    bool *used = nc_xcalloc(c->g->nnodes + 1, 1);
    for (ir_value v = 0; v < c->g->nnodes; v++) {
        const ir_node *n = &c->g->nodes[v];
        for (int i = 0; i < n->nargs; i++) used[ir_args(c->g, n)[i]] = true;
    }
    for (uint32_t i = 0; i < c->g->noutputs; i++) used[c->g->outputs[i].value] = true;
    for (ir_value v = 0; v < c->g->nnodes; v++) {
        const ir_node *n = &c->g->nodes[v];
        const char *in = n->op == OP_INPUT ? c->g->inputs[n->attr.index].name : NULL;
        if (in && !used[v] && in[0] != '_')   /* _labels: unused on purpose (an autoencoder's train section must take labels) */
            report_unused(c, "input", in, n->loc);
        bool assigned = false;   /* a buffer an update assigns is used */
        for (uint32_t k = 0; n->op == OP_PARAM && k < c->g->nupdates; k++) assigned |= c->g->updates[k].param == n->attr.index;
        if (n->op == OP_PARAM && !used[v] && !assigned)
            report_unused(c, c->g->params[n->attr.index].role == IR_ROLE_BUFFER ? "buffer" : "parameter",
                          c->g->params[n->attr.index].decl.name, n->loc);
    }
    free(used);
}

/* Precision lints (DESIGN 5): a cast round trip through a wider type, and an
 * f32 input used only after narrowing it. */
static void lint_casts(sema_ctx *c)
{
    ir_graph *g = c->g;
    uint32_t *nusers = nc_xcalloc(g->nnodes + 1, sizeof *nusers), *ndown = nc_xcalloc(g->nnodes + 1, sizeof *ndown);
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        for (int i = 0; i < n->nargs; i++) {
            ir_value a = ir_args(g, n)[i];
            nusers[a]++;
            if (n->op == OP_CAST && dtype_is_float(n->dtype) && dtype_size(n->dtype) < dtype_size(g->nodes[a].dtype))
                ndown[a]++;
        }
    }
    for (uint32_t i = 0; i < g->noutputs; i++) nusers[g->outputs[i].value]++;
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        if (n->op == OP_INPUT && n->dtype == NC_F32 && nusers[v] && ndown[v] == nusers[v])
            sema_warn(c, n->loc, "declare the input in the narrower dtype: half the bytes to move",
                      "f32 input '%s' is only used after a down-cast", g->inputs[n->attr.index].name);
    }
    free(nusers);
    free(ndown);
}

static sema_ctx *ctx_new(src_table *sources, ast_file *main_file, const driver_opts *o, diag_ctx *d)
{
    sema_ctx *c = nc_xcalloc(1, sizeof *c);
    c->sources = sources;
    c->diag = d;
    c->opts = o;
    c->training = o && (o->train_step || o->keep_loss);
    c->arena = ast_arena_new();
    c->prefix_cap = 64;
    c->prefix = nc_xcalloc(1, c->prefix_cap);
    c->main = module_new(c, "", main_file);
    c->main->state = 1;
    module_add_decls(c, c->main);
    c->main->state = 2;
    return c;
}

static void ctx_free(sema_ctx *c)
{
    for (sema_module *m = c->modules, *next; m; m = next) {
        next = m->next;
        free(m->globals.b);
        if (m != c->main) ast_file_free(m->ast);
        free(m->name);
        free(m);
    }
    ast_arena_free(c->arena);
    free(c->cast_body);
    free(c->prefix);
    free(c);
}

static ir_graph *build_one(sema_ctx *c, const ast_node *model)
{
    c->g = ir_graph_new(model->name);
    for (uint32_t i = 0; i < c->sources->nfiles; i++) ir_file_add(c->g, c->sources->files[i].path);
    pop_prefix(c, 0);
    c->region = 0;
    c->next_region = 0;
    c->autocast = false;
    c->returned = c->returned_in_if = false;
    c->body = c->next_body = c->ncast_body = 0;   /* value ids start again */
    c->nstmts = 0;
    c->stmts_cut = false;
    int errors = c->build_errors = c->diag->errors;
    elaborate_model(c, model);
    ir_graph *g = c->g;
    c->g = NULL;
    if (!c->training) g->nupdates = 0;   /* the forward pass reads its buffers and assigns nothing */
    if (c->diag->errors > errors) {
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

/* What a --dim or --set that names nothing is told: the names there are,
 * as a hint ("its symbolic dims: B, T"). */
typedef struct option_hints {
    char dims[256], configs[256];
    size_t dims_head, configs_head;   /* the lengths of the prefixes: no names yet */
    int models;                       /* how many models' names are in: "its" or "their" dims */
} option_hints;

/* Appends name to a list of head bytes then names, once, as long as it fits. */
static void hint_add_name(char *hint, size_t cap, size_t head, const char *name)
{
    size_t len = strlen(name), n = strlen(hint);
    for (const char *p = hint + head; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] ? 2 : 0))
        if (strncmp(p, name, len) == 0 && (p[len] == ',' || p[len] == 0)) return;
    if (n + len + 8 < cap) snprintf(hint + n, cap - n, "%s%s", n == head ? "" : ", ", name);
}

/* The file's config lines' names; hints_add_model adds each model's own. */
static void hints_init(option_hints *h, const ast_file *f)
{
    h->dims[0] = 0;
    h->dims_head = 0;
    h->models = 0;
    h->configs_head = (size_t)snprintf(h->configs, sizeof h->configs, "the file's config constants: ");
    for (uint32_t i = 0; i < f->decls.n; i++) {
        const ast_node *d = f->decls.items[i];
        for (uint32_t k = 0; d->kind == AST_LIST && k < d->list.n; k++)
            if (d->list.items[k]->kind == AST_CONFIG) hint_add_name(h->configs, sizeof h->configs, h->configs_head, d->list.items[k]->name);
    }
}

/* A model's symbolic dims and its header's config constants. */
static void hints_add_model(option_hints *h, const ast_node *model, const ir_graph *g)
{
    h->models++;
    for (uint32_t k = 0; g && k < g->nsyms; k++) hint_add_name(h->dims, sizeof h->dims, h->dims_head, g->sym_names[k]);
    for (uint32_t i = 0; i < model->list4.n; i++)
        if (model->list4.items[i]->kind == AST_CONFIG)
            hint_add_name(h->configs, sizeof h->configs, h->configs_head, model->list4.items[i]->name);
}

/* --dim and --set names that matched nothing are mistakes, not no-ops:
 * reported, and true, where there are any. */
static bool report_unused_options(sema_ctx *c, uint32_t file, const option_hints *h)
{
    if (!c->opts) return false;
    int errors = c->diag->errors;
    nc_loc where = {file, 0, 0};
    bool several = h->models > 1;
    char dims[300];
    if (h->dims[0]) snprintf(dims, sizeof dims, "%s symbolic dims: %s", several ? "their" : "its", h->dims);
    else snprintf(dims, sizeof dims, "%s: every size is fixed", several ? "they have none" : "it has none");
    const char *configs = strlen(h->configs) == h->configs_head ? "the file has none" : h->configs;
    for (int i = 0; i < c->opts->ndims && i < 64; i++)
        if (!c->dim_used[i])
            diag_report(c->diag, DIAG_ERROR, where, dims, "--dim %s: %s symbolic dim named %s", c->opts->dim_names[i],
                        several ? "no model of the file has a" : "the model has no", c->opts->dim_names[i]);
    for (int i = 0; i < c->opts->nsets && i < 64; i++)
        if (!c->set_used[i])
            diag_report(c->diag, DIAG_ERROR, where, configs, "--set %s: no config constant named %s", c->opts->set_names[i],
                        c->opts->set_names[i]);
    return c->diag->errors > errors;
}

/* "the file's models: a, b" in models[256], for a hint; NULL for none. */
static const char *model_names_hint(const ast_file *f, char *models)
{
    size_t head = (size_t)snprintf(models, 256, "the file's models: ");
    for (uint32_t i = 0; i < f->decls.n; i++)
        if (f->decls.items[i]->kind == AST_MODEL) hint_add_name(models, 256, head, f->decls.items[i]->name);
    return strlen(models) == head ? NULL : models;
}

/* --model naming no model of the file, with the names there are. */
static void report_no_model(diag_ctx *d, const ast_file *f, const char *name)
{
    char models[256];
    const char *names = model_names_hint(f, models);
    diag_report(d, DIAG_ERROR, (nc_loc){f->file_id, 0, 0}, names ? names : "it has none", "no model named '%s'", name);
}

/* A train section names its model; a typo there is the usual cause. */
static void report_train_orphan(diag_ctx *d, const ast_file *f, const ast_node *train)
{
    char models[256];
    const char *names = model_names_hint(f, models);
    diag_report(d, DIAG_ERROR, train->loc, names ? names : "the file has no model", "train section for unknown model '%s'",
                train->name);
}

ir_graph *sema_model(src_table *sources, ast_file *main_file, const char *model_name, const driver_opts *o,
                     diag_ctx *d)
{
    int errors = d->errors;
    sema_ctx *c = ctx_new(sources, main_file, o, d);
    ir_graph *g = NULL;
    const ast_node *model = find_decl(main_file, AST_MODEL, model_name);
    if (d->errors > errors) {
        /* imports or configs failed */
    } else if (!model) {
        if (model_name) report_no_model(d, main_file, model_name);
        else diag_report(d, DIAG_ERROR, (nc_loc){main_file->file_id, 0, 0}, "declare one with: model name(x: f32[B, 784]) { ... }",
                         "no model in this file");
    } else {
        g = build_one(c, model);
        if (g && c->read_training && other_build_may_tell(c, c->nunused)) {   /* what it leaves unused, the other build may read */
            struct sema_unused *first = c->unused;
            uint32_t nfirst = c->nunused;
            c->unused = NULL, c->nunused = 0;
            quiet_other_build(c, model);
            report_unused_in_both(c, first, nfirst);
        }
        unused_free(c->unused, c->nunused);
        c->unused = NULL, c->nunused = 0;
        if (g && !g->train.present)   /* which models could be trained, for netc train's message */
            for (uint32_t i = 0; i < main_file->decls.n; i++)
                if (main_file->decls.items[i]->kind == AST_TRAIN && find_decl(main_file, AST_MODEL, main_file->decls.items[i]->name))
                    hint_add_name(g->train.trained_models, sizeof g->train.trained_models, 0, main_file->decls.items[i]->name);
        option_hints h;
        hints_init(&h, main_file);
        hints_add_model(&h, model, g);
        if (g && report_unused_options(c, main_file->file_id, &h)) {
            ir_graph_free(g);
            g = NULL;
        }
    }
    ctx_free(c);
    return g;
}

int sema_check_all(src_table *sources, ast_file *main_file, const driver_opts *o, diag_ctx *d)
{
    sema_ctx *c = ctx_new(sources, main_file, o, d);
    const char *only = o ? o->model : NULL;   /* --model: that one alone */
    if (only && !find_decl(main_file, AST_MODEL, only)) report_no_model(d, main_file, only);
    option_hints h;
    hints_init(&h, main_file);
    int n = 0, errors = d->errors;
    for (uint32_t i = 0; i < main_file->decls.n; i++) {
        const ast_node *decl = main_file->decls.items[i];
        if (decl->kind == AST_TRAIN && !find_decl(main_file, AST_MODEL, decl->name))
            report_train_orphan(d, main_file, decl);
        if (decl->kind != AST_MODEL) continue;
        for (uint32_t k = 0; k < i; k++) {
            const ast_node *prev = main_file->decls.items[k];
            if (prev->kind == AST_MODEL && strcmp(prev->name, decl->name) == 0)
                diag_report(d, DIAG_ERROR, decl->loc, NULL, "model '%s' is defined twice", decl->name);
        }
        if (only && strcmp(decl->name, only) != 0) continue;
        c->read_training = c->body_read_training = false;
        ir_graph *g = build_one(c, decl);
        hints_add_model(&h, decl, g);
        bool built = g != NULL;
        ir_graph_free(g);
        if (built && c->read_training) {   /* the model chooses by `training`: check the other build's choices too */
            struct sema_unused *first = c->unused;
            uint32_t nfirst = c->nunused;
            c->unused = NULL, c->nunused = 0;
            c->training = !c->training;
            ir_graph_free(build_one(c, decl));
            c->training = !c->training;
            report_unused_in_both(c, first, nfirst);
        }
        unused_free(c->unused, c->nunused);
        c->unused = NULL, c->nunused = 0;
        n++;
    }
    if (n > 0 && d->errors == errors) report_unused_options(c, main_file->file_id, &h);   /* a name any model used counts */
    ctx_free(c);
    return n;
}
