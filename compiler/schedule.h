/* schedule.h - the order of a training step's nodes (schedule.c). */
#ifndef NC_SCHEDULE_H
#define NC_SCHEDULE_H

#include "ir.h"
#include <stdio.h>

/* g renumbered with the parameters' copies the backward pass reads first;
 * NULL when g is not a training step or nothing moves. g is not modified.
 * One line to report (NULL: none) says what moved. */
ir_graph *schedule_parameter_copies_first(const ir_graph *g, FILE *report);

/* g renumbered with each cross_entropy_grad (and what it reads that comes
 * later) just before the cross_entropy of the same logits, targets and
 * smoothing, so the gradient's kernel can write the row losses the loss
 * averages (cuda_fuse.c); NULL when nothing moves. */
ir_graph *schedule_loss_gradients_first(const ir_graph *g, FILE *report);

/* Both, in that order (the loss gradients only with fusion, which is what
 * writes the row losses): the training step's schedule (NULL: no change). */
ir_graph *schedule_training_step(const ir_graph *g, bool fuse, FILE *report);

#endif
