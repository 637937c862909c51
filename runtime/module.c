/* module.c - writing and reading .netm files.
 *
 * The file is a header, a table of sections, and the sections. Every read goes
 * through a bounds-checked cursor; counts are checked against the bytes left
 * before anything is allocated, so a hostile file cannot ask for absurd
 * memory; and the decoded graph is re-verified with the op table's type rules
 * before anyone runs it. */
#include "module.h"
#include "atomic_file.h"
#include "file_open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SEC_GRAPH = 1, SEC_PROGRAM = 2, SEC_SOURCE = 3, SEC_IMAGE = 4, SEC_ENTRY = 5 };

/* ------------------------------------------------------------------ */
/* writer                                                               */

/* The longest text each field holds, the same for the writer and the
 * reader: a module netc writes is one netc reads back. */
enum {
    MODULE_NAME_MAX = 4096,       /* a tensor's, dim's, file's name; a require's texts */
    MODULE_KERNEL_NAME_MAX = 256,
    MODULE_ENTRY_NAME_MAX = 64,
    MODULE_ARCH_MAX = 15,
};
#define MODULE_SOURCE_MAX (1u << 30)

typedef struct wbuf {
    unsigned char *p;
    size_t n, cap;
    const char *too_long;   /* the first text past its field's limit: the module is refused */
    uint32_t too_long_max;
} wbuf;

static void w_bytes(wbuf *b, const void *data, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = nc_xrealloc(b->p, b->cap);
    }
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void w_u8(wbuf *b, uint8_t v) { w_bytes(b, &v, 1); }
static void w_u32(wbuf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    w_bytes(b, x, 4);
}
static void w_u64(wbuf *b, uint64_t v)
{
    w_u32(b, (uint32_t)v);
    w_u32(b, (uint32_t)(v >> 32));
}
static void w_f64(wbuf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    w_u64(b, u);
}
static void w_str(wbuf *b, const char *s, uint32_t limit)
{
    size_t n = s ? strlen(s) : 0;
    if (n > limit && !b->too_long) b->too_long = s, b->too_long_max = limit;
    w_u32(b, (uint32_t)n);
    w_bytes(b, s, n);
}

static void w_loc(wbuf *b, nc_loc l)
{
    w_u32(b, l.file);
    w_u32(b, l.line);
    w_u32(b, l.col);
}

static void w_decl(wbuf *b, const ir_tensor_decl *d)
{
    w_str(b, d->name, MODULE_NAME_MAX);
    w_u8(b, (uint8_t)d->dtype);
    w_u8(b, d->rank);
    for (int i = 0; i < d->rank; i++) w_u32(b, d->shape[i]);
    w_loc(b, d->loc);
}

static void w_attr(wbuf *b, const ir_attr *a)
{
    w_f64(b, a->f);
    w_u64(b, (uint64_t)a->seed);
    w_u32(b, (uint32_t)a->axis);
    w_u8(b, a->naxes);
    for (int i = 0; i < NC_MAX_RANK; i++) w_u8(b, (uint8_t)a->axes[i]);
    w_u8(b, (uint8_t)(a->keepdim | a->ta << 1 | a->tb << 2 | a->causal << 3 | a->f32_result << 4));
    w_u32(b, a->lo);
    w_u32(b, a->hi);
    w_u8(b, (uint8_t)a->to);
    w_u32(b, a->index);
}

static void write_train(wbuf *b, const ir_train_spec *t)
{
    w_u8(b, t->present);
    w_u32(b, t->loss);
    w_u32(b, t->first_train_input);
    w_u8(b, (uint8_t)t->optimizer);
    double f[] = {t->lr, t->momentum, t->beta1, t->beta2, t->eps, t->weight_decay, t->gamma, t->min_lr, t->init_scale,
                  t->clip_grad_norm};
    for (size_t i = 0; i < NC_COUNT(f); i++) w_f64(b, f[i]);
    w_u8(b, t->nesterov);
    w_u8(b, (uint8_t)t->schedule);
    w_u64(b, (uint64_t)t->warmup_steps);
    w_u64(b, (uint64_t)t->step_size);
    w_u64(b, (uint64_t)t->total_steps);
    w_u8(b, (uint8_t)t->loss_scale);
    w_u64(b, (uint64_t)t->growth_interval);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The reader refuses a checkpoint region past the node count, which only
 * numbers left unused can reach (@checkpoint blocks of dead code): then
 * each region is written as its rank among those the nodes use, in order.
 * NULL: every region as it is. */
static uint32_t *region_ranks(const ir_graph *g)
{
    bool over = false;
    for (ir_value v = 0; v < g->nnodes; v++) over |= g->nodes[v].region > g->nnodes;
    if (!over) return NULL;
    uint32_t *ids = nc_xmalloc((g->nnodes + 1) * sizeof *ids), *rank = nc_xmalloc((g->nnodes + 1) * sizeof *rank);
    for (ir_value v = 0; v < g->nnodes; v++) ids[v] = g->nodes[v].region;
    qsort(ids, g->nnodes, sizeof *ids, cmp_u32);
    uint32_t n = 0;
    for (ir_value v = 0; v < g->nnodes; v++)
        if (ids[v] && (n == 0 || ids[n - 1] != ids[v])) ids[n++] = ids[v];
    for (ir_value v = 0; v < g->nnodes; v++) {
        uint32_t r = g->nodes[v].region;
        const uint32_t *at = r ? bsearch(&r, ids, n, sizeof *ids, cmp_u32) : NULL;
        rank[v] = at ? (uint32_t)(at - ids) + 1 : 0;
    }
    free(ids);
    return rank;
}

/* Each dim as its terms: a coefficient times symbols (by index). */
static void write_dims(wbuf *b, const ir_graph *g)
{
    w_u32(b, g->ndims);
    for (uint32_t i = 0; i < g->ndims; i++) {
        const dim_expr *d = &g->dims[i];
        w_u8(b, d->nterms);
        for (int t = 0; t < d->nterms; t++) {
            w_u64(b, (uint64_t)d->term[t].coeff);
            w_u8(b, d->term[t].nfactors);
            for (int k = 0; k < d->term[t].nfactors; k++) w_u8(b, d->term[t].sym[k]);
        }
    }
}

static void write_params(wbuf *b, const ir_graph *g)
{
    w_u32(b, g->nparams);
    for (uint32_t i = 0; i < g->nparams; i++) {
        w_decl(b, &g->params[i].decl);
        w_u8(b, (uint8_t)g->params[i].role);
        w_u8(b, (uint8_t)g->params[i].init);
        w_f64(b, g->params[i].init_a);
        w_f64(b, g->params[i].init_b);
    }
}

static void write_nodes(wbuf *b, const ir_graph *g)
{
    w_u32(b, g->nnodes);
    uint32_t *rank = region_ranks(g);
    for (uint32_t v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        w_u32(b, (uint32_t)n->op);
        w_u8(b, (uint8_t)n->dtype);
        w_u8(b, n->rank);
        w_u8(b, n->flags);
        for (int i = 0; i < n->rank; i++) w_u32(b, n->shape[i]);
        w_u32(b, rank ? rank[v] : n->region);
        w_attr(b, &n->attr);
        w_loc(b, n->loc);
        w_u32(b, n->nargs);
        for (int i = 0; i < n->nargs; i++) w_u32(b, ir_args(g, n)[i]);
    }
    free(rank);
}

/* The outputs, the updates of a training step, the conditions on sizes. */
static void write_results(wbuf *b, const ir_graph *g)
{
    w_u32(b, g->noutputs);
    for (uint32_t i = 0; i < g->noutputs; i++) {
        w_str(b, g->outputs[i].name, MODULE_NAME_MAX);
        w_u32(b, g->outputs[i].value);
    }
    w_u32(b, g->nupdates);
    for (uint32_t i = 0; i < g->nupdates; i++) {
        w_u32(b, g->updates[i].param);
        w_u32(b, g->updates[i].value);
    }
    w_u32(b, g->nrequires);
    for (uint32_t i = 0; i < g->nrequires; i++) {
        const ir_require *q = &g->requires[i];
        w_u32(b, q->lhs);
        w_u32(b, q->rhs);
        w_u8(b, (uint8_t)q->cmp);
        w_str(b, q->message, MODULE_NAME_MAX);
        w_str(b, q->hint ? q->hint : "", MODULE_NAME_MAX);
        w_loc(b, q->loc);
        w_loc(b, q->site);
    }
}

/* In the order read_graph reads it. */
static void write_graph(wbuf *b, const ir_graph *g)
{
    w_str(b, g->name, MODULE_NAME_MAX);
    w_u32(b, g->nsyms);
    for (uint32_t i = 0; i < g->nsyms; i++) w_str(b, g->sym_names[i], MODULE_NAME_MAX);
    write_dims(b, g);
    w_u32(b, g->nfiles);
    for (uint32_t i = 0; i < g->nfiles; i++) w_str(b, g->files[i], MODULE_NAME_MAX);
    w_u32(b, g->ninputs);
    for (uint32_t i = 0; i < g->ninputs; i++) w_decl(b, &g->inputs[i]);
    write_params(b, g);
    write_nodes(b, g);
    write_results(b, g);
    write_train(b, &g->train);
}

static void write_program(wbuf *b, const nrt_program *p)
{
    w_u32(b, p->nkernels);
    for (uint32_t i = 0; i < p->nkernels; i++) w_str(b, p->kernel_names[i], MODULE_KERNEL_NAME_MAX);
    w_u32(b, p->ntemps);
    for (uint32_t i = 0; i < p->ntemps; i++) {
        w_u32(b, p->temps[i].numel);
        w_u8(b, (uint8_t)p->temps[i].dtype);
    }
    w_u32(b, p->nsteps);
    for (uint32_t i = 0; i < p->nsteps; i++) {
        const nrt_step *s = &p->steps[i];
        w_u8(b, (uint8_t)s->kind);
        w_u8(b, (uint8_t)s->grid);
        w_u32(b, s->kernel);
        w_u32(b, s->node);
        w_u8(b, s->nbufs);
        for (int k = 0; k < s->nbufs; k++) w_u32(b, s->bufs[k]);
        w_u8(b, s->nints);
        for (int k = 0; k < s->nints; k++) w_u32(b, s->ints[k]);
        w_u8(b, s->mm_batch_rank);
        w_u8(b, (uint8_t)(s->mm_ta | s->mm_tb << 1 | s->mm_b_shared << 2));
        w_u8(b, (uint8_t)s->mm_dtype);
        w_u8(b, (uint8_t)s->mm_out_dtype);
        w_u8(b, s->mm_epilogue);
        w_u64(b, s->spread_reads);
        w_u64(b, s->writes);
        w_u8(b, s->sections);
        for (int k = 0; s->sections > 1 && k < s->nbufs; k++) w_u8(b, s->slot_section[k]);
        w_u32(b, s->batch);
        w_u32(b, s->batch_kernel);
        w_u8(b, s->prepare);
    }
    w_u32(b, p->plan_flags);
}

static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nc_verrf(err, cap, fmt, ap);   /* a path or a name too long for err ends in "...", not cut silently */
    va_end(ap);
    return -1;
}

/* The whole file image of m in all (entries as nested images). */
static int serialize(const nrt_module_data *m, wbuf *all, char *err, size_t errcap)
{
    wbuf sec[NRT_MODULE_SECTIONS_MAX] = {{0}};
    uint32_t kinds[NRT_MODULE_SECTIONS_MAX], nsec = 0;
    if (m->nentries > NRT_ENTRY_MAX)
        return fail(err, errcap, "a module holds at most %d entry points, not %u", NRT_ENTRY_MAX, m->nentries);
    /* the graph, program and source sections, then one an image and one an entry */
    uint64_t need = 3 + (uint64_t)m->nimages + m->nentries;
    if (need > NRT_MODULE_SECTIONS_MAX)
        return fail(err, errcap,
                    "a module holds at most %d sections, and this one would need %llu (%u compiled images, %u entry points "
                    "and 3 more): build it for fewer targets",
                    NRT_MODULE_SECTIONS_MAX, (unsigned long long)need, m->nimages, m->nentries);
    write_graph(&sec[nsec], m->graph), kinds[nsec++] = SEC_GRAPH;
    write_program(&sec[nsec], &m->program), kinds[nsec++] = SEC_PROGRAM;
    w_str(&sec[nsec], m->program.source ? m->program.source : "", MODULE_SOURCE_MAX), kinds[nsec++] = SEC_SOURCE;
    for (uint32_t i = 0; i < m->nimages; i++) {
        wbuf *b = &sec[nsec];
        w_str(b, m->images[i].arch, MODULE_ARCH_MAX);
        w_u8(b, m->images[i].is_ptx);
        w_u32(b, (uint32_t)m->nvrtc_version);
        w_u64(b, m->images[i].size);
        w_bytes(b, m->images[i].data, m->images[i].size);
        kinds[nsec++] = SEC_IMAGE;
    }
    int rc = 0;
    for (uint32_t i = 0; i < m->nentries && rc == 0; i++) {
        wbuf *b = &sec[nsec], nested = {0};
        if (m->entries[i].data.nentries) rc = fail(err, errcap, "entry points do not nest");
        else rc = serialize(&m->entries[i].data, &nested, err, errcap);
        w_str(b, m->entries[i].name, MODULE_ENTRY_NAME_MAX);
        w_bytes(b, nested.p, nested.n);
        free(nested.p);
        kinds[nsec++] = SEC_ENTRY;
    }
    for (uint32_t i = 0; i < nsec && rc == 0; i++)
        if (sec[i].too_long)
            rc = fail(err, errcap, "a name of %zu bytes (%.40s...) is longer than a module holds (%u bytes): shorten it",
                      strlen(sec[i].too_long), sec[i].too_long, sec[i].too_long_max);
    w_bytes(all, NRT_MODULE_MAGIC, 8);
    w_u32(all, NRT_MODULE_VERSION);
    w_u32(all, nsec);
    uint64_t offset = 8 + 4 + 4 + 8 + (uint64_t)nsec * 24, total = offset;
    for (uint32_t i = 0; i < nsec; i++) total += sec[i].n;
    w_u64(all, total);
    for (uint32_t i = 0; i < nsec; i++) {
        w_u32(all, kinds[i]);
        w_u32(all, 0);
        w_u64(all, offset);
        w_u64(all, sec[i].n);
        offset += sec[i].n;
    }
    for (uint32_t i = 0; i < nsec; i++) {
        w_bytes(all, sec[i].p, sec[i].n);
        free(sec[i].p);
    }
    return rc;
}

int module_write(const char *path, const nrt_module_data *m, char *err, size_t errcap)
{
    wbuf all = {0};
    if (serialize(m, &all, err, errcap) != 0) {
        free(all.p);
        return -1;
    }
    atomic_file af;
    int rc = atomic_file_open(&af, path, err, errcap);
    if (rc == 0) rc = atomic_file_commit(&af, path, fwrite(all.p, 1, all.n, af.f) == all.n, err, errcap);
    free(all.p);
    return rc;
}

/* ------------------------------------------------------------------ */
/* reader                                                               */

typedef struct rd {
    const unsigned char *p;
    size_t n, at;
    bool bad;
    char *err;
    size_t errcap;
    const char *what;          /* which part is being read, for messages */
} rd;

static bool r_need(rd *r, size_t n)
{
    if (r->bad) return false;
    if (n > r->n - r->at) {
        r->bad = true;
        fail(r->err, r->errcap, "module is truncated or corrupt (in the %s)", r->what);
        return false;
    }
    return true;
}

static uint8_t r_u8(rd *r) { return r_need(r, 1) ? r->p[r->at++] : 0; }
static uint32_t r_u32(rd *r)
{
    if (!r_need(r, 4)) return 0;
    const unsigned char *q = r->p + r->at;
    r->at += 4;
    return (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
}
static uint64_t r_u64(rd *r)
{
    uint64_t lo = r_u32(r);
    return lo | (uint64_t)r_u32(r) << 32;
}
static double r_f64(rd *r)
{
    uint64_t u = r_u64(r);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static bool r_invalid(rd *r, const char *fmt, ...)
{
    if (r->bad) return false;
    r->bad = true;
    va_list ap;
    va_start(ap, fmt);
    char *msg = nc_xvasprintf(fmt, ap);
    va_end(ap);
    fail(r->err, r->errcap, "module is corrupt (%s): %s", r->what, msg);
    free(msg);
    return false;
}

/* A batch (cuda_batch.c) is a run of element-grid kernel steps inside the
 * program, launched by one of its kernels; its steps start no batch of
 * their own. */
static bool check_batches(rd *r, const nrt_program *p)
{
    for (uint32_t i = 0; i < p->nsteps; i++) {
        const nrt_step *s = &p->steps[i];
        if (s->batch == 0) continue;
        if (s->batch < 2 || s->batch > NRT_MAX_BATCH || s->batch > p->nsteps - i || s->batch_kernel >= p->nkernels)
            return r_invalid(r, "step %u: a batch of %u steps with kernel %u", i, s->batch, s->batch_kernel);
        for (uint32_t j = i; j < i + s->batch; j++) {
            const nrt_step *m = &p->steps[j];
            if (m->kind != NRT_STEP_KERNEL || m->grid != NRT_GRID_ELEMENTS || (j > i && m->batch != 0))
                return r_invalid(r, "step %u: step %u cannot be part of its batch", i, j);
        }
        i += s->batch - 1u;
    }
    return true;
}

/* Prepare steps (run when parameters are set, not every run) each depend
 * on parameters and constants alone, or touch only temporaries (a sort of
 * constant indices, nrt_program_prepare_temps): a step reading an input
 * must run every time. In a program that updates parameters they make the copies
 * the update's kernels store again (compiler/cuda_fuse.c); the reader
 * cannot tell that apart from a stale copy, any more than other kernels'
 * code from wrong code. A batch is all prepare steps or none. */
static bool check_prepare(rd *r, const ir_graph *g, const nrt_program *p)
{
    bool *from = NULL;
    bool ok = true;
    for (uint32_t i = 0; i < p->nsteps && ok; i++) {
        const nrt_step *s = &p->steps[i];
        for (uint32_t j = i + 1; j < i + s->batch && ok; j++)
            if (p->steps[j].prepare != s->prepare) ok = r_invalid(r, "step %u: a batch of prepare and other steps", i);
        if (!s->prepare || !ok) continue;
        if (!from) from = ir_parameter_values(g);
        if (!nrt_step_param_only(g, from, s) && !nrt_step_temps_only(g, s))
            ok = r_invalid(r, "step %u: a prepare step that reads more than parameters", i);
    }
    free(from);
    return ok;
}

/* A count of items that take at least min_bytes each: must fit what is left. */
static uint32_t r_count(rd *r, size_t min_bytes, uint32_t limit)
{
    uint32_t c = r_u32(r);
    if (r->bad) return 0;
    if (c > limit || (size_t)c * min_bytes > r->n - r->at) {
        r_invalid(r, "count %u is impossible here", c);
        return 0;
    }
    return c;
}

static char *r_str(rd *r, uint32_t limit)
{
    uint32_t n = r_count(r, 1, limit);
    if (r->bad) return NULL;
    char *s = nc_xmalloc(n + 1);
    memcpy(s, r->p + r->at, n);
    s[n] = 0;
    r->at += n;
    if (memchr(s, 0, n)) {
        free(s);
        r_invalid(r, "a name contains a NUL byte");
        return NULL;
    }
    return s;
}

static nc_loc r_loc(rd *r)
{
    nc_loc l;
    l.file = r_u32(r);
    l.line = r_u32(r);
    l.col = r_u32(r);
    return l;
}

static bool r_dtype(rd *r, nc_dtype *t)
{
    uint8_t v = r_u8(r);
    if (v >= NC_DTYPE_COUNT) return r_invalid(r, "dtype %u", v);
    *t = (nc_dtype)v;
    return !r->bad;
}

static bool r_shape(rd *r, const ir_graph *g, uint8_t *rank, uint32_t *shape)
{
    *rank = r_u8(r);
    if (*rank > NC_MAX_RANK) return r_invalid(r, "rank %u", *rank);
    for (int i = 0; i < *rank; i++) {
        shape[i] = r_u32(r);
        if (shape[i] >= g->ndims) return r_invalid(r, "dim id %u of %u", shape[i], g->ndims);
    }
    return !r->bad;
}

static bool r_decl(rd *r, const ir_graph *g, ir_tensor_decl *d)
{
    memset(d, 0, sizeof *d);
    d->name = r_str(r, MODULE_NAME_MAX);
    if (!r_dtype(r, &d->dtype) || !r_shape(r, g, &d->rank, d->shape)) return false;
    d->loc = r_loc(r);
    if (!r->bad && d->loc.file > g->nfiles) return r_invalid(r, "source file index %u", d->loc.file);
    return !r->bad;
}

static bool r_dims(rd *r, ir_graph *g)
{
    uint32_t n = r_count(r, 1, 1u << 20);
    for (uint32_t i = 0; i < n && !r->bad; i++) {
        dim_expr d = {0};
        d.nterms = r_u8(r);
        if (d.nterms > DIM_MAX_TERMS) return r_invalid(r, "dim with %u terms", d.nterms);
        for (int t = 0; t < d.nterms; t++) {
            dim_term *term = &d.term[t];
            term->coeff = (int64_t)r_u64(r);
            if (term->coeff > DIM_LIMIT || term->coeff < -DIM_LIMIT) return r_invalid(r, "dim coefficient out of range");
            uint8_t nfactors = r_u8(r);
            if (nfactors > DIM_MAX_FACTORS) return r_invalid(r, "dim with %u factors", nfactors);
            term->nfactors = nfactors;
            for (unsigned k = 0; k < nfactors; k++) {
                uint8_t sym = r_u8(r);
                if (sym >= g->nsyms) return r_invalid(r, "dim refers to symbol %u of %u", sym, g->nsyms);
                term->sym[k] = sym;
            }
        }
        ir_dim_append(g, &d);   /* not interned: ids must stay as written */
    }
    return !r->bad;
}

static bool r_attr(rd *r, const ir_graph *g, ir_attr *a)
{
    a->f = r_f64(r);
    a->seed = (int64_t)r_u64(r);
    a->axis = (int32_t)r_u32(r);
    a->naxes = r_u8(r);
    if (a->naxes > NC_MAX_RANK) return r_invalid(r, "%u axes", a->naxes);
    for (int i = 0; i < NC_MAX_RANK; i++) a->axes[i] = (int8_t)r_u8(r);
    uint8_t bits = r_u8(r);
    if (bits >> 5) return r_invalid(r, "attribute flags 0x%x", bits);
    a->keepdim = bits & 1, a->ta = bits >> 1 & 1, a->tb = bits >> 2 & 1, a->causal = bits >> 3 & 1;
    a->f32_result = bits >> 4 & 1;
    a->lo = r_u32(r);
    a->hi = r_u32(r);
    if (!r->bad && (a->lo >= g->ndims || a->hi >= g->ndims) && (a->lo || a->hi))
        return r_invalid(r, "attribute dim out of range");
    if (!r_dtype(r, &a->to)) return false;
    a->index = r_u32(r);
    return !r->bad;
}

/* A node's checkpoint region is numbered from 1, one number an @checkpoint
 * block or --memory-budget segment: more than the graph's nodes is damage
 * (the writer renumbers regions that high, region_ranks). Nothing at run
 * time reads it, but ir_print shows it. Its flags are ir_verify's to check. */
static bool r_node(rd *r, ir_graph *g, ir_value v, uint32_t nnodes)
{
    ir_node n = {0};
    uint32_t op = r_u32(r);
    if (op >= OP_COUNT) return r_invalid(r, "node %%%u has op %u", v, op);
    n.op = (nc_op)op;
    if (!r_dtype(r, &n.dtype)) return false;
    n.rank = r_u8(r);
    n.flags = r_u8(r);
    if (n.rank > NC_MAX_RANK) return r_invalid(r, "node %%%u has rank %u", v, n.rank);
    for (int i = 0; i < n.rank; i++) {
        n.shape[i] = r_u32(r);
        if (n.shape[i] >= g->ndims) return r_invalid(r, "node %%%u: dim id %u", v, n.shape[i]);
    }
    n.region = r_u32(r);
    if (!r->bad && n.region > nnodes)
        return r_invalid(r, "node %%%u: checkpoint region %u of a graph of %u nodes", v, n.region, nnodes);
    if (!r_attr(r, g, &n.attr)) return false;
    n.loc = r_loc(r);
    if (n.loc.file > g->nfiles) return r_invalid(r, "node %%%u: source file %u", v, n.loc.file);
    uint32_t nargs = r_count(r, 4, 4096);
    if (r->bad) return false;
    ir_value args[4096];
    for (uint32_t i = 0; i < nargs; i++) {
        args[i] = r_u32(r);
        if (!r->bad && args[i] >= v) return r_invalid(r, "node %%%u reads %%%u, which does not precede it", v, args[i]);
    }
    if (r->bad) return false;
    if ((n.op == OP_INPUT && n.attr.index >= g->ninputs) || (n.op == OP_PARAM && n.attr.index >= g->nparams))
        return r_invalid(r, "node %%%u: index %u", v, n.attr.index);
    ir_add(g, &n, args, (uint16_t)nargs);
    return true;
}

static bool r_train(rd *r, ir_graph *g)
{
    ir_train_spec *t = &g->train;
    uint8_t present = r_u8(r);
    t->loss = r_u32(r);
    t->first_train_input = r_u32(r);
    uint8_t opt = r_u8(r);
    double *f[] = {&t->lr, &t->momentum, &t->beta1, &t->beta2, &t->eps, &t->weight_decay, &t->gamma, &t->min_lr,
                   &t->init_scale, &t->clip_grad_norm};
    for (size_t i = 0; i < NC_COUNT(f); i++) *f[i] = r_f64(r);
    uint8_t nesterov = r_u8(r);
    uint8_t sched = r_u8(r);
    t->warmup_steps = (int64_t)r_u64(r);
    t->step_size = (int64_t)r_u64(r);
    t->total_steps = (int64_t)r_u64(r);
    uint8_t scale = r_u8(r);
    t->growth_interval = (int64_t)r_u64(r);
    if (r->bad) return false;
    if (opt > IR_OPT_ADAMW || sched > IR_SCHED_COSINE || scale > IR_SCALE_DYNAMIC) return r_invalid(r, "training enum out of range");
    if (present > 1 || nesterov > 1) return r_invalid(r, "training flag %u", present > 1 ? present : nesterov);
    t->present = present, t->nesterov = nesterov;
    t->optimizer = (ir_optimizer)opt, t->schedule = (ir_schedule)sched, t->loss_scale = (ir_loss_scale)scale;
    if (t->present && ((t->loss >= g->nnodes && t->loss != IR_NONE) || t->first_train_input > g->ninputs))
        return r_invalid(r, "training loss out of range");
    return true;
}

/* A condition on sizes (ir_require): dims of this graph, a comparison,
 * its message, and locations in its files. */
static bool r_require(rd *r, ir_graph *g)
{
    ir_require q = {0};
    q.lhs = r_u32(r);
    q.rhs = r_u32(r);
    uint8_t cmp = r_u8(r);
    q.message = r_str(r, MODULE_NAME_MAX);
    q.hint = r_str(r, MODULE_NAME_MAX);
    q.loc = r_loc(r);
    q.site = r_loc(r);
    bool ok = !r->bad;
    if (ok && (q.lhs >= g->ndims || q.rhs >= g->ndims || cmp >= IR_CMP_COUNT || q.loc.file > g->nfiles || q.site.file > g->nfiles))
        ok = r_invalid(r, "require out of range");
    q.cmp = (ir_cmp)cmp;
    if (ok) ir_require_add(g, &q);
    free(q.message);
    free(q.hint);
    return ok;
}

static void r_param(rd *r, ir_graph *g)
{
    ir_param p = {0};
    if (r_decl(r, g, &p.decl)) {
        uint8_t role = r_u8(r);
        if (role > IR_ROLE_BUFFER) r_invalid(r, "parameter role %u", role);
        p.role = (ir_param_role)role;
        uint8_t init = r_u8(r);
        if (init >= IR_INIT_COUNT) r_invalid(r, "initializer %u", init);
        p.init = (ir_init_kind)init;
        p.init_a = r_f64(r);
        p.init_b = r_f64(r);
    }
    if (!r->bad) ir_param_add(g, &p);
    free(p.decl.name);
}

static void r_output(rd *r, ir_graph *g)
{
    char *s = r_str(r, MODULE_NAME_MAX);
    uint32_t v = r_u32(r);
    if (!r->bad && v >= g->nnodes) r_invalid(r, "output %s refers to %%%u", s, v);
    /* the session reads an output's memory after the run, which an input's or a
     * parameter's is not: set or updated since, it would not be what the run read */
    if (!r->bad && (g->nodes[v].op == OP_INPUT || g->nodes[v].op == OP_PARAM))
        r_invalid(r, "output %s is %s node %%%u itself, not a copy of it", s,
                  g->nodes[v].op == OP_INPUT ? "input" : "parameter", v);
    if (!r->bad) ir_output_add(g, s, v);
    free(s);
}

/* The symbolic dims' names, each once: a dim refers to its symbol by index. */
static void r_syms(rd *r, ir_graph *g)
{
    uint32_t nsyms = r_count(r, 4, NC_MAX_SYMS);
    for (uint32_t i = 0; i < nsyms && !r->bad; i++) {
        char *s = r_str(r, MODULE_NAME_MAX);   /* as long as the other names netc writes (a dim of 300 bytes was refused) */
        if (s && ir_sym_add(g, s) != (int)i) r_invalid(r, "duplicate symbol %s", s);
        free(s);
    }
}

static void r_files(rd *r, ir_graph *g)
{
    uint32_t nfiles = r_count(r, 4, 4096);
    for (uint32_t i = 0; i < nfiles && !r->bad; i++) {
        char *s = r_str(r, MODULE_NAME_MAX);   /* netc names each file once: its nodes' locations say which */
        if (s && ir_file_add(g, s) != i + 1) r_invalid(r, "source file %s listed twice", s);
        free(s);
    }
}

static void r_inputs(rd *r, ir_graph *g)
{
    uint32_t ninputs = r_count(r, 6, 1u << 16);
    for (uint32_t i = 0; i < ninputs && !r->bad; i++) {
        ir_tensor_decl d;
        if (r_decl(r, g, &d)) ir_input_add(g, &d);
        free(d.name);
    }
}

/* The assignments to parameters (and optimizer state) a training step makes. */
static void r_updates(rd *r, ir_graph *g)
{
    uint32_t nupd = r_count(r, 8, 1u << 20);
    for (uint32_t i = 0; i < nupd && !r->bad; i++) {
        uint32_t p = r_u32(r), v = r_u32(r);
        if (!r->bad && (p >= g->nparams || v >= g->nnodes)) r_invalid(r, "update %u out of range", i);
        if (!r->bad) ir_update_add(g, p, v);
    }
}

/* The decoded graph through the verifier (the op table's type rules): a
 * graph that passes every bounds check can still be no graph netc makes. */
static void r_verify(rd *r, const ir_graph *g)
{
    char *buf = NULL;   /* the verifier's whole text: a problem names a tensor, of any length */
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    int problems = mem ? ir_verify(g, mem) : 1;
    if (mem) fclose(mem);
    if (buf) buf[strcspn(buf, "\n")] = 0;   /* the first problem, on one line */
    if (problems) r_invalid(r, "the graph fails verification: %s%s", buf && buf[0] ? buf : "?", problems > 1 ? " (and more)" : "");
    free(buf);
}

static ir_graph *read_graph(rd *r)
{
    r->what = "graph";
    char *name = r_str(r, MODULE_NAME_MAX);
    if (!name) return NULL;
    ir_graph *g = ir_graph_new(name);
    free(name);
    r_syms(r, g);
    r_dims(r, g);
    /* Each item goes through ir.c's appends, which grow their lists by
     * doubling: a list of 2^20 (a count the bytes left allow) costs no more
     * than reading it. */
    r_files(r, g);
    r_inputs(r, g);
    uint32_t nparams = r_count(r, 6, 1u << 20);
    for (uint32_t i = 0; i < nparams && !r->bad; i++) r_param(r, g);
    uint32_t nnodes = r_count(r, 40, 1u << 24);
    for (uint32_t v = 0; v < nnodes && !r->bad; v++) r_node(r, g, v, nnodes);
    uint32_t nout = r_count(r, 8, 1u << 16);
    for (uint32_t i = 0; i < nout && !r->bad; i++) r_output(r, g);
    r_updates(r, g);
    uint32_t nreq = r_count(r, 37, 1u << 16);
    for (uint32_t i = 0; i < nreq && !r->bad; i++) r_require(r, g);
    if (!r->bad) r_train(r, g);
    if (!r->bad) r_verify(r, g);
    if (r->bad) {
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

/* Step i's kind and grid, its kernel and the node it computes. */
static bool r_step_target(rd *r, const ir_graph *g, const nrt_program *p, uint32_t i, nrt_step *s)
{
    uint8_t kind = r_u8(r), grid = r_u8(r);
    if (kind < NRT_STEP_KERNEL || kind > NRT_STEP_COPY) return r_invalid(r, "step %u: kind %u", i, kind);
    if (kind == NRT_STEP_KERNEL && (grid < NRT_GRID_ELEMENTS || grid > NRT_GRID_TILES))
        return r_invalid(r, "step %u: grid %u", i, grid);
    s->kind = (nrt_step_kind)kind, s->grid = (nrt_grid)grid;
    s->kernel = r_u32(r);
    s->node = r_u32(r);
    if (!r->bad && ((kind == NRT_STEP_KERNEL && s->kernel >= p->nkernels) || s->node >= g->nnodes))
        return r_invalid(r, "step %u: kernel or node out of range", i);
    return !r->bad;
}

/* Step i's buffers (of nbuffers: nodes, then temporaries) and its sizes (dim ids). */
static bool r_step_lists(rd *r, const ir_graph *g, uint32_t i, nrt_step *s, uint64_t nbuffers)
{
    s->nbufs = r_u8(r);
    if (s->nbufs > NRT_MAX_BUFS) return r_invalid(r, "step %u: %u buffers", i, s->nbufs);
    for (int k = 0; k < s->nbufs; k++) {
        s->bufs[k] = r_u32(r);
        if (!r->bad && s->bufs[k] >= nbuffers) return r_invalid(r, "step %u: buffer %u", i, s->bufs[k]);
    }
    s->nints = r_u8(r);
    if (s->nints > NRT_MAX_INTS) return r_invalid(r, "step %u: %u sizes", i, s->nints);
    for (int k = 0; k < s->nints; k++) {
        s->ints[k] = r_u32(r);
        if (!r->bad && s->ints[k] >= g->ndims) return r_invalid(r, "step %u: dim id %u", i, s->ints[k]);
    }
    return !r->bad;
}

/* Step i's matmul fields, which buffers it reads spread and writes, and
 * which section of the memory plan each buffer lies in. */
static bool r_step_access(rd *r, uint32_t i, nrt_step *s)
{
    s->mm_batch_rank = r_u8(r);
    uint8_t bits = r_u8(r);
    if (!r->bad && bits >> 3) return r_invalid(r, "step %u: matmul flags 0x%x", i, bits);
    s->mm_ta = bits & 1, s->mm_tb = bits >> 1 & 1, s->mm_b_shared = bits >> 2 & 1;
    r_dtype(r, &s->mm_dtype);
    r_dtype(r, &s->mm_out_dtype);
    s->mm_epilogue = r_u8(r);
    s->spread_reads = r_u64(r);
    if (!r->bad && s->nbufs < 64 && s->spread_reads >> s->nbufs)
        return r_invalid(r, "step %u: spread reads beyond its %u buffers", i, s->nbufs);
    s->writes = r_u64(r);
    if (!r->bad && ((s->nbufs < 64 && s->writes >> s->nbufs) || (s->kind != NRT_STEP_KERNEL && s->writes)))
        return r_invalid(r, "step %u: stores to buffers it does not have", i);
    s->sections = r_u8(r);
    if (!r->bad && s->sections > NRT_MAX_SECTIONS) return r_invalid(r, "step %u: %u sections", i, s->sections);
    for (int k = 0; s->sections > 1 && k < s->nbufs; k++) {
        s->slot_section[k] = r_u8(r);
        if (!r->bad && s->slot_section[k] >= s->sections && s->slot_section[k] != NRT_SECTION_SHARED)
            return r_invalid(r, "step %u: buffer %d in section %u of %u", i, k, s->slot_section[k], s->sections);
    }
    return !r->bad;
}

/* What each kind of step reads from its lists must be there. */
static bool check_step_shape(rd *r, uint32_t i, const nrt_step *s)
{
    const nrt_step_kind kind = s->kind;
    bool ok = kind == NRT_STEP_KERNEL ? s->nints >= 1 && s->nbufs >= 1
            : kind == NRT_STEP_COPY  ? s->nints >= 1 && s->nbufs == 2
                                     : s->nbufs == nrt_matmul_nbufs(s->mm_epilogue) && s->nints == s->mm_batch_rank + 3u;
    if (!r->bad && !ok) return r_invalid(r, "step %u: malformed %s step", i, kind == NRT_STEP_MATMUL ? "matmul" : "");
    const char *why = kind == NRT_STEP_MATMUL ? nrt_matmul_check(s) : NULL;
    if (!r->bad && why) return r_invalid(r, "step %u: a matmul with %s", i, why);
    if (!r->bad && s->grid == NRT_GRID_ROWS && s->nints < 2) return r_invalid(r, "step %u: row grid without a row size", i);
    if (!r->bad && s->grid == NRT_GRID_TILES && s->nints < 4) return r_invalid(r, "step %u: tile grid without its sizes", i);
    return !r->bad;
}

/* Step i of p: false at the first damage (r's message says which). */
static bool r_step(rd *r, const ir_graph *g, const nrt_program *p, uint32_t i, uint64_t nbuffers)
{
    nrt_step *s = &p->steps[i];
    if (!r_step_target(r, g, p, i, s) || !r_step_lists(r, g, i, s, nbuffers) || !r_step_access(r, i, s) ||
        !check_step_shape(r, i, s))
        return false;
    uint32_t batch = r_u32(r);
    s->batch = (uint16_t)(batch <= NRT_MAX_BATCH ? batch : 1);   /* 1: refused by check_batches */
    s->batch_kernel = r_u32(r);
    uint8_t prepare = r_u8(r);
    if (!r->bad && prepare > 1) return r_invalid(r, "step %u: prepare flag %u", i, prepare);
    s->prepare = prepare;
    return !r->bad;
}

static bool read_program(rd *r, const ir_graph *g, nrt_program *p)
{
    r->what = "program";
    p->nkernels = r_count(r, 4, 1u << 20);
    p->kernel_names = nc_xcalloc(p->nkernels + 1, sizeof *p->kernel_names);
    for (uint32_t i = 0; i < p->nkernels && !r->bad; i++) p->kernel_names[i] = r_str(r, MODULE_KERNEL_NAME_MAX);
    p->ntemps = r_count(r, 5, 1u << 20);
    p->temps = nc_xcalloc(p->ntemps + 1, sizeof *p->temps);
    for (uint32_t i = 0; i < p->ntemps && !r->bad; i++) {
        p->temps[i].numel = r_u32(r);
        if (!r->bad && p->temps[i].numel >= g->ndims) r_invalid(r, "temporary %u: dim id", i);
        r_dtype(r, &p->temps[i].dtype);
    }
    p->nsteps = r_count(r, 15, 1u << 24);
    p->cap_steps = p->nsteps;
    p->steps = nc_xcalloc(p->nsteps + 1, sizeof *p->steps);
    uint64_t nbuffers = (uint64_t)g->nnodes + p->ntemps;
    for (uint32_t i = 0; i < p->nsteps && !r->bad; i++)
        if (!r_step(r, g, p, i, nbuffers)) return false;
    if (!r->bad && !check_batches(r, p)) return false;
    if (!r->bad && !check_prepare(r, g, p)) return false;
    p->plan_flags = r_u32(r);
    if (!r->bad && (p->plan_flags & ~(uint32_t)NRT_PLAN_KNOWN_FLAGS)) return r_invalid(r, "plan flags 0x%x", p->plan_flags);
    return !r->bad;
}

static int read_module(const unsigned char *data, size_t size, nrt_module_data *m, bool nested, char *err, size_t errcap);

/* An entry section (the file's section sec): its name, then a whole
 * (non-nested) module image. */
static int read_entry(rd *s, uint32_t sec, nrt_module_data *m, char *err, size_t errcap)
{
    s->what = "entry";
    char *name = r_str(s, MODULE_ENTRY_NAME_MAX);
    if (!name) return -1;
    int rc = 0;
    for (uint32_t i = 0; i < m->nentries && rc == 0; i++)
        if (strcmp(m->entries[i].name, name) == 0) rc = fail(err, errcap, "module is corrupt: two entries named %s", name);
    if (rc == 0 && !name[0]) rc = fail(err, errcap, "module is corrupt: section %u: an entry point with no name", sec);
    if (rc == 0 && (m->nentries >= NRT_ENTRY_MAX || strcmp(name, "forward") == 0))
        rc = fail(err, errcap, "module is corrupt: entry %s", m->nentries >= NRT_ENTRY_MAX ? "count" : "named forward");
    nrt_module_data sub;
    if (rc == 0 && read_module(s->p + s->at, s->n - s->at, &sub, true, err, errcap) != 0) rc = -1;
    if (rc == 0) module_add_entry(m, name, &sub);
    free(name);
    return rc;
}

int module_read_buffer(const unsigned char *data, size_t size, nrt_module_data *m, char *err, size_t errcap)
{
    return read_module(data, size, m, false, err, errcap);
}

/* Why data is no module, in the words that lead to the fix: an empty or
 * cut file is a failed write, text is most often the .net source itself. */
static const char *not_a_module(const unsigned char *data, size_t size)
{
    if (size == 0) return "not a netc module (the file is empty)";
    if (memcmp(data, NRT_MODULE_MAGIC, size < 8 ? size : 8) == 0) return "not a netc module (cut short in its header)";
    size_t text = 0, n = size < 64 ? size : 64;
    while (text < n && (data[text] == '\n' || data[text] == '\t' || data[text] == '\r' || (data[text] >= 32 && data[text] < 127)))
        text++;
    if (text == n) return "not a netc module: it is text (a .net source is built into a module first: netc build M.net -o M.netm)";
    return "not a netc module (bad magic)";
}

/* The header: the magic, the format version, the size (the file's whole),
 * the section count (*nsec, its table within the file). */
static int read_header(rd *r, uint32_t *nsec)
{
    const unsigned char *data = r->p;
    size_t size = r->n;
    if (size < 24 || memcmp(data, NRT_MODULE_MAGIC, 8) != 0) return fail(r->err, r->errcap, "%s", not_a_module(data, size));
    r->at = 8;
    uint32_t version = r_u32(r);
    if (version != NRT_MODULE_VERSION)
        return fail(r->err, r->errcap, "module format version %u; this netc reads version %u (rebuild the module)", version,
                    NRT_MODULE_VERSION);
    *nsec = r_u32(r);
    uint64_t total = r_u64(r);
    if (total != size)
        return fail(r->err, r->errcap, "module is truncated or has trailing bytes (%llu bytes, header says %llu)",
                    (unsigned long long)size, (unsigned long long)total);
    if (*nsec > NRT_MODULE_SECTIONS_MAX || 24 + (uint64_t)*nsec * 24 > size)
        return fail(r->err, r->errcap, "module is corrupt: %u sections", *nsec);
    return 0;
}

/* Section i's row of the table: its kind, and where it lies. The sections
 * follow the table end to end, as the writer lays them out: every byte of
 * the file is the header's, the table's or one section's, so a damaged
 * count or offset cannot leave data that nothing reads. *at: where the
 * section before it ends, moved past this one. */
static int read_table_row(rd *r, uint32_t i, uint64_t *at, uint32_t *kind, uint64_t *off, uint64_t *len)
{
    *kind = r_u32(r);
    uint32_t reserved = r_u32(r);
    *off = r_u64(r);
    *len = r_u64(r);
    if (r->bad) return -1;
    if (reserved)   /* 0 in every file: anything else is damage, not a field of a later format */
        return fail(r->err, r->errcap, "module is corrupt: section %u's reserved word is %u, not 0", i, reserved);
    if (*off > r->n || *len > r->n - *off) return fail(r->err, r->errcap, "module is corrupt: section %u lies outside the file", i);
    if (*off != *at)
        return fail(r->err, r->errcap, "module is corrupt: section %u starts at byte %llu, not at %llu where %s ends", i,
                    (unsigned long long)*off, (unsigned long long)*at, i ? "the section before it" : "the section table");
    *at = *off + *len;
    return 0;
}

/* A compiled image (section i): its architecture, kind, NVRTC version and
 * bytes, appended to m's images; s ends with the image. */
static int read_image(rd *s, uint32_t i, nrt_module_data *m)
{
    char *err = s->err;
    size_t errcap = s->errcap;
    int rc = 0;
    s->what = "compiled image";
    nrt_image img = {0};
    char *arch = r_str(s, MODULE_ARCH_MAX);
    if (arch) snprintf(img.arch, sizeof img.arch, "%s", arch);
    /* module_image_for picks an image by its architecture: one without
     * could never be chosen, nor said which it was for */
    if (arch && !arch[0]) rc = fail(err, errcap, "module is corrupt: section %u: an image with no architecture name", i);
    free(arch);
    uint8_t is_ptx = r_u8(s);
    if (!s->bad && is_ptx > 1) rc = fail(err, errcap, "module is corrupt: image kind %u", is_ptx);
    img.is_ptx = is_ptx != 0;
    int nvrtc = (int)r_u32(s);
    /* one NVRTC made every image (the module keeps one version) */
    if (rc == 0 && !s->bad && m->nimages && nvrtc != m->nvrtc_version)
        rc = fail(err, errcap, "module is corrupt: images of NVRTC %d and %d", m->nvrtc_version, nvrtc);
    m->nvrtc_version = nvrtc;
    img.size = r_u64(s);
    if (!s->bad && img.size != s->n - s->at) rc = fail(err, errcap, "module is corrupt: image size");
    if (s->bad) rc = -1;
    if (rc == 0) {
        img.data = nc_xmalloc(img.size ? img.size : 1);
        memcpy(img.data, s->p + s->at, img.size);
        m->images = nc_xrealloc(m->images, (m->nimages + 1) * sizeof *m->images);
        m->images[m->nimages++] = img;
    }
    return rc;
}

/* Which sections a module has had so far, of those it must have one of. */
typedef struct sections_seen {
    bool program, source;
} sections_seen;

/* Section i, of kind, into m (nested: m is an entry point's module). */
static int read_section(rd *s, uint32_t kind, uint32_t i, nrt_module_data *m, bool nested, sections_seen *seen)
{
    char *err = s->err;
    size_t errcap = s->errcap;
    int rc = 0;
    bool whole = true;   /* read to its last byte (an entry's module and an image check their own sizes) */
    if (kind == SEC_GRAPH) {
        if (m->graph) rc = fail(err, errcap, "module is corrupt: two graph sections");
        else if (!(m->graph = read_graph(s))) rc = -1;
    } else if (kind == SEC_PROGRAM) {
        if (!m->graph) rc = fail(err, errcap, "module is corrupt: program before graph");
        else if (seen->program) rc = fail(err, errcap, "module is corrupt: two program sections");
        else if (!read_program(s, m->graph, &m->program)) rc = -1;
        seen->program = true;
    } else if (kind == SEC_SOURCE) {
        s->what = "CUDA source";
        if (seen->source) rc = fail(err, errcap, "module is corrupt: two source sections");
        else m->program.source = r_str(s, MODULE_SOURCE_MAX);
        if (s->bad) rc = -1;
        seen->source = true;
    } else if (kind == SEC_IMAGE) {
        whole = false;
        rc = read_image(s, i, m);
    } else if (kind == SEC_ENTRY) {
        whole = false;
        if (nested) rc = fail(err, errcap, "module is corrupt: nested entry points");
        else rc = read_entry(s, i, m, err, errcap);
    } else {
        rc = fail(err, errcap, "module is corrupt: unknown section kind %u", kind);
    }
    /* bytes a section holds past what its reader took were never checked */
    if (rc == 0 && whole && s->at != s->n)
        rc = fail(err, errcap, "module is corrupt: %llu bytes after the end of the %s", (unsigned long long)(s->n - s->at), s->what);
    return rc;
}

/* What a module must have once its sections are read: every byte of the
 * file in a section (at: where the last one ends), a graph, a program and
 * its source, entry points whose names the main entry does not take. */
static int check_module(const nrt_module_data *m, uint64_t at, size_t size, uint32_t nsec, const sections_seen *seen, char *err,
                        size_t errcap)
{
    if (at != size)
        return fail(err, errcap, "module is corrupt: bytes %llu to %llu belong to no section (%u sections)", (unsigned long long)at,
                    (unsigned long long)size, nsec);
    if (!m->graph) return fail(err, errcap, "module is corrupt: no graph");
    if (!seen->program) return fail(err, errcap, "module is corrupt: no program section");
    if (!seen->source) return fail(err, errcap, "module is corrupt: no source section");
    if (m->program.nsteps && !m->program.source) return fail(err, errcap, "module is corrupt: steps without source");
    /* the main entry's name ("train" when its graph updates parameters) loads the
     * top level (module_take_entry): an entry of that name could never be loaded */
    for (uint32_t i = 0; i < m->nentries; i++)
        if (strcmp(m->entries[i].name, module_main_entry_name(m)) == 0)
            return fail(err, errcap, "module is corrupt: an entry named %s, the main entry's name", m->entries[i].name);
    return 0;
}

static int read_module(const unsigned char *data, size_t size, nrt_module_data *m, bool nested, char *err, size_t errcap)
{
    memset(m, 0, sizeof *m);
    rd r = {.p = data, .n = size, .err = err, .errcap = errcap, .what = "header"};
    uint32_t nsec = 0;
    if (read_header(&r, &nsec) != 0) return -1;
    int rc = 0;
    sections_seen seen = {0};
    uint64_t at = 24 + (uint64_t)nsec * 24;
    for (uint32_t i = 0; i < nsec && rc == 0; i++) {
        uint32_t kind;
        uint64_t off, len;
        rc = read_table_row(&r, i, &at, &kind, &off, &len);
        if (rc != 0) break;
        rd s = {.p = data + off, .n = (size_t)len, .err = err, .errcap = errcap, .what = "section"};
        rc = read_section(&s, kind, i, m, nested, &seen);
    }
    if (rc == 0) rc = check_module(m, at, size, nsec, &seen, err, errcap);
    if (rc != 0) module_data_free(m);
    return rc;
}

int module_read(const char *path, nrt_module_data *m, char *err, size_t errcap)
{
    memset(m, 0, sizeof *m);
    const char *why;
    FILE *f = file_open_regular(path, &why);
    if (!f) {
        fail(err, errcap, "cannot open %s: %s", path, why);
        return FILE_OPEN_IO_ERROR;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fail(err, errcap, "cannot read %s: %s", path, strerror(errno));
        fclose(f);
        return FILE_OPEN_IO_ERROR;
    }
    if ((uint64_t)st.st_size > NRT_MODULE_MAX_BYTES) {
        fclose(f);
        return fail(err, errcap, "%s: %lld bytes is larger than any module netc writes", path, (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size;
    unsigned char *buf = nc_xmalloc(size ? size : 1);
    size_t got = fread(buf, 1, size, f);
    fclose(f);
    int rc;
    if (got != size) {
        fail(err, errcap, "cannot read %s", path);
        rc = FILE_OPEN_IO_ERROR;
    } else {
        char *inner = nc_xmalloc(errcap ? errcap : 1);   /* as long as err can show */
        rc = module_read_buffer(buf, size, m, inner, errcap ? errcap : 1);
        if (rc) fail(err, errcap, "%s: %s", path, inner);
        free(inner);
    }
    free(buf);
    return rc;
}

void module_add_entry(nrt_module_data *m, const char *name, nrt_module_data *entry)
{
    m->entries = nc_xrealloc(m->entries, (m->nentries + 1) * sizeof *m->entries);
    m->entries[m->nentries++] = (nrt_module_entry){.name = nc_xstrdup(name), .data = *entry};
    memset(entry, 0, sizeof *entry);
}

const char *module_main_entry_name(const nrt_module_data *m)
{
    return m->graph && m->graph->nupdates > 0 ? "train" : "forward";
}

int module_take_entry(nrt_module_data *m, const char *name, nrt_module_data *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (!name || strcmp(name, module_main_entry_name(m)) == 0) {
        *out = *m;
        out->entries = NULL, out->nentries = 0;
        for (uint32_t i = 0; i < m->nentries; i++) {
            free(m->entries[i].name);
            module_data_free(&m->entries[i].data);
        }
        free(m->entries);
        memset(m, 0, sizeof *m);
        return 0;
    }
    for (uint32_t i = 0; i < m->nentries; i++)
        if (strcmp(m->entries[i].name, name) == 0) {
            *out = m->entries[i].data;
            memset(&m->entries[i].data, 0, sizeof m->entries[i].data);
            module_data_free(m);
            return 0;
        }
    char *names = nc_xstrdup(module_main_entry_name(m));   /* entry names of any length, all of them */
    for (uint32_t i = 0; i < m->nentries; i++) {
        char *more = nc_xasprintf("%s, %s", names, m->entries[i].name);
        free(names);
        names = more;
    }
    module_data_free(m);
    fail(err, errcap, "the module has no entry point '%s' (it has: %s)", name, names);
    free(names);
    return -1;
}

void module_data_free(nrt_module_data *m)
{
    for (uint32_t i = 0; i < m->nentries; i++) {
        free(m->entries[i].name);
        module_data_free(&m->entries[i].data);
    }
    free(m->entries);
    ir_graph_free(m->graph);
    nrt_program_free(&m->program);
    for (uint32_t i = 0; i < m->nimages; i++) free(m->images[i].data);
    free(m->images);
    memset(m, 0, sizeof *m);
}

static int find_cubin(const nrt_module_data *m, const char *arch)
{
    for (uint32_t i = 0; i < m->nimages; i++)
        if (!m->images[i].is_ptx && strcmp(m->images[i].arch, arch) == 0) return (int)i;
    return -1;
}

/* "compute_90" -> 90; 0 when it is not of that form */
static int ptx_version(const char *arch)
{
    int v = 0, n = 0;
    return sscanf(arch, "compute_%d%n", &v, &n) == 1 && arch[n] == 0 ? v : 0;
}

int module_image_for(const nrt_module_data *m, int major, int minor)
{
    char want[16];
    snprintf(want, sizeof want, "sm_%d%da", major, minor);
    int i = find_cubin(m, want);
    for (int older = minor; i < 0 && older >= 0; older--) {
        snprintf(want, sizeof want, "sm_%d%d", major, older);
        i = find_cubin(m, want);
    }
    if (i >= 0) return i;
    /* the driver JIT-compiles PTX of this architecture or an older one */
    int best = 0, device = major * 10 + minor;
    for (uint32_t k = 0; k < m->nimages; k++) {
        int v = m->images[k].is_ptx ? ptx_version(m->images[k].arch) : 0;
        if (v && v <= device && v > best) best = v, i = (int)k;
    }
    return i;
}

void module_best_arch(int major, int minor, char *arch, size_t cap)
{
    snprintf(arch, cap, "sm_%d%d%s", major, minor, major == 9 && minor == 0 ? "a" : "");
}
