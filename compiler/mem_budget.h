/* mem_budget.h - --memory-budget: choose what a training step recomputes so
 * its planned peak memory fits. */
#ifndef NC_MEM_BUDGET_H
#define NC_MEM_BUDGET_H

#include "ir.h"
#include <stdio.h>

/* Replace *g by the same step recomputing as little as it must to plan within
 * budget bytes; a line on log says what was chosen. false with err if g is
 * not a bound training step or no recomputation fits. fuse: plan the fused
 * program (as it will run). */
bool mem_budget_fit(ir_graph **g, int64_t budget, bool fuse, FILE *log, char *err, size_t errcap);

/* The device memory a GPU session running g's program holds (bound dims),
 * fused or not: the planned arena and what the runtime allocates beside it
 * (nrt_program_side_bytes); -1 with err set if it cannot be emitted or
 * planned. */
int64_t mem_budget_planned_peak(const ir_graph *g, bool fuse, char *err, size_t errcap);

/* The roofline floor of g's program on an H100 in seconds (as netc inspect's
 * total), the time a budget's plans are weighed by; -1 on error. */
double mem_budget_planned_floor(const ir_graph *g, bool fuse, char *err, size_t errcap);

/* The forward values a segment plan keeping "every matmul and attention
 * result" keeps: each such result the backward pass reads, else the values
 * it reads that are made from one (a matmul's raw product that only its
 * bias/GELU epilogue reads is not kept, the value after the bias is). An
 * array of g->nnodes + 1 the caller frees. */
bool *mem_budget_dear_results(const ir_graph *g);

/* "4GiB", "512MiB", "6GB", "1.5G", "1048576": bytes; false if malformed. */
bool mem_budget_parse(const char *text, int64_t *bytes);

#endif
