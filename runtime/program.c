/* program.c - the GPU program's storage. */
#include "program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nrt_program_free(nrt_program *p)
{
    if (!p) return;
    free(p->source);
    for (uint32_t i = 0; i < p->nkernels; i++) free(p->kernel_names[i]);
    free(p->kernel_names);
    free(p->steps);
    free(p->temps);
    free(p->slot_values);
    memset(p, 0, sizeof *p);
}

uint32_t *nrt_program_launches(const nrt_program *p)
{
    uint32_t *of = nc_xmalloc((p->nsteps + 1) * sizeof *of);
    for (uint32_t k = 0; k < p->nsteps;) {
        uint32_t head = k;
        for (uint32_t n = nrt_step_launch_len(&p->steps[head]); n-- > 0 && k < p->nsteps;) of[k++] = head;
    }
    return of;
}

bool nrt_step_param_only(const ir_graph *g, const bool *from, const nrt_step *s)
{
    bool any_value = false;
    for (int j = 0; j < s->nbufs; j++) {
        if (s->bufs[j] >= g->nnodes) continue;   /* a temporary */
        if (!from[s->bufs[j]]) return false;
        any_value = true;
    }
    return any_value;
}

void nrt_program_mark_prepare(const ir_graph *g, nrt_program *p)
{
    if (g->nupdates || (g->train.present && g->train.loss != IR_NONE)) return;
    bool *from = ir_parameter_values(g);
    for (uint32_t k = 0; k < p->nsteps; k++) p->steps[k].prepare = nrt_step_param_only(g, from, &p->steps[k]);
    free(from);
    nrt_program_prepare_temps(g, p);
}

bool nrt_step_temps_only(const ir_graph *g, const nrt_step *s)
{
    for (int j = 0; j < s->nbufs; j++)
        if (s->bufs[j] < g->nnodes) return false;
    return true;
}

/* Whether bufs[j] of prepare step s, written by a step of every run, takes
 * s out of the prepare steps: a temporary it touches at all, or a value it
 * reads (a constant that fusion computes in a kernel of every run, beside
 * an input's cast: run once, s would read it before it is made). A
 * parameter is set by the update each step, which is when prepare steps
 * run again, and a low-precision copy the update stores too (carry_into)
 * is written by s itself. */
static bool run_only_written(const ir_graph *g, const nrt_step *s, int j)
{
    uint32_t v = s->bufs[j];
    if (v >= g->nnodes) return true;
    return g->nodes[v].op != OP_PARAM && !(nrt_step_writes(s) >> j & 1);
}

void nrt_program_prepare_temps(const ir_graph *g, nrt_program *p)
{
    for (uint32_t k = 0; k < p->nsteps; k++)
        if (p->steps[k].kind == NRT_STEP_KERNEL && nrt_step_temps_only(g, &p->steps[k])) p->steps[k].prepare = true;
    bool *run_written = nc_xcalloc(g->nnodes + p->ntemps + 1, sizeof *run_written);
    for (bool changed = true; changed;) {
        changed = false;
        memset(run_written, 0, (g->nnodes + p->ntemps + 1) * sizeof *run_written);
        for (uint32_t k = 0; k < p->nsteps; k++)
            for (int j = 0; !p->steps[k].prepare && j < p->steps[k].nbufs; j++)
                if (nrt_step_writes(&p->steps[k]) >> j & 1) run_written[p->steps[k].bufs[j]] = true;
        for (uint32_t k = 0; k < p->nsteps; k++)
            for (int j = 0; p->steps[k].prepare && j < p->steps[k].nbufs; j++)
                if (run_written[p->steps[k].bufs[j]] && run_only_written(g, &p->steps[k], j)) {
                    p->steps[k].prepare = false;
                    changed = true;
                }
    }
    free(run_written);
}

int64_t nrt_program_side_bytes(const nrt_program *p, int64_t staged_input_bytes)
{
    int64_t entries = 0;
    for (uint32_t k = 0; k < p->nsteps; k++)
        if (p->steps[k].batch >= 2) entries += p->steps[k].batch;
    return NRT_MATMUL_WORKSPACE_BYTES + entries * NRT_ARGS_BYTES + NRT_STAGE_SLOTS * staged_input_bytes;
}

int64_t nrt_program_staged_bytes(const ir_graph *g, const int64_t *syms)
{
    int64_t staged = 0;
    for (ir_value v = 0; g->nupdates && v < g->nnodes; v++)
        if (g->nodes[v].op == OP_INPUT) staged += ir_bytes(g, &g->nodes[v], syms);
    return staged;
}

uint32_t nrt_program_num_launches(const nrt_program *p)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < p->nsteps; k += nrt_step_launch_len(&p->steps[k])) n += p->steps[k].kind != NRT_STEP_COPY;
    return n;
}

bool nrt_step_launch(const nrt_step *s, const int64_t *n, int64_t max_blocks, int64_t *blocks, int64_t *threads)
{
    int64_t count = n[0];
    *threads = 256;
    switch (s->grid) {
    case NRT_GRID_ELEMENTS: *blocks = (count + 255) / 256 < max_blocks ? (count + 255) / 256 : max_blocks; break;
    case NRT_GRID_ROWS: *blocks = n[1] > 0 ? count / n[1] : 0; break;
    case NRT_GRID_WARPS: *blocks = (count + 7) / 8; break;
    case NRT_GRID_SINGLE: *blocks = 1, *threads = 1024; break;
    case NRT_GRID_TILES:
        *threads = 128;
        *blocks = n[0] > 0 && n[1] > 0 && (n[1] + 63) / 64 <= INT32_MAX / n[0] ? n[0] * ((n[1] + 63) / 64) : n[0] > 0 && n[1] > 0 ? INT64_MAX : 0;
        break;
    default: *blocks = 0; break;
    }
    return *blocks <= INT32_MAX;
}

int nrt_matmul_nbufs(uint8_t epilogue)
{
    return 3 + !!(epilogue & NRT_EPI_BIAS) + !!(epilogue & NRT_EPI_RESIDUAL) + !!(epilogue & NRT_EPI_AUX) +
           2 * !!(epilogue & NRT_EPI_BGRAD);
}

nrt_matmul_slots nrt_matmul_slots_of(const nrt_step *s)
{
    nrt_matmul_slots m = {.a = 0, .b = 1, .bias = -1, .residual = -1, .aux_in = -1, .aux = -1, .colsum = -1, .ones = -1};
    int next = 2;
    uint8_t e = s->mm_epilogue;
    if (e & NRT_EPI_BIAS) m.bias = next++;
    if (e & NRT_EPI_RESIDUAL) m.residual = next++;
    if ((e & NRT_EPI_AUX) && (e & NRT_EPI_DGELU)) m.aux_in = next++;
    m.out = next++;
    if ((e & NRT_EPI_AUX) && !(e & NRT_EPI_DGELU)) m.aux = next++;
    if (e & NRT_EPI_BGRAD) m.colsum = next++, m.ones = next;
    return m;
}

uint64_t nrt_step_writes(const nrt_step *s)
{
    if (s->kind == NRT_STEP_KERNEL) return s->writes;
    if (s->kind == NRT_STEP_COPY) return 1u << 1;
    nrt_matmul_slots m = nrt_matmul_slots_of(s);
    uint64_t w = 1ull << m.out;
    if (m.aux >= 0) w |= 1ull << m.aux;
    if (m.colsum >= 0) w |= 1ull << m.colsum | 1ull << m.ones;
    return w;
}

const char *nrt_matmul_check(const nrt_step *s)
{
    uint8_t e = s->mm_epilogue;
    if (e & ~NRT_EPI_KNOWN) return "unknown epilogue bits";
    if (!!(e & NRT_EPI_RELU) + !!(e & NRT_EPI_GELU) + !!(e & NRT_EPI_DGELU) > 1) return "two activations";
    if ((e & NRT_EPI_AUX) && !(e & (NRT_EPI_GELU | NRT_EPI_DGELU))) return "an auxiliary buffer without GELU";
    if ((e & NRT_EPI_DGELU) && (e & ~NRT_EPI_BGRAD) != (NRT_EPI_DGELU | NRT_EPI_AUX))
        return "GELU's backward with anything but its auxiliary input and the column sums";
    if ((e & NRT_EPI_BGRAD) && !(e & NRT_EPI_DGELU)) return "column sums without GELU's backward";
    if ((e & NRT_EPI_RESIDUAL) && (e & (NRT_EPI_RELU | NRT_EPI_GELU | NRT_EPI_DGELU)))
        return "a residual with an activation (cuBLASLt adds it before the activation)";
    nc_dtype in = s->mm_dtype, out = s->mm_out_dtype;
    if (in != NC_F32 && in != NC_F16 && in != NC_BF16) return "operands that are not f32, f16 or bf16";
    if (out != in && !(out == NC_F32 && in != NC_F32)) return "an output dtype cuBLASLt cannot write from these operands";
    if ((e & NRT_EPI_AUX) && out != in) return "an auxiliary output with a widened result";
    if (e && s->mm_batch_rank > 0 && (!s->mm_b_shared || s->mm_ta)) return "an epilogue on a batch of separate products";
    return NULL;
}

static int32_t alias_root(const int32_t *alias, int32_t i)
{
    while (alias[i] >= 0) i = alias[i];
    return i;
}

bool nrt_step_per_element(const ir_graph *g, const nrt_program *p, const nrt_step *s)
{
    if (s->kind != NRT_STEP_KERNEL || s->grid != NRT_GRID_ELEMENTS || s->node >= g->nnodes) return false;
    if (nc_ops[g->nodes[s->node].op].category == CAT_ELEMENTWISE) return true;
    const char *name = s->kernel < p->nkernels ? p->kernel_names[s->kernel] : "";
    size_t n = strlen(name);
    return n > 6 && strcmp(name + n - 6, "_fused") == 0;
}

bool nrt_step_may_share(const nrt_step *s, int o, int j)
{
    if (s->spread_reads >> j & 1) return false;
    return s->sections <= 1 || (s->slot_section[j] == s->slot_section[o] && s->slot_section[j] != NRT_SECTION_SHARED);
}

bool nrt_step_rowwise_in_place(const ir_graph *g, const nrt_step *s, int j)
{
    if (s->kind != NRT_STEP_KERNEL || (s->grid != NRT_GRID_ROWS && s->grid != NRT_GRID_WARPS) || s->node >= g->nnodes || j < 0 ||
        j + 1 >= s->nbufs ||
        s->bufs[s->nbufs - 1] != s->node || s->bufs[j] >= g->nnodes)
        return false;
    const ir_node *out = &g->nodes[s->node], *in = &g->nodes[s->bufs[j]];
    /* a row operand: the result's shape (not a weight every row reads) */
    return (nc_ops[out->op].flags & OPF_ROW_IN_PLACE) && in->rank == out->rank &&
           memcmp(in->shape, out->shape, out->rank * sizeof *out->shape) == 0;
}

/* An elementwise kernel computes y[i] from x[i] in the same thread, so y may
 * take the place of an operand of the same size that dies at that step. The
 * output's buffer becomes part of the operand's (its lifetime extended), and
 * gets the operand's offset after placement (its bytes count as 0 for the
 * placement only). Returns each buffer's alias (-1: none), resolved to the
 * buffer that owns the memory. */
static int32_t *plan_in_place(const ir_graph *g, const nrt_program *p, const uint32_t *launch_of, memplan_buf *b,
                              uint32_t nbuf)
{
    int32_t *alias = nc_xmalloc((nbuf + 1) * sizeof *alias);
    for (uint32_t i = 0; i < nbuf; i++) alias[i] = -1;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        const nrt_step *s = &p->steps[k];
        /* in a batch another step may still read the operand (cuda_batch.c) */
        if (s->batch >= 2 || launch_of[k] != k) continue;
        if (s->kind == NRT_STEP_MATMUL && (s->mm_epilogue & NRT_EPI_RESIDUAL)) {   /* cuBLASLt runs C == D in place */
            nrt_matmul_slots m = nrt_matmul_slots_of(s);
            uint32_t out = s->bufs[m.out], in = s->bufs[m.residual];
            if (out >= g->nnodes || in >= g->nnodes || b[out].bytes == 0 || b[out].first != (int32_t)k || alias[out] >= 0) continue;
            int32_t root = alias_root(alias, (int32_t)in);
            if (b[in].first >= (int32_t)k || b[root].last != (int32_t)k || b[root].bytes != b[out].bytes) continue;
            alias[out] = root;
            b[root].last = b[out].last;
            b[out].bytes = 0;
            continue;
        }
        if (s->kind == NRT_STEP_KERNEL && (s->grid == NRT_GRID_ROWS || s->grid == NRT_GRID_WARPS) && s->nbufs > 0) {   /* a row op over a row operand */
            uint32_t out = s->bufs[s->nbufs - 1];
            if (out >= g->nnodes || b[out].bytes == 0 || b[out].first != (int32_t)k || alias[out] >= 0) continue;
            for (int j = 0; j + 1 < s->nbufs; j++) {
                uint32_t in = s->bufs[j];
                if (!nrt_step_rowwise_in_place(g, s, j) || in >= g->nnodes || b[in].first >= (int32_t)k) continue;
                int32_t root = alias_root(alias, (int32_t)in);
                if (b[root].last != (int32_t)k || b[root].bytes != b[out].bytes) continue;
                alias[out] = root;
                b[root].last = b[out].last;
                b[out].bytes = 0;
                break;
            }
            continue;
        }
        if (!nrt_step_per_element(g, p, s)) continue;
        bool taken[NRT_MAX_BUFS] = {false};   /* an operand's memory goes to one result */
        for (int o = 0; o < s->nbufs; o++) {
            uint32_t out = s->bufs[o];   /* a result: first written at this step */
            if (out >= g->nnodes || b[out].bytes == 0 || b[out].first != (int32_t)k || alias[out] >= 0) continue;
            for (int j = 0; j < s->nbufs; j++) {
                if (j == o || taken[j] || !nrt_step_may_share(s, o, j) || s->bufs[j] >= g->nnodes || b[s->bufs[j]].first >= (int32_t)k)
                    continue;
                int32_t root = alias_root(alias, (int32_t)s->bufs[j]);
                if (b[root].last != (int32_t)k || b[root].bytes != b[out].bytes) continue;
                alias[out] = root;
                b[root].last = b[out].last;
                b[out].bytes = 0;
                taken[j] = true;
                break;
            }
        }
    }
    for (uint32_t i = 0; i < nbuf; i++)
        if (alias[i] >= 0) alias[i] = alias_root(alias, (int32_t)i);
    return alias;
}

/* Buffer i is too large at these dims (numel elements, or more than an
 * int64 counts when !counted): says which value it holds (%N, its op, name,
 * type and .net line) or which scratch, and the size. */
static void size_error(const ir_graph *g, const nrt_program *p, uint32_t i, bool counted, int64_t numel, char *err, size_t errcap)
{
    char size[64];
    if (counted) snprintf(size, sizeof size, "%lld elements", (long long)numel);
    else snprintf(size, sizeof size, "more elements than 2^63");
    /* names, types and paths whole: they are the user's, of any length */
    char *what;
    if (i < g->nnodes) {
        const ir_node *n = &g->nodes[i];
        const char *name = "", *file = NULL;
        if (n->op == OP_INPUT && n->attr.index < g->ninputs) name = g->inputs[n->attr.index].name;
        if (n->op == OP_PARAM && n->attr.index < g->nparams) name = g->params[n->attr.index].decl.name;
        if (n->loc.file && n->loc.file <= g->nfiles) {
            const char *slash = strrchr(file = g->files[n->loc.file - 1], '/');
            if (slash) file = slash + 1;
        }
        char *type = ir_shape_str(g, n->dtype, n->rank, n->shape);
        char *loc = file ? nc_xasprintf(", %s:%u", file, n->loc.line) : nc_xstrdup("");
        what = nc_xasprintf("%%%u (%s%s%s: %s%s)", i, nc_ops[n->op].name, *name ? " " : "", name, type, loc);
        free(loc);
        free(type);
    } else {
        char *numel_dim = ir_dim_str(g, p->temps[i - g->nnodes].numel);
        what = nc_xasprintf("scratch buffer %u (%s[%s])", i - g->nnodes, dtype_name(p->temps[i - g->nnodes].dtype),
                            numel_dim);
        free(numel_dim);
    }
    nc_errf(err, errcap, "%s would hold %s at these dims: more than a buffer's 2^40", what, size);
    free(what);
}

/* Buffer i's element count at these dims, and its dtype; false past 2^40 (err says which). */
static bool buffer_numel(const ir_graph *g, const nrt_program *p, const int64_t *syms, uint32_t i, int64_t *numel,
                         nc_dtype *t, char *err, size_t errcap)
{
    bool ok;
    if (i < g->nnodes) {
        *t = g->nodes[i].dtype;
        ok = ir_numel(g, &g->nodes[i], syms, numel);
    } else {
        *t = p->temps[i - g->nnodes].dtype;
        ok = dim_eval(&g->dims[p->temps[i - g->nnodes].numel], syms, numel);
    }
    if (ok && *numel <= DIM_MAX_NUMEL) return true;
    size_error(g, p, i, ok, *numel, err, errcap);
    return false;
}

bool program_check_sizes(const ir_graph *g, const nrt_program *p, const int64_t *syms, char *err, size_t errcap)
{
    int64_t numel;
    nc_dtype t;
    for (uint32_t i = 0; i < g->nnodes + p->ntemps; i++)
        if (!buffer_numel(g, p, syms, i, &numel, &t, err, errcap)) return false;
    return true;
}

memplan_buf *program_plan_memory(const ir_graph *g, const nrt_program *p, const int64_t *syms, memplan_result *r,
                                 char *err, size_t errcap)
{
    uint32_t nbuf = g->nnodes + p->ntemps;
    memplan_buf *b = nc_xcalloc(nbuf + 1, sizeof *b);
    for (uint32_t i = 0; i < nbuf; i++) {
        int64_t numel;
        nc_dtype t;
        if (!buffer_numel(g, p, syms, i, &numel, &t, err, errcap)) {
            free(b);
            return NULL;
        }
        b[i].bytes = numel * (int64_t)dtype_size(t);
        b[i].first = INT32_MAX;
        b[i].last = -1;
    }
    /* a batch's steps run at once (cuda_batch.c): what any of them touches
     * lives from the batch's first step to its last */
    uint32_t *launch_of = nrt_program_launches(p);
    for (uint32_t k = 0; k < p->nsteps; k++) {
        uint32_t head = launch_of[k], lo = head, hi = head + nrt_step_launch_len(&p->steps[head]) - 1u;
        for (int j = 0; j < p->steps[k].nbufs; j++) {
            memplan_buf *x = &b[p->steps[k].bufs[j]];
            if ((int32_t)lo < x->first) x->first = (int32_t)lo;
            if ((int32_t)hi > x->last) x->last = (int32_t)hi;
        }
    }
    int32_t end = (int32_t)p->nsteps;
    for (uint32_t v = 0; v < g->nnodes; v++)
        if (g->nodes[v].op == OP_INPUT || g->nodes[v].op == OP_PARAM) b[v].first = 0, b[v].last = end;
    for (uint32_t i = 0; i < g->noutputs; i++) b[g->outputs[i].value].last = end;
    /* what a prepare step makes for the other steps outlives the run: later
     * runs read it without the step running again. What only prepare steps
     * read (a convolution's index arithmetic before its last op) lives among
     * them: they run before the rest, as a phase of their own, so it may share
     * memory with what lives only in a run */
    bool *run_reads = nc_xcalloc(nbuf + 1, sizeof *run_reads);
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int j = 0; !p->steps[k].prepare && j < p->steps[k].nbufs; j++) run_reads[p->steps[k].bufs[j]] = true;
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int j = 0; p->steps[k].prepare && j < p->steps[k].nbufs; j++)
            if (run_reads[p->steps[k].bufs[j]] || b[p->steps[k].bufs[j]].last == end)
                b[p->steps[k].bufs[j]].first = 0, b[p->steps[k].bufs[j]].last = end;
    free(run_reads);
    for (uint32_t i = 0; i < nbuf; i++)
        if (b[i].last < 0) b[i].bytes = 0, b[i].first = b[i].last = 0;   /* never touched */
        else if (b[i].first > b[i].last) b[i].first = b[i].last;
    int64_t *size = nc_xmalloc((nbuf + 1) * sizeof *size);
    for (uint32_t i = 0; i < nbuf; i++) size[i] = b[i].bytes;
    if (p->plan_flags & NRT_PLAN_NO_REUSE)   /* no plan: everything lives the whole run */
        for (uint32_t i = 0; i < nbuf; i++) b[i].first = 0, b[i].last = end;
    int32_t *alias = p->plan_flags & NRT_PLAN_NO_REUSE ? NULL : plan_in_place(g, p, launch_of, b, nbuf);
    free(launch_of);
    for (uint32_t i = 0; i < nbuf; i++) b[i].kept = b[i].last == end;   /* what the next run or the host reads */
    *r = memplan_place(b, nbuf, 256);
    for (uint32_t i = 0; i < nbuf; i++) {
        if (alias && alias[i] >= 0) b[i].offset = b[alias[i]].offset, r->in_place++;
        b[i].bytes = size[i];   /* callers copy and report by the real size */
    }
    free(alias);
    free(size);
    return b;
}
