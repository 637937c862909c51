/* driver.c - one compilation: parse, analyse, run the pass pipeline. */
#include "driver.h"
#include "mem_budget.h"
#include "schedule.h"
#include "autodiff.h"
#include "parse.h"
#include "passes.h"
#include "sema.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Anything but the three forms is refused rather than read another way:
 * strtoll saturates past 2^63, and strtod takes hex (0x10), inf and nan. */
const char *driver_set_value_parse(const char *text, driver_set_value *out)
{
    static const char *wanted = "the value must be a decimal integer, a decimal number (1.5e-3), true or false";
    if (!strcmp(text, "true") || !strcmp(text, "false")) {
        *out = (driver_set_value){.kind = DRIVER_SET_BOOL, .i = text[0] == 't'};
        return NULL;
    }
    const char *p = text + (*text == '-' || *text == '+');
    size_t digits = strspn(p, "0123456789");
    char *end;
    errno = 0;
    if (digits && !p[digits]) {
        long long n = strtoll(text, &end, 10);
        if (errno) return "the integer does not fit in 64 bits";
        *out = (driver_set_value){.kind = DRIVER_SET_INT, .i = n};
        return NULL;
    }
    size_t frac = p[digits] == '.' ? strspn(p + digits + 1, "0123456789") : 0;
    const char *q = p + digits + (p[digits] == '.') + frac;
    if (!digits && !frac) return wanted;
    if (*q == 'e' || *q == 'E') {
        q += 1 + (q[1] == '-' || q[1] == '+');
        size_t exp = strspn(q, "0123456789");
        if (!exp) return wanted;
        q += exp;
    }
    if (*q) return wanted;
    double d = strtod(text, &end);
    if (*end || errno || !isfinite(d)) return "the number is out of range";
    *out = (driver_set_value){.kind = DRIVER_SET_NUMBER, .f = d};
    return NULL;
}

static ast_file *parse_checked(src_table *sources, uint32_t file_id, diag_ctx *d)
{
    int errors = d->errors;
    ast_file *f = parse_file(sources, file_id, d);
    if (d->errors > errors) {
        ast_file_free(f);
        return NULL;
    }
    return f;
}

void driver_warn_accumulate(const ir_graph *g, int accumulate, diag_ctx *d)
{
    const ir_train_spec *t = &g->train;
    if (accumulate <= 1 || !t->present || !t->loss_mixes_batch) return;
    char *what;   /* names a dim: of any length */
    if (t->batch_reduce_op == OP_DIM_VALUE) {
        char *dim = ir_dim_str(g, t->batch_reduce_dim);
        what = nc_xasprintf("the loss is scaled by this size, %s, which grows with the batch", dim);
        free(dim);
    } else if (t->batch_reduce_op == OP_MATMUL || t->batch_reduce_op == OP_SCATTER_ADD) {
        what = nc_xasprintf("this %s adds up along the batch axis", op_name(t->batch_reduce_op));
    } else {
        what = nc_xasprintf("this %s is over the batch axis", op_name(t->batch_reduce_op));
    }
    diag_report(d, DIAG_WARNING, t->batch_reduce_loc,
                "make the loss a mean over the batch (mean(...) where it adds up the samples; cross_entropy is one "
                "already), or train without --accumulate",
                "--accumulate %d averages the gradients of %d micro-batches, one batch's only for a loss that is a mean "
                "over the batch; %s", accumulate, accumulate, what);
    free(what);
    if (t->loss_loc.line && (t->loss_loc.file != t->batch_reduce_loc.file || t->loss_loc.line != t->batch_reduce_loc.line))
        diag_report(d, DIAG_NOTE, t->loss_loc, NULL, "in the loss, here");
}

/* driver_no_train_hint's text, whole on the heap (a model's name is of any length). */
static char *no_train_hint(const ir_graph *g)
{
    if (g->train.trained_models[0])
        return nc_xasprintf("the file's models with one: %s (give --model NAME)", g->train.trained_models);
    return nc_xasprintf("add: train %s { optimizer adam(lr: 1e-3) }", g->name);
}

const char *driver_no_train_hint(const ir_graph *g, char *buf, size_t cap)
{
    char *text = no_train_hint(g);
    nc_errf(buf, cap, "%s", text);   /* longer than buf: ends in "..." */
    free(text);
    return buf;
}

/* "model NAME has no train section", with the hint. */
static void report_no_train(const ir_graph *g, uint32_t file_id, diag_ctx *d)
{
    char *hint = no_train_hint(g);
    diag_report(d, DIAG_ERROR, (nc_loc){file_id, 0, 0}, hint, "model %s has no train section", g->name);
    free(hint);
}

/* The train section's loss as g's only output (the others are then dead
 * code): false, said, when g has no train section. The graph frees. */
static bool loss_as_output(ir_graph *g, uint32_t file_id, diag_ctx *d)
{
    if (!g->train.present || g->train.loss == IR_NONE) {
        report_no_train(g, file_id, d);
        ir_graph_free(g);
        return false;
    }
    for (uint32_t i = 0; i < g->noutputs; i++) free(g->outputs[i].name);
    g->noutputs = 0;
    ir_output_add(g, TRAIN_OUTPUT_LOSS, g->train.loss);
    return true;
}

ir_graph *driver_compile(src_table *sources, uint32_t file_id, const driver_opts *o, diag_ctx *d)
{
    ast_file *f = parse_checked(sources, file_id, d);
    if (!f) return NULL;
    ir_graph *g = sema_model(sources, f, o ? o->model : NULL, o, d);
    ast_file_free(f);
    if (!g) return NULL;
    /* A forward (inference) build computes the outputs only; the train spec
     * stays for reference, its loss detached so DCE drops it. */
    bool train = o && o->train_step, loss_only = o && o->loss_only && !train;
    if (g->train.present && !(o && (o->keep_loss || train || loss_only))) g->train.loss = IR_NONE;
    if (loss_only && !loss_as_output(g, file_id, d)) return NULL;
    /* A graph built to train draws dropout's masks from the @step input the
     * loop sets each run; the forward build's dropout is the identity. */
    ir_graph *stepped = !loss_only && g->train.present && g->train.loss != IR_NONE ? train_step_input(g) : NULL;
    if (stepped) {
        ir_graph_free(g);
        g = stepped;
    }
    if (train) {
        char err[1024];
        if (!g->train.present) {
            report_no_train(g, file_id, d);
            ir_graph_free(g);
            return NULL;
        }
        driver_warn_accumulate(g, o->accumulate, d);
        if (o->loss_tally) loss_chunk_count(g, true, o->loss_tally);
        /* a budget asks for the least memory; otherwise fewer, larger slices are faster */
        int slices = o->loss_slices ? o->loss_slices : o->memory_budget > 0 ? LOSS_SLICES_MOST : 0;
        if (!train_step_build(g, o->accumulate, slices, o->report, err, sizeof err)) {
            diag_report(d, DIAG_ERROR, g->train.loc, NULL, "%s", err);
            ir_graph_free(g);
            return NULL;
        }
    }
    if (!train && o && o->loss_tally) loss_chunk_count(g, false, o->loss_tally);
    if (!train && !(o && o->loss_slices == 1)) {   /* a language model's loss without its whole logits tensor */
        char err[1024];
        if (loss_chunk_forward(g, o ? o->loss_slices : 0, o ? o->report : NULL, err, sizeof err) < 0) {
            diag_report(d, DIAG_ERROR, (nc_loc){file_id, 0, 0}, NULL, "%s", err);
            ir_graph_free(g);
            return NULL;
        }
    }
    pass_opts po = {.verify = o ? o->verify : true,
                    .dump_after = o ? o->dump_after : NULL,
                    .dump_out = o && o->dump_out ? o->dump_out : stdout,
                    .report = o ? o->report : NULL,
                    .disabled = o ? o->disabled_passes : NULL,
                    .ndisabled = o ? o->ndisabled : 0};
    if (!pass_run_all(&g, &po, d->out)) {
        ir_graph_free(g);
        d->errors++;
        return NULL;
    }
    if (train && o->memory_budget > 0) {   /* the forward pass keeps nothing for a backward pass */
        char err[1024];
        if (!mem_budget_fit(&g, o->memory_budget, o->fuse, o->report ? o->report : d->out, err, sizeof err)) {
            diag_report(d, DIAG_ERROR, g->train.present ? g->train.loc : (nc_loc){file_id, 0, 0}, NULL, "%s", err);
            ir_graph_free(g);
            return NULL;
        }
    }
    ir_graph *scheduled = train ? schedule_training_step(g, o->fuse, o->report) : NULL;
    if (scheduled) {
        ir_graph_free(g);
        g = scheduled;
    }
    return g;
}

int driver_check(src_table *sources, uint32_t file_id, const driver_opts *o, diag_ctx *d)
{
    int errors = d->errors;
    ast_file *f = parse_checked(sources, file_id, d);
    if (!f) return d->errors - errors;
    sema_check_all(sources, f, o, d);
    ast_file_free(f);
    return d->errors - errors;
}
