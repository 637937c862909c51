/* mock_cuda.h - what the mock driver (mock_cuda.c, built as libcuda.so.1)
 * offers the mock cuBLASLt (mock_cublaslt.c, built as libcublasLt.so.13).
 *
 * "Device" memory is host memory: a CUdeviceptr is the address of a block
 * the mock's cuMemAlloc made. Work on a stream runs at once, unless the
 * stream is capturing a graph: then it is recorded and runs at each
 * cuGraphLaunch of the instantiated graph. */
#ifndef MOCK_CUDA_H
#define MOCK_CUDA_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>

/* Work queued on a stream. ctx is copied (ctx_bytes): the work owns its copy
 * and may be run many times (once per graph launch). Returns
 * CUDA_SUCCESS or the error the stream is in. */
typedef void mock_work_fn(void *ctx);
CUresult mock_cuda_enqueue(CUstream stream, mock_work_fn *run, const void *ctx, size_t ctx_bytes);

/* Whether [p, p + bytes) lies inside one live cuMemAlloc block. */
bool mock_cuda_in_device_memory(const void *p, size_t bytes);

/* The next cuModuleLoadData loads these kernels (CUDA C as netc emits it),
 * compiled for the host with tests/unit/cuda_host_shim.hpp, instead of the
 * image it is given. Returns 0, or -1 with a message. */
int mock_cuda_use_source(const char *cuda_source, char *err, size_t errcap);

/* The image the last cuModuleLoadData was given (which of a module's images
 * the runtime chose), NULL before any. */
const void *mock_cuda_last_image(void);

/* Fault injection: the n-th host-to-device copy from now (cuMemcpyHtoD or
 * cuMemcpyHtoDAsync, 1 = the next) fails with CUDA_ERROR_OUT_OF_MEMORY and
 * copies nothing, as a driver refusing it; the copies after it succeed. 0
 * cancels. A test finds it with dlsym in the loaded libcuda.so.1 (absent from
 * a real driver). The environment variable NETC_MOCK_FAIL_HTOD=N does the
 * same for the process's N-th copy, for tests of the command line. */
void mock_cuda_fail_htod(unsigned long long n);

/* Fault injection for every fallible entry point (the driver's and the
 * mock cuBLASLt's; not the frees and destroys, which a runtime can only
 * report): each calls this once, first thing, naming itself. Calls are
 * counted across the process; with NETC_MOCK_FAIL_CALL=N the N-th returns
 * true and the caller fails with the error a real library gives for it (out
 * of memory for an allocation, launch failed for a launch, ...). With
 * NETC_MOCK_CALL_LOG=FILE every counted call appends "N NAME" to FILE, so a
 * sweep learns how many calls a clean run makes and which one N is. */
bool mock_cuda_fault(const char *call);

/* The same from a test, found as mock_cuda_fail_htod is: the n-th fallible
 * call from now (1 = the next) fails; 0 cancels. mock_cuda_calls counts the
 * calls made so far, so a test learns how many one run makes. */
void mock_cuda_fail_call(unsigned long long n);
unsigned long long mock_cuda_calls(void);

#endif
