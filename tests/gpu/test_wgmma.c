/* test_wgmma.c - Hopper's wgmma on its own, as attention's sm_90a kernels
 * use it (compiler/cuda_attention.c, the prelude's nc_wgmma_*): one
 * warpgroup multiplies A (64 x 16, bf16, in mma.sync's register fragments)
 * by a 64 x 128 bf16 tile stored in shared memory as two halves of 64
 * columns with the 128-byte swizzle, read through a descriptor four ways:
 * the first half's rows transposed from column 16 on (K-major, the
 * descriptor moved 32 bytes: the scores), the same from column 80 (the
 * second half, moved 8 KiB more: heads of 128), the first half's rows 16 to
 * 31 themselves (N-major, moved 2048 bytes: P V) and those rows whole, 128
 * columns at once (the halves apart by the descriptor's leading byte offset:
 * P V for heads of 128). The products go to global memory in the
 * accumulator layout and are compared with products computed here. Each layout assumption (A and D fragments,
 * descriptor fields, swizzle, the descriptor's steps) shows as its own
 * pattern of wrong elements, so a GPU that disagrees says which one: the
 * first differences are printed with their row and column.
 *
 * On an sm_90 device (H100, H200) it runs the real instruction; on the mock
 * GPU (tests/mockgpu) the shim's emulation, which the attention kernels'
 * host tests rely on: the same test checks both against the same products.
 * Skipped (77) without a driver, without NVRTC, or on another architecture. */
#include "cuda_compile.h"
#include "cuda_emit.h"
#include "dtype.h"

#include <cuda.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char probe_source[] =
    "extern \"C\" __global__ void wg_probe(nc_args A) {\n"
    "  const unsigned short *a = (const unsigned short *)A.buf[0];\n"
    "  const uint4 *tile = (const uint4 *)A.buf[1];\n"
    "  float *out = (float *)A.buf[2];   /* [4][64][128]: each probe's product, 64 or 128 columns */\n"
    "  __shared__ __align__(1024) uint4 t_mem[1024];\n"
    "  nc_wg_check_aligned(t_mem);\n"
    "  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;\n"
    "  for (int x = tid; x < 1024; x += 128) {   /* row x / 16, 16-byte piece x % 16: half piece / 8, swizzled */\n"
    "    const int row = x >> 4, piece = x & 15;\n"
    "    t_mem[(piece >> 3) * 512 + row * 8 + ((piece & 7) ^ (row & 7))] = tile[x];\n"
    "  }\n"
    "  nc_proxy_fence();\n"
    "  __syncthreads();\n"
    "  const unsigned *a0 = (const unsigned *)(a + (warp * 16 + gid) * 16), *a1 = (const unsigned *)(a + (warp * 16 + gid + 8) * 16);\n"
    "  unsigned af[4] = {a0[tig], a1[tig], a0[4 + tig], a1[4 + tig]};\n"
    "  float d[64];\n"
    "  for (int probe = 0; probe < 4; probe++) {\n"
    "    nc_wg_hold(af, 4);\n"
    "    nc_wg_fence();\n"
    "    if (probe == 0) nc_wgmma_bf16_k(d, af, nc_wg_desc(t_mem) + 2, 0);\n"
    "    else if (probe == 1) nc_wgmma_bf16_k(d, af, nc_wg_desc(t_mem) + 512 + 2, 0);\n"
    "    else if (probe == 2) nc_wgmma_bf16_n(d, af, nc_wg_desc(t_mem) + 128, 0);\n"
    "    else nc_wgmma_bf16_n128(d, af, nc_wg_desc_wide(t_mem) + 128, 0);\n"
    "    nc_wg_commit();\n"
    "    nc_wg_wait(d);\n"
    "    nc_wg_wait(d + 32);\n"
    "    const int n = probe == 3 ? 64 : 32;   /* floats a thread */\n"
    "    for (int e = 0; e < n; e++)\n"
    "      out[probe * 8192 + (warp * 16 + gid + (e & 2 ? 8 : 0)) * 128 + (e >> 2) * 8 + tig * 2 + (e & 1)] = d[e];\n"
    "  }\n"
    "}\n";

#define DRIVER(F)                                                                                          \
    F(cuInit) F(cuDeviceGet) F(cuDeviceGetAttribute) F(cuDevicePrimaryCtxRetain) F(cuCtxSetCurrent)          \
    F(cuModuleLoadData) F(cuModuleGetFunction) F(cuMemAlloc) F(cuMemFree) F(cuMemcpyHtoDAsync)                \
    F(cuMemcpyDtoHAsync) F(cuLaunchKernel) F(cuStreamCreate) F(cuStreamSynchronize) F(cuStreamDestroy)              \
    F(cuModuleUnload) F(cuDevicePrimaryCtxRelease)

static struct {
#define F(name) __typeof__(&name) name;
    DRIVER(F)
#undef F
} cu;

static bool load_driver(void **lib)
{
    *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!*lib) return false;
#define STR(x) #x
#define XSTR(x) STR(x)   /* cuda.h renames some functions (cuMemAlloc is cuMemAlloc_v2) */
#define F(name) \
    if (!(cu.name = (__typeof__(cu.name))dlsym(*lib, XSTR(name)))) return false;
    DRIVER(F)
#undef F
    return cu.cuInit(0) == CUDA_SUCCESS;
}

/* Counts the elements of got ([64][128], the first cols columns) that
 * differ from want; prints the first few. */
static int compare(const char *what, const float *got, const double *want, int cols)
{
    int bad = 0;
    for (int r = 0; r < 64; r++)
        for (int c = 0; c < cols; c++) {
            int i = r * 128 + c;
            if (fabs(got[i] - want[i]) <= 1e-3 * (1.0 + fabs(want[i]))) continue;
            if (bad++ < 6) fprintf(stderr, "  %s: D[%d][%d] = %g, want %g\n", what, r, c, got[i], want[i]);
        }
    if (bad) fprintf(stderr, "%s: %d of %d elements differ\n", what, bad, 64 * cols);
    return bad;
}

#define CHECK(call)                                                        \
    do {                                                                   \
        CUresult rc_ = (call);                                             \
        if (rc_ != CUDA_SUCCESS) {                                         \
            fprintf(stderr, "test_wgmma: %s failed (%d)\n", #call, rc_); \
            return 1;                                                      \
        }                                                                  \
    } while (0)

static int run_probe(const unsigned char *image, const uint16_t *a, const uint16_t *tile, float *out)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUstream st;
    CHECK(cu.cuDeviceGet(&dev, 0));
    CHECK(cu.cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cu.cuCtxSetCurrent(ctx));
    CHECK(cu.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CHECK(cu.cuModuleLoadData(&mod, image));
    CHECK(cu.cuModuleGetFunction(&fn, mod, "wg_probe"));
    CUdeviceptr buf[3];
    size_t bytes[3] = {64 * 16 * 2, 64 * 128 * 2, 4 * 64 * 128 * 4};
    for (int i = 0; i < 3; i++) CHECK(cu.cuMemAlloc(&buf[i], bytes[i]));
    CHECK(cu.cuMemcpyHtoDAsync(buf[0], a, bytes[0], st));
    CHECK(cu.cuMemcpyHtoDAsync(buf[1], tile, bytes[1], st));
    struct { void *buf[NRT_MAX_BUFS]; long long n[NRT_MAX_INTS]; unsigned long long step; } args = {0};
    for (int i = 0; i < 3; i++) args.buf[i] = (void *)(uintptr_t)buf[i];
    void *params[] = {&args};
    CHECK(cu.cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, 0, st, params, NULL));
    CHECK(cu.cuMemcpyDtoHAsync(out, buf[2], bytes[2], st));
    CHECK(cu.cuStreamSynchronize(st));
    for (int i = 0; i < 3; i++) CHECK(cu.cuMemFree(buf[i]));
    CHECK(cu.cuStreamDestroy(st));
    CHECK(cu.cuModuleUnload(mod));
    CHECK(cu.cuDevicePrimaryCtxRelease(dev));
    return 0;
}

int main(void)
{
    void *lib;
    if (!load_driver(&lib)) {
        printf("no GPU: skipped\n");
        return 77;
    }
    if (!nvrtc_available()) {
        printf("no NVRTC: skipped\n");
        return 77;
    }
    CUdevice dev;
    int major = 0, minor = 0;
    if (cu.cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
        cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS) {
        printf("no usable GPU: skipped\n");
        return 77;
    }
    if (major != 9 || minor != 0) {
        printf("sm_%d%d has no wgmma: skipped\n", major, minor);
        return 77;
    }
    size_t n = strlen(cuda_prelude()) + sizeof probe_source;
    char *source = malloc(n);
    snprintf(source, n, "%s%s", cuda_prelude(), probe_source);
    nvrtc_image img;
    char *log = NULL;
    if (!nvrtc_compile(source, "sm_90a", &img, &log)) {
        fprintf(stderr, "test_wgmma: %s\n", log);
        return 1;
    }
    /* the mock GPU runs the source compiled for the host, with the shim's wgmma */
    int (*use_source)(const char *, char *, size_t) = (int (*)(const char *, char *, size_t))(uintptr_t)dlsym(lib, "mock_cuda_use_source");
    char err[256];
    setenv("NETC_MOCK_WGMMA", "1", 1);
    if (use_source && use_source(source, err, sizeof err) != 0) {
        fprintf(stderr, "test_wgmma: %s\n", err);
        return 1;
    }
    /* small integers times powers of two: every product and sum exact in f32 */
    static uint16_t a[64 * 16], tile[64 * 128];
    static float out[4 * 64 * 128];
    static double want[4][64 * 128];
    uint32_t x = 12345;
    for (int i = 0; i < 64 * 16; i++) x = x * 1103515245u + 12345u, a[i] = nc_f32_to_bf16_bits((float)((int)(x >> 16) % 17 - 8) / 8.0f);
    for (int i = 0; i < 64 * 128; i++) x = x * 1103515245u + 12345u, tile[i] = nc_f32_to_bf16_bits((float)((int)(x >> 16) % 33 - 16) / 4.0f);
    for (int m = 0; m < 64; m++)
        for (int c = 0; c < 128; c++)
            for (int k = 0; k < 16; k++) {
                double am = nc_bf16_bits_to_f32(a[m * 16 + k]);
                if (c < 64) {   /* K-major: B[k][c] = tile[c][16 + k], then tile[c][80 + k] */
                    want[0][m * 128 + c] += am * nc_bf16_bits_to_f32(tile[c * 128 + 16 + k]);
                    want[1][m * 128 + c] += am * nc_bf16_bits_to_f32(tile[c * 128 + 80 + k]);
                    want[2][m * 128 + c] += am * nc_bf16_bits_to_f32(tile[(16 + k) * 128 + c]);   /* N-major: B[k][c] = tile[16 + k][c] */
                }
                want[3][m * 128 + c] += am * nc_bf16_bits_to_f32(tile[(16 + k) * 128 + c]);
            }
    int rc = run_probe(img.data, a, tile, out);
    free(img.data);
    free(source);
    if (rc) return 1;
    int bad = compare("K-major (the tile's rows transposed, descriptor + 32 bytes)", out, want[0], 64) +
              compare("K-major, second half (descriptor + 8 KiB + 32 bytes)", out + 8192, want[1], 64) +
              compare("N-major (the tile's rows, descriptor + 2048 bytes)", out + 2 * 8192, want[2], 64) +
              compare("N-major, 128 columns (the halves by the leading byte offset)", out + 3 * 8192, want[3], 128);
    if (bad) return 1;
    printf("test_wgmma: wgmma m64n64k16 and m64n128k16 from a swizzled tile, K-major and N-major, agree on all 24576 elements\n");
    return 0;
}
