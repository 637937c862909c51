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

/* g renumbered with each rounding round trip f32(bf16(x)) read by one
 * elementwise op of its shape later on moved just before that op, where
 * fusion computes it as it loads x; NULL when nothing moves. */
ir_graph *schedule_round_trips_late(const ir_graph *g, FILE *report);

/* g with each widening cast f32(x) of a matmul's f16/bf16 product that
 * several elementwise ops read (a weight gradient: the norm's square, the
 * update) copied once per reader, so each reader's kernel widens the narrow
 * product as it loads it and the matmul stores x in its own dtype (not f32,
 * read twice); NULL when there is none. */
ir_graph *schedule_widenings_per_reader(const ir_graph *g, FILE *report);

/* The four, in that order (the last three only with fusion: the loss
 * gradients write the row losses, the round trips and widenings fuse into
 * their readers):
 * the training step's schedule (NULL: no change). */
ir_graph *schedule_training_step(const ir_graph *g, bool fuse, FILE *report);

#endif
