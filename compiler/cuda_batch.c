/* cuda_batch.c - runs of kernel steps launched as one kernel.
 *
 * Requires: the finished steps of cuda_emit_program_ex (buffers shared by
 * cuda_alias.c, p->slot_values set) and its fusion plan. Produces: the
 * first step of each run marked (nrt_step.batch, batch_kernel), and for
 * each run a kernel in the source that calls the steps' kernel bodies one
 * after another in every thread, each with its own nc_args from a table the
 * runtime fills once per session.
 *
 * A training step ends with the update of every parameter: fused kernels of
 * up to NRT_MAX_SECTIONS loops each (GPT-2's 148 parameters take 26). As one
 * launch the update is a multi-tensor kernel, as PyTorch's fused Adam is.
 * Two conditions make this safe. A kernel must be grid-stride only: any
 * grid covers every element and no thread waits for another, so the
 * batch's grid (the largest of its steps') runs each step whole. And no
 * step may touch a buffer another step of the run writes: the threads of
 * one launch run the steps at their own pace. The runtime keeps every
 * buffer of a run live over the whole run and shares no memory in place
 * inside it (program_plan_memory).
 *
 * Before runs are formed, small grid-stride kernels whose results are read
 * much later (the second kernels of column sums, adding up partial sums of
 * a bias's or a norm parameter's gradient) move down to just before their
 * first reader, where they meet: GPT-2's step launches 51 kernels fewer;
 * and an inference program's prepare steps go to the front, where they
 * batch (they run apart from the rest anyway). */
#include "cuda_emit.h"

#include <stdlib.h>
#include <string.h>

/* Whether a kernel's every loop is grid-stride, from its text: no block or
 * thread index outside the NC_GRID_STRIDE and NC_WARP_STRIDE macros, no
 * barrier, no shared memory, no block or warp reduction; lane exchanges
 * (nc_lane_xor) only with NC_WARP_STRIDE, whose passes keep a warp's lanes
 * together in a batch too: its steps start on multiples of 256 threads. */
static bool grid_stride_only(const char *body)
{
    static const char *const block_wide[] = {"blockIdx", "threadIdx", "blockDim", "gridDim", "__syncthreads",
                                             "__shared__", "nc_block_", "nc_warp", "__shfl", "atomic"};
    for (size_t i = 0; i < sizeof block_wide / sizeof *block_wide; i++)
        if (strstr(body, block_wide[i])) return false;
    return !strstr(body, "nc_lane_xor") || strstr(body, "NC_WARP_STRIDE");
}

/* The buffers a run touches and writes, with the list of ids to clear. */
typedef struct run_sets {
    bool *touched, *written;
    uint32_t *ids;
    uint32_t nids;
} run_sets;

static bool writes_slot(const cg_ctx *cg, const nrt_program *p, uint32_t k, int j)
{
    uint32_t v = p->slot_values ? p->slot_values[k * NRT_MAX_BUFS + j] : p->steps[k].bufs[j];
    if (v >= cg->g->nnodes) return true;   /* a temporary: scratch the step writes */
    return cuda_kernel_writes(cg, p->steps[k].node, v);
}

static bool same_bytes(const ir_graph *g, uint32_t a, uint32_t b)
{
    const ir_node *x = &g->nodes[a], *y = &g->nodes[b];
    return dtype_size(x->dtype) == dtype_size(y->dtype) && x->rank == y->rank &&
           memcmp(x->shape, y->shape, x->rank * sizeof *x->shape) == 0;
}

static bool lives_on(const ir_graph *g, uint32_t b)
{
    if (g->nodes[b].op == OP_PARAM || g->nodes[b].op == OP_INPUT) return true;
    for (uint32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].value == b) return true;
    return false;
}

/* For each buffer, 1 + the last step that touches it (0: none): whether a
 * step after k reads a buffer, which may_work_in_place asks of most steps,
 * was a scan of every later step. */
static uint32_t *last_touches(const cg_ctx *cg, const nrt_program *p, uint32_t *last)
{
    uint32_t nbuf = cg->g->nnodes + p->ntemps;
    if (!last) last = nc_xmalloc((nbuf + 1) * sizeof *last);
    memset(last, 0, (nbuf + 1) * sizeof *last);
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int i = 0; i < p->steps[k].nbufs; i++) last[p->steps[k].bufs[i]] = k + 1;
    return last;
}

/* Whether step k's memory plan may put a result where an operand that dies
 * at k was (program_plan_memory): a batch forbids that, and the memory is
 * worth more than the launch. Results kept in a parameter's memory (the
 * updates, cuda_alias.c) are not in question. at: where step k runs (k
 * itself but while sinking reorders the steps); last: last_touches of the
 * steps in that order. */
static bool may_work_in_place(const cg_ctx *cg, const nrt_program *p, uint32_t k, uint32_t at, const uint32_t *last)
{
    const ir_graph *g = cg->g;
    const nrt_step *s = &p->steps[k];
    for (int o = 0; o < s->nbufs; o++) {
        uint32_t out = s->bufs[o];
        /* a carried parameter copy lives across runs: never in an operand's place */
        if (out >= g->nnodes || lives_on(g, out) || !writes_slot(cg, p, k, o) || (cg->carry_from && cg->carry_from[out] != IR_NONE))
            continue;
        for (int j = 0; j < s->nbufs; j++) {
            uint32_t in = s->bufs[j];
            if (j == o || in >= g->nnodes || in == out || lives_on(g, in) || writes_slot(cg, p, k, j) || !same_bytes(g, in, out))
                continue;
            if (last[in] <= at + 1) return true;   /* not read after k */
        }
    }
    return false;
}

/* grid_stride_only of body k, read once: sinking asks it of every step
 * against every other (a fifth of a --memory-budget search's time) */
static bool body_stride_only(const cg_ctx *cg, uint32_t k)
{
    if (k >= cg->nstride_only) return grid_stride_only(cg->bodies[k]);
    if (!cg->stride_only[k]) {
        int8_t *known = cuda_body_memo_stride(cg, k);   /* an earlier compile's, across a search */
        if (!known || !*known) cg->stride_only[k] = grid_stride_only(cg->bodies[k]) ? 1 : -1;
        else cg->stride_only[k] = *known;
        if (known) *known = cg->stride_only[k];
    }
    return cg->stride_only[k] > 0;
}

static bool batchable(const cg_ctx *cg, const nrt_program *p, uint32_t k, uint32_t at, const uint32_t *last)
{
    const nrt_step *s = &p->steps[k];
    return s->kind == NRT_STEP_KERNEL && s->grid == NRT_GRID_ELEMENTS && s->kernel < cg->nbodies &&
           body_stride_only(cg, s->kernel) && !may_work_in_place(cg, p, k, at, last);
}

/* Whether step k may run beside the run's steps so far: it writes nothing
 * they touch and touches nothing they write. */
static bool independent(const cg_ctx *cg, const nrt_program *p, uint32_t k, const run_sets *r)
{
    const nrt_step *s = &p->steps[k];
    for (int j = 0; j < s->nbufs; j++) {
        uint32_t b = s->bufs[j];
        if (r->written[b] || (r->touched[b] && writes_slot(cg, p, k, j))) return false;
    }
    return true;
}

static void join_run(const cg_ctx *cg, const nrt_program *p, uint32_t k, run_sets *r)
{
    const nrt_step *s = &p->steps[k];
    for (int j = 0; j < s->nbufs; j++) {
        uint32_t b = s->bufs[j];
        if (!r->touched[b]) r->ids[r->nids++] = b;
        r->touched[b] = true;
        r->written[b] |= writes_slot(cg, p, k, j);
    }
}

static void clear_run(run_sets *r)
{
    for (uint32_t i = 0; i < r->nids; i++) r->touched[r->ids[i]] = r->written[r->ids[i]] = false;
    r->nids = 0;
}

/* A step's body inside a batch loops over a grid of its own: thread vt of
 * vg (NC_GRID_STRIDE as the batch kernel redefines it), where the batch
 * kernel rotates its threads so that each step starts on other threads than
 * the one before. Steps smaller than the launch then run side by side on
 * different multiprocessors instead of one after another on the first few
 * (GPT-2's batches of eight column totals, each over 768 to 2304 columns,
 * took 170-260 us on an H200 when every step started at thread 0). Any
 * rotation covers every element once: a grid-stride loop needs only that
 * its threads are vg distinct numbers from 0. A warp-stride loop needs its
 * warps whole, which they are: vg and every step's start (nc_batch_share)
 * are multiples of 256, so a warp's lanes are 32 consecutive numbers from
 * a multiple of 32. */
static const char batch_grid_macros[] =
    "#undef NC_GRID_STRIDE\n#undef NC_GRID_STRIDE_FROM\n#undef NC_WARP_STRIDE\n"
    "#define NC_GRID_STRIDE(i, n) for (long long i = nc_vt; i < (n); i += nc_vg)\n"
    "#define NC_GRID_STRIDE_FROM(i, start, n) for (long long i = (start) + nc_vt; i < (n); i += nc_vg)\n"
    "#define NC_WARP_STRIDE(w, n) for (long long w = nc_vt >> 5; w < (n); w += nc_vg >> 5)\n";

/* The kernel that runs steps [first, first + n): each distinct body once as
 * a device function, consecutive steps of one body in a loop, each step on
 * the threads after the previous step's (batch_grid_macros). The bodies are
 * called, not inlined: ptxas's time grows faster than a function's length,
 * and GPT-2's AdamW batch (22 bodies) took it 36 s inlined and 8.7 s as
 * calls, with the same 96 registers and no stack (sm_90a, CUDA 13.0); a call
 * is made once per body and thread, its loop inside. */
static void emit_batch_kernel(cg_ctx *cg, uint32_t first, uint32_t n, bool *has_device_fn)
{
    nrt_program *p = cg->prog;
    cg_printf(&cg->src, "%s", batch_grid_macros);
    for (uint32_t k = first; k < first + n; k++) {
        uint32_t kern = p->steps[k].kernel;
        if (has_device_fn[kern]) continue;
        has_device_fn[kern] = true;
        NC_ASSERT(strncmp(cg->bodies[kern], CUDA_BODY_HEADER, strlen(CUDA_BODY_HEADER)) == 0);
        cg_printf(&cg->src, "__device__ __noinline__ void %s_in_batch(const nc_args &A, long long nc_vt, long long nc_vg) {\n%s",
                  p->kernel_names[kern], cg->bodies[kern] + strlen(CUDA_BODY_HEADER));
    }
    cg_printf(&cg->src, "%s", CUDA_GRID_MACROS);   /* the kernels after this one loop over their own grid */
    char name[64];
    cg_snprintf(name, sizeof name, "k_batch_step%u", first);
    cg_printf(&cg->src, "// steps %u-%u, one launch:", first, first + n - 1);
    for (uint32_t k = first; k < first + n;) {
        uint32_t same = 1;
        while (k + same < first + n && p->steps[k + same].kernel == p->steps[k].kernel) same++;
        cg_printf(&cg->src, " %s", p->kernel_names[p->steps[k].kernel]);
        if (same > 1) cg_printf(&cg->src, " x%u", same);
        k += same;
    }
    cg_printf(&cg->src, "\nextern \"C\" __global__ void %s(nc_args A) {\n  NC_PDL_ENTER();\n  const nc_args *T = (const nc_args *)A.buf[0];\n",
              name);
    cg_printf(&cg->src, "  const long long vg = (long long)gridDim.x * blockDim.x, tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n");
    cg_printf(&cg->src, "  long long at = 0;   /* the thread the next step starts on */\n");
    for (uint32_t k = first; k < first + n;) {
        uint32_t same = 1;
        while (k + same < first + n && p->steps[k + same].kernel == p->steps[k].kernel) same++;
        const char *kn = p->kernel_names[p->steps[k].kernel];
        if (same == 1) cg_printf(&cg->src, "  {\n    const int t = %u;\n", k - first);
        else cg_printf(&cg->src, "  for (int t = %u; t < %u; t++) {\n", k - first, k - first + same);
        cg_printf(&cg->src, "    %s_in_batch(T[t], tid >= at ? tid - at : tid - at + vg, vg);\n", kn);
        cg_printf(&cg->src, "    at += nc_batch_share(T[t].n[0], vg);\n    if (at >= vg) at -= vg;\n  }\n");
        k += same;
    }
    cg_printf(&cg->src, "}\n\n");
    p->kernel_names = nc_xrealloc(p->kernel_names, (p->nkernels + 1) * sizeof *p->kernel_names);
    p->kernel_names[p->nkernels] = nc_xstrdup(name);
    p->steps[first].batch = (uint16_t)n;
    p->steps[first].batch_kernel = p->nkernels++;
}

/* Step k reads nothing but small scratch (partial sums), small values (a
 * bias's gradient that cuBLASLt stored, widened here) and parameters and
 * inputs, at most SINK_MAX_READ_BYTES in all: moving it later keeps little
 * alive longer, which could raise the peak, and hardly any bytes. */
#define SINK_MAX_READ_BYTES ((int64_t)4 << 20)
#define SINK_MAX_VALUE_BYTES ((int64_t)256 << 10)

static bool reads_little(const cg_ctx *cg, const nrt_program *p, uint32_t k)
{
    const ir_graph *g = cg->g;
    const nrt_step *s = &p->steps[k];
    int64_t total = 0;
    for (int j = 0; j < s->nbufs; j++) {
        uint32_t b = s->bufs[j];
        int64_t bytes;
        if (writes_slot(cg, p, k, j) || (b < g->nnodes && lives_on(g, b))) continue;
        if (b < g->nnodes) {
            const ir_node *n = &g->nodes[b];
            bytes = dtype_size(n->dtype);
            for (int d = 0; d < n->rank; d++) {
                int64_t len;
                if (!dim_is_const(&g->dims[n->shape[d]], &len) || (bytes *= len) > SINK_MAX_VALUE_BYTES) return false;
            }
        } else {
            const nrt_temp *t = &p->temps[b - g->nnodes];
            if (!dim_is_const(&g->dims[t->numel], &bytes)) return false;
            bytes *= (int64_t)dtype_size(t->dtype);
        }
        total += bytes;
    }
    return total <= SINK_MAX_READ_BYTES;
}

/* Whether step k stores to its slot j: a product's result too, which
 * writes_slot (a kernel's view of its values) does not see. */
static bool step_stores(const cg_ctx *cg, const nrt_program *p, uint32_t k, int j)
{
    return (nrt_step_writes(&p->steps[k]) >> j & 1) || writes_slot(cg, p, k, j);
}

/* Sinking moves steps in an order of their indices (ord: the step at each
 * place), and puts the steps in that order once at the end: moving the
 * steps themselves, hundreds of bytes each, a place at a time, was a
 * twentieth of a --memory-budget search. Beside it, what sinking asks of
 * each step again and again, by step: its stored slots (bit j:
 * step_stores), a signature of its buffers (bit b % 64 for each buffer b:
 * no common bit, no common buffer) and whether it is sinkable (0: not known
 * since the steps after it last changed, 1, -1); and by buffer, 1 + the
 * last place touching it (last_touches), kept as steps move (move_last).
 * Asked afresh, sinking was a tenth of the search: gather_target asks
 * sinkable of every earlier step, and may_work_in_place scanned every later
 * one. */
typedef struct sink_state {
    uint32_t *ord;
    uint64_t *stores, *sig;
    int8_t *sinkable;
    uint32_t *last;
} sink_state;

static sink_state sink_state_new(const cg_ctx *cg, const nrt_program *p)
{
    sink_state st = {.ord = nc_xmalloc((p->nsteps + 1) * sizeof *st.ord),
                     .stores = nc_xcalloc(p->nsteps + 1, sizeof *st.stores),
                     .sig = nc_xcalloc(p->nsteps + 1, sizeof *st.sig),
                     .sinkable = nc_xcalloc(p->nsteps + 1, sizeof *st.sinkable),
                     .last = last_touches(cg, p, NULL)};
    for (uint32_t k = 0; k < p->nsteps; k++) {
        st.ord[k] = k;
        for (int j = 0; j < p->steps[k].nbufs; j++) {
            if (step_stores(cg, p, k, j)) st.stores[k] |= (uint64_t)1 << j;
            st.sig[k] |= (uint64_t)1 << (p->steps[k].bufs[j] & 63);
        }
    }
    return st;
}

/* The steps in st's order, and st gone. */
static void sink_state_apply(nrt_program *p, sink_state *st)
{
    nrt_step *steps = nc_xmalloc((p->nsteps + 1) * sizeof *steps);
    for (uint32_t k = 0; k < p->nsteps; k++) steps[k] = p->steps[st->ord[k]];
    memcpy(p->steps, steps, p->nsteps * sizeof *steps);
    free(steps);
    if (p->slot_values) {
        size_t row = NRT_MAX_BUFS * sizeof *p->slot_values;
        uint32_t *sv = nc_xmalloc(p->nsteps * row + 1);
        for (uint32_t k = 0; k < p->nsteps; k++) memcpy((char *)sv + k * row, &p->slot_values[(size_t)st->ord[k] * NRT_MAX_BUFS], row);
        memcpy(p->slot_values, sv, p->nsteps * row);
        free(sv);
    }
    free(st->ord);
    free(st->stores);
    free(st->sig);
    free(st->sinkable);
    free(st->last);
}

/* Whether the steps at places a and b share a buffer that either of them
 * writes: then they keep their order. */
static bool steps_conflict(const sink_state *st, const nrt_program *p, uint32_t a, uint32_t b)
{
    uint32_t x = st->ord[a], y = st->ord[b];
    if (!(st->sig[x] & st->sig[y])) return false;
    const nrt_step *s = &p->steps[x], *t = &p->steps[y];
    uint64_t sa = st->stores[x], sb = st->stores[y];
    for (int i = 0; i < t->nbufs; i++)
        for (int j = 0; j < s->nbufs; j++)
            if (t->bufs[i] == s->bufs[j] && ((sa >> j & 1) || (sb >> i & 1))) return true;
    return false;
}

/* Where the step at place k can go: just before the first later step that
 * touches what it writes, provided nothing in between writes what it reads;
 * k itself when it cannot move. */
static uint32_t sink_target(const sink_state *st, const nrt_program *p, uint32_t k)
{
    uint32_t r = k + 1;
    while (r < p->nsteps && !steps_conflict(st, p, k, r)) r++;
    return r - 1;
}

/* A small step (at place k) that may move down to its first reader
 * (below). Whether it may work in place depends on the steps after it: a
 * move clears what st knew of the steps it passes (move_step). */
static bool sinkable(const cg_ctx *cg, sink_state *st, const nrt_program *p, uint32_t k)
{
    uint32_t i = st->ord[k];
    if (!st->sinkable[i])   /* prepare steps stay in front */
        st->sinkable[i] = !p->steps[i].prepare && batchable(cg, p, i, k, st->last) && reads_little(cg, p, i) ? 1 : -1;
    return st->sinkable[i] > 0;
}

/* Where a sunk step (at place k) can go up to meet an earlier one: just
 * after the nearest earlier sinkable step, provided nothing from there to k
 * shares a buffer with k that either writes; k itself otherwise. */
static uint32_t gather_target(const cg_ctx *cg, sink_state *st, const nrt_program *p, uint32_t k)
{
    for (uint32_t r = k; r-- > 0;) {
        if (steps_conflict(st, p, r, k)) return k;
        if (sinkable(cg, st, p, r)) return r + 1;
    }
    return k;
}

/* n elements of size bytes each at base: the one at from to to, the ones
 * between shifted by one toward from. */
static void move_element(void *base, size_t size, uint32_t from, uint32_t to)
{
    if (from == to) return;
    unsigned char *b = base, tmp[sizeof(uint32_t) * NRT_MAX_BUFS > sizeof(nrt_step) ? sizeof(uint32_t) * NRT_MAX_BUFS
                                                                                       : sizeof(nrt_step)];
    NC_ASSERT(size <= sizeof tmp);
    memcpy(tmp, b + from * size, size);
    if (from < to) memmove(b + from * size, b + (from + 1) * size, (to - from) * size);
    else memmove(b + (to + 1) * size, b + to * size, (from - to) * size);
    memcpy(b + to * size, tmp, size);
}

static bool touches(const nrt_step *s, uint32_t b)
{
    for (int i = 0; i < s->nbufs; i++)
        if (s->bufs[i] == b) return true;
    return false;
}

/* st->last after the step at place from went to place to (st->ord as
 * moved): the steps between moved one place toward from, so a buffer whose
 * last step is one of them follows it; the moved step's buffers end at it,
 * or, where it moved up and was their last, at the last step touching them
 * (found from its old place up). Recounting it all after each move was
 * slower than the scans it replaced. */
static void move_last(const nrt_program *p, sink_state *st, uint32_t from, uint32_t to)
{
    uint32_t *last = st->last;
    const nrt_step *moved = &p->steps[st->ord[to]];
    if (from < to) {
        for (uint32_t q = from; q < to; q++) {   /* was at q + 1 */
            const nrt_step *s = &p->steps[st->ord[q]];
            for (int i = 0; i < s->nbufs; i++)
                if (last[s->bufs[i]] == q + 2) last[s->bufs[i]] = q + 1;
        }
        for (int i = 0; i < moved->nbufs; i++)
            if (last[moved->bufs[i]] < to + 1) last[moved->bufs[i]] = to + 1;
        return;
    }
    for (uint32_t q = from; q > to; q--) {   /* was at q - 1 */
        const nrt_step *s = &p->steps[st->ord[q]];
        for (int i = 0; i < s->nbufs; i++)
            if (last[s->bufs[i]] == q) last[s->bufs[i]] = q + 1;
    }
    for (int i = 0; i < moved->nbufs; i++) {
        uint32_t b = moved->bufs[i], r = from;
        if (last[b] != from + 1) continue;   /* a step after from touches it: its last step stays */
        while (r > to && !touches(&p->steps[st->ord[r]], b)) r--;
        last[b] = r + 1;
    }
}

/* The step at place from to another place, to: the steps between move one
 * place toward from, and each step from from to to has other steps after
 * it now: what st knew of whether they are sinkable goes. */
static void move_step(const nrt_program *p, sink_state *st, uint32_t from, uint32_t to)
{
    move_element(st->ord, sizeof *st->ord, from, to);
    uint32_t lo = from < to ? from : to, hi = from < to ? to : from;
    for (uint32_t q = lo; q <= hi; q++) st->sinkable[st->ord[q]] = 0;
    move_last(p, st, from, to);
}

/* Small grid-stride kernels whose results are read much later (the second
 * kernel of a bias's or a norm parameter's gradient, adding up its partial
 * sums) move down to just before their first reader, where they meet and
 * share one launch; then those that landed before different readers move
 * up to meet the group before them where nothing in between touches what
 * they do. GPT-2's gradient norm reads its column totals in 10 groups
 * (concats of 16 parameters' squares), one before each concat: the ten
 * groups become one launch. The order of everything else is kept. */
static uint32_t sink_small_steps(cg_ctx *cg)
{
    nrt_program *p = cg->prog;
    sink_state st = sink_state_new(cg, p);
    uint32_t moved = 0;
    for (uint32_t k = p->nsteps; k-- > 0;) {
        if (!sinkable(cg, &st, p, k)) continue;
        uint32_t to = sink_target(&st, p, k);
        if (to > k + 1) move_step(p, &st, k, to), moved++;
    }
    for (uint32_t k = 1; k < p->nsteps; k++) {
        if (!sinkable(cg, &st, p, k) || sinkable(cg, &st, p, k - 1)) continue;
        uint32_t to = gather_target(cg, &st, p, k);
        if (to < k) move_step(p, &st, k, to), moved++;
    }
    sink_state_apply(p, &st);
    return moved;
}

/* Step from to an earlier place, to, with its slot values: the steps
 * between move down one. */
static void move_step_up(nrt_program *p, uint32_t from, uint32_t to)
{
    move_element(p->steps, sizeof *p->steps, from, to);
    if (p->slot_values) move_element(p->slot_values, NRT_MAX_BUFS * sizeof *p->slot_values, from, to);
}

/* Prepare steps (nrt_program_mark_prepare) first, in their order: they read
 * parameters, constants and each other only, and run on their own before
 * the rest anyway, so side by side they batch into a few launches. */
static void hoist_prepare_steps(cg_ctx *cg)
{
    nrt_program *p = cg->prog;
    for (uint32_t k = 0, front = 0; k < p->nsteps; k++)
        if (p->steps[k].prepare) {
            move_step_up(p, k, front++);
        }
}

void cuda_batch_launches(cg_ctx *cg)
{
    cg->nstride_only = cg->nbodies;
    cg->stride_only = nc_xcalloc(cg->nbodies + 1, sizeof *cg->stride_only);
    hoist_prepare_steps(cg);
    sink_small_steps(cg);
    nrt_program *p = cg->prog;
    uint32_t nbuf = cg->g->nnodes + p->ntemps;
    run_sets r = {.touched = nc_xcalloc(nbuf + 1, sizeof *r.touched),
                  .written = nc_xcalloc(nbuf + 1, sizeof *r.written),
                  .ids = nc_xmalloc((nbuf + 1) * sizeof *r.ids)};
    bool *has_device_fn = nc_xcalloc(cg->nbodies + 1, sizeof *has_device_fn);
    uint32_t *last = last_touches(cg, p, NULL);   /* the steps stay where they are from here */
    for (uint32_t k = 0; k < p->nsteps; k++) {
        if (!batchable(cg, p, k, k, last)) continue;
        clear_run(&r);
        join_run(cg, p, k, &r);
        uint32_t n = 1;
        /* a prepare step runs only when parameters change: not beside one that runs every time */
        while (k + n < p->nsteps && n < NRT_MAX_BATCH && batchable(cg, p, k + n, k + n, last) && independent(cg, p, k + n, &r) &&
               p->steps[k + n].prepare == p->steps[k].prepare)
            join_run(cg, p, k + n++, &r);
        if (n >= 2) emit_batch_kernel(cg, k, n, has_device_fn);
        k += n - 1;
    }
    free(has_device_fn);
    free(last);
    free(cg->stride_only);
    cg->stride_only = NULL, cg->nstride_only = 0;
    free(r.touched);
    free(r.written);
    free(r.ids);
}
