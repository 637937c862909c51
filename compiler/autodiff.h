/* autodiff.h - reverse-mode differentiation and the optimizer update: from a
 * model with a loss to one training-step graph (forward, loss, backward,
 * update), which the passes then optimize as a whole. */
#ifndef NC_AUTODIFF_H
#define NC_AUTODIFF_H

#include "ir.h"

#include <stdio.h>

/* Append the backward computation; param_grads[i] receives the gradient of
 * trained parameter i (IR_NONE if the loss does not depend on it). seed is
 * the gradient of the loss itself (IR_NONE = 1; the loss scale for f16). */
bool autodiff_run(ir_graph *g, ir_value seed, ir_value *param_grads, char *err, size_t errcap);

/* A gradient already computed in the graph: value's share of the loss's. */
typedef struct ad_contribution {
    ir_value value, grad;
} ad_contribution;

/* autodiff_run, where the backward of the loss down to some values is
 * already in the graph (pre, npre > 0: their gradients, seed included): the
 * sweep starts from them instead of the loss. */
bool autodiff_run_with(ir_graph *g, ir_value seed, const ad_contribution *pre, int npre, ir_value *param_grads,
                       char *err, size_t errcap);

/* The vector-Jacobian product: the gradients gwrt[i] of the values wrt[i]
 * when out's gradient is gout (IR_NONE where out does not depend on one),
 * appended to the graph after everything already there. The wrt values are
 * leaves: what flows through one of them to another is not counted. */
bool autodiff_vjp(ir_graph *g, ir_value out, ir_value gout, const ir_value *wrt, int nwrt, ir_value *gwrt, char *err,
                  size_t errcap);

/* Names of the scalars the training loop feeds every step. */
#define TRAIN_INPUT_LR "@lr"          /* the schedule's learning rate */
#define TRAIN_INPUT_BC1 "@bias1"      /* Adam: 1 - beta1^t */
#define TRAIN_INPUT_BC2 "@bias2"      /* Adam: 1 - beta2^t */
#define TRAIN_INPUT_SCALE "@scale"    /* loss scale (f16 training) */
#define TRAIN_OUTPUT_LOSS "loss"
#define TRAIN_INPUT_APPLY "@apply"    /* gradient accumulation: 1 on a step's last micro-batch, else 0 */
#define TRAIN_INPUT_STEP "@step"      /* i32: the run's number, which dropout draws its masks from */
#define TRAIN_OUTPUT_FINITE "@finite" /* all gradients finite (dynamic loss scaling) */
#define TRAIN_OUTPUT_NORM "@grad_norm"

/* The whole training step: differentiate, clip, scale, and update every
 * parameter and its optimizer state (declared as state parameters), per the
 * graph's train spec. The graph gains the scalar inputs above (@step comes
 * earlier, from train_step_input), the outputs loss (and @finite,
 * @grad_norm) and one update per parameter and state. */
/* accumulate > 1: the graph runs once per micro-batch; gradients add up in
 * f32 state parameters (NAME.grad_acc) and the update, of their mean, takes
 * effect only where the input @apply is 1 (the accumulators then reset). */
/* loss_slices: how many slices a large-vocabulary head and its loss take
 * (loss_chunk.c): 1, whole; 0, as few as keep each slice's logits within
 * 512 MiB (fewer, larger products, less f32 accumulation of the weight's
 * gradient); LOSS_SLICES_MOST, the least memory (what a memory budget asks
 * for); never more than the sliced axis's length. report (or NULL) gets a
 * line when the head is sliced. */
#define LOSS_SLICES_MOST 8
bool train_step_build(ir_graph *g, int accumulate, int loss_slices, FILE *report, char *err, size_t errcap);

/* A graph built to train (its loss kept) draws its random ops' numbers from
 * the step: the copy of g with one more input, @step (TRAIN_INPUT_STEP, an
 * i32 scalar the loop sets each run), read by every random op (dropout) as
 * its last operand (ir_step_slot, ir.h); NULL when g has no random op. The
 * driver makes it before differentiating, so the backward pass's dropouts
 * (the same mask) and recomputed copies read the same step. */
ir_graph *train_step_input(const ir_graph *g);

/* loss_chunk.c: rewrite cross_entropy(matmul(h, W, transpose_b)) as slices,
 * each with its backward right after it. Returns the number of gradient
 * contributions written to out (0: the loss is not such a head), or -1 with
 * err set. seed: the loss's gradient (IR_NONE = 1); slices: as for
 * train_step_build. */
int loss_chunk_build(ir_graph *g, ir_value seed, int slices, ad_contribution out[2], FILE *report, char *err, size_t errcap);
/* The same for a forward graph: each output that is such a loss becomes
 * the sum of its slices' (no backward): slices of them (1: none), or with
 * slices 0 as many as keep 256 rows or more in each. Returns how many, or
 * -1 with err set. */
int loss_chunk_forward(ir_graph *g, int slices, FILE *report, char *err, size_t errcap);
/* What the rewrite above could slice, summed over the graphs a command
 * builds. With no head, --loss-slices asks for nothing, and with fewer rows
 * than it asks for, gets that many: the CLI warns (loss_chunk_warnings). */
typedef struct loss_chunk_tally {
    int heads;      /* the losses of the sliced form */
    int64_t rows;   /* the fewest rows along a sliced axis of those (0: none yet): the most slices they take */
    int unbound;    /* the losses of that form whose sliced axis is symbolic */
} loss_chunk_tally;
/* Adds g's losses to t: the train section's (train) or the outputs' (forward). */
void loss_chunk_count(const ir_graph *g, bool train, loss_chunk_tally *t);
/* The warning for --loss-slices slices where no loss could be sliced (t's
 * heads 0; unbound of them for a symbolic axis), or where one has fewer
 * rows to split than slices, on out (an error under -Werror, werror);
 * nothing otherwise. Returns whether it failed the command. */
bool loss_chunk_warnings(int slices, const loss_chunk_tally *t, bool werror, FILE *out);

#endif
