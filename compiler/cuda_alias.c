/* cuda_alias.c - values that need neither memory nor a copy of their own.
 *
 * Requires: the steps cuda_emit wrote, update copies included. Produces: the
 * same steps with some buffer ids renamed, so two IR values share one buffer,
 * and p->slot_values saying which value each slot stands for:
 *  - a reshape is a view: every tensor is contiguous, so its result is its
 *    operand's bytes, and its copy step goes away;
 *  - a parameter's update (new weights, optimizer moments, accumulated
 *    gradients) is written straight into the parameter's memory when no step
 *    after the one that computes it reads the old value, instead of into a
 *    buffer of its own that a copy puts back at the end of the step. A GPT-2
 *    training step has three such copies per weight (weight, Adam m and v).
 *
 * Renaming is safe because the memory plan (runtime/program.c) derives
 * liveness from the renamed steps: the shared buffer lives as long as either
 * value is read. Outputs keep their own buffers: the session reads them by
 * value id. */
#include "cuda_emit.h"

#include <stdlib.h>
#include <string.h>

/* What the step's outputs and updates make of each value, counted once: a
 * search over them for each step and update was quadratic (GPT-2's step
 * has hundreds of updates, asked of every candidate of --memory-budget). */
enum { ROLE_OUTPUT = 1, ROLE_UPDATE = 2, ROLE_UPDATES = 4 /* two or more */ };

static uint8_t *value_roles(const ir_graph *g)
{
    uint8_t *role = nc_xcalloc((size_t)g->nnodes + 1, sizeof *role);
    for (uint32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value < g->nnodes) role[g->outputs[i].value] |= ROLE_OUTPUT;
    for (uint32_t i = 0; i < g->nupdates; i++) {
        ir_value v = g->updates[i].value;
        if (v < g->nnodes) role[v] |= role[v] & ROLE_UPDATE ? ROLE_UPDATES : ROLE_UPDATE;
    }
    return role;
}

static bool is_output(const ir_graph *g, const uint8_t *role, ir_value v) { return v < g->nnodes && role[v] & ROLE_OUTPUT; }

static bool updated_once(const ir_graph *g, const uint8_t *role, ir_value v)
{
    return v < g->nnodes && (role[v] & (ROLE_UPDATE | ROLE_UPDATES)) == ROLE_UPDATE;
}

static bool updated(const ir_graph *g, const uint8_t *role, ir_value v) { return v < g->nnodes && role[v] & ROLE_UPDATE; }

/* The copy that assigns an update to its parameter (cuda_emit's last steps):
 * the only steps whose node is a parameter. */
static bool is_update_copy(const ir_graph *g, const nrt_step *s)
{
    return s->kind == NRT_STEP_COPY && s->node < g->nnodes && g->nodes[s->node].op == OP_PARAM;
}

static bool is_view(const ir_graph *g, const uint8_t *role, const nrt_step *s)
{
    return s->kind == NRT_STEP_COPY && s->node < g->nnodes && g->nodes[s->node].op == OP_RESHAPE &&
           s->bufs[1] == s->node && !is_output(g, role, s->node) && !updated(g, role, s->node);
}

/* One past the largest buffer id any step names. */
static uint32_t buffer_ids(const nrt_program *p)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int j = 0; j < p->steps[k].nbufs; j++)
            if (p->steps[k].bufs[j] >= n) n = p->steps[k].bufs[j] + 1;
    return n;
}

/* The in-place updates' renames (u's references become pnode's), made in
 * one pass at the end rather than a pass over the steps each (GPT-2's step:
 * hundreds): a rename touches only u, which nothing asks of again (each
 * update value is one update's), and pnode, whose references are looked up
 * again only after the pending renames are made (apply_renames). */
typedef struct renames {
    uint32_t n;
    uint32_t *to;    /* UINT32_MAX: not renamed */
    bool pending;
} renames;

static renames no_renames(uint32_t n)
{
    renames r = {n, nc_xmalloc(((size_t)n + 1) * sizeof *r.to), false};
    for (uint32_t b = 0; b < n; b++) r.to[b] = UINT32_MAX;
    return r;
}

static void apply_renames(nrt_program *p, renames *r)
{
    if (!r->pending) return;
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int j = 0; j < p->steps[k].nbufs; j++) {
            uint32_t b = p->steps[k].bufs[j];
            if (b < r->n && r->to[b] != UINT32_MAX) p->steps[k].bufs[j] = r->to[b];
        }
    for (uint32_t b = 0; b < r->n; b++) r->to[b] = UINT32_MAX;
    r->pending = false;
}

static int32_t first_ref(const nrt_program *p, uint32_t buf)
{
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int j = 0; j < p->steps[k].nbufs; j++)
            if (p->steps[k].bufs[j] == buf) return (int32_t)k;
    return -1;
}

/* The last step reading buf before the update copies. */
static int32_t last_read(const ir_graph *g, const nrt_program *p, uint32_t buf)
{
    for (uint32_t k = p->nsteps; k-- > 0;) {
        if (is_update_copy(g, &p->steps[k])) continue;
        for (int j = 0; j < p->steps[k].nbufs; j++)
            if (p->steps[k].bufs[j] == buf) return (int32_t)k;
    }
    return -1;
}

/* Where each buffer is first referenced and last read (before the update
 * copies), found in one pass over the steps rather than a pass a question
 * (GPT-2's step: hundreds of update copies over thousands of steps, asked
 * for each candidate plan of --memory-budget). A buffer an in-place update
 * was renamed into is looked up again: its references moved. */
typedef struct alias_index {
    uint32_t n;
    int32_t *first, *last;
    bool *moved;
} alias_index;

static alias_index index_steps(const ir_graph *g, const nrt_program *p)
{
    alias_index ix = {.n = buffer_ids(p)};
    ix.first = nc_xmalloc(((size_t)ix.n + 1) * sizeof *ix.first);
    ix.last = nc_xmalloc(((size_t)ix.n + 1) * sizeof *ix.last);
    ix.moved = nc_xcalloc((size_t)ix.n + 1, sizeof *ix.moved);
    for (uint32_t b = 0; b < ix.n; b++) ix.first[b] = ix.last[b] = -1;
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int j = 0; j < p->steps[k].nbufs; j++) {
            uint32_t b = p->steps[k].bufs[j];
            if (ix.first[b] < 0) ix.first[b] = (int32_t)k;
            if (!is_update_copy(g, &p->steps[k])) ix.last[b] = (int32_t)k;
        }
    return ix;
}

static int32_t first_ref_of(const alias_index *ix, const nrt_program *p, uint32_t buf)
{
    if (buf >= ix->n) return -1;
    return ix->moved[buf] ? first_ref(p, buf) : ix->first[buf];
}

static int32_t last_read_of(const alias_index *ix, const ir_graph *g, const nrt_program *p, uint32_t buf)
{
    if (buf >= ix->n) return -1;
    return ix->moved[buf] ? last_read(g, p, buf) : ix->last[buf];
}

/* Whether update value u can be computed in the memory of parameter node pnode. */
static bool update_fits_in_place(const ir_graph *g, const uint8_t *role, const nrt_program *p, ir_value pnode, ir_value u,
                                 const alias_index *ix)
{
    const ir_node *un = &g->nodes[u], *pn = &g->nodes[pnode];
    if (u == pnode || un->op == OP_PARAM || un->op == OP_INPUT || is_output(g, role, u) || !updated_once(g, role, u)) return false;
    if (un->dtype != pn->dtype || un->rank != pn->rank) return false;
    for (int d = 0; d < un->rank; d++)
        if (un->shape[d] != pn->shape[d]) return false;
    int32_t written = first_ref_of(ix, p, u), old_read = last_read_of(ix, g, p, pnode);
    if (written < 0 || is_update_copy(g, &p->steps[written])) return false;
    /* at the step that writes it, only a kernel that loads before it stores may read the old value */
    if (old_read < written) return true;
    const nrt_step *w = &p->steps[written];
    if (old_read > written || !nrt_step_per_element(g, p, w)) return false;
    for (int j = 0; j < w->nbufs; j++) {   /* pnode read where u is written */
        if (w->bufs[j] != pnode) continue;
        for (int o = 0; o < w->nbufs; o++)
            if (p->slot_values[written * NRT_MAX_BUFS + o] == u && !nrt_step_may_share(w, o, j)) return false;
    }
    return true;
}

static void drop_steps(nrt_program *p, const bool *drop)
{
    uint32_t kept = 0;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        if (drop[k]) continue;
        p->steps[kept] = p->steps[k];
        memmove(&p->slot_values[kept * NRT_MAX_BUFS], &p->slot_values[k * NRT_MAX_BUFS], NRT_MAX_BUFS * sizeof *p->slot_values);
        kept++;
    }
    p->nsteps = kept;
}

static uint32_t renamed(const uint32_t *to, uint32_t n, uint32_t b)
{
    while (b < n && to[b] != UINT32_MAX) b = to[b];
    return b;
}

/* Each view's steps after it read its operand's buffer: one pass, each
 * step's buffers renamed by the views before it (a view's operand is
 * renamed when the view is reached, so following the renames ends). */
static void alias_views(const ir_graph *g, const uint8_t *role, nrt_program *p, bool *drop)
{
    uint32_t n = buffer_ids(p);
    uint32_t *to = nc_xmalloc(((size_t)n + 1) * sizeof *to);
    for (uint32_t b = 0; b < n; b++) to[b] = UINT32_MAX;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        nrt_step *s = &p->steps[k];
        for (int j = 0; j < s->nbufs; j++) s->bufs[j] = renamed(to, n, s->bufs[j]);
        if (!is_view(g, role, s)) continue;
        to[s->node] = s->bufs[0];
        s->nbufs = 0;   /* no longer a reference to either buffer */
        drop[k] = true;
    }
    free(to);
}

void cuda_alias_buffers(const ir_graph *g, nrt_program *p)
{
    free(p->slot_values);
    p->slot_values = nc_xcalloc((size_t)p->nsteps * NRT_MAX_BUFS + 1, sizeof *p->slot_values);
    for (uint32_t k = 0; k < p->nsteps; k++)
        memcpy(&p->slot_values[k * NRT_MAX_BUFS], p->steps[k].bufs, sizeof p->steps[k].bufs);
    bool *drop = nc_xcalloc(p->nsteps + 1, sizeof *drop);
    uint8_t *role = value_roles(g);
    alias_views(g, role, p, drop);
    alias_index ix = index_steps(g, p);
    renames r = no_renames(ix.n);
    for (uint32_t k = 0; k < p->nsteps; k++) {
        nrt_step *s = &p->steps[k];
        if (!is_update_copy(g, s)) continue;
        uint32_t u = s->bufs[0], pnode = s->bufs[1];
        if ((u < ix.n && ix.moved[u]) || (pnode < ix.n && ix.moved[pnode])) apply_renames(p, &r);
        if (!update_fits_in_place(g, role, p, pnode, u, &ix)) continue;
        r.to[u] = pnode, r.pending = true;   /* u < ix.n: update_fits_in_place found its first reference */
        s->nbufs = 0;
        drop[k] = true;
        ix.moved[u] = ix.moved[pnode] = true;
    }
    apply_renames(p, &r);
    free(r.to);
    drop_steps(p, drop);
    free(drop);
    free(role);
    free(ix.first);
    free(ix.last);
    free(ix.moved);
}
