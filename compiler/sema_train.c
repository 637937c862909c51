/* sema_train.c - the training section: loss, optimizer, schedule, loss
 * scaling and gradient clipping, checked into an ir_train_spec.
 *
 *   train mlp(labels: i32[B]) {
 *     loss = cross_entropy(logits, labels, smoothing: 0.1)
 *     optimizer adamw(lr: 1e-3, weight_decay: 0.01)
 *     schedule cosine(warmup: 100)
 *     loss_scale dynamic(init: 65536)
 *     clip_grad_norm 1.0
 *   }
 */
#include "sema_int.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* One hyper-parameter a directive accepts: where it goes and its range. */
typedef struct hparam {
    const char *name;
    size_t offset;             /* into ir_train_spec */
    char kind;                 /* 'f' double, 'i' int64, 'b' bool */
    double lo, hi;             /* inclusive range; lo_open: lo itself excluded */
    bool lo_open;
} hparam;

#define F(field) offsetof(ir_train_spec, field)

static const hparam sgd_params[] = {
    {"lr", F(lr), 'f', 0, 1e3, true}, {"momentum", F(momentum), 'f', 0, 1, false},
    {"nesterov", F(nesterov), 'b', 0, 0, false}, {"weight_decay", F(weight_decay), 'f', 0, 1e3, false}, {0}};
static const hparam adam_params[] = {
    {"lr", F(lr), 'f', 0, 1e3, true}, {"beta1", F(beta1), 'f', 0, 0.999999, false},
    {"beta2", F(beta2), 'f', 0, 0.99999999, false}, {"eps", F(eps), 'f', 0, 1, true},
    {"weight_decay", F(weight_decay), 'f', 0, 1e3, false}, {0}};
static const hparam constant_params[] = {{"warmup", F(warmup_steps), 'i', 0, 1e12, false}, {0}};
static const hparam step_params[] = {
    {"step_size", F(step_size), 'i', 1, 1e12, false}, {"gamma", F(gamma), 'f', 0, 1, true},
    {"warmup", F(warmup_steps), 'i', 0, 1e12, false}, {0}};
static const hparam cosine_params[] = {
    {"warmup", F(warmup_steps), 'i', 0, 1e12, false}, {"total_steps", F(total_steps), 'i', 0, 1e12, false},
    {"min_lr", F(min_lr), 'f', 0, 1e3, false}, {0}};
static const hparam static_scale_params[] = {{"scale", F(init_scale), 'f', 0, 1e30, true}, {0}};
static const hparam dynamic_scale_params[] = {
    {"init", F(init_scale), 'f', 0, 1e30, true}, {"growth_interval", F(growth_interval), 'i', 1, 1e12, false}, {0}};
static const hparam no_params[] = {{0}};

typedef struct choice {
    const char *directive;
    const char *name;
    int value;                 /* the enum it selects */
    size_t field;              /* where the enum goes */
    const hparam *params;
} choice;

static const choice choices[] = {
    {"optimizer", "sgd", IR_OPT_SGD, F(optimizer), sgd_params},
    {"optimizer", "adam", IR_OPT_ADAM, F(optimizer), adam_params},
    {"optimizer", "adamw", IR_OPT_ADAMW, F(optimizer), adam_params},
    {"schedule", "constant", IR_SCHED_CONSTANT, F(schedule), constant_params},
    {"schedule", "step", IR_SCHED_STEP, F(schedule), step_params},
    {"schedule", "cosine", IR_SCHED_COSINE, F(schedule), cosine_params},
    {"loss_scale", "none", IR_SCALE_NONE, F(loss_scale), no_params},
    {"loss_scale", "static", IR_SCALE_STATIC, F(loss_scale), static_scale_params},
    {"loss_scale", "dynamic", IR_SCALE_DYNAMIC, F(loss_scale), dynamic_scale_params},
};

static void set_hparam(sema_ctx *c, ir_train_spec *t, const hparam *h, sv v, nc_loc loc)
{
    char *base = (char *)t;
    if (h->kind == 'b') {
        if (v.kind != SV_BOOL) { sema_err(c, loc, NULL, "'%s' must be true or false", h->name); return; }
        *(bool *)(base + h->offset) = v.i != 0;
        return;
    }
    double x = v.kind == SV_INT ? (double)v.i : v.kind == SV_FLOAT ? v.f : NAN;
    if (v.kind != SV_INT && v.kind != SV_FLOAT) {
        if (v.kind != SV_ERROR) sema_err(c, loc, NULL, "'%s' must be a number, got %s", h->name, sv_kind_phrase(v.kind));
        return;
    }
    if (!(x >= h->lo && x <= h->hi) || (h->lo_open && x == h->lo)) {
        sema_err(c, loc, NULL, "'%s' = %s is out of range %s%s, %s]", h->name, nc_number(x).s, h->lo_open ? "(" : "[",
                 nc_number(h->lo).s, nc_number(h->hi).s);
        return;
    }
    if (h->kind == 'i') {
        if (x != floor(x)) { sema_err(c, loc, NULL, "'%s' must be a whole number", h->name); return; }
        *(int64_t *)(base + h->offset) = (int64_t)x;
    } else {
        *(double *)(base + h->offset) = x;
    }
}

static void list_choices(const char *directive, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "one of:");
    for (size_t i = 0; i < NC_COUNT(choices) && n < cap; i++)
        if (strcmp(choices[i].directive, directive) == 0) n += (size_t)snprintf(buf + n, cap - n, " %s", choices[i].name);
}

/* The choice d names (optimizer adam, schedule cosine(...)); NULL, said,
 * for none, with the choices its directive has. */
static const choice *find_choice(sema_ctx *c, const ast_node *d, const char *name)
{
    for (size_t i = 0; name && i < NC_COUNT(choices); i++)
        if (strcmp(choices[i].directive, d->name) == 0 && strcmp(choices[i].name, name) == 0) return &choices[i];
    char hint[256];
    list_choices(d->name, hint, sizeof hint);
    sema_err(c, d->a->loc, hint, "unknown %s%s%s", d->name, name ? " " : "", name ? name : "");
    return NULL;
}

/* The hyperparameter argument a (the i-th) sets: by name, or the first
 * by position; NULL, said, where ch takes none such. */
static const hparam *choice_param(sema_ctx *c, const ast_node *d, const choice *ch, const ast_node *a, uint32_t i)
{
    const hparam *h = a->kind == AST_KWARG ? ch->params : (i == 0 && ch->params[0].name ? ch->params : NULL);
    if (a->kind == AST_KWARG)
        while (h->name && strcmp(h->name, a->name) != 0) h++;
    if (h && h->name) return h;
    char hint[256] = "it takes:";
    for (const hparam *p = ch->params; p->name; p++)
        snprintf(hint + strlen(hint), sizeof hint - strlen(hint), "%s %s", p == ch->params ? "" : ",", p->name);
    if (a->kind == AST_KWARG)
        sema_err(c, a->loc, ch->params[0].name ? hint : NULL, "%s %s has no argument '%s'", d->name, ch->name, a->name);
    else
        sema_err(c, a->loc, ch->params[0].name ? hint : NULL, "%s %s: name the arguments, like lr: 1e-3", d->name, ch->name);
    return NULL;
}

static void apply_choice(sema_ctx *c, ir_train_spec *t, const ast_node *d)
{
    const ast_node *e = d->a;
    const char *name = e->kind == AST_NAME ? e->name : e->kind == AST_CALL && e->a->kind == AST_NAME ? e->a->name : NULL;
    const choice *ch = find_choice(c, d, name);
    if (!ch) return;
    *(int *)((char *)t + ch->field) = ch->value;
    if (e->kind != AST_CALL) return;
    bool given[16] = {0};
    for (uint32_t i = 0; i < e->list.n; i++) {
        const ast_node *a = e->list.items[i];
        const hparam *h = choice_param(c, d, ch, a, i);
        if (!h) continue;
        size_t k = (size_t)(h - ch->params);
        if (k < NC_COUNT(given) && given[k]) {
            sema_err(c, a->loc, NULL, "%s %s: '%s' given twice", d->name, ch->name, h->name);
            continue;
        }
        if (k < NC_COUNT(given)) given[k] = true;
        set_hparam(c, t, h, sema_expr(c, a->kind == AST_KWARG ? a->a : a), a->loc);
    }
}

/* The argument NAME of a directive written as a call, or NULL. */
static const ast_node *directive_arg(const ast_node *d, const char *name)
{
    if (!d || d->a->kind != AST_CALL) return NULL;
    for (uint32_t j = 0; j < d->a->list.n; j++) {
        const ast_node *a = d->a->list.items[j];
        if (a->kind == AST_KWARG && strcmp(a->name, name) == 0) return a;
    }
    return NULL;
}

static void defaults(ir_train_spec *t)
{
    memset(t, 0, sizeof *t);
    t->present = true;
    t->optimizer = IR_OPT_ADAM;
    t->lr = 1e-3;
    t->beta1 = 0.9;
    t->beta2 = 0.999;
    t->eps = 1e-8;
    t->schedule = IR_SCHED_CONSTANT;
    t->gamma = 0.1;
    t->init_scale = 65536;
    t->growth_interval = 2000;
}

/* The directives given so far on the path the section's ifs take: each at
 * most once on it (one in each branch of an if is once). */
struct sema_train_state {
    ir_train_spec *t;
    const ast_node *given[4];   /* each directive's first statement, NULL until given */
    const ast_node *loss_at;    /* the last 'loss = ...' run */
};

static const char *const directives[] = {"optimizer", "schedule", "loss_scale", "clip_grad_norm"};

/* optimizer adam(lr: 1e-3), clip_grad_norm 1.0, ...: into the spec */
static void train_directive(sema_ctx *c, struct sema_train_state *st, const ast_node *s)
{
    size_t k = 0;
    while (k < NC_COUNT(directives) && strcmp(directives[k], s->name) != 0) k++;
    if (k == NC_COUNT(directives)) {
        sema_err(c, s->loc, "directives: optimizer, schedule, loss_scale, clip_grad_norm", "unknown directive '%s'", s->name);
        return;
    }
    if (st->given[k]) {
        char first[64];
        snprintf(first, sizeof first, "the first is at line %u", st->given[k]->loc.line);
        sema_err(c, s->loc, first, "'%s' given twice", s->name);
    } else {
        st->given[k] = s;
    }
    if (k == 3) {
        static const hparam clip = {"clip_grad_norm", F(clip_grad_norm), 'f', 0, 1e12, true};
        set_hparam(c, st->t, &clip, sema_expr(c, s->a), s->a->loc);
        return;
    }
    apply_choice(c, st->t, s);
}

void sema_train_stmt(sema_ctx *c, const ast_node *s)
{
    struct sema_train_state *st = c->train;
    if (s->kind == AST_LET) {   /* loss = ..., or a, b = f(...) */
        sema_exec_let(c, s);
        if (s->name && strcmp(s->name, "loss") == 0) st->loss_at = s;
    } else if (s->kind == AST_DIRECTIVE) {
        train_directive(c, st, s);
    } else {
        sema_err(c, s->loc, NULL, "a train section holds 'loss = ...', directives and ifs, not %s %s", ast_kind_article(s->kind),
                 ast_kind_name(s->kind));
    }
}

/* The section's statements: 'loss = ...' and other bindings, each directive
 * at most once, ifs choosing among them as in a model body (the taken
 * branch only); then the checks that need all of them. The model's body
 * has returned: the section's statements run after it all the same. */
static void train_statements(sema_ctx *c, ir_train_spec *t, const ast_node *train, const ast_node **loss_at)
{
    struct sema_train_state st = {.t = t};
    bool returned = c->returned, returned_in_if = c->returned_in_if;
    c->returned = c->returned_in_if = false;
    c->train = &st;
    sema_exec_stmts(c, &train->list);
    c->train = NULL;
    *loss_at = st.loss_at;
    c->returned = returned;
    c->returned_in_if = returned_in_if;
    if (t->optimizer == IR_OPT_ADAMW && !directive_arg(st.given[0], "weight_decay")) t->weight_decay = 0.01;
    const ast_node *sched = st.given[1];
    /* said at the schedule's line; a step_size given but out of range was reported already */
    if (t->schedule == IR_SCHED_STEP && !directive_arg(sched, "step_size"))
        sema_err(c, sched ? sched->loc : train->loc, "write: schedule step(step_size: 1000, gamma: 0.1)",
                 "schedule step needs step_size");
    if (t->schedule == IR_SCHED_COSINE && t->min_lr > t->lr) {
        const ast_node *at = directive_arg(sched, "min_lr");
        sema_err(c, at ? at->loc : sched ? sched->loc : train->loc, "min_lr is where the cosine ends: at most lr",
                 "schedule cosine: min_lr %g is above lr %g", t->min_lr, t->lr);
    }
}

/* The loss: 'loss = ...', or the model's only output if it is a scalar;
 * reported when there is none. */
static bool find_loss(sema_ctx *c, const ast_node *model, const ast_node *train, const ast_node *loss_at, sv *loss, nc_loc *at)
{
    const ir_graph *g = c->g;
    *at = train->loc;
    for (scope *s = c->env; s; s = s->parent)
        for (uint32_t i = s->n; i-- > 0;)
            if (strcmp(s->b[i].name, "loss") == 0) {
                *loss = s->b[i].value;
                if (loss_at) *at = loss_at->loc;
                return true;
            }
    if (g->noutputs == 1 && g->nodes[g->outputs[0].value].rank == 0) {
        *loss = sv_tensor(c, g->outputs[0].value);
        return true;
    }
    char hint[256] = "add a line like: loss = cross_entropy(logits, labels)";
    for (int i = c->nended; i-- > 0;)
        if (strcmp(c->ended[i].name, "loss") == 0 && c->ended[i].why && c->ended[i].why->kind == AST_IF) {
            snprintf(hint, sizeof hint, "'loss' is bound inside the if at line %u, which it outlives only when every branch "
                     "(with an else) binds it: bind it in each branch", c->ended[i].why->loc.line);
            break;
        }
    sema_err(c, train->loc, hint, "train section of '%s' defines no loss", model->name);
    return false;
}

/* What training needs of the loss and the parameters, said at their lines. */
static bool check_trainable(sema_ctx *c, const ast_node *train, sv loss, nc_loc at)
{
    const ir_graph *g = c->g;
    const ir_node *ln = loss.kind == SV_TENSOR ? &g->nodes[loss.t] : NULL;
    if (!ln || ln->rank != 0 || !dtype_is_float(ln->dtype)) {
        sema_err(c, at, ln ? "reduce it, e.g. mean(...)" : "the loss is computed from the model's values",
                 "the loss must be a floating-point scalar%s%s", ln ? "" : ", got ", ln ? "" : sv_kind_phrase(loss.kind));
        return false;
    }
    if (ln->dtype != NC_F32)
        sema_warn(c, ln->loc, "wrap it in f32(...) and compute the reduction in f32", "the loss is computed in %s; losses should be f32",
                  dtype_name(ln->dtype));
    bool f16_weight = false;
    for (uint32_t i = 0; i < g->nparams; i++) {   /* what train_step_build would refuse, said at the declaration */
        const ir_param *p = &g->params[i];
        if (p->role == IR_ROLE_WEIGHT && p->decl.dtype != NC_F32) {
            sema_err(c, p->decl.loc, "declare it f32 and compute in a precision block, which reads a narrow copy",
                     "parameter %s is %s: training keeps f32 master weights", p->decl.name, dtype_name(p->decl.dtype));
            f16_weight |= p->decl.dtype == NC_F16;
        }
    }
    /* beside "parameter w is f16" the f16 is a mistake already reported, not
     * a precision to protect: a loss-scaling warning there is noise */
    bool uses_f16 = false;
    for (ir_value v = 0; v < g->nnodes && !uses_f16; v++) uses_f16 = g->nodes[v].dtype == NC_F16;
    if (uses_f16 && !f16_weight && g->train.loss_scale == IR_SCALE_NONE)
        sema_warn(c, train->loc, "add: loss_scale dynamic", "f16 training without loss scaling: small gradients underflow to zero");
    return true;
}

/* Whether value v depends on an input declared by the train section: netc
 * train scores a classifier's test set against those labels, which says
 * nothing of a model whose loss never reads them (an autoencoder). Operands
 * precede their users, so one backward sweep marks what v reads. */
static bool reads_train_inputs(const ir_graph *g, ir_value v)
{
    bool *live = nc_xcalloc(g->nnodes + 1, 1), found = false;
    live[v] = true;
    for (ir_value u = v + 1; u-- > 0 && !found;) {
        if (!live[u]) continue;
        const ir_node *n = &g->nodes[u];
        found = n->op == OP_INPUT && n->attr.index >= g->train.first_train_input;
        for (int i = 0; i < n->nargs; i++) live[ir_args(g, n)[i]] = true;
    }
    free(live);
    return found;
}

/* The power of the batch symbol in dim d (B: 1, B * T after a reshape: 1,
 * 16: 0); the highest of its terms'. */
static int batch_power(const ir_graph *g, uint32_t d, uint8_t batch)
{
    const dim_expr *e = &g->dims[d];
    int most = 0;
    for (int k = 0; k < e->nterms; k++) {
        int p = 0;
        for (int f = 0; f < e->term[k].nfactors; f++) p += e->term[k].sym[f] == batch;
        if (p > most) most = p;
    }
    return most;
}

/* How a value scales with the batch size at fixed samples, for --accumulate:
 * its degree (a sample's value, or a mean over the batch: 0; a sum over the
 * batch: 1; that sum divided by f32(B): 0; a mean times f32(B): 1), or mixed
 * where samples meet other than linearly (a max over the batch, a sum's
 * square, a per-sample term plus a sum). varies: it reads an input or a
 * parameter (a constant term adds nothing to a gradient). from: the op that
 * made it so, the first written where several did (IR_NONE: none). */
typedef struct batch_scale {
    int degree;
    bool mixed, varies;
    ir_value from;
} batch_scale;

static bool scale_off(batch_scale s) { return s.degree != 0 || s.mixed; }

static void scale_blame(batch_scale *r, batch_scale s)
{
    if (scale_off(s) && s.from < r->from) r->from = s.from;
}

/* The scales of n operands (args) joined where the op is linear in each
 * (add, concat, where's branches): one degree, else mixed. */
static batch_scale scale_join(const batch_scale *sc, const ir_value *args, int n)
{
    batch_scale r = {0, false, false, IR_NONE};
    bool any = false;
    for (int i = 0; i < n; i++) {
        batch_scale o = sc[args[i]];
        if (!o.varies) continue;
        r.mixed |= o.mixed || (any && o.degree != r.degree);
        if (!any || o.degree) r.degree = o.degree;
        r.varies = any = true;
        scale_blame(&r, o);
    }
    return r;
}

/* A product's or quotient's: the degrees add up (sign -1: subtract). */
static batch_scale scale_product(batch_scale a, batch_scale b, int sign)
{
    batch_scale r = {a.degree + sign * b.degree, a.mixed || b.mixed, a.varies || b.varies, IR_NONE};
    if (scale_off(r)) scale_blame(&r, a), scale_blame(&r, b);
    return r;
}

/* Where an op made its operands' samples meet other than linearly. */
static batch_scale scale_mixed(batch_scale r, ir_value at)
{
    if (!scale_off(r)) r.from = at;
    r.mixed = true;
    return r;
}

/* r, its batch degree raised by p (a sum along an axis holding B^p) at v. */
static batch_scale scale_sum(batch_scale r, int p, ir_value v)
{
    if (p && !scale_off(r)) r.from = v;
    r.degree += p;
    return r;
}

/* The ops scale_of_node does not name, by their category in the op table:
 * r joins their operands' scales. */
static batch_scale scale_of_category(const ir_graph *g, ir_value v, batch_scale r, uint8_t batch)
{
    const ir_node *n = &g->nodes[v];
    const ir_node *x = n->nargs ? &g->nodes[ir_args(g, n)[0]] : NULL;
    const nc_op_info *op = &nc_ops[n->op];
    int p = 0;   /* the batch's power in the axes reduced, or along a row */
    if (op->category == CAT_REDUCTION)
        for (int k = 0; k < n->attr.naxes; k++) p += batch_power(g, x->shape[n->attr.axes[k]], batch);
    if (op->category == CAT_ROWWISE && x->rank) p = batch_power(g, x->shape[x->rank - 1], batch);
    if (op->category == CAT_REDUCTION && (op->flags & OPF_ACCUM) && !(op->flags & OPF_AVERAGES)) return scale_sum(r, p, v);
    if (p && !(op->flags & OPF_AVERAGES)) return scale_mixed(r, v);   /* a max or a softmax along the batch */
    if ((op->flags & OPF_AVERAGES) || op->category == CAT_REDUCTION || op->category == CAT_SOURCE) return r;
    return scale_off(r) ? scale_mixed(r, r.from) : r;   /* exp, square, softmax, ... of a sum over the batch */
}

static batch_scale scale_of_node(const ir_graph *g, ir_value v, const batch_scale *sc, uint8_t batch)
{
    const ir_node *n = &g->nodes[v];
    const ir_value *a = ir_args(g, n);
    const ir_node *x = n->nargs ? &g->nodes[a[0]] : NULL;
    const batch_scale *in0 = n->nargs > 0 ? &sc[a[0]] : NULL, *in1 = n->nargs > 1 ? &sc[a[1]] : NULL;
    switch (n->op) {
    case OP_INPUT: case OP_PARAM:
        return (batch_scale){0, false, true, IR_NONE};
    case OP_DIM_VALUE: {
        int p = batch_power(g, n->attr.lo, batch);
        return (batch_scale){p, false, false, p ? v : IR_NONE};
    }
    case OP_MUL: case OP_DIV:
        return scale_product(*in0, *in1, n->op == OP_MUL ? 1 : -1);
    case OP_ADD: case OP_SUB: case OP_MAXIMUM: case OP_MINIMUM: case OP_CONCAT:
        return scale_join(sc, a, n->nargs);
    case OP_WHERE:
        return scale_off(*in0) ? scale_mixed(scale_join(sc, a, 3), v) : scale_join(sc, a + 1, 2);
    case OP_NEG: case OP_CAST: case OP_COPY: case OP_DROPOUT:
    case OP_TRANSPOSE: case OP_RESHAPE: case OP_SLICE: case OP_BROADCAST:
        return *in0;
    case OP_GATHER:   /* rows of a table picked by per-sample indices */
        return scale_off(*in1) ? scale_mixed(scale_join(sc, a, 2), v) : *in0;
    case OP_SCATTER_ADD: {   /* src's rows added into rows: a sum where they are the samples' */
        int p = batch_power(g, g->nodes[a[1]].shape[0], batch) - batch_power(g, n->shape[0], batch);
        batch_scale r = scale_off(*in0) ? scale_mixed(scale_join(sc, a, 2), v) : *in1;
        return scale_sum(r, p > 0 ? p : 0, v);
    }
    case OP_MATMUL:   /* a product adds up along its inner axis */
        return scale_sum(scale_product(*in0, *in1, 1), batch_power(g, x->shape[x->rank - (n->attr.ta ? 2 : 1)], batch), v);
    default: return scale_of_category(g, v, scale_join(sc, a, n->nargs), batch);
    }
}

/* The op that makes the loss other than a mean over the batch (a sum of
 * per-sample terms, a max along it, a mean times B), where the batch is the
 * first input's first axis and a symbol: --accumulate K averages K
 * micro-batches' gradients, which is one batch's only for a loss of degree 0
 * in the batch size (batch_scale). */
static void find_batch_reduce(const ir_graph *g, ir_value v, ir_train_spec *t)
{
    if (g->ninputs < 1 || g->inputs[0].rank < 1) return;
    const dim_expr *d0 = &g->dims[g->inputs[0].shape[0]];
    if (d0->nterms != 1 || d0->term[0].nfactors != 1 || d0->term[0].coeff != 1) return;
    const uint8_t batch = d0->term[0].sym[0];
    batch_scale *sc = nc_xcalloc(v + 1, sizeof *sc);
    for (ir_value u = 0; u <= v; u++) sc[u] = scale_of_node(g, u, sc, batch);
    if (scale_off(sc[v]) && sc[v].from != IR_NONE) {
        const ir_node *n = &g->nodes[sc[v].from];
        t->loss_mixes_batch = true, t->batch_reduce_op = n->op, t->batch_reduce_loc = n->loc;
        t->batch_reduce_dim = n->op == OP_DIM_VALUE ? n->attr.lo : 0;
    }
    free(sc);
}

void sema_train(sema_ctx *c, const ast_node *model, const ast_node *train)
{
    ir_graph *g = c->g;
    ir_train_spec *t = &g->train;
    defaults(t);
    t->loc = train->loc;
    t->first_train_input = g->ninputs;
    /* outputs are visible by their names */
    for (uint32_t i = 0; i < g->noutputs; i++) sema_bind(c, g->outputs[i].name, sv_tensor(c, g->outputs[i].value), model->loc);
    sema_declare_train_inputs(c, &train->list2);   /* extra inputs (targets) */
    const ast_node *loss_at = NULL;
    train_statements(c, t, train, &loss_at);
    sv loss = sv_error();
    nc_loc at;
    if (!find_loss(c, model, train, loss_at, &loss, &at) || loss.kind == SV_ERROR || !check_trainable(c, train, loss, at)) return;
    t->loss = loss.t;
    t->loss_reads_train_inputs = reads_train_inputs(g, t->loss);
    t->loss_loc = loss_at ? loss_at->loc : (nc_loc){0};
    find_batch_reduce(g, t->loss, t);
}
