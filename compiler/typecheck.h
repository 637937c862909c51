/* typecheck.h - applying the op table's dtype and shape rules to one node. */
#ifndef NC_TYPECHECK_H
#define NC_TYPECHECK_H

#include "ir.h"

/* A rule's complaint. msg and hint are as long as what is written (a
 * require's message, its bound shapes and its hint, however long): "" or a
 * string of the heap, which tc_error_free frees. Every function below
 * starts e afresh, so free a failed one's before passing it again. */
typedef struct tc_error {
    char *msg;
    char *hint;         /* "": none */
    int arg;            /* operand the problem is about, -1 = the call as a whole */
    const char *attr;   /* else the attribute it is about, as its field in the op's kwargs
                           spec in ops.def ("f", "axes", "lo"...), for sema to point at the
                           argument that set it; NULL = none. On success: the attribute
                           the result's dims come from (fill's shape), if any */
    char **texts;       /* the dims and shapes msg and hint quote, each whole; ops.c's, */
    uint32_t ntexts;    /* freed with them */
} tc_error;

/* Frees e's msg and hint, leaving "" (attr and arg stay). A tc_error zeroed
 * or filled by the functions below, failed or not. */
void tc_error_free(tc_error *e);

/* Fill n's dtype and shape from its operands and attrs; false with e set if the
 * operands do not fit the op. n->nargs must be set. */
bool tc_infer(ir_graph *g, ir_node *n, const ir_value *args, tc_error *e);

/* The rules of n's op on the symbolic dims' values (syms, by symbol id),
 * for a session binding them: false with e->msg saying which dim is too
 * large and why (gather: an iota index past its table's rows). */
bool tc_check_binding(const ir_graph *g, const ir_node *n, const int64_t *syms, tc_error *e);
/* The graph's conditions on sizes (an assert on symbolic sizes) at the
 * binding syms: false with e naming the first that fails, its sizes and
 * its assert's message. */
bool tc_check_requires(const ir_graph *g, const int64_t *syms, tc_error *e);
/* Every check a binding of the symbolic dims must pass: each node's
 * tc_check_binding, then tc_check_requires. A session runs it when it binds
 * them, netc inspect when --dim binds them all. */
bool tc_check_bound_sizes(const ir_graph *g, const int64_t *syms, tc_error *e);

/* The integer values v may hold for every op that reads it, at the binding
 * syms: [0, bound), the smallest over its uses (a cross entropy's classes, a
 * gather's or scatter-add's rows), followed through ops that only move or
 * repeat values (reshape, slice...). 0: no use bounds it. */
int64_t ops_value_bound(const ir_graph *g, ir_value v, const int64_t *syms);

/* Type-check and append. */
bool ir_build(ir_graph *g, const ir_node *proto, const ir_value *args, uint16_t nargs, ir_value *out,
              tc_error *e);

/* ir_build for netc's own runs of nodes (the optimizer update, the chunked
 * loss), each at loc. Once failed is set, by a type error (err: "who:
 * message") or an operand IR_NONE (an earlier node failed), nothing more is
 * built and every call returns IR_NONE: a run of calls checks once, at its end. */
typedef struct ir_builder {
    ir_graph *g;
    nc_loc loc;
    const char *who;
    bool failed;
    char *err;
    size_t errcap;
} ir_builder;

ir_value irb_node(ir_builder *b, ir_node proto, const ir_value *args, int nargs);
ir_value irb_op1(ir_builder *b, nc_op op, ir_value x);
ir_value irb_op2(ir_builder *b, nc_op op, ir_value x, ir_value y);

#endif
