/* netrt.h - libnetrt, the netc runtime: load a compiled module (.netm) and run
 * it on an NVIDIA GPU or on the CPU reference executor.
 *
 *   static uint8_t pixels[64][28][28];  static float logits[64][10];
 *   nrt_module *m;  nrt_session *s;  nrt_error e;
 *   if (nrt_module_load("mlp.netm", &m, &e)) { fprintf(stderr, "%s\n", e.message); return 1; }
 *   nrt_session_opts o = nrt_session_defaults();       // device auto, seed 0
 *   o.dim_names = (const char *[]){"B"}; o.dim_values = (int64_t[]){64}; o.ndims = 1;
 *   if (nrt_session_create(m, &o, &s, &e)) { fprintf(stderr, "%s\n", e.message); return 1; }
 *   nrt_session_set_input(s, "images", NRT_U8, 3, (int64_t[]){64, 28, 28}, pixels, &e);
 *   nrt_session_run(s, &e);
 *   nrt_session_get_output(s, "logits", logits, sizeof logits, &e);
 *   nrt_session_free(s);  nrt_module_free(m);
 *
 * Errors: every call returns NRT_OK (0) or an error code, and fills the
 * caller's nrt_error (may be NULL) with a message. The library never prints
 * and never exits. A NULL module, session, name, path, data buffer, shape
 * (of rank > 0) or out-pointer is refused with NRT_ERR_ARGUMENT, the message
 * naming the argument (the loads and nrt_session_create set *out to NULL
 * whenever they fail); calls that return no status give 0 or NULL for a
 * NULL module or session. Freeing NULL does nothing; a module or session used
 * after it was freed, or freed twice, is the caller's bug (not detected).
 *
 * Copies to a GPU: a value set (nrt_session_set_input, _set_param,
 * _load_weights) whose copy to the device fails is refused with
 * NRT_ERR_DEVICE, yet is set: the session keeps it on the host, where
 * nrt_session_get_param and _save_weights read it, and the next
 * nrt_session_run (or _profile) copies it before it starts. Should that copy
 * fail as well, the run is refused with NRT_ERR_DEVICE naming the tensor,
 * and there is no output to read until a run succeeds. A run never uses the
 * device's old copy of a value set since, nor some new parameters and some
 * old. A training run that fails on the device may have moved some
 * parameters and not others (the kernels stop where they are): until each
 * parameter it updates is set again (nrt_session_load_weights, or
 * nrt_session_set_param), the next run, nrt_session_get_param of such a
 * parameter and nrt_session_save_weights are refused with NRT_ERR_STATE
 * naming it, so that part-updated values are never read as trained ones.
 *
 * Threads: a module is immutable after loading and may be shared by sessions
 * on any threads. Different sessions may run concurrently, each on its own
 * thread, and a session may move from one thread to another between calls.
 * A session used by two threads at once is the caller's bug (not detected).
 * On the GPU, every call makes the device's primary context current on the
 * calling thread (and leaves it so); the sessions on one device share that
 * context, so a kernel that faults fails them all, as CUDA's errors do. */
#ifndef NETRT_H
#define NETRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nrt_status {
    NRT_OK = 0,
    NRT_ERR_IO = 1,        /* a file could not be read or written */
    NRT_ERR_FORMAT = 2,    /* a module, weights or data file is malformed */
    NRT_ERR_ARGUMENT = 3,  /* a bad name, dtype, shape or size from the caller */
    NRT_ERR_DEVICE = 4,    /* the GPU, driver, NVRTC or cuBLASLt failed */
    NRT_ERR_MEMORY = 5,    /* an allocation was refused */
    NRT_ERR_STATE = 6,     /* a call out of order (output before run, ...) */
} nrt_status;

typedef struct nrt_error {
    nrt_status status;
    char message[1024];   /* what went wrong; a binding a require refuses adds its hint on a second line, "  hint: ...".
                             A longer one (a long name or path in it) keeps its start and its end around "..." */
} nrt_error;

typedef enum nrt_dtype { NRT_F32, NRT_F16, NRT_BF16, NRT_I32, NRT_U8, NRT_BOOL } nrt_dtype;
typedef enum nrt_device { NRT_DEVICE_AUTO, NRT_DEVICE_CPU, NRT_DEVICE_GPU } nrt_device;

typedef struct nrt_module nrt_module;
typedef struct nrt_session nrt_session;

/* ---- modules -------------------------------------------------------- */
nrt_status nrt_module_load(const char *path, nrt_module **out, nrt_error *err);
/* A module built from a model with a train section holds two entry points:
 * "forward" (what nrt_module_load loads) and "train", one training step
 * (forward, backward, optimizer update) whose run updates the session's
 * parameters and optimizer state in place. Its extra scalar inputs: @lr, and
 * for Adam @bias1 = 1 - beta1^t, @bias2 = 1 - beta2^t (t = step, from 1);
 * @scale with loss scaling, @apply with accumulation; and, when the model
 * uses dropout, @step (NRT_I32): the number dropout's masks are drawn from
 * (each mask a function of the op's seed, @step and the element). Set it to
 * a new value every run, e.g. the step count from 0 as netc train does: the
 * same @step draws the same masks (a resumed loop continues its sequence),
 * and a run without it set is refused. CPU and GPU draw the same masks. The
 * forward entry has no @step; its dropout is the identity. entry NULL: what
 * nrt_module_load loads. An entry the module lacks: NRT_ERR_ARGUMENT, naming
 * the entries it has. */
nrt_status nrt_module_load_entry(const char *path, const char *entry, nrt_module **out, nrt_error *err);
/* The module must outlive every session created from it: free them first. */
void nrt_module_free(nrt_module *m);

/* The interface. Symbolic dims show as -1 in shapes; their names come from
 * nrt_module_dim_name. Indexes run from 0 to the count - 1: another index
 * (or a NULL info) gets NRT_ERR_ARGUMENT from the functions that return a
 * status, NULL from those that return a name. The info's name, and every
 * name these functions return, points into the module: valid until
 * nrt_module_free. */
typedef struct nrt_tensor_info {
    const char *name;
    nrt_dtype dtype;
    int rank;
    int64_t shape[8];          /* -1: depends on a symbolic dim */
} nrt_tensor_info;

/* A forward entry of a model with a train section lists the train section's
 * inputs too (labels), after the model's: its runs do not read them, and
 * need them not set. */
int nrt_module_num_inputs(const nrt_module *m);
int nrt_module_num_outputs(const nrt_module *m);
int nrt_module_num_params(const nrt_module *m);
nrt_status nrt_module_input(const nrt_module *m, int i, nrt_tensor_info *info);
nrt_status nrt_module_output(const nrt_module *m, int i, nrt_tensor_info *info);
nrt_status nrt_module_param(const nrt_module *m, int i, nrt_tensor_info *info);
int nrt_module_num_dims(const nrt_module *m);
const char *nrt_module_dim_name(const nrt_module *m, int i);
/* The name of the symbolic dim an input's axis is, or NULL when the axis is
 * fixed or an expression (B*T). Lets a caller bind dims from data shapes. */
const char *nrt_module_input_dim(const nrt_module *m, int input, int axis);
/* "f32", and its bytes; "?" and 0 for a value outside the enum. */
const char *nrt_dtype_name(nrt_dtype t);
size_t nrt_dtype_size(nrt_dtype t);

/* ---- sessions ------------------------------------------------------- */
typedef struct nrt_session_opts {
    nrt_device device;         /* AUTO: the GPU when one is usable, else the CPU */
    const char *const *dim_names;   /* bind every symbolic dim */
    const int64_t *dim_values;
    int ndims;
    uint64_t seed;             /* parameter initialisation */
    int gpu_index;             /* which GPU (default 0) */
    int use_cuda_graph;        /* replay runs as one CUDA graph (default 1) */
} nrt_session_opts;

nrt_session_opts nrt_session_defaults(void);
/* o NULL: the defaults. Refused with NRT_ERR_ARGUMENT: a device other than
 * the three, a negative gpu_index, a dim the module lacks or bound twice,
 * one left unbound, a value outside 1 to 2^40, and values at which a
 * tensor's size does not evaluate: a product (B*T, its bytes) past int64_t
 * (for a GPU session, a tensor of more than 2^40 elements, checked before the
 * GPU is looked for), a difference (T - 2) below 0 or at 0 (an empty tensor), and values at which a model's `require`
 * on sizes is false (nn.batch_norm's training step at B = 1: the message
 * names the require, the sizes and its message). NRT_DEVICE_GPU where no
 * GPU is usable, or its setup fails: NRT_ERR_DEVICE. Any number of sessions
 * may share one module. */
nrt_status nrt_session_create(const nrt_module *m, const nrt_session_opts *o, nrt_session **out, nrt_error *err);
void nrt_session_free(nrt_session *s);
/* "cpu" or e.g. "cuda:0 NVIDIA H100 80GB HBM3 (sm_90)", in the session:
 * valid until nrt_session_free. */
const char *nrt_session_device(const nrt_session *s);

/* Host data in the dtype's own layout: f16 and bf16 as their 16-bit
 * encodings, bool as one byte 0/1 (another byte: NRT_ERR_ARGUMENT). The
 * shape must match the module's declaration at the session's dims (a
 * scalar: rank 0, shape may be NULL). The data is copied before the call
 * returns. A run refuses, with
 * NRT_ERR_STATE, while an input it reads has not been set; an input keeps its
 * value across runs until set again. An input of more than 2^32 elements
 * (the session keeps a host copy of it, 4 bytes an element, on a GPU too):
 * NRT_ERR_MEMORY. */
nrt_status nrt_session_set_input(nrt_session *s, const char *name, nrt_dtype dtype, int rank, const int64_t *shape,
                                 const void *data, nrt_error *err);
/* A bad value in the data (a gather's index or a loss's target out of
 * range) fails the run on the CPU with NRT_ERR_ARGUMENT naming it; a GPU's
 * kernels cannot stop, and give NaN where it was used. A result over the
 * CPU's 16 GiB limit: NRT_ERR_MEMORY. */
nrt_status nrt_session_run(nrt_session *s, nrt_error *err);
/* Shape of an input at the session's dims. */
nrt_status nrt_session_input_info(const nrt_session *s, const char *name, nrt_tensor_info *info, nrt_error *err);
/* The values an integer input may hold, [0, *bound) at the session's dims:
 * the smallest bound over its uses (a cross entropy's labels: its classes; a
 * gather's indices: its table's rows), through reshapes, slices and the like.
 * *bound = 0 when no use bounds it. */
nrt_status nrt_session_input_bound(const nrt_session *s, const char *name, int64_t *bound, nrt_error *err);
/* Shape of an output at the session's dims; copy it out after a run. */
nrt_status nrt_session_output_info(const nrt_session *s, const char *name, nrt_tensor_info *info, nrt_error *err);
/* bytes must be the output's size exactly (NRT_ERR_ARGUMENT). The values of
 * the last run (NRT_ERR_STATE before the first and after a run that failed),
 * on the CPU and the GPU alike: an output that is an input or a parameter
 * itself (return x, w) is the value the run read, not what was set or loaded
 * since, nor what a training step moved it to (nrt_session_get_param reads
 * that). */
nrt_status nrt_session_get_output(nrt_session *s, const char *name, void *data, size_t bytes, nrt_error *err);

/* Parameters: names as in the .net file ("fc1.weight", "h.3.attn.c_attn.weight"). */
nrt_status nrt_session_set_param(nrt_session *s, const char *name, nrt_dtype dtype, int rank, const int64_t *shape,
                                 const void *data, nrt_error *err);
nrt_status nrt_session_get_param(nrt_session *s, const char *name, void *data, size_t bytes, nrt_error *err);
/* The file must hold every parameter of the module and nothing else (a train
 * entry's parameters include the optimizer's state, "fc1.weight.adam_m"),
 * each of the declared shape; a checkpoint of netc train (it holds
 * "@train_state") may hold more: its loop state and its parameters' states
 * ("NAME.SUFFIX" for a parameter NAME), which a forward entry passes over, as it
 * does in any file: what a train entry's session saves (its parameters and
 * their optimizer state) loads into a forward entry's. f32, f16 and bf16 convert to one another.
 * Refused (NRT_ERR_FORMAT, NRT_ERR_IO) with the parameters unchanged. A GPU
 * copy that fails (NRT_ERR_DEVICE) leaves every parameter the file's all the
 * same, those not copied yet copied at the next run (see "Copies to a GPU"). */
nrt_status nrt_session_load_weights(nrt_session *s, const char *safetensors_path, nrt_error *err);
nrt_status nrt_session_save_weights(nrt_session *s, const char *safetensors_path, nrt_error *err);

/* Device memory the session's arena holds, and the plan's peak. */
int64_t nrt_session_arena_bytes(const nrt_session *s);
/* All the device memory the session has allocated: the arena, cuBLASLt's
 * workspace, kernel-argument tables and the landing buffers of staged
 * inputs (what a --memory-budget bounds). 0 on the CPU. Not the CUDA
 * context or the loaded kernels' code. */
int64_t nrt_session_device_bytes(const nrt_session *s);

/* Profiling, GPU sessions only (NRT_ERR_STATE on the CPU): the run is done
 * `runs` times (1 to 10000) from the inputs and parameters set, each launch
 * of the module's program (a kernel, a batch of kernels, a cuBLASLt matmul, a
 * copy) on its own between two CUDA events, without the CUDA graph. step_seconds
 * (nrt_module_num_steps entries) gets, at each step, the median device time of
 * the launch that step starts; 0 at the other steps of a batch (netc inspect
 * lists the steps). The runs move parameters as nrt_session_run does. */
int nrt_module_num_steps(const nrt_module *m);
nrt_status nrt_session_profile(nrt_session *s, int runs, double *step_seconds, int nsteps, nrt_error *err);

#ifdef __cplusplus
}
#endif
#endif
