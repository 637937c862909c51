/* mock_cublaslt.c - a cuBLASLt for a machine without a GPU, built as
 * libcublasLt.so.13 for the tests (runtime/gpu.c opens it with dlopen), on
 * top of the mock driver (mock_cuda.h): "device" memory is host memory and
 * work queued on a stream runs at once or at each launch of a captured graph.
 *
 * The point is to behave like the real library, so that a wrong call from
 * runtime/gpu.c shows on the CPU as wrong numbers or a refused call rather
 * than on a GPU. What is modelled, and the cuBLAS documentation it follows
 * (docs.nvidia.com/cuda/cublas, CUDA 13: the cuBLASLt API sections):
 *
 * - D = epilogue(alpha op(A) op(B) + beta C), column-major (CUBLASLT_ORDER_COL,
 *   the default; any other order, planar complex or a batch mode other than
 *   strided is refused as not modelled). A layout describes the matrix as
 *   stored, before op(). "C == D and Cdesc == Ddesc" (in place) or C != D with
 *   the same type, rows, columns and batch size; "the leading dimension of C
 *   can be 0 to achieve row or column broadcast". LD "must be large enough so
 *   that matrix memory locations are not overlapping (e.g. greater or equal to
 *   ROWS)" and "only non-negative values are supported"; rows and columns are
 *   "normally only values that can be expressed as int32_t".
 * - Strided batches: BATCH_COUNT (int32) and STRIDED_BATCH_OFFSET (int64, in
 *   elements, 0 = the same matrix for every batch). "Batch count must be equal
 *   for all the matrices" (an NVIDIA cuBLAS engineer, CUDALibrarySamples
 *   issue 185; the heuristic logs "Input matrices batch counts mismatch" and
 *   returns CUBLAS_STATUS_INVALID_VALUE).
 * - Types, from the cublasLtMatmul() table for CUBLAS_COMPUTE_32F(_PEDANTIC)
 *   with scale type CUDA_R_32F: A/B 16BF -> C/D 16BF or 32F, A/B 16F -> 16F or
 *   32F, A/B 32F -> 32F (8-bit integer and complex types are not modelled).
 *   Anything else: CUBLAS_STATUS_NOT_SUPPORTED from the heuristic (with no
 *   algorithm found) and from cublasLtMatmul. Operands are widened to float
 *   and accumulated in float (the compute type), scaled in float (the scale
 *   type), and D is rounded to its type to nearest even (NaN stays NaN).
 * - Epilogues DEFAULT, RELU, BIAS, RELU_BIAS, GELU, GELU_BIAS, GELU_AUX,
 *   GELU_AUX_BIAS, DGELU, DGELU_BGRAD; the others are refused as not
 *   modelled. DGELU_BGRAD "Store[s] GELU gradient in the output matrix, and
 *   Bias gradient in the auxiliary output (see CUBLASLT_MATMUL_DESC_BIAS_
 *   POINTER)", a vector over D's rows like the bias, in D's type: here the
 *   sum of each row of D as stored (where the library rounds is not
 *   documented; a GPU may differ in the last bits). NETC_MOCK_CUBLASLT_REFUSE,
 *   a comma-separated list of epilogue numbers, makes the heuristic find no
 *   algorithm for them (as a library without such a kernel would), so tests
 *   reach the fallbacks. The bias
 *   "vector length must match matrix D rows", is "broadcast to all columns and
 *   added before applying the final postprocessing"; BIAS_DATA_TYPE: "If unset
 *   (or set to the default value of -1), the bias vector elements are the same
 *   type as the elements of the output matrix (Dtype)" (the table's Bias Type
 *   column agrees: 32F for 16BF/16F inputs with a 32F output). GELU is "approx-
 *   imated by 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))". GELU_AUX "outputs
 *   GELU input as a separate matrix" (after the bias) and DGELU "Appl[ies] GELU
 *   gradient to matmul output" reading that matrix: D = (alpha AB + beta C)
 *   gelu'(aux). The aux type: "If unset (or set to the default value of -1),
 *   the data type is set to be the output matrix element data type"; setting it
 *   otherwise "for an unsupported ... combination, calling cublasLtMatmul() will
 *   return CUBLAS_INVALID_VALUE". EPILOGUE_AUX_LD for GELU: "Must be divisible
 *   by 8 and be no less than the number of rows in the output matrix";
 *   EPILOGUE_AUX_BATCH_STRIDE: "Must be divisible by 8"; BIAS_BATCH_STRIDE
 *   defaults to 0 (the same vector for every batch).
 * - beta == 0: C is not read (it may hold NaN).
 * - Alignment: the heuristic's preference MIN_ALIGNMENT_{A,B,C,D}_BYTES
 *   "Default is 256 bytes", and "Selecting a smaller value will exclude
 *   algorithms that can not work with" less aligned matrices: the algorithm it
 *   returns may assume them, and cublasLtMatmul with less aligned pointers
 *   fails with CUBLAS_STATUS_NOT_SUPPORTED (PyTorch pull requests 92201, 97205,
 *   98975). The bias and aux pointers: "cublasLtMatmulAlgoGetHeuristic() depend
 *   [sic] on its value to determine expected pointer alignment", so the
 *   alignment they had at the heuristic (up to 16 bytes, PyTorch 194497) is
 *   required of them at cublasLtMatmul. Every pointer must be aligned to its
 *   element (our rule); "The workspace pointer must be aligned to at least a
 *   multiple of 256 bytes".
 * - Every byte a call will touch (A, B, C, D over all batches and leading
 *   dimensions, the bias and aux, the workspace) must lie in one device
 *   allocation, or the call fails with CUBLAS_STATUS_INVALID_VALUE and says on
 *   stderr what is out of range.
 * - Our own refusals, where the real library would compute garbage or where
 *   we cannot tell whether it refuses (a false alarm here is cheaper than a
 *   surprise on a GPU): zero-sized dimensions; negative batch strides; D, or an
 *   aux output, with batch stride 0 over several batches; an output that
 *   overlaps an input (other than D == C in place); a NULL bias or aux pointer
 *   at the heuristic; an algorithm used with other types, transposes or
 *   epilogue than it was found for; attributes that would change the result
 *   and are not modelled (scale pointers and modes, device pointer modes,
 *   fast (reduced precision) compute types, emulation, TRANSC, FILL_MODE).
 *   Attributes that cannot change the result (SM count, waves count, fast
 *   accumulation outside FP8, reduction scheme mask, implementation mask) are
 *   accepted and ignored. An attribute set with the wrong size is refused, as
 *   the real library does ("sizeInBytes doesn't match size of internal storage
 *   for selected attribute").
 * - cublasLtMatmul snapshots what it needs (pointers, shapes, types, epilogue,
 *   alpha and beta read at the call: host pointer mode) and queues the product
 *   with mock_cuda_enqueue, so that a captured graph computes it at each launch.
 * - Handles and descriptors still alive at exit are reported and the process
 *   exits 3, as the mock driver does for its objects. */
#include "mock_cuda.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"   /* cublasLt.h: cublasLtLoggerForceDisable() */
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MLT_SUCCESS CUBLAS_STATUS_SUCCESS
#define MLT_INVALID CUBLAS_STATUS_INVALID_VALUE
#define MLT_UNSUPPORTED CUBLAS_STATUS_NOT_SUPPORTED
#define MLT_TRY(call)                                 \
    do {                                              \
        cublasStatus_t st_ = (call);                  \
        if (st_ != CUBLAS_STATUS_SUCCESS) return st_; \
    } while (0)

enum { MLT_HANDLE, MLT_DESC, MLT_LAYOUT, MLT_PREF, MLT_KINDS };
static const uint32_t mlt_magic[MLT_KINDS] = {0x4c54484eu, 0x4c544453u, 0x4c544c59u, 0x4c545052u};
static const char *const mlt_kind_name[MLT_KINDS] = {"handles", "matmul descriptors", "matrix layouts", "preferences"};
static atomic_long mlt_live[MLT_KINDS];

#define MLT_ALGO_TAG 0x316f676c41746c6dULL   /* "mltAlgo1": an algorithm our heuristic made */
enum { MLT_AUX = 128 };                      /* the epilogue bit of the modes with an aux matrix */
enum { MLT_BGRAD = 16 };                     /* the epilogue bit of DGELU_BGRAD: the bias gradient stored */
enum { MLT_MAX_ALIGN = 256, MLT_MAX_VEC_ALIGN = 16, MLT_WORKSPACE_ALIGN = 256 };

struct cublasLtContext { uint32_t magic; };

typedef struct mlt_layout {
    uint32_t magic;
    uint32_t type;                 /* cudaDataType_t */
    int32_t order, batch, mode;
    uint64_t rows, cols;
    int64_t ld, stride, plane;
} mlt_layout;

typedef struct mlt_desc {
    uint32_t magic;
    int32_t compute, scale, pointer_mode, transa, transb, transc, fill;
    uint32_t epilogue;
    const void *bias, *aux;
    int64_t bias_stride, aux_ld, aux_stride, alpha_stride;
    int32_t sm_count, aux_type, bias_type;
    int8_t fast_accum;
    const void *scale_ptr[8];      /* A, B, C, D scales, amax D, aux scale, aux amax, D out scale: FP8 only */
    int32_t scale_mode[6];         /* A, B, C, D, aux, D out */
    const void *emulation;
} mlt_desc;

typedef struct mlt_pref {
    uint32_t magic;
    uint32_t search, reduction, align[4];
    uint64_t workspace, impl;
    float waves;
} mlt_pref;

/* A problem that passed the checks, as the heuristic and cublasLtMatmul see it. */
typedef struct mlt_problem {
    const mlt_desc *desc;
    const mlt_layout *a, *b, *c, *d;
    bool ta, tb;
    int64_t m, n, k;
    int32_t batch;
    uint32_t epilogue;
} mlt_problem;

/* A matrix (or vector) in device memory, as the product reads or writes it. */
typedef struct mlt_extent {
    const void *p;
    uint32_t type;
    int64_t rows, cols, ld, stride;
} mlt_extent;

/* What cublasLtMatmul hands the stream: everything, by value. */
typedef struct mlt_run {
    mlt_extent a, b, c, d, bias, aux;
    int64_t m, n, k;
    int32_t batch;
    bool ta, tb;
    uint32_t epilogue;
    float alpha, beta;
} mlt_run;

/* What an algorithm from our heuristic requires of the call. */
typedef struct mlt_algo_req {
    uint32_t align[4];             /* A, B, C, D */
    uint32_t bias_align, aux_align;
    uint64_t workspace;
} mlt_algo_req;

static void mlt_complain(const char *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mlt_complain(const char *fn, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mock cublasLt: %s: ", fn);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

__attribute__((destructor)) static void mlt_exit_report(void)
{
    bool leaked = false;
    for (int i = 0; i < MLT_KINDS; i++)
        if (atomic_load(&mlt_live[i])) {
            fprintf(stderr, "mock cublasLt: at exit: %ld %s were never destroyed\n", atomic_load(&mlt_live[i]), mlt_kind_name[i]);
            leaked = true;
        }
    if (leaked) _exit(3);
}

/* ---- numbers ------------------------------------------------------------ */

static uint32_t mlt_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float mlt_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t mlt_f32_to_bf16(float f)
{
    uint32_t x = mlt_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);   /* NaN: quiet, never Inf */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* f32 below the smallest normal f16: the f16 subnormal, rounded to nearest even. */
static uint16_t mlt_f16_subnormal(uint32_t ax)
{
    if (ax < 0x33000000u) return 0;   /* below 2^-25: rounds to 0 (2^-25 itself is a tie to 0) */
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return (uint16_t)(r + (rem > half || (rem == half && (r & 1u))));
}

static uint16_t mlt_f32_to_f16(float f)
{
    uint32_t x = mlt_f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);   /* from 65520 up: Inf */
    if (ax < 0x38800000u) return (uint16_t)(sign | mlt_f16_subnormal(ax));
    uint32_t r = (ax - 0x38000000u) >> 13, rem = ax & 0x1fffu;
    return (uint16_t)(sign | (r + (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))));
}

static float mlt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return mlt_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e) return mlt_bits_f32(sign | ((e + 112) << 23) | (m << 13));
    float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
}

static size_t mlt_elem_bytes(uint32_t type)
{
    return type == CUDA_R_32F ? 4 : type == CUDA_R_16F || type == CUDA_R_16BF ? 2 : 0;
}

static const char *mlt_type_name(uint32_t type)
{
    switch (type) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    default: return "a type not modelled";
    }
}

static float mlt_load(const void *base, uint32_t type, int64_t idx)
{
    const unsigned char *p = base;
    if (type == CUDA_R_32F) {
        float f;
        memcpy(&f, p + idx * 4, sizeof f);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + idx * 2, sizeof h);
    return type == CUDA_R_16BF ? mlt_bits_f32((uint32_t)h << 16) : mlt_f16_to_f32(h);
}

static void mlt_store(const void *base, uint32_t type, int64_t idx, float v)
{
    unsigned char *p = (unsigned char *)(uintptr_t)base;
    if (type == CUDA_R_32F) {
        memcpy(p + idx * 4, &v, sizeof v);
        return;
    }
    uint16_t h = type == CUDA_R_16BF ? mlt_f32_to_bf16(v) : mlt_f32_to_f16(v);
    memcpy(p + idx * 2, &h, sizeof h);
}

static int64_t mlt_index(const mlt_extent *x, int64_t batch, int64_t row, int64_t col)
{
    return batch * x->stride + row + col * x->ld;
}

static double mlt_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double mlt_dgelu(double x)
{
    const double c = 0.7978845608028654;
    double t = tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

/* ---- the product, on the stream ----------------------------------------- */

/* out[i * K + l] = op(X)(i, l) for batch bi: X(l, i) when swapped. */
static void mlt_gather(const mlt_extent *x, int64_t bi, bool swap, int64_t R, int64_t K, float *out)
{
    for (int64_t i = 0; i < R; i++)
        for (int64_t l = 0; l < K; l++)
            out[i * K + l] = mlt_load(x->p, x->type, swap ? mlt_index(x, bi, l, i) : mlt_index(x, bi, i, l));
}

/* In float, as CUBLAS_COMPUTE_32F does, in eight running sums (an order of
 * our own: the GPU's differs, and in every kernel): vectorisable. */
static double mlt_dot(const float *a, const float *b, int64_t k)
{
    float s[8] = {0};
    int64_t l = 0;
    for (; l + 8 <= k; l += 8)
        for (int u = 0; u < 8; u++) s[u] += a[l + u] * b[l + u];
    for (; l < k; l++) s[l % 8] += a[l] * b[l];
    return (double)(((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7])));
}

static void mlt_finish(const mlt_run *r, int64_t bi, int64_t i, int64_t j, double acc)
{
    uint32_t e = r->epilogue;
    float x = r->alpha * (float)acc;
    if (r->beta != 0.0f) x += r->beta * mlt_load(r->c.p, r->c.type, mlt_index(&r->c, bi, i, j));
    if (e & CUBLASLT_EPILOGUE_BIAS) x += mlt_load(r->bias.p, r->bias.type, bi * r->bias.stride + i);
    if ((e & ~(uint32_t)MLT_BGRAD) == CUBLASLT_EPILOGUE_DGELU) {
        x = (float)(x * mlt_dgelu(mlt_load(r->aux.p, r->aux.type, mlt_index(&r->aux, bi, i, j))));
    } else {
        if (e & MLT_AUX) mlt_store(r->aux.p, r->aux.type, mlt_index(&r->aux, bi, i, j), x);
        if (e & CUBLASLT_EPILOGUE_GELU) x = (float)mlt_gelu(x);
        if ((e & CUBLASLT_EPILOGUE_RELU) && x < 0.0f) x = 0.0f;   /* NaN stays NaN */
    }
    mlt_store(r->d.p, r->d.type, mlt_index(&r->d, bi, i, j), x);
}

/* Columns [j0, j1) of one batch's D: every element stands alone, so
 * threads sharing the columns give the same bits as one thread. */
typedef struct mlt_part {
    const mlt_run *r;
    const float *pa, *pb;
    int64_t bi, j0, j1;
} mlt_part;

static void *mlt_columns(void *arg)
{
    const mlt_part *t = arg;
    const mlt_run *r = t->r;
    for (int64_t j = t->j0; j < t->j1; j++)
        for (int64_t i = 0; i < r->m; i++) mlt_finish(r, t->bi, i, j, mlt_dot(t->pa + i * r->k, t->pb + j * r->k, r->k));
    return NULL;
}

/* The columns over the machine's cores, when the product is worth it. */
static void mlt_batch(const mlt_run *r, int64_t bi, const float *pa, const float *pb)
{
    enum { MLT_MAX_THREADS = 16 };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double work = (double)r->m * (double)r->n * (double)r->k;
    int nt = work < 4e6 || cores < 2 ? 1 : cores > MLT_MAX_THREADS ? MLT_MAX_THREADS : (int)cores;
    if (nt > r->n) nt = (int)r->n;
    mlt_part part[MLT_MAX_THREADS];
    pthread_t tid[MLT_MAX_THREADS];
    bool started[MLT_MAX_THREADS] = {false};
    for (int t = 0; t < nt; t++) {
        part[t] = (mlt_part){r, pa, pb, bi, r->n * t / nt, r->n * (t + 1) / nt};
        started[t] = t > 0 && pthread_create(&tid[t], NULL, mlt_columns, &part[t]) == 0;
    }
    for (int t = 1; t < nt; t++)
        if (!started[t]) mlt_columns(&part[t]);   /* no thread to be had: this one does it */
    mlt_columns(&part[0]);
    for (int t = 1; t < nt; t++)
        if (started[t]) pthread_join(tid[t], NULL);
}

/* DGELU_BGRAD's bias gradient: each row of D summed (in double, over the
 * values as stored) into the bias vector, in D's type. */
static void mlt_row_sums(const mlt_run *r, int64_t bi)
{
    for (int64_t i = 0; i < r->m; i++) {
        double sum = 0;
        for (int64_t j = 0; j < r->n; j++) sum += mlt_load(r->d.p, r->d.type, mlt_index(&r->d, bi, i, j));
        mlt_store(r->bias.p, r->bias.type, bi * r->bias.stride + i, (float)sum);
    }
}

static void mlt_compute(void *ctx)
{
    const mlt_run *r = ctx;
    float *pa = malloc((size_t)(r->m * r->k) * sizeof *pa), *pb = malloc((size_t)(r->n * r->k) * sizeof *pb);
    if (!pa || !pb) {
        mlt_complain("cublasLtMatmul", "out of host memory for a %lldx%lldx%lld product", (long long)r->m, (long long)r->n,
                     (long long)r->k);
        abort();
    }
    for (int64_t bi = 0; bi < r->batch; bi++) {
        mlt_gather(&r->a, bi, r->ta, r->m, r->k, pa);
        mlt_gather(&r->b, bi, !r->tb, r->n, r->k, pb);
        mlt_batch(r, bi, pa, pb);
        if (r->epilogue & MLT_BGRAD) mlt_row_sums(r, bi);
    }
    free(pa);
    free(pb);
}

/* ---- handles and descriptors -------------------------------------------- */

static void *mlt_new(int kind, size_t bytes)
{
    uint32_t *obj = calloc(1, bytes);
    if (!obj) return NULL;
    *obj = mlt_magic[kind];
    atomic_fetch_add(&mlt_live[kind], 1);
    return obj;
}

static bool mlt_is(const void *obj, int kind)
{
    uint32_t magic;
    if (!obj) return false;
    memcpy(&magic, obj, sizeof magic);
    return magic == mlt_magic[kind];
}

/* NULL is accepted, as free() does; anything not ours is refused. */
static cublasStatus_t mlt_delete(void *obj, int kind, const char *fn)
{
    if (!obj) return MLT_SUCCESS;
    if (!mlt_is(obj, kind)) {
        mlt_complain(fn, "%p is not one of our %s (destroyed twice?)", obj, mlt_kind_name[kind]);
        return MLT_INVALID;
    }
    *(uint32_t *)obj = 0;
    atomic_fetch_sub(&mlt_live[kind], 1);
    free(obj);
    return MLT_SUCCESS;
}

static cublasStatus_t mlt_check_handle(const char *fn, cublasLtHandle_t h)
{
    if (mlt_is(h, MLT_HANDLE)) return MLT_SUCCESS;
    mlt_complain(fn, "the handle %p is not one cublasLtCreate made", (void *)h);
    return CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    if (mock_cuda_fault("cublasLtCreate")) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!lightHandle) return MLT_INVALID;
    *lightHandle = mlt_new(MLT_HANDLE, sizeof(struct cublasLtContext));
    return *lightHandle ? MLT_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
    return mlt_delete(lightHandle, MLT_HANDLE, "cublasLtDestroy");
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType)
{
    if (mock_cuda_fault("cublasLtMatmulDescCreate")) return CUBLAS_STATUS_ALLOC_FAILED;
    if (!matmulDesc) return MLT_INVALID;
    mlt_desc *d = mlt_new(MLT_DESC, sizeof *d);
    if (!d) return CUBLAS_STATUS_ALLOC_FAILED;
    d->compute = (int32_t)computeType;
    d->scale = (int32_t)scaleType;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->transa = d->transb = d->transc = CUBLAS_OP_N;
    d->fill = CUBLAS_FILL_MODE_FULL;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->aux_type = d->bias_type = -1;
    *matmulDesc = (cublasLtMatmulDesc_t)(void *)d;
    return MLT_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    return mlt_delete(matmulDesc, MLT_DESC, "cublasLtMatmulDescDestroy");
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld)
{
    if (mock_cuda_fault("cublasLtMatrixLayoutCreate")) return CUBLAS_STATUS_ALLOC_FAILED;
    if (!matLayout) return MLT_INVALID;
    mlt_layout *l = mlt_new(MLT_LAYOUT, sizeof *l);
    if (!l) return CUBLAS_STATUS_ALLOC_FAILED;
    l->type = (uint32_t)type;
    l->order = CUBLASLT_ORDER_COL;
    l->batch = 1;
    l->mode = CUBLASLT_BATCH_MODE_STRIDED;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    *matLayout = (cublasLtMatrixLayout_t)(void *)l;
    return MLT_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    return mlt_delete(matLayout, MLT_LAYOUT, "cublasLtMatrixLayoutDestroy");
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (mock_cuda_fault("cublasLtMatmulPreferenceCreate")) return CUBLAS_STATUS_ALLOC_FAILED;
    if (!pref) return MLT_INVALID;
    mlt_pref *p = mlt_new(MLT_PREF, sizeof *p);
    if (!p) return CUBLAS_STATUS_ALLOC_FAILED;
    p->search = CUBLASLT_SEARCH_BEST_FIT;
    p->reduction = CUBLASLT_REDUCTION_SCHEME_MASK;
    for (int i = 0; i < 4; i++) p->align[i] = MLT_MAX_ALIGN;
    p->impl = UINT64_MAX;
    *pref = (cublasLtMatmulPreference_t)(void *)p;
    return MLT_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    return mlt_delete(pref, MLT_PREF, "cublasLtMatmulPreferenceDestroy");
}

/* ---- attributes ----------------------------------------------------------- */

/* Copies an attribute's value, refusing a size other than its own. */
static cublasStatus_t mlt_put(const char *fn, int attr, void *field, size_t want, const void *buf, size_t size)
{
    if (!field) {
        mlt_complain(fn, "attribute %d is not one we know", attr);
        return MLT_INVALID;
    }
    if (!buf || size != want) {
        mlt_complain(fn, "attribute %d: %zu bytes at %p, where its value is %zu bytes", attr, size, buf, want);
        return MLT_INVALID;
    }
    memcpy(field, buf, want);
    return MLT_SUCCESS;
}

#define MLT_FIELD(attr, f) \
    case attr: *bytes = sizeof x->f; return &x->f

static void *mlt_layout_field(mlt_layout *x, cublasLtMatrixLayoutAttribute_t attr, size_t *bytes)
{
    switch (attr) {
    MLT_FIELD(CUBLASLT_MATRIX_LAYOUT_TYPE, type);
    MLT_FIELD(CUBLASLT_MATRIX_LAYOUT_ORDER, order);
    MLT_FIELD(CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
    MLT_FIELD(CUBLASLT_MATRIX_LAYOUT_COLS, cols);
    MLT_FIELD(CUBLASLT_MATRIX_LAYOUT_LD, ld);
    MLT_FIELD(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch);
    MLT_FIELD(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
    MLT_FIELD(CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, plane);
    MLT_FIELD(CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, mode);
    default: return NULL;
    }
}

static void *mlt_desc_scale_field(mlt_desc *x, cublasLtMatmulDescAttributes_t attr, size_t *bytes)
{
    switch (attr) {
    MLT_FIELD(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scale_ptr[0]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scale_ptr[1]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, scale_ptr[2]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, scale_ptr[3]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, scale_ptr[4]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER, scale_ptr[5]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, scale_ptr[6]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, scale_ptr[7]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, scale_mode[0]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, scale_mode[1]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_C_SCALE_MODE, scale_mode[2]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_D_SCALE_MODE, scale_mode[3]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE, scale_mode[4]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE, scale_mode[5]);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, emulation);
    default: return NULL;
    }
}

static void *mlt_desc_field(mlt_desc *x, cublasLtMatmulDescAttributes_t attr, size_t *bytes)
{
    switch (attr) {
    MLT_FIELD(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, compute);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_POINTER_MODE, pointer_mode);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_TRANSA, transa);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_TRANSB, transb);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_TRANSC, transc);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_FILL_MODE, fill);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, bias_stride);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, aux_stride);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, alpha_stride);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, sm_count);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, aux_type);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast_accum);
    MLT_FIELD(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
    default: return mlt_desc_scale_field(x, attr, bytes);
    }
}

static void *mlt_pref_field(mlt_pref *x, cublasLtMatmulPreferenceAttributes_t attr, size_t *bytes)
{
    switch (attr) {
    MLT_FIELD(CUBLASLT_MATMUL_PREF_SEARCH_MODE, search);
    MLT_FIELD(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace);
    MLT_FIELD(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reduction);
    MLT_FIELD(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]);
    MLT_FIELD(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]);
    MLT_FIELD(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]);
    MLT_FIELD(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[3]);
    MLT_FIELD(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, waves);
    MLT_FIELD(CUBLASLT_MATMUL_PREF_IMPL_MASK, impl);
    default: return NULL;
    }
}
#undef MLT_FIELD

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes)
{
    const char *fn = "cublasLtMatrixLayoutSetAttribute";
    if (!mlt_is(matLayout, MLT_LAYOUT)) return MLT_INVALID;
    size_t want = 0;
    void *field = mlt_layout_field((mlt_layout *)(void *)matLayout, attr, &want);
    return mlt_put(fn, (int)attr, field, want, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes)
{
    const char *fn = "cublasLtMatmulDescSetAttribute";
    if (!mlt_is(matmulDesc, MLT_DESC)) return MLT_INVALID;
    size_t want = 0;
    void *field = mlt_desc_field((mlt_desc *)(void *)matmulDesc, attr, &want);
    return mlt_put(fn, (int)attr, field, want, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t sizeInBytes)
{
    const char *fn = "cublasLtMatmulPreferenceSetAttribute";
    if (!mlt_is(pref, MLT_PREF)) return MLT_INVALID;
    size_t want = 0;
    void *field = mlt_pref_field((mlt_pref *)(void *)pref, attr, &want);
    return mlt_put(fn, (int)attr, field, want, buf, sizeInBytes);
}

/* ---- the checks the heuristic and cublasLtMatmul share --------------------- */

/* What would change the result and is not modelled. */
static cublasStatus_t mlt_check_desc(const char *fn, const mlt_desc *d)
{
    if (d->compute != CUBLAS_COMPUTE_32F && d->compute != CUBLAS_COMPUTE_32F_PEDANTIC) {
        mlt_complain(fn, "compute type %d: only CUBLAS_COMPUTE_32F(_PEDANTIC) is modelled", (int)d->compute);
        return MLT_UNSUPPORTED;
    }
    if (d->scale != CUDA_R_32F) {
        mlt_complain(fn, "scale type %d: with CUBLAS_COMPUTE_32F it must be CUDA_R_32F", (int)d->scale);
        return MLT_UNSUPPORTED;
    }
    if (d->pointer_mode != CUBLASLT_POINTER_MODE_HOST || d->transc != CUBLAS_OP_N || d->fill != CUBLAS_FILL_MODE_FULL ||
        d->emulation) {
        mlt_complain(fn, "pointer mode %d, TRANSC %d, fill mode %d, emulation %p: not modelled", (int)d->pointer_mode,
                     (int)d->transc, (int)d->fill, d->emulation);
        return MLT_UNSUPPORTED;
    }
    for (int i = 0; i < 8; i++)
        if (d->scale_ptr[i] || (i < 6 && d->scale_mode[i])) {
            mlt_complain(fn, "a scale or amax attribute is set: FP8 only (\"will return CUBLAS_INVALID_VALUE\")");
            return MLT_INVALID;
        }
    for (int i = 0; i < 2; i++) {
        int32_t t = i ? d->transb : d->transa;
        if (t != CUBLAS_OP_N && t != CUBLAS_OP_T && t != CUBLAS_OP_C) {
            mlt_complain(fn, "TRANS%c %d is no cublasOperation_t", i ? 'B' : 'A', (int)t);
            return MLT_INVALID;
        }
    }
    return MLT_SUCCESS;
}

static cublasStatus_t mlt_check_layout(const char *fn, char name, const mlt_layout *l)
{
    if (!mlt_is(l, MLT_LAYOUT)) {
        mlt_complain(fn, "%cdesc %p is not a matrix layout", name, (const void *)l);
        return MLT_INVALID;
    }
    if (l->order != CUBLASLT_ORDER_COL || l->mode != CUBLASLT_BATCH_MODE_STRIDED || l->plane) {
        mlt_complain(fn, "%c: order %d, batch mode %d, plane offset %lld: only column-major strided real matrices are modelled",
                     name, (int)l->order, (int)l->mode, (long long)l->plane);
        return MLT_UNSUPPORTED;
    }
    if (l->rows == 0 || l->cols == 0 || l->batch < 1 || l->stride < 0) {
        mlt_complain(fn, "%c: %llux%llu, batch %d, stride %lld: refused (empty, or a negative stride)", name,
                     (unsigned long long)l->rows, (unsigned long long)l->cols, (int)l->batch, (long long)l->stride);
        return MLT_INVALID;
    }
    if (l->rows > INT32_MAX || l->cols > INT32_MAX) {
        mlt_complain(fn, "%c: %llux%llu: beyond int32_t", name, (unsigned long long)l->rows, (unsigned long long)l->cols);
        return MLT_UNSUPPORTED;
    }
    bool broadcast = name == 'C' && l->ld == 0;   /* "can be 0 to achieve row or column broadcast" */
    if (!broadcast && (l->ld < 0 || (uint64_t)l->ld < l->rows)) {
        mlt_complain(fn, "%c: leading dimension %lld is less than its %llu rows", name, (long long)l->ld,
                     (unsigned long long)l->rows);
        return MLT_INVALID;
    }
    return MLT_SUCCESS;
}

static bool mlt_types_supported(uint32_t ab, uint32_t cd)
{
    if (ab == CUDA_R_32F) return cd == CUDA_R_32F;
    if (ab == CUDA_R_16F || ab == CUDA_R_16BF) return cd == ab || cd == CUDA_R_32F;
    return false;
}

static cublasStatus_t mlt_check_types(const char *fn, const mlt_problem *p)
{
    uint32_t ab = p->a->type, cd = p->d->type;
    if (p->b->type == ab && p->c->type == cd && mlt_types_supported(ab, cd)) return MLT_SUCCESS;
    mlt_complain(fn, "A %s, B %s, C %s, D %s with CUBLAS_COMPUTE_32F: not in the table of cublasLtMatmul()",
                 mlt_type_name(ab), mlt_type_name(p->b->type), mlt_type_name(p->c->type), mlt_type_name(cd));
    return MLT_UNSUPPORTED;
}

static cublasStatus_t mlt_check_shapes(const char *fn, mlt_problem *p)
{
    const mlt_layout *a = p->a, *b = p->b, *c = p->c, *d = p->d;
    p->ta = p->desc->transa != CUBLAS_OP_N;
    p->tb = p->desc->transb != CUBLAS_OP_N;
    uint64_t am = p->ta ? a->cols : a->rows, ak = p->ta ? a->rows : a->cols;
    uint64_t bk = p->tb ? b->cols : b->rows, bn = p->tb ? b->rows : b->cols;
    if (ak != bk || d->rows != am || d->cols != bn || c->rows != d->rows || c->cols != d->cols) {
        mlt_complain(fn, "op(A) %llux%llu times op(B) %llux%llu into C %llux%llu, D %llux%llu: the shapes disagree",
                     (unsigned long long)am, (unsigned long long)ak, (unsigned long long)bk, (unsigned long long)bn,
                     (unsigned long long)c->rows, (unsigned long long)c->cols, (unsigned long long)d->rows,
                     (unsigned long long)d->cols);
        return MLT_INVALID;
    }
    if (a->batch != d->batch || b->batch != d->batch || c->batch != d->batch) {
        mlt_complain(fn, "batch counts A %d, B %d, C %d, D %d: they must be equal", (int)a->batch, (int)b->batch,
                     (int)c->batch, (int)d->batch);
        return MLT_INVALID;
    }
    if (d->batch > 1 && d->stride == 0) {
        mlt_complain(fn, "D has batch stride 0 over %d batches: every batch would write the same matrix", (int)d->batch);
        return MLT_INVALID;
    }
    p->m = (int64_t)am, p->n = (int64_t)bn, p->k = (int64_t)ak, p->batch = d->batch;
    return MLT_SUCCESS;
}

static bool mlt_epilogue_modelled(uint32_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_RELU: case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS: case CUBLASLT_EPILOGUE_GELU: case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX: case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return true;
    default: return false;
    }
}

/* Whether NETC_MOCK_CUBLASLT_REFUSE lists epilogue e. */
static bool mlt_epilogue_refused(uint32_t e)
{
    const char *list = getenv("NETC_MOCK_CUBLASLT_REFUSE");
    while (list && *list) {
        char *end;
        unsigned long v = strtoul(list, &end, 10);
        if (end == list) return false;
        if (v == e) return true;
        list = *end == ',' ? end + 1 : end;
    }
    return false;
}

static cublasStatus_t mlt_check_bias(const char *fn, const mlt_problem *p)
{
    const mlt_desc *d = p->desc;
    if (!d->bias) {
        mlt_complain(fn, "epilogue %u %s a bias, and CUBLASLT_MATMUL_DESC_BIAS_POINTER is NULL", (unsigned)p->epilogue,
                     p->epilogue & MLT_BGRAD ? "stores the gradient of" : "adds");
        return MLT_INVALID;
    }
    if (d->bias_type != -1 && (uint32_t)d->bias_type != p->d->type) {
        mlt_complain(fn, "bias type %d with D %s: the table of cublasLtMatmul() gives the bias D's type", (int)d->bias_type,
                     mlt_type_name(p->d->type));
        return MLT_UNSUPPORTED;
    }
    if (d->bias_stride < 0) {
        mlt_complain(fn, "bias batch stride %lld: refused", (long long)d->bias_stride);
        return MLT_INVALID;
    }
    return MLT_SUCCESS;
}

static cublasStatus_t mlt_check_aux(const char *fn, const mlt_problem *p)
{
    const mlt_desc *d = p->desc;
    bool writes = (p->epilogue & ~(uint32_t)MLT_BGRAD) != CUBLASLT_EPILOGUE_DGELU;
    if (!d->aux) {
        mlt_complain(fn, "epilogue %u %s an aux matrix, and CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER is NULL",
                     (unsigned)p->epilogue, writes ? "writes" : "reads");
        return MLT_INVALID;
    }
    if (d->aux_ld < p->m || d->aux_ld % 8 != 0) {
        mlt_complain(fn, "EPILOGUE_AUX_LD %lld with %lld rows: \"Must be divisible by 8 and be no less than the number of rows\"",
                     (long long)d->aux_ld, (long long)p->m);
        return MLT_INVALID;
    }
    if (d->aux_type != -1 && (uint32_t)d->aux_type != p->d->type) {
        mlt_complain(fn, "aux type %d with D %s: only the default (D's type) outside FP8", (int)d->aux_type,
                     mlt_type_name(p->d->type));
        return MLT_INVALID;
    }
    if (d->aux_stride < 0 || d->aux_stride % 8 != 0 || (writes && p->batch > 1 && d->aux_stride == 0)) {
        mlt_complain(fn, "EPILOGUE_AUX_BATCH_STRIDE %lld over %d batches: it must be divisible by 8, and not 0 for an output",
                     (long long)d->aux_stride, (int)p->batch);
        return MLT_INVALID;
    }
    return MLT_SUCCESS;
}

static cublasStatus_t mlt_check_epilogue(const char *fn, mlt_problem *p)
{
    p->epilogue = p->desc->epilogue;
    if (!mlt_epilogue_modelled(p->epilogue)) {
        mlt_complain(fn, "epilogue %u is not modelled", (unsigned)p->epilogue);
        return MLT_UNSUPPORTED;
    }
    if (mlt_epilogue_refused(p->epilogue)) return MLT_UNSUPPORTED;   /* quietly: a library without the kernel */
    if (p->epilogue & (CUBLASLT_EPILOGUE_BIAS | MLT_BGRAD)) MLT_TRY(mlt_check_bias(fn, p));
    if (p->epilogue & MLT_AUX) MLT_TRY(mlt_check_aux(fn, p));
    return MLT_SUCCESS;
}

static cublasStatus_t mlt_check_problem(const char *fn, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                                        cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                        mlt_problem *p)
{
    if (!mlt_is(desc, MLT_DESC)) {
        mlt_complain(fn, "the matmul descriptor %p is not one cublasLtMatmulDescCreate made", (void *)desc);
        return MLT_INVALID;
    }
    if (!c) c = d;   /* "If Cdesc is omitted, this function assumes it to be equal to Ddesc" */
    *p = (mlt_problem){.desc = (const mlt_desc *)(void *)desc, .a = (const mlt_layout *)(void *)a,
                       .b = (const mlt_layout *)(void *)b, .c = (const mlt_layout *)(void *)c,
                       .d = (const mlt_layout *)(void *)d};
    MLT_TRY(mlt_check_desc(fn, p->desc));
    MLT_TRY(mlt_check_layout(fn, 'A', p->a));
    MLT_TRY(mlt_check_layout(fn, 'B', p->b));
    MLT_TRY(mlt_check_layout(fn, 'C', p->c));
    MLT_TRY(mlt_check_layout(fn, 'D', p->d));
    MLT_TRY(mlt_check_types(fn, p));
    MLT_TRY(mlt_check_shapes(fn, p));
    return mlt_check_epilogue(fn, p);
}

/* ---- the heuristic and its algorithm -------------------------------------- */

static uint32_t mlt_ptr_align(const void *ptr, uint32_t cap)
{
    uintptr_t a = (uintptr_t)ptr;
    uint32_t align = 1;
    while (align < cap && a % (2u * align) == 0) align *= 2;
    return align;
}

/* What an algorithm was found for: it serves only that. */
static uint64_t mlt_fingerprint(const mlt_problem *p)
{
    return (uint64_t)(p->a->type & 0xff) | (uint64_t)(p->d->type & 0xff) << 8 | (uint64_t)(p->epilogue & 0xffff) << 16 |
           (uint64_t)(p->desc->compute & 0xff) << 32 | (uint64_t)p->ta << 40 | (uint64_t)p->tb << 41;
}

static uint64_t mlt_algo_sum(const cublasLtMatmulAlgo_t *algo)
{
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < 5; i++) h = (h ^ algo->data[i]) * 1099511628211ULL;
    return h;
}

/* The heuristic's candidates differ in the workspace they ask for (none, 1
 * MiB, 4 MiB: what fits the preference's limit), so a caller that tries
 * several must give each the workspace it asked for. */
static const uint64_t mlt_candidate_workspace[] = {0, 1u << 20, 4u << 20};

static void mlt_algo_make(cublasLtMatmulAlgo_t *algo, const mlt_problem *p, const mlt_pref *pref, uint64_t workspace)
{
    memset(algo, 0, sizeof *algo);
    algo->data[0] = MLT_ALGO_TAG;
    algo->data[1] = mlt_fingerprint(p);
    for (int i = 0; i < 4; i++) {
        uint32_t want = pref->align[i] == 0 ? 1 : pref->align[i] > MLT_MAX_ALIGN ? MLT_MAX_ALIGN : pref->align[i];
        algo->data[2] |= (uint64_t)want << (16 * i);
    }
    algo->data[3] = (uint64_t)mlt_ptr_align(p->desc->bias, MLT_MAX_VEC_ALIGN) |
                    (uint64_t)mlt_ptr_align(p->desc->aux, MLT_MAX_VEC_ALIGN) << 16;
    algo->data[4] = workspace;
    algo->data[5] = mlt_algo_sum(algo);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
    const char *fn = "cublasLtMatmulAlgoGetHeuristic";
    if (mock_cuda_fault("cublasLtMatmulAlgoGetHeuristic")) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!returnAlgoCount || !heuristicResultsArray || requestedAlgoCount <= 0) return MLT_INVALID;
    *returnAlgoCount = 0;
    MLT_TRY(mlt_check_handle(fn, lightHandle));
    if (!mlt_is(preference, MLT_PREF)) {
        mlt_complain(fn, "the preference %p is not one cublasLtMatmulPreferenceCreate made", (void *)preference);
        return MLT_INVALID;
    }
    const mlt_pref *pref = (const mlt_pref *)(void *)preference;
    if (pref->search != CUBLASLT_SEARCH_BEST_FIT) {
        mlt_complain(fn, "search mode %u: only CUBLASLT_SEARCH_BEST_FIT is modelled", (unsigned)pref->search);
        return MLT_UNSUPPORTED;
    }
    mlt_problem p;
    MLT_TRY(mlt_check_problem(fn, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p));
    int n = 0;
    for (size_t i = 0; i < sizeof mlt_candidate_workspace / sizeof *mlt_candidate_workspace && n < requestedAlgoCount; i++) {
        if (mlt_candidate_workspace[i] > pref->workspace) continue;
        cublasLtMatmulHeuristicResult_t *r = &heuristicResultsArray[n++];
        memset(r, 0, sizeof *r);
        mlt_algo_make(&r->algo, &p, pref, mlt_candidate_workspace[i]);
        r->workspaceSize = mlt_candidate_workspace[i];
        r->state = MLT_SUCCESS;
        r->wavesCount = 1.0f;
    }
    *returnAlgoCount = n;
    return MLT_SUCCESS;
}

/* NULL: "an implicit heuristics query with default search preferences". */
static cublasStatus_t mlt_check_algo(const char *fn, const cublasLtMatmulAlgo_t *algo, const mlt_problem *p,
                                     mlt_algo_req *req)
{
    if (!algo) {
        *req = (mlt_algo_req){{MLT_MAX_ALIGN, MLT_MAX_ALIGN, MLT_MAX_ALIGN, MLT_MAX_ALIGN},
                              mlt_ptr_align(p->desc->bias, MLT_MAX_VEC_ALIGN), mlt_ptr_align(p->desc->aux, MLT_MAX_VEC_ALIGN), 0};
        return MLT_SUCCESS;
    }
    if (algo->data[0] != MLT_ALGO_TAG || algo->data[5] != mlt_algo_sum(algo)) {
        mlt_complain(fn, "the algorithm is not one cublasLtMatmulAlgoGetHeuristic returned (uninitialised or corrupt)");
        return MLT_INVALID;
    }
    if (algo->data[1] != mlt_fingerprint(p)) {
        mlt_complain(fn, "the algorithm was found for other types, transposes or epilogue than this call's");
        return MLT_INVALID;
    }
    for (int i = 0; i < 4; i++) req->align[i] = (uint32_t)(algo->data[2] >> (16 * i)) & 0xffffu;
    req->bias_align = (uint32_t)algo->data[3] & 0xffffu;
    req->aux_align = (uint32_t)(algo->data[3] >> 16) & 0xffffu;
    req->workspace = algo->data[4];
    return MLT_SUCCESS;
}

/* ---- cublasLtMatmul -------------------------------------------------------- */

static mlt_extent mlt_extent_of(const void *ptr, const mlt_layout *l)
{
    return (mlt_extent){ptr, l->type, (int64_t)l->rows, (int64_t)l->cols, l->ld, l->stride};
}

static mlt_run mlt_snapshot(const mlt_problem *p, float alpha, float beta, const void *A, const void *B, const void *C,
                            void *D)
{
    const mlt_desc *d = p->desc;
    mlt_run r = {.a = mlt_extent_of(A, p->a), .b = mlt_extent_of(B, p->b), .c = mlt_extent_of(C, p->c),
                 .d = mlt_extent_of(D, p->d), .m = p->m, .n = p->n, .k = p->k, .batch = p->batch, .ta = p->ta,
                 .tb = p->tb, .epilogue = p->epilogue, .alpha = alpha, .beta = beta};
    if (p->epilogue & (CUBLASLT_EPILOGUE_BIAS | MLT_BGRAD))
        r.bias = (mlt_extent){d->bias, p->d->type, p->m, 1, p->m, d->bias_stride};
    if (p->epilogue & MLT_AUX) r.aux = (mlt_extent){d->aux, p->d->type, p->m, p->n, d->aux_ld, d->aux_stride};
    return r;
}

/* The bytes an extent spans over batch batches; false when it does not fit in size_t. */
static bool mlt_span(const mlt_extent *x, int32_t batch, size_t *bytes)
{
    uint64_t elems, cols_part, batch_part;
    if (__builtin_mul_overflow((uint64_t)(x->cols - 1), (uint64_t)x->ld, &cols_part) ||
        __builtin_mul_overflow((uint64_t)(batch - 1), (uint64_t)x->stride, &batch_part) ||
        __builtin_add_overflow(cols_part, batch_part, &elems) ||
        __builtin_add_overflow(elems, (uint64_t)x->rows, &elems) ||
        __builtin_mul_overflow(elems, (uint64_t)mlt_elem_bytes(x->type), &elems) || elems > SIZE_MAX)
        return false;
    *bytes = (size_t)elems;
    return true;
}

static cublasStatus_t mlt_check_extent(const char *fn, const char *name, const mlt_extent *x, int32_t batch, uint32_t align)
{
    size_t bytes = 0, elem = mlt_elem_bytes(x->type);
    if (!x->p || (uintptr_t)x->p % elem) {
        mlt_complain(fn, "%s at %p: NULL, or not aligned to its %zu-byte elements", name, x->p, elem);
        return MLT_INVALID;
    }
    if (!mlt_span(x, batch, &bytes) || !mock_cuda_in_device_memory(x->p, bytes)) {
        mlt_complain(fn, "%s [%p, +%zu bytes) (%lldx%lld, ld %lld, %d batches %lld apart, %s) is not inside one device "
                     "allocation", name, x->p, bytes, (long long)x->rows, (long long)x->cols, (long long)x->ld, (int)batch,
                     (long long)x->stride, mlt_type_name(x->type));
        return MLT_INVALID;
    }
    if ((uintptr_t)x->p % align) {
        mlt_complain(fn, "%s at %p is not %u-byte aligned, as the algorithm from the heuristic assumes", name, x->p,
                     (unsigned)align);
        return MLT_UNSUPPORTED;
    }
    return MLT_SUCCESS;
}

static cublasStatus_t mlt_check_workspace(const char *fn, const void *ws, size_t bytes, const mlt_algo_req *req)
{
    if (bytes < req->workspace) {
        mlt_complain(fn, "workspace of %zu bytes, the algorithm needs %llu", bytes, (unsigned long long)req->workspace);
        return MLT_INVALID;
    }
    if (bytes == 0) return MLT_SUCCESS;
    if (!ws || (uintptr_t)ws % MLT_WORKSPACE_ALIGN || !mock_cuda_in_device_memory(ws, bytes)) {
        mlt_complain(fn, "workspace [%p, +%zu bytes): NULL, not 256-byte aligned, or not inside one device allocation", ws,
                     bytes);
        return MLT_INVALID;
    }
    return MLT_SUCCESS;
}

static cublasStatus_t mlt_check_memory(const char *fn, const mlt_run *r, const mlt_algo_req *req)
{
    MLT_TRY(mlt_check_extent(fn, "A", &r->a, r->batch, req->align[0]));
    MLT_TRY(mlt_check_extent(fn, "B", &r->b, r->batch, req->align[1]));
    MLT_TRY(mlt_check_extent(fn, "C", &r->c, r->batch, req->align[2]));
    MLT_TRY(mlt_check_extent(fn, "D", &r->d, r->batch, req->align[3]));
    if (r->epilogue & (CUBLASLT_EPILOGUE_BIAS | MLT_BGRAD))
        MLT_TRY(mlt_check_extent(fn, "the bias", &r->bias, r->batch, req->bias_align));
    if (r->epilogue & MLT_AUX) MLT_TRY(mlt_check_extent(fn, "the aux matrix", &r->aux, r->batch, req->aux_align));
    return MLT_SUCCESS;
}

static bool mlt_overlap(const mlt_extent *x, const mlt_extent *y, int32_t batch)
{
    size_t xb = 0, yb = 0;
    mlt_span(x, batch, &xb);
    mlt_span(y, batch, &yb);
    uintptr_t xl = (uintptr_t)x->p, yl = (uintptr_t)y->p;
    return xl < yl + yb && yl < xl + xb;
}

static bool mlt_same_matrix(const mlt_extent *x, const mlt_extent *y)
{
    return x->p == y->p && x->type == y->type && x->rows == y->rows && x->cols == y->cols && x->ld == y->ld &&
           x->stride == y->stride;
}

/* An output written over an input would be read half-updated on a GPU;
 * only D == C, the same matrix, is the documented in-place product. */
static cublasStatus_t mlt_check_overlaps(const char *fn, const mlt_run *r)
{
    bool dgelu = (r->epilogue & ~(uint32_t)MLT_BGRAD) == CUBLASLT_EPILOGUE_DGELU;
    bool aux_out = (r->epilogue & MLT_AUX) && !dgelu, bgrad = r->epilogue & MLT_BGRAD;
    const mlt_extent *in[] = {&r->a, &r->b, r->beta != 0.0f ? &r->c : NULL,
                              r->epilogue & CUBLASLT_EPILOGUE_BIAS ? &r->bias : NULL,
                              dgelu ? &r->aux : NULL, aux_out || bgrad ? &r->d : NULL};
    const char *in_name[] = {"A", "B", "C", "the bias", "the aux matrix", "D"};
    const mlt_extent *out[] = {&r->d, aux_out ? &r->aux : NULL, bgrad ? &r->bias : NULL};
    const char *out_name[] = {"D", "the aux output", "the bias gradient"};
    if (r->c.p == r->d.p && !mlt_same_matrix(&r->c, &r->d)) {
        mlt_complain(fn, "C and D start at the same address with different layouts: in place needs Cdesc == Ddesc");
        return MLT_INVALID;
    }
    for (int o = 0; o < 3; o++)
        for (int i = 0; i < 6; i++) {
            if (!out[o] || !in[i] || out[o] == in[i] || (o == 0 && i == 2 && mlt_same_matrix(&r->c, &r->d))) continue;
            if (!mlt_overlap(out[o], in[i], r->batch)) continue;
            mlt_complain(fn, "%s overlaps %s", out_name[o], in_name[i]);
            return MLT_INVALID;
        }
    return MLT_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
                              const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream)
{
    const char *fn = "cublasLtMatmul";
    if (mock_cuda_fault("cublasLtMatmul")) return CUBLAS_STATUS_EXECUTION_FAILED;
    MLT_TRY(mlt_check_handle(fn, lightHandle));
    mlt_problem p;
    mlt_algo_req req;
    MLT_TRY(mlt_check_problem(fn, computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p));
    MLT_TRY(mlt_check_algo(fn, algo, &p, &req));
    if (!alpha || !beta) {
        mlt_complain(fn, "alpha %p, beta %p: host pointers to floats expected", alpha, beta);
        return MLT_INVALID;
    }
    float a, b;   /* host pointer mode: read now, as the real library does */
    memcpy(&a, alpha, sizeof a);
    memcpy(&b, beta, sizeof b);
    mlt_run r = mlt_snapshot(&p, a, b, A, B, C, D);
    MLT_TRY(mlt_check_memory(fn, &r, &req));
    MLT_TRY(mlt_check_workspace(fn, workspace, workspaceSizeInBytes, &req));
    MLT_TRY(mlt_check_overlaps(fn, &r));
    CUresult rc = mock_cuda_enqueue((CUstream)stream, mlt_compute, &r, sizeof r);
    if (rc == CUDA_SUCCESS) return MLT_SUCCESS;
    mlt_complain(fn, "the stream refused the work (CUresult %d)", (int)rc);
    return CUBLAS_STATUS_EXECUTION_FAILED;
}
