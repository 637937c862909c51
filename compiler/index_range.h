/* index_range.h - the values an i32 index computed from iotas can take.
 *
 * A gather's indices are often arithmetic on iotas (nn.windows: the image's
 * iota times its pixels, plus a pixel picked by where). i32 arithmetic wraps
 * past 2^31 - 1, so an index that would pass it picks a wrong row, silently.
 * irange_find works the values out exactly as numbers, at sizes known when
 * the model is built or at a session's binding of its symbolic dims, and
 * names the first i32 op whose values would leave i32. */
#ifndef NC_INDEX_RANGE_H
#define NC_INDEX_RANGE_H

#include "ir.h"

typedef struct irange {
    int64_t lo, hi;        /* v's values as numbers, without wrapping */
    ir_value wraps;        /* the first i32 op whose values leave i32, or IR_NONE */
    int64_t wrap_lo, wrap_hi;   /* that op's values */
} irange;

/* The values of v at the binding syms (NULL: the sizes known when the model
 * is built). False when v is not such an expression: iotas, whole-number
 * fills, + - * neg maximum minimum where and sums of them, through reshapes,
 * broadcasts, transposes and slices; or a size it needs is not known. */
bool irange_find(const ir_graph *g, ir_value v, const int64_t *syms, irange *out);

#endif
