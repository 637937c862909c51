/* ops.h - the op enum, categories, dtype rules and flags, all expanded from
 * ops.def; and the per-op information every consumer reads. */
#ifndef NC_OPS_H
#define NC_OPS_H

#include "base.h"

typedef enum nc_op {
#define X(e, name, nargs, cat, dt, flags, shape, cpu, cuda, cexpr, grad, kw, meaning) e,
#include "ops.def"
#undef X
    OP_COUNT
} nc_op;

/* attention's largest head size (q's and v's last axis): its GPU kernels hold
 * a row of each in registers */
#define OP_ATTENTION_MAX_HEAD 256

typedef enum nc_op_category {
    CAT_SOURCE,        /* no operands: inputs, params, constants */
    CAT_ELEMENTWISE,   /* out[i] depends on in[i] only */
    CAT_REDUCTION,     /* reduces over some axes */
    CAT_ROWWISE,       /* reduces the last axis and maps elementwise around it */
    CAT_CONTRACTION,   /* matmul: compute bound */
    CAT_MOVEMENT,      /* moves or picks elements, no arithmetic */
    CAT_ATTENTION,     /* fused attention over [..., T, D] operands: compute bound, no T x S matrix stored */
} nc_op_category;

typedef enum nc_dtype_rule {
    DT_DECLARED,   /* the node's dtype is given by the builder (sources) */
    DT_NUMERIC,    /* operands share one dtype (float or int); result too */
    DT_FLOAT,      /* operands share one float dtype; result too */
    DT_COMPARE,    /* operands share one dtype; result bool */
    DT_WHERE,      /* bool cond, then two operands of one dtype; result theirs */
    DT_CAST,       /* result attr.to */
    DT_ANY,        /* one operand of any dtype; result the same */
    DT_SAME_ANY,   /* operands of one dtype, any; result the same */
    DT_GATHER,     /* table of any dtype, i32 indices; result the table's */
    DT_SCATTER,    /* i32 indices, float src; result the src's */
    DT_LOSS,       /* float logits, i32 targets; result f32 */
    DT_LOSS_GRAD,  /* float logits, i32 targets, f32 scale; result in the logits dtype */
    DT_FLOAT_F32,  /* operands share one float dtype; result f32 (statistics accumulated over rows) */
    DT_ATTENTION,  /* up to four operands of one float dtype (q, k, v, g), then f32
                      row statistics, then the i32 key lengths if given
                      (ir_keyword_operand_slot); result theirs (attention_lse: f32) */
    DT_COUNT
} nc_dtype_rule;

enum {
    OPF_INTERNAL = 1u << 0,        /* not callable from .net source */
    OPF_ACCUM = 1u << 1,           /* accumulates: always in f32, whatever the storage */
    OPF_ROUND_COMMUTES = 1u << 2,  /* op(round(x)) == round(op(x)) bit for bit */
    OPF_RANDOM = 1u << 3,          /* draws random numbers (seeded, counter based) from the training
                                      step: in a graph built to train it takes one more operand after
                                      its nargs, the step (an i32 scalar, the @step input; ir_step_slot
                                      in ir.h); without it, its inference form (dropout: the identity) */
    OPF_ROW_IN_PLACE = 1u << 4,    /* a row-wise kernel whose last pass reads each element of its row
                                      operands and writes the same element of its result in one thread,
                                      and which reads any other element of them before its last barrier:
                                      the result may take a dying row operand's memory */
    OPF_WIDE_RESULT = 1u << 5,     /* accumulates f16/bf16 operands into a result it may store as f32
                                      (attr.f32_result; set by cast hoisting, no syntax) */
    OPF_AVERAGES = 1u << 6,        /* a reduction or row-wise op whose result is the mean over what it
                                      reduces: a loss that reduces the batch axis with it does not grow
                                      with the batch, so --accumulate K's average of K micro-batch
                                      gradients is the gradient of the whole batch (sema_train.c) */
};

typedef struct nc_op_info {
    const char *name;
    int nargs;                     /* -1: one or more */
    nc_op_category category;
    nc_dtype_rule dtype_rule;
    unsigned flags;
    const char *kwargs;
    const char *meaning;
} nc_op_info;

extern const nc_op_info nc_ops[OP_COUNT];
const char *op_name(nc_op op);
bool op_from_name(const char *name, nc_op *out);
/* Operands an op may take past nargs: one if its kwargs name one with the
 * field "operand" (attention's "lengths:operand=-"), a tensor given by its
 * name and appended after the positional ones (ir_keyword_operand_slot). */
int op_optional_operands(nc_op op);

/* Movement read through (cuda_fuse.c, cuda_emit.c): a transpose, slice or
 * concat kernel loads its operand through a chain of reshapes, transposes
 * and slices, mapping each index back link by link, so the links need no
 * kernel of their own (the cast-hoisting pass counts them as free). */
static inline bool op_is_movement_link(nc_op op) { return op == OP_RESHAPE || op == OP_TRANSPOSE || op == OP_SLICE; }
static inline bool op_reads_through(nc_op op) { return op == OP_TRANSPOSE || op == OP_SLICE || op == OP_CONCAT; }

#endif
