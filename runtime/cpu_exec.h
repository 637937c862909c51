/* cpu_exec.h - the CPU reference executor: runs an IR graph op by op.
 *
 * It is the semantics every other backend is tested against, and the backend
 * used when no GPU is present. Floating tensors are stored as f32 arrays whose
 * values are exactly representable in their dtype (f16/bf16 results are
 * rounded to nearest even after each op, as a GPU storing them would);
 * integer and bool tensors are stored as i32 arrays. Arithmetic is done in
 * double and rounded once to f32 and then to the storage dtype; accumulating
 * ops accumulate in double.
 *
 * Integer arithmetic (i32, u8) is computed in int64 and wraps to the storage
 * width (two's complement for i32, modulo 256 for u8), as C on a GPU would;
 * integer division truncates and division by zero gives 0. Conversions
 * (cast, cpu_set) saturate instead: float -> int truncates toward zero and
 * clamps to the dtype's range, NaN -> 0; -> bool is (x != 0). */
#ifndef NRT_CPU_EXEC_H
#define NRT_CPU_EXEC_H

#include "ir.h"

typedef struct cpu_tensor {
    nc_dtype dtype;
    uint8_t rank;
    int64_t shape[NC_MAX_RANK];
    int64_t numel;
    float *f;          /* float dtypes (NULL otherwise) */
    int32_t *i;        /* i32, u8, bool (NULL otherwise) */
    bool splat;        /* one element stored, standing for all numel: a broadcast the
                          executor left unwritten (only kernels of 2-3 operand
                          elementwise ops ever see one) */
    int64_t repeat;    /* over 1: each element stored stands for this many in a row, a
                          broadcast over the last axis the executor left unwritten
                          (only where's condition is ever one) */
} cpu_tensor;

/* Allocate zeroed storage for a tensor; false (and no allocation) if the
 * element count is negative or overflows, the bytes exceed limit_bytes
 * (<= 0: 16 GiB), or memory is short. Storage is 4 bytes per element
 * whatever the dtype (f32 or i32). */
bool cpu_tensor_alloc(cpu_tensor *t, nc_dtype dtype, uint8_t rank, const int64_t *shape, int64_t limit_bytes);
void cpu_tensor_free(cpu_tensor *t);
double cpu_get(const cpu_tensor *t, int64_t i);
void cpu_set(cpu_tensor *t, int64_t i, double v);   /* rounds/clamps to the dtype */

/* The native layout of a tensor's elements, as kernels and libnetrt callers
 * store them: f32 and i32 in 4 bytes, f16 and bf16 as their 2-byte bits, u8
 * and bool in one byte. */
void cpu_tensor_to_native(const cpu_tensor *t, void *data);
void cpu_tensor_from_native(const void *data, cpu_tensor *t);
/* Element i of native data of dtype t. */
double cpu_native_get(nc_dtype t, const void *data, int64_t i);

/* What a kernel sees: its node, the evaluated operands, and its result
 * (already allocated, shape set). The result's storage may hold a value of an
 * earlier run (cpu_pool): a kernel writes every element of it. */
typedef struct cpu_op_ctx {
    const ir_graph *g;
    const ir_node *node;
    const cpu_tensor *const *args;
    cpu_tensor *out;
    const int64_t *syms;       /* values of the symbolic dims */
    int64_t first, whole;      /* out holds elements [first, first + out->numel) of a result
                                  of whole elements (a chain's tile; whole 0: all of it);
                                  only gather reads them, the elementwise kernels being
                                  position independent */
    char *err;                 /* a kernel that cannot compute its result (index out of
                                  range) writes why here; cpu_exec_run then fails */
    size_t errcap;
    /* The run's worker threads, for a kernel that splits its own work (a
       matmul's rows), started at the first ask; NULL, or a NULL answer: the
       calling thread alone. Never inside a chain's tile (a worker's). */
    struct cpu_crew *(*crew)(void *run);
    void *run;
} cpu_op_ctx;

/* Storage kept from run to run, so a training step that repeats allocates
 * (and the kernel zeroes and faults in) nothing new: each value's buffer comes
 * from here and goes back at its last use. Buffers are matched by exact size;
 * one that a whole run did not use is freed at that run's end, so a pool holds
 * about one run's peak. One pool per graph (and per thread); zero-initialise. */
typedef struct cpu_pool_buf {
    void *data;
    size_t bytes;
    uint32_t run;              /* the run it was last given back in */
} cpu_pool_buf;

/* Values that depend on no input and no parameter (a convolution's window
 * indices: iota, fill, integer arithmetic on them) are the same in every run
 * at one binding of the dims. A run computes them once and leaves the ones the
 * rest of the graph reads here (or the buffers those view), up to 64 MiB in
 * all (CPU_CONST_CACHE_BYTES); later runs of the same graph at the same
 * binding read them from here and skip their computation. A run of another
 * graph (told apart by its address: one pool per graph), binding or max_bytes
 * starts over. Never with keep_all (every value is wanted). */
typedef struct cpu_const_cache cpu_const_cache;

typedef struct cpu_pool {
    cpu_pool_buf *bufs;        /* free buffers */
    uint32_t n, cap;
    uint32_t run;              /* runs begun with this pool */
    uint64_t fresh;            /* buffers allocated rather than reused, ever (tests) */
    int64_t held_bytes;        /* storage allocated through the pool and not yet freed: values'
                                  buffers (in use or free here), chain and kernel scratch
                                  (cpu_kernel_scratch), kept constants */
    int64_t peak_bytes;        /* the most held_bytes ever was (tests, netc train's report) */
    cpu_const_cache *consts;   /* the constant values kept from run to run (NULL: none yet) */
    uint64_t const_builds;     /* runs that computed the constants afresh, ever (tests) */
    uint64_t const_reads;      /* values read from the kept constants instead, ever (tests) */
} cpu_pool;

void cpu_pool_free(cpu_pool *p);
/* Frees what p holds between runs (its free buffers, the kept constants) and
 * keeps its counts: a pool that waits while another graph runs (a training
 * step's, during the evaluation) would otherwise hold its peak beside that
 * one's. The next run allocates afresh and rebuilds the constants. */
void cpu_pool_release(cpu_pool *p);

typedef struct cpu_exec_opts {
    const int64_t *syms;       /* g->nsyms values */
    const cpu_tensor *inputs;  /* g->ninputs, shapes matching the declarations */
    const cpu_tensor *params;  /* g->nparams */
    int64_t max_bytes;         /* refuse any single tensor larger than this (0 = 16 GiB) */
    bool keep_all;             /* keep every node's value (tests); else free at last use */
    cpu_pool *pool;            /* where values' storage comes from and goes back to (NULL: the heap) */
    bool update_in_place;      /* a training step: an update computed in a chain, whose parameter
                                  nothing reads after it, is written over the caller's parameter
                                  as it is computed (no buffer of its own, no copy);
                                  cpu_exec_apply_updates then finds it there. A run that fails
                                  may have changed such parameters. Not with keep_all. */
} cpu_exec_opts;

typedef struct cpu_exec_result {
    cpu_tensor *values;        /* g->nnodes entries; freed ones have NULL data */
    uint32_t nvalues;
    bool *borrowed;            /* values[v] aliases a caller's input or param (not
                                  copied): valid as long as that tensor is. Graph
                                  outputs are never borrowed. */
    cpu_pool *pool;            /* cpu_exec_result_free gives the storage back here */
} cpu_exec_result;

/* Run the whole graph. Returns 0, or -1 with a message in err (bad binding,
 * shape mismatch of an input, a kernel's error such as an index out of
 * range), or CPU_EXEC_NO_MEMORY with one when a tensor is over max_bytes or
 * its allocation is refused; on failure res holds nothing. Outputs are the values of
 * g->outputs[k].value in res->values; free with cpu_exec_result_free. */
enum { CPU_EXEC_NO_MEMORY = -2 };
int cpu_exec_run(const ir_graph *g, const cpu_exec_opts *o, cpu_exec_result *res, char *err, size_t errcap);
void cpu_exec_result_free(cpu_exec_result *res);
/* After a training step: each updated parameter (or optimizer state) in
 * params takes the value the step computed for it. Where that value is the
 * run's own and read by nothing else, its buffer becomes the parameter's (no
 * copy): params' data must be heap memory of their size (cpu_tensor_alloc),
 * the old buffer goes back to res's pool or is freed, and res reads the value
 * (and any value borrowing the old parameter) as freed. */
void cpu_exec_apply_updates(const ir_graph *g, cpu_exec_result *res, cpu_tensor *params);

/* What a run of g at the binding syms holds in its pool for values at most,
 * from the graph alone (no run, no pool: the same figure every time): in
 * node order, each result's storage (CPU_ELEM_BYTES an element) taken, and
 * given back after its last reader, to be taken again only by a result of
 * exactly its size, so each size counts the most results of it alive at
 * once; a reshape is a view of its operand (which lives as long), the inputs
 * and parameters are the caller's; an attention kernel's scratch (its
 * scores) counts as a result of its size while the kernel runs, on the
 * crew's buffers (NETC_CPU_THREADS) wherever a crew may run. A pool
 * measures less where a chained result gets no buffer (an optimizer's:
 * fashion_cnn's step at B = 128 plans 202 MiB, holds 179) or no crew ran,
 * and more by its kept constants: netc train sizes its evaluation's runs by
 * it, against its step's. */
int64_t cpu_exec_planned_bytes(const ir_graph *g, const int64_t *syms);

/* Threads the CPU executor's matmuls use: 1 (the same bits on any machine)
 * unless OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or OMP_NUM_THREADS asks for
 * more. The first matmul sets OpenBLAS's process-wide count. */
int cpu_blas_threads(void);

/* The counter-based RNG shared by every backend (dropout, initialisers):
 * a pure function of (seed, stream, index), so CPU and GPU draw identically.
 * Dropout's stream is its step operand, the graph's @step input (ir.h,
 * ir_step_slot): data, like any input, so the executor has no step of its
 * own, and a graph without the operand (inference) does not drop. */
static inline uint64_t nc_rng_hash(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ull ^ (stream + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull ^ index;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [0, 1) with 24 random bits (exact in f32). */
static inline float nc_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    return (float)(nc_rng_hash(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

#endif
