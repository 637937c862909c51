// cuda_host_shim.hpp - enough CUDA to run netc's generated kernels on the
// CPU (tests/unit/test_kernels_host.c compiles them as C++ after this file).
//
// A launch runs its blocks one after another; a block's threads are fibers
// (a stack each, nc_switch): __syncthreads waits for every live thread of
// the block, a warp shuffle for every live thread of its warp (it exchanges
// values through a slot per thread between two warp barriers). Each warp
// runs as far as it can (to a block barrier or its end) before the next
// warp starts, in opposite orders in even and odd blocks (nc_host_launch), so most kernels
// that lack a barrier read another warp's data too early or too late here
// and fail, as do those that deadlock or mix up threads' data. __shared__
// variables are statics in one section, one instance for the block running,
// filled with ones before each block (NaN as floats, -1 as ints): a block
// that reads shared memory it never wrote reads those, not the values an
// earlier block left.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NC_HOST 1
#define __device__
#define __forceinline__ inline
#define __noinline__   // on the host, inlining is the compiler's choice
#define __global__
#define __shared__ static __attribute__((section("nc_shared")))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct nc_dim3 { long long x; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
extern "C" { nc_dim3 blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1}; }

static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float nc_f16_to_f32(unsigned short h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
static inline unsigned short nc_f32_to_f16(float f) { _Float16 x = (_Float16)f; unsigned short h; memcpy(&h, &x, 2); return h; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)((unsigned long long)a * b >> 32); }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline float atomicAdd(float *p, float v) { float o = *p; *p += v; return o; }
static inline int atomicAdd(int *p, int v) { int o = *p; *p += v; return o; }

enum { NC_RUNNING, NC_AT_BLOCK_BARRIER, NC_AT_WARP_BARRIER, NC_FINISHED };
enum { NC_MAX_THREADS = 1024, NC_STACK = 256 * 1024 };

// A fiber switch saves the registers a call must keep on the running stack
// and resumes the context saved in *to. On x86-64 it is a dozen
// instructions: swapcontext also saves the signal mask, a system call a
// switch that took half of a mock GPU run's time, and under AddressSanitizer
// its interceptor cleared the shadow of the whole stack entered, before and
// after. The fibers run this file's uninstrumented code, which leaves no
// poison on their stacks.
#if defined(__x86_64__)
typedef void *nc_context;   // the stack pointer, the saved registers on top
extern "C" __attribute__((visibility("hidden"))) void nc_switch_stacks(nc_context *save, nc_context to);
__asm__(".text\n"
        ".p2align 4\n"
        ".type nc_switch_stacks, @function\n"
        "nc_switch_stacks:\n"
        "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
        "    ret\n"
        ".size nc_switch_stacks, .-nc_switch_stacks\n");

static void nc_switch(nc_context *save, nc_context *to) { nc_switch_stacks(save, *to); }

// A context that starts entry on the stack [stack, stack + size): six zero
// registers to pop, then entry as the address to return to, above it a
// null return address of entry's own so that entry starts as after a call
// (the stack pointer 8 past a multiple of 16).
static void nc_context_start(nc_context *c, char *stack, size_t size, void (*entry)(void))
{
    void **top = (void **)(((uintptr_t)stack + size) & ~(uintptr_t)15);
    top[-1] = NULL;
    top[-2] = (void *)entry;
    for (int r = 3; r <= 8; r++) top[-r] = NULL;
    *c = (nc_context)(top - 8);
}
#else
#include <dlfcn.h>
#include <ucontext.h>

typedef ucontext_t nc_context;

static void nc_switch(nc_context *save, nc_context *to)
{
    // The C library's own swapcontext, not a sanitizer's interceptor.
    static int (*own)(ucontext_t *, const ucontext_t *);
    if (!own) {
        void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        void *f = libc ? dlsym(libc, "swapcontext") : NULL;
        own = f ? (int (*)(ucontext_t *, const ucontext_t *))f : swapcontext;
        if (libc) dlclose(libc);   // only the reference NOLOAD took: the C library stays
    }
    own(save, to);
}

static void nc_context_start(nc_context *c, char *stack, size_t size, void (*entry)(void))
{
    getcontext(c);
    c->uc_stack.ss_sp = stack;
    c->uc_stack.ss_size = size;
    c->uc_link = NULL;   // entry never returns: it switches back to the scheduler
    makecontext(c, entry, 0);
}
#endif

// A thread takes a stack when it first runs and gives it back when it
// finishes, and the next thread to start takes the stack given back last:
// a block without barriers runs all its threads on one stack, warm in the
// cache, at about the cost of plain calls, and a block whose threads wait
// at a barrier holds a stack a thread. So every block runs as fibers, and
// blocks may take different paths, as on a GPU: a head of attention that
// sees no key skips its loop and the loop's barriers (nc_host_launch).
struct nc_fiber { nc_context ctx; int state; char *stack; };   // stack: null before the start and after the end
static nc_fiber nc_fibers[NC_MAX_THREADS];
static char *nc_spare[NC_MAX_THREADS];   // the stacks no thread holds, nc_nspare of them
static int nc_nspare, nc_nstacks;        // nc_nstacks: all stacks allocated
static nc_context nc_scheduler;
static int nc_current;
static float nc_exchange[NC_MAX_THREADS];
static void (*nc_thunk)(void *);
static void *nc_thunk_ctx;

// Every thread of a kernel starts by waiting for its grid dependencies
// (programmatic dependent launch): counted, so the mock driver can check
// that each thread of a kernel it launched early did (mock_cuda.c).
extern "C" { long long nc_grid_dependency_waits = 0; }
#define NC_PDL_ENTER() ((void)nc_grid_dependency_waits++)

// Back to the scheduler until the barrier opens; the scheduler sets threadIdx.
static inline void nc_wait(int barrier)
{
    nc_fiber *f = &nc_fibers[nc_current];
    f->state = barrier;
    nc_switch(&f->ctx, &nc_scheduler);
}

static inline void __syncthreads(void) { nc_wait(NC_AT_BLOCK_BARRIER); }

static inline float __shfl_xor_sync(unsigned, float v, int lane_mask)
{
    int me = (int)threadIdx.x;
    nc_exchange[me] = v;
    nc_wait(NC_AT_WARP_BARRIER);
    float other = nc_exchange[me ^ lane_mask];
    nc_wait(NC_AT_WARP_BARRIER);
    return other;
}

static inline int __all_sync(unsigned, int predicate)
{
    int me = (int)threadIdx.x, warp0 = me & ~31, all = 1;
    nc_exchange[me] = predicate ? 1.0f : 0.0f;
    nc_wait(NC_AT_WARP_BARRIER);
    for (int l = 0; l < 32 && warp0 + l < (int)blockDim.x; l++) all &= nc_exchange[warp0 + l] != 0.0f;
    nc_wait(NC_AT_WARP_BARRIER);
    return all;
}

// mma.sync m16n8k16 for one warp: every lane puts its fragments in a slot,
// then computes its own accumulators from the whole warp's, by the PTX
// fragment layouts (lane = 4 gid + tig).
static unsigned nc_mma_slots[NC_MAX_THREADS][6];

static inline float nc_host_half(unsigned short h, bool bf)
{
    if (bf) return __uint_as_float((unsigned)h << 16);
    return nc_f16_to_f32(h);
}

static inline float nc_fragment_value(const unsigned *regs, int i, bool bf)   // element i, two a register, low half first
{
    return nc_host_half((unsigned short)(regs[i >> 1] >> (16 * (i & 1)) & 0xffffu), bf);
}

static inline void nc_mma_host(float *d, const unsigned *a, const unsigned *b, bool bf)
{
    int me = (int)threadIdx.x, warp0 = me & ~31, lane = me & 31;
    for (int i = 0; i < 4; i++) nc_mma_slots[me][i] = a[i];
    nc_mma_slots[me][4] = b[0], nc_mma_slots[me][5] = b[1];
    nc_wait(NC_AT_WARP_BARRIER);
    for (int e = 0; e < 4; e++) {
        int row = (lane >> 2) + (e >= 2 ? 8 : 0), col = (lane & 3) * 2 + (e & 1);
        float acc = 0.0f;
        for (int k = 0; k < 16; k++) {
            // A[row][k] sits in lane 4 (row % 8) + (k % 8) / 2, element (k & 1) + 2 (row >= 8) + 4 (k >= 8)
            int la = warp0 + (row & 7) * 4 + ((k & 7) >> 1), ia = (k & 1) + (row >= 8 ? 2 : 0) + (k >= 8 ? 4 : 0);
            // B[k][col] sits in lane 4 col + (k % 8) / 2, element (k & 1) + 2 (k >= 8)
            int lb = warp0 + col * 4 + ((k & 7) >> 1), ib = (k & 1) + (k >= 8 ? 2 : 0);
            acc += nc_fragment_value(nc_mma_slots[la], ia, bf) * nc_fragment_value(&nc_mma_slots[lb][4], ib, bf);
        }
        d[e] += acc;
    }
    nc_wait(NC_AT_WARP_BARRIER);
}

static inline void nc_mma_bf16(float *d, const unsigned *a, const unsigned *b) { nc_mma_host(d, a, b, true); }
static inline void nc_mma_f16(float *d, const unsigned *a, const unsigned *b) { nc_mma_host(d, a, b, false); }

static void nc_misaligned_by(const char *what, const void *p, size_t bytes)
{
    if ((size_t)p % bytes == 0) return;
    fprintf(stderr, "cuda_host_shim: %s at %p, not a multiple of %zu bytes (block %lld, thread %lld)\n", what, p, bytes,
            blockIdx.x, threadIdx.x);
    abort();
}
static void nc_misaligned(const char *what, const void *p) { nc_misaligned_by(what, p, 16); }
// The generated vector loads and stores (nc_ld8, nc_st8): a GPU faults on a
// misaligned one, x86 does not.
#define NC_VECTOR_AT(p, bytes) nc_misaligned_by("a " #bytes "-byte vector access", (p), (bytes))

// ldmatrix .x4: every lane puts its row address in a slot; lane l gets of
// matrix i (rows from lanes 8 i .. 8 i + 7) the two values of row l / 4 at
// columns 2 (l % 4), 2 (l % 4) + 1, or transposed (.trans) the values of
// column l / 4 in rows 2 (l % 4) and 2 (l % 4) + 1.
static const unsigned short *nc_ldsm_rows[NC_MAX_THREADS];

static inline void nc_ldsm_host(unsigned *r, const unsigned *p, bool trans)
{
    int me = (int)threadIdx.x, warp0 = me & ~31, lane = me & 31;
    nc_misaligned("an ldmatrix row", p);
    nc_ldsm_rows[me] = (const unsigned short *)p;
    nc_wait(NC_AT_WARP_BARRIER);
    for (int i = 0; i < 4; i++) {
        const unsigned short *const *rows = &nc_ldsm_rows[warp0 + 8 * i];
        unsigned lo, hi;
        if (trans) lo = rows[2 * (lane & 3)][lane >> 2], hi = rows[2 * (lane & 3) + 1][lane >> 2];
        else lo = rows[lane >> 2][2 * (lane & 3)], hi = rows[lane >> 2][2 * (lane & 3) + 1];
        r[i] = lo | hi << 16;
    }
    nc_wait(NC_AT_WARP_BARRIER);
}

static inline float nc_exp2(float x) { return exp2f(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline void nc_ldsm4(unsigned *r, const unsigned *p) { nc_ldsm_host(r, p, false); }
static inline void nc_ldsm4_t(unsigned *r, const unsigned *p) { nc_ldsm_host(r, p, true); }

// cp.async of 16 bytes: the copy happens at the thread's next nc_cp_wait,
// and the destination holds NaN patterns until then, so a tile read before
// its wait shows. A thread that ends with copies pending fails.
enum { NC_MAX_COPIES = 64 };
struct nc_copy { unsigned *dst; const void *src; bool ok; };
static nc_copy nc_copies[NC_MAX_THREADS][NC_MAX_COPIES];
static int nc_ncopies[NC_MAX_THREADS];

static inline void nc_cp16(unsigned *dst, const void *src, bool ok)
{
    int me = (int)threadIdx.x;
    nc_misaligned("a cp.async destination", dst);
    if (ok) nc_misaligned("a cp.async source", src);
    if (nc_ncopies[me] == NC_MAX_COPIES) {
        fprintf(stderr, "cuda_host_shim: more than %d copies in flight in thread %d\n", NC_MAX_COPIES, me);
        abort();
    }
    nc_copies[me][nc_ncopies[me]++] = nc_copy{dst, src, ok};
    memset(dst, 0xff, 16);
}

static inline void nc_cp_wait(void)
{
    int me = (int)threadIdx.x;
    for (int i = 0; i < nc_ncopies[me]; i++) {
        nc_copy *c = &nc_copies[me][i];
        if (c->ok) memcpy(c->dst, c->src, 16);
        else memset(c->dst, 0, 16);
    }
    nc_ncopies[me] = 0;
}

static void nc_check_copies_done(void)
{
    if (nc_ncopies[threadIdx.x] == 0) return;
    fprintf(stderr, "cuda_host_shim: thread %lld of block %lld ends with cp.async copies never waited for\n", threadIdx.x, blockIdx.x);
    abort();
}

// wgmma m64nNk16, N 64 or 128 (A in registers, B in shared memory by descriptor) for a
// warpgroup, here a block of 128 threads: every thread puts its A fragment
// in a slot, then computes its own 32 accumulators from the whole group's,
// B read by the descriptor's address and the 128-byte swizzle of address
// bits (piece bits 4-6 ^= row bits 7-9; the tiles are 1024-byte aligned, as
// on the GPU). The results land at nc_wg_wait, as on the GPU, where they are
// there only after the wait: a kernel reading its accumulators before it
// waits reads the old values. A descriptor here is the tile's address in
// units of 16 bytes, as in a real one's low bits (kernels step through a
// tile by adding to it), and from bit 48 the leading byte offset, also in
// units of 16 bytes: an N-major B of 128 columns takes its second 64 from
// there.
enum { NC_WG_MAX_PENDING = 4 };
struct nc_wg_result { float *d; int n; float v[64]; };
static unsigned nc_wg_slots[NC_MAX_THREADS][4];
static nc_wg_result nc_wg_pending[NC_MAX_THREADS][NC_WG_MAX_PENDING];
static int nc_wg_npending[NC_MAX_THREADS];

static inline unsigned long long nc_wg_desc_lbo(const void *p, unsigned long long lbo)
{
    nc_misaligned_by("a wgmma operand", p, 16);
    return (unsigned long long)((size_t)p >> 4) | (lbo >> 4) << 48;
}
static inline unsigned long long nc_wg_desc(const void *p) { return nc_wg_desc_lbo(p, 16); }
static inline unsigned long long nc_wg_desc_wide(const void *p) { return nc_wg_desc_lbo(p, 8192); }
static inline void nc_wg_hold(unsigned *, int) {}
static inline void nc_wg_hold_acc(float *) {}
static inline void nc_wg_fence(void) {}
static inline void nc_wg_commit(void) {}
static inline void nc_proxy_fence(void) {}
static inline void nc_wg_check_aligned(const void *p) { nc_misaligned_by("a wgmma tile", p, 1024); }

// B[k][n]: the tile's row n, column k (K-major: the tile's rows transposed),
// or its row k, column n (N-major: the tile itself).
static inline float nc_wg_b(unsigned long long desc, int k, int n, bool n_major, bool bf)
{
    int row = n_major ? k : n, col = n_major ? n % 64 : k;
    size_t base = (size_t)(desc & ((1ull << 48) - 1)) << 4, lbo = (size_t)(desc >> 48) << 4;
    size_t at = base + (n_major ? (size_t)(n / 64) * lbo : 0) + (size_t)(row / 8) * 1024 + (size_t)(row % 8) * 128 + (size_t)col * 2;
    at ^= ((at >> 7) & 7) << 4;
    unsigned short h;
    memcpy(&h, (const void *)at, 2);
    return nc_host_half(h, bf);
}

static inline nc_wg_result *nc_wg_result_for(int me, float *d, int n)
{
    for (int i = 0; i < nc_wg_npending[me]; i++)
        if (nc_wg_pending[me][i].d == d) return &nc_wg_pending[me][i];
    if (nc_wg_npending[me] == NC_WG_MAX_PENDING) {
        fprintf(stderr, "cuda_host_shim: more than %d wgmma accumulators in flight in thread %d\n", NC_WG_MAX_PENDING, me);
        abort();
    }
    nc_wg_result *r = &nc_wg_pending[me][nc_wg_npending[me]++];
    r->d = d, r->n = n;
    memcpy(r->v, d, (size_t)n * sizeof *d);
    return r;
}

static inline void nc_wgmma_host(float *d, const unsigned *a, unsigned long long desc, int acc, bool n_major, bool bf, int N)
{
    if (blockDim.x != 128) {
        fprintf(stderr, "cuda_host_shim: wgmma in a block of %lld threads (a warpgroup is 128)\n", blockDim.x);
        abort();
    }
    int me = (int)threadIdx.x, warp = me >> 5, lane = me & 31;
    for (int i = 0; i < 4; i++) nc_wg_slots[me][i] = a[i];
    nc_wait(NC_AT_BLOCK_BARRIER);
    nc_wg_result *r = nc_wg_result_for(me, d, N / 2);
    if (r->n != N / 2) {
        fprintf(stderr, "cuda_host_shim: wgmma accumulators of %d and %d floats at one address\n", r->n, N / 2);
        abort();
    }
    for (int e = 0; e < N / 2; e++) {
        int row = 16 * warp + (lane >> 2) + (e & 2 ? 8 : 0), col = 8 * (e >> 2) + (lane & 3) * 2 + (e & 1);
        float sum = 0.0f;
        for (int k = 0; k < 16; k++) {
            // A[row][k]: warp row / 16, lane 4 (row % 8) + (k % 8) / 2, element (k & 1) + 2 (row % 16 >= 8) + 4 (k >= 8)
            int la = 32 * (row >> 4) + (row & 7) * 4 + ((k & 7) >> 1), ia = (k & 1) + (row & 8 ? 2 : 0) + (k >= 8 ? 4 : 0);
            sum += nc_fragment_value(nc_wg_slots[la], ia, bf) * nc_wg_b(desc, k, col, n_major, bf);
        }
        r->v[e] = (acc ? r->v[e] : 0.0f) + sum;
    }
    nc_wait(NC_AT_BLOCK_BARRIER);
}

static inline void nc_wgmma_bf16_k(float *d, const unsigned *a, unsigned long long desc, int acc) { nc_wgmma_host(d, a, desc, acc, false, true, 64); }
static inline void nc_wgmma_bf16_n(float *d, const unsigned *a, unsigned long long desc, int acc) { nc_wgmma_host(d, a, desc, acc, true, true, 64); }
static inline void nc_wgmma_f16_k(float *d, const unsigned *a, unsigned long long desc, int acc) { nc_wgmma_host(d, a, desc, acc, false, false, 64); }
static inline void nc_wgmma_f16_n(float *d, const unsigned *a, unsigned long long desc, int acc) { nc_wgmma_host(d, a, desc, acc, true, false, 64); }
static inline void nc_wgmma_bf16_n128(float *d, const unsigned *a, unsigned long long desc, int acc) { nc_wgmma_host(d, a, desc, acc, true, true, 128); }
static inline void nc_wgmma_f16_n128(float *d, const unsigned *a, unsigned long long desc, int acc) { nc_wgmma_host(d, a, desc, acc, true, false, 128); }

static inline void nc_wg_wait(float *)
{
    int me = (int)threadIdx.x;
    for (int i = 0; i < nc_wg_npending[me]; i++)
        memcpy(nc_wg_pending[me][i].d, nc_wg_pending[me][i].v, (size_t)nc_wg_pending[me][i].n * sizeof(float));
    nc_wg_npending[me] = 0;
}

static void nc_check_products_done(void)
{
    if (nc_wg_npending[threadIdx.x] == 0) return;
    fprintf(stderr, "cuda_host_shim: thread %lld of block %lld ends with wgmma results never waited for\n", threadIdx.x, blockIdx.x);
    abort();
}

static void nc_fiber_main(void)
{
    nc_thunk(nc_thunk_ctx);
    nc_check_copies_done();
    nc_check_products_done();
    nc_fiber *f = &nc_fibers[nc_current];
    f->state = NC_FINISHED;
    nc_switch(&f->ctx, &nc_scheduler);   // never resumed: the next block starts it afresh
}

// Runs warp w's live threads (last to first when backwards) through the
// warp's barriers until every one of them waits at a block barrier or has
// finished; false if a warp barrier cannot open (lanes wait at different
// barriers).
static bool nc_run_warp(int w, int threads, bool backwards)
{
    int first = 32 * w, n = threads - first < 32 ? threads - first : 32;
    for (;;) {
        for (int i = 0; i < n; i++) {
            int t = first + (backwards ? n - 1 - i : i);
            nc_fiber *f = &nc_fibers[t];
            if (f->state != NC_RUNNING) continue;
            if (!f->stack) f->stack = nc_spare[--nc_nspare], nc_context_start(&f->ctx, f->stack, NC_STACK, nc_fiber_main);
            nc_current = t, threadIdx.x = t;
            nc_switch(&nc_scheduler, &f->ctx);
            if (f->state == NC_FINISHED) nc_spare[nc_nspare++] = f->stack, f->stack = NULL;
        }
        bool waiting = false, complete = true;
        for (int t = first; t < first + n; t++) {
            waiting |= nc_fibers[t].state == NC_AT_WARP_BARRIER;
            complete &= nc_fibers[t].state == NC_AT_WARP_BARRIER || nc_fibers[t].state == NC_FINISHED;
        }
        if (!waiting) return true;
        if (!complete) return false;
        for (int t = first; t < first + n; t++)
            if (nc_fibers[t].state == NC_AT_WARP_BARRIER) nc_fibers[t].state = NC_RUNNING;
    }
}

// Gives back the stacks of the threads a failed launch left waiting.
static void nc_reclaim_stacks(void)
{
    for (int t = 0; t < NC_MAX_THREADS; t++)
        if (nc_fibers[t].stack) nc_spare[nc_nspare++] = nc_fibers[t].stack, nc_fibers[t].stack = NULL;
}

// Enough stacks for every thread of a block to wait at a barrier; false
// if out of memory.
static bool nc_reserve_stacks(long long threads)
{
    for (; nc_nstacks < threads; nc_nstacks++) {
        char *stack = (char *)malloc(NC_STACK);
        if (!stack) return false;
        nc_spare[nc_nspare++] = stack;
    }
    return true;
}

// Frees the threads' stacks (before the library is closed).
extern "C" void nc_host_release(void)
{
    nc_reclaim_stacks();
    while (nc_nspare) free(nc_spare[--nc_nspare]);
    nc_nstacks = 0;
}

// The linker's bounds of the nc_shared section (absent, both null, when no
// kernel of this program declares shared memory).
extern "C" char __start_nc_shared[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_nc_shared[] __attribute__((weak, visibility("hidden")));

static void nc_poison_shared(void)
{
    if (__start_nc_shared && __stop_nc_shared > __start_nc_shared)
        memset(__start_nc_shared, 0xff, (size_t)(__stop_nc_shared - __start_nc_shared));
}

// Set by a test: launches run block 0, then the others last to first, and
// each block's warps and lanes in the order the other parity gets. A
// kernel whose result depends on which thread comes first (atomic float
// adds) gives other bits.
extern "C" { int nc_host_reverse = 0; }

// Runs thunk(ctx) as every thread of blocks x threads; 0, or -1 with err set.
extern "C" int nc_host_launch(void (*thunk)(void *), void *ctx, long long blocks, long long threads, char *err,
                              size_t errcap)
{
    if (threads < 1 || threads > NC_MAX_THREADS) {
        snprintf(err, errcap, "%lld threads a block", threads);
        return -1;
    }
    if (!nc_reserve_stacks(threads)) {
        snprintf(err, errcap, "no memory for %lld threads' stacks", threads);
        return -1;
    }
    nc_thunk = thunk, nc_thunk_ctx = ctx;
    gridDim.x = blocks, blockDim.x = threads;
    for (long long turn = 0; turn < blocks; turn++) {
        const long long b = nc_host_reverse && turn ? blocks - turn : turn;
        blockIdx.x = b;
        nc_poison_shared();
        for (int t = 0; t < threads; t++) nc_fibers[t].state = NC_RUNNING;
        // A block's warps run one after another, each as far as it can go
        // before the next starts, and odd blocks run their warps and lanes
        // last to first: a GPU orders nothing between barriers, so a thread
        // that reads what another writes without a barrier between them (a
        // tile another warp copies in, a partial sum, a buffer about to be
        // reused, an operand another warp overwrites in place) reads it too
        // early or too late in one of the two orders.
        bool backwards = (b & 1) != (nc_host_reverse != 0);
        int warps = (int)((threads + 31) / 32);
        for (;;) {
            for (int i = 0; i < warps; i++)
                if (!nc_run_warp(backwards ? warps - 1 - i : i, (int)threads, backwards)) {
                    snprintf(err, errcap, "block %lld: the lanes of a warp wait at different barriers", b);
                    nc_reclaim_stacks();
                    return -1;
                }
            bool live = false;
            for (int t = 0; t < threads; t++) live |= nc_fibers[t].state != NC_FINISHED;
            if (!live) break;
            for (int t = 0; t < threads; t++)   // every live thread waits at a block barrier now
                if (nc_fibers[t].state == NC_AT_BLOCK_BARRIER) nc_fibers[t].state = NC_RUNNING;
        }
    }
    return 0;
}
