/* program.h - what a compiled model runs: an ordered list of steps (kernel
 * launches, cuBLASLt matmuls, copies) over buffers, with every size kept as a
 * dim id so one module runs at any binding of its symbolic dims.
 *
 * Written by the compiler (compiler/schedule.c, cuda_emit.c), stored in the
 * module file (module.c), followed by the runtime (gpu_exec.c). */
#ifndef NRT_PROGRAM_H
#define NRT_PROGRAM_H

#include "ir.h"

/* A kernel's argument struct holds this many buffer pointers and sizes: the
 * limit on a fused kernel's inputs plus outputs (an Adam update of one
 * parameter needs 11; a kernel updating several parameters shares the
 * scalars). Changing either changes the kernel ABI and the module format. */
#define NRT_MAX_BUFS 64
#define NRT_MAX_SECTIONS 8             /* independent loops one fused kernel may hold */
#define NRT_SECTION_SHARED 0xff        /* an operand several sections read */
#define NRT_MAX_INTS 20
#define NRT_STR_(x) #x
#define NRT_STR(x) NRT_STR_(x)

typedef enum nrt_step_kind {
    NRT_STEP_KERNEL = 1,   /* launch kernels[kernel] with the step's buffers and ints */
    NRT_STEP_MATMUL = 2,   /* cuBLASLt: bufs = a, b, [bias], [residual], out, [aux] (nrt_matmul_slots);
                              ints = batch dims..., M, N, K */
    NRT_STEP_COPY = 3,     /* bufs = src, dst; ints[0] = element count */
} nrt_step_kind;

typedef enum nrt_grid {
    NRT_GRID_ELEMENTS = 1, /* ints[0] threads, 256 a block, grid-stride loop */
    NRT_GRID_ROWS = 2,     /* ints[0] / ints[1] rows, one 256-thread block a row */
    NRT_GRID_WARPS = 3,    /* ints[0] outputs, one warp each, 8 warps a block */
    NRT_GRID_SINGLE = 4,   /* one 1024-thread block */
    NRT_GRID_TILES = 5,    /* ints[0] groups of ints[1] rows, one 128-thread block per 64 rows of a group */
} nrt_grid;

/* Buffers: ids below the graph's node count are IR values; the others are
 * temporaries (scratch a step needs), temps[id - nnodes]. */
typedef struct nrt_temp {
    uint32_t numel;        /* dim id */
    nc_dtype dtype;
} nrt_temp;

typedef struct nrt_step {
    nrt_step_kind kind;
    nrt_grid grid;
    uint32_t kernel;       /* index into kernel names */
    uint32_t node;         /* the IR value this step produces (or helps produce) */
    uint8_t nbufs, nints;
    uint32_t bufs[NRT_MAX_BUFS];   /* operands first, results last */
    uint64_t spread_reads;         /* bit j: bufs[j] is read at other elements than the one being
                                      written (a fused broadcast's source): never shared in place */
    uint64_t writes;               /* a kernel step: bit j set when the kernel may store to bufs[j]
                                      (cuda_emit.c reads it off the kernel's pointer declarations);
                                      which launches may run side by side follows from it (launch_dag.c) */
    uint8_t sections;              /* a fused kernel of independent loops (one per group, each over its
                                      own element count, e.g. several parameters' updates): how many;
                                      0 or 1 for one loop */
    uint8_t slot_section[NRT_MAX_BUFS];   /* with sections > 1: the loop that reads or writes bufs[j],
                                             NRT_SECTION_SHARED for an operand several read */
    uint32_t ints[NRT_MAX_INTS];   /* dim ids, evaluated when the step runs */
    /* matmul */
    uint8_t mm_batch_rank; /* leading ints that are batch dims */
    bool mm_ta, mm_tb, mm_b_shared; /* b is one matrix shared by every batch */
    nc_dtype mm_dtype;     /* a and b */
    nc_dtype mm_out_dtype; /* out (and residual, bias, aux): mm_dtype, or f32 from f16/bf16 operands */
    uint8_t mm_epilogue;   /* NRT_EPI_*: what cuBLASLt applies to the product before storing it */
    /* Computed from parameters and constants alone: the runtime runs it when
     * parameters are set, not every run, and its buffers live across runs
     * (nrt_program_mark_prepare; in a training step, the parameters' copies
     * the update's kernels store again, compiler/cuda_fuse.c carry_into). */
    bool prepare;
    /* launch batching (compiler/cuda_batch.c) */
    uint16_t batch;        /* on the first of a run of kernel steps launched as one kernel: how many steps
                              the launch runs (>= 2; each thread runs them one after another); 0 otherwise */
    uint32_t batch_kernel; /* with batch: that kernel, called with buf[0] = the steps' nc_args, in order */
} nrt_step;

#define NRT_MAX_BATCH 4096   /* steps one batched launch may run */

/* A matmul's epilogue, in cuBLASLt's order: out = act(a b + residual + bias).
 * The bias is a vector over out's last axis; with NRT_EPI_AUX the value
 * before the activation is stored too (GELU's backward reads it), and with
 * NRT_EPI_DGELU it is read: out = (a b) gelu'(aux). NRT_EPI_BGRAD (with
 * DGELU only) also stores out's column sums, a bias's gradient, in out's
 * dtype; its second buffer, as many elements as out has rows, is where the
 * runtime keeps a vector of ones when cuBLASLt has no algorithm for the
 * fused form and the sums are a product with it instead. */
enum {
    NRT_EPI_BIAS = 1u << 0,
    NRT_EPI_RESIDUAL = 1u << 1,
    NRT_EPI_AUX = 1u << 2,
    NRT_EPI_RELU = 1u << 3,
    NRT_EPI_GELU = 1u << 4,   /* the tanh form (gelu_tanh) */
    NRT_EPI_DGELU = 1u << 5,  /* out = (a b) gelu_tanh'(aux): GELU's backward, the auxiliary buffer read */
    NRT_EPI_BGRAD = 1u << 6,  /* with DGELU: out's column sums stored too (cuBLASLt's DGELU_BGRAD) */
    NRT_EPI_KNOWN = (1u << 7) - 1,
};

/* Where a matmul step keeps each buffer (-1: not used): a, b, bias,
 * residual, the auxiliary input (DGELU), out, the auxiliary output (GELU),
 * the column sums and the ones vector (BGRAD). */
typedef struct nrt_matmul_slots {
    int a, b, bias, residual, aux_in, out, aux, colsum, ones;
} nrt_matmul_slots;
nrt_matmul_slots nrt_matmul_slots_of(const nrt_step *s);
/* Bit j set when step s may store to bufs[j]: a kernel's own mask, a
 * matmul's results, a copy's destination. */
uint64_t nrt_step_writes(const nrt_step *s);
/* How many buffers a matmul step with this epilogue has. */
int nrt_matmul_nbufs(uint8_t epilogue);
/* Whether the epilogue and dtypes are a combination cuBLASLt runs (NULL) or
 * what is wrong with them. */
const char *nrt_matmul_check(const nrt_step *s);

enum {
    NRT_PLAN_NO_REUSE = 1u << 0,   /* --no-memplan: every buffer its own memory (no sharing, no in place) */
    NRT_PLAN_KNOWN_FLAGS = NRT_PLAN_NO_REUSE,
};

typedef struct nrt_program {
    uint32_t plan_flags;           /* NRT_PLAN_* */
    char *source;                  /* CUDA C of every kernel, one translation unit */
    char **kernel_names; uint32_t nkernels;
    nrt_step *steps; uint32_t nsteps, cap_steps;
    nrt_temp *temps; uint32_t ntemps;
    /* Compile time only (not in the module file; NULL when loaded): for step
     * k, slot_values[k * NRT_MAX_BUFS + j] is the IR value that bufs[j]
     * stands for. It differs from bufs[j] where values share memory
     * (compiler/cuda_alias.c): a view, or an update computed in place. */
    uint32_t *slot_values;
} nrt_program;

void nrt_program_free(nrt_program *p);

/* Device memory a GPU session holds beside the arena, which a memory budget
 * counts too: cuBLASLt's workspace, the batches' argument tables (one
 * kernel-argument block, NRT_ARGS_BYTES, per step of a batch) and, for a
 * training loop that stages its inputs ahead, NRT_STAGE_SLOTS landing
 * buffers per input. */
#define NRT_MATMUL_WORKSPACE_BYTES ((int64_t)32 << 20)
#define NRT_ARGS_BYTES (8 * (NRT_MAX_BUFS + NRT_MAX_INTS + 1))
#define NRT_STAGE_SLOTS 2
int64_t nrt_program_side_bytes(const nrt_program *p, int64_t staged_input_bytes);
/* The bytes of g's inputs a training loop stages (g updates parameters;
 * 0 otherwise), at the binding syms (NULL: every dim bound). */
int64_t nrt_program_staged_bytes(const ir_graph *g, const int64_t *syms);

/* Whether every IR value step s touches is computed from parameters and
 * constants alone (from: ir_parameter_values); temporaries are its own. */
bool nrt_step_param_only(const ir_graph *g, const bool *from, const nrt_step *s);
/* Whether step s touches temporaries alone (an op's scratch: a scatter-add's clear and scan). */
bool nrt_step_temps_only(const ir_graph *g, const nrt_step *s);
/* Flags the steps of an inference program (no updates) that depend on
 * parameters alone as prepare steps: the bf16 copies of f32 weights, a
 * causal mask. A program with updates is left alone. */
void nrt_program_mark_prepare(const ir_graph *g, nrt_program *p);
/* Temporaries (an op's scratch) and prepare steps: a step of temporaries
 * alone is one too, and no prepare step touches a temporary that a step of
 * every run writes (repeated until none does): it would run once and read
 * or leave scratch that the other rewrites each run; nor reads a value
 * one writes (a constant that fusion computes beside an input's cast), but
 * a parameter, which the update writes and prepare steps follow. A scatter-add with a
 * constant index (a convolution's gradient) sorts it once, its clear,
 * count, scan, fill and rank; its sums, which only read the sort, run each
 * time. With one of tokens, all of them run each time. */
void nrt_program_prepare_temps(const ir_graph *g, nrt_program *p);

/* How many steps the launch that step s starts runs: its batch, or itself. */
static inline uint32_t nrt_step_launch_len(const nrt_step *s) { return s->batch >= 2 ? s->batch : 1u; }
/* For each step, the step whose launch runs it: itself, or the first step
 * of its batch. A malloc'd array of nsteps entries. */
uint32_t *nrt_program_launches(const nrt_program *p);
/* What the GPU is asked to run: kernels (a batch once) and cuBLASLt calls. */
uint32_t nrt_program_num_launches(const nrt_program *p);

/* A kernel step's launch: blocks and threads a block, from its grid kind and
 * evaluated sizes n; element grids stop at max_blocks (grid-stride loops
 * take the rest). Returns false if the grid is more blocks than a launch
 * takes. */
bool nrt_step_launch(const nrt_step *s, const int64_t *n, int64_t max_blocks, int64_t *blocks, int64_t *threads);

/* Whether step s computes each element from the same element of its operands
 * (an elementwise op, or a fused run of them, cuda_fuse.c), loading every
 * operand of an element before storing any result: a result may then share
 * an operand's memory. */
bool nrt_step_per_element(const ir_graph *g, const nrt_program *p, const nrt_step *s);
/* In such a step, whether result slot o may take operand slot j's memory:
 * not a spread read, and read in the same loop that writes o (threads run a
 * kernel's loops at their own pace, so across loops an element may be
 * overwritten before another thread has read it). */
bool nrt_step_may_share(const nrt_step *s, int o, int j);
/* Whether step s is a row-wise kernel (softmax, the norms, the loss's
 * gradient, their backward; a block or a warp a row) whose last pass reads each element and writes
 * the same element of its result in the same thread, after every read of
 * the row's statistics: its result may take the memory of a row operand of
 * the same size that dies there (the logits' gradient over the logits). */
bool nrt_step_rowwise_in_place(const ir_graph *g, const nrt_step *s, int j);

/* The memory plan at bound dims: bytes and live steps of every buffer (IR
 * values, then temporaries), placed in one arena. Inputs and parameters live
 * the whole run, outputs to its end. Returns a malloc'd array of
 * nnodes + ntemps entries, or NULL with err set. */
#include "memplan.h"
memplan_buf *program_plan_memory(const ir_graph *g, const nrt_program *p, const int64_t *syms, memplan_result *r,
                                 char *err, size_t errcap);
/* Every buffer of the plan (IR values, then temporaries) holds at most 2^40
 * elements at these dims, what a GPU session's arena takes: else false,
 * err naming the buffer (a session refuses such dims as the caller's). */
bool program_check_sizes(const ir_graph *g, const nrt_program *p, const int64_t *syms, char *err, size_t errcap);

#endif
