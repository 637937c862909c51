/* test_api_misuse.c - netrt.h as an embedding program can get it wrong:
 * NULL for every pointer, options out of range, a dim bound twice, dims
 * whose products overflow or differences go negative, calls out of order,
 * bool bytes other than 0 and 1, outputs read after the input or parameter
 * they are has changed (the value the run read, on both devices), a result
 * over the CPU's memory limit. Each gets the
 * status netrt.h documents and a message, never a crash (run under ASan in
 * CI), and the CPU and the GPU the same answer. Sessions created on several
 * threads at once all get the device one alone gets. The GPU part runs where
 * a GPU (or the mock, tests/mockgpu) is usable. */
#include "cuda_emit.h"
#include "driver.h"
#include "module.h"
#include "netrt.h"

#include "test_util.h"
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *source =
    "model prod(x: f32[B, T]) -> (y: f32[B * T], s: f32[B]) {\n"
    "  param w: f32[1] = ones\n"
    "  return reshape(x, [B * T]) * w, sum(x, axis: 1)\n"
    "}\n";

/* Outputs that are an input and a parameter themselves; one of T - 2
 * columns; bools as numbers. */
static const char *ident_source =
    "model ident(x: f32[B, T], m: bool[B]) -> (y: f32[B, T], v: f32[2], z: f32[B, T - 2], k: f32[B]) {\n"
    "  param w: f32[2] = ones\n"
    "  return x, w, slice(x, axis: 1, start: 0, end: T - 2), f32(m)\n"
    "}\n";

/* Each module and its CUDA source, for the mock GPU (mkstemp templates). */
static char module_path[] = "/tmp/netc_api_misuse_XXXXXX", ident_path[] = "/tmp/netc_api_misuse_XXXXXX";
static char cuda_path[] = "/tmp/netc_api_misuse_cu_XXXXXX", ident_cuda_path[] = "/tmp/netc_api_misuse_cu_XXXXXX";

/* A module a case compiles for itself: its files, and the mock GPU's list
 * of kernel sources as it was before this one's was added to it. */
typedef struct own_module {
    char path[32], cuda[32];
    char sources_before[128];
    nrt_module *m;
} own_module;

/* Compile text (its training step where train) and load it; the mock GPU
 * finds its kernels through NETC_MOCK_CUDA_SOURCE. */
static bool own_module_load(own_module *om, const char *text, bool train)
{
    nrt_error e;
    snprintf(om->path, sizeof om->path, "/tmp/netc_api_misuse_XXXXXX");
    snprintf(om->cuda, sizeof om->cuda, "/tmp/netc_api_misuse_cu_XXXXXX");
    snprintf(om->sources_before, sizeof om->sources_before, "%s", getenv("NETC_MOCK_CUDA_SOURCE"));
    om->m = NULL;
    if (!write_module_file("api.net", text, train, om->path, om->cuda)) return false;
    char sources[192];
    snprintf(sources, sizeof sources, "%s:%s", om->sources_before, om->cuda);
    setenv("NETC_MOCK_CUDA_SOURCE", sources, 1);
    return nrt_module_load(om->path, &om->m, &e) == NRT_OK;
}

static void own_module_free(own_module *om)
{
    nrt_module_free(om->m);
    setenv("NETC_MOCK_CUDA_SOURCE", om->sources_before, 1);
    unlink(om->path);
    unlink(om->cuda);
}

/* st is want, and the message says so (contains what) */
static bool refused(nrt_status st, const nrt_error *e, nrt_status want, const char *what)
{
    if (st == want && e->status == want && strstr(e->message, what)) return true;
    fprintf(stderr, "  got status %d (%s), want %d with '%s'\n", st, e->message, want, what);
    return false;
}

static nrt_status create(const nrt_module *m, nrt_device dev, int n, const char *const *names, const int64_t *values,
                         nrt_session **s, nrt_error *e)
{
    nrt_session_opts o = nrt_session_defaults();
    o.device = dev, o.dim_names = names, o.dim_values = values, o.ndims = n;
    return nrt_session_create(m, &o, s, e);
}

static void check_module_nulls(void)
{
    nrt_error e;
    nrt_module *m = (nrt_module *)&e;
    CHECK(refused(nrt_module_load(NULL, &m, &e), &e, NRT_ERR_ARGUMENT, "path is NULL"));
    CHECK(m == NULL);
    CHECK(refused(nrt_module_load(module_path, NULL, &e), &e, NRT_ERR_ARGUMENT, "out is NULL"));
    CHECK(refused(nrt_module_load_entry(module_path, "forward", NULL, &e), &e, NRT_ERR_ARGUMENT, "out is NULL"));
    /* as nrt_module_load, *out is NULL after any refusal (it was left as it was) */
    m = (nrt_module *)&e;
    CHECK(refused(nrt_module_load_entry(NULL, "forward", &m, &e), &e, NRT_ERR_ARGUMENT, "path is NULL"));
    CHECK(m == NULL);
    CHECK(nrt_module_num_inputs(NULL) == 0 && nrt_module_num_outputs(NULL) == 0 && nrt_module_num_params(NULL) == 0);
    CHECK(nrt_module_num_dims(NULL) == 0 && nrt_module_num_steps(NULL) == 0);
    CHECK(nrt_module_dim_name(NULL, 0) == NULL && nrt_module_input_dim(NULL, 0, 0) == NULL);
    CHECK(strcmp(nrt_dtype_name((nrt_dtype)99), "?") == 0 && nrt_dtype_size((nrt_dtype)99) == 0);
    CHECK(strcmp(nrt_dtype_name((nrt_dtype)-1), "?") == 0 && nrt_dtype_size((nrt_dtype)-1) == 0);
    nrt_tensor_info info;
    CHECK(nrt_module_input(NULL, 0, &info) == NRT_ERR_ARGUMENT);
    CHECK(nrt_module_output(NULL, 0, &info) == NRT_ERR_ARGUMENT);
    CHECK(nrt_module_param(NULL, 0, &info) == NRT_ERR_ARGUMENT);
    CHECK(nrt_module_load(module_path, &m, &e) == NRT_OK);
    CHECK(nrt_module_input(m, 0, NULL) == NRT_ERR_ARGUMENT);
    CHECK(nrt_module_output(m, 0, NULL) == NRT_ERR_ARGUMENT);
    CHECK(nrt_module_param(m, 0, NULL) == NRT_ERR_ARGUMENT);
    nrt_module_free(m);
    nrt_module_free(NULL);
    nrt_session_free(NULL);
}

static void check_create(const nrt_module *m, const nrt_module *ident)
{
    nrt_error e;
    nrt_session *s = (nrt_session *)&e;
    const char *bt[] = {"B", "T"};
    const int64_t small[] = {2, 3};
    CHECK(refused(nrt_session_create(NULL, NULL, &s, &e), &e, NRT_ERR_ARGUMENT, "m is NULL"));
    CHECK(s == NULL);
    CHECK(refused(nrt_session_create(m, NULL, NULL, &e), &e, NRT_ERR_ARGUMENT, "out is NULL"));
    CHECK(refused(create(m, NRT_DEVICE_CPU, 2, NULL, small, &s, &e), &e, NRT_ERR_ARGUMENT, "dim_names is NULL"));
    CHECK(refused(create(m, NRT_DEVICE_CPU, 2, bt, NULL, &s, &e), &e, NRT_ERR_ARGUMENT, "dim_values is NULL"));
    CHECK(refused(create(m, NRT_DEVICE_CPU, -1, bt, small, &s, &e), &e, NRT_ERR_ARGUMENT, "ndims is -1"));
    const char *hole[] = {"B", NULL};
    CHECK(refused(create(m, NRT_DEVICE_CPU, 2, hole, small, &s, &e), &e, NRT_ERR_ARGUMENT, "dim_names[1] is NULL"));
    /* the second B used to win silently */
    const char *twice[] = {"B", "T", "B"};
    const int64_t tv[] = {2, 3, 8};
    CHECK(refused(create(m, NRT_DEVICE_CPU, 3, twice, tv, &s, &e), &e, NRT_ERR_ARGUMENT, "dim B is bound twice"));
    CHECK(s == NULL);
    /* a device past the enum used to run on the CPU */
    CHECK(refused(create(m, (nrt_device)7, 2, bt, small, &s, &e), &e, NRT_ERR_ARGUMENT, "device 7"));
    /* was up to the driver: "cuDeviceGet failed", or "no NVIDIA driver" where there is none */
    nrt_session_opts o = nrt_session_defaults();
    o.device = NRT_DEVICE_GPU, o.gpu_index = -1, o.dim_names = bt, o.dim_values = small, o.ndims = 2;
    CHECK(refused(nrt_session_create(m, &o, &s, &e), &e, NRT_ERR_ARGUMENT, "gpu_index -1"));
    /* each dim in range, B*T not: output y's shape used to come back unset */
    const int64_t huge[] = {(int64_t)1 << 40, (int64_t)1 << 40};
    CHECK(refused(create(m, NRT_DEVICE_CPU, 2, bt, huge, &s, &e), &e, NRT_ERR_ARGUMENT,
                  "at B = 1099511627776, T = 1099511627776 a tensor of f32[B, T] has no size"));
    CHECK(s == NULL);
    /* T - 2 < 0: output_info used to give z's shape uninitialised */
    const int64_t narrow[] = {2, 1};
    CHECK(refused(create(ident, NRT_DEVICE_CPU, 2, bt, narrow, &s, &e), &e, NRT_ERR_ARGUMENT,
                  "at B = 2, T = 1 a tensor of f32[B, T - 2] has no size"));
    CHECK(s == NULL);
    /* B*T past a GPU buffer's 2^40 elements: the caller's sizes, refused
     * before any GPU is looked for, not a GPU that fails (NRT_ERR_DEVICE,
     * "cannot use the GPU") */
    const int64_t wide[] = {(int64_t)1 << 40, 2};
    CHECK(refused(create(m, NRT_DEVICE_GPU, 2, bt, wide, &s, &e), &e, NRT_ERR_ARGUMENT,
                  "would hold 2199023255552 elements at these dims: more than a buffer's 2^40"));
    CHECK(s == NULL);
    nrt_session_free(s);
}

static void check_session_nulls(nrt_session *s)
{
    nrt_error e;
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6];
    const int64_t shape[] = {2, 3}, one[] = {1};
    nrt_tensor_info info;
    CHECK(refused(nrt_session_set_input(NULL, "x", NRT_F32, 2, shape, x, &e), &e, NRT_ERR_ARGUMENT, "s is NULL"));
    CHECK(refused(nrt_session_set_input(s, NULL, NRT_F32, 2, shape, x, &e), &e, NRT_ERR_ARGUMENT, "name is NULL"));
    CHECK(refused(nrt_session_set_input(s, "x", NRT_F32, 2, NULL, x, &e), &e, NRT_ERR_ARGUMENT, "shape is NULL"));
    CHECK(refused(nrt_session_set_input(s, "x", NRT_F32, 2, shape, NULL, &e), &e, NRT_ERR_ARGUMENT, "data is NULL"));
    CHECK(refused(nrt_session_run(NULL, &e), &e, NRT_ERR_ARGUMENT, "s is NULL"));
    CHECK(refused(nrt_session_input_info(NULL, "x", &info, &e), &e, NRT_ERR_ARGUMENT, "s is NULL"));
    CHECK(refused(nrt_session_input_info(s, NULL, &info, &e), &e, NRT_ERR_ARGUMENT, "name is NULL"));
    CHECK(refused(nrt_session_input_info(s, "x", NULL, &e), &e, NRT_ERR_ARGUMENT, "info is NULL"));
    int64_t bound;
    CHECK(refused(nrt_session_input_bound(NULL, "x", &bound, &e), &e, NRT_ERR_ARGUMENT, "s is NULL"));
    CHECK(refused(nrt_session_input_bound(s, NULL, &bound, &e), &e, NRT_ERR_ARGUMENT, "name is NULL"));
    CHECK(refused(nrt_session_input_bound(s, "x", NULL, &e), &e, NRT_ERR_ARGUMENT, "bound is NULL"));
    CHECK(refused(nrt_session_output_info(s, NULL, &info, &e), &e, NRT_ERR_ARGUMENT, "name is NULL"));
    CHECK(refused(nrt_session_output_info(s, "y", NULL, &e), &e, NRT_ERR_ARGUMENT, "info is NULL"));
    CHECK(refused(nrt_session_get_output(NULL, "y", y, sizeof y, &e), &e, NRT_ERR_ARGUMENT, "s is NULL"));
    CHECK(refused(nrt_session_get_output(s, NULL, y, sizeof y, &e), &e, NRT_ERR_ARGUMENT, "name is NULL"));
    CHECK(refused(nrt_session_get_output(s, "y", NULL, sizeof y, &e), &e, NRT_ERR_ARGUMENT, "data is NULL"));
    CHECK(refused(nrt_session_set_param(s, NULL, NRT_F32, 1, one, x, &e), &e, NRT_ERR_ARGUMENT, "name is NULL"));
    CHECK(refused(nrt_session_set_param(s, "w", NRT_F32, 1, NULL, x, &e), &e, NRT_ERR_ARGUMENT, "shape is NULL"));
    CHECK(refused(nrt_session_set_param(s, "w", NRT_F32, 1, one, NULL, &e), &e, NRT_ERR_ARGUMENT, "data is NULL"));
    CHECK(refused(nrt_session_get_param(s, NULL, x, 4, &e), &e, NRT_ERR_ARGUMENT, "name is NULL"));
    CHECK(refused(nrt_session_get_param(s, "w", NULL, 4, &e), &e, NRT_ERR_ARGUMENT, "data is NULL"));
    CHECK(refused(nrt_session_load_weights(s, NULL, &e), &e, NRT_ERR_ARGUMENT, "path is NULL"));
    /* used to write a file named "(null)" and succeed */
    CHECK(refused(nrt_session_save_weights(s, NULL, &e), &e, NRT_ERR_ARGUMENT, "path is NULL"));
    CHECK(access("(null)", F_OK) != 0);
    CHECK(refused(nrt_session_profile(NULL, 1, NULL, 0, &e), &e, NRT_ERR_ARGUMENT, "s is NULL"));
    CHECK(nrt_session_device(NULL) == NULL);
    CHECK(nrt_session_arena_bytes(NULL) == 0 && nrt_session_device_bytes(NULL) == 0);
}

/* Out of order, then in order: the outputs of a run and nothing before. */
static void check_order(nrt_session *s)
{
    nrt_error e;
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0}, sums[2] = {0};
    const int64_t shape[] = {2, 3};
    CHECK(refused(nrt_session_get_output(s, "y", y, sizeof y, &e), &e, NRT_ERR_STATE, "nrt_session_run first"));
    CHECK(refused(nrt_session_run(s, &e), &e, NRT_ERR_STATE, "input x was not set"));
    CHECK(refused(nrt_session_get_output(s, "y", y, sizeof y, &e), &e, NRT_ERR_STATE, "nrt_session_run first"));
    CHECK(nrt_session_set_input(s, "x", NRT_F32, 2, shape, x, &e) == NRT_OK);
    CHECK(nrt_session_run(s, &e) == NRT_OK);
    CHECK(nrt_session_get_output(s, "y", y, sizeof y, &e) == NRT_OK);
    CHECK(nrt_session_get_output(s, "s", sums, sizeof sums, &e) == NRT_OK);
    CHECK(y[0] == 1 && y[5] == 6 && sums[0] == 6 && sums[1] == 15);
}

enum { THREADS = 8 };

typedef struct first_session {
    const nrt_module *m;
    pthread_barrier_t *start;
    nrt_status st;
    char device[sizeof ((nrt_error *)0)->message];   /* or the error */
} first_session;

static void *create_at_once(void *p)
{
    first_session *f = p;
    const char *bt[] = {"B", "T"};
    const int64_t small[] = {2, 3};
    nrt_session *s;
    nrt_error e;
    pthread_barrier_wait(f->start);
    f->st = create(f->m, NRT_DEVICE_AUTO, 2, bt, small, &s, &e);
    snprintf(f->device, sizeof f->device, "%s", f->st ? e.message : nrt_session_device(s));
    nrt_session_free(s);
    return NULL;
}

/* The process's first sessions, on threads at once (before anything else
 * here opens the driver): each used to find the driver half-loaded by
 * another and take it for "no GPU" (falling back to the CPU with no reason
 * given), or NVRTC for "not available". */
static void check_first_sessions_on_threads(const nrt_module *m)
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    first_session f[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        f[i] = (first_session){.m = m, .start = &start};
        CHECK(pthread_create(&t[i], NULL, create_at_once, &f[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < THREADS; i++) {
        CHECK(f[i].st == NRT_OK);
        CHECK(strcmp(f[i].device, f[0].device) == 0);
        if (f[i].st != NRT_OK || strcmp(f[i].device, f[0].device) != 0)
            fprintf(stderr, "  thread %d: status %d, %s; thread 0: %s\n", i, f[i].st, f[i].device, f[0].device);
    }
}

/* An output that is an input or a parameter itself: the GPU's read that
 * tensor as set after the run, the CPU's the run's copy; then both were
 * refused (NRT_ERR_STATE). Now both are the value the run read. */
static void check_set_since_run(nrt_session *s)
{
    nrt_error e;
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0}, w[2] = {7, 8}, v[2] = {0}, k[2] = {0};
    const int64_t shape[] = {2, 3}, two[] = {2};
    /* a bool byte of 2 gave k 1 on the CPU and 2 on the GPU */
    unsigned char two_bytes[2] = {0, 2}, mask[2] = {0, 1};
    CHECK(refused(nrt_session_set_input(s, "m", NRT_BOOL, 1, two, two_bytes, &e), &e, NRT_ERR_ARGUMENT,
                  "input m: element 1 is byte 2; a bool is one byte 0 or 1"));
    CHECK(nrt_session_set_input(s, "m", NRT_BOOL, 1, two, mask, &e) == NRT_OK);
    CHECK(nrt_session_set_input(s, "x", NRT_F32, 2, shape, x, &e) == NRT_OK);
    CHECK(nrt_session_run(s, &e) == NRT_OK);
    CHECK(nrt_session_get_output(s, "k", k, sizeof k, &e) == NRT_OK && k[0] == 0 && k[1] == 1);
    x[0] = 100;
    CHECK(nrt_session_set_input(s, "x", NRT_F32, 2, shape, x, &e) == NRT_OK);
    CHECK(nrt_session_get_output(s, "y", y, sizeof y, &e) == NRT_OK && y[0] == 1 && y[5] == 6);
    CHECK(nrt_session_get_output(s, "v", v, sizeof v, &e) == NRT_OK && v[0] == 1);
    CHECK(nrt_session_set_param(s, "w", NRT_F32, 1, two, w, &e) == NRT_OK);
    CHECK(nrt_session_get_output(s, "v", v, sizeof v, &e) == NRT_OK && v[0] == 1 && v[1] == 1);
    CHECK(nrt_session_get_output(s, "y", y, sizeof y, &e) == NRT_OK && y[0] == 1);
    CHECK(nrt_session_run(s, &e) == NRT_OK);
    CHECK(nrt_session_get_output(s, "y", y, sizeof y, &e) == NRT_OK && y[0] == 100);
    CHECK(nrt_session_get_output(s, "v", v, sizeof v, &e) == NRT_OK && v[0] == 7);
}

/* A training step that returns a parameter: the CPU's output was the value
 * the step read, the GPU's the value it wrote (then both refused). Now both
 * are the value the step read, and the parameter is the one it wrote. */
static void check_step_returning_param(nrt_device dev)
{
    static const char *step =
        "model tp(x: f32[B, 2]) -> (y: f32[B], wout: f32[2]) {\n"
        "  param w: f32[2] = ones\n"
        "  return sum(x * w, axis: 1), w\n"
        "}\n"
        "train tp(t: f32[B]) {\n"
        "  loss = sum(square(y - t))\n"
        "  optimizer sgd(lr: 0.1)\n"
        "}\n";
    own_module om;
    nrt_session *s = NULL;
    nrt_error e;
    const char *b[] = {"B"};
    const int64_t one[] = {1}, row[] = {1, 2};
    float x[2] = {1, 1}, t0 = 0, lr = 0.1f, y = -1, w[2] = {0};
    CHECK(own_module_load(&om, step, true));
    if (om.m && create(om.m, dev, 1, b, one, &s, &e) == NRT_OK) {
        CHECK(nrt_session_set_input(s, "x", NRT_F32, 2, row, x, &e) == NRT_OK);
        CHECK(nrt_session_set_input(s, "t", NRT_F32, 1, one, &t0, &e) == NRT_OK);
        CHECK(nrt_session_set_input(s, "@lr", NRT_F32, 0, NULL, &lr, &e) == NRT_OK);
        CHECK(nrt_session_run(s, &e) == NRT_OK);
        CHECK(nrt_session_get_output(s, "y", &y, sizeof y, &e) == NRT_OK && y == 2);
        CHECK(nrt_session_get_output(s, "wout", w, sizeof w, &e) == NRT_OK && w[0] == 1 && w[1] == 1);
        CHECK(nrt_session_get_param(s, "w", w, sizeof w, &e) == NRT_OK && fabsf(w[0] - 0.6f) < 1e-6f);
        CHECK(nrt_session_get_output(s, "wout", w, sizeof w, &e) == NRT_OK && w[0] == 1 && w[1] == 1);
        CHECK(nrt_session_run(s, &e) == NRT_OK);   /* the next step reads 0.6: y 1.2, the gradient 2.4 */
        CHECK(nrt_session_get_output(s, "wout", w, sizeof w, &e) == NRT_OK && fabsf(w[0] - 0.6f) < 1e-6f);
        CHECK(nrt_session_get_param(s, "w", w, sizeof w, &e) == NRT_OK && fabsf(w[0] - 0.36f) < 1e-6f);
    }
    nrt_session_free(s);
    own_module_free(&om);
}

/* What a train entry's session saves (its weights and their optimizer
 * state) loads into a forward entry's session of the same module, which
 * passes over the state: it was refused, "tensor 'w.adam_m' is not a
 * parameter", unless the file was a netc train checkpoint. */
static void check_train_weights_to_forward(void)
{
    static const char *step =
        "model tw(x: f32[B, 2]) -> (y: f32[B]) {\n"
        "  param w: f32[2] = ones\n"
        "  return sum(x * w, axis: 1)\n"
        "}\n"
        "train tw(t: f32[B]) {\n"
        "  loss = sum(square(y - t))\n"
        "  optimizer adam(lr: 0.1)\n"
        "}\n";
    own_module om, fom;   /* the train entry, the forward one */
    nrt_session *ts = NULL, *fs = NULL;
    nrt_error e;
    const char *b[] = {"B"};
    const int64_t one[] = {1}, row[] = {1, 2};
    float x[2] = {1, 1}, t0 = 0, lr = 0.1f, b1 = 0.1f, b2 = 0.001f, w[2] = {0}, y = -1;
    char path[] = "/tmp/netc_api_misuse_w_XXXXXX";
    CHECK(own_module_load(&om, step, true) && temp_file(path));
    CHECK(own_module_load(&fom, step, false));
    if (om.m && fom.m && create(om.m, NRT_DEVICE_CPU, 1, b, one, &ts, &e) == NRT_OK &&
        create(fom.m, NRT_DEVICE_CPU, 1, b, one, &fs, &e) == NRT_OK) {
        CHECK(nrt_session_set_input(ts, "x", NRT_F32, 2, row, x, &e) == NRT_OK);
        CHECK(nrt_session_set_input(ts, "t", NRT_F32, 1, one, &t0, &e) == NRT_OK);
        CHECK(nrt_session_set_input(ts, "@lr", NRT_F32, 0, NULL, &lr, &e) == NRT_OK);
        CHECK(nrt_session_set_input(ts, "@bias1", NRT_F32, 0, NULL, &b1, &e) == NRT_OK);
        CHECK(nrt_session_set_input(ts, "@bias2", NRT_F32, 0, NULL, &b2, &e) == NRT_OK);
        CHECK(nrt_session_run(ts, &e) == NRT_OK);
        CHECK(nrt_session_get_param(ts, "w", w, sizeof w, &e) == NRT_OK && w[0] < 1);
        CHECK(nrt_session_save_weights(ts, path, &e) == NRT_OK);
        nrt_status st = nrt_session_load_weights(fs, path, &e);
        CHECK(st == NRT_OK);
        if (st) fprintf(stderr, "  %s\n", e.message);
        CHECK(nrt_session_set_input(fs, "x", NRT_F32, 2, row, x, &e) == NRT_OK);
        CHECK(nrt_session_run(fs, &e) == NRT_OK);
        CHECK(nrt_session_get_output(fs, "y", &y, sizeof y, &e) == NRT_OK && y == w[0] + w[1]);
        /* the forward session's own file has no state: the train entry still wants it */
        CHECK(nrt_session_save_weights(fs, path, &e) == NRT_OK);
        CHECK(refused(nrt_session_load_weights(ts, path, &e), &e, NRT_ERR_FORMAT, "parameter 'w.adam_m' is missing"));
    }
    nrt_session_free(ts);
    nrt_session_free(fs);
    unlink(path);
    own_module_free(&fom);
    own_module_free(&om);
}

/* The mock GPU's fault injection (tests/mockgpu/mock_cuda.h), NULL on a
 * real driver. */
typedef void fail_htod_fn(unsigned long long n);
static fail_htod_fn *mock_fail_htod(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    fail_htod_fn *f = lib ? (fail_htod_fn *)(uintptr_t)dlsym(lib, "mock_cuda_fail_htod") : NULL;
    if (lib) dlclose(lib);   /* the runtime holds it open */
    return f;
}

static bool param_is(nrt_session *s, const char *name, float want)
{
    nrt_error e;
    float v = -1;
    if (nrt_session_get_param(s, name, &v, sizeof v, &e) == NRT_OK && v == want) return true;
    fprintf(stderr, "  parameter %s: %g (%s), want %g\n", name, v, e.message, want);
    return false;
}

static bool run_gives(nrt_session *s, float y0, float y1)
{
    nrt_error e;
    float y[2] = {-1, -1};
    if (nrt_session_run(s, &e) == NRT_OK && nrt_session_get_output(s, "y", y, sizeof y, &e) == NRT_OK && y[0] == y0 &&
        y[1] == y1)
        return true;
    fprintf(stderr, "  run: y = [%g, %g] (%s), want [%g, %g]\n", y[0], y[1], e.message, y0, y1);
    return false;
}

/* A copy to the device that fails partway through load_weights (or in
 * set_param, set_input): the parameters after it kept their old device
 * values, so the next run used some new weights and some old, and
 * get_param read the old. Now the host's values stand, and each run copies
 * what is not on the device yet first, or is refused. */
static void check_upload_failures(void)
{
    static const char *three =
        "model three(x: f32[B]) -> (y: f32[B]) {\n"
        "  param a: f32[1] = ones\n"
        "  param b: f32[1] = ones\n"
        "  param c: f32[1] = ones\n"
        "  return x * a + x * b + x * c\n"
        "}\n";
    char weights[] = "/tmp/netc_api_misuse_w_XXXXXX", saved[] = "/tmp/netc_api_misuse_w_XXXXXX";
    own_module om;
    nrt_session *cpu = NULL, *s = NULL;
    nrt_error e;
    const char *b[] = {"B"};
    const int64_t two[] = {2}, one[] = {1};
    float x[2] = {1, 10}, w[3] = {2, 3, 4}, five = 5;
    CHECK(own_module_load(&om, three, false));
    nrt_module *m = om.m;
    CHECK(m && temp_file(weights) && temp_file(saved) && create(m, NRT_DEVICE_CPU, 1, b, two, &cpu, &e) == NRT_OK);
    for (int i = 0; cpu && i < 3; i++)
        CHECK(nrt_session_set_param(cpu, (const char *[]){"a", "b", "c"}[i], NRT_F32, 1, one, &w[i], &e) == NRT_OK);
    CHECK(cpu && nrt_session_save_weights(cpu, weights, &e) == NRT_OK);
    fail_htod_fn *fail = NULL;
    if (m && create(m, NRT_DEVICE_GPU, 1, b, two, &s, &e) == NRT_OK && !(fail = mock_fail_htod()))
        printf("not the mock GPU: the upload failures are skipped\n");
    if (fail) {
        CHECK(nrt_session_set_input(s, "x", NRT_F32, 1, two, x, &e) == NRT_OK);
        fail(2);   /* b's copy */
        CHECK(refused(nrt_session_load_weights(s, weights, &e), &e, NRT_ERR_DEVICE, "parameter b"));
        CHECK(strstr(e.message, "the parameters hold the file's values, and the next run copies those not on the device yet"));
        CHECK(param_is(s, "a", 2) && param_is(s, "b", 3) && param_is(s, "c", 4));
        CHECK(run_gives(s, 9, 90));   /* gave 4, 40: a new, b and c old */
        fail(1);
        CHECK(refused(nrt_session_set_param(s, "a", NRT_F32, 1, one, &five, &e), &e, NRT_ERR_DEVICE, "parameter a"));
        CHECK(param_is(s, "a", 5));   /* gave 2, what the runs used */
        fail(1);   /* a's copy again, at the run: refused, not run on a = 2 */
        CHECK(refused(nrt_session_run(s, &e), &e, NRT_ERR_DEVICE, "the run is refused: parameter a: "));
        float y[2];
        CHECK(refused(nrt_session_get_output(s, "y", y, sizeof y, &e), &e, NRT_ERR_STATE, "nrt_session_run first"));
        CHECK(nrt_session_save_weights(s, saved, &e) == NRT_OK);   /* a as set, not the device's */
        CHECK(nrt_session_load_weights(cpu, saved, &e) == NRT_OK && param_is(cpu, "a", 5) && param_is(cpu, "c", 4));
        CHECK(run_gives(s, 12, 120));
        x[0] = 2, x[1] = 20;
        fail(1);
        CHECK(refused(nrt_session_set_input(s, "x", NRT_F32, 1, two, x, &e), &e, NRT_ERR_DEVICE, "input x"));
        CHECK(run_gives(s, 24, 240));   /* gave 12, 120: the old x */
        fail(0);
    }
    nrt_session_free(s);
    nrt_session_free(cpu);
    own_module_free(&om);
    unlink(weights);
    unlink(saved);
}

typedef void fail_call_fn(unsigned long long n);
typedef unsigned long long count_calls_fn(void);

/* A training run that fails on the device part way (here its last fallible
 * call) may leave its parameters some updated and some not. The next run,
 * get_param and save_weights went on with them silently; now they are
 * refused, naming the parameter, until it is set again (load_weights, or
 * set_param of each), and the failure itself says so. */
static void check_failed_training_run(void)
{
    static const char *step =
        "model tp(x: f32[B, 2]) -> (y: f32[B]) {\n"
        "  param w: f32[2] = ones\n"
        "  param b: f32[1] = zeros\n"
        "  return sum(x * w, axis: 1) + b\n"
        "}\n"
        "train tp(t: f32[B]) {\n"
        "  loss = sum(square(y - t))\n"
        "  optimizer sgd(lr: 0.1)\n"
        "}\n";
    char weights[] = "/tmp/netc_api_misuse_w_XXXXXX";
    own_module om;
    nrt_session *s = NULL;
    nrt_error e;
    const char *bn[] = {"B"};
    const int64_t one[] = {1}, row[] = {1, 2}, two[] = {2};
    float x[2] = {1, 1}, t0 = 0, lr = 0.1f, w[2] = {0}, b = 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    fail_call_fn *fail = lib ? (fail_call_fn *)(uintptr_t)dlsym(lib, "mock_cuda_fail_call") : NULL;
    count_calls_fn *calls = lib ? (count_calls_fn *)(uintptr_t)dlsym(lib, "mock_cuda_calls") : NULL;
    if (lib) dlclose(lib);
    if (!fail || !calls) {
        printf("not the mock GPU: the failed training run is skipped\n");
        return;
    }
    CHECK(own_module_load(&om, step, true) && temp_file(weights));
    if (om.m && create(om.m, NRT_DEVICE_GPU, 1, bn, one, &s, &e) == NRT_OK) {
        CHECK(nrt_session_set_input(s, "x", NRT_F32, 2, row, x, &e) == NRT_OK);
        CHECK(nrt_session_set_input(s, "t", NRT_F32, 1, one, &t0, &e) == NRT_OK);
        CHECK(nrt_session_set_input(s, "@lr", NRT_F32, 0, NULL, &lr, &e) == NRT_OK);
        CHECK(nrt_session_save_weights(s, weights, &e) == NRT_OK);
        unsigned long long before = calls();
        CHECK(nrt_session_run(s, &e) == NRT_OK);
        unsigned long long per_run = calls() - before;
        fail(per_run);   /* the next run's last call */
        CHECK(refused(nrt_session_run(s, &e), &e, NRT_ERR_DEVICE, "may now hold some updated values and some not"));
        CHECK(refused(nrt_session_run(s, &e), &e, NRT_ERR_STATE, "the run is refused: parameter w (and 1 more): a training run failed"));
        CHECK(refused(nrt_session_get_param(s, "b", &b, sizeof b, &e), &e, NRT_ERR_STATE, "parameter b: a training run failed"));
        CHECK(refused(nrt_session_save_weights(s, weights, &e), &e, NRT_ERR_STATE, "nothing is saved: parameter w"));
        CHECK(nrt_session_set_param(s, "w", NRT_F32, 1, two, w, &e) == NRT_OK);
        CHECK(refused(nrt_session_run(s, &e), &e, NRT_ERR_STATE, "the run is refused: parameter b: "));
        CHECK(nrt_session_load_weights(s, weights, &e) == NRT_OK);   /* every parameter whole again */
        CHECK(nrt_session_run(s, &e) == NRT_OK && param_is(s, "b", -0.4f));   /* from the saved b = 0: y = 2, b -= 0.1 * 2y */
        fail(0);
    }
    nrt_session_free(s);
    own_module_free(&om);
    unlink(weights);
}

/* A result over the CPU executor's 16 GiB: refused before any allocation,
 * as the memory error it is (it was NRT_ERR_ARGUMENT). */
static void check_cpu_memory(void)
{
    static const char *outer =
        "model outer(x: f32[B]) -> (y: f32[B, B]) {\n"
        "  return reshape(x, [B, 1]) * reshape(x, [1, B])\n"
        "}\n";
    char path[] = "/tmp/netc_api_misuse_XXXXXX", cuda[] = "/tmp/netc_api_misuse_cu_XXXXXX";
    nrt_module *m = NULL;
    nrt_session *s = NULL;
    nrt_error e;
    const char *b[] = {"B"};
    const int64_t n[] = {65537};
    float *x = calloc((size_t)n[0], sizeof *x);
    CHECK(write_module_file("api.net", outer, false, path, cuda) && nrt_module_load(path, &m, &e) == NRT_OK);
    CHECK(m && create(m, NRT_DEVICE_CPU, 1, b, n, &s, &e) == NRT_OK);
    CHECK(s && nrt_session_set_input(s, "x", NRT_F32, 1, n, x, &e) == NRT_OK);
    CHECK(s && refused(nrt_session_run(s, &e), &e, NRT_ERR_MEMORY, "over the limit"));
    nrt_session_free(s);
    nrt_module_free(m);
    free(x);
    unlink(path);
    unlink(cuda);
}

/* An input past 2^32 elements (B = T = 65537) is refused before it is read,
 * saying the limit, and an input set before stays set. */
static void check_input_too_large(const nrt_module *m)
{
    nrt_session *s = NULL;
    nrt_error e;
    const char *bt[] = {"B", "T"};
    const int64_t big[] = {65537, 65537};
    float small[1] = {0};
    CHECK(create(m, NRT_DEVICE_CPU, 2, bt, big, &s, &e) == NRT_OK);
    CHECK(s && refused(nrt_session_set_input(s, "x", NRT_F32, 2, big, small, &e), &e, NRT_ERR_MEMORY,
                       "input x is too large: a session holds an input of up to 2^32 elements"));
    nrt_session_free(s);
}

/* The checks that take a session, on the CPU and where one is usable the GPU. */
static void check_sessions(const nrt_module *m, const nrt_module *ident, nrt_device dev)
{
    const char *bt[] = {"B", "T"};
    const int64_t small[] = {2, 3};
    nrt_session *s;
    nrt_error e;
    if (create(m, dev, 2, bt, small, &s, &e) != NRT_OK) {
        printf("no GPU session (%s): the GPU part is skipped\n", e.message);
        return;
    }
    if (dev == NRT_DEVICE_CPU) check_session_nulls(s);
    if (dev == NRT_DEVICE_GPU)   /* said "room for 0 steps, the program has 0" where the program had 0 */
        CHECK(refused(nrt_session_profile(s, 1, NULL, nrt_module_num_steps(m), &e), &e, NRT_ERR_ARGUMENT, "step_seconds is NULL"));
    check_order(s);   /* the GPU's get_output used to read the arena before any run */
    nrt_session_free(s);
    CHECK(create(ident, dev, 2, bt, small, &s, &e) == NRT_OK);
    check_set_since_run(s);
    nrt_session_free(s);
}

/* A message longer than nrt_error's buffer keeps its start and its end (the
 * reason, a hint) around a "..." that shows the cut: a 3000-character name
 * was cut at 1 KiB without a sign, a long weights path lost the reason. */
static void check_long_messages(const nrt_module *m)
{
    const char *bt[] = {"B", "T"};
    const int64_t small[] = {2, 3};
    nrt_session *s;
    nrt_error e;
    CHECK(create(m, NRT_DEVICE_CPU, 2, bt, small, &s, &e) == NRT_OK);
    char name[3001];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = 0;
    float x[6] = {0};
    CHECK(refused(nrt_session_set_input(s, name, NRT_F32, 2, small, x, &e), &e, NRT_ERR_ARGUMENT,
                  "the module has no input named nnn"));
    size_t len = strlen(e.message);
    CHECK(len == sizeof e.message - 1 && strstr(e.message, "n...n") && e.message[len - 1] == 'n');
    /* a path of 1500 characters in a directory that is not there: the reason comes last */
    char path[1600] = "/tmp/netc_api_misuse_no_such_dir";
    while (strlen(path) < 1500) strcat(path, "/ddddddddddddddddddddddddddddddddddddddddddddddddd");
    strcat(path, "/w.safetensors");
    CHECK(refused(nrt_session_load_weights(s, path, &e), &e, NRT_ERR_IO, "/tmp/netc_api_misuse_no_such_dir/ddd"));
    len = strlen(e.message);
    const char *reason = ": No such file or directory";
    bool shown = strstr(e.message, "...") && len > strlen(reason) && strcmp(e.message + len - strlen(reason), reason) == 0;
    CHECK(shown);
    if (!shown) fprintf(stderr, "  message: %s\n", e.message);
    nrt_session_free(s);
}

/* A symbolic size that is 0 at the bound dims (T - 1 at T = 1) is refused
 * as one that is negative is, on either device and before any GPU is looked
 * for, with the dims whose raising helps: the session was made, and t an
 * empty tensor whose mean is a NaN. */
static void check_empty_tensor(void)
{
    own_module om;
    CHECK(own_module_load(&om,
                          "model e(x: f32[B, T], t: f32[T - 1], u: f32[B * T - 2]) -> (y: f32[B]) {\n"
                          "  return mean(x, axis: 1) + mean(t) + mean(u)\n"
                          "}\n", false));
    const char *bt[] = {"B", "T"};
    const int64_t t1[] = {2, 1}, b1t2[] = {1, 2}, fine[] = {1, 3};
    const nrt_device devs[] = {NRT_DEVICE_CPU, NRT_DEVICE_GPU};
    for (int d = 0; om.m && d < 2; d++) {
        nrt_session *s = NULL;
        nrt_error e;
        CHECK(refused(create(om.m, devs[d], 2, bt, t1, &s, &e), &e, NRT_ERR_ARGUMENT,
                      "at B = 2, T = 1 a tensor of f32[T - 1] would be empty (its size is 0: T - 1 = 0)\n"
                      "  hint: bind a larger T (netc run: --dim T=N)"));
        CHECK(s == NULL);
        CHECK(refused(create(om.m, devs[d], 2, bt, b1t2, &s, &e), &e, NRT_ERR_ARGUMENT,
                      "at B = 1, T = 2 a tensor of f32[B*T - 2] would be empty (its size is 0: B*T - 2 = 0)\n"
                      "  hint: bind a larger B or T (netc run: --dim B=N, --dim T=N)"));
        CHECK(s == NULL);
    }
    nrt_session *s = NULL;
    nrt_error e;
    CHECK(om.m && create(om.m, NRT_DEVICE_CPU, 2, bt, fine, &s, &e) == NRT_OK);
    nrt_session_free(s);
    own_module_free(&om);
}

int main(void)
{
    if (!write_module_file("api.net", source, false, module_path, cuda_path) || !write_module_file("api.net", ident_source, false, ident_path, ident_cuda_path)) {
        fprintf(stderr, "cannot build the test modules\n");
        return 1;
    }
    /* the mock GPU runs each module's kernels from the file of its CUDA source */
    char sources[128];
    snprintf(sources, sizeof sources, "%s:%s", cuda_path, ident_cuda_path);
    setenv("NETC_MOCK_CUDA_SOURCE", sources, 1);
    nrt_module *m, *ident;
    nrt_error e;
    CHECK(nrt_module_load(module_path, &m, &e) == NRT_OK);
    CHECK(nrt_module_load(ident_path, &ident, &e) == NRT_OK);
    check_first_sessions_on_threads(m);
    check_module_nulls();
    check_create(m, ident);
    check_sessions(m, ident, NRT_DEVICE_CPU);
    check_sessions(m, ident, NRT_DEVICE_GPU);
    check_step_returning_param(NRT_DEVICE_CPU);
    check_step_returning_param(NRT_DEVICE_GPU);
    check_train_weights_to_forward();
    check_upload_failures();
    check_failed_training_run();
    check_cpu_memory();
    check_input_too_large(m);
    check_long_messages(m);
    check_empty_tensor();
    nrt_module_free(m);
    nrt_module_free(ident);
    unlink(module_path);
    unlink(ident_path);
    unlink(cuda_path);
    unlink(ident_cuda_path);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
