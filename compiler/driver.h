/* driver.h - one compilation from source text to a checked IR graph.
 * The command line (main.c), the tests and the fuzz targets all go through here. */
#ifndef NC_DRIVER_H
#define NC_DRIVER_H

#include "diag.h"
#include "ir.h"
#include "source.h"

typedef struct driver_opts {
    const char *stdlib_dir;            /* where `import nn` looks; NULL = built-in default */
    const char *const *dim_names;      /* --dim NAME=VALUE: bind symbolic dims at build time */
    const int64_t *dim_values;
    int ndims;
    const char *const *set_names;      /* --set NAME=VALUE: override config constants */
    const char *const *set_values;
    int nsets;
    const char *model;                 /* which model to build; NULL = the first one */
    bool verify;                       /* run the IR verifier after every pass */
    bool keep_loss;                    /* keep the train section's loss (training builds) */
    bool train_step;                   /* build the training step: backward + optimizer update */
    bool loss_only;                    /* the forward pass to the train section's loss, its one output
                                          (TRAIN_OUTPUT_LOSS), dropout the identity: netc train scores
                                          a model that is not a classifier by it */
    int accumulate;                    /* micro-batches per training step (0, 1: no accumulation) */
    int loss_slices;                   /* --loss-slices: a large-vocabulary loss's slices (1: whole; 0: netc's choice, loss_chunk.c) */
    struct loss_chunk_tally *loss_tally; /* out (NULL: not wanted): += what loss_slices could slice (loss_chunk_count) */
    int64_t memory_budget;             /* bytes a training step's plan must fit (0: no limit) */
    FILE *report;                      /* the optimizer's decisions, one line each (NULL: none) */
    bool fuse;                         /* the kernels will be fused: plans (--memory-budget) count that */
    const char *dump_after;            /* --dump-ir=after:PASS ("" = final IR) */
    FILE *dump_out;
    const char *const *disabled_passes;/* --no-PASS */
    int ndisabled;
} driver_opts;

/* A --set value, read one way for every command: a decimal integer that
 * fits in 64 bits, a finite decimal number (1.5e-3), true or false. */
typedef enum { DRIVER_SET_INT, DRIVER_SET_NUMBER, DRIVER_SET_BOOL } driver_set_kind;
typedef struct driver_set_value {
    driver_set_kind kind;
    int64_t i;   /* DRIVER_SET_INT; DRIVER_SET_BOOL: 1 for true */
    double f;    /* DRIVER_SET_NUMBER */
} driver_set_value;

/* Reads text into *out; returns NULL, or why text is not such a value. */
const char *driver_set_value_parse(const char *text, driver_set_value *out);

/* Parse, check and lower the file at path (already added to sources as
 * file_id). Returns the graph, or NULL when diagnostics reported errors. */
ir_graph *driver_compile(src_table *sources, uint32_t file_id, const driver_opts *o, diag_ctx *d);

/* A warning where --accumulate K would not give one batch's result: the
 * loss of g (its batch a symbol) combines samples other than by a mean. */
void driver_warn_accumulate(const ir_graph *g, int accumulate, diag_ctx *d);

/* What to do about model g having no train section, into buf (returned):
 * the file's models with one (the first model is the default; another may
 * be the one to train), else the section to add. netc build's hint and
 * netc train's error say the same. */
const char *driver_no_train_hint(const ir_graph *g, char *buf, size_t cap);

/* Parse and type-check only (netc check): returns the number of errors. */
int driver_check(src_table *sources, uint32_t file_id, const driver_opts *o, diag_ctx *d);

#endif
