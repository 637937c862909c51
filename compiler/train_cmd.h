/* train_cmd.h - `netc train`: build the training step of a .net model and
 * run it over a data set, with progress, evaluation, metrics, checkpoints. */
#ifndef NC_TRAIN_CMD_H
#define NC_TRAIN_CMD_H

#include "base.h"
#include "ir.h"

typedef struct train_opts {
    const char *model_path;
    const char *model;             /* which model of the file (--model; NULL: the first) */
    const char *data_dir;
    int64_t epochs, batch;
    const char *device;            /* cpu | gpu | auto */
    uint64_t seed;
    double lr;                     /* 0 = the train section's */
    int64_t accumulate;            /* micro-batches per step (1 = off) */
    int64_t memory_budget;         /* bytes the training step's plan must fit (0 = no limit) */
    bool no_fuse;                  /* one kernel per op on the GPU */
    int loss_slices;               /* a large-vocabulary loss's slices (1: whole; 0: netc's choice, loss_chunk.c) */
    const char *target;            /* NVRTC target of the GPU kernels (--target; NULL: compute_80 PTX) */
    const char *checkpoint_dir;
    int64_t checkpoint_every;      /* steps; 0 = only at epoch ends */
    bool resume;
    const char *metrics_path;      /* JSON lines; an SVG loss curve lands next to it */
    const char *save_path;         /* final weights, safetensors */
    int64_t max_steps;             /* stop early (tests); 0 = no limit */
    int64_t eval_samples;          /* score the test set's first N samples; 0 = all */
    const char *const *dim_names;  /* --dim bindings (the batch dim comes from --batch) */
    const int64_t *dim_values;
    int ndims;
    const char *const *set_names;  /* --set overrides */
    const char *const *set_values;
    int nsets;
    const char *const *disabled_passes;   /* --no-PASS */
    int ndisabled;
    bool werror;                   /* -Werror: the model's warnings stop the run */
} train_opts;

/* The learning rate of s's schedule (warm-up, step or cosine) at step
 * (optimizer steps before this one), from base (--lr, else s->lr);
 * total_steps: the run's, which a cosine schedule without its own spans. */
double train_schedule_lr(const ir_train_spec *s, double base, int64_t step, int64_t total_steps);

/* Where a run stands as a step begins: what the training step's scalar
 * inputs (autodiff.h's TRAIN_INPUT_*) are computed from. */
typedef struct train_point {
    int64_t step;                  /* optimizer steps before this one */
    double lr;                     /* this step's rate (train_schedule_lr) */
    double scale;                  /* the loss scale now */
    int64_t micro, accumulate;     /* this micro-batch, of how many a step (1: no --accumulate) */
} train_point;

/* The value netc train feeds the training step's scalar input `name` at p;
 * false for another input. */
bool train_scalar_value(const ir_train_spec *s, const train_point *p, const char *name, double *v);
/* A run's first step without --lr or --accumulate: what `netc run
 * --random-inputs` and `netc inspect --profile` feed a training step. */
train_point train_first_point(const ir_train_spec *s);

/* The process exit code: 128 + the signal for a run a SIGINT or SIGTERM
 * stopped, once it saved what it had. */
int train_main(const train_opts *o);

/* The last thing netc does, after every free: a run a signal stopped dies
 * of that signal, so that the shell running it sees why (a script's loop of
 * runs stops at Ctrl-C, where an exit 130 lets it go on); any other rc is returned. */
int train_exit(int rc);

#endif
