/* ir.h - the graph IR: an SSA dataflow graph of typed tensor values.
 *
 * Every node produces exactly one tensor value and is named by its index
 * (%12 in the text form). Operands always precede their users, so the node
 * array is a valid schedule. Dims are interned: a shape is a list of dim ids
 * and two shapes are equal exactly when their id lists are equal. */
#ifndef NC_IR_H
#define NC_IR_H

#include "base.h"
#include "dim.h"
#include "dtype.h"
#include "ops.h"

typedef uint32_t ir_value;
#define IR_NONE UINT32_MAX

/* Non-tensor arguments of a node. Which members are meaningful depends on the
 * op: its kwargs spec in ops.def names the members it fills; the rest stay zero. */
typedef struct ir_attr {
    double f;                      /* fill value, eps, dropout p, label smoothing */
    int64_t seed;                  /* dropout */
    int32_t axis;                  /* iota, slice, concat (normalised to >= 0) */
    uint8_t naxes;                 /* reduce axes / permutation; 0 = op default */
    int8_t axes[NC_MAX_RANK];
    bool keepdim, ta, tb;
    bool f32_result;               /* an OPF_WIDE_RESULT op (matmul, scatter_add) of f16/bf16 operands
                                      storing its result as f32 (cast hoisting; no syntax) */
    bool causal;                   /* attention: query i sees keys 0..i only */
    uint32_t lo, hi;               /* dim ids: slice bounds, scatter_add rows */
    nc_dtype to;                   /* cast target */
    uint32_t index;                /* input / param index */
} ir_attr;

enum {
    IR_FLAG_CHECKPOINT = 1u << 0,  /* inside an @checkpoint region (see region) */
    IR_FLAG_AUTOCAST = 1u << 1,    /* a cast inserted by a precision block, not written */
    IR_FLAG_RECOMPUTE = 1u << 2,   /* a forward value computed again (pass_recompute.c): for the backward
                                      pass, or a constant for a @checkpoint region, instead of kept */
    IR_FLAG_KNOWN = IR_FLAG_CHECKPOINT | IR_FLAG_AUTOCAST | IR_FLAG_RECOMPUTE,
};

typedef struct ir_node {
    nc_op op;
    nc_dtype dtype;
    uint8_t rank;
    uint8_t flags;
    uint16_t nargs;
    uint32_t args_at;              /* operands are g->args[args_at .. args_at+nargs) */
    uint32_t shape[NC_MAX_RANK];   /* dim ids */
    uint32_t region;               /* checkpoint region id, 0 = none */
    ir_attr attr;
    nc_loc loc;                    /* the .net source this node implements */
} ir_node;

typedef struct ir_tensor_decl {
    char *name;                    /* "x", "blocks.3.attn.w" */
    nc_dtype dtype;
    uint8_t rank;
    uint32_t shape[NC_MAX_RANK];
    nc_loc loc;
} ir_tensor_decl;

typedef enum ir_init_kind {
    IR_INIT_ZEROS, IR_INIT_ONES, IR_INIT_NORMAL, IR_INIT_UNIFORM,
    IR_INIT_XAVIER_UNIFORM, IR_INIT_XAVIER_NORMAL, IR_INIT_KAIMING_UNIFORM, IR_INIT_KAIMING_NORMAL,
    IR_INIT_COUNT
} ir_init_kind;

typedef enum ir_param_role {
    IR_ROLE_WEIGHT,                /* trained */
    IR_ROLE_STATE,                 /* optimizer state (moments): saved, not trained */
    IR_ROLE_ACCUMULATOR,           /* --accumulate's gradient sum (NAME.grad_acc): state that is zero
                                      after every whole step, so a resume sets it, not the checkpoint */
    IR_ROLE_BUFFER,                /* a model's own state (batch norm's running statistics): read by the
                                      forward pass like a weight, saved with the weights, never trained;
                                      the training step assigns it where the model says `update` */
} ir_param_role;

typedef struct ir_param {
    ir_tensor_decl decl;
    ir_param_role role;
    ir_init_kind init;
    double init_a, init_b;         /* normal: std, mean; uniform: low, high; fan-based: gain */
} ir_param;

/* After a training step, param[param] takes the value computed as value. */
typedef struct ir_update {
    uint32_t param;
    ir_value value;
} ir_update;

/* A condition on sizes that an assert states and the build could not
 * decide (B > 1 with B symbolic): lhs CMP rhs, checked when a session binds
 * the symbols (tc_check_requires, typecheck.h), message and hint the assert's.
 * Their {name}s keep the symbolic sizes they stood for, for the session to
 * show them bound: a span IR_SIZES_MARK 't' DTYPE (' ' DIM)* IR_SIZES_MARK
 * is a tensor's type, IR_SIZES_MARK 'd' DIM IR_SIZES_MARK a size (DTYPE and
 * DIM in decimal: a dtype and a dim id); ir_require_text writes them. */
#define IR_SIZES_MARK '\x01'
typedef enum ir_cmp { IR_CMP_LT, IR_CMP_LE, IR_CMP_GT, IR_CMP_GE, IR_CMP_EQ, IR_CMP_NE, IR_CMP_COUNT } ir_cmp;

typedef struct ir_require {
    uint32_t lhs, rhs;             /* dim ids */
    ir_cmp cmp;
    char *message;                 /* formatted when the model was built, but for its size spans */
    char *hint;                    /* likewise; "" for none */
    nc_loc loc;                    /* the assert */
    nc_loc site;                   /* the user's call that reached it (line 0: the model's own assert) */
} ir_require;

typedef struct ir_output {
    char *name;
    ir_value value;
} ir_output;

/* The training section of a model, checked by sema and executed by a later
 * stage (autodiff + optimizer update). Hyper-parameters keep their defaults
 * unless the .net file sets them. */
typedef enum ir_optimizer { IR_OPT_SGD, IR_OPT_ADAM, IR_OPT_ADAMW } ir_optimizer;
typedef enum ir_schedule { IR_SCHED_CONSTANT, IR_SCHED_STEP, IR_SCHED_COSINE } ir_schedule;
typedef enum ir_loss_scale { IR_SCALE_NONE, IR_SCALE_STATIC, IR_SCALE_DYNAMIC } ir_loss_scale;

typedef struct ir_train_spec {
    bool present;
    ir_value loss;                 /* f32 scalar */
    uint32_t first_train_input;    /* inputs from this index on feed only the loss */
    bool loss_reads_train_inputs;  /* the loss depends on one of them (a classifier's labels) */
    /* where the loss reduces over the batch other than by a mean (a sum of
     * per-sample terms): --accumulate's mean of micro-batch gradients is then
     * not one batch's (found by sema where the batch is a symbol) */
    bool loss_mixes_batch;
    nc_op batch_reduce_op;         /* a sum, a max, a matmul along the batch; a dim_value: f32(B) scaling it */
    nc_loc batch_reduce_loc;
    uint32_t batch_reduce_dim;     /* the dim_value's dim */
    nc_loc loss_loc;               /* the loss's statement, for a note where the op lies elsewhere (a fn) */
    ir_optimizer optimizer;
    double lr, momentum, beta1, beta2, eps, weight_decay;
    bool nesterov;
    ir_schedule schedule;
    int64_t warmup_steps, step_size, total_steps;
    double gamma, min_lr;
    ir_loss_scale loss_scale;
    double init_scale;
    int64_t growth_interval;
    double clip_grad_norm;         /* 0 = off */
    /* compile time only: the weights' low-precision copies are made in each
     * step, not stored by the update for the next (compiler/cuda_fuse.c):
     * they live only while read, which --memory-budget may need */
    bool copies_each_step;
    nc_loc loc;
    /* a model without a train section: the file's models that have one
     * ("cls, lm"), for the message that it has none (sema) */
    char trained_models[128];
} ir_train_spec;

typedef struct ir_graph {
    ir_node *nodes;   uint32_t nnodes, cap_nodes;
    ir_value *args;   uint32_t nargs, cap_args;
    dim_expr *dims;   uint32_t ndims, cap_dims;
    char *sym_names[NC_MAX_SYMS]; uint32_t nsyms;   /* symbolic dims: B, T */
    /* Every list grows by doubling (its cap_), through ir.c's functions: a
     * module's reader appends up to 2^20 items through them. */
    ir_tensor_decl *inputs; uint32_t ninputs, cap_inputs;
    ir_param *params; uint32_t nparams, cap_params;
    ir_output *outputs; uint32_t noutputs, cap_outputs;
    ir_update *updates; uint32_t nupdates, cap_updates;       /* a training step's assignments */
    ir_require *requires; uint32_t nrequires, cap_requires;   /* conditions on the symbols' values */
    char **files; uint32_t nfiles, cap_files;                  /* loc.file - 1 indexes this */
    char *name;                                     /* the model's name */
    ir_train_spec train;
} ir_graph;

ir_graph *ir_graph_new(const char *name);
void ir_graph_free(ir_graph *g);

/* Dims. */
uint32_t ir_dim_intern(ir_graph *g, const dim_expr *d);
uint32_t ir_dim_const(ir_graph *g, int64_t v);
/* Appends d as the next id without interning (a module's dims, whose ids
 * its nodes name as written). */
uint32_t ir_dim_append(ir_graph *g, const dim_expr *d);
int ir_sym_find(const ir_graph *g, const char *name);   /* -1 if absent */
/* Texts about dims. Each *_format writes into buf under snprintf's
 * contract: as much as fits in cap, NUL-terminated when cap > 0 (buf may be
 * NULL with cap 0), and returns the whole text's length, so a caller sizes a
 * buffer exactly or sees that its text was cut. Each *_str returns the
 * whole text in memory of its size, for the caller to free. */
/* " (its symbolic dims: B, T)", or " (all its dims are fixed)": what a --dim naming none could name. */
size_t ir_sym_names_note(const ir_graph *g, char *buf, size_t cap);
char *ir_sym_names_str(const ir_graph *g);
/* "B = 8, T = 1024": a binding of the symbolic dims, for messages about it. */
size_t ir_syms_format(const ir_graph *g, const int64_t *syms, char *buf, size_t cap);
char *ir_syms_str(const ir_graph *g, const int64_t *syms);
int ir_sym_add(ir_graph *g, const char *name);          /* -1 if NC_MAX_SYMS reached */
size_t ir_dim_format(const ir_graph *g, uint32_t dim, char *buf, size_t cap);      /* "T + 1" */
char *ir_dim_str(const ir_graph *g, uint32_t dim);
size_t ir_shape_format(const ir_graph *g, nc_dtype t, uint8_t rank, const uint32_t *shape,
                       char *buf, size_t cap);                      /* "f32[B, 784]" */
char *ir_shape_str(const ir_graph *g, nc_dtype t, uint8_t rank, const uint32_t *shape);
uint32_t ir_file_add(ir_graph *g, const char *path);   /* 1-based; an existing path's index */

/* Nodes. ir_add appends a node without checking it; callers that build from
 * user input use ir_build (ops.c), which runs the op's type rules first. */
ir_value ir_add(ir_graph *g, const ir_node *proto, const ir_value *args, uint16_t nargs);
static inline const ir_value *ir_args(const ir_graph *g, const ir_node *n)
{
    return n->nargs ? g->args + n->args_at : NULL;   /* no pointer arithmetic on a NULL array */
}
static inline ir_node *ir_node_at(const ir_graph *g, ir_value v) { return &g->nodes[v]; }

/* The operand slot of a random op's training step, or -1. A graph built to
 * train (its loss kept) gives each OPF_RANDOM op the i32 scalar input @step
 * as one more operand after its own (train_step_input, autodiff.h), so the
 * masks it draws depend on (seed, step, element) as data: passes see the
 * dependence, and a program replayed from a CUDA graph reads the step each
 * run sets. Without it the op is its inference form (dropout: the identity). */
static inline int ir_step_slot(const ir_node *n)
{
    return (nc_ops[n->op].flags & OPF_RANDOM) && nc_ops[n->op].nargs >= 0 && n->nargs == nc_ops[n->op].nargs + 1
               ? n->nargs - 1
               : -1;
}

/* The slot of the operand a node took by keyword (op_optional_operands:
 * attention's key lengths), or -1 when it was not given. */
static inline int ir_keyword_operand_slot(const ir_node *n)
{
    int fixed = nc_ops[n->op].nargs;
    return fixed >= 0 && n->nargs > fixed && op_optional_operands(n->op) > 0 ? fixed : -1;
}

uint32_t ir_input_add(ir_graph *g, const ir_tensor_decl *d);
uint32_t ir_param_add(ir_graph *g, const ir_param *p);
void ir_output_add(ir_graph *g, const char *name, ir_value v);
void ir_update_add(ir_graph *g, uint32_t param, ir_value v);
void ir_require_add(ir_graph *g, const ir_require *r);   /* copies the message and hint */
const char *ir_cmp_text(ir_cmp c);                       /* ">" */
/* Whether lhs CMP rhs holds at the binding syms; false also when a side has no value. */
bool ir_require_holds(const ir_graph *g, const ir_require *r, const int64_t *syms);
/* A require's text (its message or hint) with each size span as the build read
 * it ("f32[B, 16]"), and with syms beside its bound value ("f32[B, 16] = f32[1, 16]";
 * a size: its value alone). Under snprintf's contract, as ir_dim_format. */
size_t ir_require_text(const ir_graph *g, const char *text, const int64_t *syms, char *out, size_t cap);
char *ir_require_str(const ir_graph *g, const char *text, const int64_t *syms);
/* A {name}'s text in a require's message: a tensor type (rank >= 0) or a
 * size (rank -1, shape[0]), as a size span where it holds a symbol. Under
 * snprintf's contract, as ir_dim_format. */
size_t ir_require_span(const ir_graph *g, nc_dtype t, int rank, const uint32_t *shape, char *out, size_t cap);

const char *ir_init_name(ir_init_kind k);

/* Element count of a node at a binding of the symbolic dims; false if it overflows. */
bool ir_numel(const ir_graph *g, const ir_node *n, const int64_t *syms, int64_t *out);
/* Bytes of a node's value at a binding (numel times its dtype's size); 0 if
 * the element count overflows. */
int64_t ir_bytes(const ir_graph *g, const ir_node *n, const int64_t *syms);
/* Per value: computed from fills and iotas alone (masks, broadcast
 * constants), so cheap to compute again wherever it is needed; a malloc'd
 * array of nnodes + 1. */
bool *ir_constant_values(const ir_graph *g);
/* The same with the parameters counted as constants: what a step computes
 * from its parameters alone (their low-precision copies). */
bool *ir_parameter_values(const ir_graph *g);
bool ir_shape_numel(const ir_graph *g, uint8_t rank, const uint32_t *shape, const int64_t *syms,
                    int64_t *out);

/* Stable, readable text form (golden tests compare it). */
#include <stdio.h>
void ir_print(const ir_graph *g, FILE *out);

/* Invariant check; returns the number of problems, each written to err. A
 * node's stored type and attributes must be what its op's rules give for
 * its operands (the rules normalise attributes: an iota's axis -1 to rank - 1);
 * a node reading one that failed is not checked further. */
int ir_verify(const ir_graph *g, FILE *err);

#endif
