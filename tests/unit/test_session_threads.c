/* test_session_threads.c - netrt.h's promise on threads: different sessions
 * may run at once, each on its own thread, and a session may move from one
 * thread to another between calls. THREADS workers each create a session
 * of a small model (its forward pass, and its training step), run steps
 * with inputs of their own, hand the session to another thread that never
 * called the library (the GPU's context is current per thread: each call
 * must make it current itself), run more steps there and free it. Every
 * output and the parameters at the end must be the bits the same work gives
 * on one thread, session after session. On the CPU, and on the GPU where
 * one (or the mock, tests/mockgpu, whose calls from several threads are
 * serialised but interleaved as the threads make them) is usable. The
 * threaded runs go first, with an empty NVRTC cache: the sessions all ask
 * for the kernels at once. Then, on the CPU, sessions of a wider model
 * whose runs each spread their work over a crew of their own, at once
 * (check_crews). */
#include "cpu_kernels.h"
#include "cuda_emit.h"
#include "driver.h"
#include "module.h"
#include "netrt.h"

#include "test_util.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { THREADS = 4, STEPS = 6, BATCH = 5, IN = 16, HID = 32, OUT = 8, MAX_VALUES = 4096 };

static const char *source =
    "model mt(x: f32[B, 16]) -> (y: f32[B, 8], h: f32[B, 32]) {\n"
    "  param w1: f32[16, 32] = xavier\n"
    "  param b1: f32[32] = zeros\n"
    "  param w2: f32[32, 8] = xavier\n"
    "  h = gelu(x @ w1 + b1)\n"
    "  return h @ w2, h\n"
    "}\n"
    "train mt(t: f32[B, 8]) {\n"
    "  loss = mean(square(y - t))\n"
    "  optimizer adam(lr: 0.01)\n"
    "}\n";

static char fwd_path[] = "/tmp/netc_threads_XXXXXX", train_path[] = "/tmp/netc_threads_XXXXXX";
static char fwd_cuda[] = "/tmp/netc_threads_cu_XXXXXX", train_cuda[] = "/tmp/netc_threads_cu_XXXXXX";

/* What one worker's session gave: each step's outputs, then the parameters. */
typedef struct record {
    float v[MAX_VALUES];
    int n;
    bool failed;
    char why[1100];
} record;

typedef struct worker {
    const nrt_module *m;
    nrt_device dev;
    bool train;
    int id;                    /* picks the seed and the inputs */
    nrt_session *s;
    record rec;
} worker;

static void fail(record *r, const char *what, const nrt_error *e)
{
    if (!r->failed) snprintf(r->why, sizeof r->why, "%s: %s", what, e->message);
    r->failed = true;
}

static void keep(record *r, const float *v, int n)
{
    for (int i = 0; i < n && r->n < MAX_VALUES; i++) r->v[r->n++] = v[i];
}

/* A value of the worker's inputs: another for each worker, step and element. */
static float input_value(int id, int step, int i, int salt)
{
    uint32_t x = (uint32_t)(id * 7919 + step * 104729 + i * 31 + salt * 65537) * 2654435761u;
    return (float)((x >> 8) % 2001) / 1000.0f - 1.0f;
}

static void create_session(worker *w)
{
    nrt_session_opts o = nrt_session_defaults();
    const char *b[] = {"B"};
    const int64_t bv[] = {BATCH};
    o.device = w->dev, o.dim_names = b, o.dim_values = bv, o.ndims = 1, o.seed = 100 + (uint64_t)w->id;
    nrt_error e;
    if (nrt_session_create(w->m, &o, &w->s, &e) != NRT_OK) fail(&w->rec, "nrt_session_create", &e), w->s = NULL;
}

static void set_inputs(worker *w, int step)
{
    nrt_error e;
    float x[BATCH * IN], t[BATCH * OUT];
    const int64_t xs[] = {BATCH, IN}, ts[] = {BATCH, OUT};
    for (int i = 0; i < BATCH * IN; i++) x[i] = input_value(w->id, step, i, 0);
    for (int i = 0; i < BATCH * OUT; i++) t[i] = input_value(w->id, step, i, 1);
    if (nrt_session_set_input(w->s, "x", NRT_F32, 2, xs, x, &e) != NRT_OK) return fail(&w->rec, "set x", &e);
    if (!w->train) return;
    float lr = 0.01f, bias1 = 1.0f - powf(0.9f, (float)(step + 1)), bias2 = 1.0f - powf(0.999f, (float)(step + 1));
    if (nrt_session_set_input(w->s, "t", NRT_F32, 2, ts, t, &e) != NRT_OK ||
        nrt_session_set_input(w->s, "@lr", NRT_F32, 0, NULL, &lr, &e) != NRT_OK ||
        nrt_session_set_input(w->s, "@bias1", NRT_F32, 0, NULL, &bias1, &e) != NRT_OK ||
        nrt_session_set_input(w->s, "@bias2", NRT_F32, 0, NULL, &bias2, &e) != NRT_OK)
        fail(&w->rec, "set the step's inputs", &e);
}

static void get_outputs(worker *w)
{
    nrt_error e;
    float y[BATCH * OUT], h[BATCH * HID];
    if (nrt_session_get_output(w->s, "y", y, sizeof y, &e) != NRT_OK) return fail(&w->rec, "get y", &e);
    if (nrt_session_get_output(w->s, "h", h, sizeof h, &e) != NRT_OK) return fail(&w->rec, "get h", &e);
    keep(&w->rec, y, BATCH * OUT);
    keep(&w->rec, h, BATCH * HID);
}

static void run(worker *w)
{
    nrt_error e;
    if (nrt_session_run(w->s, &e) != NRT_OK) fail(&w->rec, "nrt_session_run", &e);
}

static void run_steps(worker *w, int from, int to)
{
    for (int step = from; step < to && !w->rec.failed; step++) {
        set_inputs(w, step);
        if (!w->rec.failed) run(w);
        if (!w->rec.failed) get_outputs(w);
    }
}

/* The parameters (the optimizer's state among them). */
static void get_params(worker *w)
{
    nrt_error e;
    for (int i = 0; !w->rec.failed && i < nrt_module_num_params(w->m); i++) {
        nrt_tensor_info info;
        if (nrt_module_param(w->m, i, &info) != NRT_OK) break;
        int64_t n = 1;
        for (int k = 0; k < info.rank; k++) n *= info.shape[k];
        float *p = calloc((size_t)n, sizeof *p);
        if (nrt_session_get_param(w->s, info.name, p, (size_t)n * sizeof *p, &e) != NRT_OK) fail(&w->rec, info.name, &e);
        keep(&w->rec, p, (int)n);
        free(p);
    }
}

/* A worker's work in phases, each begun on a thread that has not called
 * the library before (in the threaded runs), by another call each time:
 * every call that reaches the GPU must make the context current itself. */
static void phase_create(worker *w) { create_session(w), run_steps(w, 0, 2); }
static void phase_outputs(worker *w) { get_outputs(w); }                  /* the last run's, again */
static void phase_rerun(worker *w) { run(w), get_outputs(w); }            /* the inputs as they were set */
static void phase_steps(worker *w) { run_steps(w, 2, STEPS); }
static void phase_params(worker *w) { get_params(w); }
static void phase_free(worker *w) { nrt_session_free(w->s), w->s = NULL; }
static void (*const phases[])(worker *) = {phase_create, phase_outputs, phase_rerun, phase_steps, phase_params, phase_free};
enum { PHASES = sizeof phases / sizeof phases[0], VALUES_PER_RUN = BATCH * (OUT + HID), RUNS = STEPS + 1 };

typedef struct phase_job { worker *w; int phase; } phase_job;

static void *phase_thread(void *p)
{
    phase_job *j = p;
    if (j->w->s || j->phase == 0) phases[j->phase](j->w);
    return NULL;
}

/* Each phase on THREADS new threads at once, the sessions handed round:
 * the thread that runs a session's phase is not the one that ran its last. */
static void run_threaded(worker *w)
{
    for (int p = 0; p < PHASES; p++) {
        pthread_t t[THREADS];
        phase_job j[THREADS];
        for (int i = 0; i < THREADS; i++) {
            j[i] = (phase_job){&w[(i + p) % THREADS], p};
            CHECK(pthread_create(&t[i], NULL, phase_thread, &j[i]) == 0);
        }
        for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    }
}

static void run_serial(worker *w)
{
    for (int i = 0; i < THREADS; i++)
        for (int p = 0; p < PHASES; p++) {
            phase_job j = {&w[i], p};
            phase_thread(&j);
        }
}

/* false when the device has no session here (no GPU): the case is skipped */
static bool check_case(const nrt_module *m, nrt_device dev, bool train)
{
    static worker threaded[THREADS], serial[THREADS];
    for (int i = 0; i < THREADS; i++) {
        threaded[i] = (worker){.m = m, .dev = dev, .train = train, .id = i};
        serial[i] = threaded[i];
    }
    run_threaded(threaded);
    const char *what = dev == NRT_DEVICE_CPU ? "cpu" : "gpu";
    if (dev == NRT_DEVICE_GPU && threaded[0].rec.failed && strstr(threaded[0].rec.why, "nrt_session_create")) {
        printf("no GPU session (%s): the GPU cases are skipped\n", threaded[0].rec.why);
        return false;
    }
    run_serial(serial);
    for (int i = 0; i < THREADS; i++) {
        const record *a = &threaded[i].rec, *b = &serial[i].rec;
        if (a->failed || b->failed) {
            fprintf(stderr, "%s %s worker %d: %s\n", what, train ? "train" : "forward", i, a->failed ? a->why : b->why);
            CHECK(!a->failed && !b->failed);
            continue;
        }
        /* the optimizer keeps two moments of each parameter */
        CHECK(a->n == b->n && a->n == (RUNS + 1) * VALUES_PER_RUN + (train ? 3 : 1) * (IN * HID + HID + HID * OUT));
        int differ = 0, first = -1;
        for (int k = 0; k < a->n && k < b->n; k++)
            if (!same_bits(a->v[k], b->v[k])) differ++, first = first < 0 ? k : first;
        if (differ)
            fprintf(stderr, "%s %s worker %d: %d of %d values differ from one thread's, the first at %d: %.9g, not %.9g\n", what,
                    train ? "train" : "forward", i, differ, a->n, first, a->v[first], b->v[first]);
        CHECK(differ == 0);
    }
    /* the workers' own inputs and seeds: a mix-up of sessions shows */
    CHECK(threaded[0].rec.n > 0 && !same_bits(threaded[0].rec.v[0], threaded[1].rec.v[0]));
    return true;
}

/* Sessions that each spread their runs over a crew of their own, at once:
 * NETC_CPU_THREADS=3 and the split's load gate pretended open, so every
 * session's chains (h and Adam's updates: 8 and 32 tiles) and products (x @ w1
 * in two slabs) run on its own workers while three other sessions run
 * theirs. The outputs of each step and the trained w2 must be the bits one
 * thread gives. Small enough for ThreadSanitizer (scripts/tsan.sh runs this
 * test), where crews of several sessions meet. */
enum { WIDE_B = 64, WIDE_IN = 256, WIDE_HID = 512, WIDE_OUT = 64, WIDE_STEPS = 3 };

static const char *wide_source =
    "model wide(x: f32[B, 256]) -> (y: f32[B, 64]) {\n"
    "  param w1: f32[256, 512] = xavier\n"
    "  param b1: f32[512] = zeros\n"
    "  param w2: f32[512, 64] = xavier\n"
    "  return gelu(x @ w1 + b1) @ w2\n"
    "}\n"
    "train wide(t: f32[B, 64]) {\n"
    "  loss = mean(square(y - t))\n"
    "  optimizer adam(lr: 0.01)\n"
    "}\n";

typedef struct wide_worker {
    const nrt_module *m;
    int id;
    float y[WIDE_STEPS][WIDE_B * WIDE_OUT];
    float w2[WIDE_HID * WIDE_OUT];
    record rec;                /* failed and why only */
} wide_worker;

static bool wide_step(wide_worker *w, nrt_session *s, int step, nrt_error *e)
{
    const int64_t xs[] = {WIDE_B, WIDE_IN}, ts[] = {WIDE_B, WIDE_OUT};
    float xw[WIDE_B * WIDE_IN], tw[WIDE_B * WIDE_OUT];
    for (int i = 0; i < WIDE_B * WIDE_IN; i++) xw[i] = input_value(w->id, step, i, 2);
    for (int i = 0; i < WIDE_B * WIDE_OUT; i++) tw[i] = input_value(w->id, step, i, 3);
    float lr = 0.01f, bias1 = 1.0f - powf(0.9f, (float)(step + 1)), bias2 = 1.0f - powf(0.999f, (float)(step + 1));
    return nrt_session_set_input(s, "x", NRT_F32, 2, xs, xw, e) == NRT_OK &&
           nrt_session_set_input(s, "t", NRT_F32, 2, ts, tw, e) == NRT_OK &&
           nrt_session_set_input(s, "@lr", NRT_F32, 0, NULL, &lr, e) == NRT_OK &&
           nrt_session_set_input(s, "@bias1", NRT_F32, 0, NULL, &bias1, e) == NRT_OK &&
           nrt_session_set_input(s, "@bias2", NRT_F32, 0, NULL, &bias2, e) == NRT_OK && nrt_session_run(s, e) == NRT_OK &&
           nrt_session_get_output(s, "y", w->y[step], sizeof w->y[step], e) == NRT_OK;
}

static void *wide_work(void *p)
{
    wide_worker *w = p;
    nrt_session_opts o = nrt_session_defaults();
    const char *b[] = {"B"};
    const int64_t bv[] = {WIDE_B};
    o.device = NRT_DEVICE_CPU, o.dim_names = b, o.dim_values = bv, o.ndims = 1, o.seed = 200 + (uint64_t)w->id;
    nrt_session *s = NULL;
    nrt_error e;
    bool ok = nrt_session_create(w->m, &o, &s, &e) == NRT_OK;
    for (int step = 0; ok && step < WIDE_STEPS; step++) ok = wide_step(w, s, step, &e);
    ok = ok && nrt_session_get_param(s, "w2", w->w2, sizeof w->w2, &e) == NRT_OK;
    if (!ok) fail(&w->rec, "wide session", &e);
    nrt_session_free(s);
    return NULL;
}

static void check_crews(const nrt_module *m)
{
    static wide_worker threaded[THREADS], serial[THREADS];
    const char *saved = getenv("NETC_CPU_THREADS");
    char *old = saved ? strdup(saved) : NULL;
    setenv("NETC_CPU_THREADS", "3", 1);
    cpu_split_pretend(0, CPU_BLAS_REAL);
    const int64_t shared = cpu_split_shared();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        threaded[i] = (wide_worker){.m = m, .id = i};
        serial[i] = threaded[i];
        CHECK(pthread_create(&t[i], NULL, wide_work, &threaded[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    const int64_t shared_threaded = cpu_split_shared() - shared;
    for (int i = 0; i < THREADS; i++) wide_work(&serial[i]);
    cpu_split_pretend(-1, CPU_BLAS_REAL);
    if (old) setenv("NETC_CPU_THREADS", old, 1);
    else unsetenv("NETC_CPU_THREADS");
    free(old);
    /* each session's steps split their products, where the BLAS may be called from several threads */
    if (cpu_gemm_split_rows() > 0 && shared_threaded < THREADS * WIDE_STEPS)
        fprintf(stderr, "crews: %lld kernels shared their work out, not %d or more\n", (long long)shared_threaded, THREADS * WIDE_STEPS);
    CHECK(cpu_gemm_split_rows() == 0 || shared_threaded >= THREADS * WIDE_STEPS);
    for (int i = 0; i < THREADS; i++) {
        const wide_worker *a = &threaded[i], *b = &serial[i];
        if (a->rec.failed || b->rec.failed) {
            fprintf(stderr, "crews worker %d: %s\n", i, a->rec.failed ? a->rec.why : b->rec.why);
            CHECK(!a->rec.failed && !b->rec.failed);
            continue;
        }
        int differ = 0;
        for (int k = 0; k < WIDE_STEPS; k++)
            for (int j = 0; j < WIDE_B * WIDE_OUT; j++) differ += !same_bits(a->y[k][j], b->y[k][j]);
        for (int j = 0; j < WIDE_HID * WIDE_OUT; j++) differ += !same_bits(a->w2[j], b->w2[j]);
        if (differ) fprintf(stderr, "crews worker %d: %d values differ from one thread's\n", i, differ);
        CHECK(differ == 0);
    }
    CHECK(!same_bits(threaded[0].y[0][0], threaded[1].y[0][0]));   /* the workers' own inputs and seeds */
}

int main(void)
{
    if (!write_module_file("threads.net", source, false, fwd_path, fwd_cuda) || !write_module_file("threads.net", source, true, train_path, train_cuda)) {
        fprintf(stderr, "cannot build the test modules\n");
        return 1;
    }
    char sources[128], cache[] = "/tmp/netc_threads_cache_XXXXXX";
    snprintf(sources, sizeof sources, "%s:%s", fwd_cuda, train_cuda);
    setenv("NETC_MOCK_CUDA_SOURCE", sources, 1);   /* the mock GPU's kernels */
    CHECK(mkdtemp(cache) != NULL);
    setenv("NETC_CACHE_DIR", cache, 1);            /* empty: the threads' sessions compile at once */
    nrt_module *fwd = NULL, *train = NULL;
    nrt_error e;
    CHECK(nrt_module_load(fwd_path, &fwd, &e) == NRT_OK);
    CHECK(nrt_module_load(train_path, &train, &e) == NRT_OK);
    if (fwd && train) {
        check_case(fwd, NRT_DEVICE_CPU, false);
        check_case(train, NRT_DEVICE_CPU, true);
        if (check_case(fwd, NRT_DEVICE_GPU, false)) check_case(train, NRT_DEVICE_GPU, true);
    }
    char wide_path[] = "/tmp/netc_threads_XXXXXX", wide_cuda[] = "/tmp/netc_threads_cu_XXXXXX";
    nrt_module *wide = NULL;
    CHECK(write_module_file("wide.net", wide_source, true, wide_path, wide_cuda));
    CHECK(nrt_module_load(wide_path, &wide, &e) == NRT_OK);
    if (wide) check_crews(wide);
    nrt_module_free(wide);
    unlink(wide_path), unlink(wide_cuda);
    nrt_module_free(fwd);
    nrt_module_free(train);
    unlink(fwd_path), unlink(train_path), unlink(fwd_cuda), unlink(train_cuda);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    CHECK(system(cmd) == 0);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
