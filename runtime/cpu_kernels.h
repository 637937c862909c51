/* cpu_kernels.h - the CPU reference kernels, one per op of ops.def (internal
 * to the CPU executor; the semantics are documented in cpu_exec.h and ops.def). */
#ifndef NRT_CPU_KERNELS_H
#define NRT_CPU_KERNELS_H

#include "cpu_crew.h"
#include "cpu_exec.h"

typedef void cpu_kernel_fn(const cpu_op_ctx *c);

/* Columns after cpu_kernel are taken as "...", so new columns do not touch this file. */
#define X(e, name, nargs, cat, dt, flags, shape, cpu, ...) cpu_kernel_fn cpu;
#include "ops.def"
#undef X

/* Indexed by nc_op; every entry is set (the table names a kernel for each op). */
extern cpu_kernel_fn *const cpu_kernels[OP_COUNT];

/* Report that a kernel cannot compute its result; the first report wins. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void cpu_fail(const cpu_op_ctx *c, const char *fmt, ...);

/* C = op(A) op(B) for a batch of products, [M, K] x [K, N] -> [M, N] each
 * (ta: A stored [K, M]; tb: B stored [N, K]), dense and row-major, one B for
 * all when b_shared. On a crew, whole products side by side, or a single
 * product's rows in slabs: the bits are those of one thread (see
 * cpu_gemm_split_rows). Returns the tiles it shared out (1: it ran them all
 * on the calling thread). */
int64_t cpu_gemm_batch(cpu_crew *crew, bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                       const float *A, const float *B, bool b_shared, float *C);

/* Slabs of a split product begin at multiples of this many rows, the fewest
 * that a probe of the BLAS found to give the whole product's bits; 0: the
 * BLAS runs on more than one thread of its own, is a serial OpenBLAS (not
 * safe to call from two threads), or no count kept the bits, and products
 * are not split. */
int cpu_gemm_split_rows(void);

/* The run's crew for a kernel's work of this many multiply-adds (its
 * products), or NULL: too little work to wake a thread, a BLAS that cannot
 * be called from several threads at once (see cpu_gemm_split_rows), or the
 * machine's cores all taken (a 1-minute load average of at least the crew's
 * threads: a preempted worker would hold the whole kernel up). */
cpu_crew *cpu_split_crew(const cpu_op_ctx *c, double work);

/* The BLAS as the split sees it. */
typedef enum cpu_blas_kind {
    CPU_BLAS_REAL,         /* (cpu_split_pretend) the one linked, as probed */
    CPU_BLAS_ONE_THREAD,   /* one thread a call, safe to call from several */
    CPU_BLAS_SERIAL,       /* a serial OpenBLAS, not safe to call from two threads */
    CPU_BLAS_THREADED,     /* runs a call on threads of its own */
} cpu_blas_kind;

/* For tests: the split's gates see this 1-minute load average (< 0: the
 * machine's) and this BLAS (CPU_BLAS_REAL: the linked one's kind); the
 * products still run on the linked BLAS. Not thread safe: call it while no
 * kernel runs. */
void cpu_split_pretend(double load, cpu_blas_kind blas);

/* For tests: causal attention computes whole rows of scores and masks them
 * (off), as a reference for its skip of the keys past each query (on, the
 * default where a probe found the skip keeps the bits). Not thread safe. */
void cpu_attention_skip_pretend(bool off);
/* Elements of products over the keys that the causal skip left out, all
 * runs together (0: the skip has not run, or the probe found it changes bits). */
int64_t cpu_attention_skipped(void);

/* The blocks an attention kernel on a crew of threads cuts each of its
 * batch entries' T query rows into (1: whole entries), S keys, DE = D + E:
 * the tiles (batch x blocks) fall evenly on the threads where the rows
 * allow (blocks begin at multiples of cpu_gemm_split_rows). */
int64_t cpu_attention_blocks(int64_t batch, int64_t T, int64_t S, int64_t DE, int threads);

/* The scratch bytes an attention kernel (op; wrt: a gradient's operand) of
 * batch entries, T queries, S keys, heads of D and values of E takes from
 * the run's pool at most on a crew of threads (cpu_exec_planned_bytes). */
int64_t cpu_attention_scratch_bytes(nc_op op, int wrt, int64_t batch, int64_t T, int64_t S, int64_t D, int64_t E,
                                    int threads);

/* Kernels that have shared their work out over a crew, in this process. */
int64_t cpu_split_shared(void);

/* A kernel's scratch of bytes (never freed by a run: give it back with
 * cpu_kernel_scratch_done), from the run's pool when it has one, so the pool
 * counts it (held_bytes, peak_bytes) and the next run reuses it. Take and
 * give back on the kernel's own thread, not inside a crew's tile. */
void *cpu_kernel_scratch(const cpu_op_ctx *c, size_t bytes);
void cpu_kernel_scratch_done(const cpu_op_ctx *c, void *data, size_t bytes);

/* Bytes of storage per element: f32 for floats, i32 for the rest. */
#define CPU_ELEM_BYTES 4

#endif
