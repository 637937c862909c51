/* train_cmd.c - `netc train`: the training loop.
 *
 * Builds two graphs from the .net file: the training step at the batch size
 * (forward, loss, backward, update: compiler/optimizer.c) and the forward
 * graph with a symbolic batch for evaluation. Runs them on the GPU (the
 * generated program; parameters and optimizer state stay on the device) or
 * on the CPU executor. The host feeds each step its batch, the schedule's
 * scalars and the step number dropout draws from (@step), and keeps the
 * loss scale. */
#include "train_cmd.h"
#include "atomic_file.h"
#include "autodiff.h"
#include "cuda_compile.h"
#include "cuda_emit.h"
#include "data.h"
#include "driver.h"
#include "gpu.h"
#include "tensor_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

typedef struct trainer {
    const train_opts *o;
    src_table src;
    ir_graph *tg, *fg;                 /* training step at the batch; forward, symbolic */
    ir_graph *lg;                      /* forward to the train section's loss, symbolic (a model scored by its loss) */
    ir_graph *eg;                      /* what the evaluation runs: lg, else fg */
    cpu_tensor *params;                /* tg's parameters and states (host copy) */
    cpu_pool pool;                     /* the CPU step's storage, kept from step to step */
    cpu_pool eval_pool;                /* the CPU evaluation's, kept from batch to batch */
    uint32_t in_x, in_y, in_lr, in_bc1, in_bc2, in_scale, in_apply, in_step;   /* tg input indices (UINT32_MAX: none) */
    int64_t micro;                     /* micro-batch: the batch tg is built for (batch / accumulate) */
    int64_t eval_cpu_batch;            /* a classifier's evaluation batch on the CPU executor (eval_cpu_batch_of) */
    ir_value loss_v, finite_v;
    loss_chunk_tally loss_tally;       /* what --loss-slices could slice, over every graph built */
    char batch_dim[64];
    bool text;                         /* a byte-level language model on text */
    bool classifier;                   /* integer labels and logits [B, classes]: scored by cross entropy and accuracy */
    bool has_y;                        /* the loss reads targets: the data set holds them (the train section's input) */
    uint32_t eval_y;                   /* the targets' input of eg (UINT32_MAX: none fed) */
    bool by_name;                      /* several data inputs: each array is SPLIT_<input>.npy */
    int nextra;                        /* data inputs besides x and y: the model's past the first, the train section's past the first */
    uint32_t in_extra[DATA_MAX_EXTRA]; /* their input indices (the same in tg, fg and lg), as the data set's extra[] */
    bool pairs;                        /* text as i32 tokens [B, T] and targets [B, T] (window T + 1) */
    /* Fault injection for the resume test (NETC_TEST_KILL_AFTER_STEP): die by
     * SIGKILL right after this step, as a killed job would. -1 = never. */
    int64_t kill_at_step;
    /* NETC_TEST_INTERRUPT=N or eval: SIGINT raised in-process as step N
     * runs or during the first evaluation, as a user's Ctrl-C would arrive
     * (the tests' deterministic stand-in for pressing it). -1 / false: never. */
    int64_t interrupt_at_step;
    int interrupt_times;               /* N,2: twice, as a user who presses it again */
    bool interrupt_in_eval;
    /* GPU */
    bool gpu;
    nrt_module_data tm, fm;
    gpu_session *gs, *es;
    bool next_staged;                  /* the next micro-batch's data is already on its way to the GPU */
    unsigned char *stage_buf;          /* native bytes of the input being staged */
    /* state */
    int64_t step, skipped;
    int64_t first_step;                /* t->step when this run's loop began (after --resume) */
    bool ckpt_dir_made;                /* --checkpoint-dir did not exist: this run made it */
    int stopped_by;                    /* the signal that stopped the loop early; 0: none */
    double scale;
    int64_t clean_steps;
    data_set train, test;
    uint64_t train_id;                 /* train_set_id(&train), for the checkpoint */
    FILE *metrics;
    char *metrics_kept;                /* --resume: the resumed run's lines, written before this run's first */
    double *curve;                     /* (step, loss) pairs for the SVG */
    int64_t ncurve;
} trainer;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint32_t input_index(const ir_graph *g, const char *name)
{
    for (uint32_t i = 0; i < g->ninputs; i++)
        if (strcmp(g->inputs[i].name, name) == 0) return i;
    return UINT32_MAX;
}

static ir_value output_value(const ir_graph *g, const char *name)
{
    for (uint32_t i = 0; i < g->noutputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0) return g->outputs[i].value;
    return IR_NONE;
}

static ir_value node_of(const ir_graph *g, nc_op op, uint32_t index)
{
    for (ir_value v = 0; v < g->nnodes; v++)
        if (g->nodes[v].op == op && g->nodes[v].attr.index == index) return v;
    return IR_NONE;
}

/* ---- interruption ------------------------------------------------------- */

/* The first SIGINT or SIGTERM only asks the loop to stop: it finishes the
 * step (or drops the evaluation) in flight, writes the checkpoint, --save
 * and the metrics, and dies of the signal (train_exit). The handler does no more
 * than async-signal-safe calls allow: the flag, a line, and for a second
 * signal the default action (an immediate stop, as without netc's help). */
static atomic_int train_interrupt;   /* the signal that asked; 0: none */
/* The handler runs on whichever thread the kernel picks (the data loader's,
 * OpenBLAS's), not only the loop's: a volatile sig_atomic_t is safe within
 * one thread only, a lock-free atomic across them (C11 7.14.1.1). */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal handler's flag must be lock-free");

static const int interrupt_signals[2] = {SIGINT, SIGTERM};

/* A terminal's progress line is open (written with \r, no newline yet): the
 * handler's line starts on a new one. Elsewhere (a log) it would leave a blank. */
static atomic_int progress_open;   /* atomic for the reason train_interrupt is */

typedef struct interrupt_guard {
    struct sigaction old[2];
    bool caught[2];
} interrupt_guard;

static void say_async(const char *s, size_t n)
{
    ssize_t w = write(STDERR_FILENO, s, n);
    (void)w;   /* nothing to do if stderr is gone */
}

static void on_interrupt(int sig)
{
    if (train_interrupt) {   /* the second: quit at once */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        raise(sig);   /* pending until this handler returns, then the default action */
        return;
    }
    train_interrupt = sig;
    static const char on_int[] = "netc: interrupted: stopping at the end of this step to save (press Ctrl-C again to quit at once)\n";
    static const char on_term[] = "netc: terminated: stopping at the end of this step to save (send the signal again to quit at once)\n";
    if (progress_open) say_async("\n", 1), progress_open = 0;
    if (sig == SIGINT) say_async(on_int, sizeof on_int - 1);
    else say_async(on_term, sizeof on_term - 1);
}

/* A signal ignored when netc started (`netc train ... &` in a script ignores
 * SIGINT; nohup) stays ignored, as the caller asked. */
static void interrupt_catch(interrupt_guard *g)
{
    train_interrupt = 0;
    for (int k = 0; k < 2; k++) {
        g->caught[k] = false;
        if (sigaction(interrupt_signals[k], NULL, &g->old[k]) != 0 || g->old[k].sa_handler == SIG_IGN) continue;
        struct sigaction sa = {.sa_handler = on_interrupt, .sa_flags = SA_RESTART};
        sigemptyset(&sa.sa_mask);
        for (int j = 0; j < 2; j++) sigaddset(&sa.sa_mask, interrupt_signals[j]);   /* one handler at a time */
        g->caught[k] = sigaction(interrupt_signals[k], &sa, NULL) == 0;
    }
}

static void interrupt_release(const interrupt_guard *g)
{
    for (int k = 0; k < 2; k++)
        if (g->caught[k]) sigaction(interrupt_signals[k], &g->old[k], NULL);
}

int train_exit(int rc)
{
    int sig = rc - 128;
    if (sig != SIGINT && sig != SIGTERM) return rc;
    fflush(NULL);
#ifdef __SANITIZE_ADDRESS__
    __lsan_do_leak_check();   /* dying of the signal skips the check at exit */
#endif
    signal(sig, SIG_DFL);
    raise(sig);
    return rc;   /* the signal blocked by the caller: the status says it */
}

static const char *interrupt_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

/* ---- building ----------------------------------------------------------- */

#define MAX_TRAIN_DIMS 16

static ir_graph *compile(trainer *t, uint32_t id, bool train, bool loss_only, const char *dim, int64_t value)
{
    diag_ctx d;
    diag_init(&d, &t->src, stderr);
    const char *dn[MAX_TRAIN_DIMS + 1];
    int64_t dv[MAX_TRAIN_DIMS + 1];
    int nd = 0;
    if (dim) dn[nd] = dim, dv[nd++] = value;
    for (int i = 0; i < t->o->ndims && nd < MAX_TRAIN_DIMS; i++) dn[nd] = t->o->dim_names[i], dv[nd++] = t->o->dim_values[i];
    driver_opts o = {.model = t->o->model, .verify = true, .train_step = train, .loss_only = loss_only, .accumulate = (int)t->o->accumulate,
                     .memory_budget = train ? t->o->memory_budget : 0, .fuse = !t->o->no_fuse,
                     .loss_slices = t->o->loss_slices, .loss_tally = &t->loss_tally,
                     .dim_names = dn, .dim_values = dv, .ndims = nd,
                     .set_names = t->o->set_names, .set_values = t->o->set_values, .nsets = t->o->nsets,
                     .disabled_passes = t->o->disabled_passes, .ndisabled = t->o->ndisabled};
    d.werror = t->o->werror;
    ir_graph *g = driver_compile(&t->src, id, &o, &d);
    if (g && diag_failed(&d)) {   /* -Werror: a warning fails the run as it fails a build */
        ir_graph_free(g);
        return NULL;
    }
    return g;
}

/* Whether a model's first output is a classifier's logits, one row per
 * sample: [B, classes] of a float type, the batch axis the first input's and
 * the classes known. A model whose is not (a scalar loss first, a [B, T, V]
 * map, integers) is scored by its train section's loss instead. */
static bool logits_fit(const ir_graph *f, const ir_node *out0)
{
    int64_t classes;
    return dtype_is_float(out0->dtype) && out0->rank == 2 && dim_equal(&f->dims[out0->shape[0]], &f->dims[f->inputs[0].shape[0]]) &&
           dim_is_const(&f->dims[out0->shape[1]], &classes) && classes >= 1;
}

/* Whether data input i (not the first) takes a row per sample: its first
 * axis the first input's batch axis. */
static int check_row_input(const trainer *t, uint32_t i)
{
    const ir_graph *f = t->fg;
    const ir_tensor_decl *d = &f->inputs[i];
    if (d->rank >= 1 && dim_equal(&f->dims[d->shape[0]], &f->dims[f->inputs[0].shape[0]])) return 0;
    char *have = ir_shape_str(f, d->dtype, d->rank, d->shape);
    bool target = i >= f->train.first_train_input;
    fprintf(stderr, "netc: the %sinput %s is %s; it takes each sample's %s, so its first axis must be the batch, %s, as the "
                    "input %s's\n", target ? "train " : "", d->name, have, target ? "target" : "row", t->batch_dim, f->inputs[0].name);
    free(have);
    return 1;
}

/* A model trained on a data set of samples: the first input takes them,
 * the train section's first input (if its loss reads any) their targets,
 * and the model's further inputs and the train section's further ones an
 * array each, read by name (t->by_name). How its test set is scored: a
 * classifier (the loss reads integer labels [B], the first output is
 * logits) by cross entropy and accuracy, any other by its own loss. */
static int sample_model_kind(trainer *t)
{
    const ir_graph *f = t->fg;
    uint32_t first = f->train.first_train_input, ntrain = f->ninputs - first;
    t->has_y = ntrain >= 1 && f->train.loss_reads_train_inputs;   /* unread inputs (autoencoder's _labels) get zeros */
    uint32_t extras = (first - 1) + (t->has_y ? ntrain - 1 : 0);
    if (first < 1 || extras > DATA_MAX_EXTRA) {
        fprintf(stderr, "netc: train on a data set feeds each of the model's inputs and the train section's inputs an array; "
                        "model %s has %u input%s and its train section %u, %u arrays, more than the %d netc train feeds\n",
                f->name, first, first == 1 ? "" : "s", ntrain, first + ntrain, 2 + DATA_MAX_EXTRA);
        return 1;
    }
    t->nextra = 0;
    for (uint32_t i = 1; i < f->ninputs; i++)
        if (i < first || (t->has_y && i > first)) t->in_extra[t->nextra++] = i;
    t->by_name = t->nextra > 0;
    const ir_tensor_decl *y = t->has_y ? &f->inputs[first] : NULL;
    t->classifier = y && y->dtype == NC_I32 && y->rank == 1 && f->noutputs && logits_fit(f, &f->nodes[f->outputs[0].value]);
    t->eval_y = t->has_y && !t->classifier ? first : UINT32_MAX;
    if (y && check_row_input(t, first)) return 1;
    for (int k = 0; k < t->nextra; k++)
        if (check_row_input(t, t->in_extra[k])) return 1;
    return 0;
}

/* The --dim that made the first input's batch axis the constant size, where
 * one binds that size: a model's own fixed first axis is rarely the very
 * number a --dim gives. NULL: none. */
static const char *batch_given_by_dim(const train_opts *o, int64_t size)
{
    for (int k = 0; k < o->ndims; k++)
        if (o->dim_values[k] == size) return o->dim_names[k];
    return NULL;
}

/* The forward graph, and what it says of the model before a step is
 * built: where --accumulate would be inexact, whether it has a train
 * section. */
static int build_forward(trainer *t, uint32_t id)
{
    t->fg = compile(t, id, false, false, NULL, 0);
    if (!t->fg) return 1;
    const ir_graph *f = t->fg;
    diag_ctx d;   /* the forward graph's batch is a symbol: where a sum over it would make --accumulate inexact */
    diag_init(&d, &t->src, stderr);
    d.werror = t->o->werror;
    driver_warn_accumulate(f, (int)t->o->accumulate, &d);
    if (diag_failed(&d)) return 1;
    if (!f->train.present) {
        char hint[256];
        fprintf(stderr, "netc: %s: model %s has no train section; %s\n", t->o->model_path, f->name,
                driver_no_train_hint(f, hint, sizeof hint));
        return 1;
    }
    return 0;
}

/* Which of two kinds of model this is, and whether --data fits it: one
 * trained on a data set of samples (and their targets, if its loss reads
 * any), or a language model over bytes given text, its loss out and no
 * train inputs: either u8 windows of text in, or (as gpt2.net) i32 tokens
 * and targets [B, T], the window's first T bytes and last T. */
static int text_or_samples(trainer *t)
{
    const ir_graph *f = t->fg;
    /* a model of several inputs may take arrays by name (train_tokens.npy...) rather than text */
    t->text = f->train.first_train_input >= f->ninputs && !data_dir_has_samples(t->o->data_dir) &&
              !(f->ninputs > 1 && data_dir_has_array(t->o->data_dir, f->inputs[0].name));
    t->pairs = t->text && f->ninputs == 2 && f->inputs[0].dtype == NC_I32 && f->inputs[1].dtype == NC_I32 &&
               f->inputs[0].rank == 2 && f->inputs[1].rank == 2 && f->inputs[0].shape[1] == f->inputs[1].shape[1];
    const ir_node *out0 = f->noutputs ? &f->nodes[f->outputs[0].value] : NULL;
    if (f->ninputs < 1 || f->inputs[0].rank < 1 || !out0 || (t->text && (out0->rank != 0 || f->inputs[0].rank != 2)) ||
        (t->text && f->ninputs > 1 && !t->pairs)) {
        fprintf(stderr, "netc: train needs either a data set of samples in --data (train_x.npy or IDX files) for the model's "
                        "first input, [B, ...] (a model of several inputs: train_<input>.npy for each), or text for a byte-level language model (input u8[B, W]: windows of text, or "
                        "i32 tokens and targets [B, T]; output: its loss)\n");
        return 1;
    }
    struct stat st;   /* else a file's path/train-images-idx3-ubyte: Not a directory */
    if (!t->text && stat(t->o->data_dir, &st) == 0 && S_ISREG(st.st_mode)) {
        fprintf(stderr, "netc: --data %s is a file, and model %s trains on a data set: give a directory of train_x.npy, "
                        "train_y.npy, test_x.npy, test_y.npy or of Fashion-MNIST's IDX files (a text file feeds a byte-level "
                        "language model, whose train section takes no input)\n", t->o->data_dir, f->name);
        return 1;
    }
    int64_t len;
    if (t->text && !dim_is_const(&f->dims[f->inputs[0].shape[1]], &len)) {
        char *name = ir_dim_str(f, f->inputs[0].shape[1]);
        fprintf(stderr, "netc: the text window length %s must be known: bind it with --dim %s=LENGTH\n", name, name);
        free(name);
        return 1;
    }
    return 0;
}

/* The first input's batch axis, into t->batch_dim: a symbol alone, which
 * --batch binds. */
static int find_batch_dim(trainer *t)
{
    const ir_graph *f = t->fg;
    const dim_expr *d0 = &f->dims[f->inputs[0].shape[0]];
    if (d0->nterms != 1 || d0->term[0].nfactors != 1 || d0->term[0].coeff != 1) {
        int64_t size = 0;
        const char *by = dim_is_const(d0, &size) ? batch_given_by_dim(t->o, size) : NULL;
        if (by)
            fprintf(stderr, "netc: --dim %s=%lld fixes the batch axis of input %s, which netc train binds from --batch: give --batch "
                            "%lld (do not give it with --dim)\n", by, (long long)size, f->inputs[0].name, (long long)size);
        else
            fprintf(stderr, "netc: the first axis of input %s must be a symbolic batch dim such as B (netc train binds it "
                            "from --batch: do not give it with --dim)\n", f->inputs[0].name);
        return 1;
    }
    snprintf(t->batch_dim, sizeof t->batch_dim, "%s", f->sym_names[d0->term[0].sym[0]]);
    return 0;
}

/* The step at the micro-batch and, for a model scored by its loss, the
 * forward pass to that loss (no update, no dropout); eg: what the
 * evaluation runs. */
static int build_step(trainer *t, uint32_t id)
{
    t->micro = t->o->batch / (t->o->accumulate > 1 ? t->o->accumulate : 1);
    t->tg = compile(t, id, true, false, t->batch_dim, t->micro);
    if (!t->tg) return 1;
    t->eg = t->fg;
    if (!t->text && !t->classifier) {
        t->lg = compile(t, id, false, true, NULL, 0);
        if (!t->lg) return 1;
        t->eg = t->lg;
    }
    return 0;
}

/* Where the host feeds the step (data, schedule, loss scale, @step) and
 * what it reads back. */
static void find_step_io(trainer *t)
{
    const ir_graph *g = t->tg;
    t->in_x = 0;
    t->in_y = t->has_y ? g->train.first_train_input : UINT32_MAX;
    t->in_lr = input_index(g, TRAIN_INPUT_LR);
    t->in_bc1 = input_index(g, TRAIN_INPUT_BC1);
    t->in_bc2 = input_index(g, TRAIN_INPUT_BC2);
    t->in_scale = input_index(g, TRAIN_INPUT_SCALE);
    t->in_apply = input_index(g, TRAIN_INPUT_APPLY);
    t->in_step = input_index(g, TRAIN_INPUT_STEP);
    t->loss_v = output_value(g, TRAIN_OUTPUT_LOSS);
    t->finite_v = output_value(g, TRAIN_OUTPUT_FINITE);
    t->scale = train_first_point(&g->train).scale;
}

static int build_graphs(trainer *t)
{
    char err[1024];
    uint32_t id = src_load(&t->src, t->o->model_path, err, sizeof err);
    if (!id) { fprintf(stderr, "netc: %s\n", err); return 1; }
    if (build_forward(t, id) || text_or_samples(t) || find_batch_dim(t)) return 1;
    t->eval_y = UINT32_MAX;
    if (!t->text && sample_model_kind(t)) return 1;
    if (build_step(t, id)) return 1;
    find_step_io(t);
    return 0;
}

/* Whether an array's rows have the shape of decl past its batch axis
 * (every such axis fixed and equal). */
static bool rows_fit(const ir_graph *g, const ir_tensor_decl *decl, const cpu_tensor *a)
{
    bool ok = decl->rank == a->rank;
    for (int k = 1; ok && k < decl->rank; k++) {
        int64_t v;
        ok = dim_is_const(&g->dims[decl->shape[k]], &v) && v == a->shape[k];
    }
    return ok;
}

/* "16x4" of a's shape past its first axis ("one value" for none). */
static void row_shape(const cpu_tensor *a, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", a->rank > 1 ? "" : "one value");
    for (int k = 1; k < a->rank; k++) snprintf(buf + strlen(buf), cap - strlen(buf), "%s%lld", k > 1 ? "x" : "", (long long)a->shape[k]);
}

/* " (hint: bind H with --dim H=8)" where decl's first unbound axis past the
 * batch is a symbol alone and a's rank is decl's: the data's size for it. */
static void unbound_hint(const ir_graph *g, const ir_tensor_decl *decl, const cpu_tensor *a, char *buf, size_t cap)
{
    for (int k = 1; decl->rank == a->rank && k < decl->rank; k++) {
        const dim_expr *d = &g->dims[decl->shape[k]];
        if (d->nterms != 1 || d->term[0].nfactors != 1 || d->term[0].coeff != 1) continue;
        const char *sym = g->sym_names[d->term[0].sym[0]];
        snprintf(buf, cap, " (hint: bind %s with --dim %s=%lld)", sym, sym, (long long)a->shape[k]);
        return;
    }
}

/* " (hint: ... a.reshape(-1, 8, 8))" where a's samples hold as many values
 * as decl's (all known): an array saved flat ([N, 64] for u8[B, 8, 8], or
 * labels [N, 1] for i32[B]) needs only NumPy's reshape. */
static void reshape_hint(const ir_graph *g, const ir_tensor_decl *decl, const cpu_tensor *a, char *buf, size_t cap)
{
    int64_t want = 1, have = 1;
    char dims[96] = "";
    for (int k = 1; k < decl->rank; k++) {
        int64_t v;
        if (!dim_is_const(&g->dims[decl->shape[k]], &v)) return;
        want *= v;
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), ", %lld", (long long)v);
    }
    for (int k = 1; k < a->rank; k++) have *= a->shape[k];
    if (have != want) return;
    snprintf(buf, cap, " (hint: each holds the %lld value%s the input takes, in another shape: save the array as "
             "a.reshape(-1%s))", (long long)want, want == 1 ? "" : "s", dims);
}

/* Whether dir's set is NumPy's (data_load_dir reads it when train_x.npy is
 * there, or a set by name): only then is a.reshape the way to fix its shape. */
static bool npy_set(const trainer *t)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/train_x.npy", t->o->data_dir);
    return t->by_name || access(path, F_OK) == 0;
}

/* An array whose rows do not fit its input's declaration, said with a hint. */
static int misfit_rows(const trainer *t, uint32_t input, const cpu_tensor *a, int split)
{
    const ir_graph *f = t->fg;
    const ir_tensor_decl *bad = &f->inputs[input];
    bool target = input >= f->train.first_train_input;
    char *have = ir_shape_str(f, bad->dtype, bad->rank, bad->shape), rows[128];
    row_shape(a, rows, sizeof rows);
    int64_t last = 0;   /* targets [N] for an input [B, 1]: NumPy's usual slip */
    bool unit = a->rank + 1 == bad->rank && dim_is_const(&f->dims[bad->shape[bad->rank - 1]], &last) && last == 1;
    char hint[160] = "";
    if (unit) snprintf(hint, sizeof hint, " (hint: give the array an axis of 1, a.reshape(-1, 1), or declare the input without it)");
    else unbound_hint(f, bad, a, hint, sizeof hint);
    if (!hint[0] && npy_set(t)) reshape_hint(f, bad, a, hint, sizeof hint);
    fprintf(stderr, "netc: %s %s is %s; the %s set has %s %s of %s%s\n", target ? "the train input" : "input", bad->name, have,
            split ? "test" : "training", dtype_name(a->dtype), target ? "targets" : "samples", rows, hint);
    free(have);
    return 1;
}

/* Both splits, before any step: a test set that does not fit would
 * otherwise fail at the first evaluation, an epoch of work lost. */
static int check_data(trainer *t)
{
    if (t->pairs) return 0;   /* the windows were cut to the model's length */
    const data_set *split[2] = {&t->train, &t->test};
    /* the forward graph's declarations: the batch axis by its name */
    const ir_graph *f = t->fg;
    for (int k = 0; k < 2; k++) {
        if (!rows_fit(f, &f->inputs[0], &split[k]->x)) return misfit_rows(t, 0, &split[k]->x, k);
        if (t->in_y != UINT32_MAX && !rows_fit(f, &f->inputs[t->in_y], &split[k]->y)) return misfit_rows(t, t->in_y, &split[k]->y, k);
        for (int e = 0; e < t->nextra; e++)
            if (!rows_fit(f, &f->inputs[t->in_extra[e]], &split[k]->extra[e])) return misfit_rows(t, t->in_extra[e], &split[k]->extra[e], k);
    }
    return 0;
}

/* A classifier's classes: the last axis of its logits, when known at build
 * time; labels are checked against it as the data loads. */
static int32_t model_classes(const trainer *t)
{
    const ir_node *out = &t->fg->nodes[t->fg->outputs[0].value];
    int64_t classes;
    if (t->text || out->rank < 1 || !dim_is_const(&t->fg->dims[out->shape[out->rank - 1]], &classes) || classes < 1 ||
        classes > (1 << 20))
        return 1 << 20;
    return (int32_t)classes;
}

/* What loading converted, a line a file: a float64 read as f32, a gzip text. */
static void print_notes(const data_set *d)
{
    for (const char *line = d->note; *line;) {
        int len = (int)strcspn(line, "\n");
        fprintf(stderr, "netc: note: %.*s\n", len, line);
        line += len + (line[len] == '\n');
    }
}

/* Both splits of a data set of samples, in the dtypes the model declares. */
static int load_samples(trainer *t, char *err, size_t cap)
{
    const ir_graph *g = t->tg;
    data_want w = {.x = g->inputs[0].dtype, .x_input = g->inputs[0].name, .has_y = t->in_y != UINT32_MAX, .max_classes = model_classes(t)};
    if (w.has_y) w.y = g->inputs[t->in_y].dtype, w.y_input = g->inputs[t->in_y].name;
    w.by_name = t->by_name;
    w.nextra = t->nextra;
    for (int e = 0; e < t->nextra; e++) w.extra[e] = g->inputs[t->in_extra[e]].dtype, w.extra_input[e] = g->inputs[t->in_extra[e]].name;
    static const char *const splits[] = {"train", "test"};
    data_set *sets[] = {&t->train, &t->test};
    for (int k = 0; k < 2; k++) {
        if (data_load_dir(t->o->data_dir, splits[k], &w, sets[k], err, cap)) return 1;
        print_notes(sets[k]);
    }
    return 0;
}

/* cpu_exec_planned_bytes of the evaluation over the test set in runs of b: the last,
 * smaller run's values come on top of the runs before it, whose buffers of
 * other sizes the pool keeps until that run ends. */
static int64_t eval_held(const trainer *t, int64_t *syms, int s, int64_t b)
{
    syms[s] = b;
    int64_t held = cpu_exec_planned_bytes(t->eg, syms), rest = t->test.n % b;
    if (rest) syms[s] = rest, held += cpu_exec_planned_bytes(t->eg, syms);
    return held;
}

/* A classifier's evaluation batch on the CPU executor: the most samples (1000
 * at most) whose forward pass holds no more (cpu_exec_planned_bytes) than the training
 * step, and never fewer than the step's micro-batch. From the graphs and the
 * test set's size alone, so a resumed run scores in the batches the
 * uninterrupted one did (a row's logits may differ in their last bit at
 * another run size: OpenBLAS's sgemm rounds a row by how many rows it
 * multiplies). The step's batch itself left fashion_mlp at --batch 16 with
 * 625 runs of 16 rows, each paying its fixed cost (1.7 s where 10 runs took
 * 1.1 s); 1000 images of fashion_cnn held 953 MiB of windows against the
 * step's 179 MiB. */
static int64_t eval_cpu_batch_of(const trainer *t)
{
    int64_t syms[NC_MAX_SYMS] = {0}, n = t->test.n > 0 ? t->test.n : 1;
    int s = ir_sym_find(t->tg, t->batch_dim);
    if (s >= 0) syms[s] = t->micro;
    const int64_t budget = cpu_exec_planned_bytes(t->tg, syms), most = n < 1000 ? n : 1000;
    const int64_t least = t->micro < most ? t->micro : most;   /* the step's own forward pass is within the step */
    int64_t lo = least, hi = most;
    if ((s = ir_sym_find(t->eg, t->batch_dim)) < 0) return hi;
    while (lo < hi) {   /* the most whose whole runs fit (more samples hold more) */
        int64_t mid = lo + (hi - lo + 1) / 2;
        syms[s] = mid;
        if (cpu_exec_planned_bytes(t->eg, syms) <= budget) lo = mid;
        else hi = mid - 1;
    }
    while (lo > least && eval_held(t, syms, s, lo) > budget) lo--;   /* and the last run beside them */
    return lo;
}

static int init_params(trainer *t)
{
    char err[1024];
    t->params = nc_xcalloc(t->tg->nparams + 1, sizeof *t->params);
    for (uint32_t i = 0; i < t->tg->nparams; i++)
        if (param_init(t->tg, i, t->o->seed, &t->params[i], err, sizeof err) != 0) {
            fprintf(stderr, "netc: %s\n", err);
            return 1;
        }
    return 0;
}

/* ---- the GPU side --------------------------------------------------------- */

/* NETC_TRAIN_CUDA_DIR=D: the CUDA C of the step and of the evaluation into
 * D/train.cu and D/eval.cu as they are made, before they load (the mock
 * GPU's tests run the kernels of those files; `netc build --emit-cuda`
 * writes the step's and the forward pass's, not a loss graph's). */
static int keep_source(int which, const char *source)
{
    const char *dir = getenv("NETC_TRAIN_CUDA_DIR");
    if (!dir) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.cu", dir, which ? "eval" : "train");
    FILE *f = fopen(path, "w");
    bool ok = f && fputs(source, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) fprintf(stderr, "netc: NETC_TRAIN_CUDA_DIR: cannot write %s: %s\n", path, strerror(errno));
    return ok ? 0 : 1;
}

/* The step's and the evaluation's modules, one image each, for arch (the
 * device's own, or --target's); the two compile at once. */
static int gpu_modules(ir_graph *const graphs[2], bool fuse, const char *arch, nrt_module_data *mods[2])
{
    char err[1024];
    const char *sources[2], *archs[2] = {arch, arch};
    for (int i = 0; i < 2; i++) {
        *mods[i] = (nrt_module_data){.graph = graphs[i]};
        if (!cuda_emit_program_ex(graphs[i], fuse, &mods[i]->program, err, sizeof err)) {
            fprintf(stderr, "netc: code generation: %s\n", err);
            return 1;
        }
        sources[i] = mods[i]->program.source;
        if (keep_source(i, sources[i])) return 1;
    }
    nvrtc_image imgs[2];
    char *log = NULL;
    if (!nvrtc_compile_all(sources, archs, 2, imgs, &log, stderr)) {
        fprintf(stderr, "netc: %s\n", log);
        free(log);
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        mods[i]->images = nc_xcalloc(1, sizeof *mods[i]->images);
        nvrtc_image_to_module(&imgs[i], &mods[i]->images[0]);
        mods[i]->nimages = 1;
    }
    return 0;
}

/* A host tensor into value v's device buffer; err names it ("input x: ..."). */
static int upload_tensor_err(gpu_session *s, ir_value v, const cpu_tensor *t, const char *what, const char *name, char *err,
                             size_t errcap)
{
    char why[512];
    size_t n = (size_t)t->numel * dtype_size(t->dtype);
    unsigned char *buf = nc_xmalloc(n + 1);
    cpu_tensor_to_native(t, buf);
    int rc = gpu_upload(s, v, buf, n, why, sizeof why);
    free(buf);
    if (rc) snprintf(err, errcap, "%s %s: %s", what, name, why);
    return rc;
}

static int upload_tensor(gpu_session *s, ir_value v, const cpu_tensor *t, const char *what, const char *name)
{
    char err[768];
    int rc = upload_tensor_err(s, v, t, what, name, err, sizeof err);
    if (rc) fprintf(stderr, "netc: %s\n", err);
    return rc;
}

/* The parameters into t->params, once the step in flight is done: after
 * this no step runs until the next launch, so the evaluation may use the
 * step's arena (gpu_session_create_in). */
static int download_params(trainer *t)
{
    char err[512];
    if (gpu_finish(t->gs, err, sizeof err)) { fprintf(stderr, "netc: %s\n", err); return 1; }
    for (uint32_t i = 0; i < t->tg->nparams; i++) {
        ir_value v = node_of(t->tg, OP_PARAM, i);
        cpu_tensor *p = &t->params[i];
        if (v == IR_NONE || p->dtype != NC_F32) continue;
        if (gpu_download(t->gs, v, p->f, (size_t)p->numel * 4, err, sizeof err)) { fprintf(stderr, "netc: %s\n", err); return 1; }
    }
    return 0;
}

/* Classes: on the GPU 1000 images a run, to keep the device busy; on the
 * CPU executor eval_cpu_batch_of's. Otherwise the training batch (or the
 * test set, if smaller), since a forward pass over 1000 windows of text can
 * need more memory than the training step, and on the CPU executor would
 * take minutes; a text model's test loss is over the whole batches, on
 * either device. */
static int64_t eval_batch_of(const trainer *t, bool gpu)
{
    if (t->classifier) return gpu ? 1000 : t->eval_cpu_batch;
    return t->test.n < t->o->batch ? (t->test.n > 0 ? t->test.n : 1) : t->o->batch;
}

/* --target's, else the device's own architecture, so that the kernels need
 * no JIT and a Hopper gets sm_90a's wgmma attention; a device newer than
 * this NVRTC knows gets compute_80 PTX, which its driver compiles. */
static int pick_train_arch(const char *target, char *arch, size_t cap)
{
    char err[512];
    if (target) {
        snprintf(arch, cap, "%s", target);
        return 0;
    }
    if (gpu_device_arch(0, arch, cap, err, sizeof err)) {
        fprintf(stderr, "netc: cannot use the GPU: %s\n", err);
        return 1;
    }
    if (!nvrtc_target_ok(arch, err, sizeof err)) {
        fprintf(stderr, "netc: this NVRTC cannot compile for the device's %s; using compute_80 PTX\n", arch);
        snprintf(arch, cap, "compute_80");
    }
    fprintf(stderr, "netc: compiling the kernels for %s (cached after the first time)\n", arch);
    return 0;
}

static int setup_gpu(trainer *t)
{
    char desc[256], eval_desc[256], err[1024], why[256];   /* the training step's session is the one described */
    bool want = !strcmp(t->o->device, "gpu") || (!strcmp(t->o->device, "auto") && gpu_probe(why, sizeof why));
    if (!want) {
        fprintf(stderr, "netc: training on the CPU executor%s%s%s\n", strcmp(t->o->device, "cpu") ? " (" : "",
                strcmp(t->o->device, "cpu") ? why : "", strcmp(t->o->device, "cpu") ? ")" : "");
        if (t->o->target &&   /* the architecture of kernels that are not built */
            diag_cli_warning(stderr, t->o->werror, "drop --target, or give --device gpu to train on the GPU",
                             "--target %s has no effect: training runs on the CPU executor", t->o->target))
            return 2;
        return 0;
    }
    char arch[32];
    if (pick_train_arch(t->o->target, arch, sizeof arch)) return 1;
    if (gpu_modules((ir_graph *const[2]){t->tg, t->eg}, !t->o->no_fuse, arch, (nrt_module_data *[2]){&t->tm, &t->fm})) return 1;
    int64_t syms[NC_MAX_SYMS] = {0};
    if (gpu_session_create(&t->tm, syms, 0, true, &t->gs, desc, sizeof desc, err, sizeof err)) {
        fprintf(stderr, "netc: cannot use the GPU: %s\n", err);
        return 1;
    }
    int s = ir_sym_find(t->eg, t->batch_dim);
    if (s >= 0) syms[s] = eval_batch_of(t, true);   /* the evaluation session's batch */
    /* evaluation runs between steps: in the step's arena above what a step keeps, when it fits */
    if (gpu_session_create_in(&t->fm, syms, t->gs, &t->es, eval_desc, sizeof eval_desc, err, sizeof err)) {
        fprintf(stderr, "netc: cannot use the GPU: %s\n", err);
        return 1;
    }
    for (uint32_t i = 0; i < t->tg->nparams; i++) {
        ir_value v = node_of(t->tg, OP_PARAM, i);
        if (v != IR_NONE && upload_tensor(t->gs, v, &t->params[i], "parameter", t->tg->params[i].decl.name)) return 1;
    }
    t->gpu = true;
    fprintf(stderr, "netc: training on %s\n", desc);
    return 0;
}

/* ---- one step ------------------------------------------------------------- */

/* The rate the schedule starts from: --lr, else the train section's. */
static double base_lr(const trainer *t) { return t->o->lr > 0 ? t->o->lr : t->tg->train.lr; }

double train_schedule_lr(const ir_train_spec *s, double base, int64_t step, int64_t total_steps)
{
    if (s->warmup_steps > 0 && step < s->warmup_steps) return base * (double)(step + 1) / (double)s->warmup_steps;
    switch (s->schedule) {
    case IR_SCHED_STEP: return base * pow(s->gamma, (double)(step / (s->step_size ? s->step_size : 1)));
    case IR_SCHED_COSINE: {
        int64_t total = s->total_steps ? s->total_steps : total_steps;
        double span = (double)(total - s->warmup_steps), done = (double)(step - s->warmup_steps);
        double p = span > 0 ? fmin(1.0, fmax(0.0, done / span)) : 1.0;
        return s->min_lr + (base - s->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * p));
    }
    default: return base;
    }
}

static double schedule_lr(const trainer *t, int64_t total_steps)
{
    return train_schedule_lr(&t->tg->train, base_lr(t), t->step, total_steps);
}

bool train_scalar_value(const ir_train_spec *s, const train_point *p, const char *name, double *v)
{
    const double n = (double)(p->step + 1);   /* Adam's t counts from 1 */
    if (!strcmp(name, TRAIN_INPUT_LR)) *v = p->lr;
    else if (!strcmp(name, TRAIN_INPUT_BC1)) *v = 1.0 - pow(s->beta1, n);
    else if (!strcmp(name, TRAIN_INPUT_BC2)) *v = 1.0 - pow(s->beta2, n);
    else if (!strcmp(name, TRAIN_INPUT_SCALE)) *v = p->scale;
    else if (!strcmp(name, TRAIN_INPUT_APPLY)) *v = p->micro + 1 == p->accumulate ? 1.0 : 0.0;
    /* dropout's masks: a new draw every run, numbered by the step count
     * (restored on resume, so a resumed run draws what the uninterrupted one
     * did); with --accumulate K, K numbers a step, so each micro-batch draws
     * masks of its own, as the slices of one large batch would */
    else if (!strcmp(name, TRAIN_INPUT_STEP)) *v = (double)(p->step * p->accumulate + p->micro);
    else return false;
    return true;
}

train_point train_first_point(const ir_train_spec *s)
{
    /* a run of any length: the first step's rate does not depend on it */
    return (train_point){.lr = train_schedule_lr(s, s->lr, 0, 1), .scale = s->loss_scale == IR_SCALE_NONE ? 1.0 : s->init_scale,
                         .accumulate = 1};
}

typedef struct step_result {
    double loss;
    bool finite;
} step_result;

/* Windows of T + 1 bytes as tokens (the first T) and targets (the last T). */
static void text_pairs(const uint8_t *windows, cpu_tensor *tokens, cpu_tensor *targets)
{
    int64_t rows = tokens->shape[0], len = tokens->shape[1];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < len; j++) {
            tokens->i[r * len + j] = windows[r * (len + 1) + j];
            targets->i[r * len + j] = windows[r * (len + 1) + j + 1];
        }
}

/* The inputs a batch fills (images and labels, or tokens and targets); the
 * others are scalars the trainer sets each step. */
static bool is_data_input(const trainer *t, uint32_t i)
{
    for (int e = 0; e < t->nextra; e++)
        if (i == t->in_extra[e]) return true;
    return i == t->in_x || i == t->in_y || (t->pairs && i == 1);
}

/* A batch's rows into an input: bytes (u8 samples) widened, else the set's
 * 4-byte elements as they are (the loader checked the dtype). */
static void fill_rows(cpu_tensor *in, const void *rows, bool bytes)
{
    if (bytes)
        for (int64_t j = 0; j < in->numel; j++) in->i[j] = ((const uint8_t *)rows)[j];
    else memcpy(in->f ? (void *)in->f : (void *)in->i, rows, (size_t)in->numel * 4);
}

static void fill_data_inputs(const trainer *t, const data_batch *b, cpu_tensor *inputs)
{
    cpu_tensor *x = &inputs[t->in_x];
    if (t->pairs) text_pairs(b->x, x, &inputs[1]);
    else fill_rows(x, b->x, t->train.x.dtype == NC_U8);
    if (t->in_y != UINT32_MAX) fill_rows(&inputs[t->in_y], b->y, false);
    for (int e = 0; e < t->nextra; e++) fill_rows(&inputs[t->in_extra[e]], b->extra[e], false);
}

/* micro: which micro-batch of the step (0 without --accumulate). */
static void fill_scalars(const trainer *t, double lr, int64_t micro, cpu_tensor *inputs)
{
    const train_point p = {.step = t->step, .lr = lr, .scale = t->scale, .micro = micro,
                           .accumulate = t->o->accumulate > 1 ? t->o->accumulate : 1};
    const uint32_t scalars[] = {t->in_lr, t->in_bc1, t->in_bc2, t->in_scale, t->in_apply, t->in_step};
    for (size_t k = 0; k < NC_COUNT(scalars); k++) {
        uint32_t i = scalars[k];
        double v;
        if (i == UINT32_MAX || !train_scalar_value(&t->tg->train, &p, t->tg->inputs[i].name, &v)) continue;
        if (inputs[i].f) inputs[i].f[0] = (float)v;
        else inputs[i].i[0] = (int32_t)(uint32_t)(uint64_t)v;   /* @step modulo 2^32: its bits are the RNG's stream */
    }
}

/* Send a micro-batch's data towards the GPU: pinned memory, a copy stream,
 * landing while the current run computes (gpu_stage_input). */
static int stage_data(trainer *t, const data_batch *b, cpu_tensor *inputs)
{
    const ir_graph *g = t->tg;
    fill_data_inputs(t, b, inputs);
    for (uint32_t i = 0; i < g->ninputs; i++) {
        ir_value v = node_of(g, OP_INPUT, i);
        if (!is_data_input(t, i) || v == IR_NONE) continue;
        size_t n = (size_t)inputs[i].numel * dtype_size(inputs[i].dtype);
        t->stage_buf = nc_xrealloc(t->stage_buf, n + 1);
        cpu_tensor_to_native(&inputs[i], t->stage_buf);
        char err[512];
        if (gpu_stage_input(t->gs, v, t->stage_buf, n, err, sizeof err)) {
            fprintf(stderr, "netc: input %s: %s\n", g->inputs[i].name, err);
            return 1;
        }
    }
    return 0;
}

/* One run of the step on the GPU. Its data was staged before (or is now);
 * while it runs, the data of `next` (NULL: none known yet) is staged. */
static int gpu_step(trainer *t, const data_batch *b, const data_batch *next, cpu_tensor *inputs, step_result *r)
{
    const ir_graph *g = t->tg;
    if (!t->next_staged && stage_data(t, b, inputs)) return 1;
    t->next_staged = false;
    for (uint32_t i = 0; i < g->ninputs; i++) {
        ir_value v = node_of(g, OP_INPUT, i);
        if (!is_data_input(t, i) && v != IR_NONE && upload_tensor(t->gs, v, &inputs[i], "input", g->inputs[i].name)) return 1;
    }
    char err[1024];
    if (gpu_launch(t->gs, err, sizeof err)) { fprintf(stderr, "netc: %s\n", err); return 1; }
    if (next) {
        if (stage_data(t, next, inputs)) return 1;
        t->next_staged = true;
    }
    if (gpu_finish(t->gs, err, sizeof err)) { fprintf(stderr, "netc: %s\n", err); return 1; }
    float loss;
    if (gpu_download(t->gs, t->loss_v, &loss, 4, err, sizeof err)) { fprintf(stderr, "netc: %s\n", err); return 1; }
    r->loss = loss;
    r->finite = true;
    if (t->finite_v != IR_NONE) {
        unsigned char ok = 1;
        if (gpu_download(t->gs, t->finite_v, &ok, 1, err, sizeof err)) { fprintf(stderr, "netc: %s\n", err); return 1; }
        r->finite = ok != 0;
    }
    return 0;
}

static int cpu_step(trainer *t, const data_batch *b, cpu_tensor *inputs, step_result *r)
{
    const ir_graph *g = t->tg;
    fill_data_inputs(t, b, inputs);
    char err[1024];
    /* a failed step ends the run unsaved, so its parameters may take their new values as they come */
    cpu_exec_opts o = {.inputs = inputs, .params = t->params, .pool = &t->pool, .update_in_place = true};
    cpu_exec_result res;
    if (cpu_exec_run(g, &o, &res, err, sizeof err)) { fprintf(stderr, "netc: %s\n", err); return 1; }
    r->loss = res.values[t->loss_v].f[0];
    r->finite = t->finite_v == IR_NONE || res.values[t->finite_v].i[0] != 0;
    cpu_exec_apply_updates(g, &res, t->params);
    cpu_exec_result_free(&res);
    return 0;
}

/* Batches in order, one fetched ahead on the GPU so its data can travel
 * while the step before it computes. */
typedef struct batch_feed {
    data_loader *dl;
    data_batch ahead;
    bool has_ahead;
    double ahead_wait;
} batch_feed;

static bool feed_next(batch_feed *f, data_batch *b, double *waited_s)
{
    if (f->has_ahead) {
        *b = f->ahead, *waited_s = f->ahead_wait;
        f->has_ahead = false;
        return true;
    }
    return data_loader_next(f->dl, b, waited_s);
}

/* The batch after the current one, fetched now (the current one's data has
 * all been staged, so the loader may reuse its memory); NULL at the end of
 * the epoch or when no more steps will run. */
static const data_batch *feed_peek(batch_feed *f, bool more_steps)
{
    if (!f->has_ahead && more_steps) f->has_ahead = data_loader_next(f->dl, &f->ahead, &f->ahead_wait);
    return f->has_ahead ? &f->ahead : NULL;
}

/* Rows [first, first + count) of batch b, in place. */
static void slice_rows(data_batch *b, int64_t first, int64_t count)
{
    b->x = (const char *)b->x + first * b->x_bytes;
    if (b->y) b->y = (const char *)b->y + first * b->y_bytes;
    for (int e = 0; e < b->nextra; e++) b->extra[e] = (const char *)b->extra[e] + first * b->extra_bytes[e];
    b->count = count;
}

/* One optimizer step on a batch: with --accumulate K, K runs of the step
 * graph on consecutive slices, the update applied by the last one. The loss
 * reported is the mean over the slices, as one large batch's would be. */
static int train_on_batch(trainer *t, const data_batch *b, double lr, cpu_tensor *inputs, batch_feed *feed, bool more,
                          step_result *r)
{
    int64_t k = t->o->accumulate > 1 ? t->o->accumulate : 1;
    double loss = 0;
    for (int64_t m = 0; m < k; m++) {
        data_batch slice = *b;
        slice_rows(&slice, m * t->micro, t->micro);
        fill_scalars(t, lr, m, inputs);
        int rc;
        if (t->gpu) {
            /* the slice's data travels first: a batch stays valid only until
             * the loader's next call, which feed_peek makes */
            if (!t->next_staged && stage_data(t, &slice, inputs)) return 1;
            t->next_staged = true;
            data_batch next_slice;
            const data_batch *next = NULL;
            if (m + 1 < k) {
                next_slice = slice;
                slice_rows(&next_slice, t->micro, t->micro);
                next = &next_slice;
            } else {
                next = feed_peek(feed, more);   /* its first micro-batch */
            }
            rc = gpu_step(t, &slice, next, inputs, r);
        } else {
            rc = cpu_step(t, &slice, inputs, r);
        }
        if (rc) return 1;
        loss += r->loss;
    }
    r->loss = loss / (double)k;
    return 0;
}

/* Dynamic loss scaling: halve on overflow (the step was skipped in-graph),
 * double after growth_interval clean steps. */
static void adjust_scale(trainer *t, bool finite)
{
    const ir_train_spec *s = &t->tg->train;
    if (s->loss_scale != IR_SCALE_DYNAMIC) return;
    if (!finite) {
        t->skipped++;
        t->scale = fmax(1.0, t->scale / 2);
        t->clean_steps = 0;
    } else if (++t->clean_steps >= s->growth_interval) {
        t->scale *= 2;
        t->clean_steps = 0;
    }
}

/* ---- evaluation ------------------------------------------------------------ */

/* The evaluation graph's parameters: the trained ones, by name (the tensors
 * are shared, not copied); on a GPU also uploaded to the evaluation session. */
static cpu_tensor *eval_params(trainer *t)
{
    const ir_graph *f = t->eg;
    if (t->gpu && download_params(t)) return NULL;
    cpu_tensor *fp = nc_xcalloc(f->nparams + 1, sizeof *fp);
    for (uint32_t i = 0; i < f->nparams; i++)
        for (uint32_t k = 0; k < t->tg->nparams; k++)
            if (strcmp(f->params[i].decl.name, t->tg->params[k].decl.name) == 0) fp[i] = t->params[k];
    for (uint32_t i = 0; t->gpu && i < f->nparams; i++) {
        ir_value v = node_of(f, OP_PARAM, i);
        if (v != IR_NONE && upload_tensor(t->es, v, &fp[i], "parameter", f->params[i].decl.name)) { free(fp); return NULL; }
    }
    return fp;
}

/* Rows [start, start + count) of a (first axis = sample) as a tensor of their own. */
static void rows_of(const cpu_tensor *a, int64_t start, int64_t count, cpu_tensor *out)
{
    int64_t shape[NC_MAX_RANK];
    memcpy(shape, a->shape, sizeof shape);
    shape[0] = count;
    cpu_tensor_alloc(out, a->dtype, a->rank, shape, (int64_t)1 << 34);
    int64_t per = out->numel / count;
    const void *src = a->f ? (const void *)(a->f + start * per) : (const void *)(a->i + start * per);
    memcpy(out->f ? (void *)out->f : (void *)out->i, src, (size_t)out->numel * 4);
}

/* The test set's samples [start, start + count) as the evaluation graph's
 * inputs: samples (x) and the targets its loss reads (y), or windows of
 * text as tokens (x) and targets (y). */
static void eval_batch_inputs(const trainer *t, int64_t start, int64_t count, cpu_tensor *x, cpu_tensor *y)
{
    const data_set *d = &t->test;
    data_rows(d, start, count, x);
    if (t->eval_y != UINT32_MAX) rows_of(&d->y, start, count, y);
    if (!t->pairs) return;
    int64_t sample = x->numel / count, ps[2] = {count, sample - 1};
    uint8_t *bytes = nc_xmalloc((size_t)x->numel + 1);
    for (int64_t j = 0; j < x->numel; j++) bytes[j] = (uint8_t)x->i[j];
    cpu_tensor_free(x);
    cpu_tensor_alloc(x, NC_I32, 2, ps, (int64_t)1 << 34);
    cpu_tensor_alloc(y, NC_I32, 2, ps, (int64_t)1 << 34);
    text_pairs(bytes, x, y);
    free(bytes);
}

/* The index of the evaluation graph's second data input: a text model's
 * targets (input 1), the targets a loss reads, or none. */
static uint32_t eval_second(const trainer *t) { return t->pairs ? 1 : t->eval_y; }

/* The forward pass over one batch of the evaluation session's size: its
 * first output (a row of logits per sample, or a mean loss, *classes 1).
 * NULL on an error, said in err. */
/* The extra data inputs of one evaluation batch into the session (inputs: eg's). */
static int upload_extras(trainer *t, const cpu_tensor *inputs, char *err, size_t cap)
{
    const ir_graph *f = t->eg;
    for (int e = 0; e < t->nextra; e++) {
        uint32_t i = t->in_extra[e];
        ir_value v = node_of(f, OP_INPUT, i);
        if (v != IR_NONE && upload_tensor_err(t->es, v, &inputs[i], "input", f->inputs[i].name, err, cap)) return 1;
    }
    return 0;
}

static float *eval_on_gpu(trainer *t, const cpu_tensor *x, const cpu_tensor *y, const cpu_tensor *inputs, int64_t count,
                          int64_t *classes, char *err, size_t cap)
{
    const ir_graph *f = t->eg;
    ir_value lv = f->outputs[0].value;
    const ir_node *ln = &f->nodes[lv];
    uint32_t second = eval_second(t);
    if (!t->classifier) *classes = 1;
    else if (!dim_is_const(&f->dims[ln->shape[ln->rank - 1]], classes) || *classes < 1) {
        snprintf(err, cap, "the output's last axis (the classes) is not a size known at build time");
        return NULL;
    }
    size_t values = t->classifier ? (size_t)(count * *classes) : 1;
    /* in the output's own dtype (a model computed in bf16 or f16 may return its logits so), widened to f32 */
    unsigned char *native = nc_xmalloc(values * dtype_size(ln->dtype) + 1);
    /* every failure fills err, which the caller prints */
    if (upload_tensor_err(t->es, node_of(f, OP_INPUT, 0), x, "input", f->inputs[0].name, err, cap) ||
        (second != UINT32_MAX && node_of(f, OP_INPUT, second) != IR_NONE &&
         upload_tensor_err(t->es, node_of(f, OP_INPUT, second), y, "input", f->inputs[second].name, err, cap)) ||
        upload_extras(t, inputs, err, cap) || gpu_run(t->es, err, cap) || gpu_download(t->es, lv, native, values * dtype_size(ln->dtype), err, cap)) {
        free(native);
        return NULL;
    }
    float *out = nc_xmalloc((values + 1) * sizeof *out);
    cpu_tensor wide = {.dtype = ln->dtype, .rank = 1, .shape = {(int64_t)values}, .numel = (int64_t)values, .f = out};
    cpu_tensor_from_native(native, &wide);
    free(native);
    return out;
}

/* The same on the CPU executor, for any count (the last, smaller batch). */
static float *eval_on_cpu(trainer *t, const cpu_tensor *inputs, const cpu_tensor *fp, int64_t count, int64_t *classes, char *err,
                          size_t cap)
{
    const ir_graph *f = t->eg;
    int64_t syms[NC_MAX_SYMS] = {0};
    int s = ir_sym_find(f, t->batch_dim);
    if (s >= 0) syms[s] = count;
    cpu_exec_opts o = {.syms = syms, .inputs = inputs, .params = fp, .pool = &t->eval_pool};
    cpu_exec_result res;
    if (cpu_exec_run(f, &o, &res, err, cap)) return NULL;
    const cpu_tensor *l = &res.values[f->outputs[0].value];
    *classes = l->rank ? l->shape[l->rank - 1] : 1;
    float *out = nc_xmalloc((size_t)l->numel * sizeof *out);
    memcpy(out, l->f, (size_t)l->numel * sizeof *out);
    cpu_exec_result_free(&res);
    return out;
}

/* A batch of classifier rows: each row's cross entropy added to *total,
 * its argmax against the label to *correct. */
static void score_rows(const float *logits, int64_t classes, const int32_t *labels, int64_t count, double *total, int64_t *correct)
{
    for (int64_t r = 0; r < count; r++) {
        const float *row = logits + r * classes;
        int64_t best = 0;
        double m = row[0], sum = 0;
        for (int64_t k = 1; k < classes; k++) if (row[k] > row[best]) best = k;
        for (int64_t k = 0; k < classes; k++) m = fmax(m, row[k]);
        for (int64_t k = 0; k < classes; k++) sum += exp(row[k] - m);
        *correct += best == labels[r];
        *total += m + log(sum) - row[labels[r]];
    }
}

/* evaluate's result when an interruption stopped it: nothing scored, the
 * evaluation is left for the resumed run. */
enum { EVAL_INTERRUPTED = 2 };

/* The test set's loss (and a classifier's accuracy), in batches of the
 * evaluation session's size on the GPU, the rest on the CPU executor; 0, 1
 * on an error, or EVAL_INTERRUPTED. A model scored by its own loss (or a
 * text model's) adds each batch's mean, weighted by its samples. */
/* The test samples an evaluation scores: --eval-samples of them, else all;
 * a text model's whole windows of the evaluation batch, at least one. */
static int64_t eval_count(const trainer *t, int64_t per)
{
    int64_t n = t->test.n, want = t->o->eval_samples;
    if (want <= 0 || want >= n) return n;
    if (t->text && want < per) return per < n ? per : n;
    return want;
}

static int evaluate(trainer *t, double *accuracy, double *loss, int64_t *scored)
{
    const data_set *d = &t->test;
    int64_t per = eval_batch_of(t, t->gpu), correct = 0, evaluated = 0, n = eval_count(t, per);
    double total = 0;
    cpu_tensor *fp = eval_params(t);
    if (!fp) return 1;
    /* The step's pool and the evaluation's take turns, so their peaks do not
     * add up (fashion_cnn at --batch 128: 179 and 119 MiB). */
    cpu_pool_release(&t->pool);
    int rc = 0;
    uint32_t second = eval_second(t);
    for (int64_t start = 0; start < n && rc == 0 && !train_interrupt; start += per) {
        int64_t count = n - start < per ? n - start : per, classes = 0;
        if (t->text && count < per) break;   /* the rest of the samples goes to the CPU executor, not of the windows */
        evaluated += count;
        cpu_tensor x = {0}, y = {0}, *inputs = nc_xcalloc(t->eg->ninputs + 1, sizeof *inputs);
        eval_batch_inputs(t, start, count, &x, &y);
        inputs[0] = x;
        if (second != UINT32_MAX) inputs[second] = y;
        for (int e = 0; e < t->nextra; e++) rows_of(&d->extra[e], start, count, &inputs[t->in_extra[e]]);
        char err[1024];
        float *out = t->gpu && count == per ? eval_on_gpu(t, &x, &y, inputs, count, &classes, err, sizeof err)
                                            : eval_on_cpu(t, inputs, fp, count, &classes, err, sizeof err);
        if (!out) {
            fprintf(stderr, "netc: evaluation: %s\n", err);
            rc = 1;
        } else if (!t->classifier) {
            total += (double)out[0] * (double)count;   /* a mean over count samples */
        } else {
            score_rows(out, classes, d->y.i + start, count, &total, &correct);
        }
        free(out);
        for (int e = 0; e < t->nextra; e++) cpu_tensor_free(&inputs[t->in_extra[e]]);
        free(inputs);
        cpu_tensor_free(&x);
        cpu_tensor_free(&y);
        if (t->interrupt_in_eval) t->interrupt_in_eval = false, raise(SIGINT);
    }
    free(fp);
    cpu_pool_release(&t->eval_pool);
    if (rc == 0 && train_interrupt) return EVAL_INTERRUPTED;
    *accuracy = t->classifier ? (double)correct / (double)evaluated : NAN;
    *loss = total / (double)(evaluated ? evaluated : 1);
    *scored = evaluated;
    return rc;
}

/* ---- checkpoints, metrics, the loss curve ---------------------------------- */

/* The loop's state in a checkpoint, as one f32 tensor "@train_state". f32
 * holds whole numbers to 2^24 exactly, so larger ones go in 24-bit pieces,
 * the most significant first:
 *   0 epoch, 1 batch in the epoch, 2-3 step, 4 loss scale;
 *   5 --batch, 6-8 --seed (a resume must repeat them for the batch index
 *     to mean the same samples);
 *   9 --epochs (the cosine schedule's length), 10-11 the training set's
 *     sample count and 12-13 a 48-bit hash of it (another data set would
 *     give the batch index other samples too), 14-16 the bits of the f64
 *     sum of the epoch's finite losses so far and 17-18 their count (so a
 *     resumed epoch's train loss is the whole epoch's);
 *   19-21 the bits of the f64 base learning rate (--lr or the train
 *     section's), so a resume with another says so.
 * Checkpoints before 2026-11-29 hold the first 5; before 2026-11-30, 9;
 * before the learning rate was kept (2026-11-30), 19. */
enum { STATE_LEN = 22, STATE_LEN_DATA = 19, STATE_LEN_RUN = 9, STATE_LEN_OLD = 5 };
#define STATE_PIECE ((int64_t)1 << 24)

/* Where a run is: what a checkpoint records of the loop's position. */
typedef struct train_pos {
    int64_t epoch, batch;   /* the next step's epoch, and its batch in it */
    double loss_sum;        /* the epoch's finite losses so far, and how many */
    int64_t nloss;
    bool has_loss;          /* on load: the checkpoint kept loss_sum and nloss (older ones did not) */
    int64_t epochs;         /* on load: the run's --epochs; 0 where older checkpoints did not keep it */
    double lr;              /* on load: the run's base learning rate; 0 where older checkpoints did not keep it */
} train_pos;

/* v as n 24-bit pieces into f, the most significant first, and back. */
static void put_pieces(float *f, uint64_t v, int n)
{
    for (int k = n - 1; k >= 0; k--, v >>= 24) f[k] = (float)(v & 0xffffff);
}

static uint64_t get_pieces(const float *f, int n)
{
    uint64_t v = 0;
    for (int k = 0; k < n; k++) v = v << 24 | (uint64_t)f[k];
    return v;
}

/* The training set's identity for a checkpoint, 48 bits: a hash of every
 * label and of 64 samples spread over the set (the first and last among
 * them). It takes well under a millisecond for 60000 images, and tells
 * apart another set of the same size; a change in a sample it skips is not
 * seen. Hashed as 4 bytes an element whatever the dtype (cpu_tensor's; a
 * set's bytes widened), so a checkpoint keeps its set's identity. */
static uint64_t train_set_id(const data_set *d)
{
    uint64_t h = NC_FNV1A_BASIS;
    if (d->n <= 0) return h & 0xffffffffffffull;
    int64_t picks = d->n < 64 ? d->n : 64;
    const void *y = d->y.f ? (const void *)d->y.f : (const void *)d->y.i;
    if (y) h = nc_fnv1a(h, y, 4 * (size_t)d->y.numel);
    for (int e = 0; e < d->nextra; e++) {   /* none for a one-input set: its checkpoints' ids stay as they were */
        const cpu_tensor *a = &d->extra[e];
        h = nc_fnv1a(h, a->f ? (const void *)a->f : (const void *)a->i, 4 * (size_t)a->numel);
    }
    for (int64_t k = 0; (d->bytes || d->x.f || d->x.i) && k < picks; k++) {
        cpu_tensor row;
        data_rows(d, picks > 1 ? k * (d->n - 1) / (picks - 1) : 0, 1, &row);
        h = nc_fnv1a(h, row.f ? (const void *)row.f : (const void *)row.i, 4 * (size_t)row.numel);
        cpu_tensor_free(&row);
    }
    return (h ^ h >> 48) & 0xffffffffffffull;
}

/* What a checkpoint's __metadata__ says of the run beside its tensors
 * (older checkpoints have none of it): the optimizer, which its state
 * tensors tell apart only up to adam or adamw, and the model's identity,
 * which its parameters' names and shapes do not give (an edited model may
 * keep them all): the model's name, the --set and --dim given, and a hash
 * of each source file's text: the .net file's whatever its name (a copy
 * of it is the same model), its imports' by their base names (the standard
 * library's modules too). */
#define META_OPTIMIZER "netc.optimizer"
#define META_MODEL "netc.model"
#define META_SETTINGS "netc.settings"
#define META_SOURCE "netc.source"   /* the .net file's; + "." and the base name: an import's */
#define META_IMPORT META_SOURCE "."

static const char *optimizer_name(ir_optimizer o) { return o == IR_OPT_SGD ? "sgd" : o == IR_OPT_ADAM ? "adam" : "adamw"; }

static int by_string(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* "--dim T=16 --set H=64", sorted (the flags' order changes nothing); "" for none. */
static char *run_settings(const train_opts *o)
{
    int n = o->ndims + o->nsets;
    char **parts = nc_xcalloc((size_t)n + 1, sizeof *parts);
    for (int k = 0; k < o->ndims; k++) parts[k] = nc_xasprintf("--dim %s=%lld", o->dim_names[k], (long long)o->dim_values[k]);
    for (int k = 0; k < o->nsets; k++) parts[o->ndims + k] = nc_xasprintf("--set %s=%s", o->set_names[k], o->set_values[k]);
    qsort(parts, (size_t)n, sizeof *parts, by_string);
    char *s = nc_xstrdup("");
    for (int k = 0; k < n; k++) {
        char *next = nc_xasprintf("%s%s%s", s, k ? " " : "", parts[k]);
        free(s), free(parts[k]);
        s = next;
    }
    free(parts);
    return s;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The identity entries of t's run: 3 + one a source file, keys and values allocated. */
typedef struct run_meta {
    st_meta *e;
    uint32_t n;
} run_meta;

static run_meta run_meta_make(const trainer *t)
{
    run_meta m = {.e = nc_xcalloc(t->src.nfiles + 3, sizeof *m.e)};
    m.e[m.n++] = (st_meta){nc_xstrdup(META_OPTIMIZER), nc_xstrdup(optimizer_name(t->tg->train.optimizer))};
    m.e[m.n++] = (st_meta){nc_xstrdup(META_MODEL), nc_xstrdup(t->fg->name)};
    m.e[m.n++] = (st_meta){nc_xstrdup(META_SETTINGS), run_settings(t->o)};
    for (uint32_t i = 0; i < t->src.nfiles; i++) {
        const src_file *f = &t->src.files[i];
        m.e[m.n++] = (st_meta){i ? nc_xasprintf(META_IMPORT "%s", base_name(f->path)) : nc_xstrdup(META_SOURCE),
                               nc_xasprintf("%016llx", (unsigned long long)nc_fnv1a(NC_FNV1A_BASIS, f->text, f->len))};
    }
    return m;
}

static const char *run_meta_get(const run_meta *m, const char *key)
{
    for (uint32_t k = 0; k < m->n; k++)
        if (!strcmp(m->e[k].key, key)) return m->e[k].value;
    return NULL;
}

static void run_meta_free(run_meta *m)
{
    for (uint32_t k = 0; k < m->n; k++) free((char *)m->e[k].key), free((char *)m->e[k].value);
    free(m->e);
}

static int save_checkpoint(trainer *t, const char *path, const train_pos *p)
{
    char err[1024];
    if (t->gpu && download_params(t)) return 1;
    uint32_t n = t->tg->nparams;
    st_entry *e = nc_xcalloc(n + 2, sizeof *e);
    for (uint32_t i = 0; i < n; i++) e[i] = (st_entry){.name = t->tg->params[i].decl.name, .t = &t->params[i]};
    cpu_tensor state = {0};
    int64_t len = STATE_LEN;
    cpu_tensor_alloc(&state, NC_F32, 1, &len, 4 * STATE_LEN);
    float *f = state.f;
    uint64_t loss_bits, lr_bits;
    const double lr = base_lr(t);
    memcpy(&loss_bits, &p->loss_sum, sizeof loss_bits);
    memcpy(&lr_bits, &lr, sizeof lr_bits);
    f[0] = (float)p->epoch, f[1] = (float)p->batch, f[4] = (float)t->scale, f[5] = (float)t->o->batch, f[9] = (float)t->o->epochs;
    put_pieces(f + 2, (uint64_t)t->step, 2);
    put_pieces(f + 6, t->o->seed, 3);
    put_pieces(f + 10, (uint64_t)t->train.n, 2);
    put_pieces(f + 12, t->train_id, 2);
    put_pieces(f + 14, loss_bits, 3);
    put_pieces(f + 17, (uint64_t)p->nloss, 2);
    put_pieces(f + 19, lr_bits, 3);
    e[n] = (st_entry){.name = "@train_state", .t = &state};
    run_meta meta = run_meta_make(t);
    int rc = safetensors_write_meta(path, e, n + 1, meta.e, meta.n, err, sizeof err);
    if (rc) fprintf(stderr, "netc: %s\n", err);
    run_meta_free(&meta);
    cpu_tensor_free(&state);
    free(e);
    return rc;
}

/* "@train_state" of len floats from path, or non-zero with err. */
static int load_state(const char *path, int64_t len, cpu_tensor *state, char *err, size_t errcap)
{
    ir_graph *g = ir_graph_new("checkpoint");
    ir_param p = {.decl = {.name = "@train_state", .dtype = NC_F32, .rank = 1}};
    p.decl.shape[0] = ir_dim_const(g, len);
    ir_param_add(g, &p);
    int rc = safetensors_load_params(path, g, state, true, err, errcap);
    ir_graph_free(g);
    return rc;
}

/* A whole number in [0, 2^24): what every piece of the state must be. */
static bool state_piece(float v) { return v >= 0 && v < (float)STATE_PIECE && v == floorf(v); }

/* A double kept as 3 pieces (72 bits for 64): the loss so far, the learning rate. */
static double state_double(const float *f)
{
    uint64_t bits = get_pieces(f, 3);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* What is wrong with the state's values themselves; NULL when nothing. */
static const char *state_malformed(const cpu_tensor *state)
{
    const float *f = state->f;
    for (int k = 0; k < STATE_LEN_OLD - 1; k++)
        if (!state_piece(f[k])) return "its epoch, batch or step is not a count";
    if (!isfinite(f[4]) || f[4] <= 0) return "its loss scale is not a positive number";
    for (int k = STATE_LEN_OLD; k < STATE_LEN_RUN && k < state->numel; k++)
        if (!state_piece(f[k])) return "its --batch or --seed is not a count";
    for (int k = STATE_LEN_RUN; k < state->numel; k++)
        if (!state_piece(f[k])) return "its --epochs, data set, loss so far or learning rate is not a count";
    if (state->numel < STATE_LEN_DATA) return NULL;
    if (f[9] < 1) return "its --epochs is not a positive count";
    if (f[14] >= 65536 || !isfinite(state_double(f + 14))) return "its loss so far is not a number";   /* 3 pieces: 72 bits for 64 */
    if (state->numel < STATE_LEN) return NULL;
    const double lr = state_double(f + 19);
    if (f[19] >= 65536 || !isfinite(lr) || lr <= 0) return "its learning rate is not a positive number";
    return NULL;
}

/* Why the state cannot be resumed from, in why; false when it can. */
static bool state_problem(const trainer *t, const cpu_tensor *state, char *why, size_t cap)
{
    const float *f = state->f;
    const char *bad = state_malformed(state);
    if (bad) {
        snprintf(why, cap, "%s", bad);
        return true;
    }
    if (state->numel < STATE_LEN_RUN) return false;   /* older checkpoints did not keep --batch and --seed */
    uint64_t seed = get_pieces(f + 6, 3);
    bool has_data = state->numel >= STATE_LEN_DATA;   /* nor, later, the data set */
    long long samples = has_data ? (long long)get_pieces(f + 10, 2) : 0;
    if ((int64_t)f[5] != t->o->batch)
        snprintf(why, cap, "it was made with --batch %lld, this run has --batch %lld: resume with the same one",
                 (long long)f[5], (long long)t->o->batch);
    else if (seed != t->o->seed)
        snprintf(why, cap, "it was made with --seed %llu, this run has --seed %llu: resume with the same one",
                 (unsigned long long)seed, (unsigned long long)t->o->seed);
    else if (has_data && samples != t->train.n && t->text)   /* the same text in windows of another length */
        snprintf(why, cap, "it was made on %lld training windows of text, this run has %lld: resume on the same text (--data) "
                 "in windows of the same length (the model's input %s, which --dim and --set may change)", samples,
                 (long long)t->train.n, t->tg->inputs[0].name);
    else if (has_data && samples != t->train.n)
        snprintf(why, cap, "it was made on %lld training samples, this run has %lld: resume on the same data (--data)", samples,
                 (long long)t->train.n);
    else if (has_data && get_pieces(f + 12, 2) != t->train_id)
        snprintf(why, cap, "it was made on other training data (%lld samples too, other labels or samples): resume on the same data (--data)",
                 samples);
    else return false;
    return true;
}

/* --accumulate's gradient accumulators are zero at every checkpoint (one is
 * written after a whole step), so not read from it, and a run may resume
 * with another --accumulate than it was made with. */
static bool read_from_checkpoint(const ir_param *p) { return p->role != IR_ROLE_ACCUMULATOR; }

/* The parameters and states of t->tg but the accumulators, from path into
 * loaded (indexed as t->tg's); the accumulators get zeros. */
static int load_checkpoint_params(trainer *t, const char *path, cpu_tensor *loaded, char *err, size_t cap)
{
    /* no extras: a tensor of no parameter of this model (a layer taken out) would be gone from the next checkpoint */
    int rc = safetensors_load_params_if(path, t->tg, read_from_checkpoint, loaded, false, err, cap);
    for (uint32_t i = 0; rc == 0 && i < t->tg->nparams; i++)
        if (t->tg->params[i].role == IR_ROLE_ACCUMULATOR) {
            const cpu_tensor *p = &t->params[i];
            if (!cpu_tensor_alloc(&loaded[i], p->dtype, p->rank, p->shape, DIM_MAX_NUMEL * (int64_t)sizeof(float)))   /* any tensor: the machine's memory */
                rc = 1, snprintf(err, cap, "out of memory for %s", t->tg->params[i].decl.name);
        }
    return rc;
}

static const char other_model_hint[] =
    " (hint: a checkpoint of another model, or of this one with other layers or sizes: resume with the .net file, --set and "
    "--dim it was made with, or give this run a --checkpoint-dir of its own)";

static int load_checkpoint(trainer *t, const char *path, train_pos *pos)
{
    char err[1024], old_err[1024];
    /* the parameters and states by name; the loop state as one more tensor */
    cpu_tensor *loaded = nc_xcalloc(t->tg->nparams + 1, sizeof *loaded), state = {0};
    int rc = load_checkpoint_params(t, path, loaded, err, sizeof err);
    /* whole, but not of this model's parameters: a parameter missing, of another shape, or one of no parameter */
    const bool params_bad = rc == ST_LOAD_MISSING || rc == ST_LOAD_SHAPE || rc == ST_LOAD_EXTRA;
    if (rc == 0) {   /* the newest form, else an older one's; the newest's error stands */
        static const int64_t older[] = {STATE_LEN_DATA, STATE_LEN_RUN, STATE_LEN_OLD};
        rc = load_state(path, STATE_LEN, &state, err, sizeof err);
        for (size_t k = 0; rc != 0 && k < sizeof older / sizeof *older; k++)
            rc = load_state(path, older[k], &state, old_err, sizeof old_err);
    }
    char why[256];
    bool problem = rc == 0 && state_problem(t, &state, why, sizeof why);
    if (problem) snprintf(err, sizeof err, "%s: @train_state: %s", path, why);
    if (rc || problem) {
        fprintf(stderr, "netc: cannot resume: %s%s\n", err, params_bad ? other_model_hint : "");
        for (uint32_t i = 0; i < t->tg->nparams; i++) cpu_tensor_free(&loaded[i]);
        free(loaded);
        cpu_tensor_free(&state);
        return 1;
    }
    for (uint32_t i = 0; i < t->tg->nparams; i++) {
        cpu_tensor_free(&t->params[i]);
        t->params[i] = loaded[i];
    }
    free(loaded);
    const float *f = state.f;
    *pos = (train_pos){.epoch = (int64_t)f[0], .batch = (int64_t)f[1], .has_loss = state.numel >= STATE_LEN_DATA};
    t->step = (int64_t)get_pieces(f + 2, 2);
    t->scale = f[4];
    if (pos->has_loss) {
        pos->loss_sum = state_double(f + 14);
        pos->nloss = (int64_t)get_pieces(f + 17, 2);
        pos->epochs = (int64_t)f[9];
    }
    if (state.numel >= STATE_LEN) pos->lr = state_double(f + 19);
    cpu_tensor_free(&state);
    return 0;
}

/* " (hint: ...)" where the directory path would be written in is not
 * there (out/ of `--save out/w.safetensors` in a fresh checkout): netc
 * makes --checkpoint-dir, but not the directory of a file. "" otherwise. */
static const char *no_dir_hint(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    struct stat st;
    buf[0] = 0;
    if (!slash || slash == path) return buf;
    snprintf(buf, cap, "%.*s", (int)(slash - path), path);
    if (stat(buf, &st) == 0 || errno != ENOENT) return buf[0] = 0, buf;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", buf);
    snprintf(buf, cap, " (hint: the directory %s is not there: make it first, mkdir -p %s)", dir, dir);
    return buf;
}

/* Whether --metrics could be written, before any work, without touching an
 * existing file: a run that fails before its first line leaves the last
 * run's metrics as they were. 0, or 1 with the reason on stderr. */
static int metrics_check(const char *path)
{
    struct stat st;
    char err[1024];
    if (stat(path, &st) != 0) {   /* not there yet: can a file be made beside it? */
        if (atomic_file_check(path, err, sizeof err) == 0) return 0;
        char hint[2200];
        fprintf(stderr, "netc: --metrics %s%s\n", err, no_dir_hint(path, hint, sizeof hint));
        return 1;
    }
    /* a device or FIFO (/dev/stdout, a pipe to a follower) is not opened here:
       a FIFO's open would wait for its reader */
    if (S_ISDIR(st.st_mode) || access(path, W_OK) != 0) {
        fprintf(stderr, "netc: cannot write --metrics %s: %s\n", path, S_ISDIR(st.st_mode) ? "is a directory" : strerror(errno));
        return 1;
    }
    return 0;
}

/* --metrics opened for writing, or NULL after saying why. A FIFO is opened
 * only where something reads it: a blocking open would wait for a reader
 * through Ctrl-C and SIGTERM (their handlers let it restart). */
static FILE *open_metrics(const char *path)
{
    struct stat st;
    FILE *f = NULL;
    if (stat(path, &st) != 0 || !S_ISFIFO(st.st_mode)) f = fopen(path, "w");
    else {
        int fd = open(path, O_WRONLY | O_NONBLOCK);
        if (fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0) f = fdopen(fd, "w");
        if (!f && errno == ENXIO) {
            fprintf(stderr, "netc: cannot write --metrics %s: a FIFO that nothing reads (start its reader first)\n", path);
            return NULL;
        }
        if (!f && fd >= 0) close(fd);
    }
    if (!f) fprintf(stderr, "netc: cannot write --metrics %s: %s\n", path, strerror(errno));
    return f;
}

/* A line of the metrics, the first opening the file (truncating an earlier
 * run's): only a run that has something to say replaces them. 0, or 1 with
 * the reason on stderr. */
static int metrics_line(trainer *t, json_t *o)
{
    const char *path = t->o->metrics_path;
    if (path && !t->metrics) t->metrics = open_metrics(path);
    if (t->metrics && t->metrics_kept) {
        fputs(t->metrics_kept, t->metrics);
        free(t->metrics_kept);
        t->metrics_kept = NULL;
    }
    if (!t->metrics) { json_decref(o); return path ? 1 : 0; }
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    fprintf(t->metrics, "%s\n", s);
    fflush(t->metrics);
    free(s);
    json_decref(o);
    return 0;
}

/* What the GPU held: the training session's own accounting (the arena its
 * plan asked for, the cuBLASLt workspace and the rest it allocated; what a
 * --memory-budget bounds), the evaluation session's (which lives in the
 * step's arena when it fits there), and the device's use as the driver
 * sees it (CUDA contexts and loaded kernels included). */
static int report_gpu_memory(trainer *t)
{
    const double gib = 1024.0 * 1024 * 1024;
    int64_t held = gpu_device_bytes(t->gs), arena = gpu_arena_bytes(t->gs), eval = gpu_device_bytes(t->es);
    int64_t used = gpu_device_used_bytes(t->gs);
    /* the budget bounds the step's session: say so where one was given, and whether the evaluation's
       is inside it, so that the device's total (the CUDA context on top) is not read as over it */
    const bool budgeted = t->o->memory_budget > 0, shared = gpu_arena_borrowed(t->es);
    fprintf(stderr, "GPU memory: the training step holds %.3f GiB (arena %.3f GiB%s), evaluation %.3f GiB%s", held / gib,
            arena / gib, budgeted ? "; what --memory-budget bounds" : "", eval / gib,
            shared ? " more (it runs in the step's arena)" : budgeted ? " (outside the budget: too large for the step's arena)" : "");
    if (used >= 0) fprintf(stderr, "; the device has %.3f GiB in use", used / gib);
    fputc('\n', stderr);
    json_t *line = json_pack("{s:I, s:I, s:I, s:I}", "step", (json_int_t)t->step, "gpu_train_bytes", (json_int_t)held,
                             "gpu_arena_bytes", (json_int_t)arena, "gpu_eval_bytes", (json_int_t)eval);
    if (used >= 0) json_object_set_new(line, "gpu_device_used_bytes", json_integer(used));
    return metrics_line(t, line);
}

/* What the CPU executor's pools held at most: the step's values, its chain
 * scratch and kept constants (the parameters and optimizer state are the
 * trainer's, beside them), and the evaluation's, with the samples a run of
 * it took (what its memory follows). */
static void report_cpu_memory(const trainer *t)
{
    const double mib = 1024.0 * 1024;
    fprintf(stderr, "CPU memory: the training step's values held %.1f MiB at most (parameters and optimizer "
                    "state aside), evaluation %.1f MiB in runs of %lld samples\n", (double)t->pool.peak_bytes / mib,
            (double)t->eval_pool.peak_bytes / mib, (long long)eval_batch_of(t, false));
}

/* --resume: the metrics of the run resumed, up to the checkpoint's step, go
 * on in this run's file (and its step losses on the loss curve); the lines
 * a killed run wrote after its checkpoint are dropped, as this run does
 * those steps again, and so is an interrupted run's last line: the run goes
 * on, and the file's one "interrupted" line is where it stopped last, at its
 * end. So is the GPU memory line of a run stopped by --max-steps where this
 * run takes steps: it writes its own at its end (the old one stayed in the
 * middle of the steps); one that takes none writes none, and keeps it. Only
 * a regular file is read (not a FIFO's writer side). */
static void metrics_keep(trainer *t, const train_pos *pos)
{
    const bool steps = pos->epoch < t->o->epochs && !(t->o->max_steps && t->step >= t->o->max_steps);
    const char *path = t->o->metrics_path;
    struct stat st;
    FILE *in = path && stat(path, &st) == 0 && S_ISREG(st.st_mode) ? fopen(path, "r") : NULL;
    if (!in) return;
    size_t len = 0, cap = 0;
    char line[4096];
    while (fgets(line, sizeof line, in)) {
        json_t *o = json_loads(line, 0, NULL), *step = o ? json_object_get(o, "step") : NULL;
        json_t *loss = o ? json_object_get(o, "train_loss") : NULL;
        bool kept = json_is_integer(step) && json_integer_value(step) <= t->step && !json_object_get(o, "interrupted") &&
                    !(steps && json_object_get(o, "gpu_train_bytes"));
        if (kept && strchr(line, '\n')) {
            size_t n = strlen(line);
            if (len + n + 1 > cap) t->metrics_kept = nc_xrealloc(t->metrics_kept, cap = 2 * (len + n + 1));
            memcpy(t->metrics_kept + len, line, n + 1);
            len += n;
            if (json_is_number(loss) && json_object_get(o, "lr")) {   /* a step's line, not an epoch's mean */
                t->curve = nc_xrealloc(t->curve, (size_t)(t->ncurve + 1) * 2 * sizeof *t->curve);
                t->curve[2 * t->ncurve] = (double)json_integer_value(step), t->curve[2 * t->ncurve + 1] = json_number_value(loss);
                t->ncurve++;
            }
        }
        json_decref(o);
    }
    fclose(in);
}

/* The loss curve's file beside the metrics: their name with .svg for its
 * extension. Non-zero when that is the metrics file itself. */
static int svg_path(const char *metrics_path, char *path, size_t cap)
{
    snprintf(path, cap, "%s", metrics_path);
    char *dot = strrchr(path, '.');
    if (dot && !strchr(dot, '/')) *dot = 0;
    strncat(path, ".svg", cap - strlen(path) - 1);
    return strcmp(path, metrics_path) == 0;
}

/* 0, or 1 with the reason on stderr. */
static int write_svg(const trainer *t, const char *metrics_path)
{
    if (t->ncurve < 2 || !metrics_path) return 0;
    char path[4096];
    svg_path(metrics_path, path, sizeof path);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "netc: cannot write the loss curve %s: %s\n", path, strerror(errno));
        return 1;
    }
    double x0 = t->curve[0], x1 = t->curve[2 * (t->ncurve - 1)], lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < t->ncurve; i++) lo = fmin(lo, t->curve[2 * i + 1]), hi = fmax(hi, t->curve[2 * i + 1]);
    if (hi <= lo) hi = lo + 1;
    if (x1 <= x0) x1 = x0 + 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"360\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"720\" height=\"360\" fill=\"white\"/>\n"
               "<text x=\"360\" y=\"20\" text-anchor=\"middle\">training loss (netc train %s)</text>\n"
               "<line x1=\"60\" y1=\"320\" x2=\"700\" y2=\"320\" stroke=\"black\"/><line x1=\"60\" y1=\"30\" x2=\"60\" y2=\"320\" stroke=\"black\"/>\n"
               "<text x=\"55\" y=\"324\" text-anchor=\"end\">%.3g</text><text x=\"55\" y=\"34\" text-anchor=\"end\">%.3g</text>\n"
               "<text x=\"60\" y=\"338\">step %.0f</text><text x=\"700\" y=\"338\" text-anchor=\"end\">step %.0f</text>\n"
               "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"",
            t->tg->name, lo, hi, x0, x1);
    for (int64_t i = 0; i < t->ncurve; i++)
        fprintf(f, "%.1f,%.1f ", 60 + 640 * (t->curve[2 * i] - x0) / (x1 - x0), 320 - 290 * (t->curve[2 * i + 1] - lo) / (hi - lo));
    fprintf(f, "\"/>\n</svg>\n");
    bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, "netc: cannot write the loss curve %s: %s\n", path, strerror(errno ? errno : EIO));
        return 1;
    }
    return 0;
}

static void progress(const trainer *t, int64_t epoch, int64_t b, int64_t nb, double loss, double rate, double eta, bool tty)
{
    if (tty) {
        int width = 24, done = nb ? (int)(width * (b + 1) / nb) : width;
        fprintf(stderr, "\repoch %lld/%lld [", (long long)epoch + 1, (long long)t->o->epochs);
        for (int i = 0; i < width; i++) fputc(i < done ? '=' : i == done ? '>' : ' ', stderr);
        fprintf(stderr, "] step %lld loss %.4f %.0f samples/s ETA %dm%02ds  ", (long long)t->step, loss, rate,
                (int)eta / 60, (int)eta % 60);
        progress_open = 1;
    } else {
        fprintf(stderr, "epoch %lld/%lld step %lld (%lld/%lld) loss %.4f %.0f samples/s ETA %.0fs\n", (long long)epoch + 1,
                (long long)t->o->epochs, (long long)t->step, (long long)b + 1, (long long)nb, loss, rate, eta);
    }
}

/* ---- the loop ---------------------------------------------------------------- */

/* Whether the learning rate's schedule is stretched over the run's --epochs
 * (cosine without total_steps): another --epochs changes every step's. */
static bool schedule_spans_epochs(const trainer *t)
{
    return t->tg->train.schedule == IR_SCHED_COSINE && t->tg->train.total_steps == 0;
}

/* a and b with the fewest digits (6 at least) that tell them apart */
static void fmt_distinct(double a, double b, char *as, char *bs, size_t cap)
{
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(as, cap, "%.*g", digits, a);
        snprintf(bs, cap, "%.*g", digits, b);
        if (strcmp(as, bs) != 0) return;
    }
}

/* Whether the steps done took the learning rates a run of total_now steps
 * gives them, as the step reads one (an f32 scalar): so warmup's, which do
 * not depend on the total, and a cosine's that the total moves by less than
 * a float's rounding. The resumed run is then that run, uninterrupted. */
static bool same_lrs_so_far(const trainer *t, int64_t total_was, int64_t total_now)
{
    for (int64_t step = 0; step < t->step; step++)
        if ((float)train_schedule_lr(&t->tg->train, base_lr(t), step, total_was) !=
            (float)train_schedule_lr(&t->tg->train, base_lr(t), step, total_now))
            return false;
    return true;
}

/* A resume with other --epochs than the checkpoint's: refused where the
 * schedule spans them and the steps done would have had other learning
 * rates; said otherwise (the run then goes as an uninterrupted one with
 * these --epochs). */
static int check_epochs(trainer *t, const char *ckpt, int64_t nb, const train_pos *pos)
{
    const train_opts *o = t->o;
    /* older checkpoints did not keep them; past the new --epochs, no step runs */
    if (!pos->epochs || pos->epochs == o->epochs || pos->epoch >= o->epochs) return 0;
    const char *why = !schedule_spans_epochs(t)                      ? "its learning-rate schedule does not depend on them"
                      : same_lrs_so_far(t, nb * pos->epochs, nb * o->epochs) ? "the steps done took the learning rates these give them"
                                                                             : NULL;
    if (why) {
        fprintf(stderr, "netc: the checkpoint was made with --epochs %lld; this run goes on to --epochs %lld (%s)\n",
                (long long)pos->epochs, (long long)o->epochs, why);
        return 0;
    }
    char was[32], now[32];
    fmt_distinct(schedule_lr(t, nb * pos->epochs), schedule_lr(t, nb * o->epochs), was, now, sizeof was);
    fprintf(stderr, "netc: cannot resume: %s: @train_state: it was made with --epochs %lld, this run has --epochs %lld: the cosine "
                    "schedule spans the run's epochs, so its learning rates would be another run's (step %lld's: %s, not %s); resume "
                    "with --epochs %lld\n",
            ckpt, (long long)pos->epochs, (long long)o->epochs, (long long)t->step + 1, now, was, (long long)pos->epochs);
    return 1;
}

/* A resume with another base learning rate than the checkpoint's (--lr, or
 * the train section's edited) goes on with the new one, as asked, and says
 * so with both; older checkpoints did not keep it. */
static void say_lr(const trainer *t, const train_pos *pos)
{
    const double now = base_lr(t);
    if (pos->lr <= 0 || pos->lr == now) return;
    char was_s[32], now_s[32];
    fmt_distinct(pos->lr, now, was_s, now_s, sizeof was_s);
    fprintf(stderr, "netc: the checkpoint was made with learning rate %s; this run goes on with learning rate %s (%s) from step %lld\n",
            was_s, now_s, t->o->lr > 0 ? "--lr" : "the train section's lr", (long long)t->step + 1);
}

/* What a resume says of where it goes on, or that there is nothing left. */
static void say_resumed(const trainer *t, const char *ckpt, const train_pos *pos)
{
    const train_opts *o = t->o;
    if (pos->epoch < o->epochs) {
        fprintf(stderr, "netc: resumed from %s at epoch %lld, step %lld\n", ckpt, (long long)pos->epoch + 1, (long long)t->step);
        if (!(o->max_steps && t->step >= o->max_steps)) say_lr(t, pos);   /* no step will run at any rate */
    } else if (pos->epoch == o->epochs && pos->batch == 0)
        fprintf(stderr, "netc: %s is of a finished run: %s %lld epoch%s done, step %lld; nothing to run (%s)\n", ckpt,
                o->epochs == 1 ? "its" : "all", (long long)o->epochs, o->epochs == 1 ? "" : "s", (long long)t->step,
                schedule_spans_epochs(t) ? "its cosine schedule ended with them: to train longer, start a new run with more --epochs"
                                           : "give more --epochs to train on");
    else
        fprintf(stderr, "netc: %s is at epoch %lld, step %lld, past --epochs %lld: nothing to run\n", ckpt, (long long)pos->epoch + 1,
                (long long)t->step, (long long)o->epochs);
}

/* The optimizer state a parameter keeps, known by its tensor's name
 * (optimizer.c's state_param): NAME.adam_m and NAME.adam_v of adam and
 * adamw, NAME.momentum of sgd with momentum, none of sgd without. */
typedef enum opt_state { OPT_STATE_NONE, OPT_STATE_MOMENTUM, OPT_STATE_ADAM } opt_state;

/* The kind of state name is, and the length of its parameter's name. */
static opt_state state_kind(const char *name, size_t *base_len)
{
    static const struct {
        const char *suffix;
        opt_state kind;
    } kinds[] = {{".adam_m", OPT_STATE_ADAM}, {".adam_v", OPT_STATE_ADAM}, {".momentum", OPT_STATE_MOMENTUM}};
    size_t n = strlen(name);
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        size_t m = strlen(kinds[k].suffix);
        if (n > m && !strcmp(name + n - m, kinds[k].suffix)) return *base_len = n - m, kinds[k].kind;
    }
    return OPT_STATE_NONE;
}

/* The checkpoint's: a tensor NAME.adam_m is state only beside a tensor NAME
 * (a layer may name a weight "momentum" itself). */
static opt_state file_opt_state(const st_header *h)
{
    for (uint32_t k = 0; k < h->nnames; k++) {
        size_t len;
        opt_state kind = state_kind(h->names[k], &len);
        if (kind == OPT_STATE_NONE) continue;
        char *base = nc_xasprintf("%.*s", (int)len, h->names[k]);
        bool of_param = st_header_has(h, base);
        free(base);
        if (of_param) return kind;
    }
    return OPT_STATE_NONE;
}

static opt_state graph_opt_state(const ir_graph *g)
{
    for (uint32_t i = 0; i < g->nparams; i++) {
        size_t len;
        opt_state kind = g->params[i].role == IR_ROLE_STATE ? state_kind(g->params[i].decl.name, &len) : OPT_STATE_NONE;
        if (kind != OPT_STATE_NONE) return kind;
    }
    return OPT_STATE_NONE;
}

/* "adamw, which keeps moments (NAME.adam_m, NAME.adam_v)"; name: the
 * optimizer where known (a checkpoint before it was kept: NULL). */
static void say_optimizer(char *buf, size_t cap, opt_state kind, const char *name)
{
    if (kind == OPT_STATE_ADAM)
        snprintf(buf, cap, "%s, which keeps moments (NAME.adam_m, NAME.adam_v)", name && strcmp(name, "sgd") ? name : "adam or adamw");
    else if (kind == OPT_STATE_MOMENTUM)
        snprintf(buf, cap, "sgd with momentum, which keeps a momentum buffer (NAME.momentum)");
    else
        snprintf(buf, cap, "sgd without momentum, which keeps no state");
}

/* A resume with another optimizer than the checkpoint's: refused where
 * their states differ (adam's moments dropped, or sgd's momentum, or a run
 * of adam from zero moments midway: a run that is neither the old one nor
 * a fresh one); adam and adamw share theirs, so the switch is taken and
 * said. Non-zero when refused. */
static int check_optimizer(const trainer *t, const char *ckpt, const st_header *h)
{
    const char *was = st_header_meta(h, META_OPTIMIZER), *now = optimizer_name(t->tg->train.optimizer);
    opt_state was_kind = file_opt_state(h), now_kind = graph_opt_state(t->tg);
    if (was_kind == now_kind) return 0;   /* adam and adamw: said by say_model_changes */
    char was_s[128], now_s[128];
    say_optimizer(was_s, sizeof was_s, was_kind, was);
    say_optimizer(now_s, sizeof now_s, now_kind, now);
    fprintf(stderr, "netc: cannot resume: %s: it was made with optimizer %s; this run has %s: it would not go on as the run it "
                    "resumes (hint: resume with the optimizer it was made with, the train section's `optimizer` or the --set that "
                    "chose it; to change optimizers on purpose, start a new run with a --checkpoint-dir of its own)\n",
            ckpt, was_s, now_s);
    return 1;
}

/* A resume of an edited model (whose parameters' names and shapes are
 * still the checkpoint's, or it would have been refused) goes on, editing
 * between runs being the user's to do; what changed is said. A checkpoint
 * that kept no identity says nothing. */
static void say_model_changes(const trainer *t, const st_header *h)
{
    run_meta m = run_meta_make(t);
    const char *model = st_header_meta(h, META_MODEL), *settings = st_header_meta(h, META_SETTINGS);
    const char *optimizer = st_header_meta(h, META_OPTIMIZER);
    if (optimizer && strcmp(optimizer, m.e[0].value))   /* check_optimizer took it: the same state */
        fprintf(stderr, "netc: note: the checkpoint was made with optimizer %s; this run goes on with %s from step %lld (the moments "
                        "carried over)\n", optimizer, m.e[0].value, (long long)t->step + 1);
    if (model && strcmp(model, m.e[1].value))
        fprintf(stderr, "netc: note: the checkpoint was made of model %s; this run trains model %s with its weights\n", model, m.e[1].value);
    if (settings && strcmp(settings, m.e[2].value))
        fprintf(stderr, "netc: note: the checkpoint was made with %s; this run has %s\n", settings[0] ? settings : "no --set or --dim",
                m.e[2].value[0] ? m.e[2].value : "no --set or --dim");
    char what[512] = "";
    size_t n = 0;
    if (st_header_meta(h, META_SOURCE)) {   /* else a checkpoint that kept no sources */
        for (uint32_t j = 3; j < m.n; j++) {   /* this run's files: edited, or not imported by the checkpoint's run */
            const char *was = st_header_meta(h, m.e[j].key), *name = j == 3 ? base_name(t->src.files[0].path) : m.e[j].key + strlen(META_IMPORT);
            if ((!was || strcmp(was, m.e[j].value)) && n < sizeof what)
                n += (size_t)snprintf(what + n, sizeof what - n, "%s%s %s", n ? ", " : "", name, was ? "edited" : "imported anew");
        }
        for (uint32_t k = 0; k < h->nmeta; k++)   /* the checkpoint's imports this run's model does not import */
            if (!strncmp(h->meta[k].key, META_IMPORT, strlen(META_IMPORT)) && !run_meta_get(&m, h->meta[k].key) && n < sizeof what)
                n += (size_t)snprintf(what + n, sizeof what - n, "%s%s no longer imported", n ? ", " : "", h->meta[k].key + strlen(META_IMPORT));
    }
    if (n)
        fprintf(stderr, "netc: note: the model's source is not the checkpoint's (%s); this run goes on with it from step %lld\n", what,
                (long long)t->step + 1);
    run_meta_free(&m);
}

/* --resume: the weights, moments and position of the checkpoint, where
 * there is one yet (a run killed before its first starts from scratch);
 * nb: the batches of an epoch. */
static int resume_from(trainer *t, const char *ckpt, int64_t nb, train_pos *pos)
{
    struct stat st;   /* there but unreadable is an error: starting afresh would replace it */
    if (lstat(ckpt, &st) != 0 && errno == ENOENT) {
        fprintf(stderr, "netc: no checkpoint in %s yet%s: starting from scratch\n", t->o->checkpoint_dir,
                t->ckpt_dir_made ? " (the directory did not exist: this run made it)" : "");
        return 0;
    }
    /* the header first: another optimizer's checkpoint may lack this one's state, which the loader would call another model */
    st_header h;
    char err[1024];
    bool has_header = safetensors_read_header(ckpt, &h, err, sizeof err) == 0;   /* else the loader says why */
    int rc = has_header && st_header_has(&h, "@train_state") && check_optimizer(t, ckpt, &h);
    if (rc == 0) rc = load_checkpoint(t, ckpt, pos);
    if (rc == 0 && pos->batch > nb) {   /* == : the epoch's steps were done, its evaluation was not */
        fprintf(stderr, "netc: cannot resume: %s: @train_state: batch %lld of an epoch of %lld batches\n", ckpt, (long long)pos->batch,
                (long long)nb);
        rc = 1;
    }
    if (rc == 0) rc = check_epochs(t, ckpt, nb, pos);
    if (rc == 0) say_resumed(t, ckpt, pos);
    /* after it, as say_lr, and only where a step is to run */
    if (rc == 0 && has_header && pos->epoch < t->o->epochs && !(t->o->max_steps && t->step >= t->o->max_steps)) say_model_changes(t, &h);
    if (has_header) st_header_free(&h);
    if (rc) return 1;
    for (uint32_t i = 0; t->gpu && i < t->tg->nparams; i++) {   /* setup_gpu uploaded the initial ones */
        ir_value v = node_of(t->tg, OP_PARAM, i);
        if (v != IR_NONE && upload_tensor(t->gs, v, &t->params[i], "parameter", t->tg->params[i].decl.name)) return 1;
    }
    return 0;
}

/* The host tensors a step's inputs are filled in (fill_data_inputs). */
static cpu_tensor *alloc_step_inputs(const ir_graph *g)
{
    cpu_tensor *inputs = nc_xcalloc(g->ninputs + 1, sizeof *inputs);
    for (uint32_t i = 0; i < g->ninputs; i++) {
        int64_t shape[NC_MAX_RANK];
        for (int k = 0; k < g->inputs[i].rank; k++) dim_is_const(&g->dims[g->inputs[i].shape[k]], &shape[k]);
        cpu_tensor_alloc(&inputs[i], g->inputs[i].dtype, g->inputs[i].rank, shape, (int64_t)1 << 34);
    }
    return inputs;
}

/* What an epoch adds up, for its summary line. */
typedef struct epoch_tally {
    int64_t epoch, first_batch, batches;   /* batches: the position in the epoch, first_batch where it resumed */
    int64_t of;                            /* the epoch's batches: more than batches where --max-steps stopped it */
    double started, loss_sum, waited;      /* waited: for the data loader */
    int64_t nloss;                         /* finite losses in loss_sum */
    bool from_start;                       /* loss_sum has the epoch's steps from its first (a checkpoint's included) */
} epoch_tally;

/* Where the run is after e's steps, for a checkpoint. */
static train_pos tally_pos(const epoch_tally *e)
{
    return (train_pos){.epoch = e->epoch, .batch = e->batches, .loss_sum = e->loss_sum, .nloss = e->nloss};
}

static void record_step(trainer *t, epoch_tally *e, const step_result *r)
{
    if (isfinite(r->loss)) e->loss_sum += r->loss, e->nloss++;
    t->curve = nc_xrealloc(t->curve, (size_t)(t->ncurve + 1) * 2 * sizeof *t->curve);
    t->curve[2 * t->ncurve] = (double)t->step, t->curve[2 * t->ncurve + 1] = r->loss;
    t->ncurve++;
}

/* The epoch's line on stderr and in the metrics, after its evaluation; el:
 * the seconds its steps took (the evaluation's left out), scored: the test
 * samples the evaluation scored. */
static int report_epoch(trainer *t, const epoch_tally *e, double el, double accuracy, double test_loss, int64_t scored,
                        double gpu_wait)
{
    /* the batches this run took: a resumed epoch's earlier ones were another run's */
    double rate = (double)((e->batches - e->first_batch) * t->o->batch) / fmax(el, 1e-9);
    double train_loss = e->nloss ? e->loss_sum / (double)e->nloss : NAN;
    /* not: resumed for the evaluation alone from a checkpoint without the epoch's losses */
    bool stepped = e->batches > (e->from_start ? 0 : e->first_batch);
    char acc_text[48] = "", gpu_text[64] = "", loss_text[48] = "-";
    if (stepped) snprintf(loss_text, sizeof loss_text, "%.4f", train_loss);
    if (t->classifier) snprintf(acc_text, sizeof acc_text, ", test accuracy %.4f", accuracy);
    if (t->gpu) snprintf(gpu_text, sizeof gpu_text, " (the GPU waited %.3f s for inputs)", gpu_wait);
    char rate_text[64] = ", no step of it in this run";   /* evaluated only: a rate of 0 would be no measure */
    const bool timed = e->batches > e->first_batch;
    if (timed) snprintf(rate_text, sizeof rate_text, ", %.1f s, %.0f samples/s", el, rate);
    /* a run stopped inside the epoch scores it too, and a resume scores it again at its end: say which this is */
    const bool partial = e->batches < e->of;
    char part_text[96] = "";
    if (partial)
        snprintf(part_text, sizeof part_text, "; --max-steps stopped it after %lld of its %lld batches", (long long)e->batches,
                 (long long)e->of);
    /* --eval-samples: the score is of part of the test set, which the line says */
    const bool part_scored = t->o->eval_samples > 0 && scored < t->test.n;
    char scored_text[64] = "";
    if (part_scored)
        snprintf(scored_text, sizeof scored_text, " (on %lld of %lld test samples)", (long long)scored,
                 (long long)t->test.n);
    fprintf(stderr, "epoch %lld: train loss %s, test loss %.4f%s%s%s, waited %.2f s for data%s%s%s\n",
            (long long)e->epoch + 1, loss_text, test_loss, acc_text, scored_text, rate_text, e->waited, gpu_text,
            t->skipped ? " (steps skipped on overflow so far: see below)" : "", part_text);
    json_t *line = json_pack("{s:I, s:I, s:f, s:f, s:f, s:f, s:I}", "epoch", (json_int_t)e->epoch + 1, "step", (json_int_t)t->step,
                             "train_loss", e->nloss ? train_loss : 0.0, "samples_per_s", rate, "test_loss", test_loss,
                             "epoch_seconds", el, "skipped_steps", (json_int_t)t->skipped);
    if (!stepped) json_object_del(line, "train_loss");   /* not 0: no step of the epoch ran here */
    if (!timed) json_object_del(line, "samples_per_s"), json_object_del(line, "epoch_seconds");   /* likewise */
    if (t->classifier) json_object_set_new(line, "test_accuracy", json_real(accuracy));
    json_object_set_new(line, "data_wait_s", json_real(e->waited));
    if (t->gpu) json_object_set_new(line, "gpu_input_wait_s", json_real(gpu_wait));
    if (part_scored) json_object_set_new(line, "test_samples", json_integer(scored));
    if (partial) {
        json_object_set_new(line, "epoch_batches_done", json_integer(e->batches));
        json_object_set_new(line, "epoch_batches", json_integer(e->of));
    }
    return metrics_line(t, line);
}

/* --save: the trained weights and the model's buffers (batch norm's
 * running statistics, which its forward pass reads), not the optimizer's
 * state, as safetensors. */
static int save_weights(trainer *t, const char *path)
{
    const ir_graph *g = t->tg;
    if (t->gpu && download_params(t)) return 1;
    uint32_t n = 0;
    st_entry *e = nc_xcalloc(g->nparams + 1, sizeof *e);
    for (uint32_t i = 0; i < g->nparams; i++)
        if (g->params[i].role == IR_ROLE_WEIGHT || g->params[i].role == IR_ROLE_BUFFER) e[n++] = (st_entry){.name = g->params[i].decl.name, .t = &t->params[i]};
    char err[1024];
    int rc = safetensors_write(path, e, n, err, sizeof err);
    if (rc) fprintf(stderr, "netc: %s\n", err);
    free(e);
    return rc ? 1 : 0;
}

/* The run's totals over its epochs, for the closing line. */
typedef struct run_tally {
    double started, waited, gpu_waited;
    int64_t samples;
} run_tally;

/* "the checkpoint, the weights and the metrics": what an interrupted run
 * writes, for its messages; "" when it writes nothing. */
static void saved_things(const trainer *t, const char *ckpt, char *buf, size_t cap)
{
    const char *what[3];
    int n = 0;
    if (ckpt[0]) what[n++] = "the checkpoint";
    if (t->o->save_path) what[n++] = "the weights";
    if (t->o->metrics_path) what[n++] = "the metrics";
    buf[0] = 0;
    for (int i = 0; i < n; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i == 0 ? "" : i + 1 == n ? " and " : ", ", what[i]);
}

/* The loop stopped by a signal after its step (or in its evaluation, which
 * is dropped: with every step of the epoch done, the resumed run evaluates
 * first). The checkpoint holds the position, so --resume goes on with the
 * next step. */
static int stop_interrupted(trainer *t, const char *ckpt, const epoch_tally *e, bool *stop)
{
    *stop = true;
    t->stopped_by = train_interrupt;
    if (t->step == t->first_step) return 0;   /* nothing new: train_loop says so */
    char what[96];
    saved_things(t, ckpt, what, sizeof what);
    fprintf(stderr, "netc: interrupted at step %lld; %s%s (%s again to quit at once)\n", (long long)t->step, what[0] ? "saving " : "",
            what[0] ? what : "nothing to save (no --checkpoint-dir, --save or --metrics)",
            t->stopped_by == SIGINT ? "press Ctrl-C" : "send the signal");
    train_pos here = tally_pos(e);
    return ckpt[0] ? save_checkpoint(t, ckpt, &here) : 0;
}

/* After an interruption's checkpoint and weights: the metrics' last line
 * and what was saved where. 0, or 1 with the reason on stderr. */
static int finish_interrupted(trainer *t, const char *ckpt)
{
    if (t->step == t->first_step) {
        fprintf(stderr, "netc: interrupted (%s) before this run's first step: nothing new to save\n", interrupt_name(t->stopped_by));
        return 0;
    }
    if (t->o->metrics_path && metrics_line(t, json_pack("{s:I, s:s}", "step", (json_int_t)t->step, "interrupted",
                                                           interrupt_name(t->stopped_by))))
        return 1;
    fprintf(stderr, "netc: stopped by %s after step %lld", interrupt_name(t->stopped_by), (long long)t->step);
    if (ckpt[0]) fprintf(stderr, "; checkpoint %s (--resume goes on with step %lld)", ckpt, (long long)t->step + 1);
    if (t->o->save_path) fprintf(stderr, "; weights %s", t->o->save_path);
    if (t->o->metrics_path) fprintf(stderr, "; metrics %s", t->o->metrics_path);
    fputc('\n', stderr);
    return 0;
}

/* One epoch's steps from e->first_batch, then its evaluation, line and
 * checkpoint. Returns non-zero on an error; *stop when --max-steps is
 * reached or a signal asked the run to stop. */
static int run_epoch(trainer *t, data_loader *dl, batch_feed *feed, cpu_tensor *inputs, const char *ckpt, epoch_tally *e,
                     run_tally *run, bool *stop)
{
    const train_opts *o = t->o;
    int64_t nb = data_loader_batches(dl), total_steps = nb * o->epochs;
    int64_t eta_steps = o->max_steps && o->max_steps < total_steps ? o->max_steps : total_steps;   /* what the ETA counts */
    bool tty = isatty(2);
    int rc = 0;
    data_batch batch;
    double w;
    e->of = nb;
    /* --max-steps checked first too: a run resumed from one stopped there takes no step more */
    while (rc == 0 && !train_interrupt && !(o->max_steps && t->step >= o->max_steps) && feed_next(feed, &batch, &w)) {
        e->waited += w;
        step_result r;
        bool more = !(o->max_steps && t->step + 1 >= o->max_steps) && t->step + 1 != t->kill_at_step && !train_interrupt;
        for (int k = 0; t->step + 1 == t->interrupt_at_step && k < t->interrupt_times; k++) raise(SIGINT);   /* lands as the step runs */
        const double lr = schedule_lr(t, total_steps);   /* this step's: the metrics line reports it with its loss */
        if (train_on_batch(t, &batch, lr, inputs, feed, more, &r)) { rc = 1; break; }
        adjust_scale(t, r.finite);
        t->step++;
        run->samples += batch.count;
        record_step(t, e, &r);
        int64_t b = e->batches;
        double el = now_s() - e->started, rate = (double)((b + 1 - e->first_batch) * o->batch) / fmax(el, 1e-9);
        double eta = (double)(eta_steps > t->step ? eta_steps - t->step : 0) * o->batch / fmax(rate, 1e-9);
        const bool last = b + 1 == nb || (o->max_steps && t->step == o->max_steps);   /* the epoch's or the run's */
        if (tty ? (b % 5 == 0 || last) : (b % 100 == 0 || last)) progress(t, e->epoch, b, nb, r.loss, rate, eta, tty);
        if (b % 10 == 0 &&
            metrics_line(t, json_pack("{s:I, s:I, s:f, s:f, s:f}", "epoch", (json_int_t)e->epoch + 1, "step", (json_int_t)t->step,
                                      "train_loss", r.loss, "samples_per_s", rate, "lr", lr)))
            rc = 1;
        e->batches++;
        train_pos here = tally_pos(e);
        if (ckpt[0] && o->checkpoint_every > 0 && t->step % o->checkpoint_every == 0 && save_checkpoint(t, ckpt, &here)) rc = 1;
        if (t->step == t->kill_at_step) raise(SIGKILL);
    }
    if (tty) fputc('\n', stderr), progress_open = 0;
    if (t->gpu && rc == 0) {   /* nothing staged outlives the epoch (a break after a look ahead) */
        char err[512];
        if (gpu_drop_staged(t->gs, err, sizeof err)) { fprintf(stderr, "netc: %s\n", err); rc = 1; }
        t->next_staged = false;
    }
    if (rc) return rc;
    if (train_interrupt) return stop_interrupted(t, ckpt, e, stop);
    run->waited += e->waited;
    double gpu_wait = t->gpu ? gpu_input_wait_seconds(t->gs) - run->gpu_waited : 0;
    run->gpu_waited += gpu_wait;
    double acc = 0, tloss = 0, el = now_s() - e->started;
    int64_t scored = 0;
    int ev = evaluate(t, &acc, &tloss, &scored);
    if (ev == EVAL_INTERRUPTED) return stop_interrupted(t, ckpt, e, stop);
    if (ev) return 1;
    if (report_epoch(t, e, el, acc, tloss, scored, gpu_wait)) return 1;
    /* stopped by --max-steps inside the epoch: a resume goes on from there */
    train_pos next = e->batches >= nb ? (train_pos){.epoch = e->epoch + 1} : tally_pos(e);
    if (ckpt[0] && save_checkpoint(t, ckpt, &next)) return 1;
    *stop = o->max_steps && t->step >= o->max_steps;
    return 0;
}

/* A run without --resume whose --checkpoint-dir holds a checkpoint would
 * lose the last run's work: a warning before any (an error under -Werror,
 * returning true). */
static bool forgotten_resume(const train_opts *o)
{
    char ckpt[4096];
    if (o->resume || !o->checkpoint_dir) return false;
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", o->checkpoint_dir);
    return access(ckpt, F_OK) == 0 &&
           diag_cli_warning(stderr, o->werror, "give --resume to continue from it",
                            "%s holds a checkpoint; this run starts from scratch and replaces it at its first", ckpt);
}

/* A cosine schedule whose total_steps ends before the run's last step
 * leaves the steps after it at min_lr (0 unless given): training that
 * changes nothing, said before it is run (an error under -Werror). */
static bool cosine_ends_early(const trainer *t, int64_t batches)
{
    const ir_train_spec *s = &t->tg->train;
    int64_t end = batches * t->o->epochs;
    if (t->o->max_steps && t->o->max_steps < end) end = t->o->max_steps;
    if (s->schedule != IR_SCHED_COSINE || !s->total_steps || s->total_steps >= end || t->step >= end) return false;
    return diag_cli_warning(stderr, t->o->werror, "raise total_steps to the run's steps, or leave it out: the schedule then spans --epochs",
                            "the cosine schedule's total_steps %lld ends before this run's %lld steps: steps %lld to %lld run at "
                            "min_lr %g", (long long)s->total_steps, (long long)end, (long long)s->total_steps + 1, (long long)end,
                            s->min_lr);
}

static int train_loop(trainer *t)
{
    const train_opts *o = t->o;
    cpu_tensor *inputs = alloc_step_inputs(t->tg);
    train_pos pos = {0};
    char ckpt[4096] = "";
    if (o->checkpoint_dir) snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", o->checkpoint_dir);   /* made by train_main */
    t->train_id = train_set_id(&t->train);
    data_loader *dl = data_loader_new(&t->train, o->batch, o->seed, true, true, 4);
    data_loader_drop_source(dl, &t->train);   /* after train_set_id, the last reader of the samples */
    int rc = o->resume ? resume_from(t, ckpt, data_loader_batches(dl), &pos) : 0;
    if (rc == 0 && o->resume && t->step > 0) metrics_keep(t, &pos);
    if (rc == 0 && cosine_ends_early(t, data_loader_batches(dl))) rc = 2;
    if (rc) data_loader_free(dl), dl = NULL;
    batch_feed feed = {.dl = dl};
    run_tally run = {.started = now_s()};
    t->first_step = t->step;
    bool stop = false;
    if (rc == 0 && o->max_steps && t->step >= o->max_steps && pos.epoch < o->epochs)   /* run_epoch takes none, then evaluates */
        fprintf(stderr, "netc: the checkpoint is at step %lld, --max-steps %lld: no steps to run\n", (long long)t->step,
                (long long)o->max_steps);
    for (int64_t epoch = pos.epoch; dl && epoch < o->epochs && rc == 0 && !stop; epoch++) {
        bool resumed = epoch == pos.epoch;
        int64_t first = resumed ? pos.batch : 0;
        data_loader_epoch(dl, epoch, first);
        epoch_tally e = {.epoch = epoch, .first_batch = first, .batches = first, .started = now_s(),
                         .from_start = first == 0 || pos.has_loss};
        if (resumed) e.loss_sum = pos.loss_sum, e.nloss = pos.nloss;
        rc = run_epoch(t, dl, &feed, inputs, ckpt, &e, &run, &stop);
    }
    if (dl) data_loader_free(dl);   /* its thread stops at once: it waits only for a free slot */
    if (rc == 0 && !t->stopped_by) {
        double el = now_s() - run.started;
        char gpu_text[64] = "";
        if (t->gpu) snprintf(gpu_text, sizeof gpu_text, " (GPU input wait %.3f s)", gpu_input_wait_seconds(t->gs));
        if (t->step == t->first_step)   /* resumed at --max-steps: a rate of 0 and a step's 0 MiB would be no measure */
            fprintf(stderr, "done: %lld step%s, none in this run: no rate or step memory to report\n", (long long)t->step,
                    t->step == 1 ? "" : "s");
        else
            fprintf(stderr, "done: %lld step%s in %.1f s (%.0f samples/s), data wait %.2f s%s, skipped steps %lld\n",
                    (long long)t->step, t->step == 1 ? "" : "s", el, (double)run.samples / fmax(el, 1e-9), run.waited, gpu_text, (long long)t->skipped);
        if (t->step == t->first_step) {}   /* the sessions held what a step would, measured nothing */
        else if (t->gpu) rc = report_gpu_memory(t);
        else report_cpu_memory(t);
    }
    if (rc == 0 && o->save_path && (!t->stopped_by || t->step > t->first_step)) rc = save_weights(t, o->save_path);
    if (rc == 0 && t->stopped_by) rc = finish_interrupted(t, ckpt);
    for (uint32_t i = 0; i < t->tg->ninputs; i++) cpu_tensor_free(&inputs[i]);
    free(inputs);
    return rc;
}

/* Whether path's directory is the directory *d (its inode), its last name put in base. */
static bool dir_of(const char *path, struct stat *d, char *base, size_t cap)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    snprintf(base, cap, "%s", slash ? slash + 1 : dir);
    if (slash) slash == dir ? (void)(dir[1] = 0) : (void)(*slash = 0);
    return stat(slash ? dir : ".", d) == 0;
}

/* Whether paths a and b name one file, there yet or not: the same name in
 * the same directory (./x and d/../x alike), or the same inode. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    char ba[4096], bb[4096];
    if (strcmp(a, b) == 0) return true;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return dir_of(a, &sa, ba, sizeof ba) && dir_of(b, &sb, bb, sizeof bb) && strcmp(ba, bb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* --save naming a file the run writes otherwise (the metrics, their loss
 * curve, the checkpoint), which the weights would replace at the end: said
 * on stderr. */
static bool save_collides(const train_opts *o, const char *svg)
{
    char ckpt[4096] = "";
    if (o->checkpoint_dir) snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", o->checkpoint_dir);
    const char *other = o->metrics_path && same_file(o->save_path, o->metrics_path) ? "--metrics"
                      : o->metrics_path && same_file(o->save_path, svg) ? "the loss curve of --metrics"
                      : ckpt[0] && same_file(o->save_path, ckpt) ? "the checkpoint of --checkpoint-dir" : NULL;
    if (other) fprintf(stderr, "netc: --save %s is the file of %s: the weights would replace it; save them elsewhere\n", o->save_path, other);
    return other != NULL;
}

/* A run killed while it wrote a checkpoint (kill -9, a node lost) leaves
 * its temporary beside it (atomic_file's NAME.tmp.PID.N), the previous
 * checkpoint whole: the temporaries of processes gone are removed, else each
 * kill would keep a model's worth of bytes (GPT-2's: 1.5 GB). */
static void sweep_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        long pid;
        unsigned n;
        int end = 0;
        if (sscanf(de->d_name, "checkpoint.safetensors.tmp.%ld.%u%n", &pid, &n, &end) != 2 || de->d_name[end] || pid <= 0 ||
            pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlink(path) == 0)
            fprintf(stderr, "netc: note: removed %s, a checkpoint that process %ld, gone, was writing (killed as it wrote; the "
                            "checkpoint before it is whole)\n", path, pid);
    }
    if (d) closedir(d);
}

/* --checkpoint-dir where netc writes: made if missing, else a directory it
 * may write in (a run would find out at its first checkpoint, an epoch lost).
 * 0, or 1 with the reason on stderr. */
static int checkpoint_dir_ready(const char *dir, bool *made)
{
    char err[1024];
    struct stat st;
    *made = stat(dir, &st) != 0;
    size_t len = strlen(dir);
    if (!*made && S_ISREG(st.st_mode) && len >= 12 && !strcmp(dir + len - 12, ".safetensors")) {   /* the checkpoint, for its directory */
        const char *slash = strrchr(dir, '/');
        fprintf(stderr, "netc: --checkpoint-dir %s is a file: give the directory that holds (or is to hold) "
                        "checkpoint.safetensors%s%.*s\n", dir, slash ? ", " : "", slash ? (int)(slash - dir + (slash == dir)) : 0, dir);
        return 1;
    }
    if (atomic_file_make_dir(dir, err, sizeof err)) {
        fprintf(stderr, "netc: --checkpoint-dir %s\n", err);
        return 1;
    }
    sweep_stale_temps(dir);
    return 0;
}

/* What the options alone say is wrong, before any file is touched: 0, or
 * 2 with the reason on stderr. */
static int check_usage(const train_opts *o)
{
    if (!o->model_path || !o->data_dir) {
        fprintf(stderr, "netc: train needs %s\n", o->model_path ? "--data: the data set's directory, or a text file"
                                                                : "a .net file and --data DIR");
        return 2;
    }
    if (o->batch <= 0 || o->epochs <= 0) {
        fprintf(stderr, "netc: --batch and --epochs must be positive\n");
        return 2;
    }
    if (o->accumulate < 0 || (o->accumulate > 1 && o->batch % o->accumulate != 0)) {
        fprintf(stderr, "netc: --accumulate %lld must divide --batch %lld (micro-batches of equal size)\n",
                (long long)o->accumulate, (long long)o->batch);
        return 2;
    }
    if (o->resume && !o->checkpoint_dir) {
        fprintf(stderr, "netc: --resume needs --checkpoint-dir (where the checkpoint to resume from lies)\n");
        return 2;
    }
    return 0;
}

/* Whether the run can write what it is asked to (checkpoints, weights,
 * metrics and their curve), before any work: the run's result would be lost
 * at its end. 0, or 1 (cannot write) or 2 (a usage error) with the reason. */
static int check_outputs(const train_opts *o, bool *ckpt_dir_made)
{
    char err[1024];
    if (o->checkpoint_dir && checkpoint_dir_ready(o->checkpoint_dir, ckpt_dir_made)) return 1;
    if (forgotten_resume(o)) return 2;
    struct stat st;
    if (o->save_path && stat(o->save_path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "netc: --save %s is a directory: give the weights a file name (%s%sweights.safetensors)\n", o->save_path,
                o->save_path, o->save_path[strlen(o->save_path) - 1] == '/' ? "" : "/");
        return 1;
    }
    if (o->save_path && atomic_file_check(o->save_path, err, sizeof err)) {   /* the weights are the run's result */
        char hint[2200];
        fprintf(stderr, "netc: --save %s%s\n", err, no_dir_hint(o->save_path, hint, sizeof hint));
        return 1;
    }
    char svg[4096];
    if (o->metrics_path && svg_path(o->metrics_path, svg, sizeof svg)) {
        fprintf(stderr, "netc: --metrics %s: the loss curve goes to NAME.svg beside it; give the metrics another name, "
                        "e.g. %.*s.jsonl\n", o->metrics_path, (int)(strlen(svg) - 4), svg);   /* m.svg: m.jsonl */
        return 2;
    }
    if (o->metrics_path && metrics_check(o->metrics_path)) return 1;
    if (o->save_path && save_collides(o, svg)) return 2;
    return 0;
}

/* The tests' stand-ins for a kill -9 and a Ctrl-C, from the environment
 * (NETC_TEST_KILL_AFTER_STEP=N; NETC_TEST_INTERRUPT=N, N,TIMES or eval). */
static void test_faults(trainer *t)
{
    const char *kill = getenv("NETC_TEST_KILL_AFTER_STEP"), *intr = getenv("NETC_TEST_INTERRUPT");
    t->kill_at_step = kill ? atoll(kill) : -1;
    t->interrupt_at_step = intr && strcmp(intr, "eval") ? atoll(intr) : -1;
    t->interrupt_times = intr && strchr(intr, ',') ? atoi(strchr(intr, ',') + 1) : 1;
    t->interrupt_in_eval = intr && !strcmp(intr, "eval");
}

/* The training and test sets: windows of text, or samples checked against
 * the model; then whether one batch fits. 0, or 1 / 2 with the reason. */
static int load_data(trainer *t)
{
    const train_opts *o = t->o;
    char err[1024];
    if (t->text) {
        int64_t window = 0;
        dim_is_const(&t->fg->dims[t->fg->inputs[0].shape[1]], &window);
        if (t->pairs) window++;   /* T tokens and, one byte on, T targets */
        if (data_load_text(o->data_dir, window, 0.05, &t->train, &t->test, err, sizeof err)) {
            fprintf(stderr, "netc: %s\n", err);
            return 1;
        }
        print_notes(&t->train);
    } else if (load_samples(t, err, sizeof err)) {
        fprintf(stderr, "netc: %s\n", err);
        return 1;
    }
    if (check_data(t)) return 1;
    if (t->classifier) t->eval_cpu_batch = eval_cpu_batch_of(t);
    if (t->train.n < o->batch) {
        const bool one = t->train.n == 1;
        fprintf(stderr, "netc: the training set has %lld sample%s, fewer than one batch of %lld: give --batch %lld%s%s\n",
                (long long)t->train.n, one ? "" : "s", (long long)o->batch, (long long)t->train.n, one ? "" : " or less",
                o->accumulate > 1 && !one ? " (a multiple of --accumulate)" : "");
        return 2;
    }
    return 0;
}

/* The loop with Ctrl-C and SIGTERM caught (before it, nothing is lost by
 * their default action), the metrics closed and the loss curve drawn; a run
 * a signal stopped returns 128 + the signal, as a shell reports it. */
static int train_caught(trainer *t)
{
    const train_opts *o = t->o;
    interrupt_guard guard = {0};
    interrupt_catch(&guard);
    int rc = train_loop(t);
    if (t->metrics && fclose(t->metrics) != 0 && rc == 0) {
        fprintf(stderr, "netc: cannot write --metrics %s: %s\n", o->metrics_path, strerror(errno));
        rc = 1;
    }
    if (rc == 0) rc = write_svg(t, o->metrics_path);
    interrupt_release(&guard);
    if (rc == 0 && t->stopped_by) rc = 128 + t->stopped_by;
    return rc;
}

static void trainer_free(trainer *t)
{
    gpu_session_free(t->es);   /* first: it may live in the step's arena */
    gpu_session_free(t->gs);
    for (uint32_t i = 0; t->tg && t->params && i < t->tg->nparams; i++) cpu_tensor_free(&t->params[i]);
    free(t->params);
    cpu_pool_free(&t->pool);
    cpu_pool_free(&t->eval_pool);
    free(t->curve);
    free(t->metrics_kept);
    free(t->stage_buf);
    for (int k = 0; k < 2; k++) {
        nrt_module_data *m = k ? &t->fm : &t->tm;
        for (uint32_t i = 0; i < m->nimages; i++) free(m->images[i].data);
        free(m->images);
        nrt_program_free(&m->program);
    }
    data_set_free(&t->train);
    data_set_free(&t->test);
    ir_graph_free(t->tg);
    ir_graph_free(t->fg);
    ir_graph_free(t->lg);
    src_free(&t->src);
}

int train_main(const train_opts *o)
{
    bool ckpt_dir_made = false;
    int rc = check_usage(o);
    if (rc == 0) rc = check_outputs(o, &ckpt_dir_made);
    if (rc) return rc;
    trainer t = {.o = o, .ckpt_dir_made = ckpt_dir_made};
    test_faults(&t);
    rc = build_graphs(&t);
    if (rc == 0 && loss_chunk_warnings(o->loss_slices, &t.loss_tally, o->werror, stderr)) rc = 2;
    if (rc == 0) rc = load_data(&t);
    if (rc == 0) rc = init_params(&t);
    if (rc == 0) rc = setup_gpu(&t);
    if (rc == 0) rc = train_caught(&t);
    trainer_free(&t);
    return rc;
}
