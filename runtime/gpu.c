/* gpu.c - running a module's program on an NVIDIA GPU.
 *
 * libcuda and libcublasLt are opened with dlopen on first use: a binary
 * linked with libnetrt starts, and runs on the CPU, on a machine without a
 * driver. Every driver and cuBLASLt call goes through one checking macro that
 * names the call and the error. */
#include "gpu.h"
#include "launch_dag.h"
#include "memplan.h"
#include "nvrtc_cache.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NETC_HAVE_CUDA_HEADERS

bool gpu_probe(char *why, size_t cap)
{
    snprintf(why, cap, "libnetrt was built without the CUDA toolkit");
    return false;
}
int gpu_device_arch(int device_index, char *arch, size_t archcap, char *err, size_t errcap)
{
    (void)device_index, (void)arch, (void)archcap;
    nc_errf(err, errcap, "libnetrt was built without the CUDA toolkit");
    return -1;
}
int gpu_session_create(const nrt_module_data *m, const int64_t *syms, int device_index, bool use_graph,
                       gpu_session **out, char *desc, size_t desccap, char *err, size_t errcap)
{
    (void)m, (void)syms, (void)device_index, (void)use_graph, (void)desc, (void)desccap;
    *out = NULL;
    nc_errf(err, errcap, "libnetrt was built without the CUDA toolkit");
    return -1;
}
int gpu_session_create_in(const nrt_module_data *m, const int64_t *syms, const gpu_session *lender, gpu_session **out,
                          char *desc, size_t desccap, char *err, size_t errcap)
{
    (void)lender;
    return gpu_session_create(m, syms, 0, true, out, desc, desccap, err, errcap);
}
bool gpu_arena_borrowed(const gpu_session *s) { (void)s; return false; }
void gpu_session_free(gpu_session *s) { (void)s; }
int gpu_upload(gpu_session *s, uint32_t v, const void *d, size_t b, char *err, size_t cap) { (void)s, (void)v, (void)d, (void)b; snprintf(err, cap, "no GPU"); return -1; }
int gpu_download(gpu_session *s, uint32_t v, void *d, size_t b, char *err, size_t cap) { (void)s, (void)v, (void)d, (void)b; snprintf(err, cap, "no GPU"); return -1; }
int gpu_run(gpu_session *s, char *err, size_t cap) { (void)s; snprintf(err, cap, "no GPU"); return -1; }
int gpu_launch(gpu_session *s, char *err, size_t cap) { (void)s; snprintf(err, cap, "no GPU"); return -1; }
int gpu_finish(gpu_session *s, char *err, size_t cap) { (void)s; snprintf(err, cap, "no GPU"); return -1; }
int gpu_profile(gpu_session *s, int r, double *t, char *err, size_t cap) { (void)s, (void)r, (void)t; snprintf(err, cap, "no GPU"); return -1; }
int gpu_run_launch(gpu_session *s, uint32_t *k, char *err, size_t cap) { (void)s, (void)k; snprintf(err, cap, "no GPU"); return -1; }
int gpu_stage_input(gpu_session *s, uint32_t v, const void *d, size_t b, char *err, size_t cap) { (void)s, (void)v, (void)d, (void)b; snprintf(err, cap, "no GPU"); return -1; }
int gpu_drop_staged(gpu_session *s, char *err, size_t cap) { (void)s; snprintf(err, cap, "no GPU"); return -1; }
double gpu_input_wait_seconds(const gpu_session *s) { (void)s; return 0; }
int64_t gpu_arena_bytes(const gpu_session *s) { (void)s; return 0; }
int64_t gpu_device_bytes(const gpu_session *s) { (void)s; return 0; }
uint32_t gpu_streams(const gpu_session *s) { (void)s; return 1; }
int64_t gpu_device_used_bytes(gpu_session *s) { (void)s; return -1; }
int gpu_poison(gpu_session *s, char *err, size_t cap) { (void)s; snprintf(err, cap, "no GPU"); return -1; }

#else

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#include <cuda.h>
#pragma GCC diagnostic pop

#define STR_(x) #x
#define XSTR(x) STR_(x)

/* ---- the driver API, resolved by dlsym ------------------------------ */
#define DRIVER_FUNCS(F)                                                                            \
    F(cuInit) F(cuDeviceGetCount) F(cuDeviceGet) F(cuDeviceGetName) F(cuDeviceGetAttribute)       \
    F(cuDevicePrimaryCtxRetain) F(cuDevicePrimaryCtxRelease) F(cuCtxSetCurrent) F(cuModuleLoadData) \
    F(cuModuleUnload) F(cuModuleGetFunction) F(cuMemAlloc) F(cuMemFree)                           \
    F(cuMemcpyDtoHAsync) F(cuMemcpyDtoDAsync) F(cuLaunchKernel) F(cuStreamCreate) F(cuStreamDestroy)   \
    F(cuStreamSynchronize) F(cuStreamBeginCapture) F(cuStreamEndCapture) F(cuGraphInstantiate)    \
    F(cuGraphLaunch) F(cuGraphExecDestroy) F(cuGraphDestroy) F(cuGetErrorString) F(cuDriverGetVersion) F(cuMemsetD8Async) \
    F(cuMemHostAlloc) F(cuMemFreeHost) F(cuMemcpyHtoDAsync) F(cuEventCreate) F(cuEventDestroy) F(cuEventRecord)      \
    F(cuEventSynchronize) F(cuEventElapsedTime) F(cuStreamWaitEvent) F(cuMemGetInfo) F(cuMemsetD16Async)      \
    F(cuMemsetD32Async) F(cuPointerGetAttribute) F(cuLaunchKernelEx)

static struct {
    bool ok;
    char why[256];
#define F(name) __typeof__(&name) name;
    DRIVER_FUNCS(F)
#undef F
} drv;

#define LT_FUNCS(F)                                                                                 \
    F(cublasLtCreate) F(cublasLtDestroy) F(cublasLtMatmulDescCreate) F(cublasLtMatmulDescDestroy)  \
    F(cublasLtMatmulDescSetAttribute) F(cublasLtMatrixLayoutCreate) F(cublasLtMatrixLayoutDestroy) \
    F(cublasLtMatrixLayoutSetAttribute) F(cublasLtMatmulPreferenceCreate)                          \
    F(cublasLtMatmulPreferenceDestroy) F(cublasLtMatmulPreferenceSetAttribute)                     \
    F(cublasLtMatmulAlgoGetHeuristic) F(cublasLtMatmul)

static struct {
    bool ok;
    char why[256];
#define F(name) __typeof__(&name) name;
    LT_FUNCS(F)
#undef F
} lt;

static bool open_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(drv.why, sizeof drv.why, "no NVIDIA driver (libcuda.so.1 not found)");
        return false;
    }
#define F(name)                                                                     \
    if (!(drv.name = (__typeof__(drv.name))dlsym(h, XSTR(name)))) {                 \
        snprintf(drv.why, sizeof drv.why, "the driver lacks %s", XSTR(name));      \
        return false;                                                               \
    }
    DRIVER_FUNCS(F)
#undef F
    CUresult rc = drv.cuInit(0);
    if (rc != CUDA_SUCCESS) {
        const char *s = NULL;
        drv.cuGetErrorString(rc, &s);
        snprintf(drv.why, sizeof drv.why, "cuInit failed: %s", s ? s : "?");
        return false;
    }
    int n = 0;
    if (drv.cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
        snprintf(drv.why, sizeof drv.why, "the driver sees no GPU");
        return false;
    }
    drv.ok = true;
    return true;
}

static bool open_cublaslt(void)
{
    const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    void *h = NULL;
    for (size_t i = 0; i < NC_COUNT(names) && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(lt.why, sizeof lt.why, "cuBLASLt not found (libcublasLt.so.13)");
        return false;
    }
#define F(name)                                                                 \
    if (!(lt.name = (__typeof__(lt.name))dlsym(h, XSTR(name)))) {               \
        snprintf(lt.why, sizeof lt.why, "cuBLASLt lacks %s", XSTR(name));      \
        return false;                                                           \
    }
    LT_FUNCS(F)
#undef F
    lt.ok = true;
    return true;
}

/* Once per process, however many threads create their first sessions at
 * once: a second caller must wait for the first's answer, not read a
 * half-loaded table as "no GPU". */
static pthread_once_t driver_once = PTHREAD_ONCE_INIT, cublaslt_once = PTHREAD_ONCE_INIT;
static void open_driver_once(void) { open_driver(); }
static void open_cublaslt_once(void) { open_cublaslt(); }

static bool load_driver(void)
{
    pthread_once(&driver_once, open_driver_once);
    return drv.ok;
}

static bool load_cublaslt(void)
{
    pthread_once(&cublaslt_once, open_cublaslt_once);
    return lt.ok;
}

bool gpu_probe(char *why, size_t cap)
{
    if (load_driver()) return true;
    snprintf(why, cap, "%s", drv.why);
    return false;
}

static int cu_fail(char *err, size_t cap, const char *call, CUresult rc);
static int cu_fail_in(char *err, size_t cap, const char *what, const char *call, CUresult rc);

int gpu_device_arch(int device_index, char *arch, size_t archcap, char *err, size_t errcap)
{
    if (!load_driver()) {
        nc_errf(err, errcap, "%s", drv.why);
        return -1;
    }
    CUdevice dev;
    int major = 0, minor = 0;
    const char *call = "cuDeviceGet";
    CUresult r = drv.cuDeviceGet(&dev, device_index);
    if (r == CUDA_SUCCESS) call = "cuDeviceGetAttribute", r = drv.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    if (r == CUDA_SUCCESS) r = drv.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    if (r != CUDA_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "cannot read the compute capability of GPU %d", device_index);
        return cu_fail_in(err, errcap, what, call, r);
    }
    module_best_arch(major, minor, arch, archcap);
    return 0;
}

/* The function's name of a call's text: "cuMemAlloc(&p, n)" -> "cuMemAlloc". */
static int call_name_len(const char *call)
{
    int n = 0;
    while (call[n] && call[n] != '(') n++;
    return n;
}

/* One macro checks every driver call: names the call and the error. */
static int cu_fail(char *err, size_t cap, const char *call, CUresult rc)
{
    const char *s = NULL;
    if (drv.cuGetErrorString) drv.cuGetErrorString(rc, &s);
    snprintf(err, cap, "%.*s failed: %s (%d)", call_name_len(call), call, s ? s : "unknown error", (int)rc);
    return -1;
}

/* The failed call, after what the runtime was doing: "cannot ...: cuX failed: ..." */
static int cu_fail_in(char *err, size_t cap, const char *what, const char *call, CUresult rc)
{
    char why[160];
    cu_fail(why, sizeof why, call, rc);
    snprintf(err, cap, "%s: %s", what, why);
    return -1;
}

static const char *lt_status_name(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
    }
}

static int lt_fail(char *err, size_t cap, const char *call, cublasStatus_t st)
{
    snprintf(err, cap, "cuBLASLt %.*s failed: %s (status %d)", call_name_len(call), call, lt_status_name(st), (int)st);
    return -1;
}
#define CU(call) do { CUresult rc_ = drv.call; if (rc_ != CUDA_SUCCESS) return cu_fail(err, errcap, #call, rc_); } while (0)
#define LT(call) do { cublasStatus_t st_ = lt.call; if (st_ != CUBLAS_STATUS_SUCCESS) return lt_fail(err, errcap, #call, st_); } while (0)

/* ---- the session ------------------------------------------------------ */

struct nc_args { void *buf[NRT_MAX_BUFS]; int64_t n[NRT_MAX_INTS]; uint64_t step; };   /* the kernels' ABI (cuda_emit.c) */
_Static_assert(sizeof(struct nc_args) == NRT_ARGS_BYTES, "a memory budget counts the batch tables by NRT_ARGS_BYTES");

enum { NRT_TUNE_CANDIDATES = 8 };   /* algorithms a tuned product tries */

typedef struct gpu_matmul {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    float beta;                    /* 1 with a residual: out = a b + residual */
    int c_buf;                     /* the slot cuBLASLt reads as C: the residual, or out itself (unread at beta 0) */
    /* NRT_EPI_BGRAD where cuBLASLt has no algorithm for DGELU_BGRAD: the
     * column sums as a second product, out [rows, N] times a vector of ones */
    struct gpu_matmul *sums;
    int64_t rows;
    nc_dtype ones_dtype;
    /* NETC_MATMUL_TUNE: cuBLASLt's first few algorithms, timed at session
     * creation (tune_products); key names the problem, so that products of
     * one shape are timed once */
    cublasLtMatmulAlgo_t cand[NRT_TUNE_CANDIDATES];
    int ncand, chosen;
    uint64_t key;
} gpu_matmul;

/* A staged input: two pinned host buffers and two device landing buffers
 * used in turn, so the next batch can travel while a run reads the last. */
#define STAGE_SLOTS NRT_STAGE_SLOTS
typedef struct stage_slot {
    void *host;                    /* pinned: the copy engine reads it directly */
    CUdeviceptr landing;
    CUevent copied;                /* on the copy stream: the bytes are on the device */
    CUevent taken;                 /* on the run stream: moved into the input, the slot is free */
} stage_slot;

typedef struct staged_input {
    uint32_t value;
    size_t bytes;
    stage_slot slot[STAGE_SLOTS];
    int next, waiting;             /* the slot the next staging fills; stagings no run has taken */
} staged_input;

struct gpu_session {
    const nrt_module_data *m;
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CUfunction *funcs;
    CUstream stream;
    CUdeviceptr arena;
    int64_t arena_bytes;
    int64_t kept_bytes;            /* the arena's buffers kept between runs lie below this (memplan.h) */
    bool arena_borrowed;           /* the arena is a lender session's scratch (gpu_session_create_in), */
    bool workspace_borrowed;       /* and workspace[0] its workspace */
    int device_index;
    CUdeviceptr workspace[DAG_MAX_STREAMS];   /* cuBLASLt's, one per stream that runs products */
    size_t workspace_bytes;
    int64_t device_bytes;          /* everything allocated on the device: arena, workspace, tables, landing buffers */
    int64_t *buf_offset, *buf_bytes;
    struct nc_args *args;          /* per step */
    int64_t *launch;               /* per step: blocks, threads (a batch's first step: the batch's) */
    struct nc_args *batch_args;    /* per step: at a batch's first step, its kernel's (buf[0]: its table) */
    CUdeviceptr batch_tables;      /* every batch's steps' nc_args, in step order */
    gpu_matmul *mm;                /* per step (matmul steps only) */
    uint32_t column_sum_products;  /* BGRAD steps run as two products (setup_column_sums) */
    bool tune;                     /* NETC_MATMUL_TUNE: time cuBLASLt's candidates, keep the fastest */
    bool pdl;                      /* NETC_PDL: kernels launched to start as the one before ends */
    int image_arch;                /* the loaded image's architecture, 90 for sm_90a or compute_90 */
    uint32_t tuned_shapes, retuned_shapes;   /* shapes timed; of those, where another than the first won */
    cublasLtHandle_t lt;
    bool use_graph;
    int runs;
    bool has_prepare;              /* the program has prepare steps (nrt_program_mark_prepare) */
    bool prepared;                 /* they ran since the parameters last changed */
    CUgraphExec graph;
    int sm_count;
    /* input prefetch (gpu_stage_input) */
    CUstream copy_stream;
    staged_input *staged;
    uint32_t nstaged;
    CUevent wait_begin, wait_end;  /* around the run stream's waits for staged inputs */
    bool timing_wait;
    double input_wait_s;
    /* launches side by side (NETC_STREAMS, launch_dag.h): stream k > 0 is
     * side[k]; done[j] is recorded after launch j where some launch waits
     * for it; fork and join[k] tie the side streams to the run stream */
    dag_plan dag;
    CUstream side[DAG_MAX_STREAMS];
    CUevent *done, fork, join[DAG_MAX_STREAMS];
};

static bool eval_dim(const ir_graph *g, uint32_t d, const int64_t *syms, int64_t *out)
{
    return dim_eval(&g->dims[d], syms, out);
}

/* An on/off switch from the environment: on when set, not empty and not "0". */
static bool env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static int pick_image(gpu_session *s, int major, int minor, const unsigned char **data, char **owned, char *err,
                      size_t errcap)
{
    const nrt_module_data *m = s->m;
    *owned = NULL;
    int i = module_image_for(m, major, minor);
    if (i >= 0) sscanf(m->images[i].arch, m->images[i].is_ptx ? "compute_%d" : "sm_%d", &s->image_arch);
    else s->image_arch = major * 10 + minor;   /* compiled below for this device */
    if (i >= 0 && !m->images[i].is_ptx) {
        *data = m->images[i].data;
        return 0;
    }
    if (i >= 0) {
        const nrt_image *ptx = &m->images[i];
        char *text = nc_xmalloc(ptx->size + 1);   /* the driver wants PTX NUL-terminated */
        memcpy(text, ptx->data, ptx->size);
        text[ptx->size] = 0;
        *owned = text;
        *data = (const unsigned char *)text;
        return 0;
    }
    /* no image fits: compile the source here, through the on-disk cache */
    size_t size;
    unsigned char *cubin;
    char arch[16];
    module_best_arch(major, minor, arch, sizeof arch);
    if (nvrtc_cache_compile(m->program.source, arch, &cubin, &size, err, errcap) != 0) return -1;
    *owned = (char *)cubin;
    *data = cubin;
    return 0;
}

static int load_kernels(gpu_session *s, char *err, size_t errcap)
{
    int major = 0, minor = 0;
    CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s->dev));
    CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s->dev));
    CU(cuDeviceGetAttribute(&s->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, s->dev));
    const nrt_program *p = &s->m->program;
    s->funcs = nc_xcalloc(p->nkernels + 1, sizeof *s->funcs);
    if (p->nkernels == 0) return 0;
    const unsigned char *image;
    char *owned;
    if (pick_image(s, major, minor, &image, &owned, err, errcap) != 0) return -1;
    CUresult rc = drv.cuModuleLoadData(&s->module, image);
    free(owned);
    if (rc != CUDA_SUCCESS) return cu_fail(err, errcap, "cuModuleLoadData", rc);
    for (uint32_t k = 0; k < p->nkernels; k++) CU(cuModuleGetFunction(&s->funcs[k], s->module, p->kernel_names[k]));
    return 0;
}

static int plan_memory(gpu_session *s, const int64_t *syms, char *err, size_t errcap)
{
    const ir_graph *g = s->m->graph;
    const nrt_program *p = &s->m->program;
    memplan_result r;
    memplan_buf *b = program_plan_memory(g, p, syms, &r, err, errcap);
    if (!b) return -1;
    uint32_t nbuf = g->nnodes + p->ntemps;
    s->buf_offset = nc_xcalloc(nbuf + 1, sizeof *s->buf_offset);
    s->buf_bytes = nc_xcalloc(nbuf + 1, sizeof *s->buf_bytes);
    for (uint32_t i = 0; i < nbuf; i++) s->buf_offset[i] = b[i].offset, s->buf_bytes[i] = b[i].bytes;
    s->arena_bytes = r.arena_bytes;
    s->kept_bytes = r.kept_bytes;
    free(b);
    return 0;
}

/* The arena: the lender's scratch above its kept buffers when it fits
 * there, else an allocation of its own. */
static int place_arena(gpu_session *s, const gpu_session *lender, char *err, size_t errcap)
{
    if (!s->arena_bytes) return 0;
    if (lender && lender->arena && s->arena_bytes <= lender->arena_bytes - lender->kept_bytes) {
        s->arena = lender->arena + (CUdeviceptr)lender->kept_bytes;   /* kept_bytes is a multiple of the plan's alignment */
        s->arena_borrowed = true;
        return 0;
    }
    CUresult ar = drv.cuMemAlloc(&s->arena, (size_t)s->arena_bytes);
    if (ar != CUDA_SUCCESS) {
        char what[80];
        snprintf(what, sizeof what, "cannot allocate the %lld-byte arena on the GPU", (long long)s->arena_bytes);
        return cu_fail_in(err, errcap, what, "cuMemAlloc", ar);
    }
    s->device_bytes += s->arena_bytes;
    return 0;
}

/* How many streams a run's launches may spread over: NETC_STREAMS, 1 (the
 * program's order on one stream) unless set. Not yet the default: whether
 * side-by-side launches pay on a GPU is for bench/ to measure. */
static int streams_wanted(uint32_t *n, char *err, size_t errcap)
{
    const char *v = getenv("NETC_STREAMS");
    *n = 1;
    if (!v || !*v) return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 1 || x > DAG_MAX_STREAMS) {
        nc_errf(err, errcap, "NETC_STREAMS is '%s': expected a number of streams from 1 to %d", v, DAG_MAX_STREAMS);
        return -1;
    }
    *n = (uint32_t)x;
    return 0;
}

/* The plan of which launches may overlap, and the streams and events that
 * run it; nothing beyond the run stream when it uses one stream. */
static int plan_streams(gpu_session *s, char *err, size_t errcap)
{
    uint32_t want;
    if (streams_wanted(&want, err, errcap) != 0) return -1;
    const nrt_program *p = &s->m->program;
    dag_memory mem = {s->buf_offset, s->buf_bytes, s->m->graph->nnodes + p->ntemps, false};   /* a workspace per stream */
    if (dag_plan_build(p, &mem, false, want, &s->dag, err, errcap) != 0) return -1;
    if (s->dag.nstreams < 2) return 0;
    s->done = nc_xcalloc(s->dag.nlaunches + 1, sizeof *s->done);
    for (uint32_t j = 0; j < s->dag.nlaunches; j++)
        if (s->dag.signals[j]) CU(cuEventCreate(&s->done[j], CU_EVENT_DISABLE_TIMING));
    CU(cuEventCreate(&s->fork, CU_EVENT_DISABLE_TIMING));
    for (uint32_t k = 1; k < s->dag.nstreams; k++) {
        CU(cuStreamCreate(&s->side[k], CU_STREAM_NON_BLOCKING));
        CU(cuEventCreate(&s->join[k], CU_EVENT_DISABLE_TIMING));
    }
    return 0;
}

static cudaDataType_t cuda_type(nc_dtype t)
{
    return t == NC_F16 ? CUDA_R_16F : t == NC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static cublasLtEpilogue_t lt_epilogue(uint8_t e)
{
    bool bias = e & NRT_EPI_BIAS;
    if (e & NRT_EPI_DGELU) return e & NRT_EPI_BGRAD ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
    if (e & NRT_EPI_GELU)
        return e & NRT_EPI_AUX ? (bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                               : (bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
    if (e & NRT_EPI_RELU) return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

/* The epilogue's attributes: the bias and auxiliary buffers' addresses are
 * fixed by the arena, so they go into the descriptor once. */
static int setup_epilogue(gpu_session *s, const nrt_step *st, const struct nc_args *a, int64_t N, char *err, size_t errcap)
{
    gpu_matmul *mm = &s->mm[st - s->m->program.steps];
    nrt_matmul_slots slot = nrt_matmul_slots_of(st);
    cublasLtEpilogue_t epi = lt_epilogue(st->mm_epilogue);
    LT(cublasLtMatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (slot.bias >= 0 || slot.colsum >= 0) {   /* the bias read, or the column sums written */
        const void *bias = a->buf[slot.bias >= 0 ? slot.bias : slot.colsum];
        LT(cublasLtMatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    if (slot.aux >= 0 || slot.aux_in >= 0) {   /* GELU writes it, DGELU reads it */
        void *aux = a->buf[slot.aux >= 0 ? slot.aux : slot.aux_in];
        int64_t ld = N;
        LT(cublasLtMatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        LT(cublasLtMatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    mm->beta = slot.residual >= 0 ? 1.0f : 0.0f;
    mm->c_buf = slot.residual >= 0 ? slot.residual : slot.out;
    return 0;
}

/* cuBLASLt's best algorithm for mm's descriptors within the workspace
 * (and, when the session tunes, the next ones as candidates): 0; 1 when it
 * has none (a shape or epilogue it does not cover: the caller may have
 * another way); -1 with a message when a call failed. */
static int find_algo(gpu_session *s, gpu_matmul *mm, char *err, size_t errcap)
{
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t h[NRT_TUNE_CANDIDATES];
    int found = 0;
    const char *call = "cublasLtMatmulPreferenceSetAttribute";
    cublasStatus_t hs = lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &s->workspace_bytes,
                                                                sizeof s->workspace_bytes);
    if (hs == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatmulAlgoGetHeuristic";
        hs = lt.cublasLtMatmulAlgoGetHeuristic(s->lt, mm->desc, mm->a, mm->b, mm->c, mm->c, pref, s->tune ? NRT_TUNE_CANDIDATES : 1,
                                               h, &found);
    }
    lt.cublasLtMatmulPreferenceDestroy(pref);
    if (hs != CUBLAS_STATUS_SUCCESS && hs != CUBLAS_STATUS_NOT_SUPPORTED) return lt_fail(err, errcap, call, hs);
    mm->ncand = 0;
    for (int i = 0; hs == CUBLAS_STATUS_SUCCESS && i < found && i < NRT_TUNE_CANDIDATES; i++)
        if (h[i].state == CUBLAS_STATUS_SUCCESS) mm->cand[mm->ncand++] = h[i].algo;
    if (mm->ncand == 0) return 1;
    mm->algo = mm->cand[0];
    return 0;
}

/* BGRAD steps take the fallback of setup_column_sums unless NETC_DGELU_BGRAD
 * is set (and not "0"): on an H200 (2026-11-27, bench/RESULTS.md) cuBLASLt's
 * DGELU_BGRAD products of GPT-2's step ran at 24% of their floor, 437 us
 * each, and the step was 2.5 ms (6%) faster with the sums as a second
 * product. The variable lets bench/ time both ways on one GPU. */
static bool bgrad_epilogue_wanted(void) { return env_flag("NETC_DGELU_BGRAD"); }

/* DGELU_BGRAD has no algorithm here (cuBLASLt does not promise one for
 * every shape and type), or is switched off: the step runs DGELU alone,
 * then sums the result's rows as a product with a vector of ones (a pass
 * over the result, as a separate kernel would make). The sums are computed
 * in f32 and stored in the result's dtype, as the fused form does. As
 * find_algo: 0, 1 when cuBLASLt has no algorithm, -1 with a message. */
static int setup_column_sums(gpu_session *s, gpu_matmul *mm, nc_dtype t, int64_t rows, int64_t N, char *err, size_t errcap)
{
    cublasLtEpilogue_t plain = CUBLASLT_EPILOGUE_DGELU;
    const void *none = NULL;
    LT(cublasLtMatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &plain, sizeof plain));
    LT(cublasLtMatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &none, sizeof none));
    int fr = find_algo(s, mm, err, errcap);
    if (fr != 0) return fr;
    gpu_matmul *cs = mm->sums = nc_xcalloc(1, sizeof *cs);
    cudaDataType_t dt = cuda_type(t);
    /* column-major: sums [N x 1] = out's memory [N x rows] times ones [rows x 1] */
    LT(cublasLtMatmulDescCreate(&cs->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatrixLayoutCreate(&cs->a, dt, (uint64_t)N, (uint64_t)rows, N));
    LT(cublasLtMatrixLayoutCreate(&cs->b, dt, (uint64_t)rows, 1, rows));
    LT(cublasLtMatrixLayoutCreate(&cs->c, dt, (uint64_t)N, 1, N));
    fr = find_algo(s, cs, err, errcap);
    if (fr != 0) return fr;
    mm->rows = rows;
    mm->ones_dtype = t;
    s->column_sum_products++;
    return 0;
}

static int setup_matmul(gpu_session *s, uint32_t k, const struct nc_args *args, char *err, size_t errcap)
{
    const nrt_step *st = &s->m->program.steps[k];
    const int64_t *n = args->n;
    gpu_matmul *mm = &s->mm[k];
    int br = st->mm_batch_rank;
    int64_t batch = 1;
    for (int i = 0; i < br; i++) batch *= n[i];
    int64_t M = n[br], N = n[br + 1], K = n[br + 2];
    if (st->mm_b_shared && !st->mm_ta) M *= batch, batch = 1;   /* [batch, M, K] x [K, N] is one [batch M, K] x [K, N] */
    cudaDataType_t dt = cuda_type(st->mm_dtype), dt_out = cuda_type(st->mm_out_dtype);
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's
     * first operand is B's memory, its second A's. */
    cublasOperation_t opa = st->mm_tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = st->mm_ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cublasLtMatmulDescCreate(&mm->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT(cublasLtMatmulDescSetAttribute(mm->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (setup_epilogue(s, st, args, N, err, errcap) != 0) return -1;
    uint64_t ar = st->mm_tb ? K : N, ac = st->mm_tb ? N : K;     /* B's memory as col-major */
    uint64_t bro = st->mm_ta ? M : K, bc = st->mm_ta ? K : M;    /* A's memory as col-major */
    LT(cublasLtMatrixLayoutCreate(&mm->a, dt, ar, ac, (int64_t)ar));
    LT(cublasLtMatrixLayoutCreate(&mm->b, dt, bro, bc, (int64_t)bro));
    LT(cublasLtMatrixLayoutCreate(&mm->c, dt_out, (uint64_t)N, (uint64_t)M, N));
    if (batch > 1) {
        int32_t bc32 = (int32_t)batch;
        int64_t sa = st->mm_b_shared ? 0 : K * N, sb = M * K, sc = M * N;
        LT(cublasLtMatrixLayoutSetAttribute(mm->a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc32, sizeof bc32));
        LT(cublasLtMatrixLayoutSetAttribute(mm->a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa));
        LT(cublasLtMatrixLayoutSetAttribute(mm->b, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc32, sizeof bc32));
        LT(cublasLtMatrixLayoutSetAttribute(mm->b, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb));
        LT(cublasLtMatrixLayoutSetAttribute(mm->c, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc32, sizeof bc32));
        LT(cublasLtMatrixLayoutSetAttribute(mm->c, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc));
    }
    uint64_t key = 1469598103934665603ull;   /* the problem: sizes, dtypes, transposes, epilogue */
    const int64_t what[] = {M, N, K, batch, st->mm_dtype, st->mm_out_dtype, st->mm_ta, st->mm_tb, st->mm_b_shared, st->mm_epilogue};
    for (size_t i = 0; i < sizeof what / sizeof what[0]; i++) key = (key ^ (uint64_t)what[i]) * 1099511628211ull;
    mm->key = key;
    bool bgrad = st->mm_epilogue & NRT_EPI_BGRAD, fused = !bgrad || bgrad_epilogue_wanted();
    int fr = fused ? find_algo(s, mm, err, errcap) : 1;
    if (fr == 1 && bgrad) fr = setup_column_sums(s, mm, st->mm_out_dtype, M, N, err, errcap);
    if (fr <= 0) return fr;
    nc_errf(err, errcap, "cuBLASLt has no algorithm for matmul %lldx%lldx%lld (batch %lld, epilogue 0x%x)", (long long)M,
             (long long)N, (long long)K, (long long)batch, st->mm_epilogue);
    return -1;
}

/* The most blocks a grid-stride kernel is launched with: 32 a
 * multiprocessor, several waves, beyond which a thread loops instead. */
static int64_t grid_stride_blocks(const gpu_session *s) { return (int64_t)s->sm_count * 32; }

/* A batch (compiler/cuda_batch.c) launches its kernel once, with a table
 * of its steps' arguments in device memory (the arena does not move, so the
 * table is written once), over the sum of their grids up to the largest
 * grid a step gets: its steps start on threads after each other's, so small
 * ones run side by side. */
static int prepare_batches(gpu_session *s, char *err, size_t errcap)
{
    const nrt_program *p = &s->m->program;
    size_t entries = 0;
    for (uint32_t k = 0; k < p->nsteps; k++)
        if (p->steps[k].batch >= 2) entries += p->steps[k].batch;
    if (entries == 0) return 0;
    s->batch_args = nc_xcalloc(p->nsteps + 1, sizeof *s->batch_args);
    CU(cuMemAlloc(&s->batch_tables, entries * sizeof(struct nc_args)));
    s->device_bytes += (int64_t)(entries * sizeof(struct nc_args));
    size_t at = 0;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        const nrt_step *st = &p->steps[k];
        if (st->batch < 2) continue;
        int64_t blocks = 0, threads = 0, max_blocks = grid_stride_blocks(s);
        for (uint32_t j = k; j < k + st->batch; j++) {
            blocks += s->launch[2 * j];
            if (blocks > max_blocks) blocks = max_blocks;
            if (s->launch[2 * j + 1] > threads) threads = s->launch[2 * j + 1];
        }
        CUdeviceptr table = s->batch_tables + (CUdeviceptr)(at * sizeof(struct nc_args));
        CU(cuMemcpyHtoDAsync(table, &s->args[k], st->batch * sizeof(struct nc_args), s->stream));
        s->batch_args[k].buf[0] = (void *)(uintptr_t)table;
        s->launch[2 * k] = blocks, s->launch[2 * k + 1] = threads;
        at += st->batch;
    }
    return 0;
}

static int prepare_steps(gpu_session *s, const int64_t *syms, char *err, size_t errcap)
{
    const ir_graph *g = s->m->graph;
    const nrt_program *p = &s->m->program;
    s->args = nc_xcalloc(p->nsteps + 1, sizeof *s->args);
    s->launch = nc_xcalloc(2 * (size_t)p->nsteps + 2, sizeof *s->launch);
    s->mm = nc_xcalloc(p->nsteps + 1, sizeof *s->mm);
    for (uint32_t k = 0; k < p->nsteps; k++) {
        const nrt_step *st = &p->steps[k];
        struct nc_args *a = &s->args[k];
        for (int j = 0; j < st->nbufs; j++) a->buf[j] = (void *)(uintptr_t)(s->arena + (CUdeviceptr)s->buf_offset[st->bufs[j]]);
        for (int j = 0; j < st->nints; j++)
            if (!eval_dim(g, st->ints[j], syms, &a->n[j])) {
                nc_errf(err, errcap, "step %u: a size overflows at these dims", k);
                return -1;
            }
        int64_t blocks = 0, threads = 0;
        if (st->kind == NRT_STEP_KERNEL && !nrt_step_launch(st, a->n, grid_stride_blocks(s), &blocks, &threads)) {
            nc_errf(err, errcap, "step %u: %lld blocks is more than a launch takes", k, (long long)blocks);
            return -1;
        }
        s->launch[2 * k] = blocks, s->launch[2 * k + 1] = threads;
        if (st->kind == NRT_STEP_MATMUL && setup_matmul(s, k, a, err, errcap) != 0) return -1;
    }
    return prepare_batches(s, err, errcap);
}

static int launch_from(gpu_session *s, uint32_t *k, uint32_t lane, char *err, size_t errcap);
static int fail_msg(char *err, size_t errcap, const char *msg);

/* NETC_MATMUL_TUNE set (and not "0"): each product shape's first
 * NRT_TUNE_CANDIDATES algorithms by cuBLASLt's heuristic are timed when the
 * session is made, and the fastest kept. Off by default until a GPU shows
 * the heuristic's first choice leaves time on the table; bench/ times both. */
static bool tune_wanted(void) { return env_flag("NETC_MATMUL_TUNE"); }

/* NETC_PDL set (and not "0"): each kernel is launched with programmatic
 * stream serialization, so it starts launching while the kernel before it
 * in its stream ends and waits at its entry (NC_PDL_ENTER, compiled into
 * every kernel of an sm_90 or later image) for that kernel's work. Saves
 * part of the gap between two of netc's kernels; off by default until a
 * GPU measures it (bench/run_gpt2.sh, variant pdl). */
static bool pdl_wanted(void) { return env_flag("NETC_PDL"); }

/* The mean time of launch k with its algorithm of the moment: a warm-up,
 * then three launches between two events. */
static int time_launch(gpu_session *s, uint32_t k, CUevent ev[2], float *ms, char *err, size_t errcap)
{
    for (int r = 0; r < 4; r++) {
        if (r == 1) CU(cuEventRecord(ev[0], s->stream));
        uint32_t at = k;
        if (launch_from(s, &at, 0, err, errcap) != 0) return -1;
    }
    CU(cuEventRecord(ev[1], s->stream));
    CU(cuEventSynchronize(ev[1]));
    CU(cuEventElapsedTime(ms, ev[0], ev[1]));
    *ms /= 3;
    return 0;
}

/* Times each candidate of product k (or takes the choice made for its
 * shape at an earlier step) and keeps the fastest. A candidate cuBLASLt
 * refuses to run is passed over. The arena holds nothing yet: the products
 * write where the run will. */
static int tune_product(gpu_session *s, uint32_t k, CUevent ev[2], char *err, size_t errcap)
{
    gpu_matmul *mm = &s->mm[k];
    for (uint32_t j = 0; j < k; j++)
        if (s->mm[j].desc && s->mm[j].key == mm->key && s->mm[j].ncand == mm->ncand) {
            mm->chosen = s->mm[j].chosen;
            mm->algo = mm->cand[mm->chosen];
            return 0;
        }
    float best = 0;
    mm->chosen = -1;
    for (int i = 0; i < mm->ncand; i++) {
        float ms;
        mm->algo = mm->cand[i];
        if (time_launch(s, k, ev, &ms, err, errcap) != 0) {
            if (i == 0) return -1;   /* the heuristic's first must run */
            continue;
        }
        if (mm->chosen < 0 || ms < best) best = ms, mm->chosen = i;
    }
    mm->algo = mm->cand[mm->chosen];
    s->tuned_shapes++;
    s->retuned_shapes += mm->chosen != 0;
    return 0;
}

static int tune_products(gpu_session *s, char *err, size_t errcap)
{
    if (!s->tune) return 0;
    CUevent ev[2] = {NULL, NULL};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        CUresult r = drv.cuEventCreate(&ev[i], CU_EVENT_DEFAULT);
        if (r != CUDA_SUCCESS) rc = cu_fail_in(err, errcap, "cannot create the timing events", "cuEventCreate", r);
    }
    const nrt_program *p = &s->m->program;
    for (uint32_t k = 0; k < p->nsteps && rc == 0; k++)
        if (p->steps[k].kind == NRT_STEP_MATMUL && s->mm[k].ncand > 1) rc = tune_product(s, k, ev, err, errcap);
    for (int i = 0; i < 2; i++)
        if (ev[i]) drv.cuEventDestroy(ev[i]);
    return rc;
}

/* Adds to the session's description what is out of the ordinary. */
static void desc_append(char *desc, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void desc_append(char *desc, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(desc);
    if (used + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(desc + used, cap - used, fmt, ap);
    va_end(ap);
}

static int create_session(const nrt_module_data *m, const int64_t *syms, int device_index, bool use_graph, const gpu_session *lender,
                          gpu_session **out, char *desc, size_t desccap, char *err, size_t errcap)
{
    *out = NULL;
    if (!load_driver()) { nc_errf(err, errcap, "%s", drv.why); return -1; }
    if (!load_cublaslt()) { nc_errf(err, errcap, "%s", lt.why); return -1; }
    gpu_session *s = nc_xcalloc(1, sizeof *s);
    s->m = m;
    s->use_graph = use_graph;
    s->device_index = device_index;
    s->tune = tune_wanted();
    bool pdl = pdl_wanted();
    for (uint32_t k = 0; k < m->program.nsteps; k++) s->has_prepare |= m->program.steps[k].prepare;
    int rc = -1;
    *out = s;
    CUresult r = drv.cuDeviceGet(&s->dev, device_index);
    if (r != CUDA_SUCCESS) return cu_fail(err, errcap, "cuDeviceGet", r);
    CU(cuDevicePrimaryCtxRetain(&s->ctx, s->dev));
    CU(cuCtxSetCurrent(s->ctx));
    CU(cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING));
    char name[256] = "";
    drv.cuDeviceGetName(name, sizeof name, s->dev);
    if (load_kernels(s, err, errcap) != 0) return -1;
    int major = 0, minor = 0;
    drv.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s->dev);
    drv.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s->dev);
    snprintf(desc, desccap, "cuda:%d %s (sm_%d%d)", device_index, name, major, minor);
    s->pdl = pdl && major >= 9 && s->image_arch >= 90;   /* an older image's kernels do not wait at their entry */
    if (plan_memory(s, syms, err, errcap) != 0) return -1;
    if (plan_streams(s, err, errcap) != 0) return -1;
    if (place_arena(s, lender, err, errcap) != 0) return -1;
    s->workspace_bytes = (size_t)NRT_MATMUL_WORKSPACE_BYTES;
    s->workspace_borrowed = lender && s->arena_borrowed;   /* the runs never overlap: the lender's workspace is free too */
    if (s->workspace_borrowed) s->workspace[0] = lender->workspace[0];
    for (uint32_t k = s->workspace_borrowed; k < s->dag.nstreams; k++) {
        CU(cuMemAlloc(&s->workspace[k], s->workspace_bytes));
        s->device_bytes += NRT_MATMUL_WORKSPACE_BYTES;
    }
    LT(cublasLtCreate(&s->lt));
    if (prepare_steps(s, syms, err, errcap) != 0) return -1;
    if (tune_products(s, err, errcap) != 0) return -1;
    if (s->column_sum_products)
        desc_append(desc, desccap, "; %u bias gradients as a second product%s", s->column_sum_products,
                    bgrad_epilogue_wanted() ? " (no DGELU_BGRAD algorithm in this cuBLASLt)" : "");
    if (s->tune)
        desc_append(desc, desccap, "; %u product shapes tuned, %u on another algorithm than cuBLASLt's first", s->tuned_shapes,
                    s->retuned_shapes);
    if (s->dag.nstreams > 1)
        desc_append(desc, desccap, "; launches side by side on %u streams (%u waits)", s->dag.nstreams, s->dag.nwaits);
    if (s->pdl) desc_append(desc, desccap, "; kernels launched early (PDL)");
    else if (pdl) desc_append(desc, desccap, "; NETC_PDL ignored: kernels for sm_%d, not sm_90 or later", s->image_arch);
    rc = 0;
    return rc;
}

int gpu_session_create(const nrt_module_data *m, const int64_t *syms, int device_index, bool use_graph,
                       gpu_session **out, char *desc, size_t desccap, char *err, size_t errcap)
{
    if (create_session(m, syms, device_index, use_graph, NULL, out, desc, desccap, err, errcap) == 0) return 0;
    gpu_session_free(*out);
    *out = NULL;
    return -1;
}

int gpu_session_create_in(const nrt_module_data *m, const int64_t *syms, const gpu_session *lender, gpu_session **out,
                          char *desc, size_t desccap, char *err, size_t errcap)
{
    if (create_session(m, syms, lender->device_index, true, lender, out, desc, desccap, err, errcap) == 0) return 0;
    gpu_session_free(*out);
    *out = NULL;
    return -1;
}

bool gpu_arena_borrowed(const gpu_session *s) { return s && s->arena_borrowed; }

static CUstream lane_stream(const gpu_session *s, uint32_t lane) { return lane ? s->side[lane] : s->stream; }

/* The fallback of setup_column_sums: the ones (written each run: the
 * arena lends their memory to other steps between runs), then the product. */
static int launch_column_sums(gpu_session *s, uint32_t lane, const nrt_step *st, const struct nc_args *a, const gpu_matmul *mm,
                              char *err, size_t errcap)
{
    CUstream stream = lane_stream(s, lane);
    nrt_matmul_slots slot = nrt_matmul_slots_of(st);
    CUdeviceptr ones = (CUdeviceptr)(uintptr_t)a->buf[slot.ones];
    if (mm->ones_dtype == NC_F32) CU(cuMemsetD32Async(ones, 0x3f800000u, (size_t)mm->rows, stream));
    else CU(cuMemsetD16Async(ones, mm->ones_dtype == NC_F16 ? 0x3c00 : 0x3f80, (size_t)mm->rows, stream));
    float one = 1.0f, zero = 0.0f;
    const gpu_matmul *cs = mm->sums;
    void *sums = a->buf[slot.colsum];
    LT(cublasLtMatmul(s->lt, cs->desc, &one, a->buf[slot.out], cs->a, a->buf[slot.ones], cs->b, &zero, sums, cs->c, sums, cs->c,
                      &cs->algo, (void *)(uintptr_t)s->workspace[lane], s->workspace_bytes, (cudaStream_t)stream));
    return 0;
}

/* Queue the launch that step *k starts (a kernel, a batch of them, a copy
 * or a matmul) on stream lane of the plan (0: the run stream); *k moves
 * past the steps it runs. */
static int launch_from(gpu_session *s, uint32_t *k, uint32_t lane, char *err, size_t errcap)
{
    CUstream stream = lane_stream(s, lane);
    const nrt_program *p = &s->m->program;
    uint32_t first = *k;
    const nrt_step *st = &p->steps[first];
    struct nc_args *a = &s->args[first];
    *k += nrt_step_launch_len(st);
    if (st->kind == NRT_STEP_KERNEL) {
        bool batch = st->batch >= 2;
        if (s->launch[2 * first] == 0) return 0;
        void *params[] = {batch ? &s->batch_args[first] : a};
        CUfunction f = s->funcs[batch ? st->batch_kernel : st->kernel];
        unsigned blocks = (unsigned)s->launch[2 * first], threads = (unsigned)s->launch[2 * first + 1];
        if (s->pdl) {
            CUlaunchAttribute early = {.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
            early.value.programmaticStreamSerializationAllowed = 1;
            CUlaunchConfig c = {.gridDimX = blocks, .gridDimY = 1, .gridDimZ = 1, .blockDimX = threads, .blockDimY = 1, .blockDimZ = 1,
                                .hStream = stream, .attrs = &early, .numAttrs = 1};
            CU(cuLaunchKernelEx(&c, f, params, NULL));
        } else {
            CU(cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, stream, params, NULL));
        }
    } else if (st->kind == NRT_STEP_COPY) {
        size_t bytes = (size_t)s->buf_bytes[st->bufs[1]];
        if (bytes) CU(cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)a->buf[1], (CUdeviceptr)(uintptr_t)a->buf[0], bytes, stream));
    } else {
        gpu_matmul *mm = &s->mm[first];
        float one = 1.0f;
        void *out = a->buf[nrt_matmul_slots_of(st).out];
        /* cuBLASLt's A is our B and its B our A (see setup_matmul) */
        LT(cublasLtMatmul(s->lt, mm->desc, &one, a->buf[1], mm->a, a->buf[0], mm->b, &mm->beta, a->buf[mm->c_buf], mm->c, out,
                          mm->c, &mm->algo, (void *)(uintptr_t)s->workspace[lane], s->workspace_bytes, (cudaStream_t)stream));
        if (mm->sums && launch_column_sums(s, lane, st, a, mm, err, errcap) != 0) return -1;
    }
    return 0;
}

/* Queue the prepare steps (prepare) or the others; a batch is one or the
 * other (cuda_batch.c). */
static int launch_all(gpu_session *s, bool prepare, char *err, size_t errcap)
{
    const nrt_program *p = &s->m->program;
    for (uint32_t k = 0; k < p->nsteps;) {
        if (p->steps[k].prepare != prepare) k += nrt_step_launch_len(&p->steps[k]);
        else if (launch_from(s, &k, 0, err, errcap) != 0) return -1;
    }
    return 0;
}

/* Queue a run's launches over the streams of the plan: each waits for the
 * launches on other streams it depends on; the side streams start after
 * the run stream's earlier work (fork) and it waits for their last (join),
 * so to anything before or after, the run is one piece of work on the run
 * stream, as in launch_all (and a capture of it is one graph). */
static int launch_streams(gpu_session *s, char *err, size_t errcap)
{
    const dag_plan *d = &s->dag;
    CU(cuEventRecord(s->fork, s->stream));
    for (uint32_t k = 1; k < d->nstreams; k++) CU(cuStreamWaitEvent(s->side[k], s->fork, 0));
    for (uint32_t j = 0; j < d->nlaunches; j++) {
        CUstream stream = lane_stream(s, d->stream[j]);
        for (uint32_t q = d->wait_start[j]; q < d->wait_start[j + 1]; q++) CU(cuStreamWaitEvent(stream, s->done[d->waits[q]], 0));
        uint32_t k = d->first_step[j];
        if (launch_from(s, &k, d->stream[j], err, errcap) != 0) return -1;
        if (d->signals[j]) CU(cuEventRecord(s->done[j], stream));
    }
    for (uint32_t k = 1; k < d->nstreams; k++) {
        CU(cuEventRecord(s->join[k], s->side[k]));
        CU(cuStreamWaitEvent(s->stream, s->join[k], 0));
    }
    return 0;
}

static int launch_run(gpu_session *s, char *err, size_t errcap)
{
    return s->dag.nstreams > 1 ? launch_streams(s, err, errcap) : launch_all(s, false, err, errcap);
}

/* The prepare steps, when the parameters changed since they last ran: they
 * depend on nothing else, so they go first (outside the CUDA graph). */
static int launch_prepare(gpu_session *s, char *err, size_t errcap)
{
    if (!s->has_prepare || s->prepared) return 0;
    if (launch_all(s, true, err, errcap) != 0) return -1;
    s->prepared = true;
    return 0;
}

static int fail_msg(char *err, size_t errcap, const char *msg)
{
    nc_errf(err, errcap, "%s", msg);
    return -1;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Each launch between two events, runs times (no CUDA graph: the launches'
 * own device times, not the gaps between them); the median of each. */
int gpu_run_launch(gpu_session *s, uint32_t *k, char *err, size_t errcap)
{
    CU(cuCtxSetCurrent(s->ctx));
    if (*k >= s->m->program.nsteps) return fail_msg(err, errcap, "no such step");
    if (launch_from(s, k, 0, err, errcap) != 0) return -1;
    CU(cuStreamSynchronize(s->stream));
    return 0;
}

int gpu_profile(gpu_session *s, int runs, double *step_seconds, char *err, size_t errcap)
{
    const nrt_program *p = &s->m->program;
    uint32_t n = p->nsteps;
    CU(cuCtxSetCurrent(s->ctx));
    CUevent *ev = nc_xcalloc(2 * (size_t)n + 2, sizeof *ev);
    double *times = nc_xcalloc((size_t)n * (size_t)runs + 1, sizeof *times);
    int rc = 0;
    for (uint32_t k = 0; k < 2 * n && rc == 0; k++)
        if (drv.cuEventCreate(&ev[k], CU_EVENT_DEFAULT) != CUDA_SUCCESS) rc = fail_msg(err, errcap, "cannot create the profiling events");
    for (int r = 0; r < runs && rc == 0; r++) {
        for (uint32_t k = 0; k < n && rc == 0;) {
            uint32_t first = k;
            if (drv.cuEventRecord(ev[2 * first], s->stream) != CUDA_SUCCESS) rc = fail_msg(err, errcap, "cuEventRecord failed");
            if (rc == 0) rc = launch_from(s, &k, 0, err, errcap);
            if (rc == 0 && drv.cuEventRecord(ev[2 * first + 1], s->stream) != CUDA_SUCCESS) rc = fail_msg(err, errcap, "cuEventRecord failed");
        }
        if (rc == 0 && drv.cuStreamSynchronize(s->stream) != CUDA_SUCCESS) rc = fail_msg(err, errcap, "the profiled run failed");
        for (uint32_t k = 0; k < n && rc == 0;) {
            float ms = 0;
            if (drv.cuEventElapsedTime(&ms, ev[2 * k], ev[2 * k + 1]) != CUDA_SUCCESS) rc = fail_msg(err, errcap, "cuEventElapsedTime failed");
            times[(size_t)k * (size_t)runs + (size_t)r] = ms / 1e3;
            k += nrt_step_launch_len(&p->steps[k]);
        }
    }
    for (uint32_t k = 0; k < n && rc == 0; k++) {
        qsort(&times[(size_t)k * (size_t)runs], (size_t)runs, sizeof *times, by_value);
        step_seconds[k] = times[(size_t)k * (size_t)runs + (size_t)runs / 2];
    }
    for (uint32_t k = 0; k < 2 * n; k++)
        if (ev[k]) drv.cuEventDestroy(ev[k]);
    free(ev);
    free(times);
    return rc;
}

/* Queue the staged inputs' moves into their buffers, each after its copy
 * has landed; the wait is timed on the device. */
static int take_staged(gpu_session *s, char *err, size_t errcap)
{
    bool any = false;
    for (uint32_t i = 0; i < s->nstaged; i++) any |= s->staged[i].waiting > 0;
    if (!any) return 0;
    CU(cuEventRecord(s->wait_begin, s->stream));
    for (uint32_t i = 0; i < s->nstaged; i++) {
        staged_input *in = &s->staged[i];
        if (!in->waiting) continue;
        stage_slot *slot = &in->slot[(in->next + STAGE_SLOTS - in->waiting) % STAGE_SLOTS];
        CU(cuStreamWaitEvent(s->stream, slot->copied, 0));
        CU(cuMemcpyDtoDAsync(s->arena + (CUdeviceptr)s->buf_offset[in->value], slot->landing, in->bytes, s->stream));
        CU(cuEventRecord(slot->taken, s->stream));
        in->waiting--;
    }
    CU(cuEventRecord(s->wait_end, s->stream));
    s->timing_wait = true;
    return 0;
}

int gpu_launch(gpu_session *s, char *err, size_t errcap)
{
    CU(cuCtxSetCurrent(s->ctx));
    if (take_staged(s, err, errcap) != 0) return -1;
    if (launch_prepare(s, err, errcap) != 0) return -1;
    if (s->graph) {
        CU(cuGraphLaunch(s->graph, s->stream));
    } else if (s->use_graph && s->runs >= 1) {
        /* The first run ran eagerly (and warmed cuBLASLt); capture the second. */
        CUgraph graph;
        CU(cuStreamBeginCapture(s->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        int rc = launch_run(s, err, errcap);
        CUresult er = drv.cuStreamEndCapture(s->stream, &graph);
        if (rc != 0) {   /* the capture ended all the same: what it recorded goes */
            if (er == CUDA_SUCCESS) drv.cuGraphDestroy(graph);
            return rc;
        }
        if (er != CUDA_SUCCESS) return cu_fail(err, errcap, "cuStreamEndCapture", er);
        CUresult ir = drv.cuGraphInstantiate(&s->graph, graph, 0);
        drv.cuGraphDestroy(graph);
        if (ir != CUDA_SUCCESS) return cu_fail(err, errcap, "cuGraphInstantiate", ir);
        CU(cuGraphLaunch(s->graph, s->stream));
    } else {
        if (launch_run(s, err, errcap) != 0) return -1;
    }
    s->runs++;
    return 0;
}

int gpu_finish(gpu_session *s, char *err, size_t errcap)
{
    CU(cuCtxSetCurrent(s->ctx));
    CU(cuStreamSynchronize(s->stream));
    if (s->timing_wait) {
        float ms = 0;
        CU(cuEventElapsedTime(&ms, s->wait_begin, s->wait_end));
        s->input_wait_s += ms / 1e3;
        s->timing_wait = false;
    }
    return 0;
}

int gpu_run(gpu_session *s, char *err, size_t errcap)
{
    if (gpu_launch(s, err, errcap) != 0) return -1;
    return gpu_finish(s, err, errcap);
}

static int stage_create(gpu_session *s, staged_input *in, char *err, size_t errcap)
{
    if (!s->copy_stream) {
        CU(cuStreamCreate(&s->copy_stream, CU_STREAM_NON_BLOCKING));
        CU(cuEventCreate(&s->wait_begin, CU_EVENT_DEFAULT));
        CU(cuEventCreate(&s->wait_end, CU_EVENT_DEFAULT));
    }
    for (int k = 0; k < STAGE_SLOTS; k++) {
        stage_slot *slot = &in->slot[k];
        CU(cuMemHostAlloc(&slot->host, in->bytes, 0));
        CU(cuMemAlloc(&slot->landing, in->bytes));
        s->device_bytes += (int64_t)in->bytes;
        CU(cuEventCreate(&slot->copied, CU_EVENT_DISABLE_TIMING));
        CU(cuEventCreate(&slot->taken, CU_EVENT_DISABLE_TIMING));
    }
    return 0;
}

static void stage_destroy(staged_input *in)
{
    for (int k = 0; k < STAGE_SLOTS; k++) {
        stage_slot *slot = &in->slot[k];
        if (slot->host) drv.cuMemFreeHost(slot->host);
        if (slot->landing) drv.cuMemFree(slot->landing);
        if (slot->copied) drv.cuEventDestroy(slot->copied);
        if (slot->taken) drv.cuEventDestroy(slot->taken);
    }
}

static staged_input *stage_of(gpu_session *s, uint32_t value, size_t bytes, char *err, size_t errcap)
{
    for (uint32_t i = 0; i < s->nstaged; i++)
        if (s->staged[i].value == value) return &s->staged[i];
    s->staged = nc_xrealloc(s->staged, (s->nstaged + 1) * sizeof *s->staged);
    staged_input *in = &s->staged[s->nstaged];
    *in = (staged_input){.value = value, .bytes = bytes};
    if (stage_create(s, in, err, errcap) != 0) {   /* nothing half made stays in the list */
        stage_destroy(in);
        return NULL;
    }
    s->nstaged++;
    return in;
}

int gpu_stage_input(gpu_session *s, uint32_t value, const void *data, size_t bytes, char *err, size_t errcap)
{
    const ir_graph *g = s->m->graph;
    if (value >= g->nnodes || g->nodes[value].op != OP_INPUT) {
        nc_errf(err, errcap, "value %u is not an input: only inputs are staged", value);
        return -1;
    }
    if ((int64_t)bytes != s->buf_bytes[value] || bytes == 0) {
        nc_errf(err, errcap, "expected %lld bytes, got %zu", (long long)s->buf_bytes[value], bytes);
        return -1;
    }
    CU(cuCtxSetCurrent(s->ctx));
    staged_input *in = stage_of(s, value, bytes, err, errcap);
    if (!in) return -1;
    if (in->waiting == STAGE_SLOTS) {
        nc_errf(err, errcap, "input %u staged %d times without a run taking it", value, STAGE_SLOTS + 1);
        return -1;
    }
    stage_slot *slot = &in->slot[in->next];
    /* (waits on events never recorded return at once: the slot's first use) */
    CU(cuEventSynchronize(slot->copied));                   /* the host buffer's last copy is done */
    CU(cuStreamWaitEvent(s->copy_stream, slot->taken, 0));  /* and the landing buffer was moved on */
    memcpy(slot->host, data, bytes);
    CU(cuMemcpyHtoDAsync(slot->landing, slot->host, bytes, s->copy_stream));
    CU(cuEventRecord(slot->copied, s->copy_stream));
    in->next = (in->next + 1) % STAGE_SLOTS;
    in->waiting++;
    return 0;
}

int gpu_drop_staged(gpu_session *s, char *err, size_t errcap)
{
    if (!s->copy_stream) return 0;
    CU(cuCtxSetCurrent(s->ctx));
    CU(cuStreamSynchronize(s->copy_stream));
    for (uint32_t i = 0; i < s->nstaged; i++) s->staged[i].waiting = 0;
    return 0;
}

double gpu_input_wait_seconds(const gpu_session *s) { return s ? s->input_wait_s : 0; }

/* Whether host memory is pinned (cuMemHostAlloc, or registered): a copy
 * from it reads it until the copy is done, where the driver stages a copy
 * from pageable memory before the call returns. */
static bool host_pinned(const void *p)
{
    unsigned int type = 0;
    return drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
           type == CU_MEMORYTYPE_HOST;
}

int gpu_upload(gpu_session *s, uint32_t value, const void *data, size_t bytes, char *err, size_t errcap)
{
    if ((int64_t)bytes != s->buf_bytes[value]) {
        nc_errf(err, errcap, "expected %lld bytes, got %zu", (long long)s->buf_bytes[value], bytes);
        return -1;
    }
    /* what depends on a parameter is stale from the moment its copy may
     * have begun, whether or not the copy then completes */
    if (value < s->m->graph->nnodes && s->m->graph->nodes[value].op == OP_PARAM) s->prepared = false;
    CU(cuCtxSetCurrent(s->ctx));
    /* on the session's stream, not the legacy one: a stream created
     * non-blocking does not wait for the legacy stream's copies, nor they for it */
    if (bytes) CU(cuMemcpyHtoDAsync(s->arena + (CUdeviceptr)s->buf_offset[value], data, bytes, s->stream));
    if (bytes && host_pinned(data)) CU(cuStreamSynchronize(s->stream));   /* the caller may reuse data on return */
    return 0;
}

int gpu_download(gpu_session *s, uint32_t value, void *data, size_t bytes, char *err, size_t errcap)
{
    if ((int64_t)bytes != s->buf_bytes[value]) {
        nc_errf(err, errcap, "expected %lld bytes, got %zu", (long long)s->buf_bytes[value], bytes);
        return -1;
    }
    CU(cuCtxSetCurrent(s->ctx));
    if (bytes) CU(cuMemcpyDtoHAsync(data, s->arena + (CUdeviceptr)s->buf_offset[value], bytes, s->stream));
    CU(cuStreamSynchronize(s->stream));
    return 0;
}

int64_t gpu_arena_bytes(const gpu_session *s) { return s ? s->arena_bytes : 0; }
int64_t gpu_device_bytes(const gpu_session *s) { return s ? s->device_bytes : 0; }
uint32_t gpu_streams(const gpu_session *s) { return s ? s->dag.nstreams : 1; }

int64_t gpu_device_used_bytes(gpu_session *s)
{
    size_t free_bytes = 0, total = 0;
    if (!s || drv.cuCtxSetCurrent(s->ctx) != CUDA_SUCCESS || drv.cuMemGetInfo(&free_bytes, &total) != CUDA_SUCCESS) return -1;
    return (int64_t)(total - free_bytes);
}

int gpu_poison(gpu_session *s, char *err, size_t errcap)
{
    const ir_graph *g = s->m->graph;
    uint32_t nbuf = g->nnodes + s->m->program.ntemps;
    CU(cuCtxSetCurrent(s->ctx));
    /* what prepare steps made stays while it is current: the next run reads it without making it again */
    bool *spared = nc_xcalloc(nbuf + 1, sizeof *spared);
    for (uint32_t k = 0; s->prepared && k < s->m->program.nsteps; k++)
        for (int j = 0; s->m->program.steps[k].prepare && j < s->m->program.steps[k].nbufs; j++)
            spared[s->m->program.steps[k].bufs[j]] = true;
    int rc = 0;
    for (uint32_t i = 0; i < nbuf && rc == 0; i++) {
        if (spared[i] || (i < g->nnodes && (g->nodes[i].op == OP_INPUT || g->nodes[i].op == OP_PARAM))) continue;
        CUresult r = s->buf_bytes[i] ? drv.cuMemsetD8Async(s->arena + (CUdeviceptr)s->buf_offset[i], 0xff,
                                                           (size_t)s->buf_bytes[i], s->stream)
                                     : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS) rc = cu_fail(err, errcap, "cuMemsetD8Async", r);
    }
    free(spared);
    return rc;
}

static void matmul_destroy(gpu_matmul *mm)
{
    if (mm->desc) lt.cublasLtMatmulDescDestroy(mm->desc);
    if (mm->a) lt.cublasLtMatrixLayoutDestroy(mm->a);
    if (mm->b) lt.cublasLtMatrixLayoutDestroy(mm->b);
    if (mm->c) lt.cublasLtMatrixLayoutDestroy(mm->c);
}

void gpu_session_free(gpu_session *s)
{
    if (!s) return;
    if (s->ctx) drv.cuCtxSetCurrent(s->ctx);
    if (s->stream) drv.cuStreamSynchronize(s->stream);
    if (s->graph) drv.cuGraphExecDestroy(s->graph);
    for (uint32_t k = 0; s->mm && k < s->m->program.nsteps; k++) {
        matmul_destroy(&s->mm[k]);
        if (s->mm[k].sums) matmul_destroy(s->mm[k].sums);
        free(s->mm[k].sums);
    }
    if (s->copy_stream) drv.cuStreamSynchronize(s->copy_stream);
    for (uint32_t i = 0; i < s->nstaged; i++) stage_destroy(&s->staged[i]);
    free(s->staged);
    if (s->wait_begin) drv.cuEventDestroy(s->wait_begin);
    if (s->wait_end) drv.cuEventDestroy(s->wait_end);
    if (s->copy_stream) drv.cuStreamDestroy(s->copy_stream);
    for (uint32_t j = 0; s->done && j < s->dag.nlaunches; j++)
        if (s->done[j]) drv.cuEventDestroy(s->done[j]);
    free(s->done);
    if (s->fork) drv.cuEventDestroy(s->fork);
    for (uint32_t k = 1; k < DAG_MAX_STREAMS; k++) {
        if (s->join[k]) drv.cuEventDestroy(s->join[k]);
        if (s->side[k]) drv.cuStreamDestroy(s->side[k]);
    }
    dag_plan_free(&s->dag);
    if (s->lt) lt.cublasLtDestroy(s->lt);
    for (uint32_t k = s->workspace_borrowed; k < DAG_MAX_STREAMS; k++)
        if (s->workspace[k]) drv.cuMemFree(s->workspace[k]);
    if (s->arena && !s->arena_borrowed) drv.cuMemFree(s->arena);
    if (s->batch_tables) drv.cuMemFree(s->batch_tables);
    if (s->module) drv.cuModuleUnload(s->module);
    if (s->stream) drv.cuStreamDestroy(s->stream);
    if (s->ctx) drv.cuDevicePrimaryCtxRelease(s->dev);
    free(s->funcs);
    free(s->buf_offset);
    free(s->buf_bytes);
    free(s->args);
    free(s->batch_args);
    free(s->launch);
    free(s->mm);
    free(s);
}

#endif
