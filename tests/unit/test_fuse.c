/* test_fuse.c - elementwise fusion, checked without a GPU: the fused program
 * is a valid dataflow (every buffer a step reads is a source or was written
 * by an earlier step; every output and update is written), it launches fewer
 * kernels and moves fewer bytes than the unfused one, and the kernels of a
 * repeated layer are shared. (Numerical agreement with the CPU executor is
 * checked on the GPU by test_gpu_models.) */
#include "cuda_emit.h"
#include "driver.h"
#include "program.h"

#include "test_util.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The IR value slot j of step k stands for (cuda_alias.c may store it in
 * another value's buffer). */
static uint32_t slot_value(const nrt_program *p, uint32_t k, int j)
{
    return p->slot_values ? p->slot_values[k * NRT_MAX_BUFS + j] : p->steps[k].bufs[j];
}

/* The value a view stands for: reshapes are views of their operand. */
static uint32_t view_root(const ir_graph *g, uint32_t v)
{
    while (v < g->nnodes && g->nodes[v].op == OP_RESHAPE) v = ir_args(g, &g->nodes[v])[0];
    return v;
}

/* Every value a step reads is a source or was written by an earlier step, and
 * the buffer it reads still holds it (no shared buffer was overwritten by
 * another value in between). What a step writes: its own node, temporaries,
 * and (fused) the members of its group, which the test learns from the same
 * grouping the emitter uses. */
static bool valid_dataflow(const ir_graph *g, const nrt_program *p, bool fused)
{
    cg_ctx cg = {.g = g};
    if (fused) cuda_fuse_plan(&cg);
    uint32_t nbuf = g->nnodes + p->ntemps;
    bool *written = calloc(nbuf + 1, 1);
    uint32_t *holds = malloc((nbuf + 1) * sizeof *holds);   /* the value each buffer holds now */
    bool ok = true;
    for (uint32_t b = 0; b < nbuf; b++) holds[b] = b;
    for (ir_value v = 0; v < g->nnodes; v++)
        if (g->nodes[v].op == OP_INPUT || g->nodes[v].op == OP_PARAM) written[v] = true;
    for (uint32_t k = 0; k < p->nsteps && ok; k++) {
        const nrt_step *s = &p->steps[k];
        bool own[NRT_MAX_BUFS];
        for (int j = 0; j < s->nbufs && ok; j++) {
            uint32_t v = slot_value(p, k, j), b = s->bufs[j];
            own[j] = v >= g->nnodes || cuda_kernel_writes(&cg, s->node, v);
            if (s->kind == NRT_STEP_COPY) own[j] = j == 1;   /* copy: src -> dst */
            if (s->kind == NRT_STEP_MATMUL)
                own[j] = v >= g->nnodes || j == nrt_matmul_slots_of(s).out || j == nrt_matmul_slots_of(s).aux ||
                         j == nrt_matmul_slots_of(s).colsum;
            if (own[j]) continue;
            if (!written[v] && !written[view_root(g, v)]) {
                fprintf(stderr, "step %u (%s, %%%u) reads %%%u (%s) before any step writes it\n", k,
                        s->kind == NRT_STEP_KERNEL ? p->kernel_names[s->kernel] : "call", s->node, v, nc_ops[g->nodes[v].op].name);
                ok = false;
            } else if (view_root(g, holds[b]) != view_root(g, v)) {
                fprintf(stderr, "step %u reads %%%u from buffer %%%u, which holds %%%u by then\n", k, v, b, holds[b]);
                ok = false;
            }
        }
        for (int j = 0; j < s->nbufs && ok; j++) {
            if (!own[j]) continue;
            written[slot_value(p, k, j)] = true;   /* a copy's destination holds its source's value */
            holds[s->bufs[j]] = s->kind == NRT_STEP_COPY ? slot_value(p, k, 0) : slot_value(p, k, j);
        }
    }
    /* the loops of one kernel are independent: no group reads what another
     * group of its kernel computes, directly or through broadcasts */
    for (ir_value v = 0; cg.group && v < g->nnodes && ok; v++) {
        if (!cg.group[v]) continue;
        for (int i = 0; i < g->nodes[v].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[v])[i];
            while (g->nodes[a].op == OP_BROADCAST) a = ir_args(g, &g->nodes[a])[0];
            if (cg.group[a] && cg.group[a] != cg.group[v] && cuda_fuse_same_kernel(&cg, a, v)) {
                fprintf(stderr, "%%%u reads %%%u, computed by another loop of the same kernel\n", v, a);
                ok = false;
            }
        }
    }
    /* the kernel runs at a group's last member: nothing between its first
     * and last member reads a member, directly or through fills, broadcasts
     * and movement ops (a group is a run, or joined by a group whose results
     * only it reads: plan_sunk_groups) */
    for (ir_value v = 0; cg.group && v < g->nnodes && ok; v++) {
        if (!cg.group[v] || (v > 0 && cg.group[v - 1] == cg.group[v])) continue;
        ir_value end = v;
        for (ir_value u = v; u < g->nnodes; u++)
            if (cg.group[u] == cg.group[v]) end = u;
        for (ir_value u = v; u <= end && ok; u++) {
            const ir_node *n = &g->nodes[u];
            bool reads_member = false;
            for (int i = 0; i < n->nargs && cg.group[u] != cg.group[v]; i++) {
                ir_value a = ir_args(g, n)[i];
                while (g->nodes[a].op == OP_BROADCAST || op_is_movement_link(g->nodes[a].op)) a = ir_args(g, &g->nodes[a])[0];
                reads_member |= cg.group[a] == cg.group[v];
            }
            if (reads_member) {
                fprintf(stderr, "group of %%%u..%%%u holds %%%u (%s), which reads a member\n", v, end, u, nc_ops[n->op].name);
                ok = false;
            }
        }
    }
    /* after the step every parameter's buffer holds its update */
    for (uint32_t i = 0; i < g->noutputs && ok; i++) ok = written[g->outputs[i].value];
    for (uint32_t i = 0; i < g->nupdates && ok; i++) {
        ir_value pnode = IR_NONE;
        for (ir_value v = 0; v < g->nnodes; v++)
            if (g->nodes[v].op == OP_PARAM && g->nodes[v].attr.index == g->updates[i].param) pnode = v;
        ok = written[g->updates[i].value] && pnode != IR_NONE && holds[pnode] == g->updates[i].value;
        if (!ok) fprintf(stderr, "update %u: parameter buffer %%%u holds %%%u, not %%%u\n", i, pnode,
                         pnode != IR_NONE ? holds[pnode] : 0, g->updates[i].value);
    }
    free(written);
    free(holds);
    cuda_fuse_free(&cg);
    return ok;
}

/* A matmul adding a residual that dies there writes over it (cuBLASLt runs C
 * == D in place): the plan gives both the same memory, and never when the
 * residual is read later. Returns how many are in place. */
static int residuals_in_place(const ir_graph *g, const nrt_program *p)
{
    memplan_result r;
    char err[256];
    memplan_buf *b = program_plan_memory(g, p, NULL, &r, err, sizeof err);
    CHECK(b != NULL);
    if (!b) return 0;
    int in_place = 0;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        const nrt_step *s = &p->steps[k];
        if (s->kind != NRT_STEP_MATMUL || !(s->mm_epilogue & NRT_EPI_RESIDUAL)) continue;
        nrt_matmul_slots m = nrt_matmul_slots_of(s);
        uint32_t out = s->bufs[m.out], res = s->bufs[m.residual];
        bool read_later = false;
        for (uint32_t j = k + 1; j < p->nsteps; j++)
            for (int q = 0; q < p->steps[j].nbufs; q++) read_later |= p->steps[j].bufs[q] == res;
        bool shared = b[out].offset == b[res].offset && b[out].bytes > 0;
        CHECK(!(shared && read_later));
        in_place += shared;
    }
    free(b);
    return in_place;
}

/* The steps of a batch run at once (cuda_batch.c): in the memory plan, no
 * buffer one of them writes overlaps a buffer another touches. Returns how
 * many launches compute the step's updates (the update of every parameter
 * and optimizer state: one). */
static uint32_t check_batches(const ir_graph *g, const nrt_program *p, uint32_t *stored_squares)
{
    cg_ctx cg = {.g = g};
    cuda_fuse_plan(&cg);
    /* the gradient norm squares each gradient as its sum loads it: no kernel stores a g * g */
    *stored_squares = 0;
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int j = 0; j < p->steps[k].nbufs && p->steps[k].kind == NRT_STEP_KERNEL; j++) {
            uint32_t v = slot_value(p, k, j);
            const ir_node *vn = v < g->nnodes ? &g->nodes[v] : NULL;
            *stored_squares += vn && vn->op == OP_MUL && ir_args(g, vn)[0] == ir_args(g, vn)[1] && cuda_kernel_writes(&cg, p->steps[k].node, v);
        }
    memplan_result r;
    char err[256];
    memplan_buf *b = program_plan_memory(g, p, NULL, &r, err, sizeof err);
    CHECK(b != NULL);
    uint32_t *launch_of = nrt_program_launches(p), update_launch = UINT32_MAX, update_launches = 0;
    for (uint32_t k = 0; b && k < p->nsteps; k++) {
        const nrt_step *s = &p->steps[k];
        for (uint32_t i = 0; i < g->nupdates && s->kind == NRT_STEP_KERNEL; i++) {
            /* micro-batch accumulators are not the update */
            if (g->params[g->updates[i].param].role == IR_ROLE_ACCUMULATOR) continue;
            if (!cuda_kernel_writes(&cg, s->node, g->updates[i].value) || launch_of[k] == update_launch) continue;
            update_launch = launch_of[k];
            update_launches++;
        }
        if (s->batch < 2) continue;
        for (uint32_t x = k; x < k + s->batch; x++)
            for (uint32_t y = k; y < k + s->batch; y++)
                for (int i = 0; x != y && i < p->steps[x].nbufs; i++) {
                    const nrt_step *sx = &p->steps[x];
                    uint32_t v = slot_value(p, x, i);
                    if (v < g->nnodes && !cuda_kernel_writes(&cg, sx->node, v)) continue;
                    const memplan_buf *w = &b[sx->bufs[i]];
                    for (int j = 0; j < p->steps[y].nbufs; j++) {
                        const memplan_buf *t = &b[p->steps[y].bufs[j]];
                        bool overlap = w->bytes > 0 && t->bytes > 0 && w->offset < t->offset + t->bytes && t->offset < w->offset + w->bytes;
                        if (overlap) fprintf(stderr, "batch at step %u: step %u writes memory step %u touches\n", k, x, y);
                        CHECK(!overlap);
                    }
                }
    }
    /* a guarded update (micro-batches, loss scaling) is guarded by the kernel that computes it */
    for (uint32_t i = 0; i < g->nupdates; i++) {
        const ir_node *u = &g->nodes[g->updates[i].value];
        if (u->op != OP_WHERE || !cg.group[g->updates[i].value]) continue;
        ir_value fresh = ir_args(g, u)[1];
        if (cg.group[fresh] && !cuda_fuse_same_kernel(&cg, fresh, g->updates[i].value)) {
            fprintf(stderr, "update %u: computed and guarded by different kernels\n", i);
            update_launches++;
        }
    }
    free(launch_of);
    free(b);
    cuda_fuse_free(&cg);
    return update_launches;
}

/* want_epilogues: NRT_EPI_* bits some matmul step of the fused training step must carry. */
static void check_model(const char *path, const char *const *dn, const int64_t *dv, int nd, unsigned want_epilogues, int accumulate)
{
    src_table src = {0};
    char err[1024];
    const char *sn[] = {"L"}, *sv[] = {"2"};
    /* GPT-2's head in the 4 slices it takes at 16 x 1024 (at these dims it would be whole):
     * the weight's f32 gradient adds up across them in place */
    driver_opts o = {.verify = true, .train_step = true, .fuse = true, .accumulate = accumulate, .dim_names = dn, .dim_values = dv, .ndims = nd,
                     .set_names = sn, .set_values = sv, .nsets = strstr(path, "gpt2") ? 1 : 0, .loss_slices = strstr(path, "gpt2") ? 4 : 0};
    ir_graph *g = compile_file(path, &o, &src);
    src_free(&src);
    CHECK(g != NULL);
    if (!g) return;
    nrt_program plain, fused;
    CHECK(cuda_emit_program_ex(g, false, &plain, err, sizeof err));
    CHECK(cuda_emit_program_ex(g, true, &fused, err, sizeof err));
    uint32_t plain_kernels = 0, fused_kernels = 0, fused_steps = 0, multi = 0, epilogues = 0;
    unsigned epilogue_bits = 0;
    for (uint32_t k = 0; k < fused.nsteps; k++) {
        fused_kernels += fused.steps[k].kind == NRT_STEP_KERNEL;
        fused_steps += fused.steps[k].kind == NRT_STEP_KERNEL && strstr(fused.kernel_names[fused.steps[k].kernel], "_fused");
        multi += fused.steps[k].sections > 1;
        epilogues += fused.steps[k].kind == NRT_STEP_MATMUL && fused.steps[k].mm_epilogue;
        if (fused.steps[k].kind == NRT_STEP_MATMUL) epilogue_bits |= fused.steps[k].mm_epilogue;
    }
    for (uint32_t k = 0; k < plain.nsteps; k++) {
        plain_kernels += plain.steps[k].kind == NRT_STEP_KERNEL;
        CHECK(plain.steps[k].mm_epilogue == 0);   /* --no-fuse: no epilogues either */
    }
    printf("%s: kernel launches %u -> %u (%u fused, %u of several loops), distinct kernels %u -> %u, %u matmul epilogues\n",
           path, plain_kernels, fused_kernels, fused_steps, multi, plain.nkernels, fused.nkernels, epilogues);
    CHECK((epilogue_bits & want_epilogues) == want_epilogues);
    /* a bias's gradient behind GELU's backward is stored by the matmul's
     * epilogue (DGELU_BGRAD), not summed by a kernel of its own */
    uint32_t dgelu_sum_kernels = 0;
    for (uint32_t k = 0; k < fused.nsteps; k++) {
        const nrt_step *st = &fused.steps[k];
        const ir_node *n = &g->nodes[st->node];
        dgelu_sum_kernels += st->kind == NRT_STEP_KERNEL && n->op == OP_SUM && g->nodes[ir_args(g, n)[0]].op == OP_GELU_TANH_GRAD;
    }
    if (want_epilogues & NRT_EPI_BGRAD) CHECK(dgelu_sum_kernels == 0);
    /* tensor-core attention reads q, k and v inside the qkv matmul's result:
     * no transposed copy feeds it */
    uint32_t tiled = 0, from_copies = 0, lse_steps = 0, transposes = 0;
    for (uint32_t k = 0; k < fused.nsteps; k++) {
        const nrt_step *st = &fused.steps[k];
        transposes += st->kind == NRT_STEP_KERNEL && g->nodes[st->node].op == OP_TRANSPOSE;
        if (st->kind != NRT_STEP_KERNEL || st->grid != NRT_GRID_TILES) continue;
        tiled++;
        lse_steps += g->nodes[st->node].op == OP_ATTENTION_LSE;   /* the forward kernel writes it */
        for (int j = 0; j < 2; j++) from_copies += st->bufs[j] < g->nnodes && g->nodes[st->bufs[j]].op == OP_TRANSPOSE;
    }
    if (strstr(path, "gpt2")) {
        /* nor does it write transposed copies: its output, and the q, k, v
         * gradients (into their concat), go where their readers want them */
        printf("%s: %u tensor-core attention steps, %u operands read from transposed copies, %u lse steps, %u transposes\n",
               path, tiled, from_copies, lse_steps, transposes);
        CHECK(tiled > 0 && from_copies == 0 && lse_steps == 0 && transposes == 0);
        /* the token and position embeddings' rows are gathered by their add
         * (the position's through its broadcast over the batch) */
        uint32_t gathers = 0;
        for (uint32_t k = 0; k < fused.nsteps; k++)
            gathers += fused.steps[k].kind == NRT_STEP_KERNEL && g->nodes[fused.steps[k].node].op == OP_GATHER;
        printf("%s: %u gather kernels\n", path, gathers);
        CHECK(gathers == 0);
    }
    int in_place = residuals_in_place(g, &fused);
    if (want_epilogues & NRT_EPI_RESIDUAL) CHECK(in_place > 0);
    CHECK(multi > 0);   /* the parameters' updates share kernels */
    /* and so do the parameters' low-precision copies (scheduled first) */
    uint32_t copies = 0, copy_steps = 0;
    for (ir_value v = 0; v < g->nnodes; v++)
        copies += g->nodes[v].op == OP_CAST && g->nodes[ir_args(g, &g->nodes[v])[0]].op == OP_PARAM;
    for (uint32_t k = 0; k < fused.nsteps; k++) {
        const ir_node *n = &g->nodes[fused.steps[k].node];
        copy_steps += fused.steps[k].kind == NRT_STEP_KERNEL && n->op == OP_CAST && g->nodes[ir_args(g, n)[0]].op == OP_PARAM;
    }
    /* the logits' gradient is written over the logits (a row op reading each
     * element before writing it), so one slice's logits cost their bytes once */
    memplan_result pr;
    char perr[256];
    memplan_buf *pb = program_plan_memory(g, &fused, NULL, &pr, perr, sizeof perr);
    CHECK(pb != NULL);
    uint32_t ce_grads = 0, ce_in_place = 0;
    for (uint32_t k = 0; pb && k < fused.nsteps; k++) {
        const nrt_step *st = &fused.steps[k];
        if (st->kind != NRT_STEP_KERNEL || g->nodes[st->node].op != OP_CROSS_ENTROPY_GRAD) continue;
        ce_grads++;
        ce_in_place += pb[st->bufs[0]].offset == pb[st->node].offset && pb[st->bufs[0]].bytes == pb[st->node].bytes;
    }
    free(pb);
    if (strstr(path, "gpt2")) {
        printf("%s: %u of %u logits gradients over their logits\n", path, ce_in_place, ce_grads);
        CHECK(ce_grads > 0 && ce_in_place == ce_grads);
    }
    /* the tied embedding's gradient: the scatter-add's last kernel adds the
     * output projection's part and stores the sum, so no kernel computes
     * the add, and the narrow scatter result is never written */
    uint32_t scatter_sums = 0, tied_adds = 0;
    for (uint32_t k = 0; k < fused.nsteps; k++) {
        const nrt_step *st = &fused.steps[k];
        const ir_node *n = &g->nodes[st->node];
        if (st->kind != NRT_STEP_KERNEL) continue;
        uint32_t last = st->bufs[st->nbufs - 1];   /* what the step stores (a temporary: scratch) */
        if (n->op == OP_SCATTER_ADD && last < g->nnodes && g->nodes[last].op == OP_ADD) scatter_sums++;
        for (int j = 0; j < st->nbufs; j++)   /* an add of a widened scatter-add, computed by a kernel of its own */
            if (st->bufs[j] < g->nnodes && g->nodes[st->bufs[j]].op == OP_ADD && g->nodes[st->bufs[j]].dtype == NC_F32 && n->op == OP_ADD)
                for (int i = 0; i < 2; i++) {
                    const ir_node *t = &g->nodes[ir_args(g, &g->nodes[st->bufs[j]])[i]];
                    tied_adds += t->op == OP_CAST && g->nodes[ir_args(g, t)[0]].op == OP_SCATTER_ADD;
                }
    }
    if (strstr(path, "gpt2")) {
        printf("%s: %u scatter-adds store the sum their result is added into, %u such adds with a kernel\n", path, scatter_sums,
               tied_adds);
        CHECK(scatter_sums == 1 && tied_adds == 0);
    }
    /* the gradient norm's partial sums: one kernel per concat of them; and a
     * bias gradient's sum stores the widened f32 value itself */
    uint32_t joined = 0, lone_parts = 0, widening_kernels = 0, matmul_sum_widenings = 0;
    bool *by_matmul = calloc(g->nnodes + 1, sizeof *by_matmul);   /* sums a matmul's epilogue stores (BGRAD) */
    for (uint32_t k = 0; k < fused.nsteps; k++)
        if (fused.steps[k].kind == NRT_STEP_MATMUL && (fused.steps[k].mm_epilogue & NRT_EPI_BGRAD))
            by_matmul[slot_value(&fused, k, nrt_matmul_slots_of(&fused.steps[k]).colsum)] = true;
    uint32_t *launch_of = nrt_program_launches(&fused);
    for (uint32_t k = 0; k < fused.nsteps; k++) {
        const nrt_step *st = &fused.steps[k];
        if (st->kind != NRT_STEP_KERNEL) continue;
        const ir_node *made = &g->nodes[st->node];
        if (made->op == OP_CAST && made->dtype == NC_F32 && g->nodes[ir_args(g, made)[0]].op == OP_SUM) {
            /* cuBLASLt stores the sum narrow: widened by a kernel that shares its launch */
            bool stored = by_matmul[ir_args(g, made)[0]];
            widening_kernels += !stored || fused.steps[launch_of[k]].batch < 2;
            matmul_sum_widenings += stored;
        }
        /* a norm's parameter gradient rounded through bf16 by its own sum kernel */
        for (const ir_node *c = made; c->op == OP_CAST; c = &g->nodes[ir_args(g, c)[0]])
            widening_kernels += g->nodes[ir_args(g, c)[0]].op == OP_NORM_PARAM_GRAD;
        joined += strstr(fused.kernel_names[st->kernel], "_sums") != NULL;
        if (g->nodes[st->node].op != OP_SUM) continue;
        for (ir_value u = st->node + 1; u < g->nnodes; u++)
            for (int i = 0; i < g->nodes[u].nargs; i++)
                lone_parts += ir_args(g, &g->nodes[u])[i] == st->node && g->nodes[u].op == OP_CONCAT;
    }
    if (strstr(path, "gpt2")) {
        printf("%s: %u joined partial-sum kernels, %u partial sums with a kernel of their own, %u widenings of sums a matmul "
               "stored (none launched alone)\n", path, joined, lone_parts, matmul_sum_widenings);
        CHECK(joined > 0 && lone_parts == 0 && widening_kernels == 0 && matmul_sum_widenings > 0);
    }
    free(by_matmul);
    free(launch_of);
    if (strstr(path, "gpt2")) {
        /* weight gradients, read by the norm's square and by the update, are
         * widened by each as it loads them (schedule.c): stored in bf16, not
         * written wide; the one wide product left starts the tied
         * embedding's f32 sum over the loss's slices */
        uint32_t wide = 0;
        for (uint32_t k = 0; k < fused.nsteps; k++) {
            const nrt_step *st = &fused.steps[k];
            wide += st->kind == NRT_STEP_MATMUL && st->mm_dtype != NC_F32 && st->mm_out_dtype == NC_F32 &&
                    !(st->mm_epilogue & NRT_EPI_RESIDUAL);
        }
        /* the second kernels of column sums (a bias's, a norm parameter's gradient: partial
         * sums added up) move down to their first reader and share launches (cuda_batch.c);
         * those the gradient norm reads, in groups before each of its concats, meet in one */
        uint32_t *head = nrt_program_launches(&fused), seconds = 0, alone = 0, second_launches = 0, last_head = UINT32_MAX;
        for (uint32_t k = 0; k < fused.nsteps; k++) {
            const char *kn = fused.steps[k].kind == NRT_STEP_KERNEL ? fused.kernel_names[fused.steps[k].kernel] : "";
            size_t len = strlen(kn);
            bool second = (len > 9 && !strcmp(kn + len - 9, "_cols_sum")) || (len > 19 && !strcmp(kn + len - 19, "norm_param_grad_sum"));
            seconds += second;
            alone += second && fused.steps[head[k]].batch < 2;
            if (second && head[k] != last_head) second_launches++, last_head = head[k];
        }
        free(head);
        printf("%s: second kernels of column sums in %u launches\n", path, second_launches);
        CHECK(second_launches <= 2);
        /* a projection bias's gradient, the column sum of the residual stream's gradient, is
         * summed by the norm gradient's kernel that stores that gradient (partial rows), and
         * only added up by the sum's own kernel (wpe's gradient, a sum over the batch, is not
         * a column sum) */
        uint32_t colsums = 0, residual_sums = 0;
        for (uint32_t k = 0; k < fused.nsteps; k++) {
            const nrt_step *st = &fused.steps[k];
            const char *kn = st->kind == NRT_STEP_KERNEL ? fused.kernel_names[st->kernel] : "";
            colsums += strstr(kn, "_colsums") != NULL;
            const ir_node *made = &g->nodes[st->node];
            residual_sums += st->kind == NRT_STEP_KERNEL && made->op == OP_SUM && made->rank == 1 && strstr(kn, "_sum_cols") &&
                             !strstr(kn, "_cols_sum") &&
                             g->nodes[ir_args(g, made)[0]].op == OP_ADD &&
                             (g->nodes[ir_args(g, &g->nodes[ir_args(g, made)[0]])[1]].op == OP_LAYERNORM_GRAD ||
                              g->nodes[ir_args(g, &g->nodes[ir_args(g, made)[0]])[0]].op == OP_LAYERNORM_GRAD);
        }
        printf("%s: %u norm gradients sum their columns, %u residual-stream column sums read it again\n", path, colsums,
               residual_sums);
        CHECK(colsums >= 4 && residual_sums == 0);
        printf("%s: %u second kernels of column sums, %u launched alone\n", path, seconds, alone);
        CHECK(seconds > 8 && alone * 4 <= seconds);
        printf("%s: %u products written widened without a sum\n", path, wide);
        CHECK(wide <= 1);
        printf("%s: %u parameter copies in %u kernels\n", path, copies, copy_steps);
        CHECK(copies >= 8 && copy_steps * 4 <= copies);
    }
    CHECK(fused_steps > 0 && fused_kernels < plain_kernels);
    /* every parameter's update in one launch (a multi-tensor kernel) */
    uint32_t stored_squares;
    uint32_t update_launches = check_batches(g, &fused, &stored_squares);
    printf("%s: the updates of %u parameters and optimizer states in %u launch(es); %u gradient squares stored\n", path,
           g->nupdates, update_launches, stored_squares);
    CHECK(update_launches == 1 && stored_squares == 0);
    CHECK(valid_dataflow(g, &plain, false));
    CHECK(valid_dataflow(g, &fused, true));
    nrt_program_free(&plain);
    nrt_program_free(&fused);
    ir_graph_free(g);
}

/* A fused training step of a model given as text. */
static ir_graph *compile_fused_step(const char *name, const char *source)
{
    src_table src = {0};
    diag_ctx d;
    diag_init(&d, &src, stderr);
    uint32_t id = src_add(&src, name, source, strlen(source));
    driver_opts o = {.verify = true, .train_step = true, .fuse = true};
    ir_graph *g = driver_compile(&src, id, &o, &d);
    src_free(&src);
    return g;
}

/* source compiled as a fused training step with its program in *p; NULL
 * (and no program) when it does not compile. */
static ir_graph *fused_step_program(const char *name, const char *source, nrt_program *p)
{
    char err[1024];
    ir_graph *g = compile_fused_step(name, source);
    CHECK(g != NULL);
    if (g) CHECK(cuda_emit_program_ex(g, true, p, err, sizeof err));
    return g;
}

/* An MLP recomputed in the backward pass (@checkpoint): the recomputed
 * matmul is numbered after the backward matmul whose DGELU epilogue reads
 * the value before the GELU, and still applies bias and GELU as its own
 * epilogue, writing that value as its auxiliary output (no GELU kernel of
 * its own). */
static void check_recomputed_epilogues(void)
{
    static const char *source =
        "import nn\n"
        "model m(x: bf16[256, 128]) -> (y: bf16[256, 128])\n"
        "  config L = 2\n"
        "  precision bf16\n"
        "{\n"
        "  repeat L @checkpoint {\n"
        "    x = x + nn.mlp(x, 512)\n"
        "  }\n"
        "  return x\n"
        "}\n"
        "train m(t: f32[256, 128]) {\n"
        "  loss = mean(square(f32(y) - t))\n"
        "  optimizer sgd(lr: 0.01)\n"
        "}\n";
    nrt_program p;
    ir_graph *g = fused_step_program("mlp.net", source, &p);
    if (!g) return;
    uint32_t gelus = 0, recomputed_matmuls = 0, gelu_epilogues = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        gelus += g->nodes[v].op == OP_GELU_TANH;
        recomputed_matmuls += g->nodes[v].op == OP_MATMUL && (g->nodes[v].flags & IR_FLAG_RECOMPUTE);
    }
    for (uint32_t k = 0; k < p.nsteps; k++)
        gelu_epilogues += p.steps[k].kind == NRT_STEP_MATMUL && (p.steps[k].mm_epilogue & NRT_EPI_GELU);
    printf("MLP @checkpoint: %u matmuls recomputed, %u GELUs, %u in matmul epilogues\n", recomputed_matmuls, gelus,
           gelu_epilogues);
    CHECK(recomputed_matmuls > 0 && gelus == 4 && gelu_epilogues == gelus);
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* path compiled with o and its fused program in *p; NULL (and no program)
 * when it does not compile. */
static ir_graph *compile_with_program(const char *path, const driver_opts *o, nrt_program *p)
{
    char err[1024];
    src_table src = {0};
    ir_graph *g = compile_file(path, o, &src);
    src_free(&src);
    CHECK(g != NULL);
    if (g) CHECK(cuda_emit_program_ex(g, true, p, err, sizeof err));
    return g;
}

/* root/rel's training step, fused, at B = batch, with its program. */
static ir_graph *compile_train_step(const char *root, const char *rel, int64_t batch, nrt_program *p)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    const char *dn[] = {"B"};
    const int64_t dv[] = {batch};
    driver_opts o = {.verify = true, .train_step = true, .fuse = true, .dim_names = dn, .dim_values = dv, .ndims = 1};
    return compile_with_program(path, &o, p);
}

/* How many buffers of p's plan b that prepare steps make for the other
 * steps (what a run that skips them still reads) overlap another buffer. */
static uint32_t prepared_overlaps(const ir_graph *g, const nrt_program *p, const memplan_buf *b)
{
    uint32_t nbuf = g->nnodes + p->ntemps, overlaps = 0;
    bool *run_reads = calloc(nbuf + 1, sizeof *run_reads);
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int j = 0; !p->steps[k].prepare && j < p->steps[k].nbufs; j++) run_reads[p->steps[k].bufs[j]] = true;
    for (uint32_t k = 0; b && k < p->nsteps; k++)
        for (int j = 0; p->steps[k].prepare && j < p->steps[k].nbufs; j++) {
            const memplan_buf *x = &b[p->steps[k].bufs[j]];
            for (uint32_t o2 = 0; o2 < nbuf && x->bytes && run_reads[p->steps[k].bufs[j]]; o2++)
                overlaps += o2 != p->steps[k].bufs[j] && b[o2].bytes && b[o2].offset < x->offset + x->bytes &&
                            x->offset < b[o2].offset + b[o2].bytes;
        }
    free(run_reads);
    return overlaps;
}

/* A convolution's training step (fashion_cnn): the windows' indices are
 * computed from iotas and fills alone, so their kernels are prepare steps,
 * run once, not every step (they were some 60 launches of 127 at B = 128);
 * so is the sort of those indices that each window gradient's scatter-add
 * makes (clear, count, scan, fill, rank), whose sums, reading the gradient,
 * run every step: one, the second convolution's (the first's input, the
 * images, has no gradient; the pools are tiles, with no index). No prepare step touches scratch a step of every run
 * writes, and what they make for the run overlaps nothing in the plan. */
static void check_constant_prepare(const char *root)
{
    char err[512];
    nrt_program p;
    ir_graph *g = compile_train_step(root, "examples/fashion_cnn.net", 2, &p);
    if (!g) return;
    bool *konst = ir_constant_values(g);
    uint32_t every_run = 0, constant_every_run = 0, sorted_once = 0, summed_every_run = 0, stale = 0;
    for (uint32_t k = 0; k < p.nsteps; k++) {
        const nrt_step *s = &p.steps[k];
        /* an index or mask made from iotas and fills (a float fill, a window's
         * zero row, stays in every run: it holds no memory between runs) */
        bool constant = s->kind == NRT_STEP_KERNEL && nrt_step_param_only(g, konst, s) &&
                        !dtype_is_float(g->nodes[s->node].dtype);
        every_run += !s->prepare && s->kind != NRT_STEP_COPY;
        constant_every_run += constant && !s->prepare;
        const char *name = s->kind == NRT_STEP_KERNEL ? p.kernel_names[s->kernel] : "";
        bool scatter = g->nodes[s->node].op == OP_SCATTER_ADD;
        sorted_once += scatter && s->prepare && (strstr(name, "_scan") || strstr(name, "_rank"));
        summed_every_run += scatter && !s->prepare && (strstr(name, "_sum") || strstr(name, "_chunks"));
        for (int j = 0; s->prepare && j < s->nbufs; j++) {   /* scratch a run's step writes */
            uint32_t t = s->bufs[j];
            for (uint32_t l = 0; t >= g->nnodes && l < p.nsteps; l++)
                for (int i = 0; !p.steps[l].prepare && i < p.steps[l].nbufs; i++)
                    stale += p.steps[l].bufs[i] == t && (nrt_step_writes(&p.steps[l]) >> i & 1);
        }
    }
    memplan_result r;
    memplan_buf *b = program_plan_memory(g, &p, NULL, &r, err, sizeof err);
    CHECK(b != NULL);
    uint32_t overlaps = prepared_overlaps(g, &p, b);
    printf("fashion_cnn training step: %u steps every run, %u of them computing constant indices; %u scatter-add sorts once, "
           "%u sums every run; %u overlaps of what prepare steps make for the run\n",
           every_run, constant_every_run, sorted_once / 2, summed_every_run / 2, overlaps);
    CHECK(constant_every_run == 0 && sorted_once == 2 && summed_every_run == 2 && overlaps == 0 && stale == 0);
    free(b);
    free(konst);
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* Batch norm's training step built with a symbolic B: f32(N) / f32(N - 1)
 * is dim_value steps and scalar arithmetic on them, which no run changes, so
 * prepare steps; no kernel of every run computes scalar constants alone (the
 * scalars' fused kernels did, two launches a batch norm), and no sum counts
 * ones (f32(N) did, and mean's gradient its count). */
static void check_size_prepare(const char *root)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/gpu/batch_norm.net", root);
    driver_opts o = {.verify = true, .train_step = true, .fuse = true};
    nrt_program p;
    ir_graph *g = compile_with_program(path, &o, &p);
    if (!g) return;
    CHECK(g->nsyms == 1);
    bool *konst = ir_constant_values(g);
    uint32_t sizes = 0, sizes_every_run = 0, constant_every_run = 0, counting = 0;
    for (uint32_t k = 0; k < p.nsteps; k++) {
        const nrt_step *s = &p.steps[k];
        bool size = g->nodes[s->node].op == OP_DIM_VALUE;
        sizes += size;
        sizes_every_run += size && !s->prepare;
        constant_every_run += s->kind == NRT_STEP_KERNEL && !s->prepare && nrt_step_param_only(g, konst, s) &&
                              g->nodes[s->node].rank == 0;
        counting += g->nodes[s->node].op == OP_SUM && konst[s->node];
    }
    printf("batch_norm training step, symbolic B: %u dim_value steps, %u of them every run; %u steps every run "
           "computing scalar constants alone; %u sums of constants\n", sizes, sizes_every_run, constant_every_run, counting);
    CHECK(sizes >= 2 && sizes_every_run == 0 && constant_every_run == 0 && counting == 0);
    free(konst);
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* Inference: the steps that depend on parameters alone (GPT-2's bf16
 * weight copies, its positions) are prepare steps, run when parameters
 * change; what they make for the run overlaps no other buffer in the plan,
 * so a later run that skips them still finds their values. A training
 * step's are the weight copies, which the update's kernels store again for
 * the next run (every parameter-made value a prepare step writes is stored
 * by a later kernel too), and what is made from iotas and fills alone (its
 * positions, and their sort for the position embedding's gradient). */
static void check_prepare(const char *root)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/examples/gpt2.net", root);
    const char *sn[] = {"L"}, *sv[] = {"2"}, *dn[] = {"B", "T"};
    const int64_t dv[] = {2, 64};
    for (int train = 0; train < 2; train++) {
        driver_opts o = {.verify = true, .train_step = train, .fuse = true, .dim_names = dn, .dim_values = dv, .ndims = 2,
                         .set_names = sn, .set_values = sv, .nsets = 1};
        nrt_program p;
        ir_graph *g = compile_with_program(path, &o, &p);
        if (!g) continue;
        bool *from = ir_parameter_values(g), *konst = ir_constant_values(g);
        uint32_t prepare = 0, casts = 0, overlaps = 0, prepare_launches = 0, out_of_front = 0;
        uint32_t *head = nrt_program_launches(&p);
        for (uint32_t k = 0; k < p.nsteps; k++) {
            const nrt_step *s = &p.steps[k];
            out_of_front += s->prepare && prepare < k;   /* they come first (cuda_batch.c) ... */
            prepare += s->prepare;
            prepare_launches += s->prepare && head[k] == k;
            casts += s->prepare && g->nodes[s->node].op == OP_CAST;
            if (s->prepare) CHECK(nrt_step_param_only(g, from, s) || nrt_step_temps_only(g, s));
            for (uint32_t j = k + 1; j < k + s->batch; j++) CHECK(p.steps[j].prepare == s->prepare);
        }
        memplan_result r;
        memplan_buf *b = program_plan_memory(g, &p, NULL, &r, err, sizeof err);
        CHECK(b != NULL);
        overlaps = prepared_overlaps(g, &p, b);
        printf("gpt2 (2 layers) %s: %u prepare steps (%u casts) in %u launches, %u overlaps of their buffers\n",
               train ? "training step" : "forward", prepare, casts, prepare_launches, overlaps);
        /* ... and batch; but the training step's sort of its positions (count, scan, fill, rank: atomics,
           a block's scan) launches apart */
        CHECK(prepare > 0 && overlaps == 0 && out_of_front == 0 && prepare_launches <= (train ? 5u : 3u));
        CHECK(train ? casts >= 2 : casts >= 8);   /* the training step's are loops of a few kernels */
        uint32_t copies = 0;
        for (uint32_t k = 0; train && k < p.nsteps; k++) {
            if (!p.steps[k].prepare) continue;
            for (int j = 0; j < p.steps[k].nbufs; j++) {   /* the copy it makes, stored again later in the run */
                uint32_t v = p.steps[k].bufs[j], stored = 0;
                if (v >= g->nnodes || konst[v] || (from[v] && g->nodes[v].op != OP_CAST)) continue;   /* scratch, a constant, a parameter it reads */
                for (uint32_t l = k + 1; l < p.nsteps; l++)
                    for (int i = 0; i < p.steps[l].nbufs; i++) stored += p.steps[l].bufs[i] == v && !p.steps[l].prepare;
                CHECK(g->nodes[v].op == OP_CAST && stored >= 1);
                copies++;
            }
        }
        if (train) printf("gpt2 (2 layers) training step: %u parameter copies made by prepare steps, each stored again by an "
                          "update's kernel\n", copies);
        if (train) CHECK(copies >= 10);
        free(b);
        free(from);
        free(konst);
        free(head);
        nrt_program_free(&p);
        ir_graph_free(g);
    }
}

/* An input x[4] and a parameter w[4] in g, for the update placement checks. */
static uint32_t add_x_and_w(ir_graph *g, ir_value *x, ir_value *w)
{
    uint32_t four = ir_dim_const(g, 4);
    ir_tensor_decl xd = {.name = "x", .dtype = NC_F32, .rank = 1, .shape = {four}};
    ir_node xn = {.op = OP_INPUT, .dtype = NC_F32, .rank = 1, .shape = {four}, .attr.index = ir_input_add(g, &xd)};
    *x = ir_add(g, &xn, NULL, 0);
    ir_param pd = {.decl = {.name = "w", .dtype = NC_F32, .rank = 1, .shape = {four}}};
    ir_node wn = {.op = OP_PARAM, .dtype = NC_F32, .rank = 1, .shape = {four}, .attr.index = ir_param_add(g, &pd)};
    *w = ir_add(g, &wn, NULL, 0);
    return four;
}

/* A parameter w[4] with update u = w * 2 computed first, and a later step
 * reading w: when read_after, the old value is still needed after u exists,
 * so u must not be computed in w's memory; otherwise it must be. */
static void check_update_placement(bool read_after)
{
    ir_graph *g = ir_graph_new("upd");
    ir_value x, w;
    uint32_t four = add_x_and_w(g, &x, &w);
    ir_node mul = {.op = OP_MUL, .dtype = NC_F32, .rank = 1, .shape = {four}};
    ir_value ww[2] = {w, w}, u = ir_add(g, &mul, ww, 2);
    ir_node add = {.op = OP_ADD, .dtype = NC_F32, .rank = 1, .shape = {four}};
    ir_value xw[2] = {x, read_after ? w : u};
    ir_output_add(g, "y", ir_add(g, &add, xw, 2));
    ir_update_add(g, 0, u);
    char err[256];
    nrt_program p;
    CHECK(cuda_emit_program_ex(g, false, &p, err, sizeof err));
    uint32_t copies = 0;
    for (uint32_t k = 0; k < p.nsteps; k++) copies += p.steps[k].kind == NRT_STEP_COPY;
    CHECK(copies == (read_after ? 1u : 0u));
    CHECK(valid_dataflow(g, &p, false));
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* Two assignments to one parameter w: u1 = w * w, the first, goes into w's
 * memory (nothing reads w after it); u2 = u1 * u1 then must not, since
 * y = x + u1 reads u1, now in w's memory, after u2 is computed. The second
 * is judged after the first's renames are made (cuda_alias.c makes them
 * in one pass at the end, and before any question about w again): judged
 * before, w's last reader would look like u1's step, and u2 would overwrite
 * u1 before y reads it. */
static void check_second_update(void)
{
    ir_graph *g = ir_graph_new("upd2");
    ir_value x, w;
    uint32_t four = add_x_and_w(g, &x, &w);
    ir_node mul = {.op = OP_MUL, .dtype = NC_F32, .rank = 1, .shape = {four}};
    ir_value ww[2] = {w, w}, u1 = ir_add(g, &mul, ww, 2);
    ir_value uu[2] = {u1, u1}, u2 = ir_add(g, &mul, uu, 2);
    ir_node add = {.op = OP_ADD, .dtype = NC_F32, .rank = 1, .shape = {four}};
    ir_value xu[2] = {x, u1};
    ir_output_add(g, "y", ir_add(g, &add, xu, 2));
    ir_update_add(g, 0, u1);
    ir_update_add(g, 0, u2);
    char err[256];
    nrt_program p;
    CHECK(cuda_emit_program_ex(g, false, &p, err, sizeof err));
    uint32_t copies = 0, u2_in_place = 0;
    for (uint32_t k = 0; k < p.nsteps; k++) {
        copies += p.steps[k].kind == NRT_STEP_COPY;
        for (int j = 0; j < p.steps[k].nbufs; j++) u2_in_place += slot_value(&p, k, j) == u2 && p.steps[k].bufs[j] == w;
    }
    printf("second update: %u copies, u2 in w's memory in %u slots\n", copies, u2_in_place);
    CHECK(copies == 1 && u2_in_place == 0);   /* (valid_dataflow wants one update a parameter) */
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* Two parameters of one shape: their AdamW updates are independent chains
 * of one size, adjacent in the step. Each is a group of its own (a loop
 * holding one parameter's values, not both: fewer registers), and the two
 * are loops of one kernel. */
static void check_independent_updates(void)
{
    static const char *source =
        "model two(x: f32[8, 16]) -> (y: f32[8, 16]) {\n"
        "  param a: f32[16, 16] = xavier\n"
        "  param b: f32[16, 16] = xavier\n"
        "  return tanh(x @ a) @ b\n"
        "}\n"
        "train two(t: f32[8, 16]) {\n"
        "  loss = mean(square(y - t))\n"
        "  optimizer adamw(lr: 0.01)\n"
        "}\n";
    ir_graph *g = compile_fused_step("two.net", source);
    CHECK(g != NULL);
    if (!g) return;
    cg_ctx cg = {.g = g};
    cuda_fuse_plan(&cg);
    uint32_t group[2] = {0, 0};
    for (uint32_t k = 0; k < g->nupdates; k++) {
        const char *name = g->params[g->updates[k].param].decl.name;
        if (!strcmp(name, "a") || !strcmp(name, "b")) group[name[0] - 'a'] = cg.group[g->updates[k].value];
    }
    printf("independent updates: parameter a's in group %u, b's in group %u, kernels led by %u and %u\n", group[0], group[1],
           group[0] ? cg.kernel_of[group[0]] : 0, group[1] ? cg.kernel_of[group[1]] : 0);
    CHECK(group[0] && group[1] && group[0] != group[1] && cg.kernel_of[group[0]] == cg.kernel_of[group[1]]);
    char err[1024];
    nrt_program p;
    CHECK(cuda_emit_program_ex(g, true, &p, err, sizeof err));
    CHECK(valid_dataflow(g, &p, true));
    nrt_program_free(&p);
    cuda_fuse_free(&cg);
    ir_graph_free(g);
}

/* A chain of 2500 adds (x = x + 1.0 in two nested repeats) is cut into
 * groups of at most CUDA_FUSE_MAX_OPS ops, each a kernel of its own (each
 * reads the one before: no two are loops of one kernel), so NVRTC never
 * sees one body of 2500 dependent ops; the program stays a valid dataflow,
 * every cut value stored by one kernel and loaded by the next. */
static void check_long_chain(void)
{
    static const char *source =
        "model m(x: f32[B, 4]) {\n"
        "  repeat 50 { repeat 50 { x = x + 1.0 } }\n"
        "  return x\n"
        "}\n";
    src_table src = {0};
    diag_ctx d;
    diag_init(&d, &src, stderr);
    uint32_t id = src_add(&src, "chain.net", source, strlen(source));
    driver_opts o = {.verify = true, .fuse = true};
    ir_graph *g = driver_compile(&src, id, &o, &d);
    src_free(&src);
    CHECK(g != NULL);
    if (!g) return;
    cg_ctx cg = {.g = g};
    cuda_fuse_plan(&cg);
    uint32_t *size = calloc(cg.ngroups + 1, sizeof *size), adds = 0, largest = 0, groups = 0, kernels = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        adds += g->nodes[v].op == OP_ADD;
        if (cg.group[v]) size[cg.group[v]]++;
    }
    for (uint32_t k = 1; k <= cg.ngroups; k++) {
        groups += size[k] > 0;
        kernels += size[k] > 0 && cg.kernel_of[k] == k;
        if (size[k] > largest) largest = size[k];
    }
    char err[1024];
    nrt_program p;
    CHECK(cuda_emit_program_ex(g, true, &p, err, sizeof err));
    uint32_t steps = 0;
    for (uint32_t k = 0; k < p.nsteps; k++) steps += p.steps[k].kind == NRT_STEP_KERNEL;
    uint32_t want = (adds + CUDA_FUSE_MAX_OPS - 1) / CUDA_FUSE_MAX_OPS;
    printf("a chain of %u adds: %u groups of at most %u ops (the cap %d), %u kernels, %u kernel steps, %zu bytes of CUDA\n", adds,
           groups, largest, CUDA_FUSE_MAX_OPS, kernels, steps, strlen(p.source));
    CHECK(adds == 2500 && largest == CUDA_FUSE_MAX_OPS && groups == want && kernels == want && steps == want);
    CHECK(valid_dataflow(g, &p, true));
    free(size);
    nrt_program_free(&p);
    cuda_fuse_free(&cg);
    ir_graph_free(g);
}

/* Fused kernels that load through movement ops and gathers (cuda_fuse.c,
 * plan_group_reads): in tests/gpu/movement.net the only movement kernels
 * left are the transpose an output needs written and the slice whose chain
 * has more sizes than one kernel takes, and the only gather kernel is the
 * one two groups read; in cast_chain.net, none at all. The values read through
 * are never written, and nothing reads a buffer no step wrote. */
static void check_read_through(const char *root, const char *file, const char *dim, int64_t value, uint32_t want_movement,
                               uint32_t want_gathers)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, file);
    const char *dn[] = {dim};
    const int64_t dv[] = {value};
    driver_opts o = {.verify = true, .dim_names = dn, .dim_values = dv, .ndims = 1};
    nrt_program p;
    ir_graph *g = compile_with_program(path, &o, &p);
    if (!g) return;
    uint32_t movement = 0, gathers = 0, unwritten = 0;
    bool *written = calloc(g->nnodes + p.ntemps + 1, sizeof *written);
    for (uint32_t k = 0; k < p.nsteps; k++) {
        const nrt_step *st = &p.steps[k];
        nc_op op = g->nodes[st->node].op;
        movement += st->kind == NRT_STEP_KERNEL && op_is_movement_link(op) && op != OP_RESHAPE;
        gathers += st->kind == NRT_STEP_KERNEL && op == OP_GATHER;
        for (int j = 0; j < st->nbufs; j++) written[st->bufs[j]] = true;
    }
    for (ir_value v = 0; v < g->nnodes; v++) {
        nc_op op = g->nodes[v].op;
        bool moved = (op == OP_TRANSPOSE || op == OP_SLICE || op == OP_GATHER) && dtype_is_float(g->nodes[v].dtype);
        unwritten += moved && !written[v];
    }
    printf("%s: %u movement kernels, %u gather kernels, %u moved values never written\n", file, movement, gathers, unwritten);
    CHECK(movement == want_movement && gathers == want_gathers && unwritten > 0);
    CHECK(valid_dataflow(g, &p, true));
    free(written);
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* A batch norm's training step (tests/gpu/batch_norm.net at B = 128: a
 * conv's [128, 6, 6, 8] output normalised, then a [128, 8] one). Each mean's
 * gradient over the [N, C] view is g / N spread to [N, C]: built at the
 * input's own shape (autodiff.c, respread), no kernel writes it, and the
 * kernels reading it load g. dy * scale, made before the column sums, is
 * computed in the kernel that reads it (plan_sunk_groups), so the first
 * norm's backward pass has two elementwise kernels over its 36864 elements
 * (gelu_grad's and dx's): the gradient before the centring sum, dd = dy * s
 * + 2 * (x - mu) * t, and the forward's affine d * s + b are never stored,
 * but computed from the values in memory they are made of by each kernel
 * that reads them (schedule.c, recomputed_tree: two loads a reader against a
 * store and a load each). x - mu is never stored either, but computed from
 * x by each kernel that reads it (schedule.c, split_recomputed), the
 * variance's and sum(dy * xhat)'s included, whose prologues load mu through
 * its broadcast (spread_prologues: the norms' forward and backward, the
 * pooled mean's and the centring sum's). Each norm's sum(dy) is computed by
 * the kernel of its sum(dy * xhat), a warp an output (plan_sibling_sums),
 * the prologue split off the group with the x - mu only it reads
 * (split_off_last). */
static void check_batch_norm(const char *root)
{
    nrt_program p;
    ir_graph *g = compile_train_step(root, "tests/gpu/batch_norm.net", 128, &p);
    if (!g) return;
    uint32_t elementwise = 0, spread_reshapes = 0, kernels = 0;
    for (uint32_t k = 0; k < p.nsteps; k++) {
        const ir_node *n = &g->nodes[p.steps[k].node];
        int64_t count = 1, d;
        for (int i = 0; i < n->rank; i++) count *= dim_is_const(&g->dims[n->shape[i]], &d) ? d : 0;
        kernels += p.steps[k].kind == NRT_STEP_KERNEL && !p.steps[k].prepare;
        elementwise += p.steps[k].kind == NRT_STEP_KERNEL && count == 128 * 6 * 6 * 8 &&
                       nc_ops[n->op].category == CAT_ELEMENTWISE && !p.steps[k].prepare;
    }
    for (ir_value v = 0; v < g->nnodes; v++) {   /* reshape(op of broadcasts) left by autodiff */
        const ir_node *n = &g->nodes[v];
        if (n->op != OP_RESHAPE || n->rank < 2) continue;
        const ir_node *a = &g->nodes[ir_args(g, n)[0]];
        bool spread = a->op == OP_BROADCAST || (a->nargs > 0 && nc_ops[a->op].category == CAT_ELEMENTWISE);
        for (int i = 0; i < a->nargs && spread && a->op != OP_BROADCAST; i++) spread = g->nodes[ir_args(g, a)[i]].op == OP_BROADCAST;
        spread_reshapes += spread;
    }
    cg_ctx cg = {.g = g};   /* 8 channels: sum(dy) beside sum(dy * xhat) in a warp-an-output kernel */
    cuda_fuse_plan(&cg);
    uint32_t pairs = 0, spread_prologues = 0;
    for (ir_value v = 0; cg.sibling_sum && v < g->nnodes; v++) pairs += cg.sibling_sum[v] != IR_NONE;
    for (ir_value r = 0; r < g->nnodes; r++) {   /* a prologue loading a [C] value through its broadcast */
        uint32_t id = cuda_fuse_prologue_group(&cg, r);
        bool spreads = false;
        for (ir_value m = 0; id && m < g->nnodes; m++)
            for (int i = 0; cg.group[m] == id && i < g->nodes[m].nargs; i++) {
                const ir_node *b = &g->nodes[ir_args(g, &g->nodes[m])[i]];
                spreads |= b->op == OP_BROADCAST && g->nodes[ir_args(g, b)[0]].rank > 0;
            }
        spread_prologues += spreads;
    }
    cuda_fuse_free(&cg);
    printf("batch_norm.net train step: %u kernel steps, %u elementwise over the conv's 36864 elements, %u reshapes of spreads, "
           "%u sums computed with a sibling's, %u prologues loading through a broadcast\n", kernels, elementwise, spread_reshapes,
           pairs, spread_prologues);
    CHECK(elementwise == 2 && spread_reshapes == 0 && pairs == 2 && spread_prologues == 6);
    CHECK(valid_dataflow(g, &p, true));
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* tests/gpu/batch_norm_wide.net at B = 5: each norm's bias gradient sum(dy)
 * is computed by the kernel of its weight gradient's sum(dy * xhat), which
 * loads dy for both (plan_sibling_sums): two column-sum kernels fewer, and
 * the first norm's pair still split into partial rows (a second kernel for
 * each sum). The first norm's [40] groups, the scale from the variance with
 * the running statistics' updates and the weight's gradient terms from
 * sum(dy * xhat), run in the second kernels of those sums, the lane with a
 * column's total computing them (plan_epilogues): no launches of their own,
 * and the running variance still updated in place (no copy at the end). */
static void check_sibling_sums(const char *root)
{
    nrt_program p;
    ir_graph *g = compile_train_step(root, "tests/gpu/batch_norm_wide.net", 5, &p);
    if (!g) return;
    uint32_t cols = 0, totals = 0, epilogues = 0, copies = 0;
    for (uint32_t k = 0; k < p.nsteps; k++) {
        copies += p.steps[k].kind == NRT_STEP_COPY;
        if (p.steps[k].kind != NRT_STEP_KERNEL) continue;
        const char *name = p.kernel_names[p.steps[k].kernel];
        size_t len = strlen(name);
        cols += len > 5 && !strcmp(name + len - 5, "_cols");
        totals += len > 9 && !strcmp(name + len - 9, "_cols_sum");
        epilogues += len > 15 && !strcmp(name + len - 15, "_cols_sum_fused");
    }
    cg_ctx cg = {.g = g};
    cuda_fuse_plan(&cg);
    uint32_t pairs = 0;
    for (ir_value v = 0; cg.sibling_sum && v < g->nnodes; v++) pairs += cg.sibling_sum[v] != IR_NONE;
    printf("batch_norm_wide.net train step: %u sums computed with a sibling's, %u column kernels, %u second kernels, %u of them "
           "with an epilogue, %u copies\n", pairs, cols, totals + epilogues, epilogues, copies);
    CHECK(pairs == 2 && cols == 8 && totals == 3 && epilogues == 2 && copies == 0);
    CHECK(valid_dataflow(g, &p, true));
    cuda_fuse_free(&cg);
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* examples/fashion_resnet.net's training step at B = 8: the gradient
 * norm's partial sums are joined by concats, and CSE leaves two of them each
 * read twice (two parameters' squared gradients found equal). Every concat
 * of sums still has one kernel adding up all its parts, a shared sum in
 * each place (plan_joined_sums): no sum the concats read has a kernel of its
 * own. */
static void check_shared_norm_sums(const char *root)
{
    nrt_program p;
    ir_graph *g = compile_train_step(root, "examples/fashion_resnet.net", 8, &p);
    if (!g) return;
    uint32_t *concat_reads = calloc(g->nnodes + 1, sizeof *concat_reads), *reads = calloc(g->nnodes + 1, sizeof *reads);
    for (ir_value u = 0; u < g->nnodes; u++)
        for (int i = 0; i < g->nodes[u].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[u])[i];
            reads[a]++;
            concat_reads[a] += g->nodes[u].op == OP_CONCAT;
        }
    uint32_t alone = 0, joined = 0, shared = 0;
    for (ir_value v = 0; v < g->nnodes; v++) shared += g->nodes[v].op == OP_SUM && concat_reads[v] > 1 && concat_reads[v] == reads[v];
    for (uint32_t k = 0; k < p.nsteps; k++) {
        if (p.steps[k].kind != NRT_STEP_KERNEL) continue;
        ir_value v = p.steps[k].node;
        alone += g->nodes[v].op == OP_SUM && reads[v] > 0 && concat_reads[v] == reads[v];
        joined += strstr(p.kernel_names[p.steps[k].kernel], "_concat_sums") != NULL;
    }
    printf("fashion_resnet training step: %u norm sums read by more than one concat slot, %u concats of sums in one kernel each, "
           "%u sums with a kernel of their own\n", shared, joined, alone);
    CHECK(shared == 2 && joined == 3 && alone == 0);
    CHECK(valid_dataflow(g, &p, true));
    free(concat_reads);
    free(reads);
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* examples/fashion_resnet.net's training step at B = 8: a conv weight's
 * squared gradient (3x3x64x64, 36,864 elements) was a part of a joined sum
 * added up by one warp (~90 us on an H100 at ~2.4 ns an element): each
 * concat of sums launches enough warps that none need add more than
 * NORM_WARP_MAX elements of a part, if its elements are shared out evenly. */
enum { NORM_WARP_MAX = 8192 };

/* How many warps p's concats of sums are short of NORM_WARP_MAX elements
 * a warp (counting each part's outputs' elements shared out evenly), with
 * the most elements an output of a part adds up in *most and the second
 * kernels of spread concats in *totals. */
static int64_t norm_sums_short(const ir_graph *g, const nrt_program *p, int64_t *most, int *totals)
{
    int64_t short_by = 0;
    *most = 0, *totals = 0;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        const nrt_step *st = &p->steps[k];
        if (st->kind != NRT_STEP_KERNEL) continue;
        const char *name = p->kernel_names[st->kernel];
        *totals += strstr(name, "_concat_totals") != NULL;
        if (strlen(name) < 12 || strcmp(name + strlen(name) - 12, "_concat_sums") != 0) continue;
        int64_t warps = 0, needed = 0;
        CHECK(dim_is_const(&g->dims[st->ints[0]], &warps));
        const ir_node *c = &g->nodes[st->node];
        for (int i = 0; i < c->nargs; i++) {
            ir_value s = ir_args(g, c)[i];
            if (g->nodes[s].op == OP_RESHAPE) s = ir_args(g, &g->nodes[s])[0];
            const ir_node *x = &g->nodes[ir_args(g, &g->nodes[s])[0]];
            int64_t count = 1, outputs = 1, d;
            for (int a = 0; a < x->rank; a++) {
                CHECK(dim_is_const(&g->dims[x->shape[a]], &d));
                if (a == x->rank - 1) count = d;
                else outputs *= d;
            }
            if (count > *most) *most = count;
            needed += outputs * ((count + NORM_WARP_MAX - 1) / NORM_WARP_MAX);
        }
        if (needed > warps) short_by += needed - warps;
    }
    return short_by;
}

/* fashion_resnet's three concats of sums: two save more than a launch
 * spread, the third (parts of 8,192: 4 warps of 2,048 -> 16 of 512) less,
 * but its second kernel joins the other two's launch: all three spread,
 * their second kernels one launch. */
static void check_norm_sums_spread(const char *root)
{
    nrt_program p;
    ir_graph *g = compile_train_step(root, "examples/fashion_resnet.net", 8, &p);
    if (!g) return;
    int64_t most;
    int totals;
    int64_t short_by = norm_sums_short(g, &p, &most, &totals);
    uint32_t *launch_of = nrt_program_launches(&p), launch = UINT32_MAX, launches = 0;
    for (uint32_t k = 0; k < p.nsteps; k++)
        if (p.steps[k].kind == NRT_STEP_KERNEL && strstr(p.kernel_names[p.steps[k].kernel], "_concat_totals") && launch_of[k] != launch)
            launch = launch_of[k], launches++;
    free(launch_of);
    printf("fashion_resnet training step: the largest joined sum part adds %lld elements an output; %lld warps short of "
           "%d elements a warp; %d concats spread, their second kernels in %u launches\n", (long long)most, (long long)short_by,
           NORM_WARP_MAX, totals, launches);
    CHECK(most > NORM_WARP_MAX && short_by == 0 && totals == 3 && launches == 1);
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* A 2003x2003 weight (4,012,009 elements, prime factors 2003 alone): the
 * optimizer's partial sums find no group count from 32 to 1024 to split its
 * squares into, so its norm's sum is one output of 4M elements, which a
 * block's 8 warps added up ~500,000 elements each (~1.2 ms at 2.4 ns an
 * element). Spread over blocks, with a second kernel adding their results,
 * no warp adds more than NORM_WARP_MAX. */
static void check_norm_sums_over_blocks(void)
{
    static const char *source =
        "model m(x: f32[4, 2003], t: f32[4, 2003]) -> (loss: f32)\n"
        "{\n"
        "  param w: f32[2003, 2003] = xavier\n"
        "  param b: f32[2003] = zeros\n"
        "  return mean(square(x @ w + b - t))\n"
        "}\n"
        "train m { optimizer adamw(lr: 0.001) }\n";
    nrt_program p;
    ir_graph *g = fused_step_program("big.net", source, &p);
    if (!g) return;
    int64_t most;
    int totals;
    int64_t short_by = norm_sums_short(g, &p, &most, &totals);
    printf("a 2003x2003 weight: its norm's sum adds %lld elements an output; %lld warps short of %d elements a warp; "
           "%d concats spread\n", (long long)most, (long long)short_by, NORM_WARP_MAX, totals);
    CHECK(most == 2003LL * 2003 && short_by == 0 && totals == 1);
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* Elementwise kernel steps of p (every run, not prepare) that store a
 * value of rank 4 (an image's activations or their gradient). */
static uint32_t image_kernels(const ir_graph *g, const nrt_program *p)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        const nrt_step *st = &p->steps[k];
        const ir_node *v = &g->nodes[st->node];
        n += st->kind == NRT_STEP_KERNEL && !st->prepare && nc_ops[v->op].category == CAT_ELEMENTWISE && v->rank == 4;
    }
    return n;
}

/* examples/fashion_resnet.net's training step at B = 8. Each batch norm's
 * gradient before its centring sum, dd = dy * s + 2 * (x - mu) * t, read by
 * sum(-dd) and by dx = dd + mean(-dd), is computed by both their kernels
 * from dy and x (schedule.c, recomputed_tree): never stored, a launch and a
 * pass fewer a norm. Each conv's dy (the norm's dx) is stored by the kernel
 * of the conv's bias gradient, sum(dy), which computes it as its prologue
 * (cuda_fuse.c, stores_prologue): no kernel of its own, a pass over dy
 * fewer; the conv's products read it after. Nine norms, nine convs: the
 * image-sized elementwise kernels left are the pixels' scaling, the seven
 * relus (each norm's affine and a block's residual add computed in them)
 * and their seven gradients (each a where, read by three kernels). */
/* Values of rel's training step at B = batch stored by the column sum that
 * computes them as its prologue (stores_prologue); *written: how many the
 * sum's step writes, *own: kernels of their own (none). */
static uint32_t stored_prologues(const char *root, const char *rel, int64_t batch, uint32_t *written, uint32_t *own,
                                 uint32_t *images)
{
    nrt_program p;
    ir_graph *g = compile_train_step(root, rel, batch, &p);
    *written = *own = *images = 0;
    if (!g) return 0;
    cg_ctx cg = {.g = g};
    cuda_fuse_plan(&cg);
    uint32_t stored = 0;
    for (uint32_t id = 1; id <= cg.ngroups; id++) {
        ir_value v = cuda_fuse_prologue_stored(&cg, id), r = cg.prologue_of[id];
        if (v == IR_NONE) continue;
        stored++;
        for (uint32_t k = 0; k < p.nsteps; k++) {
            const nrt_step *st = &p.steps[k];
            *own += st->kind == NRT_STEP_KERNEL && st->node == v;
            for (int j = 0; st->kind == NRT_STEP_KERNEL && st->node == r && j < st->nbufs; j++) *written += st->bufs[j] == v;
        }
    }
    cuda_fuse_free(&cg);
    *images = image_kernels(g, &p);
    CHECK(valid_dataflow(g, &p, true));
    nrt_program_free(&p);
    ir_graph_free(g);
    return stored;
}

static void check_norm_backward(const char *root)
{
    uint32_t written, own, images;
    uint32_t stored = stored_prologues(root, "examples/fashion_resnet.net", 8, &written, &own, &images);
    printf("fashion_resnet training step: %u values stored by the column sum computing them, %u of them written by its "
           "kernel, %u by a kernel of their own; %u image-sized elementwise kernels\n", stored, written, own, images);
    CHECK(stored == 9 && written == stored && own == 0 && images == 15);
}

/* The same without batch norms: a relu's gradient, dy of the layer before
 * it, stored by the kernel of that layer's bias gradient, sum(dy)
 * (stores_prologue): fashion_mlp's two hidden layers, fashion_cnn's two
 * convs and its hidden layer. */
static void check_stored_bias_grads(const char *root)
{
    uint32_t written, own, images;
    uint32_t mlp = stored_prologues(root, "examples/fashion_mlp.net", 64, &written, &own, &images);
    CHECK(written == mlp && own == 0);
    uint32_t cnn = stored_prologues(root, "examples/fashion_cnn.net", 8, &written, &own, &images);
    CHECK(written == cnn && own == 0);
    printf("relu gradients stored by their bias gradient's column sum: %u in fashion_mlp's step, %u in fashion_cnn's\n", mlp, cnn);
    CHECK(mlp == 2 && cnn == 3);
}

/* cg_printf formats the common conversions itself (glibc's printf is slow
 * once libquadmath has registered a type): it writes what vsnprintf writes,
 * extremes and NULL strings included, and hands anything else to it. */
static void check_printf_as_libc(void)
{
    cg_buf b = {0};
    char want[512];
    int same = 0, n = 0;
#define AS_LIBC(...)                                       \
    do {                                                   \
        b.n = 0;                                           \
        cg_printf(&b, __VA_ARGS__);                        \
        snprintf(want, sizeof want, __VA_ARGS__);          \
        n++;                                               \
        if (b.s && strcmp(b.s, want) == 0) same++;         \
        else fprintf(stderr, "cg_printf [%s], libc [%s]\n", b.s ? b.s : "", want); \
    } while (0)
    AS_LIBC("plain text, no conversion");
    AS_LIBC("%s", "");
    AS_LIBC("  float *%s = (float *)A.buf[%d];\n", "x", 3);
    AS_LIBC("%d %d %d %d", 0, -1, INT32_MAX, INT32_MIN);
    AS_LIBC("%u %u", 0u, UINT32_MAX);
    AS_LIBC("%lld|%lld|%lld|%llu", 0ll, (long long)INT64_MAX, (long long)INT64_MIN, (unsigned long long)UINT64_MAX);
    AS_LIBC("%ld %lu %zu", -42l, 42ul, (size_t)SIZE_MAX);
    AS_LIBC("100%% of %c%c", 'o', 'k');
    AS_LIBC("[%.*s][%.*s][%.*s]", 3, "abcdef", 0, "abc", -1, "whole");
    const char *volatile none = NULL;   /* hidden from the compiler's format checks */
    AS_LIBC("[%s][%.*s][%.*s]", none, 2, none, 8, none);
    AS_LIBC("%5ld|%-4d|%08.3f|%.9g|%x", 7l, 3, 2.5, 0.1, 255u);   /* not simple: vsnprintf's */
    AS_LIBC("trailing %s and %u%%", "text", 12u);
#undef AS_LIBC
    /* a conversion it leaves to vsnprintf after some it wrote: what it wrote taken back, the text before kept */
    b.n = 0;
    cg_printf(&b, "kept ");
    cg_printf(&b, "%s=%d, %s=%5.2f", "a", 1, "b", 2.5);
    n++;
    if (b.s && strcmp(b.s, "kept a=1, b= 2.50") == 0) same++;
    else fprintf(stderr, "cg_printf after text: [%s]\n", b.s ? b.s : "");
    free(b.s);
    printf("cg_printf: %d of %d formats as libc writes them\n", same, n);
    CHECK(same == n);
}

/* cg_snprintf: snprintf's bytes and result into a fixed buffer, cut where
 * it does (the cut made by vsnprintf), for every size of buffer. */
static void check_snprintf_as_libc(void)
{
    char got[40], want[40];
    int same = 0, n = 0;
#define AS_LIBC(...)                                                                                     \
    for (size_t cap = 1; cap <= sizeof got; cap++) {                                                     \
        memset(got, '#', sizeof got), memset(want, '#', sizeof want);                                     \
        int rg = cg_snprintf(got, cap, __VA_ARGS__), rw = snprintf(want, cap, __VA_ARGS__);              \
        n++;                                                                                             \
        if (rg == rw && memcmp(got, want, sizeof got) == 0) same++;                                      \
        else fprintf(stderr, "cg_snprintf(%zu) [%.*s] %d, libc [%.*s] %d\n", cap, (int)cap, got, rg, (int)cap, want, rw); \
    }
    AS_LIBC("k%u_%s%s", 12u, "layernorm", "_fused");
    AS_LIBC("%sA.n[%d]", " * ", 7);
    AS_LIBC("t%u%s", 3u, "[h]");
    AS_LIBC("%lldLL|%zu|%c", -9223372036854775807ll, (size_t)40, 'z');
    AS_LIBC("%s%sf", "0.5", "");
    AS_LIBC("%d and %.3f", 2, 0.25);   /* not simple: vsnprintf's */
#undef AS_LIBC
    printf("cg_snprintf: %d of %d (format, size) pairs as libc writes them\n", same, n);
    CHECK(same == n);
}

/* cuda_float_literal remembers the literals it wrote last, by the
 * double's bits: 1000 values, far more than it keeps (and -0.0 beside
 * 0.0), each written as %.9g with its suffix, asked twice in two orders. */
static void check_float_literals(void)
{
    int same = 0, n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 1000; i++) {
            int k = pass ? 999 - i : i;
            double v = k == 0 ? -0.0 : k == 1 ? 0.0 : (k % 2 ? -1.0 : 1.0) * k * 0.37 / (1 + k % 7);
            char got[48], tmp[40], want[48];
            cuda_float_literal(got, v);
            snprintf(tmp, sizeof tmp, "%.9g", v);
            snprintf(want, sizeof want, "%s%sf", tmp, strpbrk(tmp, ".e") ? "" : ".0");
            n++;
            if (strcmp(got, want) == 0) same++;
            else if (n - same < 4) fprintf(stderr, "cuda_float_literal(%.17g): [%s], want [%s]\n", v, got, want);
        }
    printf("cuda_float_literal: %d of %d as %%.9g writes them\n", same, n);
    CHECK(same == n);
}

/* A kernel's slots it may store to (nrt_step.writes, read off its body):
 * each step of a kernel body the layers share has its body's, the same
 * for every copy, and no kernel stores nothing (end_kernel reads a body's
 * once, for its first step). */
static void check_kernel_writes(const char *root)
{
    nrt_program p;
    ir_graph *g = compile_train_step(root, "examples/char_lm.net", 4, &p);
    if (!g) return;
    uint64_t *first = calloc(p.nkernels + 1, sizeof *first);
    uint32_t steps = 0, shared = 0, bad = 0;
    for (uint32_t k = 0; k < p.nsteps; k++) {
        const nrt_step *s = &p.steps[k];
        if (s->kind != NRT_STEP_KERNEL) continue;
        steps++;
        if (first[s->kernel]) shared++;
        bad += s->writes == 0 || (first[s->kernel] && first[s->kernel] != s->writes);
        if (!first[s->kernel]) first[s->kernel] = s->writes;
    }
    printf("kernel writes: %u kernel steps, %u of a body met before, %u without their body's stores\n", steps, shared, bad);
    CHECK(shared > 0 && bad == 0);
    free(first);
    nrt_program_free(&p);
    ir_graph_free(g);
}

/* A cost-only compile (--memory-budget's candidates) writes what a body
 * holds twice as a function of the same inputs once: the index code's 32-
 * and 64-bit paths, a fused loop's vector members beside its scalar ones.
 * Its program is still the module's, kernel for kernel (char_lm's step,
 * whose fused loops and index code have both). */
static void check_cost_only_bodies(const char *root)
{
    nrt_program full, cost;
    ir_graph *g = compile_train_step(root, "examples/char_lm.net", 4, &full);
    if (!g) return;
    char err[512];
    cuda_body_memo *memo = cuda_body_memo_new();
    bool ok = cuda_emit_program_cost(g, true, memo, &cost, err, sizeof err);
    CHECK(ok);
    uint32_t n = cuda_body_memo_count(memo), vector = 0, indexed = 0, twice = 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *t = cuda_body_memo_text(memo, i);
        vector += strstr(t, "NC_GRID_STRIDE(vi") != NULL;
        indexed += strstr(t, "nc_ix") != NULL;
        twice += strstr(t, "typedef unsigned nc_ix") != NULL || strstr(t, "[h] = (") != NULL;
    }
    bool same = ok && full.nsteps == cost.nsteps && full.nkernels == cost.nkernels &&
                memcmp(full.steps, cost.steps, full.nsteps * sizeof *full.steps) == 0;
    printf("cost-only bodies: %u distinct, %u with a vector loop, %u with index code, %u holding a part twice; program %s\n", n,
           vector, indexed, twice, same ? "the module's" : "DIFFERENT");
    CHECK(vector > 0 && indexed > 0 && twice == 0 && same);
    if (ok) nrt_program_free(&cost);
    cuda_body_memo_free(memo);
    nrt_program_free(&full);
    ir_graph_free(g);
}

int main(int argc, char **argv)
{
    check_printf_as_libc();
    check_snprintf_as_libc();
    check_float_literals();
    const char *root = argc > 1 ? argv[1] : ".";
    char path[1024];
    const char *b[] = {"B"}, *bt[] = {"B", "T"};
    const int64_t v64[] = {64}, vbt[] = {2, 64};
    snprintf(path, sizeof path, "%s/examples/fashion_mlp.net", root);
    check_model(path, b, v64, 1, NRT_EPI_BIAS | NRT_EPI_RELU, 0);
    check_model(path, b, v64, 1, NRT_EPI_BIAS | NRT_EPI_RELU, 2);   /* micro-batches: the guarded update, one launch too */
    snprintf(path, sizeof path, "%s/examples/gpt2.net", root);
    check_model(path, bt, vbt, 2, NRT_EPI_BIAS | NRT_EPI_GELU | NRT_EPI_AUX | NRT_EPI_RESIDUAL | NRT_EPI_DGELU | NRT_EPI_BGRAD, 0);
    snprintf(path, sizeof path, "%s/examples/char_lm.net", root);
    check_model(path, b, v64, 1, 0, 0);
    check_recomputed_epilogues();
    check_read_through(root, "tests/gpu/movement.net", "B", 2, 2, 1);
    check_read_through(root, "examples/cast_chain.net", "B", 64, 0, 0);
    check_prepare(root);
    check_constant_prepare(root);
    check_size_prepare(root);
    check_update_placement(true);
    check_update_placement(false);
    check_second_update();
    check_independent_updates();
    check_long_chain();
    check_batch_norm(root);
    check_sibling_sums(root);
    check_shared_norm_sums(root);
    check_norm_sums_spread(root);
    check_norm_sums_over_blocks();
    check_norm_backward(root);
    check_stored_bias_grads(root);
    check_kernel_writes(root);
    check_cost_only_bodies(root);
    if (!failures) printf("test_fuse: all checks passed\n");
    return failures != 0;
}
