/* gpu_check.h - compile a .net model in-process, run it on the GPU and on the
 * CPU executor with the same random inputs and parameters, and compare.
 * Shared by the op-by-op and the model-by-model GPU tests. */
#ifndef GPU_CHECK_H
#define GPU_CHECK_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gpu_check_opts {
    const char *name;          /* for messages and the rerun line */
    const char *source;        /* .net text, or NULL to read path */
    const char *path;
    const char *const *dim_names;
    const int64_t *dim_values;
    int ndims;
    const char *const *set_names;   /* --set overrides */
    const char *const *set_values;
    int nsets;
    uint64_t seed;
    int int_range;             /* integer inputs are drawn from [0, int_range) */
    bool use_graph;            /* capture and replay (run twice, compare both) */
    bool fuse;                 /* emit with elementwise fusion (--fuse) */
    bool train_step;           /* check the training step (one run: it updates the parameters);
                                  its scalar inputs (@lr, ...) get fixed sane values */
    bool stage_inputs;         /* inputs go through gpu_stage_input (pinned memory, a copy stream),
                                  the next run's staged while one runs; their buffers hold 0xff before */
    int64_t memory_budget;     /* bytes: a training step recomputes forward values to fit (--memory-budget) */
    bool profile;              /* then gpu_profile: every launch timed (a time > 0 at each launch's first
                                  step, 0 at a batch's others); a forward pass's outputs checked again */
    bool check_updates;        /* a training step's new parameters compared too (with plain SGD they
                                  carry the gradients' sizes, which Adam's first step hides) */
    bool bgrad_epilogue;       /* NETC_DGELU_BGRAD=1 as the session is made: cuBLASLt's DGELU_BGRAD, not the second product */
    const char *arch;          /* a cubin for this architecture (sm_90a: attention's wgmma kernels), not compute_80 PTX;
                                  a device of another one gets the source compiled for it) */
    bool same_bits;            /* a training step run again from the same parameters and inputs must give
                                  the same bits (outputs and new parameters) */
    const char *mock_refuse;   /* on the mock GPU, cuBLASLt epilogues its heuristic finds no algorithm for
                                  (NETC_MOCK_CUBLASLT_REFUSE): the runtime's fallbacks; a GPU ignores it */
    bool skew_param;           /* a test of the checker: the first parameter's first element goes to the GPU one
                                  larger than the executor's, a mismatch that must be reported, with the launch
                                  that first differs */
    const char *wrong_after, *wrong_from, *wrong_to;   /* a test of the checker: a kernel made wrong, the first
                                  wrong_from after wrong_after in the emitted CUDA replaced by wrong_to */
} gpu_check_opts;

/* 0 pass, 1 fail, 77 no GPU. Prints what failed and how to rerun. */
int gpu_check(const gpu_check_opts *o);

#endif
