/* cuda_emit.h - CUDA C code generation: the IR scheduled into steps, with one
 * kernel per group of ops. Every op's emitter is named in ops.def.
 *
 * Requires: a verified graph. Produces: an nrt_program whose source compiles
 * with NVRTC (compiler/nvrtc.c) and whose steps the runtime follows. */
#ifndef NC_CUDA_EMIT_H
#define NC_CUDA_EMIT_H

#include "ir.h"
#include "program.h"

#include <stdio.h>

/* The grid-stride loops every kernel body writes, over the launch's threads
 * (NC_WARP_STRIDE: over its warps, every lane of a warp in each pass); a
 * batch (cuda_batch.c) redefines them for its steps and then restores them
 * with these lines. */
#define CUDA_GRID_MACROS \
    "#undef NC_GRID_STRIDE\n#undef NC_GRID_STRIDE_FROM\n" \
    "#define NC_GRID_STRIDE(i, n) for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); " \
    "i += (long long)gridDim.x * blockDim.x)\n" \
    "#define NC_GRID_STRIDE_FROM(i, start, n) for (long long i = (start) + blockIdx.x * (long long)blockDim.x + " \
    "threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)\n" \
    "#undef NC_WARP_STRIDE\n" \
    "#define NC_WARP_STRIDE(w, n) for (long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; w < (n); " \
    "w += ((long long)gridDim.x * blockDim.x) >> 5)\n"

/* How every kernel body starts (begin_kernel): the __global__ kernel and a
 * batch's device function (cuda_batch.c) each print their own signature
 * and the body after it. */
#define CUDA_BODY_HEADER "(nc_args A) {\n"

/* Each value's readers in node order, once per operand slot that reads it:
 * those of v at at[start[v] .. start[v + 1]). */
typedef struct cuda_reader_index {
    uint32_t *start;
    ir_value *at;
} cuda_reader_index;

/* A growable string. */
typedef struct cg_buf {
    char *s;
    size_t n, cap;
    bool discard;   /* text nothing reads (cuda_emit_program_cost): not written */
    bool fixed;     /* s is the caller's, cap bytes (cg_snprintf): never grown ... */
    bool overflow;  /* ... and what was written did not fit */
} cg_buf;

void cg_printf(cg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_put(cg_buf *b, const char *s, size_t n);
/* snprintf, the same bytes and result, without glibc's slow path for the
 * simple conversions (cuda_emit.c) */
int cg_snprintf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

enum { CG_MAX_DIVISORS = 24, CG_MAX_BOUNDS = 12, CG_DIVISOR_LEN = 128 };

typedef struct cg_ctx {
    const ir_graph *g;
    nrt_program *prog;
    cg_buf src;            /* the translation unit */
    cg_buf body;           /* the kernel being written */
    cg_buf cur_comment;
    char cur_name[96];
    char cur_bounds[48];   /* __launch_bounds__(...) of the kernel being written, or "" */
    uint32_t cur_step;
    char **bodies;         /* distinct kernel bodies so far, index = kernel */
    uint64_t *bodies_write; /* ... and the slots each may store to (a body's every copy: read once) */
    uint32_t nbodies;
    int8_t *stride_only;   /* cuda_batch_launches: whether body k is grid-stride only (0 not yet known, 1, -1) */
    bool cost_only;        /* cuda_emit_program_cost: a body's text is only its key (its kernel's identity, the
                              stores and grid-stride verdict read off it), so a part written twice as a function
                              of the same inputs (the 32- and 64-bit index paths, a fused loop's vector and scalar
                              members) is written once */
    struct cuda_body_memo *memo;   /* what bodies' texts said in earlier compiles, or NULL (cuda_emit_program_cost) */
    uint32_t *bodies_fact; /* with memo: body k's entry in it */
    uint32_t nstride_only; /* bodies stride_only covers: the batch kernels it adds are judged afresh */
    uint32_t *group;       /* fusion: group id of each node (0: alone), NULL when not fusing; set by
                              cuda_fuse_set_group once the extents below exist */
    ir_value *group_first; /* fusion: each group id's first member (IR_NONE: none) ... */
    ir_value *group_last;  /* ... and its last, kept as members come and go (cuda_fuse_set_group) */
    uint32_t group_room;   /* ... for the ids below this */
    bool *inlined;         /* fusion: a scalar fill that every user inlines (no kernel of its own) */
    ir_value *last_use;    /* fusion: the last node reading each value (itself if none) */
    bool *escapes;         /* fusion: read by an output, an update or the loss */
    uint32_t *readers;     /* fusion: how many operand slots read each value ... */
    ir_value *reader;      /* ... and one of its readers (the only one where readers is 1) */
    cuda_reader_index reader_list; /* fusion: ... and all of them (the planners' scans for readers were quadratic) */
    uint32_t *kernel_of;   /* fusion: for each group id, the first group of the kernel it is a loop of */
    ir_value *prologue_of; /* fusion: for each group id, the reduction that computes it as it loads (IR_NONE: none) */
    ir_value *epilogue_of; /* fusion: for each group id, the column reduction whose second kernel computes it
                              from each column's total (its only input of another shape), IR_NONE: none */
    int *prologue_dim0;    /* ... and the slot of the first of its dims in that kernel's ints (spread loads' offsets) */
    bool *prologue_stored; /* ... and whether that kernel also stores the group's result, which others read later */
    bool *loaded_by_prologue; /* fusion, while planning prologues: values a planned prologue loads */
    uint32_t ngroups;
    bool *absorbed;        /* epilogues: computed by a matmul step (the matmul and its epilogue's ops) */
    ir_value *attn_root;   /* fusion: for q, k or v of tensor-core attention, the [B, T, W] value whose
                              rows hold its heads (attention reads it in place), IR_NONE if none */
    uint32_t *attn_col;    /* ... and the dim id of the column where its first head starts (UINT32_MAX: 0) */
    ir_value *lse_with;    /* fusion: for a tensor-core attention, the attention_lse of the same q and k
                              its kernel writes too (the lse step then has no kernel), IR_NONE if none */
    ir_value *delta_from;  /* fusion: for the q gradient of tensor-core attention, the forward output it
                              reads to compute and write delta = rowsum(dO * O) itself, IR_NONE if none */
    ir_value *dv_with;     /* fusion: for the key gradient of tensor-core attention with heads of 64, the
                              value gradient of the same operands its kernel computes along, IR_NONE */
    ir_value *out_as;      /* fusion: for tensor-core attention (or a gradient), the [B, T, W] value it
                              writes instead of its result: rows (b, t) holding the heads side by side
                              from column out_col (transpose(out, [0, 2, 1, 3]), or a concat of the
                              q, k and v gradients), IR_NONE if none */
    int64_t *out_col;
    ir_value *attn_colsum; /* fusion: for a sum over every axis but the last of a concat the attention
                              gradients' kernels write (out_as; a bias's gradient, GPT-2's qkv), that
                              concat: each kernel adds up the columns of the tiles it stores into partial
                              rows, one per batch and tile, which the sum only adds up, IR_NONE */
    ir_value *bias_grad_with; /* fusion: for a layernorm weight gradient, the bias gradient of the same x and
                              g that its kernels compute along (reading x and g once), IR_NONE if none */
    bool *joined_sums;     /* fusion: a concat of sums (a gradient norm's partial sums) whose one kernel
                              computes every part's sum into its place (the sums have no kernels) */
    ir_value *sibling_sum; /* fusion: for a column sum or mean computed with a prologue, the plain column sum
                              or mean of one of the prologue's inputs over the same rows (a batch norm's
                              bias gradient beside its weight's): one kernel reads the input once for both,
                              at the later of the two, IR_NONE */
    ir_value *widened_to;  /* fusion: for a sum or mean in f16/bf16, the cast to f32 that is its one reader:
                              the reduction stores its f32 accumulator there (a bias gradient), IR_NONE */
    ir_value *stats_from;  /* fusion: for a norm's weight gradient, the layernorm_grad or rmsnorm_grad of
                              the same x, g and eps whose kernel also writes each row's mean and rstd:
                              the weight gradient reads them instead of computing them again, IR_NONE */
    ir_value *sum_to;      /* fusion: for a layernorm_grad or rmsnorm_grad read only by an add of another
                              gradient of its input, made earlier: that add, which its kernel writes
                              (dx rounded as stored, plus the other), IR_NONE */
    ir_value *loss_rows_with; /* fusion: for a cross_entropy_grad, the cross_entropy of the same logits,
                              targets and smoothing after it (schedule.c) whose row losses its kernel
                              writes: the loss only averages them, IR_NONE */
    uint32_t *kept_temp;   /* emission: the temporary a kernel writes for a later step (a norm's [rows, 2]
                              row statistics, a loss's row losses; for a column sum, its partial sums), 0: none */
    ir_value *colsum_by;   /* fusion: for a column sum (a bias gradient) of what a warp-row norm gradient's
                              kernel stores, that norm gradient: its kernel writes the partial sums as it
                              stores each row, the sum only adds them up, IR_NONE */
    ir_value *params_by;   /* fusion: for a norm's weight gradient whose statistics come from a warp-row
                              norm gradient (stats_from) of at most 1024 columns, that norm gradient: its
                              kernel sums g xhat (and the bias's g) over its rows as it holds them, the
                              weight gradient only adds the partial rows, IR_NONE */
    ir_value *round_trip_to; /* fusion: for a norm's parameter gradient (f32), the f32(bf16(...)) its one
                              reader makes of it (the gradient of a bf16 copy, widened back): its sum
                              kernel stores that, rounded, IR_NONE */
    ir_value *sum_into;    /* fusion: for a narrow scatter-add whose one reader widens it to f32 for an add
                              to an f32 value made earlier (a tied embedding's gradient: the gather's part
                              plus the output projection's), that add: the scatter's last kernel writes it,
                              the narrow result and its widening are never stored, IR_NONE */
    ir_value *carry_into;  /* fusion, a training step: for a parameter's new value computed by a fused
                              kernel, the low-precision copy of the parameter (cast(p)) that kernel also
                              stores, rounded, for the next step to read: the copy's own kernel runs only
                              when parameters are set from outside (a prepare step), IR_NONE */
    ir_value *carry_from;  /* the inverse: for such a copy, the new value whose kernel stores it, IR_NONE */
    struct cuda_epilogue *epilogues;   /* epilogues: one per fused matmul, in schedule order */
    uint32_t nepilogues;
    char divisors[CG_MAX_DIVISORS][CG_DIVISOR_LEN];   /* emission: the sizes the kernel being written divides
                              element indices by, each set up once per thread as d<k> (cg_divisor) */
    int ndivisors;
    char bounds[CG_MAX_BOUNDS][CG_DIVISOR_LEN];   /* emission: element counts every index of the kernel being
                              written stays below (besides A.n[0]), for its 32-bit index path (cg_bound) */
    int nbounds;
    bool bounds_lost;      /* a bound did not fit the table: the kernel keeps 64-bit indices */
    char err[512];
} cg_ctx;

/* A name for size (a C expression over A.n) as a divisor in the kernel being
 * written: "d<k>", declared at the kernel's top, or the set-up inline where
 * the table is full. Element indices are divided by nc_divmod(i, d<k>, &r)
 * or nc_quot(i, d<k>) (the prelude): no 64-bit divide per element. */
void cg_divisor(cg_ctx *cg, const char *size, char *name, size_t cap);
/* Index code declares its integers as nc_ix: the kernel runs it with
 * nc_ix = unsigned where A.n[0] and every bound registered here (a C
 * expression over A.n and the divisors: an element count some index stays
 * below) are under 2^31, with long long otherwise. */
void cg_bound(cg_ctx *cg, const char *numel);
/* Room for such a name (a struct, so a function can return one). */
typedef struct cg_name { char s[CG_DIVISOR_LEN + 32]; } cg_name;

/* One emitter per op (ops.def's cuda_emit column). It appends kernels to
 * cg->src and steps to cg->prog for the node v; false with cg->err set if the
 * node cannot run on the GPU. */
typedef bool cuda_emit_fn(cg_ctx *cg, ir_value v);

/* The definitions every module's source starts with (types, loads and
 * stores, division by run-time sizes, reductions). */
const char *cuda_prelude(void);

/* What kernel bodies' texts say that the steps read (the slots a body may
 * store to, whether its loops are grid-stride only), by text, kept across
 * compiles: the candidates of a --memory-budget search share most of their
 * bodies, and reading the text again for each took a twentieth of it. */
typedef struct cuda_body_memo cuda_body_memo;
cuda_body_memo *cuda_body_memo_new(void);
void cuda_body_memo_free(cuda_body_memo *m);
/* the memo's distinct texts, for tests: how many, and text i */
uint32_t cuda_body_memo_count(const cuda_body_memo *m);
const char *cuda_body_memo_text(const cuda_body_memo *m, uint32_t i);
/* with cg->memo, body k's grid-stride verdict as an earlier compile found
 * it (0 not yet known, 1, -1), for cuda_batch_launches to read and set;
 * NULL without a memo */
int8_t *cuda_body_memo_stride(const cg_ctx *cg, uint32_t k);

/* Schedule and emit the whole graph. Returns false with err set. */
bool cuda_emit_program(const ir_graph *g, nrt_program *out, char *err, size_t errcap);
/* The same; with fuse, runs of elementwise ops become one kernel each
 * (compiler/cuda_fuse.c). */
bool cuda_emit_program_ex(const ir_graph *g, bool fuse, nrt_program *out, char *err, size_t errcap);
/* The same program without its source (out->source NULL): the steps,
 * kernels and names a memory plan and a roofline floor read, for
 * --memory-budget's search, which compiles hundreds of candidates. The
 * kernels' bodies are still written: which steps share a kernel, what a
 * kernel stores and which launches batch are read off them. */
bool cuda_emit_program_cost(const ir_graph *g, bool fuse, cuda_body_memo *memo, nrt_program *out, char *err,
                            size_t errcap);

/* The most ops one fused group computes: a longer run is cut into groups of
 * this many, each a kernel, the value at a cut stored and loaded again.
 * NVRTC's time grows faster than the kernel (a chain of 500 adds took it
 * 7.7 s, of 2500 minutes); the largest group of the examples, benchmarks and
 * test models is 18 ops (GPT-2's), and a kernel of several loops at most
 * NRT_MAX_SECTIONS groups (char_lm's AdamW update: 136 ops in 8 loops). */
#define CUDA_FUSE_MAX_OPS 64

/* Fusion (cuda_fuse.c): mark the groups in cg (cg->group, cg->inlined), and
 * emit the group whose last member is v; false if v is not a group's last
 * member (the caller then emits it alone, or skips it if it is fused). */
void cuda_fuse_plan(cg_ctx *cg);
void cuda_fuse_free(cg_ctx *cg);
bool cuda_fuse_is_member(const cg_ctx *cg, ir_value v);
/* Moves v into group id (0: out of any group), keeping the groups' extents. */
void cuda_fuse_set_group(cg_ctx *cg, ir_value v, uint32_t id);
/* Whether gather v has no kernel: the fused group reading it loads the rows. */
bool cuda_fuse_gathers(const cg_ctx *cg, ir_value v);
/* Whether fused values a and b are computed by the same kernel (one group,
 * or loops of one kernel). */
bool cuda_fuse_same_kernel(const cg_ctx *cg, ir_value a, ir_value b);
/* Whether the kernel step of node writes value v: node itself, another
 * value its fused kernel computes, or the lse an attention kernel writes
 * along (with cg planned for fusion, or not). */
bool cuda_kernel_writes(const cg_ctx *cg, ir_value node, ir_value v);
/* A per-value array of IR_NONE, for the planners' "this value's partner". */
ir_value *cuda_no_values(const ir_graph *g);
bool cuda_fuse_emit(cg_ctx *cg, ir_value v, bool *ok);
/* The other term o of a scatter-add's widened sum (cg->sum_into), as the
 * value its kernel loads: o itself (f32); y for o = f32(y), y narrow, with
 * *narrow = y; x for o = f32(r(x)), x f32, with *narrow = r (x is loaded
 * and rounded to r's dtype); IR_NONE for other forms. */
ir_value cuda_scatter_addend(const ir_graph *g, ir_value o, ir_value *narrow);

/* Matmul epilogues (cuda_epilogue.c): a bias, an activation, a residual
 * add or a widening cast after a matmul, applied by cuBLASLt as it stores
 * the product, so the product is never written and read back. */
typedef struct cuda_epilogue {
    ir_value matmul;
    ir_value bias, residual, aux;   /* IR_NONE where absent */
    ir_value out;                   /* the epilogue's last op: what the step writes */
    ir_value colsum;                /* NRT_EPI_BGRAD: the sum of out's rows the step writes too, else IR_NONE */
    uint8_t flags;                  /* NRT_EPI_* */
    nc_dtype out_dtype;
    ir_value chain[5];              /* the ops the step computes: the matmul, then each link */
    int nchain;
} cuda_epilogue;

/* Mark the epilogues (cg->absorbed, cg->epilogues); run by cuda_fuse_plan
 * before it groups elementwise ops, which then leave absorbed ops alone. */
void cuda_epilogue_plan(cg_ctx *cg);
/* For an absorbed node v: the matmul step when v ends an epilogue, nothing
 * otherwise. */
void cuda_epilogue_emit(cg_ctx *cg, ir_value v);
void cuda_epilogue_free(cg_ctx *cg);
nrt_step *cuda_matmul_begin(cg_ctx *cg, ir_value v);

/* Attention on tensor cores (cuda_attention.c) for f16/bf16 heads of 64 or
 * 128: *emitted false when v's shape is not one it takes (the caller then
 * emits the scalar kernel); false with cg->err set on failure. */
bool cuda_emit_attention_tiled(cg_ctx *cg, ir_value v, bool *emitted);
/* Fusion: q, k and v made as transpose(reshape(slice(x)), [0, 2, 1, 3])
 * from a [B, T, W] x whose rows hold the heads side by side (one matmul's
 * result) and read only by tensor-core attention steps are read from x in
 * place: no transposed copy is written (cg->attn_root); so is the output
 * gradient dO. The forward kernel writes the log-sum-exp the backward pass
 * reads (cg->lse_with), and the q gradient's kernel computes rowsum(dO * O)
 * for the key gradients (cg->delta_from). */
void cuda_attention_plan(cg_ctx *cg);

/* netc build --report (cuda_report.c): each fused kernel's ops, each
 * matmul epilogue, each value living in another's buffer, with source lines. */
void cuda_report(const ir_graph *g, const nrt_program *p, bool fused, FILE *out);

/* The warps that add up each output of a concat of sums whose part sums
 * `count` elements an output (emit_joined_sums): of one block, or spread,
 * whole blocks of 8 for a large part. */
int64_t cuda_joined_sum_warps(int64_t count, bool spread);

/* Buffer sharing (cuda_alias.c), on the finished steps: reshapes become
 * views, and updates that can be computed in their parameter's memory are,
 * dropping their copy steps. Sets p->slot_values. */
void cuda_alias_buffers(const ir_graph *g, nrt_program *p);

/* Launch batching (cuda_batch.c), after cuda_alias_buffers: runs of
 * neighbouring grid-stride kernel steps that touch nothing another of them
 * writes launch as one kernel (a training step's parameter updates: one
 * launch). Marks nrt_step.batch and appends each run's kernel to the source. */
void cuda_batch_launches(cg_ctx *cg);

/* A reduction whose operand (through reshapes) is a fused group's only
 * result computes the group as it loads (cuda_fuse.c): the group's value
 * at an element is never stored. The group under reduction r, or 0. */
uint32_t cuda_fuse_prologue_group(const cg_ctx *cg, ir_value r);
/* Adds the group's inputs to s's next slots and declares them x0, x1, ... (in the current scope) */
void cuda_fuse_prologue_inputs(cg_ctx *cg, uint32_t id, nrt_step *s);
/* Code setting `float pv` to the group's value at element index `i`. */
void cuda_fuse_prologue_value(cg_ctx *cg, uint32_t id);
/* Which input of the group v is (the `in<k>` prologue_value loads), or -1. */
int cuda_fuse_prologue_input(const cg_ctx *cg, uint32_t id, ir_value v);
/* The group's result when its reduction's kernel stores it too (others
 * read it after the reduction: a conv's dy, which its bias gradient sums
 * and its products read), else IR_NONE. */
ir_value cuda_fuse_prologue_stored(const cg_ctx *cg, uint32_t id);
/* Whether reduction v is a column reduction of floats (emit_column_reduce:
 * a thread a column over a run of rows, each element loaded once). */
bool cuda_reduce_by_columns(const cg_ctx *cg, ir_value v);
/* Whether float reduction v's kernel can keep a sibling's sum too (a column
 * reduction, or a warp an output: not split into runs), and how many of its
 * operand's elements each output takes (-1: known at run time). */
bool cuda_reduce_takes_sibling(const cg_ctx *cg, ir_value v, int64_t *rows);
/* Groups of a reduction's shape, one of which reads its result (a batch
 * norm's scale from the variance, the running statistics' updates),
 * computed by the kernel that adds up the partial results, the lane holding
 * each total (cuda_fuse.c plan_epilogues): no launch of their own. The
 * first group computed from reduction r's totals, or 0. */
uint32_t cuda_fuse_epilogue_group(const cg_ctx *cg, ir_value r);
/* Code (at the scope of reduction r's total `acc` of output `index`)
 * computing the members of groups ids[0..n) there and storing their
 * results, every input loaded first; inputs and outputs added to s's next
 * slots. */
void cuda_fuse_epilogue(cg_ctx *cg, nrt_step *s, const uint32_t *ids, int n, ir_value r, const char *acc, const char *index);
/* Whether reduction r's partial results are added up by a kernel of their
 * own, which can take an epilogue; and that kernel, emitted with the groups
 * `epilogue` where their kernel was. */
bool cuda_reduce_total_apart(const cg_ctx *cg, ir_value r);
bool cuda_emit_reduce_total(cg_ctx *cg, ir_value r, const uint32_t *epilogue, int nepilogue);

/* Shared with cuda_fuse.c. */
bool cuda_emit_is_elementwise(nc_op op);
nrt_step *cuda_begin_kernel(cg_ctx *cg, ir_value v, const char *suffix, nrt_grid grid);
/* The kernel being written runs blocks of at most `threads` and wants
 * registers few enough for min_blocks of them on a multiprocessor. */
void cuda_kernel_bounds(cg_ctx *cg, int threads, int min_blocks);
uint32_t cuda_new_temp(cg_ctx *cg, uint32_t numel, nc_dtype t);
void cuda_end_kernel(cg_ctx *cg);
void cuda_add_buf(nrt_step *s, uint32_t b);
/* Movement read-through (cuda_emit.c): whether w is a reshape, transpose or
 * slice its reader loads through (no kernel of its own); the value in
 * memory under w's links; code mapping var, an element's index in w, to
 * its index in that value. */
bool cuda_reads_through(const cg_ctx *cg, ir_value w);
ir_value cuda_chain_root(const cg_ctx *cg, ir_value w);
void cuda_emit_read_through(cg_ctx *cg, nrt_step *s, ir_value w, const char *var);
void cuda_add_int(nrt_step *s, uint32_t dim);
/* The slot of dim in s's sizes (A.n[slot]), added if new. */
int cuda_dim_slot(nrt_step *s, uint32_t dim);
bool cuda_numel_dim(cg_ctx *cg, const ir_node *n, uint32_t *out);
/* Attention's key lengths: the dim of how many heads share one length, and
 * the line declaring `len` (clamped to [0, S]) for head or row `bt` from the
 * kernel's int per_slot and pointer `lens` (cuda_emit.c). */
bool cuda_attention_per_length(cg_ctx *cg, ir_value v, uint32_t *per);
void cuda_emit_attention_length(cg_buf *b, const char *indent, const char *bt, int per_slot);
void cuda_decl_ptr(cg_ctx *cg, const char *name, int k, nc_dtype t, bool is_const);
/* step: the C expression of n's step operand (an integer) for STEP, or NULL. */
void cuda_expand_expr(cg_ctx *cg, const ir_node *n, const char *expr, const char *step);
const char *cuda_float_literal(char buf[48], double v);
/* Whether rows of x ([..., C]) run a warp a row (a constant C, a multiple
 * of 8 up to 2048); *C: the row length. */
bool cuda_warp_rows(const cg_ctx *cg, const ir_node *x, int64_t *C);
/* The prelude's function rounding a float to dtype t as a store would ("" for f32). */
const char *cuda_round_fn(nc_dtype t);
const char *cuda_round_pair_fn(nc_dtype t);   /* rounds float t[2] in place, "" for f32 */
/* The elementwise expression of n over a, b, c (dropout: the identity without its step operand). */
const char *cuda_expr_of(const cg_ctx *cg, const ir_node *n);

#endif
