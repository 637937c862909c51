/* mock_cuda.c - a CUDA driver for a machine without a GPU, built as
 * libcuda.so.1 for the tests (runtime/gpu.c opens "libcuda.so.1" with
 * dlopen, so LD_LIBRARY_PATH picks this one).
 *
 * It models what runtime/gpu.c relies on, strictly: device memory is host
 * memory (fresh allocations hold 0xff bytes, a NaN in every float type, so a
 * read before a write shows); kernels are netc's generated CUDA C compiled
 * for the host with tests/unit/cuda_host_shim.hpp (mock_cuda_use_source, or
 * the file NETC_MOCK_CUDA_SOURCE names) and run as the launch's blocks and
 * threads. Work on a stream waits in the stream's queue until something
 * needs it done (a synchronize, an event synchronize, a stream waiting on an
 * event, a free): as late as a GPU may run it, so a host that reads a result
 * or reuses a buffer before the work is known done sees the old bytes. The
 * legacy stream's work (cuMemsetD8, cuMemcpyHtoD, launches on stream 0)
 * waits for the streams created blocking and then, in a queue of its own,
 * until a legacy synchronize, a cuMemcpyDtoH or a free: a stream created
 * non-blocking (the runtime's) neither waits for it nor it for that stream,
 * so a poison or an upload there can land after the kernels that were to
 * follow it, as it can on a GPU. A capturing stream records its work into
 * the graph instead, as nodes that depend on the stream's earlier work and
 * on the events it waited for (other streams join the capture by waiting
 * on an event recorded in it, and must join back before it ends); a replay
 * runs the nodes in a shuffled order the dependencies allow, so work on two
 * streams that needed an order between them shows. Calls
 * the real driver refuses are refused: no current context, unknown handles,
 * copies outside an allocation, synchronous calls while a capture is open
 * (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL forbids them on the capturing thread,
 * GLOBAL on every thread), a capture ended on another thread than began it,
 * launches beyond the device's limits. Any number of threads may call it,
 * each with its own current context (none until cuCtxSetCurrent on that
 * thread); one lock runs the calls, and the work they queue, one at a
 * time. A host-to-device copy can be made to fail (mock_cuda_fail_htod,
 * NETC_MOCK_FAIL_HTOD; mock_cuda.h), and so can any fallible call
 * (mock_cuda_fault, NETC_MOCK_FAIL_CALL). Allocations, streams, events and
 * modules still alive at exit are reported, and the process then exits 3
 * (the runtime must free what it made). */
#define _GNU_SOURCE
#include "mock_cuda.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* the kernels' one parameter (compiler/cuda_emit.c, runtime/gpu.c) */
typedef struct mock_args { void *buf[64]; long long n[20]; unsigned long long step; } mock_args;
typedef void mock_kernel_fn(mock_args);
typedef int mock_launch_fn(void (*thunk)(void *), void *ctx, long long blocks, long long threads, char *err, size_t errcap);

enum { MOCK_MAX_THREADS = 1024, MOCK_MAX_STATIC_SHARED = 48 * 1024 };
static const size_t mock_total_bytes = (size_t)80 << 30;

struct CUctx_st { int retained; };
/* reverse: the shim's nc_host_reverse. A kernel's launches alternate
 * between the shim's two orders of blocks and threads (runs counts them),
 * so a kernel whose result depends on which thread comes first (atomic
 * float adds) gives other bits from one run of a step to the next, as on a
 * GPU, where a test that runs a step twice sees it. */
struct CUmod_st { void *lib; mock_launch_fn *launch; void (*release)(void); long long *dependency_waits; int *reverse; };
struct CUfunc_st { struct CUmod_st *module; mock_kernel_fn *fn; char name[128]; unsigned long long runs; };

typedef struct mock_work {
    mock_work_fn *run;
    void *ctx;
    size_t bytes;
} mock_work;

typedef struct mock_worklist { mock_work *items; size_t n, cap; } mock_worklist;
/* Nodes of a graph (indices into its work). */
typedef struct mock_set { size_t *v; size_t n; } mock_set;

/* A captured graph: work[i] runs after every node in deps[i]. Replays run
 * the nodes in an order of their own (mock_run_graph), so work captured on
 * several streams without a dependency between them shows if it needed one. */
struct CUgraph_st { mock_worklist work; mock_set *deps; unsigned long long id; };
struct CUgraphExec_st { mock_worklist work; mock_set *deps; unsigned long long replays; };
struct CUstream_st {
    bool capturing, blocking, draining;
    bool capture_global;            /* the capture it began is CU_STREAM_CAPTURE_MODE_GLOBAL */
    pthread_t capture_thread;       /* which began it: the capture ends there (neither mode is RELAXED) */
    bool joined;                    /* capturing into another stream's capture (it waited on its event) */
    struct CUgraph_st *graph;
    mock_set frontier;              /* capturing: the nodes the stream's next work depends on */
    mock_worklist queue;            /* queued work: items[done..n) not run yet */
    size_t done;
    unsigned long long base;        /* work run and dropped before items[0] */
    struct CUstream_st *next;       /* the live streams */
};
/* An event's last record is pending while stream is set: it happens when
 * that stream's work numbered seq runs. */
struct CUevent_st {
    bool recorded, timing; double at; CUstream stream; unsigned long long seq;
    unsigned long long capture;     /* last recorded in this capture (graph id; 0: outside any), */
    mock_set frontier;              /* after these nodes */
};

/* ---- the tables of live objects --------------------------------------- */

typedef struct mock_block { uintptr_t base; size_t bytes; bool host; } mock_block;

/* One lock for the whole mock, held through every call of its API (MOCK_API)
 * and so through the queued work a call runs: a real driver takes calls from
 * any number of threads, while the mock's tables, the streams' queues and
 * the host-compiled kernels (whose blockIdx, __shared__ memory and fibers
 * are globals of their library, shared by every session of one model) are
 * single-threaded. Recursive: calls run work that calls back in (a wait
 * drains another stream; cuLaunchKernelEx is cuLaunchKernel). What the
 * driver keeps per thread stays per thread (mock_current, the captures). */
static pthread_mutex_t mock_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static __thread int mock_api_depth;
static __thread bool mock_thread_counted;
static atomic_int mock_threads;      /* live threads that have called the mock */
static pthread_key_t mock_thread_key;
static pthread_once_t mock_key_once = PTHREAD_ONCE_INIT;
static void mock_thread_exit(void *p) { (void)p, atomic_fetch_sub(&mock_threads, 1); }
static void mock_make_key(void) { pthread_key_create(&mock_thread_key, mock_thread_exit); }
/* Leaving the mock while other threads use it, a thread yields: a lock
 * taken again at once by the thread that released it would run each
 * thread's calls in long stretches, where threads on a GPU interleave
 * theirs call by call. A process with one thread never yields (the core
 * would go to other processes). */
static void mock_unlock(pthread_mutex_t **held)
{
    pthread_mutex_unlock(*held);
    if (--mock_api_depth == 0 && atomic_load(&mock_threads) > 1) sched_yield();
}
static pthread_mutex_t *mock_lock_api(void)
{
    if (!mock_thread_counted) {
        pthread_once(&mock_key_once, mock_make_key);
        pthread_setspecific(mock_thread_key, &mock_thread_counted);   /* its destructor counts the thread out */
        mock_thread_counted = true;
        atomic_fetch_add(&mock_threads, 1);
    }
    pthread_mutex_lock(&mock_lock);
    mock_api_depth++;
    return &mock_lock;
}
#define MOCK_API pthread_mutex_t *mock_held_ __attribute__((cleanup(mock_unlock), unused)) = mock_lock_api()
static struct {
    mock_block *blocks;
    size_t nblocks, capblocks;
    size_t device_bytes;
    long streams, events, modules, graphs, execs;
    struct CUctx_st primary;
    char pending_source_lib[600];   /* what the next cuModuleLoadData loads */
    const void *last_image;         /* what the last cuModuleLoadData was given */
    CUresult sticky;                /* a kernel that failed poisons the context, as on a GPU */
} mock;
static CUstream mock_streams;
static mock_worklist mock_legacy;   /* the legacy stream's work not yet run */
static __thread CUcontext mock_current;
static __thread int mock_open_captures;
/* Captures begun in CU_STREAM_CAPTURE_MODE_GLOBAL, on any thread: while one
 * is open, every thread's potentially unsafe calls are refused, as the
 * driver does; THREAD_LOCAL captures (mock_open_captures) bind their own
 * thread only. */
static int mock_global_captures;
static __thread int mock_own_global_captures;
static __thread bool mock_launching_early;   /* cuLaunchKernelEx with programmatic stream serialization */

static double mock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void mock_complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mock_complain(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mock libcuda: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void mock_add_block(void *p, size_t bytes, bool host)
{
    pthread_mutex_lock(&mock_lock);
    if (mock.nblocks == mock.capblocks) {
        mock.capblocks = mock.capblocks ? 2 * mock.capblocks : 64;
        mock.blocks = realloc(mock.blocks, mock.capblocks * sizeof *mock.blocks);
        if (!mock.blocks) abort();
    }
    mock.blocks[mock.nblocks++] = (mock_block){(uintptr_t)p, bytes, host};
    if (!host) mock.device_bytes += bytes;
    pthread_mutex_unlock(&mock_lock);
}

/* Removes the block that starts at p; false when there is none. */
static bool mock_remove_block(uintptr_t p, bool host)
{
    bool found = false;
    pthread_mutex_lock(&mock_lock);
    for (size_t i = 0; i < mock.nblocks && !found; i++)
        if (mock.blocks[i].base == p && mock.blocks[i].host == host) {
            if (!host) mock.device_bytes -= mock.blocks[i].bytes;
            mock.blocks[i] = mock.blocks[--mock.nblocks];
            found = true;
        }
    pthread_mutex_unlock(&mock_lock);
    return found;
}

/* Whether [p, p + bytes) lies inside one allocation of the kind (device, or pinned host). */
static bool mock_in_block(const void *p, size_t bytes, bool host)
{
    uintptr_t a = (uintptr_t)p;
    bool in = false;
    pthread_mutex_lock(&mock_lock);
    for (size_t i = 0; i < mock.nblocks && !in; i++) {
        const mock_block *b = &mock.blocks[i];
        in = b->host == host && a >= b->base && a - b->base <= b->bytes && bytes <= b->bytes - (a - b->base);
    }
    pthread_mutex_unlock(&mock_lock);
    return in;
}

bool mock_cuda_in_device_memory(const void *p, size_t bytes) { return mock_in_block(p, bytes, false); }
static bool mock_in_pinned(const void *p, size_t bytes) { return mock_in_block(p, bytes, true); }

static CUresult mock_device_range(CUdeviceptr p, size_t bytes, const char *call)
{
    if (mock_cuda_in_device_memory((const void *)(uintptr_t)p, bytes)) return CUDA_SUCCESS;
    mock_complain("%s: [%#llx, +%zu) is not inside one device allocation", call, (unsigned long long)p, bytes);
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- calls that need a context, and the capture rules ------------------ */

static CUresult mock_need_context(const char *call)
{
    if (mock_current) return mock.sticky;
    mock_complain("%s: no current context (cuCtxSetCurrent was not called on this thread)", call);
    return CUDA_ERROR_INVALID_CONTEXT;
}

/* Synchronous work is "potentially unsafe" while this thread captures. */
static CUresult mock_sync_allowed(const char *call)
{
    CUresult rc = mock_need_context(call);
    if (rc != CUDA_SUCCESS) return rc;
    if (mock_open_captures == 0 && mock_global_captures == mock_own_global_captures) return CUDA_SUCCESS;
    mock_complain("%s: not allowed while a stream capture is open %s", call,
                  mock_open_captures ? "on this thread" : "in CU_STREAM_CAPTURE_MODE_GLOBAL on another thread");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

static void mock_worklist_add(mock_worklist *l, mock_work w)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->items = realloc(l->items, l->cap * sizeof *l->items);
        if (!l->items) abort();
    }
    l->items[l->n++] = w;
}

static void mock_set_copy(mock_set *to, const mock_set *from)
{
    free(to->v);
    to->v = malloc((from->n + 1) * sizeof *to->v);
    if (!to->v) abort();
    if (from->n) memcpy(to->v, from->v, from->n * sizeof *to->v);
    to->n = from->n;
}

static void mock_set_add(mock_set *x, size_t node)
{
    for (size_t i = 0; i < x->n; i++)
        if (x->v[i] == node) return;
    x->v = realloc(x->v, (x->n + 1) * sizeof *x->v);
    if (!x->v) abort();
    x->v[x->n++] = node;
}

static void mock_set_free(mock_set *x)
{
    free(x->v);
    *x = (mock_set){0};
}

static void mock_worklist_free(mock_worklist *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->items[i].ctx);
    free(l->items);
    *l = (mock_worklist){0};
}

static mock_work mock_work_copy(mock_work_fn *run, const void *ctx, size_t bytes)
{
    mock_work w = {run, malloc(bytes ? bytes : 1), bytes};
    if (!w.ctx) abort();
    memcpy(w.ctx, ctx, bytes);
    return w;
}

/* Runs a stream's queued work up to (not including) number upto. */
static void mock_drain(CUstream s, unsigned long long upto)
{
    if (s->base + s->done >= upto) return;   /* already run */
    if (s->draining) {   /* its own later work: a GPU would wait forever */
        mock_complain("a stream waits on an event its own later work records");
        mock.sticky = CUDA_ERROR_LAUNCH_FAILED;
        return;
    }
    s->draining = true;
    while (s->base + s->done < upto && s->done < s->queue.n) {
        mock_work *w = &s->queue.items[s->done++];
        w->run(w->ctx);
    }
    s->draining = false;
    if (s->done == s->queue.n) {
        s->base += s->queue.n;
        for (size_t i = 0; i < s->queue.n; i++) free(s->queue.items[i].ctx);
        s->queue.n = s->done = 0;
    }
}

static void mock_drain_stream(CUstream s) { mock_drain(s, s->base + s->queue.n); }

/* A synchronize failing as asked: the stream's work failed, as after a
 * kernel's fault on a GPU, and what waits in its queue never runs (a copy
 * to host memory lands nowhere, as the caller, told of the failure, may
 * free it). */
static bool mock_sync_fault(CUstream s, const char *call)
{
    if (!mock_cuda_fault(call)) return false;
    if (!s || s->draining) return true;
    for (size_t i = 0; i < s->queue.n; i++) free(s->queue.items[i].ctx);
    s->base += s->queue.n;
    s->queue.n = s->done = 0;
    return true;
}

static void mock_drain_legacy(void)
{
    for (size_t i = 0; i < mock_legacy.n; i++) {   /* work may queue more: n is read each time */
        mock_legacy.items[i].run(mock_legacy.items[i].ctx);
        free(mock_legacy.items[i].ctx);
    }
    mock_legacy.n = 0;
}

/* What the legacy stream waits for: every blocking stream (all = every
 * stream and the legacy stream's own queue: a full synchronize). */
static void mock_drain_streams(bool all)
{
    for (CUstream s = mock_streams; s; s = s->next)
        if (all || s->blocking) mock_drain_stream(s);
    if (all) mock_drain_legacy();
}

/* A legacy synchronize: what the legacy stream waits for, then its own queue. */
static void mock_sync_legacy(void)
{
    mock_drain_streams(false);
    mock_drain_legacy();
}

CUresult mock_cuda_enqueue(CUstream stream, mock_work_fn *run, const void *ctx, size_t ctx_bytes)
{
    MOCK_API;
    CUresult rc = mock_need_context("a launch");
    if (rc != CUDA_SUCCESS) return rc;
    if (stream && stream->capturing) {   /* a node after the stream's frontier, which it becomes */
        struct CUgraph_st *g = stream->graph;
        size_t node = g->work.n;
        mock_worklist_add(&g->work, mock_work_copy(run, ctx, ctx_bytes));
        g->deps = realloc(g->deps, g->work.cap * sizeof *g->deps);
        if (!g->deps) abort();
        g->deps[node] = (mock_set){0};
        mock_set_copy(&g->deps[node], &stream->frontier);
        stream->frontier.n = 0;
        mock_set_add(&stream->frontier, node);
        return CUDA_SUCCESS;
    }
    if (stream) {
        if (stream->blocking) mock_drain_legacy();   /* it waits for the legacy stream's earlier work */
        mock_worklist_add(&stream->queue, mock_work_copy(run, ctx, ctx_bytes));
        return CUDA_SUCCESS;
    }
    mock_drain_streams(false);   /* the legacy stream: after the blocking streams' earlier work */
    mock_worklist_add(&mock_legacy, mock_work_copy(run, ctx, ctx_bytes));
    return mock.sticky;
}

/* ---- device, context, version ------------------------------------------ */

CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }

CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    MOCK_API;
    if (mock_cuda_fault("cuDeviceGet")) return CUDA_ERROR_INVALID_DEVICE;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    MOCK_API;
    if (d != 0 || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "netc mock GPU (host)");
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
    MOCK_API;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = MOCK_MAX_THREADS; return CUDA_SUCCESS;
    default:
        mock_complain("cuDeviceGetAttribute: attribute %d is not modelled", (int)a);
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
    MOCK_API;
    if (mock_cuda_fault("cuDevicePrimaryCtxRetain")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&mock_lock);
    mock.primary.retained++;
    pthread_mutex_unlock(&mock_lock);
    *ctx = &mock.primary;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d)
{
    MOCK_API;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&mock_lock);
    CUresult rc = mock.primary.retained > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (mock.primary.retained > 0 && --mock.primary.retained == 0) mock.sticky = CUDA_SUCCESS;   /* a fresh context */
    pthread_mutex_unlock(&mock_lock);
    return rc;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    MOCK_API;
    if (mock_cuda_fault("cuCtxSetCurrent")) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx && (ctx != &mock.primary || mock.primary.retained == 0)) return CUDA_ERROR_INVALID_CONTEXT;
    mock_current = ctx;
    return CUDA_SUCCESS;
}

/* ---- memory ------------------------------------------------------------ */

CUresult cuMemGetInfo(size_t *free_bytes, size_t *total)
{
    MOCK_API;
    CUresult rc = mock_need_context("cuMemGetInfo");
    if (mock_cuda_fault("cuMemGetInfo")) return CUDA_ERROR_INVALID_CONTEXT;
    if (rc != CUDA_SUCCESS) return rc;
    pthread_mutex_lock(&mock_lock);
    *total = mock_total_bytes;
    *free_bytes = mock_total_bytes - mock.device_bytes;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr *p, size_t bytes)
{
    MOCK_API;
    CUresult rc = mock_sync_allowed("cuMemAlloc");
    if (mock_cuda_fault("cuMemAlloc")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) return rc;
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    if (bytes > mock_total_bytes - mock.device_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
    void *mem = NULL;
    if (posix_memalign(&mem, 256, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(mem, 0xff, bytes);
    mock_add_block(mem, bytes, false);
    *p = (CUdeviceptr)(uintptr_t)mem;
    return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr p)
{
    MOCK_API;
    CUresult rc = mock_sync_allowed("cuMemFree");
    if (rc != CUDA_SUCCESS && rc != mock.sticky) return rc;
    mock_drain_streams(true);   /* work queued on the memory finishes first */
    if (!mock_remove_block((uintptr_t)p, false)) {
        mock_complain("cuMemFree: %#llx is not an allocation", (unsigned long long)p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    free((void *)(uintptr_t)p);
    return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    MOCK_API;
    CUresult rc = mock_sync_allowed("cuMemHostAlloc");
    if (mock_cuda_fault("cuMemHostAlloc")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) return rc;
    if (bytes == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    *p = malloc(bytes);
    if (!*p) return CUDA_ERROR_OUT_OF_MEMORY;
    mock_add_block(*p, bytes, true);
    return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p)
{
    MOCK_API;
    mock_drain_streams(true);
    if (!mock_remove_block((uintptr_t)p, true)) {
        mock_complain("cuMemFreeHost: %p is not a pinned allocation", p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    free(p);
    return CUDA_SUCCESS;
}

typedef struct mock_copy { void *dst; const void *src; size_t bytes; } mock_copy;
static void mock_run_copy(void *p) { mock_copy *c = p; memmove(c->dst, c->src, c->bytes); }


/* A copy from pageable memory: the driver stages the bytes before it
 * returns; their move into device memory is the legacy stream's work. */
typedef struct mock_staged_copy { void *dst; size_t bytes; unsigned char data[]; } mock_staged_copy;
static void mock_run_staged_copy(void *p)
{
    mock_staged_copy *c = p;
    memcpy(c->dst, c->data, c->bytes);
}

static CUresult mock_enqueue_staged(CUstream s, CUdeviceptr dst, const void *src, size_t bytes)
{
    mock_staged_copy *c = malloc(sizeof *c + bytes + 1);
    if (!c) abort();
    c->dst = (void *)(uintptr_t)dst, c->bytes = bytes;
    memcpy(c->data, src, bytes);
    CUresult rc = mock_cuda_enqueue(s, mock_run_staged_copy, c, sizeof *c + bytes);
    free(c);
    return rc;
}

/* Fault injection (mock_cuda.h): the host-to-device copy numbered
 * mock_htod_fail_at (counting from 1) fails; 0: none does. */
static unsigned long long mock_htod_copies, mock_htod_fail_at;
static pthread_once_t mock_htod_env_once = PTHREAD_ONCE_INIT;
static void mock_htod_read_env(void)
{
    const char *n = getenv("NETC_MOCK_FAIL_HTOD");
    if (n) mock_htod_fail_at = strtoull(n, NULL, 10);
}

void mock_cuda_fail_htod(unsigned long long n)
{
    pthread_once(&mock_htod_env_once, mock_htod_read_env);   /* the hook wins over the variable */
    pthread_mutex_lock(&mock_lock);
    mock_htod_fail_at = n ? mock_htod_copies + n : 0;
    pthread_mutex_unlock(&mock_lock);
}

/* Counts the copy; the one chosen to fail does not happen. */
static CUresult mock_htod_fault(const char *call)
{
    pthread_once(&mock_htod_env_once, mock_htod_read_env);
    pthread_mutex_lock(&mock_lock);
    bool fail = ++mock_htod_copies == mock_htod_fail_at;
    pthread_mutex_unlock(&mock_lock);
    if (!fail) return CUDA_SUCCESS;
    mock_complain("%s: failing host-to-device copy %llu as asked (fault injection)", call, mock_htod_copies);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Fault injection for any fallible call (mock_cuda.h): the call numbered
 * mock_call_fail_at (from 1) fails; the log, when asked, names every one. */
static unsigned long long mock_calls, mock_call_fail_at;
static FILE *mock_call_log;
static pthread_once_t mock_call_env_once = PTHREAD_ONCE_INIT;
static void mock_call_read_env(void)
{
    const char *n = getenv("NETC_MOCK_FAIL_CALL"), *log = getenv("NETC_MOCK_CALL_LOG");
    if (n) mock_call_fail_at = strtoull(n, NULL, 10);
    if (log && !(mock_call_log = fopen(log, "w"))) mock_complain("NETC_MOCK_CALL_LOG: cannot write %s", log);
}

void mock_cuda_fail_call(unsigned long long n)
{
    pthread_once(&mock_call_env_once, mock_call_read_env);   /* the hook wins over the variable */
    pthread_mutex_lock(&mock_lock);
    mock_call_fail_at = n ? mock_calls + n : 0;
    pthread_mutex_unlock(&mock_lock);
}

unsigned long long mock_cuda_calls(void)
{
    pthread_once(&mock_call_env_once, mock_call_read_env);
    pthread_mutex_lock(&mock_lock);
    unsigned long long n = mock_calls;
    pthread_mutex_unlock(&mock_lock);
    return n;
}

bool mock_cuda_fault(const char *call)
{
    pthread_once(&mock_call_env_once, mock_call_read_env);
    pthread_mutex_lock(&mock_lock);
    unsigned long long n = ++mock_calls;
    if (mock_call_log) fprintf(mock_call_log, "%llu %s\n", n, call);
    pthread_mutex_unlock(&mock_lock);
    if (n != mock_call_fail_at) return false;
    mock_complain("%s: failing call %llu as asked (fault injection)", call, n);
    return true;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes)
{
    MOCK_API;
    CUresult rc = mock_sync_allowed("cuMemcpyHtoD");
    if (mock_cuda_fault("cuMemcpyHtoD")) return CUDA_ERROR_LAUNCH_FAILED;
    if (rc == CUDA_SUCCESS) rc = mock_htod_fault("cuMemcpyHtoD");
    if (rc == CUDA_SUCCESS) rc = mock_device_range(dst, bytes, "cuMemcpyHtoD");
    return rc == CUDA_SUCCESS ? mock_enqueue_staged(NULL, dst, src, bytes) : rc;
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes)
{
    MOCK_API;
    CUresult rc = mock_sync_allowed("cuMemcpyDtoH");
    if (mock_cuda_fault("cuMemcpyDtoH")) return CUDA_ERROR_LAUNCH_FAILED;
    if (rc == CUDA_SUCCESS) mock_sync_legacy();
    if (rc == CUDA_SUCCESS) rc = mock_device_range(src, bytes, "cuMemcpyDtoH");
    if (rc == CUDA_SUCCESS) memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return rc;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    MOCK_API;
    CUresult rc = mock_device_range(dst, bytes, "cuMemcpyDtoDAsync (destination)");
    if (mock_cuda_fault("cuMemcpyDtoDAsync")) return CUDA_ERROR_LAUNCH_FAILED;
    if (rc == CUDA_SUCCESS) rc = mock_device_range(src, bytes, "cuMemcpyDtoDAsync (source)");
    mock_copy c = {(void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes};
    return rc == CUDA_SUCCESS ? mock_cuda_enqueue(s, mock_run_copy, &c, sizeof c) : rc;
}

/* cuMemsetD16Async / D32Async: n elements of 2 or 4 bytes, on the stream. */
typedef struct mock_fill { void *dst; uint32_t value; size_t n, elem; } mock_fill;
static void mock_run_fill(void *p)
{
    mock_fill *f = p;
    for (size_t i = 0; i < f->n; i++) {
        if (f->elem == 1) ((uint8_t *)f->dst)[i] = (uint8_t)f->value;
        else if (f->elem == 2) ((uint16_t *)f->dst)[i] = (uint16_t)f->value;
        else ((uint32_t *)f->dst)[i] = f->value;
    }
}

static CUresult mock_fill_async(CUdeviceptr dst, uint32_t value, size_t n, size_t elem, CUstream s, const char *fn)
{
    if (dst % elem) {
        mock_complain("%s: %#llx is not aligned to its %zu-byte elements", fn, (unsigned long long)dst, elem);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult rc = n > SIZE_MAX / elem ? CUDA_ERROR_INVALID_VALUE : mock_device_range(dst, n * elem, fn);
    mock_fill f = {(void *)(uintptr_t)dst, value, n, elem};
    return rc == CUDA_SUCCESS ? mock_cuda_enqueue(s, mock_run_fill, &f, sizeof f) : rc;
}

CUresult cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n)
{
    MOCK_API;
    CUresult rc = mock_sync_allowed("cuMemsetD8");
    if (mock_cuda_fault("cuMemsetD8")) return CUDA_ERROR_LAUNCH_FAILED;
    return rc == CUDA_SUCCESS ? mock_fill_async(dst, value, n, 1, NULL, "cuMemsetD8") : rc;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream s)
{
    MOCK_API;
    if (mock_cuda_fault("cuMemsetD8Async")) return CUDA_ERROR_LAUNCH_FAILED;
    return mock_fill_async(dst, value, n, 1, s, "cuMemsetD8Async");
}

CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t n, CUstream s)
{
    MOCK_API;
    if (mock_cuda_fault("cuMemsetD16Async")) return CUDA_ERROR_LAUNCH_FAILED;
    return mock_fill_async(dst, value, n, 2, s, "cuMemsetD16Async");
}

CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n, CUstream s)
{
    MOCK_API;
    if (mock_cuda_fault("cuMemsetD32Async")) return CUDA_ERROR_LAUNCH_FAILED;
    return mock_fill_async(dst, value, n, 4, s, "cuMemsetD32Async");
}

/* From pinned memory the copy reads src when the stream gets to it; from
 * pageable memory the driver stages src before it returns. */
CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream s)
{
    MOCK_API;
    CUresult rc = mock_device_range(dst, bytes, "cuMemcpyHtoDAsync");
    if (mock_cuda_fault("cuMemcpyHtoDAsync")) return CUDA_ERROR_LAUNCH_FAILED;
    if (rc == CUDA_SUCCESS) rc = mock_htod_fault("cuMemcpyHtoDAsync");
    if (rc != CUDA_SUCCESS) return rc;
    if (mock_in_pinned(src, bytes)) {
        mock_copy c = {(void *)(uintptr_t)dst, src, bytes};
        return mock_cuda_enqueue(s, mock_run_copy, &c, sizeof c);
    }
    return mock_enqueue_staged(s, dst, src, bytes);
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr p)
{
    MOCK_API;
    if (mock_cuda_fault("cuPointerGetAttribute")) return CUDA_ERROR_INVALID_VALUE;
    if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return CUDA_ERROR_NOT_SUPPORTED;   /* not modelled */
    const void *at = (const void *)(uintptr_t)p;
    if (mock_in_pinned(at, 1)) *(unsigned int *)data = CU_MEMORYTYPE_HOST;
    else if (mock_cuda_in_device_memory(at, 1)) *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
    else return CUDA_ERROR_INVALID_VALUE;   /* pageable memory, as the driver answers without HMM */
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes, CUstream s)
{
    MOCK_API;
    CUresult rc = mock_device_range(src, bytes, "cuMemcpyDtoHAsync");
    if (mock_cuda_fault("cuMemcpyDtoHAsync")) return CUDA_ERROR_LAUNCH_FAILED;
    mock_copy c = {dst, (const void *)(uintptr_t)src, bytes};
    return rc == CUDA_SUCCESS ? mock_cuda_enqueue(s, mock_run_copy, &c, sizeof c) : rc;
}

/* ---- modules and kernels ------------------------------------------------ */

#ifndef MOCK_SHIM_DIR
#error "MOCK_SHIM_DIR: the folder of cuda_host_shim.hpp"
#endif

/* FNV-1a of the source and the shim: names the compiled library, so a
 * library compiled before is used again only for the same both. */
static unsigned long long mock_hash(const char *s)
{
    unsigned long long h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    FILE *f = fopen(MOCK_SHIM_DIR "/cuda_host_shim.hpp", "rb");
    for (int c; f && (c = fgetc(f)) != EOF;) h = (h ^ (unsigned char)c) * 1099511628211ULL;
    if (f) fclose(f);
    return h;
}

const void *mock_cuda_last_image(void)
{
    MOCK_API;
    pthread_mutex_lock(&mock_lock);
    const void *image = mock.last_image;
    pthread_mutex_unlock(&mock_lock);
    return image;
}

int mock_cuda_use_source(const char *source, char *err, size_t errcap)
{
    MOCK_API;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[512], cpp[600], so[600], cmd[8192];
    snprintf(dir, sizeof dir, "%s/netc_mock_cuda_%d", tmp, (int)getuid());
    /* NETC_MOCK_WGMMA: the kernels as an sm_90a image runs them (wgmma, emulated by the shim) */
    bool wgmma = getenv("NETC_MOCK_WGMMA") != NULL;
    unsigned long long h = mock_hash(source) ^ (wgmma ? 0x9e3779b97f4a7c15ULL : 0);
    snprintf(cpp, sizeof cpp, "%s/k%016llx.%d.cpp", dir, h, (int)getpid());   /* tests run side by side */
    snprintf(so, sizeof so, "%s/k%016llx.so", dir, h);
    /* one compile at a time (MOCK_API): threads creating sessions at once
     * share the .cpp name (it carries the pid), and the first's library serves all */
    int rc = 0;
    if (access(so, R_OK) != 0) {   /* compiled before: the same source gives the same library */
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        FILE *f = system(cmd) == 0 ? fopen(cpp, "w") : NULL;
        if (!f) rc = -1, snprintf(err, errcap, "cannot write %s", cpp);
        if (f) {
            fputs("#include \"cuda_host_shim.hpp\"\n", f);
            fputs(source, f);
            fclose(f);
            const char *cxx = getenv("CXX") ? getenv("CXX") : "c++";
            snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -fno-strict-aliasing -fPIC -shared -w%s -I'%s' -o '%s.so' '%s' 2>'%s.log' && mv '%s.so' '%s' && rm -f '%s' '%s.log'",
                     cxx, wgmma ? " -DNC_HOST_WGMMA" : "", MOCK_SHIM_DIR, cpp, cpp, cpp, cpp, so, cpp, cpp);
            if (system(cmd) != 0) rc = -1, snprintf(err, errcap, "the kernels do not compile for the host: see %s.log", cpp);
        }
    }
    if (rc != 0) return rc;
    pthread_mutex_lock(&mock_lock);
    snprintf(mock.pending_source_lib, sizeof mock.pending_source_lib, "%s", so);
    pthread_mutex_unlock(&mock_lock);
    return 0;
}

static char *mock_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(n > 0 ? (size_t)n + 1 : 1);
    size_t got = text && n > 0 ? fread(text, 1, (size_t)n, f) : 0;
    fclose(f);
    if (text) text[got] = 0;
    return text;
}

/* The bytes of a module image: a cubin's ELF ends with its section
 * headers; PTX is text. */
static size_t mock_image_size(const unsigned char *image)
{
    if (memcmp(image, "\x7f" "ELF", 4) != 0) return strlen((const char *)image);
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, image + 0x28, 8);
    memcpy(&shentsize, image + 0x3a, 2);
    memcpy(&shnum, image + 0x3c, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
}

/* How many of the source's kernels the image names; -1 when one is missing. */
static int mock_kernels_in_image(const char *source, const unsigned char *image, size_t size)
{
    static const char decl[] = "extern \"C\" __global__ void ";
    int found = 0;
    for (const char *p = strstr(source, decl); p; p = strstr(p + 1, decl)) {
        const char *name = p + sizeof decl - 1, *end;
        if (strncmp(name, "__launch_bounds__(", 18) == 0) {   /* "__launch_bounds__(128, 3) name(" */
            if (!(name = strchr(name, ')'))) return -1;
            name += strspn(name + 1, " ") + 1;
        }
        end = strchr(name, '(');
        if (!end || end - name > 120) return -1;
        if (!memmem(image, size, name, (size_t)(end - name))) return -1;
        found++;
    }
    return found;
}

/* The source a module loads when none was given in-process: of the files
 * NETC_MOCK_CUDA_SOURCE lists (':' between them; netc build --emit-cuda's
 * output), the one with the most kernels, all named in the image (netc train
 * loads a training step and a forward pass). */
static bool mock_source_from_env(const void *image)
{
    const char *list = getenv("NETC_MOCK_CUDA_SOURCE");
    if (!list) return false;
    char *paths = strdup(list), *best = NULL, err[256];
    int best_found = -1;
    size_t size = mock_image_size(image);
    for (char *save = NULL, *path = strtok_r(paths, ":", &save); path; path = strtok_r(NULL, ":", &save)) {
        char *text = mock_read_file(path);
        if (!text) { mock_complain("cannot read %s (NETC_MOCK_CUDA_SOURCE)", path); continue; }
        int found = mock_kernels_in_image(text, image, size);
        if (found > best_found) free(best), best = text, best_found = found;
        else free(text);
    }
    free(paths);
    int rc = best && best_found >= 0 ? mock_cuda_use_source(best, err, sizeof err) : -1;
    if (best && best_found >= 0 && rc != 0) mock_complain("%s", err);
    if (best_found < 0) mock_complain("no file of NETC_MOCK_CUDA_SOURCE has the image's kernels");
    free(best);
    return rc == 0;
}

CUresult cuModuleLoadData(CUmodule *out, const void *image)
{
    MOCK_API;
    CUresult rc = mock_sync_allowed("cuModuleLoadData");
    if (mock_cuda_fault("cuModuleLoadData")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) return rc;
    if (!image) return CUDA_ERROR_INVALID_VALUE;
    char path[600];
    pthread_mutex_lock(&mock_lock);
    mock.last_image = image;
    snprintf(path, sizeof path, "%s", mock.pending_source_lib);
    mock.pending_source_lib[0] = 0;
    pthread_mutex_unlock(&mock_lock);
    if (!path[0] && mock_source_from_env(image)) return cuModuleLoadData(out, image);
    if (!path[0]) {
        mock_complain("cuModuleLoadData: no kernel source was given (mock_cuda_use_source or NETC_MOCK_CUDA_SOURCE)");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    m->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (m->lib) {
        m->launch = (mock_launch_fn *)(uintptr_t)dlsym(m->lib, "nc_host_launch");
        m->release = (void (*)(void))(uintptr_t)dlsym(m->lib, "nc_host_release");
        m->dependency_waits = (long long *)dlsym(m->lib, "nc_grid_dependency_waits");
        m->reverse = (int *)dlsym(m->lib, "nc_host_reverse");
    }
    if (!m->lib || !m->launch) {
        mock_complain("cuModuleLoadData: %s", m->lib ? "the library has no nc_host_launch" : dlerror());
        if (m->lib) dlclose(m->lib);
        free(m);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    pthread_mutex_lock(&mock_lock);
    mock.modules++;
    pthread_mutex_unlock(&mock_lock);
    *out = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule m)
{
    MOCK_API;
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    mock_drain_streams(true);
    if (m->release) m->release();
    dlclose(m->lib);
    free(m);
    pthread_mutex_lock(&mock_lock);
    mock.modules--;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

/* Functions live as long as their module; one table per module would be
 * tidier, but the runtime never unloads a module it still launches from. */
typedef struct mock_fn_cache { struct CUfunc_st *f; struct mock_fn_cache *next; } mock_fn_cache;
static mock_fn_cache *mock_functions;

CUresult cuModuleGetFunction(CUfunction *out, CUmodule m, const char *name)
{
    MOCK_API;
    if (mock_cuda_fault("cuModuleGetFunction")) return CUDA_ERROR_NOT_FOUND;
    if (!m || !name) return CUDA_ERROR_INVALID_HANDLE;
    mock_kernel_fn *fn = (mock_kernel_fn *)(uintptr_t)dlsym(m->lib, name);
    if (!fn) {
        mock_complain("cuModuleGetFunction: no kernel %s", name);
        return CUDA_ERROR_NOT_FOUND;
    }
    struct CUfunc_st *f = calloc(1, sizeof *f);
    mock_fn_cache *c = calloc(1, sizeof *c);
    if (!f || !c) abort();
    *f = (struct CUfunc_st){.module = m, .fn = fn};
    snprintf(f->name, sizeof f->name, "%s", name);
    pthread_mutex_lock(&mock_lock);
    c->f = f, c->next = mock_functions, mock_functions = c;
    pthread_mutex_unlock(&mock_lock);
    *out = f;
    return CUDA_SUCCESS;
}

typedef struct mock_launch {
    struct CUfunc_st *f;
    long long blocks, threads;
    bool early;   /* launched to start as the kernel before it ends (programmatic stream serialization) */
    mock_args args;
} mock_launch;

typedef struct mock_thread_ctx { mock_kernel_fn *fn; mock_args *args; } mock_thread_ctx;
static void mock_run_thread(void *p) { mock_thread_ctx *t = p; t->fn(*t->args); }

static void mock_run_launch(void *p)
{
    mock_launch *l = p;
    mock_thread_ctx t = {l->f->fn, &l->args};
    char err[256];
    if (mock.sticky != CUDA_SUCCESS) return;   /* a failed kernel stops the context's work */
    long long *waits = l->f->module->dependency_waits, before = waits ? *waits : 0;
    int *reverse = l->f->module->reverse;
    if (reverse) *reverse = (int)(l->f->runs++ & 1);
    int rc = l->f->module->launch(mock_run_thread, &t, l->blocks, l->threads, err, sizeof err);
    if (reverse) *reverse = 0;
    if (rc != 0) {
        mock_complain("kernel %s failed: %s", l->f->name, err);
        mock.sticky = CUDA_ERROR_LAUNCH_FAILED;
    } else if (l->early && (!waits || *waits - before != l->blocks * l->threads)) {
        /* on a GPU it could run before the kernel it follows has finished */
        mock_complain("kernel %s was launched early, but %lld of its %lld threads waited for the kernel before it",
                      l->f->name, waits ? *waits - before : 0, l->blocks * l->threads);
        mock.sticky = CUDA_ERROR_LAUNCH_FAILED;
    }
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void **params, void **extra)
{
    MOCK_API;
    CUresult rc = mock_need_context("cuLaunchKernel");
    if (mock_cuda_fault("cuLaunchKernel")) return CUDA_ERROR_LAUNCH_FAILED;
    if (rc != CUDA_SUCCESS) return rc;
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    if (extra || !params || !params[0]) {
        mock_complain("cuLaunchKernel %s: the kernel takes one argument through kernelParams", f->name);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* the generated kernels index with blockIdx.x and threadIdx.x only */
    if (gx == 0 || gy != 1 || gz != 1 || bx == 0 || by != 1 || bz != 1 || bx > MOCK_MAX_THREADS || gx > 0x7fffffffu) {
        mock_complain("cuLaunchKernel %s: grid %ux%ux%u, block %ux%ux%u", f->name, gx, gy, gz, bx, by, bz);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (shared > MOCK_MAX_STATIC_SHARED) return CUDA_ERROR_INVALID_VALUE;
    mock_launch l = {.f = f, .blocks = gx, .threads = bx, .early = mock_launching_early};
    memcpy(&l.args, params[0], sizeof l.args);   /* arguments are copied at the launch, as CUDA does */
    return mock_cuda_enqueue(s, mock_run_launch, &l, sizeof l);
}

/* The launch with attributes: the runtime asks only for programmatic stream
 * serialization (NETC_PDL). The work keeps the stream's order here, as the
 * kernel's wait at its entry makes it on a GPU; what is checked is that
 * every thread of it did wait. */
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    MOCK_API;
    if (mock_cuda_fault("cuLaunchKernelEx")) return CUDA_ERROR_LAUNCH_FAILED;
    if (!c || (c->numAttrs && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
    bool early = false;
    for (unsigned i = 0; i < c->numAttrs; i++) {
        if (c->attrs[i].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) {
            mock_complain("cuLaunchKernelEx: launch attribute %d", (int)c->attrs[i].id);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        early = c->attrs[i].value.programmaticStreamSerializationAllowed != 0;
    }
    mock_launching_early = early;
    CUresult rc = cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                                 c->sharedMemBytes, c->hStream, params, extra);
    mock_launching_early = false;
    return rc;
}

/* ---- streams, capture, graphs ------------------------------------------- */

CUresult cuStreamCreate(CUstream *s, unsigned int flags)
{
    MOCK_API;
    CUresult rc = mock_need_context("cuStreamCreate");
    if (mock_cuda_fault("cuStreamCreate")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) return rc;
    if (flags != CU_STREAM_DEFAULT && flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
    *s = calloc(1, sizeof **s);
    if (!*s) return CUDA_ERROR_OUT_OF_MEMORY;
    (*s)->blocking = flags == CU_STREAM_DEFAULT;
    pthread_mutex_lock(&mock_lock);
    (*s)->next = mock_streams, mock_streams = *s;
    mock.streams++;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream s)
{
    MOCK_API;
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    if (s->capturing) {
        mock_complain("cuStreamDestroy: the stream is capturing");
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    mock_drain_streams(true);   /* its work still completes, and work waiting on it */
    pthread_mutex_lock(&mock_lock);
    for (CUstream *at = &mock_streams; *at; at = &(*at)->next)
        if (*at == s) { *at = s->next; break; }
    pthread_mutex_unlock(&mock_lock);
    mock_worklist_free(&s->queue);
    free(s);
    pthread_mutex_lock(&mock_lock);
    mock.streams--;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s)
{
    MOCK_API;
    CUresult rc = mock_sync_allowed("cuStreamSynchronize");
    if (mock_sync_fault(s, "cuStreamSynchronize")) return CUDA_ERROR_LAUNCH_FAILED;
    if (rc != CUDA_SUCCESS) return rc;
    if (s) mock_drain_stream(s);
    else mock_sync_legacy();
    return mock.sticky;
}

CUresult cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode)
{
    MOCK_API;
    CUresult rc = mock_need_context("cuStreamBeginCapture");
    if (mock_cuda_fault("cuStreamBeginCapture")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) return rc;
    if (!s) {
        mock_complain("cuStreamBeginCapture: the legacy stream cannot capture");
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    if (mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && mode != CU_STREAM_CAPTURE_MODE_GLOBAL) return CUDA_ERROR_INVALID_VALUE;
    s->graph = calloc(1, sizeof *s->graph);
    if (!s->graph) return CUDA_ERROR_OUT_OF_MEMORY;
    static unsigned long long captures;
    s->graph->id = ++captures;
    s->frontier.n = 0;
    s->capturing = true;
    s->capture_global = mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    s->capture_thread = pthread_self();
    mock_global_captures += s->capture_global, mock_own_global_captures += s->capture_global;
    mock_open_captures++;
    pthread_mutex_lock(&mock_lock);
    mock.graphs++;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

/* Marks node and the nodes it depends on, transitively. */
static void mock_mark_before(const struct CUgraph_st *g, size_t node, bool *seen)
{
    if (seen[node]) return;
    seen[node] = true;
    for (size_t i = 0; i < g->deps[node].n; i++) mock_mark_before(g, g->deps[node].v[i], seen);
}

/* The capture ends on the stream that began it; every stream that joined it
 * must have joined back: its last work is before the origin's last. */
CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
    MOCK_API;
    if (!s || !s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    if (s->joined) {
        mock_complain("cuStreamEndCapture: the stream joined another stream's capture; end it there");
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (!pthread_equal(s->capture_thread, pthread_self())) {
        mock_complain("cuStreamEndCapture: the capture began on another thread");
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    struct CUgraph_st *graph = s->graph;
    bool *before = calloc(graph->work.n + 1, 1);
    if (!before) abort();
    for (size_t i = 0; i < s->frontier.n; i++) mock_mark_before(graph, s->frontier.v[i], before);
    /* a failing end still ends the capture, and the graph goes */
    CUresult rc = mock_cuda_fault("cuStreamEndCapture") ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
    for (CUstream o = mock_streams; o; o = o->next) {
        if (o == s || !o->capturing || o->graph != graph) continue;
        for (size_t i = 0; i < o->frontier.n && rc == CUDA_SUCCESS; i++)
            if (!before[o->frontier.v[i]]) {
                mock_complain("cuStreamEndCapture: a stream that joined the capture has work the capturing stream does not wait for");
                rc = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
            }
        o->capturing = o->joined = false;
        o->graph = NULL;
        mock_set_free(&o->frontier);
    }
    free(before);
    s->capturing = false;
    mock_set_free(&s->frontier);
    mock_open_captures--;
    mock_global_captures -= s->capture_global, mock_own_global_captures -= s->capture_global;
    s->capture_global = false;
    s->graph = NULL;
    if (rc != CUDA_SUCCESS) {
        cuGraphDestroy(graph);
        return rc;
    }
    *g = graph;
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph g)
{
    MOCK_API;
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < g->work.n; i++) mock_set_free(&g->deps[i]);
    free(g->deps);
    mock_worklist_free(&g->work);
    free(g);
    pthread_mutex_lock(&mock_lock);
    mock.graphs--;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiate(CUgraphExec *out, CUgraph g, unsigned long long flags)
{
    MOCK_API;
    CUresult rc = mock_need_context("cuGraphInstantiate");
    if (mock_cuda_fault("cuGraphInstantiate")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) return rc;
    if (!g || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *e = calloc(1, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->deps = calloc(g->work.n + 1, sizeof *e->deps);
    if (!e->deps) abort();
    for (size_t i = 0; i < g->work.n; i++) {   /* the executable graph is independent of the graph */
        mock_worklist_add(&e->work, mock_work_copy(g->work.items[i].run, g->work.items[i].ctx, g->work.items[i].bytes));
        mock_set_copy(&e->deps[i], &g->deps[i]);
    }
    pthread_mutex_lock(&mock_lock);
    mock.execs++;
    pthread_mutex_unlock(&mock_lock);
    *out = e;
    return CUDA_SUCCESS;
}

/* A replay runs the nodes in some order their dependencies allow: each
 * time another one (the ready node is drawn by a generator seeded from the
 * replay's number and NETC_MOCK_SEED), as a GPU running independent work at
 * once may finish it in any order. */
static void mock_run_graph(void *p)
{
    CUgraphExec e = *(CUgraphExec *)p;
    size_t n = e->work.n, nready = 0;
    size_t *waiting = calloc(n + 1, sizeof *waiting), *ready = malloc((n + 1) * sizeof *ready);
    mock_set *after = calloc(n + 1, sizeof *after);
    if (!waiting || !ready || !after) abort();
    for (size_t i = 0; i < n; i++) {
        waiting[i] = e->deps[i].n;
        for (size_t q = 0; q < e->deps[i].n; q++) mock_set_add(&after[e->deps[i].v[q]], i);
        if (!waiting[i]) ready[nready++] = i;
    }
    const char *seed = getenv("NETC_MOCK_SEED");
    uint64_t x = (seed ? strtoull(seed, NULL, 10) : 0) * 0x9e3779b97f4a7c15ull + ++e->replays * 0xbf58476d1ce4e5b9ull + 1;
    while (nready && mock.sticky == CUDA_SUCCESS) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t pick = (size_t)(x % nready), node = ready[pick];
        ready[pick] = ready[--nready];
        e->work.items[node].run(e->work.items[node].ctx);
        for (size_t q = 0; q < after[node].n; q++)
            if (--waiting[after[node].v[q]] == 0) ready[nready++] = after[node].v[q];
    }
    for (size_t i = 0; i < n; i++) mock_set_free(&after[i]);
    free(after);
    free(waiting);
    free(ready);
}

CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
    MOCK_API;
    CUresult rc = mock_need_context("cuGraphLaunch");
    if (mock_cuda_fault("cuGraphLaunch")) return CUDA_ERROR_LAUNCH_FAILED;
    if (rc != CUDA_SUCCESS) return rc;
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    if (s && s->capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return mock_cuda_enqueue(s, mock_run_graph, &e, sizeof e);
}

CUresult cuGraphExecDestroy(CUgraphExec e)
{
    MOCK_API;
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    mock_drain_streams(true);   /* launches of it still queued run first */
    for (size_t i = 0; i < e->work.n; i++) mock_set_free(&e->deps[i]);
    free(e->deps);
    mock_worklist_free(&e->work);
    free(e);
    pthread_mutex_lock(&mock_lock);
    mock.execs--;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

/* ---- events ------------------------------------------------------------- */

CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
    MOCK_API;
    CUresult rc = mock_need_context("cuEventCreate");
    if (mock_cuda_fault("cuEventCreate")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) return rc;
    if (flags & ~(unsigned)(CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC)) return CUDA_ERROR_INVALID_VALUE;
    *e = calloc(1, sizeof **e);
    if (!*e) return CUDA_ERROR_OUT_OF_MEMORY;
    (*e)->timing = !(flags & CU_EVENT_DISABLE_TIMING);
    pthread_mutex_lock(&mock_lock);
    mock.events++;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e)
{
    MOCK_API;
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    mock_drain_streams(true);   /* records of it still queued happen first */
    mock_set_free(&e->frontier);
    free(e);
    pthread_mutex_lock(&mock_lock);
    mock.events--;
    pthread_mutex_unlock(&mock_lock);
    return CUDA_SUCCESS;
}

typedef struct mock_record { CUevent e; unsigned long long seq; bool numbered; } mock_record;

static void mock_run_record(void *p)
{
    mock_record *r = p;
    if (r->numbered && (r->e->stream == NULL || r->e->seq != r->seq)) return;   /* recorded again since */
    r->e->recorded = true;
    r->e->at = mock_now_ms();
    r->e->stream = NULL;
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
    MOCK_API;
    if (mock_cuda_fault("cuEventRecord")) return CUDA_ERROR_LAUNCH_FAILED;
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    if (s && s->capturing) {   /* no node: what waits on it depends on the stream's frontier */
        e->capture = s->graph->id;
        mock_set_copy(&e->frontier, &s->frontier);
        return mock.sticky;
    }
    e->capture = 0;
    mock_record r = {.e = e};
    if (s) {   /* pending until the stream's work reaches it */
        r.numbered = true;
        r.seq = e->seq = s->base + s->queue.n;
        e->stream = s;
    }
    return mock_cuda_enqueue(s, mock_run_record, &r, sizeof r);
}

CUresult cuEventSynchronize(CUevent e)
{
    MOCK_API;
    if (mock_sync_fault(e ? e->stream : NULL, "cuEventSynchronize")) return CUDA_ERROR_LAUNCH_FAILED;
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = mock_sync_allowed("cuEventSynchronize");
    if (rc == CUDA_SUCCESS && e->stream) mock_drain(e->stream, e->seq + 1);
    return rc == CUDA_SUCCESS ? mock.sticky : rc;
}

CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    MOCK_API;
    CUresult rc = mock_need_context("cuEventElapsedTime");
    if (mock_cuda_fault("cuEventElapsedTime")) return CUDA_ERROR_NOT_READY;
    if (rc != CUDA_SUCCESS) return rc;
    if (!a || !b || !a->timing || !b->timing) return CUDA_ERROR_INVALID_HANDLE;
    if (!a->recorded || !b->recorded) return a->stream || b->stream ? CUDA_ERROR_NOT_READY : CUDA_ERROR_INVALID_HANDLE;
    if (a->stream || b->stream) return CUDA_ERROR_NOT_READY;   /* recorded again, not happened yet */
    *ms = (float)(b->at - a->at);
    return CUDA_SUCCESS;
}

/* A stream's work that waits for another's: runs that one's work up to the event. */
typedef struct mock_wait { CUstream other; unsigned long long upto; } mock_wait;
static void mock_run_wait(void *p) { mock_wait *w = p; mock_drain(w->other, w->upto); }

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    MOCK_API;
    CUresult rc = mock_need_context("cuStreamWaitEvent");
    if (mock_cuda_fault("cuStreamWaitEvent")) return CUDA_ERROR_LAUNCH_FAILED;
    if (rc != CUDA_SUCCESS) return rc;
    if (!e || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (e->capture) {   /* recorded in a capture: joins it, or adds to the frontier */
        struct CUgraph_st *g = NULL;
        for (CUstream o = mock_streams; o && !g; o = o->next)
            if (o->capturing && !o->joined && o->graph->id == e->capture) g = o->graph;
        if (!g || !s || (s->capturing && s->graph != g)) {
            mock_complain("cuStreamWaitEvent: the event was recorded in %s", g ? "another capture" : "a capture that has ended");
            return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        }
        if (!s->capturing) {
            if (s->queue.n > s->done) mock_drain_stream(s);   /* its eager work stays before the capture's */
            s->capturing = s->joined = true;
            s->graph = g;
            s->frontier.n = 0;
        }
        for (size_t i = 0; i < e->frontier.n; i++) mock_set_add(&s->frontier, e->frontier.v[i]);
        return mock.sticky;
    }
    if (s && s->capturing) {   /* an event from outside the capture cannot join it */
        mock_complain("cuStreamWaitEvent: waiting on an event recorded outside the capture");
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    if (!e->stream) return CUDA_SUCCESS;   /* never recorded, or it has happened */
    mock_wait w = {e->stream, e->seq + 1};
    return mock_cuda_enqueue(s, mock_run_wait, &w, sizeof w);
}

/* NVRTC asks a loaded driver for its private tables; there are none here. */
CUresult cuGetExportTable(const void **table, const CUuuid *id)
{
    MOCK_API;
    (void)id;
    *table = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- errors and the exit report ------------------------------------------ */

CUresult cuGetErrorString(CUresult rc, const char **s)
{
    MOCK_API;
    switch (rc) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "invalid device ordinal"; break;
    case CUDA_ERROR_NOT_READY: *s = "device not ready"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "invalid device context"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "device kernel image is invalid"; break;
    case CUDA_ERROR_INVALID_HANDLE: *s = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *s = "unspecified launch failure"; break;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: *s = "operation failed due to a previous error during capture"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *s = "operation not permitted when stream is capturing"; break;
    default: *s = "mock: some error"; return CUDA_SUCCESS;
    }
    return CUDA_SUCCESS;
}

__attribute__((destructor)) static void mock_exit_report(void)
{
    while (mock_functions) {
        mock_fn_cache *c = mock_functions;
        mock_functions = c->next;
        free(c->f);
        free(c);
    }
    mock_worklist_free(&mock_legacy);   /* what no synchronize asked for never ran, as at a GPU program's exit */
    if (mock_call_log) fclose(mock_call_log);
    if (mock_call_fail_at > mock_calls)
        mock_complain("at exit: %llu fallible calls; call %llu, asked to fail, never came", mock_calls, mock_call_fail_at);
    if (mock_htod_fail_at > mock_htod_copies)   /* the sweep that asked went past the process's copies */
        mock_complain("at exit: %llu host-to-device copies; copy %llu, asked to fail, never came", mock_htod_copies,
                      mock_htod_fail_at);
    bool leaked = mock.nblocks || mock.streams || mock.events || mock.modules || mock.graphs || mock.execs || mock.primary.retained;
    if (leaked)
        mock_complain("at exit: %zu allocations (%zu device bytes), %ld streams, %ld events, %ld modules, %ld graphs, %ld "
                      "executable graphs, %d context retains were never released",
                      mock.nblocks, mock.device_bytes, mock.streams, mock.events, mock.modules, mock.graphs, mock.execs,
                      mock.primary.retained);
    free(mock.blocks);
    if (leaked) _exit(3);
}
