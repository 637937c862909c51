/* gpu.h - the GPU backend of a session: driver API and cuBLASLt loaded at run
 * time (so binaries start on machines without a driver), one arena laid out
 * by the memory plan, the steps launched in order, and after the first run
 * the whole run captured and replayed as a CUDA graph. */
#ifndef NRT_GPU_H
#define NRT_GPU_H

#include "module.h"

typedef struct gpu_session gpu_session;

/* Is a usable GPU present? Fills why (when not) for messages. */
bool gpu_probe(char *why, size_t cap);

/* The NVRTC architecture that suits device device_index best
 * (module_best_arch: "sm_90a" on a 9.0 device, else "sm_XY"). */
int gpu_device_arch(int device_index, char *arch, size_t archcap, char *err, size_t errcap);

/* Create a session for the module at bound symbolic dims. params_host holds
 * each parameter's initial value in its dtype's native layout (f16/bf16 as
 * 16-bit encodings). */
int gpu_session_create(const nrt_module_data *m, const int64_t *syms, int device_index, bool use_graph,
                       gpu_session **out, char *desc, size_t desccap, char *err, size_t errcap);
/* A session whose arena is the lender's scratch (the part above the
 * buffers the lender keeps between runs, memplan.h) when it fits there,
 * else an arena of its own (gpu_arena_borrowed says which); on the
 * lender's device. Their runs must not overlap: the caller finishes one
 * session's run (a download, gpu_run, gpu_finish) before starting the
 * other's, and frees the borrower first. netc train's evaluation borrows the
 * training step's arena this way. */
int gpu_session_create_in(const nrt_module_data *m, const int64_t *syms, const gpu_session *lender, gpu_session **out,
                          char *desc, size_t desccap, char *err, size_t errcap);
bool gpu_arena_borrowed(const gpu_session *s);
void gpu_session_free(gpu_session *s);

/* Copy host bytes into / out of the device buffer of IR value v. */
int gpu_upload(gpu_session *s, uint32_t value, const void *data, size_t bytes, char *err, size_t errcap);
int gpu_download(gpu_session *s, uint32_t value, void *data, size_t bytes, char *err, size_t errcap);
int gpu_run(gpu_session *s, char *err, size_t errcap);
/* gpu_run in two halves: gpu_launch queues the run (and the staged inputs'
 * copies before it) and returns at once; gpu_finish waits for it. Between
 * them the host may stage the next inputs, whose copy then overlaps the run. */
int gpu_launch(gpu_session *s, char *err, size_t errcap);
int gpu_finish(gpu_session *s, char *err, size_t errcap);
/* Profiling: the program runs times, each launch (a kernel, a batch of
 * them, a matmul, a copy) on its own between two events, no CUDA graph;
 * step_seconds[k] = the median device time of the launch step k starts (0
 * at the other steps of a batch). step_seconds holds the program's step
 * count. */
int gpu_profile(gpu_session *s, int runs, double *step_seconds, char *err, size_t errcap);
/* Debugging: run the one launch step *k starts (its prepare steps too, if
 * it is one), wait for it, and move *k past the steps it ran; no graph. */
int gpu_run_launch(gpu_session *s, uint32_t *k, char *err, size_t errcap);

/* Input prefetch: copy bytes for input value v into pinned host memory now
 * and on to the device on a copy stream of their own, into a landing buffer
 * (the input's own memory may still be read by a run in flight). The next
 * gpu_launch waits for that copy on the device and moves the bytes into the
 * input. Two stagings of a value may be waiting at most. */
int gpu_stage_input(gpu_session *s, uint32_t value, const void *data, size_t bytes, char *err, size_t errcap);
/* Drop stagings no run has taken (the end of an epoch, a break). */
int gpu_drop_staged(gpu_session *s, char *err, size_t errcap);
/* Seconds the device spent waiting for staged inputs, over all runs. */
double gpu_input_wait_seconds(const gpu_session *s);
int64_t gpu_arena_bytes(const gpu_session *s);
/* All the device memory the session allocated (arena, workspace, tables,
 * landing buffers); what the device as a whole has in use, every process and
 * context included (cuMemGetInfo), -1 if unknown. */
int64_t gpu_device_bytes(const gpu_session *s);
/* The streams a run's launches spread over (NETC_STREAMS, launch_dag.h);
 * each holds a cuBLASLt workspace of its own. */
uint32_t gpu_streams(const gpu_session *s);
int64_t gpu_device_used_bytes(gpu_session *s);
/* Tests: fill every buffer except inputs and parameters with 0xff bytes (NaN
 * for floats), so an element a kernel forgets to write cannot pass; what
 * prepare steps made is spared while current (the next run skips them). */
int gpu_poison(gpu_session *s, char *err, size_t errcap);

#endif
