/* typecheck.h - applying the op table's dtype and shape rules to one node. */
#ifndef NC_TYPECHECK_H
#define NC_TYPECHECK_H

#include "ir.h"

typedef struct tc_error {
    char msg[512];
    char hint[512];
    int arg;            /* operand the problem is about, -1 = the call as a whole */
} tc_error;

/* Fill n's dtype and shape from its operands and attrs; false with e set if the
 * operands do not fit the op. n->nargs must be set. */
bool tc_infer(ir_graph *g, ir_node *n, const ir_value *args, tc_error *e);

/* Type-check and append. */
bool ir_build(ir_graph *g, const ir_node *proto, const ir_value *args, uint16_t nargs, ir_value *out,
              tc_error *e);

#endif
