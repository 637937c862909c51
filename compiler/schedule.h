/* schedule.h - the order of a training step's nodes (schedule.c). */
#ifndef NC_SCHEDULE_H
#define NC_SCHEDULE_H

#include "ir.h"
#include <stdio.h>

/* g renumbered with the parameters' copies the backward pass reads first;
 * NULL when g is not a training step or nothing moves. g is not modified.
 * One line to report (NULL: none) says what moved. */
ir_graph *schedule_parameter_copies_first(const ir_graph *g, FILE *report);

#endif
